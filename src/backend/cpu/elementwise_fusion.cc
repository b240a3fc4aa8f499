// ElementwiseFusion: kiln_cpu's "fusion"-stage pass. Maximal trees of float elementwise ops,
// optionally ending in a row epilogue over the last dimension (softmax, log_softmax, sum or
// mean), become one FusedElementwise node (src/ops/fused_elementwise.h) that streams tiles
// through cache and writes only the result.
//
// A group grows from a root (visited from the graph's end) towards its inputs: an op joins when
// the interpreter runs it (ops/fused_elementwise.h: instruction_name), its result has the root's
// floating-point dtype (a 16-bit group computes in float32 and rounds once, at its output: Note
// [16-bit programs] in src/ops/fused_elementwise.cc) and shape (the epilogue's input shape), every
// tensor it reads has that dtype or is a Python number, and every user of its result is already
// in the group (so nothing outside needs the
// value, which the fused kernel never stores). Producers are taken in decreasing topological
// order from a heap, which makes "every user already decided" true when one is looked at: a
// user comes later in the order. Each node joins at most one group and is looked at once per
// user, so the pass is linear in the graph. A group of one op stays as it is (its kernel is the
// same), and a group whose outside inputs broadcast in a way the interpreter does not run
// (fused::plan_layout) is left alone.
#include <algorithm>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "backend/cpu/cpu_passes.h"
#include "ops/fused_elementwise.h"

namespace kiln::cpu {
namespace {

// Bounds that keep one kernel's register file and argument list small.
constexpr size_t kMaxInstructions = 64;
constexpr size_t kMaxInputs = 16;
// The longest row a row epilogue's tile holds (256 KiB of float32).
constexpr int64_t kMaxRow = 65536;

const CNode* as_op(const NodePtr& n) {
  if (!n->is_cnode()) return nullptr;
  const auto* c = static_cast<const CNode*>(n.get());
  const Primitive& p = *c->primitive();
  if (p.is_builtin() || p.op_def() == nullptr || !c->abstract().is_tensor()) return nullptr;
  return c;
}

// Whether an instruction's result jumps where an operand crosses a boundary. A 16-bit group hands
// its instructions unrounded float32 operands (Note [16-bit programs] in
// src/ops/fused_elementwise.cc), which could put such a result a whole unit away from eager's
// (floor(x * 10) of float16 0.1: 0 against 1), so these stay out of 16-bit groups. Their operand
// may still be a group's result, rounded once rather than after every op as eager's (see the
// Note for what remains).
bool jumps(const std::string& instruction) {
  return instruction == "Floor" || instruction == "Ceil" || instruction == "Round" ||
         instruction == "Trunc" || instruction == "Sign" || instruction == "FloorDivide" ||
         instruction == "TruncDivide" || instruction == "Remainder" ||
         instruction == "ReluBackward";
}

// The instruction `n` becomes inside a group of dtype `dtype`, or nullopt.
std::optional<std::string> elementwise_instruction(const NodePtr& n, DType dtype) {
  const CNode* c = as_op(n);
  if (c == nullptr || c->abstract().dtype() != dtype) return std::nullopt;
  for (const NodePtr& in : c->inputs()) {
    if (!in->abstract().is_tensor()) return std::nullopt;
    const TensorMeta& meta = in->abstract().tensor();
    if (!meta.defined || (meta.dtype != dtype && !meta.weak)) return std::nullopt;
  }
  const Primitive& p = *c->primitive();
  std::optional<std::string> name = fused::instruction_name(p.name(), p.normalized_attrs());
  if (!name) return std::nullopt;
  if (itemsize(dtype) == 2 && jumps(*name)) return std::nullopt;
  const size_t arity = fused::unary_instruction(*name) ? 1 : 2;
  return c->inputs().size() == arity ? name : std::nullopt;
}

// The row epilogue `n` is when it can end a group: a Softmax or LogSoftmax over the last
// dimension ("Softmax", "LogSoftmax"), or a ReduceSum / ReduceMean of the last dimension alone
// ("Sum", "MeanKeepdim", ...).
std::optional<std::string> row_epilogue(const NodePtr& n) {
  const CNode* c = as_op(n);
  if (c == nullptr || c->inputs().empty() || !c->input(0)->abstract().is_tensor()) {
    return std::nullopt;
  }
  const Primitive& p = *c->primitive();
  const TensorMeta& out = c->abstract().tensor();
  const TensorMeta& in = c->input(0)->abstract().tensor();
  if (!is_floating_point(out.dtype) || in.dtype != out.dtype || in.shape.empty())
    return std::nullopt;
  if (in.shape.back() > kMaxRow) return std::nullopt;
  const Attrs& attrs = p.normalized_attrs();
  const auto is_last = [&](int64_t dim) { return dim == -1 || dim == in.ndim() - 1; };
  if (p.name() == "Softmax" || p.name() == "LogSoftmax") {
    return is_last(attrs.get<int64_t>("dim")) ? std::optional<std::string>(p.name())
                                              : std::nullopt;
  }
  if (p.name() != "ReduceSum" && p.name() != "ReduceMean") return std::nullopt;
  const std::vector<int64_t> dims = attrs.get<std::vector<int64_t>>("dims");
  if (dims.size() != 1 || !is_last(dims[0])) return std::nullopt;
  if (p.name() == "ReduceSum" && !attrs.is_none("dtype") && attrs.get<DType>("dtype") != out.dtype) {
    return std::nullopt;
  }
  return std::string(p.name() == "ReduceSum" ? "Sum" : "Mean") +
         (attrs.get<bool>("keepdim") ? "Keepdim" : "");
}

class ElementwiseFusion final : public Pass {
 public:
  ElementwiseFusion() : Pass(kElementwiseFusionName) {}

