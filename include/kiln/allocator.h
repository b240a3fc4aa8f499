// Allocators and reference-counted storage.
//
//   auto storage = kiln::Storage::allocate(1024);        // 64-byte aligned, from cpu_allocator()
//   auto shared = kiln::Storage::wrap(ptr, n, deleter);  // memory owned elsewhere (NumPy, DLPack)
//
// A Storage owns one block of memory and frees it (through its allocator or deleter) when the
// last Tensor that views it goes away. The CPU allocator is replaceable: the runtime installs its
// caching allocator with set_cpu_allocator(). A *deferred* storage has its size but no memory yet:
// the pipeline creates one for each op output when it plans the op and gives it memory
// (materialize()) in the op's DeviceTask, so views of a pending result can share it early. A
// deferred storage of at most Storage::kInlineBytes gets its memory inside the Storage object
// instead (a scalar, a 4x4 float matrix): an op on a few elements then makes no allocator call.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "kiln/device.h"
#include "kiln/export.h"

namespace kiln {

/// Every block an Allocator returns is aligned to this many bytes.
inline constexpr size_t kAlignment = 64;

/// A source of device memory. Implementations must be thread-safe.
class KILN_API Allocator {
 public:
  virtual ~Allocator();
  /// Returns a block of at least `nbytes` bytes aligned to kAlignment (nbytes may be 0); throws
  /// kiln::Error when memory is exhausted.
  virtual void* allocate(size_t nbytes) = 0;
  /// Returns a block obtained from allocate(nbytes) with the same nbytes.
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
};

/// The allocator Storage::allocate uses for the CPU (by default aligned malloc).
KILN_API Allocator* cpu_allocator();
/// Replaces the CPU allocator; the previous one must outlive every block it handed out.
/// Returns the previous allocator.
KILN_API Allocator* set_cpu_allocator(Allocator* allocator);

class KILN_API Storage {
 public:
  using Deleter = std::function<void(void*)>;

  /// A new block of `nbytes` from the device's allocator.
  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device = Device::cpu());
  /// Memory owned by someone else; `deleter` runs (once) when the storage dies. `deleter` may be
  /// empty when the memory outlives every tensor that views it.
  static std::shared_ptr<Storage> wrap(void* data, size_t nbytes, Deleter deleter,
                                       Device device = Device::cpu());
  /// A storage of `nbytes` whose memory is allocated later by materialize().
  static std::shared_ptr<Storage> deferred(size_t nbytes, Device device = Device::cpu());

  /// The most bytes a deferred storage keeps inside itself when materialized, rather than in a
  /// block from the allocator. Such memory is 16-byte aligned (not kAlignment) and does not
  /// appear in the allocator's statistics.
  static constexpr size_t kInlineBytes = 64;

  Storage(void* data, size_t nbytes, Allocator* allocator, Deleter deleter, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  /// The memory; null for a deferred storage that has not been materialized.
  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  /// True when the memory came from an Allocator or lives inside this object (allocate(), or
  /// materialize() of a deferred storage), so only tensors that view this storage can write it;
  /// false for wrap()ped memory owned elsewhere (NumPy, DLPack), which its owner may still
  /// change, and before materialize().
  bool owns_memory() const { return allocator_ != nullptr || data_ == inline_; }
  Device device() const { return device_; }
  /// Gives a deferred storage its memory: inside this object up to kInlineBytes, else from the
  /// device's allocator (no-op when it has memory). Not thread-safe: the pipeline calls it once,
  /// in the DeviceTask of the op that made it.
  void materialize();

  /// Pipeline bookkeeping (Note [Waiting for data] in src/runtime/pipeline.cc): records that
  /// the queued op `seq` reads or writes this memory. Sequence numbers only grow.
  void note_queued_use(uint64_t seq) {
    queued_.store(true, std::memory_order_relaxed);
    last_use_.store(seq, std::memory_order_release);
  }
  /// Marks the storage as seen by the pipeline before the using op knows its sequence number.
  void note_queued() {
    if (!queued_.load(std::memory_order_relaxed)) queued_.store(true, std::memory_order_relaxed);
  }
  /// False for memory no queued op has ever referenced: reading it never waits.
  bool has_queued_use() const { return queued_.load(std::memory_order_relaxed); }
  /// The sequence number of the last queued op known to use this memory (0 if none).
  uint64_t last_queued_use() const { return last_use_.load(std::memory_order_acquire); }

  /// When an op call last wrote into this existing memory (an in-place op or out=, counted when
  /// the call is made, in the calling thread's order): the tick of the process-wide write clock
  /// that the write took, 0 when none has. The clock only grows, so code holding something derived
  /// from the values can tell whether they changed since a moment it noted: kiln_cpu's packed
  /// weights compare the version they packed, autograd's saved tensors the clock at the call that
  /// saved them. Writes through raw pointers (data_ptr(), copy_into, a NumPy view of the tensor)
  /// are not counted.
  uint64_t write_version() const { return write_version_.load(std::memory_order_acquire); }
  /// Counts a write: the write version becomes the clock's next tick.
  void note_write();
  /// The write clock now: the write version of the latest counted write into any storage.
  static uint64_t write_clock();

 private:
  void* data_;
  size_t nbytes_;
  Allocator* allocator_;  // set when the block came from allocate(); null for wrap()
  Deleter deleter_;
  Device device_;
  std::atomic<bool> queued_{false};
  std::atomic<uint64_t> last_use_{0};
  std::atomic<uint64_t> write_version_{0};
  alignas(16) unsigned char inline_[kInlineBytes];  // the memory of a small deferred storage
};

}  // namespace kiln
