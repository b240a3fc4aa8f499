"""kiln.linalg: dense linear algebra with torch.linalg's names, signatures and results.

    x = kiln.linalg.solve(A, b)                       # A @ x == b
    L = kiln.linalg.cholesky(A)                       # L @ L.mT == A
    U, S, Vh = kiln.linalg.svd(A, full_matrices=False)
    sign, logabsdet = kiln.linalg.slogdet(A)

Matrices are the last two dims of a tensor; the dims before them are a batch, broadcast between
two operands (A and B of solve, lu_solve, solve_triangular, lstsq). Results with several parts
are named tuples with PyTorch's field names (``kiln.linalg.cholesky_ex(A).info``).

Functions. The factorizations, solves and decompositions wrap the C++ primitives of
``kiln._C.linalg`` (include/kiln/functional/linalg.h; python/kiln/linalg/_decompositions.py):
``cholesky`` / ``cholesky_ex`` (L, info); ``lu_factor`` / ``lu_factor_ex`` (LU, pivots[, info]),
``lu`` (P, L, U), ``lu_solve``; ``solve`` / ``solve_ex`` (result, info); ``solve_triangular``
(``upper`` keyword-only and required); ``inv`` / ``inv_ex`` (inverse, info); ``det``, ``slogdet``
(sign, logabsdet); ``qr`` (Q, R; mode "reduced", "complete", "r"); ``eigh`` (eigenvalues,
eigenvectors) and ``eigvalsh``; ``svd`` (U, S, Vh) and ``svdvals``. Composed of those and kiln.mint
ops (_spectral.py, _functions.py): ``vector_norm`` (kiln.mint's), ``matrix_norm`` (ord "fro",
"nuc", 1, -1, 2, -2, inf, -inf), ``norm`` (torch.linalg.norm's choice between the two), ``cond``,
``matrix_rank``, ``pinv`` and ``lstsq`` (solution, residuals, rank, singular_values) with
PyTorch's atol / rtol / rcond / tol rules, ``matrix_power``, ``matrix_exp``, ``multi_dot``,
``householder_product``, ``tensorinv``, ``tensorsolve``, ``cross``, ``vecdot``, ``diagonal``,
``vander`` and ``matmul`` (kiln.mint's). ``eig`` and ``eigvals`` raise KilnNotImplementedError:
the eigenvalues of a general matrix are complex and Kiln has no complex dtype (``eigh`` serves
symmetric matrices). Not provided: ``ldl_factor`` / ``ldl_solve``, ``out=`` arguments, and LU
without pivoting (``pivot=False``: a KilnNotImplementedError, as PyTorch's on the CPU). kiln.mint
has PyTorch's top-level spellings ``det``, ``logdet``, ``slogdet``, ``inverse``,
``cholesky_solve``, ``cholesky_inverse``, ``pinverse``, ``matrix_power`` and ``matrix_exp``, and
Tensor the methods ``det``, ``logdet``, ``slogdet``, ``inverse``, ``cholesky``, ``pinverse``,
``matrix_power`` and ``matrix_exp``.

Dtypes and accuracy. The functions take float32 and float64 (a DTypeError names the function for
others: integers, 16-bit floats), one dtype for all operands; results keep it. The primitives
compute in float64 whatever the input, and so does matrix_exp: float32 results are as accurate as
their rounding allows. ``matrix_norm`` of order "fro", 1, -1, inf and -inf, ``vector_norm``,
``cross``, ``multi_dot`` and ``matrix_power`` with n >= 0 take what the ops under them take.

Uniqueness. Eigenvalues are ascending, singular values descending. Eigenvectors and singular
vectors are unique only up to sign (and, for a repeated value, up to a rotation within its
subspace): Kiln makes each eigenvector's and each of Vh's rows' entry of largest magnitude
positive, so they move smoothly with A, but PyTorch's and NumPy's signs differ. Q and R of
``qr`` have LAPACK's signs (R's diagonal may be negative); ``lu`` pivots partially (the largest
magnitude of each column), as LAPACK. Compare decompositions through what
they determine (U @ diag(S) @ Vh, |U|, projectors), not entry by entry.

Gradients. Everything is differentiable with PyTorch's gradients, and traceable by kiln.jit
(forward and backward). The gradients of ``eigh`` and ``svd`` are not defined where eigenvalues
(singular values) repeat, unless the loss depends on the values only (``eigvalsh``, ``svdvals``,
and so ``matrix_norm`` of orders 2, -2, "nuc", ``cond``); those of ``qr`` only for m >= n in
"reduced" mode, square "complete" mode and m < n in either; ``det``'s needs A invertible.
``pinv`` (and ``lstsq``'s solution, pinv(A) @ B) has PyTorch's pinv gradient, that of matrices of
A's rank: defined for repeated singular values too. ``lstsq``'s residuals are differentiable
(PyTorch ignores their gradient). ``cholesky_solve`` and ``cholesky_inverse`` read only L's
triangle, so their gradient of L is zero outside it (PyTorch's treats L as a full matrix).
``matrix_exp`` differentiates its Pade approximant (exp's derivative to rounding). ``info``,
pivots, ranks and ``lu``'s P are integers or constants, without gradient.

Errors. Arguments of the wrong kind (a number where a tensor goes, a flag that is no bool) are a
KilnTypeError, wrong dtypes a DTypeError, wrong shapes (not matrices, not square, batch dims that
do not broadcast) a ShapeError and bad values a KilnValueError, each naming the function
(``linalg.solve: ...``). A factorization that fails on a matrix -- cholesky of one that is not
positive definite, solve, inv or lu_factor of a singular one -- is a KilnValueError, which is
also ``kiln.linalg.LinAlgError`` (the same class), naming the batch element. Kiln ops run
asynchronously: in the pipelined modes (``kiln.runtime.set_pipeline``) a primitive's errors,
its dtype and shape checks included, may surface only at the next point that waits for values
(``.numpy()``, ``.item()``, ``kiln.runtime.synchronize()``), and its results are then
unspecified; the checks made in Python (argument kinds, and the composed functions' dtypes and
shapes) raise at the call. To test a matrix without an error use the ``_ex`` forms, whose
``info`` is 0 where the matrix factored and k > 0 where not (LAPACK's convention);
``solve_triangular`` divides by a zero diagonal (inf / NaN), as PyTorch's.

``driver=``. ``svd`` / ``svdvals`` and ``lstsq`` accept PyTorch's ``driver`` names (cuSOLVER's
"gesvd", "gesvdj", "gesvda"; LAPACK's "gels", "gelsy", "gelsd", "gelss") and ignore the algorithm
they choose: Kiln has one CPU algorithm for each, with the same results up to rounding for
well-defined problems (lstsq always returns the minimum-norm solution, which "gels" does only for
full-rank matrices). ``lstsq`` fills its other fields as PyTorch does for the driver named
(rank for all but "gels", singular_values for "gelsd" / "gelss", residuals for m > n with
"gels", and with "gelsd" / "gelss" when every matrix has full rank: a read of the ranks, refused
while kiln.jit traces); an unknown name is a KilnValueError.

Autocast. Inside ``kiln.autocast`` every function here but ``matmul``, ``vecdot`` and
``vector_norm`` (kiln.mint's) takes 16-bit floating tensors in float32 and runs with autocast off
(PyTorch's float32 list has linalg's), so the products inside the composed ones (lstsq, pinv,
householder_product, ...) keep float32.

``matrix_exp`` and kiln.jit: the number of squarings depends on the matrices' norms, which a
traced function cannot read, so it traces 20 squarings applied where needed: matrices of 1-norm
above about 5.6e6 give NaN there (eagerly there is no limit).
"""

