#include "distributed/reduction.h"

#include <type_traits>

#include "core/dtype_dispatch.h"
#include "kiln/error.h"

namespace kiln::distributed {
namespace {

template <typename T>
using arith_t =
    std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

template <typename T, typename Op>
void combine(const void* a, const void* b, void* out, size_t n, Op op) {
  using A = arith_t<T>;
  const auto* x = static_cast<const T*>(a);
  const auto* y = static_cast<const T*>(b);
  auto* z = static_cast<T*>(out);
  for (size_t i = 0; i < n; ++i)
    z[i] = convert<T>(static_cast<A>(op(convert<A>(x[i]), convert<A>(y[i]))));
}

}  // namespace

ReduceKind reduce_kind(const std::string& name) {
  if (name == "sum") return ReduceKind::kSum;
  if (name == "prod") return ReduceKind::kProd;
  if (name == "min") return ReduceKind::kMin;
  if (name == "max") return ReduceKind::kMax;
  if (name == "avg") return ReduceKind::kAvg;
  KILN_FAIL(kValue) << "unknown reduction op '" << name
                    << "'; expected 'sum', 'prod', 'min', 'max' or 'avg'";
  return ReduceKind::kSum;
}

void reduce_elements(DType dtype, ReduceKind kind, const void* a, const void* b, void* out,
                     size_t n) {
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    switch (kind) {
      case ReduceKind::kProd:
        return combine<T>(a, b, out, n, [](auto x, auto y) { return x * y; });
      case ReduceKind::kMin:
        return combine<T>(a, b, out, n, [](auto x, auto y) { return y < x ? y : x; });
      case ReduceKind::kMax:
        return combine<T>(a, b, out, n, [](auto x, auto y) { return x < y ? y : x; });
      case ReduceKind::kSum:
        return combine<T>(a, b, out, n, [](auto x, auto y) { return x + y; });
      case ReduceKind::kAvg:
        break;
    }
    KILN_ASSERT(false) << "reduce_elements: avg is a sum the caller divides";
  });
}

void scale_elements(DType dtype, void* data, size_t n, double factor) {
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      KILN_ASSERT(false) << "scale_elements reached a bool tensor";
    } else {
      using A = arith_t<T>;
      T* p = static_cast<T*>(data);
      for (size_t i = 0; i < n; ++i) p[i] = convert<T>(static_cast<A>(convert<A>(p[i]) * factor));
    }
  });
}

}  // namespace kiln::distributed
