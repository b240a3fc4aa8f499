"""Resizing images, volumes and sequences, as PyTorch's: the function ``interpolate`` (also
kiln.nn.functional.interpolate) and the cells ``Upsample``, ``UpsamplingNearest2d`` and
``UpsamplingBilinear2d`` that apply it.

    y = F.interpolate(x, scale_factor=2, mode="bilinear")   # x [N, C, H, W] -> [N, C, 2H, 2W]
    y = F.interpolate(x, size=(32, 32), mode="bicubic", antialias=True)
    up = kiln.nn.Upsample(size=(64, 64), mode="nearest")

PyTorch's modes, with its CPU values: "nearest" and "nearest-exact" ([N, C, L], [N, C, H, W] or
[N, C, D, H, W]), "linear" ([N, C, L]), "bilinear" and "bicubic" ([N, C, H, W], also uint8 and
with ``antialias``), "trilinear" ([N, C, D, H, W]) and "area" (any of the three ranks). Each
follows its kernel's rules for the source position of each output (``align_corners``, a
``scale_factor`` used as given unless ``recompute_scale_factor``, the shortcuts of its small 2-d
"nearest") in the precision the kernel computes it (see ``interpolate``; for uint8, its integer
arithmetic). Every mode is separable, so each is composed of kiln.mint ops one spatial axis at a
time: index_select at integer indices (computed with arange and floor, or, where PyTorch computes
them from the sizes alone, in Python), and for the interpolating modes a weighted sum of the
inputs picked; "area" is kiln.mint's adaptive average pooling per axis. Autograd differentiates
them and kiln.jit traces them. PyTorch's newer "lanczos" is a KilnNotImplementedError.
"""

import math
import struct

from .. import _C, mint as _mint
from .._checks import checked_bool, checked_int
from ..errors import (DTypeError, KilnNotImplementedError, KilnTypeError, KilnValueError,
                      ShapeError)
from ..mint._composite import _average_windows, _cast, _dims, _widened, check_real
from .cell import Cell

__all__ = ["interpolate", "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"]

# The modes interpolate computes, and the input ranks each takes.
_RANKS = {"nearest": (3, 4, 5), "nearest-exact": (3, 4, 5), "linear": (3,), "bilinear": (4,),
          "bicubic": (4,), "trilinear": (5,), "area": (3, 4, 5)}
_SHAPES = {3: "[N, C, L]", 4: "[N, C, H, W]", 5: "[N, C, D, H, W]"}
# The modes that take align_corners; those PyTorch also computes with separable kernels, which
# take antialias and uint8; PyTorch's modes Kiln does not compute.
_INTERPOLATING = ("linear", "bilinear", "bicubic", "trilinear")
_SEPARABLE = ("bilinear", "bicubic")
_MISSING = ("lanczos",)
# PyTorch's 2-d "nearest" kernels take a vectorized path with their own index rule for an
# output whose height + width is at most this (for NCHW input).
_SMALL_2D_OUTPUT = 128
# The cubic convolution's parameter: PyTorch's (OpenCV's) without antialias, Keys' (PIL's) with.
_CUBIC_A, _CUBIC_A_ANTIALIAS = -0.75, -0.5


def _names(modes, last="or"):
    """The modes quoted, as "'a', 'b' or 'c'" (``last`` joins the final two)."""
    quoted = [repr(mode) for mode in modes]
    return f"{', '.join(quoted[:-1])} {last} {quoted[-1]}"


