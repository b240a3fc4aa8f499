// Parker: how runtime threads wait for a condition that another thread makes true. The waiter
// spins for a short while (a queued op usually arrives or finishes within microseconds), then
// sleeps on a condition variable; notify() costs one fence and one load when nobody sleeps, so the
// hot path of a busy pipeline never makes a system call.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "kiln/runtime.h"

namespace kiln::runtime {

/// The hooks a waiting caller runs around sleeping (the Python module releases the GIL there).
const BlockingHooks& blocking_hooks();

class Parker {
 public:
  /// Spins for up to `spin` before sleeping.
  explicit Parker(std::chrono::nanoseconds spin) : spin_(spin) {}

  /// Returns once `ready()` is true. `ready` must read state with acquire loads; it is called
  /// many times. With `run_blocking_hooks`, the embedder's hooks run around the sleep.
  template <typename Ready>
  void wait(Ready ready, bool run_blocking_hooks = false);

  /// Wakes every sleeping waiter. Call after making a condition true.
  void notify() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_relaxed) > 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      cv_.notify_all();
    }
  }

  /// Puts the parker back in its initial state in a child process after fork(), where another
  /// thread of the parent may have held the mutex.
  void reset_after_fork() {
    new (&mutex_) std::mutex();
    new (&cv_) std::condition_variable();
    sleepers_.store(0, std::memory_order_relaxed);
  }

 private:
  const std::chrono::nanoseconds spin_;
  std::atomic<int> sleepers_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

template <typename Ready>
void Parker::wait(Ready ready, bool run_blocking_hooks) {
  if (ready()) return;
  // Spin, reading the clock only every 64 rounds.
  const auto deadline = std::chrono::steady_clock::now() + spin_;
  for (int round = 1;; ++round) {
    if (ready()) return;
    cpu_relax();
    if (round % 64 == 0 && std::chrono::steady_clock::now() >= deadline) break;
  }
  const BlockingHooks& hooks = blocking_hooks();
  void* token = run_blocking_hooks && hooks.enter != nullptr ? hooks.enter() : nullptr;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    while (!ready()) cv_.wait(lock);
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
  }
  if (run_blocking_hooks && hooks.leave != nullptr) hooks.leave(token);
}

}  // namespace kiln::runtime
