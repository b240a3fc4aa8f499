"""kiln.mint: the built-in ops (``kiln.mint.add``, ``kiln.mint.matmul``, ...).

Each function maps to one PascalCase primitive in the op registry (``kiln.mint.add`` -> ``Add``)
and runs through eager dispatch; see ``kiln.ops.list_ops()`` for every primitive. A few
functions are composed of those ops in Python (``norm`` and ``vector_norm``,
kiln/mint/_norms.py), so autograd and kiln.jit go through them as through any op.
"""

from .._C.mint import *  # noqa: F401,F403
from ._norms import norm, vector_norm  # noqa: F401  (composed of the ops above, in Python)
