"""Samplers: iterables of dataset indices (or, for ``BatchSampler``, of lists of indices) that a
DataLoader draws its samples by, as ``torch.utils.data``'s.

Random order comes from ``kiln.mint.randperm``, ``kiln.mint.randint`` and
``kiln.mint.multinomial`` drawing from the sampler's ``generator`` (a ``kiln.Generator``), or
with None from the default generator, so that ``kiln.manual_seed(s)`` makes it repeat.
``DistributedSampler`` is the exception: its shuffle depends on ``seed + epoch`` only, so that
every rank draws the same permutation (see there).
"""

import math

from ... import distributed as dist
from ... import mint
from ..._C import dtype as _dtype
from ..._C import tensor as _tensor
from ..._checks import checked_bool, checked_int
from ...errors import KilnTypeError, KilnValueError


def _checked_generator(owner, generator):
    """``generator`` if it is a kiln.Generator or None, else a KilnTypeError naming ``owner``
    (checked when the sampler is made, not at its first draw)."""
    if generator is not None and not isinstance(generator, mint.Generator):
        raise KilnTypeError(f"{owner}: expected generator to be a kiln.Generator or None, got "
                            f"{type(generator).__name__} {generator!r}")
    return generator


class Sampler:
    """The base class: subclasses define ``__iter__`` (indices, or lists of indices for a batch
    sampler) and, for ``len(DataLoader)``, ``__len__``."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of Sampler should implement __iter__.")


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """Indices of ``data_source`` in random order: without ``replacement``, whole permutations
    (``kiln.mint.randperm``) until ``num_samples`` (default: the length) are out; with it,
    ``num_samples`` uniform draws (``kiln.mint.randint``, 32 at a time). Each pass draws afresh
    from ``generator`` (None: the default generator, which ``kiln.manual_seed`` seeds), so the
    sequence of passes repeats for a generator seeded alike."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.generator = _checked_generator("RandomSampler", generator)
        self.data_source = data_source
        self.replacement = checked_bool("RandomSampler", "replacement", replacement)
        self._num_samples = num_samples
        checked_int("RandomSampler", "num_samples", self.num_samples, 1)

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        if n == 0:
            raise KilnValueError("RandomSampler: cannot draw indices from an empty data_source")
        generator = self.generator
        if self.replacement:
            # Drawn in chunks, as PyTorch does: a long sampler never holds all its draws.
            for _ in range(self.num_samples // 32):
                yield from mint.randint(0, n, (32,), generator=generator).tolist()
            yield from mint.randint(0, n, (self.num_samples % 32,), generator=generator).tolist()
        else:
            for _ in range(self.num_samples // n):
                yield from mint.randperm(n, generator=generator).tolist()
            if self.num_samples % n:
                yield from mint.randperm(n, generator=generator).tolist()[:self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in random order (``kiln.mint.randperm`` of their positions, drawn
    afresh each pass from ``generator``; None: the default generator)."""

    def __init__(self, indices, generator=None):
        self.generator = _checked_generator("SubsetRandomSampler", generator)
        self.indices = indices

    def __iter__(self):
        for i in mint.randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices 0 .. len(weights) - 1 drawn with probabilities proportional to
    ``weights`` (a 1-d sequence, held as float64; ``kiln.mint.multinomial``), with or without
    ``replacement``, drawn afresh each pass from ``generator`` (None: the default generator)."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        owner = "WeightedRandomSampler"
        self.generator = _checked_generator(owner, generator)
        self.num_samples = checked_int(owner, "num_samples", num_samples, 1)
        self.replacement = checked_bool(owner, "replacement", replacement)
        self.weights = _tensor(weights, dtype=_dtype.float64)
        if len(self.weights.shape) != 1:
            raise KilnValueError(f"{owner}: expected weights to be a 1-d sequence, got shape "
                                 f"{tuple(self.weights.shape)}")

    def __iter__(self):
        yield from mint.multinomial(self.weights, self.num_samples, self.replacement,
                                    generator=self.generator).tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of ``batch_size`` consecutive indices of ``sampler`` (any iterable of indices); the
    last, shorter list is dropped with ``drop_last``."""

    def __init__(self, sampler, batch_size, drop_last):
        self.sampler = sampler
        self.batch_size = checked_int("BatchSampler", "batch_size", batch_size, 1)
        self.drop_last = checked_bool("BatchSampler", "drop_last", drop_last)

    def __iter__(self):
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size


class DistributedSampler(Sampler):
    """The share of ``dataset``'s indices for process ``rank`` of ``num_replicas``, by PyTorch's
    rule: the indices (shuffled, or in order) are padded by repeating them from the start until
    every rank gets as many (or, with ``drop_last``, cut to a multiple of ``num_replicas``), and
    rank r takes positions r, r + num_replicas, ...

    ``num_replicas`` and ``rank`` default to the world size and rank of ``kiln.distributed``'s
    process group (a KilnValueError when none is initialized). The shuffle is
    ``kiln.mint.randperm`` drawn from a new ``kiln.Generator().manual_seed(seed + epoch)`` (the
    default generator is neither used nor advanced), so every rank draws the same one, as
    PyTorch's sampler does with a torch.Generator; call ``set_epoch(epoch)`` before each epoch
    for a new order."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        owner = "DistributedSampler"
        if (num_replicas is None or rank is None) and not dist.is_initialized():
            raise KilnValueError(f"{owner}: num_replicas and rank default to the world size and "
                                 f"rank of kiln.distributed's process group, but none is "
                                 f"initialized; call kiln.distributed.init_process_group first "
                                 f"or pass both")
        if num_replicas is None:
            num_replicas = dist.get_world_size()
        if rank is None:
            rank = dist.get_rank()
        self.num_replicas = checked_int(owner, "num_replicas", num_replicas, 1)
        self.rank = checked_int(owner, "rank", rank)
        if not 0 <= self.rank < self.num_replicas:
            raise KilnValueError(f"{owner}: invalid rank {self.rank}, rank should be in the "
                                 f"interval [0, {self.num_replicas - 1}]")
        self.dataset = dataset
        self.epoch = 0
        self.shuffle = checked_bool(owner, "shuffle", shuffle)
        self.seed = checked_int(owner, "seed", seed)
        self.drop_last = checked_bool(owner, "drop_last", drop_last)
        length = len(dataset)
        if drop_last and length % self.num_replicas:
            self.num_samples = math.ceil((length - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(length / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        length = len(self.dataset)
        if self.shuffle:
            generator = mint.Generator().manual_seed(self.seed + self.epoch)
            indices = mint.randperm(length, generator=generator).tolist()
        else:
            indices = list(range(length))
        if self.drop_last:
            indices = indices[:self.total_size]
        elif indices:
            padding = self.total_size - length
            indices += (indices * math.ceil(padding / length))[:padding]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """The epoch the next pass shuffles for (with ``shuffle``, each epoch's order differs;
        every rank must pass the same)."""
        self.epoch = checked_int("DistributedSampler.set_epoch", "epoch", epoch)
