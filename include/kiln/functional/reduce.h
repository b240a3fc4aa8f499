// Reductions, scans and softmax (part of kiln/functional.h).
//
// `dims` lists the dimensions to reduce (negative counts from the end); empty means all of them.
// With keepdim the reduced dimensions stay with size 1. sum and prod of bool/integer inputs give
// int64 (as NumPy on this platform); mean, var, std and logsumexp of integer inputs give the
// default floating dtype (default_float_dtype(): float32 unless changed).
// float16/bfloat16 accumulate in float32; float32 sums use pairwise/blocked accumulation.
// Reducing an empty dimension: sum 0, prod 1, mean/var NaN; max/min/argmax/argmin raise kValue.
#pragma once

#include <optional>
#include <tuple>
#include <vector>

#include "kiln/export.h"
#include "kiln/tensor.h"

namespace kiln {

using Dims = std::vector<int64_t>;

KILN_API Tensor sum(const Tensor& x, const Dims& dims = {}, bool keepdim = false,
                    std::optional<DType> dtype = std::nullopt);
/// `x` summed down to `shape`, which x's shape broadcasts from (x itself when equal): the gradient
/// of a broadcast operand. Throws kShape when `shape` does not broadcast to x's shape.
KILN_API Tensor sum_to(const Tensor& x, const Shape& shape);
KILN_API Tensor mean(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
/// The mean of x converted to `dtype` first, as PyTorch's mean(dtype=...): float64 accumulation
/// of a float32 tensor, say. Throws kDType unless `dtype` is a floating dtype.
KILN_API Tensor mean(const Tensor& x, const Dims& dims, bool keepdim, DType dtype);
KILN_API Tensor prod(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
/// The product accumulated and returned in `dtype`, as PyTorch's prod(dtype=...) and sum's.
KILN_API Tensor prod(const Tensor& x, const Dims& dims, bool keepdim, DType dtype);
KILN_API Tensor amax(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
KILN_API Tensor amin(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
/// Maximum over everything (a 0-d tensor), or over `dim` as (values, indices).
KILN_API Tensor max(const Tensor& x);
KILN_API std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
KILN_API Tensor min(const Tensor& x);
KILN_API std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
/// Index (int64) of the first maximum over the flattened tensor, or along `dim`.
KILN_API Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt,
                       bool keepdim = false);
KILN_API Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt,
                       bool keepdim = false);
/// Variance with `correction` (1 = unbiased, as PyTorch's default; NumPy's ddof).
KILN_API Tensor var(const Tensor& x, const Dims& dims = {}, int64_t correction = 1,
                    bool keepdim = false);
KILN_API Tensor std(const Tensor& x, const Dims& dims = {}, int64_t correction = 1,
                    bool keepdim = false);
KILN_API Tensor logsumexp(const Tensor& x, const Dims& dims, bool keepdim = false);
/// Inclusive prefix sums along `dim`.
KILN_API Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
/// With `reverse`, suffix sums (element i is the sum of elements i.. of its scan), the gradient
/// of prefix sums. (An overload, not a default argument: the three-argument symbol stays.)
KILN_API Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype, bool reverse);
/// The first-order linear recurrence y[k] = a[k] * y[k - 1] + b[k] along `dim` (y[-1] = 0), from
/// the end with `reverse` (y[k] = a[k] * y[k + 1] + b[k]); a and b of one shape, the result of
/// their promoted dtype (floats accumulate in double, integers wrap as int64). cumprod, decaying
/// sums and the scans of linear state-space models are such recurrences (primitive LinearScan).
KILN_API Tensor linear_scan(const Tensor& a, const Tensor& b, int64_t dim, bool reverse = false);
KILN_API Tensor softmax(const Tensor& x, int64_t dim = -1);
KILN_API Tensor log_softmax(const Tensor& x, int64_t dim = -1);

}  // namespace kiln
