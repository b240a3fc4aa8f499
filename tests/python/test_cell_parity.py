"""kiln.nn.Cell and its containers against torch.nn.Module's behaviour: train() calling each
child's train(), the names Kiln-only methods leave free (construct, cells, ...), named_modules'
signature, get_parameter / get_buffer, state_dict's prefix / keep_vars / destination,
load_state_dict(assign=True), the parameters Cell.to supersedes, Sequential's list methods and
operators, and ParameterDict's copy / setdefault / fromkeys / | / |=. Closed-form checks run
without PyTorch; the comparisons with it skip where it is not installed."""

import collections
import warnings

import numpy as np
import pytest

import kiln
from conftest import TiedLinears, raises
from kiln import nn
from kiln.nn.parameter import superseded

mint = kiln.mint

KILN_ONLY = ["construct", "cells", "named_cells", "cells_and_names", "set_train",
             "trainable_params"]


def frozen_backbone(lib):
    """A net whose backbone overrides train() to keep its BatchNorm in eval mode, in ``lib``
    (kiln.nn or torch.nn)."""

    class Backbone(lib.Module):
        def __init__(self):
            super().__init__()
            self.bn = lib.BatchNorm1d(3)
            self.fc = lib.Linear(3, 3)

        def train(self, mode=True):
            super().train(mode)
            self.bn.eval()
            return self

    class Net(lib.Module):
        def __init__(self):
            super().__init__()
            self.backbone = Backbone()
            self.head = lib.Linear(3, 1)

    return Net()


def training_flags(net):
    return {name: cell.training for name, cell in net.named_modules()}


# ---- train / eval -------------------------------------------------------------------------------

@pytest.mark.parametrize("switch", [lambda n: n.train(), lambda n: n.eval().train(True),
                                    lambda n: n.set_train(), lambda n: n.set_train(True)],
                         ids=["train", "eval-train", "set_train", "set_train-True"])
def test_train_calls_each_childs_train_so_an_override_keeps_its_batchnorm_frozen(switch):
    net = frozen_backbone(nn)
    assert switch(net) is net
    assert training_flags(net) == {"": True, "backbone": True, "backbone.bn": False,
                                   "backbone.fc": True, "head": True}
    net.eval()
    assert not any(training_flags(net).values())


def test_train_flags_match_torch():
    torch = pytest.importorskip("torch")
    ours, theirs = frozen_backbone(nn), frozen_backbone(torch.nn)
    for mode in (True, False, True):
        ours.train(mode)
        theirs.train(mode)
        assert training_flags(ours) == training_flags(theirs)


def test_an_overridden_train_that_reaches_a_cycle_is_refused():
    loop = nn.Sequential(nn.Linear(2, 2))
    loop.loop = loop

    class Coach(nn.Cell):
        def train(self, mode=True):
            super().train(mode)
            loop.train(mode)  # another cell, not below this one: checked on its own
            return self

    loop.training = loop[0].training = False
    for _ in range(2):  # the second time: nothing of the first call's check is left over
        with raises(kiln.KilnValueError, match=r"cell 'loop' contains itself"):
            Coach().train()
        assert not loop.training and not loop[0].training  # refused before its flags changed


# ---- names of Kiln-only methods -----------------------------------------------------------------

