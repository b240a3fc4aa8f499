"""kiln.optim.lr_scheduler against torch.optim.lr_scheduler: StepLR, MultiStepLR, ExponentialLR,
LambdaLR, LinearLR, ConstantLR, OneCycleLR, CosineAnnealingLR and ReduceLROnPlateau give PyTorch's
rates over 36 steps of an optimizer with three parameter groups, resume from a state_dict saved
mid-schedule, and drive a kiln.jit-compiled training step (one trace serving every rate);
OneCycleLR's cycled momentum (SGD's and RMSprop's momentum, Adam's beta1) gives PyTorch's momenta
and parameters over a cycle, eagerly and jitted; the arguments PyTorch refuses, and the ones Kiln
refuses beyond it, are errors naming the argument."""

import math
import pickle

import numpy as np
import pytest

import kiln
from conftest import raises, sgd_at_rates, torch_sgd_at_rates
from kiln import nn
from kiln.optim import lr_scheduler
# The shared setup and data of the NumPy references, which run without PyTorch.
from test_schedulers_and_clipping_reference import (BASES, CYCLE_RUNS, MOMENTUM_CYCLES, PLATEAUS,
                                                    STEPS, Warmup, momenta, momentum_cycle,
                                                    per_step_factor, plateau_metrics)

# The references are PyTorch's (not installed where only the test dependencies are).
torch = pytest.importorskip("torch")

mint = kiln.mint


def torch_step(opt, sched, *args):
    opt.step()  # no gradients: nothing moves, but PyTorch no longer warns about the order
    sched.step(*args)


# Each builds a scheduler from a module (kiln's or torch's lr_scheduler) and an optimizer.
SCHEDULES = {
    "step": lambda m, opt: m.StepLR(opt, step_size=7, gamma=0.5),
    "step-default-gamma": lambda m, opt: m.StepLR(opt, 3),
    "multistep": lambda m, opt: m.MultiStepLR(opt, milestones=[0, 5, 12, 20], gamma=0.3),
    "multistep-repeated": lambda m, opt: m.MultiStepLR(opt, [4, 11, 11, 30]),
    "exponential": lambda m, opt: m.ExponentialLR(opt, gamma=0.9),
    "exponential-growth": lambda m, opt: m.ExponentialLR(opt, 1.05),
    "lambda": lambda m, opt: m.LambdaLR(opt, lambda t: 1 / (t + 1)),
    "lambda-per-group": lambda m, opt: m.LambdaLR(
        opt, [lambda t: 0.95 ** t, per_step_factor, lambda t: (t % 5) / 5]),
    "multiplicative": lambda m, opt: m.MultiplicativeLR(opt, lambda t: 0.95 if t % 3 else 1.1),
    "linear": lambda m, opt: m.LinearLR(opt),
    "linear-decay": lambda m, opt: m.LinearLR(opt, start_factor=1.0, end_factor=0.0,
                                              total_iters=30),
    "linear-partial": lambda m, opt: m.LinearLR(opt, 0.25, 0.5, 10),
    "constant": lambda m, opt: m.ConstantLR(opt),
    "constant-half": lambda m, opt: m.ConstantLR(opt, factor=0.5, total_iters=12),
    "cosine": lambda m, opt: m.CosineAnnealingLR(opt, T_max=20, eta_min=0.01),
    "one-cycle": lambda m, opt: m.OneCycleLR(opt, max_lr=1.0, total_steps=40,
                                             cycle_momentum=False),
    "one-cycle-per-group": lambda m, opt: m.OneCycleLR(
        opt, max_lr=[1.0, 0.5, 2.0], epochs=4, steps_per_epoch=10, pct_start=0.25,
        anneal_strategy="linear", cycle_momentum=False, div_factor=10.0, final_div_factor=100.0),
    "one-cycle-three-phase": lambda m, opt: m.OneCycleLR(
        opt, max_lr=0.5, total_steps=50, pct_start=0.2, cycle_momentum=False, three_phase=True),
}


