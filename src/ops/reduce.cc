// Accumulating reductions: ReduceSum, ReduceMean, ReduceProd, ReduceMax (amax), ReduceMin (amin).
//
// Floating sums and means accumulate in float64: contiguous float32/float64 runs go through
// simd::reduce_sum (blocks combined in float64), and a reduction over an outer dim adds rows with
// SIMD in the element type 32 rows at a time before folding them into float64 (SimdFloatSum).
// Integer and bool sums and products accumulate in uint64, which wraps like int64 arithmetic
// without signed-overflow UB. max and min propagate NaN (as numpy.max) and refuse an empty
// reduction.
#include "kiln/functional/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/dtype_dispatch.h"
#include "core/target_clones.h"
#include "kiln/functional/elementwise.h"
#include "kiln/functional/shape.h"
#include "ops/grad_util.h"
#include "ops/reduce.h"
#include "ops/simd/float_kernels.h"

namespace kiln {
namespace {

using detail::ComputeType;
using detail::kIsFloat;

/// Sum of x[0..n) in float64.
template <typename T>
double sum_run(const T* x, int64_t n) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (n >= 32) return static_cast<double>(simd::reduce_sum(x, n));
  } else if constexpr (kIsFloat16<T>) {
    return simd::reduce_sum(x, n);
  }
  double total = 0;
  for (int64_t i = 0; i < n; ++i) total += static_cast<double>(static_cast<ComputeType<T>>(x[i]));
  return total;
}

/// sum (divisor 1) and mean (divisor = count) of any input, accumulated in float64, written as O.
template <typename T, typename O>
struct FloatSum {
  using Acc = double;
  O* out;
  double divisor;
  Acc init() const { return 0; }
  Acc run(const T* x, int64_t n, int64_t) const { return sum_run(x, n); }
  void update(Acc* acc, const T* row, int64_t w, int64_t) const {
    for (int64_t j = 0; j < w; ++j)
      acc[j] += static_cast<double>(static_cast<ComputeType<T>>(row[j]));
  }
  void merge(Acc& a, const Acc& b) const { a += b; }
  void finish(int64_t i, const Acc& acc) const { out[i] = convert<O>(acc / divisor); }
};

/// FloatSum for float32, float64 and float16: rows are added with SIMD into an accumulator row of
/// the compute type (float for float16, whose rows are widened in registers), folded into the
/// float64 accumulators every kRows rows (a float32 partial of 32 rows loses at most ~32 ulp, and
/// the fold keeps that from growing with the row count).
template <typename T>
struct SimdFloatSum : FloatSum<T, T> {
  using C = ComputeType<T>;
  static constexpr int64_t kRows = 32;
  void update_block(double* acc, const T* rows, int64_t stride, int64_t k0, int64_t k1,
                    int64_t w) const {
    C block[detail::kColumnTile];
    for (int64_t k = k0; k < k1; k += kRows) {
      const int64_t end = std::min(k1, k + kRows);
      convert_contiguous(rows + k * stride, block, w);
      for (int64_t r = k + 1; r < end; ++r) {
        if constexpr (kIsFloat16<T>) {
          simd::accumulate(rows + r * stride, block, w);
        } else {
          simd::binary(simd::BinaryOp::kAdd, block, rows + r * stride, block, w);
        }
      }
      for (int64_t j = 0; j < w; ++j) acc[j] += static_cast<double>(block[j]);
    }
  }
};

/// The sum / mean reducer for input T and output O. bfloat16 keeps the float64 sum of each
/// element: with float32's exponent range, its float32 partial sums could overflow.
template <typename T, typename O>
auto float_sum(O* out, double divisor) {
  if constexpr (std::is_same_v<T, O> && std::is_floating_point_v<ComputeType<T>> &&
                !std::is_same_v<T, BFloat16>) {
    return SimdFloatSum<T>{{out, divisor}};
  } else {
    return FloatSum<T, O>{out, divisor};
  }
}

/// Integer / bool sum (kProd: product) into int64, with wrapping uint64 arithmetic.
template <typename T, bool kProd>
struct IntAccumulate {
  using Acc = uint64_t;
  int64_t* out;
  static Acc value(T v) { return static_cast<uint64_t>(static_cast<int64_t>(v)); }
  static Acc combine(Acc a, Acc b) { return kProd ? a * b : a + b; }
  Acc init() const { return kProd ? 1 : 0; }
  Acc run(const T* x, int64_t n, int64_t) const {
    Acc acc = init();
    for (int64_t i = 0; i < n; ++i) acc = combine(acc, value(x[i]));
    return acc;
  }
  void update(Acc* acc, const T* row, int64_t w, int64_t) const {
    for (int64_t j = 0; j < w; ++j) acc[j] = combine(acc[j], value(row[j]));
  }
  void merge(Acc& a, const Acc& b) const { a = combine(a, b); }
  void finish(int64_t i, const Acc& acc) const { out[i] = static_cast<int64_t>(acc); }
};

