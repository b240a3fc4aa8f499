// kiln._C._load_extension: a custom-op library as Python functions (kiln.ops.CustomOpBuilder
// builds the module from them).
//
// Each function an extension defines becomes a builtin function object (METH_FASTCALL |
// METH_KEYWORDS) whose `self` is a capsule holding the C++ function and its parameter names. The
// call converts arguments straight into the pointers the type-erased invoker reads: a kiln.Tensor
// argument is passed as the address of the Tensor inside the Python object (no copy), numbers go
// through small arrays on the stack. So a custom op costs what a built-in op costs to call (see
// bench/RESULTS.md, "Custom operators"). A binding library's generic dispatch (overload
// resolution, casters, a tuple per call) would cost more than the op itself at small sizes.
#include <nanobind/stl/string.h>

#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "bindings.h"
#include "convert.h"
#include "kiln/extension.h"
#include "kiln/op.h"

namespace kiln::py {
namespace nb = nanobind;
namespace {

constexpr size_t kMaxArgs = 64;

// What a builtin function object created here carries (its `self` capsule owns one).
struct BoundFunction {
  PyMethodDef method{};
  std::string name;
  std::string doc;
  std::vector<nb::object> arg_names;  // interned str, for matching keyword arguments
  std::shared_ptr<const ExtensionModule> module;  // keeps the library (and its code) alive
  const ExtensionFunction* function = nullptr;    // set for m.def functions
  std::shared_ptr<const OpDef> op;                // set for m.def_op ops
  size_t num_inputs = 0;                          // op inputs; the other parameters are attrs
};

const char* kind_name(ArgKind kind) {
  switch (kind) {
    case ArgKind::kTensor: return "kiln.Tensor";
    case ArgKind::kOptionalTensor: return "kiln.Tensor or None";
    case ArgKind::kInt64:
    case ArgKind::kInt32: return "int";
    case ArgKind::kFloat: return "float";
    case ArgKind::kBool: return "bool";
    case ArgKind::kString: return "str";
    case ArgKind::kInts: return "a list of int";
  }
  return "?";
}

[[noreturn]] void type_error(const BoundFunction& f, size_t i, const char* expected,
                             PyObject* got) {
  PyErr_Format(PyExc_TypeError, "%s(): argument '%s' (position %zu) must be %s, not %s",
               f.name.c_str(), nb::borrow<nb::str>(f.arg_names[i]).c_str(), i + 1, expected,
               Py_TYPE(got)->tp_name);
  throw nb::python_error();
}

// Puts positional and keyword arguments into one slot per parameter (null: not given).
void gather(const BoundFunction& f, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
            PyObject** slots) {
  const size_t n = f.arg_names.size();
  if (static_cast<size_t>(nargs) > n) {
    PyErr_Format(PyExc_TypeError, "%s() takes %zu positional arguments but %zd were given",
                 f.name.c_str(), n, nargs);
    throw nb::python_error();
  }
  for (size_t i = 0; i < n; ++i) slots[i] = i < static_cast<size_t>(nargs) ? args[i] : nullptr;
  const Py_ssize_t nkw = kwnames != nullptr ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    size_t i = 0;
    while (i < n && f.arg_names[i].ptr() != key) ++i;  // interned: identity almost always
    if (i == n) {
      i = 0;
      while (i < n && PyUnicode_Compare(f.arg_names[i].ptr(), key) != 0) ++i;
    }
    if (i == n) {
      PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'",
                   f.name.c_str(), key);
      throw nb::python_error();
    }
    if (slots[i] != nullptr) {
      PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%U'", f.name.c_str(),
                   key);
      throw nb::python_error();
    }
    slots[i] = args[nargs + k];
  }
}

void require(const BoundFunction& f, PyObject* const* slots, size_t i) {
  if (slots[i] == nullptr) {
    PyErr_Format(PyExc_TypeError, "%s() missing required argument '%U' (position %zu)",
                 f.name.c_str(), f.arg_names[i].ptr(), i + 1);
    throw nb::python_error();
  }
}

