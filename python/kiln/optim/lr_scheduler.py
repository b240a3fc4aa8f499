"""kiln.optim.lr_scheduler: learning-rate schedules that write ``group["lr"]`` of an optimizer.

    opt = kiln.optim.AdamW(net.trainable_params(), lr=3e-4)
    sched = kiln.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=1000, warmup_steps=100)
    for batch in data:
        ...; opt.step(); sched.step()

    plateau = kiln.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", patience=3)
    for epoch in range(epochs):
        ...; plateau.step(validation_loss)

Constructing a scheduler sets the learning rate for step 0; ``step()`` advances one step;
``get_last_lr()`` lists the rates it set last (one per parameter group). Each group's initial
``lr`` is kept as ``group["initial_lr"]`` (the base rate). Setting ``group["lr"]`` writes the
optimizer's learning-rate tensors (and OneCycleLR's ``cycle_momentum`` sets the momentum, which
writes the momentum tensor), so jitted training steps follow the schedule; ``step()`` runs
between them, not inside a ``kiln.jit`` function (a KilnValueError).

The schedules are PyTorch's, with its arguments and defaults but for the points named below and
in OneCycleLR's docstring. Alone on an optimizer, each sets the rate its schedule has at step t
(the closed form below; PyTorch's chainable steps reach the same up to rounding). With ``base``
a group's base rate, at step t = 0, 1, ...:

    CosineAnnealingLR(T_max, eta_min=0, warmup_steps=0)
        t < warmup_steps:  base * (t + 1) / warmup_steps                   (linear warmup)
        otherwise:         eta_min + (base - eta_min) * (1 + cos(pi * s / S)) / 2
                           with s = t - warmup_steps, S = T_max - warmup_steps
    StepLR(step_size, gamma=0.1)          base * gamma ** (t // step_size)
    MultiStepLR(milestones, gamma=0.1)    base * gamma ** (number of milestones <= t)
    ExponentialLR(gamma)                  base * gamma ** t
    LambdaLR(lr_lambda)                   base * lr_lambda(t)          (one function per group,
                                                                         or one for all)
    MultiplicativeLR(lr_lambda)           the rate found times lr_lambda(t), for t >= 1
    LinearLR(start_factor=1/3, end_factor=1, total_iters=5)
        base * (start_factor + (end_factor - start_factor) * min(t, total_iters) / total_iters)
    ConstantLR(factor=1/3, total_iters=5) base * factor for t < total_iters, then base
    OneCycleLR(max_lr, total_steps, ...)  see its docstring (it can cycle the momentum too)
    CyclicLR(base_lr, max_lr, ...)        see its docstring (it can cycle the momentum too)
    CosineAnnealingWarmRestarts(T_0, T_mult=1, eta_min=0)
        eta_min + (base - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2, with T_i the length of
        the current cycle (T_0, times T_mult at each restart) and T_cur the steps since it began
    SequentialLR(schedulers, milestones)  scheduler i from milestone i - 1 (the first from
        step 0) up to milestone i, each from its own step 0
    PolynomialLR(total_iters=5, power=1.0)
        base * (1 - min(t, total_iters) / total_iters) ** power
    ChainedScheduler(schedulers)          base * the product over the schedulers of
        (the rate scheduler i sets at its step t) / base      (see its docstring)
    ReduceLROnPlateau(mode="min", factor=0.1, patience=10, ...): ``step(metrics)`` multiplies
        the rates by ``factor`` once the metric has not improved for more than ``patience`` steps

Schedulers stepped together. As in PyTorch, schedulers of one optimizer may be stepped one after
the other (``warmup.step(); decay.step()``), and a rate may be set by hand between steps: a step
moves the rate it finds as its schedule moves (PyTorch's chainable step), multiplying it by
``f(t) / f(t - 1)``, the schedule's own rates at t and t - 1 (StepLR, MultiStepLR, ExponentialLR,
LinearLR, ConstantLR, PolynomialLR; the constructor's step 0 multiplies by ``f(0) / base``), or,
for CosineAnnealingLR past its warmup, moving the rate's distance to eta_min by that ratio of
distances. A rate the schedule's own (nothing else changed it) becomes ``f(t)`` exactly; where
``f(t - 1)`` is 0 (or eta_min), which no factor scales, the rate moves by ``f(t) - f(t - 1)``
(PyTorch's cosine past T_max). MultiplicativeLR and ReduceLROnPlateau multiply the rate they
find; LambdaLR, OneCycleLR and CosineAnnealingWarmRestarts set their schedule's rate whatever the
rate was, as PyTorch's do, and so does CyclicLR.

Without warmup CosineAnnealingLR is PyTorch's (its closed form). PyTorch's ``last_epoch``
argument (resuming by step count) is not taken: resume with ``load_state_dict``. ``state_dict()``
/ ``load_state_dict()`` save and restore the step, the base rates and the schedule's state
(LambdaLR saves the attributes of callable objects, not functions, as PyTorch does);
``load_state_dict`` sets the optimizer's rates to the restored ones.

A scheduler's arguments are checked as an optimizer's are: a number of the wrong kind (a string,
None, a bool) is a KilnTypeError, one out of range a KilnValueError, each naming the argument.
Beyond PyTorch's checks, Kiln refuses what would make PyTorch's schedule divide by zero, go
negative (which Kiln's optimizers refuse at the step that reaches it) or differ from its closed
form: a gamma < 0, a step_size, total_iters or total_steps < 1 or not an int, milestones that
are negative or decreasing.
"""

