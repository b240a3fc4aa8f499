"""float16 and bfloat16 through the fast paths: casts in vectorised runs, elementwise ops computed
in float32 blocks, sums and softmax over widened rows. Runs are long enough to cross the kernels'
blocks (1024 elements) with tails, and come contiguous, strided, broadcast and in place; results
are checked against NumPy computed in float32 and rounded once."""

import numpy as np
import pytest

import kiln
from conftest import assert_close

M = kiln.mint
HALF_DTYPES = [kiln.float16, kiln.bfloat16]


def rounded(values, dtype):
    """float32 values rounded once to dtype, as float32 (bfloat16 by round-to-nearest-even on the
    bits, written out here independently of Kiln)."""
    values = np.asarray(values, dtype=np.float32)
    if dtype == kiln.float16:
        with np.errstate(over="ignore"):  # past 65520: inf, as intended
            return values.astype(np.float16).astype(np.float32)
    bits = values.view(np.uint32).astype(np.uint64)
    up = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    out = up.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(values), np.float32(np.nan), out)


def half_array(rng, shape, dtype, low=-4.0, high=4.0):
    """Random values already representable in dtype, as float32."""
    return rounded(rng.uniform(low, high, size=shape), dtype)


def special_floats(rng):
    """Every kind of float the conversions treat differently: subnormal and normal halves, ties,
    values past the largest half, infinities, NaNs, signed zeros, and random bit patterns."""
    halves = np.arange(0x7C00, dtype=np.uint16).view(np.float16).astype(np.float32)
    ties = (halves[:-1] + halves[1:]) / 2  # exact in float32
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504, 65519.99, 65520, 1e30,
                         3e38, -3e38, 1e-45, 6e-8, 3e-8, 2.9e-8], dtype=np.float32)
    random_bits = rng.integers(0, 2**32, size=50_000, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([halves, -halves, ties, -ties, specials, random_bits.view(np.float32)])


def assert_same_floats(actual, expected):
    """Equal element for element, NaN where expected has NaN, zeros with the same sign."""
    expected = np.asarray(expected)
    actual = np.asarray(actual).astype(expected.dtype)
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
    ok = ~np.isnan(expected)
    np.testing.assert_array_equal(actual[ok], expected[ok])
    np.testing.assert_array_equal(np.signbit(actual[ok]), np.signbit(expected[ok]))


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_float32_casts_round_to_nearest_even(dtype, rng):
    values = special_floats(rng)
    for view in (values, values[1:], values[::3]):  # contiguous, unaligned, strided
        got = kiln.tensor(view).to(dtype).to(kiln.float32).numpy()
        assert_same_floats(got, rounded(view, dtype))


def test_every_float16_value_widens_exactly():
    every = np.arange(2**16, dtype=np.uint16).view(np.float16)
    got = kiln.tensor(every).to(kiln.float32).numpy()
    assert_same_floats(got, every.astype(np.float32))
    assert_same_floats(kiln.tensor(every).to(kiln.float64).numpy(), every.astype(np.float64))


@pytest.mark.parametrize("source, target", [
    (kiln.float16, kiln.bfloat16), (kiln.bfloat16, kiln.float16), (kiln.float16, kiln.float64),
    (kiln.bfloat16, kiln.int32), (kiln.int32, kiln.float16), (kiln.float16, kiln.bool_)])
def test_casts_between_16_bit_floats_and_other_types_go_through_float(source, target, rng):
    values = rng.uniform(-300, 300, size=3001).astype(np.float32)
    if source == kiln.int32:
        values = np.rint(values)
    values[::7] = 0
    x = kiln.tensor(values).to(source)
    as_float = x.to(kiln.float32).numpy()
    expected = kiln.tensor(as_float).to(target).numpy()  # float32 -> target: the direct cast
    if target in HALF_DTYPES:
        expected = rounded(as_float, target)
    np.testing.assert_array_equal(x.to(target).numpy(), expected)


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "maximum"])
def test_binary_ops_round_the_float32_result_once(op, dtype, rng):
    a = half_array(rng, (3, 2500), dtype)
    b = half_array(rng, (3, 2500), dtype, low=0.5, high=4.0)
    ka, kb = kiln.tensor(a).to(dtype), kiln.tensor(b).to(dtype)
    ref = getattr(np, {"div": "divide", "sub": "subtract", "mul": "multiply"}.get(op, op))
    fn = getattr(M, op)
    cases = [
        (fn(ka, kb), ref(a, b)),  # contiguous, crossing blocks with a tail
        (fn(ka[:, ::2], kb[:, 1::2]), ref(a[:, ::2], b[:, 1::2])),  # strided
        (fn(ka, kb[0]), ref(a, b[0])),  # a broadcast row
        (fn(ka, 1.5), ref(a, np.float32(1.5))),  # a scalar operand on either side
        (fn(2.5, kb), ref(np.float32(2.5), b)),
        (fn(kiln.tensor(a.T.copy()).to(dtype).transpose(0, 1), kb), ref(a, b)),  # transposed
    ]
    for got, expected in cases:
        assert got.dtype == dtype
        assert_same_floats(got.to(kiln.float32).numpy(), rounded(expected, dtype))


