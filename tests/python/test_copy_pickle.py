"""copy.copy, copy.deepcopy and pickle of kiln tensors, Parameters and Cells (PyTorch's semantics):
every dtype, views, requires_grad and .grad, the refused cases, tied weights, and deep-copied
models that train on their own."""

import copy
import pickle

import numpy as np
import pytest

import kiln
from conftest import ALL_DTYPES, TiedLinears, numpy_dtype, random_array, raises
from kiln import nn, optim

mint = kiln.mint

PROTOCOLS = range(pickle.HIGHEST_PROTOCOL + 1)


def pickled(obj, protocol=pickle.DEFAULT_PROTOCOL):
    return pickle.loads(pickle.dumps(obj, protocol=protocol))


def deep(obj):
    return copy.deepcopy(obj)


def assert_same_tensor_values(copied, original):
    """Same type, dtype, shape and values (NumPy's), in memory of its own."""
    assert type(copied) is type(original)
    assert copied.dtype == original.dtype and copied.shape == original.shape
    a, e = copied.numpy(), original.numpy()
    assert a.dtype == numpy_dtype(original.dtype)
    np.testing.assert_array_equal(a, e)
    assert not copied.shares_storage_with(original)


def changing(tensor):
    """A value to write into ``tensor`` that differs from every element (bool flips)."""
    if tensor.dtype == kiln.bool_:
        return mint.logical_not(tensor)
    return tensor + 1


# ---------------------------------------------------------------------------------------------
# Tensors: values and dtypes


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(2, 3), (), (0, 4), (1, 2, 3)])
def test_pickle_round_trips_every_dtype_and_protocol(rng, dtype, shape):
    values = random_array(shape, dtype, rng)
    x = kiln.tensor(values, dtype=dtype)
    for protocol in PROTOCOLS:
        y = pickled(x, protocol)
        assert_same_tensor_values(y, x)
        np.testing.assert_array_equal(y.numpy(), values)
        assert not y.requires_grad and y.is_leaf


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_deepcopy_has_its_own_memory_for_every_dtype(rng, dtype):
    values = random_array((3, 4), dtype, rng)
    x = kiln.tensor(values, dtype=dtype)
    y = deep(x)
    assert_same_tensor_values(y, x)
    y[...] = changing(y)  # writing the copy leaves the original alone
    np.testing.assert_array_equal(x.numpy(), values)
    assert not np.array_equal(y.numpy(), values)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_copy_copy_shares_memory(rng, dtype):
    values = random_array((5,), dtype, rng)
    x = kiln.tensor(values, dtype=dtype)
    y = copy.copy(x)
    assert type(y) is kiln.Tensor and y is not x
    assert y.dtype == dtype and y.shape == x.shape and y.shares_storage_with(x)
    y[...] = changing(y)  # as torch: a shallow copy is another tensor on the same memory
    np.testing.assert_array_equal(x.numpy(), y.numpy())
    assert not np.array_equal(x.numpy(), values)


def test_bfloat16_special_values_round_trip_bit_for_bit():
    # bfloat16 travels through float32, which holds each of its values exactly: infinities,
    # -0.0, a subnormal, the largest finite value and values that float16 cannot hold.
    values = np.array([np.inf, -np.inf, -0.0, 9.18355e-41, 3.3895314e38, 1 + 2 ** -7, 1e-30,
                       -65536.0], np.float32)
    x = kiln.tensor(values, dtype=kiln.bfloat16)
    bits = x.numpy().view(np.uint32)
    assert bits[-1] == np.float32(-65536.0).view(np.uint32)  # the input was exact in bfloat16
    for y in (pickled(x), deep(x)):
        assert y.dtype == kiln.bfloat16
        np.testing.assert_array_equal(y.numpy().view(np.uint32), bits)
    nan = pickled(kiln.tensor([np.nan], dtype=kiln.bfloat16))
    assert nan.dtype == kiln.bfloat16 and np.isnan(nan.numpy()[0])


def bfloat16_of_bits(bits):
    return kiln._C._bits_as(kiln.tensor(np.array(bits, np.uint16).view(np.int16)), kiln.bfloat16)


