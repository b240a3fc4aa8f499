// MaxPool2D and AvgPool2D (kiln::max_pool2d, kiln::avg_pool2d) over NCHW input, with PyTorch's
// window, padding and ceil_mode rules.
//
// Output planes run in parallel. Pooling and its gradients walk each output row one kernel offset
// at a time, with vectorised selects for the maximum and sums for the average (Note [Max pooling
// by runs]). float16/bfloat16 average in float32 and round once.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/dtype_dispatch.h"
#include "core/target_clones.h"
#include "kiln/functional/nn.h"
#include "kiln/op.h"
#include "kiln/parallel.h"
#include "ops/dtype_convert.h"
#include "ops/nn_grad.h"

namespace kiln {
namespace {

struct PoolParams {
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  int64_t dil_h = 1, dil_w = 1;
  bool ceil_mode = false;
};

std::vector<int64_t> pair_attr(const char* op, const Attrs& attrs, const char* name,
                               int64_t min_value) {
  // At most 2^31 - 1, as oneDNN and PyTorch take them: sums of them stay far from overflowing.
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  const std::vector<int64_t> v = attrs.get<std::vector<int64_t>>(name);
  KILN_CHECK_VALUE(v.size() == 2 && v[0] >= min_value && v[1] >= min_value && v[0] <= kMax &&
                   v[1] <= kMax)
      << op << ": expected " << name << " of two integers in [" << min_value << ", 2^31 - 1], got "
      << shape_str(v);
  return v;
}

PoolParams pool_params(const char* op, const Attrs& attrs, bool has_dilation) {
  const std::vector<int64_t> kernel = pair_attr(op, attrs, "kernel_size", 1);
  const std::vector<int64_t> stride = attrs.get<std::vector<int64_t>>("stride").empty()
                                          ? kernel
                                          : pair_attr(op, attrs, "stride", 1);
  const std::vector<int64_t> padding = pair_attr(op, attrs, "padding", 0);
  PoolParams p;
  p.kernel_h = kernel[0];
  p.kernel_w = kernel[1];
  p.stride_h = stride[0];
  p.stride_w = stride[1];
  p.pad_h = padding[0];
  p.pad_w = padding[1];
  p.ceil_mode = attrs.get<bool>("ceil_mode");
  if (has_dilation) {  // max pooling
    const std::vector<int64_t> dilation = pair_attr(op, attrs, "dilation", 1);
    p.dil_h = dilation[0];
    p.dil_w = dilation[1];
    // (Window argmaxes number their candidates in 32 bits; a larger kernel spans > 8 GiB planes.)
    KILN_CHECK_VALUE(p.kernel_h <= std::numeric_limits<int32_t>::max() / p.kernel_w)
        << op << ": expected a kernel of at most 2^31 - 1 elements, got " << p.kernel_h << " x "
        << p.kernel_w;
  }
  KILN_CHECK_VALUE(p.pad_h <= p.kernel_h / 2 && p.pad_w <= p.kernel_w / 2)
      << op << ": expected padding at most half the kernel size, got padding " << shape_str(padding)
      << " for kernel_size " << shape_str(kernel);
  return p;
}

// PyTorch's pooling_output_shape: floor or ceil, but a window never starts in the right padding.
int64_t pool_out_size(const char* op, int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                      int64_t dil, bool ceil_mode, const char* dim) {
  const int64_t span = dil * (kernel - 1) + 1;
  const int64_t room = in + 2 * pad - span;
  // Rounded down (ceil_mode: up), so that with ceil_mode an input shorter than the kernel still
  // gives its one partial window, as in PyTorch.
  const int64_t numerator = room + (ceil_mode ? stride - 1 : 0);
  int64_t out = (numerator >= 0 ? numerator / stride : -((-numerator + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  KILN_CHECK_SHAPE(out >= 1) << op << ": the padded input " << dim << " (" << in + 2 * pad
                             << ") holds no window of the dilated kernel " << dim << " (" << span
                             << "); expected at least "
                             << std::max<int64_t>(1, span - (ceil_mode ? stride - 1 : 0))
                             << (ceil_mode ? " with ceil_mode" : "");
  return out;
}

Shape pool_out_shape(const char* op, const TensorMeta& x, const PoolParams& p) {
  KILN_CHECK_SHAPE(x.ndim() == 4) << op << ": expected x of shape [N, C, H, W], got "
                                  << shape_str(x.shape);
  return {x.shape[0], x.shape[1],
          pool_out_size(op, x.shape[2], p.kernel_h, p.stride_h, p.pad_h, p.dil_h, p.ceil_mode,
                        "height"),
          pool_out_size(op, x.shape[3], p.kernel_w, p.stride_w, p.pad_w, p.dil_w, p.ceil_mode,
                        "width")};
}

// Calls plane(x_plane, y_plane) for every (n, c) plane of contiguous x (of T) and out (of U), in
// parallel.
template <typename T, typename U = T, typename PlaneFn>
void for_each_plane(const Tensor& x, const Tensor& out, PlaneFn&& plane) {
  const int64_t in_plane = x.size(2) * x.size(3), out_plane = out.size(2) * out.size(3);
  const T* px = x.data<T>();
  U* py = out.data<U>();
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, in_plane));
  parallel_for(0, out.size(0) * out.size(1), grain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) plane(px + i * in_plane, py + i * out_plane);
  });
}

// Note [Max pooling by runs]
// For a fixed kernel offset (kh, kw), output row oh reads input row ih = oh * stride_h - pad_h +
// kh * dil_h at columns ow * stride_w + kw * dil_w - pad_w: a strided run of that row, inside the
// input for the ow of one interval [lo, hi). The max-pooling kernels walk an output row run by
// run, updating every window's running maximum (and which candidate it came from) with
// branch-free selects that the compiler vectorises. Each input row is first staged in the compute
// type and split into its stride_w phases (columns j, j + stride_w, ...), so every run reads a
// contiguous stretch: a strided loop ends in a scalar tail (a vector of its loads would read past
// the run), which on short rows costs as much as the vector part. Scanned window by window
// instead, each comparison of random data is a branch mispredicted half the time: ~26 ns per 2x2
// float32 window here. Visiting the runs in (kh, kw) order keeps each window's candidates in scan
// order, so ties pick the first maximum and nans the last (nan wins, as in PyTorch and
// numpy.max).

// Output columns [lo, hi) have their window's column kw inside the input, at input column
// ow * stride_w + offset, which is element ow + staged of the staged row. (staged alone may be
// negative; staged + lo, where the run's first element is, is not.)
struct ColumnRun {
  int64_t offset = 0, staged = 0, lo = 0, hi = 0;
  int64_t size() const { return hi - lo; }
};

// A pool (max or average) of H x W planes into OH x OW: its parameters, the length of a staged
// row's phase, and the column run of each kw.
struct PoolGeometry {
  PoolParams p;
  int64_t H = 0, W = 0, OH = 0, OW = 0, phase = 0;
  std::vector<ColumnRun> runs;
};

PoolGeometry pool_geometry(const PoolParams& p, int64_t H, int64_t W, int64_t OH, int64_t OW) {
  PoolGeometry g{p, H, W, OH, OW, 0, {}};
  // With one output column the column stride reads nothing: 1 stages the row as it is (a stride
  // past the row made a staged row that long, per plane: 12 s and 8 GB at stride 2**31).
  if (OW == 1) g.p.stride_w = 1;
  const int64_t s = g.p.stride_w;
  g.phase = (W + s - 1) / s;
  for (int64_t kw = 0; kw < p.kernel_w; ++kw) {
    const int64_t offset = kw * p.dil_w - p.pad_w;
    const int64_t lo = offset >= 0 ? 0 : (s - 1 - offset) / s;
    const int64_t hi = offset >= W ? 0 : std::min(OW, (W - 1 - offset) / s + 1);
    // Column ow * s + offset is element q = ow + floor(offset / s) of phase offset mod s.
    const int64_t phase = ((offset % s) + s) % s;
    g.runs.push_back({offset, phase * g.phase + (offset - phase) / s, lo, std::max(lo, hi)});
  }
  return g;
}

// Values compare in float for the 16-bit floats; the maximum is one of the inputs, so nothing
// rounds.
template <typename T>
using MaxValue =
    std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

// Input row `row` as V, split into its stride_w phases of g.phase elements in buf (stride_w *
// g.phase of them); the row itself when that is already its layout.
template <typename T, typename V>
[[gnu::always_inline]] inline const V* stage_row(const T* row, const PoolGeometry& g, V* buf) {
  const int64_t s = g.p.stride_w, W = g.W;
  if constexpr (std::is_same_v<T, V>) {
    if (s == 1) return row;
  }
  if (s == 2) {  // the common stride, as pairs: a loop the compiler vectorises without a tail
    const int64_t pairs = W / 2;
#pragma omp simd
    for (int64_t i = 0; i < pairs; ++i) {
      buf[i] = static_cast<V>(row[2 * i]);
      buf[g.phase + i] = static_cast<V>(row[2 * i + 1]);
    }
    if (W % 2 != 0) buf[pairs] = static_cast<V>(row[W - 1]);
  } else {
    for (int64_t j = 0; j < s; ++j) {
      for (int64_t i = 0; i * s + j < W; ++i) buf[j * g.phase + i] = static_cast<V>(row[i * s + j]);
    }
  }
  return buf;
}

// The input row of kernel row kh for output row oh (outside [0, H) in the padding).
inline int64_t input_row(const PoolGeometry& g, int64_t oh, int64_t kh) {
  return oh * g.p.stride_h - g.p.pad_h + kh * g.p.dil_h;
}

// Calls run(staged_row, kh, kw, column_run) for each kernel offset (kh, kw) of output row oh of
// plane xp in scan order, skipping the rows in the padding; buf is stage_row's.
template <typename T, typename V, typename RunFn>
[[gnu::always_inline]] inline void for_each_run(const T* xp, const PoolGeometry& g, int64_t oh,
                                                V* buf, RunFn&& run) {
  for (int64_t kh = 0; kh < g.p.kernel_h; ++kh) {
    const int64_t ih = input_row(g, oh, kh);
    if (ih < 0 || ih >= g.H) continue;
    const V* staged = stage_row(xp + ih * g.W, g, buf);
    for (int64_t kw = 0; kw < g.p.kernel_w; ++kw) run(staged, kh, kw, g.runs[kw]);
  }
}

// Every store below is unconditional (a select of the old and the new value): a conditional
// store compiles to a masked store, which is microcoded and slow on AMD's cores. The loops index
// from the run's first output column, with its length in a local: GCC does not vectorise a loop
// that reads its bound through `r`, which the stores might alias.

// acc[ow] = combine(acc[ow], staged[ow + r.staged]) over the run: a window's running maximum or
// sum takes its candidate at kernel offset (kh, kw).
template <typename V, typename Combine>
[[gnu::always_inline]] inline void update_run(const V* staged, const ColumnRun& r, V* acc,
                                              Combine combine) {
  if (r.size() <= 0) return;
  const V* x = staged + (r.staged + r.lo);
  V* out = acc + r.lo;
  const int64_t n = r.size();
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = combine(out[i], x[i]);
}

// The larger of a running maximum b and a candidate v, nan winning.
template <typename V>
[[gnu::always_inline]] inline V max_with_nan(V b, V v) {
  return ((v > b) | (v != v)) ? v : b;
}

// update_run with max_with_nan, also keeping in k[ow] the number of the candidate best[ow] came
// from (-1 before the window's first): 32-bit, as wide as a float lane, so the loop needs no wider
// vectors.
template <typename V>
[[gnu::always_inline]] inline void argmax_run(const V* staged, int32_t candidate,
                                              const ColumnRun& r, V* best, int32_t* k) {
  if (r.size() <= 0) return;
  const V* x = staged + (r.staged + r.lo);
  V* out = best + r.lo;
  int32_t* from = k + r.lo;
  const int64_t n = r.size();
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const V v = x[i];
    const V b = out[i];
    const int32_t a = from[i];
    const bool wins = (a < 0) | (v > b) | (v != v);
    out[i] = wins ? v : b;
    from[i] = wins ? candidate : a;
  }
}

