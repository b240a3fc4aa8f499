// Shared machinery of the reduction, scan and softmax ops (private to libkiln).
//
// A reduction kernel never walks arbitrary strides. plan_reduction() turns (input, reduced dims)
// into one of two shapes over contiguous memory, without a copy whenever the input is a dense
// permutation of a contiguous tensor (a transpose, for instance):
//
//   rows:    [outer, reduce]          each output combines one contiguous run of `reduce` elements
//   columns: [outer, reduce, inner]   each output combines a column of `reduce` elements
//                                     `inner` apart; a work item accumulates a tile of columns
//                                     row by row (vector adds into an accumulator row).
//
// Anything else (reduced dims that are not adjacent in memory, broadcast strides, gaps) is
// permuted so that the reduced dims come last and copied with contiguous(): a rows problem.
//
// A reducer R describes one op to the drivers reduce_rows() / reduce_columns():
//
//   struct R {
//     using Acc = ...;                                           // partial result
//     Acc init() const;                                          // identity
//     Acc run(const T* x, int64_t n, int64_t base) const;        // a contiguous run; x[i] has
//                                                                // reduction index base + i
//     void update(Acc* acc, const T* row, int64_t w, int64_t k) const;  // acc[j] += row[j], j < w;
//                                                                // k is the reduction index
//     void merge(Acc& a, const Acc& later) const;                // a = a (+) later
//     void finish(int64_t out_index, const Acc& acc) const;      // writes output out_index
//   };
//
// A reducer may also define update_block(acc, rows, stride, k0, k1, w) (optional; default: update
// on each row k in [k0, k1), row k at rows + k * stride) to accumulate many rows at once, as the
// float sums do with SIMD adds.
//
// See Note [Deterministic reductions] in reduce_plan.cc for how work is split across threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/dtype_dispatch.h"
#include "kiln/op.h"
#include "kiln/parallel.h"

namespace kiln::detail {

/// Elements per partial result: the unit of work the drivers hand to threads. Fixed, so that the
/// way a reduction is split (and therefore its rounding) depends only on the shape.
inline constexpr int64_t kReduceChunk = int64_t{1} << 14;
/// Columns one work item of the columns layout accumulates at once: its accumulator row (16 KB
/// of doubles) stays in L1 while whole rows stream through.
inline constexpr int64_t kColumnTile = 2048;

/// How many row chunks a column reduction of `blocks` output tiles of `tile` columns over `len`
/// rows is split into (a function of the shape only; see Note [Column reductions]).
int64_t column_chunks(int64_t blocks, int64_t len, int64_t tile);

/// The dims `dims` names (empty: all of them) as a mask over `ndim` dims. `op` prefixes the
/// messages: kIndex for a dim out of range (naming it), kValue for a dim listed twice. A 0-d
/// tensor accepts dim 0 / -1 and reduces nothing.
std::vector<bool> reduction_mask(const std::string& op, int64_t ndim,
                                 const std::vector<int64_t>& dims);
/// The output shape: reduced dims removed, or kept with size 1.
Shape reduced_shape(const Shape& shape, const std::vector<bool>& mask, bool keepdim);
/// Number of input elements each output combines.
int64_t reduced_count(const Shape& shape, const std::vector<bool>& mask);
/// Throws kValue ("cannot reduce over an empty dimension") when a reduced dim has size 0.
void check_nonempty_reduction(const std::string& op, const Shape& shape,
                              const std::vector<bool>& mask);
/// Checks the `dtype` argument of sum / prod / cumsum: a number type (not bool) of the same kind
/// as the input or wider (NumPy's same_kind rule); throws kDType.
void check_accumulate_dtype(const std::string& op, DType input, DType requested);
/// The dtype sum / prod / cumsum produce: `requested` when given, int64 for bool and integer
/// inputs, the input's dtype otherwise.
DType accumulate_dtype(DType input, const Attrs& attrs);

/// `x` converted to `dtype` (a contiguous copy), or x itself when it already has that dtype.
Tensor converted(const Tensor& x, DType dtype);

/// The reduced dims and the output shape, from the `dims` and `keepdim` attributes.
struct ReduceArgs {
  std::vector<bool> mask;
  Shape shape;
};
ReduceArgs reduce_args(const std::string& op, const Shape& input, const Attrs& attrs);

/// A reduction resolved onto contiguous memory (see the file comment).
struct ReduceLayout {
  Tensor input;                // keeps the (possibly copied) input alive
  const void* data = nullptr;  // first input element; null when the input is empty
  int64_t outer = 1;
  int64_t reduce = 1;
  int64_t inner = 1;            // 1: rows layout; > 1: columns layout
  std::vector<Tensor> buffers;  // per output: contiguous [outer * inner] that kernels write
  std::vector<Tensor> targets;  // per output: undefined, or where finish() copies the buffer

