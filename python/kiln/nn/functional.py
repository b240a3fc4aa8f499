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
conv1d, conv2d, conv_transpose1d, conv_transpose2d, conv3d and conv_transpose3d (on the Conv3D
ops, kiln/nn/_volume_functions.py, with the 3-d pools, which compose the 2-d ones), pad,
interpolate (PyTorch's modes and antialias, kiln/nn/upsampling.py) and its deprecated spellings
upsample, upsample_nearest, upsample_bilinear, embedding, embedding_bag
(kiln/nn/_embedding_functions.py), unfold and fold (im2col and col2im, kiln/nn/fold.py), affine_grid
and grid_sample (kiln/nn/_grid_sampling.py), one_hot, pixel_shuffle, pixel_unshuffle,
channel_shuffle, native_channel_shuffle, gumbel_softmax, scaled_dot_product_attention,
multi_head_attention_forward (kiln/nn/attention.py). Pooling, of input [N, C, L], [N, C, H, W] or
[N, C, D, H, W] (or one sample without N): max_pool1d, max_pool2d, max_pool3d (with
``return_indices``), avg_pool1d, avg_pool2d, avg_pool3d (with ``divisor_override``), lp_pool1d / 2d
/ 3d (power averages), adaptive_avg_pool1d / 2d / 3d, adaptive_max_pool1d / 2d / 3d (with
``return_indices``), PyTorch's max_pool1d_with_indices / 2d / 3d and
adaptive_max_pool1d_with_indices / 2d / 3d (which return the indices whatever ``return_indices``),
fractional_max_pool2d / 3d (and their _with_indices), max_unpool1d, max_unpool2d, max_unpool3d (the
1-d ones are the 2-d ones over a height of one; kiln/nn/_pooling_functions.py). Normalization and
distances: layer_norm, rms_norm, group_norm, batch_norm, instance_norm, normalize,
cosine_similarity, pairwise_distance (kiln/nn/_normalization_functions.py), local_response_norm,
pdist.
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
- pad's copying modes ("reflect", "replicate", "circular") crop with negative pads as
  PyTorch's do (Note [Negative pads]), but a crop may leave a dimension empty (PyTorch's reflect
  and replicate refuse an output size below 1), and circular padding that would wrap more than
  once around what a crop leaves is a ShapeError (PyTorch's raises or returns memory it never
  wrote).
- max_unpool1d / max_unpool2d / max_unpool3d raise an index outside the output's plane
  (volume) asynchronously (a KilnIndexError of the scatter that writes them, at the next sync
  point) rather than at the call.
"""

import functools
import math
import warnings

from .. import _C, mint as _mint
from .._checks import as_int, checked_bool, checked_int, wrap_dim
from ..autograd import is_grad_enabled
from ..errors import DTypeError, KilnValueError, ShapeError
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
                               checked_tensor)
from ._layers_more import (  # noqa: F401  (in a module of their own, beside their cells)
    channel_shuffle, fractional_max_pool2d, fractional_max_pool2d_with_indices,
    fractional_max_pool3d, fractional_max_pool3d_with_indices, gumbel_softmax,
    local_response_norm, native_channel_shuffle, pdist, upsample, upsample_bilinear,
    upsample_nearest)
from ._normalization_functions import (  # noqa: F401  (in a module of their own)
    batch_norm, cosine_similarity, group_norm, instance_norm, layer_norm, normalize,
    pairwise_distance, rms_norm)
from ._pooling_functions import (  # noqa: F401  (in a module of their own)
    adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_max_pool1d,
    adaptive_max_pool1d_with_indices, adaptive_max_pool2d, adaptive_max_pool2d_with_indices,
    adaptive_max_pool3d_with_indices, avg_pool1d, avg_pool2d, lp_pool1d, lp_pool2d, lp_pool3d,
    max_pool1d, max_pool1d_with_indices, max_pool2d, max_pool2d_with_indices,
    max_pool3d_with_indices, max_unpool1d, max_unpool2d, max_unpool3d)
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


_COPYING_MODES = ("reflect", "replicate", "circular")


def pad(input, pad, mode="constant", value=None):  # noqa: A002
    """pad(input, pad, mode='constant', value=None): kiln.mint.pad, with PyTorch's negative pads
    in every mode: a negative pad removes that many elements from its side (signs may mix), a
    ShapeError where a dimension would be left with a negative size. As in PyTorch, a ``value``
    other than None (or 0) is a KilnValueError in modes "reflect", "replicate" and "circular",
    which copy the input's elements instead."""
    if mode in _COPYING_MODES and value is not None and value != 0:
        raise KilnValueError(f'pad: padding mode "{mode}" doesn\'t take in value argument (only '
                             f'"constant" fills with a value), got value={value!r}')
    pads = _int_pads(pad)
    if mode not in _COPYING_MODES or pads is None or min(pads, default=0) >= 0:
        return _mint.pad(input, pad, mode, value)
    return _cropping_pad(input, pads, mode)


