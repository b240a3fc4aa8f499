// Conv2D's gradients: Conv2DBackwardInput and Conv2DBackwardWeight (kiln::conv2d_backward_input,
// kiln::conv2d_backward_weight), on oneDNN's backward-data / backward-weights primitives for
// float32 and direct loops otherwise. See Note [Convolution gradients].
#include <algorithm>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kiln/functional/nn.h"
#include "kiln/op.h"
#include "kiln/parallel.h"
#include "ops/conv.h"
#include "ops/nn_grad.h"
#include "ops/onednn_util.h"

namespace kiln {
namespace conv {  // its helpers (ops/conv.h) need no qualification
namespace {

// Note [Convolution gradients]
// Conv2D's gradient is two registered ops: Conv2DBackwardInput (the gradient of x: a transposed
// convolution of the output gradient with the weight) and Conv2DBackwardWeight (the gradient of
// the weight: a correlation of x with the output gradient); the bias's is a sum. Both are linear
// in each operand, so their own rules are again Conv2D and the other backward op, and Conv2D is
// differentiable to any order. float32 runs on oneDNN's backward-data and backward-weights
// primitives in the layouts oneDNN picks, with reorders as for the forward (see Note [oneDNN
// convolution layouts]: on plain layouts oneDNN falls back to gemm-based kernels, and measured
// here the backward-weights one took ~15x the forward's time); float64 (and empty problems) on
// the direct loops below.

enum class ConvBackward { kData, kWeights };

// A backward primitive with its layouts: `prim_*` what the primitive wants (oneDNN chooses, as
// for the forward), `user_*` Kiln's plain ones, and the reorders between them where they differ
// (into the primitive for its two inputs, out of it for its result).
struct ConvBackwardEntry {
  dnnl::primitive prim;
  dnnl::memory::desc prim_src_md, prim_weights_md, prim_dst_md, scratchpad_md;
  dnnl::memory::desc user_src_md, user_weights_md, user_dst_md;
  std::optional<dnnl::reorder> src_reorder, weights_reorder, dst_reorder;
};

std::shared_ptr<const ConvBackwardEntry> conv_backward_primitive(ConvBackward kind, const Shape& x,
                                                                 const Shape& w, const Shape& out,
                                                                 const ConvParams& p) {
  const char* name =
      kind == ConvBackward::kData ? "conv2d_backward_data.f32" : "conv2d_backward_weights.f32";
  return onednn::get_or_create<ConvBackwardEntry>(conv_key(name, x, w, out, p), [&] {
    using tag = dnnl::memory::format_tag;
    const auto f32 = dnnl::memory::data_type::f32;
    const auto alg = dnnl::algorithm::convolution_direct;
    const dnnl::engine& eng = onednn::engine();
    const ConvDims d = conv_dims(x, w, out, p);
    auto e = std::make_shared<ConvBackwardEntry>();
    e->user_src_md = dnnl::memory::desc(d.src, f32, tag::nchw);
    e->user_weights_md = dnnl::memory::desc(d.weights, f32, d.weights_tag);
    e->user_dst_md = dnnl::memory::desc(d.dst, f32, tag::nchw);
    const dnnl::memory::desc any_src(d.src, f32, tag::any), any_w(d.weights, f32, tag::any),
        any_dst(d.dst, f32, tag::any);
    // oneDNN builds backward primitives from a forward one (as a hint for layouts).
    const dnnl::convolution_forward::primitive_desc hint(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, alg, any_src, any_w,
                                        any_dst, d.strides, d.dilates, d.pad_l, d.pad_r),
        eng);
    if (kind == ConvBackward::kData) {
      const dnnl::convolution_backward_data::primitive_desc pd(
          dnnl::convolution_backward_data::desc(alg, any_src, any_w, any_dst, d.strides,
                                                d.dilates, d.pad_l, d.pad_r),
          onednn::cached_attr(), eng, hint);
      e->prim = dnnl::convolution_backward_data(pd);
      e->prim_src_md = pd.diff_src_desc();
      e->prim_weights_md = pd.weights_desc();
      e->prim_dst_md = pd.diff_dst_desc();
      e->scratchpad_md = pd.scratchpad_desc();
      e->src_reorder = maybe_reorder(e->prim_src_md, e->user_src_md);
      e->weights_reorder = maybe_reorder(e->user_weights_md, e->prim_weights_md);
    } else {
      const dnnl::convolution_backward_weights::primitive_desc pd(
          dnnl::convolution_backward_weights::desc(alg, any_src, any_w, any_dst, d.strides,
                                                   d.dilates, d.pad_l, d.pad_r),
          onednn::cached_attr(), eng, hint);
      e->prim = dnnl::convolution_backward_weights(pd);
      e->prim_src_md = pd.src_desc();
      e->prim_weights_md = pd.diff_weights_desc();
      e->prim_dst_md = pd.diff_dst_desc();
      e->scratchpad_md = pd.scratchpad_desc();
      e->src_reorder = maybe_reorder(e->user_src_md, e->prim_src_md);
      e->weights_reorder = maybe_reorder(e->prim_weights_md, e->user_weights_md);
    }
    e->dst_reorder = maybe_reorder(e->user_dst_md, e->prim_dst_md);
    return e;
  });
}

// x, weight, grad: contiguous float32 of the forward problem's shapes. kData writes x (the input
// gradient) from weight and grad; kWeights writes weight from x and grad.
void onednn_conv_backward(ConvBackward kind, const Tensor& x, const Tensor& weight,
                          const Tensor& grad, const ConvParams& p) {
  const auto e = conv_backward_primitive(kind, x.shape(), weight.shape(), grad.shape(), p);
  const bool data = kind == ConvBackward::kData;
  dnnl::stream& stream = onednn::stream();
  const dnnl::engine& eng = onednn::engine();
  dnnl::memory user_result =
      data ? onednn::wrap(e->user_src_md, x) : onednn::wrap(e->user_weights_md, weight);
  const std::optional<dnnl::reorder>& result_reorder = data ? e->src_reorder : e->weights_reorder;
  dnnl::memory result =
      result_reorder ? dnnl::memory(data ? e->prim_src_md : e->prim_weights_md, eng) : user_result;
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_DIFF_DST,
       staged_input(e->dst_reorder, e->prim_dst_md, onednn::wrap(e->user_dst_md, grad))}};
  if (data) {
    args.emplace(DNNL_ARG_DIFF_SRC, result);
    args.emplace(DNNL_ARG_WEIGHTS, staged_input(e->weights_reorder, e->prim_weights_md,
                                                onednn::wrap(e->user_weights_md, weight)));
  } else {
    args.emplace(DNNL_ARG_DIFF_WEIGHTS, result);
    args.emplace(DNNL_ARG_SRC,
                 staged_input(e->src_reorder, e->prim_src_md, onednn::wrap(e->user_src_md, x)));
  }
  const std::shared_ptr<Storage> scratchpad = onednn::add_scratchpad(e->scratchpad_md, &args);
  e->prim.execute(stream, args);
  if (result_reorder) result_reorder->execute(stream, result, user_result);
  stream.wait();
}

