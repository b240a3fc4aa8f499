"""PyTorch's indexing, comparison and math functions composed in kiln/mint/_indexing_ops.py
(scatter_add, index_add, index_fill, masked_select, nonzero, argwhere, where(condition),
isclose, allclose, equal, full_like, clamp_min, clamp_max, clip, log10, trunc, fix, lerp, div's
rounding modes, cumprod, unique) and their Tensor methods: values against NumPy over dtypes,
broadcasting and edge cases (zeros, NaN, infinities, 0-d and empty tensors), gradients by finite
differences, kiln.jit against eager, PyTorch where it is installed, and the argument errors."""

import math

import numpy as np
import pytest

import kiln
from conftest import FLOAT_DTYPES, assert_close, random_array, raises
from kiln.mint import _indexing_ops as ops
from kiln.testing import gradcheck

mint = kiln.mint
NUMERIC = [kiln.float32, kiln.float64, kiln.int32, kiln.int64]


def t(data, dtype=None):
    """A kiln tensor of ``data``: float32 for Python floats, an array's own dtype."""
    return kiln.tensor(data, dtype=dtype)


def leaf(rng, *shape):
    return kiln.tensor(rng.standard_normal(shape)).requires_grad_()


def values(shape, dtype, rng):
    return kiln.tensor(random_array(shape, dtype, rng), dtype=dtype)


# ------------------------------------------------------------------------------------------------
# scatter_add, scatter_, index_add, index_fill


def scatter_add_reference(x, dim, index, src):
    out = x.copy()
    for position in np.ndindex(*index.shape):
        target = list(position)
        target[dim] = index[position]
        out[tuple(target)] += src[position]
    return out


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_add_adds_repeated_indices(dtype, dim, rng):
    x = values((3, 4), dtype, rng)
    src = values((3, 4), dtype, rng)
    size = x.shape[dim]
    index = rng.integers(0, size, (2, 3))
    expected = scatter_add_reference(x.numpy(), dim % 2, index, src.numpy())
    assert_close(ops.scatter_add(x, dim, t(index), src), expected)
    assert_close(x.scatter_add(dim, t(index), src), expected)
    assert x.scatter_add_(dim, t(index), src) is x
    assert_close(x, expected)


def test_scatter_in_place_takes_src_value_and_reduce():
    x = t([[1.0, 2.0], [3.0, 4.0]])
    assert x.scatter_(0, t([[1, 0]]), t([[10.0, 20.0]])) is x
    assert_close(x, [[1.0, 20.0], [10.0, 4.0]])
    x.scatter_(1, t([[0], [1]]), value=-1.0)
    assert_close(x, [[-1.0, 20.0], [10.0, -1.0]])
    x.scatter_(1, t([[1], [1]]), 2.0, reduce="multiply")
    assert_close(x, [[-1.0, 40.0], [10.0, -2.0]])
    x.scatter_(0, t([[0, 0]]), t([[1.0, 1.0]]), reduce="add")
    assert_close(x, [[0.0, 41.0], [10.0, -2.0]])


def index_add_reference(x, dim, index, source, alpha):
    out = np.moveaxis(x.copy(), dim, 0)
    np.add.at(out, index, np.moveaxis(source, dim, 0) * alpha)
    return np.moveaxis(out, 0, dim)


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("dim", [0, 1, 2, -2])
@pytest.mark.parametrize("alpha", [1, 3])
def test_index_add_matches_numpy(dtype, dim, alpha, rng):
    x = values((3, 4, 2), dtype, rng)
    index = rng.integers(0, x.shape[dim], 5)  # more entries than positions: some repeat
    shape = list(x.shape)
    shape[dim] = 5
    source = values(shape, dtype, rng)
    expected = index_add_reference(x.numpy(), dim % 3, index, source.numpy(), alpha)
    assert_close(ops.index_add(x, dim, t(index), source, alpha=alpha), expected)
    assert_close(x.index_add(dim, t(index, kiln.int32), source, alpha=alpha), expected)
    assert x.index_add_(dim, t(index), source, alpha=alpha) is x
    assert_close(x, expected)


