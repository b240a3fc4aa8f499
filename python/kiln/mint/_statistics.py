"""PyTorch's order statistics, NaN-ignoring reductions, quantiles, histograms, covariance and
trapezoidal integration, composed of kiln.mint ops in Python with PyTorch's names, argument order
and defaults:

    aminmax(input, *, dim=None, keepdim=False) -> (min, max)
    kthvalue(input, k, dim=-1, keepdim=False) -> (values, indices)
    mode(input, dim=-1, keepdim=False) -> (values, indices)
    nanmedian(input)    nanmedian(input, dim, keepdim=False) -> (values, indices)
    nansum(input, dim=None, keepdim=False, *, dtype=None)
    nanmean(input, dim=None, keepdim=False, *, dtype=None)
    quantile(input, q, dim=None, keepdim=False, *, interpolation="linear")
    nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear")
    histc(input, bins=100, min=0, max=0)
    histogram(input, bins, *, range=None, weight=None, density=False) -> (hist, bin_edges)
    cov(input, *, correction=1, fweights=None, aweights=None)      corrcoef(input)
    trapezoid(y, x=None, *, dx=None, dim=-1)  (alias trapz)
    cumulative_trapezoid(y, x=None, *, dx=None, dim=-1)

and the Tensor methods PyTorch has for them (all but the trapezoid functions). They
differentiate through autograd where PyTorch's do and trace under kiln.jit, except where noted.
The (values, indices) pairs are kiln.mint.ValuesIndices, the named tuple of max and sort;
aminmax returns the named tuple MinMax (min, max) and histogram HistBinEdges (hist, bin_edges),
as PyTorch's torch.return_types.

- ``kthvalue``, ``mode`` and ``nanmedian`` sort along ``dim`` (stable, NaN last) and gather the
  values at the chosen indices, so the gradient goes to the chosen element, as in PyTorch.
  Among equal values ``kthvalue`` and ``nanmedian`` take the one a stable sort puts at the
  chosen position, and ``mode`` the last occurrence, as PyTorch's CPU kernel (PyTorch names no
  rule). ``mode`` takes the smallest of the most frequent values, each NaN a value of its own
  (PyTorch's kernel compares with ==, but its results with NaN follow a sort that is not
  NaN-safe); it finds the runs of equal values with a running maximum (log2(n) elementwise
  rounds).
- ``nanmedian`` of a row of NaN only is NaN with index 0 (PyTorch's index there varies); of
  integer inputs it is kiln.mint.median. The median of no elements follows kiln.mint.median
  (NaN for floats, a KilnValueError for integers).
- ``quantile`` and ``nanquantile`` take float32 and float64 inputs and a ``q`` that is a number
  or a 0-d or 1-d tensor of the input's dtype, with PyTorch's ranks (q * (n - 1), computed in
  the input's dtype, "nearest" rounding half to even) and its lerp. A row with a NaN has the
  quantile NaN; nanquantile ranks the non-NaN values (NaN for a row of NaN only). A tensor
  ``q`` is checked to lie in [0, 1] by reading it, which is skipped while kiln.jit traces.
- ``histc`` and ``histogram`` count with a scatter-add into the bins, PyTorch's bin rule:
  histc by linear interpolation between its outer edges (``min`` and ``max``, or the data's
  range when they are equal), histogram by the edges themselves (kiln.mint.searchsorted), the
  last bin closed on the right; NaN and elements outside the range are not counted. Where the
  range comes from the data (histc with min == max, histogram without ``range``) it is read at
  the call, as PyTorch reads it, so those forms are eager only (a KilnTypeError while kiln.jit
  traces); with the range given they trace. Floating-point inputs only, as in PyTorch (histc
  bins 16-bit ones in float32). histogram's result is differentiable in ``weight``, where PyTorch's
  has no gradient.
- ``cov`` and ``corrcoef`` are PyTorch's formulas (rows are variables, columns observations;
  integer inputs give the default dtype). fweights and aweights are checked for negative values and
  a zero sum by reading them, skipped while kiln.jit traces; degrees of freedom <= 0 warn, as in
  PyTorch, and divide by 0.
- ``trapezoid`` and ``cumulative_trapezoid`` take either sample points ``x`` (1-d along
  ``dim``, or broadcasting with y) or a constant spacing ``dx`` (1 by default), as
  PyTorch's; integer inputs give the default dtype, and no samples integrate to 0.
"""

