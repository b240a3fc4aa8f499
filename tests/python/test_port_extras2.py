"""More of PyTorch that ported training scripts use: lr_scheduler.SequentialLR and
CosineAnnealingWarmRestarts, nn.GroupNorm, nn.Embedding.from_pretrained, nn.Dropout1d /
Dropout2d (channel dropout), nn.KLDivLoss and nn.init.orthogonal_. Each is checked against NumPy
or a closed form (so the file runs without PyTorch), then against PyTorch where it is installed
(the ``torch`` fixture), with its argument errors and their messages."""

import math
import pickle
import warnings

import numpy as np
import pytest

import kiln
from conftest import (assert_rates, check_channel_dropout, check_schedule_against_torch,
                      check_torch, close, group_rates as rates, raises, sgd_at_rates, t,
                      torch_sgd_at_rates, torch_twin)
from kiln import nn, optim
from kiln.nn.dropout import Dropout1d, Dropout2d
from kiln.nn.init import orthogonal_
from kiln.nn.loss import KLDivLoss
from kiln.nn.normalization import GroupNorm
from kiln.optim import lr_scheduler
from kiln.optim.lr_scheduler import CosineAnnealingWarmRestarts, SequentialLR

mint = kiln.mint
BASES = (0.1, 0.05, 1.0)  # the rates of three parameter groups
STEPS = 30


# ------------------------------------------------------------------------------------------------
# Schedules: closed forms of the rate at step t of a group whose base rate is ``base``


def cosine(base, t, t_max, eta_min=0.0):
    return eta_min + (base - eta_min) * (1 + math.cos(math.pi * t / t_max)) / 2


def restarts(base, epoch, t_0, t_mult=1, eta_min=0.0):
    """SGDR's rate at a (fractional) epoch: the cycles are t_0, t_0 * t_mult, ... long."""
    start, length = 0, t_0
    while epoch >= start + length:
        start, length = start + length, length * t_mult
    return cosine(base, epoch - start, length, eta_min)


def linear(base, t, start, total):
    return base * (start + (1 - start) * min(t, total) / total)


