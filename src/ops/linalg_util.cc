#include "ops/linalg_util.h"

#include <algorithm>

#include "kiln/functional/elementwise.h"
#include "kiln/functional/factory.h"
#include "kiln/functional/reduce.h"
#include "kiln/functional/shape.h"
#include "kiln/parallel.h"

namespace kiln::detail {

void check_matrices(const char* fn, const TensorMeta& a, bool square) {
  KILN_CHECK_DTYPE(a.dtype == DType::kFloat32 || a.dtype == DType::kFloat64)
      << fn << ": expected a float32 or float64 tensor, got " << a.dtype;
  KILN_CHECK_SHAPE(a.ndim() >= 2) << fn << ": expected a tensor of matrices (at least 2 dims), got "
                                  << a.ndim() << "-d " << shape_str(a.shape);
  const int64_t rows = a.shape[a.ndim() - 2], cols = a.shape[a.ndim() - 1];
  KILN_CHECK_SHAPE(!square || rows == cols) << fn << ": expected square matrices, got " << rows
                                            << " x " << cols << " (" << shape_str(a.shape) << ")";
}

Shape batch_shape(const Shape& a) { return Shape(a.begin(), a.end() - 2); }

Shape broadcast_batch(const char* fn, const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    KILN_CHECK_SHAPE(da == db || da == 1 || db == 1)
        << fn << ": expected batch dimensions that broadcast, got " << shape_str(a) << " and "
        << shape_str(b);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape matrix_shape(const Shape& batch, int64_t rows, int64_t cols) {
  Shape shape = batch;
  shape.push_back(rows);
  shape.push_back(cols);
  return shape;
}

Float64Matrices::Float64Matrices(const Tensor& x, const Shape& shape, const Tensor& out) {
  const bool in_place = out.defined() && out.dtype() == DType::kFloat64 && out.shape() == shape;
  buffer_ = in_place ? out : Tensor::empty(shape, DType::kFloat64);
  if (x.defined()) copy_into(buffer_, x);
  data_ = buffer_.data<double>();
  const size_t rank = shape.size();
  matrix_size_ = shape[rank - 2] * shape[rank - 1];
  count_ = 1;
  for (size_t i = 0; i + 2 < rank; ++i) count_ *= shape[i];
}

void Float64Matrices::finish(const Tensor& out) const { finish_float64(out, buffer_); }

Tensor float64_output(const Tensor& out) {
  return out.dtype() == DType::kFloat64 ? out : Tensor::empty(out.shape(), DType::kFloat64);
}

void finish_float64(const Tensor& out, const Tensor& buffer) {
  if (!out.is_same(buffer)) copy_into(out, buffer);
}

void for_each_matrix(int64_t count, const std::function<void(int64_t)>& fn) {
  parallel_for(0, count, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t b = lo; b < hi; ++b) fn(b);
  });
}

void check_info(const char* fn, const Tensor& info,
                const std::function<std::string(int32_t)>& what) {
  const int32_t* p = info.data<int32_t>();
  for (int64_t b = 0; b < info.numel(); ++b) {
    KILN_CHECK_VALUE(p[b] == 0) << fn << ": " << what(p[b])
                                << (info.ndim() > 0
                                        ? " in matrix " + std::to_string(b) + " of the batch"
                                        : std::string());
  }
}

Tensor mT(const Tensor& x) { return transpose(x, -2, -1); }

Tensor identity_like(const Tensor& x, int64_t n) { return eye(n, std::nullopt, x.dtype()); }

Tensor diag_embed(const Tensor& v) {
  const int64_t k = v.shape()[v.ndim() - 1];
  return unsqueeze(v, -1) * identity_like(v, k);
}

Tensor diagonal(const Tensor& x) {
  return sum(x * identity_like(x, x.shape()[x.ndim() - 1]), {-1});
}

}  // namespace kiln::detail
