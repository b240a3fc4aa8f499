"""lr_scheduler.CyclicLR: its modes, custom scale functions, the momentum it cycles, resuming
and its errors, against the closed form and, where installed, PyTorch."""

import math
import pickle

import pytest

import kiln
from conftest import assert_rates, group_rates, raises, sgd_at_rates
from kiln import nn
from kiln.optim import lr_scheduler as S

BASES = (0.5, 0.1)


def reference(base, peak, t, up, down, factor):
    """Smith's cyclical rate at step t: the amplitude's fraction times ``factor(cycle, t)``."""
    total = up + down
    cycle = math.floor(1 + t / total)
    x = 1 + t / total - cycle
    rise = x / (up / total) if x <= up / total else (x - 1) / (up / total - 1)
    return base + (peak - base) * rise * factor(cycle, t)


MODES = {
    "triangular": (dict(), lambda c, t: 1.0),
    "triangular2": (dict(mode="triangular2"), lambda c, t: 0.5 ** (c - 1)),
    "exp_range": (dict(mode="exp_range", gamma=0.9), lambda c, t: 0.9 ** t),
    "scale_fn cycle": (dict(scale_fn=lambda c: 1 / c), lambda c, t: 1 / c),
    "scale_fn iterations": (dict(scale_fn=lambda s: 0.95 ** s, scale_mode="iterations"),
                            lambda c, t: 0.95 ** t),
}


@pytest.mark.parametrize("up, down", [(4, None), (3, 5)])
@pytest.mark.parametrize("mode", MODES)
def test_cyclic_rates_follow_the_closed_form(mode, up, down):
    kwargs, factor = MODES[mode]
    opt = sgd_at_rates(BASES)
    sched = S.CyclicLR(opt, [0.01, 0.02], 0.1, step_size_up=up, step_size_down=down,
                       cycle_momentum=False, **kwargs)
    for t in range(30):
        if t:
            sched.step()
        assert_rates(group_rates(opt), [reference(b, 0.1, t, up, down or up, factor)
                                        for b in (0.01, 0.02)])
        assert sched.get_last_lr() == group_rates(opt)


@pytest.mark.parametrize("optimizer, key", [(kiln.optim.SGD, "momentum"),
                                            (kiln.optim.Adam, "betas")])
def test_cyclic_momentum_moves_against_the_rate(optimizer, key):
    opt = optimizer([nn.Parameter(kiln.mint.ones(2))], lr=0.5,
                    **({"momentum": 0.5} if key == "momentum" else {}))
    sched = S.CyclicLR(opt, 0.01, 0.1, step_size_up=3, base_momentum=0.7, max_momentum=0.95)
    for t in range(12):
        if t:
            sched.step()
        group = opt.param_groups[0]
        momentum = group[key][0] if key == "betas" else group[key]
        rise = (reference(0.0, 1.0, t, 3, 3, lambda c, s: 1.0))
        assert momentum == pytest.approx(0.95 - 0.25 * rise)
        assert group["lr"] == pytest.approx(0.01 + 0.09 * rise)


def test_cyclic_state_dict_resumes_mid_cycle():
    opt = sgd_at_rates(BASES)
    sched = S.CyclicLR(opt, 0.01, 0.1, step_size_up=5, mode="triangular2", cycle_momentum=False)
    for _ in range(7):
        sched.step()
    saved = pickle.loads(pickle.dumps(sched.state_dict()))
    other = sgd_at_rates(BASES)
    resumed = S.CyclicLR(other, 0.01, 0.1, step_size_up=5, mode="triangular2",
                         cycle_momentum=False)
    resumed.load_state_dict(saved)
    for _ in range(9):
        sched.step(), resumed.step()
        assert group_rates(other) == group_rates(opt)
    custom = S.CyclicLR(sgd_at_rates(BASES), 0.01, 0.1, scale_fn=lambda c: 1.0,
                        cycle_momentum=False)
    assert "scale_fn" not in custom.state_dict()  # code is not saved


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(mode="cosine"), kiln.KilnValueError, "CyclicLR: mode must be 'triangular'"),
    (dict(step_size_up=0), kiln.KilnValueError, "CyclicLR: step_size_up must be > 0"),
    (dict(scale_fn=3), kiln.KilnTypeError, "CyclicLR: scale_fn must be a callable"),
    (dict(scale_fn=abs, scale_mode="epochs"), kiln.KilnValueError, "scale_mode must be"),
    (dict(base_momentum=-1.0), kiln.KilnValueError, "base_momentum"),
])
def test_cyclic_errors(kwargs, error, message):
    opt = kiln.optim.SGD([nn.Parameter(kiln.mint.ones(1))], lr=0.1, momentum=0.9)
    with raises(error, match=message):
        S.CyclicLR(opt, 0.01, 0.1, **kwargs)
    adagrad = kiln.optim.Adagrad([nn.Parameter(kiln.mint.ones(1))])
    with raises(kiln.KilnValueError, match="CyclicLR: cycle_momentum=True needs an optimizer"):
        S.CyclicLR(adagrad, 0.01, 0.1)


@pytest.mark.parametrize("mode", ["triangular", "triangular2", "exp_range"])
def test_cyclic_matches_torch(torch, mode):
    tp, kp = torch.nn.Parameter(torch.ones(1)), nn.Parameter(kiln.mint.ones(1))
    theirs = torch.optim.SGD([tp], lr=0.3, momentum=0.9)
    ours = kiln.optim.SGD([kp], lr=0.3, momentum=0.9)
    args = dict(step_size_up=3, step_size_down=4, mode=mode, gamma=0.95)
    t_sched = torch.optim.lr_scheduler.CyclicLR(theirs, [0.01], [0.2], **args)
    k_sched = S.CyclicLR(ours, [0.01], [0.2], **args)
    for _ in range(20):
        for key in ("lr", "momentum"):
            assert ours.param_groups[0][key] == pytest.approx(theirs.param_groups[0][key])
        theirs.step()
        t_sched.step(), k_sched.step()
