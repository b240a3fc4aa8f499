// The caching allocator as the runtime installs it, through its public counters:
// memory_stats(), empty_cache() and reset_peak_memory_stats() (Note [Size classes] in
// src/runtime/caching_allocator.cc).

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kiln/functional.h"
#include "runtime_testing.h"
#include "testing.h"

namespace kiln {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Counters once no queued op holds memory any more.
runtime::MemoryStats settled_stats() {
  runtime::synchronize();
  return runtime::memory_stats();
}

// A float32 tensor over a block of `nbytes` bytes from the CPU allocator (on this thread, past the
// pipeline). Storage::allocate, because a tensor of at most Storage::kInlineBytes made any other
// way keeps its memory inside its Storage; the block goes back when the tensor dies.
Tensor block_of(size_t nbytes) {
  std::shared_ptr<Storage> block = Storage::allocate(nbytes);
  return Tensor::from_blob(block->data(), {static_cast<int64_t>(nbytes / 4)}, DType::kFloat32, {},
                           [block](void*) mutable { block.reset(); });
}

TEST(CachingAllocator, FollowsABlockThroughItsLife) {
  runtime::synchronize();
  runtime::empty_cache();
  const runtime::MemoryStats start = settled_stats();
  EXPECT_EQ(start.cached, 0u);
  Tensor t = block_of(4000);  // rounds up to its size class: 4096 bytes
  const void* memory = t.data_ptr();
  const runtime::MemoryStats held = runtime::memory_stats();
  EXPECT_EQ(held.allocated - start.allocated, 4096u);
  EXPECT_EQ(held.num_allocs - start.num_allocs, 1u);
  EXPECT_EQ(held.num_os_allocs - start.num_os_allocs, 1u);  // nothing was cached
  EXPECT_GE(held.peak, held.allocated);

  t = Tensor();  // freed into the cache, not to the system
  const runtime::MemoryStats freed = runtime::memory_stats();
  EXPECT_EQ(freed.allocated, start.allocated);
  EXPECT_EQ(freed.cached, 4096u);

  t = block_of(3900);  // same size class: the cached block comes back
  EXPECT_EQ(t.data_ptr(), memory);
  const runtime::MemoryStats reused = runtime::memory_stats();
  EXPECT_EQ(reused.num_os_allocs, held.num_os_allocs);
  EXPECT_EQ(reused.num_allocs - held.num_allocs, 1u);
  EXPECT_EQ(reused.cached, 0u);

  t = Tensor();
  runtime::empty_cache();
  EXPECT_EQ(runtime::memory_stats().cached, 0u);
  t = block_of(4000);  // after empty_cache the system is asked again
  EXPECT_EQ(runtime::memory_stats().num_os_allocs - reused.num_os_allocs, 1u);
}

TEST(CachingAllocator, ReusesOnlyBlocksOfTheSameSizeClass) {
  runtime::synchronize();
  runtime::empty_cache();
  Tensor small = block_of(4000);
  const void* memory = small.data_ptr();
  small = Tensor();
  const Tensor larger = block_of(8000);  // another class: not served by the 4096-byte block
  EXPECT_NE(larger.data_ptr(), memory);
  EXPECT_EQ(runtime::memory_stats().cached, 4096u);
}

TEST(CachingAllocator, EverySizeClassKeepsItsOwnBlocks) {
  // Every block size below a huge page, as Note [Size classes] gives them: 64, 128, 192, 256, then
  // four steps per power of two up to 1.75 MiB. One block of each (asked for with its class's
  // smallest request), freed together, then asked for again in reverse order: each request must
  // get a block of its own class back from the cache.
  std::vector<size_t> classes = {64, 128, 192, 256};
  for (size_t below = 256; below < kMiB * 2; below *= 2) {
    for (size_t step = 1; step <= 4 && below + step * below / 4 < 2 * kMiB; ++step) {
      classes.push_back(below + step * below / 4);
    }
  }
  ASSERT_EQ(classes.size(), 55u);
  runtime::synchronize();
  runtime::empty_cache();
  std::vector<Tensor> blocks;
  std::vector<const void*> memory;
  size_t total = 0;
  size_t previous = 0;
  for (size_t size : classes) {
    blocks.push_back(block_of(previous + 4));
    memory.push_back(blocks.back().data_ptr());
    total += size;
    previous = size;
  }
  blocks.clear();
  const runtime::MemoryStats cached = runtime::memory_stats();
  EXPECT_EQ(cached.cached, total);
  for (size_t i = classes.size(); i-- > 0;) {
    blocks.push_back(block_of(i == 0 ? 4 : classes[i - 1] + 4));
    EXPECT_EQ(blocks.back().data_ptr(), memory[i]) << "class of " << classes[i] << " bytes";
  }
  EXPECT_EQ(runtime::memory_stats().num_os_allocs, cached.num_os_allocs);
  EXPECT_EQ(runtime::memory_stats().cached, 0u);
  blocks.clear();
  runtime::empty_cache();
  EXPECT_EQ(runtime::memory_stats().cached, 0u);
}

TEST(CachingAllocator, LargeBlockServesASomewhatSmallerRequest) {
  // From 2 MiB up, requests round to whole huge pages and may take a cached block up to 1.25x
  // their size, so a shape that changes a little still hits the cache.
  runtime::synchronize();
  runtime::empty_cache();
  Tensor t = block_of(10 * kMiB);
  const void* memory = t.data_ptr();
  t = Tensor();
  const runtime::MemoryStats before = runtime::memory_stats();
  t = block_of(8 * kMiB);
  EXPECT_EQ(t.data_ptr(), memory);
  EXPECT_EQ(runtime::memory_stats().allocated - before.allocated, 10 * kMiB);
  EXPECT_EQ(runtime::memory_stats().num_os_allocs, before.num_os_allocs);
  t = Tensor();
  EXPECT_EQ(runtime::memory_stats().cached, 10 * kMiB);  // the whole block comes back
  const Tensor smaller = block_of(6 * kMiB);             // 10 MiB is more than 1.25x: no reuse
  EXPECT_NE(smaller.data_ptr(), memory);
}

TEST(CachingAllocator, EveryBlockIs64ByteAligned) {
  std::vector<Tensor> blocks;
  for (size_t nbytes : {size_t{4}, size_t{60}, size_t{68}, size_t{260}, size_t{1000}, size_t{4100},
                        size_t{70000}, 2 * kMiB + 4, 3 * kMiB}) {
    blocks.push_back(block_of(nbytes));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(blocks.back().data_ptr()) % kAlignment, 0u) << nbytes;
  }
}

