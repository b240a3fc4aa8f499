// Vector math for the SIMD kernels (Highway "-inl" header, included once per target).
//
// Wraps hwy/contrib/math with the IEEE special cases it leaves out (nan, +-inf, out-of-range
// arguments), and adds what it lacks: a float32 erf / 1 + erf pair and the activation formulas.
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

/// exp(x) for every x. hwy's Exp is exact-to-1-ulp on [-FLT_MAX, 104] (float) / [.., 706]
/// (double) but its quadrant conversion overflows above that; clamping to a bound whose exp is
/// already inf keeps the overflow result right. Below the range hwy returns 0 itself.
template <class D, class V>
HWY_INLINE V exp_full(D d, V x) {
  using T = hn::TFromD<D>;
  const V kHi = hn::Set(d, static_cast<T>(sizeof(T) == 4 ? 100.0 : 710.0));
  return keep_nan(x, hn::Exp(d, hn::Min(x, kHi)));
}

/// expm1(x) for every x (same clamping as exp_full; hwy returns -1 below its range).
template <class D, class V>
HWY_INLINE V expm1_full(D d, V x) {
  using T = hn::TFromD<D>;
  const V kHi = hn::Set(d, static_cast<T>(sizeof(T) == 4 ? 100.0 : 710.0));
  return keep_nan(x, hn::Expm1(d, hn::Min(x, kHi)));
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
  if (HWY_LIKELY(trig_in_range(d, x))) return hn::Sin(d, x);
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
  if (HWY_LIKELY(trig_in_range(d, x))) return hn::Div(hn::Sin(d, x), hn::Cos(d, x));
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

// Note [float32 erf]
// Two branches, both evaluated and blended (branch-free):
//   |z| <  kErfSplit: erf(z) = z + z * A(z^2), A of degree 6: rel. error 4.4e-10 before rounding.
//   |z| >= kErfSplit: erfc(|z|) = t * exp(-z^2 + C(t)), t = 1 / (1 + |z| / 2), C of degree 8
//                     (the Numerical Recipes "erfcc" form, refitted): rel. error 4.8e-9.
// Coefficients are weighted minimax fits (Lawson iteration, 40-digit mpmath) of
// (erf(z) - z) / z on [0, 0.9277] and of log(erfc(z) / t) + z^2 on t in [1 / 6.25, 1 / 1.46385].
// The erfc branch is what makes 1 + erf(z) accurate for negative z (gelu of negative x): it is
// erfc(|z|) there, never 1 - (something close to 1). z^2 must reach the exponent unrounded,
// otherwise its rounding error (z^2 * 2^-24) becomes a relative error of erfc: the caller passes
// z^2 = z2_hi + z2_lo, split exactly by Dekker truncation (no FMA needed, so SSE4 agrees with AVX).
// Measured in float32 against long double std::erf / std::erfc: erf <= 1.03e-7 relative
// (1 ulp), gelu_erf <= 4.7e-7 and the erfc branch <= 4.4e-7 relative over the whole normal range.
constexpr float kErfSplit = 0.9277f;
// erfc(10.5) ~ 7e-50: anything above rounds to 0 in float32 anyway.
constexpr float kErfcClamp = 10.5f;

/// x with the low 12 mantissa bits cleared, so that the square of the result is exact in float32.
template <class D, class V>
HWY_INLINE V truncate_mantissa12(D d, V x) {
  const hn::RebindToUnsigned<D> du;
  return hn::BitCast(d, hn::And(hn::BitCast(du, x), hn::Set(du, 0xFFFFF000u)));
}

/// Sets (hi, lo) with hi + lo == 0.5 * x * x (hi exact, lo rounded once, |lo| << |hi|).
template <class D, class V>
HWY_INLINE void half_square_split(D d, V x, V& hi, V& lo) {
  const V half = hn::Set(d, 0.5f);
  const V xh = truncate_mantissa12(d, x);
  hi = hn::Mul(hn::Mul(xh, xh), half);
  lo = hn::Mul(hn::Mul(hn::Sub(x, xh), hn::Add(x, xh)), half);
}

/// (erf(z) - z) / z as a polynomial in s = z^2, for |z| < kErfSplit.
template <class D, class V>
HWY_INLINE V erf_small_poly(D d, V s) {
  V r = hn::Set(d, 8.3315850706523648e-5f);
  r = hn::MulAdd(r, s, hn::Set(d, -0.00081335620215533487f));
  r = hn::MulAdd(r, s, hn::Set(d, 0.0052002236191990467f));
  r = hn::MulAdd(r, s, hn::Set(d, -0.026859070966058295f));
  r = hn::MulAdd(r, s, hn::Set(d, 0.11283689556321156f));
  r = hn::MulAdd(r, s, hn::Set(d, -0.37612633344759369f));
  return hn::MulAdd(r, s, hn::Set(d, 0.12837916659600377f));
}

/// erfc(az) for kErfSplit <= az <= kErfcClamp, given az^2 == z2_hi + z2_lo. See Note [float32 erf].
template <class D, class V>
HWY_INLINE V erfc_tail(D d, V az, V z2_hi, V z2_lo) {
  const V one = hn::Set(d, 1.0f);
  const V t = hn::Div(one, hn::MulAdd(az, hn::Set(d, 0.5f), one));
  V p = hn::Set(d, -0.22773235236900454f);
  p = hn::MulAdd(p, t, hn::Set(d, 0.60480193563556459f));
  p = hn::MulAdd(p, t, hn::Set(d, -0.39778106908400646f));
  p = hn::MulAdd(p, t, hn::Set(d, -0.10402146771801061f));
  p = hn::MulAdd(p, t, hn::Set(d, -0.056173345033670226f));
  p = hn::MulAdd(p, t, hn::Set(d, 0.067186021769968758f));
  p = hn::MulAdd(p, t, hn::Set(d, 0.37853443373871262f));
  p = hn::MulAdd(p, t, hn::Set(d, 0.99962303360280252f));
  p = hn::MulAdd(p, t, hn::Set(d, -1.2654960663142398f));
  p = hn::Sub(p, z2_lo);
  // Fast2Sum (|z2_hi| >= |p| on the whole branch): s + e == p - z2_hi exactly, and
  // exp(s + e) = exp(s) * (1 + e) to within e^2 ~ 1e-11.
  const V s = hn::Sub(p, z2_hi);
  const V e = hn::Add(hn::Sub(hn::Neg(z2_hi), s), p);
  const V r = hn::Mul(t, hn::Exp(d, s));
  return hn::MulAdd(r, e, r);
}

/// erf(x), float32 only.
template <class D, class V>
HWY_INLINE V erf_f32(D d, V x) {
  const V ax = hn::Abs(x);
  const V small = hn::MulAdd(x, erf_small_poly(d, hn::Mul(x, x)), x);
  const V az = hn::Min(ax, hn::Set(d, kErfcClamp));
  const V zh = truncate_mantissa12(d, az);
  const V z2_hi = hn::Mul(zh, zh);
  const V z2_lo = hn::Mul(hn::Sub(az, zh), hn::Add(az, zh));
  const V big = hn::Sub(hn::Set(d, 1.0f), erfc_tail(d, az, z2_hi, z2_lo));
  const V r = hn::IfThenElse(hn::Lt(ax, hn::Set(d, kErfSplit)), small, hn::CopySign(big, x));
  return keep_nan(x, r);
}

/// 0.5 * x * (1 + erf(x / sqrt(2))), float32 only. 1 + erf is erfc(-z), computed without
/// cancellation on both sides; z^2 = x^2 / 2 is split from x itself so the rounding of
/// x / sqrt(2) does not reach the exponent.
template <class D, class V>
HWY_INLINE V gelu_erf_f32(D d, V x) {
  const V one = hn::Set(d, 1.0f);
  const V z = hn::Mul(x, hn::Set(d, 0.70710678118654752440f));
  const V small = hn::Add(one, hn::MulAdd(z, erf_small_poly(d, hn::Mul(z, z)), z));
  const V ax = hn::Min(hn::Abs(x), hn::Set(d, kErfcClamp * 1.41421356237f));
  const V az = hn::Mul(ax, hn::Set(d, 0.70710678118654752440f));
  V z2_hi, z2_lo;
  half_square_split(d, ax, z2_hi, z2_lo);
  const V tail = erfc_tail(d, az, z2_hi, z2_lo);
  const V big = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), tail, hn::Sub(hn::Set(d, 2.0f), tail));
  const V one_plus_erf = hn::IfThenElse(hn::Lt(hn::Abs(z), hn::Set(d, kErfSplit)), small, big);
  return keep_nan(x, hn::Mul(hn::Mul(x, hn::Set(d, 0.5f)), one_plus_erf));
}

}  // namespace HWY_NAMESPACE
}  // namespace kiln::simd
HWY_AFTER_NAMESPACE();

#endif  // KILN_OPS_SIMD_VEC_MATH_INL_H_
