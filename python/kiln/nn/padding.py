"""Padding cells with PyTorch's names, arguments and reprs, each applying kiln.nn.functional.pad:

    ZeroPad1d(padding)             ZeroPad2d(padding)                 (mode "constant", value 0)
    ConstantPad1d(padding, value)  ConstantPad2d(padding, value)      (mode "constant")
    ReflectionPad1d(padding)       ReflectionPad2d(padding)           (mode "reflect")
    ReplicationPad1d(padding)      ReplicationPad2d(padding)          (mode "replicate")

    pad = kiln.nn.ReflectionPad2d((1, 1, 2, 0))   # x [N, C, H, W] -> [N, C, H + 2, W + 2]

``padding`` is an int (the same on every side) or a sequence of 2 ints (left, right) for the 1d
cells, of 4 (left, right, top, bottom) for the 2d ones, kept as a tuple in ``padding``, as
PyTorch's. Constant padding may be negative (it crops); reflection and replication padding may
not (F.pad refuses it when called), and reflection padding must be smaller than the dimension it
pads.

As PyTorch's, the reflection and replication cells take an input [C, W] or [N, C, W] (1d) and
[C, H, W] or [N, C, H, W] (2d), another rank a ShapeError; the constant ones pad the last one or
two dimensions of any input that has them. Autograd differentiates them through F.pad.
"""

from .._checks import as_int, checked_int
from ..errors import KilnTypeError, KilnValueError, ShapeError
from ..mint._composite import _dims, check_real
from . import functional as F
from ._layer_arguments import checked_tensor
from .cell import Cell

__all__ = ["ZeroPad1d", "ZeroPad2d", "ConstantPad1d", "ConstantPad2d", "ReflectionPad1d",
           "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d"]


def _padding(owner, padding, count):
    """``padding`` (an int, or a sequence of ``count`` ints) as a tuple of ``count`` ints: a
    KilnTypeError for another kind of value, a KilnValueError for a sequence of another
    length."""
    number = as_int(padding)
    if number is not None:
        return (number,) * count
    if not isinstance(padding, (tuple, list)):
        raise KilnTypeError(f"{owner}: expected padding to be an int or a sequence of {count} "
                            f"ints, got {type(padding).__name__} {padding!r}")
    if len(padding) != count:
        raise KilnValueError(f"{owner}: expected padding to be an int or a sequence of {count} "
                             f"ints, got {len(padding)} values {padding!r}")
    return tuple(checked_int(owner, f"padding[{i}]", p) for i, p in enumerate(padding))


class _Pad(Cell):
    """Base of the padding cells: subclasses set ``_mode`` (F.pad's), ``_sides`` (2 or 4), and
    ``_ranks`` (the input ranks taken; empty: any, F.pad's rule) with ``_layout`` (how errors
    describe them)."""

    _mode = "constant"
    _sides = 2
    _ranks = ()
    _layout = ""

    def __init__(self, padding):
        super().__init__()
        self.padding = _padding(type(self).__name__, padding, self._sides)

    def _value(self):
        return None

    def construct(self, x):
        owner = type(self).__name__
        if self._ranks and checked_tensor(owner, "input", x).ndim not in self._ranks:
            raise ShapeError(f"{owner}: expected an input {self._layout}, got {_dims(x.shape)} "
                             f"({x.ndim}-D)")
        return F.pad(x, self.padding, self._mode, self._value())

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPad(_Pad):
    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = check_real(type(self).__name__, "value", value)

    def _value(self):
        return self.value

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPad):
    """ConstantPad1d(padding, value): pads the last dimension with ``value`` (a real number);
    ``padding`` an int or (left, right)."""


class ConstantPad2d(_ConstantPad):
    """ConstantPad2d(padding, value): pads the last two dimensions with ``value`` (a real
    number); ``padding`` an int or (left, right, top, bottom)."""

    _sides = 4


class ZeroPad1d(ConstantPad1d):
    """ZeroPad1d(padding): ConstantPad1d(padding, 0.0)."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    """ZeroPad2d(padding): ConstantPad2d(padding, 0.0)."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ReflectionPad1d(_Pad):
    """ReflectionPad1d(padding): pads the last dimension of [C, W] or [N, C, W] with its
    reflection (the edge not repeated); ``padding`` an int or (left, right), each below W."""

    _mode = "reflect"
    _ranks = (2, 3)
    _layout = "[C, W] or [N, C, W]"


class ReflectionPad2d(_Pad):
    """ReflectionPad2d(padding): pads the last two dimensions of [C, H, W] or [N, C, H, W] with
    their reflection; ``padding`` an int or (left, right, top, bottom), below W and H."""

    _mode = "reflect"
    _sides = 4
    _ranks = (3, 4)
    _layout = "[C, H, W] or [N, C, H, W]"


class ReplicationPad1d(_Pad):
    """ReplicationPad1d(padding): pads the last dimension of [C, W] or [N, C, W] by repeating
    its edge values; ``padding`` an int or (left, right)."""

    _mode = "replicate"
    _ranks = (2, 3)
    _layout = "[C, W] or [N, C, W]"


class ReplicationPad2d(_Pad):
    """ReplicationPad2d(padding): pads the last two dimensions of [C, H, W] or [N, C, H, W] by
    repeating their edge values; ``padding`` an int or (left, right, top, bottom)."""

    _mode = "replicate"
    _sides = 4
    _ranks = (3, 4)
    _layout = "[C, H, W] or [N, C, H, W]"
