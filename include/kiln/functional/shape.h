// Shape and indexing ops (part of kiln/functional.h).
//
// reshape, transpose, permute, expand, squeeze, unsqueeze, flatten and as_strided (of a contiguous
// tensor) return views in eager mode (as the Tensor methods do) and are primitives in graphs. The
// rest copy.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kiln/export.h"
#include "kiln/scalar.h"
#include "kiln/tensor.h"

namespace kiln {

KILN_API Tensor reshape(const Tensor& x, const Shape& shape);
KILN_API Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
KILN_API Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
KILN_API Tensor expand(const Tensor& x, const Shape& shape);
/// Every size-1 dim when `dim` is empty.
KILN_API Tensor squeeze(const Tensor& x, std::optional<int64_t> dim = std::nullopt);
KILN_API Tensor unsqueeze(const Tensor& x, int64_t dim);
KILN_API Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
KILN_API Tensor contiguous(const Tensor& x);
/// Elements offset + sum(i[d] * stride[d]) of x's row-major element sequence (a view when x is
/// contiguous). The jit records views made by Tensor methods of traced values with it.
KILN_API Tensor as_strided(const Tensor& x, const Shape& size, const Shape& stride,
                           int64_t offset = 0);
/// A contiguous copy of x whose elements in as_strided(x, size, stride, offset) are src's (src has
/// shape `size`); the view must reach each element at most once (a ShapeError otherwise). The
/// gradient of a non-overlapping as_strided.
KILN_API Tensor as_strided_scatter(const Tensor& x, const Tensor& src, const Shape& size,
                                   const Shape& stride, int64_t offset = 0);

/// Joins tensors (promoted to a common dtype) along an existing / a new dimension.
KILN_API Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
KILN_API Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
/// Pieces of `split_size` (the last may be smaller), or of the given sizes (which must sum to
/// the dimension).
KILN_API std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
KILN_API std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes,
                                   int64_t dim = 0);
/// `chunks` pieces of ceil(n / chunks) (fewer when n is small), as torch.chunk.
KILN_API std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);

/// Elements of `x` at integer `index` (1-d) along `dim`.
KILN_API Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
/// out[i][j] = x[index[i][j]][j] for dim 0, and so on (torch.gather).
KILN_API Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
/// A copy of `x` with src scattered at `index` along `dim` (torch.scatter, out of place);
/// reduce: "none", "add" or "multiply".
KILN_API Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                        const std::string& reduce = "none");
/// x where !mask, value where mask (mask broadcasts to x).
KILN_API Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value);
/// pads: (before, after) pairs starting from the last dimension, as torch.nn.functional.pad;
/// mode "constant" (negative pads crop), "reflect" (pads below the size), "replicate" or
/// "circular" (x wrapped around, pads at most the size).
KILN_API Tensor pad(const Tensor& x, const std::vector<int64_t>& pads,
                    const std::string& mode = "constant", double value = 0.0);
/// Lower / upper triangle of the last two dims, relative to `diagonal`.
KILN_API Tensor tril(const Tensor& x, int64_t diagonal = 0);
KILN_API Tensor triu(const Tensor& x, int64_t diagonal = 0);

/// NumPy advanced indexing: x[indices[0], indices[1], ...] over the leading dims, with integer
/// (int64/int32) index tensors broadcast together (negative indices count from the end).
KILN_API Tensor index(const Tensor& x, const std::vector<Tensor>& indices);
/// In place: x[indices...] = values (broadcast), the assignment form of index().
KILN_API void index_put_(const Tensor& x, const std::vector<Tensor>& indices,
                         const Tensor& values);

}  // namespace kiln
