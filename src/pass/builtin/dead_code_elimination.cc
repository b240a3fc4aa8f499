// DeadCodeElimination: removes the CNodes and constants that no graph output needs.
//
// A node is live when the return node uses it, when it is an op with the kTraitSideEffect trait
// (kept whether or not anything reads its result), or when a live node uses it; parameters are
// the graph's signature and always stay. Everything else goes. Since the graph is acyclic, the
// dead nodes are exactly those the following peeling removes: start from the removable nodes
// that nothing uses, erase one, and queue those of its inputs that are now unused and removable
// themselves. Each node is erased once and each edge looked at once (linear, no recursion; a dead
// chain of a million nodes is fine), in an order fixed by the graph (creation order, then
// use order).
#include <vector>

#include "ir/ir_access.h"
#include "pass/builtin/builtin_passes.h"

namespace kiln::pass {
namespace {

// Whether `n` may go once nothing uses it.
bool removable(const Node& n, const FuncGraph& graph) {
  if (n.is_parameter() || &n == graph.return_node().get()) return false;
  if (!n.is_cnode()) return true;
  const Primitive& p = *static_cast<const CNode&>(n).primitive();
  if (p.is_builtin()) return true;  // TupleGetItem
  const OpDefPtr op = p.op_def();
  // An op the registry does not know (unregistered since the graph was built) may have effects.
  if (op == nullptr || op->has_trait(kTraitSideEffect)) return false;
  // A random op without a recorded draw reserves counters when it runs (Note [Random ops in
  // graphs]): removed, it would shift every later draw, and a seeded program would draw other
  // numbers jitted than eagerly.
  return !p.draws_when_run();
}

class DeadCodeElimination final : public Pass {
 public:
  explicit DeadCodeElimination(const std::string& name) : Pass(name) {}

  bool Run(const FuncGraphPtr& graph) override {
    KILN_CHECK_VALUE(graph != nullptr) << "pass '" << name() << "': Run got a null graph";
    std::vector<NodePtr> work;
    for (const NodePtr& n : detail::IrAccess::slots(*graph)) {
      if (n != nullptr && n->users().empty() && removable(*n, *graph)) work.push_back(n);
    }
    size_t erased = 0;
    std::vector<NodePtr> inputs;
    // Last in, first out: a chain is peeled from its end, with a stack that stays small.
    while (!work.empty()) {
      const NodePtr n = std::move(work.back());
      work.pop_back();
      if (n->graph() != graph.get()) continue;  // queued twice (an input used twice), erased
      inputs.clear();
      if (n->is_cnode()) {
        const InputList& in = static_cast<const CNode&>(*n).inputs();
        inputs.assign(in.begin(), in.end());
      }
      graph->erase(n);
      ++erased;
      for (NodePtr& in : inputs) {
        if (in->users().empty() && removable(*in, *graph)) {
          work.push_back(std::move(in));
        }
      }
    }
    record_matches(erased);
    return erased > 0;
  }
};

}  // namespace

PassPtr make_dead_code_elimination(const std::string& name) {
  return std::make_shared<DeadCodeElimination>(name);
}

}  // namespace kiln::pass
