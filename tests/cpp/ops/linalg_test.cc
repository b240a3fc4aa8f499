// Tests for kiln::linalg (src/ops/linalg_*.cc): each factorization checked by the identity that
// defines it (L L^T = A, P L U = A, Q R = A, V diag(w) V^T = A, U diag(S) Vh = A) on random,
// batched, broadcast and strided float32 / float64 inputs; the gradient rules against finite
// differences; the failures (info and raised errors) and argument errors. NumPy and PyTorch
// comparisons live in tests/python/test_linalg.py.
#include "kiln/functional/linalg.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "grad_testing.h"
#include "kiln/functional.h"
#include "kiln/op.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::expect_close;
using testing::expect_error;
using testing::expect_grad_rule;

constexpr DType f32 = DType::kFloat32;
constexpr DType f64 = DType::kFloat64;

Tensor mT(const Tensor& x) { return transpose(x, -2, -1); }
Tensor identity(int64_t n, DType dtype) { return eye(n, std::nullopt, dtype); }

/// Random symmetric positive-definite matrices [batch..., n, n]: X X^T + n I.
Tensor spd(const Shape& batch, int64_t n, DType dtype) {
  Shape shape = batch;
  shape.push_back(n);
  shape.push_back(n);
  const Tensor x = randn(shape, dtype);
  return matmul(x, mT(x)) + identity(n, dtype) * static_cast<double>(n);
}

double tolerance(DType dtype) { return dtype == f64 ? 1e-10 : 2e-4; }

/// [..., k] -> [..., k, k] diagonal matrices.
Tensor diag(const Tensor& v) {
  return unsqueeze(v, -1) * identity(v.shape()[v.ndim() - 1], v.dtype());
}

class LinalgDTypes : public ::testing::TestWithParam<DType> {};
INSTANTIATE_TEST_SUITE_P(Float, LinalgDTypes, ::testing::Values(f32, f64));

TEST_P(LinalgDTypes, CholeskyReconstructsTheMatrix_LowerAndUpper) {
  const DType dt = GetParam();
  const Tensor a = spd({2, 3}, 5, dt);
  const Tensor l = linalg::cholesky(a);
  expect_close(l, tril(l), 0);
  expect_close(matmul(l, mT(l)), a, tolerance(dt) * 10);
  const Tensor u = linalg::cholesky(a, /*upper=*/true);
  expect_close(u, mT(l), tolerance(dt));
}

TEST(Linalg, CholeskyReadsTheLowerTriangle_OrTheUpperForAnUpperFactor) {
  const Tensor a = spd({}, 4, f64);
  const Tensor garbage_above = tril(a) + triu(randn({4, 4}, f64), 1);
  const Tensor garbage_below = triu(a) + tril(randn({4, 4}, f64), -1);
  expect_close(linalg::cholesky(garbage_above), linalg::cholesky(a), 0);
  expect_close(linalg::cholesky(garbage_below, /*upper=*/true), linalg::cholesky(a, true), 0);
}

TEST(Linalg, CholeskyFailure_IsInfoOrAnErrorNamingTheMinorAndTheBatchElement) {
  Tensor a = spd({3}, 3, f64);
  // Matrix 1 of the batch loses positive-definiteness at its second leading minor.
  const Tensor bad = Tensor::empty({3, 3}, f64);
  const std::vector<double> values{1, 2, 0, 2, 1, 0, 0, 0, 1};
  std::copy(values.begin(), values.end(), bad.data<double>());
  a = cat({split(a, 1, 0)[0], unsqueeze(bad, 0), split(a, 1, 0)[2]}, 0);
  auto [l, info] = linalg::cholesky_ex(a);
  const Tensor infos = info.contiguous();
  EXPECT_EQ(info.dtype(), DType::kInt32);
  EXPECT_EQ(infos.data<int32_t>()[0], 0);
  EXPECT_EQ(infos.data<int32_t>()[1], 2);
  EXPECT_EQ(infos.data<int32_t>()[2], 0);
  expect_error([&] { linalg::cholesky(a); }, ErrorKind::kValue,
               "leading minor of order 2 is not positive-definite) in matrix 1 of the batch");
}

