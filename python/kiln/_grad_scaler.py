"""GradScaler, kiln.amp's gradient scaling for float16 autocast (PyTorch's torch.amp.GradScaler);
its API is documented with kiln.amp's (python/kiln/amp.py)."""

import math

from . import _C, mint
from ._checks import check_cpu_device, checked_bool, checked_int
from .autograd import no_grad
from .errors import KilnError, KilnNotImplementedError, KilnTypeError, KilnValueError
from .optim.optimizer import check_number

__all__ = ["GradScaler"]

# GradScaler's numeric settings: what each must be, and the test of its value as a float.
_POSITIVE = ("to be a finite number > 0", lambda v: 0.0 < v < math.inf)
_RANGES = {"init_scale": _POSITIVE, "scale": _POSITIVE, "new_scale": _POSITIVE,
           "growth_factor": ("to be a finite number > 1", lambda v: 1.0 < v < math.inf),
           "backoff_factor": ("to be in (0, 1)", lambda v: 0.0 < v < 1.0)}
# Its counts and their lower bounds.
_COUNTS = {"growth_interval": 1, "_growth_tracker": 0}
# What state_dict() holds (PyTorch's keys).
_STATE_KEYS = ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")

# Where an optimizer is in the iteration between two update() calls (PyTorch's OptState).
_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"


def _checked_setting(owner, name, value):
    """``value`` of the GradScaler setting ``name``, checked (a KilnTypeError for no number, a
    KilnValueError out of range): a float, or an int for the counts."""
    if name in _COUNTS:
        return checked_int(owner, name, value, low=_COUNTS[name])
    check_number(owner, name, value)
    wanted, valid = _RANGES[name]
    if not valid(float(value)):
        raise KilnValueError(f"{owner}: expected {name} {wanted}, got {value}")
    return float(value)


def _gradients(owner, optimizer):
    """The ``.grad`` of each parameter of ``optimizer`` that has one."""
    grads = []
    for i, group in enumerate(optimizer.param_groups):
        for j, param in enumerate(group["params"]):
            grad = param.grad
            if grad is None:
                continue
            where = f"parameter {j} of param_groups[{i}]"
            if not isinstance(grad, _C.Tensor):
                raise KilnTypeError(f"{owner}: the gradient of {where} is a "
                                    f"{type(grad).__name__}, expected a kiln tensor")
            if grad.dtype == _C.dtype.float16:
                # PyTorch refuses them too: a float16 gradient that overflowed while scaled is
                # lost, and one unscaled in place underflows, which scaling was meant to prevent.
                raise KilnValueError(f"{owner}: the gradient of {where} is float16, expected "
                                     f"float32 (or bfloat16 / float64): keep the parameters in "
                                     f"float32 and let kiln.autocast run the ops in float16")
            grads.append(grad)
    return grads


