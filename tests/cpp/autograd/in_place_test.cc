// In-place writes under autograd (see "In-place writes" in kiln/autograd.h): the written tensor's
// history moves on to the call, the values it wrote over are kept when the gradient needs them,
// and the writes autograd would track wrongly are refused.
#include <gtest/gtest.h>

#include "kiln/autograd.h"
#include "kiln/functional.h"
#include "runtime/runtime_testing.h"
#include "testing.h"

namespace kiln {
namespace {

Tensor leaf(const Shape& shape) {
  Tensor t = randn(shape, DType::kFloat64);
  autograd::set_requires_grad(t);
  return t;
}

Tensor number(double v) { return Tensor::scalar(v); }

TEST(InPlaceAutograd, AnInPlaceAddMovesTheTensorsHistoryOn) {
  const Tensor x = leaf({4}), b = leaf({4});
  const Tensor y = mul(x, number(2.0));
  const std::shared_ptr<autograd::Node> before = autograd::grad_fn(y);
  add(y, b, y);  // y += b
  ASSERT_NE(autograd::grad_fn(y), nullptr);
  EXPECT_EQ(autograd::grad_fn(y)->name(), "Add");
  EXPECT_EQ(autograd::grad_fn(y)->next_edges()[0].node, before);
  EXPECT_FALSE(autograd::is_leaf(y));
  const Tensor g = randn({4}, DType::kFloat64);
  autograd::backward({mul(y, y)}, {g});
  const Tensor twice_y = mul(mul(x, number(2.0)) + b, number(2.0)) * g;
  testing::expect_close(autograd::get_grad(x), mul(twice_y, number(2.0)), 1e-12);
  testing::expect_close(autograd::get_grad(b), twice_y, 1e-12);
}

TEST(InPlaceAutograd, TheValueWrittenOverIsKeptWhenTheGradientReadsIt) {
  const Tensor x = leaf({5}), w = leaf({5});
  const Tensor y = sin(x);
  mul(y, w, y);  // y *= w: w's gradient reads y's old value, sin(x)
  sin(y, y);     // y = sin(y): Sin's gradient reads its input, written over by this call
  autograd::backward({sum(y)});
  const Tensor inner = mul(sin(x), w);
  testing::expect_close(autograd::get_grad(w), mul(cos(inner), sin(x)), 1e-12);
  testing::expect_close(autograd::get_grad(x), mul(mul(cos(inner), w), cos(x)), 1e-12);
}

TEST(InPlaceAutograd, SecondDerivativesGoThroughTheKeptValue) {
  const Tensor x = leaf({3});
  const Tensor y = mul(x, number(1.0));
  mul(y, x, y);  // y = x * x, in place
  const Tensor dx = autograd::grad({sum(y)}, {x}, {}, /*retain_graph=*/true,
                                   /*create_graph=*/true)[0];
  testing::expect_close(dx, mul(x, number(2.0)), 1e-12);
  const Tensor ddx = autograd::grad({sum(dx)}, {x})[0];
  testing::expect_close(ddx, full({3}, 2.0, DType::kFloat64), 1e-12);
}

TEST(InPlaceAutograd, AWriteOfAConstantKeepsTheTensorRequiringGrad) {
  const Tensor x = leaf({3});
  const Tensor y = mul(x, number(3.0));
  mul(ones({3}, DType::kFloat64), number(2.0), y);  // no input requires grad: y = 2, tracked
  EXPECT_TRUE(autograd::requires_grad(y));
  EXPECT_EQ(autograd::grad_fn(y)->name(), "Mul");
  autograd::backward({sum(mul(y, x))});
  testing::expect_close(autograd::get_grad(x), full({3}, 2.0, DType::kFloat64), 1e-12);
}

TEST(InPlaceAutograd, TheHistoryAWriteReplacesGetsZeros) {
  const Tensor x = leaf({3}), w = leaf({3});
  const Tensor y = mul(x, number(3.0));
  mul(w, w, y);  // y = w * w: y's old history, through x, gets zeros (as PyTorch's copy_)
  ASSERT_EQ(autograd::grad_fn(y)->next_edges().size(), 3u);  // w, w, then the old y
  autograd::backward({sum(y)});
  testing::expect_close(autograd::get_grad(x), zeros({3}, DType::kFloat64), 0);
  testing::expect_close(autograd::get_grad(w), mul(w, number(2.0)), 1e-12);
}

TEST(InPlaceAutograd, BackwardRaisesAFailedOutCallThatNoReadRaisedYet) {
  // Asynchronous: the out tensor's shape error waits for a sync point, and y keeps shape [3], so
  // Mul's gradient rule fails on it; backward raises the call's error, the cause.
  const testing::ScopedPipeline pipeline(runtime::PipelineMode::kTwoStage);
  const Tensor x = leaf({3}), w = leaf({4});
  const Tensor y = mul(x, number(2.0));
  mul(w, number(3.0), y);
  const Error e = testing::raised_by([&] { autograd::backward({sum(y)}); });  // no sync before
  EXPECT_EQ(e.kind(), ErrorKind::kShape) << e.what();
  EXPECT_NE(std::string(e.what()).find("out tensor 0 has shape [3], expected [4]"),
            std::string::npos)
      << e.what();
  runtime::synchronize();  // that failure was the one raised
}

TEST(InPlaceAutograd, AnUntrackedTensorWrittenFromATrackedOneBecomesTracked) {
  const Tensor w = leaf({3});
  const Tensor total = zeros({3}, DType::kFloat64);
  add(total, w, total);
  add(total, mul(w, w), total);
  EXPECT_TRUE(autograd::requires_grad(total));
  autograd::backward({sum(total)});
  testing::expect_close(autograd::get_grad(w), add(mul(w, number(2.0)), number(1.0)), 1e-12);
}

TEST(InPlaceAutograd, AGradientThatIgnoresAChangedSavedTensorStillRuns) {
  const Tensor x = leaf({3});
  const Tensor y = add(x, x);  // Add saved y (its output); its gradient does not read it
  add(y, number(1.0), y);
  autograd::backward({sum(y)});
  testing::expect_close(autograd::get_grad(x), full({3}, 2.0, DType::kFloat64), 1e-12);
}

TEST(InPlaceAutograd, AGradientThatReadsAChangedSavedTensorFailsNamingIt) {
  const Tensor x = leaf({3});
  const Tensor y = exp(x);  // Exp's gradient reads its output, y
  add(y, number(1.0), y);
  testing::expect_error([&] { autograd::backward({sum(y)}); }, ErrorKind::kValue,
                        "output 0 (float64[3]), saved for the gradient, was changed in place");
  EXPECT_FALSE(autograd::get_grad(x).defined());
}

// a * b for float64 tensors of one shape, claiming kTraitGradIgnoresFirstInput while its rule
// reads a: an in-place call then keeps no copy of a, and the rule's read of it must raise.
OpDef misdeclared_mul_def() {
  return OpDef("InPlaceTestMisdeclaredMul")
      .input("a")
      .input("b")
      .traits(kTraitElementwise | kTraitGradIgnoresFirstInput)
      .infer([](const InferContext& ctx) { return MetaList{ctx.input(0)}; })
      .kernel(DeviceType::kCPU,
              [](KernelContext& ctx) {
                const Tensor a = ctx.inputs[0].contiguous(), b = ctx.inputs[1].contiguous();
                double* out = ctx.outputs[0].data<double>();
                for (int64_t i = 0; i < a.numel(); ++i) {
                  out[i] = a.data<double>()[i] * b.data<double>()[i];
                }
              })
      .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>&, const Attrs&,
               const std::vector<Tensor>& g) {
        return std::vector<Tensor>{mul(g[0], in[1]), mul(g[0], in[0])};
      });
}

