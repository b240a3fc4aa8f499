// Conv2D and Conv3D (kiln::conv2d, kiln::conv3d): 2-d and 3-d convolution (cross-correlation, as
// in PyTorch) over NCHW / NCDHW input with stride, zero padding, dilation and groups, and the
// transposed convolutions built on their input gradient (kiln::conv_transpose2d / 3d).
//
// One implementation serves both ranks (the ops differ only in their number of spatial
// dimensions): float32 runs on oneDNN's convolution primitive; float16/bfloat16 are converted to
// float32 and rounded once; float64 runs a direct parallel loop. See Note [oneDNN convolution
// layouts]. The backward ops are in conv_backward.cc; what both use is declared in conv.h.
#include "ops/conv.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/autocast.h"
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
// oneDNN's fastest convolutions (brgconv, jit avx512) want blocked layouts (nChw16c, nCdhw16c
// and friends). Kiln's tensors are plain NCHW / NCDHW, so the primitive is created with format
// `any` and Kiln reorders the input, weights and output between the two when oneDNN asks for
// another layout; that costs a pass over each tensor but halves the time of a typical 3x3 layer
// on AVX-512. All of it (the convolution and the reorders) is cached per problem (see Note
// [Primitive cache]).

const char* conv_name(size_t rank) { return rank == 3 ? "conv3d" : "conv2d"; }

ConvParams conv_params(const Attrs& attrs, size_t rank) {
  ConvParams p{attrs.get<std::vector<int64_t>>("stride"),
               attrs.get<std::vector<int64_t>>("padding"),
               attrs.get<std::vector<int64_t>>("dilation"), attrs.get<int64_t>("groups")};
  const char* name = conv_name(rank);
  const char* count = rank == 3 ? "three" : "two";
  // At most 2^31 - 1, as oneDNN takes them (a stride of 2^31 failed inside it) and sums of them
  // stay far from overflowing.
  const auto all_in = [rank](const std::vector<int64_t>& v, int64_t lo) {
    constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
    return v.size() == rank &&
           std::all_of(v.begin(), v.end(), [lo](int64_t e) { return e >= lo && e <= kMax; });
  };
  KILN_CHECK_VALUE(all_in(p.stride, 1))
      << name << ": expected stride of " << count << " integers in [1, 2^31 - 1], got "
      << shape_str(p.stride);
  KILN_CHECK_VALUE(all_in(p.padding, 0))
      << name << ": expected padding of " << count << " integers in [0, 2^31 - 1], got "
      << shape_str(p.padding);
  KILN_CHECK_VALUE(all_in(p.dilation, 1))
      << name << ": expected dilation of " << count << " integers in [1, 2^31 - 1], got "
      << shape_str(p.dilation);
  KILN_CHECK_VALUE(p.groups >= 1) << name << ": expected groups >= 1, got " << p.groups;
  return p;
}

Attrs conv_attrs(const ConvParams& p) {
  return {
      {"stride", p.stride}, {"padding", p.padding}, {"dilation", p.dilation}, {"groups", p.groups}};
}

namespace {

constexpr const char* kSpatialNames[3] = {"depth", "height", "width"};

// The name of spatial dimension d of a convolution of `rank` spatial dimensions.
const char* spatial_name(size_t rank, size_t d) { return kSpatialNames[3 - rank + d]; }

}  // namespace

