// Tests for src/ops/simd/float_kernels.h: every kernel against a scalar std:: reference, on every
// SIMD target this CPU supports (kiln::simd::set_target_for_testing), for float32 and float64,
// over lengths that hit the empty, tail-only, exact-vector and vector-plus-tail paths, with
// special values (+-0, +-inf, nan, huge, tiny, subnormal) mixed in and in-place aliasing.
//
// Set KILN_SIMD_TEST_VERBOSE=1 to print the worst error of every op on every target, in ulp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/elementwise.h"
#include "ops/simd/float_kernels.h"
#include "ops/special_math.h"

namespace kiln::simd {
namespace {

using elementwise::floor_divide_value;
using elementwise::remainder_value;

constexpr int64_t kLengths[] = {0, 1, 3, 7, 15, 16, 17, 100, 1023, 4097};

/// Runs `body(target_name)` once per supported SIMD target and restores the default dispatch.
void for_each_target(const std::function<void(const std::string&)>& body) {
  for (const std::string& target : supported_targets()) {
    set_target_for_testing(target);
    SCOPED_TRACE("target " + target);
    body(target);
  }
  set_target_for_testing("");
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

/// a and b hold the same values bit for bit, except that any nan matches any nan (the payload a
/// nan carries depends on operand order, which the compiler may choose differently per loop).
template <typename T>
bool same_values(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return false;
  }
  return true;
}

bool verbose() { return std::getenv("KILN_SIMD_TEST_VERBOSE") != nullptr; }

template <typename T>
std::vector<T> special_values() {
  using L = std::numeric_limits<T>;
  return {T(0),      -T(0),   L::infinity(), -L::infinity(), L::quiet_NaN(), L::max(),
          -L::max(), T(1e30), T(-1e30),      T(1e-30),       T(-1e-30),      L::denorm_min(),
          -L::min(), T(1),    T(-1),         T(0.5),         T(-2.5),        T(3.5)};
}

/// n values drawn from `draw`, with special values scattered in for n >= 7 (the first special
/// lands in the tail of the longest lengths too).
template <typename T>
std::vector<T> make_input(int64_t n, std::mt19937& rng, const std::function<double()>& draw) {
  std::vector<T> v(static_cast<size_t>(n));
  for (T& e : v) e = static_cast<T>(draw());
  if (n >= 7) {
    const std::vector<T> specials = special_values<T>();
    for (size_t k = 0; k < specials.size(); ++k) v[(k * 7919 + n - 1) % v.size()] = specials[k];
  }
  (void)rng;
  return v;
}

struct Domain {
  double lo, hi;
  bool log_scale;  ///< sample |x| log-uniformly in [lo, hi] with a random sign
};

std::function<double()> sampler(std::mt19937& rng, Domain dom) {
  return [&rng, dom]() {
    if (!dom.log_scale) return std::uniform_real_distribution<double>(dom.lo, dom.hi)(rng);
    const double e =
        std::uniform_real_distribution<double>(std::log(dom.lo), std::log(dom.hi))(rng);
    return (rng() & 1) ? std::exp(e) : -std::exp(e);
  };
}

/// Tolerance: |got - want| <= atol + rtol * |want|, or bitwise equality (modulo nan payloads) if
/// exact.
struct Tol {
  double rtol;
  double atol;
  bool exact;
};

template <typename T>
struct Checker {
  const char* what;
  Tol tol;
  double worst_ulp = 0.0;
  T worst_input = T(0);
  int failures = 0;

