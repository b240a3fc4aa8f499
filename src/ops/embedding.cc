// Embedding (kiln::embedding): rows of a weight table picked by integer indices.
//
// Every index is checked before any row is copied, so a bad index raises KilnIndexError naming
// it and writes nothing. Rows are copied with memcpy in parallel.
//
// The weight's gradient is EmbeddingBackward: the output gradient's rows added into a zero table
// at their indices, in parallel over column blocks (each thread owns whole columns of the table,
// so repeated indices never race and the sums do not depend on the thread count). Its own
// gradient, linear in the output gradient, is Embedding again.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/dtype_dispatch.h"
#include "kiln/functional/nn.h"
#include "kiln/op.h"
#include "kiln/parallel.h"
#include "ops/nn_grad.h"

namespace kiln {
namespace {

// Bytes per parallel chunk of row copies.
constexpr int64_t kCopyChunkBytes = int64_t{1} << 16;

// The indices as int64, after checking that every one is in [0, rows).
std::vector<int64_t> checked_indices(const Tensor& indices, int64_t rows) {
  if (indices.numel() == 0) return {};  // (a planned graph gives an empty tensor no memory)
  const Tensor idx = indices.contiguous();
  std::vector<int64_t> out(static_cast<size_t>(idx.numel()));
  visit_dtype(idx.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      const T* p = idx.data<T>();
      for (size_t i = 0; i < out.size(); ++i) {
        const int64_t v = static_cast<int64_t>(p[i]);
        KILN_CHECK_INDEX(v >= 0 && v < rows)
            << "embedding: index " << v << " is out of range for a weight with " << rows
            << " rows (expected 0 <= index < " << rows << ")";
        out[i] = v;
      }
    }
  });
  return out;
}

// table[idx[i], :] += rows[i, :] for every i, over a zeroed table [num, dim] of type T.
template <typename T>
void scatter_add_rows(const std::vector<int64_t>& idx, const T* rows, T* table, int64_t num,
                      int64_t dim) {
  std::fill(table, table + num * dim, T(0));
  const int64_t n = static_cast<int64_t>(idx.size());
  const int64_t grain = std::max<int64_t>(1, kCopyChunkBytes / std::max<int64_t>(1, n * 8));
  parallel_for(0, dim, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = 0; i < n; ++i) {
      const T* src = rows + i * dim;
      T* dst = table + idx[i] * dim;
      for (int64_t j = lo; j < hi; ++j) dst[j] += src[j];
    }
  });
}

KILN_REGISTER_OP(
    OpDef("EmbeddingBackward")
        .input("indices")
        .input("grad_output")
        .attr("num_weights", AttrKind::kInt)
        .doc("The gradient of Embedding's weight: zeros [num_weights, dim] with the rows of "
             "grad_output (indices.shape + [dim]) added at their indices")
        .infer([](const InferContext& ctx) {
          const TensorMeta& indices = ctx.input(0);
          const TensorMeta& grad = ctx.input(1);
          const int64_t num = ctx.attrs.get<int64_t>("num_weights");
          KILN_CHECK_DTYPE(is_integral(indices.dtype))
              << "embedding_backward: expected integer indices, got " << indices.dtype;
          KILN_CHECK_DTYPE(is_floating_point(grad.dtype))
              << "embedding_backward: expected a floating-point grad_output, got " << grad.dtype;
          KILN_CHECK_VALUE(num >= 0)
              << "embedding_backward: expected num_weights >= 0, got " << num;
          const bool fits = grad.ndim() == indices.ndim() + 1 &&
                            std::equal(indices.shape.begin(), indices.shape.end(),
                                       grad.shape.begin());
          KILN_CHECK_SHAPE(fits) << "embedding_backward: indices have shape "
                                 << shape_str(indices.shape)
                                 << "; expected grad_output of shape indices.shape + [dim], got "
                                 << shape_str(grad.shape);
          return MetaList{{grad.dtype, {num, grad.shape.back()}}};
        })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          const int64_t num = out.size(0), dim = out.size(1);
          const std::vector<int64_t> idx = checked_indices(ctx.inputs[0], num);
          if (out.numel() == 0) return;
          // 16-bit floats accumulate in float32 and round once.
          const DType cd = compute_dtype(out.dtype());
          Tensor rows = ctx.inputs[1];
          if (rows.dtype() != cd) {
            Tensor converted = Tensor::empty(rows.shape(), cd);
            copy_into(converted, rows);
            rows = converted;
          }
          rows = rows.contiguous();
          const Tensor table = out.dtype() == cd ? out : Tensor::empty(out.shape(), cd);
          if (cd == DType::kFloat64) {
            scatter_add_rows(idx, rows.data<double>(), table.data<double>(), num, dim);
          } else {
            scatter_add_rows(idx, rows.data<float>(), table.data<float>(), num, dim);
          }
          if (!table.is_same(out)) copy_into(out, table);
        })
        .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out, const Attrs&,
                 const std::vector<Tensor>& grad_outputs) {
          const Tensor g = grad::or_zeros(grad_outputs[0], out[0]);
          return std::vector<Tensor>{Tensor(), grad::as_grad_of(embedding(in[0], g), in[1])};
        }));

