"""kiln.optim.RAdam (Liu et al. 2019: Adam with a rectified adaptive rate), as PyTorch's.

    opt = kiln.optim.RAdam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0)

Per step t = 1, 2, ... (g is the gradient, p the parameter):

    g = -g  if maximize
    g = g + weight_decay * p                 (L2 penalty in the gradient)
    p = p * (1 - lr * weight_decay)          (instead, with decoupled_weight_decay: RAdamW)
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    rho_inf = 2 / (1 - beta2) - 1
    rho_t = rho_inf - 2 * t * beta2**t / (1 - beta2**t)
    r = sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
    p = p - lr / (1 - beta1**t) * m * r * sqrt(1 - beta2**t) / (sqrt(v) + eps)   if rho_t > 5
    p = p - lr / (1 - beta1**t) * m                                              otherwise

The factors from t are computed in float64, as PyTorch computes them in Python floats. PyTorch
picks the branch with a Python ``if`` on rho_t; here rho_t is a tensor computed from the ``step``
tensor, and both branches are computed and one selected with ``kiln.mint.where``, so that a
``kiln.jit`` step, traced once, switches to the rectified update at the step where rho_t passes
5 (the 6th with the default beta2).

State: ``opt.state[i]`` holds ``step`` (a 0-d count, as Adam's), ``exp_avg`` (m) and
``exp_avg_sq`` (v).
"""

from .. import _C
from .adam import AdamBase
from .optimizer import count_step, decayed_gradient, momentum_tensor

__all__ = ["RAdam"]


class RAdam(AdamBase):
    """RAdam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, *,
    decoupled_weight_decay=False, maximize=False)

    - ``params``: parameters, or parameter groups (dicts; see ``kiln.optim.Optimizer``).
    - ``lr``: the learning rate (>= 0).
    - ``betas``: the decay rates of the running averages m and v (each in [0, 1)).
    - ``eps``: added to the denominator (>= 0).
    - ``weight_decay``: the weight decay (>= 0): an L2 penalty added to the gradient, or with
      ``decoupled_weight_decay`` a shrinking of the parameter by ``1 - lr * weight_decay``.
    - ``decoupled_weight_decay``: decoupled weight decay, as AdamW's (RAdamW).
    - ``maximize``: maximizes the objective (steps along the gradient instead of against it).
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, *,
                 decoupled_weight_decay=False, maximize=False, **implementation):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize), **implementation)

    def _update(self, param, grad, state, group, lr):
        mint = _C.mint
        beta1, beta2 = momentum_tensor(group), group["betas"][1]
        steps = count_step(state)
        grad = decayed_gradient(param, grad, group, lr, group["decoupled_weight_decay"])
        m, v = self._average_moments(grad, state, group)
        correction1 = (1 - mint.pow(beta1, steps)).to(lr.dtype)
        power2 = mint.pow(beta2, steps)
        correction2 = 1 - power2
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * steps * power2 / correction2
        # Below rho_t = 4 the radicand is negative (and with rho_inf 2 or 4, for beta2 1/3 or
        # 0.6, its denominator is 0): the NaN stays in the branch that where does not take.
        rect = mint.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf
                         / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
        adaptive = (rect * mint.sqrt(correction2)).to(lr.dtype) / (mint.sqrt(v) + group["eps"])
        param -= (lr / correction1) * m * mint.where(rho_t > 5, adaptive, 1.0)