// The length of stage_row's buffer.
inline size_t staged_row_size(const PoolGeometry& g) {
  return static_cast<size_t>(g.p.stride_w * g.phase);
}

// Max pool of plane xp into yp (see Note [Max pooling by runs]); a window with no element inside
// the input (none can have one, given the padding check) would give the lowest value.
template <typename T>
[[gnu::always_inline]] inline void max_pool_plane(const T* xp, T* yp, const PoolGeometry& g) {
  using V = MaxValue<T>;
  const V lowest = std::numeric_limits<V>::has_infinity ? -std::numeric_limits<V>::infinity()
                                                        : std::numeric_limits<V>::lowest();
  std::vector<V> buf(staged_row_size(g));
  std::vector<V> converted(std::is_same_v<V, T> ? 0 : g.OW);
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    V* best = nullptr;
    if constexpr (std::is_same_v<V, T>) {
      best = yp + oh * g.OW;
    } else {
      best = converted.data();
    }
    std::fill(best, best + g.OW, lowest);
    for_each_run(xp, g, oh, buf.data(), [&](const V* staged, int64_t, int64_t, const ColumnRun& r) {
      update_run(staged, r, best, max_with_nan<V>);
    });
    if constexpr (!std::is_same_v<V, T>) {
      for (int64_t ow = 0; ow < g.OW; ++ow) yp[oh * g.OW + ow] = convert<T>(best[ow]);
    }
  }
}

