"""PyTorch's product and shape functions that Kiln composes of kiln.mint ops in Python, with
PyTorch's names, argument order, defaults and values:

    einsum(equation, *operands)  (or sublists)   outer(input, vec2)  (alias ger)
    dot(input, other)                            diag(input, diagonal=0)
    diagonal(input, offset=0, dim1=0, dim2=1)    tile(input, dims)
    roll(input, shifts, dims=None)               movedim(input, source, destination)  (moveaxis)
    repeat_interleave(input, repeats=None, dim=None, *, output_size=None)
    meshgrid(*tensors, indexing="ij")            cartesian_prod(*tensors)
    tril_indices(row, col, offset=0, *, dtype=int64, device=None)   triu_indices(...)

They are compositions of registered ops (permute, reshape, narrow, pad, cat, bmm, sum, ...), so
autograd differentiates them and kiln.jit traces them with no kernel of their own. This module
also gives Tensor the methods PyTorch has for them: ``outer``, ``ger``, ``dot``, ``diag``,
``diagonal``, ``tile``, ``roll``, ``repeat_interleave``, ``movedim`` and ``moveaxis``.

- ``einsum`` takes PyTorch's equation form (letters, one "..." per operand, an optional "->"
  output; without it the output is "..." followed by the letters that appear once, in
  alphabetical order, upper case first) and the operands as arguments or as one list. A letter
  repeated in one operand takes the diagonal; letters missing from the output are summed. Sizes
  of 1 broadcast against the other operands' sizes of the same letter, as in PyTorch. Each
  operand first loses its diagonals and the letters no other operand or the output has (summed);
  then the operands are contracted left to right, each pair by one batched matrix product. As
  in PyTorch, an integer result is int64 where a label was summed within one operand (the sum
  widens it) and keeps the operands' dtype otherwise. Operands of different dtypes are promoted
  (PyTorch refuses them). The sublist form ``einsum(op1, sublist1, op2, sublist2, ...,
  [sublist_out])`` (sublists of ints in [0, 52) and Ellipsis) is translated to that equation
  as PyTorch does: 0-25 are 'A'-'Z', 26-51 'a'-'z' and Ellipsis '...'; its errors name the
  equation made.
- ``diagonal`` and ``movedim`` return views where the layout allows (PyTorch's always are);
  ``diag``, ``roll``, ``tile`` and ``repeat_interleave`` return new tensors, as PyTorch's do.
- ``repeat_interleave`` with a tensor of counts reads the counts (the result's size depends on
  them), so that form works eagerly but not on values traced by kiln.jit; an int count traces.
"""

import string

from .. import _C
from .. import _tensor_methods  # its _own, looked up at call time (it imports kiln.mint)
from .._checks import as_int, checked_int, wrap_dim
from .._numpy import np
from ..errors import DTypeError, KilnTypeError, KilnValueError, ShapeError

__all__ = ["einsum", "outer", "ger", "dot", "diag", "diagonal", "tile", "roll",
           "repeat_interleave", "movedim", "moveaxis", "meshgrid", "cartesian_prod",
           "tril_indices", "triu_indices"]

_mint = _C.mint
_ELLIPSIS = "..."
# The sublist form's letters by int, PyTorch's (and NumPy's) order.
_SUBLIST_LETTERS = string.ascii_uppercase + string.ascii_lowercase


def _check_tensor(owner, name, value):
    if not isinstance(value, _C.Tensor):
        raise KilnTypeError(f"{owner}: expected {name} to be a kiln.Tensor, got "
                            f"{type(value).__name__}")


def _check_1d(owner, name, value):
    _check_tensor(owner, name, value)
    if value.ndim != 1:
        raise ShapeError(f"{owner}: expected {name} to be a 1-d tensor, got a {value.ndim}-d one "
                         f"of shape {list(value.shape)}")


def _int_list(owner, name, value):
    """``value`` (an int or a sequence of ints) as a list of ints; a KilnTypeError otherwise."""
    if as_int(value) is not None:
        return [as_int(value)]
    if not isinstance(value, (list, tuple)):
        raise KilnTypeError(f"{owner}: {name} must be an int or a sequence of ints, got "
                            f"{type(value).__name__} {value!r}")
    return [checked_int(owner, f"each of {name}", v) for v in value]


