"""kiln.linalg's functions of the singular values, composed of the primitives and kiln.mint ops:
matrix_norm, norm, cond, matrix_rank, pinv and lstsq (see the package documentation)."""

import collections
import math
import numbers

from .. import _C
from .._checks import checked_int, wrap_dim
from ..autograd import Function, no_grad
from ..errors import DTypeError, KilnTypeError, KilnValueError, ShapeError
from ..mint._norms import vector_norm
from ..mint._products import movedim
from ._common import (FLOAT_DTYPES, check_driver, check_flag, check_float, check_matrices,
                      check_same_dtype, check_tensor, default_rtol, is_vector_rhs, mint, prims)

__all__ = ["Lstsq", "vector_norm", "matrix_norm", "norm", "cond", "matrix_rank", "pinv", "lstsq"]

Lstsq = collections.namedtuple("Lstsq", ["solution", "residuals", "rank", "singular_values"])

_MATRIX_ORDERS = ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf)
# The routine names PyTorch's lstsq takes on the CPU (LAPACK's; "gelsy" by default).
_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _matrix_order(owner, ord):  # noqa: A002  (PyTorch's name)
    if isinstance(ord, str):
        if ord in ("fro", "nuc"):
            return ord
    elif isinstance(ord, numbers.Real) and not isinstance(ord, bool) and ord in _MATRIX_ORDERS:
        return float(ord)
    raise KilnValueError(f"linalg.{owner}: expected ord 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, "
                         f"got {ord!r}")


def _matrix_dims(owner, A, dim):  # noqa: N803
    """The two distinct dims ``dim`` names, non-negative."""
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise KilnValueError(f"linalg.{owner}: dim must be a pair of dims, got {dim!r}")
    first, second = (wrap_dim(f"linalg.{owner}", "dim", checked_int(f"linalg.{owner}", "dim", d),
                              A.ndim) for d in dim)
    if first == second:
        raise KilnValueError(f"linalg.{owner}: dim must name two different dims, got {dim!r}")
    return first, second


def _check_norm_dtype(owner, A, dtype):  # noqa: N803
    if not A.dtype.is_floating_point:
        raise DTypeError(f"linalg.{owner}: expected a floating-point tensor, got {A.dtype.name}")
    if dtype is not None and (not isinstance(dtype, _C.dtype) or not dtype.is_floating_point
                              or _C.promote_types(A.dtype, dtype) != dtype):
        raise DTypeError(f"linalg.{owner}: dtype must be a floating-point dtype that "
                         f"{A.dtype.name} converts to without loss, got {dtype!r}")


def _extreme(values, dim, keepdim, largest, owner):
    """The max (``largest``) or min of the non-negative ``values`` over ``dim``; over no
    elements the max is 0 (a norm of nothing) and the min a KilnValueError, as in PyTorch."""
    if values.shape[dim] == 0:
        if not largest:
            raise KilnValueError(f"linalg.{owner}: the minimum over an empty dim (of shape "
                                 f"{list(values.shape)}) is not defined")
        return mint.sum(values, [dim], keepdim)
    return mint.amax(values, [dim], keepdim) if largest else mint.amin(values, [dim], keepdim)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):  # noqa: N803,A002
    """The matrix norm of order ``ord`` of the matrices in the dims ``dim`` of ``A``: "fro"
    (Frobenius), "nuc" (nuclear: the sum of the singular values), 2 / -2 (the largest / smallest
    singular value), 1 / -1 (the max / min column sum of |A|), inf / -inf (the max / min row
    sum). ``dtype``: computed and returned in it (a float dtype A's converts to without loss).
    The singular-value orders take float32 and float64 (after ``dtype``); the others any float
    dtype."""
    owner = "matrix_norm"
    check_tensor(owner, "A", A)
    order = _matrix_order(owner, ord)
    check_flag(owner, "keepdim", keepdim)
    check_matrices(owner, "A", A)
    first, second = _matrix_dims(owner, A, dim)
    _check_norm_dtype(owner, A, dtype)
    if order == "fro":
        return vector_norm(A, 2, [first, second], keepdim, dtype=dtype)
    if order in ("nuc", 2.0, -2.0):
        if dtype is not None:
            A = A.to(dtype)  # noqa: N806
        if A.dtype not in FLOAT_DTYPES:
            raise DTypeError(f"linalg.{owner}: ord={ord!r} needs singular values, computed for "
                             f"float32 and float64, got {A.dtype.name} (pass dtype="
                             f"kiln.float32)")
        values = prims.svd(movedim(A, (first, second), (-2, -1)), False)[1]
        if order == "nuc":
            result = mint.sum(values, [-1], False)
        else:
            result = _extreme(values, -1, False, order > 0, owner)
        if keepdim:
            for d in sorted((first, second)):
                result = result.unsqueeze(d)
        return result
    # 1 / -1: the max / min over `second` of the column sums (over `first`); inf / -inf swap them.
    if math.isinf(order):
        first, second = second, first
    sums = vector_norm(A, 1, [first], keepdim, dtype=dtype)
    if not keepdim and first < second:
        second -= 1
    return _extreme(sums, second, keepdim, order > 0, owner)


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):  # noqa: N803,A002
    """torch.linalg.norm: with ``dim`` an int or one dim, or ``ord`` None with ``dim`` None (all
    elements), vector_norm of order ``ord`` (None: 2); with ``dim`` two dims, or ``dim`` None
    and a 2-d ``A``, matrix_norm of order ``ord`` (None: "fro"). A string ord is a matrix
    order."""
    owner = "norm"
    check_tensor(owner, "A", A)
    dims = [dim] if isinstance(dim, numbers.Integral) and not isinstance(dim, bool) else dim
    if dims is not None:
        if not isinstance(dims, (tuple, list)) or len(dims) not in (1, 2):
            raise KilnValueError(f"linalg.{owner}: dim must be an int or 1 or 2 dims, got "
                                 f"{dim!r}")
    elif ord is not None and A.ndim not in (1, 2):
        raise ShapeError(f"linalg.{owner}: with ord given and dim None, A must be 1-d or 2-d "
                         f"(a vector or a matrix), got {A.ndim}-d; give dim")
    if isinstance(ord, str) or (ord is not None and (len(dims) == 2 if dims is not None
                                                     else A.ndim == 2)):
        return matrix_norm(A, ord, (0, 1) if dims is None else dims, keepdim, dtype=dtype)
    return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)