import bisect
import math
import numbers
import types

from .. import _C
from .._checks import checked_int
from ..errors import KilnTypeError, KilnValueError
from .optimizer import Optimizer, check_number

__all__ = ["LRScheduler", "CosineAnnealingLR", "StepLR", "MultiStepLR", "ExponentialLR",
           "LambdaLR", "MultiplicativeLR", "LinearLR", "ConstantLR", "PolynomialLR", "OneCycleLR",
           "CyclicLR", "ReduceLROnPlateau", "CosineAnnealingWarmRestarts", "SequentialLR",
           "ChainedScheduler"]


def _check_optimizer(owner, optimizer):
    # Anything else fails later with an AttributeError that does not say what was expected.
    if not isinstance(optimizer, Optimizer):
        raise KilnTypeError(f"{owner}: expected a kiln.optim.Optimizer, got "
                            f"{type(optimizer).__name__}")


def _check_between(owner, name, value, low, high, low_open=False):
    """Checks that ``value`` is a real number in [low, high] (in (low, high] with ``low_open``);
    NaN fails the comparison and is refused too."""
    check_number(owner, name, value)
    if not ((low < value) if low_open else (low <= value)) or not value <= high:
        interval = f"{'(' if low_open else '['}{low}, {high}]"
        raise KilnValueError(f"{owner}: {name} must be in {interval}, got {value}")


def _checked_milestones(owner, milestones):
    """``milestones`` (any iterable of step indices) as a list of ints >= 0 in increasing order;
    equal ones are allowed."""
    if isinstance(milestones, (str, bytes)) or not hasattr(milestones, "__iter__"):
        raise KilnTypeError(f"{owner}: milestones must be a list of step indices, got "
                            f"{type(milestones).__name__} {milestones!r}")
    milestones = [checked_int(owner, "a milestone", m, 0) for m in milestones]
    if milestones != sorted(milestones):
        raise KilnValueError(f"{owner}: milestones must be in increasing order, got {milestones}")
    return milestones


def _per_group(owner, name, value, optimizer, minimum):
    """``value`` (a number, or a list or tuple of one per parameter group) as a list of one
    number per group, each checked to be at least ``minimum``."""
    count = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != count:
            raise KilnValueError(f"{owner}: expected {count} values of {name} (one per parameter "
                                 f"group), got {len(value)}")
        for i, v in enumerate(value):
            check_number(owner, f"{name}[{i}]", v, minimum)
        return list(value)
    check_number(owner, name, value, minimum)
    return [value] * count


class LRScheduler:
    """Base class. A subclass defines ``lr_at(base_lr, t)``, the rate at step ``t`` of a group
    whose base rate is ``base_lr``, or ``lrs_at(t)``, the list of every group's rate at step
    ``t`` (for a schedule whose groups differ by more than their base rates). A schedule whose
    PyTorch step does not move the rate it finds but sets one from the base rate sets
    ``chainable = False`` (see "Schedulers stepped together" in the module's documentation)."""

    chainable = True

    def __init__(self, optimizer):
        _check_optimizer(type(self).__name__, optimizer)
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            group.setdefault("initial_lr", group["lr"])
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = -1
        self._last_lr = []
        self._schedule_lr = list(self.base_lrs)  # the schedule's own rates at last_epoch
        self.step()

    def lr_at(self, base_lr, t):
        raise NotImplementedError

    def lrs_at(self, t):
        return [self.lr_at(base, t) for base in self.base_lrs]

    def anchor_at(self, t):
        """The rate the schedule's step from t - 1 to t scales about (see _followed): 0 for
        the schedules that multiply the rate."""
        return 0.0

    def step(self):
        """Advances the schedule one step and sets each group's rate for it."""
        t = self.last_epoch + 1
        schedule = self.lrs_at(t)
        self._set_rates(self._followed(schedule, t), t, schedule)

    def _followed(self, schedule, t):
        """The rates a step to ``t`` sets: each group's rate moved as the ``schedule`` moves,
        as PyTorch's chainable step moves it: ``a + (lr - a) * r``, with ``a`` the schedule's
        anchor (0: the rate is multiplied by r) and ``r`` its step's ratio of distances to it,
        ``(f(t) - a) / (f(t - 1) - a)`` (f(-1): the base rate), for a base the ratio does not
        depend on (a + 1: a group whose base is 0 is scaled too, as PyTorch's). A rate that is
        the schedule's own (nothing else changed it) becomes the schedule's exactly, as do the
        rates of a schedule that starts over (``_schedule_lr`` None: SequentialLR's milestones);
        where ``f(t - 1)`` is the anchor, which no ratio scales, the rate moves by the group's
        ``f(t) - f(t - 1)`` (PyTorch's cosine at the end of a half period)."""
        if not self.chainable or self._schedule_lr is None:
            return schedule
        anchor = self.anchor_at(t)
        unit = anchor + 1.0
        before = self.lr_at(unit, t - 1) if t > 0 else unit
        ratio = (self.lr_at(unit, t) - anchor) / (before - anchor) if before != anchor else None
        lrs = []
        for group, old, new in zip(self.optimizer.param_groups, self._schedule_lr, schedule):
            lr = group["lr"]
            if lr == old:
                lrs.append(new)
            elif ratio is None:
                lrs.append(lr + (new - old))
            else:
                lrs.append(anchor + (lr - anchor) * ratio)
        return lrs

    def _set_rates(self, lrs, t, schedule=None):
        """Sets each group's rate to ``lrs``, the rates of step ``t``, and records the step
        and the schedule's own rates there (``schedule``; ``lrs`` when None)."""
        # Set first: a refused rate (inside a kiln.jit function) leaves the scheduler as it was.
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        self.last_epoch = t
        self._last_lr = lrs
        self._schedule_lr = lrs if schedule is None else schedule

    def get_last_lr(self):
        """The rates the scheduler set last, one per parameter group."""
        return list(self._last_lr)

    def state_dict(self):
        """The scheduler's state (everything but the optimizer), for ``load_state_dict``."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        """Restores a ``state_dict()`` and sets the optimizer's rates to its last ones."""
        self.__dict__.update(state_dict)
        # A state saved by Kiln 0.6.0 has no schedule rates: they were the last rates.
        self.__dict__.setdefault("_schedule_lr", list(self._last_lr))
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

    def anchor_at(self, t):
        # PyTorch's chainable cosine moves the rate's distance to eta_min; the warmup multiplies.
        return self.eta_min if t > self.warmup_steps else 0.0

    def lr_at(self, base_lr, t):
        if t < self.warmup_steps:
            return base_lr * (t + 1) / self.warmup_steps
        progress = (t - self.warmup_steps) / (self.T_max - self.warmup_steps)
        return self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * progress)) / 2


