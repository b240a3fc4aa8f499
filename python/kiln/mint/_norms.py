"""kiln.mint.vector_norm and kiln.mint.norm: vector norms, as torch.linalg.vector_norm and
torch.norm compute them.

    kiln.mint.vector_norm(x)                              # the 2-norm of all of x's elements
    kiln.mint.vector_norm(x, ord=math.inf, dim=-1)        # max |x| along the last dimension
    kiln.mint.norm(w, p="fro", dim=(0, 1), keepdim=True)  # the Frobenius norm of each matrix

``vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None)`` reduces the dimensions
``dim`` (an int, a list or tuple of ints, or None and () for all of them) of a floating-point
tensor to

    ord = inf:    max |x|            ord = -inf:   min |x|
    ord = 0:      the number of nonzero elements (NaN counts)
    other ord:    sum(|x| ** ord) ** (1 / ord)     (ord = 2: the Euclidean norm)

``dtype`` (a floating-point dtype that x's converts to without loss) is the dtype the norm is
computed in and returned in; by default x's. 16-bit inputs are computed in float32 and rounded
once, as PyTorch accumulates them (the squares of float16 values past 256 overflow it). The
inf, -inf and negative norms of no elements are a KilnValueError, as in PyTorch (their
reductions have no identity); the others are 0.

``norm(input, p="fro", dim=None, keepdim=False, dtype=None)`` is torch.norm: ``vector_norm``
with ord ``p``, where "fro" (and None) is the 2-norm, over at most two dimensions for "fro". The
nuclear norm ("nuc", the sum of the singular values) is kiln.linalg.matrix_norm's, over the two
dims ``dim`` (None: all of them, so the input must be a matrix).

Both are composed of kiln.mint ops, so autograd and ``kiln.jit`` go through them, with PyTorch's
gradients where the plain chain rule has none: at a norm of 0 the gradient of every order but
ord < 1 is 0 (not NaN); an element that is 0 gets gradient 0 for 0 < ord < 1; every element's
is 0 for ord < 0 when one of them is 0 (the norm is 0 there) and for ord = 0; inf and -inf
share the gradient among the elements of largest (smallest) magnitude.
"""

import math
import numbers

from .. import _C
from .._checks import wrap_dim
from ..errors import DTypeError, KilnTypeError, KilnValueError

__all__ = ["vector_norm", "norm"]

_mint = _C.mint
_SIXTEEN_BITS = (_C.dtype.float16, _C.dtype.bfloat16)


def _reduced_dims(owner, x, dim):
    """The dimensions ``dim`` names, as non-negative ints (all of them for None or ()); an
    out-of-range or repeated one is an error naming ``owner``. A 0-d tensor has dimension 0
    (and -1), as in PyTorch."""
    rank = x.ndim
    if dim is None:
        return list(range(rank))
    if isinstance(dim, (list, tuple)):
        dims = list(dim)
    else:
        dims = [dim]
    if not dims:
        return list(range(rank))
    result = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, numbers.Integral):
            raise KilnTypeError(f"{owner}: expected dim to be None, an int or a list / tuple of "
                                f"ints, got {type(d).__name__} {d!r}")
        d = wrap_dim(owner, "dim", d, rank)
        if d in result:
            raise KilnValueError(f"{owner}: dim {d} appears more than once in dim {dim!r}")
        result.append(d)
    return result if rank else []


def _checked_order(owner, name, order):
    if order in ("inf", "-inf"):  # PyTorch's clipping takes float(norm_type)
        return float(order)
    if isinstance(order, bool) or not isinstance(order, numbers.Real):
        raise KilnTypeError(f"{owner}: {name} must be a real number (or inf, -inf), got "
                            f"{type(order).__name__} {order!r}")
    if math.isnan(order):
        raise KilnValueError(f"{owner}: {name} must be a number, got nan")
    return float(order)


def _nonzero_safe(a, fill):
    """``a`` with its zeros replaced by ``fill``, through which no gradient flows to them: the
    operand of a power whose derivative at 0 is infinite, so that the chain rule's inf * 0
    does not give NaN (see ``_masked``)."""
    return _mint.where(a == 0, fill, a)