# name: (build from a scheduler module and an optimizer, the rate of group base at step t)
SCHEDULES = {
    "warmup-cosine": (
        lambda m, o: m.SequentialLR(o, [m.LinearLR(o, 0.1, 1.0, 5),
                                        m.CosineAnnealingLR(o, T_max=25, eta_min=1e-3)], [5]),
        lambda b, t: linear(b, t, 0.1, 5) if t < 5 else cosine(b, t - 5, 25, 1e-3)),
    "three-phases": (
        lambda m, o: m.SequentialLR(o, [m.ConstantLR(o, 0.5, 3), m.ExponentialLR(o, 0.9),
                                        m.StepLR(o, 4, 0.5)], [4, 12]),
        lambda b, t: (b * (0.5 if t < 3 else 1.0) if t < 4 else b * 0.9 ** (t - 4) if t < 12
                      else b * 0.5 ** ((t - 12) // 4))),
    "milestone-0": (
        lambda m, o: m.SequentialLR(o, [m.ConstantLR(o, 0.5, 3), m.ExponentialLR(o, 0.9)], [0]),
        lambda b, t: b * 0.9 ** t),
    "warmup-restarts": (
        lambda m, o: m.SequentialLR(o, [m.LinearLR(o, 0.2, total_iters=4),
                                        m.CosineAnnealingWarmRestarts(o, 3, 2)], [4]),
        lambda b, t: linear(b, t, 0.2, 4) if t < 4 else restarts(b, t - 4, 3, 2)),
    "restarts": (lambda m, o: m.CosineAnnealingWarmRestarts(o, 7, eta_min=0.01),
                 lambda b, t: restarts(b, t, 7, 1, 0.01)),
    "restarts-doubling": (lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2),
                          lambda b, t: restarts(b, t, 3, 2)),
    "restarts-tripling": (lambda m, o: m.CosineAnnealingWarmRestarts(o, 1, 3),
                          lambda b, t: restarts(b, t, 1, 3)),
}


def expected_rates(name, t):
    return [SCHEDULES[name][1](base, t) for base in BASES]


@pytest.mark.parametrize("name", SCHEDULES)
def test_schedule_follows_its_closed_form(name):
    opt = sgd_at_rates(BASES)
    sched = SCHEDULES[name][0](lr_scheduler, opt)
    for t in range(STEPS + 1):
        if t:
            sched.step()
        assert sched.last_epoch == t
        assert_rates(rates(opt), expected_rates(name, t))
        assert sched.get_last_lr() == rates(opt)


@pytest.mark.parametrize("name", SCHEDULES)
def test_state_dict_resumes_mid_schedule(name):
    # Saved after 13 steps (past the sequences' first milestones), pickled, loaded into a
    # scheduler built afresh: it continues the schedule.
    build = SCHEDULES[name][0]
    sched = build(lr_scheduler, sgd_at_rates(BASES))
    for _ in range(13):
        sched.step()
    saved = pickle.loads(pickle.dumps(sched.state_dict()))
    assert "optimizer" not in saved and saved["last_epoch"] == 13
    opt = sgd_at_rates(BASES)
    resumed = build(lr_scheduler, opt)
    resumed.load_state_dict(saved)
    assert_rates(rates(opt), expected_rates(name, 13))
    for t in range(14, STEPS + 1):
        resumed.step()
        assert_rates(rates(opt), expected_rates(name, t))


def test_sequential_state_holds_the_schedulers_states_and_restores_the_running_ones_rates():
    opt = sgd_at_rates(BASES)
    sched = SCHEDULES["three-phases"][0](lr_scheduler, opt)
    for _ in range(6):  # in the second scheduler
        sched.step()
    saved = sched.state_dict()
    # The third, not started, is at step -1 (its constructor's step 0 undone, as in PyTorch).
    assert [s["last_epoch"] for s in saved["_schedulers"]] == [3, 2, -1]
    assert sorted(saved) == ["_last_lr", "_milestones", "_schedulers", "last_epoch"]
    assert saved["_milestones"] == [4, 12]
    # The last scheduler's rates differ; loading sets the running one's, whatever the order.
    other = sgd_at_rates(BASES)
    fresh = SCHEDULES["three-phases"][0](lr_scheduler, other)
    fresh.load_state_dict(saved)
    assert_rates(rates(other), expected_rates("three-phases", 6))
    assert "_schedulers" in saved  # the dict given is left whole
    with raises(kiln.KilnValueError, match=r"SequentialLR.load_state_dict: the state holds 2 "
                                           r"schedulers' states, expected 3"):
        fresh.load_state_dict({**saved, "_schedulers": saved["_schedulers"][:2]})


def test_sequential_starts_a_one_cycle_with_its_momentum():
    opt = optim.SGD([nn.Parameter(mint.zeros(2, dtype=kiln.float64))], lr=0.1, momentum=0.9)
    constant = lr_scheduler.ConstantLR(opt, 0.5, 10)
    cycle = lr_scheduler.OneCycleLR(opt, 1.0, total_steps=10, cycle_momentum=True)
    sched = SequentialLR(opt, [constant, cycle], [3])
    for _ in range(3):
        sched.step()
    # At the milestone the cycle is at its step 0: max_lr / 25 and max_momentum.
    assert rates(opt) == pytest.approx([0.04]) and opt.param_groups[0]["momentum"] == 0.95
    assert cycle.last_epoch == 0


def test_restarts_from_fractional_epochs():
    opt = sgd_at_rates(BASES)
    sched = CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2, eta_min=0.01)
    for epoch in (0.5, 2.999, 3.0, 7.25, 20.5, 0):
        sched.step(epoch)
        assert sched.last_epoch == math.floor(epoch)
        assert_rates(rates(opt), [restarts(b, epoch, 3, 2, 0.01) for b in BASES])
    sched.step(2.5)
    sched.step()  # one on from the last epoch: 3.5
    assert sched.last_epoch == 3 and (sched.T_cur, sched.T_i) == (0.5, 6)
    assert_rates(rates(opt), [restarts(b, 3.5, 3, 2, 0.01) for b in BASES])
    state = pickle.loads(pickle.dumps(sched.state_dict()))
    assert (state["T_cur"], state["T_i"], state["T_0"], state["T_mult"]) == (0.5, 6, 3, 2)


def test_restarts_find_each_cycle_exactly():
    # PyTorch's logarithm puts epoch 121 (T_0=1, T_mult=3) at the end of the cycle before it.
    opt = sgd_at_rates(BASES)
    sched = CosineAnnealingWarmRestarts(opt, 1, 3)
    for cycle, epoch in enumerate((1, 4, 13, 40, 121, 364, 1093), start=1):
        sched.step(epoch)
        assert (sched.T_cur, sched.T_i) == (0, 3 ** cycle)
        assert_rates(rates(opt), list(BASES))


def test_scheduler_steps_inside_a_jitted_function_are_refused_and_change_nothing():
    opt = sgd_at_rates(BASES)
    sched = SCHEDULES["warmup-restarts"][0](lr_scheduler, opt)
    for _ in range(3):
        sched.step()
    restarting = sched._schedulers[1]
    before = (sched.last_epoch, restarting.last_epoch, restarting.T_cur, rates(opt))

    def body(g):
        opt((g, None, None))
        sched.step()  # step 4: the milestone, where the restarts begin

    with raises(kiln.KilnValueError, match=r"inside a kiln.jit function"):
        kiln.jit(body)(mint.ones(3, dtype=kiln.float64))
    assert (sched.last_epoch, restarting.last_epoch, restarting.T_cur, rates(opt)) == before
    sched.step()
    assert_rates(rates(opt), expected_rates("warmup-restarts", 4))


SCHEDULER_ERRORS = [
    (lambda o: SequentialLR(o, [], []), kiln.KilnValueError,
     "SequentialLR: expected at least one scheduler, got none"),
    (lambda o: SequentialLR(o, lr_scheduler.StepLR(o, 2), []), kiln.KilnTypeError,
     "SequentialLR: schedulers must be a list of schedulers, got StepLR"),
    (lambda o: SequentialLR(o, [lr_scheduler.StepLR(o, 2), "cosine"], [3]), kiln.KilnTypeError,
     r"SequentialLR: expected schedulers\[1\] to be a kiln learning-rate scheduler, got str"),
    (lambda o: SequentialLR(o, [lr_scheduler.ReduceLROnPlateau(o)], []), kiln.KilnValueError,
     r"SequentialLR: schedulers\[0\] is a ReduceLROnPlateau, whose step takes a metric"),
    (lambda o: SequentialLR(o, [lr_scheduler.StepLR(o, 2),
                                lr_scheduler.StepLR(sgd_at_rates(BASES), 2)], [3]),
     kiln.KilnValueError, r"SequentialLR: schedulers\[1\] \(StepLR\) sets the rates of another "
                          r"optimizer than the one given"),
    (lambda o: SequentialLR(o, [lr_scheduler.StepLR(o, 2)] * 2, []), kiln.KilnValueError,
     r"SequentialLR: expected 1 milestones \(one fewer than the 2 schedulers\), got 0"),
    (lambda o: SequentialLR(o, [lr_scheduler.StepLR(o, 2)] * 3, [5, 2]), kiln.KilnValueError,
     r"SequentialLR: milestones must be in increasing order, got \[5, 2\]"),
    (lambda o: SequentialLR(o, [lr_scheduler.StepLR(o, 2)] * 2, [-1]), kiln.KilnValueError,
     "SequentialLR: a milestone must be at least 0, got -1"),
    (lambda o: SequentialLR(o, [lr_scheduler.StepLR(o, 2)] * 2, [2.5]), kiln.KilnTypeError,
     "SequentialLR: a milestone must be an int, got float 2.5"),
    (lambda o: SequentialLR(o, [lr_scheduler.StepLR(o, 2)] * 2, 3), kiln.KilnTypeError,
     "SequentialLR: milestones must be a list of step indices, got int 3"),
    (lambda o: SequentialLR(None, [], []), kiln.KilnTypeError,
     "SequentialLR: expected a kiln.optim.Optimizer, got NoneType"),
    (lambda o: CosineAnnealingWarmRestarts(o, 0), kiln.KilnValueError,
     "CosineAnnealingWarmRestarts: T_0 must be at least 1, got 0"),
    (lambda o: CosineAnnealingWarmRestarts(o, 2.0), kiln.KilnTypeError,
     "CosineAnnealingWarmRestarts: T_0 must be an int, got float 2.0"),
    (lambda o: CosineAnnealingWarmRestarts(o, 5, T_mult=0), kiln.KilnValueError,
     "CosineAnnealingWarmRestarts: T_mult must be at least 1, got 0"),
    (lambda o: CosineAnnealingWarmRestarts(o, 5, T_mult=1.5), kiln.KilnTypeError,
     "CosineAnnealingWarmRestarts: T_mult must be an int, got float 1.5"),
    (lambda o: CosineAnnealingWarmRestarts(o, 5, eta_min=-0.1), kiln.KilnValueError,
     r"CosineAnnealingWarmRestarts: invalid eta_min -0.1, expected eta_min >= 0.0"),
    (lambda o: CosineAnnealingWarmRestarts(o, 5, eta_min="0"), kiln.KilnTypeError,
     "CosineAnnealingWarmRestarts: eta_min must be a real number, got '0'"),
    (lambda o: CosineAnnealingWarmRestarts(o, 5).step(-1), kiln.KilnValueError,
     r"CosineAnnealingWarmRestarts.step: invalid epoch -1, expected epoch >= 0.0"),
    (lambda o: CosineAnnealingWarmRestarts(o, 5).step(float("nan")), kiln.KilnValueError,
     r"CosineAnnealingWarmRestarts.step: invalid epoch nan"),
    (lambda o: CosineAnnealingWarmRestarts(o, 5).step(math.inf), kiln.KilnValueError,
     "CosineAnnealingWarmRestarts.step: expected a finite epoch, got inf"),
    (lambda o: CosineAnnealingWarmRestarts(o, 5).step("3"), kiln.KilnTypeError,
     "CosineAnnealingWarmRestarts.step: epoch must be a real number, got '3'"),
]


@pytest.mark.parametrize("build, error, message", SCHEDULER_ERRORS,
                         ids=[m.split(":")[1][:40] for _, _, m in SCHEDULER_ERRORS])
def test_scheduler_argument_errors(build, error, message):
    with raises(error, match=message):
        build(sgd_at_rates(BASES))


def test_a_refused_epoch_leaves_the_schedule_as_it_was():
    opt = sgd_at_rates(BASES)
    sched = CosineAnnealingWarmRestarts(opt, 5)
    sched.step(2.5)
    with raises(kiln.KilnValueError, match="invalid epoch"):
        sched.step(-2)
    assert (sched.last_epoch, sched.T_cur, sched.T_i) == (2, 2.5, 5)


# ------------------------------------------------------------------------------------------------
# GroupNorm


def group_norm_reference(x, groups, weight=None, bias=None, eps=1e-5):
    n, c = x.shape[:2]
    grouped = x.reshape(n, groups, -1).astype(np.float64)
    mean = grouped.mean(-1, keepdims=True)
    var = grouped.var(-1, keepdims=True)
    y = ((grouped - mean) / np.sqrt(var + eps)).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(shape) + bias.reshape(shape)
    return y


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64], ids=lambda d: d.name)
@pytest.mark.parametrize("shape, groups", [((2, 6, 4, 3), 3), ((3, 4), 2), ((2, 8, 5), 1),
                                           ((1, 6, 2, 2, 2), 6)], ids=str)
