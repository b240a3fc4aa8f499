"""kiln.linalg's factorizations, solves, determinants and decompositions: the C++ primitives of
kiln._C.linalg (include/kiln/functional/linalg.h) with torch.linalg's signatures, named-tuple
results and argument checks (see the package documentation)."""

import collections

from ..errors import KilnNotImplementedError, KilnTypeError, KilnValueError
from ._common import (batch_identity, check_driver, check_flag, check_matrices, check_tensor,
                      mint, prims)

__all__ = ["LinAlgError", "CholeskyEx", "LUFactor", "LUFactorEx", "PLU", "SolveEx", "InvEx",
           "SignLogAbsDet", "QR", "Eigh", "SVD", "cholesky", "cholesky_ex", "lu_factor",
           "lu_factor_ex", "lu", "lu_solve", "solve", "solve_ex", "solve_triangular", "inv",
           "inv_ex", "det", "slogdet", "qr", "eigh", "eigvalsh", "svd", "svdvals", "eig",
           "eigvals"]

# A factorization that fails on a matrix (cholesky of one that is not positive definite, solve or
# inv of a singular one) raises kiln's KilnValueError, under PyTorch's name too.
LinAlgError = KilnValueError

# The named tuples, with the field names of torch.return_types.linalg_*.
CholeskyEx = collections.namedtuple("CholeskyEx", ["L", "info"])
LUFactor = collections.namedtuple("LUFactor", ["LU", "pivots"])
LUFactorEx = collections.namedtuple("LUFactorEx", ["LU", "pivots", "info"])
PLU = collections.namedtuple("PLU", ["P", "L", "U"])
SolveEx = collections.namedtuple("SolveEx", ["result", "info"])
InvEx = collections.namedtuple("InvEx", ["inverse", "info"])
SignLogAbsDet = collections.namedtuple("SignLogAbsDet", ["sign", "logabsdet"])
QR = collections.namedtuple("QR", ["Q", "R"])
Eigh = collections.namedtuple("Eigh", ["eigenvalues", "eigenvectors"])
SVD = collections.namedtuple("SVD", ["U", "S", "Vh"])

# The routine names PyTorch's svd takes (cuSOLVER's, on CUDA only).
_SVD_DRIVERS = ("gesvd", "gesvdj", "gesvda")


def cholesky_ex(A, *, upper=False, check_errors=False):  # noqa: N803  (PyTorch's names)
    """(L, info): the lower Cholesky factor of the symmetric positive-definite matrices ``A``
    [..., n, n] (L @ L.mT == A; only A's lower triangle is read), or with ``upper`` its upper
    factor L.mT (only the upper triangle read, as PyTorch's). info (int32, A's batch shape) is
    0, or k where the leading minor of order k is not positive definite (L is then
    unspecified); ``check_errors`` raises a LinAlgError instead."""
    check_tensor("cholesky_ex", "A", A)
    return CholeskyEx(*prims.cholesky_ex(A, check_flag("cholesky_ex", "upper", upper),
                                         check_flag("cholesky_ex", "check_errors", check_errors)))


def cholesky(A, *, upper=False):  # noqa: N803
    """The Cholesky factor of ``A`` (see cholesky_ex); a matrix that is not positive definite is
    a LinAlgError naming its batch element."""
    check_tensor("cholesky", "A", A)
    return prims.cholesky_ex(A, check_flag("cholesky", "upper", upper), True)[0]


def _check_pivot(owner, pivot):
    if not check_flag(owner, "pivot", pivot):
        raise KilnNotImplementedError(f"linalg.{owner}: LU without pivoting (pivot=False) is not "
                                      f"implemented (PyTorch refuses it on the CPU too); use "
                                      f"pivot=True")


def lu_factor_ex(A, *, pivot=True, check_errors=False):  # noqa: N803
    """(LU, pivots, info): A = P @ L @ U by Gaussian elimination with partial pivoting, for any
    matrices [..., m, n]. L (unit lower triangular, its diagonal not stored) and U share LU;
    pivots (int32 [..., min(m, n)]) are LAPACK's 1-based row swaps. info is 0, or the first k
    with U[k-1, k-1] == 0 (the factorization is complete, U singular); ``check_errors`` raises
    a LinAlgError for it instead."""
    check_tensor("lu_factor_ex", "A", A)
    _check_pivot("lu_factor_ex", pivot)
    return LUFactorEx(*prims.lu_factor_ex(A, check_flag("lu_factor_ex", "check_errors",
                                                        check_errors)))


