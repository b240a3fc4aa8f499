"""PyTorch's indexing, comparison and math functions that Kiln composes from its ops in Python,
with PyTorch's names, argument order and defaults:

    scatter_add(input, dim, index, src)         index_add(input, dim, index, source, *, alpha=1)
    take_along_dim(input, indices, dim=None)
    index_fill(input, dim, index, value)        masked_select(input, mask)
    nonzero(input, *, as_tuple=False)           argwhere(input)
    where(condition, input=None, other=None, *, out=None)    (where(condition) is nonzero's tuple)
    isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False)    allclose(...)  equal(a, b)
    full_like(input, fill_value, *, dtype=None, requires_grad=False, device=None)
    empty_like(input, *, dtype=None, requires_grad=False, device=None)
    clamp_min(input, min)   clamp_max(input, max)   clip(input, min=None, max=None)  (clamp's alias)
    log10(input)   fix(input, *, out=None) (trunc's alias)   lerp(input, end, weight)
    div(input, other, *, rounding_mode=None, out=None)   cumprod(input, dim, *, dtype=None)
    unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None)

and the Tensor methods PyTorch has for them (installed at the bottom of this module): the same
names as methods, the in-place ``scatter_``, ``scatter_add_``, ``index_add_``, ``index_fill_``,
``clamp_min_``, ``clamp_max_``, ``clip_``, ``fix_`` and ``div_``, and
``rounding_mode=`` on ``Tensor.div``. The in-place ones write through assignment, as
kiln/_tensor_methods.py's do (a tensor that requires grad is refused under autograd).

Being compositions of registered ops, the functions whose result's shape follows the operands'
shapes differentiate through autograd and trace under kiln.jit. ``masked_select``, ``nonzero``,
``argwhere``, ``where(condition)`` and ``unique`` return as many elements as the values decide,
which a trace cannot follow: they are eager only (a KilnTypeError inside a traced function), as
boolean indexing is. ``allclose`` and ``equal`` return a Python bool, read at the call.

- ``scatter_add``, ``index_add`` and ``scatter_`` convert the source to the input's dtype, as
  kiln.mint.scatter does (PyTorch refuses another dtype); negative indices count from the end,
  as kiln.mint.scatter's do, where PyTorch refuses them (index_fill takes them in both).
- ``take_along_dim`` is kiln.mint.gather after broadcasting input and indices against each other
  in every dim but ``dim`` (PyTorch's rule: they have one number of dims); without ``dim`` it
  gathers from the flattened input. int32 indices are taken too (PyTorch: int64 only).
- ``isclose`` computes the error of 16-bit floats in float32, and of integers and bools in
  float64 (PyTorch: float32), so that large integers compare exactly.
- ``div``'s "trunc" and "floor" modes keep integer operands integer (exact, unlike a float
  division): they are kiln.mint.trunc_divide and kiln.mint.floor_divide, whose gradients are
  zero. Both truncate a 16-bit float quotient in float32 and round it once, so that it equals the
  exact truncated quotient wherever the dtype holds that integer.
- ``cumprod`` is kiln.mint.linear_scan(x, b) with b the first element followed by zeros (one
  pass; src/ops/scan.cc, Note [Linear scans]): exact for integers (wrapping as int64); floats
  are multiplied in float64 and rounded once into their dtype, as accurate as PyTorch's (which
  accumulates float32 in double). The gradient is another linear scan, with no division, so
  zeros need no special case (PyTorch's has one).
- ``unique`` always sorts (PyTorch leaves the order to the implementation when ``sorted`` is
  False); each NaN is its own unique value, as PyTorch's.
"""

import functools
import math
import numbers

from .. import _C
from .. import _tensor_methods
from .._checks import checked_bool, checked_int, wrap_dim
from .._numpy import np
from ..errors import DTypeError, KilnIndexError, KilnTypeError, KilnValueError, ShapeError
from ._composite import _cast, _floating_tensor, _widened, check_real, check_same_dtype

