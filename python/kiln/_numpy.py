"""NumPy, imported on first use.

``from ._numpy import np`` gives an object that imports NumPy when an attribute is first read, so
``import kiln`` does not pay for NumPy's import (about 85% of it, measured in bench/RESULTS.md)
unless the program prints, indexes with arrays or converts tensors.
"""

import importlib
import sys


class _LazyModule:
    __slots__ = ("_name",)

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        module = sys.modules.get(self._name) or importlib.import_module(self._name)
        return getattr(module, attr)

    def __repr__(self):
        return f"<lazily imported module {self._name!r}>"


np = _LazyModule("numpy")