// An int argument; past `type`'s range (int64, or int for an int parameter) an OverflowError.
int64_t to_int(const BoundFunction& f, size_t i, PyObject* o, const char* type = "int64") {
  if (!is_index(o)) type_error(f, i, "int", o);
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (v == -1 && PyErr_Occurred()) throw nb::python_error();
  if (overflow != 0) {
    PyErr_Format(PyExc_OverflowError, "%s(): argument '%U' = %R does not fit in %s", f.name.c_str(),
                 f.arg_names[i].ptr(), o, type);
    throw nb::python_error();
  }
  return v;
}

double to_float(const BoundFunction& f, size_t i, PyObject* o) {
  if (!PyFloat_Check(o) && !PyLong_Check(o) && !nb::hasattr(o, "__float__")) {
    type_error(f, i, "float", o);
  }
  const double v = PyFloat_AsDouble(o);
  if (v == -1.0 && PyErr_Occurred()) throw nb::python_error();
  return v;
}

std::vector<int64_t> to_ints(const BoundFunction& f, size_t i, PyObject* o) {
  if (!PyList_Check(o) && !PyTuple_Check(o)) type_error(f, i, "a list of int", o);
  nb::object seq = nb::borrow(o);
  std::vector<int64_t> values;
  for (nb::handle item : seq) {
    if (!is_index(item.ptr())) {
      type_error(f, i, "a list of int", item.ptr());
    }
    values.push_back(to_int(f, i, item.ptr()));
  }
  return values;
}

// An undefined tensor (an output the function did not make) is None, as an optional argument's.
PyObject* to_python(Tensor&& t) {
  if (!t.defined()) Py_RETURN_NONE;
  return tensor_object(std::move(t)).release().ptr();
}

// `tensors`: a std::vector<Tensor> or a TensorList, whose tensors move into the Python objects.
template <typename List>
PyObject* tensors_to_python(List&& tensors, bool as_tuple) {
  nb::object seq = nb::steal(as_tuple ? PyTuple_New(static_cast<Py_ssize_t>(tensors.size()))
                                      : PyList_New(static_cast<Py_ssize_t>(tensors.size())));
  if (!seq.is_valid()) throw nb::python_error();
  for (size_t i = 0; i < tensors.size(); ++i) {
    PyObject* item = to_python(std::move(tensors[i]));
    if (as_tuple) {
      PyTuple_SET_ITEM(seq.ptr(), static_cast<Py_ssize_t>(i), item);
    } else {
      PyList_SET_ITEM(seq.ptr(), static_cast<Py_ssize_t>(i), item);
    }
  }
  return seq.release().ptr();
}

