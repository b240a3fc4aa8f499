"""kiln.optim's RMSprop, Adagrad, Adamax, NAdam and RAdam without PyTorch: their updates against
PyTorch's formulas written out in NumPy, eager and jitted (also with a momentum set between
steps), their state (made later, checkpointed, fresh) and the errors for bad hyperparameters."""

import math

import numpy as np
import pytest

import kiln
from conftest import raises
from kiln import nn, optim

mint = kiln.mint


# ---------------------------------------------------------------------------------------------
# NumPy references (PyTorch's single-tensor updates): state in a dict per parameter, one call per
# step, the hyperparameters with PyTorch's defaults.


def _gradient(p, g, weight_decay, maximize, lr=None, decoupled=False):
    """(p, g) after maximize and weight decay, L2 or decoupled; see decayed_gradient."""
    g = -g if maximize else g
    if decoupled:
        return p * (1 - lr * weight_decay), g
    return p, g + weight_decay * p


def rmsprop_reference(p, g, state, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0,
                      momentum=0.0, centered=False, maximize=False):
    p, g = _gradient(p, g, weight_decay, maximize)
    s = state["square_avg"] = alpha * state.get("square_avg", 0) + (1 - alpha) * g * g
    if centered:
        a = state["grad_avg"] = alpha * state.get("grad_avg", 0) + (1 - alpha) * g
        denom = np.sqrt(s - a * a) + eps
    else:
        denom = np.sqrt(s) + eps
    if momentum > 0:
        buf = state["momentum_buffer"] = momentum * state.get("momentum_buffer", 0) + g / denom
        return p - lr * buf
    return p - lr * g / denom


def adagrad_reference(p, g, state, lr=1e-2, lr_decay=0.0, weight_decay=0.0,
                      initial_accumulator_value=0.0, eps=1e-10, maximize=False):
    t = state["step"] = state.get("step", 0) + 1
    p, g = _gradient(p, g, weight_decay, maximize)
    s = state["sum"] = state.get("sum", initial_accumulator_value) + g * g
    return p - lr / (1 + (t - 1) * lr_decay) * g / (np.sqrt(s) + eps)


def adamax_reference(p, g, state, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                     maximize=False):
    b1, b2 = betas
    t = state["step"] = state.get("step", 0) + 1
    p, g = _gradient(p, g, weight_decay, maximize)
    m = state["exp_avg"] = b1 * state.get("exp_avg", 0) + (1 - b1) * g
    u = state["exp_inf"] = np.maximum(b2 * state.get("exp_inf", 0), np.abs(g) + eps)
    return p - lr / (1 - b1 ** t) * m / u


def nadam_reference(p, g, state, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                    momentum_decay=4e-3, decoupled_weight_decay=False, maximize=False):
    b1, b2 = betas
    t = state["step"] = state.get("step", 0) + 1
    p, g = _gradient(p, g, weight_decay, maximize, lr, decoupled_weight_decay)
    mu = b1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
    mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
    product = state["mu_product"] = state.get("mu_product", 1.0) * mu
    m = state["exp_avg"] = b1 * state.get("exp_avg", 0) + (1 - b1) * g
    v = state["exp_avg_sq"] = b2 * state.get("exp_avg_sq", 0) + (1 - b2) * g * g
    denom = np.sqrt(v / (1 - b2 ** t)) + eps
    return (p - lr * (1 - mu) / (1 - product) * g / denom
            - lr * mu_next / (1 - product * mu_next) * m / denom)


def radam_reference(p, g, state, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                    decoupled_weight_decay=False, maximize=False):
    b1, b2 = betas
    t = state["step"] = state.get("step", 0) + 1
    p, g = _gradient(p, g, weight_decay, maximize, lr, decoupled_weight_decay)
    m = state["exp_avg"] = b1 * state.get("exp_avg", 0) + (1 - b1) * g
    v = state["exp_avg_sq"] = b2 * state.get("exp_avg_sq", 0) + (1 - b2) * g * g
    rho_inf = 2 / (1 - b2) - 1
    rho_t = rho_inf - 2 * t * b2 ** t / (1 - b2 ** t)
    update = m / (1 - b1 ** t)
    if rho_t > 5:  # PyTorch's Python branch
        rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf
                         / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
        update = update * rect * math.sqrt(1 - b2 ** t) / (np.sqrt(v) + eps)
    return p - lr * update


