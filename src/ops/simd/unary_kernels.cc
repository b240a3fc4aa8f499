// Elementwise unary kernels: kiln::simd::unary (see float_kernels.h).
//
// Note [unary accuracy]
// Worst relative error measured on every compiled target (AVX3, AVX2, SSE4, SCALAR) against a
// long double / float64 reference, in units of machine epsilon (2^-23 = 1.19e-7 for float32,
// 2^-52 = 2.2e-16 for float64), over dense sweeps of the whole useful range and the special values
// of tests/cpp/ops/simd_float_kernels_test.cc:
//   exact (bitwise): neg abs sign relu square reciprocal sqrt rsqrt floor ceil round; rsqrt is
//                    1 / sqrt(x), two correctly rounded steps, exactly like the reference.
//              float32  float64
//   exp          1.0      1.0    float32: Note [float32 exp]; float64: hwy Exp
//   expm1        2.0      2.0
//   log          1.0      1.0
//   log1p        1.4      1.4
//   log2         1.1      1.0
//   sin / cos    1.5      1.4    relative, also next to the zeros (hwy's 4-part pi reduction);
//                                |x| > 39000, inf and nan take std::sin / std::cos lane by lane
//   tan          0.5      2.1    float32 is computed in float64 and rounded once
//   tanh         1.9      2.1
//   sigmoid      1.7      1.8
//   silu         2.1      2.0    for x >= -80 (see the subnormal note below)
//   erf          0.9      exact  float32: Note [float32 erfc]; float64: std::erf lane by lane
//   gelu_erf     4.1      exact  float32 also for negative x (no 1 + erf cancellation); float64:
//                                std::erfc lane by lane
//   gelu_tanh    18.0     14.3   for x >= -5 (2.1e-6 / 3.2e-15). Below, the rounding of 2u grows
//                                into ~1.5 * |2u| eps: the formula's own conditioning, equal to
//                                moving x by one ulp (the result is < 2.3e-7 there).
//   erfinv       0.5      1.5    float32: a float64 approximation good to 6 float64 ulp, rounded;
//                                float64: refined lane by lane (Note [erfinv] in special_math.cc)
// gelu_backward (g * gelu'(x), gelu_erf_grad_f32): float32 within 4e-7 of max(|result|, |g|)
// over [-20, 20] and at the infinities (tests/cpp/ops/simd_float_kernels_test.cc); float64 lane by
// lane with std::erfc and std::exp.
// So every op is within rtol 1e-6 (float32; 2e-6 for erf / gelu) and 1e-13 (float64). Subnormal
// results are accurate to an absolute 1e-42 (float32) / 1e-318 (float64), as x * exp(...) carries
// exp's half-denormal rounding times |x|. The float32 rows were measured by checking every 37th
// float32 of each range against long double (~6e7 points per op and target).
#include "ops/simd/highway_targets.h"  // First: selects the compiled targets.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/simd/unary_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must follow foreach_target.h.
#include <algorithm>

#include "hwy/highway.h"
#include "ops/simd/float_kernels.h"
#include "ops/simd/simd_loops-inl.h"
#include "ops/simd/vec_math-inl.h"
#include "ops/special_math.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// Round half to even. hwy's Round is one instruction on x86, but its HWY_SCALAR version rounds
/// 0.49999997f up (it adds 0.5); the 2^mantissa trick is exact in the default rounding mode.
template <class D, class V>
HWY_INLINE V round_half_even(D d, V v) {
#if HWY_TARGET == HWY_SCALAR
  using T = hn::TFromD<D>;
  const V big = hn::Set(d, static_cast<T>(sizeof(T) == 4 ? 8388608.0 : 4503599627370496.0));
  const V a = hn::Abs(v);
  const V r = hn::CopySign(hn::Sub(hn::Add(a, big), big), v);
  return hn::IfThenElse(hn::Lt(a, big), r, v);  // |v| >= 2^mantissa (or nan): already integral
#else
  (void)d;
  return hn::Round(v);
#endif
}

