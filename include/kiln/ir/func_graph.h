// FuncGraph: a function as a graph of nodes — parameters, constants, op applications and the
// return node whose inputs are the outputs.
//
//   auto g = std::make_shared<kiln::FuncGraph>("f");
//   auto x = g->add_parameter(kiln::DType::kFloat32, {2, 3}, "x");
//   auto y = g->add_parameter(kiln::DType::kFloat32, {3}, "y");
//   auto neg = g->add_cnode(std::make_shared<kiln::Primitive>("Neg"), {y});
//   auto add = g->add_cnode("Add", {x, neg});
//   g->set_output(add);
//   auto sub = g->add_cnode("Sub", {x, y});
//   g->replace_all_uses_with(add, sub);   // the return node now uses sub
//   g->erase(add);
//   g->erase(neg);
//   for (const kiln::NodePtr& n : g->topological_order()) ...
//
// The graph owns its nodes: a node lives as long as its graph, unless erased, and nodes held
// elsewhere after that are detached (no graph, inputs or users). Node ids come from a counter
// per graph, so building the same graph twice gives the same ids. Nothing here recurses over the
// graph: a chain of a million nodes is fine.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/export.h"
#include "kiln/ir/node.h"

namespace kiln {
namespace ir {
class NodeArena;
}  // namespace ir

class KILN_API FuncGraph {
 public:
  explicit FuncGraph(std::string name = "graph");
  /// Detaches the nodes still held elsewhere; iterative, whatever the graph's depth.
  ~FuncGraph();
  FuncGraph(const FuncGraph&) = delete;
  FuncGraph& operator=(const FuncGraph&) = delete;

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  /// A new graph input. `name` may be empty; a non-empty name must be unique (kValue).
  ParameterPtr add_parameter(DType dtype, Shape shape, std::string name = {});
  /// A constant. A non-contiguous `value` is copied contiguous; memory is required (a pending
  /// eager result is waited for).
  ValueNodePtr add_value(const Tensor& value);
  /// A Python-number constant: a weak 0-d tensor (Tensor::scalar).
  ValueNodePtr add_value(const Scalar& value);
  /// `primitive` applied to `inputs`, with its abstract from the op's infer. Throws what infer
  /// throws (with the op call as context), and kValue when an input is null or belongs to
  /// another graph.
  CNodePtr add_cnode(PrimitivePtr primitive, NodeSpan inputs);
  /// Same, with the abstract given instead of inferred (ir::verify checks it).
  CNodePtr add_cnode(PrimitivePtr primitive, NodeSpan inputs, Abstract abstract);
  /// add_cnode(std::make_shared<Primitive>(op, attrs), inputs).
  CNodePtr add_cnode(const std::string& op, NodeSpan inputs, Attrs attrs = {});
  /// Element `index` of a tuple-valued node (a multi-output op), as a TupleGetItem node.
  CNodePtr tuple_get_item(const NodePtr& tuple, int64_t index);

  /// The graph's results: the return node's inputs (tensor-valued nodes of this graph).
  void set_outputs(NodeSpan outputs);
  void set_output(const NodePtr& output) { set_outputs(NodeSpan(&output, 1)); }
  const InputList& outputs() const;
  /// The node whose inputs are the outputs (primitive "Return", id Node::kReturnId).
  const CNodePtr& return_node() const { return return_; }
  const std::vector<ParameterPtr>& parameters() const { return parameters_; }

  /// Live nodes, the return node included.
  size_t num_nodes() const { return nodes_.size() - dead_; }
  /// Live nodes in creation order (the return node first).
  std::vector<NodePtr> nodes() const;
  /// Every live node, each after its inputs, the return node last. Deterministic: a depth-first
  /// post-order that starts from the nodes in creation order, so a graph built in program order
  /// comes out in that order. Throws kValue naming a node on a cycle.
  std::vector<NodePtr> topological_order() const;

  /// Makes every use of `old_node` a use of `new_node` (the return node's included). O(number of
  /// uses). Both must belong to this graph; abstracts are not checked (ir::verify does).
  void replace_all_uses_with(const NodePtr& old_node, const NodePtr& new_node);
  /// Removes a node that has no users (kValue naming a user otherwise) from the graph, dropping
  /// its uses of its inputs; the node becomes detached. The return node cannot be erased.
  void erase(const NodePtr& node);

  /// The id the next node will get.
  uint64_t next_id() const { return next_id_; }

 private:
  friend struct detail::IrAccess;
  template <typename T>
  std::shared_ptr<T> adopt(std::shared_ptr<T> node);
  void check_member(const NodePtr& node, const char* role) const;
  void compact();

  std::string name_;
  ir::NodeArena* arena_;  // where the nodes live (Note [Node arena] in src/ir/node_arena.cc)
  // Inference's input metadata, reused from node to node (see Note [Inference without
  // allocation] in src/ir/infer.cc); a graph is used by one thread at a time.
  mutable MetaList scratch_;
  std::vector<NodePtr> nodes_;  // by slot; erased slots are null until compact()
  size_t dead_ = 0;
  std::vector<ParameterPtr> parameters_;
  CNodePtr return_;
  uint64_t next_id_ = 0;
};

}  // namespace kiln
