"""Datasets: ``Dataset`` (map-style), ``IterableDataset`` (a stream), ``TensorDataset``,
``ConcatDataset``, ``ChainDataset``, ``Subset`` and ``random_split``, as ``torch.utils.data``'s.

A map-style dataset has ``__getitem__`` (and usually ``__len__``, which the default samplers
need); it may add ``__getitems__(indices)``, returning a batch's samples as a list in one call,
which the DataLoader then uses instead of one ``__getitem__`` per sample.
"""

import bisect
import itertools
import math
import warnings

from ..._numpy import np

from ... import mint
from ..._C import Tensor
from ..._checks import as_int
from ...errors import KilnIndexError, KilnTypeError, KilnValueError, ShapeError
from .sampler import _checked_generator


class Dataset:
    """A map from keys (usually ints 0 .. len - 1) to samples. Subclasses define
    ``__getitem__``, and ``__len__`` for the default samplers; ``a + b`` concatenates."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A stream of samples: subclasses define ``__iter__``. With worker threads each worker
    iterates its own (shallow) copy of the dataset, so a dataset that should not repeat its
    samples splits the work by ``get_worker_info()`` (in ``__iter__`` or ``worker_init_fn``), as
    with PyTorch's worker processes. ``a + b`` chains two streams (``ChainDataset``)."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Sample i is ``tuple(t[i] for t in tensors)``: rows of kiln tensors or NumPy arrays (an
    array's rows stay arrays; ``default_collate`` turns them into kiln tensors). Every tensor
    must have the same first dimension (ShapeError otherwise)."""

    def __init__(self, *tensors):
        if not tensors:
            raise KilnTypeError("TensorDataset: expected at least one tensor (a kiln.Tensor or a "
                                "numpy.ndarray), got none")
        for i, tensor in enumerate(tensors):
            if not isinstance(tensor, (Tensor, np.ndarray)):
                raise KilnTypeError(f"TensorDataset: expected tensor {i} to be a kiln.Tensor or a "
                                    f"numpy.ndarray, got {type(tensor).__name__}")
            if len(tensor.shape) == 0:
                raise ShapeError(f"TensorDataset: expected tensor {i} to have a first dimension "
                                 f"(one row per sample), got a 0-d tensor")
        rows = tensors[0].shape[0]
        for i, tensor in enumerate(tensors):
            if tensor.shape[0] != rows:
                raise ShapeError(f"TensorDataset: expected every tensor to have {rows} rows (the "
                                 f"first dimension of tensor 0), got tensor {i} of shape "
                                 f"{tuple(tensor.shape)}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(tensor[index] for tensor in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class ConcatDataset(Dataset):
    """The samples of several map-style datasets, one after the other. ``cumulative_sizes[k]``
    is the total length of datasets 0 .. k."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise KilnValueError("ConcatDataset: expected at least one dataset, got none")
        for i, dataset in enumerate(self.datasets):
            if isinstance(dataset, IterableDataset):
                raise KilnTypeError(f"ConcatDataset: expected map-style datasets, got an "
                                    f"IterableDataset at position {i} (chain streams with "
                                    f"ChainDataset)")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, index):
        length = len(self)
        # IndexError at both ends, so that Python's sequence iteration stops at the end.
        if not -length <= index < length:
            raise KilnIndexError(f"ConcatDataset: index {index} is out of range for a dataset of "
                                 f"length {length}")
        if index < 0:
            index += length
        which = bisect.bisect_right(self.cumulative_sizes, index)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][index - start]


class ChainDataset(IterableDataset):
    """The samples of several IterableDatasets, one stream after the other (chained as they are
    iterated, so large streams are never held at once)."""

    def __init__(self, datasets):
        self.datasets = datasets

    def _checked(self):
        for dataset in self.datasets:
            if not isinstance(dataset, IterableDataset):
                raise KilnTypeError(f"ChainDataset: expected IterableDatasets, got "
                                    f"{type(dataset).__name__}")
            yield dataset

    def __iter__(self):
        for dataset in self._checked():
            yield from dataset

    def __len__(self):
        return sum(len(dataset) for dataset in self._checked())


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order: ``subset[i]`` is
    ``dataset[indices[i]]``."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, index):
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __getitems__(self, indices):
        # A subclass that redefines __getitem__ is asked per sample: the parent's batched
        # __getitems__ would bypass it.
        batched = getattr(self.dataset, "__getitems__", None)
        if callable(batched) and type(self).__getitem__ is Subset.__getitem__:
            return batched([self.indices[i] for i in indices])
        return [self[i] for i in indices]

    def __len__(self):
        return len(self.indices)


def _split_lengths(lengths, total):
    """PyTorch's rule: fractions (summing to 1) become floor(fraction * total) each, and the
    remainder is handed out one by one from the first split on."""
    sizes = []
    for i, fraction in enumerate(lengths):
        if not 0 <= fraction <= 1:
            raise KilnValueError(f"random_split: fraction at index {i} is not between 0 and 1, "
                                 f"got {fraction}")
        sizes.append(math.floor(total * fraction))
    for i in range(total - sum(sizes)):
        sizes[i % len(sizes)] += 1
    for i, size in enumerate(sizes):
        if size == 0:
            warnings.warn(f"random_split: the split at index {i} is empty", stacklevel=3)
    return sizes


def random_split(dataset, lengths, generator=None):
    """``dataset`` split into non-overlapping random Subsets of the given ``lengths``, or of
    fractions of its length summing to 1 (each floor(fraction * len), the remainder given one
    by one to the first splits, as PyTorch does). The permutation is ``kiln.mint.randperm``'s,
    drawn from ``generator`` (a kiln.Generator; None: the default generator, which
    ``kiln.manual_seed`` seeds), so a generator seeded alike repeats the split."""
    _checked_generator("random_split", generator)
    lengths = list(lengths)
    if not lengths:
        raise KilnValueError("random_split: expected at least one length, got none")
    total = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        lengths = _split_lengths(lengths, total)
    sizes = [as_int(length) for length in lengths]
    if None in sizes:
        raise KilnTypeError(f"random_split: expected int lengths or fractions summing to 1, got "
                            f"{lengths}")
    if min(sizes) < 0:
        raise KilnValueError(f"random_split: expected non-negative lengths, got {sizes}")
    if sum(sizes) != total:
        raise KilnValueError(f"random_split: expected the lengths to sum to the dataset's length "
                             f"{total}, got {sizes} (sum {sum(sizes)})")
    indices = mint.randperm(total, generator=generator).tolist()
    return [Subset(dataset, indices[end - size:end])
            for end, size in zip(itertools.accumulate(sizes), sizes)]
