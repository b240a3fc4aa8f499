"""Resizing images and sequences, as PyTorch's: the function ``interpolate`` (also
kiln.nn.functional.interpolate) and the cells ``Upsample``, ``UpsamplingNearest2d`` and
``UpsamplingBilinear2d`` that apply it.

    y = F.interpolate(x, scale_factor=2, mode="bilinear")   # x [N, C, H, W] -> [N, C, 2H, 2W]
    up = kiln.nn.Upsample(size=(64, 64), mode="nearest")

Modes "nearest" (input [N, C, L] or [N, C, H, W]) and "bilinear" ([N, C, H, W]) with PyTorch's
CPU values: its kernels' rules for the source position of each output (``align_corners``, a
``scale_factor`` used as given unless ``recompute_scale_factor``, the shortcuts of its 2-d
"nearest"), computed in the precision its kernels use (see ``interpolate``; for "bilinear" on
uint8, its integer arithmetic). They are composed of kiln.mint ops (index_select at integer
indices computed with arange and floor, and for "bilinear" a weighted sum of two of them per
axis), so autograd differentiates them and kiln.jit traces them. PyTorch's other modes
("linear", "bicubic", "trilinear", "area", "nearest-exact"), 5-d input and ``antialias=True``
are KilnNotImplementedErrors naming what is missing.
"""

import math

from .. import _C, mint as _mint
from .._checks import checked_bool, checked_int
from ..errors import (DTypeError, KilnNotImplementedError, KilnTypeError, KilnValueError,
                      ShapeError)
from ..mint._composite import _cast, _dims, _widened, check_real
from .cell import Cell

__all__ = ["interpolate", "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"]

# The modes interpolate computes, and the input ranks each takes.
_RANKS = {"nearest": (3, 4), "bilinear": (4,)}
_SHAPES = {3: "[N, C, L]", 4: "[N, C, H, W]"}


def _check_options(owner, size, scale_factor, mode, align_corners, recompute_scale_factor):
    """The checks of interpolate's arguments that need no input, which Upsample makes at
    construction: ``mode`` one of _RANKS (another is a KilnNotImplementedError naming it),
    exactly one of ``size`` and ``scale_factor``, and PyTorch's rules for ``align_corners`` (a
    bool or None, None for "nearest") and ``recompute_scale_factor`` (not with ``size``)."""
    if mode not in _RANKS:
        raise KilnNotImplementedError(f"{owner}: mode {mode!r} is not supported; expected "
                                      f"{' or '.join(map(repr, _RANKS))}")
    if (size is None) == (scale_factor is None):
        raise KilnValueError(f"{owner}: expected exactly one of size and scale_factor, got "
                             f"{'both' if size is not None else 'neither'}")
    if align_corners is not None:
        checked_bool(owner, "align_corners", align_corners)
        if mode == "nearest":
            raise KilnValueError(f"{owner}: align_corners applies to mode 'bilinear' only; "
                                 f"expected None with mode 'nearest', got {align_corners}")
    if recompute_scale_factor and size is not None:
        raise KilnValueError(f"{owner}: recompute_scale_factor is not meaningful with an "
                             f"explicit size")


def _per_dim(name, value, count, check):
    """``value`` (one value or a sequence of ``count``) as a list of ``count`` checked values."""
    if not isinstance(value, (tuple, list)):
        return [check(name, value)] * count
    if len(value) != count:
        raise ShapeError(f"interpolate: expected {name} as one value or {count} (one per spatial "
                         f"dimension of the input), got {value!r}")
    return [check(f"{name}[{i}]", v) for i, v in enumerate(value)]


def _size(name, value):
    return checked_int("interpolate", name, value, low=1)


def _scale_factor(name, value):
    factor = check_real("interpolate", name, value)
    if not 0 < factor < math.inf:
        raise KilnValueError(f"interpolate: expected {name} to be a finite number > 0, got "
                             f"{value!r}")
    return factor


