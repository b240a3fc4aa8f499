"""kiln.utils.data against torch.utils.data: the deterministic samplers' index sequences
(SequentialSampler, BatchSampler, DistributedSampler without shuffling), default_collate's and
default_convert's outputs (containers, dtypes, shapes, values), random_split's lengths, the
DataLoader's unshuffled batches and lengths, and the argument combinations both refuse."""

import collections

import numpy as np
import pytest

import kiln
import kiln.utils.data as data
from conftest import raises

torch = pytest.importorskip("torch")
tdata = torch.utils.data

Point = collections.namedtuple("Point", ["x", "y"])


def same(ours, theirs):
    """Asserts a kiln result has torch's structure: the same containers (and key order), tensors
    of the same dtype, shape and values, other leaves equal."""
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, kiln.Tensor), (ours, theirs)
        assert ours.dtype.name == str(theirs.dtype).replace("torch.", ""), (ours, theirs)
        assert tuple(ours.shape) == tuple(theirs.shape)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
        return
    assert type(ours) is type(theirs), (ours, theirs)
    if isinstance(theirs, dict):
        assert list(ours) == list(theirs)
        for key in theirs:
            same(ours[key], theirs[key])
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            same(a, b)
    elif isinstance(theirs, np.ndarray):
        np.testing.assert_array_equal(ours, theirs)
    else:
        assert ours == theirs


@pytest.mark.parametrize("length", [0, 1, 7, 12])
@pytest.mark.parametrize("batch_size", [1, 3, 5, 12, 13])
@pytest.mark.parametrize("drop_last", [False, True])
def test_sequential_and_batch_samplers_match_torch(length, batch_size, drop_last):
    assert list(data.SequentialSampler(range(length))) == list(
        tdata.SequentialSampler(range(length)))
    ours = data.BatchSampler(data.SequentialSampler(range(length)), batch_size, drop_last)
    theirs = tdata.BatchSampler(tdata.SequentialSampler(range(length)), batch_size, drop_last)
    assert list(ours) == list(theirs) and len(ours) == len(theirs)


@pytest.mark.parametrize("length", [0, 1, 2, 5, 10, 11, 16])
@pytest.mark.parametrize("replicas", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("drop_last", [False, True])
def test_distributed_sampler_without_shuffle_matches_torch(length, replicas, drop_last):
    for rank in range(replicas):
        ours = data.DistributedSampler(range(length), replicas, rank, shuffle=False,
                                       drop_last=drop_last)
        theirs = tdata.DistributedSampler(range(length), replicas, rank, shuffle=False,
                                          drop_last=drop_last)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)
        assert (ours.num_samples, ours.total_size) == (theirs.num_samples, theirs.total_size)


COLLATE_BATCHES = {
    "ints": [0, 1, 2],
    "floats": [0.5, 1.5],
    "bools": [True, False],
    "int then float": [1, 2.5],
    "strings": ["a", "bc"],
    "bytes": [b"a", b"b"],
    "arrays": [np.arange(6, dtype=np.float32).reshape(2, 3) + i for i in range(3)],
    "int32 arrays": [np.array([i, -i], dtype=np.int32) for i in range(2)],
    "bool arrays": [np.array([True, False]), np.array([False, False])],
    "0-d arrays": [np.array(1.5), np.array(2.5)],
    "numpy scalars": [np.float32(1.5), np.float32(2.0)],
    "numpy int scalars": [np.int16(3), np.int16(4)],
    "numpy bools": [np.bool_(True), np.bool_(False)],
    "numpy float64 (a float)": [np.float64(0.25), np.float64(1.0)],
    "tuples": [(0, 1.0, "a"), (2, 3.0, "b")],
    "lists": [[0, 1], [2, 3]],
    "dicts": [{"A": 0, "B": np.zeros(2)}, {"A": 100, "B": np.ones(2)}],
    "ordered dicts": [collections.OrderedDict(b=1, a=2.0)] * 2,
    "namedtuples": [Point(0, "x"), Point(1, "y")],
    "nested": [{"img": np.full((2, 2), i, np.float64), "target": (i, [i * 1.5, "t"]),
                "p": Point(np.int64(i), {"k": True})} for i in range(3)],
}


