"""The special functions erfinv, lgamma, digamma and polygamma (kiln.mint's, their Tensor methods
and in-place forms, and kiln.special's torch.special names): values against Python's math and a
NumPy reference across dtypes, integer and bool inputs, special values at poles and domain edges,
gradients (first and second) against finite differences and PyTorch, kiln.jit, and the errors of
a bad order n."""

import math

import numpy as np
import pytest

import kiln
from binary_cases import kt
from conftest import (FLOAT_DTYPES, INT_DTYPES, TOLERANCES, assert_close, check_torch,
                      numpy_dtype, random_array, raises, torch_twin)

M = kiln.mint
EULER_GAMMA = 0.57721566490153286061
ZETA3 = 1.20205690315959428540
UNARY = ["erfinv", "lgamma", "digamma"]


@pytest.fixture(autouse=True)
def _quiet_numpy():
    with np.errstate(all="ignore"):
        yield


# ---- references ---------------------------------------------------------------------------------


def _erfinv_reference(y):
    """erfinv by Newton's method on math.erf, from 0: erf is concave on x >= 0, so the iterates
    rise monotonically to the root."""
    a, x = abs(y), 0.0
    for _ in range(100):
        step = (math.erf(x) - a) / (2 / math.sqrt(math.pi) * math.exp(-x * x))
        x -= step
        if abs(step) <= 1e-17 * x:
            break
    return math.copysign(x, y)


# The Bernoulli numbers B_2, B_4, ..., B_14, of polygamma's asymptotic series.
_BERNOULLI = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6]


def _polygamma_reference(n, x):
    """polygamma(n, x) for x away from the poles: the recurrence up to x >= 30, then the
    asymptotic series (n = 0: log x - 1/(2x) - sum B_2k / (2k x^2k))."""
    shift = 0.0
    sign = 1.0 if n % 2 == 0 else -1.0  # (-1)^n
    while x < 30:
        shift -= sign * math.factorial(n) / x ** (n + 1)  # psi_n(x) = psi_n(x + 1) - that
        x += 1
    if n == 0:
        series = math.log(x) - 0.5 / x - sum(b / (2 * k) / x ** (2 * k)
                                              for k, b in enumerate(_BERNOULLI, 1))
    else:
        terms = math.factorial(n - 1) / x ** n + math.factorial(n) / (2 * x ** (n + 1))
        terms += sum(b * math.factorial(2 * k + n - 1) / math.factorial(2 * k) / x ** (2 * k + n)
                     for k, b in enumerate(_BERNOULLI, 1))
        series = -sign * terms  # (-1)^(n+1)
    return series + shift


REFERENCES = {
    "erfinv": np.vectorize(_erfinv_reference, otypes=[np.float64]),
    "lgamma": np.vectorize(math.lgamma, otypes=[np.float64]),
    "digamma": np.vectorize(lambda v: _polygamma_reference(0, v), otypes=[np.float64]),
}
DOMAIN = {"erfinv": (-0.95, 0.95)}


def reference(name, v):
    return REFERENCES[name](np.asarray(v, np.float64))


def inputs(name, shape, dtype, rng):
    """Random values in the op's domain, a margin away from the poles at 0, -1, -2, ..."""
    a = random_array(shape, dtype, rng, *DOMAIN.get(name, (-4.0, 6.0)))
    if name != "erfinv":
        near_pole = (a < 0.2) & (np.abs(a - np.round(a)) < 0.15)
        a = np.where(near_pole, a.dtype.type(-0.5), a).astype(a.dtype)
    return a


# ---- values -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("name", UNARY)
def test_values_match_the_references(name, dtype, rng):
    x = kt(inputs(name, (6, 7), dtype, rng), dtype)
    got = getattr(M, name)(x)
    assert got.dtype == dtype and got.shape == (6, 7)
    # The reference at the inputs as rounded to dtype.
    want = reference(name, x.numpy())
    rtol, atol = TOLERANCES[dtype]
    if dtype == kiln.float64:
        rtol, atol = 1e-14, 1e-14  # digamma's cancellations near its zeros leave an absolute 1e-15
    np.testing.assert_allclose(got.numpy().astype(np.float64), want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float16, kiln.bfloat16], ids=str)
