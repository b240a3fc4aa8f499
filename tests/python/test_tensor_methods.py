"""PyTorch's Tensor method spellings: the elementwise functions as methods (x.add(y), x.eq(y)),
their in-place forms (x.exp_(), x.add_(y)), and the methods of python/kiln/_tensor_methods.py
(zero_, fill_, copy_, masked_fill_, expand_as, view_as, reshape_as, type_as, mT,
is_floating_point, element_size, and kiln.mint's functions taking a tensor first)."""

import numpy as np
import pytest

import kiln
from conftest import (ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, assert_close, numpy_dtype,
                      random_array, raises)

BINARY = ["add", "sub", "mul", "div", "floor_divide", "remainder", "pow", "maximum", "minimum",
          "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"]
UNARY = ["neg", "abs", "sign", "exp", "expm1", "log", "log1p", "log2", "sqrt", "rsqrt",
         "reciprocal", "square", "sin", "cos", "tan", "tanh", "sigmoid", "relu", "silu", "erf",
         "floor", "ceil", "round", "logical_not"]
IN_PLACE_BINARY = ["add", "sub", "mul", "div", "floor_divide", "remainder", "pow"]


def _positive(shape, dtype, rng):
    # Positive operands keep every function (log, sqrt, pow, division) defined.
    return random_array(shape, dtype, rng, low=0.5, high=3.0)


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.int32])
@pytest.mark.parametrize("shapes", [((2, 3), (2, 3)), ((4, 1, 3), (5, 1)), ((3,), ())])
def test_binary_method_is_the_mint_function(name, dtype, shapes, rng):
    a = kiln.tensor(_positive(shapes[0], dtype, rng), dtype=dtype)
    b = kiln.tensor(_positive(shapes[1], dtype, rng), dtype=dtype)
    got = getattr(a, name)(b)
    want = getattr(kiln.mint, name)(a, b)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert_close(got, want.numpy())


def test_binary_methods_take_numbers_and_keyword_other(rng):
    a = kiln.tensor(rng.standard_normal((3, 4)).astype(np.float32))
    assert_close(a.add(2), a.numpy() + 2)
    assert_close(a.mul(other=0.5), a.numpy() * 0.5)
    assert_close(a.gt(0), a.numpy() > 0)
    assert a.add(2).dtype == kiln.float32  # a number is a weak scalar, as in the operators


def test_binary_method_refuses_what_is_not_an_operand():
    a = kiln.tensor([1.0, 2.0])
    with raises(TypeError, match="add"):
        a.add("one")
    with raises(kiln.ShapeError):
        a.add(kiln.tensor([1.0, 2.0, 3.0]))


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.float16])
def test_unary_in_place_writes_self_and_returns_it(name, dtype, rng):
    values = _positive((3, 5), dtype, rng)
    if name == "logical_not":
        values[0, :2] = 0
    x = kiln.tensor(values, dtype=dtype)
    want = getattr(kiln.mint, name)(x).to(dtype)
    storage = x.data_ptr()
    assert getattr(x, name + "_")() is x
    assert x.dtype == dtype and x.data_ptr() == storage
    assert_close(x, want.numpy())


def test_unary_in_place_on_a_view_writes_the_base(rng):
    base = kiln.tensor(rng.standard_normal((4, 6)))
    expected = base.numpy().copy()
    expected[:, 1::2] = np.abs(expected[:, 1::2])
    view = base[:, 1::2]
    view.abs_()
    assert_close(base, expected)


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_unary_in_place_refuses_a_result_the_dtype_cannot_hold(dtype):
    x = kiln.tensor([1, 4, 9], dtype=dtype)
    with raises(kiln.DTypeError, match=f"sqrt_: result type float32 can't be cast to the desired "
                                       f"output type {dtype.name}"):
        x.sqrt_()
    assert x.tolist() == [1, 4, 9]  # nothing written


