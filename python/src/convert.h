// Conversions between Python objects and Kiln values, shared by every bind_*.cc.
//
// TensorArg accepts a kiln.Tensor, a Python number (a weak scalar, see kiln/scalar.h) or anything
// NumPy can turn into an array; DTypeArg accepts a kiln.dtype, a dtype name ("float32"), a NumPy
// dtype or a NumPy scalar type. Both are nanobind type casters, so a binding just takes them as
// parameters. kiln::Shape (a SmallVector) converts to and from any Python sequence of ints, as a
// std::vector would.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/detail/nb_list.h>

#include <string>

#include "kiln/tensor.h"

namespace kiln::py {

namespace nb = nanobind;

/// A kiln.Tensor argument is borrowed from its Python object, which the call keeps alive (no
/// reference-count traffic per argument); anything else is converted into a tensor of its own.
/// A Python int beyond int64 is taken too, and refused when the binding reads it: a kValue error
/// that says why, where a caster that failed would give nanobind's TypeError listing signatures
/// that name int among the accepted types. A binding with a use for it reads big_int() first.
class TensorArg {
 public:
  const Tensor& get() const {
    if (borrowed_ != nullptr) return *borrowed_;
    if (big_int_.is_valid()) [[unlikely]]
      refuse_big_int();
    return owned_;
  }
  operator const Tensor&() const { return get(); }  // NOLINT: seamless use as a Tensor
  void borrow(const Tensor* tensor) {
    borrowed_ = tensor;
    owned_ = Tensor();
    big_int_ = nb::handle();
  }
  void own(Tensor tensor) {
    borrow(nullptr);
    owned_ = std::move(tensor);
  }
  /// Holds a Python int beyond int64 (borrowed, as a tensor is).
  void hold_big_int(nb::handle value) {
    borrow(nullptr);
    big_int_ = value;
  }
  /// The Python int beyond int64 this argument is, or an invalid handle.
  nb::handle big_int() const { return big_int_; }

 private:
  [[noreturn]] void refuse_big_int() const;

