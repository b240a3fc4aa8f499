// Embedding (kiln::embedding): rows of a weight table picked by integer indices.
//
// Every index is checked before any row is copied, so a bad index raises KilnIndexError naming
// it and writes nothing. Rows are copied with memcpy in parallel.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/dtype_dispatch.h"
#include "kiln/functional/nn.h"
#include "kiln/op.h"
#include "kiln/parallel.h"

namespace kiln {
namespace {

// Bytes per parallel chunk of row copies.
constexpr int64_t kCopyChunkBytes = int64_t{1} << 16;

// The indices as int64, after checking that every one is in [0, rows).
std::vector<int64_t> checked_indices(const Tensor& indices, int64_t rows) {
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
        }));

}  // namespace

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  static const OpDefPtr op = OpRegistry::Instance().get("Embedding");
  return call_op(*op, {indices, weight})[0];
}

}  // namespace kiln
