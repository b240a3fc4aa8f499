// CompiledGraph: the jit pipeline after tracing, and running its result (see compiled_graph.h).
#include "jit/compiled_graph.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "jit/dump.h"
#include "kiln/autocast.h"
#include "kiln/autograd.h"

namespace kiln::jit_detail {

namespace {

// Asks the backend about one node; its errors name the backend and the node.
bool backend_supports(const BackendBase& backend, const std::string& name, const CNodePtr& node) {
  try {
    return backend.Supports(node);
  } catch (Error& e) {
    e.add_context("in backend '" + name + "' deciding whether it supports " +
                  node->debug_string());
    throw;
  } catch (const std::exception& e) {
    KILN_FAIL(kGeneric) << "backend '" << name << "' failed deciding whether it supports "
                        << node->debug_string() << ": " << e.what();
  }
  KILN_LET_FORCED_UNWIND_THROUGH
  catch (...) {
    KILN_FAIL(kGeneric) << "backend '" << name << "' failed deciding whether it supports "
                        << node->debug_string() << ": an unknown exception";
  }
}

// The node whose memory `node`'s value may share: through view ops (kTraitView), whose results
// the backends may return as views of their first input, that input's root; an element of a
// view op's tuple (Split's, chunk's) counts as the op.
NodePtr alias_root(NodePtr node) {
  while (node->is_cnode()) {
    const auto* c = static_cast<const CNode*>(node.get());
    if (c->primitive()->is_tuple_get_item() && !c->inputs().empty() && c->inputs()[0]->is_cnode()) {
      c = static_cast<const CNode*>(c->inputs()[0].get());
    }
    const OpDefPtr op = c->primitive()->is_builtin() ? nullptr : c->primitive()->op_def();
    if (op == nullptr || !op->has_trait(kTraitView) || c->inputs().empty()) break;
    node = c->inputs()[0];
  }
  return node;
}

// Note [Fresh outputs of a compiled graph]
// Eagerly, each call of f makes its results anew: the caller owns them and may write them in
// place. A compiled graph's output that is a constant, or a view of one, comes back as the graph's
// own memory (a tensor created inside f, `kiln.tensor(...)`, is one: written by one caller, it
// would change for every later call); and one that a pass turned into a parameter, another output
// or a view of either (a user pattern x * 1 -> x, or x * 1 -> x.reshape(...), at an output) comes
// back as the caller's input or as the other result. So after the passes such outputs become
// copies (a Cast to their own dtype), run at every call. An output whose memory is what it was as
// traced stays as it is: `return x`, `return y, y` or `return x.T` returned that memory eagerly,
// too. `traced_roots` are the traced outputs' alias_roots.
void copy_aliased_outputs(FuncGraph& graph, const std::vector<NodePtr>& traced_roots) {
  std::vector<NodePtr> outputs(graph.outputs().begin(), graph.outputs().end());
  std::vector<NodePtr> roots;
  bool changed = false;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const NodePtr& out = outputs[i];
    roots.push_back(alias_root(out));
    const NodePtr& root = roots.back();
    if (root->is_value() && !static_cast<const ValueNode&>(*root).value().defined()) continue;
    bool fresh = !root->is_value() && (!root->is_parameter() || root == traced_roots[i]);
    for (size_t j = 0; fresh && j < i; ++j) {
      fresh = roots[j] != root || traced_roots[j] == traced_roots[i];
    }
    if (fresh) continue;
    outputs[i] = graph.add_cnode("Cast", {out}, {{"dtype", out->abstract().dtype()}});
    roots.back() = outputs[i];
    changed = true;
  }
  if (changed) graph.set_outputs(outputs);
}

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

// Whether the passes verify the graph after each of them (kiln.jit's debug, KILN_DEBUG).
bool verifying(const JitOptions& options) { return options.debug || env_flag("KILN_DEBUG"); }

// For a build that failed on a graph that no longer verifies, after passes of the user's changed
// it unverified: one of them may have left it broken, and the error names a later pass or the
// backend instead. Says which changed it and how to find the culprit; "" otherwise.
std::string broken_graph_hint(const FuncGraph& graph, const PassReport& report,
                              const std::string& backend) {
  std::string names;
  for (const PassInfo& info : PassRegistry::Instance().list()) {
    if (info.builtin || (info.backend != "all" && info.backend != backend)) continue;
    for (const PassRunRecord& run : report.runs) {
      if (run.pass == info.name && run.changed) {
        names += (names.empty() ? "'" : ", '") + info.name + "'";
        break;
      }
    }
  }
  if (names.empty()) return "";
  try {
    ir::verify(graph);
    return "";  // the graph is sound: the passes are not to blame
  } catch (const Error&) {
  }
  return "the graph no longer verifies after your passes (" + names +
         ") changed it unverified: kiln.jit(..., debug=True) or KILN_DEBUG=1 verifies it after "
         "every pass and names a pass that leaves it broken";
}

}  // namespace

