// Sorting along one dim: sort, argsort and topk (part of kiln/functional.h).
//
// Values sort in ascending order (descending with `descending`), NaN above every number (last
// ascending, first descending), as PyTorch; -0.0 and 0.0 are equal. Equal values keep their order
// in the input, so every result is deterministic: `stable` is always honoured. Indices are int64
// positions along `dim`. A 0-d tensor sorts as one element (dim 0 or -1). The values are
// differentiable (their gradient goes back to the positions the indices name); indices are not.
#pragma once

#include <cstdint>
#include <tuple>

#include "kiln/export.h"
#include "kiln/tensor.h"

namespace kiln {

/// (values, indices): x sorted along `dim`; x gathered at `indices` along `dim` is `values`.
KILN_API std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1,
                                         bool descending = false);
/// The indices of sort(x, dim, descending): an int64 permutation of each slice along `dim`.
KILN_API Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false);
/// (values, indices) of the k largest elements along `dim` (the k smallest unless `largest`),
/// in sorted order, largest first (smallest first for the smallest). Throws kValue unless
/// 0 <= k <= x.size(dim).
KILN_API std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1,
                                         bool largest = true);

}  // namespace kiln
