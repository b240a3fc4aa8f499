"""kiln.utils.data without PyTorch: datasets, random_split's lengths, collation of nested samples
and their dtypes, the samplers' exact index sequences (PyTorch's documented rules, the random
ones against kiln.mint.randperm / randint / multinomial after kiln.manual_seed or from a
kiln.Generator), and the DataLoader's checks, batches with and without worker threads (and their
seeds), errors, streams and shutdown.
test_data_torch.py compares the same with torch.utils.data where PyTorch is installed."""

import collections
import gc
import threading
import time

import numpy as np
import pytest

import kiln
import kiln.distributed as dist
import kiln.utils.data as data
from conftest import raises
from test_runtime import run_python

mint = kiln.mint
Point = collections.namedtuple("Point", ["x", "y"])


def values(batch):
    """A batch with its tensors as (dtype name, nested list) pairs, for exact comparisons."""
    if isinstance(batch, kiln.Tensor):
        return batch.dtype.name, batch.tolist()
    if isinstance(batch, dict):
        return {key: values(value) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(values(value) for value in batch)
    return batch


class Squares(data.Dataset):
    """Sample i: (i, i * i) as ints; `calls` counts __getitem__ calls."""

    def __init__(self, n):
        self.n = n
        self.calls = 0

    def __getitem__(self, index):
        if not 0 <= index < self.n:
            raise IndexError(index)
        self.calls += 1
        return index, index * index

    def __len__(self):
        return self.n


class Stream(data.IterableDataset):
    """range(start, stop), each worker thread taking its share (PyTorch's documented split)."""

    def __init__(self, start, stop, split=True):
        self.start, self.stop, self.split = start, stop, split

    def __iter__(self):
        info = data.get_worker_info()
        if info is None or not self.split:
            return iter(range(self.start, self.stop))
        per_worker = -(-(self.stop - self.start) // info.num_workers)
        first = self.start + info.id * per_worker
        return iter(range(first, min(first + per_worker, self.stop)))


# ----------------------------------------------------------------------------------- datasets


def test_tensor_dataset_rows_of_tensors_and_arrays():
    x = mint.arange(12).reshape(6, 2)
    y = np.arange(6, dtype=np.float32) / 2
    ds = data.TensorDataset(x, y)
    assert len(ds) == 6
    row, label = ds[4]
    assert row.tolist() == [8, 9] and label == 2.0
    assert values(data.default_collate([ds[0], ds[5]])) == [
        ("int64", [[0, 1], [10, 11]]), ("float32", [0.0, 2.5])]


@pytest.mark.parametrize("tensors, error, match", [
    ((), kiln.KilnTypeError, "at least one tensor"),
    (([1, 2],), kiln.KilnTypeError, "tensor 0 to be a kiln.Tensor or a numpy.ndarray, got list"),
    ((np.float32(1),), kiln.KilnTypeError, "got float32"),
    ((np.array(1.0),), kiln.ShapeError, "tensor 0 to have a first dimension"),
    ((np.zeros((3, 2)), np.zeros(4)), kiln.ShapeError,
     r"3 rows \(the first dimension of tensor 0\), got tensor 1 of shape \(4,\)"),
])
def test_tensor_dataset_refuses_mismatched_first_dims(tensors, error, match):
    with raises(error, match=match):
        data.TensorDataset(*tensors)


def test_tensor_dataset_mixed_kinds_mismatch():
    with raises(kiln.ShapeError, match=r"got tensor 2 of shape \(5, 1\)"):
        data.TensorDataset(mint.zeros(4), np.zeros(4), mint.zeros(5, 1))


def test_concat_dataset_indexes_across_parts_and_add():
    ds = Squares(3) + data.TensorDataset(np.arange(10, 14))
    assert isinstance(ds, data.ConcatDataset) and ds.cumulative_sizes == [3, 7]
    assert len(ds) == 7 and ds[2] == (2, 4) and ds[3][0] == 10 and ds[-1][0] == 13
    assert ds[-7] == (0, 0)
    assert [sample[0] for sample in ds] == [0, 1, 2, 10, 11, 12, 13]  # IndexError ends it
    for index in (7, -8):
        with raises(kiln.KilnIndexError, match=f"index {index} is out of range"):
            ds[index]
    with raises(kiln.KilnValueError, match="at least one dataset"):
        data.ConcatDataset([])
    with raises(kiln.KilnTypeError, match="IterableDataset at position 1"):
        data.ConcatDataset([Squares(2), Stream(0, 2)])


def test_chain_dataset_and_base_classes():
    chained = Stream(0, 2) + Stream(5, 7)
    assert isinstance(chained, data.ChainDataset) and list(chained) == [0, 1, 5, 6]
    with raises(kiln.KilnTypeError, match="expected IterableDatasets, got Squares"):
        list(data.ChainDataset([Squares(2)]))
    with pytest.raises(NotImplementedError):
        data.Dataset()[0]
    with pytest.raises(NotImplementedError):
        iter(data.IterableDataset())


def test_subset_indexes_and_batches():
    class Batched(Squares):
        def __getitems__(self, indices):
            return [("batched", i) for i in indices]

    sub = data.Subset(Squares(10), [7, 2, 5])
    assert len(sub) == 3 and sub[0] == (7, 49)
    assert [sample[0] for sample in sub.__getitems__([2, 1])] == [5, 2]
    assert data.Subset(Batched(10), [7, 2]).__getitems__([1, 0]) == [("batched", 2), ("batched", 7)]

    class Doubled(data.Subset):  # redefines __getitem__: the parent's __getitems__ is bypassed
        def __getitem__(self, index):
            return 2 * self.dataset[self.indices[index]][0]

    assert Doubled(Batched(10), [7, 2]).__getitems__([1, 0]) == [4, 14]


@pytest.mark.parametrize("n, lengths, sizes", [
    (10, [3, 7], [3, 7]),
    (10, [0.3, 0.7], [3, 7]),
    (10, [0.33, 0.33, 0.34], [4, 3, 3]),  # floors 3, 3, 3; the remainder goes to the first
    (7, [0.5, 0.5], [4, 3]),
    (11, [0.25, 0.25, 0.25, 0.25], [3, 3, 3, 2]),
    (5, [1.0], [5]),
    (4, [4], [4]),
])
def test_random_split_sizes_follow_pytorchs_rounding(n, lengths, sizes):
    parts = data.random_split(range(n), lengths)
    assert [len(part) for part in parts] == sizes
    assert sorted(i for part in parts for i in part) == list(range(n))


def test_random_split_is_randperm_cut_in_order():
    kiln.manual_seed(21)
    perm = mint.randperm(10).tolist()
    kiln.manual_seed(21)
    parts = data.random_split(Squares(10), [0.2, 0.8])
    assert [part.indices for part in parts] == [perm[:2], perm[2:]]
    assert parts[0][1] == (perm[1], perm[1] ** 2)


def test_random_split_warns_for_an_empty_split_and_checks_lengths():
    with pytest.warns(UserWarning, match="split at index 1 is empty"):
        assert [len(p) for p in data.random_split(range(2), [0.9, 0.1])] == [2, 0]
    with raises(kiln.KilnValueError, match=r"sum to the dataset's length 5, got \[2, 2\]"):
        data.random_split(range(5), [2, 2])
    with raises(kiln.KilnValueError, match="fraction at index 0 is not between 0 and 1"):
        data.random_split(range(5), [-0.5, 1.5])
    with raises(kiln.KilnTypeError, match="int lengths or fractions"):
        data.random_split(range(5), [2.5, 2.5])
    with raises(kiln.KilnValueError, match="non-negative lengths"):
        data.random_split(range(5), [-1, 6])
    with raises(kiln.KilnTypeError, match="random_split: expected generator to be a "
                                          "kiln.Generator or None, got object"):
        data.random_split(range(5), [2, 3], generator=object())


# ---------------------------------------------------------------------------------- collation


def test_default_collate_dtypes_of_python_numbers():
    assert values(data.default_collate([1, 2, 3])) == ("int64", [1, 2, 3])
    # Python floats are float64 in a batch, as in PyTorch.
    assert values(data.default_collate([0.5, 1.5])) == ("float64", [0.5, 1.5])
    assert values(data.default_collate([True, False])) == ("bool", [True, False])
    # An int first: kiln.tensor of the batch (torch.tensor's float32 for a mix).
    assert values(data.default_collate([1, 2.5])) == ("float32", [1.0, 2.5])
    assert data.default_collate(["a", "b"]) == ["a", "b"]
    assert data.default_collate([b"a", b"b"]) == [b"a", b"b"]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8", "bool",
                                   "float16"])
