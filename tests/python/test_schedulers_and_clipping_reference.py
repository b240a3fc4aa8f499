"""kiln.optim.lr_scheduler, kiln.nn.utils's gradient clipping and kiln.mint.vector_norm / norm
against plain-Python and NumPy references, so that they are covered where PyTorch is not
installed (test_lr_schedulers.py and test_clip_grad.py compare with torch and are skipped there):
the schedules' closed forms from lr_scheduler's docstring over 36 steps of three parameter groups,
OneCycleLR's momentum cycle and the updates it drives (against the optimizers' NumPy references,
eagerly and jitted), ReduceLROnPlateau against a model of its rule and hand-worked sequences,
state_dict round trips, the clipped gradients and totals against NumPy norms, the norms' analytic
gradients, and the argument errors with their messages."""

import math
import pickle

import numpy as np
import pytest

import kiln
from conftest import assert_rates, group_rates as rates, raises, sgd_at_rates
from kiln import nn, optim
from kiln.nn.utils import clip_grad_norm, clip_grad_norm_, clip_grad_value, clip_grad_value_
from kiln.optim import lr_scheduler
# The optimizers' NumPy references (PyTorch's updates), which take the momentum of each step.
from test_optim import adam_reference, adamw_reference, sgd_reference
from test_optim_extra_reference import rmsprop_reference

mint = kiln.mint
BASES = (0.1, 0.05, 1.0)  # the three groups' rates
STEPS = 36


# ---------------------------------------------------------------------------------------------
# Closed forms (lr_scheduler's docstring), as functions of the group index i and the step t


def cosine(base, t, t_max, eta_min=0.0, warmup=0):
    if t < warmup:
        return base * (t + 1) / warmup
    s, length = t - warmup, t_max - warmup
    return eta_min + (base - eta_min) * (1 + math.cos(math.pi * s / length)) / 2


def cycle(values, total, pct=0.3, strategy="cos", three_phase=False):
    """The value at step t of a 1cycle schedule going through ``values`` (the value at step 0,
    then at each phase's end), phase by phase; the last value at step total."""
    ends = [pct * total - 1] + ([2 * pct * total - 2] if three_phase else []) + [total - 1]

    def at(t):
        if t == total:
            return values[-1]
        start = 0
        for end, a, b in zip(ends, values, values[1:]):
            if t <= end:
                f = (t - start) / (end - start)
                if strategy == "cos":
                    return b + (a - b) * (1 + math.cos(math.pi * f)) / 2
                return a + (b - a) * f
            start = end
        raise AssertionError(f"step {t} is past the cycle")
    return at


def one_cycle(peak, total, pct=0.3, strategy="cos", div=25.0, final_div=1e4, three_phase=False):
    """The rate at step t of PyTorch's 1cycle schedule; min_lr at step total."""
    initial = peak / div
    middle = [initial] if three_phase else []
    return cycle([initial, peak, *middle, initial / final_div], total, pct, strategy,
                 three_phase)


def one_cycle_momentum(base, peak, total, pct=0.3, strategy="cos", three_phase=False):
    """The momentum at step t of PyTorch's 1cycle schedule with cycle_momentum: from ``peak``
    down to ``base`` while the rate rises, back up while it falls (and kept in a third phase);
    ``peak`` at step total."""
    third = [peak] if three_phase else []
    return cycle([peak, base, peak, *third], total, pct, strategy, three_phase)


def per_step_factor(t):
    return 0.5 + 0.5 * math.cos(t / 3)


PER_GROUP = [lambda t: 0.95 ** t, per_step_factor, lambda t: (t % 5) / 5]
CYCLES = [one_cycle(p, 40, 0.25, "linear", 10.0, 100.0) for p in (1.0, 0.5, 2.0)]
ONE_CYCLE = one_cycle(1.0, 40)
THREE_PHASE = one_cycle(0.5, 50, pct=0.2, three_phase=True)

