"""The pooling functions of kiln.nn.functional (which exports them; PyTorch's names, argument
order and defaults), of input [N, C, L], [N, C, H, W] or [N, C, D, H, W] or one sample without
N: max_pool1d / 2d (kiln.mint's ops; 3-d: kiln/nn/_volume_functions.py), avg_pool1d / 2d,
adaptive_avg_pool1d / 2d and adaptive_max_pool1d / 2d, PyTorch's *_with_indices spellings,
lp_pool1d / 2d / 3d and max_unpool1d / 2d / 3d. The 1-d ones are the 2-d ones over a height of
one. The pooling cells of kiln/nn/pooling.py call them.
"""

import math

from .. import _C, mint as _mint
from .._checks import checked_bool, checked_int
from ..errors import DTypeError, KilnTypeError, KilnValueError, ShapeError
from ..mint import _composite
from ..mint._composite import _dims, _floating_tensor, check_real
from ._layer_arguments import batched, checked_sizes, checked_tensor, squeezed
from ._volume_functions import adaptive_max_pool3d, avg_pool3d, max_pool3d

__all__ = ["max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool1d",
           "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d",
           "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices",
           "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
           "adaptive_max_pool3d_with_indices", "lp_pool1d", "lp_pool2d", "lp_pool3d",
           "max_unpool1d", "max_unpool2d", "max_unpool3d"]


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1,  # noqa: A002
               ceil_mode=False, return_indices=False):
    """max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
    return_indices=False): the maximum over each window of input [N, C, H, W] (or one sample
    [C, H, W]) (kiln.mint.max_pool2d); with ``return_indices=True`` (values, indices)
    (kiln.mint.max_pool2d_with_indices), the int64 offset h * W + w in its [H, W] plane of the
    element each maximum took, which max_unpool2d takes."""
    owner = "max_pool2d"
    pool = (_mint.max_pool2d_with_indices if checked_bool(owner, "return_indices", return_indices)
            else _mint.max_pool2d)
    return batched(owner, input, 2, lambda x: pool(x, kernel_size, stride, padding, dilation,
                                                   ceil_mode))


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True, divisor_override=None):
    """avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
    count_include_pad=True, divisor_override=None): the mean over each window of input [N, C, H,
    W] (or one sample [C, H, W]) (kiln.mint.avg_pool2d); a ``divisor_override`` (a nonzero int)
    divides each window's sum in place of its size."""
    return batched("avg_pool2d", input, 2, lambda x: _mint.avg_pool2d(
        x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override))


def _pool1d(owner, input, kernel_size, stride, padding, dilation, ceil_mode,  # noqa: A002
            pool2d):
    """A 1-d pooling of input [N, C, L] (or one sample [C, L]) as ``pool2d(x, kernel, stride,
    padding, dilation)`` (a 2-d pooling, given the pairs) over a height of 1: kernel (1, k),
    stride (1, s), padding (0, p), dilation (1, d), so that 2-d indices h * W + w are offsets
    along L. The arguments (ints or sequences of one) are checked here, as PyTorch checks them,
    so that errors describe the 1-d shapes; with ``ceil_mode`` a partial window counts, so an
    input shorter than the kernel by less than the stride still gives one."""
    (kernel,) = checked_sizes(owner, "kernel_size", kernel_size, 1, 1)
    (stride,) = (kernel,) if stride is None else checked_sizes(owner, "stride", stride, 1, 1)
    (padding,) = checked_sizes(owner, "padding", padding, 1, 0)
    (dilation,) = checked_sizes(owner, "dilation", dilation, 1, 1)
    if padding > kernel // 2:
        raise KilnValueError(f"{owner}: expected padding at most half the kernel size, got "
                             f"padding={padding} and kernel_size={kernel}")
    span = dilation * (kernel - 1) + 1  # the dilated kernel's size

    def compute(x):  # x [N, C, L]
        if x.shape[2] + 2 * padding + (stride - 1 if ceil_mode else 0) < span:
            raise ShapeError(f"{owner}: the padded input length ({x.shape[2] + 2 * padding}) "
                             f"holds no window of the dilated kernel size ({span}), got input "
                             f"{_dims(input.shape)}")
        out = pool2d(_mint.unsqueeze(x, 2), (1, kernel), (1, stride), (0, padding),
                     (1, dilation))
        return squeezed(out, 2)

    return batched(owner, input, 1, compute)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1,  # noqa: A002
               ceil_mode=False, return_indices=False):
    """max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
    return_indices=False): the maximum over each window of input [N, C, L] (or one sample
    [C, L]), computed as max_pool2d over a height of 1; ``kernel_size``, ``stride``,
    ``padding`` and ``dilation`` are ints or sequences of one. With ``return_indices=True``,
    (values, indices): the int64 offset along L of the element each maximum took."""
    owner = "max_pool1d"
    pool = (_mint.max_pool2d_with_indices if checked_bool(owner, "return_indices", return_indices)
            else _mint.max_pool2d)
    return _pool1d(owner, input, kernel_size, stride, padding, dilation, ceil_mode,
                   lambda x, k, s, p, d: pool(x, k, s, p, d, ceil_mode))


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True):
    """avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
    count_include_pad=True): the mean over each window of input [N, C, L] (or one sample
    [C, L]), computed as avg_pool2d over a height of 1; ``kernel_size``, ``stride`` and
    ``padding`` are ints or sequences of one. PyTorch's avg_pool1d has no divisor_override."""
    _floating_tensor("avg_pool1d", "input", input)  # named here, not by avg_pool2d
    return _pool1d("avg_pool1d", input, kernel_size, stride, padding, 1, ceil_mode,
                   lambda x, k, s, p, _: _mint.avg_pool2d(x, k, s, p, ceil_mode,
                                                          count_include_pad))


