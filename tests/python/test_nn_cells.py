"""kiln.nn: Parameter, Cell (registration by assignment and by name, traversal, apply,
requires_grad_, buffers, state_dict, train/eval, the errors of loading and of arguments of the
wrong kind), the initialisers' statistics and gradients through cells. (Each layer's forward
pass is tested in test_nn_layers.py, the kiln.mint functions the layers call in test_nn.py and
test_losses.py, the containers but Sequential in test_nn_containers.py, BatchNorm in
test_batchnorm.py.)"""

import collections
import inspect
import math

import numpy as np
import pytest

import kiln
from conftest import TiedLinears, close, raises
from kiln import nn
from kiln.nn.normalization import BatchNorm2d

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
# Registration by name, traversal in PyTorch's manner, apply and requires_grad_


def test_register_parameter_and_add_module_register_by_name_none_included():
    cell = nn.Cell()
    cell.register_parameter("weight", nn.Parameter(mint.ones(2)))
    cell.register_parameter("bias", None)  # an empty slot, as a Linear without bias keeps
    cell.add_module("fc", nn.Linear(2, 2))
    cell.register_module("spare", None)
    assert cell.bias is None and cell.spare is None and isinstance(cell.fc, nn.Linear)
    assert [n for n, _ in cell.named_parameters()] == ["weight", "fc.weight", "fc.bias"]
    assert list(cell.state_dict()) == ["weight", "fc.weight", "fc.bias"]
    assert list(cell.children()) == [cell.fc]
    # registering a name again replaces it in its place, as assignment does
    cell.register_parameter("weight", nn.Parameter(mint.zeros(2)))
    cell.add_module("fc", nn.Tanh())
    cell.bias = nn.Parameter(mint.ones(2))
    assert [n for n, _ in cell.named_parameters()] == ["weight", "bias"]
    assert cell.weight.tolist() == [0, 0] and isinstance(cell.fc, nn.Tanh)


@pytest.mark.parametrize("register, name, error, message", [
    ("parameter", "fc", kiln.KilnValueError, r"Holder: cannot register a parameter as 'fc': the "
                                             r"name is already a sub-cell of Holder"),
    ("parameter", "note", kiln.KilnValueError, r"'note': the name is already an attribute"),
    ("parameter", "a.b", kiln.KilnValueError, r"name 'a.b' contains '.'"),
    ("module", "w", kiln.KilnValueError, r"Holder: cannot register a cell as 'w': the name is "
                                         r"already a parameter of Holder"),
    ("module", "buf", kiln.KilnValueError, r"the name is already a buffer of Holder"),
    ("module", "training", kiln.KilnValueError, r"name 'training' is already an attribute"),
    ("module", 3, kiln.KilnTypeError, r"the name of a cell must be a str, got int 3"),
    ("module", "", kiln.KilnValueError, r"the name of a cell must not be empty"),
], ids=["parameter over cell", "parameter over attribute", "dotted parameter", "cell over "
        "parameter", "cell over buffer", "cell as training", "int name", "empty name"])
def test_registering_by_name_refuses_a_name_another_attribute_holds(register, name, error,
                                                                      message):
    # As PyTorch's register_parameter / add_module ("attribute 'x' already exists"): assignment
    # moves a name between kinds, registration by name does not.
    class Holder(nn.Cell):
        pass

    cell = Holder()
    cell.w = nn.Parameter(mint.ones(1))
    cell.fc = nn.Linear(1, 1)
    cell.register_buffer("buf", mint.zeros(1))
    cell.note = "plain"
    value = nn.Parameter(mint.ones(1)) if register == "parameter" else nn.ReLU()
    with raises(error, match=message):
        getattr(cell, "register_" + register)(name, value)
    assert [n for n, _ in cell.named_parameters()] == ["w", "fc.weight", "fc.bias"]
    assert list(cell.cells()) == [cell.fc] and cell.note == "plain"


