#include "convert.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "kiln/error.h"
#include "ops/scalar_range.h"

namespace kiln::py {

nb::dlpack::dtype dlpack_dtype(DType d) {
  using Code = nb::dlpack::dtype_code;
  auto make = [](Code c, int bits) {
    return nb::dlpack::dtype{static_cast<uint8_t>(c), static_cast<uint8_t>(bits), 1};
  };
  switch (d) {
    case DType::kBool: return make(Code::Bool, 8);
    case DType::kInt8: return make(Code::Int, 8);
    case DType::kUInt8: return make(Code::UInt, 8);
    case DType::kInt16: return make(Code::Int, 16);
    case DType::kInt32: return make(Code::Int, 32);
    case DType::kInt64: return make(Code::Int, 64);
    case DType::kFloat16: return make(Code::Float, 16);
    case DType::kBFloat16: return make(Code::Bfloat, 16);
    case DType::kFloat32: return make(Code::Float, 32);
    case DType::kFloat64: return make(Code::Float, 64);
  }
  KILN_ASSERT(false) << "dlpack_dtype: unknown dtype " << static_cast<int>(d);
}

DType dtype_from_dlpack(nb::dlpack::dtype dt, const char* what) {
  for (int i = 0; i < kNumDTypes; ++i) {
    const DType d = static_cast<DType>(i);
    if (dlpack_dtype(d) == dt) return d;
  }
  KILN_FAIL(kDType) << what << ": expected a dtype Kiln supports (bool, int8, uint8, int16, "
                    << "int32, int64, float16, bfloat16, float32, float64), got DLPack code "
                    << int(dt.code) << " with " << int(dt.bits) << " bits and " << int(dt.lanes)
                    << " lanes";
}

namespace {

nb::handle numpy() {
  // Leaked on purpose: a static nb::object would be released after the interpreter is gone.
  static PyObject* np = nb::module_::import_("numpy").release().ptr();
  return np;
}

// kiln.tensor's Python numbers (NumPy's array of them, `arr`) checked against `dtype` (or what
// Kiln holds when none is given): a number past an integer dtype's range, NaN or inf for an integer
// dtype, or an int past int64 where no floating dtype takes it, is a kValue error, never a wrap, as
// in assignment (NumPy 2 and PyTorch refuse them too). bool takes any number; a float's fraction
// truncates, as a cast. Returns `arr`, or it as float64 where ints past int64 (an object or uint64
// array to NumPy) meet a float: a floating dtype, or a float among them. `data` is what NumPy made
// `arr` of, whose ints it may have turned into floats.
nb::object checked_numbers(nb::object arr, nb::handle data, const DType* dtype) {
  if (nb::cast<int64_t>(arr.attr("size")) == 0) return arr;
  const std::string kind = nb::cast<std::string>(arr.attr("dtype").attr("kind"));
  const auto does_not_fit = [&](nb::handle value, const char* range) {
    KILN_FAIL(kValue) << "tensor: the value " << nb::str(value).c_str() << " does not fit in "
                      << range;
  };
  // The first Python int of `items` past int64 (None if none).
  const auto first_past_int64 = [](nb::handle items) -> nb::object {
    for (nb::handle item : items) {
      int overflow = 0;
      if (PyLong_Check(item.ptr())) PyLong_AsLongLongAndOverflow(item.ptr(), &overflow);
      if (overflow != 0) return nb::borrow(item);
    }
    return nb::none();
  };
  // NumPy makes float64 of ints past int64 mixed with others ([2**63, 1]): without a float among
  // them (or a floating dtype asked for) they are ints too wide for any integer dtype.
  constexpr double kInt64Bound = 9223372036854775808.0;  // 2**63
  if (kind == "f" && (dtype == nullptr || !is_floating_point(*dtype)) &&
      (nb::cast<double>(arr.attr("max")()) >= kInt64Bound ||
       nb::cast<double>(arr.attr("min")()) < -kInt64Bound)) {
    const nb::object items = numpy().attr("asarray")(data, nb::arg("dtype") = "O");
    bool any_float = false;
    for (nb::handle item : items.attr("flat")) any_float = any_float || PyFloat_Check(item.ptr());
    if (!any_float)
      does_not_fit(first_past_int64(items.attr("flat")), "int64, the widest integer dtype");
  }
  // Python ints past int64: NumPy's uint64 (past uint64: objects); other unsigned data (a NumPy
  // uint8 scalar, a memoryview) is what it is.
  const bool past_int64 = kind == "u" && nb::cast<int>(arr.attr("dtype").attr("itemsize")) == 8 &&
                          nb::cast<uint64_t>(arr.attr("max")()) > static_cast<uint64_t>(INT64_MAX);
  if (kind == "O" || past_int64) {
    bool any_float = false;
    for (nb::handle item : arr.attr("flat")) {
      PyObject* o = item.ptr();
      any_float = any_float || PyFloat_Check(o);
      KILN_CHECK_TYPE(PyLong_Check(o) || PyFloat_Check(o) || past_int64)
          << "tensor: expected numbers (bool, int, float) in nested sequences, got "
          << nb::str(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(o)))).c_str();
    }
    if (dtype != nullptr ? is_floating_point(*dtype) : any_float) {
      return arr.attr("astype")("float64");
    }
    does_not_fit(kind == "O" ? first_past_int64(arr.attr("flat")) : arr.attr("max")(),
                 "int64, the widest integer dtype");
  }
  if (dtype == nullptr || !is_integral(*dtype) || kind == "b") return arr;
  const nb::object low = arr.attr("min")(), high = arr.attr("max")();
  for (nb::handle bound : {low, high}) {
    const bool fits = kind == "f" ? detail::double_fits(*dtype, nb::cast<double>(bound))
                                  : detail::int_fits(*dtype, nb::cast<int64_t>(bound));
    if (!fits) does_not_fit(bound, dtype_name(*dtype));
  }
  return arr;
}

}  // namespace

