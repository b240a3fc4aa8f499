// Conv2D (kiln::conv2d): 2-d convolution (cross-correlation, as in PyTorch) over NCHW input with
// stride, zero padding, dilation and groups.
//
// float32 runs on oneDNN's convolution primitive; float16/bfloat16 are converted to float32 and
// rounded once; float64 runs a direct parallel loop. See Note [oneDNN convolution layouts]. The
// backward ops are in conv_backward.cc; what both use is declared in conv.h.
#include "ops/conv.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kiln/functional/elementwise.h"
#include "kiln/functional/nn.h"
#include "kiln/functional/reduce.h"
#include "kiln/functional/shape.h"
#include "kiln/op.h"
#include "kiln/parallel.h"
#include "ops/nn_grad.h"
#include "ops/onednn_util.h"

namespace kiln {
namespace conv {

// Note [oneDNN convolution layouts]
// oneDNN's fastest convolutions (brgconv, jit avx512) want blocked layouts (nChw16c and friends).
// Kiln's tensors are plain NCHW, so the primitive is created with format `any` and Kiln reorders
// the input, weights and output between the two when oneDNN asks for another layout; that costs
// a pass over each tensor but halves the time of a typical 3x3 layer on AVX-512. All of it (the
// convolution and the reorders) is cached per problem (see Note [Primitive cache]).

ConvParams conv_params(const Attrs& attrs) {
  const std::vector<int64_t> stride = attrs.get<std::vector<int64_t>>("stride");
  const std::vector<int64_t> padding = attrs.get<std::vector<int64_t>>("padding");
  const std::vector<int64_t> dilation = attrs.get<std::vector<int64_t>>("dilation");
  const int64_t groups = attrs.get<int64_t>("groups");
  // At most 2^31 - 1, as oneDNN takes them (a stride of 2^31 failed inside it) and sums of them
  // stay far from overflowing.
  const auto pair_in = [](const std::vector<int64_t>& v, int64_t lo) {
    constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
    return v.size() == 2 && v[0] >= lo && v[1] >= lo && v[0] <= kMax && v[1] <= kMax;
  };
  KILN_CHECK_VALUE(pair_in(stride, 1))
      << "conv2d: expected stride of two integers in [1, 2^31 - 1], got " << shape_str(stride);
  KILN_CHECK_VALUE(pair_in(padding, 0))
      << "conv2d: expected padding of two integers in [0, 2^31 - 1], got " << shape_str(padding);
  KILN_CHECK_VALUE(pair_in(dilation, 1))
      << "conv2d: expected dilation of two integers in [1, 2^31 - 1], got " << shape_str(dilation);
  KILN_CHECK_VALUE(groups >= 1) << "conv2d: expected groups >= 1, got " << groups;
  return {stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1], groups};
}

namespace {

int64_t conv_out_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dil,
                      const char* dim) {
  const int64_t span = dil * (kernel - 1) + 1;
  KILN_CHECK_SHAPE(in + 2 * pad >= span)
      << "conv2d: expected the padded input " << dim << " (" << in + 2 * pad
      << ") to be at least the dilated kernel " << dim << " (" << span << ")";
  return (in + 2 * pad - span) / stride + 1;
}

}  // namespace

// [N, O, OH, OW] for x [N, C, H, W] and weight [O, C / groups, kH, kW].
Shape conv_out_shape(const Shape& x, const Shape& w, const TensorMeta& bias, const ConvParams& p) {
  KILN_CHECK_SHAPE(x.size() == 4) << "conv2d: expected x of shape [N, C, H, W], got "
                                  << shape_str(x);
  KILN_CHECK_SHAPE(w.size() == 4)
      << "conv2d: expected weight of shape [out_channels, in_channels / groups, kH, kW], got "
      << shape_str(w);
  KILN_CHECK_SHAPE(w[1] * p.groups == x[1])
      << "conv2d: x has shape " << shape_str(x) << " and weight has shape " << shape_str(w)
      << "; expected weight.shape[1] * groups == x.shape[1], got " << w[1] << " * " << p.groups
      << " and " << x[1];
  KILN_CHECK_SHAPE(w[2] >= 1 && w[3] >= 1)
      << "conv2d: expected a kernel of at least 1 x 1, got weight of shape " << shape_str(w);
  KILN_CHECK_SHAPE(w[0] % p.groups == 0)
      << "conv2d: expected out_channels (weight.shape[0] = " << w[0] << ") divisible by groups ("
      << p.groups << ")";
  KILN_CHECK_SHAPE(!bias.defined || bias.shape == Shape{w[0]})
      << "conv2d: weight has shape " << shape_str(w) << "; expected bias of shape [" << w[0]
      << "], got " << shape_str(bias.shape);
  return {x[0], w[0], conv_out_size(x[2], w[2], p.stride_h, p.pad_h, p.dil_h, "height"),
          conv_out_size(x[3], w[3], p.stride_w, p.pad_w, p.dil_w, "width")};
}

