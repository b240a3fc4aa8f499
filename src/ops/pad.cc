// Padding and triangles: Pad (constant, reflect, replicate, circular), Tril, Triu.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/dtype_dispatch.h"
#include "kiln/functional/elementwise.h"
#include "kiln/functional/factory.h"
#include "kiln/functional/shape.h"
#include "kiln/op.h"
#include "kiln/parallel.h"
#include "ops/grad_util.h"
#include "ops/scalar_range.h"

namespace kiln {
namespace {

// Elements per parallel chunk of copy-like loops.
constexpr int64_t kCopyGrain = int64_t{1} << 15;

// (before, after) padding of every dim of an ndim-d tensor from torch-style `pads` (pairs from the
// last dim backwards); dims the list does not reach get (0, 0).
std::vector<std::pair<int64_t, int64_t>> per_dim_pads(const std::vector<int64_t>& pads,
                                                      int64_t ndim) {
  std::vector<std::pair<int64_t, int64_t>> out(static_cast<size_t>(ndim), {0, 0});
  for (size_t i = 0; i + 1 < pads.size(); i += 2) {
    out[static_cast<size_t>(ndim) - 1 - i / 2] = {pads[i], pads[i + 1]};
  }
  return out;
}

MetaList infer_pad(const InferContext& ctx) {
  const TensorMeta& x = ctx.input(0);
  const auto pads = ctx.attrs.get<std::vector<int64_t>>("pads");
  const std::string mode = ctx.attrs.get<std::string>("mode");
  KILN_CHECK_VALUE(mode == "constant" || mode == "reflect" || mode == "replicate" ||
                   mode == "circular")
      << "Pad: expected mode 'constant', 'reflect', 'replicate' or 'circular', got '" << mode
      << "'";
  KILN_CHECK_VALUE(pads.size() % 2 == 0)
      << "Pad: expected (before, after) pairs, got an odd number of pads " << shape_str(pads);
  KILN_CHECK_VALUE(static_cast<int64_t>(pads.size()) <= 2 * x.ndim())
      << "Pad: expected at most " << 2 * x.ndim() << " pads for a " << x.ndim() << "-d tensor, got "
      << pads.size() << " " << shape_str(pads);
  const double value = ctx.attrs.get<double>("value");
  KILN_CHECK_VALUE(detail::double_fits(x.dtype, value))
      << "Pad: the value " << value << " does not fit in " << dtype_name(x.dtype);
  const auto per_dim = per_dim_pads(pads, x.ndim());
  Shape shape = x.shape;
  for (int64_t d = 0; d < x.ndim(); ++d) {
    const auto [before, after] = per_dim[d];
    const int64_t n = x.shape[d];
    if (mode != "constant") {
      KILN_CHECK_VALUE(before >= 0 && after >= 0)
          << "Pad: negative padding is only supported in constant mode, got " << shape_str(pads);
    }
    if (mode == "reflect") {
      KILN_CHECK_VALUE((before < n && after < n) || before + after == 0)
          << "Pad: reflect padding must be less than the dimension size: got (" << before << ", "
          << after << ") for dimension " << d << " of size " << n;
    }
    if (mode == "replicate") {
      KILN_CHECK_VALUE(n > 0 || before + after == 0)
          << "Pad: cannot replicate-pad the empty dimension " << d;
    }
    if (mode == "circular") {  // as PyTorch: the padding wraps around x at most once
      KILN_CHECK_VALUE(before <= n && after <= n)
          << "Pad: circular padding must be at most the dimension size: got (" << before << ", "
          << after << ") for dimension " << d << " of size " << n;
    }
    shape[d] = n + before + after;
    KILN_CHECK_SHAPE(shape[d] >= 0)
        << "Pad: padding (" << before << ", " << after << ") of dimension " << d << " of size " << n
        << " gives a negative size " << shape[d];
    // Each crop on its own stays within the dimension ([-2, 3] of one element cropped past its
    // start and then filled), as PyTorch requires.
    KILN_CHECK_SHAPE(n + before >= 0 && n + after >= 0)
        << "Pad: padding (" << before << ", " << after << ") crops dimension " << d << " of size "
        << n << " by more than its size";
  }
  return MetaList{{x.dtype, shape}};
}

// Pad's kernel. Output coordinate c of dim d reads x at index c - before_d; where that falls
// outside x, constant mode writes the value, reflect mirrors the index about the edge, replicate
// clamps it and circular wraps it around (negative constant pads crop: the first indices read lie
// past x's start). Each output row is written once: the columns that read x's row in order are one
// copy, the few others fill or look their element up. (Filling the whole output and copying x over
// it wrote the inside twice: 0.72x-0.86x of PyTorch on [64, 64, 64] padded by one.)
void pad_kernel(const Tensor& x, const Tensor& out,
                const std::vector<std::pair<int64_t, int64_t>>& per_dim, const std::string& mode,
                double value) {
  const int64_t nd = x.ndim();
  if (out.numel() == 0) return;
  if (nd == 0) {
    copy_into(out, x);
    return;
  }
  constexpr int64_t kOutside = std::numeric_limits<int64_t>::min();
  // offsets[d][c]: the element offset into x that output coordinate c of dim d reads, or kOutside.
  std::vector<std::vector<int64_t>> offsets(static_cast<size_t>(nd));
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t n = x.shape()[d];
    for (int64_t c = 0; c < out.shape()[d]; ++c) {
      int64_t i = c - per_dim[d].first;
      if (i < 0 || i >= n) {
        if (mode == "reflect") {
          i = i < 0 ? -i : 2 * (n - 1) - i;
        } else if (mode == "replicate") {
          i = std::clamp<int64_t>(i, 0, n - 1);
        } else if (mode == "circular") {
          i = i < 0 ? i + n : i - n;  // at most one turn (infer_pad)
        } else {
          offsets[d].push_back(kOutside);
          continue;
        }
      }
      offsets[d].push_back(i * x.strides()[d]);
    }
  }
  const int64_t row = out.shape()[nd - 1];
  const int64_t rows = out.numel() / row;
  const int64_t before = per_dim[nd - 1].first;
  // The columns [middle_begin, middle_end) read x's row from index middle_begin - before on.
  const int64_t middle_begin = std::clamp<int64_t>(before, 0, row);
  const int64_t middle_end = std::clamp<int64_t>(before + x.shape()[nd - 1], 0, row);
  const int64_t step = x.strides()[nd - 1];
  const std::vector<int64_t>& last = offsets[nd - 1];
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T fill = mode == "constant" ? Scalar(value).to<T>() : T{};
    const T* src = x.data<T>();
    T* dst = out.data<T>();
    // Writes output row r, whose x row starts at element base of x (or is kOutside).
    const bool constant = mode == "constant";
    const auto write_row = [&](int64_t r, int64_t base) {
      T* o = dst + r * row;
      if (base == kOutside) {
        std::fill(o, o + row, fill);
        return;
      }
      const T* x_row = src + base;
      const T* run = x_row + (middle_begin - before) * step;
      T* run_out = o + middle_begin;
      const int64_t run_length = middle_end - middle_begin;
      if (step == 1) {
        std::copy(run, run + run_length, run_out);
      } else {
        for (int64_t k = 0; k < run_length; ++k) run_out[k] = run[k * step];
      }
      if (constant) {  // the columns outside the run are exactly those that read no element
        std::fill(o, run_out, fill);
        std::fill(run_out + run_length, o + row, fill);
      } else {
        for (int64_t k = 0; k < middle_begin; ++k) o[k] = x_row[last[k]];
        for (int64_t k = middle_end; k < row; ++k) o[k] = x_row[last[k]];
      }
    };
    // Rows go by planes (the second-to-last dim), so that a row's x offset is one addition to its
    // plane's: dividing a row's index into coordinates cost as much as copying a row of 64 floats.
    const int64_t plane_rows = nd >= 2 ? out.shape()[nd - 2] : 1;
    const std::vector<int64_t> no_plane_dim{0};
    const std::vector<int64_t>& in_plane = nd >= 2 ? offsets[nd - 2] : no_plane_dim;
    parallel_for(0, rows, std::max<int64_t>(1, kCopyGrain / row), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi;) {
        int64_t plane_base = 0;
        int64_t rest = r / plane_rows;
        for (int64_t d = nd - 3; d >= 0 && plane_base != kOutside; --d) {
          const int64_t offset = offsets[d][rest % out.shape()[d]];
          plane_base = offset == kOutside ? kOutside : plane_base + offset;
          rest /= out.shape()[d];
        }
        const int64_t first = r % plane_rows;
        const int64_t plane_end = std::min(hi, r - first + plane_rows);
        for (int64_t c = first; r < plane_end; ++r, ++c) {
          const int64_t offset = in_plane[c];
          write_row(r,
                    plane_base == kOutside || offset == kOutside ? kOutside : plane_base + offset);
        }
      }
    });
  });
}

