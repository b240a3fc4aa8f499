// Several C++ threads issuing ops at once: each keeps its program order and gets the results the
// same program gives alone in "sync" mode.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "kiln/functional.h"
#include "runtime_testing.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::PipelineMode;

constexpr int kThreads = 4;
constexpr int kSteps = 300;

// One thread's program: a chain over its own accumulator that mixes new results, in-place writes
// and views, reads a shared tensor that every thread uses, and reads its own data now and then
// (a sync point in the middle of its queue). Returns the bytes it read and the final bytes.
std::vector<unsigned char> thread_program(int id, const Tensor& shared) {
  std::vector<unsigned char> seen;
  Tensor acc = testing::iota({8, 16}, static_cast<float>(id) * 0.25f) * 0.01;
  for (int step = 0; step < kSteps; ++step) {
    switch ((step + id) % 5) {
      case 0: acc = tanh(acc + shared.narrow(0, id, 8)); break;
      case 1: mul(acc, Tensor::scalar(0.75), acc); break;  // in place
      case 2: acc = acc - unsqueeze(mean(acc, {1}), 1); break;
      case 3: add(acc, matmul(acc, transpose(shared, 0, 1)).slice(1, 0, 16) * 0.001, acc); break;
      case 4: acc = sin(reshape(transpose(reshape(acc, {16, 8}), 0, 1), {8, 16})); break;
    }
    if (step % 50 == 49) {
      const std::vector<unsigned char> now = testing::bytes_of(acc.select(0, step % 8));
      seen.insert(seen.end(), now.begin(), now.end());
    }
  }
  const std::vector<unsigned char> last = testing::bytes_of(acc);
  seen.insert(seen.end(), last.begin(), last.end());
  return seen;
}

Tensor shared_input() { return sin(testing::iota({16, 16})); }

std::vector<std::vector<unsigned char>> sync_reference() {
  testing::ScopedPipeline sync(PipelineMode::kSync);
  const Tensor shared = shared_input();
  std::vector<std::vector<unsigned char>> expected;
  for (int id = 0; id < kThreads; ++id) expected.push_back(thread_program(id, shared));
  return expected;
}

class PipelineThreads : public ::testing::TestWithParam<PipelineMode> {
 protected:
  testing::Watchdog watchdog_{::testing::UnitTest::GetInstance()->current_test_info()->name()};
};

TEST_P(PipelineThreads, EachThreadKeepsItsProgramOrder) {
  const std::vector<std::vector<unsigned char>> expected = sync_reference();
  testing::ScopedPipeline pipeline(GetParam());
  const Tensor shared = shared_input();  // pending while the threads start using it
  std::vector<std::vector<unsigned char>> got(kThreads);
  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id) {
    threads.emplace_back([&, id] { got[id] = thread_program(id, shared); });
  }
  for (std::thread& t : threads) t.join();
  for (int id = 0; id < kThreads; ++id) EXPECT_EQ(got[id], expected[id]) << "thread " << id;
  EXPECT_NO_THROW(runtime::synchronize());
}

INSTANTIATE_TEST_SUITE_P(AllModes, PipelineThreads, ::testing::ValuesIn(testing::all_modes()),
                         testing::mode_param_name);

// A thread issuing ops while another changes the mode: each of its programs gives the sync
// results, and nothing hangs. A call that read the old mode used to be published after the
// switch had drained and stopped the workers, left to no one; a caller then waited for it forever.
TEST(PipelineThreadsModes, ModeChangesWhileAnotherThreadIssuesOps) {
  testing::Watchdog watchdog("PipelineThreadsModes");
  const std::vector<unsigned char> expected = sync_reference()[0];
  const testing::ScopedPipeline restore(runtime::get_pipeline());
  const Tensor shared = shared_input();
  std::atomic<bool> stop{false};
  std::atomic<int> runs{0}, wrong{0};
  std::thread issuing([&] {
    while (!stop.load()) {
      if (thread_program(0, shared) != expected) wrong.fetch_add(1);
      runs.fetch_add(1);
    }
  });
  const PipelineMode modes[] = {PipelineMode::kFourStage, PipelineMode::kSync,
                                PipelineMode::kTwoStage, PipelineMode::kFourStage};
  for (int i = 0; i < 400 || runs.load() < 3; ++i) {
    runtime::set_pipeline(modes[i % 4]);
    std::this_thread::yield();
  }
  stop.store(true);
  issuing.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_NO_THROW(runtime::synchronize());
}

// Failures stay with the thread whose op failed: another thread's reads never see them.
TEST(PipelineThreadsErrors, AFailureInOneThread_DoesNotLeakIntoAnother) {
  testing::Watchdog watchdog("PipelineThreadsErrors");
  testing::ScopedPipeline pipeline(PipelineMode::kFourStage);
  runtime::synchronize();
  const Tensor x = testing::iota({2, 3});
  std::atomic<int> wrong{0};
  std::thread failing([&] {
    for (int i = 0; i < 200; ++i) {
      const Tensor y = testing::probe(x, {"kernel"});
      try {
        (void)y.data_ptr();
        wrong.fetch_add(1);
      } catch (const Error& e) {
        if (!testing::contains(e.what(), "injected kernel failure")) wrong.fetch_add(1);
      }
    }
  });
  std::thread healthy([&] {
    for (int i = 0; i < 200; ++i) {
      if (testing::floats(testing::probe(x + static_cast<double>(i)))[0] != 2.0f * i + 1) {
        wrong.fetch_add(1);
      }
    }
  });
  failing.join();
  healthy.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_NO_THROW(runtime::synchronize());  // every failure was raised by a read
}

}  // namespace
}  // namespace kiln
