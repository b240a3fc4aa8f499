"""The inverse trigonometric and hyperbolic ops, erfc and exp2 (kiln.mint.asin, ...), their
PyTorch aliases (arcsin, ...), and the binary atan2 and fmod: values against NumPy across dtypes,
shapes and broadcasting, domain edges and special values, integer promotion, the method and
in-place forms, gradients and kiln.jit. The unary ops' table checks (every dtype and shape, views,
out=, kiln.jit chains) are their rows in test_elementwise.py's UNARY, and their gradcheck rows in
test_grad_ops.py."""

import math

import numpy as np
import pytest

import kiln
from binary_cases import kt, to_floating
from conftest import (ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, assert_close, numpy_dtype,
                      random_array, raises)

M = kiln.mint

NEW_UNARY = ["erfc", "exp2", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"]
ALIASES = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsinh": "asinh",
           "arccosh": "acosh", "arctanh": "atanh"}
# Inputs inside each op's domain (the in-place and integer tests).
DOMAIN = {"asin": (-0.9, 0.9), "acos": (-0.9, 0.9), "atanh": (-0.9, 0.9), "acosh": (1.1, 3.0)}
# name -> NumPy reference (erfc through Python's math, in float64).
_erfc = np.vectorize(math.erfc, otypes=[np.float64])
NUMPY_UNARY = {"erfc": _erfc, "exp2": np.exp2, "asin": np.arcsin, "acos": np.arccos,
               "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh,
               "acosh": np.arccosh, "atanh": np.arctanh}
# name -> d op(x) / dx, in float64.
DERIVATIVES = {
    "erfc": lambda x: -2 / np.sqrt(np.pi) * np.exp(-x * x),
    "exp2": lambda x: np.exp2(x) * np.log(2),
    "asin": lambda x: 1 / np.sqrt(1 - x * x),
    "acos": lambda x: -1 / np.sqrt(1 - x * x),
    "atan": lambda x: 1 / (1 + x * x),
    "sinh": np.cosh,
    "cosh": np.sinh,
    "asinh": lambda x: 1 / np.sqrt(x * x + 1),
    "acosh": lambda x: 1 / np.sqrt(x * x - 1),
    "atanh": lambda x: 1 / (1 - x * x),
}


@pytest.fixture(autouse=True)
def _quiet_numpy():
    with np.errstate(all="ignore"):
        yield


def inputs(name, shape, dtype, rng):
    return random_array(shape, dtype, rng, *DOMAIN.get(name, (-3.0, 3.0)))


# ---- unary ops ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_domain_edges_and_special_values(dtype):
    nan, inf, half_pi = np.nan, np.inf, math.pi / 2
    cases = {
        "asin": ([2.0, -1.5, 1.0, -1.0, 0.5, nan], [nan, nan, half_pi, -half_pi, math.pi / 6, nan]),
        "acos": ([2.0, -1.5, 1.0, -1.0, 0.5], [nan, nan, 0.0, math.pi, math.pi / 3]),
        "acosh": ([0.5, -1.0, 1.0, inf, -inf], [nan, nan, 0.0, inf, nan]),
        "atanh": ([1.0, -1.0, 2.0, -2.0, 0.5], [inf, -inf, nan, nan, math.atanh(0.5)]),
        "erfc": ([-inf, inf, 0.0, nan, 30.0], [2.0, 0.0, 1.0, nan, 0.0]),
        "exp2": ([-inf, inf, 0.0, 10.0, -1.0, 2000.0], [0.0, inf, 1.0, 1024.0, 0.5, inf]),
        "sinh": ([-inf, inf, 0.0, 1000.0], [-inf, inf, 0.0, inf]),
        "cosh": ([-inf, inf, 0.0, -1000.0], [inf, inf, 1.0, inf]),
        "asinh": ([-inf, inf, 0.0], [-inf, inf, 0.0]),
        "atan": ([inf, -inf, 1.0], [half_pi, -half_pi, math.pi / 4]),
    }
    for name, (xs, want) in cases.items():
        got = getattr(M, name)(kiln.tensor(np.array(xs), dtype=dtype))
        assert got.dtype == dtype
        try:
            assert_close(got, np.array(want))
        except AssertionError as e:
            e.add_note(f"{name} of {xs}")
            raise
    for name in ("asin", "atan", "sinh", "asinh", "atanh"):  # odd functions keep -0
        assert np.signbit(getattr(M, name)(kiln.tensor([-0.0], dtype=dtype)).numpy()[0]), name


