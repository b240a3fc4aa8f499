// The jit: turns a function of tensors into a graph that a backend builds once and runs on every
// later call with inputs of the same dtypes and shapes.
//
//   #include <kiln/jit.h>
//   kiln::JitOptions options;
//   options.backend = "kiln_cpu";                       // any registered backend (kiln/backend.h)
//   kiln::JitFunction f = kiln::jit(
//       [](const std::vector<kiln::Tensor>& in) {
//         return std::vector<kiln::Tensor>{kiln::sin(in[0]) + in[1] * 2.0};
//       },
//       options, "f");
//   std::vector<kiln::Tensor> out = f({x, y});         // traced, built, run
//   out = f({x2, y2});                                  // same dtypes and shapes: runs the build
//   std::string ir = f.graph({x, y});                   // the traced graph as IR text
//
// Tracing runs the function once per new input signature (with JitOptions::dynamic, at most three
// times for all the batch sizes of one signature), on *tracers*: tensors with a dtype and
// a shape but no data. Every op it calls (kiln::sin, an operator, a custom op registered with
// m.def_op) becomes a node of a kiln::FuncGraph instead of running. Reading a tracer's data
// (data<T>(), or item()/numpy()/float() in Python) throws kiln::Error (kType): values exist only
// when the graph runs, so control flow that depends on them cannot be traced; kiln::where selects
// between values instead. Views made with Tensor's methods (transpose, slice, select) are recorded
// as Reshape, Permute or AsStrided nodes. Tensors the function reads from elsewhere (weights) are
// constants of the graph: it sees in-place updates of them, not a new tensor put in their place
// (clear_cache() then). Inputs that are weak scalars (kiln::Tensor::scalar, Python numbers) and
// undefined tensors are constants too, and part of the cache key. A custom op that runs an
// OpRunner cannot be traced (the error says to register it with m.def_op). A jitted function
// called while another is being traced runs inline, as part of the outer graph.
//
// The pipeline after tracing: ir::verify; the passes registered for the backend (kiln/pass.h;
// register_custom_pass and register_pass below; at jit_level "O1" and "O2" also the built-in
// ones: constant folding, algebraic simplification, CSE, dead-code elimination, and kiln_cpu's
// matmul-epilogue and elementwise fusion), stage by stage,
// checked after each one in debug mode; partitioning, when the backend's Supports declines nodes
// (those parts run on "kiln_cpu"); BackendManager::Build of each part. kiln::verify_pass
// (kiln/verify_pass.h) checks a registered pattern pass on random instances of its source
// pattern. Dumps (JitOptions::dump_ir or $KILN_DUMP_IR): the graph after tracing, before and after
// each pass that changed it (changed nodes highlighted), and each graph handed to a backend, as
// .kir text, .dot and .svg (when Graphviz is installed; dot gets 20 s per graph), named
// "<graph>.<compilation>.<step>_<what>"; "<graph>.<compilation>.html", a self-contained page that
// steps through them (prev/next, arrow keys, the list of steps with each pass's stage, matches
// and time), and index.html, which lists the folder's compilations. With no folder nothing is
// written and the pipeline does no dump work.
//
// Thread-safety: a JitFunction may be called from several threads at once (its cache is locked;
// two threads missing on one signature may both build it); the callable must allow that too.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/backend.h"
#include "kiln/export.h"
#include "kiln/ir.h"
#include "kiln/pass.h"
#include "kiln/tensor.h"

namespace kiln {

namespace jit_detail {
class CompiledGraph;
struct Writes;
}  // namespace jit_detail

/// How a function is compiled: what @kiln.jit takes in Python.
struct JitOptions {
  /// A registered backend (kiln::list_backends()); an unknown name fails at the first call, with
  /// the registered names.
  std::string backend = "kiln_cpu";
  /// "O0", "O1" or "O2"; passed to the backend (BackendJitConfig::jit_level).
  std::string jit_level = "O1";
  /// "trace", the only mode.
  std::string capture_mode = "trace";
  /// Graphs generic in the batch size. false: each new input shape is traced and built. true:
  /// the leading dimension of the first tensor input that has a dimension is the batch size B,
  /// and every tensor input whose leading dimension is B is batched (the others keep their
  /// shapes in the cache key); calls that differ only in B share one cache entry. The function
  /// is traced at the first three batch sizes only, and the graphs compared: they must differ
  /// only in integer attributes and dimensions that are linear in B (a Reshape to [B * 128, 256]
  /// is). Every later batch size is made from that template without calling the function, then
  /// optimized and built for that B (for kiln_cpu, Build is kernel selection and a memory plan),
  /// so each batch size is still a build and a miss in cache_info(). A graph that depends on B
  /// otherwise (a constant or a Python number computed from B, a shape from data, B * B) fails
  /// with kValue naming the node, at the second or third batch size or when a later one does not
  /// fit; use dynamic = false for such a function. One that calls note_size_decision() is traced
  /// at every batch size.
  bool dynamic = false;
  /// Kiln always captures the whole function or fails (no graph breaks), so true and false
  /// behave alike.
  bool fullgraph = false;
  /// A folder for IR dumps; empty: $KILN_DUMP_IR when set, else no dumps.
  std::string dump_ir;
  /// Debug mode: ir::verify after every pass, naming the pass that broke the graph. Also on
  /// when $KILN_DEBUG is set (and not "0").
  bool debug = false;
  /// Extra options for the backend (BackendJitConfig::options); the built-in backends take none.
  std::map<std::string, std::string> options;
};

/// Checks `options` (backend, capture_mode, jit_level, and no options for a built-in backend);
/// throws kValue.
KILN_API void validate(const JitOptions& options);

/// A function from tensors to tensors, as the jit traces it.
using TensorFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// Counters of a jitted function's cache of built graphs.
struct JitCacheInfo {
  uint64_t hits = 0;    // calls that ran a graph built before
  uint64_t misses = 0;  // calls that traced and built a graph
  size_t size = 0;      // built graphs kept now
};

/// A jitted function: `fn` plus its cache of built graphs, keyed by the inputs' dtypes and
/// shapes, the values of constant inputs and the default floating dtype (kiln/dtype.h; a trace
/// bakes it in), with backend and options fixed per JitFunction.
/// Copies share the cache.
class KILN_API JitFunction {
 public:
  /// Throws what validate(options) throws.
  JitFunction(TensorFn fn, JitOptions options = {}, std::string name = "jit");