// The number of the winning candidate (kh * kernel_w + kw) of each window of output row oh of
// plane xp in k, -1 for a window with no element inside the input; best (OW) and buf
// (staged_row_size) are scratch.
template <typename T>
[[gnu::always_inline]] inline void window_argmax_row(const T* xp, const PoolGeometry& g, int64_t oh,
                                                     MaxValue<T>* best, int32_t* k,
                                                     MaxValue<T>* buf) {
  std::fill(k, k + g.OW, -1);
  for_each_run(xp, g, oh, buf,
               [&](const MaxValue<T>* staged, int64_t kh, int64_t kw, const ColumnRun& r) {
                 argmax_run(staged, static_cast<int32_t>(kh * g.p.kernel_w + kw), r, best, k);
               });
}

// float32 compiled for AVX-512 and AVX2 too, picked when the library loads (as softmax's rows:
// docs/architecture.md, "SIMD math"); the other dtypes use the baseline build.
KILN_TARGET_CLONES
void max_pool_plane_f32(const float* xp, float* yp, const PoolGeometry& g) {
  max_pool_plane(xp, yp, g);
}
KILN_TARGET_CLONES
void window_argmax_row_f32(const float* xp, const PoolGeometry& g, int64_t oh, float* best,
                           int32_t* k, float* buf) {
  window_argmax_row(xp, g, oh, best, k, buf);
}

template <typename T>
void max_pool(const Tensor& x, const Tensor& out, const PoolParams& p) {
  const PoolGeometry g = pool_geometry(p, x.size(2), x.size(3), out.size(2), out.size(3));
  for_each_plane<T>(x, out, [&](const T* xp, T* yp) {
    if constexpr (std::is_same_v<T, float>) {
      max_pool_plane_f32(xp, yp, g);
    } else {
      max_pool_plane(xp, yp, g);
    }
  });
}

// Calls fn(oh, k) for each output row oh of plane xp of a max pool of geometry g, with k[ow] the
// number (kh * kernel_w + kw) of window (oh, ow)'s maximum, -1 for a window outside the input.
template <typename C, typename RowFn>
void for_each_window_argmax_row(const C* xp, const PoolGeometry& g, RowFn&& fn) {
  std::vector<C> best(static_cast<size_t>(g.OW)), buf(staged_row_size(g));
  std::vector<int32_t> k(static_cast<size_t>(g.OW));
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    if constexpr (std::is_same_v<C, float>) {
      window_argmax_row_f32(xp, g, oh, best.data(), k.data(), buf.data());
    } else {
      window_argmax_row(xp, g, oh, best.data(), k.data(), buf.data());
    }
    fn(oh, static_cast<const int32_t*>(k.data()));
  }
}

// Calls fn(oh, at) for each output row oh of plane xp of a max pool of geometry g, with at[ow] the
// offset ih * W + iw of window (oh, ow)'s maximum in the plane (-1 for a window outside the input).
template <typename C, typename RowFn>
void for_each_argmax_row(const C* xp, const PoolGeometry& g, RowFn&& fn) {
  std::vector<int64_t> at(static_cast<size_t>(g.OW));
  std::vector<int64_t> candidate_offset(static_cast<size_t>(g.p.kernel_h * g.p.kernel_w));
  for_each_window_argmax_row(xp, g, [&](int64_t oh, const int32_t* k) {
    for (int64_t kh = 0; kh < g.p.kernel_h; ++kh) {
      for (int64_t kw = 0; kw < g.p.kernel_w; ++kw) {
        candidate_offset[kh * g.p.kernel_w + kw] = input_row(g, oh, kh) * g.W + g.runs[kw].offset;
      }
    }
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      at[ow] = k[ow] < 0 ? -1 : candidate_offset[k[ow]] + ow * g.p.stride_w;
    }
    fn(oh, static_cast<const int64_t*>(at.data()));
  });
}

// Average pooling walks the same runs (Note [Max pooling by runs]), adding where max pooling
// compares: window (oh, ow) still sums its elements in (kh, kw) order, as a scan of the window
// would. Its divisor is a product of one factor per dimension (avg_extent).

// The extent of window position o along a dimension of `in` elements: the number of its elements
// inside the input, or inside the padded input for count_include_pad.
int64_t avg_extent(int64_t o, int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                   bool include_pad) {
  const int64_t start = o * stride - pad;
  const int64_t end = std::min(start + kernel, in + pad);
  return include_pad ? end - start : std::min(end, in) - std::max<int64_t>(start, 0);
}

// Each window's divisor, as its row factor times its column factor.
struct AvgDivisors {
  std::vector<int64_t> rows, cols;
  int64_t at(int64_t oh, int64_t ow) const { return rows[oh] * cols[ow]; }
};

