"""Activations, losses, pooling and rounding composed of kiln.mint ops in Python, with PyTorch's
signatures, values and gradients:

    leaky_relu(input, negative_slope=0.01)      elu(input, alpha=1.0)
    softplus(input, beta=1.0, threshold=20.0)   hardtanh(input, min_val=-1.0, max_val=1.0)
    l1_loss(input, target, reduction="mean")
    smooth_l1_loss(input, target, reduction="mean", beta=1.0)
    huber_loss(input, target, reduction="mean", delta=1.0)
    binary_cross_entropy(input, target, weight=None, reduction="mean")
    binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean", pos_weight=None)
    cross_entropy(logits, target, reduction="mean", ignore_index=-100, label_smoothing=0.0, *,
                  weight=None)
    nll_loss(log_probs, target, reduction="mean", ignore_index=-100, *, weight=None)
    adaptive_avg_pool2d(input, output_size)
    adaptive_max_pool2d(input, output_size, return_indices=False)
    conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1)
    conv3d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1)
    round(input, *, decimals=0, out=None)

Being compositions of registered ops, they differentiate through autograd and trace under kiln.jit
with no kernel of their own. ``cross_entropy``, ``nll_loss``, ``conv2d``, ``conv3d`` and ``round``
wrap the ops of those names (kiln/_C's bindings, which they call as they are when ``weight`` is
None, the padding is a number or ``decimals`` 0) to add PyTorch's class weights, padding "same" /
"valid" and decimals; their other arguments keep the ops' order, so ``reduction`` comes before
``ignore_index`` as in kiln.mint (PyTorch's ``weight``, which comes first there, is
keyword-only).

- ``input`` is a floating-point kiln tensor (an integer one is a DTypeError, as in PyTorch;
  hardtanh, like PyTorch's, also takes integers).
  float16 and bfloat16 are computed in float32 and rounded once at the end, as PyTorch's CPU
  kernels and Kiln's own ops are: rounding after every step would add an error per step.
- The ``target`` of a regression or binary loss has the input's shape. PyTorch broadcasts an l1,
  smooth l1 or huber target of another shape with a warning, which is almost always a bug (an
  [N, 1] prediction against [N] targets compares all N * N pairs); Kiln raises a ShapeError, as
  PyTorch refuses it for the binary cross entropies. Their ``weight`` and ``pos_weight``
  broadcast to the input's shape, and the loss has the promoted dtype of input and target. The
  class losses (cross_entropy, nll_loss) take class targets and a ``weight`` of one entry per
  class, and have the input's dtype.
- ``reduction`` is "mean" (over all elements), "sum" or "none"; for the class losses with a
  ``weight``, "mean" divides by the sum of the weights of the counted targets, as PyTorch's.
"""

import math
import numbers

from .. import _C
from .._checks import as_int, checked_bool, checked_int
from ..errors import DTypeError, KilnTypeError, KilnValueError, ShapeError

__all__ = ["leaky_relu", "elu", "softplus", "hardtanh", "l1_loss", "smooth_l1_loss", "huber_loss",
           "binary_cross_entropy", "binary_cross_entropy_with_logits", "cross_entropy",
           "nll_loss", "adaptive_avg_pool2d", "adaptive_max_pool2d", "conv2d", "conv3d",
           "round"]

_mint = _C.mint
_REDUCTIONS = ("mean", "sum", "none")
_NARROW = (_C.dtype.float16, _C.dtype.bfloat16)
_INT64_MIN, _INT64_MAX = -2**63, 2**63 - 1

# Note [Gradients through where]
# where(c, a, b) sends the gradient to both branches, zero to the one not taken. A branch whose
# own derivative is inf there (exp of a large x, log's 1 / x at x = 0) turns that zero into NaN
# (0 * inf), so the input of such a branch is replaced by a harmless value wherever the other
# branch is taken.


def check_real(owner, name, value):
    """``value`` as a float: a KilnTypeError naming ``owner`` and ``name`` unless it is a real
    number (a bool is not one). Shared with kiln.nn's cells, which check at construction."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise KilnTypeError(f"{owner}: expected {name} to be a real number, got "
                            f"{type(value).__name__} {value!r}")
    return float(value)


def _dims(shape):
    return "[" + ", ".join(map(str, shape)) + "]"


def _kiln_tensor(owner, name, value):
    """``value``'s dtype; a KilnTypeError unless it is a kiln tensor."""
    if not isinstance(value, _C.Tensor):
        raise KilnTypeError(f"{owner}: expected {name} to be a kiln.Tensor, got "
                            f"{type(value).__name__}")
    return value.dtype


def _floating_tensor(owner, name, value):
    """``value``'s dtype; a KilnTypeError unless it is a kiln tensor, a DTypeError unless it is
    floating-point."""
    if not _kiln_tensor(owner, name, value).is_floating_point:
        raise DTypeError(f"{owner}: expected a floating-point {name}, got {value.dtype.name}")
    return value.dtype


def check_same_dtype(owner, first_name, first, second_name, second):
    """A DTypeError naming ``owner`` and both operands unless the tensors ``first`` and ``second``
    have one dtype: the functions that, as PyTorch's, take no mixed dtypes (heaviside, isclose,
    tensordot, ...)."""
    if first.dtype != second.dtype:
        raise DTypeError(f"{owner}: expected {first_name} and {second_name} of one dtype, got "
                         f"{first.dtype.name} and {second.dtype.name}")


def _cast(tensor, dtype):
    return tensor if tensor.dtype == dtype else tensor.to(dtype)