/// A float32 op computed in float64 lanes, f(dd, v), and rounded once (tan: sin / cos are accurate
/// to ~1e-15 there even near the poles; erfinv). Runs of 16-bit floats (CodecOf AsFloat16 /
/// AsBFloat16) round to float, then to their own type, as the float path they stand for does.
template <template <class> class CodecOf, typename S, class F>
HWY_INLINE void through_double(const S* x, S* y, size_t n, F f) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  using Codec = CodecOf<decltype(df)>;
  const size_t lanes = hn::Lanes(dd);
  HWY_ALIGN S buf[kMaxLanes<double>];
  for (size_t i = 0; i < n; i += lanes) {
    const size_t count = n - i < lanes ? n - i : lanes;
    const S* src = x + i;
    S* dst = y + i;
    if (HWY_UNLIKELY(count < lanes)) {
      for (size_t j = 0; j < lanes; ++j) buf[j] = j < count ? x[i + j] : Codec::from(0.0f);
      src = buf;
      dst = buf;
    }
    const auto r = f(dd, hn::PromoteTo(dd, Codec::load(df, src)));
    auto rounded = hn::DemoteTo(df, r);
#if HWY_TARGET == HWY_SCALAR
    // Its DemoteTo saturates infinities to the float range (erfinv(1) would be FLT_MAX).
    if (std::isinf(hn::GetLane(r))) rounded = hn::Set(df, static_cast<float>(hn::GetLane(r)));
#endif
    Codec::store(df, rounded, dst);
    if (HWY_UNLIKELY(count < lanes)) std::memcpy(y + i, buf, count * sizeof(S));
  }
}

/// Lane-by-lane std:: fallback for float64 erf / gelu_erf (see Note [unary accuracy]).
HWY_INLINE void erf_f64(UnaryOp op, const double* x, double* y, size_t n) {
  if (op == UnaryOp::kErf) {
    for (size_t i = 0; i < n; ++i) y[i] = std::erf(x[i]);
  } else {
    for (size_t i = 0; i < n; ++i) y[i] = 0.5 * x[i] * std::erfc(-x[i] * 0.70710678118654752440);
  }
}

