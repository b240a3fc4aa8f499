"""PyTorch's matrix and vector products, Kronecker and cross products and pairwise distances,
composed of kiln.mint ops in Python with PyTorch's names, argument order and defaults:

    mm(input, mat2)                              mv(input, vec)
    addmm(input, mat1, mat2, *, beta=1, alpha=1)          (the AddMM op, with PyTorch's checks)
    baddbmm(input, batch1, batch2, *, beta=1, alpha=1)    addmv(input, mat, vec, *, beta=1, alpha=1)
    kron(input, other)                           cross(input, other, dim=-1)
    cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary")

and the Tensor methods PyTorch has for them (``mm``, ``mv``, ``addmm``, ``baddbmm``, ``addmv``,
``kron``, ``cross`` and the in-place ``addmm_``, ``baddbmm_`` and ``addmv_``). Being compositions
of registered ops (matmul, bmm, AddMM, index_select, sum, ...), they differentiate through
autograd and trace under kiln.jit with no kernel of their own.

- As in PyTorch, the operands of a product have one dtype (a DTypeError otherwise; kiln.mint's
  matmul promotes), and the ``input`` of addmm / baddbmm / addmv broadcasts to the product's
  shape. With ``beta`` 0 the input is not read: its NaN and inf do not reach the result. An
  integer product takes whole-number ``beta`` and ``alpha`` (PyTorch truncates others), as the
  AddMM op; bool products are refused by addmm, baddbmm and addmv (as in PyTorch), taken by mm
  and mv (as by matmul).
- ``cross`` has torch.linalg.cross's semantics: ``dim`` -1 by default, input and other of one
  dtype and one number of dims, broadcast against each other, of size 3 along ``dim``.
  torch.cross's own default, ``dim=None``, takes the first dim of size 3 (deprecated there, with
  a warning, because it will become -1): Kiln takes -1 unless told, and ``dim=None`` passed
  explicitly follows torch.cross's rule, so that ported code keeps its meaning.
- ``cdist`` computes each distance from the differences of the two points (a [..., P, R, M]
  intermediate), for every p; ``compute_mode`` is checked and otherwise ignored (PyTorch may use
  the less accurate |x|^2 + |y|^2 - 2xy form for p = 2). The gradient is PyTorch's, 0 where two
  points coincide. 16-bit floats are computed in float32 and rounded once.
"""

import math
import numbers

from .. import _C
from .. import _tensor_methods
from .._checks import autocast_mixes, checked_int, wrap_dim
from ..errors import DTypeError, KilnTypeError, KilnValueError, ShapeError
from ._composite import _cast, _widened, check_real

__all__ = ["mm", "mv", "addmm", "baddbmm", "addmv", "kron", "cross", "cdist"]

Tensor = _C.Tensor
_mint = _C.mint
_COMPUTE_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                  "donot_use_mm_for_euclid_dist")


def _tensor(owner, name, value, ndim=None):
    """``value``, checked to be a kiln tensor (a KilnTypeError) of ``ndim`` dims (a ShapeError)
    when ``ndim`` is given."""
    if not isinstance(value, Tensor):
        raise KilnTypeError(f"{owner}: expected {name} to be a kiln.Tensor, got "
                            f"{type(value).__name__}")
    if ndim is not None and value.ndim != ndim:
        raise ShapeError(f"{owner}: expected {name} to be a {ndim}-d tensor, got a "
                         f"{value.ndim}-d one of shape {list(value.shape)}")
    return value


def _same_dtype(owner, named):
    """Checks that the (name, tensor) pairs ``named`` have one dtype, as PyTorch's products do
    (inside kiln.autocast floating dtypes but float64 mix: the product casts them to one)."""
    first_name, first = named[0]
    for name, value in named[1:]:
        if value.dtype != first.dtype and not autocast_mixes(first.dtype, value.dtype):
            raise DTypeError(f"{owner}: expected {first_name} and {name} to have the same dtype, "
                             f"got {first.dtype.name} and {value.dtype.name}")


def _inner(owner, left_name, left_size, right_name, right_size):
    if left_size != right_size:
        raise ShapeError(f"{owner}: {left_name} has {left_size} columns but {right_name} has "
                         f"{right_size} rows; expected them equal")


