// CommonSubexpressionElimination: nodes that compute the same value become one.
//
// Two op nodes are the same when they apply the same primitive name with equal attributes (the
// schema's defaults filled in; floating-point values compared bit for bit, so 0.0 and -0.0
// differ) to the same input nodes, and have the same abstract. Ops with the
// kTraitRandom trait (each call draws new numbers) or kTraitSideEffect are never merged. Two
// constants are the same when they view the same memory the same way, or when both are frozen
// (see Note [Frozen constants] in builtin_passes.h), at most kSmallConstantBytes, and equal in
// dtype, shape, weakness and bytes; undefined constants (None) are all the same. Two graph
// outputs are never merged (Note [Outputs stay fresh]): the caller gets two tensors, as eagerly.
//
// One walk in topological order with a hash table: by the time a node is looked at, each of its
// inputs is the first of its kind, so comparing input pointers is enough. A node equal to one
// seen before gives its users to that one and is erased. Linear in the graph (hashing; no
// recursion), and deterministic: the node that stays is the first in topological order.
#include <cstring>
#include <functional>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "ir/ir_access.h"
#include "pass/builtin/builtin_passes.h"

namespace kiln::pass {
namespace {

size_t mix(size_t seed, size_t value) {
  // boost::hash_combine's mixing, widened to 64 bits.
  return seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 12) + (seed >> 4));
}

size_t bits_of(double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  return static_cast<size_t>(bits);
}

size_t hash_attr(const AttrValue& v) {
  size_t h = v.index();
  if (const auto* b = std::get_if<bool>(&v)) return mix(h, *b);
  if (const auto* i = std::get_if<int64_t>(&v)) return mix(h, static_cast<size_t>(*i));
  if (const auto* d = std::get_if<double>(&v)) return mix(h, bits_of(*d));
  if (const auto* s = std::get_if<std::string>(&v)) return mix(h, std::hash<std::string>()(*s));
  if (const auto* ints = std::get_if<std::vector<int64_t>>(&v)) {
    for (int64_t i : *ints) h = mix(h, static_cast<size_t>(i));
    return h;
  }
  if (const auto* dtype = std::get_if<DType>(&v)) return mix(h, static_cast<size_t>(*dtype));
  if (const auto* s = std::get_if<Scalar>(&v)) {
    h = mix(h, static_cast<size_t>(s->kind()));
    return mix(h, s->is_floating_point() ? bits_of(s->to_double())
                                         : static_cast<size_t>(s->to_int()));
  }
  return h;  // None
}

// Equal attribute values; floats bit for bit (AttrValue's == says 0.0 == -0.0 and NaN != NaN).
bool same_attr(const AttrValue& a, const AttrValue& b) {
  if (a.index() != b.index()) return false;
  if (const auto* d = std::get_if<double>(&a)) return bits_of(*d) == bits_of(std::get<double>(b));
  if (const auto* s = std::get_if<Scalar>(&a)) {
    const Scalar& t = std::get<Scalar>(b);
    if (s->kind() != t.kind()) return false;
    return s->is_floating_point() ? bits_of(s->to_double()) == bits_of(t.to_double())
                                  : s->to_int() == t.to_int();
  }
  return a == b;
}

// The attributes two nodes of one primitive name are compared by.
const Attrs& attrs_of(const Primitive& p) {
  return p.is_builtin() ? p.attrs() : p.normalized_attrs();
}

bool mergeable_op(const Primitive& p) {
  if (p.is_return()) return false;
  if (p.is_tuple_get_item()) return true;
  const OpDefPtr op = p.op_def();
  return op != nullptr && !op->has_trait(kTraitRandom) && !op->has_trait(kTraitSideEffect);
}

size_t hash_meta(size_t h, const Tensor& t) {
  h = mix(h, static_cast<size_t>(t.dtype()));
  h = mix(h, t.is_weak_scalar());
  for (int64_t d : t.shape()) h = mix(h, static_cast<size_t>(d));
  return h;
}

// How a node is compared: the kinds of keys (an op node; a constant compared by value; by the
// memory it views; None).
enum class KeyKind : uint8_t { kOp, kValue, kAlias, kNone };

struct Key {
  const Node* node;
  KeyKind kind;
  size_t hash;
};

struct KeyHash {
  size_t operator()(const Key& k) const { return k.hash; }
};

