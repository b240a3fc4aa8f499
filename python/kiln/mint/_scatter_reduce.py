"""PyTorch's ``scatter_reduce`` composed of kiln.mint ops in Python:

    scatter_reduce(input, dim, index, src, reduce, *, include_self=True)

with the Tensor methods ``scatter_reduce`` and ``scatter_reduce_``. Each ``src[i][j]`` (for dim
0) is combined into ``out[index[i][j]][j]`` by ``reduce``: "sum", "prod", "mean", "amax" or
"amin", together with the input's own element there when ``include_self`` (PyTorch's default),
or replacing it otherwise; the elements no index points at keep the input's value. Only the
part of ``src`` of the index's shape is read, as in PyTorch.

How, with the ops Kiln has (Scatter adds, multiplies or writes, and has no gradient for
multiply): "sum" and "mean" are scatters that add (mean divides by the count, rounding toward
-inf for integers, as PyTorch). "prod", "amax" and "amin" group the source elements by target:
a stable sort by index (for amax / amin after one by value, so that each group is in order of
value, NaN last) puts each group in a run; "prod" multiplies along each run in log2(n) rounds
(a segmented Hillis-Steele scan of products, whose gradient is exact where there are zeros),
and the element that ends (amax, prod) or starts (amin) each run is written to its target, the
others to a spare slot that is then dropped. All of it has static shapes, so it traces under
kiln.jit and differentiates through autograd.

- Gradients are PyTorch's: for "amax" and "amin" shared evenly among the elements equal to the
  result (the input's own included with ``include_self``; PyTorch also counts the input's
  element where include_self is False, giving the sources a smaller share, which Kiln does not
  copy); none reaches an infinite element. For "prod" each factor gets the product of the
  others.
- A NaN source makes its target NaN for "amax" and "amin", as in PyTorch.
- Negative indices count from the end, as kiln.mint.scatter's (PyTorch refuses them); an index
  out of range is the Scatter op's KilnIndexError. int32 indices are taken as well as int64.
- 16-bit floats are reduced in float32 and rounded once. Bool tensors take "sum" (any), "prod"
  (all), "amax" and "amin"; "mean" is a DTypeError, as in PyTorch.
"""

from .. import _C
from .. import _tensor_methods
from .._checks import checked_bool, checked_int, wrap_dim
from ..errors import DTypeError, KilnTypeError, KilnValueError, ShapeError
from ._composite import _cast, _widened, _zero_gradient_to

__all__ = ["scatter_reduce"]

Tensor = _C.Tensor
_mint = _C.mint
_REDUCES = ("sum", "prod", "mean", "amax", "amin")
_INDEX_DTYPES = (_C.dtype.int64, _C.dtype.int32)


def _tensor(owner, name, value):
    if not isinstance(value, Tensor):
        raise KilnTypeError(f"{owner}: expected {name} to be a kiln.Tensor, got "
                            f"{type(value).__name__}")
    return value


def _check(owner, input, dim, index, src, reduce, include_self):  # noqa: A002
    """Checks scatter_reduce's arguments; returns dim, non-negative."""
    for name, value in (("input", input), ("index", index), ("src", src)):
        _tensor(owner, name, value)
    if index.dtype not in _INDEX_DTYPES:
        raise DTypeError(f"{owner}: expected an int64 or int32 index, got {index.dtype.name}")
    if src.dtype != input.dtype:
        raise DTypeError(f"{owner}: expected src of the input's dtype {input.dtype.name}, got "
                         f"{src.dtype.name} (as PyTorch; convert it with "
                         f"src.to(kiln.{input.dtype.name}))")
    if reduce not in _REDUCES:
        raise KilnValueError(f"{owner}: expected reduce to be one of {list(_REDUCES)}, got "
                             f"{reduce!r}")
    checked_bool(owner, "include_self", include_self)
    if input.dtype == _C.dtype.bool and reduce == "mean":
        raise DTypeError(f"{owner}: reduce 'mean' needs a numeric tensor, got bool")
    if not input.ndim == index.ndim == src.ndim:
        raise ShapeError(f"{owner}: expected input, index and src to have the same number of "
                         f"dims, got shapes {list(input.shape)}, {list(index.shape)} and "
                         f"{list(src.shape)}")
    dim = wrap_dim(owner, "dim", checked_int(owner, "dim", dim), input.ndim)
    for d, (i, s, x) in enumerate(zip(index.shape, src.shape, input.shape)):
        if i > s or (d != dim and i > x):
            raise ShapeError(f"{owner}: expected index of shape {list(index.shape)} to be no "
                             f"larger than src {list(src.shape)} in each dim, and than input "
                             f"{list(input.shape)} in each dim but {dim}")
    return dim


