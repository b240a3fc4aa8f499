"""The gradient rule of every differentiable built-in op, checked with kiln.testing.gradcheck
(autograd's gradients against central finite differences, in float64), over shapes, broadcasting
and attributes; and a census: every registered op is differentiable or says it is not."""

import subprocess
import sys

import numpy as np
import pytest

import kiln
from conftest import raises

mint = kiln.mint
gradcheck = kiln.testing.gradcheck


def r(*shape, low=-2.0, high=2.0, seed=None, grad=True):
    rng = np.random.default_rng(seed if seed is not None else abs(hash((shape, low))) % 2**32)
    t = kiln.tensor(rng.uniform(low, high, size=shape), dtype=kiln.float64)
    return t.requires_grad_() if grad else t


def away(*shape, gap=0.3):
    """Random values with |v| >= gap (away from kinks at 0)."""
    rng = np.random.default_rng(len(shape) * 7 + 1)
    v = rng.uniform(gap, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    return kiln.tensor(v, dtype=kiln.float64).requires_grad_()


def distinct(*shape):
    """A permutation of well separated values (no ties for max/min/sort-like ops)."""
    n = int(np.prod(shape))
    v = np.random.default_rng(n).permutation(n).reshape(shape) * 0.37 - n * 0.15
    return kiln.tensor(v, dtype=kiln.float64).requires_grad_()


def positive(*shape):
    return r(*shape, low=0.3, high=2.0)


def index(values, dtype=kiln.int64):
    return kiln.tensor(np.asarray(values), dtype=dtype)


UNARY = {
    "neg": (mint.neg, r), "abs": (mint.abs, away), "exp": (mint.exp, r),
    "expm1": (mint.expm1, r), "log": (mint.log, positive), "log1p": (mint.log1p, positive),
    "log2": (mint.log2, positive), "sqrt": (mint.sqrt, positive), "rsqrt": (mint.rsqrt, positive),
    "reciprocal": (mint.reciprocal, away), "square": (mint.square, r), "sin": (mint.sin, r),
    "cos": (mint.cos, r), "tan": (lambda x: mint.tan(x * 0.5), r), "tanh": (mint.tanh, r),
    "sigmoid": (mint.sigmoid, r), "relu": (mint.relu, away), "silu": (mint.silu, r),
    "erf": (mint.erf, r), "gelu": (mint.gelu, r),
    "gelu_tanh": (lambda x: mint.gelu(x, approximate="tanh"), r),
    "clamp": (lambda x: mint.clamp(x, -0.5, 0.7), away),
    "clamp_min": (lambda x: mint.clamp(x, min=0.1), away),
    "floor": (mint.floor, away), "ceil": (mint.ceil, away), "round": (mint.round, away),
    "sign": (mint.sign, away),
    "erfc": (mint.erfc, r), "exp2": (mint.exp2, r), "atan": (mint.atan, r),
    "asin": (mint.asin, lambda *s: r(*s, low=-0.8, high=0.8)),
    "acos": (mint.acos, lambda *s: r(*s, low=-0.8, high=0.8)),
    "sinh": (mint.sinh, r), "cosh": (mint.cosh, r), "asinh": (mint.asinh, r),
    "acosh": (mint.acosh, lambda *s: r(*s, low=1.2, high=3.0)),
    "atanh": (mint.atanh, lambda *s: r(*s, low=-0.8, high=0.8)),
}
# The rows whose rules are smooth compositions of ops: their second derivatives are checked too.
SECOND_ORDER = ["erfc", "exp2", "atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh",
                "atanh"]


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("shape", [(), (5,), (2, 3)])
def test_unary(name, shape):
    fn, make = UNARY[name]
    assert gradcheck(fn, (make(*shape),))


@pytest.mark.parametrize("name", SECOND_ORDER)
def test_unary_second_order(name):
    fn, make = UNARY[name]
    assert kiln.testing.gradgradcheck(fn, (make(2, 3),))


def test_unary_on_a_non_contiguous_input():
    x = r(3, 4)
    assert gradcheck(lambda v: mint.sigmoid(v.T) * 2.0, (x,))


BINARY = {
    "add": (mint.add, r, r), "sub": (mint.sub, r, r), "mul": (mint.mul, r, r),
    "div": (mint.div, r, away), "pow": (mint.pow, positive, r),
    "maximum": (mint.maximum, distinct, lambda *s: distinct(*s) * 0.5 + 0.1),
    "minimum": (mint.minimum, distinct, lambda *s: distinct(*s) * 0.5 + 0.1),
    "atan2": (mint.atan2, r, away), "fmod": (mint.fmod, r, away),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", [((2, 3), (2, 3)), ((2, 3), (3,)), ((4, 1), (1, 3)),
                                    ((), (2, 2))])
