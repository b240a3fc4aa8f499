// Integer indexing: IndexSelect, Gather, Scatter, MaskedFill, Index (NumPy advanced indexing) and
// IndexPut (its in-place assignment form).
//
// Index tensors are int64 or int32; negative values count from the end of their dimension, as in
// NumPy. Every index is checked before anything is written, so a failed call leaves its inputs
// (and, for IndexPut, the tensor being assigned to) untouched; the error names the bad value, the
// dimension and its size.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "core/dtype_dispatch.h"
#include "core/strided_loop.h"
#include "kiln/functional/elementwise.h"
#include "kiln/functional/factory.h"
#include "kiln/functional/reduce.h"
#include "kiln/functional/shape.h"
#include "kiln/op.h"
#include "kiln/parallel.h"
#include "ops/elementwise.h"
#include "ops/grad_util.h"

namespace kiln {
namespace {

// Bytes per parallel chunk of row copies.
constexpr int64_t kCopyChunkBytes = int64_t{1} << 18;

void check_index_dtype(const char* op, const TensorMeta& index) {
  KILN_CHECK_DTYPE(index.dtype == DType::kInt64 || index.dtype == DType::kInt32)
      << op << ": expected an int64 or int32 index tensor, got " << dtype_name(index.dtype);
}

// `index` (int32/int64, any layout) broadcast to `shape` as a contiguous int64 tensor (index itself
// when it already is one: no copy), after checking every value against [-size, size). Readers
// wrap negative values with wrap_index.
Tensor load_index(const char* op, const Tensor& index, const Shape& shape, int64_t dim,
                  int64_t size) {
  Tensor out = index;
  if (index.dtype() != DType::kInt64 || !index.is_contiguous() || index.shape() != shape) {
    out = Tensor::empty(shape, DType::kInt64);
    copy_into(out, index);
  }
  const int64_t* p = out.data<int64_t>();
  const int64_t n = out.numel();
  bool ok = true;
  for (int64_t i = 0; i < n; ++i) ok &= p[i] >= -size && p[i] < size;
  if (!ok) {
    for (int64_t i = 0; i < n; ++i) {
      KILN_CHECK_INDEX(p[i] >= -size && p[i] < size)
          << op << ": index " << p[i] << " is out of bounds for dimension " << dim << " with size "
          << size;
    }
  }
  return out;
}

// A checked index value in [-size, size) as a position in [0, size).
inline int64_t wrap_index(int64_t v, int64_t size) { return v < 0 ? v + size : v; }

// Element offsets, in row-major order, of the sub-tensor with dims [begin, end) of `shape` laid out
// with `strides`.
std::vector<int64_t> element_offsets(const Shape& shape, const Shape& strides, int64_t begin,
                                     int64_t end) {
  std::vector<int64_t> offsets{0};
  for (int64_t d = begin; d < end; ++d) {
    std::vector<int64_t> next;
    next.reserve(offsets.size() * static_cast<size_t>(shape[d]));
    for (int64_t base : offsets) {
      for (int64_t k = 0; k < shape[d]; ++k) next.push_back(base + k * strides[d]);
    }
    offsets = std::move(next);
  }
  return offsets;
}

// True when dims [begin, end) of (shape, strides) are row-major contiguous.
bool dense_from(const Shape& shape, const Shape& strides, int64_t begin, int64_t end) {
  int64_t expected = 1;
  for (int64_t d = end - 1; d >= begin; --d) {
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

// True when `from` broadcasts to exactly `to` (NumPy rules, `to` unchanged).
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  }
  return true;
}

// Calls f(std::integral_constant<size_t, N>) for an element size N, so element moves are fixed-size
// memcpys (one load and store, no aliasing questions).
template <typename F>
void visit_itemsize(size_t size, F&& f) {
  switch (size) {
    case 1:
      return f(std::integral_constant<size_t, 1>{});
    case 2:
      return f(std::integral_constant<size_t, 2>{});
    case 4:
      return f(std::integral_constant<size_t, 4>{});
    case 8:
      return f(std::integral_constant<size_t, 8>{});
  }
  KILN_ASSERT(false) << "unexpected element size " << size;
}

// The trailing dims [first, ndim) of `src` that every gathered row copies.
struct RowLayout {
  int64_t numel = 1;
  bool dense = true;
  std::vector<int64_t> offsets;  // element offsets within a row when not dense
};

RowLayout row_layout(const Tensor& src, int64_t first) {
  RowLayout r;
  for (int64_t d = first; d < src.ndim(); ++d) r.numel *= src.shape()[d];
  r.dense = dense_from(src.shape(), src.strides(), first, src.ndim());
  if (!r.dense) r.offsets = element_offsets(src.shape(), src.strides(), first, src.ndim());
  return r;
}

// Copies one row laid out as `layout` at `from` to the contiguous `to` (kSize-byte elements).
template <size_t kSize>
inline void copy_row(char* to, const char* from, const RowLayout& layout) {
  if (layout.numel == 1) {
    std::memcpy(to, from, kSize);
  } else if (layout.dense) {
    std::memcpy(to, from, static_cast<size_t>(layout.numel) * kSize);
  } else {
    for (int64_t i = 0; i < layout.numel; ++i) {
      std::memcpy(to + i * static_cast<int64_t>(kSize),
                  from + layout.offsets[i] * static_cast<int64_t>(kSize), kSize);
    }
  }
}

// Rows per parallel chunk when each row holds `row_elements` elements.
int64_t row_grain(int64_t row_elements, size_t item) {
  const int64_t bytes = std::max<int64_t>(1, row_elements * static_cast<int64_t>(item));
  return std::max<int64_t>(1, kCopyChunkBytes / bytes);
}

// out row r (contiguous, layout.numel elements) = the row of `src` starting at element
// row_offsets[r].
void gather_rows(const Tensor& out, const Tensor& src, const std::vector<int64_t>& row_offsets,
                 const RowLayout& layout) {
  if (out.numel() == 0) return;
  char* dst = static_cast<char*>(out.data_ptr());
  const char* base = static_cast<const char*>(src.data_ptr());
  const int64_t rows = static_cast<int64_t>(row_offsets.size());
  visit_itemsize(out.itemsize(), [&](auto size) {
    constexpr int64_t kSize = static_cast<int64_t>(decltype(size)::value);
    const int64_t row_bytes = layout.numel * kSize;
    parallel_for(0, rows, row_grain(layout.numel, kSize), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        copy_row<kSize>(dst + r * row_bytes, base + row_offsets[r] * kSize, layout);
      }
    });
  });
}

