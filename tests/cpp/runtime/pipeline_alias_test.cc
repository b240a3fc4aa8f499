// Tensor::alias of a pending tensor: a handle made without waiting, which the FrontendTask fills
// with the result's metadata (or failure) when it plans the call, and which a later stage's
// failure reaches too.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kiln/functional.h"
#include "runtime/runtime_testing.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::PipelineMode;

// Expects `read` itself to raise a kiln::Error of `kind` containing `needle` (no sync point
// first: the failure under test would raise there).
template <typename F>
void expect_read_raises(F&& read, ErrorKind kind, const std::string& needle) {
  const Error e = testing::raised_by(std::forward<F>(read));
  EXPECT_EQ(e.kind(), kind) << e.what();
  EXPECT_TRUE(testing::contains(e.what(), needle)) << e.what();
}

class PipelineAlias : public ::testing::TestWithParam<PipelineMode> {
 protected:
  void SetUp() override {
    runtime::synchronize();
    testing::gate(1).close();
  }
  void TearDown() override { testing::gate(1).open(); }

  // A result whose call stays unplanned until gate 1 opens.
  static Tensor held_result(const Tensor& x, const std::string& fail = "") {
    return testing::probe(x, {fail, 0, /*infer_gate=*/1});
  }

  testing::Watchdog watchdog_{::testing::UnitTest::GetInstance()->current_test_info()->name()};
  testing::ScopedPipeline pipeline_{GetParam()};
};

TEST_P(PipelineAlias, OfAnUnplannedResult_IsMadeAtOnce_AndTakesItsMetadataWhenPlanned) {
  const Tensor x = testing::iota({2, 3});
  const Tensor y = held_result(x);
  ASSERT_TRUE(testing::gate(1).wait_entered(1));
  const Tensor a = y.alias();
  const Tensor b = a.alias();  // an alias of an alias that is still pending
  EXPECT_TRUE(y.is_pending());
  EXPECT_TRUE(a.is_pending());
  EXPECT_TRUE(b.is_pending());
  testing::gate(1).open();
  for (const Tensor& t : {a, b}) {
    EXPECT_FALSE(t.is_same(y));
    EXPECT_EQ(t.shape(), (Shape{2, 3}));
    EXPECT_EQ(t.strides(), (Shape{3, 1}));
    EXPECT_EQ(t.dtype(), DType::kFloat32);
    EXPECT_EQ(t.storage(), y.storage());
    EXPECT_EQ(testing::floats(t), (std::vector<float>{1, 3, 5, 7, 9, 11}));
  }
}

TEST_P(PipelineAlias, OfAResultWhoseInferFails_RaisesTheSameCause) {
  const Tensor y = held_result(testing::iota({3}), "infer");
  const Tensor a = y.alias();
  testing::gate(1).open();
  expect_read_raises([&] { a.shape(); }, ErrorKind::kShape, "injected infer failure");
  expect_read_raises([&] { y.shape(); }, ErrorKind::kShape, "injected infer failure");
}

TEST_P(PipelineAlias, OfAResultWhoseKernelFails_RaisesTheSameCause) {
  const Tensor y = held_result(testing::iota({3}), "kernel");
  const Tensor a = y.alias();
  testing::gate(1).open();
  EXPECT_EQ(a.shape(), (Shape{3}));  // the metadata came
  expect_read_raises([&] { a.data<float>(); }, ErrorKind::kValue, "injected kernel failure");
}

TEST_P(PipelineAlias, OfAnAliasOfAResultThatFails_RaisesTheSameCause) {
  const struct {
    const char* fail;
    ErrorKind kind;
    const char* message;
  } cases[] = {{"infer", ErrorKind::kShape, "injected infer failure"},
               {"kernel", ErrorKind::kValue, "injected kernel failure"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.fail);
    testing::gate(1).close();
    const Tensor y = held_result(testing::iota({3}), c.fail);
    const Tensor b = y.alias().alias();
    testing::gate(1).open();
    expect_read_raises([&] { b.data<float>(); }, c.kind, c.message);
  }
}

TEST_P(PipelineAlias, OfOneUnplannedResultFromSeveralThreads_AllTakeItsMetadata) {
  const Tensor y = held_result(testing::iota({3}));
  ASSERT_TRUE(testing::gate(1).wait_entered(1));
  constexpr int kThreads = 4;
  constexpr int kAliases = 50;
  std::vector<std::vector<Tensor>> aliases(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kAliases; ++i) {
        // Every other one an alias of an alias: both lists grow while others push.
        aliases[t].push_back(i % 2 == 0 ? y.alias() : aliases[t].back().alias());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_TRUE(y.is_pending());
  testing::gate(1).open();
  for (const std::vector<Tensor>& list : aliases) {
    for (const Tensor& a : list) {
      ASSERT_EQ(a.storage(), y.storage());
      ASSERT_EQ(testing::floats(a), (std::vector<float>{1, 3, 5}));
    }
  }
}

TEST_P(PipelineAlias, OfAFailedResult_IsFailedToo) {
  const Tensor y = held_result(testing::iota({3}), "infer");
  testing::gate(1).open();
  runtime::drain();
  const Tensor a = y.alias();  // made without raising; reading it raises
  expect_read_raises([&] { a.dtype(); }, ErrorKind::kShape, "injected infer failure");
}

TEST_P(PipelineAlias, MadeWhileTheFrontendPlans_AlwaysGetsTheMetadata) {
  // Aliases race with the planning of their results: whichever wins, each gets the metadata.
  testing::gate(1).open();
  const Tensor x = testing::iota({4});
  std::vector<Tensor> results;
  std::vector<Tensor> aliases;
  for (int i = 0; i < 2000; ++i) {
    results.push_back(x + static_cast<double>(i));
    aliases.push_back(results.back().alias());
  }
  for (int i = 0; i < 2000; ++i) {
    ASSERT_EQ(aliases[i].storage(), results[i].storage()) << i;
    ASSERT_EQ(testing::floats(aliases[i]), testing::floats(results[i])) << i;
  }
  EXPECT_EQ(testing::floats(aliases.back()), (std::vector<float>{1999, 2000, 2001, 2002}));
}

TEST_P(PipelineAlias, FromSeveralThreads_EachGetsItsResultsMetadata) {
  testing::gate(1).open();
  constexpr int kThreads = 3;
  constexpr int kCalls = 300;
  std::vector<std::vector<float>> last(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &last] {
      Tensor y = testing::iota({2}, static_cast<float>(t));
      for (int i = 0; i < kCalls; ++i) y = (y + 1.0).alias();
      last[t] = testing::floats(y);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(last[t], (std::vector<float>{t + 300.0f, t + 301.0f})) << t;
  }
}

// Not an alias, but the same held result: allocate() of a pending tensor waits for its metadata,
// and with it the pipeline's Storage, which it replaced before (racing with the kernel that
// writes it; under TSan, a data race on the storage pointer).
TEST_P(PipelineAlias, AllocateOfAnUnplannedResult_KeepsThePipelinesMemory) {
  const Tensor x = testing::iota({2, 3});
  const Tensor y = held_result(x);
  ASSERT_TRUE(testing::gate(1).wait_entered(1));
  std::thread allocating([&] { y.allocate(); });
  testing::gate(1).open();
  allocating.join();
  EXPECT_EQ(testing::floats(y), (std::vector<float>{1, 3, 5, 7, 9, 11}));  // the probe's 2 x + 1
}

INSTANTIATE_TEST_SUITE_P(AsyncModes, PipelineAlias, ::testing::ValuesIn(testing::async_modes()),
                         testing::mode_param_name);

}  // namespace
}  // namespace kiln
