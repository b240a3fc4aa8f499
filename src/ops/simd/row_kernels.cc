// Row kernels for softmax, log_softmax, layer_norm and rms_norm (see float_kernels.h).
//
// Every row statistic (max, sum of exponentials, mean, variance, mean square) goes through
// reduce_max or blocked_sum (Note [blocked summation] in reduce_kernels.cc), so a row of 16M
// elements is as accurate as a row of 16. Accuracy against a long double reference (see
// tests/cpp/ops/simd_float_kernels_test.cc): softmax <= 2e-6 relative (float32) / 1e-13 (float64)
// plus eps * |x - max|, the rounding of x - max in T that exp amplifies; log_softmax, layer_norm
// and rms_norm <= 2e-6 / 1e-13 of max(|y|, 1).
#include "ops/simd/highway_targets.h"  // First: selects the compiled targets.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/simd/row_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must follow foreach_target.h.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "hwy/highway.h"
#include "ops/simd/float_kernels.h"
#include "ops/simd/simd_loops-inl.h"
#include "ops/simd/vec_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// Rows up to this long keep their exponentials in a per-thread scratch row when softmax streams
/// its output (256 KiB of float32: within L2).
constexpr size_t kSoftmaxScratch = size_t{1} << 16;

template <typename T>
HWY_INLINE void softmax_impl(const T* x, T* y, size_t n, Store store) {
  const hn::ScalableTag<T> d;
  using V = hn::Vec<decltype(d)>;
  const V max = hn::Set(d, reduce_max(x, static_cast<int64_t>(n)));
  // Streaming writes y once, from exponentials kept in a scratch row that stays in cache;
  // otherwise they go to y and are scaled there (Note [streaming stores]).
  T* e = y;
  if (store == Store::kStream && n <= kSoftmaxScratch) {
    thread_local std::vector<T> scratch;
    if (scratch.size() < n) scratch.resize(n);
    e = scratch.data();
  } else {
    store = Store::kCached;
  }
  // One pass computes and stores exp(x - max) and sums it; padding with -inf adds exp(-inf) = 0.
  const double sum = blocked_sum(
      d, x, n, -std::numeric_limits<T>::infinity(),
      [max](auto dv, V v) { return exp_full(dv, hn::Sub(v, max)); }, e);
  const V scale = hn::Set(d, static_cast<T>(1.0 / sum));
  map_unary(
      d, e, y, n, [scale](auto, V v) { return hn::Mul(v, scale); }, T(0), store);
}

template <typename T>
HWY_INLINE void log_softmax_impl(const T* x, T* y, size_t n, Store store) {
  const hn::ScalableTag<T> d;
  using V = hn::Vec<decltype(d)>;
  const V max = hn::Set(d, reduce_max(x, static_cast<int64_t>(n)));
  const double sum = blocked_sum(d, x, n, -std::numeric_limits<T>::infinity(),
                                 [max](auto dv, V v) { return exp_full(dv, hn::Sub(v, max)); });
  const V log_sum = hn::Set(d, static_cast<T>(std::log(sum)));
  // (x - max) first: it is exact for the largest elements, which dominate the result.
  map_unary(
      d, x, y, n, [max, log_sum](auto, V v) { return hn::Sub(hn::Sub(v, max), log_sum); }, T(0),
      store);
}