def _source_step(in_size, out_size, scale, align_corners, dtype):
    """PyTorch's area_pixel_compute_scale, in ``dtype`` as its kernels compute it: the distance in
    the input between the sources of neighbouring outputs. ``scale`` is the scale_factor given
    (None where the sizes define the step)."""
    if align_corners:
        if out_size == 1:
            return _C.tensor(0.0, dtype=dtype)
        return _C.tensor(float(in_size - 1), dtype=dtype) / (out_size - 1)
    if scale is not None:
        return _C.tensor(1.0 / scale, dtype=dtype)
    return _C.tensor(float(in_size), dtype=dtype) / out_size


def _nearest_along(x, dim, out_size, scale):
    """x resized along ``dim`` by PyTorch's "nearest" rule: output i reads input
    min(floor(i * step), size - 1). For a 4-d x, as PyTorch's upsample_nearest2d, the step is
    computed in float32 whatever x's dtype, and an output of the input's size or twice it takes
    input i or i // 2 whatever the scale_factor; for a 3-d x, as its upsample_nearest1d, the step
    is in float64 for a float64 x (else float32), with no such shortcut."""
    in_size = x.shape[dim]
    if x.ndim == 4 and out_size in (in_size, 2 * in_size):
        index = _mint.arange(out_size) // (out_size // in_size)
    else:
        dtype = (_C.dtype.float64 if x.ndim == 3 and x.dtype == _C.dtype.float64
                 else _C.dtype.float32)
        positions = _mint.arange(out_size, dtype=dtype) * _source_step(in_size, out_size, scale,
                                                                        False, dtype)
        index = _mint.clamp(_mint.floor(positions), max=in_size - 1).to(_C.dtype.int64)
    return _mint.index_select(x, dim, index)


def _linear_along(x, dim, out_size, scale, align_corners):
    """x (floating, in the dtype to compute in) resized along ``dim`` by PyTorch's linear rule:
    output i mixes the two inputs around its source position (i * step with align_corners, else
    (i + 1/2) * step - 1/2, at least 0), each weighted by its nearness to it."""
    in_size = x.shape[dim]
    if out_size == in_size:
        # PyTorch copies here, whatever the scale_factor: its weights are exactly (1, 0).
        return x
    steps = _mint.arange(out_size, dtype=x.dtype)
    step = _source_step(in_size, out_size, scale, align_corners, x.dtype)
    source = steps * step if align_corners else _mint.clamp(step * (steps + 0.5) - 0.5, min=0.0)
    low = _mint.clamp(_mint.floor(source), max=in_size - 1)
    high_weight = _mint.clamp(source - low, 0.0, 1.0)
    low = low.to(_C.dtype.int64)
    high = _mint.clamp(low + 1, max=in_size - 1)
    shape = [out_size] + [1] * (x.ndim - dim - 1)
    return (_mint.index_select(x, dim, low) * (1.0 - high_weight).reshape(shape)
            + _mint.index_select(x, dim, high) * high_weight.reshape(shape))


def _uint8_weights(in_size, out_size, scale, align_corners):
    """PyTorch's uint8 linear weights along one axis (its CPU kernels'
    _compute_index_ranges_int16_weights): (the lower input index of each output, the integer
    weights of it and of the next input, the precision: the weights' scale is 2 ** precision).
    Positions and weights are computed in float64 (Python floats), as there; an output whose
    source is the last input puts both weights on it."""
    if align_corners:
        step = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    else:
        step = 1.0 / scale if scale is not None else in_size / out_size
    lows, weights = [], []
    for i in range(out_size):
        source = step * i if align_corners else max(step * (i + 0.5) - 0.5, 0.0)
        low = min(math.floor(source), in_size - 1)
        high_weight = min(max(source - low, 0.0), 1.0)
        lows.append(low)
        weights.append((1.0 - high_weight, high_weight) if low + 1 < in_size
                       else ((1.0 - high_weight) + high_weight, 0.0))
    # The most bits (up to 22) that keep twice the largest weight, rounded, below 2 ** 15.
    largest = max(max(pair) for pair in weights)
    precision = 0
    while precision < 22 and int(0.5 + largest * (1 << (precision + 1))) < (1 << 15):
        precision += 1
    whole = [tuple(int(0.5 + w * (1 << precision)) for w in pair) for pair in weights]
    return lows, whole, precision