def test_default_collate_numpy_arrays_and_scalars_keep_their_dtype(dtype):
    arrays = [(np.arange(6).reshape(2, 3) + i).astype(dtype) for i in range(3)]
    batch = data.default_collate(arrays)
    assert batch.dtype.name == dtype and batch.shape == (3, 2, 3)
    np.testing.assert_array_equal(batch.numpy(), np.stack(arrays))
    scalars = data.default_collate([np.dtype(dtype).type(v) for v in (0, 1, 1)])
    assert values(scalars) == (dtype, np.array([0, 1, 1], dtype).tolist())


def test_default_collate_read_only_arrays_and_kiln_tensors():
    frozen = np.arange(3.0)
    frozen.flags.writeable = False
    assert values(data.default_collate([frozen, frozen])) == ("float64", [[0, 1, 2]] * 2)
    batch = data.default_collate([mint.ones(2, 2, dtype=kiln.bfloat16)] * 2)
    assert batch.shape == (2, 2, 2) and batch.dtype == kiln.bfloat16


def test_default_collate_nested_structures():
    samples = [{"image": np.full(2, i, np.float32), "label": i, "meta": Point(i * 0.5, f"s{i}"),
                "pair": (i, [i, -i])} for i in range(3)]
    batch = data.default_collate(samples)
    assert type(batch) is dict and list(batch) == ["image", "label", "meta", "pair"]
    assert values(batch["image"]) == ("float32", [[0, 0], [1, 1], [2, 2]])
    assert values(batch["label"]) == ("int64", [0, 1, 2])
    assert type(batch["meta"]) is Point
    assert values(batch["meta"].x) == ("float64", [0.0, 0.5, 1.0])
    assert batch["meta"].y == ("s0", "s1", "s2")  # a column stays a tuple, as in PyTorch
    # A tuple becomes a list of columns; a list stays a list.
    assert values(batch["pair"]) == [("int64", [0, 1, 2]),
                                     [("int64", [0, 1, 2]), ("int64", [0, -1, -2])]]
    ordered = collections.OrderedDict(a=1)
    assert type(data.default_collate([ordered, ordered])) is collections.OrderedDict