  /// `extra_rtol` widens the relative tolerance where the function itself is ill-conditioned.
  void check(T got, T want, T input, double extra_rtol = 0.0) {
    bool ok;
    if (std::isnan(want)) {
      ok = std::isnan(got);
    } else if (tol.exact || std::isinf(want)) {
      ok = got == want && std::signbit(got) == std::signbit(want);
    } else {
      const double err = std::fabs(static_cast<double>(got) - static_cast<double>(want));
      ok = err <= tol.atol + (tol.rtol + extra_rtol) * std::fabs(static_cast<double>(want));
      const double ulp = std::numeric_limits<T>::epsilon() *
                         std::max(std::fabs(static_cast<double>(want)),
                                  static_cast<double>(std::numeric_limits<T>::min()));
      if (std::isfinite(err) && err / ulp > worst_ulp) worst_ulp = err / ulp, worst_input = input;
    }
    if (!ok && ++failures <= 5) {
      ADD_FAILURE() << what << "(" << input << "): expected " << want << ", got " << got;
    }
  }
  void report(const std::string& target) const {
    if (verbose()) {
      std::printf("  %-6s %-12s %s worst %6.2f ulp at x = %.9g\n", target.c_str(), what,
                  sizeof(T) == 4 ? "float32" : "float64", worst_ulp,
                  static_cast<double>(worst_input));
    }
  }
};

// ------------------------------------------------------------------------------------------------
// Unary ops.

struct UnaryCase {
  UnaryOp op;
  const char* name;
  Domain domain;
  Tol f32;
  Tol f64;
};

constexpr Tol kExact{0, 0, true};
// atol only matters for subnormal results, where x * exp(...) carries exp's absolute rounding
// (half a denormal) times |x|.
constexpr Tol kF32{1e-6, 1e-42, false};
constexpr Tol kF32Erf{2e-6, 1e-42, false};
constexpr Tol kF64{1e-13, 1e-318, false};

const UnaryCase kUnaryCases[] = {
    {UnaryOp::kNeg, "neg", {1e-30, 1e30, true}, kExact, kExact},
    {UnaryOp::kAbs, "abs", {1e-30, 1e30, true}, kExact, kExact},
    {UnaryOp::kSign, "sign", {1e-30, 1e30, true}, kExact, kExact},
    {UnaryOp::kExp, "exp", {-105, 90, false}, kF32, kF64},
    {UnaryOp::kExpm1, "expm1", {-20, 20, false}, kF32, kF64},
    {UnaryOp::kLog, "log", {1e-38, 1e38, true}, kF32, kF64},
    {UnaryOp::kLog1p, "log1p", {-1, 20, false}, kF32, kF64},
    {UnaryOp::kLog2, "log2", {1e-38, 1e38, true}, kF32, kF64},
    {UnaryOp::kSqrt, "sqrt", {1e-38, 1e38, true}, kExact, kExact},
    {UnaryOp::kRsqrt, "rsqrt", {1e-38, 1e38, true}, kExact, kExact},
    {UnaryOp::kReciprocal, "reciprocal", {1e-30, 1e30, true}, kExact, kExact},
    {UnaryOp::kSquare, "square", {1e-20, 1e20, true}, kExact, kExact},
    {UnaryOp::kSin, "sin", {-100, 100, false}, kF32, kF64},
    {UnaryOp::kCos, "cos", {-100, 100, false}, kF32, kF64},
    {UnaryOp::kTan, "tan", {-10, 10, false}, kF32, kF64},
    {UnaryOp::kTanh, "tanh", {-12, 12, false}, kF32, kF64},
    {UnaryOp::kSigmoid, "sigmoid", {-30, 30, false}, kF32, kF64},
    {UnaryOp::kRelu, "relu", {-10, 10, false}, kExact, kExact},
    {UnaryOp::kGeluErf, "gelu_erf", {-14, 8, false}, kF32Erf, kF64},
    {UnaryOp::kGeluTanh, "gelu_tanh", {-14, 8, false}, kF32Erf, kF64},
    {UnaryOp::kSilu, "silu", {-30, 30, false}, kF32, kF64},
    {UnaryOp::kErf, "erf", {-5, 5, false}, kF32Erf, kF64},
    {UnaryOp::kFloor, "floor", {-1000, 1000, false}, kExact, kExact},
    {UnaryOp::kCeil, "ceil", {-1000, 1000, false}, kExact, kExact},
    {UnaryOp::kRound, "round", {-1000, 1000, false}, kExact, kExact},
    {UnaryOp::kTrunc, "trunc", {-1000, 1000, false}, kExact, kExact},
    // float32 against the refined float64 value rounded (the kernel's float64 runs are that).
    {UnaryOp::kErfinv, "erfinv", {-1, 1, false}, kF32, kF64},
};

/// The reference, in float64 (transcendental ops for float32 too, then rounded once) or in T
/// itself (ops that are one IEEE operation, which the kernels must reproduce exactly).
template <typename T>
T ref_unary(UnaryOp op, T x) {
  const double v = x;
  switch (op) {
    case UnaryOp::kNeg:
      return -x;
    case UnaryOp::kAbs:
      return std::fabs(x);
    case UnaryOp::kSign:
      return std::isnan(x) ? x : x > 0 ? T(1) : x < 0 ? T(-1) : T(0);
    case UnaryOp::kExp:
      return static_cast<T>(std::exp(v));
    case UnaryOp::kExpm1:
      return static_cast<T>(std::expm1(v));
    case UnaryOp::kLog:
      return static_cast<T>(std::log(v));
    case UnaryOp::kLog1p:
      return static_cast<T>(std::log1p(v));
    case UnaryOp::kLog2:
      return static_cast<T>(std::log2(v));
    case UnaryOp::kSqrt:
      return std::sqrt(x);
    case UnaryOp::kRsqrt:
      return T(1) / std::sqrt(x);
    case UnaryOp::kReciprocal:
      return T(1) / x;
    case UnaryOp::kSquare:
      return x * x;
    case UnaryOp::kSin:
      return static_cast<T>(std::sin(v));
    case UnaryOp::kCos:
      return static_cast<T>(std::cos(v));
    case UnaryOp::kTan:
      return static_cast<T>(std::tan(v));
    case UnaryOp::kTanh:
      return static_cast<T>(std::tanh(v));
    case UnaryOp::kSigmoid:
      return static_cast<T>(1.0 / (1.0 + std::exp(-v)));
    case UnaryOp::kRelu:
      return x <= 0 ? T(0) : x;
    case UnaryOp::kGeluErf:
      return static_cast<T>(0.5 * v * std::erfc(-v * M_SQRT1_2));
    case UnaryOp::kGeluTanh: {
      // 0.5 x (1 + tanh u) == x / (1 + exp(-2u)), written without cancellation, and in long
      // double because the rounding of u matters for very negative x (see gelu_tanh_rtol).
      const long double w = x;
      const long double u = std::sqrt(2.0L / M_PI) * (w + 0.044715L * w * w * w);
      return static_cast<T>(w / (1.0L + std::exp(-2.0L * u)));
    }
    case UnaryOp::kSilu:
      return static_cast<T>(v / (1.0 + std::exp(-v)));
    case UnaryOp::kErf:
      return static_cast<T>(std::erf(v));
    case UnaryOp::kFloor:
      return std::floor(x);
    case UnaryOp::kCeil:
      return std::ceil(x);
    case UnaryOp::kRound:
      return std::nearbyint(x);
    case UnaryOp::kTrunc:
      return std::trunc(x);
    case UnaryOp::kErfinv:
      return static_cast<T>(elementwise::erfinv_value(v));
  }
  return x;
}

/// gelu_tanh(x) = x * sigmoid(2u(x)) has relative condition number ~|2u| for very negative x: the
/// kernel's rounding of 2u (a few ulp of |2u|) is the same as perturbing x by an ulp.
template <typename T>
double extra_rtol(UnaryOp op, T x) {
  if (op != UnaryOp::kGeluTanh || !std::isfinite(x)) return 0.0;
  const double v = x;
  const double two_u = 1.5957691216057308 * (v + 0.044715 * v * v * v);
  return std::isfinite(two_u) ? 3 * std::numeric_limits<T>::epsilon() * std::fabs(two_u) : 0.0;
}

template <typename T>
void check_unary(const UnaryCase& c, const std::string& target) {
  Checker<T> checker{c.name, sizeof(T) == 4 ? c.f32 : c.f64};
  std::mt19937 rng(1234);
  for (int64_t n : kLengths) {
    std::vector<T> x = make_input<T>(n, rng, sampler(rng, c.domain));
    if (c.op == UnaryOp::kRound && n > 0) x[0] = T(2.5), x[n / 2] = T(-0.5);  // ties to even
    std::vector<T> y(x.size(), T(-7));
    unary(c.op, x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      checker.check(y[i], ref_unary(c.op, x[i]), x[i], extra_rtol(c.op, x[i]));
    }
    // In place gives the same bits.
    std::vector<T> z = x;
    unary(c.op, z.data(), z.data(), n);
    EXPECT_TRUE(same_bits(z, y)) << c.name << " in place";
  }
  checker.report(target);
}

TEST(SimdFloatKernels, UnaryMatchesStdReference_WhenFloat32) {
  for_each_target([](const std::string& t) {
    for (const UnaryCase& c : kUnaryCases) check_unary<float>(c, t);
  });
}

TEST(SimdFloatKernels, UnaryMatchesStdReference_WhenFloat64) {
  for_each_target([](const std::string& t) {
    for (const UnaryCase& c : kUnaryCases) {
      UnaryCase wide = c;
      if (c.op == UnaryOp::kExp) wide.domain = {-750, 720, false};
      check_unary<double>(wide, t);
    }
  });
}

TEST(SimdFloatKernels, UnaryIsAccurate_WhenArgumentsAreExtreme) {
  // Paths random data rarely takes: sin / cos / tan past hwy's reduction range, erf and gelu
  // tails, exp / log near overflow, underflow and subnormals, and the edges of the float32 exp
  // and gelu_erf fast paths (Note [float32 exp], gelu_erf_f32).
  const std::vector<float> xs = {
      39001.f, -1e6f,    3e38f,   1e-40f,     88.72f,     88.73f, -87.5f, -103.9f, -3.9f,  -9.9f,
      0.9277f, -0.9276f, 1e-7f,   1.0000001f, 0.9999999f, 1e-45f, -13.5f, 6.0f,    -86.5f, -86.51f,
      88.0f,   88.01f,   -104.0f, -12.5f,     -12.51f,    4.0f,   -4.0f,  -14.85f, -14.9f, 12.5f,
      // Below exp's underflow to 0, beside lanes that are not (the lanes zeroed apart).
      -104.01f, -1e9f,   -std::numeric_limits<float>::infinity(), -100.0f, -95.0f, 1.0f};
  const std::vector<double> xd = {1e6, -3e300, 709.7, 709.8, -744.0, -708.5, 1e-310, -37.0, 26.0};
  for_each_target([&](const std::string& t) {
    for (const UnaryCase& c : kUnaryCases) {
      Checker<float> cf{c.name, c.f32};
      std::vector<float> yf(xs.size());
      unary(c.op, xs.data(), yf.data(), static_cast<int64_t>(xs.size()));
      for (size_t i = 0; i < xs.size(); ++i) {
        cf.check(yf[i], ref_unary(c.op, xs[i]), xs[i], extra_rtol(c.op, xs[i]));
      }
      Checker<double> cd{c.name, c.f64};
      std::vector<double> yd(xd.size());
      unary(c.op, xd.data(), yd.data(), static_cast<int64_t>(xd.size()));
      for (size_t i = 0; i < xd.size(); ++i) {
        cd.check(yd[i], ref_unary(c.op, xd[i]), xd[i], extra_rtol(c.op, xd[i]));
      }
    }
    (void)t;
  });
}

// A gelu gradient kernel, y = g * gelu'(x) (kernel(g, x, y, n) for float32 and float64), against
// reference(x, g) in long double: over every tail length, x uniform in [-range, range] with
// `specials` first, in place into g; the error is bounded relative to max(|want|, |g|) (gelu'
// crosses 0 and underflows); nan gives nan.
template <typename Kernel, typename Reference>
void check_gelu_gradient(Kernel kernel, Reference reference, double range,
                         const std::vector<double>& specials, long double rtol_f32) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> wide(-range, range), grads(-3.0, 3.0);
  for_each_target([&](const std::string&) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{17}, int64_t{4097}}) {
      std::vector<float> xf(n), gf(n);
      std::vector<double> xd(n), gd(n);
      for (int64_t i = 0; i < n; ++i) {
        xd[i] = wide(rng);
        gd[i] = grads(rng);
      }
      for (size_t i = 0; i < static_cast<size_t>(n) && i < specials.size(); ++i) {
        xd[i] = specials[i];
      }
      for (int64_t i = 0; i < n; ++i) {
        xf[i] = static_cast<float>(xd[i]);
        gf[i] = static_cast<float>(gd[i]);
      }
      std::vector<float> yf = gf;  // in place: y aliases g
      kernel(yf.data(), xf.data(), yf.data(), n);
      std::vector<double> yd(n);
      kernel(gd.data(), xd.data(), yd.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const long double want_f = reference(xf[i], gf[i]);
        EXPECT_LE(
            std::fabs(yf[i] - want_f),
            rtol_f32 * std::max(std::fabs(want_f), std::fabs(static_cast<long double>(gf[i]))))
            << "float32 x = " << xf[i] << " g = " << gf[i] << " got " << yf[i];
        const long double want_d = reference(xd[i], gd[i]);
        EXPECT_LE(std::fabs(yd[i] - want_d),
                  1e-14L * std::max(std::fabs(want_d), std::fabs(static_cast<long double>(gd[i]))))
            << "float64 x = " << xd[i] << " got " << yd[i];
      }
    }
    const float nan = std::numeric_limits<float>::quiet_NaN();
    float y = 0;
    const float one = 1;
    kernel(&one, &nan, &y, 1);
    EXPECT_TRUE(std::isnan(y));
  });
}

