// The factorizations and solves of kiln::linalg: Cholesky, LuFactor, LuPermutation, LuSolve,
// Solve, TriangularSolve, SlogDet and Det (kiln/functional/linalg.h), with their gradients.
//
// Each op checks its matrices in infer and runs linalg_kernels.h on float64 copies, one matrix
// per task of the intra-op pool. A factorization that fails writes `info` (LAPACK's: 0, or the
// 1-based order of the failing minor or pivot) per matrix; with the attribute check_errors the
// kernel raises for the first failure instead, so that the error surfaces with the op's others.
//
// Note [Linear-algebra gradients]
// The rules are PyTorch's (torch/csrc/autograd/FunctionsManual.cpp), restated for real
// matrices: for X = A^{-1} B, gB = A^{-T} gX and gA = -gB X^T; for the triangular and LU forms,
// gA projected onto the entries the factor reads. They are built from the public ops, so they
// batch and broadcast as the forward does (input_grad sums a broadcast batch back) and
// differentiate again for higher orders.
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "kiln/functional/elementwise.h"
#include "kiln/functional/factory.h"
#include "kiln/functional/linalg.h"
#include "kiln/functional/nn.h"
#include "kiln/functional/reduce.h"
#include "kiln/functional/shape.h"
#include "ops/grad_util.h"
#include "ops/linalg_kernels.h"
#include "ops/linalg_util.h"

namespace kiln {
namespace {

using detail::broadcast_batch;
using detail::check_info;
using detail::check_matrices;
using detail::cols_of;
using detail::Float64Matrices;
using detail::for_each_matrix;
using detail::input_grad;
using detail::matrix_shape;
using detail::mT;
using detail::rows_of;

/// The batch of the matrices `a` (square, n x n) and `b` (n x k) broadcast, checking that b
/// has n rows.
Shape solve_batch(const char* fn, const TensorMeta& a, const TensorMeta& b) {
  check_matrices(fn, a, /*square=*/true);
  check_matrices(fn, b, /*square=*/false);
  KILN_CHECK_DTYPE(a.dtype == b.dtype)
      << fn << ": expected A and B of one dtype, got " << a.dtype << " and " << b.dtype;
  KILN_CHECK_SHAPE(rows_of(b.shape) == rows_of(a.shape))
      << fn << ": expected B with " << rows_of(a.shape) << " rows (A is " << shape_str(a.shape)
      << "), got " << shape_str(b.shape);
  return broadcast_batch(fn, detail::batch_shape(a.shape), detail::batch_shape(b.shape));
}

// ---- Cholesky -----------------------------------------------------------------------------

/// gA = L^{-T} S L^{-1} with S the symmetric part of Phi(L^T gL) (its lower triangle, the
/// diagonal halved): the gradient of a function of the whole symmetric A, as PyTorch's.
std::vector<Tensor> cholesky_grad(const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                                  const Attrs& attrs, const std::vector<Tensor>& grads) {
  if (!grads[0].defined() || !detail::differentiable(in[0])) return {Tensor()};
  const bool upper = attrs.get<bool>("upper");
  const Tensor L = upper ? mT(out[0]) : out[0];
  const Tensor gL = upper ? mT(grads[0]) : grads[0];
  const Tensor phi = tril(matmul(mT(L), gL));
  const Tensor sym = 0.5 * (phi + mT(tril(phi, -1)));
  const Tensor left = linalg::solve_triangular(mT(L), sym, /*upper=*/true);
  return {linalg::solve_triangular(L, left, /*upper=*/false, /*left=*/false)};
}

KILN_REGISTER_OP(
    OpDef("Cholesky")
        .input("a")
        .attr("upper", AttrKind::kBool, false)
        .attr("check_errors", AttrKind::kBool, false)
        .outputs(2)
        .doc("(L, info): the Cholesky factor of symmetric positive-definite matrices from their "
             "lower triangle (U with U^T U = A from the upper triangle with `upper`); info 0 or "
             "the order of the first minor that is not positive definite")
        .infer([](const InferContext& ctx) {
          const TensorMeta& a = ctx.input(0);
          check_matrices("linalg.cholesky", a, /*square=*/true);
          return MetaList{{a.dtype, a.shape}, {DType::kInt32, detail::batch_shape(a.shape)}};
        })
        .grad(cholesky_grad)
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          const Tensor& info = ctx.outputs[1];
          const int64_t n = rows_of(out.shape());
          const Float64Matrices work(ctx.inputs[0], out.shape(), out);
          int32_t* info_data = info.data<int32_t>();
          const bool upper = ctx.attrs.get<bool>("upper");
          for_each_matrix(work.count(), [&](int64_t b) {
            double* l = work.matrix(b);
            if (upper) {  // U^T U = A from A's upper triangle: L = U^T from its mirror
              for (int64_t i = 0; i < n; ++i) {
                for (int64_t j = i + 1; j < n; ++j) l[j * n + i] = l[i * n + j];
              }
            }
            info_data[b] = static_cast<int32_t>(detail::cholesky_lower(l, n));
            for (int64_t i = 0; i < n; ++i) {  // zero the other triangle, transposing for upper
              for (int64_t j = i + 1; j < n; ++j) {
                if (upper) l[i * n + j] = l[j * n + i];
                l[(upper ? j : i) * n + (upper ? i : j)] = 0.0;
              }
            }
          });
          if (ctx.attrs.get<bool>("check_errors")) {
            check_info("linalg.cholesky", info, [](int32_t k) {
              return "the input is not positive-definite (the leading minor of order " +
                     std::to_string(k) + " is not positive-definite)";
            });
          }
          work.finish(out);
        }));

