// Gradient rules of the matrix-product ops (src/ops/matmul.cc): MatMul, BatchMatMul, Linear,
// AddMM and FusedMatMul against central finite differences in float64, over 1-d, batched and
// broadcast operands and every attribute; plus the dtypes and shapes of the gradients of float32
// and integer inputs, and undefined output gradients.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grad_testing.h"
#include "kiln/functional.h"
#include "kiln/op.h"
#include "kiln/runtime.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::run_rule;

using testing::expect_grad_rule;

Tensor r64(const Shape& shape) { return randn(shape, DType::kFloat64); }


TEST(GradMatMul, MatchesFiniteDifferences_ForMatrices) {
  manual_seed(1);
  expect_grad_rule("MatMul", {r64({3, 4}), r64({4, 5})});
  expect_grad_rule("MatMul", {r64({1, 1}), r64({1, 1})});
}

TEST(GradMatMul, MatchesFiniteDifferences_ForOneDimensionalOperands) {
  manual_seed(2);
  expect_grad_rule("MatMul", {r64({4}), r64({4, 5})});
  expect_grad_rule("MatMul", {r64({3, 4}), r64({4})});
  expect_grad_rule("MatMul", {r64({4}), r64({4})});
  expect_grad_rule("MatMul", {r64({2, 3, 4}), r64({4})});
  expect_grad_rule("MatMul", {r64({4}), r64({2, 4, 5})});
}

TEST(GradMatMul, MatchesFiniteDifferences_ForBatchedAndBroadcastOperands) {
  manual_seed(3);
  expect_grad_rule("MatMul", {r64({2, 3, 4}), r64({2, 4, 5})});
  expect_grad_rule("MatMul", {r64({2, 3, 4}), r64({4, 5})});
  expect_grad_rule("MatMul", {r64({3, 4}), r64({2, 4, 5})});
  expect_grad_rule("MatMul", {r64({2, 1, 3, 4}), r64({3, 4, 2})});
  expect_grad_rule("MatMul", {r64({1, 3, 4}), r64({2, 2, 4, 2})});
}

TEST(GradMatMul, GivesNoGradient_ForIntegerOperands) {
  manual_seed(4);
  const Tensor a = randint(-3, 3, {3, 4});
  expect_grad_rule("MatMul", {a, r64({4, 2})});
  const std::vector<Tensor> g = run_rule("MatMul", {a, r64({4, 2})});
  EXPECT_FALSE(g[0].defined());
  ASSERT_TRUE(g[1].defined());
  EXPECT_EQ(g[1].dtype(), DType::kFloat64);
  EXPECT_EQ(g[1].shape(), (Shape{4, 2}));
}

TEST(GradMatMul, GradientsTakeEachInputsDtype_ForFloat32AndMixedOperands) {
  manual_seed(5);
  const Tensor a64 = r64({2, 3, 4}), b64 = r64({4, 5});
  const Tensor a32 = to(a64, DType::kFloat32), b32 = to(b64, DType::kFloat32);
  const Tensor gy = r64({2, 3, 5});
  const std::vector<Tensor> want = run_rule("MatMul", {a64, b64}, {}, {gy});
  const std::vector<Tensor> got = run_rule("MatMul", {a32, b32}, {}, {to(gy, DType::kFloat32)});
  testing::expect_close(got[0], to(want[0], DType::kFloat32), 1e-5);
  testing::expect_close(got[1], to(want[1], DType::kFloat32), 1e-5);
  // float32 a with float64 b: the product is float64, a's gradient float32.
  const std::vector<Tensor> mixed = run_rule("MatMul", {a32, b64}, {}, {gy});
  EXPECT_EQ(mixed[0].dtype(), DType::kFloat32);
  EXPECT_EQ(mixed[1].dtype(), DType::kFloat64);
  testing::expect_close(mixed[0], to(want[0], DType::kFloat32), 1e-5);
}

TEST(GradMatMul, GivesZeros_WhenNoGradientFlowsIn) {
  const std::vector<Tensor> g = run_rule("MatMul", {r64({3, 4}), r64({4, 2})}, {}, {Tensor()});
  testing::expect_close(g[0], zeros({3, 4}, DType::kFloat64), 0);
  testing::expect_close(g[1], zeros({4, 2}, DType::kFloat64), 0);
}