const double kInf = std::numeric_limits<double>::infinity();

// gelu_backward: g * (Phi(x) + x phi(x)), over the whole range where it is neither 0 nor g (and
// past it) and the infinities.
TEST(SimdFloatKernels, GeluBackwardMatchesReference_WhenAnyLengthAndInPlace) {
  check_gelu_gradient(
      [](const auto* g, const auto* x, auto* y, int64_t n) { gelu_backward(g, x, y, n); },
      [](long double x, long double g) {
        if (std::isinf(x)) return x > 0 ? g : 0.0L;
        return g * (0.5L * std::erfc(-x / std::sqrt(2.0L)) +
                    x * std::exp(-0.5L * x * x) / std::sqrt(2.0L * 3.14159265358979323846L));
      },
      20.0, {0.0, -0.0, 1e-30, -0.7518, 14.8, -14.9, 40.0, kInf, -kInf}, 4e-7L);
}

// gelu_tanh_backward: g * d/dx [0.5 x (1 + tanh(u))], over [-12, 12], around the clamp at 20 and
// past it, and the infinities.
TEST(SimdFloatKernels, GeluTanhBackwardMatchesReference_WhenAnyLengthAndInPlace) {
  check_gelu_gradient(
      [](const auto* g, const auto* x, auto* y, int64_t n) { gelu_tanh_backward(g, x, y, n); },
      [](long double x, long double g) {
        if (std::isinf(x)) return x > 0 ? g : 0.0L;
        const long double k = std::sqrt(2.0L / 3.14159265358979323846L);
        const long double t = std::tanh(k * (x + 0.044715L * x * x * x));
        return g * (0.5L * (1 + t) + 0.5L * x * (1 - t * t) * k * (1 + 3 * 0.044715L * x * x));
      },
      12.0, {0.0, -0.0, 1e-30, -0.7518, 19.5, -19.5, 40.0, -1e30, kInf, -kInf}, 1e-6L);
}

TEST(SimdFloatKernels, UnaryIsAccurate_WhenSweptOverEveryBinade) {
  // Every 40503rd float32 bit pattern, in order (so whole vectors fall on either side of each fast
  // path's edges): ~106,000 inputs covering every binade of both signs, infinities and nans.
  std::vector<float> xs;
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFu; bits += 40503) {
    float x;
    const auto b = static_cast<uint32_t>(bits);
    std::memcpy(&x, &b, sizeof(x));
    xs.push_back(x);
  }
  const UnaryOp swept[] = {UnaryOp::kExp,     UnaryOp::kErf,  UnaryOp::kGeluErf, UnaryOp::kGeluTanh,
                           UnaryOp::kSigmoid, UnaryOp::kSilu, UnaryOp::kErfinv};
  for_each_target([&](const std::string& t) {
    for (const UnaryCase& c : kUnaryCases) {
      if (std::find(std::begin(swept), std::end(swept), c.op) == std::end(swept)) continue;
      Checker<float> checker{c.name, c.f32};
      std::vector<float> y(xs.size());
      unary(c.op, xs.data(), y.data(), static_cast<int64_t>(xs.size()));
      for (size_t i = 0; i < xs.size(); ++i) {
        checker.check(y[i], ref_unary(c.op, xs[i]), xs[i], extra_rtol(c.op, xs[i]));
      }
      checker.report(t + " sweep");
    }
  });
}

// ------------------------------------------------------------------------------------------------
// Binary ops.

struct BinaryCase {
  BinaryOp op;
  const char* name;
};

const BinaryCase kBinaryCases[] = {{BinaryOp::kAdd, "add"},
                                   {BinaryOp::kSub, "sub"},
                                   {BinaryOp::kMul, "mul"},
                                   {BinaryOp::kDiv, "div"},
                                   {BinaryOp::kMaximum, "maximum"},
                                   {BinaryOp::kMinimum, "minimum"},
                                   {BinaryOp::kPow, "pow"},
                                   {BinaryOp::kFloorDivide, "floor_divide"},
                                   {BinaryOp::kRemainder, "remainder"},
                                   {BinaryOp::kTruncDivide, "trunc_divide"},
                                   {BinaryOp::kSigmoidBackward, "sigmoid_backward"},
                                   {BinaryOp::kTanhBackward, "tanh_backward"},
                                   {BinaryOp::kReluBackward, "relu_backward"}};
// kSiluBackward has its own test (below): its error is relative to g, not to the result.

template <typename T>
T ref_binary(BinaryOp op, T a, T b) {
  switch (op) {
    case BinaryOp::kAdd:
      return a + b;
    case BinaryOp::kSub:
      return a - b;
    case BinaryOp::kMul:
      return a * b;
    case BinaryOp::kDiv:
      return a / b;
    case BinaryOp::kMaximum:
      return std::isnan(a) || std::isnan(b) ? std::numeric_limits<T>::quiet_NaN() : std::max(a, b);
    case BinaryOp::kMinimum:
      return std::isnan(a) || std::isnan(b) ? std::numeric_limits<T>::quiet_NaN() : std::min(a, b);
    case BinaryOp::kPow:
      return std::pow(a, b);
    case BinaryOp::kFloorDivide:  // the scalar kernels, from std::fmod (NumPy's npy_divmod)
      return floor_divide_value(a, b);
    case BinaryOp::kRemainder:
      return remainder_value(a, b);
    case BinaryOp::kTruncDivide:
      return std::trunc(a / b);
    case BinaryOp::kSigmoidBackward:  // each step rounded, as the composed ops
      return a * (b * (T(1) - b));
    case BinaryOp::kTanhBackward:
      return a * ((T(1) - b) * (T(1) + b));
    case BinaryOp::kReluBackward:
      return b <= T(0) ? T(0) : a;   // a NaN x passes g, as PyTorch
    case BinaryOp::kSiluBackward: {  // silu'(x) in long double rounded to T, times g
      if (std::isinf(b)) return b > 0 ? a : a * T(0);
      const long double x = b, s = 1 / (1 + std::exp(-x));
      return a * static_cast<T>(s * (1 + x * (1 - s)));
    }
  }
  return a;
}

