"""More of PyTorch's shape, indexing and predicate functions, composed of kiln.mint ops and Tensor
methods in Python with PyTorch's names, argument order and defaults:

    broadcast_tensors(*tensors)                 broadcast_to(input, size)
    block_diag(*tensors)                        combinations(input, r=2, with_replacement=False)
    diag_embed(input, offset=0, dim1=-2, dim2=-1)                 diagflat(input, offset=0)
    vander(x, N=None, increasing=False)         rot90(input, k=1, dims=(0, 1))
    ravel(input)   select(input, dim, index)   take(input, index)   unravel_index(indices, shape)
    hsplit(input, indices_or_sections)   vsplit(...)   dsplit(...)   row_stack(tensors)
    concat(tensors, dim=0)   concatenate(tensors, axis=0)          (cat's aliases)
    index_copy(input, dim, index, source)       masked_scatter(input, mask, source)
    diagonal_scatter(input, src, offset=0, dim1=0, dim2=1)   select_scatter(input, src, dim, index)
    slice_scatter(input, src, dim=0, start=None, end=None, step=1)
    unique_consecutive(input, return_inverse=False, return_counts=False, dim=None)
    isin(elements, test_elements, *, assume_unique=False, invert=False)
    is_floating_point(input)   is_signed(input)   is_nonzero(input)   is_same_size(input, other)
    numel(input)   t(input)   result_type(tensor1, tensor2)   can_cast(from_, to)
    scalar_tensor(s, *, dtype=None, device=None, requires_grad=False)

and PyTorch's other spellings of existing functions, which are those functions themselves:
``divide`` (div, with ``rounding_mode``), ``multiply`` (mul), ``subtract`` (sub, with
``alpha``), ``negative`` and ``negative_`` (neg, neg_), ``true_divide`` (the Div op),
``greater`` / ``greater_equal`` / ``less`` / ``less_equal`` / ``not_equal`` (gt, ge, lt, le,
ne) and ``absolute`` (abs). The Tensor methods PyTorch has for all of these are installed at the
bottom of this module (``x.rot90()``, ``x.index_copy_(...)``, ``x.masked_scatter_(...)``,
``x.is_signed()``, ``x.divide_(y)``, ``x.absolute_()``, ...); ``select``, ``broadcast_to``,
``numel``, ``t`` and ``is_floating_point`` are methods already.

They differentiate through autograd and trace under kiln.jit, but for ``unique_consecutive``,
whose result's size the values decide (eager only: a KilnTypeError inside a traced function),
and the checks that read values, which are skipped while tracing: ``unravel_index``'s range
check, ``take``'s and ``index_copy``'s (their kernels, IndexSelect and Scatter, refuse an index
out of range when the graph runs) and ``masked_scatter``'s count of the mask's true elements.

- ``broadcast_tensors``, ``broadcast_to``, ``ravel`` (of a contiguous tensor), ``select``,
  ``t`` and the splits return views, as PyTorch's; the others return new tensors.
- ``index_copy``, ``select_scatter``, ``slice_scatter`` and ``diagonal_scatter`` are
  kiln.mint.scatter along a dim. index_copy takes PyTorch's index only: int64, each in [0,
  size) (kiln.mint.scatter and index_add also take int32 and count a negative index from the
  end; PyTorch's index_copy refuses both), and a source of the input's dtype only, as
  PyTorch's; the three scatters convert ``src`` to it, as PyTorch's do. A repeated
  index in index_copy writes one of its slices (PyTorch leaves which one unspecified too).
- ``masked_scatter`` gathers ``source`` at the running count of the mask's true elements and
  puts it where the mask holds, so its shape follows the shapes alone. Eagerly a mask with more
  true elements than ``source`` has is a KilnValueError, as in PyTorch; inside a traced
  function that count cannot be read, and the extra positions repeat source's last element.
- ``take`` takes int32 indices too, as kiln.mint.take_along_dim does (PyTorch's: int64 only).
- ``isin`` compares its tensors promoted, as PyTorch's, and also takes bool tensors (PyTorch
  refuses them). It sorts the test elements and binary-searches each element
  (kiln.mint.searchsorted), so it costs (n + m) log m, not n * m; NaN is in nothing.
- ``unravel_index`` takes indices in [-prod(shape), prod(shape)), negative ones counting from
  the end as PyTorch documents; eagerly one outside is a KilnIndexError (PyTorch wraps it
  silently).
- ``vander`` computes the powers by kiln.mint.cumprod (exact for integers, float64 for floats
  rounded once) so that the gradient is finite at 0, where pow's is not.
- ``result_type`` follows Kiln's promotion (docs/architecture.md, "Type promotion"), which is
  what the ops give: Python numbers are weak as in PyTorch, but a 0-d tensor promotes as any
  tensor does (PyTorch ranks it below tensors with dims: float32 with a 0-d float64 is float32
  there, float64 here).
- ``scalar_tensor`` makes an ordinary 0-d tensor, of the default dtype unless told otherwise, as
  PyTorch's; kiln._C's ``scalar_tensor`` is another thing (a weak scalar, for tests and tracing).
- Kiln has no in-place comparisons (``gt_``), so their ``greater_`` spellings are missing too.
"""

