"""kiln.nn.MaxPool2d and kiln.nn.AvgPool2d: the maximum or the mean over windows of x
[N, C, H, W], with PyTorch's arguments; kiln.nn.AdaptiveMaxPool2d and AdaptiveAvgPool2d: the
same over the windows that make an output of a given size.

    pool = kiln.nn.MaxPool2d(2)                  # [N, C, H, W] -> [N, C, H // 2, W // 2]
    head = kiln.nn.AdaptiveAvgPool2d(1)          # [N, C, H, W] -> [N, C, 1, 1], any H and W

``kernel_size``, ``stride`` (default: ``kernel_size``), ``padding`` and ``dilation`` take an int or
a pair, checked by kiln.mint.max_pool2d / avg_pool2d when the cell runs. The two options those ops
lack are refused at construction with a KilnNotImplementedError rather than ignored:
MaxPool2d's ``return_indices=True`` and AvgPool2d's ``divisor_override``.

``AdaptiveAvgPool2d(output_size)`` and ``AdaptiveMaxPool2d(output_size, return_indices=False)``
take x [N, C, H, W] or [C, H, W] and an ``output_size`` that is an int or a pair (out_h, out_w),
where None keeps the input's size; it is checked at construction. They compute
kiln.mint.adaptive_avg_pool2d / adaptive_max_pool2d (PyTorch's windows: window i of a dimension
of size n spans floor(i * n / out) to ceil((i + 1) * n / out)). ``return_indices=True`` is a
KilnNotImplementedError.
"""

from .. import _C
from ..errors import KilnNotImplementedError, KilnTypeError
from ..mint import _composite
from .cell import Cell

__all__ = ["MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d"]


def _flag(owner, name, value):
    """``value`` if it is a bool, else a KilnTypeError (the op would refuse it only when called,
    untyped)."""
    if not isinstance(value, bool):
        raise KilnTypeError(f"{owner}: expected {name} to be a bool, got {type(value).__name__} "
                            f"{value!r}")
    return value


class MaxPool2d(Cell):
    """MaxPool2d(kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
    ceil_mode=False): the maximum over each ``kernel_size`` window (kiln.mint.max_pool2d); the
    padding is -inf. ``return_indices`` keeps PyTorch's position, so arguments given by position
    mean what they mean there; True is a KilnNotImplementedError."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        if _flag("MaxPool2d", "return_indices", return_indices):
            raise KilnNotImplementedError("MaxPool2d: return_indices=True is not supported "
                                          "(kiln.mint.max_pool2d returns no indices)")
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride  # PyTorch's attribute
        self.padding = padding
        self.dilation = dilation
        self.ceil_mode = _flag("MaxPool2d", "ceil_mode", ceil_mode)

    def construct(self, x):
        return _C.mint.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                                  self.ceil_mode)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Cell):
    """AvgPool2d(kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
    divisor_override=None): the mean over each ``kernel_size`` window (kiln.mint.avg_pool2d);
    with ``count_include_pad`` the zero padding counts towards the divisor. A
    ``divisor_override`` is a KilnNotImplementedError."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        if divisor_override is not None:
            raise KilnNotImplementedError(f"AvgPool2d: divisor_override is not supported (got "
                                          f"{divisor_override!r}; kiln.mint.avg_pool2d divides "
                                          f"by the window's size)")
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding = padding
        self.ceil_mode = _flag("AvgPool2d", "ceil_mode", ceil_mode)
        self.count_include_pad = _flag("AvgPool2d", "count_include_pad", count_include_pad)

    def construct(self, x):
        return _C.mint.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                                  self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Cell):
    """AdaptiveAvgPool2d(output_size): the mean over the adaptive windows that make an output of
    ``output_size`` (an int, or a pair where None keeps the input's size), whatever the input's
    height and width (kiln.mint.adaptive_avg_pool2d); ``AdaptiveAvgPool2d(1)`` is global average
    pooling."""

    def __init__(self, output_size):
        super().__init__()
        _composite.check_output_size("AdaptiveAvgPool2d", output_size)
        self.output_size = output_size

    def construct(self, x):
        return _composite.adaptive_avg_pool2d(x, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveMaxPool2d(Cell):
    """AdaptiveMaxPool2d(output_size, return_indices=False): the maximum over the adaptive windows
    that make an output of ``output_size`` (kiln.mint.adaptive_max_pool2d); True for
    ``return_indices`` is a KilnNotImplementedError."""

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        if _flag("AdaptiveMaxPool2d", "return_indices", return_indices):
            raise KilnNotImplementedError("AdaptiveMaxPool2d: return_indices=True is not "
                                          "supported (kiln.mint.adaptive_max_pool2d returns no "
                                          "indices)")
        _composite.check_output_size("AdaptiveMaxPool2d", output_size)
        self.output_size = output_size

    def construct(self, x):
        return _composite.adaptive_max_pool2d(x, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"
