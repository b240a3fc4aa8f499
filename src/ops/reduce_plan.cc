// Argument checks and layout planning shared by the reduction ops (see ops/reduce.h).
//
// Note [Deterministic reductions]
// Floating-point addition is not associative, so a reduction's result depends on how its
// elements are grouped. The drivers in reduce.h group by shape alone: a run longer than
// kReduceChunk is cut into fixed chunks of kReduceChunk elements (a column reduction into fixed
// spans of rows), each chunk gives one partial, and partials are merged in chunk order on one
// thread. Threads only decide who computes which partial, never how partials combine, so a result
// is bit-identical run to run and for any number of threads. The chunks double as the parallel
// split of a full reduction (16M elements are 1024 chunks).
//
// Note [Column reductions]
// Reducing an outer dim of a contiguous tensor ([outer, len, inner], reducing len) must not walk
// columns with a stride: that defeats the prefetchers and vector units. A work item instead owns
// a tile of up to kColumnTile columns and adds whole row segments into an accumulator row, the
// way one adds vectors. When there are too few tiles to keep threads busy (a [4096, 4096] sum over
// dim 0 has two), the rows are split into chunks of at least 64 rows (and kReduceChunk elements)
// whose partial accumulator rows are merged in order, aiming at 64 work items. The split is a
// function of the shape alone, so the result is still independent of the thread count.
#include <algorithm>

#include "ops/reduce.h"

namespace kiln::detail {

int64_t column_chunks(int64_t blocks, int64_t len, int64_t tile) {
  constexpr int64_t kTargetItems = 64;
  constexpr int64_t kMinRows = 64;
  if (blocks >= kTargetItems) return 1;
  const int64_t min_rows = std::max(kMinRows, (kReduceChunk + tile - 1) / tile);
  const int64_t max_chunks = std::max<int64_t>(1, len / min_rows);
  return std::min(max_chunks, (kTargetItems + blocks - 1) / blocks);
}

std::vector<bool> reduction_mask(const std::string& op, int64_t ndim,
                                 const std::vector<int64_t>& dims) {
  std::vector<bool> mask(static_cast<size_t>(ndim), dims.empty());
  const std::string what = op + ": dim";
  std::vector<int64_t> seen;
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, ndim, what.c_str());
    KILN_CHECK_VALUE(std::find(seen.begin(), seen.end(), w) == seen.end())
        << op << ": expected each dim at most once, got dim " << d << " twice in dims "
        << shape_str(dims);
    seen.push_back(w);
    if (ndim > 0) mask[static_cast<size_t>(w)] = true;
  }
  return mask;
}

