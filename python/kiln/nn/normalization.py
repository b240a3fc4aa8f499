"""kiln.nn.LayerNorm and kiln.nn.RMSNorm over the trailing ``normalized_shape`` dimensions;
kiln.nn.BatchNorm1d, kiln.nn.BatchNorm2d and kiln.nn.BatchNorm3d over the batch, per channel;
kiln.nn.GroupNorm over groups of channels, per sample.

    ln = kiln.nn.LayerNorm(512)                   # weight ones, bias zeros, eps 1e-5
    rms = kiln.nn.RMSNorm([8, 64], eps=1e-6)       # weight ones
    bn = kiln.nn.BatchNorm2d(16)                   # x [N, 16, H, W]; running statistics
    gn = kiln.nn.GroupNorm(4, 16)                  # x [N, 16, ...]; 4 groups of 4 channels

``normalized_shape`` is an int or a sequence of ints. With ``elementwise_affine=False`` there
are no parameters; LayerNorm's ``bias=False`` keeps the weight only (as in PyTorch).

BatchNorm1d (x [N, C] or [N, C, L]), BatchNorm2d (x [N, C, H, W]) and BatchNorm3d (x [N, C, D,
H, W]) follow PyTorch's BatchNorm: y = (x - mean) / sqrt(var + eps) * weight + bias per channel C
(weight ones, bias zeros; none with ``affine=False``). While training, mean and var are the
batch's (over every dimension but C; var biased), and with ``track_running_stats`` the buffers
``running_mean`` (zeros), ``running_var`` (ones) and ``num_batches_tracked`` (0, int64) are
updated in place under ``kiln.no_grad()``: num_batches_tracked += 1, then running = (1 -
momentum) * running + momentum * batch statistic, with the *unbiased* batch variance for
running_var; ``momentum=None`` averages every batch so far (momentum 1 / num_batches_tracked).
In eval mode the running statistics normalize, and nothing is updated; without running statistics
(``track_running_stats=False``) the batch's are used in eval mode too. The names, the order
and the dtypes of the parameters and buffers are PyTorch's, so its state dicts load either way.
Because the updates are in place, they also happen at every call of a ``kiln.jit`` function
(a whole training step) that calls the layer; ``momentum``, ``eps`` and the other settings are
read at the trace, as constants of the graph. The running variance's factor n / (n - 1) is
computed in the graph from the batch, so ``kiln.jit(dynamic=True)`` follows every batch size in
training mode too. Only the batch sizes it traces check the batch's size, though (the error
below, and an empty batch, which updates nothing): a later batch of one value per channel, or of
none, made from the traces, gives NaN running statistics.

BatchNorm is composed of kiln.mint ops (mean, var, rsqrt, ...), so autograd differentiates it
through them. Its errors: ``num_features`` that is no positive int, an ``eps`` or
``momentum`` that is no number in range, ``affine`` / ``track_running_stats`` that are no bools
(KilnTypeError / KilnValueError); an input of another rank or with another number of channels
(ShapeError), of another dtype than the layer's parameters and buffers (DTypeError; ``dtype``,
by default the default dtype, sets theirs), or with a single value per channel while using batch
statistics (KilnValueError: its variance is undefined).
"""

import math
import numbers

from .. import _C
from .._checks import check_held_dtype, checked_bool, checked_int
from ..autograd import no_grad
from ..errors import DTypeError, KilnTypeError, KilnValueError, ShapeError
from ..mint._composite import check_real
from . import functional as F
from . import init
from .cell import Cell
from .parameter import Parameter

