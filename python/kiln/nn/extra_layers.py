"""PyTorch layers that ported models use, over kiln.nn.functional: PixelShuffle and
PixelUnshuffle, Bilinear, InstanceNorm1d, InstanceNorm2d and InstanceNorm3d.

    up = kiln.nn.PixelShuffle(2)                # [N, C * 4, H, W] -> [N, C, 2H, 2W]
    bl = kiln.nn.Bilinear(20, 30, 40)           # weight [40, 20, 30], bias [40]
    inorm = kiln.nn.InstanceNorm2d(16, affine=True)

Bilinear(in1_features, in2_features, out_features, bias=True, dtype=None) computes
y[..., o] = sum_ij x1[..., i] weight[o, i, j] x2[..., j] + bias[o] (F.bilinear), its weight
[out, in1, in2] and bias [out] initialised as PyTorch's, both from U(-1/sqrt(in1), 1/sqrt(in1)).
Both inputs must have the parameters' dtype: another one is a DTypeError naming both, as in
PyTorch.

InstanceNorm1d (x [N, C, L] or one sample [C, L]), InstanceNorm2d (x [N, C, H, W] or [C, H, W]) and
InstanceNorm3d (x [N, C, D, H, W] or [C, D, H, W]) follow PyTorch's, calling F.instance_norm as
it does: each sample's channel is normalized over its own spatial dimensions, (x - mean) /
sqrt(var + eps) with the biased variance, then times ``weight`` [C] (ones) plus ``bias`` [C]
(zeros) with ``affine`` (default False; keyword-only ``bias=False`` keeps the weight only). With
``track_running_stats`` (default False) the buffers ``running_mean`` (zeros), ``running_var`` (ones)
and ``num_batches_tracked`` (0, int64; never counted, as in PyTorch) are kept: while training they
are updated in place under no_grad, running = (1 - momentum) * running + momentum * batch statistic,
with the batch statistic the mean over the samples of their per-channel means and of their
*unbiased* per-channel variances (``momentum=None`` is 0, PyTorch's: the running statistics stay);
in eval mode the running statistics normalize. Parameters and buffers have PyTorch's
names, order and dtypes, so its state dicts load.

As PyTorch's, normalizing with the input's statistics needs more than one spatial value per
channel (a KilnValueError), and an input whose channel count is not ``num_features`` is
accepted with PyTorch's warning when the layer has neither ``affine`` nor running statistics
(nothing depends on the count), a ShapeError otherwise. An input of another rank is a
ShapeError, a non-floating one or one of another dtype than the layer's parameters and buffers
a DTypeError; the other argument errors are BatchNorm's.
"""

import math
import warnings

from .. import _C
from .._checks import checked_bool, checked_int
from ..errors import DTypeError, KilnValueError, ShapeError
from ..mint._composite import _dims
from . import functional as F
from . import init
from ._layer_arguments import checked_tensor
from .cell import Cell
from .normalization import _BatchNorm
from .parameter import Parameter

__all__ = ["PixelShuffle", "PixelUnshuffle", "Bilinear", "InstanceNorm1d", "InstanceNorm2d",
           "InstanceNorm3d"]

_mint = _C.mint


