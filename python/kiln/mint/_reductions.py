"""PyTorch's reductions and scans that Kiln composes of kiln.mint ops in Python, with PyTorch's
names, argument order and defaults:

    var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None)
    std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None)
    median(input)    median(input, dim, keepdim=False)  -> (values, indices)
    count_nonzero(input, dim=None)      logcumsumexp(input, dim)
    cummax(input, dim) -> (values, indices)    cummin(input, dim) -> (values, indices)
    diff(input, n=1, dim=-1, prepend=None, append=None)

and the Tensor methods PyTorch has for them (``median``, ``count_nonzero``, ``logcumsumexp``,
``cummax``, ``cummin``, ``diff``; PyTorch has no ``var_mean`` method). They differentiate through
autograd and trace under kiln.jit. The (values, indices) pairs are kiln.mint.ValuesIndices, the
named tuple of max, sort and topk.

- ``var_mean`` and ``std_mean`` return the plain tuple (var or std, mean) of kiln.mint.var /
  std and mean, with their arguments: ``correction`` (1 by default) or PyTorch's older
  ``unbiased``, which may also come first (``var_mean(x, False)``). As kiln.mint.var, they take
  integer inputs (results of the default dtype), where PyTorch refuses them.
- ``median`` is the lower of the two middle values for an even count, as PyTorch's; a NaN
  makes it NaN (with the index of the first NaN). The values are gathered at the indices, so the
  gradient goes to the chosen element, as in PyTorch. Among equal values the index is the one
  a stable sort puts in the middle (PyTorch names no rule). The median of no elements is NaN for
  floats, and a KilnValueError for integers (PyTorch returns the dtype's lowest value); along
  an empty dim it is a KilnIndexError, as in PyTorch. Bool inputs are refused, as in PyTorch.
- ``cummax`` and ``cummin`` follow PyTorch's ties and NaN: an element equal to the running
  extreme takes over its index, and a NaN becomes the extreme from there on (each later NaN
  taking over the index). They run log2(n) rounds of elementwise steps (a Hillis-Steele scan
  of (value, index) pairs; there is no kernel of their own); the values are gathered at the
  indices, so the gradient goes to those elements, as in PyTorch.
- ``logcumsumexp`` is a running sum of exp(x - m) rescaled whenever the running maximum m grows:
  one linear scan (kiln.mint.linear_scan) whose partial sums stay in [1, k + 1], so that
  neither large nor very negative inputs underflow or overflow. Floating-point inputs only, as
  PyTorch's; 16-bit floats are computed in float32 and rounded once.
- ``diff`` takes the n-th forward difference along ``dim`` (``!=`` for bool, as PyTorch's
  logical xor); ``prepend`` and ``append`` have the input's number of dims and its sizes but
  along ``dim``, and are joined to it first (the dtypes promote, as torch.cat's).
"""

from .. import _C
from .._checks import checked_bool, checked_int, wrap_dim
from ..errors import DTypeError, KilnIndexError, KilnTypeError, KilnValueError, ShapeError
from ._composite import _cast, _widened
from ._indexing_ops import _dim, _tensor

__all__ = ["var_mean", "std_mean", "median", "count_nonzero", "logcumsumexp", "cummax",
           "cummin", "diff"]

Tensor = _C.Tensor
_mint = _C.mint
ValuesIndices = _mint.ValuesIndices


def _isnan(x):
    return x != x


# ------------------------------------------------------------------------------------------------
# var_mean, std_mean


def _spread_mean(owner, spread, input, dim, unbiased, keepdim, correction):  # noqa: A002
    _tensor(owner, "input", input)
    if isinstance(dim, bool):  # var_mean(input, unbiased), PyTorch's older overload
        if unbiased is not None:
            raise KilnTypeError(f"{owner}: got unbiased twice (a bool in place of dim, and "
                                f"unbiased={unbiased!r})")
        dim, unbiased = None, dim
    checked_bool(owner, "keepdim", keepdim)
    return (spread(input, dim, unbiased, keepdim, correction=correction),
            _mint.mean(input, dim, keepdim))


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):  # noqa: A002
    """var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None): the tuple
    (kiln.mint.var(...), kiln.mint.mean(...)) over ``dim`` (None: all), the variance with
    divisor N - correction (correction 1 unless given, 0 for unbiased=False)."""
    return _spread_mean("var_mean", _mint.var, input, dim, unbiased, keepdim, correction)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):  # noqa: A002
    """std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None): the tuple
    (kiln.mint.std(...), kiln.mint.mean(...)) over ``dim``, as var_mean."""
    return _spread_mean("std_mean", _mint.std, input, dim, unbiased, keepdim, correction)


