"""PyTorch's pooling cells, with its arguments, attributes and repr, over kiln.nn.functional's
functions of the same names (which compute them and check their arguments when the cell runs):

    pool = kiln.nn.MaxPool2d(2)                  # [N, C, H, W] -> [N, C, H // 2, W // 2]
    head = kiln.nn.AdaptiveAvgPool2d(1)          # [N, C, H, W] -> [N, C, 1, 1], any H and W
    down = kiln.nn.MaxPool1d(2, return_indices=True)
    up = kiln.nn.MaxUnpool1d(2)
    y, indices = down(x)                         # [N, C, L] -> [N, C, L // 2] twice
    z = up(y, indices)                           # [N, C, L // 2 * 2]: each maximum in its place
    vol = kiln.nn.MaxPool3d((1, 2, 2))           # [N, C, D, H, W] -> [N, C, D, H // 2, W // 2]

Each takes a batch [N, C, *spatial] or one sample [C, *spatial] (PyTorch's unbatched input).

- ``MaxPool2d`` / ``AvgPool2d(kernel_size, stride=None, padding=0, ...)``: the maximum or the
  mean over windows of [.., H, W]; ``kernel_size``, ``stride`` (default: ``kernel_size``),
  ``padding`` and ``dilation`` an int or a pair. ``MaxPool1d`` / ``AvgPool1d`` the same over
  [.., L], each an int or a sequence of one. MaxPool's ``return_indices=True`` returns (values,
  indices), the int64 offset of each maximum in its plane (h * W + w, or along L); AvgPool2d's
  ``divisor_override`` divides each window's sum in place of its size. ``MaxPool3d`` /
  ``AvgPool3d`` the same over [.., D, H, W], each an int or a triple (kiln/nn/_volume_functions.py
  composes them of the 2-d poolings); MaxPool3d's indices are offsets d * H * W + h * W + w in
  each [D, H, W] volume.
- ``AdaptiveAvgPool2d(output_size)`` / ``AdaptiveMaxPool2d(output_size, return_indices=False)``:
  the same over the windows that make an output of ``output_size``, an int or a pair (out_h,
  out_w) where None keeps the input's size, checked at construction (PyTorch's windows: window i
  of a dimension of size n spans floor(i * n / out) to ceil((i + 1) * n / out)).
  ``AdaptiveAvgPool1d`` / ``AdaptiveMaxPool1d`` over [.., L], ``output_size`` an int or a
  sequence of one; ``AdaptiveAvgPool3d`` / ``AdaptiveMaxPool3d`` over [.., D, H, W], an int or a
  triple (out_d, out_h, out_w) where None keeps the input's size.
- ``MaxUnpool1d`` / ``2d`` / ``3d(kernel_size, stride=None, padding=0)``, called as
  ``unpool(input, indices, output_size=None)``: zeros with each element of input at its index
  (a MaxPool's indices), of the size that MaxPool with these arguments maps to input's, or
  ``output_size``.
- ``LPPool1d`` / ``2d`` / ``3d(norm_type, kernel_size, stride=None, ceil_mode=False)``: the
  power average (sum over each window of x^p)^(1 / p), p = ``norm_type`` (F.lp_pool1d / 2d /
  3d, PyTorch's composition).

The fractional max poolings' cells are in kiln/nn/_layers_more.py, beside their functions.
"""

from .._checks import checked_bool
from ..mint import _composite
from . import _volume_functions as _volume
from . import functional as F
from ._layer_arguments import checked_sizes
from ._pooling_functions import _lp_norm_type
from .cell import Cell

__all__ = ["MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
           "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d",
           "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d",
           "LPPool1d", "LPPool2d", "LPPool3d"]


