// kiln::Error -> the Python exception types defined in kiln/errors.py.
#include <nanobind/stl/string.h>

#include <array>

#include "bindings.h"
#include "kiln/error.h"

namespace kiln::py {
namespace nb = nanobind;
namespace {

// One Python type per ErrorKind, installed by kiln/errors.py through _set_error_types.
std::array<PyObject*, static_cast<size_t>(ErrorKind::kDistributed) + 1> g_error_types{};

void set_error(const Error& e) {
  PyObject* type = g_error_types[static_cast<size_t>(e.kind())];
  PyErr_SetString(type != nullptr ? type : PyExc_RuntimeError, e.what());
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const Error& e) {
    set_error(e);
  }
}

}  // namespace

void set_python_error_from_current_exception() {
  try {
    throw;
  } catch (nb::python_error& e) {
    e.restore();
  } catch (const Error& e) {
    set_error(e);
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "an unknown C++ exception");
  }
}

void bind_errors(nb::module_& m) {
  nb::register_exception_translator(translate);
  m.def(
      "_set_error_types",
      [](nb::list types) {
        KILN_CHECK(nb::len(types) == g_error_types.size())
            << "_set_error_types: expected " << g_error_types.size() << " types";
        for (size_t i = 0; i < g_error_types.size(); ++i) {
          nb::object t = types[i];
          Py_XDECREF(g_error_types[i]);
          g_error_types[i] = t.release().ptr();
        }
      },
      "Installs the exception types for each ErrorKind (called by kiln.errors).");
  // A test hook: raises a kiln::Error of the given kind with the given message.
  m.def("_raise_error", [](int kind, const std::string& message) {
    throw Error(static_cast<ErrorKind>(kind), message);
  });
}

}  // namespace kiln::py