/// A factor of a floating product in float64 (the 16-bit floats through float).
template <typename T>
double prod_factor(T v) {
  return static_cast<double>(static_cast<ComputeType<T>>(v));
}

/// lanes[k] *= x[i] for every i = k (mod kProdLanes) in [0, n), n a multiple of kProdLanes:
/// interleaved partial products in float64. One chain of dependent multiplies waits out the
/// multiply's latency on every element (1 ms for 1M); 32 chains are eight AVX2 vectors, enough to
/// keep the multiplier busy (eight chains, two vectors, still waited: 0.17 ms for 1M). Compiled
/// per target: baseline x86-64 holds two doubles a vector, AVX2 four.
constexpr int64_t kProdLanes = 32;
template <typename T>
void multiply_lanes_loop(const T* x, int64_t n, double* lanes) {
  for (int64_t i = 0; i < n; i += kProdLanes) {
    for (int64_t k = 0; k < kProdLanes; ++k) {
      lanes[k] *= prod_factor(x[i + k]);
    }
  }
}
template <typename T>
void multiply_lanes(const T* x, int64_t n, double* lanes) {  // the 16-bit floats
  multiply_lanes_loop(x, n, lanes);
}
KILN_TARGET_CLONES
void multiply_lanes(const float* x, int64_t n, double* lanes) { multiply_lanes_loop(x, n, lanes); }
KILN_TARGET_CLONES
void multiply_lanes(const double* x, int64_t n, double* lanes) { multiply_lanes_loop(x, n, lanes); }

/// Floating product, accumulated in float64.
template <typename T>
struct FloatProd {
  using Acc = double;
  T* out;
  Acc init() const { return 1; }
  Acc run(const T* x, int64_t n, int64_t) const {
    double lanes[kProdLanes];
    std::fill(lanes, lanes + kProdLanes, 1.0);
    int64_t i = n - n % kProdLanes;
    multiply_lanes(x, i, lanes);
    for (int64_t half = kProdLanes / 2; half > 0; half /= 2) {  // a tree: log2(32) steps
      for (int64_t k = 0; k < half; ++k) lanes[k] *= lanes[k + half];
    }
    double acc = lanes[0];
    for (; i < n; ++i) acc *= prod_factor(x[i]);
    if (std::isfinite(acc) && acc != 0) return acc;
    // One lane may have overflowed while another underflowed (1e200, 1e-200, ... gives inf * 0):
    // the product in order decides.
    acc = 1;
    for (i = 0; i < n; ++i) acc *= prod_factor(x[i]);
    return acc;
  }
  void update(Acc* acc, const T* row, int64_t w, int64_t) const {
    for (int64_t j = 0; j < w; ++j) acc[j] *= prod_factor(row[j]);
  }
  void merge(Acc& a, const Acc& b) const { a *= b; }
  void finish(int64_t i, const Acc& acc) const { out[i] = convert<T>(acc); }
};

/// lanes[k] = max (kMax) or min of lanes[k] and every x[i], i = k (mod kExtremumLanes), over [0,
/// n), n a multiple of kExtremumLanes: independent chains for an integer row (one chain waits out a
/// compare and select per element: int64 amax along rows of 1024 ran at 0.3x PyTorch). int64 and
/// int32 are compiled per target: baseline x86-64 has no 64-bit compare in vectors, AVX2 compares
/// four lanes at once (int64 amax along rows of 1024: 0.26 -> 0.15 ms for 1M, PyTorch 0.14).
constexpr int64_t kExtremumLanes = 16;
template <typename T>
[[gnu::always_inline]] inline void extremum_lanes_loop(const T* x, int64_t n, bool max, T* lanes) {
  T acc[kExtremumLanes];  // a local copy stays in registers (lanes could alias x)
  std::copy(lanes, lanes + kExtremumLanes, acc);
  for (int64_t i = 0; i < n; i += kExtremumLanes) {
    for (int64_t k = 0; k < kExtremumLanes; ++k) {
      acc[k] = max ? std::max(acc[k], x[i + k]) : std::min(acc[k], x[i + k]);
    }
  }
  std::copy(acc, acc + kExtremumLanes, lanes);
}
template <typename T>
void extremum_lanes(const T* x, int64_t n, bool max, T* lanes) {
  extremum_lanes_loop(x, n, max, lanes);
}
KILN_TARGET_CLONES
void extremum_lanes(const int64_t* x, int64_t n, bool max, int64_t* lanes) {
  extremum_lanes_loop(x, n, max, lanes);
}
KILN_TARGET_CLONES
void extremum_lanes(const int32_t* x, int64_t n, bool max, int32_t* lanes) {
  extremum_lanes_loop(x, n, max, lanes);
}

