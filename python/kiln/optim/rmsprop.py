"""kiln.optim.RMSprop (Hinton's lecture notes; centered as in Graves 2013), as PyTorch's.

    opt = kiln.optim.RMSprop(params, lr=1e-2, alpha=0.99, eps=1e-8, momentum=0.9, centered=True)

Per step (g is the gradient, p the parameter):

    g = -g  if maximize
    g = g + weight_decay * p
    s = alpha * s + (1 - alpha) * g * g
    a = alpha * a + (1 - alpha) * g                  (centered only; a starts at zero)
    d = sqrt(s - a * a) + eps  if centered  else  sqrt(s) + eps
    buf = momentum * buf + g / d  and  p = p - lr * buf      (momentum > 0; buf starts at zero)
    p = p - lr * g / d                                       (momentum 0)

State: ``opt.state[i]`` holds ``step`` (a 0-d count, as Adam's; the update does not read it),
``square_avg`` (s), with momentum > 0 ``momentum_buffer`` (buf) and with centered ``grad_avg``
(a): those two are made when the parameter is added with that setting, or at the first step that
needs them when ``group["momentum"]`` / ``group["centered"]`` is set later (an eager step: a
``kiln.jit`` step cannot make them, a KilnValueError). The momentum is read as SGD's is (see
kiln.optim.SGD): a jitted step follows the momentum set between its calls, and whether it steps
with momentum at all is decided in Python (a jitted step traced with momentum takes a momentum
set to exactly 0 later as a factor of 0: buf = g / denom, the step PyTorch's takes).
"""

from .. import _C
from .optimizer import (Optimizer, count_step, decayed_gradient, momentum_tensor,
                        running_average_, scalar_state)

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """RMSprop(params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
    centered=False, *, maximize=False)

    - ``params``: parameters, or parameter groups (dicts; see ``kiln.optim.Optimizer``).
    - ``lr``: the learning rate (>= 0).
    - ``alpha``: the decay rate of the running average of squared gradients (>= 0, as in
      PyTorch, which does not bound it above either).
    - ``eps``: added to the denominator (>= 0).
    - ``weight_decay``: the L2 penalty added to the gradient (>= 0).
    - ``momentum``: the momentum factor (>= 0; 0: no buffer).
    - ``centered``: divides by an estimate of the gradient's variance (the running average of
      squares less the square of the running average) instead of its second moment.
    - ``maximize``: maximizes the objective (steps along the gradient instead of against it).
    """

    _lazy_state = frozenset({"momentum_buffer", "grad_avg"})
    _numeric = {**Optimizer._numeric, "alpha": 0.0, "eps": 0.0, "weight_decay": 0.0,
                "momentum": 0.0}
    _momentum_key = "momentum"

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                 centered=False, *, maximize=False, **implementation):
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, maximize=maximize),
                         **implementation)

    def _init_state(self, param, group):
        state = {"step": scalar_state(param), "square_avg": _C.mint.zeros_like(param)}
        if group["momentum"] > 0.0:
            state["momentum_buffer"] = self._lazy_zeros("momentum_buffer", param)
        if group["centered"]:
            state["grad_avg"] = self._lazy_zeros("grad_avg", param)
        return state

    def _update(self, param, grad, state, group, lr):
        mint = _C.mint
        alpha = group["alpha"]
        count_step(state)
        grad = decayed_gradient(param, grad, group, lr)
        square_avg = state["square_avg"]
        running_average_(square_avg, grad * grad, alpha)
        if group["centered"]:
            grad_avg = self._lazy_entry(state, "grad_avg", param, "centered=True")
            running_average_(grad_avg, grad, alpha)
            denom = mint.sqrt(square_avg - grad_avg * grad_avg) + group["eps"]
        else:
            denom = mint.sqrt(square_avg) + group["eps"]
        if group["momentum"] > 0.0:
            buf = self._lazy_entry(state, "momentum_buffer", param, "momentum > 0")
            mint.mul(buf, momentum_tensor(group).to(lr.dtype), out=buf)
            buf += grad / denom
            param -= lr * buf
        else:
            param -= lr * grad / denom
