// MaxPool2D and AvgPool2D (kiln::max_pool2d, kiln::avg_pool2d) over NCHW input, with PyTorch's
// window, padding and ceil_mode rules.
//
// A direct loop over output planes in parallel: pooling reads each input element about
// kernel_size / stride^2 times and is memory-bound, so there is nothing for a library to win
// on planes of this layout. float16/bfloat16 average in float32 and round once.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/dtype_dispatch.h"
#include "kiln/functional/nn.h"
#include "kiln/op.h"
#include "kiln/parallel.h"
#include "ops/dtype_convert.h"
#include "ops/nn_grad.h"

namespace kiln {
namespace {

struct PoolParams {
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  int64_t dil_h = 1, dil_w = 1;
  bool ceil_mode = false;
};

std::vector<int64_t> pair_attr(const char* op, const Attrs& attrs, const char* name,
                               int64_t min_value) {
  const std::vector<int64_t> v = attrs.get<std::vector<int64_t>>(name);
  KILN_CHECK_VALUE(v.size() == 2 && v[0] >= min_value && v[1] >= min_value)
      << op << ": expected " << name << " of two integers >= " << min_value << ", got "
      << shape_str(v);
  return v;
}

PoolParams pool_params(const char* op, const Attrs& attrs, bool has_dilation) {
  const std::vector<int64_t> kernel = pair_attr(op, attrs, "kernel_size", 1);
  const std::vector<int64_t> stride = attrs.get<std::vector<int64_t>>("stride").empty()
                                          ? kernel
                                          : pair_attr(op, attrs, "stride", 1);
  const std::vector<int64_t> padding = pair_attr(op, attrs, "padding", 0);
  PoolParams p;
  p.kernel_h = kernel[0];
  p.kernel_w = kernel[1];
  p.stride_h = stride[0];
  p.stride_w = stride[1];
  p.pad_h = padding[0];
  p.pad_w = padding[1];
  p.ceil_mode = attrs.get<bool>("ceil_mode");
  if (has_dilation) {
    const std::vector<int64_t> dilation = pair_attr(op, attrs, "dilation", 1);
    p.dil_h = dilation[0];
    p.dil_w = dilation[1];
  }
  KILN_CHECK_VALUE(p.pad_h <= p.kernel_h / 2 && p.pad_w <= p.kernel_w / 2)
      << op << ": expected padding at most half the kernel size, got padding " << shape_str(padding)
      << " for kernel_size " << shape_str(kernel);
  return p;
}

// PyTorch's pooling_output_shape: floor or ceil, but a window never starts in the right padding.
int64_t pool_out_size(const char* op, int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                      int64_t dil, bool ceil_mode, const char* dim) {
  const int64_t span = dil * (kernel - 1) + 1;
  const int64_t room = in + 2 * pad - span;
  KILN_CHECK_SHAPE(room >= 0) << op << ": expected the padded input " << dim << " (" << in + 2 * pad
                              << ") to be at least the dilated kernel " << dim << " (" << span
                              << ")";
  int64_t out = (room + (ceil_mode ? stride - 1 : 0)) / stride + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

Shape pool_out_shape(const char* op, const TensorMeta& x, const PoolParams& p) {
  KILN_CHECK_SHAPE(x.ndim() == 4) << op << ": expected x of shape [N, C, H, W], got "
                                  << shape_str(x.shape);
  return {x.shape[0], x.shape[1],
          pool_out_size(op, x.shape[2], p.kernel_h, p.stride_h, p.pad_h, p.dil_h, p.ceil_mode,
                        "height"),
          pool_out_size(op, x.shape[3], p.kernel_w, p.stride_w, p.pad_w, p.dil_w, p.ceil_mode,
                        "width")};
}

// Calls plane(x_plane, y_plane) for every (n, c) plane of contiguous x and out, in parallel.
template <typename T, typename PlaneFn>
void for_each_plane(const Tensor& x, const Tensor& out, PlaneFn&& plane) {
  const int64_t in_plane = x.size(2) * x.size(3), out_plane = out.size(2) * out.size(3);
  const T* px = x.data<T>();
  T* py = out.data<T>();
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, in_plane));
  parallel_for(0, out.size(0) * out.size(1), grain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) plane(px + i * in_plane, py + i * out_plane);
  });
}