def assert_rates(kiln_lrs, torch_lrs):
    assert kiln_lrs == pytest.approx(torch_lrs, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("name", SCHEDULES)
def test_rates_match_torch(name):
    make = SCHEDULES[name]
    opt, topt = sgd_at_rates(BASES), torch_sgd_at_rates(torch, BASES)
    sched, tsched = make(lr_scheduler, opt), make(torch.optim.lr_scheduler, topt)
    for _ in range(STEPS):
        assert_rates(sched.get_last_lr(), tsched.get_last_lr())
        assert [g["lr"] for g in opt.param_groups] == sched.get_last_lr()
        sched.step()
        torch_step(topt, tsched)
    assert sched.last_epoch == tsched.last_epoch == STEPS
    assert [g["initial_lr"] for g in opt.param_groups] == \
        pytest.approx([g["initial_lr"] for g in topt.param_groups], rel=1e-15)


@pytest.mark.parametrize("name", SCHEDULES)
def test_state_dict_resumes_mid_schedule(name):
    # A checkpoint after 13 steps, pickled, loaded into a scheduler built afresh (which set the
    # rates of step 0), continues as the uninterrupted torch schedule does.
    make = SCHEDULES[name]
    opt, topt = sgd_at_rates(BASES), torch_sgd_at_rates(torch, BASES)
    sched, tsched = make(lr_scheduler, opt), make(torch.optim.lr_scheduler, topt)
    for _ in range(13):
        sched.step()
        torch_step(topt, tsched)
    saved = pickle.loads(pickle.dumps(sched.state_dict()))
    assert "optimizer" not in saved and saved["last_epoch"] == 13
    resumed_opt = sgd_at_rates(BASES)
    resumed = make(lr_scheduler, resumed_opt)
    resumed.load_state_dict(saved)
    assert_rates([g["lr"] for g in resumed_opt.param_groups], tsched.get_last_lr())
    for _ in range(STEPS - 13):
        resumed.step()
        torch_step(topt, tsched)
        assert_rates(resumed.get_last_lr(), tsched.get_last_lr())
        assert [g["lr"] for g in resumed_opt.param_groups] == resumed.get_last_lr()


@pytest.mark.parametrize("name", SCHEDULES)
def test_scheduled_rates_reach_a_jitted_step(name):
    make = SCHEDULES[name]
    rng = np.random.default_rng(7)
    opt, topt = sgd_at_rates(BASES), torch_sgd_at_rates(torch, BASES)
    sched, tsched = make(lr_scheduler, opt), make(torch.optim.lr_scheduler, topt)
    step = kiln.jit(lambda *grads: opt(grads))
    expected = [np.zeros(3) for _ in opt.parameters]
    for _ in range(STEPS):
        grads = [rng.standard_normal(3) for _ in opt.parameters]
        step(*(kiln.tensor(g) for g in grads))
        expected = [e - lr * g for e, lr, g in zip(expected, tsched.get_last_lr(), grads)]
        sched.step()
        torch_step(topt, tsched)
    assert step.cache_info().misses == 1  # one trace served every scheduled rate
    for p, e in zip(opt.parameters, expected):
        np.testing.assert_allclose(p.numpy(), e, rtol=1e-12, atol=1e-15)


# ---------------------------------------------------------------------------------------------
# LambdaLR


def test_lambda_state_dict_saves_callable_objects_but_not_functions():
    opt, topt = sgd_at_rates(BASES), torch_sgd_at_rates(torch, BASES)
    fns, tfns = [Warmup(), per_step_factor, Warmup()], [Warmup(), per_step_factor, Warmup()]
    sched = lr_scheduler.LambdaLR(opt, fns)
    tsched = torch.optim.lr_scheduler.LambdaLR(topt, tfns)
    fns[2].scale = tfns[2].scale = 0.5
    for _ in range(4):
        sched.step()
        torch_step(topt, tsched)
    saved = sched.state_dict()
    assert saved["lr_lambdas"] == tsched.state_dict()["lr_lambdas"]
    assert saved["lr_lambdas"] == [{"scale": 1.0}, None, {"scale": 0.5}]
    fresh = [Warmup(), per_step_factor, Warmup()]
    resumed = lr_scheduler.LambdaLR(sgd_at_rates(BASES), fresh)
    resumed.load_state_dict(saved)
    assert fresh[2].scale == 0.5 and "lr_lambdas" in saved  # the dict given is left whole
    for _ in range(8):
        resumed.step()
        torch_step(topt, tsched)
        assert_rates(resumed.get_last_lr(), tsched.get_last_lr())


# ---------------------------------------------------------------------------------------------
# OneCycleLR


def test_one_cycle_ends_at_min_lr_and_stops_at_total_steps():
    # PyTorch extrapolates at step total_steps: past min_lr with "cos", below 0 with "linear",
    # which Kiln's optimizers refuse. Kiln's schedule ends at min_lr there.
    for strategy in ("cos", "linear"):
        opt, topt = sgd_at_rates(BASES), torch_sgd_at_rates(torch, BASES)
        args = dict(max_lr=1.0, total_steps=20, anneal_strategy=strategy, cycle_momentum=False)
        sched = lr_scheduler.OneCycleLR(opt, **args)
        tsched = torch.optim.lr_scheduler.OneCycleLR(topt, **args)
        for _ in range(19):
            sched.step()
            torch_step(topt, tsched)
        assert_rates(sched.get_last_lr(), tsched.get_last_lr())
        sched.step()
        torch_step(topt, tsched)
        min_lr = 1.0 / 25 / 1e4
        assert sched.get_last_lr() == pytest.approx([min_lr] * 3, rel=1e-12)
        assert (tsched.get_last_lr()[0] < 0) == (strategy == "linear")
        assert [g["min_lr"] for g in opt.param_groups] == \
            pytest.approx([g["min_lr"] for g in topt.param_groups], rel=1e-15)
        with raises(kiln.KilnValueError, match="OneCycleLR: cannot step to step 21: the cycle "
                                               "has total_steps=20"):
            sched.step()
        with pytest.raises(ValueError, match="Tried to step 21 times"):
            torch_step(topt, tsched)
        assert sched.last_epoch == 20 and sched.get_last_lr()[0] == pytest.approx(min_lr)


def test_one_cycle_phase_of_no_length_is_at_its_end_rate():
    # pct_start * total_steps == 1: the rise ends at step 0, where PyTorch divides by zero.
    with pytest.raises(ZeroDivisionError):
        torch.optim.lr_scheduler.OneCycleLR(torch_sgd_at_rates(torch, BASES), max_lr=1.0,
                                            total_steps=10, pct_start=0.1, cycle_momentum=False)
    opt = sgd_at_rates(BASES)
    sched = lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10, pct_start=0.1)
    assert sched.get_last_lr() == [1.0] * 3
    sched.step()
    assert sched.get_last_lr() == pytest.approx([1.0 / 25e4 + (1.0 - 1.0 / 25e4)
                                                 * (1 + math.cos(math.pi / 9)) / 2] * 3)