# name -> (build the scheduler from an optimizer, the rate of group i at step t)
SCHEDULES = {
    "step": (lambda o: lr_scheduler.StepLR(o, step_size=7, gamma=0.5),
             lambda i, t: BASES[i] * 0.5 ** (t // 7)),
    "step-default-gamma": (lambda o: lr_scheduler.StepLR(o, 3),
                           lambda i, t: BASES[i] * 0.1 ** (t // 3)),
    "multistep": (lambda o: lr_scheduler.MultiStepLR(o, milestones=[0, 5, 12, 20], gamma=0.3),
                  lambda i, t: BASES[i] * 0.3 ** sum(m <= t for m in (0, 5, 12, 20))),
    "multistep-repeated": (lambda o: lr_scheduler.MultiStepLR(o, [4, 11, 11, 30]),
                           lambda i, t: BASES[i] * 0.1 ** sum(m <= t for m in (4, 11, 11, 30))),
    "exponential": (lambda o: lr_scheduler.ExponentialLR(o, gamma=0.9),
                    lambda i, t: BASES[i] * 0.9 ** t),
    "exponential-growth": (lambda o: lr_scheduler.ExponentialLR(o, 1.05),
                           lambda i, t: BASES[i] * 1.05 ** t),
    "lambda": (lambda o: lr_scheduler.LambdaLR(o, lambda t: 1 / (t + 1)),
               lambda i, t: BASES[i] / (t + 1)),
    "lambda-per-group": (lambda o: lr_scheduler.LambdaLR(o, PER_GROUP),
                         lambda i, t: BASES[i] * PER_GROUP[i](t)),
    "linear": (lambda o: lr_scheduler.LinearLR(o),
               lambda i, t: BASES[i] * (1 / 3 + (2 / 3) * min(t, 5) / 5)),
    "linear-decay": (lambda o: lr_scheduler.LinearLR(o, start_factor=1.0, end_factor=0.0,
                                                     total_iters=30),
                     lambda i, t: BASES[i] * (1 - min(t, 30) / 30)),
    "linear-partial": (lambda o: lr_scheduler.LinearLR(o, 0.25, 0.5, 10),
                       lambda i, t: BASES[i] * (0.25 + 0.25 * min(t, 10) / 10)),
    "constant": (lambda o: lr_scheduler.ConstantLR(o),
                 lambda i, t: BASES[i] / 3 if t < 5 else BASES[i]),
    "constant-half": (lambda o: lr_scheduler.ConstantLR(o, factor=0.5, total_iters=12),
                      lambda i, t: BASES[i] * 0.5 if t < 12 else BASES[i]),
    "cosine": (lambda o: lr_scheduler.CosineAnnealingLR(o, T_max=20, eta_min=0.01),
               lambda i, t: cosine(BASES[i], t, 20, 0.01)),
    "cosine-warmup": (lambda o: lr_scheduler.CosineAnnealingLR(o, 30, 0.001, warmup_steps=5),
                      lambda i, t: cosine(BASES[i], t, 30, 0.001, warmup=5)),
    "one-cycle": (lambda o: lr_scheduler.OneCycleLR(o, max_lr=1.0, total_steps=40),
                  lambda i, t: ONE_CYCLE(t)),
    "one-cycle-per-group": (lambda o: lr_scheduler.OneCycleLR(
        o, max_lr=[1.0, 0.5, 2.0], epochs=4, steps_per_epoch=10, pct_start=0.25,
        anneal_strategy="linear", div_factor=10.0, final_div_factor=100.0),
        lambda i, t: CYCLES[i](t)),
    # (cycle_momentum=False: the jitted step of test_scheduled_rates_reach_a_jitted_step cannot
    # turn on the momentum of an SGD built without one)
    "one-cycle-three-phase": (lambda o: lr_scheduler.OneCycleLR(
        o, max_lr=0.5, total_steps=50, pct_start=0.2, three_phase=True, cycle_momentum=False),
        lambda i, t: THREE_PHASE(t)),
}


def expected_rates(name, t):
    return [SCHEDULES[name][1](i, t) for i in range(len(BASES))]


@pytest.mark.parametrize("name", SCHEDULES)
def test_rates_follow_the_closed_form(name):
    opt = sgd_at_rates(BASES)
    sched = SCHEDULES[name][0](opt)
    for t in range(STEPS + 1):
        assert sched.last_epoch == t
        assert_rates(sched.get_last_lr(), expected_rates(name, t))
        assert rates(opt) == sched.get_last_lr()
        sched.step()
    if not name.startswith("one-cycle"):
        assert [g["initial_lr"] for g in opt.param_groups] == list(BASES)


@pytest.mark.parametrize("name", SCHEDULES)
def test_state_dict_resumes_mid_schedule(name):
    # A checkpoint after 13 steps, pickled, loaded into a scheduler built afresh (which set the
    # rates of step 0), continues the schedule.
    make = SCHEDULES[name][0]
    sched = make(sgd_at_rates(BASES))
    for _ in range(13):
        sched.step()
    saved = pickle.loads(pickle.dumps(sched.state_dict()))
    assert "optimizer" not in saved and saved["last_epoch"] == 13
    opt = sgd_at_rates(BASES)
    resumed = make(opt)
    resumed.load_state_dict(saved)
    assert_rates(rates(opt), expected_rates(name, 13))
    for t in range(14, STEPS + 1):
        resumed.step()
        assert_rates(resumed.get_last_lr(), expected_rates(name, t))
        assert rates(opt) == resumed.get_last_lr()


@pytest.mark.parametrize("name", ["cosine-warmup", "one-cycle-three-phase", "lambda-per-group"])
def test_scheduled_rates_reach_a_jitted_step(name):
    rng = np.random.default_rng(7)
    opt = sgd_at_rates(BASES)
    sched = SCHEDULES[name][0](opt)
    step = kiln.jit(lambda *grads: opt(grads))
    expected = [np.zeros(3) for _ in BASES]
    for t in range(STEPS):
        grads = [rng.standard_normal(3) for _ in BASES]
        step(*(kiln.tensor(g) for g in grads))
        expected = [e - lr * g for e, lr, g in zip(expected, expected_rates(name, t), grads)]
        sched.step()
    assert step.cache_info().misses == 1  # one trace served every scheduled rate
    for p, e in zip(opt.parameters, expected):
        np.testing.assert_allclose(p.numpy(), e, rtol=1e-12, atol=1e-15)


class Warmup:
    """A callable object with state: LambdaLR saves its attributes, not a function's."""

    def __init__(self):
        self.scale = 1.0

    def __call__(self, t):
        return self.scale * min(1.0, (t + 1) / 10)


def test_lambda_state_dict_saves_callable_objects_but_not_functions():
    fns = [Warmup(), per_step_factor, Warmup()]
    sched = lr_scheduler.LambdaLR(sgd_at_rates(BASES), fns)
    fns[2].scale = 0.5
    for _ in range(4):
        sched.step()
    saved = sched.state_dict()
    assert saved["lr_lambdas"] == [{"scale": 1.0}, None, {"scale": 0.5}]
    fresh = [Warmup(), per_step_factor, Warmup()]
    resumed = lr_scheduler.LambdaLR(sgd_at_rates(BASES), fresh)
    resumed.load_state_dict(saved)
    assert fresh[2].scale == 0.5 and "lr_lambdas" in saved  # the dict given is left whole
    for t in range(5, 12):
        resumed.step()
        assert_rates(resumed.get_last_lr(), [BASES[0] * min(1.0, (t + 1) / 10),
                                             BASES[1] * per_step_factor(t),
                                             BASES[2] * 0.5 * min(1.0, (t + 1) / 10)])


@pytest.mark.parametrize("result, error, message", [
    (-0.5, kiln.KilnValueError, "LambdaLR: lr_lambda returned -0.5 for group 1 at step 3, "
                                "expected a real number >= 0"),
    ("0.5", kiln.KilnTypeError, r"LambdaLR: lr_lambda returned '0.5' \(str\) for group 1 at "
                                "step 3, expected a real number >= 0"),
])
def test_lambda_result_that_is_no_rate_changes_nothing(result, error, message):
    opt = sgd_at_rates(BASES)
    sched = lr_scheduler.LambdaLR(opt, [lambda t: 1.0, lambda t: result if t == 3 else 1.0,
                                        lambda t: 1.0])
    sched.step()
    sched.step()
    with raises(error, match=message):
        sched.step()
    assert sched.last_epoch == 2 and rates(opt) == list(BASES)


@pytest.mark.parametrize("strategy", ["cos", "linear"])
def test_one_cycle_ends_at_min_lr_and_stops_at_total_steps(strategy):
    opt = sgd_at_rates(BASES)
    sched = lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=20, anneal_strategy=strategy)
    assert [(g["initial_lr"], g["max_lr"], g["min_lr"]) for g in opt.param_groups] == \
        [(1.0 / 25, 1.0, 1.0 / 25 / 1e4)] * 3
    for _ in range(20):
        sched.step()
    assert_rates(sched.get_last_lr(), [1.0 / 25 / 1e4] * 3)
    with raises(kiln.KilnValueError, match="OneCycleLR: cannot step to step 21: the cycle has "
                                           "total_steps=20"):
        sched.step()
    assert sched.last_epoch == 20


def test_one_cycle_phase_of_no_length_is_at_its_end_rate():
    # pct_start * total_steps == 1: the rise ends at step 0 (where PyTorch divides by zero).
    sched = lr_scheduler.OneCycleLR(sgd_at_rates(BASES), max_lr=1.0, total_steps=10, pct_start=0.1)
    assert sched.get_last_lr() == [1.0] * 3
    sched.step()
    assert_rates(sched.get_last_lr(), [1.0 / 25e4 + (1.0 - 1.0 / 25e4)
                                       * (1 + math.cos(math.pi / 9)) / 2] * 3)


def test_one_cycle_leaves_the_momentum_with_cycle_momentum_false():
    opt = optim.SGD([nn.Parameter(mint.zeros(2))], lr=0.1, momentum=0.9)
    sched = lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10, cycle_momentum=False)
    for _ in range(5):
        sched.step()
    assert opt.param_groups[0]["momentum"] == 0.9 and "max_momentum" not in opt.param_groups[0]


# OneCycleLR's momentum cycle: (optimizer class, its arguments, the scheduler's arguments). Three
# groups of one float64 parameter each.
MOMENTUM_CYCLES = {
    "sgd": (optim.SGD, dict(lr=0.1, momentum=0.9), dict(max_lr=1.0, total_steps=30)),
    "sgd-nesterov-per-group-linear": (
        optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
        dict(max_lr=[1.0, 0.5, 2.0], total_steps=30, pct_start=0.25, anneal_strategy="linear",
             base_momentum=[0.8, 0.5, 0.85], max_momentum=[0.9, 0.99, 0.95])),
    # down to momentum 0 at the peak (step 8), where PyTorch's SGD leaves its buffer alone
    "sgd-dampening-to-0": (optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.3),
                           dict(max_lr=1.0, total_steps=30, base_momentum=0.0)),
    "adam-three-phase": (optim.Adam, dict(betas=(0.9, 0.99)),
                         dict(max_lr=0.1, total_steps=30, pct_start=0.2, three_phase=True)),
    "adamw-amsgrad-linear": (optim.AdamW, dict(amsgrad=True),
                             dict(max_lr=0.1, total_steps=30, anneal_strategy="linear",
                                  base_momentum=0.5, max_momentum=0.9)),
    "rmsprop-to-0": (optim.RMSprop, dict(momentum=0.5),
                     dict(max_lr=0.01, total_steps=30, base_momentum=0.0)),
}
# (name, jit) of the cycles to step: the cycles down to momentum 0 eagerly only, as a jitted SGD or
# RMSprop step decides when it is traced whether it steps with momentum (see kiln.optim.SGD).
CYCLE_RUNS = [pytest.param(name, jit, id=f"{name}-{'jitted' if jit else 'eager'}")
              for name in MOMENTUM_CYCLES for jit in (False, True)
              if not (jit and name.endswith("-to-0"))]
MOMENTUM_REFERENCES = {optim.SGD: sgd_reference, optim.Adam: adam_reference,
                       optim.AdamW: adamw_reference, optim.RMSprop: rmsprop_reference}


def momenta(opt):
    """Each group's momentum: SGD's and RMSprop's momentum, the Adam family's beta1."""
    return [g["betas"][0] if "betas" in g else g["momentum"] for g in opt.param_groups]


def momentum_cycle(name):
    """The parameters, optimizer and scheduler of MOMENTUM_CYCLES[name], and the closed forms of
    each group's rate and momentum at step t."""
    cls, opt_kwargs, kwargs = MOMENTUM_CYCLES[name]
    params = [nn.Parameter(mint.zeros(3, dtype=kiln.float64)) for _ in BASES]
    opt = cls([{"params": [p]} for p in params], **opt_kwargs)
    sched = lr_scheduler.OneCycleLR(opt, cycle_momentum=True, **kwargs)
    common = dict(total=kwargs["total_steps"], pct=kwargs.get("pct_start", 0.3),
                  strategy=kwargs.get("anneal_strategy", "cos"),
                  three_phase=kwargs.get("three_phase", False))
    lrs = [one_cycle(peak, **common) for peak in per_group(kwargs["max_lr"])]
    cycled = [one_cycle_momentum(base, peak, **common) for base, peak in
              zip(per_group(kwargs.get("base_momentum", 0.85)),
                  per_group(kwargs.get("max_momentum", 0.95)))]
    return params, opt, sched, lambda t: [f(t) for f in lrs], lambda t: [f(t) for f in cycled]


def per_group(value):
    return value if isinstance(value, list) else [value] * len(BASES)


@pytest.mark.parametrize("name", MOMENTUM_CYCLES)
def test_one_cycle_momentum_follows_the_closed_form(name):
    _, opt_kwargs, kwargs = MOMENTUM_CYCLES[name]
    _, opt, sched, lrs, expected = momentum_cycle(name)
    assert [(g["base_momentum"], g["max_momentum"]) for g in opt.param_groups] == \
        list(zip(per_group(kwargs.get("base_momentum", 0.85)),
                 per_group(kwargs.get("max_momentum", 0.95))))
    for t in range(kwargs["total_steps"] + 1):
        assert sched.last_epoch == t
        assert_rates(rates(opt), lrs(t))
        assert_rates(momenta(opt), expected(t))
        for group, momentum in zip(opt.param_groups, momenta(opt)):
            assert group._momentum.item() == momentum  # the tensor a jitted step reads
            if "betas" in group:  # beta2 stays, as in PyTorch
                assert group["betas"] == (momentum, opt_kwargs.get("betas", (0.9, 0.999))[1])
        if t < kwargs["total_steps"]:
            sched.step()
    with raises(kiln.KilnValueError, match=f"OneCycleLR: cannot step to step "
                                           f"{kwargs['total_steps'] + 1}"):
        sched.step()
    assert momenta(opt) == [g["max_momentum"] for g in opt.param_groups]


@pytest.mark.parametrize("name, jit", CYCLE_RUNS)
def test_one_cycle_momentum_reaches_the_update(name, jit):
    # Each step uses the rate and momentum of the closed forms; a jitted step, traced once,
    # follows both (eagerly, momentum 0 included: PyTorch's SGD and RMSprop then leave the buffer
    # alone).
    cls, opt_kwargs, kwargs = MOMENTUM_CYCLES[name]
    rng = np.random.default_rng(5)
    params, opt, sched, lrs, cycled = momentum_cycle(name)
    step = kiln.jit(lambda *grads: opt(grads)) if jit else (lambda *grads: opt(grads))
    expected, states = [np.zeros(3) for _ in params], [{} for _ in params]
    key = "betas" if "betas" in opt.param_groups[0] else "momentum"
    beta2 = opt_kwargs.get("betas", (0.9, 0.999))[1]
    for t in range(kwargs["total_steps"]):
        grads = [rng.standard_normal(3) for _ in params]
        step(*(kiln.tensor(g) for g in grads))
        expected = [MOMENTUM_REFERENCES[cls](e, g, s, **{
                        **opt_kwargs, "lr": lr, key: (m, beta2) if key == "betas" else m})
                    for e, g, s, lr, m in zip(expected, grads, states, lrs(t), cycled(t))]
        for p, e in zip(params, expected):
            np.testing.assert_allclose(p.numpy(), e, rtol=1e-12, atol=1e-14)
        sched.step()
    if jit:
        assert step.cache_info().misses == 1  # one trace served every rate and momentum


def test_one_cycle_momentum_state_dict_resumes_mid_cycle():
    _, _, sched, _, expected = momentum_cycle("adam-three-phase")
    for _ in range(13):
        sched.step()
    saved = pickle.loads(pickle.dumps(sched.state_dict()))
    _, opt, resumed, _, _ = momentum_cycle("adam-three-phase")
    assert_rates(momenta(opt), expected(0))
    resumed.load_state_dict(saved)
    assert_rates(momenta(opt), expected(13))
    for t in range(14, 31):
        resumed.step()
        assert_rates(momenta(opt), expected(t))


def test_one_cycle_momentum_of_an_sgd_built_without_momentum():
    # As in PyTorch, cycling turns the momentum on (0.95 at step 0): the first eager step makes
    # the buffers; a jitted step cannot, until one eager step has.
    rng = np.random.default_rng(6)
    p = nn.Parameter(mint.zeros(3, dtype=kiln.float64))
    opt = optim.SGD([p], lr=0.1)
    sched = lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10, cycle_momentum=True)
    assert opt.param_groups[0]["momentum"] == 0.95 and opt.state[0] == {}
    jitted = kiln.jit(lambda g: opt((g,)))
    with raises(kiln.KilnValueError, match="a parameter added without momentum > 0 has no "
                                           "momentum_buffer, and a kiln.jit step cannot create"):
        jitted(mint.zeros(3, dtype=kiln.float64))
    lrs, cycled = one_cycle(1.0, 10), one_cycle_momentum(0.85, 0.95, 10)
    expected, state = np.zeros(3), {}
    for t in range(10):
        g = rng.standard_normal(3)
        if t == 0:
            opt((kiln.tensor(g),))  # makes the buffer
        else:
            jitted(kiln.tensor(g))
        expected = sgd_reference(expected, g, state, lrs(t), momentum=cycled(t))
        sched.step()
    np.testing.assert_allclose(p.numpy(), expected, rtol=1e-12)
    assert jitted.cache_info().misses == 2  # the refused trace, then one for the other steps


