"""PyTorch's shape functions that Kiln composes of kiln.mint ops and Tensor methods in Python,
with PyTorch's names, argument order and defaults:

    clone(input, *, memory_format=preserve_format)
    flip(input, dims)               fliplr(input)                   flipud(input)
    unbind(input, dim=0)            narrow(input, dim, start, length)
    atleast_1d(*tensors)  atleast_2d(*tensors)  atleast_3d(*tensors)
    hstack(tensors)  vstack(tensors)  dstack(tensors)  column_stack(tensors)
    tensor_split(input, indices_or_sections, dim=0)    (or sections= / indices=)
    swapaxes(input, axis0, axis1)   swapdims(input, dim0, dim1)   unflatten(input, dim, sizes)

with the memory formats ``contiguous_format`` and ``preserve_format``, and the Tensor methods
PyTorch has for them: ``fliplr``, ``flipud``, ``tensor_split``, ``swapaxes``, ``swapdims``,
``unflatten``, ``nelement`` (numel), ``ndimension`` (ndim) and ``clone(memory_format=...)``
(``flip``, ``unbind`` and ``narrow`` are methods already). They differentiate through autograd
and trace under kiln.jit (tensor_split reads a tensor of indices, which a trace cannot: pass
ints there).

- ``clone`` always makes a contiguous copy: Kiln has no channels_last layouts, so
  ``preserve_format`` (PyTorch's default, which keeps a dense tensor's strides) and
  ``contiguous_format`` give the same values and a row-major layout.
- ``unbind``, ``narrow``, ``tensor_split``, ``swapaxes`` and ``unflatten`` return views, as
  PyTorch's; ``flip`` and the stacks return new tensors. The stacks promote their tensors'
  dtypes, as torch.cat does.
- Kiln tensors cannot change their shape in place (a tensor's shape is fixed when it is made),
  so PyTorch's ``squeeze_``, ``unsqueeze_``, ``t_``, ``transpose_`` and ``swapaxes_`` are not
  provided: assign the view (``x = x.squeeze(0)``) instead.
"""

import math

from .. import _C
from .. import _tensor_methods
from .._checks import as_int, checked_int, wrap_dim
from ..errors import DTypeError, KilnTypeError, KilnValueError, ShapeError

__all__ = ["contiguous_format", "preserve_format", "clone", "flip", "fliplr", "flipud", "unbind",
           "narrow", "atleast_1d", "atleast_2d", "atleast_3d", "hstack", "vstack", "dstack",
           "column_stack", "tensor_split", "swapaxes", "swapdims", "unflatten"]

Tensor = _C.Tensor
_mint = _C.mint
_CLONE = Tensor.clone  # the bound C++ copy, which the clone method below wraps


class _MemoryFormat:
    """A memory format of ``clone`` (PyTorch's torch.memory_format); see the module's
    documentation for what Kiln does with it."""

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return f"kiln.mint.{self._name}"


contiguous_format = _MemoryFormat("contiguous_format")
preserve_format = _MemoryFormat("preserve_format")


def _tensor(owner, name, value):
    if not isinstance(value, Tensor):
        raise KilnTypeError(f"{owner}: expected {name} to be a kiln.Tensor, got "
                            f"{type(value).__name__}")
    return value


def _dim(owner, name, dim, ndim):
    """``dim`` of a tensor of ``ndim`` dims that has it (a 0-d tensor has none), non-negative."""
    return wrap_dim(owner, name, checked_int(owner, name, dim), ndim, scalar_as_1d=False)


# ------------------------------------------------------------------------------------------------
# Copies and flips


def clone(input, *, memory_format=preserve_format):  # noqa: A002  (PyTorch's argument names)
    """clone(input, *, memory_format=preserve_format): a contiguous copy of ``input`` (recorded
    by autograd: the gradient flows back to input). ``memory_format`` is kiln.mint's
    contiguous_format or preserve_format, which give the same copy (see the module's
    documentation)."""
    _tensor("clone", "input", input)
    if memory_format is not preserve_format and memory_format is not contiguous_format:
        raise KilnValueError(f"clone: expected memory_format kiln.mint.preserve_format or "
                             f"kiln.mint.contiguous_format (Kiln has no other layout), got "
                             f"{memory_format!r}")
    return _CLONE(input)