@pytest.mark.parametrize("name", IN_PLACE_BINARY)
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.bfloat16, kiln.int64])
def test_binary_in_place_method_is_the_operator(name, dtype, rng):
    a = _positive((4, 3), dtype, rng)
    b = _positive((3,), dtype, rng)
    x = kiln.tensor(a, dtype=dtype)
    y = kiln.tensor(b, dtype=dtype)
    want = getattr(kiln.mint, name)(x, y)
    if not dtype.is_floating_point and want.dtype != dtype:  # int / int is float: refused
        with raises(kiln.DTypeError, match=f"{name}_: result type"):
            getattr(x, name + "_")(y)
        return
    assert getattr(x, name + "_")(y) is x
    assert x.dtype == dtype
    assert_close(x, want.to(dtype).numpy())


def test_binary_in_place_refuses_a_result_of_another_shape():
    x = kiln.mint.zeros([3])
    with raises(kiln.ShapeError, match=r"add_: the result has shape \[2, 3\].*of shape \[3\]"):
        x.add_(kiln.mint.ones([2, 3]))
    with raises(TypeError):
        x.add_("one")
    assert x.tolist() == [0.0, 0.0, 0.0]


def test_in_place_methods_follow_autograd_as_the_operators_do():
    w = kiln.tensor([1.0, 2.0], requires_grad=True)
    with raises(kiln.KilnValueError, match="Mul writes into a leaf tensor that requires grad"):
        w.mul_(2)
    y = (w * 1.0).exp_()  # a non-leaf: recorded
    assert y.grad_fn.name() == "Exp"
    y.sum().backward()
    assert_close(w.grad, np.exp([1.0, 2.0]))
    w.grad = None
    with kiln.no_grad():
        w.mul_(3).exp_()
    assert_close(w, np.exp(3 * np.array([1.0, 2.0], np.float32)))
    assert w.requires_grad and w.is_leaf


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_zero_fill_and_copy(dtype, rng):
    x = kiln.tensor(random_array((3, 4), dtype, rng), dtype=dtype)
    assert x.zero_() is x
    assert_close(x, np.zeros((3, 4), numpy_dtype(dtype)))
    assert x.fill_(1) is x
    assert_close(x, np.ones((3, 4), numpy_dtype(dtype)))
    x.fill_(kiln.tensor(0, dtype=dtype))
    assert_close(x, np.zeros((3, 4), numpy_dtype(dtype)))
    row = random_array((4,), dtype, rng)
    assert x.copy_(kiln.tensor(row, dtype=dtype)) is x
    assert_close(x, np.broadcast_to(row, (3, 4)))
    assert x.dtype == dtype


def test_copy_converts_the_dtype_and_writes_through_views(rng):
    base = kiln.mint.zeros([2, 4], dtype=kiln.float64)
    source = rng.standard_normal((2, 2)).astype(np.float32)
    base[:, ::2].copy_(kiln.tensor(source))
    expected = np.zeros((2, 4))
    expected[:, ::2] = source
    assert_close(base, expected)


def test_fill_and_copy_errors():
    x = kiln.mint.zeros([2, 3])
    with raises(kiln.KilnValueError, match=r"fill_: expected a number or a 0-d tensor, got a "
                                           r"tensor of shape \[3\]"):
        x.fill_(kiln.mint.ones([3]))
    with raises(kiln.ShapeError, match="cannot broadcast shape"):
        x.copy_(kiln.mint.ones([4]))
    w = kiln.mint.ones([2], dtype=kiln.float32).requires_grad_()
    with raises(kiln.KilnValueError, match="requires grad"):
        w.zero_()
    with kiln.no_grad():
        w.zero_()  # as PyTorch's initializers write weights
    assert w.tolist() == [0.0, 0.0] and w.requires_grad


def test_masked_fill_in_place(rng):
    values = rng.standard_normal((3, 4)).astype(np.float32)
    x = kiln.tensor(values)
    mask = values[0] > 0
    assert x.masked_fill_(kiln.tensor(mask), -1.0) is x
    assert_close(x, np.where(mask, -1.0, values).astype(np.float32))
    with raises(kiln.ShapeError):
        x.masked_fill_(kiln.tensor(np.ones((2, 3, 4), bool)), 0.0)


