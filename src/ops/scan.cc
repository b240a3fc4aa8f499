// CumSum: inclusive prefix sums along one dim, or suffix sums (`reverse`: from the end; the
// gradient of each is the other).
//
// Floating inputs accumulate in float64 and round each prefix once; bool and integer inputs give
// int64 by default (as NumPy and PyTorch) and accumulate in wrapping uint64. With `dtype` the
// input is converted first (same_kind rule, as sum). The input is viewed as [outer, len, inner].
// Along the last dim each row keeps one running sum; along another dim a work item scans a tile
// of up to kColumnTile columns row by row, so memory is read along contiguous rows. Rows or tiles
// are split across threads, and each prefix is computed by exactly one thread, in order, so results
// do not depend on the thread count.
#include <algorithm>
#include <memory>
#include <type_traits>

#include "core/dtype_dispatch.h"
#include "kiln/functional/elementwise.h"
#include "kiln/functional/reduce.h"
#include "ops/grad_util.h"
#include "ops/reduce.h"

namespace kiln {
namespace {

using detail::ComputeType;
using detail::kIsFloat;

/// Scans x ([outer, len, inner], contiguous) into y, from the end of each scan when `reverse`;
/// Acc accumulates, `load` / `store` convert.
template <typename Acc, typename T, typename O, typename Load, typename Store>
void scan(const T* x, O* y, const detail::AxisLayout& l, bool reverse, Load load, Store store) {
  // The k-th element of a scan of len elements is element at(k) along dim.
  const auto at = [&](int64_t k) { return reverse ? l.len - 1 - k : k; };
  if (l.inner == 1) {  // the last dim: one running sum per row
    // A row's sum is one chain of dependent adds, which waits out the add's latency on every
    // element; scanning kRows rows of a chunk side by side keeps the adder busy with independent
    // chains, and each row still adds in order (cumsum along rows of 1024: 1.39 -> 0.55 ms,
    // PyTorch 1.1). Chunks stay sized by the work alone, so a few long rows still spread over
    // the threads.
    constexpr int64_t kRows = 4;
    const auto scan_rows = [&](auto rows, int64_t r) {
      constexpr int64_t n = decltype(rows)::value;
      Acc acc[n] = {};
      for (int64_t k = 0; k < l.len; ++k) {
        const int64_t c = at(k);
        for (int64_t i = 0; i < n; ++i) {
          acc[i] += load(x[(r + i) * l.len + c]);
          y[(r + i) * l.len + c] = store(acc[i]);
        }
      }
    };
    const int64_t grain = std::max<int64_t>(1, detail::kReduceChunk / std::max<int64_t>(l.len, 1));
    parallel_for(0, l.outer, grain, [&](int64_t lo, int64_t hi) {
      int64_t r = lo;
      for (; r + kRows <= hi; r += kRows) scan_rows(std::integral_constant<int64_t, kRows>{}, r);
      for (; r < hi; ++r) scan_rows(std::integral_constant<int64_t, 1>{}, r);
    });
    return;
  }
  const int64_t tile = std::min(l.inner, detail::kColumnTile);
  const int64_t tiles = (l.inner + tile - 1) / tile;
  const int64_t grain =
      std::max<int64_t>(1, detail::kReduceChunk / std::max<int64_t>(l.len * tile, 1));
  parallel_for(0, l.outer * tiles, grain, [&](int64_t lo, int64_t hi) {
    const std::unique_ptr<Acc[]> acc = std::make_unique<Acc[]>(static_cast<size_t>(tile));
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t a = item / tiles;
      const int64_t j0 = (item % tiles) * tile;
      const int64_t w = std::min(tile, l.inner - j0);
      for (int64_t j = 0; j < w; ++j) acc[j] = Acc{0};
      for (int64_t k = 0; k < l.len; ++k) {
        const int64_t offset = (a * l.len + at(k)) * l.inner + j0;
        for (int64_t j = 0; j < w; ++j) {
          acc[j] += load(x[offset + j]);
          y[offset + j] = store(acc[j]);
        }
      }
    }
  });
}

void cumsum_kernel(KernelContext& ctx) {
  const Tensor& out = ctx.outputs[0];
  if (out.numel() == 0) return;
  const DType dtype = out.dtype();
  const int64_t dim = wrap_dim(ctx.attrs.get<int64_t>("dim"), ctx.inputs[0].ndim(), "cumsum: dim");
  const bool reverse = ctx.attrs.get<bool>("reverse");
  if (is_floating_point(dtype)) {
    const detail::AxisLayout layout =
        detail::plan_axis(detail::converted(ctx.inputs[0], dtype), dim);
    visit_dtype(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (kIsFloat<T>) {
        scan<double>(
            layout.input.data<T>(), out.data<T>(), layout, reverse,
            [](T v) { return static_cast<double>(static_cast<ComputeType<T>>(v)); },
            [](double acc) { return convert<T>(acc); });
      }
    });
    return;
  }
  const Tensor wide = dtype == DType::kInt64 ? out : Tensor::empty(out.shape(), DType::kInt64);
  const detail::AxisLayout layout = detail::plan_axis(ctx.inputs[0], dim);
  visit_dtype(layout.input.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!kIsFloat<T>) {
      scan<uint64_t>(
          layout.input.data<T>(), wide.data<int64_t>(), layout, reverse,
          [](T v) { return static_cast<uint64_t>(static_cast<int64_t>(v)); },
          [](uint64_t acc) { return static_cast<int64_t>(acc); });
    }
  });
  if (!wide.is_same(out)) copy_into(out, wide);
}

// The gradient of a prefix sum is the suffix sum of g, and the other way round.
std::vector<Tensor> cumsum_grad(const std::vector<Tensor>& in, const Tensor&, const Attrs& attrs,
                                const Tensor& g) {
  const Tensor& x = in[0];
  if (!detail::differentiable(x)) return {Tensor()};
  if (x.ndim() == 0) return {to(g, x.dtype())};
  const int64_t dim = wrap_dim(attrs.get<int64_t>("dim"), x.ndim());
  return {to(cumsum(g, dim, std::nullopt, !attrs.get<bool>("reverse")), x.dtype())};
}

KILN_REGISTER_OP(OpDef("CumSum")
                     .input("x")
                     .attr("dim", AttrKind::kInt)
                     .attr("dtype", AttrKind::kDType, std::monostate{})
                     .attr("reverse", AttrKind::kBool, false)
                     .doc("Inclusive prefix sums along `dim` (suffix sums, from the end, with "
                          "`reverse`); bool and integer inputs give int64 unless `dtype` is given")
                     .infer([](const InferContext& ctx) {
                       const TensorMeta& x = ctx.input(0);
                       wrap_dim(ctx.attrs.get<int64_t>("dim"), x.ndim(), "cumsum: dim");
                       if (!ctx.attrs.is_none("dtype")) {
                         detail::check_accumulate_dtype("cumsum", x.dtype,
                                                        ctx.attrs.get<DType>("dtype"));
                       }
                       return MetaList{{detail::accumulate_dtype(x.dtype, ctx.attrs), x.shape}};
                     })
                     .grad(detail::one_output_rule(cumsum_grad))
                     .kernel(DeviceType::kCPU, cumsum_kernel));

}  // namespace

Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return cumsum(x, dim, dtype, false);
}

Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype, bool reverse) {
  static const OpDefPtr op = OpRegistry::Instance().get("CumSum");
  Attrs attrs{{"dim", dim}, {"reverse", reverse}};
  if (dtype) attrs.set("dtype", *dtype);
  return call_op(*op, {x}, attrs)[0];
}

}  // namespace kiln
