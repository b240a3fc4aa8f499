// nanobind binding of Vec16 and add(a, b). Built twice by CMakeLists.txt: once at -O2 like the
// pybind11 module, once with nanobind's defaults as kiln._C uses them (NB_STATIC, size-optimised).
#include <nanobind/nanobind.h>

#include "vec16.h"

namespace nb = nanobind;

NB_MODULE(NB_MODULE_NAME, m) {
  nb::class_<Vec16>(m, "Vec16").def(nb::init<>());
  m.def("add", &add);
}
