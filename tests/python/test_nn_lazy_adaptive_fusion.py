"""Lazy cells (kiln/nn/lazy.py), AdaptiveLogSoftmaxWithLoss (kiln/nn/adaptive.py), conv / linear
+ BatchNorm fusion (kiln/nn/utils/fusion.py), the deprecated stateless.functional_call
(kiln/nn/utils/stateless.py) and skip_init (kiln/nn/utils/_init_skip.py): inferred shapes,
initialisation, state dicts and the class change of lazy cells, values and gradients against
PyTorch (the ``torch`` fixture) and against NumPy / closed forms without it, and the error
paths."""

import copy
import math
import pickle
import threading
import warnings

import numpy as np
import pytest

import kiln
from conftest import close, raises, t
from kiln import nn
from kiln.nn import lazy
from kiln.nn.adaptive import AdaptiveLogSoftmaxWithLoss
from kiln.nn.utils import fusion, stateless
from kiln.nn.utils._init_skip import skip_init

mint = kiln.mint

# ------------------------------------------------------------------------------------------------
# Lazy cells

# (lazy cell, input shape, the regular cell it equals once called, its tensors' shapes)
LAZY_CASES = [
    (lambda: lazy.LazyLinear(5), (3, 4), lambda: nn.Linear(4, 5),
     {"weight": (5, 4), "bias": (5,)}),
    (lambda: lazy.LazyLinear(5, bias=False), (2, 3, 4), lambda: nn.Linear(4, 5, bias=False),
     {"weight": (5, 4)}),
    (lambda: lazy.LazyConv1d(6, 3), (2, 4, 9), lambda: nn.Conv1d(4, 6, 3),
     {"weight": (6, 4, 3), "bias": (6,)}),
    (lambda: lazy.LazyConv2d(6, 3, groups=2, padding=1), (4, 5, 5),  # one sample
     lambda: nn.Conv2d(4, 6, 3, groups=2, padding=1), {"weight": (6, 2, 3, 3), "bias": (6,)}),
    (lambda: lazy.LazyConv3d(2, 2, padding=1), (1, 3, 3, 3, 3),
     lambda: nn.Conv3d(3, 2, 2, padding=1), {"weight": (2, 3, 2, 2, 2), "bias": (2,)}),
    (lambda: lazy.LazyConvTranspose1d(3, 2, stride=2), (2, 4, 5),
     lambda: nn.ConvTranspose1d(4, 3, 2, stride=2), {"weight": (4, 3, 2), "bias": (3,)}),
    (lambda: lazy.LazyConvTranspose2d(3, 2), (4, 3, 3), lambda: nn.ConvTranspose2d(4, 3, 2),
     {"weight": (4, 3, 2, 2), "bias": (3,)}),
    (lambda: lazy.LazyConvTranspose3d(2, 1, bias=False), (1, 3, 2, 2, 2),
     lambda: nn.ConvTranspose3d(3, 2, 1, bias=False), {"weight": (3, 2, 1, 1, 1)}),
    (lambda: lazy.LazyBatchNorm1d(), (4, 3), lambda: nn.BatchNorm1d(3),
     {"weight": (3,), "bias": (3,), "running_mean": (3,), "running_var": (3,),
      "num_batches_tracked": ()}),
    (lambda: lazy.LazyBatchNorm2d(affine=False), (2, 3, 2, 2),
     lambda: nn.BatchNorm2d(3, affine=False),
     {"running_mean": (3,), "running_var": (3,), "num_batches_tracked": ()}),
    (lambda: lazy.LazyBatchNorm3d(track_running_stats=False), (2, 3, 2, 2, 2),
     lambda: nn.BatchNorm3d(3, track_running_stats=False), {"weight": (3,), "bias": (3,)}),
    (lambda: lazy.LazyInstanceNorm1d(), (3, 5),  # one sample: C from dim 0
     lambda: nn.InstanceNorm1d(3, affine=True, track_running_stats=True),
     {"weight": (3,), "bias": (3,), "running_mean": (3,), "running_var": (3,),
      "num_batches_tracked": ()}),
    (lambda: lazy.LazyInstanceNorm2d(bias=False), (2, 3, 4, 4),
     lambda: nn.InstanceNorm2d(3, affine=True, track_running_stats=True, bias=False),
     {"weight": (3,), "running_mean": (3,), "running_var": (3,), "num_batches_tracked": ()}),
    (lambda: lazy.LazyInstanceNorm3d(affine=False, track_running_stats=False), (2, 3, 2, 2, 2),
     lambda: nn.InstanceNorm3d(3), {}),
]


