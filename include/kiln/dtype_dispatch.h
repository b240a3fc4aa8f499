// Dispatch on a dtype: a kernel written once, as a generic lambda, is called with a tag of the
// C++ element type of a tensor's dtype (what PyTorch's AT_DISPATCH_* macros do, as templates).
//
//   kiln::dispatch_floating(x.dtype(), "scale", [&](auto tag) {
//     using T = typename decltype(tag)::type;  // kiln::Half, kiln::BFloat16, float or double
//     const T* in = x.data<T>();
//     ...
//   });
//
// dispatch_dtype<Ts...> takes the element types to accept; dispatch_floating, dispatch_integral,
// dispatch_numeric and dispatch_all name the usual sets. A dtype outside the set is a kDType
// error naming the op and the dtypes it takes. The lambda's result is returned; it must have one
// type for every element type (a static_assert says so). Half and BFloat16 (kiln/dtype.h) convert
// to and from float explicitly: compute in float and round once on the way out.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kiln/dtype.h"
#include "kiln/error.h"

namespace kiln {

/// Carries an element type to a generic lambda: `using T = typename decltype(tag)::type;`.
template <typename T>
struct TypeTag {
  using type = T;
};

namespace detail {

/// Throws kDType: `op` takes tensors of the `supported` dtypes only.
[[noreturn]] inline void unsupported_dtype(const char* op, DType dtype,
                                           std::initializer_list<DType> supported) {
  std::string names;
  size_t i = 0;
  for (DType d : supported) {
    names += i == 0 ? "" : i + 1 == supported.size() ? " or " : ", ";
    names += dtype_name(d);
    ++i;
  }
  KILN_FAIL(kDType) << op << ": expected a tensor of dtype " << names << ", got " << dtype;
}

}  // namespace detail

/// Calls f(TypeTag<T>{}) for the T among Ts whose dtype is `dtype` and returns its result; any
/// other dtype is a kDType error naming `op`.
template <typename... Ts, typename F>
auto dispatch_dtype(DType dtype, const char* op, F&& f)
    -> std::invoke_result_t<F&, TypeTag<std::tuple_element_t<0, std::tuple<Ts...>>>> {
  using R = std::invoke_result_t<F&, TypeTag<std::tuple_element_t<0, std::tuple<Ts...>>>>;
  // One result type: a lambda returning T itself would otherwise convert every other type's
  // result to the first type's, silently (0.1 as a Half).
  static_assert((std::is_same_v<R, std::invoke_result_t<F&, TypeTag<Ts>>> && ...),
                "dispatch_dtype: the lambda must return the same type for every element type");
  if constexpr (std::is_void_v<R>) {
    const bool called = ((dtype == dtype_of<Ts>() ? (f(TypeTag<Ts>{}), true) : false) || ...);
    if (!called) detail::unsupported_dtype(op, dtype, {dtype_of<Ts>()...});
  } else {
    std::optional<R> result;
    const bool called =
        ((dtype == dtype_of<Ts>() ? (result.emplace(f(TypeTag<Ts>{})), true) : false) || ...);
    if (!called) detail::unsupported_dtype(op, dtype, {dtype_of<Ts>()...});
    return std::move(*result);
  }
}

/// float16, bfloat16, float32, float64.
template <typename F>
decltype(auto) dispatch_floating(DType dtype, const char* op, F&& f) {
  return dispatch_dtype<Half, BFloat16, float, double>(dtype, op, std::forward<F>(f));
}

/// int8, uint8, int16, int32, int64.
template <typename F>
decltype(auto) dispatch_integral(DType dtype, const char* op, F&& f) {
  return dispatch_dtype<int8_t, uint8_t, int16_t, int32_t, int64_t>(dtype, op, std::forward<F>(f));
}

/// Every dtype but bool.
template <typename F>
decltype(auto) dispatch_numeric(DType dtype, const char* op, F&& f) {
  return dispatch_dtype<int8_t, uint8_t, int16_t, int32_t, int64_t, Half, BFloat16, float, double>(
      dtype, op, std::forward<F>(f));
}

/// Every dtype.
template <typename F>
decltype(auto) dispatch_all(DType dtype, const char* op, F&& f) {
  return dispatch_dtype<bool, int8_t, uint8_t, int16_t, int32_t, int64_t, Half, BFloat16, float,
                        double>(dtype, op, std::forward<F>(f));
}

}  // namespace kiln