TEST(CachingAllocator, PeakRisesWithAllocationsAndResets) {
  runtime::synchronize();
  runtime::reset_peak_memory_stats();
  const runtime::MemoryStats start = runtime::memory_stats();
  EXPECT_EQ(start.peak, start.allocated);
  {
    const Tensor big = block_of(4 * kMiB);
    EXPECT_EQ(runtime::memory_stats().peak, start.allocated + 4 * kMiB);
  }
  EXPECT_EQ(runtime::memory_stats().allocated, start.allocated);
  EXPECT_EQ(runtime::memory_stats().peak, start.allocated + 4 * kMiB);  // the peak stays
  runtime::reset_peak_memory_stats();
  EXPECT_EQ(runtime::memory_stats().peak, start.allocated);
}

class CachingAllocatorPipeline : public ::testing::TestWithParam<testing::PipelineMode> {};

TEST_P(CachingAllocatorPipeline, OpResultsAreCounted_AndALoopStopsAskingTheSystem) {
  testing::Watchdog watchdog("CachingAllocatorPipeline");
  testing::ScopedPipeline pipeline(GetParam());
  const Tensor x = testing::iota({64, 64});
  const runtime::MemoryStats start = settled_stats();
  Tensor y = matmul(x, x) + 1.0;
  runtime::synchronize();
  // y (16 KiB) is held; matmul's result went back to the cache when the Add ran.
  EXPECT_EQ(runtime::memory_stats().allocated - start.allocated, 16384u);
  // A loop over the same shapes reuses blocks: after a warm-up, (almost) no new system memory.
  // How many blocks are live at once depends on how far the DeviceTask ran ahead, so a few new
  // ones may still come; synchronizing every iteration bounds it.
  for (int i = 0; i < 20; ++i) {
    y = tanh(matmul(y, x) * 1e-6);
    runtime::synchronize();
  }
  const runtime::MemoryStats warm = runtime::memory_stats();
  for (int i = 0; i < 200; ++i) {
    y = tanh(matmul(y, x) * 1e-6);
    runtime::synchronize();
  }
  const runtime::MemoryStats after = runtime::memory_stats();
  EXPECT_LE(after.num_os_allocs - warm.num_os_allocs, 4u);
  EXPECT_GE(after.num_allocs - warm.num_allocs, 600u);  // three results per iteration
  EXPECT_EQ(after.allocated, warm.allocated);
}

TEST_P(CachingAllocatorPipeline, EmptyCacheWithWorkQueued_KeepsMemoryInUse) {
  testing::Watchdog watchdog("CachingAllocatorPipeline");
  testing::ScopedPipeline pipeline(GetParam());
  runtime::synchronize();
  const Tensor x = testing::iota({1000});
  Tensor t = x;
  for (int i = 0; i < 500; ++i) {
    t = t + 1.0;
    if (i % 50 == 0) runtime::empty_cache();  // frees cached blocks only, never one in use
  }
  const std::vector<float> got = testing::floats(t);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(got[i], static_cast<float>(i) + 500.0f);
  runtime::empty_cache();
  EXPECT_EQ(runtime::memory_stats().cached, 0u);
}

TEST_P(CachingAllocatorPipeline, ResultsOfAtMostKInlineBytes_LiveInTheirStorage) {
  testing::Watchdog watchdog("CachingAllocatorPipeline");
  testing::ScopedPipeline pipeline(GetParam());
  const Tensor x = testing::iota({16});  // 64 bytes: the most a Storage keeps inside itself
  const Tensor big = testing::iota({17});
  const runtime::MemoryStats start = settled_stats();
  Tensor y = x;
  for (int i = 0; i < 10; ++i) y = y * 2.0 + 1.0;
  const Tensor z = big + 1.0;
  runtime::synchronize();
  const runtime::MemoryStats after = runtime::memory_stats();
  EXPECT_EQ(after.num_allocs - start.num_allocs, 1u);  // z's block only
  EXPECT_EQ(after.allocated - start.allocated, 128u);  // z: 68 bytes, a 128-byte block
  const std::shared_ptr<Storage>& storage = y.storage();
  const auto* inside = reinterpret_cast<const char*>(storage.get());
  const auto* data = static_cast<const char*>(storage->data());
  EXPECT_TRUE(data >= inside && data + Storage::kInlineBytes <= inside + sizeof(Storage));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % 16, 0u);
  EXPECT_TRUE(storage->owns_memory());
  const std::vector<float> got = testing::floats(y);
  for (int i = 0; i < 16; ++i) ASSERT_EQ(got[i], static_cast<float>(i) * 1024.0f + 1023.0f);
  EXPECT_EQ(testing::floats(z)[16], 17.0f);
}

INSTANTIATE_TEST_SUITE_P(AllModes, CachingAllocatorPipeline,
                         ::testing::ValuesIn(testing::all_modes()), testing::mode_param_name);

}  // namespace
}  // namespace kiln