// dx[n, c] = sum over the output channels o of c's group and the kernel taps of
// grad[n, o] * weight[o, c % cg] at the positions each tap reads. One thread per input plane.
template <typename T>
void direct_conv_backward_input(const Tensor& grad, const Tensor& weight, const Tensor& dx,
                                const ConvParams& p) {
  const int64_t C = dx.size(1), H = dx.size(2), W = dx.size(3);
  const int64_t O = grad.size(1), OH = grad.size(2), OW = grad.size(3);
  const int64_t KH = weight.size(2), KW = weight.size(3);
  const int64_t cg = weight.size(1), og = O / p.groups;
  const T* pg = grad.data<T>();
  const T* pw = weight.data<T>();
  T* px = dx.data<T>();
  const int64_t plane_work = std::max<int64_t>(1, og * OH * OW * KH * KW);
  parallel_for(0, dx.size(0) * C, std::max<int64_t>(1, (int64_t{1} << 15) / plane_work),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t plane = lo; plane < hi; ++plane) {
                   const int64_t n = plane / C, c = plane % C, g0 = (c / cg) * og;
                   T* x = px + plane * H * W;
                   std::fill(x, x + H * W, T(0));
                   for (int64_t o = g0; o < g0 + og; ++o) {
                     const T* gp = pg + (n * O + o) * OH * OW;
                     const T* wp = pw + (o * cg + c % cg) * KH * KW;
                     for (int64_t oh = 0; oh < OH; ++oh) {
                       for (int64_t ow = 0; ow < OW; ++ow) {
                         const T gv = gp[oh * OW + ow];
                         for (int64_t kh = 0; kh < KH; ++kh) {
                           const int64_t ih = oh * p.stride_h - p.pad_h + kh * p.dil_h;
                           if (ih < 0 || ih >= H) continue;
                           for (int64_t kw = 0; kw < KW; ++kw) {
                             const int64_t iw = ow * p.stride_w - p.pad_w + kw * p.dil_w;
                             if (iw < 0 || iw >= W) continue;
                             x[ih * W + iw] += gv * wp[kh * KW + kw];
                           }
                         }
                       }
                     }
                   }
                 }
               });
}

