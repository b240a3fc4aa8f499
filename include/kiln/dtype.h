// Element types: kiln::DType, the 16-bit float storage types, and NumPy-style promotion.
//
//   kiln::DType t = kiln::promote_types(kiln::DType::kInt32, kiln::DType::kFloat16);  // kFloat16
//   size_t bytes = kiln::itemsize(t);                                                  // 2
//
// Promotion follows NumPy's table, with two deliberate differences (documented in
// docs/architecture.md, "Type promotion"): an integer tensor combined with a floating tensor gives
// the floating type (NumPy gives float64 for int32 + float32; PyTorch and JAX give float32, which
// is what a deep-learning user expects), and bfloat16 (which NumPy lacks) combined with float16
// gives float32. A 0-d tensor promotes like any other tensor (NumPy 2's rule; PyTorch ranks it
// below dimensioned tensors): only Python numbers are weak (TensorMeta::weak).
//
// The default floating dtype (PyTorch's torch.get_default_dtype) is process-wide: float32 until
// set_default_float_dtype changes it. It is the dtype of a float Python number standing alone, of
// an integer tensor combined with one, and of the floating results of integer inputs (to_floating:
// true division, exp, mean, ...); Python's factories take it when no dtype is given. The C++
// factories' default arguments (kiln::zeros(shape), Tensor::empty(shape), ...) and the OpDefs'
// attribute defaults stay float32, fixed as PyTorch's C++ defaults are.
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

namespace dtype_detail {
inline uint32_t bits_of(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof(u));
  return u;
}
inline float float_of(uint32_t u) {
  float v;
  std::memcpy(&v, &u, sizeof(v));
  return v;
}
/// cond ? a : b with masks: GCC keeps some ternaries as branches, and a branch stops a loop of
/// conversions from vectorising.
inline uint32_t select_bits(bool cond, uint32_t a, uint32_t b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(cond);
  return (a & mask) | (b & ~mask);
}
}  // namespace dtype_detail

/// IEEE 754 binary16, stored as bits; arithmetic happens in float. The conversions are inline and
/// free of branches, so that a loop of them vectorises; they give the same bits as x86's F16C
/// instructions for every value, NaNs included (quiet, payload kept).
struct Half {
  uint16_t bits = 0;
  Half() = default;
  /// Rounds to nearest even; beyond the largest half (65504), from 65520 up, gives inf.
  explicit Half(float value) {
    using namespace dtype_detail;
    const uint32_t f = bits_of(value);
    const uint32_t sign = (f >> 16) & 0x8000u;
    const uint32_t magnitude = f & 0x7fffffffu;
    // Normal halves: rebias the exponent and round the 13 dropped mantissa bits to even.
    const uint32_t normal = (magnitude + 0xc8000fffu + ((magnitude >> 13) & 1u)) >> 13;
    // Below the smallest normal half: adding 0.5 (2^-1) shifts the value so that the FPU's own
    // rounding leaves the subnormal half's bits at the bottom of the sum's mantissa.
    const uint32_t subnormal = bits_of(float_of(magnitude) + 0.5f) - 0x3f000000u;
    // Inf, and NaN with the top of its payload and the quiet bit.
    const uint32_t special =
        0x7c00u | select_bits(magnitude > 0x7f800000u, 0x200u | ((magnitude >> 13) & 0x3ffu), 0u);
    const uint32_t finite = select_bits(magnitude < 0x38800000u, subnormal, normal);
    bits = static_cast<uint16_t>(sign | select_bits(magnitude >= 0x477ff000u, special, finite));
  }
  /// Exact (a NaN comes out quiet, payload kept).
  operator float() const {  // NOLINT: implicit widening is exact.
    using namespace dtype_detail;
    const uint32_t sign = (static_cast<uint32_t>(bits) & 0x8000u) << 16;
    const uint32_t magnitude = static_cast<uint32_t>(bits) & 0x7fffu;
    const uint32_t exponent = magnitude >> 10;
    // Normal halves rebias the exponent by 127 - 15; inf and NaN (exponent 31) go to 255.
    const uint32_t widened =
        ((magnitude << 13) + select_bits(exponent == 31u, 224u << 23, 112u << 23)) |
        select_bits(magnitude > 0x7c00u, 0x400000u, 0u);
    // Zero and subnormals are mantissa * 2^-24, which float holds exactly.
    const uint32_t small = bits_of(static_cast<float>(static_cast<int32_t>(magnitude)) * 0x1p-24f);
    return float_of(sign | select_bits(exponent == 0u, small, widened));
  }
};

/// bfloat16 (the top half of a float32), stored as bits; arithmetic happens in float.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  /// Rounds to nearest even; NaN stays NaN (quiet). Free of branches, so loops of it vectorise.
  explicit BFloat16(float value) {
    uint32_t u;
    std::memcpy(&u, &value, sizeof(u));
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t nan = (u >> 16) | 0x40u;
    bits = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
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

/// PyTorch's rule for writing a result of type `result` into an existing tensor of type `target`
/// (out=, in-place operators): a floating result never goes into an integer or bool tensor, and
/// only a bool result goes into a bool tensor.
inline bool can_write_result(DType result, DType target) {
  return (!is_floating_point(result) || is_floating_point(target)) &&
         (target != DType::kBool || result == DType::kBool);
}

/// The type both operands are converted to by a binary op (see the file comment for the rules).
KILN_API DType promote_types(DType a, DType b);
/// The type used for arithmetic: float32 for the 16-bit floats, the type itself otherwise.
inline DType compute_dtype(DType d) {
  return (d == DType::kFloat16 || d == DType::kBFloat16) ? DType::kFloat32 : d;
}
/// The default floating dtype (see the file comment): float32 unless set_default_float_dtype
/// changed it. Thread-safe (an atomic), process-wide rather than per thread, as PyTorch's.
KILN_API DType default_float_dtype();
/// Sets the default floating dtype to float16, bfloat16, float32 or float64 (the ones PyTorch
/// accepts); any other dtype throws a kType kiln::Error and changes nothing. Thread-safe; an op
/// running on another thread meanwhile sees the old default or the new one. A graph traced before
/// the change keeps the dtypes it was traced with (a C++ kiln::jit function goes on running it;
/// Python's kiln.jit has the default in its signature and traces again).
KILN_API void set_default_float_dtype(DType dtype);

/// The floating type an op such as exp, mean or div produces for an input of type `d`:
/// the type itself when floating, default_float_dtype() for bool and integers.
inline DType to_floating(DType d) { return is_floating_point(d) ? d : default_float_dtype(); }

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
