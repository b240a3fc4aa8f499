"""kiln.nn containers ModuleList, ModuleDict, ParameterList and ParameterDict: PyTorch's API,
their members registered with PyTorch's names (parameters, state_dict, train / eval, copies,
kiln.jit), and their errors. (Sequential is tested in test_nn_cells.py.)"""

import collections
import copy
import pickle

import numpy as np
import pytest

import kiln
from conftest import raises
from kiln import nn
from kiln.nn.container import ModuleDict, ModuleList, ParameterDict, ParameterList
from test_nn_numpy_reference import Model  # the model of the NumPy references

mint = kiln.mint



def linears(n):
    return [nn.Linear(2, 2) for _ in range(n)]


def names(cell):
    return [name for name, _ in cell.named_parameters()]


# ---------------------------------------------------------------------------------------------
# Against PyTorch: names and values of an equivalent model (Model, the NumPy references')


def torch_model(torch):
    class TorchModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList([torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4),
                                               torch.nn.Linear(4, 4)])
            self.heads = torch.nn.ModuleDict({"cls": torch.nn.Linear(4, 2),
                                              "reg": torch.nn.Linear(4, 1)})
            self.scales = torch.nn.ParameterList([torch.ones(4), torch.full((4,), 0.5)])
            self.gates = torch.nn.ParameterDict({"out": torch.ones(2)})

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            for scale in self.scales:
                x = x * scale
            return self.heads["cls"](x) * self.gates["out"], self.heads["reg"](x)

    return TorchModel()


def test_names_and_values_match_an_equivalent_torch_model(torch, rng):
    ours, theirs = Model(), torch_model(torch)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert names(ours) == [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert "layers.0.weight" in ours.state_dict() and "heads.cls.bias" in ours.state_dict()
    with torch.no_grad():  # parameters away from their initial values
        for p in theirs.parameters():
            p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    x = rng.standard_normal((6, 3)).astype(np.float32)
    theirs(torch.tensor(x))  # running statistics away from theirs too
    assert ours.load_state_dict(theirs.state_dict()) == nn.LoadResult([], [])
    for mode in (True, False):
        ours.train(mode)
        theirs.train(mode)
        assert all(cell.training == mode for cell in ours.modules())
        for a, b in zip(ours(kiln.tensor(x)), theirs(torch.tensor(x))):
            np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
    for name, value in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[name].numpy(), value.numpy(), rtol=1e-6,
                                   err_msg=name)


def test_containers_train_under_jit_and_copy(rng):
    model = Model()
    opt = kiln.optim.SGD(model.trainable_params(), lr=0.1)
    assert len(opt.parameters) == 13  # 3 Linears, 1 BatchNorm, 2 heads, 2 scales, 1 gate
    grad_fn = kiln.value_and_grad(lambda x: sum(o.sum() for o in model(x)), None,
                                  opt.parameters)

    def step(x):
        loss, grads = grad_fn(x)
        opt(grads)
        return loss

    jitted = kiln.jit(step)
    before = model.gates["out"].numpy().copy()
    for _ in range(3):
        jitted(kiln.tensor(rng.standard_normal((5, 3)).astype(np.float32)))
    assert not np.array_equal(model.gates["out"].numpy(), before)
    assert model.layers[1].num_batches_tracked.item() == 3
    twin = copy.deepcopy(model)
    assert twin.layers[0] is not model.layers[0] and twin.scales[0] is not model.scales[0]
    restored = pickle.loads(pickle.dumps(model))
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(twin.state_dict()[name].numpy(), value.numpy())
        np.testing.assert_array_equal(restored.state_dict()[name].numpy(), value.numpy())


# ---------------------------------------------------------------------------------------------
# ModuleList


