// Index-producing reductions: MaxDim / MinDim (values and indices along one dim) and ArgMax /
// ArgMin (along one dim, or over the row-major flattening).
//
// The index is that of the first occurrence of the extremum; a NaN counts as larger (for max)
// and smaller (for min) than everything, so the first NaN wins, as numpy.argmax and torch.max
// do. Indices are int64.
#include <limits>

#include "core/dtype_dispatch.h"
#include "kiln/functional/factory.h"
#include "kiln/functional/reduce.h"
#include "kiln/functional/shape.h"
#include "ops/grad_util.h"
#include "ops/reduce.h"
#include "ops/simd/float_kernels.h"

namespace kiln {
namespace {

using detail::ComputeType;

template <typename T, bool kMax>
struct ArgReduce {
  using C = ComputeType<T>;
  struct Acc {
    C value{};
    int64_t index = -1;  // -1: no element seen yet
  };
  int64_t* indices;
  T* values;  // null for ArgMax / ArgMin

  /// True when `b` replaces the current best `a` (a strict improvement, or the first NaN).
  static bool better(C b, C a) {
    return (kMax ? b > a : b < a) || (detail::is_nan(b) && !detail::is_nan(a));
  }
  Acc init() const { return {}; }
  Acc run(const T* x, int64_t n, int64_t base) const {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      // Find the extremum with SIMD, then its first position (a scan that stops early).
      const T m = kMax ? simd::reduce_max(x, n) : simd::reduce_min(x, n);
      const bool nan = detail::is_nan(m);
      for (int64_t i = 0; i < n; ++i) {
        if (nan ? detail::is_nan(x[i]) : x[i] == m) return {x[i], base + i};
      }
    }
    Acc best{static_cast<C>(x[0]), base};
    for (int64_t i = 1; i < n; ++i) {
      const C v = static_cast<C>(x[i]);
      if (better(v, best.value)) best = {v, base + i};
    }
    return best;
  }
  void update(Acc* acc, const T* row, int64_t w, int64_t k) const {
    for (int64_t j = 0; j < w; ++j) {
      const C v = static_cast<C>(row[j]);
      if (acc[j].index < 0 || better(v, acc[j].value)) acc[j] = {v, k};
    }
  }
  void merge(Acc& a, const Acc& later) const {
    if (later.index >= 0 && (a.index < 0 || better(later.value, a.value))) a = later;
  }
  void finish(int64_t i, const Acc& acc) const {
    indices[i] = acc.index;
    if (values != nullptr) values[i] = convert<T>(acc.value);
  }
};

/// Runs the arg reduction of `x` over `mask` into (values,) indices.
template <bool kMax>
void arg_reduce(const Tensor& x, const std::vector<bool>& mask, const Tensor* values,
                const Tensor& indices) {
  std::vector<Tensor> outputs{indices};
  if (values != nullptr) outputs.push_back(*values);
  const detail::ReduceLayout layout = detail::plan_reduction(x, mask, outputs, true);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* v = values != nullptr ? layout.buffers[1].data<T>() : nullptr;
    detail::run_reduction<T>(layout, ArgReduce<T, kMax>{layout.buffers[0].data<int64_t>(), v});
  });
}

/// The mask of an arg op: `dim` when given, else every dim (the flattened tensor).
std::vector<bool> arg_mask(const std::string& name, int64_t ndim, const Attrs& attrs) {
  if (attrs.is_none("dim")) return detail::reduction_mask(name, ndim, {});
  return detail::reduction_mask(name, ndim, {attrs.get<int64_t>("dim")});
}

template <bool kMax>
void dim_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  const std::vector<bool> mask = arg_mask(kMax ? "max" : "min", x.ndim(), ctx.attrs);
  arg_reduce<kMax>(x, mask, &ctx.outputs[0], ctx.outputs[1]);
}

template <bool kMax>
void arg_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  const std::vector<bool> mask = arg_mask(kMax ? "argmax" : "argmin", x.ndim(), ctx.attrs);
  arg_reduce<kMax>(x, mask, nullptr, ctx.outputs[0]);
}

