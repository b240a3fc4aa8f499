"""kiln.nn.functional: PyTorch's ``torch.nn.functional`` on kiln tensors, with its names, argument
order and defaults (keyword-only where PyTorch's are), so that ported code runs as written:

    import kiln.nn.functional as F
    h = F.relu(F.conv2d(x, w, b, 1, 1))
    loss = F.cross_entropy(logits, labels, weight, ignore_index=0, label_smoothing=0.1)

Activations: relu, relu6, leaky_relu, elu, selu, celu, gelu, silu, mish, sigmoid, tanh, softplus,
softsign, tanhshrink, hardtanh, hardswish, hardsigmoid, prelu, logsigmoid, threshold, glu,
softmax, log_softmax, softmin, hardshrink, softshrink, rrelu, and PyTorch's in-place spellings
relu_, leaky_relu_, elu_, hardtanh_, selu_, celu_, threshold_, rrelu_ (each the function with
inplace=True). Layers: dropout, dropout1d, dropout2d, dropout3d (channel dropout), alpha_dropout,
feature_alpha_dropout (SELU's, which keep a zero mean and unit variance), linear, bilinear,
conv1d, conv2d, conv_transpose1d, conv_transpose2d, conv3d and conv_transpose3d (composed of the
2-d ops, kiln/nn/_volume_functions.py, as are the 3-d pools), pad, interpolate (PyTorch's modes
and antialias, kiln/nn/upsampling.py) and its deprecated spellings upsample, upsample_nearest,
upsample_bilinear, embedding, embedding_bag (kiln/nn/_embedding_functions.py), unfold and fold
(im2col and col2im, kiln/nn/fold.py), affine_grid and grid_sample (kiln/nn/_grid_sampling.py),
one_hot, pixel_shuffle, pixel_unshuffle, channel_shuffle, native_channel_shuffle,
gumbel_softmax, scaled_dot_product_attention, multi_head_attention_forward
(kiln/nn/attention.py). Pooling, of input [N, C, L], [N, C, H, W] or [N, C, D, H, W] (or one
sample without N): max_pool1d, max_pool2d, max_pool3d (with ``return_indices``), avg_pool1d,
avg_pool2d, avg_pool3d (with ``divisor_override``), lp_pool1d / 2d / 3d (power averages),
adaptive_avg_pool1d / 2d / 3d, adaptive_max_pool1d / 2d / 3d (with ``return_indices``),
PyTorch's max_pool1d_with_indices / 2d / 3d and adaptive_max_pool1d_with_indices / 2d / 3d
(which return the indices whatever ``return_indices``), fractional_max_pool2d / 3d (and their
_with_indices), max_unpool1d, max_unpool2d, max_unpool3d (the 1-d ones are the 2-d ones over a
height of one). Normalization and distances: layer_norm, rms_norm, group_norm, batch_norm,
instance_norm, local_response_norm, normalize, cosine_similarity, pairwise_distance, pdist.
kiln/nn/_layers_more.py composes channel_shuffle, gumbel_softmax, local_response_norm, the
fractional max poolings, pdist and the upsample spellings.
Losses: mse_loss, l1_loss, smooth_l1_loss, huber_loss, cross_entropy, nll_loss,
binary_cross_entropy, binary_cross_entropy_with_logits, kl_div, soft_margin_loss,
margin_ranking_loss, cosine_embedding_loss, hinge_embedding_loss, triplet_margin_loss,
gaussian_nll_loss, poisson_nll_loss, multi_margin_loss, multilabel_margin_loss,
multilabel_soft_margin_loss, triplet_margin_with_distance_loss, ctc_loss
(kiln/nn/_loss_functions.py; the last twelve composed there, their inputs and targets broadcast
as PyTorch's do; ctc_loss's log-space recursion runs one step of ops per input frame).

Each delegates to the kiln.mint function that computes it (an op, or a composite of
kiln/mint/_composite.py), reordering the arguments where kiln.mint's order differs (the class
losses take ``reduction`` before ``ignore_index`` there); the functions kiln.mint lacks are
composed here of kiln.mint ops. Either way autograd differentiates them with PyTorch's gradients
and kiln.jit traces them (one_hot needs ``num_classes`` under kiln.jit). 16-bit floats are computed
in float32 and rounded once where PyTorch's kernels do so.

As PyTorch's, the functions with a weight (linear, bilinear, conv1d, conv2d, conv_transpose2d,
multi_head_attention_forward) refuse an input or a bias of another dtype than the weight's with
a DTypeError naming both (a float64 batch into float32 weights, an integer batch), where the
kiln.mint ops they call promote; so do the cells that call them.

Where this differs from PyTorch:

- ``inplace=True`` computes the result and writes it into ``input``, returning ``input``; on a
  non-leaf that requires grad the write is recorded, as PyTorch's, but the result is computed
  from a copy of ``input`` (whose values the gradient may read), so it saves no memory there.
  A leaf that requires grad is refused while grad mode is on (a KilnValueError), as in PyTorch.
- The deprecated ``size_average`` and ``reduce`` arguments of the losses must be None: anything
  else is a KilnValueError saying to pass ``reduction``.
- l1_loss, smooth_l1_loss, huber_loss, kl_div and the binary cross entropies want a target of the
  input's shape (a ShapeError otherwise; kiln.mint's rule: PyTorch broadcasts them with a warning,
  and [N, 1] against [N] silently compares N * N pairs); mse_loss broadcasts with the warning.
- Options that need what Kiln lacks are a KilnNotImplementedError rather than ignored:
  embedding's ``sparse``.
- soft_margin_loss is computed without overflow (PyTorch's float32 value is inf, its gradient
  NaN, past -target * input of about 88), and poisson_nll_loss's target gradient with
  ``full=True`` is finite at target 0, where PyTorch's is NaN.
- max_unpool1d / max_unpool2d / max_unpool3d raise an index outside the output's plane
  (volume) asynchronously (a KilnIndexError of the scatter that writes them, at the next sync
  point) rather than at the call.
"""

import functools
import math
import warnings

from .. import _C, mint as _mint
from .._checks import checked_bool, checked_int, wrap_dim
from ..autograd import is_grad_enabled, no_grad
from ..errors import DTypeError, KilnTypeError, KilnValueError, ShapeError
from ..mint import _composite
from ..mint._composite import _cast, _dims, _floating_tensor, _widened, check_real
from ..mint._random import sample_dtype
from ._embedding_functions import embedding, embedding_bag  # noqa: F401  (a module of their own)
from ._grid_sampling import affine_grid, grid_sample  # noqa: F401  (a module of their own)
from ._loss_functions import (  # noqa: F401  (in a module of their own)
    binary_cross_entropy, binary_cross_entropy_with_logits, cosine_embedding_loss, cross_entropy,
    ctc_loss, gaussian_nll_loss, hinge_embedding_loss, huber_loss, kl_div, l1_loss,
    margin_ranking_loss, mse_loss, multi_margin_loss, multilabel_margin_loss,
    multilabel_soft_margin_loss, nll_loss, poisson_nll_loss, smooth_l1_loss, soft_margin_loss,
    triplet_margin_loss, triplet_margin_with_distance_loss)
from ._layer_arguments import (SPATIAL_NAMES, batched, check_like_weight, checked_sizes,
                               checked_tensor, squeezed)
from ._layers_more import (  # noqa: F401  (in a module of their own, beside their cells)
    channel_shuffle, fractional_max_pool2d, fractional_max_pool2d_with_indices,
    fractional_max_pool3d, fractional_max_pool3d_with_indices, gumbel_softmax,
    local_response_norm, native_channel_shuffle, pdist, upsample, upsample_bilinear,
    upsample_nearest)
from ._volume_functions import (  # noqa: F401  (in a module of their own)
    adaptive_avg_pool3d, adaptive_max_pool3d, avg_pool3d, conv3d, conv_transpose3d, max_pool3d)
from .attention import multi_head_attention_forward  # noqa: F401  (beside MultiheadAttention)
from .fold import fold, unfold  # noqa: F401  (beside their cells)
from .upsampling import interpolate  # noqa: F401  (composed there, beside its cells)

__all__ = ["relu", "relu6", "leaky_relu", "elu", "selu", "celu", "gelu", "silu", "mish", "sigmoid",
           "tanh", "softplus", "softsign", "tanhshrink", "hardtanh", "hardswish", "hardsigmoid",
           "prelu", "logsigmoid", "threshold", "glu", "softmax", "log_softmax", "softmin",
           "hardshrink", "softshrink", "rrelu", "relu_", "leaky_relu_", "elu_", "hardtanh_",
           "selu_", "celu_", "threshold_", "rrelu_",
           "dropout", "dropout1d", "dropout2d", "linear", "bilinear", "conv1d", "conv2d",
           "conv_transpose1d", "conv_transpose2d", "conv3d", "conv_transpose3d", "max_pool1d",
           "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
           "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d",
           "adaptive_max_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool3d", "max_unpool1d",
           "max_unpool2d", "max_unpool3d", "pad", "interpolate", "upsample", "upsample_nearest",
           "upsample_bilinear", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
           "lp_pool1d", "lp_pool2d", "lp_pool3d", "max_pool1d_with_indices",
           "max_pool2d_with_indices", "max_pool3d_with_indices",
           "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
           "adaptive_max_pool3d_with_indices", "fractional_max_pool2d",
           "fractional_max_pool2d_with_indices", "fractional_max_pool3d",
           "fractional_max_pool3d_with_indices", "channel_shuffle", "native_channel_shuffle",
           "gumbel_softmax", "instance_norm", "local_response_norm", "pdist",
           "embedding", "embedding_bag", "fold", "unfold", "affine_grid", "grid_sample",
           "one_hot", "pixel_shuffle",
           "pixel_unshuffle",
           "scaled_dot_product_attention", "multi_head_attention_forward", "layer_norm",
           "rms_norm", "group_norm", "batch_norm",
           "normalize", "cosine_similarity", "pairwise_distance",
           "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "cross_entropy", "nll_loss",
           "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
           "soft_margin_loss", "margin_ranking_loss", "cosine_embedding_loss",
           "hinge_embedding_loss", "triplet_margin_loss", "gaussian_nll_loss", "poisson_nll_loss",
           "multi_margin_loss", "multilabel_margin_loss", "multilabel_soft_margin_loss",
           "triplet_margin_with_distance_loss", "ctc_loss"]