def _dim_list(owner, name, value, ndim):
    """The dims ``value`` names (an int or a sequence of ints), wrapped; a repeated one is a
    KilnValueError."""
    dims = [wrap_dim(owner, name, d, ndim) for d in _int_list(owner, name, value)]
    if len(set(dims)) != len(dims):
        raise KilnValueError(f"{owner}: a dim appears more than once in {name} {value!r}")
    return dims


# ------------------------------------------------------------------------------------------------
# einsum


def _parse_term(term, where):
    """A term of the equation as a list of labels: letters, and _ELLIPSIS at most once."""
    labels, k = [], 0
    while k < len(term):
        if term.startswith(_ELLIPSIS, k):
            if _ELLIPSIS in labels:
                raise KilnValueError(f"einsum: {where} has more than one ellipsis ('...')")
            labels.append(_ELLIPSIS)
            k += len(_ELLIPSIS)
        elif term[k].isascii() and term[k].isalpha():
            labels.append(term[k])
            k += 1
        else:
            raise KilnValueError(f"einsum: {where} has {term[k]!r} in {term!r}; expected "
                                 f"subscripts in [a-zA-Z] and at most one '...'")
    return labels


def _sublist_term(sublist, where):
    """A sublist of einsum's sublist form as the equation's term: PyTorch's letters for its ints
    (0-25 'A'-'Z', 26-51 'a'-'z', so that their order is the ints' order) and '...' for
    Ellipsis. A range or a 1-d NumPy array of ints is a sublist too, as PyTorch takes them."""
    numpy_vector = getattr(sublist, "ndim", None) == 1 and not isinstance(sublist, _C.Tensor)
    if not (isinstance(sublist, (list, tuple, range)) or numpy_vector):
        raise KilnTypeError(f"einsum: expected {where} to be a list of ints in [0, 52) and "
                            f"Ellipsis, got {type(sublist).__name__} {sublist!r}")
    term = ""
    for label in sublist:
        if label is Ellipsis:
            term += _ELLIPSIS
            continue
        number = as_int(label)
        if number is None:
            raise KilnTypeError(f"einsum: expected {where} to hold ints in [0, 52) and "
                                f"Ellipsis, got {type(label).__name__} {label!r} in {sublist!r}")
        if not 0 <= number < len(_SUBLIST_LETTERS):
            raise KilnValueError(f"einsum: expected the subscripts of {where} to be in [0, 52), "
                                 f"got {number} in {sublist!r}")
        term += _SUBLIST_LETTERS[number]
    return term


def _from_sublists(args):
    """The equation and the operands of einsum's sublist form, ``args`` = (op1, sublist1, op2,
    sublist2, ..., [sublist_out]): an odd count ends with the output's sublist."""
    if len(args) % 2 and isinstance(args[-1], _C.Tensor):
        raise KilnTypeError(f"einsum: operand {len(args) // 2} has no sublist; expected "
                            f"einsum(op1, sublist1, op2, sublist2, ..., [sublist_out]) in the "
                            f"sublist form, got {len(args)} argument(s)")
    pairs = len(args) // 2
    equation = ",".join(_sublist_term(args[2 * k + 1], f"the sublist of operand {k}")
                        for k in range(pairs))
    if len(args) % 2:
        equation += "->" + _sublist_term(args[-1], "the output sublist")
    return equation, args[0:2 * pairs:2]


