// Elementwise binary kernels: binary, binary_scalar_rhs / _lhs, accumulate and masked_scale (see
// float_kernels.h).
//
// add / sub / mul / div / maximum / minimum are exact (one IEEE operation). The backward ops
// round each step as written (silu's, which starts from x, within a few ulp of g or of its
// result); tanh's takes 1 - y^2 as (1 - y)(1 + y), which no compiler fuses
// into an FMA (1 - y * y would round differently where it does, so per target) and which keeps
// its accuracy near |y| = 1, where 1 - y * y cancels. pow calls std::pow
// lane by lane: a vector pow that keeps all of std::pow's special cases (negative base with
// integral exponent, signed zeros, infinities) is not worth its code size here. floor_divide and
// remainder give npy_divmod's values bit for bit: their fmod is exact (Note [Exact vector fmod]),
// and the rest follows npy_divmod one IEEE step at a time. The
// scalar-exponent fast paths below (x^2 = x * x, x^0.5 = sqrt, ...) are correctly rounded, so they
// agree with std::pow wherever std::pow is (glibc: < 1 ulp always); float32 to a small integral
// power squares in double (float_integer_power), within a hair of correctly rounded.
#include "ops/simd/highway_targets.h"  // First: selects the compiled targets.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/simd/binary_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must follow foreach_target.h.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "hwy/highway.h"
#include "ops/simd/float_kernels.h"
#include "ops/simd/simd_loops-inl.h"
#include "ops/simd/vec_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// Applies `f(d, a_vec, b_vec)` over the broadcast shape selected by the pointers: a null `a` or
/// `b` means "the scalar sa / sb". One loop skeleton serves all three operand layouts.
template <class D, class Codec, class F, typename S = typename Codec::Stored,
          typename T = hn::TFromD<D>>
HWY_INLINE void map_layout(D d, Codec codec, const S* a, T sa, const S* b, T sb, S* y, size_t n,
                           F f) {
  const S one = Codec::from(T(1));
  if (a != nullptr && b != nullptr) return map_binary(d, codec, a, b, y, n, f, one);
  if (b == nullptr) {
    const auto vb = hn::Set(d, sb);
    return map_unary(
        d, codec, a, y, n, [&](D dv, hn::Vec<D> va) { return f(dv, va, vb); }, one);
  }
  const auto va = hn::Set(d, sa);
  map_unary(
      d, codec, b, y, n, [&](D dv, hn::Vec<D> vb) { return f(dv, va, vb); }, one);
}

template <typename T>
HWY_INLINE void pow_lanes(const T* a, T sa, const T* b, T sb, T* y, size_t n) {
  if (a != nullptr && b != nullptr) {
    for (size_t i = 0; i < n; ++i) y[i] = std::pow(a[i], b[i]);
  } else if (b == nullptr) {
    for (size_t i = 0; i < n; ++i) y[i] = std::pow(a[i], sb);
  } else {
    for (size_t i = 0; i < n; ++i) y[i] = std::pow(sa, b[i]);
  }
}

// x[k] = x[k]^e by squaring, for several vectors at once (so that the exponent's loop runs once
// per several vectors) or for one double (the tail, rounded alike).
template <typename T, size_t K>
HWY_INLINE void raise_to(T (&x)[K], T one, int e) {
  T result[K];
  for (T& r : result) r = one;
  for (unsigned bits = static_cast<unsigned>(e < 0 ? -e : e); bits != 0; bits >>= 1) {
    if ((bits & 1u) != 0) {
      for (size_t k = 0; k < K; ++k) result[k] = result[k] * x[k];
    }
    if (bits > 1) {
      for (T& b : x) b = b * b;
    }
  }
  for (size_t k = 0; k < K; ++k) x[k] = e < 0 ? one / result[k] : result[k];
}

/// a[i]^e for float a and an integral exponent e, 0 < |e| <= kMaxIntegerExponent: squaring and
/// multiplying in double, in registers. The repeated squarings compound double's rounding to a
/// relative error below 2^-46, far below float's half ulp (2^-24), so the result is float's
/// correctly rounded power except where the exact power lies that close to a rounding boundary
/// between two floats: as close to std::pow as glibc's powf is to the exact power (one mismatch in
/// 25M against a correctly rounded reference). No intermediate leaves double's range when the
/// result is in float's: each |x^j| the squaring reaches lies between 1 and |x^e|. std::pow lane by
/// lane took 11 ms for 1M elements (x^3), this path 0.23 (PyTorch, x * x * x in float: 0.24).
constexpr int kMaxIntegerExponent = 64;