TEST_P(LinalgDTypes, LuFactor_PLUReconstructsSquareTallAndWideMatrices) {
  const DType dt = GetParam();
  for (const Shape& shape : {Shape{2, 4, 4}, Shape{3, 6, 4}, Shape{4, 6}}) {
    const Tensor a = randn(shape, dt);
    auto [p, l, u] = linalg::lu(a);
    expect_close(matmul(p, matmul(l, u)), a, tolerance(dt) * 10);
    expect_close(u, triu(u), 0);
  }
}

TEST(Linalg, LuFactor_PivotsAreLapacks_AndASingularMatrixIsInfoOrAnError) {
  // [[0, 1], [1, 0]] swaps its rows: pivots (2, 2) in LAPACK's 1-based convention.
  const Tensor swap = Tensor::empty({2, 2}, f64);
  const std::vector<double> values{0, 1, 1, 0};
  std::copy(values.begin(), values.end(), swap.data<double>());
  auto [lu, pivots, info] = linalg::lu_factor_ex(swap);
  const Tensor piv = pivots.contiguous();
  EXPECT_EQ(piv.data<int32_t>()[0], 2);
  EXPECT_EQ(piv.data<int32_t>()[1], 2);
  EXPECT_EQ(info.contiguous().data<int32_t>()[0], 0);

  const Tensor singular = ones({3, 3}, f64);
  auto [lu2, pivots2, info2] = linalg::lu_factor_ex(singular);
  EXPECT_EQ(info2.contiguous().data<int32_t>()[0], 2);
  expect_error([&] { linalg::lu_factor(singular); }, ErrorKind::kValue, "U[1, 1] is zero");
}

TEST_P(LinalgDTypes, SolveAndLuSolve_SatisfyTheSystem_LeftRightAdjointAndBroadcast) {
  const DType dt = GetParam();
  const Tensor a = randn({2, 1, 4, 4}, dt) + identity(4, dt) * 4.0;
  const Tensor b = randn({3, 4, 2}, dt);  // batch [3] broadcasts against [2, 1]
  const Tensor x = linalg::solve(a, b);
  EXPECT_EQ(x.shape(), (Shape{2, 3, 4, 2}));
  expect_close(matmul(a, x), expand(b, {2, 3, 4, 2}), tolerance(dt) * 10);

  const Tensor right = randn({2, 1, 3, 4}, dt);
  expect_close(matmul(linalg::solve(a, right, /*left=*/false), a), right, tolerance(dt) * 10);

  auto [lu, pivots] = linalg::lu_factor(a);
  expect_close(linalg::lu_solve(lu, pivots, b), x, tolerance(dt) * 10);
  const Tensor xt = linalg::lu_solve(lu, pivots, b, /*left=*/true, /*adjoint=*/true);
  expect_close(matmul(mT(a), xt), expand(b, {2, 3, 4, 2}), tolerance(dt) * 10);
}

TEST(Linalg, Solve_ReadsAVectorRightHandSideAsPyTorch) {
  const Tensor a = randn({2, 3, 3}, f64) + identity(3, f64) * 3.0;
  const Tensor batch_of_vectors = randn({2, 3}, f64);  // a's shape without its last dim
  const Tensor x = linalg::solve(a, batch_of_vectors);
  EXPECT_EQ(x.shape(), (Shape{2, 3}));
  expect_close(squeeze(matmul(a, unsqueeze(x, -1)), -1), batch_of_vectors, 1e-10);
  EXPECT_EQ(linalg::solve(a, randn({3}, f64)).shape(), (Shape{2, 3}));
}

TEST(Linalg, SolveOfASingularMatrix_IsInfoOrAnError) {
  const Tensor a = ones({3, 3}, f64);
  auto [x, info] = linalg::solve_ex(a, randn({3, 1}, f64));
  EXPECT_NE(info.contiguous().data<int32_t>()[0], 0);
  expect_error([&] { linalg::solve(a, randn({3, 1}, f64)); }, ErrorKind::kValue, "singular");
  expect_error([&] { linalg::inv(a); }, ErrorKind::kValue, "singular");
}

