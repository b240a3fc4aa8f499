"""DataLoader: batches drawn from a dataset by a sampler and collated, as
``torch.utils.data.DataLoader`` (the same arguments, checks and order of batches).

    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, num_workers=2)
    for xb, yb in loader:
        ...

Note [DataLoader workers are threads]
With ``num_workers > 0`` the batches are loaded and collated ahead by that many worker *threads*
(PyTorch uses processes): batch k goes to worker k % num_workers, each worker has at most
``prefetch_factor`` batches (default 2) queued, and the batches come out in the sampler's order.
Kiln's ops release the GIL, so collating and tensor work in a dataset overlap with training;
a dataset whose ``__getitem__`` is mostly Python gains little. ``worker_init_fn(worker_id)``
runs in each thread before its first batch, and ``get_worker_info()`` returns that thread's
``WorkerInfo`` (None in any other thread). Each worker reads its own shallow copy of a dataset
derived from ``Dataset`` (attributes set in ``worker_init_fn`` stay that worker's; the data is
shared); other objects (a list, an array) are shared as they are. An exception in a worker is
raised in the iterating thread at the batch it belonged to; later batches still come. One from
``worker_init_fn`` or from starting an IterableDataset's iterator is raised at the worker's first
batch and ends the pass (a persistent worker tries again at the next pass). Random
ops in a dataset draw from Kiln's default generator in whatever order the threads reach
them: for a repeatable run, load with ``num_workers=0``. The threads stop when the pass ends,
when its iterator is dropped (a ``break``), or, with ``persistent_workers``, with the loader.
``timeout`` (seconds, workers only) raises ``kiln.KilnError`` when a batch takes longer; the
late worker then finishes its batch and stops. ``pin_memory`` is accepted and has no effect:
Kiln runs on the CPU.
"""

import atexit
import copy
import dataclasses
import itertools
import math
import numbers
import queue
import threading
import weakref

from ... import mint
from ..._checks import checked_bool, checked_int
from ...errors import KilnError, KilnNotImplementedError, KilnTypeError, KilnValueError
from .collate import default_collate, default_convert
from .dataset import Dataset, IterableDataset
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                      _checked_generator)


@dataclasses.dataclass(frozen=True)
class WorkerInfo:
    """A worker thread's ``id`` (0 .. num_workers - 1), ``num_workers``, ``seed`` (the pass's
    base seed, drawn from the loader's generator, plus the id) and ``dataset`` (the worker's
    copy)."""
    id: int
    num_workers: int
    seed: int
    dataset: object


_local = threading.local()


def get_worker_info():
    """The calling DataLoader worker thread's WorkerInfo; None in any other thread."""
    return getattr(_local, "info", None)


class _InfiniteConstantSampler(Sampler):
    """An IterableDataset's "indices": None forever (its fetcher takes the next samples)."""

    def __iter__(self):
        return itertools.repeat(None)


class _MapFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn

    def fetch(self, index):
        if not self.auto_collation:
            return self.collate_fn(self.dataset[index])
        batched = getattr(self.dataset, "__getitems__", None)
        data = batched(index) if batched else [self.dataset[i] for i in index]
        return self.collate_fn(data)


class _IterableFetcher:
    """Raises StopIteration when the dataset's iterator has no (full, with drop_last) batch."""

    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.iterator = iter(dataset)
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.ended = False

    def fetch(self, index):
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.iterator))
        data = list(itertools.islice(self.iterator, len(index)))
        self.ended = len(data) < len(index)
        if not data or (self.drop_last and self.ended):
            raise StopIteration
        return self.collate_fn(data)


@dataclasses.dataclass
class _Failure:
    """An exception a worker raised, for the iterating thread to raise at its batch. A `fatal`
    one (from worker_init_fn or from starting the dataset's iterator) ends the pass."""
    error: BaseException
    worker_id: int
    fatal: bool = False


@dataclasses.dataclass
class _Ended:
    """A worker's IterableDataset copy has no more batches this pass."""
    worker_id: int


# A persistent worker's task to start a new pass, and its acknowledgement.
_RESUME = object()

# Note [Workers keep no exceptions]
# The iterating thread raises a worker's exception, which adds its own frames (and so the
# iterator) to the exception's traceback. A worker that kept the exception would keep the
# iterator alive, and with it itself: the iterator could never be dropped and stop it. So a
# worker hands each exception over and forgets it: a batch's is made and sent in _answer's
# frame; a fatal one is dropped once sent, and the worker waits for the next pass or the end.


