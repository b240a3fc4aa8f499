// Vector math for the SIMD kernels (Highway "-inl" header, included once per target).
//
// Wraps hwy/contrib/math with the IEEE special cases it leaves out (nan, +-inf, out-of-range
// arguments), and adds what it lacks or what is too slow there: a float32 exp with a short
// dependency chain, float32 erf / erfc / gelu_erf, a float64 erfinv approximation, and the
// activation formulas.
// Accuracy bounds are listed per op in unary_kernels.cc.

#if defined(KILN_OPS_SIMD_VEC_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KILN_OPS_SIMD_VEC_MATH_INL_H_
#undef KILN_OPS_SIMD_VEC_MATH_INL_H_
#else
#define KILN_OPS_SIMD_VEC_MATH_INL_H_
#endif

#include <cmath>
#include <cstdint>
#include <limits>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "ops/normal_quantile.h"
#include "ops/simd/simd_loops-inl.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class D, typename T = hn::TFromD<D>>
HWY_INLINE hn::Vec<D> inf(D d) {
  return hn::Set(d, std::numeric_limits<T>::infinity());
}

template <class D, typename T = hn::TFromD<D>>
HWY_INLINE hn::Vec<D> quiet_nan(D d) {
  return hn::Set(d, std::numeric_limits<T>::quiet_NaN());
}

/// r with the lanes where x is nan replaced by x (nan in, nan out).
template <class V>
HWY_INLINE V keep_nan(V x, V r) {
  return hn::IfThenElse(hn::IsNaN(x), x, r);
}

/// r with the lanes where x is +-0 replaced by x: for odd functions (sin, tan, expm1 near 0),
/// whose hwy kernels give +0 at -0 where IEEE, NumPy and PyTorch keep the sign.
template <class D, class V>
HWY_INLINE V keep_signed_zero(D d, V x, V r) {
  return hn::IfThenElse(hn::Eq(x, hn::Zero(d)), x, r);
}

/// numpy.maximum: nan if either operand is nan (hwy's Max, like maxps, would drop one).
template <class V>
HWY_INLINE V maximum(V a, V b) {
  return hn::IfThenElse(hn::Or(hn::IsNaN(a), hn::IsNaN(b)), hn::Add(a, b), hn::Max(a, b));
}

template <class V>
HWY_INLINE V minimum(V a, V b) {
  return hn::IfThenElse(hn::Or(hn::IsNaN(a), hn::IsNaN(b)), hn::Add(a, b), hn::Min(a, b));
}

/// v, which the compiler may no longer fuse with the operation that reads it. GCC contracts a
/// multiply followed by an add into one fused multiply-add (C++ compiles with -ffp-contract=fast),
/// which rounds once where two kernels, one op each, round twice. An empty asm that claims to
/// change the value stops that: on the register that holds it, or in memory for HWY_EMU128,
/// whose vectors are arrays. (x86 only, the architecture Kiln compiles SIMD kernels for; elsewhere
/// the compiler may still contract.)
template <class V>
HWY_INLINE V rounded(V v) {
#if HWY_ARCH_X86 && defined(__GNUC__)
#if HWY_TARGET == HWY_EMU128
  asm("" : "+m"(v));
#else
  asm("" : "+v"(v.raw));
#endif
#endif
  return v;
}

/// v after `steps` (ScalarSteps in float_kernels.h): each step the IEEE operations the binary
/// kernels run for it, so the values are theirs.
template <class D, typename T = hn::TFromD<D>>
HWY_INLINE hn::Vec<D> apply_steps(D d, const ScalarSteps<T>& steps, hn::Vec<D> v) {
  using Kind = typename ScalarSteps<T>::Kind;
  for (int k = 0; k < steps.size(); ++k) {
    const typename ScalarSteps<T>::Step& s = steps[k];
    const hn::Vec<D> c = hn::Set(d, s.offset);
    if (HWY_LIKELY(s.kind == Kind::kAffine)) {
      v = hn::Add(rounded(hn::Mul(v, hn::Set(d, s.scale))), c);
      continue;
    }
    const hn::Vec<D> lhs = s.scalar_first ? c : v;
    const hn::Vec<D> rhs = s.scalar_first ? v : c;
    switch (s.kind) {
      case Kind::kDivide:
        v = hn::Div(lhs, rhs);
        break;
      case Kind::kMaximum:
        v = maximum(lhs, rhs);
        break;
      case Kind::kMinimum:
        v = minimum(lhs, rhs);
        break;
      case Kind::kAffine:
        break;
    }
  }
  return v;
}