__all__ = ["scatter_add", "index_add", "index_fill", "take_along_dim", "masked_select", "nonzero",
           "argwhere", "where", "isclose", "allclose", "equal", "full_like", "empty_like",
           "clamp_min", "clamp_max", "clip", "log10", "fix", "lerp", "div", "cumprod", "unique"]

Tensor = _C.Tensor
_mint = _C.mint
_INDEX_DTYPES = (_C.dtype.int64, _C.dtype.int32)
_LOG10_OF_2 = 0.30102999566398120  # log10(x) = log2(x) * log10(2): see log10


def _tensor(owner, name, value):
    if not isinstance(value, Tensor):
        raise KilnTypeError(f"{owner}: expected {name} to be a kiln.Tensor, got "
                            f"{type(value).__name__}")
    return value


def _dim(owner, dim, ndim):
    """``dim`` of an ``ndim``-d tensor, non-negative (a 0-d tensor has dim 0, as in PyTorch)."""
    return wrap_dim(owner, "dim", checked_int(owner, "dim", dim), ndim)


def _index_vector(owner, index):
    """``index`` (an int64 or int32 tensor of at most one dim) as a 1-d tensor."""
    _tensor(owner, "index", index)
    if index.dtype not in _INDEX_DTYPES:
        raise DTypeError(f"{owner}: expected an int64 or int32 index, got {index.dtype.name}")
    if index.ndim > 1:
        raise KilnIndexError(f"{owner}: expected a 1-d index (the positions along dim), got "
                             f"shape {list(index.shape)}")
    return index.reshape(1) if index.ndim == 0 else index


def _along(dim, ndim, size):
    """The shape of ``size`` entries along ``dim`` of ``ndim`` dims, 1 elsewhere: a vector
    along ``dim`` that broadcasts against the tensor."""
    return [size if d == dim else 1 for d in range(ndim)]


def _eager(owner):
    if _C.jit.is_tracing():
        raise KilnTypeError(f"{owner}: the size of its result depends on the tensor's values, "
                            f"which a function kiln.jit traces cannot know; call {owner} "
                            f"outside the traced function")


def _write(self, result, what):
    """kiln/_tensor_methods.py's ``_write`` (the in-place methods' check and write), looked up at
    the call: that module is still loading when it imports kiln.mint, which imports this one."""
    return _tensor_methods._write(self, result, what)


# ------------------------------------------------------------------------------------------------
# Scatter and index


def scatter_add(input, dim, index, src):  # noqa: A002  (PyTorch's argument names)
    """scatter_add(input, dim, index, src): a copy of ``input`` with each ``src[i][j]`` added at
    ``index[i][j]`` along ``dim`` (for dim 0: out[index[i][j]][j] += src[i][j]), repeated
    indices adding up; kiln.mint.scatter with reduce "add". ``src`` must be a tensor."""
    _tensor("scatter_add", "src", src)
    return _mint.scatter(input, checked_int("scatter_add", "dim", dim), index, src, "add")