// ---- LU -----------------------------------------------------------------------------------

/// (P, L, U) of lu_factor's packed LU: L [m, k] unit lower, U [k, n] upper, k = min(m, n).
std::tuple<Tensor, Tensor, Tensor> unpack_lu(const Tensor& lu, const Tensor& pivots) {
  const int64_t m = rows_of(lu.shape()), n = cols_of(lu.shape()), k = std::min(m, n);
  const std::vector<Tensor> rows = split(lu, std::vector<int64_t>{k, m - k}, -2);
  const std::vector<Tensor> cols = split(lu, std::vector<int64_t>{k, n - k}, -1);
  const Tensor unit = eye(m, k, lu.dtype());
  const Tensor L = tril(cols[0], -1) + unit;
  const Tensor U = triu(rows[0]);
  return {linalg::lu_permutation(pivots, m, lu.dtype()), L, U};
}

/// The gradient of A from (gL, gU) for A = P L U (Note [Linear-algebra gradients]). The square
/// core: B = L U gives gB = L^{-T} (tril(L^T gL, -1) + triu(gU U^T)) U^{-T}. A wide A = P L
/// [U1 U2] adds gA2 = P L^{-T} gU2 and moves -(L^{-T} gU2 U2^T) into gL; a tall A = P [L1; L2] U
/// adds gA2 = gL2 U^{-T} and moves -(L2^T gL2 U^{-T}) into gU.
Tensor lu_grad_from_factors(const Tensor& P, const Tensor& L, const Tensor& U, Tensor gL,
                            Tensor gU) {
  const int64_t m = rows_of(L.shape()), n = cols_of(U.shape()), k = std::min(m, n);
  const auto square_core = [&](const Tensor& l, const Tensor& u, const Tensor& gl,
                               const Tensor& gu) {
    const Tensor phi = tril(matmul(mT(l), gl), -1) + triu(matmul(gu, mT(u)));
    const Tensor left = linalg::solve_triangular(mT(l), phi, /*upper=*/true, /*left=*/true,
                                                 /*unitriangular=*/true);
    return linalg::solve_triangular(mT(u), left, /*upper=*/false, /*left=*/false);
  };
  Tensor gB;
  if (m == n) {
    gB = square_core(L, U, gL, gU);
  } else if (m < n) {
    const std::vector<Tensor> u = split(U, std::vector<int64_t>{k, n - k}, -1);
    const std::vector<Tensor> gu = split(gU, std::vector<int64_t>{k, n - k}, -1);
    const Tensor g2 = linalg::solve_triangular(mT(L), gu[1], /*upper=*/true, /*left=*/true,
                                               /*unitriangular=*/true);
    gB = cat({square_core(L, u[0], gL - tril(matmul(g2, mT(u[1])), -1), gu[0]), g2}, -1);
  } else {
    const std::vector<Tensor> l = split(L, std::vector<int64_t>{k, m - k}, -2);
    const std::vector<Tensor> gl = split(gL, std::vector<int64_t>{k, m - k}, -2);
    const Tensor g2 = linalg::solve_triangular(mT(U), gl[1], /*upper=*/false, /*left=*/false);
    gB = cat({square_core(l[0], U, gl[0], gU - triu(matmul(mT(l[1]), g2))), g2}, -2);
  }
  return matmul(P, gB);
}

