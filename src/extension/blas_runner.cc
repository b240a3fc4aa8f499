// BlasOpRunner: GEMM and GEMV through oneDNN's sgemm (see kiln/runners.h).
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <string>
#include <utility>

#include "kiln/runners.h"

namespace kiln {
namespace {

// How BLAS sees a [rows, cols] view: transposed or not, and its leading dimension. Any layout
// with a unit stride along one dimension works without a copy.
struct BlasMatrix {
  char trans;
  int64_t ld;
};

BlasMatrix blas_matrix(const OpRunner& r, const Tensor& t, int64_t rows, int64_t cols,
                       const char* what) {
  const int64_t s0 = t.stride(0);
  const int64_t s1 = t.ndim() == 2 ? t.stride(1) : 1;  // a vector is one column: [rows, 1]
  // Row-major: unit column stride, rows at least `cols` apart (a stride of a size-1 dimension
  // does not matter).
  if ((s1 == 1 || cols == 1) && (rows == 1 || s0 >= std::max<int64_t>(cols, 1))) {
    return {'N', rows == 1 ? std::max<int64_t>(cols, 1) : s0};
  }
  // Column-major (a transposed view): unit row stride, columns at least `rows` apart.
  if ((s0 == 1 || rows == 1) && (cols == 1 || s1 >= std::max<int64_t>(rows, 1))) {
    return {'T', cols == 1 ? std::max<int64_t>(rows, 1) : s1};
  }
  KILN_FAIL(kValue) << "BlasOpRunner '" << r.op_name() << "': " << what << " "
                    << shape_str(t.shape()) << " with strides " << shape_str(t.strides())
                    << " is not a BLAS matrix (expected a unit stride along one dimension); "
                    << "call .contiguous()";
}

}  // namespace

BlasOpRunner::BlasOpRunner(std::string op_name, float alpha, float beta)
    : OpRunner(std::move(op_name)), alpha_(alpha), beta_(beta) {}

void BlasOpRunner::LaunchKernel() {
  const std::string where = "BlasOpRunner '" + op_name() + "': ";
  KILN_CHECK_VALUE((inputs().size() == 2 || inputs().size() == 3) && outputs().size() == 1)
      << where << "expected inputs {a, b} or {a, b, c} and one output, got " << inputs().size()
      << " inputs and " << outputs().size() << " outputs";
  const bool has_c = inputs().size() == 3 && inputs()[2].defined();
  KILN_CHECK_VALUE(beta_ == 0.0f || has_c)
      << where << "beta is " << beta_ << " but no input c was given (out = alpha * a @ b + "
      << "beta * c)";
  const Tensor& a = inputs()[0];
  const Tensor& b = inputs()[1];
  const Tensor& out = outputs()[0];
  for (const Tensor* t : {&a, &b, &out}) {
    KILN_CHECK_DTYPE(t->dtype() == DType::kFloat32)
        << where << "expected float32 operands (oneDNN's sgemm), got " << t->dtype();
  }
  KILN_CHECK_SHAPE(a.ndim() == 2 && (b.ndim() == 2 || b.ndim() == 1) && a.size(1) == b.size(0))
      << where << "expected a [M, K] and b [K, N] or [K], got " << shape_str(a.shape())
      << " and " << shape_str(b.shape());
  const int64_t m = a.size(0), k = a.size(1), n = b.ndim() == 2 ? b.size(1) : 1;
  const Shape expected = b.ndim() == 2 ? Shape{m, n} : Shape{m};
  KILN_CHECK_SHAPE(out.shape() == expected)
      << where << "expected an output of shape " << shape_str(expected) << ", got "
      << shape_str(out.shape());
  KILN_CHECK_VALUE(out.is_contiguous()) << where << "expected a contiguous output";
  if (has_c && beta_ != 0.0f && inputs()[2].data_ptr() != out.data_ptr()) {
    copy_into(out, inputs()[2]);  // BLAS updates C in place; c may broadcast (a bias row)
  }
  if (m == 0 || n == 0) return;
  const BlasMatrix am = blas_matrix(*this, a, m, k, "a");
  const BlasMatrix bm = blas_matrix(*this, b, k, n, "b");
  const dnnl_status_t status =
      dnnl_sgemm(am.trans, bm.trans, m, n, k, alpha_, a.data<float>(), am.ld, b.data<float>(),
                 bm.ld, beta_, out.data<float>(), n);
  KILN_CHECK(status == dnnl_success) << where << "dnnl_sgemm failed with status " << status;
}

}  // namespace kiln