TEST(GradBatchMatMul, MatchesFiniteDifferences) {
  manual_seed(6);
  expect_grad_rule("BatchMatMul", {r64({2, 3, 4}), r64({2, 4, 5})});
  expect_grad_rule("BatchMatMul", {r64({1, 1, 1}), r64({1, 1, 3})});
  const std::vector<Tensor> g = run_rule("BatchMatMul", {randn({2, 3, 4}), randn({2, 4, 5})});
  EXPECT_EQ(g[0].dtype(), DType::kFloat32);
  EXPECT_EQ(g[1].shape(), (Shape{2, 4, 5}));
}

TEST(GradLinear, MatchesFiniteDifferences_WithAndWithoutBias) {
  manual_seed(7);
  expect_grad_rule("Linear", {r64({3, 4}), r64({5, 4}), r64({5})});
  expect_grad_rule("Linear", {r64({2, 3, 4}), r64({5, 4}), Tensor()});
  expect_grad_rule("Linear", {r64({4}), r64({2, 4}), r64({2})});
  const std::vector<Tensor> g = run_rule("Linear", {r64({3, 4}), r64({5, 4}), Tensor()});
  EXPECT_FALSE(g[2].defined());
}

TEST(GradLinear, GradientsAreFloat32_ForFloat32Inputs) {
  manual_seed(8);
  const std::vector<Tensor> g = run_rule("Linear", {randn({6, 3}), randn({2, 3}), randn({2})});
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].dtype(), DType::kFloat32);
  EXPECT_EQ(g[0].shape(), (Shape{6, 3}));
  EXPECT_EQ(g[1].dtype(), DType::kFloat32);
  EXPECT_EQ(g[1].shape(), (Shape{2, 3}));
  EXPECT_EQ(g[2].dtype(), DType::kFloat32);
  EXPECT_EQ(g[2].shape(), (Shape{2}));
}

TEST(GradAddMM, MatchesFiniteDifferences_ForEveryBiasShapeAndScale) {
  manual_seed(9);
  for (const Shape& bias : {Shape{3, 5}, Shape{5}, Shape{1, 5}, Shape{3, 1}, Shape{}}) {
    expect_grad_rule("AddMM", {r64(bias), r64({3, 4}), r64({4, 5})});
  }
  expect_grad_rule("AddMM", {r64({3, 5}), r64({3, 4}), r64({4, 5})},
                   {{"beta", 0.5}, {"alpha", -2.0}});
  expect_grad_rule("AddMM", {r64({5}), r64({3, 4}), r64({4, 5})}, {{"beta", 0.0}, {"alpha", 3.0}});
}

TEST(GradFusedMatMul, MatchesFiniteDifferences_ForEveryActivationAndLayout) {
  manual_seed(10);
  for (const char* act : {"none", "Relu", "Gelu", "GeluTanh", "Silu", "Sigmoid", "Tanh"}) {
    SCOPED_TRACE(act);
    const std::string activation = act;
    expect_grad_rule("FusedMatMul", {r64({3, 4}), r64({4, 5}), r64({5})},
                     {{"activation", activation}});
    expect_grad_rule("FusedMatMul", {r64({2, 3, 4}), r64({5, 4}), Tensor()},
                     {{"activation", activation}, {"transpose_weight", true}});
  }
  expect_grad_rule("FusedMatMul", {r64({4}), r64({2, 4}), r64({2})},
                   {{"activation", std::string("Silu")}, {"transpose_weight", true}});
}

TEST(GradFusedMatMul, GradientsAreFloat32_ForFloat32Inputs) {
  manual_seed(11);
  const std::vector<Tensor> g = run_rule("FusedMatMul", {randn({6, 3}), randn({3, 2}), randn({2})},
                                         {{"activation", std::string("Gelu")}});
  EXPECT_EQ(g[0].dtype(), DType::kFloat32);
  EXPECT_EQ(g[1].shape(), (Shape{3, 2}));
  EXPECT_EQ(g[2].dtype(), DType::kFloat32);
}

}  // namespace
}  // namespace kiln
