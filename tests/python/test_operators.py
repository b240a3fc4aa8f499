"""kiln.Tensor's operators (arithmetic, comparisons, logical, unary, in-place and reflected forms)
against NumPy: Python and NumPy scalars as operands, ints past int64, hashing, and their errors."""

import operator

import numpy as np
import pytest

import kiln
from binary_cases import BINARY, binary_inputs, binary_reference, kt
from conftest import assert_close, numpy_dtype, raises, random_array

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's references

M = kiln.mint


ARITHMETIC_OPERATORS = {
    "add": (lambda x, y: x + y, "__iadd__"),
    "sub": (lambda x, y: x - y, "__isub__"),
    "mul": (lambda x, y: x * y, "__imul__"),
    "div": (lambda x, y: x / y, "__itruediv__"),
    "floor_divide": (lambda x, y: x // y, "__ifloordiv__"),
    "remainder": (lambda x, y: x % y, "__imod__"),
    "pow": (lambda x, y: x ** y, "__ipow__"),
}


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.float16, kiln.int32], ids=str)
@pytest.mark.parametrize("name", sorted(ARITHMETIC_OPERATORS))
def test_arithmetic_operators(name, dtype, rng):
    op, inplace = ARITHMETIC_OPERATORS[name]
    a, b = binary_inputs(name, (3, 4), (3, 4), dtype, rng)
    x, y = kt(a, dtype), kt(b, dtype)
    assert_close(op(x, y), binary_reference(name, a, b, dtype))
    if name in ("floor_divide", "remainder", "pow") and dtype.is_floating_point:
        a = random_array((3, 4), dtype, rng, 0.5, 3.0)
        x = kt(a, dtype)
    if name == "pow" and not dtype.is_floating_point:
        a = random_array((3, 4), dtype, rng, 0.0, 0.5)
        x = kt(a, dtype)
    if name in ("floor_divide", "remainder") and not dtype.is_floating_point:
        a = np.where(a == 0, 1, a).astype(a.dtype)
        x = kt(a, dtype)
    s = np.asarray(2)
    assert_close(op(x, 2), binary_reference(name, a, s, dtype))
    assert_close(op(2, x), binary_reference(name, s, a, dtype))
    if BINARY[name][1] == "float" and not dtype.is_floating_point:
        with raises(kiln.DTypeError, match="can't be cast"):
            getattr(x, inplace)(y)
        return
    # In place: the same object, updated through its storage.
    target = kt(a, dtype)
    alias = target
    target = getattr(target, inplace)(2)
    assert target is alias
    assert_close(target, binary_reference(name, a, s, dtype))


def test_inplace_operators_accept_broadcast_and_strided_self(rng):
    a = rng.uniform(-3, 3, size=(4, 3)).astype(np.float32)
    x = kiln.tensor(a)
    x += kiln.tensor(np.float32([1, 2, 3]))
    assert_close(x, a + np.float32([1, 2, 3]))
    base = kiln.tensor(a)
    view = base.transpose(0, 1)
    view *= 2
    assert_close(base, a * 2)
    i = kiln.tensor([1, 2, 3], dtype=kiln.int64)
    i += kiln.tensor([1, 1, 1], dtype=kiln.int32)
    i //= 2
    assert i.dtype == kiln.int64
    assert_close(i, np.array([1, 1, 2]))


def test_unary_operators_and_methods(rng):
    a = rng.uniform(-3, 3, size=(2, 3)).astype(np.float32)
    x = kiln.tensor(a)
    assert_close(-x, -a)
    assert_close(abs(x), np.abs(a))
    assert_close(x.neg(), -a)
    assert_close(x.clamp(min=0), np.maximum(a, 0))
    assert_close(x.clamp(min=-1, max=1), np.clip(a, -1, 1))
    with raises(kiln.DTypeError, match="logical_not"):
        -kiln.tensor([True, False])


COMPARISONS = {
    "eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
    "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y,
}


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.int16, kiln.bfloat16], ids=str)
@pytest.mark.parametrize("name", sorted(COMPARISONS))
def test_comparison_operators(name, dtype, rng):
    op = COMPARISONS[name]
    a, b = binary_inputs(name, (3, 4), (3, 4), dtype, rng)
    x, y = kt(a, dtype), kt(b, dtype)
    result = op(x, y)
    assert result.dtype == kiln.bool_
    assert_close(result, binary_reference(name, a, b, dtype))
    s = np.asarray(1)
    assert_close(op(x, 1), binary_reference(name, a, s, dtype))
    assert_close(op(1, x), binary_reference(name, s, a, dtype))  # reflected by Python


def test_comparisons_with_other_objects_fall_back():
    x = kiln.tensor([1.0])
    assert (x == "text") is False
    assert (x != None) is True  # noqa: E711
    with raises(TypeError):
        x < "text"  # noqa: B015
    with raises(TypeError):
        x + "text"  # noqa: B018


def test_tensors_stay_hashable():
    x, y = kiln.tensor([1.0]), kiln.tensor([1.0])
    assert hash(x) == hash(x)
    assert len({x, y}) == 2
    assert {x: 1}[x] == 1


