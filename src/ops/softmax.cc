// Softmax and LogSoftmax along any dim, numerically stable (the max is subtracted first).
//
// The input is viewed as [outer, len, inner] around the dim. The last dim (inner == 1) runs
// simd::softmax_row / log_softmax_row on each row, rows split across threads. Another dim runs on
// tiles of up to 512 columns with three passes over the tile's rows (column max, sum of
// exp(x - max) in float64, output), each pass a SIMD kernel call per row, so memory is always
// read along contiguous rows. Integer and bool inputs give the default floating dtype; float16 /
// bfloat16 compute in float32 and round once. A NaN, a +inf, or only -inf along the dim gives NaN
// (as PyTorch). Their gradients are one op, SoftmaxBackward (Note [Softmax gradients]).
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>

#include "core/dtype_dispatch.h"
#include "core/target_clones.h"
#include "kiln/functional/elementwise.h"
#include "kiln/functional/reduce.h"
#include "ops/elementwise.h"
#include "ops/grad_util.h"
#include "ops/reduce.h"
#include "ops/simd/float_kernels.h"

namespace kiln {
namespace {

using detail::ComputeType;

template <typename C>
void row_kernel(bool log, const C* x, C* y, int64_t n, simd::Store store = simd::Store::kCached) {
  if (log) {
    simd::log_softmax_row(x, y, n, store);
  } else {
    simd::softmax_row(x, y, n, store);
  }
}

/// The last-dim case: `rows` rows of `len` elements. O is the output type, C its compute type.
template <typename T, typename O>
void softmax_rows(const T* x, O* y, int64_t rows, int64_t len, bool log) {
  using C = ComputeType<O>;
  const int64_t grain = std::max<int64_t>(1, detail::kReduceChunk / std::max<int64_t>(len, 1));
  // A large output is streamed past the caches (Note [streaming stores] in simd_loops-inl.h).
  const simd::Store store = simd::store_for_output(rows * len * int64_t{sizeof(O)});
  parallel_for(0, rows, grain, [&](int64_t lo, int64_t hi) {
    std::unique_ptr<C[]> buf;
    if constexpr (!std::is_same_v<O, C>) buf = std::make_unique<C[]>(static_cast<size_t>(len));
    for (int64_t r = lo; r < hi; ++r) {
      const T* xr = x + r * len;
      O* yr = y + r * len;
      if constexpr (std::is_same_v<T, C> && std::is_same_v<O, C>) {
        row_kernel(log, xr, yr, len, store);
      } else if constexpr (std::is_same_v<O, C>) {
        // Integer input, float32 output: convert into the output row and work in place.
        convert_contiguous(xr, yr, len);
        row_kernel(log, yr, yr, len);
      } else {
        convert_contiguous(xr, buf.get(), len);
        row_kernel(log, buf.get(), buf.get(), len);
        convert_contiguous(buf.get(), yr, len);
      }
    }
  });
}

/// A dim that is not last: x viewed as [outer, len, inner] goes in tiles of up to kColumnTile
/// columns of one outer block, in parallel: fn(first, w) for each, the tile's row k starting at
/// element first + k * inner, w columns wide. A tile's rows (len x 2 KB for float32) are re-read by
/// the later passes over it mostly from cache.
constexpr int64_t kColumnTile = 512;

template <typename F>
void for_each_column_tile(const detail::AxisLayout& l, F&& fn) {
  const int64_t tiles = (l.inner + kColumnTile - 1) / kColumnTile;
  const int64_t grain =
      std::max<int64_t>(1, detail::kReduceChunk / std::max<int64_t>(l.len * kColumnTile, 1));
  parallel_for(0, l.outer * tiles, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t j0 = (item % tiles) * kColumnTile;
      fn((item / tiles) * l.len * l.inner + j0, std::min(kColumnTile, l.inner - j0));
    }
  });
}

