"""The dense linear algebra MultivariateNormal needs, composed of kiln.mint ops: kiln.mint has no
Cholesky factorisation or triangular solve. Each loops over the matrix size n in Python (n
steps of batched ops), which suits the event sizes of distributions (up to a few hundred), not
large matrices; autograd and kiln.jit go through the steps as through any ops.
"""

from .. import mint


def cholesky(matrix):
    """The lower Cholesky factor L of the symmetric positive-definite ``matrix`` [..., n, n]
    (L @ L.mT == matrix), column by column (Cholesky-Crout). Only the lower triangle is read. A
    matrix that is not positive definite gives NaN from its first non-positive pivot on."""
    n = matrix.shape[-1]
    rows = mint.arange(n)
    columns = []
    for j in range(n):
        column = matrix[..., :, j]
        if columns:
            done = mint.stack(columns, -1)  # [..., n, j]: the columns found so far
            column = column - mint.matmul(done, done[..., j, :].unsqueeze(-1)).squeeze(-1)
        pivot = mint.sqrt(column[..., j:j + 1])
        columns.append(mint.where(rows >= j, column / pivot, 0.0))
    return mint.stack(columns, -1)


def solve_lower(lower, rhs):
    """X with ``lower @ X == rhs`` for the lower-triangular ``lower`` [..., n, n] and ``rhs``
    [..., n, k] (batch dimensions broadcast), by forward substitution."""
    rows = []
    for i in range(lower.shape[-1]):
        row = rhs[..., i, :]
        if rows:
            done = mint.stack(rows, -2)  # [..., i, k]: the rows of X found so far
            row = row - mint.matmul(lower[..., i:i + 1, :i], done).squeeze(-2)
        rows.append(row / lower[..., i, i:i + 1])
    return mint.stack(rows, -2)


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
