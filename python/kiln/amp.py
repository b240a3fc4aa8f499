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
  ``dtype`` (``nn.GRU`` projects in ``dtype`` and keeps its state in float32, as PyTorch's), as
  does ``scaled_dot_product_attention`` (its inputs rounded to ``dtype``, computed in float32).
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

from . import _C
from ._checks import check_cpu_device
from ._grad_scaler import GradScaler
from .errors import KilnTypeError, KilnValueError

__all__ = ["autocast", "is_autocast_enabled", "get_autocast_dtype", "set_autocast_policy",
           "autocast_policy", "GradScaler"]

_POLICIES = ("lower_precision", "float32", None)


class autocast:  # noqa: N801  (PyTorch's name)
    """autocast(device_type="cpu", dtype=None, enabled=True, cache_enabled=None): mixed precision
    for the block or the decorated function, on the calling thread (see the module
    documentation)."""

    def __init__(self, device_type="cpu", dtype=None, enabled=True, cache_enabled=None):
        check_cpu_device("autocast", device_type)
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
    check_cpu_device("is_autocast_enabled", device_type)
    return _C.autocast.state()[0]


def get_autocast_dtype(device_type="cpu"):
    """The dtype autocast uses on the calling thread (bfloat16 unless set)."""
    check_cpu_device("get_autocast_dtype", device_type)
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