/// Another dim: see for_each_column_tile and the file comment.
template <typename T, typename O>
void softmax_columns(const T* x, O* y, const detail::AxisLayout& l, bool log) {
  using C = ComputeType<O>;
  for_each_column_tile(l, [&](int64_t first, int64_t w) {
    C in[kColumnTile];
    C buf[kColumnTile];
    C max[kColumnTile];
    C aux[kColumnTile];
    double sum[kColumnTile];
    const auto offset = [&](int64_t k) { return first + k * l.inner; };
    // Row k of the tile in the compute type (converted into `in` when T is not C).
    const auto load = [&](int64_t k) -> const C* {
      if constexpr (std::is_same_v<T, C>) {
        return x + offset(k);
      } else {
        convert_contiguous(x + offset(k), in, w);
        return in;
      }
    };
    for (int64_t j = 0; j < w; ++j) max[j] = -std::numeric_limits<C>::infinity();
    for (int64_t k = 0; k < l.len; ++k) {
      simd::binary(simd::BinaryOp::kMaximum, max, load(k), max, w);  // NaN-propagating
    }
    for (int64_t j = 0; j < w; ++j) sum[j] = 0;
    for (int64_t k = 0; k < l.len; ++k) {
      simd::binary(simd::BinaryOp::kSub, load(k), max, buf, w);
      simd::unary(simd::UnaryOp::kExp, buf, buf, w);
      for (int64_t j = 0; j < w; ++j) sum[j] += static_cast<double>(buf[j]);
    }
    for (int64_t j = 0; j < w; ++j) aux[j] = static_cast<C>(log ? std::log(sum[j]) : 1.0 / sum[j]);
    for (int64_t k = 0; k < l.len; ++k) {
      O* yr = y + offset(k);
      C* dst = buf;
      if constexpr (std::is_same_v<O, C>) dst = yr;
      simd::binary(simd::BinaryOp::kSub, load(k), max, dst, w);
      if (log) {
        simd::binary(simd::BinaryOp::kSub, dst, aux, dst, w);
      } else {
        simd::unary(simd::UnaryOp::kExp, dst, dst, w);
        simd::binary(simd::BinaryOp::kMul, dst, aux, dst, w);
      }
      if constexpr (!std::is_same_v<O, C>) {
        convert_contiguous(buf, yr, w);
      }
    }
  });
}

void softmax_kernel(KernelContext& ctx, bool log) {
  const Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  const Tensor& x = ctx.inputs[0];
  const int64_t dim =
      wrap_dim(ctx.attrs.get<int64_t>("dim"), x.ndim(), log ? "log_softmax: dim" : "softmax: dim");
  const detail::AxisLayout layout = detail::plan_axis(x, dim);
  detail::visit_floating_result(x.dtype(), out.dtype(), [&](auto in_tag, auto out_tag) {
    using T = typename decltype(in_tag)::type;
    using O = typename decltype(out_tag)::type;
    const T* in = layout.input.data<T>();
    O* y = out.data<O>();
    if (layout.inner == 1) {
      softmax_rows(in, y, layout.outer, layout.len, log);
    } else {
      softmax_columns(in, y, layout, log);
    }
  });
}

InferFn softmax_infer(const char* what) {
  return [what](const InferContext& ctx) {
    const TensorMeta& x = ctx.input(0);
    wrap_dim(ctx.attrs.get<int64_t>("dim"), x.ndim(), what);
    return MetaList{{to_floating(x.dtype), x.shape}};
  };
}

// Note [Softmax gradients]
// Softmax's and LogSoftmax's rules are one op, SoftmaxBackward(y, g) with y the forward's output:
//   softmax:     dx = y (g - sum(g y))
//   log_softmax: dx = g - exp(y) sum(g)          (log = true)
// the sums along dim, in one kernel whose passes over a row stay in cache (composed, they were
// four ops and as many passes over memory). Rows along the last dim run as rows; along another
// dim, tiles of columns as the forward's (no transposed copies of y and g). Sums are accumulated
// in float64. Its own rule (the second order), valid for any y and g, with ddx the gradient of dx:
//   softmax:     d g = SoftmaxBackward(y, ddx)    d y = ddx (g - sum(g y)) - g sum(ddx y)
//   log_softmax: d g = ddx - sum(ddx exp(y))      d y = -ddx exp(y) sum(g)