def test_registering_by_name_refuses_values_of_the_wrong_kind():
    cell = nn.Cell()
    with raises(kiln.KilnTypeError, match=r"Cell.register_parameter: expected a "
                                          r"kiln.nn.Parameter or None for 'w', got Tensor \(wrap "
                                          r"a tensor in kiln.nn.Parameter\)"):
        cell.register_parameter("w", mint.ones(1))
    with raises(kiln.KilnTypeError, match=r"Cell.add_module: expected a kiln.nn.Cell or None for "
                                          r"'fc', got function"):
        cell.add_module("fc", lambda x: x)
    assert list(cell.named_parameters()) == [] and list(cell.cells()) == []

    class Early(nn.Cell):
        def __init__(self):
            self.register_parameter("w", None)

    with raises(kiln.KilnTypeError, match=r"Early: cannot register a parameter 'w' before "
                                          r"Cell.__init__\(\)"):
        Early()


def test_named_children_lists_each_sub_cell_once_as_pytorch():
    shared = nn.Linear(2, 2)
    net = nn.Sequential(shared, nn.ReLU(), shared)
    net.add_module("empty", None)
    assert [n for n, _ in net.named_children()] == ["0", "1"]
    assert list(net.children()) == [shared, net[1]]
    assert list(net.cells()) == [shared, net[1], shared]  # MindSpore's cells(): every name
    torch = pytest.importorskip("torch")
    twin = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    twin.append(twin[0])
    assert [n for n, _ in twin.named_children()] == ["0", "1"]


def test_get_submodule_follows_a_dotted_path():
    net = nn.Sequential(collections.OrderedDict([("block", Block()), ("act", nn.ReLU())]))
    assert net.get_submodule("") is net
    assert net.get_submodule("block") is net.block
    assert net.get_submodule("block.fc") is net.block.fc
    assert net.block.get_submodule("fc") is net.block.fc


@pytest.mark.parametrize("target, error, message", [
    ("block.missing", AttributeError, r"Sequential.get_submodule\('block.missing'\): Block "
                                      r"'block' has no sub-cell 'missing' \(the name does not "
                                      r"exist\)"),
    ("nothing", AttributeError, r"the top-level Sequential has no sub-cell 'nothing'"),
    ("block.scale", AttributeError, r"has no sub-cell 'scale' \(the name is a parameter\)"),
    ("block.fc.bias", AttributeError, r"Linear 'block.fc' has no sub-cell 'bias' \(the name is "
                                      r"a parameter\)"),
    ("slot", AttributeError, r"has no sub-cell 'slot' \(the name is an empty slot \(None\)\)"),
    ("count", AttributeError, r"has no sub-cell 'count' \(the name is a buffer\)"),
    ("block..fc", AttributeError, r"has no sub-cell ''"),
    (["block"], kiln.KilnTypeError, r"Sequential.get_submodule: target must be a str \(a dotted "
                                    r"path such as 'layers.0'\), got list \['block'\]"),
], ids=["missing", "missing at the top", "parameter", "nested parameter", "empty slot",
        "buffer", "empty part", "list"])
def test_get_submodule_errors_name_the_part_that_is_no_cell(target, error, message):
    net = nn.Sequential(collections.OrderedDict([("block", Block())]))
    net.add_module("slot", None)
    net.register_buffer("count", mint.zeros(()))
    with raises(error, match=message):
        net.get_submodule(target)


def test_apply_visits_children_before_parents_as_pytorch():
    net = Net()
    visited = []
    assert net.apply(lambda cell: visited.append(cell)) is net
    assert visited == [net.first.fc, net.first, net.act, net.second, net]
    torch = pytest.importorskip("torch")
    twin = torch.nn.Sequential(torch.nn.Sequential(torch.nn.Linear(4, 3)), torch.nn.ReLU(),
                               torch.nn.Linear(3, 2))
    order = []
    twin.apply(order.append)
    assert order == [twin[0][0], twin[0], twin[1], twin[2], twin]


