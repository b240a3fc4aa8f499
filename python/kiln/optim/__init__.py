"""kiln.optim: optimizers and learning-rate schedules.

    opt = kiln.optim.Adam(net.trainable_params(), lr=1e-3)
    sched = kiln.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=100)
    opt.zero_grad(); loss.backward(); opt.step(); sched.step()       # PyTorch style
    loss, grads = kiln.value_and_grad(f, None, opt.parameters)(x, y); opt(grads)  # MindSpore

- ``Optimizer``: the base (``parameters``, ``param_groups``, ``state``, ``step()``,
  ``opt(grads)``, ``zero_grad()``, ``state_dict()`` / ``load_state_dict()``; kiln/optim/optimizer.py).
- ``SGD(params, lr, momentum=0, weight_decay=0, nesterov=False, *, dampening=0, maximize=False)``.
- ``Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
  maximize=False)`` and ``AdamW`` (the same with decoupled weight decay, default 1e-2).
- ``lr_scheduler``: ``CosineAnnealingLR``, ``StepLR``, ``MultiStepLR``, ``ExponentialLR``,
  ``LambdaLR``, ``LinearLR``, ``ConstantLR``, ``OneCycleLR``, ``ReduceLROnPlateau`` (PyTorch's
  arguments; each computes its rate from the group's base rate; kiln/optim/lr_scheduler.py).
"""

from . import lr_scheduler  # noqa: F401
from .adam import Adam, AdamW  # noqa: F401
from .optimizer import Optimizer  # noqa: F401
from .sgd import SGD  # noqa: F401

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]