// Gather/Scatter address x's elements through the coordinates of `index`: element (o, j, i) of
// index (o over dims before `dim`, i over dims after) maps to x offset outer[o] + index *
// x.stride(dim) + inner[i].
struct AlongDim {
  int64_t dim = 0;
  int64_t outer = 1;
  int64_t len = 1;
  int64_t inner = 1;
  std::vector<int64_t> outer_offsets;
  std::vector<int64_t> inner_offsets;
};

AlongDim along_dim(const Shape& index_shape, const Shape& x_strides, int64_t dim) {
  AlongDim a;
  a.dim = dim;
  const int64_t nd = static_cast<int64_t>(index_shape.size());
  for (int64_t d = 0; d < dim; ++d) a.outer *= index_shape[d];
  a.len = index_shape[dim];
  for (int64_t d = dim + 1; d < nd; ++d) a.inner *= index_shape[d];
  a.outer_offsets = element_offsets(index_shape, x_strides, 0, dim);
  a.inner_offsets = element_offsets(index_shape, x_strides, dim + 1, nd);
  return a;
}

// A 0-d tensor as a 1-element 1-d view (Gather and Scatter treat 0-d operands as rank 1).
Tensor at_least_1d(const Tensor& t) { return t.ndim() == 0 ? t.reshape({1}) : t; }

// Checks index/x (and src) ranks and sizes as torch.gather and torch.scatter do.
int64_t check_along_dim(const char* op, const InferContext& ctx, const TensorMeta& x,
                        const TensorMeta& index) {
  check_index_dtype(op, index);
  const int64_t dim = wrap_dim(ctx.attrs.get<int64_t>("dim"), x.ndim());
  KILN_CHECK_SHAPE(index.ndim() == x.ndim())
      << op << ": expected an index with as many dimensions as x (" << x.ndim() << "), got "
      << index.ndim() << " (x " << shape_str(x.shape) << ", index " << shape_str(index.shape)
      << ")";
  for (int64_t d = 0; d < x.ndim(); ++d) {
    KILN_CHECK_SHAPE(d == dim || index.shape[d] <= x.shape[d])
        << op << ": expected index size <= " << x.shape[d] << " in dimension " << d << " (x "
        << shape_str(x.shape) << "), got " << index.shape[d] << " (index " << shape_str(index.shape)
        << ")";
  }
  return dim;
}