class StepLR(LRScheduler):
    """StepLR(optimizer, step_size, gamma=0.1): multiplies the rate by ``gamma`` every
    ``step_size`` steps (``base * gamma ** (t // step_size)``). ``step_size`` is an int >= 1
    and ``gamma`` a number >= 0 (a KilnValueError otherwise: a negative one would make every
    other rate negative)."""

    def __init__(self, optimizer, step_size, gamma=0.1):
        self.step_size = checked_int("StepLR", "step_size", step_size, 1)
        check_number("StepLR", "gamma", gamma, 0.0)
        self.gamma = gamma
        super().__init__(optimizer)

    def lr_at(self, base_lr, t):
        return base_lr * self.gamma ** (t // self.step_size)


class MultiStepLR(LRScheduler):
    """MultiStepLR(optimizer, milestones, gamma=0.1): multiplies the rate by ``gamma`` at each
    step in ``milestones`` (ints >= 0 in increasing order; one given n times multiplies by
    ``gamma ** n``, as in PyTorch), so ``base * gamma ** (number of milestones <= t)``.
    ``gamma`` is a number >= 0."""

    def __init__(self, optimizer, milestones, gamma=0.1):
        milestones = _checked_milestones("MultiStepLR", milestones)
        check_number("MultiStepLR", "gamma", gamma, 0.0)
        self.milestones = tuple(milestones)
        self.gamma = gamma
        super().__init__(optimizer)

    def lr_at(self, base_lr, t):
        return base_lr * self.gamma ** bisect.bisect_right(self.milestones, t)


class ExponentialLR(LRScheduler):
    """ExponentialLR(optimizer, gamma): multiplies the rate by ``gamma`` (a number >= 0) every
    step: ``base * gamma ** t``."""

    def __init__(self, optimizer, gamma):
        check_number("ExponentialLR", "gamma", gamma, 0.0)
        self.gamma = gamma
        super().__init__(optimizer)

    def lr_at(self, base_lr, t):
        return base_lr * self.gamma ** t


class LambdaLR(LRScheduler):
    """LambdaLR(optimizer, lr_lambda): the base rate times ``lr_lambda(t)``. ``lr_lambda`` is one
    callable for every group, or a list or tuple of one per group (another count is a
    KilnValueError). Each call must return a real number >= 0 (else a KilnTypeError or
    KilnValueError naming the step, raised before any rate changes).

    ``state_dict()`` holds, for each function, None when it is a plain function or lambda, and
    a copy of its ``__dict__`` when it is a callable object, which ``load_state_dict`` restores
    into the scheduler's own objects (PyTorch's convention: code is not saved)."""

    chainable = False  # PyTorch's LambdaLR sets base * lr_lambda(t) whatever the rate was

    def __init__(self, optimizer, lr_lambda):
        owner = type(self).__name__
        _check_optimizer(owner, optimizer)
        count = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != count:
                raise KilnValueError(f"{owner}: expected {count} lr_lambdas (one per parameter "
                                     f"group), got {len(lr_lambda)}")
            lambdas = list(lr_lambda)
        else:
            lambdas = [lr_lambda] * count
        for fn in lambdas:
            if not callable(fn):
                raise KilnTypeError(f"{owner}: lr_lambda must be a callable or a list of one "
                                    f"per parameter group, got {type(fn).__name__} {fn!r}")
        self.lr_lambdas = lambdas
        super().__init__(optimizer)

    def lrs_at(self, t):
        return [base * factor for base, factor in zip(self.base_lrs, self._factors(t))]

    def _factors(self, t):
        """Each group's ``lr_lambda(t)``, checked (before any rate changes)."""
        owner = type(self).__name__
        factors = []
        for i, fn in enumerate(self.lr_lambdas):
            factor = fn(t)
            if isinstance(factor, bool) or not isinstance(factor, numbers.Real):
                raise KilnTypeError(f"{owner}: lr_lambda returned {factor!r} "
                                    f"({type(factor).__name__}) for group {i} at step {t}, "
                                    f"expected a real number >= 0")
            if not factor >= 0:
                raise KilnValueError(f"{owner}: lr_lambda returned {factor} for group {i} at "
                                     f"step {t}, expected a real number >= 0")
            factors.append(factor)
        return factors

    def state_dict(self):
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
                               for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict):
        state = dict(state_dict)
        saved = state.pop("lr_lambdas")
        for fn, attributes in zip(self.lr_lambdas, saved):
            if attributes is not None:
                fn.__dict__.update(attributes)
        super().load_state_dict(state)