def torch_momentum_cycle(name):
    """PyTorch's parameters, optimizer and scheduler for MOMENTUM_CYCLES[name]."""
    cls, opt_kwargs, kwargs = MOMENTUM_CYCLES[name]
    params = [torch.zeros(3, dtype=torch.float64, requires_grad=True) for _ in BASES]
    opt = getattr(torch.optim, cls.__name__)([{"params": [p]} for p in params], **opt_kwargs,
                                             foreach=False)
    return params, opt, torch.optim.lr_scheduler.OneCycleLR(opt, cycle_momentum=True, **kwargs)


@pytest.mark.parametrize("name, jit", CYCLE_RUNS)
def test_one_cycle_momentum_matches_torch(name, jit):
    # The rates, momenta (beta1 for Adam) and parameters of every step of the cycle, from a
    # jitted step traced once too (past the cycle's end PyTorch extrapolates: not compared).
    rng = np.random.default_rng(8)
    params, opt, sched, _, _ = momentum_cycle(name)
    tparams, topt, tsched = torch_momentum_cycle(name)
    assert [(g["base_momentum"], g["max_momentum"]) for g in opt.param_groups] == \
        [(g["base_momentum"], g["max_momentum"]) for g in topt.param_groups]
    step = kiln.jit(lambda *grads: opt(grads)) if jit else (lambda *grads: opt(grads))
    for t in range(MOMENTUM_CYCLES[name][2]["total_steps"]):
        assert_rates(sched.get_last_lr(), tsched.get_last_lr())
        assert_rates(momenta(opt), momenta(topt))
        assert [g.get("betas", (0, 0))[1] for g in opt.param_groups] == \
            [g.get("betas", (0, 0))[1] for g in topt.param_groups]
        grads = [rng.standard_normal(3) for _ in params]
        step(*(kiln.tensor(g) for g in grads))
        for p, g in zip(tparams, grads):
            p.grad = torch.tensor(g)
        topt.step()
        for p, tp in zip(params, tparams):
            np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-12, atol=1e-14,
                                       err_msg=f"step {t}")
        sched.step()
        tsched.step()
    if jit:
        assert step.cache_info().misses == 1


