"""kiln.optim.SGD: stochastic gradient descent with optional momentum and weight decay.

    opt = kiln.optim.SGD(net.trainable_params(), lr=0.1, momentum=0.9, weight_decay=1e-4)

Per step, as PyTorch's SGD with dampening 0 (g is the gradient, p the parameter):

    g = g + weight_decay * p
    buf = momentum * buf + g                 (buf starts at zero, so the first buf is g)
    g = g + momentum * buf  if nesterov  else  buf      (momentum > 0 only)
    p = p - lr * g

The momentum buffer is ``opt.state[i]["momentum_buffer"]``, made when the parameter is added
with momentum > 0, or at the first step that needs it when ``group["momentum"]`` is raised from 0
later (an eager step: a ``kiln.jit`` step cannot make it, a KilnValueError). ``nesterov`` needs
momentum > 0.
"""

from .. import _C
from ..errors import KilnValueError
from .optimizer import Optimizer

__all__ = ["SGD"]


class SGD(Optimizer):
    _lazy_state = frozenset({"momentum_buffer"})

    def __init__(self, params, lr, momentum=0.0, weight_decay=0.0, nesterov=False):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay,
                                      nesterov=nesterov))

    def _check_hyperparameters(self, group):
        super()._check_hyperparameters(group)
        if not group["momentum"] >= 0.0:
            raise KilnValueError(f"SGD: invalid momentum {group['momentum']}")
        if not group["weight_decay"] >= 0.0:
            raise KilnValueError(f"SGD: invalid weight_decay {group['weight_decay']}")
        if group["nesterov"] and group["momentum"] <= 0.0:
            raise KilnValueError("SGD: nesterov momentum needs momentum > 0")

    def _init_state(self, param, group):
        if group["momentum"] == 0.0:
            return {}
        return {"momentum_buffer": _C.mint.zeros_like(param)}

    def _update(self, param, grad, state, group, lr):
        if group["weight_decay"] != 0.0:
            grad = grad + group["weight_decay"] * param
        momentum = group["momentum"]
        if momentum != 0.0:
            buf = state.get("momentum_buffer")
            if buf is None:
                # The parameter was added with momentum 0: its buffer is made now, as PyTorch
                # makes it. Not while tracing: a traced buffer would restart from zero at every
                # call of the graph, and eager steps could not read it.
                if _C.jit.is_tracing():
                    raise KilnValueError("SGD: a parameter added with momentum 0 has no momentum "
                                         "buffer, and a kiln.jit step cannot create one; run one "
                                         "eager step after raising momentum, or build the "
                                         "optimizer with momentum > 0")
                buf = state["momentum_buffer"] = _C.mint.zeros_like(param)
            _C.mint.mul(buf, momentum, out=buf)
            buf += grad
            grad = grad + momentum * buf if group["nesterov"] else buf
        param -= lr * grad