def test_group_norm_matches_numpy(shape, groups, dtype, rng):
    x = rng.normal(1.0, 2.0, size=shape)
    cell = GroupNorm(groups, shape[1], dtype=dtype)
    assert cell.weight.dtype == dtype and [n for n, _ in cell.named_parameters()] == ["weight",
                                                                                      "bias"]
    np.testing.assert_array_equal(cell.weight.numpy(), np.ones(shape[1]))
    np.testing.assert_array_equal(cell.bias.numpy(), np.zeros(shape[1]))
    weight, bias = rng.normal(size=shape[1]), rng.normal(size=shape[1])
    cell.load_state_dict({"weight": t(weight, dtype), "bias": t(bias, dtype)})
    tol = 1e-12 if dtype == kiln.float64 else 1e-5
    close(cell(t(x, dtype)), group_norm_reference(x, groups, weight, bias), tol, tol)
    cell.eval()  # no running statistics: eval mode computes alike
    close(cell(t(x, dtype)), group_norm_reference(x, groups, weight, bias), tol, tol)


def test_group_norm_without_affine_has_no_parameters(rng):
    cell = GroupNorm(2, 4, eps=1e-3, affine=False)
    assert cell.weight is None and cell.bias is None and list(cell.parameters()) == []
    x = rng.normal(size=(3, 4, 5))
    close(cell(t(x)), group_norm_reference(x, 2, eps=1e-3), 1e-5, 1e-5)
    assert repr(cell) == "GroupNorm(2, 4, eps=0.001, affine=False, bias=False)"
    assert repr(GroupNorm(3, 6)) == "GroupNorm(3, 6, eps=1e-05, affine=True, bias=True)"


