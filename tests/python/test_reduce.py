"""Reductions, scans and softmax (kiln.mint.sum ... log_softmax) against NumPy."""

import pickle

import numpy as np
import pytest

import kiln
from conftest import ALL_DTYPES, FLOAT_DTYPES, assert_close, numpy_dtype, raises, random_array

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy on empty / ddof >= N

mint = kiln.mint

SHAPES = [(), (0,), (5,), (3, 4), (2, 3, 4), (2, 0, 3)]
DIMS = [None, 0, -1, (0, 2)]


def _ids(v):
    return v.name if isinstance(v, kiln.dtype) else str(v)


def np_axis(shape, dim):
    """The NumPy axis for a kiln dim (a 0-d tensor accepts dim 0 / -1 and reduces nothing)."""
    if dim is None or len(shape) == 0:
        return None
    return dim


def dim_valid(shape, dim):
    if dim is None:
        return True
    dims = dim if isinstance(dim, tuple) else (dim,)
    bound = max(len(shape), 1)
    return all(-bound <= d < bound for d in dims) and (len(dims) < 2 or len(shape) >= 3)


def reduced_size(shape, dim):
    if dim is None or len(shape) == 0:
        return int(np.prod(shape))
    dims = dim if isinstance(dim, tuple) else (dim,)
    return int(np.prod([shape[d] for d in dims]))


def accumulate_dtype(dtype):
    return dtype if dtype.is_floating_point else kiln.int64


def floating_dtype(dtype):
    return dtype if dtype.is_floating_point else kiln.float32


def wide(a, dtype):
    """Values widened for the reference computation: float64 for floats, int64 for integers."""
    return a.astype(np.float64 if dtype.is_floating_point else np.int64)


def np_logsumexp(a, axis, keepdims):
    m = np.max(a, axis=axis, keepdims=True, initial=-np.inf)
    s = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return s if keepdims else np.squeeze(s, axis=axis)


def np_softmax(a, axis):
    m = np.max(a, axis=axis, keepdims=True, initial=-np.inf)
    e = np.exp(a - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def np_log_softmax(a, axis):
    m = np.max(a, axis=axis, keepdims=True, initial=-np.inf)
    return a - m - np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True))


# op name -> (kiln call, NumPy reference on widened values, result dtype, needs a non-empty
# reduction, valid input dtypes)
REDUCTIONS = {
    "sum": (lambda t, d, k: mint.sum(t, d, k),
            lambda a, ax, k: np.sum(a, axis=ax, keepdims=k), accumulate_dtype, False, ALL_DTYPES),
    "prod": (lambda t, d, k: mint.prod(t, d, k),
             lambda a, ax, k: np.prod(a, axis=ax, keepdims=k), accumulate_dtype, False,
             ALL_DTYPES),
    "mean": (lambda t, d, k: mint.mean(t, d, k),
             lambda a, ax, k: np.mean(a.astype(np.float64), axis=ax, keepdims=k),
             floating_dtype, False, ALL_DTYPES),
    "amax": (lambda t, d, k: mint.amax(t, d, k),
             lambda a, ax, k: np.max(a, axis=ax, keepdims=k), lambda d: d, True, ALL_DTYPES),
    "amin": (lambda t, d, k: mint.amin(t, d, k),
             lambda a, ax, k: np.min(a, axis=ax, keepdims=k), lambda d: d, True, ALL_DTYPES),
    "var": (lambda t, d, k: mint.var(t, d, keepdim=k),
            lambda a, ax, k: np.var(a.astype(np.float64), axis=ax, keepdims=k, ddof=1),
            floating_dtype, False, ALL_DTYPES),
    "std": (lambda t, d, k: mint.std(t, d, correction=0, keepdim=k),
            lambda a, ax, k: np.std(a.astype(np.float64), axis=ax, keepdims=k),
            floating_dtype, False, ALL_DTYPES),
    "logsumexp": (lambda t, d, k: mint.logsumexp(t, d, k),
                  lambda a, ax, k: np_logsumexp(a.astype(np.float64), ax, k), floating_dtype,
                  False, ALL_DTYPES),
}

CASES = [(op, dtype) for op, spec in REDUCTIONS.items() for dtype in spec[4]]


