"""kiln.utils.data: datasets, samplers and DataLoader, with ``torch.utils.data``'s API and
semantics.

    import kiln
    import kiln.utils.data as data

    ds = data.TensorDataset(x, y)                       # kiln tensors or NumPy arrays
    train, val = data.random_split(ds, [0.8, 0.2])      # seeded by kiln.manual_seed
    for xb, yb in data.DataLoader(train, batch_size=32, shuffle=True, num_workers=2):
        ...

- Datasets (kiln/utils/data/dataset.py): ``Dataset`` (``a + b`` concatenates),
  ``IterableDataset``, ``TensorDataset``, ``ConcatDataset``, ``ChainDataset``, ``Subset``,
  ``random_split(dataset, lengths or fractions)``.
- Samplers (kiln/utils/data/sampler.py): ``Sampler``, ``SequentialSampler``, ``RandomSampler``,
  ``SubsetRandomSampler``, ``WeightedRandomSampler``, ``BatchSampler``, ``DistributedSampler``
  (``num_replicas`` and ``rank`` from ``kiln.distributed``'s process group by default).
- Collation (kiln/utils/data/collate.py): ``default_collate`` (Python floats give float64, as in
  PyTorch), ``default_convert``.
- ``DataLoader`` and ``get_worker_info`` (kiln/utils/data/dataloader.py). Its workers are threads,
  not processes: see Note [DataLoader workers are threads] there.

Random order (shuffling, ``random_split``, the random samplers) draws from the ``generator``
given (a ``kiln.Generator``, as PyTorch takes a torch.Generator), or with None from the default
generator, so that ``kiln.manual_seed`` makes it repeat; anything else is a KilnTypeError.
``DistributedSampler`` shuffles with a generator of its own, seeded with ``seed + epoch``.
"""

from .collate import default_collate, default_convert
from .dataloader import DataLoader, WorkerInfo, get_worker_info
from .dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset,
                      random_split)
from .sampler import (BatchSampler, DistributedSampler, RandomSampler, Sampler, SequentialSampler,
                      SubsetRandomSampler, WeightedRandomSampler)

__all__ = ["BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset",
           "DistributedSampler", "IterableDataset", "RandomSampler", "Sampler",
           "SequentialSampler", "Subset", "SubsetRandomSampler", "TensorDataset",
           "WeightedRandomSampler", "WorkerInfo", "default_collate", "default_convert",
           "get_worker_info", "random_split"]
