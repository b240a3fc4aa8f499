// Lifetimes in the pipeline: inputs whose last handle is dropped before their kernel ran, a queue
// longer than the ring, switching the mode with work queued.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "kiln/functional.h"
#include "runtime_testing.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::PipelineMode;
using namespace std::chrono_literals;

class PipelineLifetime : public ::testing::TestWithParam<PipelineMode> {
 protected:
  void SetUp() override { runtime::synchronize(); }

  testing::Watchdog watchdog_{::testing::UnitTest::GetInstance()->current_test_info()->name()};
  testing::ScopedPipeline pipeline_{GetParam()};
};

class AsyncLifetime : public PipelineLifetime {};

TEST_P(AsyncLifetime, DroppedInput_IsNotReusedBeforeItsKernelRan) {
  constexpr int64_t kN = 1000;  // 4000 bytes: a block of its own size class
  Tensor a = testing::iota({kN});
  const void* a_memory = a.data_ptr();
  // A pending input too: its memory comes from a DeviceTask.
  Tensor b = exp(testing::iota({kN}) * 0.0);
  testing::gate(1).close();
  const Tensor y = testing::probe(a, {"", 1});
  const Tensor z = testing::probe(b, {"", 1});
  // The caller's last handles go while the kernels wait at the gate.
  a = Tensor();
  b = Tensor();
  ASSERT_TRUE(testing::gate(1).wait_entered(1));
  EXPECT_EQ(testing::gate(1).finished(), 0);
  // Blocks handed out now (on this thread, past the pipeline) must not be a's, which the queued
  // kernel still reads; fill them with garbage that would show in y if they were.
  std::vector<Tensor> others;
  for (int i = 0; i < 8; ++i) {
    others.push_back(Tensor::empty({kN}));
    EXPECT_NE(others.back().data_ptr(), a_memory);
    std::fill_n(others.back().data<float>(), kN, -1e30f);
  }
  testing::gate(1).open();
  const std::vector<float> got_y = testing::floats(y);
  const std::vector<float> got_z = testing::floats(z);
  for (int64_t i = 0; i < kN; ++i) {
    ASSERT_EQ(got_y[i], 2.0f * static_cast<float>(i) + 1.0f) << i;
    ASSERT_EQ(got_z[i], 3.0f) << i;
  }
  // Once the kernel ran, the block is free again: z's result may have taken it (in 2stage z's
  // DeviceTask runs after y's kernel), or it comes back from the cache.
  runtime::synchronize();
  std::vector<Tensor> again;
  bool reused = z.data_ptr() == a_memory;
  for (size_t i = 0; i < others.size() + 2 && !reused; ++i) {
    again.push_back(Tensor::empty({kN}));
    reused = again.back().data_ptr() == a_memory;
  }
  EXPECT_TRUE(reused) << "the block of a dropped input never came back to the cache";
}

TEST_P(AsyncLifetime, QueueLongerThanTheRing_BlocksTheCaller_AndKeepsMemoryDeferred) {
  constexpr int kOps = 5000;  // several times the ring (1024 calls)
  constexpr int64_t kN = 1024;
  const Tensor x = testing::iota({kN});
  runtime::synchronize();
  const runtime::MemoryStats before = runtime::memory_stats();
  testing::gate(1).close();
  std::atomic<int> issued{0};
  Tensor result;
  std::thread caller([&] {
    Tensor t = testing::probe(x, {"", 1});
    for (int i = 0; i < kOps; ++i) {
      t = t + 1.0;
      issued.fetch_add(1, std::memory_order_relaxed);
    }
    result = t;
  });
  // The caller fills the ring and then waits: the count stops growing well short of kOps.
  int last = -1;
  for (int rounds = 0; rounds < 200; ++rounds) {
    std::this_thread::sleep_for(20ms);
    const int now = issued.load(std::memory_order_relaxed);
    if (now == last && now > 0) break;
    last = now;
  }
  EXPECT_GE(last, 500) << "the caller stopped before the ring was full";
  EXPECT_LT(last, 2000) << "the caller ran past a full ring";
  // Queued results have no memory yet (the DeviceTask runs a few calls ahead of the kernels at
  // most): far less than the ~4 MiB that 1000 allocated results would hold.
  const runtime::MemoryStats stalled = runtime::memory_stats();
  EXPECT_LT(stalled.allocated, before.allocated + 64 * kN * sizeof(float));
  testing::gate(1).open();
  caller.join();
  const std::vector<float> got = testing::floats(result);
  for (int64_t i = 0; i < kN; ++i) {
    ASSERT_EQ(got[i], 2.0f * static_cast<float>(i) + 1.0f + kOps) << i;
  }
  EXPECT_NO_THROW(runtime::synchronize());
}

TEST_P(AsyncLifetime, SwitchingModeWithWorkQueued_RunsTheQueueFirst) {
  for (PipelineMode to : testing::all_modes()) {
    runtime::set_pipeline(GetParam());
    const Tensor x = testing::iota({64});
    testing::gate(1).close();
    Tensor t = testing::probe(x, {"", 1});
    for (int i = 0; i < 300; ++i) t = t * 1.0 + 1.0;
    std::thread opener([] {
      std::this_thread::sleep_for(50ms);
      testing::gate(1).open();
    });
    runtime::set_pipeline(to);  // waits for the queue, gated kernel included
    EXPECT_EQ(testing::gate(1).finished(), 1) << "set_pipeline returned before the queue ran";
    EXPECT_EQ(runtime::get_pipeline(), to);
    opener.join();
    const std::vector<float> got = testing::floats(t);
    for (int i = 0; i < 64; ++i) ASSERT_EQ(got[i], 2.0f * i + 301.0f);
    // The new mode works.
    EXPECT_EQ(testing::floats(testing::probe(x))[3], 7.0f);
  }
}

INSTANTIATE_TEST_SUITE_P(AsyncModes, AsyncLifetime, ::testing::ValuesIn(testing::async_modes()),
                         testing::mode_param_name);

TEST_P(PipelineLifetime, ChainThatDropsEveryIntermediate_MatchesTheSyncResult) {
  // Each step's input handle is dropped at once, while its op is still queued.
  auto run = [] {
    Tensor t = testing::iota({3, 17}, -20.0f);
    for (int i = 0; i < 2000; ++i) {
      t = i % 3 == 0 ? tanh(t) * 3.0
                     : (i % 3 == 1 ? t + unsqueeze(sum(transpose(t, 0, 1), {0}), 1) * 0.01
                                   : add(t, t * 0.5, t));
    }
    return testing::bytes_of(t);
  };
  const std::vector<unsigned char> got = run();
  runtime::set_pipeline(PipelineMode::kSync);
  EXPECT_EQ(got, run());
}

INSTANTIATE_TEST_SUITE_P(AllModes, PipelineLifetime, ::testing::ValuesIn(testing::all_modes()),
                         testing::mode_param_name);

}  // namespace
}  // namespace kiln
