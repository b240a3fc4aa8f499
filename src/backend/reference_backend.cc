// The "reference" backend: runs a graph op by op through eager dispatch (kiln::call_op), exactly
// as the same ops called one after another would run. It is the oracle that other backends and
// pass rewrites are checked against, so it does nothing clever: Build verifies the graph and
// lays it out as a list of op calls over numbered value slots; Run fills the slots.
#include <unordered_map>

#include "backend/built_graphs.h"
#include "backend/graph_checks.h"
#include "kiln/backend.h"

namespace kiln {
namespace {

struct Step {
  OpDefPtr op;
  Attrs attrs;                   // normalized
  std::vector<uint32_t> inputs;  // slots
  uint32_t first_output;         // its results fill first_output, first_output + 1, ...
  uint32_t num_outputs;
  std::vector<uint32_t> release;  // slots read for the last time here
  bool draws_when_run = false;    // a random op without recorded seed and offset
};

struct Program {
  std::string name;
  // Per parameter: its metadata and how messages name it (the graph itself is not kept).
  std::vector<TensorMeta> parameters;
  std::vector<std::string> parameter_names;
  std::vector<uint32_t> parameter_slots;
  std::vector<std::pair<uint32_t, Tensor>> constants;
  std::vector<Step> steps;
  std::vector<uint32_t> outputs;
  size_t num_slots = 0;
  uint64_t registry_generation = 0;
  std::vector<OpDefPtr> ops;  // every step's op, for check_ops_current
};

std::shared_ptr<const Program> compile(const FuncGraphPtr& graph) {
  ir::verify(*graph);
  auto p = std::make_shared<Program>();
  p->name = graph->name();
  p->registry_generation = OpRegistry::Instance().generation();
  // A tuple-valued node owns one slot per element; TupleGetItem reads one of them, no step.
  std::unordered_map<const Node*, uint32_t> slot_of;
  const auto new_slots = [&](size_t n) {
    const auto first = static_cast<uint32_t>(p->num_slots);
    p->num_slots += n;
    return first;
  };
  for (const ParameterPtr& param : graph->parameters()) {
    const uint32_t slot = new_slots(1);
    slot_of[param.get()] = slot;
    p->parameters.push_back(param->abstract().tensor());
    p->parameter_names.push_back(param->debug_string());
    p->parameter_slots.push_back(slot);
  }
  for (const NodePtr& n : graph->topological_order()) {
    if (n->is_parameter() || n == graph->return_node()) continue;
    if (n->is_value()) {
      const uint32_t slot = new_slots(1);
      slot_of[n.get()] = slot;
      p->constants.emplace_back(slot, static_cast<const ValueNode&>(*n).value());
      continue;
    }
    const auto& c = static_cast<const CNode&>(*n);
    const Primitive& prim = *c.primitive();
    if (prim.is_tuple_get_item()) {
      slot_of[n.get()] =
          slot_of.at(c.input(0).get()) + static_cast<uint32_t>(prim.attrs().get<int64_t>("index"));
      continue;
    }
    Step step;
    step.op = prim.op_def();
    step.attrs = prim.normalized_attrs();
    step.draws_when_run = prim.draws_when_run();
    for (const NodePtr& in : c.inputs()) step.inputs.push_back(slot_of.at(in.get()));
    step.num_outputs =
        static_cast<uint32_t>(c.abstract().is_tuple() ? c.abstract().elements().size() : 1);
    step.first_output = new_slots(step.num_outputs);
    slot_of[n.get()] = step.first_output;
    p->ops.push_back(step.op);
    p->steps.push_back(std::move(step));
  }
  for (const NodePtr& out : graph->outputs()) p->outputs.push_back(slot_of.at(out.get()));
  // Drop each intermediate value after its last reader, so a long graph does not hold every
  // intermediate tensor at once. Outputs are never dropped.
  constexpr size_t kKeep = ~size_t{0};
  std::vector<size_t> last_read(p->num_slots, 0);
  for (size_t i = 0; i < p->steps.size(); ++i) {
    for (uint32_t s : p->steps[i].inputs) last_read[s] = i + 1;
  }
  for (uint32_t s : p->outputs) last_read[s] = kKeep;
  for (uint32_t s = 0; s < p->num_slots; ++s) {
    if (last_read[s] != 0 && last_read[s] != kKeep) p->steps[last_read[s] - 1].release.push_back(s);
  }
  return p;
}

class OpByOpBackend final : public BackendBase {
 public:
  BackendGraphId Build(const FuncGraphPtr& graph, const BackendJitConfig&) override {
    return graphs_.add(compile(graph));
  }

  RunningStatus Run(BackendGraphId id, const std::vector<Tensor>& inputs,
                    std::vector<Tensor>* outputs) override {
    const std::shared_ptr<const Program> p = graphs_.find(id);
    backend_detail::check_inputs(p->name, p->parameters, p->parameter_names, inputs);
    backend_detail::check_ops_current(p->name, p->registry_generation, p->ops);
    std::vector<Tensor> slots(p->num_slots);
    for (size_t i = 0; i < inputs.size(); ++i) slots[p->parameter_slots[i]] = inputs[i];
    for (const auto& [slot, value] : p->constants) slots[slot] = value;
    std::vector<Tensor> args;
    for (const Step& step : p->steps) {
      args.clear();
      for (uint32_t s : step.inputs) args.push_back(slots[s]);
      TensorList results = call_op(*step.op, args, step.attrs);
      KILN_CHECK(results.size() == step.num_outputs)
          << step.op->name() << " returned " << results.size() << " results, the graph says "
          << step.num_outputs;
      // Its kernel reserves generator counters when it runs (Note [Random ops in graphs] in
      // src/ops/random.cc): waiting for it keeps that before any later call's reservation.
      if (step.draws_when_run && !results.empty()) results[0].data_ptr();
      for (uint32_t k = 0; k < step.num_outputs; ++k) {
        slots[step.first_output + k] = std::move(results[k]);
      }
      for (uint32_t s : step.release) slots[s] = Tensor();
    }
    outputs->clear();
    for (uint32_t s : p->outputs) outputs->push_back(slots[s]);
    return RunningStatus::kRunningSuccess;
  }

  void ClearGraph(BackendGraphId id) override { graphs_.erase(id); }

  void Clear() override { graphs_.clear(); }

 private:
  backend_detail::BuiltGraphs<Program> graphs_;
};

}  // namespace

KILN_REGISTER_BACKEND("reference", OpByOpBackend);

}  // namespace kiln