/// y = (x - shift) * scale [* gamma] [+ beta] for i in [begin, end), gamma / beta nullable; x and
/// y (stored as `Codec` says) may alias. `stream`: every vector is whole and aligned, and is
/// written with a streaming store (runs of T only).
template <typename T, class Codec = AsIs<hn::ScalableTag<T>>, typename S = typename Codec::Stored>
HWY_INLINE void normalize_run(const S* x, const T* gamma, const T* beta, T shift, T scale, S* y,
                              size_t begin, size_t end, bool stream) {
  const hn::ScalableTag<T> d;
  const size_t lanes = hn::Lanes(d);
  const auto vshift = hn::Set(d, shift);
  const auto vscale = hn::Set(d, scale);
  HWY_ALIGN S buf_x[kMaxLanes<T>];
  HWY_ALIGN T buf_g[kMaxLanes<T>];
  HWY_ALIGN T buf_b[kMaxLanes<T>];
  for (size_t i = begin; i < end; i += lanes) {
    const size_t count = end - i < lanes ? end - i : lanes;
    const bool tail = count < lanes;
    const S* px = x + i;
    const T* pg = gamma != nullptr ? gamma + i : nullptr;
    const T* pb = beta != nullptr ? beta + i : nullptr;
    S* py = y + i;
    if (HWY_UNLIKELY(tail)) {
      for (size_t j = 0; j < lanes; ++j) {
        buf_x[j] = j < count ? x[i + j] : Codec::from(T(0));
        buf_g[j] = j < count && gamma != nullptr ? gamma[i + j] : T(1);
        buf_b[j] = j < count && beta != nullptr ? beta[i + j] : T(0);
      }
      px = buf_x;
      pg = gamma != nullptr ? buf_g : nullptr;
      pb = beta != nullptr ? buf_b : nullptr;
      py = buf_x;
    }
    // The null checks are loop-invariant branches: perfectly predicted, and they keep a single
    // instantiation for all four gamma / beta combinations.
    auto r = hn::Mul(hn::Sub(Codec::load(d, px), vshift), vscale);
    if (pg != nullptr && pb != nullptr) {
      r = hn::MulAdd(r, hn::LoadU(d, pg), hn::LoadU(d, pb));
    } else if (pg != nullptr) {
      r = hn::Mul(r, hn::LoadU(d, pg));
    } else if (pb != nullptr) {
      r = hn::Add(r, hn::LoadU(d, pb));
    }
    if constexpr (std::is_same_v<S, T>) {
      if (stream) {
        hn::Stream(r, d, py);
      } else {
        hn::StoreU(r, d, py);
      }
    } else {
      Codec::store(d, r, py);
    }
    if (HWY_UNLIKELY(tail)) std::memcpy(y + i, buf_x, count * sizeof(S));
  }
}

/// normalize_run over [0, n), writing y per `store` (Note [streaming stores]; runs of T only).
template <typename T, class Codec, typename S = typename Codec::Stored>
HWY_INLINE void normalize(const S* x, const T* gamma, const T* beta, T shift, T scale, S* y,
                          size_t n, Store store) {
  const StreamSpan span =
      std::is_same_v<S, T> ? stream_span(hn::ScalableTag<T>(), y, n, store) : StreamSpan{};
  if (span.begin == span.end) {
    return normalize_run<T, Codec>(x, gamma, beta, shift, scale, y, 0, n, false);
  }
  normalize_run<T, Codec>(x, gamma, beta, shift, scale, y, 0, span.begin, false);
  normalize_run<T, Codec>(x, gamma, beta, shift, scale, y, span.begin, span.end, true);
  normalize_run<T, Codec>(x, gamma, beta, shift, scale, y, span.end, n, false);
  hwy::FlushStream();
}

/// The mean square of x - center in double, scaled by the largest |x - center|: for rows whose
/// squares overflow the vector type (deviations past about 1.8e19 in float32), where the SIMD sum
/// gives inf and the row would come out 0 instead of normalised. Two scalar passes, only then.
template <typename S>
double scaled_mean_square(const S* x, size_t n, double center) {
  double largest = 0;
  for (size_t i = 0; i < n; ++i) {
    largest = std::max(largest, std::abs(static_cast<double>(x[i]) - center));
  }
  if (!(largest > 0) || std::isinf(largest)) return largest * largest;  // 0, inf or NaN as is
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    const double r = (static_cast<double>(x[i]) - center) / largest;
    sum += r * r;
  }
  return sum / static_cast<double>(n) * largest * largest;
}

/// The mean of x in double, as a sum of x / n: for rows whose sum overflows the vector type
/// (float32 rows summing past 3.4e38), where the SIMD sum gives inf, or NaN from inf - inf, and the
/// row would come out NaN. One scalar pass, only then.
template <typename S>
double scaled_mean(const S* x, size_t n) {
  const auto dn = static_cast<double>(n);
  double mean = 0;
  for (size_t i = 0; i < n; ++i) mean += static_cast<double>(x[i]) / dn;
  return mean;
}