def index_add(input, dim, index, source, *, alpha=1):  # noqa: A002
    """index_add(input, dim, index, source, *, alpha=1): a copy of ``input`` with ``alpha *
    source`` added at the positions ``index`` (1-d, int64 or int32) along ``dim``: slice i of
    ``source`` along dim goes to slice index[i], repeated indices adding up. ``source`` has
    ``input``'s shape but for ``dim``, which has the index's length. ``alpha`` is a real number;
    a bool counts as 1 or 0, as in PyTorch. An integer or bool input takes an integer (or bool)
    ``alpha`` only, as torch.add does (PyTorch's index_add truncates a float one)."""
    owner = "index_add"
    _tensor(owner, "input", input)
    _tensor(owner, "source", source)
    index = _index_vector(owner, index)
    dim = _dim(owner, dim, input.ndim)
    if not isinstance(alpha, numbers.Real):
        raise KilnTypeError(f"{owner}: expected alpha to be a number (an int, a float or a "
                            f"bool), got {type(alpha).__name__} {alpha!r}")
    if isinstance(alpha, bool):
        alpha = int(alpha)  # PyTorch's: True adds the source, False adds nothing
    if not input.dtype.is_floating_point and not isinstance(alpha, numbers.Integral):
        raise KilnTypeError(f"{owner}: an integer input ({input.dtype.name}) takes an integer "
                            f"alpha, got {alpha!r}")
    x = input.reshape(1) if input.ndim == 0 else input
    src = source.reshape(1) if source.ndim == 0 and x.ndim == 1 else source
    expected = list(x.shape)
    expected[dim] = index.shape[0]
    if list(src.shape) != expected:
        raise ShapeError(f"{owner}: expected source of shape {expected} (the input's, with "
                         f"dim {dim} as long as the index), got {list(source.shape)}")
    if source.dtype != input.dtype:
        raise DTypeError(f"{owner}: expected source of the input's dtype {input.dtype.name}, got "
                         f"{source.dtype.name} (as PyTorch; convert it with "
                         f"source.to(kiln.{input.dtype.name}))")
    if alpha != 1:
        src = (src * alpha).to(src.dtype)  # a bool source times 0 or 1 stays bool
    spread = index.reshape(_along(dim, x.ndim, index.shape[0])).expand(expected)
    result = _mint.scatter(x, dim, spread, src, "add")
    return result.reshape(()) if input.ndim == 0 else result


def index_fill(input, dim, index, value):  # noqa: A002
    """index_fill(input, dim, index, value): a copy of ``input`` with the slices at the
    positions ``index`` (1-d, int64 or int32; negative from the end) along ``dim`` set to
    ``value``, a number or a 0-d tensor (which then gets the gradient of the filled
    elements)."""
    owner = "index_fill"
    _tensor(owner, "input", input)
    index = _index_vector(owner, index)
    dim = _dim(owner, dim, input.ndim)
    if isinstance(value, Tensor) and value.ndim != 0:
        raise KilnValueError(f"{owner}: expected value to be a number or a 0-d tensor, got a "
                             f"tensor of shape {list(value.shape)}")
    ndim = max(input.ndim, 1)
    size = input.shape[dim] if input.ndim else 1
    # The mask is scattered along dim itself, so that an index out of range is reported for
    # the dim the caller named.
    mask = _mint.scatter(_mint.zeros(_along(dim, ndim, size), dtype=_C.dtype.bool), dim,
                         index.reshape(_along(dim, ndim, index.shape[0])), True)
    return _mint.masked_fill(input, mask if input.ndim else mask.reshape(()), value)


def take_along_dim(input, indices, dim=None):  # noqa: A002
    """take_along_dim(input, indices, dim=None): the elements of ``input`` at ``indices`` along
    ``dim`` (kiln.mint.gather), input and indices (of one number of dims) broadcast against
    each other in the other dims; with ``dim`` None, the flattened input at the flattened
    indices."""
    owner = "take_along_dim"
    _tensor(owner, "input", input)
    _tensor(owner, "indices", indices)
    if indices.dtype not in _INDEX_DTYPES:
        raise DTypeError(f"{owner}: expected int64 or int32 indices, got {indices.dtype.name}")
    if dim is None:
        return _mint.gather(input.reshape(-1), 0, indices.reshape(-1))
    if input.ndim != indices.ndim:
        raise ShapeError(f"{owner}: expected input and indices to have the same number of dims, "
                         f"got shapes {list(input.shape)} and {list(indices.shape)}")
    dim = _dim(owner, dim, input.ndim)
    if input.ndim == 0:
        return _mint.gather(input.reshape(1), 0, indices.reshape(1)).reshape(())
    shape = []
    for d, (a, b) in enumerate(zip(input.shape, indices.shape)):
        if d != dim and a != b and 1 not in (a, b):
            raise ShapeError(f"{owner}: input of shape {list(input.shape)} and indices of shape "
                             f"{list(indices.shape)} do not broadcast in dim {d}")
        shape.append(a if a != 1 else b)

    def widened(x):
        target = [x.shape[d] if d == dim else size for d, size in enumerate(shape)]
        return x if list(x.shape) == target else x.expand(target)

    return _mint.gather(widened(input), dim, widened(indices))


