"""kiln.mint.sort / argsort / msort / topk and their Tensor methods against NumPy (a stable sort
with NaN above every number), across dtypes, shapes and dims; gradients, kiln.jit, errors; and
against PyTorch where it is installed."""

import numpy as np
import pytest

import kiln
from conftest import ALL_DTYPES, numpy_dtype, raises, random_array

mint = kiln.mint

SHAPES_AND_DIMS = [((), 0), ((), -1), ((0,), 0), ((7,), 0), ((3, 5), 0), ((3, 5), 1),
                   ((2, 4, 6), 1), ((2, 4, 6), -1), ((4, 0, 3), 2)]


def reference_sort(a, dim, descending):
    """(values, indices) of a stable sort of `a` along `dim`, NaN above every number."""
    if a.ndim == 0:
        return a.copy(), np.zeros((), np.int64)
    moved = np.moveaxis(a, dim, -1)
    order = np.empty(moved.shape, np.int64)
    for index in np.ndindex(moved.shape[:-1]):
        row = moved[index]
        nan = np.isnan(row) if row.dtype.kind == "f" else np.zeros(row.shape, bool)
        # np.lexsort sorts by its last key first: NaN-ness, then the value, then the position.
        value = row.astype(np.float64)
        if descending:
            nan, value = ~nan, -value
        order[index] = np.lexsort((np.arange(row.size), np.where(np.isnan(value), 0, value), nan))
    indices = np.moveaxis(order, -1, dim)
    return np.take_along_axis(a, indices, dim), indices


