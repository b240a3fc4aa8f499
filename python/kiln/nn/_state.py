"""Checkpoint values converted, before anything is copied, into the tensors they will be copied
into: shared by ``Cell.load_state_dict`` and ``Optimizer.load_state_dict``, which check every
value first so that a bad one leaves the cell or optimizer unchanged.

A value is a kiln tensor, a NumPy array, or anything ``numpy.asarray`` turns into one (a number,
nested lists of numbers, a tensor of another library that NumPy reads, such as a torch Parameter:
an object with a ``detach()`` method gives its detached values). Its dtype must be one of Kiln's
(NumPy's bool, int8, uint8, int16, int32, int64, float16, float32, float64, in either byte
order); it is then cast to the target's dtype, as ``target[...] = value`` would cast it. Another
library's bfloat16 tensor (torch's), which NumPy cannot read, is read through DLPack instead,
bits and all (``kiln.from_dlpack``; on the CPU). A target that cannot take values (an expanded
view, whose elements share memory) is refused as well.

A value's shape must be the target's, with one exception kept for old checkpoints, as PyTorch
keeps it: a 0-d target takes a 1-d value of one element (PyTorch before 0.4 saved scalars such as
BatchNorm's ``num_batches_tracked`` so).
"""

from .. import _C
from .._numpy import np
from ..errors import DTypeError, KilnValueError, ShapeError

# NumPy dtype names that hold a Kiln dtype (bfloat16 has no NumPy dtype).
_NUMPY_NAMES = ("bool", "int8", "uint8", "int16", "int32", "int64", "float16", "float32",
                "float64")


def _is_foreign_bfloat16(value):
    """Whether ``value`` is another library's bfloat16 tensor that DLPack can share (a torch
    tensor: its dtype prints as "torch.bfloat16"); checked without importing that library."""
    dtype = getattr(value, "dtype", None)
    return (not isinstance(value, np.ndarray) and hasattr(value, "__dlpack__")
            and str(dtype).rpartition(".")[2] == "bfloat16")


def _as_tensor(value, target, what):
    """``value`` (not a kiln tensor) as a kiln tensor of the dtype it holds (see
    ``converted_like``)."""
    if callable(getattr(value, "detach", None)):
        # Another library's tensor that tracks gradients (a torch Parameter) lends NumPy (and
        # DLPack) its values only once detached.
        value = value.detach()
    if _is_foreign_bfloat16(value):
        try:
            return _C.mint.from_dlpack(value)
        except (BufferError, TypeError, ValueError, RuntimeError) as e:
            raise DTypeError(f"{what} is a bfloat16 {type(value).__name__} that Kiln cannot read "
                             f"through DLPack ({e}), expected a CPU tensor") from None
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as e:
        raise DTypeError(f"{what} is a {type(value).__name__} that NumPy cannot convert "
                         f"({e}), expected a kiln tensor, a NumPy array or numbers") from None
    if array.dtype.name not in _NUMPY_NAMES:
        raise DTypeError(f"{what} has dtype {array.dtype} in the state dict, expected one of "
                         f"{', '.join(_NUMPY_NAMES)} (to convert to {target.dtype.name})")
    # A big-endian array holds the same values: Kiln reads native byte order only.
    return _C.tensor(array.astype(array.dtype.newbyteorder("="), copy=False))


def converted_like(value, target, what):
    """``value`` as a tensor of ``target``'s dtype and shape, ready to copy into ``target`` (it may
    share memory with ``value``). ``what`` names the value in errors: DTypeError for a value of a
    dtype Kiln does not hold or that is not an array at all, ShapeError for another shape (but
    see the module's documentation on 0-d targets), KilnValueError for a target with elements
    that share memory."""
    for size, stride in zip(target.shape, target.stride()):
        # The copy would refuse it (as it refuses any out tensor whose writes collide), and only
        # after earlier values were copied.
        if stride == 0 and size > 1:
            raise KilnValueError(f"{what} cannot be loaded: its tensor (shape "
                                 f"{list(target.shape)}, strides {list(target.stride())}) has "
                                 f"elements that share memory (an expanded view); give it memory "
                                 f"of its own (clone() it) before loading")
    tensor = value.detach() if isinstance(value, _C.Tensor) else _as_tensor(value, target, what)
    if tuple(tensor.shape) == (1,) and target.ndim == 0:
        tensor = tensor.reshape(())  # an old checkpoint's scalar (see the module's documentation)
    if tuple(tensor.shape) != tuple(target.shape):
        raise ShapeError(f"{what} has shape {list(tensor.shape)} in the state dict, expected "
                         f"{list(target.shape)}")
    return tensor.to(target.dtype)
