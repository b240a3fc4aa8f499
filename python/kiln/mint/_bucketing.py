"""PyTorch's sorted search and counting functions, composed of kiln.mint ops in Python with
PyTorch's names, argument order and defaults:

    searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None)
    bucketize(input, boundaries, *, out_int32=False, right=False)
    bincount(input, weights=None, minlength=0)

and the Tensor method ``bincount`` (PyTorch has no searchsorted or bucketize method).

- ``searchsorted`` is a binary search run on every value at once: ceil(log2(n + 1)) rounds of a
  gather and a comparison, so it traces under kiln.jit (the number of rounds follows the
  sequence's length, a shape). Its comparisons are PyTorch's, so a NaN value lands after every
  element and a NaN in the sequence (where sort puts it, at the end) counts as larger than
  every value; sequence and values of different dtypes compare promoted, as in PyTorch. The
  sequence is 1-d, or N-d with the values' leading dims (one sorted row per row of values);
  ``input`` may be a number (a 0-d result, 1-d sequence). Bool is refused, as in PyTorch.
  ``bucketize(input, boundaries, right=...)`` is ``searchsorted(boundaries, input,
  right=...)``: boundaries[i - 1] < x <= boundaries[i] with right False.
- ``bincount``'s result has max(input) + 1 (at least ``minlength``) elements, a size the values
  decide: it reads them, which a function kiln.jit traces cannot, so it is eager only (a
  KilnTypeError while tracing, as kiln.mint.unique and nonzero). Without weights the counts
  are int64; with weights their sums, float32 for float32 weights and float64 for any other
  dtype, as in PyTorch, and differentiable in the weights.
"""

import numbers

from .. import _C
from .._checks import checked_bool, checked_int
from ..errors import DTypeError, KilnTypeError, KilnValueError, ShapeError
from ._indexing_ops import _eager, _tensor

__all__ = ["searchsorted", "bucketize", "bincount"]

Tensor = _C.Tensor
_mint = _C.mint


def _not_bool(owner, name, value):
    if value.dtype == _C.dtype.bool:
        raise DTypeError(f"{owner}: expected a numeric {name}, got bool")


def _search(sequence, values, right, out_int32):
    """The insertion points of ``values`` (a tensor, or a number for a 1-d sequence) in the
    last dim of ``sequence``: the first position whose element is >= the value (> with
    ``right``), by binary search."""
    count = sequence.shape[-1]
    shape = list(values.shape) if isinstance(values, Tensor) else []
    low = _mint.zeros(shape, dtype=_C.dtype.int64)
    high = _mint.full(shape, count, dtype=_C.dtype.int64)
    flat = sequence.ndim == 1
    for _ in range(count.bit_length()):
        middle = _mint.floor_divide(low + high, 2)
        at = _mint.clamp(middle, max=count - 1)
        element = (_mint.index_select(sequence, 0, at.reshape(-1)).reshape(shape) if flat
                   else _mint.gather(sequence, -1, at))
        # PyTorch's comparisons (not element < value): NaN on either side moves right.
        right_of = ~(element > values) if right else ~(element >= values)
        active = low < high
        low = _mint.where(active & right_of, middle + 1, low)
        high = _mint.where(active & ~right_of, middle, high)
    return low.to(_C.dtype.int32) if out_int32 else low


