// Softmax and LogSoftmax along any dim, numerically stable (the max is subtracted first).
//
// The input is viewed as [outer, len, inner] around the dim. The last dim (inner == 1) runs
// simd::softmax_row / log_softmax_row on each row, rows split across threads. Another dim runs on
// tiles of up to 512 columns with three passes over the tile's rows (column max, sum of
// exp(x - max) in float64, output), each pass a SIMD kernel call per row, so memory is always
// read along contiguous rows. Integer and bool inputs give float32; float16 / bfloat16 compute
// in float32 and round once. A NaN, a +inf, or only -inf along the dim gives NaN (as PyTorch).
#include <cmath>
#include <limits>
#include <memory>

#include "core/dtype_dispatch.h"
#include "kiln/functional/elementwise.h"
#include "kiln/functional/reduce.h"
#include "ops/grad_util.h"
#include "ops/reduce.h"
#include "ops/simd/float_kernels.h"

namespace kiln {
namespace {

using detail::ComputeType;
using detail::kIsFloat;

template <typename C>
void row_kernel(bool log, const C* x, C* y, int64_t n, simd::Store store = simd::Store::kCached) {
  if (log) {
    simd::log_softmax_row(x, y, n, store);
  } else {
    simd::softmax_row(x, y, n, store);
  }
}

/// The last-dim case: `rows` rows of `len` elements. O is the output type, C its compute type.
template <typename T, typename O>
void softmax_rows(const T* x, O* y, int64_t rows, int64_t len, bool log) {
  using C = ComputeType<O>;
  const int64_t grain = std::max<int64_t>(1, detail::kReduceChunk / std::max<int64_t>(len, 1));
  // A large output is streamed past the caches (Note [streaming stores] in simd_loops-inl.h).
  const simd::Store store = simd::store_for_output(rows * len * int64_t{sizeof(O)});
  parallel_for(0, rows, grain, [&](int64_t lo, int64_t hi) {
    std::unique_ptr<C[]> buf;
    if constexpr (!std::is_same_v<O, C>) buf = std::make_unique<C[]>(static_cast<size_t>(len));
    for (int64_t r = lo; r < hi; ++r) {
      const T* xr = x + r * len;
      O* yr = y + r * len;
      if constexpr (std::is_same_v<T, C> && std::is_same_v<O, C>) {
        row_kernel(log, xr, yr, len, store);
      } else if constexpr (std::is_same_v<O, C>) {
        // Integer input, float32 output: convert into the output row and work in place.
        for (int64_t i = 0; i < len; ++i) yr[i] = static_cast<C>(xr[i]);
        row_kernel(log, yr, yr, len);
      } else {
        for (int64_t i = 0; i < len; ++i) buf[i] = static_cast<C>(xr[i]);
        row_kernel(log, buf.get(), buf.get(), len);
        for (int64_t i = 0; i < len; ++i) yr[i] = O(buf[i]);
      }
    }
  });
}

/// Another dim: `outer` blocks of `len` rows of `inner` columns; see the file comment.
template <typename T, typename O>
void softmax_columns(const T* x, O* y, const detail::AxisLayout& l, bool log) {
  using C = ComputeType<O>;
  // 512 columns: the tile's rows (len x 2 KB for float32) are re-read by passes two and three,
  // mostly from cache.
  constexpr int64_t kTile = 512;
  const int64_t tiles = (l.inner + kTile - 1) / kTile;
  const int64_t grain =
      std::max<int64_t>(1, detail::kReduceChunk / std::max<int64_t>(l.len * kTile, 1));
  parallel_for(0, l.outer * tiles, grain, [&](int64_t lo, int64_t hi) {
    C in[kTile];
    C buf[kTile];
    C max[kTile];
    C aux[kTile];
    double sum[kTile];
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t a = item / tiles;
      const int64_t j0 = (item % tiles) * kTile;
      const int64_t w = std::min(kTile, l.inner - j0);
      const auto offset = [&](int64_t k) { return (a * l.len + k) * l.inner + j0; };
      // Row k of the tile in the compute type (converted into `in` when T is not C).
      const auto load = [&](int64_t k) -> const C* {
        if constexpr (std::is_same_v<T, C>) {
          return x + offset(k);
        } else {
          for (int64_t j = 0; j < w; ++j) in[j] = static_cast<C>(x[offset(k) + j]);
          return in;
        }
      };
      for (int64_t j = 0; j < w; ++j) max[j] = -std::numeric_limits<C>::infinity();
      for (int64_t k = 0; k < l.len; ++k) {
        simd::binary(simd::BinaryOp::kMaximum, max, load(k), max, w);  // NaN-propagating
      }
      for (int64_t j = 0; j < w; ++j) sum[j] = 0;
      for (int64_t k = 0; k < l.len; ++k) {
        simd::binary(simd::BinaryOp::kSub, load(k), max, buf, w);
        simd::unary(simd::UnaryOp::kExp, buf, buf, w);
        for (int64_t j = 0; j < w; ++j) sum[j] += static_cast<double>(buf[j]);
      }
      for (int64_t j = 0; j < w; ++j)
        aux[j] = static_cast<C>(log ? std::log(sum[j]) : 1.0 / sum[j]);
      for (int64_t k = 0; k < l.len; ++k) {
        O* yr = y + offset(k);
        C* dst = buf;
        if constexpr (std::is_same_v<O, C>) dst = yr;
        simd::binary(simd::BinaryOp::kSub, load(k), max, dst, w);
        if (log) {
          simd::binary(simd::BinaryOp::kSub, dst, aux, dst, w);
        } else {
          simd::unary(simd::UnaryOp::kExp, dst, dst, w);
          simd::binary(simd::BinaryOp::kMul, dst, aux, dst, w);
        }
        if constexpr (!std::is_same_v<O, C>) {
          for (int64_t j = 0; j < w; ++j) yr[j] = O(buf[j]);
        }
      }
    }
  });
}

void softmax_kernel(KernelContext& ctx, bool log) {
  const Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  const Tensor& x = ctx.inputs[0];
  const int64_t dim =
      wrap_dim(ctx.attrs.get<int64_t>("dim"), x.ndim(), log ? "log_softmax: dim" : "softmax: dim");
  const detail::AxisLayout layout = detail::plan_axis(x, dim);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using O = std::conditional_t<kIsFloat<T>, T, float>;
    const T* in = layout.input.data<T>();
    O* y = out.data<O>();
    if (layout.inner == 1) {
      softmax_rows(in, y, layout.outer, layout.len, log);
    } else {
      softmax_columns(in, y, layout, log);
    }
  });
}

