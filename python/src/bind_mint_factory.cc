// kiln.mint factories and random ops (zeros, ones, full, empty, zeros_like, ones_like, arange,
// linspace, eye, rand, randn, randint, randperm, multinomial (also a Tensor method), dropout),
// manual_seed, get_rng_state / set_rng_state, and the DLPack bindings (dlpack.cc), which live
// here until the module assembly calls bind_dlpack itself. The factories of values a gradient can
// flow into take PyTorch's keyword requires_grad; every factory takes its keyword device ('cpu', a
// kiln.device or None: Kiln runs on the CPU, and another device is a KilnValueError).
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

std::string repr_of(nb::handle obj) { return nb::cast<std::string>(nb::repr(obj)); }

// One size: an int or anything with __index__ (NumPy integers), never a float.
int64_t size_entry(const char* fn, nb::handle v) {
  KILN_CHECK_TYPE(PyIndex_Check(v.ptr())) << fn << ": expected integer sizes, got " << repr_of(v);
  nb::object index = nb::steal(PyNumber_Index(v.ptr()));
  if (!index.is_valid()) throw nb::python_error();
  int overflow = 0;
  const long long size = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  KILN_CHECK_VALUE(overflow == 0) << fn << ": expected sizes within int64, got " << repr_of(v);
  return size;
}

// A size as an int or a sequence of ints.
Shape size_from_object(const char* fn, nb::handle obj) {
  if (is_int_arg(obj)) return {size_entry(fn, obj)};
  KILN_CHECK_TYPE(PySequence_Check(obj.ptr()) && !PyUnicode_Check(obj.ptr()))
      << fn << ": expected a size (an int or a sequence of ints), got " << repr_of(obj);
  Shape shape;
  for (nb::handle v : obj) shape.push_back(size_entry(fn, v));
  return shape;
}

// f(2, 3), f((2, 3)), f([2, 3]) and f() (0-d), as PyTorch accepts.
Shape size_from_args(const char* fn, const nb::args& args) {
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

// manual_seed takes any integer in [-2^63, 2^64); negative seeds wrap, as in PyTorch.
uint64_t seed_from_object(nb::handle v) {
  KILN_CHECK_TYPE(PyLong_Check(v.ptr()) && !PyBool_Check(v.ptr()))
      << "manual_seed: expected an int, got " << repr_of(v);
  const unsigned long long u = PyLong_AsUnsignedLongLong(v.ptr());
  if (!PyErr_Occurred()) return u;
  PyErr_Clear();
  int overflow = 0;
  const long long i = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
  KILN_CHECK_VALUE(overflow == 0 && i < 0)
      << "manual_seed: expected a seed in [-2**63, 2**64), got " << repr_of(v);
  return static_cast<uint64_t>(i);
}

/// The factories' requires_grad keyword (PyTorch's): `t`, made a leaf that requires grad when
/// asked (an integer or bool dtype is a DTypeError saying only floating-point tensors can).
Tensor requiring_grad(Tensor t, bool requires_grad) {
  if (requires_grad) autograd::set_requires_grad(t, true);
  return t;
}

}  // namespace