def _start(info, init_fn, fetcher_type, fetcher_args):
    """(fetcher, None, None) for `info`'s dataset copy after `init_fn` (when given) ran, or
    (None, a fatal _Failure, the init_fn still to run at the next pass) when either raised."""
    try:
        if init_fn is not None:
            init_fn(info.id)
            init_fn = None
        return fetcher_type(info.dataset, *fetcher_args), None, None
    except BaseException as error:  # raised in the iterating thread instead
        return None, _Failure(error, info.id, fatal=True), init_fn


def _answer(fetcher, stream, worker_id, task, results):
    """Puts (batch number, batch or _Failure or _Ended) for `task` on `results`; True when the
    stream ended (StopIteration from a `stream`'s fetcher)."""
    number, index = task
    try:
        data = fetcher.fetch(index)
    except BaseException as error:
        # Only a stream's end is an end: a map-style dataset's StopIteration is raised in the
        # iterating thread, as it would be without workers.
        if stream and isinstance(error, StopIteration):
            results.put((number, _Ended(worker_id)))
            return True
        data = _Failure(error, worker_id)
    results.put((number, data))
    return False


def _worker_loop(info, fetcher_type, fetcher_args, init_fn, tasks, results, done):
    """One worker thread: answers each task (batch number, indices) from `tasks` on `results`
    until it gets None. It holds no reference to the iterator (See Note [Workers keep no
    exceptions]), so dropping the iterator can stop it."""
    _local.info = info
    fetcher, failure, init_fn = _start(info, init_fn, fetcher_type, fetcher_args)
    ended = False
    while True:
        task = tasks.get()
        if task is None:
            return
        if task is _RESUME:
            fetcher, failure, init_fn = _start(info, init_fn, fetcher_type, fetcher_args)
            ended = False
            results.put((_RESUME, None))
        elif done.is_set() or ended:
            continue
        elif failure is not None:
            # Reported at the worker's first batch of the pass, which ends the pass.
            results.put((task[0], failure))
            failure, ended = None, True
        else:
            ended = _answer(fetcher, fetcher_type is _IterableFetcher, info.id, task, results)


class _BaseIterator:
    """What a pass over a DataLoader starts with, with or without workers."""

    def __init__(self, loader):
        self._fetcher_type = _IterableFetcher if loader._iterable else _MapFetcher
        self._fetcher_args = (loader._auto_collation, loader.collate_fn, loader.drop_last)
        self._index_sampler = loader._index_sampler
        self._sampler_iter = iter(self._index_sampler)
        # One draw from the loader's generator (None: the default one) per pass whatever the
        # worker count (PyTorch draws its workers' base seed alike), so a seeded program
        # shuffles the same with or without them.
        self._base_seed = int(mint.randint(0, 2**63 - 1, (), generator=loader.generator).item())

    def __iter__(self):
        return self


class _SingleThreadIterator(_BaseIterator):
    """A pass over a DataLoader without workers: each batch is loaded when asked for."""

    def __init__(self, loader):
        super().__init__(loader)
        self._fetcher = self._fetcher_type(loader.dataset, *self._fetcher_args)

    def __next__(self):
        return self._fetcher.fetch(next(self._sampler_iter))


# The iterators whose workers may still run. Daemon threads left waiting at the interpreter's exit
# would be frozen holding their datasets' tensors, so the exit stops them first.
_live_iterators = weakref.WeakSet()


@atexit.register
def _stop_workers_at_exit():
    for iterator in list(_live_iterators):
        iterator._shutdown_workers()


