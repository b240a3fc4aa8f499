"""PyTorch's elementwise helpers composed in kiln/mint/_pointwise.py (addcmul, addcdiv,
nan_to_num, logit, frac, isnan / isinf / isfinite / isposinf / isneginf) and their Tensor
methods: values against NumPy over dtypes and broadcasting, special values, gradients by finite
differences and in closed form, kiln.jit against eager, PyTorch where it is installed, and the
argument errors."""

import numpy as np
import pytest

import kiln
from conftest import FLOAT_DTYPES, assert_close, numpy_dtype, random_array, raises, t
from kiln.testing import gradcheck

mint = kiln.mint
FLOATS = [kiln.float32, kiln.float64]
SPECIAL = np.array([np.nan, np.inf, -np.inf, 1.5, -2.25, 0.0, -0.0, 3.0, 0.75])


def values(shape, dtype, rng, low=-3.0, high=3.0):
    return kiln.tensor(random_array(shape, dtype, rng, low, high), dtype=dtype)


def leaf(rng, *shape):
    return kiln.tensor(rng.standard_normal(shape)).requires_grad_()


def f64(x):
    return x.numpy().astype(np.float64)


# ------------------------------------------------------------------------------------------------
# addcmul, addcdiv


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [kiln.int32, kiln.int64])
def test_addcmul_broadcasts_the_three_tensors(dtype, rng):
    x, a, b = values((3, 1), dtype, rng), values((4,), dtype, rng), values((3, 4), dtype, rng)
    value = 2 if not dtype.is_floating_point else 0.5
    want = f64(x) + value * f64(a) * f64(b)
    for got in (mint.addcmul(x, a, b, value=value), x.addcmul(a, b, value=value)):
        assert got.dtype == dtype and got.shape == (3, 4)
        assert_close(got, want.astype(numpy_dtype(dtype)), dtype)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_addcdiv_broadcasts_the_three_tensors(dtype, rng):
    x, a = values((3, 4), dtype, rng), values((1, 4), dtype, rng)
    b = values((3, 1), dtype, rng, 1.0, 3.0)
    want = f64(x) - 0.25 * f64(a) / f64(b)
    for got in (mint.addcdiv(x, a, b, value=-0.25), x.addcdiv(a, b, value=-0.25)):
        assert got.dtype == dtype
        assert_close(got, want.astype(numpy_dtype(dtype)), dtype)


def test_addc_promote_as_pytorch():
    got = mint.addcmul(t([1]), t([1.0]), t([2]))
    assert got.dtype == kiln.float64 and got.tolist() == [3.0]
    got = mint.addcdiv(t([1]), t([1.0], kiln.float32), t([2.0], kiln.float32))
    assert got.dtype == kiln.float32 and got.tolist() == [1.5]
    assert mint.addcmul(t([1.0]), t([2.0]), t([3.0]), value=True).tolist() == [7.0]


def test_addc_gradients(rng):
    x, a, b = leaf(rng, 2, 3), leaf(rng, 3), leaf(rng, 2, 1)
    gradcheck(lambda x, a, b: mint.addcmul(x, a, b, value=0.7), (x, a, b))
    gradcheck(lambda x, a, b: mint.addcdiv(x, a, b.abs() + 1.0, value=-1.5), (x, a, b))


# ------------------------------------------------------------------------------------------------
# nan_to_num


@pytest.mark.parametrize("dtype", FLOATS)
def test_nan_to_num_defaults_to_the_dtypes_extremes(dtype):
    x = t(SPECIAL, dtype)
    for got in (mint.nan_to_num(x), x.nan_to_num()):
        assert_close(got, np.nan_to_num(SPECIAL.astype(numpy_dtype(dtype))))
    assert_close(mint.nan_to_num(x, 1.0, 2.0, -3.0),
                 np.nan_to_num(SPECIAL, nan=1.0, posinf=2.0, neginf=-3.0).astype(x.numpy().dtype))


def test_nan_to_num_of_16_bit_floats():
    half = mint.nan_to_num(t(SPECIAL[:3], kiln.float16)).numpy()
    assert half.tolist() == [0.0, 65504.0, -65504.0]
    assert mint.nan_to_num(t(SPECIAL[:2], kiln.float16), posinf=1e10).numpy()[1] == np.inf
    brain = mint.nan_to_num(t(SPECIAL[:3], kiln.bfloat16), neginf=-1.0).to(kiln.float64)
    assert brain.tolist() == [0.0, 3.3895313892515355e38, -1.0]


