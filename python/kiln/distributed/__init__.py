"""kiln.distributed: process groups and collectives over Gloo (the CPU engine PyTorch uses).

    import kiln
    import kiln.distributed as dist

    dist.init_process_group("gloo")              # env://: RANK, WORLD_SIZE, MASTER_ADDR/PORT
    t = kiln.mint.ones(4) * (dist.get_rank() + 1)
    dist.all_reduce(t)                           # in place: the sum over the ranks
    work = dist.all_reduce(t, async_op=True)     # returns at once; t must not be touched ...
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

``wait()`` an async collective (or call ``destroy_process_group``, which runs the queued ones)
before the process exits: one still queued at exit is dropped, and its peers fail at once
("Connection closed by peer") rather than wait for a process that is going.

Every blocking call waits at most ``timeout`` seconds (``init_process_group``'s argument, else
the environment's ``KILN_DIST_TIMEOUT``, else 300; from 1 ms to 1e9 s) and then raises
``kiln.DistributedError``; a peer that exits is reported at once. Reduction ops: ``"sum"``,
``"prod"``, ``"min"``, ``"max"``, ``"avg"`` (floating dtypes), or the ``ReduceOp`` constants.

Arguments are checked before anything is sent: one of the wrong kind (an array for a tensor, a
float for a rank, a list for ``reduce_scatter``'s input) raises ``kiln.KilnTypeError``, a bad
value ``kiln.KilnValueError``, tensors of the wrong shape ``kiln.ShapeError``.
"""

import collections.abc
import datetime
import numbers

from .. import _C
from ..errors import KilnTypeError, KilnValueError, ShapeError
from . import functional  # noqa: F401
from .functional import _group, _int, _op, _str, _tensor

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
    if isinstance(timeout, datetime.timedelta):
        seconds = timeout.total_seconds()
    elif isinstance(timeout, numbers.Real) and not isinstance(timeout, bool):
        seconds = float(timeout)
    else:
        raise KilnTypeError(f"init_process_group: expected timeout to be a number of seconds or a "
                            f"datetime.timedelta, got {type(timeout).__name__} {timeout!r}")
    # Imported here, not at the top: importing kiln.distributed.run with this package would make
    # `python -m kiln.distributed.run` warn that the module was already imported.
    from .run import _timeout_problem
    problem = _timeout_problem(seconds)
    if problem:
        raise KilnValueError(f"init_process_group: timeout {problem}")
    return seconds


def _rank_or_env(name, value, low, env):
    """`value` checked, or -1 (which the C++ API reads as "take `env`") when not given."""
    # -1 is PyTorch's default for "not given", kept for code that passes its own default on.
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value == -1):
        return -1
    return _int("init_process_group", f"{name} (or None: {env} from the environment)", value, low)


def init_process_group(backend="gloo", init_method=None, rank=None, world_size=None, timeout=None):
    """Joins the world group. ``rank`` and ``world_size`` when None (or -1, PyTorch's default)
    come from the environment's RANK and WORLD_SIZE; ``init_method`` defaults to ``"env://"``;
    ``timeout`` (seconds or a timedelta, from 1 ms to 1e9 s) to KILN_DIST_TIMEOUT or 300.
    Raises DistributedError when the ranks do not all arrive in time (naming the missing ones) or
    disagree on the world size, KilnTypeError or KilnValueError for a bad argument."""
    fn = "init_process_group"
    _str(fn, "backend", backend, "'gloo' or 'mpi'")
    if init_method is not None:
        _str(fn, "init_method", init_method, "'env://', 'tcp://host:port' or 'file:///path'")
    _dist.init_process_group(backend, init_method or "env://",
                             _rank_or_env("rank", rank, 0, "RANK"),
                             _rank_or_env("world_size", world_size, 1, "WORLD_SIZE"),
                             _seconds(timeout))


def destroy_process_group():
    """Leaves every group, after their queued collectives; init_process_group may follow (over
    a fresh file:// directory or another port: this does not wait for the other ranks, and over
    the same env:// address a rank could reach rank 0's rendezvous before rank 0 leaves it)."""
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
    return (_group("get_rank", group) or _dist.world()).rank


