// kiln._C.runtime: the eager pipeline's settings and sync points, the caching allocator's counters,
// and the hooks that release the GIL while Kiln waits (see kiln/runtime.h).
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "kiln/parallel.h"
#include "kiln/runtime.h"

namespace kiln::py {
namespace nb = nanobind;
using namespace nb::literals;

namespace {

// A thread that waits for the pipeline gives up the GIL: a worker may need it (a tensor viewing a
// NumPy array releases the array when its last op has run).
void* release_gil() {
  // Not once the interpreter is finalizing (a wait at C++ exit, after Python's own drain): then
  // PyGILState_Check says yes with no thread state to save, and saving it aborted the process.
#if PY_VERSION_HEX >= 0x030D0000
  const bool finalizing = Py_IsFinalizing();
#else
  const bool finalizing = _Py_IsFinalizing();
#endif
  if (!Py_IsInitialized() || finalizing || !PyGILState_Check()) return nullptr;
  return PyEval_SaveThread();
}

void reacquire_gil(void* token) {
  if (token != nullptr) PyEval_RestoreThread(static_cast<PyThreadState*>(token));
}

}  // namespace

void bind_runtime(nb::module_& m) {
  runtime::set_blocking_hooks({&release_gil, &reacquire_gil});
  nb::module_ rt = m.def_submodule("runtime", "The eager pipeline (kiln.runtime)");
  rt.def(
      "set_pipeline",
      [](const std::string& mode) {
        runtime::set_pipeline(runtime::pipeline_mode_from_name(mode));
      },
      "mode"_a,
      "Runs eager ops in `mode`: '4stage' (a worker per stage), '2stage' (one worker) or 'sync' "
      "(inline, errors raise at the call). Waits for queued ops first.");
  rt.def(
      "get_pipeline", [] { return std::string(runtime::pipeline_mode_name(runtime::get_pipeline())); },
      "The current pipeline mode.");
  rt.def("synchronize", &runtime::synchronize,
         "Waits for every queued op; raises the first failure since the last synchronize() that "
         "no read has raised.");
  rt.def("drain", &runtime::drain,
         "Waits for every queued op without raising (failures stay for synchronize()).");
  rt.def(
      "memory_stats",
      [] {
        const runtime::MemoryStats s = runtime::memory_stats();
        nb::dict d;
        d["allocated"] = s.allocated;
        d["cached"] = s.cached;
        d["peak"] = s.peak;
        d["num_allocs"] = s.num_allocs;
        d["num_os_allocs"] = s.num_os_allocs;
        return d;
      },
      "The caching allocator's counters (in the asynchronous modes, of what the ops that have run "
      "allocated; synchronize() first for the program's view): allocated, cached and peak bytes, "
      "blocks handed out "
      "(num_allocs) and of those the ones that took new memory from the system (num_os_allocs). "
      "Tensors of at most 64 bytes keep their memory inside their storage object and are not "
      "counted.");
  rt.def("empty_cache", &runtime::empty_cache,
         "Waits for the ops issued so far, then returns every cached block to the system.");
  rt.def("reset_peak_memory_stats", &runtime::reset_peak_memory_stats,
         "Waits for the ops issued so far, then sets the peak to what is allocated now.");
  rt.def("set_num_threads", &set_num_threads, "n"_a,
         "Sets how many threads each kernel's parallel regions use (n >= 1), for the whole "
         "process; ops already queued may run with either count.");
  rt.def("get_num_threads", &get_num_threads,
         "Threads a kernel launched from this thread uses: set_num_threads()'s value, by default "
         "one per core (or OMP_NUM_THREADS).");
}

}  // namespace kiln::py