// Gradient rules (see Note [Gradient rules] in ops/grad_util.h). What a gather-like op reads, its
// gradient scatter-adds back (indices read twice sum their gradients); index tensors get none.

std::vector<Tensor> index_select_grad(const std::vector<Tensor>& in, const Tensor&,
                                      const Attrs& attrs, const Tensor& g) {
  const Tensor& x = in[0];
  if (!detail::differentiable(x)) return {Tensor(), Tensor()};
  const int64_t dim = wrap_dim(attrs.get<int64_t>("dim"), x.ndim());
  // The index along dim, broadcast over g's other dims.
  Shape along(static_cast<size_t>(x.ndim()), 1);
  along[static_cast<size_t>(dim)] = in[1].numel();
  const Tensor index = expand(reshape(in[1], along), g.shape());
  return {to(scatter(zeros_like(x, g.dtype()), dim, index, g, "add"), x.dtype()), Tensor()};
}

KILN_REGISTER_OP(
    OpDef("IndexSelect")
        .input("x")
        .input("index")
        .attr("dim", AttrKind::kInt)
        .doc("elements of x at the positions in the 1-d `index` along `dim`")
        .infer([](const InferContext& ctx) {
          const TensorMeta& x = ctx.input(0);
          const TensorMeta& index = ctx.input(1);
          check_index_dtype("IndexSelect", index);
          KILN_CHECK_SHAPE(x.ndim() > 0) << "IndexSelect: expected x with at least one "
                                         << "dimension, got a 0-d tensor";
          KILN_CHECK_SHAPE(index.ndim() <= 1)
              << "IndexSelect: expected a 0-d or 1-d index, got shape " << shape_str(index.shape);
          Shape shape = x.shape;
          shape[wrap_dim(ctx.attrs.get<int64_t>("dim"), x.ndim())] = index.numel();
          return MetaList{{x.dtype, shape}};
        })
        .grad(detail::one_output_rule(index_select_grad))
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor& x = ctx.inputs[0];
          const int64_t dim = wrap_dim(ctx.attrs.get<int64_t>("dim"), x.ndim());
          const int64_t m = ctx.inputs[1].numel();
          const int64_t n = x.shape()[dim];
          const Tensor idx = load_index("IndexSelect", ctx.inputs[1], {m}, dim, n);
          if (ctx.outputs[0].numel() == 0) return;
          const std::vector<int64_t> outer = element_offsets(x.shape(), x.strides(), 0, dim);
          const RowLayout layout = row_layout(x, dim + 1);
          const int64_t* ip = idx.data<int64_t>();
          const int64_t step = x.strides()[dim];
          const char* src = static_cast<const char*>(x.data_ptr());
          char* dst = static_cast<char*>(ctx.outputs[0].data_ptr());
          const int64_t rows = static_cast<int64_t>(outer.size()) * m;
          visit_itemsize(x.itemsize(), [&](auto size) {
            constexpr int64_t kSize = static_cast<int64_t>(decltype(size)::value);
            const int64_t row_bytes = layout.numel * kSize;
            parallel_for(0, rows, row_grain(layout.numel, kSize), [&](int64_t lo, int64_t hi) {
              // Row r is (o, j): outer index o, index position j.
              int64_t o = lo / m;
              int64_t j = lo % m;
              for (int64_t r = lo; r < hi; ++r) {
                copy_row<kSize>(dst + r * row_bytes,
                                src + (outer[o] + wrap_index(ip[j], n) * step) * kSize, layout);
                if (++j == m) {
                  j = 0;
                  ++o;
                }
              }
            });
          });
        }));

