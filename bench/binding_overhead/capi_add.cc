// The floor: the same Vec16 and add(a, b) written against the CPython C API by hand, add being a
// METH_FASTCALL function (no argument tuple, no overload resolution).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <new>
#include <utility>

#include "vec16.h"

namespace {

struct PyVec16 {
  PyObject_HEAD
  Vec16 value;
};

PyTypeObject* vec16_type = nullptr;

PyObject* vec16_new(PyTypeObject* type, PyObject* /*args*/, PyObject* /*kwargs*/) {
  PyObject* self = type->tp_alloc(type, 0);
  if (self == nullptr) return nullptr;
  new (&reinterpret_cast<PyVec16*>(self)->value) Vec16();
  return self;
}

void vec16_dealloc(PyObject* self) {
  reinterpret_cast<PyVec16*>(self)->value.~Vec16();
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyObject* add_fastcall(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !PyObject_TypeCheck(args[0], vec16_type) ||
      !PyObject_TypeCheck(args[1], vec16_type)) {
    PyErr_SetString(PyExc_TypeError, "add(a: Vec16, b: Vec16)");
    return nullptr;
  }
  Vec16 r = add(reinterpret_cast<PyVec16*>(args[0])->value,
                reinterpret_cast<PyVec16*>(args[1])->value);
  PyObject* out = vec16_type->tp_alloc(vec16_type, 0);
  if (out == nullptr) return nullptr;
  new (&reinterpret_cast<PyVec16*>(out)->value) Vec16(std::move(r));
  return out;
}

PyType_Slot vec16_slots[] = {
    {Py_tp_new, reinterpret_cast<void*>(vec16_new)},
    {Py_tp_dealloc, reinterpret_cast<void*>(vec16_dealloc)},
    {0, nullptr},
};

PyType_Spec vec16_spec = {"capi_add.Vec16", sizeof(PyVec16), 0, Py_TPFLAGS_DEFAULT, vec16_slots};

PyMethodDef methods[] = {
    {"add", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(add_fastcall)),
     METH_FASTCALL, "a + b"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "capi_add", nullptr, -1, methods,
                          nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit_capi_add() {
  PyObject* m = PyModule_Create(&module_def);
  if (m == nullptr) return nullptr;
  vec16_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&vec16_spec));
  // AddObjectRef does not steal: vec16_type keeps its own reference for add().
  if (vec16_type == nullptr ||
      PyModule_AddObjectRef(m, "Vec16", reinterpret_cast<PyObject*>(vec16_type)) < 0) {
    Py_XDECREF(vec16_type);
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
