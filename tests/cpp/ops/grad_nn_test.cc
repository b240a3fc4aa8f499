// Gradient rules of the neural-network ops: LayerNorm, RMSNorm (src/ops/norm.cc), CrossEntropy,
// NLLLoss, MSELoss (src/ops/loss.cc) and Dropout (src/ops/random.cc) against central finite
// differences in float64 over their shapes and attributes, plus the dtypes and shapes of the
// gradients of float32 inputs and undefined output gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "grad_testing.h"
#include "kiln/functional.h"
#include "kiln/op.h"
#include "kiln/runtime.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::expect_grad_rule;

Tensor r64(const Shape& shape) { return randn(shape, DType::kFloat64); }

// An integer tensor holding `values`.
Tensor ints(const Shape& shape, const std::vector<int64_t>& values, DType dtype = DType::kInt64) {
  Tensor t = Tensor::empty(shape, DType::kInt64);
  for (size_t i = 0; i < values.size(); ++i) t.data<int64_t>()[i] = values[i];
  return to(t, dtype);
}

// The op's rule at `inputs` for the output gradients `grads` (random ones when empty).
std::vector<Tensor> run_rule(const std::string& name, const std::vector<Tensor>& inputs,
                             const Attrs& attrs = {}, std::vector<Tensor> grads = {}) {
  const OpDefPtr op = OpRegistry::Instance().get(name);
  const Attrs normalized = op->normalize_attrs(attrs);
  const std::vector<Tensor> outputs = call_op(*op, inputs, normalized);
  if (grads.empty()) {
    for (const Tensor& y : outputs) grads.push_back(randn(y.shape(), y.dtype()));
  }
  std::vector<Tensor> result = op->grad_fn()(inputs, outputs, normalized, grads);
  runtime::synchronize();
  return result;
}

// Expects the rule on float32 copies of float64 `inputs` to give float32 gradients close to the
// float64 rule's, for the same output gradients.
void expect_float32_rule(const std::string& name, const std::vector<Tensor>& inputs,
                         const Attrs& attrs = {}) {
  const OpDefPtr op = OpRegistry::Instance().get(name);
  std::vector<Tensor> grads;
  for (const Tensor& y : call_op(*op, inputs, op->normalize_attrs(attrs))) {
    grads.push_back(r64(y.shape()));
  }
  std::vector<Tensor> inputs32, grads32;
  for (const Tensor& x : inputs) {
    inputs32.push_back(x.defined() && is_floating_point(x.dtype()) ? to(x, DType::kFloat32) : x);
  }
  for (const Tensor& g : grads) grads32.push_back(to(g, DType::kFloat32));
  const std::vector<Tensor> want = run_rule(name, inputs, attrs, grads);
  const std::vector<Tensor> got = run_rule(name, inputs32, attrs, grads32);
  ASSERT_EQ(got.size(), inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    SCOPED_TRACE("input " + std::to_string(k));
    ASSERT_EQ(got[k].defined(), want[k].defined());
    if (!got[k].defined()) continue;
    EXPECT_EQ(got[k].dtype(), DType::kFloat32);
    testing::expect_close(got[k], to(want[k], DType::kFloat32), 2e-4);
  }
}

// ---- LayerNorm, RMSNorm ----

TEST(GradLayerNorm, MatchesFiniteDifferences_WithAndWithoutAffine) {
  manual_seed(20);
  expect_grad_rule("LayerNorm", {r64({3, 5}), r64({5}), r64({5})}, {{"normalized_shape", Dims{5}}});
  expect_grad_rule("LayerNorm", {r64({2, 3, 4}), Tensor(), Tensor()},
                   {{"normalized_shape", Dims{4}}});
  expect_grad_rule("LayerNorm", {r64({2, 3, 4}), r64({3, 4}), Tensor()},
                   {{"normalized_shape", Dims{3, 4}}, {"eps", 1e-2}});
  expect_grad_rule("LayerNorm", {r64({6}), Tensor(), r64({6})}, {{"normalized_shape", Dims{6}}});
}