def test_module_list_indexing_and_growth():
    a, b, c, d = linears(4)
    layers = ModuleList([a, b])
    assert len(layers) == 2 and list(layers) == [a, b]
    assert layers[0] is a and layers[-1] is b and layers[np.int64(1)] is b
    assert layers.append(c) is layers and layers[2] is c
    assert layers.extend([d]) is layers and list(layers) == [a, b, c, d]
    part = layers[1:3]
    assert isinstance(part, ModuleList) and list(part) == [b, c] and names(part)[0] == "0.weight"
    layers[0] = nn.ReLU()
    assert isinstance(layers[0], nn.ReLU) and names(layers)[0] == "1.weight"
    layers += [nn.Tanh()]
    assert len(layers) == 5 and isinstance(layers[4], nn.Tanh)
    both = ModuleList([a]) + ModuleList([b])
    assert list(both) == [a, b] and names(both) == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert len(ModuleList()) == 0


def test_module_list_renumbers_after_deleting_inserting_and_popping():
    a, b, c, d = linears(4)
    layers = ModuleList([a, b, c])
    del layers[0]
    assert list(layers) == [b, c] and names(layers) == ["0.weight", "0.bias", "1.weight",
                                                        "1.bias"]
    layers.insert(1, d)
    assert list(layers) == [b, d, c] and list(layers.state_dict())[2] == "1.weight"
    layers.insert(-1, a)  # before the last, as list.insert
    assert list(layers) == [b, d, a, c]
    layers.insert(100, nn.ReLU())  # past the end: appended
    assert isinstance(layers[4], nn.ReLU)
    last = layers[-1]
    assert layers.pop() is last and len(layers) == 4
    assert layers.pop(0) is b and list(layers) == [d, a, c]
    del layers[::2]
    assert list(layers) == [a] and names(layers) == ["0.weight", "0.bias"]


def test_module_list_matches_torchs_names_after_edits(torch):
    ours = ModuleList(linears(4))
    theirs = torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(4)])
    for edit in (lambda l: l.__delitem__(1), lambda l: l.insert(0, l[2]),
                 lambda l: l.pop(1), lambda l: l.__delitem__(slice(0, 2))):
        edit(ours)
        edit(theirs)
        assert list(ours.state_dict()) == list(theirs.state_dict())


def test_module_list_holds_empty_slots_as_pytorch():
    layers = ModuleList([nn.Linear(2, 2), None])
    assert len(layers) == 2 and layers[1] is None and names(layers) == ["0.weight", "0.bias"]
    layers[0] = None
    assert list(layers.state_dict()) == [] and list(layers.children()) == []


@pytest.mark.parametrize("call, error, message", [
    (lambda l: l[2], kiln.KilnIndexError, r"ModuleList: index 2 out of range for 2 entries"),
    (lambda l: l[-3], kiln.KilnIndexError, r"index -3 out of range"),
    (lambda l: l["0"], kiln.KilnTypeError, r"ModuleList: expected an int as index, got str '0'"),
    (lambda l: l.__setitem__(5, nn.ReLU()), kiln.KilnIndexError, r"index 5 out of range"),
    (lambda l: l.__setitem__(slice(0, 1), [nn.ReLU()]), kiln.KilnTypeError,
     r"expected an int as index, got slice"),
    (lambda l: l.__setitem__(0, mint.ones(1)), kiln.KilnTypeError,
     r"ModuleList: '0' is a Tensor, expected a kiln.nn.Cell \(or None\)"),
    (lambda l: l.__delitem__(9), kiln.KilnIndexError, r"index 9 out of range"),
    (lambda l: l.append("relu"), kiln.KilnTypeError,
     r"ModuleList.append: '2' is a str, expected a kiln.nn.Cell"),
    (lambda l: l.extend([nn.ReLU(), 3]), kiln.KilnTypeError,
     r"ModuleList.extend: '3' is a int, expected a kiln.nn.Cell"),
    (lambda l: l.extend(nn.Linear(2, 2)), kiln.KilnTypeError,
     r"ModuleList.extend: expected an iterable, got Linear"),
    (lambda l: l.insert("0", nn.ReLU()), kiln.KilnTypeError,
     r"ModuleList.insert: expected an int as index, got str"),
    (lambda l: l.insert(0, 1.5), kiln.KilnTypeError, r"'0' is a float"),
    (lambda l: l + 3, kiln.KilnTypeError, r"ModuleList \+: expected an iterable, got int"),
    (lambda l: l(mint.ones(2)), kiln.KilnNotImplementedError,
     r"ModuleList defines neither construct\(\) nor forward\(\)"),
], ids=["index past the end", "index before the start", "str index", "set past the end",
        "set a slice", "set a tensor", "delete past the end", "append a str", "extend with an int",
        "extend with a cell", "insert at a str", "insert a float", "add an int", "call"])