def test_one_cycle_momentum_phase_of_no_length_is_at_its_end_momentum():
    opt = optim.SGD([nn.Parameter(mint.zeros(2))], lr=0.1, momentum=0.9)
    sched = lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10, pct_start=0.1,
                                    cycle_momentum=True)
    assert momenta(opt) == [0.85]
    sched.step()
    assert momenta(opt) == [pytest.approx(0.95 + (0.85 - 0.95) * (1 + math.cos(math.pi / 9)) / 2)]


@pytest.mark.parametrize("make, kwargs, error, message", [
    (optim.Adagrad, {}, kiln.KilnValueError,
     r"OneCycleLR: cycle_momentum=True needs an optimizer with a momentum \(SGD's or RMSprop's "
     r"momentum, the Adam family's beta1\), but Adagrad has none; pass cycle_momentum=False"),
    (lambda groups: optim.SGD(groups, lr=0.1), dict(base_momentum=-0.1), kiln.KilnValueError,
     r"OneCycleLR: invalid base_momentum -0.1, expected base_momentum >= 0.0"),
    (lambda groups: optim.SGD(groups, lr=0.1, momentum=0.9), dict(base_momentum="0.85"),
     kiln.KilnTypeError,
     r"OneCycleLR: base_momentum must be a real number, got '0.85'"),
    (optim.RMSprop, dict(max_momentum=[0.9, 0.9]), kiln.KilnValueError,
     r"OneCycleLR: expected 3 values of max_momentum \(one per parameter group\), got 2"),
    (optim.Adam, dict(max_momentum=1.0), kiln.KilnValueError,
     r"OneCycleLR: max_momentum must be < 1 for Adam, whose beta1 it sets, got 1.0"),
    (optim.NAdam, dict(base_momentum=[0.8, 1.5, 0.8]), kiln.KilnValueError,
     r"OneCycleLR: base_momentum must be < 1 for NAdam, whose beta1 it sets, got 1.5"),
], ids=["adagrad", "negative", "string", "count", "adam-max-1", "nadam-base-1.5"])
def test_one_cycle_momentum_arguments_are_checked_before_anything_changes(make, kwargs, error,
                                                                          message):
    opt = make([{"params": [nn.Parameter(mint.zeros(2))], "lr": lr} for lr in BASES])
    before = [dict(g) for g in opt.param_groups]
    with raises(error, match=message):
        lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10, cycle_momentum=True, **kwargs)
    assert [dict(g) for g in opt.param_groups] == before


# ---------------------------------------------------------------------------------------------
# ReduceLROnPlateau


class PlateauModel:
    """PyTorch's rule, written out: a metric improves on the best when past it by the threshold;
    after more than ``patience`` bad steps outside a cooldown the rates drop by ``factor`` (to
    at least min_lr, and only when by more than eps), and the cooldown starts."""

    def __init__(self, lrs, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0.0, eps=1e-8):
        self.lrs = list(lrs)
        self.min_lrs = list(min_lr) if isinstance(min_lr, list) else [min_lr] * len(lrs)
        self.mode, self.factor, self.patience, self.eps = mode, factor, patience, eps
        self.threshold, self.threshold_mode, self.cooldown = threshold, threshold_mode, cooldown
        self.best = math.inf if mode == "min" else -math.inf
        self.bad = self.cooldown_left = 0

    def better(self, value):
        sign = 1 if self.mode == "max" else -1
        if self.threshold_mode == "rel":
            return sign * value > sign * self.best * (1 + sign * self.threshold)
        return sign * value > sign * (self.best + sign * self.threshold)

    def step(self, value):
        if self.better(value):
            self.best, self.bad = value, 0
        else:
            self.bad += 1
        if self.cooldown_left > 0:
            self.cooldown_left -= 1
            self.bad = 0
        if self.bad > self.patience:
            for i, (lr, floor) in enumerate(zip(self.lrs, self.min_lrs)):
                new = max(lr * self.factor, floor)
                if lr - new > self.eps:
                    self.lrs[i] = new
            self.cooldown_left, self.bad = self.cooldown, 0
        return list(self.lrs)