// The divisors of AvgPool2D's attributes: divisor_override (when not 0) for every window, else
// each window's extent (in the padded input for count_include_pad).
AvgDivisors avg_divisors(const PoolGeometry& g, const Attrs& attrs) {
  AvgDivisors d;
  if (const int64_t divisor = attrs.get<int64_t>("divisor_override"); divisor != 0) {
    d.rows.assign(static_cast<size_t>(g.OH), divisor);
    d.cols.assign(static_cast<size_t>(g.OW), 1);
    return d;
  }
  const bool include_pad = attrs.get<bool>("count_include_pad");
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    d.rows.push_back(avg_extent(oh, g.H, g.p.kernel_h, g.p.stride_h, g.p.pad_h, include_pad));
  }
  for (int64_t ow = 0; ow < g.OW; ++ow) {
    d.cols.push_back(avg_extent(ow, g.W, g.p.kernel_w, g.p.stride_w, g.p.pad_w, include_pad));
  }
  return d;
}

// Sums are taken in float (double for double).
template <typename T>
using AvgValue = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
[[gnu::always_inline]] inline void avg_pool_plane(const T* xp, T* yp, const PoolGeometry& g,
                                                  const AvgDivisors& d) {
  using V = AvgValue<T>;
  std::vector<V> buf(staged_row_size(g)), sum(static_cast<size_t>(g.OW));
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    std::fill(sum.begin(), sum.end(), V(0));
    for_each_run(xp, g, oh, buf.data(), [&](const V* staged, int64_t, int64_t, const ColumnRun& r) {
      update_run(staged, r, sum.data(), [](V a, V b) { return a + b; });
    });
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      const int64_t count = d.at(oh, ow);
      yp[oh * g.OW + ow] = convert<T>(count != 0 ? sum[ow] / static_cast<V>(count) : V(0));
    }
  }
}

// Adds buf, in stage_row's phases, back into input row `row` (its inverse, adding).
template <typename V>
[[gnu::always_inline]] inline void unstage_add_row(const V* buf, const PoolGeometry& g, V* row) {
  const int64_t s = g.p.stride_w, W = g.W;
  if (s == 2) {
    const int64_t pairs = W / 2;
#pragma omp simd
    for (int64_t i = 0; i < pairs; ++i) {
      row[2 * i] += buf[i];
      row[2 * i + 1] += buf[g.phase + i];
    }
    if (W % 2 != 0) row[W - 1] += buf[pairs];
  } else {
    for (int64_t j = 0; j < s; ++j) {
      for (int64_t i = 0; i * s + j < W; ++i) row[i * s + j] += buf[j * g.phase + i];
    }
  }
}

// AvgPool2DBackward of one plane: each window's gradient share added over its elements, run by
// run, into dp (zeroed). With a stride, the runs add into a phase-split row that is then added
// back, so both loops read and write contiguously.
template <typename C>
[[gnu::always_inline]] inline void avg_pool_backward_plane(const C* gp, C* dp,
                                                           const PoolGeometry& g,
                                                           const AvgDivisors& d) {
  std::vector<C> share(static_cast<size_t>(g.OW)), buf(staged_row_size(g));
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    for (int64_t ow = 0; ow < g.OW; ++ow) {
      const int64_t count = d.at(oh, ow);
      share[ow] = count != 0 ? gp[oh * g.OW + ow] / static_cast<C>(count) : C(0);
    }
    for (int64_t kh = 0; kh < g.p.kernel_h; ++kh) {
      const int64_t ih = input_row(g, oh, kh);
      if (ih < 0 || ih >= g.H) continue;
      C* row = dp + ih * g.W;
      C* target = g.p.stride_w == 1 ? row : buf.data();  // stride 1: the row is its one phase
      if (target != row) std::fill(buf.begin(), buf.end(), C(0));
      for (const ColumnRun& r : g.runs) {  // the transpose of the forward's sums
        if (r.size() <= 0) continue;
        C* t = target + (r.staged + r.lo);
        const C* from = share.data() + r.lo;
        const int64_t n = r.size();
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) t[i] += from[i];
      }
      if (target != row) unstage_add_row(buf.data(), g, row);
    }
  }
}

KILN_TARGET_CLONES
void avg_pool_plane_f32(const float* xp, float* yp, const PoolGeometry& g, const AvgDivisors& d) {
  avg_pool_plane(xp, yp, g, d);
}
KILN_TARGET_CLONES
void avg_pool_backward_plane_f32(const float* gp, float* dp, const PoolGeometry& g,
                                 const AvgDivisors& d) {
  avg_pool_backward_plane(gp, dp, g, d);
}

template <typename T>
void avg_pool(const Tensor& x, const Tensor& out, const PoolParams& p, const Attrs& attrs) {
  const PoolGeometry g = pool_geometry(p, x.size(2), x.size(3), out.size(2), out.size(3));
  const AvgDivisors d = avg_divisors(g, attrs);
  for_each_plane<T>(x, out, [&](const T* xp, T* yp) {
    if constexpr (std::is_same_v<T, float>) {
      avg_pool_plane_f32(xp, yp, g, d);
    } else {
      avg_pool_plane(xp, yp, g, d);
    }
  });
}

// Note [Pooling gradients]
// MaxPool2DBackward adds each output gradient at its window's maximum, found again from x (the
// same scan as the forward, so ties and nans pick the same element); AvgPool2DBackward spreads
// it over the window divided by the forward's divisor. Both run one thread per (n, c) plane, so
// the additions of overlapping windows never race. AvgPool2DBackward is linear and its rule is
// AvgPool2D again. MaxPool2DBackward is linear in the output gradient, and its adjoint is a
// gather: MaxPool2DSelect picks, for each window, the element of a tensor shaped like x at the
// window's maximum (the same scan again). The two are each other's rule, so max pooling
// differentiates to any order; in x both are piecewise constant, so x gets no gradient from them
// (zero almost everywhere, as in PyTorch).

