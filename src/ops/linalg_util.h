// What the kiln::linalg ops share (private to src/ops): the argument checks of their infer
// functions, the float64 working copies their kernels factorize in place, and the small tensor
// expressions their gradient rules are written with.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "kiln/op.h"
#include "kiln/tensor.h"

namespace kiln::detail {

/// Checks that `a` holds float32 or float64 matrices (ndim >= 2), square when `square`;
/// errors name `fn` ("linalg.cholesky") and say what was expected.
void check_matrices(const char* fn, const TensorMeta& a, bool square);
/// The number of rows (cols) of the matrices of shape s (the second-to-last / last dim).
inline int64_t rows_of(const Shape& s) { return s[s.size() - 2]; }
inline int64_t cols_of(const Shape& s) { return s[s.size() - 1]; }
/// a's leading (batch) dims.
Shape batch_shape(const Shape& a);
/// The broadcast of two batch shapes, or a ShapeError naming `fn`.
Shape broadcast_batch(const char* fn, const Shape& a, const Shape& b);
/// `batch` followed by `rows` and `cols`.
Shape matrix_shape(const Shape& batch, int64_t rows, int64_t cols);

/// The matrices of `x` broadcast to `shape` ([batch..., rows, cols]) as one contiguous float64
/// buffer the kernels work in: `out` itself when it has that shape and is float64 (then the
/// result is already in place), else a new tensor. finish() writes the buffer into `out`. An
/// undefined `x` leaves the buffer unset (for a result computed from other matrices).
class Float64Matrices {
 public:
  Float64Matrices(const Tensor& x, const Shape& shape, const Tensor& out = {});
  /// Matrix b of the batch.
  double* matrix(int64_t b) const { return data_ + b * matrix_size_; }
  int64_t count() const { return count_; }
  /// Copies the buffer into `out` (converting to its dtype) unless it is `out`.
  void finish(const Tensor& out) const;

 private:
  Tensor buffer_;
  double* data_;
  int64_t matrix_size_;
  int64_t count_;
};

/// `out` itself when it is float64, else a new float64 tensor of its shape: where a kernel
/// writes a result that is not a batch of matrices (eigenvalues, determinants) before
/// finish_float64(out, buffer) converts it into `out`.
Tensor float64_output(const Tensor& out);
void finish_float64(const Tensor& out, const Tensor& buffer);

/// Runs fn(b) for every matrix b in [0, count) across the intra-op pool.
void for_each_matrix(int64_t count, const std::function<void(int64_t)>& fn);

/// Raises the kValue error `what` names for the first nonzero entry of `info` (one per matrix of
/// a batch): "<fn>: <what> in matrix <b> of the batch" with `what` given that entry.
void check_info(const char* fn, const Tensor& info,
                const std::function<std::string(int32_t)>& what);

/// x with its last two dims swapped.
Tensor mT(const Tensor& x);
/// Identity matrices of x's dtype: [n, n].
Tensor identity_like(const Tensor& x, int64_t n);
/// [..., k] -> [..., k, k] with v on the diagonal.
Tensor diag_embed(const Tensor& v);
/// [..., k, k] -> [..., k]: the diagonal.
Tensor diagonal(const Tensor& x);

}  // namespace kiln::detail