def adaptive_avg_pool2d(input, output_size):  # noqa: A002
    """adaptive_avg_pool2d(input, output_size) (kiln.mint.adaptive_avg_pool2d)."""
    return _composite.adaptive_avg_pool2d(input, output_size)


def adaptive_max_pool2d(input, output_size, return_indices=False):  # noqa: A002
    """adaptive_max_pool2d(input, output_size, return_indices=False)
    (kiln.mint.adaptive_max_pool2d); with ``return_indices=True``, (values, indices), the
    indices offsets h * W + w in each [H, W] plane, as max_pool2d's."""
    return _composite.adaptive_max_pool2d(input, output_size, return_indices)


def _adaptive_pool1d(owner, input, output_size, maximum, return_indices=False):  # noqa: A002
    """A 1-d adaptive pooling of input [N, C, L] (or one sample [C, L]) to ``output_size`` (an
    int or a sequence of one) as the 2-d one over a height of 1 (its indices h * W + w are then
    offsets along L)."""
    (size,) = checked_sizes(owner, "output_size", output_size, 1, 0)
    return batched(owner, input, 1, lambda x: squeezed(_composite.adaptive_pool(
        owner, _mint.unsqueeze(x, 2), (1, size), maximum, return_indices), 2))


def adaptive_avg_pool1d(input, output_size):  # noqa: A002
    """adaptive_avg_pool1d(input, output_size): the mean of input [N, C, L] (or one sample
    [C, L]; floating point) over the adaptive windows of adaptive_avg_pool2d that make an output
    of ``output_size`` (an int or a sequence of one) along L."""
    return _adaptive_pool1d("adaptive_avg_pool1d", input, output_size, maximum=False)


def adaptive_max_pool1d(input, output_size, return_indices=False):  # noqa: A002
    """adaptive_max_pool1d(input, output_size, return_indices=False): the maximum of input
    [N, C, L] (or one sample [C, L]; floating point) over the adaptive windows along L; with
    ``return_indices=True``, (values, indices), the int64 offset along L of each maximum."""
    return _adaptive_pool1d("adaptive_max_pool1d", input, output_size, maximum=True,
                            return_indices=return_indices)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0,  # noqa: A002
                            dilation=1, ceil_mode=False, return_indices=False):
    """max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
    ceil_mode=False, return_indices=False): max_pool1d's (values, indices), whatever
    ``return_indices`` (PyTorch's spelling ignores it too)."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0,  # noqa: A002
                            dilation=1, ceil_mode=False, return_indices=False):
    """max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
    ceil_mode=False, return_indices=False): max_pool2d's (values, indices), whatever
    ``return_indices``."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0,  # noqa: A002
                            dilation=1, ceil_mode=False, return_indices=False):
    """max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
    ceil_mode=False, return_indices=False): max_pool3d's (values, indices), whatever
    ``return_indices``."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):  # noqa: A002
    """adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    adaptive_max_pool1d's (values, indices), whatever ``return_indices``."""
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):  # noqa: A002
    """adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    adaptive_max_pool2d's (values, indices), whatever ``return_indices``."""
    return adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):  # noqa: A002
    """adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    adaptive_max_pool3d's (values, indices), whatever ``return_indices``."""
    return adaptive_max_pool3d(input, output_size, True)