@pytest.mark.parametrize("make, shape, make_regular, shapes", LAZY_CASES)
def test_lazy_cell_infers_its_shapes_and_becomes_the_regular_class(make, shape,
                                                                   make_regular, shapes):
    cell, regular = make(), make_regular()
    cls = type(regular)
    assert isinstance(cell, cls) and type(cell) is not cls
    placeholders = [name for name, size in shapes.items() if size != ()]
    assert cell.has_uninitialized_params() == bool(placeholders)
    before = cell.state_dict()
    assert list(before) == list(shapes)  # PyTorch's names and order, placeholders included
    assert [name for name, value in before.items() if lazy.is_lazy(value)] == placeholders
    assert "(0," in repr(cell) or "in_features=0" in repr(cell)

    x = mint.randn(list(shape))
    cell(x)
    assert type(cell) is cls
    assert not any(lazy.is_lazy(value) for value in cell.state_dict().values())
    assert {name: tuple(v.shape) for name, v in cell.state_dict().items()} == shapes
    assert repr(cell) == repr(regular)
    # The same computation as the regular cell holding the same tensors.
    regular.load_state_dict(cell.state_dict())
    close(cell(x), regular(x).numpy())
    assert not cell._load_state_dict_pre_hooks  # the lazy load hook is gone


def test_lazy_initialisation_has_the_regular_statistics():
    kiln.manual_seed(0)
    fc = lazy.LazyLinear(200)
    fc(mint.zeros([2, 300]))
    bound = 1 / math.sqrt(300)
    for values in (fc.weight.numpy(), fc.bias.numpy()):
        assert np.abs(values).max() <= bound
    assert abs(fc.weight.numpy().std() - bound / math.sqrt(3)) < 0.03 * bound
    conv = lazy.LazyConv2d(64, 3)
    conv(mint.zeros([1, 30, 5, 5]))
    fan_in = 30 * 9
    assert np.abs(conv.weight.numpy()).max() <= 1 / math.sqrt(fan_in)
    assert np.abs(conv.bias.numpy()).max() <= 1 / math.sqrt(fan_in)
    bn = lazy.LazyBatchNorm2d()
    bn.eval()  # normalizes with the fresh running statistics, which stay as they are
    bn(mint.zeros([2, 4, 1, 1]))
    for name, value in (("weight", 1), ("bias", 0), ("running_mean", 0), ("running_var", 1)):
        np.testing.assert_array_equal(getattr(bn, name).numpy(), np.full(4, value, np.float32))


def test_lazy_cells_match_pytorch(torch, rng):
    # (Kiln's lazy cell, PyTorch's, input shape): PyTorch's state dict, loaded into the Kiln cell
    # before its first call, gives PyTorch's outputs and updated statistics; that of PyTorch's
    # lazy cell keeps the placeholders.
    cases = [
        (lambda: lazy.LazyLinear(5, dtype=kiln.float64),
         lambda: torch.nn.LazyLinear(5, dtype=torch.float64), (3, 4)),
        (lambda: lazy.LazyConv2d(6, 3, padding=1, dtype=kiln.float64),
         lambda: torch.nn.LazyConv2d(6, 3, padding=1, dtype=torch.float64), (2, 4, 5, 5)),
        (lambda: lazy.LazyConvTranspose1d(3, 2, stride=2, dtype=kiln.float64),
         lambda: torch.nn.LazyConvTranspose1d(3, 2, stride=2, dtype=torch.float64), (2, 4, 5)),
        (lambda: lazy.LazyBatchNorm2d(dtype=kiln.float64),
         lambda: torch.nn.LazyBatchNorm2d(dtype=torch.float64), (4, 3, 2, 2)),
        (lambda: lazy.LazyInstanceNorm1d(dtype=kiln.float64),
         lambda: torch.nn.LazyInstanceNorm1d(dtype=torch.float64), (2, 3, 6)),
    ]
    for make, make_torch, shape in cases:
        v = rng.normal(size=shape)
        theirs = make_torch()
        ours = make()
        ours.load_state_dict(theirs.state_dict())
        assert ours.has_uninitialized_params()
        theirs(torch.tensor(v))
        ours.load_state_dict(theirs.state_dict())  # strict: PyTorch's names
        assert ours.has_uninitialized_params() is False and type(ours).__name__.startswith("Lazy")
        close(ours(t(v)), theirs(torch.tensor(v)).detach().numpy(), 1e-12, 1e-12)
        assert type(ours).__name__ == type(theirs).__name__
        for name, value in theirs.state_dict().items():
            close(ours.state_dict()[name], value.numpy(), 1e-12, 1e-12)
        fresh = make()
        fresh(t(v))
        assert ({n: tuple(x.shape) for n, x in fresh.state_dict().items()}
                == {n: tuple(x.shape) for n, x in theirs.state_dict().items()})
        assert repr(make()).split("(")[0] == repr(make_torch()).split("(")[0]


