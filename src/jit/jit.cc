// kiln::jit over C++ callables (see kiln/jit.h): JitFunction's call path, trace(), validate().
#include "kiln/jit.h"

#include <mutex>

#include "jit/dynamic_graph.h"
#include "jit/graph_cache.h"
#include "jit/trace.h"

namespace kiln {

using jit_detail::CompiledGraph;
using jit_detail::SignatureKey;
using jit_detail::Trace;

void validate(const JitOptions& options) {
  KILN_CHECK_VALUE(!options.backend.empty()) << "jit: expected a backend name, got \"\"";
  KILN_CHECK_VALUE(options.capture_mode == "trace")
      << "jit: capture_mode \"" << options.capture_mode
      << "\" is not supported; kiln captures functions by tracing (capture_mode=\"trace\")";
  KILN_CHECK_VALUE(options.jit_level == "O0" || options.jit_level == "O1" ||
                   options.jit_level == "O2")
      << "jit: jit_level must be \"O0\", \"O1\" or \"O2\", got \"" << options.jit_level << "\"";
  // The built-in backends read no options: one given to them is a mistake (a misspelt option of
  // another backend, say), not something to ignore.
  KILN_CHECK_VALUE(options.options.empty() || !is_builtin_backend(options.backend))
      << "jit: the built-in backend \"" << options.backend << "\" takes no options, got \""
      << options.options.begin()->first << "\"";
}

namespace {

// The traced graph, with what it writes into (Trace::writes) as its front end's data.
jit_detail::Traced trace_with_writes(const TensorFn& fn, const std::vector<Tensor>& inputs,
                                     const std::string& name) {
  Trace trace(name);
  std::vector<Tensor> args;
  args.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    args.push_back(SignatureKey::is_constant_input(t)
                       ? t
                       : trace.add_input(TensorMeta(t.dtype(), t.shape()),
                                         "input" + std::to_string(i)));
  }
  FuncGraphPtr graph = trace.finish(fn(args));
  return jit_detail::Traced{std::move(graph), std::make_shared<jit_detail::Writes>(trace.writes()),
                            trace.size_decisions()};
}

}  // namespace

FuncGraphPtr trace(const TensorFn& fn, const std::vector<Tensor>& inputs, const std::string& name) {
  return trace_with_writes(fn, inputs, name).graph;
}

bool is_tracing() { return Trace::active(); }

bool is_tracer(const Tensor& t) {
  const Trace* trace = Trace::current();
  return trace != nullptr && trace->is_tracer(t);
}

void note_size_decision() {
  if (Trace* trace = Trace::current()) trace->note_size_decision();
}

struct JitFunction::State {
  TensorFn fn;
  JitOptions options;
  std::string name;
  jit_detail::GraphCache cache;
  mutable std::mutex report_mutex;
  PassReport last_report;  // of the most recent build
};

JitFunction::JitFunction(TensorFn fn, JitOptions options, std::string name)
    : state_(std::make_shared<State>()) {
  KILN_CHECK_VALUE(fn != nullptr) << "jit: the function is empty";
  validate(options);
  state_->fn = std::move(fn);
  state_->options = std::move(options);
  state_->name = std::move(name);
}

std::shared_ptr<CompiledGraph> JitFunction::graph_for(const std::vector<Tensor>& inputs,
                                                      jit_detail::Writes* writes) const {
  State& s = *state_;
  SignatureKey key;
  if (s.options.dynamic) key.set_dynamic();
  for (const Tensor& t : inputs) key.add_input(t);
  // A trace bakes in the dtype that Python floats and integer inputs' floating results take, and
  // autocast's casts.
  key.add(static_cast<int64_t>(default_float_dtype()));
  key.add(jit_detail::autocast_word());
  const jit_detail::Lookup found = jit_detail::lookup(
      s.cache, key, s.options, [&] { return trace_with_writes(s.fn, inputs, s.name); });
  if (writes != nullptr)
    *writes = *static_cast<const jit_detail::Writes*>(found.entry->front_end.get());
  if (found.built) {
    std::lock_guard<std::mutex> lock(s.report_mutex);
    s.last_report = found.graph->pass_report();
  }
  return found.graph;
}

std::vector<Tensor> JitFunction::operator()(const std::vector<Tensor>& inputs) const {
  State& s = *state_;
  if (Trace::active()) return s.fn(inputs);  // part of the enclosing trace
  jit_detail::Writes writes;
  const std::shared_ptr<CompiledGraph> graph = graph_for(inputs, &writes);
  std::vector<Tensor> params;
  params.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    if (!SignatureKey::is_constant_input(t)) params.push_back(t);
  }
  jit_detail::check_writes(writes, params);
  std::vector<Tensor> outputs;
  graph->run(params, &outputs);
  jit_detail::write_back(writes, params, outputs);
  return outputs;
}

BackendMemoryPlan JitFunction::memory_plan(const std::vector<Tensor>& inputs) const {
  return graph_for(inputs)->memory_plan();
}

std::string JitFunction::graph(const std::vector<Tensor>& inputs) const {
  return ir::print(*trace(state_->fn, inputs, state_->name));
}

std::string JitFunction::optimized_graph(const std::vector<Tensor>& inputs) const {
  FuncGraphPtr graph = trace(state_->fn, inputs, state_->name);
  PassReport report;
  jit_detail::optimize(graph, state_->options, &report);
  // The most recent build's report: pass_report() after optimized_graph() shows it.
  std::lock_guard<std::mutex> lock(state_->report_mutex);
  state_->last_report = std::move(report);
  return ir::print(*graph);
}

PassReport JitFunction::pass_report() const {
  std::lock_guard<std::mutex> lock(state_->report_mutex);
  return state_->last_report;
}

JitCacheInfo JitFunction::cache_info() const { return state_->cache.info(); }

void JitFunction::clear_cache() const { state_->cache.clear(); }

const JitOptions& JitFunction::options() const { return state_->options; }

const std::string& JitFunction::name() const { return state_->name; }

JitFunction jit(TensorFn fn, JitOptions options, std::string name) {
  return JitFunction(std::move(fn), std::move(options), std::move(name));
}

}  // namespace kiln
