// Unregistering an op while another thread calls it by name (Note [Removing an op that is being
// called]): the definition lives until every call queued on it has run, in every pipeline mode.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "runtime_testing.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::PipelineMode;

// What the kernel of the op under test shares with the test: whether it ran, and whether it had
// run when the definition (whose kernel holds the last reference) was destroyed.
struct KernelRecord {
  std::atomic<int> ran{0};
  std::atomic<int> ran_before_destroyed{-1};
};

struct LifetimeProbe {
  std::shared_ptr<KernelRecord> record;
  ~LifetimeProbe() { record->ran_before_destroyed.store(record->ran.load()); }
};

// Copy(x): x, after a pause (one that leaves it queued well after its caller returns).
OpDefPtr make_copy(const std::string& name, const std::shared_ptr<KernelRecord>& record,
                   std::chrono::milliseconds pause) {
  auto probe = std::make_shared<LifetimeProbe>(LifetimeProbe{record});
  return std::make_shared<const OpDef>(
      OpDef(name)
          .input("x")
          .infer([](const InferContext& ctx) { return MetaList{ctx.inputs[0]}; })
          .kernel(DeviceType::kCPU, [probe, pause](KernelContext& ctx) {
            std::this_thread::sleep_for(pause);
            const Tensor& x = ctx.inputs[0];
            std::copy_n(x.data<float>(), x.numel(), ctx.outputs[0].data<float>());
            probe->record->ran.fetch_add(1);
          }));
}

// A dispatcher for one thread that stops each call after the op was looked up and before it is
// queued, until the test lets it go on to the process's dispatcher.
class PausingDispatcher final : public Dispatcher {
 public:
  explicit PausingDispatcher(Dispatcher* next) : next_(next) {}
  TensorList dispatch(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                      const std::vector<Tensor>& out,
                      const std::shared_ptr<BoundKernel>& bound_kernel) override {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      paused_ = true;
      cv_.notify_all();
      cv_.wait(lock, [this] { return released_; });
    }
    return next_->dispatch(op, inputs, attrs, out, bound_kernel);
  }
  void wait_paused() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return paused_; });
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      released_ = true;
    }
    cv_.notify_all();
  }

 private:
  Dispatcher* next_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool paused_ = false;
  bool released_ = false;
};

class OpRemoval : public ::testing::TestWithParam<PipelineMode> {
 protected:
  testing::ScopedPipeline mode_{GetParam()};
  testing::Watchdog watchdog_{"OpRemoval"};
};

// The call looked the op up, the op was removed (its wait for queued calls found none), and then
// the call was queued: the caller's own reference is the last, and it waits for the kernel.
TEST_P(OpRemoval, ACallQueuedAfterTheRemoval_RunsBeforeTheDefinitionGoes) {
  auto record = std::make_shared<KernelRecord>();
  std::optional<OpRegistration> registration;
  registration.emplace(OpRegistry::Instance().add(
      make_copy("SlowCopyProbe", record, std::chrono::milliseconds(50))));
  const Tensor x = testing::iota({4, 3});
  PausingDispatcher pausing(current_dispatcher());
  Tensor y;
  std::thread caller([&] {
    set_thread_dispatcher(&pausing);
    y = call_op("SlowCopyProbe", {x})[0];
    set_thread_dispatcher(nullptr);
  });
  pausing.wait_paused();
  registration.reset();
  EXPECT_EQ(OpRegistry::Instance().find("SlowCopyProbe"), nullptr);
  pausing.release();
  caller.join();
  EXPECT_EQ(record->ran_before_destroyed.load(), 1);
  testing::expect_close(y, x, 0);
}

// Calls by name from one thread while another registers the op and removes it, over and over:
// each call either runs or says the op is unknown, and no definition goes before its calls ran.
TEST_P(OpRemoval, CallsByNameRaceRegistrations) {
  std::vector<std::shared_ptr<KernelRecord>> records;
  const Tensor x = testing::iota({2, 2});
  std::atomic<bool> stop{false};
  std::atomic<int> ran{0}, unknown{0};
  std::thread caller([&] {
    while (!stop.load()) {
      try {
        Tensor y = call_op("RacedCopyProbe", {x})[0];
        ran.fetch_add(1);
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("unknown op 'RacedCopyProbe'"), std::string::npos)
            << e.what();
        unknown.fetch_add(1);
      }
    }
  });
  // Registered for 2 ms, then absent for 1 ms, until the caller has seen both (20 rounds at least).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int i = 0; i < 20 || ((ran.load() == 0 || unknown.load() == 0) &&
                             std::chrono::steady_clock::now() < deadline);
       ++i) {
    records.push_back(std::make_shared<KernelRecord>());
    {
      const OpRegistration registration = OpRegistry::Instance().add(
          make_copy("RacedCopyProbe", records.back(), std::chrono::milliseconds(0)));
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  stop.store(true);
  caller.join();
  runtime::synchronize();
  int total = 0;
  for (const auto& record : records) {
    EXPECT_EQ(record->ran_before_destroyed.load(), record->ran.load());
    total += record->ran.load();
  }
  EXPECT_EQ(total, ran.load());
  EXPECT_GT(ran.load(), 0);
  EXPECT_GT(unknown.load(), 0);
}

// A kernel queued before the removal that calls the op by name still finds it: the removal waits
// for the queued calls before it takes the op out.
TEST_P(OpRemoval, AKernelQueuedBeforeTheRemoval_StillFindsTheOpByName) {
  auto record = std::make_shared<KernelRecord>();
  std::optional<OpRegistration> inner;
  inner.emplace(OpRegistry::Instance().add(
      make_copy("InnerCopyProbe", record, std::chrono::milliseconds(0))));
  const OpRegistration outer(
      OpDef("OuterCopyProbe")
          .input("x")
          .infer([](const InferContext& ctx) { return MetaList{ctx.inputs[0]}; })
          .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));  // still queued below
            copy_into(ctx.outputs[0], call_op("InnerCopyProbe", {ctx.inputs[0]})[0]);
          }));
  const Tensor x = testing::iota({5});
  const Tensor y = call_op("OuterCopyProbe", {x})[0];
  inner.reset();
  testing::expect_close(y, x, 0);
  EXPECT_EQ(record->ran.load(), 1);
}

INSTANTIATE_TEST_SUITE_P(AllModes, OpRemoval, ::testing::ValuesIn(testing::all_modes()),
                         testing::mode_param_name);

}  // namespace
}  // namespace kiln