// [N, O, spatial...] for x [N, C, spatial...] and weight [O, C / groups, kernel...].
Shape conv_out_shape(const Shape& x, const Shape& w, const TensorMeta& bias, const ConvParams& p) {
  const size_t rank = p.rank();
  const char* name = conv_name(rank);
  KILN_CHECK_SHAPE(x.size() == rank + 2)
      << name << ": expected x of shape " << (rank == 3 ? "[N, C, D, H, W]" : "[N, C, H, W]")
      << ", got " << shape_str(x);
  KILN_CHECK_SHAPE(w.size() == rank + 2)
      << name << ": expected weight of shape [out_channels, in_channels / groups, "
      << (rank == 3 ? "kD, kH, kW" : "kH, kW") << "], got " << shape_str(w);
  KILN_CHECK_SHAPE(w[1] * p.groups == x[1])
      << name << ": x has shape " << shape_str(x) << " and weight has shape " << shape_str(w)
      << "; expected weight.shape[1] * groups == x.shape[1], got " << w[1] << " * " << p.groups
      << " and " << x[1];
  KILN_CHECK_SHAPE(std::all_of(w.begin() + 2, w.end(), [](int64_t k) { return k >= 1; }))
      << name << ": expected a kernel of at least " << (rank == 3 ? "1 x 1 x 1" : "1 x 1")
      << ", got weight of shape " << shape_str(w);
  KILN_CHECK_SHAPE(w[0] >= 1)  // as PyTorch
      << name << ": expected at least one output channel, got weight of shape " << shape_str(w);
  KILN_CHECK_SHAPE(w[0] % p.groups == 0)
      << name << ": expected out_channels (weight.shape[0] = " << w[0] << ") divisible by groups ("
      << p.groups << ")";
  KILN_CHECK_SHAPE(!bias.defined || bias.shape == Shape{w[0]})
      << name << ": weight has shape " << shape_str(w) << "; expected bias of shape [" << w[0]
      << "], got " << shape_str(bias.shape);
  Shape out{x[0], w[0]};
  for (size_t d = 0; d < rank; ++d) {
    const int64_t padded = x[2 + d] + 2 * p.padding[d];
    const int64_t span = p.dilation[d] * (w[2 + d] - 1) + 1;
    KILN_CHECK_SHAPE(padded >= span)
        << name << ": expected the padded input " << spatial_name(rank, d) << " (" << padded
        << ") to be at least the dilated kernel " << spatial_name(rank, d) << " (" << span << ")";
    out.push_back((padded - span) / p.stride[d] + 1);
  }
  return out;
}

OpDef& with_conv_attrs(OpDef& def, size_t rank) {
  return def.attr("stride", AttrKind::kInts, std::vector<int64_t>(rank, 1))
      .attr("padding", AttrKind::kInts, std::vector<int64_t>(rank, 0))
      .attr("dilation", AttrKind::kInts, std::vector<int64_t>(rank, 1))
      .attr("groups", AttrKind::kInt, int64_t{1});
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
  using tag = dnnl::memory::format_tag;
  const size_t rank = p.rank();
  ConvDims d;
  d.src.assign(x.begin(), x.end());
  d.dst.assign(out.begin(), out.end());
  d.weights.assign(w.begin(), w.end());
  d.data_tag = rank == 3 ? tag::ncdhw : tag::nchw;
  d.weights_tag = rank == 3 ? tag::oidhw : tag::oihw;
  if (p.groups > 1) {
    d.weights.insert(d.weights.begin(), p.groups);
    d.weights[1] = w[0] / p.groups;
    d.weights_tag = rank == 3 ? tag::goidhw : tag::goihw;
  }
  for (size_t i = 0; i < rank; ++i) {
    d.strides.push_back(p.stride[i]);
    d.dilates.push_back(p.dilation[i] - 1);
    d.pad_l.push_back(p.padding[i]);
    // padding_r makes oneDNN's output-size formula give exactly `out` (it may be negative when
    // the stride skips the last rows).
    d.pad_r.push_back((out[2 + i] - 1) * p.stride[i] + (w[2 + i] - 1) * p.dilation[i] + 1 -
                      x[2 + i] - p.padding[i]);
  }
  return d;
}

onednn::PrimitiveKey conv_key(const char* kind, const Shape& x, const Shape& w, const Shape& out,
                              const ConvParams& p) {
  onednn::PrimitiveKey key(kind);
  key.add(x).add(w).add(out).add(p.stride).add(p.padding).add(p.dilation).add(p.groups);
  return key;
}