@pytest.mark.parametrize("name", KILN_ONLY)
def test_a_sub_cell_may_take_the_name_of_a_kiln_only_method(name):
    class Model(nn.Cell):
        def __init__(self):
            super().__init__()
            setattr(self, name, nn.ModuleList([nn.Linear(1, 1)]))
            self.fc = nn.Linear(1, 1)

        def forward(self, x):
            return self.fc(getattr(self, name)[0](x))

    net = Model()
    member = getattr(net, name)
    assert isinstance(member, nn.ModuleList)  # the entry shadows the method on this cell
    assert list(net.state_dict()) == [f"{name}.0.weight", f"{name}.0.bias", "fc.weight",
                                      "fc.bias"]
    # Calling the cell still runs Cell.construct, that is forward.
    x = mint.ones(2, 1)
    expected = net.fc(member[0](x))
    np.testing.assert_allclose(net(x).numpy(), expected.numpy())
    # Kiln's machinery never calls the shadowed method through the cell.
    assert net.apply(lambda cell: None) is net
    assert [n for n, _ in net.named_modules()] == ["", name, f"{name}.0", "fc"]
    assert len(list(net.parameters())) == 4 and len(list(net.modules())) == 4
    assert net.eval() is net and not member[0].training
    net.double()
    assert getattr(net, name)[0].weight.dtype == kiln.float64
    assert net.load_state_dict(net.state_dict()) == ([], [])
    handle = net.register_forward_hook(lambda cell, args, out: out * 2.0)
    np.testing.assert_allclose(net(x.double()).numpy(), 2.0 * expected.numpy(), rtol=1e-6)
    handle.remove()
    # The methods themselves, through the class.
    assert [n for n, _ in nn.Cell.named_cells(net)] == ["", name, f"{name}.0", "fc"]
    assert [n for n, _ in nn.Cell.cells_and_names(net)][-1] == "fc"
    assert list(nn.Cell.cells(net)) == [getattr(net, name), net.fc]
    assert len(nn.Cell.trainable_params(net)) == 4
    assert nn.Cell.set_train(net, True) is net and net.training
    # Deleting the entry brings the method back.
    delattr(net, name)
    assert callable(getattr(net, name)) and not isinstance(getattr(net, name), nn.Cell)


@pytest.mark.parametrize("name", KILN_ONLY)
def test_parameters_buffers_and_dict_keys_may_take_kiln_only_names(name):
    cell = nn.Cell()
    cell.register_parameter(name, nn.Parameter(mint.ones(2)))
    assert getattr(cell, name) is cell.get_parameter(name)
    other = nn.Cell()
    other.register_buffer(name, mint.zeros(2))
    assert getattr(other, name) is other.get_buffer(name)
    heads = nn.ModuleDict({name: nn.Linear(2, 2)})
    assert getattr(heads, name) is heads[name]
    gates = nn.ParameterDict({name: mint.ones(1)})
    assert getattr(gates, name) is gates[name]
    holder = nn.Cell()
    holder.add_module(name, nn.ReLU())
    assert getattr(holder, name) is holder.get_submodule(name)


def test_a_plain_attribute_named_cells_does_not_break_apply():
    class N(nn.Cell):
        def __init__(self):
            super().__init__()
            self.cells = 4
            self.fc = nn.Linear(2, 2)

    seen = []
    net = N()
    net.apply(lambda cell: seen.append(type(cell).__name__))
    assert seen == ["Linear", "N"] and net.cells == 4


@pytest.mark.parametrize("name", ["forward", "train", "eval", "state_dict", "parameters",
                                  "training", "_cells"])
def test_pytorch_module_attributes_still_conflict(name):
    # PyTorch's add_module / register_parameter refuse them (KeyError); its plain assignment
    # registers a sub-module that attribute access never reaches, which Kiln refuses too.
    with raises(kiln.KilnValueError, match=f"name '{name}' is already an attribute of Cell"):
        setattr(nn.Cell(), name, nn.Linear(1, 1))
    with raises(kiln.KilnValueError, match=f"name '{name}' is already an attribute"):
        nn.Cell().add_module(name, nn.Linear(1, 1))
    with raises(kiln.KilnValueError, match=f"name '{name}' is already an attribute"):
        nn.ModuleDict({name: nn.Linear(1, 1)})


def test_a_class_that_defines_a_kiln_only_method_keeps_it():
    class Own(nn.Cell):
        def construct(self, x):
            return x

    with raises(kiln.KilnValueError, match="name 'construct' is already an attribute of Own"):
        Own().construct = nn.Linear(1, 1)
    with raises(kiln.KilnValueError, match="name 'construct' is already an attribute"):
        nn.Sequential(collections.OrderedDict([("construct", nn.ReLU())]))


def test_a_pytorch_state_dict_with_cells_keys_loads():
    torch = pytest.importorskip("torch")

    def model(lib):
        class M(lib.Module):
            def __init__(self):
                super().__init__()
                self.cells = lib.ModuleList([lib.Linear(2, 3), lib.Linear(3, 1)])

            def forward(self, x):
                for layer in self.cells:
                    x = layer(x)
                return x

        return M()

    ours, theirs = model(nn), model(torch.nn)
    ours.load_state_dict(theirs.state_dict())
    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    np.testing.assert_allclose(ours(kiln.tensor(x)).numpy(),
                               theirs(torch.from_numpy(x)).detach().numpy(), rtol=1e-5,
                               atol=1e-6)


