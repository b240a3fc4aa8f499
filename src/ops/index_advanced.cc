// NumPy's advanced indexing: Index (x[i0, i1, ...] over the leading dims, a copy) and IndexPut
// (its in-place assignment form, x[i0, i1, ...] = values).
//
// Every index is checked before anything is written, so a failed call leaves the tensor being
// assigned to untouched; the error names the bad value, the dimension and its size.
#include <vector>

#include "kiln/functional/elementwise.h"
#include "kiln/functional/factory.h"
#include "kiln/functional/shape.h"
#include "kiln/op.h"
#include "ops/grad_util.h"
#include "ops/index_rows.h"

namespace kiln {
namespace {

using indexing::broadcasts_to;
using indexing::check_index_dtype;
using indexing::copy_row;
using indexing::gather_rows;
using indexing::load_index;
using indexing::row_layout;
using indexing::RowLayout;
using indexing::visit_itemsize;
using indexing::wrap_index;

// Index and IndexPut: the index tensors (inputs[first..]) broadcast to one shape B and address the
// leading dims of x; the result has shape B + x.shape[k:].
Shape indexed_shape(const char* op, const TensorMeta& x, const MetaList& inputs, size_t first) {
  const int64_t k = static_cast<int64_t>(inputs.size() - first);
  KILN_CHECK_INDEX(k <= x.ndim()) << op << ": too many indices for a tensor of dimension "
                                  << x.ndim() << ": got " << k << " index tensors";
  Shape b;
  for (size_t i = first; i < inputs.size(); ++i) {
    check_index_dtype(op, inputs[i]);
    b = broadcast_shapes(b, inputs[i].shape);
  }
  b.insert(b.end(), x.shape.begin() + k, x.shape.end());
  return b;
}

// The broadcast shape of the index tensors inputs[first..].
Shape index_shape(const std::vector<Tensor>& inputs, size_t first) {
  Shape b;
  for (size_t i = first; i < inputs.size(); ++i) b = broadcast_shapes(b, inputs[i].shape());
  return b;
}

// Element offset in `x` of every indexed row (index tensors inputs[first..] broadcast to `b`),
// after checking every index.
std::vector<int64_t> indexed_rows(const char* op, const Tensor& x,
                                  const std::vector<Tensor>& inputs, size_t first, const Shape& b) {
  std::vector<int64_t> rows(static_cast<size_t>(shape_numel(b)), 0);
  for (size_t i = first; i < inputs.size(); ++i) {
    const int64_t d = static_cast<int64_t>(i - first);
    const Tensor idx = load_index(op, inputs[i], b, d, x.shape()[d]);
    const int64_t* ip = idx.data<int64_t>();
    const int64_t size = x.shape()[d];
    for (size_t r = 0; r < rows.size(); ++r) rows[r] += wrap_index(ip[r], size) * x.strides()[d];
  }
  return rows;
}

// Index: g's rows go back to the rows of x they were read from, summed where an index repeats:
// the indexed leading dims flattened into one (positions from the wrapped indices) and g's rows
// scatter-added along it.
std::vector<Tensor> index_grad(const std::vector<Tensor>& in, const Tensor&, const Attrs&,
                               const Tensor& g) {
  std::vector<Tensor> grads(in.size());
  const Tensor& x = in[0];
  if (!detail::differentiable(x)) return grads;
  const size_t k = in.size() - 1;
  const Shape& shape = x.shape();
  Tensor row = zeros({}, DType::kInt64);  // the flattened position over the indexed dims
  int64_t rows = 1;
  for (size_t d = 0; d < k; ++d) {
    const Tensor size = Tensor::scalar(shape[d]);
    const Tensor i = to(in[d + 1], DType::kInt64);
    row = row * shape[d] + where(lt(i, Tensor::scalar(0)), i + size, i);
    rows *= shape[d];
  }
  Shape rest(shape.begin() + static_cast<std::ptrdiff_t>(k), shape.end());
  const Shape indices = index_shape(in, 1);
  // The row count given, not inferred: with an empty `rest` it cannot be (-1 among zeros).
  Shape flat_g{shape_numel(indices)};
  flat_g.insert(flat_g.end(), rest.begin(), rest.end());
  const Tensor g_rows = reshape(g, flat_g);
  Shape along(rest.size() + 1, 1);
  along[0] = flat_g[0];
  const Tensor index = expand(reshape(expand(row, indices), along), g_rows.shape());
  Shape flat_x{rows};
  flat_x.insert(flat_x.end(), rest.begin(), rest.end());
  const Tensor summed = scatter(zeros(flat_x, g.dtype()), 0, index, g_rows, "add");
  grads[0] = to(reshape(summed, shape), x.dtype());
  return grads;
}

// IndexPut: x's gradient is g with the assigned elements zeroed; the values' is g at the indices.
std::vector<Tensor> index_put_grad(const std::vector<Tensor>& in, const Tensor&, const Attrs&,
                                   const Tensor& g) {
  std::vector<Tensor> grads(in.size());
  const std::vector<Tensor> indices(in.begin() + 2, in.end());
  if (detail::differentiable(in[0])) {
    std::vector<Tensor> put{g, zeros({}, g.dtype())};
    put.insert(put.end(), indices.begin(), indices.end());
    grads[0] = detail::input_grad(call_op("IndexPut", put)[0], in[0]);
  }
  if (detail::differentiable(in[1])) grads[1] = detail::input_grad(index(g, indices), in[1]);
  return grads;
}

KILN_REGISTER_OP(OpDef("Index")
                     .input("x")
                     .variadic_input("indices")
                     .doc("NumPy advanced indexing x[i0, i1, ...] over the leading dims (a copy)")
                     .infer([](const InferContext& ctx) {
                       return MetaList{{ctx.input(0).dtype,
                                        indexed_shape("Index", ctx.input(0), ctx.inputs, 1)}};
                     })
                     .grad(detail::one_output_rule(index_grad))
                     .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
                       const Tensor& x = ctx.inputs[0];
                       const Tensor& out = ctx.outputs[0];
                       const int64_t k = static_cast<int64_t>(ctx.inputs.size()) - 1;
                       const std::vector<int64_t> rows =
                           indexed_rows("Index", x, ctx.inputs, 1, index_shape(ctx.inputs, 1));
                       gather_rows(out, x, rows, row_layout(x, k));
                     }));

