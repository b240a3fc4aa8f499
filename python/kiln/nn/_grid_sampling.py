"""Spatial transformer sampling, as PyTorch's: ``affine_grid`` makes the sampling grid of a batch of
affine transforms and ``grid_sample`` reads an image or a volume at the grid's points (both
re-exported by kiln.nn.functional).

    grid = affine_grid(theta, [N, C, H, W], align_corners=False)   # theta [N, 2, 3]
    y = grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)

Both are compositions of kiln.mint ops, so autograd differentiates them (grid_sample with
respect to the input and to the grid) and kiln.jit traces them. grid_sample follows the rules of
PyTorch's kernels (aten/src/ATen/native/GridSampler.h): each spatial axis maps its normalized
coordinate to a source position (unnormalize), pads it (clip for "border"; reflect_coordinates,
then clip, for "reflection") and picks the taps around it with their weights (see Note [Grid
taps]); the taps of all axes combine into offsets in the flattened input, whose rows one
index_select reads for the whole batch, and each output is the weighted sum of its taps, those
outside the input read as 0.
"""

import math
import warnings

from .. import _C, mint as _mint
from .._checks import as_int, checked_bool
from ..errors import DTypeError, KilnTypeError, KilnValueError, ShapeError
from ..mint._composite import _cast, _dims, _floating_tensor, _widened
from .upsampling import _CUBIC_A, _cubic1, _cubic2, _names

__all__ = ["affine_grid", "grid_sample"]

_MODES = ("bilinear", "nearest", "bicubic")
_PADDING_MODES = ("zeros", "border", "reflection")
# PyTorch's warnings, word for word: code written against it may filter them by their text.
_DEFAULT_ALIGN_WARNING = (
    "Default grid_sample and affine_grid behavior has changed to align_corners=False since "
    "1.3.0. Please specify align_corners=True if the old behavior is desired. See the "
    "documentation of grid_sample for details.")
_UNIT_SIZE_WARNING = (
    "Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
    "align_corners=True. This is not an intended use case of affine_grid. See the documentation "
    "of affine_grid for details.")

# Note [Grid taps]
# Per spatial axis, each output reads T taps at integer positions (as floats), with weights:
#   - "nearest": T = 1, the padded source position rounded half to even (PyTorch's nearbyint);
#   - "bilinear": T = 2, floor(p) and floor(p) + 1 of the padded position p, weighted
#     (floor(p) + 1) - p and p - floor(p), as PyTorch writes them;
#   - "bicubic": T = 4, floor(s) - 1 .. floor(s) + 2 of the unpadded position s, weighted by the
#     cubic convolution kernel (A = -0.75) at t = s - floor(s); each tap position is padded on its
#     own (PyTorch's get_value_bounded), since padding s first would move the taps.
# A tap outside [0, size - 1] (possible with "zeros" only) reads 0: its value is masked with
# where, not its weight, so an inf or NaN in the input at the row it is redirected to reaches
# neither the output nor the gradients. The floor and the rounding have zero gradient, so the
# grid's gradient comes through the weights alone, and is PyTorch's: the padding's derivative (0
# at and past the borders, +-1 inside by the reflections' parity) times the unnormalizing scale.


def _align_corners(owner, align_corners):
    """``align_corners`` as a bool: None is False with PyTorch's warning (pointing at the caller
    of ``owner``), another value than a bool a KilnTypeError."""
    if align_corners is None:
        warnings.warn(_DEFAULT_ALIGN_WARNING, stacklevel=3)
        return False
    return checked_bool(owner, "align_corners", align_corners)


def _choice(owner, name, value, choices):
    """``value`` if it is one of ``choices`` (strings), else a KilnValueError listing them."""
    if not isinstance(value, str) or value not in choices:
        raise KilnValueError(f"{owner}: expected {name} {_names(choices)}, got {value!r}")
    return value


# ------------------------------------------------------------------------------------------------
# affine_grid


def _linspace_from_neg_one(steps, align_corners, dtype):
    """PyTorch's base coordinates along an axis of ``steps`` points: -1 to 1 evenly, the centres of
    the corner pixels with ``align_corners``, else scaled by (steps - 1) / steps to the centres of
    pixels spanning [-1, 1]; a single point at 0."""
    if steps <= 1:
        return _mint.zeros(1, dtype=dtype)
    points = _mint.linspace(-1.0, 1.0, steps, dtype=dtype)
    return points if align_corners else points * (steps - 1) / steps