import functools
import itertools
import math
import numbers

from .. import _C
from .. import _tensor_methods
from .._checks import as_int, checked_bool, checked_int, wrap_dim
from ..errors import DTypeError, KilnIndexError, KilnTypeError, KilnValueError, ShapeError
from ._bucketing import searchsorted
from ._composite import _cast
from ._indexing_ops import (_INDEX_DTYPES, _along, _as_rows, _dim, _eager, _index_vector, _runs,
                            _tensor, cumprod, div)
from ._products import diag, movedim
from ._shape_ops import tensor_split, vstack

__all__ = ["broadcast_tensors", "broadcast_to", "block_diag", "combinations", "diag_embed",
           "diagflat", "vander", "rot90", "ravel", "select", "take", "unravel_index", "hsplit",
           "vsplit", "dsplit", "row_stack", "concat", "concatenate", "index_copy",
           "masked_scatter", "diagonal_scatter", "select_scatter", "slice_scatter",
           "unique_consecutive", "isin", "is_floating_point", "is_signed", "is_nonzero",
           "is_same_size", "numel", "t", "result_type", "can_cast", "scalar_tensor", "divide",
           "multiply", "subtract", "negative", "negative_", "true_divide", "greater",
           "greater_equal", "less", "less_equal", "not_equal", "absolute"]

Tensor = _C.Tensor
_mint = _C.mint
_INT64 = _C.dtype.int64


def _broadcast_shape(owner, tensors):
    """The shape ``tensors`` broadcast to; a ShapeError naming ``owner`` and their shapes."""
    shapes = [list(x.shape) for x in tensors]
    try:
        return list(_mint.broadcast_shapes(*shapes))
    except ShapeError:
        raise ShapeError(f"{owner}: shapes {', '.join(map(str, shapes))} do not broadcast "
                         f"together") from None


def _widened_to(x, shape):
    return x if list(x.shape) == list(shape) else x.broadcast_to(shape)


# ------------------------------------------------------------------------------------------------
# Broadcasting


def broadcast_tensors(*tensors):
    """broadcast_tensors(*tensors): the tensors expanded to their common broadcast shape, a tuple
    of views."""
    for k, x in enumerate(tensors):
        _tensor("broadcast_tensors", f"tensor {k}", x)
    shape = _broadcast_shape("broadcast_tensors", tensors) if tensors else []
    return tuple(_widened_to(x, shape) for x in tensors)


def broadcast_to(input, size):  # noqa: A002  (PyTorch's argument names)
    """broadcast_to(input, size): ``input`` expanded to ``size`` (a sequence of ints; -1 keeps an
    existing dim's size), a view."""
    _tensor("broadcast_to", "input", input)
    if as_int(size) is not None:
        size = [size]
    if not isinstance(size, (list, tuple)):
        raise KilnTypeError(f"broadcast_to: expected size to be a sequence of ints, got "
                            f"{type(size).__name__} {size!r}")
    return input.broadcast_to([checked_int("broadcast_to", "each of size", s, low=-1)
                               for s in size])


# ------------------------------------------------------------------------------------------------
# Building matrices


def block_diag(*tensors):
    """block_diag(*tensors): the block-diagonal matrix of the tensors (0-d ones as [1, 1], 1-d
    ones [n] as rows [1, n]), zeros elsewhere, in their promoted dtype. With no tensors, a tensor
    of the default dtype and shape [1, 0], as PyTorch's."""
    owner = "block_diag"
    blocks = []
    for k, x in enumerate(tensors):
        _tensor(owner, f"tensor {k}", x)
        if x.ndim > 2:
            raise ShapeError(f"{owner}: expected tensors of at most 2 dims, got tensor {k} of "
                             f"shape {list(x.shape)}")
        blocks.append(x.reshape([1] * (2 - x.ndim) + list(x.shape)))
    if not blocks:
        return _mint.zeros([1, 0])
    dtype = functools.reduce(_C.promote_types, (x.dtype for x in blocks))
    width = sum(x.shape[1] for x in blocks)
    rows, left = [], 0
    for x in blocks:
        # Padding puts the zeros beside each block (no product with a mask, which makes NaN of
        # an inf).
        rows.append(_mint.pad(_cast(x, dtype), [left, width - left - x.shape[1]]))
        left += x.shape[1]
    return _mint.cat(rows, 0)