PLATEAUS = {
    "min-rel": dict(),
    "min-rel-patience-2": dict(mode="min", factor=0.5, patience=2),
    "max-abs-cooldown": dict(mode="max", factor=0.5, patience=1, threshold=0.05,
                             threshold_mode="abs", cooldown=2),
    "max-rel": dict(mode="max", factor=0.3, patience=0, threshold=0.01),
    "min-abs-floors": dict(mode="min", factor=0.2, patience=1, threshold_mode="abs",
                           min_lr=[0.01, 0.0, 0.3]),
    "min-eps": dict(factor=0.5, patience=0, min_lr=0.02, eps=0.01),
}


def plateau_metrics():
    """Falling, then flat with noise, a NaN, a rise, flat again: every counter gets used."""
    rng = np.random.default_rng(11)
    values = list(np.linspace(1.0, 0.5, 6)) + list(0.5 + 0.001 * rng.standard_normal(10))
    values += [float("nan"), 0.45, 0.6, 0.7, 0.8] + list(0.8 + 0.02 * rng.standard_normal(15))
    return [float(v) for v in values]


@pytest.mark.parametrize("name", PLATEAUS)
def test_plateau_follows_its_rule(name):
    kwargs = PLATEAUS[name]
    opt = sgd_at_rates(BASES)
    sched = lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
    model = PlateauModel(BASES, **kwargs)
    assert sched.get_last_lr() == list(BASES) and "initial_lr" not in opt.param_groups[0]
    for i, metric in enumerate(plateau_metrics()):
        # a Python number, a 0-d tensor (a reduction's result) or a one-element tensor
        sched.step([metric, kiln.tensor(metric), kiln.tensor([metric])][i % 3])
        assert_rates(sched.get_last_lr(), model.step(metric))
        assert rates(opt) == sched.get_last_lr()
        assert (sched.num_bad_epochs, sched.cooldown_counter, sched.last_epoch) == \
            (model.bad, model.cooldown_left, i + 1)
    assert sched.get_last_lr() != list(BASES)  # it did lower the rates


# Worked by hand: (arguments, metrics, each step's rates as multiples of BASES)
PLATEAU_CASES = {
    # best 1.0; 0.95, 0.92, 0.91 are not below 0.9: the third bad step is past patience 2
    "patience": (dict(factor=0.5, patience=2, threshold=0.1),
                 [1.0, 0.95, 0.92, 0.91, 0.85, 0.80, 0.79, 0.78],
                 [1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.25]),
    # rel: below 100 * 0.99 = 99 improves, so 99.2 is bad; abs: below 100 - 0.5 = 99.5 improves
    "min-rel": (dict(factor=0.5, patience=0, threshold=0.01),
                [100.0, 99.2, 98.5, 97.8], [1, 0.5, 0.5, 0.25]),
    "min-abs": (dict(factor=0.5, patience=0, threshold=0.5, threshold_mode="abs"),
                [100.0, 99.2, 98.5, 97.8], [1, 1, 1, 1]),
    "max-rel": (dict(mode="max", factor=0.5, patience=0, threshold=0.01),
                [1.0, 1.005, 1.02, 1.025], [1, 0.5, 0.5, 0.25]),
    "max-abs": (dict(mode="max", factor=0.5, patience=0, threshold=0.001, threshold_mode="abs"),
                [1.0, 1.005, 1.02, 1.025], [1, 1, 1, 1]),
    # after each reduction two steps count as good
    "cooldown": (dict(factor=0.5, patience=0, cooldown=2), [1.0] * 8,
                 [1, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.125]),
    # NaN never improves
    "nan": (dict(factor=0.5, patience=1), [1.0, float("nan"), float("nan"), 0.5],
            [1, 1, 0.5, 0.5]),
}


@pytest.mark.parametrize("name", PLATEAU_CASES)
def test_plateau_worked_cases(name):
    kwargs, metrics, multiples = PLATEAU_CASES[name]
    opt = sgd_at_rates(BASES)
    sched = lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
    for metric, multiple in zip(metrics, multiples):
        sched.step(metric)
        assert_rates(rates(opt), [b * multiple for b in BASES])


@pytest.mark.parametrize("kwargs, expected", [
    # min_lr floors each group; a rate at its floor stays (a drop of 0 is not more than eps)
    (dict(factor=0.1, patience=0, min_lr=[0.02, 0.0, 0.5]),
     [[0.1, 0.05, 1.0], [0.02, 0.005, 0.5], [0.02, 5e-4, 0.5], [0.02, 5e-5, 0.5]]),
    # a drop of eps (0.01) or less is skipped, per group
    (dict(factor=0.5, patience=0, eps=0.01),
     [[0.1, 0.05, 1.0], [0.05, 0.025, 0.5], [0.025, 0.0125, 0.25], [0.0125, 0.0125, 0.125],
      [0.0125, 0.0125, 0.0625]]),
])
def test_plateau_min_lr_and_eps(kwargs, expected):
    opt = sgd_at_rates(BASES)
    sched = lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
    for lrs in expected:
        sched.step(1.0)
        assert_rates(rates(opt), lrs)


def test_plateau_state_dict_resumes():
    kwargs = PLATEAUS["max-abs-cooldown"]
    metrics = plateau_metrics()
    sched = lr_scheduler.ReduceLROnPlateau(sgd_at_rates(BASES), **kwargs)
    model = PlateauModel(BASES, **kwargs)
    for metric in metrics[:20]:
        sched.step(metric)
        model.step(metric)
    saved = pickle.loads(pickle.dumps(sched.state_dict()))
    opt = sgd_at_rates(BASES)
    resumed = lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
    resumed.load_state_dict(saved)
    assert_rates(rates(opt), model.lrs)
    for metric in metrics[20:]:
        resumed.step(metric)
        assert_rates(resumed.get_last_lr(), model.step(metric))


def test_plateau_step_is_refused_inside_a_jitted_function():
    opt = sgd_at_rates(BASES)
    sched = lr_scheduler.ReduceLROnPlateau(opt, patience=0)

    def body(g):
        opt((g, None, None))
        sched.step(1.0)

    with raises(kiln.KilnValueError, match=r"ReduceLROnPlateau: step\(\) cannot run inside a "
                                           r"kiln.jit function"):
        kiln.jit(body)(mint.ones(3, dtype=kiln.float64))
    assert sched.last_epoch == 0 and sched.best == math.inf


def test_plateau_groups_added_later():
    # One min_lr covers a group added after the scheduler was built; a list of them cannot.
    for min_lr in (0.01, [0.01] * 3):
        opt = sgd_at_rates(BASES)
        sched = lr_scheduler.ReduceLROnPlateau(opt, patience=0, min_lr=min_lr)
        opt.add_param_group({"params": [nn.Parameter(mint.zeros(1))], "lr": 0.5})
        sched.step(1.0)
        if isinstance(min_lr, float):
            sched.step(2.0)
            assert_rates(sched.get_last_lr(), [0.01, 0.01, 0.1, 0.05])
        else:
            with raises(kiln.KilnValueError, match="the optimizer has 4 parameter groups, but "
                                                   "min_lr was given for 3"):
                sched.step(2.0)
            assert sched.last_epoch == 1 and opt.param_groups[3]["lr"] == 0.5


@pytest.mark.parametrize("metric, kind", [("0.5", "str"), (None, "NoneType"), (True, "bool")])
def test_plateau_metric_of_the_wrong_kind(metric, kind):
    sched = lr_scheduler.ReduceLROnPlateau(sgd_at_rates(BASES))
    with raises(kiln.KilnTypeError, match=f"ReduceLROnPlateau.step: metrics must be a number or "
                                          f"a one-element tensor, got {kind}"):
        sched.step(metric)
    assert sched.last_epoch == 0


def test_every_scheduler_has_its_own_docstring():
    classes = [getattr(lr_scheduler, name) for name in lr_scheduler.__all__]
    assert [c.__name__ for c in classes if not (c.__dict__.get("__doc__") or "").strip()] == []


