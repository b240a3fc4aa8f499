// Static memory planning for kiln_cpu (private to libkiln; KILN_API for the tests): every
// intermediate value of a built graph gets an offset in one arena, allocated once per run, so that
// values whose lifetimes do not overlap share memory and a run allocates nothing per node.
//
//   std::vector<kiln::cpu::BufferRequest> requests = ...;   // one per value, in step order
//   kiln::cpu::ArenaPlan plan = kiln::cpu::plan_arena(requests);
//   // value v lives at plan.offsets[v] .. + requests[v].bytes; the arena is plan.arena_bytes
//
// A request is live from the step that writes it to its last reading step, both included (a
// step's outputs never share memory with the inputs it is still reading), unless it names an
// `in_place_of` request that dies at its first step: then it takes over that request's block, for
// elementwise kernels that may write over an input exactly. Blocks are 64-byte aligned (whole
// cache lines: two values never share one, and SIMD loads start aligned). Placement is best fit
// among the free blocks, merging neighbours, with the arena's end as the last resort; this is the
// classic greedy that TFLite's and XLA's "simple" planners use, linear in the number of values
// times the free list's length.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kiln/export.h"

namespace kiln::cpu {

inline constexpr size_t kArenaAlignment = 64;

struct BufferRequest {
  size_t bytes = 0;
  uint32_t first_step = 0;  // the step that writes it
  uint32_t last_step = 0;   // the last step that reads it (>= first_step)
  /// Another request whose block this one may take over (its last_step must be this one's
  /// first_step, and it must have been written at an earlier step: a donor is an input of the
  /// step, never another output of it); -1 for none.
  int64_t in_place_of = -1;
};

struct ArenaPlan {
  std::vector<size_t> offsets;  // per request
  size_t arena_bytes = 0;       // the high-water mark
  size_t in_place = 0;          // requests that took over their in_place_of block
};

/// Places `requests`; they must be sorted by first_step.
KILN_API ArenaPlan plan_arena(const std::vector<BufferRequest>& requests);

/// `bytes` rounded up to kArenaAlignment.
inline size_t aligned_bytes(size_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

}  // namespace kiln::cpu
