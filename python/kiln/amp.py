"""kiln.amp: automatic mixed precision, PyTorch's ``torch.autocast`` and ``torch.amp.GradScaler``
on the CPU.

    with kiln.autocast("cpu", dtype=kiln.bfloat16):
        logits = model(x)                      # its linear layers and convolutions in bfloat16
        loss = F.cross_entropy(logits, target)  # float32
    loss.backward()                            # float32 weights get float32 gradients

``autocast(device_type="cpu", dtype=None, enabled=True, cache_enabled=None)`` is a context
manager and a decorator (``kiln.autocast`` is this one). While it is on, on the calling thread,
each call of an op on the lower-precision list takes its float32 and 16-bit floating inputs in
``dtype`` (None: bfloat16, PyTorch's CPU default; float16 is allowed), and each call of an op on
the float32 list takes its 16-bit ones in float32; float64, integer and bool inputs, calls with
``out=``, and every other op are left alone (an elementwise op on a bfloat16 and a float32 tensor
promotes to float32, as always).

- The lower-precision list: the matrix products (``matmul``, ``@``, ``bmm``, ``mm``, ``linear``,
  ``addmm``), the convolutions (``conv1d`` / ``2d`` / ``3d`` and the transposed ones) and the
  LSTM step, so ``nn.Linear``, ``nn.Conv*d``, attention's products and ``nn.LSTM`` run in
  ``dtype`` (``nn.GRU`` projects in ``dtype`` and keeps its state in float32, as PyTorch's;
  ``scaled_dot_product_attention`` returns its inputs' dtype, where PyTorch's returns ``dtype``).
  Layers holding float32 parameters take the lower-precision outputs of others (``LayerNorm``,
  ``BatchNorm2d``: their ops promote to float32).
- The float32 list: the GRU step, ``cross_entropy``, ``nll_loss``, ``mse_loss``, ``prod`` and every
  kiln.linalg function but ``matmul``, ``vecdot`` and ``vector_norm`` (cholesky, lu, solve, lstsq,
  det, slogdet, qr, eigh, svd). Losses composed of elementwise ops (``l1_loss``, ``smooth_l1_loss``,
  the binary cross entropies, ...) run in their inputs' dtype.
- The casts are ops where the op is called: autograd differentiates them, so a float32 weight's
  gradient is float32, and ``backward`` computes in the dtypes the forward pass chose (autocast is
  off inside the gradient rules, whether or not backward is called inside the block).
- kiln.jit keys its graphs on the autocast state: a jitted function called inside and outside
  ``autocast`` runs two graphs, each with the casts of its trace.
- ``device_type`` must be "cpu" (Kiln runs on the CPU; "cuda" is a KilnValueError). PyTorch's
  ``cache_enabled`` (it keeps the casts of weights for the block) is accepted and has no effect:
  Kiln casts at each call.
- ``set_autocast_policy(op, policy)`` lists a registered op (a custom op too, by its PascalCase
  name) under "lower_precision" or "float32", or removes it (None); ``autocast_policy(op)`` says
  which list an op is on. ``is_autocast_enabled()`` and ``get_autocast_dtype()`` read the state.

``GradScaler`` keeps float16 gradients from underflowing to zero, as PyTorch's does:

    scaler = kiln.amp.GradScaler()             # PyTorch's GradScaler("cpu"), its defaults
    with kiln.autocast("cpu", dtype=kiln.float16):
        loss = F.cross_entropy(model(x), target)
    scaler.scale(loss).backward()              # the gradients of loss * scale
    scaler.unscale_(opt)                       # (optional) the true gradients, to clip them
    kiln.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)                           # opt.step(), skipped if a gradient is inf / NaN
    scaler.update()                            # the scale for the next iteration

``GradScaler(device="cpu", init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
growth_interval=2000, enabled=True)``: ``device`` must be "cpu" (as ``device_type`` above);
``init_scale`` a finite number > 0, ``growth_factor`` a finite number > 1, ``backoff_factor`` in
(0, 1) (KilnTypeError / KilnValueError, also from the setters and ``load_state_dict``).

- ``scale(outputs)``: ``outputs`` (a tensor, or lists and tuples of them, nested) times the
  scale, a float32 0-d tensor; Kiln's promotion makes a 16-bit output's product float32 where
  PyTorch's stays 16-bit (the gradients are the same). Anything else is a KilnTypeError.
- ``unscale_(optimizer)``: multiplies the ``.grad`` of the optimizer's parameters (its
  ``param_groups``) in place by 1 / scale (float64, rounded to float32, as PyTorch's), and notes
  whether any was inf or NaN, without a sync. Once per optimizer between updates, and not after
  ``step``; a float16 gradient is a KilnValueError, as in PyTorch (keep float32 parameters).
- ``step(optimizer, *args, **kwargs)``: ``unscale_`` unless called already, then
  ``optimizer.step(*args, **kwargs)`` and its result, or None without stepping if this
  optimizer's gradients held an inf or NaN (reading that flag is the iteration's one sync). Once
  per optimizer between updates; a closure is a KilnNotImplementedError, as in PyTorch.
- ``update(new_scale=None)``: the scale times ``backoff_factor`` if any optimizer's gradients
  held an inf or NaN since the last update, else times ``growth_factor`` after
  ``growth_interval`` such steps in a row (unless that overflows float32), each computed in
  float64 and rounded to float32 as PyTorch's (a growth interval set below the count grows at
  the next clean step, where PyTorch's waits for an inf to reset it); or ``new_scale`` (a
  positive number, or a floating tensor of one element that does not require grad), leaving the
  count as is.
- ``get_scale()`` (a float; before the first ``scale``, ``init_scale`` rounded to float32, which
  PyTorch's leaves unrounded until then), ``get_growth_factor()``, ``get_backoff_factor()``,
  ``get_growth_interval()`` and their setters, ``is_enabled()``; ``state_dict()`` (PyTorch's
  keys: scale, growth_factor, backoff_factor, growth_interval, _growth_tracker) and
  ``load_state_dict(d)``, which takes PyTorch's too and checks all of it before changing anything.
- Misuse that PyTorch asserts against is a KilnError saying what to call: ``unscale_``, ``step``
  or ``update`` before any ``scale``, ``unscale_`` or ``step`` twice, ``unscale_`` after
  ``step``, ``step`` with no gradient, ``update`` with no gradients checked (no ``step`` nor
  ``unscale_``).
- ``enabled=False``: ``scale`` returns its input, ``step`` calls ``optimizer.step``, ``unscale_``,
  ``update`` and ``load_state_dict`` do nothing, ``get_scale()`` is 1.0, ``state_dict()`` {}.

The scale tensor exists from the constructor on, so a ``kiln.jit`` function may call ``scale`` and
follows each update (``step`` reads a flag, so it runs outside such a function).
"""

