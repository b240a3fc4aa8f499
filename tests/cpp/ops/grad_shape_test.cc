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
      // Expands of x [2, 3, 4] (summed over the broadcast dims): a leading dim, and of
      // [3, 1] a size-1 dim broadcast beside a size-1 dim kept; then a view that only looks like
      // one (stride 0 where x's size is not 1: the scatter-add).
      {"AsStrided",
       {x},
       {{"size", Ints{5, 2, 3, 4}}, {"stride", Ints{0, 12, 4, 1}}, {"offset", int64_t{0}}}},
      {"AsStrided",
       {randn({3, 1}, f64)},
       {{"size", Ints{1, 3, 4}}, {"stride", Ints{7, 1, 0}}, {"offset", int64_t{0}}}},
      {"AsStrided",
       {x},
       {{"size", Ints{2, 3, 4}}, {"stride", Ints{12, 0, 1}}, {"offset", int64_t{0}}}},
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
      // Gather's gradient op (repeated positions sum; an index smaller than x in another dim).
      {"GatherBackward",
       {randn({3, 2}, f64), int_index({0, 2, 2, 1, 0, 0}, {3, 2})},
       {{"dim", int64_t{1}}, {"input_size", Ints{3, 4}}}},
      {"GatherBackward",
       {randn({2, 2}, f64), int_index({0, 2, 2, -1}, {2, 2})},
       {{"dim", int64_t{0}}, {"input_size", Ints{3, 4}}}},
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

// Gather's rule is one GatherBackward: a Scatter-add into zeros of x's shape, in every floating
// dtype (16-bit floats summed in float32), along every dim, from a strided g, and for 0-d x.
TEST(GradShape, GatherBackwardIsAScatterAddIntoZeros) {
  manual_seed(22);
  const Tensor x = randn({4, 5, 6}, f64);
  for (int64_t dim = 0; dim < 3; ++dim) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    Shape index_shape = {3, 4, 5};
    index_shape[static_cast<size_t>(dim)] = 7;  // longer than x along dim: repeats
    const Tensor index = randint(-x.shape()[dim], x.shape()[dim], index_shape);
    const Attrs attrs = {{"dim", dim}, {"input_size", Ints{4, 5, 6}}};
    for (DType dtype : {f64, f32, DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(dtype_name(dtype));
      // g, non-contiguous: a transposed copy viewed back.
      const Tensor g =
          to(randn(index_shape, f64), dtype).transpose(0, 2).contiguous().transpose(0, 2);
      const Tensor got = call_op("GatherBackward", {g, index}, attrs)[0];
      const Tensor want = scatter(zeros(x.shape(), f64), dim, index, to(g, f64), "add");
      EXPECT_EQ(got.dtype(), dtype);
      const double tol = dtype == f64 ? 0.0 : dtype == f32 ? 1e-6 : 1e-2;  // sums round once
      testing::expect_close(to(got, f64), to(to(want, dtype), f64), tol);
      const std::vector<Tensor> rule =
          testing::run_rule("Gather", {to(x, dtype), index}, {{"dim", dim}}, {g});
      testing::expect_close(rule[0], got, 0);
    }
  }
  const Tensor scalar_index = int_index({0}, {});
  testing::expect_close(call_op("GatherBackward", {ones({}, f64) * 2.0, scalar_index},
                                {{"dim", int64_t{0}}, {"input_size", Ints{}}})[0],
                        ones({}, f64) * 2.0, 0);
}

TEST(GradShape, GatherBackwardBadInputs_AreClearErrors) {
  const Attrs attrs = {{"dim", int64_t{1}}, {"input_size", Ints{3, 4}}};
  const Tensor index = int_index({0, 1, 2, 3}, {2, 2});
  testing::expect_error(
      [&] {
        call_op("GatherBackward", {randn({2, 3}, f64), index}, attrs);
      },
      ErrorKind::kShape,
      "GatherBackward: expected grad_output of index's shape [2, 2], got [2, 3]");
  testing::expect_error(
      [&] {
        call_op("GatherBackward", {int_index({1, 2, 3, 4}, {2, 2}), index}, attrs);
      },
      ErrorKind::kDType, "GatherBackward: expected a floating-point grad_output, got int64");
  testing::expect_error(
      [&] {
        call_op("GatherBackward", {randn({2, 2}, f64), int_index({0, 4, 1, 1}, {2, 2})}, attrs);
      },
      ErrorKind::kIndex, "4");
  testing::expect_error(
      [&] {
        call_op("GatherBackward", {randn({4, 2}, f64), int_index({0, 1, 2, 3, 0, 1, 2, 3}, {4, 2})},
                attrs);
      },
      ErrorKind::kShape, "GatherBackward: expected index size <= 3 in dimension 0");
  testing::expect_error(
      [&] {
        call_op("GatherBackward", {randn({2, 2}, f64), index},
                {{"dim", int64_t{1}}, {"input_size", Ints{-3, 4}}});
      },
      ErrorKind::kShape, "GatherBackward: expected input_size of non-negative sizes, got [-3, 4]");
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