def test_binary_with_broadcasting(name, shapes):
    fn, make_a, make_b = BINARY[name]
    a, b = make_a(*shapes[0]), make_b(*shapes[1])
    if name in ("maximum", "minimum"):
        b = b.detach().requires_grad_()
    assert gradcheck(fn, (a, b))


def test_binary_with_python_numbers_and_mixed_dtypes():
    x = r(2, 3)
    assert gradcheck(lambda v: 3.0 * v - 1.5, (x,))
    assert gradcheck(lambda v: mint.pow(v * v + 1.0, 1.5), (x,))
    f32 = kiln.tensor(np.ones((2, 3)), dtype=kiln.float32)
    y = mint.mul(x, f32)  # float64 result: the float32 operand is not differentiated
    assert y.dtype == kiln.float64
    (g,) = kiln.autograd.grad(mint.sum(y), x)
    assert g.dtype == kiln.float64


def test_where_and_masked_fill():
    c = kiln.tensor(np.array([[True, False, True], [False, True, False]]))
    assert gradcheck(lambda a, b: mint.where(c, a, b), (r(2, 3), r(3)))
    assert gradcheck(lambda a: mint.masked_fill(a, c, 0.5), (r(2, 3),))
    # A 0-d tensor value that requires grad gets the gradient where the mask is true.
    assert gradcheck(lambda a, v: mint.masked_fill(a, c, v), (r(2, 3), r()))


def test_cast_round_trip():
    assert gradcheck(lambda v: v.to(kiln.float32).to(kiln.float64) * 2.0, (r(4),), eps=1e-3,
                     atol=1e-3)


def test_gradcheck_refuses_16_bit_floats():
    # A step of eps (1e-6) is lost in float16's rounding: the differences would be zero, so a
    # 16-bit output or checked input is refused rather than silently skipped or failed.
    x = r(3)
    with raises(kiln.DTypeError, match="output 0 of fn is float16; expected float64"):
        gradcheck(lambda v: v.to(kiln.float16), (x,))
    with raises(kiln.DTypeError, match="output 1 of fn is bfloat16"):
        gradcheck(lambda v: (v * 2.0, v.to(kiln.bfloat16)), (x,))
    half = kiln.tensor([0.5, 1.5], dtype=kiln.float16)
    with raises(kiln.DTypeError, match="input 0 is float16"):
        gradcheck(lambda h: h.to(kiln.float64), (half.requires_grad_(),))
    # One that is not checked (no requires_grad) is passed along as any other argument.
    assert gradcheck(lambda v, h: v * h.to(kiln.float64)[0], (x, half.detach()))
    with raises(kiln.DTypeError, match="output 0 of fn is bfloat16"):
        kiln.testing.gradgradcheck(lambda v: (v * v).to(kiln.bfloat16), (x,))


def test_gradcheck_error_prints_plain_numbers():
    # At relu's kink autograd gives 0 and the central difference half the cotangent.
    x = kiln.tensor([0.0], dtype=kiln.float64).requires_grad_()
    with pytest.raises(kiln.testing.GradcheckError) as info:
        gradcheck(mint.relu, (x,))
    assert "autograd gives 0.0, finite differences 0.06" in str(info.value)


