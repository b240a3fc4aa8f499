"""kiln.mint: the built-in ops (``kiln.mint.add``, ``kiln.mint.matmul``, ...).

Each function maps to one PascalCase primitive in the op registry (``kiln.mint.add`` -> ``Add``)
and runs through eager dispatch; see ``kiln.ops.list_ops()`` for every primitive. Other
functions are composed of those ops in Python, so autograd and kiln.jit go through them as
through any op: ``norm`` and ``vector_norm`` (kiln/mint/_norms.py); ``leaky_relu``, ``elu``,
``softplus``, ``hardtanh``, ``l1_loss``, ``smooth_l1_loss``, ``huber_loss``,
``binary_cross_entropy``, ``binary_cross_entropy_with_logits``, ``adaptive_avg_pool2d`` and
``adaptive_max_pool2d`` (kiln/mint/_composite.py), which also wraps the ops ``cross_entropy`` /
``nll_loss`` (adding PyTorch's class ``weight``), ``conv2d`` and ``conv3d`` (adding padding
"same" / "valid") and ``round`` (adding ``decimals``); ``rand_like``, ``randn_like``,
``randint_like``, ``normal`` and ``bernoulli(input, p)``, with the Tensor methods ``uniform_``,
``normal_``, ``bernoulli_`` and ``exponential_`` (kiln/mint/_random.py); ``einsum``, ``outer``,
``dot``, ``diag``, ``diagonal``, ``tile``, ``roll``, ``repeat_interleave``, ``movedim``,
``meshgrid`` and their Tensor methods (kiln/mint/_products.py); ``scatter_add``, ``index_add``,
``index_fill``, ``masked_select``, ``nonzero`` / ``argwhere`` / one-argument ``where``, ``unique``
(eager only where the result's size depends on values), ``isclose`` / ``allclose`` / ``equal``,
``full_like``, ``clamp_min`` / ``clamp_max`` / ``clip``, ``log10``, ``fix``, ``lerp``, ``cumprod``
and ``div`` with ``rounding_mode``, ``take_along_dim`` and ``empty_like``
(kiln/mint/_indexing_ops.py); ``mm``, ``mv``, ``addmm`` (the AddMM op with PyTorch's checks),
``baddbmm``, ``addmv``, ``kron``, ``cross`` and ``cdist`` (kiln/mint/_matrix_products.py);
``addcmul``, ``addcdiv``, ``nan_to_num``, ``logit``, ``frac`` and ``isnan`` / ``isinf`` /
``isfinite`` / ``isposinf`` / ``isneginf`` (kiln/mint/_pointwise.py); ``clone`` (with
``memory_format``: kiln.mint's ``contiguous_format`` and ``preserve_format``), ``flip`` / ``fliplr``
/ ``flipud``, ``unbind``, ``narrow``, ``atleast_1d`` / ``2d`` / ``3d``, ``hstack`` / ``vstack`` /
``dstack`` / ``column_stack``, ``tensor_split``, ``swapaxes`` / ``swapdims`` and ``unflatten``
(kiln/mint/_shape_ops.py); ``var_mean``, ``std_mean``, ``median``, ``count_nonzero``,
``logcumsumexp``, ``cummax`` / ``cummin`` and ``diff`` (kiln/mint/_reductions.py);
``scatter_reduce`` (kiln/mint/_scatter_reduce.py); ``searchsorted``, ``bucketize`` and ``bincount``
(eager only) (kiln/mint/_bucketing.py); ``broadcast_tensors``, ``block_diag``, ``combinations``,
``diag_embed``, ``rot90``, ``take``, ``unravel_index``, ``unique_consecutive``, ``vander``,
``hsplit`` / ``vsplit`` / ``dsplit``, ``index_copy``, ``masked_scatter``, the ``*_scatter``
functions, ``isin``, ``result_type`` / ``can_cast`` and PyTorch's aliases (``divide``, ``multiply``,
``greater``, ...) (kiln/mint/_shape_extra.py); ``aminmax``, ``kthvalue``, ``mode``, the ``nan*``
reductions, ``quantile``, ``histc`` / ``histogram``, ``cov`` / ``corrcoef`` and the trapezoid rules
(kiln/mint/_statistics.py); ``logaddexp``, ``xlogy``, ``hypot``, ``copysign``, ``fmax`` / ``fmin``,
``frexp`` / ``ldexp``, ``gcd`` / ``lcm``, ``sinc``, ``tensordot``, ``trace``, ``logspace`` and the
window functions (kiln/mint/_math_extra.py). Each of those modules also gives Tensor the methods
PyTorch has for its functions. PyTorch's top-level linear algebra comes from kiln.linalg: ``det``,
``slogdet``, ``inverse`` (linalg.inv), ``logdet``, ``cholesky_solve``, ``cholesky_inverse``,
``pinverse``, ``matrix_power`` and ``matrix_exp`` (kiln/linalg/_functions.py; their Tensor methods
are in kiln/_tensor_methods.py).
"""

