// make_graph_pattern_pass: a PatternToPatternPass whose patterns are two graphs (see kiln/pass.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <type_traits>
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

// An element as a number: integers and bools exactly, floating values as a double.
template <typename T>
Scalar number_of(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return Scalar(v);
  } else if constexpr (std::is_integral_v<T>) {
    return Scalar(static_cast<int64_t>(v));
  } else {
    return Scalar(convert<double>(v));
  }
}

// Whether every element of `t` (at least one) is the same number as the first, not NaN; sets
// *value to it.
bool uniform(const Tensor& t, Scalar* value) {
  if (!t.defined() || t.numel() == 0) return false;
  return visit_dtype(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* data = t.data<T>();
    const Scalar first = number_of(data[0]);
    if (first.is_floating_point() && std::isnan(first.to_double())) return false;
    for (int64_t i = 1; i < t.numel(); ++i) {
      if (!same_value(number_of(data[i]), first)) return false;
    }
    *value = first;
    return true;
  });
}

bool same_contents(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const size_t bytes = static_cast<size_t>(a.numel()) * itemsize(a.dtype());
  return std::memcmp(a.data_ptr(), b.data_ptr(), bytes) == 0;
}

// The shape the inputs of `node` other than `constant` broadcast to; nullopt when one is no tensor,
// there is none, or they do not broadcast together.
std::optional<Shape> broadcast_of_others(const CNode& node, const Node* constant) {
  std::optional<Shape> out;
  try {
    for (const NodePtr& in : node.inputs()) {
      if (in.get() == constant) continue;
      if (!in->abstract().is_tensor()) return std::nullopt;
      const Shape& shape = in->abstract().shape();
      out = out ? broadcast_shapes(*out, shape) : shape;
    }
  } catch (const Error&) {  // kShape: they do not broadcast (a rewrite-time check, rarely reached)
    return std::nullopt;
  }
  return out;
}

// Whether `user` broadcasts its inputs elementwise (kTraitElementwise) and has the shape its inputs
// other than `constant` broadcast to: the constant, whatever its shape, then widens nothing.
bool widens_nothing(const Node* constant, const CNode& user) {
  const OpDefPtr op = user.primitive()->is_builtin() ? nullptr : user.primitive()->op_def();
  if (op == nullptr || !op->has_trait(kTraitElementwise)) return false;
  const std::optional<Shape> others = broadcast_of_others(user, constant);
  return others && user.abstract().is_tensor() && user.abstract().shape() == *others;
}

// The shapes of a node's inputs (empty for one that is no tensor).
std::vector<Shape> input_shapes(const CNode& node) {
  std::vector<Shape> shapes;
  for (const NodePtr& in : node.inputs()) {
    shapes.push_back(in->abstract().is_tensor() ? in->abstract().shape() : Shape{});
  }
  return shapes;
}

// The condition of a var made from a constant of the source graph (see make_graph_pattern_pass and
// PatternConstant): a frozen constant of one number, any shape, for a uniform constant; of the
// same dtype, shape and contents for another.
PatternConditionFunc equal_constant(const Tensor& want) {
  if (!want.defined()) {
    return [](const NodePtr& n) {
      return n->is_value() && !static_cast<const ValueNode&>(*n).value().defined();
    };
  }
  Scalar value;
  if (!uniform(want, &value)) {
    return [want](const NodePtr& n) {
      if (!pass::is_frozen_constant(*n)) return false;  // its values may change before the next run
      const Tensor& got = static_cast<const ValueNode&>(*n).value();
      return got.defined() && same_contents(got, want);
    };
  }
  return [value](const NodePtr& n) {
    if (!pass::is_frozen_constant(*n)) return false;
    Scalar got;
    return uniform(static_cast<const ValueNode&>(*n).value(), &got) && same_value(got, value);
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
        if (value.defined()) add_pattern_constant(name, *node);
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
    for (const PatternConstant& c : pattern_constants_) {
      if (!c.matches_in(map)) return false;
    }
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
  // Note [Constants of a graph pattern]
  // A pattern's constant that only elementwise ops take, widening none of their operands (a
  // Python number in `a * 2`, a bias row in `a + bias`), matches its value wherever elementwise
  // ops take it without widening anything: a uniform one a constant of its number of any shape,
  // another an equal constant. (Matched by value alone, sum(a * 2) -> sum(a) * 2 was applied to
  // sum(a * full([3, 4, 4], 2)), whose sum hid the wider product from the root's shape check.)
  // Any other constant (one that widens an operand, a weight in a MatMul) matches only at the
  // pattern's shapes: its own, and those of every input of the ops that take it, as traced
  // (sum(a @ full([4, 4], 2)) -> sum(a) * 8 matched b @ full([3, 3], 2)).
  struct PatternConstant {
    struct User {
      std::string name;
      std::vector<Shape> input_shapes;
    };
    std::string name;
    Shape shape;
    bool elementwise_only;
    std::vector<User> users;

    bool matches_in(const PatternMap& map) const {
      const NodePtr& got = map.Get(name);
      if (!elementwise_only && got->abstract().shape() != shape) return false;
      for (const User& user : users) {
        const auto& matched = static_cast<const CNode&>(*map.Get(user.name));
        const bool fits = elementwise_only ? widens_nothing(got.get(), matched)
                                           : input_shapes(matched) == user.input_shapes;
        if (!fits) return false;
      }
      return true;
    }
  };

  void add_pattern_constant(const std::string& name, const Node& constant) {
    PatternConstant c{name, constant.abstract().shape(), true, {}};
    for (const NodePtr& node : src_nodes_) {
      if (!node->is_cnode()) continue;
      const auto& user = static_cast<const CNode&>(*node);
      const auto& in = user.inputs();
      if (std::find_if(in.begin(), in.end(),
                       [&](const NodePtr& n) { return n.get() == &constant; }) == in.end()) {
        continue;
      }
      c.users.push_back({"%" + std::to_string(user.id()), input_shapes(user)});
      c.elementwise_only = c.elementwise_only && widens_nothing(&constant, user);
    }
    pattern_constants_.push_back(std::move(c));
  }

  FuncGraphPtr src_;
  FuncGraphPtr dst_;
  GraphPatternCheckFunc check_;
  std::vector<NodePtr> src_nodes_;
  std::vector<NodePtr> dst_nodes_;
  std::vector<std::string> var_names_;                 // by input position
  std::unordered_map<std::string, Tensor> constants_;  // the source's constants, by var name
  std::vector<PatternConstant> pattern_constants_;
};

}  // namespace

std::shared_ptr<PatternToPatternPass> make_graph_pattern_pass(std::string name, FuncGraphPtr src,
                                                              FuncGraphPtr dst,
                                                              GraphPatternCheckFunc check) {
  return std::make_shared<GraphPatternPass>(std::move(name), std::move(src), std::move(dst),
                                            std::move(check));
}

}  // namespace kiln
