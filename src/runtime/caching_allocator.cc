#include "runtime/caching_allocator.h"

#include <algorithm>

#include "kiln/error.h"

namespace kiln::runtime {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

}  // namespace

// Note [Size classes]
// Requests up to 256 bytes round up to a multiple of 64 (the alignment); larger ones below a huge
// page round up to one of four steps per power of two (at most 25% waste) and reuse only blocks
// of exactly their class; from a huge page (2 MiB) up, a request rounds up to a whole number of
// huge pages and may reuse a cached block up to 1.25x its size, so a shape that changes a little
// still hits the cache.
size_t CachingAllocator::block_size(size_t nbytes) {
  if (nbytes <= 256) return std::max(kAlignment, (nbytes + kAlignment - 1) & ~(kAlignment - 1));
  if (nbytes >= kHugePage) return (nbytes + kHugePage - 1) & ~(kHugePage - 1);
  const size_t below = size_t{1} << (63 - __builtin_clzll(nbytes - 1));  // largest 2^k < nbytes
  const size_t step = below / 4;
  return (nbytes + step - 1) / step * step;
}

CachingAllocator::CachingAllocator(Allocator* system, size_t cache_limit)
    : system_(system), cache_limit_(cache_limit) {}

void* CachingAllocator::take_cached(size_t size) {
  const auto it = free_.lower_bound(size);
  const size_t largest_fit = size >= kHugePage ? size + size / 4 : size;
  if (it == free_.end() || it->first > largest_fit) return nullptr;
  void* ptr = it->second.back();
  const size_t got = it->first;
  it->second.pop_back();
  if (it->second.empty()) free_.erase(it);
  stats_.cached -= got;
  if (got >= kHugePage) large_sizes_[ptr] = got;
  return ptr;
}

void* CachingAllocator::allocate(size_t nbytes) {
  const size_t size = block_size(nbytes);
  std::unique_lock<std::mutex> lock(mutex_);
  void* ptr = take_cached(size);
  if (ptr == nullptr) {
    lock.unlock();
    try {
      ptr = system_->allocate(size);
    } catch (const Error&) {
      // The cache may hold the memory the system lacks: give it back and try once more.
      empty_cache();
      ptr = system_->allocate(size);
    }
    lock.lock();
    ++stats_.num_os_allocs;
    if (size >= kHugePage) large_sizes_[ptr] = size;
  }
  const size_t got = size >= kHugePage ? large_sizes_[ptr] : size;
  stats_.allocated += got;
  stats_.peak = std::max(stats_.peak, stats_.allocated);
  ++stats_.num_allocs;
  return ptr;
}

void CachingAllocator::deallocate(void* ptr, size_t nbytes) {
  size_t size = block_size(nbytes);
  std::unique_lock<std::mutex> lock(mutex_);
  if (size >= kHugePage) {
    const auto it = large_sizes_.find(ptr);
    KILN_ASSERT(it != large_sizes_.end()) << "deallocate: unknown block";
    size = it->second;
    large_sizes_.erase(it);
  }
  stats_.allocated -= size;
  if (stats_.cached + size <= cache_limit_) {
    free_[size].push_back(ptr);
    stats_.cached += size;
    return;
  }
  lock.unlock();
  system_->deallocate(ptr, size);
}

void CachingAllocator::empty_cache() {
  std::map<size_t, std::vector<void*>> blocks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    blocks.swap(free_);
    stats_.cached = 0;
  }
  for (const auto& [size, ptrs] : blocks) {
    for (void* ptr : ptrs) system_->deallocate(ptr, size);
  }
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak = stats_.allocated;
}

}  // namespace kiln::runtime