// Note [dependency chains]
// The transcendental kernels are limited by the length of each vector's chain of dependent
// operations more than by their number: once a chain is longer than the out-of-order window can
// cover, vectors stop overlapping (measured on the benchmark machine: 20 dependent FMAs per vector
// take 3x as long as two independent chains of 10; bench/RESULTS.md, "gelu"). So the float32 exp
// and erfc below evaluate their polynomials Estrin-style (depth log2(degree) instead of degree) and
// keep independent parts in separate chains that meet at the end.

/// exp(r) for |r| <= ln(2) / 2 (and a little beyond): 1 + (r + r^2 (c2 + c3 r) + r^4 (c4 + ...)),
/// Estrin-style (Note [dependency chains]), with the 1 added last so it is rounded once.
template <class D, class V>
HWY_INLINE V exp_poly_f32(D d, V r) {
  const V r2 = hn::Mul(r, r);
  const V r4 = hn::Mul(r2, r2);
  const V p23 = hn::MulAdd(hn::Set(d, 0.166664198f), r, hn::Set(d, 0.499999911f));
  const V p45 = hn::MulAdd(hn::Set(d, 0.00837481581f), r, hn::Set(d, 0.0416682251f));
  const V p46 = hn::MulAdd(hn::Set(d, 0.00138368458f), r2, p45);
  return hn::Add(hn::MulAdd(p46, r4, hn::MulAdd(p23, r2, r)), hn::Set(d, 1.0f));
}

// Note [float32 exp]
// exp(x) = 2^q exp(r), q = round(x / ln 2), r = x - q ln 2 with ln 2 in two parts (Cody-Waite, the
// constants of hwy's Exp), and exp(r) a degree-6 polynomial with relative error 1.7e-8 on
// |r| <= ln(2) / 2 (scripts/fit_erfc.py). q is rounded by adding 1.5 * 2^23 (the low mantissa bits
// of the sum are then q), and 2^q is applied by adding q << 23 to the bits of exp(r): a few integer
// operations, where hwy's Exp converts to integer and back and multiplies twice. That shortcut
// needs a normal result, so kAnyRange = false requires -86.5 <= x <= 88; kAnyRange = true clamps x
// to [-104, 88.8] (exp rounds to 0 below, to inf above) and scales by 2^q in two multiplications,
// which also rounds subnormal results correctly. A lane below -104 (-inf, a -1e9 mask) is
// computed as exp(0) and then zeroed: scaled down to 0, it would cost a microcode assist per
// underflowing multiplication (softmax of rows masked by -inf ran at a fifth of its speed).
// nan is the caller's (exp_full: keep_nan).
// An argument given as hi + lo (lo much smaller) is reduced as (hi - q ln 2) + lo, so lo is not
// lost to the rounding of hi + lo: erfc uses this for -a^2.
constexpr float kExpFastLo = -86.5f;
constexpr float kExpFastHi = 88.0f;

/// exp(hi + lo_scale * lo) (kWithLo) or exp(hi); see Note [float32 exp].
template <bool kAnyRange, bool kWithLo, class D, class V>
HWY_INLINE V exp_f32_impl(D d, V hi, V lo, float lo_scale) {
  const hn::RebindToSigned<D> di;
  [[maybe_unused]] hn::Mask<D> underflows;
  if constexpr (kAnyRange) {
    underflows = hn::Lt(hi, hn::Set(d, -104.0f));
    hi = hn::IfThenZeroElse(underflows, hn::Min(hi, hn::Set(d, 88.8f)));
    if constexpr (kWithLo) lo = hn::IfThenZeroElse(underflows, lo);
  }
  const V kMagic = hn::Set(d, 12582912.0f);  // 1.5 * 2^23
  const V m = hn::MulAdd(hi, hn::Set(d, 1.44269504088896341f), kMagic);
  const V q = hn::Sub(m, kMagic);
  V r = hn::MulAdd(q, hn::Set(d, -0.693145751953125f), hi);
  r = hn::MulAdd(q, hn::Set(d, -1.428606765330187045e-6f), r);
  if constexpr (kWithLo) r = hn::MulAdd(lo, hn::Set(d, lo_scale), r);
  const V p = exp_poly_f32(d, r);
  if constexpr (!kAnyRange) {
    // The low 9 bits of 0x4B400000 (kMagic) are zero, so the shift leaves q << 23.
    return hn::BitCast(d, hn::Add(hn::BitCast(di, p), hn::ShiftLeft<23>(hn::BitCast(di, m))));
  } else {
    const auto qi = hn::Sub(hn::BitCast(di, m), hn::BitCast(di, kMagic));
    const auto q1 = hn::ShiftRight<1>(qi);
    const auto bias = hn::Set(di, 127);
    const V s1 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(q1, bias)));
    const V s2 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(hn::Sub(qi, q1), bias)));
    return hn::IfThenZeroElse(underflows, hn::Mul(hn::Mul(p, s1), s2));
  }
}