TEST(GradLayerNorm, GradientsAreFloat32_ForFloat32Inputs) {
  manual_seed(21);
  expect_float32_rule("LayerNorm", {r64({4, 8}), r64({8}), r64({8})},
                      {{"normalized_shape", Dims{8}}});
  const std::vector<Tensor> g =
      run_rule("LayerNorm", {r64({2, 3}), Tensor(), Tensor()}, {{"normalized_shape", Dims{3}}});
  EXPECT_EQ(g[0].shape(), (Shape{2, 3}));
  EXPECT_FALSE(g[1].defined());
  EXPECT_FALSE(g[2].defined());
}

TEST(GradRMSNorm, MatchesFiniteDifferences_WithAndWithoutWeight) {
  manual_seed(22);
  expect_grad_rule("RMSNorm", {r64({3, 5}), r64({5})}, {{"normalized_shape", Dims{5}}});
  expect_grad_rule("RMSNorm", {r64({2, 3, 4}), Tensor()}, {{"normalized_shape", Dims{3, 4}}});
  expect_grad_rule("RMSNorm", {r64({4}), r64({4})}, {{"normalized_shape", Dims{4}}, {"eps", 0.1}});
  expect_float32_rule("RMSNorm", {r64({4, 8}), r64({8})}, {{"normalized_shape", Dims{8}}});
}

TEST(GradNorm, GivesZeros_WhenNoGradientFlowsIn) {
  const std::vector<Tensor> g = run_rule("LayerNorm", {r64({2, 3}), r64({3}), r64({3})},
                                         {{"normalized_shape", Dims{3}}}, {Tensor()});
  for (const Tensor& t : g) testing::expect_close(t, zeros(t.shape(), DType::kFloat64), 0);
}

// ---- CrossEntropy, NLLLoss ----

const char* const kReductions[] = {"mean", "sum", "none"};

TEST(GradCrossEntropy, MatchesFiniteDifferences_ForEveryReduction) {
  manual_seed(23);
  for (const char* reduction : kReductions) {
    SCOPED_TRACE(reduction);
    const Attrs attrs{{"reduction", std::string(reduction)}};
    expect_grad_rule("CrossEntropy", {r64({4, 5}), ints({4}, {0, 3, 4, 3})}, attrs);
    expect_grad_rule("CrossEntropy", {r64({2, 3, 4}), ints({2, 4}, {0, 1, 2, 2, 1, 1, 0, 2})},
                     attrs);
    expect_grad_rule("CrossEntropy", {r64({5}), ints({}, {2})}, attrs);
  }
}

TEST(GradCrossEntropy, MatchesFiniteDifferences_WithIgnoreIndexAndLabelSmoothing) {
  manual_seed(24);
  for (const char* reduction : kReductions) {
    SCOPED_TRACE(reduction);
    const std::string red = reduction;
    const Tensor target = ints({5}, {1, -100, 3, 0, -100});
    expect_grad_rule("CrossEntropy", {r64({5, 4}), target}, {{"reduction", red}});
    expect_grad_rule("CrossEntropy", {r64({5, 4}), target},
                     {{"reduction", red}, {"label_smoothing", 0.2}});
    // ignore_index may name a real class; int32 targets.
    expect_grad_rule("CrossEntropy", {r64({5, 4}), ints({5}, {1, 2, 3, 2, 0}, DType::kInt32)},
                     {{"reduction", red}, {"ignore_index", int64_t{2}}, {"label_smoothing", 0.1}});
    expect_grad_rule("CrossEntropy", {r64({2, 3, 2}), ints({2, 2}, {0, 2, -1, 1})},
                     {{"reduction", red}, {"ignore_index", int64_t{-1}}, {"label_smoothing", 1.0}});
  }
}

TEST(GradCrossEntropy, GradientOfLogitsOnly_AndFloat32) {
  manual_seed(25);
  const std::vector<Tensor> g = run_rule("CrossEntropy", {r64({3, 4}), ints({3}, {0, 1, 2})});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_FALSE(g[1].defined());
  expect_float32_rule("CrossEntropy", {r64({3, 4}), ints({3}, {0, -100, 2})},
                      {{"label_smoothing", 0.1}});
}