def test_default_collate_errors():
    with raises(kiln.KilnValueError, match=r"same length, got lengths \[2, 3\]"):
        data.default_collate([[1, 2], [1, 2, 3]])
    with raises(kiln.KilnTypeError, match="found <class 'object'>"):
        data.default_collate([object(), object()])
    with raises(kiln.KilnTypeError, match="found <U1"):
        data.default_collate([np.array(["a"]), np.array(["b"])])
    with raises(kiln.ShapeError):
        data.default_collate([mint.zeros(2), mint.zeros(3)])


def test_default_convert():
    array = np.arange(4.0)
    converted = data.default_convert(array)
    assert isinstance(converted, kiln.Tensor) and converted.dtype == kiln.float64
    array[0] = 7.0  # the memory is shared, as torch.as_tensor shares it
    assert converted.tolist()[0] == 7.0
    out = data.default_convert({"a": (np.int32(3), 2.5), "b": Point(np.zeros(1), "s"),
                                "c": np.array(["x"]), "d": [np.ones(1)]})
    assert values(out["a"]) == [("int32", 3), 2.5]
    assert type(out["b"]) is Point and out["b"].y == "s"
    assert values(out["b"].x) == ("float64", [0.0])
    assert isinstance(out["c"], np.ndarray) and values(out["d"]) == [("float64", [1.0])]
    assert data.default_convert(5) == 5 and data.default_convert("s") == "s"


# ----------------------------------------------------------------------------------- samplers


def test_sequential_and_batch_samplers():
    assert list(data.SequentialSampler(range(4))) == [0, 1, 2, 3]
    assert len(data.SequentialSampler(range(4))) == 4
    seq = data.SequentialSampler(range(10))
    assert list(data.BatchSampler(seq, 3, False)) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert list(data.BatchSampler(seq, 3, True)) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert len(data.BatchSampler(seq, 3, False)) == 4 and len(data.BatchSampler(seq, 3, True)) == 3
    assert list(data.BatchSampler([5, 1, 4, 2], 2, True)) == [[5, 1], [4, 2]]
    assert list(data.BatchSampler([], 2, False)) == []


def test_random_sampler_is_randperm_after_manual_seed():
    kiln.manual_seed(3)
    first, second = mint.randperm(10).tolist(), mint.randperm(10).tolist()
    kiln.manual_seed(3)
    sampler = data.RandomSampler(range(10))
    assert list(sampler) == first and list(sampler) == second and len(sampler) == 10
    # More samples than the length: whole permutations, then the head of one more.
    kiln.manual_seed(3)
    assert list(data.RandomSampler(range(10), num_samples=13)) == first + second[:3]
    kiln.manual_seed(3)
    assert list(data.RandomSampler(range(10), num_samples=4)) == first[:4]


def test_random_sampler_with_replacement_draws_randint_in_chunks_of_32():
    kiln.manual_seed(4)
    want = mint.randint(0, 7, (32,)).tolist() + mint.randint(0, 7, (8,)).tolist()
    kiln.manual_seed(4)
    got = list(data.RandomSampler(range(7), replacement=True, num_samples=40))
    assert got == want and min(got) >= 0 and max(got) < 7


def test_subset_and_weighted_random_samplers():
    kiln.manual_seed(5)
    perm = mint.randperm(4).tolist()
    kiln.manual_seed(5)
    indices = [10, 20, 30, 40]
    assert list(data.SubsetRandomSampler(indices)) == [indices[i] for i in perm]
    weights = [0.0, 1.0, 3.0, 0.0, 2.0]
    kiln.manual_seed(6)
    want = mint.multinomial(kiln.tensor(weights, dtype=kiln.float64), 50, True).tolist()
    kiln.manual_seed(6)
    sampler = data.WeightedRandomSampler(weights, 50)
    assert list(sampler) == want and len(sampler) == 50 and set(want) <= {1, 2, 4}
    assert sampler.weights.dtype == kiln.float64
    assert sorted(data.WeightedRandomSampler(np.array(weights), 3, replacement=False)) == [1, 2, 4]


