// Per-target loop skeletons shared by the kernels in src/ops/simd/ (Highway "-inl" header).
//
// Included from inside HWY_NAMESPACE by each kernel .cc once per compiled target, hence the
// toggling include guard instead of #pragma once. Each skeleton instantiates the per-vector
// functor exactly once (the tail reuses the same call through a padded stack buffer), which keeps
// code size and compile time proportional to the number of ops, and makes the tail lanes bitwise
// identical to what the same value would give in the vector body. The skeletons are HWY_NOINLINE:
// one function per op instead of one giant switch function roughly halves the compile time of a
// sanitizer build (GCC's passes are superlinear in function size) and costs one call per kernel.

#if defined(KILN_OPS_SIMD_SIMD_LOOPS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KILN_OPS_SIMD_SIMD_LOOPS_INL_H_
#undef KILN_OPS_SIMD_SIMD_LOOPS_INL_H_
#else
#define KILN_OPS_SIMD_SIMD_LOOPS_INL_H_
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kiln/dtype.h"
#include "ops/simd/float_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// Most lanes any vector of T has on this target (sizes the tail buffers).
template <typename T>
constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(T);

// ---- how a skeleton moves its elements between memory and vectors ---------------------------

/// Elements stored as D's own lane type.
template <class D>
struct AsIs {
  using Stored = hn::TFromD<D>;
  static Stored from(hn::TFromD<D> v) { return v; }
  static hn::Vec<D> load(D d, const Stored* p) { return hn::LoadU(d, p); }
  static void store(D d, hn::Vec<D> v, Stored* p) { hn::StoreU(v, d, p); }
};

// Note [16-bit runs in float vectors]
// The float16 / bfloat16 elementwise kernels compute in float, as the float32 kernels do, with the
// conversions in registers: a load widens (exactly), a store rounds to nearest even with the bits
// of Half's and BFloat16's own conversions (kiln/dtype.h), NaN included (quiet, the top of the
// payload kept). So one pass gives what widening, the float kernel and narrowing give in three,
// except that a NaN op NaN may carry either operand's payload (the float kernels promise no
// order). float16 goes through x86's F16C instructions on Highway's AVX2 and AVX-512 targets;
// Highway 1.0's emulation elsewhere truncates instead of rounding and mistakes inf and NaN, so
// the other targets run Half's branch-free bit code in vectors. bfloat16's rounding is integer
// arithmetic on the float's bits, on every target. Integer comparisons are signed: every value
// compared is below 2^31.

/// float16 elements of float vectors (Note [16-bit runs in float vectors]).
template <class D>
struct AsFloat16 {
  using Stored = Half;
  static Stored from(float v) { return Half(v); }
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)
  static hn::Vec<D> load(D d, const Stored* p) {
    const hn::Rebind<hwy::float16_t, D> dh;
    return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
  }
  static void store(D d, hn::Vec<D> v, Stored* p) {
    const hn::Rebind<hwy::float16_t, D> dh;
    hn::StoreU(hn::DemoteTo(dh, v), dh, reinterpret_cast<hwy::float16_t*>(p));
  }