TEST(InPlaceAutograd, ARuleReadingAnInputItsCallWroteOverRaises) {
  const OpRegistration registration(misdeclared_mul_def());
  const Tensor x = leaf({3}), w = leaf({3});
  const Tensor y = mul(x, number(2.0));
  call_op("InPlaceTestMisdeclaredMul", {y, w}, {}, {y});
  testing::expect_error([&] { autograd::backward({sum(y)}); }, ErrorKind::kValue,
                        "input 0 (float64[3]) was written over by this in-place call");
  EXPECT_FALSE(autograd::get_grad(w).defined());
}

TEST(InPlaceAutograd, AWriteThroughARecordedViewMovesItsBasesHistoryOn) {
  const Tensor x = leaf({2, 3}), b = leaf({3});
  const Tensor y = mul(x, number(2.0));
  const Tensor flat = reshape(y, {6});                 // a recorded view op: a view of y
  const Tensor row = reshape(y, {2, 3}).select(0, 1);  // a Tensor view, which autograd does not see
  testing::expect_error([&] { add(row, b, row); }, ErrorKind::kValue, "part of another's memory");
  mul(flat, number(3.0), flat);  // y is 6 x now
  EXPECT_EQ(autograd::grad_fn(y)->name(), "AsStridedScatter");
  autograd::backward({sum(y)});
  testing::expect_close(autograd::get_grad(x), full({2, 3}, 6.0, DType::kFloat64), 1e-12);
}

