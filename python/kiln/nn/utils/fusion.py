"""kiln.nn.utils.fusion: PyTorch's folding of an eval-mode BatchNorm into the convolution or Linear
before it, for inference.

    conv, bn = conv.eval(), bn.eval()
    fused = kiln.nn.utils.fusion.fuse_conv_bn_eval(conv, bn)     # fused(x) equals bn(conv(x))

- ``fuse_conv_bn_eval(conv, bn, transpose=False)``: a new convolution, a deep copy of ``conv``
  whose weight and bias are ``fuse_conv_bn_weights``' (it gains a bias if it had none). Pass
  ``transpose=True`` for a transposed convolution, whose weight holds the output channels in
  dim 1 (PyTorch's flag; with groups=1, as PyTorch's formula assumes).
- ``fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False)``
  -> ``(weight, bias)``, new Parameters: weight = conv_w * bn_w / sqrt(bn_rv + bn_eps) per output
  channel, bias = (conv_b - bn_rm) / sqrt(bn_rv + bn_eps) * bn_w + bn_b.
- ``fuse_linear_bn_eval(linear, bn)``: the same for a Linear (a Dense without activation)
  followed by a BatchNorm of ``out_features`` features, or of one, which broadcasts.
- ``fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b)`` ->
  ``(weight, bias)``: weight = linear_w * (bn_w / sqrt(bn_rv + bn_eps))[:, None], bias =
  (linear_b - bn_rm) * bn_w / sqrt(bn_rv + bn_eps) + bn_b.

The formulas and their order of operations are PyTorch's. A None ``conv_b`` / ``linear_b`` counts
as zeros, a None ``bn_w`` as ones and ``bn_b`` as zeros (a BatchNorm without ``affine``, which
PyTorch's linear fusion does not take). The fused weight and bias have the dtypes of the given
weight and bias (the weight's without a bias), and each Parameter requires grad as the given
weight / bias does (a fused bias made without one does not, as in PyTorch). They are computed
under no_grad: the Parameters are new leaves.

PyTorch's AssertionErrors are Kiln's typed errors: a cell in training mode and a BatchNorm
without running statistics are KilnValueErrors, a BatchNorm whose features are not the
convolution's output channels (the Linear's out_features, or 1) a ShapeError; cells of other
kinds and arguments that are no tensors are KilnTypeErrors.
"""

import copy

from ... import _C
from ...autograd import no_grad
from ...errors import KilnTypeError, KilnValueError, ShapeError
from ...mint._composite import check_real
from .._layer_arguments import checked_tensor
from ..conv import _Conv
from ..linear import Linear
from ..normalization import _BatchNorm
from ..parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights"]

_mint = _C.mint


def _check_cells(owner, layer, kind, what, bn):
    """Checks the cells a fusion takes: ``layer`` of class ``kind`` (``what`` names it), ``bn`` a
    BatchNorm with running statistics, both in eval mode."""
    if not isinstance(layer, kind):
        raise KilnTypeError(f"{owner}: expected {what}, got {type(layer).__name__}")
    if not isinstance(bn, _BatchNorm):
        raise KilnTypeError(f"{owner}: expected a kiln.nn BatchNorm cell as bn, got "
                            f"{type(bn).__name__}")
    training = [name for name, cell in ((type(layer).__name__, layer), ("bn", bn))
                if cell.training]
    if training:
        raise KilnValueError(f"{owner}: fusion only for eval, but {' and '.join(training)} "
                             f"{'is' if len(training) == 1 else 'are'} in training mode; call "
                             f".eval() first")
    if bn.running_mean is None or bn.running_var is None:
        raise KilnValueError(f"{owner}: bn.running_mean and bn.running_var must not be None "
                             f"(a BatchNorm with track_running_stats=True)")


