// Memory for a graph's nodes: see Note [Node arena] in node_arena.cc.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>
#include <vector>

namespace kiln::ir {

class NodeArena {
 public:
  /// A new arena with one reference (its graph's).
  static NodeArena* create() { return new NodeArena(); }
  NodeArena(const NodeArena&) = delete;
  NodeArena& operator=(const NodeArena&) = delete;

  /// Memory for one object of `bytes` (at most kMaxObject); the graph's thread only.
  void* allocate(size_t bytes);
  /// Returns an object's memory; any thread.
  void deallocate(void* p, size_t bytes);
  void retain() { refs_.fetch_add(1, std::memory_order_relaxed); }
  /// Drops a reference; the last one frees the arena.
  void release();
  /// The graph is gone: memory handed back from now on is not kept for reuse.
  void orphan();

  static constexpr size_t kBlock = size_t{2} << 20;
  static constexpr size_t kMaxObject = 4096;

 private:
  NodeArena() = default;
  ~NodeArena();
  static size_t size_class(size_t bytes) { return (bytes + 15) / 16; }

  std::atomic<size_t> refs_{1};
  std::atomic<bool> orphaned_{false};
  std::vector<void*> blocks_;
  char* next_ = nullptr;
  char* end_ = nullptr;
  // Freed objects by size class (16-byte steps), for reuse by later nodes of the same size.
  std::mutex free_mutex_;
  std::atomic<size_t> num_free_{0};
  std::vector<std::vector<void*>> free_;
};

/// A standard allocator over a NodeArena, for std::allocate_shared: each object holds a
/// reference to the arena, so nodes that outlive their graph keep their memory.
template <typename T>
struct ArenaAllocator {
  using value_type = T;
  explicit ArenaAllocator(NodeArena* a) : arena(a) {}
  template <typename U>
  ArenaAllocator(const ArenaAllocator<U>& other) : arena(other.arena) {}  // NOLINT
  T* allocate(size_t n) {
    void* p = arena->allocate(n * sizeof(T));
    arena->retain();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    NodeArena* a = arena;  // `this` may live inside the memory handed back
    a->deallocate(p, n * sizeof(T));
    a->release();
  }
  template <typename U>
  bool operator==(const ArenaAllocator<U>& o) const {
    return arena == o.arena;
  }
  template <typename U>
  bool operator!=(const ArenaAllocator<U>& o) const {
    return arena != o.arena;
  }
  NodeArena* arena;
};

}  // namespace kiln::ir
