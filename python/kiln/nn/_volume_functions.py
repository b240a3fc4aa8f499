"""kiln.nn.functional's volumetric (3-d) layers, with PyTorch's signatures, defaults, values and
gradients, of input [N, C, D, H, W] or one sample [C, D, H, W] (whose result then has no batch
dimension either):

    conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1)
    conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1)
    max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False)
    avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None)
    adaptive_avg_pool3d(input, output_size)
    adaptive_max_pool3d(input, output_size, return_indices=False)

``kernel_size``, ``stride``, ``padding``, ``output_padding`` and ``dilation`` are ints or
sequences of three (depth, height, width); conv3d's ``padding`` may also be "valid" or "same"
(stride 1 only), as conv2d's. The convolutions run kiln.mint's Conv3D ops (conv3d,
conv_transpose3d); each pooling is composed of kiln.mint's 2-d pooling over (H, W) and a pass over
the depth made of views, gathers and sums (Note [Volumes from planes]), so autograd
differentiates it and kiln.jit traces it. As in the 2-d functions, a pooling's padding is at most
half its kernel, the convolutions' input and bias must have the weight's dtype (a DTypeError
otherwise), and max_pool3d's and adaptive_max_pool3d's indices are PyTorch's: the int64 offset
d * H * W + h * W + w in its [D, H, W] volume of the element each maximum took (the first maximum
in (d, h, w) order, or the last NaN), -1 for a window that holds no input element (as
kiln.mint.max_pool2d's). 16-bit floats are averaged and summed in float32 and rounded once.
"""

import math

from .. import _C, mint as _mint
from .._checks import checked_bool, checked_int
from .._type_info import iinfo
from ..errors import KilnValueError, ShapeError
from ..mint import _composite
from ..mint._composite import _cast, _dims, _floating_tensor, _widened
from ._layer_arguments import batched, check_like_weight, checked_sizes

__all__ = ["conv3d", "conv_transpose3d", "max_pool3d", "avg_pool3d", "adaptive_avg_pool3d",
           "adaptive_max_pool3d"]

# Note [Volumes from planes]
# Each pooling folds the depth into a dimension of a 2-d op and does the depth's part itself.
# - The poolings: the 2-d pooling of every depth plane (folded into the channels), then each
#   output depth's window of planes gathered (index_select) and reduced. For a maximum with
#   indices the winner follows PyTorch's scan in (d, h, w) order (the first maximum, or the last
#   NaN), which each plane's own winner composes into. PyTorch's average divides by a product of
#   one factor per dimension (the window's size clipped to the padding, or its number of input
#   elements), so the 2-d mean summed over the depth window and divided by the depth's factor is
#   the 3-d mean.
# - The adaptive poolings: a window is a product of intervals, so the 2-d adaptive pooling of
#   every plane, then the adaptive windows of the depth.


def _fold_depth(x):
    """x [N, C, D, H, W] as [N, C * D, H, W]: its depth planes as channels of a 2-d pooling."""
    n, c, d, h, w = x.shape
    return x.reshape(n, c * d, h, w)


