// View primitives: Reshape, Transpose, Permute, Expand, Squeeze, Unsqueeze, Flatten, Contiguous,
// AsStrided, and AsStridedScatter (the copy that writes an AsStrided view: its gradient).
//
// See Note [View ops]: eagerly each returns a view sharing its input's storage (through the Tensor
// methods in src/core/tensor.cc); in graphs each is an ordinary primitive whose CPU kernel writes a
// contiguous copy.
#include <algorithm>
#include <utility>
#include <vector>

#include "kiln/functional/elementwise.h"
#include "kiln/functional/factory.h"
#include "kiln/functional/shape.h"
#include "kiln/op.h"
#include "ops/grad_util.h"

namespace kiln {
namespace {

// Note [View ops]
// The ViewFn and `infer` must agree on the output shape, and neither may touch data. Both call
// the same view method: `infer` on a metadata-only tensor (contiguous strides, no storage), for
// which every method is pure shape arithmetic and always gives a view. So eager results, graph
// shapes and error messages cannot drift apart. A method never copies: where the input's strides
// cannot express the result (reshape of a transposed tensor), it returns an undefined tensor, the
// ViewFn declines, and the op's kernel writes a contiguous copy instead (see plan_op).

// Applies one view method to a tensor: the view, or an undefined tensor when a copy is needed.
using ViewMethod = Tensor (*)(const Tensor& x, const Attrs& attrs);

MetaList infer_view(const InferContext& ctx, ViewMethod method) {
  const TensorMeta& x = ctx.input(0);
  return MetaList{{x.dtype, method(Tensor(x.dtype, x.shape), ctx.attrs).shape()}};
}

ViewFn view_fn(ViewMethod method) {
  return [method](const std::vector<Tensor>& inputs, const Attrs& attrs) {
    Tensor view = method(inputs[0], attrs);
    TensorList views;
    if (view.defined()) views.push_back(std::move(view));
    return views;
  };
}

// Graph-mode kernel for views that reorder or broadcast elements: copy the eager view.
KernelFn copy_of_view(ViewMethod method) {
  return
      [method](KernelContext& ctx) { copy_into(ctx.outputs[0], method(ctx.inputs[0], ctx.attrs)); };
}

// Graph-mode kernel for views that keep row-major order (reshape, flatten, contiguous): the
// contiguous output viewed with the input's shape receives the elements in one copy.
void copy_in_order(KernelContext& ctx) {
  copy_into(ctx.outputs[0].view(ctx.inputs[0].shape()), ctx.inputs[0]);
}

Tensor do_reshape(const Tensor& x, const Attrs& a) {
  return x.try_view(a.get<std::vector<int64_t>>("shape"));
}
Tensor do_transpose(const Tensor& x, const Attrs& a) {
  return x.transpose(a.get<int64_t>("dim0"), a.get<int64_t>("dim1"));
}
Tensor do_permute(const Tensor& x, const Attrs& a) {
  return x.permute(a.get<std::vector<int64_t>>("dims"));
}
Tensor do_expand(const Tensor& x, const Attrs& a) {
  return x.expand(a.get<std::vector<int64_t>>("shape"));
}
Tensor do_squeeze(const Tensor& x, const Attrs& a) {
  return a.is_none("dim") ? x.squeeze() : x.squeeze(a.get<int64_t>("dim"));
}
Tensor do_unsqueeze(const Tensor& x, const Attrs& a) { return x.unsqueeze(a.get<int64_t>("dim")); }
Tensor do_flatten(const Tensor& x, const Attrs& a) {
  return x.try_view(flatten_shape(x.shape(), a.get<int64_t>("start_dim"), a.get<int64_t>("end_dim")));
}
Tensor do_contiguous(const Tensor& x, const Attrs&) { return x.is_contiguous() ? x : Tensor(); }

// AsStrided reads its input as the row-major sequence of its elements, whatever its layout, so
// that the graph primitive means the same on every backend: element (i0, i1, ...) of the result
// is element offset + i0 * stride[0] + i1 * stride[1] + ... of that sequence. The jit records a
// view made by a Tensor method (x.T, x[1:], x.select(0, 2)) of a traced value this way.
// AsStrided and AsStridedScatter share the attributes naming the view: declared by
// strided_view_attrs, read as a StridedView.
OpDef& strided_view_attrs(OpDef& def) {
  return def.attr("size", AttrKind::kInts)
      .attr("stride", AttrKind::kInts)
      .attr("offset", AttrKind::kInt, AttrValue{int64_t{0}});
}

struct StridedView {
  Shape size;
  Shape stride;
  int64_t offset;