#else
  // Half's conversions (kiln/dtype.h), step for step.
  static hn::Vec<D> load(D d, const Stored* p) {
    const hn::RebindToSigned<D> di;
    const hn::Rebind<uint16_t, D> d16;
    const auto bits =
        hn::BitCast(di, hn::PromoteTo(hn::RebindToUnsigned<D>(),
                                      hn::LoadU(d16, reinterpret_cast<const uint16_t*>(p))));
    const auto sign = hn::ShiftLeft<16>(hn::And(bits, hn::Set(di, 0x8000)));
    const auto magnitude = hn::And(bits, hn::Set(di, 0x7fff));
    const auto exponent = hn::ShiftRight<10>(magnitude);
    const auto rebias = hn::IfThenElse(hn::Eq(exponent, hn::Set(di, 31)), hn::Set(di, 224 << 23),
                                       hn::Set(di, 112 << 23));
    const auto quiet =
        hn::IfThenElseZero(hn::Gt(magnitude, hn::Set(di, 0x7c00)), hn::Set(di, 0x400000));
    const auto widened = hn::Or(hn::Add(hn::ShiftLeft<13>(magnitude), rebias), quiet);
    const auto small = hn::BitCast(di, hn::Mul(hn::ConvertTo(d, magnitude), hn::Set(d, 0x1p-24f)));
    const auto is_small = hn::Eq(exponent, hn::Zero(di));
    return hn::BitCast(d, hn::Or(sign, hn::IfThenElse(is_small, small, widened)));
  }
  static void store(D d, hn::Vec<D> v, Stored* p) {
    const hn::RebindToSigned<D> di;
    const hn::RebindToUnsigned<D> du;
    const auto f = hn::BitCast(du, v);
    const auto sign = hn::And(hn::ShiftRight<16>(f), hn::Set(du, 0x8000u));
    const auto magnitude = hn::And(f, hn::Set(du, 0x7fffffffu));
    const auto normal =
        hn::ShiftRight<13>(hn::Add(hn::Add(magnitude, hn::Set(du, 0xc8000fffu)),
                                   hn::And(hn::ShiftRight<13>(magnitude), hn::Set(du, 1u))));
    const auto subnormal =
        hn::Sub(hn::BitCast(du, hn::Add(hn::BitCast(d, magnitude), hn::Set(d, 0.5f))),
                hn::Set(du, 0x3f000000u));
    const auto m = hn::BitCast(di, magnitude);
    const auto payload =
        hn::Or(hn::Set(du, 0x200u), hn::And(hn::ShiftRight<13>(magnitude), hn::Set(du, 0x3ffu)));
    const auto special =
        hn::Or(hn::Set(du, 0x7c00u),
               hn::IfThenElseZero(hn::RebindMask(du, hn::Gt(m, hn::Set(di, 0x7f800000))), payload));
    const auto finite =
        hn::IfThenElse(hn::RebindMask(du, hn::Lt(m, hn::Set(di, 0x38800000))), subnormal, normal);
    const auto bits = hn::Or(
        sign,
        hn::IfThenElse(hn::RebindMask(du, hn::Gt(m, hn::Set(di, 0x477fefff))), special, finite));
    const hn::Rebind<uint16_t, D> d16;
    hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, bits)), d16, reinterpret_cast<uint16_t*>(p));
  }
#endif
};

/// bfloat16 elements of float vectors (Note [16-bit runs in float vectors]).
template <class D>
struct AsBFloat16 {
  using Stored = BFloat16;
  static Stored from(float v) { return BFloat16(v); }
  static hn::Vec<D> load(D d, const Stored* p) {
    const hn::Rebind<uint16_t, D> d16;
    const hn::RebindToUnsigned<D> du;
    const auto bits = hn::LoadU(d16, reinterpret_cast<const uint16_t*>(p));
    return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du, bits)));
  }
  static void store(D d, hn::Vec<D> v, Stored* p) {
    const hn::Rebind<uint16_t, D> d16;
    const hn::RebindToUnsigned<D> du;
    const hn::RebindToSigned<D> di;
    const auto u = hn::BitCast(du, v);
    const auto high = hn::ShiftRight<16>(u);
    // BFloat16(float): (u + 0x7fff + lowest kept bit) >> 16; a NaN keeps its top bits, made quiet.
    const auto rounded = hn::ShiftRight<16>(
        hn::Add(hn::Add(u, hn::Set(du, 0x7fffu)), hn::And(high, hn::Set(du, 1u))));
    const auto nan = hn::Or(high, hn::Set(du, 0x40u));
    const auto bits = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), nan, rounded);
    hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, bits)), d16, reinterpret_cast<uint16_t*>(p));
  }
};

/// y[i] = f(d, x[i]) vector by vector, elements moved by `Codec` (AsIs, AsFloat16, AsBFloat16); the
/// tail goes through a buffer padded with `pad`, a value chosen so the functor's padded lanes stay
/// cheap and exception-free.
template <class D, class Codec, class F, typename S = typename Codec::Stored>
HWY_NOINLINE void map_unary(D d, Codec, const S* x, S* y, size_t n, F f, S pad) {
  const size_t lanes = hn::Lanes(d);
  HWY_ALIGN S buf[kMaxLanes<hn::TFromD<D>>];
  for (size_t i = 0; i < n; i += lanes) {
    const size_t count = n - i < lanes ? n - i : lanes;
    const bool tail = count < lanes;
    const S* src = x + i;
    S* dst = y + i;
    if (HWY_UNLIKELY(tail)) {
      for (size_t j = 0; j < lanes; ++j) buf[j] = j < count ? x[i + j] : pad;
      src = buf;
      dst = buf;
    }
    Codec::store(d, f(d, Codec::load(d, src)), dst);
    if (HWY_UNLIKELY(tail)) std::memcpy(y + i, buf, count * sizeof(S));
  }
}

/// map_unary on elements of D's own lane type.
template <class D, class F, typename T = hn::TFromD<D>>
HWY_INLINE void map_unary(D d, const T* x, T* y, size_t n, F f, T pad = T(0)) {
  map_unary(d, AsIs<D>{}, x, y, n, f, pad);
}