template <typename T>
Tol binary_tol(BinaryOp op) {
  // max / min of +0 and -0 may return either zero, as numpy's does.
  if (op == BinaryOp::kMaximum || op == BinaryOp::kMinimum) return {0, 0, false};
  if (op == BinaryOp::kPow) return {2 * std::numeric_limits<T>::epsilon(), 0, false};
  return kExact;
}

template <typename T>
void check_binary(const BinaryCase& c, const std::string& target) {
  Checker<T> checker{c.name, binary_tol<T>(c.op)};
  std::mt19937 rng(99);
  // floor_divide and remainder: quotients from tiny to past 2^52, so that both the vector fmod
  // and its std::fmod fallback run.
  const bool divides = c.op == BinaryOp::kFloorDivide || c.op == BinaryOp::kRemainder;
  const Domain dom = c.op == BinaryOp::kPow ? Domain{-6, 6, false}
                     : divides              ? Domain{1e-9, 1e9, true}
                                            : Domain{1e-20, 1e20, true};
  for (int64_t n : kLengths) {
    std::vector<T> a = make_input<T>(n, rng, sampler(rng, dom));
    std::vector<T> b = make_input<T>(n, rng, sampler(rng, dom));
    std::reverse(b.begin(), b.end());  // specials meet ordinary values
    if (c.op == BinaryOp::kPow) {
      for (int64_t i = 0; i < n; i += 3) b[i] = std::round(b[i]);  // integral exponents
    }
    std::vector<T> y(a.size());
    binary(c.op, a.data(), b.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) checker.check(y[i], ref_binary(c.op, a[i], b[i]), a[i]);
    // Aliasing: y == a, y == b, a == b == y.
    std::vector<T> ya = a, yb = b, yy = a;
    binary(c.op, ya.data(), b.data(), ya.data(), n);
    binary(c.op, a.data(), yb.data(), yb.data(), n);
    binary(c.op, yy.data(), yy.data(), yy.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      checker.check(ya[i], y[i], a[i]);
      checker.check(yb[i], y[i], a[i]);
      checker.check(yy[i], ref_binary(c.op, a[i], a[i]), a[i]);
    }
    // Broadcast scalars, including pow's fast-path exponents and special values.
    // Integral exponents up to 64 take float32's squaring path; 65 does not.
    std::vector<T> scalars = {T(2),    T(0.5), T(1), T(0),  T(-1), T(3),   T(-2.5),
                              T(0.25), T(-3),  T(7), T(-2), T(64), T(-64), T(65)};
    for (T s : special_values<T>()) scalars.push_back(s);
    for (T s : scalars) {
      std::vector<T> r(a.size()), l(a.size());
      binary_scalar_rhs(c.op, a.data(), s, r.data(), n);
      binary_scalar_lhs(c.op, s, b.data(), l.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        checker.check(r[i], ref_binary(c.op, a[i], s), a[i]);
        checker.check(l[i], ref_binary(c.op, s, b[i]), b[i]);
      }
    }
  }
  checker.report(target);
}

TEST(SimdFloatKernels, BinaryMatchesStdReference_WhenAnyOperandLayout) {
  for_each_target([](const std::string& t) {
    for (const BinaryCase& c : kBinaryCases) {
      check_binary<float>(c, t);
      check_binary<double>(c, t);
    }
  });
}

// The 16-bit binary(): bit for bit the float32 kernel on the widened operands, rounded once
// (Half's and BFloat16's own conversions), on every bit pattern's neighbourhood (NaNs with
// payloads, infinities, subnormals), every layout, every tail length and in place.
template <typename H>
std::vector<H> random_16bit(int64_t n, std::mt19937& rng) {
  std::vector<H> v(n);
  for (H& h : v) h.bits = static_cast<uint16_t>(rng());
  return v;
}

template <typename H>
std::vector<uint16_t> bits_of(const std::vector<H>& v) {
  std::vector<uint16_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) bits[i] = v[i].bits;
  return bits;
}

/// Whether h is a quiet NaN: exponent all ones and the top mantissa bit set.
bool is_quiet_nan(Half h) { return (h.bits & 0x7e00u) == 0x7e00u; }
bool is_quiet_nan(BFloat16 h) { return (h.bits & 0x7fc0u) == 0x7fc0u; }

/// The bits of y, except that a quiet NaN where `want` has a NaN takes want's bits: a NaN's sign
/// and payload follow operand order, which the compiler may pick differently per loop (as in
/// same_values). A signalling NaN never matches: every rounding to 16 bits quiets.
template <typename H>
std::vector<uint16_t> bits_matching_nans(const std::vector<H>& y,
                                         const std::vector<uint16_t>& want) {
  std::vector<uint16_t> bits = bits_of(y);
  for (size_t i = 0; i < bits.size() && i < want.size(); ++i) {
    H w;
    w.bits = want[i];
    if (is_quiet_nan(y[i]) && std::isnan(static_cast<float>(w))) bits[i] = want[i];
  }
  return bits;
}

template <typename H>
std::vector<float> widened(const std::vector<H>& v) {
  return std::vector<float>(v.begin(), v.end());
}

/// Each float rounded to H (its own conversion), as bits.
template <typename H>
std::vector<uint16_t> rounded_bits(const std::vector<float>& v) {
  std::vector<uint16_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i) bits[i] = H(v[i]).bits;
  return bits;
}

/// The value the 16-bit tests fill outputs with first.
constexpr float kUntouched = -7.0f;

/// The float32 kernel on the widened operands (null: the scalar), rounded to H.
template <typename H>
std::vector<uint16_t> binary_through_float(BinaryOp op, const std::vector<H>* a, float sa,
                                           const std::vector<H>* b, float sb, int64_t n) {
  std::vector<float> y(n);
  if (a != nullptr && b != nullptr) {
    binary(op, widened(*a).data(), widened(*b).data(), y.data(), n);
  } else if (b == nullptr) {
    binary_scalar_rhs(op, widened(*a).data(), sb, y.data(), n);
  } else {
    binary_scalar_lhs(op, sa, widened(*b).data(), y.data(), n);
  }
  return rounded_bits<H>(y);
}

template <typename H>
void check_16bit_binary() {
  std::mt19937 rng(16);
  const std::vector<H> scalars = random_16bit<H>(3, rng);
  for (const BinaryCase& c : kBinaryCases) {
    SCOPED_TRACE(c.name);
    for (int64_t n : kLengths) {
      SCOPED_TRACE("n = " + std::to_string(n));
      const std::vector<H> a = random_16bit<H>(n, rng);
      const std::vector<H> b = random_16bit<H>(n, rng);
      std::vector<H> y(n, H(kUntouched));
      const bool done = binary(c.op, a.data(), 0.0f, b.data(), 0.0f, y.data(), n);
      EXPECT_EQ(done, n == 0 || c.op != BinaryOp::kPow);
      if (!done || n == 0) {
        EXPECT_EQ(bits_of(y), bits_of(std::vector<H>(n, H(kUntouched)))) << "wrote while declining";
        continue;
      }
      const std::vector<uint16_t> want = binary_through_float(c.op, &a, 0.0f, &b, 0.0f, n);
      EXPECT_EQ(bits_matching_nans(y, want), want);
      std::vector<H> in_place = a;
      binary(c.op, in_place.data(), 0.0f, b.data(), 0.0f, in_place.data(), n);
      EXPECT_EQ(bits_of(in_place), bits_of(y));
      for (const H& scalar : scalars) {
        const float s = scalar;
        binary(c.op, a.data(), 0.0f, nullptr, s, y.data(), n);
        const std::vector<uint16_t> want_rhs =
            binary_through_float<H>(c.op, &a, 0.0f, nullptr, s, n);
        EXPECT_EQ(bits_matching_nans(y, want_rhs), want_rhs);
        binary(c.op, nullptr, s, b.data(), 0.0f, y.data(), n);
        const std::vector<uint16_t> want_lhs =
            binary_through_float<H>(c.op, nullptr, s, &b, 0.0f, n);
        EXPECT_EQ(bits_matching_nans(y, want_lhs), want_lhs);
      }
    }
  }
}

