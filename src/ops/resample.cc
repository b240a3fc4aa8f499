// Resample and ResampleBackward (kiln::resample): each output along one dim as a weighted sum of
// input positions, y.select(dim, o) = sum_k weight[k, o] * x.select(dim, index[k, o]): the
// per-axis pass of interpolate's linear, cubic, antialiased and area modes and of adaptive
// average pooling (Note [Resampling]).
#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/dtype_dispatch.h"
#include "core/target_clones.h"
#include "kiln/functional/elementwise.h"
#include "kiln/functional/nn.h"
#include "kiln/functional/reduce.h"
#include "kiln/functional/shape.h"
#include "kiln/op.h"
#include "kiln/parallel.h"
#include "ops/dtype_convert.h"
#include "ops/grad_util.h"
#include "ops/reduce.h"

namespace kiln {
namespace {

// Note [Resampling]
// Composed of ops, a resampling pass gathered each tap (index_select), scaled it and added it to
// the others: 2 taps took five passes over the output, bilinear x2 of [8, 32, 64, 64] 18.7 ms
// (PyTorch 7.2 ms). Resample reads x once per tap and writes each output once: x is viewed as
// [outer, len, inner]; an output row (outer, o) is the weighted sum of the input rows
// (outer, index[k, o]), added in k order in the compute type (float for float32 and the 16-bit
// floats, double for float64), vectorised over inner. Its gradient scatters the output gradient
// back (ResampleBackward: the transpose, with the same index and weights, each (outer, inner
// block) on one thread, so the additions never race), and the weights' gradient is the sum of
// g times the gathered input, composed of ops. ResampleBackward's own rule is Resample (its
// adjoint) and the same weights' gradient, so both differentiate again.

// Checks an index [taps, out] (int64) and weight (floating) of one shape for a dim of `len`.
void check_taps(const char* op, const TensorMeta& index, const TensorMeta& weight) {
  KILN_CHECK_DTYPE(index.dtype == DType::kInt64)
      << op << ": expected an int64 index, got " << index.dtype;
  KILN_CHECK_SHAPE(index.ndim() == 2 && weight.shape == index.shape)
      << op << ": expected index and weight of one shape [taps, out], got "
      << shape_str(index.shape) << " and " << shape_str(weight.shape);
  KILN_CHECK_DTYPE(is_floating_point(weight.dtype))
      << op << ": expected a floating-point weight, got " << weight.dtype;
}

// The index's entries, each checked to be a position in [0, len).
std::vector<int64_t> checked_index(const char* op, const Tensor& index, int64_t len) {
  const Tensor contiguous = index.contiguous();
  const int64_t* p = contiguous.data<int64_t>();
  std::vector<int64_t> positions(p, p + index.numel());
  for (int64_t i : positions) {
    KILN_CHECK_INDEX(i >= 0 && i < len)
        << op << ": index " << i << " is out of range for a dimension of size " << len;
  }
  return positions;
}

// The weights' gradient: [taps, out] sums over every other position of g (the output gradient,
// [.., out, ..] along dim) times source (x's shape) gathered at the index.
Tensor weight_grad(const Tensor& source, const Tensor& g, const Tensor& index, int64_t dim,
                   DType dtype) {
  const int64_t taps = index.size(0), out = index.size(1);
  Shape split = source.shape();
  split[dim] = out;
  split.insert(split.begin() + dim, taps);
  const Tensor gathered = reshape(index_select(source, dim, reshape(index, {-1})), split);
  Dims others;
  for (int64_t d = 0; d < static_cast<int64_t>(split.size()); ++d) {
    if (d != dim && d != dim + 1) others.push_back(d);
  }
  const Tensor products = gathered * unsqueeze(g, dim);
  return to(others.empty() ? products : sum(products, others), dtype);
}

std::vector<Tensor> resample_grad(const std::vector<Tensor>& in, const Tensor&, const Attrs& attrs,
                                  const Tensor& g) {
  const Tensor& x = in[0];
  const Tensor& index = in[1];
  const Tensor& weight = in[2];
  const int64_t dim = wrap_dim(attrs.get<int64_t>("dim"), x.ndim());
  Tensor gx, gw;
  if (detail::differentiable(x)) {
    gx = detail::input_grad(resample_backward(g, index, weight, dim, x.size(dim)), x);
  }
  if (detail::differentiable(weight)) gw = weight_grad(x, g, index, dim, weight.dtype());
  return {gx, Tensor(), gw};
}

std::vector<Tensor> resample_backward_grad(const std::vector<Tensor>& in, const Tensor&,
                                           const Attrs& attrs, const Tensor& gg) {
  const Tensor& g = in[0];
  const Tensor& index = in[1];
  const Tensor& weight = in[2];
  const int64_t dim = wrap_dim(attrs.get<int64_t>("dim"), g.ndim());
  Tensor dg, dw;
  if (detail::differentiable(g)) dg = detail::input_grad(resample(gg, dim, index, weight), g);
  if (detail::differentiable(weight)) dw = weight_grad(gg, g, index, dim, weight.dtype());
  return {dg, Tensor(), dw};
}

// One row of a resampling along the last dim: y[o] = sum_k weight[k, o] * x[index[k, o]], tap by
// tap over the whole row, so that the loop over o vectorises (gathers).
template <typename C>
[[gnu::always_inline]] inline void resample_last_dim_row(const C* x, const int64_t* index,
                                                         const C* weight, int64_t taps, int64_t out,
                                                         C* y) {
  std::fill(y, y + out, C(0));
  for (int64_t k = 0; k < taps; ++k) {
    const int64_t* at = index + k * out;
    const C* w = weight + k * out;
#pragma omp simd
    for (int64_t o = 0; o < out; ++o) y[o] += w[o] * x[at[o]];
  }
}

KILN_TARGET_CLONES
void resample_last_dim_row_f32(const float* x, const int64_t* index, const float* weight,
                               int64_t taps, int64_t out, float* y) {
  resample_last_dim_row(x, index, weight, taps, out, y);
}

// out [outer, out, inner] = taps of x [outer, len, inner] (Note [Resampling]), in C.
template <typename C>
void resample_rows(const C* x, const std::vector<int64_t>& index, const C* weight, int64_t taps,
                   const detail::AxisLayout& l, int64_t out, C* y) {
  const int64_t inner = l.inner;
  if (inner == 1) {  // along the last dim: whole rows at a time, each row's outputs vectorised
    parallel_for(0, l.outer, std::max<int64_t>(1, (int64_t{1} << 14) / (out * taps)),
                 [&](int64_t lo, int64_t hi) {
                   for (int64_t b = lo; b < hi; ++b) {
                     if constexpr (std::is_same_v<C, float>) {
                       resample_last_dim_row_f32(x + b * l.len, index.data(), weight, taps, out,
                                                 y + b * out);
                     } else {
                       resample_last_dim_row(x + b * l.len, index.data(), weight, taps, out,
                                             y + b * out);
                     }
                   }
                 });
    return;
  }
  parallel_for(0, l.outer * out, std::max<int64_t>(1, (int64_t{1} << 14) / (inner * taps)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t row = lo; row < hi; ++row) {
                   const int64_t b = row / out, o = row % out;
                   C* dst = y + row * inner;
                   std::fill(dst, dst + inner, C(0));
                   for (int64_t k = 0; k < taps; ++k) {
                     const C w = weight[k * out + o];
                     const C* src = x + (b * l.len + index[k * out + o]) * inner;
#pragma omp simd
                     for (int64_t i = 0; i < inner; ++i) dst[i] += w * src[i];
                   }
                 }
               });
}

// dx [outer, len, inner] = the transpose of resample_rows for g [outer, out, inner]: each
// (outer, block of inner) item adds into its own part of dx, so threads never share a write.
template <typename C>
void resample_rows_back(const C* g, const std::vector<int64_t>& index, const C* weight,
                        int64_t taps, int64_t outer, int64_t len, int64_t out, int64_t inner,
                        C* dx) {
  constexpr int64_t kBlock = 256;
  const int64_t blocks = (inner + kBlock - 1) / kBlock;
  parallel_for(0, outer * blocks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t b = item / blocks, i0 = (item % blocks) * kBlock;
      const int64_t n = std::min(kBlock, inner - i0);
      for (int64_t j = 0; j < len; ++j) std::fill_n(dx + (b * len + j) * inner + i0, n, C(0));
      for (int64_t o = 0; o < out; ++o) {
        const C* src = g + (b * out + o) * inner + i0;
        for (int64_t k = 0; k < taps; ++k) {
          const C w = weight[k * out + o];
          C* dst = dx + (b * len + index[k * out + o]) * inner + i0;
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) dst[i] += w * src[i];
        }
      }
    }
  });
}

