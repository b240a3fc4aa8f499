"""The dense linear algebra MultivariateNormal, LowRankMultivariateNormal and their KL
divergences need, in the forms they use it: Cholesky factors, lower-triangular solves and the
quantities built from them, on kiln.linalg's primitives (differentiable and traceable by kiln.jit
like any op). The low-rank forms (W W^T + D for a factor W [..., n, m] and a diagonal D [..., n])
work through the capacitance matrix C = I + W^T D^-1 W [..., m, m], as PyTorch's: the matrix
determinant lemma gives log|W W^T + D| = log|C| + log|D|, the Woodbury identity gives
(W W^T + D)^-1 = D^-1 - D^-1 W C^-1 W^T D^-1, so nothing of size n x n is factored.
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


def trace_xxt(matrix):
    """tr(X X^T) of each ``matrix`` X [..., n, m]: the sum of its squared entries."""
    return mint.sum(matrix * matrix, (-2, -1))


def _scaled_factor_t(factor, diag):
    """W^T D^-1 [..., m, n] for the factor W [..., n, m] and the diagonal D [..., n]."""
    return factor.mT / diag.unsqueeze(-2)


def capacitance_tril(factor, diag):
    """The lower Cholesky factor of the capacitance matrix I + W^T D^-1 W [..., m, m] of the factor
    W ``factor`` [..., n, m] and the diagonal D ``diag`` [..., n]."""
    m = factor.shape[-1]
    capacitance = mint.matmul(_scaled_factor_t(factor, diag), factor)
    return cholesky(capacitance + mint.eye(m, dtype=capacitance.dtype))


def lowrank_logdet(diag, capacitance_lower):
    """log|W W^T + D| = log|C| + log|D| (the matrix determinant lemma) from the diagonal D
    ``diag`` [..., n] and the Cholesky factor of the capacitance C [..., m, m]."""
    return 2 * half_log_det(capacitance_lower) + mint.sum(mint.log(diag), -1)


def woodbury_factor(factor, diag, capacitance_lower):
    """A = L_C^-1 W^T D^-1 [..., m, n], so that (W W^T + D)^-1 = D^-1 - A^T A (the Woodbury
    identity) for the factor W [..., n, m], the diagonal D [..., n] and the Cholesky factor L_C
    of the capacitance."""
    return solve_lower(capacitance_lower, _scaled_factor_t(factor, diag))


def lowrank_mahalanobis(factor, diag, diff, capacitance_lower):
    """The squared Mahalanobis distance diff^T (W W^T + D)^-1 diff of each ``diff`` [..., n] by
    the Woodbury identity, batch dimensions broadcast."""
    projected = matvec(_scaled_factor_t(factor, diag), diff)
    return mint.sum(diff * diff / diag, -1) - mahalanobis(capacitance_lower, projected)
