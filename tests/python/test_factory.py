"""kiln.mint factories (zeros ... eye) and random ops (rand, randn, randint, dropout), checked
against NumPy."""

import os
import subprocess
import sys

import numpy as np
import pytest

import kiln
from conftest import ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, assert_close, numpy_dtype, raises

mint = kiln.mint
NUMERIC_DTYPES = INT_DTYPES + FLOAT_DTYPES
SAMPLES = 1 << 20


# ---- zeros / ones / empty / full -------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("fn, np_fn", [(mint.zeros, np.zeros), (mint.ones, np.ones)])
def test_zeros_ones_match_numpy(fn, np_fn, dtype):
    t = fn(2, 3, dtype=dtype)
    assert t.dtype == dtype
    assert_close(t, np_fn((2, 3), dtype=numpy_dtype(dtype)))


@pytest.mark.parametrize("args, shape", [((2, 3), (2, 3)), (((2, 3),), (2, 3)), (([4],), (4,)),
                                         ((), ()), ((0, 5), (0, 5)), ((np.int64(3),), (3,))])
def test_size_accepts_ints_a_sequence_or_nothing(args, shape):
    for fn in (mint.zeros, mint.ones, mint.empty, mint.rand, mint.randn):
        t = fn(*args)
        assert t.shape == shape
        assert t.dtype == kiln.float32


def test_empty_has_shape_and_dtype():
    t = mint.empty((3, 4), dtype=kiln.int16)
    assert t.shape == (3, 4) and t.dtype == kiln.int16
    assert t.numpy().shape == (3, 4)


@pytest.mark.parametrize("value, dtype", [(True, kiln.bool_), (3, kiln.int64), (-2.5, kiln.float32),
                                          (np.float64(1.5), kiln.float32),
                                          (np.int32(7), kiln.int64)])
def test_full_default_dtype_follows_the_value(value, dtype):
    t = mint.full((2, 2), value)
    assert t.dtype == dtype
    assert_close(t, np.full((2, 2), value, dtype=numpy_dtype(dtype)))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_full_with_dtype_matches_numpy(dtype):
    value = True if dtype == kiln.bool_ else 5
    assert_close(mint.full([3], value, dtype=dtype), np.full(3, value, dtype=numpy_dtype(dtype)))
    if dtype.is_floating_point:
        assert_close(mint.full(4, 0.3, dtype=dtype), np.full(4, 0.3, dtype=numpy_dtype(dtype)))


def test_full_accepts_a_one_element_tensor_as_value():
    t = mint.full((2,), kiln.tensor([4.5]))
    assert t.dtype == kiln.float32
    assert_close(t, np.full(2, 4.5, np.float32))


@pytest.mark.parametrize("fn", ["zeros_like", "ones_like"])
@pytest.mark.parametrize("dtype", [None, kiln.int8, kiln.bfloat16, kiln.bool_])
def test_like_keeps_shape_and_dtype_unless_given(fn, dtype):
    x = mint.zeros(2, 5, dtype=kiln.float16).T  # a non-contiguous view
    t = getattr(mint, fn)(x, dtype=dtype)
    want = dtype or kiln.float16
    assert t.shape == (5, 2) and t.dtype == want
    np_fn = np.zeros_like if fn == "zeros_like" else np.ones_like
    assert_close(t, np_fn(np.empty((5, 2)), dtype=numpy_dtype(want)))


def test_like_accepts_numpy_arrays():
    t = mint.ones_like(np.zeros((3, 1), np.int32))
    assert t.shape == (3, 1) and t.dtype == kiln.int32


# ---- arange / linspace / eye -----------------------------------------------------------------


@pytest.mark.parametrize("args", [(5,), (0,), (-3,), (2, 10), (2, 10, 3), (10, 2, -3), (5, 5),
                                  (0, 10, -1), (-7, 8, 4)])
def test_arange_integers_match_numpy_as_int64(args):
    t = mint.arange(*args)
    assert t.dtype == kiln.int64
    assert_close(t, np.arange(*args, dtype=np.int64))


