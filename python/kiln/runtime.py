"""The eager runtime: pipeline mode, sync points and the caching allocator (see kiln/runtime.h).

    kiln.runtime.set_pipeline("2stage")  # asynchronous: one worker thread runs the ops
    y = kiln.mint.exp(x)                 # returns before exp has run
    kiln.runtime.synchronize()           # waits for all ops; raises the first unraised failure
    kiln.runtime.memory_stats()          # {"allocated": ..., "cached": ..., "peak": ..., ...}
    kiln.set_num_threads(1)              # kernels' intra-op threads (kiln.runtime's, re-exported)

The initial mode comes from the environment: KILN_PIPELINE=sync|2stage|4stage, or
KILN_LAUNCH_BLOCKING=1 for sync. Without either it is "sync", every op running at its call:
measured the fastest on a two-core machine (docs/architecture.md, "Eager pipeline").
"""

import atexit as _atexit
import os as _os

from ._C.runtime import (drain, empty_cache, get_num_threads, get_pipeline,  # noqa: F401
                         memory_stats, reset_peak_memory_stats, set_num_threads, set_pipeline,
                         synchronize)

__all__ = ["set_pipeline", "get_pipeline", "synchronize", "drain", "memory_stats",
           "empty_cache", "reset_peak_memory_stats", "set_num_threads", "get_num_threads"]

# Queued ops finish before the interpreter goes away (a worker may still need it, to release a
# NumPy array a tensor viewed), and before fork(), so the child starts with nothing in flight.
_atexit.register(drain)
_os.register_at_fork(before=drain)