def test_schedulers_take_numpy_numbers():
    opt = sgd_at_rates(BASES)
    sched = lr_scheduler.StepLR(opt, step_size=np.int64(2), gamma=np.float32(0.5))
    sched.step()
    sched.step()
    assert sched.get_last_lr() == pytest.approx([b * 0.5 for b in BASES])
    sched = lr_scheduler.MultiStepLR(opt, milestones=np.array([1, 3]))
    assert sched.milestones == (1, 3)


# ---------------------------------------------------------------------------------------------
# Scheduler arguments: (build from an optimizer, error, message)

S = lr_scheduler
SCHEDULER_ERRORS = [
    (lambda o: S.StepLR(o, 5, gamma=-0.1), kiln.KilnValueError,
     r"StepLR: invalid gamma -0.1, expected gamma >= 0.0"),
    (lambda o: S.StepLR(o, 5, gamma="0.1"), kiln.KilnTypeError,
     r"StepLR: gamma must be a real number, got '0.1'"),
    (lambda o: S.StepLR(o, 0), kiln.KilnValueError, r"StepLR: step_size must be at least 1, got 0"),
    (lambda o: S.StepLR(o, 2.5), kiln.KilnTypeError,
     r"StepLR: step_size must be an int, got float 2.5"),
    (lambda o: S.MultiStepLR(o, [10, 5]), kiln.KilnValueError,
     r"MultiStepLR: milestones must be in increasing order, got \[10, 5\]"),
    (lambda o: S.MultiStepLR(o, 10), kiln.KilnTypeError,
     r"MultiStepLR: milestones must be a list of step indices, got int 10"),
    (lambda o: S.MultiStepLR(o, [-1, 3]), kiln.KilnValueError,
     r"MultiStepLR: a milestone must be at least 0, got -1"),
    (lambda o: S.MultiStepLR(o, [3], gamma=float("nan")), kiln.KilnValueError,
     r"MultiStepLR: invalid gamma nan"),
    (lambda o: S.ExponentialLR(o, None), kiln.KilnTypeError,
     r"ExponentialLR: gamma must be a real number, got None"),
    (lambda o: S.ExponentialLR(o, -0.9), kiln.KilnValueError,
     r"ExponentialLR: invalid gamma -0.9, expected gamma >= 0.0"),
    (lambda o: S.LambdaLR(o, [lambda t: 1.0] * 2), kiln.KilnValueError,
     r"LambdaLR: expected 3 lr_lambdas \(one per parameter group\), got 2"),
    (lambda o: S.LambdaLR(o, 0.5), kiln.KilnTypeError,
     r"LambdaLR: lr_lambda must be a callable or a list of one per parameter group, got float"),
    (lambda o: S.LinearLR(o, start_factor=0), kiln.KilnValueError,
     r"LinearLR: start_factor must be in \(0.0, 1.0\], got 0"),
    (lambda o: S.LinearLR(o, end_factor=1.5), kiln.KilnValueError,
     r"LinearLR: end_factor must be in \[0.0, 1.0\], got 1.5"),
    (lambda o: S.LinearLR(o, total_iters=0), kiln.KilnValueError,
     r"LinearLR: total_iters must be at least 1, got 0"),
    (lambda o: S.ConstantLR(o, factor=1.5), kiln.KilnValueError,
     r"ConstantLR: factor must be in \[0.0, 1.0\], got 1.5"),
    (lambda o: S.ConstantLR(o, total_iters=-2), kiln.KilnValueError,
     r"ConstantLR: total_iters must be at least 1, got -2"),
    (lambda o: S.CosineAnnealingLR(o, 10, warmup_steps=10), kiln.KilnValueError,
     r"CosineAnnealingLR: need 0 <= warmup_steps < T_max, got warmup_steps=10, T_max=10"),
    (lambda o: S.CosineAnnealingLR(o, 10, eta_min=-0.1), kiln.KilnValueError,
     r"CosineAnnealingLR: invalid eta_min -0.1, expected eta_min >= 0.0"),
    (lambda o: S.CosineAnnealingLR(o, "10"), kiln.KilnTypeError,
     r"CosineAnnealingLR: T_max must be a real number, got '10'"),
    (lambda o: S.OneCycleLR(o, 1.0), kiln.KilnValueError,
     r"OneCycleLR: expected total_steps, or both epochs and steps_per_epoch"),
    (lambda o: S.OneCycleLR(o, 1.0, total_steps=0), kiln.KilnValueError,
     r"OneCycleLR: total_steps must be at least 1, got 0"),
    (lambda o: S.OneCycleLR(o, 1.0, epochs=0, steps_per_epoch=3), kiln.KilnValueError,
     r"OneCycleLR: epochs must be at least 1, got 0"),
    (lambda o: S.OneCycleLR(o, 1.0, 10, pct_start=1.5), kiln.KilnValueError,
     r"OneCycleLR: pct_start must be in \[0.0, 1.0\], got 1.5"),
    (lambda o: S.OneCycleLR(o, 1.0, 10, anneal_strategy="cosine"), kiln.KilnValueError,
     r"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got 'cosine'"),
    (lambda o: S.OneCycleLR(o, 1.0, 10, div_factor=0), kiln.KilnValueError,
     r"OneCycleLR: div_factor must be > 0, got 0"),
    (lambda o: S.OneCycleLR(o, [1.0, 2.0], 10), kiln.KilnValueError,
     r"OneCycleLR: expected 3 values of max_lr \(one per parameter group\), got 2"),
    (lambda o: S.OneCycleLR(o, [1.0, -2.0, 1.0], 10), kiln.KilnValueError,
     r"OneCycleLR: invalid max_lr\[1\] -2.0, expected max_lr\[1\] >= 0.0"),
    (lambda o: S.ReduceLROnPlateau(o, mode="minimum"), kiln.KilnValueError,
     r"ReduceLROnPlateau: mode must be 'min' or 'max', got 'minimum'"),
    (lambda o: S.ReduceLROnPlateau(o, threshold_mode="relative"), kiln.KilnValueError,
     r"ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs', got 'relative'"),
    (lambda o: S.ReduceLROnPlateau(o, factor=1.0), kiln.KilnValueError,
     r"ReduceLROnPlateau: factor must be < 1 \(it multiplies the rate to lower it\), got 1.0"),
    (lambda o: S.ReduceLROnPlateau(o, factor=-0.1), kiln.KilnValueError,
     r"ReduceLROnPlateau: invalid factor -0.1, expected factor >= 0.0"),
    (lambda o: S.ReduceLROnPlateau(o, patience=-1), kiln.KilnValueError,
     r"ReduceLROnPlateau: patience must be at least 0, got -1"),
    (lambda o: S.ReduceLROnPlateau(o, cooldown=1.5), kiln.KilnTypeError,
     r"ReduceLROnPlateau: cooldown must be an int, got float 1.5"),
    (lambda o: S.ReduceLROnPlateau(o, min_lr=[0.0, 0.1]), kiln.KilnValueError,
     r"ReduceLROnPlateau: expected 3 values of min_lr \(one per parameter group\), got 2"),
    (lambda o: S.ReduceLROnPlateau(o, min_lr=-0.1), kiln.KilnValueError,
     r"ReduceLROnPlateau: invalid min_lr -0.1, expected min_lr >= 0.0"),
    (lambda o: S.ReduceLROnPlateau(o, threshold=-1e-4), kiln.KilnValueError,
     r"ReduceLROnPlateau: invalid threshold -0.0001, expected threshold >= 0.0"),
    (lambda o: S.ReduceLROnPlateau(o, eps=None), kiln.KilnTypeError,
     r"ReduceLROnPlateau: eps must be a real number, got None"),
]


@pytest.mark.parametrize("make, error, message", SCHEDULER_ERRORS,
                         ids=[f"{i}-{e[2].split(':')[0]}" for i, e in enumerate(SCHEDULER_ERRORS)])
def test_bad_scheduler_arguments_are_refused(make, error, message):
    opt = sgd_at_rates(BASES)
    with raises(error, match=message):
        make(opt)
    assert rates(opt) == list(BASES)


@pytest.mark.parametrize("name", list(SCHEDULES) + ["plateau"])
def test_a_scheduler_needs_an_optimizer(name):
    make = SCHEDULES[name][0] if name in SCHEDULES else lr_scheduler.ReduceLROnPlateau
    cls = type(make(sgd_at_rates(BASES))).__name__
    with raises(kiln.KilnTypeError, match=f"{cls}: expected a kiln.optim.Optimizer, got list"):
        make([])