__all__ = ["LayerNorm", "RMSNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "GroupNorm"]

_mint = _C.mint
_SIXTEEN_BITS = (_C.dtype.float16, _C.dtype.bfloat16)


def _shape(normalized_shape):
    if isinstance(normalized_shape, int):
        return (normalized_shape,)
    return tuple(normalized_shape)


def _reset_affine(cell):
    """Sets a normalization's weight to ones and its bias to zeros (those it has)."""
    if cell.weight is not None:
        init.ones_(cell.weight)
    if cell.bias is not None:
        init.zeros_(cell.bias)


class _Norm(Cell):
    def __init__(self, normalized_shape, eps, elementwise_affine, bias, dtype):
        super().__init__()
        self.normalized_shape = _shape(normalized_shape)
        # A real number, checked here rather than at the first call; RMSNorm's may be None.
        if eps is not None or not isinstance(self, RMSNorm):
            eps = check_real(type(self).__name__, "eps", eps)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        affine = elementwise_affine
        self.weight = (Parameter(_C.mint.empty(self.normalized_shape, dtype=dtype))
                       if affine else None)
        self.bias = (Parameter(_C.mint.empty(self.normalized_shape, dtype=dtype))
                     if affine and bias else None)
        self.reset_parameters()

    def reset_parameters(self):
        _reset_affine(self)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class LayerNorm(_Norm):
    """LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, dtype=None):
    (x - mean) / sqrt(var + eps) over the trailing ``normalized_shape`` dimensions, times
    ``weight`` (ones) plus ``bias`` (zeros), as PyTorch's LayerNorm. See kiln.nn.normalization's
    documentation."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, dtype=None):
        super().__init__(normalized_shape, eps, elementwise_affine, bias, dtype)

    def construct(self, x):
        return _C.mint.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class RMSNorm(_Norm):
    """RMSNorm(normalized_shape, eps=1e-6, elementwise_affine=True, dtype=None): x / sqrt(mean(x**2)
    + eps) over the trailing ``normalized_shape`` dimensions, times ``weight`` (ones). The default
    eps is 1e-6 for every dtype, where torch.nn.RMSNorm's (None) is finfo(float32).eps = 1.19e-7
    below float64 and finfo(float64).eps for float64: pass ``eps`` to match a torch model
    (``eps=None`` is PyTorch's, as in F.rms_norm)."""

    def __init__(self, normalized_shape, eps=1e-6, elementwise_affine=True, dtype=None):
        super().__init__(normalized_shape, eps, elementwise_affine, False, dtype)

    def construct(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)


class _BatchNorm(Cell):
    """The shared part of the BatchNorms; subclasses set ``_ranks`` (the input
    ranks accepted) and ``_layout`` (how errors describe them)."""

    _ranks = ()
    _layout = ""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, dtype=None):
        super().__init__()
        kind = type(self).__name__
        self.num_features = checked_int(kind, "num_features", num_features, low=1)
        self.eps = self._number("eps", eps, 0.0, math.inf)
        self.momentum = None if momentum is None else self._number("momentum", momentum, 0.0, 1.0)
        for name, flag in (("affine", affine), ("track_running_stats", track_running_stats)):
            checked_bool(kind, name, flag)
        self.affine = affine
        self.track_running_stats = track_running_stats
        shape = (self.num_features,)
        self.weight = Parameter(_mint.empty(shape, dtype=dtype)) if affine else None
        self.bias = Parameter(_mint.empty(shape, dtype=dtype)) if affine else None
        if track_running_stats:
            self.register_buffer("running_mean", _mint.zeros(shape, dtype=dtype))
            self.register_buffer("running_var", _mint.ones(shape, dtype=dtype))
            self.register_buffer("num_batches_tracked", _mint.zeros((), dtype=_C.dtype.int64))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)
        self.reset_parameters()

    def _number(self, name, value, low, high):
        """``value`` as a float in [low, high]: a KilnTypeError for no real number, a
        KilnValueError out of range (NaN included)."""
        kind = type(self).__name__
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise KilnTypeError(f"{kind}: {name} must be a number, got {type(value).__name__} "
                                f"{value!r}")
        if not low <= value <= high:
            bounds = f"at least {low}" if high == math.inf else f"in [{low}, {high}]"
            raise KilnValueError(f"{kind}: {name} must be {bounds}, got {value}")
        return float(value)

    def reset_running_stats(self):
        """Sets running_mean to zeros, running_var to ones and num_batches_tracked to 0, in
        place (jitted functions holding them see it)."""
        with no_grad():
            for name, value in (("running_mean", 0), ("running_var", 1),
                                ("num_batches_tracked", 0)):
                buffer = getattr(self, name)
                if buffer is not None:
                    buffer[...] = value

    def reset_parameters(self):
        """Resets the running statistics, the weight to ones and the bias to zeros."""
        self.reset_running_stats()
        _reset_affine(self)

    def _check_input(self, x):
        kind = type(self).__name__
        if not isinstance(x, _C.Tensor):
            raise KilnTypeError(f"{kind}: expected a kiln.Tensor input, got {type(x).__name__}")
        shape = list(x.shape)
        if len(shape) not in self._ranks:
            raise ShapeError(f"{kind}: expected a {self._layout} input, got shape {shape} "
                             f"({len(shape)}-D)")
        if shape[1] != self.num_features:
            raise ShapeError(f"{kind}: expected an input with {self.num_features} channels in "
                             f"dim 1, got shape {shape}")
        self._check_dtype(x)
        if not x.dtype.is_floating_point:
            raise DTypeError(f"{kind}: expected a floating-point input, got {x.dtype.name}")

    def _check_dtype(self, x):
        """A DTypeError unless the tensor x has the dtype of the parameters and running
        statistics (when there are any), as PyTorch's BatchNorm refuses another."""
        held = next((t for t in (self.weight, self.bias, self.running_mean, self.running_var)
                     if t is not None), None)
        if held is not None:
            check_held_dtype(type(self).__name__, held.dtype,
                             "the dtype of its parameters and running statistics",
                             [("an input", x)])

    def construct(self, x):
        self._check_input(x)
        running_mean, running_var = self.running_mean, self.running_var
        # As PyTorch: batch statistics while training, and in eval mode without running ones.
        use_batch = self.training or (running_mean is None and running_var is None)
        dims = [0] + list(range(2, x.ndim))
        shape = [1, self.num_features] + [1] * (x.ndim - 2)
        if use_batch:
            count = math.prod(x.shape) // self.num_features
            if count == 1:
                raise KilnValueError(f"{type(self).__name__}: expected more than 1 value per "
                                     f"channel when using batch statistics (training), got "
                                     f"input shape {list(x.shape)}")
            mean = _mint.mean(x, dims, keepdim=True)
            var = _mint.var(x, dims, correction=0, keepdim=True)
            if self.training and self.track_running_stats:
                if count == 0:  # an empty batch: nothing to average (its mean is NaN); counted
                    self._count_batch()
                else:
                    self._update_running_stats(x, mean, var, count)
        else:
            mean = _mint.reshape(running_mean, shape)
            var = _mint.reshape(running_var, shape)
        scale = _mint.rsqrt(var + self.eps)
        if self.weight is not None:
            scale = scale * _mint.reshape(self.weight, shape)
        y = (x - mean) * scale
        if self.bias is not None:
            y = y + _mint.reshape(self.bias, shape)
        return y

    def _count_batch(self):
        """Adds one to ``num_batches_tracked`` in place (when the cell has it) and returns it."""
        steps = self.num_batches_tracked
        if steps is not None:
            with no_grad():
                steps += 1
        return steps

    def _update_running_stats(self, x, mean, var, count):
        """The in-place updates of the running statistics from the batch ``x``'s ``mean`` and
        (biased) ``var`` over ``count`` values per channel, as PyTorch's, under no_grad."""
        with no_grad():
            steps = self._count_batch()
            if self.momentum is not None:
                factor = self.momentum
            elif steps is not None:
                # A tensor, not float(steps): under kiln.jit the count changes at every call.
                factor = _mint.reciprocal(steps.to(mean.dtype))
            else:
                factor = 0.0  # PyTorch's: a cumulative average without a count stays put
            if self.running_mean is not None:
                batch_mean = _mint.reshape(mean, [self.num_features])
                self.running_mean[...] = self.running_mean * (1 - factor) + batch_mean * factor
            if self.running_var is not None:
                unbiased = self._unbiased(x, var, count)
                self.running_var[...] = self.running_var * (1 - factor) + unbiased * factor

    def _unbiased(self, x, var, count):
        """The batch ``x``'s unbiased variance per channel, [C]: its biased ``var`` times Bessel's
        correction count / (count - 1). The correction is computed from x's batch dimension
        rather than as a Python number, which would be a constant of a kiln.jit graph, wrong at
        another batch size under dynamic=True. It is rounded and multiplied as that number was
        (in x's dtype, in float32 for 16-bit floats), so eager results are unchanged."""
        # One value per sample: the count is their number times the size of the other
        # dimensions (the same at every batch size), exact in float64.
        rows = x[(slice(None),) + (0,) * (x.ndim - 1)]
        total = _mint.sum(_mint.ones_like(rows, dtype=_C.dtype.float64)) * (count // x.shape[0])
        compute = _C.dtype.float32 if x.dtype in _SIXTEEN_BITS else x.dtype
        unbiased = _mint.reshape(var, [self.num_features]) * (total / (total - 1)).to(compute)
        return unbiased if unbiased.dtype == x.dtype else unbiased.to(x.dtype)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """BatchNorm1d(num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
    dtype=None): batch normalization of x [N, C] or [N, C, L] per channel C = ``num_features``,
    as PyTorch's BatchNorm1d (see kiln.nn.normalization's documentation)."""

    _ranks = (2, 3)
    _layout = "2-D [N, C] or 3-D [N, C, L]"


class BatchNorm2d(_BatchNorm):
    """BatchNorm2d(num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
    dtype=None): batch normalization of x [N, C, H, W] per channel C = ``num_features``, as
    PyTorch's BatchNorm2d (see kiln.nn.normalization's documentation)."""

    _ranks = (4,)
    _layout = "4-D [N, C, H, W]"


class BatchNorm3d(_BatchNorm):
    """BatchNorm3d(num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
    dtype=None): batch normalization of x [N, C, D, H, W] per channel C = ``num_features``, as
    PyTorch's BatchNorm3d (see kiln.nn.normalization's documentation)."""

    _ranks = (5,)
    _layout = "5-D [N, C, D, H, W]"


class GroupNorm(Cell):
    """GroupNorm(num_groups, num_channels, eps=1e-5, affine=True, dtype=None, *, bias=True):
    x [N, C, ...] with C = ``num_channels`` split into ``num_groups`` groups of C / num_groups
    channels, each sample's group normalized over its channels and the dimensions after C,
    (x - mean) / sqrt(var + eps) with the biased variance, then times ``weight`` [C] (ones) plus
    ``bias`` [C] (zeros), as PyTorch's GroupNorm (F.group_norm). Without ``affine`` there are
    no parameters; ``bias=False`` (keyword-only, as in PyTorch's newest) keeps the weight only.
    It keeps no running statistics: training and eval mode compute alike.

    ``num_groups`` and ``num_channels`` are ints >= 1, the channels divisible by the groups (a
    KilnValueError otherwise, as in PyTorch), ``eps`` a number >= 0, ``affine`` and ``bias``
    bools. An input with another number of channels in dim 1 is a ShapeError, also without
    ``affine`` (where PyTorch accepts any divisible by the groups)."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, dtype=None, *,
                 bias=True):
        super().__init__()
        self.num_groups = checked_int("GroupNorm", "num_groups", num_groups, low=1)
        self.num_channels = checked_int("GroupNorm", "num_channels", num_channels, low=1)
        if self.num_channels % self.num_groups:
            raise KilnValueError(f"GroupNorm: num_channels must be divisible by num_groups, got "
                                 f"num_channels={num_channels}, num_groups={num_groups}")
        self.eps = check_real("GroupNorm", "eps", eps)
        if not self.eps >= 0:
            raise KilnValueError(f"GroupNorm: eps must be at least 0, got {eps}")
        self.affine = checked_bool("GroupNorm", "affine", affine)
        checked_bool("GroupNorm", "bias", bias)
        shape = (self.num_channels,)
        self.weight = Parameter(_mint.empty(shape, dtype=dtype)) if affine else None
        self.bias = Parameter(_mint.empty(shape, dtype=dtype)) if affine and bias else None
        self.reset_parameters()

    def reset_parameters(self):
        """Sets the weight to ones and the bias to zeros."""
        _reset_affine(self)

    def construct(self, x):
        if isinstance(x, _C.Tensor) and (x.ndim < 2 or x.shape[1] != self.num_channels):
            raise ShapeError(f"GroupNorm: expected an input [N, {self.num_channels}, ...] with "
                             f"{self.num_channels} channels in dim 1, got shape {list(x.shape)}")
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")
