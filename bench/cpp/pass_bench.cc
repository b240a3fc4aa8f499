// The seed's pattern pass at scale: Add(x, Neg(y)) -> Sub(x, y) (a PatternToPatternPass) on
// graphs of 4,000, 100,000 and 1,000,000 nodes, in two shapes, each reported with its fitted
// complexity to show linear growth; graph construction is timed on its own.
//
//   chrt -r 10 build/bench/pass_bench --benchmark_repetitions=5
//   --benchmark_report_aggregates_only=true
//
// Shapes (bench/pass_bench.py builds the same ones in torch.fx; every node counts, the two
// parameters and the return node included, so a graph of n nodes has (n - 3) / 2 matches):
//   wide:  out_i = Add(x, Neg(y)) for every i, each an output: independent matches.
//   chain: acc = Add(acc, Neg(y)) repeated from acc = x, one output: every match feeds the next.
// Parameters are float32[4]; each node gets its own Primitive, as graph-building code writes it.
// BM_PassRun times PatternToPatternPass::Run alone (a fresh graph per iteration, built and
// destroyed outside the timing) and checks the result once: no Add or Neg left, one Sub per match.
#include <benchmark/benchmark.h>

#include <string>

#include "kiln/ir.h"
#include "kiln/pass.h"

namespace {

class AddNegFusionPass : public kiln::PatternToPatternPass {
 public:
  AddNegFusionPass() : PatternToPatternPass("AddNegFusionPass") {}
  void DefineSrcPattern(kiln::SrcPattern* src) override {
    (*src).AddVar("x").AddVar("y")
        .AddCNode("neg", {std::make_shared<kiln::Primitive>("Neg"), "y"})
        .AddCNode("add", {std::make_shared<kiln::Primitive>("Add"), "x", "neg"});
  }
  void DefineDstPattern(kiln::DstPattern* dst) override {
    (*dst).AddCNode("sub", {std::make_shared<kiln::Primitive>("Sub"), "x", "y"}, BuildSub);
  }

 private:
  static kiln::NodePtr BuildSub(const kiln::PatternMap&, const kiln::NodePtr& node) { return node; }
};

enum Shape : int64_t { kWide = 0, kChain = 1 };

int64_t matches_for(int64_t nodes) { return (nodes - 3) / 2; }

kiln::FuncGraphPtr make_graph(Shape shape, int64_t nodes) {
  auto g = std::make_shared<kiln::FuncGraph>(shape == kWide ? "wide" : "chain");
  const kiln::NodePtr x = g->add_parameter(kiln::DType::kFloat32, {4}, "x");
  const kiln::NodePtr y = g->add_parameter(kiln::DType::kFloat32, {4}, "y");
  const int64_t k = matches_for(nodes);
  std::vector<kiln::NodePtr> outputs;
  kiln::NodePtr acc = x;
  for (int64_t i = 0; i < k; ++i) {
    kiln::NodePtr neg = g->add_cnode(std::make_shared<kiln::Primitive>("Neg"), {y});
    kiln::NodePtr add =
        g->add_cnode(std::make_shared<kiln::Primitive>("Add"), {shape == kWide ? x : acc, neg});
    if (shape == kWide) {
      outputs.push_back(std::move(add));
    } else {
      acc = std::move(add);
    }
  }
  if (shape == kWide) {
    g->set_outputs(outputs);
  } else {
    g->set_output(acc);
  }
  return g;
}

// An empty string when `g` is what the pass must make of a graph with `k` matches.
std::string check_rewritten(const kiln::FuncGraph& g, int64_t k) {
  int64_t subs = 0;
  for (const kiln::NodePtr& n : g.nodes()) {
    if (!n->is_cnode()) continue;
    const std::string& op = static_cast<const kiln::CNode&>(*n).primitive()->name();
    if (op == "Sub") ++subs;
    if (op == "Add" || op == "Neg") return "an " + op + " node is left";
  }
  if (subs != k) return std::to_string(subs) + " Sub nodes, expected " + std::to_string(k);
  kiln::ir::verify(g);
  return {};
}

void BM_GraphBuild(benchmark::State& state, Shape shape) {
  for (auto _ : state) {
    kiln::FuncGraphPtr g = make_graph(shape, state.range(0));
    benchmark::DoNotOptimize(g.get());
    state.PauseTiming();
    g.reset();
    state.ResumeTiming();
  }
  state.SetComplexityN(state.range(0));
}

void BM_PassRun(benchmark::State& state, Shape shape) {
  const int64_t nodes = state.range(0);
  AddNegFusionPass pass;
  pass.Prepare();
  bool checked = false;
  for (auto _ : state) {
    state.PauseTiming();
    kiln::FuncGraphPtr g = make_graph(shape, nodes);
    state.ResumeTiming();
    benchmark::DoNotOptimize(pass.Run(g));
    state.PauseTiming();
    if (!checked) {
      const std::string wrong = check_rewritten(*g, matches_for(nodes));
      if (!wrong.empty()) state.SkipWithError(wrong.c_str());
      checked = true;
    }
    g.reset();
    state.ResumeTiming();
  }
  state.counters["matches"] = static_cast<double>(matches_for(nodes));
  state.SetComplexityN(nodes);
}

#define KILN_PASS_BENCH(fn, name, shape) \
  BENCHMARK_CAPTURE(fn, name, shape)     \
      ->Arg(4000)                        \
      ->Arg(100000)                      \
      ->Arg(1000000)                     \
      ->Unit(benchmark::kMillisecond)    \
      ->Complexity(benchmark::oN)

KILN_PASS_BENCH(BM_GraphBuild, wide, kWide);
KILN_PASS_BENCH(BM_GraphBuild, chain, kChain);
KILN_PASS_BENCH(BM_PassRun, wide, kWide);
KILN_PASS_BENCH(BM_PassRun, chain, kChain);

}  // namespace

BENCHMARK_MAIN();