def _unfold_depth(planes, depth):
    """A 2-d pooling's [N, C * D, H', W'] of _fold_depth's planes as [N, C, D, H', W']."""
    n, cd, h, w = planes.shape
    return planes.reshape(n, cd // depth, depth, h, w)


def _check_planes(owner, given, x):
    """A ShapeError naming the ``given`` input unless x [N, C, D, H, W] has non-zero sizes in every
    dimension but the batch's (PyTorch's poolings refuse empty planes)."""
    if 0 in x.shape[1:]:
        raise ShapeError(f"{owner}: expected input with non-zero sizes in every dimension but the "
                         f"batch's, got {_dims(given.shape)}")


def _pool_sizes(owner, kernel_size, stride, padding, dilation):
    """A pooling's kernel_size, stride (None: the kernel's), padding and dilation as triples of
    ints: checked_sizes' errors, and a KilnValueError for a padding above half the kernel (checked
    for the depth here, and for every dimension at once rather than by the 2-d op's message)."""
    kernel = checked_sizes(owner, "kernel_size", kernel_size, 3, 1)
    stride = kernel if stride is None else checked_sizes(owner, "stride", stride, 3, 1)
    padding = checked_sizes(owner, "padding", padding, 3, 0)
    dilation = checked_sizes(owner, "dilation", dilation, 3, 1)
    if any(p > k // 2 for p, k in zip(padding, kernel)):
        raise KilnValueError(f"{owner}: expected padding at most half the kernel size, got "
                             f"padding {list(padding)} for kernel_size {list(kernel)}")
    return kernel, stride, padding, dilation


def _pooled_sizes(owner, x, kernel, stride, padding, dilation, ceil_mode):
    """The number of windows along the depth, height and width of x [N, C, D, H, W]: PyTorch's
    pooling_output_shape (src/ops/pool.cc's pool_out_size), rounded up with ``ceil_mode`` but no
    window starting in the padding after the input. None along a dimension is a ShapeError
    naming ``owner`` (checked here for all three, rather than by the 2-d op's message)."""
    outs = []
    for name, size, k, s, p, d in zip(("depth", "height", "width"), x.shape[2:], kernel, stride,
                                      padding, dilation):
        span = d * (k - 1) + 1
        slack = s - 1 if ceil_mode else 0
        out = (size + 2 * p - span + slack) // s + 1
        if ceil_mode and (out - 1) * s >= size + p:
            out -= 1
        if out < 1:
            raise ShapeError(f"{owner}: the padded input {name} ({size + 2 * p}) holds no window "
                             f"of the dilated kernel {name} ({span}); expected at least "
                             f"{max(1, span - slack)}{' with ceil_mode' if ceil_mode else ''}")
        outs.append(out)
    return outs


def _depth_windows(out, kernel, stride, padding, dilation):
    """The input depths (some outside the input: padding) each of ``out`` windows covers."""
    return [[o * stride - padding + k * dilation for k in range(kernel)] for o in range(out)]


def _gather_depths(planes, positions):
    """planes [N, C, D, H', W'] at ``positions`` (an int64 tensor [out, taps] of depths):
    [N, C, out, taps, H', W']."""
    n, c, _, h, w = planes.shape
    out, taps = positions.shape
    picked = _mint.index_select(planes, 2, positions.reshape(-1))
    return picked.reshape(n, c, out, taps, h, w)


def _depth_maxima(planes, offsets, positions, plane_size):
    """The maximum over each window of depth planes (a 2-d max pooling's [N, C, D, H', W']) whose
    depths ``positions`` ([out, taps], int64) lists: [N, C, out, H', W'], the gradient going to
    the first maximum. With the planes' ``offsets`` (their indices h * W + w, -1 for none),
    (values, indices): the first maximum, or the last NaN, of each window in depth order (a
    plane's own winner is its first maximum or last NaN, so this is PyTorch's scan in (d, h, w)
    order), as d * plane_size + offset; the value is gathered at that winner, which alone takes
    its gradient."""
    picked = _gather_depths(planes, positions)
    if offsets is None:
        return _mint.max(picked, 3).values
    taps = positions.shape[1]
    nan = picked != picked
    last_nan = _mint.argmax(_mint.where(nan, _mint.arange(taps).reshape(taps, 1, 1), -1), 3)
    winner = _mint.where(_mint.any(nan, 3), last_nan, _mint.argmax(picked, 3))
    winner = _mint.unsqueeze(winner, 3)
    at = _gather_depths(offsets, positions)
    depths = positions.reshape(positions.shape[0], taps, 1, 1)
    flat = _mint.where(at < 0, -1, depths * plane_size + at)
    return (_mint.squeeze(_mint.gather(picked, 3, winner), 3),
            _mint.squeeze(_mint.gather(flat, 3, winner), 3))


def _max_positions(windows, size):
    """The windows' depths as depths of the planes: one outside [0, size) is replaced by its
    window's first depth inside (those before it) or last (those after), a copy next to that
    element, which changes neither the window's first maximum nor its last NaN; a window with
    no depth inside reads plane ``size``, which the caller appends (the lowest value, index
    -1)."""
    rows = []
    for window in windows:
        inside = [d for d in window if 0 <= d < size]
        if not inside:
            rows.append([size] * len(window))
        else:
            rows.append([inside[0] if d < 0 else inside[-1] if d >= size else d for d in window])
    return rows


def _lowest(dtype):
    """The smallest value of ``dtype`` (-inf for floating point), a max pooling's padding."""
    return -math.inf if dtype.is_floating_point else iinfo(dtype).min


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1,  # noqa: A002
               ceil_mode=False, return_indices=False):
    """max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
    return_indices=False): the maximum over each window of input [N, C, D, H, W] (or one sample
    [C, D, H, W]); the padding is the lowest value. With ``return_indices=True``, (values,
    indices): the int64 offset d * H * W + h * W + w in its [D, H, W] volume of the element each
    maximum took (PyTorch's: the first maximum, or the last NaN). The gradient goes to that
    element. Computed as kiln.mint.max_pool2d of each depth plane, then the maximum over the
    depth's windows (Note [Volumes from planes])."""
    owner = "max_pool3d"
    kernel, stride, padding, dilation = _pool_sizes(owner, kernel_size, stride, padding,
                                                    dilation)
    ceil_mode = checked_bool(owner, "ceil_mode", ceil_mode)
    with_indices = checked_bool(owner, "return_indices", return_indices)
    pool = _mint.max_pool2d_with_indices if with_indices else _mint.max_pool2d

    def compute(x):  # x [N, C, D, H, W]
        _check_planes(owner, input, x)
        depth, plane_size = x.shape[2], x.shape[3] * x.shape[4]
        out = _pooled_sizes(owner, x, kernel, stride, padding, dilation, ceil_mode)[0]
        result = pool(_fold_depth(x), kernel[1:], stride[1:], padding[1:], dilation[1:],
                      ceil_mode)
        planes, offsets = result if with_indices else (result, None)
        planes = _unfold_depth(planes, depth)
        offsets = None if offsets is None else _unfold_depth(offsets, depth)
        rows = _max_positions(_depth_windows(out, kernel[0], stride[0], padding[0],
                                             dilation[0]), depth)
        if any(row[0] == depth for row in rows):  # a window without input: plane ``depth``
            shape = list(planes.shape[:2]) + [1] + list(planes.shape[3:])
            planes = _mint.cat([planes, _mint.full(shape, _lowest(x.dtype), dtype=x.dtype)], 2)
            if offsets is not None:
                offsets = _mint.cat([offsets, _mint.full(shape, -1, dtype=offsets.dtype)], 2)
        return _depth_maxima(planes, offsets, _C.tensor(rows, dtype=_C.dtype.int64), plane_size)

    return batched(owner, input, 3, compute)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True, divisor_override=None):
    """avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
    count_include_pad=True, divisor_override=None): the mean over each window of input [N, C, D,
    H, W] (or one sample [C, D, H, W]; floating point), as PyTorch's: the window's sum divided by
    its size clipped to the padded input with ``count_include_pad``, else by its number of input
    elements; a ``divisor_override`` (a nonzero int) divides every window's sum instead. Computed
    as kiln.mint.avg_pool2d of each depth plane, then the sums over the depth's windows (Note
    [Volumes from planes])."""
    owner = "avg_pool3d"
    dtype = _floating_tensor(owner, "input", input)
    kernel, stride, padding, _ = _pool_sizes(owner, kernel_size, stride, padding, 1)
    ceil_mode = checked_bool(owner, "ceil_mode", ceil_mode)
    count_include_pad = checked_bool(owner, "count_include_pad", count_include_pad)
    if divisor_override is not None:
        divisor_override = checked_int(owner, "divisor_override", divisor_override)
        if divisor_override == 0:
            raise KilnValueError(f"{owner}: expected a nonzero divisor_override, got 0")

    def compute(x):  # x [N, C, D, H, W]
        _check_planes(owner, input, x)
        depth = x.shape[2]
        out = _pooled_sizes(owner, x, kernel, stride, padding, (1, 1, 1), ceil_mode)[0]
        # With divisor_override the planes are sums (divisor 1), divided once below.
        planes = _mint.avg_pool2d(_fold_depth(_widened(x)), kernel[1:], stride[1:], padding[1:],
                                  ceil_mode, count_include_pad,
                                  None if divisor_override is None else 1)
        windows = _depth_windows(out, kernel[0], stride[0], padding[0], 1)
        # The padded depths read zeros: padding[0] planes before, and after as many as the last
        # window reaches past the input (with ceil_mode, by up to stride - 1 more).
        after = max(0, windows[-1][-1] + 1 - depth)
        planes = _mint.pad(_unfold_depth(planes, depth), (0, 0, 0, 0, padding[0], after))
        positions = _C.tensor([[d + padding[0] for d in window] for window in windows],
                              dtype=_C.dtype.int64)
        sums = _mint.sum(_gather_depths(planes, positions), 3)
        if divisor_override is not None:
            return _cast(sums / divisor_override, dtype)
        # The depth's factor of PyTorch's divisor: the window clipped to the padded input, or
        # to the input.
        factors = []
        for window in windows:
            start, end = window[0], min(window[0] + kernel[0], depth + padding[0])
            factors.append(end - start if count_include_pad else min(end, depth) - max(start, 0))
        divisors = _C.tensor(factors, dtype=sums.dtype).reshape(out, 1, 1)
        return _cast(sums / divisors, dtype)

    return batched(owner, input, 3, compute)