TEST(SimdFloatKernels, SixteenBitBinaryEqualsTheFloatKernelRoundedOnce) {
  for_each_target([](const std::string&) {
    check_16bit_binary<Half>();
    check_16bit_binary<BFloat16>();
  });
}

/// The 16-bit unary() on every bit pattern of H (and on each tail length), against the float32
/// kernel on the widened run rounded once; in place too. neg and abs flip or clear the sign bit
/// instead, which gives the same bits except that a signaling NaN stays signaling: they are
/// checked against that, on every pattern.
template <typename H>
void check_16bit_unary() {
  std::vector<H> every(1 << 16);
  for (size_t i = 0; i < every.size(); ++i) every[i].bits = static_cast<uint16_t>(i);
  for (const UnaryCase& c : kUnaryCases) {
    SCOPED_TRACE(c.name);
    const bool sign_bit_op = c.op == UnaryOp::kNeg || c.op == UnaryOp::kAbs;
    const auto check = [&](const std::vector<H>& x, const std::vector<H>& y) {
      if (sign_bit_op) {
        std::vector<uint16_t> want = bits_of(x);
        for (uint16_t& b : want) b = c.op == UnaryOp::kNeg ? b ^ 0x8000 : b & 0x7fff;
        EXPECT_EQ(bits_of(y), want);
        return;
      }
      std::vector<float> wide = widened(x);
      unary(c.op, wide.data(), wide.data(), static_cast<int64_t>(wide.size()));
      const std::vector<uint16_t> want = rounded_bits<H>(wide);
      EXPECT_EQ(bits_matching_nans(y, want), want);
    };
    for (int64_t n : kLengths) {
      SCOPED_TRACE("n = " + std::to_string(n));
      // The tail lengths take the patterns from the middle of the range, the full run all of them.
      const std::vector<H> x(every.begin() + 0x3c00, every.begin() + 0x3c00 + n);
      std::vector<H> y(n);
      unary(c.op, x.data(), y.data(), n);
      check(x, y);
    }
    std::vector<H> in_place = every;
    unary(c.op, in_place.data(), in_place.data(), static_cast<int64_t>(every.size()));
    check(every, in_place);
  }
}

TEST(SimdFloatKernels, SixteenBitUnaryEqualsTheFloatKernelRoundedOnce_OnEveryValue) {
  for_each_target([](const std::string&) {
    check_16bit_unary<Half>();
    check_16bit_unary<BFloat16>();
  });
}

// floor_divide and remainder where the vector fmod is delicate: a within an ulp of k * b, where
// the rounded quotient a / b can round up to the next integer (Note [Exact vector fmod]), for
// quotients up to the vector path's limit and past it; subnormal operands; a smaller than b.
template <typename T>
void check_division_near_integral_quotients(const std::string& target) {
  Checker<T> floor_checker{"floor_divide", kExact};
  Checker<T> remainder_checker{"remainder", kExact};
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> mantissa(1.0, 2.0);
  std::uniform_int_distribution<int> exponent(-30, 30);
  const double limit = std::ldexp(1.0, std::numeric_limits<T>::digits + 1);
  std::vector<T> a, b;
  for (int i = 0; i < 3000; ++i) {
    const T divisor = static_cast<T>(std::ldexp(mantissa(rng), exponent(rng)) * (i % 2 ? -1 : 1));
    const double k =
        std::floor(std::exp2(std::uniform_real_distribution<double>(0.0, std::log2(limit))(rng))) *
        (i % 3 == 0 ? -1 : 1);
    const T near = static_cast<T>(k * static_cast<double>(divisor));
    for (T dividend : {near, std::nextafter(near, T(0)), std::nextafter(near, -near * 2)}) {
      a.push_back(dividend);
      b.push_back(divisor);
    }
  }
  const T tiny = std::numeric_limits<T>::denorm_min();
  const T small[] = {tiny, tiny * 3, std::numeric_limits<T>::min(),
                     T(1) - std::numeric_limits<T>::epsilon()};
  for (T x : small) {
    for (T y : small) {
      a.push_back(x), b.push_back(y);
      a.push_back(-x), b.push_back(y);
    }
  }
  const int64_t n = static_cast<int64_t>(a.size());
  std::vector<T> q(n), r(n);
  binary(BinaryOp::kFloorDivide, a.data(), b.data(), q.data(), n);
  binary(BinaryOp::kRemainder, a.data(), b.data(), r.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    floor_checker.check(q[i], floor_divide_value(a[i], b[i]), a[i]);
    remainder_checker.check(r[i], remainder_value(a[i], b[i]), a[i]);
  }
  floor_checker.report(target);
  remainder_checker.report(target);
}

TEST(SimdFloatKernels, FloorDivideAndRemainderAreExact_NearIntegralQuotients) {
  for_each_target([](const std::string& t) {
    check_division_near_integral_quotients<float>(t);
    check_division_near_integral_quotients<double>(t);
  });
}

// masked_scale: x * scale where kept, +0 elsewhere (nan and inf included), over every tail
// length, in place or not.
template <typename T>
void check_masked_scale(const std::string& target) {
  Checker<T> checker{"masked_scale", kExact};
  std::mt19937 rng(8);
  for (int64_t n : kLengths) {
    std::vector<T> x = make_input<T>(n, rng, sampler(rng, Domain{1e-3, 1e3, true}));
    std::unique_ptr<bool[]> keep(new bool[std::max<int64_t>(n, 1)]);
    for (int64_t i = 0; i < n; ++i) keep[i] = (rng() & 1) != 0;
    const T scale = T(1) / T(0.7);
    std::vector<T> y(n), in_place = x;
    masked_scale(x.data(), keep.get(), scale, y.data(), n);
    masked_scale(in_place.data(), keep.get(), scale, in_place.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const T want = keep[i] ? x[i] * scale : T(0);
      checker.check(y[i], want, x[i]);
      checker.check(in_place[i], want, x[i]);
    }
  }
  checker.report(target);
}

TEST(SimdFloatKernels, MaskedScaleKeepsTheMaskedLanes_AndZeroesTheRest) {
  for_each_target([](const std::string& t) {
    check_masked_scale<float>(t);
    check_masked_scale<double>(t);
  });
}

// silu_backward: g * silu'(x) against silu' in long double (rounded to T), over every tail length,
// the range where silu' is neither 0 nor 1 (and past it), the infinities and nan, with g or x a
// broadcast scalar and in place. silu'(x) crosses 0 near x = -1.28 and its exp underflows for very
// negative x, so the error is bounded relative to max(|result|, |g|), as gelu_backward's.
template <typename T>
void check_silu_backward(double rtol) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> wide(-110.0, 110.0), grads(-3.0, 3.0);
  const auto near = [&](T got, T g, T x) {
    const T want = ref_binary(BinaryOp::kSiluBackward, g, x);
    if (std::isnan(want)) return std::isnan(got);
    return std::fabs(static_cast<double>(got) - static_cast<double>(want)) <=
           rtol * std::max(std::fabs(static_cast<double>(want)), std::fabs(static_cast<double>(g)));
  };
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{17}, int64_t{4097}}) {
    std::vector<T> x(n), g(n);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = static_cast<T>(wide(rng) * (i % 3 == 0 ? 0.05 : 1.0));  // a third within +-5.5
      g[i] = static_cast<T>(grads(rng));
    }
    const T specials[] = {T(0),
                          -T(0),
                          T(-1.2785),
                          T(1e-30),
                          T(1e30),
                          T(-1e30),
                          std::numeric_limits<T>::infinity(),
                          -std::numeric_limits<T>::infinity(),
                          std::numeric_limits<T>::quiet_NaN()};
    for (int64_t i = 0; i < n && i < 9; ++i) x[i] = specials[i];
    std::vector<T> y = g;  // in place: y aliases g
    binary(BinaryOp::kSiluBackward, y.data(), x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_TRUE(near(y[i], g[i], x[i])) << "g = " << g[i] << " x = " << x[i] << " got " << y[i];
    }
    std::vector<T> rhs(n), lhs(n);
    binary_scalar_rhs(BinaryOp::kSiluBackward, g.data(), T(0.5), rhs.data(), n);
    binary_scalar_lhs(BinaryOp::kSiluBackward, T(-2), x.data(), lhs.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_TRUE(near(rhs[i], g[i], T(0.5))) << "g = " << g[i] << " got " << rhs[i];
      EXPECT_TRUE(near(lhs[i], T(-2), x[i])) << "x = " << x[i] << " got " << lhs[i];
    }
  }
}