def _check_options(owner, size, scale_factor, mode, align_corners, recompute_scale_factor,
                   antialias=False):
    """The checks of interpolate's arguments that need no input, which Upsample makes at
    construction: ``mode`` one of _RANKS (PyTorch's "lanczos" is a KilnNotImplementedError),
    exactly one of ``size`` and ``scale_factor``, and PyTorch's rules for ``align_corners`` (a
    bool or None, None for "nearest", "nearest-exact" and "area"), ``recompute_scale_factor``
    (not with ``size``) and ``antialias`` (a bool, True for "bilinear" and "bicubic" only)."""
    if mode in _MISSING:
        raise KilnNotImplementedError(f"{owner}: mode {mode!r} is not supported; expected "
                                      f"{_names(_RANKS)}")
    if not isinstance(mode, str) or mode not in _RANKS:
        raise KilnValueError(f"{owner}: expected mode {_names(_RANKS)}, got {mode!r}")
    if (size is None) == (scale_factor is None):
        raise KilnValueError(f"{owner}: expected exactly one of size and scale_factor, got "
                             f"{'both' if size is not None else 'neither'}")
    if align_corners is not None:
        checked_bool(owner, "align_corners", align_corners)
        if mode not in _INTERPOLATING:
            raise KilnValueError(f"{owner}: align_corners applies to modes "
                                 f"{_names(_INTERPOLATING, 'and')} only; expected None with mode "
                                 f"{mode!r}, got {align_corners}")
    if recompute_scale_factor and size is not None:
        raise KilnValueError(f"{owner}: recompute_scale_factor is not meaningful with an "
                             f"explicit size")
    if checked_bool(owner, "antialias", antialias) and mode not in _SEPARABLE:
        raise KilnValueError(f"{owner}: antialias=True applies to modes "
                             f"{_names(_SEPARABLE, 'and')} only, got mode {mode!r}")


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


def _float64_step(in_size, out_size, scale, align_corners):
    """_source_step in float64, as a Python float (where PyTorch computes weights in float64)."""
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    return 1.0 / scale if scale is not None else in_size / out_size


def _source_positions(out_size, step, align_corners, cubic=False):
    """PyTorch's area_pixel_compute_source_index of outputs 0 .. out_size - 1, in ``step``'s dtype:
    i * step with align_corners, else (i + 1/2) * step - 1/2, at least 0 unless ``cubic`` (whose
    taps past the border are clamped instead)."""
    steps = _mint.arange(out_size, dtype=step.dtype)
    if align_corners:
        return steps * step
    source = step * (steps + 0.5) - 0.5
    return source if cubic else _mint.clamp(source, min=0.0)


def _nearest_along(x, dim, out_size, scale, exact, small):
    """x resized along ``dim`` by PyTorch's "nearest" rule (output i reads input
    floor(i * step)) or, if ``exact``, its "nearest-exact" rule (floor((i + 1/2) * step)), at
    most size - 1. ``small`` selects the rules of the vectorized kernel PyTorch's 2-d "nearest"
    and "nearest-exact" run for an output of height + width <= 128: the step in float32 whatever
    x's dtype (for "nearest-exact", multiplied by i + 1/2 in float64), and for "nearest" an output
    of the input's size or twice it takes input i or i // 2 whatever the scale_factor. Their
    generic kernel (larger outputs, 3-d and 5-d inputs) computes the position in float64 for a
    float64 x, else in float32, with no shortcut. Either floors it as C's floorf does, rounded to
    float32 first."""
    in_size = x.shape[dim]
    if small and not exact and out_size in (in_size, 2 * in_size):
        index = _mint.arange(out_size) // (out_size // in_size)
        return _mint.index_select(x, dim, index)
    float32, float64 = _C.dtype.float32, _C.dtype.float64
    step = _source_step(in_size, out_size, scale, False,
                        float64 if x.dtype == float64 and not small else float32)
    if not exact:
        position = _source_positions(out_size, step, align_corners=True)  # i * step
    elif small:
        position = (_mint.arange(out_size, dtype=float64) + 0.5) * step.to(float64)
    else:
        # The generic kernel's position (i + 1/2) * step - 1/2, at least 0, plus a float64 1/2.
        position = _source_positions(out_size, step, align_corners=False).to(float64) + 0.5
    index = _mint.clamp(_mint.floor(position.to(float32)), max=in_size - 1)
    return _mint.index_select(x, dim, index.to(_C.dtype.int64))


