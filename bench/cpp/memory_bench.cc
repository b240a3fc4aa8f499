// Memory bandwidth reference for elementwise ops: the plain C++ loop c[i] = a[i] + b[i] over 16M
// float32 (64 MiB per operand: far out of L1/L2, though a large shared L3 may hold part of the
// 192 MiB), the number that kiln::add into a preallocated output is held to (add_bench.cc;
// target >= 0.95x the two-thread loop). The loop is compiled with the build's flags (no -march),
// as user code would be. Bytes processed are 3 * 4 * N per iteration: two operands read, one
// written (write-allocate traffic is not counted, as STREAM does not). Buffers are pre-faulted by
// the threads that use them and reused across iterations.
//
//   memory_bench --benchmark_filter=Triad/threads:2 --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>

#include "kiln/parallel.h"

namespace {

constexpr int64_t kN = int64_t{1} << 24;

/// Three kN-float buffers, each written once by the thread that later works on its part.
struct Buffers {
  std::unique_ptr<float[]> a{new float[kN]};
  std::unique_ptr<float[]> b{new float[kN]};
  std::unique_ptr<float[]> c{new float[kN]};

  explicit Buffers(int threads) {
    float* pa = a.get();
    float* pb = b.get();
    float* pc = c.get();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < kN; ++i) {
      pa[i] = static_cast<float>(i % 1000) * 0.5f;
      pb[i] = 1.0f;
      pc[i] = 0.0f;
    }
  }
};

void set_bytes(benchmark::State& state) {
  state.SetBytesProcessed(state.iterations() * kN * 3 * int64_t{sizeof(float)});
}

// The reference loop: OpenMP static schedule over range(0) threads.
void BM_Triad(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  Buffers buf(threads);
  const float* a = buf.a.get();
  const float* b = buf.b.get();
  float* c = buf.c.get();
  for (auto _ : state) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < kN; ++i) c[i] = a[i] + b[i];
    benchmark::DoNotOptimize(c);
    benchmark::ClobberMemory();
  }
  set_bytes(state);
}
BENCHMARK(BM_Triad)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The same loop through kiln::parallel_for (Kiln's intra-op pool): the gap to BM_Triad/threads:2
// is what the pool and its std::function call cost.
void BM_TriadKilnParallelFor(benchmark::State& state) {
  const int threads = kiln::get_num_threads();
  Buffers buf(threads);
  const float* a = buf.a.get();
  const float* b = buf.b.get();
  float* c = buf.c.get();
  for (auto _ : state) {
    kiln::parallel_for(0, kN, 32768, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) c[i] = a[i] + b[i];
    });
    benchmark::DoNotOptimize(c);
    benchmark::ClobberMemory();
  }
  state.counters["threads"] = threads;
  set_bytes(state);
}
BENCHMARK(BM_TriadKilnParallelFor)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
