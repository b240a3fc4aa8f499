"""Activations and losses composed of kiln.mint ops in Python, with PyTorch's signatures, values
and gradients:

    leaky_relu(input, negative_slope=0.01)      elu(input, alpha=1.0)
    softplus(input, beta=1.0, threshold=20.0)   hardtanh(input, min_val=-1.0, max_val=1.0)
    l1_loss(input, target, reduction="mean")
    smooth_l1_loss(input, target, reduction="mean", beta=1.0)
    huber_loss(input, target, reduction="mean", delta=1.0)
    binary_cross_entropy(input, target, weight=None, reduction="mean")
    binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean", pos_weight=None)

Being compositions of registered ops, they differentiate through autograd and trace under kiln.jit
with no kernel of their own.

- ``input`` is a floating-point kiln tensor (an integer one is a DTypeError, as in PyTorch).
  float16 and bfloat16 are computed in float32 and rounded once at the end, as PyTorch's CPU
  kernels and Kiln's own ops are: rounding after every step would add an error per step.
- A loss's ``target`` has the input's shape. PyTorch broadcasts an l1, smooth l1 or huber target
  of another shape with a warning, which is almost always a bug (an [N, 1] prediction against [N]
  targets compares all N * N pairs); Kiln raises a ShapeError, as PyTorch refuses it for the
  binary cross entropies. ``weight`` and ``pos_weight`` broadcast to the input's shape. A loss has the
  promoted dtype of input and target.
- ``reduction`` is "mean" (over all elements), "sum" or "none".
"""

import numbers

from .. import _C
from ..errors import DTypeError, KilnTypeError, KilnValueError, ShapeError

__all__ = ["leaky_relu", "elu", "softplus", "hardtanh", "l1_loss", "smooth_l1_loss", "huber_loss",
           "binary_cross_entropy", "binary_cross_entropy_with_logits"]

_mint = _C.mint
_REDUCTIONS = ("mean", "sum", "none")
_NARROW = (_C.dtype.float16, _C.dtype.bfloat16)

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


def _floating_tensor(owner, name, value):
    """``value``'s dtype; a KilnTypeError unless it is a kiln tensor, a DTypeError unless it is
    floating-point."""
    if not isinstance(value, _C.Tensor):
        raise KilnTypeError(f"{owner}: expected {name} to be a kiln.Tensor, got "
                            f"{type(value).__name__}")
    if not value.dtype.is_floating_point:
        raise DTypeError(f"{owner}: expected a floating-point {name}, got {value.dtype.name}")
    return value.dtype


def _cast(tensor, dtype):
    return tensor if tensor.dtype == dtype else tensor.to(dtype)


def _widened(tensor):
    """A 16-bit float tensor in float32 (others as they are); see the module's documentation."""
    return _cast(tensor, _C.dtype.float32) if tensor.dtype in _NARROW else tensor


def _loss_operands(owner, input, target, reduction, floating_target=False):  # noqa: A002
    """Checks a loss's arguments; returns input and target in the dtype to compute in, and the
    loss's dtype."""
    if reduction not in _REDUCTIONS:
        raise KilnValueError(f"{owner}: expected reduction 'mean', 'sum' or 'none', got "
                             f"{reduction!r}")
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
    at NaN, which stays NaN) and 0 at its ends, where clamp's would be 1."""
    _floating_tensor("hardtanh", "input", input)
    low = check_real("hardtanh", "min_val", min_val)
    high = check_real("hardtanh", "max_val", max_val)
    if low > high:
        raise KilnValueError(f"hardtanh: expected min_val <= max_val, got min_val={min_val} and "
                             f"max_val={max_val}")
    return _mint.where(input <= low, low, _mint.where(input >= high, high, input))


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
    # log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)): exp never overflows. Written with where
    # rather than minimum and abs, which would give x = 0 its gradient (1/2) only through their
    # rules at ties (1/2 to each side of minimum, 0 for abs).
    negative = x < 0
    log_sigmoid = (_mint.where(negative, x, 0.0)
                   - _mint.log1p(_mint.exp(_mint.where(negative, x, -x))))
    if pos_weight is not None:
        log_sigmoid = log_sigmoid * ((pos_weight - 1) * t + 1)
    # log(1 - sigmoid(x)) = log(sigmoid(x)) - x, so the two terms share one log_sigmoid.
    loss = (1 - t) * x - log_sigmoid
    if weight is not None:
        loss = loss * weight
    return _reduced(loss, reduction, dtype)
