"""Argument checks that kiln's Python modules share (private): integers given where the C++ API
takes an int, refused by a typed error naming the function and the argument rather than by
nanobind's untyped "incompatible function arguments", dimensions wrapped and checked with the
words of the C++ ``wrap_dim`` (src/core/shape.cc), and a layer's inputs checked against the dtype
of its parameters."""

import operator

from . import _C
from .errors import DTypeError, KilnIndexError, KilnTypeError, KilnValueError


def checked_bool(owner, name, value):
    """``value`` if it is a bool, else a KilnTypeError naming ``owner`` and the argument (1 or
    None is no flag: PyTorch's flags are bools)."""
    if not isinstance(value, bool):
        raise KilnTypeError(f"{owner}: {name} must be a bool, got {type(value).__name__} "
                            f"{value!r}")
    return value


def as_int(value):
    """``value`` as a Python int when it is an int or has ``__index__`` (a NumPy integer, a
    one-element integer tensor), else None. Never a bool or a bool tensor: True as a size, a rank
    or a count is a mistake, not 1."""
    if isinstance(value, bool):
        return None
    if isinstance(value, _C.Tensor):
        # Read only an integer tensor of one element: under kiln.jit that read raises the
        # tracer's "data-dependent" error itself, which a caught TypeError would hide.
        if value.dtype.is_floating_point or value.dtype == _C.dtype.bool or value.numel() != 1:
            return None
        return operator.index(value)
    try:
        return operator.index(value)
    except TypeError:
        return None


def checked_int(owner, name, value, low=None, high=None):
    """``value`` as an int in [low, high] (a bound of None: none): a KilnTypeError saying
    "``owner``: ``name`` must be an int" when it is no int, a KilnValueError when it is out of
    range."""
    number = as_int(value)
    if number is None:
        raise KilnTypeError(f"{owner}: {name} must be an int, got {type(value).__name__} "
                            f"{value!r}")
    if (low is not None and number < low) or (high is not None and number > high):
        bounds = (f"in [{low}, {high}]" if low is not None and high is not None
                  else f"at least {low}" if low is not None else f"at most {high}")
        raise KilnValueError(f"{owner}: {name} must be {bounds}, got {number}")
    return number


def wrap_dim(owner, name, dim, ndim, scalar_as_1d=True):
    """``dim`` (an int, negative from the end; callers check its type with their own words) as a
    non-negative dimension of an ``ndim``-d tensor; out of range a KilnIndexError naming
    ``owner``, ``name`` and the valid range, worded as the C++ ``wrap_dim``. With
    ``scalar_as_1d`` a 0-d tensor takes dim 0 and -1, as a reduction or a flip treats it as 1-d
    (PyTorch's and the C++ rule); without, it has none, for an op that reads the dimension's
    size."""
    index = operator.index(dim)
    bound = max(ndim, 1) if scalar_as_1d else ndim
    if bound == 0:
        raise KilnIndexError(f"{owner}: {name} out of range: a 0-d tensor has no dimension, got "
                             f"{index}")
    if not -bound <= index < bound:
        raise KilnIndexError(f"{owner}: {name} out of range: expected a value in [{-bound}, "
                             f"{bound - 1}] for a {ndim}-d tensor, got {index}")
    return index % bound


def check_cpu_device(owner, device, name="device_type"):
    """A KilnValueError naming ``owner`` unless ``device`` (argument ``name``) is "cpu": Kiln runs
    on the CPU (kiln.amp's autocast and GradScaler)."""
    if device != "cpu":
        raise KilnValueError(f"{owner}: expected {name} 'cpu' (Kiln runs on the CPU), got "
                             f"{device!r}")


def autocast_mixes(held, got):
    """Whether autocast is on and lets a layer holding ``held`` take ``got``: both floating and
    neither float64 (check_held_dtype)."""
    narrow = (_C.dtype.float32, _C.dtype.bfloat16, _C.dtype.float16)
    return held in narrow and got in narrow and _C.autocast.state()[0]


def check_held_dtype(owner, dtype, whose, inputs, params=()):
    """Refuses the kiln tensors of ``inputs`` and ``params`` ((name, tensor) pairs; a None tensor
    is skipped) whose dtype is not ``dtype``, the one a layer holds its parameters in, which
    ``whose`` names ("the weight's"): a DTypeError "``owner``: expected input of dtype float32
    (the weight's), got float64; convert it with .to(kiln.float32), or the layer with
    .to(kiln.float64)" (the layer's conversion is offered for a floating-point input only).
    PyTorch's rule for layers, where kiln.mint's ops promote: a float64 batch would silently
    run a float32 layer in float64, an integer one in float32. A comparison of dtypes, so it
    costs nothing and refuses kiln.jit's tracers as well. Inside kiln.autocast, floating dtypes
    other than float64 mix freely (the lower-precision output of one layer feeds the float32
    parameters of the next, as under PyTorch's autocast): the listed ops cast them to one dtype,
    the others promote."""
    for pairs, is_input in ((inputs, True), (params, False)):
        for name, value in pairs:
            if value is None or value.dtype == dtype:
                continue
            got = value.dtype
            if autocast_mixes(dtype, got):
                continue
            remedy = f"convert it with .to(kiln.{dtype.name})"
            if is_input and got.is_floating_point:
                remedy += f", or the layer with .to(kiln.{got.name})"
            raise DTypeError(f"{owner}: expected {name} of dtype {dtype.name} ({whose}), got "
                             f"{got.name}; {remedy}")
