// A backend's registration and the jit's compiled graphs: a backend registered again (a new
// instance, knowing none of the earlier one's graphs) makes the jit build again and leaves the new
// instance's graphs alone; unregistering a backend while another thread is inside its Run keeps
// the instance alive until that Run returns.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <utility>

#include "jit/jit_testing.h"
#include "kiln/backend.h"
#include "kiln/functional.h"
#include "kiln/jit.h"
#include "runtime/runtime_testing.h"
#include "testing.h"

namespace kiln {
namespace {

using testing::expect_same_values;

JitOptions on(const std::string& backend) {
  JitOptions options;
  options.backend = backend;
  return options;
}

std::vector<Tensor> negate(const std::vector<Tensor>& in) { return {neg(in[0])}; }

// Numbers its graphs 0, 1, ... per instance (so two instances' ids collide) and runs them on
// "reference"; an id it did not build, or cleared, is an error. It declines ReRegisterProbe.
class NumberingBackend final : public BackendBase {
 public:
  bool Supports(const CNodePtr& node) const override {
    return node->primitive()->name() != "ReRegisterProbe";
  }
  struct Counts {
    std::atomic<int> builds{0};
    std::atomic<int> clears{0};
  };
  explicit NumberingBackend(Counts* counts) : counts_(counts) {}
  BackendGraphId Build(const FuncGraphPtr& graph, const BackendJitConfig& config) override {
    BackendJitConfig on_reference = config;
    on_reference.backend = "reference";
    built_.push_back(manager().Build(graph, on_reference, "reference"));
    counts_->builds.fetch_add(1);
    return built_.size() - 1;
  }
  RunningStatus Run(BackendGraphId id, const std::vector<Tensor>& inputs,
                    std::vector<Tensor>* outputs) override {
    KILN_CHECK_VALUE(id < built_.size() && built_[id].has_value())
        << "graph id " << id << " is not one this instance built";
    manager().Run("reference", *built_[id], inputs, outputs);
    return RunningStatus::kRunningSuccess;
  }
  void ClearGraph(BackendGraphId id) override {
    if (id >= built_.size() || !built_[id].has_value()) return;
    manager().ClearGraph("reference", *built_[id]);
    built_[id].reset();
    counts_->clears.fetch_add(1);
  }

 private:
  static BackendManager& manager() { return BackendManager::Instance(); }
  Counts* counts_;
  std::vector<std::optional<BackendGraphId>> built_;
};

TEST(BackendLifetime, ABackendRegisteredAgainGetsItsGraphsBuiltAgain) {
  NumberingBackend::Counts first, second;
  const auto registration = [](NumberingBackend::Counts* counts) {
    return BackendManager::Instance().Register(
        "numbering", [counts] { return std::make_unique<NumberingBackend>(counts); });
  };
  BackendManager& manager = BackendManager::Instance();
  std::mt19937 rng(3);
  const Tensor x = testing::random_input(rng, {4});
  JitFunction f = jit(&negate, on("numbering"), "negate");
  uint64_t first_id = 0;
  {
    BackendRegistration r = registration(&first);
    first_id = manager.RegistrationId("numbering");
    EXPECT_NE(first_id, 0u);
    expect_same_values(f({x})[0], neg(x));
    expect_same_values(f({x})[0], neg(x));
    EXPECT_EQ(first.builds.load(), 1);
  }
  EXPECT_EQ(manager.RegistrationId("numbering"), 0u);
  BackendRegistration r = registration(&second);
  EXPECT_NE(manager.RegistrationId("numbering"), first_id);
  // The cached graph's id 0 names nothing on the new instance: the jit builds it again there,
  // and dropping the stale graph does not clear the new instance's graph 0.
  expect_same_values(f({x})[0], neg(x));
  expect_same_values(f({x})[0], neg(x));
  EXPECT_EQ(second.builds.load(), 1);
  EXPECT_EQ(second.clears.load(), 0);
  EXPECT_EQ(f.cache_info().misses, 2u);
}

// ReRegisterProbe(x) -> x, running `g_probe_hook` in its kernel when set: a way to register a
// backend again in the middle of a compiled graph's run, between its parts.
std::function<void()> g_probe_hook;
const OpRegistration& re_register_probe() {
  static const OpRegistration registration(
      OpDef("ReRegisterProbe")
          .input("x")
          .infer([](const InferContext& ctx) { return MetaList{ctx.inputs[0]}; })
          .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
            if (g_probe_hook) std::exchange(g_probe_hook, nullptr)();
            copy_into(ctx.outputs[0], ctx.inputs[0]);
          }));
  return registration;
}

// The caller found the graph current, then its backend was registered again (and the new instance
// built another function's graph under the same id) before the graph's part there ran: that
// Run is refused instead of running the other graph, and the next call builds anew.
TEST(BackendLifetime, ABackendRegisteredAgainWhileTheGraphRuns_FailsTheRun) {
  const testing::ScopedPipeline sync(runtime::PipelineMode::kSync);  // the hook runs in the call
  re_register_probe();
  NumberingBackend::Counts first, second;
  const auto registration = [](NumberingBackend::Counts* counts) {
    return BackendManager::Instance().Register(
        "numbering_run", [counts] { return std::make_unique<NumberingBackend>(counts); });
  };
  std::optional<BackendRegistration> r;
  r.emplace(registration(&first));
  JitFunction f = jit(
      [](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{neg(call_op("ReRegisterProbe", {in[0]})[0])};
      },
      on("numbering_run"), "neg_of_probe");
  JitFunction g =
      jit([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * 100.0}; },
          on("numbering_run"), "times_100");
  std::mt19937 rng(5);
  const Tensor x = testing::random_input(rng, {3});
  expect_same_values(f({x})[0], neg(x));
  g_probe_hook = [&] {
    r.reset();
    r.emplace(registration(&second));
    expect_same_values(g({x})[0], x * 100.0);  // graph id 0 of the new instance
  };
  testing::expect_error([&] { f({x}); }, ErrorKind::kValue,
                        "backend 'numbering_run' was registered again after the graph was built");
  expect_same_values(f({x})[0], neg(x));  // built anew
  EXPECT_EQ(second.builds.load(), 2);
}

