"""dtype fixes in functions Kiln composes in Python: kiln.mint.div's "trunc" mode rounds a 16-bit
quotient once (and its integer division by zero names div), hardtanh and relu6 take integer
inputs as PyTorch's do, and scaled_dot_product_attention computes 16-bit inputs in float32 and
rounds once. Checked against closed forms and float64 references, and against PyTorch where it
is installed."""

import math

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from conftest import INT_DTYPES, raises, t
from kiln import nn
from kiln.mint import _indexing_ops as ops

mint = kiln.mint
gradcheck = kiln.testing.gradcheck

NARROW = [kiln.float16, kiln.bfloat16]
MANTISSA_BITS = {kiln.float16: 10, kiln.bfloat16: 7}


def narrow_tensor(values, dtype):
    """``values`` rounded into ``dtype`` (a kiln tensor)."""
    return kiln.tensor(np.asarray(values, np.float32), dtype=dtype)


def float64(x):
    return x.to(kiln.float64).numpy()


# ------------------------------------------------------------------------------------------------
# div(rounding_mode="trunc")


def test_div_trunc_of_float16_does_not_round_the_quotient_up_first():
    # 139.25 / 0.28955078125 = 480.917 is 481 in float16: truncating that gave 481.
    a, b = narrow_tensor([139.25, -139.25], kiln.float16), narrow_tensor([0.28955078125] * 2,
                                                                          kiln.float16)
    assert ops.div(a, b, rounding_mode="trunc").tolist() == [480.0, -480.0]
    assert ops.div(a, b, rounding_mode="floor").tolist() == [480.0, -481.0]
    assert a.div(0.28955078125, rounding_mode="trunc").tolist() == [480.0, -480.0]


@pytest.mark.parametrize("dtype", NARROW, ids=lambda d: d.name)
def test_div_trunc_of_16_bit_floats_is_the_exact_truncated_quotient(dtype, rng):
    # Quotients below 2048 (float16) and 256 (bfloat16), whose integers the dtype holds exactly.
    high = 300.0 if dtype == kiln.float16 else 30.0
    a = narrow_tensor(rng.uniform(-high, high, 4000), dtype)
    b = narrow_tensor(rng.uniform(0.15, 4.0, 4000) * rng.choice([-1, 1], 4000), dtype)
    exact = np.trunc(float64(a) / float64(b))
    out = ops.div(a, b, rounding_mode="trunc")
    assert out.dtype == dtype
    np.testing.assert_array_equal(float64(out), exact)
    positive = exact > 0
    np.testing.assert_array_equal(float64(ops.div(a, b, rounding_mode="floor"))[positive],
                                  exact[positive])


def test_div_trunc_of_float16_keeps_the_promoted_dtype_and_writes_out():
    a = narrow_tensor([139.25, 7.5], kiln.float16)
    b = narrow_tensor([0.28955078125, 2.0], kiln.float16)
    assert ops.div(a, t([3, -2]), rounding_mode="trunc").dtype == kiln.float16
    wide = ops.div(a, b.to(kiln.float32), rounding_mode="trunc")
    assert wide.dtype == kiln.float32 and wide.tolist() == [480.0, 3.0]
    out = mint.zeros(2, dtype=kiln.float16)
    assert ops.div(a, b, rounding_mode="trunc", out=out) is out
    assert out.tolist() == [480.0, 3.0]


@pytest.mark.parametrize("dtype", NARROW, ids=lambda d: d.name)
def test_div_trunc_of_16_bit_floats_matches_torch(dtype, rng, torch):
    a = narrow_tensor(rng.uniform(-300.0, 300.0, 300), dtype)
    b = narrow_tensor(rng.uniform(0.05, 4.0, 300) * rng.choice([-1, 1], 300), dtype)
    twin = getattr(torch, dtype.name)
    x, y = torch.tensor(float64(a)).to(twin), torch.tensor(float64(b)).to(twin)
    # Element by element: PyTorch's scalar CPU kernel takes the quotient in float, as Kiln now
    # does; its vectorized one (whole tensors) divides in 16 bits and is off as Kiln was.
    want = [torch.div(x[i], y[i], rounding_mode="trunc").item() for i in range(len(x))]
    np.testing.assert_array_equal(float64(ops.div(a, b, rounding_mode="trunc")), want)