def _runs(key, dim):
    """Where each run of equal (sorted) keys along ``dim`` starts and ends: two bool tensors."""
    count = key.shape[dim]
    differs = key.narrow(dim, 1, count - 1) != key.narrow(dim, 0, count - 1)
    edge = _mint.ones([1 if d == dim else n for d, n in enumerate(key.shape)],
                      dtype=_C.dtype.bool)
    return _mint.cat([edge, differs], dim), _mint.cat([differs, edge], dim)


def _run_products(values, key, dim):
    """The products along each run of equal keys, inclusive: a segmented Hillis-Steele scan.
    Where a position and the one ``step`` before are in one run, the earlier's product
    multiplies in; elsewhere the factor is 1 (not a where() on the product: its other branch
    would send NaN gradients from inf)."""
    one = True if values.dtype == _C.dtype.bool else 1
    count, step = values.shape[dim], 1
    while step < count:
        kept = count - step
        same = key.narrow(dim, step, kept) == key.narrow(dim, 0, kept)
        factor = _mint.where(same, values.narrow(dim, 0, kept), one)
        values = _mint.cat([values.narrow(dim, 0, step), values.narrow(dim, step, kept) * factor],
                           dim)
        step *= 2
    return values


def _write_chosen(like, dim, key, chosen, values):
    """A tensor of ``like``'s shape and dtype holding ``values[k]`` at ``key[k]`` along ``dim``
    where ``chosen`` (one element per run) holds, zeros elsewhere. The others are written to a
    spare slot past the end, dropped after: one writer per target, so that the Scatter's
    gradient (a gather) reaches the chosen element only."""
    size = like.shape[dim]
    spare = [size + 1 if d == dim else n for d, n in enumerate(like.shape)]
    target = _mint.where(chosen, key, size)
    written = _mint.scatter(_mint.zeros(spare, dtype=like.dtype), dim, target, values)
    return written.narrow(dim, 0, size)


def _extremes(x, s, idx, dim, touched, include_self, maximum):
    """amax / amin: the value of each target, computed without gradient."""
    x, s = x.detach(), s.detach()
    by_value = _mint.sort(s, dim).indices  # ascending, NaN last; sort is stable
    by_index = _mint.sort(_mint.gather(idx, dim, by_value), dim).indices
    order = _mint.gather(by_value, dim, by_index)
    key = _mint.gather(idx, dim, order)
    starts, ends = _runs(key, dim)
    chosen = _write_chosen(x, dim, key, ends if maximum else starts,
                           _mint.gather(s, dim, order))
    if include_self:
        chosen = (_mint.maximum if maximum else _mint.minimum)(x, chosen)
    result = _mint.where(touched, chosen, x)
    if x.dtype.is_floating_point:
        nan = _mint.scatter(_mint.zeros(x.shape, dtype=_C.dtype.bool), dim, idx, s != s, "add")
        result = _mint.masked_fill(result, nan, float("nan"))
    return result


def _finite(x):
    values = x.detach()
    return values - values == 0  # inf - inf and NaN - NaN are NaN


