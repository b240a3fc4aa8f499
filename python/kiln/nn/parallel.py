"""kiln.nn.DataParallel: data-parallel training over a process group (PyTorch's DDP design).

    dist.init_process_group("gloo")
    model = kiln.nn.DataParallel(MLP())          # rank 0's parameters are copied to every rank
    opt = kiln.optim.SGD(model.parameters(), lr=0.1)
    for x, y in my_shard_of_the_data:
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()                          # gradients are averaged over the ranks ...
        opt.step()                               # ... so every rank takes the same step

A model whose lazy cells (kiln.nn.Lazy*) have not yet been called is refused with a
KilnValueError, as PyTorch's DDP refuses uninitialized parameters: call it once on an example
input first. At construction every parameter and buffer is broadcast from the group's first
rank, and with ``broadcast_buffers=True`` (the default, as in PyTorch's DDP) the buffers again at
every forward (BatchNorm's running statistics: every rank then uses the first rank's). The trainable
parameters are put into buckets of about ``bucket_cap_mb`` megabytes, in reverse registration
order (roughly the order backward produces their gradients). During ``backward()`` a hook on each
parameter notes when its gradient has been accumulated; when a bucket's gradients are all there,
they are flattened into one buffer whose all-reduce (op "avg") starts at once, asynchronously, so
that the transfer overlaps the rest of the backward pass. When the last bucket has started, the
hook waits for every bucket and points each ``.grad`` at its slice of the averaged buffer.

With equal local batch sizes and a loss that is a mean over the batch, the averaged gradient is
the gradient of the loss over the combined batch, so N ranks step exactly as one process would on
the N batches together. Every trainable parameter must receive a gradient in every backward (a
parameter that gets none leaves its bucket waiting; the next forward raises a DistributedError
naming it, and resets). ``no_sync()`` accumulates gradients locally for the backward passes of the
forward passes inside it.
"""

import contextlib
import itertools
import numbers
import weakref

from .. import _C
from .. import distributed as dist
from ..autograd import no_grad
from ..distributed.functional import _group
from ..errors import DistributedError, KilnTypeError, KilnValueError
from .cell import Cell
from .lazy import is_lazy

__all__ = ["DataParallel"]


class _Bucket:
    """Parameters whose gradients are all-reduced together, in one flat buffer."""

    def __init__(self, indices):
        self.indices = indices          # positions in DataParallel's parameter list
        self.pending = set(indices)     # those whose gradient has not arrived this backward
        self.buffer = None
        self.work = None


