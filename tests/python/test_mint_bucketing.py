"""searchsorted, bucketize and bincount (kiln/mint/_bucketing.py) and Tensor.bincount: values
against NumPy over dtypes, sides, N-d sequences, sorters, NaN and lengths 0 to 9, bincount's
weights and their gradient, kiln.jit against eager (bincount refused while tracing), PyTorch
where it is installed, and the argument errors."""

import numpy as np
import pytest

import kiln
from conftest import assert_close, random_array, raises, t

mint = kiln.mint
NUMERIC = [kiln.float32, kiln.float64, kiln.int32, kiln.int64]


def values(shape, dtype, rng, low=-3.0, high=3.0):
    return kiln.tensor(random_array(shape, dtype, rng, low, high), dtype=dtype)


def sorted_values(shape, dtype, rng):
    return kiln.tensor(np.sort(random_array(shape, dtype, rng), axis=-1), dtype=dtype)


# ------------------------------------------------------------------------------------------------
# searchsorted, bucketize


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_is_numpys(dtype, right, rng):
    sequence = sorted_values((11,), dtype, rng)  # repeated values: the sides differ
    query = values((3, 4), dtype, rng, -4.0, 4.0)
    side = "right" if right else "left"
    want = np.searchsorted(sequence.numpy(), query.numpy(), side=side)
    for got in (mint.searchsorted(sequence, query, right=right),
                mint.searchsorted(sequence, query, side=side)):
        assert got.dtype == kiln.int64
        np.testing.assert_array_equal(got.numpy(), want)
    small = mint.searchsorted(sequence, query, right=right, out_int32=True)
    assert small.dtype == kiln.int32 and small.numpy().tolist() == want.tolist()


@pytest.mark.parametrize("length", range(10))
def test_searchsorted_at_every_length(length):
    sequence = np.arange(length, dtype=np.float64)
    query = np.arange(-1, length + 1) + np.array([[0.0], [0.5]])
    for side in ("left", "right"):
        got = mint.searchsorted(t(sequence), t(query), side=side)
        np.testing.assert_array_equal(got.numpy(), np.searchsorted(sequence, query, side=side))


def test_searchsorted_of_nd_sequences_numbers_sorters_and_mixed_dtypes(rng):
    rows = sorted_values((3, 6), kiln.float64, rng)
    query = values((3, 4), kiln.float64, rng)
    want = np.stack([np.searchsorted(r, q) for r, q in zip(rows.numpy(), query.numpy())])
    np.testing.assert_array_equal(mint.searchsorted(rows, query).numpy(), want)
    sequence = t([1.0, 3.0, 3.0, 5.0])
    scalar = mint.searchsorted(sequence, 3, right=True)
    assert scalar.shape == () and scalar.item() == 3
    assert mint.searchsorted(sequence, 3.5).item() == 3
    unsorted = rng.standard_normal(7)
    got = mint.searchsorted(t(unsorted), query, sorter=t(np.argsort(unsorted)))
    np.testing.assert_array_equal(got.numpy(), np.searchsorted(np.sort(unsorted), query.numpy()))
    assert mint.searchsorted(t([1, 3]), t([2.5])).tolist() == [1]  # compared promoted
    assert mint.searchsorted(sequence, t([3], kiln.int32)).tolist() == [1]


def test_searchsorted_nan_goes_last_as_pytorchs():
    sequence = t([1.0, 2.0, np.nan])
    for right in (False, True):
        got = mint.searchsorted(sequence, t([np.nan, 1.5, 3.0]), right=right)
        assert got.tolist() == [3, 1, 3]


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("right", [False, True])
def test_bucketize_is_searchsorted_with_arguments_swapped(dtype, right, rng):
    boundaries = sorted_values((7,), dtype, rng)
    query = values((2, 5), dtype, rng, -4.0, 4.0)
    want = np.searchsorted(boundaries.numpy(), query.numpy(), side="right" if right else "left")
    got = mint.bucketize(query, boundaries, right=right)
    np.testing.assert_array_equal(got.numpy(), want)
    assert mint.bucketize(0.0, boundaries, out_int32=True).dtype == kiln.int32


# ------------------------------------------------------------------------------------------------
# bincount


@pytest.mark.parametrize("dtype", [kiln.uint8, kiln.int16, kiln.int32, kiln.int64])
@pytest.mark.parametrize("minlength", [0, 3, 20])
def test_bincount_is_numpys(dtype, minlength, rng):
    data = rng.integers(0, 9, 30)
    x = t(data, dtype)
    for got in (mint.bincount(x, minlength=minlength), x.bincount(minlength=minlength)):
        assert got.dtype == kiln.int64
        np.testing.assert_array_equal(got.numpy(), np.bincount(data, minlength=minlength))
    empty = mint.bincount(t(np.zeros(0, np.int64)), minlength=minlength)
    assert empty.tolist() == [0] * minlength


@pytest.mark.parametrize("weight_dtype, result_dtype", [
    (kiln.float32, kiln.float32), (kiln.float64, kiln.float64), (kiln.float16, kiln.float64),
    (kiln.int64, kiln.float64), (kiln.bool_, kiln.float64)])
def test_bincount_sums_weights(weight_dtype, result_dtype, rng):
    data = rng.integers(0, 6, 20)
    weights = values((20,), weight_dtype, rng)
    got = mint.bincount(t(data), weights)
    assert got.dtype == result_dtype
    assert_close(got, np.bincount(data, weights.numpy().astype(np.float64)), result_dtype)


