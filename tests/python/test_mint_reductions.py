"""PyTorch's reductions and scans composed in kiln/mint/_reductions.py (var_mean, std_mean,
median, count_nonzero, logcumsumexp, cummax, cummin, diff) and their Tensor methods: values
against NumPy over dtypes, ties, NaN and infinities, gradients by finite differences, kiln.jit
against eager, PyTorch where it is installed, and the argument errors."""

import numpy as np
import pytest

import kiln
from conftest import FLOAT_DTYPES, assert_close, raises, t
from kiln.testing import gradcheck
from test_mint_pointwise import f64, leaf, values  # the inputs the pointwise tests use

mint = kiln.mint
FLOATS = [kiln.float32, kiln.float64]
NUMERIC = [kiln.float32, kiln.float64, kiln.int32, kiln.int64]


# ------------------------------------------------------------------------------------------------
# var_mean, std_mean


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("args, kwargs, ddof, axis, keepdims", [
    ((), {}, 1, None, False), ((1,), {}, 1, 1, False), ((0, False, True), {}, 0, 0, True),
    ((False,), {}, 0, None, False), (((0, 1),), {"correction": 2}, 2, (0, 1), False),
    ((-1,), {"correction": 0, "keepdim": True}, 0, -1, True)], ids=str)
def test_var_mean_and_std_mean_are_numpys(dtype, args, kwargs, ddof, axis, keepdims, rng):
    x = values((4, 5), dtype, rng)
    data = f64(x)
    mean = data.mean(axis=axis, keepdims=keepdims)
    var = data.var(axis=axis, ddof=ddof, keepdims=keepdims)
    got_var, got_mean = mint.var_mean(x, *args, **kwargs)
    assert got_var.dtype == dtype and got_mean.dtype == dtype
    assert_close(got_var, var, dtype)
    assert_close(got_mean, mean, dtype)
    got_std, got_mean = mint.std_mean(x, *args, **kwargs)
    assert_close(got_std, np.sqrt(var), dtype)
    assert_close(got_mean, mean, dtype)


def test_var_mean_gradient(rng):
    gradcheck(lambda x: mint.var_mean(x, 1), (leaf(rng, 3, 4),))
    gradcheck(lambda x: mint.std_mean(x, 0, correction=0), (leaf(rng, 3, 4),))


# ------------------------------------------------------------------------------------------------
# median


