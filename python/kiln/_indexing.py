"""NumPy indexing for kiln.Tensor: ``x[key]`` and ``x[key] = value``.

Basic indices -- ints (negative count from the end), slices with positive steps, ``None`` (a new
axis) and ``...`` -- give a VIEW that shares ``x``'s storage, built from ``Tensor.select``,
``slice`` and ``unsqueeze``. Advanced indices -- integer tensors, NumPy integer arrays, lists,
ranges and tuples within the key (``x[:, (0, 2)]``), boolean masks -- give a copy, with NumPy's
placement rule for the indexed dims: the broadcast index dims replace the indexed dims in place when
the advanced indices are adjacent, and go to the front when a slice, ``...`` or ``None`` separates
them -- an ``...`` that stands for no dims too (``x[:, [0, 1], ..., [1, 2]]`` on a 3-d ``x`` has the
index dims first). As in NumPy, an int or a scalar bool next to an advanced index counts as one
(``x[0, :, [1, 2]]`` has the index dims first). A boolean mask selects the positions where it is
true over as many dims as it has, which must match ``x``'s sizes there.

``x[key] = value`` accepts a tensor, a NumPy array, a list or a Python number and broadcasts it to
the indexed shape. A list is read in ``x``'s dtype, not Kiln's default dtype (so ``0.1`` keeps
every digit in a float64 ``x``); a NumPy array keeps its own dtype until it is cast to ``x``'s.
Either way the values convert as a cast does (floats truncate into ints). Basic targets are
written through the view; advanced and boolean targets use ``index_put_`` (with duplicate indices
the last assignment wins).

Negative slice steps raise ``KilnValueError``: Kiln strides are never negative, so such a slice
cannot be a view; index with a reversed integer tensor instead (a copy).

Inside a function ``kiln.jit`` traces, index tensors (the function's own values, or tensors from
outside it, whose later changes the graph then sees) are graph values: a 0-d integer tensor is an
index tensor rather than an int read at the trace. A boolean tensor selects a number of elements
its values decide, which a trace cannot follow: ``x[mask]`` is a KilnTypeError there, and
``x[mask] = v`` with a mask of ``x``'s shape and a number or 0-d ``v`` is ``x.masked_fill_(mask,
v)``.
"""

import operator

from . import _C
from ._numpy import np
from .errors import KilnIndexError, KilnTypeError, KilnValueError, ShapeError

Tensor = _C.Tensor
_mint = _C.mint

_INDEX_DTYPES = (_C.dtype.int64, _C.dtype.int32)
_VALID = ("only integers, slices (`:`), ellipsis (`...`), None and integer or boolean "
          "tensors/arrays are valid indices")

# Kinds of parsed index items.
_INT, _SLICE, _NONE, _ELLIPSIS, _ARRAY, _MASK, _BOOL = range(7)


def _as_array_index(obj):
    """(kind, value) for a tensor, array or list used as an index."""
    if isinstance(obj, Tensor):
        tracing = _C.jit.is_tracing()
        if obj.dtype == _C.dtype.bool:
            if tracing:
                raise KilnTypeError("indexing with a boolean tensor inside a function kiln.jit "
                                    "traces: it selects as many elements as it has True values, "
                                    "which the trace cannot know; use kiln.mint.where(mask, a, "
                                    "b), x.masked_fill(mask, value), or x[mask] = value with a "
                                    "mask of x's shape and a number")
            arr = obj.numpy()
        elif obj.dtype.is_floating_point:
            raise KilnIndexError(f"tensors used as indices must be of integer or boolean type, "
                                 f"got {obj.dtype.name}")
        elif obj.ndim == 0 and not tracing:
            return _INT, int(obj.item())
        else:
            return _ARRAY, obj
    else:
        try:
            arr = np.asarray(obj)
        except ValueError as e:  # a ragged sequence
            raise KilnIndexError(f"a sequence used as an index must be rectangular: {e}") from None
        if arr.size == 0 and arr.dtype == np.float64 and not isinstance(obj, np.ndarray):
            arr = arr.astype(np.int64)  # [] indexes with no positions, as in NumPy
    if arr.dtype == np.bool_:
        return (_BOOL, bool(arr)) if arr.ndim == 0 else (_MASK, arr)
    if not np.issubdtype(arr.dtype, np.integer):
        raise KilnIndexError(f"arrays used as indices must be of integer or boolean type, "
                             f"got {arr.dtype}")
    if arr.ndim == 0:
        return _INT, int(arr)
    return _ARRAY, arr