template <bool kAnyRange, class D, class V>
HWY_INLINE V exp_f32(D d, V x) {
  return exp_f32_impl<kAnyRange, false>(d, x, x, 0.0f);
}

/// exp(hi + lo_scale * lo), with lo_scale * lo much smaller than hi (it is added after the
/// reduction of hi, so it is not lost to the rounding of a sum).
template <bool kAnyRange, class D, class V>
HWY_INLINE V exp_f32(D d, V hi, V lo, float lo_scale) {
  return exp_f32_impl<kAnyRange, true>(d, hi, lo, lo_scale);
}

/// exp(x) for every x: float32 per Note [float32 exp]. hwy's Exp (float64) is exact-to-1-ulp on
/// [-DBL_MAX, 706] but its quadrant conversion overflows above that; clamping to a bound whose
/// exp is already inf keeps the overflow result right. Below the range hwy returns 0 itself.
template <class D, class V>
HWY_INLINE V exp_full(D d, V x) {
  using T = hn::TFromD<D>;
  if constexpr (sizeof(T) == 4) {
    const auto fast = hn::And(hn::Ge(x, hn::Set(d, kExpFastLo)), hn::Le(x, hn::Set(d, kExpFastHi)));
    if (HWY_LIKELY(hn::AllTrue(d, fast))) return exp_f32<false>(d, x);
    return keep_nan(x, exp_f32<true>(d, x));
  } else {
    return keep_nan(x, hn::Exp(d, hn::Min(x, hn::Set(d, T(710.0)))));
  }
}

/// expm1(x) for every x (same clamping as exp_full; hwy returns -1 below its range).
template <class D, class V>
HWY_INLINE V expm1_full(D d, V x) {
  using T = hn::TFromD<D>;
  const V kHi = hn::Set(d, static_cast<T>(sizeof(T) == 4 ? 100.0 : 710.0));
  return keep_signed_zero(d, x, keep_nan(x, hn::Expm1(d, hn::Min(x, kHi))));
}

/// Fixes the lanes of a log-family result r outside the open domain (pole, +inf): at x == pole the
/// result is -inf, at +inf it is +inf, below the pole or at nan it is nan.
template <class D, class V>
HWY_INLINE V fix_log_domain(D d, V x, V pole, V r) {
  const auto ok = hn::And(hn::Gt(x, pole), hn::Lt(x, inf(d)));
  if (HWY_LIKELY(hn::AllTrue(d, ok))) return r;
  V special = hn::IfThenElse(hn::Eq(x, pole), hn::Neg(inf(d)), quiet_nan(d));
  special = hn::IfThenElse(hn::Eq(x, inf(d)), x, special);
  return hn::IfThenElse(ok, r, special);
}

template <class D, class V>
HWY_INLINE V log_full(D d, V x) {
  return fix_log_domain(d, x, hn::Zero(d), hn::Log(d, x));
}

template <class D, class V>
HWY_INLINE V log2_full(D d, V x) {
  return fix_log_domain(d, x, hn::Zero(d), hn::Log2(d, x));
}

template <class D, class V>
HWY_INLINE V log1p_full(D d, V x) {
  using T = hn::TFromD<D>;
  return fix_log_domain(d, x, hn::Set(d, T(-1)), hn::Log1p(d, x));
}

/// hwy's Sin/Cos reduce the argument with a 4-part pi that is exact up to |x| ~ 39000; lanes past
/// that (and inf / nan) take std::sin / std::cos. Random data never hits the slow path.
template <class D, class V>
HWY_INLINE bool trig_in_range(D d, V x) {
  using T = hn::TFromD<D>;
  return hn::AllTrue(d, hn::Le(hn::Abs(x), hn::Set(d, T(39000))));
}

template <class D, class V>
HWY_INLINE V sin_full(D d, V x) {
  using T = hn::TFromD<D>;
  if (HWY_LIKELY(trig_in_range(d, x))) return keep_signed_zero(d, x, hn::Sin(d, x));
  return per_lane(d, x, [](T v) { return std::sin(v); });
}