def _factors(owner, beta, alpha, dtype):
    """``beta`` and ``alpha``: real numbers (a bool counts as 0 or 1), whole numbers for an
    integer product (the AddMM op's rule and words)."""
    for name, value in (("beta", beta), ("alpha", alpha)):
        if not isinstance(value, numbers.Real):
            raise KilnTypeError(f"{owner}: expected {name} to be a real number, got "
                                f"{type(value).__name__} {value!r}")
    beta, alpha = (int(v) if isinstance(v, bool) else v for v in (beta, alpha))
    if not dtype.is_floating_point and not all(float(v).is_integer() for v in (beta, alpha)):
        raise KilnValueError(f"{owner}: expected whole-number alpha and beta for {dtype.name} "
                             f"tensors, got alpha={alpha} and beta={beta}")
    if not dtype.is_floating_point:
        beta, alpha = int(beta), int(alpha)
    return beta, alpha


def _numeric(owner, dtype):
    if dtype == _C.dtype.bool:
        raise DTypeError(f"{owner}: expected numeric tensors, got bool")


def _check_broadcasts(owner, input, shape):  # noqa: A002  (PyTorch's argument name)
    """Checks that ``input`` broadcasts to the product's ``shape`` (and not beyond it)."""
    got = list(input.shape)
    if len(got) > len(shape) or any(g not in (1, s) for g, s in zip(reversed(got),
                                                                    reversed(shape))):
        raise ShapeError(f"{owner}: input of shape {got} does not broadcast to the product's "
                         f"shape {list(shape)}")


def _scaled_sum(input, product, beta, alpha):  # noqa: A002
    """``beta * input + alpha * product``, the input not read where beta is 0 (so that its NaN
    and inf do not reach the result, as in PyTorch)."""
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product
    return (input if beta == 1 else input * beta) + product


# ------------------------------------------------------------------------------------------------
# Matrix and vector products


def mm(input, mat2):  # noqa: A002
    """mm(input, mat2): the product of two matrices [n, m] @ [m, p] of one dtype (no
    broadcasting; matmul broadcasts and promotes)."""
    _tensor("mm", "input", input)
    _tensor("mm", "mat2", mat2)
    if input.ndim != 2 or mat2.ndim != 2:
        raise ShapeError(f"mm: expected two 2-d tensors, got a {input.ndim}-d input and a "
                         f"{mat2.ndim}-d mat2 (matmul takes others)")
    _same_dtype("mm", [("input", input), ("mat2", mat2)])
    _inner("mm", "input", input.shape[1], "mat2", mat2.shape[0])
    return _mint.matmul(input, mat2)


def mv(input, vec):  # noqa: A002
    """mv(input, vec): the product of a matrix [n, m] and a vector [m], a vector [n]; one
    dtype."""
    _tensor("mv", "input", input, 2)
    _tensor("mv", "vec", vec, 1)
    _same_dtype("mv", [("input", input), ("vec", vec)])
    _inner("mv", "input", input.shape[1], "vec", vec.shape[0])
    return _mint.matmul(input, vec)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):  # noqa: A002
    """addmm(input, mat1, mat2, *, beta=1, alpha=1): ``beta * input + alpha * (mat1 @ mat2)``
    for matrices [n, m] and [m, p], ``input`` broadcasting to [n, p]; all of one dtype. The
    AddMM op (one fused kernel, which checks the shapes and names the input "bias"); with beta
    0 the input is not read."""
    owner = "addmm"
    for name, value in (("input", input), ("mat1", mat1), ("mat2", mat2)):
        _tensor(owner, name, value)
    _same_dtype(owner, [("input", input), ("mat1", mat1), ("mat2", mat2)])
    _factors(owner, beta, alpha, _C.dtype.float64)  # the op checks whole numbers for integers
    return _mint.addmm(input, mat1, mat2, beta=float(beta), alpha=float(alpha))


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    """baddbmm(input, batch1, batch2, *, beta=1, alpha=1): ``beta * input + alpha * (batch1 @
    batch2)`` for batches of matrices [b, n, m] and [b, m, p], ``input`` broadcasting to
    [b, n, p]; all of one dtype. With beta 0 the input is not read."""
    owner = "baddbmm"
    _tensor(owner, "input", input)
    _tensor(owner, "batch1", batch1, 3)
    _tensor(owner, "batch2", batch2, 3)
    _same_dtype(owner, [("input", input), ("batch1", batch1), ("batch2", batch2)])
    if batch1.shape[0] != batch2.shape[0]:
        raise ShapeError(f"{owner}: expected batch1 and batch2 to hold as many matrices, got "
                         f"{batch1.shape[0]} and {batch2.shape[0]}")
    _inner(owner, "batch1", batch1.shape[2], "batch2", batch2.shape[1])
    _check_broadcasts(owner, input, [batch1.shape[0], batch1.shape[1], batch2.shape[2]])
    _numeric(owner, input.dtype)
    beta, alpha = _factors(owner, beta, alpha, input.dtype)
    return _scaled_sum(input, _mint.bmm(batch1, batch2), beta, alpha)


