// Partitioning between a backend and its fallback (see partition.h and Note [Partitioning]).
#include "jit/partition.h"

#include <deque>
#include <unordered_map>

namespace kiln::jit_detail {

// Note [Partitioning]
// Each CNode gets a side: the backend when its Supports accepts the node, the fallback otherwise
// (a TupleGetItem takes its producer's side). The CNodes are then scheduled in a topological
// order that stays on one side as long as it can (Kahn's algorithm with one ready queue per side,
// draining the current side's queue before switching), and each run of one side becomes a part.
// That gives few parts without any search: independent supported and unsupported branches are
// grouped, and a switch happens only where a dependency forces it. A part's graph takes as
// parameters the values it reads from the whole graph's parameters or from earlier parts, copies
// the constants it uses, and returns the values that later parts or the whole graph's outputs
// read. Linear in the size of the graph.
//
// Random ops that draw when they run (Primitive::draws_when_run) reserve their counters in the
// order the parts run them, so each also waits for the one before it in the graph's order, as if
// it read its result: a seeded program draws the same numbers partitioned as eagerly (scheduled
// by side alone, a declined randn before a supported rand ran after it).

namespace {

constexpr uint8_t kBackend = 0;
constexpr uint8_t kFallback = 1;

bool is_op(const Node& n) {
  return n.is_cnode() && !static_cast<const CNode&>(n).primitive()->is_return();
}

struct Builder {
  const FuncGraph& whole;
  std::unordered_map<const Node*, size_t> part_of;  // CNode -> part index
  std::vector<GraphPart> parts;

  // Makes the part graphs from the scheduled runs of nodes.
  void build(const std::vector<std::vector<CNode*>>& runs, const std::vector<uint8_t>& sides,
             const std::string& backend, const std::string& fallback) {
    for (size_t k = 0; k < runs.size(); ++k) {
      for (CNode* n : runs[k]) part_of[n] = k;
    }
    for (size_t k = 0; k < runs.size(); ++k) {
      GraphPart part;
      part.backend = sides[k] == kBackend ? backend : fallback;
      part.graph = std::make_shared<FuncGraph>(whole.name() + ".part" + std::to_string(k));
      std::unordered_map<const Node*, NodePtr> local;
      const auto input_of = [&](const NodePtr& in) -> NodePtr {
        auto it = local.find(in.get());
        if (it != local.end()) return it->second;
        NodePtr made;
        if (in->is_value()) {
          made = part.graph->add_value(static_cast<const ValueNode&>(*in).value());
        } else {
          const std::string name =
              in->is_parameter() ? static_cast<const Parameter&>(*in).name() : std::string();
          made = part.graph->add_parameter(in->abstract().dtype(), in->abstract().shape(), name);
          part.inputs.push_back(in);
        }
        local.emplace(in.get(), made);
        return made;
      };
      std::vector<NodePtr> inputs;
      for (CNode* n : runs[k]) {
        inputs.clear();
        for (const NodePtr& in : n->inputs()) inputs.push_back(input_of(in));
        const Primitive& prim = *n->primitive();
        local.emplace(n, part.graph->add_cnode(std::make_shared<Primitive>(prim.name(), prim.attrs()),
                                               inputs, n->abstract()));
      }
      // Outputs: values read by a later part or by the whole graph's return node.
      std::vector<NodePtr> outputs;
      for (CNode* n : runs[k]) {
        if (!n->abstract().is_tensor()) continue;
        for (const Use& use : n->users()) {
          const bool outside = use.user->primitive()->is_return() || part_of.at(use.user) != k;
          if (!outside) continue;
          outputs.push_back(local.at(n));
          part.outputs.push_back(whole_node(n));
          break;
        }
      }
      part.graph->set_outputs(outputs);
      parts.push_back(std::move(part));
    }
  }

  // The shared pointer of a node of the whole graph (uses hold raw pointers).
  NodePtr whole_node(const CNode* n) {
    if (by_address.empty()) {
      for (const NodePtr& node : whole.nodes()) by_address.emplace(node.get(), node);
    }
    return by_address.at(n);
  }
  std::unordered_map<const Node*, NodePtr> by_address;
};

}  // namespace

std::vector<GraphPart> partition(const FuncGraphPtr& graph, const std::string& backend,
                                 const std::function<bool(const CNodePtr&)>& supports,
                                 const std::string& fallback) {
  const std::vector<NodePtr> order = graph->topological_order();
  std::unordered_map<const Node*, uint8_t> side;
  std::unordered_map<const Node*, size_t> waiting;  // inputs produced by ops not yet scheduled
  std::unordered_map<const Node*, CNode*> next_draw;  // a random op -> the next one in order
  CNode* last_draw = nullptr;
  bool all_supported = true;
  for (const NodePtr& n : order) {
    if (!is_op(*n)) continue;
    const auto c = std::static_pointer_cast<CNode>(n);
    uint8_t s = kBackend;
    if (c->primitive()->is_tuple_get_item()) {
      s = side.at(c->input(0).get());
    } else if (!supports(c)) {
      s = kFallback;
    }
    all_supported = all_supported && s == kBackend;
    side.emplace(c.get(), s);
    size_t count = 0;
    for (const NodePtr& in : c->inputs()) count += is_op(*in) ? 1 : 0;
    if (c->primitive()->draws_when_run()) {
      if (last_draw != nullptr) {
        next_draw.emplace(last_draw, c.get());
        ++count;
      }
      last_draw = c.get();
    }
    waiting.emplace(c.get(), count);
  }
  if (all_supported) {
    GraphPart whole{backend, graph, {}, {}};
    for (const ParameterPtr& p : graph->parameters()) whole.inputs.push_back(p);
    whole.outputs = graph->outputs().to_vector();
    return {std::move(whole)};
  }

  std::deque<CNode*> ready[2];
  for (const NodePtr& n : order) {
    if (is_op(*n) && waiting.at(n.get()) == 0) {
      ready[side.at(n.get())].push_back(static_cast<CNode*>(n.get()));
    }
  }
  std::vector<std::vector<CNode*>> runs;
  std::vector<uint8_t> run_sides;
  uint8_t current = ready[kBackend].empty() ? kFallback : kBackend;
  while (!ready[kBackend].empty() || !ready[kFallback].empty()) {
    if (ready[current].empty()) current = 1 - current;
    runs.emplace_back();
    run_sides.push_back(current);
    while (!ready[current].empty()) {
      CNode* n = ready[current].front();
      ready[current].pop_front();
      runs.back().push_back(n);
      const auto release = [&](CNode* user) {
        if (--waiting.at(user) == 0) ready[side.at(user)].push_back(user);
      };
      for (const Use& use : n->users()) {
        if (is_op(*use.user)) release(use.user);
      }
      if (auto it = next_draw.find(n); it != next_draw.end()) release(it->second);
    }
  }
  Builder builder{*graph, {}, {}, {}};
  builder.build(runs, run_sides, backend, fallback);
  return std::move(builder.parts);
}

}  // namespace kiln::jit_detail