class _MaxPool(Cell):
    """The max poolings' arguments, attributes and repr; ``_pool`` is the function of
    kiln.nn.functional that computes them. ``return_indices`` keeps PyTorch's position, so
    arguments given by position mean what they mean there."""

    _pool = None

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        owner = type(self).__name__
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride  # PyTorch's attribute
        self.padding = padding
        self.dilation = dilation
        self.return_indices = checked_bool(owner, "return_indices", return_indices)
        self.ceil_mode = checked_bool(owner, "ceil_mode", ceil_mode)

    def construct(self, x):
        return self._pool(x, self.kernel_size, self.stride, self.padding, self.dilation,
                          self.ceil_mode, self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPool):
    """MaxPool1d(kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
    ceil_mode=False): the maximum over each ``kernel_size`` window of x [N, C, L] or [C, L]
    (kiln.nn.functional.max_pool1d); the padding is -inf. With ``return_indices=True`` it returns
    (values, indices), the int64 offset along L of each maximum (what MaxUnpool1d takes)."""

    _pool = staticmethod(F.max_pool1d)


class MaxPool2d(_MaxPool):
    """MaxPool2d(kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
    ceil_mode=False): the maximum over each ``kernel_size`` window of x [N, C, H, W] or
    [C, H, W] (kiln.nn.functional.max_pool2d); the padding is -inf. With
    ``return_indices=True`` it returns (values, indices), the int64 offset h * W + w of each
    maximum in its [H, W] plane (what MaxUnpool2d takes)."""

    _pool = staticmethod(F.max_pool2d)


class MaxPool3d(_MaxPool):
    """MaxPool3d(kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
    ceil_mode=False): the maximum over each ``kernel_size`` window of x [N, C, D, H, W] or
    [C, D, H, W] (kiln.nn.functional.max_pool3d); the padding is -inf. With
    ``return_indices=True`` it returns (values, indices), the int64 offset d * H * W + h * W + w
    of each maximum in its [D, H, W] volume."""

    _pool = staticmethod(_volume.max_pool3d)


class _AvgPool(Cell):
    """The average poolings' flags and repr."""

    def __init__(self, ceil_mode, count_include_pad):
        super().__init__()
        owner = type(self).__name__
        self.ceil_mode = checked_bool(owner, "ceil_mode", ceil_mode)
        self.count_include_pad = checked_bool(owner, "count_include_pad", count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPool):
    """AvgPool1d(kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    the mean over each ``kernel_size`` window of x [N, C, L] or [C, L]
    (kiln.nn.functional.avg_pool1d); with ``count_include_pad`` the zero padding counts towards
    the divisor. The sizes (each an int or a sequence of one) are checked at construction and
    kept as 1-tuples, as PyTorch keeps them."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__(ceil_mode, count_include_pad)
        owner = "AvgPool1d"
        self.kernel_size = checked_sizes(owner, "kernel_size", kernel_size, 1, 1)
        self.stride = (self.kernel_size if stride is None
                       else checked_sizes(owner, "stride", stride, 1, 1))
        self.padding = checked_sizes(owner, "padding", padding, 1, 0)

    def construct(self, x):
        return F.avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)


class _DivisorAvgPool(_AvgPool):
    """AvgPool2d's and AvgPool3d's arguments (kept as given, as PyTorch keeps them, and checked
    when the cell runs) and call; ``_pool`` is the function of kiln.nn.functional that computes
    them."""

    _pool = None

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__(ceil_mode, count_include_pad)
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding = padding
        self.divisor_override = divisor_override

    def construct(self, x):
        return self._pool(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                          self.count_include_pad, self.divisor_override)


class AvgPool2d(_DivisorAvgPool):
    """AvgPool2d(kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
    divisor_override=None): the mean over each ``kernel_size`` window of x [N, C, H, W] or
    [C, H, W] (kiln.nn.functional.avg_pool2d); with ``count_include_pad`` the zero padding
    counts towards the divisor; a ``divisor_override`` (a nonzero int, checked when the cell
    runs) divides each window's sum in place of its size."""

    _pool = staticmethod(F.avg_pool2d)


class AvgPool3d(_DivisorAvgPool):
    """AvgPool3d(kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
    divisor_override=None): AvgPool2d's mean over each ``kernel_size`` window of x [N, C, D, H, W]
    or [C, D, H, W] (kiln.nn.functional.avg_pool3d)."""

    _pool = staticmethod(_volume.avg_pool3d)