// Note [Max pooling backward by tiles]
// When the windows tile the input (stride == kernel, no padding, no dilation: the default
// max_pool2d(x, k)), each element of x lies in at most one window, so MaxPool2DBackward writes dx
// once, row by row: the window's gradient at its maximum, 0 at its other elements and past the last
// window, with no zero fill first and no scatter of read-modify-writes ([16, 32, 64, 64], 2x2:
// 2.3 -> 1.25-1.3 ms). Other geometries add at the maxima of a zeroed dx (overlapping windows add
// up).

bool windows_tile(const PoolGeometry& g) {
  const PoolParams& p = g.p;
  return p.stride_h == p.kernel_h && p.stride_w == p.kernel_w && p.pad_h == 0 && p.pad_w == 0 &&
         p.dil_h == 1 && p.dil_w == 1 && g.OH * p.kernel_h <= g.H && g.OW * p.kernel_w <= g.W;
}

// One row of window row kh of dx for windows that tile it: each window's gradient at its maximum
// (k[ow], numbered kh * kernel_w + kw), 0 elsewhere. kKW is the kernel width when it is known at
// compile time (the common 2: GCC then vectorises the loop), else 0 and kw_runtime is. The select
// is a mask on the bits: GCC makes a ?: of floats a branch, mispredicted as often as not (where a
// window has its maximum is as good as random), which tripled the time.
template <int64_t kKW, typename C>
[[gnu::always_inline]] inline void tiled_grad_row(const int32_t* k, const C* grad_row, int64_t kh,
                                                  int64_t kw_runtime, int64_t OW, C* row) {
  using Bits = std::conditional_t<sizeof(C) == 4, uint32_t, uint64_t>;
  static_assert(sizeof(Bits) == sizeof(C));
  const int64_t KW = kKW > 0 ? kKW : kw_runtime;
  const int32_t first = static_cast<int32_t>(kh * KW);
  // g + 0: the other paths add g into zeros, which makes a -0 gradient +0.
  const auto bits_of_gradient = [&](int64_t ow) {
    const C v = grad_row[ow] + C(0);
    Bits g;
    std::memcpy(&g, &v, sizeof(g));
    return g;
  };
  if constexpr (kKW == 2 && sizeof(C) == 4 && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__) {
    // Both columns of a window in one 64-bit store, which GCC vectorises (scalar stores it
    // does not).
    for (int64_t ow = 0; ow < OW; ++ow) {
      const Bits g = bits_of_gradient(ow);
      const uint64_t left = g & (Bits{0} - static_cast<Bits>(k[ow] == first));
      const uint64_t right = g & (Bits{0} - static_cast<Bits>(k[ow] == first + 1));
      const uint64_t both = left | (right << 32);  // left at the lower address
      std::memcpy(row + ow * 2, &both, sizeof(both));
    }
  } else {
    for (int64_t ow = 0; ow < OW; ++ow) {
      const Bits g = bits_of_gradient(ow);
      for (int64_t kw = 0; kw < KW; ++kw) {
        const Bits v = g & (Bits{0} - static_cast<Bits>(k[ow] == first + kw));
        std::memcpy(row + ow * KW + kw, &v, sizeof(v));
      }
    }
  }
}

// dx of one plane for windows that tile it (Note [Max pooling backward by tiles]).
template <typename C>
void max_pool_backward_tiled_plane(const C* xp, const C* gp, C* dp, const PoolGeometry& g) {
  const int64_t KH = g.p.kernel_h, KW = g.p.kernel_w, W = g.W, OW = g.OW;
  for_each_window_argmax_row(xp, g, [&](int64_t oh, const int32_t* k) {
    const C* grad_row = gp + oh * OW;
    for (int64_t kh = 0; kh < KH; ++kh) {
      C* row = dp + (oh * KH + kh) * W;
      if (KW == 2) {
        tiled_grad_row<2>(k, grad_row, kh, KW, OW, row);
      } else {
        tiled_grad_row<0>(k, grad_row, kh, KW, OW, row);
      }
      std::fill(row + OW * KW, row + W, C(0));
    }
  });
  std::fill(dp + g.OH * KH * W, dp + g.H * W, C(0));
}

// Runs `plane(grad_plane, dx_plane, n * C + c)` over every plane of contiguous grad [N, C, OH, OW]
// and dx [N, C, H, W] (zeroed first unless `zeroed` is false) in parallel, in the compute dtype C
// of `out`'s, then converts into `out`.
template <typename T, typename PlaneFn>
void for_each_grad_plane(const Tensor& grad_output, const Tensor& out, PlaneFn&& plane,
                         bool zeroed = true) {
  const Tensor grad = contiguous_as(grad_output, dtype_of<T>());
  const Tensor dx = out.dtype() == dtype_of<T>() ? out : Tensor::empty(out.shape(), dtype_of<T>());
  const int64_t in_plane = dx.size(2) * dx.size(3), out_plane = grad.size(2) * grad.size(3);
  const T* pg = grad.data<T>();
  T* pd = dx.data<T>();
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, in_plane));
  parallel_for(0, dx.size(0) * dx.size(1), grain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      if (zeroed) std::fill(pd + i * in_plane, pd + (i + 1) * in_plane, T(0));
      plane(pg + i * out_plane, pd + i * in_plane, i);
    }
  });
  if (!dx.is_same(out)) copy_into(out, dx);
}

// Checks a backward op's output gradient against the forward's output shape for x.
void check_pool_grad(const char* op, const TensorMeta& grad, const TensorMeta& x,
                     const PoolParams& p) {
  const Shape expected = pool_out_shape(op, x, p);
  KILN_CHECK_SHAPE(grad.shape == expected)
      << op << ": expected grad_output of shape " << shape_str(expected) << " for x of shape "
      << shape_str(x.shape) << ", got " << shape_str(grad.shape);
  KILN_CHECK_DTYPE(is_floating_point(grad.dtype) && is_floating_point(x.dtype))
      << op << ": expected floating-point tensors, got " << grad.dtype << " and " << x.dtype;
}

