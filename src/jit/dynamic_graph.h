// DynamicGraph: what a dynamic function (JitOptions::dynamic) keeps for one batched signature — a
// built graph per batch size, made from a template of the traced graph so that only the first
// three batch sizes trace the function (private to libkiln, the Python bindings and the tests).
//
//   kiln::jit_detail::SignatureKey key;
//   key.set_dynamic();
//   for (const kiln::Tensor& t : inputs) key.add_input(t);
//   kiln::jit_detail::Lookup found = kiln::jit_detail::lookup(cache, key, options, [&] {
//     return kiln::jit_detail::Traced{kiln::trace(fn, inputs), nullptr};
//   });
//   found.graph->run(params, &outputs);
//
// See Note [Dynamic batch size] in dynamic_graph.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "jit/compiled_graph.h"
#include "jit/graph_cache.h"
#include "kiln/ir.h"
#include "kiln/jit.h"

namespace kiln::jit_detail {

/// What a front end's trace of one call gives: the graph, and the front end's own data (the
/// Python bindings' output tree; may be null).
struct Traced {
  FuncGraphPtr graph;
  std::shared_ptr<void> front_end;
  bool size_decisions = false;  // Trace::size_decisions(): a dynamic graph traces each batch size
};

class KILN_API DynamicGraph {
 public:
  /// `first`: the graph traced at batch size `batch`, unoptimized (kept as the template; not
  /// changed); `batched`: per parameter of `first`, whether its leading dimension is the batch
  /// size.
  DynamicGraph(FuncGraphPtr first, int64_t batch, std::vector<bool> batched, JitOptions options);
  DynamicGraph(const DynamicGraph&) = delete;
  DynamicGraph& operator=(const DynamicGraph&) = delete;
  ~DynamicGraph();

  /// The graph built for `batch`, or null.
  std::shared_ptr<CompiledGraph> find(int64_t batch) const;
  /// True once learn() succeeded: every batch size can be built (without tracing, unless
  /// traces_each_batch()).
  bool learned() const;
  /// True once verify() confirmed the template learned from two traces against a third.
  bool verified() const;
  /// True once a trace noted a decision from a size (Traced::size_decisions), or learn() found a
  /// view that takes part of the batch dimension at a place or size that follows the batch size
  /// (x[::2], a chunk of it): neither is linear in the batch size, and two traces cannot always
  /// tell, so every batch size is traced and its trace built.
  bool traces_each_batch() const;
  /// Makes traces_each_batch() true.
  void trace_each_batch();
  /// Compares the first trace with `second`, traced at another batch size, and keeps how each
  /// integer attribute and dimension changes with the batch size. Throws kValue, naming the node
  /// and what differs, when the graphs differ otherwise or a value is not linear in the batch
  /// size with an integer slope. Keeps the first template learned when threads race.
  void learn(const FuncGraph& second, int64_t batch);
  /// After learn(): compares the first trace with `third`, traced at a third batch size, as learn()
  /// does, and checks that every integer attribute and dimension lies on the line learned from the
  /// first two (B * B is linear through any two batch sizes, not three). Throws kValue naming the
  /// node where it does not; makes traces_each_batch() true where the third trace shows a piece of
  /// the batch dimension.
  void verify(const FuncGraph& third, int64_t batch);
  /// A new graph for `batch`: the first trace with the batch size substituted. Before learn(),
  /// only the first batch size. Throws kValue naming a node whose shape does not follow.
  FuncGraphPtr instantiate(int64_t batch) const;
  /// `traced` (a trace at `batch`), or else instantiate(batch), through the jit pipeline
  /// (CompiledGraph::compile), kept for find().
  std::shared_ptr<CompiledGraph> build(int64_t batch, FuncGraphPtr traced = nullptr);
  /// The number of built graphs.
  size_t size() const;

 private:
  struct Template;
  std::shared_ptr<const Template> template_snapshot() const;
  // The first trace compared with `other`, traced at `batch` (learn's comparison).
  std::shared_ptr<Template> compare(const FuncGraph& other, int64_t batch) const;

  FuncGraphPtr first_;
  int64_t first_batch_;
  std::vector<bool> batched_;
  JitOptions options_;
  std::shared_ptr<const Template> base_;  // the first trace with no batch dependence learned
  mutable std::mutex mutex_;
  std::shared_ptr<const Template> learned_;
  bool verified_ = false;
  bool traces_each_batch_ = false;
  std::map<int64_t, std::shared_ptr<CompiledGraph>> built_;
};

/// A found or built graph for a call.
struct Lookup {
  std::shared_ptr<const CacheEntry> entry;  // its front_end is the first trace's
  std::shared_ptr<CompiledGraph> graph;     // the graph to run
  bool built = false;                       // this call built `graph`
};

/// The graph for a call whose signature is `key`: from `cache` (a hit), or built (a miss)
/// from trace(), which traces the function on the call's inputs. A dynamic key (batch() >= 0)
/// finds or makes its DynamicGraph: the first batch size traces and builds; the second traces
/// again, calls check_front_end(first, second) on the two traces' front-end data (when given; it
/// throws kValue when they differ) and learns the template; every later batch size is built from
/// the template without tracing (traced, and checked the same way, when traces_each_batch()). Locks
/// are never held while trace() runs. trace() may append words to `key` (state that the trace
/// found the function reads, such as kiln.jit's training flags of cells): a miss's entry is stored
/// under the key as trace() leaves it.
KILN_API Lookup
lookup(GraphCache& cache, SignatureKey& key, const JitOptions& options,
       const std::function<Traced()>& trace,
       const std::function<void(const void* first, const void* second)>& check_front_end = {});

}  // namespace kiln::jit_detail