std::vector<Tensor> lu_factor_grad(const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                                   const Attrs&, const std::vector<Tensor>& grads) {
  if (!grads[0].defined() || !detail::differentiable(in[0])) return {Tensor()};
  const auto [P, L, U] = unpack_lu(out[0], out[1]);
  const int64_t m = rows_of(out[0].shape()), n = cols_of(out[0].shape()), k = std::min(m, n);
  const Tensor gLU = grads[0];
  const Tensor gL = tril(split(gLU, std::vector<int64_t>{k, n - k}, -1)[0], -1);
  const Tensor gU = triu(split(gLU, std::vector<int64_t>{k, m - k}, -2)[0]);
  return {lu_grad_from_factors(P, L, U, gL, gU)};
}

KILN_REGISTER_OP(
    OpDef("LuFactor")
        .input("a")
        .attr("check_errors", AttrKind::kBool, false)
        .outputs(3)
        .doc("(LU, pivots, info): A = P L U by partial pivoting, L and U packed in LU, pivots "
             "int32 LAPACK row swaps (1-based), info 0 or the first zero pivot (1-based)")
        .infer([](const InferContext& ctx) {
          const TensorMeta& a = ctx.input(0);
          check_matrices("linalg.lu_factor", a, /*square=*/false);
          const Shape batch = detail::batch_shape(a.shape);
          Shape pivots = batch;
          pivots.push_back(std::min(rows_of(a.shape), cols_of(a.shape)));
          return MetaList{{a.dtype, a.shape}, {DType::kInt32, pivots}, {DType::kInt32, batch}};
        })
        .grad(lu_factor_grad)
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          const int64_t m = rows_of(out.shape()), n = cols_of(out.shape()), k = std::min(m, n);
          const Float64Matrices work(ctx.inputs[0], out.shape(), out);
          int32_t* pivots = ctx.outputs[1].data<int32_t>();
          int32_t* info = ctx.outputs[2].data<int32_t>();
          for_each_matrix(work.count(), [&](int64_t b) {
            info[b] = static_cast<int32_t>(detail::lu_factor(work.matrix(b), m, n, pivots + b * k));
          });
          if (ctx.attrs.get<bool>("check_errors")) {
            check_info("linalg.lu_factor", ctx.outputs[2], [](int32_t j) {
              return "U[" + std::to_string(j - 1) + ", " + std::to_string(j - 1) +
                     "] is zero: the matrix is singular, and lu_solve would divide by zero";
            });
          }
          work.finish(out);
        }));