HWY_INLINE void float_integer_power(const float* a, int e, float* y, size_t n) {
  size_t i = 0;
  // Highway's emulated targets clamp DemoteTo to float's finite range, infinities included; they
  // take the scalar loop, whose conversion rounds.
#if HWY_TARGET != HWY_EMU128 && HWY_TARGET != HWY_SCALAR
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;  // as many float lanes as dd has doubles
  using V = hn::Vec<decltype(dd)>;
  constexpr size_t kUnroll = 4;
  const V one = hn::Set(dd, 1.0);
  const size_t lanes = hn::Lanes(dd);
  for (; i + kUnroll * lanes <= n; i += kUnroll * lanes) {
    V x[kUnroll];
    for (size_t k = 0; k < kUnroll; ++k) x[k] = hn::PromoteTo(dd, hn::LoadU(df, a + i + k * lanes));
    raise_to(x, one, e);
    for (size_t k = 0; k < kUnroll; ++k) hn::StoreU(hn::DemoteTo(df, x[k]), df, y + i + k * lanes);
  }
#endif
  for (; i < n; ++i) {
    double x[1] = {static_cast<double>(a[i])};
    raise_to(x, 1.0, e);
    y[i] = static_cast<float>(x[0]);
  }
}

/// pow(a[i], b) for a scalar b. Returns false when b has no fast path.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE bool pow_scalar_exponent(D d, const T* a, T b, T* y, size_t n) {
  using V = hn::Vec<D>;
  if (b == T(2)) {
    map_unary(d, a, y, n, [](D, V v) { return hn::Mul(v, v); });
  } else if (b == T(1)) {
    if (a != y) std::memcpy(y, a, n * sizeof(T));
  } else if (b == T(0)) {
    for (size_t i = 0; i < n; ++i) y[i] = T(1);  // even pow(nan, 0) == 1
  } else if (b == T(-1)) {
    map_unary(d, a, y, n, [](D dv, V v) { return hn::Div(hn::Set(dv, T(1)), v); });
  } else if (b == T(0.5)) {
    // std::pow(x, 0.5) is sqrt(x) except pow(-0, 0.5) = +0 (adding +0 turns -0 into +0) and
    // pow(-inf, 0.5) = +inf.
    map_unary(d, a, y, n, [](D dv, V v) {
      const V r = hn::Add(hn::Sqrt(v), hn::Zero(dv));
      return hn::IfThenElse(hn::Eq(v, hn::Neg(inf(dv))), inf(dv), r);
    });
  } else if (std::is_same_v<T, float> && b == std::trunc(b) &&
             std::fabs(b) <= T(kMaxIntegerExponent)) {
    float_integer_power(reinterpret_cast<const float*>(a), static_cast<int>(b),
                        reinterpret_cast<float*>(y), n);
  } else {
    return false;
  }
  return true;
}