def test_shape_and_dtype_of_another_tensor(rng):
    x = kiln.tensor(rng.standard_normal((2, 3)).astype(np.float32))
    assert x.view_as(kiln.mint.zeros([3, 2])).shape == (3, 2)
    assert x.reshape_as(kiln.mint.zeros([6])).shape == (6,)
    assert x.T.reshape_as(kiln.mint.zeros([6])).shape == (6,)  # reshape copies where view cannot
    with raises(kiln.KilnError):
        x.T.view_as(kiln.mint.zeros([6]))
    assert x[:1].expand_as(kiln.mint.zeros([4, 2, 3])).shape == (4, 2, 3)
    assert x.type_as(kiln.tensor([1], dtype=kiln.int16)).dtype == kiln.int16
    assert_close(x.type_as(kiln.mint.zeros([1], dtype=kiln.float64)), x.numpy().astype(np.float64))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_is_floating_point_and_element_size(dtype):
    x = kiln.mint.zeros([2], dtype=dtype)
    assert x.is_floating_point() == (dtype in FLOAT_DTYPES)
    assert x.element_size() == x.itemsize == dtype.itemsize


def test_mT_swaps_the_last_two_dims(rng):
    values = rng.standard_normal((2, 3, 4))
    x = kiln.tensor(values)
    assert_close(x.mT, np.swapaxes(values, -1, -2))
    assert x.mT.shares_storage_with(x)
    assert_close(x[0].mT, values[0].T)
    with raises(kiln.KilnValueError, match="tensor.mT: expected a matrix or a batch of matrices"):
        kiln.tensor([1.0, 2.0]).mT


def test_mint_functions_as_methods(rng):
    values = rng.standard_normal((4, 6)).astype(np.float32)
    x = kiln.tensor(values)
    index = kiln.tensor(np.array([[0, 2], [1, 1], [5, 0], [3, 3]]))
    assert [c.shape for c in x.chunk(2)] == [(2, 6), (2, 6)]
    assert [s.shape for s in x.split(4, dim=1)] == [(4, 4), (4, 2)]
    assert_close(x.gather(1, index), np.take_along_axis(values, index.numpy(), 1))
    assert_close(x.index_select(0, kiln.tensor([3, 0])), values[[3, 0]])
    assert_close(x.masked_fill(kiln.tensor(values > 0), 0.0), np.where(values > 0, 0, values))
    assert_close(x.tril(), np.tril(values))
    assert_close(x.triu(1), np.triu(values, 1))
    scattered = kiln.mint.zeros([4, 6]).scatter(1, index, kiln.mint.ones([4, 2]))
    assert scattered.sum().item() == 6.0  # rows 1 and 3 write one element twice
    assert kiln.Tensor.gather.__doc__.endswith(kiln.mint.gather.__doc__)
    assert kiln.Tensor.chunk.__name__ == "chunk"


def test_to_takes_pytorchs_forms(rng):
    values = rng.standard_normal((2, 3))
    x = kiln.tensor(values, dtype=kiln.float32)
    assert x.to(kiln.float64).dtype == kiln.float64
    assert x.to("float16").dtype == kiln.float16
    assert x.to(dtype=kiln.bfloat16).dtype == kiln.bfloat16
    assert x.to(kiln.mint.zeros([1], dtype=kiln.int16)).dtype == kiln.int16  # other's dtype
    assert x.to("cpu").is_same(x) and x.to(device="cpu:0").is_same(x)
    assert x.to("cpu", kiln.float64).dtype == kiln.float64
    assert x.to(kiln.float32, non_blocking=True).is_same(x)
    copied = x.to(copy=True)
    assert not copied.shares_storage_with(x) and copied.dtype == kiln.float32
    assert_close(copied, values.astype(np.float32))
    assert x.cpu() is x