def addmv(input, mat, vec, *, beta=1, alpha=1):  # noqa: A002
    """addmv(input, mat, vec, *, beta=1, alpha=1): ``beta * input + alpha * (mat @ vec)`` for a
    matrix [n, m] and a vector [m], ``input`` broadcasting to [n]; all of one dtype. With beta 0
    the input is not read."""
    owner = "addmv"
    _tensor(owner, "input", input)
    _tensor(owner, "mat", mat, 2)
    _tensor(owner, "vec", vec, 1)
    _same_dtype(owner, [("input", input), ("mat", mat), ("vec", vec)])
    _inner(owner, "mat", mat.shape[1], "vec", vec.shape[0])
    _check_broadcasts(owner, input, [mat.shape[0]])
    _numeric(owner, input.dtype)
    beta, alpha = _factors(owner, beta, alpha, input.dtype)
    return _scaled_sum(input, _mint.matmul(mat, vec), beta, alpha)


# ------------------------------------------------------------------------------------------------
# Kronecker and cross products


def kron(input, other):  # noqa: A002
    """kron(input, other): the Kronecker product, of shape ``input.shape[d] * other.shape[d]``
    per dim (the one with fewer dims takes leading 1s): block ``i`` is ``input[i] * other``.
    The dtypes promote."""
    _tensor("kron", "input", input)
    _tensor("kron", "other", other)
    ndim = max(input.ndim, other.ndim)
    a_shape = [1] * (ndim - input.ndim) + list(input.shape)
    b_shape = [1] * (ndim - other.ndim) + list(other.shape)
    # [a0, 1, a1, 1, ...] * [1, b0, 1, b1, ...] = [a0, b0, a1, b1, ...], merged pairwise.
    a = input.reshape([size for s in a_shape for size in (s, 1)])
    b = other.reshape([size for s in b_shape for size in (1, s)])
    return (a * b).reshape([s * t for s, t in zip(a_shape, b_shape)])


_NEXT = [1, 2, 0]  # the component after each of x, y, z
_AFTER_NEXT = [2, 0, 1]


def cross(input, other, dim=-1):  # noqa: A002
    """cross(input, other, dim=-1): the cross product of the 3-vectors along ``dim`` of two
    tensors of one dtype and one number of dims, broadcast together (torch.linalg.cross's
    semantics); ``dim=None`` takes the first dim of size 3 of the broadcast shape, torch.cross's
    deprecated default (see the module's documentation)."""
    owner = "cross"
    _tensor(owner, "input", input)
    _tensor(owner, "other", other)
    _same_dtype(owner, [("input", input), ("other", other)])
    if input.dtype == _C.dtype.bool:
        raise DTypeError(f"{owner}: expected numeric tensors, got bool")
    if input.ndim != other.ndim:
        raise ShapeError(f"{owner}: expected input and other to have the same number of dims, "
                         f"got shapes {list(input.shape)} and {list(other.shape)}")
    shape = []
    for a, b in zip(input.shape, other.shape):
        if a != b and 1 not in (a, b):
            raise ShapeError(f"{owner}: input of shape {list(input.shape)} and other of shape "
                             f"{list(other.shape)} do not broadcast together")
        shape.append(max(a, b) if 0 not in (a, b) else 0)
    if dim is None:
        if 3 not in shape:
            raise ShapeError(f"{owner}: dim=None takes the first dim of size 3, but the shape "
                             f"{shape} has none")
        axis = shape.index(3)
    else:
        axis = wrap_dim(owner, "dim", checked_int(owner, "dim", dim), input.ndim,
                        scalar_as_1d=False)
    if input.shape[axis] != 3 or other.shape[axis] != 3:
        raise ShapeError(f"{owner}: expected input and other of size 3 along dim {axis}, got "
                         f"{input.shape[axis]} and {other.shape[axis]}")
    nxt, after = _C.tensor(_NEXT), _C.tensor(_AFTER_NEXT)

    def part(x, index):
        return _mint.index_select(x, axis, index)

    return part(input, nxt) * part(other, after) - part(input, after) * part(other, nxt)