def test_index_add_of_0d_and_empty_tensors():
    assert_close(ops.index_add(t(2.0), 0, t([0]), t(3.0), alpha=0.5), np.float32(3.5))
    x = t(np.ones((2, 3), np.float32))
    assert_close(ops.index_add(x, 1, t(np.zeros(0, np.int64)), t(np.ones((2, 0), np.float32))),
                 x.numpy())


@pytest.mark.parametrize("dtype", NUMERIC + [kiln.bool_])
@pytest.mark.parametrize("dim", [0, -1])
def test_index_fill_sets_slices_negative_indices_included(dtype, dim, rng):
    x = values((3, 4), dtype, rng)
    expected = np.moveaxis(x.numpy().copy(), dim, 0)
    expected[[0, -1]] = 1
    expected = np.moveaxis(expected, 0, dim)
    assert_close(ops.index_fill(x, dim, t([0, -1, 0]), 1), expected)
    assert x.index_fill_(dim, t([-1, 0]), 1) is x
    assert_close(x, expected)


def test_index_fill_of_0d_input_and_tensor_value():
    assert_close(ops.index_fill(t(5.0), 0, t(0), t(-1.0)), np.float32(-1.0))
    filled = t([[1.0, 2.0], [3.0, 4.0]]).index_fill(1, t([1]), t(9.0, kiln.float64))
    assert filled.dtype == kiln.float32
    assert_close(filled, [[1.0, 9.0], [3.0, 9.0]])


def test_scatter_and_index_gradients(rng):
    assert gradcheck(lambda x, s: ops.scatter_add(x, 0, t([[0, 1, 0], [1, 1, 0]]), s),
                     (leaf(rng, 2, 3), leaf(rng, 2, 3)))
    assert gradcheck(lambda x, s: ops.index_add(x, 1, t([2, 0, 2]), s, alpha=1.5),
                     (leaf(rng, 2, 4), leaf(rng, 2, 3)))
    # A 0-d value gets the gradient of the filled elements, once for a repeated index.
    assert gradcheck(lambda x, v: ops.index_fill(x, 0, t([1, 1]), v), (leaf(rng, 3, 2),
                                                                          leaf(rng)))


# ------------------------------------------------------------------------------------------------
# masked_select, nonzero, argwhere, where


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.int64, kiln.bool_, kiln.bfloat16])
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 4), (4,)), ((4,), (3, 1)), ((), ())])
def test_masked_select_broadcasts_input_and_mask(dtype, shapes, rng):
    x = values(shapes[0], dtype, rng)
    mask = rng.random(shapes[1]) > 0.4
    shape = np.broadcast_shapes(shapes[0], shapes[1])
    expected = np.broadcast_to(x.numpy(), shape)[np.broadcast_to(mask, shape)]
    assert_close(ops.masked_select(x, t(mask)), expected)
    assert_close(x.masked_select(t(mask)), expected)


def test_masked_select_gradient(rng):
    assert gradcheck(lambda x: ops.masked_select(x, t([True, False, True])), (leaf(rng, 2, 3),))


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.int32, kiln.bool_, kiln.float16])
@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 2), (0, 3)])
def test_nonzero_argwhere_and_where_match_numpy(dtype, shape, rng):
    array = random_array(shape, dtype, rng)
    array.flat[::3] = 0
    if dtype.is_floating_point and array.size > 1:
        array.flat[1] = np.nan  # NaN is nonzero
    x = kiln.tensor(array, dtype=dtype)
    positions = ops.nonzero(x)
    assert positions.dtype == kiln.int64
    assert_close(positions, np.argwhere(array))
    assert_close(ops.argwhere(x), np.argwhere(array))
    assert_close(x.nonzero(), np.argwhere(array))
    for got, want in zip(ops.nonzero(x, as_tuple=True), np.nonzero(array), strict=True):
        assert_close(got, want)
    for got, want in zip(ops.where(x), np.nonzero(array), strict=True):
        assert_close(got, want)


@pytest.mark.parametrize("value, count", [(3.0, 1), (0.0, 0)])
def test_nonzero_of_a_0d_tensor(value, count):
    x = t(value)
    assert tuple(ops.nonzero(x).shape) == (count, 0)
    (positions,) = ops.nonzero(x, as_tuple=True)
    assert_close(positions, np.zeros(count, np.int64))


