// Tensor factories: Zeros, Ones, Full, Empty, Arange, Linspace, Eye (ops with no tensor inputs,
// so that a traced graph records them), and zeros_like / ones_like composed from them.
#include "kiln/functional/factory.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/dtype_dispatch.h"
#include "kiln/op.h"
#include "kiln/parallel.h"
#include "ops/random.h"
#include "ops/scalar_range.h"

namespace kiln {

namespace {

using detail::check_factory_shape;

// Elements per chunk for fills: writing memory is all they do.
constexpr int64_t kFillGrain = 1 << 16;

void fill(const Tensor& out, const Scalar& value) {
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(out.data_ptr());
    const T v = value.to<T>();
    parallel_for(0, out.numel(), kFillGrain,
                 [&](int64_t lo, int64_t hi) { std::fill(p + lo, p + hi, v); });
  });
}

MetaList shape_dtype_infer(const InferContext& ctx) {
  const Shape shape = ctx.attrs.get<std::vector<int64_t>>("shape");
  check_factory_shape(ctx.op.name(), shape);
  return {{ctx.attrs.get<DType>("dtype"), shape}};
}

KILN_REGISTER_OP(OpDef("Zeros")
                     .attr("shape", AttrKind::kInts)
                     .attr("dtype", AttrKind::kDType, DType::kFloat32)
                     .doc("A tensor of `shape` filled with zeros")
                     .infer(shape_dtype_infer)
                     .kernel(DeviceType::kCPU,
                             [](KernelContext& ctx) { fill(ctx.outputs[0], Scalar(0)); }));

KILN_REGISTER_OP(OpDef("Ones")
                     .attr("shape", AttrKind::kInts)
                     .attr("dtype", AttrKind::kDType, DType::kFloat32)
                     .doc("A tensor of `shape` filled with ones")
                     .infer(shape_dtype_infer)
                     .kernel(DeviceType::kCPU,
                             [](KernelContext& ctx) { fill(ctx.outputs[0], Scalar(1)); }));

KILN_REGISTER_OP(
    OpDef("Empty")
        .attr("shape", AttrKind::kInts)
        .attr("dtype", AttrKind::kDType, DType::kFloat32)
        .doc("A tensor of `shape` with uninitialised elements")
        .infer(shape_dtype_infer)
        // The dispatcher has already allocated the output; leaving it unwritten is the point.
        .kernel(DeviceType::kCPU, [](KernelContext&) {}));

KILN_REGISTER_OP(
    OpDef("Full")
        .attr("shape", AttrKind::kInts)
        .attr("value", AttrKind::kScalar)
        .attr("dtype", AttrKind::kDType, std::monostate{})
        .doc("A tensor of `shape` filled with `value`; dtype None takes the value's kind "
             "(bool, int64 or the default floating dtype)")
        .infer([](const InferContext& ctx) {
          const Shape shape = ctx.attrs.get<std::vector<int64_t>>("shape");
          check_factory_shape("Full", shape);
          const Scalar value = ctx.attrs.get<Scalar>("value");
          const DType dtype = ctx.attrs.get_or<DType>("dtype", value.default_dtype());
          KILN_CHECK_VALUE(detail::scalar_fits(dtype, value))
              << "Full: expected a fill value representable in " << dtype << ", got " << value;
          return MetaList{{dtype, shape}};
        })
        .kernel(DeviceType::kCPU,
                [](KernelContext& ctx) { fill(ctx.outputs[0], ctx.attrs.get<Scalar>("value")); }));

// Arange: [start, end) in steps, length ceil((end - start) / step) as in NumPy.

bool all_integral(const Scalar& a, const Scalar& b, const Scalar& c) {
  return !a.is_floating_point() && !b.is_floating_point() && !c.is_floating_point();
}

// The largest tensor arange will make: beyond this the length is surely a mistake, and checking
// it keeps double -> int64 conversions in range.
constexpr int64_t kMaxArangeLength = int64_t{1} << 48;

