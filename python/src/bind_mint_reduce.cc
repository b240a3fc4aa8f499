// kiln.mint reductions, scans, softmax and sorting (include/kiln/functional/reduce.h, sort.h),
// and the matching Tensor methods (x.sum(), x.max(dim), x.all(), x.softmax(dim), x.sort(), ...).
//
// `dim` follows PyTorch: None (every dim), an int, or a list / tuple of ints. max / min with a
// dim, sort and topk return a named tuple (values, indices); max / min without one, the 0-d
// maximum.
#include <nanobind/stl/optional.h>

#include <optional>
#include <string>

#include "bindings.h"
#include "convert.h"
#include "kiln/functional/elementwise.h"
#include "kiln/functional/reduce.h"
#include "kiln/functional/sort.h"

namespace kiln::py {
namespace nb = nanobind;
using namespace nb::literals;

namespace {

std::string type_name_of(nb::handle obj) { return nb::type_name(obj.type()).c_str(); }

/// Argument `name` of `op` as an int (not a bool, as PyTorch).
int64_t parse_int(const char* op, const char* name, nb::handle obj) {
  KILN_CHECK_TYPE(is_int_arg(obj))
      << op << ": expected " << name << " to be an int, got " << type_name_of(obj);
  const Py_ssize_t v = PyNumber_AsSsize_t(obj.ptr(), PyExc_IndexError);
  if (v == -1 && PyErr_Occurred()) throw nb::python_error();
  return static_cast<int64_t>(v);
}

/// One dim, as an int.
int64_t parse_dim(const char* op, nb::handle obj) { return parse_int(op, "dim", obj); }

/// None -> {} (every dim), an int -> {dim}, a list / tuple of ints -> the dims.
Dims parse_dims(const char* op, nb::handle obj) {
  if (obj.is_none()) return {};
  if (is_int_arg(obj)) return {parse_dim(op, obj)};
  KILN_CHECK_TYPE(PyList_Check(obj.ptr()) || PyTuple_Check(obj.ptr()))
      << op << ": expected dim to be None, an int or a list / tuple of ints, got "
      << type_name_of(obj);
  Dims dims;
  for (nb::handle item : obj) dims.push_back(parse_dim(op, item));
  return dims;
}

std::optional<DType> parse_dtype(const std::optional<DTypeArg>& dtype) {
  if (!dtype) return std::nullopt;
  return dtype->get();
}

// Each *_impl is both a kiln.mint function (through a TensorArg) and a Tensor method.
Tensor sum_impl(const Tensor& x, nb::handle dim, bool keepdim,
                const std::optional<DTypeArg>& dtype) {
  return sum(x, parse_dims("sum", dim), keepdim, parse_dtype(dtype));
}
Tensor mean_impl(const Tensor& x, nb::handle dim, bool keepdim,
                 const std::optional<DTypeArg>& dtype) {
  if (dtype) return mean(x, parse_dims("mean", dim), keepdim, dtype->get());
  return mean(x, parse_dims("mean", dim), keepdim);
}
Tensor prod_impl(const Tensor& x, nb::handle dim, bool keepdim,
                 const std::optional<DTypeArg>& dtype) {
  if (dtype) return prod(x, parse_dims("prod", dim), keepdim, dtype->get());
  return prod(x, parse_dims("prod", dim), keepdim);
}
Tensor amax_impl(const Tensor& x, nb::handle dim, bool keepdim) {
  return amax(x, parse_dims("amax", dim), keepdim);
}
Tensor amin_impl(const Tensor& x, nb::handle dim, bool keepdim) {
  return amin(x, parse_dims("amin", dim), keepdim);
}
// all / any count the zeros / nonzeros over `dim` (bool results; NaN is nonzero), so that an
// empty reduction gives True / False, as in NumPy and PyTorch (amin / amax refuse empty ones).
Tensor all_impl(const Tensor& x, nb::handle dim, bool keepdim) {
  const Tensor zero = Tensor::scalar(Scalar(int64_t{0}));
  return eq(sum(eq(x, zero), parse_dims("all", dim), keepdim), zero);
}
Tensor any_impl(const Tensor& x, nb::handle dim, bool keepdim) {
  const Tensor zero = Tensor::scalar(Scalar(int64_t{0}));
  return gt(sum(ne(x, zero), parse_dims("any", dim), keepdim), zero);
}
// kiln.mint.ValuesIndices, the named tuple max and min along a dim return (as PyTorch's
// torch.return_types.max: t.max(1).values); made by bind_mint_reduce, which the module keeps.
PyObject* g_values_indices = nullptr;

// max(x, other) and min(x, other) with a tensor second argument are PyTorch's elementwise forms
// (maximum / minimum).
nb::object max_impl(const Tensor& x, nb::handle dim, bool keepdim) {
  if (dim.is_none()) return nb::cast(amax(x, {}, keepdim));
  if (const Tensor* other = tensor_ptr(dim.ptr())) {
    KILN_CHECK_TYPE(!keepdim) << "max: keepdim is for a dim, not for max(input, other)";
    return nb::cast(maximum(x, *other));
  }
  auto [values, indices] = max(x, parse_dim("max", dim), keepdim);
  return nb::handle(g_values_indices)(values, indices);
}
nb::object min_impl(const Tensor& x, nb::handle dim, bool keepdim) {
  if (dim.is_none()) return nb::cast(amin(x, {}, keepdim));
  if (const Tensor* other = tensor_ptr(dim.ptr())) {
    KILN_CHECK_TYPE(!keepdim) << "min: keepdim is for a dim, not for min(input, other)";
    return nb::cast(minimum(x, *other));
  }
  auto [values, indices] = min(x, parse_dim("min", dim), keepdim);
  return nb::handle(g_values_indices)(values, indices);
}
// sort's `stable` is accepted for PyTorch's signature: Kiln's sort is always stable.
nb::object sort_impl(const Tensor& x, nb::handle dim, bool descending, bool /*stable*/) {
  auto [values, indices] = sort(x, parse_dim("sort", dim), descending);
  return nb::handle(g_values_indices)(values, indices);
}
Tensor argsort_impl(const Tensor& x, nb::handle dim, bool descending, bool /*stable*/) {
  return argsort(x, parse_dim("argsort", dim), descending);
}
Tensor msort_impl(const Tensor& x) { return std::get<0>(sort(x, 0)); }
// topk's `sorted` is accepted for PyTorch's signature: the k come back sorted either way (PyTorch
// leaves their order unspecified without it).
nb::object topk_impl(const Tensor& x, nb::handle k, nb::handle dim, bool largest, bool /*sorted*/) {
  auto [values, indices] = topk(x, parse_int("topk", "k", k), parse_dim("topk", dim), largest);
  return nb::handle(g_values_indices)(values, indices);
}
std::optional<int64_t> optional_dim(const char* op, nb::handle dim) {
  if (dim.is_none()) return std::nullopt;
  return parse_dim(op, dim);
}
Tensor argmax_impl(const Tensor& x, nb::handle dim, bool keepdim) {
  return argmax(x, optional_dim("argmax", dim), keepdim);
}
Tensor argmin_impl(const Tensor& x, nb::handle dim, bool keepdim) {
  return argmin(x, optional_dim("argmin", dim), keepdim);
}
// The divisor's correction from PyTorch's two spellings: correction=N, or the older
// unbiased=True / False (1 / 0); 1 when neither is given.
int64_t correction_of(const char* op, const std::optional<int64_t>& correction,
                      const std::optional<bool>& unbiased) {
  KILN_CHECK_VALUE(!correction || !unbiased)
      << op << ": expected correction or unbiased, not both (unbiased=True is correction=1)";
  if (unbiased) return *unbiased ? 1 : 0;
  return correction.value_or(1);
}
// var / std take PyTorch's both spellings: (dim, unbiased, keepdim) by position (x.var(1, False))
// and correction= by keyword.
Tensor var_impl(const Tensor& x, nb::handle dim, std::optional<bool> unbiased, bool keepdim,
                std::optional<int64_t> correction) {
  return var(x, parse_dims("var", dim), correction_of("var", correction, unbiased), keepdim);
}
Tensor std_impl(const Tensor& x, nb::handle dim, std::optional<bool> unbiased, bool keepdim,
                std::optional<int64_t> correction) {
  return kiln::std(x, parse_dims("std", dim), correction_of("std", correction, unbiased), keepdim);
}
Tensor logsumexp_impl(const Tensor& x, nb::handle dim, bool keepdim) {
  return logsumexp(x, parse_dims("logsumexp", dim), keepdim);
}
Tensor cumsum_impl(const Tensor& x, nb::handle dim, const std::optional<DTypeArg>& dtype,
                   bool reverse) {
  return cumsum(x, parse_dim("cumsum", dim), parse_dtype(dtype), reverse);
}
// softmax / log_softmax with PyTorch's `dtype`: the input converted to it first (a float16
// input's softmax computed and returned in float32, say). A floating dtype only: converting to an
// integer one truncated the input, and the result came back float32 anyway.
Tensor converted(const char* op, const Tensor& x, const std::optional<DTypeArg>& dtype) {
  if (!dtype) return x;
  KILN_CHECK_DTYPE(is_floating_point(dtype->get()))
      << op << ": expected dtype to be a floating-point dtype to compute in, got " << dtype->get();
  return to(x, dtype->get());
}
Tensor softmax_impl(const Tensor& x, nb::handle dim, const std::optional<DTypeArg>& dtype) {
  return softmax(converted("softmax", x, dtype), parse_dim("softmax", dim));
}
Tensor log_softmax_impl(const Tensor& x, nb::handle dim, const std::optional<DTypeArg>& dtype) {
  return log_softmax(converted("log_softmax", x, dtype), parse_dim("log_softmax", dim));
}

/// Defines `name` as a kiln.mint function (first argument "x", accepting Python numbers) and as a
/// Tensor method, with the same keyword arguments.
template <typename Ret, typename... Rest, typename... Extra>
void def_both(nb::module_& mint, nb::handle tensor_cls, const char* name,
              Ret (*impl)(const Tensor&, Rest...), const char* doc, const Extra&... extra) {
  mint.def(
      name, [impl](const TensorArg& x, Rest... rest) { return impl(x, rest...); }, "x"_a, extra...,
      doc);
  nb::cpp_function_def(impl, nb::scope(tensor_cls), nb::name(name), nb::is_method(), extra..., doc);
}

}  // namespace

void bind_mint_reduce(nb::module_& mint) {
  const nb::handle cls = nb::type<Tensor>();
  nb::object values_indices =
      nb::module_::import_("collections")
          .attr("namedtuple")("ValuesIndices", nb::make_tuple("values", "indices"),
                              "module"_a = "kiln.mint");
  mint.attr("ValuesIndices") = values_indices;
  g_values_indices = values_indices.release().ptr();  // for the process, as the module's
  const auto dim = "dim"_a = nb::none();
  const auto keepdim = "keepdim"_a = false;
  def_both(mint, cls, "sum", &sum_impl,
           "Sum over `dim` (None: all); bool and integer inputs give int64 unless `dtype`.", dim,
           keepdim, "dtype"_a = nb::none());
  def_both(mint, cls, "mean", &mean_impl,
           "Mean over `dim`; integer inputs give the default dtype. With `dtype` (a floating "
           "dtype), the "
           "input is converted to it first.",
           dim, keepdim, "dtype"_a = nb::none());
  def_both(mint, cls, "prod", &prod_impl,
           "Product over `dim`; bool and integer inputs give int64 unless `dtype`.", dim, keepdim,
           "dtype"_a = nb::none());
  def_both(mint, cls, "amax", &amax_impl, "Largest element over `dim` (NaN propagates).", dim,
           keepdim);
  def_both(mint, cls, "amin", &amin_impl, "Smallest element over `dim` (NaN propagates).", dim,
           keepdim);
  def_both(mint, cls, "all", &all_impl,
           "Whether every element over `dim` (None: all) is nonzero (True); a bool tensor.", dim,
           keepdim);
  def_both(mint, cls, "any", &any_impl,
           "Whether any element over `dim` (None: all) is nonzero (True); a bool tensor.", dim,
           keepdim);
  def_both(mint, cls, "max", &max_impl,
           "The 0-d maximum, the named tuple (values, indices) along `dim` (an int), or with a "
           "tensor in place of dim the elementwise maximum (PyTorch's max(input, other)).",
           dim,
           keepdim);
  def_both(mint, cls, "min", &min_impl,
           "The 0-d minimum, the named tuple (values, indices) along `dim` (an int), or with a "
           "tensor in place of dim the elementwise minimum (PyTorch's min(input, other)).",
           dim,
           keepdim);
  def_both(mint, cls, "argmax", &argmax_impl,
           "int64 index of the first maximum along `dim`, or in the flattened tensor.", dim,
           keepdim);
  def_both(mint, cls, "argmin", &argmin_impl,
           "int64 index of the first minimum along `dim`, or in the flattened tensor.", dim,
           keepdim);
  def_both(mint, cls, "sort", &sort_impl,
           "The named tuple (values, indices): x sorted along `dim`, ascending unless "
           "`descending`; NaN above every number. Always stable (`stable` is accepted).",
           "dim"_a = -1, "descending"_a = false, nb::kw_only(), "stable"_a = false);
  def_both(mint, cls, "argsort", &argsort_impl,
           "The int64 indices that sort x along `dim` (sort(...).indices).", "dim"_a = -1,
           "descending"_a = false, nb::kw_only(), "stable"_a = false);
  def_both(mint, cls, "msort", &msort_impl, "x sorted along dim 0 (sort(x, 0).values).");
  def_both(mint, cls, "topk", &topk_impl,
           "The named tuple (values, indices) of the k largest elements along `dim` (smallest "
           "unless `largest`), largest (smallest) first; among equal values the earlier first.",
           "k"_a, "dim"_a = -1, "largest"_a = true, "sorted"_a = true);
  def_both(mint, cls, "var", &var_impl,
           "Variance over `dim` with divisor max(0, N - correction); correction 1 by default, or "
           "unbiased=False for 0 (PyTorch's older spelling).",
           dim, "unbiased"_a = nb::none(), keepdim, nb::kw_only(), "correction"_a = nb::none());
  def_both(mint, cls, "std", &std_impl, "Standard deviation: sqrt(var(...)).", dim,
           "unbiased"_a = nb::none(), keepdim, nb::kw_only(), "correction"_a = nb::none());
  def_both(mint, cls, "logsumexp", &logsumexp_impl,
           "log(sum(exp(x))) over `dim`, without overflow.", "dim"_a.none(), keepdim);
  def_both(
      mint, cls, "cumsum", &cumsum_impl,
      "Inclusive prefix sums along `dim` (suffix sums with `reverse`); bool and integer inputs "
      "give int64.",
      "dim"_a.none(), "dtype"_a = nb::none(), nb::kw_only(), "reverse"_a = false);
  mint.def(
      "linear_scan",
      [](const TensorArg& a, const TensorArg& b, int64_t dim, bool reverse) {
        return linear_scan(a, b, dim, reverse);
      },
      "a"_a, "b"_a, "dim"_a, nb::kw_only(), "reverse"_a = false,
      "linear_scan(a, b, dim, *, reverse=False): y[k] = a[k] * y[k - 1] + b[k] along `dim` "
      "(y[-1] = 0; from the end with `reverse`), a and b of one shape, in one pass; "
      "differentiable in both (Kiln's; cumprod and decaying sums are such scans).");
  def_both(mint, cls, "softmax", &softmax_impl,
           "Softmax along `dim` (numerically stable); with `dtype`, of x converted to it.",
           "dim"_a = -1, "dtype"_a = nb::none());
  def_both(mint, cls, "log_softmax", &log_softmax_impl,
           "log(softmax(x)) along `dim`, computed directly; with `dtype`, of x converted to it.",
           "dim"_a = -1, "dtype"_a = nb::none());
}

}  // namespace kiln::py