@pytest.mark.parametrize("dtype", INT_DTYPES + [kiln.bool_], ids=str)
@pytest.mark.parametrize("name", NEW_UNARY)
def test_integer_and_bool_inputs_promote_to_float32(name, dtype, rng):
    # As torch.sin(int_tensor): the result is the default float dtype, computed from the values.
    if dtype == kiln.bool_:
        a = np.array([True, False, True])
    elif name == "acosh":
        a = np.array([1, 2, 3], dtype.name)
    elif name in DOMAIN:
        a = np.array([0, 1, 0], dtype.name) if dtype == kiln.uint8 else np.array([-1, 0, 1],
                                                                                  dtype.name)
    else:
        a = random_array((4, 5), dtype, rng, -0.3, 0.3)  # integers in -3..3
    result = getattr(M, name)(kt(a, dtype))
    assert result.dtype == kiln.float32
    assert_close(result, NUMPY_UNARY[name](a.astype(np.float32)).astype(np.float32))


@pytest.mark.parametrize("alias, name", sorted(ALIASES.items()))
def test_aliases_are_the_same_op(alias, name, rng):
    a = inputs(name, (3, 4), kiln.float32, rng)
    x = kt(a, kiln.float32)
    want = getattr(M, name)(x).numpy()
    np.testing.assert_array_equal(getattr(M, alias)(x).numpy(), want)
    np.testing.assert_array_equal(getattr(x, alias)().numpy(), want)
    out = kiln.tensor(np.zeros((3, 4), np.float32))
    assert getattr(M, alias)(x, out=out) is out
    np.testing.assert_array_equal(out.numpy(), want)
    assert getattr(x, alias + "_")() is x
    np.testing.assert_array_equal(x.numpy(), want)
    assert kiln.ops.op_doc(name.capitalize()) in getattr(M, alias).__doc__


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("name", NEW_UNARY)
def test_in_place_writes_self_and_returns_it(name, dtype, rng):
    x = kt(inputs(name, (3, 5), dtype, rng), dtype)
    want = getattr(M, name)(x).numpy()
    storage = x.data_ptr()
    assert getattr(x, name + "_")() is x
    assert x.dtype == dtype and x.data_ptr() == storage
    np.testing.assert_array_equal(x.numpy(), want)


def test_in_place_on_a_view_writes_the_base(rng):
    a = rng.uniform(-0.9, 0.9, (4, 6))
    base = kiln.tensor(a)
    base[:, 1::2].asin_()
    expected = a.copy()
    expected[:, 1::2] = np.arcsin(expected[:, 1::2])
    assert_close(base, expected)


@pytest.mark.parametrize("name", NEW_UNARY + ["arctan"])
def test_in_place_refuses_an_integer_tensor(name):
    x = kiln.tensor([1, 2, 3], dtype=kiln.int32)
    with raises(kiln.DTypeError, match=f"{name}_: result type float32 can't be cast to the "
                                       "desired output type int32"):
        getattr(x, name + "_")()
    np.testing.assert_array_equal(x.numpy(), [1, 2, 3])


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("name", NEW_UNARY)
def test_gradient_matches_numpy(name, dtype, rng):
    # gradcheck (test_grad_ops.py) is float64 only; here every floating dtype against the
    # derivative's formula, at the dtype's tolerance (the rule computes in the dtype).
    a = inputs(name, (4, 6), dtype, rng)
    x = kt(a, dtype).requires_grad_()
    upstream = random_array((4, 6), dtype, rng, 0.5, 2.0)
    (gx,) = kiln.autograd.grad(getattr(M, name)(x), [x], kt(upstream, dtype))
    assert gx.dtype == dtype
    v = x.detach().numpy().astype(np.float64)
    want = upstream.astype(np.float64) * DERIVATIVES[name](v)
    rtol, atol = {kiln.float64: (1e-12, 1e-12), kiln.float32: (1e-5, 1e-5),
                  kiln.float16: (1e-2, 1e-3), kiln.bfloat16: (5e-2, 1e-2)}[dtype]
    np.testing.assert_allclose(gx.numpy().astype(np.float64), want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", ["atan", "asinh"])
def test_float16_gradient_where_x_squared_overflows(name):
    # x^2 = 90000 is past float16's range; the derivative (1e-5, 3e-3) is not.
    x = kiln.tensor(np.array([300.0, -300.0], np.float16)).requires_grad_()
    (gx,) = kiln.autograd.grad(getattr(M, name)(x).sum(), [x])
    want = DERIVATIVES[name](np.array([300.0, -300.0])).astype(np.float16)  # 1e-5 is subnormal
    np.testing.assert_allclose(gx.numpy().astype(np.float64), want.astype(np.float64), rtol=1e-3)


def test_gradients_at_domain_edges_are_infinite_as_pytorchs():
    one = kiln.tensor([1.0], dtype=kiln.float64).requires_grad_()
    for name, want in (("asin", np.inf), ("acos", -np.inf), ("acosh", np.inf), ("atanh", np.inf)):
        (g,) = kiln.autograd.grad(getattr(M, name)(one).sum(), [one])
        assert g.item() == want, name


@pytest.mark.parametrize("level", ["O0", "O1"])
def test_unary_ops_and_aliases_in_kiln_jit(level, rng):
    a = rng.uniform(-0.9, 0.9, (5, 7)).astype(np.float32)

    def f(x):
        y = M.asin(x) + M.acos(x) * 0.5 + M.atan(x) - M.arctanh(x)
        z = M.sinh(x) * M.cosh(x) + M.asinh(x) + M.acosh(x * x + 1.5)
        return y * M.erfc(x) + M.exp2(z), M.arcsin(x * 0.5)

    x = kiln.tensor(a)
    jitted = kiln.jit(f, backend="kiln_cpu", jit_level=level)
    v = a.astype(np.float64)
    y = np.arcsin(v) + np.arccos(v) * 0.5 + np.arctan(v) - np.arctanh(v)
    z = np.sinh(v) * np.cosh(v) + np.arcsinh(v) + np.arccosh(v * v + 1.5)
    want = [y * _erfc(v) + np.exp2(z), np.arcsin(v * 0.5)]
    for got, expected in zip(jitted(x), want):
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)
    eager = f(x)
    for got, expected in zip(jitted(x), eager):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("level", ["O0", "O1"])