def test_module_list_errors_change_nothing(call, error, message):
    layers = ModuleList(linears(2))
    before = list(layers)
    with raises(error, match=message):
        call(layers)
    assert list(layers) == before and len(layers.state_dict()) == 4


# ---------------------------------------------------------------------------------------------
# ModuleDict


def test_module_dict_is_a_dict_of_cells_in_insertion_order():
    a, b, c = linears(3)
    heads = ModuleDict(collections.OrderedDict([("a", a), ("b", b)]))
    assert len(heads) == 2 and list(heads) == ["a", "b"] and heads["a"] is a
    assert "a" in heads and "z" not in heads
    assert list(heads.keys()) == ["a", "b"] and list(heads.values()) == [a, b]
    assert list(heads.items()) == [("a", a), ("b", b)]
    heads["c"] = c
    heads["a"] = nn.ReLU()  # replaced in its place
    assert list(heads) == ["a", "b", "c"] and names(heads) == ["b.weight", "b.bias", "c.weight",
                                                               "c.bias"]
    heads.update([("d", nn.Tanh()), ("b", None)])
    assert list(heads) == ["a", "b", "c", "d"] and heads["b"] is None
    heads.update(ModuleDict({"e": nn.ReLU()}))
    assert heads.pop("e") is not None and "e" not in heads
    del heads["a"]
    assert list(heads) == ["b", "c", "d"] and heads.get_submodule("c") is c
    heads.clear()
    assert len(heads) == 0 and list(heads.state_dict()) == []
    assert list(ModuleDict({"x": a, "y": b})) == ["x", "y"]  # a dict keeps its order


def test_module_dict_matches_torchs_names(torch):
    ours = ModuleDict({"enc": nn.Linear(2, 2), "dec": nn.Linear(2, 2)})
    theirs = torch.nn.ModuleDict({"enc": torch.nn.Linear(2, 2), "dec": torch.nn.Linear(2, 2)})
    for edit in (lambda d: d.update([("mid", d["enc"])]), lambda d: d.pop("enc")):
        edit(ours)
        edit(theirs)
        assert list(ours.state_dict()) == list(theirs.state_dict())
        assert names(ours) == [n for n, _ in theirs.named_parameters()]