# ---- named_modules ------------------------------------------------------------------------------

def test_named_modules_takes_pytorchs_memo_prefix_and_remove_duplicate():
    shared = nn.Linear(1, 1)
    net = nn.Sequential(shared, nn.ReLU(), shared)
    assert [n for n, _ in net.named_modules(None, "x")] == ["x", "x.0", "x.1"]
    assert [n for n, _ in net.named_modules(prefix="x", remove_duplicate=False)] == [
        "x", "x.0", "x.1", "x.2"]
    memo = {shared}
    assert [n for n, _ in net.named_modules(memo)] == ["", "1"]
    assert memo == {shared, net, net[1]}
    memo = {net[1]}
    assert [n for n, _ in net.named_modules(memo, "", False)] == ["", "0", "2"]
    assert memo == {net[1]}  # only a listing that removes duplicates adds to it
    # Kiln's names keep theirs: named_cells(prefix, remove_duplicate).
    assert [n for n, _ in net.named_cells("x", False)] == ["x", "x.0", "x.1", "x.2"]
    with raises(kiln.KilnTypeError, match="named_modules: memo must be a set of cells or None, "
                                          "got str"):
        list(net.named_modules("x"))


def test_named_modules_matches_torch():
    torch = pytest.importorskip("torch")

    def build(lib):
        shared = lib.Linear(1, 1)
        return lib.Sequential(shared, lib.Sequential(shared, lib.ReLU()), lib.Tanh())

    ours, theirs = build(nn), build(torch.nn)
    for args in [(), (None, "m"), (None, "m", False), (None, "", True)]:
        assert ([n for n, _ in ours.named_modules(*args)]
                == [n for n, _ in theirs.named_modules(*args)])
    memo_ours, memo_theirs = {ours[1]}, {theirs[1]}
    assert ([n for n, _ in ours.named_modules(memo_ours)]
            == [n for n, _ in theirs.named_modules(memo_theirs)])


# ---- get_parameter / get_buffer -----------------------------------------------------------------

def bn_net():
    net = nn.Sequential(collections.OrderedDict([("fc", nn.Linear(2, 3)),
                                                 ("bn", nn.BatchNorm1d(3))]))
    net.fc.register_parameter("extra", None)
    return net


def test_get_parameter_and_get_buffer_follow_dotted_paths():
    net = bn_net()
    assert net.get_parameter("fc.weight") is net.fc.weight
    assert net.get_parameter("bn.bias") is net.bn.bias
    assert net.get_buffer("bn.running_mean") is net.bn.running_mean
    assert net.fc.get_parameter("bias") is net.fc.bias


@pytest.mark.parametrize("method, target, error, message", [
    ("get_parameter", "fc.missing", AttributeError,
     r"Sequential.get_parameter\('fc.missing'\): Linear 'fc' has no parameter 'missing' "
     r"\(the name does not exist\)"),
    ("get_parameter", "bn.running_mean", AttributeError,
     r"BatchNorm1d 'bn' has no parameter 'running_mean' \(the name is a buffer\)"),
    ("get_parameter", "fc", AttributeError,
     r"the top-level Sequential has no parameter 'fc' \(the name is a sub-cell\)"),
    ("get_parameter", "fc.extra", AttributeError,
     r"has no parameter 'extra' \(the name is an empty slot \(None\)\)"),
    ("get_parameter", "nope.weight", AttributeError,
     r"Sequential.get_parameter\('nope.weight'\): the top-level Sequential has no sub-cell "
     r"'nope' \(the name does not exist\)"),
    ("get_parameter", "", AttributeError, r"has no parameter '' \(the name does not exist\)"),
    ("get_buffer", "fc.weight", AttributeError,
     r"Sequential.get_buffer\('fc.weight'\): Linear 'fc' has no buffer 'weight' \(the name is "
     r"a parameter\)"),
    ("get_buffer", 3, kiln.KilnTypeError,
     r"Sequential.get_buffer: target must be a str \(a dotted path such as 'layers.0'\), got "
     r"int 3"),
], ids=["missing", "buffer", "sub-cell", "empty slot", "missing cell", "empty", "parameter",
        "int"])