// Note [streaming stores]
// An ordinary store to a line that is not in cache first reads the line from memory
// (read-for-ownership), so writing an output costs its bytes twice in memory traffic. A
// non-temporal ("streaming") store writes whole lines past the caches without that read. When an
// op's output is too large to be read back from cache by the next op anyway (store_for_output: more
// than half the last-level cache), the unary elementwise kernels and the row kernels' final pass
// stream it: measured on layer_norm and softmax [4096, 4096] float32 (64 MiB out of a 105 MiB L3),
// about 15 to 25% less time; on gelu of 16M float32 less in three runs of four (bench/RESULTS.md).
// Streaming needs vector-aligned addresses, so the unaligned head and the tail of a row are written
// normally (stream_span); each kernel ends with a store fence, so the data is ordered before the
// kernel returns. Values are bitwise the same either way (nan payloads aside: they follow operand
// order, which the compiler may pick differently per loop), provided each lane's result does not
// depend on its neighbours (unary_kernels.cc keeps sin / cos / tan cached).

/// [begin, end): the part of a run of n outputs at y that `store` writes with streaming stores,
/// whole vectors from the first vector-aligned element; empty for Store::kCached.
struct StreamSpan {
  size_t begin = 0;
  size_t end = 0;
};

template <class D, typename T = hn::TFromD<D>>
HWY_INLINE StreamSpan stream_span(D d, const T* y, size_t n, Store store) {
  const size_t lanes = hn::Lanes(d);
  const uintptr_t bytes = lanes * sizeof(T);
  const auto addr = reinterpret_cast<uintptr_t>(y);
  if (store == Store::kCached || addr % sizeof(T) != 0) return {};
  const size_t begin = ((bytes - addr % bytes) % bytes) / sizeof(T);
  if (begin >= n) return {};
  return {begin, begin + (n - begin) / lanes * lanes};
}

/// map_unary that writes y per `store` (Note [streaming stores]); same values. Runs of other
/// element types than D's own (the 16-bit codecs) are written through the cache.
template <class D, class Codec, class F, typename S = typename Codec::Stored>
HWY_INLINE void map_unary(D d, Codec codec, const S* x, S* y, size_t n, F f, S pad, Store store) {
  if constexpr (!std::is_same_v<Codec, AsIs<D>>) {
    map_unary(d, codec, x, y, n, f, pad);
  } else {
    const StreamSpan span = stream_span(d, y, n, store);
    if (span.begin == span.end) return map_unary(d, codec, x, y, n, f, pad);
    map_unary(d, codec, x, y, span.begin, f, pad);
    for (size_t i = span.begin; i < span.end; i += hn::Lanes(d)) {
      hn::Stream(f(d, hn::LoadU(d, x + i)), d, y + i);
    }
    map_unary(d, codec, x + span.end, y + span.end, n - span.end, f, pad);
    hwy::FlushStream();
  }
}

/// The streaming map_unary on elements of D's own lane type.
template <class D, class F, typename T = hn::TFromD<D>>
HWY_INLINE void map_unary(D d, const T* x, T* y, size_t n, F f, T pad, Store store) {
  map_unary(d, AsIs<D>{}, x, y, n, f, pad, store);
}

/// y[i] = f(d, a[i], b[i]); same tail scheme as map_unary (both operands padded with `pad`).
template <class D, class Codec, class F, typename S = typename Codec::Stored>
HWY_NOINLINE void map_binary(D d, Codec, const S* a, const S* b, S* y, size_t n, F f, S pad) {
  const size_t lanes = hn::Lanes(d);
  HWY_ALIGN S buf_a[kMaxLanes<hn::TFromD<D>>];
  HWY_ALIGN S buf_b[kMaxLanes<hn::TFromD<D>>];
  for (size_t i = 0; i < n; i += lanes) {
    const size_t count = n - i < lanes ? n - i : lanes;
    const bool tail = count < lanes;
    const S* src_a = a + i;
    const S* src_b = b + i;
    S* dst = y + i;
    if (HWY_UNLIKELY(tail)) {
      for (size_t j = 0; j < lanes; ++j) {
        buf_a[j] = j < count ? a[i + j] : pad;
        buf_b[j] = j < count ? b[i + j] : pad;
      }
      src_a = buf_a;
      src_b = buf_b;
      dst = buf_a;
    }
    Codec::store(d, f(d, Codec::load(d, src_a), Codec::load(d, src_b)), dst);
    if (HWY_UNLIKELY(tail)) std::memcpy(y + i, buf_a, count * sizeof(S));
  }
}

/// map_binary on elements of D's own lane type.
template <class D, class F, typename T = hn::TFromD<D>>
HWY_INLINE void map_binary(D d, const T* a, const T* b, T* y, size_t n, F f, T pad = T(1)) {
  map_binary(d, AsIs<D>{}, a, b, y, n, f, pad);
}

