"""NumPy, imported on first use.

``from ._numpy import np`` gives an object that imports NumPy when an attribute is first read, so
``import kiln`` does not pay for NumPy's import (about 85% of it, measured in bench/RESULTS.md)
unless the program prints, indexes with arrays or converts tensors.
"""

import importlib


class _LazyModule:
    __slots__ = ("_name", "_module")

    def __init__(self, name):
        self._name = name
        self._module = None

    def __getattr__(self, attr):
        # import_module, not sys.modules: while another thread imports NumPy, sys.modules holds
        # the partly initialized module (no __version__ yet), and import_module waits for it.
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)

    def __repr__(self):
        return f"<lazily imported module {self._name!r}>"


np = _LazyModule("numpy")