def test_get_parameter_and_get_buffer_errors_say_what_the_name_is(method, target, error,
                                                                   message):
    with raises(error, match=message):
        getattr(bn_net(), method)(target)


def test_get_parameter_and_get_buffer_refuse_what_torch_refuses():
    torch = pytest.importorskip("torch")
    theirs = torch.nn.Sequential(collections.OrderedDict([("fc", torch.nn.Linear(2, 3)),
                                                          ("bn", torch.nn.BatchNorm1d(3))]))
    ours = bn_net()
    for method, target in [("get_parameter", "fc.weight"), ("get_parameter", "bn.running_mean"),
                           ("get_buffer", "bn.num_batches_tracked"), ("get_buffer", "fc.bias"),
                           ("get_parameter", "nope.weight")]:
        try:
            getattr(theirs, method)(target)
        except AttributeError:
            with raises(AttributeError):
                getattr(ours, method)(target)
        else:
            assert tuple(getattr(ours, method)(target).shape) == tuple(
                getattr(theirs, method)(target).shape)


# ---- state_dict ---------------------------------------------------------------------------------

def test_state_dict_prefix_destination_and_keep_vars():
    net = TiedLinears()
    plain = net.state_dict()
    assert all(type(v) is kiln.Tensor for v in plain.values())  # detached, as before
    kept = net.state_dict(keep_vars=True)
    assert kept["enc.weight"] is net.enc.weight and kept["dec.weight"] is net.enc.weight
    destination = {"epoch": 3}
    result = net.state_dict(destination, "model.")
    assert result is destination
    assert list(result) == ["epoch"] + ["model." + name for name in plain]
    assert not isinstance(result["model.enc.bias"], nn.Parameter)
    assert result["model.enc.bias"].data_ptr() == net.enc.bias.data_ptr()


@pytest.mark.parametrize("kwargs, message", [
    (dict(destination=[]), "destination must be a mutable mapping"),
    (dict(prefix=None), "prefix must be a str, got NoneType None"),
    (dict(keep_vars=1), "keep_vars must be a bool, got int 1"),
], ids=["destination", "prefix", "keep_vars"])
def test_state_dict_arguments_of_the_wrong_kind(kwargs, message):
    with raises(kiln.KilnTypeError, match=message):
        nn.Linear(1, 1).state_dict(**kwargs)


def test_state_dict_keys_match_torch_with_a_prefix():
    torch = pytest.importorskip("torch")
    ours = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    theirs = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    assert list(ours.state_dict(prefix="m.")) == list(theirs.state_dict(prefix="m."))
    assert (list(ours.state_dict(None, "p", True)) == list(theirs.state_dict(prefix="p",
                                                                            keep_vars=True)))


# ---- load_state_dict(assign=True) ---------------------------------------------------------------

def test_assign_puts_the_given_tensors_in_place():
    net = nn.Linear(2, 3)
    net.bias.requires_grad_(False)
    old_weight = net.weight
    weight = mint.ones(3, 2, dtype=kiln.float64)
    given = nn.Parameter(mint.zeros(3), requires_grad=True)
    assert net.load_state_dict({"weight": weight, "bias": given}, assign=True) == ([], [])
    assert isinstance(net.weight, nn.Parameter) and net.weight.dtype == kiln.float64
    assert net.weight.data_ptr() == weight.data_ptr() and net.weight.requires_grad
    assert net.bias is given and not given.requires_grad  # the old parameter's flag
    assert "load_state_dict(assign=True) as 'weight'" in superseded(old_weight)
    assert superseded(net.weight) is None


def test_assign_keeps_tied_weights_tied_and_copies_what_is_no_kiln_tensor():
    net = TiedLinears()
    state = {name: mint.full(tuple(v.shape), 2.0) for name, v in net.state_dict().items()}
    state["enc.bias"] = np.full(3, 5.0, dtype=np.float64)  # NumPy: copied into the parameter
    old_bias = net.enc.bias
    net.load_state_dict(state, assign=True)
    assert net.enc.weight is net.dec.weight
    assert net.enc.weight.data_ptr() == state["dec.weight"].data_ptr()  # its last name's value
    assert net.enc.bias is old_bias and net.enc.bias.tolist() == [5.0] * 3