def _parse_equation(equation, operands):
    """The labels of each operand and of the output, an ellipsis expanded to one integer label
    per dimension it covers (right-aligned across operands, so that they broadcast)."""
    if not isinstance(equation, str):
        raise KilnTypeError(f"einsum: expected the equation to be a str (or a kiln.Tensor, "
                            f"the first operand of the sublist form), got "
                            f"{type(equation).__name__}")
    lhs, arrow, rhs = equation.replace(" ", "").partition("->")
    if "->" in rhs:
        raise KilnValueError(f"einsum: expected at most one '->' in {equation!r}")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise KilnValueError(f"einsum: the equation {equation!r} has {len(terms)} operand "
                             f"term(s), got {len(operands)} operand(s)")
    parsed, covered = [], []
    for k, (term, x) in enumerate(zip(terms, operands)):
        _check_tensor("einsum", f"operand {k}", x)
        labels = _parse_term(term, f"operand {k}")
        letters = len(labels) - (_ELLIPSIS in labels)
        if letters > x.ndim or (_ELLIPSIS not in labels and letters != x.ndim):
            raise ShapeError(f"einsum: operand {k} has {letters} subscript(s) in the equation "
                             f"but {x.ndim} dimension(s) (shape {list(x.shape)})"
                             + ("" if _ELLIPSIS in labels else " and no ellipsis"))
        parsed.append(labels)
        covered.append(x.ndim - letters)
    width = max(covered, default=0)
    inputs = []
    for labels, count in zip(parsed, covered):
        expanded = []
        for label in labels:
            expanded += list(range(width - count, width)) if label == _ELLIPSIS else [label]
        inputs.append(expanded)
    if arrow:
        output = []
        for label in _parse_term(rhs, "the output"):
            if label == _ELLIPSIS:
                output += list(range(width))
            elif label in output:
                raise KilnValueError(f"einsum: output subscript {label!r} appears more than "
                                     f"once in {equation!r}")
            elif not any(label in labels for labels in inputs):
                raise KilnValueError(f"einsum: output subscript {label!r} does not appear in "
                                     f"any operand of {equation!r}")
            else:
                output.append(label)
    else:
        letters = [label for labels in inputs for label in labels if isinstance(label, str)]
        output = list(range(width)) + sorted(c for c in set(letters) if letters.count(c) == 1)
    return inputs, output


def _check_sizes(inputs, operands):
    """Checks that each label's sizes agree: equal or 1 (which broadcasts) across operands, and
    equal where a label repeats in one operand (a diagonal)."""
    sizes = {}
    for k, (labels, x) in enumerate(zip(inputs, operands)):
        own = {}
        for label, size in zip(labels, x.shape):
            if own.setdefault(label, size) != size:
                raise ShapeError(f"einsum: subscript {label!r} is repeated in operand {k} with "
                                 f"sizes {own[label]} and {size}; a diagonal needs equal sizes")
        for label, size in own.items():
            seen = sizes.setdefault(label, size)
            if size != seen and 1 not in (size, seen):
                name = "'...'" if isinstance(label, int) else repr(label)
                raise ShapeError(f"einsum: subscript {name} has size {size} in operand {k}, "
                                 f"which does not broadcast with size {seen} in an earlier "
                                 f"operand")
            if seen == 1:
                sizes[label] = size


def _prepared(x, labels, needed):
    """Operand ``x`` with each repeated label reduced to its diagonal and the labels not in
    ``needed`` summed; returns it with its labels."""
    labels = list(labels)
    while len(set(labels)) != len(labels):
        first = next(i for i, label in enumerate(labels) if labels.count(label) > 1)
        second = labels.index(labels[first], first + 1)
        # _diagonal puts the diagonal's dimension last.
        x = _diagonal(x, 0, first, second)
        labels = [label for i, label in enumerate(labels) if i not in (first, second)] \
            + [labels[first]]
    unused = [i for i, label in enumerate(labels) if label not in needed]
    if unused:
        x = _mint.sum(x, unused)
        labels = [label for label in labels if label in needed]
    return x, labels


def _arranged(x, labels, order, sizes):
    """``x`` (whose dimensions carry ``labels``) permuted to ``order``, each size-1 dimension
    expanded to its label's size in ``sizes``."""
    x = x.permute([labels.index(label) for label in order])
    target = [sizes[label] for label in order]
    return x.expand(target) if list(x.shape) != target else x


def _count(sizes, labels):
    result = 1
    for label in labels:
        result *= sizes[label]
    return result