@pytest.mark.parametrize("args", [(5.0,), (0, 1, 0.1), (-1.5, 2.5, 0.5), (1.0, 0.0, -0.3),
                                  (0, 5.5), (2.0, 2.0), (0.5, 3)])
def test_arange_floats_match_numpy_as_float32(args):
    t = mint.arange(*args)
    assert t.dtype == kiln.float32
    assert_close(t, np.arange(*args, dtype=np.float64))


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
def test_arange_with_dtype_matches_numpy(dtype):
    assert_close(mint.arange(0, 12, 3, dtype=dtype), np.arange(0, 12, 3, dtype=numpy_dtype(dtype)))
    if dtype.is_floating_point:
        expected = np.arange(-1, 1, 0.25, dtype=np.float64)
        assert_close(mint.arange(-1, 1, 0.25, dtype=dtype), expected)


def test_arange_keywords():
    assert_close(mint.arange(start=1, end=4), np.arange(1, 4))
    assert_close(mint.arange(1, step=2, end=8), np.arange(1, 8, 2))
    assert_close(mint.arange(4, None), np.arange(4))


@pytest.mark.parametrize("args", [(0, 1, 5), (-2.5, 7.5, 9), (3, -3, 4), (1, 2, 1), (1, 2, 0),
                                  (0.1, 0.7, 7)])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_linspace_matches_numpy(args, dtype):
    t = mint.linspace(*args, dtype=dtype)
    assert t.dtype == dtype
    assert_close(t, np.linspace(*args, dtype=np.float64))


def test_linspace_defaults_to_float32_and_ends_exactly():
    t = mint.linspace(0.1, 0.7, 7)
    assert t.dtype == kiln.float32
    assert t.numpy()[-1] == np.float32(0.7)


@pytest.mark.parametrize("dtype", [kiln.int8, kiln.int32, kiln.int64, kiln.uint8])
def test_linspace_integer_dtypes_round_down_like_numpy(dtype):
    args = (0, 10, 4) if dtype == kiln.uint8 else (-5, 10, 7)
    assert_close(mint.linspace(*args, dtype=dtype), np.linspace(*args, dtype=numpy_dtype(dtype)))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("n, m", [(3, None), (2, 4), (4, 2), (0, None), (1, 0)])
def test_eye_matches_numpy(n, m, dtype):
    t = mint.eye(n, m, dtype=dtype)
    assert t.dtype == dtype
    assert_close(t, np.eye(n, m, dtype=numpy_dtype(dtype)))


def test_eye_defaults_to_float32():
    assert mint.eye(2).dtype == kiln.float32


# ---- factory errors --------------------------------------------------------------------------


@pytest.mark.parametrize("call, op", [
    (lambda: mint.zeros(2, -1), "Zeros"),
    (lambda: mint.ones((-1,)), "Ones"),
    (lambda: mint.empty([-2, 2]), "Empty"),
    (lambda: mint.full((-1,), 1.0), "Full"),
    (lambda: mint.eye(-1), "Eye"),
    (lambda: mint.eye(2, -3), "Eye"),
    (lambda: mint.rand(-1), "RandUniform"),
    (lambda: mint.randn(3, -1), "RandNormal"),
    (lambda: mint.randint(0, 5, (-1,)), "RandInt"),
])
def test_negative_sizes_are_shape_errors(call, op):
    with raises(kiln.ShapeError, match=f"{op}: expected non-negative sizes"):
        call()


@pytest.mark.parametrize("call, match", [
    (lambda: mint.zeros(2.5), r"zeros: expected a size \(an int or a sequence of ints\), got 2.5"),
    (lambda: mint.zeros(2, np.float32(2)), r"zeros: expected integer sizes, got np.float32\(2.0\)"),
    (lambda: mint.ones("ab"), "ones: expected a size"),
    (lambda: mint.empty([2, None]), "empty: expected integer sizes"),
    (lambda: mint.full(object(), 1), "full: expected a size"),
    (lambda: mint.full((2,), "x"), "full: expected a number, got 'x'"),
    (lambda: mint.arange("a"), "arange: expected a number"),
    (lambda: mint.randint(0, 3, 2.0), "randint: expected a size"),
])
def test_bad_sizes_and_values_are_type_errors(call, match):
    with raises(kiln.KilnTypeError, match=match):
        call()


