"""kiln.nn.utils.skip_init(module_cls, *args, **kwargs): a cell built without initialising its
parameters (PyTorch's torch.nn.utils.skip_init), for when another initialisation follows or the
default one is slow.

    fc = kiln.nn.utils.skip_init(kiln.nn.Linear, 4096, 4096)   # nothing drawn
    kiln.nn.init.orthogonal_(fc.weight)

PyTorch builds the module on its "meta" device (tensors without memory), then gives it empty
memory (``to_empty``), so it needs a class that takes ``device``. Kiln has no meta device.
Instead, while ``module_cls(*args, **kwargs)`` runs, the in-place initialisers of kiln.nn.init
(``uniform_``, ``normal_``, ``kaiming_uniform_``, ``zeros_``, ``ones_``, ...), which every Kiln
cell's ``reset_parameters`` calls, return their tensor untouched on the calling thread. So the
parameters keep the values they were allocated with (``kiln.mint.empty``, as PyTorch's are "as if
created with torch.empty"), nothing is drawn from the random generator, and the sub-cells the
constructor builds are skipped as well. What a cell fills otherwise still runs (BatchNorm's
running statistics are reset by assignment, where PyTorch leaves them empty too), so any Cell
class works; a ``device`` keyword must be the CPU and is passed on when the class takes one.

The initialisers are swapped in kiln.nn.init for wrappers while any skip_init call constructs,
and the wrappers call the originals on the other threads, so a cell built meanwhile on another
thread is initialised. Code that imported an initialiser by name (``from kiln.nn.init import
uniform_``) calls it unskipped.

A ``module_cls`` that is no Cell subclass is a KilnTypeError (PyTorch's RuntimeError "Expected a
Module").
"""

import contextlib
import functools
import inspect
import threading

from ..._device import check_usable
from ...errors import KilnTypeError
from .. import init
from ..cell import Cell

__all__ = ["skip_init"]

# The in-place initialisers (their names end in "_", as PyTorch's).
_INITIALISERS = tuple(name for name in init.__all__ if name.endswith("_"))

_skipping = threading.local()  # depth: the skip_init calls constructing on this thread
_lock = threading.Lock()  # guards _constructing and the swap of the initialisers
_constructing = 0  # skip_init calls constructing, on every thread
_originals = {}  # name -> kiln.nn.init's function, while the wrappers stand in its place


def _gated(function):
    """``function`` (an initialiser), returning its tensor untouched on a thread that skips."""

    @functools.wraps(function)
    def gated(tensor, *args, **kwargs):
        if getattr(_skipping, "depth", 0):
            return tensor
        return function(tensor, *args, **kwargs)

    return gated


@contextlib.contextmanager
def _initialisers_skipped():
    """Skips kiln.nn.init's initialisers on this thread (see the module's documentation)."""
    global _constructing
    with _lock:
        if _constructing == 0:
            for name in _INITIALISERS:
                _originals[name] = getattr(init, name)
                setattr(init, name, _gated(_originals[name]))
        _constructing += 1
    _skipping.depth = getattr(_skipping, "depth", 0) + 1
    try:
        yield
    finally:
        _skipping.depth -= 1
        with _lock:
            _constructing -= 1
            if _constructing == 0:
                for name, function in _originals.items():
                    setattr(init, name, function)
                _originals.clear()


def skip_init(module_cls, *args, **kwargs):
    """``module_cls(*args, **kwargs)`` without the initialisation of its parameters (see
    kiln.nn.utils._init_skip's documentation)."""
    if not (isinstance(module_cls, type) and issubclass(module_cls, Cell)):
        raise KilnTypeError(f"skip_init: expected a kiln.nn.Cell subclass, got {module_cls!r}")
    device = kwargs.pop("device", None)
    if device is not None:
        check_usable("skip_init", device)
        if "device" in inspect.signature(module_cls).parameters:
            kwargs["device"] = device
    with _initialisers_skipped():
        return module_cls(*args, **kwargs)