# ------------------------------------------------------------------------------------------------
# Distances


def _zero_safe(value, zero, function):
    """``function(value)`` where ``zero`` is false and 0 where it is true, with a zero gradient
    there: the function sees 1 in those places, so that its derivative at 0 (inf for a root or
    a power below 1) never multiplies the zero gradient into NaN (Note [Gradients through
    where], kiln/mint/_composite.py)."""
    return _mint.where(zero, 0.0, function(_mint.where(zero, 1.0, value)))


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """cdist(x1, x2, p=2.0, compute_mode=...): the p-norm distance between each row of ``x1``
    [..., P, M] and each row of ``x2`` [..., R, M], a tensor [..., P, R] (the batch dims
    broadcast). Floating-point operands of one dtype; p >= 0 (0 counts the differing
    coordinates, inf takes the largest difference). ``compute_mode`` is checked and ignored (see
    the module's documentation)."""
    owner = "cdist"
    for name, x in (("x1", x1), ("x2", x2)):
        _tensor(owner, name, x)
        if not x.dtype.is_floating_point:
            raise DTypeError(f"{owner}: expected floating-point tensors, got {name} of dtype "
                             f"{x.dtype.name}")
        if x.ndim < 2:
            raise ShapeError(f"{owner}: expected {name} to have at least 2 dims ([..., rows, "
                             f"features]), got shape {list(x.shape)}")
    _same_dtype(owner, [("x1", x1), ("x2", x2)])
    if x1.shape[-1] != x2.shape[-1]:
        raise ShapeError(f"{owner}: expected x1 and x2 to have as many features (last dim), got "
                         f"{x1.shape[-1]} and {x2.shape[-1]}")
    p = check_real(owner, "p", p)
    if not p >= 0:
        raise KilnValueError(f"{owner}: expected p >= 0, got {p}")
    if compute_mode not in _COMPUTE_MODES:
        raise KilnValueError(f"{owner}: expected compute_mode to be one of {list(_COMPUTE_MODES)}, "
                             f"got {compute_mode!r}")
    dtype = x1.dtype
    diff = _widened(x1).unsqueeze(-2) - _widened(x2).unsqueeze(-3)  # [..., P, R, M]
    if p == 0:
        result = _mint.sum(diff != 0, -1).to(diff.dtype)
    elif p == 1:
        result = _mint.sum(_mint.abs(diff), -1)
    elif p == 2:
        squares = _mint.sum(diff * diff, -1)
        result = _zero_safe(squares, squares == 0, _mint.sqrt)
    elif math.isinf(p):
        size = list(diff.shape[:-1])
        result = (_mint.amax(_mint.abs(diff), -1) if diff.shape[-1]
                  else _mint.zeros(size, dtype=diff.dtype))
    else:
        magnitude = _mint.abs(diff)
        powers = _zero_safe(magnitude, magnitude == 0, lambda m: _mint.pow(m, p))
        total = _mint.sum(powers, -1)
        result = _zero_safe(total, total == 0, lambda s: _mint.pow(s, 1.0 / p))
    return _cast(result, dtype)


# ------------------------------------------------------------------------------------------------
# Tensor methods


def _write(self, result, what):
    return _tensor_methods._write(self, result, what)


def addmm_(self, mat1, mat2, *, beta=1, alpha=1):
    """``addmm`` written into this tensor; returns it."""
    return _write(self, addmm(self, mat1, mat2, beta=beta, alpha=alpha), "addmm_")


def baddbmm_(self, batch1, batch2, *, beta=1, alpha=1):
    """``baddbmm`` written into this tensor; returns it."""
    return _write(self, baddbmm(self, batch1, batch2, beta=beta, alpha=alpha), "baddbmm_")


def addmv_(self, mat, vec, *, beta=1, alpha=1):
    """``addmv`` written into this tensor; returns it."""
    return _write(self, addmv(self, mat, vec, beta=beta, alpha=alpha), "addmv_")


for _function in (mm, mv, addmm, baddbmm, addmv, kron, cross, addmm_, baddbmm_, addmv_):
    setattr(Tensor, _function.__name__, _function)
del _function