int64_t arange_length(const Scalar& start, const Scalar& end, const Scalar& step) {
  if (all_integral(start, end, step)) {
    const int64_t s = start.to_int(), e = end.to_int(), st = step.to_int();
    KILN_CHECK_VALUE(st != 0) << "Arange: expected a nonzero step, got 0";
    // Unsigned arithmetic: the distance between two int64 values may exceed INT64_MAX.
    uint64_t distance = 0, magnitude = 0;
    if (st > 0 && e > s) {
      distance = static_cast<uint64_t>(e) - static_cast<uint64_t>(s);
      magnitude = static_cast<uint64_t>(st);
    } else if (st < 0 && s > e) {
      distance = static_cast<uint64_t>(s) - static_cast<uint64_t>(e);
      magnitude = uint64_t{0} - static_cast<uint64_t>(st);
    }
    if (distance == 0) return 0;
    const uint64_t n = distance / magnitude + (distance % magnitude != 0 ? 1 : 0);
    KILN_CHECK_VALUE(n <= static_cast<uint64_t>(kMaxArangeLength))
        << "Arange: expected at most " << kMaxArangeLength << " elements, got " << n;
    return static_cast<int64_t>(n);
  }
  const double s = start.to_double(), e = end.to_double(), st = step.to_double();
  KILN_CHECK_VALUE(st != 0) << "Arange: expected a nonzero step, got 0";
  KILN_CHECK_VALUE(std::isfinite(s) && std::isfinite(e) && std::isfinite(st))
      << "Arange: expected finite start, end and step, got " << s << ", " << e << ", " << st;
  const double n = std::ceil((e - s) / st);
  if (!(n > 0)) return 0;
  KILN_CHECK_VALUE(n <= static_cast<double>(kMaxArangeLength))
      << "Arange: expected at most " << kMaxArangeLength << " elements, got " << n;
  return static_cast<int64_t>(n);
}

// Element i of an all-integer arange, exact (wrapping arithmetic lands back in range).
int64_t arange_int(int64_t start, int64_t step, int64_t i) {
  return static_cast<int64_t>(static_cast<uint64_t>(start) +
                              static_cast<uint64_t>(i) * static_cast<uint64_t>(step));
}

KILN_REGISTER_OP(
    OpDef("Arange")
        .attr("start", AttrKind::kScalar)
        .attr("end", AttrKind::kScalar)
        .attr("step", AttrKind::kScalar, Scalar(1))
        .attr("dtype", AttrKind::kDType, std::monostate{})
        .doc("start, start + step, ... up to but excluding end; dtype None is int64 when start, "
             "end and step are integers, else the default floating dtype")
        .infer([](const InferContext& ctx) {
          const Scalar start = ctx.attrs.get<Scalar>("start");
          const Scalar end = ctx.attrs.get<Scalar>("end");
          const Scalar step = ctx.attrs.get<Scalar>("step");
          const bool ints = all_integral(start, end, step);
          const DType dtype =
              ctx.attrs.get_or<DType>("dtype", ints ? DType::kInt64 : default_float_dtype());
          KILN_CHECK_DTYPE(dtype != DType::kBool)
              << "Arange: expected a numeric dtype, got bool";
          const int64_t n = arange_length(start, end, step);
          if (n > 0 && is_integral(dtype)) {
            const bool fits =
                ints ? detail::int_fits(dtype, start.to_int()) &&
                           detail::int_fits(dtype, arange_int(start.to_int(), step.to_int(), n - 1))
                     : detail::double_fits(dtype, start.to_double()) &&
                           detail::double_fits(dtype, start.to_double() +
                                                          static_cast<double>(n - 1) *
                                                              step.to_double());
            KILN_CHECK_VALUE(fits) << "Arange: expected values representable in " << dtype
                                   << ", got the range [" << start << ", " << end << ")";
          }
          return MetaList{{dtype, {n}}};
        })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          const Scalar start = ctx.attrs.get<Scalar>("start");
          const Scalar step = ctx.attrs.get<Scalar>("step");
          const bool ints = all_integral(start, ctx.attrs.get<Scalar>("end"), step);
          visit_dtype(out.dtype(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            T* p = static_cast<T*>(out.data_ptr());
            if (ints) {
              const int64_t s = start.to_int(), st = step.to_int();
              parallel_for(0, out.numel(), kFillGrain, [&](int64_t lo, int64_t hi) {
                // Stepping by addition is exact in wrapping arithmetic and vectorises.
                uint64_t v = static_cast<uint64_t>(arange_int(s, st, lo));
                for (int64_t i = lo; i < hi; ++i, v += static_cast<uint64_t>(st)) {
                  if constexpr (std::is_integral_v<T>) {
                    p[i] = static_cast<T>(static_cast<int64_t>(v));
                  } else {
                    p[i] = convert<T>(static_cast<double>(static_cast<int64_t>(v)));
                  }
                }
              });
            } else {
              // start + i * step, as NumPy computes it (no accumulated rounding).
              const double s = start.to_double(), st = step.to_double();
              parallel_for(0, out.numel(), kFillGrain, [&](int64_t lo, int64_t hi) {
                for (int64_t i = lo; i < hi; ++i) {
                  p[i] = convert<T>(s + static_cast<double>(i) * st);
                }
              });
            }
          });
        }));

