// LayerNorm and RMSNorm (kiln::layer_norm, kiln::rms_norm): normalisation over the trailing
// `normalized_shape` dimensions, one row at a time with the SIMD row kernels.
//
// Rows run in parallel; float32 and float64 rows are normalised in place in the output.
// float16/bfloat16 inputs are converted to float32 first and the result rounded once.
// LayerNormBackward and RMSNormBackward are the first-order gradients in one kernel (Note [Norm
// gradients]); their own rules give the second order.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/dtype_dispatch.h"
#include "core/target_clones.h"
#include "kiln/functional/elementwise.h"
#include "kiln/functional/nn.h"
#include "kiln/functional/reduce.h"
#include "kiln/op.h"
#include "kiln/parallel.h"
#include "ops/dtype_convert.h"
#include "ops/nn_grad.h"
#include "ops/simd/float_kernels.h"

namespace kiln {
namespace {

// Elements per parallel chunk: a chunk of rows should touch a few hundred KiB.
constexpr int64_t kNormChunkElements = int64_t{1} << 15;

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
  // x's dtype, as PyTorch's (and group_norm's, batch_norm's): float16 activations with float32
  // parameters (mixed precision) normalize to float16; the parameters are read in the compute
  // dtype, float32 there, so they lose nothing.
  return x.dtype;
}

// for_each_row for an out of element type T: C itself, or a 16-bit float (computing in float).
template <typename T, typename RowFn>
void for_each_row_of(const Tensor& x, const Tensor& out, int64_t n, RowFn& row) {
  const Tensor xc = contiguous_as(x, dtype_of<T>());
  const T* px = xc.data<T>();
  T* py = out.data<T>();
  const int64_t rows = out.numel() / n;
  const int64_t grain = std::max<int64_t>(1, kNormChunkElements / n);
  const simd::Store store = simd::store_for_output(out.numel() * int64_t{sizeof(T)});
  parallel_for(0, rows, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) row(px + r * n, py + r * n, n, store);
  });
}