def bits_of(x):
    return [b & 0xFFFF for b in kiln._C._bits_as(x, kiln.int16).tolist()]


def test_bfloat16_signalling_nans_pickle_as_their_bits():
    # A pickle held float32 values, which the conversion back quieted (0x7F81 became 0x7FC1).
    bits = [0x7F81, 0xFF81, 0x7FC0, 0x3F80]
    for y in (pickled(bfloat16_of_bits(bits)), deep(bfloat16_of_bits(bits))):
        assert y.dtype == kiln.bfloat16 and bits_of(y) == bits
    # A pickle of Kiln 0.6 (float32 values) still loads; a new one goes through a function of
    # its own, which an older Kiln lacks, so that it fails there rather than read bits as values.
    old = kiln._tensor._rebuild(np.array([1.5, -2.0], np.float32), "bfloat16", True)
    assert old.dtype == kiln.bfloat16 and old.tolist() == [1.5, -2.0] and old.requires_grad
    assert bfloat16_of_bits(bits).__reduce__()[0] is kiln._tensor._rebuild_bits
    assert kiln.tensor([1.0]).__reduce__()[0] is kiln._tensor._rebuild  # as Kiln 0.6 wrote
    with raises(kiln.DTypeError, match="or one is bool"):  # a bool holds 0 or 1, not any byte
        kiln._C._bits_as(kiln.tensor(np.array([2], np.uint8)), kiln.bool_)


def test_tensors_past_numpys_dimensions():
    # NumPy holds 64 dims: numpy() made a 0-d object array of it, silently, and repr, tolist and
    # pickle broke on that.
    shape = [1] * 64 + [2]
    x = kiln.mint.ones(shape)
    with raises(kiln.KilnValueError, match="a NumPy array holds at most 64 dimensions; this "
                                           "tensor has 65"):
        x.numpy()
    assert repr(x).startswith("tensor(<65-d, shape [1, 1,")
    nested = x.tolist()
    for _ in range(64):
        nested = nested[0]
    assert nested == [1.0, 1.0]
    y = pickled(x)
    assert y.shape == tuple(shape) and y.reshape(-1).tolist() == [1.0, 1.0]


@pytest.mark.parametrize("make", [
    lambda base: base.T,                                     # transposed
    lambda base: base[:, 1:3],                               # a slice of each row
    lambda base: base[::2],                                  # every other row
    lambda base: base.select(1, 2),                          # one column
    lambda base: base[1:2, :1].expand(3, 4),                 # stride 0 (broadcast)
    lambda base: base.reshape(4, 3).permute(1, 0)[1:],
], ids=["T", "slice", "step", "select", "expand", "permute"])
def test_views_copy_and_pickle_as_their_values(make):
    data = np.arange(12, dtype=np.float32).reshape(3, 4) * 1.5
    base = kiln.tensor(data)
    view = make(base)
    expected = view.numpy().copy()
    for y in [pickled(view)] + [deep(view)]:
        assert y.shape == view.shape and y.is_contiguous()
        np.testing.assert_array_equal(y.numpy(), expected)
        assert not y.shares_storage_with(base)
        y[...] = -1  # own memory: the base keeps its values
        np.testing.assert_array_equal(base.numpy(), data)
    shallow = copy.copy(view)
    assert shallow.shares_storage_with(base) and shallow.stride() == view.stride()


def test_a_pickled_view_holds_only_its_own_elements():
    base = kiln.tensor(np.arange(100_000, dtype=np.float64))
    assert len(pickle.dumps(base)) > 800_000
    assert len(pickle.dumps(base[10:12])) < 1_000
    np.testing.assert_array_equal(pickled(base[10:12]).numpy(), [10.0, 11.0])


# ---------------------------------------------------------------------------------------------
# Tensors: autograd


