#include <unordered_map>

#include "ir/infer.h"
#include "ir/ir_access.h"
#include "ir/text_format.h"
#include "kiln/ir/func_graph.h"

namespace kiln {

// --- Abstract ---

Abstract::Abstract(const TensorMeta& tensor) : kind_(Kind::kTensor), tensor_(tensor) {}

Abstract::Abstract(TensorMeta&& tensor) : kind_(Kind::kTensor), tensor_(std::move(tensor)) {}

Abstract::Abstract(DType dtype, Shape shape, bool weak)
    : kind_(Kind::kTensor), tensor_(dtype, std::move(shape)) {
  tensor_.weak = weak;
}

Abstract::Abstract(const Abstract& other) : kind_(other.kind_), tensor_(other.tensor_) {
  if (other.elements_) elements_ = std::make_unique<std::vector<TensorMeta>>(*other.elements_);
}

Abstract& Abstract::operator=(const Abstract& other) {
  if (this != &other) *this = Abstract(other);
  return *this;
}

Abstract::~Abstract() = default;

Abstract Abstract::tuple(std::vector<TensorMeta> elements) {
  Abstract a;
  a.kind_ = Kind::kTuple;
  a.elements_ = std::make_unique<std::vector<TensorMeta>>(std::move(elements));
  return a;
}

const TensorMeta& Abstract::tensor() const {
  KILN_CHECK_TYPE(kind_ == Kind::kTensor) << "expected a tensor abstract, got " << str();
  return tensor_;
}

const std::vector<TensorMeta>& Abstract::elements() const {
  KILN_CHECK_TYPE(kind_ == Kind::kTuple) << "expected a tuple abstract, got " << str();
  return *elements_;
}

namespace {
bool same_meta(const TensorMeta& a, const TensorMeta& b) { return a == b && a.weak == b.weak; }
}  // namespace

bool Abstract::operator==(const Abstract& other) const {
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::kNone: return true;
    case Kind::kTensor: return same_meta(tensor_, other.tensor_);
    case Kind::kTuple:
      return elements_->size() == other.elements_->size() &&
             std::equal(elements_->begin(), elements_->end(), other.elements_->begin(), same_meta);
  }
  return false;
}

std::string Abstract::str() const {
  std::string out;
  ir::text::append_abstract(out, *this);
  return out;
}

// --- Primitive ---

Primitive::Primitive(std::string name, Attrs attrs)
    : name_(std::move(name)),
      attrs_(std::move(attrs)),
      builtin_(name_ == std::string_view(ir::kReturn)         ? Builtin::kReturn
               : name_ == std::string_view(ir::kTupleGetItem) ? Builtin::kTupleGetItem
                                                              : Builtin::kNone) {}

Primitive& Primitive::set_attr(const std::string& name, AttrValue value) {
  attrs_.set(name, std::move(value));
  normalized_valid_ = false;
  return *this;
}

bool Primitive::operator==(const Primitive& other) const {
  return name_ == other.name_ && attrs_ == other.attrs_;
}

namespace {

// Primitives are made per node (the parser makes a million for a million-node graph), so the
// registry lookup behind a fresh one goes through a per-thread table rather than the registry's
// lock; the table is dropped whenever the registry changes.
OpDefPtr find_op(const std::string& name, uint64_t generation) {
  thread_local uint64_t table_generation = 0;
  thread_local std::unordered_map<std::string, OpDefPtr> table;
  if (table_generation != generation) {
    table.clear();
    table_generation = generation;
  }
  auto it = table.find(name);
  if (it == table.end()) it = table.emplace(name, OpRegistry::Instance().find(name)).first;
  return it->second;
}

}  // namespace

void Primitive::refresh() const {
  // Read before the lookup: a registry change after it makes the next call look up again.
  const uint64_t generation = OpRegistry::Instance().generation();
  if (generation == generation_) return;
  op_ = is_builtin() ? nullptr : find_op(name_, generation);
  normalized_valid_ = false;
  generation_ = generation;
}

OpDefPtr Primitive::op_def() const {
  refresh();
  return op_;
}

const OpDef& Primitive::op() const {
  refresh();
  if (op_ == nullptr) {
    KILN_CHECK_VALUE(!is_builtin()) << "'" << name_ << "' is an IR built-in, not an op";
    OpRegistry::Instance().get(name_);  // throws, naming near registered names
  }
  return *op_;
}

bool Primitive::draws_when_run() const {
  const OpDefPtr op = op_def();
  return op != nullptr && op->has_trait(kTraitRandom) &&
         (attrs_.is_none("seed") || attrs_.is_none("offset"));
}

