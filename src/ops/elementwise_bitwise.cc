// Bitwise ops on integer and bool tensors, with NumPy broadcasting and weak-scalar promotion:
// bitwise_and, bitwise_or, bitwise_xor, bitwise_not (bools: the logical ops) and the shifts
// bitwise_left_shift, bitwise_right_shift (integers only). Floating-point operands are a
// DTypeError. The results are integers, so the ops have no gradient. One table row per op; the
// loops are in ops/elementwise.h.
#include <climits>
#include <type_traits>

#include "kiln/functional/elementwise.h"
#include "ops/elementwise.h"

namespace kiln {
namespace elementwise {
namespace {

// A shift by a negative amount or by the type's width or more is undefined in C++; PyTorch defines
// it as shifting every bit out: 0 to the left, the sign bit's fill (0 or -1) to the right. The
// left shift runs in the unsigned type, where the bits shifted out of a negative value wrap
// instead of being undefined behaviour.
template <typename C>
bool shifts_every_bit_out(C b) {
  if constexpr (std::is_signed_v<C>) {
    if (b < 0) return true;
  }
  return b >= C(sizeof(C) * CHAR_BIT);
}

template <typename C>
C shift_left(C a, C b) {
  if (shifts_every_bit_out(b)) return C(0);
  using W = wide_unsigned_t<C>;
  return static_cast<C>(static_cast<W>(a) << b);
}

template <typename C>
C shift_right(C a, C b) {
  if (shifts_every_bit_out(b)) {
    if constexpr (std::is_signed_v<C>) return a < 0 ? C(-1) : C(0);
    return C(0);
  }
  return static_cast<C>(a >> b);  // arithmetic for signed types (GCC and Clang; C++20 requires it)
}

template <typename C>
C bitwise_not_value(C x) {
  if constexpr (std::is_same_v<C, bool>) {
    return !x;
  } else {
    return static_cast<C>(~x);
  }
}

// Each row: function, primitive, dtype rule, the result as an expression of `a` and `b` in the
// element type C (the operands' promoted dtype), and the documentation.
#define KILN_BITWISE_BINARY_OPS(X)                                                              \
  X(bitwise_and, BitwiseAnd, kIntegral, static_cast<C>(a & b),                                  \
    "a & b bit by bit (integers and bools; bool & bool is logical and)")                        \
  X(bitwise_or, BitwiseOr, kIntegral, static_cast<C>(a | b),                                    \
    "a | b bit by bit (integers and bools; bool | bool is logical or)")                         \
  X(bitwise_xor, BitwiseXor, kIntegral, static_cast<C>(a ^ b),                                  \
    "a ^ b bit by bit (integers and bools; bool ^ bool is logical xor)")                        \
  X(bitwise_left_shift, BitwiseLeftShift, kIntegralNoBool, shift_left(a, b),                    \
    "a << b (integers; bits shifted past the width are lost, and a shift by a negative amount " \
    "or by the width or more gives 0, as PyTorch)")                                             \
  X(bitwise_right_shift, BitwiseRightShift, kIntegralNoBool, shift_right(a, b),                 \
    "a >> b, arithmetic for signed integers (a shift by a negative amount or by the width or "  \
    "more gives 0, or -1 for a negative a, as PyTorch)")

#define KILN_BITWISE_FUNCTOR(name, Prim, rule, expr, doc) \
  struct Prim##Fn {                                       \
    template <typename C>                                 \
    C operator()(C a, C b) const {                        \
      return expr;                                        \
    }                                                     \
  };
KILN_BITWISE_BINARY_OPS(KILN_BITWISE_FUNCTOR)
#undef KILN_BITWISE_FUNCTOR

#define KILN_BITWISE_REGISTER(name, Prim, rule, expr, doc)                             \
  KILN_REGISTER_OP((binary_def<Prim##Fn, BinaryRule::rule, OperandCheck::kNumberFits>( \
      #Prim, kNoSimdBinary, doc)));
KILN_BITWISE_BINARY_OPS(KILN_BITWISE_REGISTER)
#undef KILN_BITWISE_REGISTER

struct BitwiseNotFn {
  template <typename C>
  C operator()(C x) const {
    return bitwise_not_value(x);
  }
};

KILN_REGISTER_OP((unary_def<BitwiseNotFn, UnaryRule::kIntegral>(
    "BitwiseNot", kNoSimdUnary, "~x bit by bit (integers; for bools, logical not)", nullptr)));

}  // namespace
}  // namespace elementwise

// A Python int must fit the integer tensor beside it: uint8 & 256 would otherwise compute with
// 256 wrapped to 0, and uint8 << 257 shift by 1.
#define KILN_BITWISE_FUNCTION(name, Prim, rule, expr, doc)           \
  Tensor name(const Tensor& a, const Tensor& b, const Tensor& out) { \
    static const OpDefPtr op = OpRegistry::Instance().get(#Prim);    \
    elementwise::check_number_fits(#Prim, a, b);                     \
    return elementwise::call_elementwise(*op, {a, b}, out);          \
  }
KILN_BITWISE_BINARY_OPS(KILN_BITWISE_FUNCTION)
#undef KILN_BITWISE_FUNCTION
#undef KILN_BITWISE_BINARY_OPS

Tensor bitwise_not(const Tensor& x, const Tensor& out) {
  static const OpDefPtr op = OpRegistry::Instance().get("BitwiseNot");
  return elementwise::call_elementwise(*op, {x}, out);
}

}  // namespace kiln
