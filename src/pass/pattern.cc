// Defining patterns: SrcPattern, DstPattern, PatternMap, the pattern conditions, and the check
// that turns the definitions into slots (see pattern_definition.h).
#include <algorithm>

#include "core/dtype_dispatch.h"
#include "pass/builtin/builtin_passes.h"
#include "pass/pattern_definition.h"

namespace kiln {

// --- PatternInput ---

PatternInput::PatternInput(PrimitivePtr primitive) : primitive_(std::move(primitive)) {
  KILN_CHECK_VALUE(primitive_ != nullptr) << "a pattern's primitive is null";
}
PatternInput::PatternInput(std::string name) : name_(std::move(name)) {}
PatternInput::PatternInput(const char* name) : name_(name != nullptr ? name : "") {}

// --- defining ---

namespace {

using Kind = PatternDefinition::Kind;

PatternDefinition::Element cnode_element(const std::string& name, Kind kind,
                                         const std::vector<PatternInput>& inputs,
                                         std::string* error) {
  PatternDefinition::Element e;
  e.name = name;
  e.kind = kind;
  const char* which = kind == Kind::kCNode ? "source" : "destination";
  if (inputs.empty() || !inputs[0].is_primitive()) {
    if (error->empty()) {
      *error = std::string(which) + " node '" + name +
               "': the first element of its input list must be a primitive, e.g. "
               "{std::make_shared<kiln::Primitive>(\"Add\"), \"x\", \"y\"}";
    }
    return e;
  }
  e.primitive = inputs[0].primitive();
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (inputs[i].is_primitive()) {
      if (error->empty()) {
        *error = std::string(which) + " node '" + name + "': input " + std::to_string(i - 1) +
                 " is a primitive; only the first element may be one (define the node with "
                 "AddCNode and use its name)";
      }
      continue;
    }
    e.input_names.push_back(inputs[i].name());
  }
  return e;
}

}  // namespace

void PatternDefinition::add(Element element) {
  if (first_error.empty()) {
    if (element.name.empty()) {
      first_error = "a pattern node has an empty name";
    } else {
      for (const Element& e : elements) {
        if (e.name == element.name) {
          first_error = "the name '" + element.name + "' is defined twice";
          break;
        }
      }
    }
  }
  elements.push_back(std::move(element));
}

SrcPattern& SrcPattern::AddVar(const std::string& name, PatternConditionFunc cond) {
  PatternDefinition::Element e;
  e.name = name;
  e.kind = Kind::kVar;
  e.cond = std::move(cond);
  definition_->add(std::move(e));
  return *this;
}

SrcPattern& SrcPattern::AddSeqVar(const std::string& name, PatternConditionFunc cond) {
  PatternDefinition::Element e;
  e.name = name;
  e.kind = Kind::kSeqVar;
  e.cond = std::move(cond);
  definition_->add(std::move(e));
  return *this;
}

SrcPattern& SrcPattern::AddCNode(const std::string& name,
                                 std::initializer_list<PatternInput> inputs,
                                 PatternConditionFunc cond) {
  return AddCNode(name, std::vector<PatternInput>(inputs), std::move(cond));
}

SrcPattern& SrcPattern::AddCNode(const std::string& name, const std::vector<PatternInput>& inputs,
                                 PatternConditionFunc cond) {
  PatternDefinition::Element e =
      cnode_element(name, Kind::kCNode, inputs, &definition_->first_error);
  e.cond = std::move(cond);
  definition_->add(std::move(e));
  return *this;
}

DstPattern& DstPattern::AddCNode(const std::string& name,
                                 std::initializer_list<PatternInput> inputs,
                                 BuildCNodeFunc build) {
  return AddCNode(name, std::vector<PatternInput>(inputs), std::move(build));
}

DstPattern& DstPattern::AddCNode(const std::string& name, const std::vector<PatternInput>& inputs,
                                 BuildCNodeFunc build) {
  PatternDefinition::Element e =
      cnode_element(name, Kind::kDstCNode, inputs, &definition_->first_error);
  e.build_cnode = std::move(build);
  definition_->add(std::move(e));
  return *this;
}

DstPattern& DstPattern::AddValueNode(const std::string& name, BuildValueFunc build) {
  PatternDefinition::Element e;
  e.name = name;
  e.kind = Kind::kDstValue;
  if (build == nullptr && definition_->first_error.empty()) {
    definition_->first_error = "destination value node '" + name + "' has no BuildValueFunc";
  }
  e.build_value = std::move(build);
  definition_->add(std::move(e));
  return *this;
}