def make_input(shape, dtype, rng, layout="contiguous", low=-3.0, high=3.0):
    """A kiln tensor of `shape` in the given memory layout and the NumPy array of its values."""
    if layout == "transposed":
        base = random_array(shape[::-1], dtype, rng, low, high)
        t = kiln.tensor(base, dtype=dtype).permute(*reversed(range(len(shape))))
        return t, base.transpose()
    if layout == "sliced":
        base = random_array(shape[:-1] + (2 * shape[-1],), dtype, rng, low, high)
        t = kiln.tensor(base, dtype=dtype).slice(-1, 0, 2 * shape[-1], 2)
        return t, base[..., ::2]
    a = random_array(shape, dtype, rng, low, high)
    return kiln.tensor(a, dtype=dtype), a


def check_reduction(op, t, a, dtype, dim, keepdim):
    call, ref, out_dtype, nonempty, _ = REDUCTIONS[op]
    if nonempty and reduced_size(a.shape, dim) == 0:
        with raises(kiln.KilnValueError, match="cannot reduce over an empty dimension"):
            call(t, dim, keepdim)
        return
    out = call(t, dim, keepdim)
    expected = ref(wide(a, dtype), np_axis(a.shape, dim), keepdim)
    if keepdim and len(a.shape) == 0:
        expected = np.asarray(expected).reshape(())
    assert out.dtype == out_dtype(dtype)
    assert_close(out, np.asarray(expected).astype(numpy_dtype(out.dtype)))


def each_case(shapes, dims, layouts=("contiguous",)):
    """(shape, dim, layout) combinations valid for the rank, for tests that loop over them."""
    for shape in shapes:
        for dim in dims:
            for layout in layouts:
                if dim_valid(shape, dim) and (layout == "contiguous" or len(shape) >= 2):
                    yield shape, dim, layout


class context:
    """Names the failing case in an assertion raised inside a loop."""

    def __init__(self, **case):
        self.case = case

    def __enter__(self):
        return self

    def __exit__(self, kind, error, tb):
        if error is not None:
            error.add_note(f"case: {self.case}")
        return False


@pytest.mark.parametrize("op,dtype", CASES, ids=_ids)
def test_reduction_matches_numpy(op, dtype, rng):
    low, high = (-1.5, 1.5) if op == "prod" else (-3.0, 3.0)  # keep products finite in float16
    for shape, dim, _ in each_case(SHAPES, DIMS):
        t, a = make_input(shape, dtype, rng, low=low, high=high)
        for keepdim in (False, True):
            with context(shape=shape, dim=dim, keepdim=keepdim):
                check_reduction(op, t, a, dtype, dim, keepdim)


@pytest.mark.parametrize("op", list(REDUCTIONS))
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float16, kiln.int32], ids=_ids)
def test_reduction_of_non_contiguous_input(op, dtype, rng):
    for shape, dim, layout in each_case([(3, 4), (2, 3, 4), (4, 3, 5)], DIMS,
                                        ("transposed", "sliced")):
        t, a = make_input(shape, dtype, rng, layout, low=-1.5, high=1.5)
        assert not t.is_contiguous()
        for keepdim in (False, True):
            with context(shape=shape, dim=dim, layout=layout, keepdim=keepdim):
                check_reduction(op, t, a, dtype, dim, keepdim)


@pytest.mark.parametrize("op", ["max", "min", "argmax", "argmin"])
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=_ids)
def test_index_reductions_match_numpy(op, dtype, rng):
    fn = getattr(mint, op)
    is_max = op.endswith("max")
    for shape, dim, layout in each_case(SHAPES, [None, 0, -1, 1],
                                        ("contiguous", "transposed", "sliced")):
        t, a = make_input(shape, dtype, rng, layout)
        ax = np_axis(shape, dim)
        for keepdim in (False, True):
            with context(shape=shape, dim=dim, layout=layout, keepdim=keepdim):
                if reduced_size(shape, dim) == 0:
                    with raises(kiln.KilnValueError,
                                       match="cannot reduce over an empty dimension"):
                        fn(t, dim, keepdim)
                    continue
                values = (np.max if is_max else np.min)(a, axis=ax, keepdims=keepdim)
                indices = (np.argmax if is_max else np.argmin)(a, axis=ax, keepdims=keepdim)
                if len(shape) == 0:
                    values = np.asarray(values).reshape(())
                    indices = np.asarray(indices).reshape(())
                out = fn(t, dim, keepdim)
                if op.startswith("arg"):
                    assert out.dtype == kiln.int64
                    assert_close(out, indices)
                elif dim is None:
                    assert out.dtype == dtype
                    assert_close(out, values)
                else:
                    v, i = out
                    assert v.dtype == dtype and i.dtype == kiln.int64
                    assert_close(v, values)
                    assert_close(i, indices)