/// Neumaier-compensated running sum in float64: the combination step of blocked_sum().
struct CompensatedSum {
  double sum = 0.0;
  double carry = 0.0;
  void add(double v) {
    const double t = sum + v;
    carry += std::fabs(sum) >= std::fabs(v) ? (sum - t) + v : (v - t) + sum;
    sum = t;
  }
  // Once sum is inf or nan the carry is meaningless (inf - inf); the sum alone is the answer.
  double value() const { return std::isfinite(sum) ? sum + carry : sum; }
};

/// Vectors per block in Note [blocked summation] (reduce_kernels.cc); a multiple of 4.
constexpr size_t kSumBlockVectors = 32;

/// Sum over i of f(d, x[i]) (vector by vector), accumulated as in Note [blocked summation], the
/// elements moved by `Codec`. If `out` is not null it also receives f(d, x[i]) (softmax stores its
/// exponentials this way). The tail is padded with `pad`, a value that keeps f cheap and
/// exception-free; the padded lanes add nothing (their f is zeroed).
template <class D, class Codec, class F, typename S = typename Codec::Stored>
HWY_NOINLINE double blocked_sum(D d, Codec, const S* x, size_t n, S pad, F f, S* out = nullptr) {
  const size_t lanes = hn::Lanes(d);
  const size_t block = kSumBlockVectors * lanes;
  CompensatedSum total;
  for (size_t start = 0; start < n; start += block) {
    const size_t end = n - start < block ? n : start + block;
    auto acc0 = hn::Zero(d);
    auto acc1 = hn::Zero(d);
    auto acc2 = hn::Zero(d);
    auto acc3 = hn::Zero(d);
    size_t i = start;
    for (; i + 4 * lanes <= end; i += 4 * lanes) {
      const auto v0 = f(d, Codec::load(d, x + i));
      const auto v1 = f(d, Codec::load(d, x + i + lanes));
      const auto v2 = f(d, Codec::load(d, x + i + 2 * lanes));
      const auto v3 = f(d, Codec::load(d, x + i + 3 * lanes));
      if (out != nullptr) {
        Codec::store(d, v0, out + i);
        Codec::store(d, v1, out + i + lanes);
        Codec::store(d, v2, out + i + 2 * lanes);
        Codec::store(d, v3, out + i + 3 * lanes);
      }
      acc0 = hn::Add(acc0, v0);
      acc1 = hn::Add(acc1, v1);
      acc2 = hn::Add(acc2, v2);
      acc3 = hn::Add(acc3, v3);
    }
    for (; i < end; i += lanes) {
      const size_t count = end - i < lanes ? end - i : lanes;
      HWY_ALIGN S buf[kMaxLanes<hn::TFromD<D>>];
      const S* src = x + i;
      if (count < lanes) {
        for (size_t j = 0; j < lanes; ++j) buf[j] = j < count ? x[i + j] : pad;
        src = buf;
      }
      const auto v = hn::IfThenElseZero(hn::FirstN(d, count), f(d, Codec::load(d, src)));
      if (out != nullptr && count == lanes) {
        Codec::store(d, v, out + i);
      } else if (out != nullptr) {
        Codec::store(d, v, buf);
        std::memcpy(out + i, buf, count * sizeof(S));
      }
      acc0 = hn::Add(acc0, v);
    }
    const auto sum = hn::Add(hn::Add(acc0, acc1), hn::Add(acc2, acc3));
    total.add(static_cast<double>(hn::GetLane(hn::SumOfLanes(d, sum))));
  }
  return total.value();
}

/// blocked_sum on elements of D's own lane type.
template <class D, class F, typename T = hn::TFromD<D>>
HWY_INLINE double blocked_sum(D d, const T* x, size_t n, T pad, F f, T* out = nullptr) {
  return blocked_sum(d, AsIs<D>{}, x, n, pad, f, out);
}

/// Applies `lane_fn` (a plain T -> T function) to the lanes of v. Slow path for the rare lanes a
/// vector formula cannot handle (e.g. huge sin arguments).
template <class D, class V, class F>
HWY_INLINE V per_lane(D d, V v, F lane_fn) {
  using T = hn::TFromD<D>;
  HWY_ALIGN T buf[kMaxLanes<T>];
  hn::Store(v, d, buf);
  for (size_t j = 0; j < hn::Lanes(d); ++j) buf[j] = lane_fn(buf[j]);
  return hn::Load(d, buf);
}

}  // namespace HWY_NAMESPACE
}  // namespace kiln::simd
HWY_AFTER_NAMESPACE();

#endif  // KILN_OPS_SIMD_SIMD_LOOPS_INL_H_
