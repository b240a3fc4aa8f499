#include <sstream>

#include "kiln/op.h"

namespace kiln {

const char* attr_kind_name(AttrKind kind) {
  switch (kind) {
    case AttrKind::kBool: return "bool";
    case AttrKind::kInt: return "int";
    case AttrKind::kFloat: return "float";
    case AttrKind::kString: return "str";
    case AttrKind::kInts: return "list[int]";
    case AttrKind::kDType: return "dtype";
    case AttrKind::kScalar: return "scalar";
  }
  return "?";
}

Attrs::Attrs(std::initializer_list<std::pair<std::string, AttrValue>> items) {
  for (const auto& [name, value] : items) set(name, value);
}

Attrs& Attrs::set(const std::string& name, AttrValue value) {
  for (auto& item : items_) {
    if (item.first == name) {
      item.second = std::move(value);
      return *this;
    }
  }
  items_.emplace_back(name, std::move(value));
  return *this;
}

const AttrValue* Attrs::find(const std::string& name) const {
  for (const auto& item : items_) {
    if (item.first == name) return &item.second;
  }
  return nullptr;
}

namespace {

const char* held_type(const AttrValue& v) {
  static const char* const kNames[] = {"None", "bool", "int", "float", "str", "list[int]",
                                       "dtype", "scalar"};
  return kNames[v.index()];
}

const AttrValue& require(const Attrs& attrs, const std::string& name) {
  const AttrValue* v = attrs.find(name);
  KILN_CHECK_VALUE(v != nullptr) << "missing attribute '" << name << "'";
  return *v;
}

[[noreturn]] void wrong_type(const std::string& name, const char* want, const AttrValue& v) {
  // None is its own type: "got None", not "got None None".
  const bool none = std::holds_alternative<std::monostate>(v);
  KILN_FAIL(kType) << "attribute '" << name << "': expected " << want << ", got " << held_type(v)
                   << (none ? "" : " " + attr_str(v));
}

}  // namespace

template <>
bool Attrs::get<bool>(const std::string& name) const {
  const AttrValue& v = require(*this, name);
  if (const bool* b = std::get_if<bool>(&v)) return *b;
  if (const Scalar* s = std::get_if<Scalar>(&v); s && s->is_bool()) return s->to_bool();
  wrong_type(name, "bool", v);
}

template <>
int64_t Attrs::get<int64_t>(const std::string& name) const {
  const AttrValue& v = require(*this, name);
  if (const int64_t* i = std::get_if<int64_t>(&v)) return *i;
  if (const bool* b = std::get_if<bool>(&v)) return *b;
  if (const Scalar* s = std::get_if<Scalar>(&v); s && !s->is_floating_point()) return s->to_int();
  wrong_type(name, "int", v);
}

template <>
double Attrs::get<double>(const std::string& name) const {
  const AttrValue& v = require(*this, name);
  if (const double* d = std::get_if<double>(&v)) return *d;
  if (const int64_t* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (const Scalar* s = std::get_if<Scalar>(&v)) return s->to_double();
  wrong_type(name, "float", v);
}

template <>
std::string Attrs::get<std::string>(const std::string& name) const {
  const AttrValue& v = require(*this, name);
  if (const std::string* s = std::get_if<std::string>(&v)) return *s;
  wrong_type(name, "str", v);
}

template <>
std::vector<int64_t> Attrs::get<std::vector<int64_t>>(const std::string& name) const {
  const AttrValue& v = require(*this, name);
  if (const auto* l = std::get_if<std::vector<int64_t>>(&v)) return *l;
  if (const int64_t* i = std::get_if<int64_t>(&v)) return {*i};
  wrong_type(name, "list[int]", v);
}

template <>
DType Attrs::get<DType>(const std::string& name) const {
  const AttrValue& v = require(*this, name);
  if (const DType* d = std::get_if<DType>(&v)) return *d;
  if (const std::string* s = std::get_if<std::string>(&v)) return dtype_from_name(*s);
  wrong_type(name, "dtype", v);
}

template <>
Scalar Attrs::get<Scalar>(const std::string& name) const {
  const AttrValue& v = require(*this, name);
  if (const Scalar* s = std::get_if<Scalar>(&v)) return *s;
  if (const double* d = std::get_if<double>(&v)) return Scalar(*d);
  if (const int64_t* i = std::get_if<int64_t>(&v)) return Scalar(*i);
  if (const bool* b = std::get_if<bool>(&v)) return Scalar(*b);
  wrong_type(name, "scalar", v);
}

std::string attr_str(const AttrValue& value) {
  std::ostringstream os;
  std::visit(
      [&](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, std::monostate>) {
          os << "None";
        } else if constexpr (std::is_same_v<V, bool>) {
          os << (v ? "true" : "false");
        } else if constexpr (std::is_same_v<V, double>) {
          os.precision(17);
          os << v;
          // Keep a float recognisable as one in text ("1." not "1").
          if (os.str().find_first_of(".eEna") == std::string::npos) os << ".";
        } else if constexpr (std::is_same_v<V, std::string>) {
          os << "'" << v << "'";
        } else if constexpr (std::is_same_v<V, std::vector<int64_t>>) {
          os << shape_str(v);
        } else if constexpr (std::is_same_v<V, Scalar>) {
          os << "scalar(" << v << ")";
        } else {
          os << v;
        }
      },
      value);
  return os.str();
}

TensorMeta TensorMeta::of(const Tensor& t) {
  TensorMeta m;
  if (!t.defined()) {
    m.defined = false;
    return m;
  }
  m.dtype = t.dtype();
  m.shape = t.shape();
  m.weak = t.is_weak_scalar();
  return m;
}

namespace {

// result_type's rule, operand by operand: strong (tensor) operands promote among themselves; weak
// scalars only lift the category (bool < int < float) when they are of a higher one.
class Promotion {
 public:
  void add(const TensorMeta& m) {
    if (!m.defined) return;
    if (m.weak) {
      const int c = is_floating_point(m.dtype) ? 2 : (m.dtype == DType::kBool ? 0 : 1);
      weak_category_ = std::max(weak_category_, c);
    } else {
      strong_ = have_strong_ ? promote_types(strong_, m.dtype) : m.dtype;
      have_strong_ = true;
    }
  }
  DType result() const {
    // A float number beside integers, or standing alone, takes the default floating dtype, as a
    // Python float does in PyTorch (float64 after set_default_dtype(float64)).
    if (!have_strong_) {
      return weak_category_ == 2 ? default_float_dtype()
                                 : (weak_category_ == 1 ? DType::kInt64 : DType::kBool);
    }
    if (weak_category_ == 2 && !is_floating_point(strong_)) return default_float_dtype();
    if (weak_category_ == 1 && strong_ == DType::kBool) return DType::kInt64;
    return strong_;
  }

 private:
  bool have_strong_ = false;
  DType strong_ = DType::kBool;
  int weak_category_ = 0;  // 0 none/bool, 1 int, 2 float
};

}  // namespace

DType result_type(const MetaList& operands) {
  Promotion p;
  for (const TensorMeta& m : operands) p.add(m);
  return p.result();
}

DType result_type(const TensorMeta& a, const TensorMeta& b) {
  Promotion p;
  p.add(a);
  p.add(b);
  return p.result();
}

}  // namespace kiln