KILN_REGISTER_OP(OpDef("Gather")
                     .input("x")
                     .input("index")
                     .attr("dim", AttrKind::kInt)
                     .doc("out[i][j] = x[index[i][j]][j] for dim 0, and so on (torch.gather)")
                     .infer([](const InferContext& ctx) {
                       const TensorMeta& x = ctx.input(0);
                       check_along_dim("Gather", ctx, x, ctx.input(1));
                       return MetaList{{x.dtype, ctx.input(1).shape}};
                     })
                     .grad(detail::one_output_rule([](const std::vector<Tensor>& in, const Tensor&,
                                                      const Attrs& attrs, const Tensor& g) {
                       const Tensor& x = in[0];
                       if (!detail::differentiable(x)) return std::vector<Tensor>(2);
                       const Tensor gx = scatter(zeros_like(x, g.dtype()), attrs.get<int64_t>("dim"),
                                                 in[1], g, "add");
                       return std::vector<Tensor>{to(gx, x.dtype()), Tensor()};
                     }))
                     .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
                       const Tensor x = at_least_1d(ctx.inputs[0]);
                       const Tensor index = at_least_1d(ctx.inputs[1]);
                       const int64_t dim = wrap_dim(ctx.attrs.get<int64_t>("dim"), x.ndim());
                       const int64_t n = x.shape()[dim];
                       const Tensor idx = load_index("Gather", index, index.shape(), dim, n);
                       if (idx.numel() == 0) return;
                       const AlongDim a = along_dim(index.shape(), x.strides(), dim);
                       const int64_t* ip = idx.data<int64_t>();
                       const int64_t step = x.strides()[dim];
                       const char* src = static_cast<const char*>(x.data_ptr());
                       char* dst = static_cast<char*>(ctx.outputs[0].data_ptr());
                       visit_itemsize(x.itemsize(), [&](auto size) {
                         constexpr int64_t kSize = static_cast<int64_t>(decltype(size)::value);
                         const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / a.inner);
                         parallel_for(0, a.outer * a.len, grain, [&](int64_t lo, int64_t hi) {
                           // Row r is (o, j); its `inner` elements are contiguous in out.
                           int64_t o = lo / a.len;
                           int64_t j = lo % a.len;
                           for (int64_t r = lo; r < hi; ++r) {
                             const int64_t* row = ip + r * a.inner;
                             char* to = dst + r * a.inner * kSize;
                             for (int64_t i = 0; i < a.inner; ++i) {
                               const int64_t from = a.outer_offsets[o] +
                                                    wrap_index(row[i], n) * step +
                                                    a.inner_offsets[i];
                               std::memcpy(to + i * kSize, src + from * kSize, kSize);
                             }
                             if (++j == a.len) {
                               j = 0;
                               ++o;
                             }
                           }
                         });
                       });
                     }));

// Integer reductions wrap (as NumPy's do) instead of overflowing, which would be undefined.
template <typename T>
T combine(T a, T b, bool multiply) {
  if constexpr (std::is_same_v<T, bool>) {
    return multiply ? (a && b) : (a || b);
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    const U ua = static_cast<U>(a);
    const U ub = static_cast<U>(b);
    return static_cast<T>(multiply ? static_cast<U>(ua * ub) : static_cast<U>(ua + ub));
  } else {
    return static_cast<T>(multiply ? a * b : a + b);
  }
}

