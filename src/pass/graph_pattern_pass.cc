// make_graph_pattern_pass: a PatternToPatternPass whose patterns are two graphs (see kiln/pass.h).
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "core/dtype_dispatch.h"
#include "kiln/pass.h"
#include "pass/builtin/builtin_passes.h"

namespace kiln {

namespace {

// The one output of a pattern graph and every node it is computed from, each after its inputs.
std::vector<NodePtr> pattern_nodes(const FuncGraph& graph, const char* which,
                                   const std::string& pass) {
  KILN_CHECK_VALUE(graph.outputs().size() == 1)
      << "pattern '" << pass << "': the " << which << " graph \"" << graph.name() << "\" has "
      << graph.outputs().size() << " outputs; a pattern computes one tensor";
  std::unordered_set<const Node*> used{graph.outputs()[0].get()};
  const std::vector<NodePtr> order = graph.topological_order();
  // Walking the order backwards sees every user before its inputs.
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (!used.count(it->get()) || !(*it)->is_cnode()) continue;
    for (const NodePtr& in : static_cast<const CNode&>(**it).inputs()) used.insert(in.get());
  }
  std::vector<NodePtr> nodes;
  for (const NodePtr& n : order) {
    if (used.count(n.get()) && n != graph.return_node()) nodes.push_back(n);
  }
  return nodes;
}

// Whether every element of `t` (at least one) equals the first; sets *value to it.
bool uniform(const Tensor& t, double* value) {
  if (!t.defined() || t.numel() == 0) return false;
  return visit_dtype(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* data = t.data<T>();
    const double first = convert<double>(data[0]);
    for (int64_t i = 1; i < t.numel(); ++i) {
      if (convert<double>(data[i]) != first) return false;  // a NaN never is uniform
    }
    *value = first;
    return !std::isnan(first);
  });
}

bool same_contents(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const size_t bytes = static_cast<size_t>(a.numel()) * itemsize(a.dtype());
  return std::memcmp(a.data_ptr(), b.data_ptr(), bytes) == 0;
}

// The condition of a var made from a constant of the source graph (see make_graph_pattern_pass).
PatternConditionFunc equal_constant(const Tensor& want) {
  if (!want.defined()) {
    return [](const NodePtr& n) {
      return n->is_value() && !static_cast<const ValueNode&>(*n).value().defined();
    };
  }
  double value = 0;
  if (uniform(want, &value)) return pattern::IsConstantEqual(value);
  return [want](const NodePtr& n) {
    if (!pass::is_frozen_constant(*n)) return false;  // its values may change before the next run
    const Tensor& got = static_cast<const ValueNode&>(*n).value();
    return got.defined() && same_contents(got, want);
  };
}

PrimitivePtr copy_primitive(const CNode& node) {
  return std::make_shared<Primitive>(node.primitive()->name(), node.primitive()->attrs());
}

class GraphPatternPass : public PatternToPatternPass {
 public:
  GraphPatternPass(std::string name, FuncGraphPtr src, FuncGraphPtr dst,
                   GraphPatternCheckFunc check)
      : PatternToPatternPass(std::move(name)),
        src_(std::move(src)),
        dst_(std::move(dst)),
        check_(std::move(check)) {
    KILN_CHECK_VALUE(src_ != nullptr && dst_ != nullptr)
        << "pattern '" << this->name() << "': a pattern graph is null";
    const size_t n = src_->parameters().size();
    KILN_CHECK_VALUE(dst_->parameters().size() == n)
        << "pattern '" << this->name() << "': the source graph takes " << n
        << " inputs but the destination graph takes " << dst_->parameters().size()
        << " (their inputs correspond by position)";
    src_nodes_ = pattern_nodes(*src_, "source", this->name());
    KILN_CHECK_VALUE(src_nodes_.back()->is_cnode())
        << "pattern '" << this->name() << "': the source graph's output is "
        << src_nodes_.back()->debug_string() << ", not an op; a source pattern computes something";
    dst_nodes_ = pattern_nodes(*dst_, "destination", this->name());
    std::unordered_set<const Node*> used(src_nodes_.size());
    for (const NodePtr& node : src_nodes_) used.insert(node.get());
    for (size_t i = 0; i < n; ++i) {
      const ParameterPtr& p = src_->parameters()[i];
      var_names_.push_back(p->name().empty() ? "input" + std::to_string(i) : p->name());
      KILN_CHECK_VALUE(used.count(p.get()))
          << "pattern '" << this->name() << "': input " << i << " ('" << var_names_.back()
          << "') of the source graph is not used by its output; a pattern matches the inputs "
             "of the ops it computes, so every input must be one";
    }
  }