@pytest.mark.parametrize("call, match", [
    (lambda: mint.full((2,), 300, dtype=kiln.int8),
     "Full: expected a fill value representable in int8, got 300"),
    (lambda: mint.full((2,), -1, dtype=kiln.uint8), "representable in uint8"),
    (lambda: mint.full((2,), float("nan"), dtype=kiln.int32), "representable in int32"),
    (lambda: mint.full((2,), 2**70), "full: expected an integer within int64"),
    (lambda: mint.arange(0, 5, 0), "Arange: expected a nonzero step, got 0"),
    (lambda: mint.arange(0.0, 1.0, 0.0), "Arange: expected a nonzero step"),
    (lambda: mint.arange(0, 300, dtype=kiln.int8), "Arange: expected values representable in int8"),
    (lambda: mint.arange(0, float("inf")), "Arange: expected finite start, end and step"),
    (lambda: mint.arange(0, 1e300), "Arange: expected at most"),
    (lambda: mint.linspace(0, 1, -1), r"Linspace: expected steps >= 0, got -1"),
    (lambda: mint.linspace(0, 1000, 5, dtype=kiln.int8),
     "Linspace: expected start and end representable in int8"),
])
def test_bad_values_are_value_errors(call, match):
    with raises(kiln.KilnValueError, match=match):
        call()


def test_bad_dtypes_are_dtype_errors():
    with raises(kiln.DTypeError, match="Arange: expected a numeric dtype, got bool"):
        mint.arange(3, dtype=kiln.bool_)
    with raises(kiln.DTypeError, match="float33"):
        mint.zeros(2, dtype="float33")


# ---- random ops ------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [mint.rand, mint.randn])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_rand_and_randn_have_shape_and_dtype(fn, dtype):
    t = fn(3, 4, dtype=dtype)
    assert t.shape == (3, 4) and t.dtype == dtype


@pytest.mark.parametrize("fn", [lambda: mint.rand(1000), lambda: mint.randn(1000),
                                lambda: mint.randint(0, 1000, (1000,)),
                                lambda: mint.dropout(mint.ones(1000), 0.5)])
def test_same_seed_repeats_and_consecutive_calls_differ(fn):
    kiln.manual_seed(2024)
    a, b = fn().numpy(), fn().numpy()
    kiln.manual_seed(2024)
    c = fn().numpy()
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, b)


def test_manual_seed_accepts_the_whole_64_bit_range():
    kiln.manual_seed(2**64 - 1)
    top = mint.rand(8).numpy()
    kiln.manual_seed(-1)  # wraps to 2**64 - 1, as in PyTorch
    np.testing.assert_array_equal(mint.rand(8).numpy(), top)
    kiln.manual_seed(0)
    assert not np.array_equal(mint.rand(8).numpy(), top)


@pytest.mark.parametrize("seed, error, match", [
    (2**64, kiln.KilnValueError, r"manual_seed: expected a seed in \[-2\*\*63, 2\*\*64\)"),
    (-2**63 - 1, kiln.KilnValueError, "manual_seed: expected a seed"),
    (1.5, kiln.KilnTypeError, "manual_seed: expected an int, got 1.5"),
    (True, kiln.KilnTypeError, "manual_seed: expected an int"),
])
def test_manual_seed_rejects_bad_seeds(seed, error, match):
    with raises(error, match=match):
        kiln.manual_seed(seed)


