"""Elementwise ops (kiln.mint.exp, kiln.mint.add, where, clamp, ...) against NumPy across dtypes,
shapes, broadcasting, strided views, Python scalars and `out=`. Tensor's operators are in
test_operators.py."""

import math

import numpy as np
import pytest

import kiln
from binary_cases import BINARY, binary_inputs, binary_reference, kt, operand_dtype, to_floating
from conftest import ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, assert_close, numpy_dtype, raises, random_array

M = kiln.mint
SHAPES = [(), (0,), (7,), (3, 4), (2, 3, 5)]
BROADCAST_PAIRS = [((3, 1), (1, 4)), ((5,), (2, 5)), ((), (3, 4))]
# A few dtypes for the tests that vary layout rather than dtype.
LAYOUT_DTYPES = [kiln.float32, kiln.float16, kiln.int32]

_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _as(f):
    """A reference that computes in float64 and returns the input's dtype (NumPy lacks erf)."""
    return lambda x: f(x.astype(np.float64)).astype(x.dtype)


# name -> (NumPy reference, dtype rule, input range). Rules: "same" keeps the dtype (bool is the
# identity), "nobool" too but rejects bool, "float" gives to_floating, "bool" gives bool.
UNARY = {
    "neg": (np.negative, "nobool", None),
    "abs": (np.abs, "same", None),
    "sign": (np.sign, "same", None),
    "exp": (np.exp, "float", None),
    "expm1": (np.expm1, "float", None),
    "log": (np.log, "float", (0.1, 3.0)),
    "log1p": (np.log1p, "float", (0.1, 3.0)),
    "log2": (np.log2, "float", (0.1, 3.0)),
    "sqrt": (np.sqrt, "float", (0.1, 3.0)),
    "rsqrt": (lambda x: 1 / np.sqrt(x), "float", (0.1, 3.0)),
    "reciprocal": (np.reciprocal, "float", (0.1, 3.0)),
    "square": (np.square, "same", None),
    "sin": (np.sin, "float", None),
    "cos": (np.cos, "float", None),
    "tan": (np.tan, "float", (-1.2, 1.2)),
    "tanh": (np.tanh, "float", None),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), "float", None),
    "relu": (lambda x: np.maximum(x, x.dtype.type(0)), "same", None),
    "silu": (lambda x: x / (1 + np.exp(-x)), "float", None),
    "erf": (_as(_erf), "float", None),
    "erfc": (_as(_erfc), "float", None),
    "exp2": (np.exp2, "float", None),
    "asin": (np.arcsin, "float", (-0.95, 0.95)),
    "acos": (np.arccos, "float", (-0.95, 0.95)),
    "atan": (np.arctan, "float", None),
    "sinh": (np.sinh, "float", None),
    "cosh": (np.cosh, "float", None),
    "asinh": (np.arcsinh, "float", None),
    "acosh": (np.arccosh, "float", (1.05, 3.0)),
    "atanh": (np.arctanh, "float", (-0.95, 0.95)),
    "floor": (np.floor, "same", None),
    "ceil": (np.ceil, "same", None),
    "round": (np.round, "same", None),
    "logical_not": (np.logical_not, "bool", None),
}

@pytest.fixture(autouse=True)
def _quiet_numpy():
    with np.errstate(all="ignore"):
        yield


def unary_dtype(rule, dtype):
    return {"float": to_floating(dtype), "bool": kiln.bool_}.get(rule, dtype)


def binary_dtype(rule, dtype):
    return kiln.bool_ if rule == "bool" else operand_dtype(rule, dtype)


def unary_valid(rule, dtype):
    return not (rule == "nobool" and dtype == kiln.bool_)


def binary_valid(rule, dtype):
    return not (rule == "nobool" and dtype == kiln.bool_)


def unary_reference(name, a, dtype):
    ref, rule, _ = UNARY[name]
    if dtype == kiln.bool_ and rule == "same":
        return a.copy()
    return ref(a.astype(numpy_dtype(unary_dtype(rule, dtype))))


def unary_input(name, shape, dtype, rng):
    domain = UNARY[name][2] or (-3.0, 3.0)
    return random_array(shape, dtype, rng, *domain)


def for_each_shape(check):
    """Runs check(shape) for every shape in SHAPES, naming the shape on a failure."""
    for shape in SHAPES:
        try:
            check(shape)
        except AssertionError as e:
            e.add_note(f"with shape {shape}")
            raise


# ---- unary ops --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_numpy(name, dtype, rng):
    rule = UNARY[name][1]
    if not unary_valid(rule, dtype):
        pytest.skip("rejected; see test_neg_of_bool_is_a_dtype_error")

    def check(shape):
        a = unary_input(name, shape, dtype, rng)
        result = getattr(M, name)(kt(a, dtype))
        assert result.dtype == unary_dtype(rule, dtype)
        assert result.shape == shape
        assert_close(result, unary_reference(name, a, dtype))

    for_each_shape(check)


@pytest.mark.parametrize("dtype", LAYOUT_DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_reads_strided_views(name, dtype, rng):
    base_np = unary_input(name, (6, 8), dtype, rng)
    base = kt(base_np, dtype)
    for view, view_np in ((base.transpose(0, 1), base_np.T), (base.slice(1, 1, 8, 3),
                                                              base_np[:, 1:8:3])):
        assert not view.is_contiguous()
        assert_close(getattr(M, name)(view), unary_reference(name, view_np, dtype))


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64], ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_values_do_not_depend_on_the_layout(name, dtype, rng):
    # Strided runs took the functors' scalar formulas, contiguous ones the SIMD kernels: last-bit
    # differences, and in some tails far more (below).
    base_np = unary_input(name, (40, 37), dtype, rng)
    contiguous = getattr(M, name)(kt(base_np, dtype)).numpy()
    for view, index in ((kt(base_np.T.copy(), dtype).T, np.s_[:, :]),
                        (kt(base_np, dtype).slice(1, 1, 37, 3), np.s_[:, 1:37:3])):
        np.testing.assert_array_equal(getattr(M, name)(view).numpy(), contiguous[index])