# ---------------------------------------------------------------------------------------------
# kiln.mint.vector_norm / norm against NumPy, with the analytic gradients

ORDERS = [2, 1, math.inf, -math.inf, 0, 0.5, 3, -1]


def norm_data():
    """A [3, 4, 2] float64 array with a zero element and a slice of zeros (a norm of 0)."""
    data = np.random.default_rng(0).standard_normal((3, 4, 2))
    data[0, 1, 0] = 0.0
    data[2, :, 1] = 0.0
    return data


def axes(dim, ndim):
    if dim is None or dim == ():
        return tuple(range(ndim))
    return tuple(d % ndim for d in (dim if isinstance(dim, (list, tuple)) else [dim]))


def np_norm(a, order, dims):
    """The ``order`` norm of ``a`` over ``dims``, kept as size-1 dims."""
    mag = np.abs(a)
    if order == math.inf:
        return mag.max(axis=dims, keepdims=True)
    if order == -math.inf:
        return mag.min(axis=dims, keepdims=True)
    if order == 0:
        return np.count_nonzero(a, axis=dims, keepdims=True).astype(a.dtype)
    with np.errstate(divide="ignore"):  # 0 ** order = inf for order < 0: a norm of 0
        return (mag ** order).sum(axis=dims, keepdims=True) ** (1 / order)


def np_norm_grad(a, order, dims):
    """d norm / d a: sign(x) |x|^(p-1) / ||x||^(p-1) (x / ||x|| for p = 2, sign(x) for p = 1),
    0 where x or the norm is 0 (PyTorch's choice at those points), 0 for p = 0, and for inf /
    -inf sign(x) shared among the elements of largest (smallest) magnitude."""
    mag, r = np.abs(a), np_norm(a, order, dims)
    if math.isinf(order):
        ties = mag == r
        return np.sign(a) * ties / ties.sum(axis=dims, keepdims=True)
    if order == 0:
        return np.zeros_like(a)
    with np.errstate(divide="ignore", invalid="ignore"):
        grad = np.sign(a) * mag ** (order - 1) / r ** (order - 1)
    return np.where((mag == 0) | (r == 0), 0.0, grad)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [None, 0, -1, (0, 2), [1], ()])
@pytest.mark.parametrize("order", ORDERS)
def test_vector_norm_values_and_gradients(order, dim, keepdim):
    data = norm_data()
    dims = axes(dim, data.ndim)
    x = kiln.tensor(data).requires_grad_()
    value = mint.vector_norm(x, order, dim, keepdim)
    expected = np_norm(data, order, dims)
    weights = np.random.default_rng(1).uniform(0.5, 1.5, expected.shape)  # d loss / d norm
    if not keepdim:
        expected = expected.squeeze(dims)
    shaped = weights if keepdim else weights.squeeze(dims)
    assert value.shape == expected.shape and value.dtype == kiln.float64
    np.testing.assert_allclose(value.detach().numpy(), expected, rtol=1e-12, atol=1e-15)
    mint.sum(value * kiln.tensor(shaped)).backward()
    np.testing.assert_allclose(x.grad.numpy(), weights * np_norm_grad(data, order, dims),
                               rtol=1e-10, atol=1e-15)


def test_norm_gradients_of_the_common_orders():
    data = np.array([3.0, -4.0, 0.0, 12.0])
    for order, expected in ((2, data / 13.0), (1, np.sign(data)),
                            (math.inf, [0.0, 0.0, 0.0, 1.0]), (-math.inf, [0.0, 0.0, 0.0, 0.0])):
        x = kiln.tensor(data).requires_grad_()
        mint.vector_norm(x, order).backward()
        np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-15)
    for order in ORDERS:  # at a zero vector every gradient is 0, not NaN
        x = kiln.tensor(np.zeros(4)).requires_grad_()
        value = mint.vector_norm(x, order)
        value.backward()
        assert value.item() == 0.0
        np.testing.assert_array_equal(x.grad.numpy(), np.zeros(4))


@pytest.mark.parametrize("order, data, count", [
    (math.inf, [3.0, -3.0, 1.0, 3.0], 3),
    (-math.inf, [1.0, -1.0, 2.0, -4.0], 2),
])
def test_inf_norm_gradient_is_shared_among_ties(order, data, count):
    x = kiln.tensor(np.array(data)).requires_grad_()
    mint.vector_norm(x, order).backward()
    np.testing.assert_allclose(x.grad.numpy(), np_norm_grad(np.array(data), order, (0,)),
                               rtol=1e-15)
    assert np.count_nonzero(x.grad.numpy()) == count


@pytest.mark.parametrize("p, dim, keepdim", [
    ("fro", None, False), ("fro", (0, 1), True), ("fro", 2, False), (None, None, False),
    (2, (1, 2), False), (1, None, False), (math.inf, 1, True), (3, -1, False), (0, None, False),
])
def test_norm_is_vector_norm_with_fro_as_2(p, dim, keepdim):
    data = norm_data()
    order = 2 if p in ("fro", None) else p
    dims = axes(dim, data.ndim)
    expected = np_norm(data, order, dims)
    value = mint.norm(kiln.tensor(data), p, dim, keepdim)
    np.testing.assert_allclose(value.numpy(), expected if keepdim else expected.squeeze(dims),
                               rtol=1e-12, atol=1e-15)


def test_norm_defaults_and_dtype():
    data = norm_data().astype(np.float32)
    x = kiln.tensor(data)
    for value in (mint.norm(x), mint.vector_norm(x)):
        assert value.dtype == kiln.float32
        np.testing.assert_allclose(value.numpy(), np.linalg.norm(data.ravel()), rtol=1e-6)
    result = mint.norm(x, 2, dtype=kiln.float64)  # computed and returned in float64
    assert result.dtype == kiln.float64
    np.testing.assert_allclose(result.numpy(), np.linalg.norm(data.astype(np.float64).ravel()),
                               rtol=1e-12)
    assert mint.vector_norm(x, 1, dim=0, dtype=kiln.float64).dtype == kiln.float64


@pytest.mark.parametrize("dtype, rtol", [(kiln.float16, 1e-3), (kiln.bfloat16, 8e-3),
                                         (kiln.float32, 1e-6)])
@pytest.mark.parametrize("order", [2, 1, math.inf, 3])
def test_low_precision_norms_are_accumulated_in_float32(dtype, rtol, order):
    # 300 ** 2 overflows float16 (65504): the norm is accumulated in float32 and rounded once.
    data = np.array([[300.0, -300.0, 0.5], [2.0, 1.0, 0.25]])
    value = mint.vector_norm(kiln.tensor(data, dtype=dtype), order, dim=-1)
    assert value.dtype == dtype
    np.testing.assert_allclose(value.to(kiln.float64).numpy(),
                               np_norm(data, order, (1,))[:, 0], rtol=rtol)


def test_float32_norm_gradient():
    data = norm_data().astype(np.float32)
    x = kiln.tensor(data).requires_grad_()
    mint.sum(mint.vector_norm(x, 2, dim=1)).backward()
    assert x.grad.dtype == kiln.float32
    np.testing.assert_allclose(x.grad.numpy(), np_norm_grad(data.astype(np.float64), 2, (1,)),
                               rtol=1e-5, atol=1e-6)


def test_norm_of_a_0d_tensor_and_of_no_elements():
    for dim in (None, 0, -1, ()):
        assert mint.vector_norm(kiln.tensor(-3.0), 2, dim).item() == 3.0
    empty = mint.zeros((2, 0))
    for order in (2, 1, 0, 0.5):
        assert mint.vector_norm(empty, order).item() == 0.0
    assert mint.vector_norm(empty, math.inf, dim=0).shape == (0,)
    for order in (math.inf, -math.inf, -1):  # no identity: refused over an empty dim
        with raises(kiln.KilnValueError, match=f"vector_norm: cannot compute the {order:g} norm "
                                               f"over an empty dimension"):
            mint.vector_norm(empty, order, dim=(0, 1))


@pytest.mark.parametrize("order", [2, 1, math.inf, 0.5, -1])
def test_norm_gradient_in_a_jitted_function(order):
    data = norm_data()
    grad_fn = kiln.grad(lambda x: mint.sum(mint.vector_norm(x, order, dim=1)))
    jitted = kiln.jit(grad_fn)
    for scale in (1.0, 2.0):
        expected = np_norm_grad(data * scale, order, (1,))
        np.testing.assert_allclose(jitted(kiln.tensor(data * scale)).numpy(), expected,
                                   rtol=1e-10, atol=1e-15)
        np.testing.assert_allclose(grad_fn(kiln.tensor(data * scale)).numpy(), expected,
                                   rtol=1e-10, atol=1e-15)
    assert jitted.cache_info().misses == 1