bool is_numpy_array(nb::handle obj) { return nb::isinstance(obj, numpy().attr("ndarray")); }

bool is_read_only(nb::handle obj) {
  const auto writeable = [](nb::handle a) {
    return nb::cast<bool>(a.attr("flags").attr("writeable"));
  };
  if (!is_numpy_array(obj) || writeable(obj)) return false;
  // A read-only view of writable memory (np.broadcast_to's) is read-only to NumPy only, against
  // writes through overlapping elements, which Kiln refuses too; memory that is itself read-only
  // (bytes, a read-only mapping) is what may not be shared.
  // The chain of bases may pass through objects that are not arrays (sliding_window_view's
  // DummyArray); its last array is the one that owns or wraps the memory.
  nb::object root = nb::borrow(obj);
  for (nb::object base = obj.attr("base"); !base.is_none();
       base = nb::getattr(base, "base", nb::none())) {
    if (is_numpy_array(base)) root = base;
  }
  return !writeable(root);
}

Tensor tensor_from_numpy(nb::handle array_in, bool copy) {
  KILN_CHECK_TYPE(is_numpy_array(array_in))
      << "from_numpy: expected a NumPy array, got "
      << nb::cast<std::string>(nb::str(array_in.type().attr("__name__")))
      << " (kiln.tensor converts other objects)";
  // A copy takes any layout: negative strides, or a field of a structured array.
  const bool reorder = copy && !nb::cast<bool>(array_in.attr("flags").attr("c_contiguous"));
  const nb::object array = reorder ? array_in.attr("copy")("C") : nb::borrow(array_in);
  // Arrays of objects, strings, complex numbers, long doubles or another byte order have no
  // DLPack dtype (nanobind's conversion failed with a bare std::bad_cast).
  const nb::object numpy_dtype = array.attr("dtype");
  const std::string kind = nb::cast<std::string>(numpy_dtype.attr("kind"));
  const int64_t itemsize = nb::cast<int64_t>(numpy_dtype.attr("itemsize"));
  // NumPy's kinds of Kiln's dtypes: bool, signed ints, uint8 (uint16 to uint64 reached
  // dtype_from_dlpack, whose message spoke of DLPack codes), floats up to float64.
  const bool held = kind == "b" || kind == "i" || (kind == "u" && itemsize == 1) ||
                    (kind == "f" && itemsize <= 8);
  KILN_CHECK_DTYPE(nb::cast<bool>(numpy_dtype.attr("isnative")) && held)
      << "cannot read a NumPy array of dtype " << nb::cast<std::string>(nb::repr(numpy_dtype))
      << "; expected bool, int8, uint8, int16, int32, int64, float16, float32 or float64 in "
         "native byte order (convert it with array.astype(...))";
  for (nb::handle stride : array.attr("strides")) {
    KILN_CHECK_VALUE(nb::cast<int64_t>(stride) % itemsize == 0)
        << "from_numpy: a stride of " << nb::cast<int64_t>(stride)
        << " bytes is no multiple of the item size, " << itemsize
        << " (a field of a structured array?); pass a copy (kiln.tensor(array) copies)";
  }
  auto arr = nb::cast<nb::ndarray<nb::ro, nb::device::cpu>>(array);
  const DType dtype = dtype_from_dlpack(arr.dtype(), "from_numpy");
  Shape shape(arr.ndim());
  Shape strides(arr.ndim());
  for (size_t i = 0; i < arr.ndim(); ++i) {
    shape[i] = static_cast<int64_t>(arr.shape(i));
    strides[i] = arr.stride(i);
    KILN_CHECK_VALUE(strides[i] >= 0 || shape[i] <= 1)
        << "arrays with negative strides are not supported; pass a copy (numpy.ascontiguousarray)";
    if (shape[i] <= 1) strides[i] = std::max<int64_t>(strides[i], 0);
  }
  // The deleter keeps the exporting object alive; it may run on any thread, so it takes the GIL.
  auto* owner = new nb::object(nb::borrow(array));
  Tensor view = Tensor::from_blob(const_cast<void*>(arr.data()), shape, dtype, strides,
                                  [owner](void*) {
                                    nb::gil_scoped_acquire gil;
                                    delete owner;
                                  });
  return copy ? view.clone() : view;
}