def _zero_gradient_to(result, source):
    """``result`` with ``source`` (a tensor) among its inputs at a zero gradient: PyTorch gives
    an input that a function's value does not depend on (copysign's other, scatter_reduce's src
    when nothing is scattered) a gradient of zeros, not none. The values are result's exactly
    (where() takes them all)."""
    if not source.requires_grad:
        return result
    nothing = _cast(_mint.sum(source.reshape(-1)[:0]), result.dtype)  # 0, with source's gradient
    return _mint.where(_mint.ones((), dtype=_C.dtype.bool), result, nothing)


def _widened(tensor):
    """A 16-bit float tensor in float32 (others as they are); see the module's documentation."""
    return _cast(tensor, _C.dtype.float32) if tensor.dtype in _NARROW else tensor


def _check_reduction(owner, reduction):
    if reduction not in _REDUCTIONS:
        raise KilnValueError(f"{owner}: expected reduction 'mean', 'sum' or 'none', got "
                             f"{reduction!r}")


def _loss_operands(owner, input, target, reduction, floating_target=False):  # noqa: A002
    """Checks a loss's arguments; returns input and target in the dtype to compute in, and the
    loss's dtype."""
    _check_reduction(owner, reduction)
    _floating_tensor(owner, "input", input)
    if floating_target:
        _floating_tensor(owner, "target", target)
    elif not isinstance(target, _C.Tensor):
        raise KilnTypeError(f"{owner}: expected target to be a kiln.Tensor, got "
                            f"{type(target).__name__}")
    if tuple(input.shape) != tuple(target.shape):
        raise ShapeError(f"{owner}: input has shape {_dims(input.shape)} and target has shape "
                         f"{_dims(target.shape)}; expected target of the input's shape "
                         f"(broadcasting them is usually a mistake: broadcast the target "
                         f"explicitly if it is meant)")
    dtype = _C.promote_types(input.dtype, target.dtype)
    compute = _C.dtype.float32 if dtype in _NARROW else dtype
    return _cast(input, compute), _cast(target, compute), dtype


def _broadcast_operand(owner, name, value, like):
    """``value`` (None, or a kiln tensor that broadcasts to ``like``'s shape) in ``like``'s
    dtype, as PyTorch, whose loss keeps the input's dtype."""
    if value is None:
        return None
    if not isinstance(value, _C.Tensor):
        raise KilnTypeError(f"{owner}: expected {name} to be a kiln.Tensor or None, got "
                            f"{type(value).__name__}")
    shape, full = tuple(value.shape), tuple(like.shape)
    if len(shape) > len(full) or any(s not in (1, f) for s, f in zip(reversed(shape),
                                                                     reversed(full))):
        raise ShapeError(f"{owner}: {name} has shape {_dims(shape)}, which does not broadcast to "
                         f"the input's shape {_dims(full)}")
    return _cast(value, like.dtype)


def _reduced(loss, reduction, dtype):
    if reduction == "mean":
        loss = _mint.mean(loss)
    elif reduction == "sum":
        loss = _mint.sum(loss)
    return _cast(loss, dtype)


# ------------------------------------------------------------------------------------------------
# Activations


def leaky_relu(input, negative_slope=0.01):  # noqa: A002  (PyTorch's argument name)
    """leaky_relu(input, negative_slope=0.01): x where x > 0, else negative_slope * x. The
    gradient at 0 (and at NaN) is negative_slope, as in PyTorch."""
    _floating_tensor("leaky_relu", "input", input)
    slope = check_real("leaky_relu", "negative_slope", negative_slope)
    # One rounding step, so 16-bit inputs need no float32 detour.
    return _mint.where(input > 0, input, input * slope)


def elu(input, alpha=1.0):  # noqa: A002
    """elu(input, alpha=1.0): x where x > 0, else alpha * (exp(x) - 1). The gradient at 0 is
    alpha, and at NaN 1, as in PyTorch."""
    dtype = _floating_tensor("elu", "input", input)
    alpha = check_real("elu", "alpha", alpha)
    x = _widened(input)
    negative = x <= 0
    # See Note [Gradients through where]: expm1 of a large x is inf.
    inside = _mint.where(negative, x, 0.0)
    # expm1's value (exact near 0) with exp's gradient: expm1's own, g * (y + 1), cancels for
    # very negative x (0 at x = -20 in float32, where PyTorch's alpha * exp(x) is 2e-9).
    grows = _mint.exp(inside)
    curve = (_mint.expm1(inside.detach()) + (grows - grows.detach())) * alpha
    return _cast(_mint.where(negative, curve, x), dtype)


def softplus(input, beta=1.0, threshold=20.0):  # noqa: A002
    """softplus(input, beta=1.0, threshold=20.0): log(1 + exp(beta * x)) / beta, and x itself
    where beta * x > threshold (where the two agree to float precision, and exp would
    overflow), as in PyTorch."""
    dtype = _floating_tensor("softplus", "input", input)
    beta = check_real("softplus", "beta", beta)
    threshold = check_real("softplus", "threshold", threshold)
    x = _widened(input)
    scaled = x * beta
    linear = scaled > threshold
    # See Note [Gradients through where]: exp(scaled) is inf past about 88 in float32.
    curve = _mint.log1p(_mint.exp(_mint.where(linear, 0.0, scaled))) / beta
    return _cast(_mint.where(linear, x, curve), dtype)


