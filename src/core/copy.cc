// copy_into: the strided, converting copy behind contiguous(), clone(), casts and assignment.
//
// Note [Transposing copies]
// A copy whose destination runs along one dim and whose source along another (x.t().contiguous(),
// the copy after a permute, an assignment into a transposed view) touches one cache line per
// element on one side when walked in either side's order, and comes back for the line's next
// element only after a whole row: a 1024x1024 float transpose ran at a seventh of PyTorch's speed.
// Such copies go in square tiles of the two dims through a buffer instead: the source's runs in,
// the destination's runs out, each line read or written once.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <optional>
#include <vector>

#include "core/dtype_dispatch.h"
#include "core/strided_loop.h"
#include "core/transposing_copy.h"
#include "kiln/tensor.h"

namespace kiln {
namespace {

template <typename To, typename From>
void copy_run(char* const* ptrs, const int64_t* strides, int64_t n) {
  char* out = ptrs[0];
  const char* in = ptrs[1];
  if (strides[0] == sizeof(To) && strides[1] == sizeof(From)) {
    convert_contiguous(reinterpret_cast<const From*>(in), reinterpret_cast<To*>(out), n);
    return;
  }
  if (strides[0] == sizeof(To) && strides[1] == 0) {  // a broadcast value: expand(...).contiguous()
    From v;
    std::memcpy(&v, in, sizeof(From));
    To* o = reinterpret_cast<To*>(out);
    std::fill(o, o + n, convert<To>(v));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    From v;
    std::memcpy(&v, in + i * strides[1], sizeof(From));
    const To o = convert<To>(v);
    std::memcpy(out + i * strides[0], &o, sizeof(To));
  }
}

// Tiles of kTile x kTile elements. Of 16 to 128, 96 was fastest for float32 from 1000^2 to
// 2048^2 here, and within 1.4x of the fastest for 1-, 2- and 8-byte elements (bench/RESULTS.md,
// "Copies across layouts"); powers of two were slowest, a tile's rows then sharing cache sets.
constexpr int64_t kTile = 96;

// The two merged dims a transposing copy tiles: the destination runs (unit stride) along
// `dst_run`, the source along `src_run`; one of them is the innermost dim 0.
struct TransposedDims {
  size_t dst_run = 0;
  size_t src_run = 0;
};

// The dims to tile when one operand runs along dim 0 and the other along another dim, stepping a
// cache line or more along dim 0 (Note [Transposing copies]); nullopt for any other copy.
std::optional<TransposedDims> transposed_dims(const StridedLoop<2>& loop, int64_t to_size,
                                              int64_t from_size) {
  if (loop.numel() < kTile * kTile) return std::nullopt;
  // k runs along dim 0; the other operand must step >= 64 bytes there and run along dim d.
  const auto other_runs_along = [&](int k, int64_t other_size) -> size_t {
    if (std::abs(loop.strides(0)[1 - k]) < 64) return 0;
    for (size_t d = 1; d < loop.ndim(); ++d) {
      if (loop.strides(d)[1 - k] == other_size) return d;
    }
    return 0;
  };
  if (loop.strides(0)[0] == to_size) {
    if (const size_t d = other_runs_along(0, from_size); d != 0) return TransposedDims{0, d};
  } else if (loop.strides(0)[1] == from_size) {
    if (const size_t d = other_runs_along(1, to_size); d != 0) return TransposedDims{d, 0};
  }
  return std::nullopt;
}

// The copy in tiles of the two run dims, looping over the others.
template <typename To, typename From>
void copy_transposed(const StridedLoop<2>& loop, const TransposedDims& dims) {
  // A tile is `w` destination runs' worth of positions along dst_run by `h` along src_run.
  const int64_t dst_len = loop.size(dims.dst_run);
  const int64_t src_len = loop.size(dims.src_run);
  const int64_t dst_tiles = (dst_len + kTile - 1) / kTile;
  const int64_t src_tiles = (src_len + kTile - 1) / kTile;
  int64_t outer = 1;
  for (size_t d = 0; d < loop.ndim(); ++d) {
    if (d != dims.dst_run && d != dims.src_run) outer *= loop.size(d);
  }
  // Byte steps: the source's along the destination's run dim, the destination's along the
  // source's.
  const int64_t src_step = loop.strides(dims.dst_run)[1];
  const int64_t dst_step = loop.strides(dims.src_run)[0];
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / (kTile * kTile));
  parallel_for(0, outer * src_tiles * dst_tiles, grain, [&](int64_t lo, int64_t hi) {
    To tile[kTile][kTile];  // [position along dst_run][position along src_run]
    for (int64_t item = lo; item < hi; ++item) {
      int64_t rest = item;
      const int64_t i0 = rest % dst_tiles * kTile;  // first position along dst_run
      rest /= dst_tiles;
      const int64_t j0 = rest % src_tiles * kTile;  // first position along src_run
      rest /= src_tiles;
      char* out = loop.base(0);
      const char* in = loop.base(1);
      for (size_t d = 0; d < loop.ndim(); ++d) {
        if (d == dims.dst_run || d == dims.src_run) continue;
        const int64_t index = rest % loop.size(d);
        rest /= loop.size(d);
        out += index * loop.strides(d)[0];
        in += index * loop.strides(d)[1];
      }
      const int64_t w = std::min(dst_len - i0, kTile);
      const int64_t h = std::min(src_len - j0, kTile);
      for (int64_t i = 0; i < w; ++i) {  // source runs in
        const From* x = reinterpret_cast<const From*>(in + (i0 + i) * src_step) + j0;
        for (int64_t j = 0; j < h; ++j) tile[i][j] = convert<To>(x[j]);
      }
      for (int64_t j = 0; j < h; ++j) {  // destination runs out
        To* o = reinterpret_cast<To*>(out + (j0 + j) * dst_step) + i0;
        for (int64_t i = 0; i < w; ++i) o[i] = tile[i][j];
      }
    }
  });
}

// Note [Copies of short runs]
// A same-dtype copy whose innermost dim is contiguous on both sides but short (splitting or
// merging attention heads: runs of 16 to 64 elements, the next dim strided) spent more time in
// the strided loop's bookkeeping and a call per run than in copying: a [32, 64, 64, 16] permute
// took 3.5x PyTorch's time. Such copies walk the next dim in a plain loop of fixed-length
// memcpys, and split the work over blocks of the dims beyond it.
constexpr int64_t kShortRunBytes = 512;

bool has_short_runs(const StridedLoop<2>& loop, int64_t itemsize) {
  return loop.ndim() >= 2 && loop.strides(0)[0] == itemsize && loop.strides(0)[1] == itemsize &&
         loop.size(0) * itemsize <= kShortRunBytes;
}

void copy_short_runs(const StridedLoop<2>& loop, int64_t itemsize) {
  const size_t run_bytes = static_cast<size_t>(loop.size(0) * itemsize);
  const int64_t rows = loop.size(1);
  const int64_t out_step = loop.strides(1)[0], in_step = loop.strides(1)[1];
  const int64_t blocks = loop.numel() / (loop.size(0) * rows);
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / (loop.size(0) * rows));
  parallel_for(0, blocks, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t block = lo; block < hi; ++block) {
      char* out = loop.base(0);
      const char* in = loop.base(1);
      int64_t rest = block;
      for (size_t d = 2; d < loop.ndim(); ++d) {
        const int64_t index = rest % loop.size(d);
        rest /= loop.size(d);
        out += index * loop.strides(d)[0];
        in += index * loop.strides(d)[1];
      }
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(out + r * out_step, in + r * in_step, run_bytes);
    }
  });
}