template <class D, class V>
HWY_INLINE V cos_full(D d, V x) {
  using T = hn::TFromD<D>;
  if (HWY_LIKELY(trig_in_range(d, x))) return hn::Cos(d, x);
  return per_lane(d, x, [](T v) { return std::cos(v); });
}

/// tan = sin / cos. Float64 inputs only; float32 tan promotes to this (see unary_kernels.cc).
template <class D, class V>
HWY_INLINE V tan_full(D d, V x) {
  using T = hn::TFromD<D>;
  if (HWY_LIKELY(trig_in_range(d, x))) {
    return keep_signed_zero(d, x, hn::Div(hn::Sin(d, x), hn::Cos(d, x)));
  }
  return per_lane(d, x, [](T v) { return std::tan(v); });
}

template <class D, class V>
HWY_INLINE V tanh_full(D d, V x) {
  return keep_nan(x, hn::Tanh(d, x));
}

/// Numerator and denominator of sigmoid(t) = num / den, from e = exp(-|t|) <= 1: num = 1 and
/// den = 1 + e for t >= 0, num = e for t < 0. exp never overflows this way, so tiny results stay
/// accurate down to the subnormals instead of collapsing to 0 (1 / (1 + exp(-t)) loses them as
/// soon as exp(-t) overflows).
template <class D, class V>
HWY_INLINE void sigmoid_parts(D d, V t, V& num, V& den) {
  using T = hn::TFromD<D>;
  const V one = hn::Set(d, T(1));
  const V e = exp_full(d, hn::Neg(hn::Abs(t)));
  num = hn::IfThenElse(hn::Ge(t, hn::Zero(d)), one, e);
  den = hn::Add(one, e);
}

template <class D, class V>
HWY_INLINE V sigmoid(D d, V x) {
  V num, den;
  sigmoid_parts(d, x, num, den);
  return hn::Div(num, den);
}

/// x * sigmoid(x). silu(-inf) = -inf * 0 = nan, as in torch.
template <class D, class V>
HWY_INLINE V silu(D d, V x) {
  V num, den;
  sigmoid_parts(d, x, num, den);
  return hn::Div(hn::Mul(x, num), den);
}

/// sigmoid(t) and 1 - sigmoid(t), both from e = exp(-|t|) as sigmoid_parts takes it: the
/// complement's numerator is e for t >= 0 and 1 below, so 1 - s never cancels (1 - sigmoid(t)
/// would lose all of it for large t).
template <class D, class V>
HWY_INLINE void sigmoid_and_complement(D d, V t, V& s, V& complement) {
  using T = hn::TFromD<D>;
  const V one = hn::Set(d, T(1));
  const V e = exp_full(d, hn::Neg(hn::Abs(t)));
  const auto positive = hn::Ge(t, hn::Zero(d));
  const V den = hn::Add(one, e);
  s = hn::Div(hn::IfThenElse(positive, one, e), den);
  complement = hn::Div(hn::IfThenElse(positive, e, one), den);
}

/// d silu / dx = s (1 + x (1 - s)) with s = sigmoid(x); 1 at x = +inf and 0 at -inf, where
/// x (1 - s) is inf * 0.
template <class D, class V>
HWY_INLINE V silu_grad(D d, V x) {
  using T = hn::TFromD<D>;
  V s, rest;
  sigmoid_and_complement(d, x, s, rest);
  const V x_rest = hn::IfThenZeroElse(hn::IsInf(x), hn::Mul(x, rest));
  return hn::Mul(s, hn::Add(hn::Set(d, T(1)), x_rest));
}

/// 0.5 * x * (1 + tanh(u)) evaluated as x * sigmoid(2u): the same function, without the
/// cancellation in 1 + tanh(u) for negative x. The rounding of 2u (|2u| * 2^-24 absolute) is
/// amplified into a relative error of the result for very negative x; that is the conditioning of
/// the formula, not of the kernel (about what moving x by one ulp does).
template <class D, class V>
HWY_INLINE V gelu_tanh(D d, V x) {
  using T = hn::TFromD<D>;
  // 2 * sqrt(2 / pi) and 2 * sqrt(2 / pi) * 0.044715.
  const V k1 = hn::Set(d, static_cast<T>(1.5957691216057307117597842397375));
  const V k3 = hn::Set(d, static_cast<T>(1.5957691216057307117597842397375 * 0.044715));
  const V two_u = hn::Mul(x, hn::MulAdd(hn::Mul(x, x), k3, k1));
  V num, den;
  sigmoid_parts(d, two_u, num, den);
  return hn::Div(hn::Mul(x, num), den);
}

