"""kiln.nn.utils.parametrizations: weight_norm, spectral_norm and orthogonal as parametrizations
(PyTorch's torch.nn.utils.parametrizations), built on kiln.nn.utils.parametrize.

    conv = weight_norm(kiln.nn.Conv1d(80, 256, 7))        # weight = g * v / ||v||
    disc = spectral_norm(kiln.nn.Linear(128, 1))           # weight = W / sigma(W)
    rnn = orthogonal(kiln.nn.Linear(64, 64))               # weight.mT @ weight == I

- ``weight_norm(module, name="weight", dim=0)``: ``original0`` is g, the norm of the weight over
  every dim but ``dim`` (kept as dims of size 1), ``original1`` is v, the direction, and the
  weight is ``v * g / ||v||``. ``dim=None`` (or -1, as in PyTorch) takes one norm over the whole
  tensor (g is 0-d). A state dict of PyTorch's older ``torch.nn.utils.weight_norm``, with
  ``weight_g`` and ``weight_v`` keys, loads into such a module (its names are moved to
  ``parametrizations.weight.original0`` / ``original1``), as PyTorch's does.
- ``spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None)``: the weight
  divided by its largest singular value sigma, estimated by power iteration on the weight as a
  matrix (``dim`` first, the other dims flattened; ``dim`` defaults to 1 for ConvTranspose, else
  0). The iteration's vectors are buffers of the parametrization (``parametrizations.weight.0._u``
  and ``_v``, in the state dict), started from normal samples and 15 iterations at registration;
  each read of the weight in training mode runs ``n_power_iterations`` more under no_grad,
  updating them in place (so a ``kiln.jit`` step does too); in eval mode they stay. sigma is
  ``u . (W v)``, differentiated through W, as PyTorch's. A 1-d weight is normalized instead.
- ``orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True)``: the
  weight [..., m, n] (a matrix or a batch of them) made orthogonal: orthonormal columns where
  m >= n, orthonormal rows where m < n (the map works on the tall transpose). From ``original``
  X, the maps are PyTorch's: "matrix_exp" and "cayley" take the skew-symmetric A = L - L^T of the
  lower triangle L of X (padded with zero columns to a square) to ``kiln.linalg.matrix_exp(A)``
  or the Cayley map (I - A/2)^-1 (I + A/2), and keep the first n columns; "householder" takes the
  product of the reflections by X's columns below the diagonal
  (``kiln.linalg.householder_product``, tau = 2 / (1 + |v|^2)) times the signs on X's diagonal,
  which are not trained (no gradient reaches them). The default is "matrix_exp" for a square
  weight, "householder" otherwise (Kiln has no complex dtype). With ``use_trivialization`` (the
  default) the result is further multiplied on the left by ``base``, an orthogonal n x n buffer
  (``parametrizations.weight.0.base`` in the state dict): registering or assigning a weight Q
  stores Q as ``base`` -- orthogonalized by QR (R's diagonal positive) unless Q is orthogonal to
  10 n eps, and completed with random columns where it is not square -- and sets ``original``
  to -I, which every map takes to I, so the weight is then Q's orthogonalization exactly. Without
  it, registration leaves ``original`` as it was for "matrix_exp" and "cayley" (the weight is
  their map of it) and assigning to the weight is a KilnNotImplementedError (no inverse of those
  maps, as in PyTorch); for "householder", registering or assigning Q stores LAPACK's geqrf of
  Q (the reflectors below the diagonal, R above it, unused) with R's diagonal replaced by its
  signs, as PyTorch's, so the weight is Q's orthogonalization. An orthogonal parametrization
  added to a chain (the tensor is already parametrized) is not given a right_inverse at
  registration, and its ``base`` stays None, which counts as the identity (PyTorch's fails
  there).
"""

from ... import _C, linalg
from ... import mint as _mint
from ..._type_info import finfo
from ...autograd import no_grad
from ...errors import (KilnIndexError, KilnNotImplementedError, KilnTypeError, KilnValueError,
                       ShapeError)
from ..cell import Cell
from ..conv import ConvTranspose2d
from ..functional import normalize
from . import parametrize

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