def _lp_norm_type(owner, norm_type):
    """An LP pooling's ``norm_type`` as a float: a KilnTypeError unless it is a real number, a
    KilnValueError for 0 (PyTorch's check). Shared with kiln.nn's LPPool cells, which check it
    when built."""
    p = check_real(owner, "norm_type", norm_type)
    if p == 0:
        raise KilnValueError(f"{owner}: norm_type must be a non-zero value, got {norm_type}")
    return p


def _lp_pool(owner, input, norm_type, kernel, max_pool, avg_pool):  # noqa: A002
    """PyTorch's power-average pooling of ``input`` over windows of ``kernel`` (a tuple of
    sizes), composed as PyTorch composes it: the sum of x^p over each window as avg_pool(x^p)
    times the kernel's size (with ceil_mode, a partial window's mean times the whole kernel's
    size), kept as sign(s) * relu(|s|), which is s but passes no gradient back where s = 0
    (relu's is 0 there, where the power's is infinite), then to the power 1 / p. For p = inf it
    is max_pool(|x|), for p = -inf -max_pool(-|x|)."""
    _floating_tensor(owner, "input", input)
    p = _lp_norm_type(owner, norm_type)
    if p == math.inf:
        return max_pool(_mint.abs(input))
    if p == -math.inf:
        return -max_pool(-_mint.abs(input))
    means = avg_pool(_mint.pow(input, p))
    sums = (_mint.sign(means) * _mint.relu(_mint.abs(means))) * math.prod(kernel)
    return _mint.pow(sums, 1.0 / p)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002
    """lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False): (sum over each
    window of x^p)^(1 / p) for p = ``norm_type`` (nonzero; inf: the maximum of |x|) over input
    [N, C, L] (or one sample [C, L]), without padding, computed as PyTorch's (_lp_pool): an odd
    integer p over a window of negative sum, or a fractional one over negative elements, gives
    NaN there, as in PyTorch."""
    kernel = checked_sizes("lp_pool1d", "kernel_size", kernel_size, 1, 1)
    return _lp_pool("lp_pool1d", input, norm_type, kernel,
                    lambda x: max_pool1d(x, kernel, stride, 0, 1, ceil_mode),
                    lambda x: avg_pool1d(x, kernel, stride, 0, ceil_mode))


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002
    """lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False): lp_pool1d's power
    average over the windows of input [N, C, H, W] (or one sample [C, H, W]); ``kernel_size``
    and ``stride`` are ints or pairs."""
    kernel = checked_sizes("lp_pool2d", "kernel_size", kernel_size, 2, 1)
    return _lp_pool("lp_pool2d", input, norm_type, kernel,
                    lambda x: max_pool2d(x, kernel, stride, 0, 1, ceil_mode),
                    lambda x: avg_pool2d(x, kernel, stride, 0, ceil_mode))


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002
    """lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False): lp_pool1d's power
    average over the windows of input [N, C, D, H, W] (or one sample [C, D, H, W]);
    ``kernel_size`` and ``stride`` are ints or triples."""
    kernel = checked_sizes("lp_pool3d", "kernel_size", kernel_size, 3, 1)
    return _lp_pool("lp_pool3d", input, norm_type, kernel,
                    lambda x: max_pool3d(x, kernel, stride, 0, 1, ceil_mode),
                    lambda x: avg_pool3d(x, kernel, stride, 0, ceil_mode))


def _unpool_sizes(owner, x, kernel, stride, padding, output_size):
    """The spatial sizes of max_unpool's output for x [N, C, *spatial]: by default (size - 1) *
    stride - 2 * padding + kernel per dimension; an ``output_size`` (the spatial sizes, or with
    N and C before them) must be strictly between that default - stride and default + stride in
    each dimension (PyTorch's rule: the sizes a pooling with these arguments maps to x's)."""
    spatial = len(kernel)
    default = [(size - 1) * s - 2 * p + k
               for size, k, s, p in zip(x.shape[2:], kernel, stride, padding)]
    if output_size is None:
        sizes = default
    else:
        if not isinstance(output_size, (tuple, list)):
            raise KilnTypeError(f"{owner}: expected output_size to be None or a sequence of "
                                f"ints, got {type(output_size).__name__} {output_size!r}")
        if len(output_size) not in (spatial, spatial + 2):
            raise KilnValueError(f"{owner}: expected output_size of {spatial} or {spatial + 2} "
                                 f"sizes, got {len(output_size)}: {output_size!r}")
        sizes = [checked_int(owner, "output_size", size) for size in output_size[-spatial:]]
        for dim, (size, centre, s) in enumerate(zip(sizes, default, stride)):
            if not centre - s < size < centre + s:
                raise KilnValueError(f"{owner}: invalid output_size {output_size!r}: expected "
                                     f"spatial dimension {dim} strictly between {centre - s} "
                                     f"and {centre + s}, got {size}")
    if min(sizes) < 1:
        raise ShapeError(f"{owner}: expected an output of positive sizes, got {sizes} for input "
                         f"{_dims(x.shape)}, kernel_size {kernel}, stride {stride} and padding "
                         f"{padding}")
    return sizes