def _decides_on_size(s, size, start, stop, step):
    """Whether what slice ``s`` (``start, stop, step`` over a dimension of ``size``) takes is not
    linear in the size (kiln.jit.note_size_decision): a bound past the dimension, clamped to it; a
    bound on its edge, which makes the slice whole (x[-2:] and x[:2] at 2 rows are x, no view at
    all, and two rows of more); or a step over 0 or 1 elements, which looks whole (x[::2] of one
    row is that row)."""
    bounds = [b for b in (s.start, s.stop) if b is not None]
    if any(not -size <= operator.index(b) <= size for b in bounds):
        return True
    whole = (start, stop) == (0, size)
    return (whole and step == 1 and any(operator.index(b) != 0 for b in bounds)
            or (step > 1 and size <= 1))


def _int_slice(s):
    """``s`` with its 1-element integer tensor bounds read as ints, as PyTorch reads them
    (``data[i:i + 8]`` with ``i`` drawn by randint); other bounds are left to slice.indices.
    While kiln.jit traces, a tensor bound is a KilnTypeError: it would be read once, at the trace
    (a traced one has no value yet)."""
    def bound(b):
        if not isinstance(b, Tensor):
            return b
        if b.dtype.is_floating_point or b.dtype == _C.dtype.bool or b.numel() != 1:
            raise KilnIndexError(f"slice bounds must be ints or 1-element integer tensors, got a "
                                 f"{b.dtype.name} tensor of shape {list(b.shape)}")
        if _C.jit.is_tracing():
            raise KilnTypeError("a slice bound given as a tensor sets the slice's shape by its "
                                "value, which a kiln.jit graph cannot follow (it would be read "
                                "once, at the trace, and a later change not seen): pass a Python "
                                "int, read outside the jitted function")
        return int(b.item())

    if not any(isinstance(b, Tensor) for b in (s.start, s.stop, s.step)):
        return s
    return slice(bound(s.start), bound(s.stop), bound(s.step))


def _parse(key):
    """The key as a list of (kind, value)."""
    items = []
    for k in key if isinstance(key, tuple) else (key,):
        if k is None:
            items.append((_NONE, None))
        elif k is Ellipsis:
            items.append((_ELLIPSIS, None))
        elif isinstance(k, slice):
            items.append((_SLICE, _int_slice(k)))
        elif isinstance(k, (bool, np.bool_)):
            items.append((_BOOL, bool(k)))
        elif isinstance(k, (Tensor, np.ndarray, list, tuple, range)):
            # A tuple inside the key is a sequence index, as in NumPy (the key itself is not).
            items.append(_as_array_index(k))
        else:
            try:
                items.append((_INT, operator.index(k)))
            except TypeError:
                raise KilnIndexError(f"{_VALID}, got {type(k).__name__}") from None
    return items


def _consumed(kind, value):
    if kind in (_INT, _SLICE, _ARRAY):
        return 1
    if kind == _MASK:
        return value.ndim
    return 0


def _index_tensor(arr, xdim, size):
    """An int64/int32 kiln tensor from an integer index, checked against the indexed dim."""
    if isinstance(arr, Tensor) and _C.jit.is_tracing():
        # A traced index has no values yet, and one from outside the function may change before
        # the graph runs: it is a graph value, its conversion an op, and the Index / IndexPut
        # kernels check the values when the graph runs.
        return arr if arr.dtype in _INDEX_DTYPES else arr.to(_C.dtype.int64)
    values = arr.numpy() if isinstance(arr, Tensor) else arr
    if values.size:
        low, high = int(values.min()), int(values.max())
        bad = low if low < -size else (high if high >= size else None)
        if bad is not None:
            raise KilnIndexError(f"index {bad} is out of bounds for dimension {xdim} with size "
                                 f"{size}")
    if isinstance(arr, Tensor) and arr.dtype in _INDEX_DTYPES:
        return arr
    # Always a copy: the caller may change the array while the op is queued (an epoch's
    # permutation shuffled in place), and NumPy and PyTorch read an index at the call.
    return _C.from_numpy(np.array(values, dtype=np.int64, order="C"))


