// Dense linear algebra on batches of matrices: factorizations, solves, determinants and
// decompositions, as torch.linalg names them (part of kiln/functional.h).
//
//   Tensor x = kiln::linalg::solve(a, b);                  // a @ x == b
//   auto [q, r] = kiln::linalg::qr(a);                     // a == q @ r
//   auto [w, v] = kiln::linalg::eigh(a);                   // a == v @ diag(w) @ v^T
//   auto [u, s, vh] = kiln::linalg::svd(a, /*full_matrices=*/false);
//
// Every function takes matrices in the last two dims of a float32 or float64 tensor; leading
// dims are a batch (broadcast between two operands). Results keep the input's dtype; the
// factorizations compute in float64 whatever the input (one code path, and float32 results as
// accurate as their rounding allows). Wrong dtypes and shapes are typed errors naming the
// function. A factorization that fails on a matrix (cholesky of a matrix that is not positive
// definite, solve / inv of a singular one) is a kValue error naming the batch element, raised
// with the op's other errors; the *_ex forms return LAPACK's `info` (int32 per matrix: 0 on
// success) instead.
//
// Eigenvectors and singular vectors are unique only up to sign, and for repeated values up to a
// rotation within their subspace: Kiln fixes each sign so that the vector's (V's column's) entry
// of largest magnitude is positive, which makes them move smoothly with the matrix; eigenvalues
// are ascending, singular values descending. All are differentiable with PyTorch's gradients; the
// gradients of eigh and svd are not defined where eigenvalues (singular values) repeat, and those
// of qr only for m >= n in "reduced" mode, square "complete" mode and m < n in either (as PyTorch).
#pragma once

#include <string>
#include <tuple>

#include "kiln/export.h"
#include "kiln/tensor.h"

namespace kiln::linalg {

/// (L, info): the lower Cholesky factor of the symmetric positive-definite `a` (L @ L^T == a;
/// only a's lower triangle is read), or with `upper` its upper factor U = L^T (only the upper
/// triangle read, as PyTorch). info[b] is 0, or
/// k when the leading minor of order k of matrix b is not positive definite (then L is
/// unspecified); `check_errors` raises instead.
KILN_API std::tuple<Tensor, Tensor> cholesky_ex(const Tensor& a, bool upper = false,
                                                bool check_errors = false);
KILN_API Tensor cholesky(const Tensor& a, bool upper = false);

/// (LU, pivots, info): a = P @ L @ U by Gaussian elimination with partial pivoting, for any
/// [m, n] matrices; L (unit lower, its diagonal not stored) and U packed in LU; pivots int32
/// [..., min(m, n)], LAPACK's 1-based row swaps. info[b] is 0, or the first k with U[k-1, k-1]
/// == 0 (the factorization is complete, U is singular).
KILN_API std::tuple<Tensor, Tensor, Tensor> lu_factor_ex(const Tensor& a,
                                                         bool check_errors = false);
/// (LU, pivots); a singular matrix is an error.
KILN_API std::tuple<Tensor, Tensor> lu_factor(const Tensor& a);
/// (P, L, U) with a == P @ L @ U: the unpacked lu_factor.
KILN_API std::tuple<Tensor, Tensor, Tensor> lu(const Tensor& a);
/// The permutation matrices P (of LU's dtype) of LU-factor pivots for m-row matrices.
KILN_API Tensor lu_permutation(const Tensor& pivots, int64_t m, DType dtype);
/// X with A @ X == b (X @ A == b unless `left`; A^T in place of A with `adjoint`), A given by
/// lu_factor's (LU, pivots); b is [..., n, k].
KILN_API Tensor lu_solve(const Tensor& lu, const Tensor& pivots, const Tensor& b, bool left = true,
                         bool adjoint = false);

/// (X, info): X with a @ X == b (X @ a == b unless `left`). b is a batch of matrices, or of
/// vectors when it is 1-d or has a's shape without its last dim (then X is too).
KILN_API std::tuple<Tensor, Tensor> solve_ex(const Tensor& a, const Tensor& b, bool left = true,
                                             bool check_errors = false);
KILN_API Tensor solve(const Tensor& a, const Tensor& b, bool left = true);
/// X with a @ X == b (X @ a == b unless `left`) for triangular a: only its `upper` (else lower)
/// triangle is read, and not its diagonal (taken as ones) with `unitriangular`.
KILN_API Tensor solve_triangular(const Tensor& a, const Tensor& b, bool upper, bool left = true,
                                 bool unitriangular = false);
/// (inverse, info) and the inverse of square matrices.
KILN_API std::tuple<Tensor, Tensor> inv_ex(const Tensor& a, bool check_errors = false);
KILN_API Tensor inv(const Tensor& a);

/// (sign, logabsdet): det(a) == sign * exp(logabsdet); a singular matrix has sign 0 and
/// logabsdet -inf.
KILN_API std::tuple<Tensor, Tensor> slogdet(const Tensor& a);
/// The determinants, the product of LU's pivots (its gradient needs a invertible).
KILN_API Tensor det(const Tensor& a);

/// (Q, R) with a == Q @ R, Q's columns orthonormal and R upper triangular (Householder, R's
/// diagonal with LAPACK's signs). mode "reduced": Q [m, k], R [k, n] for k = min(m, n);
/// "complete": Q [m, m], R [m, n]; "r": R only (Q is an empty tensor).
KILN_API std::tuple<Tensor, Tensor> qr(const Tensor& a, const std::string& mode = "reduced");

/// (eigenvalues, eigenvectors) of symmetric `a`: ascending w and orthonormal columns V with
/// a == V @ diag(w) @ V^T; only the lower (uplo "L") or upper ("U") triangle is read.
KILN_API std::tuple<Tensor, Tensor> eigh(const Tensor& a, const std::string& uplo = "L");
KILN_API Tensor eigvalsh(const Tensor& a, const std::string& uplo = "L");

/// (U, S, Vh) with a == U @ diag(S) @ Vh, S descending and non-negative (k = min(m, n) of
/// them); U [m, m] and Vh [n, n] with `full_matrices`, else [m, k] and [k, n]. Householder
/// bidiagonalization and Golub-Kahan implicit QR.
KILN_API std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& a, bool full_matrices = true);
/// The singular values alone.
KILN_API Tensor svdvals(const Tensor& a);

}  // namespace kiln::linalg
