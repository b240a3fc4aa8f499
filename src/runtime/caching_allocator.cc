#include "runtime/caching_allocator.h"

#include <algorithm>

#include "kiln/error.h"

namespace kiln::runtime {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

// The index of a block size below a huge page among the classes of Note [Size classes]: 64, 128,
// 192, 256, then four steps for each power of two from 2^8 to 2^20.
size_t small_class(size_t size) {
  if (size <= 256) return size / kAlignment - 1;
  const int k = 63 - __builtin_clzll(size - 1);  // largest 2^k < size
  const size_t step = (size_t{1} << k) / 4;
  return 4 + static_cast<size_t>(k - 8) * 4 + (size - (size_t{1} << k)) / step - 1;
}

// The block size of small class `index` (small_class's inverse).
size_t small_class_size(size_t index) {
  if (index < 4) return (index + 1) * kAlignment;
  const size_t below = size_t{1} << (8 + (index - 4) / 4);
  return below + ((index - 4) % 4 + 1) * (below / 4);
}

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

std::vector<void*>& CachingAllocator::free_list(size_t size) {
  return size < kHugePage ? small_free_[small_class(size)] : huge_free_[size];
}

void* CachingAllocator::take_cached(size_t size) {
  if (size < kHugePage) {
    std::vector<void*>& blocks = small_free_[small_class(size)];
    if (blocks.empty()) return nullptr;
    void* ptr = blocks.back();
    blocks.pop_back();
    stats_.cached -= size;
    return ptr;
  }
  const auto it = huge_free_.lower_bound(size);
  if (it == huge_free_.end() || it->first > size + size / 4) return nullptr;
  void* ptr = it->second.back();
  const size_t got = it->first;
  it->second.pop_back();
  if (it->second.empty()) huge_free_.erase(it);
  stats_.cached -= got;
  large_sizes_[ptr] = got;
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
    free_list(size).push_back(ptr);
    stats_.cached += size;
    return;
  }
  lock.unlock();
  system_->deallocate(ptr, size);
}

void CachingAllocator::empty_cache() {
  // The lists are swapped out under the lock (no allocation there, so nothing can throw halfway)
  // and their blocks returned to the system after it.
  std::array<std::vector<void*>, kNumSmallClasses> small;
  std::map<size_t, std::vector<void*>> huge;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    small.swap(small_free_);
    huge.swap(huge_free_);
    stats_.cached = 0;
  }
  for (size_t i = 0; i < kNumSmallClasses; ++i) {
    for (void* ptr : small[i]) system_->deallocate(ptr, small_class_size(i));
  }
  for (const auto& [size, ptrs] : huge) {
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