def _grid_size(owner, size):
    """``size`` (a sequence of 4 or 5 ints) as a tuple of ints."""
    numbers = [as_int(value) for value in size] if isinstance(size, (tuple, list)) else [None]
    if None in numbers:
        raise KilnTypeError(f"{owner}: expected size to be a list or tuple of ints, got "
                            f"{type(size).__name__} {size!r}")
    if len(numbers) not in (4, 5):
        raise ShapeError(f"{owner}: expected size [N, C, H, W] (a 2-d transform) or "
                         f"[N, C, D, H, W] (a 3-d one), got {_dims(numbers)}")
    return tuple(numbers)


def affine_grid(theta, size, align_corners=None):
    """affine_grid(theta, size, align_corners=None): the sampling grid of a batch of affine
    transforms, for grid_sample, as PyTorch's. For ``size`` [N, C, H, W] and ``theta``
    [N, 2, 3] the grid is [N, H, W, 2]: point (h, w) holds theta[n] @ (x_w, y_h, 1), with x and
    y the normalized coordinates of the output's pixels along the width and the height; for
    ``size`` [N, C, D, H, W] and ``theta`` [N, 3, 4] it is [N, D, H, W, 3], of (x, y, z, 1).
    The coordinates run from -1 to 1: with ``align_corners`` from the centre of the first pixel
    to that of the last, else from the outer edge of the first to that of the last (pixel i of n
    at (2i + 1) / n - 1); an axis of one pixel is at 0. ``align_corners=None`` is False with
    PyTorch's warning; True with an axis of one pixel warns as PyTorch does. The grid has
    theta's dtype (16-bit floats computed in float32) and is differentiable in theta.

    Errors: theta not a kiln tensor is a KilnTypeError, of an integer dtype a DTypeError; a size
    that is not 4 or 5 ints, or a theta of another shape than [N, 2, 3] / [N, 3, 4] (with the
    size's N) a ShapeError; a size not positive a KilnValueError."""
    owner = "affine_grid"
    align_corners = _align_corners(owner, align_corners)
    dtype = _floating_tensor(owner, "theta", theta)
    sizes = _grid_size(owner, size)
    spatial = list(sizes[2:])
    rank = len(spatial)
    if tuple(theta.shape) != (sizes[0], rank, rank + 1):
        raise ShapeError(f"{owner}: expected theta of shape [N, {rank}, {rank + 1}] with N = "
                         f"{sizes[0]} for size {_dims(sizes)}, got {_dims(theta.shape)}")
    if align_corners and min(spatial) == 1:
        warnings.warn(_UNIT_SIZE_WARNING, stacklevel=2)
    if min(sizes) <= 0:
        raise KilnValueError(f"{owner}: expected a size of positive numbers, got {_dims(sizes)}")
    theta = _widened(theta)
    axes = [_linspace_from_neg_one(steps, align_corners, theta.dtype) for steps in spatial]
    # Column 0 holds x, which runs along the last axis (the width); then y, (z,) and the 1s that
    # add theta's translation.
    columns = list(reversed(_mint.meshgrid(*axes, indexing="ij")))
    columns.append(_mint.ones(spatial, dtype=theta.dtype))
    base = _mint.stack(columns, -1).reshape(1, math.prod(spatial), rank + 1)
    grid = _mint.matmul(base, _mint.transpose(theta, 1, 2))
    return _cast(grid.reshape([sizes[0]] + spatial + [rank]), dtype)


# ------------------------------------------------------------------------------------------------
# grid_sample


def _unnormalize(coord, size, align_corners):
    """PyTorch's grid_sampler_unnormalize: -1 .. 1 to the centres of the corner pixels, 0 ..
    size - 1 (``align_corners``), or to their outer edges, -0.5 .. size - 0.5."""
    if align_corners:
        return (coord + 1.0) / 2.0 * (size - 1)
    return ((coord + 1.0) * size - 1.0) / 2.0


def _clip(position, size):
    """PyTorch's clip_coordinates: ``position`` clamped to [0, size - 1], with gradient 1 strictly
    inside and 0 at the borders and past them (a NaN becomes 0)."""
    high = float(size - 1)
    return _mint.where(position > 0.0, _mint.where(position < high, position, high), 0.0)


