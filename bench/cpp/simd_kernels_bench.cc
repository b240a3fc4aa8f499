// Single-threaded throughput of the contiguous SIMD kernels (src/ops/simd/float_kernels.h) on
// 16M float32 elements (64 MiB per operand: far out of cache, so the memory-bound kernels report
// DRAM bandwidth). Bytes processed count every operand read plus the output written; times are
// wall-clock (UseRealTime), the honest number on a shared machine.
//
//   simd_kernels_bench --benchmark_filter=Unary
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "ops/simd/float_kernels.h"

namespace {

using kiln::simd::BinaryOp;
using kiln::simd::UnaryOp;

constexpr int64_t kN = int64_t{1} << 24;

std::vector<float> random_floats(float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(kN));
  for (float& e : v) e = dist(rng);
  return v;
}

void set_bytes(benchmark::State& state, int operands) {
  state.SetBytesProcessed(state.iterations() * kN * operands * int64_t{sizeof(float)});
}

void BM_Unary(benchmark::State& state, UnaryOp op) {
  const std::vector<float> x = random_floats(-8, 8, 1);
  std::vector<float> y(x.size());
  for (auto _ : state) {
    kiln::simd::unary(op, x.data(), y.data(), kN);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, 2);
}
BENCHMARK_CAPTURE(BM_Unary, exp, UnaryOp::kExp)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Unary, gelu_erf, UnaryOp::kGeluErf)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Unary, gelu_tanh, UnaryOp::kGeluTanh)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Unary, tanh, UnaryOp::kTanh)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_BinaryAdd(benchmark::State& state) {
  const std::vector<float> a = random_floats(-1, 1, 2);
  const std::vector<float> b = random_floats(-1, 1, 3);
  std::vector<float> y(a.size());
  for (auto _ : state) {
    kiln::simd::binary(BinaryOp::kAdd, a.data(), b.data(), y.data(), kN);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, 3);
}
BENCHMARK(BM_BinaryAdd)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ReduceSum(benchmark::State& state) {
  const std::vector<float> x = random_floats(0, 1, 4);
  for (auto _ : state) benchmark::DoNotOptimize(kiln::simd::reduce_sum(x.data(), kN));
  set_bytes(state, 1);
}
BENCHMARK(BM_ReduceSum)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SoftmaxRow(benchmark::State& state) {
  const std::vector<float> x = random_floats(-8, 8, 5);
  std::vector<float> y(x.size());
  for (auto _ : state) {
    kiln::simd::softmax_row(x.data(), y.data(), kN);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, 2);
}
BENCHMARK(BM_SoftmaxRow)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