def test_assign_replaces_buffers_and_checks_everything_first():
    bn = nn.BatchNorm1d(2)
    mean = mint.full((2,), 3.0)
    state = dict(bn.state_dict(), running_mean=mean,
                 num_batches_tracked=kiln.tensor([7]))  # a 1-d scalar, as old checkpoints
    bn.load_state_dict(state, assign=True)
    assert bn.running_mean is mean and bn.num_batches_tracked.shape == ()
    assert bn.num_batches_tracked.item() == 7
    before = {name: value.tolist() for name, value in bn.state_dict().items()}
    weight = bn.weight
    with raises(kiln.ShapeError, match=r"'bias' has shape \[3\] in the state dict, expected "
                                       r"\[2\]"):
        bn.load_state_dict(dict(state, weight=mint.zeros(2), bias=mint.zeros(3)), assign=True)
    with raises(kiln.DTypeError, match=r"'weight' is int64 in the state dict: assign=True would "
                                       r"put it in the place of a parameter that requires grad"):
        bn.load_state_dict(dict(state, weight=kiln.tensor([1, 2])), assign=True)
    with raises(kiln.KilnTypeError, match="assign must be a bool, got int 1"):
        bn.load_state_dict(state, assign=1)
    assert bn.weight is weight
    assert {name: value.tolist() for name, value in bn.state_dict().items()} == before


def test_assign_matches_torch():
    torch = pytest.importorskip("torch")
    ours, theirs = nn.Linear(2, 2), torch.nn.Linear(2, 2)
    ours.weight.requires_grad_(False)
    theirs.weight.requires_grad_(False)
    values = np.arange(4, dtype=np.float64).reshape(2, 2)
    ours.load_state_dict({"weight": kiln.tensor(values), "bias": mint.zeros(2)}, assign=True)
    theirs.load_state_dict({"weight": torch.tensor(values), "bias": torch.zeros(2)}, assign=True)
    for name in ("weight", "bias"):
        mine, their = getattr(ours, name), getattr(theirs, name)
        assert isinstance(mine, nn.Parameter) and isinstance(their, torch.nn.Parameter)
        assert mine.requires_grad == their.requires_grad
        assert mine.dtype.name == str(their.dtype).rpartition(".")[2]


# ---- Cell.to supersedes the parameters it replaces ----------------------------------------------

def test_to_supersedes_old_parameters_and_moves_their_grads():
    net = TiedLinears()
    net.enc.weight.no_decay = True  # an attribute of the parameter travels with it
    net.enc(mint.ones(1, 3)).sum().backward()
    old_weight, old_bias = net.enc.weight, net.enc.bias
    grad = old_weight.grad.tolist()
    buffer = mint.zeros(3)
    net.enc.register_buffer("stat", buffer)
    net.dec.register_buffer("stat", buffer)
    net.double()
    assert net.enc.weight is net.dec.weight and net.enc.stat is net.dec.stat  # still shared
    assert net.enc.stat.dtype == kiln.float64
    assert net.enc.weight.grad.dtype == kiln.float64 and net.enc.weight.grad.tolist() == grad
    assert net.enc.weight.no_decay
    assert old_weight.grad is None and old_bias.grad is None
    assert "TiedLinears.to(float64)" in superseded(old_weight)
    assert "'enc.bias'" in superseded(old_bias)
    assert superseded(net.enc.weight) is None and superseded(mint.ones(1)) is None


