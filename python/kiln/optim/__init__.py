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
- ``Adadelta(params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, *, maximize=False)``,
  ``Rprop(params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, maximize=False)``,
  ``ASGD(params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, *, maximize=False)``.
- ``LBFGS(params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
  history_size=100, line_search_fn=None)``: ``step(closure)`` re-evaluates the loss through the
  closure, with PyTorch's strong-Wolfe line search; one parameter group, eager only
  (kiln/optim/lbfgs.py).
- ``lr_scheduler``: ``CosineAnnealingLR``, ``StepLR``, ``MultiStepLR``, ``ExponentialLR``,
  ``LambdaLR``, ``MultiplicativeLR``, ``LinearLR``, ``ConstantLR``, ``PolynomialLR``,
  ``OneCycleLR``, ``CyclicLR``, ``ReduceLROnPlateau``, ``CosineAnnealingWarmRestarts``,
  ``SequentialLR``, ``ChainedScheduler`` (PyTorch's arguments and chaining;
  kiln/optim/lr_scheduler.py).
- ``swa_utils``: ``AveragedModel`` (SWA and EMA copies of a model), ``update_bn``, ``SWALR``
  (kiln/optim/swa_utils.py).
"""

from . import lr_scheduler, swa_utils  # noqa: F401
from .adadelta import Adadelta  # noqa: F401
from .adagrad import Adagrad  # noqa: F401
from .adam import Adam, AdamW  # noqa: F401
from .adamax import Adamax  # noqa: F401
from .asgd import ASGD  # noqa: F401
from .lbfgs import LBFGS  # noqa: F401
from .nadam import NAdam  # noqa: F401
from .optimizer import Optimizer  # noqa: F401
from .radam import RAdam  # noqa: F401
from .rmsprop import RMSprop  # noqa: F401
from .rprop import Rprop  # noqa: F401
from .sgd import SGD  # noqa: F401

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam",
           "Adadelta", "Rprop", "ASGD", "LBFGS", "lr_scheduler", "swa_utils"]
