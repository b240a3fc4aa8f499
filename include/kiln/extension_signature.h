// Functions with their C++ signature erased: how ExtensionModule::def (kiln/extension.h) stores
// a function so that Python (or any caller) can call it with arguments it converted itself.
//
//   const kiln::ExtensionFunction* f = module->find_function("add3");
//   const kiln::Tensor x = ..., y = ..., z = ...;
//   const void* args[] = {&x, &y, &z};        // one pointer per parameter (see ArgKind)
//   kiln::CallResults results;
//   f->invoke(args, &results);                // results.tensor is add3's return value
//
// Each supported parameter type maps to an ArgKind and each return type to a ResultKind; an
// unsupported type is a compile error (static_assert) that lists the supported ones. Included by
// kiln/extension.h; not meant to be included on its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

/// The kind of one parameter of a function exposed with ExtensionModule::def.
enum class ArgKind : uint8_t {
  kTensor,          // Tensor, const Tensor&
  kOptionalTensor,  // std::optional<Tensor> (None in Python)
  kInt64,           // int64_t
  kInt32,           // int, passed as an int64_t the caller has range-checked (Python's binding)
  kFloat,           // double, float
  kBool,            // bool
  kString,          // std::string
  kInts,            // std::vector<int64_t>
};
/// What a function exposed with def returns.
enum class ResultKind : uint8_t { kNone, kTensor, kTuple, kList };

/// The results of one type-erased call: `tensor` for kTensor, `tensors` for kTuple and kList.
struct CallResults {
  Tensor tensor;
  std::vector<Tensor> tensors;
};

/// A function exposed with def, with its C++ signature erased. `invoke` takes one pointer per
/// parameter to a value of the parameter's storage type: Tensor for kTensor and kOptionalTensor
/// (undefined for None), int64_t for both int kinds, double, bool, std::string and
/// std::vector<int64_t>.
struct ExtensionFunction {
  using ErasedFn = void (*)();
  using Invoker = void (*)(ErasedFn fn, const void* const* args, CallResults* results);

  std::string name;
  std::string doc;
  std::vector<std::string> arg_names;
  std::vector<ArgKind> arg_kinds;
  ResultKind result_kind = ResultKind::kNone;
  size_t num_results = 0;  // tuple size for kTuple, 1 for kTensor, 0 otherwise
  ErasedFn fn = nullptr;
  Invoker invoker = nullptr;

  /// Calls the function (see above for what `args` points to).
  void invoke(const void* const* args, CallResults* results) const { invoker(fn, args, results); }
};