def test_lazy_initialisation_statistics_match_pytorch(torch):
    torch.manual_seed(0)
    kiln.manual_seed(0)
    ours, theirs = lazy.LazyLinear(300), torch.nn.LazyLinear(300)
    ours(mint.zeros([1, 400]))
    theirs(torch.zeros(1, 400))
    assert np.abs(ours.weight.numpy()).max() <= theirs.weight.abs().max().item() * 1.01
    assert abs(ours.weight.numpy().std() / theirs.weight.std().item() - 1) < 0.02
    assert abs(ours.bias.numpy().std() / theirs.bias.std().item() - 1) < 0.25


def test_lazy_state_dict_loads_as_pytorch_describes(tmp_path):
    full = nn.Linear(4, 3)
    x = mint.randn([2, 4])
    loaded = lazy.LazyLinear(3)
    loaded.load_state_dict(full.state_dict())
    assert type(loaded) is lazy.LazyLinear and loaded.in_features == 0
    assert not loaded.has_uninitialized_params()
    close(loaded(x), full(x).numpy())  # the loaded values are kept, not initialised again
    assert type(loaded) is nn.Linear and loaded.in_features == 4
    # A lazy cell's state dict into a lazy cell (also through kiln.save, which keeps empty
    # tensors, and after a conversion): the placeholders stay.
    kiln.save(lazy.LazyBatchNorm1d().state_dict(), tmp_path / "lazy.kiln")
    for cell, state in ((lazy.LazyLinear(3), lazy.LazyLinear(3).state_dict()),
                        (lazy.LazyLinear(3), lazy.LazyLinear(3).double().state_dict()),
                        (lazy.LazyBatchNorm1d(), kiln.load(tmp_path / "lazy.kiln"))):
        cell.load_state_dict(state)
        assert cell.has_uninitialized_params() and lazy.is_lazy(cell.weight)
    # Only the weight: the first call initialises the bias and keeps the weight.
    partial = lazy.LazyLinear(3)
    assert partial.load_state_dict({"weight": full.weight}, strict=False).missing_keys == ["bias"]
    partial(x)
    np.testing.assert_array_equal(partial.weight.numpy(), full.weight.numpy())
    assert np.abs(partial.bias.numpy()).max() <= 0.5 and partial.bias.numpy().any()
    # Nested: the load hook runs for a lazy cell below the one loading.
    net = nn.Sequential(lazy.LazyLinear(3), nn.ReLU())
    net.load_state_dict({"0.weight": full.weight, "0.bias": full.bias})
    close(net(x), np.maximum(full(x).numpy(), 0))


def test_lazy_state_dict_errors():
    full = nn.Linear(4, 3)
    with raises(kiln.ShapeError, match=r"'weight' has shape \[0\] in the state dict"):
        full.load_state_dict(lazy.LazyLinear(3).state_dict())
    loaded = lazy.LazyLinear(3)
    loaded.load_state_dict(full.state_dict())
    with raises(kiln.ShapeError, match=r"in_features=5, so 'weight' should have shape \[3, 5\]"):
        loaded(mint.randn([2, 5]))
    assert type(loaded) is lazy.LazyLinear  # nothing changed


