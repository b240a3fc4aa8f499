"""kiln.optim.Adagrad (Duchi, Hazan & Singer), as PyTorch's.

    opt = kiln.optim.Adagrad(params, lr=1e-2, lr_decay=0, initial_accumulator_value=0.1)

Per step t = 1, 2, ... (g is the gradient, p the parameter):

    g = -g  if maximize
    g = g + weight_decay * p
    clr = lr / (1 + (t - 1) * lr_decay)
    s = s + g * g                                    (s starts at initial_accumulator_value)
    p = p - clr * g / (sqrt(s) + eps)

The decayed rate's factor is computed in float64, as PyTorch computes it in Python floats.

State: ``opt.state[i]`` holds ``step`` (a 0-d count, as Adam's) and ``sum`` (s), which starts
at the parameter's group's ``initial_accumulator_value`` (PyTorch's constructor fills every
group's from its own argument, leaving a value set in a group unused), also for a parameter with
no state in a loaded state dict, as when it was added.
"""

from .. import _C
from .optimizer import Optimizer, count_step, decayed_gradient, scalar_state

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """Adagrad(params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
    eps=1e-10, *, maximize=False)

    - ``params``: parameters, or parameter groups (dicts; see ``kiln.optim.Optimizer``).
    - ``lr``: the learning rate (>= 0).
    - ``lr_decay``: divides the rate of step t by ``1 + (t - 1) * lr_decay`` (>= 0).
    - ``weight_decay``: the L2 penalty added to the gradient (>= 0).
    - ``initial_accumulator_value``: the starting value of the sum of squared gradients (>= 0).
    - ``eps``: added to the denominator (>= 0).
    - ``maximize``: maximizes the objective (steps along the gradient instead of against it).
    """

    _numeric = {**Optimizer._numeric, "lr_decay": 0.0, "weight_decay": 0.0,
                "initial_accumulator_value": 0.0, "eps": 0.0}

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0,
                 initial_accumulator_value=0.0, eps=1e-10, *, maximize=False, **implementation):
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      eps=eps, maximize=maximize), **implementation)

    def _init_state(self, param, group):
        total = _C.mint.zeros_like(param)
        total[...] = group["initial_accumulator_value"]
        return {"step": scalar_state(param), "sum": total}

    def _complete_loaded_state(self, param, group, state, saved_keys):
        # No state in the checkpoint is fresh state, whose sum starts at the group's initial
        # value (the base class left zeros). A partial entry was refused, so saved_keys is
        # either empty or has "sum".
        if not saved_keys:
            state["sum"][...] = group["initial_accumulator_value"]

    def _update(self, param, grad, state, group, lr):
        mint = _C.mint
        steps = count_step(state)
        grad = decayed_gradient(param, grad, group, lr)
        decay = (1 / (1 + (steps - 1) * group["lr_decay"])).to(lr.dtype)
        total = state["sum"]
        total += grad * grad
        param -= (lr * decay) * grad / (mint.sqrt(total) + group["eps"])
