#include "runtime/pipeline.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "kiln/parallel.h"

namespace kiln::runtime {

// Note [Pipeline]
// The queue between the stages is one ring of OpCall slots with a cursor per stage, in the manner
// of the LMAX Disruptor: every call visits the stages in the same order, so instead of handing
// calls from queue to queue, each stage keeps the sequence number of the last call it finished
// (planned_, allocated_, launched_) and works on the next one once the stage before it is past.
// Nothing is copied between stages and a slot's vectors keep their capacity, so a steady stream of
// calls allocates nothing for queueing. A slot is free for call s once launched_ >= s - kRingSize.
//
// Callers (any thread) claim sequence numbers with one atomic increment and publish their slot
// when it is filled; the frontend takes slots strictly in sequence order, so calls run in the
// order they were claimed, which keeps each thread's program order.
//
// Result handles are made by the caller before the call is queued, with TensorImpl::pending set
// to the call's sequence number; plan_op fills their metadata and deferred storage, and the
// frontend then clears `pending` (release). So a caller may pass a result straight to the next op
// without waiting, and reading its metadata waits only for its FrontendTask.
//
// Failures: a stage that throws stores the exception in the slot and the later stages skip the
// call. Fresh results carry it at once (their metadata state becomes kFailedMetadata when the
// frontend failed); `out` tensors, which earlier calls may still read, get it only in the launch
// stage, which runs in order. A call with a failed input fails with the input's error.
//
// Note [Releasing on the caller's side]
// A finished call's tensors are released by a caller, not by the worker that launched it: when a
// caller queues its next call (try-lock: one caller does it, others go on) and at sync points. The
// caller made those references, so their reference counts and the blocks malloc gave it stay in
// its core's cache and thread cache; released on the worker, every op moved the control blocks'
// cache lines between cores twice and sent the caller's allocations to the worker's free lists,
// leaving the caller on malloc's slow path (bench/RESULTS.md, "Eager pipeline per-op cost"). The
// cost is that a call's tensors live until its caller's next op or sync point; `released_` trails
// `launched_`, and a slot is refilled only once released.
//
// Note [Worker threads]
// Kernels a worker launches use at most all cores but one: the caller's thread is running Python
// meanwhile, and an OpenMP team on its core (whose threads also spin between regions) slows both.
// Measured on two cores (bench/RESULTS.md, "Eager pipeline per-op cost"): a 64x64 matmul loop took
// 18 us per op in 2stage with two-thread kernels, 12 us in sync, and 12 us in 2stage with this
// cap. Lifting the cap while a caller waits did not help (the ring's waits are short and frequent,
// and the team's spinning outlives them). The price: a large kernel in an asynchronous mode runs
// on one core fewer than in sync mode; set_num_threads() still lowers the count for both.
//
// Threads: in kFourStage one worker per stage; in kTwoStage one worker that plans every published
// call before it allocates and launches the next (so metadata stays ahead of kernels and a
// metadata wait lasts at most one kernel); in kSync no worker: dispatch runs run_op_sync inline.
// Inside a worker, dispatch always runs inline (a kernel that calls ops runs them at once, its
// inputs being ready), and data reads never wait.

namespace {

thread_local bool t_in_worker = false;

constexpr auto kWorkerSpin = std::chrono::microseconds(50);
constexpr auto kCallerSpin = std::chrono::microseconds(20);
// Note [Worker threads]: the cores a kernel may use while its caller runs.
const int kWorkerThreadCap = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) - 1);

PipelineMode initial_mode() {
  const char* blocking = std::getenv("KILN_LAUNCH_BLOCKING");
  if (blocking != nullptr && std::strcmp(blocking, "1") == 0) return PipelineMode::kSync;
  const char* name = std::getenv("KILN_PIPELINE");
  // The default is measured (docs/architecture.md, "Eager pipeline").
  if (name == nullptr || *name == '\0') return PipelineMode::kSync;
  try {
    return pipeline_mode_from_name(name);
  } catch (const Error& e) {
    // Read while libkiln loads, where an exception would abort the process (no caller could
    // catch it): said on stderr, and the default taken.
    std::fprintf(stderr, "kiln: ignoring KILN_PIPELINE: %s; running in sync mode\n",
                 e.message().c_str());
    return PipelineMode::kSync;
  }
}

// Locks `mutex`, giving up what the blocking hooks give up (Python's GIL) while another thread
// holds it: that thread may be waiting for the pipeline with the GIL given up, and need it back.
std::unique_lock<std::mutex> lock_blocking(std::mutex& mutex) {
  std::unique_lock<std::mutex> lock(mutex, std::try_to_lock);
  if (!lock.owns_lock()) {
    BlockingScope blocking(/*run_hooks=*/true);
    lock.lock();
  }
  return lock;
}