REDUCTIONS = {
    "sum": lambda x: mint.sum(x), "sum_dim": lambda x: mint.sum(x, dim=1),
    "sum_keep": lambda x: mint.sum(x, dim=(0, 2), keepdim=True),
    "mean": lambda x: mint.mean(x, dim=-1), "mean_all": lambda x: mint.mean(x),
    "prod": lambda x: mint.prod(x, dim=1), "amax": lambda x: mint.amax(x, dim=2),
    "amin": lambda x: mint.amin(x, dim=(0, 1), keepdim=True), "max_all": lambda x: mint.max(x),
    "max_dim": lambda x: mint.max(x, dim=1)[0], "min_dim": lambda x: mint.min(x, 2, True)[0],
    "var": lambda x: mint.var(x, dim=1), "std": lambda x: mint.std(x, dim=2, correction=0),
    "var_all": lambda x: mint.var(x),
    "logsumexp": lambda x: mint.logsumexp(x, dim=1), "cumsum": lambda x: mint.cumsum(x, dim=1),
    "cumsum_reverse": lambda x: mint.cumsum(x, dim=2, reverse=True),
    "softmax": lambda x: mint.softmax(x, dim=-1), "log_softmax": lambda x: mint.log_softmax(x, 1),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions(name):
    x = distinct(2, 3, 4) if name[:3] in ("max", "min", "ama", "ami") else r(2, 3, 4)
    assert gradcheck(REDUCTIONS[name], (x,))


@pytest.mark.parametrize("dim", [0, 1])
def test_prod_at_zeros_to_the_second_derivative(dim):
    # Slices with no zero, one, two and three: a product is linear in each element, so central
    # differences are exact and the second derivative (the product of the rest, nonzero only for
    # the two zeros of a slice with two) is checked too.
    rows = [[0.5, -1.5, 2.0, 1.25], [0.0, -1.5, 2.0, 1.25], [0.0, -1.5, 0.0, 1.25],
            [0.0, 0.0, 0.0, 1.25]]
    x = kiln.tensor(np.array(rows) if dim == 1 else np.array(rows).T).requires_grad_()
    assert gradcheck(lambda a: mint.prod(a, dim=dim), (x,))
    assert kiln.testing.gradgradcheck(lambda a: mint.prod(a, dim=dim), (x,))
    # By hand, in the slice with two zeros: d/dx of (d prod / d its first zero) is the product of
    # the other elements at the second zero, 0 elsewhere.
    (g,) = kiln.autograd.grad(mint.sum(mint.prod(x, dim=dim)), x, create_graph=True)
    (h,) = kiln.autograd.grad(g[2, 0] if dim == 1 else g[0, 2], x)
    expected = np.zeros((4, 4))
    expected[2, 2] = -1.5 * 1.25
    np.testing.assert_array_equal(h.numpy(), expected)


@pytest.mark.parametrize("correction", [0, 1])
def test_std_gradient_is_zero_where_std_is(correction):
    # Every element of a row equal: std 0, and gradient 0 there (0 * inf was NaN), as in PyTorch.
    a = np.array([[1.5, 1.5, 1.5], [1.0, 2.0, 4.0]])
    x = kiln.tensor(a).requires_grad_()
    mint.std(x, 1, correction=correction).sum().backward()
    centered = a - a.mean(axis=1, keepdims=True)
    std = np.sqrt((centered**2).sum(axis=1, keepdims=True) / (3 - correction))
    expected = np.where(std == 0, 0.0, centered / ((3 - correction) * np.where(std == 0, 1, std)))
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12, atol=0)
    one = kiln.tensor(np.array([2.0])).requires_grad_()
    mint.std(one, correction=0).backward()
    np.testing.assert_array_equal(one.grad.numpy(), [0.0])


@pytest.mark.parametrize("name, reduce, expected", [
    ("amax", lambda x: mint.amax(x, dim=1), [[0, 0.5, 0.5], [1, 0, 1], [0, 3, 0]]),
    ("amin", lambda x: mint.amin(x, dim=1), [[1, 0, 0], [1, 0, 1], [3, 0, 0]]),
    ("max_dim", lambda x: mint.max(x, dim=1)[0], [[0, 1, 0], [2, 0, 0], [0, 3, 0]]),
])
def test_extremum_gradients_go_to_ties_and_to_nans(name, reduce, expected):
    # Ties share the gradient (amax / amin) or the first takes it (max along a dim, as PyTorch);
    # a NaN result sends it to the NaNs that made it, never to nothing.
    nan = float("nan")
    x = kiln.tensor([[1.0, 3.0, 3.0], [nan, 2.0, nan], [0.0, 5.0, 4.0]]).requires_grad_()
    mint.sum(reduce(x) * kiln.tensor([1.0, 2.0, 3.0])).backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.array(expected, dtype=np.float32))