def norm_except_dim(v, dim):
    """The 2-norm of ``v`` over every dim but ``dim``, keeping them as size 1 (PyTorch's
    norm_except_dim); dim -1: over all of v, a 0-d tensor."""
    if dim == -1:
        return _mint.vector_norm(v)
    return _mint.vector_norm(v, 2, [d for d in range(v.ndim) if d != dim], True)


class _WeightNorm(Cell):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, weight_g, weight_v):
        return weight_v * (weight_g / norm_except_dim(weight_v, self.dim))

    def right_inverse(self, weight):
        return norm_except_dim(weight, self.dim), weight


def _checked_dim(owner, dim, ndim, allow_none):
    if dim is None and allow_none:
        return None
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise KilnTypeError(f"{owner}: dim must be an int{' or None' if allow_none else ''}, got "
                            f"{type(dim).__name__} {dim!r}")
    if not -ndim <= dim < max(ndim, 1):
        raise KilnIndexError(f"{owner}: dim {dim} is out of range for a {ndim}-d weight (expected "
                             f"{-ndim} to {max(ndim, 1) - 1})")
    return dim


def _weight(owner, module, name):
    if not isinstance(module, Cell):
        raise KilnTypeError(f"{owner}: module must be a kiln.nn.Cell, got "
                            f"{type(module).__name__}")
    if not isinstance(name, str):
        raise KilnTypeError(f"{owner}: name must be a str, got {type(name).__name__}")
    weight = getattr(module, name, None)
    if not isinstance(weight, _C.Tensor):
        raise KilnValueError(f"{owner}: {type(module).__name__} has no parameter or buffer named "
                             f"{name!r}")
    if not weight.dtype.is_floating_point:
        raise KilnTypeError(f"{owner}: {name!r} must be floating point, got {weight.dtype.name}")
    return weight


def weight_norm(module, name="weight", dim=0):
    """Reparametrizes ``module.<name>`` as ``g * v / ||v||`` (see the module's documentation);
    returns ``module``."""
    weight = _weight("weight_norm", module, name)
    dim = _checked_dim("weight_norm", dim, weight.ndim, allow_none=True)
    if dim is not None and dim < -1:
        dim += weight.ndim
    parametrize.register_parametrization(module, name, _WeightNorm(-1 if dim is None else dim),
                                         unsafe=True)

    def load_old_names(state_dict, prefix, *unused):
        g, v = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g in state_dict and v in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v)

    module._register_load_state_dict_pre_hook(load_old_names)
    return module


def weight_as_matrix(weight, dim):
    """``weight`` as spectral_norm sees it: a matrix of dim ``dim`` by the others, flattened (a
    column for a 1-d weight)."""
    if dim != 0:
        weight = weight.permute(dim, *(d for d in range(weight.ndim) if d != dim))
    return weight.reshape(weight.shape[0], -1)


