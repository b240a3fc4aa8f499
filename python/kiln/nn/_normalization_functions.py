"""The normalization and distance functions of kiln.nn.functional (which exports them; PyTorch's
names, argument order and defaults): layer_norm, rms_norm, group_norm, batch_norm, instance_norm,
normalize, cosine_similarity and pairwise_distance, over kiln.mint's ops or composed of them.
The normalization cells (kiln/nn/normalization.py, extra_layers.py) and the distance cells
(kiln/nn/distance.py) call them.
"""

import math

from .. import _C, mint as _mint
from .._checks import checked_bool, checked_int
from ..autograd import no_grad
from ..errors import DTypeError, KilnValueError, ShapeError
from ..mint._composite import _cast, _dims, _floating_tensor, _widened, check_real
from ._layer_arguments import checked_tensor

__all__ = ["layer_norm", "rms_norm", "group_norm", "batch_norm", "instance_norm", "normalize",
           "cosine_similarity", "pairwise_distance"]


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