def get_world_size(group=None):
    return (_group("get_world_size", group) or _dist.world()).size


def new_group(ranks):
    """A group of the given world ranks (a sequence of ints). Every rank must call it, in the same
    order, members or not; non-members get a group whose rank is -1."""
    if isinstance(ranks, (str, bytes)) or not isinstance(ranks, collections.abc.Iterable):
        raise KilnTypeError(f"new_group: expected ranks to be a sequence of ints (world ranks), "
                            f"got {type(ranks).__name__} {ranks!r}")
    return _dist.new_group([_int("new_group", f"ranks[{i}]", r, 0) for i, r in enumerate(ranks)])


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduces ``tensor`` over the group, in place. Returns a Work when ``async_op``, else None."""
    fn = "all_reduce"
    return _dist.all_reduce(_tensor(fn, "tensor", tensor), _op(fn, op), _group(fn, group),
                            bool(async_op))


def broadcast(tensor, src, group=None, async_op=False):
    """Copies world rank ``src``'s ``tensor`` into every member's, in place."""
    fn = "broadcast"
    return _dist.broadcast(_tensor(fn, "tensor", tensor), _int(fn, "src", src, 0),
                           _group(fn, group), bool(async_op))


def all_gather_into_tensor(output, input, group=None, async_op=False):
    """Every member's ``input`` stacked along dim 0 of ``output``, in group-rank order."""
    fn = "all_gather_into_tensor"
    return _dist.all_gather(_tensor(fn, "output", output), _tensor(fn, "input", input),
                            _group(fn, group), bool(async_op))


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Fills ``tensor_list`` (one tensor per member, each shaped like ``tensor``) with every
    member's ``tensor``. Waits for the result (async_op only says whether to return a Work)."""
    fn = "all_gather"
    _tensor(fn, "tensor", tensor)
    if not isinstance(tensor_list, (list, tuple)):
        raise KilnTypeError(f"all_gather: expected tensor_list to be a list of kiln.Tensors (one "
                            f"per member), got {type(tensor_list).__name__}")
    size = get_world_size(_group(fn, group))
    if len(tensor_list) != size:
        raise KilnValueError(f"all_gather: expected a list of {size} tensors (one per member), "
                             f"got {len(tensor_list)}")
    for i, out in enumerate(tensor_list):
        _tensor(fn, f"tensor_list[{i}]", out)
        if out.shape != tensor.shape:
            raise ShapeError(f"all_gather: tensor_list[{i}] has shape {list(out.shape)}; expected "
                             f"{list(tensor.shape)}, the shape of tensor")
    gathered = functional.all_gather(tensor.detach().reshape((1,) + tuple(tensor.shape)), group)
    for i, out in enumerate(tensor_list):
        out[...] = gathered[i]
    return _Done() if async_op else None


def reduce_scatter(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduces ``input`` over the group and writes this member's slice of dim 0 (input's dim 0
    divided by the group size) into ``output``. This is ``torch.distributed``'s
    ``reduce_scatter_tensor``: for its ``reduce_scatter(output, input_list)``, pass
    ``kiln.mint.cat(input_list)``."""
    fn = "reduce_scatter"
    hint = ""
    if isinstance(input, (list, tuple)):
        hint = (" (Kiln's reduce_scatter(output, input) takes one tensor whose dim 0 holds every "
                "member's slice, as torch.distributed.reduce_scatter_tensor does; for a list of "
                "per-member tensors pass kiln.mint.cat(input_list))")
    return _dist.reduce_scatter(_tensor(fn, "output", output), _tensor(fn, "input", input, hint),
                                _op(fn, op), _group(fn, group), bool(async_op))


reduce_scatter_tensor = reduce_scatter


def barrier(group=None):
    """Returns when every member of the group has reached it."""
    _dist.barrier(_group("barrier", group))


class _Done:
    """The Work of a collective that has already finished."""

    def wait(self):
        return None


__all__ = ["ReduceOp", "ProcessGroup", "Work", "init_process_group", "destroy_process_group",
           "is_initialized", "is_mpi_available", "is_gloo_available", "get_rank",
           "get_world_size", "new_group", "all_reduce", "broadcast", "all_gather",
           "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor", "barrier",
           "functional"]
