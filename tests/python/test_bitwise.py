"""Bitwise ops on integer and bool tensors (kiln.mint.bitwise_*, the Tensor methods and the
operators & | ^ ~ << >> with their reflected and in-place forms) against NumPy, across dtypes,
broadcasting and Python numbers; the shifts' out-of-range amounts as PyTorch defines them; jit
tracing; and the errors for floating-point and bool operands."""

import operator

import numpy as np
import pytest

import kiln
from conftest import INT_DTYPES, assert_close, numpy_dtype, raises

M = kiln.mint

LOGICAL = {  # name: (operator, in-place operator, NumPy reference)
    "bitwise_and": (operator.and_, operator.iand, np.bitwise_and),
    "bitwise_or": (operator.or_, operator.ior, np.bitwise_or),
    "bitwise_xor": (operator.xor, operator.ixor, np.bitwise_xor),
}
SHIFTS = {
    "bitwise_left_shift": (operator.lshift, operator.ilshift),
    "bitwise_right_shift": (operator.rshift, operator.irshift),
}


def full_range(shape, dtype, rng):
    """Random values over the dtype's whole range (every bit pattern), or random bools."""
    if dtype == kiln.bool_:
        return rng.random(shape) > 0.5
    info = np.iinfo(dtype.name)
    return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype.name)


def shift_reference(name, a, b):
    """PyTorch's shifts: an amount outside [0, width) shifts every bit out (0 to the left; to the
    right, 0 or -1 by the sign), where C++ and NumPy leave it undefined."""
    width = a.dtype.itemsize * 8
    inside = (b >= 0) & (b < width)
    amount = np.where(inside, b, 0).astype(a.dtype)
    if name == "bitwise_left_shift":
        return np.where(inside, np.left_shift(a, amount), 0).astype(a.dtype)
    out_of_range = np.where(a < 0, -1, 0) if np.issubdtype(a.dtype, np.signedinteger) else 0
    return np.where(inside, np.right_shift(a, amount), out_of_range).astype(a.dtype)


@pytest.mark.parametrize("dtype", [kiln.bool_] + INT_DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(LOGICAL))
def test_logical_bitwise_ops_match_numpy(name, dtype, rng):
    op, _, ref = LOGICAL[name]
    a, b = full_range((3, 5), dtype, rng), full_range((1, 5), dtype, rng)  # b broadcasts
    x, y = kiln.tensor(a, dtype=dtype), kiln.tensor(b, dtype=dtype)
    for result in (getattr(M, name)(x, y), getattr(x, name)(y), op(x, y)):
        assert result.dtype == dtype
        assert_close(result, ref(a, b))
    assert_close(op(y, x), ref(b, a))
    # A view (a transposed operand) reads through its strides.
    assert_close(op(x.t(), kiln.tensor(a.T.copy())), ref(a.T, a.T))


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(SHIFTS))
def test_shifts_match_numpy_inside_the_width(name, dtype, rng):
    op, _ = SHIFTS[name]
    width = np.dtype(dtype.name).itemsize * 8
    a = full_range((4, 6), dtype, rng)
    b = rng.integers(0, width, size=(6,)).astype(dtype.name)
    x, y = kiln.tensor(a), kiln.tensor(b)
    ref = np.left_shift if name == "bitwise_left_shift" else np.right_shift
    for result in (getattr(M, name)(x, y), getattr(x, name)(y), op(x, y)):
        assert result.dtype == dtype
        assert_close(result, ref(a, b))


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(SHIFTS))
def test_shifts_by_negative_amounts_or_past_the_width_shift_every_bit_out(name, dtype):
    info = np.iinfo(dtype.name)
    width = np.dtype(dtype.name).itemsize * 8
    a = np.array([info.min, -1 if info.min < 0 else 0, 1, info.max], dtype=dtype.name)
    amounts = [width - 1, width, min(width + 3, info.max)] + ([-1] if info.min < 0 else [])
    for amount in amounts:
        b = np.full_like(a, amount)
        got = getattr(M, name)(kiln.tensor(a), kiln.tensor(b))
        assert_close(got, shift_reference(name, a, b))
    if name == "bitwise_right_shift" and info.min < 0:
        assert M.bitwise_right_shift(kiln.tensor(a), width).tolist() == [-1, -1, 0, 0]


def test_shift_matches_pytorch_past_the_width(torch):
    a = np.array([-7, -1, 3, 2**62], dtype=np.int64)
    for b in (np.array([64, 70, -1, 63]), np.array([1, 2, 3, 1])):
        for name, op in (("bitwise_left_shift", operator.lshift),
                         ("bitwise_right_shift", operator.rshift)):
            want = op(torch.tensor(a), torch.tensor(b)).numpy()
            assert_close(getattr(M, name)(kiln.tensor(a), kiln.tensor(b)), want)


def test_bitwise_not(rng):
    for dtype in [kiln.bool_] + INT_DTYPES:
        a = full_range((2, 7), dtype, rng)
        x = kiln.tensor(a, dtype=dtype)
        for result in (M.bitwise_not(x), x.bitwise_not(), ~x):
            assert result.dtype == dtype
            assert_close(result, np.invert(a))
    y = kiln.tensor(np.array([1, -2, 0], np.int16))
    assert y.bitwise_not_() is y
    assert y.tolist() == [-2, 1, -1]