def combinations(input, r=2, with_replacement=False):  # noqa: A002
    """combinations(input, r=2, with_replacement=False): the [count, r] tensor of the r-element
    combinations of the 1-d ``input``'s elements, in itertools.combinations' order (or
    combinations_with_replacement's). r = 0 gives an empty 1-d tensor, as PyTorch's."""
    owner = "combinations"
    _tensor(owner, "input", input)
    if input.ndim != 1:
        raise ShapeError(f"{owner}: expected a 1-d tensor, got shape {list(input.shape)}")
    r = checked_int(owner, "r", r, low=0)
    checked_bool(owner, "with_replacement", with_replacement)
    if r == 0:
        return input.narrow(0, 0, 0).clone()
    choose = (itertools.combinations_with_replacement if with_replacement
              else itertools.combinations)
    positions = [p for combination in choose(range(input.shape[0]), r) for p in combination]
    picked = _mint.index_select(input, 0, _C.tensor(positions, dtype=_INT64))
    return picked.reshape(len(positions) // r, r)


def _diagonal_start(offset):
    """The (row, column) where the ``offset``-th diagonal of a matrix begins."""
    return (0, offset) if offset >= 0 else (-offset, 0)


def _scatter_diagonal(planes, src, offset):
    """A copy of ``planes`` [..., rows, cols] with ``src`` [..., length] written on the
    ``offset``-th diagonal of each plane: kiln.mint.scatter into the flattened planes at the
    diagonal's offsets."""
    lead = list(planes.shape[:-2])
    rows, cols = planes.shape[-2:]
    first_row, first_col = _diagonal_start(offset)
    length = src.shape[-1]
    positions = [(first_row + i) * cols + first_col + i for i in range(length)]
    flat = planes.reshape(lead + [rows * cols])
    index = _C.tensor(positions, dtype=_INT64).expand(lead + [length])
    written = _mint.scatter(flat, flat.ndim - 1, index, _cast(src, planes.dtype))
    return written.reshape(lead + [rows, cols])


def _plane_dims(owner, dim1, dim2, ndim):
    """``dim1`` and ``dim2`` of an ``ndim``-d tensor, wrapped, checked to be different."""
    first, second = (wrap_dim(owner, name, checked_int(owner, name, d), ndim, scalar_as_1d=False)
                     for name, d in (("dim1", dim1), ("dim2", dim2)))
    if first == second:
        raise KilnValueError(f"{owner}: expected dim1 and dim2 to be different dims, got {dim1} "
                             f"and {dim2} (both dim {first})")
    return first, second


def diag_embed(input, offset=0, dim1=-2, dim2=-1):  # noqa: A002
    """diag_embed(input, offset=0, dim1=-2, dim2=-1): a tensor of one more dim whose planes of
    dims ``dim1`` and ``dim2`` (of the result) hold the last dim of ``input`` on their
    ``offset``-th diagonal and zeros elsewhere; the other dims are input's leading ones, in
    order. The planes are square, of side n + |offset|."""
    owner = "diag_embed"
    _tensor(owner, "input", input)
    offset = checked_int(owner, "offset", offset)
    ndim = input.ndim + 1
    first, second = _plane_dims(owner, dim1, dim2, ndim)
    side = input.shape[-1] + abs(offset)
    planes = _mint.zeros(list(input.shape[:-1]) + [side, side], dtype=input.dtype)
    return movedim(_scatter_diagonal(planes, input, offset), [ndim - 2, ndim - 1],
                   [first, second])


def diagflat(input, offset=0):  # noqa: A002
    """diagflat(input, offset=0): the square matrix with the flattened ``input`` on its
    ``offset``-th diagonal (kiln.mint.diag of ``input.reshape(-1)``)."""
    _tensor("diagflat", "input", input)
    return diag(input.reshape(-1), checked_int("diagflat", "offset", offset))


def vander(x, N=None, increasing=False):  # noqa: N803  (PyTorch's argument name)
    """vander(x, N=None, increasing=False): the Vandermonde matrix [len(x), N] of the 1-d ``x``,
    its columns the powers x^(N-1), ..., x^1, x^0 (ascending with ``increasing``); N defaults
    to len(x). Integer and bool inputs give int64, as PyTorch's."""
    owner = "vander"
    _tensor(owner, "x", x)
    if x.ndim != 1:
        raise ShapeError(f"{owner}: expected x to be a 1-d tensor, got shape {list(x.shape)}")
    count = x.shape[0]
    columns = count if N is None else checked_int(owner, "N", N, low=0)
    checked_bool(owner, "increasing", increasing)
    dtype = x.dtype if x.dtype.is_floating_point else _INT64
    powers = [_mint.ones([count, 1], dtype=dtype)]
    if columns > 1:
        powers.append(cumprod(_cast(x, dtype).unsqueeze(1).expand(count, columns - 1), 1))
    matrix = _mint.cat(powers, 1).narrow(1, 0, columns)
    return matrix if increasing else _tensor_methods.flip(matrix, [1])


def scalar_tensor(s, *, dtype=None, device=None, requires_grad=False):
    """scalar_tensor(s, *, dtype=None, device=None, requires_grad=False): a 0-d tensor holding
    the number ``s``, of the default dtype unless ``dtype`` is given (whatever the number's kind,
    as PyTorch's)."""
    if not isinstance(s, numbers.Real):
        raise KilnTypeError(f"scalar_tensor: expected s to be a real number, got "
                            f"{type(s).__name__} {s!r}")
    return _mint.full([], s, dtype=_C.get_default_dtype() if dtype is None else dtype,
                      requires_grad=requires_grad, device=device)


# ------------------------------------------------------------------------------------------------
# Rearranging and picking


def rot90(input, k=1, dims=(0, 1)):  # noqa: A002
    """rot90(input, k=1, dims=(0, 1)): ``input`` rotated k times by 90 degrees in the plane of
    ``dims`` (two different dims), from the first dim towards the second; negative k turns the
    other way. A new tensor."""
    owner = "rot90"
    _tensor(owner, "input", input)
    k = checked_int(owner, "k", k)
    if not isinstance(dims, (list, tuple)) or len(dims) != 2:
        raise KilnValueError(f"{owner}: expected dims to be a pair of dims, got {dims!r}")
    if input.ndim < 2:
        raise ShapeError(f"{owner}: expected a tensor of at least 2 dims, got shape "
                         f"{list(input.shape)}")
    first, second = (wrap_dim(owner, "dims", checked_int(owner, "each of dims", d), input.ndim)
                     for d in dims)
    if first == second:
        raise KilnValueError(f"{owner}: expected two different dims, got {list(dims)}")
    turns = k % 4
    if turns == 0:
        return input.clone()
    if turns == 2:
        return _tensor_methods.flip(input, [first, second])
    flipped = _tensor_methods.flip(input, [second if turns == 1 else first])
    return flipped.transpose(first, second)


def ravel(input):  # noqa: A002
    """ravel(input): the elements in row-major order as a 1-d tensor (a view where reshape can
    make one)."""
    return _tensor("ravel", "input", input).reshape(-1)


def _selected(owner, input, dim, index):  # noqa: A002
    """(dim, index) of ``input.select(dim, index)``, both wrapped and checked."""
    dim = wrap_dim(owner, "dim", checked_int(owner, "dim", dim), input.ndim, scalar_as_1d=False)
    size = input.shape[dim]
    position = checked_int(owner, "index", index)
    if not -size <= position < size:
        raise KilnIndexError(f"{owner}: index {position} out of range for dim {dim} of size "
                             f"{size}; expected a value in [{-size}, {size - 1}]")
    return dim, position % size


def select(input, dim, index):  # noqa: A002
    """select(input, dim, index): the slice at ``index`` (negative from the end) along ``dim``,
    that dim removed; a view."""
    _tensor("select", "input", input)
    return input.select(*_selected("select", input, dim, index))


def _index_tensor(owner, name, value):
    _tensor(owner, name, value)
    if value.dtype not in _INDEX_DTYPES:
        raise DTypeError(f"{owner}: expected int64 or int32 {name}, got {value.dtype.name}")
    return value


def _check_index_range(owner, index, low, high, what):
    """A KilnIndexError naming ``owner`` when an element of the integer tensor ``index`` lies
    outside [low, high), the positions of ``what``. It reads the values, so it runs eagerly only:
    while tracing, the kernel's own error (which names the op) refuses them when the graph
    runs."""
    if _C.jit.is_tracing() or index.numel() == 0:
        return
    least, most = _mint.stack([_mint.min(index), _mint.max(index)]).tolist()
    bad = least if least < low else most if most >= high else None
    if bad is not None:
        expected = (f"indices in [{low}, {high - 1}]" if high > low
                    else "no index, as it has no elements")
        raise KilnIndexError(f"{owner}: index {bad} is out of bounds for {what}: expected "
                             f"{expected}")


def take(input, index):  # noqa: A002
    """take(input, index): the elements of the flattened ``input`` at ``index`` (int64 or int32,
    negative from the end), in index's shape. An index outside [-numel, numel) is a
    KilnIndexError."""
    _tensor("take", "input", input)
    _index_tensor("take", "index", index)
    flat = index.reshape(-1)
    count = input.numel()
    _check_index_range("take", flat, -count, count, f"an input of {count} elements")
    return _mint.index_select(input.reshape(-1), 0, flat).reshape(index.shape)


def unravel_index(indices, shape):
    """unravel_index(indices, shape): the coordinates in a tensor of ``shape`` (an int or a
    sequence of ints) of the flat positions ``indices`` (an integer tensor; negative from the
    end), a tuple of one int64 tensor per dim, each of indices' shape."""
    owner = "unravel_index"
    _tensor(owner, "indices", indices)
    if indices.dtype.is_floating_point or indices.dtype == _C.dtype.bool:
        raise DTypeError(f"{owner}: expected an integer tensor of indices, got "
                         f"{indices.dtype.name}")
    sizes = [shape] if as_int(shape) is not None else shape
    if not isinstance(sizes, (list, tuple)):
        raise KilnTypeError(f"{owner}: expected shape to be an int or a sequence of ints, got "
                            f"{type(shape).__name__} {shape!r}")
    sizes = [checked_int(owner, "each of shape", s, low=0) for s in sizes]
    total = math.prod(sizes)
    flat = _cast(indices, _INT64)
    if not _C.jit.is_tracing() and flat.numel():
        outside = _mint.any((flat < -total) | (flat >= total)).item()
        if outside:
            raise KilnIndexError(f"{owner}: expected indices in [{-total}, {total - 1}] for "
                                 f"shape {sizes}, got some outside")
    flat = _mint.where(flat < 0, flat + total, flat)
    coordinates = []
    for size in reversed(sizes):
        # A size of 0 has no valid index (only an empty tensor of them gets here): 1 keeps the
        # division defined.
        coordinates.append(_mint.remainder(flat, max(size, 1)))
        flat = _mint.floor_divide(flat, max(size, 1))
    return tuple(reversed(coordinates))


def _split(owner, input, indices_or_sections, min_ndim, dim):  # noqa: A002
    """tensor_split along ``dim`` of a tensor of at least ``min_ndim`` dims, whose sections
    (when an int) must divide that dim evenly."""
    _tensor(owner, "input", input)
    if input.ndim < min_ndim:
        raise ShapeError(f"{owner}: expected a tensor of at least {min_ndim} dims, got shape "
                         f"{list(input.shape)}")
    split = indices_or_sections
    if as_int(split) is not None and not (isinstance(split, Tensor) and split.ndim):
        sections = checked_int(owner, "sections", split, low=1)
        if input.shape[dim] % sections:
            raise ShapeError(f"{owner}: dim {dim} of size {input.shape[dim]} does not split into "
                             f"{sections} equal sections; expected a number that divides it "
                             f"(tensor_split makes unequal ones)")
    return tensor_split(input, split, dim)


def hsplit(input, indices_or_sections):  # noqa: A002
    """hsplit(input, indices_or_sections): ``tensor_split`` along dim 1 (dim 0 for a 1-d
    tensor), a number of sections dividing that dim evenly."""
    ndim = getattr(input, "ndim", 0)
    return _split("hsplit", input, indices_or_sections, 1, 1 if ndim > 1 else 0)


def vsplit(input, indices_or_sections):  # noqa: A002
    """vsplit(input, indices_or_sections): ``tensor_split`` along dim 0 of a tensor of at least
    2 dims, a number of sections dividing that dim evenly."""
    return _split("vsplit", input, indices_or_sections, 2, 0)


def dsplit(input, indices_or_sections):  # noqa: A002
    """dsplit(input, indices_or_sections): ``tensor_split`` along dim 2 of a tensor of at least
    3 dims, a number of sections dividing that dim evenly."""
    return _split("dsplit", input, indices_or_sections, 3, 2)


row_stack = vstack  # PyTorch's alias
concat = _mint.cat  # PyTorch's alias, the op itself


def concatenate(tensors, axis=0):
    """concatenate(tensors, axis=0): kiln.mint.cat's alias with NumPy's argument name."""
    return _mint.cat(tensors, axis)


# ------------------------------------------------------------------------------------------------
# Writing slices, diagonals and masked elements


def _copy_along(x, dim, index, source):
    """A copy of ``x`` with slice k of ``source`` along ``dim`` written at position index[k]
    (``index`` 1-d; ``source`` of x's shape but along dim, where it has the index's length)."""
    spread = index.reshape(_along(dim, x.ndim, index.shape[0])).expand(source.shape)
    return _mint.scatter(x, dim, spread, source)


def _expected_source(owner, name, source, expected, what):
    if list(source.shape) != list(expected):
        raise ShapeError(f"{owner}: expected {name} of shape {list(expected)} ({what}), got "
                         f"{list(source.shape)}")


def index_copy(input, dim, index, source):  # noqa: A002
    """index_copy(input, dim, index, source): a copy of ``input`` with slice i of ``source``
    along ``dim`` written at position index[i]. As PyTorch's, ``index`` is 1-d (or 0-d) and
    int64 (another dtype is a DTypeError) with values in [0, size of dim) (another is a
    KilnIndexError: no negative ones), and ``source`` has the input's dtype and its shape but for
    dim, which has the index's length."""
    owner = "index_copy"
    _tensor(owner, "input", input)
    _tensor(owner, "source", source)
    _tensor(owner, "index", index)
    if index.dtype != _INT64:
        raise DTypeError(f"{owner}: expected an int64 index, as PyTorch's, got "
                         f"{index.dtype.name}")
    index = _index_vector(owner, index)
    dim = _dim(owner, dim, input.ndim)
    if source.dtype != input.dtype:
        raise DTypeError(f"{owner}: expected source of the input's dtype {input.dtype.name}, got "
                         f"{source.dtype.name} (as PyTorch; convert it with "
                         f"source.to(kiln.{input.dtype.name}))")
    x = input.reshape(1) if input.ndim == 0 else input
    src = source.reshape(1) if source.ndim == 0 and x.ndim == 1 else source
    expected = list(x.shape)
    expected[dim] = index.shape[0]
    _expected_source(owner, "source", src, expected,
                     f"the input's, with dim {dim} as long as the index")
    size = x.shape[dim]
    if _C.jit.is_tracing():
        # The values are not known at the trace: a negative index is moved out of range, so that
        # the graph's Scatter refuses it, as the eager check does, rather than count from the end.
        index = _mint.where(index < 0, size, index)
    _check_index_range(owner, index, 0, size, f"dimension {dim} with size {size}")
    result = _copy_along(x, dim, index, src)
    return result.reshape(()) if input.ndim == 0 else result


def select_scatter(input, src, dim, index):  # noqa: A002
    """select_scatter(input, src, dim, index): a copy of ``input`` with ``src`` (of the shape of
    ``input.select(dim, index)``, converted to input's dtype) written at ``index`` along
    ``dim``."""
    owner = "select_scatter"
    _tensor(owner, "input", input)
    _tensor(owner, "src", src)
    axis, position = _selected(owner, input, dim, index)
    _expected_source(owner, "src", src, input.select(axis, position).shape,
                     f"input.select({dim}, {index})'s")
    return _copy_along(input, axis, _C.tensor([position], dtype=_INT64),
                       _cast(src, input.dtype).unsqueeze(axis))


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):  # noqa: A002
    """slice_scatter(input, src, dim=0, start=None, end=None, step=1): a copy of ``input`` with
    ``src`` (converted to its dtype) written at the positions ``start:end:step`` along ``dim``
    (Python's slice rules; ``step`` positive). ``src`` has the input's shape but for dim, which
    has the slice's length."""
    owner = "slice_scatter"
    _tensor(owner, "input", input)
    _tensor(owner, "src", src)
    dim = wrap_dim(owner, "dim", checked_int(owner, "dim", dim), input.ndim, scalar_as_1d=False)
    bounds = [None if v is None else checked_int(owner, name, v)
              for name, v in (("start", start), ("end", end))]
    step = checked_int(owner, "step", step, low=1)
    positions = range(*slice(bounds[0], bounds[1], step).indices(input.shape[dim]))
    expected = list(input.shape)
    expected[dim] = len(positions)
    _expected_source(owner, "src", src, expected,
                     f"the input's, with dim {dim} as long as the slice")
    return _copy_along(input, dim, _C.tensor(list(positions), dtype=_INT64),
                       _cast(src, input.dtype))


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):  # noqa: A002
    """diagonal_scatter(input, src, offset=0, dim1=0, dim2=1): a copy of ``input`` with ``src``
    (of the shape of ``input.diagonal(offset, dim1, dim2)``, converted to input's dtype) written
    on that diagonal."""
    owner = "diagonal_scatter"
    _tensor(owner, "input", input)
    _tensor(owner, "src", src)
    offset = checked_int(owner, "offset", offset)
    first, second = _plane_dims(owner, dim1, dim2, input.ndim)
    order = [d for d in range(input.ndim) if d not in (first, second)] + [first, second]
    planes = input.permute(order)
    rows, cols = planes.shape[-2:]
    first_row, first_col = _diagonal_start(offset)
    length = max(0, min(rows - first_row, cols - first_col))
    _expected_source(owner, "src", src, list(planes.shape[:-2]) + [length],
                     f"input.diagonal({offset}, {dim1}, {dim2})'s")
    written = _scatter_diagonal(planes, src, offset)
    return written.permute([order.index(d) for d in range(input.ndim)])