import functools
import math

from . import _C, mint
from ._checks import checked_bool, checked_int
from .autograd import no_grad
from .errors import KilnError, KilnNotImplementedError, KilnTypeError, KilnValueError
from .optim.optimizer import check_number

__all__ = ["autocast", "is_autocast_enabled", "get_autocast_dtype", "set_autocast_policy",
           "autocast_policy", "GradScaler"]

_POLICIES = ("lower_precision", "float32", None)


def _check_device(owner, device_type, name="device_type"):
    if device_type != "cpu":
        raise KilnValueError(f"{owner}: expected {name} 'cpu' (Kiln runs on the CPU), got "
                             f"{device_type!r}")


class autocast:  # noqa: N801  (PyTorch's name)
    """autocast(device_type="cpu", dtype=None, enabled=True, cache_enabled=None): mixed precision
    for the block or the decorated function, on the calling thread (see the module
    documentation)."""

    def __init__(self, device_type="cpu", dtype=None, enabled=True, cache_enabled=None):
        _check_device("autocast", device_type)
        if not isinstance(enabled, bool):
            raise KilnTypeError(f"autocast: expected enabled to be a bool, got "
                                f"{type(enabled).__name__} {enabled!r}")
        if cache_enabled is not None and not isinstance(cache_enabled, bool):
            raise KilnTypeError(f"autocast: expected cache_enabled to be None or a bool, got "
                                f"{type(cache_enabled).__name__} {cache_enabled!r}")
        dtype = _C.dtype.bfloat16 if dtype is None else dtype
        if dtype not in (_C.dtype.bfloat16, _C.dtype.float16):
            raise KilnValueError(f"autocast: expected dtype kiln.bfloat16 or kiln.float16 (the "
                                 f"lower precision the matrix products and convolutions run in), "
                                 f"got {dtype!r}")
        self.device_type, self.fast_dtype, self._enabled = device_type, dtype, enabled
        self._previous = []  # a stack: the same object may be entered again inside itself

    def __enter__(self):
        self._previous.append(_C.autocast.set_state(self._enabled, self.fast_dtype))
        return self

    def __exit__(self, *exc_info):
        _C.autocast.set_state(*self._previous.pop())
        return False

    def __call__(self, fn):
        if not callable(fn):
            raise KilnTypeError(f"autocast: expected a function to decorate, got "
                                f"{type(fn).__name__}")

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device_type, self.fast_dtype, self._enabled):
                return fn(*args, **kwargs)

        return wrapper


def is_autocast_enabled(device_type="cpu"):
    """Whether autocast is on on the calling thread."""
    _check_device("is_autocast_enabled", device_type)
    return _C.autocast.state()[0]


def get_autocast_dtype(device_type="cpu"):
    """The dtype autocast uses on the calling thread (bfloat16 unless set)."""
    _check_device("get_autocast_dtype", device_type)
    return _C.autocast.state()[1]


def set_autocast_policy(op, policy):
    """Lists the op named ``op`` (PascalCase, as kiln.ops.list_ops() names it; a custom op's
    name too, before or after it is registered) under "lower_precision" or "float32", or removes
    it from the lists (None)."""
    if not isinstance(op, str) or not op:
        raise KilnTypeError(f"set_autocast_policy: expected an op name, got {op!r}")
    if policy not in _POLICIES:
        raise KilnValueError(f"set_autocast_policy: expected policy 'lower_precision', "
                             f"'float32' or None, got {policy!r}")
    _C.autocast.set_policy(op, policy)


def autocast_policy(op):
    """The list the op named ``op`` is on: "lower_precision", "float32" or None."""
    if not isinstance(op, str):
        raise KilnTypeError(f"autocast_policy: expected an op name, got {op!r}")
    return _C.autocast.policy(op)


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
        _check_device("GradScaler", device, "device")
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