def tied_array(shape, dtype, rng):
    """Random values with ties (few distinct values), NaNs included for floating dtypes."""
    a = random_array(shape, dtype, rng, low=-1.0, high=1.0)
    if dtype.is_floating_point and a.size:
        a = np.round(a * 2) / 2
        a.flat[rng.integers(0, a.size, size=max(1, a.size // 5))] = np.nan
    return a.astype(numpy_dtype(dtype))


def _ids(v):
    return v.name if isinstance(v, kiln.dtype) else str(v)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=_ids)
@pytest.mark.parametrize("shape,dim", SHAPES_AND_DIMS, ids=_ids)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_matches_a_stable_numpy_sort(dtype, shape, dim, descending, rng):
    a = tied_array(shape, dtype, rng)
    values, indices = mint.sort(kiln.tensor(a, dtype=dtype), dim, descending)
    want_values, want_indices = reference_sort(a, dim, descending)
    assert values.dtype == dtype and indices.dtype == kiln.int64
    np.testing.assert_array_equal(indices.numpy(), want_indices)
    np.testing.assert_array_equal(values.numpy(), want_values)
    argsorted = kiln.tensor(a, dtype=dtype).argsort(dim=dim, descending=descending, stable=True)
    np.testing.assert_array_equal(argsorted.numpy(), want_indices)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=_ids)
@pytest.mark.parametrize("shape,dim", [s for s in SHAPES_AND_DIMS if s[0]], ids=_ids)
@pytest.mark.parametrize("largest", [True, False])
def test_topk_is_the_head_of_the_sort(dtype, shape, dim, largest, rng):
    a = tied_array(shape, dtype, rng)
    length = shape[dim]
    want_values, want_indices = reference_sort(a, dim, descending=largest)
    for k in sorted({0, min(1, length), length // 2, length}):
        values, indices = kiln.tensor(a, dtype=dtype).topk(k, dim, largest)
        head = np.arange(k)
        np.testing.assert_array_equal(indices.numpy(), np.take(want_indices, head, axis=dim))
        np.testing.assert_array_equal(values.numpy(), np.take(want_values, head, axis=dim))


def test_sort_of_long_rows_and_a_strided_input(rng):
    base = rng.standard_normal((300, 4001)).astype(np.float32)
    x = kiln.tensor(base)[:, ::2].transpose(0, 1)  # [2001, 300], strided
    values, indices = mint.sort(x, 0, descending=True)
    want = -np.sort(-base[:, ::2].T, axis=0)
    np.testing.assert_array_equal(values.numpy(), want)
    np.testing.assert_array_equal(np.take_along_axis(base[:, ::2].T, indices.numpy(), 0), want)
    top = mint.topk(x, 5, dim=0)
    np.testing.assert_array_equal(top.values.numpy(), want[:5])


def test_results_are_named_tuples_and_msort_sorts_dim_0(rng):
    a = rng.standard_normal((4, 3)).astype(np.float32)
    result = kiln.tensor(a).sort()
    assert isinstance(result, mint.ValuesIndices)
    np.testing.assert_array_equal(result.values.numpy(), np.sort(a, axis=-1))
    np.testing.assert_array_equal(mint.msort(kiln.tensor(a)).numpy(), np.sort(a, axis=0))
    np.testing.assert_array_equal(kiln.tensor(a).msort().numpy(), np.sort(a, axis=0))
    assert mint.topk(kiln.tensor(a), 2).indices.shape == (4, 2)


@pytest.mark.parametrize("op", ["sort", "topk"])
def test_gradient_goes_to_the_selected_positions(op, rng):
    a = rng.standard_normal((3, 6))
    x = kiln.tensor(a, requires_grad=True)
    if op == "sort":
        values, indices = mint.sort(x, 1, descending=True)
    else:
        values, indices = mint.topk(x, 4, 1)
    weights = rng.standard_normal(values.shape)
    (values * kiln.tensor(weights)).sum().backward()
    want = np.zeros_like(a)
    np.put_along_axis(want, indices.numpy(), weights, 1)
    np.testing.assert_allclose(x.grad.numpy(), want)
    assert kiln.testing.gradcheck(lambda t: getattr(mint, op)(t, *([2] if op == "topk" else []))
                                  .values, (x,))


def test_sort_and_topk_run_inside_jit_and_follow_the_batch(rng):
    @kiln.jit(dynamic=True)
    def f(x):
        values, indices = mint.topk(x, 3)
        return values * 2, indices, mint.sort(x, 0).values

    for batch in (2, 3, 5):
        a = rng.standard_normal((batch, 9)).astype(np.float32)
        values, indices, by_column = f(kiln.tensor(a))
        order = np.argsort(-a, axis=1, kind="stable")[:, :3]
        np.testing.assert_array_equal(indices.numpy(), order)
        np.testing.assert_array_equal(values.numpy(), np.take_along_axis(a, order, 1) * 2)
        np.testing.assert_array_equal(by_column.numpy(), np.sort(a, axis=0))


def test_bad_arguments_are_typed_errors():
    x = kiln.tensor([3.0, 1.0, 2.0])
    with raises(kiln.KilnValueError, match=r"topk: expected k in \[0, 3\]"):
        mint.topk(x, 4)
    with raises(kiln.KilnValueError, match="got -1"):
        x.topk(-1)
    with raises(kiln.KilnValueError, match="k = 1 for a 0-d tensor"):
        mint.topk(kiln.tensor(1.0), 0)
    with raises(kiln.KilnIndexError, match="sort: dim out of range"):
        mint.sort(x, 1)
    with raises(kiln.KilnIndexError, match="sort: dim out of range"):
        x.argsort(-2)
    with raises(kiln.KilnTypeError, match="expected dim to be an int"):
        mint.sort(x, 0.5)
    with raises(kiln.KilnTypeError, match="topk: expected k to be an int, got bool"):
        x.topk(True)
    np.testing.assert_array_equal(x.numpy(), [3.0, 1.0, 2.0])  # the input is untouched


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_matches_torch(torch, dtype, rng):
    a = np.round(rng.standard_normal((4, 5, 6)) * 2).astype(dtype)
    if dtype.startswith("float"):
        a[1, 2, 3] = np.nan
    for dim in (0, 1, 2):
        for descending in (False, True):
            got = mint.sort(kiln.tensor(a), dim, descending)
            want = torch.sort(torch.tensor(a), dim=dim, descending=descending, stable=True)
            np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
            np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
        got = mint.topk(kiln.tensor(a), 3, dim)
        want = torch.topk(torch.tensor(a), 3, dim)
        np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