def _resolve(x, key):
    """Applies the basic part of `key` to x.

    Returns (view, advanced, adjacent): `view` shares x's storage, `advanced` lists
    (dim of view, int index tensor) for the advanced indices, in order, and `adjacent` says no
    slice, ``...`` or ``None`` came between two of them (NumPy's rule for where the index dims go).
    """
    items = _parse(key)
    if sum(kind == _ELLIPSIS for kind, _ in items) > 1:
        raise KilnIndexError("an index can only have a single ellipsis ('...')")
    used = sum(_consumed(kind, value) for kind, value in items)
    if used > x.ndim:
        raise KilnIndexError(f"too many indices for tensor: tensor is {x.ndim}-dimensional, but "
                             f"{used} were indexed")
    has_advanced = any(kind in (_ARRAY, _MASK, _BOOL) for kind, _ in items)
    # Adjacency is read from the key ("a": advanced, "-": slice, `...` or None), not from the
    # view's dims: an `...` that stands for no dims leaves the indexed dims consecutive, yet it
    # separates the indices in NumPy.
    marks = "".join("a" if kind in (_ARRAY, _MASK, _BOOL) or (kind == _INT and has_advanced)
                    else "-" for kind, _ in items)
    adjacent = "-" not in marks.strip("-")
    view, dim, xdim, advanced = x, 0, 0, []
    for kind, value in items:
        if kind == _ELLIPSIS:
            dim += x.ndim - used
            xdim += x.ndim - used
        elif kind == _NONE:
            view = view.unsqueeze(dim)
            dim += 1
        elif kind == _BOOL:
            # A scalar bool is a new axis indexed by [0] (True) or [] (False), as in NumPy.
            view = view.unsqueeze(dim)
            advanced.append((dim, _C.tensor(np.arange(int(value), dtype=np.int64))))
            dim += 1
        elif kind == _SLICE:
            size = view.shape[dim]
            if value.step is not None and operator.index(value.step) <= 0:
                if value.step == 0:
                    raise KilnValueError("slice step cannot be zero")
                raise KilnValueError("negative slice steps are not supported (Kiln strides are "
                                     "never negative); index with a reversed integer tensor "
                                     "instead")
            start, stop, step = value.indices(size)
            step = min(step, 2**63 - 1)  # a step past int64 takes one element all the same
            if _C.jit.is_tracing() and _decides_on_size(value, size, start, stop, step):
                _C.jit.note_size_decision()
            if (start, stop, step) != (0, size, 1):
                view = view.slice(dim, start, stop, step)
            dim += 1
            xdim += 1
        elif kind == _INT:
            size = view.shape[dim]
            if not -size <= value < size:
                raise KilnIndexError(f"index {value} is out of bounds for dimension {xdim} with "
                                     f"size {size}")
            if has_advanced:
                advanced.append((dim, _index_tensor(np.asarray(value), xdim, size)))
                dim += 1
            else:
                view = view.select(dim, value)
            xdim += 1
        elif kind == _ARRAY:
            advanced.append((dim, _index_tensor(value, xdim, view.shape[dim])))
            dim += 1
            xdim += 1
        else:  # _MASK
            covered = tuple(view.shape[dim:dim + value.ndim])
            if covered != value.shape:
                raise KilnIndexError(f"boolean index did not match the indexed tensor: mask shape "
                                     f"{value.shape}, tensor dims {xdim}..{xdim + value.ndim - 1} "
                                     f"have shape {covered}")
            # The mask's dims merge into one indexed by the flat positions (same result as one
            # index per dim, with one index tensor); when strides forbid merging, one per dim.
            merged = view.shape[:dim] + (value.size,) + view.shape[dim + value.ndim:]
            try:
                view = view.view(merged) if value.ndim > 1 else view
                found = [np.flatnonzero(value)]
            except ShapeError:
                found = np.nonzero(value)
            for positions in found:
                advanced.append((dim, _C.from_numpy(positions.astype(np.int64, copy=False))))
                dim += 1
            xdim += value.ndim
    return view, advanced, adjacent