def test_strided_activation_tails_keep_their_precision():
    x = np.array([-5.0, -6.0, -8.0, -9.5], np.float32)
    strided = kiln.tensor(np.stack([x, x], 1))[:, 0]
    assert not strided.is_contiguous()
    # float64 truth of gelu's tanh form; the strided loop gave -0.0 from -6 on.
    u = np.sqrt(2 / np.pi) * (x.astype(np.float64) + 0.044715 * x.astype(np.float64) ** 3)
    truth = x.astype(np.float64) / (1 + np.exp(-2 * u))
    np.testing.assert_allclose(M.gelu(strided, approximate="tanh").numpy(), truth, rtol=1e-5)
    # sigmoid(-100) is float32's subnormal nearest e^-100 (about 3.7e-44), where the strided loop
    # gave 0.
    far = kiln.tensor(np.array([[-100.0, 0.0]], np.float32)).T[:, 0]
    assert M.sigmoid(far).numpy()[0] == np.float32(np.exp(-100.0))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_writes_into_out(name, rng):
    a = unary_input(name, (3, 4), kiln.float32, rng)
    expected = unary_reference(name, a, kiln.float32)
    out = kiln.tensor(np.zeros((3, 4)), dtype=unary_dtype(UNARY[name][1], kiln.float32))
    assert getattr(M, name)(kt(a, kiln.float32), out=out) is out
    assert_close(out, expected)
    # An out of another dtype receives the converted result.
    out64 = kiln.tensor(np.zeros((3, 4)), dtype=kiln.float64)
    getattr(M, name)(kt(a, kiln.float32), out=out64)
    assert_close(out64, expected.astype(np.float64), dtype=kiln.float32)


@pytest.mark.parametrize("name", ["exp", "sqrt", "abs", "neg", "sigmoid", "tanh", "relu", "log",
                                  "floor", "round", "sin", "erfc", "exp2", "asin", "acos", "atan",
                                  "sinh", "cosh", "asinh", "acosh", "atanh"])
def test_unary_method_forms(name, rng):
    a = unary_input(name, (2, 3), kiln.float32, rng)
    assert_close(getattr(kt(a, kiln.float32), name)(), unary_reference(name, a, kiln.float32))


def test_unary_large_contiguous_input_uses_every_chunk(rng):
    a = rng.uniform(-3, 3, size=300_001).astype(np.float32)
    assert_close(M.exp(kt(a, kiln.float32)), np.exp(a))
    assert_close(M.neg(kt(a, kiln.float64)), -a.astype(np.float64))


def test_unary_special_values():
    x = kiln.tensor([np.nan, -0.0, 0.0, np.inf, -np.inf, 2.5, -2.5, 0.5])
    np.testing.assert_array_equal(M.round(x).numpy(), np.round(x.numpy()))
    np.testing.assert_array_equal(M.sign(x).numpy(), np.sign(x.numpy()))
    np.testing.assert_array_equal(M.relu(x).numpy()[[0, 3, 4]], [np.nan, np.inf, 0])
    assert np.isnan(M.sqrt(kiln.tensor([-1.0])).item())


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [kiln.int32], ids=str)
def test_gelu_matches_formula(approximate, dtype, rng):
    a = random_array((4, 5), dtype, rng)
    x = a.astype(np.float64)
    if approximate == "tanh":
        expected = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    else:
        expected = 0.5 * x * (1 + _erf(x / math.sqrt(2)))
    result = M.gelu(kt(a, dtype), approximate)
    assert result.dtype == to_floating(dtype)
    assert_close(result, expected)


# Inputs for the transcendental kernels' edges: a dense grid through the tails, erf's branch point
# 0.9277, the edges of the float32 fast paths (exp: -86.5 and 88; gelu: -12.5) and where results
# overflow or underflow, huge and tiny |x|, signed zeros, infinities and nan.
EDGE_VALUES = np.concatenate([
    np.linspace(-16, 16, 3201),
    np.linspace(-110, 95, 2051),
    [0.9277, -0.9277, 0.92769998, 4.0, -4.0, 12.5, -12.5, -12.50001, -14.85, -14.9, -20.0,
     -86.5, -86.50001, 88.0, 88.00001, 88.72, 88.73, -103.3, -104.0, 1e-30, -1e-30, 1e-8, 3e38,
     -3e38, 0.0, -0.0, np.inf, -np.inf, np.nan],
])

# (rtol, atol): about two roundings of the dtype (float32's kernels are within 4 ulp, Note [unary
# accuracy]); atol only covers results below the dtype's normal range.
EDGE_TOLERANCE = {kiln.float32: (2e-6, 1e-44), kiln.float64: (1e-13, 1e-320),
                  kiln.float16: (1e-3, 6e-8), kiln.bfloat16: (8e-3, 1e-38)}


def _math_ref(f):
    """f applied in float64 (Python's math) element by element."""
    return lambda v: np.array([f(e) for e in v.tolist()], dtype=np.float64)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("name, ref", [
    ("erf", _math_ref(math.erf)),
    ("gelu", _math_ref(lambda e: 0.5 * e * math.erfc(-e / math.sqrt(2)))),
    ("exp", lambda v: np.exp(v)),
    ("erfc", _math_ref(math.erfc)),
    ("exp2", np.exp2),
    ("asin", np.arcsin),
    ("acos", np.arccos),
    ("atan", np.arctan),
    ("sinh", np.sinh),
    ("cosh", np.cosh),
    ("asinh", np.arcsinh),
    ("acosh", np.arccosh),
    ("atanh", np.arctanh),
])
def test_transcendental_is_accurate_at_edges(name, ref, dtype):
    source = EDGE_VALUES.astype(np.float64 if dtype == kiln.float64 else np.float32)
    x = kt(source, dtype)
    v = x.numpy().astype(np.float64)  # the inputs as rounded to dtype
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        # The exact result rounded to dtype (bfloat16, which NumPy lacks, by Kiln's conversion).
        exact = ref(v)
        expected = (kt(exact, dtype).numpy() if dtype == kiln.bfloat16
                    else exact.astype(numpy_dtype(dtype))).astype(np.float64)
    got = getattr(M, name)(x).numpy().astype(np.float64)
    rtol, atol = EDGE_TOLERANCE[dtype]
    if name == "gelu" and dtype == kiln.float64:
        # float64 gelu rounds x / sqrt(2) before std::erfc, whose relative condition number is
        # ~x^2 for negative x: the formula's conditioning, not the kernel's.
        rtol = rtol + 4 * np.finfo(np.float64).eps * np.where(v < 0, v * v, 0)
    bad = ~np.isclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    assert not bad.any(), f"{name} at {v[bad][:5]}: got {got[bad][:5]}, expected {expected[bad][:5]}"
    zeros = expected == 0
    np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(expected[zeros]))