def test_one_cycle_momentum_resumes_from_checkpoints_as_torch():
    # The optimizer's and the scheduler's state dicts saved mid-cycle, loaded into new ones built
    # afresh (at the momentum of step 0), carry on in a jitted step as PyTorch's uninterrupted run.
    cls, opt_kwargs, kwargs = MOMENTUM_CYCLES["adam-three-phase"]
    rng = np.random.default_rng(9)
    params, opt, sched, _, _ = momentum_cycle("adam-three-phase")
    tparams, topt, tsched = torch_momentum_cycle("adam-three-phase")
    step = opt
    for t in range(29):
        if t == 13:
            saved = pickle.loads(pickle.dumps((opt.state_dict(), sched.state_dict())))
            opt = cls([{"params": [p]} for p in params], **opt_kwargs)
            sched = lr_scheduler.OneCycleLR(opt, cycle_momentum=True, **kwargs)
            opt.load_state_dict(saved[0])
            sched.load_state_dict(saved[1])
            step = kiln.jit(lambda grads: opt(grads))
        grads = [rng.standard_normal(3) for _ in params]
        step(tuple(kiln.tensor(g) for g in grads))
        for p, g in zip(tparams, grads):
            p.grad = torch.tensor(g)
        topt.step()
        sched.step()
        tsched.step()
        assert_rates(momenta(opt), momenta(topt))
    assert step.cache_info().misses == 1
    for p, tp in zip(params, tparams):
        np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_one_cycle_momentum_of_an_sgd_built_without_momentum_matches_torch():
    # PyTorch's SGD has "momentum" (0) in its defaults: the cycle turns it on.
    rng = np.random.default_rng(10)
    opt, topt = sgd_at_rates(BASES), torch_sgd_at_rates(torch, BASES)
    args = dict(max_lr=1.0, total_steps=20, cycle_momentum=True)
    sched = lr_scheduler.OneCycleLR(opt, **args)
    tsched = torch.optim.lr_scheduler.OneCycleLR(topt, **args)
    tparams = [g["params"][0] for g in topt.param_groups]
    for _ in range(19):
        assert_rates(momenta(opt), momenta(topt))
        grads = [rng.standard_normal(3) for _ in BASES]
        opt(tuple(kiln.tensor(g) for g in grads))
        for p, g in zip(tparams, grads):
            p.grad = torch.tensor(g)
        topt.step()
        sched.step()
        tsched.step()
    for p, tp in zip(opt.parameters, tparams):
        np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_one_cycle_cycles_the_momentum_by_default_as_torch_does():
    opt, topt = sgd_at_rates(BASES), torch_sgd_at_rates(torch, BASES)
    sched = lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=20)
    tsched = torch.optim.lr_scheduler.OneCycleLR(topt, max_lr=1.0, total_steps=20)
    assert momenta(opt) == pytest.approx([0.95] * 3)
    for _ in range(10):
        sched.step()
        torch_step(topt, tsched)
        assert_rates(momenta(opt), momenta(topt))
    assert momenta(opt)[0] > 0.85  # on its way back up


def test_one_cycle_momentum_needs_an_optimizer_with_one():
    with raises(kiln.KilnValueError, match="OneCycleLR: cycle_momentum=True needs an optimizer "
                                           "with a momentum"):
        lr_scheduler.OneCycleLR(kiln.optim.Adagrad(sgd_at_rates(BASES).parameters), max_lr=1.0,
                                total_steps=10, cycle_momentum=True)
    with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
        torch.optim.lr_scheduler.OneCycleLR(torch.optim.Adagrad([torch.zeros(3)]), max_lr=1.0,
                                            total_steps=10, cycle_momentum=True)


# ---------------------------------------------------------------------------------------------
# ReduceLROnPlateau