class _SpectralNorm(Cell):
    def __init__(self, weight, n_power_iterations, dim, eps):
        super().__init__()
        self.dim = dim
        self.eps = eps
        self.n_power_iterations = n_power_iterations
        if weight.ndim > 1:
            matrix = weight_as_matrix(weight.detach(), self.dim)
            rows, cols = matrix.shape
            self.register_buffer("_u", normalize(_mint.randn(rows, dtype=weight.dtype), dim=0,
                                                 eps=eps))
            self.register_buffer("_v", normalize(_mint.randn(cols, dtype=weight.dtype), dim=0,
                                                 eps=eps))
            self._power_method(matrix, 15)

    def _power_method(self, matrix, iterations):
        # u and v are updated in place (their buffers are what a jitted step captured).
        with no_grad():
            for _ in range(iterations):
                normalize(_mint.matmul(matrix, self._v), dim=0, eps=self.eps, out=self._u)
                normalize(_mint.matmul(matrix.mT, self._u), dim=0, eps=self.eps, out=self._v)

    def forward(self, weight):
        if weight.ndim == 1:
            return normalize(weight, dim=0, eps=self.eps)
        matrix = weight_as_matrix(weight, self.dim)
        if self.training:
            self._power_method(matrix, self.n_power_iterations)
        # Copies: backward must see the u and v of this call, not a later call's update.
        u, v = self._u.clone(), self._v.clone()
        sigma = _mint.dot(u, _mint.matmul(matrix, v))
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Reparametrizes ``module.<name>`` as itself divided by its spectral norm (see the module's
    documentation); returns ``module``."""
    weight, dim = spectral_norm_args("spectral_norm", module, name, n_power_iterations, eps, dim)
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, float(eps)))
    return module


def spectral_norm_args(owner, module, name, n_power_iterations, eps, dim):
    """Checks the arguments of a spectral_norm; returns the weight and the dim (1 for a
    ConvTranspose, else 0, when None)."""
    weight = _weight(owner, module, name)
    if isinstance(n_power_iterations, bool) or not isinstance(n_power_iterations, int) \
            or n_power_iterations <= 0:
        raise KilnValueError(f"{owner}: n_power_iterations must be a positive int, got "
                             f"{n_power_iterations!r}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps > 0:
        raise KilnValueError(f"{owner}: eps must be a positive number, got {eps!r}")
    if dim is None:
        dim = 1 if isinstance(module, ConvTranspose2d) else 0
    dim = _checked_dim(owner, dim, weight.ndim, allow_none=False)
    return weight, dim % max(weight.ndim, 1)


_ORTHOGONAL_MAPS = ("matrix_exp", "cayley", "householder")


def _householder_qr(matrix):
    """LAPACK's geqrf of each tall ``matrix`` [..., m, n]: (packed, tau), with R on and above the
    diagonal of ``packed`` and the Householder vectors v_i below it (their leading 1 implied),
    ``matrix == H_1 ... H_n R`` for H_i = I - tau_i v_i v_i^T. As LAPACK's dlarfg, a column with
    nothing below its diagonal to eliminate gets tau 0 (no reflection), the others R_ii = -sign
    of the diagonal entry times the column's norm, so that tau is in [1, 2]."""
    m, n = matrix.shape[-2], matrix.shape[-1]
    rows = _mint.arange(m).unsqueeze(-1)
    work, vectors, taus = matrix, [], []
    for j in range(n):
        column = work[..., :, j:j + 1]
        below = _mint.where(rows > j, column, 0.0)
        alpha = column[..., j:j + 1, :]
        below_squared = _mint.sum(below * below, -2, keepdim=True)
        reflect = below_squared > 0
        norm = _mint.sqrt(alpha * alpha + below_squared)
        beta = _mint.where(alpha >= 0, -norm, norm)
        tau = _mint.where(reflect, (beta - alpha) / beta, 0.0)
        v = _mint.where(rows == j, 1.0, below / _mint.where(reflect, alpha - beta, 1.0))
        work = work - _mint.matmul(v * tau, _mint.matmul(v.mT, work))
        vectors.append(v)
        taus.append(tau)
    packed = _mint.triu(work) + _mint.tril(_mint.cat(vectors, -1), -1)
    return packed, _mint.cat(taus, -1).squeeze(-2)


def _is_orthogonal(q):
    """Whether the tall ``q`` [..., m, n] has orthonormal columns to 10 m eps (as PyTorch)."""
    m, n = q.shape[-2], q.shape[-1]
    eps = 10.0 * m * finfo(q.dtype).eps
    return _mint.allclose(_mint.matmul(q.mT, q), _mint.eye(n, dtype=q.dtype), atol=eps)


def _make_orthogonal(a):
    """Q of the QR factorization of the tall ``a`` with R's diagonal nonnegative."""
    q, r = linalg.qr(a)
    return q * _mint.sgn(r.diagonal(dim1=-2, dim2=-1)).unsqueeze(-2)