def test_deepcopy_keeps_requires_grad_and_copies_grad():
    x = kiln.tensor([1.0, 2.0, 3.0]).requires_grad_()
    (x * x).sum().backward()
    y = deep(x)
    assert y.requires_grad and y.is_leaf and y.grad_fn is None
    np.testing.assert_array_equal(y.grad.numpy(), [2.0, 4.0, 6.0])
    assert not y.grad.shares_storage_with(x.grad)
    # The copy is a leaf of its own: its backward fills its gradient only.
    (y * 3).sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [5.0, 7.0, 9.0])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0, 6.0])
    frozen = deep(kiln.tensor([1.0]))
    assert not frozen.requires_grad and frozen.grad is None


def test_pickle_keeps_requires_grad_but_not_grad():
    x = kiln.tensor([1.0, -2.0]).requires_grad_()
    (x * 2).sum().backward()
    y = pickled(x)
    assert y.requires_grad and y.is_leaf and y.grad is None  # as torch: .grad is not pickled
    np.testing.assert_array_equal(y.numpy(), [1.0, -2.0])


def test_copy_copy_is_a_new_leaf_on_the_same_memory():
    x = kiln.tensor([1.0, 2.0]).requires_grad_()
    x.grad = kiln.tensor([9.0, 9.0])
    y = copy.copy(x)
    assert y.requires_grad and y.is_leaf and y.grad is None and y.shares_storage_with(x)
    (y * 4).sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [4.0, 4.0])
    np.testing.assert_array_equal(x.grad.numpy(), [9.0, 9.0])
    # A tensor computed by an op: the copy is detached from its graph (as torch's).
    z = copy.copy(x * 2)
    assert z.is_leaf and z.requires_grad and z.grad_fn is None
    np.testing.assert_array_equal(z.numpy(), [2.0, 4.0])


def test_deepcopy_refuses_a_non_leaf_that_requires_grad():
    x = kiln.tensor([1.0, 2.0]).requires_grad_()
    y = x * 2
    with raises(kiln.KilnValueError, match=r"only tensors created explicitly by the user "
                                           r"\(graph leaves\) support deepcopy.*t\.detach\(\)"):
        deep(y)
    with raises(kiln.KilnValueError, match="graph leaves"):
        deep({"out": y})
    np.testing.assert_array_equal(deep(y.detach()).numpy(), [2.0, 4.0])
    # Without requires_grad an op's result is a leaf, and copies.
    np.testing.assert_array_equal(deep(x.detach() * 3).numpy(), [3.0, 6.0])


def test_pickle_of_a_non_leaf_loads_as_a_leaf():
    # As torch: the values and requires_grad travel, the graph does not.
    x = kiln.tensor([1.0, 2.0]).requires_grad_()
    y = pickled(x * 2)
    assert y.is_leaf and y.requires_grad and y.grad_fn is None
    np.testing.assert_array_equal(y.numpy(), [2.0, 4.0])


def test_traced_values_refuse_deepcopy_and_pickle():
    errors = []

    @kiln.jit
    def f(x):
        for action in (copy.deepcopy, pickle.dumps):
            try:
                action(x)
            except kiln.KilnTypeError as e:
                errors.append(str(e))
        return copy.copy(x) * 2  # another handle to the traced value: nothing to read

    np.testing.assert_array_equal(f(kiln.tensor([1.0, 2.0])).numpy(), [2.0, 4.0])
    assert len(errors) == 2
    assert errors[0].startswith("cannot deep-copy a value traced by kiln.jit")
    assert errors[1].startswith("cannot pickle a value traced by kiln.jit")
    assert all("outside the jitted function" in e for e in errors)


def test_memo_keeps_a_tensor_referenced_twice_one_copy():
    x = kiln.tensor([1.0, 2.0])
    copied = deep([x, x, {"again": x}])
    assert copied[0] is copied[1] is copied[2]["again"] and copied[0] is not x
    loaded = pickled([x, x])
    assert loaded[0] is loaded[1]
    copied[0][...] = 5.0
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])


# ---------------------------------------------------------------------------------------------
# Tensor subclasses (PyTorch's keep their type and attributes through copies and pickle)


class Tagged(kiln.Tensor):
    """A subclass made as Tagged(tensor), with attributes set on the instance."""