@pytest.mark.parametrize("name", PLATEAUS)
def test_plateau_matches_torch(name):
    kwargs = PLATEAUS[name]
    opt, topt = sgd_at_rates(BASES), torch_sgd_at_rates(torch, BASES)
    sched = lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
    tsched = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **kwargs)
    assert sched.get_last_lr() == list(BASES) and "initial_lr" not in opt.param_groups[0]
    for i, metric in enumerate(plateau_metrics()):
        # a Python number, a 0-d tensor (a reduction's result) or a one-element tensor
        given = [metric, kiln.tensor(metric), kiln.tensor([metric])][i % 3]
        sched.step(given)
        torch_step(topt, tsched, metric)
        assert_rates(sched.get_last_lr(), tsched.get_last_lr())
        assert [g["lr"] for g in opt.param_groups] == sched.get_last_lr()
        assert (sched.num_bad_epochs, sched.cooldown_counter, sched.last_epoch) == \
            (tsched.num_bad_epochs, tsched.cooldown_counter, tsched.last_epoch)
    assert sched.get_last_lr() != list(BASES)  # it did lower the rates


def test_plateau_state_dict_resumes():
    kwargs = PLATEAUS["max-abs-cooldown"]
    metrics = plateau_metrics()
    opt, topt = sgd_at_rates(BASES), torch_sgd_at_rates(torch, BASES)
    sched = lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
    tsched = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **kwargs)
    for metric in metrics[:20]:
        sched.step(metric)
        torch_step(topt, tsched, metric)
    saved = pickle.loads(pickle.dumps(sched.state_dict()))
    resumed_opt = sgd_at_rates(BASES)
    resumed = lr_scheduler.ReduceLROnPlateau(resumed_opt, **kwargs)
    resumed.load_state_dict(saved)
    assert_rates([g["lr"] for g in resumed_opt.param_groups], tsched.get_last_lr())
    for metric in metrics[20:]:
        resumed.step(metric)
        torch_step(topt, tsched, metric)
        assert_rates(resumed.get_last_lr(), tsched.get_last_lr())


def test_plateau_rates_reach_a_jitted_step():
    rng = np.random.default_rng(3)
    kwargs = PLATEAUS["min-rel-patience-2"]
    opt, topt = sgd_at_rates(BASES), torch_sgd_at_rates(torch, BASES)
    sched = lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
    tsched = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **kwargs)
    step = kiln.jit(lambda *grads: opt(grads))
    expected = [np.zeros(3) for _ in opt.parameters]
    for metric in plateau_metrics():
        grads = [rng.standard_normal(3) for _ in opt.parameters]
        step(*(kiln.tensor(g) for g in grads))
        expected = [e - lr * g for e, lr, g in zip(expected, tsched.get_last_lr(), grads)]
        sched.step(metric)
        torch_step(topt, tsched, metric)
    assert step.cache_info().misses == 1
    assert tsched.get_last_lr() != list(BASES)
    for p, e in zip(opt.parameters, expected):
        np.testing.assert_allclose(p.numpy(), e, rtol=1e-12, atol=1e-15)


def test_plateau_groups_added_later():
    # One min_lr covers a group added after the scheduler was built; a list of them cannot.
    for min_lr, torch_error in ((0.01, None), ([0.01] * 3, RuntimeError)):
        opt, topt = sgd_at_rates(BASES), torch_sgd_at_rates(torch, BASES)
        sched = lr_scheduler.ReduceLROnPlateau(opt, patience=0, min_lr=min_lr)
        tsched = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, patience=0, min_lr=min_lr)
        opt.add_param_group({"params": [nn.Parameter(mint.zeros(1))], "lr": 0.5})
        topt.add_param_group({"params": [torch.zeros(1, requires_grad=True)], "lr": 0.5})
        sched.step(1.0)
        torch_step(topt, tsched, 1.0)
        if torch_error is None:
            sched.step(2.0)
            torch_step(topt, tsched, 2.0)
            assert_rates(sched.get_last_lr(), tsched.get_last_lr())
            assert len(sched.get_last_lr()) == 4
        else:
            with raises(kiln.KilnValueError, match="the optimizer has 4 parameter groups, but "
                                                   "min_lr was given for 3"):
                sched.step(2.0)
            with pytest.raises(torch_error, match="differs"):
                torch_step(topt, tsched, 2.0)
            assert sched.last_epoch == 1 and opt.param_groups[3]["lr"] == 0.5


