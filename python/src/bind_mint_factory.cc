// kiln.mint factories and random ops (zeros, ones, full, empty, zeros_like, ones_like, arange,
// linspace, eye, rand, randn, randint, randperm, multinomial (also a Tensor method), dropout),
// and the DLPack bindings (dlpack.cc), which live here until the module assembly calls
// bind_dlpack itself. The factories of values a gradient can flow into take PyTorch's keyword
// requires_grad; every factory takes its keyword device ('cpu', a kiln.device or None: Kiln runs
// on the CPU, and another device is a KilnValueError); the random ones take generator= (None: the
// default generator; bind_generator.cc).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <string>

#include "bindings.h"
#include "convert.h"
#include "dlpack.h"
#include "kiln/autograd.h"
#include "kiln/functional/factory.h"
#include "kiln/functional/nn.h"

namespace kiln::py {
namespace nb = nanobind;
using namespace nb::literals;

namespace {

// One size: an int or anything with __index__ (NumPy integers, one-element integer tensors),
// never a float or a bool.
int64_t size_entry(const char* fn, nb::handle v) {
  KILN_CHECK_TYPE(is_index(v.ptr())) << fn << ": expected integer sizes, got " << repr_of(v);
  nb::object index = nb::steal(PyNumber_Index(v.ptr()));
  if (!index.is_valid()) throw nb::python_error();
  int overflow = 0;
  const long long size = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  KILN_CHECK_VALUE(overflow == 0) << fn << ": expected sizes within int64, got " << repr_of(v);
  return size;
}

// A size as an int or a sequence of ints.
Shape size_from_object(const char* fn, nb::handle obj) {
  const Tensor* t = tensor_ptr(obj.ptr());
  // A 0-d tensor is one size or none (size_entry says why), never a sequence to iterate.
  if (is_int_arg(obj) || (t != nullptr && t->ndim() == 0)) return {size_entry(fn, obj)};
  KILN_CHECK_TYPE(PySequence_Check(obj.ptr()) && !PyUnicode_Check(obj.ptr()))
      << fn << ": expected a size (an int or a sequence of ints), got " << repr_of(obj);
  Shape shape;
  for (nb::handle v : obj) shape.push_back(size_entry(fn, v));
  return shape;
}

// f(2, 3), f((2, 3)), f([2, 3]), f() (0-d) and f(size=(2, 3)), as PyTorch accepts.
Shape size_from_args(const char* fn, const nb::args& args, nb::handle size) {
  if (!size.is_none()) {
    KILN_CHECK_TYPE(args.size() == 0) << fn << ": got the size both by position and by keyword";
    return size_from_object(fn, size);
  }
  if (args.size() == 1 && !is_int_arg(args[0])) return size_from_object(fn, args[0]);
  Shape shape;
  for (nb::handle v : args) shape.push_back(size_entry(fn, v));
  return shape;
}

// A Python bool, int or float (or anything with item() giving one: NumPy scalars, one-element
// tensors) as a Scalar.
Scalar scalar_from_object(const char* fn, nb::handle v, bool allow_item = true) {
  if (PyBool_Check(v.ptr())) return Scalar(v.ptr() == Py_True);
  if (PyLong_Check(v.ptr())) {
    int overflow = 0;
    const long long i = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
    KILN_CHECK_VALUE(overflow == 0)
        << fn << ": expected an integer within int64, got " << repr_of(v);
    return Scalar(static_cast<int64_t>(i));
  }
  if (PyFloat_Check(v.ptr())) return Scalar(PyFloat_AsDouble(v.ptr()));
  KILN_CHECK_TYPE(allow_item && nb::hasattr(v, "item"))
      << fn << ": expected a number, got " << repr_of(v);
  return scalar_from_object(fn, v.attr("item")(), /*allow_item=*/false);
}

DType dtype_or(const std::optional<DTypeArg>& dtype, DType fallback) {
  return dtype ? dtype->get() : fallback;
}

std::optional<DType> optional_dtype(const std::optional<DTypeArg>& dtype) {
  return dtype ? std::optional<DType>(dtype->get()) : std::nullopt;
}

// An integer argument `name` (an int or anything with __index__, never a float or bool).
int64_t int_from_object(const char* fn, const char* name, nb::handle v) {
  KILN_CHECK_TYPE(is_index(v.ptr()))
      << fn << ": expected " << name << " to be an int, got " << repr_of(v);
  nb::object index = nb::steal(PyNumber_Index(v.ptr()));
  if (!index.is_valid()) throw nb::python_error();
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  KILN_CHECK_VALUE(overflow == 0) << fn << ": expected " << name << " within int64, got "
                                  << repr_of(v);
  return value;
}

// randint's arguments in PyTorch's two forms, randint(high, size) and randint(low, high, size),
// each argument given by position or by keyword.
struct RandintArgs {
  int64_t low = 0;
  int64_t high = 0;
  Shape size;
};

RandintArgs randint_args(const nb::args& args, nb::handle low, nb::handle high, nb::handle size) {
  const size_t given = args.size() + !low.is_none() + !high.is_none() + !size.is_none();
  KILN_CHECK_TYPE(given == 2 || given == 3)
      << "randint: expected (high, size) or (low, high, size), got " << given << " argument"
      << (given == 1 ? "" : "s");
  KILN_CHECK_TYPE(given == 3 || low.is_none())
      << "randint: expected high and size besides low, got only one of them";
  KILN_CHECK_TYPE(given == 3 || !size.is_none() || high.is_none())
      << "randint: missing size (randint(high, size) or randint(low, high, size))";
  const char* names[] = {"low", "high", "size"};
  nb::handle slots[] = {low, high, size};
  const size_t first = given == 3 ? 0 : 1;  // (high, size): low stays 0
  for (size_t i = 0; i < args.size(); ++i) {
    KILN_CHECK_TYPE(slots[first + i].is_none())
        << "randint: got " << names[first + i] << " both by position and by keyword";
    slots[first + i] = args[i];
  }
  for (size_t i = first; i < 3; ++i) {
    KILN_CHECK_TYPE(!slots[i].is_none()) << "randint: missing " << names[i];
  }
  return {first == 0 ? int_from_object("randint", "low", slots[0]) : 0,
          int_from_object("randint", "high", slots[1]), size_from_object("randint", slots[2])};
}

/// The factories' requires_grad keyword (PyTorch's): `t`, made a leaf that requires grad when
/// asked (an integer or bool dtype is a DTypeError saying only floating-point tensors can).
Tensor requiring_grad(Tensor t, bool requires_grad) {
  if (requires_grad) autograd::set_requires_grad(t, true);
  return t;
}

// rand and randn: name(*size, size=None, generator=None, dtype=None, requires_grad=False,
// device=None), sampling with `sample`.
void def_sampler(nb::module_& mint, const char* name,
                 Tensor (*sample)(const Shape&, DType, const Generator&), const char* doc) {
  mint.def(
      name,
      [name, sample](nb::args sizes, nb::handle size, nb::handle generator,
                     std::optional<DTypeArg> dtype, bool requires_grad, nb::handle device) {
        check_device(name, device);
        return requiring_grad(
            sample(size_from_args(name, sizes, size), dtype_or(dtype, default_float_dtype()),
                   generator_arg(name, generator)),
            requires_grad);
      },
      "sizes"_a, "size"_a = nb::none(), "generator"_a = nb::none(), "dtype"_a = nb::none(),
      "requires_grad"_a = false, "device"_a = nb::none(), doc);
}

}  // namespace

void bind_mint_factory(nb::module_& mint) {
  mint.def(
      "zeros",
      [](nb::args sizes, nb::handle size, std::optional<DTypeArg> dtype, bool requires_grad,
         nb::handle device) {
        check_device("zeros", device);
        return requiring_grad(
            zeros(size_from_args("zeros", sizes, size), dtype_or(dtype, default_float_dtype())),
            requires_grad);
      },
      "sizes"_a, "size"_a = nb::none(), "dtype"_a = nb::none(), "requires_grad"_a = false,
      "device"_a = nb::none(),
      "zeros(*size, dtype=None): a tensor of zeros; size as ints or one sequence. dtype None is "
      "the default dtype (kiln.get_default_dtype()), as for every floating factory here.");
  mint.def(
      "ones",
      [](nb::args sizes, nb::handle size, std::optional<DTypeArg> dtype, bool requires_grad,
         nb::handle device) {
        check_device("ones", device);
        return requiring_grad(
            ones(size_from_args("ones", sizes, size), dtype_or(dtype, default_float_dtype())),
            requires_grad);
      },
      "sizes"_a, "size"_a = nb::none(), "dtype"_a = nb::none(), "requires_grad"_a = false,
      "device"_a = nb::none(), "ones(*size, dtype=None): a tensor of ones.");
  mint.def(
      "empty",
      [](nb::args sizes, nb::handle size, std::optional<DTypeArg> dtype, bool requires_grad,
         nb::handle device) {
        check_device("empty", device);
        return requiring_grad(
            empty(size_from_args("empty", sizes, size), dtype_or(dtype, default_float_dtype())),
            requires_grad);
      },
      "sizes"_a, "size"_a = nb::none(), "dtype"_a = nb::none(), "requires_grad"_a = false,
      "device"_a = nb::none(), "empty(*size, dtype=None): a tensor with uninitialised elements.");
  mint.def(
      "full",
      [](nb::handle size, nb::handle fill_value, std::optional<DTypeArg> dtype, bool requires_grad,
         nb::handle device) {
        check_device("full", device);
        return requiring_grad(full(size_from_object("full", size),
                                   scalar_from_object("full", fill_value), optional_dtype(dtype)),
                              requires_grad);
      },
      "size"_a, "fill_value"_a, "dtype"_a = nb::none(), nb::kw_only(), "requires_grad"_a = false,
      "device"_a = nb::none(),
      "A tensor of `size` filled with `fill_value`; dtype None takes the value's kind "
      "(bool, int64 or the default dtype).");
  mint.def(
      "zeros_like",
      [](const TensorArg& x, std::optional<DTypeArg> dtype, bool requires_grad, nb::handle device) {
        check_device("zeros_like", device);
        return requiring_grad(zeros_like(x, optional_dtype(dtype)), requires_grad);
      },
      "input"_a, "dtype"_a = nb::none(), nb::kw_only(), "requires_grad"_a = false,
      "device"_a = nb::none(), "Zeros with the shape (and dtype) of `input`.");
  mint.def(
      "ones_like",
      [](const TensorArg& x, std::optional<DTypeArg> dtype, bool requires_grad, nb::handle device) {
        check_device("ones_like", device);
        return requiring_grad(ones_like(x, optional_dtype(dtype)), requires_grad);
      },
      "input"_a, "dtype"_a = nb::none(), nb::kw_only(), "requires_grad"_a = false,
      "device"_a = nb::none(), "Ones with the shape (and dtype) of `input`.");
  mint.def(
      "arange",
      [](nb::handle start, nb::handle end, nb::handle step, std::optional<DTypeArg> dtype,
         bool requires_grad, nb::handle device) {
        check_device("arange", device);
        // arange(n) is arange(0, n), as Python's range.
        const Scalar first = end.is_none() ? Scalar(0) : scalar_from_object("arange", start);
        const Scalar last = scalar_from_object("arange", end.is_none() ? start : end);
        return requiring_grad(
            arange(first, last, scalar_from_object("arange", step), optional_dtype(dtype)),
            requires_grad);
      },
      "start"_a, "end"_a = nb::none(), "step"_a = 1, "dtype"_a = nb::none(), nb::kw_only(),
      "requires_grad"_a = false, "device"_a = nb::none(),
      "Values start, start + step, ... below end (arange(n) counts from 0); dtype None is "
      "int64 when every argument is an int, else the default dtype.");
  mint.def(
      "linspace",
      [](double start, double end, int64_t steps, std::optional<DTypeArg> dtype, bool requires_grad,
         nb::handle device) {
        check_device("linspace", device);
        return requiring_grad(linspace(start, end, steps, dtype_or(dtype, default_float_dtype())),
                              requires_grad);
      },
      "start"_a, "end"_a, "steps"_a, "dtype"_a = nb::none(), nb::kw_only(),
      "requires_grad"_a = false, "device"_a = nb::none(),
      "`steps` evenly spaced values from start to end, both included.");
  mint.def(
      "eye",
      [](int64_t n, std::optional<int64_t> m, std::optional<DTypeArg> dtype, bool requires_grad,
         nb::handle device) {
        check_device("eye", device);
        return requiring_grad(eye(n, m, dtype_or(dtype, default_float_dtype())), requires_grad);
      },
      "n"_a, "m"_a = nb::none(), "dtype"_a = nb::none(), nb::kw_only(), "requires_grad"_a = false,
      "device"_a = nb::none(), "An [n, m] identity matrix (m defaults to n).");
  def_sampler(mint, "rand", rand,
              "rand(*size, generator=None, dtype=None): uniform samples in [0, 1) from "
              "`generator` (None: the default generator).");
  def_sampler(mint, "randn", randn,
              "randn(*size, generator=None, dtype=None): standard normal samples from "
              "`generator` (None: the default generator).");
  mint.def(
      "randint",
      [](nb::args args, nb::handle low, nb::handle high, nb::handle size, nb::handle generator,
         std::optional<DTypeArg> dtype, nb::handle device) {
        check_device("randint", device);
        const RandintArgs a = randint_args(args, low, high, size);
        return randint(a.low, a.high, a.size, dtype_or(dtype, DType::kInt64),
                       generator_arg("randint", generator));
      },
      "args"_a, "low"_a = nb::none(), "high"_a = nb::none(), "size"_a = nb::none(),
      "generator"_a = nb::none(), "dtype"_a = nb::none(), "device"_a = nb::none(),
      "randint(low=0, high, size): uniform integers in [low, high) of shape `size` (dtype "
      "defaults to int64), as randint(high, size) or randint(low, high, size).");
  mint.def(
      "randperm",
      [](int64_t n, nb::handle generator, std::optional<DTypeArg> dtype, nb::handle device) {
        check_device("randperm", device);
        return randperm(n, dtype_or(dtype, DType::kInt64), generator_arg("randperm", generator));
      },
      "n"_a, nb::kw_only(), "generator"_a = nb::none(), "dtype"_a = nb::none(),
      "device"_a = nb::none(),
      "A uniformly random permutation of 0 .. n - 1 (dtype defaults to int64).");
  const auto multinomial_impl = [](const Tensor& probs, int64_t num_samples, bool replacement,
                                   nb::handle generator) {
    return multinomial(probs, num_samples, replacement, generator_arg("multinomial", generator));
  };
  const char* multinomial_doc =
      "int64 indices of categories drawn from each row of `input` ([C] or [B, C] non-negative "
      "weights, normalised per row): [num_samples] or [B, num_samples]; without `replacement` a "
      "row's samples are distinct.";
  mint.def(
      "multinomial",
      [multinomial_impl](const TensorArg& x, int64_t num_samples, bool replacement,
                         nb::handle generator) {
        return multinomial_impl(x, num_samples, replacement, generator);
      },
      "input"_a, "num_samples"_a, "replacement"_a = false, nb::kw_only(),
      "generator"_a = nb::none(), multinomial_doc);
  nb::cpp_function_def(multinomial_impl, nb::scope(nb::type<Tensor>()), nb::name("multinomial"),
                       nb::is_method(), "num_samples"_a, "replacement"_a = false, nb::kw_only(),
                       "generator"_a = nb::none(), multinomial_doc);
  const auto bernoulli_impl = [](const Tensor& p, nb::handle generator) {
    return bernoulli(p, generator_arg("bernoulli", generator));
  };
  const char* bernoulli_doc =
      "1 with probability input[i], else 0, for each element (in input's floating dtype; "
      "probabilities outside [0, 1] are a KilnValueError when the draw runs).";
  mint.def(
      "bernoulli",
      [bernoulli_impl](const TensorArg& x, nb::handle generator) {
        return bernoulli_impl(x, generator);
      },
      "input"_a, nb::kw_only(), "generator"_a = nb::none(), bernoulli_doc);
  nb::cpp_function_def(bernoulli_impl, nb::scope(nb::type<Tensor>()), nb::name("bernoulli"),
                       nb::is_method(), nb::kw_only(), "generator"_a = nb::none(), bernoulli_doc);
  mint.def(
      "dropout",
      [](const TensorArg& x, double p, bool training) { return dropout(x, p, training); },
      "input"_a, "p"_a = 0.5, "training"_a = true,
      "Zeroes each element with probability p and scales the rest by 1 / (1 - p); the "
      "input itself when not training or p == 0.");
  bind_dlpack(mint);
}

}  // namespace kiln::py