Volume volume_of(const Shape& x, const Shape& w, const Shape& out, const ConvParams& p) {
  Volume v;
  const size_t skip = 3 - p.rank();  // the leading dimensions of size 1 (a 2-d problem's depth)
  for (size_t d = 0; d < 3; ++d) {
    const bool real = d >= skip;
    const size_t i = d - skip;
    v.in[d] = real ? x[2 + i] : 1;
    v.out[d] = real ? out[2 + i] : 1;
    v.kernel[d] = real ? w[2 + i] : 1;
    v.stride[d] = real ? p.stride[i] : 1;
    v.padding[d] = real ? p.padding[i] : 0;
    v.dilation[d] = real ? p.dilation[i] : 1;
  }
  return v;
}

// The ops, inside conv so that its helpers need no qualification.
namespace {

// Note [Pointwise convolutions on plain layouts]
// A 1x1 convolution without padding is a matrix product over the channels, which oneDNN runs as
// one GEMM on plain NCHW / NCDHW data (its gemm:jit implementation), without reorders. The
// blocked kernels need the input and the output reordered, a pass over each, which a pointwise
// convolution's small amount of arithmetic per element cannot hide unless the channels are many:
// measured on AVX-512 (two threads), [16, 64, 64, 64] * 64x64 took 13.2 ms blocked and 3.0 ms
// plain, the 3-d [4, 64, 16, 32, 32] 16.8 and 3.7 ms, [8, 256, 28, 28] -> 128 2.5 and 1.9 ms,
// but [32, 512, 7, 7] -> 512 4.5 ms blocked and 5.6 ms plain. So a pointwise forward stays on
// plain layouts while C_in * C_out / (C_in + C_out), the arithmetic per element reordered, is
// below 128.
bool pointwise_on_plain_layouts(const Shape& w, const ConvParams& p) {
  const bool pointwise =
      p.groups == 1 && std::all_of(w.begin() + 2, w.end(), [](int64_t k) { return k == 1; }) &&
      std::all_of(p.padding.begin(), p.padding.end(), [](int64_t pad) { return pad == 0; });
  return pointwise && w[0] * w[1] < 128 * (w[0] + w[1]);
}

struct ConvEntry {
  dnnl::convolution_forward prim;
  dnnl::memory::desc src_md, weights_md, dst_md, bias_md;        // what the primitive wants
  dnnl::memory::desc scratchpad_md;
  dnnl::memory::desc user_src_md, user_weights_md, user_dst_md;  // Kiln's plain layouts
  std::optional<dnnl::reorder> src_reorder, weights_reorder, dst_reorder;
};

std::shared_ptr<const ConvEntry> conv_primitive(const Shape& x, const Shape& w, const Shape& out,
                                                bool has_bias, const ConvParams& p) {
  onednn::PrimitiveKey key = conv_key("conv.f32", x, w, out, p);
  key.add(has_bias ? 1 : 0);
  return onednn::get_or_create<ConvEntry>(key, [&] {
    using tag = dnnl::memory::format_tag;
    const auto f32 = dnnl::memory::data_type::f32;
    auto e = std::make_shared<ConvEntry>();
    const ConvDims d = conv_dims(x, w, out, p);
    e->user_src_md = dnnl::memory::desc(d.src, f32, d.data_tag);
    e->user_weights_md = dnnl::memory::desc(d.weights, f32, d.weights_tag);
    e->user_dst_md = dnnl::memory::desc(d.dst, f32, d.data_tag);
    e->bias_md = dnnl::memory::desc({out[1]}, f32, tag::a);
    // oneDNN picks the layouts (Note [oneDNN convolution layouts]) unless they stay plain (Note
    // [Pointwise convolutions on plain layouts]).
    const tag data = pointwise_on_plain_layouts(w, p) ? d.data_tag : tag::any;
    const dnnl::memory::desc any_src(d.src, f32, data), any_w(d.weights, f32, tag::any),
        any_dst(d.dst, f32, data);
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

// x, weight, bias: contiguous float32; out: contiguous float32 [N, O, spatial...].
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

// The direct loop (float64, and problems oneDNN cannot describe such as zero input channels):
// one thread per output plane (n, o) of the volume.
template <typename T>
void direct_conv(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out,
                 const ConvParams& p) {
  const Volume v = volume_of(x.shape(), weight.shape(), out.shape(), p);
  const int64_t C = x.size(1), O = out.size(1);
  const int64_t cg = weight.size(1), og = O / p.groups;
  const int64_t in_size = v.in_size(), out_size = v.out_size(), taps = v.kernel_size();
  const T* px = x.data<T>();
  const T* pw = weight.data<T>();
  const T* pb = bias.defined() ? bias.data<T>() : nullptr;
  T* py = out.data<T>();
  const int64_t plane_work = std::max<int64_t>(1, out_size * cg * taps);
  parallel_for(0, out.size(0) * O, std::max<int64_t>(1, (int64_t{1} << 15) / plane_work),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t plane = lo; plane < hi; ++plane) {
                   const int64_t n = plane / O, o = plane % O, g = o / og;
                   const T* xg = px + (n * C + g * cg) * in_size;
                   const T* wo = pw + o * cg * taps;
                   T* y = py + plane * out_size;
                   for (int64_t position = 0; position < out_size; ++position) {
                     T acc = pb != nullptr ? pb[o] : T(0);
                     for_each_tap(v, position, [&](int64_t tap, int64_t at) {
                       for (int64_t c = 0; c < cg; ++c) {
                         acc += xg[c * in_size + at] * wo[c * taps + tap];
                       }
                     });
                     y[position] = acc;
                   }
                 }
               });
}

// Conv2D (rank 2) or Conv3D (rank 3).
OpDef conv_op(size_t rank) {
  OpDef def(rank == 3 ? "Conv3D" : "Conv2D");
  def.input("x").input("weight").input("bias", /*optional=*/true);
  with_conv_attrs(def, rank)
      .doc(rank == 3 ? "3-d convolution of NCDHW x with weight [O, C / groups, kD, kH, kW]"
                     : "2-d convolution of NCHW x with weight [O, C / groups, kH, kW]")
      .infer([rank](const InferContext& ctx) {
        const ConvParams p = conv_params(ctx.attrs, rank);
        const Shape out = conv_out_shape(ctx.input(0).shape, ctx.input(1).shape, ctx.input(2), p);
        const DType dtype = result_type(ctx.inputs);
        KILN_CHECK_DTYPE(is_floating_point(dtype))
            << conv_name(rank) << ": expected floating-point tensors, got " << dtype;
        return MetaList{{dtype, out}};
      })
      .kernel(DeviceType::kCPU,
              [rank](KernelContext& ctx) {
                const Tensor& out = ctx.outputs[0];
                if (out.numel() == 0) return;
                const ConvParams p = conv_params(ctx.attrs, rank);
                const DType cd = compute_dtype(out.dtype());
                const Tensor x = contiguous_as(ctx.inputs[0], cd);
                const Tensor w = contiguous_as(ctx.inputs[1], cd);
                const Tensor b =
                    ctx.inputs[2].defined() ? contiguous_as(ctx.inputs[2], cd) : Tensor();
                const Tensor target = out.dtype() == cd ? out : Tensor::empty(out.shape(), cd);
                if (cd == DType::kFloat32 && x.size(1) > 0) {
                  onednn_conv(x, w, b, target, p);
                } else if (cd == DType::kFloat32) {
                  direct_conv<float>(x, w, b, target, p);
                } else {
                  direct_conv<double>(x, w, b, target, p);
                }
                if (!target.is_same(out)) copy_into(out, target);
              })
      .grad([rank](const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                   const Attrs& attrs, const std::vector<Tensor>& grad_outputs) {
        const Tensor g = grad::or_zeros(grad_outputs[0], out[0]);
        const ConvParams p = conv_params(attrs, rank);
        std::vector<Tensor> grads(3);
        if (grad::differentiable(in[0])) {
          grads[0] =
              grad::as_grad_of(convolution_backward_input(rank, g, in[1], in[0].shape(), p), in[0]);
        }
        if (grad::differentiable(in[1])) {
          grads[1] = grad::as_grad_of(convolution_backward_weight(rank, g, in[0], in[1].shape(), p),
                                      in[1]);
        }
        if (grad::differentiable(in[2])) {
          std::vector<int64_t> batch_and_spatial{0};
          for (size_t d = 0; d < rank; ++d) batch_and_spatial.push_back(2 + int64_t(d));
          grads[2] = grad::as_grad_of(sum(g, batch_and_spatial), in[2]);
        }
        return grads;
      });
  return def;
}

KILN_REGISTER_OP(conv_op(2));
KILN_REGISTER_OP(conv_op(3));

}  // namespace

Tensor convolution(size_t rank, const Tensor& x, const Tensor& weight, const Tensor& bias,
                   const ConvParams& p) {
  static const OpDefPtr ops[2] = {OpRegistry::Instance().get("Conv2D"),
                                  OpRegistry::Instance().get("Conv3D")};
  return call_op(*ops[rank - 2], {x, weight, bias}, conv_attrs(p))[0];
}

namespace {

// Conv*DBackwardInput of x for the convolution whose output x would be: the input size is what
// the transposed convolution's formula gives, and output_padding picks among the sizes that
// stride would map to x's (hence below stride or dilation). Its gradient rule differentiates it
// in x and weight; the bias is added after.
Tensor transposed_convolution(size_t rank, const Tensor& x, const Tensor& weight,
                              const Tensor& bias, const ConvParams& p,
                              const std::vector<int64_t>& output_padding) {
  const char* name = rank == 3 ? "conv_transpose3d" : "conv_transpose2d";
  const char* layout = rank == 3 ? "D, H, W" : "H, W";
  const char* kernel = rank == 3 ? "kD, kH, kW" : "kH, kW";
  KILN_CHECK_SHAPE(x.ndim() == int64_t(rank) + 2)
      << name << ": expected x [N, C_in, " << layout << "], got " << shape_str(x.shape());
  KILN_CHECK_VALUE(p.groups >= 1) << name << ": expected groups >= 1, got " << p.groups;
  KILN_CHECK_SHAPE(weight.ndim() == int64_t(rank) + 2 && weight.size(0) == x.size(1))
      << name << ": expected weight [C_in = " << x.size(1) << ", C_out / groups, " << kernel
      << "], got " << shape_str(weight.shape());
  for (const auto& [what, v] :
       {std::pair<const char*, const std::vector<int64_t>*>{"stride", &p.stride},
        {"padding", &p.padding},
        {"output_padding", &output_padding},
        {"dilation", &p.dilation}}) {
    KILN_CHECK_VALUE(v->size() == rank)
        << name << ": expected " << what << " as " << rank << " values, got " << v->size();
  }
  const int64_t out_channels = weight.size(1) * p.groups;
  Shape out_shape{x.size(0), out_channels};
  for (size_t d = 0; d < rank; ++d) {
    KILN_CHECK_VALUE(p.stride[d] >= 1 && p.dilation[d] >= 1 && p.padding[d] >= 0)
        << name << ": expected stride >= 1, dilation >= 1 and padding >= 0, got stride "
        << p.stride[d] << ", dilation " << p.dilation[d] << ", padding " << p.padding[d];
    KILN_CHECK_VALUE(output_padding[d] >= 0 &&
                     (output_padding[d] < p.stride[d] || output_padding[d] < p.dilation[d]))
        << name << ": expected output_padding below stride or dilation, got " << output_padding[d]
        << " (stride " << p.stride[d] << ", dilation " << p.dilation[d] << ")";
    const int64_t size = (x.size(2 + d) - 1) * p.stride[d] - 2 * p.padding[d] +
                         p.dilation[d] * (weight.size(2 + d) - 1) + output_padding[d] + 1;
    KILN_CHECK_SHAPE(size > 0) << name << ": the output would have size " << size
                               << " in dimension " << 2 + d << " for input "
                               << shape_str(x.shape());
    out_shape.push_back(size);
  }
  // The backward-input op needs the convolution of its result to give x's size back. With an
  // output_padding at or past the stride (allowed below the dilation) it does not, so that call
  // computes the whole transposed convolution (no padding) and crops `padding` before and
  // padding - output_padding after (a negative crop pads zeros).
  bool direct = true;
  Shape full{x.size(0), out_channels};
  std::vector<int64_t> crops;  // pad()'s (before, after) pairs, from the last dimension
  for (size_t d = 0; d < rank; ++d) {
    const int64_t reach = p.dilation[d] * (weight.size(2 + d) - 1);
    direct = direct &&
             (out_shape[2 + d] + 2 * p.padding[d] - reach - 1) / p.stride[d] + 1 == x.size(2 + d);
    full.push_back((x.size(2 + d) - 1) * p.stride[d] + reach + 1);
    const size_t last = rank - 1 - d;
    crops.insert(crops.end(), {-p.padding[last], output_padding[last] - p.padding[last]});
  }
  // A 16-bit convolution with a bias computes in float32 and rounds once, after the bias, as
  // the forward op's post-op does: added to the rounded result, the bias rounded twice (a
  // 1000 - 1000 cancellation lost the 0.125 beside it).
  const bool widen = bias.defined() && compute_dtype(x.dtype()) != x.dtype();
  const Tensor xc = widen ? to(x, DType::kFloat32) : x;
  const Tensor wc = widen ? to(weight, DType::kFloat32) : weight;
  ConvParams unpadded = p;
  unpadded.padding.assign(rank, 0);
  Tensor y = direct ? convolution_backward_input(rank, xc, wc, out_shape, p)
                    : pad(convolution_backward_input(rank, xc, wc, full, unpadded), crops);
  if (!bias.defined()) return y;
  KILN_CHECK_SHAPE(bias.shape() == Shape{out_channels})
      << name << ": expected bias [C_out = " << out_channels << "], got "
      << shape_str(bias.shape());
  Shape bias_shape(rank + 2, 1);
  bias_shape[1] = out_channels;
  // Under autocast the backward-input op ran in the lower precision, and the bias joins it there
  // (a PyTorch transposed convolution takes it in as one of the op's inputs).
  const AutocastState amp = autocast_state();
  const bool cast_bias = amp.enabled && y.dtype() == amp.dtype && bias.dtype() != DType::kFloat64;
  const Tensor biased = add(y, reshape(cast_bias ? to(bias, y.dtype()) : bias, bias_shape));
  return widen ? to(biased,
                    result_type({TensorMeta::of(x), TensorMeta::of(weight), TensorMeta::of(bias)}))
               : biased;
}

}  // namespace
}  // namespace conv

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
              const std::vector<int64_t>& dilation, int64_t groups) {
  return conv::convolution(2, x, weight, bias, {stride, padding, dilation, groups});
}

Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias,
              const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
              const std::vector<int64_t>& dilation, int64_t groups) {
  return conv::convolution(3, x, weight, bias, {stride, padding, dilation, groups});
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                        const std::vector<int64_t>& output_padding, int64_t groups,
                        const std::vector<int64_t>& dilation) {
  return conv::transposed_convolution(2, x, weight, bias, {stride, padding, dilation, groups},
                                      output_padding);
}

Tensor conv_transpose3d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                        const std::vector<int64_t>& output_padding, int64_t groups,
                        const std::vector<int64_t>& dilation) {
  return conv::transposed_convolution(3, x, weight, bias, {stride, padding, dilation, groups},
                                      output_padding);
}

}  // namespace kiln