def _uint8_linear_along(x, dim, out_size, scale, align_corners):
    """uint8 x resized along ``dim`` by PyTorch's uint8 linear rule: output i is (x[low] * w0 +
    x[low + 1] * w1 + 2 ** (precision - 1)) >> precision, clamped to [0, 255], with the integer
    weights of _uint8_weights (exact in int32)."""
    in_size = x.shape[dim]
    if out_size == in_size:
        return x  # PyTorch skips the axis
    lows, whole, precision = _uint8_weights(in_size, out_size, scale, align_corners)
    shape = [out_size] + [1] * (x.ndim - dim - 1)
    low = _C.tensor(lows, dtype=_C.dtype.int64)
    high = _mint.clamp(low + 1, max=in_size - 1)
    low_weight, high_weight = (_C.tensor([pair[k] for pair in whole], dtype=_C.dtype.int32)
                               .reshape(shape) for k in (0, 1))
    wide = x.to(_C.dtype.int32)
    total = (_mint.index_select(wide, dim, low) * low_weight
             + _mint.index_select(wide, dim, high) * high_weight + (1 << (precision - 1)))
    return _mint.clamp(total // (1 << precision), 0, 255).to(_C.dtype.uint8)


def _output_sizes(owner, input, size, scale_factor, recompute_scale_factor):  # noqa: A002
    """(the output's spatial sizes, the scale_factor per spatial dimension that steps the source
    positions, or None where the sizes do), as PyTorch's interpolate computes them."""
    in_sizes = input.shape[2:]
    if size is not None:
        return _per_dim("size", size, len(in_sizes), _size), [None] * len(in_sizes)
    scales = _per_dim("scale_factor", scale_factor, len(in_sizes), _scale_factor)
    out_sizes = [math.floor(n * f) for n, f in zip(in_sizes, scales)]
    if 0 in out_sizes:
        raise KilnValueError(f"{owner}: scale_factor {scale_factor!r} gives input "
                             f"{_dims(input.shape)} an empty output {_dims(out_sizes)}")
    return out_sizes, ([None] * len(in_sizes) if recompute_scale_factor else scales)


def interpolate(input, size=None, scale_factor=None, mode="nearest",  # noqa: A002
                align_corners=None, recompute_scale_factor=None, antialias=False):
    """interpolate(input, size=None, scale_factor=None, mode='nearest', align_corners=None,
    recompute_scale_factor=None, antialias=False): input [N, C, L] or [N, C, H, W] resized to
    ``size`` (an int, or one per spatial dimension), or by ``scale_factor`` (likewise, numbers
    > 0: the size is floor(size * scale_factor)), with PyTorch's values:

    - "nearest" (3-d or 4-d input, any dtype): output i takes input min(floor(i * step),
      size - 1), with step 1 / scale_factor when it is given (unless recompute_scale_factor),
      else in_size / out_size, in float32 (float64 for a 3-d float64 input). As PyTorch's 2-d
      kernel, a 4-d input's axis resized to its size or twice it takes input i or i // 2,
      whatever the scale_factor. ``align_corners`` must be None.
    - "bilinear" (4-d floating or uint8 input): each output mixes the two nearest inputs along
      each axis; with align_corners=True the corner pixels' centres align (step (in - 1) / (out
      - 1)), with None or False their outer edges do (step as for "nearest"). An axis resized to
      its own size is copied, whatever the scale_factor. Computed in float64 for float64, else
      in float32 (16-bit floats rounded once at the end). A uint8 input is computed as
      PyTorch's CPU kernels do, in integers: per axis (the width, then the height), weights in
      fixed point (14 or 15 bits) and each sum rounded to uint8, so a value can differ by one
      from the rounded float32 result.

    The gradient is that of the values computed (PyTorch's 3-d "nearest" backward applies the
    2-d shortcuts its forward does not). Errors: another mode, 5-d input and antialias=True are
    KilnNotImplementedErrors; "bilinear" of an integer input other than uint8 (or of bool) is a
    DTypeError; a rank the mode does not take or an empty spatial dimension is a ShapeError, as
    is a ``size`` or ``scale_factor`` sequence of another length; a size below 1, a scale_factor
    that is not finite and > 0 or that gives an empty output, and the argument combinations
    PyTorch refuses are KilnValueErrors."""
    owner = "interpolate"
    _check_options(owner, size, scale_factor, mode, align_corners, recompute_scale_factor)
    if antialias:
        raise KilnNotImplementedError(f"{owner}: antialias=True is not supported")
    if not isinstance(input, _C.Tensor):
        raise KilnTypeError(f"{owner}: expected input to be a kiln.Tensor, got "
                            f"{type(input).__name__}")
    if input.ndim == 5:
        raise KilnNotImplementedError(f"{owner}: 5-d (volumetric) input is not supported, got "
                                      f"{_dims(input.shape)}")
    if input.ndim not in _RANKS[mode] or 0 in input.shape[2:]:
        wanted = " or ".join(_SHAPES[rank] for rank in _RANKS[mode])
        raise ShapeError(f"{owner}: expected input {wanted} with no empty spatial dimension for "
                         f"mode {mode!r}, got {_dims(input.shape)}")
    out_sizes, scales = _output_sizes(owner, input, size, scale_factor, recompute_scale_factor)
    if mode == "nearest":
        x = input
        for dim, (out_size, scale) in enumerate(zip(out_sizes, scales), 2):
            x = _nearest_along(x, dim, out_size, scale)
        return x
    if input.dtype == _C.dtype.uint8:
        # The width first, then the height, each rounded to uint8, as PyTorch's separable passes.
        x = input
        for dim, out_size, scale in reversed(list(zip((2, 3), out_sizes, scales))):
            x = _uint8_linear_along(x, dim, out_size, scale, bool(align_corners))
        return x
    if not input.dtype.is_floating_point:
        raise DTypeError(f"{owner}: expected a floating-point input, got {input.dtype.name} "
                         f"(mode 'bilinear' also takes uint8, as PyTorch's)")
    dtype = input.dtype
    x = _widened(input)
    for dim, (out_size, scale) in enumerate(zip(out_sizes, scales), 2):
        x = _linear_along(x, dim, out_size, scale, bool(align_corners))
    return _cast(x, dtype)


class Upsample(Cell):
    """Upsample(size=None, scale_factor=None, mode="nearest", align_corners=None,
    recompute_scale_factor=None): applies ``interpolate`` with these arguments. The checks that
    need no input (the mode, exactly one of size and scale_factor, align_corners) are made here,
    the others at the call; ``scale_factor`` is kept as a float (a tuple of floats), as in
    PyTorch."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        name = type(self).__name__
        _check_options(name, size, scale_factor, mode, align_corners, recompute_scale_factor)
        self.name = name
        self.size = size
        if isinstance(scale_factor, (tuple, list)):
            scale_factor = tuple(check_real(name, "scale_factor", f) for f in scale_factor)
        elif scale_factor is not None:
            scale_factor = check_real(name, "scale_factor", scale_factor)
        self.scale_factor = scale_factor
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def construct(self, x):
        return interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                           self.recompute_scale_factor)

    def extra_repr(self):
        resize = (f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None
                  else f"size={self.size!r}")
        return f"{resize}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """UpsamplingNearest2d(size=None, scale_factor=None): Upsample with mode "nearest"."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """UpsamplingBilinear2d(size=None, scale_factor=None): Upsample with mode "bilinear" and
    align_corners=True, as PyTorch's."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