def _reflect(position, twice_low, twice_high):
    """PyTorch's reflect_coordinates: ``position`` reflected at twice_low / 2 and twice_high / 2
    until it lies between them, with gradient +-1 by the parity of the reflections (+1 at the
    low end itself); an empty span is 0 (followed by _clip, whose gradient there is 0)."""
    if twice_low == twice_high:
        return position * 0.0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    shifted = position - low
    # |shifted| with the gradient sign PyTorch gives it: -1 below the low end, else +1.
    distance = shifted * _mint.where(shifted < 0.0, -1.0, 1.0)
    extra = _mint.fmod(distance, span)
    odd = _mint.fmod(_mint.floor(distance / span), 2.0) != 0.0
    return _mint.where(odd, (span - extra) + low, extra + low)


def _padded(position, size, padding_mode, align_corners):
    """PyTorch's compute_coordinates: ``position`` as ``padding_mode`` reads it ("zeros": as it
    is; "border": clipped; "reflection": reflected at the borders, then clipped)."""
    if padding_mode == "border":
        return _clip(position, size)
    if padding_mode == "reflection":
        if align_corners:
            position = _reflect(position, 0, 2 * (size - 1))
        else:
            position = _reflect(position, -1, 2 * size - 1)
        return _clip(position, size)
    return position


def _axis_taps(coord, size, mode, padding_mode, align_corners):
    """The taps of one spatial axis of ``size`` for the normalized coordinates ``coord`` [N, Q]:
    (positions, weights), each [N, Q, T]; "nearest" has no weights (None). See Note [Grid
    taps]."""
    source = _unnormalize(coord, size, align_corners)
    if mode == "bicubic":
        low = _mint.floor(source)
        t = source - low
        u = 1.0 - t
        weights = [_cubic2(t + 1.0, _CUBIC_A), _cubic1(t, _CUBIC_A), _cubic1(u, _CUBIC_A),
                   _cubic2(u + 1.0, _CUBIC_A)]
        offsets = _mint.arange(-1, 3, dtype=source.dtype)
        positions = _padded(_mint.unsqueeze(low, -1) + offsets, size, padding_mode, align_corners)
        return positions, _mint.stack(weights, -1)
    source = _padded(source, size, padding_mode, align_corners)
    if mode == "nearest":
        return _mint.unsqueeze(_mint.round(source), -1), None
    low = _mint.floor(source)
    high = low + 1.0
    return _mint.stack([low, high], -1), _mint.stack([high - source, source - low], -1)


