"""kiln.distributed.functional: collectives that return new tensors and are differentiable.

    y = kiln.distributed.functional.all_reduce(x)   # x's sum over the ranks; x is unchanged
    y.sum().backward()                               # x.grad: the all-reduce of y's gradient

Gradients: all_reduce (op "sum" or "avg") is its own adjoint; all_gather's adjoint is
reduce_scatter("sum") and the other way round; broadcast sends the sum of every rank's gradient
to the source (the other ranks get zeros). Every rank must run the same backward, so that the
gradients' collectives match up.

Arguments are checked before anything is sent: one of the wrong kind raises KilnTypeError, a bad
value KilnValueError (as for ``kiln.distributed``'s in-place collectives).
"""

from .. import _C
from .._checks import checked_int
from ..errors import KilnTypeError

_f = _C.distributed.functional

# The C++ API holds ranks in an int: anything larger cannot even reach its checks.
_INT_MAX = 2**31 - 1
_OPS = '"sum", "prod", "min", "max" or "avg"'

# The argument checks below are shared by this module, kiln.distributed and kiln.nn.DataParallel.
# They live here because kiln.distributed imports this module (not the other way round). Each
# names the function `fn` it checks for, and returns the value as the C++ API takes it, so that
# no argument reaches nanobind's untyped "incompatible function arguments".


def _tensor(fn, name, value, hint=""):
    if not isinstance(value, _C.Tensor):
        raise KilnTypeError(f"{fn}: expected {name} to be a kiln.Tensor, got "
                            f"{type(value).__name__}{hint}")
    return value


def _str(fn, name, value, expected):
    if not isinstance(value, str):
        raise KilnTypeError(f"{fn}: expected {name} to be {expected}, got "
                            f"{type(value).__name__} {value!r}")
    return value


def _op(fn, op):
    # The C++ side checks the name itself ("unknown reduction op").
    return _str(fn, "op", op, f"{_OPS} (or a ReduceOp constant)")


def _group(fn, group):
    if group is not None and not isinstance(group, _C.distributed.ProcessGroup):
        raise KilnTypeError(f"{fn}: expected group to be a ProcessGroup (from new_group) or None "
                            f"(the world), got {type(group).__name__} {group!r}")
    return group


def _int(fn, name, value, low):
    """`value` as an int in low.._INT_MAX (what the C++ API's int holds)."""
    return checked_int(fn, name, value, low, _INT_MAX)


def all_reduce(x, op="sum", group=None):
    """``x`` reduced over the group (op: "sum", "prod", "min", "max" or "avg")."""
    fn = "functional.all_reduce"
    return _f.all_reduce(_tensor(fn, "x", x), _op(fn, op), _group(fn, group))


def broadcast(x, src, group=None):
    """World rank ``src``'s ``x``, on every member."""
    fn = "functional.broadcast"
    return _f.broadcast(_tensor(fn, "x", x), _int(fn, "src", src, 0), _group(fn, group))


def all_gather(x, group=None):
    """Every member's ``x`` stacked along dim 0, in group-rank order."""
    fn = "functional.all_gather"
    return _f.all_gather(_tensor(fn, "x", x), _group(fn, group))


def reduce_scatter(x, op="sum", group=None):
    """``x`` reduced over the group; this member's slice of dim 0 (dim 0 / group size rows)."""
    fn = "functional.reduce_scatter"
    return _f.reduce_scatter(_tensor(fn, "x", x), _op(fn, op), _group(fn, group))


__all__ = ["all_reduce", "broadcast", "all_gather", "reduce_scatter"]
