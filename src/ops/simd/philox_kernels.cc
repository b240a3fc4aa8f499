// Philox4x32-10 on vectors of counters (see philox.h).
#include "ops/simd/highway_targets.h"  // First: selects the compiled targets.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/simd/philox_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must follow foreach_target.h.
#include <algorithm>

#include "hwy/highway.h"
#include "ops/random.h"
#include "ops/simd/philox.h"
#include "ops/simd/simd_loops-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using detail::kPhiloxM0;
using detail::kPhiloxM1;
using detail::kPhiloxW0;
using detail::kPhiloxW1;

/// The high and low 32 bits of m * c in every lane.
template <class D, class V>
HWY_INLINE void multiply_wide(D d, V m, V c, V& high, V& low) {
#if HWY_TARGET == HWY_SCALAR
  const uint64_t product = uint64_t{hn::GetLane(m)} * hn::GetLane(c);
  high = hn::Set(d, static_cast<uint32_t>(product >> 32));
  low = hn::Set(d, static_cast<uint32_t>(product));
#else
  const hn::Repartition<uint64_t, D> d64;
  // Products of the even lanes, and of the odd lanes moved down into even positions; each
  // 64-bit product has its low half in the even lane and its high half in the odd one.
  const auto even = hn::MulEven(c, m);
  const auto odd = hn::MulEven(hn::BitCast(d, hn::ShiftRight<32>(hn::BitCast(d64, c))), m);
  high = hn::OddEven(hn::BitCast(d, odd), hn::BitCast(d, hn::ShiftRight<32>(even)));
  low = hn::OddEven(hn::BitCast(d, hn::ShiftLeft<32>(odd)), hn::BitCast(d, even));
#endif
}

// Vectors of counters in flight at once: a round's multiplies and xors form one dependent chain,
// so independent vectors fill its latency. rand of 1M floats on one AVX2 core took 1.77 ms with
// one, 1.29 with two, 0.89 with four, and no less with eight.
constexpr size_t kChains = 4;

void philox_impl(uint64_t first, uint64_t seed, uint32_t* words, size_t count) {
  const hn::ScalableTag<uint32_t> d;
  using V = hn::Vec<decltype(d)>;
  const size_t lanes = hn::Lanes(d);
  const size_t step = kChains * lanes;
  const V m0 = hn::Set(d, kPhiloxM0), m1 = hn::Set(d, kPhiloxM1);
  HWY_ALIGN uint32_t counter_low[kChains * kMaxLanes<uint32_t>];
  HWY_ALIGN uint32_t counter_high[kChains * kMaxLanes<uint32_t>];
  HWY_ALIGN uint32_t out[4][kChains * kMaxLanes<uint32_t>];
  for (size_t base = 0; base < count; base += step) {
    for (size_t j = 0; j < step; ++j) {
      const uint64_t counter = first + base + j;
      counter_low[j] = static_cast<uint32_t>(counter);
      counter_high[j] = static_cast<uint32_t>(counter >> 32);
    }
    V c[kChains][4];
    for (size_t v = 0; v < kChains; ++v) {
      c[v][0] = hn::Load(d, counter_low + v * lanes);
      c[v][1] = hn::Load(d, counter_high + v * lanes);
      c[v][2] = hn::Zero(d);
      c[v][3] = hn::Zero(d);
    }
    uint32_t key0 = static_cast<uint32_t>(seed), key1 = static_cast<uint32_t>(seed >> 32);
    for (int round = 0; round < 10; ++round) {
      if (round > 0) {
        key0 += kPhiloxW0;
        key1 += kPhiloxW1;
      }
      const V k0 = hn::Set(d, key0), k1 = hn::Set(d, key1);
      for (size_t v = 0; v < kChains; ++v) {
        V high0, low0, high1, low1;
        multiply_wide(d, m0, c[v][0], high0, low0);
        multiply_wide(d, m1, c[v][2], high1, low1);
        c[v][0] = hn::Xor(hn::Xor(high1, c[v][1]), k0);
        c[v][1] = low1;
        c[v][2] = hn::Xor(hn::Xor(high0, c[v][3]), k1);
        c[v][3] = low0;
      }
    }
    const size_t n = std::min(step, count - base);
    if (n == step) {
      for (size_t v = 0; v < kChains; ++v) {
        for (size_t k = 0; k < 4; ++k) hn::StoreU(c[v][k], d, words + k * count + base + v * lanes);
      }
    } else {  // the last, partial step of counters
      for (size_t v = 0; v < kChains; ++v) {
        for (size_t k = 0; k < 4; ++k) hn::Store(c[v][k], d, out[k] + v * lanes);
      }
      for (size_t k = 0; k < 4; ++k) std::copy(out[k], out[k] + n, words + k * count + base);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace kiln::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::simd {

HWY_EXPORT(philox_impl);

void philox4x32_10(uint64_t first, uint64_t seed, uint32_t* words, int64_t count) {
  if (count > 0) {
    HWY_DYNAMIC_DISPATCH(philox_impl)(first, seed, words, static_cast<size_t>(count));
  }
}

}  // namespace kiln::simd
#endif  // HWY_ONCE
