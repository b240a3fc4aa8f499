"""kiln.distributed.functional: collectives that return new tensors and are differentiable.

    y = kiln.distributed.functional.all_reduce(x)   # x's sum over the ranks; x is unchanged
    y.sum().backward()                               # x.grad: the all-reduce of y's gradient

Gradients: all_reduce (op "sum" or "avg") is its own adjoint; all_gather's adjoint is
reduce_scatter("sum") and the other way round; broadcast sends the sum of every rank's gradient
to the source (the other ranks get zeros). Every rank must run the same backward, so that the
gradients' collectives match up.
"""

from .. import _C

_f = _C.distributed.functional


def all_reduce(x, op="sum", group=None):
    """``x`` reduced over the group (op: "sum", "prod", "min", "max" or "avg")."""
    return _f.all_reduce(x, op, group)


def broadcast(x, src, group=None):
    """World rank ``src``'s ``x``, on every member."""
    return _f.broadcast(x, src, group)


def all_gather(x, group=None):
    """Every member's ``x`` stacked along dim 0, in group-rank order."""
    return _f.all_gather(x, group)


def reduce_scatter(x, op="sum", group=None):
    """``x`` reduced over the group; this member's slice of dim 0 (dim 0 / group size rows)."""
    return _f.reduce_scatter(x, op, group)


__all__ = ["all_reduce", "broadcast", "all_gather", "reduce_scatter"]
