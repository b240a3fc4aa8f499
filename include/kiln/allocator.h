// Allocators and reference-counted storage.
//
//   auto storage = kiln::Storage::allocate(1024);        // 64-byte aligned, from cpu_allocator()
//   auto shared = kiln::Storage::wrap(ptr, n, deleter);  // memory owned elsewhere (NumPy, DLPack)
//
// A Storage owns one block of memory and frees it (through its allocator or deleter) when the
// last Tensor that views it goes away. The CPU allocator is replaceable: the runtime installs its
// caching allocator with set_cpu_allocator().
#pragma once

#include <cstddef>
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

  Storage(void* data, size_t nbytes, Allocator* allocator, Deleter deleter, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  void* data_;
  size_t nbytes_;
  Allocator* allocator_;  // set when the block came from allocate(); null for wrap()
  Deleter deleter_;
  Device device_;
};

}  // namespace kiln