def _contracted(a, a_labels, b, b_labels, needed):
    """The product of ``a`` and ``b`` summed over their common labels that are not ``needed``,
    as one batched matrix product [batch, a's own, summed] @ [batch, summed, b's own]; returns
    it with its labels (batch, a's own, b's own)."""
    common = [label for label in a_labels if label in b_labels]
    batch = [label for label in common if label in needed]
    summed = [label for label in common if label not in needed]
    left = [label for label in a_labels if label not in b_labels]
    right = [label for label in b_labels if label not in a_labels]
    # A summed label of size 1 on one side multiplies the other side's sum over that label.
    for label in summed:
        i, j = a_labels.index(label), b_labels.index(label)
        if a.shape[i] == 1 and b.shape[j] != 1:
            b = _mint.sum(b, [j], True)
        elif b.shape[j] == 1 and a.shape[i] != 1:
            a = _mint.sum(a, [i], True)
    sizes = dict(zip(a_labels, a.shape))
    for label, size in zip(b_labels, b.shape):
        if sizes.get(label, 1) == 1:  # _check_sizes checked that the sizes broadcast
            sizes[label] = size
    a = _arranged(a, a_labels, batch + left + summed, sizes)
    b = _arranged(b, b_labels, batch + summed + right, sizes)
    n_batch, n_sum = _count(sizes, batch), _count(sizes, summed)
    product = _mint.bmm(a.reshape([n_batch, _count(sizes, left), n_sum]),
                        b.reshape([n_batch, n_sum, _count(sizes, right)]))
    kept = batch + left + right
    return product.reshape([sizes[label] for label in kept]), kept


def einsum(equation, *operands):
    """einsum(equation, *operands): the Einstein summation that ``equation`` describes over
    ``operands`` (or over one list of them), e.g. ``einsum("bij,bjk->bik", a, b)`` or
    ``einsum("ii", m)``. The sublist form, ``einsum(a, [0, 1], b, [1, 2], [0, 2])`` (the output
    sublist optional, Ellipsis for '...'), is the same as ``einsum("AB,BC->AC", a, b)``; see
    the module's documentation (kiln/mint/_products.py)."""
    if isinstance(equation, _C.Tensor):
        equation, operands = _from_sublists((equation,) + operands)
    elif len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise KilnValueError("einsum: expected at least one operand")
    inputs, output = _parse_equation(equation, operands)
    _check_sizes(inputs, operands)
    prepared = []
    for k, (x, labels) in enumerate(zip(operands, inputs)):
        others = {label for j, other in enumerate(inputs) if j != k for label in other}
        prepared.append(_prepared(x, labels, others | set(output)))
    result, labels = prepared[0]
    for k in range(1, len(prepared)):
        needed = {label for later in inputs[k + 1:] for label in later} | set(output)
        result, labels = _contracted(result, labels, *prepared[k], needed)
    return result.permute([labels.index(label) for label in output])


# ------------------------------------------------------------------------------------------------
# Products


def outer(input, vec2):  # noqa: A002  (PyTorch's argument names)
    """outer(input, vec2): the matrix of products ``input[i] * vec2[j]`` of two 1-d tensors, in
    their promoted dtype. ``ger`` is the same function."""
    _check_1d("outer", "input", input)
    _check_1d("outer", "vec2", vec2)
    return input.unsqueeze(1) * vec2


ger = outer


def dot(input, other):  # noqa: A002
    """dot(input, other): the sum of the products of two 1-d tensors of one length and one dtype,
    a 0-d tensor (PyTorch's promotes no dtype either)."""
    _check_1d("dot", "input", input)
    _check_1d("dot", "other", other)
    if input.dtype != other.dtype:
        raise DTypeError(f"dot: expected both vectors to have the same dtype, got "
                         f"{input.dtype.name} and {other.dtype.name}")
    if input.shape[0] != other.shape[0]:
        raise ShapeError(f"dot: expected vectors of the same length, got {input.shape[0]} and "
                         f"{other.shape[0]}")
    return _mint.matmul(input, other)


# ------------------------------------------------------------------------------------------------
# Diagonals


def _diagonal(x, offset, dim1, dim2):
    """The diagonal of ``x`` over its distinct, non-negative dims ``dim1`` and ``dim2``, as its
    last dimension: the square block that holds it, flattened and read with a step of its side
    plus 1 (a view of ``x`` where reshape can make one)."""
    rest = [d for d in range(x.ndim) if d not in (dim1, dim2)]
    y = x.permute(rest + [dim1, dim2])
    rows, cols = y.shape[-2], y.shape[-1]
    first_row, first_col = (0, offset) if offset >= 0 else (-offset, 0)
    length = max(0, min(rows - first_row, cols - first_col))
    y = y.narrow(-2, min(first_row, rows), length).narrow(-1, min(first_col, cols), length)
    y = y.reshape(list(y.shape[:-2]) + [length * length])
    return y.slice(-1, 0, length * length, length + 1)