def hardtanh(input, min_val=-1.0, max_val=1.0):  # noqa: A002
    """hardtanh(input, min_val=-1.0, max_val=1.0): x clamped to [min_val, max_val] (min_val >
    max_val is a KilnValueError). As in PyTorch, the gradient is 1 strictly inside the range (and
    at NaN, which stays NaN) and 0 at its ends, where clamp's would be 1. An integer input keeps
    its dtype, the bounds truncated toward zero, as PyTorch's (hardtanh of [-3, 2, 9] to
    [-1.5, 2.5] is [-1, 2, 2]), and must be finite; a bool input is a DTypeError, as in
    PyTorch."""
    return _hardtanh("hardtanh", input, min_val, max_val)


def _hardtanh(owner, input, min_val, max_val):  # noqa: A002
    """hardtanh, its errors naming ``owner`` (kiln.nn.functional.relu6 is _hardtanh("relu6",
    input, 0.0, 6.0))."""
    if _kiln_tensor(owner, "input", input) == _C.dtype.bool:
        raise DTypeError(f"{owner}: expected a floating-point or integer input, got bool")
    low = check_real(owner, "min_val", min_val)
    high = check_real(owner, "max_val", max_val)
    if low > high:
        raise KilnValueError(f"{owner}: expected min_val <= max_val, got min_val={min_val} and "
                             f"max_val={max_val}")
    if input.dtype.is_floating_point:
        return _mint.where(input <= low, low, _mint.where(input >= high, high, input))
    if not (math.isfinite(low) and math.isfinite(high)):
        raise KilnValueError(f"{owner}: expected finite min_val and max_val for an integer input "
                             f"({input.dtype.name}), got min_val={min_val} and "
                             f"max_val={max_val}")
    # PyTorch clamps in float and truncates the result into the integer dtype; for an integer x
    # that equals clamping to the bounds truncated toward zero. Saturating them to int64 (the
    # range of Kiln's integer scalars) changes nothing, as no integer tensor reaches past it.
    low, high = (min(max(math.trunc(bound), _INT64_MIN), _INT64_MAX) for bound in (low, high))
    return _mint.clamp(input, min=low, max=high)


# ------------------------------------------------------------------------------------------------
# Losses


def l1_loss(input, target, reduction="mean"):  # noqa: A002
    """l1_loss(input, target, reduction="mean"): |input - target|, reduced. The gradient where
    they are equal is 0, as in PyTorch."""
    x, y, dtype = _loss_operands("l1_loss", input, target, reduction)
    return _reduced(_mint.abs(x - y), reduction, dtype)


def smooth_l1_loss(input, target, reduction="mean", beta=1.0):  # noqa: A002
    """smooth_l1_loss(input, target, reduction="mean", beta=1.0): with z = |input - target|,
    0.5 * z^2 / beta where z < beta, else z - 0.5 * beta, reduced. beta = 0 is l1_loss; a
    negative beta is a KilnValueError, as in PyTorch."""
    x, y, dtype = _loss_operands("smooth_l1_loss", input, target, reduction)
    beta = check_real("smooth_l1_loss", "beta", beta)
    if beta < 0:
        raise KilnValueError(f"smooth_l1_loss: expected beta >= 0, got {beta}")
    diff = x - y
    size = _mint.abs(diff)
    if beta == 0:  # the quadratic piece would divide by 0, and its gradient be NaN
        return _reduced(size, reduction, dtype)
    loss = _mint.where(size < beta, _mint.square(diff) * (0.5 / beta), size - 0.5 * beta)
    return _reduced(loss, reduction, dtype)


def huber_loss(input, target, reduction="mean", delta=1.0):  # noqa: A002
    """huber_loss(input, target, reduction="mean", delta=1.0): with z = |input - target|,
    0.5 * z^2 where z < delta, else delta * (z - 0.5 * delta), reduced (smooth_l1_loss times
    delta). delta must be positive (else a KilnValueError), as in PyTorch."""
    x, y, dtype = _loss_operands("huber_loss", input, target, reduction)
    delta = check_real("huber_loss", "delta", delta)
    if not delta > 0:
        raise KilnValueError(f"huber_loss: expected delta > 0, got {delta}")
    diff = x - y
    size = _mint.abs(diff)
    loss = _mint.where(size < delta, _mint.square(diff) * 0.5, (size - 0.5 * delta) * delta)
    return _reduced(loss, reduction, dtype)


def _floored_log(log, arg, singular):
    """max(log(arg), -100), as PyTorch's binary cross entropy takes it; where ``singular`` (the
    log's argument is 0) it is -100 with a zero gradient rather than NaN (Note [Gradients through
    where])."""
    safe = _mint.where(singular, 1.0, arg)
    return _mint.where(singular, -100.0, _mint.clamp(log(safe), min=-100.0))


def binary_cross_entropy(input, target, weight=None, reduction="mean"):  # noqa: A002
    """binary_cross_entropy(input, target, weight=None, reduction="mean"): for probabilities x
    (input) and targets t in [0, 1], -weight * (t * log(x) + (1 - t) * log(1 - x)), reduced, with
    each log clamped at -100 as in PyTorch, so x of exactly 0 or 1 costs at most 100 * weight.

    Differences from PyTorch, whose forward checks every value: x or t outside [0, 1] is not
    refused (such an x gives NaN), since the check would wait for the values. The gradient is the
    derivative of the value: a log clamped at -100 contributes none, so it is finite at exactly 0
    and 1 but differs from PyTorch's within about 1e-12 of them, where PyTorch's backward divides
    by max(x * (1 - x), 1e-12) instead (and its target gradient is infinite). For a float32 x
    below about 3e-39, 1 / x, and so the gradient, overflows: binary_cross_entropy_with_logits on
    the logits avoids both."""
    owner = "binary_cross_entropy"
    x, t, dtype = _loss_operands(owner, input, target, reduction, floating_target=True)
    weight = _broadcast_operand(owner, "weight", weight, x)
    log_x = _floored_log(_mint.log, x, x == 0)
    log_1mx = _floored_log(_mint.log1p, -x, x == 1)
    loss = (t - 1) * log_1mx - t * log_x
    if weight is not None:
        loss = loss * weight
    return _reduced(loss, reduction, dtype)


