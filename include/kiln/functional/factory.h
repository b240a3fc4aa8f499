// Tensor factories, and the random ones (part of kiln/functional.h).
//
// Random ops draw from the process-wide default generator unless a call names another
// (kiln/functional/generator.h): kiln::manual_seed(s) makes every later rand / randn / randint /
// randperm / multinomial / bernoulli / dropout sequence reproducible, independent of thread count.
#pragma once

#include <cstdint>
#include <optional>

#include "kiln/export.h"
#include "kiln/functional/generator.h"
#include "kiln/scalar.h"
#include "kiln/tensor.h"

namespace kiln {

KILN_API Tensor zeros(const Shape& shape, DType dtype = DType::kFloat32);
KILN_API Tensor ones(const Shape& shape, DType dtype = DType::kFloat32);
/// dtype defaults to the value's own (bool, int64 or float32).
KILN_API Tensor full(const Shape& shape, const Scalar& value,
                     std::optional<DType> dtype = std::nullopt);
KILN_API Tensor empty(const Shape& shape, DType dtype = DType::kFloat32);
KILN_API Tensor zeros_like(const Tensor& x, std::optional<DType> dtype = std::nullopt);
KILN_API Tensor ones_like(const Tensor& x, std::optional<DType> dtype = std::nullopt);
/// [start, end) in steps; dtype defaults to int64 when all three are integers, else float32.
KILN_API Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1,
                       std::optional<DType> dtype = std::nullopt);
KILN_API Tensor linspace(double start, double end, int64_t steps,
                         DType dtype = DType::kFloat32);
KILN_API Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt,
                    DType dtype = DType::kFloat32);

/// Each random factory below draws from the default generator, or from `generator` when given
/// (an overload of the same function). A call with a generator of its own cannot be traced by
/// kiln::jit (a kNotImplemented error): the graph would draw from the default generator when it
/// runs.

/// Uniform in [0, 1).
KILN_API Tensor rand(const Shape& shape, DType dtype = DType::kFloat32);
KILN_API Tensor rand(const Shape& shape, DType dtype, const Generator& generator);
/// Standard normal.
KILN_API Tensor randn(const Shape& shape, DType dtype = DType::kFloat32);
KILN_API Tensor randn(const Shape& shape, DType dtype, const Generator& generator);
/// Uniform integers in [low, high).
KILN_API Tensor randint(int64_t low, int64_t high, const Shape& shape,
                        DType dtype = DType::kInt64);
KILN_API Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype,
                        const Generator& generator);
/// A uniformly random permutation of 0 .. n - 1 (an integer dtype that holds n - 1).
KILN_API Tensor randperm(int64_t n, DType dtype = DType::kInt64);
KILN_API Tensor randperm(int64_t n, DType dtype, const Generator& generator);
/// int64 indices of categories drawn from each row of `probs` ([C] or [B, C], non-negative finite
/// weights with a positive sum, not necessarily normalised): [num_samples] or [B, num_samples].
/// Without `replacement` a row's samples are distinct (num_samples at most its categories of
/// positive weight). Weights are checked when the kernel runs: a bad one is a kValue error.
KILN_API Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false);
KILN_API Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement,
                            const Generator& generator);
/// 1 with probability p[i], else 0, for each element of the floating tensor `p` (in its dtype;
/// not differentiable). A probability outside [0, 1] or NaN is a kValue error when the kernel
/// runs.
KILN_API Tensor bernoulli(const Tensor& p);
KILN_API Tensor bernoulli(const Tensor& p, const Generator& generator);

}  // namespace kiln