def test_gradient_rules_trace_into_kiln_jit(level, rng):
    # kiln.jit(kiln.grad(f)): the backward rules' ops are traced into the graph.
    a = rng.uniform(-0.9, 0.9, (3, 4))
    names = ["atanh", "erfc", "asin", "acos", "atan", "asinh", "sinh", "cosh", "exp2"]

    def f(v):
        return sum((getattr(M, n)(v) for n in names), M.acosh(v * v + 1.5)).sum()

    grad = kiln.jit(kiln.grad(f), backend="kiln_cpu", jit_level=level)
    want = sum(DERIVATIVES[n](a) for n in names) + 2 * a * DERIVATIVES["acosh"](a * a + 1.5)
    assert_close(grad(kiln.tensor(a)), want)
    b = rng.uniform(0.5, 2, (4,))
    both = kiln.jit(kiln.grad(lambda x, y: (M.atan2(x, y) + M.fmod(x, y)).sum(), (0, 1)),
                    backend="kiln_cpu", jit_level=level)
    gx, gy = both(kiln.tensor(a), kiln.tensor(b))
    r2 = a * a + b * b
    assert_close(gx, b / r2 + 1)
    assert_close(gy, (-a / r2 - np.trunc(a / b)).sum(0))


# ---- atan2 and fmod -----------------------------------------------------------------------------

BINARY = {"atan2": (np.arctan2, "float"), "fmod": (np.fmod, "nobool")}
SHAPES = [((), ()), ((0,), (0,)), ((7,), (7,)), ((3, 4), (3, 4)), ((2, 3, 5), (2, 3, 5)),
          ((3, 1), (1, 4)), ((5,), (2, 5)), ((), (3, 4)), ((2, 3), ())]


def binary_operands(name, shape_a, shape_b, dtype, rng):
    a = random_array(shape_a, dtype, rng)
    b = random_array(shape_b, dtype, rng)
    if name == "fmod":
        if dtype.is_floating_point:
            sign = np.where(rng.random(shape_b) > 0.5, 1, -1)
            b = (sign * random_array(shape_b, dtype, rng, 0.5, 3.0)).astype(b.dtype)
        else:
            b = np.where(b == 0, 1, b).astype(b.dtype)
    return a, b


