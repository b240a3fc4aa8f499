"""SequentialLR and ChainedScheduler: schedulers made of other schedulers of one optimizer, as
PyTorch's (documented in kiln.optim.lr_scheduler, which exports them)."""

import bisect

from ..errors import KilnTypeError, KilnValueError
from .lr_scheduler import LRScheduler, ReduceLROnPlateau, _check_optimizer, _checked_milestones

__all__ = ["SequentialLR", "ChainedScheduler"]


def _checked_schedulers(owner, schedulers, optimizer, whole):
    """``schedulers`` (an iterable of at least one kiln scheduler, none a ReduceLROnPlateau,
    whose step takes a metric and cannot run in ``whole``) as a list, with their optimizer: the
    one given, which each must have, or for None the first scheduler's."""
    if isinstance(schedulers, (str, bytes)) or not hasattr(schedulers, "__iter__"):
        raise KilnTypeError(f"{owner}: schedulers must be a list of schedulers, got "
                            f"{type(schedulers).__name__} {schedulers!r}")
    schedulers = list(schedulers)
    if not schedulers:
        raise KilnValueError(f"{owner}: expected at least one scheduler, got none")
    for i, scheduler in enumerate(schedulers):
        if not isinstance(scheduler, LRScheduler):
            raise KilnTypeError(f"{owner}: expected schedulers[{i}] to be a kiln learning-rate "
                                f"scheduler, got {type(scheduler).__name__}")
        if isinstance(scheduler, ReduceLROnPlateau):
            raise KilnValueError(f"{owner}: schedulers[{i}] is a ReduceLROnPlateau, whose step "
                                 f"takes a metric; it cannot run in {whole}")
        optimizer = scheduler.optimizer if optimizer is None else optimizer
        if scheduler.optimizer is not optimizer:
            raise KilnValueError(f"{owner}: schedulers[{i}] ({type(scheduler).__name__}) sets the "
                                 f"rates of another optimizer than the one given; expected "
                                 f"every scheduler to be of the same optimizer")
    return schedulers, optimizer


class _OfSchedulers(LRScheduler):
    """Base of the schedulers made of schedulers (``_schedulers``), whose state dicts hold
    theirs."""

    def state_dict(self):
        """The scheduler's state, with its schedulers' state dicts under ``"_schedulers"``."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [scheduler.state_dict() for scheduler in self._schedulers]
        return state

    def _split_state(self, state_dict):
        """(``state_dict`` without its schedulers' states, their states), checked to hold one
        per scheduler."""
        state = dict(state_dict)
        saved = state.pop("_schedulers")
        if len(saved) != len(self._schedulers):
            raise KilnValueError(f"{type(self).__name__}.load_state_dict: the state holds "
                                 f"{len(saved)} schedulers' states, expected "
                                 f"{len(self._schedulers)}")
        return state, saved


class SequentialLR(_OfSchedulers):
    """SequentialLR(optimizer, schedulers, milestones): runs ``schedulers`` (schedulers of
    ``optimizer``, at least one) in turn, as PyTorch's: the first from step 0, and scheduler i
    from step ``milestones[i - 1]`` on, starting its own schedule at its step 0 there. The
    milestones are ints >= 0 in increasing order, one fewer than the schedulers.

        warmup = LinearLR(opt, start_factor=0.01, total_iters=100)
        decay = CosineAnnealingLR(opt, T_max=900)
        sched = SequentialLR(opt, [warmup, decay], milestones=[100])

    Construct the schedulers first, then this: each scheduler's constructor sets its rates of
    step 0, and this sets the first's (and sets each scheduler's ``last_epoch`` back by one, so
    that one not started yet is at -1, as in PyTorch). ReduceLROnPlateau, whose ``step`` takes
    a metric, is a KilnValueError, as in PyTorch. ``state_dict()`` holds the schedulers' state
    dicts (a list under ``"_schedulers"``), which ``load_state_dict`` restores into its
    schedulers."""

    def __init__(self, optimizer, schedulers, milestones):
        name = "SequentialLR"
        _check_optimizer(name, optimizer)
        schedulers, _ = _checked_schedulers(name, schedulers, optimizer, "a sequence")
        milestones = _checked_milestones(name, milestones)
        if len(milestones) != len(schedulers) - 1:
            raise KilnValueError(f"SequentialLR: expected {len(schedulers) - 1} milestones (one "
                                 f"fewer than the {len(schedulers)} schedulers), got "
                                 f"{len(milestones)}")
        # Not LRScheduler.__init__: the rates are the schedulers', with no base rates of its own.
        self.optimizer = optimizer
        self._schedulers = schedulers
        self._milestones = milestones
        # Undo the step 0 each scheduler's constructor took (as PyTorch does), so that one not
        # started yet is at step -1; the first starts now.
        for scheduler in schedulers:
            scheduler.last_epoch -= 1
        self.last_epoch = -1
        self._last_lr = []
        self.step()

    def step(self):
        """Advances one step: starts the next scheduler at its milestone, else steps the
        current one, which sets the rates."""
        t = self.last_epoch + 1
        index = bisect.bisect_right(self._milestones, t)
        scheduler = self._schedulers[index]
        if t == (self._milestones[index - 1] if index else 0):
            # PyTorch's step(0): the scheduler's schedule starts over at its step 0, setting its
            # own rates (not moving the ones it finds).
            previous = scheduler.last_epoch, scheduler._schedule_lr
            scheduler.last_epoch, scheduler._schedule_lr = -1, None
            try:
                scheduler.step()
            except BaseException:
                scheduler.last_epoch, scheduler._schedule_lr = previous  # a refused step: as was
                raise
        else:
            scheduler.step()
        self.last_epoch = t
        self._last_lr = scheduler.get_last_lr()

    def load_state_dict(self, state_dict):
        """Restores a ``state_dict()``, its schedulers' states included, and sets the
        optimizer's rates to the last ones."""
        state, saved = self._split_state(state_dict)
        self.__dict__.update(state)
        # Loading a scheduler sets its last rates: the running one goes last, so its rates stay.
        running = bisect.bisect_right(self._milestones, self.last_epoch)
        for i in sorted(range(len(saved)), key=lambda i: i == running):
            self._schedulers[i].load_state_dict(saved[i])