KILN_REGISTER_OP(
    OpDef("IndexPut")
        .input("x")
        .input("values")
        .variadic_input("indices")
        .traits(kTraitSideEffect)
        .doc("x with x[indices...] = values (broadcast); eagerly written into x itself")
        .infer([](const InferContext& ctx) {
          const TensorMeta& x = ctx.input(0);
          const TensorMeta& values = ctx.input(1);
          const Shape target = indexed_shape("IndexPut", x, ctx.inputs, 2);
          KILN_CHECK_SHAPE(broadcasts_to(values.shape, target))
              << "IndexPut: expected values that broadcast to the indexed shape "
              << shape_str(target) << ", got shape " << shape_str(values.shape);
          return MetaList{{x.dtype, x.shape}};
        })
        .grad(detail::one_output_rule(index_put_grad))
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& x = ctx.inputs[0];
          const Tensor& out = ctx.outputs[0];
          const int64_t k = static_cast<int64_t>(ctx.inputs.size()) - 2;
          // Offsets into `out` (contiguous), computed and checked before any write.
          Shape target = index_shape(ctx.inputs, 2);
          const std::vector<int64_t> rows = indexed_rows("IndexPut", out, ctx.inputs, 2, target);
          const int64_t rest = shape_numel(Shape(x.shape().begin() + k, x.shape().end()));
          target.insert(target.end(), x.shape().begin() + k, x.shape().end());
          // A private copy of the values: they may alias x.
          Tensor values = Tensor::empty(target, x.dtype());
          copy_into(values, ctx.inputs[1]);
          if (!out.is_same(x)) copy_into(out, x);
          if (values.numel() == 0) return;
          char* dst = static_cast<char*>(out.data_ptr());
          const char* src = static_cast<const char*>(values.data_ptr());
          RowLayout layout;
          layout.numel = rest;
          visit_itemsize(out.itemsize(), [&](auto size) {
            constexpr int64_t kSize = static_cast<int64_t>(decltype(size)::value);
            // In order, so that with duplicate indices the last assignment wins, as in NumPy.
            for (size_t r = 0; r < rows.size(); ++r) {
              copy_row<kSize>(dst + rows[r] * kSize, src + static_cast<int64_t>(r) * rest * kSize,
                              layout);
            }
          });
        }));

}  // namespace

Tensor index(const Tensor& x, const std::vector<Tensor>& indices) {
  static const OpDefPtr op = OpRegistry::Instance().get("Index");
  std::vector<Tensor> inputs{x};
  inputs.insert(inputs.end(), indices.begin(), indices.end());
  return call_op(*op, inputs)[0];
}

void index_put_(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values) {
  static const OpDefPtr op = OpRegistry::Instance().get("IndexPut");
  std::vector<Tensor> inputs{x, values};
  inputs.insert(inputs.end(), indices.begin(), indices.end());
  call_op(*op, inputs, {}, {x});
}

}  // namespace kiln