def _int_pads(pad):
    """``pad`` as a list of ints, or None when it is not a list or tuple of ints (kiln.mint.pad
    then says what it should be)."""
    if not isinstance(pad, (list, tuple)):
        return None
    pads = [as_int(p) for p in pad]
    return None if None in pads else pads


# Note [Negative pads]
# kiln.mint.pad crops with negative pads in constant mode only; F.pad crops in the other modes
# around it, in PyTorch's order. PyTorch's reflect and replicate kernels map each output position
# to a position of the whole input, so a crop on one side leaves what the other side mirrors or
# repeats as it was: they are padded by the positive pads first and cropped after (the result
# [c, d, c, b, a] of [a, b, c, d] padded (-2, 3) in reflect mode reflects past the cropped a and
# b). PyTorch's circular padding copies the cropped input and wraps around it: cropped first.


def _cropping_pad(input, pads, mode):  # noqa: A002
    """pad in a copying ``mode`` with negative ``pads`` among the ints ``pads``; see Note
    [Negative pads]."""
    owner = "pad"
    checked_tensor(owner, "input", input)
    if len(pads) % 2 or len(pads) > 2 * input.ndim:
        return _mint.pad(input, pads, mode)  # refused there, with what the list should be
    sides = [(input.ndim - 1 - i // 2, pads[i], pads[i + 1]) for i in range(0, len(pads), 2)]
    for dim, before, after in sides:
        size = input.shape[dim]
        if size + before + after < 0:
            raise ShapeError(f"{owner}: padding ({before}, {after}) of dimension {dim} of size "
                             f"{size} gives a negative size {size + before + after}")
    grown = [max(p, 0) for p in pads]
    if mode != "circular":
        return _cropped(owner, _mint.pad(input, grown, mode), sides)
    x = _cropped(owner, input, sides)
    for dim, before, after in sides:
        left = x.shape[dim]
        if max(before, after) > left:
            raise ShapeError(f"{owner}: circular padding ({before}, {after}) of dimension {dim} "
                             f"of size {input.shape[dim]} wraps more than once around what the "
                             f"crop leaves ({left}): expected each positive pad at most {left}")
    return _mint.pad(x, grown, mode)


def _cropped(owner, x, sides):
    """``x`` without the elements that the negative pads of ``sides`` (dim, before, after)
    remove."""
    for dim, before, after in sides:
        start, stop = max(-before, 0), x.shape[dim] - max(-after, 0)
        if stop < start:
            raise ShapeError(f"{owner}: padding ({before}, {after}) crops dimension {dim} of "
                             f"size {x.shape[dim]} by more than its size")
        x = x.narrow(dim, start, stop - start)
    return x


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
    amp, amp_dtype = _C.autocast.state()
    if amp and _C.dtype.float64 not in dtypes:
        # PyTorch's autocast lists attention as lower-precision: the inputs rounded to its
        # dtype, then computed as 16-bit inputs are (in float32, rounded once), autocast off.
        previous = _C.autocast.set_state(False, amp_dtype)
        try:
            return scaled_dot_product_attention(
                query.to(amp_dtype), key.to(amp_dtype), value.to(amp_dtype), attn_mask,
                dropout_p, is_causal, scale=factor)
        finally:
            _C.autocast.set_state(*previous)
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