// Runs row(x_row, y_row, n, store) over every row of x (viewed as [rows, n]) into out (contiguous),
// with rows of out's dtype (row computes in C, the compute dtype, widening 16-bit rows in
// registers); `store` streams a large output past the caches (Note [streaming stores] in
// simd_loops-inl.h).
template <typename C, typename RowFn>
void for_each_row(const Tensor& x, const Tensor& out, int64_t n, RowFn&& row) {
  if (out.numel() == 0) return;
  if constexpr (std::is_same_v<C, float>) {
    if (out.dtype() == DType::kFloat16) return for_each_row_of<Half>(x, out, n, row);
    if (out.dtype() == DType::kBFloat16) return for_each_row_of<BFloat16>(x, out, n, row);
  }
  for_each_row_of<C>(x, out, n, row);
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
// With xhat the normalised x, r the reciprocal of the row's standard deviation (or root mean
// square), g the output gradient and gh = g * weight:
//   LayerNorm: dx = r * P(gh), P(v) = v - mean(v) - xhat * mean(v * xhat)
//   RMSNorm:   dx = r * P(gh), P(v) = v - xhat * mean(v * xhat)
// and d weight = sum over rows of g * xhat, d bias = sum over rows of g. LayerNorm's and
// RMSNorm's rules call one op for all of it, LayerNormBackward / RMSNormBackward (x, weight, g),
// whose kernel finds each row's xhat and r again (the forward saves nothing, so it stays one
// pass) and makes dx in a few more passes over the row in cache. d weight and d bias are summed per
// block of rows in float64 and the blocks added in order: the blocks depend on the shape only, so
// the result is the same for any thread count. 16-bit floats are differentiated in float32.
//
// The backward ops' rules (second order) use P being symmetric and r * P being the Jacobian of
// xhat in x. With ddx, ddw, ddb the gradients of dx, d weight, d bias:
//   d g      = weight * r * P(ddx) + ddw * xhat + ddb
//   d weight = sum over rows of g * r * P(ddx)
//   d x      = r * P(ddw * g - (r * B / n) * gh - r * c * ddx) - (r^2 / n) * (A - c * B) * xhat
// where n is the row length, A = sum(ddx * a) with a = gh - mean(gh) (LayerNorm) or gh (RMSNorm),
// B = sum(ddx * xhat) and c = mean(gh * xhat), per row. They are composed of differentiable ops,
// so higher orders follow.

// Blocks of rows for the d weight / d bias partial sums: about kNormChunkElements per block, at
// most kMaxNormBlocks, and few enough that their sums (2 * n float64 each) take no more memory
// than x itself.
constexpr int64_t kMaxNormBlocks = 64;

// Row statistics are summed in C over chunks of kStatChunk elements (spread over a vector's
// lanes), and the chunk sums in float64: as accurate as float64 throughout for the
// rows of models, at the speed of float arithmetic (converting every element to float64 took as
// long as the rest of the kernel).
constexpr int64_t kStatChunk = 256;

// One row of Note [Norm gradients]: dx, and g * xhat and g added into a block's sums. Plain loops
// rather than the SIMD row kernels: the rows of a model are short (a few hundred
// elements), where a kernel call per statistic cost more than the arithmetic (LayerNormBackward
// on [1024, 64] inside a training step took 0.19 ms that way). sum(gh * xhat) is taken as
// r * sum(gh * (x - mean)), in the pass that finds r.
template <typename C>
[[gnu::always_inline]] inline void norm_backward_row(bool centered, bool affine, const C* x,
                                                     const C* w, const C* g, double eps, int64_t n,
                                                     C* dx, C* sum_gx, C* sum_g) {
  double sum_x = 0;
  if (centered) {
    for (int64_t lo = 0; lo < n; lo += kStatChunk) {
      const int64_t hi = std::min(n, lo + kStatChunk);
      C chunk = 0;
#pragma omp simd reduction(+ : chunk)
      for (int64_t i = lo; i < hi; ++i) chunk += x[i];
      sum_x += static_cast<double>(chunk);
    }
  }
  const C mean = static_cast<C>(sum_x / static_cast<double>(n));
  // Two passes over x (the mean, then the deviations): no cancellation.
  double sum_dev2 = 0, sum_gh = 0, sum_ghdev = 0;
  for (int64_t lo = 0; lo < n; lo += kStatChunk) {
    const int64_t hi = std::min(n, lo + kStatChunk);
    C dev2 = 0, gh = 0, ghdev = 0;
#pragma omp simd reduction(+ : dev2, gh, ghdev)
    for (int64_t i = lo; i < hi; ++i) {
      const C dev = x[i] - mean;
      const C gw = g[i] * w[i];
      dev2 += dev * dev;
      gh += gw;
      ghdev += gw * dev;
    }
    sum_dev2 += static_cast<double>(dev2);
    sum_gh += static_cast<double>(gh);
    sum_ghdev += static_cast<double>(ghdev);
  }
  const C r = static_cast<C>(1.0 / std::sqrt(sum_dev2 / static_cast<double>(n) + eps));
  const C mean_gh = centered ? static_cast<C>(sum_gh / static_cast<double>(n)) : C(0);
  const C mean_ghx = static_cast<C>(sum_ghdev * static_cast<double>(r) / static_cast<double>(n));
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const C xhat = (x[i] - mean) * r;
    dx[i] = r * (g[i] * w[i] - mean_gh - xhat * mean_ghx);
  }
  // A loop of its own: in one with dx the compiler contracted dx's products into FMAs differently
  // with and without the sums (AVX-512), and dx is to be the same either way.
  if (!affine) return;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    sum_gx[i] += g[i] * ((x[i] - mean) * r);
    if (centered) sum_g[i] += g[i];  // d bias: RMSNorm has none
  }
}

// Rows added into the block's d weight / d bias sums in C before those take them in float64: the
// same accuracy for a handful of terms, without a conversion per element and row.
constexpr int64_t kRowsPerFlush = 16;