def masked_select(input, mask):  # noqa: A002
    """masked_select(input, mask): the 1-d tensor of the elements of ``input`` where the bool
    ``mask`` is true, in row-major order; input and mask broadcast together. Eager only."""
    owner = "masked_select"
    _eager(owner)
    _tensor(owner, "input", input)
    _tensor(owner, "mask", mask)
    if mask.dtype != _C.dtype.bool:
        raise DTypeError(f"{owner}: expected a bool mask, got {mask.dtype.name}")
    shape = tuple(_mint.broadcast_shapes(input.shape, mask.shape))
    x = input if tuple(input.shape) == shape else input.broadcast_to(shape)
    chosen = mask if tuple(mask.shape) == shape else mask.broadcast_to(shape)
    return x[chosen]


def _int64_tensor(array):
    return _C.from_numpy(np.ascontiguousarray(array, dtype=np.int64))


def nonzero(input, *, as_tuple=False):  # noqa: A002
    """nonzero(input, *, as_tuple=False): the positions of the nonzero (true, NaN) elements of
    ``input``, in row-major order: an int64 tensor [count, input.ndim], or with ``as_tuple``
    one 1-d int64 tensor per dim (a 0-d input counts as 1-d there, as in PyTorch). Eager
    only."""
    owner = "nonzero"
    _eager(owner)
    _tensor(owner, "input", input)
    checked_bool(owner, "as_tuple", as_tuple)
    values = input.detach().numpy()
    if as_tuple:
        return tuple(_int64_tensor(p)
                     for p in np.nonzero(values.reshape(-1) if values.ndim == 0 else values))
    return _int64_tensor(np.argwhere(values))


def argwhere(input):  # noqa: A002
    """argwhere(input): ``nonzero(input)``, the [count, input.ndim] positions of the nonzero
    elements. Eager only."""
    return nonzero(input)


def where(condition, input=None, other=None, *, out=None):  # noqa: A002
    """where(condition, input, other, *, out=None): kiln.mint's Where op (``input`` where
    ``condition`` holds, else ``other``, broadcast and promoted), called as it is; with
    ``condition`` alone, ``nonzero(condition, as_tuple=True)`` (eager only), as in PyTorch."""
    if input is None and other is None:
        if out is not None:
            raise KilnTypeError("where: out= needs input and other (where(condition) returns "
                                "the positions of the true elements)")
        return nonzero(condition, as_tuple=True)
    if input is None or other is None:
        missing = "input" if input is None else "other"
        raise KilnTypeError(f"where: expected both input and other, or neither "
                            f"(where(condition) is nonzero(condition, as_tuple=True)), got no "
                            f"{missing}")
    return _mint.where(condition, input, other, out=out)