def test_erfinv_of_narrow_floats_is_the_float64_value_rounded(dtype, rng):
    # Their kernel rounds a float64 approximation (Note [erfinv]); the tails next to +-1, the
    # edges and a strided input (gathered for the same kernel) included.
    top = float(np.nextafter(np.float32(1), np.float32(0)))
    values = [1.0, -1.0, 1.5, -2.0, math.inf, math.nan, 0.0, -0.0, 1e-40, 0.86, -0.999, top, -top]
    a = np.concatenate([np.array(values), rng.uniform(-1, 1, 300)])
    x = kt(a, kiln.float64).to(dtype)
    want = M.erfinv(x.to(kiln.float64)).to(kiln.float32).to(dtype).numpy()
    np.testing.assert_array_equal(M.erfinv(x).numpy(), want)
    np.testing.assert_array_equal(M.erfinv(x[::2]).numpy(), want[::2])
    assert np.signbit(M.erfinv(x).numpy()[7])  # erfinv(-0) = -0


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.float16], ids=str)
@pytest.mark.parametrize("n", [0, 1, 2, 3, 5])
def test_polygamma_matches_the_reference(n, dtype, rng):
    a = inputs("polygamma", (5, 4), dtype, rng)
    x = kt(a, dtype)
    got = M.polygamma(n, x)
    assert got.dtype == dtype
    want = np.vectorize(lambda v: _polygamma_reference(n, v))(x.numpy().astype(np.float64))
    want = want.astype(numpy_dtype(dtype)).astype(np.float64)  # float16 overflows near poles
    rtol = 1e-13 if dtype == kiln.float64 else TOLERANCES[dtype][0]
    np.testing.assert_allclose(got.numpy().astype(np.float64), want, rtol=rtol)


def test_closed_forms_in_float64():
    one_half = kiln.tensor([1.0, 0.5, 0.25], dtype=kiln.float64)
    pi = math.pi
    assert_close(M.digamma(one_half), [-EULER_GAMMA, -EULER_GAMMA - 2 * math.log(2),
                                       -EULER_GAMMA - pi / 2 - 3 * math.log(2)])
    assert_close(M.polygamma(1, one_half[:2]), [pi ** 2 / 6, pi ** 2 / 2])
    assert_close(M.polygamma(2, one_half[:1]), [-2 * ZETA3])
    assert_close(M.polygamma(3, one_half[:1]), [pi ** 4 / 15])
    # lgamma(n) = log((n - 1)!) and digamma(n + 1) = digamma(n) + 1 / n.
    n = np.arange(1, 31)
    integers = kiln.tensor(n.astype(np.float64))
    assert_close(M.lgamma(integers), [math.log(math.factorial(k - 1)) for k in n])
    d = M.digamma(integers).numpy()
    np.testing.assert_allclose(d[1:] - d[:-1], 1 / n[:-1], rtol=1e-13)
    # erfinv inverts erf (where erf's rounding moves the inverse little), and next to 1 erfc
    # (1 - y keeps its digits there).
    x = np.linspace(-2.5, 2.5, 201)
    erf_x = kiln.tensor([math.erf(v) for v in x], dtype=kiln.float64)
    np.testing.assert_allclose(M.erfinv(erf_x).numpy(), x, rtol=1e-13, atol=1e-15)
    w = 2.0 ** -np.arange(2, 53)
    tail = M.erfinv(kiln.tensor(1 - w)).numpy()
    # One ulp of x (up to 5.9) moves erfc(x) by about 2 x^2 ulps.
    np.testing.assert_allclose([math.erfc(v) for v in tail], w, rtol=1e-13)


@pytest.mark.parametrize("dtype", INT_DTYPES + [kiln.bool_], ids=str)
@pytest.mark.parametrize("name", UNARY + ["polygamma"])
def test_integer_and_bool_inputs_promote_to_float32(name, dtype):
    # As torch.lgamma(int_tensor): float32, computed from the values.
    if dtype == kiln.bool_:
        a = np.array([True, False, True])
    elif name == "erfinv":
        a = np.array([0, 1, 0] if dtype == kiln.uint8 else [-1, 0, 1], dtype.name)
    else:
        a = np.array([1, 2, 3, 7], dtype.name)
    fn = (lambda v: M.polygamma(2, v)) if name == "polygamma" else getattr(M, name)
    result = fn(kt(a, dtype))
    assert result.dtype == kiln.float32
    np.testing.assert_array_equal(result.numpy(), fn(kiln.tensor(a.astype(np.float32))).numpy())


