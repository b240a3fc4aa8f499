// Recording for autograd while the pipeline has not planned the call: recording does not wait for
// the call's metadata, the outputs a node saves are pending aliases, and whether a result requires
// grad (floating-point results only) is decided when it is read.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "kiln/autograd.h"
#include "kiln/functional.h"
#include "runtime/runtime_testing.h"
#include "testing.h"

namespace kiln {
namespace {

using autograd::grad_fn;
using autograd::requires_grad;
using testing::PipelineMode;

class PipelineRecording : public ::testing::TestWithParam<PipelineMode> {
 protected:
  void SetUp() override {
    runtime::synchronize();
    autograd::set_requires_grad(w_);
    // Every call queued after this one stays unplanned until gate 1 opens.
    testing::gate(1).close();
    testing::probe(testing::iota({1}), {"", 0, /*infer_gate=*/1});
  }
  void TearDown() override { testing::gate(1).open(); }

  const Tensor w_ = testing::iota({3}, 1);
  testing::Watchdog watchdog_{::testing::UnitTest::GetInstance()->current_test_info()->name()};
  testing::ScopedPipeline pipeline_{GetParam()};
};

TEST_P(PipelineRecording, ACallIsRecordedBeforeItIsPlanned_AndItsSavedOutputServesBackward) {
  const Tensor y = exp(w_);     // Exp's gradient reads its output
  EXPECT_TRUE(y.is_pending());  // recording returned without the metadata
  testing::gate(1).open();
  ASSERT_NE(grad_fn(y), nullptr);
  EXPECT_EQ(grad_fn(y)->name(), "Exp");
  autograd::backward({sum(y * 2.0)});
  const std::vector<float> got = testing::floats(autograd::get_grad(w_));
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(got[i], 2 * std::exp(i + 1.0), 1e-5 * std::exp(i + 1.0));
}

TEST_P(PipelineRecording, AnIntegerResultRecordedBeforeItIsPlanned_RequiresNoGrad) {
  // (Recording a call on a pending result reads whether it requires grad: that waits.)
  const Tensor as_int = to(w_, DType::kInt32);
  const Tensor as_double = to(w_, DType::kFloat64);
  EXPECT_TRUE(as_int.is_pending());
  EXPECT_TRUE(as_double.is_pending());
  testing::gate(1).open();
  const Tensor back = to(as_int, DType::kFloat32) * 2.0;  // from an integer: no gradient
  EXPECT_FALSE(requires_grad(as_int));
  EXPECT_TRUE(autograd::is_leaf(as_int));
  EXPECT_EQ(grad_fn(as_int), nullptr);
  EXPECT_EQ(autograd::gradient_edge(as_int).node, nullptr);
  EXPECT_FALSE(requires_grad(back));
  EXPECT_EQ(grad_fn(back), nullptr);
  EXPECT_TRUE(requires_grad(as_double));
  ASSERT_NE(grad_fn(as_double), nullptr);
  EXPECT_EQ(grad_fn(as_double)->name(), "Cast");
  // A leaf marked now: the integer result can't be (its dtype), so the error is the dtype's.
  testing::expect_error([&] { autograd::set_requires_grad(as_int); }, ErrorKind::kDType,
                        "only floating-point tensors can require grad");
  testing::expect_error([&] { autograd::backward({sum(back)}); }, ErrorKind::kValue,
                        "does not require grad");
}

TEST_P(PipelineRecording, AnIntegerResult_LetsGoOfItsNodeOnceItIsPlanned) {
  // Else a stored integer result (max's indices, a cast) would keep the graph behind it alive.
  const Tensor as_int = to(w_, DType::kInt32);
  ASSERT_TRUE(as_int.is_pending());
  const std::weak_ptr<autograd::Node> node = as_int.impl()->autograd->grad_fn;
  ASSERT_FALSE(node.expired());
  testing::gate(1).open();
  runtime::drain();
  const Tensor y = exp(w_);  // the thread's next recorded call releases it
  EXPECT_TRUE(node.expired());
  EXPECT_EQ(grad_fn(y)->name(), "Exp");
  EXPECT_EQ(testing::floats(to(as_int, DType::kFloat32)), (std::vector<float>{1, 2, 3}));
}

TEST_P(PipelineRecording, ReleasingAnIntegerResultsNode_MayRecordAgain) {
  // Releasing a node may run code that records a call (a Python Function's context dies): that
  // call comes back to the loop that is releasing, here while another result waits in it.
  struct RecordsWhenDestroyed {
    RecordsWhenDestroyed(Tensor w, std::vector<Tensor>* recorded) : w(w), recorded(recorded) {}
    ~RecordsWhenDestroyed() { recorded->push_back(exp(w)); }
    Tensor w;
    std::vector<Tensor>* recorded;
  };
  std::vector<Tensor> recorded;
  testing::gate(1).open();
  Tensor y;
  {
    Tensor doubled;
    {
      autograd::NoGradGuard no_grad;
      doubled = w_ * 2.0;
    }
    auto witness = std::make_shared<RecordsWhenDestroyed>(w_, &recorded);
    y = autograd::detail::record_function(
        "Double", std::make_shared<AutogradContext>(), {w_}, {doubled},
        [witness](AutogradContext*, const std::vector<Tensor>& g) {
          return std::vector<Tensor>{g[0] * 2.0};
        })[0];
  }
  testing::gate(1).close();
  testing::probe(testing::iota({1}), {"", 0, /*infer_gate=*/1});
  const Tensor first = to(y, DType::kInt32);  // its node holds y, whose node holds the witness
  const Tensor second = to(w_, DType::kInt32);
  ASSERT_TRUE(second.is_pending());
  y = Tensor();
  testing::gate(1).open();
  runtime::drain();
  const Tensor z = exp(w_);  // releases first's node, and so the witness, which records
  ASSERT_EQ(recorded.size(), 1u);
  EXPECT_EQ(grad_fn(recorded[0])->name(), "Exp");
  EXPECT_EQ(grad_fn(z)->name(), "Exp");
  EXPECT_EQ(testing::floats(to(first, DType::kFloat32)), (std::vector<float>{2, 4, 6}));
}

TEST_P(PipelineRecording, DetachOfAnUnplannedResult_DoesNotWait) {
  const Tensor y = w_ * 3.0;
  const Tensor d = autograd::detach(y);
  EXPECT_TRUE(d.is_pending());
  testing::gate(1).open();
  EXPECT_FALSE(requires_grad(d));
  EXPECT_TRUE(requires_grad(y));
  EXPECT_EQ(testing::floats(d), (std::vector<float>{3, 6, 9}));
}

INSTANTIATE_TEST_SUITE_P(AsyncModes, PipelineRecording, ::testing::ValuesIn(testing::async_modes()),
                         testing::mode_param_name);

}  // namespace
}  // namespace kiln
