#include "kiln/allocator.h"

#include <atomic>
#include <cstdlib>
#include <new>

#include <sys/mman.h>

#include "kiln/error.h"

namespace kiln {
namespace {

// Blocks at least this large are aligned to a huge page and advised to use huge pages: a fresh
// 64 MiB output otherwise costs 16,384 page faults, which measured as half the time of a large
// softmax (see bench/RESULTS.md).
constexpr size_t kHugePage = size_t{2} << 20;

class AlignedAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    const size_t alignment = nbytes >= kHugePage ? kHugePage : kAlignment;
    // aligned_alloc needs a size that is a multiple of the alignment, and nonzero.
    const size_t rounded = ((nbytes + alignment - 1) / alignment) * alignment;
    void* ptr = std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
    KILN_CHECK(ptr != nullptr) << "out of memory: could not allocate " << nbytes << " bytes";
    if (alignment == kHugePage) {
      // Advisory only: where transparent huge pages are off this is a no-op.
      madvise(ptr, rounded, MADV_HUGEPAGE);
    }
    return ptr;
  }
  void deallocate(void* ptr, size_t) override { std::free(ptr); }
};

AlignedAllocator g_aligned_allocator;
std::atomic<Allocator*> g_cpu_allocator{&g_aligned_allocator};
std::atomic<uint64_t> g_write_clock{0};

}  // namespace

Allocator::~Allocator() = default;

Allocator* cpu_allocator() { return g_cpu_allocator.load(std::memory_order_acquire); }

Allocator* set_cpu_allocator(Allocator* allocator) {
  KILN_CHECK(allocator != nullptr) << "set_cpu_allocator: expected an allocator, got null";
  return g_cpu_allocator.exchange(allocator, std::memory_order_acq_rel);
}

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  KILN_CHECK(device.type == DeviceType::kCPU)
      << "Storage::allocate: only CPU memory is built in, got device " << device;
  Allocator* allocator = cpu_allocator();
  return std::make_shared<Storage>(allocator->allocate(nbytes), nbytes, allocator, nullptr, device);
}

std::shared_ptr<Storage> Storage::deferred(size_t nbytes, Device device) {
  KILN_CHECK(device.type == DeviceType::kCPU)
      << "Storage::deferred: only CPU memory is built in, got device " << device;
  return std::make_shared<Storage>(nullptr, nbytes, nullptr, nullptr, device);
}

void Storage::materialize() {
  if (data_ != nullptr) return;
  if (nbytes_ <= kInlineBytes) {  // no allocator call (and its lock) for the smallest results
    data_ = inline_;
    return;
  }
  Allocator* allocator = cpu_allocator();
  data_ = allocator->allocate(nbytes_);
  allocator_ = allocator;
}

std::shared_ptr<Storage> Storage::wrap(void* data, size_t nbytes, Deleter deleter, Device device) {
  return std::make_shared<Storage>(data, nbytes, nullptr, std::move(deleter), device);
}

Storage::Storage(void* data, size_t nbytes, Allocator* allocator, Deleter deleter, Device device)
    : data_(data), nbytes_(nbytes), allocator_(allocator), deleter_(std::move(deleter)),
      device_(device) {}

void Storage::note_write() {
  const uint64_t tick = g_write_clock.fetch_add(1, std::memory_order_acq_rel) + 1;
  // Two threads writing at once: the later tick must stay (a plain store could leave the earlier).
  uint64_t seen = write_version_.load(std::memory_order_relaxed);
  while (seen < tick && !write_version_.compare_exchange_weak(seen, tick, std::memory_order_release,
                                                              std::memory_order_relaxed)) {
  }
}

uint64_t Storage::write_clock() { return g_write_clock.load(std::memory_order_acquire); }

Storage::~Storage() {
  // A deferred storage that never got memory has neither an allocator nor a deleter.
  if (allocator_ != nullptr) {
    allocator_->deallocate(data_, nbytes_);
  } else if (deleter_) {
    deleter_(data_);
  }
}

}  // namespace kiln