@pytest.mark.parametrize("name", list(COLLATE_BATCHES))
def test_default_collate_matches_torch(name):
    batch = COLLATE_BATCHES[name]
    same(data.default_collate(batch), tdata.default_collate(batch))


def test_default_collate_of_tensors_matches_torch():
    arrays = [np.arange(4, dtype=np.float32).reshape(2, 2) * i for i in range(3)]
    same(data.default_collate([kiln.tensor(a) for a in arrays]),
         tdata.default_collate([torch.tensor(a) for a in arrays]))
    samples = [(kiln.tensor(a), i) for i, a in enumerate(arrays)]
    same(data.default_collate(samples),
         tdata.default_collate([(torch.tensor(a), i) for i, a in enumerate(arrays)]))


@pytest.mark.parametrize("sample", [
    np.arange(3, dtype=np.int32), np.float32(2.0), 5, "s", (np.zeros(2), 1), [np.ones(1), "a"],
    {"a": np.zeros(1), "b": (1, 2)}, Point(np.zeros(2), 3), np.array(["x", "y"]),
])
def test_default_convert_matches_torch(sample):
    same(data.default_convert(sample), tdata.default_convert(sample))


@pytest.mark.parametrize("length, lengths", [
    (10, [3, 7]), (10, [0.3, 0.7]), (10, [0.33, 0.33, 0.34]), (7, [0.5, 0.5]),
    (11, [0.25, 0.25, 0.25, 0.25]), (5, [1.0]), (100, [0.1] * 10), (3, [0.2, 0.3, 0.5]),
    (1000, [0.123, 0.456, 0.421]), (4, [4]),
])
def test_random_split_lengths_match_torch(length, lengths):
    ours = data.random_split(range(length), lengths)
    theirs = tdata.random_split(range(length), lengths, generator=torch.Generator().manual_seed(0))
    assert [len(s) for s in ours] == [len(s) for s in theirs]


def test_a_torch_generator_is_refused():
    # Ported code passing its torch.Generator would otherwise shuffle by another stream.
    generator = torch.Generator().manual_seed(0)
    for make in (lambda: data.RandomSampler(range(3), generator=generator),
                 lambda: data.random_split(range(3), [1, 2], generator=generator),
                 lambda: data.DataLoader(range(3), shuffle=True, generator=generator)):
        with raises(kiln.KilnTypeError, match="expected generator to be a kiln.Generator or "
                                              "None, got Generator"):
            make()


def test_random_split_refuses_what_torch_refuses():
    for lengths in ([2, 2], [-0.5, 1.5]):
        with pytest.raises(ValueError):
            tdata.random_split(range(5), lengths)
        with raises(ValueError):
            data.random_split(range(5), lengths)


class Pairs:
    """A plain indexable (no Dataset base): sample i is (i, float(i), [i, -i])."""

    def __getitem__(self, index):
        return index, float(index), np.array([index, -index])

    def __len__(self):
        return 7


@pytest.mark.parametrize("kwargs", [
    {}, {"batch_size": 3}, {"batch_size": 3, "drop_last": True}, {"batch_size": None},
    {"batch_size": 2, "sampler": [6, 0, 3]}, {"batch_sampler": [[1, 2], [5], [0, 6, 4]]},
])
@pytest.mark.parametrize("workers", [0, 2])
def test_data_loader_batches_match_torch(kwargs, workers):
    ours = data.DataLoader(Pairs(), num_workers=workers, **kwargs)
    theirs = tdata.DataLoader(Pairs(), num_workers=0, **kwargs)
    assert len(ours) == len(theirs)
    got, want = list(ours), list(theirs)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        same(a, b)


@pytest.mark.parametrize("kwargs", [
    {"shuffle": True, "sampler": [0]}, {"batch_sampler": [[0]], "batch_size": 2},
    {"batch_sampler": [[0]], "drop_last": True}, {"batch_sampler": [[0]], "shuffle": True},
    {"batch_size": None, "drop_last": True}, {"num_workers": -1},
    {"prefetch_factor": 2}, {"persistent_workers": True}, {"timeout": -1},
])
def test_data_loader_refuses_what_torch_refuses(kwargs):
    with pytest.raises(ValueError):
        tdata.DataLoader(Pairs(), **kwargs)
    with raises(kiln.KilnValueError):
        data.DataLoader(Pairs(), **kwargs)