def lower_median(data, axis):
    """The lower median along ``axis`` and its index (the first NaN's where there is one), for
    rows of distinct values."""
    moved = np.moveaxis(data, axis, -1)
    order = np.argsort(moved, axis=-1, kind="stable")  # NaN last, in order
    k = (moved.shape[-1] - 1) // 2
    index = order[..., k]
    if moved.dtype.kind == "f":
        nan_rows = np.isnan(moved).any(-1)
        first_nan = np.argmax(np.isnan(moved), -1)
        index = np.where(nan_rows, first_nan, index)
    return np.take_along_axis(moved, index[..., None], -1)[..., 0], index


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_median_along_a_dim_is_the_lower_median(dtype, dim, rng):
    data = rng.permutation(40)[:24].reshape(4, 6) - 12  # distinct values, even and odd counts
    x = t(data, dtype)
    want_values, want_indices = lower_median(x.numpy(), dim)
    for got in (mint.median(x, dim), x.median(dim)):
        assert isinstance(got, mint.ValuesIndices) and got.values.dtype == dtype
        assert_close(got.values, want_values)
        np.testing.assert_array_equal(got.indices.numpy(), want_indices)
    kept = mint.median(x, dim, keepdim=True)
    assert_close(kept.values, np.expand_dims(want_values, dim))
    assert kept.indices.shape == kept.values.shape


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [kiln.int64])
def test_global_median(dtype, rng):
    x = values((5, 3), dtype, rng)
    flat = np.sort(f64(x).reshape(-1))
    assert_close(mint.median(x), flat[(flat.size - 1) // 2], dtype)
    assert mint.median(x).shape == ()


def test_median_nan_ties_empty_and_0_d():
    data = np.array([[1.0, np.nan, 3.0, np.nan, 0.0], [2.0, 1.0, 2.0, 2.0, 3.0]])
    got = mint.median(t(data), 1)
    np.testing.assert_array_equal(got.values.numpy(), [np.nan, 2.0])
    assert got.indices.tolist()[0] == 1  # the first NaN
    assert data[1, got.indices.tolist()[1]] == 2.0  # one of the equal middle values
    assert np.isnan(mint.median(t(data)).item())
    assert np.isnan(mint.median(t(np.zeros(0))).item())
    scalar = mint.median(t(3.0), 0)
    assert scalar.values.item() == 3.0 and scalar.indices.item() == 0
    empty_rows = mint.median(t(np.zeros((0, 3))), 1)
    assert empty_rows.values.shape == (0,) and empty_rows.indices.shape == (0,)


def test_median_gradient_goes_to_the_chosen_element(rng):
    gradcheck(lambda x: mint.median(x, 1).values, (leaf(rng, 3, 4),))
    x = t([3.0, 1.0, 2.0, 5.0]).requires_grad_()
    mint.median(x).backward()
    assert x.grad.tolist() == [0.0, 0.0, 1.0, 0.0]


# ------------------------------------------------------------------------------------------------
# count_nonzero


@pytest.mark.parametrize("dtype", NUMERIC + [kiln.bool_])
@pytest.mark.parametrize("dim", [None, 0, -1, (0, 1), [1, 2]], ids=str)
def test_count_nonzero_is_numpys(dtype, dim, rng):
    x = values((3, 4, 5), dtype, rng, -1.0, 1.0)
    axis = tuple(dim) if isinstance(dim, list) else dim
    for got in (mint.count_nonzero(x, dim), x.count_nonzero(dim)):
        assert got.dtype == kiln.int64
        np.testing.assert_array_equal(got.numpy(), np.count_nonzero(x.numpy(), axis=axis))


def test_count_nonzero_counts_nan():
    assert mint.count_nonzero(t([np.nan, 0.0, -0.0, 2.0])).item() == 2


# ------------------------------------------------------------------------------------------------
# cummax, cummin


def running_extreme(data, axis, maximum):
    """PyTorch's cummax / cummin along ``axis``, one element at a time."""
    moved = np.moveaxis(data, axis, -1)
    out_v, out_i = np.empty_like(moved), np.zeros(moved.shape, np.int64)
    for row in np.ndindex(*moved.shape[:-1]):
        best, at = None, 0
        for k, v in enumerate(moved[row]):
            if k == 0 or np.isnan(v) or (not np.isnan(best)
                                         and (v >= best if maximum else v <= best)):
                best, at = v, k
            out_v[row + (k,)], out_i[row + (k,)] = best, at
    return np.moveaxis(out_v, -1, axis), np.moveaxis(out_i, -1, axis)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
@pytest.mark.parametrize("dtype", NUMERIC + [kiln.uint8, kiln.bool_])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_running_extremes_follow_pytorchs_ties(name, dtype, dim, rng):
    x = values((5, 13), dtype, rng, -0.3, 0.3)  # few distinct values: many ties
    want_v, want_i = running_extreme(x.numpy().astype(np.float64), dim, name == "cummax")
    for got in (getattr(mint, name)(x, dim), getattr(x, name)(dim)):
        assert got.values.dtype == dtype and got.indices.dtype == kiln.int64
        assert_close(got.values, want_v.astype(got.values.numpy().dtype))
        np.testing.assert_array_equal(got.indices.numpy(), want_i)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_running_extremes_with_nan_0_d_and_empty(name):
    data = np.array([1.0, np.nan, 3.0, np.nan, 0.0])
    got = getattr(mint, name)(t(data), 0)
    want_v, want_i = running_extreme(data, 0, name == "cummax")
    np.testing.assert_array_equal(got.values.numpy(), want_v)
    assert got.indices.tolist() == want_i.tolist() == [0, 1, 1, 3, 3]
    scalar = getattr(mint, name)(t(2.0), 0)
    assert scalar.values.item() == 2.0 and scalar.indices.item() == 0
    empty = getattr(mint, name)(t(np.zeros((2, 0))), 1)
    assert empty.values.shape == empty.indices.shape == (2, 0)


def test_running_extreme_gradient(rng):
    gradcheck(lambda x: mint.cummax(x, 1).values, (leaf(rng, 3, 6),))
    gradcheck(lambda x: mint.cummin(x, 0).values, (leaf(rng, 5, 2),))


# ------------------------------------------------------------------------------------------------
# logcumsumexp


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("dim", [0, 1])
def test_logcumsumexp_is_a_running_logaddexp(dtype, dim, rng):
    x = values((4, 9), dtype, rng, -30.0, 30.0)
    for got in (mint.logcumsumexp(x, dim), x.logcumsumexp(dim)):
        assert got.dtype == dtype
        assert_close(got, np.logaddexp.accumulate(f64(x), axis=dim), dtype)


def test_logcumsumexp_neither_overflows_nor_underflows():
    data = np.array([-1000.0, 0.0, 1000.0, -1000.0, 1000.0])
    assert_close(mint.logcumsumexp(t(data), 0), np.logaddexp.accumulate(data))
    special = np.array([-np.inf, -np.inf, 0.0, np.inf, 1.0])
    assert_close(mint.logcumsumexp(t(special), 0), [-np.inf, -np.inf, 0.0, np.inf, np.inf])
    got = mint.logcumsumexp(t([0.0, np.nan, 1.0]), 0).numpy()
    assert got[0] == 0.0 and np.isnan(got[1:]).all()
    assert mint.logcumsumexp(t(2.5), 0).item() == 2.5


def test_logcumsumexp_gradient(rng):
    gradcheck(lambda x: mint.logcumsumexp(x, 1), (leaf(rng, 3, 5),))
    x = kiln.tensor(rng.standard_normal(6) * 300).requires_grad_()  # no overflow in the gradient
    mint.logcumsumexp(x, 0)[-1].backward()
    weights = np.exp(f64(x) - np.logaddexp.reduce(f64(x)))  # d/dx logsumexp = softmax
    assert_close(x.grad, weights)


# ------------------------------------------------------------------------------------------------
# diff


@pytest.mark.parametrize("dtype", NUMERIC + [kiln.uint8, kiln.bool_])
@pytest.mark.parametrize("n", [0, 1, 2, 7])
@pytest.mark.parametrize("dim", [0, -1])
def test_diff_is_numpys(dtype, n, dim, rng):
    x = values((4, 5), dtype, rng)
    want = np.diff(x.numpy(), n=n, axis=dim)
    for got in (mint.diff(x, n, dim), x.diff(n=n, dim=dim)):
        assert got.dtype == dtype
        assert_close(got, want)


def test_diff_with_prepend_and_append(rng):
    x, before, after = (values(s, kiln.float64, rng) for s in ((3, 4), (3, 2), (3, 1)))
    want = np.diff(x.numpy(), 2, 1, prepend=before.numpy(), append=after.numpy())
    assert_close(mint.diff(x, 2, 1, prepend=before, append=after), want)
    promoted = mint.diff(t([1, 2, 4]), prepend=t([0.5], kiln.float32))
    assert promoted.dtype == kiln.float32 and promoted.tolist() == [0.5, 1.0, 2.0]
    gradcheck(lambda x, b: mint.diff(x, 2, 0, append=b), (leaf(rng, 4, 2), leaf(rng, 1, 2)))


# ------------------------------------------------------------------------------------------------
# kiln.jit and PyTorch


def test_reductions_trace_under_jit(rng):
    def reduced(x):
        variance, mean = mint.var_mean(x, 1)
        return (variance.sum() + mean.sum() + mint.median(x) + mint.median(x, 1).values.sum()
                + mint.logcumsumexp(x, 1).sum() + mint.cummax(x, 1).values.sum()
                + mint.cummin(x, 0).values.sum() + mint.diff(x, 2).sum()
                + mint.count_nonzero(x > 0).to(kiln.float32) + mint.std_mean(x)[0])

    jitted = kiln.jit(reduced)
    for _ in range(2):
        x = values((3, 6), kiln.float32, rng)
        assert_close(jitted(x), reduced(x).numpy())
    x = values((3, 6), kiln.float32, rng)
    eager = kiln.grad(reduced)(x)
    assert_close(kiln.jit(kiln.grad(reduced))(x), eager.numpy())


def test_matches_torch(torch, rng):
    x = rng.standard_normal((4, 7))
    x[1, 3] = np.nan
    ints = rng.integers(0, 4, (4, 7))
    for data in (x, ints):
        for name in ("cummax", "cummin"):
            got, want = getattr(mint, name)(t(data), 1), getattr(torch, name)(torch.tensor(data), 1)
            assert_close(got.values, want.values.numpy())
            assert_close(got.indices, want.indices.numpy())
    got, want = mint.median(t(x), 1), torch.median(torch.tensor(x), 1)
    assert_close(got.values, want.values.numpy())
    assert_close(got.indices, want.indices.numpy())
    assert_close(mint.logcumsumexp(t(x * 100), 0), torch.logcumsumexp(torch.tensor(x * 100),
                                                                       0).numpy())
    for got, want in zip(mint.var_mean(t(x[[0, 2, 3]]), 1, correction=2),
                         torch.var_mean(torch.tensor(x[[0, 2, 3]]), 1, correction=2)):
        assert_close(got, want.numpy())


# ------------------------------------------------------------------------------------------------
# Errors

X = t(np.zeros((2, 3)))
ERRORS = [
    (lambda: mint.var_mean([1.0]), kiln.KilnTypeError, "var_mean: expected input to be a kiln"),
    (lambda: mint.var_mean(X, True, unbiased=False), kiln.KilnTypeError, "unbiased twice"),
    (lambda: mint.std_mean(X, 2), kiln.KilnIndexError, "out of range"),
    (lambda: mint.std_mean(X, keepdim=1), kiln.KilnTypeError, "keepdim must be a bool"),
    (lambda: mint.median(t([True, False])), kiln.DTypeError, "median: expected a numeric"),
    (lambda: mint.median(X, 2), kiln.KilnIndexError, "median: dim out of range"),
    (lambda: mint.median(X, 1.0), kiln.KilnTypeError, "dim must be an int"),
    (lambda: mint.median(t(np.zeros((2, 0))), 1), kiln.KilnIndexError,
     "reduction dim 1 to have a non-zero size"),
    (lambda: mint.median(t(np.zeros(0, np.int64))), kiln.KilnValueError, "no median"),
    (lambda: mint.count_nonzero(X, (0, 0)), kiln.KilnValueError, "more than once"),
    (lambda: mint.count_nonzero(X, 3), kiln.KilnIndexError, "count_nonzero: dim out of range"),
    (lambda: mint.cummax(X, 2), kiln.KilnIndexError, "cummax: dim out of range"),
    (lambda: mint.cummin("x", 0), kiln.KilnTypeError, "cummin: expected input to be a kiln"),
    (lambda: mint.cummax(X, None), kiln.KilnTypeError, "dim must be an int"),
    (lambda: mint.logcumsumexp(t([1, 2]), 0), kiln.DTypeError, "floating-point tensor, got int64"),
    (lambda: mint.logcumsumexp(X, 2), kiln.KilnIndexError, "logcumsumexp: dim out of range"),
    (lambda: mint.diff(t(1.0)), kiln.ShapeError, "diff: expected a tensor of at least 1 dim"),
    (lambda: mint.diff(X, -1), kiln.KilnValueError, "n must be at least 0, got -1"),
    (lambda: mint.diff(X, 1, 2), kiln.KilnIndexError, "diff: dim out of range"),
    (lambda: mint.diff(X, prepend=t(0.0)), kiln.ShapeError, "prepend to have the input's 2 dims"),
    (lambda: mint.diff(X, 1, 1, append=t(np.zeros((3, 1)))), kiln.ShapeError,
     "append to have the input's sizes but along dim 1"),
    (lambda: mint.diff(X, append=1.0), kiln.KilnTypeError, "append to be a kiln.Tensor"),
]


@pytest.mark.parametrize("call, error, match", ERRORS)
def test_bad_arguments_are_typed_errors(call, error, match):
    with raises(error, match=match):
        call()