class GradScaler:
    """GradScaler(device="cpu", init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
    growth_interval=2000, enabled=True): PyTorch's gradient scaling for float16 autocast (see the
    module documentation)."""

    def __init__(self, device="cpu", init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        check_cpu_device("GradScaler", device, "device")
        self._enabled = checked_bool("GradScaler", "enabled", enabled)
        init_scale = _checked_setting("GradScaler", "init_scale", init_scale)
        self._growth_factor = _checked_setting("GradScaler", "growth_factor", growth_factor)
        self._backoff_factor = _checked_setting("GradScaler", "backoff_factor", backoff_factor)
        self._growth_interval = _checked_setting("GradScaler", "growth_interval",
                                                 growth_interval)
        # Made now, not at the first scale() as PyTorch's: one made while kiln.jit traces would
        # be a value of that trace, and a jitted scale() reads this one at each call.
        self._scale = (mint.full((), init_scale, dtype=_C.dtype.float32) if self._enabled
                       else None)
        self._scaled = False  # whether scale() has run: step() and update() need scaled grads
        self._growth_tracker = 0  # consecutive updates without an inf / NaN gradient
        # id(optimizer) -> {"stage": _READY / _UNSCALED / _STEPPED, "finite": a 0-d bool tensor,
        # whether its gradients were all finite, or None when it had none}; cleared by update().
        self._per_optimizer = {}

    # ----------------------------------------------------------------------------------------
    # The iteration

    def scale(self, outputs):
        """``outputs`` (a tensor, or lists and tuples of them, nested) times the scale."""
        if not self._enabled:
            return outputs
        return self._scaled_copy(outputs)

    def _scaled_copy(self, value):
        if isinstance(value, _C.Tensor):
            self._scaled = True
            return value * self._scale
        if isinstance(value, (list, tuple)):
            items = [self._scaled_copy(item) for item in value]
            return value._make(items) if hasattr(value, "_make") else type(value)(items)
        raise KilnTypeError(f"GradScaler.scale: expected a kiln tensor or a (nested) list or "
                            f"tuple of them, got {type(value).__name__}")

    def unscale_(self, optimizer):
        """Divides the gradients of ``optimizer``'s parameters by the scale, in place, noting
        whether any is inf or NaN; once per optimizer between updates, before ``step``."""
        if not self._enabled:
            return
        self._unscale("unscale_", optimizer, self._optimizer_state("unscale_", optimizer))

    def _unscale(self, method, optimizer, state):
        owner = f"GradScaler.{method}"
        if state["stage"] == _UNSCALED:
            raise KilnError(f"{owner}: unscale_() has already been called on this optimizer "
                            f"since the last update(); call it once per optimizer per iteration")
        if state["stage"] == _STEPPED:
            raise KilnError(f"{owner}: unscale_() called after step() on this optimizer; call "
                            f"it before step() (which unscales by itself), and update() to end "
                            f"the iteration")
        grads = _gradients(owner, optimizer)
        with no_grad():
            # The check reads the gradients as backward left them: one finite before unscaling
            # could overflow after it (a scale below 1).
            state["finite"] = (mint.stack([mint.isfinite(g).all() for g in grads]).all()
                               if grads else None)
            # 1 / scale in float64, rounded to float32, as PyTorch's.
            inverse = (1.0 / self._scale.to(_C.dtype.float64)).to(_C.dtype.float32)
            for grad in grads:
                mint.mul(grad, inverse, out=grad)
        state["stage"] = _UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """``unscale_(optimizer)`` unless done already, then ``optimizer.step(*args, **kwargs)``
        and its result, or None without stepping when a gradient is inf or NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs or (args and callable(args[0])):
            raise KilnNotImplementedError("GradScaler.step: a closure is not supported while the "
                                          "scaler is enabled (as in PyTorch): compute the loss, "
                                          "call scaler.scale(loss).backward(), then "
                                          "scaler.step(optimizer) without one")
        state = self._optimizer_state("step", optimizer)
        if state["stage"] == _STEPPED:
            raise KilnError("GradScaler.step: step() has already been called on this optimizer "
                            "since the last update(); call scaler.update() to end the iteration")
        if state["stage"] == _READY:
            self._unscale("step", optimizer, state)
        if state["finite"] is None:
            raise KilnError("GradScaler.step: no parameter of this optimizer has a gradient "
                            "(every .grad is None), so there is nothing to check; call "
                            "scaler.scale(loss).backward() before step()")
        result = optimizer.step(*args, **kwargs) if bool(state["finite"]) else None
        state["stage"] = _STEPPED
        return result

    def update(self, new_scale=None):
        """The scale for the next iteration: backed off after an inf or NaN gradient, grown after
        ``growth_interval`` clean steps, or ``new_scale``."""
        if not self._enabled:
            return
        self._check_scaled("update")
        if new_scale is not None:
            value = self._checked_new_scale(new_scale)
            with no_grad():
                self._scale[...] = value
        else:
            flags = [state["finite"] for state in self._per_optimizer.values()
                     if state["finite"] is not None]
            if not flags:
                raise KilnError("GradScaler.update: no gradients were checked since the last "
                                "update(); call scaler.step(optimizer) (or unscale_) after "
                                "scaler.scale(loss).backward() first")
            self._update_scale(found_inf=not all(bool(flag) for flag in flags))
        self._per_optimizer = {}

    def _update_scale(self, found_inf):
        # PyTorch's _amp_update_scale_: the products in float64, rounded to the float32 scale.
        with no_grad():
            wide = self._scale.to(_C.dtype.float64)
            if found_inf:
                self._scale[...] = wide * self._backoff_factor
                self._growth_tracker = 0
            elif self._growth_tracker + 1 >= self._growth_interval:
                # >=, not PyTorch's ==: an interval lowered below the count still grows.
                grown = (wide * self._growth_factor).to(_C.dtype.float32)
                self._scale[...] = mint.where(mint.isfinite(grown), grown, self._scale)
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1

    def _checked_new_scale(self, new_scale):
        owner = "GradScaler.update"
        if not isinstance(new_scale, _C.Tensor):
            return _checked_setting(owner, "new_scale", new_scale)
        if new_scale.numel() != 1 or new_scale.requires_grad or \
                not new_scale.dtype.is_floating_point:
            raise KilnValueError(f"{owner}: expected new_scale to be a number or a floating "
                                 f"tensor of one element that does not require grad, got a "
                                 f"{new_scale.dtype.name}{list(new_scale.shape)} tensor"
                                 f"{' requiring grad' if new_scale.requires_grad else ''}")
        return new_scale.reshape(())

    def _check_scaled(self, method):
        if not self._scaled:
            raise KilnError(f"GradScaler.{method}: scale() has not been called yet, so no "
                            f"gradient is scaled; call scaler.scale(loss).backward() before "
                            f"{method}()")

    def _optimizer_state(self, method, optimizer):
        if not isinstance(getattr(optimizer, "param_groups", None), (list, tuple)) or \
                not callable(getattr(optimizer, "step", None)):
            raise KilnTypeError(f"GradScaler.{method}: expected an optimizer (with param_groups "
                                f"and step(), as kiln.optim's), got {type(optimizer).__name__}")
        self._check_scaled(method)
        return self._per_optimizer.setdefault(id(optimizer), {"stage": _READY, "finite": None})

    # ----------------------------------------------------------------------------------------
    # Settings and checkpoints

    def get_scale(self):
        """The scale, a float (1.0 when disabled); reading it syncs."""
        return float(self._scale) if self._enabled else 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = _checked_setting("GradScaler.set_growth_factor", "growth_factor",
                                               new_factor)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = _checked_setting("GradScaler.set_backoff_factor",
                                                "backoff_factor", new_factor)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = _checked_setting("GradScaler.set_growth_interval",
                                                 "growth_interval", new_interval)

    def is_enabled(self):
        return self._enabled

    def state_dict(self):
        """PyTorch's: scale, growth_factor, backoff_factor, growth_interval and _growth_tracker
        (Python numbers); {} when disabled."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        """Restores a ``state_dict()`` (Kiln's or PyTorch's), all of it checked before anything
        changes; does nothing when disabled."""
        if not self._enabled:
            return
        owner = "GradScaler.load_state_dict"
        if not isinstance(state_dict, dict):
            raise KilnTypeError(f"{owner}: expected a dict (what state_dict() gives), got "
                                f"{type(state_dict).__name__}")
        if not state_dict:
            raise KilnValueError(f"{owner}: the state dict is empty, as a disabled GradScaler's "
                                 f"is; expected the keys {list(_STATE_KEYS)}")
        if set(state_dict) != set(_STATE_KEYS):
            raise KilnValueError(f"{owner}: expected the keys {list(_STATE_KEYS)}, got "
                                 f"{sorted(state_dict, key=str)}")
        values = {key: _checked_setting(owner, key, state_dict[key]) for key in _STATE_KEYS}
        with no_grad():
            self._scale[...] = values["scale"]
        self._growth_factor = values["growth_factor"]
        self._backoff_factor = values["backoff_factor"]
        self._growth_interval = values["growth_interval"]
        self._growth_tracker = values["_growth_tracker"]
