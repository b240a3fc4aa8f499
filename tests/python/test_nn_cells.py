"""kiln.nn: Parameter, Cell (registration, traversal, state_dict, train/eval), every layer's
forward pass against a NumPy reference, and the initialisers' statistics. (The kiln.mint
functions these layers call are tested in test_nn.py.)"""

import collections
import math

import numpy as np
import pytest

import kiln
from conftest import TiedLinears, raises
from kiln import nn

mint = kiln.mint


def t(array, dtype=None):
    return kiln.tensor(np.asarray(array), dtype=dtype)


def close(actual, expected, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(actual.numpy(), dtype=np.float64),
                               np.asarray(expected, dtype=np.float64), rtol=rtol, atol=atol)


class Block(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.scale = nn.Parameter(mint.ones(3))

    def construct(self, x):
        return self.fc(x) * self.scale


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.first = Block()
        self.act = nn.ReLU()
        self.second = nn.Linear(3, 2)

    def construct(self, x):
        return self.second(self.act(self.first(x)))


# ---------------------------------------------------------------------------------------------
# Parameter


def test_parameter_wraps_a_detached_handle_to_the_same_memory():
    data = mint.ones(2, 3)
    p = nn.Parameter(data)
    assert isinstance(p, kiln.Tensor)
    assert p.requires_grad and p.is_leaf and p.grad_fn is None
    assert p.shares_storage_with(data)
    assert not data.requires_grad  # the wrapped tensor itself is not changed
    assert p.shape == (2, 3) and p.dtype == kiln.float32
    assert "Parameter containing" in repr(p)


def test_parameter_detaches_from_history_and_accepts_arrays():
    x = mint.ones(3).requires_grad_()
    y = x * 2
    p = nn.Parameter(y)
    assert p.is_leaf and p.grad_fn is None
    frozen = nn.Parameter(np.arange(4.0), requires_grad=False)
    assert not frozen.requires_grad and frozen.dtype == kiln.float64
    np.testing.assert_array_equal(frozen.numpy(), np.arange(4.0))
    # ops on a Parameter give plain tensors
    assert type(p + 1) is kiln.Tensor


# ---------------------------------------------------------------------------------------------
# Cell: registration and traversal


def test_named_parameters_are_dotted_paths_in_registration_order():
    net = Net()
    names = [name for name, _ in net.named_parameters()]
    assert names == ["first.scale", "first.fc.weight", "first.fc.bias", "second.weight",
                     "second.bias"]
    assert [p for p in net.parameters()] == [p for _, p in net.named_parameters()]
    assert list(net.parameters(recurse=False)) == []
    assert [n for n, _ in net.first.named_parameters(prefix="x")] == [
        "x.scale", "x.fc.weight", "x.fc.bias"]


def test_cells_and_named_cells():
    net = Net()
    assert list(net.cells()) == [net.first, net.act, net.second]
    assert [n for n, _ in net.named_cells()] == ["", "first", "first.fc", "act", "second"]
    assert list(net.children()) == list(net.cells())
    assert list(net.modules()) == [c for _, c in net.cells_and_names()]
    assert nn.Module is nn.Cell


def test_trainable_params_skip_frozen_parameters():
    net = Net()
    net.first.scale.requires_grad_(False)
    assert len(net.trainable_params()) == 4
    assert not any(p is net.first.scale for p in net.trainable_params())


def shared_cell_and_weight():
    """A cell holding one Linear under two names (a, b) and a third Linear (c) whose weight is
    the shared one's."""
    net = nn.Cell()
    shared = nn.Linear(2, 2)
    net.a = shared
    net.b = shared
    net.c = nn.Linear(2, 2)
    net.c.weight = shared.weight
    return net


def test_shared_parameters_and_cells_are_listed_once():
    net = shared_cell_and_weight()
    assert [n for n, _ in net.named_parameters()] == ["a.weight", "a.bias", "c.bias"]
    assert [n for n, _ in net.named_cells()] == ["", "a", "c"]


def test_assignment_rules():
    cell = nn.Linear(2, 3)
    cell.bias = None  # an empty slot stays registered but holds nothing
    assert cell.bias is None
    assert [n for n, _ in cell.named_parameters()] == ["weight"]
    with pytest.raises(kiln.KilnTypeError, match="parameter 'weight'"):
        cell.weight = mint.ones(3, 2)  # a plain tensor does not replace a parameter
    cell.bias = nn.Parameter(mint.zeros(3))
    assert [n for n, _ in cell.named_parameters()] == ["weight", "bias"]
    del cell.bias
    assert not hasattr(cell, "bias")
    cell.note = "plain attribute"
    assert cell.note == "plain attribute" and "note" not in dict(cell.named_parameters())
    # replacing a parameter by a cell of the same name moves it between registries
    cell.weight = nn.ReLU()
    assert [n for n, _ in cell.named_parameters()] == [] and list(cell.cells()) == [cell.weight]
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        cell.missing


def test_reassigning_a_name_keeps_its_place():
    # a sub-cell replaced in a named Sequential still runs first
    net = nn.Sequential(collections.OrderedDict([("fc", nn.Linear(2, 2)), ("act", nn.ReLU())]))
    net.fc = nn.Linear(2, 2)
    net.load_state_dict({"fc.weight": np.eye(2), "fc.bias": [-5.0, 0.0]})
    assert [n for n, _ in net.named_cells()] == ["", "fc", "act"]
    assert list(net.state_dict()) == ["fc.weight", "fc.bias"]
    x = np.array([[1.0, -2.0]], np.float32)
    close(net(t(x)), np.maximum(x + [-5.0, 0.0], 0))  # relu(fc(x)) = [[0, 0]]
    # a replaced parameter keeps its place in parameters() and state_dict()
    fc = nn.Linear(2, 3)
    fc.weight = nn.Parameter(mint.zeros(3, 2))
    assert [n for n, _ in fc.named_parameters()] == ["weight", "bias"]
    assert list(fc.state_dict()) == ["weight", "bias"]
    # and a replaced positional layer keeps its index
    first, second, replacement = nn.Linear(2, 2), nn.ReLU(), nn.Tanh()
    seq = nn.Sequential(first, second)
    setattr(seq, "0", replacement)
    assert seq[0] is replacement and seq[1] is second and list(seq) == [replacement, second]


def test_assigning_before_init_is_a_clear_error():
    class Broken(nn.Cell):
        def __init__(self):
            self.w = nn.Parameter(mint.ones(1))

    with pytest.raises(kiln.KilnTypeError, match="super\\(\\).__init__"):
        Broken()


def test_construct_and_forward_are_interchangeable():
    class WithForward(nn.Cell):
        def forward(self, x):
            return x + 1

    class WithConstruct(nn.Cell):
        def construct(self, x):
            return x * 2

    x = mint.ones(2)
    close(WithForward()(x), [2, 2])
    close(WithConstruct()(x), [2, 2])
    close(WithConstruct().forward(x), [2, 2])
    with pytest.raises(kiln.KilnNotImplementedError, match="neither construct"):
        nn.Cell()(x)


def test_train_and_eval_reach_every_cell():
    net = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Dropout(0.5)))
    assert net.training and net[1][0].training
    assert net.eval() is net
    assert not any(c.training for c in net.modules())
    net.set_train()
    assert all(c.training for c in net.modules())
    net.train(False)
    assert not net[1][0].training