def test_group_norm_without_bias_keeps_the_weight(rng):
    cell = GroupNorm(2, 4, bias=False, dtype=kiln.float64)
    assert cell.bias is None and [n for n, _ in cell.named_parameters()] == ["weight"]
    weight = rng.normal(size=4)
    cell.load_state_dict({"weight": t(weight)})
    x = rng.normal(size=(3, 4, 2))
    close(cell(t(x)), group_norm_reference(x, 2, weight, np.zeros(4)), 1e-12, 1e-12)


def test_group_norm_gradients_reach_the_input_and_the_parameters(rng):
    cell = GroupNorm(2, 4, dtype=kiln.float64)
    x = t(rng.normal(size=(2, 4, 3))).requires_grad_()
    (cell(x) * t(rng.normal(size=(2, 4, 3)))).sum().backward()
    assert x.grad.shape == (2, 4, 3) and cell.weight.grad.shape == (4,)
    # Each group's normalized values sum to zero, so a constant upstream gradient gives none.
    gx, = kiln.autograd.grad(cell(x).sum(), [x])
    np.testing.assert_allclose(gx.numpy(), 0.0, atol=1e-12)


@pytest.mark.parametrize("build, error, message", [
    (lambda: GroupNorm(4, 6), kiln.KilnValueError,
     "GroupNorm: num_channels must be divisible by num_groups, got num_channels=6, num_groups=4"),
    (lambda: GroupNorm(0, 6), kiln.KilnValueError, "GroupNorm: num_groups must be at least 1"),
    (lambda: GroupNorm(2, 6.0), kiln.KilnTypeError, "GroupNorm: num_channels must be an int"),
    (lambda: GroupNorm(2, 6, eps=-1e-5), kiln.KilnValueError,
     "GroupNorm: eps must be at least 0, got -1e-05"),
    (lambda: GroupNorm(2, 6, eps=None), kiln.KilnTypeError,
     "GroupNorm: expected eps to be a real number, got NoneType"),
    (lambda: GroupNorm(2, 6, affine=1), kiln.KilnTypeError,
     "GroupNorm: affine must be a bool, got int 1"),
    (lambda: GroupNorm(2, 6, bias=None), kiln.KilnTypeError,
     "GroupNorm: bias must be a bool, got NoneType"),
    (lambda: GroupNorm(2, 6)(mint.ones(2, 4, 3)), kiln.ShapeError,
     r"GroupNorm: expected an input \[N, 6, ...\] with 6 channels in dim 1, got shape "
     r"\[2, 4, 3\]"),
    (lambda: GroupNorm(2, 6, affine=False)(mint.ones(6)), kiln.ShapeError,
     r"GroupNorm: expected an input \[N, 6, ...\] with 6 channels in dim 1, got shape \[6\]"),
    (lambda: GroupNorm(2, 6)(mint.ones((2, 6), dtype=kiln.int64)), kiln.DTypeError,
     "group_norm: expected a floating-point input, got int64"),
])
def test_group_norm_errors(build, error, message):
    with raises(error, match=message):
        build()


