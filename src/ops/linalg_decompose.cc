// The decompositions of kiln::linalg: Qr, Eigh and Svd (kiln/functional/linalg.h), with their
// gradients (Note [Linear-algebra gradients] in linalg_factor.cc).
//
// eigvalsh and svdvals are outputs of the same ops, which always compute the vectors too: their
// gradients need them.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/functional/elementwise.h"
#include "kiln/functional/factory.h"
#include "kiln/functional/linalg.h"
#include "kiln/functional/nn.h"
#include "kiln/functional/shape.h"
#include "ops/grad_util.h"
#include "ops/linalg_kernels.h"
#include "ops/linalg_util.h"

namespace kiln {
namespace {

using detail::check_matrices;
using detail::cols_of;
using detail::diag_embed;
using detail::Float64Matrices;
using detail::for_each_matrix;
using detail::identity_like;
using detail::matrix_shape;
using detail::mT;
using detail::rows_of;

/// The first `count` entries of x along `dim` (a copy when count < the size).
Tensor leading(const Tensor& x, int64_t count, int64_t dim) {
  const int64_t size = x.shape()[wrap_dim(dim, x.ndim())];
  if (count == size) return x;
  return split(x, std::vector<int64_t>{count, size - count}, dim)[0];
}

/// `g` or, when undefined (no gradient reached that output), zeros like `like`.
Tensor or_zeros(const Tensor& g, const Tensor& like) { return g.defined() ? g : zeros_like(like); }

/// Raises for the first matrix whose iteration failed (`failed` per matrix of the batch).
void check_converged(const char* fn, const std::vector<int32_t>& failed) {
  for (size_t b = 0; b < failed.size(); ++b) {
    KILN_CHECK_VALUE(!failed[b])
        << fn << ": the algorithm failed to converge because the input matrix contains a NaN "
        << "or an infinity, or is too ill-conditioned (matrix " << b << " of the batch)";
  }
}

// ---- Qr -----------------------------------------------------------------------------------

/// TensorFlow's QR gradient (linalg_grad.py, _QrGradSquareAndDeepMatrices) for m >= n, R
/// square: gA = Q (gR + tril(Q^T gQ - gQ^T Q + R gR^T - gR R^T) R^{-T}) + (gQ - Q Q^T gQ)
/// R^{-T}.
Tensor qr_grad_deep(const Tensor& Q, const Tensor& R, const Tensor& gQ, const Tensor& gR) {
  const auto times_r_inv_t = [&](const Tensor& x) {
    return linalg::solve_triangular(mT(R), x, /*upper=*/false, /*left=*/false);
  };
  const Tensor qdq = matmul(mT(Q), gQ);
  const Tensor rdr = matmul(R, mT(gR));
  const Tensor lower = tril(qdq - mT(qdq) + rdr - mT(rdr));
  return matmul(Q, gR + times_r_inv_t(lower)) + times_r_inv_t(gQ - matmul(Q, qdq));
}

std::vector<Tensor> qr_grad(const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                            const Attrs& attrs, const std::vector<Tensor>& grads) {
  if ((!grads[0].defined() && !grads[1].defined()) || !detail::differentiable(in[0])) {
    return {Tensor()};
  }
  const std::string& mode = attrs.get<std::string>("mode");
  const Tensor &A = in[0], &Q = out[0], &R = out[1];
  const int64_t m = rows_of(A.shape()), n = cols_of(A.shape());
  KILN_CHECK_VALUE(mode != "r")
      << "linalg.qr: the gradient needs Q, which mode='r' does not compute; use "
         "mode='reduced'";
  KILN_CHECK_VALUE(mode != "complete" || m <= n)
      << "linalg.qr: mode='complete' has no gradient for m > n (" << m << " x " << n
      << "): Q's last " << m - n << " columns are not determined by A; use mode='reduced'";
  const Tensor gQ = or_zeros(grads[0], Q), gR = or_zeros(grads[1], R);
  if (m >= n) return {qr_grad_deep(Q, R, gQ, gR)};
  // A = [X Y] with X square: X = Q U and Y = Q V for R = [U V].
  const std::vector<Tensor> a = split(A, std::vector<int64_t>{m, n - m}, -1);
  const std::vector<Tensor> r = split(R, std::vector<int64_t>{m, n - m}, -1);
  const std::vector<Tensor> gr = split(gR, std::vector<int64_t>{m, n - m}, -1);
  const Tensor gX = qr_grad_deep(Q, r[0], gQ + matmul(a[1], mT(gr[1])), gr[0]);
  return {cat({gX, matmul(Q, gr[1])}, -1)};
}

KILN_REGISTER_OP(
    OpDef("Qr")
        .input("a")
        .attr("mode", AttrKind::kString, std::string("reduced"))
        .outputs(2)
        .doc("(Q, R) with A = Q R by Householder reflections; mode 'reduced' (Q [m, k]), "
             "'complete' (Q [m, m]) or 'r' (R only, Q empty)")
        .infer([](const InferContext& ctx) {
          const TensorMeta& a = ctx.input(0);
          check_matrices("linalg.qr", a, /*square=*/false);
          const std::string& mode = ctx.attrs.get<std::string>("mode");
          KILN_CHECK_VALUE(mode == "reduced" || mode == "complete" || mode == "r")
              << "linalg.qr: expected mode 'reduced', 'complete' or 'r', got '" << mode << "'";
          const Shape batch = detail::batch_shape(a.shape);
          const int64_t m = rows_of(a.shape), n = cols_of(a.shape), k = std::min(m, n);
          const int64_t r_rows = mode == "complete" ? m : k;
          const Shape q =
              mode == "r" ? Shape{0} : matrix_shape(batch, m, mode == "complete" ? m : k);
          return MetaList{{a.dtype, q}, {a.dtype, matrix_shape(batch, r_rows, n)}};
        })
        .grad(qr_grad)
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor &q = ctx.outputs[0], &r = ctx.outputs[1];
          const Shape& shape = ctx.inputs[0].shape();
          const int64_t m = rows_of(shape), n = cols_of(shape), r_rows = rows_of(r.shape());
          const bool with_q = ctx.attrs.get<std::string>("mode") != "r";
          const Float64Matrices work(ctx.inputs[0], shape);
          const Float64Matrices r_out(Tensor(), r.shape(), r);
          std::optional<Float64Matrices> q_out;
          if (with_q) q_out.emplace(Tensor(), q.shape(), q);
          const int64_t q_cols = with_q ? cols_of(q.shape()) : 0;
          for_each_matrix(work.count(), [&](int64_t b) {
            detail::householder_qr(work.matrix(b), m, n, with_q ? q_out->matrix(b) : nullptr,
                                   q_cols);
            std::copy_n(work.matrix(b), r_rows * n, r_out.matrix(b));
          });
          r_out.finish(r);
          if (with_q) q_out->finish(q);
        }));