def test_matmul_family():
    assert gradcheck(mint.matmul, (r(3, 4), r(4, 2)))
    assert gradcheck(mint.matmul, (r(2, 3, 4), r(4, 5)))      # batched by broadcast
    assert gradcheck(mint.matmul, (r(2, 1, 3, 4), r(3, 4, 2)))
    assert gradcheck(mint.matmul, (r(4), r(4, 3)))            # 1-d operands, as NumPy
    assert gradcheck(mint.matmul, (r(3, 4), r(4)))
    assert gradcheck(mint.matmul, (r(4), r(4)))
    assert gradcheck(mint.bmm, (r(2, 3, 4), r(2, 4, 2)))
    assert gradcheck(mint.linear, (r(3, 4), r(2, 4), r(2)))
    assert gradcheck(mint.linear, (r(2, 3, 4), r(5, 4)))
    assert gradcheck(lambda b, x, w: mint.addmm(b, x, w, beta=0.5, alpha=2.0),
                     (r(3, 2), r(3, 4), r(4, 2)))


def test_norms():
    assert gradcheck(lambda x, w, b: mint.layer_norm(x, (4,), w, b), (r(3, 4), r(4), r(4)))
    assert gradcheck(lambda x: mint.layer_norm(x, (2, 4)), (r(3, 2, 4),))
    assert gradcheck(lambda x, w: mint.rms_norm(x, (4,), w), (r(3, 4), r(4)))
    assert gradcheck(lambda x: mint.rms_norm(x, (3, 4)), (r(2, 3, 4),))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_second_order(approximate):
    # Through GeluBackward's own rule, for either form.
    gelu = lambda x: mint.gelu(x, approximate=approximate)  # noqa: E731
    assert kiln.testing.gradgradcheck(gelu, (r(3, 4, low=-4.0, high=4.0),))
    assert kiln.testing.gradgradcheck(gelu, (r(5),))
    # gelu'' is 0, not nan (0 * inf), for huge and infinite x, in float32 and float16.
    for dtype in (kiln.float32, kiln.float16):
        x = kiln.tensor([1e4, -1e4, 300.0, float("inf"), -float("inf")], dtype=dtype)
        x.requires_grad_()
        (dx,) = kiln.autograd.grad([mint.sum(gelu(x))], [x], create_graph=True)
        (ddx,) = kiln.autograd.grad([mint.sum(dx)], [x])
        np.testing.assert_array_equal(dx.to(kiln.float64).numpy(), [1, 0, 1, 1, 0])
        np.testing.assert_array_equal(ddx.to(kiln.float64).numpy(), [0, 0, 0, 0, 0])


def gelu_derivative(x, approximate):
    """gelu'(x) in float64 from the textbook formulas: Phi(x) + x phi(x) for the erf form,
    0.5 (1 + t) + 0.5 x (1 - t^2) u' with t = tanh(u) for the tanh form; 1 and 0 at +-inf."""
    from math import erfc
    xf = np.where(np.isinf(x), 0.0, x)
    if approximate == "tanh":
        k = np.sqrt(2 / np.pi)
        th = np.tanh(k * (xf + 0.044715 * xf ** 3))
        d = 0.5 * (1 + th) + 0.5 * xf * (1 - th ** 2) * k * (1 + 3 * 0.044715 * xf ** 2)
    else:
        d = 0.5 * np.vectorize(erfc)(-xf / np.sqrt(2)) + xf * np.exp(-0.5 * xf ** 2) / np.sqrt(
            2 * np.pi)
    return np.where(np.isinf(x), (x > 0).astype(np.float64), d)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.bfloat16, kiln.float16],
                         ids=str)
def test_gelu_gradient_matches_numpy(dtype, approximate):
    rng = np.random.default_rng(6)
    x = np.concatenate([rng.uniform(-8, 8, 4000),
                        [0.0, -0.75, 12.0, -12.0, 25.0, -25.0, np.inf, -np.inf]])
    g = rng.normal(size=x.shape)
    t = kiln.tensor(x, dtype=dtype).requires_grad_()
    xr = t.detach().to(kiln.float64).numpy()  # x as the dtype holds it
    gr = kiln.tensor(g, dtype=dtype).to(kiln.float64).numpy()
    want = gr * gelu_derivative(xr, approximate)
    mint.gelu(t, approximate=approximate).backward(kiln.tensor(g, dtype=dtype))
    assert t.grad.dtype == dtype
    tol = {kiln.float32: 1e-6, kiln.float64: 1e-13, kiln.bfloat16: 1e-2, kiln.float16: 1e-3}[dtype]
    np.testing.assert_allclose(t.grad.to(kiln.float64).numpy(), want,
                               atol=tol * max(1.0, np.abs(want).max()), rtol=tol)