def test_to_copy_is_recorded_for_autograd():
    w = kiln.tensor([1.0, 2.0], requires_grad=True)
    (w.to(copy=True) * 3.0).sum().backward()
    assert_close(w.grad, np.array([3.0, 3.0], np.float32))


def test_to_refuses_other_devices_and_non_dtypes():
    x = kiln.mint.zeros([2])
    with raises(kiln.KilnValueError, match="device 'cuda:0' is not available; Kiln runs on the "
                                           "CPU"):
        x.to("cuda:0")
    with raises(kiln.KilnValueError, match="unknown device 'cpu:1'"):
        x.to("cpu:1")
    with raises(kiln.KilnValueError, match="to: unknown device 'float32'; Kiln has one device"):
        x.to(device="float32")
    with raises(kiln.DTypeError, match="expected a dtype"):
        x.to(3)


def test_data_is_a_detached_alias_and_takes_updates(rng):
    values = rng.standard_normal(3).astype(np.float32)
    w = kiln.tensor(values, requires_grad=True)
    d = w.data
    assert not d.requires_grad and d.shares_storage_with(w)
    w.data -= 1.0  # PyTorch's old update idiom: in place, then assigned back
    assert_close(w, values - 1.0)
    assert w.requires_grad and w.is_leaf
    w.data = kiln.tensor(values * 2)
    assert_close(w, values * 2)


def test_data_writes_are_seen_by_backward():
    w = kiln.tensor([1.0, 2.0], requires_grad=True)
    loss = (w * w).sum()
    w.data.mul_(2.0)
    with raises(kiln.KilnValueError, match="was changed in place"):
        loss.backward()


def test_setting_data_of_another_dtype_or_shape_is_refused():
    w = kiln.mint.zeros([2])
    with raises(kiln.KilnValueError, match=r"the new data is float32 of shape \[3\], the tensor "
                                           r"float32 of shape \[2\]"):
        w.data = kiln.mint.ones([3])
    with raises(kiln.KilnValueError, match="the new data is int64"):
        w.data = kiln.tensor([1, 2])
    with raises(kiln.KilnTypeError, match="data: expected a kiln.Tensor, got list"):
        w.data = [1.0, 2.0]
    assert w.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("name", ["add", "sub"])
def test_add_and_sub_take_alpha(name, rng):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((3,)).astype(np.float32)
    x, y = kiln.tensor(a), kiln.tensor(b)
    sign = 1 if name == "add" else -1
    want = a + sign * 0.5 * b
    assert_close(getattr(x, name)(y, alpha=0.5), want)
    assert_close(getattr(kiln.mint, name)(x, y, alpha=0.5), want)
    assert_close(getattr(x, name)(y), a + sign * b)
    z = x.clone()
    assert getattr(z, name + "_")(y, alpha=0.5) is z
    assert_close(z, want)
    i = kiln.tensor([1, 2])
    with raises(kiln.DTypeError, match=f"{name}_: for integer operands \\(int64\\) alpha must be "
                                       f"an integer, not the floating-point 0.5"):
        getattr(i, name + "_")(kiln.tensor([1, 1]), alpha=0.5)
    assert i.tolist() == [1, 2]


def test_in_place_methods_say_what_they_compute():
    assert "In place: e^x." in kiln.Tensor.exp_.__doc__  # the op's own documentation
    assert "Add(self, other)" in kiln.Tensor.add_.__doc__
    assert "alpha" in kiln.Tensor.add_.__doc__ and "alpha" not in kiln.Tensor.mul_.__doc__
    assert kiln.Tensor.zero_.__name__ == "zero_"
    assert kiln.Tensor.chunk.__doc__.startswith("kiln.mint.chunk with this tensor")


