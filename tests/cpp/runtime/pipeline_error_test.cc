// Failures in each stage of the pipeline (FrontendTask, DeviceTask, LaunchTask), in every mode:
// the error names the op, its input types and the cause, it raises at the right sync point, ops
// that consume the failed tensor raise the same cause, and the runtime keeps working.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/autograd.h"
#include "kiln/functional.h"
#include "runtime_testing.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::PipelineMode;

struct Injection {
  const char* stage;  // RuntimeProbe's `fail` attribute
  ErrorKind kind;
  const char* cause;  // text the error must contain
};

const Injection kInjections[] = {
    {"infer", ErrorKind::kShape, "injected infer failure"},
    {"alloc", ErrorKind::kGeneric, "out of memory: could not allocate 1125899906842624 bytes"},
    {"kernel", ErrorKind::kValue, "injected kernel failure"},
};

// The op and its input types, as every stage's error names them.
constexpr const char* kCall = "in RuntimeProbe(float32[2, 3])";

void expect_injected(const Error& e, const Injection& injection) {
  EXPECT_EQ(e.kind(), injection.kind) << e.what();
  EXPECT_TRUE(testing::contains(e.what(), injection.cause)) << e.what();
  EXPECT_TRUE(testing::contains(e.what(), kCall)) << e.what();
}

class PipelineError : public ::testing::TestWithParam<std::tuple<PipelineMode, int>> {
 protected:
  PipelineMode mode() const { return std::get<0>(GetParam()); }
  const Injection& injection() const { return kInjections[std::get<1>(GetParam())]; }
  bool is_sync() const { return mode() == PipelineMode::kSync; }

  testing::Watchdog watchdog_{::testing::UnitTest::GetInstance()->current_test_info()->name()};
  testing::ScopedPipeline pipeline_{mode()};
  testing::ScopedRefusingAllocator allocator_;
};

