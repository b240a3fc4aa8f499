// The special functions (src/ops/special_math.cc) against closed forms, recurrences and
// reflection formulas, their PyTorch values at poles and domain edges, and the ops made of them
// (Erfinv, Lgamma, Digamma, Polygamma) across dtypes, layouts and integer inputs.
#include "ops/special_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kiln/functional.h"
#include "kiln/op.h"
#include "testing.h"

namespace kiln {
namespace {

using elementwise::digamma_value;
using elementwise::erfinv_value;
using elementwise::hurwitz_zeta;
using elementwise::lgamma_value;
using elementwise::polygamma_value;

constexpr double kPi = 3.14159265358979323846;
constexpr double kEulerGamma = 0.57721566490153286061;
constexpr double kZeta3 = 1.20205690315959428540;  // Apery's constant
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr DType f64 = DType::kFloat64;
constexpr DType f32 = DType::kFloat32;

// |got - want| within `ulps` units in the last place of want.
void expect_ulps(double got, double want, double ulps) {
  const double ulp = std::nextafter(std::abs(want), kInf) - std::abs(want);
  EXPECT_LE(std::abs(got - want), ulps * ulp) << "got " << got << ", want " << want;
}

void expect_rel(double got, double want, double rtol) {
  EXPECT_LE(std::abs(got - want), rtol * std::abs(want)) << "got " << got << ", want " << want;
}

Tensor tensor_of(const std::vector<double>& v, DType dtype = f64) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, f64);
  std::copy(v.begin(), v.end(), t.data<double>());
  return to(t, dtype);
}

TEST(SpecialMath, ErfinvInvertsErf_ToAboutOneUlp) {
  for (double x = -5.8; x <= 5.8; x += 0.0137) {
    const double y = std::erf(x);
    if (std::abs(y) == 1.0) continue;
    // y is erf(x) rounded: its exact inverse is x moved by that error over erf'(x).
    const double slope = 1.12837916709551257390 * std::exp(-x * x);
    const double rounding = std::abs(y) * 2.3e-16 / slope;
    EXPECT_NEAR(erfinv_value(y), x, 4.5e-16 * std::abs(x) + 2 * rounding) << x;
  }
  // Next to 1, against erfc, which keeps the digits 1 - y loses: erfc(erfinv(1 - w)) = w.
  for (int k = 2; k <= 53; ++k) {
    const double w = std::ldexp(1.0, -k);
    const double x = erfinv_value(1.0 - w);
    // One ulp of x moves erfc(x) by about 2 x ulp(x) relative.
    EXPECT_NEAR(std::erfc(x) / w, 1.0, (8.0 * x * x + 4.0) * 2.2e-16) << "1 - 2^-" << k;
    EXPECT_EQ(erfinv_value(w - 1.0), -x);  // odd
  }
  expect_ulps(erfinv_value(0.5), 0.47693627620446987338, 1);
  expect_ulps(erfinv_value(1e-300), 0.88622692545275801365e-300, 1);
}

TEST(SpecialMath, ErfinvIsInfiniteAtOne_AndNanOutside) {
  EXPECT_EQ(erfinv_value(1.0), kInf);
  EXPECT_EQ(erfinv_value(-1.0), -kInf);
  EXPECT_TRUE(std::isnan(erfinv_value(1.0000001)));
  EXPECT_TRUE(std::isnan(erfinv_value(-kInf)));
  EXPECT_TRUE(std::isnan(erfinv_value(kNaN)));
  EXPECT_EQ(erfinv_value(0.0), 0.0);
  EXPECT_TRUE(std::signbit(erfinv_value(-0.0)));
}

TEST(SpecialMath, LgammaIsTheLogOfFactorials_AtIntegers) {
  long double factorial = 1;  // (n - 1)!, exact in the 64-bit mantissa up to 20!
  for (int n = 1; n <= 40; ++n) {
    expect_rel(lgamma_value(n), static_cast<double>(std::log(factorial)), 1e-15);
    factorial *= n;
  }
  expect_ulps(lgamma_value(0.5), 0.5 * std::log(kPi), 2);            // Gamma(1/2) = sqrt(pi)
  expect_ulps(lgamma_value(-0.5), std::log(2 * std::sqrt(kPi)), 2);  // |Gamma(-1/2)| = 2 sqrt(pi)
  for (double pole : {0.0, -0.0, -1.0, -7.0, kInf, -kInf}) EXPECT_EQ(lgamma_value(pole), kInf);
  EXPECT_TRUE(std::isnan(lgamma_value(kNaN)));
}