@pytest.mark.parametrize("pipeline", ["sync", "2stage", "4stage"])
def test_a_write_into_an_expanded_view_is_refused_at_the_call(pipeline):
    # In the asynchronous modes the op's own check ran later and its failure stayed on the view:
    # reading the tensor it expands showed the old values and raised nothing.
    previous = kiln.runtime.get_pipeline()
    kiln.runtime.set_pipeline(pipeline)
    try:
        x = kiln.tensor([0.0, 1.0, 2.0])
        writes = [lambda v: v.add_(1), lambda v: v.exp_(), lambda v: v.zero_(),
                  lambda v: v.__setitem__(Ellipsis, 1.0), lambda v: v.__iadd__(1.0),
                  lambda v: kiln.mint.add(x, 1.0, out=v)]
        for write in writes:
            with pytest.raises(kiln.KilnValueError, match="has elements that share memory"):
                write(x.expand((2, 3)))
        assert x.tolist() == [0.0, 1.0, 2.0]
        x.expand((2, 3))[0].add_(1)  # one row of an expansion is no overlap
        assert x.tolist() == [1.0, 2.0, 3.0]
    finally:
        kiln.runtime.set_pipeline(previous)


def test_more_pytorch_methods_match_torch(rng):
    torch = pytest.importorskip("torch")
    values = rng.standard_normal((2, 3)).astype(np.float32)
    x, tx = kiln.tensor(values), torch.tensor(values)
    assert_close(x.t(), tx.t().numpy())
    assert kiln.tensor([1.0, 2.0]).t().shape == (2,)
    for sizes in [(2, 1), (1, 2, 3), (3, 1, 2, 1)]:
        assert_close(x.repeat(*sizes), tx.repeat(*sizes).numpy())
    assert_close(x.repeat([2, 2]), tx.repeat(2, 2).numpy())
    for dims in [0, (1,), (0, 1)]:
        assert_close(x.flip(dims), tx.flip(dims).numpy())
    assert [u.shape for u in x.unbind(1)] == [(2,)] * 3
    assert_close(x.unbind(0)[1], values[1])
    assert_close(x.where(x > 0, -1.0), tx.where(tx > 0, -1.0).numpy())
    other = rng.standard_normal((3, 4)).astype(np.float32)
    assert_close(x.mm(kiln.tensor(other)), values @ other)
    batch = rng.standard_normal((2, 3, 4)).astype(np.float32)
    assert_close(kiln.tensor(batch).bmm(kiln.tensor(batch).mT), batch @ batch.transpose(0, 2, 1))
    special = kiln.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    assert special.isnan().tolist() == [False, True, False, False]
    assert special.isinf().tolist() == [False, False, True, True]
    assert special.isfinite().tolist() == [True, False, False, False]
    assert kiln.tensor([1, 2]).isinf().tolist() == [False, False]
    assert kiln.tensor([1, 2]).isfinite().tolist() == [True, True]


def test_new_factories_take_this_tensors_dtype():
    x = kiln.mint.ones([2], dtype=kiln.float64)
    assert x.new_zeros((2, 3)).dtype == kiln.float64 and x.new_zeros((2, 3)).shape == (2, 3)
    assert x.new_ones([4]).tolist() == [1.0] * 4
    assert x.new_full((2,), 7).tolist() == [7.0, 7.0] and x.new_full((2,), 7).dtype == kiln.float64
    assert x.new_empty((3,)).shape == (3,)
    assert x.new_tensor([1, 2]).dtype == kiln.float64
    assert x.new_zeros((1,), dtype=kiln.int32).dtype == kiln.int32
    assert x.new_ones((2,), requires_grad=True).requires_grad
    assert kiln.Tensor.new_zeros.__name__ == "new_zeros"


