// Graph IR nodes: Abstract (what a node's value is), Primitive (an op name with attributes), and
// Node with its three kinds — Parameter (a graph input), ValueNode (a constant) and CNode (an op
// applied to other nodes).
//
//   auto g = std::make_shared<kiln::FuncGraph>("f");
//   kiln::ParameterPtr x = g->add_parameter(kiln::DType::kFloat32, {2, 3}, "x");
//   kiln::CNodePtr neg = g->add_cnode(std::make_shared<kiln::Primitive>("Neg"), {x});
//   neg->abstract().str();        // "float32[2, 3]", from Neg's infer
//   x->users()[0].user;           // neg.get(): input 0 of neg uses x
//
// Nodes are made by their FuncGraph (kiln/ir/func_graph.h), which owns them; a node belongs to one
// graph for its whole life. Every node has a deterministic id (the graph's creation counter, kept
// by the text format), an abstract and the list of its uses, which CNode::set_input and
// FuncGraph::replace_all_uses_with keep exact. Primitive names are the OpRegistry's names, which
// are PascalCase ("Add", "Neg", "MatMul"); "Return" and "TupleGetItem" are IR built-ins.
//
// Thread-safety: a graph and its nodes are used by one thread at a time (passes mutate them in
// place). Distinct graphs may be built and read concurrently if they share no Primitive objects.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "kiln/export.h"
#include "kiln/ir/node_list.h"
#include "kiln/op.h"
#include "kiln/small_vector.h"
#include "kiln/tensor.h"

namespace kiln {

/// What a node's value is, known without data: one tensor (dtype, shape, and whether it is a
/// weak Python number), a tuple of tensors (the value of a multi-output op, taken apart with
/// TupleGetItem), or nothing (a None constant, a graph's return node, or never set).
class KILN_API Abstract {
 public:
  enum class Kind : uint8_t { kNone, kTensor, kTuple };

  Abstract() = default;
  Abstract(const TensorMeta& tensor);  // NOLINT: implicit, a tensor is the common case
  Abstract(TensorMeta&& tensor);       // NOLINT
  Abstract(const Abstract& other);
  Abstract(Abstract&& other) noexcept = default;
  Abstract& operator=(const Abstract& other);
  Abstract& operator=(Abstract&& other) noexcept = default;
  ~Abstract();
  Abstract(DType dtype, Shape shape, bool weak = false);
  static Abstract tuple(std::vector<TensorMeta> elements);

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_tensor() const { return kind_ == Kind::kTensor; }
  bool is_tuple() const { return kind_ == Kind::kTuple; }
  /// The tensor; throws kType when this is not a tensor.
  const TensorMeta& tensor() const;
  DType dtype() const { return tensor().dtype; }
  const Shape& shape() const { return tensor().shape; }
  /// The tuple's elements; throws kType when this is not a tuple.
  const std::vector<TensorMeta>& elements() const;

  /// Equal kinds, dtypes, shapes and weakness.
  bool operator==(const Abstract& other) const;
  bool operator!=(const Abstract& other) const { return !(*this == other); }
  /// "float32[2, 3]", "float64[] weak", "(float32[2], int64[2])", "none"; the text format's
  /// spelling.
  std::string str() const;

 private:
  Kind kind_ = Kind::kNone;
  TensorMeta tensor_;
  // Only tuples (rare) pay for their elements: every node holds an Abstract.
  std::unique_ptr<std::vector<TensorMeta>> elements_;
};

/// An operation as graph nodes name it: the op's registered name and its attributes (as given;
/// the schema's defaults are filled in only for inference). A Primitive may be shared by several
/// CNodes; changing its attributes changes all of them.
class KILN_API Primitive {
 public:
  explicit Primitive(std::string name, Attrs attrs = {});

  const std::string& name() const { return name_; }
  const Attrs& attrs() const { return attrs_; }
  Primitive& set_attr(const std::string& name, AttrValue value);
  /// Same name and attributes.
  bool operator==(const Primitive& other) const;

  /// True for the IR's own primitives ("Return", "TupleGetItem"), which are not ops.
  bool is_builtin() const { return builtin_ != Builtin::kNone; }
  bool is_return() const { return builtin_ == Builtin::kReturn; }
  bool is_tuple_get_item() const { return builtin_ == Builtin::kTupleGetItem; }
  /// The registered op; null for a built-in or a name the registry does not know. Cached, and
  /// looked up again after the registry changes.
  OpDefPtr op_def() const;
  /// The registered op; throws kValue (naming near registered names) when there is none.
  const OpDef& op() const;
  /// attrs() checked against the op's schema, defaults filled in (OpDef::normalize_attrs);
  /// cached like op_def(). Throws for a built-in or unregistered primitive.
  const Attrs& normalized_attrs() const;
  /// True for a random op (kTraitRandom) whose "seed" or "offset" attribute is None: it reserves
  /// its counters from the default generator when it runs, so whatever runs a graph keeps such
  /// nodes in program order and never drops one (Note [Random ops in graphs], src/ops/random.cc).
  bool draws_when_run() const;