# ------------------------------------------------------------------------------------------------
# Embedding.from_pretrained


def test_from_pretrained_uses_the_table_as_it_is():
    table = t(np.arange(12.0).reshape(4, 3))
    kiln.manual_seed(5)
    emb = nn.Embedding.from_pretrained(table, padding_idx=-1)
    after = mint.rand(3).numpy()
    kiln.manual_seed(5)
    np.testing.assert_array_equal(after, mint.rand(3).numpy())  # nothing was drawn
    assert (emb.num_embeddings, emb.embedding_dim, emb.padding_idx) == (4, 3, 3)
    assert not emb.weight.requires_grad and emb.weight.dtype == kiln.float64
    assert repr(emb) == "Embedding(4, 3, padding_idx=3)"
    # Its padding row keeps its values; the Parameter shares the table's memory.
    out = emb(t([[3, 0]], kiln.int64))
    np.testing.assert_array_equal(out.numpy(), [[[9.0, 10.0, 11.0], [0.0, 1.0, 2.0]]])
    with kiln.no_grad():
        table[0] = -1.0
    np.testing.assert_array_equal(emb.weight.numpy()[0], [-1.0] * 3)


def test_from_pretrained_unfrozen_trains_all_but_the_padding_row():
    emb = nn.Embedding.from_pretrained(t(np.ones((5, 2)), kiln.float32), freeze=False,
                                       padding_idx=1)
    assert emb.weight.requires_grad
    emb(t([1, 2, 2, 4], kiln.int64)).sum().backward()
    np.testing.assert_array_equal(emb.weight.grad.numpy()[:, 0], [0.0, 0.0, 2.0, 0.0, 1.0])


@pytest.mark.parametrize("build, error, message", [
    (lambda: nn.Embedding.from_pretrained([[1.0, 2.0]]), kiln.KilnTypeError,
     "Embedding.from_pretrained: expected embeddings to be a kiln.Tensor, got list"),
    (lambda: nn.Embedding.from_pretrained(mint.ones(4)), kiln.ShapeError,
     r"Embedding.from_pretrained: expected 2-d embeddings \[num_embeddings, embedding_dim\], "
     r"got shape \[4\]"),
    (lambda: nn.Embedding.from_pretrained(mint.ones(4, 2), freeze=0), kiln.KilnTypeError,
     "Embedding.from_pretrained: freeze must be a bool, got int 0"),
    (lambda: nn.Embedding.from_pretrained(mint.ones(4, 2), padding_idx=4), kiln.KilnValueError,
     r"Embedding: padding_idx must be in \[-4, 3\], got 4"),
    (lambda: nn.Embedding.from_pretrained(mint.ones(4, 2), sparse=True),
     kiln.KilnNotImplementedError, "Embedding.from_pretrained: sparse is not supported"),
])
def test_from_pretrained_errors(build, error, message):
    with raises(error, match=message):
        build()


# ------------------------------------------------------------------------------------------------
# Dropout1d and Dropout2d


@pytest.mark.filterwarnings("ignore:Dropout2d. a 3-D input")  # (a colon ends the pattern)
@pytest.mark.parametrize("cls, shape, channel_dims", [
    (Dropout2d, (16, 32, 3, 4), 2), (Dropout2d, (16, 32, 5), 2), (Dropout1d, (16, 32, 5), 2),
    (Dropout1d, (512, 7), 1)], ids=lambda v: getattr(v, "__name__", str(v)))
def test_channel_dropout_zeroes_whole_channels(cls, shape, channel_dims):
    p = 0.25
    drop = cls(p)
    x = t(np.ones(shape), kiln.float32).requires_grad_()
    kiln.manual_seed(11)
    y = drop(x)
    kiln.manual_seed(11)
    again = drop(x).numpy()
    np.testing.assert_array_equal(y.detach().numpy(), again)  # the seed repeats the mask
    check_channel_dropout(x, y, channel_dims, p)
    drop.eval()
    assert drop(x).is_same(x)


def test_channel_dropout_edge_probabilities_and_dtypes():
    x = t(np.array([[[1.0, np.nan], [2.0, 3.0]]]), kiln.float16)
    assert Dropout1d(0.0)(x).is_same(x)
    zeroed = Dropout1d(1.0)(x).numpy()
    np.testing.assert_array_equal(zeroed, [[[0.0, np.nan], [0.0, 0.0]]])  # x * 0, as PyTorch's
    kiln.manual_seed(0)
    out = Dropout1d(0.3)(t(np.ones((8, 16, 2)), kiln.bfloat16))
    assert out.dtype == kiln.bfloat16
    kept = out.to(kiln.float32).numpy()
    assert set(np.unique(kept).tolist()) <= {0.0, float(t([1 / 0.7]).to(kiln.bfloat16).item())}
    empty = mint.ones(0, 3, 2, 2)
    assert Dropout2d()(empty).is_same(empty)


def test_channel_dropout_inplace_writes_its_input_unless_autograd_needs_it():
    x = mint.ones(4, 8, 2, 2)
    kiln.manual_seed(2)
    assert Dropout2d(0.5, True)(x).is_same(x)
    assert set(np.unique(x.numpy()).tolist()) == {0.0, 2.0}
    y = mint.ones(4, 8, 3).requires_grad_()
    out = Dropout1d(0.5, inplace=True)(y)
    assert not out.is_same(y) and out.requires_grad
    np.testing.assert_array_equal(y.detach().numpy(), 1.0)