def _masked(mask, value, result):
    """``result`` where ``mask`` is false and ``value`` where it is true; ``result`` was
    computed from ``_nonzero_safe`` operands, so the gradient is 0 under the mask."""
    return _mint.where(mask, value, result)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):  # noqa: A002 (PyTorch's name)
    """The ``ord`` vector norm of ``x`` over ``dim``; see kiln.mint's norm documentation
    (kiln/mint/_norms.py)."""
    owner = "vector_norm"
    if not isinstance(x, _C.Tensor):
        raise KilnTypeError(f"{owner}: expected a kiln tensor, got {type(x).__name__}")
    order = _checked_order(owner, "ord", ord)
    if not isinstance(keepdim, bool):
        raise KilnTypeError(f"{owner}: keepdim must be True or False, got {keepdim!r}")
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{owner}: expected a floating-point tensor, got {x.dtype.name}")
    if dtype is not None:
        if not isinstance(dtype, _C.dtype) or not dtype.is_floating_point \
                or _C.promote_types(x.dtype, dtype) != dtype:
            raise DTypeError(f"{owner}: dtype must be a floating-point dtype that "
                             f"{x.dtype.name} converts to without loss, got {dtype!r}")
        x = x.to(dtype)
    out_dtype = x.dtype
    dims = _reduced_dims(owner, x, dim)
    shape = list(x.shape)
    if (order < 0 or math.isinf(order)) and any(shape[d] == 0 for d in dims):
        raise KilnValueError(f"{owner}: cannot compute the {order:g} norm over an empty "
                             f"dimension (of shape {shape}): its reduction has no identity")
    if x.dtype in _SIXTEEN_BITS:
        x = x.to(_C.dtype.float32)
    a = _mint.abs(x)
    if order == math.inf:
        result = _mint.amax(a, dims, keepdim)
    elif order == -math.inf:
        result = _mint.amin(a, dims, keepdim)
    elif order == 0:
        # x * 0 (selected only where x is 0) keeps the result on x's tape, with gradient 0.
        result = _mint.sum(_mint.where(x != 0, 1.0, x * 0), dims, keepdim)
    elif order == 1:
        result = _mint.sum(a, dims, keepdim)
    else:
        zero = a == 0
        if order == 2:
            total = _mint.sum(_mint.square(x), dims, keepdim)
        elif order > 0:
            # d(a ** ord)/da is infinite at a = 0 for ord < 1.
            total = _mint.sum(_masked(zero, 0.0, _mint.pow(_nonzero_safe(a, 1.0), order)),
                              dims, keepdim)
        else:
            # 0 ** ord is inf, which the root below turns into a norm of 0.
            total = _mint.sum(_masked(zero, math.inf, _mint.pow(_nonzero_safe(a, 1.0), order)),
                              dims, keepdim)
        # The root's derivative is infinite at a total of 0 (for ord > 1): the norm is 0 there,
        # with gradient 0, as PyTorch's.
        empty = total == 0
        safe = _nonzero_safe(total, 1.0)
        root = _mint.sqrt(safe) if order == 2 else _mint.pow(safe, 1.0 / order)
        result = _masked(empty, 0.0 if order > 0 else math.inf, root)
    return result.to(out_dtype) if result.dtype != out_dtype else result


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):  # noqa: A002 (PyTorch's name)
    """torch.norm: the vector norm of order ``p`` (a number, or "fro" / None for 2) over
    ``dim``; see kiln.mint's norm documentation (kiln/mint/_norms.py)."""
    if isinstance(p, str):
        if p == "nuc":
            from .. import linalg  # at the call: kiln.linalg imports this module

            if not isinstance(input, _C.Tensor):
                raise KilnTypeError(f"norm: expected a kiln tensor, got {type(input).__name__}")
            dims = list(range(input.ndim)) if dim is None else dim
            return linalg.matrix_norm(input, "nuc", dims, keepdim, dtype=dtype)
        if p != "fro":
            raise KilnValueError(f"norm: p must be a number, 'fro' or None, got {p!r}")
        if isinstance(dim, (list, tuple)) and len(dim) > 2:
            raise KilnValueError(f"norm: p='fro' is the norm of vectors or matrices, over at "
                                 f"most 2 dims, got dim={dim!r}")
        p = 2
    elif p is None:
        p = 2
    else:
        _checked_order("norm", "p", p)
    return vector_norm(input, p, dim, keepdim, dtype=dtype)