Tensor = _C.Tensor

# SELU's constants (Klambauer et al., 2017), as PyTorch's.
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _cell_writes_into(inplace, x):
    """Whether a cell built with ``inplace`` (an activation, a dropout) writes into x: when
    asked, unless autograd needs x (it requires grad under grad mode: F's inplace=True would copy
    x first, see _source, so the cell computes out of place, which costs less) or a
    kiln.jit trace records the call (a graph computes values: a write into its input would be
    refused, and kiln_cpu plans the memory anyway)."""
    return inplace and not _C.jit.is_tracing() and not (x.requires_grad and is_grad_enabled())


def _source(owner, input, inplace):  # noqa: A002  (PyTorch's argument name)
    """What a function with ``inplace`` computes its result from: ``input``, or, when the result
    is written into an ``input`` autograd tracks (a non-leaf that requires grad, grad mode on), a
    copy of it: the ops save what they compute from for the gradient, and the write goes over
    ``input`` (PyTorch keeps the original the same way). A leaf that requires grad is refused, as
    PyTorch refuses it."""
    if not (inplace and isinstance(input, _C.Tensor) and input.requires_grad
            and is_grad_enabled()):
        return input
    if input.is_leaf:
        raise KilnValueError(f"{owner}: inplace=True writes into input, a leaf tensor that "
                             f"requires grad: use inplace=False, or call it under kiln.no_grad()")
    return input.clone()


def _in_place(owner, input, result, inplace):  # noqa: A002  (PyTorch's argument name)
    """``result``, or for ``inplace=True`` ``input`` with ``result`` written into it (computed
    from ``_source(owner, input, inplace)``); autograd records the write as the in-place
    operators' (``input`` takes the result's history)."""
    if not inplace or result.is_same(input):  # dropout outside training returns its input
        return result
    what = f"{owner}(inplace=True)"
    # A result the input's dtype cannot take (silu of an integer tensor is float) is refused, as
    # the in-place operators refuse it, not truncated into it.
    _C._check_result_fits(what, input, result)
    _C.mint._overwrite(input, result, what)
    return input


# ------------------------------------------------------------------------------------------------
# Activations


def relu(input, inplace=False):  # noqa: A002
    """relu(input, inplace=False): max(x, 0) (kiln.mint.relu)."""
    return _in_place("relu", input, _mint.relu(_source("relu", input, inplace)), inplace)


def relu6(input, inplace=False):  # noqa: A002
    """relu6(input, inplace=False): x clamped to [0, 6], as hardtanh(input, 0, 6) (the gradient is
    0 at 0 and 6, as PyTorch's); an integer input keeps its dtype."""
    source = _source("relu6", input, inplace)
    return _in_place("relu6", input, _composite._hardtanh("relu6", source, 0.0, 6.0), inplace)


def leaky_relu(input, negative_slope=0.01, inplace=False):  # noqa: A002
    """leaky_relu(input, negative_slope=0.01, inplace=False) (kiln.mint.leaky_relu)."""
    source = _source("leaky_relu", input, inplace)
    return _in_place("leaky_relu", input, _composite.leaky_relu(source, negative_slope), inplace)


def elu(input, alpha=1.0, inplace=False):  # noqa: A002
    """elu(input, alpha=1.0, inplace=False) (kiln.mint.elu)."""
    return _in_place("elu", input, _composite.elu(_source("elu", input, inplace), alpha), inplace)


def selu(input, inplace=False):  # noqa: A002
    """selu(input, inplace=False): scale * elu(x, alpha) with PyTorch's constants."""
    dtype = _floating_tensor("selu", "input", input)
    x = _widened(_source("selu", input, inplace))
    result = _cast(_composite.elu(x, _SELU_ALPHA) * _SELU_SCALE, dtype)
    return _in_place("selu", input, result, inplace)


def celu(input, alpha=1.0, inplace=False):  # noqa: A002
    """celu(input, alpha=1.0, inplace=False): x where x > 0, else alpha * (exp(x / alpha) - 1),
    for either sign of alpha (alpha * elu(x / alpha) only for alpha > 0). alpha = 0 is a
    KilnValueError, as in PyTorch."""
    dtype = _floating_tensor("celu", "input", input)
    alpha = check_real("celu", "alpha", alpha)
    if alpha == 0:
        raise KilnValueError("celu: alpha cannot be 0 (the curve divides x by it)")
    x = _widened(_source("celu", input, inplace))
    if alpha > 0:
        result = _composite.elu(x / alpha) * alpha
    else:
        # The curve of min(x, 0): where x > 0 it is 0 there, so its exp (and gradient) stays
        # finite.
        result = _mint.where(x > 0, x, _mint.expm1(_mint.minimum(x, 0.0) / alpha) * alpha)
    result = _cast(result, dtype)
    return _in_place("celu", input, result, inplace)


def gelu(input, *, approximate="none"):  # noqa: A002
    """gelu(input, *, approximate='none'): x * Phi(x), or PyTorch's tanh approximation for
    approximate='tanh' (kiln.mint.gelu)."""
    return _mint.gelu(input, approximate)


def silu(input, inplace=False):  # noqa: A002
    """silu(input, inplace=False): x * sigmoid(x) (kiln.mint.silu)."""
    return _in_place("silu", input, _mint.silu(_source("silu", input, inplace)), inplace)


def mish(input, inplace=False):  # noqa: A002
    """mish(input, inplace=False): x * tanh(softplus(x))."""
    dtype = _floating_tensor("mish", "input", input)
    x = _widened(_source("mish", input, inplace))
    return _in_place("mish", input, _cast(x * _mint.tanh(_composite.softplus(x)), dtype), inplace)


def sigmoid(input):  # noqa: A002
    """sigmoid(input): 1 / (1 + exp(-x)) (kiln.mint.sigmoid)."""
    return _mint.sigmoid(input)


def tanh(input):  # noqa: A002
    """tanh(input) (kiln.mint.tanh)."""
    return _mint.tanh(input)


def softplus(input, beta=1.0, threshold=20.0):  # noqa: A002
    """softplus(input, beta=1.0, threshold=20.0) (kiln.mint.softplus)."""
    return _composite.softplus(input, beta, threshold)


def softsign(input):  # noqa: A002
    """softsign(input): x / (1 + |x|), op by op as PyTorch computes it."""
    _floating_tensor("softsign", "input", input)
    return input / (_mint.abs(input) + 1)


def tanhshrink(input):  # noqa: A002
    """tanhshrink(input): x - tanh(x)."""
    _floating_tensor("tanhshrink", "input", input)
    return input - _mint.tanh(input)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):  # noqa: A002
    """hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False) (kiln.mint.hardtanh; an integer
    input keeps its dtype, the bounds truncated toward zero)."""
    source = _source("hardtanh", input, inplace)
    return _in_place("hardtanh", input, _composite.hardtanh(source, min_val, max_val), inplace)


def hardswish(input, inplace=False):  # noqa: A002
    """hardswish(input, inplace=False): 0 for x <= -3, x * (x + 3) / 6 below 3, else x, with
    PyTorch's gradient: 0 at -3, 1 at 3 and at NaN (which stays NaN)."""
    dtype = _floating_tensor("hardswish", "input", input)
    x = _widened(_source("hardswish", input, inplace))
    # The curve's input is 0 outside (-3, 3), so that its gradient there (NaN at NaN and inf)
    # does not reach x (Note [Gradients through where] in kiln/mint/_composite.py).
    inside = _mint.where(_mint.logical_and(x > -3.0, x < 3.0), x, 0.0)
    result = _mint.where(x <= -3.0, 0.0, _mint.where(x < 3.0, inside * (inside + 3.0) / 6.0, x))
    return _in_place("hardswish", input, _cast(result, dtype), inplace)


def hardsigmoid(input, inplace=False):  # noqa: A002
    """hardsigmoid(input, inplace=False): x / 6 + 1/2 clamped to [0, 1], with PyTorch's gradient:
    1/6 strictly between -3 and 3, else 0 (NaN included)."""
    dtype = _floating_tensor("hardsigmoid", "input", input)
    x = _widened(_source("hardsigmoid", input, inplace))
    inside = _mint.logical_and(x > -3.0, x < 3.0)
    # A NaN fails every comparison and keeps its value, detached: gradient 0, as PyTorch's.
    ends = _mint.where(x <= -3.0, 0.0, _mint.where(x >= 3.0, 1.0, x.detach()))
    result = _mint.where(inside, x / 6.0 + 0.5, ends)
    return _in_place("hardsigmoid", input, _cast(result, dtype), inplace)


def prelu(input, weight):  # noqa: A002
    """prelu(input, weight): x where x > 0, else weight * x, with ``weight`` (in the input's dtype)
    of one element, or [C] for C channels (dim 1; an input of fewer than 2 dimensions has one): a
    ShapeError otherwise. The gradients are PyTorch's: at x = 0, weight for the input and 0 for
    the weight."""
    owner = "prelu"
    dtype = _floating_tensor(owner, "input", input)
    checked_tensor(owner, "weight", weight)
    channels = input.shape[1] if input.ndim >= 2 else 1
    if weight.ndim > 1 or weight.numel() not in (1, channels):
        raise ShapeError(f"{owner}: expected weight of 1 element or [{channels}] (one per channel "
                         f"of input {_dims(input.shape)}), got {_dims(weight.shape)}")
    # One slope broadcasts as a 0-d tensor (a [1] one would add a dimension to a 0-d input).
    shape = [] if weight.numel() == 1 else [channels] + [1] * (input.ndim - 2)
    return _mint.where(input > 0, input, _cast(weight, dtype).reshape(shape) * input)


def logsigmoid(input):  # noqa: A002
    """logsigmoid(input): log(sigmoid(x)), without overflow for large |x|."""
    dtype = _floating_tensor("logsigmoid", "input", input)
    return _cast(_composite._log_sigmoid(_widened(input)), dtype)


