// kiln.dtype and the dtype objects (kiln.float32, ...).
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "convert.h"
#include "kiln/dtype.h"

namespace kiln::py {
namespace nb = nanobind;
using namespace nb::literals;

void bind_dtype(nb::module_& m) {
  nb::enum_<DType> dtype(m, "dtype", "Element type of a tensor");
  for (int i = 0; i < kNumDTypes; ++i) {
    const DType d = static_cast<DType>(i);
    dtype.value(dtype_name(d), d);
  }
  dtype.def_prop_ro("itemsize", [](DType d) { return itemsize(d); })
      .def_prop_ro("is_floating_point", [](DType d) { return is_floating_point(d); })
      // PyTorch's: bool and uint8 are unsigned; Kiln has no complex dtype.
      .def_prop_ro("is_signed", [](DType d) { return is_signed(d); })
      .def_prop_ro("is_complex", [](DType) { return false; })
      .def_prop_ro("name", [](DType d) { return dtype_name(d); })
      .def("__repr__", [](DType d) { return std::string("kiln.") + dtype_name(d); })
      .def("__str__", [](DType d) { return std::string("kiln.") + dtype_name(d); });
  m.def("promote_types", [](DTypeArg a, DTypeArg b) { return promote_types(a, b); }, "a"_a, "b"_a,
        "The dtype a binary op between tensors of dtypes a and b produces.");
  m.def("as_dtype", [](nb::handle obj) { return dtype_from_object(obj); }, "obj"_a,
        "Converts a kiln dtype, a name ('float32'), a NumPy dtype or a Python type to kiln.dtype.");
  m.def(
      "set_default_dtype", [](DTypeArg d) { set_default_float_dtype(d.get()); }, "d"_a,
      "set_default_dtype(d): makes `d` (kiln.float16, bfloat16, float32 or float64) the default "
      "floating dtype, as torch.set_default_dtype: the dtype of kiln.tensor of Python floats, of "
      "the factories and layers given no dtype (zeros, rand, arange of floats, nn.Linear, ...), "
      "and of float results of integer inputs (int tensor * 2.5, true division, sin, mean). "
      "Another dtype is a KilnTypeError. Process-wide, not per thread. A kiln.jit function "
      "traces again after a change (the default is part of its signature).");
  m.def("get_default_dtype", &default_float_dtype,
        "The default floating dtype (torch.get_default_dtype): kiln.float32 unless "
        "set_default_dtype changed it.");
}

}  // namespace kiln::py