@pytest.mark.parametrize("op", ["cumsum", "softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=_ids)
def test_along_dim_ops_match_numpy(op, dtype, rng):
    for shape, dim, layout in each_case(SHAPES, [0, -1, 1], ("contiguous", "transposed")):
        t, a = make_input(shape, dtype, rng, layout)
        ax = np_axis(shape, dim)
        with context(shape=shape, dim=dim, layout=layout):
            out = getattr(mint, op)(t, dim)
            if op == "cumsum":
                expected = np.cumsum(wide(a, dtype), axis=ax)
                expected_dtype = accumulate_dtype(dtype)
            else:
                ref = np_softmax if op == "softmax" else np_log_softmax
                expected = ref(a.astype(np.float64), ax)
                expected_dtype = floating_dtype(dtype)
            assert out.dtype == expected_dtype
            assert_close(out, expected.reshape(shape).astype(numpy_dtype(out.dtype)))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=_ids)
def test_reverse_cumsum_is_numpys_suffix_sums(dtype, rng):
    for shape, dim, layout in each_case(SHAPES, [0, -1, 1], ("contiguous", "transposed")):
        t, a = make_input(shape, dtype, rng, layout)
        ax = np_axis(shape, dim)
        with context(shape=shape, dim=dim, layout=layout):
            out = mint.cumsum(t, dim, reverse=True)
            expected = np.flip(np.cumsum(np.flip(wide(a, dtype), ax), axis=ax), ax)
            assert out.dtype == accumulate_dtype(dtype)
            assert_close(out, expected.reshape(shape).astype(numpy_dtype(out.dtype)))
    assert mint.cumsum(kiln.tensor([1, 2, 3]), 0, reverse=True).tolist() == [6, 5, 3]
    assert t.cumsum(0, reverse=True).shape == t.shape
    with pytest.raises(TypeError):
        mint.cumsum(kiln.tensor([1.0]), 0, None, True)  # reverse is keyword-only


@pytest.mark.parametrize("correction", [0, 1, 2, 5])
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.int16], ids=_ids)
def test_var_and_std_follow_correction_like_numpy_ddof(dtype, correction, rng):
    t, a = make_input((4, 5), dtype, rng)
    for dim in (None, 0, 1):
        for keepdim in (False, True):
            v = mint.var(t, dim, correction=correction, keepdim=keepdim)
            s = mint.std(t, dim, correction=correction, keepdim=keepdim)
            ev = np.var(a.astype(np.float64), axis=dim, ddof=correction, keepdims=keepdim)
            assert_close(v, np.asarray(ev).astype(numpy_dtype(v.dtype)))
            assert_close(s, np.sqrt(ev).astype(numpy_dtype(s.dtype)))


def test_var_and_std_take_pytorchs_unbiased_spelling(rng):
    # t.std(unbiased=False), common in PyTorch code, was nanobind's "incompatible arguments".
    t, a = make_input((4, 5), kiln.float64, rng)
    for op in ("var", "std"):
        for unbiased, ddof in ((True, 1), (False, 0)):
            got = getattr(t, op)(1, unbiased=unbiased)
            assert_close(got, getattr(np, op)(a, axis=1, ddof=ddof))
        assert_close(getattr(mint, op)(t), getattr(np, op)(a, ddof=1))  # correction 1 by default
        with raises(kiln.KilnValueError, match=f"{op}: expected correction or unbiased, not both"):
            getattr(t, op)(correction=0, unbiased=True)