@pytest.mark.parametrize("make, error, match", [
    (lambda: data.RandomSampler(range(3), generator=object()), kiln.KilnTypeError,
     "RandomSampler: expected generator to be a kiln.Generator or None, got object"),
    (lambda: data.SubsetRandomSampler([1], generator=1), kiln.KilnTypeError,
     "SubsetRandomSampler: expected generator to be a kiln.Generator or None, got int 1"),
    (lambda: data.WeightedRandomSampler([1.0], 1, generator=3), kiln.KilnTypeError,
     "WeightedRandomSampler: expected generator to be a kiln.Generator or None, got int 3"),
    (lambda: data.RandomSampler(range(3), replacement=1), kiln.KilnTypeError,
     "replacement must be a bool, got int 1"),
    (lambda: data.RandomSampler(range(0)), kiln.KilnValueError,
     "num_samples must be at least 1, got 0"),
    (lambda: data.RandomSampler(range(3), num_samples=2.0), kiln.KilnTypeError,
     "num_samples must be an int"),
    (lambda: data.WeightedRandomSampler([[1.0, 2.0]], 1), kiln.KilnValueError,
     r"weights to be a 1-d sequence, got shape \(1, 2\)"),
    (lambda: data.WeightedRandomSampler([1.0], 0), kiln.KilnValueError, "num_samples"),
    (lambda: data.WeightedRandomSampler([1.0], 1, replacement=None), kiln.KilnTypeError,
     "replacement must be a bool"),
    (lambda: data.BatchSampler(range(3), 0, False), kiln.KilnValueError,
     "batch_size must be at least 1, got 0"),
    (lambda: data.BatchSampler(range(3), 2, 0), kiln.KilnTypeError, "drop_last must be a bool"),
])
def test_sampler_argument_errors(make, error, match):
    with raises(error, match=match):
        make()


def random_orders(generator):
    """Two passes of each random sampler and a random_split, all drawing from `generator`."""
    samplers = [data.RandomSampler(range(10), generator=generator),
                data.RandomSampler(range(7), True, 40, generator=generator),
                data.SubsetRandomSampler([10, 20, 30, 40], generator=generator),
                data.WeightedRandomSampler([0.0, 1.0, 3.0, 0.0, 2.0], 20, generator=generator)]
    orders = [list(sampler) for sampler in samplers for _ in range(2)]
    split = data.random_split(range(10), [0.3, 0.7], generator=generator)
    return orders + [part.indices for part in split]


def test_random_samplers_and_random_split_draw_from_their_generator():
    kiln.manual_seed(0)
    state = kiln.get_rng_state().numpy()
    first = random_orders(kiln.Generator().manual_seed(8))
    np.testing.assert_array_equal(kiln.get_rng_state().numpy(), state)  # default left alone
    assert random_orders(kiln.Generator().manual_seed(8)) == first
    assert random_orders(kiln.Generator().manual_seed(9)) != first
    assert first[0] != first[1]  # each pass draws afresh from the generator
    assert sorted(first[0]) == list(range(10)) and sorted(first[8] + first[9]) == list(range(10))
    # A generator of seed s draws what the default generator draws after manual_seed(s).
    kiln.manual_seed(8)
    assert random_orders(None) == first
    sampler = data.RandomSampler(range(3), generator=kiln.default_generator)
    assert sampler.generator is kiln.default_generator and sorted(sampler) == [0, 1, 2]


# (length, replicas, drop_last) -> every rank's indices, by PyTorch's rule: pad by repeating
# from the start (or cut to a multiple), rank r takes positions r, r + replicas, ...
DISTRIBUTED_CASES = [
    (10, 4, False, [[0, 4, 8], [1, 5, 9], [2, 6, 0], [3, 7, 1]]),
    (10, 4, True, [[0, 4], [1, 5], [2, 6], [3, 7]]),
    (8, 4, False, [[0, 4], [1, 5], [2, 6], [3, 7]]),
    (8, 4, True, [[0, 4], [1, 5], [2, 6], [3, 7]]),
    (2, 5, False, [[0], [1], [0], [1], [0]]),
    (2, 5, True, [[], [], [], [], []]),
    (7, 3, False, [[0, 3, 6], [1, 4, 0], [2, 5, 1]]),
    (0, 2, False, [[], []]),
]


@pytest.mark.parametrize("length, replicas, drop_last, want", DISTRIBUTED_CASES)
def test_distributed_sampler_assigns_pytorchs_indices(length, replicas, drop_last, want):
    for rank in range(replicas):
        sampler = data.DistributedSampler(range(length), replicas, rank, shuffle=False,
                                          drop_last=drop_last)
        assert list(sampler) == want[rank] and len(sampler) == len(want[rank])