def test_unary_matches_reference_when_output_is_large(rng):
    # 17M float32 (68 MB), more than half of most last-level caches: the kernels stream their
    # output (Note [streaming stores]); the slice [3:] starts it off the vector alignment.
    a = rng.standard_normal((1 << 24) + 61, dtype=np.float32) * 3
    x = kiln.tensor(a)[3:]
    sample = slice(None, None, 4099)
    v = a[3:][sample].astype(np.float64)
    gelu = M.gelu(x).numpy()[sample]
    np.testing.assert_allclose(gelu, 0.5 * v * np.array([math.erfc(-e / math.sqrt(2)) for e in v]),
                               rtol=2e-6, atol=1e-30)
    out = kiln.tensor(np.zeros((1 << 24) + 58, np.float32))
    M.exp(x, out=out)
    np.testing.assert_allclose(out.numpy()[sample], np.exp(v), rtol=2e-6)


def test_erf_gelu_exp_special_values():
    x = kiln.tensor(np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32))
    np.testing.assert_array_equal(M.erf(x).numpy(), [0.0, -0.0, 1.0, -1.0, np.nan])
    assert np.signbit(M.erf(x).numpy()[1])
    # gelu(-inf) = -inf * 0 is nan, as the formula gives; gelu(+inf) = +inf.
    np.testing.assert_array_equal(M.gelu(x).numpy(), [0.0, -0.0, np.inf, np.nan, np.nan])
    assert np.signbit(M.gelu(x).numpy()[1])
    np.testing.assert_array_equal(M.exp(x).numpy(), [1.0, 1.0, np.inf, 0.0, np.nan])


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_clamp_matches_numpy_clip(dtype, rng):
    a = random_array((3, 7), dtype, rng)
    x = kt(a, dtype)
    if dtype == kiln.bool_:
        assert_close(M.clamp(x, min=True), np.ones_like(a))
        return
    lo, hi = (-1, 2) if not dtype.is_floating_point else (-1.5, 2.0)
    if dtype == kiln.uint8:
        lo, hi = 5, 20
    assert_close(M.clamp(x, lo, hi), np.clip(a, lo, hi).astype(a.dtype))
    assert_close(M.clamp(x, min=lo), np.maximum(a, a.dtype.type(lo)))
    assert_close(x.clamp(max=hi), np.minimum(a, a.dtype.type(hi)))
    assert M.clamp(x, lo, hi).dtype == dtype


def test_clamp_bound_promotion_and_nan():
    assert M.clamp(kiln.tensor([1, 5], dtype=kiln.int32), 0.5).dtype == kiln.float32
    assert_close(M.clamp(kiln.tensor([-500, 500], dtype=kiln.int16), -1000, 10),
                 np.array([-500, 10], dtype=np.int16))
    r = M.clamp(kiln.tensor([np.nan, 3.0]), 0.0, 1.0).numpy()
    assert np.isnan(r[0]) and r[1] == 1.0
    x = np.array([-1.0, 0.5, 3.0], np.float32)
    for dtype in (kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16):
        for lo, hi in ((np.nan, 1.0), (0.0, np.nan), (np.nan, None), (None, np.nan)):
            got = M.clamp(kiln.tensor(x).to(dtype), lo, hi).to(kiln.float32).numpy()
            np.testing.assert_array_equal(got, np.clip(x, lo, hi))  # all nan, as NumPy
    out = kiln.tensor(np.zeros(2, dtype=np.float32))
    assert M.clamp(kiln.tensor([-3.0, 3.0]), -1, 1, out=out) is out
    assert_close(out, np.array([-1, 1], dtype=np.float32))


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.int32, kiln.uint8,
                                   kiln.float16], ids=str)
def test_clamp_with_tensor_bounds_matches_numpy_clip(dtype, rng):
    a = random_array((4, 5), dtype, rng)
    lo = random_array((5,), dtype, rng)
    hi = random_array((4, 1), dtype, rng)
    x, klo, khi = kt(a, dtype), kt(lo, dtype), kt(hi, dtype)
    # np.minimum(np.maximum(...)) rather than np.clip: where lo > hi both give hi.
    assert_close(M.clamp(x, klo, khi), np.minimum(np.maximum(a, lo), hi))
    assert_close(x.clamp(min=klo), np.maximum(a, lo))
    assert_close(x.clamp(max=khi), np.minimum(a, hi))
    assert M.clamp(x, klo, khi).shape == (4, 5)
    # A number beside a tensor bound is a weak scalar: it keeps x's dtype.
    assert_close(M.clamp(x, klo, 3), np.minimum(np.maximum(a, lo), a.dtype.type(3)))
    assert M.clamp(x, 1, khi).dtype == dtype