def test_zero_grad_clears_or_zeroes():
    net = nn.Linear(2, 2)
    for p in net.parameters():
        p.grad = mint.ones(p.shape)
    net.zero_grad(set_to_none=False)
    assert all(np.all(p.grad.numpy() == 0) for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_repr_lists_sub_cells():
    text = repr(nn.Sequential(nn.Linear(2, 3), nn.GELU("tanh")))
    assert "Sequential(" in text and "(0): Linear(in_features=2, out_features=3, bias=True)" in text
    assert "(1): GELU(approximate='tanh')" in text


# ---------------------------------------------------------------------------------------------
# state_dict


def test_state_dict_round_trip():
    kiln.manual_seed(1)
    source, target = Net(), Net()
    state = source.state_dict()
    assert list(state) == [n for n, _ in source.named_parameters()]
    assert all(not v.requires_grad for v in state.values())
    assert state["second.weight"].shares_storage_with(source.second.weight)
    weight = target.second.weight
    result = target.load_state_dict(state)
    assert result == nn.LoadResult([], [])
    assert target.second.weight is weight  # loaded in place
    for (name, a), (_, b) in zip(source.named_parameters(), target.named_parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)
    x = t(np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32))
    np.testing.assert_array_equal(source(x).numpy(), target(x).numpy())


def test_load_state_dict_accepts_numpy_and_converts_dtypes():
    cell = nn.Linear(2, 2, dtype=kiln.float64)
    cell.load_state_dict({"weight": np.eye(2, dtype=np.float32), "bias": [1.0, 2.0]})
    assert cell.weight.dtype == kiln.float64
    np.testing.assert_array_equal(cell.weight.numpy(), np.eye(2))
    np.testing.assert_array_equal(cell.bias.numpy(), [1.0, 2.0])
    # float64 into float32, integers, kiln tensors of another dtype, big-endian arrays
    cell = nn.Linear(2, 2)
    cell.load_state_dict({"weight": np.arange(4).reshape(2, 2), "bias": np.array([0.5, 1.5])})
    np.testing.assert_array_equal(cell.weight.numpy(), [[0, 1], [2, 3]])
    np.testing.assert_array_equal(cell.bias.numpy(), [0.5, 1.5])
    cell.load_state_dict({"weight": t(np.ones((2, 2)), kiln.float16),
                          "bias": np.array([2.5, -1.0], dtype=">f4")})
    assert cell.weight.dtype == kiln.float32 and cell.bias.dtype == kiln.float32
    np.testing.assert_array_equal(cell.weight.numpy(), np.ones((2, 2)))
    np.testing.assert_array_equal(cell.bias.numpy(), [2.5, -1.0])


class NotAnArray:
    def __array__(self, dtype=None, copy=None):
        raise TypeError("no NumPy view of this")


@pytest.mark.parametrize("bias, message", [
    (np.zeros(2, np.uint32), r"'bias' has dtype uint32 in the state dict, expected one of bool, "
                             r"int8, .*float64 \(to convert to float32\)"),
    (np.zeros(2, np.complex64), "'bias' has dtype complex64"),
    pytest.param(np.zeros(2, np.longdouble), f"'bias' has dtype {np.dtype(np.longdouble)}",
                 marks=pytest.mark.skipif(np.dtype(np.longdouble).itemsize == 8,
                                          reason="long double is float64 here")),
    (np.array([None, None]), "'bias' has dtype object"),
    (["a", "b"], "'bias' has dtype <U1"),
    ([[1.0], [1.0, 2.0]], "'bias' is a list that NumPy cannot convert"),
    (NotAnArray(), r"'bias' is a NotAnArray that NumPy cannot convert \(no NumPy view"),
])
def test_load_state_dict_refuses_values_kiln_cannot_hold_and_changes_nothing(bias, message):
    cell = nn.Linear(2, 2)
    before = {k: v.numpy().copy() for k, v in cell.state_dict().items()}
    # "weight" comes first: a load that copied before checking "bias" would change it
    with pytest.raises(kiln.DTypeError, match=message):
        cell.load_state_dict({"weight": np.zeros((2, 2), np.float32), "bias": bias})
    for k, v in cell.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])


def test_load_state_dict_errors_change_nothing():
    net = Net()
    before = {k: v.numpy().copy() for k, v in net.state_dict().items()}
    state = {k: mint.zeros(v.shape) for k, v in net.state_dict().items()}

    missing = dict(state)
    del missing["second.bias"]
    with pytest.raises(kiln.KilnValueError, match=r"missing keys \['second.bias'\]"):
        net.load_state_dict(missing)

    extra = dict(state, **{"third.weight": mint.zeros(1)})
    with pytest.raises(kiln.KilnValueError, match=r"unexpected keys \['third.weight'\]"):
        net.load_state_dict(extra)

    wrong = dict(state, **{"first.fc.weight": mint.zeros(4, 3)})
    with pytest.raises(kiln.ShapeError, match=r"'first.fc.weight' has shape \[4, 3\].*"
                                              r"expected \[3, 4\]"):
        net.load_state_dict(wrong)
    for k, v in net.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])

    result = net.load_state_dict(dict(missing, **{"third.weight": mint.zeros(1)}), strict=False)
    assert result.missing_keys == ["second.bias"] and result.unexpected_keys == ["third.weight"]
    assert np.all(net.second.weight.numpy() == 0)
    np.testing.assert_array_equal(net.second.bias.numpy(), before["second.bias"])