// Gradient rule (see Note [Gradient rules] in ops/grad_util.h). Constant mode copies each element
// of x at most once: its gradient is g with the padding cropped off (and zeros where the forward
// cropped), Pad with the pads negated. Otherwise padding 0, 1, ..., numel - 1 in x's shape the
// same way names the element of x each output element copies; the gradient accumulates there
// (reflect, replicate and circular read elements several times).
std::vector<Tensor> pad_grad(const std::vector<Tensor>& in, const Tensor&, const Attrs& attrs,
                             const Tensor& g) {
  const Tensor& x = in[0];
  if (!detail::differentiable(x)) return {Tensor()};
  if (x.numel() == 0) return {zeros_like(x)};
  if (attrs.get<std::string>("mode") == "constant") {
    std::vector<int64_t> negated = attrs.get<std::vector<int64_t>>("pads");
    for (int64_t& p : negated) p = -p;
    return {to(pad(g, negated, "constant", 0.0), x.dtype())};
  }
  const Tensor positions =
      pad(reshape(arange(0, x.numel()), x.shape()), attrs.get<std::vector<int64_t>>("pads"),
          attrs.get<std::string>("mode"), -1.0);
  const Tensor copied = ge(positions, Tensor::scalar(0));
  const Tensor gx = detail::accumulate_at(where(copied, g, Tensor::scalar(0.0)),
                                          where(copied, positions, Tensor::scalar(0)), x);
  return {to(gx, x.dtype())};
}