def cond(A, p=None):  # noqa: N803
    """The condition number of the matrices ``A`` [..., m, n] in the matrix norm of order ``p``:
    None or 2 (the default), the largest singular value over the smallest; -2 its inverse (both
    for any m, n); "fro", "nuc", 1, -1, inf or -inf (square matrices), norm(A) * norm(A^-1). A
    singular matrix has condition inf (0 / 0 is NaN for p = +-2, as PyTorch's); empty matrices
    0."""
    owner = "cond"
    check_tensor(owner, "A", A)
    order = 2.0 if p is None else _matrix_order(owner, p)
    check_matrices(owner, "A", A, square=order not in (2.0, -2.0))
    check_float(owner, "A", A)
    if A.numel() == 0:
        return mint.zeros(list(A.shape[:-2]), dtype=A.dtype)
    if order in (2.0, -2.0):
        values = prims.svd(A, False)[1]
        largest, smallest = values[..., 0], values[..., -1]
        return largest / smallest if order > 0 else smallest / largest
    inverse, info = prims.inv_ex(A, False)
    singular = info > 0
    # The inverse of a singular matrix is unspecified (NaN): it is kept out of the norm and of
    # the gradient.
    inverse = mint.where(singular.unsqueeze(-1).unsqueeze(-1), 0.0, inverse)
    product = matrix_norm(A, p) * matrix_norm(inverse, p)
    return mint.where(singular, math.inf, product)


def _check_tolerances(owner, legacy, legacy_name, atol, rtol):
    """Refuses ``legacy`` (pinv's rcond, matrix_rank's tol) given with atol / rtol, and atol /
    rtol that are neither None, numbers nor tensors."""
    if legacy is not None and (atol is not None or rtol is not None):
        raise KilnTypeError(f"linalg.{owner}: give {legacy_name} or atol / rtol, not both")
    for name, value in ((legacy_name, legacy), ("atol", atol), ("rtol", rtol)):
        if value is not None and not (isinstance(value, _C.Tensor) or (
                isinstance(value, numbers.Real) and not isinstance(value, bool))):
            raise KilnTypeError(f"linalg.{owner}: {name} must be None, a number or a tensor, "
                                f"got {type(value).__name__} {value!r}")