def test_channel_dropout_draws_a_new_mask_at_each_jitted_call():
    drop = Dropout2d(0.5)
    step = kiln.jit(lambda x: drop(x))
    x = mint.ones(4, 16, 2, 2)
    kiln.manual_seed(9)
    jitted = [step(x).numpy() for _ in range(3)]
    kiln.manual_seed(9)
    eager = [drop(x).numpy() for _ in range(3)]
    assert not np.array_equal(jitted[0], jitted[1])
    for a, b in zip(jitted, eager):
        np.testing.assert_array_equal(a, b)


def test_dropout2d_warns_on_3d_input_as_pytorch_does():
    with pytest.warns(UserWarning, match=r"Dropout2d: a 3-D input is taken as \[N, C, L\]"):
        Dropout2d()(mint.ones(2, 3, 4))


@pytest.mark.parametrize("build, error, message", [
    (lambda: Dropout2d()(mint.ones(2, 3)), kiln.ShapeError,
     r"Dropout2d: expected a 4-D \[N, C, H, W\] input \(or 3-D \[N, C, L\]\), got shape "
     r"\[2, 3\]"),
    (lambda: Dropout2d()(mint.ones(1, 2, 3, 4, 5)), kiln.ShapeError, "Dropout2d: expected a 4-D"),
    (lambda: Dropout1d()(mint.ones(2, 3, 4, 5)), kiln.ShapeError,
     r"Dropout1d: expected a 2-D \[C, L\] or 3-D \[N, C, L\] input, got shape \[2, 3, 4, 5\]"),
    (lambda: Dropout1d()(mint.ones((2, 3), dtype=kiln.int32)), kiln.DTypeError,
     "Dropout1d: expected a floating-point input, got int32"),
    (lambda: Dropout2d()([[1.0]]), kiln.KilnTypeError,
     "Dropout2d: expected input to be a kiln.Tensor, got list"),
    (lambda: Dropout2d(1.5), kiln.KilnValueError, r"Dropout2d: p must be in \[0, 1\], got 1.5"),
    (lambda: Dropout1d("0.5"), kiln.KilnTypeError,
     "Dropout1d: expected p to be a real number, got str '0.5'"),
    (lambda: nn.Dropout(None), kiln.KilnTypeError,
     "Dropout: expected p to be a real number, got NoneType"),
    (lambda: Dropout2d(inplace=1), kiln.KilnTypeError, "Dropout2d: inplace must be a bool"),
])
def test_channel_dropout_errors(build, error, message):
    with raises(error, match=message):
        build()


def test_channel_dropout_reprs():
    assert repr(Dropout2d()) == "Dropout2d(p=0.5)"
    assert repr(Dropout1d(0.1, True)) == "Dropout1d(p=0.1, inplace=True)"


# ------------------------------------------------------------------------------------------------
# KLDivLoss


def kl_reference(x, target, reduction, log_target):
    p = np.exp(target) if log_target else target
    logs = target if log_target else np.log(np.where(p == 0, 1.0, p))
    pointwise = np.where(p == 0, 0.0, p * (logs - x))
    return {"none": pointwise, "sum": pointwise.sum(), "mean": pointwise.mean(),
            "batchmean": pointwise.sum() / x.shape[0]}[reduction]


def kl_inputs(rng, shape=(4, 5)):
    x = np.log(rng.dirichlet(np.ones(shape[-1]), size=shape[:-1]))
    p = rng.dirichlet(np.ones(shape[-1]), size=shape[:-1])
    p[0, 1] = 0.0  # a zero target adds nothing
    return x, p


@pytest.mark.parametrize("log_target", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "batchmean", "sum", "none"])
def test_kl_div_loss_matches_numpy(reduction, log_target, rng):
    x, p = kl_inputs(rng)
    target = np.log(np.where(p == 0, 1e-30, p)) if log_target else p
    loss = KLDivLoss(reduction=reduction, log_target=log_target)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # kl_div's about 'mean'
        out = loss(t(x), t(target))
    close(out, kl_reference(x, target, reduction, log_target), 1e-12, 1e-12)


def test_kl_div_loss_warns_about_mean_and_differentiates(rng):
    x, p = kl_inputs(rng)
    xs = t(x).requires_grad_()
    with pytest.warns(UserWarning, match="reduction='mean' divides the total loss"):
        KLDivLoss()(xs, t(p))
    KLDivLoss("batchmean")(xs, t(p)).backward()
    np.testing.assert_allclose(xs.grad.numpy(), -p / x.shape[0], rtol=1e-12)
    assert repr(KLDivLoss()) == "KLDivLoss(reduction='mean', log_target=False)"


