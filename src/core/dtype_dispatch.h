// visit_dtype: calls a generic lambda with a tag (kiln::TypeTag, kiln/dtype_dispatch.h) for the C++
// type of any DType (private to Kiln; custom ops use kiln/dtype_dispatch.h's dispatch_*);
// visit_compute_float: with a value of the float type a dtype computes in.
//
//   visit_dtype(t.dtype(), [&](auto tag) {
//     using T = typename decltype(tag)::type;
//     fill(t.data<T>(), ...);
//   });
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/float16_runs.h"
#include "kiln/dtype.h"
#include "kiln/dtype_dispatch.h"
#include "kiln/error.h"

namespace kiln {

template <typename F>
decltype(auto) visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kBool: return f(TypeTag<bool>{});
    case DType::kInt8: return f(TypeTag<int8_t>{});
    case DType::kUInt8: return f(TypeTag<uint8_t>{});
    case DType::kInt16: return f(TypeTag<int16_t>{});
    case DType::kInt32: return f(TypeTag<int32_t>{});
    case DType::kInt64: return f(TypeTag<int64_t>{});
    case DType::kFloat16: return f(TypeTag<Half>{});
    case DType::kBFloat16: return f(TypeTag<BFloat16>{});
    case DType::kFloat32: return f(TypeTag<float>{});
    case DType::kFloat64: return f(TypeTag<double>{});
  }
  KILN_ASSERT(false) << "unknown dtype " << static_cast<int>(dtype);
}

/// Calls f(double{}) when `dtype` computes in float64 and f(float{}) otherwise (float32, and the
/// 16-bit floats, which compute in float32): for kernels written for the two compute types.
template <typename F>
decltype(auto) visit_compute_float(DType dtype, F&& f) {
  if (compute_dtype(dtype) == DType::kFloat64) return f(double{});
  return f(float{});
}

/// The float a value of type From goes through on its way to a 16-bit float: itself for the types
/// float holds exactly, rounded to odd for double and wide integers.
template <typename From>
inline float float_for_narrowing(From v) {
  if constexpr (std::is_same_v<From, double>) {
    return float_rounded_to_odd(v);
  } else if constexpr (std::is_integral_v<From> && sizeof(From) >= 4) {  // int32, int64
    return float_rounded_to_odd(static_cast<int64_t>(v));
  } else {
    return static_cast<float>(v);
  }
}

/// Converts between any two element types through float for the 16-bit floats (correctly rounded:
/// Note [Rounding to odd]).
template <typename To, typename From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    return To(float_for_narrowing(v));
  } else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) {
    return static_cast<To>(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

template <typename T>
constexpr bool kIsFloat16 = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

/// y[i] = convert<To>(x[i]) over a contiguous run. Conversions to or from the 16-bit floats go
/// through float, in blocks, with the vectorised runs of core/float16_runs.h.
template <typename To, typename From>
void convert_contiguous(const From* x, To* y, int64_t n) {
  if constexpr (std::is_same_v<To, From>) {
    std::copy(x, x + n, y);  // bit for bit: a float16 NaN's payload stays as it is
  } else if constexpr (kIsFloat16<From> && std::is_same_v<To, float>) {
    widen_run(x, y, n);
  } else if constexpr (std::is_same_v<From, float> && kIsFloat16<To>) {
    narrow_run(x, y, n);
  } else if constexpr (kIsFloat16<From> || kIsFloat16<To>) {
    constexpr int64_t kBlock = 256;
    float block[kBlock];
    for (int64_t i = 0; i < n; i += kBlock) {
      const int64_t m = n - i < kBlock ? n - i : kBlock;
      if constexpr (kIsFloat16<To> && std::is_same_v<From, double>) {
        round_to_odd_run(x + i, block, m);
      } else if constexpr (kIsFloat16<To>) {
        for (int64_t j = 0; j < m; ++j) block[j] = float_for_narrowing(x[i + j]);
      } else {
        convert_contiguous(x + i, block, m);
      }
      convert_contiguous(block, y + i, m);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = convert<To>(x[i]);
  }
}

}  // namespace kiln