def threshold(input, threshold, value, inplace=False):  # noqa: A002
    """threshold(input, threshold, value, inplace=False): ``value`` where x <= threshold, else x
    (NaN stays NaN); the gradient is 0 where the value replaces x."""
    checked_tensor("threshold", "input", input)
    limit = check_real("threshold", "threshold", threshold)
    fill = check_real("threshold", "value", value)
    # The value in the input's dtype, as PyTorch's (an integer input stays integer).
    fill = fill if input.dtype.is_floating_point else _C.tensor(int(fill), dtype=input.dtype)
    source = _source("threshold", input, inplace)
    return _in_place("threshold", input, _mint.where(source <= limit, fill, source), inplace)


def glu(input, dim=-1):  # noqa: A002
    """glu(input, dim=-1): a * sigmoid(b) for the halves a, b of ``input`` along ``dim``, whose
    size must be even (a ShapeError otherwise)."""
    dtype = _floating_tensor("glu", "input", input)
    if input.ndim == 0:
        raise ShapeError("glu: expected a tensor of at least 1 dimension to halve, got a 0-d one")
    size = input.shape[wrap_dim("glu", "dim", checked_int("glu", "dim", dim), input.ndim)]
    if size % 2:
        raise ShapeError(f"glu: expected dimension {dim} of even size to halve, got size {size} "
                         f"(shape {_dims(input.shape)})")
    a, b = _mint.chunk(_widened(input), 2, dim)
    return _cast(a * _mint.sigmoid(b), dtype)


def _softmax_dim(name, input, dim, stacklevel):  # noqa: A002
    """``dim``; for None PyTorch's deprecated implicit choice, with its warning."""
    if dim is not None:
        return dim
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to "
                  f"include dim=X as an argument.", stacklevel=stacklevel)
    return 0 if checked_tensor(name, "input", input).ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002
    """softmax(input, dim=None, _stacklevel=3, dtype=None) (kiln.mint.softmax); dim=None is
    PyTorch's deprecated implicit dimension (0 for 0-, 1- and 3-d inputs, else 1), with its
    warning."""
    return _mint.softmax(input, _softmax_dim("softmax", input, dim, _stacklevel), dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002
    """log_softmax(input, dim=None, _stacklevel=3, dtype=None) (kiln.mint.log_softmax); dim=None
    as softmax's."""
    return _mint.log_softmax(input, _softmax_dim("log_softmax", input, dim, _stacklevel), dtype)


def softmin(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002
    """softmin(input, dim=None, _stacklevel=3, dtype=None): softmax(-input); dim=None as
    softmax's."""
    checked_tensor("softmin", "input", input)
    return _mint.softmax(-input, _softmax_dim("softmin", input, dim, _stacklevel), dtype)


def hardshrink(input, lambd=0.5):  # noqa: A002
    """hardshrink(input, lambd=0.5): x where |x| > lambd, else 0 (NaN stays NaN); the gradient
    is 0 where the value is, 1 elsewhere, as PyTorch's. A negative lambd shrinks nothing."""
    _floating_tensor("hardshrink", "input", input)
    lambd = check_real("hardshrink", "lambd", lambd)
    inside = _mint.logical_and(input >= -lambd, input <= lambd)
    return _mint.where(inside, 0.0, input)


def softshrink(input, lambd=0.5):  # noqa: A002
    """softshrink(input, lambd=0.5): x - lambd where x > lambd, x + lambd where x < -lambd, else
    0 (NaN stays NaN), with PyTorch's gradient (0 in [-lambd, lambd], 1 elsewhere). ``lambd``
    must be finite and >= 0 (a KilnValueError otherwise, as PyTorch refuses it)."""
    _floating_tensor("softshrink", "input", input)
    lambd = check_real("softshrink", "lambd", lambd)
    if not 0.0 <= lambd < math.inf:
        raise KilnValueError(f"softshrink: expected lambd to be finite and >= 0, got {lambd}")
    inside = _mint.logical_and(input >= -lambd, input <= lambd)
    # A NaN is outside and takes the last branch: NaN, with the gradient 1, as PyTorch's.
    return _mint.where(inside, 0.0, _mint.where(input > lambd, input - lambd, input + lambd))


def _rrelu_bounds(owner, lower, upper):
    """rrelu's ``lower`` and ``upper`` as floats: a KilnTypeError unless they are real numbers, a
    KilnValueError unless lower <= upper (PyTorch's check). Shared with kiln.nn.RReLU."""
    lower = check_real(owner, "lower", lower)
    upper = check_real(owner, "upper", upper)
    if not lower <= upper:
        raise KilnValueError(f"{owner}: expected lower <= upper, got lower={lower} and "
                             f"upper={upper}")
    return lower, upper


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):  # noqa: A002
    """rrelu(input, lower=1/8, upper=1/3, training=False, inplace=False): the randomized leaky
    ReLU. While ``training``, x where x > 0, else x * r with r drawn from U(lower, upper) for each
    element (kiln.mint.rand_like, so kiln.manual_seed repeats it; float32 draws for 16-bit
    inputs, rounded once with the product), the gradient r there; otherwise leaky_relu with the
    slope (lower + upper) / 2. lower > upper is a KilnValueError, as in PyTorch."""
    owner = "rrelu"
    dtype = _floating_tensor(owner, "input", input)
    lower, upper = _rrelu_bounds(owner, lower, upper)
    source = _source(owner, input, inplace)
    if not checked_bool(owner, "training", training):
        result = _composite.leaky_relu(source, (lower + upper) / 2)
    else:
        slope = _mint.rand_like(source, dtype=sample_dtype(source)) * (upper - lower) + lower
        result = _cast(_mint.where(source <= 0, source * slope, source), dtype)
    return _in_place(owner, input, result, inplace)


def relu_(input):  # noqa: A002
    """relu_(input): relu(input, inplace=True), PyTorch's in-place spelling."""
    return relu(input, inplace=True)


def leaky_relu_(input, negative_slope=0.01):  # noqa: A002
    """leaky_relu_(input, negative_slope=0.01): leaky_relu(input, negative_slope,
    inplace=True)."""
    return leaky_relu(input, negative_slope, inplace=True)


def elu_(input, alpha=1.0):  # noqa: A002
    """elu_(input, alpha=1.0): elu(input, alpha, inplace=True)."""
    return elu(input, alpha, inplace=True)


def hardtanh_(input, min_val=-1.0, max_val=1.0):  # noqa: A002
    """hardtanh_(input, min_val=-1.0, max_val=1.0): hardtanh(input, min_val, max_val,
    inplace=True)."""
    return hardtanh(input, min_val, max_val, inplace=True)


def selu_(input):  # noqa: A002
    """selu_(input): selu(input, inplace=True)."""
    return selu(input, inplace=True)


def celu_(input, alpha=1.0):  # noqa: A002
    """celu_(input, alpha=1.0): celu(input, alpha, inplace=True)."""
    return celu(input, alpha, inplace=True)


_threshold = threshold  # the function, which threshold_'s argument of its name hides there


def threshold_(input, threshold, value):  # noqa: A002
    """threshold_(input, threshold, value): threshold(input, threshold, value, inplace=True)."""
    return _threshold(input, threshold, value, inplace=True)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):  # noqa: A002
    """rrelu_(input, lower=1/8, upper=1/3, training=False): rrelu(input, lower, upper, training,
    inplace=True)."""
    return rrelu(input, lower, upper, training, inplace=True)


# ------------------------------------------------------------------------------------------------
# Layers


def dropout(input, p=0.5, training=True, inplace=False):  # noqa: A002
    """dropout(input, p=0.5, training=True, inplace=False) (kiln.mint.dropout): zeroes each
    element with probability p and scales the rest by 1 / (1 - p) while ``training``."""
    source = _source("dropout", input, inplace and training)  # (not training: input as it is)
    return _in_place("dropout", input, _mint.dropout(source, p, training), inplace)


def _dropout_probability(owner, p):
    """``p`` as a float in [0, 1]: a KilnTypeError unless it is a real number, a KilnValueError
    outside the range. Shared with kiln.nn.Dropout and its subclasses, which check it when
    built."""
    value = check_real(owner, "p", p)
    if not 0.0 <= value <= 1.0:
        raise KilnValueError(f"{owner}: p must be in [0, 1], got {p}")
    return value


def _channel_dropout(owner, input, p, training, inplace, channel_dim):  # noqa: A002
    """PyTorch's feature dropout: while ``training``, each slice ``input[i_0, ..., i_channel_dim]``
    (a channel of one sample) zeroed with probability ``p`` and the others scaled by 1 / (1 - p);
    ``input`` itself when not training, for p = 0 or with no elements. Written into ``input``
    for ``inplace`` (see _in_place)."""
    p = _dropout_probability(owner, p)
    if not training or p == 0 or input.numel() == 0:
        out = input
    elif p == 1:
        out = _source(owner, input, inplace) * 0.0  # PyTorch's input * 0 (NaN, inf: NaN)
    else:
        shape = list(input.shape[:channel_dim + 1]) + [1] * (input.ndim - channel_dim - 1)
        # Drawn as float32 (float64 for float64) for the probability's precision, then the scaled
        # mask rounded once into the input's dtype, as PyTorch's noise / (1 - p).
        keep = _mint.bernoulli(_mint.full(shape, 1.0 - p, dtype=sample_dtype(input)))
        out = _source(owner, input, inplace) * _cast(keep * (1.0 / (1.0 - p)), input.dtype)
    return _in_place(owner, input, out, inplace)


def _feature_dropout(owner, input, p, training, inplace, spatial):  # noqa: A002
    """dropout1d (``spatial`` 1) or dropout3d (3) of input [N, C, *spatial] or one sample
    [C, *spatial], its errors naming ``owner`` (the function, or the Dropout1d / Dropout3d
    cell)."""
    _floating_tensor(owner, "input", input)
    if input.ndim not in (spatial + 1, spatial + 2):
        sizes = SPATIAL_NAMES[spatial]
        raise ShapeError(f"{owner}: expected a {spatial + 1}-D [C, {sizes}] or {spatial + 2}-D "
                         f"[N, C, {sizes}] input, got shape {list(input.shape)}")
    return _channel_dropout(owner, input, p, training, inplace, input.ndim - spatial - 1)


