"""kiln.optim's RMSprop, Adagrad, Adamax, NAdam and RAdam against PyTorch's (its single-tensor
updates, foreach=False): several steps on random parameters and gradients in float32 and float64
with every option, parameter groups and a rate changed between steps, checkpoints in both
directions, and jitted steps, also with a momentum (beta1) set between them. The torch-free tests
are in test_optim_extra_reference.py."""

import contextlib

import numpy as np
import pytest

import kiln
from conftest import TOLERANCES, check_torch
from kiln import nn, optim

torch = pytest.importorskip("torch")

CASES = [
    ("RMSprop", {}),
    ("RMSprop", dict(lr=0.03, alpha=0.9, eps=1e-6)),
    ("RMSprop", dict(lr=0.01, momentum=0.9)),
    ("RMSprop", dict(lr=0.01, centered=True)),
    ("RMSprop", dict(lr=0.01, alpha=0.8, momentum=0.5, centered=True, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, weight_decay=0.2, maximize=True)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True, maximize=True)),
    ("Adagrad", {}),
    ("Adagrad", dict(lr=0.1, lr_decay=0.3)),
    ("Adagrad", dict(lr=0.1, initial_accumulator_value=0.5, eps=1e-6)),
    ("Adagrad", dict(lr=0.1, weight_decay=0.2)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.1, weight_decay=0.2, maximize=True)),
    ("Adamax", {}),
    ("Adamax", dict(lr=0.05, betas=(0.8, 0.99), eps=1e-6)),
    ("Adamax", dict(lr=0.05, weight_decay=0.1)),
    ("Adamax", dict(lr=0.05, weight_decay=0.1, maximize=True)),
    ("NAdam", {}),
    ("NAdam", dict(lr=0.05, betas=(0.8, 0.99), eps=1e-6, momentum_decay=0.1)),
    ("NAdam", dict(lr=0.05, momentum_decay=0.0)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", {}),  # rectified from step 6
    ("RAdam", dict(lr=0.05, betas=(0.8, 0.9), eps=1e-6)),  # rectified from step 3
    ("RAdam", dict(lr=0.05, betas=(0.9, 0.5))),  # rho_inf 3: never rectified
    ("RAdam", dict(lr=0.05, weight_decay=0.1)),
    ("RAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
]
IDS = [f"{name}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'defaults'}"
       for name, kw in CASES]
DTYPES = [kiln.float64, kiln.float32]
STEPS = 10


@contextlib.contextmanager
def torch_default_dtype(dtype):
    """PyTorch's default dtype set to ``dtype``'s for float64: its scalar state (the step count,
    NAdam's mu_product) is then float64, as Kiln's is for float64 parameters."""
    saved = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64 if dtype == kiln.float64 else torch.float32)
    try:
        yield
    finally:
        torch.set_default_dtype(saved)


class Twins:
    """The same parameters in Kiln and PyTorch, each with its optimizer (``name``; ``groups``:
    a list of dicts of hyperparameters, one group each, the parameters split between them)."""

    def __init__(self, name, kwargs, dtype, seed=0, groups=None, jit=False):
        self.rng = np.random.default_rng(seed)
        self.dtype = dtype
        self.values = [self.rng.standard_normal((3, 4)), self.rng.standard_normal(5)]
        self.kiln_params = [nn.Parameter(kiln.tensor(v, dtype=dtype)) for v in self.values]
        self.torch_params = [torch.tensor(v, dtype=getattr(torch, dtype.name),
                                          requires_grad=True) for v in self.values]

        def grouped(params):
            if groups is None:
                return params
            return [{"params": [p], **g} for p, g in zip(params, groups)]

        self.kiln_opt = getattr(optim, name)(grouped(self.kiln_params), **kwargs)
        with torch_default_dtype(dtype):
            self.torch_opt = getattr(torch.optim, name)(grouped(self.torch_params), **kwargs,
                                                        foreach=False)

        def update(*grads):
            self.kiln_opt(grads)

        self.update = kiln.jit(update) if jit else update

    def step(self, style="call"):
        grads = [self.rng.standard_normal(v.shape) for v in self.values]
        if style == "call":
            self.update(*(kiln.tensor(g, dtype=self.dtype) for g in grads))
        else:
            for p, g in zip(self.kiln_params, grads):
                p.grad = kiln.tensor(g, dtype=self.dtype)
            self.kiln_opt.step()
        for p, g in zip(self.torch_params, grads):
            p.grad = torch.tensor(g, dtype=p.dtype)
        with torch_default_dtype(self.dtype):
            self.torch_opt.step()

    def check(self, what=""):
        for i, (k, t) in enumerate(zip(self.kiln_params, self.torch_params)):
            check_torch(k, t, self.dtype, f"{what} parameter {i}")
            kiln_state, torch_state = self.kiln_opt.state[i], self.torch_opt.state[t]
            assert set(kiln_state) == set(torch_state), (set(kiln_state), set(torch_state))
            for key, value in torch_state.items():
                check_torch(kiln_state[key], value, self.dtype, f"{what} state {key} of {i}")