TEST_P(LinalgDTypes, SolveTriangular_ReadsOneTriangle_WithAUnitDiagonalOnRequest) {
  const DType dt = GetParam();
  const Tensor noise = randn({2, 4, 4}, dt);
  const Tensor a = noise + identity(4, dt) * 4.0;
  const Tensor b = randn({2, 4, 3}, dt);
  for (const bool upper : {false, true}) {
    const Tensor t = upper ? triu(a) : tril(a);
    expect_close(linalg::solve_triangular(a, b, upper), linalg::solve(t, b), tolerance(dt) * 10);
    const Tensor unit = (upper ? triu(a, 1) : tril(a, -1)) + identity(4, dt);
    expect_close(linalg::solve_triangular(a, b, upper, /*left=*/true, /*unitriangular=*/true),
                 linalg::solve(unit, b), tolerance(dt) * 10);
    const Tensor right = randn({2, 3, 4}, dt);
    expect_close(linalg::solve_triangular(a, right, upper, /*left=*/false),
                 linalg::solve(t, right, /*left=*/false), tolerance(dt) * 10);
  }
}

TEST_P(LinalgDTypes, InvDetAndSlogdet_AgreeWithEachOther) {
  const DType dt = GetParam();
  const Tensor a = randn({3, 4, 4}, dt) + identity(4, dt) * 2.0;
  expect_close(matmul(a, linalg::inv(a)), expand(identity(4, dt), {3, 4, 4}), tolerance(dt) * 10);
  // det of a triangular matrix is the product of its diagonal.
  const Tensor t = triu(a);
  const Tensor diagonal = sum(t * identity(4, dt), {-1});
  expect_close(linalg::det(t), prod(diagonal, {-1}), tolerance(dt) * 10);
  auto [sign, logabsdet] = linalg::slogdet(a);
  expect_close(sign * exp(logabsdet), linalg::det(a), tolerance(dt) * 10);
  // Reversing four rows is two swaps; swapping the first two flips the sign.
  const Tensor reversed = index_select(a, 1, arange(3, -1, -1));
  expect_close(linalg::det(reversed), linalg::det(a), tolerance(dt) * 10);
  const Tensor first_two = index_select(a, 1, cat({arange(1, -1, -1), arange(2, 4)}));
  expect_close(linalg::det(first_two), -linalg::det(a), tolerance(dt) * 10);
}

TEST(Linalg, SlogdetOfASingularMatrix_IsSignZeroAndMinusInfinity) {
  auto [sign, logabsdet] = linalg::slogdet(ones({3, 3}, f64));
  EXPECT_EQ(sign.contiguous().data<double>()[0], 0.0);
  EXPECT_EQ(logabsdet.contiguous().data<double>()[0], -INFINITY);
  expect_close(linalg::det(ones({2, 2}, f32)), zeros({}, f32), 0);
}

TEST_P(LinalgDTypes, Qr_ReconstructsWithOrthonormalQAndTriangularR_InEveryMode) {
  const DType dt = GetParam();
  for (const Shape& shape : {Shape{2, 5, 3}, Shape{3, 5}, Shape{4, 4}}) {
    const Tensor a = randn(shape, dt);
    const int64_t m = shape[shape.size() - 2], n = shape.back(), k = std::min(m, n);
    for (const std::string mode : {"reduced", "complete"}) {
      auto [q, r] = linalg::qr(a, mode);
      const int64_t q_cols = mode == "complete" ? m : k;
      EXPECT_EQ(q.shape()[q.ndim() - 1], q_cols);
      expect_close(matmul(q, r), a, tolerance(dt) * 10);
      expect_close(r, triu(r), 0);
      expect_close(matmul(mT(q), q), expand(identity(q_cols, dt), matmul(mT(q), q).shape()),
                   tolerance(dt) * 10);
    }
    auto [q_none, r_only] = linalg::qr(a, "r");
    EXPECT_EQ(q_none.numel(), 0);
    expect_close(r_only, std::get<1>(linalg::qr(a)), 0);
  }
}

TEST(Linalg, Qr_OfATriangularMatrixKeepsItsDiagonalSigns) {
  // LAPACK reflects no column that is already triangular, so R == A here (NumPy, PyTorch).
  const Tensor a = triu(randn({4, 4}, f64));
  expect_close(std::get<1>(linalg::qr(a)), a, 0);
}