// Adds the attributes Conv2D and its backward ops share, with Conv2D's defaults.
OpDef& with_conv_attrs(OpDef& def) {
  return def.attr("stride", AttrKind::kInts, std::vector<int64_t>{1, 1})
      .attr("padding", AttrKind::kInts, std::vector<int64_t>{0, 0})
      .attr("dilation", AttrKind::kInts, std::vector<int64_t>{1, 1})
      .attr("groups", AttrKind::kInt, int64_t{1});
}

ConvArgs conv_args(const Attrs& attrs) {
  return {attrs.get<std::vector<int64_t>>("stride"), attrs.get<std::vector<int64_t>>("padding"),
          attrs.get<std::vector<int64_t>>("dilation"), attrs.get<int64_t>("groups")};
}

std::optional<dnnl::reorder> maybe_reorder(const dnnl::memory::desc& from,
                                           const dnnl::memory::desc& to) {
  if (from == to) return std::nullopt;
  const dnnl::engine& eng = onednn::engine();
  return dnnl::reorder(dnnl::reorder::primitive_desc(eng, from, eng, to));
}

dnnl::memory staged_input(const std::optional<dnnl::reorder>& reorder, const dnnl::memory::desc& md,
                          dnnl::memory user) {
  if (!reorder) return user;
  dnnl::memory m(md, onednn::engine());
  reorder->execute(onednn::stream(), user, m);
  return m;
}

ConvDims conv_dims(const Shape& x, const Shape& w, const Shape& out, const ConvParams& p) {
  ConvDims d;
  d.src.assign(x.begin(), x.end());
  d.dst.assign(out.begin(), out.end());
  d.weights.assign(w.begin(), w.end());
  d.weights_tag = dnnl::memory::format_tag::oihw;
  if (p.groups > 1) {
    d.weights = {p.groups, w[0] / p.groups, w[1], w[2], w[3]};
    d.weights_tag = dnnl::memory::format_tag::goihw;
  }
  d.strides = {p.stride_h, p.stride_w};
  d.dilates = {p.dil_h - 1, p.dil_w - 1};
  d.pad_l = {p.pad_h, p.pad_w};
  // padding_r makes oneDNN's output-size formula give exactly `out` (it may be negative when
  // the stride skips the last rows).
  d.pad_r = {(out[2] - 1) * p.stride_h + (w[2] - 1) * p.dil_h + 1 - x[2] - p.pad_h,
             (out[3] - 1) * p.stride_w + (w[3] - 1) * p.dil_w + 1 - x[3] - p.pad_w};
  return d;
}

onednn::PrimitiveKey conv_key(const char* kind, const Shape& x, const Shape& w, const Shape& out,
                              const ConvParams& p) {
  onednn::PrimitiveKey key(kind);
  key.add(x).add(w).add(out);
  key.add({p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dil_h, p.dil_w, p.groups});
  return key;
}