def test_an_optimizer_built_before_to_holds_superseded_parameters():
    # What an optimizer can check (kiln/nn/parameter.py): the model no longer has them.
    net = nn.Linear(2, 1)
    opt = kiln.optim.SGD(net.parameters(), lr=0.1)
    net.half()
    assert all(superseded(p) is not None for p in opt.parameters)
    assert not any(p is q for p in opt.parameters for q in net.parameters())
    # Its step says so, instead of training tensors the cell no longer uses without a word.
    net(mint.ones(1, 2).half()).sum().backward()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt.step()
    assert [str(w.message).split(", so")[0] for w in caught] == [
        f"SGD: parameter {i} is no longer its cell's (it was replaced by Linear.to(float16) as "
        f"'{name}')" for i, name in enumerate(["weight", "bias"])]
    fresh = kiln.optim.SGD(net.parameters(), lr=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fresh.step()


# ---- Sequential ---------------------------------------------------------------------------------

def kinds(seq):
    return [type(cell).__name__ for cell in seq]


def test_sequential_list_methods():
    a, b, c = nn.Linear(1, 1), nn.ReLU(), nn.Tanh()
    seq = nn.Sequential(a, b, c)
    del seq[1]
    assert list(seq) == [a, c] and list(seq._cells) == ["0", "1"]
    seq[0] = b
    assert list(seq) == [b, c]
    assert seq.insert(0, a) is seq and list(seq) == [a, b, c]
    seq.insert(-1, nn.Identity())
    seq.insert(len(seq), nn.ELU())
    assert kinds(seq) == ["Linear", "ReLU", "Identity", "Tanh", "ELU"]
    assert list(seq._cells) == ["0", "1", "2", "3", "4"]
    assert seq.pop(2).__class__ is nn.Identity and seq.pop() .__class__ is nn.ELU
    popped = seq.pop(slice(0, 2))
    assert isinstance(popped, nn.Sequential) and list(popped) == [a, b] and list(seq) == [c]
    assert seq.extend([a, b]) is seq and list(seq) == [c, a, b]
    del seq[0:2]
    assert list(seq) == [b]
    named = nn.Sequential(collections.OrderedDict([("x", a), ("y", b), ("z", c)]))
    del named[0]
    assert list(named._cells) == ["0", "1"]  # renumbered, as PyTorch's


def test_sequential_operators():
    a, b = nn.Linear(1, 1), nn.ReLU()
    seq = nn.Sequential(a, b)
    joined = seq + nn.Sequential(b)
    assert list(joined) == [a, b, b] and list(seq) == [a, b]
    tripled = seq * 3
    assert list(tripled) == [a, b] * 3 and list(2 * seq) == [a, b] * 2
    assert len(list(tripled.parameters())) == 2  # the same cells: shared parameters
    seq += nn.Sequential(a)
    assert list(seq) == [a, b, a]
    seq *= 2
    assert list(seq) == [a, b, a] * 2
    x = mint.full((1, 1), 2.0)
    np.testing.assert_allclose(tripled(x).numpy(), b(a(b(a(b(a(x)))))).numpy())


@pytest.mark.parametrize("call, error, message", [
    (lambda s: s + [nn.ReLU()], kiln.KilnTypeError,
     r"Sequential \+: expected a Sequential, got list \(extend\(\) takes other iterables\)"),
    (lambda s: s.__iadd__(nn.ModuleList()), kiln.KilnTypeError,
     r"Sequential \+=: expected a Sequential, got ModuleList"),
    (lambda s: s * 0, kiln.KilnValueError,
     r"Sequential \*: the multiplication factor must be positive, got 0"),
    (lambda s: s * 1.5, kiln.KilnTypeError,
     r"Sequential \*: the multiplication factor must be an int, got float 1.5"),
    (lambda s: s.__imul__(True), kiln.KilnTypeError, r"must be an int, got bool True"),
    (lambda s: s.insert(3, nn.ReLU()), kiln.KilnIndexError,
     r"Sequential.insert: index 3 out of range for 2 entries"),
    (lambda s: s.insert(0, None), kiln.KilnTypeError,
     r"Sequential.insert: '0' is a NoneType, expected a kiln.nn.Cell"),
    (lambda s: s.__setitem__(0, 5), kiln.KilnTypeError,
     r"Sequential: '0' is a int, expected a kiln.nn.Cell"),
    (lambda s: s.__setitem__(slice(0, 1), nn.ReLU()), kiln.KilnTypeError,
     r"Sequential: expected an int as index, got slice"),
    (lambda s: s.__delitem__(2), kiln.KilnIndexError, r"index 2 out of range for 2 entries"),
    (lambda s: s.extend([nn.ReLU(), 3]), kiln.KilnTypeError,
     r"Sequential.extend: '3' is a int, expected a kiln.nn.Cell"),
    (lambda s: s.pop(-3), kiln.KilnIndexError, r"index -3 out of range"),
], ids=["add list", "iadd list", "mul 0", "mul float", "imul bool", "insert range",
        "insert None", "set int", "set slice", "del range", "extend", "pop range"])
def test_sequential_errors_leave_it_unchanged(call, error, message):
    a, b = nn.Linear(1, 1), nn.ReLU()
    seq = nn.Sequential(a, b)
    with raises(error, match=message):
        call(seq)
    assert list(seq) == [a, b] and list(seq._cells) == ["0", "1"]


def test_sequential_edits_match_torch():
    torch = pytest.importorskip("torch")

    def edit(lib):
        seq = lib.Sequential(lib.Linear(1, 1), lib.ReLU(), lib.Tanh(), lib.Sigmoid())
        del seq[1]
        del seq[0:1]
        seq.insert(0, lib.ReLU())
        seq.insert(-1, lib.Identity())
        seq[1] = lib.ELU()
        seq.pop(0)
        seq.extend(lib.Sequential(lib.ReLU()))
        seq += lib.Sequential(lib.Tanh())
        seq = 2 * (seq + lib.Sequential(lib.Identity()))
        seq *= 2
        return [(name, type(cell).__name__) for name, cell in seq.named_children()]

    assert edit(nn) == edit(torch.nn)


# ---- ParameterDict ------------------------------------------------------------------------------

def test_parameter_dict_copy_setdefault_fromkeys():
    gates = nn.ParameterDict({"a": mint.ones(1)})
    copied = gates.copy()
    assert type(copied) is nn.ParameterDict and copied["a"] is gates["a"]
    copied["b"] = mint.zeros(1)
    assert list(gates) == ["a"]
    assert gates.setdefault("a", mint.zeros(5)) is gates["a"]
    added = gates.setdefault("c", mint.zeros(2))
    assert isinstance(added, nn.Parameter) and list(gates) == ["a", "c"]
    value = mint.ones(2)
    fresh = gates.fromkeys(["x", "y"], value)
    assert list(fresh) == ["x", "y"] and fresh["x"] is not fresh["y"]  # a Parameter per name
    assert fresh["x"].data_ptr() == value.data_ptr()
    shared = nn.Parameter(mint.ones(2))
    tied = gates.fromkeys("pq", shared)
    assert list(tied) == ["p", "q"] and tied["p"] is shared and tied["q"] is shared
    with raises(kiln.KilnTypeError, match=r"ParameterDict.setdefault: 'z' is a NoneType, "
                                          r"expected a kiln.nn.Parameter or a kiln.Tensor"):
        gates.setdefault("z")
    with raises(kiln.KilnTypeError, match=r"ParameterDict.fromkeys: 'x' is a NoneType"):
        gates.fromkeys(["x"])
    assert list(gates) == ["a", "c"]


def test_parameter_dict_or_operators():
    gates = nn.ParameterDict({"a": mint.ones(1), "b": mint.ones(1)})
    other = {"b": mint.zeros(2), "c": mint.zeros(3)}
    merged = gates | other
    assert type(merged) is nn.ParameterDict and list(merged) == ["a", "b", "c"]
    assert merged["a"] is gates["a"] and merged["b"].shape == (2,) and gates["b"].shape == (1,)
    left = other | gates  # a dict, as PyTorch's
    assert type(left) is dict and list(left) == ["b", "c", "a"] and left["b"] is gates["b"]
    result = gates
    result |= [("d", mint.ones(4))]
    assert result is gates and list(gates) == ["a", "b", "d"]
    with raises(kiln.KilnTypeError, match=r"ParameterDict \|: expected a mapping or an iterable "
                                          r"of \(name, value\) pairs, got int"):
        gates | 3
    with raises(TypeError):
        3 | gates


def test_parameter_dict_methods_match_torch():
    torch = pytest.importorskip("torch")

    def run(lib, tensor):
        gates = lib.ParameterDict({"a": tensor([1.0])})
        gates.setdefault("b", tensor([2.0]))
        merged = gates | {"c": tensor([3.0])}
        merged |= {"a": tensor([4.0])}
        left = {"z": tensor([0.0])} | gates
        fresh = gates.fromkeys(["x", "y"], tensor([5.0]))
        return ([(k, v.tolist()) for k, v in merged.items()], type(left).__name__, list(left),
                list(fresh), list(gates.copy()))

    assert run(nn, lambda v: kiln.tensor(v)) == run(torch.nn, lambda v: torch.tensor(v))
