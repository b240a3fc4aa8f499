"""kiln.optim.swa_utils: AveragedModel (SWA's running mean, EMA, custom averages, buffers),
update_bn and SWALR, against NumPy recurrences and, where installed, PyTorch."""

import math

import numpy as np
import pytest

import kiln
from conftest import raises
from kiln import nn
from kiln.optim import swa_utils as S

F64 = kiln.float64


def model():
    return nn.Sequential(nn.Linear(3, 4, dtype=F64), nn.BatchNorm1d(4, dtype=F64), nn.ReLU(),
                         nn.Linear(4, 2, dtype=F64))


def values(cell, buffers=False):
    tensors = list(cell.parameters()) + (list(cell.buffers()) if buffers else [])
    return [np.array(t.detach().numpy(), dtype=np.float64) for t in tensors]


def train_a_little(net, rng, step):
    with kiln.no_grad():
        for p in net.parameters():
            p += kiln.tensor(rng.standard_normal(tuple(p.shape)) * 0.1 * (step + 1))
    net.train()
    net(kiln.tensor(rng.standard_normal((5, 3))))  # moves BatchNorm's running statistics


@pytest.mark.parametrize("average, reference", [
    (dict(), lambda avg, cur, n: avg + (cur - avg) / (n + 1)),
    (dict(multi_avg_fn=S.get_swa_multi_avg_fn()), lambda avg, cur, n: avg + (cur - avg) / (n + 1)),
    (dict(avg_fn=S.get_swa_avg_fn()), lambda avg, cur, n: avg + (cur - avg) / (n + 1)),
    (dict(multi_avg_fn=S.get_ema_multi_avg_fn(0.9)), lambda avg, cur, n: 0.9 * avg + 0.1 * cur),
    (dict(avg_fn=S.get_ema_avg_fn(0.75)), lambda avg, cur, n: 0.75 * avg + 0.25 * cur),
], ids=["swa", "swa multi", "swa single", "ema multi", "ema single"])
def test_averaged_model_follows_its_average(average, reference):
    rng = np.random.default_rng(1)
    net = model()
    averaged = S.AveragedModel(net, **average)
    assert list(averaged.state_dict())[0] == "n_averaged"  # its own buffer first, as PyTorch
    expected = None
    for step in range(5):
        train_a_little(net, rng, step)
        averaged.update_parameters(net)
        current = values(net)
        expected = current if expected is None else [
            reference(a, c, step) for a, c in zip(expected, current)]
        for got, want in zip(values(averaged.module), expected):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
        # Without use_buffers the buffers are the model's (running statistics, counts).
        for got, want in zip(values(averaged.module, True)[len(current):],
                             values(net, True)[len(current):]):
            np.testing.assert_array_equal(got, want)
    assert averaged.n_averaged.item() == 5
    x = kiln.tensor(rng.standard_normal((2, 3)))
    averaged.eval()
    np.testing.assert_array_equal(averaged(x).numpy(), averaged.module(x).numpy())


def test_use_buffers_averages_the_buffers_too():
    rng = np.random.default_rng(2)
    net = model()
    averaged = S.AveragedModel(net, use_buffers=True)
    history = []
    for step in range(4):
        train_a_little(net, rng, step)
        averaged.update_parameters(net)
        history.append(values(net, True))
    mean_var = np.mean([h[-2] for h in history], axis=0)  # running_var, before the count
    np.testing.assert_allclose(values(averaged.module, True)[-2], mean_var, rtol=1e-12)


def test_update_bn_recomputes_the_running_statistics_from_a_loader():
    rng = np.random.default_rng(3)
    net = model()
    batches = [rng.standard_normal((6, 3)) for _ in range(3)]
    net.eval()
    S.update_bn([(kiln.tensor(b), None) for b in batches], net)
    assert not net.training and net[1].momentum == 0.1
    with kiln.no_grad():
        features = [net[0](kiln.tensor(b)).numpy() for b in batches]
    np.testing.assert_allclose(net[1].running_mean.numpy(),
                               np.mean([f.mean(0) for f in features], axis=0), rtol=1e-12)
    np.testing.assert_allclose(net[1].running_var.numpy(),
                               np.mean([f.var(0, ddof=1) for f in features], axis=0), rtol=1e-12)
    S.update_bn([], nn.Linear(2, 2))  # no BatchNorm: nothing to do