def test_three_argument_where_is_the_op(rng):
    a, b = values((3, 4), kiln.float32, rng), values((4,), kiln.float64, rng)
    condition = a > 0
    expected = np.where(condition.numpy(), a.numpy(), b.numpy())
    assert_close(ops.where(condition, a, b), expected)
    out = mint.zeros(3, 4, dtype=kiln.float64)
    assert ops.where(condition, a, b, out=out) is out
    assert_close(out, expected)
    assert_close(ops.where(condition, 1.0, 0.0), condition.numpy().astype(np.float32))


# ------------------------------------------------------------------------------------------------
# isclose, allclose, equal


def comparison_pair(dtype, rng, shape=(4, 6)):
    a = random_array(shape, dtype, rng)
    b = a.copy()
    if dtype.is_floating_point:
        b = (a * (1 + rng.choice([0.0, 1e-6, 1e-4, 1e-2], shape))).astype(a.dtype)
        b.flat[:8] = [np.inf, -np.inf, np.inf, np.nan, np.nan, 0.0, 1e-9, -0.0]
        a.flat[:8] = [np.inf, np.inf, 1.0, np.nan, 1.0, 5e-9, 0.0, 0.0]
    else:
        b.flat[::2] += 1
    return a, b


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [kiln.int32, kiln.int64, kiln.uint8])
@pytest.mark.parametrize("rtol, atol, equal_nan", [(1e-5, 1e-8, False), (1e-3, 1e-8, True),
                                                   (0.0, 0.0, True), (0.5, 2.0, False)])
def test_isclose_matches_numpy(dtype, rtol, atol, equal_nan, rng):
    x, y = (kiln.tensor(v, dtype=dtype) for v in comparison_pair(dtype, rng))
    a, b = x.numpy(), y.numpy()  # as rounded into bfloat16
    compute = np.float32 if dtype in (kiln.float16, kiln.bfloat16) else np.float64
    expected = np.isclose(a.astype(compute), b.astype(compute), rtol=rtol, atol=atol,
                          equal_nan=equal_nan)
    assert_close(ops.isclose(x, y, rtol, atol, equal_nan), expected)
    assert_close(x.isclose(y, rtol=rtol, atol=atol, equal_nan=equal_nan), expected)
    assert ops.allclose(x, y, rtol, atol, equal_nan) is bool(expected.all())
    assert ops.allclose(x, x, equal_nan=True) is True


def test_isclose_broadcasts_and_allclose_of_nothing_is_true(rng):
    a = rng.standard_normal((3, 1)).astype(np.float32)
    b = rng.standard_normal((4,)).astype(np.float32)
    assert_close(ops.isclose(t(a), t(b), atol=0.5), np.isclose(a, b, atol=0.5, rtol=1e-5))
    assert ops.allclose(t(np.zeros((0, 3), np.float32)), t(np.ones(3, np.float32)))


def test_equal_compares_shapes_and_values():
    x = t([[1.0, 2.0], [3.0, 4.0]])
    assert ops.equal(x, x.clone()) is True
    assert x.equal(t([[1, 2], [3, 4]])) is True  # compared after promotion
    assert ops.equal(x, t([[1.0, 2.0], [3.0, 5.0]])) is False
    assert ops.equal(x, t([1.0, 2.0, 3.0, 4.0])) is False
    assert ops.equal(x[:1], x.reshape(4)[:2]) is False
    assert ops.equal(t([math.nan]), t([math.nan])) is False
    assert ops.equal(t(np.zeros((0, 2))), t(np.zeros((0, 2))))


# ------------------------------------------------------------------------------------------------
# full_like, clamp_min, clamp_max, clip