template <typename C>
[[gnu::always_inline]] inline void softmax_backward_rows(bool log, const C* y, const C* g, C* dx,
                                                         int64_t begin, int64_t end, int64_t n) {
  for (int64_t r = begin; r < end; ++r) {
    const C* yr = y + r * n;
    const C* gr = g + r * n;
    C* out = dx + r * n;
    double sum = 0;
    if (log) {
#pragma omp simd reduction(+ : sum)
      for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(gr[i]);
      simd::unary(simd::UnaryOp::kExp, yr, out, n);
      const C s = static_cast<C>(sum);
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) out[i] = gr[i] - out[i] * s;
    } else {
#pragma omp simd reduction(+ : sum)
      for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(gr[i] * yr[i]);
      const C s = static_cast<C>(sum);
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) out[i] = yr[i] * (gr[i] - s);
    }
  }
}

/// One tile of columns (for_each_column_tile): `len` rows of `w` elements, `stride` apart.
template <typename C>
[[gnu::always_inline]] inline void softmax_backward_tile(bool log, const C* y, const C* g, C* dx,
                                                         int64_t len, int64_t stride, int64_t w) {
  double sum[kColumnTile];
  C s[kColumnTile];
  for (int64_t j = 0; j < w; ++j) sum[j] = 0;
  for (int64_t k = 0; k < len; ++k) {
    const C* yr = y + k * stride;
    const C* gr = g + k * stride;
    if (log) {
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) sum[j] += static_cast<double>(gr[j]);
    } else {
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) sum[j] += static_cast<double>(gr[j] * yr[j]);
    }
  }
  for (int64_t j = 0; j < w; ++j) s[j] = static_cast<C>(sum[j]);
  for (int64_t k = 0; k < len; ++k) {
    const C* yr = y + k * stride;
    const C* gr = g + k * stride;
    C* out = dx + k * stride;
    if (log) {
      simd::unary(simd::UnaryOp::kExp, yr, out, w);
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) out[j] = gr[j] - out[j] * s[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) out[j] = yr[j] * (gr[j] - s[j]);
    }
  }
}

// The float32 rows and tiles compiled for AVX-512 and AVX2 too, picked when the library loads (as
// the norms' backward rows: see docs/architecture.md, "SIMD math").
KILN_TARGET_CLONES
void softmax_backward_rows_f32(bool log, const float* y, const float* g, float* dx, int64_t begin,
                               int64_t end, int64_t n) {
  softmax_backward_rows(log, y, g, dx, begin, end, n);
}
KILN_TARGET_CLONES
void softmax_backward_tile_f32(bool log, const float* y, const float* g, float* dx, int64_t len,
                               int64_t stride, int64_t w) {
  softmax_backward_tile(log, y, g, dx, len, stride, w);
}

void softmax_backward_kernel(KernelContext& ctx) {
  const Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  const bool log = ctx.attrs.get<bool>("log");
  // (A 0-d softmax is one row of one element: plan_axis makes it [1, 1, 1].)
  const int64_t dim = wrap_dim(ctx.attrs.get<int64_t>("dim"), out.ndim(), "softmax_backward: dim");
  const DType cd = compute_dtype(out.dtype());
  // y and g contiguous in the compute dtype (no copy when they already are).
  const detail::AxisLayout l = detail::plan_axis(contiguous_as(ctx.inputs[0], cd), dim);
  const Tensor g = contiguous_as(ctx.inputs[1], cd);
  const Tensor dx = out.dtype() == cd ? out : Tensor::empty(out.shape(), cd);
  visit_compute_float(cd, [&](auto zero) {
    using C = decltype(zero);
    const C* py = l.input.data<C>();
    const C* pg = g.data<C>();
    C* pdx = dx.data<C>();
    if (l.inner > 1) {
      for_each_column_tile(l, [&](int64_t first, int64_t w) {
        if constexpr (std::is_same_v<C, float>) {
          softmax_backward_tile_f32(log, py + first, pg + first, pdx + first, l.len, l.inner, w);
        } else {
          softmax_backward_tile(log, py + first, pg + first, pdx + first, l.len, l.inner, w);
        }
      });
    } else {  // `outer` rows of `len` elements
      const int64_t grain = std::max<int64_t>(1, detail::kReduceChunk / l.len);
      parallel_for(0, l.outer, grain, [&](int64_t lo, int64_t hi) {
        if constexpr (std::is_same_v<C, float>) {
          softmax_backward_rows_f32(log, py, pg, pdx, lo, hi, l.len);
        } else {
          softmax_backward_rows(log, py, pg, pdx, lo, hi, l.len);
        }
      });
    }
  });
  if (out.dtype() != cd) copy_into(out, dx);
}

