"""kiln.mint: the built-in ops (``kiln.mint.add``, ``kiln.mint.matmul``, ...).

Each function maps to one PascalCase primitive in the op registry (``kiln.mint.add`` -> ``Add``)
and runs through eager dispatch; see ``kiln.ops.list_ops()`` for every primitive.
"""

from .._C.mint import *  # noqa: F401,F403
