#include "kiln/dtype.h"

#include <atomic>

#include "kiln/error.h"

namespace kiln {
namespace {

// Relaxed order suffices: the default is one value, published with no data that depends on it.
std::atomic<DType> default_float{DType::kFloat32};

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

DType default_float_dtype() { return default_float.load(std::memory_order_relaxed); }

void set_default_float_dtype(DType dtype) {
  KILN_CHECK_TYPE(is_floating_point(dtype))
      << "set_default_dtype: only floating-point types are supported as the default type "
         "(float16, bfloat16, float32 or float64), got "
      << dtype;
  default_float.store(dtype, std::memory_order_relaxed);
}

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

}  // namespace kiln