def masked_scatter(input, mask, source):  # noqa: A002
    """masked_scatter(input, mask, source): a copy of ``input`` (broadcast with the bool
    ``mask``) whose elements where the mask holds are the elements of ``source`` (of input's
    dtype), taken in row-major order. ``source`` needs at least as many elements as the mask
    has true ones (see the module's documentation)."""
    owner = "masked_scatter"
    for name, value in (("input", input), ("mask", mask), ("source", source)):
        _tensor(owner, name, value)
    if mask.dtype != _C.dtype.bool:
        raise DTypeError(f"{owner}: expected a bool mask, got {mask.dtype.name}")
    if source.dtype != input.dtype:
        raise DTypeError(f"{owner}: expected source of the input's dtype {input.dtype.name}, got "
                         f"{source.dtype.name}")
    shape = _broadcast_shape(owner, (input, mask))
    x, chosen = _widened_to(input, shape), _widened_to(mask, shape)
    available = source.numel()
    if not _C.jit.is_tracing():
        wanted = _mint.sum(chosen).item()
        if wanted > available:
            raise KilnValueError(f"{owner}: the mask has {wanted} true elements but source only "
                                 f"{available}; expected at least as many in source")
    if available == 0:  # then nothing is chosen
        return x.clone()
    # Element k of the mask's true ones takes source's element k: the running count, less one.
    taken = _mint.clamp(_mint.cumsum(chosen.reshape(-1), 0) - 1, 0, available - 1)
    filler = _mint.index_select(source.reshape(-1), 0, taken).reshape(shape)
    return _mint.where(chosen, filler, x)


