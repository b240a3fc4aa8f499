// Joining and splitting: Concat (cat), Stack, Split (split, chunk).
//
// Concat and Stack promote their inputs to result_type() and never broadcast: every dimension but
// the joined one must match, and a mismatch names the tensor and the dimension. Split has a
// variable number of outputs; see Note [Split returns views] for its eager form.
#include <algorithm>
#include <cstring>

#include "kiln/functional/elementwise.h"
#include "kiln/functional/factory.h"
#include "kiln/functional/shape.h"
#include "kiln/op.h"
#include "kiln/parallel.h"
#include "ops/grad_util.h"

namespace kiln {
namespace {

// Bytes per parallel chunk of block copies: large enough that thread start-up is noise.
constexpr int64_t kCopyChunkBytes = int64_t{1} << 18;

// Writes `inputs` one after another along `dim` of the contiguous `out`. Inputs already in the
// output dtype and contiguous are copied as whole blocks (one memcpy per outer index); the rest go
// through copy_into on a narrowed view of the output, which converts and follows strides.
void concat_into(const Tensor& out, const std::vector<Tensor>& inputs, int64_t dim) {
  int64_t outer = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= out.shape()[d];
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < out.ndim(); ++d) inner *= out.shape()[d];
  const int64_t item = static_cast<int64_t>(out.itemsize());
  const int64_t out_row = out.shape()[dim] * inner * item;
  int64_t offset = 0;
  for (const Tensor& t : inputs) {
    const int64_t n = t.shape()[dim];
    if (n * inner * outer == 0) {
      offset += n;
      continue;
    }
    if (t.dtype() == out.dtype() && t.is_contiguous()) {
      const int64_t block = n * inner * item;
      const char* src = static_cast<const char*>(t.data_ptr());
      char* dst = static_cast<char*>(out.data_ptr()) + offset * inner * item;
      const int64_t grain = std::max<int64_t>(1, kCopyChunkBytes / block);
      parallel_for(0, outer, grain, [&](int64_t lo, int64_t hi) {
        for (int64_t o = lo; o < hi; ++o) {
          std::memcpy(dst + o * out_row, src + o * block, static_cast<size_t>(block));
        }
      });
    } else {
      copy_into(out.narrow(dim, offset, n), t);
    }
    offset += n;
  }
}

MetaList infer_concat(const InferContext& ctx) {
  KILN_CHECK_VALUE(ctx.num_inputs() > 0) << "Concat: expected at least one tensor, got none";
  const TensorMeta& first = ctx.input(0);
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    KILN_CHECK_SHAPE(ctx.input(i).ndim() > 0)
        << "Concat: expected tensors with at least one dimension, got a 0-d tensor at index " << i
        << " (use stack to join 0-d tensors)";
  }
  const int64_t dim = wrap_dim(ctx.attrs.get<int64_t>("dim"), first.ndim());
  Shape shape = first.shape;
  shape[dim] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const TensorMeta& t = ctx.input(i);
    KILN_CHECK_SHAPE(t.ndim() == first.ndim())
        << "Concat: expected tensor " << i << " to have " << first.ndim()
        << " dimensions like tensor 0 (shape " << shape_str(first.shape) << "), got " << t.ndim()
        << " (shape " << shape_str(t.shape) << ")";
    for (int64_t d = 0; d < first.ndim(); ++d) {
      KILN_CHECK_SHAPE(d == dim || t.shape[d] == first.shape[d])
          << "Concat: expected tensor " << i << " to have size " << first.shape[d]
          << " in dimension " << d << " like tensor 0 (shape " << shape_str(first.shape)
          << "), got " << t.shape[d] << " (shape " << shape_str(t.shape) << "); only dimension "
          << dim << " may differ";
    }
    shape[dim] += t.shape[dim];
  }
  return MetaList{{result_type(ctx.inputs), shape}};
}