KILN_REGISTER_OP(
    OpDef("Embedding")
        .input("indices")
        .input("weight")
        .doc("weight[indices]: rows of weight [num, dim] -> indices.shape + [dim]")
        .infer([](const InferContext& ctx) {
          const TensorMeta& indices = ctx.input(0);
          const TensorMeta& weight = ctx.input(1);
          KILN_CHECK_DTYPE(is_integral(indices.dtype))
              << "embedding: expected integer indices, got " << indices.dtype;
          KILN_CHECK_SHAPE(weight.ndim() == 2)
              << "embedding: expected weight of shape [num_embeddings, embedding_dim], got "
              << shape_str(weight.shape);
          Shape out = indices.shape;
          out.push_back(weight.shape[1]);
          return MetaList{{weight.dtype, out}};
        })
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& out = ctx.outputs[0];
          const int64_t rows = ctx.inputs[1].size(0), dim = ctx.inputs[1].size(1);
          const std::vector<int64_t> idx = checked_indices(ctx.inputs[0], rows);
          if (out.numel() == 0) return;
          // Rows need only be contiguous themselves; a transposed table is copied once.
          const Tensor weight =
              ctx.inputs[1].stride(1) == 1 || dim == 1 ? ctx.inputs[1] : ctx.inputs[1].contiguous();
          const char* src = static_cast<const char*>(weight.data_ptr());
          char* dst = static_cast<char*>(out.data_ptr());
          const int64_t row_bytes = dim * static_cast<int64_t>(weight.itemsize());
          const int64_t src_stride = weight.stride(0) * static_cast<int64_t>(weight.itemsize());
          const int64_t grain = std::max<int64_t>(1, kCopyChunkBytes / row_bytes);
          parallel_for(0, static_cast<int64_t>(idx.size()), grain, [&](int64_t lo, int64_t hi) {
            for (int64_t i = lo; i < hi; ++i) {
              std::memcpy(dst + i * row_bytes, src + idx[i] * src_stride,
                          static_cast<size_t>(row_bytes));
            }
          });
        })
        .grad([](const std::vector<Tensor>& in, const std::vector<Tensor>& out, const Attrs&,
                 const std::vector<Tensor>& grad_outputs) {
          if (!grad::differentiable(in[1])) return std::vector<Tensor>{Tensor(), Tensor()};
          const Tensor g = grad::or_zeros(grad_outputs[0], out[0]);
          return std::vector<Tensor>{
              Tensor(), grad::as_grad_of(embedding_backward(in[0], g, in[1].size(0)), in[1])};
        }));

}  // namespace

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  static const OpDefPtr op = OpRegistry::Instance().get("Embedding");
  return call_op(*op, {indices, weight})[0];
}

Tensor embedding_backward(const Tensor& indices, const Tensor& grad_output, int64_t num_weights) {
  static const OpDefPtr op = OpRegistry::Instance().get("EmbeddingBackward");
  return call_op(*op, {indices, grad_output}, {{"num_weights", num_weights}})[0];
}

}  // namespace kiln