import functools

from .. import _C
# From kiln.mint, first: it imports this package's modules at its end, which import its own.
from ..mint import matmul  # (torch.linalg.matmul)
from ._decompositions import (CholeskyEx, Eigh, InvEx, LinAlgError, LUFactor,  # noqa: F401
                              LUFactorEx, PLU, QR, SVD, SignLogAbsDet, SolveEx, cholesky,
                              cholesky_ex, det, eig, eigh, eigvals, eigvalsh, inv, inv_ex, lu,
                              lu_factor, lu_factor_ex, lu_solve, qr, slogdet, solve, solve_ex,
                              solve_triangular, svd, svdvals)
from ._spectral import (Lstsq, cond, lstsq, matrix_norm, matrix_rank, norm,  # noqa: F401
                        pinv, vector_norm)
from ._functions import (cross, diagonal, householder_product, matrix_exp,  # noqa: F401
                         matrix_power, multi_dot, tensorinv, tensorsolve, vander, vecdot)

__all__ = ["LinAlgError", "CholeskyEx", "LUFactor", "LUFactorEx", "PLU", "SolveEx", "InvEx",
           "SignLogAbsDet", "QR", "Eigh", "SVD", "Lstsq", "cholesky", "cholesky_ex", "lu_factor",
           "lu_factor_ex", "lu", "lu_solve", "solve", "solve_ex", "solve_triangular", "inv",
           "inv_ex", "det", "slogdet", "qr", "eigh", "eigvalsh", "svd", "svdvals", "eig",
           "eigvals", "vector_norm", "matrix_norm", "norm", "cond", "matrix_rank", "pinv", "lstsq",
           "matrix_power", "matrix_exp", "multi_dot", "householder_product", "tensorinv",
           "tensorsolve", "cross", "vecdot", "diagonal", "vander", "matmul"]


def _float32_under_autocast(fn):
    """``fn`` in float32 inside kiln.autocast: its 16-bit floating tensor arguments converted to
    float32, autocast off while it runs (see the package documentation)."""
    narrow = (_C.dtype.bfloat16, _C.dtype.float16)

    def widened(value):
        return value.to(_C.dtype.float32) if isinstance(value, _C.Tensor) and \
            value.dtype in narrow else value

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        enabled, dtype = _C.autocast.state()
        if not enabled:
            return fn(*args, **kwargs)
        previous = _C.autocast.set_state(False, dtype)
        try:
            return fn(*(widened(a) for a in args), **{k: widened(v) for k, v in kwargs.items()})
        finally:
            _C.autocast.set_state(*previous)

    return wrapper


for _name in __all__:
    _value = globals()[_name]
    if _name not in ("matmul", "vecdot", "vector_norm") and not isinstance(_value, type):
        globals()[_name] = _float32_under_autocast(_value)
del _name, _value