def test_silu_second_order():
    # Through SiluBackward's own rule; finite (0, not nan) at huge and infinite x in float32 and
    # float16, where silu' is 1 or 0.
    assert kiln.testing.gradgradcheck(mint.silu, (r(3, 4, low=-6.0, high=6.0),))
    for dtype in (kiln.float32, kiln.float16):
        x = kiln.tensor([1e4, -1e4, 300.0, float("inf"), -float("inf")], dtype=dtype)
        x.requires_grad_()
        (dx,) = kiln.autograd.grad([mint.sum(mint.silu(x))], [x], create_graph=True)
        (ddx,) = kiln.autograd.grad([mint.sum(dx)], [x])
        np.testing.assert_array_equal(dx.to(kiln.float64).numpy(), [1, 0, 1, 1, 0])
        np.testing.assert_array_equal(ddx.to(kiln.float64).numpy(), [0, 0, 0, 0, 0])


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_softmax_second_order(log):
    # Through SoftmaxBackward's own rule.
    f = mint.log_softmax if log else mint.softmax
    assert kiln.testing.gradgradcheck(lambda x: f(x, 1), (r(3, 4),))
    assert kiln.testing.gradgradcheck(lambda x: f(x, 0), (r(3, 2),))


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.bfloat16], ids=str)
@pytest.mark.parametrize("dim", [-1, 1, 0])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_softmax_gradients_match_numpy(dtype, dim, log):
    rng = np.random.default_rng(7)
    x = rng.normal(size=(6, 64, 5)) * 3
    g = rng.normal(size=x.shape)
    t = kiln.tensor(x, dtype=dtype).requires_grad_()
    y = (mint.log_softmax if log else mint.softmax)(t, dim)
    y.backward(kiln.tensor(g, dtype=dtype))
    xr = t.detach().to(kiln.float64).numpy()
    gr = kiln.tensor(g, dtype=dtype).to(kiln.float64).numpy()
    e = np.exp(xr - xr.max(dim, keepdims=True))
    sm = e / e.sum(dim, keepdims=True)
    if log:
        want = gr - sm * gr.sum(dim, keepdims=True)
    else:
        want = sm * (gr - (gr * sm).sum(dim, keepdims=True))
    tol = {kiln.float32: 1e-5, kiln.float64: 1e-12, kiln.bfloat16: 3e-2}[dtype]
    assert t.grad.dtype == dtype
    np.testing.assert_allclose(t.grad.to(kiln.float64).numpy(), want, atol=tol * np.abs(want).max())


def test_norms_second_order():
    # Through LayerNormBackward / RMSNormBackward's own rules.
    gradgradcheck = kiln.testing.gradgradcheck
    assert gradgradcheck(lambda x, w, b: mint.layer_norm(x, (4,), w, b), (r(3, 4), r(4), r(4)))
    assert gradgradcheck(lambda x: mint.layer_norm(x, (2, 3)), (r(2, 2, 3),))
    assert gradgradcheck(lambda x, w: mint.rms_norm(x, (4,), w), (r(3, 4), r(4)))


@pytest.mark.parametrize("frozen", [False, True], ids=["trained", "frozen_affine"])
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.bfloat16], ids=str)
@pytest.mark.parametrize("centered", [True, False], ids=["layer_norm", "rms_norm"])
def test_norm_gradients_match_numpy(dtype, centered, frozen):
    # Many rows (six partial-sum blocks of the fused backward kernel) against NumPy's formulas.
    rng = np.random.default_rng(5)
    x, w, b = rng.normal(size=(40, 64, 80)), rng.normal(size=80), rng.normal(size=80)
    g = rng.normal(size=x.shape)
    xm = x - x.mean(-1, keepdims=True) if centered else x
    rstd = 1 / np.sqrt((xm ** 2).mean(-1, keepdims=True) + 1e-5)
    xhat = xm * rstd
    gh = g * w
    inner = gh - xhat * (gh * xhat).mean(-1, keepdims=True)
    if centered:
        inner -= gh.mean(-1, keepdims=True)
    want = {"x": rstd * inner, "w": (g * xhat).sum((0, 1)), "b": g.sum((0, 1))}
    tx = kiln.tensor(x, dtype=dtype).requires_grad_()
    # A frozen weight and bias: the backward op skips their sums (affine_grads), x's is the same.
    tw, tb = (kiln.tensor(a, dtype=dtype).requires_grad_(not frozen) for a in (w, b))
    y = (mint.layer_norm(tx, (80,), tw, tb, eps=1e-5) if centered
         else mint.rms_norm(tx, (80,), tw, eps=1e-5))
    y.backward(kiln.tensor(g, dtype=dtype))
    tol = {kiln.float32: 2e-4, kiln.float64: 1e-10, kiln.bfloat16: 6e-2}[dtype]
    got = {"x": tx.grad}
    if frozen:
        assert tw.grad is None and tb.grad is None
    else:
        got["w"] = tw.grad
        if centered:
            got["b"] = tb.grad
    for name, grad in got.items():
        assert grad.dtype == dtype
        scale = np.abs(want[name]).max()
        np.testing.assert_allclose(grad.to(kiln.float64).numpy() / scale, want[name] / scale,
                                   atol=tol, err_msg=name)