MetaList infer_stack(const InferContext& ctx) {
  KILN_CHECK_VALUE(ctx.num_inputs() > 0) << "Stack: expected at least one tensor, got none";
  const TensorMeta& first = ctx.input(0);
  const int64_t dim = wrap_dim(ctx.attrs.get<int64_t>("dim"), first.ndim() + 1);
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    const TensorMeta& t = ctx.input(i);
    KILN_CHECK_SHAPE(t.ndim() == first.ndim())
        << "Stack: expected tensor " << i << " to have shape " << shape_str(first.shape)
        << " like tensor 0, got " << shape_str(t.shape) << " (" << t.ndim() << " dimensions, not "
        << first.ndim() << ")";
    for (int64_t d = 0; d < first.ndim(); ++d) {
      KILN_CHECK_SHAPE(t.shape[d] == first.shape[d])
          << "Stack: expected tensor " << i << " to have shape " << shape_str(first.shape)
          << " like tensor 0, got " << shape_str(t.shape) << " (size " << t.shape[d]
          << " in dimension " << d << ", not " << first.shape[d] << ")";
    }
  }
  Shape shape = first.shape;
  shape.insert(shape.begin() + dim, static_cast<int64_t>(ctx.num_inputs()));
  return MetaList{{result_type(ctx.inputs), shape}};
}

MetaList infer_split(const InferContext& ctx) {
  const TensorMeta& x = ctx.input(0);
  KILN_CHECK_SHAPE(x.ndim() > 0) << "Split: expected a tensor with at least one dimension, got "
                                 << "a 0-d tensor";
  const int64_t dim = wrap_dim(ctx.attrs.get<int64_t>("dim"), x.ndim());
  const auto sizes = ctx.attrs.get<std::vector<int64_t>>("sizes");
  KILN_CHECK_VALUE(!sizes.empty()) << "Split: expected at least one section size, got none";
  int64_t total = 0;
  for (int64_t s : sizes) {
    KILN_CHECK_VALUE(s >= 0) << "Split: expected non-negative section sizes, got "
                             << shape_str(sizes);
    total += s;
  }
  KILN_CHECK_SHAPE(total == x.shape[dim])
      << "Split: expected section sizes summing to " << x.shape[dim] << " (dimension " << dim
      << " of shape " << shape_str(x.shape) << "), got " << shape_str(sizes) << " summing to "
      << total;
  MetaList out;
  for (int64_t s : sizes) {
    Shape shape = x.shape;
    shape[dim] = s;
    out.push_back({x.dtype, shape});
  }
  return out;
}

// Gradient rules (see Note [Gradient rules] in ops/grad_util.h): concat and stack split g back
// into the inputs' pieces (each in its input's dtype); split concatenates the pieces' gradients,
// zeros for pieces that got none.
std::vector<Tensor> concat_grad(const std::vector<Tensor>& in, const Tensor& y, const Attrs& attrs,
                                const Tensor& g) {
  const int64_t dim = wrap_dim(attrs.get<int64_t>("dim"), y.ndim());
  std::vector<int64_t> sizes;
  for (const Tensor& t : in) sizes.push_back(t.shape()[dim]);
  const std::vector<Tensor> pieces = split(g, sizes, dim);
  std::vector<Tensor> grads;
  for (size_t i = 0; i < in.size(); ++i) grads.push_back(detail::input_grad(pieces[i], in[i]));
  return grads;
}

std::vector<Tensor> stack_grad(const std::vector<Tensor>& in, const Tensor& y, const Attrs& attrs,
                               const Tensor& g) {
  const int64_t dim = wrap_dim(attrs.get<int64_t>("dim"), y.ndim());
  const std::vector<Tensor> pieces = split(g, std::vector<int64_t>(in.size(), 1), dim);
  std::vector<Tensor> grads;
  for (size_t i = 0; i < in.size(); ++i) {
    grads.push_back(detail::input_grad(reshape(pieces[i], in[i].shape()), in[i]));
  }
  return grads;
}

std::vector<Tensor> split_grad(const std::vector<Tensor>& inputs,
                               const std::vector<Tensor>& outputs, const Attrs& attrs,
                               const std::vector<Tensor>& grad_outputs) {
  const Tensor& x = inputs[0];
  bool any = false;
  for (const Tensor& g : grad_outputs) any = any || g.defined();
  if (!any || !detail::differentiable(x)) return {Tensor()};
  std::vector<Tensor> pieces;
  for (size_t i = 0; i < outputs.size(); ++i) {
    pieces.push_back(grad_outputs[i].defined() ? grad_outputs[i] : zeros_like(outputs[i]));
  }
  return {to(cat(pieces, attrs.get<int64_t>("dim")), x.dtype())};
}