# ---------------------------------------------------------------------------------------------
# Layers against NumPy


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
@pytest.mark.parametrize("bias", [True, False])
def test_linear(rng, dtype, bias):
    fc = nn.Linear(5, 3, bias=bias, dtype=dtype)
    assert fc.weight.shape == (3, 5) and fc.weight.dtype == dtype
    assert (fc.bias is not None) == bias
    x = rng.standard_normal((2, 4, 5)).astype(dtype.name)
    expected = x @ fc.weight.numpy().T + (fc.bias.numpy() if bias else 0)
    close(fc(t(x)), expected, rtol=1e-5 if dtype == kiln.float32 else 1e-12)


@pytest.mark.parametrize("activation, reference", [
    ("relu", lambda y: np.maximum(y, 0)),
    ("tanh", np.tanh),
    (None, lambda y: y),
])
def test_dense(rng, activation, reference):
    dense = nn.Dense(4, 2, activation=activation)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    y = x @ dense.weight.numpy().T + dense.bias.numpy()
    close(dense(t(x)), reference(y))
    assert nn.Dense(4, 2, has_bias=False).bias is None


def test_dense_rejects_unknown_activation():
    with pytest.raises(kiln.KilnValueError, match="unknown activation 'swish'"):
        nn.Dense(2, 2, activation="swish")


