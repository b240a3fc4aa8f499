// The caching CPU allocator the runtime installs (kiln::set_cpu_allocator): freed blocks are kept
// by size and handed out again, so a loop that allocates the same shapes every iteration stops
// asking the system for memory (and stops faulting fresh pages in).
//
// A block is freed when the last Storage using it dies, and a queued op holds its tensors until its
// LaunchTask ends, so a block is never reused while a queued op still reads it. Thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kiln/allocator.h"
#include "kiln/runtime.h"

namespace kiln::runtime {

class CachingAllocator final : public Allocator {
 public:
  /// Takes new blocks from `system`; cached bytes beyond `cache_limit` go back to it at once.
  CachingAllocator(Allocator* system, size_t cache_limit);

  void* allocate(size_t nbytes) override;
  void deallocate(void* ptr, size_t nbytes) override;

  MemoryStats stats() const;
  void empty_cache();
  void reset_peak();

  /// fork() support: hold the lock across fork(), so the child never inherits it held by a thread
  /// it does not have.
  void lock_for_fork() { mutex_.lock(); }
  void unlock_after_fork() { mutex_.unlock(); }

  /// The size of the block that serves a request of `nbytes` (see Note [Size classes]).
  static size_t block_size(size_t nbytes);

 private:
  void* take_cached(size_t size);  // under mutex_; null when nothing fits
  /// Where freed blocks of class `size` wait (under mutex_).
  std::vector<void*>& free_list(size_t size);

  Allocator* system_;
  const size_t cache_limit_;
  mutable std::mutex mutex_;
  // Cached blocks by block size. The classes below a huge page each keep a list for the process's
  // life (no map node or vector allocated per alloc/free of a small tensor); huge ones, of any
  // number of pages, are in the map.
  static constexpr size_t kNumSmallClasses = 55;  // 64 B to 1.75 MiB; see small_class()
  std::array<std::vector<void*>, kNumSmallClasses> small_free_;
  std::map<size_t, std::vector<void*>> huge_free_;
  // Large blocks may serve a smaller request (Note [Size classes]), so their size is recorded.
  std::unordered_map<void*, size_t> large_sizes_;
  MemoryStats stats_;
};

}  // namespace kiln::runtime