def test_full_like_keeps_the_shape_and_dtype(rng):
    x = values((2, 3), kiln.float64, rng)
    filled = ops.full_like(x, 7)
    assert filled.dtype == kiln.float64
    assert_close(filled, np.full((2, 3), 7.0))
    other = ops.full_like(x, 2, dtype=kiln.int32, requires_grad=False)
    assert other.dtype == kiln.int32
    assert_close(other, np.full((2, 3), 2, np.int32))
    assert ops.full_like(x, 1.5, requires_grad=True).requires_grad


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.int32, kiln.float16])
def test_clamp_min_max_and_clip(dtype, rng):
    x = values((3, 5), dtype, rng)
    a = x.numpy()
    assert_close(ops.clamp_min(x, 1), np.maximum(a, 1).astype(a.dtype))
    assert_close(ops.clamp_max(x, 1), np.minimum(a, 1).astype(a.dtype))
    assert_close(x.clamp_min(-1).clamp_max(1), np.clip(a, -1, 1))
    assert_close(ops.clip(x, -1, 2), np.clip(a, -1, 2))
    assert_close(x.clip(max=0), np.minimum(a, 0))
    bound = values((5,), dtype, rng)
    assert_close(ops.clamp_min(x, bound), np.maximum(a, bound.numpy()))
    y = x.clone()
    assert y.clamp_min_(0) is y and y.clamp_max_(1) is y
    assert_close(y, np.clip(a, 0, 1))
    assert x.clip_(-1, 1) is x
    assert_close(x, np.clip(a, -1, 1))


def test_clamp_min_and_max_gradients(rng):
    assert gradcheck(lambda x: ops.clamp_min(x, 0.1) * ops.clamp_max(x, -0.2), (leaf(rng, 3, 4),))


# ------------------------------------------------------------------------------------------------
# log10, trunc, fix, lerp


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_log10_matches_numpy(dtype, rng):
    a = random_array((40,), dtype, rng, low=0.0, high=50.0)
    a[:4] = [0.0, 1.0, 10.0, 100.0]
    if dtype != kiln.float16:
        a[4:6] = [np.inf, -1.0]
    out = ops.log10(kiln.tensor(a, dtype=dtype))
    assert out.dtype == dtype
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.log10(a.astype(np.float64))
    assert_close(out, expected)
    assert_close(kiln.tensor(a, dtype=dtype).log10(), expected)


def test_log10_of_integers_is_float32_and_powers_of_ten_are_exact():
    out = ops.log10(t([1, 10, 1000, 7]))
    assert out.dtype == kiln.float32
    assert_close(out, np.log10([1, 10, 1000, 7]).astype(np.float32))
    powers = 10.0 ** np.arange(-20, 21)
    assert np.array_equal(ops.log10(t(powers)).numpy(), np.arange(-20.0, 21.0))


def test_log10_gradient(rng):
    x = kiln.tensor(rng.uniform(0.5, 5.0, (3, 4))).requires_grad_()
    assert gradcheck(ops.log10, (x,))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_trunc_and_fix_round_toward_zero_exactly(dtype, rng):
    a = random_array((30,), dtype, rng, low=-40.0, high=40.0)
    a[:7] = [-2.5, -0.5, 0.5, 2.5, np.nan, np.inf, -np.inf]
    x = kiln.tensor(a, dtype=dtype)
    expected = np.trunc(a)
    for out in (kiln.mint.trunc(x), ops.fix(x), x.trunc(), x.fix()):
        assert out.dtype == dtype
        np.testing.assert_array_equal(out.numpy(), expected)
    assert np.signbit(kiln.mint.trunc(x).numpy()[1])  # trunc(-0.5) is -0.0
    assert x.trunc_() is x and x.fix_() is x
    np.testing.assert_array_equal(x.numpy(), expected)


@pytest.mark.parametrize("dtype", [kiln.int8, kiln.int64, kiln.uint8, kiln.bool_])
def test_trunc_of_integers_is_a_copy(dtype, rng):
    x = values((6,), dtype, rng)
    out = kiln.mint.trunc(x)
    assert out.dtype == dtype and not out.shares_storage_with(x)
    assert_close(out, x.numpy())


def test_trunc_gradient_is_zero(rng):
    x = leaf(rng, 4)
    kiln.mint.trunc(x * 3.0).sum().backward()
    assert_close(x.grad, np.zeros(4))


def lerp_reference(a, b, w):
    return np.where(np.abs(w) < 0.5, a + w * (b - a), b - (b - a) * (1 - w))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("tensor_weight", [False, True])