def test_lazy_cell_conversion_copies_and_pickles():
    fc = lazy.LazyLinear(3).double()
    assert lazy.is_lazy(fc.weight) and fc.has_uninitialized_params()
    fc(mint.randn([2, 4], dtype=kiln.float64))
    assert fc.weight.dtype == kiln.float64 and fc.bias.dtype == kiln.float64
    bn = lazy.LazyBatchNorm1d(affine=False).to(kiln.float64)
    assert isinstance(bn.running_mean, lazy.UninitializedBuffer)
    bn(mint.randn([3, 2], dtype=kiln.float64))
    assert bn.running_var.dtype == kiln.float64
    for twin in (copy.deepcopy(lazy.LazyConv1d(2, 3)),
                 pickle.loads(pickle.dumps(lazy.LazyConv1d(2, 3)))):
        assert type(twin) is lazy.LazyConv1d and twin.has_uninitialized_params()
        assert isinstance(twin.weight, lazy.UninitializedParameter)
        twin(mint.randn([1, 5, 4]))
        assert type(twin) is nn.Conv1d and tuple(twin.weight.shape) == (2, 5, 3)


def test_lazy_cell_call_passes_its_arguments_and_runs_the_hooks_after():
    up = lazy.LazyConvTranspose2d(3, 2, stride=2)
    seen = []
    up.register_forward_pre_hook(lambda cell, args: seen.append(type(cell)))
    assert tuple(up(mint.randn([1, 4, 3, 3]), output_size=[7, 7]).shape) == (1, 3, 7, 7)
    assert seen == [nn.ConvTranspose2d]  # the hook runs on the initialized cell, as PyTorch's


def test_placeholders():
    p = lazy.UninitializedParameter(dtype=kiln.float64)
    b = lazy.UninitializedBuffer()
    assert repr(p) == "<UninitializedParameter>" and str(b) == "<UninitializedBuffer>"
    assert p.requires_grad and not b.requires_grad and lazy.is_lazy(p) and lazy.is_lazy(b)
    assert p.detach() is p and tuple(p.shape) == (0,)
    assert not lazy.is_lazy(mint.zeros([1])) and not lazy.is_lazy(nn.Parameter(mint.zeros(1)))
    converted = p.to(kiln.float32)
    assert isinstance(converted, lazy.UninitializedParameter) and converted.dtype == kiln.float32
    assert p.to(kiln.float64) is p
    assert copy.copy(p).dtype == kiln.float64 and copy.copy(p) is not p
    with pytest.raises(kiln.KilnNotImplementedError, match="keeps its shape for life"):
        p.materialize((3,))


def test_optimizer_built_before_the_first_call_warns():
    fc = lazy.LazyLinear(2)
    opt = kiln.optim.SGD(fc.parameters(), lr=0.1)
    fc(mint.randn([3, 4])).sum().backward()
    before = fc.weight.numpy().copy()
    with pytest.warns(UserWarning, match="replaced by LazyLinear's shape inference") as record:
        opt.step()
    assert "as 'weight'" in str(record[0].message) and "as 'bias'" in str(record[1].message)
    np.testing.assert_array_equal(fc.weight.numpy(), before)  # that step trained nothing
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kiln.optim.SGD(fc.parameters(), lr=0.1).step()  # built after the first call
    assert not np.array_equal(fc.weight.numpy(), before)


def test_lazy_cell_under_jit():
    fc = lazy.LazyLinear(2)
    step = kiln.jit(lambda v: fc(v))
    x = mint.randn([3, 4])
    with raises(kiln.KilnValueError, match="inside a kiln.jit trace"):
        step(x)
    assert fc.has_uninitialized_params()
    fc(x)
    close(kiln.jit(lambda v: fc(v))(x), fc(x).numpy())


def test_lazy_cell_errors_leave_it_lazy():
    cases = [
        (lazy.LazyLinear(3), kiln.tensor(1.0), kiln.ShapeError, "at least one dimension"),
        (lazy.LazyLinear(3), [1.0, 2.0], kiln.KilnTypeError, "kiln.Tensor"),
        (lazy.LazyConv2d(4, 3), mint.randn([4, 4]), kiln.ShapeError,
         r"expected input \[N, C_in, H, W\] or one sample \[C_in, H, W\], got \[4, 4\]"),
        (lazy.LazyConv1d(4, 3, groups=2), mint.randn([1, 3, 5]), kiln.KilnValueError,
         r"in_channels \(3, from the input\) must be divisible by groups \(2\)"),
        (lazy.LazyBatchNorm2d(), mint.randn([2, 3, 4]), kiln.ShapeError,
         r"expected a 4-D \[N, C, H, W\] input, got \[2, 3, 4\]"),
        (lazy.LazyInstanceNorm1d(), mint.randn([3]), kiln.ShapeError, r"\[C, L\] or \[N, C, L\]"),
    ]
    for cell, x, error, message in cases:
        with raises(error, match=message):
            cell(x)
        assert cell.has_uninitialized_params() and type(cell).__name__.startswith("Lazy")