void mark_queued(const Tensor& t) {
  if (!t.defined() || t.is_pending()) return;
  if (const std::shared_ptr<Storage>& storage = t.impl()->storage) storage->note_queued();
}

void stamp_use(const Tensor& t, uint64_t seq) {
  if (!t.defined()) return;
  if (const std::shared_ptr<Storage>& storage = t.impl()->storage) storage->note_queued_use(seq);
}

// A result the call made (not one of the caller's `out` tensors, which earlier calls may read).
bool is_fresh_result(const OpCall& call, size_t i) {
  const Tensor& result = call.results[i];
  return std::none_of(call.out.begin(), call.out.end(),
                      [&](const Tensor& t) { return t.is_same(result); });
}


}  // namespace

Pipeline& Pipeline::instance() {
  static Pipeline* pipeline = new Pipeline();
  return *pipeline;
}

Pipeline::Pipeline() : mode_(initial_mode()) {}

// ---- the caller's side (PyTask) ----------------------------------------------------------------

TensorList Pipeline::run_sync(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                              const std::vector<Tensor>& out,
                              const std::shared_ptr<BoundKernel>& bound_kernel) {
  // Right after a switch to sync, calls this thread queued before it may still be running (set_mode
  // drains them, perhaps not yet): this call may use their results or memory, so they finish
  // first. (Run at once, an in-place op materialized the Storage a worker was materializing.)
  if (!t_in_worker && launched_.load() < claimed_.load(std::memory_order_acquire)) {
    drain();
  }
  return run_op_sync(op, inputs, attrs, out, bound_kernel);
}

TensorList Pipeline::dispatch(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                              const std::vector<Tensor>& out,
                              const std::shared_ptr<BoundKernel>& bound_kernel) {
  if (mode() == PipelineMode::kSync || t_in_worker) {  // (the mode first: no TLS read in sync)
    return run_sync(op, inputs, attrs, out, bound_kernel);
  }
  // Counted until the call is published: set_mode stores the new mode, then waits for no caller
  // here before it drains and stops the workers, so a call that read the old mode is run by them
  // (it was left in the ring with no worker, and every later drain hung). A caller counted after
  // the store reads the new mode (both sequentially consistent).
  dispatching_.fetch_add(1, std::memory_order_seq_cst);
  struct Leave {
    std::atomic<int>& count;
    ~Leave() { count.fetch_sub(1, std::memory_order_release); }
  } leave{dispatching_};
  const PipelineMode mode = mode_.load(std::memory_order_seq_cst);
  if (mode == PipelineMode::kSync) return run_sync(op, inputs, attrs, out, bound_kernel);
  ensure_workers(mode);  // the mode read here: the call is published to its workers
  release_finished(/*wait=*/false);
  for (const Tensor& t : inputs) mark_queued(t);
  for (const Tensor& t : out) mark_queued(t);
  if (bound_kernel != nullptr) {
    publish(claim_slot(), op, inputs, attrs, out, {}, nullptr, bound_kernel);
    return TensorList(out.begin(), out.end());
  }
  if (op.num_outputs() == OpDef::kVariableOutputs && out.empty()) {
    // How many results there are is metadata: plan here, waiting for the inputs' metadata, and
    // queue the rest. A planning failure raises now, with nothing queued.
    OpCall planned;
    planned.op = &op;
    planned.inputs = inputs.vec();
    planned.attrs = attrs;
    plan_op(planned);
    for (const Tensor& t : planned.kernel_outputs) mark_queued(t);
    TensorList results = planned.results;
    publish(claim_slot(), op, inputs, attrs, out, {}, &planned, nullptr);
    return results;
  }
  TensorList results;
  if (out.empty()) {
    const int n = op.num_outputs();
    results.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) results.emplace_back(std::make_shared<TensorImpl>());
  } else {
    results.assign(out.begin(), out.end());
  }
  const uint64_t seq = claim_slot();
  if (out.empty()) {
    for (const Tensor& r : results) r.impl()->pending.store(seq, std::memory_order_relaxed);
  }
  publish(seq, op, inputs, attrs, out, results, nullptr, nullptr);
  return results;
}

uint64_t Pipeline::claim_slot() {
  const uint64_t seq = claimed_.fetch_add(1, std::memory_order_acq_rel) + 1;
  if (seq > launched_.load() + kRingSize) {
    // The ring is full. Resume only once half of it is free again, so that a caller faster than
    // the workers sleeps once per half ring instead of once per call.
    launched_.wait_for(seq - kRingSize / 2, kCallerSpin, /*run_blocking_hooks=*/true);
  }
  // The slot's previous call has run; its tensors must be gone before the slot is refilled.
  if (released_.load(std::memory_order_acquire) + kRingSize < seq) release_finished(/*wait=*/true);
  return seq;
}