// The ops, inside conv so that its helpers need no qualification.
namespace {

struct ConvEntry {
  dnnl::convolution_forward prim;
  dnnl::memory::desc src_md, weights_md, dst_md, bias_md;        // what the primitive wants
  dnnl::memory::desc scratchpad_md;
  dnnl::memory::desc user_src_md, user_weights_md, user_dst_md;  // Kiln's plain layouts
  std::optional<dnnl::reorder> src_reorder, weights_reorder, dst_reorder;
};

std::shared_ptr<const ConvEntry> conv_primitive(const Shape& x, const Shape& w, const Shape& out,
                                                bool has_bias, const ConvParams& p) {
  onednn::PrimitiveKey key = conv_key("conv2d.f32", x, w, out, p);
  key.add(has_bias ? 1 : 0);
  return onednn::get_or_create<ConvEntry>(key, [&] {
    using tag = dnnl::memory::format_tag;
    const auto f32 = dnnl::memory::data_type::f32;
    auto e = std::make_shared<ConvEntry>();
    const ConvDims d = conv_dims(x, w, out, p);
    e->user_src_md = dnnl::memory::desc(d.src, f32, tag::nchw);
    e->user_weights_md = dnnl::memory::desc(d.weights, f32, d.weights_tag);
    e->user_dst_md = dnnl::memory::desc(d.dst, f32, tag::nchw);
    e->bias_md = dnnl::memory::desc({out[1]}, f32, tag::a);
    const dnnl::memory::desc any_src(d.src, f32, tag::any), any_w(d.weights, f32, tag::any),
        any_dst(d.dst, f32, tag::any);
    const auto prop = dnnl::prop_kind::forward_inference;
    const auto alg = dnnl::algorithm::convolution_direct;
    const dnnl::convolution_forward::desc desc =
        has_bias ? dnnl::convolution_forward::desc(prop, alg, any_src, any_w, e->bias_md, any_dst,
                                                   d.strides, d.dilates, d.pad_l, d.pad_r)
                 : dnnl::convolution_forward::desc(prop, alg, any_src, any_w, any_dst, d.strides,
                                                   d.dilates, d.pad_l, d.pad_r);
    const dnnl::convolution_forward::primitive_desc pd(desc, onednn::cached_attr(),
                                                       onednn::engine());
    e->prim = dnnl::convolution_forward(pd);
    e->src_md = pd.src_desc();
    e->weights_md = pd.weights_desc();
    e->dst_md = pd.dst_desc();
    e->scratchpad_md = pd.scratchpad_desc();
    e->src_reorder = maybe_reorder(e->user_src_md, e->src_md);
    e->weights_reorder = maybe_reorder(e->user_weights_md, e->weights_md);
    e->dst_reorder = maybe_reorder(e->dst_md, e->user_dst_md);
    return e;
  });
}

// x, weight, bias: contiguous float32; out: contiguous float32 [N, O, OH, OW].
void onednn_conv(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out,
                 const ConvParams& p) {
  const auto e = conv_primitive(x.shape(), weight.shape(), out.shape(), bias.defined(), p);
  dnnl::stream& stream = onednn::stream();
  const dnnl::engine& eng = onednn::engine();
  // Memory in the primitive's layouts, reordered from and to Kiln's plain tensors when they
  // differ (see Note [oneDNN convolution layouts]).
  dnnl::memory user_dst = onednn::wrap(e->user_dst_md, out);
  dnnl::memory dst = e->dst_reorder ? dnnl::memory(e->dst_md, eng) : user_dst;
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, staged_input(e->src_reorder, e->src_md, onednn::wrap(e->user_src_md, x))},
      {DNNL_ARG_WEIGHTS,
       staged_input(e->weights_reorder, e->weights_md, onednn::wrap(e->user_weights_md, weight))},
      {DNNL_ARG_DST, dst}};
  if (bias.defined()) args.emplace(DNNL_ARG_BIAS, onednn::wrap(e->bias_md, bias));
  const std::shared_ptr<Storage> scratchpad = onednn::add_scratchpad(e->scratchpad_md, &args);
  e->prim.execute(stream, args);
  if (e->dst_reorder) e->dst_reorder->execute(stream, dst, user_dst);
  stream.wait();
}

// The direct loop (float64, and problems oneDNN cannot describe such as zero input channels).
template <typename T>
void direct_conv(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out,
                 const ConvParams& p) {
  const int64_t C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t O = out.size(1), OH = out.size(2), OW = out.size(3);
  const int64_t KH = weight.size(2), KW = weight.size(3);
  const int64_t cg = weight.size(1), og = O / p.groups;
  const T* px = x.data<T>();
  const T* pw = weight.data<T>();
  const T* pb = bias.defined() ? bias.data<T>() : nullptr;
  T* py = out.data<T>();
  const int64_t plane_work = std::max<int64_t>(1, OH * OW * cg * KH * KW);
  parallel_for(0, out.size(0) * O, std::max<int64_t>(1, (int64_t{1} << 15) / plane_work),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t plane = lo; plane < hi; ++plane) {
                   const int64_t n = plane / O, o = plane % O, g = o / og;
                   const T* xg = px + (n * C + g * cg) * H * W;
                   const T* wo = pw + o * cg * KH * KW;
                   T* y = py + plane * OH * OW;
                   for (int64_t oh = 0; oh < OH; ++oh) {
                     for (int64_t ow = 0; ow < OW; ++ow) {
                       T acc = pb != nullptr ? pb[o] : T(0);
                       for (int64_t c = 0; c < cg; ++c) {
                         for (int64_t kh = 0; kh < KH; ++kh) {
                           const int64_t ih = oh * p.stride_h - p.pad_h + kh * p.dil_h;
                           if (ih < 0 || ih >= H) continue;
                           for (int64_t kw = 0; kw < KW; ++kw) {
                             const int64_t iw = ow * p.stride_w - p.pad_w + kw * p.dil_w;
                             if (iw < 0 || iw >= W) continue;
                             acc += xg[(c * H + ih) * W + iw] * wo[(c * KH + kh) * KW + kw];
                           }
                         }
                       }
                       y[oh * OW + ow] = acc;
                     }
                   }
                 }
               });
}