TEST(SpecialMath, DigammaFollowsItsRecurrence_FromMinusEulerGamma) {
  long double want = -0.577215664901532860606512090082402431L;  // digamma(1) = -euler_gamma
  for (int n = 1; n <= 40; ++n) {
    expect_rel(digamma_value(n), static_cast<double>(want), 2e-15);
    want += 1.0L / n;  // digamma(n + 1) = digamma(n) + 1 / n
  }
  expect_rel(digamma_value(0.5), -kEulerGamma - 2 * std::log(2.0), 2e-15);
  expect_rel(digamma_value(0.25), -kEulerGamma - kPi / 2 - 3 * std::log(2.0), 2e-15);
  // Reflection: digamma(1 - x) - digamma(x) = pi cot(pi x), cot of x's fractional part.
  for (double x : {-0.3, -2.7, -11.25, -1e6 - 0.25}) {
    const double cot = 1 / std::tan(kPi * (x - std::floor(x)));
    expect_rel(digamma_value(1 - x) - digamma_value(x), kPi * cot, 1e-12);
  }
  // Large x: log(x) - 1 / (2x), the series' leading terms.
  expect_rel(digamma_value(1e18), std::log(1e18), 1e-16);
  expect_rel(digamma_value(1e-300), -1e300, 1e-15);  // -1 / x
}

TEST(SpecialMath, DigammaTakesPyTorchsValues_AtPolesAndInfinities) {
  EXPECT_EQ(digamma_value(0.0), -kInf);
  EXPECT_EQ(digamma_value(-0.0), kInf);
  for (double pole : {-1.0, -2.0, -1e10, -kInf}) EXPECT_TRUE(std::isnan(digamma_value(pole)));
  EXPECT_EQ(digamma_value(kInf), kInf);
  EXPECT_TRUE(std::isnan(digamma_value(kNaN)));
}

TEST(SpecialMath, HurwitzZetaMatchesRiemannsAtOne_AndSumsNegativeQ) {
  expect_rel(hurwitz_zeta(2, 1), kPi * kPi / 6, 4e-16);
  expect_rel(hurwitz_zeta(4, 1), std::pow(kPi, 4) / 90, 4e-16);
  expect_rel(hurwitz_zeta(3, 0.5), 7 * kZeta3, 4e-16);  // (2^s - 1) zeta(s)
  expect_rel(hurwitz_zeta(2, 3), kPi * kPi / 6 - 1.25, 4e-16);
  // q < 0: the terms below 0 folded onto the positive side, against the direct sum.
  for (double q : {-0.5, -2.5, -3.2, -17.75}) {
    for (double s : {2.0, 3.0, 6.0}) {
      double direct = hurwitz_zeta(s, q + 40);
      for (int k = 39; k >= 0; --k) direct += std::pow(q + k, -s);
      expect_rel(hurwitz_zeta(s, q), direct, 1e-13);
    }
  }
  EXPECT_EQ(hurwitz_zeta(1, 2.5), kInf);
  EXPECT_TRUE(std::isnan(hurwitz_zeta(0.5, 2.5)));
  EXPECT_TRUE(std::isnan(hurwitz_zeta(2.5, -1.5)));  // (q + k)^-s is not real
  EXPECT_EQ(hurwitz_zeta(2, -3.0), kInf);
  EXPECT_EQ(hurwitz_zeta(2, kInf), 0.0);
  EXPECT_TRUE(std::isnan(hurwitz_zeta(2, -kInf)));
}

TEST(SpecialMath, PolygammaMatchesZetaValues_AndItsRecurrence) {
  expect_rel(polygamma_value(1, 1), kPi * kPi / 6, 4e-16);
  expect_rel(polygamma_value(1, 0.5), kPi * kPi / 2, 4e-16);
  expect_rel(polygamma_value(2, 1), -2 * kZeta3, 4e-16);
  expect_rel(polygamma_value(3, 1), std::pow(kPi, 4) / 15, 4e-16);
  for (double x : {0.5, 1.7, -2.3, 12.0}) EXPECT_EQ(polygamma_value(0, x), digamma_value(x));
  // polygamma(n, x + 1) = polygamma(n, x) + (-1)^n n! / x^(n+1), at x where x + 1 is exact.
  for (int64_t n = 1; n <= 6; ++n) {
    for (double x : {0.375, 2.5, -1.625, -7.75, 25.0}) {
      SCOPED_TRACE(std::to_string(n) + ", " + std::to_string(x));
      const double step = (n % 2 == 0 ? 1.0 : -1.0) * std::tgamma(n + 1.0) / std::pow(x, n + 1);
      const double before = polygamma_value(n, x);
      // The sum may cancel: the bound is relative to its terms.
      EXPECT_NEAR(polygamma_value(n, x + 1), before + step,
                  1e-14 * (std::abs(before) + std::abs(step)));
    }
  }
  // Reflection of trigamma: polygamma(1, 1 - x) + polygamma(1, x) = pi^2 / sin^2(pi x), also
  // far below 0, in bounded time (See Note [Hurwitz zeta of a negative q]).
  for (double x : {-0.4, -3.3, -1e6 - 0.25, -1e15 - 0.5}) {
    const double s = std::sin(kPi * (x - std::floor(x)));
    expect_rel(polygamma_value(1, 1 - x) + polygamma_value(1, x), kPi * kPi / (s * s), 1e-12);
  }
}

