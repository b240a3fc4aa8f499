"""The eager runtime: pipeline mode, sync points and the caching allocator (see kiln/runtime.h).

    kiln.runtime.set_pipeline("2stage")  # asynchronous: one worker thread runs the ops
    y = kiln.mint.exp(x)                 # returns before exp has run
    kiln.runtime.synchronize()           # waits for all ops; raises the first unraised failure
    kiln.runtime.memory_stats()          # {"allocated": ..., "cached": ..., "peak": ..., ...}
    kiln.set_num_threads(1)              # kernels' intra-op threads (kiln.runtime's, re-exported)

The initial mode comes from the environment: KILN_PIPELINE=sync|2stage|4stage, or
KILN_LAUNCH_BLOCKING=1 for sync. Without either it is "sync", every op running at its call:
measured the fastest on a two-core machine (docs/architecture.md, "Eager pipeline").

In the asynchronous modes, memory a tensor shares with NumPy (``kiln.from_numpy(a)``,
``t.numpy()``, ``kiln.from_dlpack``) is read and written by the queued ops when they run: call
``synchronize()`` before changing such an array while ops on it may be queued, or before reading
an array that queued ops write. memory_stats() counts what the ops that have run allocated (it does
not wait: synchronize() first for the program's view); empty_cache() and
reset_peak_memory_stats() wait for the ops issued so far. At exit the queued ops finish, and a
failure no read raised is printed to stderr.
"""

import atexit as _atexit
import os as _os
import sys as _sys

from ._C.runtime import (drain, empty_cache, get_num_threads, get_pipeline,  # noqa: F401
                         memory_stats, reset_peak_memory_stats, set_num_threads, set_pipeline,
                         synchronize)

__all__ = ["set_pipeline", "get_pipeline", "synchronize", "drain", "memory_stats",
           "empty_cache", "reset_peak_memory_stats", "set_num_threads", "get_num_threads"]



def _at_exit():
    """Process exit is a sync point: queued ops finish before the interpreter goes away (a worker
    may still need it, to release a NumPy array a tensor viewed), and a failure that no read
    raised is reported on stderr rather than lost (the exit status can no longer change).

    Ops issued later in the shutdown (by ``__del__`` methods, atexit handlers registered before
    kiln was imported, daemon threads) run synchronously: queued, they would still be running on
    the pipeline's workers when the C++ libraries' static objects (oneDNN's caches) are destroyed
    after the interpreter."""
    try:
        synchronize()
    except Exception as error:  # noqa: BLE001 (any failure of an op, reported as it is)
        print(f"kiln: an op failed and no read raised its error before exit:\n"
              f"{type(error).__name__}: {error}", file=_sys.stderr)
    set_pipeline("sync")


_atexit.register(_at_exit)
# Before fork() too, so the child starts with nothing in flight (failures stay for the parent).
_os.register_at_fork(before=drain)