void scatter_kernel(KernelContext& ctx) {
  const Tensor x = at_least_1d(ctx.inputs[0]);
  const Tensor index = at_least_1d(ctx.inputs[1]);
  const Tensor& src = ctx.inputs[2];
  const Tensor out = at_least_1d(ctx.outputs[0]);
  const int64_t dim = wrap_dim(ctx.attrs.get<int64_t>("dim"), x.ndim());
  const std::string reduce = ctx.attrs.get<std::string>("reduce");
  const int64_t n = x.shape()[dim];
  const Tensor idx = load_index("Scatter", index, index.shape(), dim, n);
  // Reductions run in the compute dtype (float32 for the 16-bit floats) and round once.
  const DType acc_dtype = reduce == "none" ? x.dtype() : compute_dtype(x.dtype());
  const Tensor acc = acc_dtype == out.dtype() ? out : Tensor::empty(x.shape(), acc_dtype);
  copy_into(acc, x);
  // The scattered values, in index's shape and the accumulator's dtype.
  Tensor values = Tensor::empty(index.shape(), acc_dtype);
  Tensor source = src;
  if (src.ndim() > 0) {
    for (int64_t d = 0; d < src.ndim(); ++d) source = source.narrow(d, 0, index.shape()[d]);
  }
  copy_into(values, source);
  if (idx.numel() == 0) return;
  const AlongDim a = along_dim(index.shape(), acc.strides(), dim);
  const int64_t* ip = idx.data<int64_t>();
  const int64_t step = acc.strides()[dim];
  const bool assign = reduce == "none";
  const bool multiply = reduce == "multiply";
  // Columns (o, i) write disjoint elements, so blocks of columns run in parallel; along `dim` the
  // writes run in order, which makes duplicate indices deterministic (the last one wins for
  // "none"). Within a block, i is the inner loop so index and values are read contiguously.
  constexpr int64_t kBlock = 1024;
  const int64_t blocks = (a.inner + kBlock - 1) / kBlock;
  const int64_t grain =
      std::max<int64_t>(1, kElementwiseGrain / (a.len * std::min(a.inner, kBlock)));
  visit_dtype(acc_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dst = acc.data<T>();
    const T* vp = values.data<T>();
    parallel_for(0, a.outer * blocks, grain, [&](int64_t lo, int64_t hi) {
      for (int64_t task = lo; task < hi; ++task) {
        const int64_t o = task / blocks;
        const int64_t i0 = (task % blocks) * kBlock;
        const int64_t i1 = std::min(a.inner, i0 + kBlock);
        for (int64_t j = 0; j < a.len; ++j) {
          const int64_t e0 = (o * a.len + j) * a.inner;
          for (int64_t i = i0; i < i1; ++i) {
            T& target =
                dst[a.outer_offsets[o] + wrap_index(ip[e0 + i], n) * step + a.inner_offsets[i]];
            target = assign ? vp[e0 + i] : combine(target, vp[e0 + i], multiply);
          }
        }
      }
    });
  });
  if (!acc.is_same(out)) copy_into(out, acc);
}

// x's gradient is g where nothing was written ("none") or all of g ("add"); src's is g gathered at
// the index, zero-padded to src's shape (src may be larger than index) or summed for a 0-d src.
std::vector<Tensor> scatter_grad(const std::vector<Tensor>& in, const Tensor&, const Attrs& attrs,
                                 const Tensor& g) {
  const Tensor& x = in[0];
  const Tensor& index = in[1];
  const Tensor& src = in[2];
  const int64_t dim = attrs.get<int64_t>("dim");
  const std::string reduce = attrs.get<std::string>("reduce");
  KILN_CHECK_KIND(ErrorKind::kNotImplemented, reduce != "multiply")
      << "Scatter: the gradient of reduce='multiply' is not implemented";
  Tensor gx;
  if (detail::differentiable(x)) {
    gx = reduce == "add" ? g : scatter(g, dim, index, zeros({}, g.dtype()));
  }
  Tensor gsrc;
  if (detail::differentiable(src)) {
    gsrc = gather(g, dim, index);
    if (src.ndim() == 0) {
      gsrc = sum(gsrc);
    } else if (src.shape() != index.shape()) {
      std::vector<int64_t> pads;  // (before, after) from the last dim, as pad() takes them
      for (int64_t d = src.ndim() - 1; d >= 0; --d) {
        pads.push_back(0);
        pads.push_back(src.shape()[d] - index.shape()[d]);
      }
      gsrc = pad(gsrc, pads);
    }
  }
  return {detail::input_grad(gx, x), Tensor(), detail::input_grad(gsrc, src)};
}