void optimize(const FuncGraphPtr& graph, const JitOptions& options, PassReport* report,
              IrDump* dump) {
  ir::verify(*graph);
  PassRegistry& registry = PassRegistry::Instance();
  PassManager passes = registry.manager(options.backend, options.jit_level != "O0");
  passes.set_verify(verifying(options));
  const size_t num_parameters = graph->parameters().size();
  std::vector<Abstract> output_abstracts;
  std::vector<NodePtr> traced_roots;
  for (const NodePtr& out : graph->outputs()) {
    output_abstracts.push_back(out->abstract());
    traced_roots.push_back(alias_root(out));
  }
  passes.Run(graph, report, dump != nullptr && dump->enabled() ? dump : nullptr);
  KILN_CHECK_VALUE(graph->parameters().size() == num_parameters)
      << "the passes changed the parameters of graph \"" << graph->name() << "\" (from "
      << num_parameters << " to " << graph->parameters().size()
      << "); a pass must keep the graph's inputs";
  KILN_CHECK_VALUE(graph->outputs().size() == output_abstracts.size())
      << "the passes changed the number of outputs of graph \"" << graph->name() << "\" (from "
      << output_abstracts.size() << " to " << graph->outputs().size()
      << "); a pass must keep the graph's outputs";
  for (size_t i = 0; i < output_abstracts.size(); ++i) {
    KILN_CHECK_VALUE(graph->outputs()[i]->abstract() == output_abstracts[i])
        << "the passes changed output " << i << " of graph \"" << graph->name() << "\" from "
        << output_abstracts[i].str() << " to " << graph->outputs()[i]->abstract().str()
        << "; a pass must keep the graph's outputs";
  }
  copy_aliased_outputs(*graph, traced_roots);
}

std::shared_ptr<CompiledGraph> CompiledGraph::compile(FuncGraphPtr traced,
                                                      const JitOptions& options) {
  std::shared_ptr<CompiledGraph> c(new CompiledGraph());
  c->graph_ = std::move(traced);
  c->backend_ = options.backend;
  const FuncGraph& graph = *c->graph_;
  c->registry_generation_ = OpRegistry::Instance().generation();
  c->pass_registry_generation_ = PassRegistry::Instance().generation();
  c->backend_passes_ = PassRegistry::Instance().generation(options.backend);
  IrDump dump(dump_dir(options.dump_ir), graph.name());
  dump.write("traced", graph);
  // The ops of the graph as traced and as built: an op that constant folding ran at compile
  // time is gone from the built graph, but replacing it must rebuild the graph all the same.
  const auto record_ops = [&] {
    for (const NodePtr& n : graph.nodes()) {
      if (!n->is_cnode()) continue;
      const Primitive& prim = *static_cast<const CNode&>(*n).primitive();
      if (prim.is_builtin()) continue;
      bool seen = false;
      for (const auto& [name, op] : c->ops_) seen = seen || name == prim.name();
      if (!seen) c->ops_.emplace_back(prim.name(), prim.op_def());
    }
  };
  record_ops();
  // Everything from the passes to the backends' builds, whose errors may come from a graph a
  // user's pass left broken.
  const auto optimize_and_build = [&] {
    optimize(c->graph_, options, &c->report_, &dump);
    if (env_flag("KILN_PASS_REPORT")) {
      std::fprintf(stderr, "kiln: passes on graph \"%s\" (backend %s)\n%s", graph.name().c_str(),
                   options.backend.c_str(), c->report_.str().c_str());
    }
    record_ops();

    BackendManager& manager = BackendManager::Instance();
    c->backend_generation_ = manager.Generation();
    // Held: another thread may unregister the backend while its Supports runs.
    const std::shared_ptr<const BackendBase> backend = manager.Acquire(options.backend);
    c->parts_ = partition(
        c->graph_, options.backend,
        [&](const CNodePtr& node) { return backend_supports(*backend, options.backend, node); },
        kFallbackBackend);
    for (size_t k = 0; k < c->parts_.size(); ++k) {
      const GraphPart& part = c->parts_[k];
      dump.write(
          c->parts_.size() == 1 ? part.backend : "part" + std::to_string(k) + "_" + part.backend,
          *part.graph);
      BackendJitConfig config;
      config.jit_level = options.jit_level;
      config.backend = part.backend;
      config.options = options.options;
      Step step;
      step.backend = part.backend;
      step.registration = manager.RegistrationId(part.backend);  // before Build: never newer
      step.id = manager.Build(part.graph, config, part.backend);
      c->steps_.push_back(std::move(step));  // from here on the destructor clears it
    }
    c->plan();
  };
  try {
    optimize_and_build();
  } catch (Error& e) {
    if (!verifying(options)) {
      const std::string hint = broken_graph_hint(*c->graph_, c->report_, options.backend);
      if (!hint.empty()) e.add_context(hint);
    }
    throw;
  }
  return c;
}