  explicit StridedView(const Attrs& a)
      : size(a.get<std::vector<int64_t>>("size")),
        stride(a.get<std::vector<int64_t>>("stride")),
        offset(a.get<int64_t>("offset")) {}
};

MetaList infer_as_strided(const InferContext& ctx) {
  const TensorMeta& x = ctx.input(0);
  const auto [size, stride, offset] = StridedView(ctx.attrs);
  KILN_CHECK_SHAPE(size.size() == stride.size())
      << "AsStrided: expected as many strides as sizes, got size " << shape_str(size)
      << " and stride " << shape_str(stride);
  int64_t last = offset;
  bool empty = false;
  for (size_t d = 0; d < size.size(); ++d) {
    KILN_CHECK_SHAPE(size[d] >= 0 && stride[d] >= 0)
        << "AsStrided: expected non-negative sizes and strides, got size " << shape_str(size)
        << " and stride " << shape_str(stride);
    empty = empty || size[d] == 0;
    if (size[d] > 0) last += (size[d] - 1) * stride[d];
  }
  KILN_CHECK_SHAPE(offset >= 0 && (empty || last < x.numel()))
      << "AsStrided: size " << shape_str(size) << ", stride " << shape_str(stride)
      << " and offset " << offset << " reach element " << last << " of an input with "
      << x.numel() << " elements";
  return MetaList{{x.dtype, size}};
}

// AsStrided of a non-contiguous x as a view of x's own memory, or an undefined tensor when its
// elements do not form a strided view of x's layout. A step of `stride` elements in the
// row-major sequence moves one index of x, dimension d's, by stride / C[d] (C: x's row-major
// strides) when C[d] <= stride < C[d] * size[d] and C[d] divides it; the view is exact when,
// per dimension of x, the offset's index plus every step the view can take stays inside the
// dimension (no carry into the next one). A select or slice of a permuted tensor (how the jit
// records x.permute(...).select(0, 1)) always passes, so it costs no copy.
Tensor as_strided_of_layout(const Tensor& x, const Shape& size, const Shape& stride,
                            int64_t offset) {
  const Shape& shape = x.shape();
  const Shape row_major = contiguous_strides(shape);
  const size_t n = shape.size();
  Shape reach(n, 0);  // per dimension of x: the largest index the view reaches
  Shape strides(size.size(), 0);
  int64_t start = x.storage_offset();
  for (size_t d = 0; d < n; ++d) {
    reach[d] = shape[d] > 0 ? (offset / row_major[d]) % shape[d] : 0;
    start += reach[d] * x.strides()[d];
  }
  for (size_t k = 0; k < size.size(); ++k) {
    if (size[k] <= 1 || stride[k] == 0) continue;
    size_t d = 0;
    while (d < n && !(shape[d] > 1 && row_major[d] <= stride[k] &&
                      stride[k] < row_major[d] * shape[d] && stride[k] % row_major[d] == 0)) {
      ++d;
    }
    if (d == n) return Tensor();
    const int64_t step = stride[k] / row_major[d];
    reach[d] += step * (size[k] - 1);
    if (reach[d] >= shape[d]) return Tensor();
    strides[k] = step * x.strides()[d];
  }
  return x.as_strided(size, strides, start);
}

Tensor do_as_strided(const Tensor& x, const Attrs& a) {
  const auto [size, stride, offset] = StridedView(a);
  if (!x.is_contiguous()) return as_strided_of_layout(x, size, stride, offset);
  return x.as_strided(size, stride, x.storage_offset() + offset);
}

void as_strided_kernel(KernelContext& ctx) {
  const Tensor x = ctx.inputs[0].contiguous();
  copy_into(ctx.outputs[0], do_as_strided(x, ctx.attrs));
}

InferFn infer_with(ViewMethod method) {
  return [method](const InferContext& ctx) { return infer_view(ctx, method); };
}

// Gradient rules (see Note [Gradient rules] in ops/grad_util.h). Views that keep the row-major
// order of the elements (reshape, squeeze, unsqueeze, flatten, contiguous) give g back in x's
// shape; the others undo their reordering, sum what they broadcast, or accumulate what they read.

std::vector<Tensor> reshape_back(const std::vector<Tensor>& in, const Tensor&, const Attrs&,
                                 const Tensor& g) {
  return {detail::input_grad(reshape(g, in[0].shape()), in[0])};
}

std::vector<Tensor> transpose_back(const std::vector<Tensor>& in, const Tensor&, const Attrs& a,
                                   const Tensor& g) {
  return {detail::input_grad(transpose(g, a.get<int64_t>("dim0"), a.get<int64_t>("dim1")), in[0])};
}

std::vector<Tensor> permute_back(const std::vector<Tensor>& in, const Tensor&, const Attrs& a,
                                 const Tensor& g) {
  const auto dims = a.get<std::vector<int64_t>>("dims");
  std::vector<int64_t> inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    inverse[static_cast<size_t>(wrap_dim(dims[i], static_cast<int64_t>(dims.size())))] =
        static_cast<int64_t>(i);
  }
  return {detail::input_grad(permute(g, inverse), in[0])};
}

std::vector<Tensor> expand_back(const std::vector<Tensor>& in, const Tensor&, const Attrs&,
                                const Tensor& g) {
  return {detail::input_grad(g, in[0])};  // summed over the broadcast dims
}

// Whether the view (size, stride) reaches no element twice: with its dims of more than one
// element in increasing stride, each stride steps past everything the dims before it reach.
bool reaches_each_element_once(const Shape& size, const Shape& stride) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  for (size_t d = 0; d < size.size(); ++d) {
    if (size[d] == 0) return true;
    if (size[d] > 1) dims.emplace_back(stride[d], size[d]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;  // the largest offset the dims so far reach
  for (const auto& [step, n] : dims) {
    if (step <= reach) return false;
    reach += step * (n - 1);
  }
  return true;
}

// Whether the view (size, stride, offset) of x's row-major elements is expand(x, size): x's dims
// aligned to the view's last ones, each of the view's size with its row-major stride, or of size 1
// and stride 0, and the view's leading dims stride 0.
bool is_expand_of(const Shape& x, const Shape& size, const Shape& stride, int64_t offset) {
  if (offset != 0 || size.size() < x.size()) return false;
  const Shape row_major = contiguous_strides(x);
  const size_t lead = size.size() - x.size();
  for (size_t d = 0; d < size.size(); ++d) {
    if (size[d] == 1) continue;
    if (d < lead || x[d - lead] == 1) {
      if (stride[d] != 0) return false;
    } else if (size[d] != x[d - lead] || stride[d] != row_major[d - lead]) {
      return false;
    }
  }
  return true;
}

// A view that reaches each element once puts g back where it came from (as_strided_scatter into
// zeros, a strided copy). An expand of x (Tensor.expand, and so repeat and tile) sums g over the
// broadcast dims, as Expand's rule does. Otherwise each output element is element p of x's
// row-major sequence, p read off the same view of 0, 1, ..., numel - 1, and the elements the view
// reads several times (stride 0, overlaps) sum their gradients: a scatter-add, 5-7x the time of
// the sum for an expand.
std::vector<Tensor> as_strided_back(const std::vector<Tensor>& in, const Tensor&, const Attrs& a,
                                    const Tensor& g) {
  const Tensor& x = in[0];
  if (!detail::differentiable(x)) return {Tensor()};
  const auto [size, stride, offset] = StridedView(a);
  if (reaches_each_element_once(size, stride)) {
    // Into a broadcast zero: the scatter's copy of it is a fill, with no zeros tensor to read.
    const Tensor zero = expand(zeros({}, g.dtype()), x.shape());
    return {to(as_strided_scatter(zero, g, size, stride, offset), x.dtype())};
  }
  if (is_expand_of(x.shape(), size, stride, offset)) return {detail::input_grad(g, x)};
  const Tensor positions =
      as_strided(reshape(arange(0, x.numel()), x.shape()), size, stride, offset);
  return {to(detail::accumulate_at(g, positions, x), x.dtype())};
}

// AsStridedScatter's: x's gradient is g with the view's elements zeroed, src's the view of g.
std::vector<Tensor> as_strided_scatter_back(const std::vector<Tensor>& in, const Tensor&,
                                            const Attrs& a, const Tensor& g) {
  const auto [size, stride, offset] = StridedView(a);
  Tensor gx, gsrc;
  if (detail::differentiable(in[0])) {
    gx = to(as_strided_scatter(g, zeros_like(in[1], g.dtype()), size, stride, offset),
            in[0].dtype());
  }
  if (detail::differentiable(in[1])) {
    gsrc = to(as_strided(g, size, stride, offset), in[1].dtype());
  }
  return {gx, gsrc};
}

KILN_REGISTER_OP(OpDef("Reshape")
                     .input("x")
                     .attr("shape", AttrKind::kInts)
                     .doc("x with a new shape (one size may be -1); a view when strides allow")
                     .infer(infer_with(do_reshape))
                     .view(view_fn(do_reshape))
                     .grad(detail::one_output_rule(reshape_back))
                     .kernel(DeviceType::kCPU, copy_in_order));

KILN_REGISTER_OP(OpDef("Transpose")
                     .input("x")
                     .attr("dim0", AttrKind::kInt)
                     .attr("dim1", AttrKind::kInt)
                     .doc("x with dimensions dim0 and dim1 swapped")
                     .infer(infer_with(do_transpose))
                     .view(view_fn(do_transpose))
                     .grad(detail::one_output_rule(transpose_back))
                     .kernel(DeviceType::kCPU, copy_of_view(do_transpose)));

KILN_REGISTER_OP(OpDef("Permute")
                     .input("x")
                     .attr("dims", AttrKind::kInts)
                     .doc("x with its dimensions reordered: output dim i is input dim dims[i]")
                     .infer(infer_with(do_permute))
                     .view(view_fn(do_permute))
                     .grad(detail::one_output_rule(permute_back))
                     .kernel(DeviceType::kCPU, copy_of_view(do_permute)));

KILN_REGISTER_OP(OpDef("Expand")
                     .input("x")
                     .attr("shape", AttrKind::kInts)
                     .doc("x broadcast to `shape` (-1 keeps a dimension)")
                     .infer(infer_with(do_expand))
                     .view(view_fn(do_expand))
                     .grad(detail::one_output_rule(expand_back))
                     .kernel(DeviceType::kCPU, copy_of_view(do_expand)));

KILN_REGISTER_OP(OpDef("Squeeze")
                     .input("x")
                     .attr("dim", AttrKind::kInt, AttrValue{std::monostate{}})
                     .doc("x without size-1 dimensions (only `dim` when given)")
                     .infer(infer_with(do_squeeze))
                     .view(view_fn(do_squeeze))
                     .grad(detail::one_output_rule(reshape_back))
                     .kernel(DeviceType::kCPU, copy_in_order));

KILN_REGISTER_OP(OpDef("Unsqueeze")
                     .input("x")
                     .attr("dim", AttrKind::kInt)
                     .doc("x with a new size-1 dimension at `dim`")
                     .infer(infer_with(do_unsqueeze))
                     .view(view_fn(do_unsqueeze))
                     .grad(detail::one_output_rule(reshape_back))
                     .kernel(DeviceType::kCPU, copy_in_order));

KILN_REGISTER_OP(OpDef("Flatten")
                     .input("x")
                     .attr("start_dim", AttrKind::kInt, AttrValue{int64_t{0}})
                     .attr("end_dim", AttrKind::kInt, AttrValue{int64_t{-1}})
                     .doc("x with dimensions start_dim..end_dim merged into one")
                     .infer(infer_with(do_flatten))
                     .view(view_fn(do_flatten))
                     .grad(detail::one_output_rule(reshape_back))
                     .kernel(DeviceType::kCPU, copy_in_order));

KILN_REGISTER_OP(OpDef("Contiguous")
                     .input("x")
                     .doc("x itself when row-major contiguous, else a contiguous copy")
                     .infer(infer_with(do_contiguous))
                     .view(view_fn(do_contiguous))
                     .grad(detail::one_output_rule(reshape_back))
                     .kernel(DeviceType::kCPU, copy_in_order));

KILN_REGISTER_OP(strided_view_attrs(OpDef("AsStrided").input("x"))
                     .doc("a strided view of x's elements in row-major order: element i of the "
                          "result is element offset + sum(i[d] * stride[d]) of x")
                     .infer(infer_as_strided)
                     .view(view_fn(do_as_strided))
                     .grad(detail::one_output_rule(as_strided_back))
                     .kernel(DeviceType::kCPU, as_strided_kernel));

KILN_REGISTER_OP(
    strided_view_attrs(OpDef("AsStridedScatter").input("x").input("src"))
        .doc("a contiguous copy of x whose elements in AsStrided(x, size, stride, offset) are "
             "src's")
        .infer([](const InferContext& ctx) {
          const MetaList view = infer_as_strided(ctx);
          const auto [size, stride, offset] = StridedView(ctx.attrs);
          KILN_CHECK_SHAPE(reaches_each_element_once(size, stride))
              << "AsStridedScatter: expected a view that reaches each element of x at most once, "
              << "got size " << shape_str(size) << " and stride " << shape_str(stride);
          const TensorMeta& src = ctx.input(1);
          KILN_CHECK_SHAPE(src.shape == view[0].shape)
              << "AsStridedScatter: expected src of the view's shape " << shape_str(view[0].shape)
              << ", got " << shape_str(src.shape);
          return MetaList{{ctx.input(0).dtype, ctx.input(0).shape}};
        })
        .grad(detail::one_output_rule(as_strided_scatter_back))
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          copy_into(out, ctx.inputs[0]);
          copy_into(do_as_strided(out, ctx.attrs), ctx.inputs[1]);
        }));

}  // namespace