TEST_P(LinalgDTypes, Eigh_AscendingValuesAndOrthonormalVectors_FromEitherTriangle) {
  const DType dt = GetParam();
  const Tensor a = spd({2}, 6, dt) - identity(6, dt) * 8.0;  // some eigenvalues negative
  for (const std::string uplo : {"L", "U"}) {
    const Tensor read = uplo == "L" ? tril(a) : triu(a);
    const Tensor ignored = (uplo == "L" ? triu(ones({6, 6}, dt), 1) : tril(ones({6, 6}, dt), -1));
    auto [w, v] = linalg::eigh(read + ignored * 7.0, uplo);
    expect_close(matmul(v, matmul(diag(w), mT(v))), a, tolerance(dt) * 100);
    expect_close(matmul(mT(v), v), expand(identity(6, dt), {2, 6, 6}), tolerance(dt) * 10);
    const Tensor wc = w.contiguous();
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t i = 0; i + 1 < 6; ++i) {
        const double lo = dt == f64 ? wc.data<double>()[b * 6 + i] : wc.data<float>()[b * 6 + i];
        const double hi =
            dt == f64 ? wc.data<double>()[b * 6 + i + 1] : wc.data<float>()[b * 6 + i + 1];
        EXPECT_LE(lo, hi);
      }
    }
    expect_close(linalg::eigvalsh(read, uplo), w, tolerance(dt) * 10);
  }
}

TEST(Linalg, Eigh_OfRepeatedEigenvalues_GivesAnOrthonormalBasis) {
  // Q diag(1, 1, 1, 2, 2, 5) Q^T with a random orthogonal Q: every eigenvalue repeats.
  const Tensor q = std::get<0>(linalg::qr(randn({6, 6}, f64)));
  const Tensor values = cat({full({3}, 1.0, f64), full({2}, 2.0, f64), full({1}, 5.0, f64)});
  const Tensor a = matmul(q, matmul(diag(values), mT(q)));
  auto [w, v] = linalg::eigh(a);
  expect_close(w, values, 1e-12);
  expect_close(matmul(mT(v), v), identity(6, f64), 1e-12);
  expect_close(matmul(v, matmul(diag(w), mT(v))), a, 1e-12);
}

TEST(Linalg, DecompositionsOfHugeAndTinyMatrices_NeitherOverflowNorUnderflow) {
  // Sums of squares of 1e200 overflow and of 1e-200 underflow: the kernels scale first.
  for (const double scale : {1e200, 1e-200}) {
    const Tensor a = randn({5, 3}, f64) * scale;
    auto [q, r] = linalg::qr(a);
    expect_close(matmul(q, r) / scale, a / scale, 1e-12);
    auto [u, s, vh] = linalg::svd(a, /*full_matrices=*/false);
    expect_close(matmul(u, matmul(diag(s), vh)) / scale, a / scale, 1e-12);
    const Tensor sym = matmul(mT(a), a / scale);  // ~ scale, symmetric
    auto [w, v] = linalg::eigh(sym);
    expect_close(matmul(v, matmul(diag(w), mT(v))) / scale, sym / scale, 1e-12);
  }
}

TEST_P(LinalgDTypes, Svd_ReconstructsWithDescendingValues_ReducedAndFull) {
  const DType dt = GetParam();
  for (const Shape& shape : {Shape{2, 6, 4}, Shape{4, 6}, Shape{5, 5}}) {
    const Tensor a = randn(shape, dt);
    const int64_t m = shape[shape.size() - 2], n = shape.back(), k = std::min(m, n);
    for (const bool full : {false, true}) {
      auto [u, s, vh] = linalg::svd(a, full);
      EXPECT_EQ(u.shape()[u.ndim() - 1], full ? m : k);
      EXPECT_EQ(vh.shape()[vh.ndim() - 2], full ? n : k);
      const Tensor uk = split(u, std::vector<int64_t>{k, u.shape().back() - k}, -1)[0];
      const Tensor vk = split(vh, std::vector<int64_t>{k, vh.shape()[vh.ndim() - 2] - k}, -2)[0];
      expect_close(matmul(uk, matmul(diag(s), vk)), a, tolerance(dt) * 10);
      const Tensor utu = matmul(mT(u), u), vvt = matmul(vh, mT(vh));
      expect_close(utu, expand(identity(utu.shape().back(), dt), utu.shape()), tolerance(dt) * 10);
      expect_close(vvt, expand(identity(vvt.shape().back(), dt), vvt.shape()), tolerance(dt) * 10);
      expect_close(linalg::svdvals(a), s, tolerance(dt) * 10);
    }
  }
}