def test_special_values():
    nan, inf = math.nan, math.inf
    f64 = kiln.float64
    cases = {
        "erfinv": ([1.0, -1.0, 1.5, -2.0, inf, nan, 0.0], [inf, -inf, nan, nan, nan, nan, 0.0]),
        "lgamma": ([0.0, -0.0, -1.0, -5.0, inf, -inf, nan, 1.0, 2.0],
                   [inf, inf, inf, inf, inf, inf, nan, 0.0, 0.0]),
        # PyTorch's: -inf at +0, +inf at -0, nan at the negative integers and at -inf.
        "digamma": ([0.0, -0.0, -1.0, -7.0, -inf, inf, nan], [-inf, inf, nan, nan, nan, inf, nan]),
    }
    for name, (xs, want) in cases.items():
        for dtype in FLOAT_DTYPES:
            got = getattr(M, name)(kiln.tensor(np.array(xs), dtype=dtype))
            np.testing.assert_array_equal(got.numpy().astype(np.float64), want, err_msg=name)
    assert np.signbit(M.erfinv(kiln.tensor([-0.0])).numpy()[0])
    poles = kiln.tensor([0.0, -0.0, -1.0, -3.0], dtype=f64)
    for n, sign in ((1, 1), (2, -1), (3, 1)):  # (-1)^(n+1) n! zeta(n + 1, pole) = +-inf
        np.testing.assert_array_equal(M.polygamma(n, poles).numpy(), [sign * inf] * 4)
    ends = kiln.tensor([inf, -inf, nan], dtype=f64)
    for n in (1, 2, 3):
        np.testing.assert_array_equal(M.polygamma(n, ends).numpy(), [0.0, nan, nan])
    np.testing.assert_array_equal(M.polygamma(0, ends).numpy(), M.digamma(ends).numpy())


def test_far_below_zero_in_bounded_time():
    # zeta(n + 1, x) for x < -1 folds its negative terms onto the positive side (Note [Hurwitz
    # zeta of a negative q]); a direct sum would take 1e15 steps here. Trigamma's reflection:
    # polygamma(1, 1 - x) + polygamma(1, x) = pi^2 / sin^2(pi x).
    x = np.array([-1e15 - 0.5, -1e6 - 0.25, -2.75])
    got = (M.polygamma(1, kiln.tensor(1 - x)) + M.polygamma(1, kiln.tensor(x))).numpy()
    np.testing.assert_allclose(got, math.pi ** 2 / np.sin(math.pi * (x - np.floor(x))) ** 2,
                               rtol=1e-12)


def check_near_torch(actual, expected, what):
    """float64 ``actual`` against PyTorch's ``expected`` within 1e-9: PyTorch's trigamma
    (polygamma(1, .), digamma's derivative) is its own short series, 5e-10 off at 1.7 (mpmath),
    where Kiln's, through the Hurwitz zeta function, is within 1e-15."""
    np.testing.assert_allclose(actual.numpy(), expected.detach().numpy(), rtol=1e-9, atol=1e-12,
                               equal_nan=True, err_msg=what)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64], ids=str)
def test_values_match_pytorch(torch, dtype, rng):
    v = np.concatenate([rng.uniform(-6, 8, 40), [0.5, 1.0, 2.0, -2.5, 0.0, -0.0, -3.0, 30.0]])
    v = v.astype(dtype.name)
    x, tx = kt(v, dtype), torch.tensor(v)
    for name in ("lgamma", "digamma"):
        check_torch(getattr(M, name)(x), getattr(torch, name)(tx), dtype, name, scale_atol=True)
    u = np.concatenate([rng.uniform(-1, 1, 40), [1.0, -1.0, 0.0, 0.999999]]).astype(dtype.name)
    check_torch(M.erfinv(kt(u, dtype)), torch.erfinv(torch.tensor(u)), dtype, "erfinv")
    # polygamma away from the negative integers, where PyTorch's trigamma gives finite values
    # (6.6e32 at -1) for the pole.
    w = v[(v > 0) | (np.abs(v - np.round(v)) > 0.05)]
    for n in range(4):
        got, want = M.polygamma(n, kt(w, dtype)), torch.polygamma(n, torch.tensor(w))
        if dtype == kiln.float64 and n == 1:
            check_near_torch(got, want, "polygamma(1)")
        else:
            check_torch(got, want, dtype, f"polygamma({n})", scale_atol=True)


# ---- method, in-place and kiln.special forms ---------------------------------------------------


@pytest.mark.parametrize("name", UNARY)
def test_methods_out_and_in_place(name, rng):
    a = inputs(name, (3, 5), kiln.float32, rng)
    x = kt(a, kiln.float32)
    want = getattr(M, name)(x).numpy()
    np.testing.assert_array_equal(getattr(x, name)().numpy(), want)
    out = kiln.tensor(np.zeros((3, 5)), dtype=kiln.float64)
    assert getattr(M, name)(x, out=out) is out
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)
    storage = x.data_ptr()
    assert getattr(x, name + "_")() is x
    assert x.data_ptr() == storage and x.dtype == kiln.float32
    np.testing.assert_array_equal(x.numpy(), want)
    ints = kiln.tensor([1, 2, 3], dtype=kiln.int32)
    with raises(kiln.DTypeError, match=f"{name}_: result type float32 can't be cast to the "
                                       "desired output type int32"):
        getattr(ints, name + "_")()