# ------------------------------------------------------------------------------------------------
# Sets


def unique_consecutive(input, return_inverse=False, return_counts=False,  # noqa: A002
                       dim=None):
    """unique_consecutive(input, return_inverse=False, return_counts=False, dim=None): the
    elements of ``input`` (flattened) with each run of equal ones kept once, or with ``dim`` its
    slices along ``dim`` so; with ``return_inverse`` also the int64 position in the output of
    each element (input's shape) or slice (along dim), and with ``return_counts`` the int64
    length of each run, as a tuple (output[, inverse][, counts]). Each NaN is a run of its own,
    as in PyTorch. Eager only."""
    owner = "unique_consecutive"
    _eager(owner)
    _tensor(owner, "input", input)
    checked_bool(owner, "return_inverse", return_inverse)
    checked_bool(owner, "return_counts", return_counts)
    dim, layout, rows = _as_rows(owner, input, dim)
    return _runs(input, dim, layout, rows, None, return_inverse, return_counts)


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """isin(elements, test_elements, *, assume_unique=False, invert=False): where each element
    of ``elements`` equals some element of ``test_elements`` (compared promoted; either may be
    a number, not both), a bool tensor of elements' shape; with ``invert``, where it equals
    none. ``assume_unique`` is accepted and changes nothing (the search does not need it)."""
    owner = "isin"
    checked_bool(owner, "assume_unique", assume_unique)
    checked_bool(owner, "invert", invert)
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise KilnTypeError(f"{owner}: expected elements or test_elements to be a kiln.Tensor, "
                            f"got {type(elements).__name__} and {type(test_elements).__name__}")
    for name, value in (("elements", elements), ("test_elements", test_elements)):
        if not isinstance(value, (Tensor, numbers.Real)):
            raise KilnTypeError(f"{owner}: expected {name} to be a kiln.Tensor or a real number, "
                                f"got {type(value).__name__} {value!r}")
    if not isinstance(test_elements, Tensor):
        found = elements == test_elements
    elif not isinstance(elements, Tensor):
        found = _mint.any(test_elements == elements)
    else:
        found = _members(elements, test_elements)
    return _mint.logical_not(found) if invert else found