@pytest.mark.parametrize("call, error, message", [
    (lambda d: d["missing"], KeyError, r"missing"),
    (lambda d: d.__delitem__("missing"), KeyError, r"missing"),
    (lambda d: d.pop("missing"), KeyError, r"missing"),
    (lambda d: d.__setitem__("c", 3), kiln.KilnTypeError,
     r"ModuleDict: 'c' is a int, expected a kiln.nn.Cell \(or None\)"),
    (lambda d: d.__setitem__("keys", nn.ReLU()), kiln.KilnValueError,
     r"ModuleDict: name 'keys' is already an attribute of ModuleDict"),
    (lambda d: d.__setitem__("x.y", nn.ReLU()), kiln.KilnValueError, r"contains '.'"),
    (lambda d: d.__setitem__(1, nn.ReLU()), kiln.KilnTypeError,
     r"the name of a cell must be a str, got int 1"),
    (lambda d: d.update([("c", nn.ReLU()), ("training", nn.ReLU())]), kiln.KilnValueError,
     r"name 'training' is already an attribute"),
    (lambda d: d.update([("c", nn.ReLU()), ("d", "relu")]), kiln.KilnTypeError,
     r"ModuleDict.update: 'd' is a str, expected a kiln.nn.Cell"),
    (lambda d: d.update([("c", nn.ReLU()), nn.ReLU()]), kiln.KilnTypeError,
     r"ModuleDict.update: element #1 should be a \(name, value\) pair, got ReLU"),
    (lambda d: d.update([("c", nn.ReLU(), 1)]), kiln.KilnValueError,
     r"ModuleDict.update: element #0 has length 3; 2 is required"),
    (lambda d: d.update(5), kiln.KilnTypeError,
     r"ModuleDict.update: expected a mapping or an iterable of \(name, value\) pairs, got int"),
    (lambda d: (d.register_buffer("buf", mint.ones(1)), d.__setitem__("buf", nn.ReLU())),
     kiln.KilnValueError,
     r"ModuleDict: cannot register a cell as 'buf': the name is already a buffer of ModuleDict"),
], ids=["get missing", "delete missing", "pop missing", "set an int", "name keys",
        "dotted name", "int name", "update with training", "update with a str", "not a pair",
        "triple", "update with an int", "name of a buffer"])
def test_module_dict_errors_change_nothing(call, error, message):
    heads = ModuleDict({"a": nn.Linear(2, 2), "b": nn.ReLU()})
    with raises(error, match=message):
        call(heads)
    assert list(heads) == ["a", "b"]


# ---------------------------------------------------------------------------------------------
# ParameterList and ParameterDict


def test_parameter_list_registers_parameters_and_wraps_tensors():
    data = mint.ones(3)
    scales = ParameterList([data, nn.Parameter(mint.zeros(2), requires_grad=False)])
    assert len(scales) == 2 and names(scales) == ["0", "1"]
    assert isinstance(scales[0], nn.Parameter) and scales[0].requires_grad
    assert scales[0].shares_storage_with(data) and not scales[1].requires_grad
    frozen = scales[1]
    assert scales.append(mint.full((1,), 2.0)) is scales and scales[-1].tolist() == [2.0]
    scales += [mint.ones(1)]
    scales[0] = mint.zeros(3)
    assert list(scales.state_dict()) == ["0", "1", "2", "3"] and scales[0].tolist() == [0, 0, 0]
    part = scales[1:3]
    assert isinstance(part, ParameterList) and part[0] is frozen
    assert list(scales) == list(scales.parameters())
    assert scales.extend(ParameterList([mint.ones(1)])) is scales and len(scales) == 5


def test_parameter_dict_registers_parameters_by_name():
    gates = ParameterDict({"a": mint.ones(2)})
    gates["b"] = nn.Parameter(mint.zeros(1))
    gates.update([("c", mint.ones(1))])
    gates.update(ParameterDict({"d": mint.ones(1)}))
    assert list(gates) == ["a", "b", "c", "d"] and names(gates) == ["a", "b", "c", "d"]
    assert isinstance(gates["a"], nn.Parameter) and "a" in gates and "z" not in gates
    assert list(gates.keys()) == ["a", "b", "c", "d"] and len(gates.values()) == 4
    assert dict(gates.items())["b"] is gates["b"]
    assert gates.get("z") is None and gates.get("a") is gates["a"]
    assert gates.pop("d").tolist() == [1.0] and len(gates) == 3
    del gates["c"]
    gates.clear()
    assert len(gates) == 0