def test_lazy_constructor_errors():
    with raises(kiln.KilnValueError, match="not available"):
        lazy.LazyLinear(3, device="cuda")
    with raises(kiln.KilnTypeError, match="affine must be a bool"):
        lazy.LazyBatchNorm1d(affine=1)
    with raises(kiln.KilnValueError, match="momentum"):
        lazy.LazyInstanceNorm2d(momentum=2.0)
    with raises(kiln.KilnValueError, match="padding_mode"):
        lazy.LazyConv2d(3, 3, padding_mode="mirror")
    with raises(kiln.KilnNotImplementedError, match="initialize_parameters is not implemented"):
        lazy.LazyModuleMixin.initialize_parameters(nn.Linear(1, 1), mint.zeros([1]))


# ------------------------------------------------------------------------------------------------
# AdaptiveLogSoftmaxWithLoss

def _adaptive(dtype=kiln.float64, **kwargs):
    kiln.manual_seed(1)
    return AdaptiveLogSoftmaxWithLoss(8, 20, [4, 10], dtype=dtype, **kwargs)


def _towards_clusters(asm):
    """Raises the head's cluster entries, so that predict picks classes of the clusters."""
    with kiln.no_grad():
        asm.head.bias[asm.shortlist_size:] = 3.0


def test_adaptive_softmax_matches_pytorch(torch, rng):
    theirs = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [4, 10], div_value=2.0, head_bias=True,
                                                 dtype=torch.float64)
    ours = _adaptive(div_value=2.0, head_bias=True)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    with torch.no_grad():
        theirs.head.bias[4:] = 1.5  # some rows predict a cluster's class
    ours.load_state_dict(theirs.state_dict())
    assert repr(ours) == repr(theirs).replace("torch.nn.", "")
    v, target = rng.normal(size=(9, 8)), np.array([0, 3, 4, 9, 10, 19, 5, 12, 1])
    x, tx = t(v).requires_grad_(), torch.tensor(v, requires_grad=True)
    out, want = ours(x, t(target)), theirs(tx, torch.tensor(target))
    close(out.output, want.output.detach().numpy(), 1e-12, 1e-12)
    close(out.loss, want.loss.detach().numpy(), 1e-12, 1e-12)
    out.loss.backward()
    want.loss.backward()
    close(x.grad, tx.grad.numpy(), 1e-12, 1e-12)
    for p, q in zip(ours.parameters(), theirs.parameters()):
        close(p.grad, q.grad.numpy(), 1e-12, 1e-12)
    close(ours.log_prob(t(v)), theirs.log_prob(torch.tensor(v)).detach().numpy(), 1e-12, 1e-12)
    predicted = ours.predict(t(v)).numpy()
    np.testing.assert_array_equal(predicted, theirs.predict(torch.tensor(v)).numpy())
    assert (predicted >= 4).any() and (predicted < 4).any()
    one = ours(t(v[2]), t(target[2]))
    close(one.output, theirs(tx[2], torch.tensor(target[2])).output.detach().numpy(), 1e-12, 1e-12)


def test_adaptive_softmax_without_pytorch(rng):
    asm = _adaptive(head_bias=True)
    _towards_clusters(asm)
    assert [tuple(p.shape) for p in asm.parameters()] == [(6, 8), (6,), (2, 8), (6, 2), (0, 8),
                                                          (10, 0)]
    v, target = rng.normal(size=(6, 8)), np.array([19, 0, 7, 10, 3, 15])
    log_prob = asm.log_prob(t(v)).numpy()
    np.testing.assert_allclose(np.exp(log_prob).sum(1), np.ones(6), rtol=1e-12)
    out = asm(t(v), t(target))
    expected = log_prob[np.arange(6), target]
    close(out.output, expected, 1e-12, 1e-12)
    close(out.loss, -expected.mean(), 1e-12, 1e-12)
    np.testing.assert_array_equal(asm.predict(t(v)).numpy(), log_prob.argmax(1))
    one = asm(t(v[0]), kiln.tensor(19))
    assert tuple(one.output.shape) == () and tuple(one.loss.shape) == ()
    close(one.output, expected[0], 1e-12, 1e-12)
    assert one._fields == ("output", "loss")
    # A cluster whose hidden size rounds to zero (uniform over its classes), int32 targets.
    small = AdaptiveLogSoftmaxWithLoss(3, 5, [2], div_value=8.0)
    x = mint.randn([4, 3])
    full = small.log_prob(x).numpy()
    np.testing.assert_allclose(full[:, 2:], full[:, 2:3].repeat(3, 1), rtol=1e-6)
    out = small(x, kiln.tensor([0, 4, 2, 1], dtype=kiln.int32)).output
    close(out, full[np.arange(4), [0, 4, 2, 1]])