/// map_layout with op's vector function, on runs stored as `Codec` says. Returns false for kPow,
/// which has none (binary_impl's lanes and fast paths compute it).
template <class D, class Codec, typename S = typename Codec::Stored, typename T = hn::TFromD<D>>
HWY_INLINE bool map_op(D d, Codec codec, BinaryOp op, const S* a, T sa, const S* b, T sb, S* y,
                       size_t n) {
  using V = hn::Vec<D>;
  const auto run = [&](auto f) {
    map_layout(d, codec, a, sa, b, sb, y, n, f);
    return true;
  };
  switch (op) {
    case BinaryOp::kAdd:
      return run([](D, V u, V v) { return hn::Add(u, v); });
    case BinaryOp::kSub:
      return run([](D, V u, V v) { return hn::Sub(u, v); });
    case BinaryOp::kMul:
      return run([](D, V u, V v) { return hn::Mul(u, v); });
    case BinaryOp::kDiv:
      return run([](D, V u, V v) { return hn::Div(u, v); });
    case BinaryOp::kMaximum:
      return run([](D, V u, V v) { return maximum(u, v); });
    case BinaryOp::kMinimum:
      return run([](D, V u, V v) { return minimum(u, v); });
    case BinaryOp::kPow:
      return false;
    case BinaryOp::kFloorDivide:
      return run([](D dv, V u, V v) { return floor_divide(dv, u, v); });
    case BinaryOp::kRemainder:
      return run([](D dv, V u, V v) { return remainder(dv, u, v); });
    case BinaryOp::kTruncDivide:  // the quotient's sign kept (as trunc's, above)
      return run([](D, V u, V v) {
        const V quotient = hn::Div(u, v);
        return hn::CopySign(hn::Trunc(quotient), quotient);
      });
    case BinaryOp::kSigmoidBackward:
      return run(
          [](D dv, V g, V v) { return hn::Mul(g, hn::Mul(v, hn::Sub(hn::Set(dv, T(1)), v))); });
    case BinaryOp::kTanhBackward:
      return run([](D dv, V g, V v) {
        const V one = hn::Set(dv, T(1));
        return hn::Mul(g, hn::Mul(hn::Sub(one, v), hn::Add(one, v)));
      });
    case BinaryOp::kReluBackward:
      // x <= 0, not !(x > 0): a NaN x passes g, as PyTorch's threshold_backward does.
      return run([](D dv, V g, V x) { return hn::IfThenZeroElse(hn::Le(x, hn::Zero(dv)), g); });
    case BinaryOp::kSiluBackward:
      return run([](D dv, V g, V x) { return hn::Mul(g, silu_grad(dv, x)); });
  }
  return false;
}

template <typename T>
HWY_INLINE void binary_impl(BinaryOp op, const T* a, T sa, const T* b, T sb, T* y, size_t n) {
  const hn::ScalableTag<T> d;
  if (op != BinaryOp::kPow) {
    map_op(d, AsIs<decltype(d)>{}, op, a, sa, b, sb, y, n);
  } else if (b == nullptr && pow_scalar_exponent(d, a, sb, y, n)) {
    return;
  } else {
    pow_lanes(a, sa, b, sb, y, n);
  }
}

/// binary_impl on 16-bit float runs (Note [16-bit runs in float vectors]); false for kPow.
template <template <class> class Codec, typename S>
HWY_INLINE bool binary_16bit_impl(BinaryOp op, const S* a, float sa, const S* b, float sb, S* y,
                                  size_t n) {
  const hn::ScalableTag<float> d;
  return map_op(d, Codec<decltype(d)>{}, op, a, sa, b, sb, y, n);
}

/// Lanes of d (float or double) where keep (bytes 0 or 1, as many as d has lanes) is nonzero.
template <class D>
HWY_INLINE hn::Mask<D> keep_mask(D d, const uint8_t* keep) {
  const hn::Rebind<uint32_t, D> d32;  // Highway promotes bytes to 32 bits, then to 64
  const auto k32 = hn::PromoteTo(d32, hn::LoadU(hn::Rebind<uint8_t, D>(), keep));
  if constexpr (sizeof(hn::TFromD<D>) == 4) {
    return hn::RebindMask(d, hn::Ne(k32, hn::Zero(d32)));
  } else {
    const hn::RebindToUnsigned<D> du;
    return hn::RebindMask(d, hn::Ne(hn::PromoteTo(du, k32), hn::Zero(du)));
  }
}

template <typename T>
HWY_INLINE void masked_scale_impl(const T* x, const uint8_t* keep, T scale, T* y, size_t n) {
  const hn::ScalableTag<T> d;
  const auto vscale = hn::Set(d, scale);
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(hn::IfThenElseZero(keep_mask(d, keep + i), hn::Mul(hn::LoadU(d, x + i), vscale)), d,
               y + i);
  }
  for (; i < n; ++i) y[i] = keep[i] != 0 ? x[i] * scale : T(0);
}

void masked_scale_f32(const float* x, const uint8_t* keep, float scale, float* y, size_t n) {
  masked_scale_impl(x, keep, scale, y, n);
}
void masked_scale_f64(const double* x, const uint8_t* keep, double scale, double* y, size_t n) {
  masked_scale_impl(x, keep, scale, y, n);
}