def flip(input, dims):  # noqa: A002
    """flip(input, dims): a copy with the order of the elements along ``dims`` (an int or a
    sequence) reversed."""
    return _tensor_methods.flip(_tensor("flip", "input", input), dims)


def fliplr(input):  # noqa: A002
    """fliplr(input): a copy with dim 1 (the columns of each matrix) reversed; at least 2
    dims."""
    _tensor("fliplr", "input", input)
    if input.ndim < 2:
        raise ShapeError(f"fliplr: expected a tensor of at least 2 dims, got shape "
                         f"{list(input.shape)}")
    return _tensor_methods.flip(input, [1])


def flipud(input):  # noqa: A002
    """flipud(input): a copy with dim 0 (the rows) reversed; at least 1 dim."""
    _tensor("flipud", "input", input)
    if input.ndim < 1:
        raise ShapeError("flipud: expected a tensor of at least 1 dim, got a 0-d tensor")
    return _tensor_methods.flip(input, [0])


# ------------------------------------------------------------------------------------------------
# Views


def unbind(input, dim=0):  # noqa: A002
    """unbind(input, dim=0): the slices along ``dim`` as a tuple of views (the dim removed)."""
    _tensor("unbind", "input", input)
    return _tensor_methods.unbind(input, _dim("unbind", "dim", dim, input.ndim))


def narrow(input, dim, start, length):  # noqa: A002
    """narrow(input, dim, start, length): the view of ``length`` elements along ``dim`` from
    ``start`` (negative: from the end; an int or a 0-d integer tensor)."""
    owner = "narrow"
    _tensor(owner, "input", input)
    if input.ndim == 0:
        raise ShapeError("narrow: expected a tensor of at least 1 dim, got a 0-d tensor")
    dim = _dim(owner, "dim", dim, input.ndim)
    start = checked_int(owner, "start", start)
    length = checked_int(owner, "length", length, low=0)
    return input.narrow(dim, start, length)


def swapaxes(input, axis0, axis1):  # noqa: A002
    """swapaxes(input, axis0, axis1): ``input.transpose(axis0, axis1)``, a view."""
    _tensor("swapaxes", "input", input)
    first, second = (wrap_dim("swapaxes", name, checked_int("swapaxes", name, d), input.ndim)
                     for name, d in (("axis0", axis0), ("axis1", axis1)))
    return input.transpose(first, second)


def swapdims(input, dim0, dim1):  # noqa: A002
    """swapdims(input, dim0, dim1): ``input.transpose(dim0, dim1)``, a view."""
    _tensor("swapdims", "input", input)
    first, second = (wrap_dim("swapdims", name, checked_int("swapdims", name, d), input.ndim)
                     for name, d in (("dim0", dim0), ("dim1", dim1)))
    return input.transpose(first, second)


def unflatten(input, dim, sizes):  # noqa: A002
    """unflatten(input, dim, sizes): ``dim`` split into the dims ``sizes`` (a non-empty
    sequence of ints whose product is the dim's size; one of them may be -1, inferred), a
    view where reshape makes one."""
    owner = "unflatten"
    _tensor(owner, "input", input)
    axis = _dim(owner, "dim", dim, input.ndim)
    if not isinstance(sizes, (list, tuple)):
        raise KilnTypeError(f"{owner}: expected sizes to be a sequence of ints, got "
                            f"{type(sizes).__name__} {sizes!r}")
    sizes = [checked_int(owner, "each of sizes", s, low=-1) for s in sizes]
    if not sizes:
        raise KilnValueError(f"{owner}: expected sizes to be non-empty")
    size = input.shape[axis]
    if sizes.count(-1) > 1:
        raise KilnValueError(f"{owner}: only one size may be -1, got {sizes}")
    known = math.prod(s for s in sizes if s != -1)
    if -1 in sizes:
        if known == 0 or size % known:
            raise ShapeError(f"{owner}: sizes {sizes} cannot make dim {axis} of size {size}")
        sizes[sizes.index(-1)] = size // known
    elif known != size:
        raise ShapeError(f"{owner}: sizes {sizes} multiply to {known}, not to the size {size} "
                         f"of dim {axis}")
    shape = list(input.shape)
    return input.reshape(shape[:axis] + sizes + shape[axis + 1:])


