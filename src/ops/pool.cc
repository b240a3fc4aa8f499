// MaxPool2D and AvgPool2D (kiln::max_pool2d, kiln::avg_pool2d) over NCHW input, with PyTorch's
// window, padding and ceil_mode rules.
//
// A direct loop over output planes in parallel: pooling reads each input element about
// kernel_size / stride^2 times and is memory-bound, so there is nothing for a library to win
// on planes of this layout. float16/bfloat16 average in float32 and round once.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/dtype_dispatch.h"
#include "kiln/functional/nn.h"
#include "kiln/op.h"
#include "kiln/parallel.h"

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

template <typename T>
void max_pool(const Tensor& x, const Tensor& out, const PoolParams& p) {
  const int64_t H = x.size(2), W = x.size(3), OH = out.size(2), OW = out.size(3);
  // Accumulate 16-bit floats as float; the maximum is one of the inputs, so nothing rounds.
  using V = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;
  const V lowest = std::numeric_limits<V>::has_infinity ? -std::numeric_limits<V>::infinity()
                                                        : std::numeric_limits<V>::lowest();
  for_each_plane<T>(x, out, [&](const T* xp, T* yp) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        V best = lowest;
        for (int64_t kh = 0; kh < p.kernel_h; ++kh) {
          const int64_t ih = oh * p.stride_h - p.pad_h + kh * p.dil_h;
          if (ih < 0 || ih >= H) continue;
          for (int64_t kw = 0; kw < p.kernel_w; ++kw) {
            const int64_t iw = ow * p.stride_w - p.pad_w + kw * p.dil_w;
            if (iw < 0 || iw >= W) continue;
            const V v = static_cast<V>(xp[ih * W + iw]);
            // nan wins, as in PyTorch and numpy.max.
            if constexpr (std::is_floating_point_v<V>) {
              if (v > best || std::isnan(v)) best = v;
            } else {
              best = std::max(best, v);
            }
          }
        }
        yp[oh * OW + ow] = convert<T>(best);
      }
    }
  });
}

template <typename T>
void avg_pool(const Tensor& x, const Tensor& out, const PoolParams& p, bool count_include_pad) {
  const int64_t H = x.size(2), W = x.size(3), OH = out.size(2), OW = out.size(3);
  using V = std::conditional_t<std::is_same_v<T, double>, double, float>;
  for_each_plane<T>(x, out, [&](const T* xp, T* yp) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        // The window clipped to the padded input gives count_include_pad's divisor; clipped to
        // the input, the other one.
        int64_t h0 = oh * p.stride_h - p.pad_h, w0 = ow * p.stride_w - p.pad_w;
        int64_t h1 = std::min(h0 + p.kernel_h, H + p.pad_h);
        int64_t w1 = std::min(w0 + p.kernel_w, W + p.pad_w);
        const int64_t padded_count = (h1 - h0) * (w1 - w0);
        h0 = std::max<int64_t>(h0, 0);
        w0 = std::max<int64_t>(w0, 0);
        h1 = std::min(h1, H);
        w1 = std::min(w1, W);
        V sum = 0;
        for (int64_t ih = h0; ih < h1; ++ih) {
          for (int64_t iw = w0; iw < w1; ++iw) sum += static_cast<V>(xp[ih * W + iw]);
        }
        const int64_t count = count_include_pad ? padded_count : (h1 - h0) * (w1 - w0);
        yp[oh * OW + ow] = convert<T>(count > 0 ? sum / static_cast<V>(count) : V(0));
      }
    }
  });
}

KILN_REGISTER_OP(OpDef("MaxPool2D")
                     .input("x")
                     .attr("kernel_size", AttrKind::kInts)
                     .attr("stride", AttrKind::kInts, std::vector<int64_t>{})
                     .attr("padding", AttrKind::kInts, std::vector<int64_t>{0, 0})
                     .attr("dilation", AttrKind::kInts, std::vector<int64_t>{1, 1})
                     .attr("ceil_mode", AttrKind::kBool, false)
                     .doc("Maximum over kernel_size windows of NCHW x (stride [] = kernel_size)")
                     .infer([](const InferContext& ctx) {
                       const TensorMeta& x = ctx.input(0);
                       KILN_CHECK_DTYPE(x.dtype != DType::kBool)
                           << "max_pool2d: expected a numeric x, got bool";
                       return MetaList{
                           {x.dtype, pool_out_shape("max_pool2d", x,
                                                    pool_params("max_pool2d", ctx.attrs, true))}};
                     })
                     .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
                       const Tensor& out = ctx.outputs[0];
                       if (out.numel() == 0) return;
                       const PoolParams p = pool_params("max_pool2d", ctx.attrs, true);
                       const Tensor x = ctx.inputs[0].contiguous();
                       visit_dtype(out.dtype(), [&](auto tag) {
                         using T = typename decltype(tag)::type;
                         if constexpr (!std::is_same_v<T, bool>) max_pool<T>(x, out, p);
                       });
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

}  // namespace kiln