class DataParallel(Cell):
    """Wraps ``cell``; calls go to it. See the module's documentation.

    Args:
        cell: the model.
        group: the process group (the world by default).
        bucket_cap_mb: the size of a gradient bucket in megabytes, a positive number (25, as
            PyTorch's DDP; inf puts every parameter of a dtype into one bucket).
        broadcast_buffers: whether every forward first copies the first rank's buffers to the
            others (a bool; True, as PyTorch's DDP).

    Raises KilnTypeError or KilnValueError for a bad argument (a KilnValueError for a model
    that still holds lazy placeholders: call it once first), DistributedError when
    kiln.distributed is not initialized or the ranks' models differ.
    """

    def __init__(self, cell, group=None, bucket_cap_mb=25.0, broadcast_buffers=True):
        super().__init__()
        if not isinstance(broadcast_buffers, bool):
            raise KilnTypeError(f"DataParallel: expected broadcast_buffers to be a bool, got "
                                f"{type(broadcast_buffers).__name__} {broadcast_buffers!r}")
        _group("DataParallel", group)
        if isinstance(bucket_cap_mb, bool) or not isinstance(bucket_cap_mb, numbers.Real):
            raise KilnTypeError(f"DataParallel: expected bucket_cap_mb to be a number of "
                                f"megabytes, got {type(bucket_cap_mb).__name__} "
                                f"{bucket_cap_mb!r}")
        if not bucket_cap_mb > 0:  # also refuses NaN, which would make one bucket silently
            raise KilnValueError(f"DataParallel: expected bucket_cap_mb to be positive, got "
                                 f"{bucket_cap_mb}")
        _check_initialized(cell)
        if not dist.is_initialized():
            raise DistributedError("DataParallel: call kiln.distributed.init_process_group() "
                                   "first")
        self.module = cell
        object.__setattr__(self, "_group", group)
        object.__setattr__(self, "_sync", True)              # no_sync() clears it
        object.__setattr__(self, "_sync_this_backward", True)  # _sync when forward ran
        object.__setattr__(self, "_broadcast_every_forward", broadcast_buffers)
        everything = list(cell.parameters())
        params = [p for p in everything if p.requires_grad]
        object.__setattr__(self, "_trainable", params)
        object.__setattr__(self, "_names", {id(p): n for n, p in cell.named_parameters()})
        self._check_same_model(everything)
        # Every parameter, frozen ones too, and every buffer start from the first rank's values.
        src = group.ranks[0] if group is not None else 0
        object.__setattr__(self, "_src", src)
        for bucket in _make_buckets(everything, range(len(everything)), bucket_cap_mb):
            self._broadcast([everything[i] for i in bucket.indices])
        self._broadcast_buffers()
        # Buckets in reverse order: the last layers' gradients are ready first. They are
        # all-reduced strictly in this order on every rank (collectives match by order).
        buckets = _make_buckets(params, reversed(range(len(params))), bucket_cap_mb)
        object.__setattr__(self, "_buckets", buckets)
        object.__setattr__(self, "_bucket_of", {i: b for b in buckets for i in b.indices})
        object.__setattr__(self, "_next", 0)                 # the next bucket to start
        # The hooks hold the DataParallel weakly: a parameter must not keep its wrapper alive.
        this = weakref.ref(self)
        handles = [p.register_post_accumulate_grad_hook(_make_hook(this, i))
                   for i, p in enumerate(params)]
        object.__setattr__(self, "_hook_handles", handles)

    def construct(self, *args, **kwargs):
        self._check_previous_backward()
        object.__setattr__(self, "_sync_this_backward", self._sync)
        if self._broadcast_every_forward:
            self._broadcast_buffers()
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes of the forward passes run inside accumulate gradients locally, without
        all-reduce; the first synchronised backward after it all-reduces the accumulated sum."""
        previous = self._sync
        object.__setattr__(self, "_sync", False)
        try:
            yield
        finally:
            object.__setattr__(self, "_sync", previous)

    def remove_hooks(self):
        """Stops synchronising gradients (the model then trains like an unwrapped one)."""
        for handle in self._hook_handles:
            handle.remove()
        object.__setattr__(self, "_hook_handles", [])

    def __del__(self):
        for handle in getattr(self, "_hook_handles", []):
            handle.remove()

    # ----------------------------------------------------------------------------------------

    def _check_same_model(self, params):
        # Every rank must bucket the same parameters: compare counts and sizes across the group.
        local = [len(params), sum(p.numel() for p in params)]
        lo = _C.tensor(local, dtype=_C.dtype.int64)
        hi = _C.tensor(local, dtype=_C.dtype.int64)
        dist.all_reduce(lo, "min", self._group)
        dist.all_reduce(hi, "max", self._group)
        if lo.tolist() != hi.tolist():
            raise DistributedError(
                f"DataParallel: the ranks' models differ: this rank has {local[0]} parameters "
                f"with {local[1]} elements, but across the group these range from "
                f"{lo.tolist()} to {hi.tolist()}")

    def _broadcast(self, tensors):
        """Copies the first rank's values of ``tensors`` (of one dtype) to every rank, in one
        flat broadcast."""
        with no_grad():
            flat = _C.mint.cat([t.detach().reshape(-1) for t in tensors])
            dist.broadcast(flat, self._src, self._group)
            offset = 0
            for t in tensors:
                n = t.numel()
                t.detach()[...] = flat[offset:offset + n].reshape(t.shape)
                offset += n

    def _broadcast_buffers(self):
        """The first rank's buffers to every rank, one broadcast per dtype (in the order of the
        buffers' first appearance, the same on every rank)."""
        by_dtype = {}
        for buffer in self.module.buffers():
            by_dtype.setdefault(buffer.dtype, []).append(buffer)
        for buffers in by_dtype.values():
            self._broadcast(buffers)

    def _check_previous_backward(self):
        """Raises (after resetting) when the last synchronised backward left buckets unreduced:
        a parameter that got no gradient, or a backward that raised part-way."""
        if self._next == 0 and all(b.pending == set(b.indices) for b in self._buckets):
            return
        missing = sorted(self._names.get(id(self._trainable[i]), f"#{i}")
                         for b in self._buckets for i in b.pending)
        self._reset()
        raise DistributedError(
            f"DataParallel: the previous backward gave no gradient to parameters {missing}, so "
            "not every bucket was all-reduced and the ranks' gradients differ (a parameter the "
            "forward did not use, or a backward that raised part-way). Every trainable "
            "parameter must get a gradient in every backward; DataParallel has reset and the "
            "next step may proceed.")

    def _reset(self):
        for bucket in self._buckets:
            if bucket.work is not None:
                try:
                    bucket.work.wait()
                except DistributedError:
                    pass  # the group is broken; its next collective says so
            bucket.pending = set(bucket.indices)
            bucket.buffer = bucket.work = None
        object.__setattr__(self, "_next", 0)

    def _grad_ready(self, index):
        if not self._sync_this_backward:
            return
        self._bucket_of[index].pending.discard(index)
        while self._next < len(self._buckets) and not self._buckets[self._next].pending:
            bucket = self._buckets[self._next]
            with no_grad():
                grads = [self._trainable[i].grad for i in bucket.indices]
                bucket.buffer = _C.mint.cat([g.reshape(-1) for g in grads])
                bucket.work = dist.all_reduce(bucket.buffer, "avg", self._group, async_op=True)
            object.__setattr__(self, "_next", self._next + 1)
        if self._next == len(self._buckets):
            self._finish()

    def _finish(self):
        try:
            for bucket in self._buckets:
                bucket.work.wait()
                offset = 0
                for i in bucket.indices:
                    p = self._trainable[i]
                    n = p.numel()
                    p.grad = bucket.buffer[offset:offset + n].reshape(p.shape)
                    offset += n
        finally:
            self._reset()