@pytest.mark.parametrize("big", [2**63, 2**64 + 3, -2**63 - 1])
def test_python_ints_beyond_int64_in_operators(big, rng):
    # Beside a floating-point tensor the int is a float, as in NumPy and PyTorch.
    a = rng.standard_normal(5).astype(np.float32)
    x = kiln.tensor(a)
    assert_close(x + big, a + np.float32(big))
    assert_close(big - x, np.float32(big) - a)
    assert_close(x < big, a < np.float32(big))
    np.testing.assert_array_equal((x == big).numpy(), np.zeros(5, bool))
    x *= big
    assert_close(x, a * np.float32(big))
    # Beside an integer or bool tensor no weak integer scalar holds it: a clear error, not
    # Python's fallbacks (t == big was the bool False, t + big a TypeError about the types).
    t = kiln.tensor([1, 2])
    for op in [lambda: t == big, lambda: t != big, lambda: t + big, lambda: big * t,
               lambda: t.__ipow__(big), lambda: kiln.tensor([True]) < big]:
        with raises(kiln.KilnValueError, match=f"the Python int {big} does not fit int64"):
            op()
    np.testing.assert_array_equal(t.numpy(), [1, 2])
    # Past float64 too: a KilnValueError (was Python's OverflowError), as for assignment.
    with raises(kiln.KilnValueError, match="__add__: the Python int 1000.* is past float64.s range"):
        x + 10**400
    with raises(kiln.KilnValueError, match="the Python int 1000.* is past float64's range"):
        x[0] = 10**400
    assert_close(x, a * np.float32(big))


@pytest.mark.parametrize("big", [2**63, -2**63 - 1])
def test_python_ints_beyond_int64_as_op_arguments(big):
    # An op taking a tensor or a number refuses the int by what is wrong with it (nanobind's
    # TypeError listed signatures naming int among the accepted types), before anything runs.
    x, t = kiln.tensor([1.5, 2.5]), kiln.tensor([1, 2])
    for op in [lambda: M.add(t, big), lambda: M.mul(x, big), lambda: M.exp(big),
               lambda: M.where(t > 1, t, big), lambda: M.bitwise_and(t, big)]:
        with raises(kiln.KilnValueError,
                    match=f"the Python int {big} does not fit int64, the range of Kiln's integer "
                          "scalars; use a float or a floating-point tensor"):
            op()
    np.testing.assert_array_equal(t.numpy(), [1, 2])
    np.testing.assert_array_equal(x.numpy(), [1.5, 2.5])
    assert_close(M.add(t, float(big)), np.array([1, 2]) + np.float32(big))


def test_logical_operators_on_bool_tensors(rng):
    a = rng.random((3, 4)) > 0.5
    b = rng.random((1, 4)) > 0.5
    x, y = kiln.tensor(a), kiln.tensor(b)
    assert_close(x & y, a & b)
    assert_close(x | y, a | b)
    assert_close(x ^ y, a ^ b)
    assert_close(~x, ~a)
    assert_close(True & x, a)
    assert_close(False | x, a)
    assert_close(x ^ True, ~a)
    with raises(kiln.DTypeError, match="expected integer or bool operands, got float32 and bool"):
        kiln.tensor([1.0, 2.0]) & x[0, :2]


@pytest.mark.parametrize("op", [operator.iand, operator.ior, operator.ixor], ids=str)
def test_in_place_logical_operators_write_into_the_tensor(rng, op):
    # `m &= y` bound m to a new tensor, leaving the tensor (and a view's base) unchanged.
    a = rng.random((3, 4)) > 0.5
    b = rng.random((1, 4)) > 0.5
    base = kiln.tensor(np.concatenate([a, a]))
    view = base[3:]
    assert op(view, kiln.tensor(b)) is view
    expected = op(a.copy(), b)
    assert_close(view, expected)
    assert_close(base, np.concatenate([a, expected]))
    scalar_view = base[:3]
    scalar_view ^= True
    assert_close(base[:3], ~a)
    with raises(kiln.DTypeError, match="can't be cast to the desired output type bool"):
        view &= kiln.tensor([1, 0, 1, 0])
    assert_close(base[3:], expected)  # unchanged by the refused one


@pytest.mark.parametrize("method,dtype", [
    ("float", kiln.float32), ("double", kiln.float64), ("half", kiln.float16),
    ("bfloat16", kiln.bfloat16), ("int", kiln.int32), ("long", kiln.int64), ("bool", kiln.bool_),
], ids=str)
def test_dtype_conversion_methods(method, dtype):
    x = kiln.tensor([[0.0, 1.5], [-2.0, 3.0]])
    converted = getattr(x, method)()
    assert converted.dtype == dtype
    assert_close(converted, x.numpy().astype(numpy_dtype(dtype)))
    assert x.to(dtype).dtype == dtype
    assert x.to(dtype.name).dtype == dtype


def test_unary_plus_is_the_tensor_itself():
    x = kiln.tensor([1.0, -2.0])
    assert +x is x
    with raises(kiln.DTypeError, match="operator \\+: expected a numeric tensor, got bool"):
        +kiln.tensor([True])


def test_an_in_place_result_that_does_not_fit_is_refused_at_the_call():
    # In the asynchronous modes the shape check ran later, its failure landed on the view, and
    # reading the tensor it views never raised it.
    x = kiln.tensor(np.arange(9, dtype=np.float32).reshape(3, 3))
    row = x[0]
    with pytest.raises(kiln.ShapeError, match=r"__iadd__: the result has shape \[3, 3\] .* does "
                                              r"not fit the tensor written, of shape \[3\]"):
        row += x
    flags = kiln.tensor([True, False])
    with pytest.raises(kiln.ShapeError, match=r"__iand__: the result has shape \[2, 2\]"):
        flags &= kiln.tensor([[True], [False]])
    assert x.tolist() == np.arange(9, dtype=np.float32).reshape(3, 3).tolist()