def _advanced_plan(view, advanced, adjacent):
    """(target, index tensors) such that ``_index(target, indices)`` is NumPy's result.

    Adjacent advanced indices (see _resolve) sit at consecutive dims p..: the dims before p get
    broadcastable arange indices, so the result is (sizes before p, index dims, rest) -- NumPy's
    layout -- and `target` stays the (unpermuted) view, which index_put_ writes in place when it
    is contiguous. Otherwise the advanced dims are permuted to the front, which is NumPy's layout
    for that case.
    """
    indices = [t for _, t in advanced]
    shapes = [tuple(t.shape) for t in indices]
    try:
        broadcast = np.broadcast_shapes(*shapes)
    except ValueError:
        raise KilnIndexError(f"shape mismatch: indexing tensors could not be broadcast together "
                             f"with shapes {', '.join(map(str, shapes))}") from None
    dims = [d for d, _ in advanced]
    first = dims[0]
    if adjacent:
        if first > 0 and _C.jit.is_tracing():
            # The aranges are constants of the dims' sizes: under kiln.jit(dynamic=True) the
            # graph holds only for this batch size (it failed as "a constant whose value differs").
            _C.jit.note_size_decision()
        lead = [_C.from_numpy(np.arange(view.shape[i], dtype=np.int64).reshape(
                    (view.shape[i],) + (1,) * (first - 1 - i + len(broadcast))))
                for i in range(first)]
        return view, lead + indices
    rest = [d for d in range(view.ndim) if d not in dims]
    return view.permute(dims + rest), indices


def _getitem(self, key):
    view, advanced, adjacent = _resolve(self, key)
    if not advanced:
        # x[:] and x[...] index nothing, yet are new tensors viewing x, as PyTorch's: a write or
        # detach_() through them is one through a view (and their requires_grad_ is their own).
        return self.view(self.shape) if view is self else view
    if len(advanced) == 1:
        # One index tensor: index_select along its dim gives NumPy's layout directly.
        dim, index = advanced[0]
        out = _mint.index_select(view, dim, index.reshape(-1) if index.ndim != 1 else index)
        if index.ndim != 1:
            out = out.reshape(view.shape[:dim] + index.shape + view.shape[dim + 1:])
        return out
    return _mint._index(*_advanced_plan(view, advanced, adjacent))


def _setitem(self, key, value):
    if (isinstance(key, Tensor) and key.dtype == _C.dtype.bool and _C.jit.is_tracing()
            and key.shape == self.shape
            and (isinstance(value, (bool, int, float)) or
                 (isinstance(value, Tensor) and value.ndim == 0))):
        self.masked_fill_(key, value)  # the traceable form (see the module's documentation)
        return
    view, advanced, adjacent = _resolve(self, key)
    if (type(value) is int and not -2**63 <= value < 2**63 and self.dtype.is_floating_point):
        try:
            value = float(value)  # as the operators take it; an integer self refuses it
        except OverflowError:
            raise KilnValueError(f"the Python int {value} is past float64's range (about "
                                 f"1.8e308)") from None
    if not isinstance(value, (bool, int, float)):
        if not isinstance(value, Tensor):
            # A list is read in self's dtype: at a float32 default dtype, 0.1 would reach a float64
            # self as 0.10000000149. An array keeps its dtype (converted as a tensor would be).
            value = _C.tensor(value, dtype=None if isinstance(value, np.ndarray) else self.dtype)
        if not advanced and value.shares_storage_with(self):
            value = value.clone()  # copy_into does not support overlapping memory
    if not advanced:
        _mint._copy_into(view, value)
        return
    if isinstance(value, Tensor) and value.ndim > 0 and value.shape[0] == 1:
        # Leading size-1 dims broadcast away, as basic assignment, NumPy and PyTorch allow them;
        # index_put_ needs values no longer than the indexed shape.
        shape = value.shape
        lead = next((d for d, size in enumerate(shape) if size != 1), len(shape))
        value = value.reshape(shape[lead:])
    target, indices = _advanced_plan(view, advanced, adjacent)
    _mint._index_put_(target, indices, value)


Tensor.__getitem__ = _getitem
Tensor.__setitem__ = _setitem