def lu_factor(A, *, pivot=True):  # noqa: N803
    """(LU, pivots) of lu_factor_ex; a singular matrix is a LinAlgError (as PyTorch's: lu_solve
    would divide by zero)."""
    check_tensor("lu_factor", "A", A)
    _check_pivot("lu_factor", pivot)
    LU, pivots, _ = prims.lu_factor_ex(A, True)  # noqa: N806
    return LUFactor(LU, pivots)


def lu(A, *, pivot=True):  # noqa: N803
    """(P, L, U) with A == P @ L @ U for matrices A [..., m, n]: P [..., m, m] a permutation,
    L [..., m, k] unit lower triangular and U [..., k, n] upper triangular, k = min(m, n). A
    singular matrix is fine (U is singular)."""
    check_tensor("lu", "A", A)
    _check_pivot("lu", pivot)
    check_matrices("lu", "A", A)  # (before reading its shape: the primitive checks it later)
    LU, pivots, _ = prims.lu_factor_ex(A, False)  # noqa: N806
    m, n = A.shape[-2], A.shape[-1]
    k = min(m, n)
    lower = mint.tril(LU[..., :, :k], -1) + batch_identity(LU, m, k)
    return PLU(prims.lu_permutation(pivots, m, A.dtype), lower, mint.triu(LU[..., :k, :]))


def lu_solve(LU, pivots, B, *, left=True, adjoint=False):  # noqa: N803
    """X with A @ X == B (X @ A == B unless ``left``; A.mT in place of A with ``adjoint``) for A
    given by lu_factor's (LU, pivots); B is [..., n, k] (batch dims broadcast)."""
    for name, value in (("LU", LU), ("pivots", pivots), ("B", B)):
        check_tensor("lu_solve", name, value)
    return prims.lu_solve(LU, pivots, B, check_flag("lu_solve", "left", left),
                          check_flag("lu_solve", "adjoint", adjoint))


def solve_ex(A, B, *, left=True, check_errors=False):  # noqa: N803
    """(result, info): X with A @ X == B (X @ A == B unless ``left``) for square A [..., n, n].
    B is a batch of matrices, or of vectors when it is 1-d or has A's shape without its last
    dim (X then too); batch dims broadcast. info is 0, or k > 0 for a singular A;
    ``check_errors`` raises a LinAlgError instead."""
    check_tensor("solve_ex", "A", A)
    check_tensor("solve_ex", "B", B)
    return SolveEx(*prims.solve_ex(A, B, check_flag("solve_ex", "left", left),
                                   check_flag("solve_ex", "check_errors", check_errors)))


def solve(A, B, *, left=True):  # noqa: N803
    """X of solve_ex; a singular A is a LinAlgError naming its batch element."""
    check_tensor("solve", "A", A)
    check_tensor("solve", "B", B)
    return prims.solve_ex(A, B, check_flag("solve", "left", left), True)[0]


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):  # noqa: N803
    """X with A @ X == B (X @ A == B unless ``left``) for triangular A [..., n, n]: only its upper
    (``upper``) or lower triangle is read, and not its diagonal (taken as ones) with
    ``unitriangular``. B is [..., n, k] (batch dims broadcast). A zero on the diagonal gives
    infinities or NaN, as in PyTorch (no error)."""
    check_tensor("solve_triangular", "A", A)
    check_tensor("solve_triangular", "B", B)
    return prims.solve_triangular(A, B, check_flag("solve_triangular", "upper", upper),
                                  check_flag("solve_triangular", "left", left),
                                  check_flag("solve_triangular", "unitriangular", unitriangular))


def inv_ex(A, *, check_errors=False):  # noqa: N803
    """(inverse, info) of the square matrices ``A``: info is 0, or k > 0 for a singular matrix
    (its inverse is then unspecified); ``check_errors`` raises a LinAlgError instead."""
    check_tensor("inv_ex", "A", A)
    return InvEx(*prims.inv_ex(A, check_flag("inv_ex", "check_errors", check_errors)))