def _dropout2d(owner, input, p, training, inplace, stacklevel):  # noqa: A002
    """dropout2d, its errors naming ``owner`` (the function, or the Dropout2d cell) and its
    warning pointing ``stacklevel`` frames up (the caller of the function or of the cell)."""
    _floating_tensor(owner, "input", input)
    if input.ndim not in (3, 4):
        raise ShapeError(f"{owner}: expected a 4-D [N, C, H, W] input (or 3-D [N, C, L]), got "
                         f"shape {list(input.shape)}")
    if input.ndim == 3:
        one_d = owner.replace("2d", "1d")  # dropout1d, or the cell Dropout1d
        warnings.warn(f"{owner}: a 3-D input is taken as [N, C, L] (channel-wise 1-d dropout), "
                      f"as PyTorch does today; PyTorch will take it as one sample [C, H, W] in "
                      f"a future release: use {one_d} for [N, C, L]", stacklevel=stacklevel)
    return _channel_dropout(owner, input, p, training, inplace, 1)


def dropout1d(input, p=0.5, training=True, inplace=False):  # noqa: A002
    """dropout1d(input, p=0.5, training=True, inplace=False): PyTorch's channel dropout of
    input [N, C, L] or one sample [C, L]: while ``training`` each channel (input[n, c], or
    input[c]) is zeroed with probability ``p`` and the others are scaled by 1 / (1 - p), one
    draw per channel; otherwise the input is returned. ``p`` outside [0, 1] is a
    KilnValueError, an input of another rank a ShapeError, a non-floating one a DTypeError."""
    return _feature_dropout("dropout1d", input, p, training, inplace, 1)


def dropout2d(input, p=0.5, training=True, inplace=False):  # noqa: A002
    """dropout2d(input, p=0.5, training=True, inplace=False): PyTorch's channel dropout of
    input [N, C, H, W], each channel input[n, c] zeroed with probability ``p`` while
    ``training`` (as dropout1d). As PyTorch does today (with its warning), a 3-D input is taken
    as [N, C, L], not as one sample [C, H, W]: use dropout1d for it. Another rank is a
    ShapeError (PyTorch warns that it is deprecated); the other errors are dropout1d's."""
    return _dropout2d("dropout2d", input, p, training, inplace, stacklevel=3)


def dropout3d(input, p=0.5, training=True, inplace=False):  # noqa: A002
    """dropout3d(input, p=0.5, training=True, inplace=False): PyTorch's channel dropout of
    input [N, C, D, H, W] or one sample [C, D, H, W], each channel zeroed with probability ``p``
    while ``training`` (as dropout1d). Another rank is a ShapeError (PyTorch warns that it is
    deprecated); the other errors are dropout1d's."""
    return _feature_dropout("dropout3d", input, p, training, inplace, 3)


# Note [Alpha dropout]
# SELU's activations of a large negative input saturate at -scale * alpha (-1.7581), so alpha
# dropout sets a dropped element to that value instead of 0, then maps every element by
# a * x + b, with a and b chosen so that an input of zero mean and unit variance keeps them
# (Klambauer et al., 2017): a = 1 / sqrt((alpha'^2 p + 1) (1 - p)) for alpha' = scale * alpha,
# b = alpha' a p. As PyTorch computes it, from the keep mask m (1 with probability 1 - p):
# x * (m a) + (m - 1) alpha' a + alpha' a p; the gradient is m a. p = 1 gives input * 0, as
# PyTorch's (not the saturation value).
_ALPHA_PRIME = _SELU_SCALE * _SELU_ALPHA


def _alpha_dropout(owner, input, p, training, inplace, feature):  # noqa: A002
    """alpha_dropout (``feature`` False: one draw per element) or feature_alpha_dropout (one draw
    per slice input[n, c] of an input of at least 2 dimensions) while ``training`` (Note [Alpha
    dropout]); ``input`` itself otherwise, for p = 0 or with no elements. Errors name ``owner``
    (the function, or the cell); written into ``input`` for ``inplace`` (see _in_place)."""
    p = _dropout_probability(owner, p)
    _floating_tensor(owner, "input", input)
    training = checked_bool(owner, "training", training)
    inplace = checked_bool(owner, "inplace", inplace)
    if feature and input.ndim < 2:
        raise ShapeError(f"{owner}: expected an input [N, C, ...] of at least 2 dimensions (one "
                         f"draw per (N, C) feature), got shape {list(input.shape)}")
    if not training or p == 0 or input.numel() == 0:
        out = input
    elif p == 1:
        out = _source(owner, input, inplace) * 0.0
    else:
        shape = (list(input.shape[:2]) + [1] * (input.ndim - 2) if feature
                 else list(input.shape))
        # Drawn and combined in float32 (float64 for float64), as _channel_dropout draws; the
        # scale and shift rounded once into the input's dtype.
        keep = _mint.bernoulli(_mint.full(shape, 1.0 - p, dtype=sample_dtype(input)))
        a = 1.0 / math.sqrt((_ALPHA_PRIME ** 2 * p + 1) * (1 - p))
        scale = _cast(keep * a, input.dtype)
        shift = _cast((keep - 1.0) * (_ALPHA_PRIME * a) + _ALPHA_PRIME * a * p, input.dtype)
        out = _source(owner, input, inplace) * scale + shift
    return _in_place(owner, input, out, inplace)


def alpha_dropout(input, p=0.5, training=False, inplace=False):  # noqa: A002
    """alpha_dropout(input, p=0.5, training=False, inplace=False): PyTorch's dropout for SELU
    networks (note the default ``training=False``, PyTorch's): while ``training`` each element
    is dropped with probability ``p`` to SELU's saturation value and every element mapped by
    a * x + b, so that an input of zero mean and unit variance keeps both (Note [Alpha
    dropout]); otherwise the input is returned. ``p`` outside [0, 1] is a KilnValueError, a
    non-floating input a DTypeError."""
    return _alpha_dropout("alpha_dropout", input, p, training, inplace, feature=False)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):  # noqa: A002
    """feature_alpha_dropout(input, p=0.5, training=False, inplace=False): alpha_dropout with one
    draw per channel: each slice input[n, c] of input [N, C, ...] is dropped or kept whole. As
    PyTorch's, the first two dimensions index the features whatever the rank (a 4-D input is
    [N, C, H, W]); fewer than 2 dimensions is a ShapeError."""
    return _alpha_dropout("feature_alpha_dropout", input, p, training, inplace, feature=True)


def linear(input, weight, bias=None):  # noqa: A002
    """linear(input, weight, bias=None): x @ weight.T + bias (kiln.mint.linear, one fused op);
    as PyTorch's, a 1-d weight [in] gives x @ weight, and a bias broadcasts to the result. The
    input and the bias must be kiln tensors of the weight's dtype (a DTypeError otherwise, as
    in PyTorch; kiln.mint.linear promotes)."""
    check_like_weight("linear", weight, bias, ("input", input))
    if weight.ndim not in (1, 2):
        raise ShapeError(f"linear: expected weight [out, in] or [in], got "
                         f"{_dims(weight.shape)}")
    fused = weight.ndim == 2 and (bias is None or tuple(bias.shape) == (weight.shape[0],))
    if fused:
        return _mint.linear(input, weight, bias)
    out = _mint.matmul(input, weight if weight.ndim == 1 else _mint.transpose(weight, 0, 1))
    return out if bias is None else out + bias


def bilinear(input1, input2, weight, bias=None):
    """bilinear(input1, input2, weight, bias=None): y[..., o] = sum_ij x1[..., i] weight[o, i, j]
    x2[..., j] + bias[o], for inputs [..., in1] and [..., in2] with the same leading
    dimensions and weight [out, in1, in2], both inputs and the bias of the weight's dtype (a
    DTypeError otherwise)."""
    check_like_weight("bilinear", weight, bias, ("input1", input1), ("input2", input2))
    if weight.ndim != 3 or input1.ndim == 0 or input2.ndim == 0 \
            or tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]) \
            or (input1.shape[-1], input2.shape[-1]) != tuple(weight.shape[1:]):
        raise ShapeError(f"bilinear: expected input1 [..., in1], input2 [..., in2] with the same "
                         f"leading dimensions and weight [out, in1, in2], got input1 "
                         f"{_dims(input1.shape)}, input2 {_dims(input2.shape)} and weight "
                         f"{_dims(weight.shape)}")
    out, in1, in2 = weight.shape
    # One matmul of x1 with the weight laid out [in1, out * in2], then a product with x2.
    left = _mint.matmul(input1, weight.permute(1, 0, 2).reshape(in1, out * in2))
    left = left.reshape(list(input1.shape[:-1]) + [out, in2])
    result = _mint.sum(left * _mint.unsqueeze(input2, -2), -1)
    return result if bias is None else result + bias


