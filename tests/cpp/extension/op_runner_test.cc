// OpRunner in every pipeline mode: Run() queues the DeviceTask (outputs, CalcWorkspace) and the
// LaunchTask (LaunchKernel) like a built-in op; errors carry the op and raise at the sync points a
// built-in's would; the pipeline keeps the runner alive; misuse is refused at Run().
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "kiln/autograd.h"
#include "kiln/extension.h"
#include "kiln/functional.h"
#include "runtime/runtime_testing.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::PipelineMode;

std::atomic<int> g_live_runners{0};

// out = 2 * in + 1 through the workspace, recording what the kernel saw. Kernels may wait for a
// gate (runtime_testing.h) so that a test can look at the call while it is queued.
class CopyThroughWorkspace : public OpRunner {
 public:
  explicit CopyThroughWorkspace(std::string name, int gate = 0)
      : OpRunner(std::move(name)), gate_(gate) {
    ++g_live_runners;
  }
  ~CopyThroughWorkspace() override { --g_live_runners; }
  size_t CalcWorkspace() override { return inputs()[0].nbytes(); }
  void LaunchKernel() override {
    if (gate_ != 0) {
      KILN_CHECK(testing::gate(gate_).pass(testing::kGateTimeout)) << "gate " << gate_ << " closed";
    }
    seen_workspace = workspace_ptr();
    seen_workspace_size = workspace_size();
    auto* tmp = static_cast<float*>(workspace_ptr());
    const float* in = inputs()[0].data<float>();
    for (int64_t i = 0; i < inputs()[0].numel(); ++i) tmp[i] = in[i] * 2;
    float* out = outputs()[0].data<float>();
    for (int64_t i = 0; i < inputs()[0].numel(); ++i) out[i] = tmp[i] + 1;
  }
  void* seen_workspace = nullptr;
  size_t seen_workspace_size = 0;

 private:
  int gate_;
};

// Fails in the step `where` names: "workspace" (the DeviceTask), "kernel", "kernel_std" or
// "kernel_int" (an int thrown, no exception at all).
class Failing : public OpRunner {
 public:
  Failing(std::string name, std::string where)
      : OpRunner(std::move(name)), where_(std::move(where)) {}
  size_t CalcWorkspace() override {
    KILN_CHECK_VALUE(where_ != "workspace") << "workspace says no";
    return 0;
  }
  void LaunchKernel() override {
    KILN_CHECK_SHAPE(where_ != "kernel") << "kernel says no";
    if (where_ == "kernel_int") throw 5;
    throw std::runtime_error("a plain exception");
  }

 private:
  std::string where_;
};

Tensor copy_op(const Tensor& x, int gate = 0) {
  Tensor out(x.dtype(), x.shape());
  std::make_shared<CopyThroughWorkspace>("Copy", gate)->Run({x}, {out});
  return out;
}

class OpRunnerInMode : public ::testing::TestWithParam<PipelineMode> {
 protected:
  bool is_sync() const { return GetParam() == PipelineMode::kSync; }

  testing::Watchdog watchdog_{::testing::UnitTest::GetInstance()->current_test_info()->name()};
  testing::ScopedPipeline pipeline_{GetParam()};
};

void expect_error(const std::function<void()>& fn, ErrorKind kind, const std::string& cause,
                  const std::string& call) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing '" << cause << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_TRUE(testing::contains(e.what(), cause)) << e.what();
    EXPECT_TRUE(testing::contains(e.what(), call)) << e.what();
  }
}

TEST_P(OpRunnerInMode, AllocatesOutputsAndWorkspace_ThenLaunches) {
  Tensor out(DType::kFloat32, {4});
  auto runner = std::make_shared<CopyThroughWorkspace>("Copy");
  runner->Run({testing::iota({4})}, {out});
  ASSERT_TRUE(out.has_storage());
  EXPECT_TRUE(out.is_contiguous());
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(out.data<float>()[i], 2.0f * i + 1);
  EXPECT_EQ(runner->seen_workspace_size, 16u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(runner->seen_workspace) % kAlignment, 0u);
  runtime::synchronize();
  EXPECT_EQ(runner->workspace_ptr(), nullptr);  // released after the launch
  EXPECT_TRUE(runner->inputs().empty());        // and the tensors, once the call is done
  EXPECT_EQ(runner->op_name(), "Copy");
}

