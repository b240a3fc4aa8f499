"""kiln.optim.Adadelta (Zeiler 2012: an adaptive rate from running averages), as PyTorch's.

    opt = kiln.optim.Adadelta(params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0)

Per step (g is the gradient, p the parameter):

    g = -g  if maximize
    g = g + weight_decay * p
    s = rho * s + (1 - rho) * g * g
    delta = sqrt(u + eps) / sqrt(s + eps) * g
    u = rho * u + (1 - rho) * delta * delta
    p = p - lr * delta

State: ``opt.state[i]`` holds ``step`` (a 0-d count, as Adam's; the update does not read it),
``square_avg`` (s) and ``acc_delta`` (u), PyTorch's names.
"""

from .. import _C
from ..errors import KilnValueError
from .optimizer import Optimizer, count_step, decayed_gradient, running_average_, scalar_state

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """Adadelta(params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
    capturable=False, maximize=False, differentiable=False)

    - ``params``: parameters, or parameter groups (dicts; see ``kiln.optim.Optimizer``).
    - ``lr``: the learning rate, a factor on the computed update (>= 0).
    - ``rho``: the decay rate of the running averages (in [0, 1]).
    - ``eps``: added inside both square roots (>= 0).
    - ``weight_decay``: the L2 penalty added to the gradient (>= 0).
    - ``maximize``: maximizes the objective (steps along the gradient instead of against it).
    - ``foreach``, ``capturable``, ``differentiable``: PyTorch's choices of implementation (see
      kiln.optim.optimizer); ``foreach`` may be given by position, as in PyTorch.
    """

    _numeric = {**Optimizer._numeric, "rho": 0.0, "eps": 0.0, "weight_decay": 0.0}

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 maximize=False, **implementation):
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize), foreach=foreach, **implementation)

    @classmethod
    def _check_setting(cls, name, value):
        super()._check_setting(name, value)
        if name == "rho" and not value <= 1.0:
            raise KilnValueError(f"{cls.__name__}: invalid rho {value}, expected rho <= 1")

    def _init_state(self, param, group):
        return {"step": scalar_state(param), "square_avg": _C.mint.zeros_like(param),
                "acc_delta": _C.mint.zeros_like(param)}

    def _update(self, param, grad, state, group, lr):
        mint = _C.mint
        rho, eps = group["rho"], group["eps"]
        count_step(state)
        grad = decayed_gradient(param, grad, group, lr)
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        running_average_(square_avg, grad * grad, rho)
        delta = mint.sqrt(acc_delta + eps) / mint.sqrt(square_avg + eps) * grad
        running_average_(acc_delta, delta * delta, rho)
        param -= lr * delta
