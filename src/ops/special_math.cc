// The scalar special functions of ops/special_math.h.
#include "ops/special_math.h"

#include <math.h>  // lgamma_r

#include <cmath>
#include <limits>

#include "ops/normal_quantile.h"

namespace kiln::elementwise {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// The float64 epsilon / 2 (Cephes' MACHEP), where zeta's sums stop.
constexpr double kMachineEpsilon = 1.11022302462515654042e-16;

/// a[0] z^(n-1) + ... + a[n-1], by Horner's rule (Cephes' polevl).
template <int N>
double polynomial(double z, const double (&a)[N]) {
  double r = a[0];
  for (int i = 1; i < N; ++i) r = r * z + a[i];
  return r;
}

/// erfinv(a) for 0 <= a < 1, to 6 ulp (1e-15 relative) at worst: Wichura's normal quantile
/// (ops/normal_quantile.h), erfinv(a) = ndtri((1 + a) / 2) / sqrt(2), in q = a / 2 up to
/// kCentralLimit and in s = sqrt(-log((1 - a) / 2)) above, both arguments exact (1 - a loses
/// nothing above a = 0.5). simd/vec_math-inl.h's erfinv_of_float is the same in vector lanes.
double erfinv_quantile(double a) {
  using namespace normal_quantile;  // NOLINT: the coefficient tables
  constexpr double kOneOverSqrtTwo = 0.70710678118654752440;
  const double q = a * 0.5;
  if (q <= kCentralLimit) {
    const double r = kCentralShift - q * q;
    // ndtri = q num / den; a itself rather than q keeps a subnormal's last bit.
    return a * (polynomial(r, kCentralNum) / polynomial(r, kCentralDen)) * (0.5 * kOneOverSqrtTwo);
  }
  const double s = std::sqrt(-std::log((1.0 - a) * 0.5));
  const double z = s <= kFarFrom
                       ? polynomial(s - kNearShift, kNearNum) / polynomial(s - kNearShift, kNearDen)
                       : polynomial(s - kFarFrom, kFarNum) / polynomial(s - kFarFrom, kFarDen);
  return z * kOneOverSqrtTwo;
}

}  // namespace

// Note [erfinv]
// Wichura's quantile (erfinv_quantile) is within 6 ulp of erfinv. float32 rounds it, far inside
// its own ulp: the float32 op (and the 16-bit ones, computed in float32) runs it in float64
// vector lanes (simd::UnaryOp::kErfinv), a rational function and at most a log and a sqrt per
// element. The float64 op refines it by one Halley step on erf(x) = a, which converges cubically:
// with u = f / f' and f'' / f' = -2x, x <- x - u / (1 + x u). Above a = 0.7 the step solves
// erfc(x) = 1 - a instead, 1 - a being exact there: erf(x) - a near 1 would keep only the
// absolute error of erf(x), 1 / erfc(x) times the relative error wanted. Against mpmath the
// result is within 1.5 ulp over [0, 1).
double erfinv_value(double y) {
  const double a = std::abs(y);
  if (!(a <= 1.0)) return kNaN;  // |y| > 1, and nan
  if (a == 1.0) return std::copysign(kInf, y);
  double x = erfinv_quantile(a);
  const double residual = a <= 0.7 ? std::erf(x) - a : (1.0 - a) - std::erfc(x);
  const double u = residual / (kTwoOverSqrtPi * std::exp(-x * x));
  x -= u / (1.0 + x * u);
  return std::copysign(x, y);  // odd, -0 included
}

double lgamma_value(double x) {
#if defined(_WIN32)
  return std::lgamma(x);  // the UCRT's writes no global sign
#else
  // std::lgamma also stores the sign of Gamma(x) in the global `signgam` (glibc, musl, the BSDs),
  // a data race between the threads of a parallel loop; lgamma_r returns it instead.
  int sign = 0;
  return ::lgamma_r(x, &sign);
#endif
}

// Cephes' psi, as PyTorch's calc_digamma: reflection below 0, the recurrence
// digamma(x) = digamma(x + 1) - 1 / x up to x >= 10, then the asymptotic series
// log(x) - 1 / (2x) - sum of B_2k / (2k x^2k).
double digamma_value(double x) {
  if (x == 0) return std::copysign(kInf, -x);  // PyTorch's: the limit from the side of the zero
  double result = 0.0;
  if (x < 0) {
    if (x == std::trunc(x)) return kNaN;  // the poles, and -inf
    // digamma(x) = digamma(1 - x) - pi / tan(pi x), with tan of x's fractional part: pi * x
    // itself would lose digits for |x| > 1.
    double whole;
    result = -kPi / std::tan(kPi * std::modf(x, &whole));
    x = 1.0 - x;
  }
  while (x < 10.0) {
    result -= 1.0 / x;
    x += 1.0;
  }
  if (x == 10.0) return result + 2.25175258906672110764;  // digamma(10)
  static constexpr double kBernoulli[] = {8.33333333333333333333e-2, -2.10927960927960927961e-2,
                                          7.57575757575757575758e-3, -4.16666666666666666667e-3,
                                          3.96825396825396825397e-3, -8.33333333333333333333e-3,
                                          8.33333333333333333333e-2};
  double series = 0.0;
  if (x < 1.0e17) {  // beyond, the series is below half an ulp of log(x)
    const double z = 1.0 / (x * x);
    series = z * polynomial(z, kBernoulli);
  }
  return result + std::log(x) - 0.5 / x - series;
}