// Rows [begin, end) of one block. The float32 loops are compiled for AVX-512 and AVX2 too, and
// the widest this CPU runs is picked when the library loads (GCC's target_clones; the rest of
// this file is baseline x86-64 code): with AVX2 the kernel takes ~half the time.
template <typename C>
[[gnu::always_inline]] inline void norm_backward_rows(bool centered, bool affine, const C* x,
                                                      const C* w, const C* g, double eps, int64_t n,
                                                      int64_t begin, int64_t end, C* dx,
                                                      double* sum_gx, double* sum_g) {
  std::vector<C> gx(static_cast<size_t>(affine ? n : 0));
  std::vector<C> gs(static_cast<size_t>(affine && centered ? n : 0));
  for (int64_t first = begin; first < end; first += kRowsPerFlush) {
    std::fill(gx.begin(), gx.end(), C(0));
    std::fill(gs.begin(), gs.end(), C(0));
    for (int64_t row = first; row < std::min(end, first + kRowsPerFlush); ++row) {
      norm_backward_row(centered, affine, x + row * n, w, g + row * n, eps, n, dx + row * n,
                        gx.data(), gs.data());
    }
    if (!affine) continue;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) sum_gx[i] += static_cast<double>(gx[i]);
    if (centered) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) sum_g[i] += static_cast<double>(gs[i]);
    }
  }
}

KILN_TARGET_CLONES
void norm_backward_rows_f32(bool centered, bool affine, const float* x, const float* w,
                            const float* g, double eps, int64_t n, int64_t begin, int64_t end,
                            float* dx, double* sum_gx, double* sum_g) {
  norm_backward_rows(centered, affine, x, w, g, eps, n, begin, end, dx, sum_gx, sum_g);
}

template <typename C>
void norm_backward_kernel(bool centered, KernelContext& ctx) {
  const int64_t n = shape_numel(ctx.attrs.get<std::vector<int64_t>>("normalized_shape"));
  const double eps = ctx.attrs.get<double>("eps");
  const bool affine = ctx.attrs.get<bool>("affine_grads");  // else d weight, d bias are zeros
  const Tensor x = contiguous_as(ctx.inputs[0], dtype_of<C>());
  // Without a weight the formulas are those of a weight of ones.
  const Tensor w = ctx.inputs[1].defined() ? contiguous_as(ctx.inputs[1], dtype_of<C>()) : Tensor();
  const std::vector<C> unit_weight(w.defined() ? 0 : static_cast<size_t>(n), C(1));
  const Tensor g = contiguous_as(ctx.inputs[2], dtype_of<C>());
  const C* px = x.data<C>();
  const C* pw = w.defined() ? w.data<C>() : unit_weight.data();
  const C* pg = g.data<C>();
  C* pdx = ctx.outputs[0].data<C>();
  const int64_t rows = n == 0 ? 0 : x.numel() / n;
  const int64_t wanted = std::max<int64_t>(1, rows * n / kNormChunkElements);
  const int64_t by_memory =
      std::max<int64_t>(1, rows * static_cast<int64_t>(sizeof(C)) / (2 * sizeof(double)));
  const int64_t blocks = std::min({wanted, kMaxNormBlocks, by_memory});
  const int64_t rows_per_block = (rows + blocks - 1) / blocks;
  // Each block's d weight and d bias sums (none without affine_grads).
  std::vector<double> partial(static_cast<size_t>(affine ? blocks * 2 * n : 0), 0.0);
  parallel_for(0, blocks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t block = lo; block < hi; ++block) {
      double* sum_gx = affine ? partial.data() + block * 2 * n : nullptr;
      double* sum_g = affine ? sum_gx + n : nullptr;
      const int64_t begin = block * rows_per_block;
      const int64_t end = std::min(rows, begin + rows_per_block);
      if constexpr (std::is_same_v<C, float>) {
        norm_backward_rows_f32(centered, affine, px, pw, pg, eps, n, begin, end, pdx, sum_gx,
                               sum_g);
      } else {
        norm_backward_rows(centered, affine, px, pw, pg, eps, n, begin, end, pdx, sum_gx, sum_g);
      }
    }
  });
  C* pdw = ctx.outputs[1].data<C>();
  C* pdb = centered ? ctx.outputs[2].data<C>() : nullptr;
  if (!affine) {
    std::fill(pdw, pdw + n, C(0));
    if (pdb != nullptr) std::fill(pdb, pdb + n, C(0));
    return;
  }
  // Each column adds its blocks in order: the same result for any split of the columns.
  parallel_for(0, n, std::max<int64_t>(1, kNormChunkElements / blocks),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t i = lo; i < hi; ++i) {
                   double dw = 0, db = 0;
                   for (int64_t block = 0; block < blocks; ++block) {
                     dw += partial[block * 2 * n + i];
                     db += partial[block * 2 * n + n + i];
                   }
                   pdw[i] = static_cast<C>(dw);
                   if (pdb != nullptr) pdb[i] = static_cast<C>(db);
                 }
               });
}

