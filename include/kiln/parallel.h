// Intra-op parallelism: the one thread pool that kernels (built-in and custom) share.
//
//   kiln::parallel_for(0, n, /*grain=*/32768, [&](int64_t begin, int64_t end) {
//     for (int64_t i = begin; i < end; ++i) y[i] = x[i] * 2;
//   });
//
// The pool is OpenMP's (libgomp), the same runtime oneDNN uses in Debian's build, so a kernel that
// calls oneDNN and a kernel that calls parallel_for never run two pools against each other (see
// docs/architecture.md, "Threads"). Ranges shorter than `grain` run inline on the caller's thread;
// a parallel_for inside another runs inline too. An exception thrown by `fn` on any thread is
// rethrown on the caller's thread after every chunk has finished.
//
// The thread count is one setting for the process (set_num_threads), which every kernel launch
// applies to the OpenMP runtime of the thread it runs on, so that oneDNN's regions follow it too.
// The eager pipeline's workers may cap it while the caller's thread is busy (see
// docs/architecture.md, "Threads"). A child of fork() runs every region on one thread:
// libgomp's pool does not survive fork, and a child whose parent ran a region (Kiln's or oneDNN's)
// would hang in its first one.
#pragma once

#include <cstdint>
#include <functional>

#include "kiln/export.h"

namespace kiln {

/// Threads a parallel region started by the calling thread uses: set_num_threads()'s value
/// (default: the machine's cores, or OMP_NUM_THREADS), within the thread's cap; 1 in a child of
/// fork().
KILN_API int get_num_threads();
/// Sets the pool's size for later parallel regions on every thread (n >= 1). Thread-safe.
KILN_API void set_num_threads(int n);
/// Calls fn(chunk_begin, chunk_end) over disjoint chunks covering [begin, end), each at least
/// `grain` long except possibly the last, on up to get_num_threads() threads.
KILN_API void parallel_for(int64_t begin, int64_t end, int64_t grain,
                           const std::function<void(int64_t, int64_t)>& fn);

namespace detail {
/// Caps get_num_threads() on the calling thread (0: no cap); the pipeline's workers use it.
KILN_API void set_thread_cap(int n);
/// Makes OpenMP regions started by the calling thread, oneDNN's included, use get_num_threads()
/// threads; launch_op calls it before every kernel.
KILN_API void apply_num_threads();
}  // namespace detail

}  // namespace kiln
