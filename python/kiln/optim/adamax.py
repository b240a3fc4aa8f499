"""kiln.optim.Adamax (Kingma & Ba, section 7: Adam with the infinity norm), as PyTorch's.

    opt = kiln.optim.Adamax(params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0)

Per step t = 1, 2, ... (g is the gradient, p the parameter):

    g = -g  if maximize
    g = g + weight_decay * p
    m = beta1 * m + (1 - beta1) * g
    u = max(beta2 * u, |g| + eps)
    p = p - lr / (1 - beta1**t) * m / u

As in PyTorch, eps is added to |g| inside the maximum, not to the denominator. The correction
1 - beta1**t is computed in float64, as Adam's.

State: ``opt.state[i]`` holds ``step`` (a 0-d count, as Adam's), ``exp_avg`` (m) and ``exp_inf``
(u).
"""

from .. import _C
from .adam import AdamBase
from .optimizer import count_step, decayed_gradient, momentum_tensor, running_average_

__all__ = ["Adamax"]


class Adamax(AdamBase):
    """Adamax(params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, *, maximize=False)

    - ``params``: parameters, or parameter groups (dicts; see ``kiln.optim.Optimizer``).
    - ``lr``: the learning rate (>= 0).
    - ``betas``: the decay rates of the running average m and of the infinity norm u (each in
      [0, 1)).
    - ``eps``: added to |g| in the infinity norm (>= 0).
    - ``weight_decay``: the L2 penalty added to the gradient (>= 0).
    - ``maximize``: maximizes the objective (steps along the gradient instead of against it).
    """

    _second_moment = "exp_inf"

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, *,
                 maximize=False, **implementation):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize), **implementation)

    def _update(self, param, grad, state, group, lr):
        mint = _C.mint
        beta1, beta2 = momentum_tensor(group), group["betas"][1]
        steps = count_step(state)
        grad = decayed_gradient(param, grad, group, lr)
        m, u = state["exp_avg"], state["exp_inf"]
        running_average_(m, grad, beta1)
        mint.mul(u, beta2, out=u)
        mint.maximum(u, mint.abs(grad) + group["eps"], out=u)
        correction = (1 - mint.pow(beta1, steps)).to(lr.dtype)
        param -= (lr / correction) * m / u