/// max (kMax) or min; a NaN anywhere wins.
template <typename T, bool kMax>
struct Extremum {
  using Acc = ComputeType<T>;
  T* out;
  static Acc pick(Acc a, Acc b) { return ((kMax ? b > a : b < a) || detail::is_nan(b)) ? b : a; }
  Acc init() const {
    if constexpr (std::is_floating_point_v<Acc>) {
      return kMax ? -std::numeric_limits<Acc>::infinity() : std::numeric_limits<Acc>::infinity();
    } else {
      return kMax ? std::numeric_limits<Acc>::lowest() : std::numeric_limits<Acc>::max();
    }
  }
  Acc run(const T* x, int64_t n, int64_t) const {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      return kMax ? simd::reduce_max(x, n) : simd::reduce_min(x, n);
    }
    Acc acc = init();
    int64_t i = 0;
    if constexpr (std::is_integral_v<T>) {
      T lanes[kExtremumLanes];
      std::fill(lanes, lanes + kExtremumLanes, static_cast<T>(acc));
      i = n - n % kExtremumLanes;
      extremum_lanes(x, i, kMax, lanes);
      for (const T v : lanes) acc = pick(acc, static_cast<Acc>(v));
    }
    for (; i < n; ++i) acc = pick(acc, static_cast<Acc>(x[i]));
    return acc;
  }
  void update(Acc* acc, const T* row, int64_t w, int64_t) const {
    for (int64_t j = 0; j < w; ++j) acc[j] = pick(acc[j], static_cast<Acc>(row[j]));
  }
  void merge(Acc& a, const Acc& b) const { a = pick(a, b); }
  void finish(int64_t i, const Acc& acc) const { out[i] = convert<T>(acc); }
};

/// Shared body of sum and prod: floating results accumulate in the result dtype's reducer,
/// integer results in uint64 (converted when the result dtype is not int64).
template <bool kProd>
void accumulate_kernel(KernelContext& ctx, const char* name) {
  const Tensor& out = ctx.outputs[0];
  const DType dtype = out.dtype();
  const detail::ReduceArgs args = detail::reduce_args(name, ctx.inputs[0].shape(), ctx.attrs);
  if (is_floating_point(dtype)) {
    const Tensor x = detail::converted(ctx.inputs[0], dtype);
    const detail::ReduceLayout layout = detail::plan_reduction(x, args.mask, {out}, false);
    visit_dtype(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (kIsFloat<T>) {
        T* o = layout.buffers[0].data<T>();
        if constexpr (kProd) {
          detail::run_reduction<T>(layout, FloatProd<T>{o});
        } else {
          detail::run_reduction<T>(layout, float_sum<T, T>(o, 1.0));
        }
      }
    });
    return;
  }
  const Tensor& x = ctx.inputs[0];
  const Tensor wide = dtype == DType::kInt64 ? out : Tensor::empty(out.shape(), DType::kInt64);
  const detail::ReduceLayout layout = detail::plan_reduction(x, args.mask, {wide}, false);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!kIsFloat<T>) {
      detail::run_reduction<T>(layout, IntAccumulate<T, kProd>{layout.buffers[0].data<int64_t>()});
    }
  });
  if (!wide.is_same(out)) copy_into(out, wide);
}

void mean_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  const detail::ReduceArgs args = detail::reduce_args("mean", x.shape(), ctx.attrs);
  const double count = static_cast<double>(detail::reduced_count(x.shape(), args.mask));
  const detail::ReduceLayout layout = detail::plan_reduction(x, args.mask, ctx.outputs, false);
  detail::visit_floating_result(x.dtype(), layout.buffers[0].dtype(), [&](auto in, auto out) {
    using T = typename decltype(in)::type;
    using O = typename decltype(out)::type;
    detail::run_reduction<T>(layout, float_sum<T, O>(layout.buffers[0].data<O>(), count));
  });
}

template <bool kMax>
void extremum_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  const detail::ReduceArgs args = detail::reduce_args(kMax ? "amax" : "amin", x.shape(), ctx.attrs);
  const detail::ReduceLayout layout = detail::plan_reduction(x, args.mask, ctx.outputs, false);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    detail::run_reduction<T>(layout, Extremum<T, kMax>{layout.buffers[0].data<T>()});
  });
}