class _ThreadedIterator(_BaseIterator):
    """A pass (or, with persistent workers, every pass) over a DataLoader with worker threads;
    the scheduling is PyTorch's (_MultiProcessingDataLoaderIter)."""

    _shutdown = True  # until the workers start

    def __init__(self, loader):
        super().__init__(loader)
        self._num_workers = loader.num_workers
        self._max_tasks = loader.prefetch_factor * loader.num_workers
        self._timeout = loader.timeout
        self._persistent = loader.persistent_workers
        self._results = queue.Queue()
        self._done = threading.Event()
        self._tasks = [queue.Queue() for _ in range(self._num_workers)]
        self._threads = []
        self._shutdown = False
        dataset = loader.dataset
        for worker_id in range(self._num_workers):
            copied = copy.copy(dataset) if isinstance(dataset, Dataset) else dataset
            info = WorkerInfo(worker_id, self._num_workers, self._base_seed + worker_id, copied)
            thread = threading.Thread(
                target=_worker_loop, name=f"kiln-data-worker-{worker_id}", daemon=True,
                args=(info, self._fetcher_type, self._fetcher_args, loader.worker_init_fn,
                      self._tasks[worker_id], self._results, self._done))
            thread.start()
            self._threads.append(thread)
        _live_iterators.add(self)
        try:
            self._reset(first=True)
        except BaseException:
            self._shutdown_workers()
            raise

    def _reset(self, first=False):
        self._sampler_iter = iter(self._index_sampler)
        self._send_idx = 0  # the number of the next batch to hand out
        self._rcvd_idx = 0  # the number of the next batch to return
        # batch number -> [worker] while it is being loaded, [worker, data] once it came early
        self._task_info = {}
        self._active = [True] * self._num_workers  # False: its IterableDataset copy ended
        self._worker_cycle = itertools.cycle(range(self._num_workers))
        if not first:
            # Each worker answers its queue in order: past its acknowledgement, nothing of the
            # previous pass is left to arrive.
            for tasks in self._tasks:
                tasks.put(_RESUME)
            waiting = self._num_workers
            while waiting:
                number, _ = self._get()
                if number is _RESUME:
                    waiting -= 1
        for _ in range(self._max_tasks):
            self._put_index()

    def _put_index(self):
        try:
            index = next(self._sampler_iter)
        except StopIteration:
            return
        for _ in range(self._num_workers):
            worker = next(self._worker_cycle)
            if self._active[worker]:
                break
        else:
            return
        self._tasks[worker].put((self._send_idx, index))
        self._task_info[self._send_idx] = [worker]
        self._send_idx += 1

    def _get(self):
        try:
            return self._results.get(timeout=self._timeout or None)
        except queue.Empty:
            # A worker stuck in a batch cannot be stopped: it is not waited for.
            self._shutdown_workers(join=False)
            raise KilnError(f"DataLoader timed out after {self._timeout} seconds waiting for "
                            f"batch {self._rcvd_idx} from its worker threads") from None

    def _process(self, data):
        if isinstance(data, _Failure) and data.fatal:
            self._shutdown_workers()  # its worker has gone: the pass cannot go on
        else:
            self._put_index()
        if isinstance(data, _Failure):
            raise data.error
        return data

    def __next__(self):
        if self._shutdown:
            raise StopIteration
        while True:
            # Skip the batches that workers whose stream ended will never send.
            while self._rcvd_idx < self._send_idx:
                info = self._task_info.get(self._rcvd_idx)
                if info is not None:
                    if len(info) == 2 or self._active[info[0]]:
                        break
                    del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
            else:
                if not self._persistent:
                    self._shutdown_workers()
                raise StopIteration
            info = self._task_info[self._rcvd_idx]
            if len(info) == 2:
                del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
                return self._process(info[1])
            number, data = self._get()
            if isinstance(data, _Ended):
                self._active[data.worker_id] = False
                if not self._persistent:
                    self._tasks[data.worker_id].put(None)
                self._put_index()
            elif number != self._rcvd_idx:
                self._task_info[number].append(data)
            else:
                del self._task_info[number]
                self._rcvd_idx += 1
                return self._process(data)

    def _shutdown_workers(self, join=True):
        if self._shutdown:
            return
        self._shutdown = True
        self._done.set()
        for tasks in self._tasks:
            tasks.put(None)
        if join:
            for thread in self._threads:
                if thread is not threading.current_thread():
                    thread.join()

    def __del__(self):
        self._shutdown_workers()


# Changing these after construction would leave the loader's samplers inconsistent.
_FIXED = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers")