void Pipeline::publish(uint64_t seq, const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                       const std::vector<Tensor>& out, TensorList results, OpCall* planned,
                       const std::shared_ptr<BoundKernel>& bound_kernel) {
  Slot& s = slot(seq);
  // Once claimed, the slot must be published whatever happens, or the ring would stall.
  try {
    if (planned != nullptr) {
      s.call = std::move(*planned);
      s.planned = true;
    } else {
      // The results first (a move, which cannot fail): if copying the rest fails, the frontend
      // still finds them and ends their `pending` with the failure.
      s.call.results = std::move(results);
      s.call.op = &op;
      s.call.inputs.assign(inputs.begin(), inputs.end());
      s.call.attrs = attrs;
      if (bound_kernel != nullptr) {
        s.call.bound_kernel = bound_kernel;
        bind_outputs(s.call, out);
        for (const Tensor& t : s.call.results) mark_queued(t);  // fresh outputs' new storage
      } else {
        s.call.out = out;
      }
    }
  } catch (...) {
    s.failure = std::make_shared<const OpFailure>(std::current_exception());
  }
  s.published.store(seq, std::memory_order_release);
  published_.notify();
}

// ---- the stages ----------------------------------------------------------------------------------

void Pipeline::fail(Slot& s, std::shared_ptr<const OpFailure> failure) {
  s.failure = failure;
  const OpCall& call = s.call;
  for (size_t i = 0; i < call.results.size(); ++i) {
    if (is_fresh_result(call, i)) call.results[i].impl()->set_failure(failure);
  }
  std::lock_guard<std::mutex> lock(failure_mutex_);
  // synchronize() raises the earliest failure no read has raised, so failures a read raised make
  // way. The bound keeps a program that fails forever without reading or synchronizing from
  // growing the list; the earliest failures are the ones kept.
  auto& list = unraised_failures_;
  auto raised = [](const auto& f) { return f->raised.load(std::memory_order_acquire); };
  list.erase(std::remove_if(list.begin(), list.end(), raised), list.end());
  if (list.size() < kMaxUnraisedFailures) list.push_back(std::move(failure));
}

void Pipeline::run_frontend(uint64_t seq) {
  Slot& s = slot(seq);
  OpCall& call = s.call;
  if (s.failure != nullptr) {
    fail(s, s.failure);  // filling the slot failed
  } else if (!s.planned) {
    // A call on a tensor whose metadata never came fails with that tensor's failure.
    std::shared_ptr<const OpFailure> input_failure;
    for (const std::vector<Tensor>* group : {&call.inputs, &call.out}) {
      for (const Tensor& t : *group) {
        if (t.defined() &&
            t.impl()->pending.load(std::memory_order_acquire) == TensorImpl::kFailedMetadata) {
          input_failure = t.impl()->failure();
        }
      }
    }
    if (input_failure != nullptr) {
      fail(s, std::move(input_failure));
    } else {
      try {
        plan_op(call);
      } catch (...) {
        fail(s, std::current_exception());
      }
    }
  }
  for (const Tensor& t : call.inputs) stamp_use(t, seq);
  for (const Tensor& t : call.out) stamp_use(t, seq);
  for (const Tensor& t : call.kernel_outputs) stamp_use(t, seq);
  const uint64_t state = s.failure != nullptr ? TensorImpl::kFailedMetadata : 0;
  // Aliases made of a result meanwhile (Tensor::alias) join the results: this loop ends their
  // `pending` in turn (and takes their own aliases), and a later stage's failure reaches them.
  for (size_t i = 0; i < call.results.size(); ++i) {
    TensorImpl* impl = call.results[i].impl();
    if (impl->pending.load(std::memory_order_relaxed) != seq) continue;
    impl->pending.store(state, std::memory_order_release);
    for (std::shared_ptr<TensorImpl>& alias : impl->take_pending_aliases()) {
      call.results.emplace_back(std::move(alias));
    }
  }
}

void Pipeline::run_device(uint64_t seq) {
  Slot& s = slot(seq);
  if (s.failure != nullptr) return;
  try {
    allocate_op(s.call);
  } catch (...) {
    fail(s, std::current_exception());
  }
}