def _cubic1(x, a):
    """The cubic convolution kernel for |x| <= 1 (x a number or a tensor), as PyTorch writes it."""
    return ((a + 2) * x - (a + 3)) * x * x + 1


def _cubic2(x, a):
    """The cubic convolution kernel for 1 < |x| < 2, as PyTorch writes it."""
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a


def _weighted_sum(x, dim, taps):
    """The sum over the (index, weight) ``taps`` (1-d tensors, one entry per output) of
    x.index_select(dim, index) * weight: each output along ``dim`` as a weighted sum of the
    inputs it reads, tap by tap, left to right. Floating x takes kiln.mint.resample, one pass
    (src/ops/resample.cc); integers (uint8's fixed point, in int32) a gather, a product and a
    sum per tap."""
    if x.dtype.is_floating_point:
        return _mint.resample(x, dim, _mint.stack([index for index, _ in taps]),
                              _mint.stack([weight for _, weight in taps]))
    total = None
    for index, weight in taps:
        shape = [index.shape[0]] + [1] * (x.ndim - dim - 1)
        term = _mint.index_select(x, dim, index) * weight.reshape(shape)
        total = term if total is None else total + term
    return total


def _interpolate_along(x, dim, out_size, scale, align_corners, cubic):
    """x (floating, in the dtype to compute in) resized along ``dim`` by PyTorch's linear rule
    (output i mixes the two inputs around its source position, each weighted by its nearness to
    it) or its ``cubic`` one (the four inputs around it, by the cubic convolution kernel with
    A = -0.75, indices clamped to the input). The position is that of _source_positions, its
    integer part at most size - 1 and its fraction clamped to [0, 1], as PyTorch's kernels do."""
    in_size = x.shape[dim]
    if out_size == in_size and not cubic:
        # PyTorch copies here, whatever the scale_factor: its weights are exactly (1, 0).
        return x
    step = _source_step(in_size, out_size, scale, align_corners, x.dtype)
    if cubic:
        # PyTorch's x86 build computes the cubic kernel's (i + 1/2) * step - 1/2 with one fused
        # multiply-add, rounded once: here in float64 (exact for a float32 step), then rounded.
        float64 = _C.dtype.float64
        source = _source_positions(out_size, step.to(float64), align_corners, cubic).to(x.dtype)
    else:
        source = _source_positions(out_size, step, align_corners)
    low = _mint.clamp(_mint.floor(source), max=in_size - 1)
    t = _mint.clamp(source - low, 0.0, 1.0)
    if cubic:
        a = _CUBIC_A
        weights, first = [_cubic2(t + 1.0, a), _cubic1(t, a), _cubic1(1.0 - t, a),
                          _cubic2(2.0 - t, a)], -1
    else:
        weights, first = [1.0 - t, t], 0
    low = low.to(_C.dtype.int64)
    return _weighted_sum(x, dim, [(_mint.clamp(low + k, 0, in_size - 1), weight)
                                  for k, weight in enumerate(weights, first)])


def _filter(v, cubic, a):
    """PyTorch's separable filters: the triangle max(1 - |v|, 0), or the cubic convolution kernel
    with parameter ``a`` (0 past |v| = 2)."""
    v = abs(v)
    if not cubic:
        return 1.0 - v if v < 1.0 else 0.0
    return _cubic1(v, a) if v < 1.0 else _cubic2(v, a) if v < 2.0 else 0.0


def _float32(value):
    """``value`` rounded to the nearest float32, where PyTorch's float kernels round."""
    return struct.unpack("f", struct.pack("f", value))[0]