def test_clamp_with_tensor_bounds_broadcasts_promotes_and_propagates_nan():
    x = kiln.tensor([1, 5, 9], dtype=kiln.int32)
    assert M.clamp(x, kiln.tensor([2.5])).dtype == kiln.float32
    assert M.clamp(x, max=kiln.tensor([[0], [6]])).shape == (2, 3)
    got = M.clamp(kiln.tensor([1.0, np.nan, 3.0]), kiln.tensor([0.0, 0.0, np.nan]), 2.0).numpy()
    np.testing.assert_array_equal(got, [1.0, np.nan, np.nan])
    out = M.zeros([3])
    assert M.clamp(kiln.tensor([-3.0, 0.5, 3.0]), kiln.tensor(-1.0), kiln.tensor(1.0),
                   out=out) is out
    np.testing.assert_array_equal(out.numpy(), [-1.0, 0.5, 1.0])
    with raises(kiln.ShapeError, match="do not broadcast"):
        M.clamp(M.zeros([2, 3]), M.zeros([2]))
    with raises(kiln.KilnTypeError, match="expected min to be a number, a kiln.Tensor or "
                                                 "None, got str"):
        M.clamp(x, "1")


def test_clamp_with_a_tensor_and_a_number_bound_takes_the_number_as_the_scalar_form_does():
    # 300 and -1 do not fit uint8: compared exactly, not wrapped to 44 and 255.
    u = kiln.tensor([50, 5], dtype=kiln.uint8)
    np.testing.assert_array_equal(M.clamp(u, kiln.tensor(4, dtype=kiln.uint8), 300).numpy(),
                                  [50, 5])
    v = kiln.tensor([1, 5, 9], dtype=kiln.uint8)
    np.testing.assert_array_equal(M.clamp(v, -1, kiln.tensor(4, dtype=kiln.uint8)).numpy(),
                                  [1, 4, 4])
    h = kiln.tensor([0.5, 3.0]).to(kiln.float16)
    assert M.clamp(h, kiln.tensor([0.0, 0.0]).to(kiln.float16), np.float32(1)).dtype == kiln.float16
    # No gradient at a number bound, as in the scalar form (and PyTorch 2.x); inside, all of it.
    x = kiln.tensor([1.0, 2.0, -3.0, 0.5]).requires_grad_()
    M.clamp(x, kiln.tensor(-1.0), 1.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 0.0, 1.0])
    with raises(kiln.KilnTypeError, match="expected max to be a number, a kiln.Tensor or None"):
        M.clamp(v, kiln.tensor(0), "a")
    with raises(kiln.KilnValueError, match="max 18446744073709551616 does not fit int64, the "
                                           "range of Kiln's integer scalars, so it cannot bound a "
                                           "uint8 tensor"):
        M.clamp(v, kiln.tensor(0), 2**64)
    with raises(kiln.KilnValueError, match="min -18446744073709551616 does not fit int64"):
        M.clamp(v, -2**64)
    # Beside a floating-point tensor such an int is a float, as in the operators.
    f = kiln.tensor([1.0, 3e19, -3e19])
    big = np.float32(2**64)
    np.testing.assert_array_equal(M.clamp(f, -2**64, 2**64).numpy(), [1.0, big, -big])
    np.testing.assert_array_equal(M.clamp(f, kiln.tensor(0.0), 2**64).numpy(), [1.0, big, 0.0])
    np.testing.assert_array_equal(M.clamp(f, 2**65).numpy(), np.float32([2**65] * 3))


def test_clamp_with_tensor_bounds_differentiates_through_the_selected_value():
    x = kiln.tensor([-2.0, 0.5, 3.0]).requires_grad_()
    lo = kiln.tensor([-1.0, -1.0, -1.0]).requires_grad_()
    hi = kiln.tensor(1.0).requires_grad_()
    M.clamp(x, lo, hi).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(lo.grad.numpy(), [1.0, 0.0, 0.0])
    assert hi.grad.item() == 1.0


# ---- binary ops -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_matches_numpy(name, dtype, rng):
    rule = BINARY[name][1]
    if not binary_valid(rule, dtype):
        pytest.skip("rejected; see test_bool_arithmetic_that_numpy_rejects")

    def check(shape):
        a, b = binary_inputs(name, shape, shape, dtype, rng)
        result = getattr(M, name)(kt(a, dtype), kt(b, dtype))
        assert result.dtype == binary_dtype(rule, dtype)
        assert result.shape == shape
        assert_close(result, binary_reference(name, a, b, dtype))

    for_each_shape(check)


@pytest.mark.parametrize("shapes", BROADCAST_PAIRS, ids=str)
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.int32, kiln.bfloat16], ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcasts(name, dtype, shapes, rng):
    for sa, sb in (shapes, shapes[::-1]):
        a, b = binary_inputs(name, sa, sb, dtype, rng)
        result = getattr(M, name)(kt(a, dtype), kt(b, dtype))
        assert result.shape == np.broadcast_shapes(sa, sb)
        assert_close(result, binary_reference(name, a, b, dtype))


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.int32, kiln.int8,
                                   kiln.float16, kiln.bfloat16, kiln.bool_], ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_of_operands_both_expanded_along_rows(name, dtype, rng):
    # expand(col) op expand(col): each row of the output is one value, computed once and stored,
    # the same value the op's vector kernels give on the materialised operands.
    rule = BINARY[name][1]
    if not binary_valid(rule, dtype):
        pytest.skip("rejected; see test_bool_arithmetic_that_numpy_rejects")
    a, b = binary_inputs(name, (5, 1), (5, 1), dtype, rng)
    ka, kb = M.expand(kt(a, dtype), [5, 70]), M.expand(kt(b, dtype), [5, 70])
    result = getattr(M, name)(ka, kb)
    assert result.shape == (5, 70)
    assert_close(result, binary_reference(name, np.broadcast_to(a, (5, 70)),
                                          np.broadcast_to(b, (5, 70)), dtype))
    flat = getattr(M, name)(M.contiguous(ka), M.contiguous(kb))
    np.testing.assert_array_equal(result.numpy(), flat.numpy())