// The order of dst's dims from the largest stride to the smallest: a walk in that order visits
// dst's memory in order. Empty when that is the order they are in.
std::vector<int64_t> memory_order(const Tensor& dst) {
  std::vector<int64_t> order(static_cast<size_t>(dst.ndim()));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return dst.strides()[a] > dst.strides()[b]; });
  if (std::is_sorted(order.begin(), order.end())) order.clear();
  return order;
}

}  // namespace

bool has_short_runs(const Tensor& dst, const Tensor& src, int64_t max_run) {
  for (int64_t d = 0; d < src.ndim(); ++d) {
    if (src.strides()[d] == 0 && src.size(d) > 1) return false;  // a broadcast: nothing to gain
  }
  const StridedLoop<2> loop(dst.shape(), {&dst, &src});
  return loop.ndim() >= 2 && loop.size(0) <= max_run &&
         has_short_runs(loop, static_cast<int64_t>(src.itemsize()));
}

bool is_transposing_copy(const Tensor& dst, const Tensor& src) {
  if (dst.numel() < kTile * kTile) return false;
  const StridedLoop<2> loop(dst.shape(), {&dst, &src});
  return transposed_dims(loop, static_cast<int64_t>(dst.itemsize()),
                         static_cast<int64_t>(src.itemsize()))
      .has_value();
}

void copy_into(const Tensor& dst, const Tensor& src) {
  const Tensor source = src.shape() == dst.shape() ? src : src.expand(dst.shape());
  if (dst.numel() == 0) return;
  if (dst.is_same(source)) return;
  // One value broadcast (the gradient of a sum scattered into a transposed view): a fill, done in
  // dst's memory order, where the row-major walk of a transposed dst wrote a cache line per
  // element (13x PyTorch's time for sum(x.t()).backward()).
  const auto& src_strides = source.strides();
  if (std::all_of(src_strides.begin(), src_strides.end(), [](int64_t s) { return s == 0; })) {
    if (const std::vector<int64_t> order = memory_order(dst); !order.empty()) {
      return copy_into(dst.permute(order), source.permute(order));
    }
  }
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
  const auto itemsize = static_cast<int64_t>(dst.itemsize());
  if (dst.dtype() == source.dtype() && has_short_runs(loop, itemsize)) {
    return copy_short_runs(loop, itemsize);
  }
  const std::optional<TransposedDims> transposed =
      transposed_dims(loop, itemsize, static_cast<int64_t>(source.itemsize()));
  visit_dtype(dst.dtype(), [&](auto to_tag) {
    using To = typename decltype(to_tag)::type;
    visit_dtype(source.dtype(), [&](auto from_tag) {
      using From = typename decltype(from_tag)::type;
      if (transposed) {
        copy_transposed<To, From>(loop, *transposed);
      } else {
        loop.parallel_run(kElementwiseGrain, copy_run<To, From>);
      }
    });
  });
}

}  // namespace kiln