def _conv1d_pair(owner, name, value, height, low):
    """A 1-d convolution's ``value`` (an int >= low, or a sequence of one) as the 2-d one's pair
    (height, value)."""
    return (height,) + checked_sizes(owner, name, value, 1, low)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1): 1-d
    convolution of input [N, C_in, L] (or one sample [C_in, L]) with weight [C_out, C_in /
    groups, k] to [N, C_out, L_out] ([C_out, L_out]); ``stride``, ``padding`` and ``dilation``
    are ints or sequences of one, ``padding`` also "valid" or "same" (stride 1 only); input
    and bias of the weight's dtype. Computed as conv2d over a height of 1
    (kiln.mint._composite.conv2d), which differentiates it; the arguments are checked here, so
    that errors describe the 1-d shapes."""
    owner = "conv1d"
    _floating_tensor(owner, "input", input)
    _floating_tensor(owner, "weight", weight)
    check_like_weight(owner, weight, bias, ("input", input))
    groups = checked_int(owner, "groups", groups, low=1)
    stride = _conv1d_pair(owner, "stride", stride, 1, 1)
    dilation = _conv1d_pair(owner, "dilation", dilation, 1, 1)
    if isinstance(padding, str):
        if padding not in _composite.PADDING_STRINGS:
            raise KilnValueError(f"{owner}: expected padding 'same', 'valid', an int or a "
                                 f"sequence of one int, got {padding!r}")
        if padding == "same" and stride[1] != 1:
            raise KilnValueError(f"{owner}: padding='same' needs stride 1 (the output could not "
                                 f"keep the input's size), got stride {stride[1]}")
    else:
        padding = _conv1d_pair(owner, "padding", padding, 0, 0)

    def compute(x):  # x [N, C_in, L]
        if weight.ndim != 3 or x.shape[1] != weight.shape[1] * groups \
                or weight.shape[0] % groups or weight.shape[2] == 0:
            raise ShapeError(f"{owner}: expected input [N, C_in, L] or [C_in, L] and weight "
                             f"[C_out, C_in / groups, k] (k >= 1) with C_in and C_out divisible "
                             f"by groups = {groups}, got input {_dims(input.shape)} and weight "
                             f"{_dims(weight.shape)}")
        if bias is not None and tuple(bias.shape) != (weight.shape[0],):
            raise ShapeError(f"{owner}: expected bias [C_out = {weight.shape[0]}], got "
                             f"{_dims(bias.shape)}")
        span = dilation[1] * (weight.shape[2] - 1)  # the dilated kernel's size - 1
        if padding == "valid":
            padded = x.shape[2]
        else:
            padded = x.shape[2] + (span if padding == "same" else 2 * padding[1])
        if padded < span + 1:
            raise ShapeError(f"{owner}: expected the padded input length ({padded}) to be at "
                             f"least the dilated kernel size ({span + 1}), got input "
                             f"{_dims(input.shape)} and weight {_dims(weight.shape)}")
        out = _composite.conv2d(_mint.unsqueeze(x, 2), _mint.unsqueeze(weight, 2), bias, stride,
                                padding, dilation, groups)
        return _mint.squeeze(out, 2)

    return batched(owner, input, 1, compute)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1): 2-d
    convolution of input [N, C, H, W] (or one sample [C, H, W]) with weight [O, C / groups, kH,
    kW]; ``padding`` is an int, a pair, or PyTorch's "valid" or "same"
    (kiln.mint._composite.conv2d); input and bias of the weight's dtype."""
    check_like_weight("conv2d", weight, bias, ("input", input))
    return batched("conv2d", input, 2, lambda x: _composite.conv2d(
        x, weight, bias, stride, padding, dilation, groups))


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0,  # noqa: A002
                     output_padding=0, groups=1, dilation=1):
    """conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
    dilation=1) (kiln.mint.conv_transpose2d): the transposed convolution (conv2d's gradient with
    respect to its input) of input [N, C_in, H, W] (or one sample [C_in, H, W]) with weight
    [C_in, C_out / groups, kH, kW], to H_out = (H - 1) * stride - 2 * padding + dilation * (kH -
    1) + output_padding + 1 (W_out likewise); ``output_padding`` is below stride or dilation;
    input and bias of the weight's dtype."""
    check_like_weight("conv_transpose2d", weight, bias, ("input", input))
    return batched("conv_transpose2d", input, 2, lambda x: _mint.conv_transpose2d(
        x, weight, bias, stride, padding, output_padding, groups, dilation))


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0,  # noqa: A002
                     output_padding=0, groups=1, dilation=1):
    """conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
    dilation=1): the transposed 1-d convolution of input [N, C_in, L] (or one sample [C_in, L])
    with weight [C_in, C_out / groups, k], to L_out = (L - 1) * stride - 2 * padding + dilation *
    (k - 1) + output_padding + 1; the arguments are ints or sequences of one. Computed as
    conv_transpose2d over a height of 1, which differentiates it; the weight's rank is checked
    here, the rest by conv_transpose2d."""
    owner = "conv_transpose1d"
    _floating_tensor(owner, "input", input)
    _floating_tensor(owner, "weight", weight)
    check_like_weight(owner, weight, bias, ("input", input))
    if weight.ndim != 3:
        raise ShapeError(f"{owner}: expected weight [C_in, C_out / groups, k], got "
                         f"{_dims(weight.shape)}")
    pairs = [_conv1d_pair(owner, name, value, height, low) for name, value, height, low in (
        ("stride", stride, 1, 1), ("padding", padding, 0, 0),
        ("output_padding", output_padding, 0, 0), ("dilation", dilation, 1, 1))]
    groups = checked_int(owner, "groups", groups, low=1)

    def compute(x):  # x [N, C_in, L]
        out = _mint.conv_transpose2d(_mint.unsqueeze(x, 2), _mint.unsqueeze(weight, 2), bias,
                                     pairs[0], pairs[1], pairs[2], groups, pairs[3])
        return _mint.squeeze(out, 2)

    return batched(owner, input, 1, compute)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1,  # noqa: A002
               ceil_mode=False, return_indices=False):
    """max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
    return_indices=False): the maximum over each window of input [N, C, H, W] (or one sample
    [C, H, W]) (kiln.mint.max_pool2d); with ``return_indices=True`` (values, indices)
    (kiln.mint.max_pool2d_with_indices), the int64 offset h * W + w in its [H, W] plane of the
    element each maximum took, which max_unpool2d takes."""
    owner = "max_pool2d"
    pool = (_mint.max_pool2d_with_indices if checked_bool(owner, "return_indices", return_indices)
            else _mint.max_pool2d)
    return batched(owner, input, 2, lambda x: pool(x, kernel_size, stride, padding, dilation,
                                                   ceil_mode))


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True, divisor_override=None):
    """avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
    count_include_pad=True, divisor_override=None): the mean over each window of input [N, C, H,
    W] (or one sample [C, H, W]) (kiln.mint.avg_pool2d); a ``divisor_override`` (a nonzero int)
    divides each window's sum in place of its size."""
    return batched("avg_pool2d", input, 2, lambda x: _mint.avg_pool2d(
        x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override))


def _pool1d(owner, input, kernel_size, stride, padding, dilation, ceil_mode,  # noqa: A002
            pool2d):
    """A 1-d pooling of input [N, C, L] (or one sample [C, L]) as ``pool2d(x, kernel, stride,
    padding, dilation)`` (a 2-d pooling, given the pairs) over a height of 1: kernel (1, k),
    stride (1, s), padding (0, p), dilation (1, d), so that 2-d indices h * W + w are offsets
    along L. The arguments (ints or sequences of one) are checked here, as PyTorch checks them,
    so that errors describe the 1-d shapes; with ``ceil_mode`` a partial window counts, so an
    input shorter than the kernel by less than the stride still gives one."""
    (kernel,) = checked_sizes(owner, "kernel_size", kernel_size, 1, 1)
    (stride,) = (kernel,) if stride is None else checked_sizes(owner, "stride", stride, 1, 1)
    (padding,) = checked_sizes(owner, "padding", padding, 1, 0)
    (dilation,) = checked_sizes(owner, "dilation", dilation, 1, 1)
    if padding > kernel // 2:
        raise KilnValueError(f"{owner}: expected padding at most half the kernel size, got "
                             f"padding={padding} and kernel_size={kernel}")
    span = dilation * (kernel - 1) + 1  # the dilated kernel's size

    def compute(x):  # x [N, C, L]
        if x.shape[2] + 2 * padding + (stride - 1 if ceil_mode else 0) < span:
            raise ShapeError(f"{owner}: the padded input length ({x.shape[2] + 2 * padding}) "
                             f"holds no window of the dilated kernel size ({span}), got input "
                             f"{_dims(input.shape)}")
        out = pool2d(_mint.unsqueeze(x, 2), (1, kernel), (1, stride), (0, padding),
                     (1, dilation))
        return squeezed(out, 2)

    return batched(owner, input, 1, compute)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1,  # noqa: A002
               ceil_mode=False, return_indices=False):
    """max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
    return_indices=False): the maximum over each window of input [N, C, L] (or one sample
    [C, L]), computed as max_pool2d over a height of 1; ``kernel_size``, ``stride``,
    ``padding`` and ``dilation`` are ints or sequences of one. With ``return_indices=True``,
    (values, indices): the int64 offset along L of the element each maximum took."""
    owner = "max_pool1d"
    pool = (_mint.max_pool2d_with_indices if checked_bool(owner, "return_indices", return_indices)
            else _mint.max_pool2d)
    return _pool1d(owner, input, kernel_size, stride, padding, dilation, ceil_mode,
                   lambda x, k, s, p, d: pool(x, k, s, p, d, ceil_mode))


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True):
    """avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
    count_include_pad=True): the mean over each window of input [N, C, L] (or one sample
    [C, L]), computed as avg_pool2d over a height of 1; ``kernel_size``, ``stride`` and
    ``padding`` are ints or sequences of one. PyTorch's avg_pool1d has no divisor_override."""
    _floating_tensor("avg_pool1d", "input", input)  # named here, not by avg_pool2d
    return _pool1d("avg_pool1d", input, kernel_size, stride, padding, 1, ceil_mode,
                   lambda x, k, s, p, _: _mint.avg_pool2d(x, k, s, p, ceil_mode,
                                                          count_include_pad))


def adaptive_avg_pool2d(input, output_size):  # noqa: A002
    """adaptive_avg_pool2d(input, output_size) (kiln.mint.adaptive_avg_pool2d)."""
    return _composite.adaptive_avg_pool2d(input, output_size)


def adaptive_max_pool2d(input, output_size, return_indices=False):  # noqa: A002
    """adaptive_max_pool2d(input, output_size, return_indices=False)
    (kiln.mint.adaptive_max_pool2d); with ``return_indices=True``, (values, indices), the
    indices offsets h * W + w in each [H, W] plane, as max_pool2d's."""
    return _composite.adaptive_max_pool2d(input, output_size, return_indices)


def _adaptive_pool1d(owner, input, output_size, maximum, return_indices=False):  # noqa: A002
    """A 1-d adaptive pooling of input [N, C, L] (or one sample [C, L]) to ``output_size`` (an
    int or a sequence of one) as the 2-d one over a height of 1 (its indices h * W + w are then
    offsets along L)."""
    (size,) = checked_sizes(owner, "output_size", output_size, 1, 0)
    return batched(owner, input, 1, lambda x: squeezed(_composite.adaptive_pool(
        owner, _mint.unsqueeze(x, 2), (1, size), maximum, return_indices), 2))