def test_apply_initialises_every_layer_once():
    # The common PyTorch idiom; a Linear held twice is scaled once (PyTorch: once per parent).
    shared = nn.Linear(2, 2)
    net = nn.Sequential(nn.Sequential(shared), shared, nn.Linear(2, 1))
    before = shared.weight.numpy().copy()

    def scale_linears(cell):
        if isinstance(cell, nn.Linear):
            with kiln.no_grad():
                cell.weight[...] = cell.weight * 2

    net.apply(scale_linears)
    np.testing.assert_array_equal(shared.weight.numpy(), before * 2)


def test_apply_refuses_a_non_callable_and_a_cycle_before_calling_fn():
    net = Net()
    with raises(kiln.KilnTypeError, match=r"Net.apply: fn must be callable, got int 3"):
        net.apply(3)
    loop = self_containing()
    visited = []
    with raises(kiln.KilnValueError, match=r"cell 'loop' contains itself"):
        loop.apply(visited.append)
    assert visited == []


def test_requires_grad_freezes_and_unfreezes_every_parameter():
    net = Net()
    assert net.first.requires_grad_(False) is net.first
    assert not any(p.requires_grad for p in net.first.parameters())
    assert net.trainable_params() == [net.second.weight, net.second.bias]
    x = t(np.ones((2, 4), np.float32))
    net(x).sum().backward()
    assert net.first.fc.weight.grad is None and net.second.weight.grad is not None
    net.requires_grad_()
    assert len(net.trainable_params()) == 5
    with raises(kiln.KilnTypeError, match=r"Net.requires_grad_: requires_grad must be a bool, "
                                          r"got int 0"):
        net.requires_grad_(0)
    assert len(net.trainable_params()) == 5


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