def test_adaptive_softmax_errors():
    for cutoffs, message in (([], "length larger than 0"), ([5, 3], "increasing order"),
                             ([3, 3], "unique"), ([0, 4], "positive"), ([4, 20], "n_classes-1"),
                             ([2.5], "integers")):
        with raises(kiln.KilnValueError, match=message):
            AdaptiveLogSoftmaxWithLoss(8, 20, cutoffs)
    with raises(kiln.KilnTypeError, match="cutoffs must be a sequence"):
        AdaptiveLogSoftmaxWithLoss(8, 20, 4)
    with raises(kiln.KilnValueError, match="div_value must be > 0"):
        AdaptiveLogSoftmaxWithLoss(8, 20, [4], div_value=0.0)
    with raises(kiln.KilnTypeError, match="head_bias must be a bool"):
        AdaptiveLogSoftmaxWithLoss(8, 20, [4], head_bias=None)
    asm = _adaptive(dtype=kiln.float32)
    x = mint.randn([3, 8])
    cases = [
        ((x, kiln.tensor([0, 1, 20])), kiln.KilnIndexError, "target 20 is out of range"),
        ((x, kiln.tensor([0, -1, 2])), kiln.KilnIndexError, "target -1 is out of range"),
        ((x, kiln.tensor([0.0, 1.0, 2.0])), kiln.DTypeError, "integer class targets"),
        ((x, kiln.tensor([0, 1])), kiln.ShapeError, "same size in the batch dimension"),
        ((x, kiln.tensor([[0, 1, 2]])), kiln.ShapeError, "multi-target is not supported"),
        ((x, kiln.tensor(1)), kiln.ShapeError, "a 0-d target expects a 1-d input"),
        ((mint.randn([3]), kiln.tensor([0, 1, 2])), kiln.ShapeError, "expects a 2-d input"),
        ((mint.randn([3, 7]), kiln.tensor([0, 1, 2])), kiln.ShapeError, r"\[\.\.\., 8\]"),
    ]
    for args, error, message in cases:
        with raises(error, match=message):
            asm(*args)
    for method in (asm.log_prob, asm.predict):
        with raises(kiln.ShapeError, match=r"expected input \[N, 8\], got \[8\]"):
            method(mint.randn([8]))


# ------------------------------------------------------------------------------------------------
# Fusion

def _eval_bn(bn, rng):
    """``bn`` in eval mode with random statistics (and affine parameters, when it has them)."""
    n = bn.num_features
    with kiln.no_grad():
        bn.running_mean[...] = t(rng.normal(size=n), bn.running_mean.dtype)
        bn.running_var[...] = t(rng.uniform(0.5, 2.0, size=n), bn.running_var.dtype)
        if bn.weight is not None:
            bn.weight[...] = t(rng.normal(size=n), bn.weight.dtype)
            bn.bias[...] = t(rng.normal(size=n), bn.bias.dtype)
    return bn.eval()


FUSION_CASES = [  # (layer, bn, transpose, input shape)
    (lambda: nn.Conv2d(3, 4, 3, bias=False), lambda: nn.BatchNorm2d(4), False, (2, 3, 6, 6)),
    (lambda: nn.Conv1d(3, 4, 2, groups=1), lambda: nn.BatchNorm1d(4, affine=False), False,
     (2, 3, 7)),
    (lambda: nn.Conv3d(2, 3, 1), lambda: nn.BatchNorm3d(3), False, (1, 2, 2, 3, 3)),
    (lambda: nn.ConvTranspose2d(4, 3, 2, stride=2), lambda: nn.BatchNorm2d(3), True,
     (1, 4, 3, 3)),
]


