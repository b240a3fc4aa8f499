"""PyTorch's ``embedding`` and ``embedding_bag`` (kiln.nn.functional exports both; the cells
kiln.nn.Embedding and kiln.nn.EmbeddingBag call them): the rows of a table at integer indices,
and those rows reduced per bag of indices by a sum, a mean or a maximum, without the
[indices, embedding_dim] lookups ever being a result.

    F.embedding(kiln.tensor([[1, 2], [4, 5]]), weight)                   # [2, 2, D]
    F.embedding_bag(kiln.tensor([[1, 2], [4, 5]]), weight, mode="sum")   # 2 bags of 2: [2, D]
    F.embedding_bag(kiln.tensor([1, 2, 4, 5, 4]), weight, kiln.tensor([0, 2]))   # bags of 2, 3

embedding_bag is composed of kiln.mint ops: each index gets the number of its bag (from the
offsets, by a cumulative sum of the bag starts), its row is looked up (kiln.mint.embedding), and
the rows are added into their bags (index_add; the mean divides by each bag's count) or reduced
by scatter_reduce "amax". The indices that count in no bag (padding_idx, and with
``include_last_offset`` those past the last offset) go to one spare bag, dropped at the end, so
every shape follows from the arguments' shapes: autograd differentiates it and kiln.jit traces
it.

Where this differs from PyTorch: in "max" mode the gradient of a bag's element is shared evenly
among the rows that tie for its maximum (scatter_reduce's rule), where PyTorch gives all of it to
one of them. With ``include_last_offset``, indices past the last offset count in no bag (the
offsets are meant to end at the input's length, as in CSR); PyTorch's float32 kernel ignores them
too, its float64 one adds them to the last bag. The offsets are checked (first 0,
non-decreasing, the last at most the input's length) only outside a kiln.jit trace, which has no
values to read.
"""

from .. import _C, mint as _mint
from .._checks import check_held_dtype, checked_bool, checked_int
from ..autograd import no_grad
from ..errors import (DTypeError, KilnIndexError, KilnNotImplementedError, KilnValueError,
                      ShapeError)
from ..mint._composite import (_cast, _dims, _floating_tensor, _kiln_tensor, _widened,
                               check_real)

__all__ = ["embedding", "embedding_bag"]


def _dense_embedding(owner, sparse):
    """A KilnNotImplementedError naming ``owner`` for PyTorch's ``sparse=True`` embedding, whose
    weight gradient is a sparse tensor. Shared with kiln.nn.Embedding."""
    if sparse:
        raise KilnNotImplementedError(f"{owner}: sparse is not supported (Kiln has no sparse "
                                      f"tensors: the gradient of weight is always a dense "
                                      f"tensor of its shape); pass sparse=False")


def _grad_scaled_by_freq(rows, input, count):  # noqa: A002
    """``rows`` (the lookups of the indices ``input`` into a table of ``count`` rows) with the
    same values, each lookup's gradient divided by the number of times its index occurs in
    ``input``: PyTorch's scale_grad_by_freq. The counts come from ops (a scatter-add of ones),
    not from reading the indices, so kiln.jit traces it."""
    flat = input.reshape(-1).to(_C.dtype.int64)
    # Counted in float64 for float64 rows, else in float32 (exact up to 2^24 lookups of one
    # index), so that 1 / count is rounded once into the rows' dtype.
    wide = _C.dtype.float64 if rows.dtype == _C.dtype.float64 else _C.dtype.float32
    counts = _mint.scatter(_mint.zeros(count, dtype=wide), 0, flat,
                           _mint.ones(flat.shape, dtype=wide), "add")
    scale = _cast(1.0 / _mint.embedding(input, counts.reshape(count, 1)), rows.dtype)
    # rows.detach() carries the value exactly; (rows - rows.detach()) is 0 with rows' gradient.
    return rows.detach() + (rows - rows.detach()) * scale