void Pipeline::run_launch(uint64_t seq) {
  Slot& s = slot(seq);
  OpCall& call = s.call;
  if (s.failure == nullptr) {
    for (const Tensor& t : call.inputs) {
      if (!t.defined()) continue;
      if (std::shared_ptr<const OpFailure> input_failure = t.impl()->failure()) {
        fail(s, std::move(input_failure));
        break;
      }
    }
  }
  if (s.failure == nullptr) {
    try {
      launch_op(call);
    } catch (...) {
      fail(s, std::current_exception());
    }
  }
  // `out` tensors learn of a failure only now, as calls before this one may have read them. Kiln's
  // kernels validate before they write, so the data is as it was: the failure is transient.
  if (s.failure != nullptr) {
    for (const Tensor& t : call.out) t.impl()->set_failure(s.failure, /*transient=*/true);
  }
  call.workspace.reset();  // allocated here: freed here; the tensors wait for release_finished
  s.failure = nullptr;
  s.planned = false;
}

// ---- workers ---------------------------------------------------------------------------------------

void Pipeline::ensure_workers(PipelineMode mode) {
  if (workers_mode_.load(std::memory_order_acquire) != mode) start_workers(mode);
}

void Pipeline::start_workers(PipelineMode mode) {
  const std::unique_lock<std::mutex> lock = lock_blocking(workers_mutex_);
  if (workers_mode_.load(std::memory_order_relaxed) == mode) return;
  // Another mode's workers (set_mode stores the mode before it stops them) finish what is queued
  // first: stopped with calls in the ring, they would leave them to no one.
  if (!workers_.empty()) drain();
  stop_workers();
  stop_.store(false, std::memory_order_relaxed);
  auto spawn = [this](void (Pipeline::*loop)()) {
    workers_.emplace_back([this, loop] {
      t_in_worker = true;
      detail::set_thread_cap(kWorkerThreadCap);
      (this->*loop)();
    });
  };
  if (mode == PipelineMode::kFourStage) {
    spawn(&Pipeline::frontend_loop);
    spawn(&Pipeline::device_loop);
    spawn(&Pipeline::launch_loop);
  } else if (mode == PipelineMode::kTwoStage) {
    spawn(&Pipeline::combined_loop);
  }
  workers_mode_.store(mode, std::memory_order_release);
}

// Under workers_mutex_, with nothing queued.
void Pipeline::stop_workers() {
  if (workers_.empty()) return;
  stop_.store(true, std::memory_order_release);
  published_.notify();
  for (Counter* c : {&planned_, &allocated_, &launched_}) c->interrupt();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  workers_mode_.store(PipelineMode::kSync, std::memory_order_release);
}

bool Pipeline::wait_published(uint64_t seq) {
  published_.wait([&] { return is_published(seq) || stop_.load(std::memory_order_acquire); },
                  kWorkerSpin);
  return is_published(seq);
}

void Pipeline::frontend_loop() {
  for (uint64_t next = planned_.load() + 1; wait_published(next); ++next) {
    run_frontend(next);
    planned_.advance(next);
  }
}

void Pipeline::device_loop() {
  for (uint64_t next = allocated_.load() + 1;; ++next) {
    // At most kDeviceRunAhead calls hold memory before their kernels run.
    if (!planned_.wait_for(next, kWorkerSpin, false, &stop_) ||
        !launched_.wait_for(next - std::min(next, kDeviceRunAhead), kWorkerSpin, false, &stop_)) {
      return;
    }
    run_device(next);
    allocated_.advance(next);
  }
}

void Pipeline::launch_loop() {
  for (uint64_t next = launched_.load() + 1;; ++next) {
    if (!allocated_.wait_for(next, kWorkerSpin, false, &stop_)) return;
    run_launch(next);
    launched_.advance(next);
  }
}

void Pipeline::combined_loop() {
  for (;;) {
    // Plan every published call first, so metadata stays ahead of the kernels.
    uint64_t planned = planned_.load();
    while (is_published(planned + 1)) {
      run_frontend(++planned);
      planned_.advance(planned);
    }
    const uint64_t next = launched_.load() + 1;
    if (next <= planned) {
      run_device(next);
      allocated_.advance(next);
      run_launch(next);
      launched_.advance(next);
    } else if (!wait_published(next)) {
      return;
    }
  }
}

// ---- sync points ---------------------------------------------------------------------------------