void accumulate_f16(const Half* x, float* acc, size_t n) {
  const hn::ScalableTag<float> d;
  using Codec = AsFloat16<decltype(d)>;
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(hn::Add(hn::LoadU(d, acc + i), Codec::load(d, x + i)), d, acc + i);
  }
  for (; i < n; ++i) acc[i] += static_cast<float>(x[i]);
}

void binary_f32(BinaryOp op, const float* a, float sa, const float* b, float sb, float* y,
                size_t n) {
  binary_impl(op, a, sa, b, sb, y, n);
}
void binary_f64(BinaryOp op, const double* a, double sa, const double* b, double sb, double* y,
                size_t n) {
  binary_impl(op, a, sa, b, sb, y, n);
}
bool binary_f16(BinaryOp op, const Half* a, float sa, const Half* b, float sb, Half* y, size_t n) {
  return binary_16bit_impl<AsFloat16>(op, a, sa, b, sb, y, n);
}
bool binary_bf16(BinaryOp op, const BFloat16* a, float sa, const BFloat16* b, float sb, BFloat16* y,
                 size_t n) {
  return binary_16bit_impl<AsBFloat16>(op, a, sa, b, sb, y, n);
}

}  // namespace HWY_NAMESPACE
}  // namespace kiln::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::simd {

HWY_EXPORT(binary_f32);
HWY_EXPORT(binary_f64);
HWY_EXPORT(binary_f16);
HWY_EXPORT(binary_bf16);
HWY_EXPORT(accumulate_f16);
HWY_EXPORT(masked_scale_f32);
HWY_EXPORT(masked_scale_f64);

void binary(BinaryOp op, const float* a, const float* b, float* y, int64_t n) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(binary_f32)(op, a, 0.0f, b, 0.0f, y, static_cast<size_t>(n));
}
void binary(BinaryOp op, const double* a, const double* b, double* y, int64_t n) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(binary_f64)(op, a, 0.0, b, 0.0, y, static_cast<size_t>(n));
}
void binary_scalar_rhs(BinaryOp op, const float* a, float b, float* y, int64_t n) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(binary_f32)(op, a, 0.0f, nullptr, b, y, static_cast<size_t>(n));
}
void binary_scalar_rhs(BinaryOp op, const double* a, double b, double* y, int64_t n) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(binary_f64)(op, a, 0.0, nullptr, b, y, static_cast<size_t>(n));
}
void binary_scalar_lhs(BinaryOp op, float a, const float* b, float* y, int64_t n) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(binary_f32)(op, nullptr, a, b, 0.0f, y, static_cast<size_t>(n));
}
void binary_scalar_lhs(BinaryOp op, double a, const double* b, double* y, int64_t n) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(binary_f64)(op, nullptr, a, b, 0.0, y, static_cast<size_t>(n));
}

bool binary(BinaryOp op, const Half* a, float sa, const Half* b, float sb, Half* y, int64_t n) {
  return n <= 0 || HWY_DYNAMIC_DISPATCH(binary_f16)(op, a, sa, b, sb, y, static_cast<size_t>(n));
}
bool binary(BinaryOp op, const BFloat16* a, float sa, const BFloat16* b, float sb, BFloat16* y,
            int64_t n) {
  return n <= 0 || HWY_DYNAMIC_DISPATCH(binary_bf16)(op, a, sa, b, sb, y, static_cast<size_t>(n));
}

void accumulate(const Half* x, float* acc, int64_t n) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(accumulate_f16)(x, acc, static_cast<size_t>(n));
}

// bool holds 0 or 1 in one byte.
void masked_scale(const float* x, const bool* keep, float scale, float* y, int64_t n) {
  if (n > 0) {
    HWY_DYNAMIC_DISPATCH(masked_scale_f32)
    (x, reinterpret_cast<const uint8_t*>(keep), scale, y, static_cast<size_t>(n));
  }
}
void masked_scale(const double* x, const bool* keep, double scale, double* y, int64_t n) {
  if (n > 0) {
    HWY_DYNAMIC_DISPATCH(masked_scale_f64)
    (x, reinterpret_cast<const uint8_t*>(keep), scale, y, static_cast<size_t>(n));
  }
}

}  // namespace kiln::simd
#endif  // HWY_ONCE