# Shapes whose rows or columns are longer than one work chunk (16K elements), so partials are
# merged; the second and third put the reduced dim outermost (the columns layout).
LONG_CASES = [((3, 40000), 1), ((40000, 3), 0), ((2, 20000, 5), 1), ((70000,), None)]


@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin", "var", "logsumexp"])
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.bfloat16, kiln.int32],
                         ids=_ids)
def test_long_reductions_merge_partials_correctly(op, dtype, rng):
    for shape, dim in LONG_CASES:
        t, a = make_input(shape, dtype, rng)
        with context(shape=shape, dim=dim):
            check_reduction(op, t, a, dtype, dim, False)


@pytest.mark.parametrize("shape,dim", LONG_CASES[:3], ids=_ids)
@pytest.mark.parametrize("op", ["argmax", "argmin", "max", "min"])
def test_long_index_reductions_find_the_first_extremum(op, shape, dim, rng):
    a = rng.integers(-5, 5, size=shape).astype(np.float32)  # many ties
    t = kiln.tensor(a)
    is_max = op.endswith("max")
    indices = (np.argmax if is_max else np.argmin)(a, axis=dim)
    out = getattr(mint, op)(t, dim)
    assert_close(out if op.startswith("arg") else out[1], indices)


# (11, 3000): rows scanned four side by side, and the rows a chunk leaves over.
@pytest.mark.parametrize("shape,dim", [((3, 40000), 1), ((11, 3000), 1), ((40000, 3), 0),
                                       ((5, 300, 7), 1)], ids=_ids)