@pytest.mark.parametrize("style", ["call", "step"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, kwargs", CASES, ids=IDS)
def test_updates_match_torch(name, kwargs, dtype, style):
    twins = Twins(name, kwargs, dtype)
    for step in range(STEPS):
        twins.step(style)
        twins.check(f"step {step + 1}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, group_kwargs", [
    ("RMSprop", [dict(lr=0.03, momentum=0.9), dict(alpha=0.8, centered=True, maximize=True)]),
    # (not initial_accumulator_value: PyTorch fills every group's sum from its argument)
    ("Adagrad", [dict(lr_decay=0.2), dict(lr=0.3, eps=1e-6, weight_decay=0.1)]),
    ("Adamax", [dict(betas=(0.5, 0.9)), dict(lr=0.1, weight_decay=0.1, maximize=True)]),
    ("NAdam", [dict(momentum_decay=0.05), dict(weight_decay=0.1, decoupled_weight_decay=True)]),
    ("RAdam", [dict(betas=(0.8, 0.9)), dict(lr=0.1, weight_decay=0.1,
                                            decoupled_weight_decay=True)]),
], ids=["RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam"])
def test_parameter_groups_and_a_changed_rate_match_torch(name, group_kwargs, dtype):
    twins = Twins(name, dict(lr=0.05), dtype, groups=group_kwargs)
    for step in range(STEPS):
        if step == 4:  # as a scheduler sets it
            for opt in (twins.kiln_opt, twins.torch_opt):
                opt.param_groups[1]["lr"] = 0.02
        twins.step()
        twins.check(f"step {step + 1}")


def _kiln_state_dict_for_torch(state_dict, torch_opt):
    """Kiln's state dict in PyTorch's form: torch tensors, and each group with the keys PyTorch's
    optimizer holds that Kiln's does not (foreach, capturable, ...) from ``torch_opt``."""
    state = {i: {k: torch.from_numpy(v.numpy().copy()) for k, v in s.items()}
             for i, s in state_dict["state"].items()}
    groups = [{**{k: v for k, v in t.items() if k != "params"}, **g}
              for g, t in zip(state_dict["param_groups"], torch_opt.param_groups)]
    return {"state": state, "param_groups": groups}


def _torch_state_dict_for_kiln(state_dict, kiln_opt):
    """PyTorch's state dict with each group's keys cut to Kiln's (the state's torch tensors load
    as they are, converted as NumPy arrays are)."""
    groups = [{k: v for k, v in g.items() if k in kiln_group}
              for g, kiln_group in zip(state_dict["param_groups"], kiln_opt.param_groups)]
    return {"state": state_dict["state"], "param_groups": groups}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, kwargs", [
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.1, initial_accumulator_value=0.5)),
    ("Adamax", dict(lr=0.05, weight_decay=0.1)),
    ("NAdam", dict(lr=0.05, momentum_decay=0.05)),
    ("RAdam", dict(lr=0.05)),
], ids=["RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam"])
@pytest.mark.parametrize("direction", ["kiln-to-kiln", "kiln-to-torch", "torch-to-kiln"])
def test_state_dict_round_trip_resumes_as_torch(name, kwargs, dtype, direction):
    # Each side saves after 4 steps, a new optimizer of the other (or the same) library loads it,
    # and both carry on: RAdam across its switch to the rectified update at step 6.
    twins = Twins(name, kwargs, dtype)
    for _ in range(4):
        twins.step()
    if direction == "kiln-to-kiln":
        saved = twins.kiln_opt.state_dict()
        twins.kiln_opt = getattr(optim, name)(twins.kiln_params, **kwargs)
        twins.kiln_opt.load_state_dict(saved)
    elif direction == "kiln-to-torch":
        saved = _kiln_state_dict_for_torch(twins.kiln_opt.state_dict(), twins.torch_opt)
        with torch_default_dtype(dtype):
            twins.torch_opt = getattr(torch.optim, name)(twins.torch_params, **kwargs,
                                                         foreach=False)
            twins.torch_opt.load_state_dict(saved)
    else:
        saved = _torch_state_dict_for_kiln(twins.torch_opt.state_dict(), twins.kiln_opt)
        twins.kiln_opt = getattr(optim, name)(twins.kiln_params, **kwargs)
        twins.kiln_opt.load_state_dict(saved)
        assert twins.kiln_opt.state[0]["step"].dtype == (
            kiln.float64 if dtype == kiln.float64 else kiln.float32)
    for step in range(4, STEPS):
        twins.step()
        twins.check(f"step {step + 1}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, kwargs", CASES, ids=IDS)