// Runs f(C{}) with x, weight (as C, contiguous) and an output buffer of C: `out` itself when it
// has that dtype, else a float buffer copied into it (16-bit floats, rounded once).
template <typename F>
void with_compute_type(const Tensor& out, F&& f) {
  visit_compute_float(out.dtype(), [&](auto zero) {
    using C = decltype(zero);
    const Tensor y = out.dtype() == dtype_of<C>() ? out : Tensor::empty(out.shape(), dtype_of<C>());
    f(zero, y);
    if (!y.is_same(out)) copy_into(out, y);
  });
}

KILN_REGISTER_OP(
    OpDef("Resample")
        .input("x")
        .input("index")
        .input("weight")
        .attr("dim", AttrKind::kInt)
        .doc("y.select(dim, o) = sum_k weight[k, o] * x.select(dim, index[k, o]) for index and "
             "weight [taps, out] (Note [Resampling])")
        .infer([](const InferContext& ctx) {
          const TensorMeta& x = ctx.input(0);
          check_taps("resample", ctx.input(1), ctx.input(2));
          KILN_CHECK_DTYPE(is_floating_point(x.dtype))
              << "resample: expected a floating-point x, got " << x.dtype;
          const int64_t dim = wrap_dim(ctx.attrs.get<int64_t>("dim"), x.ndim(), "resample: dim");
          Shape shape = x.shape;
          shape[dim] = ctx.input(1).shape[1];
          return MetaList{{promote_types(x.dtype, ctx.input(2).dtype), shape}};
        })
        .grad(detail::one_output_rule(resample_grad))
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          const int64_t dim = wrap_dim(ctx.attrs.get<int64_t>("dim"), out.ndim());
          const Tensor& x = ctx.inputs[0];
          const std::vector<int64_t> index = checked_index("resample", ctx.inputs[1], x.size(dim));
          if (out.numel() == 0) return;
          with_compute_type(out, [&](auto zero, const Tensor& y) {
            using C = decltype(zero);
            const detail::AxisLayout l = detail::plan_axis(contiguous_as(x, dtype_of<C>()), dim);
            const Tensor w = contiguous_as(ctx.inputs[2], dtype_of<C>());
            resample_rows(l.input.data<C>(), index, w.data<C>(), ctx.inputs[1].size(0), l,
                          out.size(dim), y.data<C>());
          });
        }));