// ---- Eigh ---------------------------------------------------------------------------------

/// gA = V (diag(gw) + skew(V^T gV) / E) V^T with E[i][j] = w[j] - w[i] and skew(X) = (X -
/// X^T) / 2: PyTorch's (linalg_eig_backward for Hermitian A), a symmetric gradient.
std::vector<Tensor> eigh_grad(const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                              const Attrs&, const std::vector<Tensor>& grads) {
  const Tensor &gw = grads[0], &gV = grads[1];
  if ((!gw.defined() && !gV.defined()) || !detail::differentiable(in[0])) return {Tensor()};
  const Tensor &w = out[0], &V = out[1];
  const int64_t n = cols_of(V.shape());
  Tensor inner;
  if (gV.defined()) {
    const Tensor vgv = matmul(mT(V), gV);
    const Tensor gaps = unsqueeze(w, -2) - unsqueeze(w, -1) + identity_like(w, n);
    inner = 0.5 * (vgv - mT(vgv)) / gaps;
  }
  if (gw.defined()) inner = inner.defined() ? inner + diag_embed(gw) : diag_embed(gw);
  return {matmul(V, matmul(inner, mT(V)))};
}

KILN_REGISTER_OP(
    OpDef("Eigh")
        .input("a")
        .attr("uplo", AttrKind::kString, std::string("L"))
        .outputs(2)
        .doc("(w, V): the ascending eigenvalues and orthonormal eigenvectors of symmetric "
             "matrices, reading the lower ('L') or upper ('U') triangle")
        .infer([](const InferContext& ctx) {
          const TensorMeta& a = ctx.input(0);
          check_matrices("linalg.eigh", a, /*square=*/true);
          const std::string& uplo = ctx.attrs.get<std::string>("uplo");
          KILN_CHECK_VALUE(uplo == "L" || uplo == "U")
              << "linalg.eigh: expected UPLO 'L' or 'U', got '" << uplo << "'";
          Shape w = detail::batch_shape(a.shape);
          w.push_back(cols_of(a.shape));
          return MetaList{{a.dtype, w}, {a.dtype, a.shape}};
        })
        .grad(eigh_grad)
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor &w = ctx.outputs[0], &v = ctx.outputs[1];
          const int64_t n = cols_of(v.shape());
          const bool lower = ctx.attrs.get<std::string>("uplo") == "L";
          const Float64Matrices work(ctx.inputs[0], v.shape());
          const Tensor w_out = detail::float64_output(w);
          const Float64Matrices v_out(Tensor(), v.shape(), v);
          std::vector<int32_t> failed(static_cast<size_t>(work.count()));
          for_each_matrix(work.count(), [&](int64_t b) {
            double* a = work.matrix(b);
            for (int64_t i = 0; i < n; ++i) {  // the read triangle mirrored onto the other
              for (int64_t j = i + 1; j < n; ++j) {
                if (lower)
                  a[i * n + j] = a[j * n + i];
                else
                  a[j * n + i] = a[i * n + j];
              }
            }
            failed[b] =
                !detail::symmetric_eigen(a, n, w_out.data<double>() + b * n, v_out.matrix(b));
          });
          check_converged("linalg.eigh", failed);
          detail::finish_float64(w, w_out);
          v_out.finish(v);
        }));

