#include "kiln/dtype.h"

#include <cmath>

#include "kiln/error.h"

namespace kiln {
namespace {

constexpr const char* kNames[kNumDTypes] = {"bool",  "int8",    "uint8",    "int16",   "int32",
                                            "int64", "float16", "bfloat16", "float32", "float64"};

// Rank of a floating type on the float16 < float32 < float64 ladder (bfloat16 sits beside
// float16 and the two meet at float32).
int float_rank(DType d) {
  switch (d) {
    case DType::kFloat16:
    case DType::kBFloat16:
      return 1;
    case DType::kFloat32:
      return 2;
    default:
      return 3;
  }
}

}  // namespace

const char* dtype_name(DType dtype) { return kNames[static_cast<int>(dtype)]; }

DType dtype_from_name(const std::string& name) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (name == kNames[i]) return static_cast<DType>(i);
  }
  std::string valid;
  for (int i = 0; i < kNumDTypes; ++i) {
    valid += (i ? ", " : "") + std::string(kNames[i]);
  }
  KILN_FAIL(kDType) << "unknown dtype '" << name << "'; expected one of: " << valid;
}

std::ostream& operator<<(std::ostream& os, DType dtype) { return os << dtype_name(dtype); }

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::kBool) return b;
  if (b == DType::kBool) return a;
  const bool fa = is_floating_point(a);
  const bool fb = is_floating_point(b);
  if (fa && fb) {
    const int ra = float_rank(a);
    const int rb = float_rank(b);
    if (ra == rb) return DType::kFloat32;  // float16 with bfloat16
    return ra > rb ? a : b;
  }
  if (fa) return a;  // integer with floating: the floating type (see dtype.h)
  if (fb) return b;
  // Both integers. uint8 is the only unsigned type: with int8 it needs int16, with any wider
  // signed type that type holds it already.
  if (a == DType::kUInt8 || b == DType::kUInt8) {
    const DType other = a == DType::kUInt8 ? b : a;
    return other == DType::kInt8 ? DType::kInt16 : other;
  }
  return static_cast<int>(a) > static_cast<int>(b) ? a : b;
}

// Half <-> float conversion in software, with round-to-nearest-even; exact for every value.
Half::Half(float value) {
  uint32_t f;
  std::memcpy(&f, &value, sizeof(f));
  const uint32_t sign = (f >> 16) & 0x8000u;
  const uint32_t abs = f & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    bits = static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    return;
  }
  if (abs >= 0x477ff000u) {  // rounds to a value beyond the largest half: inf
    bits = static_cast<uint16_t>(sign | 0x7c00u);
    return;
  }
  if (abs < 0x38800000u) {  // subnormal half (or zero): scale into the subnormal range
    float magnitude;
    std::memcpy(&magnitude, &abs, sizeof(magnitude));
    // Adding 0.5 (2^-1) shifts the value so that the FPU's own rounding gives the subnormal bits.
    const float shifted = magnitude + 0.5f;
    uint32_t s;
    std::memcpy(&s, &shifted, sizeof(s));
    bits = static_cast<uint16_t>(sign | (s - 0x3f000000u));
    return;
  }
  const uint32_t mantissa_odd = (abs >> 13) & 1u;
  const uint32_t rounded = abs + 0xc8000fffu + mantissa_odd;  // rebias exponent, round to even
  bits = static_cast<uint16_t>(sign | (rounded >> 13));
}

Half::operator float() const {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  uint32_t f;
  if (exponent == 0x1fu) {
    f = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    f = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    f = sign;
  } else {  // subnormal: value = mantissa * 2^-24
    const float value = std::ldexp(static_cast<float>(mantissa), -24);
    std::memcpy(&f, &value, sizeof(f));
    f |= sign;
  }
  float out;
  std::memcpy(&out, &f, sizeof(out));
  return out;
}

}  // namespace kiln
