"""The dense linear algebra MultivariateNormal and its KL divergence need, in the forms they use
it: Cholesky factors, lower-triangular solves and the quantities built from them, on
kiln.linalg's primitives (differentiable and traceable by kiln.jit like any op).
"""

from .. import linalg, mint


def cholesky(matrix):
    """The lower Cholesky factor L of the symmetric positive-definite ``matrix`` [..., n, n]
    (L @ L.mT == matrix; only the lower triangle is read). A matrix that is not positive definite
    is a LinAlgError (a KilnValueError), as in PyTorch."""
    return linalg.cholesky(matrix)


def is_positive_definite(matrix):
    """Whether each symmetric ``matrix`` [..., n, n] (its lower triangle read) has a Cholesky
    factor: a bool tensor of the batch shape, with no error for those that have none."""
    return linalg.cholesky_ex(matrix).info == 0


def solve_lower(lower, rhs):
    """X with ``lower @ X == rhs`` for the lower-triangular ``lower`` [..., n, n] and ``rhs``
    [..., n, k] (batch dimensions broadcast)."""
    return linalg.solve_triangular(lower, rhs, upper=False)


def inverse_lower(lower):
    """The inverse of the lower-triangular ``lower`` [..., n, n] (itself lower-triangular)."""
    n = lower.shape[-1]
    return solve_lower(lower, mint.eye(n, dtype=lower.dtype))


def matvec(matrix, vector):
    """``matrix`` [..., m, n] times ``vector`` [..., n], batch dimensions broadcast."""
    return mint.matmul(matrix, vector.unsqueeze(-1)).squeeze(-1)


def mahalanobis(lower, diff):
    """The squared Mahalanobis distance ``diff^T (L L^T)^-1 diff`` of each ``diff`` [..., n] for
    the Cholesky factor ``lower`` [..., n, n], batch dimensions broadcast."""
    solved = solve_lower(lower, diff.unsqueeze(-1)).squeeze(-1)
    return mint.sum(solved * solved, -1)


def half_log_det(lower):
    """Half the log-determinant of L L^T, the sum of log diag(L), for the Cholesky factor
    ``lower`` [..., n, n]."""
    return mint.sum(mint.log(lower.diagonal(dim1=-2, dim2=-1)), -1)