// The offset (ih * W + iw) of the maximum of output position (oh, ow)'s window in plane xp: the
// first maximum, or the last nan (nan wins, as in PyTorch and numpy.max); -1 for a window with no
// element inside the input. V is the type values compare in.
template <typename V, typename T>
int64_t window_argmax(const T* xp, int64_t H, int64_t W, int64_t oh, int64_t ow,
                      const PoolParams& p) {
  int64_t best_at = -1;
  V best{};
  for (int64_t kh = 0; kh < p.kernel_h; ++kh) {
    const int64_t ih = oh * p.stride_h - p.pad_h + kh * p.dil_h;
    if (ih < 0 || ih >= H) continue;
    for (int64_t kw = 0; kw < p.kernel_w; ++kw) {
      const int64_t iw = ow * p.stride_w - p.pad_w + kw * p.dil_w;
      if (iw < 0 || iw >= W) continue;
      const V v = static_cast<V>(xp[ih * W + iw]);
      bool wins = best_at < 0 || v > best;
      if constexpr (std::is_floating_point_v<V>) wins = wins || std::isnan(v);
      if (wins) {
        best = v;
        best_at = ih * W + iw;
      }
    }
  }
  return best_at;
}

// Accumulates 16-bit floats as float; the maximum is one of the inputs, so nothing rounds.
template <typename T>
using MaxValue =
    std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

template <typename T>
void max_pool(const Tensor& x, const Tensor& out, const PoolParams& p) {
  const int64_t H = x.size(2), W = x.size(3), OH = out.size(2), OW = out.size(3);
  using V = MaxValue<T>;
  const V lowest = std::numeric_limits<V>::has_infinity ? -std::numeric_limits<V>::infinity()
                                                        : std::numeric_limits<V>::lowest();
  for_each_plane<T>(x, out, [&](const T* xp, T* yp) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t at = window_argmax<V>(xp, H, W, oh, ow, p);
        yp[oh * OW + ow] = at < 0 ? convert<T>(lowest) : xp[at];
      }
    }
  });
}

// The window of output position (oh, ow) of an average pool, clipped to the input, and its
// divisor: the window clipped to the padded input for count_include_pad, else to the input.
struct AvgWindow {
  int64_t h0, h1, w0, w1, count;
};

AvgWindow avg_window(int64_t oh, int64_t ow, int64_t H, int64_t W, const PoolParams& p,
                     bool count_include_pad) {
  AvgWindow w;
  w.h0 = oh * p.stride_h - p.pad_h;
  w.w0 = ow * p.stride_w - p.pad_w;
  w.h1 = std::min(w.h0 + p.kernel_h, H + p.pad_h);
  w.w1 = std::min(w.w0 + p.kernel_w, W + p.pad_w);
  const int64_t padded_count = (w.h1 - w.h0) * (w.w1 - w.w0);
  w.h0 = std::max<int64_t>(w.h0, 0);
  w.w0 = std::max<int64_t>(w.w0, 0);
  w.h1 = std::min(w.h1, H);
  w.w1 = std::min(w.w1, W);
  w.count = count_include_pad ? padded_count : (w.h1 - w.h0) * (w.w1 - w.w0);
  return w;
}

template <typename T>
void avg_pool(const Tensor& x, const Tensor& out, const PoolParams& p, bool count_include_pad) {
  const int64_t H = x.size(2), W = x.size(3), OH = out.size(2), OW = out.size(3);
  using V = std::conditional_t<std::is_same_v<T, double>, double, float>;
  for_each_plane<T>(x, out, [&](const T* xp, T* yp) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        const AvgWindow w = avg_window(oh, ow, H, W, p, count_include_pad);
        V sum = 0;
        for (int64_t ih = w.h0; ih < w.h1; ++ih) {
          for (int64_t iw = w.w0; iw < w.w1; ++iw) sum += static_cast<V>(xp[ih * W + iw]);
        }
        yp[oh * OW + ow] = convert<T>(w.count > 0 ? sum / static_cast<V>(w.count) : V(0));
      }
    }
  });
}

// Note [Pooling gradients]
// MaxPool2DBackward adds each output gradient at its window's maximum, found again from x (the
// same scan as the forward, so ties and nans pick the same element); AvgPool2DBackward spreads
// it over the window divided by the forward's divisor. Both run one thread per (n, c) plane, so
// the additions of overlapping windows never race. AvgPool2DBackward is linear and its rule is
// AvgPool2D again. MaxPool2DBackward is linear in the output gradient, and its adjoint is a
// gather: MaxPool2DSelect picks, for each window, the element of a tensor shaped like x at the
// window's maximum (the same scan again). The two are each other's rule, so max pooling
// differentiates to any order; in x both are piecewise constant, so x gets no gradient from them
// (zero almost everywhere, as in PyTorch).

