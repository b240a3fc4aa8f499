"""kiln.optim.Rprop (Riedmiller & Braun 1993: resilient backpropagation), as PyTorch's.

    opt = kiln.optim.Rprop(params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50))

Each element of a parameter has its own step size, which grows by etaplus while its gradient
keeps its sign and shrinks by etaminus when the sign flips; the parameter moves by the step size
against the gradient's sign, not by the gradient. Per step (g is the gradient, p the parameter,
g_prev the gradient the previous step kept):

    g = -g  if maximize
    f = etaplus  where g * g_prev > 0,  etaminus  where g * g_prev < 0,  1  elsewhere
    step_size = clamp(step_size * f, step_size_min, step_size_max)
    g = 0  where g * g_prev < 0                      (no move after a sign flip)
    p = p - sign(g) * step_size
    g_prev = g

``lr`` is the step sizes' starting value, read at a parameter's first step, as PyTorch makes its
state then: a rate a scheduler sets before that step (OneCycleLR's first) is the one used, also
in a jitted step; later rates change nothing, as in PyTorch.

State: ``opt.state[i]`` holds ``step`` (a 0-d count, as Adam's), ``prev`` (g_prev, zeros at
first) and ``step_size`` (the group's rate when the parameter was added, then the step sizes),
PyTorch's names. A parameter with no state in a loaded state dict starts again with its group's
rate, as when it was added.
"""

from .. import _C
from ..errors import KilnTypeError, KilnValueError
from .optimizer import Optimizer, check_number, count_step, scalar_state

__all__ = ["Rprop"]


class Rprop(Optimizer):
    """Rprop(params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False,
    foreach=None, maximize=False, differentiable=False)

    - ``params``: parameters, or parameter groups (dicts; see ``kiln.optim.Optimizer``).
    - ``lr``: the starting step size of every element (>= 0).
    - ``etas``: (etaminus, etaplus), the factors that shrink and grow a step size
      (0 < etaminus < 1 < etaplus).
    - ``step_sizes``: (step_size_min, step_size_max), the bounds of a step size (numbers, not
      checked further, as in PyTorch: a minimum above the maximum gives the maximum).
    - ``maximize``: maximizes the objective (steps along the gradient instead of against it).
    - ``capturable``, ``foreach``, ``differentiable``: PyTorch's choices of implementation (see
      kiln.optim.optimizer).
    """

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 maximize=False, **implementation):
        super().__init__(params, dict(lr=lr, etas=etas, step_sizes=step_sizes,
                                      maximize=maximize), **implementation)

    def _check_hyperparameters(self, group):
        super()._check_hyperparameters(group)
        for name in ("etas", "step_sizes"):
            self._check_setting(name, group[name])

    @classmethod
    def _check_setting(cls, name, value):
        if name not in ("etas", "step_sizes"):
            super()._check_setting(name, value)
            return
        expected = ("(etaminus, etaplus)" if name == "etas"
                    else "(step_size_min, step_size_max)")
        message = f"{cls.__name__}: {name} must be a pair of numbers {expected}, got {value!r}"
        if not isinstance(value, (tuple, list)):
            raise KilnTypeError(message)
        if len(value) != 2:
            raise KilnValueError(message)
        for i, number in enumerate(value):
            check_number(cls.__name__, f"{name}[{i}]", number)
        if name == "etas" and not 0.0 < value[0] < 1.0 < value[1]:
            raise KilnValueError(f"{cls.__name__}: invalid etas {value}, expected "
                                 f"0 < etaminus < 1 < etaplus")

    def _init_state(self, param, group):
        step_size = _C.mint.zeros_like(param)
        step_size[...] = group["lr"]
        return {"step": scalar_state(param), "prev": _C.mint.zeros_like(param),
                "step_size": step_size}

    def _complete_loaded_state(self, param, group, state, saved_keys):
        # No state in the checkpoint is fresh state, whose step sizes start at the group's rate
        # (the base class left zeros, which the first step replaces anyway; see _update).
        if not saved_keys:
            state["step_size"][...] = group["lr"]

    def _update(self, param, grad, state, group, lr):
        mint = _C.mint
        etaminus, etaplus = group["etas"]
        low, high = group["step_sizes"]
        step_size, prev = state["step_size"], state["prev"]
        # PyTorch makes the step sizes at the parameter's first step, from the rate of that
        # step; a tensor test, so that a jitted step does so too.
        mint.where(state["step"] == 0, lr.to(step_size.dtype), step_size, out=step_size)
        count_step(state)
        if group["maximize"]:
            grad = -grad
        sign = mint.sign(grad * prev)
        # The factors in the parameter's dtype, as PyTorch writes them into its sign tensor.
        factor = mint.where(sign > 0, etaplus, mint.where(sign < 0, etaminus, mint.ones_like(sign)))
        mint.mul(step_size, factor, out=step_size)
        mint.clamp(step_size, min=low, max=high, out=step_size)
        grad = mint.where(sign < 0, 0.0, grad)
        param -= mint.sign(grad) * step_size
        prev[...] = grad