/// d gelu_tanh / dx = s (1 + 2 x (1 - s) u') with s = sigmoid(2u) and u' = sqrt(2 / pi) (1 + 3 *
/// 0.044715 x^2): 0.5 (1 + tanh u) = s and 1 - tanh(u)^2 = 4 s (1 - s), so neither 1 + tanh u nor
/// 1 - tanh^2 u cancels. Past |x| = 20 the derivative is 1 (or 0) to within 1e-250, and x is
/// clamped there, which keeps x^2 finite and inf * 0 out.
template <class D, class V>
HWY_INLINE V gelu_tanh_grad(D d, V x) {
  using T = hn::TFromD<D>;
  constexpr double kSqrt2OverPi = 0.79788456080286535588;
  const V limit = hn::Set(d, T(20));
  const V one = hn::Set(d, T(1));
  const V xc = hn::Min(hn::Max(x, hn::Neg(limit)), limit);
  const V x2 = hn::Mul(xc, xc);
  const V two_u =
      hn::Mul(xc, hn::MulAdd(x2, hn::Set(d, static_cast<T>(2 * kSqrt2OverPi * 0.044715)),
                             hn::Set(d, static_cast<T>(2 * kSqrt2OverPi))));
  const V du = hn::MulAdd(x2, hn::Set(d, static_cast<T>(3 * kSqrt2OverPi * 0.044715)),
                          hn::Set(d, static_cast<T>(kSqrt2OverPi)));
  V s, rest;
  sigmoid_and_complement(d, two_u, s, rest);
  return keep_nan(x, hn::Mul(s, hn::MulAdd(hn::Mul(hn::Add(xc, xc), rest), du, one)));
}

// Note [float32 erfc]
// 0.5 * erfc(a) = t * P(t) * exp(-a^2) with t = 1 / (1 + a / 2), for 0 <= a <= 10.5 (beyond,
// erfc is below every float32 the callers can produce). P is a degree-8 polynomial (Estrin) with
// relative error 6.7e-8 (scripts/fit_erfc.py: weighted minimax of the exact erfc(a) exp(a^2) /
// (2t), its float32 coefficients rounded one at a time with the rest refitted). exp(-a^2) and t *
// P(t) are independent chains (Note [dependency chains]). -a^2 must reach exp unrounded, or its
// rounding (a^2 * 2^-24 absolute) becomes a relative error of erfc (4e-6 at a = 8): the caller
// passes -a^2 == hi + lo exactly (exact_square). erf and gelu_erf use it only where erfc itself is
// wanted, never as 1 - erf (no cancellation): gelu(x) = x * Phi(x) with Phi = 0.5 erfc(|x| / sqrt
// 2) for x < 0 and 1 - that for x >= 0, so gelu needs no other branch; erf takes 1 - 2 * (0.5 erfc)
// only for |x| >= 0.9277, below that a polynomial in x^2 (erf(0.9277) ~ 0.81: the subtraction loses
// nothing).
constexpr float kErfSplit = 0.9277f;

// Note [Exact vector fmod]
// With x = |a|, y = |b| and n the integer part of the exact x / y, q = trunc(x / y rounded) is n or
// n + 1 while x / y < 2^(digits - 1): rounding is monotone and n is representable, so the rounded
// quotient is not below n; it can round up to n + 1 only from just below. A fused multiply-add
// rounds r = x - q y once, and its exact value is representable either way: for q = n it is
// fmod(x, y) itself; for q = n + 1 it is fmod - y, a multiple of ulp(y) (x >= y) smaller than y in
// magnitude, or x - y with x >= y / 2 (Sterbenz) when x < y. So r is exact, r < 0 exactly when
// q = n + 1, and r + y is then fmod, exactly, since fmod is representable. A vector with any lane
// outside that range (a huge quotient, an infinite or nan operand, b = 0) takes std::fmod lane by
// lane, as every vector does on targets without FMA (SSE4 and the emulated ones).