def test_distributed_sampler_shuffles_by_seed_and_epoch_only():
    def shares(epoch, seed=0):
        samplers = [data.DistributedSampler(range(11), 3, rank, seed=seed) for rank in range(3)]
        for sampler in samplers:
            sampler.set_epoch(epoch)
        return [list(sampler) for sampler in samplers]

    kiln.manual_seed(9)
    first = shares(0)
    after = mint.randperm(20).tolist()
    kiln.manual_seed(9)
    assert mint.randperm(20).tolist() == after  # the global generator was not used
    assert [len(share) for share in first] == [4, 4, 4]
    # Rank r takes positions r, r + 3, ... of one permutation padded by its first element.
    merged = [share[i] for i in range(4) for share in first]
    assert sorted(merged[:11]) == list(range(11)) and merged[11] == merged[0]
    kiln.manual_seed(1)
    assert shares(0) == first  # every rank and every process draws the same order
    assert shares(1) != first and shares(0, seed=5) != first and shares(1) == shares(1)
    assert shares(2, seed=3) == shares(0, seed=5)  # seed + epoch is all that counts
    assert sorted(sum(shares(-3, seed=1), [])[:11]) == list(range(11))  # negative seeds work
    # The permutation is randperm's from a kiln.Generator seeded with seed + epoch, as PyTorch
    # draws it from a torch.Generator.
    assert merged[:11] == mint.randperm(11, generator=kiln.Generator().manual_seed(0)).tolist()
    assert list(data.DistributedSampler(range(0), 2, 1)) == []


def test_distributed_sampler_needs_a_process_group_or_both_arguments(tmp_path):
    assert not dist.is_initialized()
    for kwargs in ({}, {"num_replicas": 2}, {"rank": 0}):
        with raises(kiln.KilnValueError, match="no.*process group|none is initialized"):
            data.DistributedSampler(range(4), **kwargs)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0,
                            world_size=1, timeout=30)
    try:
        sampler = data.DistributedSampler(range(5), shuffle=False)
        assert (sampler.num_replicas, sampler.rank, list(sampler)) == (1, 0, [0, 1, 2, 3, 4])
    finally:
        dist.destroy_process_group()
    with raises(kiln.KilnValueError, match=r"invalid rank 3, rank should be in the interval "
                                           r"\[0, 2\]"):
        data.DistributedSampler(range(4), 3, 3)
    with raises(kiln.KilnValueError, match="num_replicas must be at least 1"):
        data.DistributedSampler(range(4), 0, 0)
    with raises(kiln.KilnTypeError, match="epoch must be an int"):
        data.DistributedSampler(range(4), 1, 0).set_epoch(1.5)


# --------------------------------------------------------------------------------- DataLoader


def batches(loader):
    return [values(batch) for batch in loader]


def test_data_loader_batches_and_len():
    ds = Squares(7)
    loader = data.DataLoader(ds, batch_size=3)
    assert len(loader) == 3 and batches(loader) == [
        [("int64", [0, 1, 2]), ("int64", [0, 1, 4])],
        [("int64", [3, 4, 5]), ("int64", [9, 16, 25])],
        [("int64", [6]), ("int64", [36])]]
    assert len(data.DataLoader(ds, batch_size=3, drop_last=True)) == 2
    assert len(batches(data.DataLoader(ds, batch_size=3, drop_last=True))) == 2
    assert batches(data.DataLoader(ds))[1] == [("int64", [1]), ("int64", [1])]
    # batch_size=None: no batching, each sample default_convert'ed (a tuple becomes a list).
    assert batches(data.DataLoader(data.TensorDataset(np.arange(3)), batch_size=None)) == [
        [("int64", 0)], [("int64", 1)], [("int64", 2)]]
    custom = data.DataLoader(ds, batch_size=2, collate_fn=lambda b: [s[0] for s in b])
    assert list(custom) == [[0, 1], [2, 3], [4, 5], [6]]
    by_batch_sampler = data.DataLoader(ds, batch_sampler=[[6, 0], [3]])
    assert batches(by_batch_sampler) == [[("int64", [6, 0]), ("int64", [36, 0])],
                                         [("int64", [3]), ("int64", [9])]]
    by_sampler = data.DataLoader(ds, batch_size=2, sampler=[4, 2, 5])
    assert [b[0] for b in batches(by_sampler)] == [("int64", [4, 2]), ("int64", [5])]