def test_rand_float32_is_uniform_in_unit_interval():
    kiln.manual_seed(1)
    v = mint.rand(SAMPLES).numpy().astype(np.float64)
    assert v.min() >= 0.0 and v.max() < 1.0
    assert abs(v.mean() - 0.5) < 2e-3
    assert abs(v.var() - 1 / 12) < 2e-3
    counts = np.histogram(v, bins=50, range=(0, 1))[0]
    expected = SAMPLES / 50
    assert ((counts - expected) ** 2 / expected).sum() < 110  # chi-square, 49 dof


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_rand_stays_below_one_for_every_dtype(dtype):
    kiln.manual_seed(3)
    v = mint.rand(SAMPLES, dtype=dtype).numpy().astype(np.float64)
    assert v.min() >= 0.0 and v.max() < 1.0
    assert abs(v.mean() - 0.5) < 3e-3


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_randn_is_standard_normal(dtype):
    kiln.manual_seed(4)
    v = mint.randn(SAMPLES, dtype=dtype).numpy().astype(np.float64)
    assert np.isfinite(v).all()
    assert abs(v.mean()) < 5e-3
    assert abs(v.var() - 1.0) < 1e-2
    assert abs((np.abs(v) < 1).mean() - 0.682689) < 3e-3


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
def test_randint_is_in_range_with_the_given_dtype(dtype):
    kiln.manual_seed(5)
    t = mint.randint(-3, 7, (4000,), dtype=dtype) if dtype != kiln.uint8 else \
        mint.randint(3, 13, (4000,), dtype=dtype)
    assert t.dtype == dtype
    v = t.numpy().astype(np.float64)
    low = -3 if dtype != kiln.uint8 else 3
    assert v.min() == low and v.max() == low + 9
    np.testing.assert_array_equal(v, np.floor(v))


def test_randint_defaults_to_int64_and_is_uniform():
    kiln.manual_seed(6)
    t = mint.randint(0, 10, (SAMPLES,))
    assert t.dtype == kiln.int64 and t.shape == (SAMPLES,)
    counts = np.bincount(t.numpy(), minlength=10)
    expected = SAMPLES / 10
    assert ((counts - expected) ** 2 / expected).sum() < 40  # chi-square, 9 dof
    wide = mint.randint(-2**63, 2**63 - 1, [2, 500]).numpy()
    assert 400 < (wide < 0).sum() < 600


def test_random_errors():
    with raises(kiln.DTypeError, match="RandUniform: expected a floating dtype, got int32"):
        mint.rand(3, dtype=kiln.int32)
    with raises(kiln.DTypeError, match="RandNormal: expected a floating dtype, got bool"):
        mint.randn(3, dtype=kiln.bool_)
    with raises(kiln.KilnValueError,
                       match="RandInt: expected high > low, got low = 5, high = 2"):
        mint.randint(5, 2, (3,))
    with raises(kiln.DTypeError, match="RandInt: expected a numeric dtype, got bool"):
        mint.randint(0, 2, (3,), dtype=kiln.bool_)
    with raises(kiln.KilnValueError, match="RandInt: expected .* within the range of int8"):
        mint.randint(0, 1000, (3,), dtype=kiln.int8)


def test_dropout_is_the_identity_when_not_training_or_p_is_zero():
    x = mint.randn(4, 5)
    assert mint.dropout(x, 0.5, training=False).is_same(x)
    assert mint.dropout(x, p=0.0).is_same(x)


def test_dropout_p_one_gives_zeros():
    np.testing.assert_array_equal(mint.dropout(mint.randn(100), 1.0).numpy(), np.zeros(100))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_dropout_scales_kept_values_and_keeps_the_mean(dtype):
    kiln.manual_seed(7)
    p = 0.25
    x = kiln.tensor(np.random.default_rng(0).uniform(0.5, 1.5, 200_000), dtype=dtype)
    y = mint.dropout(x, p)
    assert y.dtype == dtype
    xv, yv = x.numpy().astype(np.float64), y.numpy().astype(np.float64)
    kept = yv != 0
    assert abs(1 - kept.mean() - p) < 5e-3
    assert_close(kiln.tensor(yv[kept], dtype=dtype), xv[kept] / (1 - p), dtype=dtype)
    assert abs(yv.mean() / xv.mean() - 1) < 1e-2