/// Checks that pivots[i] is a row in [i + 1, m] (1-based), as lu_factor writes them.
void check_pivots(const char* fn, const int32_t* pivots, int64_t k, int64_t m) {
  for (int64_t i = 0; i < k; ++i) {
    KILN_CHECK_VALUE(pivots[i] > i && pivots[i] <= m)
        << fn << ": expected pivots from lu_factor (pivots[" << i << "] in [" << i + 1 << ", " << m
        << "]), got " << pivots[i];
  }
}

KILN_REGISTER_OP(
    OpDef("LuPermutation")
        .input("pivots")
        .attr("m", AttrKind::kInt)
        .traits(kTraitNotDifferentiable)
        .doc("int64 perm [..., m] of LU pivots for m-row matrices: row i of P^T A is row "
             "perm[i] of A")
        .infer([](const InferContext& ctx) {
          const TensorMeta& p = ctx.input(0);
          const int64_t m = ctx.attrs.get<int64_t>("m");
          KILN_CHECK_DTYPE(p.dtype == DType::kInt32)
              << "linalg.lu: expected int32 pivots, got " << p.dtype;
          KILN_CHECK_SHAPE(p.ndim() >= 1 && cols_of(p.shape) <= m)
              << "linalg.lu: expected pivots [..., k] with k <= " << m << ", got "
              << shape_str(p.shape);
          Shape shape = p.shape;
          shape.back() = m;
          return MetaList{{DType::kInt64, shape}};
        })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor pivots = ctx.inputs[0].contiguous();
          const Tensor& perm = ctx.outputs[0];
          const int64_t m = ctx.attrs.get<int64_t>("m"), k = cols_of(pivots.shape());
          const int64_t count = m == 0 ? 0 : perm.numel() / m;
          for (int64_t b = 0; b < count; ++b) {
            const int32_t* piv = pivots.data<int32_t>() + b * k;
            check_pivots("linalg.lu", piv, k, m);
            int64_t* p = perm.data<int64_t>() + b * m;
            for (int64_t i = 0; i < m; ++i) p[i] = i;
            for (int64_t i = 0; i < k; ++i) std::swap(p[i], p[piv[i] - 1]);
          }
        }));

/// gB from the solve with the other orientation; gLU through gA = -gB X^T (-X gB^T with
/// `adjoint`) projected onto L's and U's entries: gL = tril(P^T gA U^T, -1), gU = triu(L^T P^T
/// gA).
std::vector<Tensor> lu_solve_grad(const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                                  const Attrs& attrs, const std::vector<Tensor>& grads) {
  const Tensor& gX = grads[0];
  if (!gX.defined()) return {Tensor(), Tensor(), Tensor()};
  const Tensor &lu = in[0], &pivots = in[1], &b = in[2], &X = out[0];
  const bool adjoint = attrs.get<bool>("adjoint");
  const Tensor gB = linalg::lu_solve(lu, pivots, gX, /*left=*/true, !adjoint);
  Tensor gLU;
  if (detail::differentiable(lu)) {
    const auto [P, L, U] = unpack_lu(lu, pivots);
    const Tensor gA = adjoint ? -matmul(X, mT(gB)) : -matmul(gB, mT(X));
    const Tensor PtgA = matmul(mT(P), gA);
    gLU = tril(matmul(PtgA, mT(U)), -1) + triu(matmul(mT(L), PtgA));
  }
  return {input_grad(gLU, lu), Tensor(), input_grad(gB, b)};
}