// MaxPool2D's schema, which its backward and select ops share: `inputs`, then the window
// attributes.
OpDef max_pool_op(const char* name, std::initializer_list<const char*> inputs) {
  OpDef def(name);
  for (const char* input : inputs) def.input(input);
  def.attr("kernel_size", AttrKind::kInts)
      .attr("stride", AttrKind::kInts, std::vector<int64_t>{})
      .attr("padding", AttrKind::kInts, std::vector<int64_t>{0, 0})
      .attr("dilation", AttrKind::kInts, std::vector<int64_t>{1, 1})
      .attr("ceil_mode", AttrKind::kBool, false);
  return def;
}

// The rule of MaxPool2DBackward and of MaxPool2DSelect (Note [Pooling gradients]): each is
// linear in its first input, and `adjoint`, the other of the two, is its gradient there, on the
// output gradient and the same x; x gets none.
std::vector<Tensor> max_pool_adjoint_grad(const OpDef& adjoint, const std::vector<Tensor>& in,
                                          const std::vector<Tensor>& out, const Attrs& attrs,
                                          const std::vector<Tensor>& grad_outputs) {
  const Tensor g = grad::or_zeros(grad_outputs[0], out[0]);
  return {grad::as_grad_of(call_op(adjoint, {g, in[1]}, attrs)[0], in[0]), Tensor()};
}

KILN_REGISTER_OP(
    max_pool_op("MaxPool2DBackward", {"grad_output", "x"})
        .doc("The gradient of MaxPool2D's x from its output gradient (see Note [Pooling "
             "gradients])")
        .infer([](const InferContext& ctx) {
          const char* op = "max_pool2d_backward";
          check_pool_grad(op, ctx.input(0), ctx.input(1), pool_params(op, ctx.attrs, true));
          return MetaList{{result_type(ctx.inputs), ctx.input(1).shape}};
        })
        .kernel(DeviceType::kCPU,
                [](KernelContext& ctx) {
                  const Tensor& out = ctx.outputs[0];
                  if (out.numel() == 0) return;
                  const int64_t H = out.size(2), W = out.size(3), OW = ctx.inputs[0].size(3);
                  const PoolGeometry g =
                      pool_geometry(pool_params("max_pool2d_backward", ctx.attrs, true), H, W,
                                    ctx.inputs[0].size(2), OW);
                  visit_compute_float(out.dtype(), [&](auto zero) {
                    using C = decltype(zero);
                    const Tensor x = contiguous_as(ctx.inputs[1], dtype_of<C>());
                    const C* px = x.data<C>();
                    if (windows_tile(g)) {
                      for_each_grad_plane<C>(
                          ctx.inputs[0], out,
                          [&](const C* gp, C* dp, int64_t i) {
                            max_pool_backward_tiled_plane(px + i * H * W, gp, dp, g);
                          },
                          /*zeroed=*/false);
                      return;
                    }
                    for_each_grad_plane<C>(ctx.inputs[0], out, [&](const C* gp, C* dp, int64_t i) {
                      for_each_argmax_row(px + i * H * W, g, [&](int64_t oh, const int64_t* at) {
                        for (int64_t ow = 0; ow < OW; ++ow) {
                          if (at[ow] >= 0) dp[at[ow]] += gp[oh * OW + ow];
                        }
                      });
                    });
                  });
                })
        .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out, const Attrs& attrs,
                 const std::vector<Tensor>& grad_outputs) {
          // Linear in grad_output, whose gradient is the gather at the maxima; x's is zero almost
          // everywhere. (infer admits floating point only.)
          static const OpDefPtr op = OpRegistry::Instance().get("MaxPool2DSelect");
          return max_pool_adjoint_grad(*op, in, out, attrs, grad_outputs);
        }));

KILN_REGISTER_OP(
    max_pool_op("MaxPool2DSelect", {"source", "x"})
        .doc("For each window of MaxPool2D over x, the element of source (x's shape) at the "
             "window's maximum, 0 for a window outside x: the gradient of MaxPool2DBackward's "
             "grad_output (see Note [Pooling gradients])")
        .infer([](const InferContext& ctx) {
          const char* op = "MaxPool2DSelect";
          const TensorMeta& source = ctx.input(0);
          const TensorMeta& x = ctx.input(1);
          KILN_CHECK_SHAPE(source.shape == x.shape)
              << op << ": expected source of x's shape " << shape_str(x.shape) << ", got "
              << shape_str(source.shape);
          KILN_CHECK_DTYPE(is_floating_point(source.dtype) && is_floating_point(x.dtype))
              << op << ": expected floating-point tensors, got " << source.dtype << " and "
              << x.dtype;
          return MetaList{
              {result_type(ctx.inputs), pool_out_shape(op, x, pool_params(op, ctx.attrs, true))}};
        })
        .kernel(DeviceType::kCPU,
                [](KernelContext& ctx) {
                  const Tensor& out = ctx.outputs[0];
                  if (out.numel() == 0) return;
                  const int64_t OW = out.size(3);
                  const PoolGeometry g =
                      pool_geometry(pool_params("MaxPool2DSelect", ctx.attrs, true),
                                    ctx.inputs[1].size(2), ctx.inputs[1].size(3), out.size(2), OW);
                  visit_compute_float(out.dtype(), [&](auto zero) {
                    using C = decltype(zero);
                    const Tensor source = contiguous_as(ctx.inputs[0], dtype_of<C>());
                    const Tensor x = contiguous_as(ctx.inputs[1], dtype_of<C>());
                    const Tensor y = out.dtype() == dtype_of<C>()
                                         ? out
                                         : Tensor::empty(out.shape(), dtype_of<C>());
                    const C* px = x.data<C>();
                    const C* ps = source.data<C>();
                    for_each_plane<C>(x, y, [&](const C* xp, C* yp) {
                      const C* sp = ps + (xp - px);
                      for_each_argmax_row(xp, g, [&](int64_t oh, const int64_t* at) {
                        for (int64_t ow = 0; ow < OW; ++ow) {
                          yp[oh * OW + ow] = at[ow] < 0 ? C(0) : sp[at[ow]];
                        }
                      });
                    });
                    if (!y.is_same(out)) copy_into(out, y);
                  });
                })
        .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out, const Attrs& attrs,
                 const std::vector<Tensor>& grad_outputs) {
          // Linear in source, the adjoint of MaxPool2DBackward's grad_output (and back).
          static const OpDefPtr op = OpRegistry::Instance().get("MaxPool2DBackward");
          return max_pool_adjoint_grad(*op, in, out, attrs, grad_outputs);
        }));