def test_bincount_gradient_reaches_the_weights(rng):
    data = rng.integers(0, 4, 10)
    weights = kiln.tensor(rng.standard_normal(10)).requires_grad_()
    upstream = rng.standard_normal(int(data.max()) + 1)
    (mint.bincount(t(data), weights) * t(upstream)).sum().backward()
    assert_close(weights.grad, upstream[data])


# ------------------------------------------------------------------------------------------------
# kiln.jit and PyTorch


def test_searches_trace_under_jit_and_bincount_is_refused(rng):
    def searched(sequence, query):
        return (mint.searchsorted(sequence, query) * 10 + mint.bucketize(query, sequence,
                                                                         right=True))

    jitted = kiln.jit(searched)
    for _ in range(2):
        sequence, query = sorted_values((9,), kiln.float32, rng), values((4,), kiln.float32, rng)
        np.testing.assert_array_equal(jitted(sequence, query).numpy(),
                                      searched(sequence, query).numpy())
    with raises(kiln.KilnTypeError, match="bincount: the size of its result depends on"):
        kiln.jit(lambda x: mint.bincount(x))(t([1, 2]))


def test_matches_torch(torch, rng):
    sequence = np.sort(rng.integers(0, 10, 12)).astype(np.float64)
    query = rng.integers(-1, 12, (3, 5)).astype(np.float64)
    for right in (False, True):
        want = torch.searchsorted(torch.tensor(sequence), torch.tensor(query), right=right)
        assert_close(mint.searchsorted(t(sequence), t(query), right=right), want.numpy())
        want = torch.bucketize(torch.tensor(query), torch.tensor(sequence), right=right)
        assert_close(mint.bucketize(t(query), t(sequence), right=right), want.numpy())
    data, weights = rng.integers(0, 5, 12), rng.standard_normal(12).astype(np.float32)
    want = torch.bincount(torch.tensor(data), torch.tensor(weights), minlength=7)
    got = mint.bincount(t(data), t(weights), minlength=7)
    assert got.dtype.name == str(want.dtype).removeprefix("torch.")
    assert_close(got, want.numpy())


# ------------------------------------------------------------------------------------------------
# Errors

S = t([1.0, 2.0, 3.0])
ERRORS = [
    (lambda: mint.searchsorted(S, S, side="middle"), kiln.KilnValueError,
     "side 'left' or 'right', got 'middle'"),
    (lambda: mint.searchsorted(S, S, side="left", right=True), kiln.KilnValueError,
     "contradict"),
    (lambda: mint.searchsorted(S, S, right=1), kiln.KilnTypeError, "right must be a bool"),
    (lambda: mint.searchsorted(t(1.0), S), kiln.ShapeError, "at least 1 dim"),
    (lambda: mint.searchsorted(t([[1.0, 2.0]]), S), kiln.ShapeError, "leading dims"),
    (lambda: mint.searchsorted(t(np.zeros((2, 3))), t(np.zeros((3, 1)))), kiln.ShapeError,
     "one sorted row per row of values"),
    (lambda: mint.searchsorted(t(np.zeros((2, 3))), 1.0), kiln.ShapeError,
     "a number as input needs a 1-d sorted sequence"),
    (lambda: mint.searchsorted(S, "1"), kiln.KilnTypeError, "kiln.Tensor or a real number"),
    (lambda: mint.searchsorted(t([True]), S), kiln.DTypeError, "numeric sorted_sequence"),
    (lambda: mint.searchsorted(S, t([True])), kiln.DTypeError, "numeric input"),
    (lambda: mint.searchsorted(S, S, sorter=t([0, 1])), kiln.ShapeError, "sorter of the"),
    (lambda: mint.searchsorted(S, S, sorter=t([0, 1, 2], kiln.int32)), kiln.DTypeError,
     "int64 sorter"),
    (lambda: mint.searchsorted([1.0], S), kiln.KilnTypeError, "sorted_sequence to be a kiln"),
    (lambda: mint.bucketize(S, t([[1.0, 2.0]])), kiln.ShapeError, "1-d boundaries"),
    (lambda: mint.bucketize(S, S, out_int32=None), kiln.KilnTypeError, "out_int32 must be"),
    (lambda: mint.bincount(t([1.0])), kiln.DTypeError, "integer tensor, got float64"),
    (lambda: mint.bincount(t([True])), kiln.DTypeError, "integer tensor, got bool"),
    (lambda: mint.bincount(t([[1]])), kiln.ShapeError, "bincount: expected a 1-d tensor"),
    (lambda: mint.bincount(t([-1, 1])), kiln.KilnValueError, "non-negative values, got -1"),
    (lambda: mint.bincount(t([1]), minlength=-1), kiln.KilnValueError, "minlength must be"),
    (lambda: mint.bincount(t([1, 2]), t([1.0])), kiln.ShapeError, "weights of the input's"),
    (lambda: mint.bincount(t([1]), [1.0]), kiln.KilnTypeError, "weights to be a kiln.Tensor"),
]


@pytest.mark.parametrize("call, error, match", ERRORS)
def test_bad_arguments_are_typed_errors(call, error, match):
    with raises(error, match=match):
        call()