TEST(Linalg, Svd_OfARankDeficientMatrix_StillHasOrthonormalFactors) {
  const Tensor col = randn({5, 1}, f64);
  const Tensor rank_one = matmul(col, mT(randn({3, 1}, f64)));  // [5, 3], rank 1
  auto [u, s, vh] = linalg::svd(rank_one);
  const Tensor sc = s.contiguous();
  EXPECT_GT(sc.data<double>()[0], 0.1);
  EXPECT_LT(sc.data<double>()[1], 1e-12);
  expect_close(matmul(mT(u), u), identity(5, f64), 1e-12);
  expect_close(matmul(vh, mT(vh)), identity(3, f64), 1e-12);
  const Tensor u3 = split(u, std::vector<int64_t>{3, 2}, -1)[0];
  expect_close(matmul(u3, matmul(diag(s), vh)), rank_one, 1e-12);
}

/// A [rows, cols] float64 matrix of `values`.
Tensor matrix(const std::vector<double>& values, int64_t rows, int64_t cols) {
  const Tensor t = Tensor::empty({rows, cols}, f64);
  std::copy(values.begin(), values.end(), t.data<double>());
  return t;
}

TEST(Linalg, Svd_OfBidiagonalMatricesWithZerosOnTheDiagonal) {
  // Zeros inside and at the end of the diagonal take the rotations that chase them out.
  for (const Tensor& a : {matrix({1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 3, 1, 0, 0, 0, 4}, 4, 4),
                          matrix({1, 1, 0, 0, 0, 2, 1, 0, 0, 0, 3, 1, 0, 0, 0, 0}, 4, 4)}) {
    auto [u, s, vh] = linalg::svd(a);
    expect_close(matmul(u, matmul(diag(s), vh)), a, 1e-12);
    expect_close(matmul(mT(u), u), identity(4, f64), 1e-12);
    expect_close(matmul(vh, mT(vh)), identity(4, f64), 1e-12);
  }
}

TEST(Linalg, SingularAndEigenvectorsHaveTheirLargestEntryPositive_AndMoveSmoothly) {
  const Tensor a = randn({3, 5}, f64);
  const auto largest_positive = [](const Tensor& rows) {  // each row's largest-magnitude entry
    const Tensor r = rows.contiguous();
    const int64_t n = r.shape()[1];
    for (int64_t i = 0; i < r.shape()[0]; ++i) {
      const double* row = r.data<double>() + i * n;
      const double* top = std::max_element(
          row, row + n, [](double x, double y) { return std::abs(x) < std::abs(y); });
      EXPECT_GT(*top, 0.0) << "row " << i;
    }
  };
  auto [u, s, vh] = linalg::svd(a, /*full_matrices=*/false);
  largest_positive(vh);
  const Tensor sym = spd({}, 5, f64);
  largest_positive(mT(std::get<1>(linalg::eigh(sym))));
  // A perturbation of 1e-7 moves U by about as much: no factor flips sign between the two.
  const Tensor nudged = a + randn({3, 5}, f64) * 1e-7;
  expect_close(std::get<0>(linalg::svd(nudged, false)), u, 1e-5);
}

TEST(Linalg, EighAndSvdOfANonFiniteMatrix_AreAnErrorNotAHang) {
  // The QR iterations would never end on a NaN (they did: svd of [[nan, 0], [0, 0]]).
  for (const double bad : {NAN, INFINITY}) {
    const Tensor a = matrix({bad, 0, 0, 0}, 2, 2);
    expect_error([&] { linalg::svdvals(a); }, ErrorKind::kValue,
                 "linalg.svd: the algorithm failed to converge because the input matrix contains "
                 "a NaN or an infinity");
    expect_error([&] { linalg::eigvalsh(a); }, ErrorKind::kValue,
                 "linalg.eigh: the algorithm failed to converge");
  }
}

TEST(Linalg, Eigh_OfAMatrixGradedFromLargeToTiny_Converges) {
  // diagonal 10^(-20 i) and off-diagonal 10^(-20 i - 1): QL from the top stalled (64 steps
  // without convergence, eigenvalues off by O(1)) until the matrix is turned upside down.
  const int64_t n = 15;
  std::vector<double> values(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    values[i * n + i] = std::pow(10.0, -20.0 * i) * (i % 2 == 0 ? 1.0 : -0.7);
    if (i + 1 < n) values[(i + 1) * n + i] = values[i * n + i + 1] = std::pow(10.0, -20.0 * i - 1);
  }
  const Tensor a = matrix(values, n, n);
  auto [w, v] = linalg::eigh(a);
  expect_close(matmul(v, matmul(diag(w), mT(v))), a, 1e-14);
  expect_close(matmul(mT(v), v), identity(n, f64), 1e-14);
}