// Runs `plane(grad_plane, dx_plane, n * C + c)` over every plane of contiguous grad [N, C, OH, OW]
// and dx [N, C, H, W] (zeroed first) in parallel, in the compute dtype C of `out`'s, then
// converts into `out`.
template <typename T, typename PlaneFn>
void for_each_grad_plane(const Tensor& grad_output, const Tensor& out, PlaneFn&& plane) {
  const Tensor grad = contiguous_as(grad_output, dtype_of<T>());
  const Tensor dx = out.dtype() == dtype_of<T>() ? out : Tensor::empty(out.shape(), dtype_of<T>());
  const int64_t in_plane = dx.size(2) * dx.size(3), out_plane = grad.size(2) * grad.size(3);
  const T* pg = grad.data<T>();
  T* pd = dx.data<T>();
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, in_plane));
  parallel_for(0, dx.size(0) * dx.size(1), grain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      std::fill(pd + i * in_plane, pd + (i + 1) * in_plane, T(0));
      plane(pg + i * out_plane, pd + i * in_plane, i);
    }
  });
  if (!dx.is_same(out)) copy_into(out, dx);
}

// Checks a backward op's output gradient against the forward's output shape for x.
void check_pool_grad(const char* op, const TensorMeta& grad, const TensorMeta& x,
                     const PoolParams& p) {
  const Shape expected = pool_out_shape(op, x, p);
  KILN_CHECK_SHAPE(grad.shape == expected)
      << op << ": expected grad_output of shape " << shape_str(expected) << " for x of shape "
      << shape_str(x.shape) << ", got " << shape_str(grad.shape);
  KILN_CHECK_DTYPE(is_floating_point(grad.dtype) && is_floating_point(x.dtype))
      << op << ": expected floating-point tensors, got " << grad.dtype << " and " << x.dtype;
}

// MaxPool2D's schema, which its backward and select ops share: `inputs`, then the window
// attributes.
OpDef max_pool_op(const char* name, std::initializer_list<const char*> inputs) {
  OpDef def(name);
  for (const char* input : inputs) def.input(input);
  def.attr("kernel_size", AttrKind::kInts)
      .attr("stride", AttrKind::kInts, std::vector<int64_t>{})
      .attr("padding", AttrKind::kInts, std::vector<int64_t>{0, 0})
      .attr("dilation", AttrKind::kInts, std::vector<int64_t>{1, 1})
      .attr("ceil_mode", AttrKind::kBool, false);
  return def;
}

// The rule of MaxPool2DBackward and of MaxPool2DSelect (Note [Pooling gradients]): each is
// linear in its first input, and `adjoint`, the other of the two, is its gradient there, on the
// output gradient and the same x; x gets none.
std::vector<Tensor> max_pool_adjoint_grad(const OpDef& adjoint, const std::vector<Tensor>& in,
                                          const std::vector<Tensor>& out, const Attrs& attrs,
                                          const std::vector<Tensor>& grad_outputs) {
  const Tensor g = grad::or_zeros(grad_outputs[0], out[0]);
  return {grad::as_grad_of(call_op(adjoint, {g, in[1]}, attrs)[0], in[0]), Tensor()};
}