def _embedding_renorm_(owner, weight, input, max_norm, norm_type):  # noqa: A002
    """PyTorch's embedding_renorm_: under no_grad, each row of ``weight`` that ``input`` looks
    up whose ``norm_type``-norm exceeds ``max_norm`` is scaled in place by max_norm / (norm +
    1e-7). As PyTorch's, the norm is computed in the weight's dtype and the scale in float64,
    then rounded to the weight's dtype before it multiplies the row. The indices are checked
    before anything is written (outside a kiln.jit trace, which has no values): a
    non-integer dtype is a DTypeError, an index outside [0, rows) a KilnIndexError."""
    max_norm = check_real(owner, "max_norm", max_norm)
    norm_type = check_real(owner, "norm_type", norm_type)
    if input.dtype.is_floating_point or input.dtype == _C.dtype.bool:
        raise DTypeError(f"{owner}: expected integer indices, got {input.dtype.name}")
    count = weight.shape[0]
    if not _C.jit.is_tracing() and input.numel() > 0:
        low, high = _mint.min(input).item(), _mint.max(input).item()
        if low < 0 or high >= count:
            raise KilnIndexError(f"{owner}: index {low if low < 0 else high} is out of range "
                                 f"for a weight with {count} rows (expected 0 <= index < "
                                 f"{count})")
    with no_grad():
        flat = input.reshape(-1).to(_C.dtype.int64)
        rows = _mint.index_select(weight, 0, flat)
        norms = _mint.vector_norm(rows, norm_type, 1, True).to(_C.dtype.float64)
        scale = _mint.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        # An index looked up twice writes the same scaled row twice.
        weight[flat] = rows * _cast(scale, weight.dtype)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,  # noqa: A002
              scale_grad_by_freq=False, sparse=False):
    """embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
    scale_grad_by_freq=False, sparse=False): the rows of ``weight`` at the integer indices
    ``input`` (kiln.mint.embedding). Lookups of ``padding_idx`` (negative: from the end) return
    its row and send it no gradient, as PyTorch's. With ``max_norm``, each looked-up row whose
    ``norm_type``-norm exceeds max_norm is first rescaled in place (under no_grad) to norm
    max_norm, as PyTorch's: ``weight`` changes. With ``scale_grad_by_freq``, the gradient of
    each lookup is divided by the number of times its index occurs in ``input`` (PyTorch's; the
    values are unchanged). ``sparse=True`` is a KilnNotImplementedError (Kiln has no sparse
    tensors)."""
    owner = "embedding"
    _dense_embedding(owner, sparse)
    _kiln_tensor(owner, "weight", weight)
    count = weight.shape[0]
    if max_norm is not None:
        _kiln_tensor(owner, "input", input)
        _embedding_renorm_(owner, weight, input, max_norm, norm_type)
    rows = _mint.embedding(input, weight)
    if scale_grad_by_freq:
        rows = _grad_scaled_by_freq(rows, input, count)
    if padding_idx is None:
        return rows
    padding_idx = checked_int(owner, "padding_idx", padding_idx, -count, count - 1) % count
    if not rows.requires_grad:
        return rows  # no gradient to cut: the where below would be a pass for nothing (5x)
    # The lookups of padding_idx take the row's value with its gradient cut (as kiln.nn.Embedding).
    counted = _mint.unsqueeze(input != padding_idx, -1)
    return _mint.where(counted, rows, rows.detach())


_MODES = ("sum", "mean", "max")
_INDEX_DTYPES = (_C.dtype.int64, _C.dtype.int32)


def check_mode(owner, mode, scale_grad_by_freq):
    """``mode`` if it is "sum", "mean" or "max", else a KilnValueError, as is "max" with
    ``scale_grad_by_freq`` (PyTorch's rule: a maximum has no frequency to scale by). Shared with
    kiln.nn.EmbeddingBag, which checks at construction."""
    if not isinstance(mode, str) or mode not in _MODES:
        raise KilnValueError(f"{owner}: expected mode 'sum', 'mean' or 'max', got {mode!r}")
    if checked_bool(owner, "scale_grad_by_freq", scale_grad_by_freq) and mode == "max":
        raise KilnValueError(f"{owner}: mode 'max' does not support scale_grad_by_freq=True (the "
                             f"gradient of a maximum is not a sum over the indices)")
    return mode