class MultiplicativeLR(LambdaLR):
    """MultiplicativeLR(optimizer, lr_lambda): at each step t >= 1, multiplies each group's rate
    (the one it finds) by ``lr_lambda(t)``, as PyTorch's; step 0 leaves the rates. ``lr_lambda``
    and ``state_dict()`` are LambdaLR's."""

    def lrs_at(self, t):
        rates = [group["lr"] for group in self.optimizer.param_groups]
        if t == 0:
            return rates
        return [lr * factor for lr, factor in zip(rates, self._factors(t))]


class LinearLR(LRScheduler):
    """LinearLR(optimizer, start_factor=1/3, end_factor=1.0, total_iters=5): the base rate
    times a factor going linearly from ``start_factor`` at step 0 to ``end_factor`` at step
    ``total_iters``, then kept. As in PyTorch, start_factor is in (0, 1] and end_factor in
    [0, 1]; ``total_iters`` is an int >= 1."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5):
        _check_between("LinearLR", "start_factor", start_factor, 0.0, 1.0, low_open=True)
        _check_between("LinearLR", "end_factor", end_factor, 0.0, 1.0)
        self.total_iters = checked_int("LinearLR", "total_iters", total_iters, 1)
        self.start_factor = start_factor
        self.end_factor = end_factor
        super().__init__(optimizer)

    def lr_at(self, base_lr, t):
        progress = min(t, self.total_iters) / self.total_iters
        return base_lr * (self.start_factor + (self.end_factor - self.start_factor) * progress)


class ConstantLR(LRScheduler):
    """ConstantLR(optimizer, factor=1/3, total_iters=5): the base rate times ``factor`` (in
    [0, 1], as in PyTorch) for the first ``total_iters`` steps (an int >= 1), then the base
    rate."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5):
        _check_between("ConstantLR", "factor", factor, 0.0, 1.0)
        self.total_iters = checked_int("ConstantLR", "total_iters", total_iters, 1)
        self.factor = factor
        super().__init__(optimizer)

    def lr_at(self, base_lr, t):
        return base_lr * self.factor if t < self.total_iters else base_lr


class PolynomialLR(LRScheduler):
    """PolynomialLR(optimizer, total_iters=5, power=1.0): the base rate times
    ``(1 - min(t, total_iters) / total_iters) ** power``, falling to 0 at step ``total_iters``
    (an int >= 1) and staying there. ``power`` is a number >= 0 (a negative one would divide by
    zero at total_iters, as PyTorch's does)."""

    def __init__(self, optimizer, total_iters=5, power=1.0):
        self.total_iters = checked_int("PolynomialLR", "total_iters", total_iters, 1)
        check_number("PolynomialLR", "power", power, 0.0)
        self.power = power
        super().__init__(optimizer)

    def lr_at(self, base_lr, t):
        return base_lr * (1.0 - min(t, self.total_iters) / self.total_iters) ** self.power


class _CyclesMomentum(LRScheduler):
    """Base of the schedulers that cycle the momentum with ``cycle_momentum`` (OneCycleLR,
    CyclicLR): a subclass sets ``cycle_momentum`` and defines ``momenta_at(t)``, each group's
    momentum at step t, which every step and load_state_dict set (SGD's and RMSprop's
    ``momentum``, the Adam family's beta1)."""

    def _checked_momenta(self, optimizer, base_momentum, max_momentum):
        """Each group's (base_momentum, max_momentum), checked before any group changes: numbers
        >= 0, below 1 where they are beta1, for an optimizer that has a momentum."""
        name = type(self).__name__
        key = optimizer._momentum_key
        if key is None:
            raise KilnValueError(f"{name}: cycle_momentum=True needs an optimizer with a "
                                 f"momentum (SGD's or RMSprop's momentum, the Adam family's "
                                 f"beta1), but {type(optimizer).__name__} has none; pass "
                                 f"cycle_momentum=False")
        bases = _per_group(name, "base_momentum", base_momentum, optimizer, 0.0)
        peaks = _per_group(name, "max_momentum", max_momentum, optimizer, 0.0)
        if key == "betas":
            for arg, values in (("base_momentum", bases), ("max_momentum", peaks)):
                for value in values:
                    if not value < 1:
                        raise KilnValueError(f"{name}: {arg} must be < 1 for "
                                             f"{type(optimizer).__name__}, whose beta1 it "
                                             f"sets, got {value}")
        return list(zip(bases, peaks))

    def momenta_at(self, t):
        raise NotImplementedError

    def _set_momenta(self):
        # Beta1 is the first of betas, whose beta2 stays, as in PyTorch.
        key = self.optimizer._momentum_key
        for group, momentum in zip(self.optimizer.param_groups, self.momenta_at(self.last_epoch)):
            group[key] = (momentum, *group[key][1:]) if key == "betas" else momentum

    def step(self):
        """Advances one step and sets each group's rate for it, and its momentum with
        ``cycle_momentum``."""
        super().step()
        if self.cycle_momentum:
            self._set_momenta()

    def load_state_dict(self, state_dict):
        """Restores a ``state_dict()`` and sets the optimizer's rates (and, with
        ``cycle_momentum``, momenta) to those of its step."""
        super().load_state_dict(state_dict)
        if self.cycle_momentum:
            self._set_momenta()