@pytest.mark.parametrize("make_layer, make_bn, transpose, shape", FUSION_CASES)
def test_fused_conv_equals_conv_then_bn(make_layer, make_bn, transpose, shape, rng):
    conv, bn = make_layer().eval(), _eval_bn(make_bn(), rng)
    weight = conv.weight.numpy().copy()
    fused = fusion.fuse_conv_bn_eval(conv, bn, transpose=transpose)
    assert type(fused) is type(conv) and fused is not conv and fused.bias is not None
    x = mint.randn(list(shape))
    close(fused(x), bn(conv(x)).numpy(), 1e-5, 1e-5)
    np.testing.assert_array_equal(conv.weight.numpy(), weight)  # the original is unchanged
    assert fused.weight.requires_grad
    assert fused.bias.requires_grad == (conv.bias is not None)  # PyTorch's rule


@pytest.mark.parametrize("bn_features", [4, 1])
def test_fused_linear_equals_linear_then_bn(bn_features, rng):
    fc, bn = nn.Linear(5, 4).eval(), _eval_bn(nn.BatchNorm1d(bn_features), rng)
    fused = fusion.fuse_linear_bn_eval(fc, bn)
    x = mint.randn([3, 5])
    expected = bn(fc(x).reshape([-1, 1]) if bn_features == 1 else fc(x))
    close(fused(x), expected.reshape([3, 4]).numpy(), 1e-5, 1e-5)
    no_bias = fusion.fuse_linear_bn_eval(nn.Linear(5, 4, bias=False).eval(),
                                         _eval_bn(nn.BatchNorm1d(4, affine=False), rng))
    assert tuple(no_bias.bias.shape) == (4,) and not no_bias.bias.requires_grad


def test_fusion_weights_match_pytorch(torch, rng):
    import torch.nn.utils.fusion as theirs
    w, b = rng.normal(size=(4, 3, 2, 2)), rng.normal(size=4)
    rm, rv = rng.normal(size=4), rng.uniform(0.5, 2.0, size=4)
    bw, bb = rng.normal(size=4), rng.normal(size=4)
    for transpose, weight in ((False, w), (True, w.transpose(1, 0, 2, 3).copy())):
        for bias in (b, None):
            args = (weight, bias, rm, rv, 1e-3, bw, bb)
            ours = fusion.fuse_conv_bn_weights(
                *[None if a is None else t(a) if isinstance(a, np.ndarray) else a for a in args],
                transpose=transpose)
            want = theirs.fuse_conv_bn_weights(
                *[None if a is None else torch.tensor(a) if isinstance(a, np.ndarray) else a
                  for a in args], transpose=transpose)
            for o, e in zip(ours, want):
                close(o, e.detach().numpy(), 1e-12, 1e-12)
                assert isinstance(o, nn.Parameter) and o.requires_grad == e.requires_grad
    lw, lb = rng.normal(size=(4, 5)), rng.normal(size=4)
    ours = fusion.fuse_linear_bn_weights(t(lw), t(lb), t(rm), t(rv), 1e-5, t(bw), t(bb))
    want = theirs.fuse_linear_bn_weights(*map(torch.tensor, (lw, lb, rm, rv)), 1e-5,
                                         torch.tensor(bw), torch.tensor(bb))
    for o, e in zip(ours, want):
        close(o, e.detach().numpy(), 1e-12, 1e-12)
    # float32 weights with float64 statistics: the results take the weights' dtype.
    mixed = fusion.fuse_linear_bn_weights(t(lw, kiln.float32), None, t(rm), t(rv), 1e-5, t(bw),
                                          t(bb))
    assert [p.dtype for p in mixed] == [kiln.float32, kiln.float32]