KILN_REGISTER_OP(
    OpDef("LuSolve")
        .input("lu")
        .input("pivots")
        .input("b")
        .attr("adjoint", AttrKind::kBool, false)
        .doc("X with A X = B (A^T X = B with `adjoint`) for A = P L U given by lu_factor")
        .infer([](const InferContext& ctx) {
          const TensorMeta &lu = ctx.input(0), &pivots = ctx.input(1), &b = ctx.input(2);
          Shape batch = solve_batch("linalg.lu_solve", lu, b);
          KILN_CHECK_DTYPE(pivots.dtype == DType::kInt32)
              << "linalg.lu_solve: expected int32 pivots, got " << pivots.dtype;
          KILN_CHECK_SHAPE(pivots.ndim() >= 1 && cols_of(pivots.shape) == rows_of(lu.shape))
              << "linalg.lu_solve: expected pivots [..., " << rows_of(lu.shape) << "], got "
              << shape_str(pivots.shape);
          const Shape pivot_batch(pivots.shape.begin(), pivots.shape.end() - 1);
          batch = broadcast_batch("linalg.lu_solve", batch, pivot_batch);
          return MetaList{{b.dtype, matrix_shape(batch, rows_of(b.shape), cols_of(b.shape))}};
        })
        .grad(lu_solve_grad)
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          const Shape batch = detail::batch_shape(out.shape());
          const int64_t n = rows_of(out.shape()), k = cols_of(out.shape());
          const Float64Matrices lu(ctx.inputs[0], matrix_shape(batch, n, n));
          Shape pivot_shape = batch;
          pivot_shape.push_back(n);
          const Tensor pivots = Tensor::empty(pivot_shape, DType::kInt32);
          copy_into(pivots, ctx.inputs[1]);
          const Float64Matrices x(ctx.inputs[2], out.shape(), out);
          const int32_t* piv = pivots.data<int32_t>();
          for (int64_t b = 0; b < x.count(); ++b) {
            check_pivots("linalg.lu_solve", piv + b * n, n, n);
          }
          const bool adjoint = ctx.attrs.get<bool>("adjoint");
          for_each_matrix(x.count(), [&](int64_t b) {
            detail::lu_solve(lu.matrix(b), piv + b * n, n, x.matrix(b), k, adjoint);
          });
          x.finish(out);
        }));

// ---- Solve, TriangularSolve ---------------------------------------------------------------

std::vector<Tensor> solve_grad(const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                               const Attrs&, const std::vector<Tensor>& grads) {
  const Tensor& gX = grads[0];
  if (!gX.defined()) return {Tensor(), Tensor()};
  const Tensor gB = linalg::solve(mT(in[0]), gX);
  const Tensor gA = detail::differentiable(in[0]) ? -matmul(gB, mT(out[0])) : Tensor();
  return {input_grad(gA, in[0]), input_grad(gB, in[1])};
}

KILN_REGISTER_OP(
    OpDef("Solve")
        .input("a")
        .input("b")
        .attr("check_errors", AttrKind::kBool, false)
        .outputs(2)
        .doc("(X, info): X with A X = B by LU with partial pivoting; info 0 or the first zero "
             "pivot (1-based) of a singular A")
        .infer([](const InferContext& ctx) {
          const TensorMeta &a = ctx.input(0), &b = ctx.input(1);
          const Shape batch = solve_batch("linalg.solve", a, b);
          return MetaList{{b.dtype, matrix_shape(batch, rows_of(b.shape), cols_of(b.shape))},
                          {DType::kInt32, batch}};
        })
        .grad(solve_grad)
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          const Tensor& info = ctx.outputs[1];
          const int64_t n = rows_of(out.shape()), k = cols_of(out.shape());
          const Float64Matrices lu(ctx.inputs[0],
                                   matrix_shape(detail::batch_shape(out.shape()), n, n));
          const Float64Matrices x(ctx.inputs[1], out.shape(), out);
          std::vector<int32_t> pivots(static_cast<size_t>(x.count() * n));
          int32_t* info_data = info.data<int32_t>();
          for_each_matrix(x.count(), [&](int64_t b) {
            int32_t* piv = pivots.data() + b * n;
            info_data[b] = static_cast<int32_t>(detail::lu_factor(lu.matrix(b), n, n, piv));
            detail::lu_solve(lu.matrix(b), piv, n, x.matrix(b), k, /*transpose=*/false);
          });
          if (ctx.attrs.get<bool>("check_errors")) {
            check_info("linalg.solve", info, [](int32_t) {
              return std::string(
                  "the input matrix is singular, so A X = B (or A X = I for "
                  "linalg.inv) has no unique solution");
            });
          }
          x.finish(out);
        }));

