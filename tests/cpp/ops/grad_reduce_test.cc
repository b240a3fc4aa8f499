// Gradient rules of the reductions, scans and softmax (src/ops/reduce*.cc,
// scan.cc, softmax.cc) against finite differences in float64, over several dims
// and keepdim, and that they are made of ops.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grad_rule_checks.h"
#include "grad_testing.h"
#include "kiln/functional.h"
#include "kiln/op.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::expect_grad_rule;
using testing::expect_rule_uses_ops;

constexpr DType f64 = DType::kFloat64;
constexpr DType f32 = DType::kFloat32;

// (dims, keepdim) pairs over a [2, 3, 4] input: all dims, one, a negative one,
// two.
std::vector<Attrs> reduce_attrs() {
  std::vector<Attrs> out;
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{}, {1}, {-1}, {0, 2}}) {
    for (bool keepdim : {false, true}) out.push_back({{"dims", dims}, {"keepdim", keepdim}});
  }
  return out;
}

const char* const kReductions[] = {"ReduceSum", "ReduceMean", "ReduceProd", "ReduceMax",
                                   "ReduceMin", "Var",        "Std",        "LogSumExp"};

TEST(GradReduce, ReductionRulesMatchFiniteDifferences) {
  manual_seed(11);
  for (const char* name : kReductions) {
    for (const Attrs& attrs : reduce_attrs()) {
      SCOPED_TRACE(name);
      // Distinct values (no ties for max/min) away from zero (prod).
      expect_grad_rule(name, {randn({2, 3, 4}, f64) + 0.1}, attrs);
    }
    SCOPED_TRACE(std::string(name) + " 0-d");
    if (std::string(name) != "Var" && std::string(name) != "Std") {
      expect_grad_rule(name, {randn({}, f64)});
    }
  }
}

TEST(GradReduce, VarAndStdHonourCorrection) {
  manual_seed(12);
  for (const char* name : {"Var", "Std"}) {
    for (int64_t correction : {0, 1, 2}) {
      expect_grad_rule(name, {randn({3, 5}, f64)},
                       {{"dims", std::vector<int64_t>{1}}, {"correction", correction}});
    }
  }
}

TEST(GradReduce, SumAndProdWithWiderDtypeGiveTheInputsDtype) {
  manual_seed(13);
  const Attrs wide{{"dims", std::vector<int64_t>{1}}, {"dtype", f64}};
  expect_rule_uses_ops("ReduceSum", {randn({2, 3}, f32)}, wide);
  expect_rule_uses_ops("ReduceProd", {randn({2, 3}, f32)}, wide);
  expect_rule_uses_ops("CumSum", {randn({2, 3}, f32)}, {{"dim", int64_t{1}}, {"dtype", f64}});
}

TEST(GradReduce, LinearScanRuleMatchesFiniteDifferences_EagerAndTraced) {
  manual_seed(48);
  for (bool reverse : {false, true}) {
    for (int64_t dim : {int64_t{0}, int64_t{1}, int64_t{-1}}) {
      SCOPED_TRACE(std::to_string(dim) + (reverse ? " reverse" : ""));
      Tensor a = randn({3, 5, 4}, f64);
      // Zeros in a cut the chain: the gradient must not divide by them.
      a.data<double>()[6] = 0.0;
      a.data<double>()[7] = 0.0;
      const Attrs attrs{{"dim", dim}, {"reverse", reverse}};
      expect_grad_rule("LinearScan", {a, randn({3, 5, 4}, f64)}, attrs);
      // The rule is made of ops (LinearScan, Pad, Mul): traced, it gives the same gradients.
      expect_rule_uses_ops("LinearScan", {a, randn({3, 5, 4}, f64)}, attrs);
    }
  }
  expect_grad_rule("LinearScan", {randn({1}, f64), randn({1}, f64)}, {{"dim", int64_t{0}}});
  // 0-d: y = b (a multiplies y[-1] = 0).
  expect_grad_rule("LinearScan", {randn({}, f64), randn({}, f64)}, {{"dim", int64_t{0}}});
}

TEST(GradReduce, ProdGradientIsExactWithZeros) {
  // One zero in a row: its gradient is the product of the others; two zeros:
  // all zero.
  const Tensor x = reshape(
      cat({zeros({1}, f64), full({2}, 2.0, f64), zeros({2}, f64), full({1}, 3.0, f64)}), {2, 3});
  expect_grad_rule("ReduceProd", {x}, {{"dims", std::vector<int64_t>{1}}});
  const OpDefPtr op = OpRegistry::Instance().get("ReduceProd");
  const Attrs attrs = op->normalize_attrs({{"dims", std::vector<int64_t>{1}}});
  const std::vector<Tensor> g =
      op->grad_fn()({x}, call_op(*op, {x}, attrs), attrs, {ones({2}, f64)});
  const Tensor want = reshape(cat({full({1}, 4.0, f64), zeros({5}, f64)}), {2, 3});
  testing::expect_close(g[0], want, 0);
}

TEST(GradReduce, MaxAndMinSplitTiesEvenly) {
  // amax over a row with two equal maxima gives each half (as PyTorch's amax).
  const Tensor x = reshape(cat({ones({2}, f64), zeros({1}, f64)}), {1, 3});
  for (const char* name : {"ReduceMax", "ReduceMin"}) {
    const OpDefPtr op = OpRegistry::Instance().get(name);
    const Attrs attrs = op->normalize_attrs({{"dims", std::vector<int64_t>{1}}});
    const Tensor y = name == std::string("ReduceMax") ? x : -x;
    const std::vector<Tensor> g =
        op->grad_fn()({y}, call_op(*op, {y}, attrs), attrs, {ones({1}, f64)});
    testing::expect_close(g[0], reshape(cat({full({2}, 0.5, f64), zeros({1}, f64)}), {1, 3}), 0);
  }
}