class OneCycleLR(_CyclesMomentum):
    """OneCycleLR(optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
    pct_start=0.3, anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85,
    max_momentum=0.95, div_factor=25.0, final_div_factor=1e4, three_phase=False): the 1cycle
    policy (Smith & Topor), as PyTorch's.

    - ``max_lr``: the peak rate, a number >= 0 or a list of one per group. Each group starts at
      ``initial_lr = max_lr / div_factor`` and ends at ``min_lr = initial_lr / final_div_factor``
      (both factors > 0); the three are written into the group (``group["initial_lr"]``,
      ``"max_lr"``, ``"min_lr"``), as PyTorch does.
    - ``total_steps`` (an int >= 1), or else ``epochs * steps_per_epoch`` (both ints >= 1): the
      length of the cycle.
    - ``pct_start`` (in [0, 1]): the part of the cycle spent rising from initial_lr to max_lr;
      the rest anneals from max_lr to min_lr. With ``three_phase`` the rate instead falls back
      to initial_lr over as many steps as it rose, then anneals to min_lr.
    - ``anneal_strategy``: "cos" (a half cosine in each phase) or "linear".
    - ``cycle_momentum``: also cycles the momentum, inversely to the rate: from ``max_momentum``
      down to ``base_momentum`` while the rate rises, back up to ``max_momentum`` while it
      anneals (with ``three_phase``, back up while it falls to initial_lr, then kept). Each is a
      number >= 0 (< 1 for the Adam family) or a list of one per group, written into the group
      (``group["max_momentum"]``, ``"base_momentum"``), as PyTorch does. The momentum is SGD's and
      RMSprop's ``group["momentum"]``, the Adam family's beta1 (``group["betas"] = (momentum,
      beta2)``); an optimizer with neither (Adagrad) is a KilnValueError. Kiln's optimizers read
      it from a tensor that setting it writes, so a jitted training step follows it, as it does
      the rate (see kiln.optim.optimizer).

    A phase that ends at step e after starting at step s gives step t the fraction
    (t - s) / (e - s) of the way, as PyTorch's; the first phase ends at step
    ``pct_start * total_steps - 1``, the last at ``total_steps - 1``. ``step()`` may reach step
    ``total_steps`` (the rate after the last training step) and no further (a KilnValueError).
    Two points differ from PyTorch, where its rate is an artefact: at step ``total_steps`` the
    rate is min_lr (and the momentum max_momentum; PyTorch extrapolates past the cycle's end,
    which gives a negative rate with "linear", which Kiln's optimizers refuse), and a phase of no
    length (``pct_start * total_steps == 1``, or pct_start 1) is at its end values (PyTorch
    divides by zero).

    ``cycle_momentum`` is True by default, as in PyTorch: it turns the momentum of an SGD built
    without one on (0.95 at step 0), whose buffers a jitted step cannot make (a KilnValueError
    until one eager step has made them; see kiln.optim.SGD); pass ``cycle_momentum=False`` to
    keep the optimizer's own momentum.
    """

    chainable = False  # PyTorch's sets the rate of the cycle whatever the rate was

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start=0.3, anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85,
                 max_momentum=0.95, div_factor=25.0, final_div_factor=1e4, three_phase=False):
        name = "OneCycleLR"
        _check_optimizer(name, optimizer)
        if total_steps is not None:
            self.total_steps = checked_int(name, "total_steps", total_steps, 1)
        elif epochs is not None and steps_per_epoch is not None:
            self.total_steps = (checked_int(name, "epochs", epochs, 1)
                                * checked_int(name, "steps_per_epoch", steps_per_epoch, 1))
        else:
            raise KilnValueError("OneCycleLR: expected total_steps, or both epochs and "
                                 "steps_per_epoch, to give the length of the cycle")
        _check_between(name, "pct_start", pct_start, 0.0, 1.0)
        if anneal_strategy not in ("cos", "linear"):
            raise KilnValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got "
                                 f"{anneal_strategy!r}")
        for arg, value in (("div_factor", div_factor), ("final_div_factor", final_div_factor)):
            check_number(name, arg, value)
            if not value > 0:
                raise KilnValueError(f"OneCycleLR: {arg} must be > 0, got {value}")
        max_lrs = _per_group(name, "max_lr", max_lr, optimizer, 0.0)
        self.cycle_momentum = cycle_momentum
        momenta = (self._checked_momenta(optimizer, base_momentum, max_momentum)
                   if cycle_momentum else [])
        rise_end = pct_start * self.total_steps - 1
        # (the step the phase ends at, the group keys of its start and end rates), and the keys
        # of its start and end momenta
        if three_phase:
            self.phases = [(rise_end, "initial_lr", "max_lr"),
                           (2 * pct_start * self.total_steps - 2, "max_lr", "initial_lr"),
                           (self.total_steps - 1, "initial_lr", "min_lr")]
            self.momentum_phases = [("max_momentum", "base_momentum"),
                                    ("base_momentum", "max_momentum"),
                                    ("max_momentum", "max_momentum")]
        else:
            self.phases = [(rise_end, "initial_lr", "max_lr"),
                           (self.total_steps - 1, "max_lr", "min_lr")]
            self.momentum_phases = [("max_momentum", "base_momentum"),
                                    ("base_momentum", "max_momentum")]
        self.anneal_strategy = anneal_strategy
        for group, peak in zip(optimizer.param_groups, max_lrs):
            group["initial_lr"] = peak / div_factor
            group["max_lr"] = peak
            group["min_lr"] = group["initial_lr"] / final_div_factor
        for group, (base, peak) in zip(optimizer.param_groups, momenta):
            group["base_momentum"] = base
            group["max_momentum"] = peak
        super().__init__(optimizer)

    def _anneal(self, start, end, fraction):
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * fraction) + 1)
        return (end - start) * fraction + start

    def _cycled(self, t, momentum=False):
        """Each group's rate at step ``t`` (with ``momentum``, its momentum instead)."""
        values = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, (end, start_key, end_key) in enumerate(self.phases):
                if t <= end or i == len(self.phases) - 1:
                    if momentum:
                        start_key, end_key = self.momentum_phases[i]
                    fraction = min((t - start) / (end - start), 1.0) if end != start else 1.0
                    values.append(self._anneal(group[start_key], group[end_key], fraction))
                    break
                start = end
        return values

    def lrs_at(self, t):
        if t > self.total_steps:
            raise KilnValueError(f"OneCycleLR: cannot step to step {t}: the cycle has "
                                 f"total_steps={self.total_steps}")
        return self._cycled(t)

    def momenta_at(self, t):
        return self._cycled(t, momentum=True)


