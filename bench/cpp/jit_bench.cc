// The jit's costs from C++: a cached call of a 5-op function on kiln_cpu and on a backend that
// computes nothing (bench/jit/null_backend.cc: what is left is the jit's own share), the same
// five ops called eagerly, and tracing / tracing + building a 1,000-op function.
//
//   chrt -r 10 build/bench/jit_bench --benchmark_repetitions=5
//
// Inputs are float32[16]; the eager pipeline is in its default mode (kiln/runtime.h), so a call
// that runs ops only queues them: the loop's time is the steady-state cost per call.
#include <benchmark/benchmark.h>

#include "jit/compiled_graph.h"
#include "kiln/backend.h"
#include "kiln/functional.h"
#include "kiln/jit.h"
#include "kiln/runtime.h"

namespace {

std::vector<kiln::Tensor> five_ops(const std::vector<kiln::Tensor>& in) {
  const kiln::Tensor a = kiln::add(in[0], in[1]);
  const kiln::Tensor b = kiln::mul(a, in[0]);
  const kiln::Tensor c = kiln::sin(b);
  const kiln::Tensor d = kiln::sub(c, in[1]);
  return {kiln::relu(d)};
}

// 250 rounds of sin, * 1.0001, + y, - 0.5: 1,000 op nodes (and 500 constants).
std::vector<kiln::Tensor> thousand_ops(const std::vector<kiln::Tensor>& in) {
  kiln::Tensor x = in[0];
  for (int i = 0; i < 250; ++i) x = kiln::sin(x) * 1.0001 + in[1] - 0.5;
  return {x};
}

std::vector<kiln::Tensor> inputs() {
  kiln::Tensor x = kiln::Tensor::empty({16});
  kiln::Tensor y = kiln::Tensor::empty({16});
  for (int i = 0; i < 16; ++i) {
    x.data<float>()[i] = 0.1f * static_cast<float>(i);
    y.data<float>()[i] = 1.0f - 0.05f * static_cast<float>(i);
  }
  return {x, y};
}

const char* null_backend() {
  static const bool loaded = [] {
    kiln::register_custom_backend("bench_null_backend", KILN_NULL_BACKEND);
    return true;
  }();
  (void)loaded;
  return "bench_null_backend";
}

void BM_EagerFiveOps(benchmark::State& state) {
  const std::vector<kiln::Tensor> in = inputs();
  for (auto _ : state) benchmark::DoNotOptimize(five_ops(in));
  kiln::runtime::synchronize();
}

void cached_call(benchmark::State& state, const char* backend) {
  kiln::JitOptions options;
  options.backend = backend;
  kiln::JitFunction f = kiln::jit(five_ops, options, "five_ops");
  const std::vector<kiln::Tensor> in = inputs();
  f(in);
  for (auto _ : state) benchmark::DoNotOptimize(f(in));
  kiln::runtime::synchronize();
}

void BM_JitCachedCall_KilnCpu(benchmark::State& state) { cached_call(state, "kiln_cpu"); }
void BM_JitCachedCall_NullBackend(benchmark::State& state) { cached_call(state, null_backend()); }

void BM_Trace1000(benchmark::State& state) {
  const std::vector<kiln::Tensor> in = inputs();
  for (auto _ : state) benchmark::DoNotOptimize(kiln::trace(thousand_ops, in, "thousand"));
}

void BM_TraceAndBuild1000(benchmark::State& state) {
  const std::vector<kiln::Tensor> in = inputs();
  kiln::JitOptions options;
  for (auto _ : state) {
    benchmark::DoNotOptimize(kiln::jit_detail::CompiledGraph::compile(
        kiln::trace(thousand_ops, in, "thousand"), options));
  }
}

BENCHMARK(BM_EagerFiveOps);
BENCHMARK(BM_JitCachedCall_KilnCpu);
BENCHMARK(BM_JitCachedCall_NullBackend);
BENCHMARK(BM_Trace1000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TraceAndBuild1000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