def _log_sigmoid(x):
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)): exp never overflows. Written with where
    rather than minimum and abs, which would give x = 0 its gradient (1/2) only through their
    rules at ties (1/2 to each side of minimum, 0 for abs)."""
    negative = x < 0
    return _mint.where(negative, x, 0.0) - _mint.log1p(_mint.exp(_mint.where(negative, x, -x)))


def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean",  # noqa: A002
                                     pos_weight=None):
    """binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean",
    pos_weight=None): binary_cross_entropy(sigmoid(input), target, weight, reduction) computed
    from the logits x without overflow or a clamp: -weight * (pos_weight * t * log(sigmoid(x)) +
    (1 - t) * log(1 - sigmoid(x))), reduced. ``pos_weight`` weighs the positive term (typically
    one per class, [C] against [..., C] logits); both weights broadcast to the input's shape."""
    owner = "binary_cross_entropy_with_logits"
    x, t, dtype = _loss_operands(owner, input, target, reduction, floating_target=True)
    weight = _broadcast_operand(owner, "weight", weight, x)
    pos_weight = _broadcast_operand(owner, "pos_weight", pos_weight, x)
    log_sigmoid = _log_sigmoid(x)
    if pos_weight is not None:
        log_sigmoid = log_sigmoid * ((pos_weight - 1) * t + 1)
    # log(1 - sigmoid(x)) = log(sigmoid(x)) - x, so the two terms share one log_sigmoid.
    loss = (1 - t) * x - log_sigmoid
    if weight is not None:
        loss = loss * weight
    return _reduced(loss, reduction, dtype)


# ------------------------------------------------------------------------------------------------
# Class losses with class weights


def _class_loss_operands(owner, input, target, reduction, weight):  # noqa: A002
    """Checks the arguments of a class loss with a ``weight``; returns the input in the dtype to
    compute in, the weight in that dtype, the class dimension, the number of classes and the
    loss's dtype. The target's dtype and shape are left to the op, which checks them."""
    _check_reduction(owner, reduction)
    dtype = _floating_tensor(owner, "input", input)
    if input.ndim == 0:
        raise ShapeError(f"{owner}: expected input of shape [N, C, ...] or [C], got a 0-d tensor")
    if not isinstance(target, _C.Tensor):
        raise KilnTypeError(f"{owner}: expected target to be a kiln.Tensor, got "
                            f"{type(target).__name__}")
    if not isinstance(weight, _C.Tensor):
        raise KilnTypeError(f"{owner}: expected weight to be a kiln.Tensor or None, got "
                            f"{type(weight).__name__}")
    if not weight.dtype.is_floating_point:
        raise DTypeError(f"{owner}: expected a floating-point weight, got {weight.dtype.name}")
    class_dim = 0 if input.ndim == 1 else 1
    classes = input.shape[class_dim]
    if tuple(weight.shape) != (classes,):
        raise ShapeError(f"{owner}: expected weight of shape [{classes}] (one per class of the "
                         f"input {_dims(input.shape)}), got {_dims(weight.shape)}")
    x = _widened(input)
    return x, _cast(weight, x.dtype), class_dim, classes, dtype


def _target_weights(target, ignore_index, weight):
    """(where targets count, the weight of each target's class there and 0 at ignore_index)."""
    # In int64, as the ops read them: index_select takes no narrower integers.
    target = _cast(target, _C.dtype.int64)
    counted = target != ignore_index
    classes = weight.shape[0]
    if classes == 0:  # every target is ignored (the op refuses others): no class to read
        return counted, _mint.zeros_like(target, dtype=weight.dtype)
    # Ignored targets read class 0 and out-of-range ones, which the loss op refuses with its own
    # message, a class in range, so that index_select raises nothing of its own.
    index = _mint.clamp(_mint.where(counted, target, 0), 0, classes - 1)
    picked = _mint.index_select(weight, 0, index.reshape(-1)).reshape(target.shape)
    return counted, _mint.where(counted, picked, 0.0)


def _refuse_positional_weight(owner, reduction):
    """PyTorch's class losses take ``weight`` third; here ``reduction`` is (kiln.mint's order), so
    a tensor there is a weight given by position: a KilnTypeError saying to name it."""
    if isinstance(reduction, _C.Tensor):
        raise KilnTypeError(f"{owner}: got a tensor for reduction (the third argument, as in "
                            f"kiln.mint); pass class weights as weight=")


def _weighted_reduced(losses, target_weights, reduction, dtype):
    """Weighted per-target ``losses`` reduced as PyTorch's weighted class losses: "mean" divides
    the sum by the sum of the targets' weights. Where those sum to 0 (every target ignored, or
    every counted one of a class weighted 0) the mean is NaN, as PyTorch's (whose label-smoothing
    term alone would be x / 0), and the gradient 0: it goes through a division by 1 instead
    (Note [Gradients through where]). PyTorch's gradient there is 0 when every target is ignored
    and NaN otherwise."""
    if reduction == "none":
        return _cast(losses, dtype)
    total = _mint.sum(losses)
    if reduction == "sum":
        return _cast(total, dtype)
    weight_sum = _mint.sum(target_weights)
    nothing = weight_sum == 0
    mean = _mint.where(nothing, math.nan, total / _mint.where(nothing, 1.0, weight_sum))
    return _cast(mean, dtype)


