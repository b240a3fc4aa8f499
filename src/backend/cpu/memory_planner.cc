// plan_arena (see memory_planner.h).
#include "backend/cpu/memory_planner.h"

#include <algorithm>
#include <iterator>
#include <map>

#include "kiln/error.h"

namespace kiln::cpu {
namespace {

// Free blocks by offset, with their sizes; neighbours are merged as they are freed.
class FreeList {
 public:
  // The offset of the smallest free block of at least `bytes`, carved from its start; or the
  // arena's end, growing it.
  size_t take(size_t bytes, size_t* arena_end) {
    auto best = blocks_.end();
    for (auto it = blocks_.begin(); it != blocks_.end(); ++it) {
      if (it->second >= bytes && (best == blocks_.end() || it->second < best->second)) best = it;
    }
    if (best == blocks_.end()) {
      // A free block that ends at the arena's end grows instead of being skipped.
      if (!blocks_.empty()) {
        auto last = std::prev(blocks_.end());
        if (last->first + last->second == *arena_end) {
          const size_t offset = last->first;
          *arena_end = offset + bytes;
          blocks_.erase(last);
          return offset;
        }
      }
      const size_t offset = *arena_end;
      *arena_end += bytes;
      return offset;
    }
    const size_t offset = best->first;
    const size_t rest = best->second - bytes;
    blocks_.erase(best);
    if (rest > 0) blocks_.emplace(offset + bytes, rest);
    return offset;
  }

  void give_back(size_t offset, size_t bytes) {
    if (bytes == 0) return;
    auto next = blocks_.lower_bound(offset);
    if (next != blocks_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        bytes += prev->second;
        blocks_.erase(prev);
      }
    }
    if (next != blocks_.end() && offset + bytes == next->first) {
      bytes += next->second;
      blocks_.erase(next);
    }
    blocks_.emplace(offset, bytes);
  }

 private:
  std::map<size_t, size_t> blocks_;
};

}  // namespace

ArenaPlan plan_arena(const std::vector<BufferRequest>& requests) {
  ArenaPlan plan;
  plan.offsets.assign(requests.size(), 0);
  const size_t n = requests.size();
  // Which requests end at each step; a block handed to an in-place successor is not freed.
  std::vector<bool> handed_over(n, false);
  std::vector<size_t> block_bytes(n, 0);
  std::multimap<uint32_t, size_t> ending;  // last_step -> request
  FreeList free;
  size_t arena_end = 0;
  size_t next = 0;
  const auto release_through = [&](uint32_t step) {
    // Everything whose last reader ran before `step` is free for `step`'s outputs.
    while (!ending.empty() && ending.begin()->first < step) {
      const size_t r = ending.begin()->second;
      ending.erase(ending.begin());
      if (!handed_over[r]) free.give_back(plan.offsets[r], block_bytes[r]);
    }
  };
  while (next < n) {
    const uint32_t step = requests[next].first_step;
    release_through(step);
    for (; next < n && requests[next].first_step == step; ++next) {
      const BufferRequest& req = requests[next];
      KILN_ASSERT(req.last_step >= req.first_step && (next == 0 ||
                                                      requests[next - 1].first_step <= step))
          << "plan_arena: request " << next << " is out of order";
      const size_t bytes = aligned_bytes(req.bytes);
      const int64_t donor = req.in_place_of;
      if (donor >= 0 && static_cast<size_t>(donor) < next && !handed_over[donor] &&
          requests[donor].last_step == step && block_bytes[donor] == bytes) {
        plan.offsets[next] = plan.offsets[donor];
        handed_over[donor] = true;
        ++plan.in_place;
      } else {
        plan.offsets[next] = free.take(bytes, &arena_end);
      }
      block_bytes[next] = bytes;
      ending.emplace(req.last_step, next);
    }
  }
  plan.arena_bytes = arena_end;
  return plan;
}

}  // namespace kiln::cpu