def _adaptive_pool3d(owner, input, output_size, maximum, return_indices=False):  # noqa: A002
    """adaptive_avg_pool3d (``maximum`` False) or adaptive_max_pool3d of input [N, C, D, H, W] or
    [C, D, H, W]: kiln.mint._composite.adaptive_pool of each depth plane, then the adaptive
    windows of the depth (Note [Volumes from planes])."""
    sizes = _composite.check_output_size(owner, output_size, 3)
    dtype = _floating_tensor(owner, "input", input)
    with_indices = checked_bool(owner, "return_indices", return_indices)

    def compute(x):  # x [N, C, D, H, W]
        _check_planes(owner, input, x)
        depth, height, width = x.shape[2:]
        out, out_h, out_w = (size if o is None else o for o, size in zip(sizes, x.shape[2:]))
        if not maximum:
            planes = _composite.adaptive_pool(owner, _fold_depth(_widened(x)), (out_h, out_w),
                                              maximum=False)
            return _cast(_composite._average_windows(_unfold_depth(planes, depth), 2, out),
                         dtype)
        result = _composite.adaptive_pool(owner, _fold_depth(x), (out_h, out_w), True,
                                          with_indices)
        planes, offsets = result if with_indices else (result, None)
        return _depth_maxima(_unfold_depth(planes, depth),
                             None if offsets is None else _unfold_depth(offsets, depth),
                             _composite._window_positions(depth, out), height * width)

    return batched(owner, input, 3, compute)


