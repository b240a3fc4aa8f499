// copy_into: the strided, converting copy behind contiguous(), clone(), casts and assignment.
//
// Note [Transposing copies]
// A copy whose destination runs along one dim and whose source along another (x.t().contiguous(),
// the copy after a permute) reads one source element per cache line when walked in the
// destination's order, and comes back for the line's next element only after a whole row: a
// 1024x1024 float transpose ran at a fifth of PyTorch's speed. Such copies go in square tiles of
// the two dims instead, whose source lines stay in L1 between the tile's rows.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/dtype_dispatch.h"
#include "core/strided_loop.h"
#include "kiln/tensor.h"

namespace kiln {
namespace {

template <typename To, typename From>
void copy_run(char* const* ptrs, const int64_t* strides, int64_t n) {
  char* out = ptrs[0];
  const char* in = ptrs[1];
  if (strides[0] == sizeof(To) && strides[1] == sizeof(From)) {
    To* o = reinterpret_cast<To*>(out);
    const From* x = reinterpret_cast<const From*>(in);
    for (int64_t i = 0; i < n; ++i) o[i] = convert<To>(x[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    From v;
    std::memcpy(&v, in + i * strides[1], sizeof(From));
    const To o = convert<To>(v);
    std::memcpy(out + i * strides[0], &o, sizeof(To));
  }
}

// Tiles of kTile x kTile elements. Of 16 to 128, 96 was fastest on 1000^2 to 2048^2 transposes of
// 1- to 8-byte elements here (bench/RESULTS.md, "Transposing copies"); powers of two were slowest,
// a tile's rows then sharing cache sets.
constexpr int64_t kTile = 96;

// The merged dim along which the source runs (unit stride), when the destination runs along dim 0
// and the source's dim-0 steps skip a cache line or more (Note [Transposing copies]); 0 if none.
size_t transposed_dim(const StridedLoop<2>& loop, int64_t to_size, int64_t from_size) {
  if (loop.numel() < kTile * kTile || loop.strides(0)[0] != to_size ||
      std::abs(loop.strides(0)[1]) < 64) {
    return 0;
  }
  for (size_t d = 1; d < loop.ndim(); ++d) {
    if (loop.strides(d)[1] == from_size) return d;
  }
  return 0;
}

// The copy in tiles of dim 0 (the destination's) and dim t (the source's), looping over the others.
template <typename To, typename From>
void copy_transposed(const StridedLoop<2>& loop, size_t t) {
  const int64_t cols = loop.size(0);
  const int64_t rows = loop.size(t);
  const int64_t col_tiles = (cols + kTile - 1) / kTile;
  const int64_t row_tiles = (rows + kTile - 1) / kTile;
  int64_t outer = 1;
  for (size_t d = 1; d < loop.ndim(); ++d) {
    if (d != t) outer *= loop.size(d);
  }
  const int64_t from_col_stride = loop.strides(0)[1];
  const int64_t to_row_stride = loop.strides(t)[0];
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / (kTile * kTile));
  parallel_for(0, outer * row_tiles * col_tiles, grain, [&](int64_t lo, int64_t hi) {
    To tile[kTile][kTile];  // [column][row]
    for (int64_t item = lo; item < hi; ++item) {
      int64_t rest = item;
      const int64_t c0 = rest % col_tiles * kTile;
      rest /= col_tiles;
      const int64_t r0 = rest % row_tiles * kTile;
      rest /= row_tiles;
      char* out = loop.base(0);
      const char* in = loop.base(1);
      for (size_t d = 1; d < loop.ndim(); ++d) {
        if (d == t) continue;
        const int64_t i = rest % loop.size(d);
        rest /= loop.size(d);
        out += i * loop.strides(d)[0];
        in += i * loop.strides(d)[1];
      }
      const int64_t h = std::min(rows - r0, kTile);
      const int64_t w = std::min(cols - c0, kTile);
      // Through a buffer: the source's runs along rows in, the destination's along columns out,
      // both sequential (walking either side across the other's runs, a power-of-two row
      // pitch maps every line of a tile to one L1 set).
      for (int64_t c = 0; c < w; ++c) {
        const From* x = reinterpret_cast<const From*>(in + (c0 + c) * from_col_stride) + r0;
        for (int64_t r = 0; r < h; ++r) tile[c][r] = convert<To>(x[r]);
      }
      for (int64_t r = 0; r < h; ++r) {
        To* o = reinterpret_cast<To*>(out + (r0 + r) * to_row_stride) + c0;
        for (int64_t c = 0; c < w; ++c) o[c] = tile[c][r];
      }
    }
  });
}

}  // namespace

void copy_into(const Tensor& dst, const Tensor& src) {
  const Tensor source = src.shape() == dst.shape() ? src : src.expand(dst.shape());
  if (dst.numel() == 0) return;
  if (dst.is_same(source)) return;
  dst.storage()->note_write();
  if (dst.dtype() == source.dtype() && dst.is_contiguous() && source.is_contiguous()) {
    char* out = static_cast<char*>(dst.data_ptr());
    const char* in = static_cast<const char*>(source.data_ptr());
    if (out == in) return;
    const int64_t bytes = static_cast<int64_t>(dst.nbytes());
    parallel_for(0, bytes, int64_t{1} << 20, [&](int64_t lo, int64_t hi) {
      std::memcpy(out + lo, in + lo, static_cast<size_t>(hi - lo));
    });
    return;
  }
  StridedLoop<2> loop(dst.shape(), {&dst, &source});
  const size_t t = transposed_dim(loop, static_cast<int64_t>(dst.itemsize()),
                                  static_cast<int64_t>(source.itemsize()));
  visit_dtype(dst.dtype(), [&](auto to_tag) {
    using To = typename decltype(to_tag)::type;
    visit_dtype(source.dtype(), [&](auto from_tag) {
      using From = typename decltype(from_tag)::type;
      if (t != 0) {
        copy_transposed<To, From>(loop, t);
      } else {
        loop.parallel_run(kElementwiseGrain, copy_run<To, From>);
      }
    });
  });
}

}  // namespace kiln