@pytest.mark.parametrize("build, error, message", [
    (lambda: KLDivLoss("avg"), kiln.KilnValueError,
     r"KLDivLoss: reduction must be one of \('mean', 'sum', 'none', 'batchmean'\), got 'avg'"),
    (lambda: KLDivLoss(log_target=1), kiln.KilnTypeError,
     "KLDivLoss: log_target must be a bool, got int 1"),
    (lambda: KLDivLoss("sum")(mint.ones(2, 3), mint.ones(3)), kiln.ShapeError,
     "kl_div: input has shape"),
])
def test_kl_div_loss_errors(build, error, message):
    with raises(error, match=message):
        build()


# ------------------------------------------------------------------------------------------------
# orthogonal_


def orthogonal_reference(sample, gain=1.0):
    """PyTorch's construction on a NumPy sample [rows, cols]."""
    rows, cols = sample.shape
    flat = sample.T if rows < cols else sample
    q, r = np.linalg.qr(flat.astype(np.float64))
    q = q * np.sign(np.diagonal(r))
    return (q.T if rows < cols else q) * gain


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (4, 4), (6, 2, 3, 3), (1, 7), (7, 1)],
                         ids=str)
def test_orthogonal_matches_the_qr_of_its_sample(shape):
    rows, cols = shape[0], math.prod(shape[1:])
    kiln.manual_seed(21)
    sample = mint.randn(rows, cols).numpy()
    w = nn.Parameter(mint.empty(*shape))
    kiln.manual_seed(21)
    assert orthogonal_(w, gain=1.5) is w
    assert w.requires_grad and w.grad_fn is None
    flat = w.numpy().reshape(rows, cols).astype(np.float64)
    np.testing.assert_allclose(flat, orthogonal_reference(sample, 1.5), rtol=1e-5, atol=1e-6)
    small = min(rows, cols)
    gram = flat @ flat.T if rows <= cols else flat.T @ flat
    np.testing.assert_allclose(gram, 2.25 * np.eye(small), atol=1e-5)


def test_orthogonal_draws_from_a_generator_and_fills_every_dtype():
    g = kiln.Generator().manual_seed(3)
    a = orthogonal_(mint.empty(4, 6, dtype=kiln.float64), generator=g).numpy()
    b = orthogonal_(mint.empty(4, 6, dtype=kiln.float64),
                    generator=kiln.Generator().manual_seed(3)).numpy()
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(a @ a.T, np.eye(4), atol=1e-13)
    for dtype in (kiln.float16, kiln.bfloat16):
        w = orthogonal_(mint.empty(8, 8, dtype=dtype))
        m = w.to(kiln.float64).numpy()
        assert w.dtype == dtype
        np.testing.assert_allclose(m @ m.T, np.eye(8), atol=0.05)
    empty = mint.empty(0, 3)
    assert orthogonal_(empty) is empty


@pytest.mark.parametrize("build, error, message", [
    (lambda: orthogonal_(mint.empty(4)), kiln.KilnValueError,
     r"nn.init.orthogonal_: expected a tensor with at least 2 dimensions, got shape \[4\]"),
    (lambda: orthogonal_(mint.zeros((2, 2), dtype=kiln.int32)), kiln.DTypeError,
     "nn.init.orthogonal_: expected a floating-point tensor, got int32"),
    (lambda: orthogonal_(mint.empty(2, 2), gain="1"), kiln.KilnTypeError,
     "nn.init.orthogonal_: expected gain to be a real number, got str"),
])
def test_orthogonal_errors(build, error, message):
    with raises(error, match=message):
        build()


# ------------------------------------------------------------------------------------------------
# Against PyTorch


def test_sequential_state_dict_has_torchs_entries(torch):
    build = SCHEDULES["three-phases"][0]
    theirs = torch_sgd_at_rates(torch, BASES)
    sched = build(lr_scheduler, sgd_at_rates(BASES))
    reference = build(torch.optim.lr_scheduler, theirs)
    for _ in range(6):
        theirs.step()
        sched.step()
        reference.step()
    ours, expected = sched.state_dict(), reference.state_dict()
    assert sorted(ours) == sorted(expected)
    assert ([s["last_epoch"] for s in ours["_schedulers"]]
            == [s["last_epoch"] for s in expected["_schedulers"]])


@pytest.mark.parametrize("name", SCHEDULES)
def test_schedule_matches_torch(torch, name):
    check_schedule_against_torch(torch, SCHEDULES[name][0], BASES, STEPS)


