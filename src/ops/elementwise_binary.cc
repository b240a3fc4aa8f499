// Binary arithmetic ops with NumPy broadcasting and weak-scalar promotion: add, sub, mul, div,
// floor_divide, trunc_divide, remainder, fmod, atan2, pow, maximum, minimum, the C++ operators,
// and the backward ops of sigmoid, tanh, relu and silu (one pass where their gradient formulas
// compose two to five ops). One table row per op; the loops are in ops/elementwise.h.
#include <array>
#include <cmath>
#include <limits>
#include <string_view>
#include <type_traits>
#include <utility>

#include "kiln/functional/elementwise.h"
#include "kiln/functional/factory.h"
#include "ops/elementwise.h"
#include "ops/scalar_range.h"

namespace kiln {
namespace elementwise {
namespace {

using B = simd::BinaryOp;

// Derivative helpers of the table below, written with ops (see Note [Gradient rules]). `n` says
// which of a's and b's gradients are needed; `both` evaluates only those expressions.
#define KILN_BOTH(ga, gb) \
  std::array<Tensor, 2> { n[0] ? Tensor(ga) : Tensor(), n[1] ? Tensor(gb) : Tensor() }

// From the operands, not the result (as PyTorch), so that an in-place write into the result
// (`y = a / b; y += 1`) leaves the gradient alone.
std::array<Tensor, 2> div_grads(const Tensor& a, const Tensor& b, const Tensor& g,
                                std::array<bool, 2> n) {
  const Tensor ga = g / b;
  return KILN_BOTH(ga, -(ga * a) / b);  // d(a / b)/db = -a / b^2
}

// As PyTorch: d/da is 0 where b == 0 (also at a == 0), d/db is 0 where a == 0 and b >= 0 (the
// one-sided limit), so that x ** 0 and 0 ** y give finite gradients.
std::array<Tensor, 2> pow_grads(const Tensor& a, const Tensor& b, const Tensor& y, const Tensor& g,
                                std::array<bool, 2> n) {
  const Tensor zero = Tensor::scalar(0.0);
  // A Python number (base or exponent) as a strong 0-d tensor of the result's compute dtype, what
  // the forward computed with (float32 for a 16-bit result: Note [Scalars of 16-bit ops]; among
  // weak scalars alone, log(2) and b - 1 would compute in float32 whatever the result's dtype).
  const auto strong = [&](const Tensor& t) {
    return t.is_weak_scalar() ? zeros({}, compute_dtype(y.dtype())) + t : t;
  };
  // d/da = b a^(b-1), and 0 where b == 0 (a^0 is constant), even at a == 0, where a^(b-1) is inf.
  // The selections act on b alone, so a scalar exponent costs three passes over a, not five.
  const auto da = [&] {
    const Tensor e = strong(b);
    const Tensor int_zero = Tensor::scalar(0);  // keeps e's dtype, integral or floating
    const Tensor e_zero = eq(e, int_zero);
    return g * (where(e_zero, int_zero, e) * pow(a, where(e_zero, int_zero, e - 1)));
  };
  return KILN_BOTH(da(), g * where(logical_and(eq(a, Tensor::scalar(0)), ge(b, Tensor::scalar(0))),
                                   zero, y * log(strong(a))));
}

// SigmoidBackward(g, y) = g y (1 - y) is linear in g; in y its derivative is g (1 - 2 y).
std::array<Tensor, 2> sigmoid_backward_grads(const Tensor& a, const Tensor& b, const Tensor& g,
                                             std::array<bool, 2> n) {
  return KILN_BOTH(sigmoid_backward(g, b), g * a * (1.0 - b * 2.0));
}

// TanhBackward(g, y) = g (1 - y)(1 + y) is linear in g; in y its derivative is -2 g y.
std::array<Tensor, 2> tanh_backward_grads(const Tensor& a, const Tensor& b, const Tensor& g,
                                          std::array<bool, 2> n) {
  return KILN_BOTH(tanh_backward(g, b), g * a * (b * -2.0));
}

// ReluBackward(g, x) = x <= 0 ? 0 : g is linear in g and piecewise constant in x (zero gradient,
// as the table's other piecewise-constant ops give).
std::array<Tensor, 2> relu_backward_grads(const Tensor& b, const Tensor& g, std::array<bool, 2> n) {
  return KILN_BOTH(relu_backward(g, b), zeros_like(g));
}

// SiluBackward(g, x) = g silu'(x) is linear in g; in x its derivative is g silu''(x), silu''(x) =
// s (1 - s) (2 + x (1 - 2 s)). Infinite x is clamped to the largest finite value, where s (1 - s)
// is already exactly 0, which keeps inf * 0 out; float32 at least keeps x (1 - 2 s) in range for
// float16.
std::array<Tensor, 2> silu_backward_grads(const Tensor& a, const Tensor& b, const Tensor& g,
                                          std::array<bool, 2> n) {
  const auto second = [&] {
    const DType cd = compute_dtype(b.dtype());
    const double largest = cd == DType::kFloat64 ? std::numeric_limits<double>::max()
                                                 : std::numeric_limits<float>::max();
    const Tensor x = clamp(to(b, cd), Scalar(-largest), Scalar(largest));
    const Tensor s = sigmoid(x);
    return s * (1.0 - s) * (x * (1.0 - s * 2.0) + 2.0);
  };
  // second() first: it is float32 at least, and a float16 g * a could overflow before meeting
  // a zero second derivative.
  return KILN_BOTH(silu_backward(g, b), second() * a * g);
}

// d atan2(a, b) / da = b / (a^2 + b^2), d / db = -a / (a^2 + b^2), as PyTorch's (nan at a = b =
// 0). Formed in the compute dtype, so that a^2 + b^2 does not overflow float16 where the
// gradient is representable (the rule converts them to the operands' dtypes).
std::array<Tensor, 2> atan2_grads(const Tensor& a, const Tensor& b, const Tensor& y,
                                  const Tensor& g, std::array<bool, 2> n) {
  const DType cd = compute_dtype(y.dtype());
  const Tensor ac = to(a, cd), bc = to(b, cd);
  const Tensor scaled = to(g, cd) / (ac * ac + bc * bc);
  return KILN_BOTH(scaled * bc, -(scaled * ac));
}

/// C's fmod: a - trunc(a / b) * b, with the sign of a. Integers: b != 0 is checked first; b ==
/// -1 gives 0 (INT_MIN % -1 would overflow).
template <typename C>
C fmod_value(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    if constexpr (std::is_signed_v<C>) {
      if (b == C(-1)) return C(0);
    }
    return static_cast<C>(a % b);
  } else {
    return std::fmod(a, b);
  }
}

// maximum (kMax) / minimum: the gradient goes to the selected operand, split evenly on ties (as
// in PyTorch); where either is nan both get it.
template <bool kMax>
std::array<Tensor, 2> extremum_grads(const Tensor& a, const Tensor& b, const Tensor& g,
                                     std::array<bool, 2> n) {
  const Tensor zero = Tensor::scalar(0.0);
  const Tensor shared = where(eq(a, b), g * 0.5, g);
  return KILN_BOTH(where(kMax ? lt(a, b) : gt(a, b), zero, shared),
                   where(kMax ? gt(a, b) : lt(a, b), zero, shared));
}

// Each row: function, primitive, dtype rule, Highway kernel, the result as an expression of `a`
// and `b` in the compute type C, the check on b made before computing, the gradients of a and b
// (in the result's shape) as an expression of the tensors a, b, y (the result) and g (y's
// gradient), and the documentation. floor_divide and trunc_divide are piecewise constant: zero
// gradients.
#define KILN_ARITHMETIC_OPS(X)                                                                    \
  X(add, Add, kPromote, B::kAdd, wrapping_add(a, b), kNone, KILN_BOTH(g, g),                      \
    "a + b (bool + bool is logical or; integers wrap around)")                                    \
  X(sub, Sub, kPromoteNoBool, B::kSub, wrapping_sub(a, b), kNone, KILN_BOTH(g, -g),               \
    "a - b (bool - bool is a DTypeError, as in NumPy: use logical_xor; a bool beside a number "   \
    "promotes, so 1 - mask is int64)")                                                            \
  X(mul, Mul, kPromote, B::kMul, wrapping_mul(a, b), kNone, KILN_BOTH(g* b, g* a),                \
    "a * b (bool * bool is logical and; integers wrap around)")                                   \
  X(div, Div, kFloating, B::kDiv, a / b, kNone, div_grads(a, b, g, n),                            \
    "true division a / b (the default floating dtype for integers)")                              \
  X(floor_divide, FloorDivide, kPromoteNoBool, B::kFloorDivide, floor_divide_value(a, b),         \
    kNonzeroIntDivisor, KILN_BOTH(zeros_like(g), zeros_like(g)),                                  \
    "a // b rounded toward -inf, as Python; integer division by zero is a "                       \
    "KilnValueError")                                                                             \
  X(trunc_divide, TruncDivide, kPromoteNoBool, B::kTruncDivide, trunc_divide_value(a, b),         \
    kNonzeroIntDivisor, KILN_BOTH(zeros_like(g), zeros_like(g)),                                  \
    "a / b rounded toward zero (PyTorch's div with rounding_mode='trunc'; a 16-bit quotient is "  \
    "truncated in float32 and rounded once); integer division by zero is a KilnValueError")       \
  X(remainder, Remainder, kPromoteNoBool, B::kRemainder, remainder_value(a, b),                   \
    kNonzeroIntDivisor, KILN_BOTH(g, -(g * floor_divide(a, b))),                                  \
    "a % b with the sign of b, as Python; integer modulo by zero is a "                           \
    "KilnValueError")                                                                             \
  X(fmod, Fmod, kPromoteNoBool, kNoSimdBinary, fmod_value(a, b), kNonzeroIntDivisor,              \
    KILN_BOTH(g, -(g * trunc_divide(a, b))),                                                      \
    "C's fmod: a - trunc(a / b) * b, with the sign of a; integer modulo by zero is a "            \
    "KilnValueError")                                                                             \
  X(atan2, Atan2, kFloating, kNoSimdBinary, std::atan2(a, b), kNone, atan2_grads(a, b, y, g, n),  \
    "the angle of the point (b, a) in radians, in [-pi, pi]: atan(a / b) in its quadrant "        \
    "(the default floating dtype for integers)")                                                  \
  X(pow, Pow, kPromoteNoBool, B::kPow, power_value(a, b), kNonnegativeIntExponent,                \
    pow_grads(a, b, y, g, n),                                                                     \
    "a ** b; integers to negative integer powers are a KilnValueError (as NumPy)")                \
  X(maximum, Maximum, kPromote, B::kMaximum, maximum_value(a, b), kNumberFits,                    \
    extremum_grads<true>(a, b, g, n),                                                             \
    "the larger of a and b; nan if either is nan (numpy.maximum); a Python int beside an "        \
    "integer tensor must fit its dtype")                                                          \
  X(minimum, Minimum, kPromote, B::kMinimum, minimum_value(a, b), kNumberFits,                    \
    extremum_grads<false>(a, b, g, n),                                                            \
    "the smaller of a and b; nan if either is nan (numpy.minimum); a Python int beside an "       \
    "integer tensor must fit its dtype")                                                          \
  X(sigmoid_backward, SigmoidBackward, kFloating, B::kSigmoidBackward, a*(b * (C(1) - b)), kNone, \
    sigmoid_backward_grads(a, b, g, n),                                                           \
    "grad_output * y * (1 - y) for y = sigmoid(x): Sigmoid's input gradient in one pass")         \
  X(tanh_backward, TanhBackward, kFloating, B::kTanhBackward, a*((C(1) - b) * (C(1) + b)), kNone, \
    tanh_backward_grads(a, b, g, n),                                                              \
    "grad_output * (1 - y) * (1 + y) for y = tanh(x): Tanh's input gradient in one pass")         \
  X(relu_backward, ReluBackward, kFloating, B::kReluBackward, b <= C(0) ? C(0) : a, kNone,        \
    relu_backward_grads(b, g, n),                                                                 \
    "grad_output unless x <= 0, where 0 (as PyTorch: at 0 it is 0, at nan grad_output)")          \
  X(silu_backward, SiluBackward, kFloating, B::kSiluBackward, a* silu_derivative_value(b), kNone, \
    silu_backward_grads(a, b, g, n),                                                              \
    "grad_output * s * (1 + x * (1 - s)) for s = sigmoid(x): Silu's input gradient in one pass")

#define KILN_BINARY_FUNCTOR(name, Prim, rule, simd_op, expr, check, dx, doc) \
  struct Prim##Fn {                                                      \
    template <typename C>                                                \
    auto operator()(C a, C b) const {                                    \
      return expr;                                                       \
    }                                                                    \
  };
KILN_ARITHMETIC_OPS(KILN_BINARY_FUNCTOR)
#undef KILN_BINARY_FUNCTOR

// Add's and Sub's gradients (g, +-g) read neither operand: an in-place `y += b` under autograd
// keeps no copy of y.
constexpr uint32_t gradient_traits(std::string_view prim) {
  return prim == "Add" || prim == "Sub" ? uint32_t{kTraitGradIgnoresFirstInput} : 0u;
}

#define KILN_BINARY_REGISTER(name, Prim, rule, simd_op, expr, check, dx, doc)                  \
  KILN_REGISTER_OP((binary_def<Prim##Fn, BinaryRule::rule, OperandCheck::check>(               \
                        #Prim, simd_op, doc,                                                   \
                        [](const Tensor& a, const Tensor& b, const Tensor& y, const Tensor& g, \
                           std::array<bool, 2> n) -> std::array<Tensor, 2> { return dx; })     \
                        .traits(gradient_traits(#Prim))));
KILN_ARITHMETIC_OPS(KILN_BINARY_REGISTER)
#undef KILN_BINARY_REGISTER

}  // namespace
}  // namespace elementwise

#define KILN_BINARY_FUNCTION(name, Prim, rule, simd_op, expr, check, dx, doc)                   \
  Tensor name(const Tensor& a, const Tensor& b, const Tensor& out) {                            \
    static const OpDefPtr op = OpRegistry::Instance().get(#Prim);                               \
    if constexpr (elementwise::OperandCheck::check == elementwise::OperandCheck::kNumberFits) { \
      elementwise::check_number_fits(#Prim, a, b);                                              \
    }                                                                                           \
    return elementwise::call_elementwise(*op, {a, b}, out);                                     \
  }
KILN_ARITHMETIC_OPS(KILN_BINARY_FUNCTION)
#undef KILN_BINARY_FUNCTION
#undef KILN_ARITHMETIC_OPS
#undef KILN_BOTH

namespace {

// The number a weak scalar holds (a Python number), or none for a tensor.
std::optional<Scalar> number_of(const Tensor& t) {
  if (!t.defined() || !t.is_weak_scalar()) return std::nullopt;
  return detail::scalar_value(t);
}

}  // namespace

Tensor clamp(const Tensor& x, const Tensor& lo, const Tensor& hi, const Tensor& out) {
  KILN_CHECK_VALUE(lo.defined() || hi.defined())
      << "clamp: expected at least one of min and max, got neither";
  // A number bound takes the scalar form, which compares it exactly in any dtype (maximum would
  // convert 300 to a uint8 x's dtype, wrapping it) and passes the gradient at the bound.
  const std::optional<Scalar> lo_number = number_of(lo);
  const std::optional<Scalar> hi_number = number_of(hi);
  const bool lo_tensor = lo.defined() && !lo_number;
  const bool hi_tensor = hi.defined() && !hi_number;
  if (!lo_tensor && !hi_tensor) return clamp(x, lo_number, hi_number, out);
  if (!hi_tensor) {
    return hi_number ? clamp(maximum(x, lo), std::nullopt, hi_number, out) : maximum(x, lo, out);
  }
  const Tensor floored = lo_tensor   ? maximum(x, lo)
                         : lo_number ? clamp(x, lo_number, std::nullopt)
                                     : x;
  return minimum(floored, hi, out);
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, Tensor::scalar(b)); }
Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, Tensor::scalar(b)); }
Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, Tensor::scalar(b)); }
Tensor operator/(const Tensor& a, const Scalar& b) { return div(a, Tensor::scalar(b)); }
Tensor operator+(const Scalar& a, const Tensor& b) { return add(Tensor::scalar(a), b); }
Tensor operator-(const Scalar& a, const Tensor& b) { return sub(Tensor::scalar(a), b); }
Tensor operator*(const Scalar& a, const Tensor& b) { return mul(Tensor::scalar(a), b); }
Tensor operator/(const Scalar& a, const Tensor& b) { return div(Tensor::scalar(a), b); }

}  // namespace kiln