class CyclicLR(_CyclesMomentum):
    """CyclicLR(optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None,
    mode="triangular", gamma=1.0, scale_fn=None, scale_mode="cycle", cycle_momentum=True,
    base_momentum=0.8, max_momentum=0.9): the cyclical learning rate (Smith, 2017), as PyTorch's.
    Each cycle rises from ``base_lr`` to ``max_lr`` over ``step_size_up`` steps and falls back
    over ``step_size_down`` (default: as many; both numbers > 0, the latter >= 0); the
    amplitude ``max_lr - base_lr`` (each a number >= 0 or a list of one per group) is scaled by
    the cycle's factor: 1 ("triangular"), halved each cycle ("triangular2", 1 / 2 ** (cycle - 1)),
    or ``gamma ** t`` per step ("exp_range"); a ``scale_fn(x)`` given instead takes the cycle
    number (``scale_mode="cycle"``) or the step (``"iterations"``). The rates are set from
    ``base_lr`` at construction, as PyTorch does. With ``cycle_momentum`` the momentum moves
    inversely, from ``max_momentum`` at the cycle's start to ``base_momentum`` at its peak (see
    OneCycleLR). ``state_dict()`` leaves ``scale_fn`` out (code is not saved, as PyTorch)."""

    chainable = False  # PyTorch's sets the cycle's rate whatever the rate was

    _SCALES = {"triangular": (lambda x: 1.0, "cycle"),
               "triangular2": (lambda x: 1 / (2.0 ** (x - 1)), "cycle"),
               "exp_range": (None, "iterations")}  # gamma ** x

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None,
                 mode="triangular", gamma=1.0, scale_fn=None, scale_mode="cycle",
                 cycle_momentum=True, base_momentum=0.8, max_momentum=0.9):
        name = "CyclicLR"
        _check_optimizer(name, optimizer)
        base_lrs = _per_group(name, "base_lr", base_lr, optimizer, 0.0)
        self.max_lrs = _per_group(name, "max_lr", max_lr, optimizer, 0.0)
        check_number(name, "step_size_up", step_size_up)
        if not step_size_up > 0:
            raise KilnValueError(f"CyclicLR: step_size_up must be > 0, got {step_size_up}")
        if step_size_down is None:
            step_size_down = step_size_up
        check_number(name, "step_size_down", step_size_down, 0.0)
        self.total_size = float(step_size_up) + float(step_size_down)
        self.step_ratio = float(step_size_up) / self.total_size
        if scale_fn is None:
            if mode not in self._SCALES:
                raise KilnValueError(f"CyclicLR: mode must be 'triangular', 'triangular2' or "
                                     f"'exp_range' (or give a scale_fn), got {mode!r}")
            scale_mode = self._SCALES[mode][1]
        elif not callable(scale_fn):
            raise KilnTypeError(f"CyclicLR: scale_fn must be a callable or None, got "
                                f"{type(scale_fn).__name__}")
        elif scale_mode not in ("cycle", "iterations"):
            raise KilnValueError(f"CyclicLR: scale_mode must be 'cycle' or 'iterations', got "
                                 f"{scale_mode!r}")
        check_number(name, "gamma", gamma, 0.0)
        self.mode, self.gamma, self.scale_fn, self.scale_mode = mode, gamma, scale_fn, scale_mode
        self.cycle_momentum = cycle_momentum
        momenta = (self._checked_momenta(optimizer, base_momentum, max_momentum)
                   if cycle_momentum else [])
        for group, lr in zip(optimizer.param_groups, base_lrs):
            group["lr"] = lr
        for group, (base, peak) in zip(optimizer.param_groups, momenta):
            group["base_momentum"] = base
            group["max_momentum"] = peak
        self._cycle_bases = base_lrs
        super().__init__(optimizer)
        self.base_lrs = base_lrs

    def _scale(self, t):
        """The fraction of the amplitude reached at step t, times the cycle's factor."""
        cycle = math.floor(1 + t / self.total_size)
        x = 1.0 + t / self.total_size - cycle
        rise = x / self.step_ratio if x <= self.step_ratio else (x - 1) / (self.step_ratio - 1)
        at = cycle if self.scale_mode == "cycle" else t
        if self.scale_fn is not None:
            factor = self.scale_fn(at)
        elif self.mode == "exp_range":
            factor = self.gamma ** at
        else:
            factor = self._SCALES[self.mode][0](at)
        return rise * factor

    def lrs_at(self, t):
        scale = self._scale(t)
        return [base + (peak - base) * scale for base, peak in zip(self._cycle_bases,
                                                                   self.max_lrs)]

    def momenta_at(self, t):
        scale = self._scale(t)
        return [group["max_momentum"] - (group["max_momentum"] - group["base_momentum"]) * scale
                for group in self.optimizer.param_groups]

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "scale_fn")}