Tensor as_strided(const Tensor& x, const Shape& size, const Shape& stride, int64_t offset) {
  static const OpDefPtr op = OpRegistry::Instance().get("AsStrided");
  return call_op(*op, {x}, {{"size", size}, {"stride", stride}, {"offset", offset}})[0];
}

Tensor as_strided_scatter(const Tensor& x, const Tensor& src, const Shape& size,
                          const Shape& stride, int64_t offset) {
  static const OpDefPtr op = OpRegistry::Instance().get("AsStridedScatter");
  return call_op(*op, {x, src}, {{"size", size}, {"stride", stride}, {"offset", offset}})[0];
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  static const OpDefPtr op = OpRegistry::Instance().get("Reshape");
  return call_op(*op, {x}, {{"shape", shape}})[0];
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  static const OpDefPtr op = OpRegistry::Instance().get("Transpose");
  return call_op(*op, {x}, {{"dim0", dim0}, {"dim1", dim1}})[0];
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  static const OpDefPtr op = OpRegistry::Instance().get("Permute");
  return call_op(*op, {x}, {{"dims", dims}})[0];
}

Tensor expand(const Tensor& x, const Shape& shape) {
  static const OpDefPtr op = OpRegistry::Instance().get("Expand");
  return call_op(*op, {x}, {{"shape", shape}})[0];
}

Tensor squeeze(const Tensor& x, std::optional<int64_t> dim) {
  static const OpDefPtr op = OpRegistry::Instance().get("Squeeze");
  Attrs attrs;
  if (dim) attrs.set("dim", *dim);
  return call_op(*op, {x}, attrs)[0];
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  static const OpDefPtr op = OpRegistry::Instance().get("Unsqueeze");
  return call_op(*op, {x}, {{"dim", dim}})[0];
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  static const OpDefPtr op = OpRegistry::Instance().get("Flatten");
  return call_op(*op, {x}, {{"start_dim", start_dim}, {"end_dim", end_dim}})[0];
}

Tensor contiguous(const Tensor& x) {
  static const OpDefPtr op = OpRegistry::Instance().get("Contiguous");
  return call_op(*op, {x})[0];
}

}  // namespace kiln