def test_lerp_matches_pytorchs_formula(dtype, tensor_weight, rng):
    a = random_array((3, 4), dtype, rng)
    b = random_array((4,), dtype, rng)
    if tensor_weight:
        w = random_array((3, 1), dtype, rng, low=-1.0, high=2.0)
        w.flat[:2] = [1.0, 0.5]
        weight = kiln.tensor(w, dtype=dtype)
    else:
        w = np.float64(0.75)
        weight = 0.75
    x, y = kiln.tensor(a, dtype=dtype), kiln.tensor(b, dtype=dtype)
    expected = lerp_reference(*(v.astype(np.float64) for v in (a, b, w)))
    out = ops.lerp(x, y, weight)
    assert out.dtype == dtype
    assert_close(out, expected)
    assert_close(x.lerp(y, weight), expected)


def test_lerp_with_weight_one_is_end_exactly():
    start, end = t([0.1, 1e8, -3.0]), t([0.7, 3.0, 1e-3])
    assert np.array_equal(ops.lerp(start, end, 1.0).numpy(), end.numpy())
    assert np.array_equal(ops.lerp(start, end, t([1.0, 1.0, 1.0])).numpy(), end.numpy())


def test_lerp_gradients(rng):
    weight = kiln.tensor([0.2, 0.7, 1.0], dtype=kiln.float64).requires_grad_()
    assert gradcheck(ops.lerp, (leaf(rng, 2, 3), leaf(rng, 3), weight))
    assert gradcheck(lambda a, b: ops.lerp(a, b, 0.8), (leaf(rng, 2, 3), leaf(rng, 3)))


# ------------------------------------------------------------------------------------------------
# div


def integer_operands(dtype, rng):
    a = rng.integers(-50, 51, 40).astype(dtype.name)
    b = rng.integers(1, 8, 40).astype(dtype.name) * rng.choice([-1, 1], 40).astype(dtype.name)
    return a, b