  const Tensor* borrowed_ = nullptr;
  Tensor owned_;
  nb::handle big_int_;
};

/// A sequence of TensorArg values, each copied while its Python object is alive: a sequence that is
/// not a list or tuple (a kiln.Tensor iterated by rows, a generator-backed Sequence) makes its
/// items on the fly, so nothing may be borrowed from them past the conversion.
struct TensorListArg {
  std::vector<Tensor> tensors;
};

/// The tensor a kiln.Tensor (or subclass) object holds, or null for any other object; a pointer
/// compare for kiln.Tensor itself (nanobind's isinstance looks the C++ type up in a hash table).
const Tensor* tensor_ptr(PyObject* o);

/// A new kiln.Tensor object holding `t` (moved in). What nb::cast does, without its searches for
/// the Python type and for an object already wrapping the same C++ address (never there for a
/// result): the binding of each small, frequent op returns its result through it.
using TensorObject = nb::typed<nb::object, Tensor>;  // a kiln.Tensor in signatures
TensorObject tensor_object(Tensor&& t);

/// Holds the Python object and converts on use, so that a bad value raises kiln.DTypeError with
/// the reason (a caster that refused would give only nanobind's generic TypeError).
struct DTypeArg {
  nb::object obj;
  DType get() const;
  operator DType() const { return get(); }  // NOLINT
};

/// repr(obj), for error messages.
std::string repr_of(nb::handle obj);
/// A shape as Python's tuple of ints (what Tensor.shape gives).
nb::tuple to_tuple(const Shape& s);
/// A shape or list of dims given as one int or a sequence of ints (Python ints, NumPy integers,
/// anything with __index__); anything else is a kType error naming `what` and the value.
Shape shape_arg(nb::handle obj, const char* what);
/// Whether `o` is an integer argument: anything with __index__ (Python and NumPy integers, a
/// kiln.Tensor of one integer element, as PyTorch takes them) but a bool or a bool tensor (True
/// as a size, a dim or a count is a mistake, not 1). A float tensor is not one, though its
/// __index__ exists to say so.
bool is_index(PyObject* o);
/// Whether `obj` is one integer to shape_arg: an is_index object, and a NumPy array or a
/// kiln.Tensor only when 0-d (one of [2, 3] is a shape).
bool is_int_arg(nb::handle obj);

/// Whether `target` names a device: "cpu" and "cpu:0" do (kiln.device is a str); another
/// device's name ("cuda:0") is a kValue error naming `what` and saying Kiln runs on the CPU;
/// anything else (a dtype or its name) does not.
bool is_device(const char* what, nb::handle target);
/// The factories' and converters' `device` argument (PyTorch's): None or the CPU; another device
/// is a kValue error, another kind of value a kType error, each naming `what`.
void check_device(const char* what, nb::handle device);

/// The DLPack dtype of a kiln dtype, and back; the reverse throws kDType (naming `what`) for
/// DLPack dtypes Kiln lacks.
nb::dlpack::dtype dlpack_dtype(DType d);
DType dtype_from_dlpack(nb::dlpack::dtype dt, const char* what);

/// A kiln tensor from a NumPy array (copy when `copy`, else sharing memory and keeping the array
/// alive). Throws kType for another object, kDType for NumPy dtypes Kiln lacks and, when sharing,
/// kValue for negative strides or strides that are no multiple of the item size (a copy takes
/// any layout).
Tensor tensor_from_numpy(nb::handle array, bool copy);
/// Whether `obj` is a NumPy array over read-only memory, which no tensor may share: Kiln's tensors
/// are all writable, and writing through one changed immutable bytes or crashed on a read-only
/// mapping. (A read-only view of writable memory, as np.broadcast_to gives, is not.)
bool is_read_only(nb::handle obj);
/// Whether `obj` is a NumPy array (an instance of numpy.ndarray or a subclass).
bool is_numpy_array(nb::handle obj);
/// A NumPy array viewing `t` (bfloat16 tensors, which NumPy lacks, convert to a float32 copy).
nb::object tensor_to_numpy(const Tensor& t);
/// kiln.tensor(data, dtype=None): lists, scalars, NumPy arrays, kiln tensors; always copies.
Tensor tensor_from_object(nb::handle data, const DType* dtype);
/// The DType of a NumPy dtype (or anything np.dtype() accepts); throws kDType.
DType dtype_from_numpy(nb::handle numpy_dtype);
DType dtype_from_object(nb::handle obj);

}  // namespace kiln::py

namespace nanobind::detail {

template <typename T, size_t N>
struct type_caster<kiln::SmallVector<T, N>> : list_caster<kiln::SmallVector<T, N>, T> {};

template <>
struct type_caster<kiln::py::TensorArg> {
  NB_TYPE_CASTER(kiln::py::TensorArg, const_name("kiln.Tensor | float | int | bool"))
  bool from_python(handle src, uint32_t flags, cleanup_list* cleanup) noexcept;
  static handle from_cpp(const kiln::py::TensorArg& value, rv_policy policy,
                         cleanup_list* cleanup) noexcept {
    return make_caster<kiln::Tensor>::from_cpp(value.get(), policy, cleanup);
  }
};

template <>
struct type_caster<kiln::py::TensorListArg> {
  NB_TYPE_CASTER(kiln::py::TensorListArg, const_name("Sequence[kiln.Tensor | float | int | bool]"))
  bool from_python(handle src, uint32_t flags, cleanup_list* cleanup) noexcept;
};

template <>
struct type_caster<kiln::py::DTypeArg> {
  NB_TYPE_CASTER(kiln::py::DTypeArg, const_name("kiln.dtype | str"))
  bool from_python(handle src, uint32_t flags, cleanup_list* cleanup) noexcept;
  static handle from_cpp(const kiln::py::DTypeArg& value, rv_policy policy,
                         cleanup_list* cleanup) noexcept {
    return make_caster<kiln::DType>::from_cpp(value.get(), policy, cleanup);
  }
};

}  // namespace nanobind::detail