TEST(SimdFloatKernels, SiluBackwardMatchesReference_WhenAnyLayout) {
  for_each_target([](const std::string&) {
    check_silu_backward<float>(1e-6);
    check_silu_backward<double>(1e-14);
  });
}

/// unary with scalar steps against the steps run one by one through binary_scalar_rhs / _lhs and
/// then unary: the same values (nan payloads aside), for every op, in place or not, streamed or
/// not.
template <typename T>
void check_unary_with_steps(const UnaryCase& c) {
  struct StepArgs {
    BinaryOp op;
    T scalar;
    bool scalar_first;
  };
  // Chains that merge (a multiply then an add or subtraction take one step), fill all four steps,
  // and use every op on both sides, with scalars that keep most values in the op's domain; signed
  // zeros too.
  const std::vector<std::vector<StepArgs>> chains = {
      {{BinaryOp::kMul, T(1.3), false}, {BinaryOp::kAdd, T(1), false}},
      {{BinaryOp::kSub, T(0.5), true}, {BinaryOp::kDiv, T(3), false}},
      {{BinaryOp::kDiv, T(2.5), true},
       {BinaryOp::kMaximum, T(-0.75), false},
       {BinaryOp::kMinimum, T(4), true},
       {BinaryOp::kMul, T(-1.5), true}},
      {{BinaryOp::kAdd, T(0), true},
       {BinaryOp::kMul, -T(0), false},
       {BinaryOp::kSub, T(-0.25), false},
       {BinaryOp::kMaximum, -T(0), true}},
      {{BinaryOp::kMul, T(0.3), false},
       {BinaryOp::kAdd, -T(0), false},
       {BinaryOp::kAdd, T(3), true},
       {BinaryOp::kMinimum, T(1.5), false}},
      {{BinaryOp::kMul, T(1.3), true}, {BinaryOp::kSub, T(0.7), false}},  // merged
      // One step on inputs that hold +-0: the operand order decides a tie's sign.
      {{BinaryOp::kMaximum, -T(0), false}},
      {{BinaryOp::kMaximum, T(0), true}},
      {{BinaryOp::kMinimum, T(0), false}},
      {{BinaryOp::kMinimum, -T(0), true}},
      {{BinaryOp::kSub, T(0), true}},
      // The tail's padding (0) becomes inf: padded lanes take the ops' slow paths.
      {{BinaryOp::kDiv, T(1), true}},
  };
  std::mt19937 rng(11);
  for (const std::vector<StepArgs>& chain : chains) {
    ScalarSteps<T> steps;
    for (const StepArgs& a : chain) ASSERT_TRUE(steps.push(a.op, a.scalar, a.scalar_first));
    for (int64_t n : kLengths) {
      const std::vector<T> x = make_input<T>(n, rng, sampler(rng, c.domain));
      std::vector<T> want = x;
      for (const StepArgs& a : chain) {
        if (a.scalar_first) {
          binary_scalar_lhs(a.op, a.scalar, want.data(), want.data(), n);
        } else {
          binary_scalar_rhs(a.op, want.data(), a.scalar, want.data(), n);
        }
      }
      unary(c.op, want.data(), want.data(), n);
      for (Store store : {Store::kCached, Store::kStream}) {
        std::vector<T> y(x.size(), T(-7));
        unary(c.op, steps, x.data(), y.data(), n, store);
        EXPECT_TRUE(same_values(y, want)) << c.name << ", " << chain.size() << " steps, n = " << n;
        std::vector<T> z = x;
        unary(c.op, steps, z.data(), z.data(), n, store);
        EXPECT_TRUE(same_values(z, want)) << c.name << " in place";
      }
    }
  }
}

TEST(SimdFloatKernels, UnaryWithStepsEqualsTheStepsOneByOne) {
  for_each_target([](const std::string&) {
    for (const UnaryCase& c : kUnaryCases) {
      check_unary_with_steps<float>(c);
      check_unary_with_steps<double>(c);
    }
  });
}

TEST(SimdFloatKernels,
     ScalarStepsMergeAMultiplyWithTheNextAddOrSubtraction_AndRefusePowAndAFifthStep) {
  ScalarSteps<float> steps;
  EXPECT_TRUE(steps.empty());
  EXPECT_FALSE(steps.push(BinaryOp::kPow, 2.0f, false));
  EXPECT_TRUE(steps.empty());
  ASSERT_TRUE(steps.push(BinaryOp::kMul, 2.0f, false));
  ASSERT_TRUE(steps.push(BinaryOp::kAdd, 1.0f, false));
  EXPECT_EQ(steps.size(), 1);  // v * 2 + 1, two roundings
  ASSERT_TRUE(steps.push(BinaryOp::kMul, 3.0f, true));
  ASSERT_TRUE(steps.push(BinaryOp::kSub, 1.0f, false));
  EXPECT_EQ(steps.size(), 2);  // v * 3 - 1
  ASSERT_TRUE(steps.push(BinaryOp::kDiv, 3.0f, true));
  ASSERT_TRUE(steps.push(BinaryOp::kMaximum, 0.0f, false));
  EXPECT_EQ(steps.size(), ScalarSteps<float>::kMax);
  EXPECT_FALSE(steps.push(BinaryOp::kSub, 1.0f, true));
  EXPECT_FALSE(steps.push(BinaryOp::kAdd, 1.0f, false));  // the last step is no multiply
  EXPECT_EQ(steps.size(), ScalarSteps<float>::kMax);
  steps.clear();
  EXPECT_TRUE(steps.empty());
}

// ------------------------------------------------------------------------------------------------
// Reductions.

/// Sum in long double: exact enough to judge a float64 sum of 16M terms.
template <typename T>
long double exact_sum(const std::vector<T>& x) {
  long double s = 0;
  for (T v : x) s += v;
  return s;
}

template <typename T>
void check_reductions() {
  std::mt19937 rng(7);
  for (int64_t n : kLengths) {
    std::vector<T> x(static_cast<size_t>(n));
    for (T& v : x) v = static_cast<T>(std::uniform_real_distribution<double>(-1, 3)(rng));
    const long double want = exact_sum(x);
    const double bound = 16 * std::numeric_limits<T>::epsilon() * static_cast<double>(n);
    EXPECT_NEAR(static_cast<double>(reduce_sum(x.data(), n)), static_cast<double>(want), bound);
    const T mx = n > 0 ? *std::max_element(x.begin(), x.end()) : -INFINITY;
    const T mn = n > 0 ? *std::min_element(x.begin(), x.end()) : INFINITY;
    EXPECT_EQ(reduce_max(x.data(), n), mx) << n;
    EXPECT_EQ(reduce_min(x.data(), n), mn) << n;
    // A nan anywhere (first, middle, last = tail lane) wins; inf does not hide it.
    for (int64_t pos : {int64_t{0}, n / 2, n - 1}) {
      if (n == 0) break;
      std::vector<T> z = x;
      z[(pos + 1) % n] = std::numeric_limits<T>::infinity();
      z[pos] = std::numeric_limits<T>::quiet_NaN();
      EXPECT_TRUE(std::isnan(reduce_max(z.data(), n))) << n << " " << pos;
      EXPECT_TRUE(std::isnan(reduce_min(z.data(), n))) << n << " " << pos;
      EXPECT_TRUE(std::isnan(reduce_sum(z.data(), n))) << n << " " << pos;
    }
  }
  const T inf = std::numeric_limits<T>::infinity();
  const std::vector<T> with_inf = {T(1), inf, T(-5), T(2)};
  EXPECT_EQ(reduce_sum(with_inf.data(), 4), inf);
  EXPECT_EQ(reduce_max(with_inf.data(), 4), inf);
  EXPECT_EQ(reduce_min(with_inf.data(), 4), T(-5));
}