def adaptive_avg_pool3d(input, output_size):  # noqa: A002
    """adaptive_avg_pool3d(input, output_size): the mean of input [N, C, D, H, W] (or one sample
    [C, D, H, W]; floating point) over PyTorch's adaptive windows, which make an output of
    ``output_size`` (an int, or a sequence (out_d, out_h, out_w) where None keeps the input's
    size): window i of a dimension of size n spans floor(i * n / out) to ceil((i + 1) * n /
    out)."""
    return _adaptive_pool3d("adaptive_avg_pool3d", input, output_size, maximum=False)


def adaptive_max_pool3d(input, output_size, return_indices=False):  # noqa: A002
    """adaptive_max_pool3d(input, output_size, return_indices=False): the maximum of input [N, C,
    D, H, W] (or one sample [C, D, H, W]; floating point) over adaptive_avg_pool3d's windows; a
    NaN in a window is its maximum. The gradient goes to one element of each window, the first
    maximum in (d, h, w) order; with ``return_indices=True``, (values, indices): the int64 offset
    d * H * W + h * W + w of that element (of the last NaN, if the window holds any)."""
    return _adaptive_pool3d("adaptive_max_pool3d", input, output_size, maximum=True,
                            return_indices=return_indices)


# ------------------------------------------------------------------------------------------------
# Convolutions


def _check_conv_tensors(owner, input, weight, bias):  # noqa: A002
    """A convolution's tensors: a floating-point input and weight, the input and the bias (None
    or a tensor) of the weight's dtype (a DTypeError otherwise, as PyTorch's)."""
    _floating_tensor(owner, "input", input)
    _floating_tensor(owner, "weight", weight)
    check_like_weight(owner, weight, bias, ("input", input))