def diagonal(input, offset=0, dim1=0, dim2=1):  # noqa: A002
    """diagonal(input, offset=0, dim1=0, dim2=1): the elements ``[i, i + offset]`` of the planes
    of dims ``dim1`` and ``dim2`` (above the main diagonal for offset > 0, below for offset < 0)
    as the last dimension, after the other dims in their order."""
    _check_tensor("diagonal", "input", input)
    offset = checked_int("diagonal", "offset", offset)
    first, second = (wrap_dim("diagonal", name, checked_int("diagonal", name, d), input.ndim,
                              scalar_as_1d=False)
                     for name, d in (("dim1", dim1), ("dim2", dim2)))
    if first == second:
        raise KilnValueError(f"diagonal: expected dim1 and dim2 to be different dims, got "
                             f"{dim1} and {dim2} (both dim {first})")
    return _diagonal(input, offset, first, second)


def diag(input, diagonal=0):  # noqa: A002
    """diag(input, diagonal=0): of a 1-d tensor, the square matrix with it on the
    ``diagonal``-th diagonal (above the main one for diagonal > 0) and zeros elsewhere; of a
    2-d tensor, that diagonal as a new 1-d tensor."""
    _check_tensor("diag", "input", input)
    offset = checked_int("diag", "diagonal", diagonal)
    if input.ndim == 2:
        return _tensor_methods._own(input, _diagonal(input, offset, 0, 1))
    if input.ndim != 1:
        raise ShapeError(f"diag: expected a 1-d or 2-d tensor, got a {input.ndim}-d one of "
                         f"shape {list(input.shape)}")
    n = input.shape[0]
    # Each element followed by n zeros, read as rows of n: element i lands in column i. The
    # zeros come from padding, not from a product with an identity, which makes NaN of inf.
    square = _mint.pad(input.unsqueeze(1), [0, n]).flatten().narrow(0, 0, n * n).reshape(n, n)
    if offset == 0:
        return square
    shift = abs(offset)
    # Moved right (offset > 0) or down: pad's (left, right, top, bottom) of the matrix.
    return _mint.pad(square, [shift, 0, 0, shift] if offset > 0 else [0, shift, shift, 0])


# ------------------------------------------------------------------------------------------------
# Rearranging


def tile(input, dims):  # noqa: A002
    """tile(input, dims): ``input`` repeated ``dims[d]`` times along each dim, a new tensor;
    missing leading counts are 1, extra ones add leading dims (``repeat`` with the counts
    completed)."""
    _check_tensor("tile", "input", input)
    counts = _int_list("tile", "dims", dims)
    return input.repeat([1] * (input.ndim - len(counts)) + counts)


def roll(input, shifts, dims=None):  # noqa: A002
    """roll(input, shifts, dims=None): the elements moved ``shifts[k]`` places along
    ``dims[k]`` (ints, or sequences of one length), those past the end coming round to the
    start; with ``dims`` None, along the flattened tensor, reshaped back. A new tensor."""
    _check_tensor("roll", "input", input)
    steps = _int_list("roll", "shifts", shifts)
    if dims is None:
        if len(steps) != 1:
            raise KilnValueError(f"roll: expected one shift when dims is None, got {shifts!r}")
        return roll(input.flatten(), steps, 0).reshape(input.shape)
    axes = [wrap_dim("roll", "dims", d, input.ndim, scalar_as_1d=False)
            for d in _int_list("roll", "dims", dims)]
    if len(steps) != len(axes):
        raise KilnValueError(f"roll: expected as many shifts as dims, got shifts={shifts!r} and "
                             f"dims={dims!r}")
    result = input
    for step, axis in zip(steps, axes):
        size = input.shape[axis]
        if size:
            step %= size
            # cat copies even for a shift of 0, so the result never aliases the input.
            result = _mint.cat([result.narrow(axis, size - step, step),
                                result.narrow(axis, 0, size - step)], axis)
    return result