Tensor softmax_backward(const Tensor& y, const Tensor& g, int64_t dim, bool log) {
  static const OpDefPtr op = OpRegistry::Instance().get("SoftmaxBackward");
  return call_op(*op, {y, g}, {{"dim", dim}, {"log", log}})[0];
}

std::vector<Tensor> softmax_backward_grad(const std::vector<Tensor>& in, const Tensor& dx,
                                          const Attrs& attrs, const Tensor& ddx) {
  const Tensor& y = in[0];
  const Tensor& g = in[1];
  const int64_t dim = attrs.get<int64_t>("dim");
  const auto row_sum = [dim](const Tensor& t) { return sum(t, {dim}, /*keepdim=*/true); };
  Tensor dg, dy;
  if (attrs.get<bool>("log")) {
    const Tensor e = exp(y);
    dg = ddx - row_sum(ddx * e);
    dy = -(ddx * e * row_sum(g));
  } else {
    dg = softmax_backward(y, ddx, dim, /*log=*/false);
    dy = ddx * (g - row_sum(g * y)) - g * row_sum(ddx * y);
  }
  return {detail::input_grad(dy, y), detail::input_grad(dg, g)};
}

KILN_REGISTER_OP(
    OpDef("SoftmaxBackward")
        .input("y")
        .input("grad_output")
        .attr("dim", AttrKind::kInt, int64_t{-1})
        .attr("log", AttrKind::kBool, false)
        .doc("Softmax's input gradient y (g - sum(g y)) from its output y and output gradient g, "
             "or with log=true LogSoftmax's, g - exp(y) sum(g); sums along `dim`")
        .infer([](const InferContext& ctx) {
          const TensorMeta& y = ctx.input(0);
          const TensorMeta& g = ctx.input(1);
          KILN_CHECK_SHAPE(y.shape == g.shape)
              << "softmax_backward: expected grad_output of y's shape " << shape_str(y.shape)
              << ", got " << shape_str(g.shape);
          KILN_CHECK_DTYPE(is_floating_point(y.dtype) && is_floating_point(g.dtype))
              << "softmax_backward: expected floating-point y and grad_output, got " << y.dtype
              << " and " << g.dtype;
          wrap_dim(ctx.attrs.get<int64_t>("dim"), y.ndim(), "softmax_backward: dim");
          return MetaList{{result_type(ctx.inputs), y.shape}};
        })
        .grad(detail::one_output_rule(softmax_backward_grad))
        .kernel(DeviceType::kCPU, softmax_backward_kernel));

template <bool kLog>
std::vector<Tensor> softmax_grad(const std::vector<Tensor>& in, const Tensor& y,
                                 const Attrs& attrs, const Tensor& g) {
  const Tensor& x = in[0];
  if (!detail::differentiable(x)) return {Tensor()};
  return {to(softmax_backward(y, g, attrs.get<int64_t>("dim"), kLog), x.dtype())};
}

KILN_REGISTER_OP(OpDef("Softmax")
                     .input("x")
                     .attr("dim", AttrKind::kInt, int64_t{-1})
                     .doc("exp(x - max) / sum(exp(x - max)) along `dim`; integer inputs give "
                          "float32")
                     .infer(softmax_infer("softmax: dim"))
                     .grad(detail::one_output_rule(softmax_grad<false>))
                     .kernel(DeviceType::kCPU,
                             [](KernelContext& ctx) { softmax_kernel(ctx, false); }));

KILN_REGISTER_OP(OpDef("LogSoftmax")
                     .input("x")
                     .attr("dim", AttrKind::kInt, int64_t{-1})
                     .doc("x - max - log(sum(exp(x - max))) along `dim`; integer inputs give "
                          "float32")
                     .infer(softmax_infer("log_softmax: dim"))
                     .grad(detail::one_output_rule(softmax_grad<true>))
                     .kernel(DeviceType::kCPU,
                             [](KernelContext& ctx) { softmax_kernel(ctx, true); }));

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  static const OpDefPtr op = OpRegistry::Instance().get("Softmax");
  return call_op(*op, {x}, {{"dim", dim}})[0];
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  static const OpDefPtr op = OpRegistry::Instance().get("LogSoftmax");
  return call_op(*op, {x}, {{"dim", dim}})[0];
}

}  // namespace kiln