// dw[o, ci, kh, kw] = sum over n and the output positions of grad[n, o] * x[n, group(o) * cg + ci]
// at the position the tap reads. One thread per (o, ci) kernel plane.
template <typename T>
void direct_conv_backward_weight(const Tensor& grad, const Tensor& x, const Tensor& dw,
                                 const ConvParams& p) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t O = grad.size(1), OH = grad.size(2), OW = grad.size(3);
  const int64_t KH = dw.size(2), KW = dw.size(3);
  const int64_t cg = dw.size(1), og = O / p.groups;
  const T* pg = grad.data<T>();
  const T* px = x.data<T>();
  T* pw = dw.data<T>();
  const int64_t plane_work = std::max<int64_t>(1, N * OH * OW * KH * KW);
  parallel_for(0, O * cg, std::max<int64_t>(1, (int64_t{1} << 15) / plane_work),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t plane = lo; plane < hi; ++plane) {
                   const int64_t o = plane / cg, c = (o / og) * cg + plane % cg;
                   for (int64_t kh = 0; kh < KH; ++kh) {
                     for (int64_t kw = 0; kw < KW; ++kw) {
                       T acc = 0;
                       for (int64_t n = 0; n < N; ++n) {
                         const T* gp = pg + (n * O + o) * OH * OW;
                         const T* xp = px + (n * C + c) * H * W;
                         for (int64_t oh = 0; oh < OH; ++oh) {
                           const int64_t ih = oh * p.stride_h - p.pad_h + kh * p.dil_h;
                           if (ih < 0 || ih >= H) continue;
                           for (int64_t ow = 0; ow < OW; ++ow) {
                             const int64_t iw = ow * p.stride_w - p.pad_w + kw * p.dil_w;
                             if (iw < 0 || iw >= W) continue;
                             acc += gp[oh * OW + ow] * xp[ih * W + iw];
                           }
                         }
                       }
                       pw[(plane * KH + kh) * KW + kw] = acc;
                     }
                   }
                 }
               });
}

template <typename T>
void direct_conv_backward(ConvBackward kind, const Tensor& grad, const Tensor& other,
                          const Tensor& result, const ConvParams& p) {
  if (kind == ConvBackward::kData) {
    direct_conv_backward_input<T>(grad, other, result, p);
  } else {
    direct_conv_backward_weight<T>(grad, other, result, p);
  }
}

// The shape attribute (input_size or weight_size) of a backward op, checked to be 4-d.
Shape size_attr(const char* op, const Attrs& attrs, const char* name) {
  const std::vector<int64_t> size = attrs.get<std::vector<int64_t>>(name);
  KILN_CHECK_SHAPE(size.size() == 4 &&
                   std::all_of(size.begin(), size.end(), [](int64_t d) { return d >= 0; }))
      << op << ": expected " << name << " of four non-negative sizes, got " << shape_str(size);
  return Shape(size.begin(), size.end());
}

// Infers a backward op of `kind`: its result has x's shape (kData) or the weight's (kWeights),
// and the forward problem of x and the weight must give grad's shape.
MetaList conv_backward_infer(const char* op, ConvBackward kind, const InferContext& ctx,
                             const Shape& x, const Shape& w) {
  const ConvParams p = conv_params(ctx.attrs);
  TensorMeta no_bias;
  no_bias.defined = false;
  const Shape expected = conv_out_shape(x, w, no_bias, p);
  const TensorMeta& grad = ctx.input(0);
  KILN_CHECK_SHAPE(grad.shape == expected)
      << op << ": expected grad_output of shape " << shape_str(expected) << " for x "
      << shape_str(x) << " and weight " << shape_str(w) << ", got " << shape_str(grad.shape);
  const DType dtype = result_type(ctx.inputs);
  KILN_CHECK_DTYPE(is_floating_point(dtype))
      << op << ": expected floating-point tensors, got " << dtype;
  return MetaList{{dtype, kind == ConvBackward::kData ? x : w}};
}

// Runs a backward kernel in the compute dtype of the output (as Conv2D's kernel does).
void conv_backward_kernel(ConvBackward kind, KernelContext& ctx) {
  const Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  const ConvParams p = conv_params(ctx.attrs);
  const DType cd = compute_dtype(out.dtype());
  const Tensor grad = contiguous_as(ctx.inputs[0], cd);
  const Tensor other = contiguous_as(ctx.inputs[1], cd);  // the weight (kData) or x (kWeights)
  const Tensor target = out.dtype() == cd ? out : Tensor::empty(out.shape(), cd);
  const bool data = kind == ConvBackward::kData;
  const Tensor& x = data ? target : other;
  if (cd == DType::kFloat32 && grad.numel() > 0 && x.size(1) > 0) {
    onednn_conv_backward(kind, x, data ? other : target, grad, p);
  } else if (cd == DType::kFloat32) {
    direct_conv_backward<float>(kind, grad, other, target, p);
  } else {
    direct_conv_backward<double>(kind, grad, other, target, p);
  }
  if (!target.is_same(out)) copy_into(out, target);
}