@pytest.mark.parametrize("dtype", [kiln.int32, kiln.int64, kiln.bool_])
def test_nan_to_num_copies_integers(dtype, rng):
    x = values((5,), dtype, rng)
    got = mint.nan_to_num(x, nan=1.0)
    assert got.dtype == dtype and not got.shares_storage_with(x)
    np.testing.assert_array_equal(got.numpy(), x.numpy())


def test_nan_to_num_gradient_is_zero_at_replaced_elements():
    x = t(SPECIAL).requires_grad_()
    mint.nan_to_num(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.isfinite(SPECIAL).astype(np.float64))
    y = t(SPECIAL).clone()
    assert y.nan_to_num_(posinf=7.0) is y
    assert_close(y, np.nan_to_num(SPECIAL, posinf=7.0))


# ------------------------------------------------------------------------------------------------
# logit, frac


def logit_reference(x, eps=None):
    z = x.astype(np.float64)
    if eps is not None and eps >= 0:
        z = np.where(z < eps, eps, np.where(z > 1 - eps, 1 - eps, z))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(z / (1 - z))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("eps", [None, 0.0, 0.1, 0.7, -0.5])
def test_logit_with_and_without_eps(dtype, eps, rng):
    data = np.concatenate([[0.0, 1.0, 1.5, -0.5, 0.05], rng.uniform(0, 1, 10)])
    x = t(data, dtype)
    for got in (mint.logit(x, eps), x.logit(eps)):
        assert got.dtype == dtype
        assert_close(got, logit_reference(f64(x), eps), dtype)


@pytest.mark.parametrize("dtype", [kiln.int32, kiln.int64, kiln.bool_])
def test_logit_of_integers_is_float32(dtype):
    got = mint.logit(t([0, 1], dtype))
    assert got.dtype == kiln.float32 and got.tolist() == [-np.inf, np.inf]


def test_logit_gradient(rng):
    x = kiln.tensor(rng.uniform(0.2, 0.8, (2, 3))).requires_grad_()
    gradcheck(mint.logit, (x,))
    clamped = t([0.05, 0.5, 0.95]).requires_grad_()
    mint.logit(clamped, eps=0.1).sum().backward()
    assert_close(clamped.grad, np.array([0.0, 4.0, 0.0]))  # 1 / (x (1 - x)) inside, 0 outside
    y = t([0.25, 0.5])
    assert y.logit_() is y
    assert_close(y, logit_reference(np.array([0.25, 0.5])))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_frac_keeps_the_sign(dtype, rng):
    data = np.concatenate([SPECIAL, rng.uniform(-50, 50, 10)])
    x = t(data, dtype)
    with np.errstate(invalid="ignore"):
        want = f64(x) - np.trunc(f64(x))  # frac(inf) is NaN, as PyTorch's
    for got in (mint.frac(x), x.frac()):
        assert got.dtype == dtype
        assert_close(got, want, dtype)
    assert mint.frac(t([-2.5, -2.0], dtype)).tolist() == [-0.5, 0.0]  # +0.0, as PyTorch's


def test_frac_gradient_is_one(rng):
    x = leaf(rng, 2, 3)
    mint.frac(x * 4).sum().backward()
    assert_close(x.grad, np.full((2, 3), 4.0))
    y = t([1.25, -3.5])
    assert y.frac_() is y and y.tolist() == [0.25, -0.5]


# ------------------------------------------------------------------------------------------------
# Classification


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_classification_functions_are_numpys(dtype):
    x = t(SPECIAL, dtype)
    data = f64(x)
    for name in ("isnan", "isinf", "isfinite", "isposinf", "isneginf"):
        want = getattr(np, name)(data)
        np.testing.assert_array_equal(getattr(mint, name)(x).numpy(), want)
        np.testing.assert_array_equal(getattr(x, name)().numpy(), want)


@pytest.mark.parametrize("dtype", [kiln.int64, kiln.uint8, kiln.bool_])
def test_classification_of_integers(dtype, rng):
    x = values((4,), dtype, rng)
    for name, want in (("isnan", False), ("isinf", False), ("isfinite", True),
                       ("isposinf", False), ("isneginf", False)):
        got = getattr(mint, name)(x)
        assert got.dtype == kiln.bool_ and got.tolist() == [want] * 4


# ------------------------------------------------------------------------------------------------
# kiln.jit and PyTorch