std::vector<Tensor> norm_grad(bool centered, const std::vector<Tensor>& inputs,
                              const std::vector<Tensor>& outputs, const Attrs& attrs,
                              const std::vector<Tensor>& grad_outputs) {
  static const OpDefPtr layer_norm_backward = OpRegistry::Instance().get("LayerNormBackward");
  static const OpDefPtr rms_norm_backward = OpRegistry::Instance().get("RMSNormBackward");
  const Tensor g = grad::or_zeros(grad_outputs[0], outputs[0]);
  // d weight and d bias only where someone needs them (a frozen or absent weight does not).
  bool affine = false;
  for (size_t i = 1; i < inputs.size(); ++i) affine = affine || grad::differentiable(inputs[i]);
  Attrs backward_attrs = attrs;
  backward_attrs.set("affine_grads", affine);
  const TensorList d = call_op(centered ? *layer_norm_backward : *rms_norm_backward,
                               {inputs[0], inputs[1], g}, backward_attrs);
  std::vector<Tensor> grads(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) grads[i] = grad::as_grad_of(d[i], inputs[i]);
  return grads;
}

std::vector<Tensor> norm_backward_grad(bool centered, const std::vector<Tensor>& inputs,
                                       const std::vector<Tensor>& outputs, const Attrs& attrs,
                                       const std::vector<Tensor>& grad_outputs) {
  const Tensor& x = inputs[0];
  const Tensor& weight = inputs[1];
  const Dims dims = normalized_dims(attrs);
  const double n =
      static_cast<double>(shape_numel(attrs.get<std::vector<int64_t>>("normalized_shape")));
  const DType cd = outputs[0].dtype();
  const Tensor ddx = to(grad::or_zeros(grad_outputs[0], outputs[0]), cd);
  const Tensor xc = to(x, cd);
  const Tensor gc = to(inputs[2], cd);
  const Tensor w = weight.defined() ? to(weight, cd) : Tensor();
  const auto row_mean = [&](const Tensor& t) { return mean(t, dims, /*keepdim=*/true); };
  const Tensor xm = centered ? xc - row_mean(xc) : xc;
  const Tensor r = rsqrt(row_mean(square(xm)) + attrs.get<double>("eps"));
  const Tensor xhat = xm * r;
  const auto project = [&](const Tensor& v) {
    const Tensor p = v - xhat * row_mean(v * xhat);
    return centered ? p - row_mean(v) : p;
  };
  const Tensor gh = w.defined() ? gc * w : gc;
  const Tensor r_pddx = r * project(ddx);

  const Tensor ddw = grad_outputs[1].defined() ? to(grad_outputs[1], cd) : Tensor();
  Tensor grad_g;
  if (grad::differentiable(inputs[2])) {
    grad_g = w.defined() ? r_pddx * w : r_pddx;
    if (ddw.defined()) grad_g = grad_g + ddw * xhat;
    if (centered && grad_outputs[2].defined()) grad_g = grad_g + to(grad_outputs[2], cd);
  }
  Tensor grad_x;
  if (grad::differentiable(x)) {
    const Tensor b = sum(ddx * xhat, dims, /*keepdim=*/true);
    const Tensor c = row_mean(gh * xhat);
    Tensor v = -(r * b / n) * gh - r * c * ddx;
    if (ddw.defined()) v = v + ddw * gc;
    const Tensor a = centered ? gh - row_mean(gh) : gh;
    const Tensor big_a = sum(ddx * a, dims, /*keepdim=*/true);
    grad_x = r * project(v) - (r * r / n) * (big_a - c * b) * xhat;
  }
  const Tensor grad_w =
      grad::differentiable(weight) ? sum_to(gc * r_pddx, weight.shape()) : Tensor();
  return {grad::as_grad_of(grad_x, x), grad::as_grad_of(grad_w, weight),
          grad::as_grad_of(grad_g, inputs[2])};
}