/// unary() on runs stored as CodecOf says (AsIs: T itself; AsFloat16 / AsBFloat16 for T = float).
template <typename T, template <class> class CodecOf, typename S>
HWY_INLINE void unary_impl(UnaryOp op, ScalarSteps<T> steps, const S* x, S* y, size_t n,
                           Store store) {
  const hn::ScalableTag<T> d;
  using V = hn::Vec<decltype(d)>;
  using Codec = CodecOf<decltype(d)>;
  const Codec codec;
  // One switch per call; each case instantiates its own loop with the op inlined. `pad` fills the
  // tail lanes (see map_unary). The scalar steps (ScalarSteps) run in the op's loop for the ops
  // that take many instructions per vector (`map`), whose arithmetic then hides the loads; for
  // the rest they run in a pass of their own first (`apply_steps_first`): a short op gains little
  // from sharing its loop, and its loop is not instantiated twice.
  const auto apply_steps_first = [&] {
    if (steps.empty()) return;
    map_unary(
        d, codec, x, y, n, [steps](auto dv, V v) { return apply_steps(dv, steps, v); },
        Codec::from(T(0)));
    x = y;
    steps.clear();
  };
  const auto map = [&](auto f, T pad = T(0)) {
    if (steps.empty()) return map_unary(d, codec, x, y, n, f, Codec::from(pad), store);
    map_unary(
        d, codec, x, y, n, [f, steps](auto dv, V v) { return f(dv, apply_steps(dv, steps, v)); },
        Codec::from(pad), store);
  };
  const auto map_short = [&](auto f, T pad = T(0)) {
    apply_steps_first();
    map_unary(d, codec, x, y, n, f, Codec::from(pad), store);
  };
  // sin and cos take a lane-by-lane slow path for a whole vector when one lane needs it, so their
  // results depend on how lanes are grouped into vectors; streaming regroups the head of the run
  // (stream_span), so they always write through the cache and keep their bits. (Their steps run
  // first, too: a step could send a padded tail lane, and so its vector, down the slow path.)
  const auto map_grouped = [&](auto f) {
    apply_steps_first();
    map_unary(d, codec, x, y, n, f, Codec::from(T(0)));
  };
  switch (op) {
    case UnaryOp::kNeg:
      return map_short([](auto, V v) { return hn::Neg(v); });
    case UnaryOp::kAbs:
      return map_short([](auto, V v) { return hn::Abs(v); });
    case UnaryOp::kSign:
      return map_short([](auto dv, V v) {
        // +-1 with the sign of v; +0 for +-0 (numpy); nan stays nan.
        const V s = hn::IfThenZeroElse(hn::Eq(v, hn::Zero(dv)), hn::CopySign(hn::Set(dv, T(1)), v));
        return keep_nan(v, s);
      });
    case UnaryOp::kExp:
      return map([](auto dv, V v) { return exp_full(dv, v); });
    case UnaryOp::kExpm1:
      return map([](auto dv, V v) { return expm1_full(dv, v); });
    case UnaryOp::kLog:
      return map([](auto dv, V v) { return log_full(dv, v); }, T(1));
    case UnaryOp::kLog1p:
      return map([](auto dv, V v) { return log1p_full(dv, v); });
    case UnaryOp::kLog2:
      return map([](auto dv, V v) { return log2_full(dv, v); }, T(1));
    case UnaryOp::kSqrt:
      return map_short([](auto, V v) { return hn::Sqrt(v); });
    case UnaryOp::kRsqrt:
      return map_short([](auto dv, V v) { return hn::Div(hn::Set(dv, T(1)), hn::Sqrt(v)); });
    case UnaryOp::kReciprocal:
      return map_short([](auto dv, V v) { return hn::Div(hn::Set(dv, T(1)), v); });
    case UnaryOp::kSquare:
      return map_short([](auto, V v) { return hn::Mul(v, v); });
    case UnaryOp::kSin:
      return map_grouped([](auto dv, V v) { return sin_full(dv, v); });
    case UnaryOp::kCos:
      return map_grouped([](auto dv, V v) { return cos_full(dv, v); });
    case UnaryOp::kTan:
      if constexpr (sizeof(T) == 4) {
        apply_steps_first();
        return through_double<CodecOf>(x, y, n, [](auto dd, auto v) { return tan_full(dd, v); });
      } else {
        return map_grouped([](auto dv, V v) { return tan_full(dv, v); });
      }
    case UnaryOp::kTanh:
      return map([](auto dv, V v) { return tanh_full(dv, v); });
    case UnaryOp::kSigmoid:
      return map([](auto dv, V v) { return sigmoid(dv, v); });
    case UnaryOp::kRelu:
      // Le, not Lt: relu(-0) = +0; nan compares false and passes through.
      return map_short([](auto dv, V v) { return hn::IfThenZeroElse(hn::Le(v, hn::Zero(dv)), v); });
    case UnaryOp::kGeluErf:
    case UnaryOp::kErf:
      if constexpr (sizeof(T) == 4) {
        if (op == UnaryOp::kErf) {
          return map([](auto dv, V v) { return erf_f32(dv, v); });
        }
        return map([](auto dv, V v) { return gelu_erf_f32(dv, v); });
      } else {
        apply_steps_first();  // lane by lane
        return erf_f64(op, x, y, n);
      }
    case UnaryOp::kGeluTanh:
      return map([](auto dv, V v) { return gelu_tanh(dv, v); });
    case UnaryOp::kSilu:
      return map([](auto dv, V v) { return silu(dv, v); });
    // CopySign: HWY_SCALAR's Floor(-0) is +0 and its Ceil(+0) is -0; the result of floor / ceil
    // / trunc always has the sign of the input.
    case UnaryOp::kFloor:
      return map_short([](auto, V v) { return hn::CopySign(hn::Floor(v), v); });
    case UnaryOp::kCeil:
      return map_short([](auto, V v) { return hn::CopySign(hn::Ceil(v), v); });
    case UnaryOp::kTrunc:
      return map_short([](auto, V v) { return hn::CopySign(hn::Trunc(v), v); });
    case UnaryOp::kRound:
      return map_short([](auto dv, V v) { return round_half_even(dv, v); });
    case UnaryOp::kErfinv:
      apply_steps_first();
      if constexpr (sizeof(T) == 4) {
        return through_double<CodecOf>(x, y, n,
                                       [](auto dd, auto v) { return erfinv_of_float(dd, v); });
      } else {  // refined lane by lane (Note [erfinv])
        for (size_t i = 0; i < n; ++i) y[i] = elementwise::erfinv_value(x[i]);
        return;
      }
  }
}

void unary_f32(UnaryOp op, const ScalarSteps<float>& steps, const float* x, float* y, size_t n,
               Store store) {
  unary_impl<float, AsIs>(op, steps, x, y, n, store);
}
/// neg and abs of a 16-bit float run: the sign bit flipped or cleared, with no conversion (the
/// same values as the float path; a signaling NaN stays signaling, as in NumPy and PyTorch).
/// False for other ops.
HWY_INLINE bool sign_bit_unary(UnaryOp op, const void* x, void* y, size_t n) {
  if (op != UnaryOp::kNeg && op != UnaryOp::kAbs) return false;
  const hn::ScalableTag<uint16_t> d;
  using V = hn::Vec<decltype(d)>;
  const auto* in = static_cast<const uint16_t*>(x);
  auto* out = static_cast<uint16_t*>(y);
  if (op == UnaryOp::kNeg) {
    map_unary(d, in, out, n, [](auto dv, V v) { return hn::Xor(v, hn::Set(dv, kSignBit16)); });
  } else {
    map_unary(d, in, out, n, [](auto dv, V v) { return hn::AndNot(hn::Set(dv, kSignBit16), v); });
  }
  return true;
}