  /// Copies buffers into their targets when the output order differs from the memory order.
  void finish() const;
};

/// Plans reducing `x` over `mask` into `outputs` (contiguous, of the reduced shape). With
/// `keep_order` the reduced dims keep their logical order (argmax over several dims indexes the
/// row-major flattening), so no reordering of reduced dims is allowed.
ReduceLayout plan_reduction(const Tensor& x, const std::vector<bool>& mask,
                            const std::vector<Tensor>& outputs, bool keep_order);

/// Runs a rows-layout reduction: `rows` contiguous runs of `len` elements starting at `x`.
template <typename T, typename R>
void reduce_rows(const T* x, int64_t rows, int64_t len, const R& r) {
  using Acc = typename R::Acc;
  if (len == 0) {  // x may be null: nothing to read
    for (int64_t i = 0; i < rows; ++i) r.finish(i, r.init());
    return;
  }
  if (len <= kReduceChunk) {
    const int64_t grain = std::max<int64_t>(1, kReduceChunk / std::max<int64_t>(len, 1));
    parallel_for(0, rows, grain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) r.finish(i, r.run(x + i * len, len, 0));
    });
    return;
  }
  // Long rows: fixed chunks, partials combined in chunk order.
  const int64_t chunks = (len + kReduceChunk - 1) / kReduceChunk;
  // (Not std::vector: Acc may be bool, and vector<bool> has no data().)
  const std::unique_ptr<Acc[]> partial =
      std::make_unique<Acc[]>(static_cast<size_t>(rows * chunks));
  parallel_for(0, rows * chunks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t row = item / chunks;
      const int64_t begin = (item % chunks) * kReduceChunk;
      const int64_t n = std::min(kReduceChunk, len - begin);
      partial[static_cast<size_t>(item)] = r.run(x + row * len + begin, n, begin);
    }
  });
  parallel_for(0, rows, std::max<int64_t>(1, 4096 / chunks), [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      Acc acc = partial[static_cast<size_t>(row * chunks)];
      for (int64_t c = 1; c < chunks; ++c)
        r.merge(acc, partial[static_cast<size_t>(row * chunks + c)]);
      r.finish(row, acc);
    }
  });
}

/// Detects the optional R::update_block.
template <typename R, typename = void>
struct HasUpdateBlock : std::false_type {};
template <typename R>
struct HasUpdateBlock<R, std::void_t<decltype(&R::update_block)>> : std::true_type {};