def test_polygamma_method_out_and_in_place(rng):
    a = inputs("polygamma", (3, 4), kiln.float64, rng)
    x = kt(a, kiln.float64)
    want = M.polygamma(2, x).numpy()
    np.testing.assert_array_equal(x.polygamma(2).numpy(), want)
    np.testing.assert_array_equal(x.polygamma(n=2).numpy(), want)
    np.testing.assert_array_equal(M.polygamma(np.int64(2), x).numpy(), want)
    out = kiln.tensor(np.zeros((3, 4)))
    assert M.polygamma(2, x, out=out) is out
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)
    view = x[:, 1::2]
    assert view.polygamma_(2) is view
    np.testing.assert_array_equal(x.numpy()[:, 1::2], want[:, 1::2])
    np.testing.assert_array_equal(x.numpy()[:, ::2], a[:, ::2])
    ints = kiln.tensor([1, 2, 3], dtype=kiln.int64)
    with raises(kiln.DTypeError, match="polygamma_: result type float32 can't be cast"):
        ints.polygamma_(1)
    np.testing.assert_array_equal(ints.numpy(), [1, 2, 3])


def test_kiln_special_names_are_the_mint_functions():
    s = kiln.special
    assert s.digamma is M.digamma and s.psi is M.digamma
    assert s.gammaln is M.lgamma and s.erfinv is M.erfinv and s.polygamma is M.polygamma
    assert s.expit is M.sigmoid and s.logit is M.logit and s.round is M.round
    x = kiln.tensor([0.5, 2.0], dtype=kiln.float64)
    assert_close(s.polygamma(1, x), M.polygamma(1, x).numpy())
    for name in s.__all__:
        assert callable(getattr(s, name)), name
    assert "Hurwitz zeta" in M.polygamma.__doc__ and "log |Gamma(x)|" in M.lgamma.__doc__


@pytest.mark.parametrize("n, error, match", [
    (-1, kiln.KilnValueError, "Polygamma: expected n >= 0, got -1"),
    (1.0, kiln.KilnTypeError, "polygamma: expected n to be an int, got 1.0"),
    (True, kiln.KilnTypeError, "polygamma: expected n to be an int, got True"),
    ("2", kiln.KilnTypeError, "polygamma: expected n to be an int, got '2'"),
    (2 ** 70, kiln.KilnValueError, "polygamma: expected n within int64"),
])
def test_a_bad_order_is_refused(n, error, match):
    x = kiln.tensor([1.5, 2.5])
    with raises(error, match=match):
        M.polygamma(n, x)
    with raises(error, match=match):
        x.polygamma(n)
    with raises(error, match=match):
        x.polygamma_(n)
    np.testing.assert_array_equal(x.numpy(), [1.5, 2.5])  # the in-place form wrote nothing


# ---- gradients ----------------------------------------------------------------------------------


def _f64(a):
    return kiln.tensor(np.asarray(a, np.float64)).requires_grad_()