KILN_REGISTER_OP(with_conv_attrs(OpDef("Conv2D")
                                     .input("x")
                                     .input("weight")
                                     .input("bias", /*optional=*/true))
                     .doc("2-d convolution of NCHW x with weight [O, C / groups, kH, kW]")
                     .infer([](const InferContext& ctx) {
                       const ConvParams p = conv_params(ctx.attrs);
                       const Shape out =
                           conv_out_shape(ctx.input(0).shape, ctx.input(1).shape, ctx.input(2), p);
                       const DType dtype = result_type(ctx.inputs);
                       KILN_CHECK_DTYPE(is_floating_point(dtype))
                           << "conv2d: expected floating-point tensors, got " << dtype;
                       return MetaList{{dtype, out}};
                     })
                     .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
                       const Tensor& out = ctx.outputs[0];
                       if (out.numel() == 0) return;
                       const ConvParams p = conv_params(ctx.attrs);
                       const DType cd = compute_dtype(out.dtype());
                       const Tensor x = contiguous_as(ctx.inputs[0], cd);
                       const Tensor w = contiguous_as(ctx.inputs[1], cd);
                       const Tensor b =
                           ctx.inputs[2].defined() ? contiguous_as(ctx.inputs[2], cd) : Tensor();
                       const Tensor target =
                           out.dtype() == cd ? out : Tensor::empty(out.shape(), cd);
                       if (cd == DType::kFloat32 && x.size(1) > 0) {
                         onednn_conv(x, w, b, target, p);
                       } else if (cd == DType::kFloat32) {
                         direct_conv<float>(x, w, b, target, p);
                       } else {
                         direct_conv<double>(x, w, b, target, p);
                       }
                       if (!target.is_same(out)) copy_into(out, target);
                     })
                     .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                              const Attrs& attrs, const std::vector<Tensor>& grad_outputs) {
                       const Tensor g = grad::or_zeros(grad_outputs[0], out[0]);
                       const ConvArgs a = conv_args(attrs);
                       std::vector<Tensor> grads(3);
                       if (grad::differentiable(in[0])) {
                         grads[0] = grad::as_grad_of(
                             conv2d_backward_input(g, in[1], in[0].shape(), a.stride, a.padding,
                                                   a.dilation, a.groups),
                             in[0]);
                       }
                       if (grad::differentiable(in[1])) {
                         grads[1] = grad::as_grad_of(
                             conv2d_backward_weight(g, in[0], in[1].shape(), a.stride, a.padding,
                                                    a.dilation, a.groups),
                             in[1]);
                       }
                       if (grad::differentiable(in[2])) {
                         grads[2] = grad::as_grad_of(sum(g, {0, 2, 3}), in[2]);
                       }
                       return grads;
                     }));

}  // namespace
}  // namespace conv

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
              const std::vector<int64_t>& dilation, int64_t groups) {
  static const OpDefPtr op = OpRegistry::Instance().get("Conv2D");
  return call_op(
      *op, {x, weight, bias},
      {{"stride", stride}, {"padding", padding}, {"dilation", dilation}, {"groups", groups}})[0];
}