def binary_expected(name, a, b, dtype):
    ref, rule = BINARY[name]
    np_dtype = numpy_dtype(to_floating(dtype) if rule == "float" else dtype)
    return ref(np.asarray(a).astype(np_dtype), np.asarray(b).astype(np_dtype))


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_matches_numpy(name, dtype, shapes, rng):
    if name == "fmod" and dtype == kiln.bool_:
        pytest.skip("rejected; see test_fmod_of_bools_is_a_dtype_error")
    a, b = binary_operands(name, *shapes, dtype, rng)
    result = getattr(M, name)(kt(a, dtype), kt(b, dtype))
    assert result.dtype == (to_floating(dtype) if BINARY[name][1] == "float" else dtype)
    assert result.shape == np.broadcast_shapes(*shapes)
    assert_close(result, binary_expected(name, a, b, dtype))


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_reads_strided_views_and_writes_into_out(name, rng):
    a, b = binary_operands(name, (6, 8), (6, 8), kiln.float32, rng)
    x, y = kt(a, kiln.float32), kt(b, kiln.float32)
    fn = getattr(M, name)
    assert_close(fn(x.transpose(0, 1), y.transpose(0, 1)), binary_expected(name, a.T, b.T,
                                                                             kiln.float32))
    assert_close(fn(x[:, 1::3], y[:, ::3]), binary_expected(name, a[:, 1::3], b[:, ::3],
                                                            kiln.float32))
    out = kiln.tensor(np.zeros((6, 8)), dtype=kiln.float64)
    assert fn(x, y, out=out) is out
    assert_close(out, binary_expected(name, a, b, kiln.float32).astype(np.float64),
                 dtype=kiln.float32)


@pytest.mark.parametrize("a_dtype, b_dtype, expected", [
    (kiln.int32, kiln.float64, kiln.float64), (kiln.float16, kiln.float32, kiln.float32),
    (kiln.int8, kiln.int32, kiln.int32), (kiln.uint8, kiln.int8, kiln.int16),
    (kiln.bfloat16, kiln.int64, kiln.bfloat16), (kiln.bool_, kiln.int16, kiln.int16),
])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_promotes_mixed_dtypes(name, a_dtype, b_dtype, expected, rng):
    a = random_array((3, 4), a_dtype, rng)
    b = random_array((4,), b_dtype, rng, 0.5, 3.0)  # positive: no integer zero divisor
    result = getattr(M, name)(kt(a, a_dtype), kt(b, b_dtype))
    want = to_floating(expected) if name == "atan2" else expected
    assert result.dtype == want
    np_dtype = numpy_dtype(want)
    assert_close(result, BINARY[name][0](a.astype(np_dtype), b.astype(np_dtype)))


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float16, kiln.int32, kiln.int64], ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_with_python_numbers(name, dtype, rng):
    a = random_array((3, 4), dtype, rng)
    x = kt(a, dtype)
    fn = getattr(M, name)
    for number in (2, -3, 2.5):
        got = fn(x, number)
        floating = name == "atan2" or isinstance(number, float)
        want_dtype = to_floating(dtype) if floating else dtype
        assert got.dtype == want_dtype, number
        # A number computes in float32 beside 16-bit floats (Note [Scalars of 16-bit ops]).
        np_dtype = np.float32 if dtype == kiln.float16 else numpy_dtype(want_dtype).type
        want = BINARY[name][0](a.astype(np_dtype), np_dtype(number))
        assert_close(got, want.astype(numpy_dtype(want_dtype)))
    if name == "atan2":
        assert_close(fn(1.5, x), np.arctan2(np.float32(1.5), a.astype(numpy_dtype(
            to_floating(dtype)))))


def test_fmod_has_the_sign_of_the_dividend():
    a = np.array([-7, 7, -7, 7, 5, -128, 0], np.int64)
    b = np.array([3, -3, -3, 3, -1, -1, -5], np.int64)
    for dtype in (kiln.int8, kiln.int16, kiln.int32, kiln.int64):
        got = M.fmod(kt(a, dtype), kt(b, dtype))
        np.testing.assert_array_equal(got.numpy(), np.fmod(a.astype(dtype.name),
                                                           b.astype(dtype.name)))
    np.testing.assert_array_equal(M.fmod(kiln.tensor([-7, 7]), 3).numpy(), [-1, 1])
    # Against remainder, which takes the divisor's sign.
    np.testing.assert_array_equal(M.remainder(kiln.tensor([-7, 7]), 3).numpy(), [2, 1])
    x = kiln.tensor([-7.5, 7.5, -4.0, 4.0, 1.0, np.inf, np.nan, 3.0])
    y = kiln.tensor([2.0, -2.0, 2.0, -2.0, np.inf, 2.0, 2.0, 0.0])
    got = M.fmod(x, y).numpy()
    want = np.fmod(x.numpy(), y.numpy())
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))  # fmod(-4, 2) = -0