void unary_f16(UnaryOp op, const Half* x, Half* y, size_t n) {
  if (sign_bit_unary(op, x, y, n)) return;
  unary_impl<float, AsFloat16>(op, ScalarSteps<float>{}, x, y, n, Store::kCached);
}
void unary_bf16(UnaryOp op, const BFloat16* x, BFloat16* y, size_t n) {
  if (sign_bit_unary(op, x, y, n)) return;
  unary_impl<float, AsBFloat16>(op, ScalarSteps<float>{}, x, y, n, Store::kCached);
}
void gelu_backward_f32(const float* g, const float* x, float* y, size_t n) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  map_binary(d, g, x, y, n,
             [](auto dv, V gv, V xv) { return hn::Mul(gv, gelu_erf_grad_f32(dv, xv)); });
}
void gelu_tanh_backward_f32(const float* g, const float* x, float* y, size_t n) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  map_binary(d, g, x, y, n,
             [](auto dv, V gv, V xv) { return hn::Mul(gv, gelu_tanh_grad(dv, xv)); });
}
void unary_f64(UnaryOp op, const ScalarSteps<double>& steps, const double* x, double* y, size_t n,
               Store store) {
  unary_impl<double, AsIs>(op, steps, x, y, n, store);
}

}  // namespace HWY_NAMESPACE
}  // namespace kiln::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::simd {

HWY_EXPORT(unary_f32);
HWY_EXPORT(unary_f64);
HWY_EXPORT(unary_f16);
HWY_EXPORT(unary_bf16);
HWY_EXPORT(gelu_backward_f32);
HWY_EXPORT(gelu_tanh_backward_f32);

void unary(UnaryOp op, const float* x, float* y, int64_t n, Store store) {
  unary(op, ScalarSteps<float>{}, x, y, n, store);
}

void unary(UnaryOp op, const double* x, double* y, int64_t n, Store store) {
  unary(op, ScalarSteps<double>{}, x, y, n, store);
}

void unary(UnaryOp op, const ScalarSteps<float>& steps, const float* x, float* y, int64_t n,
           Store store) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(unary_f32)(op, steps, x, y, static_cast<size_t>(n), store);
}

void unary(UnaryOp op, const ScalarSteps<double>& steps, const double* x, double* y, int64_t n,
           Store store) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(unary_f64)(op, steps, x, y, static_cast<size_t>(n), store);
}

void unary(UnaryOp op, const Half* x, Half* y, int64_t n) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(unary_f16)(op, x, y, static_cast<size_t>(n));
}

void unary(UnaryOp op, const BFloat16* x, BFloat16* y, int64_t n) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(unary_bf16)(op, x, y, static_cast<size_t>(n));
}

void gelu_backward(const float* g, const float* x, float* y, int64_t n) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(gelu_backward_f32)(g, x, y, static_cast<size_t>(n));
}

void gelu_tanh_backward(const float* g, const float* x, float* y, int64_t n) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(gelu_tanh_backward_f32)(g, x, y, static_cast<size_t>(n));
}

void gelu_tanh_backward(const double* g, const double* x, double* y, int64_t n) {
  // Lane by lane with std::exp, as the erf form's float64 gradient; the formula of
  // gelu_tanh_grad (vec_math-inl.h).
  constexpr double kSqrt2OverPi = 0.79788456080286535588;
  for (int64_t i = 0; i < n; ++i) {
    const double xc = std::min(std::max(x[i], -20.0), 20.0);  // NaN stays NaN
    const double x2 = xc * xc;
    const double two_u = 2 * kSqrt2OverPi * xc * (1 + 0.044715 * x2);
    const double du = kSqrt2OverPi * (1 + 3 * 0.044715 * x2);
    const double e = std::exp(-std::fabs(two_u));
    const double s = (two_u >= 0 ? 1.0 : e) / (1 + e);
    const double rest = (two_u >= 0 ? e : 1.0) / (1 + e);
    y[i] = g[i] * (s * (1 + 2 * xc * rest * du));
  }
}

void gelu_backward(const double* g, const double* x, double* y, int64_t n) {
  // Lane by lane with std::erfc and std::exp, as float64 gelu_erf (Note [unary accuracy]). x phi(x)
  // is 0 at the infinities (not inf * 0).
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double x_pdf = std::isinf(v) ? 0.0 : v * std::exp(-0.5 * v * v) * 0.39894228040143267794;
    y[i] = g[i] * (0.5 * std::erfc(-v * 0.70710678118654752440) + x_pdf);
  }
}

}  // namespace kiln::simd
#endif  // HWY_ONCE