# ------------------------------------------------------------------------------------------------
# Comparison


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):  # noqa: A002
    """isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False): where |input - other| <=
    atol + rtol * |other| (not symmetric, as PyTorch's and NumPy's), or the two are equal
    (infinities of one sign), or both NaN with ``equal_nan``; a bool tensor of the broadcast
    shape. Both are tensors of one dtype (a DTypeError otherwise, as in PyTorch); rtol and atol
    are >= 0."""
    owner = "isclose"
    _tensor(owner, "input", input)
    _tensor(owner, "other", other)
    check_same_dtype(owner, "input", input, "other", other)
    rtol, atol = check_real(owner, "rtol", rtol), check_real(owner, "atol", atol)
    if not (rtol >= 0 and atol >= 0):
        raise KilnValueError(f"{owner}: expected rtol and atol >= 0, got rtol={rtol} and "
                             f"atol={atol}")
    checked_bool(owner, "equal_nan", equal_nan)
    close = input == other
    floating = input.dtype.is_floating_point
    if equal_nan and floating:
        close = close | ((input != input) & (other != other))
    if rtol == 0 and atol == 0:
        return close
    if floating:
        a, b = _widened(input), _widened(other)
    else:  # integers subtract without wrapping, and exactly up to 2**53, in float64
        a, b = input.to(_C.dtype.float64), other.to(_C.dtype.float64)
    error = _mint.abs(a - b)
    # An infinite error is never close, even against an infinite allowance (other = inf).
    return close | ((error <= _mint.abs(b * rtol) + atol) & (error < float("inf")))


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):  # noqa: A002
    """allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False): whether ``isclose`` holds
    for every element, as a Python bool (True for no elements)."""
    return bool(_mint.all(isclose(input, other, rtol, atol, equal_nan)).item())


def equal(input, other):  # noqa: A002
    """equal(input, other): True when the two tensors have the same shape and equal elements
    (compared after promotion; NaN is equal to nothing), as a Python bool."""
    _tensor("equal", "input", input)
    _tensor("equal", "other", other)
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool(_mint.all(input == other).item())


# ------------------------------------------------------------------------------------------------
# Elementwise math


def full_like(input, fill_value, *, dtype=None, requires_grad=False, device=None):  # noqa: A002
    """full_like(input, fill_value, *, dtype=None, requires_grad=False, device=None): a tensor of
    ``input``'s shape filled with ``fill_value``, in input's dtype unless ``dtype`` is given."""
    _tensor("full_like", "input", input)
    return _mint.full(input.shape, fill_value, dtype=input.dtype if dtype is None else dtype,
                      requires_grad=requires_grad, device=device)


def empty_like(input, *, dtype=None, requires_grad=False, device=None):  # noqa: A002
    """empty_like(input, *, dtype=None, requires_grad=False, device=None): an uninitialised
    tensor of ``input``'s shape, in input's dtype unless ``dtype`` is given."""
    _tensor("empty_like", "input", input)
    return _mint.empty(list(input.shape), dtype=input.dtype if dtype is None else dtype,
                       requires_grad=requires_grad, device=device)


def _bound(owner, name, value):
    if value is None:
        raise KilnTypeError(f"{owner}: expected {name} to be a number or a tensor, got None")
    return value


def clamp_min(input, min):  # noqa: A002
    """clamp_min(input, min): ``clamp(input, min=min)``, max(input, min) elementwise."""
    return _mint.clamp(input, min=_bound("clamp_min", "min", min))


def clamp_max(input, max):  # noqa: A002
    """clamp_max(input, max): ``clamp(input, max=max)``, min(input, max) elementwise."""
    return _mint.clamp(input, max=_bound("clamp_max", "max", max))


clip = _mint.clamp  # PyTorch's alias, the op itself


def log10(input):  # noqa: A002
    """log10(input): the base-10 logarithm, the default dtype for integers (as PyTorch's), computed
    in float32 for 16-bit floats and rounded once. It is log2(x) * log10(2): within 2 ulp in float64
    (3 in float32; PyTorch's log10 is within 0.5) and exact at most powers of ten, where log(x) /
    log(10) misses more than half of them."""
    _tensor("log10", "input", input)
    dtype = input.dtype
    result = _mint.log2(_widened(input)) * _LOG10_OF_2
    return _cast(result, dtype) if dtype.is_floating_point else result


def fix(input, *, out=None):  # noqa: A002
    """fix(input, *, out=None): kiln.mint.trunc's alias, as in PyTorch."""
    return _mint.trunc(input, out=out)


