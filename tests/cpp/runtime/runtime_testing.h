// Helpers shared by the runtime's tests (tests/cpp/runtime/): the pipeline modes, a scoped mode
// switch, a watchdog, gates that hold a kernel back, and RuntimeProbe, a test-only op that fails
// on demand in any stage.
//
//   ScopedPipeline mode(runtime::PipelineMode::kFourStage);
//   Watchdog watchdog("MyTest");                 // ends the process if the test hangs
//   gate(1).close();
//   Tensor y = probe(x, {"", 1});                // its kernel waits until gate 1 opens
//   Tensor z = probe(x, {"kernel"});             // fails in its LaunchTask
//   Tensor w = probe(x, {"", 0, 2});             // stays unplanned until gate 2 opens
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kiln/functional.h"
#include "kiln/op.h"
#include "kiln/runtime.h"

namespace kiln::testing {

using runtime::PipelineMode;

inline const std::vector<PipelineMode>& all_modes() {
  static const std::vector<PipelineMode> modes = {PipelineMode::kSync, PipelineMode::kTwoStage,
                                                  PipelineMode::kFourStage};
  return modes;
}
inline const std::vector<PipelineMode>& async_modes() {
  static const std::vector<PipelineMode> modes = {PipelineMode::kTwoStage,
                                                  PipelineMode::kFourStage};
  return modes;
}

/// Test names for INSTANTIATE_TEST_SUITE_P over modes (gtest accepts only alphanumerics).
inline std::string mode_param_name(const ::testing::TestParamInfo<PipelineMode>& info) {
  switch (info.param) {
    case PipelineMode::kSync: return "sync";
    case PipelineMode::kTwoStage: return "twostage";
    case PipelineMode::kFourStage: return "fourstage";
  }
  return "unknown";
}

/// Switches the pipeline for one scope and back (both switches wait for queued ops).
class ScopedPipeline {
 public:
  explicit ScopedPipeline(PipelineMode mode) : previous_(runtime::get_pipeline()) {
    runtime::set_pipeline(mode);
  }
  ~ScopedPipeline() { runtime::set_pipeline(previous_); }
  ScopedPipeline(const ScopedPipeline&) = delete;
  ScopedPipeline& operator=(const ScopedPipeline&) = delete;

 private:
  PipelineMode previous_;
};

/// Ends the process with a message when its scope lasts longer than `limit`: a hang in the
/// runtime fails the test with its name instead of stalling the suite until ctest's timeout.
class Watchdog {
 public:
  explicit Watchdog(std::string what, std::chrono::seconds limit = std::chrono::seconds(60))
      : what_(std::move(what)), thread_([this, limit] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
            std::fprintf(stderr, "watchdog: %s did not finish within %lld s (a hang)\n",
                         what_.c_str(), static_cast<long long>(limit.count()));
            std::fflush(stderr);
            std::_Exit(3);
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::string what_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

/// A latch a test opens to let RuntimeProbe kernels run; counts the kernels that reached it and
/// the ones that finished.
class Gate {
 public:
  void close() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = false;
    entered_ = 0;
    finished_ = 0;
  }
  void open() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      open_ = true;
    }
    cv_.notify_all();
  }
  /// Called by a kernel: waits until the gate opens; false after `timeout`.
  bool pass(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    ++entered_;
    cv_.notify_all();
    return cv_.wait_for(lock, timeout, [this] { return open_; });
  }
  void note_finished() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++finished_;
    }
    cv_.notify_all();
  }
  /// Waits until `n` kernels reached the gate; false after `timeout`.
  bool wait_entered(int n, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return entered_ >= n; });
  }
  int entered() {
    std::lock_guard<std::mutex> lock(mutex_);
    return entered_;
  }
  int finished() {
    std::lock_guard<std::mutex> lock(mutex_);
    return finished_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = true;
  int entered_ = 0;
  int finished_ = 0;
};

inline constexpr int kNumGates = 4;
/// Gate `id` (1..kNumGates); id 0 is "no gate".
inline Gate& gate(int64_t id) {
  static Gate gates[kNumGates + 1];
  return gates[id];
}
/// How long a gated kernel waits before it gives up with an error (so a test that forgets to open
/// a gate fails instead of hanging).
inline constexpr std::chrono::milliseconds kGateTimeout{20000};

/// Bytes the probe asks for as workspace when told to fail in allocation: no machine has them.
inline constexpr size_t kAbsurdBytes = size_t{1} << 50;

/// Refuses requests above kAbsurdBytes / 2 with the error a real allocator gives when the system
/// has no memory, and forwards the rest. The sanitizers' allocators abort the process on such a
/// request instead of returning null, so the tests that fail an allocation install this in front
/// of the caching allocator. Never destroyed: blocks it handed out may outlive a test.
class RefusingAllocator final : public Allocator {
 public:
  explicit RefusingAllocator(Allocator* inner) : inner_(inner) {}
  void* allocate(size_t nbytes) override {
    KILN_CHECK(nbytes <= kAbsurdBytes / 2)
        << "out of memory: could not allocate " << nbytes << " bytes";
    return inner_->allocate(nbytes);
  }
  void deallocate(void* ptr, size_t nbytes) override { inner_->deallocate(ptr, nbytes); }

