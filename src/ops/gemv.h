// The single-row float32 product behind gemm() (private to libkiln): out [1, m] = epilogue(a [1, k]
// @ b [k, m]), batch 1 inference through a Linear or matmul, dot products and matrix-vector
// products, which oneDNN's matmul runs below memory speed (Note [Single-row products]).
//
//   if (runs_as_gemv(a, b, out)) return gemv(a, b, out, epilogue);
#pragma once

#include "kiln/tensor.h"
#include "ops/gemm.h"

namespace kiln {

/// Whether gemv() computes this product: one float32 row (every batch dimension of out of size
/// 1) against one matrix b whose columns or rows are contiguous, with k > 0. Preconditions as
/// gemm()'s.
bool runs_as_gemv(const Tensor& a, const Tensor& b, const Tensor& out);
/// out = epilogue(a @ b) but for the activation, which the caller applies; runs_as_gemv must
/// hold.
void gemv(const Tensor& a, const Tensor& b, const Tensor& out, const GemmEpilogue& epilogue);

}  // namespace kiln
