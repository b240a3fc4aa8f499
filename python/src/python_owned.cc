#include "python_owned.h"

#include <mutex>
#include <unordered_set>
#include <vector>

namespace kiln::py {
namespace nb = nanobind;

namespace {

// Every PythonOwned alive. Its own mutex, not the GIL: a destructor may run after the interpreter
// has gone, when there is no GIL to take.
std::mutex& live_mutex() {
  static auto* mutex = new std::mutex();  // leaked: PythonOwned may die during static destruction
  return *mutex;
}
std::unordered_set<PythonOwned*>& live() {
  static auto* set = new std::unordered_set<PythonOwned*>();
  return *set;
}

}  // namespace

PythonOwned::PythonOwned(nb::object object) : object_(std::move(object)) {
  std::lock_guard<std::mutex> lock(live_mutex());
  live().insert(this);
}

PythonOwned::~PythonOwned() {
  {
    std::lock_guard<std::mutex> lock(live_mutex());
    live().erase(this);
  }
  // Released at exit already: no GIL to take (a thread taking it during finalization would hang).
  if (!object_.is_valid()) return;
  if (!Py_IsInitialized()) {
    object_.release();  // the interpreter is gone: nothing left to decrement
    return;
  }
  nb::gil_scoped_acquire gil;
  object_.reset();
}

void release_python_owned() {
  std::vector<PythonOwned*> owned;
  {
    std::lock_guard<std::mutex> lock(live_mutex());
    owned.assign(live().begin(), live().end());
  }
  for (PythonOwned* o : owned) {
    nb::object object;
    {
      // Still alive? Releasing an earlier one may have destroyed it (a hook's closure holding the
      // last reference to a tensor whose graph held this one).
      std::lock_guard<std::mutex> lock(live_mutex());
      if (live().count(o) != 0) object = std::move(o->object_);
    }
    object.reset();  // outside the lock: it may destroy other PythonOwned
  }
}

}  // namespace kiln::py