void bind_mint_factory(nb::module_& mint) {
  mint.def(
      "zeros",
      [](nb::args size, std::optional<DTypeArg> dtype, bool requires_grad, nb::handle device) {
        check_device("zeros", device);
        return requiring_grad(
            zeros(size_from_args("zeros", size), dtype_or(dtype, DType::kFloat32)), requires_grad);
      },
      "size"_a, "dtype"_a = nb::none(), "requires_grad"_a = false, "device"_a = nb::none(),
      "zeros(*size, dtype=kiln.float32): a tensor of zeros; size as ints or one sequence.");
  mint.def(
      "ones",
      [](nb::args size, std::optional<DTypeArg> dtype, bool requires_grad, nb::handle device) {
        check_device("ones", device);
        return requiring_grad(ones(size_from_args("ones", size), dtype_or(dtype, DType::kFloat32)),
                              requires_grad);
      },
      "size"_a, "dtype"_a = nb::none(), "requires_grad"_a = false, "device"_a = nb::none(),
      "ones(*size, dtype=kiln.float32): a tensor of ones.");
  mint.def(
      "empty",
      [](nb::args size, std::optional<DTypeArg> dtype, bool requires_grad, nb::handle device) {
        check_device("empty", device);
        return requiring_grad(
            empty(size_from_args("empty", size), dtype_or(dtype, DType::kFloat32)), requires_grad);
      },
      "size"_a, "dtype"_a = nb::none(), "requires_grad"_a = false, "device"_a = nb::none(),
      "empty(*size, dtype=kiln.float32): a tensor with uninitialised elements.");
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
      "(bool, int64 or float32).");
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
      "int64 when every argument is an int, else float32.");
  mint.def(
      "linspace",
      [](double start, double end, int64_t steps, std::optional<DTypeArg> dtype, bool requires_grad,
         nb::handle device) {
        check_device("linspace", device);
        return requiring_grad(linspace(start, end, steps, dtype_or(dtype, DType::kFloat32)),
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
        return requiring_grad(eye(n, m, dtype_or(dtype, DType::kFloat32)), requires_grad);
      },
      "n"_a, "m"_a = nb::none(), "dtype"_a = nb::none(), nb::kw_only(), "requires_grad"_a = false,
      "device"_a = nb::none(), "An [n, m] identity matrix (m defaults to n).");
  mint.def(
      "rand",
      [](nb::args size, std::optional<DTypeArg> dtype, bool requires_grad, nb::handle device) {
        check_device("rand", device);
        return requiring_grad(rand(size_from_args("rand", size), dtype_or(dtype, DType::kFloat32)),
                              requires_grad);
      },
      "size"_a, "dtype"_a = nb::none(), "requires_grad"_a = false, "device"_a = nb::none(),
      "rand(*size, dtype=kiln.float32): uniform samples in [0, 1) from the global generator.");
  mint.def(
      "randn",
      [](nb::args size, std::optional<DTypeArg> dtype, bool requires_grad, nb::handle device) {
        check_device("randn", device);
        return requiring_grad(
            randn(size_from_args("randn", size), dtype_or(dtype, DType::kFloat32)), requires_grad);
      },
      "size"_a, "dtype"_a = nb::none(), "requires_grad"_a = false, "device"_a = nb::none(),
      "randn(*size, dtype=kiln.float32): standard normal samples.");
  mint.def(
      "randint",
      [](int64_t low, int64_t high, nb::handle size, std::optional<DTypeArg> dtype,
         nb::handle device) {
        check_device("randint", device);
        return randint(low, high, size_from_object("randint", size),
                       dtype_or(dtype, DType::kInt64));
      },
      "low"_a, "high"_a, "size"_a, "dtype"_a = nb::none(), nb::kw_only(), "device"_a = nb::none(),
      "Uniform integers in [low, high) of shape `size` (dtype defaults to int64).");
  mint.def(
      "randperm",
      [](int64_t n, std::optional<DTypeArg> dtype, nb::handle device) {
        check_device("randperm", device);
        return randperm(n, dtype_or(dtype, DType::kInt64));
      },
      "n"_a, nb::kw_only(), "dtype"_a = nb::none(), "device"_a = nb::none(),
      "A uniformly random permutation of 0 .. n - 1 (dtype defaults to int64).");
  const auto multinomial_impl = [](const Tensor& probs, int64_t num_samples, bool replacement) {
    return multinomial(probs, num_samples, replacement);
  };
  const char* multinomial_doc =
      "int64 indices of categories drawn from each row of `input` ([C] or [B, C] non-negative "
      "weights, normalised per row): [num_samples] or [B, num_samples]; without `replacement` a "
      "row's samples are distinct.";
  mint.def(
      "multinomial",
      [multinomial_impl](const TensorArg& x, int64_t num_samples, bool replacement) {
        return multinomial_impl(x, num_samples, replacement);
      },
      "input"_a, "num_samples"_a, "replacement"_a = false, multinomial_doc);
  nb::cpp_function_def(multinomial_impl, nb::scope(nb::type<Tensor>()), nb::name("multinomial"),
                       nb::is_method(), "num_samples"_a, "replacement"_a = false, multinomial_doc);
  mint.def("dropout", [](const TensorArg& x, double p, bool training) {
             return dropout(x, p, training);
           }, "input"_a, "p"_a = 0.5, "training"_a = true,
           "Zeroes each element with probability p and scales the rest by 1 / (1 - p); the "
           "input itself when not training or p == 0.");
  mint.def(
      "get_rng_state",
      [] {
        // As int64 bit patterns, so that the state is a tensor a checkpoint holds.
        const RngState state = get_rng_state();
        Tensor t = Tensor::empty({2}, DType::kInt64);
        t.data<int64_t>()[0] = static_cast<int64_t>(state.seed);
        t.data<int64_t>()[1] = static_cast<int64_t>(state.offset);
        return t;
      },
      "The global generator's state (seed and next counter) as an int64 tensor of 2 elements: "
      "set_rng_state(state) makes the draws after it repeat (PyTorch's torch.get_rng_state).");
  mint.def(
      "set_rng_state",
      [](const Tensor& state) {
        KILN_CHECK_VALUE(state.dtype() == DType::kInt64 && state.shape() == Shape{2})
            << "set_rng_state: expected the int64 tensor of 2 elements get_rng_state gives, got "
            << type_str(state);
        const Tensor c = state.contiguous();
        set_rng_state({static_cast<uint64_t>(c.data<int64_t>()[0]),
                       static_cast<uint64_t>(c.data<int64_t>()[1])});
      },
      "state"_a, "Puts the global generator where get_rng_state() found it.");
  mint.def(
      "manual_seed", [](nb::handle seed) { manual_seed(seed_from_object(seed)); }, "seed"_a,
      "Seeds the global generator: later rand/randn/randint/randperm/multinomial/dropout "
      "calls repeat exactly.");
  bind_dlpack(mint);
}

}  // namespace kiln::py