def lerp(input, end, weight):  # noqa: A002
    """lerp(input, end, weight): ``input + weight * (end - input)``, with PyTorch's formula
    ``end - (end - input) * (1 - weight)`` where |weight| >= 0.5, so that weight 1 gives
    ``end`` exactly. ``input`` and ``end`` are floating-point tensors, ``weight`` a number or a
    floating-point tensor; they broadcast together, and 16-bit floats are computed in float32
    and rounded once."""
    owner = "lerp"
    dtypes = [_floating_tensor(owner, "input", input), _floating_tensor(owner, "end", end)]
    if isinstance(weight, Tensor):
        dtypes.append(_floating_tensor(owner, "weight", weight))
    else:
        weight = check_real(owner, "weight", weight)
    dtype = functools.reduce(_C.promote_types, dtypes)
    start, stop = _widened(_cast(input, dtype)), _widened(_cast(end, dtype))
    diff = stop - start
    if isinstance(weight, Tensor):
        w = _widened(_cast(weight, dtype))
        result = _mint.where(_mint.abs(w) < 0.5, start + diff * w, stop - diff * (1.0 - w))
    elif abs(weight) < 0.5:
        result = start + diff * weight
    else:
        result = stop - diff * (1.0 - weight)
    return _cast(result, dtype)


# The op of each of div's rounding modes.
_ROUNDED_DIVISIONS = {"floor": _mint.floor_divide, "trunc": _mint.trunc_divide}


def _rounded_division(input, other, rounding_mode, out):  # noqa: A002
    """div with a rounding mode, an integer division by zero reported as div's, the function the
    caller called. Only where the error is raised at the call (the "sync" pipeline): an
    asynchronous pipeline or a kiln.jit graph raises it later, as FloorDivide's or
    TruncDivide's."""
    try:
        return _ROUNDED_DIVISIONS[rounding_mode](input, other, out=out)
    except KilnValueError as error:
        if "division by zero" not in str(error):
            raise
    raise KilnValueError(f"div: integer division by zero with rounding_mode={rounding_mode!r}; "
                         f"expected a divisor with no zero (an integer quotient has no inf)")


def div(input, other, *, rounding_mode=None, out=None):  # noqa: A002
    """div(input, other, *, rounding_mode=None, out=None): ``input / other``. With
    ``rounding_mode`` None this is kiln.mint's Div op, called as it is (true division, the default
    dtype for integers); "trunc" rounds the quotient toward zero (kiln.mint.trunc_divide, PyTorch's
    rounding) and "floor" toward -inf (Python's ``//``, kiln.mint.floor_divide), both keeping
    integer operands integer and exact. A 16-bit quotient is rounded in float32 and then to 16
    bits once. Integer division by zero is a KilnValueError in those modes; the gradient of both
    is zero."""
    if rounding_mode is None:
        return _mint.div(input, other, out=out)
    if rounding_mode not in _ROUNDED_DIVISIONS:
        raise KilnValueError(f"div: expected rounding_mode None, 'trunc' or 'floor', got "
                             f"{rounding_mode!r}")
    return _rounded_division(input, other, rounding_mode, out)


# ------------------------------------------------------------------------------------------------
# Scans and sets


def cumprod(input, dim, *, dtype=None):  # noqa: A002
    """cumprod(input, dim, *, dtype=None): the inclusive prefix products along ``dim``, in
    ``dtype`` if given (the input is converted first), else int64 for integer and bool inputs
    and the input's dtype for floats (computed in float64, rounded once). Exact for
    integers (wrapping on overflow, as PyTorch's); see the module's documentation for floats
    and the gradient."""
    owner = "cumprod"
    _tensor(owner, "input", input)
    dim = _dim(owner, dim, input.ndim)
    if dtype is None:
        dtype = input.dtype if input.dtype.is_floating_point else _C.dtype.int64
    else:
        dtype = _C.as_dtype(dtype)
    x = _cast(input, dtype)
    if x.ndim == 0:
        return x.clone() if x is input else x
    # y[k] = x[k] * y[k - 1] + b[k], with b the first element followed by zeros: the linear scan
    # computes the products in float64 (integers wrapping in int64), each rounded once into the
    # dtype (PyTorch accumulates float32 in double too), and its gradient is exact with zeros.
    # The zeros are -0.0 for floats: p + -0.0 is p for every p, where + 0.0 would turn a product
    # of -0.0 into 0.0.
    size = x.shape[dim]
    first = x.narrow(dim, 0, min(size, 1))
    rest = list(x.shape)
    rest[dim] = size - first.shape[dim]
    zeros = _mint.full(rest, -0.0 if dtype.is_floating_point else 0, dtype=dtype)
    return _mint.linear_scan(x, _mint.cat([first, zeros], dim), dim)


