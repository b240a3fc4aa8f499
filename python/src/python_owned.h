// PythonOwned: a Python object that C++ keeps past the call that handed it over (a gradient hook,
// a custom Function's backward, a pattern pass's check).
//
//   auto hook = std::make_shared<PythonOwned>(std::move(fn));   // with the GIL held
//   register_hook(t, [hook](const Tensor& g) {
//     nb::gil_scoped_acquire gil;
//     if (!hook->get().is_valid()) return Tensor();             // released at exit
//     ...hook->get()(g)...
//   });
//
// Whichever thread drops the last reference, the object is released with the GIL held. At the
// interpreter's exit every one still held is released first (release_python_owned, which kiln._C
// registers with atexit): what keeps it may outlive the interpreter (the pass registry), or close a
// cycle through C++ that Python's collector cannot see (a hook whose function holds its module's
// globals, and so the tensor it is registered on), which would keep both alive past the end.
#pragma once

#include <nanobind/nanobind.h>

namespace kiln::py {

class PythonOwned {
 public:
  /// Takes `object`; call with the GIL held.
  explicit PythonOwned(nanobind::object object);
  ~PythonOwned();
  PythonOwned(const PythonOwned&) = delete;
  PythonOwned& operator=(const PythonOwned&) = delete;

  /// The object, or an invalid one once released at exit. Read it with the GIL held.
  const nanobind::object& get() const { return object_; }

 private:
  friend void release_python_owned();
  nanobind::object object_;
};

/// Releases the object of every PythonOwned alive; call with the GIL held.
void release_python_owned();

}  // namespace kiln::py