class _Orthogonal(Cell):
    """orthogonal's parametrization: ``orthogonal_map`` of the tall matrix (the transpose of a
    wide one), times the ``base`` buffer with ``use_trivialization``."""

    def __init__(self, weight, orthogonal_map, use_trivialization):
        super().__init__()
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        self.use_trivialization = use_trivialization
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, x):
        n, k = x.shape[-2], x.shape[-1]
        transposed = n < k
        if transposed:
            x = x.mT
            n, k = k, n
        if self.orthogonal_map == "householder":
            reflectors = _mint.tril(x, -1)
            tau = 2.0 / (1.0 + _mint.sum(reflectors * reflectors, -2))
            signs = _mint.trunc(x.diagonal(dim1=-2, dim2=-1).detach())
            q = linalg.householder_product(reflectors, tau) * signs.unsqueeze(-2)
        else:
            lower = _mint.tril(x)
            if n != k:
                padding = _mint.zeros(tuple(lower.shape[:-2]) + (n, n - k), dtype=lower.dtype)
                lower = _mint.cat([lower, padding], -1)
            skew = lower - lower.mT
            if self.orthogonal_map == "matrix_exp":
                q = linalg.matrix_exp(skew)
            else:
                identity = _mint.eye(n, dtype=skew.dtype)
                q = linalg.solve(identity - skew / 2, identity + skew / 2)
            q = q[..., :k]
        if self.use_trivialization and self.base is not None:
            q = _mint.matmul(self.base, q)
        return q.mT if transposed else q

    def right_inverse(self, q):
        if tuple(q.shape) != self.shape:
            raise ShapeError(f"orthogonal: expected a matrix or batch of matrices of shape "
                             f"{list(self.shape)}, got a tensor of shape {list(q.shape)}")
        with no_grad():
            return self._right_inverse(q)

    def _right_inverse(self, q_init):
        q = q_init
        n, k = q.shape[-2], q.shape[-1]
        transposed = n < k
        if transposed:
            q = q.mT
            n, k = k, n
        if not self.use_trivialization:
            if self.orthogonal_map != "householder":
                raise KilnNotImplementedError(
                    f"orthogonal: cannot assign to a weight parametrized by the "
                    f"{self.orthogonal_map} map with use_trivialization=False (the map has no "
                    f"inverse); register it with use_trivialization=True to assign")
            packed, tau = _householder_qr(q)
            # R's diagonal becomes its signs, flipped where no reflection was made (forward
            # reflects there); R above it stays, unused, as in PyTorch's original.
            signs = _mint.sign(packed.diagonal(dim1=-2, dim2=-1))
            signs = _mint.where(tau == 0, -signs, signs)
            on_diagonal = _mint.eye(n, k, dtype=q.dtype) != 0
            packed = _mint.where(on_diagonal, signs.unsqueeze(-2), packed)
            return packed.mT if transposed else packed
        if n == k:
            q = q.clone() if _is_orthogonal(q) else _make_orthogonal(q)
        else:
            completion = _mint.randn(tuple(q.shape[:-2]) + (n, n - k), dtype=q.dtype)
            q = _make_orthogonal(_mint.cat([q, completion], -1))
        self.base = q
        # Every map takes -I to I (the householder one through its diagonal signs).
        rows, cols = q_init.shape[-2], q_init.shape[-1]
        return _mint.zeros_like(q_init) - _mint.eye(rows, cols, dtype=q_init.dtype)


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """Reparametrizes ``module.<name>`` [..., m, n] as an orthogonal matrix (see the module's
    documentation); returns ``module``."""
    weight = _weight("orthogonal", module, name)
    if weight.ndim < 2:
        raise ShapeError(f"orthogonal: expected a matrix or batch of matrices, got a tensor of "
                         f"{weight.ndim} dimensions")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    if orthogonal_map not in _ORTHOGONAL_MAPS:
        raise KilnValueError(f'orthogonal: orthogonal_map has to be one of "matrix_exp", '
                             f'"cayley", "householder", got {orthogonal_map!r}')
    if not isinstance(use_trivialization, bool):
        raise KilnTypeError(f"orthogonal: use_trivialization must be a bool, got "
                            f"{type(use_trivialization).__name__} {use_trivialization!r}")
    parametrization = _Orthogonal(weight, orthogonal_map, use_trivialization)
    parametrize.register_parametrization(module, name, parametrization, unsafe=True)
    return module