NORM_ERRORS = [
    (lambda: mint.vector_norm(kiln.tensor([1, 2])), kiln.DTypeError,
     "vector_norm: expected a floating-point tensor, got int64"),
    (lambda: mint.vector_norm(kiln.tensor([1.0], dtype=kiln.float64), dtype=kiln.float32),
     kiln.DTypeError, "vector_norm: dtype must be a floating-point dtype that float64 converts "
                      "to without loss, got kiln.float32"),
    (lambda: mint.vector_norm(mint.ones((2, 3)), dim=2), kiln.KilnIndexError,
     r"vector_norm: dim out of range: expected a value in \[-2, 1\] for a 2-d tensor, got 2"),
    (lambda: mint.vector_norm(mint.ones((2, 3)), dim=(0, -2)), kiln.KilnValueError,
     r"vector_norm: dim 0 appears more than once in dim \(0, -2\)"),
    (lambda: mint.vector_norm(mint.ones(2), dim=1.0), kiln.KilnTypeError,
     "vector_norm: expected dim to be None, an int or a list / tuple of ints, got float 1.0"),
    (lambda: mint.vector_norm(mint.ones(2), "fro"), kiln.KilnTypeError,
     "vector_norm: ord must be a real number"),
    (lambda: mint.vector_norm(mint.ones(2), float("nan")), kiln.KilnValueError,
     "vector_norm: ord must be a number, got nan"),
    (lambda: mint.vector_norm(mint.ones(2), keepdim="yes"), kiln.KilnTypeError,
     "vector_norm: keepdim must be True or False, got 'yes'"),
    (lambda: mint.vector_norm([1.0, 2.0]), kiln.KilnTypeError,
     "vector_norm: expected a kiln tensor, got list"),
    (lambda: mint.norm(mint.ones((2, 2, 2)), "nuc"), kiln.KilnValueError,
     r"linalg.matrix_norm: dim must be a pair of dims, got \[0, 1, 2\]"),
    (lambda: mint.norm(mint.ones((2, 2)), "foo"), kiln.KilnValueError,
     "norm: p must be a number, 'fro' or None, got 'foo'"),
    (lambda: mint.norm(mint.ones((2, 2, 2)), "fro", dim=(0, 1, 2)), kiln.KilnValueError,
     r"norm: p='fro' is the norm of vectors or matrices, over at most 2 dims, got "
     r"dim=\(0, 1, 2\)"),
    (lambda: mint.norm(mint.ones(2), True), kiln.KilnTypeError, "norm: p must be a real number"),
]


@pytest.mark.parametrize("call, error, message", NORM_ERRORS,
                         ids=[f"{i}-{e[2][:30]}" for i, e in enumerate(NORM_ERRORS)])
def test_norm_errors(call, error, message):
    with raises(error, match=message):
        call()


# ---------------------------------------------------------------------------------------------
# Gradient clipping against NumPy


def make_params(dtype=kiln.float64, seed=0):
    """Three parameters, the last without a gradient, and their gradients as float64 arrays."""
    rng = np.random.default_rng(seed)
    grads = [3.0 * rng.standard_normal(s) for s in [(3, 4), (5,)]]
    params = [nn.Parameter(mint.zeros(s, dtype=dtype)) for s in [(3, 4), (5,), (2, 2)]]
    for p, g in zip(params, grads):
        p.grad = kiln.tensor(g, dtype=dtype)
    # the values the dtype holds, copied: the gradients change in place
    return params, [np.array(p.grad.to(kiln.float64).numpy()) for p in params[:2]]


def np_total(grads, order):
    """The norm of the per-tensor norms (PyTorch's total norm)."""
    return np.linalg.norm([np.linalg.norm(g.ravel(), order) for g in grads], order)


def clipped(grads, max_norm, order):
    total = np_total(grads, order)
    return [g * min(max_norm / (total + 1e-6), 1.0) for g in grads], total


@pytest.mark.parametrize("max_norm", [0.5, 1e3, 0.0])
@pytest.mark.parametrize("norm_type", [2.0, 1, math.inf, -math.inf, 0.5, 0, 3])
def test_clip_grad_norm_value_and_in_place_forms(norm_type, max_norm):
    params, grads = make_params()
    expected, expected_total = clipped(grads, max_norm, norm_type)
    out, out_total = clip_grad_norm([p.grad for p in params], max_norm, norm_type)
    assert out[2] is None
    np.testing.assert_allclose(out_total.numpy(), expected_total, rtol=1e-13)
    held = params[0].grad  # scaled in place: the same tensor
    total = clip_grad_norm_(params, max_norm, norm_type)
    assert total.shape == () and total.dtype == kiln.float64 and not total.requires_grad
    np.testing.assert_allclose(total.numpy(), expected_total, rtol=1e-13)
    for p, c, e in zip(params, out, expected):
        np.testing.assert_allclose(p.grad.numpy(), e, rtol=1e-13, atol=1e-16)
        np.testing.assert_array_equal(c.numpy(), p.grad.numpy())
    assert params[2].grad is None  # skipped
    np.testing.assert_array_equal(held.numpy(), params[0].grad.numpy())


@pytest.mark.parametrize("dtype, rtol", [(kiln.float32, 1e-6), (kiln.float16, 2e-3),
                                         (kiln.bfloat16, 1.6e-2)])
def test_clip_grad_norm_dtypes(dtype, rtol):
    params, grads = make_params(dtype)
    total = clip_grad_norm_(params, 1.0)
    expected, expected_total = clipped(grads, 1.0, 2)
    assert total.dtype == dtype
    np.testing.assert_allclose(total.to(kiln.float64).numpy(), expected_total, rtol=rtol)
    for p, e in zip(params, expected):
        assert p.grad.dtype == dtype
        np.testing.assert_allclose(p.grad.to(kiln.float64).numpy(), e, rtol=rtol, atol=rtol / 10)


def test_clip_grad_norm_parameter_forms():
    params, grads = make_params()
    total = clip_grad_norm_(params[0], 1.0)  # one tensor
    np.testing.assert_allclose(total.numpy(), np.linalg.norm(grads[0]), rtol=1e-13)
    for flag in (True, False):  # a generator; foreach changes nothing
        params, grads = make_params(seed=1)
        clip_grad_norm_((p for p in params), 2.0, foreach=flag)
        for p, e in zip(params, clipped(grads, 2.0, 2)[0]):
            np.testing.assert_allclose(p.grad.numpy(), e, rtol=1e-13)
    cell = nn.Linear(2, 2)  # no gradient at all: a float32 0
    total = clip_grad_norm_(cell.parameters(), 1.0)
    assert total.dtype == kiln.float32 and total.item() == 0.0
    # "inf" as a string, as PyTorch takes float(norm_type)
    params, grads = make_params()
    total = clip_grad_norm_(params, 1.0, "inf")
    expected, expected_total = clipped(grads, 1.0, math.inf)
    assert total.item() == expected_total
    for p, e in zip(params, expected):
        np.testing.assert_allclose(p.grad.numpy(), e, rtol=1e-13)


def test_clip_grad_norm_of_non_finite_gradients():
    for bad in (math.inf, math.nan):
        params, grads = make_params()
        params[0].grad[0, 0] = bad
        grads[0][0, 0] = bad
        # refused before any gradient changes
        with raises(kiln.KilnValueError, match=rf"clip_grad_norm_: the total norm of order 2.0 "
                                               rf"of the gradients is non-finite \({bad}\)"):
            clip_grad_norm_(params, 1.0, error_if_nonfinite=True)
        for p, g in zip(params, grads):
            np.testing.assert_array_equal(p.grad.numpy(), g)
        # scaled by it anyway: by 0 for an infinite total (inf * 0 is NaN), NaN for a NaN one
        total = clip_grad_norm_(params, 1.0)
        assert str(total.item()) == str(bad)
        with np.errstate(invalid="ignore"):
            for p, g in zip(params, grads):
                np.testing.assert_array_equal(p.grad.numpy(), g * (0.0 if bad == math.inf else bad))


@pytest.mark.parametrize("clip_value", [0.5, 2, 0.0, 1e9])
def test_clip_grad_value_in_place(clip_value):
    params, grads = make_params()
    held = params[1].grad
    assert clip_grad_value_(params, clip_value) is None
    for p, g in zip(params, grads):
        np.testing.assert_array_equal(p.grad.numpy(), np.clip(g, -clip_value, clip_value))
    assert params[2].grad is None
    np.testing.assert_array_equal(held.numpy(), params[1].grad.numpy())
    params, grads = make_params(seed=3)
    clip_grad_value_(params[0], clip_value, foreach=True)
    np.testing.assert_array_equal(params[0].grad.numpy(), np.clip(grads[0], -clip_value,
                                                                  clip_value))


