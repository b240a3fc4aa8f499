// Elementwise ops: unary math, binary arithmetic and comparisons with NumPy broadcasting, where,
// clamp, casts, and C++ operators (part of kiln/functional.h).
//
// Binary ops promote with result_type() (weak Python scalars via Tensor::scalar or the Scalar
// overloads of the operators). Ops that are mathematically real (exp, div, sigmoid, ...) give
// the default floating dtype (default_float_dtype(): float32 unless changed) for bool and integer
// inputs; comparisons and logical ops give bool; bitwise ops take integers and bools only.
// float16 and bfloat16
// are computed in float32 and rounded once. Every function takes an optional `out`: when given
// (defined), the result is written there (its shape must match; its dtype may differ and the
// result is converted, under PyTorch's rule, kiln::can_write_result: no floating result into an
// integer or bool out, only bool into bool) and `out` is returned.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kiln/export.h"
#include "kiln/scalar.h"
#include "kiln/tensor.h"

namespace kiln {

#define KILN_DECLARE_UNARY(name) KILN_API Tensor name(const Tensor& x, const Tensor& out = {});
KILN_DECLARE_UNARY(neg)
KILN_DECLARE_UNARY(abs)
KILN_DECLARE_UNARY(sign)
KILN_DECLARE_UNARY(exp)
KILN_DECLARE_UNARY(expm1)
KILN_DECLARE_UNARY(log)
KILN_DECLARE_UNARY(log1p)
KILN_DECLARE_UNARY(log2)
KILN_DECLARE_UNARY(sqrt)
KILN_DECLARE_UNARY(rsqrt)
KILN_DECLARE_UNARY(reciprocal)
KILN_DECLARE_UNARY(square)
KILN_DECLARE_UNARY(sin)
KILN_DECLARE_UNARY(cos)
KILN_DECLARE_UNARY(tan)
KILN_DECLARE_UNARY(tanh)
KILN_DECLARE_UNARY(sigmoid)
KILN_DECLARE_UNARY(relu)
KILN_DECLARE_UNARY(silu)
KILN_DECLARE_UNARY(erf)
KILN_DECLARE_UNARY(erfc)  // 1 - erf(x), without the cancellation
KILN_DECLARE_UNARY(exp2)
KILN_DECLARE_UNARY(asin)  // nan outside [-1, 1]
KILN_DECLARE_UNARY(acos)  // nan outside [-1, 1]
KILN_DECLARE_UNARY(atan)
KILN_DECLARE_UNARY(sinh)
KILN_DECLARE_UNARY(cosh)
KILN_DECLARE_UNARY(asinh)
KILN_DECLARE_UNARY(acosh)  // nan below 1
KILN_DECLARE_UNARY(atanh)  // +-inf at +-1, nan outside [-1, 1]
KILN_DECLARE_UNARY(erfinv)   // erfinv(erf(x)) = x; +-inf at +-1, nan outside [-1, 1]
KILN_DECLARE_UNARY(lgamma)   // log |Gamma(x)|
KILN_DECLARE_UNARY(digamma)  // Gamma'(x) / Gamma(x); -inf at 0, nan at the negative integers
KILN_DECLARE_UNARY(floor)
KILN_DECLARE_UNARY(ceil)
KILN_DECLARE_UNARY(round)  // half to even, as NumPy
KILN_DECLARE_UNARY(trunc)  // toward zero
KILN_DECLARE_UNARY(logical_not)
KILN_DECLARE_UNARY(bitwise_not)  // integers and bool only (for bool, logical_not)
#undef KILN_DECLARE_UNARY

/// approximate: "none" (the erf form) or "tanh".
KILN_API Tensor gelu(const Tensor& x, const std::string& approximate = "none",
                     const Tensor& out = {});
/// The n-th derivative of digamma, (-1)^(n+1) n! zeta(n + 1, x) for n >= 1 (n = 0: digamma);
/// the default floating dtype for integer and bool x. Throws kValue for n < 0.
KILN_API Tensor polygamma(int64_t n, const Tensor& x, const Tensor& out = {});
/// min(max(x, lo), hi); either bound may be omitted (not both). NaN if x or a bound is NaN.
KILN_API Tensor clamp(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi,
                      const Tensor& out = {});
/// clamp with tensor bounds (an undefined one omitted), broadcast with x: minimum(maximum(x, lo),
/// hi), of their promoted dtype; hi wins where lo > hi, as in PyTorch. The gradient is maximum's
/// and minimum's, so an element equal to a tensor bound shares it with the bound. A weak scalar
/// bound (a Python number) acts as in the scalar form.
KILN_API Tensor clamp(const Tensor& x, const Tensor& lo, const Tensor& hi, const Tensor& out = {});

#define KILN_DECLARE_BINARY(name) \
  KILN_API Tensor name(const Tensor& a, const Tensor& b, const Tensor& out = {});
KILN_DECLARE_BINARY(add)
KILN_DECLARE_BINARY(sub)
KILN_DECLARE_BINARY(mul)
KILN_DECLARE_BINARY(div)           // true division
KILN_DECLARE_BINARY(floor_divide)  // rounds toward -inf, as Python's //
KILN_DECLARE_BINARY(trunc_divide)  // rounds toward zero (C's integer division)
KILN_DECLARE_BINARY(remainder)     // sign of the divisor, as Python's %
KILN_DECLARE_BINARY(fmod)          // sign of the dividend, as C's fmod
KILN_DECLARE_BINARY(atan2)         // the angle of the point (b, a): atan(a / b) in its quadrant
KILN_DECLARE_BINARY(pow)
KILN_DECLARE_BINARY(maximum)       // NaN-propagating
KILN_DECLARE_BINARY(minimum)
KILN_DECLARE_BINARY(sigmoid_backward)  // a * b * (1 - b): a = y's gradient, b = y = sigmoid(x)
KILN_DECLARE_BINARY(tanh_backward)     // a * (1 - b) * (1 + b): a = y's gradient, b = y = tanh(x)
KILN_DECLARE_BINARY(relu_backward)     // b <= 0 ? 0 : a: a = y's gradient, b = relu's input x
KILN_DECLARE_BINARY(silu_backward)     // a * silu'(b): a = y's gradient, b = silu's input x
KILN_DECLARE_BINARY(eq)
KILN_DECLARE_BINARY(ne)
KILN_DECLARE_BINARY(lt)
KILN_DECLARE_BINARY(le)
KILN_DECLARE_BINARY(gt)
KILN_DECLARE_BINARY(ge)
KILN_DECLARE_BINARY(logical_and)
KILN_DECLARE_BINARY(logical_or)
KILN_DECLARE_BINARY(logical_xor)
// Bitwise ops take integer and bool operands only (a DTypeError for floating point); the shifts
// take integers only. A shift by a negative amount or by the width or more shifts every bit out.
KILN_DECLARE_BINARY(bitwise_and)
KILN_DECLARE_BINARY(bitwise_or)
KILN_DECLARE_BINARY(bitwise_xor)
KILN_DECLARE_BINARY(bitwise_left_shift)
KILN_DECLARE_BINARY(bitwise_right_shift)
#undef KILN_DECLARE_BINARY

/// cond ? a : b, broadcasting all three; cond is converted to bool.
KILN_API Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b,
                      const Tensor& out = {});
/// A copy converted to `dtype` (primitive "Cast"); returns x itself when the dtype matches.
KILN_API Tensor to(const Tensor& x, DType dtype);

// C++ operators, for tests and C++ users. Scalars are weak (see kiln/scalar.h).
KILN_API Tensor operator+(const Tensor& a, const Tensor& b);
KILN_API Tensor operator-(const Tensor& a, const Tensor& b);
KILN_API Tensor operator*(const Tensor& a, const Tensor& b);
KILN_API Tensor operator/(const Tensor& a, const Tensor& b);
KILN_API Tensor operator-(const Tensor& a);
KILN_API Tensor operator+(const Tensor& a, const Scalar& b);
KILN_API Tensor operator-(const Tensor& a, const Scalar& b);
KILN_API Tensor operator*(const Tensor& a, const Scalar& b);
KILN_API Tensor operator/(const Tensor& a, const Scalar& b);
KILN_API Tensor operator+(const Scalar& a, const Tensor& b);
KILN_API Tensor operator-(const Scalar& a, const Tensor& b);
KILN_API Tensor operator*(const Scalar& a, const Tensor& b);
KILN_API Tensor operator/(const Scalar& a, const Tensor& b);

}  // namespace kiln