@pytest.mark.parametrize("dtype", LAYOUT_DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_reads_strided_views(name, dtype, rng):
    a, b = binary_inputs(name, (6, 8), (6, 8), dtype, rng)
    ka, kb = kt(a, dtype), kt(b, dtype)
    # transposed with transposed, transposed with contiguous, stepped slices of both
    cases = [(ka.transpose(0, 1), kb.transpose(0, 1), a.T, b.T),
             (ka.transpose(0, 1), kt(np.ascontiguousarray(b.T), dtype), a.T, b.T),
             (ka.slice(1, 0, 8, 2), kb.slice(1, 1, 8, 2), a[:, 0:8:2], b[:, 1:8:2])]
    for x, y, xn, yn in cases:
        assert_close(getattr(M, name)(x, y), binary_reference(name, xn, yn, dtype))


@pytest.mark.parametrize("dtype", LAYOUT_DTYPES, ids=str)
@pytest.mark.parametrize("name", ["add", "mul", "maximum"])
def test_binary_copies_an_operand_running_across_the_output_first(name, dtype, rng):
    # Large enough for the tiled copy (Note [Transposing copies]): a transposed operand against a
    # contiguous one, against a scalar, broadcast over a batch dim, and in place (x += x.T).
    a, b = binary_inputs(name, (130, 120), (120, 130), dtype, rng)
    ka, kb = kt(a, dtype), kt(b, dtype)
    assert_close(getattr(M, name)(ka, kb.transpose(0, 1)), binary_reference(name, a, b.T, dtype))
    assert_close(getattr(M, name)(kb.transpose(0, 1), 1), binary_reference(name, b.T, 1, dtype))
    batch = kt(np.stack([a, a]), dtype)
    assert_close(getattr(M, name)(batch, kb.transpose(0, 1)),
                 binary_reference(name, np.stack([a, a]), b.T, dtype))
    square = kt(a[:120, :120], dtype)
    square += square.transpose(0, 1)
    assert_close(square, binary_reference("add", a[:120, :120], a[:120, :120].T, dtype))


def weak_result(dtype, scalar):
    """NumPy 2's weak-scalar rule as Kiln applies it (float scalar, integer tensor: float32)."""
    if isinstance(scalar, bool):
        return dtype
    if isinstance(scalar, int):
        return kiln.int64 if dtype == kiln.bool_ else dtype
    return dtype if dtype.is_floating_point else kiln.float32


@pytest.mark.parametrize("scalar", [2, 0.5, True], ids=repr)
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float16, kiln.bfloat16, kiln.int8,
                                   kiln.int64, kiln.bool_], ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_with_python_scalars_on_both_sides(name, dtype, scalar, rng):
    rule = BINARY[name][1]
    common = weak_result(dtype, scalar)
    if not binary_valid(rule, common):
        pytest.skip("bool result of an op that rejects bool")
    a, _ = binary_inputs(name, (3, 4), (3, 4), dtype, rng)
    if name in ("floor_divide", "remainder", "pow") and dtype.is_floating_point:
        a = random_array((3, 4), dtype, rng, 0.5, 3.0)  # a is the divisor or base on the left
    if name == "pow" and not common.is_floating_point:
        a = random_array((3, 4), dtype, rng, 0.0, 0.5)  # nonnegative exponents for 2 ** a
    if name in ("floor_divide", "remainder") and not common.is_floating_point:
        a = np.where(a == 0, 1, a).astype(a.dtype)
    x = kt(a, dtype)
    s = np.asarray(scalar)
    for result, expected in ((getattr(M, name)(x, scalar), binary_reference(name, a, s, common)),
                             (getattr(M, name)(scalar, x), binary_reference(name, s, a, common))):
        assert result.dtype == binary_dtype(rule, common)
        assert_close(result, expected)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_writes_into_out(name, rng):
    rule = BINARY[name][1]
    a, b = binary_inputs(name, (3, 4), (1, 4), kiln.float32, rng)
    expected = binary_reference(name, a, b, kiln.float32)
    out = kiln.tensor(np.zeros((3, 4)), dtype=binary_dtype(rule, kiln.float32))
    assert getattr(M, name)(kt(a, kiln.float32), kt(b, kiln.float32), out=out) is out
    assert_close(out, expected)
    # A strided out (a transposed view) receives the result through its strides.
    base = kiln.tensor(np.zeros((4, 3)), dtype=binary_dtype(rule, kiln.float32))
    getattr(M, name)(kt(a, kiln.float32), kt(b, kiln.float32), out=base.transpose(0, 1))
    assert_close(base, expected.T)


def test_add_into_out_aliasing_an_input(rng):
    a = rng.uniform(-3, 3, size=(1000, 70)).astype(np.float32)
    x = kt(a, kiln.float32)
    assert M.add(x, x, out=x) is x
    assert_close(x, a + a)


def test_out_overlapping_an_input_reads_the_input_as_it_was(rng):
    a = rng.uniform(-3, 3, size=(5, 5)).astype(np.float32)
    x = kt(a, kiln.float32)
    x += x.transpose(0, 1)
    assert_close(x, a + a.T)
    v = np.arange(10, dtype=np.float32)
    y = kt(v, kiln.float32)
    M.add(y.slice(0, 0, 9), y.slice(0, 1, 10), out=y.slice(0, 1, 10))
    expected = v.copy()
    expected[1:] = v[:-1] + v[1:]
    assert_close(y, expected)
    z = kt(v, kiln.float32)
    z -= z.select(0, 3)  # a 0-d view of an element that the op overwrites
    assert_close(z, v - 3)


@pytest.mark.parametrize("a_dtype,b_dtype,expected", [
    (kiln.int32, kiln.float32, kiln.float32),  # NumPy gives float64; see docs/architecture.md
    (kiln.int64, kiln.float16, kiln.float16),  # NumPy gives float64
    (kiln.bfloat16, kiln.float16, kiln.float32),  # NumPy has no bfloat16
    (kiln.int8, kiln.uint8, kiln.int16),
    (kiln.bool_, kiln.int8, kiln.int8),
    (kiln.float16, kiln.float32, kiln.float32),
    (kiln.int16, kiln.int64, kiln.int64),
], ids=str)
def test_tensor_promotion(a_dtype, b_dtype, expected, rng):
    a = random_array((2, 3), a_dtype, rng)
    b = random_array((2, 3), b_dtype, rng)
    result = M.add(kt(a, a_dtype), kt(b, b_dtype))
    assert result.dtype == expected == kiln.promote_types(a_dtype, b_dtype)
    np_dtype = numpy_dtype(expected)
    assert_close(result, a.astype(np_dtype) + b.astype(np_dtype))
    assert M.lt(kt(a, a_dtype), kt(b, b_dtype)).dtype == kiln.bool_
    assert M.div(kt(a, a_dtype), kt(b, b_dtype)).dtype == to_floating(expected)