def tensor_split(input, indices_or_sections=None, dim=0, *, sections=None,  # noqa: A002
                 indices=None):
    """tensor_split(input, indices_or_sections, dim=0): views of ``input`` along ``dim``: with
    an int n (or a 0-d integer tensor), n pieces, the first ``size % n`` one longer than the
    others; with a sequence of ints (or a 1-d integer tensor), the pieces between those indices,
    sliced as Python slices are (negative from the end, past the end clamped). ``sections=`` and
    ``indices=`` name the two forms, as in PyTorch."""
    owner = "tensor_split"
    _tensor(owner, "input", input)
    given = [v for v in (indices_or_sections, sections, indices) if v is not None]
    if len(given) != 1:
        raise KilnTypeError(f"{owner}: expected exactly one of indices_or_sections, sections "
                            f"and indices, got {len(given)}")
    if input.ndim == 0:
        raise ShapeError("tensor_split: expected a tensor of at least 1 dim, got a 0-d tensor")
    axis = wrap_dim(owner, "dim", checked_int(owner, "dim", dim), input.ndim)
    size = input.shape[axis]
    split = given[0]
    if isinstance(split, Tensor):
        if split.dtype.is_floating_point or split.dtype == _C.dtype.bool:
            raise DTypeError(f"{owner}: expected an integer tensor of indices or sections, got "
                             f"{split.dtype.name}")
        if split.ndim > 1:
            raise ShapeError(f"{owner}: expected a 0-d tensor (sections) or a 1-d tensor "
                             f"(indices), got shape {list(split.shape)}")
        split = split.item() if split.ndim == 0 else split.tolist()
    if indices is None and as_int(split) is not None:
        count = checked_int(owner, "sections", split, low=1)
        base, extra = divmod(size, count)
        lengths = [base + (k < extra) for k in range(count)]
        starts = [sum(lengths[:k]) for k in range(count)]
        return tuple(input.narrow(axis, s, n) for s, n in zip(starts, lengths))
    if not isinstance(split, (list, tuple)):
        raise KilnTypeError(f"{owner}: expected an int (sections) or a sequence of ints "
                            f"(indices), got {type(split).__name__} {split!r}")
    bounds = [None] + [checked_int(owner, "each index", i) for i in split] + [None]
    pieces = []
    for first, last in zip(bounds[:-1], bounds[1:]):
        start, stop, _ = slice(first, last).indices(size)
        pieces.append(input.narrow(axis, start, max(0, stop - start)))
    return tuple(pieces)


# ------------------------------------------------------------------------------------------------
# atleast_nd and stacks