class ReduceLROnPlateau(LRScheduler):
    """ReduceLROnPlateau(optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4,
    threshold_mode="rel", cooldown=0, min_lr=0, eps=1e-8): lowers the rates when a metric stops
    improving, as PyTorch's. ``step(metrics)`` takes the metric (a number or a one-element
    tensor) once per epoch.

    - ``mode``: "min" (the metric should fall, as a loss) or "max" (rise, as an accuracy).
    - ``threshold`` (>= 0) and ``threshold_mode``: a metric improves on the best so far when it
      is below ``best * (1 - threshold)`` ("rel") or ``best - threshold`` ("abs"); in "max"
      mode above ``best * (1 + threshold)`` or ``best + threshold``. The first metric always
      improves; NaN never does.
    - ``patience`` (an int >= 0): after more than ``patience`` steps in a row without
      improvement, each rate becomes ``max(lr * factor, min_lr)`` (``factor`` in [0, 1)), unless
      that lowers it by ``eps`` (>= 0) or less, and the count restarts.
    - ``cooldown`` (an int >= 0): steps after a reduction during which no step counts as bad.
    - ``min_lr``: a number >= 0, or a list of one per parameter group.

    Unlike the other schedulers it sets no rate when constructed, and ``step`` cannot run
    inside a ``kiln.jit`` function (a KilnValueError: it would run once, while tracing).
    """

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0.0, eps=1e-8):
        name = "ReduceLROnPlateau"
        _check_optimizer(name, optimizer)
        if mode not in ("min", "max"):
            raise KilnValueError(f"ReduceLROnPlateau: mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise KilnValueError(f"ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs', got "
                                 f"{threshold_mode!r}")
        check_number(name, "factor", factor, 0.0)
        if not factor < 1.0:
            raise KilnValueError(f"ReduceLROnPlateau: factor must be < 1 (it multiplies the "
                                 f"rate to lower it), got {factor}")
        check_number(name, "threshold", threshold, 0.0)
        check_number(name, "eps", eps, 0.0)
        self.patience = checked_int(name, "patience", patience, 0)
        self.cooldown = checked_int(name, "cooldown", cooldown, 0)
        self.min_lrs = _per_group(name, "min_lr", min_lr, optimizer, 0.0)
        # A single min_lr also covers groups added later, as in PyTorch.
        self.default_min_lr = None if isinstance(min_lr, (list, tuple)) else min_lr
        # Not LRScheduler.__init__: it would set the rates of a step 0, and there is no schedule.
        self.optimizer = optimizer
        self.mode = mode
        self.factor = factor
        self.threshold = threshold
        self.threshold_mode = threshold_mode
        self.eps = eps
        self.last_epoch = 0
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = 0
        self.cooldown_counter = 0
        self._last_lr = [group["lr"] for group in optimizer.param_groups]

    def _is_better(self, value, best):
        relative = self.threshold_mode == "rel"
        if self.mode == "min":
            return value < (best * (1 - self.threshold) if relative else best - self.threshold)
        return value > (best * (1 + self.threshold) if relative else best + self.threshold)

    def _reduced(self, lrs):
        min_lrs = self.min_lrs
        if len(min_lrs) != len(lrs):
            if self.default_min_lr is None:
                raise KilnValueError(f"ReduceLROnPlateau: the optimizer has {len(lrs)} parameter "
                                     f"groups, but min_lr was given for {len(min_lrs)} (a group "
                                     f"was added since); set the scheduler's min_lrs to a list "
                                     f"of one per group")
            min_lrs = [self.default_min_lr] * len(lrs)
        new = []
        for lr, floor in zip(lrs, min_lrs):
            lower = max(lr * self.factor, floor)
            new.append(lower if lr - lower > self.eps else lr)
        return new, min_lrs

    def step(self, metrics):
        """One epoch's ``metrics`` (a number or a one-element tensor): counts it as an
        improvement or not, and lowers the rates after more than ``patience`` bad steps."""
        if _C.jit.is_tracing():
            raise KilnValueError("ReduceLROnPlateau: step() cannot run inside a kiln.jit "
                                 "function (it would run once, while tracing, not at each "
                                 "call); call it between calls with the metric")
        if isinstance(metrics, bool) or not isinstance(metrics, (numbers.Real, _C.Tensor)):
            raise KilnTypeError(f"ReduceLROnPlateau.step: metrics must be a number or a "
                                f"one-element tensor, got {type(metrics).__name__}")
        current = float(metrics)
        best, bad, cooldown = self.best, self.num_bad_epochs, self.cooldown_counter
        if self._is_better(current, best):
            best, bad = current, 0
        else:
            bad += 1
        if cooldown > 0:
            cooldown -= 1
            bad = 0  # bad steps in the cooldown do not count
        lrs, min_lrs = [group["lr"] for group in self.optimizer.param_groups], self.min_lrs
        if bad > self.patience:
            lrs, min_lrs = self._reduced(lrs)
            cooldown, bad = self.cooldown, 0
        for group, lr in zip(self.optimizer.param_groups, lrs):
            if lr != group["lr"]:
                group["lr"] = lr
        self.best, self.num_bad_epochs, self.cooldown_counter = best, bad, cooldown
        self.min_lrs = min_lrs
        self.last_epoch += 1
        self._last_lr = lrs