def _run_starts(rows):
    """Where each run of equal rows of the sorted ``rows`` (1-d: elements; 2-d: rows) begins:
    a bool vector, true at 0 and wherever a row differs from the one before (so each NaN
    starts a run of its own)."""
    count = rows.shape[0]
    if count == 0:
        return _mint.zeros(0, dtype=_C.dtype.bool)
    differs = rows.narrow(0, 1, count - 1) != rows.narrow(0, 0, count - 1)
    if rows.ndim == 2:
        differs = _mint.any(differs, 1)
    return _mint.cat([_mint.ones(1, dtype=_C.dtype.bool), differs])


def _lexicographic_order(rows):
    """The permutation that sorts the rows of the 2-d ``rows`` lexicographically: one stable
    sort per column, from the last to the first."""
    order = _mint.arange(rows.shape[0])
    for column in reversed(range(rows.shape[1])):
        key = _mint.index_select(rows.select(1, column), 0, order)
        order = _mint.index_select(order, 0, _mint.sort(key).indices)
    return order


def unique(input, sorted=True, return_inverse=False, return_counts=False,  # noqa: A002
           dim=None):
    """unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None): the
    distinct elements of ``input`` (flattened) in ascending order, or with ``dim`` its distinct
    slices along ``dim`` in lexicographic order. With ``return_inverse`` also the int64
    position in the output of each element (input's shape) or slice (along dim), and with
    ``return_counts`` the int64 number of each; the result is then a tuple (output[, inverse][,
    counts]), as in PyTorch. The output is sorted whatever ``sorted`` says. Eager only."""
    owner = "unique"
    _eager(owner)
    _tensor(owner, "input", input)
    for name, flag in (("sorted", sorted), ("return_inverse", return_inverse),
                       ("return_counts", return_counts)):
        checked_bool(owner, name, flag)
    dim, layout, table = _as_rows(owner, input, dim)
    if dim is None:
        ordered = _mint.sort(table)
        rows, order = ordered.values, ordered.indices
    else:
        order = _lexicographic_order(table)
        rows = _mint.index_select(table, 0, order)
    return _runs(input, dim, layout, rows, order, return_inverse, return_counts)


def _as_rows(owner, input, dim):  # noqa: A002
    """(dim, layout, rows): ``input``'s elements, flattened (dim None, layout None), or its
    slices along ``dim`` (wrapped) as the rows of a matrix, and ``layout``, input.transpose(0,
    dim), whose shape takes them back. For unique and unique_consecutive."""
    if dim is None:
        return None, None, input.reshape(-1)
    dim = wrap_dim(owner, "dim", checked_int(owner, "dim", dim), input.ndim, scalar_as_1d=False)
    # transpose(0, dim) brings the slices to the front and, applied again, takes them back.
    layout = input.transpose(0, dim)
    width = math.prod(layout.shape[1:])  # not -1: a dim of size 0 leaves it undetermined
    return dim, layout, layout.reshape(input.shape[dim], width)


