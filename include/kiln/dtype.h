// Element types: kiln::DType, the 16-bit float storage types, and NumPy-style promotion.
//
//   kiln::DType t = kiln::promote_types(kiln::DType::kInt32, kiln::DType::kFloat16);  // kFloat16
//   size_t bytes = kiln::itemsize(t);                                                  // 2
//
// Promotion follows NumPy's table, with two deliberate differences (documented in
// docs/architecture.md, "Type promotion"): an integer tensor combined with a floating tensor gives
// the floating type (NumPy gives float64 for int32 + float32; PyTorch and JAX give float32, which
// is what a deep-learning user expects), and bfloat16 (which NumPy lacks) combined with float16
// gives float32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>

#include "kiln/export.h"

namespace kiln {

enum class DType : uint8_t {
  kBool,
  kInt8,
  kUInt8,
  kInt16,
  kInt32,
  kInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
};
inline constexpr int kNumDTypes = 10;

/// IEEE 754 binary16, stored as bits; arithmetic happens in float.
struct KILN_API Half {
  uint16_t bits = 0;
  Half() = default;
  explicit Half(float value);
  operator float() const;  // NOLINT: implicit widening is exact.
};

/// bfloat16 (the top half of a float32), stored as bits; arithmetic happens in float.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  /// Rounds to nearest even; NaN stays NaN.
  explicit BFloat16(float value) {
    uint32_t u;
    std::memcpy(&u, &value, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      bits = static_cast<uint16_t>((u >> 16) | 0x40);
    } else {
      bits = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
  }
  operator float() const {  // NOLINT: implicit widening is exact.
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof(f));
    return f;
  }
};

/// Bytes per element (inline: every strided loop and data pointer asks).
constexpr size_t itemsize(DType dtype) {
  constexpr unsigned char kSizes[kNumDTypes] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8};
  return kSizes[static_cast<int>(dtype)];
}
/// "float32", "int64", "bool", ... (NumPy's spelling; "bfloat16" for kBFloat16).
KILN_API const char* dtype_name(DType dtype);
/// Parses a name as dtype_name spells it; throws a kDType kiln::Error listing the valid names.
KILN_API DType dtype_from_name(const std::string& name);
KILN_API std::ostream& operator<<(std::ostream& os, DType dtype);

inline bool is_floating_point(DType d) {
  return d == DType::kFloat16 || d == DType::kBFloat16 || d == DType::kFloat32 ||
         d == DType::kFloat64;
}
/// Integer types, not counting bool.
inline bool is_integral(DType d) { return !is_floating_point(d) && d != DType::kBool; }
inline bool is_signed(DType d) { return d != DType::kBool && d != DType::kUInt8; }

/// The type both operands are converted to by a binary op (see the file comment for the rules).
KILN_API DType promote_types(DType a, DType b);
/// The type used for arithmetic: float32 for the 16-bit floats, the type itself otherwise.
inline DType compute_dtype(DType d) {
  return (d == DType::kFloat16 || d == DType::kBFloat16) ? DType::kFloat32 : d;
}
/// The floating type an op such as exp, mean or div produces for an input of type `d`:
/// the type itself when floating, float32 for bool and integers.
inline DType to_floating(DType d) { return is_floating_point(d) ? d : DType::kFloat32; }

/// Maps a C++ element type to its DType: dtype_of<float>() == DType::kFloat32.
template <typename T>
constexpr DType dtype_of();
template <> constexpr DType dtype_of<bool>() { return DType::kBool; }
template <> constexpr DType dtype_of<int8_t>() { return DType::kInt8; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::kUInt8; }
template <> constexpr DType dtype_of<int16_t>() { return DType::kInt16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::kInt32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::kInt64; }
template <> constexpr DType dtype_of<Half>() { return DType::kFloat16; }
template <> constexpr DType dtype_of<BFloat16>() { return DType::kBFloat16; }
template <> constexpr DType dtype_of<float>() { return DType::kFloat32; }
template <> constexpr DType dtype_of<double>() { return DType::kFloat64; }

}  // namespace kiln