 private:
  Allocator* inner_;
};

/// Puts a RefusingAllocator in front of the CPU allocator for one scope.
class ScopedRefusingAllocator {
 public:
  ScopedRefusingAllocator() {
    static RefusingAllocator* refusing = new RefusingAllocator(cpu_allocator());
    previous_ = set_cpu_allocator(refusing);
  }
  ~ScopedRefusingAllocator() {
    runtime::drain();
    set_cpu_allocator(previous_);
  }
  ScopedRefusingAllocator(const ScopedRefusingAllocator&) = delete;
  ScopedRefusingAllocator& operator=(const ScopedRefusingAllocator&) = delete;

 private:
  Allocator* previous_;
};

// Note [RuntimeProbe]
// RuntimeProbe(x: float32) = 2 * x + 1, with attributes that make it misbehave:
//   fail = "infer"       infer raises (kShape): the FrontendTask fails
//   fail = "alloc"       the workspace is kAbsurdBytes: the DeviceTask fails
//   fail = "kernel"      the kernel raises (kValue) before writing: the LaunchTask fails
//   fail = "kernel_std"  the kernel throws a std::runtime_error (not a kiln::Error)
//   gate = n             the kernel waits for gate(n) to open first
//   infer_gate = n       infer waits for gate(n) to open first: the call, and every call queued
//                        behind it, stays unplanned (its results' metadata pending)
inline const OpDef& probe_op() {
  static const OpRegistration registration(
      OpDef("RuntimeProbe")
          .input("x")
          .attr("fail", AttrKind::kString, std::string())
          .attr("gate", AttrKind::kInt, int64_t{0})
          .attr("infer_gate", AttrKind::kInt, int64_t{0})
          .infer([](const InferContext& ctx) {
            if (const int64_t gate_id = ctx.attrs.get<int64_t>("infer_gate")) {
              KILN_CHECK(gate(gate_id).pass(kGateTimeout))
                  << "RuntimeProbe: infer gate " << gate_id << " never opened";
            }
            KILN_CHECK_SHAPE(ctx.attrs.get<std::string>("fail") != "infer")
                << "RuntimeProbe: injected infer failure";
            KILN_CHECK_DTYPE(ctx.input(0).dtype == DType::kFloat32)
                << "RuntimeProbe: expected float32, got " << dtype_name(ctx.input(0).dtype);
            return MetaList{TensorMeta(DType::kFloat32, ctx.input(0).shape)};
          })
          .workspace([](const InferContext& ctx) -> size_t {
            return ctx.attrs.get<std::string>("fail") == "alloc" ? kAbsurdBytes : 0;
          })
          .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
            const int64_t gate_id = ctx.attrs.get<int64_t>("gate");
            if (gate_id != 0) {
              KILN_CHECK(gate(gate_id).pass(kGateTimeout))
                  << "RuntimeProbe: gate " << gate_id << " never opened";
            }
            const std::string fail = ctx.attrs.get<std::string>("fail");
            KILN_CHECK_VALUE(fail != "kernel") << "RuntimeProbe: injected kernel failure";
            if (fail == "kernel_std") throw std::runtime_error("injected std::runtime_error");
            const Tensor x = ctx.inputs[0].contiguous();
            const float* in = x.data<float>();
            float* out = ctx.outputs[0].data<float>();
            for (int64_t i = 0; i < x.numel(); ++i) out[i] = 2 * in[i] + 1;
            if (gate_id != 0) gate(gate_id).note_finished();
          }));
  static const OpDefPtr op = OpRegistry::Instance().get(registration.name());
  return *op;
}

struct ProbeOptions {
  std::string fail;
  int64_t gate = 0;
  int64_t infer_gate = 0;
};
inline Tensor probe(const Tensor& x, const ProbeOptions& options = {},
                    const Tensor& out = Tensor()) {
  std::vector<Tensor> outs;
  if (out.defined()) outs.push_back(out);
  return call_op(
      probe_op(), {x},
      {{"fail", options.fail}, {"gate", options.gate}, {"infer_gate", options.infer_gate}},
      outs)[0];
}

/// A float32 tensor of `shape` holding start, start + 1, ... (made on the caller's thread).
inline Tensor iota(const Shape& shape, float start = 0) {
  Tensor t = Tensor::empty(shape);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = start + static_cast<float>(i);
  return t;
}

/// `t` when contiguous, else a contiguous copy made by the pipeline.
inline Tensor dense(const Tensor& t) { return t.is_contiguous() ? t : kiln::contiguous(t); }

/// The elements of a float32 tensor in row-major order (a sync point).
inline std::vector<float> floats(const Tensor& t) {
  const Tensor c = dense(t);
  const float* p = c.data<float>();
  return std::vector<float>(p, p + c.numel());
}

/// The raw bytes of any tensor's elements in row-major order (a sync point).
inline std::vector<unsigned char> bytes_of(const Tensor& t) {
  const Tensor c = dense(t);
  const auto* p = static_cast<const unsigned char*>(c.data_ptr());
  return std::vector<unsigned char>(p, p + c.nbytes());
}

/// True when `what` contains `needle`.
inline bool contains(const std::string& what, const std::string& needle) {
  return what.find(needle) != std::string::npos;
}

}  // namespace kiln::testing