// ---- Svd ----------------------------------------------------------------------------------

/// PyTorch's svd_backward for real A [m, n], k = min(m, n), on the reduced factors (the full
/// ones' extra columns get no gradient): with F[i][j] = 1 / (s[j]^2 - s[i]^2) off the diagonal,
///   gA = U (F o (U^T gU - gU^T U) S + S F o (V^T gV - gV^T V) + diag(gS)) V^T
///        + (I - U U^T) gU S^{-1} V^T + U S^{-1} gV^T (I - V V^T),
/// the last two terms only for m > k and n > k.
std::vector<Tensor> svd_grad(const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                             const Attrs&, const std::vector<Tensor>& grads) {
  if ((!grads[0].defined() && !grads[1].defined() && !grads[2].defined()) ||
      !detail::differentiable(in[0])) {
    return {Tensor()};
  }
  const int64_t m = rows_of(in[0].shape()), n = cols_of(in[0].shape()), k = std::min(m, n);
  const Tensor U = leading(out[0], k, -1), S = out[1], Vh = leading(out[2], k, -2);
  const Tensor gU = grads[0].defined() ? leading(grads[0], k, -1) : Tensor();
  const Tensor gS = grads[1];
  const Tensor gVh = grads[2].defined() ? leading(grads[2], k, -2) : Tensor();
  const Tensor s_row = unsqueeze(S, -2), s_col = unsqueeze(S, -1);
  Tensor inner = diag_embed(gS.defined() ? gS : zeros_like(S));
  if (gU.defined() || gVh.defined()) {
    const Tensor s2 = S * S;
    const Tensor gaps = unsqueeze(s2, -2) - unsqueeze(s2, -1) + identity_like(S, k);
    const auto skew = [](const Tensor& x) { return x - mT(x); };
    if (gU.defined()) inner = inner + skew(matmul(mT(U), gU)) * s_row / gaps;
    if (gVh.defined()) inner = inner + s_col * skew(matmul(Vh, mT(gVh))) / gaps;
  }
  Tensor gA = matmul(U, matmul(inner, Vh));
  if (m > k && gU.defined()) {
    gA = gA + matmul((gU - matmul(U, matmul(mT(U), gU))) / s_row, Vh);
  }
  if (n > k && gVh.defined()) {
    gA = gA + matmul(U, (gVh - matmul(matmul(gVh, mT(Vh)), Vh)) / s_col);
  }
  return {gA};
}