// Numbers the values that cross a part boundary (see Step).
void CompiledGraph::plan() {
  if (parts_.size() == 1 && parts_[0].graph == graph_) {
    direct_ = true;
    return;
  }
  std::unordered_map<const Node*, size_t> slot;
  for (const ParameterPtr& p : graph_->parameters()) slot.emplace(p.get(), num_slots_++);
  for (size_t k = 0; k < parts_.size(); ++k) {
    Step& step = steps_[k];
    for (const NodePtr& in : parts_[k].inputs) step.inputs.push_back(slot.at(in.get()));
    for (const NodePtr& out : parts_[k].outputs) {
      step.outputs.push_back(num_slots_);
      slot.emplace(out.get(), num_slots_++);
    }
  }
  for (const NodePtr& out : graph_->outputs()) {
    auto it = slot.find(out.get());
    if (it == slot.end()) {
      KILN_ASSERT(out->is_value()) << out->debug_string() << " is an output of no part";
      it = slot.emplace(out.get(), num_slots_++).first;
      constants_.emplace_back(it->second, static_cast<const ValueNode&>(*out).value());
    }
    outputs_.push_back(it->second);
  }
}

CompiledGraph::~CompiledGraph() {
  for (const Step& step : steps_) {
    try {
      // Nothing when the backend was registered again: the new one may hold another graph of
      // this id.
      BackendManager::Instance().ClearGraph(step.backend, step.registration, step.id);
    } catch (...) {  // NOLINT: a destructor never throws; an unregistered backend has nothing
    }
  }
}

namespace {

// What a backend's Run gave for graph `graph` (`part` says whether all of it or a part): one
// result per output node in `expected`, each defined, with the node's dtype and shape. A broken
// backend is named here, not by a wrong result or a bare error at a later use. (A result still in
// the pipeline is waited for until its metadata is known, not its data.)
template <typename Nodes>  // the graph's InputList, or a part's std::vector<NodePtr>
void check_results(const std::string& backend, const std::vector<Tensor>& results,
                   const Nodes& expected, const char* part, const std::string& graph) {
  KILN_CHECK(results.size() == expected.size())
      << "backend '" << backend << "' returned " << results.size() << " outputs for " << part
      << "graph \"" << graph << "\", which has " << expected.size();
  for (size_t i = 0; i < results.size(); ++i) {
    const Tensor& r = results[i];
    KILN_CHECK(r.defined()) << "backend '" << backend << "' returned an undefined "
                            << "tensor as output " << i << " of " << part << "graph \"" << graph
                            << "\"";
    const Abstract& a = expected[i]->abstract();
    if (!a.is_tensor()) continue;
    KILN_CHECK(r.dtype() == a.dtype() && r.shape() == a.shape())
        << "backend '" << backend << "' returned " << type_str(r) << " as output " << i << " of "
        << part << "graph \"" << graph << "\", which is " << a.str();
  }
}

}  // namespace