TEST(SpecialMath, PolygammaIsSignedInfinity_AtPoles) {
  for (double pole : {0.0, -0.0, -1.0, -4.0}) {
    EXPECT_EQ(polygamma_value(1, pole), kInf);
    EXPECT_EQ(polygamma_value(2, pole), -kInf);  // PyTorch's sign for even n
    EXPECT_EQ(polygamma_value(3, pole), kInf);
  }
  EXPECT_EQ(polygamma_value(1, kInf), 0.0);
  EXPECT_TRUE(std::signbit(polygamma_value(2, kInf)));  // the limit from below
  EXPECT_TRUE(std::isnan(polygamma_value(1, -kInf)));
  EXPECT_TRUE(std::isnan(polygamma_value(3, kNaN)));
}

// The ops compute in float64 and round once: float32 results are the rounded float64 values,
// integers and bools are float32, a strided input of many parallel chunks matches too.
TEST(SpecialMath, OpsRoundTheFloat64ValuesOnce_ForEveryDtype) {
  const std::vector<double> points = {0.3, 1.0, 2.5, -1.5, 7.25, 0.0, -3.0, 40.0, 0.999};
  const auto scalar = [](const char* op, double x) {
    const std::string name = op;
    if (name == "Erfinv") return erfinv_value(x);
    if (name == "Lgamma") return lgamma_value(x);
    if (name == "Digamma") return digamma_value(x);
    return polygamma_value(2, x);
  };
  const auto run = [](const char* op, const Tensor& x) {
    const std::string name = op;
    if (name == "Erfinv") return erfinv(x);
    if (name == "Lgamma") return lgamma(x);
    if (name == "Digamma") return digamma(x);
    return polygamma(2, x);
  };
  for (const char* op : {"Erfinv", "Lgamma", "Digamma", "Polygamma"}) {
    SCOPED_TRACE(op);
    const Tensor y64 = run(op, tensor_of(points));
    const Tensor y32 = run(op, tensor_of(points, f32));
    ASSERT_EQ(y32.dtype(), f32);
    for (size_t i = 0; i < points.size(); ++i) {
      const double want = scalar(op, points[i]);
      const double got = y64.data<double>()[i];
      EXPECT_TRUE(got == want || (std::isnan(want) && std::isnan(got))) << points[i];
      const float want32 = static_cast<float>(scalar(op, static_cast<float>(points[i])));
      const float got32 = y32.data<float>()[i];
      EXPECT_TRUE(got32 == want32 || (std::isnan(want32) && std::isnan(got32))) << points[i];
    }
    // Integers and bools as float32 (1 and 0 are in every op's domain or at a pole).
    const Tensor ints = run(op, tensor_of({1, 0}, DType::kInt32));
    EXPECT_EQ(ints.dtype(), f32);
    testing::expect_close(ints, run(op, tensor_of({1, 0}, f32)), 0.0);
    testing::expect_close(run(op, tensor_of({1, 0}, DType::kBool)), ints, 0.0);
    const std::vector<double> fractions = {0.25, 0.5, 0.75};
    const Tensor half = run(op, tensor_of(fractions, DType::kFloat16));
    EXPECT_EQ(half.dtype(), DType::kFloat16);
    testing::expect_close(to(half, f64), run(op, tensor_of(fractions)), 1e-3);
  }
  // 300 x 400 read transposed: many parallel chunks, one strided loop each.
  const Tensor big = (rand({300, 400}, f64) * 1.8 - 0.9).transpose(0, 1);
  const Tensor got = erfinv(big);
  const Tensor x = big.contiguous();
  const Tensor y = got.contiguous();
  for (int64_t i = 0; i < x.numel(); i += 997) {
    EXPECT_EQ(y.data<double>()[i], erfinv_value(x.data<double>()[i]));
  }
}

TEST(SpecialMath, PolygammaRefusesNegativeOrders) {
  testing::expect_error([] { polygamma(-1, ones({2}, f64)); }, ErrorKind::kValue,
                        "Polygamma: expected n >= 0, got -1");
  const Tensor out = zeros({2}, f64);
  EXPECT_TRUE(polygamma(1, ones({2}, f64), out).is_same(out));
  testing::expect_close(out, tensor_of({kPi * kPi / 6, kPi * kPi / 6}), 4e-16);
}

}  // namespace
}  // namespace kiln
