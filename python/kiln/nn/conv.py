"""kiln.nn.Conv2d: 2-d convolution of x [N, C_in, H, W] with weight [C_out, C_in / groups, kH, kW].

    conv = kiln.nn.Conv2d(3, 16, kernel_size=3, padding=1)

``kernel_size``, ``stride``, ``padding`` and ``dilation`` take an int or a pair; ``padding`` may
also be "valid" (no padding) or "same" (the output keeps the input's height and width: the
dilated kernel's size - 1 in all, an odd element after; stride 1 only), as in PyTorch.
``padding_mode`` is "zeros" (the default), "reflect", "replicate" or "circular": the last three
pad x with ``kiln.mint.pad`` in that mode before a convolution without padding, as PyTorch does.
Initialised as PyTorch's Conv2d: weight ~ kaiming_uniform_(a=sqrt(5)) and bias ~
U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = C_in / groups * kH * kW.
"""

import math

from .. import _C
from .._checks import as_int, checked_int
from ..errors import KilnTypeError, KilnValueError
from ..mint import _composite
from . import init
from .cell import Cell
from .parameter import Parameter

__all__ = ["Conv2d"]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _int(value, name):
    return checked_int("Conv2d", name, value)


def _pair(value, name):
    """``value`` (an int or a pair of ints) as a pair of Python ints."""
    index = as_int(value)
    if index is not None:
        return (index, index)
    try:
        pair = tuple(value)
    except TypeError:
        raise KilnTypeError(f"Conv2d: {name} must be an int or a pair of ints, got {value!r} "
                            f"({type(value).__name__})") from None
    if len(pair) != 2:
        raise KilnValueError(f"Conv2d: {name} must be an int or a pair of ints, got {value!r}")
    return tuple(_int(v, f"{name}[{i}]") for i, v in enumerate(pair))


def _padding(value, stride):
    """Conv2d's ``padding``: "same" or "valid" as it is (as PyTorch keeps it), else as a pair of
    ints. "same" with a ``stride`` other than 1 is a KilnValueError, as in PyTorch."""
    if not isinstance(value, str):
        return _pair(value, "padding")
    if value not in _composite.PADDING_STRINGS:
        raise KilnValueError(f"Conv2d: padding must be 'same', 'valid', an int or a pair of "
                             f"ints, got {value!r}")
    if value == "same" and stride != (1, 1):
        raise KilnValueError(f"Conv2d: padding='same' needs stride 1 (the output could not keep "
                             f"the input's size), got stride {stride}")
    return value


class Conv2d(Cell):
    """Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
    bias=True, padding_mode="zeros", dtype=None): 2-d convolution of x [N, C_in, H, W] to
    [N, C_out, H_out, W_out], with parameters of ``dtype`` (default float32). The arguments and
    the initialisation are in kiln.nn.conv's documentation."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", dtype=None):
        super().__init__()
        if padding_mode not in _PADDING_MODES:
            raise KilnValueError(f"Conv2d: padding_mode must be one of "
                                 f"{', '.join(map(repr, _PADDING_MODES))}, got {padding_mode!r}")
        in_channels = _int(in_channels, "in_channels")
        out_channels = _int(out_channels, "out_channels")
        groups = _int(groups, "groups")
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise KilnValueError(f"Conv2d: in_channels ({in_channels}) and out_channels "
                                 f"({out_channels}) must be divisible by groups ({groups})")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.stride = _pair(stride, "stride")
        self.padding = _padding(padding, self.stride)
        self.dilation = _pair(dilation, "dilation")
        self.groups = groups
        self.padding_mode = padding_mode
        dtype = dtype or _C.dtype.float32
        shape = (out_channels, in_channels // groups) + self.kernel_size
        self.weight = Parameter(_C.mint.empty(shape, dtype=dtype))
        self.bias = Parameter(_C.mint.empty(out_channels, dtype=dtype)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init.fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def construct(self, x):
        padding = self.padding
        if self.padding_mode != "zeros":
            x = _C.mint.pad(x, self._pads(), self.padding_mode)
            padding = 0
        return _composite.conv2d(x, self.weight, self.bias, self.stride, padding, self.dilation,
                                 self.groups)

    def _pads(self):
        """x's (left, right, top, bottom) padding, for a padding_mode other than "zeros"."""
        if self.padding == "same":
            (top, bottom), (left, right) = _composite.same_padding(self.kernel_size,
                                                                   self.dilation)
            return (left, right, top, bottom)
        ph, pw = (0, 0) if self.padding == "valid" else self.padding
        return (pw, pw, ph, ph)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}, dilation={self.dilation}, "
                f"groups={self.groups}, bias={self.bias is not None}"
                + (f", padding_mode={self.padding_mode!r}" if self.padding_mode != "zeros" else ""))
