"""kiln.nn.utils.spectral_norm / remove_spectral_norm: PyTorch's older spectral normalization, by
a forward pre-hook (kiln.nn.utils.parametrizations.spectral_norm is the newer form).

    disc = kiln.nn.utils.spectral_norm(kiln.nn.Conv2d(64, 128, 4))
    disc.weight_orig, disc.weight_u, disc.weight_v   # the Parameter; the iteration's buffers

``spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None)`` renames the
parameter ``name`` to ``name_orig`` (the same Parameter) and registers the power iteration's
vectors as buffers ``name_u`` and ``name_v`` (normalized normal samples), so state dicts have
PyTorch's keys. Before every call of the cell a forward pre-hook sets the plain attribute
``name`` to ``name_orig / sigma``, sigma being ``u . (W v)`` with W the weight as a matrix
(``dim`` first: 1 for a ConvTranspose, else 0); in training mode it first runs
``n_power_iterations`` steps (v from u, then u from v, PyTorch's order) under no_grad, updating
the buffers in place. Until the first call ``name`` is the weight itself, as in PyTorch.
Registering it twice on one name is a KilnValueError; ``remove_spectral_norm(module,
name="weight")`` puts back a Parameter with the current normalized weight (no iteration) and
says when there is no such hook (KilnValueError).
"""

from ... import mint as _mint
from ...autograd import no_grad
from ...errors import KilnValueError
from ..functional import normalize
from ..parameter import Parameter
from ._weight_norm import named_hook
from .parametrizations import spectral_norm_args, weight_as_matrix

__all__ = ["remove_spectral_norm", "spectral_norm"]


class SpectralNorm:
    """The forward pre-hook of ``spectral_norm``: recomputes ``module.<name>``."""

    def __init__(self, name, n_power_iterations, dim, eps):
        self.name = name
        self.n_power_iterations = n_power_iterations
        self.dim = dim
        self.eps = eps

    def compute_weight(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        matrix = weight_as_matrix(weight, self.dim)
        if do_power_iteration:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    normalize(_mint.matmul(matrix.mT, u), dim=0, eps=self.eps, out=v)
                    normalize(_mint.matmul(matrix, v), dim=0, eps=self.eps, out=u)
            # Copies: backward must see this call's u and v, not a later call's update.
            u, v = u.clone(), v.clone()
        return weight / _mint.dot(u, _mint.matmul(matrix, v))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module, module.training))


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Normalizes ``module.<name>`` by its spectral norm before every call (see the module's
    documentation); returns ``module``."""
    weight, dim = spectral_norm_args("spectral_norm", module, name, n_power_iterations, eps, dim)
    if named_hook(module, SpectralNorm, name) is not None:
        raise KilnValueError(f"spectral_norm: {type(module).__name__}.{name} has spectral_norm "
                             f"already")
    if name not in module._params:
        raise KilnValueError(f"spectral_norm: {type(module).__name__}.{name} is not a parameter")
    hook = SpectralNorm(name, n_power_iterations, dim, float(eps))
    with no_grad():
        rows, cols = weight_as_matrix(weight, dim).shape
        u = normalize(_mint.randn(rows, dtype=weight.dtype), dim=0, eps=hook.eps)
        v = normalize(_mint.randn(cols, dtype=weight.dtype), dim=0, eps=hook.eps)
    del module._params[name]
    module.register_parameter(name + "_orig", weight)
    module.__dict__[name] = weight.detach()
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    module.register_forward_pre_hook(hook)
    return module


def remove_spectral_norm(module, name="weight"):
    """Undoes ``spectral_norm``: ``module.<name>`` becomes a Parameter again, holding the
    normalized weight; returns ``module``."""
    found = named_hook(module, SpectralNorm, name)
    if found is None:
        raise KilnValueError(f"remove_spectral_norm: {type(module).__name__} has no "
                             f"spectral_norm of {name!r}")
    key, hook = found
    with no_grad():
        weight = hook.compute_weight(module, do_power_iteration=False)
    requires_grad = module._params[name + "_orig"].requires_grad
    del module._forward_pre_hooks[key]
    module.__dict__.pop(name, None)
    for suffix in ("_orig", "_u", "_v"):
        delattr(module, name + suffix)
    module.register_parameter(name, Parameter(weight, requires_grad))
    return module
