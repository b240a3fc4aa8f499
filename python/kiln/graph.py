"""kiln.graph: the graph side of Kiln that users extend -- backends (and, later, passes).

    kiln.graph.register_custom_backend("my_custom_backend", "build/libmy_backend.so")
    kiln.graph.list_backends()     # ['kiln_cpu', 'my_custom_backend', 'reference']

    @kiln.jit(backend="my_custom_backend")
    def net(x):
        return kiln.mint.sin(x)

A backend plugin is a shared library built against ``kiln/backend.h`` (see
examples/custom_backend). ``register_custom_backend`` loads it and registers the backend it
defines under ``name``; a missing file, a file that is not a shared library, a library that
registers no backend or another name, a name already registered and a library built for another
Kiln ABI version each raise a KilnError that says which.
"""

import os as _os

from ._C.graph import list_backends  # noqa: F401
from ._C.graph import register_custom_backend as _register_custom_backend

__all__ = ["register_custom_backend", "list_backends"]


def register_custom_backend(name, path):
    """Loads the backend plugin at ``path`` (str or path-like) and registers its backend
    ``name``."""
    _register_custom_backend(name, _os.fspath(path))
