// kiln._C.Tensor: metadata, views, conversion to and from NumPy. Operators live in
// bind_tensor_operators.cc, indexing in kiln/_indexing.py, printing in kiln/_tensor.py.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "convert.h"
#include "core/dtype_dispatch.h"
#include "kiln/autograd.h"
#include "kiln/functional/shape.h"
#include "kiln/jit.h"
#include "kiln/tensor.h"

namespace kiln::py {
namespace nb = nanobind;
using namespace nb::literals;

namespace {

// Accepts view(2, 3), view((2, 3)) and view([2, 3]), as PyTorch does.
Shape shape_from_args(const nb::args& args, const char* what) {
  if (args.size() == 1) return shape_arg(args[0], what);
  return shape_arg(args, what);
}

// `make_view(t)`, recorded for autograd when it tracks t (see autograd::differentiable_view).
template <typename MakeView>
Tensor tracked_view(const Tensor& t, MakeView&& make_view) {
  if (!autograd::requires_grad(t)) return make_view(t);
  return autograd::differentiable_view(t, make_view);
}

// Whether a method that may copy (reshape, flatten, contiguous, clone) must call its op: autograd
// records only op calls, and a trace sees only them (the plain methods' copy reads the data).
bool recorded(const Tensor& t) { return autograd::requires_grad(t) || is_tracer(t); }

// A failed tensor, or a value traced by kiln.jit, raises why before any count of its elements
// could complain about something else.
void raise_if_failed(const Tensor& t) {
  if (const std::shared_ptr<const OpFailure> failure = t.impl()->failure()) failure->raise();
}

nb::object item(const Tensor& t) {
  raise_if_failed(t);
  KILN_CHECK_VALUE(t.numel() == 1) << "item(): expected a tensor with one element, got "
                                   << type_str(t);
  const Tensor one = t.reshape({1});
  return visit_dtype(t.dtype(), [&](auto tag) -> nb::object {
    using T = typename decltype(tag)::type;
    const T v = *static_cast<const T*>(one.data_ptr());
    if constexpr (std::is_same_v<T, bool>) {
      return nb::bool_(v);
    } else if constexpr (std::is_integral_v<T>) {
      return nb::int_(static_cast<int64_t>(v));
    } else if constexpr (std::is_same_v<T, double>) {
      return nb::float_(v);
    } else {
      return nb::float_(static_cast<double>(static_cast<float>(v)));
    }
  });
}

}  // namespace

void bind_tensor(nb::module_& m) {
  nb::class_<Tensor> cls(m, "Tensor", "An n-dimensional array (see kiln/tensor.h)");
  cls.def(nb::init<>())
      .def(nb::init<const Tensor&>(), "other"_a,
           "Another handle to `other` (the same tensor, not a copy); lets Python subclasses such "
           "as kiln.nn.Parameter wrap an existing tensor.")
      .def_prop_ro("shape", [](const Tensor& t) { return to_tuple(t.shape()); })
      .def_prop_ro("dtype", &Tensor::dtype)
      .def_prop_ro("ndim", &Tensor::ndim)
      .def("numel", &Tensor::numel, "Number of elements.")
      .def("dim", &Tensor::ndim)
      .def(
          "size",
          [](const Tensor& t, std::optional<int64_t> dim) -> nb::object {
            if (dim) return nb::int_(t.size(*dim));
            return to_tuple(t.shape());
          },
          "dim"_a = nb::none())
      .def(
          "stride",
          [](const Tensor& t, std::optional<int64_t> dim) -> nb::object {
            if (dim) return nb::int_(t.stride(*dim));
            return to_tuple(t.strides());
          },
          "dim"_a = nb::none(), "Strides in elements.")
      .def_prop_ro("itemsize", &Tensor::itemsize)
      .def_prop_ro("nbytes", &Tensor::nbytes)
      .def("storage_offset", &Tensor::storage_offset)
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); })
      .def(
          "shares_storage_with",
          [](const Tensor& a, const Tensor& b) {
            return a.storage() != nullptr && a.storage() == b.storage();
          },
          "other"_a)
      .def("__len__",
           [](const Tensor& t) {
             KILN_CHECK_TYPE(t.ndim() > 0) << "len() of a 0-d tensor";
             return t.size(0);
           })
      .def("item", &item, "The single element as a Python number.")
      .def("__bool__",
           [](const Tensor& t) {
             raise_if_failed(t);
             KILN_CHECK_VALUE(t.numel() == 1)
                 << "the truth value of a tensor with " << t.numel()
                 << " elements is ambiguous; use kiln.mint.any/all or compare element by element";
             return nb::cast<bool>(nb::bool_(item(t)));
           })
      .def("__float__", [](const Tensor& t) { return nb::float_(item(t)); })
      .def("__int__", [](const Tensor& t) { return nb::int_(item(t)); })
      // As PyTorch's: an integer tensor of one element is an index for Python's sequences
      // (lst[t], range(t)) and an int to Kiln's int arguments (convert.h's is_index). A bool
      // tensor is not (PyTorch's is): nanobind's int arguments take anything with __index__,
      // and True as a dim or a size is a mistake, not 1.
      .def("__index__",
           [](const Tensor& t) {
             raise_if_failed(t);
             KILN_CHECK_TYPE(is_integral(t.dtype()) && t.numel() == 1)
                 << "only integer tensors of a single element can be converted to an index, got a "
                 << t.dtype() << " tensor of shape " << shape_str(t.shape());
             return nb::int_(item(t));
           })
      .def("numpy", &tensor_to_numpy,
           "A NumPy array sharing this tensor's memory (bfloat16 converts to a float32 copy), once "
           "the ops issued before have run; ops queued later write it when they run "
           "(kiln.runtime: synchronize() before reading it again).")
      // View methods: plain views, recorded as AsStrided calls when autograd tracks the tensor.
      .def("view",
           [](const Tensor& t, nb::args shape) {
             const Shape s = shape_from_args(shape, "view");
             return tracked_view(t, [&](const Tensor& b) { return b.view(s); });
           })
      .def("reshape",
           [](const Tensor& t, nb::args shape) {
             const Shape s = shape_from_args(shape, "reshape");
             return recorded(t) ? kiln::reshape(t, s) : t.reshape(s);
           })
      .def("expand",
           [](const Tensor& t, nb::args shape) {
             const Shape s = shape_from_args(shape, "expand");
             return tracked_view(t, [&](const Tensor& b) { return b.expand(s); });
           })
      .def(
          "broadcast_to",
          [](const Tensor& t, const Shape& shape) {
            return tracked_view(t, [&](const Tensor& b) { return b.broadcast_to(shape); });
          },
          "shape"_a)
      .def("permute",
           [](const Tensor& t, nb::args dims) {
             const Shape d = shape_from_args(dims, "permute");
             return tracked_view(t, [&](const Tensor& b) { return b.permute(std::vector<int64_t>(d.begin(), d.end())); });
           })
      .def(
          "transpose",
          [](const Tensor& t, int64_t dim0, int64_t dim1) {
            return tracked_view(t, [&](const Tensor& b) { return b.transpose(dim0, dim1); });
          },
          "dim0"_a, "dim1"_a)
      .def_prop_ro("T",
                   [](const Tensor& t) {
                     std::vector<int64_t> dims(static_cast<size_t>(t.ndim()));
                     for (size_t i = 0; i < dims.size(); ++i)
                       dims[i] = t.ndim() - 1 - static_cast<int64_t>(i);
                     return tracked_view(t, [&](const Tensor& b) { return b.permute(dims); });
                   })
      .def(
          "slice",
          [](const Tensor& t, int64_t dim, int64_t start, int64_t end, int64_t step) {
            Tensor view =
                tracked_view(t, [&](const Tensor& b) { return b.slice(dim, start, end, step); });
            const int64_t n = t.size(dim);
            // A bound clamped to the dimension, a bound on its edge that makes the slice whole
            // (x.slice(0, -2, 2) of 2 rows is no view at all), or a step over a dimension of 0 or
            // 1, which looks whole (x[::2] of 1 row is that row): not linear in the size.
            const bool clamped = start < -n || start > n || end < -n || end > n;
            const bool whole_at_edge = step == 1 && view.size(dim) == n && (start != 0 || end == n);
            if ((clamped || whole_at_edge || (step > 1 && n <= 1)) && is_tracer(t)) {
              note_size_decision();
            }
            return view;
          },
          "dim"_a, "start"_a, "end"_a, "step"_a = 1)
      .def(
          "narrow",
          [](const Tensor& t, int64_t dim, int64_t start, int64_t length) {
            return tracked_view(t, [&](const Tensor& b) { return b.narrow(dim, start, length); });
          },
          "dim"_a, "start"_a, "length"_a)
      .def(
          "select",
          [](const Tensor& t, int64_t dim, int64_t index) {
            return tracked_view(t, [&](const Tensor& b) { return b.select(dim, index); });
          },
          "dim"_a, "index"_a)
      .def(
          "squeeze",
          [](const Tensor& t, nb::handle dim) {
            Tensor result = t;
            for (const std::optional<int64_t>& step : squeeze_steps(dim, result.ndim())) {
              note_squeeze_decision(result, step);
              result = tracked_view(
                  result, [&](const Tensor& b) { return step ? b.squeeze(*step) : b.squeeze(); });
            }
            return result;
          },
          "dim"_a = nb::none(),
          "A view without size-1 dims (only those of `dim`, an int or a sequence, if given).")
      .def(
          "unsqueeze",
          [](const Tensor& t, int64_t dim) {
            return tracked_view(t, [&](const Tensor& b) { return b.unsqueeze(dim); });
          },
          "dim"_a)
      .def(
          "flatten",
          [](const Tensor& t, int64_t start_dim, int64_t end_dim) {
            return recorded(t) ? kiln::flatten(t, start_dim, end_dim)
                               : t.flatten(start_dim, end_dim);
          },
          "start_dim"_a = 0, "end_dim"_a = -1)
      .def(
          "unfold",
          [](const Tensor& t, int64_t dimension, int64_t size, int64_t step) {
            return tracked_view(t,
                                [&](const Tensor& b) { return b.unfold(dimension, size, step); });
          },
          "dimension"_a, "size"_a, "step"_a)
      .def(
          "as_strided",
          [](const Tensor& t, const Shape& size, const Shape& stride,
             std::optional<int64_t> storage_offset) {
            // Storage strides and offset: a traced value has no storage, and a graph built for
            // one layout of its inputs runs on any other.
            KILN_CHECK_VALUE(!is_tracer(t))
                << "as_strided of a traced value: it follows the memory layout of a tensor, which "
                << "a graph's values do not have; use view, reshape, slicing, unfold or expand";
            const int64_t offset = storage_offset.value_or(t.storage_offset());  // PyTorch's
            if (!autograd::is_grad_enabled() || !autograd::requires_grad(t)) {
              return t.as_strided(size, stride, offset);
            }
            // Tracked: the AsStrided op counts strides and offset over t's elements in
            // row-major order, which are the storage's from t's offset on when t is
            // contiguous (and have no such meaning otherwise).
            KILN_CHECK_VALUE(t.is_contiguous())
                << "as_strided of a non-contiguous tensor that requires grad: its storage "
                << "strides cannot be followed by autograd; call .contiguous() first";
            // So the view must stay within t's elements (untracked, it may reach the rest of
            // the storage, as in PyTorch).
            const int64_t first = offset - t.storage_offset();
            int64_t last = first;
            bool empty = false;
            for (size_t d = 0; d < size.size() && d < stride.size(); ++d) {
              empty = empty || size[d] == 0;
              if (size[d] > 0 && stride[d] > 0) last += (size[d] - 1) * stride[d];
            }
            KILN_CHECK_VALUE(empty || (first >= 0 && last < t.numel()))
                << "as_strided of a tensor that requires grad: the view reaches storage "
                << "elements " << offset << " to " << last + t.storage_offset()
                << ", outside this tensor's own (" << t.storage_offset() << " to "
                << t.storage_offset() + t.numel() - 1
                << "), which are all autograd follows; take the view of the tensor that holds "
                << "them";
            return as_strided(t, size, stride, first);
          },
          "size"_a, "stride"_a, "storage_offset"_a = nb::none(),
          "A view with these storage strides, from `storage_offset` in the storage (by default "
          "this tensor's own offset, as in PyTorch).")
      .def("contiguous",
           [](const Tensor& t) { return recorded(t) ? kiln::contiguous(t) : t.contiguous(); })
      .def("clone",
           [](const Tensor& t) {
             // A recorded copy: a Cast to its own dtype.
             if (!recorded(t)) return t.clone();
             static const OpDefPtr cast = OpRegistry::Instance().get("Cast");
             return call_op(*cast, {t}, {{"dtype", t.dtype()}})[0];
           })
      .def("is_same", &Tensor::is_same, "other"_a,
           "True when both objects are handles to the same tensor.");
  bind_tensor_autograd(cls);

  m.def(
      "tensor",
      [](nb::handle data, std::optional<DTypeArg> dtype, bool requires_grad, nb::handle device) {
        check_device("tensor", device);
        const std::optional<DType> d = dtype ? std::optional<DType>(dtype->get()) : std::nullopt;
        Tensor t = tensor_from_object(data, d ? &*d : nullptr);
        if (requires_grad) autograd::set_requires_grad(t, true);
        return t;
      },
      "data"_a.none(), "dtype"_a = nb::none(), nb::kw_only(), "requires_grad"_a = false,
      "device"_a = nb::none(),
      "A new tensor (always a copy) from a list, a number, a NumPy array or a tensor. Python "
      "floats give the default dtype (kiln.get_default_dtype(): float32 unless set); a NumPy "
      "array keeps its dtype unless `dtype` is given. With "
      "requires_grad=True it is a leaf that requires grad (a floating-point dtype only). "
      "`device` may be 'cpu' (or a kiln.device) or None: Kiln runs on the CPU.");
  m.def(
      "_bits_as",
      [](const Tensor& t, DTypeArg dtype) {
        const DType d = dtype.get();
        KILN_CHECK_DTYPE(itemsize(d) == itemsize(t.dtype()) && d != DType::kBool &&
                         t.dtype() != DType::kBool)
            << "_bits_as: " << t.dtype() << " and " << d
            << " differ in size, or one is bool (whose bytes are 0 or 1)";
        const Tensor bits = t.contiguous();
        return Tensor::from_blob(bits.data_ptr(), bits.shape(), d, {}, [bits](void*) {}).clone();
      },
      "t"_a, "dtype"_a,
      "A new tensor of `dtype` holding t's bits (dtypes of one size): how kiln.load and unpickling "
      "read bfloat16 exactly, signalling NaNs included.");
  m.def(
      "from_numpy",
      [](nb::handle array) {
        KILN_CHECK_VALUE(!is_read_only(array))
            << "from_numpy: the array is read-only, and a tensor sharing its memory could write "
               "into it; pass a copy (kiln.tensor(array) copies)";
        return tensor_from_numpy(array, /*copy=*/false);
      },
      "array"_a,
      "A tensor that shares the NumPy array's memory (and keeps it alive); not of a read-only "
      "array. In the asynchronous pipeline modes, queued ops read and write the shared memory "
      "when they run: synchronize() before changing the array while ops on it may be queued "
      "(kiln.runtime).");
  m.def(
      "scalar_tensor", [](nb::handle v) { return nb::cast<TensorArg>(v).get(); }, "value"_a,
      "A 0-d weak-scalar tensor from a Python number (for tests and tracing).");
}

}  // namespace kiln::py