/// gB = A^{-T} gX by the transposed triangle; gA = -gB X^T on the triangle A's solve reads.
std::vector<Tensor> triangular_solve_grad(const std::vector<Tensor>& in,
                                          const std::vector<Tensor>& out, const Attrs& attrs,
                                          const std::vector<Tensor>& grads) {
  const Tensor& gX = grads[0];
  if (!gX.defined()) return {Tensor(), Tensor()};
  const bool upper = attrs.get<bool>("upper"), unit = attrs.get<bool>("unitriangular");
  const Tensor gB =
      linalg::solve_triangular(mT(in[0]), gX, !upper, /*left=*/true, /*unitriangular=*/unit);
  Tensor gA;
  if (detail::differentiable(in[0])) {
    const Tensor full = -matmul(gB, mT(out[0]));
    const int64_t skip = unit ? 1 : 0;
    gA = upper ? triu(full, skip) : tril(full, -skip);
  }
  return {input_grad(gA, in[0]), input_grad(gB, in[1])};
}

KILN_REGISTER_OP(
    OpDef("TriangularSolve")
        .input("a")
        .input("b")
        .attr("upper", AttrKind::kBool)
        .attr("unitriangular", AttrKind::kBool, false)
        .doc("X with A X = B for the upper (else lower) triangle of A, its diagonal taken as "
             "ones with `unitriangular`")
        .infer([](const InferContext& ctx) {
          const TensorMeta &a = ctx.input(0), &b = ctx.input(1);
          const Shape batch = solve_batch("linalg.solve_triangular", a, b);
          return MetaList{{b.dtype, matrix_shape(batch, rows_of(b.shape), cols_of(b.shape))}};
        })
        .grad(triangular_solve_grad)
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          const int64_t n = rows_of(out.shape()), k = cols_of(out.shape());
          const Float64Matrices a(ctx.inputs[0],
                                  matrix_shape(detail::batch_shape(out.shape()), n, n));
          const Float64Matrices x(ctx.inputs[1], out.shape(), out);
          const bool upper = ctx.attrs.get<bool>("upper");
          const bool unit = ctx.attrs.get<bool>("unitriangular");
          for_each_matrix(x.count(), [&](int64_t b) {
            detail::triangular_solve(a.matrix(b), n, 1, n, x.matrix(b), k, upper, unit);
          });
          x.finish(out);
        }));

// ---- SlogDet, Det -------------------------------------------------------------------------

/// For each matrix of `a` ([batch..., n, n]), by LU: the sign of its determinant (0 when
/// singular) and log |det| (-inf then) into `sign` and `logabsdet`, or the determinant itself
/// into `det` (the product of U's diagonal: det([[5]]) is 5, not exp(log 5)). Null outputs are
/// skipped.
void lu_determinants(const Tensor& a, const Shape& batch, double* sign, double* logabsdet,
                     double* det) {
  const int64_t n = rows_of(a.shape());
  const Float64Matrices lu(a, matrix_shape(batch, n, n));
  for_each_matrix(lu.count(), [&](int64_t b) {
    std::vector<int32_t> pivots(static_cast<size_t>(n));
    const double* u = lu.matrix(b);
    detail::lu_factor(lu.matrix(b), n, n, pivots.data());
    double s = 1.0, log_sum = 0.0, product = 1.0;
    for (int64_t i = 0; i < n; ++i) {
      const double d = u[i * n + i];
      if (pivots[i] - 1 != i) s = -s;
      if (d < 0) s = -s;
      if (d == 0) s = 0.0;
      log_sum += std::log(std::abs(d));
      product *= d;
    }
    if (sign != nullptr) sign[b] = s;
    if (logabsdet != nullptr) {
      logabsdet[b] = s == 0.0 ? -std::numeric_limits<double>::infinity() : log_sum;
    }
    if (det != nullptr) det[b] = s == 0.0 ? 0.0 : std::copysign(product, s);
  });
}