// Checks a norm backward op's (x, weight, grad_output); returns the gradients' dtype.
DType check_norm_backward(const char* op, const InferContext& ctx) {
  const DType dtype = check_norm(op, ctx, 1);
  const TensorMeta& g = ctx.input(2);
  KILN_CHECK_SHAPE(g.shape == ctx.input(0).shape)
      << op << ": expected grad_output of x's shape " << shape_str(ctx.input(0).shape) << ", got "
      << shape_str(g.shape);
  KILN_CHECK_DTYPE(is_floating_point(g.dtype))
      << op << ": expected a floating-point grad_output, got " << g.dtype;
  return compute_dtype(dtype);
}

MetaList norm_backward_metas(const char* op, const InferContext& ctx, bool centered) {
  const DType dtype = check_norm_backward(op, ctx);
  const Shape normalized = ctx.attrs.get<std::vector<int64_t>>("normalized_shape");
  MetaList metas{{dtype, ctx.input(0).shape}, {dtype, normalized}};
  if (centered) metas.push_back({dtype, normalized});
  return metas;
}

KILN_REGISTER_OP(
    OpDef("LayerNormBackward")
        .input("x")
        .input("weight", /*optional=*/true)
        .input("grad_output")
        .attr("normalized_shape", AttrKind::kInts)
        .attr("eps", AttrKind::kFloat, 1e-5)
        .attr("affine_grads", AttrKind::kBool, true)
        .outputs(3)
        .doc("LayerNorm's gradients (dx, d weight, d bias) from its output gradient, in the "
             "compute dtype; d weight is sum(g * xhat) even without a weight, and d weight and "
             "d bias are zeros, not computed, when affine_grads is false (Note [Norm "
             "gradients])")
        .infer([](const InferContext& ctx) {
          return norm_backward_metas("layer_norm_backward", ctx, /*centered=*/true);
        })
        .kernel(DeviceType::kCPU,
                [](KernelContext& ctx) {
                  visit_compute_float(ctx.outputs[0].dtype(), [&](auto zero) {
                    norm_backward_kernel<decltype(zero)>(/*centered=*/true, ctx);
                  });
                })
        .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out, const Attrs& attrs,
                 const std::vector<Tensor>& grad_outputs) {
          return norm_backward_grad(/*centered=*/true, in, out, attrs, grad_outputs);
        }));

KILN_REGISTER_OP(
    OpDef("RMSNormBackward")
        .input("x")
        .input("weight", /*optional=*/true)
        .input("grad_output")
        .attr("normalized_shape", AttrKind::kInts)
        .attr("eps", AttrKind::kFloat, 1e-6)
        .attr("affine_grads", AttrKind::kBool, true)
        .outputs(2)
        .doc("RMSNorm's gradients (dx, d weight) from its output gradient, in the compute dtype; "
             "d weight is sum(g * xhat) even without a weight, and zeros, not computed, when "
             "affine_grads is false (Note [Norm gradients])")
        .infer([](const InferContext& ctx) {
          return norm_backward_metas("rms_norm_backward", ctx, /*centered=*/false);
        })
        .kernel(DeviceType::kCPU,
                [](KernelContext& ctx) {
                  visit_compute_float(ctx.outputs[0].dtype(), [&](auto zero) {
                    norm_backward_kernel<decltype(zero)>(/*centered=*/false, ctx);
                  });
                })
        .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out, const Attrs& attrs,
                 const std::vector<Tensor>& grad_outputs) {
          return norm_backward_grad(/*centered=*/false, in, out, attrs, grad_outputs);
        }));

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
                ctx.inputs[1].defined() ? contiguous_as(ctx.inputs[1], dtype_of<C>()) : Tensor();
            const Tensor b =
                ctx.inputs[2].defined() ? contiguous_as(ctx.inputs[2], dtype_of<C>()) : Tensor();
            const C* pw = w.defined() ? w.data<C>() : nullptr;
            const C* pb = b.defined() ? b.data<C>() : nullptr;
            for_each_row<C>(ctx.inputs[0], out, n,
                            [&](const auto* x, auto* y, int64_t len, simd::Store store) {
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
                                              ? contiguous_as(ctx.inputs[1], dtype_of<C>())
                                              : Tensor();
                         const C* pw = w.defined() ? w.data<C>() : nullptr;
                         for_each_row<C>(
                             ctx.inputs[0], out, n,
                             [&](const auto* x, auto* y, int64_t len, simd::Store store) {
                               simd::rms_norm_row(x, pw, static_cast<C>(eps), y, len, store);
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
