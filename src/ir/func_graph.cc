#include "kiln/ir/func_graph.h"

#include <utility>

#include "ir/infer.h"
#include "ir/ir_access.h"
#include "ir/node_arena.h"

namespace kiln {

namespace {

template <typename T, typename... Args>
std::shared_ptr<T> make_node(ir::NodeArena* arena, detail::NodeKey key, Args&&... args) {
  return std::allocate_shared<T>(ir::ArenaAllocator<T>(arena), key, std::forward<Args>(args)...);
}

}  // namespace

FuncGraph::FuncGraph(std::string name) : name_(std::move(name)), arena_(ir::NodeArena::create()) {
  return_ =
      adopt(make_node<CNode>(arena_, detail::NodeKey{}, this, Node::kReturnId,
                             std::make_shared<Primitive>(ir::kReturn), NodeSpan(), Abstract()));
}

FuncGraph::~FuncGraph() {
  // Detach every node first: each drops its inputs while the table still holds them, so no node
  // dies from inside another's destructor (which would recurse along a long chain).
  for (const NodePtr& n : nodes_) {
    if (n == nullptr) continue;
    n->graph_ = nullptr;
    n->users_.clear();
    if (n->is_cnode()) static_cast<CNode&>(*n).inputs_.reset();
  }
  arena_->orphan();
  return_.reset();
  parameters_.clear();
  nodes_.clear();
  arena_->release();  // the nodes still held elsewhere keep the arena
}

template <typename T>
std::shared_ptr<T> FuncGraph::adopt(std::shared_ptr<T> node) {
  KILN_CHECK_VALUE(nodes_.size() < UINT32_MAX) << "graph \"" << name_ << "\" is full";
  node->slot_ = static_cast<uint32_t>(nodes_.size());
  nodes_.push_back(node);
  return node;
}

void FuncGraph::check_member(const NodePtr& node, const char* role) const {
  KILN_CHECK_VALUE(node != nullptr) << "graph \"" << name_ << "\": " << role << " is null";
  if (node->graph_ == this) return;
  KILN_FAIL(kValue) << "graph \"" << name_ << "\": " << role << " " << node->debug_string()
                    << (node->graph_ == nullptr
                            ? " is detached (erased, or its graph is gone)"
                            : " belongs to graph \"" + node->graph_->name() + "\"");
}

ParameterPtr FuncGraph::add_parameter(DType dtype, Shape shape, std::string name) {
  if (!name.empty()) {
    for (const ParameterPtr& p : parameters_) {
      KILN_CHECK_VALUE(p->name() != name)
          << "graph \"" << name_ << "\" already has a parameter named \"" << name << "\"";
    }
  }
  return detail::IrAccess::add_parameter(*this, next_id_, TensorMeta(dtype, std::move(shape)),
                                         std::move(name));
}

ValueNodePtr FuncGraph::add_value(const Tensor& value) {
  Tensor constant;
  if (value.defined()) {
    KILN_CHECK_VALUE(value.has_storage())
        << "graph \"" << name_ << "\": a constant needs a tensor with memory, got one of "
        << dtype_name(value.dtype()) << shape_str(value.shape()) << " without";
    constant = value.contiguous();
  }
  return detail::IrAccess::add_value(*this, next_id_, std::move(constant));
}

ValueNodePtr FuncGraph::add_value(const Scalar& value) { return add_value(Tensor::scalar(value)); }

CNodePtr FuncGraph::add_cnode(PrimitivePtr primitive, NodeSpan inputs) {
  KILN_CHECK_VALUE(primitive != nullptr) << "graph \"" << name_ << "\": the primitive is null";
  for (const NodePtr& in : inputs) check_member(in, "an input");
  Abstract abstract = ir::infer_abstract(*primitive, inputs, scratch_);
  return detail::IrAccess::add_cnode(*this, next_id_, std::move(primitive), inputs,
                                     std::move(abstract));
}

CNodePtr FuncGraph::add_cnode(PrimitivePtr primitive, NodeSpan inputs, Abstract abstract) {
  KILN_CHECK_VALUE(primitive != nullptr) << "graph \"" << name_ << "\": the primitive is null";
  KILN_CHECK_VALUE(!primitive->is_return())
      << "graph \"" << name_ << "\": 'Return' is the return node's primitive; use set_outputs";
  for (const NodePtr& in : inputs) check_member(in, "an input");
  return detail::IrAccess::add_cnode(*this, next_id_, std::move(primitive), inputs,
                                     std::move(abstract));
}

CNodePtr FuncGraph::add_cnode(const std::string& op, NodeSpan inputs, Attrs attrs) {
  return add_cnode(std::make_shared<Primitive>(op, std::move(attrs)), inputs);
}

CNodePtr FuncGraph::tuple_get_item(const NodePtr& tuple, int64_t index) {
  return add_cnode(std::make_shared<Primitive>(ir::kTupleGetItem, Attrs{{"index", index}}),
                   {tuple});
}

void FuncGraph::set_outputs(NodeSpan outputs) {
  for (const NodePtr& out : outputs) {
    check_member(out, "an output");
    KILN_CHECK_TYPE(out->abstract().is_tensor())
        << "graph \"" << name_ << "\": the output " << out->debug_string() << " is "
        << out->abstract().str() << ", not a tensor (take a tuple apart with TupleGetItem)";
  }
  // A copy: `outputs` may view the return node's own inputs (set_outputs(outputs())).
  const std::vector<NodePtr> copy(outputs.begin(), outputs.end());
  CNode& ret = *return_;
  for (size_t i = 0; i < ret.inputs_.size(); ++i) ret.unlink_input(i);
  ret.inputs_.assign(copy);
  for (size_t i = 0; i < ret.inputs_.size(); ++i) ret.link_input(i);
}

const InputList& FuncGraph::outputs() const { return return_->inputs(); }

std::vector<NodePtr> FuncGraph::nodes() const {
  std::vector<NodePtr> live;
  live.reserve(num_nodes());
  for (const NodePtr& n : nodes_) {
    if (n != nullptr) live.push_back(n);
  }
  return live;
}

std::vector<NodePtr> FuncGraph::topological_order() const {
  const std::vector<Node*> order = detail::topo_order(*this);
  std::vector<NodePtr> result;
  result.reserve(order.size());
  for (Node* n : order) result.push_back(nodes_[n->slot_]);
  return result;
}

void FuncGraph::replace_all_uses_with(const NodePtr& old_ref, const NodePtr& new_ref) {
  // Copies: a caller may pass a reference into an input list this loop rewrites
  // (replace_all_uses_with(c->input(0), y)).
  const NodePtr old_node = old_ref;
  const NodePtr new_node = new_ref;
  check_member(old_node, "the replaced node");
  check_member(new_node, "the replacement");
  if (old_node == new_node) return;
  for (const Use& use : old_node->users_) {
    CNode& user = *use.user;
    user.inputs_.nodes_[use.index] = new_node;
    user.inputs_.use_pos_[use.index] = static_cast<uint32_t>(new_node->users_.size());
    new_node->users_.push_back(use);
  }
  old_node->users_.clear();
}

void FuncGraph::erase(const NodePtr& node) {
  const NodePtr keep = node;  // `node` may refer to a slot of nodes_
  check_member(keep, "the erased node");
  KILN_CHECK_VALUE(keep != return_)
      << "graph \"" << name_ << "\": the return node cannot be erased";
  KILN_CHECK_VALUE(keep->users_.empty())
      << "graph \"" << name_ << "\": cannot erase " << keep->debug_string() << ", it is used by "
      << keep->users_[0].user->debug_string()
      << (keep->users_.size() > 1 ? " and " + std::to_string(keep->users_.size() - 1) + " more uses"
                                  : std::string());
  if (keep->is_cnode()) {
    auto& c = static_cast<CNode&>(*keep);
    for (size_t i = 0; i < c.inputs_.size(); ++i) c.unlink_input(i);
    c.inputs_.reset();
  } else if (keep->is_parameter()) {
    for (auto it = parameters_.begin(); it != parameters_.end(); ++it) {
      if (*it == keep) {
        parameters_.erase(it);
        break;
      }
    }
  }
  nodes_[keep->slot_] = nullptr;
  keep->graph_ = nullptr;
  ++dead_;
  if (dead_ > 1024 && dead_ > nodes_.size() / 2) compact();
}

void FuncGraph::compact() {
  size_t live = 0;
  for (NodePtr& n : nodes_) {
    if (n == nullptr) continue;
    n->slot_ = static_cast<uint32_t>(live);
    nodes_[live++] = std::move(n);
  }
  nodes_.resize(live);
  dead_ = 0;
}

// --- detail ---

namespace detail {

ParameterPtr IrAccess::add_parameter(FuncGraph& g, uint64_t id, TensorMeta meta, std::string name) {
  auto p =
      g.adopt(make_node<Parameter>(g.arena_, NodeKey{}, &g, id, std::move(meta), std::move(name)));
  g.parameters_.push_back(p);
  g.next_id_ = std::max(g.next_id_, id + 1);
  return p;
}

ValueNodePtr IrAccess::add_value(FuncGraph& g, uint64_t id, Tensor value) {
  auto v = g.adopt(make_node<ValueNode>(g.arena_, NodeKey{}, &g, id, std::move(value)));
  g.next_id_ = std::max(g.next_id_, id + 1);
  return v;
}

CNodePtr IrAccess::add_cnode(FuncGraph& g, uint64_t id, PrimitivePtr primitive, NodeSpan inputs,
                             Abstract&& abstract) {
  auto c = g.adopt(make_node<CNode>(g.arena_, NodeKey{}, &g, id, std::move(primitive), inputs,
                                    std::move(abstract)));
  for (size_t i = 0; i < c->inputs_.size(); ++i) c->link_input(i);
  g.next_id_ = std::max(g.next_id_, id + 1);
  return c;
}

// A depth-first post-order over an explicit stack (no recursion), roots in creation order, the
// return node last. Also the check that every input is a live node of the graph.
std::vector<Node*> topo_order(const FuncGraph& g) {
  const std::vector<NodePtr>& slots = IrAccess::slots(g);
  enum : uint8_t { kNew, kOnStack, kDone };
  std::vector<uint8_t> state(slots.size(), kNew);
  std::vector<Node*> order;
  order.reserve(g.num_nodes());
  std::vector<std::pair<Node*, uint32_t>> stack;

  const auto visit = [&](Node* root) {
    if (state[IrAccess::slot(*root)] != kNew) return;
    state[IrAccess::slot(*root)] = kOnStack;
    stack.emplace_back(root, 0);
    while (!stack.empty()) {
      Node* n = stack.back().first;
      Node* next = nullptr;
      if (n->is_cnode()) {
        const auto& inputs = static_cast<const CNode*>(n)->inputs();
        for (uint32_t& i = stack.back().second; i < inputs.size();) {
          Node* in = inputs[i++].get();
          KILN_CHECK_VALUE(is_member(g, in))
              << "graph \"" << g.name() << "\": input " << i - 1 << " of " << n->debug_string()
              << " is a dangling reference (" << (in ? "a node not in this graph" : "null") << ")";
          uint8_t& s = state[IrAccess::slot(*in)];
          if (s == kDone) continue;
          KILN_CHECK_VALUE(s == kNew)
              << "graph \"" << g.name() << "\" has a cycle through " << in->debug_string()
              << ", which " << n->debug_string() << " uses";
          s = kOnStack;
          next = in;
          break;
        }
      }
      if (next != nullptr) {
        stack.emplace_back(next, 0);
      } else {
        state[IrAccess::slot(*n)] = kDone;
        order.push_back(n);
        stack.pop_back();
      }
    }
  };
  const Node* ret = g.return_node().get();
  for (const NodePtr& n : slots) {
    if (n != nullptr && n.get() != ret) visit(n.get());
  }
  visit(g.return_node().get());
  return order;
}

}  // namespace detail
}  // namespace kiln