def test_data_loader_shuffle_follows_manual_seed():
    ds = Squares(10)
    kiln.manual_seed(2)
    first = batches(data.DataLoader(ds, batch_size=4, shuffle=True))
    kiln.manual_seed(2)
    assert batches(data.DataLoader(ds, batch_size=4, shuffle=True)) == first
    order = [i for batch in first for i in batch[0][1]]
    assert sorted(order) == list(range(10)) and order != list(range(10))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_data_loader_shuffle_and_worker_seeds_follow_its_generator(num_workers):
    def passes(seed):
        seeds = []
        generator = kiln.Generator().manual_seed(seed)
        loader = data.DataLoader(
            Squares(10), batch_size=4, shuffle=True, generator=generator,
            num_workers=num_workers,
            worker_init_fn=lambda worker_id: seeds.append(data.get_worker_info().seed))
        assert loader.generator is generator and loader.sampler.generator is generator
        orders = [[i for batch in batches(loader) for i in batch[0][1]] for _ in range(2)]
        return orders, sorted(seeds)

    kiln.manual_seed(0)
    state = kiln.get_rng_state().numpy()
    orders, seeds = passes(4)
    np.testing.assert_array_equal(kiln.get_rng_state().numpy(), state)  # default left alone
    assert passes(4) == (orders, seeds) and passes(5)[0] != orders
    # Each pass draws its workers' base seed from the generator, then its order (PyTorch's
    # sequence), whatever the worker count.
    generator = kiln.Generator().manual_seed(4)
    want_orders, want_seeds = [], []
    for _ in range(2):
        base = int(mint.randint(0, 2**63 - 1, (), generator=generator).item())
        want_seeds += [base + worker_id for worker_id in range(num_workers)]
        want_orders.append(mint.randperm(10, generator=generator).tolist())
    assert orders == want_orders and seeds == sorted(want_seeds)


def test_data_loader_uses_getitems_for_a_batch():
    class Batched(Squares):
        def __getitems__(self, indices):
            return [(i, -i) for i in indices]

    assert batches(data.DataLoader(Batched(3), batch_size=2))[0] == [("int64", [0, 1]),
                                                                     ("int64", [0, -1])]


@pytest.mark.parametrize("kwargs, error, match", [
    ({"shuffle": True, "sampler": [0]}, kiln.KilnValueError,
     "sampler option is mutually exclusive with shuffle"),
    ({"batch_sampler": [[0]], "batch_size": 2}, kiln.KilnValueError,
     "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
     "drop_last"),
    ({"batch_sampler": [[0]], "drop_last": True}, kiln.KilnValueError, "mutually exclusive"),
    ({"batch_sampler": [[0]], "sampler": [0]}, kiln.KilnValueError, "mutually exclusive"),
    ({"batch_sampler": [[0]], "shuffle": True}, kiln.KilnValueError, "mutually exclusive"),
    ({"batch_size": None, "drop_last": True}, kiln.KilnValueError,
     "batch_size=None option disables auto-batching and is mutually exclusive with drop_last"),
    ({"num_workers": -1}, kiln.KilnValueError, "num_workers must be at least 0"),
    ({"num_workers": 1.0}, kiln.KilnTypeError, "num_workers must be an int"),
    ({"prefetch_factor": 2}, kiln.KilnValueError, "prefetch_factor applies to worker threads"),
    ({"num_workers": 1, "prefetch_factor": 0}, kiln.KilnValueError,
     "prefetch_factor must be at least 1"),
    ({"persistent_workers": True}, kiln.KilnValueError, "persistent_workers needs num_workers"),
    ({"timeout": -1}, kiln.KilnValueError, "timeout must be non-negative"),
    ({"timeout": "1"}, kiln.KilnTypeError, "timeout must be a number of seconds"),
    ({"timeout": 1}, kiln.KilnValueError, "timeout applies to worker threads"),
    ({"generator": object()}, kiln.KilnTypeError,
     "DataLoader: expected generator to be a kiln.Generator or None, got object"),
    ({"generator": 0, "shuffle": True}, kiln.KilnTypeError,
     "DataLoader: expected generator to be a kiln.Generator or None, got int 0"),
    ({"batch_size": 0}, kiln.KilnValueError, "batch_size must be at least 1"),
    ({"multiprocessing_context": "spawn"}, kiln.KilnNotImplementedError,
     "multiprocessing_context must be None: Kiln's workers are threads"),
    ({"in_order": False}, kiln.KilnNotImplementedError, "in_order=False is not supported"),
    ({"pin_memory_device": 0}, kiln.KilnTypeError, "pin_memory_device must be a str"),
])
def test_data_loader_argument_errors(kwargs, error, match):
    with raises(error, match=match):
        data.DataLoader(Squares(4), **kwargs)


@pytest.mark.parametrize("kwargs", [{"shuffle": True}, {"sampler": [0]},
                                    {"batch_sampler": [[0]]}])
def test_data_loader_iterable_dataset_takes_no_sampler(kwargs):
    name = next(iter(kwargs))
    with raises(kiln.KilnValueError, match=f"IterableDataset: expected unspecified {name} "
                                           f"option"):
        data.DataLoader(Stream(0, 4), **kwargs)


def test_data_loader_attributes_are_fixed_after_init():
    loader = data.DataLoader(Squares(4))
    with raises(kiln.KilnValueError, match="batch_size attribute should not be set"):
        loader.batch_size = 2
    loader.num_workers = 0  # not one of PyTorch's fixed attributes