/// The 16-bit reduce_sum against the long double sum of the widened values, on every tail length;
/// a NaN anywhere or an inf shows through.
template <typename H>
void check_16bit_sum() {
  std::mt19937 rng(17);
  for (int64_t n : {0, 1, 7, 17, 100, 1023, 4097, 100000}) {
    std::vector<H> x(n);
    for (H& v : x) v = H(std::uniform_real_distribution<float>(-1, 3)(rng));
    const long double want = exact_sum(widened(x));
    // Block sums are float32 (Note [blocked summation]).
    const double bound = 16 * std::numeric_limits<float>::epsilon() * static_cast<double>(n);
    EXPECT_NEAR(reduce_sum(x.data(), n), static_cast<double>(want), bound) << n;
    if (n == 0) continue;
    std::vector<H> z = x;
    z[n - 1] = H(std::numeric_limits<float>::infinity());
    EXPECT_EQ(reduce_sum(z.data(), n), std::numeric_limits<double>::infinity()) << n;
    z[n / 2] = H(std::numeric_limits<float>::quiet_NaN());
    EXPECT_TRUE(std::isnan(reduce_sum(z.data(), n))) << n;
  }
}

TEST(SimdFloatKernels, AccumulateAddsTheWidenedFloat16s_OnEveryTailLength) {
  for_each_target([](const std::string&) {
    std::mt19937 rng(19);
    for (int64_t n : kLengths) {
      const std::vector<Half> x = random_16bit<Half>(n, rng);
      std::vector<float> acc(n), want(n);
      for (int64_t i = 0; i < n; ++i) acc[i] = want[i] = static_cast<float>(i) - 3.5f;
      for (int64_t i = 0; i < n; ++i) want[i] += static_cast<float>(x[i]);
      accumulate(x.data(), acc.data(), n);
      EXPECT_TRUE(same_values(acc, want)) << n;
    }
  });
}

TEST(SimdFloatKernels, SixteenBitSumMatchesTheWidenedSum) {
  for_each_target([](const std::string&) {
    check_16bit_sum<Half>();
    check_16bit_sum<BFloat16>();
    // bfloat16 reaches float's range: a sum past it is still the float64 sum.
    const BFloat16 big(3e38f);
    const std::vector<BFloat16> bigs(300, big);
    EXPECT_DOUBLE_EQ(reduce_sum(bigs.data(), 300), 300.0 * static_cast<float>(big));
  });
}

TEST(SimdFloatKernels, ReductionsMatchReference_WhenShortRuns) {
  for_each_target([](const std::string&) {
    check_reductions<float>();
    check_reductions<double>();
  });
}

TEST(SimdFloatKernels, SumIsAccurate_When16MFloats) {
  // numpy's pairwise float32 sum is off by ~1e-7..1e-6 relative here; we must stay below 1e-6.
  const int64_t n = int64_t{1} << 24;
  std::mt19937 rng(11);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = static_cast<float>(std::uniform_real_distribution<double>(0, 1)(rng));
  const double want = static_cast<double>(exact_sum(x));
  for_each_target([&](const std::string& t) {
    const double got = reduce_sum(x.data(), n);
    EXPECT_NEAR(got / want, 1.0, 1e-6);
    if (verbose())
      std::printf("  %-6s sum of 16M float32: relative error %.2e\n", t.c_str(),
                  std::fabs(got / want - 1.0));
  });
}

// ------------------------------------------------------------------------------------------------
// Row kernels.

template <typename T>
void check_rows() {
  const double tol = sizeof(T) == 4 ? 2e-6 : 1e-13;
  std::mt19937 rng(3);
  for (int64_t n : kLengths) {
    if (n == 0) continue;
    std::vector<T> x(static_cast<size_t>(n)), gamma(x.size()), beta(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<T>(std::uniform_real_distribution<double>(-20, 40)(rng));
      gamma[i] = static_cast<T>(std::uniform_real_distribution<double>(0.5, 2)(rng));
      beta[i] = static_cast<T>(std::uniform_real_distribution<double>(-1, 1)(rng));
    }
    if (n > 3) x[1] = -std::numeric_limits<T>::infinity();  // a masked-out entry
    long double m = -INFINITY, s = 0, mean = 0, var = 0, ms = 0;
    for (T v : x) m = std::max<long double>(m, v);
    for (T v : x) s += std::exp(static_cast<long double>(v) - m);
    std::vector<T> y(x.size());
    softmax_row(x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      // x - max is rounded in T: exp turns that into a relative error of eps * |x - max|.
      const auto want = static_cast<double>(std::exp(x[i] - m) / s);
      if (want == 0) {
        EXPECT_EQ(y[i], 0) << "softmax of -inf";
        continue;
      }
      const double cond =
          std::numeric_limits<T>::epsilon() * std::fabs(x[i] - static_cast<double>(m));
      EXPECT_NEAR(y[i], want, (tol + cond) * want + 1e-300) << "softmax n=" << n << " i=" << i;
    }
    log_softmax_row(x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const auto want = static_cast<double>(x[i] - m - std::log(s));
      if (std::isinf(want)) {
        EXPECT_EQ(y[i], want);
        continue;
      }
      EXPECT_NEAR(y[i], want, tol * (std::fabs(want) + 1)) << "log_softmax n=" << n;
    }
    // Normalisation rows: replace the -inf first.
    x[1 % n] = T(3);
    for (T v : x) mean += v;
    mean /= n;
    for (T v : x) var += (v - mean) * (v - mean), ms += static_cast<long double>(v) * v;
    var /= n;
    ms /= n;
    const T eps = T(1e-5);
    const long double rstd = 1 / std::sqrt(var + eps), rrms = 1 / std::sqrt(ms + eps);
    for (int variant = 0; variant < 4; ++variant) {
      const T* g = variant & 1 ? gamma.data() : nullptr;
      const T* b = variant & 2 ? beta.data() : nullptr;
      T mean_out = 0, rstd_out = 0;
      std::vector<T> z = x;  // in place
      layer_norm_row(z.data(), g, b, eps, z.data(), n, &mean_out, &rstd_out);
      EXPECT_NEAR(mean_out, static_cast<double>(mean), tol * 40);
      EXPECT_NEAR(rstd_out, static_cast<double>(rstd), tol * static_cast<double>(rstd));
      for (int64_t i = 0; i < n; ++i) {
        const auto want =
            static_cast<double>((x[i] - mean) * rstd * (g ? g[i] : 1) + (b ? b[i] : 0));
        EXPECT_NEAR(z[i], want, 4 * tol * (std::fabs(want) + 1)) << "layer_norm " << variant;
      }
      if (b != nullptr) continue;
      rms_norm_row(x.data(), g, eps, y.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const auto want = static_cast<double>(x[i] * rrms * (g ? g[i] : 1));
        EXPECT_NEAR(y[i], want, tol * (std::fabs(want) + 1e-3)) << "rms_norm " << variant;
      }
    }
  }
}

TEST(SimdFloatKernels, RowKernelsMatchReference_WhenAnyLength) {
  for_each_target([](const std::string&) {
    check_rows<float>();
    check_rows<double>();
  });
}