def _antialias_weights(in_size, out_size, scale, align_corners, cubic, rounded):
    """PyTorch's antialiased weights along one axis (its CPU kernels'
    _compute_indices_min_size_weights_aa): (the first input each output reads, the weights of it
    and of the next inputs, as many per output as the widest window, zeros past the output's
    own). The triangle or cubic (A = -0.5) filter is centred at (i + 1/2) * step, widened by the
    step when it is above 1 (downsampling), cut at the borders, and each output's weights are
    divided by their sum. Computed in float64 (Python floats), rounded to float32 by ``rounded``
    where PyTorch's float32 kernel rounds (float64 and uint8 inputs use float64)."""
    step = rounded(_float64_step(in_size, out_size, scale, align_corners))
    support = rounded((2.0 if cubic else 1.0) * max(step, 1.0))
    width = math.ceil(support) * 2 + 1
    stretch = rounded(1.0 / step) if step >= 1.0 else 1.0
    firsts, rows = [], []
    for i in range(out_size):
        center = rounded(step * (i + 0.5))
        first = max(int(rounded(center - support) + 0.5), 0)
        count = min(max(min(int(rounded(center + support) + 0.5), in_size) - first, 0), width)
        row = [rounded(_filter(rounded((rounded(j + first - center) + 0.5) * stretch), cubic,
                               _CUBIC_A_ANTIALIAS)) for j in range(count)]
        total = 0.0
        for weight in row:
            total = rounded(total + weight)
        if total != 0.0:
            row = [rounded(weight / total) for weight in row]
        firsts.append(first)
        rows.append(row + [0.0] * (width - count))
    return firsts, rows


def _uint8_weights(in_size, out_size, scale, align_corners, cubic):
    """PyTorch's weights of uint8 "bilinear" and "bicubic" along one axis (its CPU kernels'
    _compute_indices_min_size_weights, in float64): (the first input each output reads, the
    linear (2) or cubic (4, A = -0.75) weights of it and the next inputs around the source
    position, those of taps past a border added to the border input's, and the largest weight
    met on the way, which sets the fixed-point precision)."""
    step = _float64_step(in_size, out_size, scale, align_corners)
    taps = 4 if cubic else 2
    half = taps // 2
    firsts, rows, largest = [], [], 0.0
    for i in range(out_size):
        source = step * i if align_corners else step * (i + 0.5) - 0.5
        if not cubic:
            source = max(source, 0.0)
        low = min(math.floor(source), in_size - 1)
        fraction = min(max(source - low, 0.0), 1.0)
        unbound = low - half + 1
        first = max(unbound, 0)
        count = min(max(min(low + half + 1, in_size) - first, 0), taps)
        row, slot = [0.0] * taps, 0
        for j in range(taps):
            if unbound + j <= 0:
                slot = 0
            elif unbound + j >= in_size - 1:
                slot = count - 1
            row[slot] += _filter(j + 1 - half - fraction, cubic, _CUBIC_A)
            largest = max(largest, row[slot])
            slot += 1
        firsts.append(first)
        rows.append(row)
    return firsts, rows, largest


def _window_sum(x, dim, firsts, rows, dtype):
    """_weighted_sum over windows: output i reads the inputs from firsts[i] on, with the weights
    rows[i] (in ``dtype``; the indices of zero weights past the input's end clamped to it)."""
    last = x.shape[dim] - 1
    taps = [(_C.tensor([min(first + k, last) for first in firsts], dtype=_C.dtype.int64),
             _C.tensor([row[k] for row in rows], dtype=dtype)) for k in range(len(rows[0]))]
    return _weighted_sum(x, dim, taps)