def test_jitted_update_matches_eager_and_torch(name, kwargs, dtype):
    # One trace serves all the steps and every rate set between them: the factors from the step
    # count (RAdam's switch to the rectified update included) come from the step tensor.
    rates = np.linspace(kwargs.get("lr", 0.02), 0.005, STEPS)
    runs = []
    for jit in (False, True):
        twins = Twins(name, kwargs, dtype, jit=jit)
        for step, rate in enumerate(rates):
            for opt in (twins.kiln_opt, twins.torch_opt):
                opt.param_groups[0]["lr"] = float(rate)
            twins.step()
            twins.check(f"{'jitted' if jit else 'eager'} step {step + 1}")
        if jit:
            assert twins.update.cache_info().misses == 1
        runs.append([p.numpy().copy() for p in twins.kiln_params])
    rtol, atol = TOLERANCES[dtype]
    for jitted, eager in zip(*runs[::-1]):
        np.testing.assert_allclose(jitted, eager, rtol=rtol, atol=atol)


# Set before each step, as OneCycleLR's cycle_momentum sets it: RMSprop's momentum, the others'
# beta1. (Not 0: whether RMSprop steps with momentum is decided when a step is traced; see
# kiln.optim.SGD.)
MOMENTA = [0.9, 0.8, 0.1, 0.05, 0.6, 0.85, 0.95, 0.3, 0.9, 0.7]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, kwargs", [
    ("RMSprop", dict(lr=0.01, momentum=0.9)),
    ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True, weight_decay=0.1)),
    ("Adamax", dict(lr=0.05)),
    ("NAdam", dict(lr=0.05, momentum_decay=0.1)),
    ("RAdam", dict(lr=0.05, betas=(0.8, 0.9))),
], ids=["RMSprop", "RMSprop-centered", "Adamax", "NAdam", "RAdam"])
def test_jitted_update_follows_a_momentum_set_between_steps_as_torch(name, kwargs, dtype):
    # A jitted step, traced once, reads the momentum from the group's tensor.
    for jit in (False, True):
        twins = Twins(name, kwargs, dtype, jit=jit)
        for step, momentum in enumerate(MOMENTA):
            for opt in (twins.kiln_opt, twins.torch_opt):
                group = opt.param_groups[0]
                if "betas" in group:
                    group["betas"] = (momentum, group["betas"][1])
                else:
                    group["momentum"] = momentum
            twins.step()
            twins.check(f"{'jitted' if jit else 'eager'} step {step + 1}")
        if jit:
            assert twins.update.cache_info().misses == 1