REFERENCES = {optim.RMSprop: rmsprop_reference, optim.Adagrad: adagrad_reference,
              optim.Adamax: adamax_reference, optim.NAdam: nadam_reference,
              optim.RAdam: radam_reference}

CASES = [
    (optim.RMSprop, {}),
    (optim.RMSprop, dict(lr=0.03, alpha=0.9, eps=1e-6)),
    (optim.RMSprop, dict(lr=0.01, momentum=0.9)),
    (optim.RMSprop, dict(lr=0.01, centered=True)),
    (optim.RMSprop, dict(lr=0.01, alpha=0.8, momentum=0.5, centered=True, weight_decay=0.1)),
    (optim.RMSprop, dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.2, maximize=True)),
    (optim.Adagrad, {}),
    (optim.Adagrad, dict(lr=0.1, lr_decay=0.3)),
    (optim.Adagrad, dict(lr=0.1, initial_accumulator_value=0.5, eps=1e-6)),
    (optim.Adagrad, dict(lr=0.1, lr_decay=0.1, weight_decay=0.2, maximize=True)),
    (optim.Adamax, {}),
    (optim.Adamax, dict(lr=0.05, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    (optim.Adamax, dict(lr=0.05, maximize=True)),
    (optim.NAdam, {}),
    (optim.NAdam, dict(lr=0.05, betas=(0.8, 0.99), momentum_decay=0.1)),
    (optim.NAdam, dict(lr=0.05, weight_decay=0.1)),
    (optim.NAdam, dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    (optim.NAdam, dict(lr=0.05, momentum_decay=0.0, maximize=True)),
    (optim.RAdam, {}),  # rectified from step 6
    (optim.RAdam, dict(lr=0.05, betas=(0.8, 0.9), eps=1e-6)),  # rectified from step 3
    (optim.RAdam, dict(lr=0.05, weight_decay=0.1)),
    (optim.RAdam, dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    (optim.RAdam, dict(lr=0.05, betas=(0.9, 0.5), maximize=True)),  # rho_inf 3: never rectified
]
IDS = [f"{cls.__name__}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'defaults'}"
       for cls, kw in CASES]
STEPS = 8


def run(cls, kwargs, dtype, style="call", jit=False, steps=STEPS, seed=0):
    """``steps`` updates of two random parameters; returns them and the float64 NumPy result."""
    rng = np.random.default_rng(seed)
    values = [rng.standard_normal((3, 4)), rng.standard_normal(5)]
    params = [nn.Parameter(kiln.tensor(v, dtype=dtype)) for v in values]
    opt = cls(params, **kwargs)
    update = kiln.jit(lambda *gs: opt(gs)) if jit else (lambda *gs: opt(gs))
    expected, states = [v.astype(np.float64) for v in values], [{}, {}]
    for _ in range(steps):
        grads = [rng.standard_normal(v.shape) for v in values]
        if style == "call":
            update(*(kiln.tensor(g, dtype=dtype) for g in grads))
        else:
            for p, g in zip(params, grads):
                p.grad = kiln.tensor(g, dtype=dtype)
            opt.step()
        expected = [REFERENCES[cls](e, g, s, **kwargs)
                    for e, g, s in zip(expected, grads, states)]
    if jit:
        assert update.cache_info().misses == 1  # one trace served every step
    return opt, params, expected, states


@pytest.mark.parametrize("style", ["call", "step"])
@pytest.mark.parametrize("cls, kwargs", CASES, ids=IDS)
def test_updates_match_numpy_float64(cls, kwargs, style):
    opt, params, expected, states = run(cls, kwargs, kiln.float64, style)
    for p, e in zip(params, expected):
        np.testing.assert_allclose(p.numpy(), e, rtol=1e-12, atol=1e-12)
    for state, reference in zip(opt.state, states):  # the state as PyTorch names and holds it
        assert set(state) == set(reference) | {"step"}
        for key, value in reference.items():
            np.testing.assert_allclose(state[key].numpy(), value, rtol=1e-12, atol=1e-12,
                                       err_msg=key)


@pytest.mark.parametrize("cls, kwargs", CASES, ids=IDS)
def test_updates_match_numpy_float32(cls, kwargs):
    _, params, expected, _ = run(cls, kwargs, kiln.float32)
    for p, e in zip(params, expected):
        assert p.dtype == kiln.float32
        np.testing.assert_allclose(p.numpy(), e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [kiln.float64, kiln.float32])
@pytest.mark.parametrize("cls, kwargs", CASES, ids=IDS)
def test_jitted_update_matches_eager_and_numpy(cls, kwargs, dtype):
    # One trace serves every step: the factors from the step count (RAdam's switch to the
    # rectified update included) are computed from the step tensor at each call.
    _, eager, expected, _ = run(cls, kwargs, dtype)
    _, jitted, _, _ = run(cls, kwargs, dtype, jit=True)
    tolerance = 1e-12 if dtype == kiln.float64 else 1e-6
    for j, e, want in zip(jitted, eager, expected):
        np.testing.assert_allclose(j.numpy(), e.numpy(), rtol=tolerance, atol=tolerance)
        np.testing.assert_allclose(j.numpy(), want, rtol=100 * tolerance, atol=100 * tolerance)


# Set before each step, as OneCycleLR's cycle_momentum sets it: RMSprop's momentum, the others'
# beta1. (Not 0: whether RMSprop steps with momentum is decided when a step is traced; see
# kiln.optim.SGD.)
MOMENTA = [0.9, 0.8, 0.1, 0.05, 0.6, 0.85, 0.95, 0.3]


@pytest.mark.parametrize("dtype", [kiln.float64, kiln.float32])
@pytest.mark.parametrize("cls, kwargs", [
    (optim.RMSprop, dict(lr=0.01, momentum=0.9)),
    (optim.RMSprop, dict(lr=0.01, momentum=0.5, centered=True, weight_decay=0.1)),
    (optim.Adamax, dict(lr=0.05)),
    (optim.NAdam, dict(lr=0.05, momentum_decay=0.1)),
    (optim.RAdam, dict(lr=0.05, betas=(0.8, 0.9))),
], ids=["RMSprop", "RMSprop-centered", "Adamax", "NAdam", "RAdam"])
def test_jitted_update_follows_a_momentum_set_between_steps(cls, kwargs, dtype):
    # A jitted step, traced once, reads the momentum from the group's tensor.
    tolerance = 1e-12 if dtype == kiln.float64 else 1e-5
    key = "momentum" if cls is optim.RMSprop else "betas"
    for jit in (False, True):
        rng = np.random.default_rng(3)
        start = rng.standard_normal(5)
        p = nn.Parameter(kiln.tensor(start, dtype=dtype))
        opt = cls([p], **kwargs)
        update = kiln.jit(lambda g: opt((g,))) if jit else (lambda g: opt((g,)))
        expected, state = start, {}
        for momentum in MOMENTA:
            group = opt.param_groups[0]
            group[key] = (momentum, group["betas"][1]) if key == "betas" else momentum
            g = rng.standard_normal(5)
            update(kiln.tensor(g, dtype=dtype))
            expected = REFERENCES[cls](expected, g, state, **{**kwargs, key: group[key]})
            np.testing.assert_allclose(p.numpy(), expected, rtol=tolerance, atol=tolerance)
        if jit:
            assert update.cache_info().misses == 1


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16])
@pytest.mark.parametrize("cls", list(REFERENCES), ids=lambda c: c.__name__)
def test_16_bit_parameters(cls, dtype):
    # The state is in the parameter's dtype, the step count (and NAdam's product) in float32,
    # the update's factors with the rate in float32 (see kiln.optim.optimizer).
    rng = np.random.default_rng(7)
    start = kiln.tensor(rng.uniform(-2, 2, 16)).to(dtype)
    p = nn.Parameter(start.clone())
    opt = cls([p], lr=0.05)
    expected, state = start.to(kiln.float64).numpy(), {}
    for _ in range(3):
        g = kiln.tensor(rng.uniform(-2, 2, 16)).to(dtype)
        opt((g,))
        expected = REFERENCES[cls](expected, g.to(kiln.float64).numpy(), state, lr=0.05)
    assert p.dtype == dtype and opt.state[0]["step"].dtype == kiln.float32
    assert opt.state[0]["step"].item() == 3
    np.testing.assert_allclose(p.to(kiln.float64).numpy(), expected, rtol=2e-2, atol=2e-2)


def test_defaults_and_state_are_pytorchs():
    p = nn.Parameter(mint.ones(2))
    assert optim.RMSprop([p]).defaults == dict(lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0,
                                               momentum=0, centered=False, maximize=False)
    assert optim.Adagrad([p]).defaults == dict(lr=1e-2, lr_decay=0, weight_decay=0,
                                               initial_accumulator_value=0, eps=1e-10,
                                               maximize=False)
    assert optim.Adamax([p]).defaults == dict(lr=2e-3, betas=(0.9, 0.999), eps=1e-8,
                                              weight_decay=0, maximize=False)
    assert optim.NAdam([p]).defaults == dict(lr=2e-3, betas=(0.9, 0.999), eps=1e-8,
                                             weight_decay=0, momentum_decay=4e-3,
                                             decoupled_weight_decay=False, maximize=False)
    assert optim.RAdam([p]).defaults == dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                             weight_decay=0, decoupled_weight_decay=False,
                                             maximize=False)
    assert set(optim.RMSprop([p]).state[0]) == {"step", "square_avg"}
    assert set(optim.RMSprop([p], momentum=0.9, centered=True).state[0]) == {
        "step", "square_avg", "momentum_buffer", "grad_avg"}
    state = optim.Adagrad([p], initial_accumulator_value=0.25).state[0]
    assert set(state) == {"step", "sum"}
    np.testing.assert_array_equal(state["sum"].numpy(), [0.25, 0.25])
    assert set(optim.Adamax([p]).state[0]) == {"step", "exp_avg", "exp_inf"}
    assert set(optim.RAdam([p]).state[0]) == {"step", "exp_avg", "exp_avg_sq"}
    for param, dtype in [(p, kiln.float32), (nn.Parameter(kiln.tensor(np.ones(2))), kiln.float64),
                         (nn.Parameter(mint.ones(2, dtype=kiln.bfloat16)), kiln.float32)]:
        state = optim.NAdam([param]).state[0]
        assert set(state) == {"step", "mu_product", "exp_avg", "exp_avg_sq"}
        assert state["mu_product"].item() == 1 and state["mu_product"].dtype == dtype
        assert state["step"].dtype == dtype