/// std::fmod(a, b), exactly (the result has a's sign); see Note [Exact vector fmod].
template <class D, class V>
HWY_INLINE V fmod(D d, V a, V b) {
  using T = hn::TFromD<D>;
#if HWY_NATIVE_FMA
  constexpr T kExactQuotient = T(uint64_t{1} << (std::numeric_limits<T>::digits - 1));
  const V x = hn::Abs(a);
  const V y = hn::Abs(b);
  const V quotient = hn::Div(x, y);
  if (HWY_LIKELY(hn::AllTrue(
          d, hn::And(hn::Lt(quotient, hn::Set(d, kExactQuotient)), hn::Lt(y, inf(d)))))) {
    const V r = hn::NegMulAdd(hn::Trunc(quotient), y, x);
    return hn::CopySignToAbs(hn::IfThenElse(hn::Lt(r, hn::Zero(d)), hn::Add(r, y), r), a);
  }
#endif
  HWY_ALIGN T av[kMaxLanes<T>];
  HWY_ALIGN T bv[kMaxLanes<T>];
  hn::Store(a, d, av);
  hn::Store(b, d, bv);
  for (size_t i = 0; i < hn::Lanes(d); ++i) av[i] = std::fmod(av[i], bv[i]);
  return hn::Load(d, av);
}

/// Whether the nonzero lanes of `mod` differ in sign from b: where Python's // and % step from C's
/// truncating fmod to the floor.
template <class D, class V>
HWY_INLINE auto floor_adjust(D d, V mod, V b) {
  const V zero = hn::Zero(d);
  return hn::And(hn::Ne(mod, zero), hn::Xor(hn::Lt(b, zero), hn::Lt(mod, zero)));
}

/// Python's a // b for floats, step for step as floor_divide_value (NumPy's npy_divmod).
template <class D, class V>
HWY_INLINE V floor_divide(D d, V a, V b) {
  using T = hn::TFromD<D>;
  const V zero = hn::Zero(d);
  const V one = hn::Set(d, T(1));
  const V mod = fmod(d, a, b);
  V div = hn::Div(hn::Sub(a, mod), b);
  div = hn::IfThenElse(floor_adjust(d, mod, b), hn::Sub(div, one), div);
  V floordiv = hn::Floor(div);
  floordiv = hn::IfThenElse(hn::Gt(hn::Sub(div, floordiv), hn::Set(d, T(0.5))),
                            hn::Add(floordiv, one), floordiv);
  const V quotient = hn::Div(a, b);
  floordiv = hn::IfThenElse(hn::Eq(div, zero), hn::CopySign(zero, quotient), floordiv);
  return hn::IfThenElse(hn::Eq(b, zero), quotient, floordiv);
}

/// Python's a % b for floats (the sign of b), as remainder_value.
template <class D, class V>
HWY_INLINE V remainder(D d, V a, V b) {
  const V zero = hn::Zero(d);
  const V mod = fmod(d, a, b);
  const V r = hn::IfThenElse(floor_adjust(d, mod, b), hn::Add(mod, b), mod);
  return hn::IfThenElse(hn::Eq(mod, zero), hn::CopySign(zero, b), r);
}

/// x with the low 12 mantissa bits cleared, so that the square of the result is exact in float32.
template <class D, class V>
HWY_INLINE V truncate_mantissa12(D d, V x) {
  const hn::RebindToUnsigned<D> du;
  return hn::BitCast(d, hn::And(hn::BitCast(du, x), hn::Set(du, 0xFFFFF000u)));
}

/// Sets hi + lo == x * x, hi = x * x rounded (|lo| <= ulp(hi) / 2, rounded once at worst).
template <class D, class V>
HWY_INLINE void exact_square(D d, V x, V& hi, V& lo) {
#if HWY_NATIVE_FMA
  (void)d;
  hi = hn::Mul(x, x);
  lo = hn::MulSub(x, x, hi);  // exact: the FMA rounds x * x - hi once, and it is representable
#else
  // Dekker: xh has 12 significant bits, so xh * xh is exact; (x - xh)(x + xh) is the rest.
  const V xh = truncate_mantissa12(d, x);
  hi = hn::Mul(xh, xh);
  lo = hn::Mul(hn::Sub(x, xh), hn::Add(x, xh));
#endif
}