/// layer_norm_row on x and y stored as CodecOf says (AsIs: T itself; the 16-bit codecs for T =
/// float); gamma, beta and the statistics are T.
template <typename T, template <class> class CodecOf = AsIs, typename S>
HWY_INLINE void layer_norm_impl(const S* x, const T* gamma, const T* beta, T eps, S* y, size_t n,
                                T* mean_out, T* rstd_out, Store store) {
  const hn::ScalableTag<T> d;
  using V = hn::Vec<decltype(d)>;
  using Codec = CodecOf<decltype(d)>;
  const auto dn = static_cast<double>(n);
  // Two passes (mean, then squared deviations): no cancellation, unlike E[x^2] - E[x]^2.
  double row_mean =
      blocked_sum(d, Codec{}, x, n, Codec::from(T(0)), [](auto, V v) { return v; }) / dn;
  if (HWY_UNLIKELY(!std::isfinite(row_mean))) row_mean = scaled_mean(x, n);
  const T mean = static_cast<T>(row_mean);
  const V vmean = hn::Set(d, mean);
  double var = blocked_sum(d, Codec{}, x, n, Codec::from(mean),
                           [vmean](auto, V v) {
                             const V dev = hn::Sub(v, vmean);
                             return hn::Mul(dev, dev);
                           }) /
               dn;
  if (HWY_UNLIKELY(std::isinf(var))) var = scaled_mean_square(x, n, static_cast<double>(mean));
  const T rstd = static_cast<T>(1.0 / std::sqrt(var + static_cast<double>(eps)));
  if (mean_out != nullptr) *mean_out = mean;
  if (rstd_out != nullptr) *rstd_out = rstd;
  normalize<T, Codec>(x, gamma, beta, mean, rstd, y, n, store);
}

/// rms_norm_row on x and y stored as CodecOf says (see layer_norm_impl).
template <typename T, template <class> class CodecOf = AsIs, typename S>
HWY_INLINE void rms_norm_impl(const S* x, const T* gamma, T eps, S* y, size_t n, Store store) {
  const hn::ScalableTag<T> d;
  using V = hn::Vec<decltype(d)>;
  using Codec = CodecOf<decltype(d)>;
  double mean_square =
      blocked_sum(d, Codec{}, x, n, Codec::from(T(0)), [](auto, V v) { return hn::Mul(v, v); }) /
      static_cast<double>(n);
  if (HWY_UNLIKELY(std::isinf(mean_square))) mean_square = scaled_mean_square(x, n, 0.0);
  const T scale = static_cast<T>(1.0 / std::sqrt(mean_square + static_cast<double>(eps)));
  normalize<T, Codec>(x, gamma, static_cast<const T*>(nullptr), T(0), scale, y, n, store);
}

void softmax_f32(const float* x, float* y, size_t n, Store store) { softmax_impl(x, y, n, store); }
void softmax_f64(const double* x, double* y, size_t n, Store store) {
  softmax_impl(x, y, n, store);
}
void log_softmax_f32(const float* x, float* y, size_t n, Store store) {
  log_softmax_impl(x, y, n, store);
}
void log_softmax_f64(const double* x, double* y, size_t n, Store store) {
  log_softmax_impl(x, y, n, store);
}
void layer_norm_f32(const float* x, const float* gamma, const float* beta, float eps, float* y,
                    size_t n, float* mean_out, float* rstd_out, Store store) {
  layer_norm_impl(x, gamma, beta, eps, y, n, mean_out, rstd_out, store);
}
void layer_norm_f64(const double* x, const double* gamma, const double* beta, double eps, double* y,
                    size_t n, double* mean_out, double* rstd_out, Store store) {
  layer_norm_impl(x, gamma, beta, eps, y, n, mean_out, rstd_out, store);
}
void layer_norm_f16(const Half* x, const float* gamma, const float* beta, float eps, Half* y,
                    size_t n, float* mean_out, float* rstd_out) {
  layer_norm_impl<float, AsFloat16>(x, gamma, beta, eps, y, n, mean_out, rstd_out, Store::kCached);
}
void layer_norm_bf16(const BFloat16* x, const float* gamma, const float* beta, float eps,
                     BFloat16* y, size_t n, float* mean_out, float* rstd_out) {
  layer_norm_impl<float, AsBFloat16>(x, gamma, beta, eps, y, n, mean_out, rstd_out, Store::kCached);
}
void rms_norm_f16(const Half* x, const float* gamma, float eps, Half* y, size_t n) {
  rms_norm_impl<float, AsFloat16>(x, gamma, eps, y, n, Store::kCached);
}
void rms_norm_bf16(const BFloat16* x, const float* gamma, float eps, BFloat16* y, size_t n) {
  rms_norm_impl<float, AsBFloat16>(x, gamma, eps, y, n, Store::kCached);
}
void rms_norm_f32(const float* x, const float* gamma, float eps, float* y, size_t n, Store store) {
  rms_norm_impl(x, gamma, eps, y, n, store);
}
void rms_norm_f64(const double* x, const double* gamma, double eps, double* y, size_t n,
                  Store store) {
  rms_norm_impl(x, gamma, eps, y, n, store);
}

}  // namespace HWY_NAMESPACE
}  // namespace kiln::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::simd {

