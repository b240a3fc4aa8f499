"""PyTorch's math, statistics and window functions composed in kiln/mint/_statistics.py
(aminmax, kthvalue, mode, nanmedian, nansum, nanmean, quantile, nanquantile, histc, histogram,
cov, corrcoef, trapezoid, cumulative_trapezoid) and kiln/mint/_math_extra.py (logaddexp,
xlogy, hypot, copysign, fmax, heaviside, float_power, frexp, ldexp, gcd, lcm, sgn, signbit,
sinc, angles, dist, inner, vdot, tensordot, trace, logspace and the windows), with their Tensor
methods: values against NumPy over dtypes, NaN and broadcasting, gradients by finite
differences and in closed form, kiln.jit against eager, PyTorch where it is installed, and the
argument errors."""

import math

import numpy as np
import pytest

import kiln
from conftest import assert_close, raises, t
from kiln import mint as mx
from kiln import mint as st
from kiln.testing import gradcheck

FLOATS = [kiln.float32, kiln.float64]
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.25, 3.0, 1e-30, 40.0, -40.0])
INTERPOLATIONS = ["linear", "lower", "higher", "midpoint", "nearest"]


def pairs(values):
    """Every pair of ``values`` as two 1-d arrays."""
    return np.repeat(values, len(values)), np.tile(values, len(values))


def leaf(array):
    return kiln.tensor(np.asarray(array, np.float64)).requires_grad_()


# ------------------------------------------------------------------------------------------------
# aminmax, kthvalue, mode, nanmedian


@pytest.mark.parametrize("dtype", FLOATS + [kiln.int32, kiln.bool])
def test_aminmax_is_amin_and_amax(dtype, rng):
    data = rng.integers(-5, 5, size=(3, 4))
    x = t(data > 0 if dtype == kiln.bool else data, dtype)
    values = x.numpy()
    got = st.aminmax(x)
    assert isinstance(got, st.MinMax) and got.min.dtype == dtype
    assert_close(got.min, values.min())
    assert_close(got.max, values.max())
    kept = x.aminmax(keepdim=True)
    assert kept.min.shape == (1, 1)
    for dim in (0, -1):
        got = st.aminmax(x, dim=dim, keepdim=True)
        assert_close(got.min, values.min(dim, keepdims=True))
        assert_close(got.max, values.max(dim, keepdims=True))


def test_aminmax_propagates_nan():
    got = st.aminmax(t([[1.0, np.nan], [2.0, 3.0]]), dim=1)
    np.testing.assert_array_equal(got.min.numpy(), [np.nan, 2.0])
    np.testing.assert_array_equal(got.max.numpy(), [np.nan, 3.0])


@pytest.mark.parametrize("dtype", FLOATS + [kiln.int64])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("k", [1, 3])
def test_kthvalue_is_the_kth_smallest(dtype, dim, k, rng):
    data = rng.permutation(40)[:20].reshape(4, 5)  # distinct: the index is defined
    x = t(data, dtype)
    order = np.argsort(data, axis=dim)
    want_indices = np.take(order, [k - 1], axis=dim)
    want_values = np.take_along_axis(data, want_indices, dim)
    for got in (st.kthvalue(x, k, dim, keepdim=True), x.kthvalue(k, dim, True)):
        assert isinstance(got, kiln.mint.ValuesIndices) and got.values.dtype == dtype
        np.testing.assert_array_equal(got.values.numpy(), want_values)
        np.testing.assert_array_equal(got.indices.numpy(), want_indices)
    assert st.kthvalue(x, k, dim).values.shape == np.squeeze(want_values, dim).shape


def test_kthvalue_puts_nan_last_and_takes_0d():
    got = st.kthvalue(t([3.0, np.nan, 1.0, 2.0]), 4)
    assert math.isnan(got.values.item()) and got.indices.item() == 1
    assert st.kthvalue(t([3.0, np.nan, 1.0, 2.0]), 3).values.item() == 3.0
    scalar = st.kthvalue(t(5.0), 1)
    assert scalar.values.item() == 5.0 and scalar.indices.item() == 0


def numpy_mode(row):
    """The smallest most frequent value of ``row`` and the index of its last occurrence."""
    values, counts = np.unique(row, return_counts=True)
    value = values[np.argmax(counts)]
    return value, np.flatnonzero(row == value)[-1]


@pytest.mark.parametrize("dtype", FLOATS + [kiln.int32, kiln.uint8])
@pytest.mark.parametrize("dim", [0, 1])
def test_mode_is_the_smallest_most_frequent_value(dtype, dim, rng):
    data = rng.integers(0, 4, size=(5, 7))
    got = st.mode(t(data, dtype), dim)
    rows = np.moveaxis(data, dim, -1)
    want = np.array([numpy_mode(row) for row in rows])
    assert got.values.dtype == dtype
    np.testing.assert_array_equal(got.values.numpy(), want[:, 0])
    np.testing.assert_array_equal(got.indices.numpy(), want[:, 1])
    kept = t(data, dtype).mode(dim, keepdim=True)
    assert kept.values.shape == np.expand_dims(want[:, 0], dim).shape


def test_mode_of_bools_and_scalars():
    got = st.mode(t([True, False, False, True, False]))
    assert got.values.item() is False and got.indices.item() == 4
    assert st.mode(t(2.5)).values.item() == 2.5