def _values(owner, name, input, sequence):  # noqa: A002
    """``input`` checked: a non-bool tensor whose leading dims are the N-d sequence's, or a
    real number for a 1-d sequence."""
    if isinstance(input, Tensor):
        _not_bool(owner, name, input)
        if sequence.ndim > 1 and (input.ndim != sequence.ndim
                                  or list(input.shape[:-1]) != list(sequence.shape[:-1])):
            raise ShapeError(f"{owner}: expected a 1-d sorted sequence, or one whose leading "
                             f"dims are the values' (one sorted row per row of values), got "
                             f"sequence {list(sequence.shape)} and values {list(input.shape)}")
        return input
    if sequence.ndim != 1:
        raise ShapeError(f"{owner}: a number as {name} needs a 1-d sorted sequence, got shape "
                         f"{list(sequence.shape)}")
    if isinstance(input, bool) or not isinstance(input, numbers.Real):
        raise KilnTypeError(f"{owner}: expected {name} to be a kiln.Tensor or a real number, got "
                            f"{type(input).__name__} {input!r}")
    return input


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,  # noqa: A002
                 sorter=None):
    """searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
    sorter=None): for each value of ``input`` the index in the (last dim of the) sorted sequence
    where it would be inserted to keep it sorted: before equal elements, or after them with
    ``right`` (or ``side="right"``). ``sorter`` holds the indices that sort an unsorted
    sequence. int64 indices (int32 with ``out_int32``). See the module's documentation."""
    owner = "searchsorted"
    _tensor(owner, "sorted_sequence", sorted_sequence)
    _not_bool(owner, "sorted_sequence", sorted_sequence)
    if sorted_sequence.ndim == 0:
        raise ShapeError(f"{owner}: expected a sorted_sequence of at least 1 dim, got a 0-d "
                         f"tensor")
    checked_bool(owner, "right", right)
    checked_bool(owner, "out_int32", out_int32)
    if side is not None:
        if side not in ("left", "right"):
            raise KilnValueError(f"{owner}: expected side 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise KilnValueError(f"{owner}: side='left' and right=True contradict each other")
        right = side == "right"
    if sorter is not None:
        _tensor(owner, "sorter", sorter)
        if sorter.dtype != _C.dtype.int64:
            raise DTypeError(f"{owner}: expected an int64 sorter, got {sorter.dtype.name}")
        if list(sorter.shape) != list(sorted_sequence.shape):
            raise ShapeError(f"{owner}: expected sorter of the sequence's shape "
                             f"{list(sorted_sequence.shape)}, got {list(sorter.shape)}")
        sorted_sequence = _mint.gather(sorted_sequence, -1, sorter)
    values = _values(owner, "input", input, sorted_sequence)
    return _search(sorted_sequence, values, right, out_int32)


def bucketize(input, boundaries, *, out_int32=False, right=False):  # noqa: A002
    """bucketize(input, boundaries, *, out_int32=False, right=False): the bucket of each value
    of ``input`` (a tensor or a number) among the 1-d sorted ``boundaries``: i with
    boundaries[i - 1] < x <= boundaries[i] (boundaries[i - 1] <= x < boundaries[i] with
    ``right``), from 0 to len(boundaries)."""
    owner = "bucketize"
    _tensor(owner, "boundaries", boundaries)
    _not_bool(owner, "boundaries", boundaries)
    if boundaries.ndim != 1:
        raise ShapeError(f"{owner}: expected 1-d boundaries, got shape "
                         f"{list(boundaries.shape)}")
    checked_bool(owner, "right", right)
    checked_bool(owner, "out_int32", out_int32)
    values = _values(owner, "input", input, boundaries)
    return _search(boundaries, values, right, out_int32)


def bincount(input, weights=None, minlength=0):  # noqa: A002
    """bincount(input, weights=None, minlength=0): how many times each value 0, 1, ... occurs
    in the 1-d non-negative integer ``input`` (int64), or with ``weights`` (of the input's
    length) the sum of the weights of its occurrences; max(input) + 1 elements, at least
    ``minlength``. Eager only."""
    owner = "bincount"
    _eager(owner)
    _tensor(owner, "input", input)
    if input.dtype.is_floating_point or input.dtype == _C.dtype.bool:
        raise DTypeError(f"{owner}: expected an integer tensor, got {input.dtype.name}")
    if input.ndim != 1:
        raise ShapeError(f"{owner}: expected a 1-d tensor, got shape {list(input.shape)}")
    minlength = checked_int(owner, "minlength", minlength, low=0)
    if weights is not None:
        _tensor(owner, "weights", weights)
        if list(weights.shape) != list(input.shape):
            raise ShapeError(f"{owner}: expected 1-d weights of the input's length "
                             f"{input.shape[0]}, got shape {list(weights.shape)}")
    values = input.detach().numpy()
    if values.size and values.min() < 0:
        raise KilnValueError(f"{owner}: expected non-negative values, got {int(values.min())}")
    size = max(minlength, int(values.max()) + 1 if values.size else 0)
    index = input.to(_C.dtype.int64)
    if weights is None:
        return _mint.scatter(_mint.zeros(size, dtype=_C.dtype.int64), 0, index, 1, "add")
    dtype = weights.dtype if weights.dtype in (_C.dtype.float32, _C.dtype.float64) \
        else _C.dtype.float64
    return _mint.scatter(_mint.zeros(size, dtype=dtype), 0, index, weights.to(dtype), "add")


Tensor.bincount = bincount