def test_pointwise_functions_trace_under_jit(rng):
    def pointwise(x, y):
        return (mint.addcmul(x, y, y, value=0.5) + mint.addcdiv(x, y, y.abs() + 1)
                + mint.nan_to_num(x / 0.0) + mint.logit(x.sigmoid(), eps=0.1) + mint.frac(x)
                + mint.isposinf(x / 0.0).to(kiln.float32) + mint.isnan(x).to(kiln.float32))

    jitted = kiln.jit(pointwise)
    for _ in range(2):
        x, y = values((3, 4), kiln.float32, rng), values((3, 4), kiln.float32, rng)
        assert_close(jitted(x, y), pointwise(x, y).numpy())


def test_matches_torch(torch, rng):
    x, a, b = rng.standard_normal((3, 1)), rng.standard_normal(4), rng.standard_normal((3, 4))
    assert_close(mint.addcmul(t(x), t(a), t(b), value=0.3),
                 torch.addcmul(*map(torch.tensor, (x, a, b)), value=0.3).numpy())
    assert_close(mint.addcdiv(t(x), t(a), t(b), value=0.3),
                 torch.addcdiv(*map(torch.tensor, (x, a, b)), value=0.3).numpy())
    data = np.concatenate([SPECIAL, rng.uniform(-1, 2, 6)])
    assert_close(mint.nan_to_num(t(data)), torch.nan_to_num(torch.tensor(data)).numpy())
    for eps in (None, 0.2, 0.7):
        assert_close(mint.logit(t(data), eps), torch.logit(torch.tensor(data), eps).numpy())
    assert_close(mint.frac(t(data)), torch.frac(torch.tensor(data)).numpy())
    inside = rng.uniform(-0.2, 1.2, 8)
    kx, tx = t(inside).requires_grad_(), torch.tensor(inside, requires_grad=True)
    mint.logit(kx, eps=0.1).sum().backward()
    torch.logit(tx, eps=0.1).sum().backward()
    assert_close(kx.grad, tx.grad.numpy())


# ------------------------------------------------------------------------------------------------
# Errors

X = t([[1.0, 2.0], [3.0, 4.0]])
I = t([1, 2])
ERRORS = [
    (lambda: mint.addcmul(X, X, [1.0]), kiln.KilnTypeError, "tensor2 to be a kiln.Tensor"),
    (lambda: mint.addcmul(I, I, I, value=0.5), kiln.KilnTypeError,
     "integer result .int64. takes an integer value, got 0.5"),
    (lambda: mint.addcmul(X, X, X, value="2"), kiln.KilnTypeError, "value to be a real number"),
    (lambda: mint.addcmul(X, X, t([1.0, 2.0, 3.0])), kiln.ShapeError,
     r"addcmul: input \[2, 2\], tensor1 \[2, 2\] and tensor2 \[3\] do not broadcast"),
    (lambda: mint.addcmul(t([True]), t([True]), t([True])), kiln.DTypeError, "three bool"),
    (lambda: mint.addcdiv(X, I, I), kiln.DTypeError, "addcdiv: integer division"),
    (lambda: X.addcdiv(X, "x"), kiln.KilnTypeError, "tensor2 to be a kiln.Tensor"),
    (lambda: mint.nan_to_num(X, nan="0"), kiln.KilnTypeError, "nan to be a real number"),
    (lambda: mint.nan_to_num(I, posinf=[1]), kiln.KilnTypeError, "posinf to be a real number"),
    (lambda: mint.nan_to_num(np.zeros(2)), kiln.KilnTypeError, "input to be a kiln.Tensor"),
    (lambda: mint.logit(X, eps="0.1"), kiln.KilnTypeError, "eps to be a real number"),
    (lambda: I.clone().logit_(), kiln.DTypeError, "logit_"),
    (lambda: mint.frac(I), kiln.DTypeError, "frac: expected a floating-point tensor, got int64"),
    (lambda: mint.isposinf(1.0), kiln.KilnTypeError, "isposinf: expected input to be a kiln"),
    (lambda: mint.isnan([1.0]), kiln.KilnTypeError, "isnan: expected input to be a kiln"),
    (lambda: X.clone().requires_grad_().frac_(), kiln.KilnError, "requires grad"),
]


@pytest.mark.parametrize("call, error, match", ERRORS)
def test_bad_arguments_are_typed_errors(call, error, match):
    with raises(error, match=match):
        call()
