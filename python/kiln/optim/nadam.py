"""kiln.optim.NAdam (Dozat 2016: Adam with Nesterov momentum), as PyTorch's.

    opt = kiln.optim.NAdam(params, lr=2e-3, betas=(0.9, 0.999), momentum_decay=4e-3)

Per step t = 1, 2, ... (g is the gradient, p the parameter):

    g = -g  if maximize
    g = g + weight_decay * p                 (L2 penalty in the gradient)
    p = p * (1 - lr * weight_decay)          (instead, with decoupled_weight_decay: NAdamW)
    mu_t = beta1 * (1 - 0.5 * 0.96**(t * momentum_decay))
    mu_next = beta1 * (1 - 0.5 * 0.96**((t + 1) * momentum_decay))
    mu_product = mu_product * mu_t                   (mu_product starts at 1)
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    d = sqrt(v / (1 - beta2**t)) + eps
    p = p - lr * (1 - mu_t) / (1 - mu_product) * g / d
          - lr * mu_next / (1 - mu_product * mu_next) * m / d

The factors from t are computed in float64, as PyTorch computes them in Python floats; the
running product is kept in the dtype of ``step`` (PyTorch's is a float32 tensor, or float64 under
a float64 default dtype), rounded there at each step as PyTorch's is.

State: ``opt.state[i]`` holds ``step`` (a 0-d count, as Adam's), ``mu_product`` (0-d, the dtype of
``step``), ``exp_avg`` (m) and ``exp_avg_sq`` (v). A parameter with no state in a loaded state
dict starts again with ``mu_product`` 1, as when it was added.
"""

from .. import _C
from .adam import AdamBase
from .optimizer import count_step, decayed_gradient, momentum_tensor, scalar_state

__all__ = ["NAdam"]


class NAdam(AdamBase):
    """NAdam(params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
    *, decoupled_weight_decay=False, maximize=False)

    - ``params``: parameters, or parameter groups (dicts; see ``kiln.optim.Optimizer``).
    - ``lr``: the learning rate (>= 0).
    - ``betas``: the decay rates of the running averages m and v (each in [0, 1)).
    - ``eps``: added to the denominator (>= 0).
    - ``weight_decay``: the weight decay (>= 0): an L2 penalty added to the gradient, or with
      ``decoupled_weight_decay`` a shrinking of the parameter by ``1 - lr * weight_decay``.
    - ``momentum_decay``: how fast the momentum factor mu_t rises to beta1 (>= 0).
    - ``decoupled_weight_decay``: decoupled weight decay, as AdamW's (NAdamW).
    - ``maximize``: maximizes the objective (steps along the gradient instead of against it).
    """

    _numeric = {**AdamBase._numeric, "momentum_decay": 0.0}

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 momentum_decay=4e-3, *, decoupled_weight_decay=False, maximize=False,
                 **implementation):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize), **implementation)

    def _init_state(self, param, group):
        return {**super()._init_state(param, group), "mu_product": scalar_state(param, 1.0)}

    def _complete_loaded_state(self, param, group, state, saved_keys):
        # No state in the checkpoint is fresh state, whose product starts at 1 (the base class
        # left 0, which would stay 0). A partial entry was refused.
        if not saved_keys:
            state["mu_product"][...] = 1

    def _update(self, param, grad, state, group, lr):
        mint = _C.mint
        beta1, beta2 = momentum_tensor(group), group["betas"][1]
        decay = group["momentum_decay"]
        steps = count_step(state)
        grad = decayed_gradient(param, grad, group, lr, group["decoupled_weight_decay"])
        mu = beta1 * (1 - 0.5 * mint.pow(0.96, steps * decay))
        mu_next = beta1 * (1 - 0.5 * mint.pow(0.96, (steps + 1) * decay))
        mu_product = state["mu_product"]
        mint.mul(mu_product, mu.to(mu_product.dtype), out=mu_product)
        product = mu_product.to(_C.dtype.float64)
        m, v = self._average_moments(grad, state, group)
        correction2 = (1 - mint.pow(beta2, steps)).to(lr.dtype)
        denom = mint.sqrt(v / correction2) + group["eps"]
        grad_factor = ((1 - mu) / (1 - product)).to(lr.dtype)
        avg_factor = (mu_next / (1 - product * mu_next)).to(lr.dtype)
        param -= lr * (grad_factor * grad + avg_factor * m) / denom
