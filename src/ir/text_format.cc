#include "ir/text_format.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <variant>

namespace kiln::ir::text {

std::string_view dtype_text(DType dtype) {
  static const auto names = [] {
    std::array<std::string_view, kNumDTypes> n;
    for (int d = 0; d < kNumDTypes; ++d)
      n[static_cast<size_t>(d)] = dtype_name(static_cast<DType>(d));
    return n;
  }();
  return names[static_cast<size_t>(dtype)];
}

void append_int(std::string& out, int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void append_uint(std::string& out, uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

namespace {

// inf, -inf and nan are spelled out; to_chars writes the shortest round-tripping text otherwise.
template <typename T>
bool append_special(std::string& out, T v) {
  if (std::isnan(v)) {
    out += "nan";
  } else if (std::isinf(v)) {
    out += v < 0 ? "-inf" : "inf";
  } else {
    return false;
  }
  return true;
}

}  // namespace

void append_double(std::string& out, double v) {
  if (append_special(out, v)) return;
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  const std::string_view s(buf, static_cast<size_t>(r.ptr - buf));
  out += s;
  if (s.find_first_of(".e") == std::string_view::npos) out += ".0";
}

void append_float(std::string& out, float v) {
  if (append_special(out, v)) return;
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

bool is_plain_name(std::string_view s) {
  if (s.empty() || s == "const" ||
      !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) {
    return false;
  }
  for (const char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  }
  return true;
}

void append_quoted(std::string& out, std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  out += '"';
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  out += '"';
}

void append_meta(std::string& out, const TensorMeta& meta) {
  out += dtype_text(meta.dtype);
  out += '[';
  for (size_t i = 0; i < meta.shape.size(); ++i) {
    if (i) out += ", ";
    append_int(out, meta.shape[i]);
  }
  out += ']';
  if (meta.weak) out += " weak";
}

void append_abstract(std::string& out, const Abstract& abstract) {
  switch (abstract.kind()) {
    case Abstract::Kind::kNone: out += "none"; return;
    case Abstract::Kind::kTensor: append_meta(out, abstract.tensor()); return;
    case Abstract::Kind::kTuple:
      out += '(';
      for (size_t i = 0; i < abstract.elements().size(); ++i) {
        if (i) out += ", ";
        append_meta(out, abstract.elements()[i]);
      }
      out += ')';
      return;
  }
}

namespace {

void append_scalar(std::string& out, const Scalar& s) {
  if (s.is_bool()) {
    out += s.to_bool() ? "true" : "false";
  } else if (s.is_integral()) {
    append_int(out, s.to_int());
  } else {
    append_double(out, s.to_double());
  }
}

}  // namespace

void append_attr_value(std::string& out, const AttrValue& value) {
  std::visit(
      [&out](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          out += "None";
        } else if constexpr (std::is_same_v<T, bool>) {
          out += v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, int64_t>) {
          append_int(out, v);
        } else if constexpr (std::is_same_v<T, double>) {
          append_double(out, v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          append_quoted(out, v);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          out += '[';
          for (size_t i = 0; i < v.size(); ++i) {
            if (i) out += ", ";
            append_int(out, v[i]);
          }
          out += ']';
        } else if constexpr (std::is_same_v<T, DType>) {
          out += dtype_text(v);
        } else {
          static_assert(std::is_same_v<T, Scalar>);
          out += "scalar(";
          append_scalar(out, v);
          out += ')';
        }
      },
      value);
}

namespace {

template <typename T>
void append_typed_elements(std::string& out, const void* data, int64_t n) {
  const T* p = static_cast<const T*>(data);
  for (int64_t i = 0; i < n; ++i) {
    if (i) out += ", ";
    if constexpr (std::is_same_v<T, bool>) {
      out += p[i] ? "true" : "false";
    } else if constexpr (std::is_same_v<T, double>) {
      append_double(out, p[i]);
    } else if constexpr (std::is_integral_v<T>) {
      append_int(out, static_cast<int64_t>(p[i]));
    } else {
      // float, and Half / BFloat16 through float (exact): the shortest float text reads back to
      // the same float, which narrows back to the same half.
      append_float(out, static_cast<float>(p[i]));
    }
  }
}

}  // namespace

void append_elements(std::string& out, const Tensor& value) {
  out += '[';
  const int64_t n = value.numel();
  if (n == 0) {
    out += ']';
    return;
  }
  const void* data = value.data_ptr();
  switch (value.dtype()) {
    case DType::kBool: append_typed_elements<bool>(out, data, n); break;
    case DType::kInt8: append_typed_elements<int8_t>(out, data, n); break;
    case DType::kUInt8: append_typed_elements<uint8_t>(out, data, n); break;
    case DType::kInt16: append_typed_elements<int16_t>(out, data, n); break;
    case DType::kInt32: append_typed_elements<int32_t>(out, data, n); break;
    case DType::kInt64: append_typed_elements<int64_t>(out, data, n); break;
    case DType::kFloat16: append_typed_elements<Half>(out, data, n); break;
    case DType::kBFloat16: append_typed_elements<BFloat16>(out, data, n); break;
    case DType::kFloat32: append_typed_elements<float>(out, data, n); break;
    case DType::kFloat64: append_typed_elements<double>(out, data, n); break;
  }
  out += ']';
}

}  // namespace kiln::ir::text