def _check_conv_shapes(owner, given, x, weight, bias, groups, transposed):
    """A ShapeError naming the ``given`` input unless x [N, C_in, D, H, W], ``weight`` and ``bias``
    fit: weight [C_out, C_in / groups, kD, kH, kW] ([C_in, C_out / groups, kD, kH, kW] when
    ``transposed``) with a kernel of sizes >= 1 and both channel counts divisible by ``groups``,
    bias None or [C_out]."""
    channels = x.shape[1]
    if transposed:
        layout = "[C_in, C_out / groups, kD, kH, kW]"
        fits = weight.ndim == 5 and weight.shape[0] == channels and channels % groups == 0
    else:
        layout = "[C_out, C_in / groups, kD, kH, kW]"
        fits = (weight.ndim == 5 and channels == weight.shape[1] * groups
                and weight.shape[0] % groups == 0)
    if not fits or 0 in weight.shape[2:]:
        raise ShapeError(f"{owner}: expected input [N, C_in, D, H, W] or [C_in, D, H, W] and "
                         f"weight {layout} (kernel sizes >= 1) with C_in and C_out divisible by "
                         f"groups = {groups}, got input {_dims(given.shape)} and weight "
                         f"{_dims(weight.shape)}")
    out_channels = weight.shape[1] * groups if transposed else weight.shape[0]
    if bias is not None and tuple(bias.shape) != (out_channels,):
        raise ShapeError(f"{owner}: expected bias [C_out = {out_channels}], got "
                         f"{_dims(bias.shape)}")


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1): 3-d
    convolution of input [N, C_in, D, H, W] (or one sample [C_in, D, H, W]) with weight [C_out,
    C_in / groups, kD, kH, kW] to [N, C_out, D_out, H_out, W_out]; ``stride``, ``padding`` and
    ``dilation`` are ints or sequences of three, ``padding`` also "valid" or "same" (stride 1
    only; an odd total puts its extra zero after, as PyTorch's); input and bias of the weight's
    dtype. Runs kiln.mint.conv3d (the Conv3D op); the arguments are checked here, so that errors
    describe the shapes as given."""
    owner = "conv3d"
    _check_conv_tensors(owner, input, weight, bias)
    stride = checked_sizes(owner, "stride", stride, 3, 1)
    dilation = checked_sizes(owner, "dilation", dilation, 3, 1)
    groups = checked_int(owner, "groups", groups, low=1)
    if isinstance(padding, str):
        if padding not in _composite.PADDING_STRINGS:
            raise KilnValueError(f"{owner}: expected padding 'same', 'valid', an int or a "
                                 f"sequence of three ints, got {padding!r}")
        if padding == "same" and stride != (1, 1, 1):
            raise KilnValueError(f"{owner}: padding='same' needs stride 1 (the output could not "
                                 f"keep the input's size), got stride {list(stride)}")
    else:
        padding = checked_sizes(owner, "padding", padding, 3, 0)

    def compute(x):  # x [N, C_in, D, H, W]
        _check_conv_shapes(owner, input, x, weight, bias, groups, False)
        kernel = tuple(weight.shape[2:])
        if padding == "same":
            pairs = _composite.same_padding(kernel, dilation)
        else:
            pairs = tuple((p, p) for p in ((0, 0, 0) if padding == "valid" else padding))
        spans = [d * (k - 1) + 1 for k, d in zip(kernel, dilation)]
        padded = [size + before + after for size, (before, after) in zip(x.shape[2:], pairs)]
        if any(size < span for size, span in zip(padded, spans)):
            raise ShapeError(f"{owner}: expected the padded input's depth, height and width "
                             f"{padded} to be at least the dilated kernel's {spans}, got input "
                             f"{_dims(input.shape)} and weight {_dims(weight.shape)}")
        return _composite.conv3d(x, weight, bias, stride, padding, dilation, groups)

    return batched(owner, input, 3, compute)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0,  # noqa: A002
                     output_padding=0, groups=1, dilation=1):
    """conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
    dilation=1): the transposed 3-d convolution (conv3d's gradient with respect to its input) of
    input [N, C_in, D, H, W] (or one sample [C_in, D, H, W]) with weight [C_in, C_out / groups,
    kD, kH, kW], to D_out = (D - 1) * stride - 2 * padding + dilation * (kD - 1) + output_padding
    + 1 (H_out and W_out likewise); the arguments are ints or sequences of three,
    ``output_padding`` below the stride or the dilation in each dimension; input and bias of the
    weight's dtype. Runs kiln.mint.conv_transpose3d (Conv3DBackwardInput, plus the bias)."""
    owner = "conv_transpose3d"
    _check_conv_tensors(owner, input, weight, bias)
    stride = checked_sizes(owner, "stride", stride, 3, 1)
    padding = checked_sizes(owner, "padding", padding, 3, 0)
    output_padding = checked_sizes(owner, "output_padding", output_padding, 3, 0)
    dilation = checked_sizes(owner, "dilation", dilation, 3, 1)
    groups = checked_int(owner, "groups", groups, low=1)
    if any(extra >= s and extra >= d for extra, s, d in zip(output_padding, stride, dilation)):
        raise KilnValueError(f"{owner}: expected output_padding below the stride or the "
                             f"dilation in each dimension, got output_padding "
                             f"{list(output_padding)} with stride {list(stride)} and dilation "
                             f"{list(dilation)}")

    def compute(x):  # x [N, C_in, D, H, W]
        _check_conv_shapes(owner, input, x, weight, bias, groups, True)
        sizes = [(size - 1) * s - 2 * p + d * (k - 1) + extra + 1 for size, s, p, d, k, extra
                 in zip(x.shape[2:], stride, padding, dilation, weight.shape[2:], output_padding)]
        if min(sizes) < 1:
            raise ShapeError(f"{owner}: expected an output of positive sizes, got depth, height "
                             f"and width {sizes} for input {_dims(input.shape)} and weight "
                             f"{_dims(weight.shape)}")
        return _mint.conv_transpose3d(x, weight, bias, stride, padding, output_padding, groups,
                                      dilation)

    return batched(owner, input, 3, compute)