KILN_REGISTER_OP(
    max_pool_op("MaxPool2DBackward", {"grad_output", "x"})
        .doc("The gradient of MaxPool2D's x from its output gradient (see Note [Pooling "
             "gradients])")
        .infer([](const InferContext& ctx) {
          const char* op = "max_pool2d_backward";
          check_pool_grad(op, ctx.input(0), ctx.input(1), pool_params(op, ctx.attrs, true));
          return MetaList{{result_type(ctx.inputs), ctx.input(1).shape}};
        })
        .kernel(DeviceType::kCPU,
                [](KernelContext& ctx) {
                  const Tensor& out = ctx.outputs[0];
                  if (out.numel() == 0) return;
                  const PoolParams p = pool_params("max_pool2d_backward", ctx.attrs, true);
                  const int64_t H = out.size(2), W = out.size(3);
                  const int64_t OH = ctx.inputs[0].size(2), OW = ctx.inputs[0].size(3);
                  visit_compute_float(out.dtype(), [&](auto zero) {
                    using C = decltype(zero);
                    const Tensor x = contiguous_as(ctx.inputs[1], dtype_of<C>());
                    const C* px = x.data<C>();
                    for_each_grad_plane<C>(ctx.inputs[0], out, [&](const C* gp, C* dp, int64_t i) {
                      const C* xp = px + i * H * W;
                      for (int64_t oh = 0; oh < OH; ++oh) {
                        for (int64_t ow = 0; ow < OW; ++ow) {
                          const int64_t at = window_argmax<C>(xp, H, W, oh, ow, p);
                          if (at >= 0) dp[at] += gp[oh * OW + ow];
                        }
                      }
                    });
                  });
                })
        .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out, const Attrs& attrs,
                 const std::vector<Tensor>& grad_outputs) {
          // Linear in grad_output, whose gradient is the gather at the maxima; x's is zero almost
          // everywhere. (infer admits floating point only.)
          static const OpDefPtr op = OpRegistry::Instance().get("MaxPool2DSelect");
          return max_pool_adjoint_grad(*op, in, out, attrs, grad_outputs);
        }));

KILN_REGISTER_OP(
    max_pool_op("MaxPool2DSelect", {"source", "x"})
        .doc("For each window of MaxPool2D over x, the element of source (x's shape) at the "
             "window's maximum, 0 for a window outside x: the gradient of MaxPool2DBackward's "
             "grad_output (see Note [Pooling gradients])")
        .infer([](const InferContext& ctx) {
          const char* op = "MaxPool2DSelect";
          const TensorMeta& source = ctx.input(0);
          const TensorMeta& x = ctx.input(1);
          KILN_CHECK_SHAPE(source.shape == x.shape)
              << op << ": expected source of x's shape " << shape_str(x.shape) << ", got "
              << shape_str(source.shape);
          KILN_CHECK_DTYPE(is_floating_point(source.dtype) && is_floating_point(x.dtype))
              << op << ": expected floating-point tensors, got " << source.dtype << " and "
              << x.dtype;
          return MetaList{
              {result_type(ctx.inputs), pool_out_shape(op, x, pool_params(op, ctx.attrs, true))}};
        })
        .kernel(DeviceType::kCPU,
                [](KernelContext& ctx) {
                  const Tensor& out = ctx.outputs[0];
                  if (out.numel() == 0) return;
                  const PoolParams p = pool_params("MaxPool2DSelect", ctx.attrs, true);
                  const int64_t H = ctx.inputs[1].size(2), W = ctx.inputs[1].size(3);
                  const int64_t OH = out.size(2), OW = out.size(3);
                  visit_compute_float(out.dtype(), [&](auto zero) {
                    using C = decltype(zero);
                    const Tensor source = contiguous_as(ctx.inputs[0], dtype_of<C>());
                    const Tensor x = contiguous_as(ctx.inputs[1], dtype_of<C>());
                    const Tensor y = out.dtype() == dtype_of<C>()
                                         ? out
                                         : Tensor::empty(out.shape(), dtype_of<C>());
                    const C* px = x.data<C>();
                    const C* ps = source.data<C>();
                    for_each_plane<C>(x, y, [&](const C* xp, C* yp) {
                      const C* sp = ps + (xp - px);
                      for (int64_t oh = 0; oh < OH; ++oh) {
                        for (int64_t ow = 0; ow < OW; ++ow) {
                          const int64_t at = window_argmax<C>(xp, H, W, oh, ow, p);
                          yp[oh * OW + ow] = at < 0 ? C(0) : sp[at];
                        }
                      }
                    });
                    if (!y.is_same(out)) copy_into(out, y);
                  });
                })
        .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out, const Attrs& attrs,
                 const std::vector<Tensor>& grad_outputs) {
          // Linear in source, the adjoint of MaxPool2DBackward's grad_output (and back).
          static const OpDefPtr op = OpRegistry::Instance().get("MaxPool2DBackward");
          return max_pool_adjoint_grad(*op, in, out, attrs, grad_outputs);
        }));

