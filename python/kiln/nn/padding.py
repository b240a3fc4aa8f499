"""Padding cells with PyTorch's names, arguments and reprs, each applying kiln.nn.functional.pad:

    ZeroPad1d / 2d / 3d(padding)                  (mode "constant", value 0)
    ConstantPad1d / 2d / 3d(padding, value)       (mode "constant")
    ReflectionPad1d / 2d / 3d(padding)            (mode "reflect")
    ReplicationPad1d / 2d / 3d(padding)           (mode "replicate")
    CircularPad1d / 2d / 3d(padding)              (mode "circular")

    pad = kiln.nn.ReflectionPad2d((1, 1, 2, 0))   # x [N, C, H, W] -> [N, C, H + 2, W + 2]

``padding`` is an int (the same on every side) or a sequence of 2 ints (left, right) for the 1d
cells, of 4 (left, right, top, bottom) for the 2d ones, of 6 (left, right, top, bottom, front,
back) for the 3d ones, kept as a tuple in ``padding``, as PyTorch's. Padding may be negative
(it crops, in every mode, as F.pad); reflection padding must be smaller than the dimension it
pads and circular padding at most its size.

As PyTorch's, the reflection, replication and circular cells take an input [C, W] or [N, C, W]
(1d), [C, H, W] or [N, C, H, W] (2d) and [C, D, H, W] or [N, C, D, H, W] (3d), another rank a
ShapeError; the constant ones pad the last one, two or three dimensions of any input that has
them. Autograd differentiates them through F.pad.
"""

from .._checks import as_int, checked_int
from ..errors import KilnTypeError, KilnValueError, ShapeError
from ..mint._composite import _dims, check_real
from . import functional as F
from ._layer_arguments import checked_tensor
from .cell import Cell

__all__ = ["ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ConstantPad1d", "ConstantPad2d",
           "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
           "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d",
           "CircularPad2d", "CircularPad3d"]


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
    """Base of the padding cells: subclasses set ``_mode`` (F.pad's), ``_sides`` (2, 4 or 6), and
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


class ConstantPad3d(_ConstantPad):
    """ConstantPad3d(padding, value): pads the last three dimensions with ``value`` (a real
    number); ``padding`` an int or (left, right, top, bottom, front, back)."""

    _sides = 6


class _ZeroPad:
    """The zero padding cells' arguments and repr, before their ConstantPad's."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad1d(_ZeroPad, ConstantPad1d):
    """ZeroPad1d(padding): ConstantPad1d(padding, 0.0)."""


class ZeroPad2d(_ZeroPad, ConstantPad2d):
    """ZeroPad2d(padding): ConstantPad2d(padding, 0.0)."""


class ZeroPad3d(_ZeroPad, ConstantPad3d):
    """ZeroPad3d(padding): ConstantPad3d(padding, 0.0)."""


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


class ReflectionPad3d(_Pad):
    """ReflectionPad3d(padding): pads the last three dimensions of [C, D, H, W] or
    [N, C, D, H, W] with their reflection; ``padding`` an int or (left, right, top, bottom,
    front, back), below W, H and D."""

    _mode = "reflect"
    _sides = 6
    _ranks = (4, 5)
    _layout = "[C, D, H, W] or [N, C, D, H, W]"


class ReplicationPad3d(_Pad):
    """ReplicationPad3d(padding): pads the last three dimensions of [C, D, H, W] or
    [N, C, D, H, W] by repeating their edge values; ``padding`` an int or (left, right, top,
    bottom, front, back)."""

    _mode = "replicate"
    _sides = 6
    _ranks = (4, 5)
    _layout = "[C, D, H, W] or [N, C, D, H, W]"


class CircularPad1d(_Pad):
    """CircularPad1d(padding): pads the last dimension of [C, W] or [N, C, W] by wrapping it
    around (the left padding repeats its last values, the right its first); ``padding`` an int
    or (left, right), each at most W."""

    _mode = "circular"
    _ranks = (2, 3)
    _layout = "[C, W] or [N, C, W]"


class CircularPad2d(_Pad):
    """CircularPad2d(padding): pads the last two dimensions of [C, H, W] or [N, C, H, W] by
    wrapping them around; ``padding`` an int or (left, right, top, bottom), at most W and H."""

    _mode = "circular"
    _sides = 4
    _ranks = (3, 4)
    _layout = "[C, H, W] or [N, C, H, W]"


class CircularPad3d(_Pad):
    """CircularPad3d(padding): pads the last three dimensions of [C, D, H, W] or
    [N, C, D, H, W] by wrapping them around; ``padding`` an int or (left, right, top, bottom,
    front, back), at most W, H and D."""

    _mode = "circular"
    _sides = 6
    _ranks = (4, 5)
    _layout = "[C, D, H, W] or [N, C, D, H, W]"