# ---------------------------------------------------------------------------------------------
# Arguments
#
# (kiln module or torch module, optimizer) -> scheduler, the Kiln error and message, and whether
# PyTorch refuses it too (the others are refused by Kiln only: PyTorch's schedule would divide
# by zero, go negative or ignore them).

ERRORS = [
    (lambda m, o: m.StepLR(o, 5, gamma=-0.1), kiln.KilnValueError,
     r"StepLR: invalid gamma -0.1, expected gamma >= 0.0", False),
    (lambda m, o: m.StepLR(o, 5, gamma="0.1"), kiln.KilnTypeError,
     r"StepLR: gamma must be a real number, got '0.1'", False),
    (lambda m, o: m.StepLR(o, 0), kiln.KilnValueError,
     r"StepLR: step_size must be at least 1, got 0", False),
    (lambda m, o: m.StepLR(o, 2.5), kiln.KilnTypeError,
     r"StepLR: step_size must be an int, got float 2.5", False),
    (lambda m, o: m.MultiStepLR(o, [10, 5]), kiln.KilnValueError,
     r"MultiStepLR: milestones must be in increasing order, got \[10, 5\]", False),
    (lambda m, o: m.MultiStepLR(o, 10), kiln.KilnTypeError,
     r"MultiStepLR: milestones must be a list of step indices, got int 10", True),
    (lambda m, o: m.MultiStepLR(o, [-1, 3]), kiln.KilnValueError,
     r"MultiStepLR: a milestone must be at least 0, got -1", False),
    (lambda m, o: m.MultiStepLR(o, [3], gamma=float("nan")), kiln.KilnValueError,
     r"MultiStepLR: invalid gamma nan", False),
    (lambda m, o: m.ExponentialLR(o, None), kiln.KilnTypeError,
     r"ExponentialLR: gamma must be a real number, got None", False),
    (lambda m, o: m.ExponentialLR(o, -0.9), kiln.KilnValueError,
     r"ExponentialLR: invalid gamma -0.9, expected gamma >= 0.0", False),
    (lambda m, o: m.LambdaLR(o, [lambda t: 1.0] * 2), kiln.KilnValueError,
     r"LambdaLR: expected 3 lr_lambdas \(one per parameter group\), got 2", True),
    (lambda m, o: m.LambdaLR(o, 0.5), kiln.KilnTypeError,
     r"LambdaLR: lr_lambda must be a callable or a list of one per parameter group, got "
     r"float 0.5", True),
    (lambda m, o: m.LinearLR(o, start_factor=0), kiln.KilnValueError,
     r"LinearLR: start_factor must be in \(0.0, 1.0\], got 0", True),
    (lambda m, o: m.LinearLR(o, end_factor=1.5), kiln.KilnValueError,
     r"LinearLR: end_factor must be in \[0.0, 1.0\], got 1.5", True),
    (lambda m, o: m.LinearLR(o, total_iters=0), kiln.KilnValueError,
     r"LinearLR: total_iters must be at least 1, got 0", False),
    (lambda m, o: m.ConstantLR(o, factor=1.5), kiln.KilnValueError,
     r"ConstantLR: factor must be in \[0.0, 1.0\], got 1.5", True),
    (lambda m, o: m.ConstantLR(o, total_iters=-2), kiln.KilnValueError,
     r"ConstantLR: total_iters must be at least 1, got -2", False),
    (lambda m, o: m.OneCycleLR(o, 1.0, cycle_momentum=False), kiln.KilnValueError,
     r"OneCycleLR: expected total_steps, or both epochs and steps_per_epoch", True),
    (lambda m, o: m.OneCycleLR(o, 1.0, total_steps=0, cycle_momentum=False),
     kiln.KilnValueError, r"OneCycleLR: total_steps must be at least 1, got 0", True),
    (lambda m, o: m.OneCycleLR(o, 1.0, epochs=0, steps_per_epoch=3, cycle_momentum=False),
     kiln.KilnValueError, r"OneCycleLR: epochs must be at least 1, got 0", True),
    (lambda m, o: m.OneCycleLR(o, 1.0, 10, pct_start=1.5, cycle_momentum=False),
     kiln.KilnValueError, r"OneCycleLR: pct_start must be in \[0.0, 1.0\], got 1.5", True),
    (lambda m, o: m.OneCycleLR(o, 1.0, 10, anneal_strategy="cosine", cycle_momentum=False),
     kiln.KilnValueError, r"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got "
                          r"'cosine'", True),
    (lambda m, o: m.OneCycleLR(o, 1.0, 10, cycle_momentum=False, div_factor=0),
     kiln.KilnValueError, r"OneCycleLR: div_factor must be > 0, got 0", True),
    (lambda m, o: m.OneCycleLR(o, [1.0, 2.0], 10, cycle_momentum=False), kiln.KilnValueError,
     r"OneCycleLR: expected 3 values of max_lr \(one per parameter group\), got 2", True),
    (lambda m, o: m.OneCycleLR(o, [1.0, -2.0, 1.0], 10, cycle_momentum=False),
     kiln.KilnValueError, r"OneCycleLR: invalid max_lr\[1\] -2.0, expected max_lr\[1\] >= 0.0",
     False),
    (lambda m, o: m.ReduceLROnPlateau(o, mode="minimum"), kiln.KilnValueError,
     r"ReduceLROnPlateau: mode must be 'min' or 'max', got 'minimum'", True),
    (lambda m, o: m.ReduceLROnPlateau(o, threshold_mode="relative"), kiln.KilnValueError,
     r"ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs', got 'relative'", True),
    (lambda m, o: m.ReduceLROnPlateau(o, factor=1.0), kiln.KilnValueError,
     r"ReduceLROnPlateau: factor must be < 1 \(it multiplies the rate to lower it\), got 1.0",
     True),
    (lambda m, o: m.ReduceLROnPlateau(o, factor=-0.1), kiln.KilnValueError,
     r"ReduceLROnPlateau: invalid factor -0.1, expected factor >= 0.0", False),
    (lambda m, o: m.ReduceLROnPlateau(o, patience=-1), kiln.KilnValueError,
     r"ReduceLROnPlateau: patience must be at least 0, got -1", False),
    (lambda m, o: m.ReduceLROnPlateau(o, cooldown=1.5), kiln.KilnTypeError,
     r"ReduceLROnPlateau: cooldown must be an int, got float 1.5", False),
    (lambda m, o: m.ReduceLROnPlateau(o, min_lr=[0.0, 0.1]), kiln.KilnValueError,
     r"ReduceLROnPlateau: expected 3 values of min_lr \(one per parameter group\), got 2",
     True),
    (lambda m, o: m.ReduceLROnPlateau(o, min_lr=-0.1), kiln.KilnValueError,
     r"ReduceLROnPlateau: invalid min_lr -0.1, expected min_lr >= 0.0", False),
    (lambda m, o: m.ReduceLROnPlateau(o, threshold=-1e-4), kiln.KilnValueError,
     r"ReduceLROnPlateau: invalid threshold -0.0001, expected threshold >= 0.0", False),
    (lambda m, o: m.ReduceLROnPlateau(o, eps=None), kiln.KilnTypeError,
     r"ReduceLROnPlateau: eps must be a real number, got None", False),
]