TEST(Linalg, Svd_KeepsSmallSingularValuesAccurateToTheirOwnSize) {
  // [[1, 1], [0, 1e-20]]: singular values sqrt(2) and 1e-20 / sqrt(2) (zeroed below eps * |A|
  // before, so the matrix looked singular).
  const Tensor s = linalg::svdvals(matrix({1, 1, 0, 1e-20}, 2, 2)).contiguous();
  EXPECT_NEAR(s.data<double>()[1], 1e-20 / std::sqrt(2.0), 1e-34);
}

TEST(Linalg, Det_IsTheProductOfThePivots_ExactWhereTheyAre) {
  expect_close(linalg::det(matrix({5}, 1, 1)), full({}, 5.0, f64), 0);
  expect_close(linalg::det(matrix({2, 0, 0, 0, 3, 0, 0, 0, -7}, 3, 3)), full({}, -42.0, f64), 0);
  const Tensor seven = to(matrix({-7}, 1, 1), f32);
  expect_close(linalg::det(seven), full({}, -7.0, f32), 0);
  expect_grad_rule("Det", {randn({2, 3, 3}, f64) + identity(3, f64) * 3.0});
}

TEST(Linalg, EmptyMatricesAndBatches) {
  EXPECT_EQ(linalg::cholesky(zeros({0, 0}, f64)).shape(), (Shape{0, 0}));
  expect_close(linalg::det(zeros({2, 0, 0}, f64)), ones({2}, f64), 0);
  EXPECT_EQ(linalg::solve(zeros({0, 3, 3}, f32), zeros({0, 3, 2}, f32)).shape(), (Shape{0, 3, 2}));
  auto [u, s, vh] = linalg::svd(zeros({3, 0}, f64));
  EXPECT_EQ(s.shape(), (Shape{0}));
  expect_close(matmul(mT(u), u), identity(3, f64), 0);
}

TEST(Linalg, ArgumentErrorsNameTheFunctionAndWhatWasExpected) {
  expect_error(
      [] {
        linalg::cholesky(ones({3, 3}, DType::kInt64));
      },
      ErrorKind::kDType, "linalg.cholesky: expected a float32 or float64 tensor, got int64");
  expect_error([] { linalg::det(ones({3}, f32)); }, ErrorKind::kShape,
               "linalg.det: expected a tensor of matrices (at least 2 dims), got 1-d");
  expect_error(
      [] {
        linalg::inv(ones({2, 3}, f32));
      },
      ErrorKind::kShape, "linalg.inv: expected square matrices, got 2 x 3");
  expect_error(
      [] {
        linalg::solve(ones({2, 3, 3}, f32), ones({4, 3, 1}, f32));
      },
      ErrorKind::kShape, "linalg.solve: expected batch dimensions that broadcast");
  expect_error(
      [] {
        linalg::solve(ones({3, 3}, f32), ones({4, 1}, f32));
      },
      ErrorKind::kShape, "linalg.solve: expected B with 3 rows");
  expect_error(
      [] {
        linalg::solve(ones({3, 3}, f32), ones({3, 1}, f64));
      },
      ErrorKind::kDType, "expected A and B of one dtype");
  expect_error(
      [] {
        linalg::qr(ones({3, 3}, f32), "thin");
      },
      ErrorKind::kValue, "expected mode 'reduced', 'complete' or 'r', got 'thin'");
  expect_error(
      [] {
        linalg::eigh(ones({3, 3}, f32), "X");
      },
      ErrorKind::kValue, "expected UPLO 'L' or 'U', got 'X'");
  const Tensor bad_pivots = zeros({3}, DType::kInt32);
  expect_error(
      [&] {
        linalg::lu_solve(ones({3, 3}, f32), bad_pivots, ones({3, 1}, f32));
      },
      ErrorKind::kValue, "expected pivots from lu_factor");
}

// ---- Gradient rules -----------------------------------------------------------------------