GRAD_CASES = {
    "erfinv": (M.erfinv, [-0.9, -0.3, 0.0, 0.4, 0.85]),
    "lgamma": (M.lgamma, [0.3, 1.7, 4.2, -0.5, -2.3]),
    "digamma": (M.digamma, [0.3, 1.7, 4.2, -0.5, -2.3]),
    "polygamma1": (lambda v: M.polygamma(1, v), [0.3, 1.7, 4.2, -0.5, -2.3]),
    "polygamma3": (lambda v: M.polygamma(3, v), [0.6, 1.7, 4.2, -0.5, -2.3]),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradients_and_second_derivatives_match_finite_differences(name):
    fn, points = GRAD_CASES[name]
    assert kiln.testing.gradcheck(fn, (_f64(points),))
    assert kiln.testing.gradgradcheck(fn, (_f64(points),))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_gradients_are_the_next_function(dtype, rng):
    # erfinv' = sqrt(pi) / 2 exp(erfinv^2), lgamma' = digamma, digamma' = polygamma(1, .),
    # polygamma(n, .)' = polygamma(n + 1, .), in every floating dtype.
    a = inputs("digamma", (4, 5), dtype, rng)
    x = kt(a, dtype).requires_grad_()
    g = kt(random_array((4, 5), dtype, rng, 0.5, 2.0), dtype)
    v = x.detach()
    rtol, atol = {kiln.float64: (1e-14, 1e-14), kiln.float32: (1e-5, 1e-5),
                  kiln.float16: (1e-2, 1e-2), kiln.bfloat16: (5e-2, 5e-2)}[dtype]
    for fn, derivative in ((M.lgamma, M.digamma), (M.digamma, lambda t: M.polygamma(1, t)),
                           (lambda t: M.polygamma(2, t), lambda t: M.polygamma(3, t))):
        (gx,) = kiln.autograd.grad(fn(x), [x], g)
        assert gx.dtype == dtype
        np.testing.assert_allclose(gx.numpy().astype(np.float64),
                                   (g * derivative(v)).numpy().astype(np.float64), rtol=rtol,
                                   atol=atol)
    u = kt(inputs("erfinv", (4, 5), dtype, rng), dtype).requires_grad_()
    (gu,) = kiln.autograd.grad(M.erfinv(u), [u], g)
    y = M.erfinv(u.detach()).numpy().astype(np.float64)
    want = g.numpy().astype(np.float64) * math.sqrt(math.pi) / 2 * np.exp(y * y)
    np.testing.assert_allclose(gu.numpy().astype(np.float64), want, rtol=rtol, atol=atol)


def test_integer_inputs_take_no_gradient():
    ints = kiln.tensor([1, 2, 3])
    for fn in (M.lgamma, M.digamma, M.erfinv, lambda t: M.polygamma(1, t)):
        assert not fn(ints).requires_grad


def test_gradients_match_pytorch_with_double_backward(torch):
    v = np.array([0.3, 1.7, 4.2, -0.5, -2.3, 9.0])
    g = np.linspace(0.5, 2.0, v.size)
    for n in range(4):
        x = kiln.tensor(v).requires_grad_()
        tx = torch_twin(torch, v, kiln.float64)
        (gx,) = kiln.autograd.grad(M.polygamma(n, x), [x], kiln.tensor(g), create_graph=True)
        (tgx,) = torch.autograd.grad(torch.polygamma(n, tx), [tx], torch.tensor(g),
                                     create_graph=True)
        check_near_torch(gx, tgx, f"polygamma({n})'")
        (ggx,) = kiln.autograd.grad(gx.sum(), [x])
        (tggx,) = torch.autograd.grad(tgx.sum(), [tx])
        check_near_torch(ggx, tggx, f"polygamma({n})''")
    # digamma twice (PyTorch's digamma'' is polygamma(2, .)), lgamma, erfinv.
    for name, values in (("digamma", v), ("lgamma", v), ("erfinv", v / 10)):
        x = kiln.tensor(values).requires_grad_()
        tx = torch_twin(torch, values, kiln.float64)
        (gx,) = kiln.autograd.grad(getattr(M, name)(x).sum(), [x], create_graph=True)
        (tgx,) = torch.autograd.grad(getattr(torch, name)(tx).sum(), [tx], create_graph=True)
        check_near_torch(gx, tgx, f"{name}'")
        (ggx,) = kiln.autograd.grad(gx.sum(), [x])
        (tggx,) = torch.autograd.grad(tgx.sum(), [tx])
        check_near_torch(ggx, tggx, f"{name}''")


# ---- kiln.jit -----------------------------------------------------------------------------------


@pytest.mark.parametrize("level", ["O0", "O1"])
def test_kiln_jit_equals_eager(level, rng):
    # None of the four has a vector kernel: the fusion pass leaves them to their own kernels
    # between fused chains.
    a = rng.uniform(0.2, 0.9, (5, 7)).astype(np.float32)

    def f(x):
        y = M.lgamma(x + 1.0) * 2.0 + M.digamma(x).exp()
        return y + M.polygamma(1, x) * 0.5 - M.erfinv(x * 0.9), M.polygamma(3, x + 2.0)

    x = kiln.tensor(a)
    jitted = kiln.jit(f, backend="kiln_cpu", jit_level=level)
    for got, want in zip(jitted(x), f(x)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)
    # The gradient rules trace too: d/dx sum(digamma(x) + erfinv(x)).
    grad = kiln.jit(kiln.grad(lambda v: (M.digamma(v) + M.erfinv(v)).sum()), backend="kiln_cpu",
                    jit_level=level)
    eager = M.polygamma(1, x) + M.erfinv(x).square().exp() * (math.sqrt(math.pi) / 2)
    np.testing.assert_allclose(grad(x).numpy(), eager.numpy(), rtol=1e-5)