KILN_REGISTER_OP(
    OpDef("Linspace")
        .attr("start", AttrKind::kFloat)
        .attr("end", AttrKind::kFloat)
        .attr("steps", AttrKind::kInt)
        .attr("dtype", AttrKind::kDType, DType::kFloat32)
        .doc("`steps` evenly spaced values from start to end, both included (integer dtypes "
             "round down, as NumPy does)")
        .infer([](const InferContext& ctx) {
          const int64_t steps = ctx.attrs.get<int64_t>("steps");
          KILN_CHECK_VALUE(steps >= 0) << "Linspace: expected steps >= 0, got " << steps;
          const DType dtype = ctx.attrs.get<DType>("dtype");
          const double start = ctx.attrs.get<double>("start");
          const double end = ctx.attrs.get<double>("end");
          KILN_CHECK_VALUE(steps == 0 || (detail::double_fits(dtype, std::floor(start)) &&
                                          detail::double_fits(dtype, std::floor(end))))
              << "Linspace: expected start and end representable in " << dtype << ", got "
              << start << " and " << end;
          return MetaList{{dtype, {steps}}};
        })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          const double start = ctx.attrs.get<double>("start");
          const double end = ctx.attrs.get<double>("end");
          const int64_t n = out.numel();
          const double step = n > 1 ? (end - start) / static_cast<double>(n - 1) : 0.0;
          visit_dtype(out.dtype(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            T* p = static_cast<T*>(out.data_ptr());
            parallel_for(0, n, kFillGrain, [&](int64_t lo, int64_t hi) {
              for (int64_t i = lo; i < hi; ++i) {
                // The last element is `end` exactly, not start + (n - 1) * step rounded.
                const double v = i == n - 1 && n > 1 ? end : start + static_cast<double>(i) * step;
                if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
                  p[i] = static_cast<T>(std::floor(v));
                } else {
                  p[i] = convert<T>(v);
                }
              }
            });
          });
        }));

KILN_REGISTER_OP(
    OpDef("Eye")
        .attr("n", AttrKind::kInt)
        .attr("m", AttrKind::kInt, std::monostate{})
        .attr("dtype", AttrKind::kDType, DType::kFloat32)
        .doc("An [n, m] tensor (m None means n) with ones on the diagonal and zeros elsewhere")
        .infer([](const InferContext& ctx) {
          const int64_t n = ctx.attrs.get<int64_t>("n");
          const Shape shape{n, ctx.attrs.get_or<int64_t>("m", n)};
          check_factory_shape("Eye", shape);
          return MetaList{{ctx.attrs.get<DType>("dtype"), shape}};
        })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          fill(out, Scalar(0));
          const int64_t rows = out.shape()[0], cols = out.shape()[1];
          visit_dtype(out.dtype(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            T* p = static_cast<T*>(out.data_ptr());
            const T one = Scalar(1).to<T>();
            for (int64_t i = 0; i < std::min(rows, cols); ++i) p[i * cols + i] = one;
          });
        }));

}  // namespace

Tensor zeros(const Shape& shape, DType dtype) {
  static const OpDefPtr op = OpRegistry::Instance().get("Zeros");
  return call_op(*op, {}, {{"shape", shape}, {"dtype", dtype}})[0];
}

Tensor ones(const Shape& shape, DType dtype) {
  static const OpDefPtr op = OpRegistry::Instance().get("Ones");
  return call_op(*op, {}, {{"shape", shape}, {"dtype", dtype}})[0];
}

Tensor full(const Shape& shape, const Scalar& value, std::optional<DType> dtype) {
  static const OpDefPtr op = OpRegistry::Instance().get("Full");
  Attrs attrs{{"shape", shape}, {"value", value}};
  if (dtype) attrs.set("dtype", *dtype);
  return call_op(*op, {}, attrs)[0];
}

Tensor empty(const Shape& shape, DType dtype) {
  static const OpDefPtr op = OpRegistry::Instance().get("Empty");
  return call_op(*op, {}, {{"shape", shape}, {"dtype", dtype}})[0];
}

Tensor zeros_like(const Tensor& x, std::optional<DType> dtype) {
  return zeros(x.shape(), dtype.value_or(x.dtype()));
}

Tensor ones_like(const Tensor& x, std::optional<DType> dtype) {
  return ones(x.shape(), dtype.value_or(x.dtype()));
}

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step,
              std::optional<DType> dtype) {
  static const OpDefPtr op = OpRegistry::Instance().get("Arange");
  Attrs attrs{{"start", start}, {"end", end}, {"step", step}};
  if (dtype) attrs.set("dtype", *dtype);
  return call_op(*op, {}, attrs)[0];
}

Tensor linspace(double start, double end, int64_t steps, DType dtype) {
  static const OpDefPtr op = OpRegistry::Instance().get("Linspace");
  return call_op(*op, {}, {{"start", start}, {"end", end}, {"steps", steps}, {"dtype", dtype}})[0];
}

Tensor eye(int64_t n, std::optional<int64_t> m, DType dtype) {
  static const OpDefPtr op = OpRegistry::Instance().get("Eye");
  Attrs attrs{{"n", n}, {"dtype", dtype}};
  if (m) attrs.set("m", *m);
  return call_op(*op, {}, attrs)[0];
}

}  // namespace kiln