import collections
import math
import warnings

from .. import _C
from .._checks import checked_bool, checked_int, wrap_dim
from ..errors import DTypeError, KilnIndexError, KilnTypeError, KilnValueError, ShapeError
from ._bucketing import searchsorted
from ._composite import _cast, _floating_tensor, _widened, check_real
from ._indexing_ops import _along, _dim, _tensor, lerp
from ._norms import _reduced_dims
from ._products import diagonal, movedim
from ._reductions import cummax, median

__all__ = ["MinMax", "HistBinEdges", "aminmax", "kthvalue", "mode", "nanmedian", "nansum",
           "nanmean", "quantile", "nanquantile", "histc", "histogram", "cov", "corrcoef",
           "trapezoid", "trapz", "cumulative_trapezoid"]

Tensor = _C.Tensor
_mint = _C.mint
ValuesIndices = _mint.ValuesIndices
MinMax = collections.namedtuple("MinMax", ["min", "max"])
HistBinEdges = collections.namedtuple("HistBinEdges", ["hist", "bin_edges"])

_QUANTILE_DTYPES = (_C.dtype.float32, _C.dtype.float64)
_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _isnan(x):
    return x != x


def _refuse_if(owner, bad, message):
    """Raises a KilnValueError "``owner``: ``message``" when the 0-d bool tensor ``bad`` holds.
    Reading it waits for the values (as PyTorch's checks do), which a function kiln.jit traces
    cannot: there the check is skipped."""
    if not _C.jit.is_tracing() and bool(bad.item()):
        raise KilnValueError(f"{owner}: {message}")


def _not_bool(owner, input):  # noqa: A002
    if input.dtype == _C.dtype.bool:
        raise DTypeError(f"{owner}: expected a numeric tensor, got bool")


def _nonempty_dim(owner, input, dim):  # noqa: A002
    if input.shape[dim] == 0:
        raise KilnIndexError(f"{owner}: expected reduction dim {dim} to have a non-zero size, "
                             f"got shape {list(input.shape)}")


def _gathered(input, dim, order, position, keepdim):  # noqa: A002
    """ValuesIndices of the elements of ``input`` at ``position`` (int64, one along ``dim``) in
    the sort ``order`` along ``dim``: the values are gathered from the input, so that the
    gradient goes to those elements."""
    indices = _mint.gather(order, dim, position)
    values = _mint.gather(input, dim, indices)
    if not keepdim:
        values, indices = values.squeeze(dim), indices.squeeze(dim)
    return ValuesIndices(values, indices)


def _scalar_pair(input):  # noqa: A002
    """(values, indices) of a 0-d input, its only element."""
    return ValuesIndices(input.clone(), _mint.zeros([], dtype=_C.dtype.int64))


# ------------------------------------------------------------------------------------------------
# aminmax, kthvalue, mode, nanmedian


def aminmax(input, *, dim=None, keepdim=False):  # noqa: A002  (PyTorch's argument names)
    """aminmax(input, *, dim=None, keepdim=False): the named tuple (min, max) of kiln.mint.amin
    and amax over ``dim`` (None: all elements; then ``keepdim`` keeps every dim as 1). NaN
    propagates; no elements is a KilnValueError, as in PyTorch."""
    owner = "aminmax"
    _tensor(owner, "input", input)
    checked_bool(owner, "keepdim", keepdim)
    if dim is None:
        if input.numel() == 0:
            raise KilnValueError(f"{owner}: cannot reduce a tensor of no elements (shape "
                                 f"{list(input.shape)}): min and max have no identity")
        low, high = _mint.amin(input), _mint.amax(input)
        if keepdim:
            low, high = low.reshape([1] * input.ndim), high.reshape([1] * input.ndim)
        return MinMax(low, high)
    dim = _dim(owner, dim, input.ndim)
    if input.ndim:
        _nonempty_dim(owner, input, dim)
    return MinMax(_mint.amin(input, dim, keepdim), _mint.amax(input, dim, keepdim))


