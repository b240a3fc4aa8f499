// DLPack for kiln.Tensor: export through nanobind's ndarray (which writes the capsules, versioned
// or not), import through nanobind's ndarray caster (which speaks every __dlpack__ variant).
#include "dlpack.h"

#include "convert.h"

#include <nanobind/ndarray.h>

#include <memory>
#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::py {
namespace nb = nanobind;
using namespace nb::literals;

namespace {

constexpr int kDLCPU = 1;

std::string type_of(nb::handle obj) { return nb::inst_name(obj).c_str(); }

// Tensor.__dlpack__ (the array API's signature). The capsule owns a handle to the tensor, so
// the consumer keeps the storage alive for as long as it needs it.
nb::object tensor_dlpack(const Tensor& t, nb::handle stream, nb::handle max_version,
                         nb::handle dl_device, nb::handle copy) {
  if (!stream.is_none()) throw nb::buffer_error("__dlpack__: stream must be None for CPU tensors");
  if (!dl_device.is_none() && !dl_device.equal(nb::make_tuple(kDLCPU, 0))) {
    throw nb::buffer_error(("__dlpack__: kiln tensors live on the CPU (1, 0), got dl_device " +
                            nb::cast<std::string>(nb::repr(dl_device)))
                               .c_str());
  }
  if (!copy.is_none() && !PyBool_Check(copy.ptr())) {
    throw nb::type_error("__dlpack__: copy must be True, False or None");
  }
  const Tensor source = copy.ptr() == Py_True ? t.clone() : t;
  std::vector<size_t> shape(source.shape().begin(), source.shape().end());
  auto* keep = new Tensor(source);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  nb::ndarray<nb::array_api> array(source.data_ptr(), shape.size(), shape.data(), owner,
                                   source.strides().data(), dlpack_dtype(source.dtype()),
                                   kDLCPU, 0);
  // The array API object implements __dlpack__ itself; it picks the capsule version.
  nb::object exporter = nb::cast(array, nb::rv_policy::reference);
  return exporter.attr("__dlpack__")("max_version"_a = max_version);
}

Tensor from_dlpack(nb::handle obj) {
  KILN_CHECK_TYPE(nb::hasattr(obj, "__dlpack__"))
      << "from_dlpack: expected an object with __dlpack__ (a NumPy array, a PyTorch tensor, ...), "
      << "got " << type_of(obj);
  if (nb::hasattr(obj, "__dlpack_device__")) {
    nb::object device = obj.attr("__dlpack_device__")();
    int device_type = 0;
    KILN_CHECK_TYPE(nb::isinstance<nb::tuple>(device) && nb::len(device) == 2 &&
                    nb::try_cast(device[0], device_type))
        << "from_dlpack: " << type_of(obj) << ".__dlpack_device__() returned "
        << nb::cast<std::string>(nb::repr(device)) << ", expected (device type, device id)";
    KILN_CHECK_VALUE(device_type == kDLCPU)
        << "from_dlpack: expected a CPU array (DLPack device 1), got device "
        << nb::cast<std::string>(nb::repr(device));
  }
  // Memory the producer marks read-only (DLPack 1.0's flag, which only a request for a writable
  // array asks about) is copied: Kiln's tensors are all writable, and writing through a view
  // changed immutable bytes or crashed on a read-only mapping. A NumPy array says it itself, which
  // also tells a read-only view of writable memory (np.broadcast_to's) from read-only memory.
  nb::ndarray<nb::ro> array;
  bool read_only = false;
  if (is_numpy_array(obj)) {
    read_only = is_read_only(obj);
  } else if (nb::ndarray<> writable; nb::try_cast(obj, writable, /*convert=*/false)) {
    array = nb::ndarray<nb::ro>(writable);
  } else {
    read_only = true;
  }
  if (!array.is_valid() && !nb::try_cast(obj, array, /*convert=*/false)) {
    // The caster swallows what the producer raised (a BufferError saying why it cannot export, a
    // kiln tensor's failure): asking once more lets it through.
    obj.attr("__dlpack__")();
    KILN_FAIL(kType) << "from_dlpack: " << type_of(obj)
                     << ".__dlpack__() did not give a usable DLPack tensor";
  }
  const DType dtype = dtype_from_dlpack(array.dtype(), "from_dlpack");
  Shape shape(array.ndim());
  Shape strides(array.ndim());
  for (size_t i = 0; i < array.ndim(); ++i) {
    shape[i] = static_cast<int64_t>(array.shape(i));
    strides[i] = array.stride(i);
    KILN_CHECK_VALUE(strides[i] >= 0 || shape[i] <= 1)
        << "from_dlpack: expected non-negative strides, got " << strides[i] << " in dimension "
        << i << "; pass a contiguous copy";
    if (shape[i] <= 1) strides[i] = std::max<int64_t>(strides[i], 0);
  }
  // The tensor keeps the imported ndarray, and so the producer's DLManagedTensor, alive: some
  // producers hand out memory that lives only as long as the capsule. Its release may touch Python
  // objects and may run on any thread, so it takes the GIL.
  auto keep = std::make_unique<nb::ndarray<nb::ro>>(array);
  nb::ndarray<nb::ro>* held = keep.get();
  Tensor t = Tensor::from_blob(const_cast<void*>(array.data()), shape, dtype, strides,
                               [held](void*) {
                                 nb::gil_scoped_acquire gil;
                                 delete held;
                               });
  keep.release();
  return read_only ? t.clone() : t;
}

}  // namespace

void bind_dlpack(nb::module_& m) {
  nb::handle cls = nb::type<Tensor>();
  cls.attr("__dlpack__") = nb::cpp_function(
      &tensor_dlpack, nb::name("__dlpack__"), nb::scope(cls), nb::is_method(), nb::kw_only(),
      "stream"_a = nb::none(), "max_version"_a = nb::none(), "dl_device"_a = nb::none(),
      "copy"_a = nb::none(),
      "A DLPack capsule viewing this tensor (copy=True exports a copy), as the array API "
      "standard's __dlpack__.");
  cls.attr("__dlpack_device__") = nb::cpp_function(
      [](const Tensor&) { return nb::make_tuple(kDLCPU, 0); }, nb::name("__dlpack_device__"),
      nb::scope(cls), nb::is_method(), "(device type, device id) in DLPack's numbering: (1, 0).");
  m.def("from_dlpack", &from_dlpack, "obj"_a,
        "A tensor sharing the memory of any object with __dlpack__ (NumPy arrays, PyTorch "
        "tensors, ...), keeping it alive; read-only memory is copied. In the asynchronous "
        "pipeline modes, queued ops read and write the shared memory when they run "
        "(kiln.runtime).");
}

}  // namespace kiln::py