@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_integer_division_by_zero_names_div(mode, sync_pipeline):
    with raises(kiln.KilnValueError) as info:
        ops.div(t([1, 2]), t([0, 1]), rounding_mode=mode)
    assert str(info.value).startswith(f"div: integer division by zero with rounding_mode="
                                      f"'{mode}'")
    assert "FloorDivide" not in str(info.value)


# ------------------------------------------------------------------------------------------------
# hardtanh and relu6 of integers


def integer_values(dtype):
    """Values on both sides of [0, 6] (uint8 has no negative ones: 253 stands above)."""
    values = [0, 2, 6, 9, 100] + ([-3, -100] if dtype != kiln.uint8 else [253])
    return np.array(values, dtype.name)


def truncated_clip(x, low, high):
    """PyTorch's hardtanh of an integer array: clamped in float, truncated toward zero, and
    (where PyTorch refuses a bound past the dtype) saturated into the dtype."""
    info = np.iinfo(x.dtype)
    clipped = np.trunc(np.clip(x.astype(np.float64), low, high))
    return np.clip(clipped, info.min, info.max).astype(x.dtype)


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: d.name)
def test_relu6_and_hardtanh_keep_an_integer_dtype(dtype):
    x = integer_values(dtype)
    out = F.relu6(t(x))
    assert out.dtype == dtype
    np.testing.assert_array_equal(out.numpy(), np.clip(x, 0, 6))
    np.testing.assert_array_equal(nn.ReLU6()(t(x)).numpy(), np.clip(x, 0, 6))
    for low, high in ((-1.5, 2.5), (0.5, 0.7), (-0.7, -0.2), (-2.5, -1.5), (1.0, 1.0)):
        for hardtanh in (F.hardtanh, mint.hardtanh):
            out = hardtanh(t(x), low, high)
            assert out.dtype == dtype
            np.testing.assert_array_equal(out.numpy(), truncated_clip(x, low, high))


def test_hardtanh_of_integers_saturates_bounds_past_the_dtype():
    np.testing.assert_array_equal(F.hardtanh(t([-3, 2, 9]), -1e30, 1e30).numpy(), [-3, 2, 9])
    x = t(np.array([-3, 2, 9], np.int8))
    np.testing.assert_array_equal(F.hardtanh(x, -200.0, 300.0).numpy(), [-3, 2, 9])
    np.testing.assert_array_equal(F.hardtanh(x, 200.0, 300.0).numpy(), [127, 127, 127])


def test_relu6_in_place_on_an_integer_tensor():
    x = t([-3, 2, 9])
    assert F.relu6(x, inplace=True) is x
    np.testing.assert_array_equal(x.numpy(), [0, 2, 6])
    y = t([-3, 2, 9])
    assert F.hardtanh(y, -1.5, 2.5, inplace=True) is y
    np.testing.assert_array_equal(y.numpy(), [-1, 2, 2])


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: d.name)
def test_relu6_and_hardtanh_of_integers_match_torch(dtype, torch):
    x = integer_values(dtype)
    twin = torch.tensor(x)
    np.testing.assert_array_equal(F.relu6(t(x)).numpy(), torch.nn.functional.relu6(twin).numpy())
    for low, high in ((-1.5, 2.5), (0.5, 0.7), (-0.7, -0.2), (-2.5, -1.5)):
        if high <= -1 and dtype == kiln.uint8:
            continue  # PyTorch refuses a bound past the dtype, which Kiln saturates
        want = torch.nn.functional.hardtanh(twin, low, high)
        np.testing.assert_array_equal(F.hardtanh(t(x), low, high).numpy(), want.numpy())