// The call of an m.def function.
PyObject* call_function(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                        PyObject* kwnames) {
  const auto& f = *static_cast<const BoundFunction*>(PyCapsule_GetPointer(self, nullptr));
  const ExtensionFunction& fn = *f.function;
  const size_t n = fn.arg_kinds.size();
  try {
    std::array<PyObject*, kMaxArgs> slots;
    gather(f, args, nargs, kwnames, slots.data());
    std::array<const void*, kMaxArgs> ptrs;
    std::array<int64_t, kMaxArgs> ints;
    std::array<double, kMaxArgs> floats;
    std::array<bool, kMaxArgs> bools;
    std::vector<std::string> strings;            // used only by str parameters
    std::vector<std::vector<int64_t>> int_lists;  // used only by list parameters
    static const Tensor kNone;
    for (size_t i = 0; i < n; ++i) {
      const ArgKind kind = fn.arg_kinds[i];
      if (slots[i] == nullptr && kind == ArgKind::kOptionalTensor) slots[i] = Py_None;
      require(f, slots.data(), i);
      PyObject* o = slots[i];
      switch (kind) {
        case ArgKind::kTensor:
        case ArgKind::kOptionalTensor: {
          if (kind == ArgKind::kOptionalTensor && o == Py_None) {
            ptrs[i] = &kNone;
            break;
          }
          const Tensor* t = tensor_ptr(o);
          if (t == nullptr) type_error(f, i, kind_name(kind), o);
          ptrs[i] = t;
          break;
        }
        case ArgKind::kInt64:
        case ArgKind::kInt32:
          ints[i] = to_int(f, i, o, kind == ArgKind::kInt32 ? "int" : "int64");
          if (kind == ArgKind::kInt32 && (ints[i] < INT32_MIN || ints[i] > INT32_MAX)) {
            PyErr_Format(PyExc_OverflowError, "%s(): argument '%U' = %lld does not fit in int",
                         f.name.c_str(), f.arg_names[i].ptr(), static_cast<long long>(ints[i]));
            throw nb::python_error();
          }
          ptrs[i] = &ints[i];
          break;
        case ArgKind::kFloat:
          floats[i] = to_float(f, i, o);
          ptrs[i] = &floats[i];
          break;
        case ArgKind::kBool:
          if (!PyBool_Check(o)) type_error(f, i, "bool", o);
          bools[i] = o == Py_True;
          ptrs[i] = &bools[i];
          break;
        case ArgKind::kString: {
          if (!PyUnicode_Check(o)) type_error(f, i, "str", o);
          Py_ssize_t size = 0;
          const char* data = PyUnicode_AsUTF8AndSize(o, &size);
          if (data == nullptr) throw nb::python_error();
          strings.reserve(n);  // no reallocation: ptrs point into it
          strings.emplace_back(data, static_cast<size_t>(size));
          ptrs[i] = &strings.back();
          break;
        }
        case ArgKind::kInts:
          int_lists.reserve(n);
          int_lists.push_back(to_ints(f, i, o));
          ptrs[i] = &int_lists.back();
          break;
      }
    }
    CallResults results;
    // A std::exception (or anything) the user's function throws is a KilnError naming it.
    kiln::detail::with_error_context([&] { fn.invoke(ptrs.data(), &results); },
                                     [&] { return "in " + f.name + "()"; });
    switch (fn.result_kind) {
      case ResultKind::kNone: Py_RETURN_NONE;
      case ResultKind::kTensor: return to_python(std::move(results.tensor));
      case ResultKind::kTuple: return tensors_to_python(std::move(results.tensors), true);
      case ResultKind::kList: return tensors_to_python(std::move(results.tensors), false);
    }
    Py_RETURN_NONE;
  } catch (...) {
    set_python_error_from_current_exception();
    return nullptr;
  }
}

Tensor op_input(const BoundFunction& f, size_t i, PyObject* o) {
  nb::detail::make_caster<TensorArg> caster;  // a kiln.Tensor first, by type pointer
  if (!caster.from_python(o, 0, nullptr)) {
    type_error(f, i, "a kiln.Tensor, a number or an array", o);
  }
  return caster.value.get();
}

AttrValue op_attr(const BoundFunction& f, size_t i, PyObject* o, const AttrSpec& spec) {
  if (o == Py_None) return std::monostate{};
  switch (spec.kind) {
    case AttrKind::kBool:
      if (!PyBool_Check(o)) type_error(f, i, "bool", o);
      return o == Py_True;
    case AttrKind::kInt: return to_int(f, i, o);
    case AttrKind::kFloat: return to_float(f, i, o);
    case AttrKind::kString:
      if (!PyUnicode_Check(o)) type_error(f, i, "str", o);
      return nb::cast<std::string>(nb::handle(o));
    case AttrKind::kInts: return to_ints(f, i, o);
    case AttrKind::kDType: return dtype_from_object(o);
    case AttrKind::kScalar:
      if (PyBool_Check(o)) return Scalar(o == Py_True);
      if (is_index(o)) return Scalar(to_int(f, i, o));
      return Scalar(to_float(f, i, o));
  }
  type_error(f, i, attr_kind_name(spec.kind), o);
}

