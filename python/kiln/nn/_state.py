"""Checkpoint values converted, before anything is copied, into the tensors they will be copied
into: shared by ``Cell.load_state_dict`` and ``Optimizer.load_state_dict``, which check every
value first so that a bad one leaves the cell or optimizer unchanged.

A value is a kiln tensor, a NumPy array, or anything ``numpy.asarray`` turns into one (a number,
nested lists of numbers, a tensor of another library that NumPy reads). Its dtype must be one of
Kiln's (NumPy's bool, int8, uint8, int16, int32, int64, float16, float32, float64, in either byte
order); it is then cast to the target's dtype, as ``target[...] = value`` would cast it.
"""

from .. import _C
from .._numpy import np
from ..errors import DTypeError, ShapeError

# NumPy dtype names that hold a Kiln dtype (bfloat16 has no NumPy dtype).
_NUMPY_NAMES = ("bool", "int8", "uint8", "int16", "int32", "int64", "float16", "float32",
                "float64")


def converted_like(value, target, what):
    """``value`` as a tensor of ``target``'s dtype and shape, ready to copy into ``target`` (it may
    share memory with ``value``). ``what`` names the value in errors: DTypeError for a value of a
    dtype Kiln does not hold or that is not an array at all, ShapeError for another shape."""
    if isinstance(value, _C.Tensor):
        tensor = value.detach()
    else:
        try:
            array = np.asarray(value)
        except (TypeError, ValueError) as e:
            raise DTypeError(f"{what} is a {type(value).__name__} that NumPy cannot convert "
                             f"({e}), expected a kiln tensor, a NumPy array or numbers") from None
        if array.dtype.name not in _NUMPY_NAMES:
            raise DTypeError(f"{what} has dtype {array.dtype} in the state dict, expected one of "
                             f"{', '.join(_NUMPY_NAMES)} (to convert to {target.dtype.name})")
        # A big-endian array holds the same values: Kiln reads native byte order only.
        tensor = _C.tensor(array.astype(array.dtype.newbyteorder("="), copy=False))
    if tuple(tensor.shape) != tuple(target.shape):
        raise ShapeError(f"{what} has shape {list(tensor.shape)} in the state dict, expected "
                         f"{list(target.shape)}")
    return tensor.to(target.dtype)
