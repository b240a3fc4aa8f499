"""kiln.mint: the built-in ops (``kiln.mint.add``, ``kiln.mint.matmul``, ...).

Each function maps to one PascalCase primitive in the op registry (``kiln.mint.add`` -> ``Add``)
and runs through eager dispatch; see ``kiln.ops.list_ops()`` for every primitive. A few
functions are composed of those ops in Python, so autograd and kiln.jit go through them as
through any op: ``norm`` and ``vector_norm`` (kiln/mint/_norms.py); ``leaky_relu``, ``elu``,
``softplus``, ``hardtanh``, ``l1_loss``, ``smooth_l1_loss``, ``huber_loss``,
``binary_cross_entropy``, ``binary_cross_entropy_with_logits``, ``adaptive_avg_pool2d`` and
``adaptive_max_pool2d`` (kiln/mint/_composite.py), which also wraps the ops ``cross_entropy`` /
``nll_loss`` (adding PyTorch's class ``weight``), ``conv2d`` (adding padding "same" / "valid")
and ``round`` (adding ``decimals``); ``rand_like``, ``randn_like``, ``randint_like``,
``normal`` and ``bernoulli(input, p)``, with the Tensor methods ``uniform_``, ``normal_``,
``bernoulli_`` and ``exponential_`` (kiln/mint/_random.py); ``einsum``, ``outer``, ``dot``,
``diag``, ``diagonal``, ``tile``, ``roll``, ``repeat_interleave``, ``movedim``, ``meshgrid`` and
their Tensor methods
(kiln/mint/_products.py); ``scatter_add``, ``index_add``, ``index_fill``, ``masked_select``,
``nonzero`` / ``argwhere`` / one-argument ``where``, ``unique`` (eager only where the result's
size depends on values), ``isclose`` / ``allclose`` / ``equal``, ``full_like``, ``clamp_min`` /
``clamp_max`` / ``clip``, ``log10``, ``fix``, ``lerp``, ``cumprod`` and ``div`` with
``rounding_mode`` (kiln/mint/_indexing_ops.py).
"""

from .._C.mint import *  # noqa: F401,F403
# After the bindings: div (adding rounding_mode) and where (adding its one-argument form) replace
# the ops' own, which they call.
from ._indexing_ops import (allclose, argwhere, clamp_max, clamp_min, clip, cumprod,  # noqa: F401
                            div, equal, fix, full_like, index_add, index_fill, isclose, lerp,
                            log10, masked_select, nonzero, scatter_add, unique, where)
# After the bindings: cross_entropy, nll_loss, conv2d and round replace the ops' own (which they
# call).
from ._composite import (adaptive_avg_pool2d, adaptive_max_pool2d,  # noqa: F401,A004
                         binary_cross_entropy, binary_cross_entropy_with_logits, conv2d,
                         cross_entropy, elu, hardtanh, huber_loss, l1_loss, leaky_relu, nll_loss,
                         round, smooth_l1_loss, softplus)
from ._norms import norm, vector_norm  # noqa: F401
# After the bindings: bernoulli (adding PyTorch's bernoulli(input, p)) replaces the op's own.
from ._random import bernoulli, normal, rand_like, randint_like, randn_like  # noqa: F401
from ._products import (cartesian_prod, diag, diagonal, dot, einsum, ger, meshgrid,  # noqa: F401
                        movedim, moveaxis, outer, repeat_interleave, roll, tile, tril_indices,
                        triu_indices)

# torch's dtype names, so that code renamed from ``torch.`` to ``kiln.mint.`` finds them
# (``kiln.float32`` is the same object).
from .._C import dtype as _dtype  # noqa: E402

bool = _dtype.bool  # noqa: A001
int8, uint8, int16, int32, int64 = (_dtype.int8, _dtype.uint8, _dtype.int16, _dtype.int32,
                                    _dtype.int64)
float16, bfloat16, float32, float64 = (_dtype.float16, _dtype.bfloat16, _dtype.float32,
                                       _dtype.float64)
half, float, double, long, int = float16, float32, float64, int64, int32  # noqa: A001