def _shared_gradient(result, x, s, idx, dim, touched, include_self):
    """``result`` (amax / amin, no gradient) with PyTorch's gradient added: each element equal
    to its target's result (and finite) gets an even share. The added term is +0.0 exactly
    (x.detach() - x where x is finite), so the values are unchanged, -0.0 and NaN included."""
    dtype = result.dtype
    src_hit = (s.detach() == _mint.gather(result, dim, idx)) & _finite(s)
    count = _mint.scatter(_mint.zeros(x.shape, dtype=dtype), dim, idx, src_hit.to(dtype), "add")
    if include_self:
        self_hit = touched & (x.detach() == result) & _finite(x)
        count = count + self_hit.to(dtype)
    share = 1.0 / _mint.masked_fill(count, count == 0, 1.0)
    zero = _mint.where(src_hit, s.detach(), 0.0) - _mint.where(src_hit, s, 0.0)
    term = _mint.scatter(_mint.zeros(x.shape, dtype=dtype), dim, idx,
                         zero * _mint.gather(share, dim, idx), "add")
    if include_self:
        term = term + (_mint.where(self_hit, x.detach(), 0.0) - _mint.where(self_hit, x, 0.0)) \
            * share
    return _mint.where(touched, result - term, x)


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):  # noqa: A002
    """scatter_reduce(input, dim, index, src, reduce, *, include_self=True): a copy of
    ``input`` with each ``src`` element combined into the element ``index`` points at along
    ``dim`` by ``reduce`` ("sum", "prod", "mean", "amax" or "amin"), with the input's own
    element when ``include_self``, instead of it otherwise. See the module's documentation
    (kiln/mint/_scatter_reduce.py)."""
    owner = "scatter_reduce"
    dim = _check(owner, input, dim, index, src, reduce, include_self)
    if input.ndim == 0:
        return scatter_reduce(input.reshape(1), 0, index.reshape(1), src.reshape(1), reduce,
                              include_self=include_self).reshape(())
    if index.numel() == 0:  # nothing scattered: src's gradient is zeros
        return _zero_gradient_to(input.clone(), src)
    dtype = input.dtype
    source = src
    for d, n in enumerate(index.shape):
        if source.shape[d] != n:
            source = source.narrow(d, 0, n)
    size = input.shape[dim]
    idx = index.to(_C.dtype.int64)
    idx = _mint.where(idx < 0, idx + size, idx)
    touched = _mint.scatter(_mint.zeros(input.shape, dtype=_C.dtype.bool), dim, idx, True)
    x, s = _widened(input), _widened(source)
    if reduce in ("sum", "mean"):
        base = x if include_self else _mint.masked_fill(x, touched, 0)
        result = _mint.scatter(base, dim, idx, s, "add")
        if reduce == "mean":
            count = _mint.scatter((_mint.ones if include_self else _mint.zeros)(
                x.shape, dtype=x.dtype), dim, idx, 1, "add")
            count = _mint.masked_fill(count, count == 0, 1)
            result = (result / count if x.dtype.is_floating_point
                      else _mint.floor_divide(result, count))
    elif reduce == "prod":
        order = _mint.sort(idx, dim).indices
        key = _mint.gather(idx, dim, order)
        products = _run_products(_mint.gather(s, dim, order), key, dim)
        written = _write_chosen(x, dim, key, _runs(key, dim)[1], products)
        result = _mint.where(touched, x * written if include_self else written, x)
    else:
        result = _extremes(x, s, idx, dim, touched, include_self, reduce == "amax")
        if x.dtype.is_floating_point and (x.requires_grad or s.requires_grad):
            result = _shared_gradient(result, x, s, idx, dim, touched, include_self)
    return _cast(result, dtype)


def scatter_reduce_(self, dim, index, src, reduce, *, include_self=True):
    """``scatter_reduce`` written into this tensor; returns it."""
    before = _tensor_methods._before_write(self, src)
    written = scatter_reduce(before, dim, index, src, reduce, include_self=include_self)
    return _tensor_methods._write(self, written, "scatter_reduce_")


Tensor.scatter_reduce = scatter_reduce
Tensor.scatter_reduce_ = scatter_reduce_