@pytest.mark.parametrize("dtype", [kiln.int32, kiln.int64, kiln.int8])
def test_div_rounding_modes_of_integers_are_exact(dtype, rng):
    a, b = integer_operands(dtype, rng)
    x, y = kiln.tensor(a, dtype=dtype), kiln.tensor(b, dtype=dtype)
    three = np.full_like(b, 3)
    for divisor, operand in ((b, y), (three, 3)):
        floor = np.floor_divide(a, divisor)
        trunc = (np.sign(a) * np.sign(divisor) * (np.abs(a) // np.abs(divisor))).astype(a.dtype)
        for mode, expected in (("floor", floor), ("trunc", trunc)):
            out = ops.div(x, operand, rounding_mode=mode)
            assert out.dtype == dtype
            assert_close(out, expected)
            assert_close(x.div(operand, rounding_mode=mode), expected)
    big = t([2**62 + 1, -(2**62) - 1])
    assert ops.div(big, 3, rounding_mode="trunc").tolist() == [(2**62 + 1) // 3,
                                                               -((2**62 + 1) // 3)]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_div_rounding_modes_of_floats(dtype, rng):
    a = random_array((40,), dtype, rng, low=-20.0, high=20.0)
    b = random_array((40,), dtype, rng, low=0.5, high=4.0) * rng.choice([-1, 1], 40)
    b = b.astype(a.dtype)
    x, y = kiln.tensor(a, dtype=dtype), kiln.tensor(b, dtype=dtype)
    quotient = (x / y).numpy().astype(np.float64)
    # The exact quotient's truncation: a 16-bit one rounded first could round up to the next
    # integer.
    exact = x.numpy().astype(np.float64) / y.numpy().astype(np.float64)
    assert_close(ops.div(x, y, rounding_mode="trunc"), np.trunc(exact))
    assert_close(ops.div(x, y, rounding_mode="floor"), mint.floor_divide(x, y).numpy())
    assert_close(ops.div(x, y), quotient)
    assert_close(ops.div(t([1.0, -1.0, 0.0]), 0.0, rounding_mode="trunc"),
                 np.array([np.inf, -np.inf, np.nan], np.float32))


def test_div_of_an_integer_by_a_float_and_out(rng):
    a = t([7, -7, 9])
    assert_close(ops.div(a, 2.5, rounding_mode="trunc"), np.array([2.0, -2.0, 3.0], np.float32))
    out = mint.zeros(3, dtype=kiln.int64)
    assert ops.div(a, t([2, 2, -4]), rounding_mode="trunc", out=out) is out
    assert_close(out, np.array([3, -3, -2]))
    out = mint.zeros(3)
    assert ops.div(a, 2, out=out) is out
    assert_close(out, np.array([3.5, -3.5, 4.5], np.float32))


def test_div_in_place_method_with_rounding_mode():
    x = t([7.0, -7.0, 5.5])
    assert x.div_(2, rounding_mode="floor") is x
    assert_close(x, np.array([3.0, -4.0, 2.0], np.float32))
    y = t([7, -7])
    assert y.div_(2, rounding_mode="trunc") is y
    assert_close(y, np.array([3, -3]))
    assert_close(t([1.0, 3.0]).div_(2), np.array([0.5, 1.5], np.float32))


def test_div_rounding_gradient_is_zero(rng):
    x = leaf(rng, 5)
    (ops.div(x, 0.3, rounding_mode="trunc") + ops.div(x, 0.3, rounding_mode="floor")).sum() \
        .backward()
    assert_close(x.grad, np.zeros(5))


# ------------------------------------------------------------------------------------------------
# cumprod


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [kiln.int32, kiln.int64, kiln.bool_])
@pytest.mark.parametrize("shape, dim", [((11,), 0), ((3, 9), 1), ((5, 2, 3), 0), ((4, 6), -2),
                                        ((2, 0), 1), ((), 0)])
def test_cumprod_matches_numpy_with_zeros_and_negatives(dtype, shape, dim, rng):
    a = random_array(shape, dtype, rng, low=-1.6, high=1.6)
    if a.size > 4 and dtype != kiln.bool_:
        a.flat[3] = 0
    x = kiln.tensor(a, dtype=dtype)
    out = ops.cumprod(x, dim)
    if dtype.is_floating_point:
        assert out.dtype == dtype
        assert_close(out, np.cumprod(a.astype(np.float64), axis=dim if a.ndim else None)
                     .reshape(a.shape))
    else:
        assert out.dtype == kiln.int64  # as PyTorch's
        assert_close(out, np.cumprod(a.astype(np.int64), axis=dim if a.ndim else None)
                     .reshape(a.shape))
    assert_close(x.cumprod(dim), out.numpy())


def test_cumprod_dtype_and_signed_zeros():
    x = t([1.0, 2.0, 0.0, -3.0, 4.0])
    out = ops.cumprod(x, 0, dtype=kiln.float64)
    assert out.dtype == kiln.float64
    assert np.array_equal(np.signbit(out.numpy()), [False, False, False, True, True])
    assert ops.cumprod(t([2, 3], kiln.int32), 0, dtype=kiln.int32).dtype == kiln.int32
    ints = t(np.full(70, 3, np.int64))
    assert_close(ops.cumprod(ints, 0), np.cumprod(np.full(70, 3, np.int64)))  # wraps as NumPy


def test_cumprod_of_one_element_is_a_copy():
    x = t([5.0])
    out = ops.cumprod(x, 0)
    assert not out.shares_storage_with(x)


def test_cumprod_gradient_through_zeros(rng):
    a = rng.standard_normal((3, 6))
    a[0, 1] = 0.0
    a[1, 2] = a[1, 4] = 0.0  # two zeros in a row: every gradient of the row past them is 0
    assert gradcheck(lambda x: ops.cumprod(x, 1), (kiln.tensor(a).requires_grad_(),))


# ------------------------------------------------------------------------------------------------
# unique


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.int64, kiln.int8, kiln.bool_,
                                   kiln.float16])
@pytest.mark.parametrize("shape", [(12,), (3, 5), (0,), ()])
def test_unique_matches_numpy(dtype, shape, rng):
    a = random_array(shape, dtype, rng, low=-0.4, high=0.4)
    if dtype.is_floating_point:
        a = np.round(a * 4) / 4  # repeats
    x = kiln.tensor(a, dtype=dtype)
    want, inverse, counts = np.unique(a, return_inverse=True, return_counts=True)
    assert_close(ops.unique(x), want)
    out, got_inverse, got_counts = ops.unique(x, return_inverse=True, return_counts=True)
    assert out.dtype == dtype and got_inverse.dtype == got_counts.dtype == kiln.int64
    assert_close(out, want)
    assert_close(got_inverse, inverse.reshape(a.shape))
    assert_close(got_counts, counts)
    out, got_counts = x.unique(sorted=False, return_counts=True)
    assert_close(got_counts, counts)


def test_unique_keeps_each_nan_apart():
    out, counts = ops.unique(t([np.nan, 1.0, np.nan, 1.0]), return_counts=True)
    assert_close(out, np.array([1.0, np.nan, np.nan], np.float32))
    assert_close(counts, np.array([2, 1, 1]))


@pytest.mark.parametrize("dim", [0, 1, -1, 2])
def test_unique_along_a_dim_matches_numpy(dim, rng):
    a = rng.integers(0, 2, (4, 3, 2))
    axis = dim % 3
    a = np.concatenate([a, np.take(a, [0, -1], axis=axis)], axis=axis)  # repeated slices
    want, inverse, counts = np.unique(a, axis=axis, return_inverse=True, return_counts=True)
    out, got_inverse, got_counts = ops.unique(t(a), dim=dim, return_inverse=True,
                                              return_counts=True)
    assert_close(out, want)
    assert_close(got_inverse, inverse.reshape(-1))
    assert_close(got_counts, counts)


# ------------------------------------------------------------------------------------------------
# kiln.jit


def test_composed_ops_trace_under_jit(rng):
    def composed(x, s):
        return (ops.index_add(x, 0, t([1, 0]), s) + ops.cumprod(x, 0)
                + ops.index_fill(x, 1, t([0]), 2.0) + ops.lerp(x, s, 0.3)
                + ops.log10(ops.clamp_min(x, 0.1)) + kiln.mint.trunc(x * 4)
                + ops.div(x, 0.3, rounding_mode="trunc") + ops.scatter_add(x, 1, t([[2], [0]]), s)
                + ops.isclose(x, s, atol=0.5).to(kiln.float32))

    jitted = kiln.jit(composed)
    for _ in range(2):
        x, s = values((2, 3), kiln.float32, rng), values((2, 3), kiln.float32, rng)
        assert_close(jitted(x, s), composed(x, s).numpy())


@pytest.mark.parametrize("call", [
    lambda x: ops.nonzero(x), lambda x: ops.argwhere(x), lambda x: ops.where(x > 0),
    lambda x: ops.masked_select(x, x > 0), lambda x: ops.unique(x)])
def test_value_sized_results_are_refused_under_jit(call):
    with raises(kiln.KilnTypeError, match="kiln.jit traces cannot know"):
        kiln.jit(call)(t([1.0, -2.0, 3.0]))


# ------------------------------------------------------------------------------------------------
# PyTorch


def test_matches_torch(torch, rng):
    a = rng.integers(-20, 21, (4, 5))
    b = rng.integers(1, 6, (4, 5)) * rng.choice([-1, 1], (4, 5))
    for mode in ("trunc", "floor"):
        want = torch.div(torch.tensor(a), torch.tensor(b), rounding_mode=mode)
        assert_close(ops.div(t(a), t(b), rounding_mode=mode), want.numpy())
    pairs = comparison_pair(kiln.float32, rng)
    want = torch.isclose(*(torch.tensor(p) for p in pairs), equal_nan=True)
    assert_close(ops.isclose(t(pairs[0]), t(pairs[1]), equal_nan=True), want.numpy())
    rows = rng.integers(0, 2, (6, 3))
    want = torch.unique(torch.tensor(rows), dim=0, return_inverse=True, return_counts=True)
    for got, expected in zip(ops.unique(t(rows), dim=0, return_inverse=True,
                                        return_counts=True), want, strict=True):
        assert_close(got, expected.numpy())
    x = rng.standard_normal((3, 5))
    x[1, 2] = 0.0
    tx = torch.tensor(x, requires_grad=True)
    torch.cumprod(tx, 1).sum().backward()
    kx = t(x).requires_grad_()
    ops.cumprod(kx, 1).sum().backward()
    assert_close(kx.grad, tx.grad.numpy())


# ------------------------------------------------------------------------------------------------
# Errors


X = t([[1.0, 2.0], [3.0, 4.0]])
ERRORS = [
    (lambda: ops.scatter_add(X, 0, t([[0]]), 1.0), kiln.KilnTypeError, "src to be a kiln.Tensor"),
    (lambda: ops.scatter_add(X, "0", t([[0]]), X), kiln.KilnTypeError, "dim must be an int"),
    (lambda: X.clone().scatter_(0, t([[0]])), kiln.KilnTypeError, "either src or value"),
    (lambda: X.clone().scatter_(0, t([[0]]), X, value=1.0), kiln.KilnTypeError, "got both"),
    (lambda: ops.index_add(X, 0, t([0.0]), X[:1]), kiln.DTypeError, "int64 or int32 index"),
    (lambda: ops.index_add(X, 0, t([[0]]), X[:1]), kiln.KilnIndexError, "1-d index"),
    (lambda: ops.index_add(X, 2, t([0]), X[:1]), kiln.KilnIndexError, "dim out of range"),
    (lambda: ops.index_add(X, 0, t([0, 1]), X[:1]), kiln.ShapeError,
     r"source of shape \[2, 2\]"),
    (lambda: ops.index_add(t([1, 2]), 0, t([0]), t([1]), alpha=0.5), kiln.KilnTypeError,
     "integer alpha"),
    (lambda: ops.index_add(X, 0, t([0]), X[:1], alpha="2"), kiln.KilnTypeError,
     "alpha to be a number"),
    (lambda: ops.index_add(X, 0, t([2]), X[:1]), kiln.KilnIndexError, "out of bounds"),
    (lambda: ops.index_fill(X, 1, t([5]), 0.0), kiln.KilnIndexError, "dimension 1 with size 2"),
    (lambda: ops.index_fill(X, 0, t([0]), t([1.0])), kiln.KilnValueError, "0-d tensor"),
    (lambda: ops.masked_select(X, t([1, 0])), kiln.DTypeError, "bool mask"),
    (lambda: ops.masked_select(X, t([True, False, True])), kiln.ShapeError, "broadcast"),
    (lambda: ops.nonzero([1, 0]), kiln.KilnTypeError, "input to be a kiln.Tensor"),
    (lambda: ops.nonzero(X, as_tuple=1), kiln.KilnTypeError, "as_tuple must be a bool"),
    (lambda: ops.where(X > 1, X), kiln.KilnTypeError, "got no other"),
    (lambda: ops.where(X > 1, out=X), kiln.KilnTypeError, "out= needs input and other"),
    (lambda: ops.isclose(X, X.double()), kiln.DTypeError, "of one dtype"),
    (lambda: ops.isclose(X, 1.0), kiln.KilnTypeError, "other to be a kiln.Tensor"),
    (lambda: ops.isclose(X, X, rtol=-1.0), kiln.KilnValueError, "rtol and atol >= 0"),
    (lambda: ops.allclose(X, X, atol=math.nan), kiln.KilnValueError, "rtol and atol >= 0"),
    (lambda: ops.equal(X, [[1.0]]), kiln.KilnTypeError, "other to be a kiln.Tensor"),
    (lambda: ops.clamp_min(X, None), kiln.KilnTypeError, "min to be a number or a tensor"),
    (lambda: X.clone().clamp_max_(None), kiln.KilnTypeError, "max to be a number"),
    (lambda: ops.log10("x"), kiln.KilnTypeError, "input to be a kiln.Tensor"),
    (lambda: ops.lerp(t([1, 2]), t([3, 4]), 0.5), kiln.DTypeError, "floating-point input"),
    (lambda: ops.lerp(X, X, "half"), kiln.KilnTypeError, "weight to be a real number"),
    (lambda: ops.div(X, X, rounding_mode="round"), kiln.KilnValueError, "rounding_mode None"),
    (lambda: ops.div(t([1, 2]), t([0, 1]), rounding_mode="trunc"), kiln.KilnValueError,
     "division by zero"),
    (lambda: ops.cumprod(X, 2), kiln.KilnIndexError, "dim out of range"),
    (lambda: ops.cumprod(X, None), kiln.KilnTypeError, "dim must be an int"),
    (lambda: ops.unique(X, return_counts=None), kiln.KilnTypeError, "return_counts must be"),
    (lambda: ops.unique(t(1.0), dim=0), kiln.KilnIndexError, "0-d tensor has no dimension"),
    (lambda: X.clone().requires_grad_().index_fill_(0, t([0]), 1.0), kiln.KilnError,
     "requires grad"),
]


@pytest.mark.parametrize("call, error, match", ERRORS)
def test_bad_arguments_are_typed_errors(call, error, match):
    with raises(error, match=match):
        call()