def adaptive_avg_pool1d(input, output_size):  # noqa: A002
    """adaptive_avg_pool1d(input, output_size): the mean of input [N, C, L] (or one sample
    [C, L]; floating point) over the adaptive windows of adaptive_avg_pool2d that make an output
    of ``output_size`` (an int or a sequence of one) along L."""
    return _adaptive_pool1d("adaptive_avg_pool1d", input, output_size, maximum=False)


def adaptive_max_pool1d(input, output_size, return_indices=False):  # noqa: A002
    """adaptive_max_pool1d(input, output_size, return_indices=False): the maximum of input
    [N, C, L] (or one sample [C, L]; floating point) over the adaptive windows along L; with
    ``return_indices=True``, (values, indices), the int64 offset along L of each maximum."""
    return _adaptive_pool1d("adaptive_max_pool1d", input, output_size, maximum=True,
                            return_indices=return_indices)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0,  # noqa: A002
                            dilation=1, ceil_mode=False, return_indices=False):
    """max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
    ceil_mode=False, return_indices=False): max_pool1d's (values, indices), whatever
    ``return_indices`` (PyTorch's spelling ignores it too)."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0,  # noqa: A002
                            dilation=1, ceil_mode=False, return_indices=False):
    """max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
    ceil_mode=False, return_indices=False): max_pool2d's (values, indices), whatever
    ``return_indices``."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0,  # noqa: A002
                            dilation=1, ceil_mode=False, return_indices=False):
    """max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
    ceil_mode=False, return_indices=False): max_pool3d's (values, indices), whatever
    ``return_indices``."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):  # noqa: A002
    """adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    adaptive_max_pool1d's (values, indices), whatever ``return_indices``."""
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):  # noqa: A002
    """adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    adaptive_max_pool2d's (values, indices), whatever ``return_indices``."""
    return adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):  # noqa: A002
    """adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    adaptive_max_pool3d's (values, indices), whatever ``return_indices``."""
    return adaptive_max_pool3d(input, output_size, True)


def _lp_norm_type(owner, norm_type):
    """An LP pooling's ``norm_type`` as a float: a KilnTypeError unless it is a real number, a
    KilnValueError for 0 (PyTorch's check). Shared with kiln.nn's LPPool cells, which check it
    when built."""
    p = check_real(owner, "norm_type", norm_type)
    if p == 0:
        raise KilnValueError(f"{owner}: norm_type must be a non-zero value, got {norm_type}")
    return p


def _lp_pool(owner, input, norm_type, kernel, max_pool, avg_pool):  # noqa: A002
    """PyTorch's power-average pooling of ``input`` over windows of ``kernel`` (a tuple of
    sizes), composed as PyTorch composes it: the sum of x^p over each window as avg_pool(x^p)
    times the kernel's size (with ceil_mode, a partial window's mean times the whole kernel's
    size), kept as sign(s) * relu(|s|), which is s but passes no gradient back where s = 0
    (relu's is 0 there, where the power's is infinite), then to the power 1 / p. For p = inf it
    is max_pool(|x|), for p = -inf -max_pool(-|x|)."""
    _floating_tensor(owner, "input", input)
    p = _lp_norm_type(owner, norm_type)
    if p == math.inf:
        return max_pool(_mint.abs(input))
    if p == -math.inf:
        return -max_pool(-_mint.abs(input))
    means = avg_pool(_mint.pow(input, p))
    sums = (_mint.sign(means) * _mint.relu(_mint.abs(means))) * math.prod(kernel)
    return _mint.pow(sums, 1.0 / p)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002
    """lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False): (sum over each
    window of x^p)^(1 / p) for p = ``norm_type`` (nonzero; inf: the maximum of |x|) over input
    [N, C, L] (or one sample [C, L]), without padding, computed as PyTorch's (_lp_pool): an odd
    integer p over a window of negative sum, or a fractional one over negative elements, gives
    NaN there, as in PyTorch."""
    kernel = checked_sizes("lp_pool1d", "kernel_size", kernel_size, 1, 1)
    return _lp_pool("lp_pool1d", input, norm_type, kernel,
                    lambda x: max_pool1d(x, kernel, stride, 0, 1, ceil_mode),
                    lambda x: avg_pool1d(x, kernel, stride, 0, ceil_mode))


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002
    """lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False): lp_pool1d's power
    average over the windows of input [N, C, H, W] (or one sample [C, H, W]); ``kernel_size``
    and ``stride`` are ints or pairs."""
    kernel = checked_sizes("lp_pool2d", "kernel_size", kernel_size, 2, 1)
    return _lp_pool("lp_pool2d", input, norm_type, kernel,
                    lambda x: max_pool2d(x, kernel, stride, 0, 1, ceil_mode),
                    lambda x: avg_pool2d(x, kernel, stride, 0, ceil_mode))


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002
    """lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False): lp_pool1d's power
    average over the windows of input [N, C, D, H, W] (or one sample [C, D, H, W]);
    ``kernel_size`` and ``stride`` are ints or triples."""
    kernel = checked_sizes("lp_pool3d", "kernel_size", kernel_size, 3, 1)
    return _lp_pool("lp_pool3d", input, norm_type, kernel,
                    lambda x: max_pool3d(x, kernel, stride, 0, 1, ceil_mode),
                    lambda x: avg_pool3d(x, kernel, stride, 0, ceil_mode))


def _unpool_sizes(owner, x, kernel, stride, padding, output_size):
    """The spatial sizes of max_unpool's output for x [N, C, *spatial]: by default (size - 1) *
    stride - 2 * padding + kernel per dimension; an ``output_size`` (the spatial sizes, or with
    N and C before them) must be strictly between that default - stride and default + stride in
    each dimension (PyTorch's rule: the sizes a pooling with these arguments maps to x's)."""
    spatial = len(kernel)
    default = [(size - 1) * s - 2 * p + k
               for size, k, s, p in zip(x.shape[2:], kernel, stride, padding)]
    if output_size is None:
        sizes = default
    else:
        if not isinstance(output_size, (tuple, list)):
            raise KilnTypeError(f"{owner}: expected output_size to be None or a sequence of "
                                f"ints, got {type(output_size).__name__} {output_size!r}")
        if len(output_size) not in (spatial, spatial + 2):
            raise KilnValueError(f"{owner}: expected output_size of {spatial} or {spatial + 2} "
                                 f"sizes, got {len(output_size)}: {output_size!r}")
        sizes = [checked_int(owner, "output_size", size) for size in output_size[-spatial:]]
        for dim, (size, centre, s) in enumerate(zip(sizes, default, stride)):
            if not centre - s < size < centre + s:
                raise KilnValueError(f"{owner}: invalid output_size {output_size!r}: expected "
                                     f"spatial dimension {dim} strictly between {centre - s} "
                                     f"and {centre + s}, got {size}")
    if min(sizes) < 1:
        raise ShapeError(f"{owner}: expected an output of positive sizes, got {sizes} for input "
                         f"{_dims(x.shape)}, kernel_size {kernel}, stride {stride} and padding "
                         f"{padding}")
    return sizes


def _max_unpool(owner, input, indices, kernel_size, stride, padding, output_size,  # noqa: A002
                spatial):
    """max_unpool1d / 2d / 3d (``spatial`` 1, 2 or 3): zeros of the output's shape with each
    element of input [N, C, *spatial] (or one sample [C, *spatial]) written at its offset in
    indices (int64, input's shape) within its plane or volume (kiln.mint.scatter, which
    differentiates it: the gradient of input is the output's gradient at the indices)."""
    kernel = checked_sizes(owner, "kernel_size", kernel_size, spatial, 1)
    stride = kernel if stride is None else checked_sizes(owner, "stride", stride, spatial, 1)
    padding = checked_sizes(owner, "padding", padding, spatial, 0)
    if checked_tensor(owner, "indices", indices).dtype != _C.dtype.int64:
        raise DTypeError(f"{owner}: expected int64 indices, got {indices.dtype.name}")
    if tuple(indices.shape) != tuple(checked_tensor(owner, "input", input).shape):
        raise ShapeError(f"{owner}: expected indices of the input's shape {_dims(input.shape)}, "
                         f"got {_dims(indices.shape)}")

    def compute(x):  # x [N, C, *spatial]
        if 0 in x.shape[1:]:
            raise ShapeError(f"{owner}: expected input with non-zero sizes in every dimension "
                             f"but the batch's, got {_dims(input.shape)}")
        sizes = _unpool_sizes(owner, x, kernel, stride, padding, output_size)
        lead, plane = list(x.shape[:2]), math.prod(sizes)
        flat = lead + [math.prod(x.shape[2:])]
        # scatter takes a negative index from the end, where PyTorch refuses it: one past the
        # plane makes scatter raise its KilnIndexError for it, as for any index >= the plane.
        at = _mint.where(indices.reshape(flat) < 0, plane, indices.reshape(flat))
        out = _mint.scatter(_mint.zeros(lead + [plane], dtype=x.dtype), 2, at, x.reshape(flat))
        return out.reshape(lead + sizes)

    return batched(owner, input, spatial, compute)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0,  # noqa: A002
                 output_size=None):
    """max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    max_pool1d's partial inverse. input [N, C, L] (or one sample [C, L]) and int64 indices of
    its shape (max_pool1d's, offsets along the output's length) give zeros [N, C, L_out] with
    each input element at its index; L_out is (L - 1) * stride - 2 * padding + kernel_size,
    or ``output_size`` ([L_out] or [N, C, L_out]) strictly within stride of it. An index
    outside [0, L_out) is a KilnIndexError (raised by the scatter, asynchronously, naming a
    negative index as L_out)."""
    return _max_unpool("max_unpool1d", input, indices, kernel_size, stride, padding,
                       output_size, 1)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0,  # noqa: A002
                 output_size=None):
    """max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    max_pool2d's partial inverse. input [N, C, H, W] (or one sample [C, H, W]) and int64
    indices of its shape (max_pool2d's, offsets h * W_out + w in the output's planes) give zeros
    [N, C, H_out, W_out] with each input element at its index; H_out is (H - 1) * stride - 2 *
    padding + kernel_size (W_out likewise), or ``output_size`` ([H_out, W_out] or [N, C, H_out,
    W_out]) strictly within stride of it. An index outside [0, H_out * W_out) is a
    KilnIndexError (raised by the scatter, asynchronously, naming a negative index as H_out *
    W_out)."""
    return _max_unpool("max_unpool2d", input, indices, kernel_size, stride, padding,
                       output_size, 2)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0,  # noqa: A002
                 output_size=None):
    """max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    max_pool3d's partial inverse. input [N, C, D, H, W] (or one sample [C, D, H, W]) and int64
    indices of its shape (max_pool3d's, offsets d * H_out * W_out + h * W_out + w in the
    output's volumes) give zeros [N, C, D_out, H_out, W_out] with each input element at its
    index; D_out is (D - 1) * stride - 2 * padding + kernel_size (H_out and W_out likewise), or
    ``output_size`` (the three sizes, or with N and C before them) strictly within stride of it.
    An index outside the volume is a KilnIndexError (raised by the scatter, asynchronously)."""
    return _max_unpool("max_unpool3d", input, indices, kernel_size, stride, padding,
                       output_size, 3)


