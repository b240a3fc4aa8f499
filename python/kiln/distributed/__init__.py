"""kiln.distributed: process groups and collectives over Gloo (the CPU engine PyTorch uses).

    import kiln
    import kiln.distributed as dist

    dist.init_process_group("gloo")              # env://: RANK, WORLD_SIZE, MASTER_ADDR/PORT
    t = kiln.ones(4) * (dist.get_rank() + 1)
    dist.all_reduce(t)                           # in place: the sum over the ranks
    work = dist.all_reduce(g, async_op=True)     # returns at once; g must not be touched ...
    work.wait()                                  # ... until this returns
    dist.destroy_process_group()

Start the ranks with ``python -m kiln.distributed.run --nproc N script.py`` (it sets the
environment ``env://`` reads). ``init_method`` may also be ``"tcp://host:port"`` (rank 0 serves
the rendezvous there) or ``"file:///shared/dir"`` (a fresh directory every rank can reach). With
``backend="mpi"`` (when ``is_mpi_available()``), start them with ``mpirun -np N python
script.py`` instead: MPI decides the ranks, and the same collectives run over MPI.

Collectives are ops (``AllReduce``, ``Broadcast``, ``AllGather``, ``ReduceScatter``,
``Barrier``): they run through the eager pipeline in program order and are traced into
``kiln.jit`` graphs like other ops (``async_op`` has no effect inside a traced function). The
in-place functions here mirror ``torch.distributed``; ``kiln.distributed.functional`` returns new
tensors and is differentiable (the gradient of an all-reduce is the all-reduce of the gradient).

Every blocking call waits at most ``timeout`` seconds (``init_process_group``'s argument, else
the environment's ``KILN_DIST_TIMEOUT``, else 300) and then raises ``kiln.DistributedError``; a
peer that exits is reported at once. Reduction ops: ``"sum"``, ``"prod"``, ``"min"``, ``"max"``,
``"avg"`` (floating dtypes), or the ``ReduceOp`` constants.
"""

import datetime

from .. import _C
from . import functional  # noqa: F401

_dist = _C.distributed
ProcessGroup = _dist.ProcessGroup
Work = _dist.Work


class ReduceOp:
    """The reductions, as ``torch.distributed.ReduceOp`` spells them."""
    SUM = "sum"
    PRODUCT = "prod"
    MIN = "min"
    MAX = "max"
    AVG = "avg"


def _seconds(timeout):
    if timeout is None:
        return 0.0  # KILN_DIST_TIMEOUT, else 300 s
    seconds = (timeout.total_seconds() if isinstance(timeout, datetime.timedelta)
               else float(timeout))
    if not seconds > 0:
        raise ValueError(f"init_process_group: timeout must be a positive number of seconds, "
                         f"got {timeout!r}")
    return seconds


def init_process_group(backend="gloo", init_method=None, rank=-1, world_size=-1, timeout=None):
    """Joins the world group. ``rank`` and ``world_size`` default to the environment's RANK and
    WORLD_SIZE; ``init_method`` to ``"env://"``; ``timeout`` (seconds or a timedelta) to
    KILN_DIST_TIMEOUT or 300. Raises DistributedError when the ranks do not all arrive in time
    (naming the missing ones) or disagree on the world size, KilnValueError for a bad argument."""
    _dist.init_process_group(backend, init_method or "env://", rank, world_size,
                             _seconds(timeout))


def destroy_process_group():
    """Leaves every group, after their queued collectives; init_process_group may follow."""
    _dist.destroy_process_group()


def is_initialized():
    return _dist.is_initialized()


def is_mpi_available():
    """True when this Kiln was built with MPI: ``init_process_group("mpi")`` in processes started
    by ``mpirun`` (which decides the ranks)."""
    return _dist.is_mpi_available()


def is_gloo_available():
    return True


def get_rank(group=None):
    """This process's rank in ``group`` (the world by default); -1 when it is not a member."""
    return (group or _dist.world()).rank


def get_world_size(group=None):
    return (group or _dist.world()).size


def new_group(ranks):
    """A group of the given world ranks. Every rank must call it, in the same order, members or
    not; non-members get a group whose rank is -1."""
    return _dist.new_group(list(ranks))


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduces ``tensor`` over the group, in place. Returns a Work when ``async_op``, else None."""
    return _dist.all_reduce(tensor, op, group, async_op)


def broadcast(tensor, src, group=None, async_op=False):
    """Copies world rank ``src``'s ``tensor`` into every member's, in place."""
    return _dist.broadcast(tensor, src, group, async_op)


def all_gather_into_tensor(output, input, group=None, async_op=False):
    """Every member's ``input`` stacked along dim 0 of ``output``, in group-rank order."""
    return _dist.all_gather(output, input, group, async_op)


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Fills ``tensor_list`` (one tensor per member, each shaped like ``tensor``) with every
    member's ``tensor``. Waits for the result (async_op only says whether to return a Work)."""
    size = get_world_size(group)
    if len(tensor_list) != size:
        raise ValueError(f"all_gather: expected a list of {size} tensors (one per member), "
                         f"got {len(tensor_list)}")
    gathered = functional.all_gather(tensor.detach().reshape((1,) + tuple(tensor.shape)), group)
    for i, out in enumerate(tensor_list):
        out[...] = gathered[i]
    return _Done() if async_op else None


def reduce_scatter(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduces ``input`` over the group and writes this member's slice of dim 0 (input's dim 0
    divided by the group size) into ``output``."""
    return _dist.reduce_scatter(output, input, op, group, async_op)


reduce_scatter_tensor = reduce_scatter


def barrier(group=None):
    """Returns when every member of the group has reached it."""
    _dist.barrier(group)


class _Done:
    """The Work of a collective that has already finished."""

    def wait(self):
        return None


__all__ = ["ReduceOp", "ProcessGroup", "Work", "init_process_group", "destroy_process_group",
           "is_initialized", "is_mpi_available", "is_gloo_available", "get_rank",
           "get_world_size", "new_group", "all_reduce", "broadcast", "all_gather",
           "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor", "barrier",
           "functional"]