def test_in_place_helpers_of_optimizers(rng):
    torch = pytest.importorskip("torch")
    a, b, c = (rng.standard_normal(5).astype(np.float32) for _ in range(3))
    c = np.abs(c) + 0.5
    for name, args in [("lerp_", (b, 0.25)), ("addcmul_", (b, c)), ("addcdiv_", (b, c))]:
        x, tx = kiln.tensor(a), torch.tensor(a)
        kiln_args = [kiln.tensor(v) if isinstance(v, np.ndarray) else v for v in args]
        torch_args = [torch.tensor(v) if isinstance(v, np.ndarray) else v for v in args]
        assert getattr(x, name)(*kiln_args) is x
        getattr(tx, name)(*torch_args)
        assert_close(x, tx.numpy())
    x, tx = kiln.tensor(a), torch.tensor(a)
    x.addcmul_(kiln.tensor(b), kiln.tensor(c), value=-0.5)
    tx.addcmul_(torch.tensor(b), torch.tensor(c), value=-0.5)
    assert_close(x, tx.numpy())
    assert x.clamp_(-0.1, 0.1) is x
    assert_close(x, tx.clamp_(-0.1, 0.1).numpy())


def test_shape_errors_of_the_new_methods():
    x = kiln.mint.ones([2, 3, 4])
    with raises(kiln.KilnValueError, match="t\\(\\): expected a tensor of at most 2 dims"):
        x.t()
    with raises(kiln.ShapeError, match="mm: expected two 2-d tensors"):
        x.mm(x)
    with raises(kiln.KilnValueError, match="repeat: got 2 repeat counts for a 3-d tensor"):
        x.repeat(2, 2)
    with raises(kiln.KilnValueError, match="repeat: expected non-negative int counts"):
        x.repeat(1, -1, 1)


def test_repeat_and_flip_give_copies_even_when_nothing_moves():
    # Every repeated dim of size 1, or every count 1, made a view (stride 0): writing into a
    # row of cls.repeat(3, 1) wrote into cls and every row.
    cls = kiln.tensor([[0.0, 0.0]])
    tokens = cls.repeat(3, 1)
    tokens[1] = kiln.tensor([7.0, 7.0])
    assert cls.tolist() == [[0.0, 0.0]] and tokens.tolist() == [[0.0, 0.0], [7.0, 7.0], [0.0, 0.0]]
    assert tokens.add_(1) is tokens  # a tensor of its own: no expanded view
    x = kiln.tensor([[1.0, 2.0]])
    for same in (x.repeat(1, 1), x.flip([]), kiln.tensor(3.0).flip(0)):
        assert not same.shares_storage_with(x)
    assert x.repeat(np.int64(2), np.int64(1)).shape == (2, 2)  # NumPy integers count
    assert kiln.mint.ones([2]).new_zeros(2, 3).shape == (2, 3)  # sizes as separate ints


def test_python_in_place_methods_check_the_result_like_the_operators():
    ints = kiln.tensor([1, 5])
    for write in (lambda t: t.clamp_(1.5, 3.5), lambda t: t.lerp_(kiln.tensor([2, 2]), 0.5),
                  lambda t: t.addcdiv_(kiln.tensor([1, 1]), kiln.tensor([2, 2]))):
        with raises(kiln.DTypeError, match="result type float32 can't be cast to the desired "
                                           "output type int64"):
            write(ints)
    assert ints.tolist() == [1, 5]
    with raises(kiln.ShapeError, match=r"addcmul_: the result has shape \[2\] .* of shape \[1\]"):
        kiln.mint.ones([1]).addcmul_(kiln.mint.ones([2]), kiln.mint.ones([2]))
    assert ints.clamp_(2, 4).tolist() == [2, 4]  # integer bounds fit


def test_flip_and_unbind_check_their_dims():
    x = kiln.mint.ones([2, 3])
    with raises(kiln.KilnIndexError, match=r"flip: dim out of range: expected a value in "
                                          r"\[-2, 1\] for a 2-d tensor, got 3"):
        x.flip(3)
    with raises(kiln.KilnIndexError, match=r"unbind: dim out of range: .*, got -3"):
        x.unbind(-3)
    with raises(kiln.KilnIndexError, match=r"unbind: dim out of range: a 0-d tensor has no "
                                          r"dimension, got 0"):
        kiln.mint.ones(()).unbind(0)
    with raises(kiln.KilnValueError, match="flip: a dim appears more than once"):
        x.flip((0, -2))