def _check_initialized(cell):
    """A KilnValueError when ``cell`` still holds a lazy cell's placeholders, as PyTorch's DDP
    refuses uninitialized parameters: their tensors are replaced at the first call, so the ones
    broadcast and hooked here would no longer be the model's."""
    lazy = [name for name, tensor in itertools.chain(cell.named_parameters(),
                                                     cell.named_buffers()) if is_lazy(tensor)]
    if lazy:
        raise KilnValueError(f"DataParallel: the model has uninitialized lazy parameters or "
                             f"buffers {lazy} (nn.Lazy* cells before their first call); run one "
                             f"forward call on an example input first, so that they take their "
                             f"shapes, then wrap the model")


def _make_buckets(params, order, cap_mb):
    """Consecutive runs of `order` (indices into `params`) of at most cap_mb megabytes and one
    dtype each."""
    cap = cap_mb * 1024 * 1024
    buckets, current, size, dtype = [], [], 0, None
    for i in order:
        p = params[i]
        nbytes = p.numel() * p.dtype.itemsize
        if current and (size + nbytes > cap or p.dtype != dtype):
            buckets.append(_Bucket(current))
            current, size = [], 0
        current.append(i)
        size += nbytes
        dtype = p.dtype
    if current:
        buckets.append(_Bucket(current))
    return buckets


def _make_hook(wrapper_ref, index):
    def hook(_param):
        wrapper = wrapper_ref()
        if wrapper is not None:
            wrapper._grad_ready(index)
    return hook