TEST(InPlaceAutograd, AWriteIntoABaseMovesItsLiveViewsHistoriesOn) {
  const Tensor x = leaf({2, 3});
  const Tensor y = mul(x, number(2.0));
  const Tensor flat = reshape(y, {6});
  mul(y, y, y);  // y = 4 x^2, and so flat
  EXPECT_EQ(autograd::grad_fn(flat)->name(), "AsStrided");
  autograd::backward({sum(flat)});
  testing::expect_close(autograd::get_grad(x), mul(x, number(8.0)), 1e-12);
}

TEST(InPlaceAutograd, WritesThroughViewsAutogradCannotFollowAreRefused) {
  const Tensor x = leaf({2, 3}), b = leaf({3});
  const Tensor of_leaf = reshape(x, {6});
  testing::expect_error([&] { add(of_leaf, number(1.0), of_leaf); }, ErrorKind::kValue,
                        "view of a leaf tensor that requires grad");
  const Tensor plain = zeros({2, 3}, DType::kFloat64);
  const Tensor part = plain.select(0, 0);
  testing::expect_error([&] { add(part, b, part); }, ErrorKind::kValue, "part of another's memory");
  testing::expect_close(plain, zeros({2, 3}, DType::kFloat64), 0);  // refused before writing
}

TEST(InPlaceAutograd, RetainGradFollowsTheTensorToItsNewHistory) {
  const Tensor x = leaf({3});
  const Tensor y = mul(x, number(2.0));
  autograd::retain_grad(y);
  mul(y, number(3.0), y);
  autograd::backward({sum(mul(y, y))});
  EXPECT_TRUE(autograd::retains_grad(y));
  // d/dy of sum(y^2) for the new y only (the old value's gradient is 3 times that).
  testing::expect_close(autograd::get_grad(y), mul(y, number(2.0)), 1e-12);
}

TEST(InPlaceAutograd, DetachInPlaceMakesALeafThatDoesNotRequireGrad) {
  const Tensor x = leaf({3});
  const Tensor y = mul(x, number(2.0));
  autograd::retain_grad(y);
  autograd::detach_in_place(y);
  EXPECT_FALSE(autograd::requires_grad(y));
  EXPECT_TRUE(autograd::is_leaf(y));
  EXPECT_FALSE(autograd::retains_grad(y));
  add(y, number(1.0), y);  // an untracked tensor now
  const Tensor z = mul(x, number(1.0));
  const Tensor view = reshape(z, {3, 1});  // a view autograd tracks
  testing::expect_error([&] { autograd::detach_in_place(view); }, ErrorKind::kValue, "detach()");
  autograd::detach_in_place(z);           // its base may, as in PyTorch
  autograd::detach_in_place(zeros({2}));  // nothing to forget
}

}  // namespace
}  // namespace kiln
