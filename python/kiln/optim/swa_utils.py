"""kiln.optim.swa_utils: averaged copies of a model (stochastic weight averaging and exponential
moving averages) and the SWA learning rate, as torch.optim.swa_utils.

    ema = AveragedModel(net, multi_avg_fn=get_ema_multi_avg_fn(0.999))
    for x, y in data:
        ...; opt.step()
        ema.update_parameters(net)        # ema = 0.999 * ema + 0.001 * net, per parameter
    y = ema(x)                            # calls the averaged copy

- ``AveragedModel(model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False)``: a
  cell holding a deep copy of ``model`` (``module``) and ``n_averaged``, an int64 buffer counting
  the updates (both in its state dict, PyTorch's keys). ``update_parameters(model)`` copies
  ``model``'s parameters at the first update, then averages them in: with ``multi_avg_fn(averaged,
  current, n_averaged)`` (lists of tensors, updated in place), ``avg_fn(averaged, current,
  n_averaged)`` (one tensor each, returning the new value), or, with neither, the running mean
  (SWA). With ``use_buffers`` the buffers are averaged too; without, they are copied from
  ``model`` (BatchNorm's running statistics follow the model's). At most one of ``avg_fn`` and
  ``multi_avg_fn`` (a KilnValueError). ``device`` must be the CPU or None. The updates run under
  no_grad and read ``n_averaged``, so call it between (jitted) training steps.
- ``get_ema_multi_avg_fn(decay=0.999)`` / ``get_ema_avg_fn(decay=0.999)``: the exponential
  moving average ``decay * averaged + (1 - decay) * current``; ``get_swa_multi_avg_fn()`` /
  ``get_swa_avg_fn()``: the running mean ``averaged + (current - averaged) / (n + 1)``.
- ``update_bn(loader, model, device=None)``: recomputes the running statistics of every
  BatchNorm in ``model`` from one pass over ``loader`` (each item a tensor, or a list / tuple
  whose first element is the input), as a cumulative average (momentum None), then restores the
  momenta and the training mode.
- ``SWALR(optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos")``: anneals each group's
  rate from its current value to ``swa_lr`` (a number or one per group, >= 0) over
  ``anneal_epochs`` steps (an int >= 0), "cos" or "linear", then keeps it, as PyTorch's (its
  step moves the rate it finds; see kiln.optim.lr_scheduler).
"""

import copy
import math

from .. import _C
from .._checks import checked_int
from .._device import check_usable
from ..autograd import no_grad
from ..errors import KilnTypeError, KilnValueError
from ..nn.cell import Cell
from ..nn.normalization import _BatchNorm
from .lr_scheduler import LRScheduler, _check_optimizer, _per_group

__all__ = ["AveragedModel", "SWALR", "get_ema_avg_fn", "get_ema_multi_avg_fn", "get_swa_avg_fn",
           "get_swa_multi_avg_fn", "update_bn"]

_mint = _C.mint


def get_ema_multi_avg_fn(decay=0.999):
    """The exponential moving average, over lists of tensors updated in place."""
    def ema_update(ema_params, current_params, num_averaged):
        with no_grad():
            for ema, current in zip(ema_params, current_params):
                ema.copy_(ema * decay + current * (1 - decay))
    return ema_update


def get_swa_multi_avg_fn():
    """The running mean, over lists of tensors updated in place."""
    def swa_update(averaged_params, current_params, num_averaged):
        with no_grad():
            for averaged, current in zip(averaged_params, current_params):
                averaged.copy_(averaged + (current - averaged) / (num_averaged + 1))
    return swa_update


def get_ema_avg_fn(decay=0.999):
    """The exponential moving average of one tensor: returns the new average."""
    def ema_update(ema_param, current_param, num_averaged):
        with no_grad():
            return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn():
    """The running mean of one tensor: returns the new average."""
    def swa_update(averaged_param, current_param, num_averaged):
        with no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