def _runs(input, dim, layout, rows, order, return_inverse, return_counts):  # noqa: A002
    """unique's and unique_consecutive's result from ``rows`` (see _as_rows), put in ``order``
    (a permutation of them; None: as they are): each run of equal rows once, then with
    ``return_inverse`` each original row's output position and with ``return_counts`` each
    run's length."""
    starts = _run_starts(rows)
    output = rows[starts]
    count = output.shape[0]
    if layout is not None:
        output = output.reshape([count] + list(layout.shape[1:])).transpose(0, dim)
    if not (return_inverse or return_counts):
        return output
    group = _mint.cumsum(starts, 0) - 1  # the output row of each row in order
    result = [output]
    if return_inverse:
        inverse = group if order is None else _mint.scatter(
            _mint.zeros(order.shape[0], dtype=_C.dtype.int64), 0, order, group)
        result.append(inverse.reshape(input.shape) if dim is None else inverse)
    if return_counts:
        result.append(_mint.scatter(_mint.zeros(count, dtype=_C.dtype.int64), 0, group, 1,
                                    "add"))
    return tuple(result)


# ------------------------------------------------------------------------------------------------
# Tensor methods

_TENSOR_DIV = Tensor.div
_TENSOR_DIV_ = Tensor.div_


def _div_method(self, other, *, rounding_mode=None):
    """``kiln.mint.div(self, other, rounding_mode=...)``; without a rounding mode the bound Div
    method, called as it is."""
    if rounding_mode is None:
        return _TENSOR_DIV(self, other)
    return div(self, other, rounding_mode=rounding_mode)


def _div_method_(self, other, *, rounding_mode=None):
    """``div`` written into this tensor; without a rounding mode the bound in-place Div method,
    called as it is. Returns the tensor."""
    if rounding_mode is None:
        return _TENSOR_DIV_(self, other)
    return _write(self, div(self, other, rounding_mode=rounding_mode), "div_")


def scatter_(self, dim, index, src=None, *, value=None, reduce=None):
    """kiln.mint.scatter written into this tensor: ``src`` (a tensor, or a number) or ``value``
    (a number) at ``index`` along ``dim``, replacing, or with ``reduce`` "add" or "multiply"
    combining. Returns the tensor."""
    if (src is None) == (value is None):
        raise KilnTypeError("scatter_: expected either src or value, got "
                            + ("both" if src is not None else "neither"))
    written = _mint.scatter(self, checked_int("scatter_", "dim", dim), index,
                            value if src is None else src, "none" if reduce is None else reduce)
    return _write(self, written, "scatter_")


def scatter_add_(self, dim, index, src):
    """``scatter_add`` written into this tensor; returns it."""
    return _write(self, scatter_add(self, dim, index, src), "scatter_add_")


def index_add_(self, dim, index, source, *, alpha=1):
    """``index_add`` written into this tensor; returns it."""
    return _write(self, index_add(self, dim, index, source, alpha=alpha), "index_add_")


def index_fill_(self, dim, index, value):
    """``index_fill`` written into this tensor; returns it."""
    return _write(self, index_fill(self, dim, index, value), "index_fill_")


def clamp_min_(self, min):  # noqa: A002
    """``clamp_min`` written into this tensor; returns it."""
    return self.clamp_(_bound("clamp_min_", "min", min), None)


def clamp_max_(self, max):  # noqa: A002
    """``clamp_max`` written into this tensor; returns it."""
    return self.clamp_(None, _bound("clamp_max_", "max", max))


def clip_(self, min=None, max=None):  # noqa: A002
    """``clamp_``'s alias: the clamp written into this tensor; returns it."""
    return self.clamp_(min, max)


for _function in (scatter_add, index_add, index_fill, take_along_dim, masked_select, nonzero,
                  argwhere, isclose, allclose, equal, clamp_min, clamp_max, log10, fix, lerp,
                  cumprod, unique, scatter_, scatter_add_, index_add_, index_fill_, clamp_min_,
                  clamp_max_, clip_):
    setattr(Tensor, _function.__name__, _function)
del _function
Tensor.fix_ = Tensor.trunc_
Tensor.clip = Tensor.clamp
Tensor.div = _div_method
Tensor.div_ = _div_method_
