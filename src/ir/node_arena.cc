#include "ir/node_arena.h"

#include <sys/mman.h>

#include <cstdint>
#include <new>

#include "kiln/error.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define KILN_ARENA_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define KILN_ARENA_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define KILN_ARENA_POISON(p, n) ((void)(p), (void)(n))
#define KILN_ARENA_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace kiln::ir {

// Note [Node arena]
// A million-node graph is a million shared_ptr'd nodes. Made with std::make_shared, each is a
// malloc of ~300 bytes, and glibc's bookkeeping plus the page faults of touching fresh memory
// 4 KiB at a time cost more than everything else in building the graph. So a FuncGraph hands
// out node memory from its own arena: 2 MiB blocks (huge pages where the kernel allows, from the
// second block on), a bump pointer, and per-size free lists that let later nodes reuse what
// erased nodes left. Nodes are still ordinary shared_ptrs (std::allocate_shared with
// ArenaAllocator): each holds a reference to the arena, so a node kept after its graph is gone
// keeps the arena's memory alive, and the last node (or the graph) to go frees it. Under
// AddressSanitizer returned memory is poisoned, so a use after free is still caught.

NodeArena::~NodeArena() {
  for (void* b : blocks_) {
    KILN_ARENA_UNPOISON(b, kBlock);  // the address range may be mapped again for other memory
    munmap(b, kBlock);
  }
}

namespace {

// A kBlock-aligned block straight from the kernel (malloc'ing 2 MiB would make glibc consolidate
// its fast bins every time), with transparent huge pages requested when `huge`.
void* map_block(bool huge) {
  const size_t span = 2 * NodeArena::kBlock;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + NodeArena::kBlock - 1) & ~(NodeArena::kBlock - 1);
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t tail = aligned + NodeArena::kBlock;
  if (start + span > tail) munmap(reinterpret_cast<void*>(tail), start + span - tail);
  void* block = reinterpret_cast<void*>(aligned);
  // Advisory only: where transparent huge pages are off this is a no-op.
  if (huge) madvise(block, NodeArena::kBlock, MADV_HUGEPAGE);
  return block;
}

}  // namespace

void* NodeArena::allocate(size_t bytes) {
  KILN_ASSERT(bytes <= kMaxObject);
  const size_t cls = size_class(bytes);
  if (num_free_.load(std::memory_order_relaxed) > 0) {
    std::lock_guard<std::mutex> lock(free_mutex_);
    if (cls < free_.size() && !free_[cls].empty()) {
      void* p = free_[cls].back();
      free_[cls].pop_back();
      num_free_.fetch_sub(1, std::memory_order_relaxed);
      KILN_ARENA_UNPOISON(p, bytes);
      return p;
    }
  }
  const size_t rounded = cls * 16;
  if (static_cast<size_t>(end_ - next_) < rounded) {
    // A graph's first block takes small pages, touched as nodes fill it: most graphs (a jitted
    // function, a part, a pattern) are small, and a huge page costs the kernel 2 MiB of zeroing,
    // about 0.1 ms, at its first touch. Later blocks are for big graphs: huge pages.
    void* block = map_block(/*huge=*/!blocks_.empty());
    KILN_ARENA_POISON(block, kBlock);
    blocks_.push_back(block);
    next_ = static_cast<char*>(block);
    end_ = next_ + kBlock;
  }
  void* p = next_;
  next_ += rounded;
  KILN_ARENA_UNPOISON(p, bytes);
  return p;
}

void NodeArena::deallocate(void* p, size_t bytes) {
  KILN_ARENA_POISON(p, bytes);
  if (orphaned_.load(std::memory_order_acquire)) return;  // nothing will be made again
  const size_t cls = size_class(bytes);
  std::lock_guard<std::mutex> lock(free_mutex_);
  if (free_.size() <= cls) free_.resize(cls + 1);
  free_[cls].push_back(p);
  num_free_.fetch_add(1, std::memory_order_relaxed);
}

void NodeArena::orphan() { orphaned_.store(true, std::memory_order_release); }

void NodeArena::release() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

}  // namespace kiln::ir
