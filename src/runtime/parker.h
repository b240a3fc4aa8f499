// How runtime threads wait for each other. A waiter spins for a short while (a queued op usually
// arrives or finishes within microseconds), then sleeps on a condition variable. Waking costs the
// notifier one fence and one load when nobody sleeps, so a busy pipeline makes no system calls.
//
//   Parker     waits for any condition; notify() wakes every sleeper to re-check it.
//   Counter    a sequence number that only grows (a pipeline stage's progress); wait_for(target)
//              sleeps until it reaches target, and advance() wakes a sleeper only once its target
//              is reached, so a waiter far behind is not woken on every step.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <mutex>
#include <new>
#include <thread>

#include "kiln/runtime.h"

namespace kiln::runtime {

/// The hooks a waiting caller runs around sleeping (the Python module releases the GIL there).
const BlockingHooks& blocking_hooks();

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// Spins until ready() or `budget` has passed; returns ready().
template <typename Ready>
bool spin_until(Ready&& ready, std::chrono::nanoseconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (int round = 1;; ++round) {
    if (ready()) return true;
    cpu_relax();
    // Reading the clock costs more than a pause: look only every 64 rounds. Yield there too:
    // with more runtime threads than cores (4stage on two cores) the thread being waited for may
    // be runnable on this very core.
    if (round % 64 == 0) {
      if (std::chrono::steady_clock::now() >= deadline) return ready();
      std::this_thread::yield();
    }
  }
}

/// Runs the embedder's blocking hooks around a sleep when asked to.
class BlockingScope {
 public:
  explicit BlockingScope(bool run_hooks) : hooks_(run_hooks ? &blocking_hooks() : nullptr) {
    if (hooks_ != nullptr && hooks_->enter != nullptr) token_ = hooks_->enter();
  }
  ~BlockingScope() {
    if (hooks_ != nullptr && hooks_->leave != nullptr) hooks_->leave(token_);
  }
  BlockingScope(const BlockingScope&) = delete;
  BlockingScope& operator=(const BlockingScope&) = delete;

 private:
  const BlockingHooks* hooks_;
  void* token_ = nullptr;
};

class Parker {
 public:
  /// Returns once `ready()` is true, spinning for up to `spin` first. `ready` must read state with
  /// acquire loads. With `run_blocking_hooks`, the embedder's hooks run around the sleep.
  template <typename Ready>
  void wait(Ready ready, std::chrono::nanoseconds spin, bool run_blocking_hooks = false) {
    if (spin_until(ready, spin)) return;
    BlockingScope blocking(run_blocking_hooks);
    std::unique_lock<std::mutex> lock(mutex_);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    while (!ready()) cv_.wait(lock);
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
  }

  /// Wakes every sleeper. Call after making a condition true.
  void notify() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_relaxed) > 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      cv_.notify_all();
    }
  }

  /// The initial state again, in a child process after fork() (another thread of the parent may
  /// have held the mutex).
  void reset_after_fork() {
    new (&mutex_) std::mutex();
    new (&cv_) std::condition_variable();
    sleepers_.store(0, std::memory_order_relaxed);
  }

 private:
  std::atomic<int> sleepers_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
};

class Counter {
 public:
  uint64_t load() const { return value_.load(std::memory_order_acquire); }

  /// Sets the value (which only grows; one thread advances a counter) and wakes the sleepers
  /// whose target it reached.
  void advance(uint64_t value) {
    value_.store(value, std::memory_order_release);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (value >= wake_at_.load(std::memory_order_relaxed)) {
      std::lock_guard<std::mutex> lock(mutex_);
      wake_at_.store(kNobody, std::memory_order_relaxed);  // sleepers still short re-register
      cv_.notify_all();
    }
  }

  /// Returns true once the value is at least `target`, or false once `*cancel` (when given) is
  /// set and interrupt() called; see Parker::wait for `spin` and the hooks.
  bool wait_for(uint64_t target, std::chrono::nanoseconds spin, bool run_blocking_hooks = false,
                const std::atomic<bool>* cancel = nullptr) {
    auto reached = [&] { return load() >= target; };
    auto cancelled = [&] { return cancel != nullptr && cancel->load(std::memory_order_acquire); };
    if (spin_until([&] { return reached() || cancelled(); }, spin)) return reached();
    BlockingScope blocking(run_blocking_hooks);
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      // The lowest target among sleepers is where advance() starts waking.
      uint64_t wake_at = wake_at_.load(std::memory_order_relaxed);
      while (target < wake_at && !wake_at_.compare_exchange_weak(wake_at, target,
                                                                  std::memory_order_seq_cst)) {
      }
      std::atomic_thread_fence(std::memory_order_seq_cst);
      if (reached()) return true;
      if (cancelled()) return false;
      cv_.wait(lock);
    }
  }

  /// Wakes every sleeper, to see a cancel flag set before the call.
  void interrupt() {
    std::lock_guard<std::mutex> lock(mutex_);
    wake_at_.store(kNobody, std::memory_order_relaxed);
    cv_.notify_all();
  }

  /// See Parker::reset_after_fork.
  void reset_after_fork() {
    new (&mutex_) std::mutex();
    new (&cv_) std::condition_variable();
    wake_at_.store(kNobody, std::memory_order_relaxed);
  }

 private:
  static constexpr uint64_t kNobody = std::numeric_limits<uint64_t>::max();
  std::atomic<uint64_t> value_{0};
  std::atomic<uint64_t> wake_at_{kNobody};
  std::mutex mutex_;
  std::condition_variable cv_;
};

}  // namespace kiln::runtime
