"""kiln.optim: optimizers and learning-rate schedules.

    opt = kiln.optim.Adam(net.trainable_params(), lr=1e-3)
    sched = kiln.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=100)
    opt.zero_grad(); loss.backward(); opt.step(); sched.step()       # PyTorch style
    loss, grads = kiln.value_and_grad(f, None, opt.parameters)(x, y); opt(grads)  # MindSpore

- ``Optimizer``: the base (``parameters``, ``param_groups``, ``state``, ``step()``,
  ``opt(grads)``, ``zero_grad()``, ``state_dict()`` / ``load_state_dict()``; PyTorch's
  ``foreach`` / ``fused`` / ``capturable`` / ``differentiable`` flags; kiln/optim/optimizer.py).
- ``SGD(params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
  maximize=False)``.
- ``Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
  maximize=False)`` and ``AdamW`` (the same with decoupled weight decay, default 1e-2).
- ``RMSprop(params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False, *,
  maximize=False)``.
- ``Adagrad(params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
  *, maximize=False)``.
- ``Adamax(params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, *, maximize=False)``.
- ``NAdam(params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3, *,
  decoupled_weight_decay=False, maximize=False)``.
- ``RAdam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, *,
  decoupled_weight_decay=False, maximize=False)``.
- ``lr_scheduler``: ``CosineAnnealingLR``, ``StepLR``, ``MultiStepLR``, ``ExponentialLR``,
  ``LambdaLR``, ``MultiplicativeLR``, ``LinearLR``, ``ConstantLR``, ``PolynomialLR``,
  ``OneCycleLR``, ``CyclicLR``, ``ReduceLROnPlateau``, ``CosineAnnealingWarmRestarts``,
  ``SequentialLR``, ``ChainedScheduler`` (PyTorch's arguments and chaining; kiln/optim/lr_scheduler.py).
- ``swa_utils``: ``AveragedModel`` (SWA and EMA copies of a model), ``update_bn``, ``SWALR``
  (kiln/optim/swa_utils.py).
"""

from . import lr_scheduler, swa_utils  # noqa: F401
from .adagrad import Adagrad  # noqa: F401
from .adam import Adam, AdamW  # noqa: F401
from .adamax import Adamax  # noqa: F401
from .nadam import NAdam  # noqa: F401
from .optimizer import Optimizer  # noqa: F401
from .radam import RAdam  # noqa: F401
from .rmsprop import RMSprop  # noqa: F401
from .sgd import SGD  # noqa: F401

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam",
           "lr_scheduler", "swa_utils"]
