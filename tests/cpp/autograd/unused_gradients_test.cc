// Backward skips the gradients of inputs that require none (detail::UnusedGradients): the
// built-in rules of a binary op and of matmul compute only what an edge carries on, and the
// gradients they do compute are unchanged.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "kiln/autograd.h"
#include "kiln/functional.h"
#include "kiln/op.h"
#include "testing.h"

namespace kiln {
namespace {

using autograd::backward;
using autograd::get_grad;
using autograd::set_requires_grad;

// Runs every call as the built-in dispatcher does, counting them by op name.
class CountingDispatcher final : public Dispatcher {
 public:
  TensorList dispatch(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                      const std::vector<Tensor>& out,
                      const std::shared_ptr<BoundKernel>& bound_kernel) override {
    ++calls[op.name()];
    return run_op_sync(op, inputs, attrs, out, bound_kernel);
  }
  std::map<std::string, int> calls;
};

// The calls `fn` makes on this thread, by op name.
template <typename F>
std::map<std::string, int> calls_of(F&& fn) {
  CountingDispatcher counting;
  struct Restore {
    Dispatcher* previous;
    ~Restore() { set_thread_dispatcher(previous); }
  } restore{set_thread_dispatcher(&counting)};
  fn();
  return counting.calls;
}

TEST(UnusedGradients, BinaryRuleComputesOnlyTheGradientThatIsUsed) {
  manual_seed(3);
  const Tensor x = randn({4, 5}, DType::kFloat64);
  const Tensor c = randn({4, 5}, DType::kFloat64);  // a constant: requires no gradient
  set_requires_grad(x);
  const Tensor y = mul(x, c);
  const auto calls = calls_of([&] { backward({y}, {ones({4, 5}, DType::kFloat64)}); });
  EXPECT_EQ(calls.count("Mul") ? calls.at("Mul") : 0, 1);  // g * c only, not g * x
  testing::expect_close(get_grad(x), c, 0);

  // Both operands requiring a gradient: both computed.
  const Tensor a = randn({4, 5}, DType::kFloat64);
  const Tensor b = randn({4, 5}, DType::kFloat64);
  set_requires_grad(a);
  set_requires_grad(b);
  const Tensor z = mul(a, b);
  const auto both = calls_of([&] { backward({z}, {ones({4, 5}, DType::kFloat64)}); });
  EXPECT_EQ(both.at("Mul"), 2);
  testing::expect_close(get_grad(a), b, 0);
  testing::expect_close(get_grad(b), a, 0);
}

TEST(UnusedGradients, MatmulOfInputDataComputesOnlyTheWeightGradient) {
  manual_seed(4);
  const Tensor data = randn({8, 3}, DType::kFloat64);  // a layer's input: no gradient
  const Tensor w = randn({3, 2}, DType::kFloat64);
  set_requires_grad(w);
  const Tensor y = matmul(data, w);
  const Tensor g = randn({8, 2}, DType::kFloat64);
  const auto calls = calls_of([&] { backward({y}, {g}); });
  EXPECT_EQ(calls.at("MatMul"), 1);  // data^T @ g only, not g @ w^T
  testing::expect_close(get_grad(w), matmul(transpose(data, 0, 1), g), 1e-12);
}

TEST(UnusedGradients, AGradientBuiltFromASkippedOneAndASharedInputAreRight) {
  // c / x: x's gradient -c / x^2 is computed from c's (g / x) term, which c itself does not use.
  const Tensor x = randn({6}, DType::kFloat64) + 3.0;
  const Tensor c = randn({6}, DType::kFloat64);
  set_requires_grad(x);
  backward({div(c, x)}, {ones({6}, DType::kFloat64)});
  testing::expect_close(get_grad(x), -(c / (x * x)), 1e-12);
  // x * x: one tensor as both operands, both gradients used.
  const Tensor v = randn({6}, DType::kFloat64);
  set_requires_grad(v);
  backward({mul(v, v)}, {ones({6}, DType::kFloat64)});
  testing::expect_close(get_grad(v), v * 2.0, 1e-12);
}

TEST(UnusedGradients, TheScopeEndsWithTheBackwardStep) {
  // After a backward that skipped c's gradient, the rule run directly (as the jit traces one)
  // computes both: no scope is left on the thread.
  const Tensor x = randn({3}, DType::kFloat64);
  const Tensor c = randn({3}, DType::kFloat64);
  set_requires_grad(x);
  const Tensor y = mul(x, c);
  backward({y}, {ones({3}, DType::kFloat64)}, /*retain_graph=*/true);
  const OpDefPtr op = OpRegistry::Instance().get("Mul");
  const std::vector<Tensor> grads = op->grad_fn()({x, c}, {y}, {}, {ones({3}, DType::kFloat64)});
  ASSERT_EQ(grads.size(), 2u);
  EXPECT_TRUE(grads[0].defined());
  EXPECT_TRUE(grads[1].defined());
}

}  // namespace
}  // namespace kiln