  /// Runs the graph built for these inputs' signature, tracing and building it first on a miss.
  /// Errors of tracing, of the build and of the backend's Run (naming the backend and the graph)
  /// propagate as kiln::Error. While another function is traced on this thread, calls `fn`
  /// directly (it becomes part of that trace). What `fn` writes in place, into its inputs or
  /// into tensors it captured, is written into them after the run, as eagerly; an input it
  /// writes must not share memory with another input (kValue).
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const;
  /// The graph `fn` gives for these inputs, as traced (IR text; kiln::ir::parse reads it).
  std::string graph(const std::vector<Tensor>& inputs) const;
  /// The graph after every pass, as the backend receives it (IR text); traces and runs the
  /// passes, builds nothing.
  std::string optimized_graph(const std::vector<Tensor>& inputs) const;
  /// The memory plan of the graph built for these inputs (building it on a miss): for a backend
  /// that plans memory statically (kiln_cpu), the most one call allocates (peak_bytes) and how
  /// (see BackendMemoryPlan), summed over the parts when the graph is partitioned. Throws kValue
  /// when no backend that runs the graph plans memory.
  BackendMemoryPlan memory_plan(const std::vector<Tensor>& inputs) const;
  /// What the passes did in the most recent build (empty before the first).
  PassReport pass_report() const;
  JitCacheInfo cache_info() const;
  /// Forgets every built graph (the backends free them).
  void clear_cache() const;
  const JitOptions& options() const;
  const std::string& name() const;

 private:
  struct State;
  /// The built graph for these inputs (traced and built on a miss); `writes`, when given, gets
  /// what the function writes into (see jit_detail::write_back).
  std::shared_ptr<jit_detail::CompiledGraph> graph_for(const std::vector<Tensor>& inputs,
                                                       jit_detail::Writes* writes = nullptr) const;
  std::shared_ptr<State> state_;
};

/// JitFunction(fn, options, name).
KILN_API JitFunction jit(TensorFn fn, JitOptions options = {}, std::string name = "jit");

/// Traces `fn` on tracers for `inputs` (their dtypes and shapes; weak scalars and undefined
/// tensors are passed through as constants) into a graph named `name`, whose parameters are
/// "input0", "input1", ... for the tensor inputs. Throws what `fn` throws; kValue when this
/// thread is already tracing.
KILN_API FuncGraphPtr trace(const TensorFn& fn, const std::vector<Tensor>& inputs,
                            const std::string& name = "graph");

/// Registers the pass `pass_name` of the pass plugin at `plugin_path` for the jit builds on
/// `backend` ("all", or a registered backend's name), in `stage` ("frontend", "pre_fusion",
/// "fusion", "post_fusion"), ordered by `priority` (lower first) and then registration order. It
/// takes effect for every later build on that backend (built graphs of that backend are built
/// again at their next call). Throws kValue saying what went wrong: a missing file, not a shared
/// library, not a pass plugin, another ABI version (both named), a pass the plugin does not have
/// (listing its names), an unknown stage or backend, a name already registered, an invalid
/// pattern.
KILN_API void register_custom_pass(const std::string& pass_name, const std::string& plugin_path,
                                   const std::string& backend = "all",
                                   const std::string& stage = "pre_fusion", int priority = 0);
/// Registers a pass object made in this process (a C++ pass, or a Python pattern); the same
/// rules and errors as register_custom_pass.
KILN_API void register_pass(PassPtr pass, const std::string& backend = "all",
                            const std::string& stage = "pre_fusion", int priority = 0);
/// Removes a registered pass (kValue for an unknown name, listing the registered ones).
KILN_API void unregister_custom_pass(const std::string& name);
/// Every registered pass, built-in ones included, in run order.
KILN_API std::vector<PassInfo> list_passes();

/// True while this thread traces a function.
KILN_API bool is_tracing();
/// True when `t` is a tracer (or a view of one) of the trace running on this thread.
KILN_API bool is_tracer(const Tensor& t);
/// Tells the trace running on this thread, if any, that the function decided something from a
/// dimension's size in a way that is not linear in it (a slice bound clamped to the dimension, as
/// x[:2] is x[:] at size 1): a dynamic function then traces every batch size, since two traces
/// cannot tell such a decision from a line (Note [Dynamic batch size]). Python's indexing and
/// Tensor.slice call it; C++ code that slices traced values with bounds past a batched dimension
/// should too.
KILN_API void note_size_decision();

}  // namespace kiln