def _tolerance(A, largest, atol, rtol):  # noqa: N803
    """The threshold max(atol, rtol * largest) under which singular values count as 0, with
    PyTorch's defaults: atol 0, rtol default_rtol(A) unless atol > 0 (then 0). ``atol`` and
    ``rtol`` are numbers or tensors broadcasting with A's batch shape; ``largest`` [..., 1]."""
    if rtol is None:
        rtol = default_rtol(A)
        if isinstance(atol, _C.Tensor):
            rtol = mint.where(atol > 0, 0.0, rtol)
        elif atol is not None and atol > 0:
            rtol = 0.0
    if isinstance(rtol, _C.Tensor):
        rtol = rtol.unsqueeze(-1)
    threshold = largest * rtol
    if atol is None:
        return threshold
    if isinstance(atol, _C.Tensor):
        return mint.maximum(threshold, atol.unsqueeze(-1).to(threshold.dtype))
    return mint.clamp(threshold, min=float(atol))


def _largest(magnitudes):
    """The largest of the non-negative ``magnitudes`` [..., k] as [..., 1] ([..., 0] for k = 0:
    no threshold is needed without values)."""
    return mint.amax(magnitudes, [-1], True) if magnitudes.shape[-1] else magnitudes


def _spectrum(A, hermitian):  # noqa: N803
    """(left, values, magnitudes, right) with A == left @ diag(values) @ right.mT: the singular
    value decomposition (magnitudes the values), or with ``hermitian`` the eigendecomposition of
    A taken as symmetric (its lower triangle read; magnitudes |values|)."""
    if hermitian:
        values, vectors = prims.eigh(A, "L")
        return vectors, values, mint.abs(values), vectors
    left, values, right = prims.svd(A, False)
    return left, values, values, right.mT


def matrix_rank(A, tol=None, hermitian=False, *, atol=None, rtol=None):  # noqa: N803
    """The number of singular values of the matrices ``A`` above max(atol, rtol * the largest)
    (int64, A's batch shape); atol defaults to 0 and rtol to eps * max(m, n), or to 0 when atol
    > 0 is given (PyTorch's rule). ``tol`` (PyTorch's older form) is atol with rtol 0. With
    ``hermitian`` A is taken as symmetric (its lower triangle read) and its eigenvalues
    counted."""
    owner = "matrix_rank"
    check_tensor(owner, "A", A)
    _check_tolerances(owner, tol, "tol", atol, rtol)
    if tol is not None:
        atol, rtol = tol, 0.0
    check_flag(owner, "hermitian", hermitian)
    check_matrices(owner, "A", A, square=hermitian)
    check_float(owner, "A", A)
    with no_grad():
        magnitudes = _spectrum(A, hermitian)[2]
        threshold = _tolerance(A, _largest(magnitudes), atol, rtol)
        return mint.sum(magnitudes > threshold, [-1], False)


def _pseudo_inverse(A, atol, rtol, hermitian):  # noqa: N803
    """(pinv(A), the magnitudes of A's singular values (eigenvalues with ``hermitian``)): the
    pseudo-inverse from the values above max(atol, rtol * the largest), with PyTorch's gradient,
    and the values, for callers that need both (lstsq) from one decomposition."""
    with no_grad():
        left, values, magnitudes, right = _spectrum(A, hermitian)
        threshold = _tolerance(A, _largest(magnitudes), atol, rtol)
        inverted = mint.where(magnitudes > threshold, 1.0 / values, 0.0)
    return _PseudoInverse.apply(A, left, inverted, right), magnitudes


class _PseudoInverse(Function):
    """right @ diag(inverted) @ left^T, the pseudo-inverse of A from its decomposition, with
    PyTorch's gradient in A (pinv_backward: that of the pseudo-inverse of matrices of A's rank,
    defined where singular values repeat too, which the decomposition's is not)."""

    @staticmethod
    def forward(ctx, A, left, inverted, right):  # noqa: N803
        result = mint.matmul(right * inverted.unsqueeze(-2), left.mT)
        ctx.save_for_backward(A, result)
        return result

    @staticmethod
    def backward(ctx, grad):
        A, pinv = ctx.saved_tensors  # noqa: N806
        pinv_t, grad_t = pinv.mT, grad.mT
        matmul = mint.matmul
        if A.shape[-2] <= A.shape[-1]:
            k = matmul(grad_t, pinv)
            k_pinv_t = matmul(k, pinv_t)
            grad_a = (-matmul(pinv, k).mT + k_pinv_t - matmul(matmul(A, pinv), k_pinv_t)
                      + matmul(matmul(pinv_t, pinv), grad_t - matmul(k, A)))
        else:
            k = matmul(pinv, grad_t)
            pinv_t_k = matmul(pinv_t, k)
            grad_a = (-matmul(k, pinv).mT + matmul(matmul(grad_t - matmul(A, k), pinv), pinv_t)
                      + pinv_t_k - matmul(matmul(pinv_t_k, pinv), A))
        return grad_a, None, None, None