TEST(GradNLLLoss, MatchesFiniteDifferences_ForEveryReductionAndIgnoreIndex) {
  manual_seed(26);
  for (const char* reduction : kReductions) {
    SCOPED_TRACE(reduction);
    const std::string red = reduction;
    expect_grad_rule("NLLLoss", {r64({4, 3}), ints({4}, {2, 0, 1, 2})}, {{"reduction", red}});
    expect_grad_rule("NLLLoss", {r64({4, 3}), ints({4}, {2, -100, 1, -100})}, {{"reduction", red}});
    expect_grad_rule("NLLLoss", {r64({2, 3, 2, 2}), ints({2, 2, 2}, {0, 1, 2, 0, 1, 1, 0, 2})},
                     {{"reduction", red}, {"ignore_index", int64_t{0}}});
    expect_grad_rule("NLLLoss", {r64({3}), ints({}, {1})}, {{"reduction", red}});
  }
  expect_float32_rule("NLLLoss", {r64({4, 3}), ints({4}, {2, -100, 1, 0})});
}

// ---- MSELoss ----

TEST(GradMSELoss, MatchesFiniteDifferences_ForEveryReductionAndBroadcast) {
  manual_seed(27);
  for (const char* reduction : kReductions) {
    SCOPED_TRACE(reduction);
    const Attrs attrs{{"reduction", std::string(reduction)}};
    expect_grad_rule("MSELoss", {r64({3, 4}), r64({3, 4})}, attrs);
    expect_grad_rule("MSELoss", {r64({3, 4}), r64({4})}, attrs);
    expect_grad_rule("MSELoss", {r64({1, 4}), r64({3, 1})}, attrs);
    expect_grad_rule("MSELoss", {r64({}), r64({2})}, attrs);
  }
}

TEST(GradMSELoss, IntegerTargetHasNoGradient_AndFloat32) {
  manual_seed(28);
  const std::vector<Tensor> g = run_rule("MSELoss", {r64({2, 3}), ints({3}, {1, 2, 3})});
  EXPECT_EQ(g[0].shape(), (Shape{2, 3}));
  EXPECT_FALSE(g[1].defined());
  expect_float32_rule("MSELoss", {r64({2, 3}), r64({2, 3})}, {{"reduction", std::string("sum")}});
}

// ---- Dropout ----

Attrs dropout_attrs(double p) {
  return {{"p", p}, {"seed", int64_t{1234}}, {"offset", int64_t{64}}};
}

TEST(GradDropout, MatchesFiniteDifferences_WithTheForwardMask) {
  manual_seed(29);
  for (double p : {0.0, 0.3, 0.8, 1.0}) {
    SCOPED_TRACE(p);
    expect_grad_rule("Dropout", {r64({4, 7})}, dropout_attrs(p));
  }
}

TEST(GradDropout, KeepsTheOutputsZeros_AndScalesTheRest) {
  manual_seed(30);
  const Tensor x = randn({1000});
  const Attrs attrs = dropout_attrs(0.25);
  const OpDefPtr op = OpRegistry::Instance().get("Dropout");
  const Tensor y = call_op(*op, {x}, op->normalize_attrs(attrs))[0];
  const std::vector<Tensor> g = run_rule("Dropout", {x}, attrs, {ones({1000})});
  ASSERT_EQ(g[0].dtype(), DType::kFloat32);
  int64_t dropped = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    const bool kept = y.data<float>()[i] != 0.0f;
    dropped += kept ? 0 : 1;
    EXPECT_FLOAT_EQ(g[0].data<float>()[i], kept ? 1.0f / 0.75f : 0.0f) << i;
  }
  EXPECT_GT(dropped, 150);
  EXPECT_LT(dropped, 350);
}

TEST(GradDropout, GivesZeros_WhenNoGradientFlowsIn_AndNeedsTheSeed) {
  const std::vector<Tensor> g = run_rule("Dropout", {r64({3})}, dropout_attrs(0.5), {Tensor()});
  testing::expect_close(g[0], zeros({3}, DType::kFloat64), 0);
  const OpDefPtr op = OpRegistry::Instance().get("Dropout");
  testing::expect_error(
      [&] {
        const Tensor x = r64({3});
        op->grad_fn()({x}, {x}, op->normalize_attrs({{"p", 0.5}}), {x});
      },
      ErrorKind::kValue, "seed and offset");
}

}  // namespace
}  // namespace kiln