def _members(elements, test_elements):
    """isin of two tensors: each element searched in the sorted test elements."""
    dtype = _C.promote_types(elements.dtype, test_elements.dtype)
    # searchsorted takes no bools; as 0 and 1 they sort and compare the same.
    dtype = _C.dtype.uint8 if dtype == _C.dtype.bool else dtype
    values = _cast(elements, dtype)
    count = test_elements.numel()
    if count == 0:
        return _mint.zeros_like(elements, dtype=_C.dtype.bool)
    ordered = _mint.sort(_cast(test_elements, dtype).reshape(-1)).values
    # The first test element >= each value (past the end: the last one, which then differs),
    # searched with the NaNs (sorted last, equal to nothing) read as inf: a comparison with NaN
    # would misdirect the search.
    searched = _mint.where(ordered != ordered, math.inf, ordered) if dtype.is_floating_point \
        else ordered
    at = _mint.clamp(searchsorted(searched, values), max=count - 1)
    return _mint.index_select(ordered, 0, at.reshape(-1)).reshape(values.shape) == values


# ------------------------------------------------------------------------------------------------
# Predicates and dtypes


def is_floating_point(input):  # noqa: A002
    """is_floating_point(input): whether the tensor's dtype is a floating-point one."""
    return _tensor("is_floating_point", "input", input).dtype.is_floating_point


