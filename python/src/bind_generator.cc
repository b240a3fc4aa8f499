// kiln.mint.Generator (PyTorch's torch.Generator, re-exported as kiln.Generator), the default
// generator and its process-wide functions (manual_seed, seed, initial_seed, get_rng_state /
// set_rng_state), and generator_arg, which the random factories read their generator= with.
//
// A state is an int64 tensor of 2 elements (the seed and the next counter, as bit patterns) so
// that a checkpoint holds it as it holds any tensor.
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <random>
#include <string>
#include <tuple>

#include "bindings.h"
#include "convert.h"
#include "kiln/functional/generator.h"

namespace kiln::py {
namespace nb = nanobind;
using namespace nb::literals;

namespace {

// A seed: any integer (or NumPy integer) in [-2^63, 2^64); negative seeds wrap, as in PyTorch.
uint64_t seed_from_object(const char* fn, nb::handle v) {
  KILN_CHECK_TYPE(is_index(v.ptr())) << fn << ": expected an int, got " << repr_of(v);
  nb::object index = nb::steal(PyNumber_Index(v.ptr()));  // NumPy integers too
  if (!index.is_valid()) throw nb::python_error();
  const unsigned long long u = PyLong_AsUnsignedLongLong(index.ptr());
  if (!PyErr_Occurred()) return u;
  PyErr_Clear();
  int overflow = 0;
  const long long i = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  KILN_CHECK_VALUE(overflow == 0 && i < 0)
      << fn << ": expected a seed in [-2**63, 2**64), got " << repr_of(v);
  return static_cast<uint64_t>(i);
}

Tensor state_tensor(const RngState& state) {
  Tensor t = Tensor::empty({2}, DType::kInt64);
  t.data<int64_t>()[0] = static_cast<int64_t>(state.seed);
  t.data<int64_t>()[1] = static_cast<int64_t>(state.offset);
  return t;
}

RngState state_from_tensor(const char* fn, const Tensor& state) {
  KILN_CHECK_VALUE(state.dtype() == DType::kInt64 && state.shape() == Shape{2})
      << fn << ": expected the int64 tensor of 2 elements get_state / get_rng_state give, got "
      << type_str(state);
  const Tensor c = state.contiguous();
  return {static_cast<uint64_t>(c.data<int64_t>()[0]), static_cast<uint64_t>(c.data<int64_t>()[1])};
}

// A seed from the operating system's entropy, as torch.seed() takes one.
uint64_t fresh_seed() {
  std::random_device entropy;
  return (static_cast<uint64_t>(entropy()) << 32) | entropy();
}

}  // namespace

Generator generator_arg(const char* fn, nb::handle generator) {
  if (generator.is_none()) return default_generator();
  KILN_CHECK_TYPE(nb::isinstance<Generator>(generator))
      << fn << ": expected generator to be a kiln.Generator or None, got " << repr_of(generator);
  return nb::cast<Generator>(generator);
}

void bind_generator(nb::module_& mint) {
  nb::class_<Generator>(
      mint, "Generator",
      "Generator(device='cpu'): a stream of random numbers that random ops draw from when given "
      "as their generator= (PyTorch's torch.Generator). A new one starts at PyTorch's default "
      "seed; Generator(...).manual_seed(s) draws what the default generator draws after "
      "kiln.manual_seed(s), without moving it. A graph cannot trace a draw from one: draw "
      "outside kiln.jit.")
      .def(
          "__init__",
          [](Generator* self, nb::handle device) {
            check_device("Generator", device);
            new (self) Generator();
          },
          "device"_a = "cpu")
      .def(
          "manual_seed",
          [](Generator& self, nb::handle seed) -> Generator& {
            self.manual_seed(seed_from_object("Generator.manual_seed", seed));
            return self;
          },
          "seed"_a, nb::rv_policy::reference,
          "Restarts the stream at `seed`; returns the generator.")
      .def(
          "seed",
          [](Generator& self) {
            const uint64_t seed = fresh_seed();
            self.manual_seed(seed);
            return seed;
          },
          "Restarts the stream at a seed from the operating system's entropy and returns it.")
      .def(
          "initial_seed", [](const Generator& self) { return self.state().seed; },
          "The seed the stream was last started from.")
      .def(
          "get_state", [](const Generator& self) { return state_tensor(self.state()); },
          "The stream's state (seed and next counter) as an int64 tensor of 2 elements.")
      .def(
          "set_state",
          [](Generator& self, const Tensor& state) -> Generator& {
            self.set_state(state_from_tensor("Generator.set_state", state));
            return self;
          },
          "new_state"_a, nb::rv_policy::reference,
          "Puts the stream where get_state() found it; returns the generator.")
      // Pickling and copy.copy / copy.deepcopy give a new stream where this one stands, as for
      // torch.Generator.
      .def("__getstate__",
           [](const Generator& self) {
             const RngState s = self.state();
             return std::make_tuple(s.seed, s.offset);
           })
      .def("__setstate__",
           [](Generator& self, const std::tuple<uint64_t, uint64_t>& state) {
             new (&self) Generator();
             self.set_state({std::get<0>(state), std::get<1>(state)});
           })
      .def_prop_ro(
          "device",
          [](const Generator&) { return nb::module_::import_("kiln").attr("device")("cpu"); },
          "kiln.device('cpu'): Kiln's generators draw on the CPU.");
  mint.attr("default_generator") = default_generator();
  mint.def(
      "manual_seed",
      [](nb::handle seed) {
        manual_seed(seed_from_object("manual_seed", seed));
        return nb::module_::import_("kiln._C.mint").attr("default_generator");
      },
      "seed"_a,
      "Seeds the default generator: later rand/randn/randint/randperm/multinomial/bernoulli/"
      "dropout calls repeat exactly. Returns kiln.default_generator.");
  mint.def(
      "seed",
      [] {
        const uint64_t seed = fresh_seed();
        manual_seed(seed);
        return seed;
      },
      "Seeds the default generator from the operating system's entropy and returns the seed.");
  mint.def(
      "initial_seed", [] { return get_rng_state().seed; },
      "The seed the default generator was last started from.");
  mint.def(
      "get_rng_state", [] { return state_tensor(get_rng_state()); },
      "The default generator's state (seed and next counter) as an int64 tensor of 2 elements: "
      "set_rng_state(state) makes the draws after it repeat (PyTorch's torch.get_rng_state).");
  mint.def(
      "set_rng_state",
      [](const Tensor& state) { set_rng_state(state_from_tensor("set_rng_state", state)); },
      "new_state"_a, "Puts the default generator where get_rng_state() found it.");
}

}  // namespace kiln::py
