"""kiln.optim.ASGD (Polyak & Juditsky 1992: averaged stochastic gradient descent), as PyTorch's.

    opt = kiln.optim.ASGD(params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0)

SGD with a decaying rate eta, which also shrinks the parameter, and a running average ax of the
parameters (the averaged iterate; the parameters themselves are not replaced by it). Per step
t = 1, 2, ... (g is the gradient, p the parameter):

    g = -g  if maximize
    g = g + weight_decay * p
    p = p * (1 - lambd * eta) - eta * g
    ax = p  if mu == 1  else  ax + mu * (p - ax)
    eta = lr / (1 + lambd * lr * t)**alpha           (for the next step)
    mu = 1 / max(1, t - t0)

eta starts at the rate of the parameter's first step, as PyTorch makes its state then: a rate a
scheduler sets before that step is the one used, also in a jitted step. The new eta and mu are
computed in float64, as PyTorch computes them in Python floats, from the group's rate tensor
(float32 for float32 parameters, so they may differ from PyTorch's in the last digit).

State: ``opt.state[i]`` holds ``step``, ``eta`` and ``mu`` (0-d, float64 for float64 parameters or a
float64 default dtype and float32 otherwise, as Adam's step count) and ``ax``, PyTorch's names. A
parameter with no state in a loaded state dict starts again with eta at its group's rate and mu 1,
as when it was added.
"""

from .. import _C
from .optimizer import Optimizer, count_step, decayed_gradient, scalar_state

__all__ = ["ASGD"]


class ASGD(Optimizer):
    """ASGD(params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None,
    maximize=False, differentiable=False, capturable=False)

    - ``params``: parameters, or parameter groups (dicts; see ``kiln.optim.Optimizer``).
    - ``lr``: the learning rate (>= 0).
    - ``lambd``: the decay term: how fast eta decays and how much it shrinks the parameter
      (>= 0).
    - ``alpha``: the power of eta's decay (>= 0).
    - ``t0``: the step after which averaging starts (mu < 1); any number, as in PyTorch.
    - ``weight_decay``: the L2 penalty added to the gradient (>= 0).
    - ``maximize``: maximizes the objective (steps along the gradient instead of against it).
    - ``foreach``, ``differentiable``, ``capturable``: PyTorch's choices of implementation (see
      kiln.optim.optimizer), which PyTorch's ASGD takes by position too.
    """

    _numeric = {**Optimizer._numeric, "lambd": 0.0, "alpha": 0.0, "t0": None,
                "weight_decay": 0.0}

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False,
                 **implementation):
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0,
                                      weight_decay=weight_decay, maximize=maximize),
                         foreach=foreach, differentiable=differentiable, capturable=capturable,
                         **implementation)

    def _init_state(self, param, group):
        return {"step": scalar_state(param), "eta": scalar_state(param, group["lr"]),
                "mu": scalar_state(param, 1.0), "ax": _C.mint.zeros_like(param)}

    def _complete_loaded_state(self, param, group, state, saved_keys):
        # No state in the checkpoint is fresh state (the base class left zeros: a mu of 0 would
        # keep ax at zero).
        if not saved_keys:
            state["eta"][...] = group["lr"]
            state["mu"][...] = 1

    def _update(self, param, grad, state, group, lr):
        mint = _C.mint
        lambd = group["lambd"]
        eta, mu, ax = state["eta"], state["mu"], state["ax"]
        # PyTorch makes eta at the parameter's first step, from the rate of that step; a tensor
        # test, so that a jitted step does so too.
        mint.where(state["step"] == 0, lr.to(eta.dtype), eta, out=eta)
        steps = count_step(state)
        grad = decayed_gradient(param, grad, group, lr)
        eta64 = eta.to(_C.dtype.float64)
        mint.mul(param, (1 - lambd * eta64).to(lr.dtype), out=param)
        param -= eta.to(lr.dtype) * grad
        # PyTorch copies the parameter while mu is 1 (a + (p - a) * 1 may round off p).
        mint.where(mu == 1, param, ax + (param - ax) * mu, out=ax)
        rate = lr.to(_C.dtype.float64)
        eta[...] = rate / mint.pow(1 + lambd * rate * steps, group["alpha"])
        mu[...] = 1 / mint.clamp(steps - group["t0"], min=1.0)