def pad(input, pad, mode="constant", value=None):  # noqa: A002
    """pad(input, pad, mode='constant', value=None) (kiln.mint.pad)."""
    return _mint.pad(input, pad, mode, value)


def one_hot(tensor, num_classes=-1):
    """one_hot(tensor, num_classes=-1): int64 [..., num_classes] with a 1 at each index of the
    integer ``tensor``; num_classes=-1 is max + 1. As PyTorch's, the values are checked to be in
    [0, num_classes) (a KilnValueError), which reads them: under kiln.jit, where values are not
    known at the trace, ``num_classes`` must be given and an index outside the range gives a row
    of zeros."""
    owner = "one_hot"
    checked_tensor(owner, "tensor", tensor)
    if tensor.dtype.is_floating_point or tensor.dtype == _C.dtype.bool:
        raise DTypeError(f"one_hot: expected an integer tensor of class indices, got "
                         f"{tensor.dtype.name}")
    num_classes = checked_int(owner, "num_classes", num_classes, low=-1)
    tracing = _C.jit.is_tracing()
    if num_classes == -1 and tracing:
        raise KilnValueError("one_hot: num_classes=-1 takes the number of classes from the "
                             "values, which kiln.jit does not have at the trace: pass num_classes")
    if not tracing and tensor.numel() > 0:
        low, high = _mint.min(tensor).item(), _mint.max(tensor).item()
        if num_classes == -1:
            num_classes = high + 1
        if low < 0 or high >= num_classes:
            raise KilnValueError(f"one_hot: expected class values in [0, {num_classes}), got "
                                 f"values from {low} to {high}")
    elif num_classes == -1:
        raise KilnValueError("one_hot: cannot infer the number of classes of an empty tensor: "
                             "pass num_classes")
    # In int64: an int8 index tensor may ask for more classes than int8 counts.
    classes = _mint.arange(num_classes, dtype=_C.dtype.int64)
    return (_mint.unsqueeze(tensor.to(_C.dtype.int64), -1) == classes).to(_C.dtype.int64)


def _pixel_factor(owner, name, factor, input):  # noqa: A002
    checked_tensor(owner, "input", input)
    factor = checked_int(owner, name, factor, low=1)
    if input.ndim < 3:
        raise ShapeError(f"{owner}: expected input [..., C, H, W] of at least 3 dimensions, got "
                         f"{_dims(input.shape)}")
    return factor


