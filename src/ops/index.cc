// Integer indexing along one dimension: IndexSelect, Gather (and GatherBackward), Scatter, and
// MaskedFill (Index and IndexPut, NumPy's advanced indexing, are in index_advanced.cc).
//
// Every index is checked before anything is written, so a failed call leaves its inputs untouched;
// the error names the bad value, the dimension and its size (ops/index_rows.h).
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
#include "kiln/functional/nn.h"
#include "kiln/functional/reduce.h"
#include "kiln/functional/shape.h"
#include "kiln/op.h"
#include "kiln/parallel.h"
#include "ops/dtype_convert.h"
#include "ops/elementwise.h"
#include "ops/grad_util.h"
#include "ops/index_rows.h"
#include "ops/scalar_range.h"

namespace kiln {
namespace {

using indexing::broadcasts_to;
using indexing::check_index_dtype;
using indexing::copy_row;
using indexing::element_offsets;
using indexing::load_index;
using indexing::row_grain;
using indexing::row_layout;
using indexing::RowLayout;
using indexing::visit_itemsize;
using indexing::wrap_index;

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
  const int64_t n = x.size(dim);
  // With dim first, g is rows that add into x's rows at the (wrapped) positions: the embedding
  // table's gradient, whose kernel owns whole columns per thread.
  std::vector<int64_t> dim_first(static_cast<size_t>(x.ndim()));
  dim_first[0] = dim;
  int64_t rest = 1;  // elements of x per position along dim
  for (int64_t d = 0, k = 1; d < x.ndim(); ++d) {
    if (d == dim) continue;
    dim_first[static_cast<size_t>(k++)] = d;
    rest *= x.size(d);
  }
  Tensor positions = reshape(in[1], {-1});
  positions = where(lt(positions, Tensor::scalar(0)), positions + n, positions);
  const Tensor rows = reshape(permute(g, dim_first), {positions.numel(), rest});
  Shape moved = x.shape();
  std::rotate(moved.begin(), moved.begin() + dim, moved.begin() + dim + 1);
  std::vector<int64_t> back(static_cast<size_t>(x.ndim()));  // inverse of dim_first
  for (size_t k = 0; k < back.size(); ++k) back[static_cast<size_t>(dim_first[k])] = k;
  const Tensor gx = permute(reshape(embedding_backward(positions, rows, n), moved), back);
  return {to(gx, x.dtype()), Tensor()};
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
          // The element offset of each selected position along dim.
          std::vector<int64_t> at(static_cast<size_t>(m));
          const int64_t* ip = idx.data<int64_t>();
          for (int64_t j = 0; j < m; ++j) at[j] = wrap_index(ip[j], n) * x.strides()[dim];
          const char* src = static_cast<const char*>(x.data_ptr());
          char* dst = static_cast<char*>(ctx.outputs[0].data_ptr());
          const auto outer_count = static_cast<int64_t>(outer.size());
          visit_itemsize(x.itemsize(), [&](auto size) {
            constexpr int64_t kSize = static_cast<int64_t>(decltype(size)::value);
            if (layout.numel == 1) {  // the dims after dim hold one element: gathers
              parallel_for(0, outer_count * m, kElementwiseGrain, [&](int64_t lo, int64_t hi) {
                // Element r of the result is (o, j): outer index o, index position j.
                for (int64_t r = lo; r < hi;) {
                  const int64_t o = r / m;
                  const int64_t end = std::min(hi, (o + 1) * m);
                  const char* from = src + outer[o] * kSize;
                  for (int64_t j = r - o * m; r < end; ++r, ++j) {
                    std::memcpy(dst + r * kSize, from + at[j] * kSize, kSize);
                  }
                }
              });
            } else {
              const int64_t row_bytes = layout.numel * kSize;
              const int64_t grain = row_grain(layout.numel, kSize);
              parallel_for(0, outer_count * m, grain, [&](int64_t lo, int64_t hi) {
                // Row r is (o, j): outer index o, index position j.
                int64_t o = lo / m;
                int64_t j = lo % m;
                for (int64_t r = lo; r < hi; ++r) {
                  copy_row<kSize>(dst + r * row_bytes, src + (outer[o] + at[j]) * kSize, layout);
                  if (++j == m) {
                    j = 0;
                    ++o;
                  }
                }
              });
            }
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
                       return std::vector<Tensor>{
                           detail::input_grad(detail::gather_backward(
                                                  g, in[1], attrs.get<int64_t>("dim"), x.shape()),
                                              x),
                           Tensor()};
                     }))
                     .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
                       const Tensor x = at_least_1d(ctx.inputs[0]);
                       const Tensor index = at_least_1d(ctx.inputs[1]);
                       const int64_t dim = wrap_dim(ctx.attrs.get<int64_t>("dim"), x.ndim());
                       const int64_t n = x.shape()[dim];
                       const Tensor idx = load_index("Gather", index, index.shape(), dim, n);
                       if (idx.numel() == 0) return;
                       const AlongDim a = along_dim(index.shape(), x.strides(), dim);
                       const int64_t* indices = idx.data<int64_t>();
                       const int64_t step = x.strides()[dim];
                       const char* from_bytes = static_cast<const char*>(x.data_ptr());
                       char* to_bytes = static_cast<char*>(ctx.outputs[0].data_ptr());
                       visit_itemsize(x.itemsize(), [&](auto size) {
                         constexpr int64_t kSize = static_cast<int64_t>(decltype(size)::value);
                         const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / a.inner);
                         parallel_for(0, a.outer * a.len, grain, [&](int64_t lo, int64_t hi) {
                           // In locals: the byte copies below may alias any memory, so anything
                           // read through a capture would be read again after each of them.
                           const int64_t len = a.len, inner = a.inner, size = n, stride = step;
                           const int64_t* outer_offsets = a.outer_offsets.data();
                           const int64_t* inner_offsets = a.inner_offsets.data();
                           const int64_t* ip = indices;
                           const char* src = from_bytes;
                           char* dst = to_bytes;
                           if (inner == 1) {  // along the last dim: one element per (o, j)
                             for (int64_t r = lo; r < hi;) {
                               const int64_t o = r / len;
                               const int64_t end = std::min(hi, (o + 1) * len);
                               const char* base =
                                   src + (outer_offsets[o] + inner_offsets[0]) * kSize;
                               for (; r < end; ++r) {
                                 std::memcpy(dst + r * kSize,
                                             base + wrap_index(ip[r], size) * stride * kSize,
                                             kSize);
                               }
                             }
                             return;
                           }
                           // Row r is (o, j); its `inner` elements are contiguous in out.
                           int64_t o = lo / len;
                           int64_t j = lo % len;
                           for (int64_t r = lo; r < hi; ++r) {
                             const int64_t* row = ip + r * inner;
                             char* to = dst + r * inner * kSize;
                             const char* base = src + outer_offsets[o] * kSize;
                             for (int64_t i = 0; i < inner; ++i) {
                               const int64_t from =
                                   wrap_index(row[i], size) * stride + inner_offsets[i];
                               std::memcpy(to + i * kSize, base + from * kSize, kSize);
                             }
                             if (++j == len) {
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

// Sets each target element of dst that element e of the index addresses (AlongDim a; `step` is
// dst's stride along dim) to combine(target, values[e]). Columns (o, i) write disjoint elements,
// so blocks of columns run in parallel; along `dim` the writes run in order, which makes duplicate
// indices deterministic (the last one wins for an assignment). Within a block, i is the inner loop
// so index and values are read contiguously.
template <typename T, typename Combine>
void scatter_along(T* dst, const T* values, const int64_t* ip, const AlongDim& a, int64_t n,
                   int64_t step, Combine combine) {
  constexpr int64_t kBlock = 1024;
  const int64_t blocks = (a.inner + kBlock - 1) / kBlock;
  const int64_t grain =
      std::max<int64_t>(1, kElementwiseGrain / (a.len * std::min(a.inner, kBlock)));
  parallel_for(0, a.outer * blocks, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t task = lo; task < hi; ++task) {
      const int64_t o = task / blocks;
      const int64_t i0 = (task % blocks) * kBlock;
      const int64_t i1 = std::min(a.inner, i0 + kBlock);
      T* column = dst + a.outer_offsets[o];
      for (int64_t j = 0; j < a.len; ++j) {
        const int64_t e0 = (o * a.len + j) * a.inner;
        for (int64_t i = i0; i < i1; ++i) {
          T& target = column[wrap_index(ip[e0 + i], n) * step + a.inner_offsets[i]];
          target = combine(target, values[e0 + i]);
        }
      }
    }
  });
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
  if (src.is_weak_scalar()) {
    // A Python number takes x's dtype: it must fit, as masked_fill's and where's (300 into
    // uint8 wrapped to 44).
    const Scalar v = detail::scalar_value(src);
    KILN_CHECK_VALUE(detail::scalar_fits(x.dtype(), v))
        << "Scatter: the value " << v << " does not fit in " << dtype_name(x.dtype());
  }
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
  if (idx.numel() > 0) {
    const AlongDim a = along_dim(index.shape(), acc.strides(), dim);
    visit_dtype(acc_dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const auto write = [&](auto combine) {
        scatter_along(acc.data<T>(), values.data<T>(), idx.data<int64_t>(), a, n,
                      acc.strides()[dim], combine);
      };
      if (reduce == "none") {
        write([](T, T v) { return v; });
      } else {
        const bool multiply = reduce == "multiply";
        write([multiply](T t, T v) { return combine(t, v, multiply); });
      }
    });
  }
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
          // As PyTorch: a tensor src of another dtype is refused (converted, it silently wrapped
          // 300 into int8 and truncated 2.7); a number (weak) is converted to x's dtype.
          KILN_CHECK_DTYPE(src.weak || src.dtype == x.dtype)
              << "scatter: expected src of the input's dtype " << x.dtype << ", got " << src.dtype
              << " (convert it with src.to(" << x.dtype << "))";
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

// Gather's gradient: zeros of x's shape (`input_size`) with grad_output added at the index along
// dim (repeated indices sum), without the copy of a zero tensor that a Scatter into zeros makes.
// Linear in grad_output, and Gather's adjoint: each is the other's rule.
KILN_REGISTER_OP(
    OpDef("GatherBackward")
        .input("grad_output")
        .input("index")
        .attr("dim", AttrKind::kInt)
        .attr("input_size", AttrKind::kInts)
        .doc("Gather's gradient: zeros of input_size with grad_output added at index along dim")
        .infer([](const InferContext& ctx) {
          const TensorMeta& g = ctx.input(0);
          const TensorMeta& index = ctx.input(1);
          const std::vector<int64_t> size = ctx.attrs.get<std::vector<int64_t>>("input_size");
          KILN_CHECK_SHAPE(std::all_of(size.begin(), size.end(), [](int64_t d) { return d >= 0; }))
              << "GatherBackward: expected input_size of non-negative sizes, got "
              << shape_str(size);
          const TensorMeta x(g.dtype, Shape(size.begin(), size.end()));
          check_along_dim("GatherBackward", ctx, x, index);
          KILN_CHECK_SHAPE(g.shape == index.shape)
              << "GatherBackward: expected grad_output of index's shape " << shape_str(index.shape)
              << ", got " << shape_str(g.shape);
          KILN_CHECK_DTYPE(is_floating_point(g.dtype))
              << "GatherBackward: expected a floating-point grad_output, got " << g.dtype;
          return MetaList{x};
        })
        .grad(detail::one_output_rule([](const std::vector<Tensor>& in, const Tensor&,
                                         const Attrs& attrs, const Tensor& g) {
          if (!detail::differentiable(in[0])) return std::vector<Tensor>(2);
          return std::vector<Tensor>{
              detail::input_grad(gather(g, attrs.get<int64_t>("dim"), in[1]), in[0]), Tensor()};
        }))
        .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
          const Tensor out = at_least_1d(ctx.outputs[0]);
          const Tensor index = at_least_1d(ctx.inputs[1]);
          const int64_t dim = wrap_dim(ctx.attrs.get<int64_t>("dim"), out.ndim());
          const int64_t n = out.shape()[dim];
          const Tensor idx = load_index("GatherBackward", index, index.shape(), dim, n);
          // Sums run in the compute dtype (float32 for the 16-bit floats) and round once.
          const DType cd = compute_dtype(out.dtype());
          const Tensor acc = out.dtype() == cd ? out : Tensor::empty(out.shape(), cd);
          const Tensor values = contiguous_as(at_least_1d(ctx.inputs[0]), cd);
          visit_compute_float(cd, [&](auto zero) {
            using C = decltype(zero);
            C* dst = acc.data<C>();
            parallel_for(0, acc.numel(), kElementwiseGrain,
                         [&](int64_t lo, int64_t hi) { std::fill(dst + lo, dst + hi, C(0)); });
            if (idx.numel() == 0) return;
            scatter_along(dst, values.data<C>(), idx.data<int64_t>(),
                          along_dim(index.shape(), acc.strides(), dim), n, acc.strides()[dim],
                          [](C t, C v) { return t + v; });
          });
          if (!acc.is_same(out)) copy_into(out, acc);
        }));

KILN_REGISTER_OP(OpDef("MaskedFill")
                     .input("x")
                     .input("mask")
                     .attr("value", AttrKind::kScalar)
                     // (the gradient reads only the mask)
                     .traits(kTraitElementwise | kTraitInPlace | kTraitGradIgnoresFirstInput)
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
                       KILN_CHECK_VALUE(detail::scalar_fits(x.dtype, value))
                           << "MaskedFill: the value " << value << " does not fit in "
                           << dtype_name(x.dtype);
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

}  // namespace

namespace detail {

Tensor gather_backward(const Tensor& g, const Tensor& index, int64_t dim,
                       const Shape& input_shape) {
  static const OpDefPtr op = OpRegistry::Instance().get("GatherBackward");
  return call_op(*op, {g, index},
                 {{"dim", dim},
                  {"input_size", std::vector<int64_t>(input_shape.begin(), input_shape.end())}})[0];
}

}  // namespace detail

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

}  // namespace kiln
