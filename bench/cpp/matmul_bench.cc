// float32 sgemm 2048 x 2048 x 2048: kiln::matmul (oneDNN's matmul primitive behind Kiln's op
// dispatch, allocating its result) against oneDNN's own `dnnl_sgemm` on the same inputs in the
// same process. The target is kiln >= 1.0x dnnl_sgemm.
//
//   build/bench/matmul_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// BM_OneDnnImpl/M/N/K/impl times oneDNN's matmul primitive alone on [M, K] @ [K, N], with its
// first-choice implementation (impl 0: brgemm on AVX-512) or its gemm:jit one (impl 1): the
// measurement behind Note [oneDNN matmul implementation] in src/ops/gemm.cc.
//
//   build/bench/matmul_bench --benchmark_filter=OneDnnImpl --benchmark_enable_random_interleaving
//
// Counters: FLOP/s = 2 n^3 per call as a rate; items_per_second counts output elements;
// bytes_per_second counts the two inputs read plus the output written once (3 * 4 * n^2).
#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstdint>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <vector>

#include "kiln/functional/nn.h"
#include "kiln/op.h"

namespace {

constexpr int64_t kN = 2048;

kiln::Tensor random_matrix(unsigned seed, int64_t rows = kN, int64_t cols = kN) {
  kiln::Tensor t = kiln::Tensor::empty({rows, cols});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  float* p = t.data<float>();
  for (int64_t i = 0; i < rows * cols; ++i) p[i] = dist(rng);
  return t;
}

void set_counters(benchmark::State& state) {
  const double flops = 2.0 * kN * kN * kN;
  state.counters["FLOP/s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
  state.SetItemsProcessed(state.iterations() * kN * kN);
  state.SetBytesProcessed(state.iterations() * 3 * kN * kN * int64_t{sizeof(float)});
}

// What a user calls: the MatMul op through dispatch, with a freshly allocated result each time.
void BM_KilnMatmul(benchmark::State& state) {
  const kiln::Tensor a = random_matrix(1), b = random_matrix(2);
  for (auto _ : state) {
    kiln::Tensor c = kiln::matmul(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
    benchmark::ClobberMemory();
  }
  set_counters(state);
}
BENCHMARK(BM_KilnMatmul)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same op writing into a preallocated result (call_op's `out`), as dnnl_sgemm does.
void BM_KilnMatmulOut(benchmark::State& state) {
  const kiln::Tensor a = random_matrix(1), b = random_matrix(2);
  const kiln::Tensor c = kiln::Tensor::empty({kN, kN});
  const kiln::OpDefPtr op = kiln::OpRegistry::Instance().get("MatMul");
  for (auto _ : state) {
    kiln::call_op(*op, {a, b}, {}, {c});
    benchmark::DoNotOptimize(c.data_ptr());
    benchmark::ClobberMemory();
  }
  set_counters(state);
}
BENCHMARK(BM_KilnMatmulOut)->Unit(benchmark::kMillisecond)->UseRealTime();

// a @ b^T with b^T a transposed view (Linear's weight layout), passed to oneDNN as strides.
void BM_KilnMatmulTransposedB(benchmark::State& state) {
  const kiln::Tensor a = random_matrix(1), b = random_matrix(2).transpose(0, 1);
  for (auto _ : state) {
    kiln::Tensor c = kiln::matmul(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
    benchmark::ClobberMemory();
  }
  set_counters(state);
}
BENCHMARK(BM_KilnMatmulTransposedB)->Unit(benchmark::kMillisecond)->UseRealTime();

// oneDNN's BLAS-style sgemm on the same row-major inputs into a preallocated result.
void BM_DnnlSgemm(benchmark::State& state) {
  const kiln::Tensor a = random_matrix(1), b = random_matrix(2);
  std::vector<float> c(static_cast<size_t>(kN * kN));
  for (auto _ : state) {
    const dnnl_status_t status = dnnl_sgemm('N', 'N', kN, kN, kN, 1.0f, a.data<float>(), kN,
                                            b.data<float>(), kN, 0.0f, c.data(), kN);
    if (status != dnnl_success) state.SkipWithError("dnnl_sgemm failed");
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_counters(state);
}
BENCHMARK(BM_DnnlSgemm)->Unit(benchmark::kMillisecond)->UseRealTime();

// oneDNN's matmul primitive on [M, K] @ [K, N] (row-major), with the implementation oneDNN lists
// first (impl 0) or its gemm:jit one (impl 1), into a preallocated result.
void BM_OneDnnImpl(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const kiln::Tensor a = random_matrix(1, m, k), b = random_matrix(2, k, n);
  std::vector<float> c(static_cast<size_t>(m * n));
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  using tag = dnnl::memory::format_tag;
  const dnnl::memory::desc a_md({m, k}, dnnl::memory::data_type::f32, tag::ab);
  const dnnl::memory::desc b_md({k, n}, dnnl::memory::data_type::f32, tag::ab);
  const dnnl::memory::desc c_md({m, n}, dnnl::memory::data_type::f32, tag::ab);
  const dnnl::matmul::desc desc(a_md, b_md, c_md);
  dnnl::matmul::primitive_desc pd(desc, engine);
  if (state.range(3) == 1) {
    while (std::strncmp(pd.impl_info_str(), "gemm:jit", 8) != 0) {
      if (!pd.next_impl()) {
        state.SkipWithError("oneDNN offers no gemm:jit matmul here");
        return;
      }
    }
  }
  state.SetLabel(pd.impl_info_str());
  const dnnl::matmul prim(pd);
  dnnl::memory am(a_md, engine, a.data<float>());
  dnnl::memory bm(b_md, engine, b.data<float>());
  dnnl::memory cm(c_md, engine, c.data());
  for (auto _ : state) {
    prim.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    stream.wait();
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.counters["FLOP/s"] = benchmark::Counter(
      2.0 * static_cast<double>(m * n * k) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_OneDnnImpl)
    ->ArgsProduct({{2048}, {2048}, {2048}, {0, 1}})
    ->ArgsProduct({{1024}, {1024}, {1024}, {0, 1}})
    ->ArgsProduct({{512}, {512}, {512}, {0, 1}})
    ->ArgsProduct({{256}, {256}, {256}, {0, 1}})
    ->ArgsProduct({{4096}, {1024}, {1024}, {0, 1}})
    ->ArgsProduct({{64}, {2048}, {2048}, {0, 1}})
    ->ArgsProduct({{32}, {4096}, {4096}, {0, 1}})
    ->ArgsProduct({{2048}, {2048}, {64}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