def test_fusion_errors(rng):
    conv, bn = nn.Conv2d(3, 4, 1).eval(), _eval_bn(nn.BatchNorm2d(4), rng)
    with raises(kiln.KilnValueError, match="fusion only for eval, but bn is in training mode"):
        fusion.fuse_conv_bn_eval(conv, nn.BatchNorm2d(4))
    with raises(kiln.KilnValueError, match="Conv2d is in training mode"):
        fusion.fuse_conv_bn_eval(nn.Conv2d(3, 4, 1), bn)
    with raises(kiln.KilnValueError, match="running_var must not be None"):
        fusion.fuse_conv_bn_eval(conv, nn.BatchNorm2d(4, track_running_stats=False).eval())
    with raises(kiln.ShapeError, match=r"bn.num_features \(4\) must equal conv.out_channels"):
        fusion.fuse_conv_bn_eval(nn.Conv2d(3, 5, 1).eval(), bn)
    with raises(kiln.KilnTypeError, match="expected a kiln.nn convolution"):
        fusion.fuse_conv_bn_eval(nn.Linear(3, 4).eval(), bn)
    with raises(kiln.KilnTypeError, match="BatchNorm cell as bn"):
        fusion.fuse_conv_bn_eval(conv, nn.LayerNorm(4).eval())
    with raises(kiln.ShapeError, match="linear.out_features == bn.num_features"):
        fusion.fuse_linear_bn_eval(nn.Linear(3, 5).eval(), bn)
    with raises(kiln.KilnValueError, match="has an activation"):
        fusion.fuse_linear_bn_eval(nn.Dense(3, 4, activation="relu").eval(), bn)
    with raises(kiln.KilnTypeError, match="expected bn_rm to be a kiln.Tensor"):
        fusion.fuse_linear_bn_weights(mint.ones([4, 3]), None, [0.0] * 4, mint.ones([4]), 1e-5,
                                      None, None)
    with raises(kiln.KilnTypeError, match="bn_eps to be a real number"):
        fusion.fuse_conv_bn_weights(mint.ones([4, 3, 1, 1]), None, mint.zeros([4]),
                                    mint.ones([4]), None, None, None)


# ------------------------------------------------------------------------------------------------
# stateless.functional_call and skip_init

def test_stateless_functional_call_is_a_deprecated_alias():
    net = nn.Linear(3, 2)
    x, w = mint.randn([4, 3]), mint.randn([2, 3])
    with pytest.warns(FutureWarning, match=r"stateless.functional_call` is deprecated .* "
                                           r"`kiln.func.functional_call`") as record:
        out = stateless.functional_call(net, {"weight": w}, (x,))
    assert record[0].filename == __file__  # the caller's line
    close(out, kiln.func.functional_call(net, {"weight": w}, x).numpy())
    with pytest.warns(FutureWarning), raises(kiln.KilnValueError, match="strict=True"):
        stateless.functional_call(net, {"weight": w}, x, strict=True)


def test_skip_init_draws_nothing_and_restores_the_initialisers():
    originals = [getattr(nn.init, name) for name in ("uniform_", "kaiming_uniform_", "ones_")]
    kiln.manual_seed(0)
    fc = skip_init(nn.Linear, 6, 5, device="cpu")
    asm = skip_init(AdaptiveLogSoftmaxWithLoss, 8, 20, cutoffs=[4])  # sub-cells are skipped too
    drawn = mint.rand([4]).numpy()
    kiln.manual_seed(0)
    np.testing.assert_array_equal(drawn, mint.rand([4]).numpy())
    assert tuple(fc.weight.shape) == (5, 6) and fc.weight.requires_grad
    assert tuple(asm.tail[0][1].weight.shape) == (16, 2)
    assert [getattr(nn.init, name) for name in ("uniform_", "kaiming_uniform_", "ones_")] \
        == originals
    kiln.manual_seed(0)
    nn.Linear(6, 5)
    assert not np.array_equal(drawn, mint.rand([4]).numpy())  # a regular cell draws


def test_skip_init_leaves_other_threads_initialising():
    original = nn.init.uniform_
    started, release = threading.Event(), threading.Event()

    class Slow(nn.Cell):
        def __init__(self):
            super().__init__()
            started.set()
            assert release.wait(10)
            self.fc = nn.Linear(4, 4)

    built = []
    worker = threading.Thread(target=lambda: built.append(skip_init(Slow)))
    worker.start()
    try:
        assert started.wait(10)
        fc = nn.Linear(64, 64)  # on this thread, while the worker skips
    finally:
        release.set()
        worker.join(10)
    values = fc.weight.numpy()
    assert np.abs(values).max() <= 1 / 8 and abs(values.std() - 1 / 8 / math.sqrt(3)) < 0.01
    assert type(built[0]) is Slow and nn.init.uniform_ is original


def test_skip_init_errors():
    with raises(kiln.KilnTypeError, match="expected a kiln.nn.Cell subclass"):
        skip_init(nn.Linear(2, 2))
    with raises(kiln.KilnTypeError, match="expected a kiln.nn.Cell subclass"):
        skip_init(int, 3)
    with raises(kiln.KilnValueError, match="not available"):
        skip_init(nn.Linear, 2, 2, device="cuda")
    with raises(kiln.KilnValueError, match="must be divisible by groups"):
        skip_init(nn.Conv2d, 3, 4, 1, groups=2)
    assert not hasattr(nn.init.uniform_, "__wrapped__")  # the wrappers are gone
