"""Wall-clock timers of single calls, shared by the Python benchmarks in bench/.

    from _timing import best_seconds, call_times  # bench/ is sys.path[0] for `python bench/x.py`

- call_times(fn, reps, sync=None, warmup=1): the wall times in seconds (time.perf_counter) of
  `reps` single calls fn(), each followed by sync() when one is given, after `warmup` untimed
  calls (each also followed by sync()). Scripts that pool samples over rounds or child processes
  take the best and the median of these lists.
- best_seconds(fn, reps, sync=None): the shortest of call_times(fn, reps, sync), after one
  warm-up call.

Why best of n: on a shared machine, noise (other processes, preemption, a scheduler slice lost
in an OpenMP barrier) only ever adds time, so the shortest call is the closest to the code's own
cost and the most repeatable number; a median, where a script shows one, says how typical it is.
The warm-up call pays the one-time costs (lazy initialization, allocator caches, thread-pool
start, page faults) that a steady-state number must not include. Kiln ops are asynchronous:
pass kiln.runtime.synchronize as `sync`, or have fn read its result, so that a call's time
covers its kernels.

Loops that measure something else on purpose (throughput over many calls, per-step training
time, first-call and build time) stay in their scripts.
"""

import time


def call_times(fn, reps, sync=None, warmup=1):
    sync = sync or (lambda: None)
    for _ in range(warmup):
        fn()
        sync()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return times


def best_seconds(fn, reps, sync=None):
    return min(call_times(fn, reps, sync))