def _sample(x, grid, mode, padding_mode, align_corners):
    """grid_sample of checked operands ``x`` [N, C, *S] and ``grid`` [N, *O, len(S)], both in
    the dtype to compute in."""
    batch, channels, *sizes = x.shape
    rank, outputs = len(sizes), list(grid.shape[1:-1])
    count = math.prod(outputs)
    coords = _mint.unbind(grid.reshape(batch, count, rank), -1)
    # Per axis, x (the width, the last) first, as PyTorch multiplies the weights; each axis's taps
    # get a dimension of their own, so the sums and products below broadcast them into every
    # combination: [N, Q, T_D, T_H, T_W] for a volume.
    index = inside = weight = None
    stride = 1
    for axis in reversed(range(rank)):
        size = sizes[axis]
        positions, weights = _axis_taps(coords[rank - 1 - axis], size, mode, padding_mode,
                                        align_corners)
        within = _mint.logical_and(positions >= 0.0, positions <= size - 1.0)
        safe = _mint.where(within, positions, 0.0)
        if weights is None:
            # 1, tied to the grid through sign (whose gradient is 0): "nearest" reads the input
            # at rounded positions, and the grid's gradient is PyTorch's zeros rather than none.
            weights = _mint.sign(safe) * 0.0 + 1.0
        shape = [batch, count] + [1] * axis + [positions.shape[-1]] + [1] * (rank - 1 - axis)
        rows = safe.to(_C.dtype.int64).reshape(shape) * stride
        within, weights = within.reshape(shape), weights.reshape(shape)
        index = rows if index is None else index + rows
        inside = within if inside is None else _mint.logical_and(inside, within)
        weight = weights if weight is None else weight * weights
        stride *= size
    taps = math.prod(index.shape[2:])
    # The input as rows of channels, [N * P, C]: one index_select reads the taps of the batch.
    planes = _mint.permute(x.reshape(batch, channels, stride), (0, 2, 1)).reshape(
        batch * stride, channels)
    offsets = index.reshape(batch, count * taps) + _mint.arange(batch).reshape(batch, 1) * stride
    picked = _mint.index_select(planes, 0, offsets.reshape(-1)).reshape(
        batch, count, taps, channels)
    picked = _mint.where(inside.reshape(batch, count, taps, 1), picked, 0.0)
    result = _mint.sum(picked * weight.reshape(batch, count, taps, 1), 2)
    return _mint.permute(result, (0, 2, 1)).reshape([batch, channels] + outputs)


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros",  # noqa: A002
                align_corners=None):
    """grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    ``input`` read at the points of ``grid``, as PyTorch's. An image [N, C, H_in, W_in] with a
    grid [N, H, W, 2] gives [N, C, H, W]; a volume [N, C, D_in, H_in, W_in] with a grid
    [N, D, H, W, 3] gives [N, C, D, H, W]. grid[n, h, w] holds the point (x, y) (for volumes
    (x, y, z)) in normalized coordinates: x = -1 is the left of the input and 1 its right (y
    the top and bottom, z the front and back); with ``align_corners`` these are the centres of
    the corner pixels, else their outer edges. ``align_corners=None`` is False with PyTorch's
    warning.

    - ``mode``: "bilinear" (trilinear for volumes) mixes the 2 ** d pixels around the point,
      "nearest" takes the nearest one (ties to even, as PyTorch's nearbyint), "bicubic" mixes
      the 4 ** d around it by the cubic convolution kernel with A = -0.75 (tricubic for volumes,
      as PyTorch's newer kernels); it can overshoot the input's range.
    - ``padding_mode``: where a point (for "bicubic", a tap) falls outside the input, "zeros"
      reads 0, "border" the nearest border pixel, and "reflection" the pixel reflected at the
      borders (those pixels' centres with ``align_corners``, else their outer edges), as often
      as needed.

    The gradient goes to ``input`` and to ``grid`` as PyTorch's: the grid's is 0 for "nearest",
    and for the other modes 0 along an axis where "border" or "reflection" clips the point to a
    border. Floating-point operands of one dtype only (16-bit floats computed in float32 and
    rounded once). A NaN in the grid gives what PyTorch's CPU kernels give: for "bilinear" and
    "nearest" with "border" or "reflection", the value at x = -1 (PyTorch's documented rule);
    0 for "nearest" with "zeros"; NaN otherwise.

    Errors: an operand that is not a kiln tensor is a KilnTypeError; an integer operand, or a
    grid of another dtype than the input's, a DTypeError; an unknown mode or padding_mode a
    KilnValueError; ranks other than those above, another batch size, a last grid dimension
    that is not the input's spatial rank, or an empty spatial dimension of the input a
    ShapeError."""
    owner = "grid_sample"
    mode = _choice(owner, "mode", mode, _MODES)
    padding_mode = _choice(owner, "padding_mode", padding_mode, _PADDING_MODES)
    align_corners = _align_corners(owner, align_corners)
    dtype = _floating_tensor(owner, "input", input)
    if _floating_tensor(owner, "grid", grid) != dtype:
        raise DTypeError(f"{owner}: expected grid of the input's dtype {dtype.name}, got "
                         f"{grid.dtype.name}")
    rank = input.ndim - 2
    if input.ndim not in (4, 5) or grid.ndim != input.ndim:
        raise ShapeError(f"{owner}: expected input [N, C, H_in, W_in] with grid [N, H, W, 2], or "
                         f"input [N, C, D_in, H_in, W_in] with grid [N, D, H, W, 3], got input "
                         f"{_dims(input.shape)} and grid {_dims(grid.shape)}")
    if grid.shape[0] != input.shape[0] or grid.shape[-1] != rank:
        raise ShapeError(f"{owner}: expected grid [{input.shape[0]}, ..., {rank}] (the input's "
                         f"batch size and one coordinate per spatial dimension) for input "
                         f"{_dims(input.shape)}, got {_dims(grid.shape)}")
    if 0 in input.shape[2:]:
        raise ShapeError(f"{owner}: expected input with non-empty spatial dimensions, got "
                         f"{_dims(input.shape)}")
    x = _widened(input)
    return _cast(_sample(x, _cast(grid, x.dtype), mode, padding_mode, align_corners), dtype)