class CosineAnnealingWarmRestarts(LRScheduler):
    """CosineAnnealingWarmRestarts(optimizer, T_0, T_mult=1, eta_min=0.0): SGDR's cosine with
    warm restarts (Loshchilov & Hutter), as PyTorch's: the rate is
    ``eta_min + (base - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2``, where ``T_i``, the length
    of the current cycle, is ``T_0`` for the first and ``T_mult`` times the previous one for each
    next, and ``T_cur`` counts the steps since the cycle began (0 at a restart: the base rate).
    ``T_0`` is an int >= 1, ``T_mult`` an int >= 1 and ``eta_min`` a number >= 0 (as
    CosineAnnealingLR's: a negative one would give negative rates).

    ``step(epoch)`` also takes a (fractional) epoch >= 0, as PyTorch's, to follow the schedule
    within an epoch, ``sched.step(epoch + i / batches)``: it places ``epoch`` in its cycle, and a
    later ``step()`` goes on one from there (``step(2.5)`` then ``step()`` is ``step(3.5)``).
    ``last_epoch`` is ``floor(epoch)``; ``T_cur`` and ``T_i`` are attributes, saved by
    ``state_dict()``. PyTorch finds the cycle of an epoch with a floating-point logarithm, which
    at some restarts (T_0=1, T_mult=3, epoch 121) yields the end of the previous cycle, eta_min;
    here it is found exactly, so every restart gives the base rate."""

    chainable = False  # PyTorch's sets the rate from the base rate whatever the rate was

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0):  # noqa: N803
        name = "CosineAnnealingWarmRestarts"
        self.T_0 = checked_int(name, "T_0", T_0, 1)
        self.T_mult = checked_int(name, "T_mult", T_mult, 1)
        check_number(name, "eta_min", eta_min, 0.0)
        self.eta_min = eta_min
        self.T_i = self.T_0
        self.T_cur = -1
        super().__init__(optimizer)

    def _cycle_at(self, epoch):
        """(T_cur, T_i) at ``epoch``: where it lies in its cycle, and that cycle's length."""
        if self.T_mult == 1:
            return epoch % self.T_0, self.T_0
        start, length = 0, self.T_0
        while epoch >= start + length:  # exact, where PyTorch's logarithm rounds
            start, length = start + length, length * self.T_mult
        return epoch - start, length

    def step(self, epoch=None):
        """Advances the schedule one step, or with ``epoch`` (a number >= 0, possibly
        fractional) goes to that epoch, and sets each group's rate for it."""
        if epoch is None and self.last_epoch >= 0:
            epoch = self.last_epoch + 1
            t_cur, t_i = self.T_cur + 1, self.T_i
            if t_cur >= t_i:
                t_cur, t_i = t_cur % t_i, t_i * self.T_mult
        else:
            epoch = 0 if epoch is None else epoch
            check_number("CosineAnnealingWarmRestarts.step", "epoch", epoch, 0.0)
            if not math.isfinite(epoch):
                raise KilnValueError(f"CosineAnnealingWarmRestarts.step: expected a finite "
                                     f"epoch, got {epoch}")
            t_cur, t_i = self._cycle_at(epoch)
        cosine = (1 + math.cos(math.pi * t_cur / t_i)) / 2
        self._set_rates([self.eta_min + (base - self.eta_min) * cosine for base in self.base_lrs],
                        math.floor(epoch))
        self.T_cur, self.T_i = t_cur, t_i


# Last: the schedulers made of schedulers build on LRScheduler and ReduceLROnPlateau above.
from ._scheduler_sequences import ChainedScheduler, SequentialLR  # noqa: E402,F401
