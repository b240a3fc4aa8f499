// The eager pipeline (see kiln/runtime.h for what it promises and Note [Pipeline] in
// pipeline.cc for how): a ring of op calls that the caller's thread fills (PyTask) and worker
// threads advance through plan_op (FrontendTask), allocate_op (DeviceTask) and launch_op
// (LaunchTask). Private to the runtime; the rest of Kiln reaches it through Dispatcher and the
// pending-tensor hooks.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "kiln/op.h"
#include "kiln/runtime.h"
#include "runtime/parker.h"

namespace kiln::runtime {

class Pipeline final : public Dispatcher {
 public:
  /// The process's pipeline (never destroyed: worker threads may outlive static destructors).
  static Pipeline& instance();

  TensorList dispatch(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                      const std::vector<Tensor>& out,
                      const std::shared_ptr<BoundKernel>& bound_kernel) override;

  void set_mode(PipelineMode mode);
  PipelineMode mode() const { return mode_.load(std::memory_order_acquire); }

  /// Waits until every op issued so far has run. Called from a worker it is an error.
  void drain();
  /// drain(), but nothing on a worker (whose calls run inline: none of them is queued).
  void drain_unless_in_worker();
  /// Drops the tensor references of calls that have run (Note [Releasing on the caller's side]).
  /// With `wait`, waits for another thread that is doing it; else leaves the work to that thread.
  void release_finished(bool wait);
  /// drain() and release_finished(), then raises the first failure since the last synchronize()
  /// that no read raised.
  void synchronize();

  /// The pending-tensor hooks (kiln::detail::PendingTensorHooks).
  void wait_for_metadata(const TensorImpl& impl);
  void wait_for_data(const TensorImpl& impl);
  /// fork() support: before, drain and stop the workers (they restart on the next op, in the
  /// parent and in the child) and hold the pipeline's lock; after, release it; in the child, also
  /// reset the locks another thread of the parent may have held.
  void before_fork();
  void after_fork_in_parent();
  void after_fork_in_child();

 private:
  // A call run on the calling thread (sync mode, or inside a worker), after any still queued.
  TensorList run_sync(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                      const std::vector<Tensor>& out,
                      const std::shared_ptr<BoundKernel>& bound_kernel);

  static constexpr uint64_t kRingSize = 1024;  // queued op calls; a power of two
  // The DeviceTask allocates memory for at most this many calls ahead of the LaunchTask.
  static constexpr uint64_t kDeviceRunAhead = 4;

  struct Slot {
    std::atomic<uint64_t> published{0};  // the call's sequence number once the PyTask filled it
    OpCall call;
    bool planned = false;                      // plan_op already ran on the caller's thread
    std::shared_ptr<const OpFailure> failure;  // the call's failure; later stages skip it
  };

  Pipeline();
  Slot& slot(uint64_t seq) { return ring_[seq & (kRingSize - 1)]; }
  bool is_published(uint64_t seq) {
    return slot(seq).published.load(std::memory_order_acquire) == seq;
  }

  // The PyTask: claims a sequence number, waits for its slot, fills and publishes it.
  uint64_t claim_slot();
  void publish(uint64_t seq, const OpDef& op, TensorSpan inputs, const Attrs& attrs,
               const std::vector<Tensor>& out, TensorList results, OpCall* planned,
               const std::shared_ptr<BoundKernel>& bound_kernel);

  // The three stages over one slot.
  void run_frontend(uint64_t seq);
  void run_device(uint64_t seq);
  void run_launch(uint64_t seq);
  void fail(Slot& slot, std::shared_ptr<const OpFailure> failure);
  void fail(Slot& slot, std::exception_ptr error) {
    fail(slot, std::make_shared<const OpFailure>(std::move(error)));
  }

  bool wait_published(uint64_t seq);  // false when the workers stop
  void ensure_workers(PipelineMode mode);
  void start_workers(PipelineMode mode);
  void stop_workers();
  void frontend_loop();
  void device_loop();
  void launch_loop();
  void combined_loop();

  std::atomic<PipelineMode> mode_;
  std::array<Slot, kRingSize> ring_;
  // Sequence numbers: the last one claimed by a caller, and the last one each stage finished.
  // Each stage finishes calls in sequence order, so "planned_ >= s" means call s is planned.
  std::atomic<uint64_t> claimed_{0};
  std::atomic<uint64_t> released_{0};  // calls up to here have dropped their tensors
  std::mutex release_mutex_;           // one releasing thread at a time
  Counter planned_;
  Counter allocated_;
  Counter launched_;
  Parker published_;  // a worker waiting for a published call

  // Callers between reading an asynchronous mode and publishing their call (dispatch), which
  // set_mode waits out before it stops the workers that will run those calls; one mode change at
  // a time.
  std::atomic<int> dispatching_{0};
  std::mutex mode_mutex_;
  std::mutex workers_mutex_;  // serialises starting and stopping the workers
  std::atomic<PipelineMode> workers_mode_{PipelineMode::kSync};  // what the running workers do
  std::atomic<bool> stop_{false};
  std::vector<std::thread> workers_;

  std::mutex failure_mutex_;
  static constexpr size_t kMaxUnraisedFailures = 64;
  std::vector<std::shared_ptr<const OpFailure>> unraised_failures_;  // since the last synchronize()
};

}  // namespace kiln::runtime