class Scaled(kiln.Tensor):
    """A subclass whose __init__ takes an argument of its own: copies do not call it."""

    def __init__(self, data, scale):
        super().__init__(data)
        self.scale = scale


class Slotted(kiln.Tensor):
    """A subclass whose attribute is a slot (it has no __dict__)."""

    __slots__ = ("unit",)


def tagged(values, dtype=kiln.float32, requires_grad=False):
    t = Tagged(kiln.tensor(values, dtype=dtype).requires_grad_(requires_grad))
    t.tag = ["shard", 0]
    return t


@pytest.mark.parametrize("dtype, requires_grad", [
    (kiln.float32, True), (kiln.float32, False), (kiln.bfloat16, True), (kiln.int64, False),
], ids=str)
def test_subclass_deepcopy_and_pickle_keep_type_attributes_and_values(rng, dtype, requires_grad):
    x = tagged(random_array((2, 3), dtype, rng), dtype, requires_grad)
    for y in [deep(x), *[pickled(x, protocol) for protocol in PROTOCOLS]]:  # 2 and 5 among them
        assert_same_tensor_values(y, x)  # the type too
        assert y.requires_grad == requires_grad and y.is_leaf
        assert y.tag == ["shard", 0] and y.tag is not x.tag
        assert vars(y) == {"tag": ["shard", 0]}


def test_subclass_copy_copy_shares_memory_and_attributes():
    x = tagged([1.0, 2.0], requires_grad=True)
    x.grad = kiln.tensor([9.0, 9.0])
    y = copy.copy(x)
    assert type(y) is Tagged and y is not x and y.shares_storage_with(x)
    assert y.tag is x.tag and y.requires_grad and y.is_leaf and y.grad is None
    y.extra = 1  # its own __dict__: the original does not see it
    assert not hasattr(x, "extra")


def test_subclass_grad_is_deep_copied_not_pickled():
    x = tagged([1.0, -2.0], requires_grad=True)
    (x * x).sum().backward()
    y = deep(x)
    assert type(y) is Tagged and y.grad_fn is None
    np.testing.assert_array_equal(y.grad.numpy(), [2.0, -4.0])
    assert not y.grad.shares_storage_with(x.grad)
    assert pickled(x).grad is None and pickled(x).requires_grad
    with raises(kiln.KilnValueError, match="graph leaves"):  # as a plain tensor's: leaves only
        deep(Tagged(x * 2))
    loaded = pickled(Tagged(x * 2))
    assert type(loaded) is Tagged and loaded.is_leaf and loaded.tolist() == [2.0, -4.0]


@pytest.mark.parametrize("how", [deep, pickled], ids=["deepcopy", "pickle"])
def test_subclass_referenced_twice_or_by_itself_is_one_copy(how):
    x = tagged([1.0, 2.0])
    x.me = x
    copied = how([x, x, {"again": x}])
    assert copied[0] is copied[1] is copied[2]["again"] and copied[0] is not x
    assert type(copied[0]) is Tagged and copied[0].me is copied[0]
    copied[0][...] = 5.0
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])


def test_subclass_deepcopies_sharing_a_memo_are_one_copy():
    x = tagged([1.0, 2.0])
    memo = {}
    first, second = copy.deepcopy(x, memo), copy.deepcopy({"x": x}, memo)["x"]
    assert first is second and type(first) is Tagged and first.tag is memo[id(x.tag)]


def test_subclass_copies_skip_its_init_and_keep_slots():
    # As torch: the copy is rebuilt around the values, then given the attributes; __init__'s
    # own arguments are not known to the copy.
    x = Scaled(kiln.tensor([3.0]), scale=2)
    for y in (copy.copy(x), deep(x), pickled(x)):
        assert type(y) is Scaled and vars(y) == {"scale": 2} and y.tolist() == [3.0]
    s = Slotted(kiln.tensor([1.0]))
    s.unit = ["m"]
    for y in (copy.copy(s), deep(s), pickled(s)):
        assert type(y) is Slotted and y.unit == ["m"] and y.tolist() == [1.0]
    assert copy.copy(s).unit is s.unit and deep(s).unit is not s.unit
    assert not hasattr(deep(Slotted(kiln.tensor([1.0]))), "unit")