def inv(A):  # noqa: N803
    """The inverse of the square matrices ``A``; a singular one is a LinAlgError."""
    check_tensor("inv", "A", A)
    return prims.inv_ex(A, True)[0]


def det(A):  # noqa: N803
    """The determinants of the square matrices ``A`` [..., n, n] (shape [...]); its gradient
    needs A invertible."""
    check_tensor("det", "A", A)
    return prims.det(A)


def slogdet(A):  # noqa: N803
    """(sign, logabsdet) with det(A) == sign * exp(logabsdet): more accurate than det for large
    or small determinants. A singular matrix has sign 0 and logabsdet -inf."""
    check_tensor("slogdet", "A", A)
    return SignLogAbsDet(*prims.slogdet(A))


def qr(A, mode="reduced"):  # noqa: N803
    """(Q, R) with A == Q @ R for matrices A [..., m, n], Q's columns orthonormal and R upper
    triangular (Householder reflections: R's diagonal has LAPACK's signs). ``mode`` "reduced":
    Q [..., m, k] and R [..., k, n], k = min(m, n); "complete": Q [..., m, m], R [..., m, n];
    "r": R alone, Q an empty tensor."""
    check_tensor("qr", "A", A)
    if not isinstance(mode, str):
        raise KilnTypeError(f"linalg.qr: mode must be a string ('reduced', 'complete' or 'r'), "
                            f"got {type(mode).__name__} {mode!r}")
    return QR(*prims.qr(A, mode))


def _uplo(owner, UPLO):  # noqa: N803
    """``UPLO`` upper-cased (PyTorch takes 'l' and 'u' too); the primitive refuses the rest."""
    if not isinstance(UPLO, str):
        raise KilnTypeError(f"linalg.{owner}: UPLO must be 'L' or 'U', got "
                            f"{type(UPLO).__name__} {UPLO!r}")
    return UPLO.upper() if UPLO in ("l", "u") else UPLO


def eigh(A, UPLO="L"):  # noqa: N803
    """(eigenvalues, eigenvectors) of the symmetric matrices ``A`` [..., n, n]: ascending w
    [..., n] and orthonormal columns V [..., n, n] with A == V @ diag(w) @ V.mT. Only the lower
    (UPLO "L") or upper ("U") triangle is read."""
    check_tensor("eigh", "A", A)
    return Eigh(*prims.eigh(A, _uplo("eigh", UPLO)))


def eigvalsh(A, UPLO="L"):  # noqa: N803
    """The eigenvalues of eigh, ascending; their gradient is defined for repeated ones too."""
    check_tensor("eigvalsh", "A", A)
    return prims.eigh(A, _uplo("eigvalsh", UPLO))[0]


def svd(A, full_matrices=True, *, driver=None):  # noqa: N803
    """(U, S, Vh) with A == U @ diag(S) @ Vh for matrices A [..., m, n]: S [..., k] descending and
    non-negative, k = min(m, n); U [..., m, m] and Vh [..., n, n] with ``full_matrices``, else
    [..., m, k] and [..., k, n]. ``driver`` (PyTorch's cuSOLVER choice) is accepted and
    ignored."""
    check_tensor("svd", "A", A)
    check_driver("svd", driver, _SVD_DRIVERS)
    return SVD(*prims.svd(A, check_flag("svd", "full_matrices", full_matrices)))


def svdvals(A, *, driver=None):  # noqa: N803
    """The singular values of svd, descending; their gradient is defined for repeated ones
    too."""
    check_tensor("svdvals", "A", A)
    check_driver("svdvals", driver, _SVD_DRIVERS)
    return prims.svd(A, False)[1]


def _no_complex(owner):
    raise KilnNotImplementedError(f"linalg.{owner}: the eigenvalues of a general matrix are "
                                  f"complex, and Kiln has no complex dtype; for symmetric "
                                  f"matrices use kiln.linalg.eigh / eigvalsh")


def eig(A):  # noqa: N803
    """Not available: a KilnNotImplementedError (Kiln has no complex dtype; see eigh)."""
    _no_complex("eig")


def eigvals(A):  # noqa: N803
    """Not available: a KilnNotImplementedError (Kiln has no complex dtype; see eigvalsh)."""
    _no_complex("eigvals")