def test_weak_scalar_promotion():
    i8 = kiln.tensor([1, 2], dtype=kiln.int8)
    assert (i8 + 1).dtype == kiln.int8
    assert (i8 * 2.5).dtype == kiln.float32
    assert (kiln.tensor([1.0], dtype=kiln.float16) + 1.0).dtype == kiln.float16
    assert (kiln.tensor([True]) + 1).dtype == kiln.int64
    assert (kiln.tensor([True]) + True).dtype == kiln.bool_
    assert (kiln.tensor([1, 2], dtype=kiln.int32) / 2).dtype == kiln.float32
    assert M.add(1, 2).dtype == kiln.int64
    assert M.add(1, 2.0).dtype == kiln.float32
    # A Python integer outside the tensor's range compares by value.
    assert_close(i8 == 257, np.array([False, False]))
    assert_close(i8 < 1000, np.array([True, True]))


def test_integer_arithmetic_wraps_like_numpy():
    a = np.array([127, -128, 100], dtype=np.int8)
    assert_close(M.add(kt(a, kiln.int8), 1), a + np.int8(1))
    assert_close(M.mul(kt(a, kiln.int8), kt(a, kiln.int8)), a * a)
    big = np.array([np.iinfo(np.int64).min, 7], dtype=np.int64)
    assert_close(M.floor_divide(kt(big, kiln.int64), -1), np.array([big[0], -7]))
    assert_close(M.remainder(kt(big, kiln.int64), -1), np.array([0, 0]))
    assert_close(M.abs(kt(big, kiln.int64)), np.abs(big))