KILN_REGISTER_OP(
    OpDef("ResampleBackward")
        .input("grad_output")
        .input("index")
        .input("weight")
        .attr("dim", AttrKind::kInt)
        .attr("size", AttrKind::kInt)
        .doc("Resample's gradient of x (its size along dim is `size`): each output gradient "
             "added at its taps, times their weights (Note [Resampling])")
        .infer([](const InferContext& ctx) {
          const TensorMeta& g = ctx.input(0);
          const TensorMeta& index = ctx.input(1);
          check_taps("resample_backward", index, ctx.input(2));
          KILN_CHECK_DTYPE(is_floating_point(g.dtype))
              << "resample_backward: expected a floating-point grad_output, got " << g.dtype;
          const int64_t dim =
              wrap_dim(ctx.attrs.get<int64_t>("dim"), g.ndim(), "resample_backward: dim");
          KILN_CHECK_SHAPE(g.shape[dim] == index.shape[1])
              << "resample_backward: expected grad_output of " << index.shape[1]
              << " outputs along dim " << dim << ", got shape " << shape_str(g.shape);
          const int64_t size = ctx.attrs.get<int64_t>("size");
          KILN_CHECK_VALUE(size >= 0) << "resample_backward: expected a size >= 0, got " << size;
          Shape shape = g.shape;
          shape[dim] = size;
          return MetaList{{promote_types(g.dtype, ctx.input(2).dtype), shape}};
        })
        .grad(detail::one_output_rule(resample_backward_grad))
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          const int64_t dim = wrap_dim(ctx.attrs.get<int64_t>("dim"), out.ndim());
          const std::vector<int64_t> index =
              checked_index("resample_backward", ctx.inputs[1], out.size(dim));
          if (out.numel() == 0) return;
          with_compute_type(out, [&](auto zero, const Tensor& dx) {
            using C = decltype(zero);
            const detail::AxisLayout l =
                detail::plan_axis(contiguous_as(ctx.inputs[0], dtype_of<C>()), dim);
            const Tensor w = contiguous_as(ctx.inputs[2], dtype_of<C>());
            resample_rows_back(l.input.data<C>(), index, w.data<C>(), ctx.inputs[1].size(0),
                               l.outer, out.size(dim), l.len, l.inner, dx.data<C>());
          });
        }));

}  // namespace

Tensor resample(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& weight) {
  static const OpDefPtr op = OpRegistry::Instance().get("Resample");
  return call_op(*op, {x, index, weight}, {{"dim", dim}})[0];
}

Tensor resample_backward(const Tensor& grad_output, const Tensor& index, const Tensor& weight,
                         int64_t dim, int64_t size) {
  static const OpDefPtr op = OpRegistry::Instance().get("ResampleBackward");
  return call_op(*op, {grad_output, index, weight}, {{"dim", dim}, {"size", size}})[0];
}

}  // namespace kiln