def test_nanmedian_ignores_nan(rng):
    data = rng.permutation(30).reshape(5, 6).astype(np.float64)
    data[0, [1, 4]] = np.nan
    data[2, :] = np.nan
    x = t(data)
    got = st.nanmedian(x, 1)
    for r, row in enumerate(data):
        kept = np.sort(row[~np.isnan(row)])
        if kept.size == 0:
            assert math.isnan(got.values[r].item()) and got.indices[r].item() == 0
            continue
        value = kept[(kept.size - 1) // 2]  # the lower median
        assert got.values[r].item() == value
        assert got.indices[r].item() == np.flatnonzero(row == value)[0]
    everything = np.sort(data[~np.isnan(data)])
    assert st.nanmedian(x).item() == everything[(everything.size - 1) // 2]
    assert x.nanmedian(0, keepdim=True).values.shape == (1, 6)
    assert math.isnan(st.nanmedian(t(np.zeros(0))).item())
    assert st.nanmedian(t([3, 1, 2])).item() == 2  # integers: kiln.mint.median


# ------------------------------------------------------------------------------------------------
# nansum, nanmean


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim, keepdim", [(None, False), (0, True), (-1, False), ((0, 1), True)])
def test_nansum_and_nanmean_skip_nan(dtype, dim, keepdim, rng):
    data = rng.standard_normal((3, 4))
    data[0, 1] = data[2, 3] = np.nan
    data[1, :] = np.nan  # a row of NaN only: sum 0, mean NaN
    x = t(data, dtype)
    values = x.numpy().astype(np.float64)
    total = np.nansum(values, axis=dim, keepdims=keepdim)
    for got in (st.nansum(x, dim, keepdim), x.nansum(dim, keepdim)):
        assert got.dtype == dtype
        assert_close(got, total, dtype)
    with np.errstate(invalid="ignore"):
        mean = total / np.sum(~np.isnan(values), axis=dim, keepdims=keepdim)
    for got in (st.nanmean(x, dim, keepdim), x.nanmean(dim, keepdim)):
        assert got.dtype == dtype
        assert_close(got, mean, dtype)


def test_nansum_of_integers_and_with_dtype():
    x = t([[1, 2], [3, 4]], kiln.int32)
    got = st.nansum(x, 1)
    assert got.dtype == kiln.int64 and got.tolist() == [3, 7]
    assert st.nansum(x, dtype=kiln.float64).dtype == kiln.float64
    assert st.nanmean(t([1.0, np.nan, 4.0]), dtype=kiln.float64).item() == 2.5


# ------------------------------------------------------------------------------------------------
# quantile, nanquantile


@pytest.mark.parametrize("interpolation", INTERPOLATIONS)
@pytest.mark.parametrize("dim, keepdim", [(None, False), (None, True), (0, False), (1, True)])
def test_quantile_is_numpys(interpolation, dim, keepdim, rng):
    data = rng.standard_normal((4, 7))
    x = t(data)
    levels = np.array([0.0, 0.13, 0.5, 0.71, 1.0])
    want = np.quantile(data, levels, axis=dim, keepdims=keepdim, method=interpolation)
    for got in (st.quantile(x, t(levels), dim, keepdim, interpolation=interpolation),
                x.quantile(t(levels), dim, keepdim, interpolation=interpolation)):
        assert_close(got, want, kiln.float64)
    want = np.quantile(data, 0.37, axis=dim, keepdims=keepdim, method=interpolation)
    assert_close(st.quantile(x, 0.37, dim, keepdim, interpolation=interpolation), want)
    assert_close(st.quantile(x, t(0.37), dim, keepdim, interpolation=interpolation), want)


@pytest.mark.parametrize("interpolation", INTERPOLATIONS)
def test_nanquantile_ignores_nan_and_quantile_propagates_it(interpolation, rng):
    data = rng.standard_normal((3, 6)).astype(np.float32)
    data[0, 2] = np.nan
    data[2, :] = np.nan
    x = t(data)
    with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning):  # NumPy's all-NaN slice
        want = np.nanquantile(data.astype(np.float64), [0.2, 0.9], axis=1, method=interpolation)
    got = st.nanquantile(x, t([0.2, 0.9], kiln.float32), 1, interpolation=interpolation)
    assert got.dtype == kiln.float32
    assert_close(got, want)
    got = x.quantile(0.4, 1, interpolation=interpolation).numpy()
    assert np.isnan(got[[0, 2]]).all()
    assert_close(t(got[1]), np.quantile(data[1].astype(np.float64), 0.4, method=interpolation),
                 kiln.float32)


# ------------------------------------------------------------------------------------------------
# histc, histogram


@pytest.mark.parametrize("dtype", FLOATS)
def test_histc_is_numpys_histogram(dtype, rng):
    data = rng.standard_normal(200)
    x = t(data, dtype)
    values = x.numpy()
    for got in (st.histc(x, 9, -1.5, 2.0), x.histc(9, -1.5, 2.0)):
        assert got.dtype == dtype
        assert_close(got, np.histogram(values, 9, range=(-1.5, 2.0))[0])
    # min == max: the data's range.
    assert_close(st.histc(x, 5), np.histogram(values, 5)[0])


def test_histc_edge_cases():
    assert st.histc(t([2.0, 2.0, np.nan, 7.0]), 4, 0, 4).tolist() == [0, 0, 2, 0]
    assert st.histc(t([2.0, 2.0]), 4).tolist() == [0, 0, 2, 0]  # range widened to [1, 3]
    assert st.histc(t(np.zeros(0, np.float32)), 3).tolist() == [0, 0, 0]
    half = st.histc(t([0.0, 0.5, 1.0], kiln.float16), 2, 0, 1)
    assert half.dtype == kiln.float16 and half.tolist() == [1, 2]


@pytest.mark.parametrize("dtype", FLOATS)
def test_histogram_is_numpys(dtype, rng):
    data = rng.standard_normal((5, 8))
    weights = rng.random((5, 8))
    x, w = t(data, dtype), t(weights, dtype)
    values = x.numpy()
    got = st.histogram(x, 6)
    assert isinstance(got, st.HistBinEdges) and got.hist.dtype == dtype
    want_hist, want_edges = np.histogram(values, 6)
    assert_close(got.hist, want_hist)
    assert_close(got.bin_edges, want_edges, dtype)
    got = x.histogram(4, range=(-1.0, 2.0), weight=w, density=True)
    want_hist, want_edges = np.histogram(values, 4, range=(-1.0, 2.0), weights=w.numpy(),
                                         density=True)
    assert_close(got.hist, want_hist, dtype)
    edges = np.array([-2.0, -0.5, 0.0, 0.25, 3.0])
    got = st.histogram(x, t(edges, dtype))
    assert_close(got.hist, np.histogram(values, edges)[0])
    assert_close(got.bin_edges, edges, dtype)


def test_histogram_ranges():
    got = st.histogram(t([2.0, 2.0]), 4)  # an empty range widens by 0.5 each way
    assert got.hist.tolist() == [0, 0, 2, 0] and got.bin_edges.tolist() == [1.5, 1.75, 2, 2.25, 2.5]
    got = st.histogram(t(np.zeros(0, np.float32)), 2)
    assert got.hist.tolist() == [0, 0] and got.bin_edges.tolist() == [0, 0.5, 1]


def test_histogram_weight_has_a_gradient():
    weight = leaf([0.5, 2.0, 1.0])
    hist = st.histogram(t([0.1, 0.9, 0.2], kiln.float64), 2, range=(0.0, 1.0), weight=weight)
    (grad,) = kiln.autograd.grad(hist.hist, [weight], t([1.0, 10.0]))
    assert grad.tolist() == [1.0, 10.0, 1.0]


# ------------------------------------------------------------------------------------------------
# cov, corrcoef


@pytest.mark.parametrize("dtype", FLOATS)
def test_cov_is_numpys(dtype, rng):
    data = rng.standard_normal((3, 9))
    x = t(data, dtype)
    values = x.numpy().astype(np.float64)
    for got in (st.cov(x), x.cov()):
        assert got.dtype == dtype
        assert_close(got, np.cov(values), dtype)
    frequencies = rng.integers(0, 4, 9)
    weights = rng.random(9)
    got = st.cov(x, correction=0, fweights=t(frequencies), aweights=t(weights, dtype))
    want = np.cov(values, ddof=0, fweights=frequencies, aweights=weights.astype(
        x.numpy().dtype))
    assert_close(got, want, dtype)
    got = st.cov(x, correction=2, aweights=t(weights, dtype))
    assert_close(got, np.cov(values, ddof=2, aweights=weights.astype(x.numpy().dtype)), dtype)
    one = st.cov(x[0])
    assert one.shape == () and math.isclose(one.item(), np.cov(values[0]), rel_tol=1e-5)


def test_cov_of_integers_is_float32_and_warns_without_degrees_of_freedom():
    got = st.cov(t([[1, 2, 4], [3, 1, 0]]))
    assert got.dtype == kiln.float32
    assert_close(got, np.cov([[1, 2, 4], [3, 1, 0]]), kiln.float32)
    with pytest.warns(UserWarning, match="degrees of freedom"):
        assert st.cov(t([1.0, 2.0, 4.0]), correction=3).item() == math.inf


@pytest.mark.parametrize("dtype", FLOATS)
def test_corrcoef_is_numpys(dtype, rng):
    data = rng.standard_normal((4, 6))
    x = t(data, dtype)
    for got in (st.corrcoef(x), x.corrcoef()):
        assert got.dtype == dtype
        assert_close(got, np.corrcoef(x.numpy().astype(np.float64)), dtype)
    assert st.corrcoef(x[0]).item() == 1.0
    assert math.isnan(st.corrcoef(t([1.0, 1.0, 1.0])).item())


# ------------------------------------------------------------------------------------------------
# trapezoid, cumulative_trapezoid


def cumulative(y, x=None, dx=1.0, axis=-1):
    """The running trapezoid integrals, NumPy's trapezoid of each prefix."""
    size = y.shape[axis]
    parts = [np.trapezoid(np.take(y, range(k + 1), axis), None if x is None else x[:k + 1],
                          dx=dx, axis=axis) for k in range(1, size)]
    return np.stack(parts, axis=axis % y.ndim)


@pytest.mark.parametrize("dtype", FLOATS + [kiln.int64])
@pytest.mark.parametrize("dim", [0, -1])
def test_trapezoid_is_numpys(dtype, dim, rng):
    data = rng.integers(-5, 5, size=(4, 5)) if dtype == kiln.int64 else rng.standard_normal((4, 5))
    y = t(data, dtype)
    values = y.numpy().astype(np.float64)
    points = np.sort(rng.standard_normal(y.shape[dim]))
    result = dtype if dtype.is_floating_point else kiln.float32
    for got, want in ((st.trapezoid(y, dim=dim), np.trapezoid(values, axis=dim)),
                      (st.trapz(y, dx=0.25, dim=dim), np.trapezoid(values, dx=0.25, axis=dim)),
                      (st.trapezoid(y, t(points, dtype), dim=dim),
                       np.trapezoid(values, t(points, dtype).numpy(), axis=dim)),
                      (st.cumulative_trapezoid(y, dx=2, dim=dim),
                       cumulative(values, dx=2.0, axis=dim)),
                      (st.cumulative_trapezoid(y, t(points, dtype), dim=dim),
                       cumulative(values, t(points, dtype).numpy().astype(np.float64),
                                  axis=dim))):
        assert got.dtype == result
        assert_close(got, want, result)


def test_trapezoid_broadcasts_sample_points_and_integrates_nothing_to_zero():
    y = t(np.arange(6.0).reshape(2, 3))
    x = t([[0.0, 1.0, 3.0], [0.0, 2.0, 4.0]])
    assert_close(st.trapezoid(y, x), np.trapezoid(y.numpy(), x.numpy()), kiln.float32)
    empty = st.trapezoid(t(np.ones((2, 0)), kiln.int32))
    assert empty.dtype == kiln.int32 and empty.tolist() == [0, 0]
    assert st.cumulative_trapezoid(t(np.ones((2, 0)))).shape == (2, 0)
    assert st.cumulative_trapezoid(t([1.0])).shape == (0,)


# ------------------------------------------------------------------------------------------------
# Binary elementwise functions


def xlogy_reference(x, y):
    with np.errstate(divide="ignore", invalid="ignore"):
        product = x * np.log(y)
    return np.where(np.isnan(y), np.nan, np.where(x == 0, 0.0, product))


BINARY = {
    "logaddexp": (mx.logaddexp, np.logaddexp),
    "logaddexp2": (mx.logaddexp2, np.logaddexp2),
    "xlogy": (mx.xlogy, xlogy_reference),
    "hypot": (mx.hypot, np.hypot),
    "copysign": (mx.copysign, np.copysign),
    "fmax": (mx.fmax, np.fmax),
    "fmin": (mx.fmin, np.fmin),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("dtype", FLOATS)
def test_binary_functions_are_numpys_at_special_values(name, dtype):
    ours, numpys = BINARY[name]
    a, b = pairs(SPECIAL)
    x, y = t(a, dtype), t(b, dtype)
    with np.errstate(all="ignore"):
        want = numpys(x.numpy().astype(np.float64), y.numpy().astype(np.float64))
    for got in (ours(x, y), getattr(x, name)(y)):
        assert got.dtype == dtype
        assert_close(got, want.astype(x.numpy().dtype), dtype)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_functions_broadcast_and_promote(name, rng):
    ours, numpys = BINARY[name]
    a, b = rng.uniform(0.5, 3, (3, 1)), rng.uniform(0.5, 3, (4,))
    got = ours(t(a, kiln.float32), t(b, kiln.float64))
    assert got.dtype == kiln.float64 and got.shape == (3, 4)
    assert_close(got, numpys(t(a, kiln.float32).numpy().astype(np.float64), b), kiln.float64)
    half = ours(t(a, kiln.float16), t(b, kiln.float16))
    assert half.dtype == kiln.float16
    assert_close(half, numpys(t(a, kiln.float16).numpy().astype(np.float64),
                              t(b, kiln.float16).numpy().astype(np.float64)), kiln.float16)


def test_float_results_of_integers():
    i, j = t([0, 2, -3]), t([4, 0, 5], kiln.int32)
    for got, want in ((mx.xlogy(i, j), [0.0, -np.inf, -3 * np.log(5)]),
                      (mx.copysign(j, i), [4.0, 0.0, -5.0]),
                      (mx.ldexp(i, j), [0.0, 2.0, -96.0]),
                      (mx.sinc(i), np.sinc([0, 2, -3])),
                      (mx.deg2rad(t([180, 90])), [np.pi, np.pi / 2]),
                      (mx.rad2deg(t([True, False])), [180 / np.pi, 0.0])):
        assert got.dtype == kiln.float32
        assert_close(got, np.asarray(want, np.float32), kiln.float32)
    assert mx.xlogy(2.0, t([1.0, np.e], kiln.float64)).dtype == kiln.float64
    assert_close(mx.xlogy(t([0.0, 3.0]), 0.0), [0.0, -np.inf], kiln.float32)
    np.testing.assert_array_equal(mx.copysign(t([1.0, -2.0]), -0.0).numpy(), [-1.0, -2.0])
    np.testing.assert_array_equal(mx.copysign(t([1.0, -2.0]), float("nan")).numpy(), [1.0, 2.0])
    # The sign's source gets a zero gradient, as PyTorch's (not none).
    a, b = t([1.0, -2.0]).requires_grad_(), t([-1.0, 3.0]).requires_grad_()
    assert kiln.autograd.grad(mx.copysign(a, b).sum(), b)[0].tolist() == [0.0, 0.0]
    np.testing.assert_array_equal(mx.copysign(3, t([-1.0, 0.0])).numpy(), [-3.0, 3.0])


def test_fmax_and_fmin_keep_integers_and_bools():
    got = mx.fmax(t([1, 5], kiln.int8), t([3, 2], kiln.int16))
    assert got.dtype == kiln.int16 and got.tolist() == [3, 5]
    got = mx.fmin(t([True, False]), t([True, True]))
    assert got.dtype == kiln.bool and got.tolist() == [True, False]


@pytest.mark.parametrize("dtype", FLOATS + [kiln.int64, kiln.bool])
def test_heaviside(dtype):
    data = np.array([-2.0, 0.0, 3.0, -0.0]) if dtype != kiln.bool else np.array([True, False])
    x = t(data, dtype)
    values = t([7] if dtype != kiln.bool else [True], dtype)
    want = np.heaviside(x.numpy().astype(np.float64), values.numpy().astype(np.float64))
    for got in (mx.heaviside(x, values), x.heaviside(values)):
        assert got.dtype == dtype
        assert_close(got, want.astype(x.numpy().dtype))
    assert mx.heaviside(t([np.nan, 1.0]), t([5.0])).tolist() == [0.0, 1.0]  # PyTorch's rule


def test_float_power_is_float64(rng):
    base = rng.uniform(0.5, 2, 5).astype(np.float32)
    got = mx.float_power(t(base), t([2, -1, 0, 3, 1]))
    assert got.dtype == kiln.float64
    np.testing.assert_allclose(got.numpy(), np.float_power(base.astype(np.float64),
                                                           [2, -1, 0, 3, 1]), rtol=1e-14)
    assert mx.float_power(2, t([3])).tolist() == [8.0]
    assert t([2, 3]).float_power(0.5).dtype == kiln.float64


# ------------------------------------------------------------------------------------------------
# frexp, ldexp, gcd, lcm


@pytest.mark.parametrize("dtype", FLOATS + [kiln.float16])
def test_frexp_is_numpys(dtype, rng):
    info = np.finfo(dtype.name)
    data = np.concatenate([rng.standard_normal(20) * 1e3,
                           [0.0, -0.0, np.inf, -np.inf, np.nan, float(info.max),
                            float(info.smallest_subnormal), float(info.tiny), 1.0, -0.5,
                            float(np.nextafter(np.array(2.0, dtype.name), 0))]])
    x = t(data.astype(dtype.name), dtype)
    want_mantissa, want_exponent = np.frexp(x.numpy())
    for got in (mx.frexp(x), x.frexp()):
        assert isinstance(got, mx.MantissaExponent)
        assert got.mantissa.dtype == dtype and got.exponent.dtype == kiln.int32
        np.testing.assert_array_equal(got.mantissa.numpy(), want_mantissa)
        np.testing.assert_array_equal(got.exponent.numpy(), want_exponent)


def test_ldexp_is_numpys():
    x, e = t([1.0, -3.0, 0.75], kiln.float64), t([3, -2, 10])
    for got in (mx.ldexp(x, e), x.ldexp(e)):
        assert got.dtype == kiln.float64
        np.testing.assert_array_equal(got.numpy(), np.ldexp(x.numpy(), e.numpy()))
    # The power is computed in float64 too: 2**1023 and 2**-1022 are no float32 values.
    one, exponents = t([1.0, 1.0, 1.0], kiln.float64), t([1023, 200, -1022])
    np.testing.assert_array_equal(mx.ldexp(one, exponents).numpy(),
                                  np.ldexp(np.ones(3), [1023, 200, -1022]))
    assert mx.ldexp(t([1, 2]), t([3, 4])).dtype == kiln.float32


@pytest.mark.parametrize("dtype", [kiln.int8, kiln.uint8, kiln.int16, kiln.int32, kiln.int64])
def test_gcd_and_lcm_are_numpys(dtype, rng):
    low = 0 if dtype == kiln.uint8 else -11
    a, b = rng.integers(low, 12, (6, 1)), rng.integers(low, 12, (5,))
    a[0, 0], b[:2] = 0, 0
    x, y = t(a, dtype), t(b, dtype)
    for got, want in ((mx.gcd(x, y), np.gcd(a, b)), (x.gcd(y), np.gcd(a, b)),
                      (mx.lcm(x, y), np.lcm(a, b)), (x.lcm(y), np.lcm(a, b))):
        assert got.dtype == dtype and got.shape == (6, 5)
        np.testing.assert_array_equal(got.numpy(), want)


def test_gcd_takes_euclids_worst_case():
    # Consecutive Fibonacci numbers take the most steps; these are the largest below 2**63.
    a, b = 7540113804746346429, 4660046610375530309
    assert mx.gcd(t([a, b, 2**62, -12]), t([b, a, 2**40, 18])).tolist() == [1, 1, 2**40, 6]
    assert mx.gcd(t([3 * (a // 4)]), t([3 * (b // 4)])).item() == 3 * math.gcd(a // 4, b // 4)


# ------------------------------------------------------------------------------------------------
# Unary functions


@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_functions_are_numpys(dtype):
    x = t(SPECIAL, dtype)
    values = x.numpy()
    with np.errstate(invalid="ignore"):
        sinc = np.sinc(values.astype(np.float64))
    for name, want in (("sgn", np.nan_to_num(np.sign(values), nan=0.0)),
                       ("signbit", np.signbit(values) & ~np.isnan(values)),
                       ("sinc", sinc), ("deg2rad", np.deg2rad(values)),
                       ("rad2deg", np.rad2deg(values))):
        for got in (getattr(mx, name)(x), getattr(x, name)()):
            assert_close(got, np.asarray(want).astype(got.numpy().dtype),
                         dtype if got.dtype.is_floating_point else None)
    assert mx.positive(x) is x
    assert mx.signbit(t([-3, 0, 2])).tolist() == [True, False, False]
    assert mx.signbit(t([True])).tolist() == [False]
    assert mx.sgn(t([-3, 0, 2], kiln.int8)).tolist() == [-1, 0, 1]


# ------------------------------------------------------------------------------------------------
# Products


@pytest.mark.parametrize("dtype", FLOATS)
def test_dist_is_the_norm_of_the_difference(dtype, rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4,))
    x, y = t(a, dtype), t(b, dtype)
    difference = (x.numpy().astype(np.float64) - y.numpy()).reshape(-1)
    for p, want in ((2, np.linalg.norm(difference)), (1, np.abs(difference).sum()),
                    (math.inf, np.abs(difference).max()), (0, np.count_nonzero(difference)),
                    (3.5, np.sum(np.abs(difference) ** 3.5) ** (1 / 3.5))):
        got = x.dist(y, p)
        assert got.dtype == dtype and got.shape == ()
        assert_close(got, want, dtype)
    assert mx.dist(t([1, 2]), t([4.0, 6.0])).item() == 5.0


@pytest.mark.parametrize("dtype", FLOATS + [kiln.int32])
def test_inner_vdot_tensordot_and_trace_are_numpys(dtype, rng):
    a = rng.integers(-3, 4, (2, 3, 4))
    b = rng.integers(-3, 4, (4, 3, 5))
    x, y = t(a, dtype), t(b, dtype)
    cases = ((mx.tensordot(x, y, ([1, 2], [1, 0])), np.tensordot(a, b, ([1, 2], [1, 0]))),
             (mx.tensordot(x, y, 1), np.tensordot(a, b, 1)),
             (mx.tensordot(x, y, 0), np.tensordot(a, b, 0)),
             (mx.tensordot(x, y, t([[2], [0]])), np.tensordot(a, b, ([2], [0]))),
             (mx.inner(x, y[:, 0, :].t()), np.inner(a, b[:, 0, :].T)),
             (x.inner(t(7, dtype)), a * 7),
             (mx.vdot(x[0, 0], y[:, 1, 1]), np.vdot(a[0, 0], b[:, 1, 1])),
             (x[0, 1].vdot(x[1, 2]), np.vdot(a[0, 1], a[1, 2])))
    for got, want in cases:
        assert got.dtype == dtype
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    trace = x[0].trace()
    assert trace.dtype == (dtype if dtype.is_floating_point else kiln.int64)
    assert trace.item() == np.trace(a[0])


def test_tensordot_sums_a_size_of_one():
    a, b = np.arange(6.0).reshape(2, 1, 3), np.arange(12.0).reshape(4, 3)
    got = mx.tensordot(t(a), t(b), ([1, 2], [0, 1]))
    assert_close(got, (a.sum(1, keepdims=True) * b.sum(0)).sum((1, 2)), kiln.float32)


# ------------------------------------------------------------------------------------------------
# logspace and windows


def test_logspace_is_numpys():
    assert_close(mx.logspace(-2, 3, 7), np.logspace(-2, 3, 7).astype(np.float32))
    got = mx.logspace(0, 3, 4, base=2, dtype=kiln.float64)
    assert got.dtype == kiln.float64 and got.tolist() == [1.0, 2.0, 4.0, 8.0]
    assert mx.logspace(0, 3, 4, dtype=kiln.int64).tolist() == [1, 10, 100, 1000]
    assert mx.logspace(1, 2, 0).shape == (0,)
    assert mx.logspace(0, 1, 3, requires_grad=True).requires_grad
    assert mx.logspace(t(0.0), t(2.0), 3).tolist() == [1.0, 10.0, 100.0]  # 0-d tensors
    with raises(kiln.ShapeError, match="start to be a number or a 0-d tensor"):
        mx.logspace(t([0.0]), 2.0, 3)


WINDOWS = {
    "hann_window": (mx.hann_window, np.hanning),
    "hamming_window": (mx.hamming_window, np.hamming),
    "blackman_window": (mx.blackman_window, np.blackman),
    "bartlett_window": (mx.bartlett_window, np.bartlett),
    "kaiser_window": (mx.kaiser_window, lambda n: np.kaiser(n, 12.0)),
}


@pytest.mark.parametrize("name", sorted(WINDOWS))
@pytest.mark.parametrize("length", [0, 1, 2, 5, 16])
def test_windows_are_numpys(name, length):
    ours, numpys = WINDOWS[name]
    symmetric = ours(length, False, dtype=kiln.float64)
    assert symmetric.dtype == kiln.float64
    np.testing.assert_allclose(symmetric.numpy(), numpys(length), rtol=1e-12, atol=1e-15)
    periodic = ours(length)  # PyTorch's default: periodic, float32
    assert periodic.dtype == kiln.float32
    want = numpys(length + 1)[:-1] if length > 1 else np.ones(length)
    assert_close(periodic, want.astype(np.float32))


def test_window_parameters():
    got = mx.kaiser_window(9, False, beta=-30.0, dtype=kiln.float64)  # I0 is even
    np.testing.assert_allclose(got.numpy(), np.kaiser(9, 30.0), rtol=1e-12)
    got = mx.hamming_window(7, False, alpha=0.6, beta=0.3, dtype=kiln.float64)
    np.testing.assert_allclose(got.numpy(), 0.6 - 0.3 * np.cos(2 * np.pi * np.arange(7) / 6))
    assert mx.hann_window(4, requires_grad=True).requires_grad
    assert mx.bartlett_window(3, dtype=kiln.float16).dtype == kiln.float16


# ------------------------------------------------------------------------------------------------
# In-place methods


def test_in_place_methods_write_into_the_tensor():
    x = t([1.0, 4.0, 0.0])
    for name, other in (("xlogy_", t([2.0, 2.0, 0.0])), ("hypot_", t([1.0, 3.0, 0.0])),
                        ("copysign_", t([-1.0, 1.0, -0.0])), ("heaviside_", t([0.5])),
                        ("ldexp_", t([1, 2, 3]))):
        y = x.clone()
        want = getattr(mx, name[:-1])(x, other)
        assert getattr(y, name)(other) is y
        np.testing.assert_array_equal(y.numpy(), want.numpy())
    for name in ("sgn_", "sinc_", "deg2rad_", "rad2deg_"):
        y = x.clone()
        assert getattr(y, name)() is y
        np.testing.assert_array_equal(y.numpy(), getattr(mx, name[:-1])(x).numpy())
    i = t([12, 18])
    assert i.gcd_(t([8, 4])) is i and i.tolist() == [4, 2]
    assert i.lcm_(t([3, 3])).tolist() == [12, 6]
    d = t([2.0, 3.0], kiln.float64)
    assert d.float_power_(2).tolist() == [4.0, 9.0]


def test_in_place_methods_refuse_a_result_the_tensor_cannot_hold():
    with raises(kiln.DTypeError, match="float_power_.*float64"):
        t([2.0], kiln.float32).float_power_(2)
    with raises(kiln.DTypeError, match="sinc_"):
        t([2]).sinc_()
    with raises(kiln.DTypeError, match="ldexp_"):
        t([2]).ldexp_(t([1]))


# ------------------------------------------------------------------------------------------------
# Gradients


def test_statistics_gradients(rng):
    data = rng.permutation(12).reshape(3, 4) / 3.0  # distinct: no ties
    x = leaf(data)
    gradcheck(lambda x: st.kthvalue(x, 2, 1).values, (x,))
    gradcheck(lambda x: st.aminmax(x, dim=0).min + st.aminmax(x, dim=0).max * 2, (x,))
    gradcheck(lambda x: st.quantile(x, t([0.3, 0.8], kiln.float64), 1), (x,))
    gradcheck(lambda x: st.nanquantile(x, 0.5, 0, interpolation="midpoint"), (x,))
    gradcheck(lambda x: st.cov(x), (x,))
    gradcheck(lambda x: st.corrcoef(x), (x,))
    weights = leaf(rng.uniform(0.5, 1.5, 4))
    gradcheck(lambda x, w: st.cov(x, fweights=t([1, 2, 1, 3]), aweights=w), (x, weights))
    points = leaf(np.sort(rng.standard_normal(4)))
    gradcheck(lambda y, p: st.trapezoid(y, p), (x, points))
    gradcheck(lambda y, p: st.cumulative_trapezoid(y, p), (x, points))
    gradcheck(lambda y: st.trapezoid(y, dx=0.5, dim=0), (x,))


def test_nan_reductions_send_no_gradient_to_nan():
    x = leaf([[1.0, np.nan, 3.0], [np.nan, 2.0, 5.0]])
    (grad,) = kiln.autograd.grad(st.nansum(x) + st.nanmean(x, 1).sum(), [x])
    np.testing.assert_allclose(grad.numpy(), [[1.5, 0.0, 1.5], [0.0, 1.5, 1.5]])
    values, indices = st.nanmedian(x, 1)
    (grad,) = kiln.autograd.grad(values.sum(), [x])
    np.testing.assert_array_equal(grad.numpy(), [[1.0, 0, 0], [0, 1.0, 0]])
    m = leaf([2.0, 1.0, 2.0, 3.0])
    (grad,) = kiln.autograd.grad(st.mode(m).values, [m])
    assert grad.tolist() == [0.0, 0.0, 1.0, 0.0]  # the last occurrence


def test_elementwise_gradients(rng):
    a, b = leaf(rng.standard_normal((2, 3))), leaf(rng.standard_normal((2, 3)))
    positive = leaf(rng.uniform(0.5, 2.0, (2, 3)))
    for function in (mx.logaddexp, mx.logaddexp2, mx.hypot, mx.fmax, mx.fmin, mx.copysign,
                     mx.inner, mx.dist, lambda x, y: mx.tensordot(x, y, ([0], [0]))):
        gradcheck(function, (a, b))
    gradcheck(mx.xlogy, (a, positive))
    gradcheck(mx.float_power, (positive, b))
    for function in (mx.sinc, mx.deg2rad, mx.rad2deg, lambda x: mx.frexp(x).mantissa,
                     lambda x: mx.ldexp(x, t([[1, -2, 3]])), lambda x: mx.trace(x[:, :2]),
                     lambda x: mx.vdot(x[0], x[1])):
        gradcheck(function, (a,))


def test_gradients_at_special_points():
    a, b = leaf([1.0, 0.0, -np.inf, 2.0]), leaf([1.0, 3.0, -np.inf, 2.0])
    grads = kiln.autograd.grad(mx.logaddexp(a, b).sum(), [a, b])
    np.testing.assert_allclose(grads[0].numpy(), [0.5, 1 / (1 + np.exp(3)), 1.0, 0.5])
    grads = kiln.autograd.grad(mx.fmax(a, b).sum(), [a, b])  # ties split, as PyTorch's
    np.testing.assert_array_equal(grads[0].numpy(), [0.5, 0.0, 0.5, 0.5])
    x, y = leaf([0.0, 0.0, 2.0]), leaf([0.0, 3.0, 4.0])
    grads = kiln.autograd.grad(mx.xlogy(x, y).sum(), [x, y])
    np.testing.assert_allclose(grads[0].numpy(), [0.0, np.log(3.0), np.log(4.0)])
    np.testing.assert_allclose(grads[1].numpy(), [0.0, 0.0, 0.5])
    z = leaf([0.0, 0.5])
    (grad,) = kiln.autograd.grad(mx.sinc(z).sum(), [z])
    np.testing.assert_allclose(grad.numpy(), [0.0, (np.pi * 0.5 * 0 - 1) / (np.pi * 0.25)])
    h = leaf([0.0, 3.0])
    (grad,) = kiln.autograd.grad(mx.hypot(h, t([0.0, 4.0], kiln.float64)).sum(), [h])
    np.testing.assert_allclose(grad.numpy(), [0.0, 0.6])


# ------------------------------------------------------------------------------------------------
# kiln.jit


def test_functions_trace_under_jit(rng):
    levels = t([0.25, 0.75], kiln.float32)

    def composed(x, y, i, j):
        return (st.quantile(x, levels, 1).sum() + st.nanquantile(x, 0.5).sum()
                + st.kthvalue(x, 2).values.sum() + st.mode(x, 0).values.sum()
                + st.nanmedian(x, 1).values.sum() + st.nanmean(x) + st.cov(x).sum()
                + st.trapezoid(x, dx=0.5).sum() + st.histc(x, 4, -1, 1).sum()
                + st.histogram(x, 3, range=(-1.0, 1.0)).hist.sum()
                + mx.logaddexp(x, y).sum() + mx.hypot(x, y).sum() + mx.xlogy(x, y * y).sum()
                + mx.frexp(x).mantissa.sum() + mx.tensordot(x, y, ([0], [0])).sum()
                + mx.sinc(x).sum() + mx.gcd(i, j).sum() + mx.lcm(i, j).sum()
                + mx.signbit(x).sum() + mx.fmax(x, y).sum())

    jitted = kiln.jit(composed)
    for _ in range(2):
        args = (t(rng.standard_normal((3, 4)), kiln.float32),
                t(rng.standard_normal((3, 4)), kiln.float32),
                t(rng.integers(-9, 9, (3, 4))), t(rng.integers(-9, 9, (3, 4))))
        assert_close(jitted(*args), composed(*args).numpy())
    x, y = args[:2]
    eager = kiln.grad(lambda x: composed(x, y, *args[2:]))(x)
    assert_close(kiln.jit(kiln.grad(lambda x: composed(x, y, *args[2:])))(x), eager.numpy())


def test_ranges_read_from_the_data_are_eager_only():
    with raises(kiln.KilnTypeError, match="histc.*kiln.jit"):
        kiln.jit(lambda x: st.histc(x, 4))(t([1.0, 2.0]))
    with raises(kiln.KilnTypeError, match="histogram.*range"):
        kiln.jit(lambda x: st.histogram(x, 4).hist)(t([1.0, 2.0]))


# ------------------------------------------------------------------------------------------------
# PyTorch


def test_matches_pytorch(torch, rng):
    data = rng.standard_normal((4, 6))
    data[1, 2] = np.nan
    x, tx = t(data), torch.tensor(data)
    for ours, theirs in (
            (st.nanquantile(x, 0.3, 1, interpolation="nearest"),
             torch.nanquantile(tx, 0.3, 1, interpolation="nearest")),
            (st.nanmedian(x, 1).values, torch.nanmedian(tx, 1).values),
            (st.cov(x[2:]), torch.cov(tx[2:])),
            (st.histogram(x[2:].abs(), 3).hist, torch.histogram(tx[2:].abs(), 3).hist),
            (mx.logaddexp2(x, x.flip(0)), torch.logaddexp2(tx, tx.flip(0))),
            (mx.xlogy(x, x.flip(1)), torch.xlogy(tx, tx.flip(1))),
            (mx.copysign(x[2:], -x[2:].flip(1)), torch.copysign(tx[2:], -tx[2:].flip(1))),
            (mx.sgn(x), torch.sgn(tx)),
            (mx.kaiser_window(7, beta=5.0, dtype=kiln.float64),
             torch.kaiser_window(7, True, 5.0, dtype=torch.float64))):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12, equal_nan=True)


# ------------------------------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize("call, error, match", [
    (lambda: st.aminmax(t(np.zeros(0))), kiln.KilnValueError, "aminmax: .*no elements"),
    (lambda: st.aminmax(t(np.zeros((2, 0))), dim=1), kiln.KilnIndexError, "non-zero size"),
    (lambda: st.kthvalue(t([1.0, 2.0]), 3), kiln.KilnIndexError, r"k in \[1, 2\]"),
    (lambda: st.kthvalue(t([True]), 1), kiln.DTypeError, "kthvalue: .*bool"),
    (lambda: st.mode(t(np.zeros((2, 0))), 1), kiln.KilnIndexError, "mode: .*non-zero size"),
    (lambda: st.nanmedian(t([True])), kiln.DTypeError, "nanmedian"),
    (lambda: st.nanmean(t([1, 2])), kiln.DTypeError, "nanmean: .*floating-point"),
    (lambda: st.nansum(t([1.0]), keepdim=1), kiln.KilnTypeError, "keepdim must be a bool"),
    (lambda: st.quantile(t([1, 2]), 0.5), kiln.DTypeError, "float32 or float64"),
    (lambda: st.quantile(t([1.0]), 1.5), kiln.KilnValueError, r"q in \[0, 1\]"),
    (lambda: st.quantile(t([1.0]), t([0.5, 1.5])), kiln.KilnValueError, "values of q"),
    (lambda: st.quantile(t([1.0], kiln.float32), t([0.5])), kiln.DTypeError, "q of the input"),
    (lambda: st.quantile(t([1.0]), t([[0.5]])), kiln.ShapeError, "0-d or 1-d"),
    (lambda: st.quantile(t(np.zeros(0, np.float32)), 0.5), kiln.KilnValueError, "non-empty"),
    (lambda: st.quantile(t([1.0]), 0.5, interpolation="cubic"), kiln.KilnValueError,
     "interpolation"),
    (lambda: st.histc(t([1, 2]), 3), kiln.DTypeError, "histc: .*floating-point"),
    (lambda: st.histc(t([1.0]), 0), kiln.KilnValueError, "bins must be at least 1"),
    (lambda: st.histc(t([1.0]), 3, 2, 1), kiln.KilnValueError, "min < max"),
    (lambda: st.histc(t([1.0, np.inf]), 3), kiln.KilnValueError, "finite range"),
    (lambda: st.histogram(t([1.0]), t([0.0, 1.0]), range=(0, 1)), kiln.KilnTypeError,
     "range goes with a number"),
    (lambda: st.histogram(t([1.0]), t([0.0])), kiln.ShapeError, "at least 2 bin edges"),
    (lambda: st.histogram(t([1.0], kiln.float32), t([0.0, 1.0])), kiln.DTypeError, "bin edges"),
    (lambda: st.histogram(t([1.0]), 2, weight=t([1.0, 2.0])), kiln.ShapeError, "weight"),
    (lambda: st.histogram(t([1.0]), 2, range=(1, 0)), kiln.KilnValueError, "min <= max"),
    (lambda: st.histogram(t([1.0]), 2, range=1), kiln.KilnTypeError, "pair"),
    (lambda: st.cov(t(np.zeros((2, 2, 2)))), kiln.ShapeError, "at most 2 dims"),
    (lambda: st.cov(t([1.0, 2.0]), fweights=t([1.0, 2.0])), kiln.DTypeError, "an integer"),
    (lambda: st.cov(t([1.0, 2.0]), aweights=t([1, 2])), kiln.DTypeError, "a floating-point"),
    (lambda: st.cov(t([1.0, 2.0]), fweights=t([1, -2])), kiln.KilnValueError, "fweights >= 0"),
    (lambda: st.cov(t([1.0, 2.0]), fweights=t([1])), kiln.ShapeError, "one element per"),
    (lambda: st.cov(t([1.0, 2.0]), aweights=t([0.0, 0.0])), kiln.KilnValueError, "sum to zero"),
    (lambda: st.corrcoef(t(np.zeros((1, 1, 1)))), kiln.ShapeError, "corrcoef"),
    (lambda: st.trapezoid(t([1.0, 2.0]), t([1.0, 2.0]), dx=1), kiln.KilnTypeError, "not both"),
    (lambda: st.trapezoid(t([1.0, 2.0]), t([1.0])), kiln.ShapeError, "one x value"),
    (lambda: st.trapezoid(t([True])), kiln.DTypeError, "bool"),
    (lambda: st.trapezoid(t(1.0)), kiln.KilnIndexError, "dim"),
    (lambda: mx.logaddexp(t([1]), t([2])), kiln.DTypeError, "logaddexp: .*floating-point"),
    (lambda: mx.hypot(t([1.0]), 2.0), kiln.KilnTypeError, "other to be a kiln.Tensor"),
    (lambda: mx.xlogy(1.0, 2.0), kiln.KilnTypeError, "xlogy: "),
    (lambda: mx.copysign(t([1.0]), "a"), kiln.KilnTypeError, "real number"),
    (lambda: mx.heaviside(t([1.0]), t([1.0], kiln.float32)), kiln.DTypeError, "one dtype"),
    (lambda: mx.frexp(t([1])), kiln.DTypeError, "frexp: .*floating-point"),
    (lambda: mx.gcd(t([1.0]), t([2])), kiln.DTypeError, "gcd: .*integer"),
    (lambda: mx.lcm(t([True]), t([True])), kiln.DTypeError, "lcm"),
    (lambda: mx.positive(t([True])), kiln.DTypeError, "positive: .*bool"),
    (lambda: mx.dist(t([1]), t([2])), kiln.DTypeError, "dist: .*floating-point"),
    (lambda: mx.dist(t([1.0]), t([2.0]), "fro"), kiln.KilnTypeError, "p must be"),
    (lambda: mx.inner(t([1.0, 2.0]), t([1.0])), kiln.ShapeError, "last dims"),
    (lambda: mx.inner(t([1.0]), t([1.0], kiln.float32)), kiln.DTypeError, "one dtype"),
    (lambda: mx.vdot(t([1.0, 2.0]), t([1.0])), kiln.ShapeError, "vdot"),
    (lambda: mx.tensordot(t([1.0]), t([1.0]), -1), kiln.KilnValueError, "dims >= 0"),
    (lambda: mx.tensordot(t([1.0]), t([1.0]), 2), kiln.KilnValueError, "at most the number"),
    (lambda: mx.tensordot(t([1.0]), t([1.0]), "x"), kiln.KilnTypeError, "pair of lists"),
    (lambda: mx.tensordot(t([[1.0]]), t([1.0]), ([0, 0], [0, 0])), kiln.KilnValueError,
     "more than once"),
    (lambda: mx.tensordot(t([[1.0]]), t([1.0]), ([0, 1], [0])), kiln.KilnValueError,
     "as many dims"),
    (lambda: mx.tensordot(t([1.0, 2.0]), t([1.0, 2.0, 3.0]), 1), kiln.ShapeError, "need to match"),
    (lambda: mx.tensordot(t([1.0]), t([1], kiln.float32), 1), kiln.DTypeError, "one dtype"),
    (lambda: mx.trace(t([1.0])), kiln.ShapeError, "matrix"),
    (lambda: mx.logspace(0, 1, -1), kiln.KilnValueError, "steps must be at least 0"),
    (lambda: mx.hann_window(-1), kiln.KilnValueError, "window_length must be at least 0"),
    (lambda: mx.hann_window(3, dtype=kiln.int64), kiln.DTypeError, "floating-point dtype"),
    (lambda: mx.bartlett_window(3, periodic=1), kiln.KilnTypeError, "periodic must be a bool"),
    (lambda: mx.kaiser_window(3, beta=math.inf), kiln.KilnValueError, "finite beta"),
], ids=lambda value: value if isinstance(value, str) else "")
def test_argument_errors(call, error, match):
    with raises(error, match=match):
        call()
