// kiln_cpu's arena planner (plan_arena): on thousands of random request lists no two requests
// live at the same step share bytes (a brute-force check) and blocks are 64-byte aligned; on
// small cases, reuse along a chain, in-place takeovers (and when they must not happen), the
// arena against the most bytes live at one step, and an empty list.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "backend/cpu/memory_planner.h"

namespace kiln::cpu {
namespace {

bool live_together(const BufferRequest& a, const BufferRequest& b) {
  return a.first_step <= b.last_step && b.first_step <= a.last_step;
}

// Whether request j took over request i's block in place (the one sharing that is allowed).
bool took_over(const std::vector<BufferRequest>& r, const ArenaPlan& plan, size_t i, size_t j) {
  return r[j].in_place_of == static_cast<int64_t>(i) && r[i].last_step == r[j].first_step &&
         plan.offsets[i] == plan.offsets[j] &&
         aligned_bytes(r[i].bytes) == aligned_bytes(r[j].bytes);
}

// The most bytes live at one step, a block taken over in place counted once.
size_t most_live_bytes(const std::vector<BufferRequest>& r, const ArenaPlan& plan) {
  uint32_t last = 0;
  for (const BufferRequest& q : r) last = std::max(last, q.last_step);
  size_t most = 0;
  for (uint32_t s = 0; s <= last && !r.empty(); ++s) {
    size_t live = 0;
    for (size_t j = 0; j < r.size(); ++j) {
      if (r[j].first_step > s || r[j].last_step < s) continue;
      const int64_t donor = r[j].in_place_of;
      const bool shared = donor >= 0 && r[j].first_step == s &&
                          took_over(r, plan, static_cast<size_t>(donor), j);
      if (!shared) live += aligned_bytes(r[j].bytes);
    }
    most = std::max(most, live);
  }
  return most;
}

// Every invariant the planner promises, checked pair by pair.
void check_plan(const std::vector<BufferRequest>& r, const ArenaPlan& plan) {
  ASSERT_EQ(plan.offsets.size(), r.size());
  size_t takeovers = 0, empty_takeovers = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(plan.offsets[i] % kArenaAlignment, 0u) << "request " << i;
    EXPECT_LE(plan.offsets[i] + aligned_bytes(r[i].bytes), plan.arena_bytes) << "request " << i;
    if (r[i].in_place_of >= 0 && took_over(r, plan, static_cast<size_t>(r[i].in_place_of), i)) {
      ++(r[i].bytes == 0 ? empty_takeovers : takeovers);
    }
    for (size_t j = i + 1; j < r.size(); ++j) {
      if (!live_together(r[i], r[j]) || r[i].bytes == 0 || r[j].bytes == 0) continue;
      if (took_over(r, plan, i, j)) continue;
      const size_t ai = plan.offsets[i], aj = plan.offsets[j];
      const bool disjoint = ai + aligned_bytes(r[i].bytes) <= aj ||
                            aj + aligned_bytes(r[j].bytes) <= ai;
      EXPECT_TRUE(disjoint) << "requests " << i << " [" << r[i].first_step << ", "
                            << r[i].last_step << "] and " << j << " [" << r[j].first_step << ", "
                            << r[j].last_step << "] share bytes at offsets " << ai << ", " << aj;
    }
  }
  // Each counted takeover is one of the pairs allowed to share; a donor serves one taker. (Two
  // empty blocks may share an offset by chance, so those only bound the count.)
  EXPECT_GE(plan.in_place, takeovers);
  EXPECT_LE(plan.in_place, takeovers + empty_takeovers);
  EXPECT_GE(plan.arena_bytes, most_live_bytes(r, plan));
}

// A random list sorted by first_step; some requests name a donor that dies where they start
// (of their size or not), some a donor that does not. A donor is always written at an earlier
// step, as in compile(), where it is an input of the step writing the taker: a donor written at
// the same step (a sibling output) would chain takeovers within one step, which the planner
// does not promise to keep apart.
std::vector<BufferRequest> random_requests(std::mt19937& rng) {
  const int n = std::uniform_int_distribution<int>(1, 40)(rng);
  std::uniform_int_distribution<size_t> size_class(0, 5);
  const size_t sizes[] = {0, 1, 64, 100, 256, 4000};
  std::vector<BufferRequest> r;
  uint32_t step = 0;
  for (int k = 0; k < n; ++k) {
    step += std::uniform_int_distribution<uint32_t>(0, 2)(rng);  // several outputs per step too
    BufferRequest q;
    q.first_step = step;
    q.last_step = step + std::uniform_int_distribution<uint32_t>(0, 6)(rng);
    q.bytes = sizes[size_class(rng)] + std::uniform_int_distribution<size_t>(0, 1)(rng) * 7;
    if (!r.empty() && std::uniform_int_distribution<int>(0, 2)(rng) > 0) {
      std::vector<size_t> dying;
      std::vector<size_t> living;
      for (size_t i = 0; i < r.size(); ++i) {
        if (r[i].first_step == step) continue;
        (r[i].last_step == step ? dying : living).push_back(i);
      }
      if (!dying.empty() && std::uniform_int_distribution<int>(0, 3)(rng) > 0) {
        const size_t donor = dying[std::uniform_int_distribution<size_t>(0, dying.size() - 1)(rng)];
        q.in_place_of = static_cast<int64_t>(donor);
        if (std::uniform_int_distribution<int>(0, 1)(rng) == 0) q.bytes = r[donor].bytes;
      } else if (!living.empty()) {
        q.in_place_of = static_cast<int64_t>(
            living[std::uniform_int_distribution<size_t>(0, living.size() - 1)(rng)]);
      }
    }
    r.push_back(q);
  }
  return r;
}

TEST(MemoryPlanner, RandomRequestsNeverShareLiveBytes) {
  size_t takeovers = 0;
  for (uint32_t seed = 1; seed <= 3000; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    const std::vector<BufferRequest> r = random_requests(rng);
    const ArenaPlan plan = plan_arena(r);
    check_plan(r, plan);
    takeovers += plan.in_place;
    if (HasFailure()) return;
  }
  EXPECT_GT(takeovers, 100u);  // the lists exercise the in-place path, not only placement
}

TEST(MemoryPlanner, OffsetsAreAligned) {
  const std::vector<BufferRequest> r = {{1, 0, 3}, {65, 0, 3}, {3, 1, 3}, {200, 2, 3}};
  const ArenaPlan plan = plan_arena(r);
  check_plan(r, plan);
  EXPECT_EQ(plan.arena_bytes, 64u + 128u + 64u + 256u);
  EXPECT_EQ(aligned_bytes(0), 0u);
  EXPECT_EQ(aligned_bytes(1), 64u);
  EXPECT_EQ(aligned_bytes(64), 64u);
  EXPECT_EQ(aligned_bytes(65), 128u);
}

TEST(MemoryPlanner, ChainReusesTwoBlocks) {
  // a -> b -> c -> d: each is written at one step and read at the next.
  const size_t bytes = 1024;
  const std::vector<BufferRequest> r = {{bytes, 0, 1}, {bytes, 1, 2}, {bytes, 2, 3}, {bytes, 3, 4}};
  const ArenaPlan plan = plan_arena(r);
  check_plan(r, plan);
  EXPECT_EQ(plan.arena_bytes, 2 * bytes);
  EXPECT_EQ(plan.arena_bytes, most_live_bytes(r, plan));
  EXPECT_EQ(plan.offsets[0], plan.offsets[2]);
  EXPECT_EQ(plan.offsets[1], plan.offsets[3]);
  EXPECT_EQ(plan.in_place, 0u);
}

TEST(MemoryPlanner, InPlaceChainUsesOneBlock) {
  const size_t bytes = 1024;
  const std::vector<BufferRequest> r = {
      {bytes, 0, 1}, {bytes, 1, 2, 0}, {bytes, 2, 3, 1}, {bytes, 3, 4, 2}};
  const ArenaPlan plan = plan_arena(r);
  check_plan(r, plan);
  EXPECT_EQ(plan.arena_bytes, bytes);
  EXPECT_EQ(plan.in_place, 3u);
  for (size_t i = 1; i < r.size(); ++i) EXPECT_EQ(plan.offsets[i], plan.offsets[0]);
}

TEST(MemoryPlanner, InPlaceTakesTheDonorsBlockWhenItDiesThere) {
  // b is written at step 1, where a is read for the last time; c is live beside both.
  const std::vector<BufferRequest> r = {{256, 0, 1}, {512, 0, 2}, {256, 1, 2, 0}};
  const ArenaPlan plan = plan_arena(r);
  check_plan(r, plan);
  EXPECT_EQ(plan.offsets[2], plan.offsets[0]);
  EXPECT_EQ(plan.in_place, 1u);
  EXPECT_EQ(plan.arena_bytes, 768u);
}

TEST(MemoryPlanner, InPlaceNotWhenTheDonorLivesOn) {
  // a is still read at step 2, after b is written at step 1.
  const std::vector<BufferRequest> r = {{256, 0, 2}, {256, 1, 3, 0}};
  const ArenaPlan plan = plan_arena(r);
  check_plan(r, plan);
  EXPECT_NE(plan.offsets[1], plan.offsets[0]);
  EXPECT_EQ(plan.in_place, 0u);
  EXPECT_EQ(plan.arena_bytes, 512u);
}

TEST(MemoryPlanner, InPlaceNotWhenSizesDiffer) {
  const std::vector<BufferRequest> r = {{256, 0, 1}, {512, 1, 2, 0}};
  const ArenaPlan plan = plan_arena(r);
  check_plan(r, plan);
  EXPECT_EQ(plan.in_place, 0u);
  EXPECT_EQ(plan.arena_bytes, 768u);  // a is still being read while b is written

  // Sizes that round to the same block do match.
  const std::vector<BufferRequest> same_block = {{10, 0, 1}, {60, 1, 2, 0}};
  const ArenaPlan shared = plan_arena(same_block);
  check_plan(same_block, shared);
  EXPECT_EQ(shared.in_place, 1u);
  EXPECT_EQ(shared.arena_bytes, 64u);
}

TEST(MemoryPlanner, OneDonorServesOneTaker) {
  const std::vector<BufferRequest> r = {{256, 0, 1}, {256, 1, 2, 0}, {256, 1, 2, 0}};
  const ArenaPlan plan = plan_arena(r);
  check_plan(r, plan);
  EXPECT_EQ(plan.in_place, 1u);
  EXPECT_NE(plan.offsets[1], plan.offsets[2]);
}

TEST(MemoryPlanner, ArenaIsTheMostLiveBytesForSimpleCases) {
  // Two values live together, then a bigger one after both died: best fit grows the free block
  // at the arena's end instead of appending.
  const std::vector<BufferRequest> r = {{256, 0, 1}, {256, 0, 1}, {1024, 2, 3}, {64, 3, 4}};
  const ArenaPlan plan = plan_arena(r);
  check_plan(r, plan);
  EXPECT_EQ(plan.arena_bytes, most_live_bytes(r, plan));
  EXPECT_EQ(plan.arena_bytes, 1024u + 64u);
}

TEST(MemoryPlanner, EmptyInput) {
  const ArenaPlan plan = plan_arena({});
  EXPECT_TRUE(plan.offsets.empty());
  EXPECT_EQ(plan.arena_bytes, 0u);
  EXPECT_EQ(plan.in_place, 0u);
}

}  // namespace
}  // namespace kiln::cpu