def test_parameter_groups_have_their_own_hyperparameters():
    rng = np.random.default_rng(1)
    starts = [rng.standard_normal(3) for _ in range(2)]
    params = [nn.Parameter(kiln.tensor(v)) for v in starts]
    opt = optim.RAdam([{"params": params[:1]},
                       {"params": params[1:], "lr": 0.2, "betas": (0.5, 0.8),
                        "weight_decay": 0.1, "decoupled_weight_decay": True}], lr=0.05)
    group_kwargs = [dict(lr=0.05), dict(lr=0.2, betas=(0.5, 0.8), weight_decay=0.1,
                                        decoupled_weight_decay=True)]
    expected, states = starts, [{}, {}]
    for i in range(6):
        if i == 3:
            opt.param_groups[1]["lr"] = group_kwargs[1]["lr"] = 0.1
        grads = [rng.standard_normal(3) for _ in range(2)]
        opt(tuple(kiln.tensor(g) for g in grads))
        expected = [radam_reference(e, g, s, **kw)
                    for e, g, s, kw in zip(expected, grads, states, group_kwargs)]
    for p, e in zip(params, expected):
        np.testing.assert_allclose(p.numpy(), e, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# State made later, checkpoints


@pytest.mark.parametrize("setting, key", [("momentum", "momentum_buffer"),
                                          ("centered", "grad_avg")])
def test_rmsprop_state_made_when_its_setting_is_set_later(setting, key):
    # As Adam's amsgrad: the buffer starts at zero at the first step that needs it (PyTorch's
    # step failed with a KeyError).
    rng = np.random.default_rng(2)
    start = rng.standard_normal(3)
    p = nn.Parameter(kiln.tensor(start))
    opt = optim.RMSprop([p], lr=0.01)
    assert key not in opt.state[0]
    value = 0.9 if setting == "momentum" else True
    expected, state = start, {}
    for i in range(4):
        if i == 2:
            opt.param_groups[0][setting] = value
        g = rng.standard_normal(3)
        p.grad = kiln.tensor(g)
        opt.step()
        expected = rmsprop_reference(expected, g, state, lr=0.01,
                                     **({setting: value} if i >= 2 else {}))
    np.testing.assert_allclose(p.numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose(opt.state[0][key].numpy(), state[key], rtol=1e-12)


@pytest.mark.parametrize("setting, value, message", [
    ("momentum", 0.9, "a parameter added without momentum > 0 has no momentum_buffer"),
    ("centered", True, "a parameter added without centered=True has no grad_avg"),
])
def test_rmsprop_state_cannot_be_made_inside_a_jitted_step(setting, value, message):
    p = nn.Parameter(mint.ones(2))
    opt = optim.RMSprop([p])
    opt.param_groups[0][setting] = value
    step = kiln.jit(lambda g: opt((g,)))
    with raises(kiln.KilnValueError, match=f"RMSprop: {message}, and a kiln.jit step cannot "
                                           f"create one; run one eager step after setting"):
        step(mint.ones(2))
    assert set(opt.state[0]) == {"step", "square_avg"}
    np.testing.assert_array_equal(p.numpy(), [1, 1])


SETUPS = [
    (optim.RMSprop, dict(lr=0.01, momentum=0.9, centered=True)),
    (optim.Adagrad, dict(lr=0.1, lr_decay=0.1, initial_accumulator_value=0.5)),
    (optim.Adamax, dict(lr=0.05, maximize=True)),
    (optim.NAdam, dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    (optim.RAdam, dict(lr=0.05, betas=(0.8, 0.9))),
]
SETUP_IDS = [cls.__name__ for cls, _ in SETUPS]


@pytest.mark.parametrize("cls, kwargs", SETUPS, ids=SETUP_IDS)
def test_state_dict_resumes_exactly(cls, kwargs):
    rng = np.random.default_rng(5)
    start = rng.standard_normal(4)
    grads = [kiln.tensor(rng.standard_normal(4)) for _ in range(8)]
    a = nn.Parameter(kiln.tensor(start))
    opt_a = cls([a], **kwargs)
    for g in grads[:4]:
        opt_a((g,))
    saved = opt_a.state_dict()
    b = nn.Parameter(kiln.tensor(a.numpy().copy()))
    opt_b = cls([b], **kwargs)
    opt_b.load_state_dict(saved)
    for g in grads[4:]:  # across RAdam's switch to the rectified update
        opt_a((g,))
        opt_b((g,))
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    for key, value in opt_a.state[0].items():
        np.testing.assert_array_equal(opt_b.state[0][key].numpy(), value.numpy(), err_msg=key)
    # the saved state is a copy: later steps did not change it
    assert saved["state"][0]["step"].item() == 4 and opt_a.state[0]["step"].item() == 8


@pytest.mark.parametrize("cls, kwargs", SETUPS, ids=SETUP_IDS)
@pytest.mark.parametrize("entry", ["missing", "empty"])
def test_state_without_an_entry_loads_as_fresh(cls, kwargs, entry):
    # Fresh state is the state of a parameter just added: Adagrad's sum starts at
    # initial_accumulator_value and NAdam's mu_product at 1, not at the zeros the other state
    # takes (a mu_product of 0 stayed 0).
    rng = np.random.default_rng(14)
    grads = [kiln.tensor(rng.standard_normal(3)) for _ in range(3)]

    def stepped(opt):
        opt((kiln.tensor(rng.standard_normal(3)), kiln.tensor(rng.standard_normal(3))))
        return opt

    saved = stepped(cls([nn.Parameter(kiln.tensor(np.ones(3))) for _ in range(2)],
                        **kwargs)).state_dict()
    if entry == "missing":
        del saved["state"][1]
    else:
        saved["state"][1] = {}
    params = [nn.Parameter(kiln.tensor(np.ones(3))) for _ in range(2)]
    opt = stepped(stepped(cls(params, **kwargs)))  # its state is not fresh
    opt.load_state_dict(saved)
    fresh_param = nn.Parameter(kiln.tensor(params[1].numpy().copy()))
    fresh = cls([fresh_param], **kwargs)
    for key, value in fresh.state[0].items():
        np.testing.assert_array_equal(opt.state[1][key].numpy(), value.numpy(), err_msg=key)
    for g in grads:
        opt((None, g))
        fresh((g,))
    np.testing.assert_array_equal(params[1].numpy(), fresh_param.numpy())


def test_adagrad_sum_starts_at_its_groups_initial_value():
    # PyTorch's constructor fills every group's sum from its own argument (0.1 here), leaving a
    # value set in a group unused.
    a, b, c = (nn.Parameter(mint.ones(2)) for _ in range(3))
    opt = optim.Adagrad([{"params": [a]}, {"params": [b], "initial_accumulator_value": 0.5}],
                        initial_accumulator_value=0.1)
    opt.add_param_group({"params": [c], "initial_accumulator_value": 2.0})
    for state, value in zip(opt.state, [0.1, 0.5, 2.0]):
        np.testing.assert_allclose(state["sum"].numpy(), [value, value])
    opt((None, mint.ones(2), None))
    np.testing.assert_allclose(b.numpy(), 1 - 0.01 / (np.sqrt(1.5) + 1e-10), rtol=1e-6)


def test_adagrad_fresh_state_takes_the_loaded_initial_value():
    p = [nn.Parameter(mint.ones(2)), nn.Parameter(mint.ones(2))]
    saved = optim.Adagrad(p, initial_accumulator_value=0.75).state_dict()
    del saved["state"][1]
    opt = optim.Adagrad(p)
    opt.load_state_dict(saved)
    assert opt.param_groups[0]["initial_accumulator_value"] == 0.75
    np.testing.assert_array_equal(opt.state[1]["sum"].numpy(), [0.75, 0.75])


# ---------------------------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize("make, error, message", [
    (lambda ps: optim.RMSprop(ps, lr=-1), kiln.KilnValueError,
     r"RMSprop: invalid learning rate -1, expected lr >= 0.0"),
    (lambda ps: optim.RMSprop(ps, alpha=-0.5), kiln.KilnValueError,
     r"RMSprop: invalid alpha -0.5, expected alpha >= 0.0"),
    (lambda ps: optim.RMSprop(ps, alpha="0.9"), kiln.KilnTypeError,
     r"RMSprop: alpha must be a real number, got '0.9' \(str\)"),
    (lambda ps: optim.RMSprop(ps, eps=-1e-8), kiln.KilnValueError,
     r"RMSprop: invalid eps -1e-08, expected eps >= 0.0"),
    (lambda ps: optim.RMSprop(ps, momentum=-0.9), kiln.KilnValueError,
     r"RMSprop: invalid momentum -0.9, expected momentum >= 0.0"),
    (lambda ps: optim.RMSprop(ps, momentum=None), kiln.KilnTypeError,
     r"RMSprop: momentum must be a real number, got None \(NoneType\)"),
    (lambda ps: optim.RMSprop(ps, weight_decay=-0.1), kiln.KilnValueError,
     r"RMSprop: invalid weight_decay -0.1, expected weight_decay >= 0.0"),
    (lambda ps: optim.Adagrad(ps, lr_decay=-0.1), kiln.KilnValueError,
     r"Adagrad: invalid lr_decay -0.1, expected lr_decay >= 0.0"),
    (lambda ps: optim.Adagrad(ps, initial_accumulator_value=-1), kiln.KilnValueError,
     r"Adagrad: invalid initial_accumulator_value -1, expected initial_accumulator_value >= 0.0"),
    (lambda ps: optim.Adagrad(ps, initial_accumulator_value=None), kiln.KilnTypeError,
     r"Adagrad: initial_accumulator_value must be a real number, got None"),
    (lambda ps: optim.Adagrad(ps, eps=float("nan")), kiln.KilnValueError,
     r"Adagrad: invalid eps nan, expected eps >= 0.0"),
    (lambda ps: optim.Adagrad(ps, weight_decay=True), kiln.KilnTypeError,
     r"Adagrad: weight_decay must be a real number, got True \(bool\)"),
    (lambda ps: optim.Adamax(ps, betas=(1.0, 0.9)), kiln.KilnValueError,
     r"Adamax: betas must be in \[0, 1\), got \(1.0, 0.9\)"),
    (lambda ps: optim.Adamax(ps, betas=0.9), kiln.KilnTypeError,
     r"Adamax: betas must be a pair of numbers \(beta1, beta2\), got 0.9"),
    (lambda ps: optim.Adamax(ps, eps=-1), kiln.KilnValueError,
     r"Adamax: invalid eps -1, expected eps >= 0.0"),
    (lambda ps: optim.NAdam(ps, momentum_decay=-4e-3), kiln.KilnValueError,
     r"NAdam: invalid momentum_decay -0.004, expected momentum_decay >= 0.0"),
    (lambda ps: optim.NAdam(ps, momentum_decay="4e-3"), kiln.KilnTypeError,
     r"NAdam: momentum_decay must be a real number, got '4e-3' \(str\)"),
    (lambda ps: optim.NAdam(ps, betas=(0.9, None)), kiln.KilnTypeError,
     r"NAdam: betas\[1\] must be a real number, got None"),
    (lambda ps: optim.NAdam(ps, weight_decay=-0.1), kiln.KilnValueError,
     r"NAdam: invalid weight_decay -0.1, expected weight_decay >= 0.0"),
    (lambda ps: optim.RAdam(ps, betas=(0.9,)), kiln.KilnValueError,
     r"RAdam: betas must be a pair of numbers \(beta1, beta2\), got \(0.9,\)"),
    (lambda ps: optim.RAdam(ps, betas=(-0.1, 0.999)), kiln.KilnValueError,
     r"RAdam: betas must be in \[0, 1\), got \(-0.1, 0.999\)"),
    (lambda ps: optim.RAdam(ps, lr=None), kiln.KilnTypeError,
     r"RAdam: lr must be a real number, got None \(NoneType\)"),
    (lambda ps: optim.RAdam(ps).add_param_group({"params": [nn.Parameter(mint.ones(1))],
                                                  "eps": -1}),
     kiln.KilnValueError, r"RAdam: invalid eps -1, expected eps >= 0.0"),
], ids=["rmsprop-lr", "rmsprop-alpha", "rmsprop-alpha-str", "rmsprop-eps", "rmsprop-momentum",
        "rmsprop-momentum-none", "rmsprop-weight-decay", "adagrad-lr-decay",
        "adagrad-initial-value", "adagrad-initial-value-none", "adagrad-eps-nan",
        "adagrad-weight-decay-bool", "adamax-beta1", "adamax-betas-float", "adamax-eps",
        "nadam-momentum-decay", "nadam-momentum-decay-str", "nadam-beta-none",
        "nadam-weight-decay", "radam-one-beta", "radam-negative-beta", "radam-lr-none",
        "radam-group-eps"])
def test_bad_hyperparameters_name_the_argument(make, error, message):
    with raises(error, match=message):
        make([nn.Parameter(mint.ones(2))])


@pytest.mark.parametrize("cls, key, value, error, message", [
    (optim.RMSprop, "alpha", -1, kiln.KilnValueError, "RMSprop: invalid alpha -1"),
    (optim.Adagrad, "lr_decay", None, kiln.KilnTypeError,
     "Adagrad: lr_decay must be a real number, got None"),
    (optim.Adamax, "betas", (0.9, 1.5), kiln.KilnValueError, r"Adamax: betas must be in \[0, 1\)"),
    (optim.NAdam, "momentum_decay", -1, kiln.KilnValueError, "NAdam: invalid momentum_decay -1"),
    (optim.RAdam, "lr", -0.5, kiln.KilnValueError, "RAdam: invalid learning rate -0.5"),
], ids=["RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam"])
def test_bad_hyperparameters_in_a_state_dict_change_nothing(cls, key, value, error, message):
    p = nn.Parameter(mint.ones(2))
    opt = cls([p])
    opt((mint.ones(2),))
    saved = opt.state_dict()
    saved["param_groups"][0][key] = value
    saved["state"][0]["step"] = np.array(7.0)
    with raises(error, match=message):
        opt.load_state_dict(saved)
    assert opt.param_groups[0][key] == opt.defaults[key]
    assert opt.state[0]["step"].item() == 1