_UNSIGNED = (_C.dtype.bool, _C.dtype.uint8)


def is_signed(input):  # noqa: A002
    """is_signed(input): whether the tensor's dtype holds negative numbers (all but bool and
    uint8)."""
    return _tensor("is_signed", "input", input).dtype not in _UNSIGNED


def is_nonzero(input):  # noqa: A002
    """is_nonzero(input): whether the single element of a one-element tensor is nonzero (NaN
    is); a tensor of another size is a KilnValueError, as its truth is ambiguous."""
    _tensor("is_nonzero", "input", input)
    if input.numel() != 1:
        raise KilnValueError(f"is_nonzero: expected a tensor of one element, got shape "
                             f"{list(input.shape)} (the truth of {input.numel()} elements is "
                             f"ambiguous)")
    return bool(input.item())


def is_same_size(input, other):  # noqa: A002
    """is_same_size(input, other): whether the two tensors have the same shape."""
    _tensor("is_same_size", "input", input)
    _tensor("is_same_size", "other", other)
    return list(input.shape) == list(other.shape)


def numel(input):  # noqa: A002
    """numel(input): the number of elements of the tensor."""
    return _tensor("numel", "input", input).numel()


def t(input):  # noqa: A002
    """t(input): the transpose of a matrix (a tensor of at most 2 dims, as it is), a view."""
    return _tensor_methods.t(_tensor("t", "input", input))