  bool Run(const FuncGraphPtr& graph) override {
    KILN_CHECK_VALUE(graph != nullptr) << "pass '" << name() << "': Run got a null graph";
    const std::vector<NodePtr> order = graph->topological_order();
    std::unordered_map<const Node*, size_t> position;
    for (size_t i = 0; i < order.size(); ++i) position.emplace(order[i].get(), i);
    std::vector<bool> taken(order.size(), false);
    size_t fused = 0;
    for (size_t i = order.size(); i-- > 0;) {
      if (taken[i]) continue;
      if (fuse_from(graph, order, position, i, taken)) ++fused;
    }
    record_matches(fused);
    return fused > 0;
  }

 private:
  // Tries to fuse the group rooted at order[root]; true when it replaced it.
  bool fuse_from(const FuncGraphPtr& graph, const std::vector<NodePtr>& order,
                 const std::unordered_map<const Node*, size_t>& position, size_t root,
                 std::vector<bool>& taken) {
    const NodePtr& root_node = order[root];
    const CNode* root_op = as_op(root_node);
    if (root_op == nullptr) return false;
    const TensorMeta& out = root_op->abstract().tensor();
    if (!is_floating_point(out.dtype)) return false;
    const std::optional<std::string> epilogue = row_epilogue(root_node);
    const std::optional<std::string> root_instruction =
        epilogue ? epilogue : elementwise_instruction(root_node, out.dtype);
    if (!root_instruction) return false;
    // The shape every member computes: the root's, or its input's under a row epilogue.
    const Shape& shape = epilogue ? root_op->input(0)->abstract().shape() : out.shape;

    std::unordered_map<const Node*, std::string> members;  // node -> its instruction
    members.emplace(root_node.get(), *root_instruction);
    std::priority_queue<size_t> candidates;  // positions, latest first
    std::unordered_set<size_t> queued;
    const auto queue_inputs = [&](const NodePtr& n) {
      for (const NodePtr& in : static_cast<const CNode&>(*n).inputs()) {
        const size_t at = position.at(in.get());
        if (!taken[at] && queued.insert(at).second) candidates.push(at);
      }
    };
    queue_inputs(root_node);
    while (!candidates.empty() && members.size() < kMaxInstructions) {
      const size_t at = candidates.top();
      candidates.pop();
      const NodePtr& n = order[at];
      if (n->abstract().is_tensor() && n->abstract().shape() != shape) continue;
      const std::optional<std::string> instruction = elementwise_instruction(n, out.dtype);
      if (!instruction) continue;
      const bool users_inside = std::all_of(n->users().begin(), n->users().end(), [&](const Use& u) {
        return members.count(u.user) != 0;
      });
      if (!users_inside) continue;
      members.emplace(n.get(), *instruction);
      queue_inputs(n);
    }
    if (members.size() < 2) return false;

    // The members in graph order; everything else they read is an input of the fused node.
    std::vector<size_t> at;
    for (const auto& [node, instruction] : members) at.push_back(position.at(node));
    std::sort(at.begin(), at.end());
    std::vector<NodePtr> inputs;
    std::unordered_map<const Node*, size_t> input_index;
    std::unordered_map<const Node*, size_t> result_index;
    std::string program;
    for (size_t j = 0; j < at.size(); ++j) {
      const NodePtr& n = order[at[j]];
      std::string operands;
      for (const NodePtr& in : static_cast<const CNode&>(*n).inputs()) {
        if (!operands.empty()) operands += ',';
        if (auto r = result_index.find(in.get()); r != result_index.end()) {
          operands += "r" + std::to_string(r->second);
          continue;
        }
        auto [it, added] = input_index.emplace(in.get(), inputs.size());
        if (added) inputs.push_back(in);
        operands += "i" + std::to_string(it->second);
      }
      result_index.emplace(n.get(), j);
      if (!program.empty()) program += ';';
      program += members.at(n.get()) + "(" + operands + ")";
    }
    if (inputs.size() > kMaxInputs) return false;
    std::vector<Shape> shapes;
    for (const NodePtr& in : inputs) shapes.push_back(in->abstract().shape());
    if (!fused::plan_layout(shape, shapes)) return false;

    const CNodePtr replacement = graph->add_cnode(
        std::make_shared<Primitive>(fused::kOpName,
                                    Attrs{{"program", program}, {"dtype", out.dtype}}),
        inputs);
    graph->replace_all_uses_with(root_node, replacement);
    for (size_t j = at.size(); j-- > 0;) {  // users before their inputs
      graph->erase(order[at[j]]);
      taken[at[j]] = true;
    }
    return true;
  }
};

}  // namespace

PassPtr make_elementwise_fusion() { return std::make_shared<ElementwiseFusion>(); }

}  // namespace kiln::cpu