from .._C.mint import *  # noqa: F401,F403
# After the bindings: div (adding rounding_mode) and where (adding its one-argument form) replace
# the ops' own, which they call.
from ._indexing_ops import (allclose, argwhere, clamp_max, clamp_min, clip, cumprod,  # noqa: F401
                            div, empty_like, equal, fix, full_like, index_add, index_fill,
                            isclose, lerp, log10, masked_select, nonzero, scatter_add,
                            take_along_dim, unique, where)
# After the bindings: cross_entropy, nll_loss, conv2d, conv3d and round replace the ops' own (which
# they call).
from ._composite import (adaptive_avg_pool2d, adaptive_max_pool2d,  # noqa: F401,A004
                         binary_cross_entropy, binary_cross_entropy_with_logits, conv2d,
                         conv3d, cross_entropy, elu, hardtanh, huber_loss, l1_loss, leaky_relu,
                         nll_loss, round, smooth_l1_loss, softplus)
from ._norms import norm, vector_norm  # noqa: F401
# After the bindings: bernoulli (adding PyTorch's bernoulli(input, p)) replaces the op's own.
from ._random import bernoulli, normal, rand_like, randint_like, randn_like  # noqa: F401
from ._products import (cartesian_prod, diag, diagonal, dot, einsum, ger, meshgrid,  # noqa: F401
                        movedim, moveaxis, outer, repeat_interleave, roll, tile, tril_indices,
                        triu_indices)
# After the bindings: addmm (adding PyTorch's checks) replaces the op's own, which it calls.
from ._matrix_products import addmm, addmv, baddbmm, cdist, cross, kron, mm, mv  # noqa: F401
from ._pointwise import (addcdiv, addcmul, frac, isfinite, isinf, isnan, isneginf,  # noqa: F401
                         isposinf, logit, nan_to_num)
from ._shape_ops import (atleast_1d, atleast_2d, atleast_3d, clone, column_stack,  # noqa: F401
                         contiguous_format, dstack, flip, fliplr, flipud, hstack, narrow,
                         preserve_format, swapaxes, swapdims, tensor_split, unbind, unflatten,
                         vstack)
from ._reductions import (count_nonzero, cummax, cummin, diff, logcumsumexp,  # noqa: F401
                          median, std_mean, var_mean)
from ._scatter_reduce import scatter_reduce  # noqa: F401
from ._bucketing import bincount, bucketize, searchsorted  # noqa: F401
from ._statistics import (HistBinEdges, MinMax, aminmax, corrcoef, cov,  # noqa: F401
                          cumulative_trapezoid, histc, histogram, kthvalue, mode, nanmean,
                          nanmedian, nanquantile, nansum, quantile, trapezoid, trapz)
from ._math_extra import (MantissaExponent, bartlett_window, blackman_window,  # noqa: F401
                          copysign, deg2rad, dist, float_power, fmax, fmin, frexp, gcd,
                          hamming_window, hann_window, heaviside, hypot, inner, kaiser_window, lcm,
                          ldexp, logaddexp, logaddexp2, logspace, positive, rad2deg, sgn, signbit,
                          sinc, tensordot, trace, vdot, xlogy)
from ._shape_extra import (absolute, block_diag, broadcast_tensors, broadcast_to,  # noqa: F401
                           can_cast, combinations, concat, concatenate, diag_embed, diagflat,
                           diagonal_scatter, divide, dsplit, greater, greater_equal, hsplit,
                           index_copy, is_floating_point, is_nonzero, is_same_size, is_signed,
                           isin, less, less_equal, masked_scatter, multiply, negative, negative_,
                           not_equal, numel, ravel, result_type, rot90, row_stack, scalar_tensor,
                           select, select_scatter, slice_scatter, subtract, t, take, true_divide,
                           unique_consecutive, unravel_index, vander, vsplit)
# Last, and from kiln.linalg's modules (which import kiln.mint's above), not from the package,
# which may be the one importing kiln.mint.
from ..linalg._functions import cholesky_inverse, cholesky_solve, logdet, pinverse  # noqa: F401
from ._linalg_spellings import det, inverse, matrix_exp, matrix_power, slogdet  # noqa: F401

# torch's dtype names, so that code renamed from ``torch.`` to ``kiln.mint.`` finds them
# (``kiln.float32`` is the same object).
from .._C import dtype as _dtype  # noqa: E402

bool = _dtype.bool  # noqa: A001
int8, uint8, int16, int32, int64 = (_dtype.int8, _dtype.uint8, _dtype.int16, _dtype.int32,
                                    _dtype.int64)
float16, bfloat16, float32, float64 = (_dtype.float16, _dtype.bfloat16, _dtype.float32,
                                       _dtype.float64)
half, float, double, long, int = float16, float32, float64, int64, int32  # noqa: A001
