// Gradient rules of the shape, join, index and padding ops
// (src/ops/shape_views.cc, join.cc, index.cc, index_advanced.cc, pad.cc) against finite
// differences in float64, and that they are made of ops.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grad_rule_checks.h"
#include "grad_testing.h"
#include "kiln/functional.h"
#include "kiln/op.h"

namespace kiln {
namespace {

using testing::expect_grad_rule;
using testing::expect_rule_uses_ops;

constexpr DType f64 = DType::kFloat64;
constexpr DType f32 = DType::kFloat32;
using Ints = std::vector<int64_t>;

Tensor int_index(const std::vector<int64_t>& values, const Shape& shape,
                 DType dtype = DType::kInt64) {
  Tensor t = Tensor::empty(shape, DType::kInt64);
  for (size_t i = 0; i < values.size(); ++i) t.data<int64_t>()[i] = values[i];
  return to(t, dtype);
}

struct Case {
  const char* op;
  std::vector<Tensor> inputs;  // float inputs are drawn per dtype by the test
  Attrs attrs;
};

// One case per op and form; float inputs are float64 here and converted for the
// ops-only test.
std::vector<Case> shape_cases() {
  manual_seed(21);
  const Tensor x = randn({2, 3, 4}, f64);
  return {
      {"Reshape", {x}, {{"shape", Ints{4, -1}}}},
      {"Reshape", {randn({}, f64)}, {{"shape", Ints{1, 1}}}},
      {"Transpose", {x}, {{"dim0", int64_t{0}}, {"dim1", int64_t{-1}}}},
      {"Permute", {x}, {{"dims", Ints{2, 0, 1}}}},
      {"Permute", {x}, {{"dims", Ints{-1, 0, 1}}}},
      {"Expand", {randn({3, 1}, f64)}, {{"shape", Ints{2, 3, 4}}}},
      {"Expand", {randn({}, f64)}, {{"shape", Ints{2, 2}}}},
      {"Squeeze", {randn({2, 1, 3}, f64)}, {}},
      {"Squeeze", {randn({2, 1, 3}, f64)}, {{"dim", int64_t{1}}}},
      {"Unsqueeze", {x}, {{"dim", int64_t{-1}}}},
      {"Flatten", {x}, {{"start_dim", int64_t{1}}}},
      {"Contiguous", {x}, {}},
      // Overlapping windows, a broadcast (stride 0) dim, an offset, and a 0-d
      // result.
      {"AsStrided", {x}, {{"size", Ints{3, 4}}, {"stride", Ints{2, 3}}, {"offset", int64_t{1}}}},
      {"AsStrided", {x}, {{"size", Ints{2, 5}}, {"stride", Ints{0, 1}}, {"offset", int64_t{7}}}},
      {"AsStrided", {x}, {{"size", Ints{}}, {"stride", Ints{}}, {"offset", int64_t{5}}}},
      // Views reaching each element once (a transposed block, a strided row): a strided copy.
      {"AsStrided", {x}, {{"size", Ints{2, 3}}, {"stride", Ints{1, 4}}, {"offset", int64_t{1}}}},
      {"AsStrided", {x}, {{"size", Ints{2}}, {"stride", Ints{2}}, {"offset", int64_t{8}}}},
      {"AsStridedScatter",
       {x, randn({2, 3}, f64)},
       {{"size", Ints{2, 3}}, {"stride", Ints{1, 4}}, {"offset", int64_t{1}}}},
      {"Concat", {randn({2, 3}, f64), randn({1, 3}, f64), randn({0, 3}, f64)}, {}},
      {"Concat", {randn({2, 3}, f64), randn({2, 2}, f64)}, {{"dim", int64_t{-1}}}},
      {"Stack", {randn({2, 3}, f64), randn({2, 3}, f64)}, {{"dim", int64_t{1}}}},
      {"Stack", {randn({}, f64), randn({}, f64), randn({}, f64)}, {}},
      {"Split", {x}, {{"sizes", Ints{1, 2}}, {"dim", int64_t{1}}}},
      {"IndexSelect", {x, int_index({2, 0, 2, -1}, {4})}, {{"dim", int64_t{-1}}}},
      {"IndexSelect", {x, int_index({1}, {}, DType::kInt32)}, {{"dim", int64_t{0}}}},
      {"IndexSelect",  // a middle dim, repeated and negative positions; then an empty selection
       {randn({2, 3, 4}, f64), int_index({2, 0, 2, -3, -1}, {5})},
       {{"dim", int64_t{1}}}},
      {"IndexSelect", {randn({2, 3}, f64), int_index({}, {0})}, {{"dim", int64_t{1}}}},
      {"Gather",
       {randn({3, 4}, f64), int_index({0, 2, 2, 1, 0, 0}, {3, 2})},
       {{"dim", int64_t{1}}}},
      {"Gather", {randn({3, 4}, f64), int_index({0, 2, 2, -1}, {2, 2})}, {{"dim", int64_t{0}}}},
      // Distinct positions for "none" (duplicates would make the assignment
      // order matter).
      {"Scatter",
       {randn({3, 4}, f64), int_index({3, 0, 1, 2}, {2, 2}), randn({2, 3}, f64)},
       {{"dim", int64_t{1}}}},
      {"Scatter",
       {randn({3, 4}, f64), int_index({1, 1, 0, 1}, {2, 2}), randn({2, 2}, f64)},
       {{"dim", int64_t{0}}, {"reduce", std::string("add")}}},
      {"Scatter",
       {randn({3, 4}, f64), int_index({1, 2}, {1, 2}), randn({}, f64)},
       {{"dim", int64_t{1}}}},
      {"MaskedFill", {randn({2, 3}, f64), gt(rand({3}), Tensor::scalar(0.5))}, {{"value", 2.5}}},
      {"Pad", {randn({2, 3}, f64)}, {{"pads", Ints{1, 2, 0, 1}}}},
      {"Pad", {randn({2, 4}, f64)}, {{"pads", Ints{-1, 2}}, {"value", 3.0}}},
      {"Pad",
       {randn({2, 3, 4}, f64)},
       {{"pads", Ints{2, 3, 1, 2}}, {"mode", std::string("reflect")}}},
      {"Pad", {randn({2, 3}, f64)}, {{"pads", Ints{3, 1}}, {"mode", std::string("replicate")}}},
      {"Tril", {randn({2, 3, 4}, f64)}, {}},
      {"Triu", {randn({4, 3}, f64)}, {{"diagonal", int64_t{1}}}},
      {"Tril", {randn({3, 3}, f64)}, {{"diagonal", int64_t{-1}}}},
      // Repeated and negative indices accumulate; int32 indices; a trailing
      // slice kept.
      {"Index", {randn({3, 4}, f64), int_index({0, 2, 0, -1}, {2, 2})}, {}},
      {"Index", {x, int_index({1, 0, 1}, {3}, DType::kInt32), int_index({2, -1}, {2, 1})}, {}},
      {"Index", {x, int_index({0}, {1}), int_index({1}, {}), int_index({3, 3}, {2})}, {}},
      {"IndexPut", {randn({3, 4}, f64), randn({2, 4}, f64), int_index({2, 0}, {2})}, {}},
      {"IndexPut",
       {randn({3, 4}, f64), randn({}, f64), int_index({1, 2}, {2}), int_index({0, -1}, {2})},
       {}},
  };
}

TEST(GradShape, RulesMatchFiniteDifferences) {
  const std::vector<Case> cases = shape_cases();
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(std::string(cases[i].op) + ", case " + std::to_string(i));
    expect_grad_rule(cases[i].op, cases[i].inputs, cases[i].attrs);
  }
}

TEST(GradShape, RulesUseOpsOnly_WhenFloat32AndStrided) {
  for (const Case& c : shape_cases()) {
    std::vector<Tensor> inputs;
    for (const Tensor& t : c.inputs) {
      if (!is_floating_point(t.dtype())) {
        inputs.push_back(t);
      } else if (t.ndim() >= 2) {
        // The same values, float32, through a transposed (non-contiguous)
        // layout.
        inputs.push_back(to(t, f32).transpose(0, 1).contiguous().transpose(0, 1));
      } else {
        inputs.push_back(to(t, f32));
      }
    }
    expect_rule_uses_ops(c.op, inputs, c.attrs);
  }
}

TEST(GradShape, SplitGivesZerosForPiecesWithoutGradient) {
  const Tensor x = randn({5, 2}, f64);
  const OpDefPtr op = OpRegistry::Instance().get("Split");
  const Attrs attrs = op->normalize_attrs({{"sizes", Ints{2, 3}}});
  const std::vector<Tensor> ys = call_op(*op, {x}, attrs);
  const Tensor g = ones({3, 2}, f64);
  const std::vector<Tensor> gx = op->grad_fn()({x}, ys, attrs, {Tensor(), g});
  testing::expect_close(gx[0], cat({zeros({2, 2}, f64), g}), 0);
  EXPECT_FALSE(op->grad_fn()({x}, ys, attrs, {Tensor(), Tensor()})[0].defined());
}

TEST(GradShape, ConcatGivesEachInputItsDtype) {
  expect_rule_uses_ops("Concat", {randn({2, 3}, f32), randn({1, 3}, f64), randint(0, 3, {1, 3})});
}

TEST(GradShape, ScatterMultiplyGradientIsNotImplemented) {
  const Tensor x = randn({2, 2}, f64);
  const OpDefPtr op = OpRegistry::Instance().get("Scatter");
  const Attrs attrs =
      op->normalize_attrs({{"dim", int64_t{0}}, {"reduce", std::string("multiply")}});
  const std::vector<Tensor> in{x, int_index({0, 1, 1, 0}, {2, 2}), x};
  testing::expect_error([&] { op->grad_fn()(in, call_op(*op, in, attrs), attrs, {x}); },
                        ErrorKind::kNotImplemented, "reduce='multiply'");
}

}  // namespace
}  // namespace kiln