def test_data_loader_iterable_dataset_without_workers():
    assert batches(data.DataLoader(Stream(0, 5), batch_size=2)) == [
        ("int64", [0, 1]), ("int64", [2, 3]), ("int64", [4])]
    assert batches(data.DataLoader(Stream(0, 5), batch_size=2, drop_last=True)) == [
        ("int64", [0, 1]), ("int64", [2, 3])]
    assert list(data.DataLoader(Stream(0, 3), batch_size=None)) == [0, 1, 2]
    with pytest.raises(TypeError):  # no __len__
        len(data.DataLoader(Stream(0, 5)))

    class Sized(Stream):
        def __len__(self):
            return self.stop - self.start

    assert len(data.DataLoader(Sized(0, 5), batch_size=2)) == 3
    assert len(data.DataLoader(Sized(0, 5), batch_size=2, drop_last=True)) == 2
    assert len(data.DataLoader(Sized(0, 5), batch_size=None)) == 5


@pytest.mark.parametrize("workers, prefetch", [(1, 1), (2, None), (3, 2), (4, 3)])
@pytest.mark.parametrize("shuffle", [False, True])
def test_data_loader_workers_give_the_same_batches(workers, prefetch, shuffle):
    ds = data.TensorDataset(mint.arange(23).reshape(23, 1).float(), np.arange(23))
    kiln.manual_seed(11)
    want = batches(data.DataLoader(ds, batch_size=4, shuffle=shuffle))
    kiln.manual_seed(11)
    loader = data.DataLoader(ds, batch_size=4, shuffle=shuffle, num_workers=workers,
                             prefetch_factor=prefetch)
    assert batches(loader) == want and len(loader) == 6
    for kwargs in ({"batch_size": None}, {"batch_size": 5, "drop_last": True}):
        kiln.manual_seed(12)
        want = batches(data.DataLoader(ds, shuffle=shuffle, **kwargs))
        kiln.manual_seed(12)
        assert batches(data.DataLoader(ds, shuffle=shuffle, num_workers=workers,
                                       **kwargs)) == want


def test_data_loader_workers_are_threads_with_worker_info():
    seen = []

    def init(worker_id):
        info = data.get_worker_info()
        seen.append((worker_id, info.id, info.num_workers, threading.current_thread().name))
        info.dataset.tag = worker_id  # the worker's own copy

    class Tagged(Squares):
        tag = None

        def __getitem__(self, index):
            info = data.get_worker_info()
            return index, self.tag, info.id, info.seed - info.id

    ds = Tagged(6)
    assert data.get_worker_info() is None
    out = list(data.DataLoader(ds, batch_size=1, num_workers=3, worker_init_fn=init,
                               collate_fn=lambda b: b[0]))
    assert sorted(seen) == [(i, i, 3, f"kiln-data-worker-{i}") for i in range(3)]
    # Batch k goes to worker k % 3; each worker sees its own tag; one base seed per pass.
    assert [(i, tag, worker) for i, tag, worker, _ in out] == [(i, i % 3, i % 3) for i in range(6)]
    assert len({base for *_, base in out}) == 1
    assert ds.tag is None and data.get_worker_info() is None


def data_workers(wait=False):
    """The number of DataLoader worker threads alive; with `wait`, after waiting (at most 5 s)
    for them to end."""
    gc.collect()
    deadline = time.monotonic() + (5 if wait else 0)
    while True:
        alive = sum(t.name.startswith("kiln-data-worker") for t in threading.enumerate())
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.01)


class Faulty(Squares):
    def __getitem__(self, index):
        if index in (5, 9):
            raise KeyError(f"bad sample {index}")
        return super().__getitem__(index)


@pytest.mark.parametrize("workers", [0, 2])
def test_data_loader_worker_exception_is_raised_at_its_batch(workers):
    it = iter(data.DataLoader(Faulty(10), batch_size=2, num_workers=workers))
    assert values(next(it))[0] == ("int64", [0, 1])
    assert values(next(it))[0] == ("int64", [2, 3])
    with pytest.raises(KeyError, match="bad sample 5"):
        next(it)
    assert values(next(it))[0] == ("int64", [6, 7])  # later batches still come
    with pytest.raises(KeyError, match="bad sample 9"):
        next(it)
    with pytest.raises(StopIteration):
        next(it)
    # The exception's traceback holds the iterator; dropping both stops the workers (the
    # worker that raised it, at the last batch, kept no reference).
    it = iter(data.DataLoader(Faulty(10), batch_size=2, sampler=range(6, 10),
                              num_workers=workers))
    with pytest.raises(KeyError, match="bad sample 9") as caught:
        list(it)
    del it, caught
    assert data_workers(wait=True) == 0