// The call of an m.def_op op: inputs, then attributes, then kiln::call_op.
PyObject* call_op_function(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                           PyObject* kwnames) {
  const auto& f = *static_cast<const BoundFunction*>(PyCapsule_GetPointer(self, nullptr));
  const OpDef& op = *f.op;
  try {
    std::array<PyObject*, kMaxArgs> slots;
    gather(f, args, nargs, kwnames, slots.data());
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < f.num_inputs; ++i) {
      const InputSpec& spec = op.input_specs()[i];
      if (slots[i] == nullptr && spec.optional) slots[i] = Py_None;
      require(f, slots.data(), i);
      PyObject* o = slots[i];
      if (spec.optional && o == Py_None) {
        inputs.emplace_back();
      } else if (spec.variadic) {
        if (!PyList_Check(o) && !PyTuple_Check(o)) type_error(f, i, "a list of kiln.Tensor", o);
        for (nb::handle item : nb::borrow(o)) inputs.push_back(op_input(f, i, item.ptr()));
      } else {
        inputs.push_back(op_input(f, i, o));
      }
    }
    Attrs attrs;
    for (size_t i = f.num_inputs; i < f.arg_names.size(); ++i) {
      const AttrSpec& spec = op.attr_specs()[i - f.num_inputs];
      if (slots[i] == nullptr) continue;  // call_op fills defaults and names missing ones
      attrs.set(spec.name, op_attr(f, i, slots[i], spec));
    }
    TensorList outputs = call_op(op, inputs, attrs);
    if (op.num_outputs() == 1) return to_python(std::move(outputs.at(0)));
    return tensors_to_python(std::move(outputs), op.num_outputs() != OpDef::kVariableOutputs);
  } catch (...) {
    set_python_error_from_current_exception();
    return nullptr;
  }
}

using FastCall = PyObject* (*)(PyObject*, PyObject* const*, Py_ssize_t, PyObject*);

nb::object make_function(std::unique_ptr<BoundFunction> bound, FastCall call,
                         const std::vector<std::string>& arg_names) {
  KILN_CHECK_VALUE(arg_names.size() <= kMaxArgs)
      << bound->name << ": a function exposed to Python takes at most " << kMaxArgs
      << " parameters, got " << arg_names.size();
  for (const std::string& a : arg_names) {
    bound->arg_names.push_back(nb::steal(PyUnicode_InternFromString(a.c_str())));
  }
  bound->method.ml_name = bound->name.c_str();
  bound->method.ml_meth = reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(call));
  bound->method.ml_flags = METH_FASTCALL | METH_KEYWORDS;
  bound->method.ml_doc = bound->doc.c_str();
  nb::object capsule = nb::steal(PyCapsule_New(bound.get(), nullptr, [](PyObject* c) {
    delete static_cast<BoundFunction*>(PyCapsule_GetPointer(c, nullptr));
  }));
  if (!capsule.is_valid()) throw nb::python_error();
  BoundFunction* raw = bound.release();  // owned by the capsule from here
  nb::object fn = nb::steal(PyCFunction_NewEx(&raw->method, capsule.ptr(), nullptr));
  if (!fn.is_valid()) throw nb::python_error();
  return fn;
}

// An m.def function's parameters for its __text_signature__: "x, bias=None" where a call may
// leave the trailing std::optional<Tensor> parameters out (Python's signatures allow defaults
// only after the parameters without one).
std::string parameter_list(const ExtensionFunction& fn) {
  size_t first_optional = fn.arg_names.size();
  while (first_optional > 0 && fn.arg_kinds[first_optional - 1] == ArgKind::kOptionalTensor) {
    --first_optional;
  }
  std::string s;
  for (size_t i = 0; i < fn.arg_names.size(); ++i) {
    s += (i ? ", " : "") + fn.arg_names[i] + (i >= first_optional ? "=None" : "");
  }
  return s;
}