KILN_REGISTER_OP(OpDef("Concat")
                     .variadic_input("tensors")
                     .attr("dim", AttrKind::kInt, AttrValue{int64_t{0}})
                     .doc("the tensors (promoted to a common dtype) joined along `dim`")
                     .infer(infer_concat)
                     .grad(detail::one_output_rule(concat_grad))
                     .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
                       const Tensor& out = ctx.outputs[0];
                       concat_into(out, ctx.inputs,
                                   wrap_dim(ctx.attrs.get<int64_t>("dim"), out.ndim()));
                     }));

KILN_REGISTER_OP(OpDef("Stack")
                     .variadic_input("tensors")
                     .attr("dim", AttrKind::kInt, AttrValue{int64_t{0}})
                     .doc("the tensors (same shape, promoted to a common dtype) joined along a new "
                          "dimension `dim`")
                     .infer(infer_stack)
                     .grad(detail::one_output_rule(stack_grad))
                     .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
                       const Tensor& out = ctx.outputs[0];
                       const int64_t dim = wrap_dim(ctx.attrs.get<int64_t>("dim"), out.ndim());
                       std::vector<Tensor> pieces;
                       pieces.reserve(ctx.inputs.size());
                       for (const Tensor& t : ctx.inputs) pieces.push_back(t.unsqueeze(dim));
                       concat_into(out, pieces, dim);
                     }));

// Note [Split returns views]
// As in PyTorch, the pieces of split and chunk are views of x (narrow), so eager split is free and
// writes through a piece reach x. In graphs Split is an ordinary primitive whose kernel copies the
// pieces.
TensorList split_views(const std::vector<Tensor>& inputs, const Attrs& attrs) {
  const Tensor& x = inputs[0];
  const int64_t d = wrap_dim(attrs.get<int64_t>("dim"), x.ndim());
  TensorList pieces;
  int64_t offset = 0;
  for (int64_t s : attrs.get<std::vector<int64_t>>("sizes")) {
    pieces.push_back(x.narrow(d, offset, s));
    offset += s;
  }
  return pieces;
}

KILN_REGISTER_OP(OpDef("Split")
                     .input("x")
                     .attr("sizes", AttrKind::kInts)
                     .attr("dim", AttrKind::kInt, AttrValue{int64_t{0}})
                     .outputs(OpDef::kVariableOutputs)
                     .doc("consecutive pieces of x along `dim` with the given sizes")
                     .infer(infer_split)
                     .grad(split_grad)
                     .view(split_views)
                     .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
                       const Tensor& x = ctx.inputs[0];
                       const int64_t dim = wrap_dim(ctx.attrs.get<int64_t>("dim"), x.ndim());
                       int64_t offset = 0;
                       for (const Tensor& out : ctx.outputs) {
                         const int64_t n = out.shape()[dim];
                         copy_into(out, x.narrow(dim, offset, n));
                         offset += n;
                       }
                     }));

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  static const OpDefPtr op = OpRegistry::Instance().get("Concat");
  return call_op(*op, tensors, {{"dim", dim}})[0];
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  static const OpDefPtr op = OpRegistry::Instance().get("Stack");
  return call_op(*op, tensors, {{"dim", dim}})[0];
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  static const OpDefPtr op = OpRegistry::Instance().get("Split");
  return call_op(*op, {x}, {{"sizes", sizes}, {"dim", dim}});
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  KILN_CHECK_SHAPE(x.ndim() > 0) << "split: expected a tensor with at least one dimension, got "
                                 << "a 0-d tensor";
  KILN_CHECK_VALUE(split_size > 0) << "split: expected a positive split_size, got " << split_size;
  const int64_t n = x.size(dim);
  // ceil(n / split_size) pieces, at least one (an empty dimension gives one empty piece).
  const int64_t pieces = std::max<int64_t>(1, (n + split_size - 1) / split_size);
  std::vector<int64_t> sizes(static_cast<size_t>(pieces), split_size);
  sizes.back() = n - split_size * (pieces - 1);
  return split(x, sizes, dim);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  KILN_CHECK_SHAPE(x.ndim() > 0) << "chunk: expected a tensor with at least one dimension, got "
                                 << "a 0-d tensor";
  KILN_CHECK_VALUE(chunks > 0) << "chunk: expected a positive number of chunks, got " << chunks;
  const int64_t n = x.size(dim);
  // An empty dimension keeps the requested count of (empty) chunks, as torch.chunk does.
  if (n == 0) return split(x, std::vector<int64_t>(static_cast<size_t>(chunks), 0), dim);
  return split(x, n / chunks + (n % chunks != 0), dim);  // n + chunks - 1 overflowed
}

}  // namespace kiln