def test_data_loader_worker_init_failure_ends_the_pass():
    def failing_init(worker_id):
        raise RuntimeError(f"init failed in {worker_id}")

    loader = data.DataLoader(Squares(4), num_workers=2, worker_init_fn=failing_init,
                             persistent_workers=True)
    it = iter(loader)
    with pytest.raises(RuntimeError, match="init failed in 0"):
        next(it)
    with pytest.raises(StopIteration):
        next(it)
    assert data_workers() == 0
    with pytest.raises(RuntimeError, match="init failed in 0"):
        list(loader)  # a new pass starts new workers


def test_data_loader_persistent_worker_retries_a_failed_init_at_the_next_pass():
    attempts = []

    def flaky_init(worker_id):
        attempts.append(worker_id)
        if attempts.count(1) == 1 and worker_id == 1:
            raise RuntimeError("the first init of worker 1 failed")

    loader = data.DataLoader(Squares(6), batch_size=1, num_workers=2, persistent_workers=True,
                             worker_init_fn=flaky_init, timeout=5)
    for batch in loader:  # batch 0 from worker 0: worker 1's failure is never reached
        break
    assert [batch[0].tolist() for batch in loader] == [[i] for i in range(6)]
    assert sorted(attempts) == [0, 1, 1]


def test_data_loader_stops_its_threads():
    before = threading.active_count()
    loader = data.DataLoader(Squares(40), batch_size=2, num_workers=3)
    for _ in range(2):  # iterating twice: fresh threads each pass, gone at its end
        assert len(list(loader)) == 20
        assert threading.active_count() == before
    for batch in loader:
        assert threading.active_count() == before + 3
        break
    assert threading.active_count() == before  # the dropped iterator joined them
    it = iter(loader)
    next(it)
    del it
    assert threading.active_count() == before


def test_data_loader_persistent_workers_keep_their_threads():
    calls = []
    ds = Squares(9)
    loader = data.DataLoader(ds, batch_size=2, num_workers=2, persistent_workers=True,
                             worker_init_fn=calls.append)
    want = batches(data.DataLoader(ds, batch_size=2))
    assert batches(loader) == want
    for batch in loader:  # a pass cut short: the next one starts from the beginning
        break
    assert batches(loader) == want and sorted(calls) == [0, 1]
    assert data_workers() == 2
    del loader
    assert data_workers(wait=True) == 0


def test_data_loader_workers_stop_at_interpreter_exit():
    # Daemon threads still waiting at the exit (a persistent loader's, a pass left half done)
    # would be frozen holding their datasets' tensors, which nanobind reports as leaked.
    done = run_python("""
        import kiln
        import kiln.utils.data as data
        ds = data.TensorDataset(kiln.mint.arange(20).reshape(10, 2).float())
        persistent = data.DataLoader(ds, batch_size=3, num_workers=2, persistent_workers=True)
        assert len(list(persistent)) == 4
        half = iter(data.DataLoader(ds, batch_size=3, num_workers=2))
        next(half)
        print("ok")
    """, timeout=60)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr
    assert "leaked" not in done.stderr


def test_data_loader_timeout_raises_kiln_error():
    class Slow(Squares):
        def __getitem__(self, index):
            if index == 2:
                time.sleep(0.3)
            return super().__getitem__(index)

    it = iter(data.DataLoader(Slow(4), num_workers=1, timeout=0.05))
    assert values(next(it))[0] == ("int64", [0])
    assert values(next(it))[0] == ("int64", [1])
    with pytest.raises(kiln.KilnError, match="DataLoader timed out after 0.05 seconds"):
        next(it)
    with pytest.raises(StopIteration):
        next(it)
    del it
    assert data_workers(wait=True) == 0  # the late worker finishes its batch and stops
    assert len(list(data.DataLoader(Squares(4), num_workers=2, timeout=5))) == 4


def round_robin(n, workers, batch_size):
    """PyTorch's order for range(n) split by worker (ceil(n / workers) each) in batches: one
    batch from each worker in turn, skipping the workers whose share has ended."""
    per_worker = -(-n // workers)
    shares = [list(range(n))[w * per_worker:(w + 1) * per_worker] for w in range(workers)]
    chunks = [[share[i:i + batch_size] for i in range(0, len(share), batch_size)]
              for share in shares]
    return [chunk[k] for k in range(max(map(len, chunks))) for chunk in chunks if k < len(chunk)]


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_data_loader_iterable_dataset_with_workers(workers):
    loader = data.DataLoader(Stream(0, 10), batch_size=2, num_workers=workers)
    assert [batch.tolist() for batch in loader] == round_robin(10, workers, 2)
    unbatched = data.DataLoader(Stream(0, 5), batch_size=None, num_workers=workers)
    assert [[i] for i in unbatched] == round_robin(5, workers, 1)
    # Without a split every worker yields the whole stream, as PyTorch's worker processes do.
    unsplit = [b.tolist() for b in data.DataLoader(Stream(0, 3, split=False), batch_size=2,
                                                    num_workers=workers)]
    assert unsplit == [[0, 1]] * workers + [[2]] * workers
