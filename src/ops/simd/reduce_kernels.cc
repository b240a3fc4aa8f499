// Horizontal reductions over one contiguous run: reduce_sum / reduce_max / reduce_min.
//
// Note [blocked summation]
// A single float32 accumulator loses ~n * 2^-24 relative precision, which is visible at a few
// million elements. blocked_sum() (simd_loops-inl.h) sums blocks of 32 vectors (512 floats with
// AVX-512) into four vector accumulators, so each lane adds only 8 values, reduces the block to
// one number and combines the block sums in float64 with Neumaier compensation. The error is then
// ~(8 + log2(lanes)) ulp of a block sum, and nothing measurable from the combination: well below
// numpy's pairwise sum, whose error grows with log2(n / 128). The combination costs a few scalar
// flops per block, so the loop stays memory bound.
#include "ops/simd/highway_targets.h"  // First: selects the compiled targets.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/simd/reduce_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must follow foreach_target.h.
#include <cmath>
#include <limits>

#include "hwy/highway.h"
#include "ops/simd/float_kernels.h"
#include "ops/simd/simd_loops-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <typename T>
HWY_INLINE T sum_impl(const T* x, size_t n) {
  const hn::ScalableTag<T> d;
  return static_cast<T>(blocked_sum(d, x, n, T(0), [](auto, auto v) { return v; }));
}

/// max (kIsMax) or min of x[0..n), n > 0; nan if any element is nan.
template <bool kIsMax, typename T>
HWY_INLINE T extremum_impl(const T* x, size_t n) {
  const hn::ScalableTag<T> d;
  using V = hn::Vec<decltype(d)>;
  const size_t lanes = hn::Lanes(d);
  const auto pick = [](V a, V b) { return kIsMax ? hn::Max(a, b) : hn::Min(a, b); };
  // x[0] is neutral for both max and min, which also makes it the right padding for the tail.
  V acc0 = hn::Set(d, x[0]);
  V acc1 = acc0;
  auto nan0 = hn::Ne(acc0, acc0);
  auto nan1 = nan0;
  size_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    const V v0 = hn::LoadU(d, x + i);
    const V v1 = hn::LoadU(d, x + i + lanes);
    acc0 = pick(acc0, v0);
    acc1 = pick(acc1, v1);
    nan0 = hn::Or(nan0, hn::IsNaN(v0));
    nan1 = hn::Or(nan1, hn::IsNaN(v1));
  }
  for (; i < n; i += lanes) {
    HWY_ALIGN T buf[kMaxLanes<T>];
    for (size_t j = 0; j < lanes; ++j) buf[j] = i + j < n ? x[i + j] : x[0];
    const V v = hn::Load(d, buf);
    acc0 = pick(acc0, v);
    nan0 = hn::Or(nan0, hn::IsNaN(v));
  }
  if (!hn::AllFalse(d, hn::Or(nan0, nan1))) return std::numeric_limits<T>::quiet_NaN();
  const V r = pick(acc0, acc1);
  return hn::GetLane(kIsMax ? hn::MaxOfLanes(d, r) : hn::MinOfLanes(d, r));
}

/// The float64 sum of a 16-bit float run, summed in float vectors as a float32 run is.
template <template <class> class Codec, typename S>
HWY_INLINE double sum_16bit_impl(const S* x, size_t n) {
  const hn::ScalableTag<float> d;
  return blocked_sum(d, Codec<decltype(d)>{}, x, n, S{}, [](auto, auto v) { return v; });
}

float sum_f32(const float* x, size_t n) { return sum_impl(x, n); }
double sum_f16(const Half* x, size_t n) { return sum_16bit_impl<AsFloat16>(x, n); }
double sum_bf16(const BFloat16* x, size_t n) { return sum_16bit_impl<AsBFloat16>(x, n); }
double sum_f64(const double* x, size_t n) { return sum_impl(x, n); }
float max_f32(const float* x, size_t n) { return extremum_impl<true>(x, n); }
double max_f64(const double* x, size_t n) { return extremum_impl<true>(x, n); }
float min_f32(const float* x, size_t n) { return extremum_impl<false>(x, n); }
double min_f64(const double* x, size_t n) { return extremum_impl<false>(x, n); }

}  // namespace HWY_NAMESPACE
}  // namespace kiln::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::simd {

HWY_EXPORT(sum_f32);
HWY_EXPORT(sum_f64);
HWY_EXPORT(sum_f16);
HWY_EXPORT(sum_bf16);
HWY_EXPORT(max_f32);
HWY_EXPORT(max_f64);
HWY_EXPORT(min_f32);
HWY_EXPORT(min_f64);

float reduce_sum(const float* x, int64_t n) {
  return n > 0 ? HWY_DYNAMIC_DISPATCH(sum_f32)(x, static_cast<size_t>(n)) : 0.0f;
}
double reduce_sum(const double* x, int64_t n) {
  return n > 0 ? HWY_DYNAMIC_DISPATCH(sum_f64)(x, static_cast<size_t>(n)) : 0.0;
}
double reduce_sum(const Half* x, int64_t n) {
  return n > 0 ? HWY_DYNAMIC_DISPATCH(sum_f16)(x, static_cast<size_t>(n)) : 0.0;
}
double reduce_sum(const BFloat16* x, int64_t n) {
  if (n <= 0) return 0.0;
  const double sum = HWY_DYNAMIC_DISPATCH(sum_bf16)(x, static_cast<size_t>(n));
  if (std::isfinite(sum)) return sum;
  // bfloat16 has float's range, so a float block sum can overflow where the float64 sum does not:
  // add in float64 then (the same inf or NaN when an element is one).
  double exact = 0.0;
  for (int64_t i = 0; i < n; ++i) exact += static_cast<float>(x[i]);
  return exact;
}
float reduce_max(const float* x, int64_t n) {
  return n > 0 ? HWY_DYNAMIC_DISPATCH(max_f32)(x, static_cast<size_t>(n))
               : -std::numeric_limits<float>::infinity();
}
double reduce_max(const double* x, int64_t n) {
  return n > 0 ? HWY_DYNAMIC_DISPATCH(max_f64)(x, static_cast<size_t>(n))
               : -std::numeric_limits<double>::infinity();
}
float reduce_min(const float* x, int64_t n) {
  return n > 0 ? HWY_DYNAMIC_DISPATCH(min_f32)(x, static_cast<size_t>(n))
               : std::numeric_limits<float>::infinity();
}
double reduce_min(const double* x, int64_t n) {
  return n > 0 ? HWY_DYNAMIC_DISPATCH(min_f64)(x, static_cast<size_t>(n))
               : std::numeric_limits<double>::infinity();
}

}  // namespace kiln::simd
#endif  // HWY_ONCE