// Note [Results carry no gradient]
// A compiled graph's results are values, not recorded ops: differentiating happens inside the
// traced function (kiln.jit(kiln.grad(f))). So a run records nothing, even on a backend that runs
// ops one by one through call_op (reference: it ignored the function's own detach() and no_grad,
// and gave wrong gradients), and an output that is an input comes back as a new handle on its
// memory without the input's gradient state (return x.detach() came back as x, tracking).
void CompiledGraph::run(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) const {
  autograd::NoGradGuard no_grad;
  // The graph holds the casts of its trace's autocast state: a backend replaying it through
  // call_op must not add the caller's.
  const AutocastGuard no_autocast(autocast_state().dtype, /*enabled=*/false);
  run_steps(inputs, outputs);
  for (Tensor& out : *outputs) {
    const bool is_input = std::any_of(inputs.begin(), inputs.end(),
                                      [&](const Tensor& in) { return in.is_same(out); });
    if (is_input) out = autograd::detach(out);
  }
}

void CompiledGraph::run_steps(const std::vector<Tensor>& inputs,
                              std::vector<Tensor>* outputs) const {
  BackendManager& manager = BackendManager::Instance();
  if (direct_) {
    manager.Run(steps_[0].backend, steps_[0].registration, steps_[0].id, inputs, outputs);
    check_results(steps_[0].backend, *outputs, graph_->outputs(), "", graph_->name());
    return;
  }
  KILN_CHECK_VALUE(inputs.size() == graph_->parameters().size())
      << "graph \"" << graph_->name() << "\" takes " << graph_->parameters().size()
      << " inputs, got " << inputs.size();
  std::vector<Tensor> slots(num_slots_);
  for (size_t i = 0; i < inputs.size(); ++i) slots[i] = inputs[i];
  for (const auto& [s, value] : constants_) slots[s] = value;
  std::vector<Tensor> args;
  std::vector<Tensor> results;
  for (size_t k = 0; k < steps_.size(); ++k) {
    const Step& step = steps_[k];
    args.clear();
    for (size_t s : step.inputs) args.push_back(slots[s]);
    manager.Run(step.backend, step.registration, step.id, args, &results);
    check_results(step.backend, results, parts_[k].outputs, "a part of ", graph_->name());
    for (size_t i = 0; i < results.size(); ++i) slots[step.outputs[i]] = std::move(results[i]);
  }
  outputs->clear();
  for (size_t s : outputs_) outputs->push_back(slots[s]);
}

BackendMemoryPlan CompiledGraph::memory_plan() const {
  BackendMemoryPlan total;
  for (const Step& step : steps_) {
    const std::shared_ptr<const BackendBase> backend =
        BackendManager::Instance().Acquire(step.backend);
    const auto* planner = dynamic_cast<const BackendMemoryPlanner*>(backend.get());
    // A plan of some parts only would understate the graph's memory without saying so.
    KILN_CHECK_VALUE(planner != nullptr)
        << "graph \"" << graph_->name() << "\" runs " << (steps_.size() > 1 ? "partly " : "")
        << "on backend '" << step.backend << "', which does not plan memory statically "
        << "(kiln_cpu does)";
    const BackendMemoryPlan plan = planner->GetMemoryPlan(step.id);
    total.peak_bytes += plan.peak_bytes;
    total.arena_bytes += plan.arena_bytes;
    total.output_bytes += plan.output_bytes;
    total.unshared_bytes += plan.unshared_bytes;
    total.buffers += plan.buffers;
    total.in_place += plan.in_place;
  }
  return total;
}

bool CompiledGraph::current() const {
  return ops_current() && passes_current() && backends_current();
}

bool CompiledGraph::passes_current() const {
  const PassRegistry& registry = PassRegistry::Instance();
  const uint64_t generation = registry.generation();
  if (generation == pass_registry_generation_.load(std::memory_order_relaxed)) return true;
  if (registry.generation(backend_) != backend_passes_) return false;
  pass_registry_generation_.store(generation, std::memory_order_relaxed);
  return true;
}

bool CompiledGraph::ops_current() const {
  const uint64_t generation = OpRegistry::Instance().generation();
  if (generation == registry_generation_.load(std::memory_order_relaxed)) return true;
  for (const auto& [name, op] : ops_) {
    if (OpRegistry::Instance().find(name) != op) return false;
  }
  registry_generation_.store(generation, std::memory_order_relaxed);
  return true;
}

bool CompiledGraph::backends_current() const {
  BackendManager& manager = BackendManager::Instance();
  const uint64_t generation = manager.Generation();
  if (generation == backend_generation_.load(std::memory_order_relaxed)) return true;
  for (const Step& step : steps_) {
    if (manager.RegistrationId(step.backend) != step.registration) return false;
  }
  backend_generation_.store(generation, std::memory_order_relaxed);
  return true;
}

}  // namespace kiln::jit_detail