def pixel_shuffle(input, upscale_factor):  # noqa: A002
    """pixel_shuffle(input, upscale_factor): [..., C * r^2, H, W] -> [..., C, H * r, W * r]."""
    owner = "pixel_shuffle"
    r = _pixel_factor(owner, "upscale_factor", upscale_factor, input)
    *batch, c, h, w = input.shape
    if c % (r * r):
        raise ShapeError(f"{owner}: expected the channel dimension (-3) of {_dims(input.shape)} "
                         f"to be divisible by upscale_factor^2 = {r * r}")
    n = len(batch)
    x = input.reshape(batch + [c // (r * r), r, r, h, w])
    x = x.permute(list(range(n)) + [n, n + 3, n + 1, n + 4, n + 2])
    return x.reshape(batch + [c // (r * r), h * r, w * r])


def pixel_unshuffle(input, downscale_factor):  # noqa: A002
    """pixel_unshuffle(input, downscale_factor): [..., C, H * r, W * r] -> [..., C * r^2, H, W],
    the inverse of pixel_shuffle."""
    owner = "pixel_unshuffle"
    r = _pixel_factor(owner, "downscale_factor", downscale_factor, input)
    *batch, c, h, w = input.shape
    if h % r or w % r:
        raise ShapeError(f"{owner}: expected the height and width of {_dims(input.shape)} to be "
                         f"divisible by downscale_factor = {r}")
    n = len(batch)
    x = input.reshape(batch + [c, h // r, r, w // r, r])
    x = x.permute(list(range(n)) + [n, n + 2, n + 4, n + 1, n + 3])
    return x.reshape(batch + [c * r * r, h // r, w // r])


def _repeat_heads(x, times):
    """[..., H, S, E] -> [..., H * times, S, E], each head repeated ``times`` times in a row
    (PyTorch's repeat_interleave along dim -3)."""
    shape = list(x.shape)
    expanded = _mint.unsqueeze(x, -3).expand(shape[:-2] + [times] + shape[-2:])
    return expanded.reshape(shape[:-3] + [shape[-3] * times] + shape[-2:])


def _masked_softmax(scores):
    """softmax over the last dim of scores that masks made -inf, with 0 for a row whose every
    score is -inf (a query that may attend to nothing: a fully padded sequence) where softmax
    would give NaN (0 / 0), as PyTorch's attention does; the where() keeps those rows' gradient 0
    (Note [Gradients through where]), so the NaN does not reach every weight's gradient."""
    empty = _mint.amax(scores, -1, True) == -math.inf
    return _mint.where(empty, 0.0, _mint.softmax(_mint.where(empty, 0.0, scores), -1))


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, *, scale=None, enable_gqa=False):
    """scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
    is_causal=False, *, scale=None, enable_gqa=False): softmax(q @ k^T * scale + mask) @ v for
    query [..., L, E], key [..., S, E] and value [..., S, Ev]; ``scale`` defaults to
    1 / sqrt(E). A bool ``attn_mask`` marks with True what may be attended to (the inverse of
    MultiheadAttention's masks), a floating one is added to the scores; ``is_causal`` lets
    position i attend to positions j <= i (with an attn_mask, a KilnValueError). A row that may
    attend to nothing is 0, as PyTorch's. Dropout (p = ``dropout_p``) always applies, as
    PyTorch's: pass 0 outside training. ``enable_gqa`` repeats the key and value heads (dim -3)
    to the query's number. 16-bit floats are computed in float32 and rounded once at the end, as
    PyTorch's CPU kernels do: rounding the scores, the weights and the sum would each add an
    error."""
    owner = "scaled_dot_product_attention"
    dtypes = []
    for name, x in (("query", query), ("key", key), ("value", value)):
        dtypes.append(_floating_tensor(owner, name, x))
        if x.ndim < 2:
            raise ShapeError(f"{owner}: expected {name} of at least 2 dimensions [..., seq, "
                             f"embed], got {_dims(x.shape)}")
    if is_causal and attn_mask is not None:
        raise KilnValueError(f"{owner}: pass either attn_mask or is_causal=True, not both")
    if enable_gqa:
        heads, kv_heads = query.shape[-3], key.shape[-3]
        if kv_heads == 0 or heads % kv_heads or value.shape[-3] != kv_heads:
            raise ShapeError(f"{owner}: enable_gqa needs the query's heads ({heads}) to be a "
                             f"multiple of the key's and value's ({kv_heads}, "
                             f"{value.shape[-3]})")
        key, value = _repeat_heads(key, heads // kv_heads), _repeat_heads(value, heads // kv_heads)
    factor = 1.0 / math.sqrt(query.shape[-1]) if scale is None else check_real(owner, "scale",
                                                                               scale)
    query, key, value = _widened(query), _widened(key), _widened(value)
    scores = _mint.matmul(query, key.transpose(-2, -1)) * factor
    length, source = query.shape[-2], key.shape[-2]
    if is_causal:
        attn_mask = _mint.tril(_mint.ones(length, source, dtype=_C.dtype.bool))
    if attn_mask is not None:
        checked_tensor(owner, "attn_mask", attn_mask)
        if attn_mask.dtype == _C.dtype.bool:
            scores = _mint.masked_fill(scores, _mint.logical_not(attn_mask), -math.inf)
        elif attn_mask.dtype.is_floating_point:
            scores = scores + _cast(attn_mask, scores.dtype)
        else:
            raise DTypeError(f"{owner}: expected a bool attn_mask (True = attend) or a "
                             f"floating-point one (added to the scores), got "
                             f"{attn_mask.dtype.name}")
        # A causal mask leaves every row its first score, so no row is empty: plain softmax,
        # without _masked_softmax's four more passes over the scores.
        weights = _mint.softmax(scores, -1) if is_causal else _masked_softmax(scores)
    else:
        weights = _mint.softmax(scores, -1)
    if dropout_p > 0:
        weights = _mint.dropout(weights, dropout_p, True)
    return _cast(_mint.matmul(weights, value), functools.reduce(_C.promote_types, dtypes))


# ------------------------------------------------------------------------------------------------
# Normalization and distances


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):  # noqa: A002
    """layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5)
    (kiln.mint.layer_norm)."""
    return _mint.layer_norm(input, normalized_shape, weight, bias, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):  # noqa: A002
    """rms_norm(input, normalized_shape, weight=None, eps=None) (kiln.mint.rms_norm); eps=None is
    PyTorch's: the machine epsilon of the dtype computed in (float64's for float64, float32's for
    the others, 16-bit floats included)."""
    if eps is None:
        float64 = checked_tensor("rms_norm", "input", input).dtype == _C.dtype.float64
        eps = 2.0 ** -52 if float64 else 2.0 ** -23
    return _mint.rms_norm(input, normalized_shape, weight, eps)


def _channel_operand(owner, name, value, channels, ndim):
    """``value`` (None, or a kiln tensor [channels]) shaped to broadcast along dim 1 of an
    ``ndim``-d input."""
    if value is None:
        return None
    checked_tensor(owner, name, value)
    if tuple(value.shape) != (channels,):
        raise ShapeError(f"{owner}: expected {name} of shape [{channels}] (one per channel), got "
                         f"{_dims(value.shape)}")
    return value.reshape([channels] + [1] * (ndim - 2))


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):  # noqa: A002
    """group_norm(input, num_groups, weight=None, bias=None, eps=1e-5): input [N, C, ...]
    normalized over each group of C / num_groups channels (and the dimensions after C): (x -
    mean) / sqrt(var + eps) with the biased variance, times weight[C] plus bias[C]."""
    owner = "group_norm"
    dtype = _floating_tensor(owner, "input", input)
    if input.ndim < 2:
        raise ShapeError(f"{owner}: expected input [N, C, ...] of at least 2 dimensions, got "
                         f"{_dims(input.shape)}")
    groups = checked_int(owner, "num_groups", num_groups, low=1)
    n, channels = input.shape[0], input.shape[1]
    if channels % groups:
        raise KilnValueError(f"{owner}: expected the channels of input {_dims(input.shape)} to "
                             f"be divisible by num_groups={groups}")
    eps = check_real(owner, "eps", eps)
    weight = _channel_operand(owner, "weight", weight, channels, input.ndim)
    bias = _channel_operand(owner, "bias", bias, channels, input.ndim)
    x = _widened(input)
    grouped = x.reshape(n, groups, math.prod(input.shape[1:]) // groups)
    mean = _mint.mean(grouped, 2, keepdim=True)
    var = _mint.var(grouped, 2, correction=0, keepdim=True)
    y = ((grouped - mean) * _mint.rsqrt(var + eps)).reshape(input.shape)
    if weight is not None:
        y = y * _cast(weight, y.dtype)
    if bias is not None:
        y = y + _cast(bias, y.dtype)
    return _cast(y, dtype)


def batch_norm(input, running_mean, running_var, weight=None, bias=None,  # noqa: A002
               training=False, momentum=0.1, eps=1e-5):
    """batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
    momentum=0.1, eps=1e-5): input [N, C, ...] normalized per channel, (x - mean) / sqrt(var +
    eps) * weight[C] + bias[C].

    While ``training`` mean and var are the batch's (over every dimension but C; var biased), and
    the running statistics [C] (both given or both None, as in PyTorch) are updated in place
    under no_grad: running = (1 - momentum) * running + momentum * batch statistic, with the
    unbiased batch variance for running_var (also at each call of a kiln.jit function). Otherwise
    the running statistics normalize (they must be given). Training on one value per channel is a
    KilnValueError (its variance is undefined)."""
    owner = "batch_norm"
    dtype = _floating_tensor(owner, "input", input)
    if input.ndim < 2:
        raise ShapeError(f"{owner}: expected input [N, C, ...] of at least 2 dimensions, got "
                         f"{_dims(input.shape)}")
    if (running_mean is None) != (running_var is None):
        raise KilnValueError(f"{owner}: running_mean and running_var must both be None or both "
                             f"be given")
    if not training and running_mean is None:
        raise KilnValueError(f"{owner}: running_mean and running_var must be given when not "
                             f"training (they normalize)")
    momentum = check_real(owner, "momentum", momentum)
    eps = check_real(owner, "eps", eps)
    channels, ndim = input.shape[1], input.ndim
    mean_view = _channel_operand(owner, "running_mean", running_mean, channels, ndim)
    var_view = _channel_operand(owner, "running_var", running_var, channels, ndim)
    weight = _channel_operand(owner, "weight", weight, channels, ndim)
    bias = _channel_operand(owner, "bias", bias, channels, ndim)
    x = _widened(input)
    if training:
        count = math.prod(input.shape) // channels if channels else 0
        if count == 1:
            raise KilnValueError(f"{owner}: expected more than 1 value per channel when "
                                 f"training, got input {_dims(input.shape)}")
        dims = [0] + list(range(2, ndim))
        mean = _mint.mean(x, dims, keepdim=True)
        var = _mint.var(x, dims, correction=0, keepdim=True)
        if running_mean is not None and count > 0:
            with no_grad():
                # The unbiased variance from its own reduction, not var * n / (n - 1): a number
                # from the batch size would be a constant of a kiln.jit graph.
                unbiased = _mint.var(x, dims, correction=1)
                running_mean[...] = (running_mean * (1 - momentum)
                                     + mean.reshape(channels) * momentum)
                running_var[...] = running_var * (1 - momentum) + unbiased * momentum
    else:
        mean, var = _cast(mean_view, x.dtype), _cast(var_view, x.dtype)
    scale = _mint.rsqrt(var + eps)
    if weight is not None:
        scale = scale * _cast(weight, x.dtype)
    y = (x - mean) * scale
    if bias is not None:
        y = y + _cast(bias, x.dtype)
    return _cast(y, dtype)


def instance_norm(input, running_mean=None, running_var=None, weight=None,  # noqa: A002
                  bias=None, use_input_stats=True, momentum=0.1, eps=1e-5):
    """instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
    use_input_stats=True, momentum=0.1, eps=1e-5): input [N, C, ...] normalized per sample and
    channel, computed as PyTorch's: batch_norm of the input viewed as one sample of N * C
    channels, with the [C] operands repeated N times. With ``use_input_stats`` each (sample,
    channel) is normalized over its own values (more than one: a KilnValueError otherwise),
    and running statistics, when given, move by ``momentum`` towards the mean over the samples
    of their per-channel means and unbiased variances (in place, under no_grad); without, the
    running statistics (which must be given) normalize."""
    owner = "instance_norm"
    _floating_tensor(owner, "input", input)
    use_input_stats = checked_bool(owner, "use_input_stats", use_input_stats)
    if input.ndim < 2:
        raise ShapeError(f"{owner}: expected input [N, C, ...] of at least 2 dimensions, got "
                         f"{_dims(input.shape)}")
    if use_input_stats and math.prod(input.shape[2:]) == 1:
        raise KilnValueError(f"{owner}: expected more than 1 spatial element when using the "
                             f"input's statistics, got input {_dims(input.shape)}")
    if not use_input_stats and (running_mean is None or running_var is None):
        raise KilnValueError(f"{owner}: expected running_mean and running_var when "
                             f"use_input_stats=False (they normalize)")
    n, channels = input.shape[:2]

    def repeated(name, value):
        if value is None:
            return None
        if tuple(checked_tensor(owner, name, value).shape) != (channels,):
            raise ShapeError(f"{owner}: expected {name} of shape [{channels}] (one per channel), "
                             f"got {_dims(value.shape)}")
        return value.repeat(n)

    mean, var, scale, shift = (repeated(name, value) for name, value in (
        ("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
        ("bias", bias)))
    flat = input.reshape([1, n * channels] + list(input.shape[2:]))
    out = batch_norm(flat, mean, var, scale, shift, use_input_stats, momentum, eps)
    if use_input_stats and mean is not None and n > 0:
        # batch_norm moved each sample's copy; the running statistics take their mean.
        with no_grad():
            running_mean[...] = _mint.mean(mean.reshape(n, channels), 0)
            running_var[...] = _mint.mean(var.reshape(n, channels), 0)
    return out.reshape(input.shape)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):  # noqa: A002
    """normalize(input, p=2.0, dim=1, eps=1e-12, out=None): x / max(||x||_p, eps) along ``dim``
    (kiln.mint.vector_norm), written into ``out`` when given."""
    norm = _mint.vector_norm(input, p, dim, True)
    return _mint.div(input, _mint.clamp(norm, min=check_real("normalize", "eps", eps)), out=out)


def _broadcast_pair(owner, x1, x2):
    """x1 and x2 in their promoted floating dtype, expanded to their broadcast shape."""
    checked_tensor(owner, "x1", x1)
    checked_tensor(owner, "x2", x2)
    dtype = _C.promote_types(x1.dtype, x2.dtype)
    if not dtype.is_floating_point:
        raise DTypeError(f"{owner}: expected floating-point inputs, got {x1.dtype.name} and "
                         f"{x2.dtype.name}")
    a, b = list(x1.shape), list(x2.shape)
    a, b = [1] * (len(b) - len(a)) + a, [1] * (len(a) - len(b)) + b
    if any(i != j and 1 not in (i, j) for i, j in zip(a, b)):
        raise ShapeError(f"{owner}: x1 {_dims(x1.shape)} and x2 {_dims(x2.shape)} do not "
                         f"broadcast")
    shape = [j if i == 1 else i for i, j in zip(a, b)]
    return _cast(x1, dtype).expand(shape), _cast(x2, dtype).expand(shape)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """cosine_similarity(x1, x2, dim=1, eps=1e-8): sum(x1 / max(||x1||, eps) * x2 / max(||x2||,
    eps)) along ``dim`` of the broadcast inputs, as PyTorch computes it (each side divided by its
    norm first, so the result stays in [-1, 1]). Its gradient is PyTorch's too: the norms are
    clamped at eps without cutting their gradient."""
    a, b = _broadcast_pair("cosine_similarity", x1, x2)
    eps = check_real("cosine_similarity", "eps", eps)

    def scaled(x):
        norm = _mint.vector_norm(x, 2, dim, True)
        # PyTorch clamps a copy of the norm in place under no_grad: the value max(norm, eps)
        # with the gradient of norm.
        return x / (norm + (_mint.clamp(norm, min=eps) - norm).detach())

    return _mint.sum(scaled(a) * scaled(b), dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False): ||x1 - x2 + eps||_p over the
    last dimension of the broadcast inputs (kiln.mint.vector_norm)."""
    a, b = _broadcast_pair("pairwise_distance", x1, x2)
    return _mint.vector_norm(a - b + check_real("pairwise_distance", "eps", eps), p, -1, keepdim)
