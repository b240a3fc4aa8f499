"""kiln.optim.SGD: stochastic gradient descent with optional momentum and weight decay.

    opt = kiln.optim.SGD(net.trainable_params(), lr=0.1, momentum=0.9, weight_decay=1e-4)

Per step, as PyTorch's SGD (g is the gradient, p the parameter):

    g = -g  if maximize
    g = g + weight_decay * p
    buf = g  at the buffer's first step, then  buf = momentum * buf + (1 - dampening) * g
    g = g + momentum * buf  if nesterov  else  buf      (momentum != 0 only)
    p = p - lr * g

The momentum buffer is ``opt.state[i]["momentum_buffer"]``, with ``opt.state[i]
["momentum_started"]`` (a 0-d tensor, 0 until the buffer's first step, then 1): a jitted step
must find its state made already, so the buffer starts at zero instead of missing, and the flag
says when it takes the gradient undamped, as PyTorch's first buffer does. Both are made when the
parameter is added with momentum > 0, or at the first step that needs them when
``group["momentum"]`` is raised from 0 later (an eager step: a ``kiln.jit`` step cannot make them,
a KilnValueError).

The update reads the momentum's value from the group's momentum tensor (see
kiln.optim.optimizer), so a jitted step follows the momentum set between its calls (OneCycleLR's
``cycle_momentum``). Whether it steps with momentum at all (PyTorch's ``momentum != 0``) is
decided in Python, at each eager step and when a jitted one is traced, so the update costs no
parameter-sized selection: a jitted step traced with momentum takes a momentum set to exactly 0
later as a factor of 0 (the buffer becomes the damped gradient, and the step is that; PyTorch
steps by the gradient and keeps the buffer, which is the same step when dampening is 0), and one
traced without momentum stays without: make the buffers with one eager step, then
``clear_cache()`` the jitted step.
"""

from .. import _C
from ..errors import KilnValueError
from .optimizer import Optimizer, decayed_gradient, momentum_tensor

__all__ = ["SGD"]

_MOMENTUM_STATE = ("momentum_buffer", "momentum_started")


class SGD(Optimizer):
    """SGD(params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
    maximize=False): PyTorch's arguments, in its order and with its defaults.

    - ``params``: parameters, or parameter groups (dicts; see ``kiln.optim.Optimizer``).
    - ``lr``: the learning rate (>= 0).
    - ``momentum``: the momentum factor (>= 0; 0: plain SGD, no buffer).
    - ``weight_decay``: the L2 penalty added to the gradient (>= 0).
    - ``nesterov``: Nesterov momentum; needs momentum > 0 and dampening 0.
    - ``dampening``: scales the gradient added to the momentum buffer by ``1 - dampening``
      (not at the buffer's first step), as in PyTorch, which does not bound it either.
    - ``maximize``: maximizes the objective (steps along the gradient instead of against it).
    """

    _lazy_state = frozenset(_MOMENTUM_STATE)
    _numeric = {**Optimizer._numeric, "momentum": 0.0, "dampening": None, "weight_decay": 0.0}
    _momentum_key = "momentum"

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False, *, maximize=False, **implementation):
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize), **implementation)

    def _check_hyperparameters(self, group):
        super()._check_hyperparameters(group)
        if group["nesterov"] and (group["momentum"] <= 0.0 or group["dampening"] != 0.0):
            raise KilnValueError(f"SGD: nesterov momentum needs momentum > 0 and dampening 0, "
                                 f"got momentum {group['momentum']}, dampening "
                                 f"{group['dampening']}")

    def _lazy_zeros(self, key, param):
        if key == "momentum_started":
            return _C.mint.zeros((), dtype=param.dtype)
        return super()._lazy_zeros(key, param)

    def _complete_loaded_state(self, param, group, state, saved_keys):
        # A checkpoint with a buffer but no flag (an older Kiln's, a converted PyTorch one) is past
        # the buffer's first step: the next one must be damped.
        if "momentum_buffer" in saved_keys and "momentum_started" not in saved_keys:
            if "momentum_started" not in state:
                state["momentum_started"] = self._lazy_zeros("momentum_started", param)
            state["momentum_started"][...] = 1

    def _init_state(self, param, group):
        if group["momentum"] == 0.0:
            return {}
        return {key: self._lazy_zeros(key, param) for key in _MOMENTUM_STATE}

    def _update(self, param, grad, state, group, lr):
        mint = _C.mint
        grad = decayed_gradient(param, grad, group, lr)
        if group["momentum"] != 0.0:
            # Made here when the parameter was added with momentum 0, as PyTorch makes it.
            buf, started = (self._lazy_entry(state, key, param, "momentum > 0")
                            for key in _MOMENTUM_STATE)
            momentum = momentum_tensor(group).to(lr.dtype)
            mint.mul(buf, momentum, out=buf)
            dampening = group["dampening"]
            # At the first step buf is zero and takes the gradient undamped: buf = g.
            buf += grad if dampening == 0.0 else (1 - dampening * started) * grad
            mint.clamp(started, min=1, out=started)  # started = 1, also in a jitted step
            grad = grad + momentum * buf if group["nesterov"] else buf
        param -= lr * grad