Shape reduced_shape(const Shape& shape, const std::vector<bool>& mask, bool keepdim) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!mask[d]) {
      out.push_back(shape[d]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

int64_t reduced_count(const Shape& shape, const std::vector<bool>& mask) {
  int64_t n = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (mask[d]) n *= shape[d];
  }
  return n;
}

void check_nonempty_reduction(const std::string& op, const Shape& shape,
                              const std::vector<bool>& mask) {
  for (size_t d = 0; d < shape.size(); ++d) {
    KILN_CHECK_VALUE(!mask[d] || shape[d] != 0)
        << op << ": cannot reduce over an empty dimension: expected dim " << d << " of shape "
        << shape_str(shape) << " to have a nonzero size, got 0";
  }
}

Tensor converted(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Tensor copy = Tensor::empty(x.shape(), dtype);
  copy_into(copy, x);
  return copy;
}

ReduceArgs reduce_args(const std::string& op, const Shape& input, const Attrs& attrs) {
  ReduceArgs args;
  args.mask = reduction_mask(op, static_cast<int64_t>(input.size()),
                             attrs.get<std::vector<int64_t>>("dims"));
  args.shape = reduced_shape(input, args.mask, attrs.get<bool>("keepdim"));
  return args;
}

namespace {

int dtype_kind(DType d) { return d == DType::kBool ? 0 : (is_floating_point(d) ? 2 : 1); }

}  // namespace

void check_accumulate_dtype(const std::string& op, DType input, DType requested) {
  KILN_CHECK_DTYPE(requested != DType::kBool)
      << op << ": expected an integer or floating dtype, got bool";
  KILN_CHECK_DTYPE(dtype_kind(requested) >= dtype_kind(input))
      << op << ": expected a dtype that can hold " << input << " values without changing kind ("
      << (is_floating_point(input) ? "floating point" : "integer or floating point") << "), got "
      << requested;
}

DType accumulate_dtype(DType input, const Attrs& attrs) {
  if (!attrs.is_none("dtype")) return attrs.get<DType>("dtype");
  return is_floating_point(input) ? input : DType::kInt64;
}

namespace {

// One dimension of size > 1 as the planner sees it.
struct DimInfo {
  int64_t dim;
  int64_t size;
  int64_t stride;
  bool reduced;
};

int64_t product(const std::vector<DimInfo>& dims, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= dims[i].size;
  return n;
}

// True when `dims` (outermost first) tile memory densely: strides are row-major for the sizes.
bool is_dense(const std::vector<DimInfo>& dims, const std::vector<int64_t>& strides) {
  int64_t expected = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    if (strides[i] != expected) return false;
    expected *= dims[i].size;
  }
  return true;
}

// Tries the copy-free plan: `x` is a dense permutation of a contiguous tensor and the reduced
// dims are adjacent in memory. Returns false when not possible.
bool plan_in_place(const Tensor& x, const std::vector<bool>& mask,
                   const std::vector<Tensor>& outputs, bool keep_order, ReduceLayout* layout) {
  std::vector<DimInfo> dims;
  for (int64_t d = 0; d < x.ndim(); ++d) {
    if (x.shape()[d] != 1) {
      dims.push_back({d, x.shape()[d], x.strides()[d], mask[static_cast<size_t>(d)]});
    }
  }
  // Output strides of the kept dims, in logical order (outputs are contiguous).
  std::vector<int64_t> out_stride(static_cast<size_t>(x.ndim()), 0);
  int64_t running = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    if (!dims[i].reduced) {
      out_stride[static_cast<size_t>(dims[i].dim)] = running;
      running *= dims[i].size;
    }
  }
  std::stable_sort(dims.begin(), dims.end(),
                   [](const DimInfo& a, const DimInfo& b) { return a.stride > b.stride; });
  std::vector<int64_t> strides;
  for (const DimInfo& d : dims) strides.push_back(d.stride);
  if (!is_dense(dims, strides)) return false;
  size_t first = dims.size();
  size_t last = dims.size();
  int64_t previous_reduced = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (!dims[i].reduced) continue;
    if (first == dims.size()) {
      first = i;
    } else if (last != i) {
      return false;  // a kept dim sits between two reduced ones
    }
    if (keep_order && dims[i].dim < previous_reduced) return false;
    previous_reduced = dims[i].dim;
    last = i + 1;
  }
  if (first == dims.size()) first = last = dims.size();
  layout->input = x;
  layout->data = x.data_ptr();
  layout->outer = product(dims, 0, first);
  layout->reduce = product(dims, first, last);
  layout->inner = product(dims, last, dims.size());
  // The kernel writes outputs in memory order of the kept dims; when that is not their logical
  // order, it writes a buffer that finish() copies into a permuted view of the output.
  Shape kept_sizes;
  Shape kept_strides;
  for (const DimInfo& d : dims) {
    if (!d.reduced) {
      kept_sizes.push_back(d.size);
      kept_strides.push_back(out_stride[static_cast<size_t>(d.dim)]);
    }
  }
  const bool in_order = std::is_sorted(kept_strides.rbegin(), kept_strides.rend());
  for (const Tensor& out : outputs) {
    if (in_order) {
      layout->buffers.push_back(out);
      layout->targets.emplace_back();
    } else {
      layout->buffers.push_back(Tensor::empty({out.numel()}, out.dtype()));
      layout->targets.push_back(out.as_strided(kept_sizes, kept_strides, out.storage_offset()));
    }
  }
  return true;
}

}  // namespace

ReduceLayout plan_reduction(const Tensor& x, const std::vector<bool>& mask,
                            const std::vector<Tensor>& outputs, bool keep_order) {
  ReduceLayout layout;
  if (x.numel() > 0 && plan_in_place(x, mask, outputs, keep_order, &layout)) return layout;
  // The general case: kept dims first, reduced dims last, each in logical order, copied.
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < x.ndim(); ++d) {
    if (!mask[static_cast<size_t>(d)]) perm.push_back(d);
  }
  for (int64_t d = 0; d < x.ndim(); ++d) {
    if (mask[static_cast<size_t>(d)]) perm.push_back(d);
  }
  layout.reduce = reduced_count(x.shape(), mask);
  layout.outer = shape_numel(reduced_shape(x.shape(), mask, false));
  if (x.numel() > 0) {
    layout.input = x.permute(perm).contiguous();
    layout.data = layout.input.data_ptr();
  }
  layout.buffers = outputs;
  layout.targets.resize(outputs.size());
  return layout;
}

void ReduceLayout::finish() const {
  for (size_t i = 0; i < targets.size(); ++i) {
    if (targets[i].defined()) copy_into(targets[i], buffers[i].view(targets[i].shape()));
  }
}

AxisLayout plan_axis(const Tensor& x, int64_t dim) {
  AxisLayout layout;
  layout.input = x.contiguous();
  for (int64_t d = 0; d < x.ndim(); ++d) {
    if (d < dim) {
      layout.outer *= x.shape()[d];
    } else if (d == dim) {
      layout.len = x.shape()[d];
    } else {
      layout.inner *= x.shape()[d];
    }
  }
  return layout;
}

}  // namespace kiln::detail
