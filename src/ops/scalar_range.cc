// The number a 0-d tensor holds and whether a number fits a dtype (ops/scalar_range.h).
#include "ops/scalar_range.h"

#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "core/dtype_dispatch.h"

namespace kiln::detail {

namespace {

// [min, max] of an integer dtype.
std::pair<int64_t, int64_t> int_range(DType dtype) {
  return visit_dtype(dtype, [](auto tag) -> std::pair<int64_t, int64_t> {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      return {std::numeric_limits<T>::min(), std::numeric_limits<T>::max()};
    } else {
      return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
    }
  });
}

}  // namespace

Scalar scalar_value(const Tensor& t) {
  return visit_dtype(t.dtype(), [&](auto tag) -> Scalar {
    using T = typename decltype(tag)::type;
    const T v = *static_cast<const T*>(t.data_ptr());
    if constexpr (std::is_same_v<T, bool>) {
      return Scalar(v);
    } else if constexpr (std::is_integral_v<T>) {
      return Scalar(static_cast<int64_t>(v));
    } else if constexpr (std::is_same_v<T, double>) {
      return Scalar(v);
    } else {
      return Scalar(static_cast<double>(static_cast<float>(v)));  // float, Half, BFloat16
    }
  });
}

bool int_fits(DType dtype, int64_t v) {
  if (!is_integral(dtype)) return true;
  const auto [lo, hi] = int_range(dtype);
  return v >= lo && v <= hi;
}

bool double_fits(DType dtype, double v) {
  if (!is_integral(dtype)) return true;
  if (!std::isfinite(v)) return false;
  const auto [lo, hi] = int_range(dtype);
  // 2^63 is exact as a double while INT64_MAX is not, so the int64 bound is a strict "<".
  if (hi == std::numeric_limits<int64_t>::max()) return v >= -0x1p63 && v < 0x1p63;
  return v >= static_cast<double>(lo) && v <= static_cast<double>(hi);
}

bool scalar_fits(DType dtype, const Scalar& value) {
  return value.is_floating_point() ? double_fits(dtype, value.to_double())
                                   : int_fits(dtype, value.to_int());
}

}  // namespace kiln::detail