/// Infers (values, indices) when `with_values`, else indices; refuses empty reductions.
InferFn arg_infer(const char* name, bool with_values) {
  return [name, with_values](const InferContext& ctx) {
    const TensorMeta& x = ctx.input(0);
    const std::vector<bool> mask = arg_mask(name, x.ndim(), ctx.attrs);
    detail::check_nonempty_reduction(name, x.shape, mask);
    const Shape shape = detail::reduced_shape(x.shape, mask, ctx.attrs.get<bool>("keepdim"));
    MetaList out;
    if (with_values) out.push_back({x.dtype, shape});
    out.push_back({DType::kInt64, shape});
    return out;
  };
}

KILN_REGISTER_OP(OpDef("MaxDim")
                     .input("x")
                     .attr("dim", AttrKind::kInt)
                     .attr("keepdim", AttrKind::kBool, false)
                     .outputs(2)
                     .traits(kTraitReduction)
                     .doc("(values, indices) of the maximum along `dim`; the first maximum "
                          "(or first NaN) wins")
                     .infer(arg_infer("max", true))
                     .grad(detail::selected_values_grad)
                     .kernel(DeviceType::kCPU, dim_kernel<true>));

KILN_REGISTER_OP(OpDef("MinDim")
                     .input("x")
                     .attr("dim", AttrKind::kInt)
                     .attr("keepdim", AttrKind::kBool, false)
                     .outputs(2)
                     .traits(kTraitReduction)
                     .doc("(values, indices) of the minimum along `dim`; the first minimum "
                          "(or first NaN) wins")
                     .infer(arg_infer("min", true))
                     .grad(detail::selected_values_grad)
                     .kernel(DeviceType::kCPU, dim_kernel<false>));

KILN_REGISTER_OP(OpDef("ArgMax")
                     .input("x")
                     .attr("dim", AttrKind::kInt, std::monostate{})
                     .attr("keepdim", AttrKind::kBool, false)
                     .traits(kTraitReduction | kTraitNotDifferentiable)
                     .doc("int64 index of the first maximum along `dim`, or in the row-major "
                          "flattening when `dim` is None")
                     .infer(arg_infer("argmax", false))
                     .kernel(DeviceType::kCPU, arg_kernel<true>));

KILN_REGISTER_OP(OpDef("ArgMin")
                     .input("x")
                     .attr("dim", AttrKind::kInt, std::monostate{})
                     .attr("keepdim", AttrKind::kBool, false)
                     .traits(kTraitReduction | kTraitNotDifferentiable)
                     .doc("int64 index of the first minimum along `dim`, or in the row-major "
                          "flattening when `dim` is None")
                     .infer(arg_infer("argmin", false))
                     .kernel(DeviceType::kCPU, arg_kernel<false>));

Attrs arg_attrs(std::optional<int64_t> dim, bool keepdim) {
  Attrs attrs{{"keepdim", keepdim}};
  if (dim) attrs.set("dim", *dim);
  return attrs;
}

}  // namespace

std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  static const OpDefPtr op = OpRegistry::Instance().get("MaxDim");
  TensorList out = call_op(*op, {x}, {{"dim", dim}, {"keepdim", keepdim}});
  return {std::move(out[0]), std::move(out[1])};
}

std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  static const OpDefPtr op = OpRegistry::Instance().get("MinDim");
  TensorList out = call_op(*op, {x}, {{"dim", dim}, {"keepdim", keepdim}});
  return {std::move(out[0]), std::move(out[1])};
}

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  static const OpDefPtr op = OpRegistry::Instance().get("ArgMax");
  return call_op(*op, {x}, arg_attrs(dim, keepdim))[0];
}

Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  static const OpDefPtr op = OpRegistry::Instance().get("ArgMin");
  return call_op(*op, {x}, arg_attrs(dim, keepdim))[0];
}

}  // namespace kiln
