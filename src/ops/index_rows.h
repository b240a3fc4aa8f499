// Private to src/ops: how the indexing ops (index.cc: IndexSelect, Gather, Scatter, MaskedFill;
// index_advanced.cc: Index, IndexPut) check index tensors and address and copy rows.
//
// Index tensors are int64 or int32; negative values count from the end of their dimension, as in
// NumPy. load_index checks every value before a kernel writes anything; wrap_index then turns a
// checked value into a position.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kiln/op.h"

namespace kiln::indexing {

/// Throws kDType (naming `op`) unless `index` is int64 or int32.
void check_index_dtype(const char* op, const TensorMeta& index);

/// `index` (int32/int64, any layout) broadcast to `shape` as a contiguous int64 tensor (index
/// itself when it already is one: no copy), after checking every value against [-size, size)
/// (kIndex, naming op, dim and size). Readers wrap negative values with wrap_index.
Tensor load_index(const char* op, const Tensor& index, const Shape& shape, int64_t dim,
                  int64_t size);

/// A checked index value in [-size, size) as a position in [0, size).
inline int64_t wrap_index(int64_t v, int64_t size) { return v < 0 ? v + size : v; }

/// Element offsets, in row-major order, of the sub-tensor with dims [begin, end) of `shape` laid
/// out with `strides`.
std::vector<int64_t> element_offsets(const Shape& shape, const Shape& strides, int64_t begin,
                                     int64_t end);

/// True when `from` broadcasts to exactly `to` (NumPy rules, `to` unchanged).
bool broadcasts_to(const Shape& from, const Shape& to);

/// Calls f(std::integral_constant<size_t, N>) for an element size N, so element moves are
/// fixed-size memcpys (one load and store, no aliasing questions).
template <typename F>
void visit_itemsize(size_t size, F&& f) {
  switch (size) {
    case 1:
      return f(std::integral_constant<size_t, 1>{});
    case 2:
      return f(std::integral_constant<size_t, 2>{});
    case 4:
      return f(std::integral_constant<size_t, 4>{});
    case 8:
      return f(std::integral_constant<size_t, 8>{});
  }
  KILN_ASSERT(false) << "unexpected element size " << size;
}

/// The trailing dims [first, ndim) of a tensor that every gathered row copies.
struct RowLayout {
  int64_t numel = 1;
  bool dense = true;
  std::vector<int64_t> offsets;  // element offsets within a row when not dense
};

/// The rows of `src` made of its dims [first, ndim).
RowLayout row_layout(const Tensor& src, int64_t first);

/// Copies one row laid out as `layout` at `from` to the contiguous `to` (kSize-byte elements).
template <size_t kSize>
inline void copy_row(char* to, const char* from, const RowLayout& layout) {
  if (layout.numel == 1) {
    std::memcpy(to, from, kSize);
  } else if (layout.dense) {
    std::memcpy(to, from, static_cast<size_t>(layout.numel) * kSize);
  } else {
    for (int64_t i = 0; i < layout.numel; ++i) {
      std::memcpy(to + i * static_cast<int64_t>(kSize),
                  from + layout.offsets[i] * static_cast<int64_t>(kSize), kSize);
    }
  }
}

/// Rows per parallel chunk when each row holds `row_elements` elements of `item` bytes.
int64_t row_grain(int64_t row_elements, size_t item);

/// out row r (contiguous, layout.numel elements) = the row of `src` starting at element
/// row_offsets[r], in parallel.
void gather_rows(const Tensor& out, const Tensor& src, const std::vector<int64_t>& row_offsets,
                 const RowLayout& layout);

}  // namespace kiln::indexing