def test_parameter_dict_sorts_the_names_of_a_plain_mapping_as_pytorch():
    # So the parameters' order, by which an optimizer keys its state, is PyTorch's.
    built = ParameterDict({"b": mint.ones(1), "a": mint.ones(1)})
    assert list(built) == ["a", "b"]
    built.update({"z": mint.ones(1), "c": mint.ones(1)})
    built |= {"y": mint.ones(1), "d": mint.ones(1)}
    assert list(built) == ["a", "b", "c", "z", "d", "y"]
    kept = [("q", mint.ones(1)), ("p", mint.ones(1))]  # pairs and ordered dicts keep their order
    ordered = collections.OrderedDict(kept)
    for values in (kept, ordered, ParameterDict(ordered)):
        assert list(ParameterDict(values)) == ["q", "p"]
    merged = ParameterDict(kept) | {"o": mint.ones(1), "n": mint.ones(1)}
    assert list(merged) == ["q", "p", "n", "o"]


def test_parameter_containers_match_torchs_names(torch):
    ours = nn.Cell()
    ours.plist = ParameterList([mint.ones(2), mint.ones(3)])
    ours.pdict = ParameterDict({"w": mint.ones(2)})
    theirs = torch.nn.Module()
    theirs.plist = torch.nn.ParameterList([torch.ones(2), torch.ones(3)])
    theirs.pdict = torch.nn.ParameterDict({"w": torch.ones(2)})
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["plist.0", "plist.1",
                                                                    "pdict.w"]
    state = {k: v * 3 for k, v in theirs.state_dict().items()}
    assert ours.load_state_dict(state) == nn.LoadResult([], [])
    assert ours.plist[1].tolist() == [3, 3, 3] and ours.pdict["w"].tolist() == [3, 3]


@pytest.mark.parametrize("call, error, message", [
    (lambda p, d: p[5], kiln.KilnIndexError, r"ParameterList: index 5 out of range"),
    (lambda p, d: p["0"], kiln.KilnTypeError,
     r"ParameterList: expected an int as index, got str '0'"),
    (lambda p, d: p.__setitem__(0, [1.0]), kiln.KilnTypeError,
     r"ParameterList: '0' is a list, expected a kiln.nn.Parameter or a kiln.Tensor"),
    (lambda p, d: p.append(None), kiln.KilnTypeError, r"ParameterList.append: '1' is a NoneType"),
    (lambda p, d: p.extend(mint.ones(2)), kiln.KilnTypeError,
     r"ParameterList.extend: expected an iterable, got Tensor"),
    (lambda p, d: p.extend([mint.ones(1), 2.0]), kiln.KilnTypeError,
     r"ParameterList.extend: '2' is a float"),
    (lambda p, d: d["missing"], KeyError, r"missing"),
    (lambda p, d: d.__setitem__("b", 1.0), kiln.KilnTypeError,
     r"ParameterDict: 'b' is a float, expected a kiln.nn.Parameter or a kiln.Tensor"),
    (lambda p, d: d.__setitem__("a.b", mint.ones(1)), kiln.KilnValueError, r"contains '.'"),
    (lambda p, d: d.__setitem__("get", mint.ones(1)), kiln.KilnValueError,
     r"name 'get' is already an attribute of ParameterDict"),
    (lambda p, d: d.update({"b": mint.ones(1), "c": "x"}), kiln.KilnTypeError,
     r"ParameterDict.update: 'c' is a str"),
    (lambda p, d: (setattr(d, "fc", nn.ReLU()), d.update({"fc": mint.ones(1)})),
     kiln.KilnValueError, r"ParameterDict: cannot register a parameter as 'fc': the name is "
                          r"already a sub-cell of ParameterDict"),
], ids=["index", "str index", "set a list", "append None", "extend with a tensor",
        "extend with a float", "missing key", "set a float", "dotted name", "name get",
        "update with a str", "name of a sub-cell"])
def test_parameter_container_errors_change_nothing(call, error, message):
    plist = ParameterList([mint.ones(1)])
    pdict = ParameterDict({"a": mint.ones(1)})
    with raises(error, match=message):
        call(plist, pdict)
    assert names(plist) == ["0"] and names(pdict) == ["a"]