def _max_unpool(owner, input, indices, kernel_size, stride, padding, output_size,  # noqa: A002
                spatial):
    """max_unpool1d / 2d / 3d (``spatial`` 1, 2 or 3): zeros of the output's shape with each
    element of input [N, C, *spatial] (or one sample [C, *spatial]) written at its offset in
    indices (int64, input's shape) within its plane or volume (kiln.mint.scatter, which
    differentiates it: the gradient of input is the output's gradient at the indices)."""
    kernel = checked_sizes(owner, "kernel_size", kernel_size, spatial, 1)
    stride = kernel if stride is None else checked_sizes(owner, "stride", stride, spatial, 1)
    padding = checked_sizes(owner, "padding", padding, spatial, 0)
    if checked_tensor(owner, "indices", indices).dtype != _C.dtype.int64:
        raise DTypeError(f"{owner}: expected int64 indices, got {indices.dtype.name}")
    if tuple(indices.shape) != tuple(checked_tensor(owner, "input", input).shape):
        raise ShapeError(f"{owner}: expected indices of the input's shape {_dims(input.shape)}, "
                         f"got {_dims(indices.shape)}")

    def compute(x):  # x [N, C, *spatial]
        if 0 in x.shape[1:]:
            raise ShapeError(f"{owner}: expected input with non-zero sizes in every dimension "
                             f"but the batch's, got {_dims(input.shape)}")
        sizes = _unpool_sizes(owner, x, kernel, stride, padding, output_size)
        lead, plane = list(x.shape[:2]), math.prod(sizes)
        flat = lead + [math.prod(x.shape[2:])]
        # scatter takes a negative index from the end, where PyTorch refuses it: one past the
        # plane makes scatter raise its KilnIndexError for it, as for any index >= the plane.
        at = _mint.where(indices.reshape(flat) < 0, plane, indices.reshape(flat))
        out = _mint.scatter(_mint.zeros(lead + [plane], dtype=x.dtype), 2, at, x.reshape(flat))
        return out.reshape(lead + sizes)

    return batched(owner, input, spatial, compute)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0,  # noqa: A002
                 output_size=None):
    """max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    max_pool1d's partial inverse. input [N, C, L] (or one sample [C, L]) and int64 indices of
    its shape (max_pool1d's, offsets along the output's length) give zeros [N, C, L_out] with
    each input element at its index; L_out is (L - 1) * stride - 2 * padding + kernel_size,
    or ``output_size`` ([L_out] or [N, C, L_out]) strictly within stride of it. An index
    outside [0, L_out) is a KilnIndexError (raised by the scatter, asynchronously, naming a
    negative index as L_out)."""
    return _max_unpool("max_unpool1d", input, indices, kernel_size, stride, padding,
                       output_size, 1)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0,  # noqa: A002
                 output_size=None):
    """max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    max_pool2d's partial inverse. input [N, C, H, W] (or one sample [C, H, W]) and int64
    indices of its shape (max_pool2d's, offsets h * W_out + w in the output's planes) give zeros
    [N, C, H_out, W_out] with each input element at its index; H_out is (H - 1) * stride - 2 *
    padding + kernel_size (W_out likewise), or ``output_size`` ([H_out, W_out] or [N, C, H_out,
    W_out]) strictly within stride of it. An index outside [0, H_out * W_out) is a
    KilnIndexError (raised by the scatter, asynchronously, naming a negative index as H_out *
    W_out)."""
    return _max_unpool("max_unpool2d", input, indices, kernel_size, stride, padding,
                       output_size, 2)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0,  # noqa: A002
                 output_size=None):
    """max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    max_pool3d's partial inverse. input [N, C, D, H, W] (or one sample [C, D, H, W]) and int64
    indices of its shape (max_pool3d's, offsets d * H_out * W_out + h * W_out + w in the
    output's volumes) give zeros [N, C, D_out, H_out, W_out] with each input element at its
    index; D_out is (D - 1) * stride - 2 * padding + kernel_size (H_out and W_out likewise), or
    ``output_size`` (the three sizes, or with N and C before them) strictly within stride of it.
    An index outside the volume is a KilnIndexError (raised by the scatter, asynchronously)."""
    return _max_unpool("max_unpool3d", input, indices, kernel_size, stride, padding,
                       output_size, 3)
