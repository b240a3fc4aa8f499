"""kiln.finfo and kiln.iinfo: the limits of a dtype, as torch.finfo / torch.iinfo give them.

    mask = kiln.mint.full(shape, kiln.finfo(scores.dtype).min)   # BERT's "minus infinity"
    kiln.iinfo(kiln.int32).max                                    # 2147483647

``finfo(dtype=None)`` (a floating dtype; None: the default dtype, kiln.get_default_dtype()) has
``bits``, ``eps`` (the gap between 1 and the next number), ``max``, ``min`` (= -max), ``tiny`` and
its alias ``smallest_normal`` (the smallest positive normal number), ``resolution`` (10 ** -digits,
the decimal precision) and ``dtype`` (the dtype's name), as Python floats. ``iinfo(dtype)`` (an
integer dtype) has ``bits``, ``max``, ``min`` and ``dtype``, as Python ints. Another dtype, or an
argument that is none, is a KilnTypeError, as PyTorch's TypeError; bool has no iinfo either.
"""

from . import _C
from .errors import KilnTypeError

__all__ = ["finfo", "iinfo"]

# bits, eps, max, tiny, resolution of each floating dtype (IEEE 754 and bfloat16's layout).
_FLOATING = {
    "float16": (16, 2.0 ** -10, 65504.0, 2.0 ** -14, 1e-3),
    "bfloat16": (16, 2.0 ** -7, (2.0 - 2.0 ** -7) * 2.0 ** 127, 2.0 ** -126, 1e-2),
    "float32": (32, 2.0 ** -23, (2.0 - 2.0 ** -23) * 2.0 ** 127, 2.0 ** -126, 1e-6),
    "float64": (64, 2.0 ** -52, (2.0 - 2.0 ** -52) * 2.0 ** 1023, 2.0 ** -1022, 1e-15),
}
_INTEGER = {"int8": (8, True), "uint8": (8, False), "int16": (16, True), "int32": (32, True),
            "int64": (64, True)}


def _dtype_name(owner, dtype):
    if not isinstance(dtype, _C.dtype):
        raise KilnTypeError(f"{owner}: expected a kiln dtype, got {type(dtype).__name__} "
                            f"{dtype!r}")
    return dtype.name


class finfo:  # noqa: N801  (PyTorch's name)
    """The limits of a floating dtype (see the module's documentation)."""

    def __init__(self, dtype=None):
        name = _C.get_default_dtype().name if dtype is None else _dtype_name("finfo", dtype)
        if name not in _FLOATING:
            raise KilnTypeError(f"finfo: expected a floating-point dtype, got {name} (iinfo gives "
                                f"an integer dtype's limits)")
        self.bits, self.eps, self.max, self.tiny, self.resolution = _FLOATING[name]
        self.min = -self.max
        self.smallest_normal = self.tiny
        self.dtype = name

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.tiny:g}, tiny={self.tiny:g}, "
                f"dtype={self.dtype})")


class iinfo:  # noqa: N801  (PyTorch's name)
    """The limits of an integer dtype (see the module's documentation)."""

    def __init__(self, dtype):
        name = _dtype_name("iinfo", dtype)
        if name not in _INTEGER:
            raise KilnTypeError(f"iinfo: expected an integer dtype (not bool), got {name} (finfo "
                                f"gives a floating dtype's limits)")
        self.bits, signed = _INTEGER[name]
        self.min = -(2 ** (self.bits - 1)) if signed else 0
        self.max = 2 ** (self.bits - 1) - 1 if signed else 2 ** self.bits - 1
        self.dtype = name

    def __repr__(self):
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"
