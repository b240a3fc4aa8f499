// The dense factorizations behind kiln::linalg, one matrix at a time, in float64, on row-major
// buffers (private to libkiln; the ops in linalg_factor.cc and linalg_decompose.cc run them over
// a batch).
//
// They are the textbook unblocked algorithms (Golub & Van Loan, "Matrix Computations"): their
// inner loops run along rows, so a row update vectorizes, but they do not tile for the cache.
// eigh reduces to tridiagonal form and runs implicit QL (EISPACK's tred2 / imtql2); svd reduces to
// bidiagonal form and runs Golub-Kahan implicit QR (Golub-Reinsch). Both keep their vectors
// transposed so that each rotation combines two contiguous rows, and fix the vectors' signs
// (the largest entry of each eigenvector and of each of Vh's rows positive). They suit the
// matrices of models (up to a few hundred rows); a blocked path for large matrices would go
// here. qr, eigh and svd first scale the matrix by a power of two (exactly) so that their sums
// of squares neither overflow nor underflow.
#pragma once

#include <cstdint>

namespace kiln::detail {

/// Cholesky in place: a [n, n]'s lower triangle becomes L with L @ L^T == a (the strict upper
/// triangle is left as it was). Returns 0, or k when the leading minor of order k is not
/// positive definite (a is then partly overwritten).
int64_t cholesky_lower(double* a, int64_t n);

/// LU with partial pivoting in place: a [m, n] becomes L (unit lower, below the diagonal) and U,
/// and pivots [min(m, n)] LAPACK's 1-based row swaps (row i swapped with pivots[i] - 1, in
/// order). Returns 0, or the first 1-based k with U[k-1][k-1] == 0.
int64_t lu_factor(double* a, int64_t m, int64_t n, int32_t* pivots);

/// b [n, k] becomes A^{-1} b, or A^{-T} b with `transpose`, for A given by lu_factor's packed
/// [n, n] lu and pivots. A zero pivot gives inf / NaN.
void lu_solve(const double* lu, const int32_t* pivots, int64_t n, double* b, int64_t k,
              bool transpose);

/// b [n, k] becomes T^{-1} b for the triangular T whose element (i, j) is a[i * row_stride + j
/// * col_stride] (so a transposed matrix is read by swapping the strides): its upper (else lower)
/// triangle, with ones for its diagonal when `unit`.
void triangular_solve(const double* a, int64_t row_stride, int64_t col_stride, int64_t n, double* b,
                      int64_t k, bool upper, bool unit);

/// Householder QR of a [m, n] in place: a becomes R (its rows below min(m, n) and below the
/// diagonal zeroed) and, when q is not null, q [m, q_cols] (q_cols = min(m, n) or m) the first
/// q_cols columns of Q. R's diagonal has LAPACK's signs: a column already triangular is not
/// reflected.
void householder_qr(double* a, int64_t m, int64_t n, double* q, int64_t q_cols);

/// Eigen-decomposition of the symmetric a [n, n] (both triangles read; a is destroyed) by
/// Householder tridiagonalization and implicit QL with Wilkinson shifts: ascending w [n] and,
/// when v is not null, orthonormal eigenvectors in v [n, n]'s columns. Returns false, leaving w
/// and v unspecified, for a matrix with a NaN or an infinity or when the iteration did not
/// converge.
bool symmetric_eigen(double* a, int64_t n, double* w, double* v);

/// SVD of a [m, n] (destroyed) by Householder bidiagonalization and Golub-Kahan implicit QR with
/// Wilkinson shifts: s [k] descending for k = min(m, n) and, when u is not null,
/// u [m, u_cols] and vt [vt_rows, n] with u_cols, vt_rows = k, or m and n for the full
/// matrices.
/// Returns false, leaving the results unspecified, for a matrix with a NaN or an infinity or when
/// the iteration did not converge.
bool singular_value_decomposition(double* a, int64_t m, int64_t n, double* s, double* u,
                                  int64_t u_cols, double* vt, int64_t vt_rows);

}  // namespace kiln::detail