def _class_view(weight, class_dim, ndim):
    """``weight`` [C] shaped to broadcast along the class dimension of an ``ndim``-d input."""
    shape = [1] * ndim
    shape[class_dim] = weight.shape[0]
    return weight.reshape(shape)


def cross_entropy(logits, target, reduction="mean", ignore_index=-100, label_smoothing=0.0, *,
                  weight=None):
    """cross_entropy(logits, target, reduction="mean", ignore_index=-100, label_smoothing=0.0, *,
    weight=None): kiln.mint's CrossEntropy op (logits [N, C, ...] or [C]; integer class targets
    [N, ...], or class probabilities of the logits' shape), with PyTorch's class weights.

    ``weight`` (a floating-point tensor [C], None for none) scales each target's loss by the
    weight of its class, and "mean" divides by the sum of the weights of the targets not equal to
    ``ignore_index`` (NaN when they sum to 0). With ``label_smoothing`` s, each target's loss is
    (1 - s) * weight[t] * -logp[t] + s / C * sum_c weight[c] * -logp[c], reduced the same way, as
    PyTorch computes it. Against class probabilities p (smoothed to (1 - s) * p + s / C) the loss
    is -sum_c weight[c] * p[c] * logp[c] per position, and "mean" divides by the number of
    positions, as PyTorch's. Without ``weight`` this is the op itself."""
    owner = "cross_entropy"
    _refuse_positional_weight(owner, reduction)
    if weight is None:
        return _mint.cross_entropy(logits, target, reduction, ignore_index, label_smoothing)
    x, weight, class_dim, classes, dtype = _class_loss_operands(owner, logits, target, reduction,
                                                                weight)
    ignore_index = checked_int(owner, "ignore_index", ignore_index)
    smoothing = check_real(owner, "label_smoothing", label_smoothing)
    if not 0.0 <= smoothing <= 1.0:
        raise KilnValueError(f"{owner}: expected label_smoothing in [0, 1], got {smoothing}")
    if target.dtype.is_floating_point:
        if tuple(target.shape) != tuple(logits.shape):
            raise ShapeError(f"{owner}: a floating-point target holds class probabilities and "
                             f"must have the input's shape {_dims(logits.shape)}, got "
                             f"{_dims(target.shape)} (class indices are an integer tensor)")
        p = _cast(target, x.dtype)
        if smoothing > 0:
            p = p * (1.0 - smoothing) + smoothing / classes
        scaled = _mint.log_softmax(x, class_dim) * p * _class_view(weight, class_dim, x.ndim)
        return _reduced(-_mint.sum(scaled, class_dim), reduction, dtype)
    counted, target_weights = _target_weights(target, ignore_index, weight)
    if smoothing == 0:
        losses = _mint.cross_entropy(x, target, "none", ignore_index) * target_weights
        return _weighted_reduced(losses, target_weights, reduction, dtype)
    log_probs = _mint.log_softmax(x, class_dim)
    nll = _mint.nll_loss(log_probs, target, "none", ignore_index)
    spread = -_mint.sum(log_probs * _class_view(weight, class_dim, x.ndim), class_dim)
    losses = (nll * target_weights * (1.0 - smoothing)
              + _mint.where(counted, spread, 0.0) * (smoothing / classes))
    return _weighted_reduced(losses, target_weights, reduction, dtype)


def nll_loss(log_probs, target, reduction="mean", ignore_index=-100, *, weight=None):
    """nll_loss(log_probs, target, reduction="mean", ignore_index=-100, *, weight=None): kiln.mint's
    NLLLoss op (log-probabilities [N, C, ...] or [C] at integer class targets [N, ...]), with
    PyTorch's class weights: ``weight`` (a floating-point tensor [C], None for none) scales each
    target's loss -log_probs[t] by weight[t], and "mean" divides by the sum of the weights of the
    targets not equal to ``ignore_index`` (NaN when they sum to 0). Without ``weight`` this is the
    op itself."""
    owner = "nll_loss"
    _refuse_positional_weight(owner, reduction)
    if weight is None:
        return _mint.nll_loss(log_probs, target, reduction, ignore_index)
    x, weight, _, _, dtype = _class_loss_operands(owner, log_probs, target, reduction, weight)
    ignore_index = checked_int(owner, "ignore_index", ignore_index)
    _, target_weights = _target_weights(target, ignore_index, weight)
    losses = _mint.nll_loss(x, target, "none", ignore_index) * target_weights
    return _weighted_reduced(losses, target_weights, reduction, dtype)


# ------------------------------------------------------------------------------------------------
# Adaptive pooling


# How an adaptive pooling's messages name its output sizes: (the sizes, their kinds).
_OUTPUT_SIZES = {2: ("a pair (height, width)", "a pair of ints or None"),
                 3: ("a sequence of three (depth, height, width)",
                     "a sequence of three ints or None")}


def check_output_size(owner, output_size, count=2):
    """An adaptive pooling's ``output_size`` (an int, or a sequence of ``count`` ints or None,
    None keeping the input's size) as a tuple of ``count`` ints >= 0 or None: a KilnTypeError
    for another kind of value, a KilnValueError for a negative size or a sequence of another
    length. Shared with kiln.nn's 2-d and 3-d functions and cells (which check at
    construction)."""
    sizes, kinds = _OUTPUT_SIZES[count]
    if as_int(output_size) is not None:
        given = (output_size,) * count
    elif isinstance(output_size, (tuple, list)):
        if len(output_size) != count:
            raise KilnValueError(f"{owner}: expected output_size to be an int or {sizes}, got "
                                 f"{len(output_size)} sizes {output_size!r}")
        given = output_size
    else:
        raise KilnTypeError(f"{owner}: expected output_size to be an int or {kinds}, got "
                            f"{type(output_size).__name__} {output_size!r}")
    return tuple(None if size is None else checked_int(owner, "output_size", size, low=0)
                 for size in given)


