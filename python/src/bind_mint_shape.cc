// kiln.mint shape and indexing ops (include/kiln/functional/shape.h), plus the low-level helpers
// kiln/_indexing.py builds Tensor.__getitem__ / __setitem__ on: _index, _index_put_, _copy_into.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>

#include "bindings.h"
#include "convert.h"
#include "kiln/autograd.h"
#include "kiln/functional/elementwise.h"
#include "kiln/functional/shape.h"
#include "kiln/jit.h"
#include "ops/scalar_range.h"

namespace kiln::py {
namespace nb = nanobind;
using namespace nb::literals;

namespace {

nb::tuple tuple_of(const std::vector<Tensor>& tensors) {
  nb::list out;
  for (const Tensor& t : tensors) out.append(nb::cast(t));
  return nb::tuple(out);
}

// Splitting a traced value's dimension into pieces of `n` elements, or into `n` pieces, where `n`
// does not divide it: the pieces' sizes are not linear in the dimension's size (the last one is a
// remainder), which a dynamic jit must know (kiln::note_size_decision). A bad dim is left to the
// op to refuse.
void note_uneven_pieces(const Tensor& x, int64_t dim, int64_t n) {
  if (!is_tracer(x) || n <= 0 || dim < -x.ndim() || dim >= x.ndim()) return;
  if (x.size(dim) % n != 0) note_size_decision();
}

// Assignment of a Python number into a tensor of `dtype`: PyTorch refuses a number the type
// cannot hold (t_uint8[0] = 300) rather than wrap it.
void check_number_fits(const Tensor& value, DType dtype) {
  if (!value.is_weak_scalar()) return;
  const Scalar number = detail::scalar_value(value);
  KILN_CHECK_VALUE(detail::scalar_fits(dtype, number))
      << "assignment: the value " << number << " does not fit in " << dtype;
}

// Writes src into all of dst (as `what`: "assignment", "copy_", ...), converting it to dst's
// dtype and broadcasting it to dst's shape. An op (Cast into dst, as out=) rather than a bare
// copy: the jit's tracer records it like any in-place write (a bare copy ran once, at the trace,
// and never again), and autograd records it as one.
void write_value(const char* what, const Tensor& dst, const Tensor& src) {
  Tensor value = src;
  check_number_fits(value, dst.dtype());
  if (value.is_weak_scalar() && value.dtype() != dst.dtype()) {
    // A Python number in dst's dtype now: the fill then copies one value (converting it at every
    // element took twice as long as the fill).
    Tensor converted = Tensor::empty({}, dst.dtype());
    copy_into(converted, value);
    value = converted;
  }
  check_writable(what, dst);
  // Leading size-1 dims beyond dst's broadcast away, as in NumPy; a value autograd tracks stays
  // tracked through the view.
  if (value.shape() != dst.shape())
    value = autograd::differentiable_view(value, [&](const Tensor& t) {
      Tensor v = t;
      while (v.ndim() > dst.ndim() && v.size(0) == 1) v = v.squeeze(0);
      return v.expand(dst.shape());
    });
  static const OpDefPtr cast = OpRegistry::Instance().get("Cast");
  call_op(*cast, {value}, {{"dtype", dst.dtype()}}, {dst});
}

}  // namespace

void note_squeeze_decision(const Tensor& x, std::optional<int64_t> dim) {
  if (!is_tracer(x)) return;
  const Shape& shape = x.shape();
  if (dim) {
    if (*dim < -x.ndim() || *dim >= x.ndim()) return;
    if (shape[static_cast<size_t>(*dim < 0 ? *dim + x.ndim() : *dim)] != 1) note_size_decision();
  } else if (std::any_of(shape.begin(), shape.end(), [](int64_t s) { return s != 1; })) {
    note_size_decision();
  }
}

std::vector<std::optional<int64_t>> squeeze_steps(nb::handle dim, int64_t ndim) {
  if (dim.is_none()) return {std::nullopt};
  if (is_int_arg(dim)) return {nb::cast<int64_t>(dim)};
  std::vector<std::optional<int64_t>> steps;
  std::vector<int64_t> in_range;
  for (int64_t d : shape_arg(dim, "squeeze")) {
    const bool valid = d >= -std::max<int64_t>(ndim, 1) && d < std::max<int64_t>(ndim, 1);
    if (!valid) return {d};  // squeeze names it and the valid range
    const int64_t normalized = d < 0 && ndim > 0 ? d + ndim : d;
    KILN_CHECK_VALUE(std::find(in_range.begin(), in_range.end(), normalized) == in_range.end())
        << "squeeze: dim " << normalized << " appears more than once in the dims given";
    in_range.push_back(normalized);
  }
  std::sort(in_range.rbegin(), in_range.rend());
  for (int64_t d : in_range) steps.emplace_back(d);
  return steps;
}

void bind_mint_shape(nb::module_& mint) {
  mint.def(
      "reshape",
      [](const TensorArg& x, nb::handle shape) { return reshape(x, shape_arg(shape, "reshape")); },
      "x"_a, "shape"_a, "x with a new shape (one size may be -1); a view when possible.");
  mint.def(
      "transpose",
      [](const TensorArg& x, int64_t dim0, int64_t dim1) { return transpose(x, dim0, dim1); },
      "x"_a, "dim0"_a, "dim1"_a, "A view of x with dims dim0 and dim1 swapped.");
  mint.def(
      "permute",
      [](const TensorArg& x, nb::handle dims) { return permute(x, shape_arg(dims, "permute")); },
      "x"_a, "dims"_a, "A view of x with its dims reordered.");
  mint.def(
      "broadcast_shapes",
      [](nb::args shapes) {
        Shape result;
        for (nb::handle s : shapes) {
          result = broadcast_shapes(result, shape_arg(s, "broadcast_shapes"));
        }
        return to_tuple(result);
      },
      "shapes"_a,
      "broadcast_shapes(*shapes): the shape that tensors of `shapes` broadcast to (NumPy's "
      "rules; a ShapeError when they do not), as a tuple.");
  mint.def(
      "expand",
      [](const TensorArg& x, nb::handle shape) { return expand(x, shape_arg(shape, "expand")); },
      "x"_a, "shape"_a, "A view of x broadcast to `shape` (-1 keeps a dim).");
  mint.def(
      "squeeze",
      [](const TensorArg& x, nb::handle dim) {
        Tensor result = x;
        for (const std::optional<int64_t>& step : squeeze_steps(dim, result.ndim())) {
          note_squeeze_decision(result, step);
          result = squeeze(result, step);
        }
        return result;
      },
      "x"_a, "dim"_a = nb::none(),
      "A view of x without size-1 dims (only those of `dim`, an int or a sequence, if given).");
  mint.def(
      "unsqueeze", [](const TensorArg& x, int64_t dim) { return unsqueeze(x, dim); }, "x"_a,
      "dim"_a, "A view of x with a new size-1 dim at `dim`.");
  mint.def(
      "flatten",
      [](const TensorArg& x, int64_t start_dim, int64_t end_dim) {
        return flatten(x, start_dim, end_dim);
      },
      "x"_a, "start_dim"_a = 0, "end_dim"_a = -1, "x with dims start_dim..end_dim merged.");
  mint.def(
      "contiguous", [](const TensorArg& x) { return contiguous(x); }, "x"_a,
      "x itself when contiguous, else a contiguous copy.");

  mint.def(
      "cat", [](const TensorListArg& tensors, int64_t dim) { return cat(tensors.tensors, dim); },
      "tensors"_a, "dim"_a = 0,
      "The tensors (promoted to a common dtype) joined along an existing dim.");
  mint.def(
      "stack",
      [](const TensorListArg& tensors, int64_t dim) { return stack(tensors.tensors, dim); },
      "tensors"_a, "dim"_a = 0, "The tensors (same shape) joined along a new dim.");
  mint.def(
      "split",
      [](const TensorArg& x, nb::handle split_size_or_sections, int64_t dim) {
        const Shape sizes = shape_arg(split_size_or_sections, "split");
        if (is_int_arg(split_size_or_sections)) {
          note_uneven_pieces(x, dim, sizes[0]);
          return tuple_of(split(x, sizes[0], dim));
        }
        return tuple_of(split(x, std::vector<int64_t>(sizes.begin(), sizes.end()), dim));
      },
      "x"_a, "split_size_or_sections"_a, "dim"_a = 0,
      "Views of consecutive pieces of x: of size split_size (the last may be smaller), or of the "
      "given sizes.");
  mint.def(
      "chunk",
      [](const TensorArg& x, int64_t chunks, int64_t dim) {
        note_uneven_pieces(x, dim, chunks);
        return tuple_of(chunk(x, chunks, dim));
      },
      "x"_a, "chunks"_a, "dim"_a = 0,
      "Views of x in `chunks` pieces of ceil(n / chunks) (fewer when n is small).");

  mint.def(
      "index_select",
      [](const TensorArg& x, int64_t dim, const TensorArg& index) {
        return index_select(x, dim, index);
      },
      "x"_a, "dim"_a, "index"_a, "Elements of x at the 1-d integer `index` along `dim`.");
  mint.def(
      "gather",
      [](const TensorArg& x, int64_t dim, const TensorArg& index) { return gather(x, dim, index); },
      "x"_a, "dim"_a, "index"_a, "out[i][j] = x[index[i][j]][j] for dim 0 (torch.gather).");
  mint.def(
      "scatter",
      [](const TensorArg& x, int64_t dim, const TensorArg& index, const TensorArg& src,
         const std::string& reduce) { return scatter(x, dim, index, src, reduce); },
      "x"_a, "dim"_a, "index"_a, "src"_a, "reduce"_a = "none",
      "A copy of x with src (a tensor or a number) written, added or multiplied at index.");
  mint.def(
      "masked_fill",
      [](const TensorArg& x, const TensorArg& mask, const TensorArg& value) {
        KILN_CHECK_VALUE(value.get().ndim() == 0)
            << "masked_fill: expected a number or a 0-d tensor as value, got a tensor of shape "
            << shape_str(value.get().shape());
        // MaskedFill takes the value as a number. A tensor goes in as an operand where it
        // requires grad, for its gradient (the sum of g where the mask is true), as PyTorch's
        // does, and while a function is traced: read as a number there, a value the graph
        // computes would have no data, and one from outside would stay as it was at the trace.
        const bool operand =
            !value.get().is_weak_scalar() && (is_tracing() || autograd::requires_grad(value));
        if (!operand) return masked_fill(x, mask, detail::scalar_value(value));
        const Tensor checked = masked_fill(x, mask, Scalar(0));  // its checks; the value is where's
        return where(mask, to(value, checked.dtype()), checked);
      },
      "x"_a, "mask"_a, "value"_a, "x with `value` where the bool mask (broadcast) is true.");
  mint.def(
      "pad",
      [](const TensorArg& x, const std::vector<int64_t>& pads, const std::string& mode,
         std::optional<double> value) { return pad(x, pads, mode, value.value_or(0.0)); },
      "x"_a, "pad"_a, "mode"_a = "constant", "value"_a = nb::none(),
      "x padded by (before, after) pairs from the last dim, as torch.nn.functional.pad; mode "
      "'constant', 'reflect', 'replicate' or 'circular'.");
  mint.def(
      "tril", [](const TensorArg& x, int64_t diagonal) { return tril(x, diagonal); }, "x"_a,
      "diagonal"_a = 0, "x with elements above the diagonal of the last two dims zeroed.");
  mint.def(
      "triu", [](const TensorArg& x, int64_t diagonal) { return triu(x, diagonal); }, "x"_a,
      "diagonal"_a = 0, "x with elements below the diagonal of the last two dims zeroed.");

  mint.def(
      "_index",
      [](const TensorArg& x, const TensorListArg& indices) { return index(x, indices.tensors); },
      "x"_a, "indices"_a,
      "x[i0, i1, ...] with integer index tensors over the leading dims (a copy).");
  mint.def(
      "_index_put_",
      [](const Tensor& x, const TensorListArg& indices, const TensorArg& values) {
        check_number_fits(values, x.dtype());
        index_put_(x, indices.tensors, values);
      },
      "x"_a, "indices"_a, "values"_a, "In place: x[i0, i1, ...] = values (broadcast).");
  mint.def(
      "_copy_into",
      [](const Tensor& dst, const TensorArg& src) {
        // Into a tensor autograd tracks, the write is recorded (through a view: the base follows,
        // Note [Writes through views]). A view of one it does not track knows no base, which
        // would keep no history of a value that requires grad.
        KILN_CHECK_VALUE(!autograd::is_grad_enabled() || !autograd::requires_grad(src) ||
                         autograd::requires_grad(dst))
            << "assignment of a value that requires grad into a tensor that does not (x[i] = v "
            << "with v computed from a tensor that requires grad); autograd cannot track it, and "
            << "the gradient would be lost: build the new value with ops (kiln.mint.where, cat), "
            << "or assign v.detach()";
        detail::with_error_context([&] { write_value("assignment", dst, src); },
                                   [] { return std::string("in an assignment x[i] = v"); });
      },
      "dst"_a, "src"_a,
      "Copies src into dst (x[i] = v), converting the dtype and broadcasting src; recorded by "
      "autograd as an in-place write.");
  mint.def(
      "_overwrite",
      [](const Tensor& dst, const TensorArg& src, const std::string& what) {
        detail::with_error_context([&] { write_value(what.c_str(), dst, src); },
                                   [&] { return "in " + what; });
      },
      "dst"_a, "src"_a, "what"_a,
      "Writes src into all of dst (copy_, fill_, zero_ and the in-place methods written in "
      "Python), "
      "as `what`: recorded by autograd as an in-place op, converting the dtype and broadcasting "
      "src.");
}

}  // namespace kiln::py