KILN_REGISTER_OP(
    OpDef("AvgPool2DBackward")
        .input("grad_output")
        .attr("input_size", AttrKind::kInts)
        .attr("kernel_size", AttrKind::kInts)
        .attr("stride", AttrKind::kInts, std::vector<int64_t>{})
        .attr("padding", AttrKind::kInts, std::vector<int64_t>{0, 0})
        .attr("ceil_mode", AttrKind::kBool, false)
        .attr("count_include_pad", AttrKind::kBool, true)
        .doc("The gradient of AvgPool2D's x (of shape input_size) from its output gradient (see "
             "Note [Pooling gradients])")
        .infer([](const InferContext& ctx) {
          const char* op = "avg_pool2d_backward";
          const std::vector<int64_t> size = ctx.attrs.get<std::vector<int64_t>>("input_size");
          KILN_CHECK_SHAPE(size.size() == 4 && std::all_of(size.begin(), size.end(),
                                                           [](int64_t d) { return d >= 0; }))
              << op << ": expected input_size of four non-negative sizes, got " << shape_str(size);
          const TensorMeta x(ctx.input(0).dtype, Shape(size.begin(), size.end()));
          check_pool_grad(op, ctx.input(0), x, pool_params(op, ctx.attrs, false));
          return MetaList{x};
        })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          if (out.numel() == 0) return;
          const PoolParams p = pool_params("avg_pool2d_backward", ctx.attrs, false);
          const bool include_pad = ctx.attrs.get<bool>("count_include_pad");
          const int64_t H = out.size(2), W = out.size(3);
          const int64_t OH = ctx.inputs[0].size(2), OW = ctx.inputs[0].size(3);
          visit_compute_float(out.dtype(), [&](auto zero) {
            using C = decltype(zero);
            for_each_grad_plane<C>(ctx.inputs[0], out, [&](const C* gp, C* dp, int64_t) {
              for (int64_t oh = 0; oh < OH; ++oh) {
                for (int64_t ow = 0; ow < OW; ++ow) {
                  const AvgWindow w = avg_window(oh, ow, H, W, p, include_pad);
                  if (w.count <= 0) continue;
                  const C share = gp[oh * OW + ow] / static_cast<C>(w.count);
                  for (int64_t ih = w.h0; ih < w.h1; ++ih) {
                    for (int64_t iw = w.w0; iw < w.w1; ++iw) dp[ih * W + iw] += share;
                  }
                }
              }
            });
          });
        })
        .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                 const Attrs& attrs, const std::vector<Tensor>& grad_outputs) {
          // Linear in the output gradient: its own gradient is the forward pool.
          Attrs pool_attrs;
          for (const auto& [name, value] : attrs.items()) {
            if (name != "input_size") pool_attrs.set(name, value);
          }
          static const OpDefPtr op = OpRegistry::Instance().get("AvgPool2D");
          const Tensor g = grad::or_zeros(grad_outputs[0], out[0]);
          return std::vector<Tensor>{grad::as_grad_of(call_op(*op, {g}, pool_attrs)[0], in[0])};
        }));

KILN_REGISTER_OP(max_pool_op("MaxPool2D", {"x"})
                     .doc("Maximum over kernel_size windows of NCHW x (stride [] = kernel_size)")
                     .infer([](const InferContext& ctx) {
                       const TensorMeta& x = ctx.input(0);
                       KILN_CHECK_DTYPE(x.dtype != DType::kBool)
                           << "max_pool2d: expected a numeric x, got bool";
                       return MetaList{
                           {x.dtype, pool_out_shape("max_pool2d", x,
                                                    pool_params("max_pool2d", ctx.attrs, true))}};
                     })
                     .kernel(DeviceType::kCPU,
                             [](KernelContext& ctx) {
                               const Tensor& out = ctx.outputs[0];
                               if (out.numel() == 0) return;
                               const PoolParams p = pool_params("max_pool2d", ctx.attrs, true);
                               const Tensor x = ctx.inputs[0].contiguous();
                               visit_dtype(out.dtype(), [&](auto tag) {
                                 using T = typename decltype(tag)::type;
                                 if constexpr (!std::is_same_v<T, bool>) max_pool<T>(x, out, p);
                               });
                             })
                     .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                              const Attrs& attrs, const std::vector<Tensor>& grad_outputs) {
                       if (!grad::differentiable(in[0])) return std::vector<Tensor>{Tensor()};
                       static const OpDefPtr op = OpRegistry::Instance().get("MaxPool2DBackward");
                       const Tensor g = grad::or_zeros(grad_outputs[0], out[0]);
                       return std::vector<Tensor>{
                           grad::as_grad_of(call_op(*op, {g, in[0]}, attrs)[0], in[0])};
                     }));