def test_atan2_special_values():
    zeros = [0.0, -0.0, 0.0, -0.0]
    a = np.array(zeros + [np.inf, -np.inf, np.inf, 1.0, np.nan, 1.0, -1.0], np.float32)
    b = np.array([0.0, 0.0, -0.0, -0.0, np.inf, np.inf, -np.inf, np.nan, 1.0, 0.0, -np.inf],
                 np.float32)
    for dtype in FLOAT_DTYPES:
        got = M.atan2(kt(a, dtype), kt(b, dtype)).numpy().astype(np.float64)
        want = np.arctan2(a.astype(np.float64), b.astype(np.float64))
        assert_close(kt(got, kiln.float64), want, dtype=dtype)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
def test_fmod_integer_division_by_zero_raises(dtype):
    a = kiln.tensor([5, 6, 7], dtype=dtype)
    out = kiln.tensor([9, 9, 9], dtype=dtype)
    with raises(kiln.KilnValueError, match="Fmod: integer division by zero"):
        M.fmod(a, kiln.tensor([1, 0, 1], dtype=dtype), out=out)
    with raises(kiln.KilnValueError, match="Fmod: integer division by zero"):
        M.fmod(a, 0)
    with raises(ValueError, match="division by zero"):
        a.fmod_(0)
    np.testing.assert_array_equal(out.numpy(), [9, 9, 9])
    np.testing.assert_array_equal(a.numpy(), [5, 6, 7])
    assert np.isnan(M.fmod(kiln.tensor([1.0]), 0).item())  # a float divisor of 0 gives nan


def test_fmod_of_bools_is_a_dtype_error():
    flags = kiln.tensor([True, False])
    with raises(kiln.DTypeError, match="expected numeric operands, got bool and bool"):
        M.fmod(flags, flags)
    # atan2 of bools is float32, as PyTorch's.
    assert_close(M.atan2(flags, flags), np.arctan2([1.0, 0.0], [1.0, 0.0]).astype(np.float32))


@pytest.mark.parametrize("name", ["atan2", "arctan2", "fmod"])
def test_binary_methods_and_in_place_forms(name, rng):
    op = "atan2" if name == "arctan2" else name
    a, b = binary_operands(op, (3, 4), (4,), kiln.float32, rng)
    x, y = kt(a, kiln.float32), kt(b, kiln.float32)
    want = binary_expected(op, a, b, kiln.float32)
    assert_close(getattr(M, name)(x, y), want)
    assert_close(getattr(x, name)(y), want)
    assert_close(getattr(x, name)(other=y), want)
    storage = x.data_ptr()
    assert getattr(x, name + "_")(y) is x
    assert x.data_ptr() == storage and x.dtype == kiln.float32
    assert_close(x, want)
    h = kt(a, kiln.float16)
    assert getattr(h, name + "_")(2.0) is h and h.dtype == kiln.float16
    assert_close(h, binary_expected(op, a.astype(np.float16), np.float32(2.0), kiln.float16))


def test_binary_in_place_refuses_what_self_cannot_hold():
    ints = kiln.tensor([1, 2, 3], dtype=kiln.int32)
    with raises(kiln.DTypeError, match="atan2_: result type float32 can't be cast to the desired "
                                       "output type int32"):
        ints.atan2_(ints)
    with raises(kiln.DTypeError, match="fmod_: result type float32 can't be cast"):
        ints.fmod_(2.5)
    ints.fmod_(2)
    np.testing.assert_array_equal(ints.numpy(), [1, 0, 1])
    row = kiln.tensor([1.0, 2.0, 3.0])
    with raises(kiln.ShapeError, match="does not fit the tensor written"):
        row.fmod_(kiln.tensor(np.ones((2, 3))))
    with raises(TypeError):
        row.atan2_("one")
    np.testing.assert_array_equal(row.numpy(), [1.0, 2.0, 3.0])