TEST(GradReduce, MaxDimAndMinDimSendTheValuesGradientToTheIndex) {
  manual_seed(14);
  for (const char* name : {"MaxDim", "MinDim"}) {
    for (int64_t dim : {0, 1, -1}) {
      for (bool keepdim : {false, true}) {
        SCOPED_TRACE(name);
        expect_grad_rule(name, {randn({3, 4}, f64)}, {{"dim", dim}, {"keepdim", keepdim}});
      }
    }
    expect_grad_rule(name, {randn({}, f64)}, {{"dim", int64_t{0}}});
    expect_rule_uses_ops(name, {randn({4, 3}, f32).transpose(0, 1)}, {{"dim", int64_t{1}}});
  }
}

TEST(GradReduce, ScansAndSoftmaxMatchFiniteDifferences) {
  manual_seed(15);
  for (const char* name : {"CumSum", "Softmax", "LogSoftmax"}) {
    for (int64_t dim : {0, 1, -1}) {
      SCOPED_TRACE(std::string(name) + " dim " + std::to_string(dim));
      expect_grad_rule(name, {randn({3, 4}, f64)}, {{"dim", dim}});
    }
    expect_grad_rule(name, {randn({5}, f64)}, {{"dim", int64_t{0}}});
    expect_grad_rule(name, {randn({}, f64)}, {{"dim", int64_t{0}}});
  }
}

// SoftmaxBackward (y, g) -> Softmax's / LogSoftmax's input gradient: its own rule (the second
// order) against finite differences for any y and g, and the kernel against the formula along
// every dim, in float32 too (strided operands, a dim that is not last).
TEST(GradReduce, SoftmaxBackwardMatchesItsFormulaAndItsRuleFiniteDifferences) {
  manual_seed(17);
  for (bool log : {false, true}) {
    for (int64_t dim : {0, 1, -1}) {
      SCOPED_TRACE(std::string(log ? "log " : "") + "dim " + std::to_string(dim));
      const Attrs attrs = {{"dim", dim}, {"log", log}};
      expect_grad_rule("SoftmaxBackward", {randn({3, 4}, f64), randn({3, 4}, f64)}, attrs);
      const Tensor y = randn({2, 3, 4}, f64);
      const Tensor g = randn({2, 3, 4}, f64);
      const Tensor want =
          log ? g - exp(y) * sum(g, {dim}, true) : y * (g - sum(g * y, {dim}, true));
      testing::expect_close(call_op("SoftmaxBackward", {y, g}, attrs)[0], want, 1e-13);
      const Tensor y32 = to(y, f32).transpose(0, 2).contiguous().transpose(0, 2);  // strided
      const Tensor got = call_op("SoftmaxBackward", {y32, to(g, f32)}, attrs)[0];
      testing::expect_close(got, to(want, f32), 1e-5);
    }
    // Along a dim that is not last, columns run in tiles of 512: three tiles, the last partial.
    for (DType dtype : {f64, f32}) {
      const Tensor y = randn({2, 3, 1100}, dtype);
      const Tensor g = randn({2, 3, 1100}, dtype);
      const Tensor want = log ? g - exp(y) * sum(g, {1}, true) : y * (g - sum(g * y, {1}, true));
      testing::expect_close(call_op("SoftmaxBackward", {y, g}, {{"dim", 1}, {"log", log}})[0], want,
                            dtype == f64 ? 1e-13 : 1e-5);
    }
  }
  testing::expect_error(
      [] {
        call_op("SoftmaxBackward", {randn({2, 3}, f64), randn({3, 2}, f64)});
      },
      ErrorKind::kShape, "softmax_backward: expected grad_output of y's shape [2, 3]");
}

TEST(GradReduce, RulesUseOpsOnly_WhenFloat32AndStrided) {
  manual_seed(16);
  const Tensor x = randn({4, 3, 2}, f32).permute({2, 0, 1});  // [2, 4, 3], non-contiguous
  for (const char* name : kReductions) {
    for (const Attrs& attrs : reduce_attrs()) expect_rule_uses_ops(name, {x}, attrs);
  }
  for (const char* name : {"CumSum", "Softmax", "LogSoftmax"}) {
    expect_rule_uses_ops(name, {x}, {{"dim", int64_t{1}}});
  }
}

TEST(GradReduce, IntegerInputsGetNoGradient) {
  const Tensor x = randint(0, 5, {2, 3});
  for (const char* name : {"ReduceSum", "ReduceMean", "Var", "LogSumExp"}) {
    const OpDefPtr op = OpRegistry::Instance().get(name);
    const Attrs attrs = op->normalize_attrs({});
    const std::vector<Tensor> ys = call_op(*op, {x}, attrs);
    const Tensor gy = ones(ys[0].shape(), is_floating_point(ys[0].dtype()) ? ys[0].dtype() : f32);
    EXPECT_FALSE(op->grad_fn()({x}, ys, attrs, {gy})[0].defined()) << name;
  }
}

TEST(GradReduce, ArgMaxAndArgMinAreNotDifferentiable) {
  EXPECT_TRUE(testing::not_differentiable("ArgMax"));
  EXPECT_TRUE(testing::not_differentiable("ArgMin"));
  EXPECT_FALSE(testing::not_differentiable("MaxDim"));
}

}  // namespace
}  // namespace kiln