def test_fractional_restarts_match_torch(torch):
    opt, theirs = sgd_at_rates(BASES), torch_sgd_at_rates(torch, BASES)
    sched = CosineAnnealingWarmRestarts(opt, 3, 2, eta_min=0.01)
    reference = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(theirs, 3, 2, eta_min=0.01)
    for epoch in (0.5, 1.25, 2.999, 3, 3.5, None, None, 8.75, None, 20.1, None, 0, None, 44.0,
                  100.3, None):
        theirs.step()
        sched.step(epoch)
        reference.step(epoch)
        assert_rates(rates(opt), rates(theirs))
        assert sched.last_epoch == reference.last_epoch and sched.T_i == reference.T_i
        assert sched.T_cur == pytest.approx(reference.T_cur, rel=1e-12)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.bfloat16],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_matches_torch(torch, affine, dtype, rng):
    reference = torch.nn.GroupNorm(3, 6, eps=1e-4, affine=affine).to(getattr(torch, dtype.name))
    cell = GroupNorm(3, 6, eps=1e-4, affine=affine, dtype=dtype)
    # An older PyTorch has no bias argument, nor its part of the repr.
    assert repr(reference) in (repr(cell), repr(cell).replace(f", bias={affine}", ""))
    if affine:
        with torch.no_grad():
            reference.weight.copy_(torch.tensor(rng.normal(size=6)))
            reference.bias.copy_(torch.tensor(rng.normal(size=6)))
        result = cell.load_state_dict({k: t(v.double().numpy(), dtype)
                                       for k, v in reference.state_dict().items()})
        assert not result.missing_keys and not result.unexpected_keys
    x = t(rng.normal(size=(2, 6, 3, 2)), dtype).requires_grad_()
    tx = torch_twin(torch, x.detach().to(kiln.float64).numpy(), dtype)
    out, expected = cell(x), reference(tx)
    check_torch(out, expected, dtype, "value", scale_atol=True)
    upstream = t(rng.normal(size=out.shape), dtype)
    out.backward(upstream)
    expected.backward(torch_twin(torch, upstream.to(kiln.float64).numpy(), dtype, False))
    check_torch(x.grad, tx.grad, dtype, "input gradient", scale_atol=True)
    if affine:
        check_torch(cell.weight.grad, reference.weight.grad, dtype, "weight gradient",
                    scale_atol=True)
        check_torch(cell.bias.grad, reference.bias.grad, dtype, "bias gradient",
                    scale_atol=True)


def test_from_pretrained_matches_torch(torch, rng):
    table = rng.normal(size=(6, 3))
    emb = nn.Embedding.from_pretrained(t(table), freeze=False, padding_idx=2)
    reference = torch.nn.Embedding.from_pretrained(torch.tensor(table), freeze=False,
                                                   padding_idx=2)
    assert repr(emb) == repr(reference)
    indices = [[2, 5, 2], [0, 1, 5]]
    out, expected = emb(t(indices, kiln.int64)), reference(torch.tensor(indices))
    check_torch(out, expected, kiln.float64, "value")
    upstream = rng.normal(size=(2, 3, 3))
    out.backward(t(upstream))
    expected.backward(torch.tensor(upstream))
    check_torch(emb.weight.grad, reference.weight.grad, kiln.float64, "gradient")
    frozen = torch.nn.Embedding.from_pretrained(torch.tensor(table))
    assert not nn.Embedding.from_pretrained(t(table)).weight.requires_grad
    assert not frozen.weight.requires_grad


@pytest.mark.parametrize("log_target", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "batchmean", "sum", "none"])
def test_kl_div_loss_matches_torch(torch, reduction, log_target, rng):
    x, p = kl_inputs(rng, (3, 4, 5))
    target = np.log(np.where(p == 0, 1e-30, p)) if log_target else p
    xs = t(x).requires_grad_()
    tx = torch.tensor(x, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = KLDivLoss(reduction, log_target)(xs, t(target))
        expected = torch.nn.KLDivLoss(reduction=reduction, log_target=log_target)(
            tx, torch.tensor(target))
    check_torch(out, expected, kiln.float64, "value")
    upstream = rng.normal(size=out.shape)
    out.backward(t(upstream))
    expected.backward(torch.tensor(upstream))
    check_torch(xs.grad, tx.grad, kiln.float64, "gradient")


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (6, 2, 3, 3)], ids=str)
def test_orthogonal_is_torchs_construction_on_its_sample(torch, shape):
    # The generators differ (Philox here), so PyTorch's steps run on Kiln's sample.
    rows, cols = shape[0], math.prod(shape[1:])
    kiln.manual_seed(4)
    sample = torch.tensor(mint.randn(rows, cols, dtype=kiln.float64).numpy())
    flat = sample.t() if rows < cols else sample
    q, r = torch.linalg.qr(flat)
    q = q * torch.diag(r, 0).sign()
    expected = (q.t() if rows < cols else q).reshape(shape) * 0.5
    kiln.manual_seed(4)
    w = orthogonal_(mint.empty(*shape, dtype=kiln.float64), 0.5)
    check_torch(w, expected, kiln.float64, "orthogonal")


def test_channel_dropout_keeps_torchs_channels(torch):
    # Masks are random in both; the rule is PyTorch's: whole channels of [N, C, ...], scaled.
    for cls, theirs, shape in ((Dropout2d, torch.nn.Dropout2d, (8, 16, 3, 3)),
                               (Dropout1d, torch.nn.Dropout1d, (16, 3)),
                               (Dropout1d, torch.nn.Dropout1d, (8, 16, 3))):
        ours = cls(0.5)(mint.ones(*shape)).numpy()
        reference = theirs(0.5)(torch.ones(*shape)).numpy()
        kept = len(shape) - 1
        for values in (ours, reference):
            channels = values.reshape(shape[:kept] + (-1,))
            assert np.all(channels == channels[..., :1])
            assert set(np.unique(values).tolist()) <= {0.0, 2.0}
        assert repr(cls(0.5)).split("(")[0] == repr(theirs(0.5)).split("(")[0]