KILN_REGISTER_OP(
    OpDef("Svd")
        .input("a")
        .attr("full_matrices", AttrKind::kBool, true)
        .outputs(3)
        .doc("(U, S, Vh) with A = U diag(S) Vh, S descending, by bidiagonalization and "
             "Golub-Kahan QR; "
             "U [m, m] and Vh [n, n] with `full_matrices`, else [m, k] and [k, n]")
        .infer([](const InferContext& ctx) {
          const TensorMeta& a = ctx.input(0);
          check_matrices("linalg.svd", a, /*square=*/false);
          const bool full = ctx.attrs.get<bool>("full_matrices");
          const Shape batch = detail::batch_shape(a.shape);
          const int64_t m = rows_of(a.shape), n = cols_of(a.shape), k = std::min(m, n);
          Shape s = batch;
          s.push_back(k);
          return MetaList{{a.dtype, matrix_shape(batch, m, full ? m : k)},
                          {a.dtype, s},
                          {a.dtype, matrix_shape(batch, full ? n : k, n)}};
        })
        .grad(svd_grad)
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor &u = ctx.outputs[0], &s = ctx.outputs[1], &vt = ctx.outputs[2];
          const Shape& shape = ctx.inputs[0].shape();
          const int64_t m = rows_of(shape), n = cols_of(shape), k = std::min(m, n);
          const Float64Matrices work(ctx.inputs[0], shape);
          const Float64Matrices u_out(Tensor(), u.shape(), u);
          const Float64Matrices vt_out(Tensor(), vt.shape(), vt);
          const Tensor s_out = detail::float64_output(s);
          const int64_t u_cols = cols_of(u.shape()), vt_rows = rows_of(vt.shape());
          std::vector<int32_t> failed(static_cast<size_t>(work.count()));
          for_each_matrix(work.count(), [&](int64_t b) {
            failed[b] = !detail::singular_value_decomposition(
                work.matrix(b), m, n, s_out.data<double>() + b * k, u_out.matrix(b), u_cols,
                vt_out.matrix(b), vt_rows);
          });
          check_converged("linalg.svd", failed);
          u_out.finish(u);
          detail::finish_float64(s, s_out);
          vt_out.finish(vt);
        }));

}  // namespace

namespace linalg {

std::tuple<Tensor, Tensor> qr(const Tensor& a, const std::string& mode) {
  static const OpDefPtr def = OpRegistry::Instance().get("Qr");
  TensorList out = call_op(*def, {a}, {{"mode", mode}});
  return {std::move(out[0]), std::move(out[1])};
}

std::tuple<Tensor, Tensor> eigh(const Tensor& a, const std::string& uplo) {
  static const OpDefPtr def = OpRegistry::Instance().get("Eigh");
  TensorList out = call_op(*def, {a}, {{"uplo", uplo}});
  return {std::move(out[0]), std::move(out[1])};
}

Tensor eigvalsh(const Tensor& a, const std::string& uplo) {
  check_matrices("linalg.eigvalsh", TensorMeta::of(a), /*square=*/true);
  return std::get<0>(eigh(a, uplo));
}

std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& a, bool full_matrices) {
  static const OpDefPtr def = OpRegistry::Instance().get("Svd");
  TensorList out = call_op(*def, {a}, {{"full_matrices", full_matrices}});
  return {std::move(out[0]), std::move(out[1]), std::move(out[2])};
}

Tensor svdvals(const Tensor& a) {
  check_matrices("linalg.svdvals", TensorMeta::of(a), /*square=*/false);
  return std::get<1>(svd(a, /*full_matrices=*/false));
}

}  // namespace linalg
}  // namespace kiln