# The categories of Kiln's weak scalars (Python numbers), in promotion order.
_BOOL, _INTEGER, _FLOATING = range(3)
# The dtype of a bool or int standing alone; a float's is the default dtype, read at the call.
_WEAK_DEFAULTS = {_BOOL: _C.dtype.bool, _INTEGER: _INT64}


def _operand_dtype(value, name):
    """(dtype, None) for a tensor or a NumPy scalar (strong operands), (None, category) for a
    Python number (weak); np.float64 is a Python float, as for the ops."""
    if isinstance(value, Tensor):
        return value.dtype, None
    if isinstance(value, bool):
        return None, _BOOL
    if isinstance(value, int):
        return None, _INTEGER
    if isinstance(value, float):
        return None, _FLOATING
    if isinstance(value, numbers.Real) and hasattr(value, "dtype"):
        return _C.as_dtype(value.dtype), None
    raise KilnTypeError(f"result_type: expected {name} to be a kiln.Tensor or a real number, "
                        f"got {type(value).__name__} {value!r}")


def result_type(tensor1, tensor2):
    """result_type(tensor1, tensor2): the dtype an arithmetic op of the two (tensors or numbers)
    gives: tensors promote by kiln.promote_types; a Python number lifts only the kind (a float
    with an integer or bool tensor gives the default dtype, an int with a bool tensor int64). See
    the module's documentation for 0-d tensors."""
    strong, category = None, _BOOL
    for name, value in (("tensor1", tensor1), ("tensor2", tensor2)):
        dtype, weak = _operand_dtype(value, name)
        if dtype is None:
            category = max(category, weak)
        else:
            strong = dtype if strong is None else _C.promote_types(strong, dtype)
    if category == _FLOATING and (strong is None or not strong.is_floating_point):
        return _C.get_default_dtype()
    if strong is None:
        return _WEAK_DEFAULTS[category]
    if category == _INTEGER and strong == _C.dtype.bool:
        return _INT64
    return strong


def can_cast(from_, to):
    """can_cast(from_, to): whether PyTorch's casting rule allows ``from_`` to ``to`` (two
    dtypes): every cast but floating-point to integer or bool, and integer to bool."""
    for name, dtype in (("from_", from_), ("to", to)):
        if not isinstance(dtype, _C.dtype):
            raise KilnTypeError(f"can_cast: expected {name} to be a kiln.dtype, got "
                                f"{type(dtype).__name__} {dtype!r}")
    if from_.is_floating_point:
        return to.is_floating_point
    return to != _C.dtype.bool or from_ == _C.dtype.bool


# ------------------------------------------------------------------------------------------------
# PyTorch's other names of existing functions (the functions themselves)

divide = div  # kiln.mint.div, with rounding_mode
multiply = _mint.mul
subtract = _mint.sub
negative = _mint.neg
negative_ = Tensor.neg_
true_divide = _mint.div  # the Div op, true division
greater, greater_equal, less, less_equal, not_equal = (_mint.gt, _mint.ge, _mint.lt, _mint.le,
                                                       _mint.ne)
absolute = _mint.abs


# ------------------------------------------------------------------------------------------------
# Tensor methods


def _write(self, result, what):
    """kiln/_tensor_methods.py's in-place check and write (looked up at the call: that module
    imports kiln.mint, which imports this one)."""
    return _tensor_methods._write(self, result, what)


def _before_write(self, *operands):
    """``self``, or the copy to compute from where autograd records the write: kiln/
    _tensor_methods.py's ``_before_write``."""
    return _tensor_methods._before_write(self, *operands)


def index_copy_(self, dim, index, source):
    """``index_copy`` written into this tensor; returns it."""
    return _write(self, index_copy(_before_write(self, source), dim, index, source),
                  "index_copy_")


def masked_scatter_(self, mask, source):
    """``masked_scatter`` written into this tensor (the mask broadcasts to its shape); returns
    it."""
    return _write(self, masked_scatter(_before_write(self, source), mask, source),
                  "masked_scatter_")


for _function in (diag_embed, diagflat, rot90, ravel, take, hsplit, vsplit, dsplit, index_copy,
                  index_copy_, masked_scatter, masked_scatter_, diagonal_scatter,
                  select_scatter, slice_scatter, unique_consecutive, is_signed, is_nonzero,
                  is_same_size):
    setattr(Tensor, _function.__name__, _function)
del _function
for _alias, _name in (("divide", "div"), ("divide_", "div_"), ("multiply", "mul"),
                      ("multiply_", "mul_"), ("subtract", "sub"), ("subtract_", "sub_"),
                      ("negative", "neg"), ("negative_", "neg_"), ("true_divide", "div"),
                      ("true_divide_", "div_"), ("greater", "gt"), ("greater_equal", "ge"),
                      ("less", "lt"), ("less_equal", "le"), ("not_equal", "ne"),
                      ("absolute", "abs"), ("absolute_", "abs_")):
    setattr(Tensor, _alias, getattr(Tensor, _name))
del _alias, _name