def test_torch_refuses_bool_and_infinite_integer_bounds_as_kiln_does(torch):
    for fn in (torch.nn.functional.relu6, torch.nn.functional.hardtanh):
        with pytest.raises(NotImplementedError):
            fn(torch.tensor([True, False]))
    with pytest.raises(RuntimeError):
        torch.nn.functional.hardtanh(torch.tensor([1, 2]), -math.inf, 1.0)


@pytest.mark.parametrize("call, error, message", [
    (lambda: F.relu6(t([True, False])), kiln.DTypeError,
     "relu6: expected a floating-point or integer input, got bool"),
    (lambda: F.hardtanh(t([True, False])), kiln.DTypeError,
     "hardtanh: expected a floating-point or integer input, got bool"),
    (lambda: mint.hardtanh(t([True])), kiln.DTypeError, "hardtanh: expected a floating-point"),
    (lambda: F.relu6([1, 2]), kiln.KilnTypeError,
     "relu6: expected input to be a kiln.Tensor, got list"),
    (lambda: F.hardtanh(t([1, 2]), -math.inf, 1.0), kiln.KilnValueError,
     r"hardtanh: expected finite min_val and max_val for an integer input \(int64\), got "
     r"min_val=-inf and max_val=1.0"),
    (lambda: F.hardtanh(t([1, 2]), 0.0, math.nan), kiln.KilnValueError,
     "expected finite min_val and max_val"),
    (lambda: F.hardtanh(t([1, 2]), 2.0, 1.0), kiln.KilnValueError,
     "hardtanh: expected min_val <= max_val"),
], ids=["relu6-bool", "hardtanh-bool", "mint-bool", "relu6-list", "inf", "nan", "order"])
def test_relu6_and_hardtanh_errors(call, error, message):
    with raises(error, match=message):
        call()


# ------------------------------------------------------------------------------------------------
# scaled_dot_product_attention of 16-bit floats


