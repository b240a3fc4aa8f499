// The eager runtime: the asynchronous pipeline every eager op goes through, its sync points, and
// the caching allocator.
//
//   kiln::Tensor y = kiln::exp(x);          // returns at once; y's data is still being computed
//   kiln::Tensor z = y * 2.0;               // queued behind it, in program order
//   float* p = z.data<float>();             // a sync point: waits for z's kernel
//   kiln::runtime::set_pipeline(kiln::runtime::PipelineMode::kSync);  // debugging: run inline
//   kiln::runtime::synchronize();           // waits for everything; raises the first failure
//
// An op call passes four stages (DESIGN.md, "The eager pipeline"): the caller's thread makes the
// result handles and enqueues the call (PyTask); a FrontendTask infers the results' metadata; a
// DeviceTask allocates their memory from the caching allocator; a LaunchTask runs the kernel. The
// mode says which threads run them:
//   kFourStage  one worker per stage (frontend, device, launch)
//   kTwoStage   one worker runs frontend, device and launch
//   kSync       everything inline on the caller's thread; errors raise at the call (the
//               default; see docs/architecture.md, "Eager pipeline", for the measurement)
// The environment sets the initial mode: KILN_PIPELINE=sync|2stage|4stage, and
// KILN_LAUNCH_BLOCKING=1 (as in PyTorch) means sync.
//
// Sync points: reading a pending tensor's metadata waits for its FrontendTask; reading its data
// waits until every queued op that uses its memory has run; synchronize() waits for all ops. A
// failure in any stage is stored on the op's results and raised at the sync point that reads them
// (or by synchronize()) as a kiln::Error naming the op, its input types and the cause; ops that
// consume a failed tensor fail with the same cause. Ops from one thread run in that thread's
// program order; several threads may issue ops at once. Workers spin briefly, then sleep.
//
// Memory: a finished op's references to its tensors are dropped by the next op its caller's
// thread (or any caller) queues, or by synchronize(), memory_stats() and empty_cache(): a tensor
// Python no longer holds returns its memory to the caching allocator then.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kiln/export.h"

namespace kiln::runtime {

enum class PipelineMode { kSync, kTwoStage, kFourStage };

/// "sync", "2stage" or "4stage".
KILN_API const char* pipeline_mode_name(PipelineMode mode);
/// The mode named `name`; throws kValue listing the valid names.
KILN_API PipelineMode pipeline_mode_from_name(const std::string& name);

/// Switches the pipeline (waits for queued ops first). Thread-safe.
KILN_API void set_pipeline(PipelineMode mode);
KILN_API PipelineMode get_pipeline();

/// Waits until every op issued so far (by any thread) has run, drops finished ops' references to
/// their tensors, then raises the first failure since the previous synchronize() that no read of
/// a failed tensor has raised.
KILN_API void synchronize();

/// Waits until every op issued so far has run, raising nothing (for exit and fork handlers;
/// failures stay for the next synchronize()).
KILN_API void drain();

/// The caching allocator's counters, in bytes unless named otherwise, after dropping finished
/// ops' references (so memory only they held counts as cached). In the asynchronous modes they
/// count what the workers have allocated so far (synchronize() first for the program's view);
/// empty_cache() and reset_peak_memory_stats() first wait for every op issued so far.
struct MemoryStats {
  size_t allocated = 0;       // in blocks handed out now (rounded to their size class)
  size_t cached = 0;          // in freed blocks kept for reuse
  size_t peak = 0;            // highest `allocated` since start or reset_peak_memory_stats()
  size_t num_allocs = 0;      // blocks handed out since start
  size_t num_os_allocs = 0;   // of those, the ones that needed new memory from the system
};
KILN_API MemoryStats memory_stats();
/// Returns every cached block to the system.
KILN_API void empty_cache();
KILN_API void reset_peak_memory_stats();

/// How long a blocked caller waits outside the runtime's own lock, for embedders: the Python
/// module releases the GIL in `enter` and takes it back in `leave`. `enter` returns a token that
/// is passed to `leave`. Both run on the waiting thread.
struct BlockingHooks {
  void* (*enter)() = nullptr;
  void (*leave)(void* token) = nullptr;
};
KILN_API void set_blocking_hooks(const BlockingHooks& hooks);

}  // namespace kiln::runtime