DstPattern& DstPattern::SetRoot(const std::string& name) {
  definition_->root_name = name;
  return *this;
}

// --- checking ---

namespace {

bool known_primitive(const Primitive& p) {
  return p.is_tuple_get_item() || (!p.is_builtin() && p.op_def() != nullptr);
}

}  // namespace

void PatternDefinition::check() {
  const auto fail = [&](const std::string& what) {
    KILN_FAIL(kValue) << "pass '" << pass_name << "': invalid pattern: " << what;
  };
  if (!first_error.empty()) fail(first_error);
  num_src = 0;
  while (num_src < elements.size() && (elements[num_src].kind == Kind::kVar ||
                                       elements[num_src].kind == Kind::kSeqVar ||
                                       elements[num_src].kind == Kind::kCNode)) {
    ++num_src;
  }
  slots.clear();
  src_root = -1;
  for (size_t i = 0; i < elements.size(); ++i) {
    Element& e = elements[i];
    const bool is_src = i < num_src;
    const char* which = is_src ? "source" : "destination";
    if (e.kind == Kind::kCNode || e.kind == Kind::kDstCNode) {
      if (!known_primitive(*e.primitive)) {
        fail(std::string(which) + " node '" + e.name + "' uses the unknown primitive '" +
             e.primitive->name() + "' (not a registered op)");
      }
      // A misspelt attribute never matches in the source and fails every rewrite in the
      // destination: refused here, where it shows.
      if (const OpDefPtr op = e.primitive->is_builtin() ? nullptr : e.primitive->op_def()) {
        for (const auto& [attr, value] : e.primitive->attrs().items()) {
          const auto& specs = op->attr_specs();
          if (std::any_of(specs.begin(), specs.end(),
                          [&](const AttrSpec& spec) { return spec.name == attr; })) {
            continue;
          }
          std::string known;
          for (const AttrSpec& spec : specs) known += (known.empty() ? "" : ", ") + spec.name;
          fail(std::string(which) + " node '" + e.name + "' gives " + e.primitive->name() +
               " the unknown attribute '" + attr +
               "' (its attributes: " + (known.empty() ? "none" : known) + ")");
        }
      }
      e.inputs.clear();
      e.seq_position = -1;
      for (const std::string& in : e.input_names) {
        auto it = slots.find(in);
        if (it == slots.end()) {
          const bool later = std::any_of(elements.begin() + static_cast<long>(i), elements.end(),
                                         [&](const Element& o) { return o.name == in; });
          fail(std::string(which) + " node '" + e.name + "' uses '" + in + "' " +
               (later ? "before it is defined" : "which is not defined") +
               (is_src || later ? "" : " in the source pattern or earlier in the destination"));
        }
        const Element& input = elements[static_cast<size_t>(it->second)];
        if (is_src && input.kind == Kind::kSeqVar) {
          if (e.seq_position >= 0) {
            fail("source node '" + e.name + "' has two seq vars among its inputs");
          }
          e.seq_position = static_cast<int>(e.inputs.size());
        }
        e.inputs.push_back(it->second);
      }
      if (is_src) src_root = static_cast<int>(i);
    }
    slots.emplace(e.name, static_cast<int>(i));
  }
  if (src_root < 0) fail("the source pattern has no CNode (its last CNode is the root)");

  // Every source element must be used by the root (else it would never be bound), and a seq var
  // only once (its length is fixed by the one input list it sits in).
  std::vector<int> uses(num_src, 0);
  std::vector<int> depth_of(num_src, 0);
  depth_of[static_cast<size_t>(src_root)] = 1;
  uses[static_cast<size_t>(src_root)] = 1;
  for (int i = src_root; i >= 0; --i) {
    const Element& e = elements[static_cast<size_t>(i)];
    if (uses[static_cast<size_t>(i)] == 0 || e.kind != Kind::kCNode) continue;
    for (int in : e.inputs) {
      ++uses[static_cast<size_t>(in)];
      const int d = depth_of[static_cast<size_t>(i)] + 1;
      depth_of[static_cast<size_t>(in)] = std::max(depth_of[static_cast<size_t>(in)], d);
    }
  }
  depth = 1;
  for (size_t i = 0; i < num_src; ++i) {
    const Element& e = elements[i];
    if (uses[i] == 0) {
      fail("source " + std::string(e.kind == Kind::kCNode ? "node" : "var") + " '" + e.name +
           "' is not used by the root '" + elements[static_cast<size_t>(src_root)].name +
           "' (the last CNode of the source pattern is the root)");
    }
    if (e.kind == Kind::kSeqVar && uses[i] > 1) {
      fail("seq var '" + e.name + "' is used more than once");
    }
    if (e.kind == Kind::kCNode) depth = std::max(depth, depth_of[i]);
  }

  if (!root_name.empty()) {
    auto it = slots.find(root_name);
    if (it == slots.end()) fail("SetRoot names '" + root_name + "', which is not defined");
    if (elements[static_cast<size_t>(it->second)].kind == Kind::kSeqVar) {
      fail("SetRoot names the seq var '" + root_name + "'; the root must be one node");
    }
    dst_root = it->second;
  } else if (elements.size() > num_src) {
    dst_root = static_cast<int>(elements.size()) - 1;
  } else {
    fail("the destination pattern is empty (add a node, or SetRoot to a source name)");
  }
  if (dst_root == src_root) {
    fail("the destination root is the source root '" + root_name + "' (a rewrite to itself)");
  }
}