def attention_reference(q, k, v, allowed=None):
    """softmax(q k^T / sqrt(E)) v in float64; rows with nothing ``allowed`` are 0."""
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)
    top = scores.max(-1, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(-1, keepdims=True)
    return (e / np.where(total == 0, 1.0, total)) @ v


def ulp(values, dtype):
    """The spacing of ``dtype`` at each value (at its smallest normal one near 0)."""
    magnitude = np.maximum(np.abs(values), 2.0 ** -14)
    return 2.0 ** (np.floor(np.log2(magnitude)) - MANTISSA_BITS[dtype])


def assert_rounded_once(actual, reference, dtype):
    """``actual`` within 1 ulp of each reference value, plus float32's error at the output's
    magnitude: what one rounding of a float32 result gives. Rounding every step is off by many
    ulp of the smaller outputs."""
    slack = 1e-5 * np.abs(reference).max()
    error = np.abs(float64(actual) - reference)
    worst = np.argmax(error - ulp(reference, dtype) - slack)
    assert error.flat[worst] <= ulp(reference, dtype).flat[worst] + slack, (
        f"error {error.flat[worst]} at {reference.flat[worst]}")


def attention_operands(dtype, rng, shape=(1, 2, 64, 64)):
    return [narrow_tensor(rng.normal(size=shape) * scale, dtype) for scale in (1.5, 1.5, 1.0)]


@pytest.mark.parametrize("dtype", NARROW, ids=lambda d: d.name)
def test_attention_of_16_bit_floats_rounds_once(dtype, rng):
    q, k, v = attention_operands(dtype, rng)
    out = F.scaled_dot_product_attention(q, k, v)
    assert out.dtype == dtype
    assert_rounded_once(out, attention_reference(*map(float64, (q, k, v))), dtype)


@pytest.mark.parametrize("dtype", NARROW, ids=lambda d: d.name)
def test_attention_of_16_bit_floats_with_masks_rounds_once(dtype, rng):
    q, k, v = attention_operands(dtype, rng, (2, 2, 8, 16))
    allowed = rng.random((2, 1, 8, 8)) > 0.3
    allowed[0, 0, 1] = False  # a query that may attend to nothing gives 0
    reference = attention_reference(*map(float64, (q, k, v)), allowed)
    out = F.scaled_dot_product_attention(q, k, v, t(allowed))
    assert out.dtype == dtype and (float64(out)[0, :, 1] == 0).all()
    assert_rounded_once(out, reference, dtype)
    additive = narrow_tensor(np.where(allowed, 0.0, -np.inf), dtype)
    assert_rounded_once(F.scaled_dot_product_attention(q, k, v, additive), reference, dtype)
    causal = np.tril(np.ones((8, 8), bool))
    assert_rounded_once(F.scaled_dot_product_attention(q, k, v, is_causal=True),
                        attention_reference(*map(float64, (q, k, v)), causal), dtype)


def test_attention_of_float16_gives_float16_gradients_of_float64_accuracy(rng):
    operands = attention_operands(kiln.float16, rng, (2, 2, 6, 8))
    cotangent = rng.normal(size=(2, 2, 6, 8))
    grads = {}
    for dtype in (kiln.float16, kiln.float64):
        leaves = [x.to(dtype).detach().requires_grad_() for x in operands]
        out = F.scaled_dot_product_attention(*leaves, is_causal=True)
        grads[dtype] = kiln.autograd.grad(mint.sum(out * t(cotangent, dtype)), leaves)
    for low, high in zip(grads[kiln.float16], grads[kiln.float64]):
        assert low.dtype == kiln.float16
        want = high.numpy()
        np.testing.assert_allclose(float64(low), want, rtol=2e-3,
                                   atol=1e-3 * np.abs(want).max())


def test_attention_of_float64_keeps_its_gradients(rng):
    q, k, v = (t(rng.normal(size=(1, 2, 4, 3))).requires_grad_() for _ in range(3))
    mask = t(rng.normal(size=(4, 4)))
    assert gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, mask), [q, k, v])
    assert gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True),
                     [q, k, v])


def test_attention_keeps_the_promoted_dtype(rng):
    q, k, v = attention_operands(kiln.float16, rng, (1, 3, 4))
    assert F.scaled_dot_product_attention(q, k.to(kiln.float32), v).dtype == kiln.float32
    assert F.scaled_dot_product_attention(q, k.to(kiln.bfloat16), v).dtype == kiln.float32


def test_attention_of_float16_under_jit_matches_eager(rng):
    q, k, v = attention_operands(kiln.float16, rng, (2, 4, 8))
    jitted = kiln.jit(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True))
    eager = float64(F.scaled_dot_product_attention(q, k, v, is_causal=True))
    for _ in range(2):  # the trace, then the compiled graph
        np.testing.assert_allclose(float64(jitted(q, k, v)), eager, rtol=2e-3, atol=1e-3)


@pytest.mark.parametrize("dtype", NARROW, ids=lambda d: d.name)
def test_attention_of_16_bit_floats_matches_torch(dtype, rng, torch):
    q, k, v = attention_operands(dtype, rng)
    twin = getattr(torch, dtype.name)
    want = torch.nn.functional.scaled_dot_product_attention(
        *(torch.tensor(float64(x)).to(twin) for x in (q, k, v)))
    reference = attention_reference(*map(float64, (q, k, v)))
    # Both round a float32 result once, so they differ by at most about an ulp.
    assert_rounded_once(F.scaled_dot_product_attention(q, k, v), reference, dtype)
    np.testing.assert_allclose(float64(F.scaled_dot_product_attention(q, k, v)),
                               want.double().numpy(), rtol=0,
                               atol=2 ** -MANTISSA_BITS[dtype] * np.abs(reference).max())
