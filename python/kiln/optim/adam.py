"""kiln.optim.Adam and kiln.optim.AdamW (Kingma & Ba; Loshchilov & Hutter), as PyTorch's.

    opt = kiln.optim.Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0)
    opt = kiln.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)

Per step t = 1, 2, ... (g is the gradient, p the parameter):

    g = -g  if maximize
    Adam:   g = g + weight_decay * p                 (L2 penalty in the gradient)
    AdamW:  p = p * (1 - lr * weight_decay)          (decoupled decay)
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    v_max = max(v_max, v)  and  v = v_max            (amsgrad only; v_max starts at zero)
    p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

As in PyTorch, amsgrad keeps the running maximum of v itself, not of the bias-corrected v: the
correction divides sqrt(v_max) at each step. The corrections 1 - beta**t are computed in float64,
as PyTorch computes them in Python floats, whatever the parameter's dtype. beta1 is read from the
group's momentum tensor (see kiln.optim.optimizer), so a jitted step follows a beta1 set between
its calls (OneCycleLR's ``cycle_momentum``); as in PyTorch, the correction of step t is
1 - beta1**t with the beta1 of that step. The Adam family's other optimizers read beta1 so too.

State: ``opt.state[i]`` holds ``step`` (a 0-d tensor, float64 for float64 parameters or a float64
default dtype and float32 otherwise, so that 16-bit parameters still count steps exactly),
``exp_avg`` (m), ``exp_avg_sq`` (v) and, with amsgrad, ``max_exp_avg_sq`` (v_max): made when the
parameter is added with amsgrad, or at the first step that needs it when ``group["amsgrad"]`` is set
later (an eager step: a ``kiln.jit`` step cannot make it, a KilnValueError; the maximum then starts
there).
"""

from .. import _C
from ..errors import KilnTypeError, KilnValueError
from .optimizer import (Optimizer, check_number, count_step, decayed_gradient, momentum_tensor,
                        running_average_, scalar_state)

__all__ = ["Adam", "AdamW"]


class AdamBase(Optimizer):
    """The base of the optimizers that keep Adam's running averages of the gradient (Adam, AdamW,
    Adamax, NAdam, RAdam): checks ``betas`` (a pair, each in [0, 1)), ``eps`` and
    ``weight_decay`` (>= 0), and makes the state they share: ``step`` (see ``scalar_state``),
    ``exp_avg`` (m) and the second moment, ``exp_avg_sq`` (v; Adamax's ``exp_inf``, named by
    ``_second_moment``)."""

    _numeric = {**Optimizer._numeric, "eps": 0.0, "weight_decay": 0.0}
    _momentum_key = "betas"
    _second_moment = "exp_avg_sq"

    def _check_hyperparameters(self, group):
        super()._check_hyperparameters(group)
        self._check_setting("betas", group["betas"])

    @classmethod
    def _check_setting(cls, name, value):
        if name != "betas":
            super()._check_setting(name, value)
            return
        expected = f"{cls.__name__}: betas must be a pair of numbers (beta1, beta2), got {value!r}"
        if not isinstance(value, (tuple, list)):
            raise KilnTypeError(expected)
        if len(value) != 2:
            raise KilnValueError(expected)
        for i, beta in enumerate(value):
            check_number(cls.__name__, f"betas[{i}]", beta)
        if not (0.0 <= value[0] < 1.0 and 0.0 <= value[1] < 1.0):
            raise KilnValueError(f"{cls.__name__}: betas must be in [0, 1), got {value}")

    def _init_state(self, param, group):
        return {"step": scalar_state(param),
                "exp_avg": _C.mint.zeros_like(param),
                self._second_moment: _C.mint.zeros_like(param)}

    @staticmethod
    def _average_moments(grad, state, group):
        """Updates m and v (``exp_avg``, ``exp_avg_sq``) in place with ``grad``; returns them."""
        m, v = state["exp_avg"], state["exp_avg_sq"]
        running_average_(m, grad, momentum_tensor(group))
        running_average_(v, grad * grad, group["betas"][1])
        return m, v


class Adam(AdamBase):
    """Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
    maximize=False)

    - ``params``: parameters, or parameter groups (dicts; see ``kiln.optim.Optimizer``).
    - ``lr``: the learning rate (>= 0).
    - ``betas``: the decay rates of the running averages m and v (each in [0, 1)).
    - ``eps``: added to the denominator (>= 0).
    - ``weight_decay``: the L2 penalty added to the gradient (>= 0).
    - ``amsgrad``: divides by the running maximum of v instead of v (AMSGrad).
    - ``maximize``: maximizes the objective (steps along the gradient instead of against it).
    """

    _decoupled = False
    _lazy_state = frozenset({"max_exp_avg_sq"})

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 amsgrad=False, *, maximize=False, **implementation):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, maximize=maximize), **implementation)

    def _init_state(self, param, group):
        state = super()._init_state(param, group)
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = self._lazy_zeros("max_exp_avg_sq", param)
        return state

    def _update(self, param, grad, state, group, lr):
        mint = _C.mint
        beta1, beta2 = momentum_tensor(group), group["betas"][1]
        steps = count_step(state)
        grad = decayed_gradient(param, grad, group, lr, self._decoupled)
        m, v = self._average_moments(grad, state, group)
        if group["amsgrad"]:
            # Made here when amsgrad was set after the parameter was added: the maximum starts
            # now (from zero, so it is v).
            v_max = self._lazy_entry(state, "max_exp_avg_sq", param, "amsgrad=True")
            mint.maximum(v_max, v, out=v_max)
            v = v_max
        # The corrections in float64, as PyTorch's Python floats, then in lr's dtype (float32 for
        # a 16-bit parameter): with a float32 step, beta2 = 0.99999 would round to float32 first,
        # whose 1 - beta2 is 1.0014e-5, and the first steps would be 7e-4 too long.
        correction1 = (1 - mint.pow(beta1, steps)).to(lr.dtype)
        correction2 = mint.sqrt(1 - mint.pow(beta2, steps)).to(lr.dtype)
        denom = mint.sqrt(v) / correction2 + group["eps"]
        param -= (lr / correction1) * m / denom


class AdamW(Adam):
    """AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
    maximize=False)

    Adam with decoupled weight decay (default 1e-2, as in PyTorch): ``weight_decay`` (>= 0)
    shrinks the parameter by ``1 - lr * weight_decay`` at each step instead of entering the
    gradient. The other arguments are Adam's.
    """

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, **implementation):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, maximize=maximize, **implementation)
