// The convolutions' gradients: Conv2DBackwardInput / Conv3DBackwardInput and
// Conv2DBackwardWeight / Conv3DBackwardWeight (kiln::conv2d_backward_input, ...), on oneDNN's
// backward-data / backward-weights primitives for float32 and direct loops otherwise. See Note
// [Convolution gradients].
#include <algorithm>
#include <optional>
#include <string>
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
// A convolution's gradient (Conv2D's; Conv3D's the same with 3 in place of 2) is two registered
// ops: Conv2DBackwardInput (the gradient of x: a transposed convolution of the output gradient
// with the weight) and Conv2DBackwardWeight (the gradient of the weight: a correlation of x with
// the output gradient); the bias's is a sum. Both are linear in each operand, so their own rules
// are again Conv2D and the other backward op, and Conv2D is differentiable to any order. float32
// runs on oneDNN's backward-data and backward-weights primitives in the layouts oneDNN picks, with
// reorders as for the forward (see Note [oneDNN convolution layouts]: on plain layouts oneDNN falls
// back to gemm-based kernels, and measured here the backward-weights one took ~15x the forward's
// time); float64 (and empty problems) on the direct loops below.

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
      kind == ConvBackward::kData ? "conv_backward_data.f32" : "conv_backward_weights.f32";
  return onednn::get_or_create<ConvBackwardEntry>(conv_key(name, x, w, out, p), [&] {
    using tag = dnnl::memory::format_tag;
    const auto f32 = dnnl::memory::data_type::f32;
    const auto alg = dnnl::algorithm::convolution_direct;
    const dnnl::engine& eng = onednn::engine();
    const ConvDims d = conv_dims(x, w, out, p);
    auto e = std::make_shared<ConvBackwardEntry>();
    e->user_src_md = dnnl::memory::desc(d.src, f32, d.data_tag);
    e->user_weights_md = dnnl::memory::desc(d.weights, f32, d.weights_tag);
    e->user_dst_md = dnnl::memory::desc(d.dst, f32, d.data_tag);
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
  const Volume v = volume_of(dx.shape(), weight.shape(), grad.shape(), p);
  const int64_t C = dx.size(1), O = grad.size(1);
  const int64_t cg = weight.size(1), og = O / p.groups;
  const int64_t in_size = v.in_size(), out_size = v.out_size(), taps = v.kernel_size();
  const T* pg = grad.data<T>();
  const T* pw = weight.data<T>();
  T* px = dx.data<T>();
  const int64_t plane_work = std::max<int64_t>(1, og * out_size * taps);
  parallel_for(0, dx.size(0) * C, std::max<int64_t>(1, (int64_t{1} << 15) / plane_work),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t plane = lo; plane < hi; ++plane) {
                   const int64_t n = plane / C, c = plane % C, g0 = (c / cg) * og;
                   T* x = px + plane * in_size;
                   std::fill(x, x + in_size, T(0));
                   for (int64_t o = g0; o < g0 + og; ++o) {
                     const T* gp = pg + (n * O + o) * out_size;
                     const T* wp = pw + (o * cg + c % cg) * taps;
                     for (int64_t position = 0; position < out_size; ++position) {
                       const T gv = gp[position];
                       for_each_tap(v, position,
                                    [&](int64_t tap, int64_t at) { x[at] += gv * wp[tap]; });
                     }
                   }
                 }
               });
}