KILN_REGISTER_OP(OpDef("AvgPool2D")
                     .input("x")
                     .attr("kernel_size", AttrKind::kInts)
                     .attr("stride", AttrKind::kInts, std::vector<int64_t>{})
                     .attr("padding", AttrKind::kInts, std::vector<int64_t>{0, 0})
                     .attr("ceil_mode", AttrKind::kBool, false)
                     .attr("count_include_pad", AttrKind::kBool, true)
                     .doc("Mean over kernel_size windows of NCHW x (stride [] = kernel_size)")
                     .infer([](const InferContext& ctx) {
                       const TensorMeta& x = ctx.input(0);
                       KILN_CHECK_DTYPE(is_floating_point(x.dtype))
                           << "avg_pool2d: expected a floating-point x, got " << x.dtype;
                       return MetaList{
                           {x.dtype, pool_out_shape("avg_pool2d", x,
                                                    pool_params("avg_pool2d", ctx.attrs, false))}};
                     })
                     .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
                       const Tensor& out = ctx.outputs[0];
                       if (out.numel() == 0) return;
                       const PoolParams p = pool_params("avg_pool2d", ctx.attrs, false);
                       const bool include_pad = ctx.attrs.get<bool>("count_include_pad");
                       const Tensor x = ctx.inputs[0].contiguous();
                       visit_dtype(out.dtype(), [&](auto tag) {
                         using T = typename decltype(tag)::type;
                         if constexpr (!std::is_integral_v<T>) avg_pool<T>(x, out, p, include_pad);
                       });
                     })
                     .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                              const Attrs& attrs, const std::vector<Tensor>& grad_outputs) {
                       static const OpDefPtr op = OpRegistry::Instance().get("AvgPool2DBackward");
                       const Shape& x = in[0].shape();
                       Attrs backward_attrs = attrs;
                       backward_attrs.set("input_size", std::vector<int64_t>(x.begin(), x.end()));
                       const Tensor g = grad::or_zeros(grad_outputs[0], out[0]);
                       return std::vector<Tensor>{grad::as_grad_of(
                           call_op(*op, {g}, backward_attrs)[0], in[0])};
                     }));

}  // namespace

Tensor max_pool2d(const Tensor& x, const std::vector<int64_t>& kernel_size,
                  const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                  const std::vector<int64_t>& dilation, bool ceil_mode) {
  static const OpDefPtr op = OpRegistry::Instance().get("MaxPool2D");
  return call_op(*op, {x},
                 {{"kernel_size", kernel_size},
                  {"stride", stride},
                  {"padding", padding},
                  {"dilation", dilation},
                  {"ceil_mode", ceil_mode}})[0];
}

Tensor avg_pool2d(const Tensor& x, const std::vector<int64_t>& kernel_size,
                  const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                  bool ceil_mode, bool count_include_pad) {
  static const OpDefPtr op = OpRegistry::Instance().get("AvgPool2D");
  return call_op(*op, {x},
                 {{"kernel_size", kernel_size},
                  {"stride", stride},
                  {"padding", padding},
                  {"ceil_mode", ceil_mode},
                  {"count_include_pad", count_include_pad}})[0];
}

Tensor max_pool2d_backward(const Tensor& grad_output, const Tensor& x,
                           const std::vector<int64_t>& kernel_size,
                           const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                           const std::vector<int64_t>& dilation, bool ceil_mode) {
  static const OpDefPtr op = OpRegistry::Instance().get("MaxPool2DBackward");
  return call_op(*op, {grad_output, x},
                 {{"kernel_size", kernel_size},
                  {"stride", stride},
                  {"padding", padding},
                  {"dilation", dilation},
                  {"ceil_mode", ceil_mode}})[0];
}

Tensor avg_pool2d_backward(const Tensor& grad_output, const Shape& input_size,
                           const std::vector<int64_t>& kernel_size,
                           const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                           bool ceil_mode, bool count_include_pad) {
  static const OpDefPtr op = OpRegistry::Instance().get("AvgPool2DBackward");
  return call_op(*op, {grad_output},
                 {{"input_size", std::vector<int64_t>(input_size.begin(), input_size.end())},
                  {"kernel_size", kernel_size},
                  {"stride", stride},
                  {"padding", padding},
                  {"ceil_mode", ceil_mode},
                  {"count_include_pad", count_include_pad}})[0];
}

}  // namespace kiln
