// The batched matrix-multiply engine behind MatMul, BatchMatMul, Linear and AddMM (private to
// libkiln).
//
//   GemmEpilogue ep;                       // out = a @ b
//   gemm(a, b, out, ep);                   // a [..., n, k], b [..., k, m], out [batch..., n, m]
//
// float32 runs on oneDNN's matmul primitive (strided and transposed operands passed as strides,
// batch broadcasting as size-1 dimensions, primitives cached; see Note [oneDNN matmul layouts];
// large products on oneDNN's gemm:jit, see Note [oneDNN matmul implementation]);
// float64, the integer types and bool run a blocked, parallel loop; a float32 product of one row
// runs as a pass over b (gemv.h).
#pragma once

#include <optional>
#include <string>

#include "kiln/export.h"
#include "kiln/tensor.h"
#include "ops/simd/float_kernels.h"

namespace kiln {

/// What is done with the product before it is stored:
///   out = activation(alpha * (a @ b) + bias + (accumulate ? beta * out : 0)).
struct GemmEpilogue {
  double alpha = 1.0;
  /// Adds beta times the values already in `out` (AddMM pre-fills out with its bias).
  bool accumulate = false;
  double beta = 0.0;
  /// 1-d [m], contiguous, of out's dtype, added to every row; undefined for none. Only with
  /// alpha == 1 (Linear).
  Tensor bias;
  /// Applied last, for float32 and float64 only: one of kRelu, kGeluErf, kGeluTanh, kSilu,
  /// kSigmoid, kTanh (float32 runs it as a oneDNN eltwise post-op, so its values agree with
  /// simd::unary's to a few ulp, not bitwise); nullopt for none.
  std::optional<simd::UnaryOp> activation;
};

/// Whether gemm() can apply `op` as an activation epilogue.
bool is_gemm_activation(simd::UnaryOp op);

/// out = epilogue(a @ b) over broadcast batch dimensions.
/// Preconditions (checked by the ops' infer): a and b have ndim >= 2, a.shape[-1] ==
/// b.shape[-2], their batch dimensions broadcast to out's; a, b and out share one dtype that is
/// not float16/bfloat16 (callers compute those in float32); out is contiguous with shape
/// [batch..., n, m]. bool supports no epilogue. Thread-safe; uses the intra-op pool.
void gemm(const Tensor& a, const Tensor& b, const Tensor& out, const GemmEpilogue& epilogue);

/// The oneDNN implementation gemm() runs for these arguments ("gemm:jit", "brg:avx512_core", ...;
/// see Note [oneDNN matmul implementation] in gemm.cc), "gemv" for its single-row loop (gemv.h),
/// or "" when its own blocked loop runs them.
/// Preconditions as for gemm(). Exported for the C++ tests.
KILN_API std::string gemm_implementation(const Tensor& a, const Tensor& b, const Tensor& out,
                                         const GemmEpilogue& epilogue);

}  // namespace kiln
