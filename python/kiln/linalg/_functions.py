"""kiln.linalg's functions composed of the primitives and kiln.mint ops: matrix_power,
matrix_exp, multi_dot, householder_product, tensorinv, tensorsolve, cross, vecdot, diagonal,
vander, and the torch-level spellings kiln.mint re-exports (logdet, cholesky_solve,
cholesky_inverse, pinverse); see the package documentation."""

import math

from .. import _C
from .._checks import checked_int, wrap_dim
from ..autograd import no_grad
from ..errors import DTypeError, KilnTypeError, KilnValueError, ShapeError
from ..mint._indexing_ops import cumprod
from ..mint._matrix_products import cross as _cross
from ..mint._products import diagonal as _diagonal, movedim
from ._common import (batch_identity, check_flag, check_float, check_matrices, check_same_dtype,
                      check_tensor, mint, prims)
from ._decompositions import inv, slogdet, solve, solve_triangular
from ._spectral import pinv

__all__ = ["matrix_power", "matrix_exp", "multi_dot", "householder_product", "tensorinv",
           "tensorsolve", "cross", "vecdot", "diagonal", "vander", "logdet", "cholesky_solve",
           "cholesky_inverse", "pinverse"]


def matrix_power(A, n):  # noqa: N803
    """A @ A @ ... (``n`` factors) for square matrices ``A`` [..., k, k], by repeated squaring:
    n = 0 gives identity matrices, n < 0 the power -n of inv(A) (float32 / float64 only; a
    singular matrix is a LinAlgError). n >= 0 takes any dtype matmul does."""
    owner = "matrix_power"
    check_tensor(owner, "A", A)
    n = checked_int(f"linalg.{owner}", "n", n)
    check_matrices(owner, "A", A, square=True)
    if n == 0:
        return batch_identity(A, A.shape[-1])
    base = A
    if n < 0:
        check_float(owner, "A (inverted for n < 0)", A)
        base, n = inv(A), -n
    result = None
    while n:
        if n & 1:
            result = base if result is None else mint.matmul(result, base)
        n >>= 1
        if n:
            base = mint.matmul(base, base)
    return result.clone() if result is A else result


# The Pade approximant of degree 13 to exp and the largest 1-norm it takes to float64 accuracy
# (Higham, "The scaling and squaring method for the matrix exponential revisited", 2005).
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
           129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
           40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152
# While kiln.jit traces, the norm cannot be read: this many squarings are traced, each applied to
# the matrices that need it (1-norms up to _THETA13 * 2 ** 20, about 5.6e6); larger ones give NaN.
_TRACED_SQUARINGS = 20