KILN_REGISTER_OP(
    OpDef("Scatter")
        .input("x")
        .input("index")
        .input("src")
        .attr("dim", AttrKind::kInt)
        .attr("reduce", AttrKind::kString, AttrValue{std::string("none")})
        .doc("a copy of x with src written (or added, or multiplied) at index along dim")
        .infer([](const InferContext& ctx) {
          const TensorMeta& x = ctx.input(0);
          const TensorMeta& index = ctx.input(1);
          const TensorMeta& src = ctx.input(2);
          check_along_dim("Scatter", ctx, x, index);
          const std::string reduce = ctx.attrs.get<std::string>("reduce");
          KILN_CHECK_VALUE(reduce == "none" || reduce == "add" || reduce == "multiply")
              << "Scatter: expected reduce 'none', 'add' or 'multiply', got '" << reduce << "'";
          if (src.ndim() > 0) {
            KILN_CHECK_SHAPE(src.ndim() == index.ndim())
                << "Scatter: expected src with as many dimensions as index (" << index.ndim()
                << ") or a 0-d src, got shape " << shape_str(src.shape);
            for (int64_t d = 0; d < src.ndim(); ++d) {
              KILN_CHECK_SHAPE(src.shape[d] >= index.shape[d])
                  << "Scatter: expected src size >= " << index.shape[d] << " in dimension " << d
                  << " (index " << shape_str(index.shape) << "), got " << src.shape[d] << " (src "
                  << shape_str(src.shape) << ")";
            }
          }
          return MetaList{{x.dtype, x.shape}};
        })
        .grad(detail::one_output_rule(scatter_grad))
        .kernel(DeviceType::kCPU, scatter_kernel));

KILN_REGISTER_OP(OpDef("MaskedFill")
                     .input("x")
                     .input("mask")
                     .attr("value", AttrKind::kScalar)
                     .traits(kTraitElementwise)
                     .doc("x where mask is false, value where it is true (mask broadcasts to x)")
                     .infer([](const InferContext& ctx) {
                       const TensorMeta& x = ctx.input(0);
                       const TensorMeta& mask = ctx.input(1);
                       KILN_CHECK_DTYPE(mask.dtype == DType::kBool)
                           << "MaskedFill: expected a bool mask, got " << dtype_name(mask.dtype);
                       KILN_CHECK_SHAPE(broadcasts_to(mask.shape, x.shape))
                           << "MaskedFill: expected a mask that broadcasts to x's shape "
                           << shape_str(x.shape) << ", got shape " << shape_str(mask.shape);
                       const Scalar value = ctx.attrs.get<Scalar>("value");
                       const double v = value.to_double();
                       // Converting a non-finite or huge float to an integer is undefined: refuse
                       // it.
                       KILN_CHECK_VALUE(!value.is_floating_point() || is_floating_point(x.dtype) ||
                                        (std::isfinite(v) && std::fabs(v) < 9.2e18))
                           << "MaskedFill: cannot fill a " << dtype_name(x.dtype) << " tensor with "
                           << v;
                       return MetaList{{x.dtype, x.shape}};
                     })
                     .grad(detail::one_output_rule([](const std::vector<Tensor>& in, const Tensor&,
                                                      const Attrs&, const Tensor& g) {
                       const Tensor kept = where(in[1], Tensor::scalar(0.0), g);
                       return std::vector<Tensor>{detail::input_grad(kept, in[0]), Tensor()};
                     }))
                     .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
                       const Tensor& out = ctx.outputs[0];
                       const Scalar value = ctx.attrs.get<Scalar>("value");
                       visit_dtype(out.dtype(), [&](auto tag) {
                         using T = typename decltype(tag)::type;
                         T fill = value.to<T>();
                         const Tensor fill_tensor = Tensor::from_blob(&fill, {}, out.dtype());
                         elementwise::run_select(out, ctx.inputs[1], fill_tensor, ctx.inputs[0]);
                       });
                     }));

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
  Shape flat_g{-1};
  flat_g.insert(flat_g.end(), rest.begin(), rest.end());
  const Tensor g_rows = reshape(g, flat_g);
  Shape along(rest.size() + 1, 1);
  along[0] = -1;
  const Tensor index = expand(reshape(expand(row, index_shape(in, 1)), along), g_rows.shape());
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

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  static const OpDefPtr op = OpRegistry::Instance().get("IndexSelect");
  return call_op(*op, {x, index}, {{"dim", dim}})[0];
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  static const OpDefPtr op = OpRegistry::Instance().get("Gather");
  return call_op(*op, {x, index}, {{"dim", dim}})[0];
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
               const std::string& reduce) {
  static const OpDefPtr op = OpRegistry::Instance().get("Scatter");
  return call_op(*op, {x, index, src}, {{"dim", dim}, {"reduce", reduce}})[0];
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value) {
  static const OpDefPtr op = OpRegistry::Instance().get("MaskedFill");
  return call_op(*op, {x, mask}, {{"value", value}})[0];
}

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