class PixelShuffle(Cell):
    """PixelShuffle(upscale_factor): [..., C * r^2, H, W] -> [..., C, H * r, W * r] with r =
    ``upscale_factor`` (an int >= 1; F.pixel_shuffle)."""

    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = checked_int("PixelShuffle", "upscale_factor", upscale_factor, low=1)

    def construct(self, x):
        return F.pixel_shuffle(x, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Cell):
    """PixelUnshuffle(downscale_factor): [..., C, H * r, W * r] -> [..., C * r^2, H, W] with r =
    ``downscale_factor`` (an int >= 1; F.pixel_unshuffle), the inverse of PixelShuffle."""

    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = checked_int("PixelUnshuffle", "downscale_factor",
                                            downscale_factor, low=1)

    def construct(self, x):
        return F.pixel_unshuffle(x, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"


class Bilinear(Cell):
    """Bilinear(in1_features, in2_features, out_features, bias=True, dtype=None): x1 [...,
    in1_features] and x2 [..., in2_features] (the same leading dimensions) -> [...,
    out_features], with weight [out, in1, in2] and bias [out] (none with ``bias=False``) of
    ``dtype`` (default: the default dtype), initialised as PyTorch's (see kiln.nn.extra_layers'
    documentation). ``in1_features`` is an int >= 1 (the bound divides by its root), the others
    ints >= 0."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, dtype=None):
        super().__init__()
        self.in1_features = checked_int("Bilinear", "in1_features", in1_features, low=1)
        self.in2_features = checked_int("Bilinear", "in2_features", in2_features, low=0)
        self.out_features = checked_int("Bilinear", "out_features", out_features, low=0)
        checked_bool("Bilinear", "bias", bias)
        self.weight = Parameter(_mint.empty(self.out_features, self.in1_features,
                                            self.in2_features, dtype=dtype))
        self.bias = Parameter(_mint.empty(self.out_features, dtype=dtype)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        """Draws the weight and the bias from U(-1/sqrt(in1_features), 1/sqrt(in1_features))."""
        bound = 1 / math.sqrt(self.in1_features)
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def construct(self, x1, x2):
        return F.bilinear(x1, x2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class _InstanceNorm(_BatchNorm):
    """The shared part of InstanceNorm1d and InstanceNorm2d: BatchNorm's parameters, buffers
    and argument checks, with instance statistics. Subclasses set ``_ranks`` (one sample's
    rank, then a batch's) and ``_layout``."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, dtype)
        if not checked_bool(type(self).__name__, "bias", bias):
            self.bias = None

    def extra_repr(self):
        # PyTorch's, which names ``bias`` since the layers take it.
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")

    def _check_input(self, x):
        kind = type(self).__name__
        checked_tensor(kind, "input", x)
        if x.ndim not in self._ranks:
            raise ShapeError(f"{kind}: expected an input {self._layout}, got {_dims(x.shape)} "
                             f"({x.ndim}-D)")
        if not x.dtype.is_floating_point:
            raise DTypeError(f"{kind}: expected a floating-point input, got {x.dtype.name}")
        self._check_dtype(x)
        channel_dim = x.ndim - self._ranks[0]
        channels = x.shape[channel_dim]
        if channels == self.num_features:
            return
        if self.affine or self.track_running_stats:
            raise ShapeError(f"{kind}: expected {self.num_features} channels (num_features) in "
                             f"dim {channel_dim} of the input, got {_dims(x.shape)}")
        # PyTorch's: without parameters or running statistics num_features is unused.
        warnings.warn(f"{kind}: input's size at dim={channel_dim} does not match num_features "
                      f"({self.num_features}); it is not used because affine=False",
                      UserWarning, stacklevel=4)

    def construct(self, x):
        self._check_input(x)
        if x.ndim == self._ranks[0]:  # one sample: a batch of one
            return _mint.squeeze(self._normalized(_mint.unsqueeze(x, 0)), 0)
        return self._normalized(x)

    def _normalized(self, x):
        """x [N, C, *spatial] normalized by F.instance_norm, called as PyTorch's cell calls it:
        with the input's statistics while training or without running statistics (the running
        ones, when kept, then move towards them), with the running statistics in eval mode."""
        use_input_stats = self.training or not self.track_running_stats
        if use_input_stats and math.prod(x.shape[2:]) == 1:
            # F.instance_norm refuses it too; here the error names the cell.
            raise KilnValueError(f"{type(self).__name__}: expected more than 1 spatial value per "
                                 f"channel when using the input's statistics, got input "
                                 f"{_dims(x.shape)}")
        momentum = 0.0 if self.momentum is None else self.momentum
        return F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                               use_input_stats, momentum, self.eps)


class InstanceNorm1d(_InstanceNorm):
    """InstanceNorm1d(num_features, eps=1e-5, momentum=0.1, affine=False,
    track_running_stats=False, dtype=None, *, bias=True): instance normalization of x [N, C, L]
    or one sample [C, L] over L, per sample and channel C = ``num_features``, as PyTorch's (see
    kiln.nn.extra_layers' documentation)."""

    _ranks = (2, 3)
    _layout = "[C, L] or [N, C, L]"


class InstanceNorm2d(_InstanceNorm):
    """InstanceNorm2d(num_features, eps=1e-5, momentum=0.1, affine=False,
    track_running_stats=False, dtype=None, *, bias=True): instance normalization of x [N, C, H,
    W] or one sample [C, H, W] over H and W, per sample and channel C = ``num_features``, as
    PyTorch's (see kiln.nn.extra_layers' documentation)."""

    _ranks = (3, 4)
    _layout = "[C, H, W] or [N, C, H, W]"


class InstanceNorm3d(_InstanceNorm):
    """InstanceNorm3d(num_features, eps=1e-5, momentum=0.1, affine=False,
    track_running_stats=False, dtype=None, *, bias=True): instance normalization of x [N, C, D,
    H, W] or one sample [C, D, H, W] over D, H and W, per sample and channel C = ``num_features``,
    as PyTorch's (see kiln.nn.extra_layers' documentation)."""

    _ranks = (4, 5)
    _layout = "[C, D, H, W] or [N, C, D, H, W]"
