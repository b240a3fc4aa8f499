"""kiln.nn: Parameter, Cell (registration, traversal, state_dict, train/eval, the errors of
loading and of arguments of the wrong kind), the initialisers' statistics and gradients through
cells. (Each layer's forward pass is tested in test_nn_layers.py, the kiln.mint functions the
layers call in test_nn.py and test_losses.py.)"""

import collections
import math

import numpy as np
import pytest

import kiln
from conftest import TiedLinears, close, raises
from kiln import nn

mint = kiln.mint


def t(array, dtype=None):
    return kiln.tensor(np.asarray(array), dtype=dtype)


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


@pytest.mark.parametrize("name, error, message", [
    ("a.b", kiln.KilnValueError, r"name 'a.b' contains '.', which separates the names of "
                                 r"nested cells"),
    ("", kiln.KilnValueError, r"Sequential: the name of a cell must not be empty"),
    ("training", kiln.KilnValueError, r"name 'training' is already an attribute of "
                                      r"Sequential"),
    ("construct", kiln.KilnValueError, r"name 'construct' is already an attribute"),
    ("_cells", kiln.KilnValueError, r"name '_cells' is already an attribute"),
    (1, kiln.KilnTypeError, r"the name of a cell must be a str, got int 1"),
], ids=["dotted", "empty", "training", "construct", "_cells", "int"])
def test_sequential_refuses_the_names_pytorch_add_module_refuses(name, error, message):
    # As PyTorch's add_module: "a.b" would merge with a nested "a" -> "b" in state_dict, "" would
    # drop the prefix, and "training" would replace the flag that train() and eval() set.
    with pytest.raises(error, match=message):
        nn.Sequential(collections.OrderedDict([("fc", nn.Linear(2, 2)), (name, nn.Linear(2, 2))]))


@pytest.mark.parametrize("name, match", [
    ("a.b", "contains '.'"), ("", "must not be empty"), ("_params", "already an attribute"),
    ("training", "already an attribute"), ("forward", "already an attribute")])
@pytest.mark.parametrize("value", [lambda: nn.Linear(2, 2), lambda: nn.Parameter(mint.ones(2))],
                         ids=["cell", "parameter"])
def test_registering_under_a_name_state_dict_cannot_tell_apart_is_refused(name, match, value):
    # setattr(net, "a.b", cell) merged state_dict keys; net._params = Parameter(...) replaced the
    # registry itself.
    net = nn.Cell()
    net.a = nn.Sequential(collections.OrderedDict([("b", nn.Linear(2, 2))]))
    with pytest.raises(kiln.KilnValueError, match=match):
        setattr(net, name, value())
    assert list(net.state_dict()) == ["a.b.weight", "a.b.bias"]


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


@pytest.mark.parametrize("state, kind", [
    ([("weight", np.zeros((2, 2))), ("bias", np.zeros(2))], "list"),
    (None, "NoneType"),
])
def test_load_state_dict_needs_a_mapping(state, kind):
    cell = nn.Linear(2, 2)
    with pytest.raises(kiln.KilnTypeError, match=f"load_state_dict for Linear: expected a mapping "
                                                 f"of name -> tensor, got {kind}$"):
        cell.load_state_dict(state)


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


@pytest.mark.parametrize("call, message", [
    (lambda w: nn.init.uniform_(w, 1.0, 0.0), r"uniform_: expected a <= b, got a=1.0 > b=0.0"),
    (lambda w: nn.init.uniform_(w, 0.0, math.inf), r"expected a, b and b - a to be finite "
                                                   r"float32 values .*got a=0.0, b=inf"),
    (lambda w: nn.init.uniform_(w, math.nan, 1.0), r"got a=nan, b=1.0"),
    (lambda w: nn.init.uniform_(w, -3e38, 3e38), r"got a=-3e\+38, b=3e\+38"),  # b - a overflows
    (lambda w: nn.init.uniform_(w.half(), 0.0, 1e5), r"finite float16 values"),
    (lambda w: nn.init.normal_(w, 0.0, -1.0), r"normal_: expected std >= 0, got -1.0"),
    (lambda w: nn.init.normal_(w, 0.0, math.nan), r"normal_: expected std >= 0, got nan"),
    (lambda w: nn.init.xavier_uniform_(w, gain=-1.0), r"uniform_: expected a <= b"),
    (lambda w: nn.init.xavier_normal_(w, gain=-1.0), r"normal_: expected std >= 0"),
    (lambda w: nn.init.kaiming_uniform_(w, a=math.nan), r"got a=nan, b=nan"),
], ids=["uniform a>b", "uniform inf", "uniform nan", "uniform width", "uniform float16",
        "normal std<0", "normal std nan", "xavier_uniform gain<0", "xavier_normal gain<0",
        "kaiming nan slope"])
def test_uniform_and_normal_refuse_what_pytorch_refuses(call, message):
    # Accepted, these filled the tensor with NaN, infinities or samples of U(b, a).
    w = mint.zeros(4, 5)
    with pytest.raises(kiln.KilnValueError, match=message):
        call(w)
    np.testing.assert_array_equal(w.numpy(), np.zeros((4, 5)))