# ------------------------------------------------------------------------------------------------
# median


def _median_along(input, dim, keepdim):  # noqa: A002
    """median(input, dim, keepdim) for a tensor of at least 1 dim and a non-negative dim."""
    size = input.shape[dim]
    if size == 0:
        raise KilnIndexError(f"median: expected reduction dim {dim} to have a non-zero size, "
                             f"got shape {list(input.shape)}")
    # A stable sort puts NaN last, in their order: the first NaN is at size - (NaN count).
    order = _mint.sort(input.detach(), dim).indices
    position = _mint.full([1] * input.ndim, (size - 1) // 2, dtype=_C.dtype.int64)
    if input.dtype.is_floating_point:
        nans = _mint.sum(_isnan(input.detach()), dim, True)
        position = _mint.where(nans > 0, size - nans, position)
    shape = list(input.shape)
    shape[dim] = 1
    indices = _mint.gather(order, dim, position.expand(shape))
    values = _mint.gather(input, dim, indices)
    if not keepdim:
        values, indices = values.squeeze(dim), indices.squeeze(dim)
    return ValuesIndices(values, indices)


def median(input, dim=None, keepdim=False):  # noqa: A002
    """median(input): the median of all elements, a 0-d tensor; median(input, dim,
    keepdim=False): the named tuple (values, indices) of the medians along ``dim`` and their
    positions. The lower middle value for an even count; NaN if there is a NaN (see the
    module's documentation)."""
    owner = "median"
    _tensor(owner, "input", input)
    if input.dtype == _C.dtype.bool:
        raise DTypeError("median: expected a numeric tensor, got bool")
    checked_bool(owner, "keepdim", keepdim)
    if dim is None:
        if input.numel() == 0:
            if not input.dtype.is_floating_point:
                raise KilnValueError(f"median: an integer tensor of no elements has no median, "
                                     f"got shape {list(input.shape)}")
            return _mint.full([], float("nan"), dtype=input.dtype)
        return _median_along(input.reshape(-1), 0, False).values
    dim = _dim(owner, dim, input.ndim)
    if input.ndim == 0:
        return ValuesIndices(input.clone(), _mint.zeros([], dtype=_C.dtype.int64))
    return _median_along(input, dim, keepdim)


# ------------------------------------------------------------------------------------------------
# count_nonzero


def count_nonzero(input, dim=None):  # noqa: A002
    """count_nonzero(input, dim=None): the int64 count of the nonzero (true, NaN) elements over
    ``dim`` (an int or a sequence of distinct ints; None: all)."""
    owner = "count_nonzero"
    _tensor(owner, "input", input)
    if dim is None:
        dims = None
    else:
        given = list(dim) if isinstance(dim, (list, tuple)) else [dim]
        dims = [_dim(owner, d, input.ndim) for d in given]
        if len(set(dims)) != len(dims):
            raise KilnValueError(f"{owner}: a dim appears more than once in {dim!r}")
    return _mint.sum(input != 0, dims)


# ------------------------------------------------------------------------------------------------
# Running extremes


def _later_wins(earlier, later, maximum):
    """Where the running extreme of a later stretch replaces an earlier one's: the later is NaN,
    or neither is NaN and the later is at least (cummax) or at most (cummin) as extreme (ties
    move the index on, as in PyTorch)."""
    reaches = later >= earlier if maximum else later <= earlier
    if not earlier.dtype.is_floating_point:
        return reaches
    return _isnan(later) | (~_isnan(earlier) & reaches)


def _running_extreme(owner, input, dim, maximum):  # noqa: A002
    _tensor(owner, "input", input)
    dim = _dim(owner, dim, input.ndim)
    if input.ndim == 0:
        return ValuesIndices(input.clone(), _mint.zeros([], dtype=_C.dtype.int64))
    size = input.shape[dim]
    values = input.detach()
    line = [size if d == dim else 1 for d in range(input.ndim)]
    indices = _mint.arange(size).reshape(line).expand(input.shape)
    # Hillis-Steele: after the round of step s, each position holds the extreme (and its index)
    # of the 2s positions ending at it; the pairs compare as (NaN, value, index), a total order,
    # so the rounds may combine them in any grouping.
    step = 1
    while step < size:
        kept = size - step
        earlier_v, later_v = values.narrow(dim, 0, kept), values.narrow(dim, step, kept)
        earlier_i, later_i = indices.narrow(dim, 0, kept), indices.narrow(dim, step, kept)
        later = _later_wins(earlier_v, later_v, maximum)
        values = _mint.cat([values.narrow(dim, 0, step),
                            _mint.where(later, later_v, earlier_v)], dim)
        indices = _mint.cat([indices.narrow(dim, 0, step),
                             _mint.where(later, later_i, earlier_i)], dim)
        step *= 2
    indices = indices.contiguous()  # not the expanded arange, for a dim of size 1
    return ValuesIndices(_mint.gather(input, dim, indices), indices)


def cummax(input, dim):  # noqa: A002
    """cummax(input, dim): the named tuple (values, indices) of the running maxima along
    ``dim`` and their positions (ties and NaN as PyTorch's: see the module's
    documentation)."""
    return _running_extreme("cummax", input, dim, True)


def cummin(input, dim):  # noqa: A002
    """cummin(input, dim): the named tuple (values, indices) of the running minima along
    ``dim`` and their positions (ties and NaN as PyTorch's)."""
    return _running_extreme("cummin", input, dim, False)


def logcumsumexp(input, dim):  # noqa: A002
    """logcumsumexp(input, dim): ``log(cumsum(exp(input), dim))`` without overflow or
    underflow, of a floating-point tensor (see the module's documentation)."""
    owner = "logcumsumexp"
    _tensor(owner, "input", input)
    if not input.dtype.is_floating_point:
        raise DTypeError(f"{owner}: expected a floating-point tensor, got {input.dtype.name}")
    dim = _dim(owner, dim, input.ndim)
    if input.ndim == 0 or input.shape[dim] == 0:
        return input.clone()
    x = _widened(input)
    # m: the running maximum, a constant for autograd (the result does not depend on it); where
    # it is not finite (all -inf so far, +inf, NaN) it is 0, which leaves those values to exp.
    m = cummax(x.detach(), dim).values
    m = _mint.where(m - m == 0, m, 0.0)
    size = x.shape[dim]
    before = _mint.cat([m.narrow(dim, 0, 1), m.narrow(dim, 0, size - 1)], dim)
    # s[k] = s[k - 1] * exp(m[k - 1] - m[k]) + exp(x[k] - m[k]) = sum_j<=k exp(x[j] - m[k])
    sums = _mint.linear_scan(_mint.exp(before - m), _mint.exp(x - m), dim)
    return _cast(_mint.log(sums) + m, input.dtype)


# ------------------------------------------------------------------------------------------------
# diff


def _joined_part(owner, name, value, input, dim):  # noqa: A002
    """``prepend`` or ``append``, checked against the input: a tensor of its dims and sizes but
    along ``dim``."""
    _tensor(owner, name, value)
    if value.ndim != input.ndim:
        raise ShapeError(f"{owner}: expected {name} to have the input's {input.ndim} dims, got "
                         f"shape {list(value.shape)}")
    for d, (got, want) in enumerate(zip(value.shape, input.shape)):
        if d != dim and got != want:
            raise ShapeError(f"{owner}: expected {name} to have the input's sizes but along dim "
                             f"{dim}, got shape {list(value.shape)} for input "
                             f"{list(input.shape)}")
    return value


def diff(input, n=1, dim=-1, prepend=None, append=None):  # noqa: A002
    """diff(input, n=1, dim=-1, prepend=None, append=None): the n-th forward difference
    ``x[i + 1] - x[i]`` along ``dim`` (``!=`` for bool), after joining ``prepend`` before and
    ``append`` after the input; ``dim`` shrinks by n (to no fewer than 0 elements)."""
    owner = "diff"
    _tensor(owner, "input", input)
    if input.ndim == 0:
        raise ShapeError("diff: expected a tensor of at least 1 dim, got a 0-d tensor")
    n = checked_int(owner, "n", n, low=0)
    dim = wrap_dim(owner, "dim", checked_int(owner, "dim", dim), input.ndim)
    parts = [input]
    if prepend is not None:
        parts.insert(0, _joined_part(owner, "prepend", prepend, input, dim))
    if append is not None:
        parts.append(_joined_part(owner, "append", append, input, dim))
    x = _mint.cat(parts, dim) if len(parts) > 1 else input
    for _ in range(n):
        size = x.shape[dim]
        if size == 0:
            break
        later, earlier = x.narrow(dim, 1, size - 1), x.narrow(dim, 0, size - 1)
        x = later != earlier if x.dtype == _C.dtype.bool else later - earlier
    return x


for _function in (median, count_nonzero, logcumsumexp, cummax, cummin, diff):
    setattr(Tensor, _function.__name__, _function)
del _function