def conv2d_reference(x, w, b, stride, padding, dilation, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    x = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    oh = (x.shape[2] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (x.shape[3] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xs = x[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dilation[0]:i * dilation[0] + stride[0] * oh:stride[0],
                           j * dilation[1]:j * dilation[1] + stride[1] * ow:stride[1]]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch,
                                                         w[g * og:(g + 1) * og, :, i, j])
    return out + (b.reshape(1, -1, 1, 1) if b is not None else 0)


@pytest.mark.parametrize("kwargs", [
    dict(kernel_size=3),
    dict(kernel_size=3, padding=1, bias=False),
    dict(kernel_size=(2, 3), stride=2, padding=(1, 0), dilation=(1, 2)),
    dict(kernel_size=1, groups=2),
])
def test_conv2d(rng, kwargs):
    conv = nn.Conv2d(4, 6, dtype=kiln.float64, **kwargs)
    kh, kw = conv.kernel_size
    assert conv.weight.shape == (6, 4 // conv.groups, kh, kw)
    x = rng.standard_normal((2, 4, 7, 8))
    expected = conv2d_reference(x, conv.weight.numpy(),
                                None if conv.bias is None else conv.bias.numpy(), conv.stride,
                                conv.padding, conv.dilation, conv.groups)
    close(conv(t(x)), expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_conv2d_padding_modes(rng, mode):
    # As PyTorch: x padded in the mode (NumPy's reflect / edge / wrap), then no padding.
    conv = nn.Conv2d(3, 4, 3, padding=(1, 2), padding_mode=mode, dtype=kiln.float64)
    x = rng.standard_normal((2, 3, 5, 6))
    padded = np.pad(x, [(0, 0), (0, 0), (1, 1), (2, 2)],
                    mode={"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode])
    expected = conv2d_reference(padded, conv.weight.numpy(), conv.bias.numpy(), (1, 1), (0, 0),
                                (1, 1), 1)
    close(conv(t(x)), expected, rtol=1e-10, atol=1e-10)
    assert f"padding_mode='{mode}'" in repr(conv)
    with pytest.raises(kiln.KilnValueError, match="padding_mode must be one of 'zeros', "
                                                  "'reflect', 'replicate', 'circular', got 'same'"):
        nn.Conv2d(3, 4, 3, padding_mode="same")


def test_cells_with_zero_input_features_build_and_run(rng):
    fc = nn.Linear(0, 3)
    assert fc.weight.shape == (3, 0)
    fc.load_state_dict({"weight": np.zeros((3, 0)), "bias": [1.0, 2.0, 3.0]})
    x = np.zeros((2, 0), np.float32)
    y = fc(t(x))
    close(y, x @ fc.weight.numpy().T + fc.bias.numpy())  # the bias, once per row
    assert y.shape == (2, 3)
    conv = nn.Conv2d(0, 4, 3)
    assert conv.weight.shape == (4, 0, 3, 3)
    np.testing.assert_array_equal(conv(mint.empty(1, 0, 4, 4)).numpy(), np.zeros((1, 4, 2, 2)))


def test_conv2d_checks_groups():
    with pytest.raises(kiln.KilnValueError, match="divisible by groups"):
        nn.Conv2d(3, 6, 3, groups=2)


def test_conv2d_takes_numpy_integers(rng):
    conv = nn.Conv2d(np.int64(4), np.int32(6), np.int64(3), stride=(np.int64(2), 1),
                     padding=np.int8(1), groups=np.int64(2), dtype=kiln.float64)
    assert conv.kernel_size == (3, 3) and conv.stride == (2, 1) and conv.padding == (1, 1)
    assert all(type(v) is int for v in (conv.in_channels, conv.out_channels, conv.groups,
                                         *conv.kernel_size, *conv.stride, *conv.padding))
    x = rng.standard_normal((2, 4, 7, 8))
    expected = conv2d_reference(x, conv.weight.numpy(), conv.bias.numpy(), (2, 1), (1, 1),
                                (1, 1), 2)
    close(conv(t(x)), expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(groups=1.0), kiln.KilnTypeError, "groups must be an int, got float 1.0"),
    (dict(in_channels=2.0), kiln.KilnTypeError, "in_channels must be an int, got float 2.0"),
    (dict(out_channels="2"), kiln.KilnTypeError, "out_channels must be an int, got str '2'"),
    (dict(groups=True), kiln.KilnTypeError, "groups must be an int, got bool True"),
    (dict(kernel_size=True), kiln.KilnTypeError,
     r"kernel_size must be an int or a pair of ints, got True \(bool\)"),
    (dict(kernel_size=2.5), kiln.KilnTypeError,
     r"kernel_size must be an int or a pair of ints, got 2.5 \(float\)"),
    (dict(stride=(1, 2.0)), kiln.KilnTypeError, r"stride\[1\] must be an int, got float 2.0"),
    (dict(padding=None), kiln.KilnTypeError, r"padding must be an int or a pair of ints"),
    (dict(dilation=(1, 1, 1)), kiln.KilnValueError,
     r"dilation must be an int or a pair of ints, got \(1, 1, 1\)"),
], ids=["float-groups", "float-in", "str-out", "bool-groups", "bool-kernel", "float-kernel",
        "float-in-pair", "none-padding", "triple"])
def test_conv2d_argument_errors(kwargs, error, message):
    args = dict(in_channels=2, out_channels=2, kernel_size=3)
    args.update(kwargs)
    with raises(error, match=f"Conv2d: {message}"):
        nn.Conv2d(**args)


@pytest.mark.parametrize("shape", [8, (3, 8)])
def test_layer_norm(rng, shape):
    ln = nn.LayerNorm(shape, dtype=kiln.float64)
    dims = (shape,) if isinstance(shape, int) else shape
    np.testing.assert_array_equal(ln.weight.numpy(), np.ones(dims))
    np.testing.assert_array_equal(ln.bias.numpy(), np.zeros(dims))
    with kiln.no_grad():
        ln.weight[...] = t(rng.standard_normal(dims))
        ln.bias[...] = t(rng.standard_normal(dims))
    x = rng.standard_normal((2, 3, 8))
    axes = tuple(range(x.ndim - len(dims), x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    expected = (x - mean) / np.sqrt(var + 1e-5) * ln.weight.numpy() + ln.bias.numpy()
    close(ln(t(x)), expected, rtol=1e-10, atol=1e-10)


def test_layer_norm_without_affine_or_bias():
    assert list(nn.LayerNorm(4, elementwise_affine=False).parameters()) == []
    assert [n for n, _ in nn.LayerNorm(4, bias=False).named_parameters()] == ["weight"]


def test_rms_norm(rng):
    rms = nn.RMSNorm(6, eps=1e-6, dtype=kiln.float64)
    with kiln.no_grad():
        rms.weight[...] = t(rng.standard_normal(6))
    x = rng.standard_normal((4, 6))
    expected = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * rms.weight.numpy()
    close(rms(t(x)), expected, rtol=1e-10, atol=1e-10)
    assert list(nn.RMSNorm(6, elementwise_affine=False).parameters()) == []


def test_embedding():
    emb = nn.Embedding(10, 4)
    assert emb.weight.shape == (10, 4)
    idx = np.array([[1, 2, 9], [0, 0, 5]])
    np.testing.assert_array_equal(emb(t(idx, kiln.int64)).numpy(), emb.weight.numpy()[idx])


def test_dropout_drops_only_while_training():
    drop = nn.Dropout(0.25)
    x = mint.ones(200, 100)
    kiln.manual_seed(3)
    y = drop(x).numpy()
    zeros = np.mean(y == 0)
    assert abs(zeros - 0.25) < 0.02, zeros
    np.testing.assert_allclose(y[y != 0], 1 / 0.75, rtol=1e-6)
    drop.eval()
    np.testing.assert_array_equal(drop(x).numpy(), x.numpy())
    with pytest.raises(kiln.KilnValueError, match="p must be in"):
        nn.Dropout(1.5)


def _erf(x):
    return np.vectorize(math.erf)(x)


@pytest.mark.parametrize("cell, reference", [
    (nn.ReLU(), lambda x: np.maximum(x, 0)),
    (nn.GELU(), lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2)))),
    (nn.GELU(approximate="tanh"),
     lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    (nn.SiLU(), lambda x: x / (1 + np.exp(-x))),
    (nn.Tanh(), np.tanh),
    (nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
    (nn.Softmax(dim=-1), lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True)),
    (nn.Identity(), lambda x: x),
])
def test_activations(rng, cell, reference):
    x = rng.standard_normal((3, 5))
    close(cell(t(x)), reference(x), rtol=1e-10, atol=1e-12)
    assert list(cell.parameters()) == []


def test_gelu_checks_approximate():
    with pytest.raises(kiln.KilnValueError, match="approximate"):
        nn.GELU("fast")


def test_sequential(rng):
    a, b = nn.Linear(4, 5), nn.Linear(5, 2)
    net = nn.Sequential(a, nn.ReLU(), b)
    assert len(net) == 3 and net[0] is a and net[-1] is b and list(net)[1] is net[1]
    assert [n for n, _ in net.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    x = rng.standard_normal((3, 4)).astype(np.float32)
    hidden = np.maximum(x @ a.weight.numpy().T + a.bias.numpy(), 0)
    close(net(t(x)), hidden @ b.weight.numpy().T + b.bias.numpy())
    head = net[:2]
    assert isinstance(head, nn.Sequential) and len(head) == 2 and head[0] is a
    net.append(nn.Tanh())
    assert len(net) == 4 and isinstance(net[3], nn.Tanh)
    named = nn.Sequential(collections.OrderedDict([("fc", a), ("act", nn.ReLU())]))
    assert [n for n, _ in named.named_parameters()] == ["fc.weight", "fc.bias"]
    with pytest.raises(kiln.KilnIndexError, match="index 5 out of range"):
        net[5]
    with pytest.raises(kiln.KilnTypeError, match="expected a kiln.nn.Cell"):
        nn.Sequential(nn.ReLU(), "relu")


def mha_reference(mha, q, k, v, attn_mask=None, key_padding_mask=None, is_causal=False):
    """PyTorch's multi-head attention in NumPy, batch first: returns (out, per-head weights)."""
    e, h = mha.embed_dim, mha.num_heads
    d = e // h
    w = mha.in_proj_weight.numpy()
    bias = mha.in_proj_bias.numpy()
    b, l, _ = q.shape
    s = k.shape[1]

    def heads(x, i):
        y = x @ w[i * e:(i + 1) * e].T + bias[i * e:(i + 1) * e]
        return y.reshape(b, -1, h, d).transpose(0, 2, 1, 3)

    scores = heads(q, 0) @ heads(k, 1).transpose(0, 1, 3, 2) / math.sqrt(d)
    if attn_mask is not None:
        mask = attn_mask.reshape(-1, h, l, s) if attn_mask.ndim == 3 else attn_mask
        scores = np.where(mask, -np.inf, scores) if mask.dtype == bool else scores + mask
    if is_causal:
        scores = np.where(np.triu(np.ones((l, s), bool), 1), -np.inf, scores)
    if key_padding_mask is not None:
        scores = np.where(key_padding_mask[:, None, None, :], -np.inf, scores)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = (p @ heads(v, 2)).transpose(0, 2, 1, 3).reshape(b, l, e)
    out = out @ mha.out_proj.weight.numpy().T + mha.out_proj.bias.numpy()
    return out, p


def _randomise_biases(mha, rng):
    with kiln.no_grad():
        mha.in_proj_bias[...] = t(rng.standard_normal(mha.in_proj_bias.shape))
        mha.out_proj.bias[...] = t(rng.standard_normal(mha.out_proj.bias.shape))


@pytest.mark.parametrize("batch_first", [True, False])
def test_multihead_attention_self_and_cross(rng, batch_first):
    mha = nn.MultiheadAttention(8, 2, batch_first=batch_first, dtype=kiln.float64)
    _randomise_biases(mha, rng)
    q = rng.standard_normal((3, 4, 8))
    kv = rng.standard_normal((3, 6, 8))
    expected, p = mha_reference(mha, q, kv, kv)
    to = (lambda a: a) if batch_first else (lambda a: a.transpose(1, 0, 2))
    out, weights = mha(t(to(q)), t(to(kv)), t(to(kv)))
    close(out, to(expected), rtol=1e-10, atol=1e-10)
    close(weights, p.mean(1), rtol=1e-10, atol=1e-12)
    out, weights = mha(t(to(q)), t(to(kv)), t(to(kv)), average_attn_weights=False)
    close(weights, p, rtol=1e-10, atol=1e-12)
    assert mha(t(to(q)), t(to(q)), t(to(q)), need_weights=False)[1] is None


def test_multihead_attention_masks(rng):
    mha = nn.MultiheadAttention(8, 4, batch_first=True, dtype=kiln.float64)
    _randomise_biases(mha, rng)
    x = rng.standard_normal((2, 5, 8))
    bool_mask = rng.random((5, 5)) < 0.3
    np.fill_diagonal(bool_mask, False)  # every row keeps a key
    float_mask = rng.standard_normal((2 * 4, 5, 5))
    padding = np.array([[False] * 5, [False, False, False, True, True]])
    cases = [dict(attn_mask=bool_mask), dict(attn_mask=float_mask), dict(is_causal=True),
             dict(key_padding_mask=padding), dict(is_causal=True, key_padding_mask=padding)]
    for case in cases:
        expected, p = mha_reference(mha, x, x, x, **case)
        # the masks as kiln tensors, as NumPy arrays (bool stays bool) and, bool ones, as nested
        # lists (a list of floats would become float32)
        for convert in (t, lambda a: a, lambda a: a.tolist() if a.dtype == bool else a):
            given = {k: (convert(v) if isinstance(v, np.ndarray) else v) for k, v in case.items()}
            out, weights = mha(t(x), t(x), t(x), **given)
            close(out, expected, rtol=1e-10, atol=1e-10)
            close(weights, p.mean(1), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name, mask", [
    ("key_padding_mask", kiln.tensor([[0, 0, 1, 1]])),
    ("key_padding_mask", np.array([[0, 0, 1, 1]], np.int32)),
    ("attn_mask", mint.zeros(4, 4, dtype=kiln.int64)),
    ("attn_mask", mint.zeros(4, 4, dtype=kiln.uint8)),
], ids=["padding-int64", "padding-numpy-int32", "attn-int64", "attn-uint8"])
def test_multihead_attention_refuses_integer_masks(name, mask):
    # Refused as in PyTorch: added to the scores, a 0/1 mask meant as bool shifted the masked
    # scores by 1 and masked nothing.
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    x = mint.ones(1, 4, 8)
    dtype = mask.dtype.name if isinstance(mask, kiln.Tensor) else mask.dtype
    with raises(kiln.DTypeError, match=f"expected a bool {name} \\(True = masked\\) or a "
                                       f"floating-point one .*got dtype {dtype}"):
        mha(x, x, x, **{name: mask})


@pytest.mark.parametrize("batch_first, query, key, value, message", [
    (True, (2, 4, 6), (2, 4), (2, 4, 6), r"expected a key \[batch, seq, 6\] .*got \[2, 4\]"),
    (True, (2, 4, 6), (2, 3, 6), (3, 6), r"expected a value \[batch, seq, 6\] .*got \[3, 6\]"),
    (True, (2, 4, 6), (2, 3, 5), (2, 3, 5), r"expected a key \[batch, seq, 6\]"),
    (False, (4, 6), (4, 2, 6), (4, 2, 6),
     r"expected a query \[seq, batch, 6\] \(batch_first=False\), got \[4, 6\]"),
    (False, (4, 2, 6), (6,), (6,), r"expected a key \[seq, batch, 6\] .*got \[6\]"),
    (True, (2, 4, 6), (1, 3, 6), (1, 3, 6),
     r"expected a key and value of one shape with the query's batch size \(2\), got key "
     r"\[1, 3, 6\]"),
    (False, (4, 2, 6), (3, 2, 6), (5, 2, 6),
     r"expected a key and value of one shape .*got key \[3, 2, 6\] and value \[5, 2, 6\]"),
], ids=["2d-key", "2d-value", "key-features", "2d-query-seq-first", "1d-key-seq-first",
        "key-batch-1", "key-value-lengths"])
def test_multihead_attention_checks_query_key_and_value(batch_first, query, key, value,
                                                         message):
    mha = nn.MultiheadAttention(6, 3, batch_first=batch_first)
    with raises(kiln.ShapeError, match=f"MultiheadAttention: {message}"):
        mha(mint.ones(*query), mint.ones(*key), mint.ones(*value))


def test_multihead_attention_layout_and_errors():
    mha = nn.MultiheadAttention(6, 3)
    assert [(n, p.shape) for n, p in mha.named_parameters()] == [
        ("in_proj_weight", (18, 6)), ("in_proj_bias", (18,)), ("out_proj.weight", (6, 6)),
        ("out_proj.bias", (6,))]
    np.testing.assert_array_equal(mha.in_proj_bias.numpy(), 0)
    np.testing.assert_array_equal(mha.out_proj.bias.numpy(), 0)
    bound = math.sqrt(6 / (6 + 18))
    assert np.abs(mha.in_proj_weight.numpy()).max() <= bound
    assert [n for n, _ in nn.MultiheadAttention(6, 3, bias=False).named_parameters()] == [
        "in_proj_weight", "out_proj.weight"]
    with pytest.raises(kiln.KilnValueError, match="divisible by num_heads"):
        nn.MultiheadAttention(6, 4)
    with pytest.raises(kiln.KilnValueError, match=r"embed_dim \(0\) must be positive"):
        nn.MultiheadAttention(0, 1)
    x = mint.ones(2, 4, 6)
    with pytest.raises(kiln.ShapeError, match="attn_mask must have shape"):
        nn.MultiheadAttention(6, 3, batch_first=True)(x, x, x, attn_mask=mint.zeros(3, 3))
    with pytest.raises(kiln.ShapeError, match="key_padding_mask must have shape"):
        nn.MultiheadAttention(6, 3, batch_first=True)(
            x, x, x, key_padding_mask=mint.zeros(2, 5, dtype=kiln.bool_))
    with pytest.raises(kiln.ShapeError, match="expected a query"):
        nn.MultiheadAttention(6, 3, batch_first=True)(mint.ones(2, 4, 5), x, x)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses(rng, reduction):
    logits = rng.standard_normal((6, 4))
    labels = rng.integers(0, 4, size=6)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    ce = -log_p[np.arange(6), labels]
    reduce = {"mean": np.mean, "sum": np.sum, "none": lambda a: a}[reduction]
    close(nn.CrossEntropyLoss(reduction)(t(logits), t(labels, kiln.int64)), reduce(ce),
          rtol=1e-10, atol=1e-12)
    a, b = rng.standard_normal((3, 5)), rng.standard_normal((3, 5))
    close(nn.MSELoss(reduction)(t(a), t(b)), reduce((a - b) ** 2), rtol=1e-10, atol=1e-12)


def test_loss_options_and_errors(rng):
    logits = rng.standard_normal((4, 3))
    labels = np.array([0, 2, -100, 1])
    kept = labels != -100
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = -log_p[np.arange(4)[kept], labels[kept]].mean()
    close(nn.CrossEntropyLoss()(t(logits), t(labels, kiln.int64)), expected, rtol=1e-10)
    smoothing = 0.1
    targets = np.array([0, 2, 1, 1])
    smooth = -(1 - smoothing) * log_p[np.arange(4), targets] - smoothing * log_p.mean(-1)
    close(nn.CrossEntropyLoss(label_smoothing=smoothing)(t(logits), t(targets, kiln.int64)),
          smooth.mean(), rtol=1e-10)
    with pytest.raises(kiln.KilnValueError, match="reduction must be one of"):
        nn.MSELoss("avg")
    with pytest.raises(kiln.KilnValueError, match="reduction must be one of"):
        nn.CrossEntropyLoss("total")


# ---------------------------------------------------------------------------------------------
# Initialisers


def _stats(tensor):
    values = tensor.numpy().astype(np.float64).ravel()
    return values.min(), values.max(), values.mean(), values.std()


def test_uniform_and_normal_statistics():
    kiln.manual_seed(0)
    w = mint.empty(400, 500)
    assert nn.init.uniform_(w, -2.0, 3.0) is w
    lo, hi, mean, std = _stats(w)
    assert -2.0 <= lo and hi < 3.0
    assert abs(mean - 0.5) < 0.02 and abs(std - 5 / math.sqrt(12)) < 0.02
    nn.init.normal_(w, 1.0, 0.5)
    _, _, mean, std = _stats(w)
    assert abs(mean - 1.0) < 0.01 and abs(std - 0.5) < 0.01
    nn.init.constant_(w, 0.25)
    assert np.all(w.numpy() == 0.25)
    nn.init.zeros_(w)
    assert np.all(w.numpy() == 0)
    nn.init.ones_(w)
    assert np.all(w.numpy() == 1)


@pytest.mark.parametrize("dtype", [kiln.float64, kiln.float16, kiln.bfloat16])
def test_initialisers_fill_every_float_dtype(dtype):
    w = mint.empty(300, 300, dtype=dtype)
    nn.init.uniform_(w, -1, 1)
    lo, hi, mean, _ = _stats(w)
    assert w.dtype == dtype and -1 <= lo and hi <= 1 and abs(mean) < 0.02


def test_xavier_and_kaiming_bounds_and_spread():
    kiln.manual_seed(0)
    w = mint.empty(300, 200, 2, 2)  # fan_in 800, fan_out 1200
    nn.init.xavier_uniform_(w, gain=2.0)
    bound = 2.0 * math.sqrt(6 / 2000)
    lo, hi, _, std = _stats(w)
    assert -bound <= lo and hi <= bound and abs(std - bound / math.sqrt(3)) < 0.01 * bound
    nn.init.xavier_normal_(w)
    assert abs(_stats(w)[3] - math.sqrt(2 / 2000)) < 0.01 * math.sqrt(2 / 2000)
    nn.init.kaiming_uniform_(w, a=math.sqrt(5))
    bound = math.sqrt(2 / 6) * math.sqrt(3 / 800)  # 1 / sqrt(fan_in)
    lo, hi, _, _ = _stats(w)
    assert -bound <= lo and hi <= bound and hi > 0.99 * bound
    nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    expected = math.sqrt(2) / math.sqrt(1200)
    assert abs(_stats(w)[3] - expected) < 0.01 * expected


def test_linear_and_conv_initialise_like_pytorch():
    kiln.manual_seed(0)
    fc = nn.Linear(256, 512)
    bound = 1 / math.sqrt(256)
    for p in (fc.weight, fc.bias):
        lo, hi, _, _ = _stats(p)
        assert -bound <= lo and hi <= bound and hi > 0.95 * bound
    assert abs(_stats(fc.weight)[3] - bound / math.sqrt(3)) < 0.02 * bound
    conv = nn.Conv2d(16, 32, 3, groups=2)
    bound = 1 / math.sqrt(8 * 9)
    for p in (conv.weight, conv.bias):
        lo, hi, _, _ = _stats(p)
        assert -bound <= lo and hi <= bound
    _, _, mean, std = _stats(nn.Embedding(300, 200).weight)
    assert abs(mean) < 0.01 and abs(std - 1) < 0.01


def test_initialisation_repeats_under_manual_seed():
    kiln.manual_seed(42)
    a = nn.Linear(8, 8)
    kiln.manual_seed(42)
    b = nn.Linear(8, 8)
    np.testing.assert_array_equal(a.weight.numpy(), b.weight.numpy())
    np.testing.assert_array_equal(a.bias.numpy(), b.bias.numpy())
    assert not np.array_equal(a.weight.numpy(), nn.Linear(8, 8).weight.numpy())


RANDOM_INITIALISERS = {
    "uniform_": nn.init.uniform_,
    "normal_": nn.init.normal_,
    "xavier_uniform_": nn.init.xavier_uniform_,
    "xavier_normal_": nn.init.xavier_normal_,
    "kaiming_uniform_": nn.init.kaiming_uniform_,
    "kaiming_normal_": nn.init.kaiming_normal_,
}


@pytest.mark.parametrize("name", list(RANDOM_INITIALISERS))
@pytest.mark.parametrize("shape", [(3, 0), (0, 3), (0, 0), (4, 0, 3, 3)])
def test_initialisers_leave_zero_element_tensors_as_they_are(name, shape):
    w = mint.empty(shape)
    assert RANDOM_INITIALISERS[name](w) is w and w.shape == shape
    if name.startswith(("xavier", "kaiming")):  # the arguments are still checked
        with pytest.raises(kiln.KilnValueError, match="at least 2 dimensions"):
            RANDOM_INITIALISERS[name](mint.empty(0))


@pytest.mark.parametrize("name", list(RANDOM_INITIALISERS))
@pytest.mark.parametrize("dtype", [kiln.int32, kiln.uint8, kiln.bool_])
def test_random_initialisers_refuse_integer_and_bool_tensors(name, dtype):
    w = mint.zeros(4, 5, dtype=dtype)
    with pytest.raises(kiln.DTypeError, match=f"nn.init.{name}: expected a floating-point "
                                              f"tensor, got {dtype.name}"):
        RANDOM_INITIALISERS[name](w)
    np.testing.assert_array_equal(w.numpy(), np.zeros((4, 5)))


def test_constant_initialisers_fill_any_dtype():
    w = mint.empty(2, 3, dtype=kiln.int32)
    nn.init.constant_(w, 7)
    np.testing.assert_array_equal(w.numpy(), np.full((2, 3), 7))
    b = nn.init.ones_(mint.zeros(3, dtype=kiln.bool_))
    np.testing.assert_array_equal(b.numpy(), [True] * 3)


def test_gain_and_fan_errors():
    assert nn.init.calculate_gain("relu") == math.sqrt(2)
    assert nn.init.calculate_gain("tanh") == 5 / 3
    assert nn.init.calculate_gain("conv2d") == 1
    assert nn.init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04)
    with pytest.raises(kiln.KilnValueError, match="unsupported nonlinearity"):
        nn.init.calculate_gain("swish")
    with pytest.raises(kiln.KilnValueError, match="at least 2 dimensions"):
        nn.init.xavier_uniform_(mint.empty(5))
    with pytest.raises(kiln.KilnValueError, match="mode 'fan_avg'"):
        nn.init.kaiming_uniform_(mint.empty(5, 5), mode="fan_avg")


# ---------------------------------------------------------------------------------------------
# Gradients through cells: autograd's parameter and input gradients against finite differences


def _mha_self(mha):
    return lambda x: mha(x, x, x, is_causal=True)[0]


GRAD_CASES = {
    "Linear": (lambda: nn.Linear(3, 2, dtype=kiln.float64), (2, 3), None),
    "Dense-gelu": (lambda: nn.Dense(3, 2, activation="gelu", dtype=kiln.float64), (2, 3), None),
    "Conv2d": (lambda: nn.Conv2d(2, 2, 2, padding=1, dtype=kiln.float64), (1, 2, 3, 3), None),
    "LayerNorm": (lambda: nn.LayerNorm(4, dtype=kiln.float64), (3, 4), None),
    "RMSNorm": (lambda: nn.RMSNorm(4, dtype=kiln.float64), (3, 4), None),
    "MultiheadAttention": (lambda: nn.MultiheadAttention(4, 2, batch_first=True,
                                                         dtype=kiln.float64), (1, 3, 4),
                           _mha_self),
}


@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_gradients_through_cells(rng, name):
    make, shape, call = GRAD_CASES[name]
    kiln.manual_seed(0)
    cell = make()
    run = call(cell) if call else cell
    params = list(cell.parameters())
    with kiln.no_grad():  # nonzero biases and affine terms, so every gradient is exercised
        for p in params:
            p[...] = t(rng.uniform(-1, 1, p.shape))
    x = t(rng.standard_normal(shape))
    cotangent = None

    def loss_of(x):
        nonlocal cotangent
        y = run(x)
        if cotangent is None:
            cotangent = t(rng.standard_normal(y.shape))
        return (y * cotangent).sum()

    _, (x_grad, param_grads) = kiln.value_and_grad(loss_of, 0, params)(x)
    eps = 1e-6
    for p, g in zip(params, param_grads):
        base = p.numpy().copy()
        numeric = np.zeros(base.size)
        for i in range(base.size):
            values = []
            for sign in (1, -1):
                v = base.copy()
                v.flat[i] += sign * eps
                with kiln.no_grad():
                    p[...] = t(v)
                values.append(loss_of(x).item())
            numeric[i] = (values[0] - values[1]) / (2 * eps)
        with kiln.no_grad():
            p[...] = t(base)
        np.testing.assert_allclose(g.numpy().ravel(), numeric, rtol=1e-5, atol=1e-7)
    kiln.testing.gradcheck(run, (x.detach().requires_grad_(),))
    assert x_grad.shape == x.shape


def test_embedding_gradient_accumulates_repeated_rows():
    emb = nn.Embedding(5, 3, dtype=kiln.float64)
    idx = t(np.array([[1, 4], [1, 0]]), kiln.int64)
    emb(idx).sum().backward()
    expected = np.zeros((5, 3))
    for i in (1, 4, 1, 0):
        expected[i] += 1
    np.testing.assert_array_equal(emb.weight.grad.numpy(), expected)


def test_backward_fills_grads_and_dropout_masks_them():
    kiln.manual_seed(7)
    net = nn.Sequential(nn.Linear(4, 6), nn.Dropout(0.5), nn.Linear(6, 1))
    x = mint.ones(3, 4)
    net(x).sum().backward()
    assert all(p.grad is not None and p.grad.shape == p.shape for p in net.parameters())
    # rows of the last layer's weight gradient are the kept (scaled) hidden activations' sums
    assert np.any(net[2].weight.grad.numpy() == 0)
    net.zero_grad()
    net.eval()
    net(x).sum().backward()
    hidden = x.numpy() @ net[0].weight.numpy().T + net[0].bias.numpy()
    np.testing.assert_allclose(net[2].weight.grad.numpy(), hidden.sum(0, keepdims=True),
                               rtol=1e-5)


# ---------------------------------------------------------------------------------------------
# Tied parameters: every name in state_dict, as in PyTorch


TIED_NAMES = ["enc.weight", "enc.bias", "dec.weight", "dec.bias"]


def tied_checkpoint(rng):
    """A PyTorch-style state dict of TiedLinears: both names of the tied weight, one value."""
    weight = rng.standard_normal((3, 3)).astype(np.float32)
    return {"enc.weight": weight, "enc.bias": rng.standard_normal(3).astype(np.float32),
            "dec.weight": weight, "dec.bias": rng.standard_normal(3).astype(np.float32)}


def test_named_parameters_remove_duplicate():
    net = TiedLinears()
    assert [n for n, _ in net.named_parameters()] == ["enc.weight", "enc.bias", "dec.bias"]
    every = list(net.named_parameters(remove_duplicate=False))
    assert [n for n, _ in every] == TIED_NAMES
    assert every[2][1] is every[0][1] is net.enc.weight
    assert [n for n, _ in net.named_parameters("m", remove_duplicate=False)] == [
        "m." + n for n in TIED_NAMES]
    assert [n for n, _ in net.dec.named_parameters(recurse=False, remove_duplicate=False)] == [
        "weight", "bias"]
    # parameters() and trainable_params() list the tied weight once: an optimizer updates it once
    assert len(list(net.parameters())) == 3 and len(net.trainable_params()) == 3


def test_shared_cells_are_listed_under_every_name_without_remove_duplicate():
    net = shared_cell_and_weight()
    assert [n for n, _ in net.named_cells(remove_duplicate=False)] == ["", "a", "b", "c"]
    names = ["a.weight", "a.bias", "b.weight", "b.bias", "c.weight", "c.bias"]
    assert [n for n, _ in net.named_parameters(remove_duplicate=False)] == names
    assert list(net.state_dict()) == names
    assert [n for n, _ in net.named_modules(remove_duplicate=False)] == ["", "a", "b", "c"]


def test_state_dict_lists_every_name_of_a_tied_weight():
    net = TiedLinears()
    state = net.state_dict()
    assert list(state) == TIED_NAMES
    assert state["dec.weight"].shares_storage_with(net.enc.weight)
    assert not state["dec.weight"].requires_grad
    np.testing.assert_array_equal(state["dec.weight"].numpy(), state["enc.weight"].numpy())


def test_a_checkpoint_with_both_names_of_a_tied_weight_loads(rng):
    net = TiedLinears()
    weight = net.enc.weight
    checkpoint = tied_checkpoint(rng)
    assert net.load_state_dict(checkpoint) == nn.LoadResult([], [])
    assert net.enc.weight is weight and net.dec.weight is weight  # in place; still tied
    for name in TIED_NAMES:
        np.testing.assert_array_equal(net.state_dict()[name].numpy(), checkpoint[name])
    x = rng.standard_normal((2, 3)).astype(np.float32)
    hidden = np.tanh(x @ checkpoint["enc.weight"].T + checkpoint["enc.bias"])
    close(net(t(x)), hidden @ checkpoint["dec.weight"].T + checkpoint["dec.bias"])
    # another TiedLinears's state dict loads too (every name written, every name accepted)
    twin = TiedLinears()
    assert twin.load_state_dict(net.state_dict()) == nn.LoadResult([], [])
    np.testing.assert_array_equal(twin(t(x)).numpy(), net(t(x)).numpy())


def test_a_tied_weight_takes_the_value_of_its_last_name(rng):
    # As PyTorch: the names are loaded in state_dict order, so dec.weight's value stays.
    net = TiedLinears()
    checkpoint = dict(tied_checkpoint(rng), **{"dec.weight": np.full((3, 3), 7.0, np.float32)})
    net.load_state_dict(checkpoint)
    np.testing.assert_array_equal(net.enc.weight.numpy(), np.full((3, 3), 7.0))


def test_tied_weights_round_trip_through_a_safetensors_file(rng, tmp_path):
    net = TiedLinears()
    net.load_state_dict(tied_checkpoint(rng))
    path = tmp_path / "tied.safetensors"
    kiln.save(net.state_dict(), path)
    loaded = kiln.load(path)
    assert list(loaded) == TIED_NAMES
    twin = TiedLinears()
    assert twin.load_state_dict(loaded) == nn.LoadResult([], [])
    assert twin.dec.weight is twin.enc.weight
    for name, value in net.state_dict().items():
        np.testing.assert_array_equal(twin.state_dict()[name].numpy(), value.numpy())


def test_missing_and_unexpected_keys_count_every_name_of_a_tied_weight(rng):
    net = TiedLinears()
    before = {k: v.numpy().copy() for k, v in net.state_dict().items()}
    checkpoint = tied_checkpoint(rng)
    # A state dict with one name of the tied weight misses the other (as PyTorch's strict load).
    one_name = {k: v for k, v in checkpoint.items() if k != "dec.weight"}
    with pytest.raises(kiln.KilnValueError, match=r"missing keys \['dec.weight'\]$"):
        net.load_state_dict(one_name)
    extra = dict(checkpoint, **{"dec.scale": np.ones(3, np.float32)})
    with pytest.raises(kiln.KilnValueError, match=r"unexpected keys \['dec.scale'\]$"):
        net.load_state_dict(extra)
    # A bad value under the second name is found before anything is copied.
    bad = dict(checkpoint, **{"dec.weight": np.zeros((3, 2), np.float32)})
    with pytest.raises(kiln.ShapeError, match=r"'dec.weight' has shape \[3, 2\]"):
        net.load_state_dict(bad)
    for k, v in net.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k], err_msg=k)
    # Not strict: the keys are reported and the tied weight loads through its other name.
    result = net.load_state_dict(dict(one_name, **{"dec.scale": np.ones(3)}), strict=False)
    assert result == nn.LoadResult(["dec.weight"], ["dec.scale"])
    np.testing.assert_array_equal(net.dec.weight.numpy(), checkpoint["enc.weight"])
    np.testing.assert_array_equal(net.dec.bias.numpy(), checkpoint["dec.bias"])