def test_layer_norm_with_part_of_its_affine_frozen():
    # The rule asks its backward op for d weight / d bias whenever either is needed
    # (affine_grads); each case matches the gradients of the fully trained layer.
    rng = np.random.default_rng(6)
    x, w, b, g = (rng.normal(size=s) for s in ((6, 300), (300,), (300,), (6, 300)))

    def grads(weight_grad, bias_grad, with_weight=True):
        tx = kiln.tensor(x).requires_grad_()
        tw = kiln.tensor(w).requires_grad_(weight_grad) if with_weight else None
        tb = kiln.tensor(b).requires_grad_(bias_grad)
        mint.layer_norm(tx, (300,), tw, tb).backward(kiln.tensor(g))
        return tx.grad, tw.grad if tw is not None else None, tb.grad

    full = grads(True, True)
    for weight_grad, bias_grad in ((False, True), (True, False), (False, False)):
        got = grads(weight_grad, bias_grad)
        np.testing.assert_allclose(got[0].numpy(), full[0].numpy(), rtol=1e-12, atol=1e-12)
        assert (got[1] is not None) == weight_grad and (got[2] is not None) == bias_grad
        if weight_grad:
            np.testing.assert_allclose(got[1].numpy(), full[1].numpy(), rtol=1e-12)
        if bias_grad:
            np.testing.assert_allclose(got[2].numpy(), full[2].numpy(), rtol=1e-12)
    no_weight = grads(False, True, with_weight=False)  # bias only, no weight
    assert no_weight[2] is not None
    np.testing.assert_allclose(no_weight[2].numpy(), full[2].numpy(), rtol=1e-12)
    # Second order with a frozen weight and bias.
    frozen_w, frozen_b = kiln.tensor(w[:4]), kiln.tensor(b[:4])
    assert kiln.testing.gradgradcheck(lambda v: mint.layer_norm(v, (4,), frozen_w, frozen_b),
                                      (r(3, 4),))


@pytest.mark.parametrize("kwargs", [{}, {"stride": 2, "padding": 1}, {"dilation": 2},
                                    {"groups": 2, "padding": 1}])