// An attribute default as a Python literal, for a __text_signature__; `...` where there is none
// (a non-finite float, which inspect cannot read back).
std::string python_literal(const AttrValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return "None";
        } else if constexpr (std::is_same_v<T, bool>) {
          return v ? "True" : "False";
        } else if constexpr (std::is_same_v<T, int64_t>) {
          return std::to_string(v);
        } else if constexpr (std::is_same_v<T, double>) {
          return std::isfinite(v) ? nb::cast<std::string>(nb::repr(nb::float_(v))) : "...";
        } else if constexpr (std::is_same_v<T, std::string>) {
          return nb::cast<std::string>(nb::repr(nb::str(v.c_str())));
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          std::string out = "[";
          for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
          return out + "]";
        } else if constexpr (std::is_same_v<T, DType>) {
          return std::string("'") + dtype_name(v) + "'";
        } else {
          return "...";  // a Scalar default
        }
      },
      value);
}

// "name(x, y=None, k=1)\n--\n\n": what makes inspect.signature() and help() show a def_op
// function's parameters (OpDef::signature() has types, which a text signature cannot), as the
// call takes them: inputs, then attributes, by position or name; a variadic input is one list
// (as kiln.mint.cat's). A parameter without a default after one with a default can only be
// keyword-only in Python's syntax: from there on the signature marks them so.
std::string text_signature(const std::string& name, const OpDef& op) {
  std::string s = name + "(";
  bool first = true;
  const auto next = [&] { return first ? (first = false, "") : ", "; };
  bool defaulted = false, keyword_only = false;
  const auto add = [&](const std::string& parameter, const std::string& default_value) {
    if (default_value.empty() && defaulted && !keyword_only) {
      s += next() + std::string("*");
      keyword_only = true;
    }
    defaulted = defaulted || !default_value.empty();
    s += next() + parameter + (default_value.empty() ? "" : "=" + default_value);
  };
  for (const InputSpec& in : op.input_specs()) add(in.name, in.optional ? "None" : "");
  for (const AttrSpec& attr : op.attr_specs()) {
    add(attr.name, attr.default_value ? python_literal(*attr.default_value) : "");
  }
  return s + ")\n--\n\n";
}

nb::list load_extension_functions(const std::string& path, const std::string& name) {
  std::shared_ptr<const ExtensionModule> module = load_extension(path, name);
  nb::list functions;
  for (const ExtensionFunction& fn : module->functions()) {
    auto bound = std::make_unique<BoundFunction>();
    bound->name = fn.name;
    // "name(a, b)\n--\n\n" makes inspect.signature() and help() show the parameters.
    bound->doc = fn.name + "(" + parameter_list(fn) + ")\n--\n\n" + fn.doc;
    bound->module = module;
    bound->function = &fn;
    functions.append(nb::make_tuple(fn.name, make_function(std::move(bound), &call_function,
                                                           fn.arg_names)));
  }
  for (const auto& [py_name, op] : module->ops()) {
    auto bound = std::make_unique<BoundFunction>();
    bound->name = py_name;
    bound->doc = text_signature(py_name, *op) + op->signature() +
                 (op->doc().empty() ? "" : "\n\n" + op->doc());
    bound->module = module;
    bound->op = op;
    bound->num_inputs = op->input_specs().size();
    std::vector<std::string> arg_names;
    for (const InputSpec& in : op->input_specs()) arg_names.push_back(in.name);
    for (const AttrSpec& attr : op->attr_specs()) arg_names.push_back(attr.name);
    functions.append(
        nb::make_tuple(py_name, make_function(std::move(bound), &call_op_function, arg_names)));
  }
  return functions;
}

}  // namespace

void bind_extension(nb::module_& m) {
  m.def("_load_extension", &load_extension_functions, nb::arg("path"), nb::arg("name"),
        "Loads a custom-op library; returns [(python_name, function), ...] (used by kiln.ops).");
  m.def("_abi_version", &abi_version, "KILN_ABI_VERSION of this libkiln.");
}

}  // namespace kiln::py