namespace detail {

template <typename T>
struct ArgTraits {
  static_assert(sizeof(T) == 0,
                "kiln::ExtensionModule::def: unsupported parameter type; use Tensor, "
                "std::optional<Tensor>, int64_t, int, double, float, bool, std::string or "
                "std::vector<int64_t>");
};
template <typename T, ArgKind K, typename Stored = T>
struct StoredArg {
  static constexpr ArgKind kind = K;
  static T get(const void* p) { return static_cast<T>(*static_cast<const Stored*>(p)); }
};
template <> struct ArgTraits<Tensor> {
  static constexpr ArgKind kind = ArgKind::kTensor;
  static const Tensor& get(const void* p) { return *static_cast<const Tensor*>(p); }
};
template <> struct ArgTraits<std::optional<Tensor>> {
  static constexpr ArgKind kind = ArgKind::kOptionalTensor;
  static std::optional<Tensor> get(const void* p) {
    const Tensor& t = *static_cast<const Tensor*>(p);
    return t.defined() ? std::optional<Tensor>(t) : std::nullopt;
  }
};
template <> struct ArgTraits<int64_t> : StoredArg<int64_t, ArgKind::kInt64> {};
template <> struct ArgTraits<int> : StoredArg<int, ArgKind::kInt32, int64_t> {};
template <> struct ArgTraits<double> : StoredArg<double, ArgKind::kFloat> {};
template <> struct ArgTraits<float> : StoredArg<float, ArgKind::kFloat, double> {};
template <> struct ArgTraits<bool> : StoredArg<bool, ArgKind::kBool> {};
template <> struct ArgTraits<std::string> {
  static constexpr ArgKind kind = ArgKind::kString;
  static const std::string& get(const void* p) { return *static_cast<const std::string*>(p); }
};
template <> struct ArgTraits<std::vector<int64_t>> {
  static constexpr ArgKind kind = ArgKind::kInts;
  static const std::vector<int64_t>& get(const void* p) {
    return *static_cast<const std::vector<int64_t>*>(p);
  }
};

template <typename R>
struct ResultTraits {
  static_assert(sizeof(R) == 0,
                "kiln::ExtensionModule::def: unsupported return type; use Tensor, "
                "std::tuple<Tensor, ...>, std::vector<Tensor> or void");
};
template <> struct ResultTraits<void> {
  static constexpr ResultKind kind = ResultKind::kNone;
  static constexpr size_t count = 0;
};
template <> struct ResultTraits<Tensor> {
  static constexpr ResultKind kind = ResultKind::kTensor;
  static constexpr size_t count = 1;
  static void store(Tensor&& t, CallResults* r) { r->tensor = std::move(t); }
};
template <typename... Ts> struct ResultTraits<std::tuple<Ts...>> {
  static_assert((std::is_same_v<Ts, Tensor> && ...),
                "kiln::ExtensionModule::def: a returned tuple must hold only Tensors");
  static constexpr ResultKind kind = ResultKind::kTuple;
  static constexpr size_t count = sizeof...(Ts);
  static void store(std::tuple<Ts...>&& t, CallResults* r) {
    r->tensors.clear();
    std::apply([r](auto&&... ts) { (r->tensors.push_back(std::move(ts)), ...); }, std::move(t));
  }
};
template <> struct ResultTraits<std::vector<Tensor>> {
  static constexpr ResultKind kind = ResultKind::kList;
  static constexpr size_t count = 0;
  static void store(std::vector<Tensor>&& t, CallResults* r) { r->tensors = std::move(t); }
};

template <typename T>
using Bare = std::remove_cv_t<std::remove_reference_t<T>>;

template <typename R, typename... Args, size_t... I>
void invoke_erased(ExtensionFunction::ErasedFn erased, const void* const* args, CallResults* out,
                   std::index_sequence<I...>) {
  auto fn = reinterpret_cast<R (*)(Args...)>(erased);
  if constexpr (std::is_void_v<R>) {
    fn(ArgTraits<Bare<Args>>::get(args[I])...);
    (void)out;
  } else {
    ResultTraits<Bare<R>>::store(fn(ArgTraits<Bare<Args>>::get(args[I])...), out);
  }
  (void)args;
}

/// A function pointer with its signature described by value: what def hands to libkiln.
struct ErasedSignature {
  ExtensionFunction::ErasedFn fn;
  ExtensionFunction::Invoker invoker;
  const ArgKind* arg_kinds;
  size_t num_args;
  ResultKind result_kind;
  size_t num_results;
};

template <typename R, typename... Args>
struct Signature {
  static constexpr ArgKind kArgKinds[sizeof...(Args) + 1] = {ArgTraits<Bare<Args>>::kind...,
                                                             ArgKind::kTensor};  // never empty
  static void invoke(ExtensionFunction::ErasedFn fn, const void* const* args, CallResults* out) {
    invoke_erased<R, Args...>(fn, args, out, std::index_sequence_for<Args...>{});
  }
};

template <typename R, typename... Args>
ErasedSignature erase_function(R (*fn)(Args...)) {
  using S = Signature<R, Args...>;
  return {reinterpret_cast<ExtensionFunction::ErasedFn>(fn), &S::invoke, S::kArgKinds,
          sizeof...(Args), ResultTraits<Bare<R>>::kind, ResultTraits<Bare<R>>::count};
}

}  // namespace detail
}  // namespace kiln