// Conv2DBackwardInput of x for the convolution whose output x would be: the input size is what
// conv_transpose2d's formula gives, and output_padding picks among the sizes that stride would
// map to x's (hence below stride or dilation). Its gradient rule differentiates it in x and
// weight; the bias is added after.
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                        const std::vector<int64_t>& output_padding, int64_t groups,
                        const std::vector<int64_t>& dilation) {
  KILN_CHECK_SHAPE(x.ndim() == 4) << "conv_transpose2d: expected x [N, C_in, H, W], got "
                                  << shape_str(x.shape());
  KILN_CHECK_VALUE(groups >= 1) << "conv_transpose2d: expected groups >= 1, got " << groups;
  KILN_CHECK_SHAPE(weight.ndim() == 4 && weight.size(0) == x.size(1))
      << "conv_transpose2d: expected weight [C_in = " << x.size(1)
      << ", C_out / groups, kH, kW], got " << shape_str(weight.shape());
  for (const auto& [name, v] :
       {std::pair<const char*, const std::vector<int64_t>*>{"stride", &stride},
        {"padding", &padding},
        {"output_padding", &output_padding},
        {"dilation", &dilation}}) {
    KILN_CHECK_VALUE(v->size() == 2)
        << "conv_transpose2d: expected " << name << " as 2 values, got " << v->size();
  }
  const int64_t out_channels = weight.size(1) * groups;
  Shape out_shape{x.size(0), out_channels, 0, 0};
  for (size_t d = 0; d < 2; ++d) {
    KILN_CHECK_VALUE(stride[d] >= 1 && dilation[d] >= 1 && padding[d] >= 0)
        << "conv_transpose2d: expected stride >= 1, dilation >= 1 and padding >= 0, got stride "
        << stride[d] << ", dilation " << dilation[d] << ", padding " << padding[d];
    KILN_CHECK_VALUE(output_padding[d] >= 0 &&
                     (output_padding[d] < stride[d] || output_padding[d] < dilation[d]))
        << "conv_transpose2d: expected output_padding below stride or dilation, got "
        << output_padding[d] << " (stride " << stride[d] << ", dilation " << dilation[d] << ")";
    const int64_t size = (x.size(2 + d) - 1) * stride[d] - 2 * padding[d] +
                         dilation[d] * (weight.size(2 + d) - 1) + output_padding[d] + 1;
    KILN_CHECK_SHAPE(size > 0) << "conv_transpose2d: the output would have size " << size
                               << " in dimension " << 2 + d << " for input "
                               << shape_str(x.shape());
    out_shape[2 + d] = size;
  }
  // Conv2DBackwardInput needs the convolution of its result to give x's size back. With an
  // output_padding at or past the stride (allowed below the dilation) it does not, so that call
  // computes the whole transposed convolution (no padding) and crops `padding` before and
  // padding - output_padding after (a negative crop pads zeros).
  bool direct = true;
  Shape full{x.size(0), out_channels, 0, 0};
  for (size_t d = 0; d < 2; ++d) {
    const int64_t reach = dilation[d] * (weight.size(2 + d) - 1);
    direct =
        direct && (out_shape[2 + d] + 2 * padding[d] - reach - 1) / stride[d] + 1 == x.size(2 + d);
    full[2 + d] = (x.size(2 + d) - 1) * stride[d] + reach + 1;
  }
  // A 16-bit convolution with a bias computes in float32 and rounds once, after the bias, as
  // conv2d's post-op does: added to the rounded result, the bias rounded twice (a 1000 - 1000
  // cancellation lost the 0.125 beside it).
  const bool widen = bias.defined() && compute_dtype(x.dtype()) != x.dtype();
  const Tensor xc = widen ? to(x, DType::kFloat32) : x;
  const Tensor wc = widen ? to(weight, DType::kFloat32) : weight;
  Tensor y = direct ? conv2d_backward_input(xc, wc, out_shape, stride, padding, dilation, groups)
                    : pad(conv2d_backward_input(xc, wc, full, stride, {0, 0}, dilation, groups),
                          {-padding[1], output_padding[1] - padding[1], -padding[0],
                           output_padding[0] - padding[0]});
  if (!bias.defined()) return y;
  KILN_CHECK_SHAPE(bias.shape() == Shape{out_channels})
      << "conv_transpose2d: expected bias [C_out = " << out_channels << "], got "
      << shape_str(bias.shape());
  const Tensor biased = add(y, reshape(bias, {1, out_channels, 1, 1}));
  return widen ? to(biased,
                    result_type({TensorMeta::of(x), TensorMeta::of(weight), TensorMeta::of(bias)}))
               : biased;
}

}  // namespace kiln