def kthvalue(input, k, dim=-1, keepdim=False):  # noqa: A002
    """kthvalue(input, k, dim=-1, keepdim=False): the named tuple (values, indices) of the k-th
    smallest element along ``dim`` (k from 1; NaN above every number) and its position."""
    owner = "kthvalue"
    _tensor(owner, "input", input)
    _not_bool(owner, input)
    checked_bool(owner, "keepdim", keepdim)
    dim = _dim(owner, dim, input.ndim)
    k = checked_int(owner, "k", k)
    size = input.shape[dim] if input.ndim else 1
    if not 1 <= k <= size:
        raise KilnIndexError(f"{owner}: expected k in [1, {size}] (the size of dim {dim}), got "
                             f"{k}")
    if input.ndim == 0:
        return _scalar_pair(input)
    shape = list(input.shape)
    shape[dim] = 1
    position = _mint.full(shape, k - 1, dtype=_C.dtype.int64)
    return _gathered(input, dim, _mint.argsort(input.detach(), dim), position, keepdim)


def mode(input, dim=-1, keepdim=False):  # noqa: A002
    """mode(input, dim=-1, keepdim=False): the named tuple (values, indices) of the most
    frequent value along ``dim`` (the smallest among equally frequent ones) and the position of
    its last occurrence."""
    owner = "mode"
    _tensor(owner, "input", input)
    checked_bool(owner, "keepdim", keepdim)
    dim = _dim(owner, dim, input.ndim)
    if input.ndim == 0:
        return _scalar_pair(input)
    _nonempty_dim(owner, input, dim)
    size = input.shape[dim]
    ordered, order = _mint.sort(input.detach(), dim)
    positions = _mint.arange(size).reshape(_along(dim, input.ndim, size)).expand(input.shape)
    # Where each run of equal sorted values starts (NaN != NaN: each NaN is a run of its own),
    # carried forward: a position's distance from its run's start grows along the run, so the
    # first largest one ends the first (smallest) of the longest runs, and, the sort being
    # stable, sits at that value's last occurrence.
    first = list(input.shape)
    first[dim] = 1
    later = ordered.narrow(dim, 1, size - 1) != ordered.narrow(dim, 0, size - 1)
    starts = _mint.cat([_mint.ones(first, dtype=_C.dtype.bool), later], dim)
    run_start = cummax(_mint.where(starts, positions, 0), dim).values
    best = _mint.argmax(positions - run_start, dim, True)
    return _gathered(input, dim, order, best, keepdim)