@pytest.mark.parametrize("make, error, message, torch_refuses", ERRORS,
                         ids=[f"{i}-{e[2].split(':')[0]}" for i, e in enumerate(ERRORS)])
def test_bad_arguments_are_refused(make, error, message, torch_refuses):
    opt = sgd_at_rates(BASES)
    with raises(error, match=message):
        make(lr_scheduler, opt)
    assert [g["lr"] for g in opt.param_groups] == list(BASES)
    if torch_refuses:
        with pytest.raises((ValueError, TypeError, ZeroDivisionError)):
            make(torch.optim.lr_scheduler, torch_sgd_at_rates(torch, BASES))


@pytest.mark.parametrize("name", list(SCHEDULES) + ["plateau"])
def test_a_scheduler_needs_an_optimizer(name):
    make = SCHEDULES.get(name, lambda m, opt: m.ReduceLROnPlateau(opt))
    torch_opt = torch_sgd_at_rates(torch, BASES)
    cls = make(torch.optim.lr_scheduler, torch_opt).__class__.__name__
    with raises(kiln.KilnTypeError, match=f"{cls}: expected a kiln.optim.Optimizer, got SGD"):
        make(lr_scheduler, torch_opt)
    with pytest.raises(TypeError, match="is not an Optimizer"):
        make(torch.optim.lr_scheduler, sgd_at_rates(BASES))
