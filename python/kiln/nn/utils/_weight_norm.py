"""kiln.nn.utils.weight_norm / remove_weight_norm: PyTorch's older weight normalization, by a
forward pre-hook (kiln.nn.utils.parametrizations.weight_norm is the newer form).

    conv = kiln.nn.utils.weight_norm(kiln.nn.Conv1d(80, 256, 7))
    conv.weight_g, conv.weight_v      # Parameters: g, the norm over every dim but 0; v
    conv = kiln.nn.utils.remove_weight_norm(conv)   # a plain `weight` Parameter again

``weight_norm(module, name="weight", dim=0)`` replaces the parameter ``name`` by ``name_g``
(its 2-norm over every dim but ``dim``, kept as size-1 dims; over all of it for ``dim=None`` or
-1, as PyTorch's) and ``name_v`` (its values), registered in that order at the end of the cell's
parameters, so state dicts have PyTorch's keys. Before every call of the cell a forward pre-hook
sets the plain attribute ``name`` to ``v * g / ||v||`` (differentiable with respect to both),
which the cell's construct reads. Under ``kiln.jit`` the hook runs in the trace: the attribute
then holds a traced value until the next eager call. Registering it twice on one name is a
KilnValueError, as PyTorch's RuntimeError; ``remove_weight_norm(module, name="weight")`` puts
back a Parameter with the current weight's values, and says when there is no such hook
(KilnValueError).
"""

from ...errors import KilnIndexError, KilnTypeError, KilnValueError
from ..cell import Cell
from ..parameter import Parameter
from .parametrizations import norm_except_dim

__all__ = ["remove_weight_norm", "weight_norm"]


class WeightNorm:
    """The forward pre-hook of ``weight_norm``: recomputes ``module.<name>`` from g and v."""

    def __init__(self, name, dim):
        self.name = name
        self.dim = dim

    def compute_weight(self, module):
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return v * (g / norm_except_dim(v, self.dim))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def named_hook(module, kind, name):
    """(key, hook): ``module``'s forward pre-hook of class ``kind`` for the tensor ``name``
    (weight_norm's, spectral_norm's), or None."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, kind) and hook.name == name:
            return key, hook
    return None


def weight_norm(module, name="weight", dim=0):
    """Splits ``module.<name>`` into ``<name>_g`` and ``<name>_v`` (see the module's
    documentation); returns ``module``."""
    if not isinstance(module, Cell):
        raise KilnTypeError(f"weight_norm: module must be a kiln.nn.Cell, got "
                            f"{type(module).__name__}")
    if named_hook(module, WeightNorm, name) is not None:
        raise KilnValueError(f"weight_norm: {type(module).__name__}.{name} has weight_norm "
                             f"already")
    weight = module._params.get(name)
    if weight is None:
        raise KilnValueError(f"weight_norm: {type(module).__name__} has no parameter {name!r}")
    if dim is None:
        dim = -1
    elif not -weight.ndim <= dim < max(weight.ndim, 1):
        raise KilnIndexError(f"weight_norm: dim {dim} is out of range for a {weight.ndim}-d "
                             f"weight")
    elif dim < -1:
        dim += weight.ndim
    hook = WeightNorm(name, dim)
    del module._params[name]
    module.register_parameter(name + "_g", Parameter(norm_except_dim(weight.detach(), dim),
                                                     weight.requires_grad))
    module.register_parameter(name + "_v", Parameter(weight.detach(), weight.requires_grad))
    hook(module, ())
    module.register_forward_pre_hook(hook)
    return module


def remove_weight_norm(module, name="weight"):
    """Undoes ``weight_norm``: ``module.<name>`` becomes a Parameter again, with the current
    weight's values; returns ``module``."""
    found = named_hook(module, WeightNorm, name)
    if found is None:
        raise KilnValueError(f"remove_weight_norm: {type(module).__name__} has no weight_norm "
                             f"of {name!r}")
    key, hook = found
    weight = hook.compute_weight(module).detach()
    requires_grad = module._params[name + "_v"].requires_grad
    del module._forward_pre_hooks[key]
    module.__dict__.pop(name, None)
    del module._params[name + "_g"]
    del module._params[name + "_v"]
    module.register_parameter(name, Parameter(weight, requires_grad))
    return module