def _nan_median_along(input, dim, keepdim):  # noqa: A002
    """nanmedian(input, dim, keepdim) of a floating-point tensor of at least 1 dim: the lower
    median of each row's non-NaN values, which a stable sort puts first."""
    _nonempty_dim("nanmedian", input, dim)
    order = _mint.argsort(input.detach(), dim)
    counts = _mint.sum(~_isnan(input.detach()), dim, True)
    # A row of NaN only (count 0) takes position 0: NaN, with index 0.
    position = _mint.clamp((counts - 1) // 2, min=0)
    return _gathered(input, dim, order, position, keepdim)


def nanmedian(input, dim=None, keepdim=False):  # noqa: A002
    """nanmedian(input): the median of the non-NaN elements, a 0-d tensor; nanmedian(input,
    dim, keepdim=False): the named tuple (values, indices) of the medians of the non-NaN
    values along ``dim``. The lower middle value for an even count; NaN where all are NaN."""
    owner = "nanmedian"
    _tensor(owner, "input", input)
    _not_bool(owner, input)
    checked_bool(owner, "keepdim", keepdim)
    if not input.dtype.is_floating_point:
        return median(input, dim, keepdim) if dim is not None else median(input)
    if dim is None:
        if input.numel() == 0:
            return _mint.full([], float("nan"), dtype=input.dtype)
        return _nan_median_along(input.reshape(-1), 0, False).values
    dim = _dim(owner, dim, input.ndim)
    if input.ndim == 0:
        return _scalar_pair(input)
    return _nan_median_along(input, dim, keepdim)


# ------------------------------------------------------------------------------------------------
# nansum, nanmean


def _nan_reduction_dims(owner, input, dim, keepdim):  # noqa: A002
    checked_bool(owner, "keepdim", keepdim)
    return None if dim is None else _reduced_dims(owner, input, dim)


def nansum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """nansum(input, dim=None, keepdim=False, *, dtype=None): kiln.mint.sum over ``dim`` (an
    int, a sequence of ints or None for all) with NaN counted as 0, in ``dtype`` if given (the
    input converted first); integer and bool inputs sum to int64. The gradient at NaN is 0."""
    owner = "nansum"
    _tensor(owner, "input", input)
    dims = _nan_reduction_dims(owner, input, dim, keepdim)
    x = input if dtype is None else _cast(input, _C.as_dtype(dtype))
    if x.dtype.is_floating_point:
        x = _mint.masked_fill(x, _isnan(x), 0.0)
    return _mint.sum(x, dims, keepdim)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """nanmean(input, dim=None, keepdim=False, *, dtype=None): the mean of the non-NaN elements
    of a floating-point tensor over ``dim`` (NaN where there are none), PyTorch's
    ``nansum(...) / count of non-NaN``."""
    owner = "nanmean"
    _floating_tensor(owner, "input", input)
    dims = _nan_reduction_dims(owner, input, dim, keepdim)
    counts = _mint.sum(~_isnan(input), dims, keepdim)
    return nansum(input, dim, keepdim, dtype=dtype) / counts


# ------------------------------------------------------------------------------------------------
# quantile, nanquantile


def _quantile_levels(owner, q, dtype):
    """``q`` (a number, or a 0-d or 1-d tensor of ``dtype``) as a 1-d tensor of ``dtype``, and
    whether it was a scalar."""
    if not isinstance(q, Tensor):
        value = check_real(owner, "q", q)
        if not 0 <= value <= 1:
            raise KilnValueError(f"{owner}: expected q in [0, 1], got {value}")
        return _mint.full([1], value, dtype=dtype), True
    if q.ndim > 1:
        raise ShapeError(f"{owner}: expected q to be a number or a 0-d or 1-d tensor, got shape "
                         f"{list(q.shape)}")
    if q.dtype != dtype:
        raise DTypeError(f"{owner}: expected q of the input's dtype {dtype.name}, got "
                         f"{q.dtype.name}")
    levels = q.reshape(-1)
    _refuse_if(owner, ~_mint.all((levels >= 0) & (levels <= 1)),
               "expected the values of q in [0, 1]")
    return levels, q.ndim == 0


def _quantile(owner, input, q, dim, keepdim, interpolation, ignore_nan):  # noqa: A002
    _tensor(owner, "input", input)
    if input.dtype not in _QUANTILE_DTYPES:
        raise DTypeError(f"{owner}: expected a float32 or float64 input, got {input.dtype.name}")
    checked_bool(owner, "keepdim", keepdim)
    if interpolation not in _INTERPOLATIONS:
        raise KilnValueError(f"{owner}: expected interpolation 'linear', 'lower', 'higher', "
                             f"'midpoint' or 'nearest', got {interpolation!r}")
    levels, scalar = _quantile_levels(owner, q, input.dtype)
    if input.numel() == 0:
        raise KilnValueError(f"{owner}: expected a non-empty input, got shape "
                             f"{list(input.shape)}")
    if dim is None:
        x = input.reshape(-1)
    else:
        axis = _dim(owner, dim, input.ndim)
        x = movedim(input.reshape(1) if input.ndim == 0 else input, axis, -1)
    # x: [..., n]; each row's values in order, NaN last (gathered, for the gradient).
    size = x.shape[-1]
    ordered = _mint.gather(x, -1, _mint.argsort(x.detach(), -1))
    nan = _isnan(ordered.detach())
    count = levels.shape[0]
    # ranks: [count, ..., 1], PyTorch's, in the input's dtype.
    levels = levels.reshape([count] + [1] * ordered.ndim)
    if ignore_nan:
        ranks = levels * (_mint.sum(~nan, -1, True) - 1)
        ranks = _mint.where(ranks < 0, 0.0, ranks)  # a row of NaN only: its first, NaN
    else:
        ranks = _mint.where(_mint.any(nan, -1, True), float(size - 1), levels * (size - 1))
    rounding = {"lower": _mint.floor, "higher": _mint.ceil, "nearest": _mint.round}
    if interpolation in rounding:
        ranks = rounding[interpolation](ranks)
    rows = ordered.unsqueeze(0).expand([count] + list(ordered.shape))
    ranks = ranks.expand([count] + list(ordered.shape[:-1]) + [1])
    result = _mint.gather(rows, -1, ranks.to(_C.dtype.int64))
    if interpolation in ("linear", "midpoint"):
        weight = ranks - _mint.floor(ranks) if interpolation == "linear" else 0.5
        above = _mint.gather(rows, -1, _mint.ceil(ranks).to(_C.dtype.int64))
        result = lerp(result, above, weight)
    result = result.squeeze(-1)
    if keepdim and dim is None:
        result = result.reshape([count] + [1] * input.ndim)
    elif keepdim and input.ndim:
        result = result.unsqueeze(axis + 1)
    return result.squeeze(0) if scalar else result


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
    """quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"): the q-th
    quantiles of a float32 or float64 tensor along ``dim`` (None: of all elements), q a number
    or a 0-d or 1-d tensor of levels in [0, 1] (a 1-d q puts its dim first in the result).
    ``interpolation`` between the two nearest ranks: "linear", "lower", "higher", "midpoint"
    or "nearest". NaN where the row has a NaN."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, ignore_nan=False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
    """nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"): quantile of
    each row's non-NaN values (NaN for a row of NaN only)."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, ignore_nan=True)


# ------------------------------------------------------------------------------------------------
# histc, histogram


def _data_range(owner, input, remedy):  # noqa: A002
    """The smallest and the largest element of ``input`` (non-empty) as Python floats, read at
    the call; a KilnTypeError while kiln.jit traces, which cannot read values."""
    if _C.jit.is_tracing():
        raise KilnTypeError(f"{owner}: without a range it bins over the data's range, read from "
                            f"the values, which a function kiln.jit traces cannot do; {remedy}")
    low, high = aminmax(input)
    return float(low.item()), float(high.item())


def _check_finite_range(owner, low, high):
    if not (math.isfinite(low) and math.isfinite(high)):
        raise KilnValueError(f"{owner}: expected a finite range, got [{low}, {high}]")


def _bin_totals(index, inside, weight, bins, dtype):
    """The sum over the elements ``inside`` of their ``weight`` (1 each when None), by their
    bin ``index``: a [bins] tensor of ``dtype``."""
    src = inside.to(dtype) if weight is None else _mint.where(inside, weight, 0.0)
    index = _mint.where(inside, index, 0)
    return _mint.scatter(_mint.zeros(bins, dtype=dtype), 0, index.reshape(-1), src.reshape(-1),
                         reduce="add")


def histc(input, bins=100, min=0, max=0):  # noqa: A002  (PyTorch's names)
    """histc(input, bins=100, min=0, max=0): the counts of the elements of a floating-point
    tensor in ``bins`` equal bins between ``min`` and ``max`` (the data's smallest and largest
    element when they are equal, widened by 1 each way if those are equal too), in the input's
    dtype. Elements outside the range and NaN are not counted. Not differentiable, as
    PyTorch's."""
    owner = "histc"
    dtype = _floating_tensor(owner, "input", input)
    bins = checked_int(owner, "bins", bins, low=1)
    low, high = check_real(owner, "min", min), check_real(owner, "max", max)
    if low == high and input.numel():
        low, high = _data_range(owner, input, "pass min and max")
    if low == high:
        low, high = low - 1, high + 1
    _check_finite_range(owner, low, high)
    if low > high:
        raise KilnValueError(f"{owner}: expected min < max, got min={low} and max={high}")
    x = _widened(input.detach()).reshape(-1)
    lowest = _mint.full([], low, dtype=x.dtype)
    highest = _mint.full([], high, dtype=x.dtype)
    inside = (x >= lowest) & (x <= highest)
    # PyTorch's rule: the bin by linear interpolation in the input's dtype, truncated; the top
    # edge (and what rounds up to it) goes into the last bin.
    spot = ((_mint.where(inside, x, lowest) - lowest) * bins / (highest - lowest))
    index = _mint.clamp(spot.to(_C.dtype.int64), max=bins - 1)
    return _cast(_bin_totals(index, inside, None, bins, x.dtype), dtype)


def _histogram_range(owner, input, range):  # noqa: A002
    """histogram's outer edges: ``range`` (a pair of numbers) or the data's (0 and 1 for no
    elements), finite, in order and widened by 0.5 each way when equal, as PyTorch's."""
    if range is None:
        low, high = ((0.0, 1.0) if input.numel() == 0 else
                     _data_range(owner, input, "pass range=(min, max)"))
    else:
        if not isinstance(range, (tuple, list)) or len(range) != 2:
            raise KilnTypeError(f"{owner}: expected range to be a pair (min, max), got "
                                f"{type(range).__name__} {range!r}")
        low, high = (check_real(owner, "range", bound) for bound in range)
    _check_finite_range(owner, low, high)
    if low > high:
        raise KilnValueError(f"{owner}: expected min <= max in range, got [{low}, {high}]")
    return (low - 0.5, high + 0.5) if low == high else (low, high)


def histogram(input, bins, *, range=None, weight=None, density=False):  # noqa: A002
    """histogram(input, bins, *, range=None, weight=None, density=False): the named tuple
    (hist, bin_edges) of a floating-point tensor's histogram. ``bins`` is a count of equal bins
    over ``range`` (min, max) (by default the data's), or a 1-d tensor of increasing edges of
    the input's dtype. Each element counts ``weight`` (a tensor of the input's shape and dtype)
    or 1 in the bin [edge i, edge i + 1) that holds it, the last bin closed; with ``density``
    the counts are divided by their sum and the bins' widths."""
    owner = "histogram"
    dtype = _floating_tensor(owner, "input", input)
    checked_bool(owner, "density", density)
    if weight is not None:
        _tensor(owner, "weight", weight)
        if weight.dtype != dtype:
            raise DTypeError(f"{owner}: expected weight of the input's dtype {dtype.name}, got "
                             f"{weight.dtype.name}")
        if tuple(weight.shape) != tuple(input.shape):
            raise ShapeError(f"{owner}: expected weight of the input's shape "
                             f"{list(input.shape)}, got {list(weight.shape)}")
        weight = weight.reshape(-1)
    if isinstance(bins, Tensor):
        if range is not None:
            raise KilnTypeError(f"{owner}: range goes with a number of bins; a tensor of edges "
                                f"sets its own range, got range={range!r}")
        if bins.ndim != 1 or bins.shape[0] < 2:
            raise ShapeError(f"{owner}: expected a 1-d tensor of at least 2 bin edges, got "
                             f"shape {list(bins.shape)}")
        if bins.dtype != dtype:
            raise DTypeError(f"{owner}: expected bin edges of the input's dtype {dtype.name}, "
                             f"got {bins.dtype.name}")
        edges = bins.clone()
    else:
        count = checked_int(owner, "bins", bins, low=1)
        low, high = _histogram_range(owner, input, range)
        edges = _mint.linspace(low, high, count + 1, dtype)
    bins_count = edges.shape[0] - 1
    x = input.detach().reshape(-1)
    inside = (x >= edges.narrow(0, 0, 1)) & (x <= edges.narrow(0, bins_count, 1))
    index = _mint.clamp(searchsorted(edges, x, right=True) - 1, max=bins_count - 1)
    hist = _bin_totals(index, inside, weight, bins_count, dtype)
    if density:
        widths = edges.narrow(0, 1, bins_count) - edges.narrow(0, 0, bins_count)
        hist = hist / _mint.sum(hist) / widths
    return HistBinEdges(hist, edges)


# ------------------------------------------------------------------------------------------------
# cov, corrcoef


def _observation_weights(owner, name, weights, observations, integral):
    """fweights (``integral``) or aweights, checked: at most 1-d, one per observation, of an
    integer (not bool) or floating-point dtype, none negative (read: see _refuse_if)."""
    _tensor(owner, name, weights)
    if weights.ndim > 1:
        raise ShapeError(f"{owner}: expected {name} of at most 1 dim, got shape "
                         f"{list(weights.shape)}")
    kind_ok = (weights.dtype.is_floating_point if not integral else
               not weights.dtype.is_floating_point and weights.dtype != _C.dtype.bool)
    if not kind_ok:
        kind = "an integer" if integral else "a floating-point"
        raise DTypeError(f"{owner}: expected {name} of {kind} dtype, got {weights.dtype.name}")
    if weights.numel() != observations:
        raise ShapeError(f"{owner}: expected {name} to have one element per observation "
                         f"({observations}), got {weights.numel()}")
    weights = weights.reshape(-1)
    if observations:
        _refuse_if(owner, _mint.any(weights < 0), f"expected {name} >= 0")
    return weights


def _no_degrees_of_freedom():
    warnings.warn("cov(): degrees of freedom is <= 0; correction should be strictly less than "
                  "the number of observations (the covariance divides by 0)", stacklevel=3)


def cov(input, *, correction=1, fweights=None, aweights=None):  # noqa: A002
    """cov(input, *, correction=1, fweights=None, aweights=None): the covariance matrix of the
    variables in the rows of ``input`` (1-d: one variable; columns are observations), with
    divisor (sum of weights) - correction, observations weighted by the integer frequencies
    ``fweights`` and the floating-point ``aweights`` (PyTorch's and NumPy's formula); squeezed,
    so one variable gives a 0-d tensor. Integer inputs give the default dtype."""
    owner = "cov"
    _tensor(owner, "input", input)
    if input.ndim > 2:
        raise ShapeError(f"{owner}: expected input of at most 2 dims, got shape "
                         f"{list(input.shape)}")
    _not_bool(owner, input)
    correction = checked_int(owner, "correction", correction)
    x = input.reshape(1, -1) if input.ndim < 2 else input
    observations = x.shape[1]
    w = None
    if fweights is not None:
        w = _observation_weights(owner, "fweights", fweights, observations, integral=True)
    if aweights is not None:
        aweights = _observation_weights(owner, "aweights", aweights, observations,
                                        integral=False)
        w = aweights if w is None else w * aweights
    if w is None:
        total, divisor = observations, observations - correction
        if divisor <= 0:
            _no_degrees_of_freedom()
            divisor = 0
        centered = x - _mint.sum(x, 1, True) / total
        return (_mint.matmul(centered, centered.t()) / divisor).squeeze()
    total = _mint.sum(w)
    _refuse_if(owner, total == 0, "the weights sum to zero, which cannot be normalized")
    if aweights is not None and correction != 0:
        divisor = total - correction * _mint.sum(w * aweights) / total
    else:
        divisor = total - correction
    if not _C.jit.is_tracing() and bool((divisor <= 0).item()):
        _no_degrees_of_freedom()
    divisor = _mint.where(divisor <= 0, 0, divisor)
    centered = x - _mint.sum(x * w, 1, True) / total
    return (_mint.matmul(centered, (centered * w).t()) / divisor).squeeze()


def corrcoef(input):  # noqa: A002
    """corrcoef(input): the Pearson correlation coefficients of the variables in the rows of
    ``input`` (at most 2-d), cov(input) divided by the standard deviations and clipped to
    [-1, 1]; one variable gives c / c (1, or NaN for a zero or non-finite variance)."""
    owner = "corrcoef"
    _tensor(owner, "input", input)
    if input.ndim > 2:
        raise ShapeError(f"{owner}: expected input of at most 2 dims, got shape "
                         f"{list(input.shape)}")
    c = cov(input)
    if c.ndim == 0:
        return c / c
    deviation = _mint.sqrt(diagonal(c))
    c = c / deviation.reshape(-1, 1) / deviation.reshape(1, -1)
    return _mint.clamp(c, -1.0, 1.0)


# ------------------------------------------------------------------------------------------------
# trapezoid, cumulative_trapezoid


def _spacing(owner, y, x, dim):
    """The differences of the sample points ``x`` along ``dim``, shaped to broadcast with the
    differences of ``y`` (PyTorch's rule: a 1-d x lies along dim, a shorter one gets leading
    dims of 1)."""
    _tensor(owner, "x", x)
    if x.dtype == _C.dtype.bool:
        raise DTypeError(f"{owner}: expected numeric sample points x, got bool")
    if x.ndim == 1:
        if x.shape[0] != y.shape[dim]:
            raise ShapeError(f"{owner}: expected one x value per sample point ({y.shape[dim]} "
                             f"along dim {dim} of y), got {x.shape[0]}")
        x = x.reshape(_along(dim, y.ndim, x.shape[0]))
    elif x.ndim < y.ndim:
        x = x.reshape([1] * (y.ndim - x.ndim) + list(x.shape))
    return _neighbours(x, dim, _mint.sub)


def _trapezoid_operands(owner, y, x, dx, dim):
    """``dim`` wrapped, and the spacing: dx (a float; 1 when neither is given) or the
    differences of x."""
    _tensor(owner, "y", y)
    if y.dtype == _C.dtype.bool:
        raise DTypeError(f"{owner}: expected numeric samples y, got bool")
    dim = wrap_dim(owner, "dim", checked_int(owner, "dim", dim), y.ndim, scalar_as_1d=False)
    if x is not None and dx is not None:
        raise KilnTypeError(f"{owner}: expected sample points x or a spacing dx, not both")
    if x is not None:
        return dim, _spacing(owner, y, x, dim)
    return dim, 1.0 if dx is None else check_real(owner, "dx", dx)


def _neighbours(t, dim, combine):
    """``combine(t[i + 1], t[i])`` for each pair of neighbours along ``dim`` (none for a size of
    0 or 1)."""
    size = t.shape[dim]
    steps = max(size - 1, 0)
    return combine(t.narrow(dim, min(size, 1), steps), t.narrow(dim, 0, steps))


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """trapezoid(y, x=None, *, dx=None, dim=-1): the integral of the samples ``y`` along
    ``dim`` by the trapezoidal rule, at the sample points ``x`` or with the constant spacing
    ``dx`` (1 when neither is given). No samples integrate to zeros of y's dtype. ``trapz`` is
    the same function."""
    owner = "trapezoid"
    dim, spacing = _trapezoid_operands(owner, y, x, dx, dim)
    size = y.shape[dim]
    if size == 0:
        return _mint.zeros([s for d, s in enumerate(y.shape) if d != dim], dtype=y.dtype)
    if isinstance(spacing, Tensor):
        return _mint.sum(spacing * _neighbours(y, dim, _mint.add), dim) / 2.0
    # PyTorch's form for a constant spacing: dx * (sum - (first + last) / 2).
    ends = (y.narrow(dim, 0, 1) + y.narrow(dim, size - 1, 1)).squeeze(dim)
    return (_mint.sum(y, dim) - ends * 0.5) * spacing


trapz = trapezoid


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """cumulative_trapezoid(y, x=None, *, dx=None, dim=-1): the running integrals of trapezoid
    along ``dim``, one fewer than the samples (the first trapezoid's area, then the first two's,
    ...)."""
    dim, spacing = _trapezoid_operands("cumulative_trapezoid", y, x, dx, dim)
    return _mint.cumsum(spacing / 2.0 * _neighbours(y, dim, _mint.add), dim)


for _function in (aminmax, kthvalue, mode, nanmedian, nansum, nanmean, quantile, nanquantile,
                  histc, histogram, cov, corrcoef):
    setattr(Tensor, _function.__name__, _function)
del _function
