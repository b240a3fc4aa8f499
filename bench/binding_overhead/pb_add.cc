// pybind11 binding of Vec16 and add(a, b).
#include <pybind11/pybind11.h>

#include "vec16.h"

namespace py = pybind11;

PYBIND11_MODULE(pb_add, m) {
  py::class_<Vec16>(m, "Vec16").def(py::init<>());
  m.def("add", &add);
}