# ---------------------------------------------------------------------------------------------
# Parameter


@pytest.mark.parametrize("dtype, requires_grad", [
    (kiln.float32, True), (kiln.float32, False), (kiln.bfloat16, True), (kiln.float64, True),
    (kiln.int32, False),  # only floating-point tensors require grad
], ids=str)
def test_parameter_copies_are_parameters(rng, dtype, requires_grad):
    values = random_array((2, 3), dtype, rng)
    p = nn.Parameter(kiln.tensor(values, dtype=dtype), requires_grad=requires_grad)
    p.tag = ["shard", 0]  # attributes set on a Parameter travel with it
    for q in [deep(p), pickled(p), *[pickled(p, protocol) for protocol in PROTOCOLS]]:
        assert_same_tensor_values(q, p)
        assert isinstance(q, nn.Parameter) and q.is_leaf and q.requires_grad == requires_grad
        assert q.tag == ["shard", 0]
        assert "Parameter containing" in repr(q)
    shallow = copy.copy(p)
    assert type(shallow) is nn.Parameter and shallow is not p and shallow.shares_storage_with(p)
    assert shallow.requires_grad == requires_grad and shallow.tag is p.tag
    assert deep(p).tag is not p.tag


def test_parameter_deepcopy_and_pickle_leave_grad_behind():
    # As torch.nn.Parameter: a copied Parameter starts without a gradient.
    p = nn.Parameter(kiln.tensor([1.0, 2.0]))
    (p * p).sum().backward()
    assert p.grad is not None
    for q in (deep(p), pickled(p), copy.copy(p)):
        assert q.grad is None and q.requires_grad


# ---------------------------------------------------------------------------------------------
# Cells


def params_numpy(cell):
    return {name: p.numpy().copy() for name, p in cell.named_parameters()}


def sample(rng, *shape):
    return kiln.tensor(rng.standard_normal(shape).astype(np.float32))


@pytest.mark.parametrize("how", [deep, pickled], ids=["deepcopy", "pickle"])
def test_a_copied_linear_is_independent_and_computes_the_same(rng, how):
    net = nn.Linear(4, 3)
    before = params_numpy(net)
    twin = how(net)
    assert type(twin) is nn.Linear and twin.in_features == 4 and twin.out_features == 3
    for (name, a), (_, b) in zip(net.named_parameters(), twin.named_parameters()):
        assert isinstance(b, nn.Parameter) and b is not a and not b.shares_storage_with(a)
        assert b.is_leaf and b.requires_grad
        np.testing.assert_array_equal(b.numpy(), a.numpy(), err_msg=name)
    x = sample(rng, 5, 4)
    np.testing.assert_array_equal(twin(x).numpy(), net(x).numpy())
    expected = x.numpy() @ before["weight"].T + before["bias"]
    np.testing.assert_allclose(twin(x).numpy(), expected, rtol=1e-5, atol=1e-6)
    with kiln.no_grad():
        twin.weight[...] = 0.0
    for name, value in params_numpy(net).items():
        np.testing.assert_array_equal(value, before[name], err_msg=name)


@pytest.mark.parametrize("how", [deep, pickled], ids=["deepcopy", "pickle"])
def test_tied_weights_stay_tied_in_the_copy(rng, how):
    net = TiedLinears()
    twin = how(net)
    assert twin.dec.weight is twin.enc.weight and twin.enc.weight is not net.enc.weight
    assert [n for n, _ in twin.named_parameters()] == ["enc.weight", "enc.bias", "dec.bias"]
    x = sample(rng, 2, 3)
    np.testing.assert_array_equal(twin(x).numpy(), net(x).numpy())
    with kiln.no_grad():
        twin.enc.weight[...] = 1.0
    np.testing.assert_array_equal(twin.dec.weight.numpy(), np.ones((3, 3)))
    assert not np.array_equal(net.dec.weight.numpy(), np.ones((3, 3)))


