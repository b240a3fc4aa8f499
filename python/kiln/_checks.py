"""Argument checks that kiln's Python modules share (private): integers given where the C++ API
takes an int, refused by a typed error naming the function and the argument rather than by
nanobind's untyped "incompatible function arguments"."""

import operator

from .errors import KilnTypeError, KilnValueError


def as_int(value):
    """``value`` as a Python int when it is an int or has ``__index__`` (a NumPy integer), else
    None. Never a bool: True as a size, a rank or a count is a mistake, not 1."""
    if isinstance(value, bool):
        return None
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