def _pade13(a):
    """The degree-13 Pade approximant of exp at the matrices ``a`` (1-norm <= _THETA13)."""
    b = _PADE13
    eye = batch_identity(a, a.shape[-1])
    a2 = mint.matmul(a, a)
    a4 = mint.matmul(a2, a2)
    a6 = mint.matmul(a4, a2)
    odd = mint.matmul(a, mint.matmul(a6, b[13] * a6 + b[11] * a4 + b[9] * a2)
                      + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
    even = (mint.matmul(a6, b[12] * a6 + b[10] * a4 + b[8] * a2)
            + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye)
    return prims.solve_ex(even - odd, even + odd, True, False)[0]


def matrix_exp(A):  # noqa: N803
    """The matrix exponential of square matrices ``A`` [..., n, n] (float32 / float64), by scaling
    and squaring with the degree-13 Pade approximant (Higham 2005), computed in float64 and
    composed of ops: differentiable (the derivative of the approximant, equal to exp's to
    rounding) and traceable by kiln.jit (see the package documentation for its limit there)."""
    owner = "matrix_exp"
    check_tensor(owner, "A", A)
    check_float(owner, "A", A)
    check_matrices(owner, "A", A, square=True)
    if A.numel() == 0:
        return A * 1.0
    x = A.to(_C.dtype.float64)
    traced = _C.jit.is_tracing()
    with no_grad():
        norm = mint.amax(mint.sum(mint.abs(x.detach()), [-2], False), [-1], False)
        # 2 ** -s scales each matrix to a 1-norm <= _THETA13; a non-finite norm needs none (its
        # result is NaN whatever is done).
        squarings = mint.clamp(mint.ceil(mint.log2(norm / _THETA13)), min=0.0)
        squarings = mint.where(norm < math.inf, squarings, 0.0)
        if traced:
            count = _TRACED_SQUARINGS
        else:
            count = int(mint.amax(squarings.reshape([-1]), [0], False).item())
    scale = mint.exp2(-squarings).unsqueeze(-1).unsqueeze(-1)
    result = _pade13(x * scale)
    needed = squarings.unsqueeze(-1).unsqueeze(-1)
    for i in range(count):
        result = mint.where(needed > i, mint.matmul(result, result), result)
    if traced:
        result = mint.where(needed > count, math.nan, result)
    return result.to(A.dtype)


def _chain_order(shapes):
    """The optimal parenthesization of the product of matrices of ``shapes`` (the matrix-chain
    dynamic program): split[i][j] is where the product of matrices i..j splits."""
    count = len(shapes)
    dims = [shapes[0][0]] + [s[1] for s in shapes]
    cost = [[0] * count for _ in range(count)]
    split = [[0] * count for _ in range(count)]
    for length in range(1, count):
        for i in range(count - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def multi_dot(tensors):
    """The product of two or more matrices in the order of fewest multiplications: the first
    may be a vector [n] (a row) and the last a vector [n] (a column), the dims of the result
    then dropped; the others are 2-d. All of one dtype."""
    owner = "multi_dot"
    if not isinstance(tensors, (list, tuple)):
        raise KilnTypeError(f"linalg.{owner}: expected a list or tuple of tensors, got "
                            f"{type(tensors).__name__}")
    if len(tensors) < 2:
        raise KilnValueError(f"linalg.{owner}: expected at least 2 tensors, got {len(tensors)}")
    for i, t in enumerate(tensors):
        check_tensor(owner, f"tensors[{i}]", t)
    check_same_dtype(owner, [(f"tensors[{i}]", t) for i, t in enumerate(tensors)])
    last = len(tensors) - 1
    matrices = []
    for i, t in enumerate(tensors):
        allowed = (1, 2) if i in (0, last) else (2,)
        if t.ndim not in allowed:
            raise ShapeError(f"linalg.{owner}: expected tensors[{i}] to be "
                             f"{'1-d or 2-d' if len(allowed) == 2 else '2-d'}, got shape "
                             f"{list(t.shape)}")
        matrices.append(t if t.ndim == 2 else t.unsqueeze(0 if i == 0 else 1))
    for i in range(last):
        if matrices[i].shape[1] != matrices[i + 1].shape[0]:
            raise ShapeError(f"linalg.{owner}: tensors[{i}] and tensors[{i + 1}] cannot be "
                             f"multiplied: shapes {list(tensors[i].shape)} and "
                             f"{list(tensors[i + 1].shape)}")
    split = _chain_order([tuple(m.shape) for m in matrices])

    def product(i, j):
        if i == j:
            return matrices[i]
        k = split[i][j]
        return mint.matmul(product(i, k), product(k + 1, j))

    result = product(0, last)
    if tensors[last].ndim == 1:
        result = result.squeeze(1)
    if tensors[0].ndim == 1:
        result = result.squeeze(0)
    return result


def householder_product(A, tau):  # noqa: N803
    """The first n columns of the product H_1 @ ... @ H_k of Householder reflections H_i = I -
    tau_i v_i v_i^T, v_i the i-th column of ``A`` [..., m, n] below the diagonal with a 1 on
    it (geqrf's packed form): Q of a QR factorization. ``tau`` is [..., k] (k <= n <= m, A's
    batch dims)."""
    owner = "householder_product"
    check_tensor(owner, "A", A)
    check_tensor(owner, "tau", tau)
    check_float(owner, "A", A)
    check_same_dtype(owner, [("A", A), ("tau", tau)])
    check_matrices(owner, "A", A)
    m, n = A.shape[-2], A.shape[-1]
    if m < n or tau.ndim != A.ndim - 1 or tau.shape[:-1] != A.shape[:-2] or tau.shape[-1] > n:
        raise ShapeError(f"linalg.{owner}: expected A [..., m, n] with m >= n and tau [..., k] "
                         f"with k <= n and A's batch dims, got A {list(A.shape)} and tau "
                         f"{list(tau.shape)}")
    rows = mint.arange(m).unsqueeze(-1)
    result = batch_identity(A, m, n)
    # Q = H_1 (H_2 (... (H_k E))): each reflection applied to the result so far.
    for i in reversed(range(tau.shape[-1])):
        v = mint.where(rows > i, A[..., :, i:i + 1], mint.where(rows == i, 1.0, 0.0))
        scaled = v * tau[..., i:i + 1].unsqueeze(-1)
        result = result - mint.matmul(scaled, mint.matmul(v.mT, result))
    return result


def tensorinv(A, ind=2):  # noqa: N803
    """The inverse of ``A`` for tensordot over ``ind`` dims: A's shape[:ind] and shape[ind:] must
    have equal products p; the result, of shape shape[ind:] + shape[:ind], is inv of A as a [p,
    p] matrix."""
    owner = "tensorinv"
    check_tensor(owner, "A", A)
    ind = checked_int(f"linalg.{owner}", "ind", ind, low=1)
    rows, cols = list(A.shape[:ind]), list(A.shape[ind:])
    if math.prod(rows) != math.prod(cols):
        raise ShapeError(f"linalg.{owner}: expected the products of A's first {ind} dims and of "
                         f"the others to be equal, got shape {list(A.shape)} ({math.prod(rows)} "
                         f"and {math.prod(cols)})")
    size = math.prod(rows)
    return inv(A.reshape([size, size])).reshape(cols + rows)


def tensorsolve(A, B, dims=None):  # noqa: N803
    """X with tensordot(A, X, X.ndim) == B: A's leading dims are B's shape, its other dims X's
    shape (their products equal). ``dims``: dims of A moved to the end first."""
    owner = "tensorsolve"
    check_tensor(owner, "A", A)
    check_tensor(owner, "B", B)
    if dims is not None:
        if isinstance(dims, int) and not isinstance(dims, bool):
            dims = (dims,)
        if not isinstance(dims, (list, tuple)):
            raise KilnTypeError(f"linalg.{owner}: dims must be None or a sequence of dims, got "
                                f"{type(dims).__name__} {dims!r}")
        A = movedim(A, tuple(dims), tuple(range(A.ndim - len(dims), A.ndim)))  # noqa: N806
    solution_shape = list(A.shape[B.ndim:])
    size = math.prod(solution_shape)
    if B.ndim > A.ndim or math.prod(A.shape[:B.ndim]) != size or B.numel() != size:
        raise ShapeError(f"linalg.{owner}: expected A's leading dims to hold B's shape "
                         f"{list(B.shape)} and its other dims as many elements, got A "
                         f"{list(A.shape)}")
    return solve(A.reshape([size, size]), B.reshape([size])).reshape(solution_shape)


def cross(input, other, *, dim=-1):  # noqa: A002  (PyTorch's names)
    """The cross product of the 3-vectors along ``dim`` of two tensors of one dtype and number of
    dims, broadcast together (kiln.mint.cross)."""
    return _cross(input, other, dim)


def vecdot(x, y, *, dim=-1):
    """The dot products of the vectors along ``dim`` of ``x`` and ``y`` (floating point, one
    dtype), broadcast together: sum(x * y, dim)."""
    owner = "vecdot"
    check_tensor(owner, "x", x)
    check_tensor(owner, "y", y)
    if not x.dtype.is_floating_point:
        raise DTypeError(f"linalg.{owner}: expected floating-point tensors, got {x.dtype.name}")
    check_same_dtype(owner, [("x", x), ("y", y)])
    product = x * y
    dim = wrap_dim(f"linalg.{owner}", "dim", checked_int(f"linalg.{owner}", "dim", dim),
                   product.ndim)
    return mint.sum(product, [dim], False)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):  # noqa: N803
    """The diagonals of the matrices in the dims ``dim1`` and ``dim2`` of ``A`` (``offset`` above
    the main one, below for negative), as its last dim (kiln.mint.diagonal)."""
    check_tensor("diagonal", "A", A)
    return _diagonal(A, offset, dim1, dim2)


def vander(x, *, N=None):  # noqa: N803
    """The Vandermonde matrices [..., n, N] of the vectors ``x`` [..., n]: columns x^0, x^1, ...,
    x^(N-1) (N defaults to n and must be at least 2, as PyTorch's). Float32 / float64 stay;
    integer inputs give int64."""
    owner = "vander"
    check_tensor(owner, "x", x)
    if x.dtype not in (_C.dtype.float32, _C.dtype.float64) and (
            x.dtype.is_floating_point or x.dtype == _C.dtype.bool):
        raise DTypeError(f"linalg.{owner}: expected a float32, float64 or integer tensor, got "
                         f"{x.dtype.name}")
    if x.ndim == 0:
        x = x.unsqueeze(0)
    columns = x.shape[-1] if N is None else checked_int(f"linalg.{owner}", "N", N)
    if columns < 2:
        raise KilnValueError(f"linalg.{owner}: N must be at least 2, got {columns}")
    shape = list(x.shape) + [columns - 1]
    powers = cumprod(x.unsqueeze(-1).expand(shape), -1)
    return mint.cat([mint.ones(list(x.shape) + [1], dtype=powers.dtype), powers], -1)


def logdet(input):  # noqa: A002  (torch.logdet's names)
    """torch.logdet: the log of the determinants of square matrices ``input``: NaN for a
    negative determinant, -inf for 0."""
    check_tensor("logdet", "input", input)
    sign, logabsdet = slogdet(input)
    return mint.where(sign < 0, math.nan, logabsdet)


def cholesky_solve(input, input2, upper=False):  # noqa: A002  (torch.cholesky_solve's names)
    """torch.cholesky_solve: X with (L @ L.mT) @ X == B for B = ``input`` [..., n, k] and the
    lower Cholesky factors L = ``input2`` (with ``upper``, the upper factors U, A = U.mT @ U);
    batch dims broadcast. Only L's triangle is read, so its gradient is zero outside it
    (PyTorch's treats L as a full matrix: they agree on the triangle)."""
    owner = "cholesky_solve"
    B, L = check_tensor(owner, "input", input), check_tensor(owner, "input2", input2)  # noqa: N806
    upper = check_flag(owner, "upper", upper)
    check_matrices(owner, "input", B)
    check_matrices(owner, "input2", L, square=True)
    # L y = B then L^T x = y (U^T y = B then U x = y with upper).
    y = solve_triangular(L.mT if upper else L, B, upper=False)
    return solve_triangular(L if upper else L.mT, y, upper=True)


def cholesky_inverse(input, upper=False):  # noqa: A002  (torch.cholesky_inverse's names)
    """torch.cholesky_inverse: the inverse of L @ L.mT (U.mT @ U with ``upper``) for Cholesky
    factors L = ``input`` [..., n, n] (see cholesky_solve)."""
    check_tensor("cholesky_inverse", "input", input)
    check_matrices("cholesky_inverse", "input", input, square=True)
    return cholesky_solve(batch_identity(input, input.shape[-1]), input, upper)


def pinverse(input, rcond=1e-15):  # noqa: A002
    """torch.pinverse: pinv with relative tolerance ``rcond``."""
    return pinv(input, rcond=rcond)
