// Single-row float32 products (see gemv.h and Note [Single-row products]).
#include "ops/gemv.h"

#include <algorithm>
#include <vector>

#include "core/target_clones.h"
#include "kiln/parallel.h"

namespace kiln {
namespace {

// Note [Single-row products]
// A product with one row, [1, k] @ [k, m], reads each element of b once: it is a pass over b's
// memory, nothing to block for cache. oneDNN's brgemm runs it at about a third of memory speed
// (dot of 1M elements: 1.4 ms here, PyTorch 0.15 ms; [1, 1024] x [1024, 1024] 1.6x PyTorch's
// time), so gemm() runs it here in plain loops the compiler vectorises, split over the columns of
// the output. When b's columns are contiguous (Linear's transposed weight, a dot product) each
// output is one dot product of a with a column; when its rows are, each row of b scaled by a[i]
// is added to the output block, which stays in L1. Sums run in float32 over blocks of kBlock
// terms, whose partial sums add up in float64: one float32 chain over 1M terms was 7x less
// accurate than PyTorch's dot; blocked, the error is that of a kBlock-term sum.

// Output columns per parallel chunk, at least; the row-major path's block of columns; terms per
// float32 partial sum.
constexpr int64_t kColumnGrain = 64;
constexpr int64_t kRowMajorBlock = 1024;
constexpr int64_t kBlock = 256;
// Multiply-adds per chunk: enough that a chunk is worth a thread.
constexpr int64_t kMinChunkWork = int64_t{1} << 15;

KILN_TARGET_CLONES
float dot(const float* x, const float* y, int64_t n) {
  double total = 0.0;
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const int64_t i1 = std::min(n, i0 + kBlock);
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = i0; i < i1; ++i) sum += x[i] * y[i];
    total += sum;
  }
  return static_cast<float>(total);
}

// out[j] = sum_i a[i] * b[i * ldb + j] for j in [0, n): the rows of b, scaled, added in turn
// into `partial` (n floats), whose sums over each kBlock rows add into `total` (n doubles).
KILN_TARGET_CLONES
void rows_times(const float* a, const float* b, int64_t ldb, int64_t k, int64_t n, float* partial,
                double* total, float* out) {
  std::fill(total, total + n, 0.0);
  for (int64_t i0 = 0; i0 < k; i0 += kBlock) {
    std::fill(partial, partial + n, 0.0f);
    for (int64_t i = i0; i < std::min(k, i0 + kBlock); ++i) {
      const float ai = a[i];
      const float* row = b + i * ldb;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) partial[j] += ai * row[j];
    }
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) total[j] += partial[j];
  }
  for (int64_t j = 0; j < n; ++j) out[j] = static_cast<float>(total[j]);
}

// Whether b's columns (b[:, j]) are contiguous, and its rows.
bool contiguous_columns(const Tensor& b) {
  return b.strides()[b.ndim() - 2] == 1 || b.size(-2) == 1;
}
bool contiguous_rows(const Tensor& b) { return b.strides()[b.ndim() - 1] == 1 || b.size(-1) == 1; }

}  // namespace

bool runs_as_gemv(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t k = a.size(-1), m = out.size(-1);
  // out of m elements: one row and every batch dimension of size 1; b of k * m: one matrix.
  return out.dtype() == DType::kFloat32 && out.numel() == m && m > 0 && k > 0 &&
         b.numel() == k * m && (contiguous_columns(b) || contiguous_rows(b));
}

void gemv(const Tensor& a_in, const Tensor& b, const Tensor& out, const GemmEpilogue& ep) {
  const int64_t k = a_in.size(-1), m = out.size(-1);
  const int64_t row_stride = b.strides()[b.ndim() - 2], col_stride = b.strides()[b.ndim() - 1];
  const Tensor a = a_in.strides()[a_in.ndim() - 1] == 1 ? a_in : a_in.contiguous();
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* pc = out.data<float>();
  const float* bias = ep.bias.defined() ? ep.bias.data<float>() : nullptr;
  const auto finish = [&](int64_t j, float acc) {
    float v = static_cast<float>(ep.alpha) * acc;
    if (bias != nullptr) v += bias[j];
    if (ep.accumulate) v += static_cast<float>(ep.beta) * pc[j];
    pc[j] = v;
  };
  const int64_t grain = std::max(kColumnGrain, kMinChunkWork / k);
  if (contiguous_columns(b)) {
    const int64_t ldb = col_stride;  // from one column to the next
    parallel_for(0, m, grain, [&](int64_t lo, int64_t hi) {
      for (int64_t j = lo; j < hi; ++j) finish(j, dot(pa, pb + j * ldb, k));
    });
  } else {
    const int64_t ldb = row_stride;  // from one row to the next
    parallel_for(0, m, grain, [&](int64_t lo, int64_t hi) {
      const size_t width = static_cast<size_t>(std::min(hi - lo, kRowMajorBlock));
      std::vector<float> partial(width), block(width);
      std::vector<double> total(width);
      for (int64_t j0 = lo; j0 < hi; j0 += kRowMajorBlock) {
        const int64_t n = std::min(hi - j0, kRowMajorBlock);
        rows_times(pa, pb + j0, ldb, k, n, partial.data(), total.data(), block.data());
        for (int64_t j = 0; j < n; ++j) finish(j0 + j, block[static_cast<size_t>(j)]);
      }
    });
  }
}

}  // namespace kiln