namespace {

/// a^-s, by squaring for an integer s up to 64 (polygamma's s = n + 1), within a few ulps:
/// polygamma(1, x) took 3x the time with std::pow (200 ns an element, 65 ns so).
double inverse_power(double a, double s) {
  if (s != std::floor(s) || s > 64) return std::pow(a, -s);
  double power = 1.0;
  double square = a;
  for (auto e = static_cast<unsigned>(s); e != 0; e >>= 1) {
    if (e & 1u) power *= square;
    square *= square;
  }
  return 1.0 / power;
}

/// Cephes' zeta(s, q) (PyTorch's zeta), here for q > -1: the terms (q + k)^-s summed directly
/// until q + k > 9 (at least 9 of them), then the Euler-Maclaurin tail.
double cephes_zeta(double s, double q) {
  // (2k)! / B_2k: the Euler-Maclaurin coefficients.
  static constexpr double kA[] = {12.0,
                                  -720.0,
                                  30240.0,
                                  -1209600.0,
                                  47900160.0,
                                  -1.8924375803183791606e9,
                                  7.47242496e10,
                                  -2.950130727918164224e12,
                                  1.1646782814350067249e14,
                                  -4.5979787224074726105e15,
                                  1.8152105401943546773e17,
                                  -7.1661652561756670113e18};
  double sum = inverse_power(q, s);
  double a = q;
  double b = 0.0;
  for (int i = 0; i < 9 || a <= 9.0;) {
    ++i;
    a += 1.0;
    b = inverse_power(a, s);
    sum += b;
    if (std::abs(b) < kMachineEpsilon * std::abs(sum)) return sum;
  }
  const double w = a;
  sum += b * w / (s - 1.0);
  sum -= 0.5 * b;
  double factor = 1.0;
  double k = 0.0;
  for (double coefficient : kA) {
    factor *= s + k;
    b /= w;
    const double term = factor * b / coefficient;
    sum += term;
    if (std::abs(term / sum) < kMachineEpsilon) break;
    k += 1.0;
    factor *= s + k;
    b /= w;
    k += 1.0;
  }
  return sum;
}

}  // namespace

// Note [Hurwitz zeta of a negative q]
// For q < 0 Cephes sums the terms from q upward, one per unit of |q| (PyTorch's zeta ran 1e6
// pow calls for q = -1e6, and would never end for q = -1e15). For q <= -1 and an integer s the
// terms below 0 are instead folded onto the positive side: with r = q - floor(q) in (0, 1), the
// terms (q + k)^-s for q + k < 0 are (-1)^s (j + 1 - r)^-s for j = 0 .. -floor(q) - 1, so
//   zeta(s, q) = zeta(s, r) + (-1)^s zeta(s, 1 - r) - (-1)^s zeta(s, 1 - q),
// three sums of bounded length. r and 1 - r are exact for |q| >= 1; the last term only corrects
// the far end. (-1 < q < 0 keeps the direct sum, ten terms long, where r = q + 1 would round.)
double hurwitz_zeta(double s, double q) {
  if (std::isnan(s) || std::isnan(q) || s < 1.0) return kNaN;
  if (s == 1.0) return kInf;
  if (q == kInf) return 0.0;
  if (q <= 0.0) {
    if (q == std::floor(q)) return q == -kInf ? kNaN : kInf;  // a pole
    if (s != std::floor(s)) return kNaN;                      // (q + k)^-s not real
  }
  if (q > -1.0) return cephes_zeta(s, q);
  const double r = q - std::floor(q);
  const double sign = std::fmod(s, 2.0) != 0.0 ? -1.0 : 1.0;  // (-1)^s
  // The reflection pair first: where it cancels (r near 1/2, an odd s) the tail keeps its digits.
  const double reflected = cephes_zeta(s, r) + sign * cephes_zeta(s, 1.0 - r);
  return reflected - sign * cephes_zeta(s, 1.0 - q);
}

double polygamma_value(int64_t n, double x) {
  if (n == 0) return digamma_value(x);
  const double order = static_cast<double>(n) + 1.0;
  const double zeta = hurwitz_zeta(order, x);
  // 0 at +inf (and where zeta underflows), with the function's sign, whatever n! is.
  if (zeta == 0.0) return n % 2 == 1 ? 0.0 : -0.0;
  // n!, exact up to 22!; from 171! on it overflows, and the result with it (even where finite).
  double factorial = 1.0;
  for (int64_t k = 2; k <= n && factorial != kInf; ++k) factorial *= static_cast<double>(k);
  return (n % 2 == 1 ? 1.0 : -1.0) * factorial * zeta;
}

}  // namespace kiln::elementwise