const Attrs& Primitive::normalized_attrs() const {
  const OpDef& def = op();
  if (!normalized_valid_) {
    // An op without attributes, given none, needs no copy (most ops: no allocation per node).
    if (def.attr_specs().empty() && attrs_.items().empty()) {
      normalized_.reset();
    } else {
      normalized_ = std::make_unique<Attrs>(def.normalize_attrs(attrs_));
    }
    normalized_valid_ = true;
  }
  return normalized_ ? *normalized_ : attrs_;
}

// --- Node ---

Node::~Node() = default;

std::string Node::debug_string() const {
  if (id_ == kReturnId) return "return";
  std::string out = "%";
  ir::text::append_uint(out, id_);
  switch (kind_) {
    case Kind::kParameter: {
      const std::string& name = static_cast<const Parameter*>(this)->name();
      out += name.empty() ? " (parameter)" : " (parameter " + name + ")";
      break;
    }
    case Kind::kValue:
      out += " (constant ";
      ir::text::append_abstract(out, abstract_);
      out += ')';
      break;
    case Kind::kCNode: {
      const auto* c = static_cast<const CNode*>(this);
      out += " = ";
      out += c->primitive() ? c->primitive()->name() : "<null primitive>";
      out += '(';
      for (size_t i = 0; i < c->num_inputs(); ++i) {
        if (i) out += ", ";
        const NodePtr& in = c->inputs()[i];
        if (in == nullptr) {
          out += "null";
        } else if (in->id() == kReturnId) {
          out += "return";
        } else {
          out += '%';
          ir::text::append_uint(out, in->id());
        }
      }
      out += ')';
      break;
    }
  }
  return out;
}

Parameter::Parameter(detail::NodeKey, FuncGraph* graph, uint64_t id, TensorMeta meta,
                     std::string name)
    : Node(Kind::kParameter, graph, id, Abstract(std::move(meta))), name_(std::move(name)) {}

ValueNode::ValueNode(detail::NodeKey, FuncGraph* graph, uint64_t id, Tensor value)
    : Node(Kind::kValue, graph, id, value.defined() ? Abstract(TensorMeta::of(value)) : Abstract()),
      value_(std::move(value)) {}

// --- CNode ---

CNode::CNode(detail::NodeKey, FuncGraph* graph, uint64_t id, PrimitivePtr primitive,
             NodeSpan inputs, Abstract&& abstract)
    : Node(Kind::kCNode, graph, id, std::move(abstract)), primitive_(std::move(primitive)) {
  inputs_.assign(inputs);
}

void CNode::set_primitive(PrimitivePtr primitive) {
  KILN_CHECK_VALUE(primitive != nullptr) << debug_string() << ": the primitive may not be null";
  primitive_ = std::move(primitive);
}

const NodePtr& CNode::input(size_t i) const {
  KILN_CHECK_INDEX(i < inputs_.size())
      << debug_string() << ": input " << i << " is out of range (" << inputs_.size() << " inputs)";
  return inputs_[i];
}

void CNode::set_input(size_t i, NodePtr node) {
  input(i);  // range check
  KILN_CHECK_VALUE(graph() != nullptr) << debug_string() << " is detached from its graph";
  KILN_CHECK_VALUE(node != nullptr) << debug_string() << ": input " << i << " may not be null";
  KILN_CHECK_VALUE(node->graph() == graph())
      << debug_string() << ": the new input " << node->debug_string()
      << " does not belong to this node's graph";
  unlink_input(i);
  inputs_.nodes_[i] = std::move(node);
  link_input(i);
}

void CNode::infer() {
  if (id() == kReturnId) return;  // the return node has no abstract of its own
  MetaList local;
  set_abstract(ir::infer_abstract(
      *primitive_, inputs_, graph() != nullptr ? detail::IrAccess::scratch(*graph()) : local));
}

void CNode::link_input(size_t i) {
  Node& in = *inputs_[i];
  inputs_.use_pos_[i] = static_cast<uint32_t>(in.users_.size());
  in.users_.push_back(Use{this, static_cast<uint32_t>(i)});
}

void CNode::unlink_input(size_t i) {
  Node& in = *inputs_[i];
  const uint32_t pos = inputs_.use_pos_[i];
  const Use last = in.users_.back();
  in.users_[pos] = last;
  last.user->inputs_.use_pos_[last.index] = pos;
  in.users_.pop_back();
}

}  // namespace kiln