class AveragedModel(Cell):
    """An averaged copy of a model (see the module's documentation)."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if not isinstance(model, Cell):
            raise KilnTypeError(f"AveragedModel: model must be a kiln.nn.Cell, got "
                                f"{type(model).__name__}")
        if avg_fn is not None and multi_avg_fn is not None:
            raise KilnValueError("AveragedModel: give avg_fn or multi_avg_fn, not both")
        if device is not None:
            check_usable("AveragedModel", device)
        self.module = copy.deepcopy(model)
        self.register_buffer("n_averaged", _mint.zeros((), dtype=_C.dtype.int64))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _averaged(self, model):
        if self.use_buffers:
            return (list(self.module.parameters()) + list(self.module.buffers()),
                    list(model.parameters()) + list(model.buffers()))
        return list(self.module.parameters()), list(model.parameters())

    def update_parameters(self, model):
        """Averages ``model``'s parameters (and with ``use_buffers`` its buffers) into this
        copy's; the first update copies them."""
        mine, theirs = self._averaged(model)
        if len(mine) != len(theirs):
            raise KilnValueError(f"AveragedModel.update_parameters: the model has {len(theirs)} "
                                 f"parameters{' and buffers' if self.use_buffers else ''}, the "
                                 f"averaged copy {len(mine)}: pass the model it was made from")
        mine = [p.detach() for p in mine]
        theirs = [p.detach() for p in theirs]
        count = self.n_averaged.item()
        with no_grad():
            if count == 0:
                for averaged, current in zip(mine, theirs):
                    averaged.copy_(current)
            elif self.avg_fn is not None:
                for averaged, current in zip(mine, theirs):
                    averaged.copy_(self.avg_fn(averaged, current, self.n_averaged))
            else:
                average = self.multi_avg_fn or get_swa_multi_avg_fn()
                floating = [(a, c) for a, c in zip(mine, theirs) if a.dtype.is_floating_point]
                # A running mean of an integer buffer (num_batches_tracked) in its own dtype.
                integral = [(a, c) for a, c in zip(mine, theirs)
                            if not a.dtype.is_floating_point]
                for pairs in (floating, integral):
                    if pairs:
                        average([a for a, _ in pairs], [c for _, c in pairs], self.n_averaged)
            if not self.use_buffers:
                for averaged, current in zip(self.module.buffers(), model.buffers()):
                    averaged.copy_(current.detach())
            self.n_averaged += 1


def update_bn(loader, model, device=None):
    """Recomputes the running statistics of ``model``'s BatchNorms from one pass over
    ``loader`` (see the module's documentation)."""
    if device is not None:
        check_usable("update_bn", device)
    momenta = {}
    for cell in model.modules():
        if isinstance(cell, _BatchNorm) and cell.track_running_stats:
            cell.reset_running_stats()
            momenta[cell] = cell.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for cell in momenta:
        cell.momentum = None
    try:
        with no_grad():
            for batch in loader:
                model(batch[0] if isinstance(batch, (list, tuple)) else batch)
    finally:
        for cell, momentum in momenta.items():
            cell.momentum = momentum
        model.train(was_training)


class SWALR(LRScheduler):
    """SWALR(optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos"): the rate annealed to
    ``swa_lr`` (see the module's documentation)."""

    chainable = False  # lrs_at moves the rate it finds itself

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos"):
        _check_optimizer("SWALR", optimizer)
        for group, lr in zip(optimizer.param_groups,
                             _per_group("SWALR", "swa_lr", swa_lr, optimizer, 0.0)):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise KilnValueError(f"SWALR: anneal_strategy must be 'cos' or 'linear', got "
                                 f"{anneal_strategy!r}")
        self.anneal_strategy = anneal_strategy
        self.anneal_epochs = checked_int("SWALR", "anneal_epochs", anneal_epochs, 0)
        super().__init__(optimizer)

    def _anneal(self, t):
        return (1 - math.cos(math.pi * t)) / 2 if self.anneal_strategy == "cos" else t

    def lrs_at(self, step):
        # PyTorch's: the rate before annealing, recovered from the current one, moved on by
        # this step's fraction of the way to swa_lr.
        if self.anneal_epochs == 0:
            step = max(1, step)
        span = max(1, self.anneal_epochs)
        before = self._anneal(max(0.0, min(1.0, (step - 1) / span)))
        alpha = self._anneal(max(0.0, min(1.0, step / span)))
        lrs = []
        for group in self.optimizer.param_groups:
            swa_lr = group["swa_lr"]
            start = swa_lr if before == 1 else (group["lr"] - before * swa_lr) / (1 - before)
            lrs.append(swa_lr * alpha + start * (1 - alpha))
        return lrs