def _uint8_along(x, dim, out_size, scale, align_corners, cubic, antialias):
    """uint8 x resized along ``dim`` as PyTorch's uint8 kernels do: the weights of
    _antialias_weights or _uint8_weights in fixed point (times 2 ** precision, the most bits up
    to 22 that keep twice the largest weight below 2 ** 15, rounded half away from zero), and
    each output (the sum of inputs times weights + 2 ** (precision - 1)) >> precision, clamped
    to [0, 255] (exact in int32)."""
    if antialias:
        firsts, rows = _antialias_weights(x.shape[dim], out_size, scale, align_corners, cubic,
                                          float)
        largest = max(max(row) for row in rows)
    else:
        firsts, rows, largest = _uint8_weights(x.shape[dim], out_size, scale, align_corners,
                                               cubic)
    precision = 0
    while precision < 22 and int(0.5 + largest * (1 << (precision + 1))) < (1 << 15):
        precision += 1
    whole = [[int(w * (1 << precision) + (0.5 if w >= 0 else -0.5)) for w in row]
             for row in rows]
    total = _window_sum(x.to(_C.dtype.int32), dim, firsts, whole, _C.dtype.int32)
    return _mint.clamp((total + (1 << (precision - 1))) // (1 << precision), 0,
                       255).to(_C.dtype.uint8)


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


def _check_dtype(owner, input, mode):  # noqa: A002
    """A DTypeError unless ``input`` is floating-point, or uint8 for "bilinear" and "bicubic"."""
    if input.dtype.is_floating_point or (input.dtype == _C.dtype.uint8 and mode in _SEPARABLE):
        return
    which = (f"mode {mode!r} also takes uint8" if mode in _SEPARABLE
             else f"mode {mode!r} takes floating-point input only")
    raise DTypeError(f"{owner}: expected a floating-point input, got {input.dtype.name} "
                     f"({which}, as PyTorch's)")