class ChainedScheduler(_OfSchedulers):
    """ChainedScheduler(schedulers, optimizer=None): applies every scheduler of ``schedulers``
    (at least one, all of ``optimizer``, or of the first's when it is None) at once, as
    PyTorch's: each ``step()`` calls every scheduler's ``step()`` in turn, each moving the rate
    the previous one set as its schedule moves (see "Schedulers stepped together" in the module's
    documentation), which is what calling their ``step()`` one after the other does without it.
    Constructing it steps none: the schedulers' constructors have set the rates of step 0 that
    way.

        decay = ExponentialLR(opt, gamma=0.9)
        drops = StepLR(opt, step_size=30, gamma=0.5)
        sched = ChainedScheduler([decay, drops])   # base * 0.9 ** t * 0.5 ** (t // 30)

    For the schedules that multiply the rate (StepLR, MultiStepLR, ExponentialLR, LinearLR,
    ConstantLR, PolynomialLR) the rate is the base rate times each schedule's factor, in any
    order; with the others it depends on the order, as in PyTorch. A ReduceLROnPlateau, whose
    step takes a metric, is a KilnValueError, as in PyTorch.

    ``get_last_lr()`` lists the rates after the last scheduler; each scheduler's own lists the
    rates it set. ``state_dict()`` holds the schedulers' state dicts (a list under
    ``"_schedulers"``), which ``load_state_dict`` restores into its schedulers before setting
    the chain's rates."""

    def __init__(self, schedulers, optimizer=None):
        name = "ChainedScheduler"
        if optimizer is not None:
            _check_optimizer(name, optimizer)
        schedulers, optimizer = _checked_schedulers(name, schedulers, optimizer, "a chain")
        # Not LRScheduler.__init__: the rates of step 0 are the schedulers', which have it.
        self.optimizer = optimizer
        self._schedulers = schedulers
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self._set_rates(self._rates(), 0)

    def _rates(self):
        return [group["lr"] for group in self.optimizer.param_groups]

    def step(self):
        """Advances every scheduler one step, in order."""
        for scheduler in self._schedulers:
            scheduler.step()
        self._set_rates(self._rates(), self.last_epoch + 1)

    def load_state_dict(self, state_dict):
        """Restores a ``state_dict()``, its schedulers' states included, and sets the
        optimizer's rates to the chained ones."""
        state, saved = self._split_state(state_dict)
        for scheduler, scheduler_state in zip(self._schedulers, saved):
            scheduler.load_state_dict(scheduler_state)
        super().load_state_dict(state)