nb::object tensor_to_numpy(const Tensor& t) {
  // NumPy's NPY_MAXDIMS; past it nanobind made a 0-d array of objects, silently.
  static const int64_t max_dims =
      nb::cast<std::string>(numpy().attr("__version__")).rfind("1.", 0) == 0 ? 32 : 64;
  KILN_CHECK_VALUE(t.ndim() <= max_dims)
      << "a NumPy array holds at most " << max_dims << " dimensions; this tensor has " << t.ndim()
      << " (reshape it first)";
  Tensor source = t;
  if (t.dtype() == DType::kBFloat16) {
    source = Tensor::empty(t.shape(), DType::kFloat32);
    copy_into(source, t);
  }
  std::vector<size_t> shape(source.shape().begin(), source.shape().end());
  // The capsule owns a handle to the tensor, so the array keeps the storage alive.
  auto* keep = new Tensor(source);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  void* data = source.numel() == 0 ? nullptr : source.data_ptr();
  nb::ndarray<nb::numpy> array(data, shape.size(), shape.data(), owner, source.strides().data(),
                               dlpack_dtype(source.dtype()));
  return nb::cast(array, nb::rv_policy::reference);
}

DType dtype_from_numpy(nb::handle numpy_dtype) {
  nb::object dt = numpy().attr("dtype")(numpy_dtype);
  std::string name = nb::cast<std::string>(dt.attr("name"));
  return dtype_from_name(name);
}

DType dtype_from_object(nb::handle obj) {
  if (nb::isinstance<DType>(obj)) return nb::cast<DType>(obj);
  if (nb::isinstance<nb::str>(obj)) return dtype_from_name(nb::cast<std::string>(obj));
  // Python's float names the default floating dtype (float32 unless set_default_dtype changed
  // it), as a Python float literal becomes a tensor of it.
  if (obj.ptr() == reinterpret_cast<PyObject*>(&PyFloat_Type)) return default_float_dtype();
  if (obj.ptr() == reinterpret_cast<PyObject*>(&PyLong_Type)) return DType::kInt64;
  if (obj.ptr() == reinterpret_cast<PyObject*>(&PyBool_Type)) return DType::kBool;
  try {
    return dtype_from_numpy(obj);
  } catch (const nb::python_error&) {
    KILN_FAIL(kDType) << "expected a dtype (kiln.float32, 'float32', numpy.float32, ...), got "
                      << nb::cast<std::string>(nb::repr(obj));
  }
}

DType DTypeArg::get() const { return dtype_from_object(obj); }

namespace {

// Whether nested lists / tuples hold a value that is float64 of its own (a float64 tensor, NumPy
// value or array), which makes the tensor float64, as in PyTorch; Python floats give the default
// floating dtype.
bool holds_float64(nb::handle obj, nb::handle np) {
  PyObject* o = obj.ptr();
  if (PyFloat_CheckExact(o) || PyLong_Check(o)) return false;
  if (const Tensor* t = tensor_ptr(o)) return t->dtype() == DType::kFloat64;
  if (PyList_Check(o) || PyTuple_Check(o)) {
    for (nb::handle item : obj) {
      if (holds_float64(item, np)) return true;
    }
    return false;
  }
  if (nb::isinstance(obj, np.attr("ndarray")) || nb::isinstance(obj, np.attr("generic"))) {
    return nb::cast<std::string>(obj.attr("dtype").attr("name")) == "float64";
  }
  return false;
}

}  // namespace