@pytest.mark.parametrize("how", [deep, pickled], ids=["deepcopy", "pickle"])
def test_a_copied_cell_keeps_shared_cells_modes_frozen_parameters_and_tensors(how):
    net = nn.Cell()
    shared = nn.Linear(2, 2)
    net.a = shared
    net.b = shared
    net.mask = kiln.tensor([True, False])  # a plain tensor attribute copies too
    net.a.bias.requires_grad_(False)
    net.eval()
    twin = how(net)
    assert twin.a is twin.b and twin.a is not shared
    assert not twin.training and not twin.a.training
    assert not twin.a.bias.requires_grad and twin.a.weight.requires_grad
    assert_same_tensor_values(twin.mask, net.mask)
    assert [n for n, _ in twin.named_parameters()] == ["a.weight", "a.bias"]


def test_a_cell_pickled_by_kiln_0_6_loads_with_its_training_flag():
    # Kiln 0.6 kept the flag as the instance attribute "training"; a property holds it now.
    state = nn.Dropout(0.5).__dict__.copy()
    state["training"] = state.pop("_training") and False
    old = pickle.loads(pickle.dumps(nn.Dropout(0.5)))
    old.__dict__.clear()
    old.__setstate__(state)
    assert old.training is False and "training" not in vars(old)
    ones = kiln.mint.ones((100,))
    np.testing.assert_array_equal(old(ones).numpy(), ones.numpy())


def test_deepcopy_of_a_cell_leaves_the_gradients_behind(rng):
    net = nn.Linear(3, 2)
    net(sample(rng, 4, 3)).sum().backward()
    assert net.weight.grad is not None
    twin = deep(net)
    assert all(p.grad is None for p in twin.parameters())
    assert all(p.grad is not None for p in net.parameters())


def test_deepcopy_refuses_a_cell_holding_a_non_leaf():
    net = nn.Linear(2, 2)
    net.cache = net.weight * 2  # a result that requires grad, kept on the cell
    with raises(kiln.KilnValueError, match="graph leaves"):
        deep(net)


def train(net, x, target, steps, lr=0.1):
    """SGD on the mean squared error; returns the losses."""
    opt = optim.SGD(net.trainable_params(), lr=lr)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = mint.mse_loss(net(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_a_deep_copied_linear_trains_on_its_own(rng):
    net = nn.Linear(4, 2)
    x, target = sample(rng, 8, 4), sample(rng, 8, 2)
    before = params_numpy(net)
    twin = deep(net)
    train(twin, x, target, steps=1, lr=0.1)
    # One step of SGD on the mean squared error, in NumPy.
    w, b, xs, ts = before["weight"], before["bias"], x.numpy(), target.numpy()
    dy = 2 * (xs @ w.T + b - ts) / ts.size
    np.testing.assert_allclose(twin.weight.numpy(), w - 0.1 * dy.T @ xs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(twin.bias.numpy(), b - 0.1 * dy.sum(0), rtol=1e-5, atol=1e-6)
    for name, value in params_numpy(net).items():  # the original did not move
        np.testing.assert_array_equal(value, before[name], err_msg=name)
    assert all(p.grad is None for p in net.parameters())


@pytest.mark.parametrize("make", [
    lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)),
    TiedLinears,
], ids=["Sequential", "TiedLinears"])
def test_a_deep_copied_model_trains_like_the_original_would(rng, make):
    net = make()
    x = sample(rng, 16, 3 if make is TiedLinears else 4)
    target = sample(rng, 16, 3 if make is TiedLinears else 2)
    before = params_numpy(net)
    twin = deep(net)
    losses = train(twin, x, target, steps=20)
    assert losses[-1] < 0.9 * losses[0]
    for name, value in params_numpy(net).items():
        np.testing.assert_array_equal(value, before[name], err_msg=name)
    if make is TiedLinears:  # the tie holds through training: one parameter, updated once per step
        assert twin.dec.weight is twin.enc.weight
        assert len(twin.trainable_params()) == 3
    # The original, trained the same way, ends where the copy did.
    np.testing.assert_allclose(train(net, x, target, steps=20), losses, rtol=1e-6)
    for (name, a), (_, b) in zip(net.named_parameters(), twin.named_parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)
