// gemm.cpp — BLAS through kiln::BlasOpRunner (oneDNN's sgemm): addmm and a matrix-vector product.
//   ops.addmm(c, a, b, alpha=1.0, beta=1.0) -> alpha * a @ b + beta * c
//   ops.gemv(a [M, K], v [K]) -> [M]
#include <kiln/extension.h>
#include <kiln/runners.h>

kiln::Tensor addmm(const kiln::Tensor& c, const kiln::Tensor& a, const kiln::Tensor& b,
                   double alpha, double beta) {
  kiln::Tensor out(a.dtype(), {a.size(0), b.size(-1)});
  std::make_shared<kiln::BlasOpRunner>("Addmm", static_cast<float>(alpha), static_cast<float>(beta))
      ->Run({a, b, c}, {out});
  return out;
}

kiln::Tensor gemv(const kiln::Tensor& a, const kiln::Tensor& v) {
  kiln::Tensor out(a.dtype(), {a.size(0)});
  std::make_shared<kiln::BlasOpRunner>("Gemv")->Run({a, v}, {out});
  return out;
}

KILN_EXTENSION(m) {
  m.def("addmm", &addmm, {"c", "a", "b", "alpha", "beta"}, "alpha * a @ b + beta * c (sgemm).");
  m.def("gemv", &gemv, {"a", "v"}, "a @ v for a matrix a and a vector v (sgemv).");
}
