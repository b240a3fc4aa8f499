// kiln::add into a preallocated output on 16M float32, the eager op measured against the plain
// two-thread loop in memory_bench.cc (target: >= 0.95x BM_Triad/threads:2). Bytes processed are
// 3 * 4 * N per iteration, counted as memory_bench counts them. The inputs and the output are
// Kiln tensors from Kiln's allocator, pre-faulted by the pool's threads and reused across
// iterations, so each iteration is one full eager call: dispatch, infer, kernel.
//
//   add_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdint>

#include "kiln/functional.h"
#include "kiln/parallel.h"
#include "kiln/tensor.h"

namespace {

constexpr int64_t kN = int64_t{1} << 24;

/// A kN-float tensor whose pages are first touched by the threads of the intra-op pool.
kiln::Tensor filled(float value) {
  kiln::Tensor t = kiln::Tensor::empty({kN});
  float* p = t.data<float>();
  kiln::parallel_for(0, kN, 1 << 16, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) p[i] = value + static_cast<float>(i % 1000);
  });
  return t;
}

void set_bytes(benchmark::State& state) {
  state.SetBytesProcessed(state.iterations() * kN * 3 * int64_t{sizeof(float)});
}

void BM_KilnAddInto(benchmark::State& state) {
  const kiln::Tensor a = filled(0.5f);
  const kiln::Tensor b = filled(1.0f);
  const kiln::Tensor out = filled(0.0f);
  for (auto _ : state) {
    kiln::add(a, b, out);
    benchmark::DoNotOptimize(out.data_ptr());
    benchmark::ClobberMemory();
  }
  state.counters["threads"] = kiln::get_num_threads();
  set_bytes(state);
}
BENCHMARK(BM_KilnAddInto)->Unit(benchmark::kMillisecond)->UseRealTime();

// Allocating a fresh output each call adds the allocator and page faults of 64 MiB: for context.
void BM_KilnAddAllocating(benchmark::State& state) {
  const kiln::Tensor a = filled(0.5f);
  const kiln::Tensor b = filled(1.0f);
  for (auto _ : state) {
    kiln::Tensor out = kiln::add(a, b);
    benchmark::DoNotOptimize(out.data_ptr());
    benchmark::ClobberMemory();
  }
  set_bytes(state);
}
BENCHMARK(BM_KilnAddAllocating)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