def test_load_state_dict_pre_hooks_rename_keys_with_their_cells_prefix():
    kiln.manual_seed(1)
    source, target = Net(), Net()
    old = {k.replace("first.fc.", "first.linear."): v for k, v in source.state_dict().items()}
    calls = []

    def rename(cell, state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
        calls.append((cell, prefix, strict, local_metadata, missing, unexpected, errors))
        for key in [k for k in state_dict if k.startswith(prefix + "linear.")]:
            state_dict[key.replace("linear.", "fc.")] = state_dict.pop(key)

    handle = target.first.register_load_state_dict_pre_hook(rename)
    assert target.load_state_dict(old) == nn.LoadResult([], [])
    assert calls == [(target.first, "first.", True, {}, [], [], [])]
    assert "first.linear.weight" in old  # the caller's mapping is left alone
    np.testing.assert_array_equal(target.first.fc.weight.numpy(), source.first.fc.weight.numpy())
    handle.remove()
    with raises(kiln.KilnValueError, match="missing keys"):
        target.load_state_dict(old)


def test_a_load_state_dict_pre_hook_fails_the_load_through_error_msgs():
    net = Net()
    before = net.second.weight.numpy().copy()
    seen = []
    net._register_load_state_dict_pre_hook(lambda *args: seen.append(args[1]))
    net.second._register_load_state_dict_pre_hook(
        lambda state_dict, prefix, meta, strict, missing, unexpected, errors:
        errors.append(f"{prefix}: refused"))
    with raises(kiln.KilnValueError, match="second.: refused"):
        net.load_state_dict({k: v * 2 for k, v in net.state_dict().items()})
    assert seen == [""]  # without the cell, with the top's prefix
    np.testing.assert_array_equal(net.second.weight.numpy(), before)
    with raises(kiln.KilnTypeError, match="callable"):
        net.register_load_state_dict_pre_hook(3)


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
# Buffers


class Counter(nn.Cell):
    """A linear map that counts its calls and keeps its last input: a persistent buffer, a
    non-persistent one and an empty slot."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.register_buffer("calls", mint.zeros((), dtype=kiln.int64))
        self.register_buffer("last", mint.zeros(2), persistent=False)
        self.register_buffer("unused", None)

    def construct(self, x):
        with kiln.no_grad():
            self.calls += 1
            self.last[...] = x[0]
        return self.fc(x)


def counter_twin(torch):
    """Counter's torch equivalent, for names."""
    twin = torch.nn.Module()
    twin.fc = torch.nn.Linear(2, 2)
    twin.register_buffer("calls", torch.zeros((), dtype=torch.int64))
    twin.register_buffer("last", torch.zeros(2), persistent=False)
    twin.register_buffer("unused", None)
    return twin


def test_buffers_are_listed_apart_from_parameters_with_pytorchs_names():
    net = nn.Sequential(Counter(), nn.ReLU(), Counter())
    assert [n for n, _ in net.named_buffers()] == ["0.calls", "0.last", "2.calls", "2.last"]
    assert list(net.buffers()) == [net[0].calls, net[0].last, net[2].calls, net[2].last]
    assert list(net.buffers(recurse=False)) == []
    assert [n for n, _ in net[0].named_buffers("c")] == ["c.calls", "c.last"]
    assert net[0].unused is None
    assert all(not any(p is b for b in net.buffers()) for p in net.parameters())
    assert len(net.trainable_params()) == 4
    # state_dict: each cell's own parameters, then its persistent buffers, then its sub-cells'
    assert list(net.state_dict()) == ["0.calls", "0.fc.weight", "0.fc.bias", "2.calls",
                                      "2.fc.weight", "2.fc.bias"]
    assert net.state_dict()["0.calls"].shares_storage_with(net[0].calls)
    torch = pytest.importorskip("torch")
    twin = torch.nn.Sequential(counter_twin(torch), torch.nn.ReLU(), counter_twin(torch))
    assert list(twin.state_dict()) == list(net.state_dict())
    assert [n for n, _ in twin.named_buffers()] == [n for n, _ in net.named_buffers()]


def test_a_buffer_shared_by_two_cells_is_listed_once_unless_asked():
    shared = mint.zeros(2)
    net = nn.Sequential(nn.Cell(), nn.Cell())
    net[0].register_buffer("b", shared)
    net[1].register_buffer("b", shared)
    assert [n for n, _ in net.named_buffers()] == ["0.b"]
    assert [n for n, _ in net.named_buffers(remove_duplicate=False)] == ["0.b", "1.b"]
    assert list(net.state_dict()) == ["0.b", "1.b"]


def test_buffers_update_in_place_and_take_no_gradient():
    counter = Counter()
    x = t(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
    counter(x).sum().backward()
    counter(x * 2)
    assert counter.calls.item() == 2 and counter.last.tolist() == [2.0, 4.0]
    assert counter.calls.grad is None and not counter.last.requires_grad
    assert counter.fc.weight.grad is not None


def test_assigning_to_a_buffer_name_replaces_the_buffer_as_pytorch():
    counter = Counter()
    fresh = mint.ones(2)
    counter.last = fresh  # replaces it, and it stays non-persistent
    assert counter.last is fresh and dict(counter.named_buffers())["last"] is fresh
    assert "last" not in counter.state_dict()
    counter.calls = None  # an empty slot: in neither buffers() nor state_dict()
    assert counter.calls is None and "calls" not in counter.state_dict()
    counter.calls = mint.full((), 5, dtype=kiln.int64)
    assert list(counter.state_dict()) == ["calls", "fc.weight", "fc.bias"]  # still persistent
    with raises(kiln.KilnTypeError, match=r"cannot assign list to buffer 'calls' \(expected a "
                                          r"kiln.Tensor or None\)"):
        counter.calls = [1, 2]
    # a Parameter or a cell takes the name over; del removes a buffer
    counter.last = nn.Parameter(mint.zeros(2))
    assert [n for n, _ in counter.named_buffers()] == ["calls"]
    assert [n for n, _ in counter.named_parameters()] == ["last", "fc.weight", "fc.bias"]
    del counter.calls
    assert list(counter.named_buffers()) == [] and not hasattr(counter, "calls")
    counter.register_buffer("last2", mint.zeros(1), persistent=False)
    counter.register_buffer("last2", mint.ones(1))  # registering again: persistent now
    assert "last2" in counter.state_dict()
    torch = pytest.importorskip("torch")
    twin = counter_twin(torch)
    twin.last = torch.ones(2)
    twin.calls = None
    assert list(twin.state_dict()) == ["fc.weight", "fc.bias"]


@pytest.mark.parametrize("name, tensor, persistent, error, message", [
    ("fc", mint.zeros(1), True, kiln.KilnValueError, r"Counter: cannot register a buffer as "
                                                     r"'fc': the name is already a sub-cell"),
    ("note", mint.zeros(1), True, kiln.KilnValueError, r"'note': the name is already an "
                                                       r"attribute of Counter"),
    ("a.b", mint.zeros(1), True, kiln.KilnValueError, r"name 'a.b' contains '.'"),
    ("", mint.zeros(1), True, kiln.KilnValueError, r"the name of a buffer must not be empty"),
    ("training", mint.zeros(1), True, kiln.KilnValueError, r"'training' is already an attribute"),
    ("_buffers", mint.zeros(1), True, kiln.KilnValueError, r"'_buffers' is already an attribute"),
    (1, mint.zeros(1), True, kiln.KilnTypeError, r"the name of a buffer must be a str, got int"),
    ("b", [0.0], True, kiln.KilnTypeError, r"Counter.register_buffer: expected a kiln.Tensor or "
                                           r"None for 'b', got list"),
    ("b", nn.Parameter(mint.zeros(1)), True, kiln.KilnTypeError,
     r"'b' is a kiln.nn.Parameter; register it with register_parameter"),
    ("b", mint.zeros(1), 1, kiln.KilnTypeError, r"persistent must be a bool, got int 1"),
], ids=["sub-cell", "attribute", "dotted", "empty", "training", "_buffers", "int name", "list",
        "parameter", "int persistent"])
def test_register_buffer_refuses_bad_names_and_values(name, tensor, persistent, error, message):
    counter = Counter()
    counter.note = "plain"
    with raises(error, match=message):
        counter.register_buffer(name, tensor, persistent)
    assert [n for n, _ in counter.named_buffers()] == ["calls", "last"]


def test_register_buffer_before_cell_init_is_a_clear_error():
    class Early(nn.Cell):
        def __init__(self):
            self.register_buffer("b", mint.zeros(1))

    with raises(kiln.KilnTypeError, match=r"Early: cannot register a buffer 'b' before "
                                          r"Cell.__init__\(\)"):
        Early()


def test_load_state_dict_copies_persistent_buffers_in_place():
    counter = Counter()
    calls = counter.calls
    state = {k: v.numpy().copy() for k, v in counter.state_dict().items()}
    state["calls"] = np.array(7.0)  # converted to the buffer's int64
    assert counter.load_state_dict(state) == nn.LoadResult([], [])
    assert counter.calls is calls and calls.item() == 7 and calls.dtype == kiln.int64
    # a non-persistent buffer's name is unexpected, a persistent one's missing, as in PyTorch
    with raises(kiln.KilnValueError, match=r"missing keys \['calls'\] and unexpected keys "
                                           r"\['last'\]"):
        counter.load_state_dict({"fc.weight": state["fc.weight"], "fc.bias": state["fc.bias"],
                                 "last": np.ones(2)})
    result = counter.load_state_dict({"calls": np.array(3), "last": np.ones(2)}, strict=False)
    assert result == nn.LoadResult(["fc.weight", "fc.bias"], ["last"])
    assert calls.item() == 3 and counter.last.tolist() == [0, 0]
    # a buffer of the wrong shape changes nothing
    with raises(kiln.ShapeError, match=r"'calls' has shape \[2\] in the state dict, expected \[\]"):
        counter.load_state_dict(dict(state, **{"fc.bias": np.zeros(2), "calls": np.ones(2)}))
    assert calls.item() == 3 and counter.fc.bias.tolist() == state["fc.bias"].tolist()


def test_a_torch_state_dict_with_buffers_loads():
    torch = pytest.importorskip("torch")
    twin = counter_twin(torch)
    twin.calls += 4
    counter = Counter()
    assert counter.load_state_dict(twin.state_dict()) == nn.LoadResult([], [])
    assert counter.calls.item() == 4
    np.testing.assert_array_equal(counter.fc.weight.numpy(), twin.fc.weight.detach().numpy())


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_buffers_copy_with_their_cell(how):
    import copy
    import pickle

    counter = Counter()
    counter(t(np.ones((1, 2), np.float32)))
    twin = copy.deepcopy(counter) if how == "deepcopy" else pickle.loads(pickle.dumps(counter))
    assert [n for n, _ in twin.named_buffers()] == ["calls", "last"] and twin.unused is None
    assert list(twin.state_dict()) == list(counter.state_dict())  # "last" still non-persistent
    assert twin.calls.item() == 1 and not twin.calls.shares_storage_with(counter.calls)
    twin(t(np.ones((1, 2), np.float32)))
    assert twin.calls.item() == 2 and counter.calls.item() == 1


def test_a_cell_pickled_before_buffers_existed_loads():
    import pickle

    old = pickle.loads(pickle.dumps(nn.Linear(2, 2)))
    state = {k: v for k, v in vars(old).items() if k not in ("_buffers", "_non_persistent")}
    old.__dict__.clear()
    old.__setstate__(state)
    assert list(old.named_buffers()) == [] and list(old.state_dict()) == ["weight", "bias"]
    old.register_buffer("b", mint.zeros(1), persistent=False)
    assert [n for n, _ in old.named_buffers()] == ["b"]


@pytest.mark.parametrize("backend", ["kiln_cpu", "reference"])
def test_a_jitted_function_updates_buffers_in_place_at_every_call(backend):
    counter = Counter()
    step = kiln.jit(lambda x: counter(x), backend=backend)
    for i in range(1, 4):
        x = t(np.full((2, 2), float(i), np.float32))
        np.testing.assert_allclose(step(x).numpy(), counter.fc(x).numpy(), rtol=1e-6)
        assert counter.calls.item() == i and counter.last.tolist() == [i, i]
    assert step.cache_info().misses == 1


def test_a_buffer_replaced_outside_is_not_seen_by_a_jitted_function():
    # Documented (kiln/nn/cell.py, kiln/jit.py): the graph reads the tensor it captured.
    counter = Counter()
    step = kiln.jit(lambda x: counter(x))
    step(t(np.ones((1, 2), np.float32)))
    captured = counter.calls
    counter.calls = mint.zeros((), dtype=kiln.int64)
    step(t(np.ones((1, 2), np.float32)))
    assert captured.item() == 2 and counter.calls.item() == 0


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


# uniform_ and normal_ are the Tensor methods under no_grad: their errors name a and b "from"
# and "to", as PyTorch's do.
@pytest.mark.parametrize("call, message", [
    (lambda w: nn.init.uniform_(w, 1.0, 0.0),
     r"^uniform_: expected from <= to, got from=1.0 > to=0.0"),
    (lambda w: nn.init.uniform_(w, 0.0, math.inf), r"expected from, to and to - from to be "
                                                   r"finite float32 values .*got from=0.0, to=inf"),
    (lambda w: nn.init.uniform_(w, math.nan, 1.0), r"got from=nan, to=1.0"),
    # to - from overflows
    (lambda w: nn.init.uniform_(w, -3e38, 3e38), r"got from=-3e\+38, to=3e\+38"),
    (lambda w: nn.init.uniform_(w.half(), 0.0, 1e5), r"finite float16 values"),
    (lambda w: nn.init.normal_(w, 0.0, -1.0), r"^normal_: expected std >= 0, got -1.0"),
    (lambda w: nn.init.normal_(w, 0.0, math.nan), r"normal_: expected std >= 0, got nan"),
    (lambda w: nn.init.xavier_uniform_(w, gain=-1.0), r"uniform_: expected from <= to"),
    (lambda w: nn.init.xavier_normal_(w, gain=-1.0), r"normal_: expected std >= 0"),
    (lambda w: nn.init.kaiming_uniform_(w, a=math.nan), r"got from=nan, to=nan"),
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


# Each random initialiser with non-default arguments and its generator, as PyTorch passes it.
GENERATOR_INITIALISERS = {
    "uniform_": lambda w, g: nn.init.uniform_(w, -2.0, 3.0, generator=g),
    "normal_": lambda w, g: nn.init.normal_(w, 1.0, 0.5, generator=g),
    "trunc_normal_": lambda w, g: nn.init.trunc_normal_(w, std=0.5, a=-1.0, generator=g),
    "xavier_uniform_": lambda w, g: nn.init.xavier_uniform_(w, gain=2.0, generator=g),
    "xavier_normal_": lambda w, g: nn.init.xavier_normal_(w, generator=g),
    "kaiming_uniform_": lambda w, g: nn.init.kaiming_uniform_(w, a=math.sqrt(5), generator=g),
    "kaiming_normal_": lambda w, g: nn.init.kaiming_normal_(w, mode="fan_out", generator=g),
}


@pytest.mark.parametrize("name", list(GENERATOR_INITIALISERS))
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
def test_initialisers_draw_from_their_generator(name, dtype):
    init = GENERATOR_INITIALISERS[name]

    def fill(generator):
        # A parameter requires grad: the initialisers write under no_grad.
        return init(nn.Parameter(mint.empty(30, 20, dtype=dtype)), generator).numpy()

    kiln.manual_seed(3)
    state = kiln.get_rng_state().numpy()
    first = fill(kiln.Generator().manual_seed(11))
    np.testing.assert_array_equal(fill(kiln.Generator().manual_seed(11)), first)
    np.testing.assert_array_equal(kiln.get_rng_state().numpy(), state)  # default left alone
    assert not np.array_equal(fill(kiln.Generator().manual_seed(12)), first)
    generator = kiln.Generator().manual_seed(11)
    fill(generator)
    assert not np.array_equal(fill(generator), first)  # the generator goes on where it stopped
    # A generator of seed s draws what the default generator draws after manual_seed(s).
    kiln.manual_seed(11)
    np.testing.assert_array_equal(fill(None), first)


@pytest.mark.parametrize("name", list(GENERATOR_INITIALISERS))
def test_initialisers_refuse_a_generator_of_another_type(name):
    w = mint.zeros(4, 5)
    with raises(kiln.KilnTypeError, match="expected generator to be a kiln.Generator or None, "
                                          "got 7"):
        GENERATOR_INITIALISERS[name](w, 7)
    np.testing.assert_array_equal(w.numpy(), np.zeros((4, 5)))


def test_initialisers_take_pytorchs_arguments(torch):
    for name in GENERATOR_INITIALISERS:
        ours = inspect.signature(getattr(nn.init, name)).parameters.values()
        theirs = inspect.signature(getattr(torch.nn.init, name)).parameters.values()
        assert [(p.name, p.kind, p.default) for p in ours] == [
            (p.name, p.kind, p.default) for p in theirs], name


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
    "BatchNorm2d": (lambda: BatchNorm2d(2, dtype=kiln.float64), (3, 2, 2, 2), None),
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