TEST(LinalgGrad, SolvesAndFactorsMatchFiniteDifferences) {
  const Tensor a = randn({2, 4, 4}, f64) + identity(4, f64) * 4.0;
  const Tensor b = randn({2, 4, 3}, f64);
  expect_grad_rule("Solve", {a, b});
  expect_grad_rule("Solve", {split(a, 1, 0)[0], b});  // A broadcast over B's batch
  expect_grad_rule("TriangularSolve", {a, b}, {{"upper", true}});
  expect_grad_rule("TriangularSolve", {a, b}, {{"upper", false}, {"unitriangular", true}});
  expect_grad_rule("SlogDet", {a});
  auto [lu, pivots] = linalg::lu_factor(a);
  expect_grad_rule("LuSolve", {lu, pivots, b});
  expect_grad_rule("LuSolve", {lu, pivots, b}, {{"adjoint", true}});
  for (const Shape& shape : {Shape{4, 4}, Shape{5, 3}, Shape{3, 5}}) {
    expect_grad_rule("LuFactor", {randn(shape, f64)});
  }
}

TEST(LinalgGrad, DecompositionsMatchFiniteDifferences) {
  for (const Shape& shape : {Shape{2, 4, 4}, Shape{5, 3}, Shape{3, 5}}) {
    const Tensor a = randn(shape, f64);
    expect_grad_rule("Qr", {a});
    expect_grad_rule("Svd", {a}, {{"full_matrices", false}});
  }
  expect_grad_rule("Qr", {randn({3, 5}, f64)}, {{"mode", std::string("complete")}});
}

/// The symmetric-input ops read one triangle but give PyTorch's symmetric gradient: checked
/// against finite differences that move A[i][j] and A[j][i] together (sum of both entries).
void expect_symmetric_grad(const std::string& op_name, const Tensor& a, const Attrs& attrs) {
  const OpDefPtr op = OpRegistry::Instance().get(op_name);
  const Attrs normalized = op->normalize_attrs(attrs);
  const std::vector<Tensor> ys = call_op(*op, {a}, normalized);
  std::vector<Tensor> gys;
  for (const Tensor& y : ys) {
    gys.push_back(is_floating_point(y.dtype()) ? randn(y.shape(), f64) : Tensor());
  }
  const Tensor g = op->grad_fn()({a}, ys, normalized, gys)[0].contiguous();
  const auto loss = [&](const Tensor& x) {
    const std::vector<Tensor> out = call_op(*op, {x}, normalized);
    double total = 0;
    for (size_t j = 0; j < out.size(); ++j) {
      if (gys[j].defined()) total += sum(out[j] * gys[j]).contiguous().data<double>()[0];
    }
    return total;
  };
  const int64_t n = a.shape()[0];
  const double eps = 1e-6;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j <= i; ++j) {
      Tensor plus = a.clone(), minus = a.clone();
      for (const Tensor& t : {plus, minus}) {
        const double d = t.is_same(plus) ? eps : -eps;
        t.data<double>()[i * n + j] += d;
        if (i != j) t.data<double>()[j * n + i] += d;
      }
      const double numeric = (loss(plus) - loss(minus)) / (2 * eps);
      const double analytic =
          g.data<double>()[i * n + j] + (i != j ? g.data<double>()[j * n + i] : 0.0);
      EXPECT_NEAR(analytic, numeric, 1e-5 + 1e-4 * std::abs(numeric))
          << op_name << " element (" << i << ", " << j << ")";
    }
  }
}

TEST(LinalgGrad, CholeskyAndEighMatchSymmetricFiniteDifferences) {
  const Tensor a = spd({}, 4, f64);
  expect_symmetric_grad("Cholesky", a, {});
  expect_symmetric_grad("Cholesky", a, {{"upper", true}});
  expect_symmetric_grad("Eigh", a, {});
  expect_symmetric_grad("Eigh", a, {{"uplo", std::string("U")}});
}

TEST(LinalgGrad, QrWithoutQOrWithAnUndeterminedQ_HasNoGradient) {
  std::vector<Tensor> grads{Tensor(), randn({3, 3}, f64)};
  expect_error(
      [&] {
        testing::run_rule("Qr", {randn({3, 3}, f64)}, {{"mode", std::string("r")}}, grads);
      },
      ErrorKind::kValue, "mode='r' does not compute");
  grads = {randn({5, 5}, f64), randn({5, 3}, f64)};
  expect_error(
      [&] {
        testing::run_rule("Qr", {randn({5, 3}, f64)}, {{"mode", std::string("complete")}}, grads);
      },
      ErrorKind::kValue, "mode='complete' has no gradient for m > n");
}

}  // namespace
}  // namespace kiln