@pytest.mark.parametrize("op", ["cumsum", "softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float16, kiln.int8], ids=_ids)
def test_long_along_dim_ops_match_numpy(op, dtype, shape, dim, rng):
    t, a = make_input(shape, dtype, rng)
    out = getattr(mint, op)(t, dim)
    if op == "cumsum":
        expected = np.cumsum(wide(a, dtype), axis=dim)
        suffix = np.flip(np.cumsum(np.flip(wide(a, dtype), dim), axis=dim), dim)
        np.testing.assert_allclose(mint.cumsum(t, dim, reverse=True).numpy().astype(np.float64),
                                   suffix, rtol=2e-3, atol=0.1)
        if dtype == kiln.float16:  # prefix sums reach ~100: compare at float16's resolution there
            np.testing.assert_allclose(out.numpy(), expected, rtol=2e-3, atol=0.1)
            return
    else:
        expected = (np_softmax if op == "softmax" else np_log_softmax)(a.astype(np.float64), dim)
    assert_close(out, expected.astype(numpy_dtype(out.dtype)))


def test_float32_sum_of_16m_values_is_accurate_and_deterministic():
    a = np.random.default_rng(7).random(16 * 1024 * 1024, dtype=np.float32)
    t = kiln.from_numpy(a)
    first = mint.sum(t).item()
    exact = float(np.sum(a.astype(np.float64)))
    assert abs(first - float(np.sum(a))) <= 1e-5 * exact
    assert abs(first - exact) <= 1e-6 * exact
    assert all(mint.sum(t).item() == first for _ in range(3))


def test_max_and_min_along_a_dim_give_a_named_tuple():
    # As PyTorch's torch.return_types.max: t.max(1).values raised AttributeError.
    t = kiln.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    best = t.max(1)
    assert best.values.tolist() == [5.0, 7.0] and best.indices.tolist() == [1, 0]
    assert isinstance(best, mint.ValuesIndices) and isinstance(best, tuple)
    values, indices = mint.min(t, 0, keepdim=True)
    assert values.tolist() == [[1.0, 0.0, 2.0]] and indices.tolist() == [[0, 1, 0]]
    jitted = kiln.jit(lambda x: x.max(1))(t)
    assert isinstance(jitted, mint.ValuesIndices) and jitted.values.tolist() == [5.0, 7.0]
    assert pickle.loads(pickle.dumps(best)).indices.tolist() == [1, 0]


def test_nan_propagates_like_numpy():
    a = np.array([[1.0, np.nan, 3.0, np.nan], [4.0, 2.0, 0.5, 1.0]], np.float32)
    t = kiln.tensor(a)
    for op in ("amax", "amin"):
        assert_close(getattr(mint, op)(t, 1), getattr(np, op)(a, axis=1))
        assert_close(getattr(mint, op)(t, 0), getattr(np, op)(a, axis=0))
    assert_close(mint.argmax(t, 1), np.argmax(a, axis=1))
    assert_close(mint.argmin(t, 1), np.argmin(a, axis=1))
    assert mint.argmax(t).item() == 1
    values, indices = mint.max(t, 1)
    assert_close(values, np.max(a, axis=1))
    assert indices.tolist() == [1, 0]
    assert np.isnan(mint.max(t).item())
    # A NaN, a +inf or only -inf along the dim makes the whole softmax row NaN (as PyTorch).
    rows = kiln.tensor([[1.0, np.nan], [np.inf, 0.0], [-np.inf, -np.inf], [0.0, 0.0]])
    for dim, r in ((1, rows), (0, rows.transpose(0, 1))):
        out = mint.softmax(r, dim).numpy()
        out = out if dim == 1 else out.T
        assert np.isnan(out[:3]).all()
        assert_close(kiln.tensor(out[3]), np.array([0.5, 0.5], np.float32))
    lse = mint.logsumexp(kiln.tensor([[-np.inf, -np.inf], [np.inf, 1.0]]), 1).numpy()
    assert lse[0] == -np.inf and lse[1] == np.inf


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64], ids=str)
@pytest.mark.parametrize("shape", [(300, 5000), (3000, 7), (2, 3, 4099)])
def test_logsumexp_over_columns_with_non_finite_columns(shape, dtype, rng):
    # Along dim 0 (dim 1 for the 3-d case): the column path, over several column tiles and row
    # chunks, where a column's maximum may be inf, -inf (every element) or NaN.
    x = rng.uniform(-30, 30, size=shape)
    dim = 1 if len(shape) == 3 else 0
    cols = np.moveaxis(x, dim, 0)  # a view: writes land in x
    cols[:, ..., 0] = -np.inf
    cols[-1, ..., 1] = np.inf
    cols[1, ..., 2] = np.nan
    cols[:, ..., 3] = np.inf
    cols[0, ..., 4] = -np.inf
    got = mint.logsumexp(kiln.tensor(x).to(dtype), dim).numpy().astype(np.float64)
    top = np.max(np.where(np.isnan(x), -np.inf, x), axis=dim, keepdims=True)
    shift = np.where(np.isfinite(top), top, 0)
    with np.errstate(invalid="ignore"):
        expected = np.log(np.sum(np.exp(x - shift), axis=dim)) + np.squeeze(shift, dim)
    expected = np.where(np.isinf(np.squeeze(top, dim)), np.squeeze(top, dim), expected)
    expected = np.where(np.isnan(x).any(axis=dim), np.nan, expected)
    # The result is max + log(sum), so its absolute error scales with the max (up to 30 here).
    eps = 1.2e-7 if dtype == kiln.float32 else 2.2e-16
    np.testing.assert_allclose(got, expected, rtol=16 * eps, atol=30 * 4 * eps, equal_nan=True)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.float16], ids=str)
