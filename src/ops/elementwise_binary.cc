// Binary arithmetic ops with NumPy broadcasting and weak-scalar promotion: add, sub, mul, div,
// floor_divide, remainder, pow, maximum, minimum, and the C++ operators. One table row per op;
// the loops are in ops/elementwise.h.
#include "kiln/functional/elementwise.h"
#include "ops/elementwise.h"

namespace kiln {
namespace elementwise {
namespace {

using B = simd::BinaryOp;

// Each row: function, primitive, dtype rule, Highway kernel, the result as an expression of `a`
// and `b` in the compute type C, the check on b made before computing, and the documentation.
#define KILN_ARITHMETIC_OPS(X)                                                                \
  X(add, Add, kPromote, B::kAdd, wrapping_add(a, b), kNone,                                   \
    "a + b (bool + bool is logical or; integers wrap around)")                                \
  X(sub, Sub, kPromoteNoBool, B::kSub, wrapping_sub(a, b), kNone,                             \
    "a - b (bool operands are a DTypeError; use logical_xor)")                                \
  X(mul, Mul, kPromote, B::kMul, wrapping_mul(a, b), kNone,                                   \
    "a * b (bool * bool is logical and; integers wrap around)")                               \
  X(div, Div, kFloating, B::kDiv, a / b, kNone, "true division a / b (float32 for integers)") \
  X(floor_divide, FloorDivide, kPromoteNoBool, kNoSimdBinary, floor_divide_value(a, b),       \
    kNonzeroIntDivisor,                                                                       \
    "a // b rounded toward -inf, as Python; integer division by zero is a "                   \
    "KilnValueError")                                                                         \
  X(remainder, Remainder, kPromoteNoBool, kNoSimdBinary, remainder_value(a, b),               \
    kNonzeroIntDivisor,                                                                       \
    "a % b with the sign of b, as Python; integer modulo by zero is a "                       \
    "KilnValueError")                                                                         \
  X(pow, Pow, kPromoteNoBool, B::kPow, power_value(a, b), kNonnegativeIntExponent,            \
    "a ** b; integers to negative integer powers are a KilnValueError (as NumPy)")            \
  X(maximum, Maximum, kPromote, B::kMaximum, maximum_value(a, b), kNone,                      \
    "the larger of a and b; nan if either is nan (numpy.maximum)")                            \
  X(minimum, Minimum, kPromote, B::kMinimum, minimum_value(a, b), kNone,                      \
    "the smaller of a and b; nan if either is nan (numpy.minimum)")

#define KILN_BINARY_FUNCTOR(name, Prim, rule, simd_op, expr, check, doc) \
  struct Prim##Fn {                                                      \
    template <typename C>                                                \
    auto operator()(C a, C b) const {                                    \
      return expr;                                                       \
    }                                                                    \
  };
KILN_ARITHMETIC_OPS(KILN_BINARY_FUNCTOR)
#undef KILN_BINARY_FUNCTOR

#define KILN_BINARY_REGISTER(name, Prim, rule, simd_op, expr, check, doc) \
  KILN_REGISTER_OP(                                                       \
      (binary_def<Prim##Fn, BinaryRule::rule, OperandCheck::check>(#Prim, simd_op, doc)));
KILN_ARITHMETIC_OPS(KILN_BINARY_REGISTER)
#undef KILN_BINARY_REGISTER

}  // namespace
}  // namespace elementwise

#define KILN_BINARY_FUNCTION(name, Prim, rule, simd_op, expr, check, doc) \
  Tensor name(const Tensor& a, const Tensor& b, const Tensor& out) {      \
    static const OpDefPtr op = OpRegistry::Instance().get(#Prim);         \
    return elementwise::call_elementwise(*op, {a, b}, out);               \
  }
KILN_ARITHMETIC_OPS(KILN_BINARY_FUNCTION)
#undef KILN_BINARY_FUNCTION
#undef KILN_ARITHMETIC_OPS

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