def test_uniform_and_normal_accept_the_edges_pytorch_accepts():
    # an empty range, std 0, and a float64 range wider than float32's largest value
    w = mint.zeros(4, 5)
    assert np.all(nn.init.uniform_(w, 2.0, 2.0).numpy() == 2)
    assert np.all(nn.init.normal_(w, 3.0, 0.0).numpy() == 3)
    wide = nn.init.uniform_(mint.zeros(4, 5, dtype=kiln.float64), -3e38, 3e38).numpy()
    assert np.all(np.abs(wide) <= 3e38) and np.all(np.isfinite(wide))


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


# ---------------------------------------------------------------------------------------------
# Loads that must change nothing or succeed, and arguments of the wrong kind


class ExpandedParameter(kiln.nn.Cell):
    def __init__(self):
        super().__init__()
        self.a = kiln.nn.Parameter(t([1.0, 1.0, 1.0]))
        self.b = kiln.nn.Parameter(t([5.0]).expand(3))  # stride 0: its 3 elements are 1 float


def test_load_state_dict_refuses_an_expanded_parameter_before_copying_anything():
    cell = ExpandedParameter()
    with raises(kiln.KilnValueError, match=r"'b' cannot be loaded: its tensor \(shape \[3\], "
                                           r"strides \[0\]\) has elements that share memory"):
        cell.load_state_dict({"a": np.full(3, 9.0), "b": np.array([1.0, 2.0, 3.0])})
    assert cell.a.tolist() == [1.0, 1.0, 1.0] and cell.b.tolist() == [5.0, 5.0, 5.0]
    # Leaving it out is fine: only the parameters being written must take values.
    cell.load_state_dict({"a": np.full(3, 9.0)}, strict=False)
    assert cell.a.tolist() == [9.0, 9.0, 9.0]


def test_load_state_dict_reads_torch_tensors_that_require_grad():
    torch = pytest.importorskip("torch")
    linear = kiln.nn.Linear(2, 2)
    linear.load_state_dict({"weight": torch.nn.Parameter(torch.ones(2, 2)),
                            "bias": torch.zeros(2, requires_grad=True)})
    assert linear.weight.tolist() == [[1.0, 1.0], [1.0, 1.0]] and linear.bias.tolist() == [0, 0]
    assert linear.weight.requires_grad and linear.weight.is_leaf


def self_containing():
    net = kiln.nn.Sequential(kiln.nn.Linear(2, 2))
    net.loop = net
    return net


@pytest.mark.parametrize("call", [
    lambda net: net.state_dict(),
    lambda net: net.load_state_dict({}),
    lambda net: list(net.named_parameters(remove_duplicate=False)),
    lambda net: list(net.parameters()),
    lambda net: list(net.named_cells(remove_duplicate=False)),
    lambda net: list(net.modules()),
    lambda net: net.train(),
], ids=["state_dict", "load_state_dict", "named_parameters", "parameters", "named_cells",
        "modules", "train"])
def test_a_cell_that_contains_itself_is_refused(call):
    with raises(kiln.KilnValueError, match=r"^cell 'loop' contains itself: it is the top-level "
                                           r"Sequential, which holds it \(a cycle of sub-cells\)"):
        call(self_containing())


def test_a_cycle_below_the_top_is_named_and_shared_cells_are_no_cycle():
    shared = kiln.nn.Linear(2, 2)
    inner = kiln.nn.Sequential(shared, shared)
    net = kiln.nn.Sequential(inner, shared)
    assert list(net.state_dict()) == ["0.0.weight", "0.0.bias", "0.1.weight", "0.1.bias",
                                      "1.weight", "1.bias"]
    inner.append(kiln.nn.Sequential(inner))
    with raises(kiln.KilnValueError, match=r"cell '0.2.0' contains itself: it is '0'"):
        net.state_dict()


def test_cell_arguments_of_the_wrong_kind():
    with raises(kiln.KilnTypeError, match="Parameter: requires_grad must be a bool, got int 0"):
        kiln.nn.Parameter(t([1.0]), requires_grad=0)
    net = kiln.nn.Sequential(kiln.nn.ReLU(), kiln.nn.Tanh())
    with raises(kiln.KilnTypeError, match="Sequential: expected an int or a slice as index, got "
                                          "str '0'"):
        net["0"]
    assert net[np.int64(1)] is net[1]  # integers of any kind index
    with raises(kiln.KilnTypeError, match="Sequential.train: mode must be a bool, got str 'no'"):
        net.train("no")
    with raises(kiln.KilnTypeError, match="mode must be a bool, got int 0"):
        net.set_train(0)
    assert net.training and net[0].training  # left as they were
    assert not net.eval().training and not net[1].training


def test_a_cell_that_skipped_cell_init_says_so():
    class Forgetful(kiln.nn.Cell):
        def __init__(self):
            self.scale = 2.0  # not a Parameter: accepted, but Cell.__init__ never runs

    cell = Forgetful()
    message = (r"Forgetful: cannot list parameters or sub-cells before Cell.__init__\(\) "
               r"\(call super\(\).__init__\(\) first\)")
    for call in (cell.state_dict, lambda: list(cell.named_parameters())):
        with raises(kiln.KilnTypeError, match=message):
            call()
    with raises(AttributeError, match="'Forgetful' object has no attribute 'missing'"):
        cell.missing