Tensor tensor_from_object(nb::handle data, const DType* dtype) {
  // The default floating dtype, read once: the target of Python floats when no dtype is given.
  const DType float_default = default_float_dtype();
  KILN_CHECK_TYPE(!data.is_none())
      << "tensor: expected data (a number, a nested list of numbers, a NumPy array or a tensor), "
         "got None";
  Tensor result;
  if (nb::isinstance<Tensor>(data)) {
    result = nb::cast<Tensor>(data).clone();
  } else {
    nb::handle np = numpy();
    // A NumPy array or scalar keeps its dtype (np.float64(0.1) stays float64, as in PyTorch).
    const bool was_array =
        nb::isinstance(data, np.attr("ndarray")) || nb::isinstance(data, np.attr("generic"));
    nb::object arr;
    try {
      arr = np.attr("asarray")(data);
    } catch (const nb::python_error& e) {
      // Ragged sequences: NumPy's ValueError says where.
      if (!e.matches(PyExc_ValueError)) throw;
      KILN_FAIL(kValue) << "tensor: " << nb::str(e.value()).c_str();
    }
    if (!was_array) arr = checked_numbers(std::move(arr), data, dtype);
    // Python floats become the default floating dtype (float32 unless set, the deep-learning
    // default), not NumPy's float64, unless a float64 value is among them. They convert from
    // their own (double) value, once, below: float64 keeps every digit, and bfloat16 (which
    // NumPy lacks) rounds as any cast to it does.
    if (!was_array && dtype == nullptr &&
        nb::cast<std::string>(arr.attr("dtype").attr("name")) == "float64" &&
        !holds_float64(data, np)) {
      dtype = &float_default;
    }
    result = tensor_from_numpy(arr, /*copy=*/true);
  }
  if (dtype != nullptr && *dtype != result.dtype()) {
    Tensor cast = Tensor::empty(result.shape(), *dtype);
    copy_into(cast, result);
    return cast;
  }
  return result;
}

bool is_index(PyObject* o) {
  if (!PyIndex_Check(o) || PyBool_Check(o)) return false;
  const Tensor* t = tensor_ptr(o);
  return t == nullptr || (is_integral(t->dtype()) && t->numel() == 1);
}

bool is_int_arg(nb::handle obj) {
  PyObject* o = obj.ptr();
  if (!is_index(o)) return false;
  if (PyLong_Check(o)) return true;
  // A NumPy array or a tensor has __index__ too (for one element), but it is one int only when
  // 0-d.
  const nb::object ndim = nb::getattr(obj, "ndim", nb::none());
  return ndim.is_none() || nb::cast<int64_t>(ndim) == 0;
}

bool is_device(const char* what, nb::handle target) {
  if (!PyUnicode_Check(target.ptr())) return false;
  const std::string name = nb::cast<std::string>(target);
  const std::string type = name.substr(0, name.find(':'));
  if (type == "cpu") {
    KILN_CHECK_VALUE(name == "cpu" || name == "cpu:0")
        << what << ": unknown device '" << name << "'; Kiln has one device, 'cpu'";
    return true;
  }
  for (const char* other : {"cuda", "mps", "xpu", "meta", "hip", "xla"}) {
    KILN_CHECK_VALUE(type != other)
        << what << ": device '" << name << "' is not available; Kiln runs on the CPU ('cpu')";
  }
  return false;
}

void check_device(const char* what, nb::handle device) {
  if (device.is_none()) return;
  KILN_CHECK_TYPE(PyUnicode_Check(device.ptr()))
      << what << ": expected device to be 'cpu', a kiln.device or None, got "
      << nb::type_name(device.type()).c_str();
  KILN_CHECK_VALUE(is_device(what, device))
      << what << ": unknown device '" << nb::cast<std::string>(device)
      << "'; Kiln has one device, 'cpu'";
}

std::string repr_of(nb::handle obj) { return nb::cast<std::string>(nb::repr(obj)); }

nb::tuple to_tuple(const Shape& s) {
  nb::list l;
  for (int64_t v : s) l.append(v);
  return nb::tuple(l);
}

