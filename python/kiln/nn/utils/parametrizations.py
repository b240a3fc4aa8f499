"""kiln.nn.utils.parametrizations: weight_norm and spectral_norm as parametrizations (PyTorch's
torch.nn.utils.parametrizations), built on kiln.nn.utils.parametrize.

    conv = weight_norm(kiln.nn.Conv1d(80, 256, 7))        # weight = g * v / ||v||
    disc = spectral_norm(kiln.nn.Linear(128, 1))           # weight = W / sigma(W)

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
"""

from ... import _C
from ... import mint as _mint
from ...autograd import no_grad
from ...errors import KilnIndexError, KilnTypeError, KilnValueError
from ..cell import Cell
from ..conv import ConvTranspose2d
from ..functional import normalize
from . import parametrize

__all__ = ["spectral_norm", "weight_norm"]


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