/// 0.5 * erfc(a) == factor * e for a = z * z_scale in [0, 10.5], given -a^2 == (z^2 + z2_lo) *
/// z2_scale (z^2 = z * z rounded, z2_lo its rounding error; see exact_square). factor =
/// t * P(t) / 2 (0.5 at a = 0, ~0.28 / a for large a) and e = exp(-a^2) come apart so that a
/// caller scaling the result can do so before the multiplication by e, which may be tiny.
/// kAnyRange as for exp_f32 (false needs a <= 9.3, where e is normal). See Note [float32 erfc].
template <bool kAnyRange, class D, class V>
HWY_INLINE void half_erfc_f32(D d, V z, float z_scale, float z2_scale, V& factor, V& e) {
  V z2, z2_lo;
  exact_square(d, z, z2, z2_lo);
  const V one = hn::Set(d, 1.0f);
  const V t = hn::Div(one, hn::MulAdd(z, hn::Set(d, 0.5f * z_scale), one));
  const V t2 = hn::Mul(t, t);
  const V t4 = hn::Mul(t2, t2);
  // c_lo + c_hi * t
  const auto pair = [&](float c_lo, float c_hi) {
    return hn::MulAdd(hn::Set(d, c_hi), t, hn::Set(d, c_lo));
  };
  const V p0_3 = hn::MulAdd(pair(0.121498324f, 0.101554893f), t2, pair(0.141042784f, 0.141195029f));
  const V p4_7 =
      hn::MulAdd(pair(-0.244230092f, 0.142591223f), t2, pair(-0.0138115147f, 0.139755949f));
  const V p0_7 = hn::MulAdd(p4_7, t4, p0_3);
  factor = hn::Mul(t, hn::MulAdd(hn::Set(d, -0.0295966212f), hn::Mul(t4, t4), p0_7));
  e = exp_f32<kAnyRange>(d, hn::Mul(z2, hn::Set(d, z2_scale)), z2_lo, z2_scale);
}

/// erf(x), float32 only.
template <class D, class V>
HWY_INLINE V erf_f32(D d, V x) {
  const V ax = hn::Abs(x);
  // (erf(x) - x) / x as a polynomial in x^2 (degree 6, rel. error 4.4e-10 on |x| < kErfSplit).
  const V s = hn::Mul(x, x);
  V r = hn::Set(d, 8.3315850706523648e-5f);
  r = hn::MulAdd(r, s, hn::Set(d, -0.00081335620215533487f));
  r = hn::MulAdd(r, s, hn::Set(d, 0.0052002236191990467f));
  r = hn::MulAdd(r, s, hn::Set(d, -0.026859070966058295f));
  r = hn::MulAdd(r, s, hn::Set(d, 0.11283689556321156f));
  r = hn::MulAdd(r, s, hn::Set(d, -0.37612633344759369f));
  r = hn::MulAdd(r, s, hn::Set(d, 0.12837916659600377f));
  const V small = hn::MulAdd(x, r, x);
  // erfc(4) ~ 1.5e-8 < 2^-25: erf rounds to +-1 from there on.
  V factor, e;
  half_erfc_f32<false>(d, hn::Min(ax, hn::Set(d, 4.0f)), 1.0f, -1.0f, factor, e);
  const V big = hn::MulAdd(hn::Mul(factor, hn::Set(d, -2.0f)), e, hn::Set(d, 1.0f));
  const V r_all = hn::IfThenElse(hn::Lt(ax, hn::Set(d, kErfSplit)), small, hn::CopySign(big, x));
  return keep_nan(x, r_all);
}

/// gelu_erf given ax = |x|: kAnyRange = false needs ax <= 12.5 (every exp result is normal), true
/// takes any x, clamping ax.
template <bool kAnyRange, class D, class V>
HWY_INLINE V gelu_erf_f32_lanes(D d, V x, V ax) {
  // Past |x| = 14.85 (a = 10.5) gelu rounds to x for x > 0 and to 0 for x < 0.
  if constexpr (kAnyRange) ax = hn::Min(ax, hn::Set(d, 14.8492424f));
  V factor, e;
  half_erfc_f32<kAnyRange>(d, ax, 0.70710678118654752440f, -0.5f, factor, e);
  // gelu = x Phi(x) is -tail for x < 0 and x - tail for x >= 0, tail = |x| (0.5 erfc(|x| / sqrt 2))
  // with |x| clamped (for x > 14.85, tail is far below half an ulp of x; +inf stays inf). (ax *
  // factor) * e in that order: |ax * factor| < 0.4 (it tends to 1 / sqrt(2 pi)), so when the
  // result is normal e is too, and no intermediate rounds as a subnormal.
  const V tail = hn::Mul(hn::Mul(ax, factor), e);
  return hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Neg(tail), hn::Sub(x, tail));
}