InferFn softmax_infer(const char* what) {
  return [what](const InferContext& ctx) {
    const TensorMeta& x = ctx.input(0);
    wrap_dim(ctx.attrs.get<int64_t>("dim"), x.ndim(), what);
    return MetaList{{to_floating(x.dtype), x.shape}};
  };
}

// Gradient rules (see Note [Gradient rules] in ops/grad_util.h): softmax y (g - sum(g y)),
// log_softmax g - exp(y) sum(g), the sums along dim.
template <bool kLog>
std::vector<Tensor> softmax_grad(const std::vector<Tensor>& in, const Tensor& y,
                                 const Attrs& attrs, const Tensor& g) {
  const Tensor& x = in[0];
  if (!detail::differentiable(x)) return {Tensor()};
  const int64_t dim = attrs.get<int64_t>("dim");
  const Tensor dx = kLog ? g - exp(y) * sum(g, {dim}, /*keepdim=*/true)
                         : y * (g - sum(g * y, {dim}, /*keepdim=*/true));
  return {to(dx, x.dtype())};
}

KILN_REGISTER_OP(OpDef("Softmax")
                     .input("x")
                     .attr("dim", AttrKind::kInt, int64_t{-1})
                     .doc("exp(x - max) / sum(exp(x - max)) along `dim`; integer inputs give "
                          "float32")
                     .infer(softmax_infer("softmax: dim"))
                     .grad(detail::one_output_rule(softmax_grad<false>))
                     .kernel(DeviceType::kCPU,
                             [](KernelContext& ctx) { softmax_kernel(ctx, false); }));

KILN_REGISTER_OP(OpDef("LogSoftmax")
                     .input("x")
                     .attr("dim", AttrKind::kInt, int64_t{-1})
                     .doc("x - max - log(sum(exp(x - max))) along `dim`; integer inputs give "
                          "float32")
                     .infer(softmax_infer("log_softmax: dim"))
                     .grad(detail::one_output_rule(softmax_grad<true>))
                     .kernel(DeviceType::kCPU,
                             [](KernelContext& ctx) { softmax_kernel(ctx, true); }));

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  static const OpDefPtr op = OpRegistry::Instance().get("Softmax");
  return call_op(*op, {x}, {{"dim", dim}})[0];
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  static const OpDefPtr op = OpRegistry::Instance().get("LogSoftmax");
  return call_op(*op, {x}, {{"dim", dim}})[0];
}

}  // namespace kiln