def _counts(repeats, size, axis):
    """A tensor of repeats as a NumPy array of counts (one, or one per slice)."""
    if repeats.dtype.is_floating_point or repeats.dtype == _C.dtype.bool:
        raise DTypeError(f"repeat_interleave: expected an integer tensor of repeats, got "
                         f"{repeats.dtype.name}")
    if repeats.ndim > 1 or repeats.numel() not in (1, size):
        raise ShapeError(f"repeat_interleave: expected repeats to hold one count, or one per "
                         f"slice along dim {axis} ({size}), got shape {list(repeats.shape)}")
    if _C.jit.is_tracing():
        raise KilnTypeError("repeat_interleave: a tensor of repeats sets the result's shape by "
                            "its values, which a kiln.jit graph cannot follow (they would be read "
                            "once, at the trace, and a later change not seen): pass an int, or "
                            "call it outside the jitted function")
    counts = repeats.numpy().reshape(-1).astype(np.int64)
    if (counts < 0).any():
        raise KilnValueError(f"repeat_interleave: expected repeats >= 0, got "
                             f"{counts.tolist()}")
    return counts


def _check_output_size(output_size, total, axis):
    if output_size is not None and checked_int("repeat_interleave", "output_size",
                                               output_size) != total:
        raise KilnValueError(f"repeat_interleave: output_size is {output_size}, but the repeats "
                             f"give {total} along dim {axis}")


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):  # noqa: A002
    """repeat_interleave(input, repeats, dim=None, *, output_size=None): each slice along
    ``dim`` (each element of the flattened tensor when None) repeated in place ``repeats``
    times (an int or a tensor of one count), or ``repeats[i]`` times (a 1-d integer tensor of
    one count per slice). ``repeat_interleave(counts)`` repeats ``arange(len(counts))``.
    ``output_size``, the result's size along ``dim``, is checked when given."""
    _check_tensor("repeat_interleave", "input", input)
    if repeats is None:
        _check_1d("repeat_interleave", "repeats", input)
        return repeat_interleave(_mint.arange(input.shape[0]), input, output_size=output_size)
    x = input.flatten() if dim is None else input
    axis = 0 if dim is None else wrap_dim(
        "repeat_interleave", "dim", checked_int("repeat_interleave", "dim", dim), x.ndim,
        scalar_as_1d=False)
    size = x.shape[axis]
    if isinstance(repeats, _C.Tensor):
        counts = _counts(repeats, size, axis)
        if counts.size != 1:
            index = np.repeat(np.arange(size, dtype=np.int64), counts)
            _check_output_size(output_size, index.size, axis)
            return _mint.index_select(x, axis, _C.tensor(index))
        repeats = int(counts[0])
    else:
        repeats = checked_int("repeat_interleave", "repeats", repeats, low=0)
    _check_output_size(output_size, size * repeats, axis)
    shape = list(x.shape)
    # A new dim after ``axis``, expanded to ``repeats`` and merged into it.
    grown = x.unsqueeze(axis + 1).expand(shape[:axis + 1] + [repeats] + shape[axis + 1:])
    # A count of 1 reshapes back to a view of ``input``.
    result = grown.reshape(shape[:axis] + [size * repeats] + shape[axis + 1:])
    return _tensor_methods._own(input, result)


def movedim(input, source, destination):  # noqa: A002
    """movedim(input, source, destination): the dims ``source`` (an int or a sequence) moved to
    the positions ``destination`` (as many), the others keeping their order in the rest; a view.
    ``moveaxis`` is the same function."""
    _check_tensor("movedim", "input", input)
    sources = _dim_list("movedim", "source", source, input.ndim)
    targets = _dim_list("movedim", "destination", destination, input.ndim)
    if len(sources) != len(targets):
        raise KilnValueError(f"movedim: expected as many destination dims as source dims, got "
                             f"source={source!r} and destination={destination!r}")
    if input.ndim == 0:
        return input.permute([])
    order = [None] * input.ndim
    for s, d in zip(sources, targets):
        order[d] = s
    others = iter(d for d in range(input.ndim) if d not in sources)
    return input.permute([next(others) if d is None else d for d in order])


moveaxis = movedim


# ------------------------------------------------------------------------------------------------
# Grids and index factories


