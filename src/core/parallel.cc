#include "kiln/parallel.h"

#include <omp.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>

#include "kiln/error.h"

namespace kiln {

namespace {

// OpenMP's own default (the cores, or OMP_NUM_THREADS), read before anything changes it.
const int kDefaultThreads = omp_get_max_threads();
std::atomic<int> g_num_threads{0};  // 0: the default
thread_local int t_thread_cap = 0;  // 0: none

// In a child of fork(), every region runs on one thread: libgomp's pool does not survive fork,
// and a child whose parent ran a region (Kiln's, or oneDNN's in a matmul) hangs in its first one,
// as PyTorch's children would without the same rule.
std::atomic<bool> g_forked{false};
void single_threaded_after_fork() {
  g_forked.store(true, std::memory_order_relaxed);
  omp_set_num_threads(1);
}
const int g_atfork = pthread_atfork(nullptr, nullptr, &single_threaded_after_fork);

}  // namespace

int get_num_threads() {
  if (g_forked.load(std::memory_order_relaxed)) return 1;
  const int set = g_num_threads.load(std::memory_order_relaxed);
  const int n = set > 0 ? set : kDefaultThreads;
  return t_thread_cap > 0 ? std::min(n, t_thread_cap) : n;
}

void set_num_threads(int n) {
  KILN_CHECK_VALUE(n >= 1) << "set_num_threads: expected at least 1 thread, got " << n;
  g_num_threads.store(n, std::memory_order_relaxed);
  omp_set_num_threads(get_num_threads());
}

namespace detail {

void set_thread_cap(int n) { t_thread_cap = std::max(n, 0); }

void apply_num_threads() {
  const int n = get_num_threads();
  if (omp_get_max_threads() != n) omp_set_num_threads(n);
}

}  // namespace detail

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_chunks = (n + grain - 1) / grain;
  const int threads = static_cast<int>(std::min<int64_t>(get_num_threads(), max_chunks));
  if (threads <= 1 || omp_in_parallel()) {
    fn(begin, end);
    return;
  }
  std::exception_ptr error;
  std::mutex error_mutex;
#pragma omp parallel num_threads(threads)
  {
    const int64_t tid = omp_get_thread_num();
    const int64_t nt = omp_get_num_threads();
    const int64_t chunk = (n + nt - 1) / nt;
    const int64_t lo = begin + tid * chunk;
    const int64_t hi = std::min(end, lo + chunk);
    if (lo < hi) {
      try {
        fn(lo, hi);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace kiln
