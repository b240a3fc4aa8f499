// LayerNorm and RMSNorm (kiln::layer_norm, kiln::rms_norm): normalisation over the trailing
// `normalized_shape` dimensions, one row at a time with the SIMD row kernels.
//
// Rows run in parallel; float32 and float64 rows are normalised in place in the output.
// float16/bfloat16 inputs are converted to float32 first and the result rounded once.
#include <algorithm>
#include <vector>

#include "kiln/functional/elementwise.h"
#include "kiln/functional/nn.h"
#include "kiln/functional/reduce.h"
#include "kiln/op.h"
#include "kiln/parallel.h"
#include "ops/nn_grad.h"
#include "ops/simd/float_kernels.h"

namespace kiln {
namespace {

// Elements per parallel chunk: a chunk of rows should touch a few hundred KiB.
constexpr int64_t kNormChunkElements = int64_t{1} << 15;

Tensor as_dtype(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t.contiguous();
  Tensor converted = Tensor::empty(t.shape(), dtype);
  copy_into(converted, t);
  return converted;
}

// Checks x, the optional affine tensors and normalized_shape; returns the output's dtype.
DType check_norm(const char* op, const InferContext& ctx, size_t num_affine) {
  const TensorMeta& x = ctx.input(0);
  const std::vector<int64_t> normalized = ctx.attrs.get<std::vector<int64_t>>("normalized_shape");
  KILN_CHECK_SHAPE(!normalized.empty()) << op << ": expected a non-empty normalized_shape, got []";
  const bool fits = normalized.size() <= x.shape.size() &&
                    std::equal(normalized.begin(), normalized.end(),
                               x.shape.end() - static_cast<int64_t>(normalized.size()));
  KILN_CHECK_SHAPE(fits) << op << ": x has shape " << shape_str(x.shape)
                         << " and normalized_shape is " << shape_str(normalized)
                         << "; expected the trailing dimensions of x to be "
                         << shape_str(normalized);
  KILN_CHECK_DTYPE(is_floating_point(x.dtype))
      << op << ": expected a floating-point x, got " << x.dtype;
  const char* names[] = {"weight", "bias"};
  for (size_t i = 0; i < num_affine; ++i) {
    const TensorMeta& t = ctx.input(1 + i);
    if (!t.defined) continue;
    KILN_CHECK_SHAPE(t.shape == normalized)
        << op << ": expected " << names[i] << " of shape " << shape_str(normalized)
        << " (normalized_shape), got " << shape_str(t.shape);
    KILN_CHECK_DTYPE(is_floating_point(t.dtype))
        << op << ": expected a floating-point " << names[i] << ", got " << t.dtype;
  }
  return result_type(ctx.inputs);
}

// Runs row(x_row, y_row, n, store) over every row of x (viewed as [rows, n]) into out, in the
// compute dtype C of out's dtype; `store` streams a large output past the caches (Note [streaming
// stores] in simd_loops-inl.h).
template <typename C, typename RowFn>
void for_each_row(const Tensor& x, const Tensor& out, int64_t n, RowFn&& row) {
  if (out.numel() == 0) return;
  const Tensor xc = as_dtype(x, dtype_of<C>());
  const Tensor target =
      out.dtype() == dtype_of<C>() ? out : Tensor::empty(out.shape(), dtype_of<C>());
  const C* px = xc.data<C>();
  C* py = target.data<C>();
  const int64_t rows = out.numel() / n;
  const int64_t grain = std::max<int64_t>(1, kNormChunkElements / n);
  const simd::Store store = simd::store_for_output(target.numel() * int64_t{sizeof(C)});
  parallel_for(0, rows, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) row(px + r * n, py + r * n, n, store);
  });
  if (!target.is_same(out)) copy_into(out, target);
}

template <typename F>
void visit_compute_float(DType out_dtype, F&& f) {
  if (compute_dtype(out_dtype) == DType::kFloat64) {
    f(double{});
  } else {
    f(float{});
  }
}

// The normalized dimensions (the trailing ones, counted from the end) of a norm's attributes.
Dims normalized_dims(const Attrs& attrs) {
  const int64_t k =
      static_cast<int64_t>(attrs.get<std::vector<int64_t>>("normalized_shape").size());
  Dims dims;
  for (int64_t d = -k; d < 0; ++d) dims.push_back(d);
  return dims;
}

