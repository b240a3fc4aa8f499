"""kiln.optim.lr_scheduler: learning-rate schedules that write ``group["lr"]`` of an optimizer.

    opt = kiln.optim.AdamW(net.trainable_params(), lr=3e-4)
    sched = kiln.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=1000, warmup_steps=100)
    for batch in data:
        ...; opt.step(); sched.step()

Constructing a scheduler sets the learning rate for step 0; ``step()`` advances one step;
``get_last_lr()`` lists the rates it set last (one per parameter group). Each group's initial
``lr`` is kept as ``group["initial_lr"]`` (the base rate). Setting ``group["lr"]`` writes the
optimizer's learning-rate tensors, so jitted training steps follow the schedule; ``step()`` runs
between them, not inside a ``kiln.jit`` function (a KilnValueError).

``CosineAnnealingLR(optimizer, T_max, eta_min=0.0, warmup_steps=0)``: at step t,

    t < warmup_steps:  lr = base_lr * (t + 1) / warmup_steps          (linear warmup)
    otherwise:         lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * s / S)) / 2
                       with s = t - warmup_steps, S = T_max - warmup_steps

Without warmup this is PyTorch's CosineAnnealingLR (its closed form). ``state_dict()`` /
``load_state_dict()`` save and restore the step and the base rates.
"""

import math

from ..errors import KilnValueError
from .optimizer import check_number

__all__ = ["LRScheduler", "CosineAnnealingLR"]


class LRScheduler:
    """Base class: a subclass defines ``lr_at(base_lr, t)``."""

    def __init__(self, optimizer):
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            group.setdefault("initial_lr", group["lr"])
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = -1
        self._last_lr = []
        self.step()

    def lr_at(self, base_lr, t):
        raise NotImplementedError

    def step(self):
        lrs = [self.lr_at(base, self.last_epoch + 1) for base in self.base_lrs]
        # Set first: a refused rate (inside a kiln.jit function) leaves the scheduler as it was.
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        self.last_epoch += 1
        self._last_lr = lrs

    def get_last_lr(self):
        return list(self._last_lr)

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        for group, lr in zip(self.optimizer.param_groups, self._last_lr):
            group["lr"] = lr


class CosineAnnealingLR(LRScheduler):
    """CosineAnnealingLR(optimizer, T_max, eta_min=0.0, warmup_steps=0): a linear warmup over
    ``warmup_steps`` steps, then a cosine from each group's base rate down to ``eta_min`` at step
    ``T_max`` (0 <= warmup_steps < T_max and eta_min >= 0, else a KilnValueError: the optimizer
    refuses a negative rate when the schedule reaches it). The formula is in
    kiln.optim.lr_scheduler's documentation."""

    def __init__(self, optimizer, T_max, eta_min=0.0, warmup_steps=0):  # noqa: N803
        for name, value, minimum in (("T_max", T_max, None), ("eta_min", eta_min, 0.0),
                                     ("warmup_steps", warmup_steps, None)):
            check_number("CosineAnnealingLR", name, value, minimum)
        if not 0 <= warmup_steps < T_max:
            raise KilnValueError(f"CosineAnnealingLR: need 0 <= warmup_steps < T_max, got "
                                 f"warmup_steps={warmup_steps}, T_max={T_max}")
        self.T_max = T_max
        self.eta_min = eta_min
        self.warmup_steps = warmup_steps
        super().__init__(optimizer)

    def lr_at(self, base_lr, t):
        if t < self.warmup_steps:
            return base_lr * (t + 1) / self.warmup_steps
        progress = (t - self.warmup_steps) / (self.T_max - self.warmup_steps)
        return self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * progress)) / 2
