// Scalar special functions of the elementwise op tables (private to libkiln): erfinv, lgamma,
// digamma, polygamma and the Hurwitz zeta function they rest on, in float64 (the float32 and
// 16-bit ops compute in float64 too and round once; erfinv's have a vector kernel, Note
// [erfinv]), following PyTorch's values at poles and domain edges.
//
//   const double x = kiln::elementwise::erfinv_value(0.5);      // 0.4769362762044699
//   const double t = kiln::elementwise::polygamma_value(1, 1.0);  // pi^2 / 6
//
// Each is a pure function: safe to call from any number of threads at once. (KILN_API for the
// tests.)
#pragma once

#include <cstdint>

#include "kiln/export.h"

namespace kiln::elementwise {

/// The inverse error function, to about 1 ulp: erfinv(erf(x)) = x. +-inf at +-1, nan outside
/// [-1, 1] and for nan; erfinv(-0) = -0.
KILN_API double erfinv_value(double y);

/// log |Gamma(x)|: inf at 0, at the negative integers and at +-inf, nan for nan.
KILN_API double lgamma_value(double x);

/// digamma(x) = Gamma'(x) / Gamma(x), with PyTorch's conventions: -inf at +0, +inf at -0, nan at
/// the negative integers and at -inf, inf at +inf.
KILN_API double digamma_value(double x);

/// The Hurwitz zeta function zeta(s, q) = sum over k >= 0 of (q + k)^-s (Cephes' zeta, as
/// PyTorch's): inf for s = 1 and at the integers q <= 0, nan for s < 1, and for q < 0 with a
/// non-integer s; 0 at q = +inf, nan at q = -inf.
KILN_API double hurwitz_zeta(double s, double q);

/// The n-th derivative of digamma, n >= 0 (the caller checks it): digamma for n = 0, else
/// (-1)^(n+1) n! zeta(n + 1, x). At 0 and the negative integers inf for odd n and -inf for even n
/// (as PyTorch's for n >= 2), 0 at +inf, nan at -inf.
KILN_API double polygamma_value(int64_t n, double x);

}  // namespace kiln::elementwise