TEST_P(OpRunnerInMode, ChainsWithBuiltInOps_AndMatchesThemBitForBit) {
  const Tensor x = testing::iota({3, 5}, -7);
  Tensor y = copy_op(copy_op(x) * 3.0);  // custom -> built-in -> custom, all queued
  const Tensor expected = (x * 2.0 + 1.0) * 3.0 * 2.0 + 1.0;
  for (int64_t i = 0; i < 15; ++i) EXPECT_EQ(y.data<float>()[i], expected.data<float>()[i]);
}

// Note [OpRunner results and autograd]: a fresh result from inputs that require grad raises at
// backward; an output with memory, a call without such inputs and one under no grad record
// nothing.
TEST_P(OpRunnerInMode, FreshResultsFromInputsThatRequireGradRaiseAtBackward) {
  Tensor x = testing::iota({4});
  autograd::set_requires_grad(x);
  const Tensor y = copy_op(x);
  EXPECT_TRUE(autograd::requires_grad(y));
  ASSERT_NE(autograd::grad_fn(y), nullptr);
  EXPECT_EQ(autograd::grad_fn(y)->name(), "Copy");
  testing::expect_error([&] { autograd::backward({sum(y)}); }, ErrorKind::kNotImplemented,
                        "Copy (an OpRunner) has no gradient");
  Tensor out = Tensor::empty({4});
  std::make_shared<CopyThroughWorkspace>("Copy")->Run({x}, {out});
  EXPECT_FALSE(autograd::requires_grad(out));
  EXPECT_FALSE(autograd::requires_grad(copy_op(autograd::detach(x))));
  autograd::NoGradGuard no_grad;
  EXPECT_FALSE(autograd::requires_grad(copy_op(x)));
}

TEST_P(OpRunnerInMode, KeepsOutputsThatHaveMemory) {
  Tensor out = Tensor::empty({3});
  void* before = out.data_ptr();
  std::make_shared<CopyThroughWorkspace>("Copy")->Run({testing::iota({3})}, {out});
  EXPECT_EQ(out.data_ptr(), before);
  EXPECT_FLOAT_EQ(out.data<float>()[2], 5.0f);
}

TEST_P(OpRunnerInMode, RunReturnsBeforeTheKernel_AndTheRunnerLivesUntilItRan) {
  if (is_sync()) GTEST_SKIP() << "sync mode runs the kernel inside Run()";
  runtime::synchronize();
  const int live_before = g_live_runners.load();
  testing::gate(1).close();
  const Tensor y = copy_op(testing::iota({4}), /*gate=*/1);  // our runner reference is gone
  ASSERT_TRUE(testing::gate(1).wait_entered(1));
  EXPECT_EQ(g_live_runners.load(), live_before + 1);  // the queued call holds it
  EXPECT_EQ(y.shape(), Shape({4}));                   // metadata, without waiting
  testing::gate(1).open();
  EXPECT_FLOAT_EQ(y.data<float>()[3], 7.0f);  // waits for the kernel
  runtime::synchronize();
  EXPECT_EQ(g_live_runners.load(), live_before);
}

TEST_P(OpRunnerInMode, KernelErrors_CarryTheOp_AndStayOnTheOutputs) {
  const std::string call = "in MyOp(float32[2], None)";
  Tensor out(DType::kFloat32, {1});
  auto run = [&] {
    std::make_shared<Failing>("MyOp", "kernel")->Run({testing::iota({2}), Tensor()}, {out});
  };
  if (is_sync()) {
    expect_error(run, ErrorKind::kShape, "kernel says no", call);
    return;
  }
  ASSERT_NO_THROW(run());
  expect_error([&] { out.data_ptr(); }, ErrorKind::kShape, "kernel says no", call);
  // The output was never computed: every read raises, and so does a consumer.
  expect_error([&] { out.data_ptr(); }, ErrorKind::kShape, "kernel says no", call);
  expect_error([&] { (out + 1.0).data_ptr(); }, ErrorKind::kShape, "kernel says no", call);
  runtime::synchronize();  // the failure was raised by reads
}