def test_dropout_accepts_non_contiguous_inputs():
    x = mint.randn(30, 40).T
    kiln.manual_seed(8)
    a = mint.dropout(x, 0.4).numpy()
    kiln.manual_seed(8)
    b = mint.dropout(x.contiguous(), 0.4).numpy()
    np.testing.assert_array_equal(a, b)
    assert a.shape == (40, 30)


def test_dropout_errors():
    with raises(kiln.KilnValueError, match=r"Dropout: expected p in \[0, 1\], got 1.5"):
        mint.dropout(mint.ones(3), 1.5)
    with raises(kiln.KilnValueError, match=r"expected p in \[0, 1\], got -0.5"):
        mint.dropout(mint.ones(3), -0.5, training=False)
    with raises(kiln.DTypeError, match="Dropout: expected a floating input, got int64"):
        mint.dropout(mint.arange(3), 0.5)


_THREAD_SCRIPT = """
import hashlib, kiln
m = kiln.mint
kiln.manual_seed(99)
h = hashlib.sha256()
for dtype in (kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16):
    for t in (m.rand(100003, dtype=dtype), m.randn(100003, dtype=dtype),
              m.dropout(m.ones(100003, dtype=dtype), 0.3)):
        h.update(t.numpy().astype("float64").tobytes())
h.update(m.randint(-5, 1000, (100003,)).numpy().tobytes())
print(h.hexdigest())
"""


def test_results_do_not_depend_on_the_thread_count():
    digests = []
    for threads in ("1", "2"):
        env = dict(os.environ, OMP_NUM_THREADS=threads)
        out = subprocess.run([sys.executable, "-c", _THREAD_SCRIPT], env=env, check=True,
                             capture_output=True, text=True).stdout
        digests.append(out.strip())
    assert digests[0] == digests[1]
    assert len(digests[0]) == 64


_REQUIRES_GRAD_FACTORIES = {
    "tensor": lambda **kw: kiln.tensor([1.0, 2.0], **kw),
    "zeros": lambda **kw: kiln.mint.zeros(2, 3, **kw),
    "ones": lambda **kw: kiln.mint.ones([2], **kw),
    "empty": lambda **kw: kiln.mint.empty(2, **kw),
    "full": lambda **kw: kiln.mint.full([2], 0.5, **kw),
    "zeros_like": lambda **kw: kiln.mint.zeros_like(kiln.mint.ones(2), **kw),
    "ones_like": lambda **kw: kiln.mint.ones_like(kiln.mint.ones(2), **kw),
    "arange": lambda **kw: kiln.mint.arange(0.0, 3.0, **kw),
    "linspace": lambda **kw: kiln.mint.linspace(0, 1, 5, **kw),
    "eye": lambda **kw: kiln.mint.eye(3, **kw),
    "rand": lambda **kw: kiln.mint.rand(4, **kw),
    "randn": lambda **kw: kiln.mint.randn(4, **kw),
}


@pytest.mark.parametrize("name", sorted(_REQUIRES_GRAD_FACTORIES))
def test_factories_take_requires_grad(name):
    make = _REQUIRES_GRAD_FACTORIES[name]
    assert not make().requires_grad
    leaf = make(requires_grad=True)
    assert leaf.requires_grad and leaf.is_leaf and leaf.grad is None
    (leaf * 2.0).sum().backward()
    assert_close(leaf.grad, np.full(leaf.shape, 2.0, np.float32))
    with raises(kiln.DTypeError, match="(only floating-point tensors can require grad|expected a "
                                       "floating dtype), got int64"):
        make(dtype=kiln.int64, requires_grad=True)


def test_requires_grad_is_keyword_only():
    with raises(TypeError):
        kiln.mint.full([2], 0.5, None, True)
    with raises(TypeError):
        kiln.tensor([1.0], None, True)
