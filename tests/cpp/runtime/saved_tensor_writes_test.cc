// Autograd's check that the tensors a node saved for its gradient were not changed in place before
// backward (Note [Saved tensors changed in place] in src/autograd/nodes.h), in every pipeline mode:
// a write counts whether it is made while the saved tensor is ready or still pending.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "kiln/autograd.h"
#include "kiln/functional.h"
#include "runtime/runtime_testing.h"
#include "testing.h"

namespace kiln {
namespace {

using autograd::backward;
using autograd::get_grad;
using testing::PipelineMode;

class SavedTensorWrites : public ::testing::TestWithParam<PipelineMode> {
 protected:
  void SetUp() override { runtime::synchronize(); }

  static Tensor leaf(const Shape& shape) {
    Tensor t = testing::iota(shape, 1);
    autograd::set_requires_grad(t);
    return t;
  }

  testing::Watchdog watchdog_{::testing::UnitTest::GetInstance()->current_test_info()->name()};
  testing::ScopedPipeline pipeline_{GetParam()};
};

TEST_P(SavedTensorWrites, AnInPlaceWriteIntoASavedInput_FailsBackwardNamingTheInput) {
  const Tensor w = leaf({4});
  const Tensor x = testing::iota({4});
  const Tensor loss = sum(w * x);
  mul(x, Tensor::scalar(2.0), x);  // x, which Mul saved for w's gradient, now holds other values
  testing::expect_error([&] { backward({loss}); }, ErrorKind::kValue,
                        "input 1 (float32[4]), saved for the gradient, was changed in place");
  EXPECT_FALSE(get_grad(w).defined());
}

TEST_P(SavedTensorWrites, AWriteThroughAnotherViewOfTheMemory_IsSeen) {
  const Tensor w = leaf({2, 3});
  const Tensor x = testing::iota({2, 3});
  const Tensor loss = sum(w * x);
  const Tensor row = x.select(0, 1);
  add(row, Tensor::scalar(1.0), row);
  testing::expect_error([&] { backward({loss}); }, ErrorKind::kValue, "in the gradient of Mul");
}

TEST_P(SavedTensorWrites, AnOptimizerStepBeforeBackward_FailsOnTheSavedParameter) {
  const Tensor w = leaf({3});
  const Tensor x = testing::iota({3});
  const Tensor loss = sum(sin(w) * x);
  {
    autograd::NoGradGuard no_grad;
    sub(w, Tensor::scalar(0.5), w);  // Sin saved w, which its gradient reads
  }
  testing::expect_error([&] { backward({loss}); }, ErrorKind::kValue, "input 0 (float32[3])");
}

TEST_P(SavedTensorWrites, AWriteIntoASavedOutput_IsSeen) {
  const Tensor w = leaf({3});
  const Tensor y = exp(w);
  runtime::synchronize();  // y ready: Exp saved it as an alias, not a copy
  {
    autograd::NoGradGuard no_grad;
    mul(y, Tensor::scalar(0.0), y);
  }
  testing::expect_error([&] { autograd::grad({y}, {w}, {testing::iota({3})}); }, ErrorKind::kValue,
                        "output 0 (float32[3])");
}

TEST_P(SavedTensorWrites, WritesAfterBackward_OrIntoUnsavedTensors_AreFine) {
  const Tensor w = leaf({3});
  const Tensor x = testing::iota({3});
  const Tensor unrelated = testing::iota({3});
  const Tensor loss = sum(w * x);
  add(unrelated, Tensor::scalar(1.0), unrelated);
  backward({loss});
  EXPECT_EQ(testing::floats(get_grad(w)), (std::vector<float>{0, 1, 2}));
  mul(x, Tensor::scalar(2.0), x);  // the graph was freed by the backward: nothing left to check
  {
    autograd::NoGradGuard no_grad;
    sub(w, Tensor::scalar(1.0), w);
  }
  const Tensor again = sum(w * x);
  backward({again});
  EXPECT_EQ(testing::floats(get_grad(w)), (std::vector<float>{0, 3, 6}));
}

TEST_P(SavedTensorWrites, AWriteIntoASavedTensorOfACustomFunction_FailsItsBackward) {
  struct Square : Function<Square> {
    static Tensor Forward(AutogradContext* ctx, const Tensor& x) {
      ctx->SaveForBackward({x});
      return x * x;
    }
    static std::vector<Tensor> Backward(AutogradContext* ctx, const std::vector<Tensor>& grads) {
      return {grads[0] * ctx->GetSavedTensors()[0] * 2.0};
    }
  };
  const Tensor w = leaf({3});
  const Tensor x = w * 1.0;
  const Tensor loss = sum(Square::apply(x));
  {
    autograd::NoGradGuard no_grad;
    add(x, Tensor::scalar(1.0), x);
  }
  testing::expect_error([&] { backward({loss}); }, ErrorKind::kValue,
                        "saved tensor 0 (float32[3]), saved for the gradient, was changed");
}

INSTANTIATE_TEST_SUITE_P(AllModes, SavedTensorWrites, ::testing::ValuesIn(testing::all_modes()),
                         testing::mode_param_name);

TEST(SavedTensorWritesTwoStage, AWriteThroughAViewStillPending_IsCounted) {
  // With one worker (2stage), planning waits for the kernel in front: an op queued behind a held
  // kernel stays pending. Here that is a view of x, which Mul saved: the write through it must
  // wait for its memory to be counted.
  testing::Watchdog watchdog("SavedTensorWritesTwoStage");
  testing::ScopedPipeline pipeline(PipelineMode::kTwoStage);
  runtime::synchronize();
  Tensor w = testing::iota({4}, 1);
  autograd::set_requires_grad(w);
  const Tensor x = testing::iota({4});
  const Tensor y = w * x;
  testing::gate(1).close();
  const Tensor held = testing::probe(testing::iota({4}), {"", 1});
  std::thread opener([] {  // the write waits for the gate: open it from another thread
    ASSERT_TRUE(testing::gate(1).wait_entered(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    testing::gate(1).open();
  });
  const Tensor v = reshape(x, {2, 2});
  EXPECT_TRUE(v.is_pending());
  mul(v, Tensor::scalar(2.0), v);
  opener.join();
  testing::expect_error([&] { backward({y}, {testing::iota({4})}); }, ErrorKind::kValue,
                        "input 1 (float32[4])");
  EXPECT_EQ(testing::floats(held), (std::vector<float>{1, 3, 5, 7}));
}

}  // namespace
}  // namespace kiln
