"""kiln.optim.Adam and kiln.optim.AdamW (Kingma & Ba; Loshchilov & Hutter), as PyTorch's.

    opt = kiln.optim.Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0)
    opt = kiln.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)

Per step t = 1, 2, ... (g is the gradient, p the parameter):

    Adam:   g = g + weight_decay * p                 (L2 penalty in the gradient)
    AdamW:  p = p * (1 - lr * weight_decay)          (decoupled decay)
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

State: ``opt.state[i]`` holds ``step`` (a 0-d tensor, float64 for float64 parameters and float32
otherwise, so that 16-bit parameters still count steps exactly), ``exp_avg`` (m) and
``exp_avg_sq`` (v).
"""

from .. import _C
from ..errors import KilnValueError
from .optimizer import Optimizer

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay))

    def _check_hyperparameters(self, group):
        super()._check_hyperparameters(group)
        name = type(self).__name__
        beta1, beta2 = group["betas"]
        if not (0.0 <= beta1 < 1.0 and 0.0 <= beta2 < 1.0):
            raise KilnValueError(f"{name}: betas must be in [0, 1), got {group['betas']}")
        if not group["eps"] >= 0.0:
            raise KilnValueError(f"{name}: invalid eps {group['eps']}")
        if not group["weight_decay"] >= 0.0:
            raise KilnValueError(f"{name}: invalid weight_decay {group['weight_decay']}")

    def _init_state(self, param, group):
        count = _C.dtype.float64 if param.dtype == _C.dtype.float64 else _C.dtype.float32
        return {"step": _C.mint.zeros((), dtype=count),
                "exp_avg": _C.mint.zeros_like(param),
                "exp_avg_sq": _C.mint.zeros_like(param)}

    def _update(self, param, grad, state, group, lr):
        mint = _C.mint
        beta1, beta2 = group["betas"]
        decay = group["weight_decay"]
        step, m, v = state["step"], state["exp_avg"], state["exp_avg_sq"]
        step += 1
        if decay != 0.0:
            if self._decoupled:
                mint.mul(param, 1 - lr * decay, out=param)
            else:
                grad = grad + decay * param
        mint.mul(m, beta1, out=m)
        m += (1 - beta1) * grad
        mint.mul(v, beta2, out=v)
        v += (1 - beta2) * grad * grad
        correction1 = (1 - mint.pow(beta1, step)).to(param.dtype)
        correction2 = mint.sqrt(1 - mint.pow(beta2, step)).to(param.dtype)
        denom = mint.sqrt(v) / correction2 + group["eps"]
        param -= (lr / correction1) * m / denom


class AdamW(Adam):
    """Adam with decoupled weight decay (default 1e-2, as in PyTorch)."""

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