def test_float_floor_divide_and_remainder_special_values():
    a = np.array([1.0, -1.0, 0.0, np.inf, 5.0, -5.0], dtype=np.float64)
    b = np.array([0.0, 0.0, 0.0, 2.0, np.inf, np.inf], dtype=np.float64)
    assert_close(M.floor_divide(kt(a, kiln.float64), kt(b, kiln.float64)), np.floor_divide(a, b))
    assert_close(M.remainder(kt(a, kiln.float64), kt(b, kiln.float64)), np.remainder(a, b))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_floor_divide_and_remainder_equal_numpy_bit_for_bit(dtype):
    # Quotients from tiny to past the vector kernel's exact range, and dividends within an ulp of
    # a multiple of the divisor, where a rounded quotient can land on the next integer.
    rng = np.random.default_rng(3)
    n = 4000
    sign = rng.choice([-1, 1], n)
    b = (rng.uniform(1, 2, n) * 2.0 ** rng.integers(-20, 20, n) * sign).astype(dtype)
    # Quotients below 2^20 in the first half (the vector fmod's exact range for either dtype),
    # up to 2^60 in the second (its std::fmod fallback).
    k = np.floor(2.0 ** rng.uniform(0, np.where(np.arange(n) < n // 2, 20, 60)))
    k *= rng.choice([-1, 1], n)
    near = (k * b.astype(np.float64)).astype(dtype)
    a = np.concatenate([near, np.nextafter(near, dtype(0)), rng.standard_normal(n).astype(dtype)])
    b = np.concatenate([b, b, b])
    with np.errstate(all="ignore"):
        want_q, want_r = np.floor_divide(a, b), np.remainder(a, b)
    got_q = M.floor_divide(kiln.tensor(a), kiln.tensor(b)).numpy()
    got_r = M.remainder(kiln.tensor(a), kiln.tensor(b)).numpy()
    np.testing.assert_array_equal(got_q, want_q)
    np.testing.assert_array_equal(got_r, want_r)
    np.testing.assert_array_equal(np.signbit(got_q), np.signbit(want_q))
    np.testing.assert_array_equal(np.signbit(got_r), np.signbit(want_r))


def test_maximum_minimum_propagate_nan():
    a = kiln.tensor([np.nan, 1.0, 2.0])
    b = kiln.tensor([0.0, np.nan, 1.0])
    assert_close(M.maximum(a, b), np.array([np.nan, np.nan, 2.0], dtype=np.float32))
    assert_close(M.minimum(a, b), np.array([np.nan, np.nan, 1.0], dtype=np.float32))


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_maximum_minimum_refuse_a_python_int_that_an_integer_tensor_cannot_hold(jit):
    # maximum(int8 x, -129) compared with -129 wrapped to 127: all 127.
    x = kiln.tensor(np.array([-100, 0, 100], np.int8))
    run = (lambda f: kiln.jit(f)(x)) if jit else (lambda f: f(x))
    with raises(kiln.KilnValueError, match="Maximum: the Python int -129 does not fit in int8"):
        run(lambda v: M.maximum(v, -129))
    with raises(kiln.KilnValueError, match="Minimum: the Python int 300 does not fit in int8"):
        run(lambda v: M.minimum(300, v))
    assert run(lambda v: M.maximum(v, 127)).tolist() == [127, 127, 127]
    assert run(lambda v: M.minimum(v, -128)).tolist() == [-128, -128, -128]
    assert run(lambda v: M.maximum(v, 2.5)).tolist() == [2.5, 2.5, 100.0]  # a float promotes
    assert M.maximum(kiln.tensor([True, False]), 300).tolist() == [300, 300]  # int64


# ---- where --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_where_matches_numpy(dtype, rng):
    cond = rng.random((3, 4)) > 0.5
    a = random_array((3, 4), dtype, rng)
    b = random_array((1, 4), dtype, rng)
    result = M.where(kiln.tensor(cond), kt(a, dtype), kt(b, dtype))
    assert result.dtype == dtype
    assert_close(result, np.where(cond, a, b))


@pytest.mark.parametrize("dtype", [kiln.bool_, kiln.int8, kiln.float16, kiln.float32, kiln.int64],
                         ids=str)
@pytest.mark.parametrize("a_kind", ["tensor", "scalar"])
@pytest.mark.parametrize("b_kind", ["tensor", "scalar"])
def test_where_contiguous_and_scalar_operands_of_a_large_result(dtype, a_kind, b_kind, rng):
    # Every element size, with either operand a broadcast 0-d tensor, over enough elements for
    # several parallel chunks; the condition broadcasts a [64, 64] block over leading dims.
    cond = rng.random((64, 64)) > 0.5
    shape = (3, 5, 64, 64)

    def operand(kind):
        return random_array(shape if kind == "tensor" else (), dtype, rng)

    a, b = operand(a_kind), operand(b_kind)
    result = M.where(kiln.tensor(cond), kt(a, dtype), kt(b, dtype))
    expected = np.where(cond, a, b)
    assert result.dtype == dtype and result.shape == expected.shape
    np.testing.assert_array_equal(result.numpy(), expected)


def test_where_broadcasts_converts_and_promotes(rng):
    cond = rng.uniform(-1, 1, size=(2, 1, 3)).astype(np.float32)
    cond[0, 0, 0] = 0.0
    a = rng.integers(-5, 5, size=(4, 1)).astype(np.int32)
    result = M.where(kiln.tensor(cond), kiln.tensor(a), 0.5)
    assert result.dtype == kiln.float32
    assert_close(result, np.where(cond != 0, a.astype(np.float32), np.float32(0.5)))
    t = kiln.tensor(rng.random((4, 6)).astype(np.float32))
    view = t.transpose(0, 1)
    assert_close(M.where(view > 0.5, view, 0.0), np.where(t.numpy().T > 0.5, t.numpy().T, 0))
    out = kiln.tensor(np.zeros((6, 4), dtype=np.float32))
    assert M.where(view > 0.5, view, -1.0, out=out) is out
    assert_close(out, np.where(t.numpy().T > 0.5, t.numpy().T, -1))
    assert M.where(True, 1, 2.0).dtype == kiln.float32


# ---- errors ---------------------------------------------------------------------------------


def test_shapes_that_do_not_broadcast_name_both_shapes():
    with raises(kiln.ShapeError, match=r"\[3\] and \[4\]"):
        M.add(kiln.tensor([1.0, 2, 3]), kiln.tensor([1.0, 2, 3, 4]))
    with raises(kiln.ShapeError, match=r"\[2, 3\] and \[3, 2\]"):
        kiln.tensor(np.ones((2, 3))) * kiln.tensor(np.ones((3, 2)))
    with raises(kiln.ShapeError, match="do not broadcast"):
        M.where(kiln.tensor([True, False]), kiln.tensor([1.0, 2, 3]), 0.0)


def test_out_of_the_wrong_shape_or_kind_is_rejected():
    x = kiln.tensor([1.0, 2.0])
    out = kiln.tensor([0.0, 0.0, 0.0])
    with raises(kiln.ShapeError, match=r"out tensor 0 has shape \[3\], expected \[2\]"):
        M.add(x, x, out=out)
    with raises(kiln.ShapeError, match="out tensor"):
        M.exp(x, out=out)
    with raises(kiln.KilnTypeError, match="out: expected a kiln.Tensor"):
        M.add(x, x, out=[0.0, 0.0])
    np.testing.assert_array_equal(out.numpy(), [0, 0, 0])


def test_neg_of_bool_is_a_dtype_error():
    with raises(kiln.DTypeError, match="Neg: expected a numeric tensor, got bool"):
        M.neg(kiln.tensor([True]))


@pytest.mark.parametrize("name", ["sub", "floor_divide", "remainder", "pow"])
def test_bool_arithmetic_that_numpy_rejects(name):
    flags = kiln.tensor([True, False])
    with raises(kiln.DTypeError, match="expected numeric operands, got bool and bool"):
        getattr(M, name)(flags, flags)
    assert_close(M.add(flags, flags), np.array([True, False]))
    # A bool beside a number promotes, as in NumPy (PyTorch refuses it for sub): 1 - mask.
    mixed = getattr(M, name)(flags, kiln.tensor([1, 2], dtype=kiln.int8))
    expected = getattr(np, {"sub": "subtract"}.get(name, name if name != "pow" else "power"))(
        np.array([True, False]), np.array([1, 2], np.int8))
    assert mixed.dtype == kiln.int8
    assert_close(mixed, expected)
    assert (1 - flags).tolist() == [0, 1] and (1 - flags).dtype == kiln.int64


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
def test_integer_division_by_zero_raises(dtype):
    a = kiln.tensor([5, 6, 7], dtype=dtype)
    zero_somewhere = kiln.tensor([1, 0, 1], dtype=dtype)
    out = kiln.tensor([9, 9, 9], dtype=dtype)
    with raises(kiln.KilnValueError, match="division by zero"):
        M.floor_divide(a, zero_somewhere, out=out)
    with raises(kiln.KilnValueError, match="division by zero"):
        M.remainder(a, 0)
    with raises(ValueError, match="division by zero"):
        a // zero_somewhere
    with raises(ValueError, match="division by zero"):
        a %= 0
    np.testing.assert_array_equal(out.numpy(), [9, 9, 9])
    np.testing.assert_array_equal(a.numpy(), [5, 6, 7])
    assert np.isinf(M.floor_divide(kiln.tensor([1.0]), 0).item())


def test_negative_integer_power_raises():
    a = kiln.tensor([2, 3], dtype=kiln.int32)
    with raises(kiln.KilnValueError, match="negative integer powers are not allowed"):
        M.pow(a, kiln.tensor([1, -1], dtype=kiln.int32))
    with raises(kiln.KilnValueError, match="negative integer powers"):
        a ** -2
    assert_close(a ** -1.0, np.array([0.5, 1 / 3], dtype=np.float32))


@pytest.mark.parametrize("dtype", [kiln.uint8, kiln.int8, kiln.int16, kiln.int32])
def test_python_int_exponents_are_checked_before_taking_the_bases_dtype(dtype):
    # Converted to uint8, -1 would be 255 and 257 would be 1: refused, as in PyTorch and NumPy.
    a = kiln.tensor([2, 3], dtype=dtype)
    with raises(kiln.KilnValueError, match=r"negative integer powers are not allowed \(got "
                                           r"exponent -1\)"):
        a ** -1
    with raises(kiln.KilnValueError, match="negative integer powers"):
        a.__ipow__(-3)
    np.testing.assert_array_equal(a.numpy(), [2, 3])  # the refused in-place call wrote nothing
    too_big = {kiln.uint8: 256, kiln.int8: 128, kiln.int16: 2**15, kiln.int32: 2**31}[dtype]
    with raises(kiln.KilnValueError, match=f"the exponent {too_big} does not fit {dtype.name}"):
        a ** too_big
    np.testing.assert_array_equal((a ** (too_big - 1)).numpy(),
                                  np.array([2, 3], dtype.name) ** np.array(too_big - 1, dtype.name))
    assert (a ** 0).numpy().tolist() == [1, 1]


def test_inplace_result_that_cannot_be_cast_raises():
    i = kiln.tensor([1, 2], dtype=kiln.int32)
    with raises(kiln.DTypeError,
                       match="result type float32 can't be cast to the desired output type int32"):
        i += 1.5
    with raises(kiln.DTypeError, match="can't be cast"):
        i /= 2
    with raises(kiln.DTypeError, match="can't be cast"):
        i *= kiln.tensor([1.0, 2.0])
    flags = kiln.tensor([True, False])
    with raises(kiln.DTypeError, match="result type int64 can't be cast"):
        flags += 1
    np.testing.assert_array_equal(i.numpy(), [1, 2])
    with raises(kiln.ShapeError, match=r"the result has shape \[2, 2\] .* of shape \[2\]"):
        i += kiln.tensor([[1], [2]], dtype=kiln.int32)


def test_attribute_errors():
    x = kiln.tensor([1.0])
    with raises(kiln.KilnValueError, match="'none' or 'tanh', got 'erf'"):
        M.gelu(x, "erf")
    with raises(kiln.KilnValueError, match="at least one of min and max"):
        M.clamp(x)
    with raises(kiln.KilnTypeError, match="min to be a number"):
        M.clamp(x, "low")


@pytest.mark.parametrize("run", [1, 5, 32, 33])
def test_operands_read_in_short_runs(run, rng):
    # Slices and head permutes whose contiguous runs are short: the loop copies them first (Note
    # [Copies of short runs]); the values are the same either way, in place or not.
    a = rng.standard_normal((300, 2 * run)).astype(np.float32)
    b = rng.standard_normal((8, 300, 2, run)).astype(np.float32)
    ka, kb = kiln.tensor(a), kiln.tensor(b)
    assert_close(M.mul(ka[:, :run], 3.0), a[:, :run] * 3.0)
    assert_close(M.exp(ka[:, run:]), np.exp(a[:, run:]))
    heads = kb.permute(1, 0, 2, 3)  # [300, 8, 2, run]
    assert_close(M.add(heads, heads.contiguous()), 2 * b.transpose(1, 0, 2, 3))
    assert_close(M.sub(ka[:, :run], heads[:, 0, 0]), a[:, :run] - b[0, :, 0])
    out = kiln.tensor(a.copy())
    M.add(out[:, :run], out[:, run:], out=out[:, :run])
    want = a.copy()
    want[:, :run] += a[:, run:]
    assert_close(out, want)


def test_out_follows_pytorchs_cast_rule():
    # A floating result never goes into an integer or bool out, only bool into bool (PyTorch:
    # "result type Float can't be cast to the desired output type Long"); the out is unchanged.
    floats = kiln.tensor(np.array([0.5, 1.5, 2.5], np.float32))
    ints = kiln.tensor(np.array([1, -1, 2]))
    cases = [(lambda o: M.add(floats, floats, out=o), kiln.int64, "float32", "int64"),
             (lambda o: M.div(ints, 2, out=o), kiln.int64, "float32", "int64"),
             (lambda o: M.exp(floats, out=o), kiln.int32, "float32", "int32"),
             (lambda o: M.add(ints, 1, out=o), kiln.bool_, "int64", "bool")]
    for call, out_dtype, result, target in cases:
        out = M.zeros(3, dtype=out_dtype)
        with raises(kiln.DTypeError, match=f"result type {result} can't be cast to the dtype of "
                    f"out tensor 0, {target}"):
            call(out)
        np.testing.assert_array_equal(out.numpy(), np.zeros(3))
    into_float = M.zeros(3, dtype=kiln.float64)
    assert M.add(ints, 1, out=into_float) is into_float
    np.testing.assert_array_equal(into_float.numpy(), [2.0, 0.0, 3.0])
    into_bool = M.zeros(3, dtype=kiln.bool_)
    np.testing.assert_array_equal(M.gt(ints, 0, out=into_bool).numpy(), [True, False, True])


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_odd_functions_keep_the_sign_of_zero(dtype):
    # IEEE, NumPy and PyTorch: sin(-0) = tan(-0) = expm1(-0) = tanh(-0) = -0; runs of 1 and of 1000
    # take the scalar and the vector paths.
    for n in (1, 1000):
        x = np.zeros(n, np.float32)
        x[::2] = -0.0
        for name in ("sin", "tan", "expm1", "tanh"):
            got = getattr(M, name)(kiln.tensor(x).to(dtype)).to(kiln.float32).numpy()
            np.testing.assert_array_equal(np.signbit(got), np.signbit(x), err_msg=name)