def swalr_reference(lr, swa_lr, anneal_epochs, strategy, steps):
    """PyTorch's SWALR recurrence on one group starting at ``lr``."""
    anneal = ((lambda t: (1 - math.cos(math.pi * t)) / 2) if strategy == "cos"
              else (lambda t: t))
    rates = []
    for step in range(steps):
        s = max(1, step) if anneal_epochs == 0 else step
        before = anneal(max(0, min(1, (s - 1) / max(1, anneal_epochs))))
        alpha = anneal(max(0, min(1, s / max(1, anneal_epochs))))
        start = swa_lr if before == 1 else (lr - before * swa_lr) / (1 - before)
        lr = swa_lr * alpha + start * (1 - alpha)
        rates.append(lr)
    return rates


@pytest.mark.parametrize("strategy, anneal_epochs", [("cos", 3), ("linear", 4), ("cos", 0)])
def test_swalr_anneals_to_swa_lr(strategy, anneal_epochs):
    opt = kiln.optim.SGD([nn.Parameter(kiln.mint.ones(1))], lr=0.5)
    sched = S.SWALR(opt, swa_lr=0.05, anneal_epochs=anneal_epochs, anneal_strategy=strategy)
    seen = [opt.param_groups[0]["lr"]]
    for _ in range(7):
        sched.step()
        seen.append(opt.param_groups[0]["lr"])
    assert seen == pytest.approx(swalr_reference(0.5, 0.05, anneal_epochs, strategy, 8))
    assert seen[-1] == pytest.approx(0.05)


@pytest.mark.parametrize("call, error, message", [
    (lambda net, opt: S.AveragedModel(net, avg_fn=S.get_swa_avg_fn(),
                                      multi_avg_fn=S.get_swa_multi_avg_fn()),
     kiln.KilnValueError, "AveragedModel: give avg_fn or multi_avg_fn, not both"),
    (lambda net, opt: S.AveragedModel(3), kiln.KilnTypeError, "AveragedModel: model must be"),
    (lambda net, opt: S.AveragedModel(net, device="cuda"), kiln.KilnValueError, "not available"),
    (lambda net, opt: S.AveragedModel(net).update_parameters(nn.Linear(3, 4)),
     kiln.KilnValueError, "the model has 2 parameters, the averaged copy 6"),
    (lambda net, opt: S.SWALR(opt, 0.1, anneal_strategy="exp"), kiln.KilnValueError,
     "SWALR: anneal_strategy must be 'cos' or 'linear'"),
    (lambda net, opt: S.SWALR(opt, 0.1, anneal_epochs=-1), kiln.KilnValueError, "anneal_epochs"),
    (lambda net, opt: S.SWALR(opt, -0.1), kiln.KilnValueError, "swa_lr"),
])
def test_errors(call, error, message):
    net = model()
    opt = kiln.optim.SGD(net.parameters(), lr=0.1)
    with raises(error, match=message):
        call(net, opt)


def test_averaged_model_and_swalr_match_torch(torch):
    from torch.optim import swa_utils as T

    def build(lib):
        return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.ReLU(),
                                 lib.nn.Linear(4, 2)).double()

    theirs, ours = build(torch), build(kiln)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    t_ema = T.AveragedModel(theirs, multi_avg_fn=T.get_ema_multi_avg_fn(0.9), use_buffers=True)
    k_ema = S.AveragedModel(ours, multi_avg_fn=S.get_ema_multi_avg_fn(0.9), use_buffers=True)
    t_opt, k_opt = torch.optim.SGD(theirs.parameters(), lr=0.5), kiln.optim.SGD(
        ours.parameters(), lr=0.5)
    t_sched, k_sched = T.SWALR(t_opt, 0.05, 3), S.SWALR(k_opt, 0.05, 3)
    rng = np.random.default_rng(4)
    for _ in range(4):
        x = rng.standard_normal((5, 3))
        theirs(torch.tensor(x)).pow(2).sum().backward()
        kiln.mint.sum(ours(kiln.tensor(x)) ** 2).backward()
        t_opt.step(), k_opt.step()
        t_opt.zero_grad(), k_opt.zero_grad()
        t_sched.step(), k_sched.step()
        t_ema.update_parameters(theirs), k_ema.update_parameters(ours)
        assert k_opt.param_groups[0]["lr"] == pytest.approx(t_opt.param_groups[0]["lr"])
    t_state, k_state = t_ema.state_dict(), k_ema.state_dict()
    assert list(k_state) == list(t_state)
    for key in t_state:
        np.testing.assert_allclose(k_state[key].numpy(), t_state[key].numpy(), rtol=1e-10,
                                   atol=1e-12, err_msg=key)