@pytest.mark.parametrize("level", ["O0", "O1"])
def test_binary_ops_in_kiln_jit(level, rng):
    a = rng.uniform(-3, 3, (4, 6)).astype(np.float32)
    b = rng.uniform(0.5, 3, (6,)).astype(np.float32)

    def f(x, y):
        return M.atan2(x * 2.0, y) + M.fmod(x, y) * 0.5, M.fmod(x, 1.5), M.arctan2(y, x).exp()

    jitted = kiln.jit(f, backend="kiln_cpu", jit_level=level)
    reference = kiln.jit(f, backend="reference")
    x, y = kiln.tensor(a), kiln.tensor(b)
    v, w = a.astype(np.float64), b.astype(np.float64)
    want = [np.arctan2(v * 2, w) + np.fmod(v, w) * 0.5, np.fmod(v, 1.5), np.exp(np.arctan2(w, v))]
    for results in (jitted(x, y), reference(x, y)):
        for got, expected in zip(results, want):
            np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)
    ints = kiln.jit(lambda p, q: M.fmod(p, q) * 2, backend="kiln_cpu", jit_level=level)
    p = kiln.tensor(np.array([-7, 7, 9]), dtype=kiln.int32)
    got = ints(p, kiln.tensor(np.array([3, 3, -4]), dtype=kiln.int32))
    assert got.dtype == kiln.int32
    np.testing.assert_array_equal(got.numpy(), [-2, 2, 2])
    with raises(kiln.KilnValueError, match="division by zero"):
        ints(p, kiln.tensor(np.array([3, 0, 1]), dtype=kiln.int32))


def test_binary_gradients_with_numbers_and_second_order(rng):
    x = kiln.tensor(rng.uniform(-2, 2, (2, 3))).requires_grad_()
    y = kiln.tensor(rng.uniform(0.5, 2, (3,))).requires_grad_()
    assert kiln.testing.gradcheck(lambda v: M.atan2(v, 1.5), (x,))
    assert kiln.testing.gradcheck(lambda v: M.atan2(-0.5, v), (x,))
    assert kiln.testing.gradcheck(lambda v: M.fmod(v, 0.7), (x,))
    assert kiln.testing.gradgradcheck(M.atan2, (x, y))
    assert kiln.testing.gradgradcheck(lambda v, w: M.fmod(v, w) * v, (x, y))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_binary_gradients_match_pytorchs_formulas(dtype, rng):
    a = random_array((3, 4), dtype, rng)
    b = random_array((4,), dtype, rng, 0.5, 3.0) * np.where(np.arange(4) % 2, 1, -1)
    b = b.astype(a.dtype)
    x, y = kt(a, dtype).requires_grad_(), kt(b, dtype).requires_grad_()
    g = random_array((3, 4), dtype, rng, 0.5, 2.0)
    v, w, gv = (t.astype(np.float64) for t in (x.detach().numpy(), y.detach().numpy(), g))
    rtol, atol = {kiln.float64: (1e-12, 1e-12), kiln.float32: (1e-5, 1e-5),
                  kiln.float16: (1e-2, 1e-2), kiln.bfloat16: (5e-2, 5e-2)}[dtype]
    gx, gy = kiln.autograd.grad(M.atan2(x, y), [x, y], kt(g, dtype))
    r2 = v * v + w * w
    assert gx.dtype == dtype and gy.dtype == dtype and gy.shape == (4,)
    np.testing.assert_allclose(gx.numpy().astype(np.float64), gv * w / r2, rtol=rtol, atol=atol)
    np.testing.assert_allclose(gy.numpy().astype(np.float64), (-gv * v / r2).sum(0), rtol=rtol,
                               atol=atol * 4)
    gx, gy = kiln.autograd.grad(M.fmod(x, y), [x, y], kt(g, dtype))
    np.testing.assert_allclose(gx.numpy().astype(np.float64), gv, rtol=rtol, atol=atol)
    np.testing.assert_allclose(gy.numpy().astype(np.float64), (-gv * np.trunc(v / w)).sum(0),
                               rtol=rtol, atol=atol * 4)


def test_binary_gradient_of_a_mixed_dtype_pair_keeps_each_dtype():
    x = kiln.tensor(np.array([1.0, -2.0, 3.0], np.float32)).requires_grad_()
    y = kiln.tensor(np.array([2.0, 0.5, -1.5])).requires_grad_()
    ints = kiln.tensor([3, -1, 2], dtype=kiln.int32)
    for fn in (M.atan2, M.fmod):
        gx, gy = kiln.autograd.grad(fn(x, y).sum(), [x, y])
        assert gx.dtype == kiln.float32 and gy.dtype == kiln.float64
        (gx,) = kiln.autograd.grad(fn(x, ints).sum(), [x])
        assert gx.dtype == kiln.float32
    (gx,) = kiln.autograd.grad(M.atan2(x, ints).sum(), [x])
    w = np.array([3.0, -1.0, 2.0])
    assert_close(gx, (w / (x.detach().numpy() ** 2 + w * w)).astype(np.float32))