KILN_REGISTER_OP(OpDef("Pad")
                     .input("x")
                     .attr("pads", AttrKind::kInts)
                     .attr("mode", AttrKind::kString, AttrValue{std::string("constant")})
                     .attr("value", AttrKind::kFloat, AttrValue{0.0})
                     .doc("x padded by (before, after) pairs from the last dim (as torch's F.pad); "
                          "constant mode accepts negative pads, which crop")
                     .infer(infer_pad)
                     .grad(detail::one_output_rule(pad_grad))
                     .kernel(DeviceType::kCPU, [](KernelContext& ctx) {
                       const Tensor& x = ctx.inputs[0];
                       const auto per_dim =
                           per_dim_pads(ctx.attrs.get<std::vector<int64_t>>("pads"), x.ndim());
                       pad_kernel(x, ctx.outputs[0], per_dim, ctx.attrs.get<std::string>("mode"),
                                  ctx.attrs.get<double>("value"));
                     }));

MetaList infer_triangle(const InferContext& ctx) {
  const TensorMeta& x = ctx.input(0);
  KILN_CHECK_SHAPE(x.ndim() >= 2) << ctx.op.name()
                                  << ": expected a tensor with at least 2 dimensions, got "
                                  << x.ndim() << "-d shape " << shape_str(x.shape);
  return MetaList{{x.dtype, x.shape}};
}