// dw[o, ci, taps] = sum over n and the output positions of grad[n, o] * x[n, group(o) * cg + ci]
// at the position the tap reads. One thread per (o, ci) kernel plane.
template <typename T>
void direct_conv_backward_weight(const Tensor& grad, const Tensor& x, const Tensor& dw,
                                 const ConvParams& p) {
  const Volume v = volume_of(x.shape(), dw.shape(), grad.shape(), p);
  const int64_t N = x.size(0), C = x.size(1), O = grad.size(1);
  const int64_t cg = dw.size(1), og = O / p.groups;
  const int64_t in_size = v.in_size(), out_size = v.out_size(), taps = v.kernel_size();
  const T* pg = grad.data<T>();
  const T* px = x.data<T>();
  T* pw = dw.data<T>();
  const int64_t plane_work = std::max<int64_t>(1, N * out_size * taps);
  parallel_for(0, O * cg, std::max<int64_t>(1, (int64_t{1} << 15) / plane_work),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t plane = lo; plane < hi; ++plane) {
                   const int64_t o = plane / cg, c = (o / og) * cg + plane % cg;
                   T* w = pw + plane * taps;
                   std::fill(w, w + taps, T(0));
                   for (int64_t n = 0; n < N; ++n) {
                     const T* gp = pg + (n * O + o) * out_size;
                     const T* xp = px + (n * C + c) * in_size;
                     for (int64_t position = 0; position < out_size; ++position) {
                       const T gv = gp[position];
                       for_each_tap(v, position,
                                    [&](int64_t tap, int64_t at) { w[tap] += gv * xp[at]; });
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

// The shape attribute (input_size or weight_size) of a backward op of `rank` spatial
// dimensions, checked.
Shape size_attr(const std::string& op, size_t rank, const Attrs& attrs, const char* name) {
  const std::vector<int64_t> size = attrs.get<std::vector<int64_t>>(name);
  KILN_CHECK_SHAPE(size.size() == rank + 2 &&
                   std::all_of(size.begin(), size.end(), [](int64_t d) { return d >= 0; }))
      << op << ": expected " << name << " of " << (rank == 3 ? "five" : "four")
      << " non-negative sizes, got " << shape_str(size);
  return Shape(size.begin(), size.end());
}

// The backward op of `kind` for `rank` spatial dimensions: Conv2DBackwardInput, ...
std::string backward_op_name(ConvBackward kind, size_t rank) {
  return std::string("Conv") + (rank == 3 ? "3" : "2") +
         (kind == ConvBackward::kData ? "DBackwardInput" : "DBackwardWeight");
}

// Its name in errors: conv2d_backward_input, ...
std::string backward_error_name(ConvBackward kind, size_t rank) {
  return std::string(conv_name(rank)) +
         (kind == ConvBackward::kData ? "_backward_input" : "_backward_weight");
}

// Infers a backward op of `kind`: its result has x's shape (kData) or the weight's (kWeights),
// and the forward problem of x and the weight must give grad's shape.
MetaList conv_backward_infer(ConvBackward kind, size_t rank, const InferContext& ctx) {
  const std::string op = backward_error_name(kind, rank);
  const bool data = kind == ConvBackward::kData;
  const Shape x = data ? size_attr(op, rank, ctx.attrs, "input_size") : ctx.input(1).shape;
  const Shape w = data ? ctx.input(1).shape : size_attr(op, rank, ctx.attrs, "weight_size");
  const ConvParams p = conv_params(ctx.attrs, rank);
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
  return MetaList{{dtype, data ? x : w}};
}

// Runs a backward kernel in the compute dtype of the output (as the forward op's kernel does).
void conv_backward_kernel(ConvBackward kind, size_t rank, KernelContext& ctx) {
  const Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  const ConvParams p = conv_params(ctx.attrs, rank);
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

// A backward op of `kind` and `rank`. Each is linear in each operand (see Note [Convolution
// gradients]): the input gradient's rule is the forward op (in its grad_output) and the weight
// gradient (in its weight), the weight gradient's the forward op (in x) and the input gradient
// (in grad_output).
OpDef conv_backward_op(ConvBackward kind, size_t rank) {
  const bool data = kind == ConvBackward::kData;
  OpDef def(backward_op_name(kind, rank));
  def.input("grad_output")
      .input(data ? "weight" : "x")
      .attr(data ? "input_size" : "weight_size", AttrKind::kInts);
  with_conv_attrs(def, rank)
      .doc(data ? "The gradient of a convolution's x (of shape input_size) from its output "
                  "gradient and weight"
                : "The gradient of a convolution's weight (of shape weight_size) from its output "
                  "gradient and x")
      .infer([kind, rank](const InferContext& ctx) { return conv_backward_infer(kind, rank, ctx); })
      .kernel(DeviceType::kCPU,
              [kind, rank](KernelContext& ctx) { conv_backward_kernel(kind, rank, ctx); })
      .grad([data, rank](const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                         const Attrs& attrs, const std::vector<Tensor>& grad_outputs) {
        const Tensor g = grad::or_zeros(grad_outputs[0], out[0]);
        const ConvParams p = conv_params(attrs, rank);
        std::vector<Tensor> grads(2);
        if (grad::differentiable(in[0])) {  // grad_output
          grads[0] = grad::as_grad_of(data ? convolution(rank, g, in[1], Tensor(), p)
                                           : convolution(rank, in[1], g, Tensor(), p),
                                      in[0]);
        }
        if (grad::differentiable(in[1])) {  // the weight (data) or x
          grads[1] =
              grad::as_grad_of(data ? convolution_backward_weight(rank, in[0], g, in[1].shape(), p)
                                    : convolution_backward_input(rank, in[0], g, in[1].shape(), p),
                               in[1]);
        }
        return grads;
      });
  return def;
}

KILN_REGISTER_OP(conv_backward_op(ConvBackward::kData, 2));
KILN_REGISTER_OP(conv_backward_op(ConvBackward::kWeights, 2));
KILN_REGISTER_OP(conv_backward_op(ConvBackward::kData, 3));
KILN_REGISTER_OP(conv_backward_op(ConvBackward::kWeights, 3));

// The backward op of `kind` and `rank` called on (grad_output, other) with `size` its result's.
Tensor call_backward(ConvBackward kind, size_t rank, const Tensor& grad_output, const Tensor& other,
                     const Shape& size, const ConvParams& p) {
  static const OpDefPtr ops[2][2] = {
      {OpRegistry::Instance().get(backward_op_name(ConvBackward::kData, 2)),
       OpRegistry::Instance().get(backward_op_name(ConvBackward::kWeights, 2))},
      {OpRegistry::Instance().get(backward_op_name(ConvBackward::kData, 3)),
       OpRegistry::Instance().get(backward_op_name(ConvBackward::kWeights, 3))}};
  Attrs attrs = conv_attrs(p);
  attrs.set(kind == ConvBackward::kData ? "input_size" : "weight_size",
            std::vector<int64_t>(size.begin(), size.end()));
  return call_op(*ops[rank - 2][kind == ConvBackward::kData ? 0 : 1], {grad_output, other},
                 attrs)[0];
}

}  // namespace

Tensor convolution_backward_input(size_t rank, const Tensor& grad_output, const Tensor& weight,
                                  const Shape& input_size, const ConvParams& p) {
  return call_backward(ConvBackward::kData, rank, grad_output, weight, input_size, p);
}

Tensor convolution_backward_weight(size_t rank, const Tensor& grad_output, const Tensor& x,
                                   const Shape& weight_size, const ConvParams& p) {
  return call_backward(ConvBackward::kWeights, rank, grad_output, x, weight_size, p);
}

}  // namespace conv

Tensor conv2d_backward_input(const Tensor& grad_output, const Tensor& weight,
                             const Shape& input_size, const std::vector<int64_t>& stride,
                             const std::vector<int64_t>& padding,
                             const std::vector<int64_t>& dilation, int64_t groups) {
  return conv::convolution_backward_input(2, grad_output, weight, input_size,
                                          {stride, padding, dilation, groups});
}

Tensor conv3d_backward_input(const Tensor& grad_output, const Tensor& weight,
                             const Shape& input_size, const std::vector<int64_t>& stride,
                             const std::vector<int64_t>& padding,
                             const std::vector<int64_t>& dilation, int64_t groups) {
  return conv::convolution_backward_input(3, grad_output, weight, input_size,
                                          {stride, padding, dilation, groups});
}

Tensor conv2d_backward_weight(const Tensor& grad_output, const Tensor& x,
                              const Shape& weight_size, const std::vector<int64_t>& stride,
                              const std::vector<int64_t>& padding,
                              const std::vector<int64_t>& dilation, int64_t groups) {
  return conv::convolution_backward_weight(2, grad_output, x, weight_size,
                                           {stride, padding, dilation, groups});
}

Tensor conv3d_backward_weight(const Tensor& grad_output, const Tensor& x, const Shape& weight_size,
                              const std::vector<int64_t>& stride,
                              const std::vector<int64_t>& padding,
                              const std::vector<int64_t>& dilation, int64_t groups) {
  return conv::convolution_backward_weight(3, grad_output, x, weight_size,
                                           {stride, padding, dilation, groups});
}

}  // namespace kiln