def test_conv2d(kwargs):
    groups = kwargs.get("groups", 1)
    x, w, b = r(2, 4, 5, 5), r(3 * groups, 4 // groups, 3, 3), r(3 * groups)
    assert gradcheck(lambda x, w, b: mint.conv2d(x, w, b, **kwargs), (x, w, b))


def test_pools():
    x = distinct(1, 2, 5, 5)
    assert gradcheck(lambda v: mint.max_pool2d(v, 2), (x,))
    assert gradcheck(lambda v: mint.max_pool2d(v, 3, stride=2, padding=1), (x,))
    # Second derivatives: max pooling's backward and the gather at its maxima are each other's
    # rule, so double backward runs (in x the second derivative is zero)...
    assert kiln.testing.gradgradcheck(lambda v: mint.max_pool2d(v, 2), (x,))
    assert kiln.testing.gradgradcheck(lambda v: mint.max_pool2d(v, 3, stride=2, padding=1), (x,))
    # ...and in the output gradient, where backward is linear, the gather's values are checked
    # against finite differences through the autograd engine, to third order.
    for kwargs, out in (({"kernel_size": 2}, (1, 2, 2, 2)),
                        ({"kernel_size": 3, "stride": 2, "padding": 1}, (1, 2, 3, 3))):
        def dx(gy, kwargs=kwargs):
            return kiln.autograd.grad(mint.max_pool2d(x, **kwargs), x, gy, create_graph=True)[0]
        assert gradcheck(dx, (r(*out),))
        assert kiln.testing.gradgradcheck(dx, (r(*out),))
    assert gradcheck(lambda v: mint.avg_pool2d(v, 2), (r(1, 2, 4, 4),))
    assert gradcheck(lambda v: mint.avg_pool2d(v, 3, stride=2, padding=1), (r(1, 2, 5, 5),))


def test_embedding_weight():
    ids = index([[0, 2, 2], [3, 1, 0]])
    assert gradcheck(lambda w: mint.embedding(ids, w), (r(4, 3),))


def test_losses():
    target = index([1, 0, 3])
    for reduction in ("mean", "sum", "none"):
        assert gradcheck(lambda z: mint.cross_entropy(z, target, reduction=reduction), (r(3, 4),))
        assert gradcheck(lambda z: mint.nll_loss(mint.log_softmax(z, 1), target,
                                                 reduction=reduction), (r(3, 4),))
        assert gradcheck(lambda a, b: mint.mse_loss(a, b, reduction=reduction), (r(3, 4), r(3, 4)))
    ignored = index([1, -100, 3])
    assert gradcheck(lambda z: mint.cross_entropy(z, ignored), (r(3, 4),))
    assert gradcheck(lambda z: mint.cross_entropy(z, target, label_smoothing=0.1), (r(3, 4),))
    # Class dim 1 of a 3-d input, an ignored position, and the second order.
    spatial = index([[1, -100, 0], [3, 2, 2]])
    assert gradcheck(lambda z: mint.cross_entropy(z, spatial), (r(2, 4, 3),))
    assert gradcheck(lambda z: mint.nll_loss(z, spatial, reduction="sum"), (r(2, 4, 3),))
    assert kiln.testing.gradgradcheck(lambda z: mint.cross_entropy(z, ignored), (r(3, 4),))


def test_dropout_gradient_is_its_mask():
    x = r(50)
    kiln.manual_seed(3)
    y = mint.dropout(x, p=0.4)
    (g,) = kiln.autograd.grad(mint.sum(y * 3.0), x)
    kept = y.detach().numpy() != 0
    np.testing.assert_allclose(g.numpy(), np.where(kept, 3.0 / 0.6, 0.0), rtol=1e-12)


SHAPE_OPS = {
    "reshape": lambda x: mint.reshape(x, (4, 3)), "transpose": lambda x: mint.transpose(x, 0, 1),
    "permute": lambda x: mint.permute(x, (1, 0)), "expand": lambda x: mint.expand(x[None], (2, 3, 4)),
    "squeeze": lambda x: mint.squeeze(x[:, None]), "unsqueeze": lambda x: mint.unsqueeze(x, 1),
    "flatten": lambda x: mint.flatten(x), "contiguous": lambda x: mint.contiguous(x.T),
    "cat": lambda x: mint.cat([x, x * 2.0], dim=1), "stack": lambda x: mint.stack([x, x], 0),
    "split": lambda x: mint.split(x, 2, dim=1)[1], "chunk": lambda x: mint.chunk(x, 3, 0)[2],
    "index_select": lambda x: mint.index_select(x, 1, index([3, 0, 3])),
    "gather": lambda x: mint.gather(x, 1, index([[0, 0], [3, 1], [2, 2]])),
    "scatter": lambda x: mint.scatter(x, 1, index([[0], [3], [1]]), x[:, :1] * 5.0),
    "pad": lambda x: mint.pad(x, (1, 2)), "tril": lambda x: mint.tril(x),
    "pad_circular": lambda x: mint.pad(x, (4, 3, 0, 2), "circular"),
    "pad_reflect": lambda x: mint.pad(x, (3, 1), "reflect"),
    "triu": lambda x: mint.triu(x, 1), "getitem_basic": lambda x: x[1:, ::2],
    "getitem_int": lambda x: x[index([2, 0, 2])], "getitem_mask": lambda x: x[x.detach() > 0],
    "select": lambda x: x.select(1, 2), "narrow": lambda x: x.narrow(1, 1, 2),
    "view": lambda x: x.view(2, 6), "clone": lambda x: x.clone(),
}


@pytest.mark.parametrize("name", sorted(SHAPE_OPS))
def test_shape_and_index_ops(name):
    assert gradcheck(SHAPE_OPS[name], (r(3, 4),))


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16],
                         ids=lambda d: d.name)