def interpolate(input, size=None, scale_factor=None, mode="nearest",  # noqa: A002
                align_corners=None, recompute_scale_factor=None, antialias=False):
    """interpolate(input, size=None, scale_factor=None, mode='nearest', align_corners=None,
    recompute_scale_factor=None, antialias=False): input [N, C, L], [N, C, H, W] or
    [N, C, D, H, W] resized to ``size`` (an int, or one per spatial dimension), or by
    ``scale_factor`` (likewise, numbers > 0: the size is floor(size * scale_factor)), with
    PyTorch's values. The step is the distance in the input between the sources of neighbouring
    outputs: 1 / scale_factor when it is given (unless recompute_scale_factor), else
    in_size / out_size; with align_corners=True (the interpolating modes) the corner pixels'
    centres align instead, step (in - 1) / (out - 1).

    - "nearest" (3-d, 4-d or 5-d input, any dtype): output i takes input min(floor(i * step),
      size - 1). "nearest-exact" (likewise): input min(floor((i + 1/2) * step), size - 1).
      As PyTorch's kernels, the position is computed in float64 for a float64 input, else in
      float32, except for a 4-d input whose output height + width is at most 128, where
      PyTorch's vectorized kernel computes the step in float32 and, for "nearest", an axis
      resized to its size or twice it takes input i or i // 2, whatever the scale_factor.
    - "linear" (3-d), "bilinear" (4-d), "trilinear" (5-d): along each axis, each output mixes
      the two inputs around its source position (i + 1/2) * step - 1/2 (at least 0; i * step
      with align_corners), each weighted by its nearness. An axis resized to its own size is
      copied, whatever the scale_factor.
    - "bicubic" (4-d): the four inputs around the same source position (not clamped at 0),
      weighted by the cubic convolution kernel with A = -0.75, indices clamped to the input
      (the border values repeat); it can overshoot the input's range.
    - "area" (3-d, 4-d or 5-d): the mean over PyTorch's adaptive pooling windows, from
      floor(i * in / out) to ceil((i + 1) * in / out) along each axis.
    - ``antialias=True`` ("bilinear" and "bicubic"): PyTorch's separable antialiased filters,
      a triangle or a cubic with A = -0.5 (PIL's), centred at (i + 1/2) * step and widened by
      the step when downsampling so every input contributes, each output's weights normalised
      to sum to 1.

    Floating inputs are computed in float64 for float64, else in float32 (16-bit floats rounded
    once at the end). "bilinear" and "bicubic" also take uint8, computed as PyTorch's CPU
    kernels do, in integers: per axis (the width, then the height), weights in fixed point and
    each sum rounded to uint8 and clamped to [0, 255], so a value can differ by one from the
    rounded float32 result.

    The gradient is that of the values computed. PyTorch's backward breaks from its forward in
    three places: its "nearest" backward applies the shortcuts and float32 step of the
    vectorized 2-d kernel whatever the rank and size; where a scale_factor used as given leaves
    an axis's size unchanged, its "bicubic" forward resamples the axis but its backward copies
    it (when no axis changes), and its antialiased forward copies the axis but its backward
    resamples it.
    Errors: PyTorch's "lanczos" mode is a KilnNotImplementedError, another unknown mode a
    KilnValueError; an integer (or bool) input is a DTypeError except for "nearest" and
    "nearest-exact" and uint8 for "bilinear" and "bicubic"; a rank the mode does not take or an
    empty spatial dimension is a ShapeError, as is a ``size`` or ``scale_factor`` sequence of
    another length; a size below 1, a scale_factor that is not finite and > 0 or that gives an
    empty output, ``align_corners`` with "nearest", "nearest-exact" or "area", ``antialias``
    with another mode than "bilinear" and "bicubic", and the other argument combinations
    PyTorch refuses are KilnValueErrors."""
    owner = "interpolate"
    _check_options(owner, size, scale_factor, mode, align_corners, recompute_scale_factor,
                   antialias)
    if not isinstance(input, _C.Tensor):
        raise KilnTypeError(f"{owner}: expected input to be a kiln.Tensor, got "
                            f"{type(input).__name__}")
    if input.ndim not in _RANKS[mode] or 0 in input.shape[2:]:
        wanted = " or ".join(_SHAPES[rank] for rank in _RANKS[mode])
        raise ShapeError(f"{owner}: expected input {wanted} with no empty spatial dimension for "
                         f"mode {mode!r}, got {_dims(input.shape)}")
    out_sizes, scales = _output_sizes(owner, input, size, scale_factor, recompute_scale_factor)
    axes = list(zip(range(2, input.ndim), out_sizes, scales))
    if mode in ("nearest", "nearest-exact"):
        small = input.ndim == 4 and sum(out_sizes) <= _SMALL_2D_OUTPUT
        x = input
        for dim, out_size, scale in axes:
            x = _nearest_along(x, dim, out_size, scale, mode == "nearest-exact", small)
        return x
    _check_dtype(owner, input, mode)
    align_corners, cubic = bool(align_corners), mode == "bicubic"
    if input.dtype == _C.dtype.uint8:
        # The width first, then the height, each rounded to uint8, as PyTorch's separable passes,
        # which skip an axis of unchanged size.
        x = input
        for dim, out_size, scale in reversed(axes):
            if out_size != x.shape[dim]:
                x = _uint8_along(x, dim, out_size, scale, align_corners, cubic, antialias)
        return x
    dtype = input.dtype
    x = _widened(input)
    for dim, out_size, scale in axes:
        if mode == "area":
            x = _average_windows(x, dim, out_size)
        elif not antialias:
            x = _interpolate_along(x, dim, out_size, scale, align_corners, cubic)
        elif out_size != x.shape[dim]:  # PyTorch's separable passes skip such an axis
            rounded = float if x.dtype == _C.dtype.float64 else _float32
            firsts, rows = _antialias_weights(x.shape[dim], out_size, scale, align_corners,
                                              cubic, rounded)
            x = _window_sum(x, dim, firsts, rows, x.dtype)
    return _cast(x, dtype)


class Upsample(Cell):
    """Upsample(size=None, scale_factor=None, mode="nearest", align_corners=None,
    recompute_scale_factor=None): applies ``interpolate`` with these arguments (any of its modes;
    PyTorch's cell has no ``antialias``). The checks that need no input (the mode, exactly one of
    size and scale_factor, align_corners) are made here, the others at the call;
    ``scale_factor`` is kept as a float (a tuple of floats), as in PyTorch."""

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