TEST_P(OpRunnerInMode, OtherExceptions_BecomeKilnErrors_WithTheOp) {
  Tensor out(DType::kFloat32, {2});
  auto run = [&] {
    std::make_shared<Failing>("Plain", "kernel_std")->Run({testing::iota({2})}, {out});
  };
  expect_error(
      [&] {
        run();
        runtime::synchronize();
      },
      ErrorKind::kGeneric, "a plain exception", "in Plain(float32[2])");
  expect_error(
      [&] {
        std::make_shared<Failing>("Int", "kernel_int")->Run({testing::iota({2})}, {out});
        runtime::synchronize();
      },
      ErrorKind::kGeneric, "threw an object that is not a std::exception", "in Int(float32[2])");
}

TEST_P(OpRunnerInMode, CalcWorkspaceErrors_FailTheCall_AndRaiseAtSynchronize) {
  Tensor out(DType::kFloat32, {2});
  expect_error(
      [&] {
        std::make_shared<Failing>("Ws", "workspace")->Run({testing::iota({2})}, {out});
        runtime::synchronize();
      },
      ErrorKind::kValue, "workspace says no", "in Ws(float32[2])");
  EXPECT_NO_THROW(runtime::synchronize());
  EXPECT_FLOAT_EQ(copy_op(testing::iota({2})).data<float>()[1], 3.0f);  // still usable
}

TEST_P(OpRunnerInMode, AFailedInput_FailsTheCallWithTheInputsCause) {
  if (is_sync()) GTEST_SKIP() << "sync mode raises the input's failure at its own call";
  const Tensor bad = testing::probe(testing::iota({2}), {"kernel"});
  Tensor out;
  auto run = [&] {
    out = copy_op(bad);
    out.data_ptr();
  };
  expect_error(run, ErrorKind::kValue, "injected kernel failure", "RuntimeProbe");
  runtime::synchronize();
}

TEST_P(OpRunnerInMode, RejectsUndefinedOutputs_AtRun) {
  expect_error(
      [] { std::make_shared<CopyThroughWorkspace>("Copy")->Run({testing::iota({2})}, {Tensor()}); },
      ErrorKind::kValue, "output 0 is an undefined tensor", "in Copy(float32[2])");
  EXPECT_NO_THROW(runtime::synchronize());
}

TEST_P(OpRunnerInMode, RejectsARunnerNotMadeByMakeShared) {
  CopyThroughWorkspace on_stack("Copy");
  Tensor out(DType::kFloat32, {2});
  expect_error([&] { on_stack.Run({testing::iota({2})}, {out}); }, ErrorKind::kValue,
               "was not created by std::make_shared", "OpRunner 'Copy'");
  EXPECT_FALSE(out.has_storage());
}

TEST_P(OpRunnerInMode, RejectsASecondRunWhileTheFirstIsQueued_AndAllowsItAfter) {
  auto runner = std::make_shared<CopyThroughWorkspace>("Copy", /*gate=*/1);
  Tensor first(DType::kFloat32, {2});
  if (!is_sync()) testing::gate(1).close();
  runner->Run({testing::iota({2})}, {first});
  Tensor second(DType::kFloat32, {2});
  if (!is_sync()) {
    expect_error([&] { runner->Run({testing::iota({2})}, {second}); }, ErrorKind::kValue,
                 "is still queued from an earlier Run()", "OpRunner 'Copy'");
    testing::gate(1).open();
  }
  EXPECT_FLOAT_EQ(first.data<float>()[1], 3.0f);
  runtime::synchronize();
  runner->Run({testing::iota({2}, 10)}, {second});
  EXPECT_FLOAT_EQ(second.data<float>()[1], 23.0f);
}

TEST_P(OpRunnerInMode, ReportsAWrongDtype_FromData) {
  Tensor out(DType::kFloat32, {2});
  expect_error(
      [&] {
        std::make_shared<CopyThroughWorkspace>("Copy")->Run({Tensor::empty({2}, DType::kInt64)},
                                                            {out});
        runtime::synchronize();
      },
      ErrorKind::kDType, "data<float32>()", "in Copy(int64[2])");
}

INSTANTIATE_TEST_SUITE_P(AllModes, OpRunnerInMode, ::testing::ValuesIn(testing::all_modes()),
                         testing::mode_param_name);

}  // namespace
}  // namespace kiln