/// d logabsdet = tr(A^{-1} dA): gA = g A^{-T}; the sign is piecewise constant.
std::vector<Tensor> slogdet_grad(const std::vector<Tensor>& in, const std::vector<Tensor>&,
                                 const Attrs&, const std::vector<Tensor>& grads) {
  const Tensor& g = grads[1];
  if (!g.defined() || !detail::differentiable(in[0])) return {Tensor()};
  return {unsqueeze(unsqueeze(g, -1), -1) * mT(linalg::inv(in[0]))};
}

KILN_REGISTER_OP(
    OpDef("SlogDet")
        .input("a")
        .outputs(2)
        .doc("(sign, logabsdet) of the determinants of square matrices: sign 0 and logabsdet "
             "-inf for a singular one")
        .infer([](const InferContext& ctx) {
          const TensorMeta& a = ctx.input(0);
          check_matrices("linalg.slogdet", a, /*square=*/true);
          const Shape batch = detail::batch_shape(a.shape);
          return MetaList{{a.dtype, batch}, {a.dtype, batch}};
        })
        .grad(slogdet_grad)
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor &sign = ctx.outputs[0], &logabsdet = ctx.outputs[1];
          const Tensor sign64 = detail::float64_output(sign);
          const Tensor log64 = detail::float64_output(logabsdet);
          lu_determinants(ctx.inputs[0], sign.shape(), sign64.data<double>(), log64.data<double>(),
                          nullptr);
          detail::finish_float64(sign, sign64);
          detail::finish_float64(logabsdet, log64);
        }));

/// d det = det tr(A^{-1} dA): gA = g det A^{-T} (so A must be invertible).
std::vector<Tensor> det_grad(const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                             const Attrs&, const std::vector<Tensor>& grads) {
  const Tensor& g = grads[0];
  if (!g.defined() || !detail::differentiable(in[0])) return {Tensor()};
  return {unsqueeze(unsqueeze(g * out[0], -1), -1) * mT(linalg::inv(in[0]))};
}

KILN_REGISTER_OP(
    OpDef("Det")
        .input("a")
        .doc("the determinants of square matrices, by LU (the product of U's diagonal)")
        .infer([](const InferContext& ctx) {
          const TensorMeta& a = ctx.input(0);
          check_matrices("linalg.det", a, /*square=*/true);
          return MetaList{{a.dtype, detail::batch_shape(a.shape)}};
        })
        .grad(det_grad)
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& det = ctx.outputs[0];
          const Tensor det64 = detail::float64_output(det);
          lu_determinants(ctx.inputs[0], det.shape(), nullptr, nullptr, det64.data<double>());
          detail::finish_float64(det, det64);
        }));

}  // namespace