def _indices(owner, name, value):
    if _kiln_tensor(owner, name, value) not in _INDEX_DTYPES:
        raise DTypeError(f"{owner}: expected {name} of dtype int64 or int32, got "
                         f"{value.dtype.name}")
    return value.to(_C.dtype.int64)


def _check_offsets(owner, offsets, length):
    """PyTorch's checks of the offsets' values (read, so eager only): the first bag starts at 0,
    each at or after the one before, and the last at most at ``length``; a KilnValueError
    otherwise."""
    if _C.jit.is_tracing() or offsets.numel() == 0:
        return
    first, last = offsets[0].item(), offsets[-1].item()
    if first != 0:
        raise KilnValueError(f"{owner}: expected offsets[0] to be 0 (the first bag starts at the "
                             f"input's first index), got {first}")
    if last > length:
        raise KilnValueError(f"{owner}: expected offsets[-1] to be at most the input's length "
                             f"{length}, got {last}")
    if offsets.numel() > 1 and _mint.any(offsets[1:] < offsets[:-1]).item():
        raise KilnValueError(f"{owner}: expected non-decreasing offsets (the start of each bag), "
                             f"got {offsets.tolist()}")


def _bags(owner, input, offsets, include_last_offset):  # noqa: A002  (PyTorch's argument name)
    """(flat indices [n] int64, the bag of each [n] int64, the number of bags B). An index that
    counts in no bag (past the last offset with ``include_last_offset``) is in bag B."""
    flat = _indices(owner, "input", input).reshape(-1)
    if input.ndim == 2:
        if offsets is not None:
            raise KilnValueError(f"{owner}: a 2-d input [B, N] is B bags of N indices; expected "
                                 f"offsets None, got a {type(offsets).__name__}")
        count, size = input.shape
        bag = _mint.arange(count).reshape(count, 1).expand(count, size).reshape(-1)
        return flat, bag, count
    if input.ndim != 1:
        raise ShapeError(f"{owner}: expected input [B, N] (bags of N indices) or [n] with "
                         f"offsets, got {_dims(input.shape)}")
    if offsets is None:
        raise KilnValueError(f"{owner}: a 1-d input needs offsets (a 1-d tensor of the start of "
                             f"each bag), got None")
    starts = _indices(owner, "offsets", offsets)
    if starts.ndim != 1:
        raise ShapeError(f"{owner}: expected 1-d offsets, got {_dims(offsets.shape)}")
    count = starts.shape[0] - 1 if include_last_offset else starts.shape[0]
    if count < 0:
        raise KilnValueError(f"{owner}: include_last_offset=True needs at least one offset (the "
                             f"end of the last bag), got none")
    length = flat.shape[0]
    _check_offsets(owner, starts, length)
    # One at the start of each bag (several where bags are empty; one past the end is the input's
    # length), so that the running sum counts the bags begun at each index. With
    # include_last_offset the last offset begins the spare bag.
    begun = _mint.index_add(_mint.zeros(length + 1, dtype=_C.dtype.int64, device=flat.device),
                            0, starts, _mint.ones(starts.shape[0], dtype=_C.dtype.int64,
                                                  device=flat.device))
    return flat, _mint.cumsum(begun[:length], 0) - 1, count


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,  # noqa: A002
                  scale_grad_by_freq=False, mode="mean", sparse=False, per_sample_weights=None,
                  include_last_offset=False, padding_idx=None):
    """embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,
    scale_grad_by_freq=False, mode='mean', sparse=False, per_sample_weights=None,
    include_last_offset=False, padding_idx=None): [B, embedding_dim] of weight's dtype, the rows
    of ``weight`` [num_embeddings, embedding_dim] at the integer (int64 or int32) indices of each
    bag reduced by ``mode``: "sum", "mean" or "max" (elementwise). As PyTorch's:

    - ``input`` [B, N] is B bags of N indices (``offsets`` None); ``input`` [n] is cut into bags
      at ``offsets`` [B] (1-d, int64 or int32): bag i is input[offsets[i]:offsets[i + 1]], the
      last running to the end. With ``include_last_offset``, ``offsets`` [B + 1] also holds the
      end of the last bag, and indices past it count in none.
    - ``per_sample_weights`` (of the input's shape and weight's dtype; mode "sum" only, else a
      KilnNotImplementedError) multiplies each row before the sum.
    - The indices equal to ``padding_idx`` (negative: from the end) count in no bag, nor in the
      mean's count. An empty bag (or one of padding only) gives zeros.
    - ``max_norm``, ``norm_type`` and ``scale_grad_by_freq`` are F.embedding's: the rows looked
      up are renormed in place first, and the gradient of each lookup divided by how often its
      index occurs in ``input`` (not in mode "max": a KilnValueError). ``sparse=True`` is a
      KilnNotImplementedError (Kiln has no sparse tensors).

    16-bit tables are reduced in float32 and rounded once. See the module's documentation for
    how it is computed and where it differs from PyTorch."""

    owner = "embedding_bag"
    _dense_embedding(owner, sparse)
    check_mode(owner, mode, scale_grad_by_freq)
    _floating_tensor(owner, "weight", weight)
    if weight.ndim != 2:
        raise ShapeError(f"{owner}: expected weight [num_embeddings, embedding_dim], got "
                         f"{_dims(weight.shape)}")
    _kiln_tensor(owner, "input", input)
    if per_sample_weights is not None:
        if mode != "sum":
            raise KilnNotImplementedError(f"{owner}: per_sample_weights is only supported with "
                                          f"mode 'sum', got mode {mode!r}")
        _kiln_tensor(owner, "per_sample_weights", per_sample_weights)
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ShapeError(f"{owner}: expected per_sample_weights of the input's shape "
                             f"{_dims(input.shape)}, got {_dims(per_sample_weights.shape)}")
        check_held_dtype(owner, weight.dtype, "the weight's", (),
                         [("per_sample_weights", per_sample_weights)])
    include_last_offset = checked_bool(owner, "include_last_offset", include_last_offset)
    flat, bag, count = _bags(owner, input, offsets, include_last_offset)
    if max_norm is not None:
        _embedding_renorm_(owner, weight, flat, max_norm, norm_type)
    rows = _mint.embedding(flat, weight)
    table = weight.shape[0]
    if scale_grad_by_freq:
        rows = _grad_scaled_by_freq(rows, flat, table)
    if padding_idx is not None:
        padding_idx = checked_int(owner, "padding_idx", padding_idx, -table, table - 1) % table
        bag = _mint.where(flat == padding_idx, count, bag)
    rows = _widened(rows)
    if per_sample_weights is not None:
        rows = rows * _widened(per_sample_weights).reshape(-1, 1)
    # Bag `count` is the spare one, dropped at the end.
    bags = _mint.zeros((count + 1, weight.shape[1]), dtype=rows.dtype, device=rows.device)
    if mode == "max":
        spread = bag.reshape(-1, 1).expand(tuple(rows.shape))
        result = _mint.scatter_reduce(bags, 0, spread, rows, "amax", include_self=False)
    else:
        result = _mint.index_add(bags, 0, bag, rows)
        if mode == "mean":
            sizes = _mint.index_add(_mint.zeros(count + 1, dtype=rows.dtype, device=rows.device),
                                    0, bag, _mint.ones(bag.shape[0], dtype=rows.dtype,
                                                       device=rows.device))
            result = result / _mint.clamp_min(sizes, 1).reshape(-1, 1)
    return _cast(result[:count], weight.dtype)