// Note [Norm gradients]
// Both rules recompute the row statistics from x (a few reductions) instead of saving them from
// the forward, so the forward kernel stays a single pass. With xhat the normalised x, r the
// reciprocal of the row's standard deviation (or root mean square) and gh = g * weight:
//   LayerNorm: dx = r * (gh - mean(gh) - xhat * mean(gh * xhat))
//   RMSNorm:   dx = r * (gh - xhat * mean(gh * xhat))
// and d weight = sum over rows of g * xhat, d bias = sum over rows of g. 16-bit floats are
// differentiated in float32, as the kernels compute them.
std::vector<Tensor> norm_grad(bool centered, const std::vector<Tensor>& inputs,
                              const std::vector<Tensor>& outputs, const Attrs& attrs,
                              const std::vector<Tensor>& grad_outputs) {
  const Tensor& x = inputs[0];
  const Tensor& weight = inputs[1];
  const Dims dims = normalized_dims(attrs);
  const DType cd = compute_dtype(outputs[0].dtype());
  const Tensor g = to(grad::or_zeros(grad_outputs[0], outputs[0]), cd);
  const Tensor xc = to(x, cd);
  const Tensor xm = centered ? xc - mean(xc, dims, /*keepdim=*/true) : xc;
  const Tensor r = rsqrt(mean(square(xm), dims, /*keepdim=*/true) + attrs.get<double>("eps"));
  const Tensor xhat = xm * r;
  std::vector<Tensor> grads(inputs.size());
  if (grad::differentiable(x)) {
    const Tensor gh = weight.defined() ? g * to(weight, cd) : g;
    Tensor inner = gh - xhat * mean(gh * xhat, dims, /*keepdim=*/true);
    if (centered) inner = inner - mean(gh, dims, /*keepdim=*/true);
    grads[0] = grad::as_grad_of(r * inner, x);
  }
  if (grad::differentiable(weight)) {
    grads[1] = grad::as_grad_of(sum_to(g * xhat, weight.shape()), weight);
  }
  if (inputs.size() > 2 && grad::differentiable(inputs[2])) {
    grads[2] = grad::as_grad_of(sum_to(g, inputs[2].shape()), inputs[2]);
  }
  return grads;
}

KILN_REGISTER_OP(
    OpDef("LayerNorm")
        .input("x")
        .input("weight", /*optional=*/true)
        .input("bias", /*optional=*/true)
        .attr("normalized_shape", AttrKind::kInts)
        .attr("eps", AttrKind::kFloat, 1e-5)
        .doc("(x - mean) / sqrt(var + eps) * weight + bias over the trailing normalized_shape")
        .infer([](const InferContext& ctx) {
          return MetaList{{check_norm("layer_norm", ctx, 2), ctx.input(0).shape}};
        })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          const int64_t n = shape_numel(ctx.attrs.get<std::vector<int64_t>>("normalized_shape"));
          const double eps = ctx.attrs.get<double>("eps");
          visit_compute_float(out.dtype(), [&](auto zero) {
            using C = decltype(zero);
            const Tensor w =
                ctx.inputs[1].defined() ? as_dtype(ctx.inputs[1], dtype_of<C>()) : Tensor();
            const Tensor b =
                ctx.inputs[2].defined() ? as_dtype(ctx.inputs[2], dtype_of<C>()) : Tensor();
            const C* pw = w.defined() ? w.data<C>() : nullptr;
            const C* pb = b.defined() ? b.data<C>() : nullptr;
            for_each_row<C>(ctx.inputs[0], out, n,
                            [&](const C* x, C* y, int64_t len, simd::Store store) {
                              simd::layer_norm_row(x, pw, pb, static_cast<C>(eps), y, len, nullptr,
                                                   nullptr, store);
                            });
          });
        })
        .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                 const Attrs& attrs, const std::vector<Tensor>& grad_outputs) {
          return norm_grad(/*centered=*/true, in, out, attrs, grad_outputs);
        }));

KILN_REGISTER_OP(OpDef("RMSNorm")
                     .input("x")
                     .input("weight", /*optional=*/true)
                     .attr("normalized_shape", AttrKind::kInts)
                     .attr("eps", AttrKind::kFloat, 1e-6)
                     .doc("x / sqrt(mean(x^2) + eps) * weight over the trailing normalized_shape")
                     .infer([](const InferContext& ctx) {
                       return MetaList{{check_norm("rms_norm", ctx, 1), ctx.input(0).shape}};
                     })
                     .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
                       const Tensor& out = ctx.outputs[0];
                       const int64_t n =
                           shape_numel(ctx.attrs.get<std::vector<int64_t>>("normalized_shape"));
                       const double eps = ctx.attrs.get<double>("eps");
                       visit_compute_float(out.dtype(), [&](auto zero) {
                         using C = decltype(zero);
                         const Tensor w = ctx.inputs[1].defined()
                                              ? as_dtype(ctx.inputs[1], dtype_of<C>())
                                              : Tensor();
                         const C* pw = w.defined() ? w.data<C>() : nullptr;
                         for_each_row<C>(ctx.inputs[0], out, n,
                                         [&](const C* x, C* y, int64_t len, simd::Store store) {
                                           simd::rms_norm_row(x, pw, static_cast<C>(eps), y, len,
                                                              store);
                                         });
                       });
                     })
                     .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                              const Attrs& attrs, const std::vector<Tensor>& grad_outputs) {
                       return norm_grad(/*centered=*/false, in, out, attrs, grad_outputs);
                     }));

}  // namespace

Tensor layer_norm(const Tensor& x, const std::vector<int64_t>& normalized_shape,
                  const Tensor& weight, const Tensor& bias, double eps) {
  static const OpDefPtr op = OpRegistry::Instance().get("LayerNorm");
  return call_op(*op, {x, weight, bias}, {{"normalized_shape", normalized_shape}, {"eps", eps}})[0];
}

Tensor rms_norm(const Tensor& x, const std::vector<int64_t>& normalized_shape, const Tensor& weight,
                double eps) {
  static const OpDefPtr op = OpRegistry::Instance().get("RMSNorm");
  return call_op(*op, {x, weight}, {{"normalized_shape", normalized_shape}, {"eps", eps}})[0];
}

}  // namespace kiln