struct KeyEqual {
  bool operator()(const Key& a, const Key& b) const {
    if (a.kind != b.kind || a.hash != b.hash) return false;
    switch (a.kind) {
      case KeyKind::kNone: return true;
      case KeyKind::kOp: return same_op(static_cast<const CNode&>(*a.node),
                                        static_cast<const CNode&>(*b.node));
      case KeyKind::kValue: return same_value(value(a), value(b));
      case KeyKind::kAlias: return same_view(value(a), value(b));
    }
    return false;
  }

  static const Tensor& value(const Key& k) {
    return static_cast<const ValueNode&>(*k.node).value();
  }

  static bool same_op(const CNode& a, const CNode& b) {
    if (a.primitive()->name() != b.primitive()->name() || a.num_inputs() != b.num_inputs() ||
        a.abstract() != b.abstract()) {
      return false;
    }
    for (size_t i = 0; i < a.num_inputs(); ++i) {
      if (a.input(i) != b.input(i)) return false;
    }
    const auto& x = attrs_of(*a.primitive()).items();
    const auto& y = attrs_of(*b.primitive()).items();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      if (x[i].first != y[i].first || !same_attr(x[i].second, y[i].second)) return false;
    }
    return true;
  }

  static bool same_meta(const Tensor& a, const Tensor& b) {
    return a.dtype() == b.dtype() && a.shape() == b.shape() &&
           a.is_weak_scalar() == b.is_weak_scalar();
  }

  static bool same_value(const Tensor& a, const Tensor& b) {
    return same_meta(a, b) && std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
  }

  static bool same_view(const Tensor& a, const Tensor& b) {
    return same_meta(a, b) && a.storage() == b.storage() &&
           a.storage_offset() == b.storage_offset() && a.strides() == b.strides();
  }
};

Key key_of(const Node& n) {
  if (n.is_cnode()) {
    const auto& c = static_cast<const CNode&>(n);
    const Primitive& p = *c.primitive();
    size_t h = std::hash<std::string>()(p.name());
    for (const NodePtr& in : c.inputs()) h = mix(h, std::hash<const Node*>()(in.get()));
    for (const auto& [name, value] : attrs_of(p).items()) h = mix(h, hash_attr(value));
    return {&n, KeyKind::kOp, h};
  }
  const Tensor& t = static_cast<const ValueNode&>(n).value();
  if (!t.defined()) return {&n, KeyKind::kNone, 0};
  if (t.nbytes() <= kSmallConstantBytes && is_frozen_constant(n)) {
    const std::string_view bytes(static_cast<const char*>(t.data_ptr()), t.nbytes());
    return {&n, KeyKind::kValue, mix(hash_meta(1, t), std::hash<std::string_view>()(bytes))};
  }
  size_t h = hash_meta(2, t);
  h = mix(h, std::hash<const void*>()(t.storage().get()));
  return {&n, KeyKind::kAlias, mix(h, static_cast<size_t>(t.storage_offset()))};
}

class CommonSubexpressionElimination final : public Pass {
 public:
  CommonSubexpressionElimination() : Pass(kCommonSubexpressionEliminationName) {}

  bool Run(const FuncGraphPtr& graph) override {
    KILN_CHECK_VALUE(graph != nullptr) << "pass '" << name() << "': Run got a null graph";
    const std::vector<Node*> order = detail::topo_order(*graph);
    std::unordered_set<Key, KeyHash, KeyEqual> seen;
    seen.reserve(order.size());
    size_t merged = 0;
    for (Node* n : order) {
      if (n->is_parameter()) continue;
      if (n->is_cnode() && !mergeable_op(*static_cast<CNode*>(n)->primitive())) continue;
      const auto [it, inserted] = seen.insert(key_of(*n));
      if (inserted || makes_output_alias(*n, *it->node)) continue;  // Note [Outputs stay fresh]
      const std::vector<NodePtr>& slots = detail::IrAccess::slots(*graph);
      const NodePtr duplicate = slots[detail::IrAccess::slot(*n)];
      graph->replace_all_uses_with(duplicate, slots[detail::IrAccess::slot(*it->node)]);
      graph->erase(duplicate);  // its inputs are the kept node's: nothing else goes
      ++merged;
    }
    record_matches(merged);
    return merged > 0;
  }
};

}  // namespace

PassPtr make_common_subexpression_elimination() {
  return std::make_shared<CommonSubexpressionElimination>();
}

}  // namespace kiln::pass