// Copies x, then zeroes each row's columns outside the kept triangle. All-zero bytes are zero in
// every Kiln dtype, so the zeroing is a memset.
void triangle_kernel(KernelContext& ctx, bool lower) {
  const Tensor& out = ctx.outputs[0];
  copy_into(out, ctx.inputs[0]);
  if (out.numel() == 0) return;
  const int64_t rows = out.shape()[out.ndim() - 2];
  const int64_t cols = out.shape()[out.ndim() - 1];
  // Clamped so that i + diagonal cannot overflow; beyond +-(rows + cols) nothing changes.
  const int64_t k =
      std::clamp<int64_t>(ctx.attrs.get<int64_t>("diagonal"), -(rows + cols), rows + cols);
  const int64_t item = static_cast<int64_t>(out.itemsize());
  char* base = static_cast<char*>(out.data_ptr());
  const int64_t total_rows = out.numel() / cols;
  parallel_for(0, total_rows, std::max<int64_t>(1, kCopyGrain / cols), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t i = r % rows;
      // tril keeps j <= i + k; triu keeps j >= i + k.
      const int64_t begin = lower ? std::clamp<int64_t>(i + k + 1, 0, cols) : 0;
      const int64_t end = lower ? cols : std::clamp<int64_t>(i + k, 0, cols);
      if (end > begin) {
        std::memset(base + (r * cols + begin) * item, 0, static_cast<size_t>((end - begin) * item));
      }
    }
  });
}

KILN_REGISTER_OP(
    OpDef("Tril")
        .input("x")
        .attr("diagonal", AttrKind::kInt, AttrValue{int64_t{0}})
        .doc("x with elements above the `diagonal`-th diagonal of the last two dims set to zero")
        .infer(infer_triangle)
        .grad(detail::one_output_rule(
            [](const std::vector<Tensor>& in, const Tensor&, const Attrs& attrs, const Tensor& g) {
              return std::vector<Tensor>{
                  detail::input_grad(tril(g, attrs.get<int64_t>("diagonal")), in[0])};
            }))
        .kernel(DeviceType::kCPU,
                [](KernelContext& ctx) { triangle_kernel(ctx, /*lower=*/true); }));

KILN_REGISTER_OP(
    OpDef("Triu")
        .input("x")
        .attr("diagonal", AttrKind::kInt, AttrValue{int64_t{0}})
        .doc("x with elements below the `diagonal`-th diagonal of the last two dims set to zero")
        .infer(infer_triangle)
        .grad(detail::one_output_rule(
            [](const std::vector<Tensor>& in, const Tensor&, const Attrs& attrs, const Tensor& g) {
              return std::vector<Tensor>{
                  detail::input_grad(triu(g, attrs.get<int64_t>("diagonal")), in[0])};
            }))
        .kernel(DeviceType::kCPU,
                [](KernelContext& ctx) { triangle_kernel(ctx, /*lower=*/false); }));

}  // namespace

Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, const std::string& mode,
           double value) {
  static const OpDefPtr op = OpRegistry::Instance().get("Pad");
  return call_op(*op, {x}, {{"pads", pads}, {"mode", mode}, {"value", value}})[0];
}

Tensor tril(const Tensor& x, int64_t diagonal) {
  static const OpDefPtr op = OpRegistry::Instance().get("Tril");
  return call_op(*op, {x}, {{"diagonal", diagonal}})[0];
}

Tensor triu(const Tensor& x, int64_t diagonal) {
  static const OpDefPtr op = OpRegistry::Instance().get("Triu");
  return call_op(*op, {x}, {{"diagonal", diagonal}})[0];
}

}  // namespace kiln