// Supports unregisters its own backend, as another thread might meanwhile: the jit holds the
// instance while it partitions, and the Build that follows names the backend as unknown.
class UnregisteringInSupports final : public BackendBase {
 public:
  struct Control {
    std::function<void()> unregister;
    bool in_supports = false;
    bool destroyed_in_supports = false;
  };
  explicit UnregisteringInSupports(Control* control) : control_(control) {}
  ~UnregisteringInSupports() override { control_->destroyed_in_supports = control_->in_supports; }
  bool Supports(const CNodePtr&) const override {
    control_->in_supports = true;
    if (control_->unregister) std::exchange(control_->unregister, nullptr)();
    control_->in_supports = false;
    return true;
  }
  BackendGraphId Build(const FuncGraphPtr& graph, const BackendJitConfig& config) override {
    return BackendManager::Instance().Get("reference")->Build(graph, config);
  }
  RunningStatus Run(BackendGraphId id, const std::vector<Tensor>& inputs,
                    std::vector<Tensor>* outputs) override {
    return BackendManager::Instance().Get("reference")->Run(id, inputs, outputs);
  }

 private:
  Control* control_;
};

TEST(BackendLifetime, UnregisteringABackendDuringItsSupports_KeepsItUntilItReturns) {
  UnregisteringInSupports::Control control;
  std::optional<BackendRegistration> registration;
  registration.emplace(BackendManager::Instance().Register("unregistering_in_supports", [&] {
    return std::make_unique<UnregisteringInSupports>(&control);
  }));
  control.unregister = [&] { registration.reset(); };
  testing::expect_error(
      [&] { jit(&negate, on("unregistering_in_supports"), "negate")({Tensor::empty({2})}); },
      ErrorKind::kValue, "unknown backend 'unregistering_in_supports'");
  EXPECT_FALSE(control.destroyed_in_supports);
}

TEST(BackendLifetime, TheGenerationMovesWithEachRegistration) {
  BackendManager& manager = BackendManager::Instance();
  NumberingBackend::Counts counts;
  const uint64_t before = manager.Generation();
  {
    BackendRegistration r = manager.Register(
        "numbering_generation", [&] { return std::make_unique<NumberingBackend>(&counts); });
    EXPECT_NE(manager.Generation(), before);
  }
  EXPECT_GT(manager.Generation(), before + 1);
  EXPECT_EQ(manager.RegistrationId("no_such_backend"), 0u);
}

// Run signals that it started, waits to be let go, then uses its members.
class PausingBackend final : public BackendBase {
 public:
  struct Control {
    std::mutex mutex;
    std::condition_variable cv;
    bool running = false;
    bool go = false;
    std::atomic<bool> destroyed_while_running{false};
  };
  explicit PausingBackend(Control* control) : control_(control) {}
  ~PausingBackend() override {
    std::lock_guard<std::mutex> lock(control_->mutex);
    control_->destroyed_while_running.store(control_->running && !finished_);
  }
  BackendGraphId Build(const FuncGraphPtr& graph, const BackendJitConfig& config) override {
    return BackendManager::Instance().Get("reference")->Build(graph, config);
  }
  RunningStatus Run(BackendGraphId id, const std::vector<Tensor>& inputs,
                    std::vector<Tensor>* outputs) override {
    {
      std::unique_lock<std::mutex> lock(control_->mutex);
      control_->running = true;
      control_->cv.notify_all();
      control_->cv.wait(lock, [&] { return control_->go; });
    }
    const RunningStatus status =
        BackendManager::Instance().Get("reference")->Run(id, inputs, outputs);
    finished_ = true;
    return status;
  }

 private:
  Control* control_;
  bool finished_ = false;
};

TEST(BackendLifetime, UnregisteringABackendDuringItsRun_KeepsItUntilRunReturns) {
  PausingBackend::Control control;
  std::optional<BackendRegistration> registration;
  registration.emplace(BackendManager::Instance().Register(
      "pausing", [&] { return std::make_unique<PausingBackend>(&control); }));
  std::mt19937 rng(4);
  const Tensor x = testing::random_input(rng, {3});
  std::optional<JitFunction> f;
  f.emplace(jit(&negate, on("pausing"), "negate"));
  Tensor y;
  std::thread caller([&] { y = (*f)({x})[0]; });
  {
    std::unique_lock<std::mutex> lock(control.mutex);
    control.cv.wait(lock, [&] { return control.running; });
  }
  registration.reset();
  EXPECT_EQ(BackendManager::Instance().Find("pausing"), nullptr);
  {
    std::lock_guard<std::mutex> lock(control.mutex);
    control.go = true;
  }
  control.cv.notify_all();
  caller.join();
  EXPECT_FALSE(control.destroyed_while_running.load());
  expect_same_values(y, neg(x));
  f.reset();  // its graph's backend is gone: nothing to clear
}

}  // namespace
}  // namespace kiln
