// Private access to the graph IR's internals, for the IR's own printer, parser and verifier (and
// for the tests that break graphs on purpose to check the verifier). Not a public API.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kiln/ir/func_graph.h"

namespace kiln::detail {

struct KILN_API IrAccess {
  static const std::vector<NodePtr>& slots(const FuncGraph& g) { return g.nodes_; }
  static uint32_t slot(const Node& n) { return n.slot_; }
  static uint32_t use_position(const CNode& c, size_t i) { return c.inputs_.use_pos_[i]; }

  // Node construction with a given id and abstract, no inference: the parser's path.
  static ParameterPtr add_parameter(FuncGraph& g, uint64_t id, TensorMeta meta, std::string name);
  static ValueNodePtr add_value(FuncGraph& g, uint64_t id, Tensor value);
  static CNodePtr add_cnode(FuncGraph& g, uint64_t id, PrimitivePtr primitive, NodeSpan inputs,
                            Abstract&& abstract);
  static MetaList& scratch(const FuncGraph& g) { return g.scratch_; }
  static ir::NodeArena* arena(const FuncGraph& g) { return g.arena_; }
  static void set_next_id(FuncGraph& g, uint64_t id) { g.next_id_ = id; }

  // Unchecked mutation, for tests that corrupt a graph.
  static Uses& users(Node& n) { return n.users_; }
  static void set_input_unchecked(CNode& c, size_t i, NodePtr n) {
    c.inputs_.nodes_[i] = std::move(n);
  }
};

/// True when `node` is a live node of `g` (not null, erased or from another graph).
inline bool is_member(const FuncGraph& g, const Node* node) {
  return node != nullptr && node->graph() == &g &&
         IrAccess::slots(g)[IrAccess::slot(*node)].get() == node;
}

/// FuncGraph::topological_order without the shared_ptr copies.
KILN_API std::vector<Node*> topo_order(const FuncGraph& g);

}  // namespace kiln::detail
