#include <sstream>

#include "kiln/op.h"

namespace kiln {

namespace {

bool kind_accepts(AttrKind kind, const AttrValue& v);

// A name an input or attribute of `op` may take: no other input or attribute has it (they are the
// keyword arguments of one call).
void check_new_name(const OpDef& op, const std::string& name, const char* what) {
  KILN_CHECK_VALUE(!name.empty()) << op.name() << ": " << what << " without a name";
  for (const InputSpec& in : op.input_specs()) {
    KILN_CHECK_VALUE(in.name != name)
        << op.name() << ": " << what << " '" << name << "' has the name of an input";
  }
  for (const AttrSpec& a : op.attr_specs()) {
    KILN_CHECK_VALUE(a.name != name)
        << op.name() << ": " << what << " '" << name << "' has the name of an attribute";
  }
}

}  // namespace

OpDef& OpDef::input(std::string name, bool optional) {
  KILN_CHECK_VALUE(inputs_.empty() || !inputs_.back().variadic)
      << name_ << ": no input may follow the variadic input '" << inputs_.back().name << "'";
  check_new_name(*this, name, "input");
  inputs_.push_back({std::move(name), optional, false});
  return *this;
}

OpDef& OpDef::variadic_input(std::string name) {
  input(std::move(name));
  inputs_.back().variadic = true;
  return *this;
}

OpDef& OpDef::attr(std::string name, AttrKind kind, std::optional<AttrValue> default_value) {
  check_new_name(*this, name, "attribute");
  KILN_CHECK_VALUE(!default_value || std::holds_alternative<std::monostate>(*default_value) ||
                   kind_accepts(kind, *default_value))
      << name_ << ": attribute '" << name << "' is " << attr_kind_name(kind)
      << ", but its default is " << attr_str(*default_value);
  attrs_.push_back({std::move(name), kind, std::move(default_value)});
  return *this;
}

OpDef& OpDef::outputs(int n) {
  KILN_CHECK_VALUE(n >= 0 || n == kVariableOutputs)
      << name_ << ": invalid number of outputs " << n;
  num_outputs_ = n;
  return *this;
}

OpDef& OpDef::infer(InferFn fn) {
  infer_ = std::move(fn);
  return *this;
}

OpDef& OpDef::kernel(DeviceType device, KernelFn fn) {
  kernels_[static_cast<size_t>(device)] = std::move(fn);
  return *this;
}

OpDef& OpDef::workspace(WorkspaceFn fn) {
  workspace_ = std::move(fn);
  return *this;
}

OpDef& OpDef::view(ViewFn fn) {
  view_ = std::move(fn);
  traits_ |= kTraitView;
  return *this;
}

OpDef& OpDef::grad(GradFn fn) {
  grad_ = std::move(fn);
  return *this;
}

OpDef& OpDef::traits(uint32_t traits) {
  traits_ |= traits;
  return *this;
}

OpDef& OpDef::doc(std::string text) {
  doc_ = std::move(text);
  return *this;
}

const KernelFn* OpDef::find_kernel(DeviceType device) const {
  const KernelFn& fn = kernels_[static_cast<size_t>(device)];
  return fn ? &fn : nullptr;
}

namespace {

// Whether `v` is a value of `kind` (None is a value only of attributes whose default is None:
// normalize_attrs checks that).
bool kind_accepts(AttrKind kind, const AttrValue& v) {
  switch (kind) {
    case AttrKind::kBool: return std::holds_alternative<bool>(v);
    case AttrKind::kInt: return std::holds_alternative<int64_t>(v) || std::holds_alternative<bool>(v);
    case AttrKind::kFloat:
      return std::holds_alternative<double>(v) || std::holds_alternative<int64_t>(v) ||
             std::holds_alternative<Scalar>(v);
    case AttrKind::kString: return std::holds_alternative<std::string>(v);
    case AttrKind::kInts:
      return std::holds_alternative<std::vector<int64_t>>(v) || std::holds_alternative<int64_t>(v);
    case AttrKind::kDType: return std::holds_alternative<DType>(v) || std::holds_alternative<std::string>(v);
    case AttrKind::kScalar:
      return std::holds_alternative<Scalar>(v) || std::holds_alternative<double>(v) ||
             std::holds_alternative<int64_t>(v) || std::holds_alternative<bool>(v);
  }
  return false;
}

}  // namespace

Attrs OpDef::normalize_attrs(const Attrs& attrs) const {
  for (const auto& [name, value] : attrs.items()) {
    const AttrSpec* spec = nullptr;
    for (const AttrSpec& s : attrs_) {
      if (s.name == name) spec = &s;
    }
    KILN_CHECK_TYPE(spec != nullptr)
        << name_ << ": unexpected attribute '" << name << "'; the signature is " << signature();
    // None is a value only of an attribute whose default is None (an optional one); for any
    // other it would reach the kernel, which reads a value.
    const bool none = std::holds_alternative<std::monostate>(value);
    const bool optional = spec->default_value.has_value() &&
                          std::holds_alternative<std::monostate>(*spec->default_value);
    KILN_CHECK_TYPE(none ? optional : kind_accepts(spec->kind, value))
        << name_ << ": attribute '" << name << "' expects " << attr_kind_name(spec->kind)
        << (none && !spec->default_value ? " (it is required)" : "") << ", got " << attr_str(value);
  }
  Attrs out;
  for (const AttrSpec& spec : attrs_) {
    if (const AttrValue* v = attrs.find(spec.name)) {
      out.set(spec.name, *v);
    } else {
      KILN_CHECK_TYPE(spec.default_value.has_value())
          << name_ << ": missing required attribute '" << spec.name << "'; the signature is "
          << signature();
      out.set(spec.name, *spec.default_value);
    }
  }
  return out;
}

void OpDef::check_inputs(const MetaList& inputs) const {
  const bool variadic = !inputs_.empty() && inputs_.back().variadic;
  const size_t fixed = variadic ? inputs_.size() - 1 : inputs_.size();
  if (variadic) {
    KILN_CHECK_TYPE(inputs.size() >= fixed)
        << name_ << ": expected at least " << fixed << " inputs, got " << inputs.size();
  } else {
    KILN_CHECK_TYPE(inputs.size() == inputs_.size())
        << name_ << ": expected " << inputs_.size() << " inputs, got " << inputs.size()
        << "; the signature is " << signature();
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputSpec& spec = inputs_[std::min(i, inputs_.size() - 1)];
    KILN_CHECK_TYPE(inputs[i].defined || spec.optional)
        << name_ << ": input '" << spec.name << "' is required, got None";
  }
}

MetaList OpDef::infer_outputs(const MetaList& inputs, const Attrs& normalized) const {
  check_inputs(inputs);
  KILN_CHECK(infer_ != nullptr) << name_ << " has no infer function";
  return detail::with_error_context(
      [&] {
        MetaList out = infer_(InferContext{*this, inputs, normalized});
        KILN_CHECK_VALUE(num_outputs_ == kVariableOutputs ||
                         out.size() == static_cast<size_t>(num_outputs_))
            << name_ << ": infer returned " << out.size() << " outputs, the schema says "
            << num_outputs_;
        for (const TensorMeta& meta : out) {
          for (int64_t size : meta.shape) {
            KILN_CHECK_SHAPE(size >= 0) << name_ << ": infer gave an output of shape "
                                        << shape_str(meta.shape) << "; sizes must be non-negative";
          }
        }
        return out;
      },
      [&] { return "in " + op_call_str(*this, inputs); });
}

std::string OpDef::signature() const {
  std::ostringstream os;
  os << name_ << "(";
  for (size_t i = 0; i < inputs_.size(); ++i) {
    os << (i ? ", " : "") << (inputs_[i].variadic ? "*" : "") << inputs_[i].name
       << (inputs_[i].optional ? "=None" : "");
  }
  if (!attrs_.empty()) os << (inputs_.empty() ? "*, " : ", *, ");
  for (size_t i = 0; i < attrs_.size(); ++i) {
    os << (i ? ", " : "") << attrs_[i].name << ": " << attr_kind_name(attrs_[i].kind);
    if (attrs_[i].default_value) os << " = " << attr_str(*attrs_[i].default_value);
  }
  os << ")";
  return os.str();
}

std::string op_call_str(const OpDef& op, const MetaList& inputs) {
  std::ostringstream os;
  os << op.name() << "(";
  for (size_t i = 0; i < inputs.size(); ++i) {
    os << (i ? ", " : "");
    if (!inputs[i].defined) {
      os << "None";
    } else {
      os << dtype_name(inputs[i].dtype) << shape_str(inputs[i].shape);
    }
  }
  os << ")";
  return os.str();
}

}  // namespace kiln