def test_python_numbers_on_either_side_are_weak(rng):
    a = full_range((5,), kiln.uint8, rng)
    x = kiln.tensor(a)
    assert (x & 0x0F).dtype == kiln.uint8
    assert_close(x & 0x0F, a & np.uint8(0x0F))
    assert_close(0xF0 | x, a | np.uint8(0xF0))
    assert_close(x ^ 0xFF, ~a)
    assert_close(x << 1, np.left_shift(a, np.uint8(1)))
    assert_close(x >> 3, np.right_shift(a, np.uint8(3)))
    assert_close(1 << kiln.tensor([0, 3, 7], dtype=kiln.uint8), np.array([1, 8, 128], np.uint8))
    m = kiln.tensor(rng.random(4) > 0.5)
    assert (m & True).dtype == kiln.bool_
    assert (m & 1).dtype == kiln.int64  # a Python int beside a bool tensor promotes, as PyTorch
    assert_close(m & 1, m.numpy().astype(np.int64))


def test_a_python_int_must_fit_the_integer_tensor_beside_it():
    x = kiln.tensor([1, 2], dtype=kiln.uint8)
    with raises(kiln.KilnValueError, match="BitwiseAnd: the Python int 256 does not fit in uint8"):
        x & 256  # would compute with 256 wrapped to 0
    with raises(kiln.KilnValueError, match="BitwiseLeftShift: the Python int 257 does not fit"):
        x << 257  # would shift by 1
    assert (x << 255).tolist() == [0, 0]


def test_mixed_dtypes_promote():
    a = kiln.tensor(np.array([0x0F, 0x70], np.int8))
    b = kiln.tensor(np.array([0x1F0, 0x3], np.int32))
    assert (a | b).dtype == kiln.int32
    assert (a | b).tolist() == [0x1FF, 0x73]
    mask = kiln.tensor([True, False])
    assert (mask ^ b).dtype == kiln.int32
    assert (mask ^ b).tolist() == [0x1F1, 0x3]


@pytest.mark.parametrize("name", sorted(LOGICAL) + sorted(SHIFTS))
def test_in_place_operators_write_through_views(name, rng):
    inplace = (LOGICAL.get(name) or SHIFTS[name])[1]
    a = rng.integers(0, 100, size=(4, 3)).astype(np.int32)
    b = rng.integers(0, 5, size=(3,)).astype(np.int32)
    base = kiln.tensor(a)
    view = base[1:3]
    assert inplace(view, kiln.tensor(b)) is view
    expected = getattr(M, name)(kiln.tensor(a[1:3]), kiln.tensor(b)).numpy()
    assert_close(base, np.concatenate([a[:1], expected, a[3:]]))
    method = getattr(view, name + "_")
    assert method(1) is view


def test_out_keyword_writes_the_given_tensor(rng):
    a, b = full_range((3,), kiln.int64, rng), full_range((3,), kiln.int64, rng)
    out = M.empty((3,), dtype=kiln.int64)
    assert M.bitwise_xor(kiln.tensor(a), kiln.tensor(b), out=out) is out
    assert_close(out, a ^ b)


def test_floating_point_operands_are_a_dtype_error():
    x, i = kiln.tensor([1.5, 2.0]), kiln.tensor([1, 2])
    with raises(kiln.DTypeError, match="BitwiseAnd: expected integer or bool operands, got "
                                       "float32 and int64"):
        x & i
    with raises(kiln.DTypeError, match="BitwiseOr: expected integer or bool operands"):
        i | 1.5  # a Python float makes the operands floating point
    with raises(kiln.DTypeError, match="BitwiseNot: expected an integer or bool tensor, got "
                                       "float32"):
        ~x
    with raises(kiln.DTypeError, match="BitwiseLeftShift: expected integer operands"):
        x << 1


def test_shifting_bools_is_a_dtype_error():
    m = kiln.tensor([True, False])
    with raises(kiln.DTypeError, match="BitwiseRightShift: expected integer operands, got bool "
                                       "and bool \\(shifting bools has no meaning"):
        m >> m
    assert_close(m.int() << 2, np.array([4, 0], np.int32))


def test_in_place_results_that_do_not_fit_are_refused_and_leave_the_data():
    mask = kiln.tensor([True, False, True])
    with raises(kiln.DTypeError, match="can't be cast to the desired output type bool"):
        mask &= kiln.tensor([1, 0, 1])
    assert mask.tolist() == [True, False, True]
    small = kiln.tensor([1, 2])
    with raises(kiln.ShapeError, match="does not fit the tensor written"):
        small |= kiln.tensor([[1, 2], [3, 4]])
    assert small.tolist() == [1, 2]


def test_bitwise_results_take_no_gradient():
    for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "BitwiseLeftShift",
               "BitwiseRightShift"):
        assert kiln.ops.op_gradient(op) == "not differentiable"
    m = kiln.tensor([1, 2, 3]) & 1
    assert not m.requires_grad


def test_numpy_operators_with_a_tensor_on_the_right(rng):
    a = full_range((4,), kiln.int16, rng)
    x = kiln.tensor(a)
    for op in (operator.and_, operator.or_, operator.xor):
        got = op(np.int16(0x0F0F), x)
        assert isinstance(got, kiln.Tensor)
        assert_close(got, op(np.int16(0x0F0F), a))
    assert_close(np.left_shift(np.int16(1), kiln.tensor(np.array([1, 2], np.int16))),
                 np.array([2, 4], np.int16))


@pytest.mark.parametrize("level", ["O0", "O1"])
def test_traced_bitwise_ops_match_eager(level, rng):
    def pack(x, y):
        return ((x & 0x0F) << 4 | (y >> 2)) ^ ~x

    a = full_range((8, 16), kiln.int32, rng)
    b = full_range((16,), kiln.int32, rng)
    x, y = kiln.tensor(a), kiln.tensor(b)
    jitted = kiln.jit(pack, jit_level=level)
    assert_close(jitted(x, y), pack(x, y).numpy())
    ref = ((a & 0x0F) << 4 | (b >> 2)) ^ ~a
    assert_close(jitted(x, y), ref.astype(numpy_dtype(kiln.int32)))