def test_value_forms_return_new_tensors():
    params, grads = make_params()
    given = [p.grad for p in params]  # the last is None
    out, total = clip_grad_norm(given, 0.5, norm_type=3)
    expected, expected_total = clipped(grads, 0.5, 3)
    assert isinstance(out, tuple) and out[2] is None
    np.testing.assert_allclose(total.numpy(), expected_total, rtol=1e-13)
    for c, e in zip(out, expected):
        np.testing.assert_allclose(c.numpy(), e, rtol=1e-13)
    for g, a in zip(given, grads):  # the inputs are left as they are
        np.testing.assert_array_equal(g.numpy(), a)
    one, one_total = clip_grad_norm(given[0], 0.5)
    assert isinstance(one, kiln.Tensor)
    np.testing.assert_allclose(one_total.numpy(), np.linalg.norm(grads[0]), rtol=1e-13)
    values = clip_grad_value(given, 0.5)
    assert isinstance(values, tuple) and values[2] is None
    for c, a in zip(values, grads):
        np.testing.assert_array_equal(c.numpy(), np.clip(a, -0.5, 0.5))
    assert isinstance(clip_grad_value(given[0], 0.5), kiln.Tensor)
    # 16-bit gradients stay 16-bit
    assert clip_grad_norm([kiln.tensor(grads[0], dtype=kiln.float16)], 0.5)[0][0].dtype == \
        kiln.float16


@pytest.mark.parametrize("clip", ["norm", "value"])
def test_jitted_step_with_the_value_form_matches_eager_and_numpy(clip):
    # The same SGD training, jitted with clip_grad_norm / clip_grad_value on value gradients,
    # eager with clip_grad_norm_ / clip_grad_value_ on .grad, and in NumPy.
    rng = np.random.default_rng(4)
    w0, b0 = rng.standard_normal((1, 6)), rng.standard_normal(1)
    batches = [(rng.standard_normal((16, 6)), 3 * rng.standard_normal((16, 1)))
               for _ in range(5)]
    w, b = nn.Parameter(kiln.tensor(w0)), nn.Parameter(kiln.tensor(b0))
    ew, eb = nn.Parameter(kiln.tensor(w0)), nn.Parameter(kiln.tensor(b0))
    opt, eager_opt = optim.SGD([w, b], lr=0.1), optim.SGD([ew, eb], lr=0.1)

    def loss_of(x, y, weight, bias):
        return mint.mean(mint.square(mint.linear(x, weight, bias) - y))

    @kiln.jit
    def train_step(x, y):
        loss, grads = kiln.value_and_grad(lambda x, y: loss_of(x, y, w, b), None,
                                          opt.parameters)(x, y)
        grads, total = clip_grad_norm(grads, 0.5) if clip == "norm" else \
            (clip_grad_value(grads, 0.2), loss)
        opt(grads)
        return loss, total

    nw, nb = w0.copy(), b0.copy()
    for x, y in batches:
        loss, total = train_step(kiln.tensor(x), kiln.tensor(y))
        eager_opt.zero_grad()
        eager_loss = loss_of(kiln.tensor(x), kiln.tensor(y), ew, eb)
        eager_loss.backward()
        if clip == "norm":
            eager_total = clip_grad_norm_([ew, eb], 0.5)
            np.testing.assert_allclose(total.numpy(), eager_total.numpy(), rtol=1e-12)
        else:
            clip_grad_value_([ew, eb], 0.2)
        eager_opt.step()
        np.testing.assert_allclose(loss.numpy(), eager_loss.detach().numpy(), rtol=1e-12)
        # NumPy: d mean((x w^T + b - y)^2) = 2 (x w^T + b - y) / n
        d = 2 * (x @ nw.T + nb - y) / len(y)
        gw, gb = d.T @ x, d.sum(axis=0)
        if clip == "norm":
            scale = min(0.5 / (np.sqrt((gw ** 2).sum() + (gb ** 2).sum()) + 1e-6), 1.0)
            assert scale < 1.0  # the clipping did scale
            gw, gb = gw * scale, gb * scale
        else:
            assert np.abs(gw).max() > 0.2  # the clipping did clamp
            gw, gb = np.clip(gw, -0.2, 0.2), np.clip(gb, -0.2, 0.2)
        nw, nb = nw - 0.1 * gw, nb - 0.1 * gb
    assert train_step.cache_info().misses == 1
    for jitted, eager, reference in ((w, ew, nw), (b, eb, nb)):
        np.testing.assert_allclose(jitted.numpy(), eager.detach().numpy(), rtol=1e-12)
        np.testing.assert_allclose(jitted.numpy(), reference, rtol=1e-11)


def test_clip_grad_norm_in_place_in_a_jitted_function():
    params, grads = make_params()
    step = kiln.jit(lambda: clip_grad_norm_(params, 1.0))
    for _ in range(2):
        grads, expected_total = clipped(grads, 1.0, 2)
        total = step()
        np.testing.assert_allclose(total.numpy(), expected_total, rtol=1e-13)
        for p, e in zip(params, grads):
            np.testing.assert_allclose(p.grad.numpy(), e, rtol=1e-13)
    assert step.cache_info().misses == 1


CLIP_ERRORS = [
    (lambda ps: clip_grad_norm_(ps, -1.0), kiln.KilnValueError,
     "clip_grad_norm_: max_norm must be >= 0, got -1.0"),
    (lambda ps: clip_grad_norm_(ps, float("nan")), kiln.KilnValueError,
     "clip_grad_norm_: max_norm must be >= 0, got nan"),
    (lambda ps: clip_grad_norm_(ps, "1.0"), kiln.KilnTypeError,
     "clip_grad_norm_: max_norm must be a real number, got '1.0'"),
    (lambda ps: clip_grad_norm_(ps, 1.0, norm_type="fro"), kiln.KilnTypeError,
     "clip_grad_norm_: norm_type must be a real number"),
    (lambda ps: clip_grad_norm_(ps, 1.0, norm_type=float("nan")), kiln.KilnValueError,
     "clip_grad_norm_: norm_type must be a number, got nan"),
    (lambda ps: clip_grad_norm_(ps, 1.0, foreach="yes"), kiln.KilnTypeError,
     "clip_grad_norm_: foreach must be None, True or False, got 'yes'"),
    (lambda ps: clip_grad_norm_(3, 1.0), kiln.KilnTypeError,
     "clip_grad_norm_: parameters must be a tensor or an iterable of tensors, got int"),
    (lambda ps: clip_grad_norm_([ps[0], 1.0], 1.0), kiln.KilnTypeError,
     r"clip_grad_norm_: parameters\[1\] is a float, expected a kiln tensor"),
    (lambda ps: clip_grad_value_(ps, -0.5), kiln.KilnValueError,
     "clip_grad_value_: clip_value must be >= 0, got -0.5"),
    (lambda ps: clip_grad_value_(ps, None), kiln.KilnTypeError,
     "clip_grad_value_: clip_value must be a real number, got None"),
    (lambda ps: clip_grad_value_(ps, 1.0, foreach=1), kiln.KilnTypeError,
     "clip_grad_value_: foreach must be None, True or False, got 1"),
    (lambda ps: clip_grad_norm([p.grad for p in ps[:2]] + [np.ones(2)], 1.0), kiln.KilnTypeError,
     r"clip_grad_norm: grads\[2\] is a ndarray, expected a kiln tensor or None"),
    (lambda ps: clip_grad_norm(None, 1.0), kiln.KilnTypeError,
     r"clip_grad_norm: grads must be a tensor or a tuple / list of tensors \(or None\), got "
     r"NoneType"),
    (lambda ps: clip_grad_norm([p.grad for p in ps[:2]], 1.0, norm_type=True), kiln.KilnTypeError,
     "clip_grad_norm: norm_type must be a real number"),
    (lambda ps: clip_grad_value([p.grad for p in ps[:2]], -1), kiln.KilnValueError,
     "clip_grad_value: clip_value must be >= 0, got -1"),
]


@pytest.mark.parametrize("call, error, message", CLIP_ERRORS,
                         ids=[f"{i}-{e[2][:30]}" for i, e in enumerate(CLIP_ERRORS)])
def test_clip_errors_change_nothing(call, error, message):
    params, grads = make_params()
    with raises(error, match=message):
        call(params)
    for p, g in zip(params, grads):
        np.testing.assert_array_equal(p.grad.numpy(), g)