@pytest.mark.parametrize("length", [1, 7, 8, 9, 1003])
def test_prod_of_long_rows(length, dtype, rng):
    # Long enough for the eight interleaved partial products and their tail; values near 1 keep
    # the product finite, a zero and a negative sign checked in one row each.
    x = rng.uniform(0.9, 1.1, size=(3, length))
    x[1, length // 2] = 0
    x[2, 0] = -x[2, 0]
    k = kiln.tensor(x).to(dtype)
    assert_close(mint.prod(k, 1), np.prod(k.to(kiln.float64).numpy(), axis=1), dtype=dtype)


def test_prod_accumulates_in_a_given_dtype_with_its_gradient_in_the_inputs(rng):
    a = rng.uniform(0.5, 2.0, size=(3, 4)).astype(np.float32)
    x = kiln.tensor(a).requires_grad_()
    for y in (mint.prod(x, 1, dtype=kiln.float64), x.prod(1, dtype=kiln.float64)):
        assert y.dtype == kiln.float64
        assert_close(y, np.prod(a.astype(np.float64), axis=1))
    mint.prod(x, 1, dtype=kiln.float64).sum().backward()
    assert x.grad.dtype == kiln.float32
    assert_close(x.grad, np.prod(a, axis=1, keepdims=True) / a)
    big = kiln.tensor([100, 100], dtype=kiln.int8)
    assert mint.prod(big).item() == 10000  # int64 by default
    assert mint.prod(big, dtype=kiln.int8).item() == np.int8(16)  # wraps, as PyTorch's
    with raises(kiln.DTypeError):
        mint.prod(x, dtype="float64x")


def test_prod_does_not_turn_an_in_range_product_into_nan():
    # Interleaved partial products can overflow in one lane and underflow in another (inf * 0);
    # the product in order is finite.
    # (Long enough for every one of the 32 lanes to overflow or underflow.)
    alternating = np.tile([1e200, 1e-200], 256)
    assert mint.prod(kiln.tensor(alternating)).item() == pytest.approx(1.0)
    alternating32 = np.tile(np.array([1e38, 1e-38], np.float32), 72)
    assert mint.prod(kiln.tensor(alternating32)).item() == pytest.approx(1.0, rel=1e-3)


def test_empty_reductions_give_identities():
    t = kiln.tensor(np.zeros((2, 0, 3), np.float32))
    assert mint.sum(t, 1).tolist() == [[0, 0, 0]] * 2
    assert mint.prod(t, 1).tolist() == [[1, 1, 1]] * 2
    assert np.isnan(mint.mean(t, 1).numpy()).all()
    assert np.isnan(mint.var(t).numpy())
    assert mint.logsumexp(t, 1).tolist() == [[-np.inf] * 3] * 2
    assert mint.sum(t, 2).shape == (2, 0)
    assert mint.amax(t, 2).shape == (2, 0)  # nothing reduced over an empty dim


def test_sum_and_cumsum_dtype_argument():
    i = kiln.tensor([1, 2, 3], dtype=kiln.int32)
    assert mint.sum(i, dtype=kiln.float32).dtype == kiln.float32
    assert mint.sum(i, dtype="int32").dtype == kiln.int32
    assert mint.sum(i.numpy().astype(np.int8), dtype=kiln.int16).item() == 6
    h = kiln.tensor([60000.0, 60000.0], dtype=kiln.float16)
    assert mint.sum(h).item() == np.inf  # the float16 result overflows
    assert mint.sum(h, dtype=kiln.float32).item() == 120000.0
    assert mint.cumsum(i, 0, dtype=kiln.float64).dtype == kiln.float64
    assert mint.cumsum(kiln.tensor([True, True]), 0).tolist() == [1, 2]
    big = kiln.tensor([2**62, 2**62, 2**62], dtype=kiln.int64)
    assert mint.sum(big).item() == np.sum(np.array([2**62] * 3, np.int64))  # wraps like NumPy


def test_mean_dtype_argument(rng):
    # As PyTorch's mean(dtype=...): the input is converted first, so float64 accumulates a
    # float32 tensor; only floating dtypes are accepted.
    x = rng.standard_normal((3, 5)).astype(np.float32)
    m = mint.mean(kiln.tensor(x), 1, dtype=kiln.float64)
    assert m.dtype == kiln.float64
    np.testing.assert_allclose(m.numpy(), x.astype(np.float64).mean(1), rtol=1e-15)
    assert kiln.tensor(x).mean(dtype="float16").dtype == kiln.float16
    assert mint.mean(kiln.tensor([1, 2], dtype=kiln.int32), dtype=kiln.float64).item() == 1.5
    w = kiln.tensor(x).requires_grad_()
    mint.mean(w, dtype=kiln.float64).backward()
    assert w.grad.dtype == kiln.float32
    np.testing.assert_allclose(w.grad.numpy(), np.full((3, 5), 1 / 15, np.float32))
    with raises(kiln.DTypeError, match="mean: expected a floating dtype to compute in, got int64"):
        mint.mean(kiln.tensor(x), dtype=kiln.int64)


def test_python_numbers_are_accepted():
    assert mint.sum(3).item() == 3
    assert mint.mean(2).dtype == kiln.float32
    assert mint.amax(2.5).item() == 2.5


def test_tensor_methods_match_mint(rng):
    t, _ = make_input((3, 4, 5), kiln.float32, rng)
    for name, args, kwargs in [("sum", (1,), {"keepdim": True}), ("mean", ((0, 2),), {}),
                               ("prod", (), {}), ("amax", (-1,), {}), ("amin", ([0, 1],), {}),
                               ("argmax", (), {}), ("argmin", (2,), {"keepdim": True}),
                               ("var", (1,), {"correction": 0}), ("std", (), {}),
                               ("logsumexp", (1,), {}), ("cumsum", (1,), {}),
                               ("softmax", (0,), {}), ("log_softmax", (), {})]:
        method = getattr(t, name)(*args, **kwargs)
        function = getattr(mint, name)(t, *args, **kwargs)
        np.testing.assert_array_equal(method.numpy(), function.numpy(), err_msg=name)
    assert t.max().item() == mint.max(t).item()
    v, i = t.min(1, keepdim=True)
    assert v.shape == i.shape == (3, 1, 5)
    assert t.sum(dtype=kiln.float64).dtype == kiln.float64


@pytest.mark.parametrize("call", [
    lambda t: mint.sum(t, 2), lambda t: mint.mean(t, -3), lambda t: mint.amax(t, (0, 5)),
    lambda t: mint.var(t, 2), lambda t: mint.logsumexp(t, 7), lambda t: mint.max(t, 2),
    lambda t: mint.argmax(t, -3), lambda t: mint.cumsum(t, 2), lambda t: mint.softmax(t, 2),
    lambda t: mint.log_softmax(t, -3), lambda t: t.min(2), lambda t: t.prod(9),
])
def test_dim_out_of_range_raises_index_error(call):
    t = kiln.tensor(np.ones((2, 3), np.float32))
    with raises(kiln.KilnIndexError, match=r"dim out of range: expected a value in "
                                                  r"\[-2, 1\] for a 2-d tensor, got -?\d"):
        call(t)


def test_bad_arguments_raise_typed_errors():
    t = kiln.tensor(np.ones((2, 3), np.float32))
    with raises(kiln.KilnValueError, match="sum: expected each dim at most once, got dim "
                                                  "-1 twice"):
        mint.sum(t, (1, -1))
    with raises(kiln.KilnValueError, match="expected each dim at most once"):
        t.std([0, 0])
    with raises(kiln.KilnValueError, match="amax: cannot reduce over an empty dimension"):
        mint.max(kiln.tensor(np.zeros((0,), np.float32)))
    with raises(kiln.KilnValueError, match="cannot reduce over an empty dimension: "
                                                  "expected dim 1 of shape \\[3, 0\\]"):
        mint.argmin(kiln.tensor(np.zeros((3, 0), np.float32)), 1)
    with raises(kiln.DTypeError, match="sum: expected a dtype that can hold float32 "
                                              "values.*got int32"):
        mint.sum(t, dtype=kiln.int32)
    with raises(kiln.DTypeError, match="cumsum: expected an integer or floating dtype, "
                                              "got bool"):
        mint.cumsum(t, 0, dtype=kiln.bool_)
    with raises(kiln.DTypeError):
        mint.sum(t, dtype="not_a_dtype")
    with raises(kiln.KilnTypeError, match="sum: expected dim to be None, an int or a "
                                                 "list / tuple of ints, got str"):
        mint.sum(t, "0")
    with raises(kiln.KilnTypeError, match="max: expected dim to be an int, got tuple"):
        mint.max(t, (0, 1))
    with raises(kiln.KilnTypeError, match="amin: expected dim to be an int, got float"):
        mint.amin(t, [0, 1.0])
    before = t.numpy().copy()
    with raises(kiln.KilnIndexError):
        mint.sum(t, 4)
    np.testing.assert_array_equal(t.numpy(), before)  # errors leave inputs untouched


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=_ids)
def test_softmax_is_stable_for_large_inputs(dtype):
    t = kiln.tensor([[1000.0, 1001.0, 1002.0], [-1000.0, -1001.0, -1002.0]], dtype=dtype)
    a = t.numpy().astype(np.float64)  # the values after rounding to dtype
    for dim in (1, 0):
        x = t if dim == 1 else t.transpose(0, 1)
        out = mint.softmax(x, dim)
        lout = mint.log_softmax(x, dim)
        if dim == 0:
            out, lout = out.transpose(0, 1), lout.transpose(0, 1)
        assert_close(out, np_softmax(a, 1).astype(numpy_dtype(dtype)))
        assert_close(lout, np_log_softmax(a, 1).astype(numpy_dtype(dtype)))