/// The common schema of the dims/keepdim reductions.
OpDef reduce_op(const char* name, const char* doc) {
  OpDef def(name);
  def.input("x")
      .attr("dims", AttrKind::kInts, std::vector<int64_t>{})
      .attr("keepdim", AttrKind::kBool, false)
      .traits(kTraitReduction)
      .doc(doc);
  return def;
}

/// Infers the reduced shape with dtype `dtype_of(input dtype)`; `nonempty` refuses empty dims.
template <typename DTypeFn>
InferFn reduce_infer(const char* name, bool nonempty, DTypeFn dtype_of) {
  return [name, nonempty, dtype_of](const InferContext& ctx) {
    const TensorMeta& x = ctx.input(0);
    const detail::ReduceArgs args = detail::reduce_args(name, x.shape, ctx.attrs);
    if (nonempty) detail::check_nonempty_reduction(name, x.shape, args.mask);
    return MetaList{{dtype_of(x.dtype, ctx.attrs), args.shape}};
  };
}

/// Infer for sum / prod: checks the optional `dtype` attribute.
InferFn accumulate_infer(const char* name) {
  return reduce_infer(name, false, [name](DType in, const Attrs& attrs) {
    if (!attrs.is_none("dtype"))
      detail::check_accumulate_dtype(name, in, attrs.get<DType>("dtype"));
    return detail::accumulate_dtype(in, attrs);
  });
}

DType same_dtype(DType in, const Attrs&) { return in; }
DType floating_dtype(DType in, const Attrs&) { return to_floating(in); }

// Gradient rules (see Note [Gradient rules] in ops/grad_util.h). g and y arrive with the reduced
// dims kept, so they broadcast against x.

Tensor sum_derivative(const Tensor& x, const Tensor&, const Tensor& g, const Dims&,
                      const Attrs&) {
  return expand(g, x.shape());
}

Tensor mean_derivative(const Tensor& x, const Tensor&, const Tensor& g, const Dims& dims,
                      const Attrs&) {
  return expand(detail::divide_by_count(g, x, dims), x.shape());
}

// The product of the other elements: y / x where x != 0; at a zero, the product of the nonzero
// others times that of the other zeros: 1 when it is its slice's only zero, 0 when there are more.
// No division by zero, no data read. With exactly two zeros the other zero's factor is that zero
// itself, read through the sum of the slice's zeros less this one: 0 in value, but differentiable,
// so that the second derivative (the product of the rest) is right. (With three or more, the
// constant 0 is right to the second derivative; PyTorch, through cumulative products, to any.)
Tensor prod_derivative(const Tensor& x, const Tensor& y, const Tensor& g, const Dims& dims,
                      const Attrs&) {
  const Tensor zero = Tensor::scalar(0.0);
  const Tensor one = Tensor::scalar(1.0);
  const Tensor is_zero = eq(x, Tensor::scalar(0));
  const Tensor x_or_one = where(is_zero, one, x);
  const Tensor zero_count = sum(is_zero, dims, /*keepdim=*/true);
  const Tensor zeros = where(is_zero, x, zero);
  const Tensor other_zeros = where(
      eq(zero_count, Tensor::scalar(1)), one,
      where(eq(zero_count, Tensor::scalar(2)), sum(zeros, dims, /*keepdim=*/true) - zeros, zero));
  const Tensor at_zero = prod(x_or_one, dims, /*keepdim=*/true) * other_zeros;
  return g * where(is_zero, at_zero, y / x_or_one);
}

// amax / amin: the gradient is split evenly among the elements equal to the result (PyTorch),
// where a NaN result "equals" the NaNs that made it (as max / min along a dim route it to the NaN;
// PyTorch's amax gives the whole reduction a NaN gradient there, its 0 / 0).
Tensor extremum_derivative(const Tensor& x, const Tensor& y, const Tensor& g, const Dims& dims,
                           const Attrs&) {
  const Tensor hit = logical_or(eq(x, y), logical_and(ne(x, x), ne(y, y)));
  return where(hit, g / sum(hit, dims, /*keepdim=*/true), Tensor::scalar(0.0));
}

KILN_REGISTER_OP(reduce_op("ReduceSum",
                           "Sum over `dims` (all when empty); bool and integer inputs give int64 "
                           "unless `dtype` is given")
                     .attr("dtype", AttrKind::kDType, std::monostate{})
                     .infer(accumulate_infer("sum"))
                     .grad(detail::reduction_rule(sum_derivative, /*reads_output=*/false))
                     .kernel(DeviceType::kCPU,
                             [](KernelContext& ctx) { accumulate_kernel<false>(ctx, "sum"); }));