def _adaptive_windows(size, out):
    """(output position, start, length) of PyTorch's adaptive window i along a dimension of
    ``size``: from floor(i * size / out) to ceil((i + 1) * size / out)."""
    return [(i, i * size // out, -(-(i + 1) * size // out) - i * size // out) for i in range(out)]


def _pool_dim(x, dim, out, reduce):
    """``reduce(t, d)`` (a reduction of dimension d) over the adaptive windows of ``x``'s dimension
    ``dim``, which become ``out`` entries."""
    shape = list(x.shape)
    size = shape[dim]
    if out == size:  # windows of one element each
        return x
    if out and size % out == 0:  # windows side by side: a reshape makes them a dimension
        return reduce(x.reshape(shape[:dim] + [out, size // out] + shape[dim + 1:]), dim + 1)
    # Windows of one length are gathered into a dimension of their own and reduced together.
    # There are at most two lengths, so this takes two gathers however many windows there are,
    # and reads only the windows' elements (a weighted sum over the whole dimension would turn
    # an inf outside a window into NaN).
    by_length = {}
    for i, start, length in _adaptive_windows(size, out):
        by_length.setdefault(length, []).append((i, start))
    pieces, order = [], []
    for length, windows in by_length.items():
        index = _C.tensor([start + j for _, start in windows for j in range(length)],
                          dtype=_C.dtype.int64)
        picked = _mint.index_select(x, dim, index)
        pieces.append(reduce(picked.reshape(shape[:dim] + [len(windows), length]
                                            + shape[dim + 1:]), dim + 1))
        order += [i for i, _ in windows]
    if not pieces:  # out == 0
        return _mint.index_select(x, dim, _C.tensor([], dtype=_C.dtype.int64))
    if len(pieces) == 1:
        return pieces[0]
    position = {i: p for p, i in enumerate(order)}
    return _mint.index_select(_mint.cat(pieces, dim), dim,
                              _C.tensor([position[i] for i in range(out)], dtype=_C.dtype.int64))


def _average_windows(x, dim, out):
    """The mean of ``x`` (floating) over the adaptive windows of its dimension ``dim``, which
    become ``out`` entries: one kiln.mint.resample pass, each window's elements weighted by 1 /
    its length. A window one element shorter than the longest repeats its last element as the
    extra tap, that element's weight split in two halves (exact), so no tap reads outside its
    window (a weight of 0 on an inf would make NaN). _pool_dim's gathers where the lengths differ
    by more than one, or nothing is left to average."""
    size = x.shape[dim]
    windows = _adaptive_windows(size, out)
    lengths = [length for _, _, length in windows]
    if out == size or not windows or max(lengths) - min(lengths) > 1 or min(lengths) == 0:
        return _pool_dim(x, dim, out, lambda t, d: _mint.mean(t, d))
    taps = max(lengths)
    index = [[0] * out for _ in range(taps)]
    weight = [[0.0] * out for _ in range(taps)]
    for i, start, length in windows:
        for k in range(taps):
            index[k][i] = start + min(k, length - 1)
            weight[k][i] = 1.0 / length
        if length < taps:  # the repeated last element: half its weight on each of its taps
            weight[length - 1][i] = weight[taps - 1][i] = 0.5 / length
    return _mint.resample(x, dim, _C.tensor(index, dtype=_C.dtype.int64),
                          _C.tensor(weight, dtype=x.dtype))


def _window_positions(size, out):
    """[out, longest]: the positions each adaptive window along a dimension of ``size`` covers,
    a window shorter than the longest padded by repeating its last position."""
    windows = _adaptive_windows(size, out)
    longest = max((length for _, _, length in windows), default=1)
    starts, lengths = (_C.tensor([w[k] for w in windows], dtype=_C.dtype.int64) for k in (1, 2))
    steps = _mint.arange(longest).reshape(1, longest)
    return starts.reshape(out, 1) + _mint.minimum(steps, lengths.reshape(out, 1) - 1)


def _window_maxima(x, out_h, out_w):
    """(values, indices) of adaptive_max_pool2d(return_indices=True) of x [..., H, W] (H and W
    non-zero) over windows of several lengths, from the static sizes alone
    (so kiln.jit traces it): each output cell's window is a row of element offsets h * W + w,
    its rows and columns padded to the longest by repeating their last (a copy right after an
    element changes neither the first maximum nor the last NaN); the rows are gathered from the
    flattened planes, the winner of each picked by PyTorch's rule, and the values gathered at
    the winners' offsets, so that the gradient goes to that element alone."""
    height, width = x.shape[-2:]
    rows, cols = _window_positions(height, out_h), _window_positions(width, out_w)
    longest = rows.shape[1] * cols.shape[1]
    windows = out_h * out_w
    offsets = (rows.reshape(out_h, 1, rows.shape[1], 1) * width
               + cols.reshape(1, out_w, 1, cols.shape[1])).reshape(-1)
    lead = list(x.shape[:-2])
    plane = x.reshape(lead + [height * width])
    picked = _mint.index_select(plane, -1, offsets).reshape(lead + [windows, longest])
    # PyTorch's kernel scans each window row by row and keeps the first maximum, unless a NaN
    # comes: then the last NaN (argmax alone would take the first one).
    nan = picked != picked
    last_nan = _mint.argmax(_mint.where(nan, _mint.arange(longest), -1), -1)
    winner = _mint.where(_mint.any(nan, -1), last_nan, _mint.argmax(picked, -1))
    # The winner's position in its padded row, as a position in ``offsets``.
    at = winner + _mint.arange(0, windows * longest, longest)
    indices = _mint.index_select(offsets, 0, at.reshape([-1])).reshape(lead + [windows])
    values = _mint.gather(plane, -1, indices)
    return (values.reshape(lead + [out_h, out_w]), indices.reshape(lead + [out_h, out_w]))


def adaptive_pool(owner, input, output_size, maximum, return_indices=False):  # noqa: A002
    """PyTorch's adaptive 2-d pooling of ``input`` [N, C, H, W] or [C, H, W] (floating point):
    the maximum (``maximum``; with ``return_indices``, (values, indices)) or the mean, errors
    naming ``owner``. kiln.mint.max_pool2d(_with_indices) or avg_pool2d when the windows tile
    each dimension evenly; else the windows' offsets gathered (_window_maxima) for indices, or a
    reduction over the windows of the width, then of the height (see adaptive_max_pool2d for
    why in that order), 16-bit floats averaged in float32. Shared with kiln.nn.functional's 1-d
    adaptive poolings, which compute over a height of 1."""
    dtype = _floating_tensor(owner, "input", input)
    checked_bool(owner, "return_indices", return_indices)
    if input.ndim not in (3, 4):
        raise ShapeError(f"{owner}: expected input of shape [N, C, H, W] or [C, H, W], got "
                         f"{_dims(input.shape)}")
    if 0 in input.shape[-3:]:
        raise ShapeError(f"{owner}: expected input with non-zero sizes in every dimension but the "
                         f"batch's, got {_dims(input.shape)}")
    sizes = input.shape[-2:]
    out_h, out_w = (size if out is None else out
                    for out, size in zip(check_output_size(owner, output_size), sizes))
    if out_h and out_w and sizes[0] % out_h == 0 and sizes[1] % out_w == 0:
        kernel = (sizes[0] // out_h, sizes[1] // out_w)
        pool2d = (_mint.avg_pool2d if not maximum else
                  _mint.max_pool2d_with_indices if return_indices else _mint.max_pool2d)
        if input.ndim == 4:
            return pool2d(input, kernel, kernel)
        result = pool2d(_mint.unsqueeze(input, 0), kernel, kernel)
        if return_indices:
            return tuple(_mint.squeeze(part, 0) for part in result)
        return _mint.squeeze(result, 0)
    if return_indices:
        return _window_maxima(input, out_h, out_w)
    if maximum:
        x, reduce = input, lambda t, dim: _mint.max(t, dim).values
        x = _pool_dim(x, input.ndim - 1, out_w, reduce)
        return _pool_dim(x, input.ndim - 2, out_h, reduce)
    x = _average_windows(_widened(input), input.ndim - 1, out_w)
    return _cast(_average_windows(x, input.ndim - 2, out_h), dtype)


def adaptive_avg_pool2d(input, output_size):  # noqa: A002
    """adaptive_avg_pool2d(input, output_size): the mean of ``input`` [N, C, H, W] or [C, H, W]
    (floating point) over PyTorch's adaptive windows, which make an output of ``output_size``
    (an int, or a pair (out_h, out_w) where None keeps the input's size): window i of a
    dimension of size n spans floor(i * n / out) to ceil((i + 1) * n / out), so windows may
    overlap and differ in length by one. When every window has the same length (n % out == 0)
    this is kiln.mint.avg_pool2d. 16-bit floats are averaged in float32 and rounded once."""
    return adaptive_pool("adaptive_avg_pool2d", input, output_size, maximum=False)


def adaptive_max_pool2d(input, output_size, return_indices=False):  # noqa: A002
    """adaptive_max_pool2d(input, output_size, return_indices=False): the maximum of ``input``
    [N, C, H, W] or [C, H, W] (floating point) over the windows of adaptive_avg_pool2d; a NaN in a
    window is its maximum. As PyTorch's, the gradient goes to one element of each window, the
    first maximum in row-major order (the width is reduced first, keeping each row's first
    maximum, then the height keeps the first row's). When every window has the same length this
    is kiln.mint.max_pool2d. With ``return_indices=True``, (values, indices) as PyTorch's: the
    int64 offset h * W + w in its [H, W] plane of each window's first maximum, or of its last
    NaN if it holds any (PyTorch's CPU rule), the gradient going to that element."""
    return adaptive_pool("adaptive_max_pool2d", input, output_size, maximum=True,
                         return_indices=return_indices)


# ------------------------------------------------------------------------------------------------
# Convolution

PADDING_STRINGS = ("same", "valid")


def same_padding(kernel_size, dilation):
    """PyTorch's padding="same" of a convolution of stride 1 with ``kernel_size`` and
    ``dilation`` (pairs of ints): per spatial dimension, the (before, after) padding that keeps
    its size, dilation * (kernel - 1) in all, the odd element (if any) after. Shared with
    kiln.nn.Conv2d, which pads in its padding_mode with it."""
    totals = (d * (k - 1) for k, d in zip(kernel_size, dilation))
    return tuple((total // 2, total - total // 2) for total in totals)


def _conv_sizes(owner, name, value, rank):
    """A convolution's ``stride`` or ``dilation`` (an int or a sequence of ``rank`` ints, as the
    op takes them) as a tuple of ``rank`` ints >= 1: a KilnTypeError or KilnValueError
    otherwise."""
    kind = "a pair of ints" if rank == 2 else "a sequence of three ints"
    number = as_int(value)
    sizes = (number,) * rank if number is not None else value
    if not isinstance(sizes, (tuple, list)) or any(as_int(v) is None for v in sizes):
        raise KilnTypeError(f"{owner}: expected {name} to be an int or {kind}, got "
                            f"{type(value).__name__} {value!r}")
    sizes = tuple(as_int(v) for v in sizes)
    if len(sizes) != rank or min(sizes) < 1:
        count = "two" if rank == 2 else "three"
        raise KilnValueError(f"{owner}: expected {name} of {count} integers >= 1, got {value!r}")
    return sizes


def _convolution(owner, op, x, weight, bias, stride, padding, dilation, groups):
    """conv2d's and conv3d's padding strings around their op (_C.mint.conv2d / conv3d): the
    op called as it is for a numeric ``padding``, with none for "valid", and for "same" with the
    even part of each dimension's total and x padded by the odd zero after (PyTorch's)."""
    rank = 2 if op is _mint.conv2d else 3
    if not isinstance(padding, str):
        return op(x, weight, bias, stride, padding, dilation, groups)
    if padding not in PADDING_STRINGS:
        kind = "a pair of ints" if rank == 2 else "a sequence of three ints"
        raise KilnValueError(f"{owner}: expected padding 'same', 'valid', an int or {kind}, "
                             f"got {padding!r}")
    if padding == "valid":
        return op(x, weight, bias, stride, 0, dilation, groups)
    if _conv_sizes(owner, "stride", stride, rank) != (1,) * rank:
        raise KilnValueError(f"{owner}: padding='same' needs stride 1 (the output could not keep "
                             f"the input's size), got stride {stride!r}")
    shape = getattr(weight, "shape", None)
    if shape is None:
        raise KilnTypeError(f"{owner}: expected weight to be a kiln.Tensor or an array, got "
                            f"{type(weight).__name__}")
    if len(shape) != rank + 2:
        kernel = "kH, kW" if rank == 2 else "kD, kH, kW"
        raise ShapeError(f"{owner}: expected weight of shape [out_channels, in_channels / groups, "
                         f"{kernel}], got {_dims(shape)}")
    pairs = same_padding(tuple(shape[2:]), _conv_sizes(owner, "dilation", dilation, rank))
    odd = [after - before for before, after in reversed(pairs)]  # from the last dimension
    if any(odd):
        x = _mint.pad(x, tuple(v for extra in odd for v in (0, extra)))
    return op(x, weight, bias, 1, tuple(before for before, _ in pairs), dilation, groups)


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1): kiln.mint's
    Conv2D op (x [N, C, H, W], weight [O, C / groups, kH, kW]), with PyTorch's padding strings:
    ``padding`` is an int or a pair of ints (the op's, called as it is), "valid" (no padding)
    or "same", which pads each spatial dimension by dilation * (kernel size - 1) in all so that
    the output keeps the input's height and width. "same" needs stride 1 (a KilnValueError
    otherwise, as PyTorch refuses it). An even total is split evenly and given to the op; an odd
    one puts its extra zero after (below, right), as PyTorch does: x is padded by that zero
    (kiln.mint.pad) and the rest given to the op."""
    return _convolution("conv2d", _mint.conv2d, x, weight, bias, stride, padding, dilation, groups)


def conv3d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """conv3d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1): kiln.mint's
    Conv3D op (x [N, C, D, H, W], weight [O, C / groups, kD, kH, kW]) with conv2d's padding
    strings: ``padding`` an int or a sequence of three, "valid" or "same" (stride 1 only)."""
    return _convolution("conv3d", _mint.conv3d, x, weight, bias, stride, padding, dilation, groups)


# ------------------------------------------------------------------------------------------------
# Rounding


def round(input, *, decimals=0, out=None):  # noqa: A001,A002  (PyTorch's names)
    """round(input, *, decimals=0, out=None): to the nearest integer, ties to even (kiln.mint's
    Round op, called as it is when ``decimals`` is 0); with ``decimals`` (keyword-only, as in
    PyTorch), to that many decimal places as PyTorch computes it: round(x * 10**decimals) /
    10**decimals, and round(x / 10**-decimals) * 10**-decimals for decimals < 0 (to tens,
    hundreds, ...), in float32 for 16-bit floats, rounded once at the end. The scaling is a
    floating-point operation, so the result is the value that computation gives (as PyTorch's),
    not always the float nearest the decimal. ``decimals`` other than 0 needs a floating-point
    tensor (a DTypeError otherwise, as PyTorch refuses integers). The gradient is 0, as round's."""
    decimals = checked_int("round", "decimals", decimals)
    if decimals == 0:
        return _mint.round(input, out=out)
    dtype = _floating_tensor("round", "input", input)
    x = _widened(input)
    # 10 ** |decimals| as PyTorch's pow gives it (the C library's, as Python's power; 10.0 ** 23
    # is not the double nearest 1e23), and inf past the largest double, where Python raises.
    scale = 10.0 ** abs(decimals) if abs(decimals) <= 308 else math.inf
    if decimals > 0:
        whole, back = _mint.round(x * scale), _mint.div
    else:
        whole, back = _mint.round(x / scale), _mint.mul
    if out is not None:
        return back(whole, scale, out=out)
    return _cast(back(whole, scale), dtype)