@pytest.mark.parametrize("dim", [0, 1])
def test_bfloat16_means_past_float_range_are_finite(dim):
    # bfloat16 has float's range: sums past it are kept in float64 along rows and columns alike.
    t = mint.full((4, 40), 3e38, dtype=kiln.bfloat16)
    out = mint.mean(t, dim).to(kiln.float32).numpy()
    np.testing.assert_allclose(out, np.float32(kiln.tensor(3e38, dtype=kiln.bfloat16).item()))


@pytest.mark.parametrize("dtype", [kiln.int8, kiln.uint8, kiln.int16, kiln.int32, kiln.int64,
                                   kiln.bool_], ids=str)
@pytest.mark.parametrize("length", [7, 15, 16, 17, 100, 1025])
def test_integer_extrema_along_rows_of_any_length(dtype, length, rng):
    # Rows long enough for the 16 interleaved lanes and their tails, with the extremes placed in
    # every lane position and at the ends, as well as the dtype's own limits.
    info = np.iinfo(numpy_dtype(dtype)) if dtype != kiln.bool_ else None
    lo, hi = (0, 2) if info is None else (info.min, int(info.max) + 1)
    a = rng.integers(lo, hi, size=(20, length)).astype(numpy_dtype(dtype))
    for r in range(min(20, length)):
        a[r, r % length] = hi - 1
        a[r, (length - 1 - r) % length] = lo
    t = kiln.tensor(a)
    np.testing.assert_array_equal(mint.amax(t, 1).numpy(), a.max(axis=1))
    np.testing.assert_array_equal(mint.amin(t, 1).numpy(), a.min(axis=1))
    np.testing.assert_array_equal(mint.amax(t).numpy(), a.max())