TEST_P(PipelineError, RaisesAtTheRightSyncPoint_AndConsumersRaiseTheSameCause) {
  runtime::synchronize();
  const Tensor x = testing::iota({2, 3});
  const Injection& inj = injection();
  if (is_sync()) {
    // Inline: the call itself raises, and nothing is stored for later.
    expect_injected(testing::raised_by([&] { testing::probe(x, {inj.stage}); }), inj);
    EXPECT_NO_THROW(runtime::synchronize());
  } else {
    Tensor y;
    ASSERT_NO_THROW(y = testing::probe(x, {inj.stage}));  // queued: the call never raises
    const Tensor z = y * 2.0;                             // consumers queue too
    const Tensor w = sum(exp(z));
    if (std::string(inj.stage) == "infer") {
      expect_injected(testing::raised_by([&] { (void)y.shape(); }), inj);  // a metadata read raises
    } else {
      EXPECT_EQ(y.shape(), (Shape{2, 3}));  // metadata is fine; the data is not
      expect_injected(testing::raised_by([&] { (void)y.data_ptr(); }), inj);
    }
    // Consumers fail with the producer's error, not one of their own.
    const Error from_w = testing::raised_by([&] { (void)w.data<float>(); });
    expect_injected(from_w, inj);
    EXPECT_FALSE(testing::contains(from_w.what(), "Mul(")) << from_w.what();
    EXPECT_FALSE(testing::contains(from_w.what(), "Sum(")) << from_w.what();
    expect_injected(testing::raised_by([&] { (void)z.data<float>(); }), inj);
    // Every failure was raised by a read, so synchronize() has nothing left to raise.
    EXPECT_NO_THROW(runtime::synchronize());
  }
  // The runtime keeps working: independent ops (and the probe itself) give correct results.
  EXPECT_EQ(testing::floats(x + 1.0), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(testing::floats(testing::probe(x)), (std::vector<float>{1, 3, 5, 7, 9, 11}));
  EXPECT_NO_THROW(runtime::synchronize());
}

TEST_P(PipelineError, UnreadFailureRaisesAtSynchronize_Once) {
  runtime::synchronize();
  const Tensor x = testing::iota({2, 3});
  const Injection& inj = injection();
  if (is_sync()) {
    expect_injected(testing::raised_by([&] { testing::probe(x, {inj.stage}); }), inj);
  } else {
    // The result is dropped at once: its failure must still reach the next synchronize().
    EXPECT_NO_THROW(testing::probe(x, {inj.stage}));
    expect_injected(testing::raised_by([] { runtime::synchronize(); }), inj);
  }
  EXPECT_NO_THROW(runtime::synchronize());
  EXPECT_EQ(testing::floats(x * 3.0), (std::vector<float>{0, 3, 6, 9, 12, 15}));
}

TEST_P(PipelineError, AnUnreadFailure_RaisesAtSynchronize_AfterAnotherWasRaisedByARead) {
  runtime::synchronize();
  const Tensor x = testing::iota({2, 3});
  const Injection& inj = injection();
  if (is_sync()) {
    expect_injected(testing::raised_by([&] { testing::probe(x, {"kernel"}); }), kInjections[2]);
    expect_injected(testing::raised_by([&] { testing::probe(x, {inj.stage}); }), inj);
  } else {
    const Tensor read = testing::probe(x, {"kernel"});
    expect_injected(testing::raised_by([&] { (void)read.data_ptr(); }), kInjections[2]);
    testing::probe(x, {inj.stage});  // never read
    expect_injected(testing::raised_by([] { runtime::synchronize(); }), inj);
  }
  EXPECT_NO_THROW(runtime::synchronize());
}

TEST_P(PipelineError, TheSecondOfTwoUnreadFailures_RaisesAtSynchronize_WhenTheFirstIsRead) {
  if (is_sync()) GTEST_SKIP() << "sync mode raises each failure at its call";
  runtime::synchronize();
  const Tensor x = testing::iota({2, 3});
  const Tensor first = testing::probe(x, {"kernel"});
  testing::probe(x, {injection().stage});  // never read
  runtime::drain();                        // both have failed before the read
  expect_injected(testing::raised_by([&] { (void)first.data_ptr(); }), kInjections[2]);
  expect_injected(testing::raised_by([] { runtime::synchronize(); }), injection());
  EXPECT_NO_THROW(runtime::synchronize());
}

TEST_P(PipelineError, FailedWriteIntoOutTensor_RaisesOnce_AndKeepsItsData) {
  runtime::synchronize();
  const Tensor x = testing::iota({2, 3});
  const Tensor target = testing::iota({2, 3}, 10);
  const Injection& inj = injection();
  if (is_sync()) {
    expect_injected(testing::raised_by([&] { testing::probe(x, {inj.stage}, target); }), inj);
  } else {
    EXPECT_NO_THROW(testing::probe(x, {inj.stage}, target));
    expect_injected(testing::raised_by([&] { (void)target.data_ptr(); }), inj);
  }
  // Kernels validate before they write: once raised, the target is healthy with its old data.
  EXPECT_EQ(testing::floats(target), (std::vector<float>{10, 11, 12, 13, 14, 15}));
  EXPECT_NO_THROW(runtime::synchronize());
  // ... and can be written again.
  testing::probe(x, {}, target);
  EXPECT_EQ(testing::floats(target), (std::vector<float>{1, 3, 5, 7, 9, 11}));
}

TEST_P(PipelineError, FailedWriteIntoAView_RaisesFromItsBase_Once) {
  // Note [Failed writes into shared memory]: the base reports its view's failure.
  runtime::synchronize();
  const Tensor x = testing::iota({2, 3});
  const Tensor base = testing::iota({3, 3}, 10);
  const Tensor row = base.narrow(0, 0, 2);
  const Injection& inj = injection();
  if (is_sync()) {
    expect_injected(testing::raised_by([&] { testing::probe(x, {inj.stage}, row); }), inj);
  } else {
    EXPECT_NO_THROW(testing::probe(x, {inj.stage}, row));
    expect_injected(testing::raised_by([&] { (void)base.data_ptr(); }), inj);
  }
  // Raised once: the view, its base and a view made now are healthy, with their old data.
  EXPECT_EQ(row.impl()->failure(), nullptr);
  EXPECT_EQ(base.narrow(0, 2, 1).impl()->failure(), nullptr);
  EXPECT_EQ(testing::floats(base), (std::vector<float>{10, 11, 12, 13, 14, 15, 16, 17, 18}));
  EXPECT_NO_THROW(runtime::synchronize());
}

// A view made of a pending result (sum's and reshape's own, say) before its kernel failed reads
// memory nothing wrote: it reports the result's failure for as long as the memory lives, and an
// op on it fails with that cause (in the async modes it printed zeros without a word).
TEST_P(PipelineError, ViewsMadeBeforeAResultFailed_ReportItsFailure_ForGood) {
  runtime::synchronize();
  const Injection& inj = injection();
  const auto consume = [&] {
    const Tensor y = testing::probe(testing::iota({2, 3}), {inj.stage});
    const Tensor view = y.reshape({3, 2});
    return sum(view.narrow(0, 1, 2));
  };
  expect_injected(testing::raised_by([&] { (void)consume().data_ptr(); }), inj);
  // Sync raises at the call, and an infer failure at the view (its metadata never came): neither
  // leaves a view of a result that fails later.
  if (is_sync() || std::string(inj.stage) == "infer") return;
  const Tensor y = testing::probe(testing::iota({2, 3}), {inj.stage});
  const Tensor view = y.reshape({6});
  expect_injected(testing::raised_by([&] { runtime::synchronize(); }), inj);
  // Raised once at the sync point, the result and its view still fail when read.
  expect_injected(testing::raised_by([&] { (void)view.data_ptr(); }), inj);
  expect_injected(testing::raised_by([&] { (void)y.data_ptr(); }), inj);
}

TEST_P(PipelineError, FailureInALongQueue_LosesNothing) {
  // 300 independent chains; the middle one fails. Every other chain is computed, the failed one
  // and only it raises, and the failure is raised once.
  runtime::synchronize();
  const Injection& inj = injection();
  const Tensor x = testing::iota({2, 3});
  constexpr int kChains = 300;
  constexpr int kFailing = kChains / 2;
  std::vector<Tensor> results;
  for (int i = 0; i < kChains; ++i) {
    if (i == kFailing && is_sync()) {
      expect_injected(testing::raised_by([&] { testing::probe(x, {inj.stage}); }), inj);
      results.emplace_back();
      continue;
    }
    const Tensor y = testing::probe(x + static_cast<double>(i), {i == kFailing ? inj.stage : ""});
    results.push_back(y - 1.0);
  }
  for (int i = 0; i < kChains; ++i) {
    if (i == kFailing) {
      if (!is_sync())
        expect_injected(testing::raised_by([&] { (void)results[i].data_ptr(); }), inj);
      continue;
    }
    const std::vector<float> got = testing::floats(results[i]);
    for (int j = 0; j < 6; ++j) ASSERT_EQ(got[j], 2.0f * (j + i)) << "chain " << i;
  }
  EXPECT_NO_THROW(runtime::synchronize());
}

// An infer function that gives a negative size is refused the same way in every mode: a ShapeError
// naming the op and its inputs (the results never get memory of a bogus size).
TEST(PipelineInfer, ANegativeOutputSizeIsAShapeErrorNamingTheCall_InEveryMode) {
  OpRegistration reg(OpDef("NegativeSizeProbe")
                         .input("x")
                         .infer([](const InferContext& ctx) {
                           return MetaList{{ctx.input(0).dtype, Shape{2, -1}}};
                         })
                         .kernel(DeviceType::kCPU, [](KernelContext&) {}));
  for (PipelineMode mode : testing::all_modes()) {
    testing::ScopedPipeline pipeline(mode);
    const Error e = testing::raised_by([] {
      const Tensor y = call_op("NegativeSizeProbe", {Tensor::empty({3})})[0];
      (void)y.shape();
      runtime::synchronize();
    });
    EXPECT_EQ(e.kind(), ErrorKind::kShape) << e.what();
    EXPECT_TRUE(testing::contains(e.what(), "sizes must be non-negative")) << e.what();
    EXPECT_TRUE(testing::contains(e.what(), "in NegativeSizeProbe(float32[3])")) << e.what();
    EXPECT_NO_THROW(runtime::synchronize());
  }
}

// Standard exceptions from a custom op's infer, kernel or gradient rule, and an infer that gives
// another number of outputs than the schema, are KilnErrors naming the call in every mode (they
// were bare std exceptions, whose Python type depended on the mode, or an "internal error").
TEST(PipelineInfer, UserCodeFailuresAreKilnErrorsNamingTheCall_InEveryMode) {
  const auto same = [](const InferContext& ctx) { return MetaList{ctx.input(0)}; };
  OpRegistration infer_throws(OpDef("InferThrowsProbe")
                                  .input("x")
                                  .infer([](const InferContext&) -> MetaList {
                                    throw std::invalid_argument("rank must be 2");
                                  })
                                  .kernel(DeviceType::kCPU, [](KernelContext&) {}));
  OpRegistration kernel_throws(OpDef("KernelThrowsProbe")
                                   .input("x")
                                   .infer(same)
                                   .kernel(DeviceType::kCPU, [](KernelContext&) {
                                     throw std::runtime_error("bad input in my kernel");
                                   }));
  OpRegistration two_outputs(OpDef("TwoOutputsProbe")
                                 .input("x")
                                 .outputs(2)
                                 .infer(same)
                                 .kernel(DeviceType::kCPU, [](KernelContext&) {}));
  OpRegistration grad_throws(
      OpDef("GradThrowsProbe")
          .input("x")
          .infer(same)
          .kernel(DeviceType::kCPU,
                  [](KernelContext& ctx) { copy_into(ctx.outputs[0], ctx.inputs[0]); })
          .grad([](const std::vector<Tensor>&, const std::vector<Tensor>&, const Attrs&,
                   const std::vector<Tensor>&) -> std::vector<Tensor> {
            throw std::out_of_range("no gradient here");
          }));
  struct Case {
    const char* op;
    ErrorKind kind;
    const char* message;
  };
  for (PipelineMode mode : testing::all_modes()) {
    testing::ScopedPipeline pipeline(mode);
    for (const Case& c : {Case{"InferThrowsProbe", ErrorKind::kGeneric, "rank must be 2"},
                          Case{"KernelThrowsProbe", ErrorKind::kGeneric, "bad input in my kernel"},
                          Case{"TwoOutputsProbe", ErrorKind::kValue,
                               "TwoOutputsProbe: infer returned 1 outputs, the schema says 2"}}) {
      const Error e = testing::raised_by([&] {
        const Tensor y = call_op(c.op, {Tensor::empty({3})})[0];
        (void)y.numel();
        runtime::synchronize();
      });
      EXPECT_EQ(e.kind(), c.kind) << e.what();
      EXPECT_TRUE(testing::contains(e.what(), c.message)) << e.what();
      EXPECT_TRUE(testing::contains(e.what(), std::string("in ") + c.op + "(float32[3])"))
          << e.what();
      EXPECT_NO_THROW(runtime::synchronize());
    }
    Tensor x = zeros({3});
    autograd::set_requires_grad(x, true);
    const Error e = testing::raised_by([&] {
      autograd::backward({sum(call_op("GradThrowsProbe", {x})[0])});
      runtime::synchronize();
    });
    EXPECT_TRUE(testing::contains(e.what(), "no gradient here")) << e.what();
    EXPECT_TRUE(testing::contains(e.what(), "in the gradient of GradThrowsProbe(float32[3])"))
        << e.what();
  }
}

std::string injection_test_name(
    const ::testing::TestParamInfo<std::tuple<PipelineMode, int>>& info) {
  return testing::mode_param_name({std::get<0>(info.param), info.index}) + "_" +
         kInjections[std::get<1>(info.param)].stage;
}

INSTANTIATE_TEST_SUITE_P(AllModesAndStages, PipelineError,
                         ::testing::Combine(::testing::ValuesIn(testing::all_modes()),
                                            ::testing::Values(0, 1, 2)),
                         injection_test_name);

}  // namespace
}  // namespace kiln