def _grid_operands(owner, tensors):
    """The tensors of meshgrid or cartesian_prod (as arguments or one sequence), 0-d or 1-d and
    of one dtype."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if not tensors:
        raise KilnValueError(f"{owner}: expected at least one tensor")
    for k, x in enumerate(tensors):
        _check_tensor(owner, f"tensor {k}", x)
        if x.ndim > 1:
            raise ShapeError(f"{owner}: expected 0-d or 1-d tensors, got tensor {k} of shape "
                             f"{list(x.shape)}")
        if x.dtype != tensors[0].dtype:
            raise DTypeError(f"{owner}: expected tensors of one dtype, got {tensors[0].dtype.name} "
                             f"and {x.dtype.name} (tensor {k})")
    return tensors


def meshgrid(*tensors, indexing="ij"):
    """meshgrid(*tensors, indexing="ij"): for N 0-d or 1-d tensors of one dtype, N tensors of
    the grid's shape (their lengths in order; the first two swapped for indexing "xy"), the
    k-th varying with tensor k along its dim (expanded views)."""
    tensors = _grid_operands("meshgrid", tensors)
    if indexing not in ("ij", "xy"):
        raise KilnValueError(f"meshgrid: expected indexing 'ij' or 'xy', got {indexing!r}")
    axes = list(range(len(tensors)))
    if indexing == "xy" and len(axes) > 1:
        axes[0], axes[1] = 1, 0
    shape = [1] * len(tensors)
    for x, axis in zip(tensors, axes):
        shape[axis] = x.numel()
    grids = []
    for x, axis in zip(tensors, axes):
        line = [1] * len(tensors)
        line[axis] = -1
        grids.append(x.reshape(line).expand(shape))
    return tuple(grids)


def cartesian_prod(*tensors):
    """cartesian_prod(*tensors): the [n, N] tensor of every N-tuple of elements of the N 1-d
    tensors, the last varying fastest; of one tensor, that tensor."""
    tensors = _grid_operands("cartesian_prod", tensors)
    for k, x in enumerate(tensors):
        if x.ndim != 1:
            raise ShapeError(f"cartesian_prod: expected 1-d tensors, got tensor {k} of shape "
                             f"{list(x.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    return _mint.stack([grid.flatten() for grid in meshgrid(*tensors, indexing="ij")], 1)


def _triangle_indices(owner, select, row, col, offset, dtype, device):
    row = checked_int(owner, "row", row, low=0)
    col = checked_int(owner, "col", col, low=0)
    offset = checked_int(owner, "offset", offset)
    if not isinstance(dtype, _C.dtype) or dtype.is_floating_point or dtype == _C.dtype.bool:
        raise DTypeError(f"{owner}: expected an integer dtype, got {dtype!r}")
    return _C.tensor(np.stack(select(row, offset, col)).reshape(2, -1), dtype=dtype,
                     device=device)


def tril_indices(row, col, offset=0, *, dtype=_C.dtype.int64, device=None):
    """tril_indices(row, col, offset=0): the [2, n] row and column indices of the lower
    triangle of a row x col matrix (its elements on and below the ``offset``-th diagonal), in
    row-major order."""
    return _triangle_indices("tril_indices", np.tril_indices, row, col, offset, dtype, device)


def triu_indices(row, col, offset=0, *, dtype=_C.dtype.int64, device=None):
    """triu_indices(row, col, offset=0): the [2, n] row and column indices of the upper
    triangle of a row x col matrix (its elements on and above the ``offset``-th diagonal), in
    row-major order."""
    return _triangle_indices("triu_indices", np.triu_indices, row, col, offset, dtype, device)


def _tile_method(self, *dims):
    """tile(*dims) or tile(dims): kiln.mint.tile of this tensor."""
    return tile(self, dims[0] if len(dims) == 1 else list(dims))


for _name, _function in (("outer", outer), ("ger", outer), ("dot", dot), ("diag", diag),
                         ("diagonal", diagonal), ("roll", roll),
                         ("repeat_interleave", repeat_interleave), ("movedim", movedim),
                         ("moveaxis", movedim), ("tile", _tile_method)):
    setattr(_C.Tensor, _name, _function)
del _name, _function