def pinv(A, rcond=None, hermitian=False, *, atol=None, rtol=None):  # noqa: N803
    """The Moore-Penrose pseudo-inverse [..., n, m] of the matrices ``A`` [..., m, n], from the
    singular values above max(atol, rtol * the largest) (the defaults of matrix_rank); the
    others count as 0. ``rcond`` (PyTorch's older form) is rtol with atol 0. With ``hermitian``
    A is taken as symmetric (its lower triangle read) and decomposed by eigh. Differentiable with
    PyTorch's gradient, valid where the rank does not change."""
    owner = "pinv"
    check_tensor(owner, "A", A)
    _check_tolerances(owner, rcond, "rcond", atol, rtol)
    if rcond is not None:
        atol, rtol = 0.0, rcond
    check_flag(owner, "hermitian", hermitian)
    check_matrices(owner, "A", A, square=hermitian)
    check_float(owner, "A", A)
    return _pseudo_inverse(A, atol, rtol, hermitian)[0]


def lstsq(A, B, rcond=None, *, driver=None):  # noqa: N803
    """(solution, residuals, rank, singular_values): the minimum-norm least-squares solution X
    [..., n, k] of A @ X ~= B for A [..., m, n] and B [..., m, k] (or vectors B [..., m] when B
    is 1-d or has A's shape without its last dim: X [..., n]); batch dims broadcast. Singular
    values of A up to ``rcond`` times the largest count as 0 (default eps * max(m, n)). The
    other fields are filled as PyTorch fills them for ``driver`` (its algorithm choice is
    ignored: see the package documentation): rank (int64, A's batch shape) for every driver
    but "gels"; singular_values [..., min(m, n)] for "gelsd" and "gelss"; residuals, the squared
    norms of the columns of A @ X - B [..., k], for m > n with "gels", and with "gelsd" /
    "gelss" when every matrix has full rank. An empty tensor stands for a field not filled."""
    owner = "lstsq"
    check_tensor(owner, "A", A)
    check_tensor(owner, "B", B)
    check_driver(owner, driver, _LSTSQ_DRIVERS)
    driver = driver or "gelsy"
    check_matrices(owner, "A", A)
    check_float(owner, "A", A)
    check_same_dtype(owner, [("A", A), ("B", B)])
    vector = is_vector_rhs(A, B)
    rhs = B.unsqueeze(-1) if vector else B
    if rhs.ndim < 2 or rhs.shape[-2] != A.shape[-2]:
        raise ShapeError(f"linalg.{owner}: expected B with {A.shape[-2]} rows (A is "
                         f"{list(A.shape)}), got {list(B.shape)}")
    if rcond is not None and (isinstance(rcond, bool) or not isinstance(rcond, numbers.Real)):
        raise KilnTypeError(f"linalg.{owner}: rcond must be None or a number, got "
                            f"{type(rcond).__name__} {rcond!r}")
    rtol = default_rtol(A) if rcond is None else float(rcond)
    # One SVD gives the pseudo-inverse and the rank.
    inverse, values = _pseudo_inverse(A, 0.0, rtol, False)
    solution = mint.matmul(inverse, rhs)
    empty = mint.zeros([0], dtype=A.dtype)
    m, n = A.shape[-2], A.shape[-1]
    rank = empty.to(_C.dtype.int64)
    if driver != "gels":
        with no_grad():
            rank = mint.sum(values > _largest(values) * rtol, [-1], False)
    values = values if driver in ("gelsd", "gelss") else empty
    residuals = empty
    if m > n and driver != "gelsy" and (driver == "gels" or _full_rank(owner, rank, n)):
        residuals = mint.sum(mint.square(mint.matmul(A, solution) - rhs), [-2], False)
    return Lstsq(solution.squeeze(-1) if vector else solution, residuals, rank, values)


def _full_rank(owner, rank, n):
    """Whether every rank is n: lstsq reads it (as PyTorch does) to decide whether it returns
    the residuals, which a function kiln.jit traces cannot do."""
    if _C.jit.is_tracing():
        raise KilnTypeError(f"linalg.{owner}: with driver 'gelsd' or 'gelss' and m > n, whether "
                            f"the residuals are returned depends on the ranks' values, which a "
                            f"function kiln.jit traces cannot read; use driver 'gels' (residuals "
                            f"always) or 'gelsy' (none) there")
    return bool(mint.all(rank == n).item())