@pytest.mark.parametrize("name", ["all", "any"])
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=_ids)
def test_all_and_any_match_numpy(name, dtype, rng):
    for shape, dim, layout in each_case(SHAPES, DIMS, ("contiguous", "transposed")):
        t, a = make_input(shape, dtype, rng, layout, low=-1.0, high=1.0)
        if dtype.is_floating_point:
            a = t.round_().numpy()  # zeros among the floats too (in place: the layout stays)
        for keepdim in (False, True):
            with context(shape=shape, dim=dim, layout=layout, keepdim=keepdim):
                want = getattr(np, name)(a, axis=np_axis(shape, dim), keepdims=keepdim)
                for got in (getattr(mint, name)(t, dim, keepdim),
                            getattr(t, name)(dim, keepdim=keepdim)):
                    assert got.dtype == kiln.bool_
                    assert_close(got, np.asarray(want).reshape(got.shape))


def test_all_and_any_count_nan_as_nonzero_and_run_under_jit():
    x = kiln.tensor([[0.0, float("nan")], [1.0, 2.0]])
    assert x.any(1).tolist() == [True, True]
    assert x.all(1).tolist() == [False, True]
    f = kiln.jit(lambda t: (t.all(), t.any(0)))
    all_, any_ = f(x)
    assert all_.item() is False and any_.tolist() == [True, True]
    with raises(IndexError):
        x.all(2)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_dtype_converts_the_input_first(name, rng):
    values = rng.standard_normal((3, 5)).astype(np.float16)
    x = kiln.tensor(values)
    for got in (getattr(mint, name)(x, 1, dtype=kiln.float32), getattr(x, name)(1, kiln.float32)):
        assert got.dtype == kiln.float32
        assert_close(got, getattr(mint, name)(x.float(), 1).numpy())
    assert getattr(x, name)(-1).dtype == kiln.float16
    w = kiln.tensor(values.astype(np.float32), requires_grad=True)
    (getattr(w, name)(0, dtype=kiln.float64) * 1.0).sum().backward()
    assert w.grad.dtype == kiln.float32 and w.grad.shape == (3, 5)
    with raises(kiln.DTypeError, match="unknown dtype 'float99'"):
        getattr(x, name)(1, dtype="float99")