Shape shape_arg(nb::handle obj, const char* what) {
  if (is_int_arg(obj)) {
    int64_t value = 0;
    KILN_CHECK_TYPE(nb::try_cast(obj, value))
        << what << ": " << nb::cast<std::string>(nb::repr(obj)) << " does not fit in int64";
    return {value};
  }
  Shape values;
  KILN_CHECK_TYPE(!nb::isinstance<nb::str>(obj) && nb::try_cast(obj, values))
      << what << ": expected an int or a sequence of ints, got "
      << nb::cast<std::string>(nb::repr(obj));
  return values;
}

void TensorArg::refuse_big_int() const {
  KILN_FAIL(kValue) << "the Python int " << nb::str(big_int_).c_str()
                    << " does not fit int64, the range of Kiln's integer scalars; use a float or "
                       "a floating-point tensor";
}

const Tensor* tensor_ptr(PyObject* o) {
  static PyTypeObject* const tensor_type =
      reinterpret_cast<PyTypeObject*>(nb::type<Tensor>().ptr());
  if (Py_TYPE(o) != tensor_type && !PyType_IsSubtype(Py_TYPE(o), tensor_type)) return nullptr;
  if (!nb::inst_ready(o)) return nullptr;  // Tensor.__new__ without __init__: not a tensor yet
  return nb::inst_ptr<Tensor>(o);
}

TensorObject tensor_object(Tensor&& t) {
  static const nb::handle tensor_type = nb::type<Tensor>();
  nb::object o = nb::inst_alloc(tensor_type);
  new (nb::inst_ptr<Tensor>(o)) Tensor(std::move(t));
  nb::inst_mark_ready(o);  // ready, and destroyed with the object
  return TensorObject(std::move(o));
}

}  // namespace kiln::py

namespace nanobind::detail {

bool type_caster<kiln::py::TensorArg>::from_python(handle src, uint32_t flags,
                                                   cleanup_list* cleanup) noexcept {
  try {
    if (const kiln::Tensor* t = kiln::py::tensor_ptr(src.ptr())) {
      value.borrow(t);
      return true;
    }
    if (PyBool_Check(src.ptr())) {
      value.own(kiln::Tensor::scalar(kiln::Scalar(src.ptr() == Py_True)));
      return true;
    }
    if (PyLong_Check(src.ptr())) {
      const long long v = PyLong_AsLongLong(src.ptr());
      if (v == -1 && PyErr_Occurred()) {  // beyond int64: refused when the binding reads it
        PyErr_Clear();
        value.hold_big_int(src);
        return true;
      }
      value.own(kiln::Tensor::scalar(kiln::Scalar(static_cast<int64_t>(v))));
      return true;
    }
    if (PyFloat_Check(src.ptr())) {
      value.own(kiln::Tensor::scalar(kiln::Scalar(PyFloat_AsDouble(src.ptr()))));
      return true;
    }
    if (nanobind::hasattr(src, "__array_interface__") || nanobind::hasattr(src, "__dlpack__")) {
      value.own(kiln::py::tensor_from_object(src, nullptr));
      return true;
    }
  } catch (...) {
    PyErr_Clear();
  }
  return false;
}

bool type_caster<kiln::py::TensorListArg>::from_python(handle src, uint32_t flags,
                                                       cleanup_list* cleanup) noexcept {
  PyObject* o = src.ptr();
  if (PyUnicode_Check(o) || PyBytes_Check(o) || !PySequence_Check(o)) return false;
  // The list or tuple itself, or a new list holding the items (alive until released below).
  PyObject* fast = PySequence_Fast(o, "");
  if (fast == nullptr) {
    PyErr_Clear();
    return false;
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  PyObject** items = PySequence_Fast_ITEMS(fast);
  value.tensors.clear();
  value.tensors.reserve(static_cast<size_t>(n));
  make_caster<kiln::py::TensorArg> item;
  bool ok = true;
  for (Py_ssize_t i = 0; ok && i < n; ++i) {
    ok = item.from_python(items[i], flags, cleanup) && !item.value.big_int().is_valid();
    if (ok) value.tensors.push_back(item.value.get());
  }
  Py_DECREF(fast);
  return ok;
}

bool type_caster<kiln::py::DTypeArg>::from_python(handle src, uint32_t, cleanup_list*) noexcept {
  if (src.is_none()) return false;
  value.obj = borrow(src);
  return true;
}

}  // namespace nanobind::detail