HWY_EXPORT(softmax_f32);
HWY_EXPORT(softmax_f64);
HWY_EXPORT(log_softmax_f32);
HWY_EXPORT(log_softmax_f64);
HWY_EXPORT(layer_norm_f32);
HWY_EXPORT(layer_norm_f64);
HWY_EXPORT(rms_norm_f32);
HWY_EXPORT(rms_norm_f64);
HWY_EXPORT(layer_norm_f16);
HWY_EXPORT(layer_norm_bf16);
HWY_EXPORT(rms_norm_f16);
HWY_EXPORT(rms_norm_bf16);

void softmax_row(const float* x, float* y, int64_t n, Store store) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(softmax_f32)(x, y, static_cast<size_t>(n), store);
}
void softmax_row(const double* x, double* y, int64_t n, Store store) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(softmax_f64)(x, y, static_cast<size_t>(n), store);
}
void log_softmax_row(const float* x, float* y, int64_t n, Store store) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(log_softmax_f32)(x, y, static_cast<size_t>(n), store);
}
void log_softmax_row(const double* x, double* y, int64_t n, Store store) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(log_softmax_f64)(x, y, static_cast<size_t>(n), store);
}

namespace {
template <typename T>
void empty_row_stats(T* mean_out, T* rstd_out) {
  if (mean_out != nullptr) *mean_out = std::numeric_limits<T>::quiet_NaN();
  if (rstd_out != nullptr) *rstd_out = std::numeric_limits<T>::quiet_NaN();
}
}  // namespace

void layer_norm_row(const float* x, const float* gamma, const float* beta, float eps, float* y,
                    int64_t n, float* mean_out, float* rstd_out, Store store) {
  if (n <= 0) return empty_row_stats(mean_out, rstd_out);
  HWY_DYNAMIC_DISPATCH(layer_norm_f32)
  (x, gamma, beta, eps, y, static_cast<size_t>(n), mean_out, rstd_out, store);
}
void layer_norm_row(const double* x, const double* gamma, const double* beta, double eps, double* y,
                    int64_t n, double* mean_out, double* rstd_out, Store store) {
  if (n <= 0) return empty_row_stats(mean_out, rstd_out);
  HWY_DYNAMIC_DISPATCH(layer_norm_f64)
  (x, gamma, beta, eps, y, static_cast<size_t>(n), mean_out, rstd_out, store);
}
void layer_norm_row(const Half* x, const float* gamma, const float* beta, float eps, Half* y,
                    int64_t n, float* mean_out, float* rstd_out, Store) {
  if (n <= 0) return empty_row_stats(mean_out, rstd_out);
  HWY_DYNAMIC_DISPATCH(layer_norm_f16)
  (x, gamma, beta, eps, y, static_cast<size_t>(n), mean_out, rstd_out);
}
void layer_norm_row(const BFloat16* x, const float* gamma, const float* beta, float eps,
                    BFloat16* y, int64_t n, float* mean_out, float* rstd_out, Store) {
  if (n <= 0) return empty_row_stats(mean_out, rstd_out);
  HWY_DYNAMIC_DISPATCH(layer_norm_bf16)
  (x, gamma, beta, eps, y, static_cast<size_t>(n), mean_out, rstd_out);
}
void rms_norm_row(const Half* x, const float* gamma, float eps, Half* y, int64_t n, Store) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(rms_norm_f16)(x, gamma, eps, y, static_cast<size_t>(n));
}
void rms_norm_row(const BFloat16* x, const float* gamma, float eps, BFloat16* y, int64_t n, Store) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(rms_norm_bf16)(x, gamma, eps, y, static_cast<size_t>(n));
}
void rms_norm_row(const float* x, const float* gamma, float eps, float* y, int64_t n, Store store) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(rms_norm_f32)(x, gamma, eps, y, static_cast<size_t>(n), store);
}
void rms_norm_row(const double* x, const double* gamma, double eps, double* y, int64_t n,
                  Store store) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(rms_norm_f64)(x, gamma, eps, y, static_cast<size_t>(n), store);
}

}  // namespace kiln::simd
#endif  // HWY_ONCE