  void DefineSrcPattern(SrcPattern* src) override {
    std::unordered_map<const Node*, std::string> names;
    for (size_t i = 0; i < var_names_.size(); ++i) {
      names.emplace(src_->parameters()[i].get(), var_names_[i]);
      src->AddVar(var_names_[i]);
    }
    for (const NodePtr& node : src_nodes_) {
      if (node->is_parameter()) continue;
      const std::string name = "%" + std::to_string(node->id());
      names.emplace(node.get(), name);
      if (node->is_value()) {
        const Tensor& value = static_cast<const ValueNode&>(*node).value();
        constants_.emplace(name, value);
        src->AddVar(name, equal_constant(value));
        continue;
      }
      const auto& c = static_cast<const CNode&>(*node);
      std::vector<PatternInput> inputs{copy_primitive(c)};
      for (const NodePtr& in : c.inputs()) inputs.emplace_back(names.at(in.get()));
      src->AddCNode(name, inputs);
    }
  }

  void DefineDstPattern(DstPattern* dst) override {
    std::unordered_map<const Node*, std::string> names;
    for (size_t i = 0; i < var_names_.size(); ++i) {
      names.emplace(dst_->parameters()[i].get(), var_names_[i]);
    }
    for (const NodePtr& node : dst_nodes_) {
      if (node->is_parameter()) continue;
      const std::string name = "%dst" + std::to_string(node->id());
      names.emplace(node.get(), name);
      if (node->is_value()) {
        const Tensor value = static_cast<const ValueNode&>(*node).value();
        dst->AddValueNode(name, [value](const PatternMap&) { return value; });
        continue;
      }
      const auto& c = static_cast<const CNode&>(*node);
      std::vector<PatternInput> inputs{copy_primitive(c)};
      for (const NodePtr& in : c.inputs()) inputs.emplace_back(names.at(in.get()));
      dst->AddCNode(name, inputs);
    }
    // The output is the last node added, unless it is an input (a rewrite to one of the vars).
    const NodePtr& out = dst_nodes_.back();
    if (out->is_parameter()) dst->SetRoot(names.at(out.get()));
  }

  bool CheckMatchedDAG(const PatternMap& map, const FuncGraphPtr&, const NodePtr&) const override {
    if (check_ == nullptr) return true;
    std::vector<NodePtr> vars;
    vars.reserve(var_names_.size());
    for (const std::string& name : var_names_) vars.push_back(map.Get(name));
    return check_(vars);
  }

  std::vector<Tensor> ExampleConstants(const std::string& var) const override {
    auto it = constants_.find(var);
    if (it == constants_.end()) return {};
    return {it->second};
  }

 private:
  FuncGraphPtr src_;
  FuncGraphPtr dst_;
  GraphPatternCheckFunc check_;
  std::vector<NodePtr> src_nodes_;
  std::vector<NodePtr> dst_nodes_;
  std::vector<std::string> var_names_;                 // by input position
  std::unordered_map<std::string, Tensor> constants_;  // the source's constants, by var name
};

}  // namespace

std::shared_ptr<PatternToPatternPass> make_graph_pattern_pass(std::string name, FuncGraphPtr src,
                                                              FuncGraphPtr dst,
                                                              GraphPatternCheckFunc check) {
  return std::make_shared<GraphPatternPass>(std::move(name), std::move(src), std::move(dst),
                                            std::move(check));
}

}  // namespace kiln