KILN_REGISTER_OP(
    OpDef("AvgPool2DBackward")
        .input("grad_output")
        .attr("input_size", AttrKind::kInts)
        .attr("kernel_size", AttrKind::kInts)
        .attr("stride", AttrKind::kInts, std::vector<int64_t>{})
        .attr("padding", AttrKind::kInts, std::vector<int64_t>{0, 0})
        .attr("ceil_mode", AttrKind::kBool, false)
        .attr("count_include_pad", AttrKind::kBool, true)
        .attr("divisor_override", AttrKind::kInt, int64_t{0})
        .doc("The gradient of AvgPool2D's x (of shape input_size) from its output gradient (see "
             "Note [Pooling gradients])")
        .infer([](const InferContext& ctx) {
          const char* op = "avg_pool2d_backward";
          const std::vector<int64_t> size = ctx.attrs.get<std::vector<int64_t>>("input_size");
          KILN_CHECK_SHAPE(size.size() == 4 && std::all_of(size.begin(), size.end(),
                                                           [](int64_t d) { return d >= 0; }))
              << op << ": expected input_size of four non-negative sizes, got " << shape_str(size);
          const TensorMeta x(ctx.input(0).dtype, Shape(size.begin(), size.end()));
          check_pool_grad(op, ctx.input(0), x, pool_params(op, ctx.attrs, false));
          return MetaList{x};
        })
        .kernel(DeviceType::kCPU,
                [](KernelContext& ctx) {
                  const Tensor& out = ctx.outputs[0];
                  if (out.numel() == 0) return;
                  const PoolGeometry g = pool_geometry(
                      pool_params("avg_pool2d_backward", ctx.attrs, false), out.size(2),
                      out.size(3), ctx.inputs[0].size(2), ctx.inputs[0].size(3));
                  const AvgDivisors d = avg_divisors(g, ctx.attrs);
                  visit_compute_float(out.dtype(), [&](auto zero) {
                    using C = decltype(zero);
                    for_each_grad_plane<C>(ctx.inputs[0], out, [&](const C* gp, C* dp, int64_t) {
                      if constexpr (std::is_same_v<C, float>) {
                        avg_pool_backward_plane_f32(gp, dp, g, d);
                      } else {
                        avg_pool_backward_plane(gp, dp, g, d);
                      }
                    });
                  });
                })
        .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out, const Attrs& attrs,
                 const std::vector<Tensor>& grad_outputs) {
          // Linear in the output gradient: its own gradient is the forward pool.
          Attrs pool_attrs;
          for (const auto& [name, value] : attrs.items()) {
            if (name != "input_size") pool_attrs.set(name, value);
          }
          static const OpDefPtr op = OpRegistry::Instance().get("AvgPool2D");
          const Tensor g = grad::or_zeros(grad_outputs[0], out[0]);
          return std::vector<Tensor>{grad::as_grad_of(call_op(*op, {g}, pool_attrs)[0], in[0])};
        }));

KILN_REGISTER_OP(max_pool_op("MaxPool2D", {"x"})
                     .doc("Maximum over kernel_size windows of NCHW x (stride [] = kernel_size)")
                     .infer([](const InferContext& ctx) {
                       const TensorMeta& x = ctx.input(0);
                       KILN_CHECK_DTYPE(x.dtype != DType::kBool)
                           << "max_pool2d: expected a numeric x, got bool";
                       return MetaList{
                           {x.dtype, pool_out_shape("max_pool2d", x,
                                                    pool_params("max_pool2d", ctx.attrs, true))}};
                     })
                     .kernel(DeviceType::kCPU,
                             [](KernelContext& ctx) {
                               const Tensor& out = ctx.outputs[0];
                               if (out.numel() == 0) return;
                               const PoolParams p = pool_params("max_pool2d", ctx.attrs, true);
                               const Tensor x = ctx.inputs[0].contiguous();
                               visit_dtype(out.dtype(), [&](auto tag) {
                                 using T = typename decltype(tag)::type;
                                 if constexpr (!std::is_same_v<T, bool>) max_pool<T>(x, out, p);
                               });
                             })
                     .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                              const Attrs& attrs, const std::vector<Tensor>& grad_outputs) {
                       if (!grad::differentiable(in[0])) return std::vector<Tensor>{Tensor()};
                       static const OpDefPtr op = OpRegistry::Instance().get("MaxPool2DBackward");
                       const Tensor g = grad::or_zeros(grad_outputs[0], out[0]);
                       return std::vector<Tensor>{
                           grad::as_grad_of(call_op(*op, {g, in[0]}, attrs)[0], in[0])};
                     }));

KILN_REGISTER_OP(
    max_pool_op("MaxPool2DIndices", {"x"})
        .traits(kTraitNotDifferentiable)
        .doc("For each window of MaxPool2D over x, the offset ih * W + iw of its maximum in its "
             "[H, W] plane (int64; -1 for a window outside x), as PyTorch's "
             "max_pool2d(return_indices=True)")
        .infer([](const InferContext& ctx) {
          const char* op = "max_pool2d";
          const TensorMeta& x = ctx.input(0);
          KILN_CHECK_DTYPE(x.dtype != DType::kBool) << op << ": expected a numeric x, got bool";
          return MetaList{{DType::kInt64, pool_out_shape(op, x, pool_params(op, ctx.attrs, true))}};
        })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          if (out.numel() == 0) return;
          const int64_t OW = out.size(3);
          const PoolGeometry g =
              pool_geometry(pool_params("max_pool2d", ctx.attrs, true), ctx.inputs[0].size(2),
                            ctx.inputs[0].size(3), out.size(2), OW);
          visit_dtype(ctx.inputs[0].dtype(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            if constexpr (!std::is_same_v<T, bool>) {
              // The same scan as MaxPool2D's, so ties and nans pick the element it returns.
              using C = MaxValue<T>;
              const Tensor x = contiguous_as(ctx.inputs[0], dtype_of<C>());
              for_each_plane<C, int64_t>(x, out, [&](const C* xp, int64_t* yp) {
                for_each_argmax_row(xp, g, [&](int64_t oh, const int64_t* at) {
                  std::copy(at, at + OW, yp + oh * OW);
                });
              });
            }
          });
        }));

