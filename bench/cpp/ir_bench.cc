// Graph IR at scale: building, printing, parsing, verifying and topologically sorting graphs of
// 10k, 100k and 1M nodes (each reported with its fitted complexity, to show linear growth).
//
//   chrt -r 10 build/bench/ir_bench --benchmark_repetitions=5
//   --benchmark_report_aggregates_only=true
//
// The graph is a long dependency chain over two parameters (float32[64, 64] and float32[64]) that
// cycles through Neg, Add (broadcasting the second parameter), Mul (of the last two nodes), Exp,
// and every 16th node a Softmax with an attribute; each node gets its own Primitive, as code that
// builds graphs with std::make_shared<kiln::Primitive>(...) does.
#include <benchmark/benchmark.h>

#include "kiln/ir.h"

namespace {

kiln::FuncGraphPtr make_graph(int64_t n) {
  auto g = std::make_shared<kiln::FuncGraph>("bench");
  kiln::NodePtr y = g->add_parameter(kiln::DType::kFloat32, {64}, "y");
  kiln::NodePtr prev2 = g->add_parameter(kiln::DType::kFloat32, {64, 64}, "x");
  kiln::NodePtr prev = prev2;
  for (int64_t i = 0; i < n; ++i) {
    kiln::NodePtr next;
    if (i % 16 == 15) {
      next = g->add_cnode(
          std::make_shared<kiln::Primitive>("Softmax", kiln::Attrs{{"dim", int64_t{-1}}}), {prev});
    } else {
      switch (i % 4) {
        case 0: next = g->add_cnode(std::make_shared<kiln::Primitive>("Neg"), {prev}); break;
        case 1: next = g->add_cnode(std::make_shared<kiln::Primitive>("Add"), {prev, y}); break;
        case 2: next = g->add_cnode(std::make_shared<kiln::Primitive>("Mul"), {prev, prev2}); break;
        default: next = g->add_cnode(std::make_shared<kiln::Primitive>("Exp"), {prev}); break;
      }
    }
    prev2 = prev;
    prev = next;
  }
  g->set_output(prev);
  return g;
}

void BM_IrBuild(benchmark::State& state) {
  for (auto _ : state) {
    kiln::FuncGraphPtr g = make_graph(state.range(0));
    benchmark::DoNotOptimize(g.get());
    state.PauseTiming();
    g.reset();
    state.ResumeTiming();
  }
  state.SetComplexityN(state.range(0));
}

void BM_IrDestroy(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    kiln::FuncGraphPtr g = make_graph(state.range(0));
    state.ResumeTiming();
    g.reset();
  }
  state.SetComplexityN(state.range(0));
}

void BM_IrPrint(benchmark::State& state) {
  const kiln::FuncGraphPtr g = make_graph(state.range(0));
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string text = kiln::ir::print(*g);
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.counters["text_MB"] = static_cast<double>(bytes) / 1e6;
  state.SetComplexityN(state.range(0));
}

void BM_IrParse(benchmark::State& state) {
  const std::string text = kiln::ir::print(*make_graph(state.range(0)));
  for (auto _ : state) {
    kiln::FuncGraphPtr g = kiln::ir::parse(text);
    benchmark::DoNotOptimize(g.get());
    state.PauseTiming();
    g.reset();
    state.ResumeTiming();
  }
  state.SetComplexityN(state.range(0));
}

void BM_IrVerify(benchmark::State& state) {
  const kiln::FuncGraphPtr g = make_graph(state.range(0));
  for (auto _ : state) kiln::ir::verify(*g);
  state.SetComplexityN(state.range(0));
}

void BM_IrTopoSort(benchmark::State& state) {
  const kiln::FuncGraphPtr g = make_graph(state.range(0));
  for (auto _ : state) {
    std::vector<kiln::NodePtr> order = g->topological_order();
    benchmark::DoNotOptimize(order.data());
  }
  state.SetComplexityN(state.range(0));
}

#define KILN_IR_BENCH(fn)             \
  BENCHMARK(fn)                       \
      ->Arg(10000)                    \
      ->Arg(100000)                   \
      ->Arg(1000000)                  \
      ->Unit(benchmark::kMillisecond) \
      ->Complexity(benchmark::oN)

KILN_IR_BENCH(BM_IrBuild);
KILN_IR_BENCH(BM_IrDestroy);
KILN_IR_BENCH(BM_IrPrint);
KILN_IR_BENCH(BM_IrParse);
KILN_IR_BENCH(BM_IrVerify);
KILN_IR_BENCH(BM_IrTopoSort);

}  // namespace

BENCHMARK_MAIN();