void Pipeline::set_mode(PipelineMode mode) {
  KILN_CHECK(!t_in_worker) << "set_pipeline: cannot change the pipeline from inside an op";
  const std::unique_lock<std::mutex> switching = lock_blocking(mode_mutex_);
  mode_.store(mode, std::memory_order_seq_cst);
  {
    // Not under workers_mutex_: a counted caller may be starting workers. It may need what the
    // blocking hooks give up (Python's GIL) to publish.
    BlockingScope blocking(/*run_hooks=*/true);
    while (dispatching_.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
  }
  const std::unique_lock<std::mutex> lock = lock_blocking(workers_mutex_);
  drain();
  if (workers_mode_.load(std::memory_order_relaxed) != mode) stop_workers();
}

void Pipeline::drain() {
  KILN_CHECK(!t_in_worker) << "synchronize: cannot wait for the pipeline from inside an op";
  launched_.wait_for(claimed_.load(std::memory_order_acquire), kCallerSpin,
                     /*run_blocking_hooks=*/true);
}

void Pipeline::drain_unless_in_worker() {
  if (!t_in_worker) drain();
}

void Pipeline::release_finished(bool wait) {
  const uint64_t launched = launched_.load();
  if (released_.load(std::memory_order_acquire) >= launched) return;
  // The holder may be releasing a tensor whose deleter needs what our embedder's hooks give up
  // (Python's GIL): lock_blocking gives it up while it waits.
  std::unique_lock<std::mutex> lock =
      wait ? lock_blocking(release_mutex_) : std::unique_lock<std::mutex>(release_mutex_,
                                                                          std::try_to_lock);
  if (!lock.owns_lock()) return;
  const uint64_t first = released_.load(std::memory_order_relaxed) + 1;
  if (first > launched) return;
  for (uint64_t seq = first; seq <= launched; ++seq) slot(seq).call.clear();
  released_.store(launched, std::memory_order_release);
}

void Pipeline::synchronize() {
  drain();
  release_finished(/*wait=*/true);
  std::vector<std::shared_ptr<const OpFailure>> failures;
  {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    failures.swap(unraised_failures_);
  }
  for (const auto& failure : failures) {  // raises the earliest one still unraised
    if (!failure->raised.load(std::memory_order_acquire)) failure->raise();
  }
}

void Pipeline::wait_for_metadata(const TensorImpl& impl) {
  const uint64_t seq = impl.pending.load(std::memory_order_acquire);
  if (seq == 0 || seq == TensorImpl::kFailedMetadata) return;
  KILN_ASSERT(!t_in_worker) << "a pipeline worker read the metadata of a tensor that call " << seq
                            << " has not planned yet";
  // `seq` is the call that plans the tensor: once the frontend is past it, `pending` is final.
  planned_.wait_for(seq, kCallerSpin, /*run_blocking_hooks=*/true);
}

// Note [Waiting for data]
// Every call stamps the storages it reads or writes with its sequence number when it is planned
// (Storage::note_queued_use), and a caller marks the storages of its ready inputs as queued before
// it queues the call. To read a tensor's memory, a caller lets the frontend catch up with every
// call issued so far (so every stamp is in place), then waits until the last call that uses the
// memory has launched. Memory no call ever referenced never waits. So reading the result of one op
// does not wait for unrelated ops queued after it, and a write through a NumPy view of a tensor
// cannot race with a queued op that reads it.
void Pipeline::wait_for_data(const TensorImpl& impl) {
  if (t_in_worker) return;
  const uint64_t issued = claimed_.load(std::memory_order_acquire);
  if (launched_.load() >= issued) return;
  planned_.wait_for(issued, kCallerSpin, /*run_blocking_hooks=*/true);
  launched_.wait_for(impl.storage->last_queued_use(), kCallerSpin, /*run_blocking_hooks=*/true);
}

// ---- fork ------------------------------------------------------------------------------------------

void Pipeline::before_fork() {
  if (t_in_worker) return;
  lock_blocking(workers_mutex_).release();  // unlocked in the parent, made anew in the child
  drain();
  stop_workers();
}

void Pipeline::after_fork_in_parent() {
  if (t_in_worker) return;
  workers_mutex_.unlock();
  // Another thread may have published a call while the drain above gave up the GIL, after its
  // target was read: the workers stopped with it queued, and its reader would wait forever.
  const PipelineMode mode = this->mode();
  if (mode != PipelineMode::kSync) ensure_workers(mode);
}

void Pipeline::after_fork_in_child() {
  if (t_in_worker) return;
  new (&workers_mutex_) std::mutex();
  new (&mode_mutex_) std::mutex();  // another thread may have been changing the mode
  dispatching_.store(0, std::memory_order_relaxed);  // or dispatching: it is not in the child
  published_.reset_after_fork();
  for (Counter* c : {&planned_, &allocated_, &launched_}) c->reset_after_fork();
  new (&failure_mutex_) std::mutex();
  new (&release_mutex_) std::mutex();
}

}  // namespace kiln::runtime