/// Runs a columns-layout reduction: `outer` blocks of `len` rows of `inner` elements at `x`.
/// A work item streams through consecutive rows of one tile of columns; see Note [Column
/// reductions] in reduce_plan.cc.
template <typename T, typename R>
void reduce_columns(const T* x, int64_t outer, int64_t len, int64_t inner, const R& r) {
  using Acc = typename R::Acc;
  if (outer == 0 || inner == 0) return;
  if (len == 0) {  // x may be null: nothing to read
    for (int64_t i = 0; i < outer * inner; ++i) r.finish(i, r.init());
    return;
  }
  const int64_t tile = std::min(inner, kColumnTile);
  const int64_t tiles = (inner + tile - 1) / tile;
  const int64_t blocks = outer * tiles;  // (block, tile) pairs: one output tile each
  const int64_t chunks = column_chunks(blocks, len, tile);
  const int64_t span = (len + chunks - 1) / chunks;
  // Accumulates rows [k0, k1) of (block, tile) pair `bt` into acc; returns the tile's width.
  auto accumulate = [&](int64_t bt, int64_t k0, int64_t k1, Acc* acc) {
    const int64_t j0 = (bt % tiles) * tile;
    const int64_t w = std::min(tile, inner - j0);
    for (int64_t j = 0; j < w; ++j) acc[j] = r.init();
    const T* base = x + (bt / tiles) * len * inner + j0;
    if constexpr (HasUpdateBlock<R>::value) {
      r.update_block(acc, base, inner, k0, k1, w);
    } else {
      for (int64_t k = k0; k < k1; ++k) r.update(acc, base + k * inner, w, k);
    }
    return w;
  };
  auto output = [&](int64_t bt) { return (bt / tiles) * inner + (bt % tiles) * tile; };
  if (chunks == 1) {
    const int64_t grain = std::max<int64_t>(1, kReduceChunk / (len * tile));
    parallel_for(0, blocks, grain, [&](int64_t lo, int64_t hi) {
      const std::unique_ptr<Acc[]> acc = std::make_unique<Acc[]>(static_cast<size_t>(tile));
      for (int64_t bt = lo; bt < hi; ++bt) {
        const int64_t w = accumulate(bt, 0, len, acc.get());
        for (int64_t j = 0; j < w; ++j) r.finish(output(bt) + j, acc[j]);
      }
    });
    return;
  }
  // Item c * blocks + bt covers rows [c * span, (c + 1) * span): consecutive items on a thread
  // read consecutive memory.
  const std::unique_ptr<Acc[]> partial =
      std::make_unique<Acc[]>(static_cast<size_t>(chunks * blocks * tile));
  parallel_for(0, chunks * blocks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t c = item / blocks;
      accumulate(item % blocks, c * span, std::min(len, (c + 1) * span),
                 partial.get() + item * tile);
    }
  });
  parallel_for(0, blocks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t bt = lo; bt < hi; ++bt) {
      const int64_t w = std::min(tile, inner - (bt % tiles) * tile);
      Acc* acc = partial.get() + bt * tile;
      for (int64_t c = 1; c < chunks; ++c) {
        const Acc* later = partial.get() + (c * blocks + bt) * tile;
        for (int64_t j = 0; j < w; ++j) r.merge(acc[j], later[j]);
      }
      for (int64_t j = 0; j < w; ++j) r.finish(output(bt) + j, acc[j]);
    }
  });
}

/// Runs reducer `r` over a planned layout whose input elements are T.
template <typename T, typename R>
void run_reduction(const ReduceLayout& layout, const R& r) {
  const T* x = static_cast<const T*>(layout.data);
  if (layout.inner == 1) {
    reduce_rows(x, layout.outer, layout.reduce, r);
  } else {
    reduce_columns(x, layout.outer, layout.reduce, layout.inner, r);
  }
  layout.finish();
}

/// True for the floating element types (including the 16-bit storage types).
template <typename T>
inline constexpr bool kIsFloat =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

/// Calls f(TypeTag<T>{}, TypeTag<O>{}) for an op with a floating result (mean, var, softmax): T
/// the element type of `input` and O that of `output`, T itself for a floating input. For an
/// integer or bool input O is the output's dtype, which infer chose (to_floating: the default
/// floating dtype when the op was called), not the default now, which may have changed since.
template <typename F>
void visit_floating_result(DType input, DType output, F&& f) {
  visit_dtype(input, [&](auto in) {
    using T = typename decltype(in)::type;
    if constexpr (kIsFloat<T>) {
      f(in, in);
    } else {
      visit_dtype(output, [&](auto out) {
        using O = typename decltype(out)::type;
        if constexpr (kIsFloat<O>) {
          f(in, out);
        } else {
          KILN_ASSERT(false) << "a floating result of dtype " << output << " for " << input;
        }
      });
    }
  });
}

/// Is v a NaN (false for every non-floating type).
template <typename C>
inline bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>) {
    return v != v;
  } else {
    return false;
  }
}

/// The type elements of T are compared and combined in: float for the 16-bit floats, T otherwise.
template <typename T>
using ComputeType =
    std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

/// x viewed as [outer, len, inner] around `dim`, for the ops that work along one dim (scans,
/// softmax); `input` is x made contiguous.
struct AxisLayout {
  Tensor input;
  int64_t outer = 1;
  int64_t len = 1;
  int64_t inner = 1;
};
AxisLayout plan_axis(const Tensor& x, int64_t dim);

}  // namespace kiln::detail