 private:
  enum class Builtin : uint8_t { kNone, kReturn, kTupleGetItem };
  void refresh() const;

  std::string name_;
  Attrs attrs_;
  Builtin builtin_;
  // Lookup cache; valid while generation_ equals the registry's generation.
  mutable bool normalized_valid_ = false;
  mutable uint64_t generation_ = 0;
  mutable OpDefPtr op_;
  mutable std::unique_ptr<Attrs> normalized_;  // null while attrs_ needs no normalizing
};

/// One use of a node: input `index` of `user`.
struct Use {
  CNode* user;
  uint32_t index;
  bool operator==(const Use& o) const { return user == o.user && index == o.index; }
};
/// A node's uses, in no meaningful order (removal swaps the last use into the hole). Most nodes
/// have one or two, which live inline.
using Uses = SmallVector<Use, 2>;

class KILN_API Node {
 public:
  enum class Kind : uint8_t { kParameter, kValue, kCNode };
  /// The id of every graph's return node (never printed: the text format writes `return`).
  static constexpr uint64_t kReturnId = ~uint64_t{0};

  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  virtual ~Node();

  Kind kind() const { return kind_; }
  bool is_parameter() const { return kind_ == Kind::kParameter; }
  bool is_value() const { return kind_ == Kind::kValue; }
  bool is_cnode() const { return kind_ == Kind::kCNode; }
  /// Deterministic: the owning graph's creation counter, or the id the text format gave it.
  uint64_t id() const { return id_; }
  /// The graph that owns this node; null once the node was erased or its graph destroyed (a
  /// detached node has no inputs and no users).
  FuncGraph* graph() const { return graph_; }

  const Abstract& abstract() const { return abstract_; }
  /// Sets the abstract without checking it (ir::verify compares it with inference).
  void set_abstract(Abstract abstract) { abstract_ = std::move(abstract); }
  /// Every use of this node. Edits of those uses (set_input, replace_all_uses_with, erase)
  /// change the list, so copy it before editing while iterating.
  const Uses& users() const { return users_; }

  /// How messages name this node: "%5 = Add(%3, %4)", "%0 (parameter x)", "%2 (constant)",
  /// "return".
  std::string debug_string() const;

 protected:
  Node(Kind kind, FuncGraph* graph, uint64_t id, Abstract&& abstract)
      : kind_(kind), id_(id), graph_(graph), abstract_(std::move(abstract)) {}

 private:
  friend class FuncGraph;
  friend class CNode;
  friend struct detail::IrAccess;

  Kind kind_;
  uint32_t slot_ = 0;  // index in the graph's node table
  uint64_t id_;
  FuncGraph* graph_;
  Abstract abstract_;
  Uses users_;
};

/// A graph input: a tensor with a fixed dtype and shape (a new shape is a new graph).
class KILN_API Parameter final : public Node {
 public:
  Parameter(detail::NodeKey, FuncGraph* graph, uint64_t id, TensorMeta meta, std::string name);
  /// May be empty; unique among a graph's named parameters.
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

/// A constant: a contiguous tensor with memory (a Python number is a weak 0-d tensor).
class KILN_API ValueNode final : public Node {
 public:
  ValueNode(detail::NodeKey, FuncGraph* graph, uint64_t id, Tensor value);
  const Tensor& value() const { return value_; }

 private:
  Tensor value_;
};

/// An op applied to input nodes. Its abstract comes from the primitive's infer when it is made;
/// changing inputs or the primitive afterwards does not infer again (call infer()).
class KILN_API CNode final : public Node {
 public:
  CNode(detail::NodeKey, FuncGraph* graph, uint64_t id, PrimitivePtr primitive, NodeSpan inputs,
        Abstract&& abstract);

  const PrimitivePtr& primitive() const { return primitive_; }
  void set_primitive(PrimitivePtr primitive);
  const InputList& inputs() const { return inputs_; }
  size_t num_inputs() const { return inputs_.size(); }
  const NodePtr& input(size_t i) const;
  /// Replaces input `i`, moving the use from the old input to `node`. `node` must belong to the
  /// same graph (kValue otherwise). O(1).
  void set_input(size_t i, NodePtr node);
  /// Sets the abstract from the primitive's infer on the inputs' abstracts; throws infer's error.
  void infer();

 private:
  friend class FuncGraph;
  friend struct detail::IrAccess;
  // Adds this node's use of input i to that input's use list, or takes it out again (O(1): the
  // position of each use is kept in the InputList).
  void link_input(size_t i);
  void unlink_input(size_t i);

  PrimitivePtr primitive_;
  InputList inputs_;
};

}  // namespace kiln