class _AdaptivePool(Cell):
    """The adaptive pooling cells' ``output_size`` (kept as given, as PyTorch keeps it) and
    repr."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePool):
    """AdaptiveAvgPool1d(output_size): the mean over the adaptive windows of x [N, C, L] or
    [C, L] that make an output of length ``output_size`` (an int or a sequence of one), whatever
    L (kiln.nn.functional.adaptive_avg_pool1d)."""

    def __init__(self, output_size):
        checked_sizes("AdaptiveAvgPool1d", "output_size", output_size, 1, 0)
        super().__init__(output_size)

    def construct(self, x):
        return F.adaptive_avg_pool1d(x, self.output_size)


class AdaptiveAvgPool2d(_AdaptivePool):
    """AdaptiveAvgPool2d(output_size): the mean over the adaptive windows that make an output of
    ``output_size`` (an int, or a pair where None keeps the input's size), whatever the input's
    height and width (kiln.mint.adaptive_avg_pool2d); ``AdaptiveAvgPool2d(1)`` is global average
    pooling."""

    def __init__(self, output_size):
        _composite.check_output_size("AdaptiveAvgPool2d", output_size)
        super().__init__(output_size)

    def construct(self, x):
        return F.adaptive_avg_pool2d(x, self.output_size)


class AdaptiveAvgPool3d(_AdaptivePool):
    """AdaptiveAvgPool3d(output_size): the mean over the adaptive windows of x [N, C, D, H, W] or
    [C, D, H, W] that make an output of ``output_size`` (an int, or a triple where None keeps the
    input's size), whatever the input's depth, height and width
    (kiln.nn.functional.adaptive_avg_pool3d)."""

    def __init__(self, output_size):
        _composite.check_output_size("AdaptiveAvgPool3d", output_size, 3)
        super().__init__(output_size)

    def construct(self, x):
        return _volume.adaptive_avg_pool3d(x, self.output_size)


class AdaptiveMaxPool1d(_AdaptivePool):
    """AdaptiveMaxPool1d(output_size, return_indices=False): the maximum over the adaptive
    windows of x [N, C, L] or [C, L] that make an output of length ``output_size``
    (kiln.nn.functional.adaptive_max_pool1d); with ``return_indices=True``, (values, indices),
    the int64 offset along L of each maximum."""

    def __init__(self, output_size, return_indices=False):
        checked_sizes("AdaptiveMaxPool1d", "output_size", output_size, 1, 0)
        super().__init__(output_size)
        self.return_indices = checked_bool("AdaptiveMaxPool1d", "return_indices", return_indices)

    def construct(self, x):
        return F.adaptive_max_pool1d(x, self.output_size, self.return_indices)


class AdaptiveMaxPool2d(_AdaptivePool):
    """AdaptiveMaxPool2d(output_size, return_indices=False): the maximum over the adaptive windows
    that make an output of ``output_size`` (kiln.mint.adaptive_max_pool2d); with
    ``return_indices=True``, (values, indices), the int64 offset h * W + w of each maximum in its
    [H, W] plane."""

    def __init__(self, output_size, return_indices=False):
        _composite.check_output_size("AdaptiveMaxPool2d", output_size)
        super().__init__(output_size)
        self.return_indices = checked_bool("AdaptiveMaxPool2d", "return_indices", return_indices)

    def construct(self, x):
        return F.adaptive_max_pool2d(x, self.output_size, self.return_indices)


class AdaptiveMaxPool3d(_AdaptivePool):
    """AdaptiveMaxPool3d(output_size, return_indices=False): the maximum over the adaptive windows
    of x [N, C, D, H, W] or [C, D, H, W] that make an output of ``output_size``
    (kiln.nn.functional.adaptive_max_pool3d); with ``return_indices=True``, (values, indices),
    the int64 offset d * H * W + h * W + w of each maximum in its [D, H, W] volume."""

    def __init__(self, output_size, return_indices=False):
        _composite.check_output_size("AdaptiveMaxPool3d", output_size, 3)
        super().__init__(output_size)
        self.return_indices = checked_bool("AdaptiveMaxPool3d", "return_indices", return_indices)

    def construct(self, x):
        return _volume.adaptive_max_pool3d(x, self.output_size, self.return_indices)


class _MaxUnpool(Cell):
    """The MaxUnpool cells' arguments, checked at construction and kept as tuples of
    ``_spatial`` sizes (as PyTorch keeps them), and repr; ``_unpool`` is the function of
    kiln.nn.functional that computes them."""

    _spatial = None
    _unpool = None

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        owner, spatial = type(self).__name__, self._spatial
        self.kernel_size = checked_sizes(owner, "kernel_size", kernel_size, spatial, 1)
        self.stride = (self.kernel_size if stride is None
                       else checked_sizes(owner, "stride", stride, spatial, 1))
        self.padding = checked_sizes(owner, "padding", padding, spatial, 0)

    def construct(self, input, indices, output_size=None):  # noqa: A002  (PyTorch's names)
        return self._unpool(input, indices, self.kernel_size, self.stride, self.padding,
                            output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpool):
    """MaxUnpool1d(kernel_size, stride=None, padding=0), called as ``unpool(input, indices,
    output_size=None)``: MaxPool1d's partial inverse (kiln.nn.functional.max_unpool1d), zeros
    [N, C, L_out] (or [C, L_out]) with each element of input [N, C, L] (or [C, L]) at its index
    from MaxPool1d(return_indices=True); L_out = (L - 1) * stride - 2 * padding + kernel_size,
    or ``output_size`` ([L_out] or [N, C, L_out]) when it is within stride of that."""

    _spatial = 1
    _unpool = staticmethod(F.max_unpool1d)


class MaxUnpool2d(_MaxUnpool):
    """MaxUnpool2d(kernel_size, stride=None, padding=0), called as ``unpool(input, indices,
    output_size=None)``: MaxPool2d's partial inverse (kiln.nn.functional.max_unpool2d), zeros
    [N, C, H_out, W_out] (or [C, H_out, W_out]) with each element of input at its index from
    MaxPool2d(return_indices=True); H_out = (H - 1) * stride - 2 * padding + kernel_size (W_out
    likewise), or ``output_size`` ([H_out, W_out] or [N, C, H_out, W_out]) when each is within
    stride of that."""

    _spatial = 2
    _unpool = staticmethod(F.max_unpool2d)


class MaxUnpool3d(_MaxUnpool):
    """MaxUnpool3d(kernel_size, stride=None, padding=0), called as ``unpool(input, indices,
    output_size=None)``: MaxPool3d's partial inverse (kiln.nn.functional.max_unpool3d), zeros
    [N, C, D_out, H_out, W_out] (or without N) with each element of input at its index from
    MaxPool3d(return_indices=True); D_out = (D - 1) * stride - 2 * padding + kernel_size (H_out
    and W_out likewise), or ``output_size`` when each is within stride of that."""

    _spatial = 3
    _unpool = staticmethod(F.max_unpool3d)


class _LPPool(Cell):
    """The LP poolings' arguments, kept as given (as PyTorch keeps them; ``norm_type`` and
    ``ceil_mode`` checked at construction, the sizes when the cell runs), and repr; ``_pool`` is
    the function of kiln.nn.functional that computes them."""

    _pool = None

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        owner = type(self).__name__
        _lp_norm_type(owner, norm_type)
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = checked_bool(owner, "ceil_mode", ceil_mode)

    def construct(self, x):
        return self._pool(x, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self):
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPool):
    """LPPool1d(norm_type, kernel_size, stride=None, ceil_mode=False): (sum over each
    ``kernel_size`` window of x^p)^(1 / p) for x [N, C, L] or [C, L], p = ``norm_type``
    (nonzero; inf: the maximum of |x|) (kiln.nn.functional.lp_pool1d)."""

    _pool = staticmethod(F.lp_pool1d)


class LPPool2d(_LPPool):
    """LPPool2d(norm_type, kernel_size, stride=None, ceil_mode=False): LPPool1d's power average
    over the windows of x [N, C, H, W] or [C, H, W] (kiln.nn.functional.lp_pool2d); the sizes
    are ints or pairs."""

    _pool = staticmethod(F.lp_pool2d)


class LPPool3d(_LPPool):
    """LPPool3d(norm_type, kernel_size, stride=None, ceil_mode=False): LPPool1d's power average
    over the windows of x [N, C, D, H, W] or [C, D, H, W] (kiln.nn.functional.lp_pool3d); the
    sizes are ints or triples."""

    _pool = staticmethod(F.lp_pool3d)