KILN_REGISTER_OP(
    with_conv_attrs(OpDef("Conv2DBackwardInput")
                        .input("grad_output")
                        .input("weight")
                        .attr("input_size", AttrKind::kInts))
        .doc("The gradient of Conv2D's x (of shape input_size) from its output gradient and weight")
        .infer([](const InferContext& ctx) {
          const char* op = "conv2d_backward_input";
          return conv_backward_infer(op, ConvBackward::kData, ctx,
                                     size_attr(op, ctx.attrs, "input_size"),
                                     ctx.input(1).shape);
        })
        .kernel(DeviceType::kCPU,
                [](KernelContext& ctx) { conv_backward_kernel(ConvBackward::kData, ctx); })
        .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out, const Attrs& attrs,
                 const std::vector<Tensor>& grad_outputs) {
          // Linear in each operand (see Note [Convolution gradients]).
          const Tensor gx = grad::or_zeros(grad_outputs[0], out[0]);
          const ConvArgs a = conv_args(attrs);
          std::vector<Tensor> grads(2);
          if (grad::differentiable(in[0])) {
            grads[0] = grad::as_grad_of(
                conv2d(gx, in[1], Tensor(), a.stride, a.padding, a.dilation, a.groups), in[0]);
          }
          if (grad::differentiable(in[1])) {
            grads[1] = grad::as_grad_of(conv2d_backward_weight(in[0], gx, in[1].shape(), a.stride,
                                                               a.padding, a.dilation, a.groups),
                                        in[1]);
          }
          return grads;
        }));

KILN_REGISTER_OP(
    with_conv_attrs(OpDef("Conv2DBackwardWeight")
                        .input("grad_output")
                        .input("x")
                        .attr("weight_size", AttrKind::kInts))
        .doc("The gradient of Conv2D's weight (of shape weight_size) from its output gradient and x")
        .infer([](const InferContext& ctx) {
          const char* op = "conv2d_backward_weight";
          return conv_backward_infer(op, ConvBackward::kWeights, ctx, ctx.input(1).shape,
                                     size_attr(op, ctx.attrs, "weight_size"));
        })
        .kernel(DeviceType::kCPU,
                [](KernelContext& ctx) { conv_backward_kernel(ConvBackward::kWeights, ctx); })
        .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out, const Attrs& attrs,
                 const std::vector<Tensor>& grad_outputs) {
          const Tensor gw = grad::or_zeros(grad_outputs[0], out[0]);
          const ConvArgs a = conv_args(attrs);
          std::vector<Tensor> grads(2);
          if (grad::differentiable(in[0])) {
            grads[0] = grad::as_grad_of(
                conv2d(in[1], gw, Tensor(), a.stride, a.padding, a.dilation, a.groups), in[0]);
          }
          if (grad::differentiable(in[1])) {
            grads[1] = grad::as_grad_of(conv2d_backward_input(in[0], gw, in[1].shape(), a.stride,
                                                              a.padding, a.dilation, a.groups),
                                        in[1]);
          }
          return grads;
        }));

}  // namespace
}  // namespace conv

Tensor conv2d_backward_input(const Tensor& grad_output, const Tensor& weight,
                             const Shape& input_size, const std::vector<int64_t>& stride,
                             const std::vector<int64_t>& padding,
                             const std::vector<int64_t>& dilation, int64_t groups) {
  static const OpDefPtr op = OpRegistry::Instance().get("Conv2DBackwardInput");
  return call_op(*op, {grad_output, weight},
                 {{"input_size", std::vector<int64_t>(input_size.begin(), input_size.end())},
                  {"stride", stride},
                  {"padding", padding},
                  {"dilation", dilation},
                  {"groups", groups}})[0];
}

Tensor conv2d_backward_weight(const Tensor& grad_output, const Tensor& x,
                              const Shape& weight_size, const std::vector<int64_t>& stride,
                              const std::vector<int64_t>& padding,
                              const std::vector<int64_t>& dilation, int64_t groups) {
  static const OpDefPtr op = OpRegistry::Instance().get("Conv2DBackwardWeight");
  return call_op(*op, {grad_output, x},
                 {{"weight_size", std::vector<int64_t>(weight_size.begin(), weight_size.end())},
                  {"stride", stride},
                  {"padding", padding},
                  {"dilation", dilation},
                  {"groups", groups}})[0];
}

}  // namespace kiln
