// Intra-op threads in every pipeline mode: set_num_threads() holds for kernels on any thread, and
// kernels a pipeline worker launches leave the caller's core free (Note [Worker threads]).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "kiln/parallel.h"
#include "runtime_testing.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::PipelineMode;

// ThreadProbe(x) -> int64[2]: what a kernel sees, get_num_threads() and the number of chunks a
// parallel_for over 64 single-element chunks ran in.
const OpDef& thread_probe_op() {
  static const OpRegistration registration(
      OpDef("ThreadProbe")
          .input("x")
          .infer([](const InferContext&) { return MetaList{TensorMeta(DType::kInt64, {2})}; })
          .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
            std::atomic<int64_t> chunks{0};
            parallel_for(0, 64, 1, [&](int64_t, int64_t) { ++chunks; });
            int64_t* out = ctx.outputs[0].data<int64_t>();
            out[0] = get_num_threads();
            out[1] = chunks.load();
          }));
  static const OpDefPtr op = OpRegistry::Instance().get(registration.name());
  return *op;
}

// {threads, chunks} seen by a kernel.
std::pair<int64_t, int64_t> probe_threads() {
  const Tensor seen = call_op(thread_probe_op(), {testing::iota({1})})[0];
  return {seen.data<int64_t>()[0], seen.data<int64_t>()[1]};
}

class ThreadCount {
 public:
  ThreadCount() : saved_(get_num_threads()) {}
  ~ThreadCount() { set_num_threads(saved_); }

 private:
  int saved_;
};

class WorkerThreads : public ::testing::TestWithParam<PipelineMode> {
 protected:
  bool is_sync() const { return GetParam() == PipelineMode::kSync; }
  // What a kernel may use when the process asks for `n` threads.
  int64_t expected(int n) const {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    return is_sync() ? n : std::min(n, std::max(1, cores - 1));
  }

  testing::Watchdog watchdog_{::testing::UnitTest::GetInstance()->current_test_info()->name()};
  testing::ScopedPipeline pipeline_{GetParam()};
  ThreadCount restore_;
};

TEST_P(WorkerThreads, KernelsUseTheProcessCount_AndWorkersLeaveTheCallersCoreFree) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  set_num_threads(std::max(cores, 2));
  const auto [threads, chunks] = probe_threads();
  EXPECT_EQ(threads, expected(std::max(cores, 2)));
  EXPECT_EQ(chunks, threads);
}

TEST_P(WorkerThreads, SetNumThreads_OnTheCallersThread_HoldsForEveryKernel) {
  set_num_threads(1);
  EXPECT_EQ(get_num_threads(), 1);
  EXPECT_EQ(probe_threads(), std::make_pair(int64_t{1}, int64_t{1}));
  // Set from another thread, it holds for this one's kernels too.
  std::thread([] { set_num_threads(2); }).join();
  EXPECT_EQ(get_num_threads(), 2);
  EXPECT_EQ(probe_threads().first, expected(2));
}

TEST(SetNumThreads, RejectsFewerThanOneThread) {
  EXPECT_THROW(set_num_threads(0), Error);
  try {
    set_num_threads(-3);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kValue);
    EXPECT_TRUE(testing::contains(e.what(), "expected at least 1 thread, got -3")) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(AllModes, WorkerThreads, ::testing::ValuesIn(testing::all_modes()),
                         testing::mode_param_name);

}  // namespace
}  // namespace kiln