def _bn_terms(owner, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """The BatchNorm's arguments checked, with ones for a None ``bn_w`` and zeros for a None
    ``bn_b``; returns (bn_w, bn_b)."""
    for name, value in (("bn_rm", bn_rm), ("bn_rv", bn_rv)):
        checked_tensor(owner, name, value)
    check_real(owner, "bn_eps", bn_eps)
    for name, value in (("bn_w", bn_w), ("bn_b", bn_b)):
        if value is not None:
            checked_tensor(owner, name, value)
    return (_mint.ones_like(bn_rm) if bn_w is None else bn_w,
            _mint.zeros_like(bn_rm) if bn_b is None else bn_b)


def _layer_terms(owner, names, weight, bias, bn_rm):
    """The layer's (weight, bias, bias dtype) checked, with zeros for a None ``bias``."""
    checked_tensor(owner, names[0], weight)
    if bias is None:
        return weight, _mint.zeros_like(bn_rm), weight.dtype
    return weight, checked_tensor(owner, names[1], bias), bias.dtype


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """The weight and bias (new Parameters) of a convolution equal to ``conv_w`` / ``conv_b``
    followed by an eval-mode BatchNorm of running mean ``bn_rm``, running variance ``bn_rv``,
    ``bn_eps``, weight ``bn_w`` and bias ``bn_b``; see kiln.nn.utils.fusion."""
    owner = "fuse_conv_bn_weights"
    bn_w, bn_b = _bn_terms(owner, bn_rm, bn_rv, bn_eps, bn_w, bn_b)
    conv_w, conv_b, bias_dtype = _layer_terms(owner, ("conv_w", "conv_b"), conv_w, conv_b, bn_rm)
    ones = [1] * (conv_w.ndim - 2)
    shape = [1, -1] + ones if transpose else [-1, 1] + ones
    with no_grad():
        var_rsqrt = _mint.rsqrt(bn_rv + bn_eps)
        fused_w = (conv_w * _mint.reshape(bn_w * var_rsqrt, shape)).to(conv_w.dtype)
        fused_b = ((conv_b - bn_rm) * var_rsqrt * bn_w + bn_b).to(bias_dtype)
    return (Parameter(fused_w, conv_w.requires_grad), Parameter(fused_b, conv_b.requires_grad))


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A new convolution equal to ``conv`` then ``bn`` (both in eval mode); see
    kiln.nn.utils.fusion."""
    owner = "fuse_conv_bn_eval"
    _check_cells(owner, conv, _Conv, "a kiln.nn convolution (Conv1d ... ConvTranspose3d)", bn)
    if bn.num_features != conv.out_channels:
        raise ShapeError(f"{owner}: bn.num_features ({bn.num_features}) must equal "
                         f"conv.out_channels ({conv.out_channels})")
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(fused.weight, fused.bias, bn.running_mean,
                                                    bn.running_var, bn.eps, bn.weight, bn.bias,
                                                    transpose)
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """The weight and bias (new Parameters) of a Linear equal to ``linear_w`` / ``linear_b``
    followed by an eval-mode BatchNorm (its arguments as ``fuse_conv_bn_weights``'); see
    kiln.nn.utils.fusion."""
    owner = "fuse_linear_bn_weights"
    bn_w, bn_b = _bn_terms(owner, bn_rm, bn_rv, bn_eps, bn_w, bn_b)
    linear_w, linear_b, bias_dtype = _layer_terms(owner, ("linear_w", "linear_b"), linear_w,
                                                  linear_b, bn_rm)
    with no_grad():
        bn_scale = bn_w * _mint.rsqrt(bn_rv + bn_eps)
        fused_w = linear_w * _mint.unsqueeze(bn_scale, -1).to(linear_w.dtype)
        fused_b = ((linear_b - bn_rm) * bn_scale + bn_b).to(bias_dtype)
    return (Parameter(fused_w, linear_w.requires_grad),
            Parameter(fused_b, linear_b.requires_grad))


def fuse_linear_bn_eval(linear, bn):
    """A new Linear equal to ``linear`` then ``bn`` (both in eval mode); see
    kiln.nn.utils.fusion."""
    owner = "fuse_linear_bn_eval"
    _check_cells(owner, linear, Linear, "a kiln.nn.Linear", bn)
    if getattr(linear, "activation", None) is not None:
        raise KilnValueError(f"{owner}: the Dense has an activation after its affine map, "
                             f"which a BatchNorm after it cannot be folded through")
    if bn.num_features not in (linear.out_features, 1):
        raise ShapeError(f"{owner}: to fuse, linear.out_features == bn.num_features or "
                         f"bn.num_features == 1, got linear.out_features={linear.out_features} "
                         f"and bn.num_features={bn.num_features}")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(fused.weight, fused.bias, bn.running_mean,
                                                      bn.running_var, bn.eps, bn.weight,
                                                      bn.bias)
    return fused
