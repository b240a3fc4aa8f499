// kiln::autograd::value_and_grad (MindSpore's functional form) over built-in ops: gradients of
// arguments by position and of weights, auxiliary outputs, zeros for what the value does not use,
// nesting for higher orders, and its errors.
#include <gtest/gtest.h>

#include <vector>

#include "kiln/autograd.h"
#include "kiln/functional.h"
#include "testing.h"

namespace kiln {
namespace {

using autograd::GradResult;
using autograd::requires_grad;
using autograd::value_and_grad;

constexpr DType f64 = DType::kFloat64;

TEST(ValueAndGrad, DifferentiatesTheArgumentsAtTheGivenPositions) {
  manual_seed(30);
  const Tensor a = randn({3, 2}, f64);
  const Tensor b = randn({3, 2}, f64);
  // f(a, b) = sum(a * b * b): d/da = b^2, d/db = 2 a b.
  const auto f = [](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{sum(x[0] * x[1] * x[1])};
  };
  const GradResult r = value_and_grad(f, {0, -1})({a, b});
  ASSERT_EQ(r.value.size(), 1u);
  testing::expect_close(r.value[0], sum(a * b * b), 1e-14);
  EXPECT_FALSE(requires_grad(r.value[0]));
  ASSERT_EQ(r.grads.size(), 2u);
  testing::expect_close(r.grads[0], b * b, 1e-14);
  testing::expect_close(r.grads[1], a * b * 2.0, 1e-14);
  EXPECT_TRUE(r.weight_grads.empty());
  // The caller's tensors are not marked.
  EXPECT_FALSE(requires_grad(a));
  EXPECT_FALSE(requires_grad(b));
}

TEST(ValueAndGrad, DifferentiatesWeights_WithoutTouchingTheirGrad) {
  manual_seed(31);
  const Tensor w = randn({2, 2}, f64);
  autograd::set_requires_grad(w, true);
  const Tensor frozen = randn({2}, f64);  // used, but does not require grad: zeros
  const Tensor x = randn({4, 2}, f64);
  const auto loss = [&](const std::vector<Tensor>& args) {
    return std::vector<Tensor>{sum(matmul(args[0], w) + frozen)};
  };
  const GradResult r = value_and_grad(loss, {}, {w, frozen})({x});
  EXPECT_TRUE(r.grads.empty());
  ASSERT_EQ(r.weight_grads.size(), 2u);
  // d sum(x w) / d w[i, j] = sum over rows of x[:, i].
  testing::expect_close(r.weight_grads[0], matmul(transpose(x, 0, 1), ones({4, 2}, f64)), 1e-13);
  testing::expect_close(r.weight_grads[1], zeros({2}, f64), 0);
  EXPECT_FALSE(autograd::get_grad(w).defined());
}

TEST(ValueAndGrad, HasAux_DifferentiatesOnlyTheFirstOutput) {
  const Tensor x = full({3}, 2.0, f64);
  const auto f = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{sum(square(a[0])), a[0] * 10.0};
  };
  const GradResult r = value_and_grad(f, {0}, {}, /*has_aux=*/true)({x});
  ASSERT_EQ(r.value.size(), 2u);
  testing::expect_close(r.value[1], full({3}, 20.0, f64), 0);
  EXPECT_FALSE(requires_grad(r.value[1]));
  testing::expect_close(r.grads[0], full({3}, 4.0, f64), 0);  // 2x, not 2x + 10
}

TEST(ValueAndGrad, UnusedArgument_GetsZeros) {
  const Tensor x = full({2}, 3.0, f64);
  const Tensor y = full({2}, 5.0, f64);
  const auto f = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(a[0])}; };
  const GradResult r = value_and_grad(f, {0, 1})({x, y});
  testing::expect_close(r.grads[0], ones({2}, f64), 0);
  testing::expect_close(r.grads[1], zeros({2}, f64), 0);
}

TEST(ValueAndGrad, NestedCalls_GiveHigherDerivatives) {
  // d/dx sum(x^3) = 3 x^2; its sum differentiated again: 6 x.
  const Tensor x = full({3}, 1.5, f64);
  const auto cube = [](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{sum(a[0] * a[0] * a[0])};
  };
  const auto first = value_and_grad(cube, {0});
  const auto second = value_and_grad(
      [&](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(first(a).grads[0])}; },
      {0});
  const GradResult r = second({x});
  testing::expect_close(r.value[0], full({}, 3 * 3 * 1.5 * 1.5, f64), 1e-14);
  testing::expect_close(r.grads[0], full({3}, 6 * 1.5, f64), 1e-14);
}

TEST(ValueAndGrad, BadCalls_AreClearErrors) {
  const Tensor x = ones({2}, f64);
  const auto f = [](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(a[0])}; };
  testing::expect_error([&] { value_and_grad(f, {1})({x}); }, ErrorKind::kValue,
                        "grad position 1 is out of range for 1 arguments");
  testing::expect_error([&] { value_and_grad(f, {-2})({x}); }, ErrorKind::kValue,
                        "grad position -2 is out of range");
  testing::expect_error([&] { value_and_grad(f, {}, {})({x}); }, ErrorKind::kValue,
                        "nothing to differentiate");
  testing::expect_error([&] { value_and_grad(f, {0}, {}, /*has_aux=*/true)({x}); },
                        ErrorKind::kValue, "has_aux needs fn to return at least two outputs, got 1");
  testing::expect_error([&] { value_and_grad(f, {0})({ones({2}, DType::kInt64)}); },
                        ErrorKind::kDType,
                        "argument 0 is int64; only floating-point arguments can be differentiated");
}

}  // namespace
}  // namespace kiln
