// What a read waits for: a pending tensor's metadata needs only its FrontendTask, its data the
// LaunchTasks that use its memory; data that no queued op uses never waits.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "kiln/functional.h"
#include "runtime_testing.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::PipelineMode;

class PipelineWait : public ::testing::TestWithParam<PipelineMode> {
 protected:
  void SetUp() override { runtime::synchronize(); }

  testing::Watchdog watchdog_{::testing::UnitTest::GetInstance()->current_test_info()->name()};
  testing::ScopedPipeline pipeline_{GetParam()};
};

TEST_P(PipelineWait, MetadataOfAPendingResult_DoesNotWaitForItsKernel) {
  const Tensor x = testing::iota({3, 4});
  testing::gate(1).close();
  const Tensor y = testing::probe(x, {"", 1});
  // Every metadata read returns while the kernel is held at the gate.
  EXPECT_EQ(y.shape(), (Shape{3, 4}));
  EXPECT_EQ(y.dtype(), DType::kFloat32);
  EXPECT_EQ(y.strides(), (Shape{4, 1}));
  EXPECT_TRUE(y.is_contiguous());
  const Tensor row = y.select(0, 2);  // a view needs metadata only
  EXPECT_EQ(row.shape(), (Shape{4}));
  EXPECT_EQ(testing::gate(1).finished(), 0);
  EXPECT_FALSE(y.is_pending());
  testing::gate(1).open();
  EXPECT_EQ(testing::floats(row), (std::vector<float>{17, 19, 21, 23}));
  EXPECT_EQ(testing::gate(1).finished(), 1);
}

TEST(PipelineWaitFourStage, MetadataOfResultsQueuedBehindAHeldKernel_IsKnown) {
  // With a worker per stage the frontend plans past a kernel that is still running; with one
  // worker (2stage) planning waits for the kernel in front, so this holds for 4stage only.
  testing::Watchdog watchdog("PipelineWaitFourStage");
  testing::ScopedPipeline pipeline(PipelineMode::kFourStage);
  runtime::synchronize();
  const Tensor x = testing::iota({3, 4});
  testing::gate(1).close();
  const Tensor y = testing::probe(x, {"", 1});
  ASSERT_TRUE(testing::gate(1).wait_entered(1));
  const Tensor z = sum(transpose(exp(y), 0, 1), {1}, /*keepdim=*/true);
  const Tensor w = matmul(z, reshape(y, {1, 12}));
  EXPECT_EQ(z.shape(), (Shape{4, 1}));
  EXPECT_EQ(w.shape(), (Shape{4, 12}));
  EXPECT_EQ(w.dtype(), DType::kFloat32);
  EXPECT_EQ(testing::gate(1).finished(), 0);
  testing::gate(1).open();
  const std::vector<float> got = testing::floats(w);
  for (int j = 0; j < 4; ++j) {
    double z_j = 0;
    for (int i = 0; i < 3; ++i) z_j += std::exp(2.0 * (4 * i + j) + 1);
    for (int k = 0; k < 12; ++k) {
      const double expected = z_j * (2.0 * k + 1);
      EXPECT_NEAR(got[j * 12 + k], expected, 1e-5 * expected) << j << ", " << k;
    }
  }
}

TEST_P(PipelineWait, DataOfAnEarlierResult_DoesNotWaitForLaterOps) {
  // a's op is queued before the held kernel: reading a waits for a's kernel only.
  const Tensor x = testing::iota({5});
  const Tensor a = x * 2.0;
  testing::gate(1).close();
  const Tensor y = testing::probe(x, {"", 1});
  const float* p = a.data<float>();
  EXPECT_EQ(std::vector<float>(p, p + 5), (std::vector<float>{0, 2, 4, 6, 8}));
  EXPECT_EQ(testing::gate(1).finished(), 0);
  testing::gate(1).open();
  EXPECT_EQ(testing::floats(y), (std::vector<float>{1, 3, 5, 7, 9}));
}

TEST_P(PipelineWait, DataOfAnInputOfAQueuedOp_WaitsForThatOp) {
  // The caller may write through data_ptr() once it returns: so it returns only after every
  // queued op that reads the memory has run.
  const Tensor x = testing::iota({4});
  testing::gate(1).close();
  const Tensor y = testing::probe(x, {"", 1});
  std::thread opener([] {
    testing::gate(1).wait_entered(1);
    testing::gate(1).open();
  });
  float* p = x.data<float>();
  EXPECT_EQ(testing::gate(1).finished(), 1);
  p[0] = 100.0f;  // too late to change y
  opener.join();
  EXPECT_EQ(testing::floats(y), (std::vector<float>{1, 3, 5, 7}));
}

TEST_P(PipelineWait, MemoryNoOpEverUsed_NeverWaits) {
  const Tensor x = testing::iota({4});
  testing::gate(1).close();
  const Tensor y = testing::probe(x, {"", 1});
  const Tensor fresh = testing::iota({4}, 7.0f);
  EXPECT_EQ(fresh.data<float>()[3], 10.0f);
  EXPECT_EQ(testing::gate(1).finished(), 0);
  testing::gate(1).open();
  runtime::synchronize();
}

INSTANTIATE_TEST_SUITE_P(AsyncModes, PipelineWait, ::testing::ValuesIn(testing::async_modes()),
                         testing::mode_param_name);

}  // namespace
}  // namespace kiln