/// The 16-bit layer_norm_row and rms_norm_row against the float32 kernels on the widened row,
/// rounded once: bit for bit, statistics included, with and without gamma / beta, in place too;
/// rows far from zero keep their small variance (the padded tail adds nothing).
template <typename H>
void check_16bit_rows() {
  std::mt19937 rng(18);
  std::uniform_real_distribution<float> unit(-1, 1);
  for (int64_t n : kLengths) {
    SCOPED_TRACE("n = " + std::to_string(n));
    for (float offset : {0.0f, 300.0f}) {
      std::vector<H> x(n);
      for (H& v : x) v = H(offset + unit(rng));
      std::vector<float> g(n), b(n);
      for (float& v : g) v = unit(rng);
      for (float& v : b) v = unit(rng);
      const std::vector<float> wide = widened(x);
      for (bool affine : {true, false}) {
        const float* pg = affine ? g.data() : nullptr;
        const float* pb = affine ? b.data() : nullptr;
        std::vector<float> want(n);
        float want_mean = 0, want_rstd = 0, mean = 0, rstd = 0;
        layer_norm_row(wide.data(), pg, pb, 1e-5f, want.data(), n, &want_mean, &want_rstd);
        std::vector<H> y(n);
        layer_norm_row(x.data(), pg, pb, 1e-5f, y.data(), n, &mean, &rstd);
        EXPECT_EQ(bits_of(y), rounded_bits<H>(want));
        if (n > 0) {
          EXPECT_EQ(mean, want_mean);
          EXPECT_EQ(rstd, want_rstd);
        }
        std::vector<H> in_place = x;
        layer_norm_row(in_place.data(), pg, pb, 1e-5f, in_place.data(), n, nullptr, nullptr);
        EXPECT_EQ(bits_of(in_place), bits_of(y));
        rms_norm_row(wide.data(), pg, 1e-6f, want.data(), n);
        rms_norm_row(x.data(), pg, 1e-6f, y.data(), n);
        EXPECT_EQ(bits_of(y), rounded_bits<H>(want));
      }
    }
  }
}

TEST(SimdFloatKernels, SixteenBitNormRowsEqualTheFloatKernelsRoundedOnce) {
  for_each_target([](const std::string&) {
    check_16bit_rows<Half>();
    check_16bit_rows<BFloat16>();
  });
}

/// Runs every row kernel on x[offset, offset + n) with `store`, into a copy of x (in place) or a
/// fresh buffer; returns the buffers of all of them, concatenated.
template <typename T>
std::vector<T> all_row_kernels(const std::vector<T>& x, const std::vector<T>& g,
                               const std::vector<T>& b, size_t offset, int64_t n, bool in_place,
                               Store store) {
  std::vector<T> out;
  const auto run = [&](const std::function<void(const T*, T*)>& kernel) {
    std::vector<T> dst = in_place ? x : std::vector<T>(x.size(), T(-7));
    kernel(in_place ? dst.data() + offset : x.data() + offset, dst.data() + offset);
    out.insert(out.end(), dst.begin(), dst.end());
  };
  run([&](const T* in, T* o) { softmax_row(in, o, n, store); });
  run([&](const T* in, T* o) { log_softmax_row(in, o, n, store); });
  run([&](const T* in, T* o) {
    layer_norm_row(in, g.data() + offset, b.data() + offset, T(1e-5), o, n, nullptr, nullptr,
                   store);
  });
  run([&](const T* in, T* o) {
    layer_norm_row(in, nullptr, nullptr, T(1e-5), o, n, nullptr, nullptr, store);
  });
  run([&](const T* in, T* o) { rms_norm_row(in, g.data() + offset, T(1e-6), o, n, store); });
  return out;
}

template <typename T>
void check_streaming_rows() {
  std::mt19937 rng(99);
  for (int64_t n : {1, 7, 16, 17, 100, 1023, 4097}) {
    // offsets 0..3 put the row's start on and off the vector alignment
    for (size_t offset = 0; offset < 4; ++offset) {
      const size_t size = offset + static_cast<size_t>(n);
      const std::vector<T> x =
          make_input<T>(static_cast<int64_t>(size), rng, sampler(rng, {-20, 20, false}));
      std::vector<T> g(size), b(size);
      for (size_t i = 0; i < size; ++i) g[i] = T(0.5) + T(i % 7), b[i] = T(i % 5) - T(2);
      for (bool in_place : {false, true}) {
        const std::vector<T> cached = all_row_kernels(x, g, b, offset, n, in_place, Store::kCached);
        const std::vector<T> streamed =
            all_row_kernels(x, g, b, offset, n, in_place, Store::kStream);
        EXPECT_TRUE(same_values(cached, streamed))
            << "n = " << n << ", offset = " << offset << ", in place = " << in_place;
      }
    }
  }
}

TEST(SimdFloatKernels, RowKernelsWriteSameValues_WhenStreaming) {
  for_each_target([](const std::string&) {
    check_streaming_rows<float>();
    check_streaming_rows<double>();
  });
}

template <typename T>
void check_streaming_unary(const UnaryCase& c) {
  std::mt19937 rng(7);
  for (int64_t n : {1, 16, 17, 100, 1023, 4097}) {
    for (size_t offset = 0; offset < 4; ++offset) {
      const size_t size = offset + static_cast<size_t>(n);
      const std::vector<T> x =
          make_input<T>(static_cast<int64_t>(size), rng, sampler(rng, c.domain));
      for (bool in_place : {false, true}) {
        std::vector<T> cached = in_place ? x : std::vector<T>(size, T(-7));
        std::vector<T> streamed = cached;
        unary(c.op, (in_place ? cached.data() : x.data()) + offset, cached.data() + offset, n,
              Store::kCached);
        unary(c.op, (in_place ? streamed.data() : x.data()) + offset, streamed.data() + offset, n,
              Store::kStream);
        EXPECT_TRUE(same_values(cached, streamed))
            << c.name << ", n = " << n << ", offset = " << offset << ", in place = " << in_place;
      }
    }
  }
}

TEST(SimdFloatKernels, UnaryWritesSameValues_WhenStreaming) {
  for_each_target([](const std::string&) {
    for (const UnaryCase& c : kUnaryCases) {
      check_streaming_unary<float>(c);
      check_streaming_unary<double>(c);
    }
  });
}

TEST(SimdFloatKernels, StoreForOutputStreams_WhenOutputIsLarge) {
  EXPECT_EQ(store_for_output(0), Store::kCached);
  EXPECT_EQ(store_for_output(int64_t{1} << 20), Store::kCached);  // 1 MiB stays in cache
  EXPECT_EQ(store_for_output(int64_t{1} << 40), Store::kStream);
}

TEST(SimdFloatKernels, SoftmaxGivesNan_WhenRowHasNanOrOnlyMinusInf) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = INFINITY;
  for_each_target([&](const std::string&) {
    for (const std::vector<float>& row :
         {std::vector<float>{1, nan, 2}, std::vector<float>{-inf, -inf},
          std::vector<float>{1, inf}}) {
      std::vector<float> y(row.size());
      softmax_row(row.data(), y.data(), static_cast<int64_t>(row.size()));
      for (float v : y) EXPECT_TRUE(std::isnan(v));
    }
    // Huge but finite logits are stable (the max is subtracted first).
    const std::vector<float> big = {3e38f, 3e38f, -3e38f};
    std::vector<float> y(3);
    softmax_row(big.data(), y.data(), 3);
    EXPECT_FLOAT_EQ(y[0], 0.5f);
    EXPECT_FLOAT_EQ(y[1], 0.5f);
    EXPECT_EQ(y[2], 0.0f);
  });
}

TEST(SimdFloatKernels, LayerNormStatsAreNan_WhenRowIsEmpty) {
  float mean = 0, rstd = 0;
  layer_norm_row(static_cast<const float*>(nullptr), nullptr, nullptr, 1e-5f, nullptr, 0, &mean,
                 &rstd);
  EXPECT_TRUE(std::isnan(mean));
  EXPECT_TRUE(std::isnan(rstd));
}

TEST(SimdFloatKernels, SetTargetForTestingThrows_WhenTargetIsUnknown) {
  ASSERT_FALSE(supported_targets().empty());
  try {
    set_target_for_testing("NOT_A_TARGET");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("got \"NOT_A_TARGET\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln::simd