class DataLoader:
    """Batches of ``dataset``: PyTorch's arguments and checks (conflicting options raise
    KilnValueError). ``shuffle`` draws a new ``kiln.mint.randperm`` order each pass from
    ``generator`` (a kiln.Generator; None: the default generator, which ``kiln.manual_seed``
    seeds), which also gives each pass's worker base seed (``WorkerInfo.seed``), as in PyTorch;
    ``batch_size=None`` turns batching off
    (each sample ``default_convert``'ed); an IterableDataset takes no sampler, and
    ``len(loader)`` then needs the dataset's ``__len__``. For ``num_workers``,
    ``prefetch_factor`` (default 2 with workers), ``worker_init_fn``, ``persistent_workers``,
    ``timeout`` and ``pin_memory`` see Note [DataLoader workers are threads] above. PyTorch's
    ``multiprocessing_context`` must be None (the workers are threads), ``pin_memory_device``
    changes nothing (Kiln runs on the CPU), and ``in_order`` must be True (batches come in the
    sampler's order)."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        owner = "DataLoader"
        _checked_generator(owner, generator)
        if multiprocessing_context is not None:
            raise KilnNotImplementedError(f"{owner}: multiprocessing_context must be None: Kiln's "
                                          f"workers are threads, not processes")
        if not isinstance(pin_memory_device, str):
            raise KilnTypeError(f"{owner}: pin_memory_device must be a str, got "
                                f"{type(pin_memory_device).__name__}")
        if not checked_bool(owner, "in_order", in_order):
            raise KilnNotImplementedError(f"{owner}: in_order=False is not supported: batches "
                                          f"come in the sampler's order")
        num_workers = checked_int(owner, "num_workers", num_workers, 0)
        if not isinstance(timeout, numbers.Real) or isinstance(timeout, bool):
            raise KilnTypeError(f"{owner}: timeout must be a number of seconds, got "
                                f"{type(timeout).__name__} {timeout!r}")
        if not 0 <= timeout < math.inf:
            raise KilnValueError(f"{owner}: timeout must be non-negative and finite, got "
                                 f"{timeout}")
        if timeout and not num_workers:
            raise KilnValueError(f"{owner}: timeout applies to worker threads, but got "
                                 f"timeout={timeout} with num_workers=0")
        if prefetch_factor is not None:
            if not num_workers:
                raise KilnValueError(f"{owner}: prefetch_factor applies to worker threads, but "
                                     f"got prefetch_factor={prefetch_factor!r} with num_workers=0")
            prefetch_factor = checked_int(owner, "prefetch_factor", prefetch_factor, 1)
        elif num_workers:
            prefetch_factor = 2
        if checked_bool(owner, "persistent_workers", persistent_workers) and not num_workers:
            raise KilnValueError(f"{owner}: persistent_workers needs num_workers > 0")
        checked_bool(owner, "pin_memory", pin_memory)
        checked_bool(owner, "drop_last", drop_last)

        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            for name, value, unset in (("shuffle", shuffle, shuffle in (None, False)),
                                       ("sampler", sampler, sampler is None),
                                       ("batch_sampler", batch_sampler, batch_sampler is None)):
                if not unset:
                    raise KilnValueError(f"{owner} with IterableDataset: expected unspecified "
                                         f"{name} option, but got {name}={value!r}")
        else:
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise KilnValueError(f"{owner}: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise KilnValueError(f"{owner}: batch_sampler option is mutually exclusive with "
                                     f"batch_size, shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise KilnValueError(f"{owner}: batch_size=None option disables auto-batching and is "
                                 f"mutually exclusive with drop_last")
        if sampler is None:
            sampler = (_InfiniteConstantSampler() if iterable else
                       RandomSampler(dataset, generator=generator) if shuffle else
                       SequentialSampler(dataset))
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.dataset = dataset
        self.batch_size = batch_size
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        if collate_fn is None:
            collate_fn = default_collate if batch_sampler is not None else default_convert
        self.collate_fn = collate_fn
        self.pin_memory = pin_memory
        self.drop_last = drop_last
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.generator = generator
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self._iterable = iterable
        self._iterator = None
        self._initialized = True

    def __setattr__(self, name, value):
        if name in _FIXED and getattr(self, "_initialized", False):
            raise KilnValueError(f"DataLoader: {name} attribute should not be set after the "
                                 f"DataLoader is initialized")
        super().__setattr__(name, value)

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self):
        if not self.num_workers:
            return _SingleThreadIterator(self)
        if not self.persistent_workers:
            return _ThreadedIterator(self)
        if self._iterator is None or self._iterator._shutdown:
            self._iterator = _ThreadedIterator(self)
        else:
            self._iterator._reset()
        return self._iterator

    def __len__(self):
        if not self._iterable:
            return len(self._index_sampler)
        length = len(self.dataset)
        if self.batch_size is None:
            return length
        if self.drop_last:
            return length // self.batch_size
        return math.ceil(length / self.batch_size)