KILN_REGISTER_OP(OpDef("AvgPool2D")
                     .input("x")
                     .attr("kernel_size", AttrKind::kInts)
                     .attr("stride", AttrKind::kInts, std::vector<int64_t>{})
                     .attr("padding", AttrKind::kInts, std::vector<int64_t>{0, 0})
                     .attr("ceil_mode", AttrKind::kBool, false)
                     .attr("count_include_pad", AttrKind::kBool, true)
                     .attr("divisor_override", AttrKind::kInt, int64_t{0})
                     .doc("Mean over kernel_size windows of NCHW x (stride [] = kernel_size); "
                          "divisor_override, when not 0, divides every window's sum")
                     .infer([](const InferContext& ctx) {
                       const TensorMeta& x = ctx.input(0);
                       KILN_CHECK_DTYPE(is_floating_point(x.dtype))
                           << "avg_pool2d: expected a floating-point x, got " << x.dtype;
                       return MetaList{
                           {x.dtype, pool_out_shape("avg_pool2d", x,
                                                    pool_params("avg_pool2d", ctx.attrs, false))}};
                     })
                     .kernel(DeviceType::kCPU,
                             [](KernelContext& ctx) {
                               const Tensor& out = ctx.outputs[0];
                               if (out.numel() == 0) return;
                               const PoolParams p = pool_params("avg_pool2d", ctx.attrs, false);
                               const Tensor x = ctx.inputs[0].contiguous();
                               visit_dtype(out.dtype(), [&](auto tag) {
                                 using T = typename decltype(tag)::type;
                                 if constexpr (!std::is_integral_v<T>)
                                   avg_pool<T>(x, out, p, ctx.attrs);
                               });
                             })
                     .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                              const Attrs& attrs, const std::vector<Tensor>& grad_outputs) {
                       static const OpDefPtr op = OpRegistry::Instance().get("AvgPool2DBackward");
                       const Shape& x = in[0].shape();
                       Attrs backward_attrs = attrs;
                       backward_attrs.set("input_size", std::vector<int64_t>(x.begin(), x.end()));
                       const Tensor g = grad::or_zeros(grad_outputs[0], out[0]);
                       return std::vector<Tensor>{grad::as_grad_of(
                           call_op(*op, {g}, backward_attrs)[0], in[0])};
                     }));

}  // namespace

Tensor max_pool2d(const Tensor& x, const std::vector<int64_t>& kernel_size,
                  const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                  const std::vector<int64_t>& dilation, bool ceil_mode) {
  static const OpDefPtr op = OpRegistry::Instance().get("MaxPool2D");
  return call_op(*op, {x},
                 {{"kernel_size", kernel_size},
                  {"stride", stride},
                  {"padding", padding},
                  {"dilation", dilation},
                  {"ceil_mode", ceil_mode}})[0];
}

std::pair<Tensor, Tensor> max_pool2d_with_indices(
    const Tensor& x, const std::vector<int64_t>& kernel_size, const std::vector<int64_t>& stride,
    const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation, bool ceil_mode) {
  static const OpDefPtr op = OpRegistry::Instance().get("MaxPool2DIndices");
  Tensor indices = call_op(*op, {x},
                           {{"kernel_size", kernel_size},
                            {"stride", stride},
                            {"padding", padding},
                            {"dilation", dilation},
                            {"ceil_mode", ceil_mode}})[0];
  return {max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode), std::move(indices)};
}

Tensor avg_pool2d(const Tensor& x, const std::vector<int64_t>& kernel_size,
                  const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                  bool ceil_mode, bool count_include_pad) {
  return avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                    /*divisor_override=*/0);
}

Tensor avg_pool2d(const Tensor& x, const std::vector<int64_t>& kernel_size,
                  const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                  bool ceil_mode, bool count_include_pad, int64_t divisor_override) {
  static const OpDefPtr op = OpRegistry::Instance().get("AvgPool2D");
  return call_op(*op, {x},
                 {{"kernel_size", kernel_size},
                  {"stride", stride},
                  {"padding", padding},
                  {"ceil_mode", ceil_mode},
                  {"count_include_pad", count_include_pad},
                  {"divisor_override", divisor_override}})[0];
}

Tensor max_pool2d_backward(const Tensor& grad_output, const Tensor& x,
                           const std::vector<int64_t>& kernel_size,
                           const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                           const std::vector<int64_t>& dilation, bool ceil_mode) {
  static const OpDefPtr op = OpRegistry::Instance().get("MaxPool2DBackward");
  return call_op(*op, {grad_output, x},
                 {{"kernel_size", kernel_size},
                  {"stride", stride},
                  {"padding", padding},
                  {"dilation", dilation},
                  {"ceil_mode", ceil_mode}})[0];
}

Tensor avg_pool2d_backward(const Tensor& grad_output, const Shape& input_size,
                           const std::vector<int64_t>& kernel_size,
                           const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                           bool ceil_mode, bool count_include_pad) {
  return avg_pool2d_backward(grad_output, input_size, kernel_size, stride, padding, ceil_mode,
                             count_include_pad, /*divisor_override=*/0);
}

Tensor avg_pool2d_backward(const Tensor& grad_output, const Shape& input_size,
                           const std::vector<int64_t>& kernel_size,
                           const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                           bool ceil_mode, bool count_include_pad, int64_t divisor_override) {
  static const OpDefPtr op = OpRegistry::Instance().get("AvgPool2DBackward");
  return call_op(*op, {grad_output},
                 {{"input_size", std::vector<int64_t>(input_size.begin(), input_size.end())},
                  {"kernel_size", kernel_size},
                  {"stride", stride},
                  {"padding", padding},
                  {"ceil_mode", ceil_mode},
                  {"count_include_pad", count_include_pad},
                  {"divisor_override", divisor_override}})[0];
}

}  // namespace kiln
