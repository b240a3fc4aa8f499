"""Learning-rate schedulers stepped together on one optimizer, and rates set by hand between
steps: each chainable schedule moves the rate it finds as its own schedule moves (PyTorch's
chainable steps), checked against closed forms without PyTorch and against PyTorch with it."""

import math

import pytest

import kiln
from conftest import assert_rates, group_rates, raises, sgd_at_rates, torch_sgd_at_rates
from kiln.optim import lr_scheduler as S

BASES = (0.5, 0.1, 0.0)
STEPS = 40


def stepped(schedulers, opt, steps, hand=None):
    """The groups' rates at each step 0..steps of ``schedulers`` stepped in order; at step
    ``hand`` (a (step, rates) pair) the rates are set by hand before the schedulers step."""
    seen = [group_rates(opt)]
    for t in range(1, steps + 1):
        if hand is not None and hand[0] == t:
            for group, lr in zip(opt.param_groups, hand[1]):
                group["lr"] = lr
        for scheduler in schedulers:
            scheduler.step()
        seen.append(group_rates(opt))
    return seen


def test_two_multiplying_schedules_stepped_together_multiply_their_factors():
    opt = sgd_at_rates(BASES)
    decay, drops = S.ExponentialLR(opt, 0.9), S.StepLR(opt, 3, 0.5)
    for t, lrs in enumerate(stepped([decay, drops], opt, STEPS)):
        assert_rates(lrs, [b * 0.9 ** t * 0.5 ** (t // 3) for b in BASES])
    assert drops.get_last_lr() == group_rates(opt)  # the last one stepped set these


def test_a_warmup_stepped_with_a_decay_scales_it():
    # The constructors' step 0 multiplies too: LinearLR's start factor reaches the decay's rate.
    opt = sgd_at_rates(BASES)
    warmup, decay = S.LinearLR(opt, 0.25, 1.0, 4), S.PolynomialLR(opt, 20, 1.0)
    for t, lrs in enumerate(stepped([warmup, decay], opt, 24)):
        factor = (0.25 + 0.75 * min(t, 4) / 4) * (1 - min(t, 20) / 20)
        assert_rates(lrs, [b * factor for b in BASES])


def test_a_rate_set_by_hand_is_moved_on_from():
    opt = sgd_at_rates(BASES)
    decay = S.ExponentialLR(opt, 0.8)
    seen = stepped([decay], opt, 12, hand=(5, [1.0, 2.0, 3.0]))
    for t in range(5):
        assert_rates(seen[t], [b * 0.8 ** t for b in BASES])
    for t in range(5, 13):
        assert_rates(seen[t], [r * 0.8 ** (t - 4) for r in (1.0, 2.0, 3.0)])


def test_a_cosine_moves_the_rates_distance_to_eta_min():
    eta_min, t_max, scale = 0.01, 10, 0.5
    opt = sgd_at_rates(BASES[:2])
    cosine = S.CosineAnnealingLR(opt, T_max=t_max, eta_min=eta_min)
    seen = stepped([cosine], opt, 6, hand=(3, [b * scale for b in BASES[:2]]))

    def own(b, t):
        return eta_min + (b - eta_min) * (1 + math.cos(math.pi * t / t_max)) / 2

    for t in range(3, 7):
        # From the rate r set by hand before step 3: eta_min + (r - eta_min) * d(t) / d(2),
        # d the schedule's distances to eta_min.
        want = [eta_min + (scale * b - eta_min) * (own(b, t) - eta_min) / (own(b, 2) - eta_min)
                for b in BASES[:2]]
        assert_rates(seen[t], want)


def test_schedules_that_set_their_rate_ignore_the_rate_they_find():
    opt = sgd_at_rates(BASES)
    lam = S.LambdaLR(opt, lambda t: 1 / (t + 1))
    seen = stepped([lam], opt, 6, hand=(3, [7.0, 7.0, 7.0]))
    for t, lrs in enumerate(seen):
        assert_rates(lrs, [b / (t + 1) for b in BASES])


def test_multiplicative_multiplies_the_rate_it_finds_from_step_1():
    opt = sgd_at_rates(BASES)
    sched = S.MultiplicativeLR(opt, [lambda t: 0.9, lambda t: 1.0 / t, lambda t: 2.0])
    seen = stepped([sched], opt, 6, hand=(4, [1.0, 1.0, 1.0]))
    assert_rates(seen[0], BASES)  # step 0 leaves them
    for t in (1, 2, 3):
        assert_rates(seen[t], [BASES[0] * 0.9 ** t, BASES[1] / math.factorial(t), 0.0])
    assert_rates(seen[4], [0.9, 0.25, 2.0])  # from the rates set by hand
    assert sched.get_last_lr() == group_rates(opt)
    with raises(kiln.KilnValueError, match="MultiplicativeLR: lr_lambda returned -1"):
        S.MultiplicativeLR(sgd_at_rates(BASES), lambda t: -1.0).step()
    saved = sched.state_dict()  # resumes multiplying from the rates it restores
    other = sgd_at_rates(BASES)
    resumed = S.MultiplicativeLR(other, [lambda t: 0.9, lambda t: 1.0 / t, lambda t: 2.0])
    resumed.load_state_dict(saved)
    resumed.step()
    assert_rates(group_rates(other), [r * f for r, f in zip(seen[6], (0.9, 1 / 7, 2.0))])


def test_a_state_dict_without_schedule_rates_resumes():
    # Kiln 0.6.0 saved no schedule rates: its last rates were the schedule's.
    opt = sgd_at_rates(BASES)
    decay = S.ExponentialLR(opt, 0.9)
    for _ in range(4):
        decay.step()
    saved = {k: v for k, v in decay.state_dict().items() if k != "_schedule_lr"}
    other = sgd_at_rates(BASES)
    resumed = S.ExponentialLR(other, 0.9)
    resumed.load_state_dict(saved)
    resumed.step()
    assert_rates(group_rates(other), [b * 0.9 ** 5 for b in BASES])


STACKS = {
    "exponential then step": lambda m, o: [m.ExponentialLR(o, 0.9), m.StepLR(o, 3, 0.5)],
    "warmup then cosine": lambda m, o: [m.LinearLR(o, 0.1, 1.0, 5),
                                        m.CosineAnnealingLR(o, 30, 0.01)],
    # (eta_min 0: a decay stacked on a cosine with eta_min > 0 takes the rate below eta_min, and
    # the cosine then makes it negative, which PyTorch's SGD takes and Kiln's refuses.)
    "cosine past t_max then exponential": lambda m, o: [m.CosineAnnealingLR(o, 12),
                                                        m.ExponentialLR(o, 0.95)],
    "constant, linear, polynomial": lambda m, o: [m.ConstantLR(o, 0.5, 4),
                                                  m.LinearLR(o, 0.2, 1.0, 6),
                                                  m.PolynomialLR(o, 30, 2.0)],
    "multistep then lambda": lambda m, o: [m.MultiStepLR(o, [3, 9], 0.3),
                                           m.LambdaLR(o, lambda t: 0.97 ** t)],
    "multiplicative then step": lambda m, o: [m.MultiplicativeLR(o, lambda t: 0.95),
                                              m.StepLR(o, 4, 0.5)],
    "chained cosine": lambda m, o: [m.ChainedScheduler([m.CosineAnnealingLR(o, 20),
                                                        m.ExponentialLR(o, 0.9)])],
    "cosine with eta_min then a warmup": lambda m, o: [m.CosineAnnealingLR(o, 15, 0.01),
                                                       m.LinearLR(o, 0.5, 1.0, 4)],
}


@pytest.mark.parametrize("hand", [None, (7, [0.2, 0.3, 0.0])], ids=["alone", "set by hand"])
@pytest.mark.parametrize("name", STACKS)
def test_stacked_schedulers_match_torch(torch, name, hand):
    bases = BASES[:2] + (0.05,)
    ours, theirs = sgd_at_rates(bases), torch_sgd_at_rates(torch, bases)
    mine, reference = STACKS[name](S, ours), STACKS[name](torch.optim.lr_scheduler, theirs)
    for t in range(1, STEPS + 1):
        if hand is not None and hand[0] == t:
            for opt in (ours, theirs):
                for group, lr in zip(opt.param_groups, hand[1]):
                    group["lr"] = lr
        theirs.step()  # no gradients: nothing moves, but PyTorch does not warn of the order
        for scheduler in mine:
            scheduler.step()
        for scheduler in reference:
            scheduler.step()
        assert group_rates(ours) == pytest.approx(group_rates(theirs), rel=1e-11, abs=1e-15), t