NUMBERS = [0.1, 1e-4, 3e-6, 1e5, -7.3]  # none of them a float16 or bfloat16 value


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "maximum", "minimum"])
def test_numbers_keep_their_float32_value(op, dtype, rng):
    # h / 1e5 is h / 100000f rounded once, not h / inf (1e5 rounded to float16 first), as PyTorch.
    a = half_array(rng, 3001, dtype, low=0.5, high=4.0)
    ka = kiln.tensor(a).to(dtype)
    ref = getattr(np, {"div": "divide", "sub": "subtract", "mul": "multiply"}.get(op, op))
    fn = getattr(M, op)
    for number in NUMBERS:
        s = np.float32(number)
        with np.errstate(over="ignore"):
            cases = [(fn(ka, number), ref(a, s)), (fn(number, ka), ref(s, a)),
                     (fn(ka[::3], number), ref(a[::3], s)),  # strided: through float blocks
                     (fn(ka[5], number), ref(a[5], s))]  # 0-d with 0-d
        for got, expected in cases:
            assert got.dtype == dtype
            assert_same_floats(got.to(kiln.float32).numpy(), rounded(expected, dtype))


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_in_place_and_gradient_ops_with_numbers_keep_their_float32_value(dtype, rng):
    a = half_array(rng, 2000, dtype, low=0.5, high=4.0)
    x = kiln.tensor(a).to(dtype)
    x /= 1e5
    assert_same_floats(x.to(kiln.float32).numpy(), rounded(a / np.float32(1e5), dtype))
    w = kiln.tensor(a).to(dtype).requires_grad_()
    (w * 0.1).sum().backward()
    assert_same_floats(w.grad.to(kiln.float32).numpy(),
                       rounded(np.full(a.shape, np.float32(0.1)), dtype))


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_other_binary_ops_with_numbers_compute_in_float32(dtype, rng):
    a = half_array(rng, 2000, dtype, low=0.5, high=4.0)
    ka = kiln.tensor(a).to(dtype)
    for got, expected in [(ka ** 0.1, a ** np.float32(0.1)), (0.1 ** ka, np.float32(0.1) ** a),
                          (ka // 0.1, a // np.float32(0.1)), (ka % 0.1, a % np.float32(0.1))]:
        assert_close(got.to(kiln.float32), rounded(expected, dtype), dtype=dtype)
    # float16's 0.1 is 0.0999755859375: the power of the rounded exponent is further off.
    assert_same_floats((kiln.tensor([1e4], dtype=kiln.float16) ** 0.1).to(kiln.float32).numpy(),
                       rounded(np.float32([1e4]) ** np.float32(0.1), kiln.float16))


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_pow_gradients_with_numbers_use_their_float32_value(dtype):
    # As the forward: 1e5 ** x is finite in float16, so is its gradient (1e5 ** x * ln 1e5; with
    # 1e5 rounded to float16 it was inf), and x ** 2e-8 is not x ** 0 (2e-8 is 0 in float16).
    values = rounded([0.5, 0.25], dtype)
    x = kiln.tensor(values).to(dtype).requires_grad_()
    (1e5 ** x).sum().backward()
    expected = np.float32(1e5) ** values * np.log(np.float32(1e5))
    assert_close(x.grad.to(kiln.float32), rounded(expected, dtype), dtype=dtype)
    small = rounded([1e-4, 1e-3], dtype)
    z = kiln.tensor(small).to(dtype).requires_grad_()
    (z ** 2e-8).sum().backward()
    expected = np.float32(2e-8) * small ** np.float32(2e-8 - 1)
    assert_close(z.grad.to(kiln.float32), rounded(expected, dtype), dtype=dtype)


def test_a_product_that_fits_float16_is_not_inf_because_the_number_is_not_a_float16():
    values = rounded([0.5, 1e-3], kiln.float16)
    h = kiln.tensor(values).to(kiln.float16)
    np.testing.assert_array_equal((h * 1e5).to(kiln.float32).numpy(),
                                  rounded(values * np.float32(1e5), kiln.float16))
    assert np.isfinite((h * 1e5).to(kiln.float32).numpy()).all()
    np.testing.assert_array_equal((h / 1e5).to(kiln.float32).numpy(),
                                  rounded(values / np.float32(1e5), kiln.float16))
    assert (h / 1e5).numpy()[0] > 0  # 5e-6, not 0.5 / inf


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_comparisons_with_numbers_compare_the_numbers_16_bit_rounding(dtype):
    # As PyTorch and NumPy: float16(0.1) == 0.1 holds, the number taking the tensor's dtype.
    h = kiln.tensor([0.1, 0.2], dtype=dtype)
    np.testing.assert_array_equal((h == 0.1).numpy(), [True, False])
    np.testing.assert_array_equal((h <= 0.1).numpy(), [True, False])


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_jit_programs_use_the_numbers_float32_value_as_eager_does(dtype, rng):
    a = half_array(rng, 3001, dtype)
    x = kiln.tensor(a).to(dtype)
    wide = x.to(kiln.float32)
    for fn in [lambda h: h * 0.1 + 1e-4, lambda h: (h / 1e5) * 3e4, lambda h: M.exp(h * 0.1)]:
        # A fused 16-bit program rounds once at the end: the float32 computation rounded.
        expected = rounded(fn(wide).numpy(), dtype)
        assert_same_floats(kiln.jit(fn)(x).to(kiln.float32).numpy(), expected)


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_comparisons_of_16_bit_floats_give_bool(dtype, rng):
    a = half_array(rng, 4100, dtype)
    b = a.copy()
    b[::3] = half_array(rng, b[::3].shape, dtype)
    ka, kb = kiln.tensor(a).to(dtype), kiln.tensor(b).to(dtype)
    for got, expected in [(ka < kb, a < b), (ka == kb, a == b),
                          (ka[::2] >= kb[1::2], a[::2] >= b[1::2]), (ka > 0.5, a > 0.5)]:
        assert got.dtype == kiln.bool_
        np.testing.assert_array_equal(got.numpy(), expected)


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
def test_in_place_ops_on_16_bit_floats(dtype, rng):
    a = half_array(rng, 3000, dtype)
    b = half_array(rng, 3000, dtype)
    x = kiln.tensor(a).to(dtype)
    x += kiln.tensor(b).to(dtype)
    assert_same_floats(x.to(kiln.float32).numpy(), rounded(a + b, dtype))
    x *= 2.0
    assert_same_floats(x.to(kiln.float32).numpy(), rounded(rounded(a + b, dtype) * 2, dtype))


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
@pytest.mark.parametrize("op", ["neg", "abs", "relu", "sqrt", "floor", "exp", "sigmoid", "gelu"])
def test_unary_ops_on_16_bit_floats_match_float32(op, dtype, rng):
    x = half_array(rng, 3001, dtype, low=0.0 if op == "sqrt" else -4.0)
    kx = kiln.tensor(x).to(dtype)
    fn = getattr(M, op)
    # Kiln's float32 result rounded once: exactly what a 16-bit run must give.
    expected = rounded(fn(kiln.tensor(x)).numpy(), dtype)
    for got, want in [(fn(kx), expected), (fn(kx[::2]), expected[::2])]:
        assert got.dtype == dtype
        assert_same_floats(got.to(kiln.float32).numpy(), want)
    reference = {"neg": np.negative, "abs": np.abs, "relu": lambda v: np.maximum(v, 0),
                 "sqrt": np.sqrt, "floor": np.floor, "exp": np.exp,
                 "sigmoid": lambda v: 1 / (1 + np.exp(-v.astype(np.float64)))}.get(op)
    if reference is not None:
        assert_close(fn(kx).to(kiln.float32), reference(x), dtype=dtype)


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
@pytest.mark.parametrize("shape, dim", [((70, 3000), 0), ((70, 3000), 1), ((5, 40, 33), 1),
                                        ((4099,), 0)])
def test_sums_of_16_bit_floats(shape, dim, dtype, rng):
    x = half_array(rng, shape, dtype, low=-1.0, high=1.0)
    kx = kiln.tensor(x).to(dtype)
    exact = x.astype(np.float64).sum(axis=dim)
    got = M.sum(kx, dim)
    assert got.dtype == dtype
    # The exact sum rounded once, give or take one rounding of the float32 partial sums.
    np.testing.assert_allclose(got.to(kiln.float32).numpy(), exact, rtol=2e-3 if dtype ==
                               kiln.float16 else 1.6e-2, atol=0.05 * np.sqrt(shape[dim]) * 2**-8)
    assert_close(M.mean(kx, dim).to(kiln.float32), exact / shape[dim], dtype=dtype)


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [0, 1])
def test_softmax_of_16_bit_floats_is_the_float32_result_rounded(fn, dim, dtype, rng):
    x = half_array(rng, (64, 1500), dtype)
    got = getattr(M, fn)(kiln.tensor(x).to(dtype), dim)
    assert got.dtype == dtype
    expected = rounded(getattr(M, fn)(kiln.tensor(x), dim).numpy(), dtype)
    assert_same_floats(got.to(kiln.float32).numpy(), expected)


def test_copies_within_a_16_bit_dtype_keep_every_bit():
    # A strided copy of float16 (or bfloat16) into the same dtype is not a conversion: signalling
    # NaN payloads and every other bit pattern come through as they are.
    bits = np.arange(2**16, dtype=np.uint16).reshape(256, 256)
    x = kiln.tensor(bits.view(np.float16))
    copied = x[:, ::2].contiguous().numpy().view(np.uint16)
    np.testing.assert_array_equal(copied, bits[:, ::2])
    np.testing.assert_array_equal(x.transpose(0, 1).contiguous().numpy().view(np.uint16), bits.T)


def test_float16_neg_and_abs_flip_the_sign_bit_of_every_value_as_numpy():
    # Signalling NaNs included: no conversion, so they stay signalling (NumPy and PyTorch too).
    bits = np.arange(2**16, dtype=np.uint16)
    x = kiln.tensor(bits.view(np.float16))
    np.testing.assert_array_equal(M.neg(x).numpy().view(np.uint16), bits ^ 0x8000)
    np.testing.assert_array_equal(M.abs(x).numpy().view(np.uint16), bits & 0x7FFF)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal((-x).numpy().view(np.uint16),
                                      np.negative(bits.view(np.float16)).view(np.uint16))


def test_neg_and_abs_of_strided_float16_flip_the_sign_bit_as_contiguous_runs_do():
    # The strided loop gives the contiguous kernel's bits, signalling NaNs included (bfloat16
    # takes the same loop; its contiguous kernel is checked on every value in the C++ tests).
    bits = np.arange(2**16, dtype=np.uint16).reshape(256, 256)
    x = kiln.tensor(bits.view(np.float16))
    for strided, want in ((x[:, ::2], bits[:, ::2]), (x.transpose(0, 1), bits.T)):
        np.testing.assert_array_equal(M.neg(strided).numpy().view(np.uint16), want ^ 0x8000)
        np.testing.assert_array_equal(M.abs(strided).numpy().view(np.uint16), want & 0x7FFF)


def test_bfloat16_sums_keep_float32s_range():
    # Summed in float64 element by element: 64 values near bfloat16's (float32's) largest do not
    # overflow a partial sum on the way to their mean.
    big = kiln.tensor(np.full((64, 4), 1e38, np.float32)).to(kiln.bfloat16)
    expected = big.to(kiln.float64).numpy()[0, 0]
    for dim in (0, 1):
        got = M.mean(big if dim == 0 else big.transpose(0, 1), dim).to(kiln.float64).numpy()
        np.testing.assert_allclose(got, expected, rtol=8e-3)


def test_float64_to_float16_rounds_once_like_numpy():
    # Values a hair past (and before) the midpoints of neighbouring float16 values, where going
    # through float32 would round onto the midpoint and then to even (Note [Rounding to odd]).
    rng = np.random.default_rng(9)
    halves = np.sort(rng.choice(np.arange(0x0001, 0x7BFF, dtype=np.uint16), 3000)).view(np.float16)
    lo = halves.astype(np.float64)
    hi = np.nextafter(halves, np.float16(np.inf)).astype(np.float64)
    mid = (lo + hi) / 2
    nudge = mid * 2.0**-35
    values = np.concatenate([mid + nudge, mid - nudge, mid])
    values = np.concatenate([values, -values])
    got = kiln.tensor(values).to(kiln.float16).numpy()
    np.testing.assert_array_equal(got.view(np.uint16), values.astype(np.float16).view(np.uint16))
