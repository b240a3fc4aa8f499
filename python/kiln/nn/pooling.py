"""kiln.nn.MaxPool2d and kiln.nn.AvgPool2d: the maximum or the mean over windows of x
[N, C, H, W], with PyTorch's arguments.

    pool = kiln.nn.MaxPool2d(2)                  # [N, C, H, W] -> [N, C, H // 2, W // 2]

``kernel_size``, ``stride`` (default: ``kernel_size``), ``padding`` and ``dilation`` take an int or
a pair, checked by kiln.mint.max_pool2d / avg_pool2d when the cell runs. The two options those ops
lack are refused at construction with a KilnNotImplementedError rather than ignored:
MaxPool2d's ``return_indices=True`` and AvgPool2d's ``divisor_override``.
"""

from .. import _C
from ..errors import KilnNotImplementedError, KilnTypeError
from .cell import Cell

__all__ = ["MaxPool2d", "AvgPool2d"]


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
