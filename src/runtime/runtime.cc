// kiln::runtime's public functions, and the installation of the runtime when libkiln loads: the
// pipeline becomes the dispatcher, the caching allocator the CPU allocator, and fork() and process
// exit are taken care of.
#include <pthread.h>

#include <cstdlib>

#include "kiln/runtime.h"
#include "runtime/caching_allocator.h"
#include "runtime/pipeline.h"

namespace kiln::runtime {
namespace {

// Cached bytes above this go back to the system (a quarter of a 24 GiB machine's memory would be
// generous; 4 GiB keeps a training loop's working set without hoarding).
constexpr size_t kCacheLimit = size_t{4} << 30;

CachingAllocator& caching_allocator() {
  // Never destroyed: storages freed during static destruction still return blocks to it.
  static CachingAllocator* allocator = new CachingAllocator(cpu_allocator(), kCacheLimit);
  return *allocator;
}

BlockingHooks g_blocking_hooks;

void wait_for_metadata(const TensorImpl& impl) { Pipeline::instance().wait_for_metadata(impl); }
void wait_for_data(const TensorImpl& impl) { Pipeline::instance().wait_for_data(impl); }
// Unregistering an op (or unloading the library that defined it) waits for its queued calls, as
// does a call by name that queued while its op was being removed (Note [Removing an op that is
// being called]).
void drain_before_op_removal(const OpDef&) { Pipeline::instance().drain(); }
void drain_after_removed_op_call(const OpDef&) { Pipeline::instance().drain_unless_in_worker(); }

void before_fork() {
  Pipeline::instance().before_fork();
  caching_allocator().lock_for_fork();
}
void after_fork_in_parent() {
  caching_allocator().unlock_after_fork();
  Pipeline::instance().after_fork_in_parent();
}
void after_fork_in_child() {
  caching_allocator().unlock_after_fork();
  Pipeline::instance().after_fork_in_child();
}
void drain_at_exit() { Pipeline::instance().drain(); }

struct Installer {
  Installer() {
    set_cpu_allocator(&caching_allocator());
    Pipeline& pipeline = Pipeline::instance();
    set_dispatcher(&pipeline);
    detail::set_pending_tensor_hooks({&wait_for_metadata, &wait_for_data});
    detail::set_op_removal_hook(&drain_before_op_removal);
    detail::set_removed_op_call_hook(&drain_after_removed_op_call);
    pthread_atfork(&before_fork, &after_fork_in_parent, &after_fork_in_child);
    std::atexit(&drain_at_exit);
  }
};
const Installer g_installer;

}  // namespace

const BlockingHooks& blocking_hooks() { return g_blocking_hooks; }

void set_blocking_hooks(const BlockingHooks& hooks) {
  KILN_CHECK((hooks.enter == nullptr) == (hooks.leave == nullptr))
      << "set_blocking_hooks: expected both hooks or neither";
  g_blocking_hooks = hooks;
}

const char* pipeline_mode_name(PipelineMode mode) {
  switch (mode) {
    case PipelineMode::kSync: return "sync";
    case PipelineMode::kTwoStage: return "2stage";
    case PipelineMode::kFourStage: return "4stage";
  }
  KILN_ASSERT(false) << "unknown pipeline mode " << static_cast<int>(mode);
}

PipelineMode pipeline_mode_from_name(const std::string& name) {
  for (PipelineMode mode :
       {PipelineMode::kSync, PipelineMode::kTwoStage, PipelineMode::kFourStage}) {
    if (name == pipeline_mode_name(mode)) return mode;
  }
  KILN_FAIL(kValue) << "unknown pipeline mode '" << name
                    << "': expected 'sync', '2stage' or '4stage'";
}

void set_pipeline(PipelineMode mode) { Pipeline::instance().set_mode(mode); }
PipelineMode get_pipeline() { return Pipeline::instance().mode(); }
void synchronize() { Pipeline::instance().synchronize(); }
void drain() { Pipeline::instance().drain(); }

// Each first releases the tensors of finished calls (Note [Releasing on the caller's side]), so
// that the counters count what the program still holds. empty_cache and reset_peak_memory_stats
// also wait for the ops issued so far, whose memory the workers allocate (else, in the
// asynchronous modes, empty_cache kept the blocks of tensors already dropped and a peak reset
// caught earlier ops' allocations); memory_stats does not, so that it observes a running program
// (a monitoring thread) without waiting for it.
namespace {
void settle() {
  Pipeline::instance().drain();
  Pipeline::instance().release_finished(/*wait=*/true);
}
}  // namespace

MemoryStats memory_stats() {
  Pipeline::instance().release_finished(/*wait=*/true);
  return caching_allocator().stats();
}
void empty_cache() {
  settle();
  caching_allocator().empty_cache();
}
void reset_peak_memory_stats() {
  settle();
  caching_allocator().reset_peak();
}

}  // namespace kiln::runtime