namespace linalg {
namespace {

OpDefPtr op(const char* name) { return OpRegistry::Instance().get(name); }

/// PyTorch's rule for solve's B: a batch of vectors when it is 1-d or has A's shape without
/// its last dim (then it is solved as one column).
bool is_vector_rhs(const Tensor& a, const Tensor& b) {
  if (b.ndim() == 1) return true;
  if (b.ndim() != a.ndim() - 1) return false;
  const Shape& as = a.shape();
  return b.shape() == Shape(as.begin(), as.end() - 1);
}

}  // namespace

std::tuple<Tensor, Tensor> cholesky_ex(const Tensor& a, bool upper, bool check_errors) {
  static const OpDefPtr def = op("Cholesky");
  TensorList out = call_op(*def, {a}, {{"upper", upper}, {"check_errors", check_errors}});
  return {std::move(out[0]), std::move(out[1])};
}

Tensor cholesky(const Tensor& a, bool upper) {
  return std::get<0>(cholesky_ex(a, upper, /*check_errors=*/true));
}

std::tuple<Tensor, Tensor, Tensor> lu_factor_ex(const Tensor& a, bool check_errors) {
  static const OpDefPtr def = op("LuFactor");
  TensorList out = call_op(*def, {a}, {{"check_errors", check_errors}});
  return {std::move(out[0]), std::move(out[1]), std::move(out[2])};
}

std::tuple<Tensor, Tensor> lu_factor(const Tensor& a) {
  auto [lu, pivots, info] = lu_factor_ex(a, /*check_errors=*/true);
  return {std::move(lu), std::move(pivots)};
}

std::tuple<Tensor, Tensor, Tensor> lu(const Tensor& a) {
  check_matrices("linalg.lu", TensorMeta::of(a), /*square=*/false);
  auto [packed, pivots, info] = lu_factor_ex(a);
  return unpack_lu(packed, pivots);
}

Tensor lu_permutation(const Tensor& pivots, int64_t m, DType dtype) {
  static const OpDefPtr def = op("LuPermutation");
  const Tensor perm = call_op(*def, {pivots}, {{"m", m}})[0];
  // P^T A = A[perm], so P[r][i] = (perm[i] == r).
  return to(eq(unsqueeze(perm, -2), unsqueeze(arange(0, m), -1)), dtype);
}

Tensor lu_solve(const Tensor& lu, const Tensor& pivots, const Tensor& b, bool left, bool adjoint) {
  static const OpDefPtr def = op("LuSolve");
  if (!left) return mT(lu_solve(lu, pivots, mT(b), /*left=*/true, !adjoint));
  return call_op(*def, {lu, pivots, b}, {{"adjoint", adjoint}})[0];
}

std::tuple<Tensor, Tensor> solve_ex(const Tensor& a, const Tensor& b, bool left,
                                    bool check_errors) {
  static const OpDefPtr def = op("Solve");
  if (is_vector_rhs(a, b)) {
    auto [x, info] = solve_ex(a, unsqueeze(b, -1), left, check_errors);
    return {squeeze(x, -1), std::move(info)};
  }
  if (!left) {
    auto [x, info] = solve_ex(mT(a), mT(b), /*left=*/true, check_errors);
    return {mT(x), std::move(info)};
  }
  TensorList out = call_op(*def, {a, b}, {{"check_errors", check_errors}});
  return {std::move(out[0]), std::move(out[1])};
}

Tensor solve(const Tensor& a, const Tensor& b, bool left) {
  return std::get<0>(solve_ex(a, b, left, /*check_errors=*/true));
}

Tensor solve_triangular(const Tensor& a, const Tensor& b, bool upper, bool left,
                        bool unitriangular) {
  static const OpDefPtr def = op("TriangularSolve");
  if (!left) return mT(solve_triangular(mT(a), mT(b), !upper, /*left=*/true, unitriangular));
  return call_op(*def, {a, b}, {{"upper", upper}, {"unitriangular", unitriangular}})[0];
}

std::tuple<Tensor, Tensor> inv_ex(const Tensor& a, bool check_errors) {
  // An identity of a's shape (not a broadcast one) keeps solve from reading B as vectors.
  check_matrices("linalg.inv", TensorMeta::of(a), /*square=*/true);
  const int64_t n = rows_of(a.shape());
  return solve_ex(a, expand(detail::identity_like(a, n), a.shape()), /*left=*/true, check_errors);
}

Tensor inv(const Tensor& a) { return std::get<0>(inv_ex(a, /*check_errors=*/true)); }

std::tuple<Tensor, Tensor> slogdet(const Tensor& a) {
  static const OpDefPtr def = op("SlogDet");
  TensorList out = call_op(*def, {a}, {});
  return {std::move(out[0]), std::move(out[1])};
}

Tensor det(const Tensor& a) {
  static const OpDefPtr def = op("Det");
  return call_op(*def, {a}, {})[0];
}

}  // namespace linalg
}  // namespace kiln