/// 0.5 * x * (1 + erf(x / sqrt(2))) = x * Phi(x), float32 only; see Note [float32 erfc].
template <class D, class V>
HWY_INLINE V gelu_erf_f32(D d, V x) {
  const V ax = hn::Abs(x);
  // |x| <= 12.5 (a <= 8.84) keeps exp(-a^2) normal; nan fails the test too.
  if (HWY_LIKELY(hn::AllTrue(d, hn::Le(ax, hn::Set(d, 12.5f))))) {
    return gelu_erf_f32_lanes<false>(d, x, ax);
  }
  // gelu(-inf) is nan, as 0.5 x (1 + erf(x / sqrt 2)) gives (-inf * 0) and as PyTorch returns.
  const V r = keep_nan(x, gelu_erf_f32_lanes<true>(d, x, ax));
  return hn::IfThenElse(hn::Eq(x, hn::Neg(inf(d))), quiet_nan(d), r);
}

/// d gelu / dx = Phi(x) + x phi(x) for the erf form, float32 only. One half_erfc gives both
/// terms: with a = |x| / sqrt 2, factor * e = 0.5 erfc(a) = Phi(-|x|) and e = exp(-x^2 / 2) =
/// sqrt(2 pi) phi(x). |x| is clamped at 14.85 (Phi is 0 or 1 in float32 beyond, and x phi(x) is
/// 0), so the infinities give 0 and 1; nan stays nan.
template <class D, class V>
HWY_INLINE V gelu_erf_grad_f32(D d, V x) {
  const V ax = hn::Min(hn::Abs(x), hn::Set(d, 14.8492424f));
  V factor, e;
  half_erfc_f32<true>(d, ax, 0.70710678118654752440f, -0.5f, factor, e);
  const V lower = hn::Mul(factor, e);  // Phi(-|x|)
  const V cdf = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), lower, hn::Sub(hn::Set(d, 1.0f), lower));
  const V x_pdf = hn::Mul(hn::CopySign(ax, x), hn::Mul(e, hn::Set(d, 0.39894228040143267794f)));
  return keep_nan(x, hn::Add(cdf, x_pdf));
}

/// c[0] z^(N-1) + ... + c[N-1] in every lane, by Horner's rule.
template <class D, class V, size_t N>
HWY_INLINE V horner(D d, V z, const double (&c)[N]) {
  V r = hn::Set(d, c[0]);
  for (size_t i = 1; i < N; ++i) r = hn::MulAdd(r, z, hn::Set(d, c[i]));
  return r;
}

/// erfinv of float32 values in float64 lanes, to 6 float64 ulp: Wichura's normal quantile, as
/// special_math.cc's erfinv_quantile (Note [erfinv]), which the float32 op rounds. The tails
/// (|x| above 0.85) are computed only when a lane needs them and blended in; a float32 below 1 is
/// at most 1 - 2^-24, so s = sqrt(-log((1 - |x|) / 2)) stays below 4.2 and the quantile's far
/// part (s > 5) never applies. +-inf at +-1, nan outside [-1, 1] and for nan; erfinv(-0) = -0.
template <class D, class V>
HWY_INLINE V erfinv_of_float(D d, V x) {
  namespace nq = normal_quantile;
  constexpr double kOneOverSqrtTwo = 0.70710678118654752440;
  const V a = hn::Abs(x);
  const V half = hn::Set(d, 0.5);
  const V q = hn::Mul(a, half);
  const V r = hn::NegMulAdd(q, q, hn::Set(d, nq::kCentralShift));
  // a rather than q keeps a subnormal's last bit.
  V result =
      hn::Mul(hn::Mul(a, hn::Div(horner(d, r, nq::kCentralNum), horner(d, r, nq::kCentralDen))),
              hn::Set(d, 0.5 * kOneOverSqrtTwo));
  const auto central = hn::Le(q, hn::Set(d, nq::kCentralLimit));
  if (HWY_UNLIKELY(!hn::AllTrue(d, central))) {
    // (1 - a) / 2 is exact; log(0) = -inf at a = 1 is set apart below, a > 1 and nan give nan.
    const V s = hn::Sqrt(hn::Neg(log_full(d, hn::Mul(hn::Sub(hn::Set(d, 1.0), a), half))));
    const V t = hn::Sub(s, hn::Set(d, nq::kNearShift));
    V tail = hn::Mul(hn::Div(horner(d, t, nq::kNearNum), horner(d, t, nq::kNearDen)),
                     hn::Set(d, kOneOverSqrtTwo));
    tail = hn::IfThenElse(hn::Eq(a, hn::Set(d, 1.0)), inf(d), tail);  // inf / inf there
    result = hn::IfThenElse(central, result, tail);
  }
  return hn::CopySign(result, x);
}

}  // namespace HWY_NAMESPACE
}  // namespace kiln::simd
HWY_AFTER_NAMESPACE();

#endif  // KILN_OPS_SIMD_VEC_MATH_INL_H_