// --- PatternMap ---

PatternMap::PatternMap() : impl_(std::make_unique<Impl>()) {}
PatternMap::~PatternMap() = default;

namespace {

[[noreturn]] void unknown_name(const PatternMap::Impl& m, const std::string& name,
                               const char* why) {
  std::string names;
  if (m.definition != nullptr) {
    for (size_t i = 0; i < m.definition->elements.size(); ++i) {
      if (!m.bound[i]) continue;
      names += (names.empty() ? "'" : ", '") + m.definition->elements[i].name + "'";
    }
  }
  KILN_FAIL(kValue) << "PatternMap: '" << name << "' " << why << "; bound names: "
                    << (names.empty() ? "none" : names);
}

int bound_slot(const PatternMap::Impl& m, const std::string& name) {
  if (m.definition == nullptr) return -1;
  auto it = m.definition->slots.find(name);
  if (it == m.definition->slots.end() || !m.bound[static_cast<size_t>(it->second)]) return -1;
  return it->second;
}

}  // namespace

const NodePtr& PatternMap::Get(const std::string& name) const {
  const int slot = bound_slot(*impl_, name);
  if (slot < 0) unknown_name(*impl_, name, "is not bound");
  if (impl_->definition->at(slot).kind == Kind::kSeqVar) {
    unknown_name(*impl_, name, "is a seq var (use GetSeq)");
  }
  return impl_->nodes[static_cast<size_t>(slot)];
}

const std::vector<NodePtr>& PatternMap::GetSeq(const std::string& name) const {
  const int slot = bound_slot(*impl_, name);
  if (slot < 0) unknown_name(*impl_, name, "is not bound");
  if (impl_->definition->at(slot).kind != Kind::kSeqVar) {
    unknown_name(*impl_, name, "is not a seq var (use Get)");
  }
  return impl_->seqs[static_cast<size_t>(slot)];
}

bool PatternMap::Contains(const std::string& name) const { return bound_slot(*impl_, name) >= 0; }

// --- conditions ---

namespace pattern {

PatternConditionFunc IsConstant() {
  return [](const NodePtr& n) { return n->is_value(); };
}

PatternConditionFunc IsConstantWhere(std::function<bool(double)> pred) {
  return [pred = std::move(pred)](const NodePtr& n) {
    if (!pass::is_frozen_constant(*n)) return false;  // its values may change before the next run
    const Tensor& t = static_cast<const ValueNode&>(*n).value();
    if (!t.defined() || t.numel() == 0) return false;
    return visit_dtype(t.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* data = t.data<T>();
      for (int64_t i = 0; i < t.numel(); ++i) {
        if (!pred(convert<double>(data[i]))) return false;
      }
      return true;
    });
  };
}

PatternConditionFunc IsConstantEqual(double value) {
  return IsConstantWhere([value](double v) { return v == value; });
}

PatternConditionFunc HasDType(DType dtype) {
  return [dtype](const NodePtr& n) {
    return n->abstract().is_tensor() && n->abstract().dtype() == dtype;
  };
}

PatternConditionFunc IsFloatingPoint() {
  return [](const NodePtr& n) {
    return n->abstract().is_tensor() && is_floating_point(n->abstract().dtype());
  };
}

}  // namespace pattern
}  // namespace kiln