KILN_REGISTER_OP(reduce_op("ReduceProd",
                           "Product over `dims`; bool and integer inputs give int64 unless "
                           "`dtype` is given")
                     .attr("dtype", AttrKind::kDType, std::monostate{})
                     .infer(accumulate_infer("prod"))
                     .grad(detail::reduction_rule(prod_derivative))
                     .kernel(DeviceType::kCPU,
                             [](KernelContext& ctx) { accumulate_kernel<true>(ctx, "prod"); }));

KILN_REGISTER_OP(reduce_op("ReduceMean",
                           "Mean over `dims`; integer inputs give the default floating dtype")
                     .infer(reduce_infer("mean", false, floating_dtype))
                     .grad(detail::reduction_rule(mean_derivative, /*reads_output=*/false))
                     .kernel(DeviceType::kCPU, mean_kernel));

KILN_REGISTER_OP(reduce_op("ReduceMax", "Largest element over `dims` (NaN propagates)")
                     .infer(reduce_infer("amax", true, same_dtype))
                     .grad(detail::reduction_rule(extremum_derivative))
                     .kernel(DeviceType::kCPU, extremum_kernel<true>));

KILN_REGISTER_OP(reduce_op("ReduceMin", "Smallest element over `dims` (NaN propagates)")
                     .infer(reduce_infer("amin", true, same_dtype))
                     .grad(detail::reduction_rule(extremum_derivative))
                     .kernel(DeviceType::kCPU, extremum_kernel<false>));

}  // namespace

Tensor sum(const Tensor& x, const Dims& dims, bool keepdim, std::optional<DType> dtype) {
  static const OpDefPtr op = OpRegistry::Instance().get("ReduceSum");
  Attrs attrs{{"dims", dims}, {"keepdim", keepdim}};
  if (dtype) attrs.set("dtype", *dtype);
  return call_op(*op, {x}, attrs)[0];
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  const Shape& from = x.shape();
  if (from == shape) return x;
  KILN_CHECK_SHAPE(broadcast_shapes(shape, from) == from)
      << "sum_to: shape " << shape_str(shape) << " does not broadcast to " << shape_str(from);
  const int64_t lead = static_cast<int64_t>(from.size() - shape.size());
  Dims dims;
  for (int64_t d = 0; d < static_cast<int64_t>(from.size()); ++d) {
    if (d < lead || (shape[d - lead] == 1 && from[d] != 1)) dims.push_back(d);
  }
  return reshape(sum(x, dims, /*keepdim=*/true), shape);
}

Tensor prod(const Tensor& x, const Dims& dims, bool keepdim) {
  static const OpDefPtr op = OpRegistry::Instance().get("ReduceProd");
  return call_op(*op, {x}, {{"dims", dims}, {"keepdim", keepdim}})[0];
}

Tensor prod(const Tensor& x, const Dims& dims, bool keepdim, DType dtype) {
  static const OpDefPtr op = OpRegistry::Instance().get("ReduceProd");
  return call_op(*op, {x}, {{"dims", dims}, {"keepdim", keepdim}, {"dtype", dtype}})[0];
}

Tensor mean(const Tensor& x, const Dims& dims, bool keepdim) {
  static const OpDefPtr op = OpRegistry::Instance().get("ReduceMean");
  return call_op(*op, {x}, {{"dims", dims}, {"keepdim", keepdim}})[0];
}

Tensor mean(const Tensor& x, const Dims& dims, bool keepdim, DType dtype) {
  KILN_CHECK_DTYPE(is_floating_point(dtype))
      << "mean: expected a floating dtype to compute in, got " << dtype_name(dtype);
  return mean(to(x, dtype), dims, keepdim);
}

Tensor amax(const Tensor& x, const Dims& dims, bool keepdim) {
  static const OpDefPtr op = OpRegistry::Instance().get("ReduceMax");
  return call_op(*op, {x}, {{"dims", dims}, {"keepdim", keepdim}})[0];
}

Tensor amin(const Tensor& x, const Dims& dims, bool keepdim) {
  static const OpDefPtr op = OpRegistry::Instance().get("ReduceMin");
  return call_op(*op, {x}, {{"dims", dims}, {"keepdim", keepdim}})[0];
}

Tensor max(const Tensor& x) { return amax(x); }
Tensor min(const Tensor& x) { return amin(x); }

}  // namespace kiln