def _tensor_args(owner, tensors):
    """The tensors of atleast_*d (as arguments or one sequence): a list, and whether one tensor
    was given alone (which returns a tensor, not a tuple)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
        alone = False
    else:
        alone = len(tensors) == 1
    for k, x in enumerate(tensors):
        _tensor(owner, f"tensor {k}", x)
    return list(tensors), alone


def _at_least(x, ndim):
    """``x`` viewed with at least ``ndim`` (1, 2 or 3) dims, as NumPy's atleast_*d: a vector
    [n] is [1, n] and [1, n, 1]; a matrix [m, n] is [m, n, 1]."""
    if x.ndim >= ndim:
        return x
    if x.ndim == 0:
        return x.reshape([1] * ndim)
    if x.ndim == 1:
        return x.reshape([1, x.shape[0]] + [1] * (ndim - 2))
    return x.unsqueeze(-1)


def _atleast(owner, ndim, tensors):
    tensors, alone = _tensor_args(owner, tensors)
    result = tuple(_at_least(x, ndim) for x in tensors)
    return result[0] if alone else result


def atleast_1d(*tensors):
    """atleast_1d(*tensors): each tensor viewed with at least 1 dim (a 0-d one as [1]); one
    tensor gives a tensor, several (or a sequence) a tuple."""
    return _atleast("atleast_1d", 1, tensors)


def atleast_2d(*tensors):
    """atleast_2d(*tensors): each tensor viewed with at least 2 dims ([n] as [1, n])."""
    return _atleast("atleast_2d", 2, tensors)


def atleast_3d(*tensors):
    """atleast_3d(*tensors): each tensor viewed with at least 3 dims ([n] as [1, n, 1],
    [m, n] as [m, n, 1])."""
    return _atleast("atleast_3d", 3, tensors)


def _joined(owner, tensors, dim):
    """torch.cat of ``tensors`` along ``dim``, their shapes checked first so that a mismatch is
    reported in ``owner``'s words."""
    first = list(tensors[0].shape)
    for k, x in enumerate(tensors):
        shape = list(x.shape)
        if len(shape) != len(first) or any(a != b for d, (a, b) in enumerate(zip(shape, first))
                                           if d != dim):
            raise ShapeError(f"{owner}: tensor {k} has shape {shape} (as made by {owner}), which "
                             f"does not match tensor 0's {first} but along dim {dim}")
    return _mint.cat(tensors, dim)


def _stack_operands(owner, tensors):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise KilnTypeError(f"{owner}: expected a sequence of kiln tensors, got "
                            f"{type(tensors).__name__}")
    if not tensors:
        raise KilnValueError(f"{owner}: expected at least one tensor")
    for k, x in enumerate(tensors):
        _tensor(owner, f"tensor {k}", x)
    return list(tensors)


def hstack(tensors):
    """hstack(tensors): the tensors joined along dim 1 (dim 0 when they are 1-d; 0-d ones count
    as [1])."""
    tensors = [_at_least(x, 1) for x in _stack_operands("hstack", tensors)]
    return _joined("hstack", tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    """vstack(tensors): the tensors, seen with at least 2 dims, joined along dim 0 (rows)."""
    tensors = [_at_least(x, 2) for x in _stack_operands("vstack", tensors)]
    return _joined("vstack", tensors, 0)


def dstack(tensors):
    """dstack(tensors): the tensors, seen with at least 3 dims, joined along dim 2 (depth)."""
    tensors = [_at_least(x, 3) for x in _stack_operands("dstack", tensors)]
    return _joined("dstack", tensors, 2)


def column_stack(tensors):
    """column_stack(tensors): the tensors joined as columns along dim 1, each 0-d or 1-d one
    first made a column [n, 1]."""
    tensors = _stack_operands("column_stack", tensors)
    columns = [x.reshape(x.numel(), 1) if x.ndim <= 1 else x for x in tensors]
    return _joined("column_stack", columns, 1)


# ------------------------------------------------------------------------------------------------
# Tensor methods


def _clone_method(self, *, memory_format=preserve_format):
    """A contiguous copy of the tensor, recorded by autograd; ``memory_format`` is
    kiln.mint.preserve_format or contiguous_format (the same copy: see kiln.mint.clone)."""
    if memory_format is preserve_format:
        return _CLONE(self)
    return clone(self, memory_format=memory_format)


def _unflatten_method(self, dim, sizes):
    """kiln.mint.unflatten of this tensor."""
    return unflatten(self, dim, sizes)


def nelement(self):
    """The number of elements (``numel()``)."""
    return self.numel()


def ndimension(self):
    """The number of dims (``dim()``)."""
    return self.ndim


for _function in (fliplr, flipud, tensor_split, swapaxes, swapdims, nelement, ndimension):
    setattr(Tensor, _function.__name__, _function)
del _function
Tensor.unflatten = _unflatten_method
Tensor.clone = _clone_method
Tensor.clone.__name__ = Tensor.clone.__qualname__ = "clone"