def test_relu_gradient_passes_at_nan_as_pytorch(dtype):
    # x <= 0 ? 0 : g (PyTorch's threshold_backward): NaN passes g; it was 0. Eager, and the
    # jit's fused kernel.
    x = kiln.tensor([np.nan, -1.0, 0.0, 2.0, -0.0] * 7, dtype=dtype).requires_grad_()
    mint.sum(mint.relu(x) * 3.0).backward()
    want = [3.0, 0.0, 0.0, 3.0, 0.0] * 7
    assert x.grad.float().tolist() == want
    traced = kiln.jit(kiln.grad(lambda v: mint.sum(mint.relu(v) * 3.0)))
    assert traced(x.detach()).float().tolist() == want


def test_advanced_index_gradient_with_empty_trailing_dims():
    # The gradient's rows were reshaped as [-1, 0], which no size infers.
    for key in [([0, 1], [0, 1]), ([0, 1], [0, 1], slice(0, 0))]:
        x = kiln.tensor(np.ones((2, 3, 0))).requires_grad_()
        mint.sum(x[key]).backward()
        assert x.grad.shape == (2, 3, 0)


# Ops without tensor inputs to differentiate: factories and random draws.
NO_INPUTS = {"Arange", "Empty", "Eye", "Full", "Linspace", "Ones", "Zeros", "RandUniform",
             "RandNormal", "RandInt", "RandPerm"}
# Ops without a rule on purpose: FusedElementwise is made by kiln_cpu's fusion pass from a graph
# that is already differentiated.
WITHOUT_RULE = {"FusedElementwise"}


def test_every_op_is_differentiable_or_says_it_is_not():
    # In a fresh interpreter: the suite's other tests register custom ops of their own.
    code = ("import kiln; print(' '.join(n for n in kiln.ops.list_ops() "
            "if kiln.ops.op_gradient(n) == 'missing'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    missing = set(done.stdout.split()) - NO_INPUTS - WITHOUT_RULE
    assert missing == set()
    for name in ("Eq", "Lt", "LogicalAnd", "ArgMax"):
        assert kiln.ops.op_gradient(name) == "not differentiable"
    assert kiln.ops.op_gradient("Mul") == "rule"
    with raises(kiln.KilnValueError):
        kiln.ops.op_gradient("NoSuchOp")


def test_non_differentiable_outputs_do_not_require_grad():
    x = r(3)
    assert not (x > 0).requires_grad
    assert not mint.argmax(x).requires_grad
    assert mint.max(x, dim=0)[0].requires_grad


@pytest.mark.parametrize("op", ["var", "std"])
def test_float16_var_and_std_gradients_over_a_million_elements(op):
    # The gradient's factor g * 2 / (n - 1) (var) or g / (std * (n - 1)) (std) is subnormal in
    # float16 at this size, and std * (n - 1) overflows it: the factors are formed in float32.
    rng = np.random.default_rng(12)
    x = (rng.standard_normal(1_000_001) * 2).astype(np.float16)
    xk = kiln.tensor(x).requires_grad_()
    y = getattr(mint, op)(xk)
    (gx,) = kiln.autograd.grad(y, [xk], kiln.tensor(np.float16(1.0)))
    x64 = x.astype(np.float64)
    centered = (x64 - x64.mean()).astype(np.float16).astype(np.float64)  # as the rule rounds it
    factor = 2.0 / (x.size - 1) if op == "var" else 1.0 / (x64.std(ddof=1) * (x.size - 1))
    want = centered * factor
    got = gx.numpy().astype(np.float64)
    assert gx.dtype == kiln.float16
    # Within half an ulp of the float16 result, subnormals included, plus float32's part.
    assert np.all(np.abs(got - want) <= 2.0**-25 + 2.0**-11 * np.abs(want)), np.max(np.abs(got - want))


def test_pow_gradients_keep_a_python_number_in_float64():
    x = np.array([0.5, 3.0, 1e10], np.float64)
    xk = kiln.tensor(x).requires_grad_()
    (gx,) = kiln.autograd.grad(mint.sum(mint.pow(xk, 0.1)), [xk])
    np.testing.assert_allclose(gx.numpy(), 0.1 * x**-0.9, rtol=1e-14)
    e = np.array([0.5, 3.0, -7.25], np.float64)
    ek = kiln.tensor(e).requires_grad_()
    (ge,) = kiln.autograd.grad(mint.sum(mint.pow(2.1, ek)), [ek])
    np.testing.assert_allclose(ge.numpy(), 2.1**e * np.log(2.1), rtol=1e-14)
