// Comparisons and logical ops (bool results) with NumPy broadcasting and weak-scalar promotion:
// eq, ne, lt, le, gt, ge, logical_and, logical_or, logical_xor. Operands are compared in their
// promoted dtype. One table row per op; the loops are in ops/elementwise.h.
#include "kiln/functional/elementwise.h"
#include "ops/elementwise.h"

namespace kiln {
namespace elementwise {
namespace {

// Each row: function, primitive, the result as an expression of `a` and `b` in the compute type,
// and the documentation. Every row has the rule kPredicate and no Highway kernel. The logical
// ops use & and |, not && and ||: a short circuit is a branch per element, which kept the loop
// from vectorising (logical_and of two random masks took 4 ns per element).
#define KILN_PREDICATE_OPS(X)                                            \
  X(eq, Eq, a == b, "a == b")                                            \
  X(ne, Ne, a != b, "a != b (true where either is nan)")                 \
  X(lt, Lt, a < b, "a < b")                                              \
  X(le, Le, a <= b, "a <= b")                                            \
  X(gt, Gt, a > b, "a > b")                                              \
  X(ge, Ge, a >= b, "a >= b")                                            \
  X(logical_and, LogicalAnd, truthy(a) & truthy(b), "a != 0 and b != 0") \
  X(logical_or, LogicalOr, truthy(a) | truthy(b), "a != 0 or b != 0")    \
  X(logical_xor, LogicalXor, truthy(a) != truthy(b), "exactly one of a, b is != 0")

#define KILN_PREDICATE_FUNCTOR(name, Prim, expr, doc) \
  struct Prim##Fn {                                   \
    template <typename C>                             \
    bool operator()(C a, C b) const {                 \
      return expr;                                    \
    }                                                 \
  };
KILN_PREDICATE_OPS(KILN_PREDICATE_FUNCTOR)
#undef KILN_PREDICATE_FUNCTOR

#define KILN_PREDICATE_REGISTER(name, Prim, expr, doc)                                 \
  KILN_REGISTER_OP((binary_def<Prim##Fn, BinaryRule::kPredicate, OperandCheck::kNone>( \
      #Prim, kNoSimdBinary, doc)));
KILN_PREDICATE_OPS(KILN_PREDICATE_REGISTER)
#undef KILN_PREDICATE_REGISTER

}  // namespace
}  // namespace elementwise

#define KILN_PREDICATE_FUNCTION(name, Prim, expr, doc)               \
  Tensor name(const Tensor& a, const Tensor& b, const Tensor& out) { \
    static const OpDefPtr op = OpRegistry::Instance().get(#Prim);    \
    return elementwise::call_elementwise(*op, {a, b}, out);          \
  }
KILN_PREDICATE_OPS(KILN_PREDICATE_FUNCTION)
#undef KILN_PREDICATE_FUNCTION
#undef KILN_PREDICATE_OPS

}  // namespace kiln
