"""kiln.mint: the built-in ops (``kiln.mint.add``, ``kiln.mint.matmul``, ...).

Each function maps to one PascalCase primitive in the op registry (``kiln.mint.add`` -> ``Add``)
and runs through eager dispatch; see ``kiln.ops.list_ops()`` for every primitive. A few
functions are composed of those ops in Python, so autograd and kiln.jit go through them as
through any op: ``norm`` and ``vector_norm`` (kiln/mint/_norms.py); ``leaky_relu``, ``elu``,
``softplus``, ``hardtanh``, ``l1_loss``, ``smooth_l1_loss``, ``huber_loss``,
``binary_cross_entropy`` and ``binary_cross_entropy_with_logits`` (kiln/mint/_composite.py).
"""

from .._C.mint import *  # noqa: F401,F403
from ._composite import (binary_cross_entropy, binary_cross_entropy_with_logits,  # noqa: F401
                         elu, hardtanh, huber_loss, l1_loss, leaky_relu, smooth_l1_loss,
                         softplus)
from ._norms import norm, vector_norm  # noqa: F401
