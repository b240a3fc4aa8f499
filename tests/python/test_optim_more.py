"""kiln.optim's Adadelta, Rprop, ASGD and LBFGS: the first three against PyTorch's formulas
written out in NumPy (eager and jitted, float64 and float32, with weight decay and maximize) and
against PyTorch itself (parameters and state after several steps, checkpoints in both
directions); LBFGS against closed forms (its first steps, the minimizer of a quadratic and of
Rosenbrock's function) and against torch.optim.LBFGS (with and without the strong Wolfe line
search); checkpoints, and the error paths. The PyTorch tests are skipped where it is missing."""

import contextlib
import inspect

import numpy as np
import pytest

import kiln
from conftest import check_torch, raises
from kiln import nn
from kiln.optim import ASGD, LBFGS, Adadelta, Rprop

mint = kiln.mint
DTYPES = [kiln.float64, kiln.float32]
STEPS = 8


# ---------------------------------------------------------------------------------------------
# NumPy references (PyTorch's single-tensor updates): state in a dict per parameter, made at the
# first step from that step's hyperparameters, as PyTorch makes it.


def adadelta_reference(p, g, state, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, maximize=False):
    g = (-g if maximize else g) + weight_decay * p
    s = state["square_avg"] = rho * state.get("square_avg", 0) + (1 - rho) * g * g
    u = state.get("acc_delta", 0)
    delta = np.sqrt(u + eps) / np.sqrt(s + eps) * g
    state["acc_delta"] = rho * u + (1 - rho) * delta * delta
    return p - lr * delta


def rprop_reference(p, g, state, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50),
                    maximize=False):
    g = -g if maximize else g
    sign = np.sign(g * state.get("prev", 0))
    factor = np.where(sign > 0, etas[1], np.where(sign < 0, etas[0], 1.0))
    size = state["step_size"] = np.clip(state.get("step_size", lr) * factor, *step_sizes)
    g = state["prev"] = np.where(sign < 0, 0.0, g)
    return p - np.sign(g) * size


def asgd_reference(p, g, state, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                   maximize=False):
    t = state["step"] = state.get("step", 0) + 1
    eta, mu = state.get("eta", lr), state.get("mu", 1.0)
    g = (-g if maximize else g) + weight_decay * p
    p = p * (1 - lambd * eta) - eta * g
    state["ax"] = p.copy() if mu == 1 else state["ax"] + (p - state["ax"]) * mu
    state["eta"] = lr / (1 + lambd * lr * t) ** alpha
    state["mu"] = 1 / max(1, t - t0)
    return p


REFERENCES = {Adadelta: adadelta_reference, Rprop: rprop_reference, ASGD: asgd_reference}

CASES = [
    (Adadelta, {}),
    (Adadelta, dict(lr=0.5, rho=0.8, eps=1e-4)),
    (Adadelta, dict(weight_decay=0.1)),
    (Adadelta, dict(lr=0.7, weight_decay=0.1, maximize=True)),
    (Rprop, {}),
    (Rprop, dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.08))),
    (Rprop, dict(lr=0.05, step_sizes=(0.2, 0.1))),  # minimum above maximum: the maximum
    (Rprop, dict(lr=0.05, maximize=True)),
    (ASGD, {}),
    (ASGD, dict(lr=0.05, lambd=0.01, alpha=0.5, t0=3)),  # averaging from step 4
    (ASGD, dict(lr=0.05, t0=2, weight_decay=0.1)),
    (ASGD, dict(lr=0.05, lambd=0.1, t0=0, maximize=True)),
]
IDS = [f"{cls.__name__}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'defaults'}"
       for cls, kw in CASES]


def random_gradient(rng, shape):
    """A normal gradient with about one element in six exactly 0 (Rprop's third case)."""
    g = rng.standard_normal(shape)
    g[rng.random(shape) < 0.15] = 0.0
    return g


def run(cls, kwargs, dtype, style="call", jit=False, rates=None, seed=0):
    """STEPS updates of two random parameters (at ``rates``, set before each step, when given);
    returns the optimizer, the parameters, and the float64 NumPy result and state."""
    rng = np.random.default_rng(seed)
    values = [rng.standard_normal((3, 4)), rng.standard_normal(5)]
    params = [nn.Parameter(kiln.tensor(v, dtype=dtype)) for v in values]
    opt = cls(params, **kwargs)
    update = kiln.jit(lambda *gs: opt(gs)) if jit else (lambda *gs: opt(gs))
    expected, states = values, [{}, {}]
    for step in range(STEPS):
        settings = dict(kwargs)
        if rates is not None:
            opt.param_groups[0]["lr"] = settings["lr"] = rates[step]
        grads = [random_gradient(rng, v.shape) for v in values]
        if style == "call":
            update(*(kiln.tensor(g, dtype=dtype) for g in grads))
        else:
            for p, g in zip(params, grads):
                p.grad = kiln.tensor(g, dtype=dtype)
            opt.step()
        expected = [REFERENCES[cls](e, g, s, **settings)
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
    for state, reference in zip(opt.state, states):  # PyTorch's state names and values
        assert set(state) == set(reference) | {"step"}
        assert state["step"].item() == STEPS
        for key, value in reference.items():
            np.testing.assert_allclose(state[key].numpy(), value, rtol=1e-12, atol=1e-12,
                                       err_msg=key)


@pytest.mark.parametrize("cls, kwargs", CASES, ids=IDS)
def test_updates_match_numpy_float32(cls, kwargs):
    opt, params, expected, _ = run(cls, kwargs, kiln.float32)
    for p, e in zip(params, expected):
        assert p.dtype == kiln.float32
        np.testing.assert_allclose(p.numpy(), e, rtol=1e-5, atol=1e-5)
    for state in opt.state:
        assert all(value.dtype == kiln.float32 for value in state.values())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cls, kwargs", CASES, ids=IDS)
def test_jitted_update_matches_eager_and_numpy(cls, kwargs, dtype):
    # One trace serves every step and every rate set between them: ASGD's eta follows the rate,
    # and Rprop's and ASGD's first step takes the rate of that step (see test below).
    rates = list(np.linspace(kwargs.get("lr", 0.02), 0.005, STEPS))
    _, eager, expected, _ = run(cls, kwargs, dtype, rates=rates)
    _, jitted, _, _ = run(cls, kwargs, dtype, jit=True, rates=rates)
    tolerance = 1e-12 if dtype == kiln.float64 else 1e-5
    for j, e, want in zip(jitted, eager, expected):
        np.testing.assert_allclose(j.numpy(), e.numpy(), rtol=tolerance, atol=tolerance)
        np.testing.assert_allclose(j.numpy(), want, rtol=10 * tolerance, atol=10 * tolerance)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jitted"])
@pytest.mark.parametrize("cls, key", [(Rprop, "step_size"), (ASGD, "eta")])
def test_first_step_takes_the_rate_set_before_it(cls, key, jit):
    # PyTorch makes this state at the first step, from the rate then (a scheduler's first one).
    p = nn.Parameter(kiln.tensor(np.ones(3)))
    opt = cls([p], lr=0.5)
    np.testing.assert_array_equal(opt.state[0][key].numpy(), 0.5)  # the rate when added
    opt.param_groups[0]["lr"] = 0.125
    update = kiln.jit(lambda g: opt((g,))) if jit else (lambda g: opt((g,)))
    update(kiln.tensor(np.array([1.0, -1.0, 0.0])))
    state = {}
    expected = REFERENCES[cls](np.ones(3), np.array([1.0, -1.0, 0.0]), state, lr=0.125)
    np.testing.assert_allclose(p.numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose(opt.state[0][key].numpy(), state[key], rtol=1e-12)


def test_asgd_average_is_the_parameter_itself_while_mu_is_1():
    # PyTorch copies the parameter while mu is 1: ax + (p - ax) * 1 would round p off to ax's
    # grid, here 3's (a step with lambd * eta = 1 takes the parameter from 3 to a small value).
    p = nn.Parameter(kiln.tensor([3.0], dtype=kiln.float64))
    opt = ASGD([p], lr=0.5, lambd=0.0, alpha=0.0)
    opt((mint.zeros(1, dtype=kiln.float64),))
    opt.param_groups[0]["lambd"] = 2.0
    opt((kiln.tensor([np.pi * 1e-7], dtype=kiln.float64),))
    assert p.item() == -0.5 * np.pi * 1e-7
    assert opt.state[0]["ax"].item() == p.item()


@pytest.mark.parametrize("cls", list(REFERENCES), ids=lambda c: c.__name__)
def test_16_bit_parameters(cls):
    # The state tensors are in the parameter's dtype, the 0-d ones (step, eta, mu) float32.
    rng = np.random.default_rng(7)
    start = kiln.tensor(rng.uniform(-2, 2, 16)).to(kiln.bfloat16)
    p = nn.Parameter(start.clone())
    opt = cls([p], lr=0.05)
    expected, state = start.to(kiln.float64).numpy(), {}
    for _ in range(3):
        g = kiln.tensor(rng.uniform(-2, 2, 16)).to(kiln.bfloat16)
        opt((g,))
        expected = REFERENCES[cls](expected, g.to(kiln.float64).numpy(), state, lr=0.05)
    assert p.dtype == kiln.bfloat16 and opt.state[0]["step"].dtype == kiln.float32
    assert opt.state[0]["step"].item() == 3
    np.testing.assert_allclose(p.to(kiln.float64).numpy(), expected, rtol=3e-2, atol=3e-2)


def test_defaults_state_and_pytorchs_positional_flags():
    p = nn.Parameter(mint.ones(2))
    assert Adadelta([p]).defaults == dict(lr=1.0, rho=0.9, eps=1e-6, weight_decay=0,
                                          maximize=False)
    assert Rprop([p]).defaults == dict(lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50),
                                       maximize=False)
    assert ASGD([p]).defaults == dict(lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                                      maximize=False)
    assert LBFGS([p]).defaults == dict(lr=1, max_iter=20, max_eval=25, tolerance_grad=1e-7,
                                       tolerance_change=1e-9, history_size=100,
                                       line_search_fn=None, maximize=False)
    assert LBFGS([p], max_iter=4).defaults["max_eval"] == 5  # max_iter * 5 // 4
    assert set(Adadelta([p]).state[0]) == {"step", "square_avg", "acc_delta"}
    assert set(Rprop([p]).state[0]) == {"step", "prev", "step_size"}
    state = ASGD([p], lr=0.25).state[0]
    assert set(state) == {"step", "eta", "mu", "ax"}
    assert (state["eta"].item(), state["mu"].item()) == (0.25, 1.0)
    assert LBFGS([p]).state[0] == {}
    # PyTorch's Adadelta takes foreach by position, its ASGD all its flags; none is a
    # hyperparameter (see kiln.optim.optimizer).
    opt = Adadelta([p], 1.0, 0.9, 1e-6, 0, True, capturable=True)
    assert "foreach" not in opt.param_groups[0]
    opt = ASGD([p], 0.01, 1e-4, 0.75, 1e6, 0, None, True, False, True)
    assert opt.param_groups[0]["maximize"] is True and "capturable" not in opt.param_groups[0]
    Rprop([p], capturable=True, foreach=False, differentiable=False, fused=None)


# ---------------------------------------------------------------------------------------------
# Checkpoints


SETUPS = [
    (Adadelta, dict(lr=0.5, weight_decay=0.1)),
    (Rprop, dict(lr=0.05, etas=(0.3, 1.5))),
    (ASGD, dict(lr=0.05, lambd=0.01, t0=2)),
]
SETUP_IDS = [cls.__name__ for cls, _ in SETUPS]


@pytest.mark.parametrize("cls, kwargs", SETUPS, ids=SETUP_IDS)
def test_state_dict_resumes_exactly(cls, kwargs):
    rng = np.random.default_rng(5)
    grads = [kiln.tensor(random_gradient(rng, 4)) for _ in range(8)]
    a = nn.Parameter(kiln.tensor(rng.standard_normal(4)))
    opt_a = cls([a], **kwargs)
    for g in grads[:4]:
        opt_a((g,))
    saved = opt_a.state_dict()
    b = nn.Parameter(kiln.tensor(a.numpy().copy()))
    opt_b = cls([b], **kwargs)
    opt_b.load_state_dict(saved)
    for g in grads[4:]:  # across ASGD's start of averaging
        opt_a((g,))
        opt_b((g,))
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    for key, value in opt_a.state[0].items():
        np.testing.assert_array_equal(opt_b.state[0][key].numpy(), value.numpy(), err_msg=key)
    assert saved["state"][0]["step"].item() == 4  # a copy: later steps did not change it


@pytest.mark.parametrize("cls, kwargs", SETUPS, ids=SETUP_IDS)
def test_state_without_an_entry_loads_as_fresh(cls, kwargs):
    # Fresh state is that of a parameter just added: Rprop's step sizes and ASGD's eta at the
    # rate and ASGD's mu 1, not the zeros the base class leaves (a mu of 0 kept ax at zero).
    rng = np.random.default_rng(14)
    grads = [kiln.tensor(random_gradient(rng, 3)) for _ in range(3)]

    def stepped(opt):
        opt(tuple(kiln.tensor(random_gradient(rng, 3)) for _ in range(2)))
        return opt

    saved = stepped(cls([nn.Parameter(kiln.tensor(np.ones(3))) for _ in range(2)],
                        **kwargs)).state_dict()
    del saved["state"][1]
    params = [nn.Parameter(kiln.tensor(np.ones(3))) for _ in range(2)]
    opt = stepped(stepped(cls(params, **kwargs)))
    opt.load_state_dict(saved)
    fresh_param = nn.Parameter(kiln.tensor(params[1].numpy().copy()))
    fresh = cls([fresh_param], **kwargs)
    for key, value in fresh.state[0].items():
        np.testing.assert_array_equal(opt.state[1][key].numpy(), value.numpy(), err_msg=key)
    for g in grads:
        opt((None, g))
        fresh((g,))
    np.testing.assert_array_equal(params[1].numpy(), fresh_param.numpy())


# ---------------------------------------------------------------------------------------------
# Errors of the first-order optimizers


@pytest.mark.parametrize("make, error, message", [
    (lambda ps: Adadelta(ps, lr=-1), kiln.KilnValueError,
     r"Adadelta: invalid learning rate -1, expected lr >= 0.0"),
    (lambda ps: Adadelta(ps, rho=1.5), kiln.KilnValueError,
     r"Adadelta: invalid rho 1.5, expected rho <= 1"),
    (lambda ps: Adadelta(ps, rho=-0.1), kiln.KilnValueError,
     r"Adadelta: invalid rho -0.1, expected rho >= 0.0"),
    (lambda ps: Adadelta(ps, rho="0.9"), kiln.KilnTypeError,
     r"Adadelta: rho must be a real number, got '0.9' \(str\)"),
    (lambda ps: Adadelta(ps, eps=-1e-6), kiln.KilnValueError,
     r"Adadelta: invalid eps -1e-06, expected eps >= 0.0"),
    (lambda ps: Adadelta(ps, weight_decay=-0.1), kiln.KilnValueError,
     r"Adadelta: invalid weight_decay -0.1, expected weight_decay >= 0.0"),
    (lambda ps: Adadelta(ps, foreach="yes"), kiln.KilnTypeError,
     r"Adadelta: foreach must be a bool or None, got str 'yes'"),
    (lambda ps: Rprop(ps, lr=-0.5), kiln.KilnValueError,
     r"Rprop: invalid learning rate -0.5, expected lr >= 0.0"),
    (lambda ps: Rprop(ps, etas=(1.5, 1.2)), kiln.KilnValueError,
     r"Rprop: invalid etas \(1.5, 1.2\), expected 0 < etaminus < 1 < etaplus"),
    (lambda ps: Rprop(ps, etas=(0.5, 1.0)), kiln.KilnValueError,
     r"Rprop: invalid etas \(0.5, 1.0\), expected 0 < etaminus < 1 < etaplus"),
    (lambda ps: Rprop(ps, etas=0.5), kiln.KilnTypeError,
     r"Rprop: etas must be a pair of numbers \(etaminus, etaplus\), got 0.5"),
    (lambda ps: Rprop(ps, step_sizes=(1e-6,)), kiln.KilnValueError,
     r"Rprop: step_sizes must be a pair of numbers \(step_size_min, step_size_max\), got "
     r"\(1e-06,\)"),
    (lambda ps: Rprop(ps, step_sizes=(None, 50)), kiln.KilnTypeError,
     r"Rprop: step_sizes\[0\] must be a real number, got None"),
    (lambda ps: Rprop(ps, rho=0.9), kiln.KilnTypeError,
     r"Rprop\(\) got an unexpected keyword argument 'rho'"),
    (lambda ps: ASGD(ps, lr=-1), kiln.KilnValueError,
     r"ASGD: invalid learning rate -1, expected lr >= 0.0"),
    (lambda ps: ASGD(ps, lambd=-1e-4), kiln.KilnValueError,
     r"ASGD: invalid lambd -0.0001, expected lambd >= 0.0"),
    (lambda ps: ASGD(ps, alpha=-0.75), kiln.KilnValueError,
     r"ASGD: invalid alpha -0.75, expected alpha >= 0.0"),
    (lambda ps: ASGD(ps, t0=None), kiln.KilnTypeError,
     r"ASGD: t0 must be a real number, got None \(NoneType\)"),
    (lambda ps: ASGD(ps, weight_decay=True), kiln.KilnTypeError,
     r"ASGD: weight_decay must be a real number, got True \(bool\)"),
    (lambda ps: ASGD(ps, differentiable=True), kiln.KilnNotImplementedError,
     r"ASGD: differentiable=True is not supported"),
    (lambda ps: ASGD(ps).add_param_group({"params": [nn.Parameter(mint.ones(1))], "alpha": -1}),
     kiln.KilnValueError, r"ASGD: invalid alpha -1, expected alpha >= 0.0"),
], ids=["adadelta-lr", "adadelta-rho-high", "adadelta-rho-low", "adadelta-rho-str",
        "adadelta-eps", "adadelta-weight-decay", "adadelta-foreach", "rprop-lr",
        "rprop-etaminus", "rprop-etaplus", "rprop-etas-float", "rprop-one-step-size",
        "rprop-step-size-none", "rprop-unknown-keyword", "asgd-lr", "asgd-lambd", "asgd-alpha",
        "asgd-t0-none", "asgd-weight-decay-bool", "asgd-differentiable", "asgd-group-alpha"])
def test_bad_hyperparameters_name_the_argument(make, error, message):
    with raises(error, match=message):
        make([nn.Parameter(mint.ones(2))])


@pytest.mark.parametrize("cls, key, value, error, message", [
    (Adadelta, "rho", 2.0, kiln.KilnValueError, "Adadelta: invalid rho 2.0, expected rho <= 1"),
    (Rprop, "etas", (0.5, 0.9), kiln.KilnValueError, r"Rprop: invalid etas \(0.5, 0.9\)"),
    (ASGD, "lambd", None, kiln.KilnTypeError, "ASGD: lambd must be a real number, got None"),
], ids=["Adadelta", "Rprop", "ASGD"])
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


# ---------------------------------------------------------------------------------------------
# LBFGS without PyTorch: closed forms


def quadratic_problem(dtype, seed=0):
    """A random positive definite quadratic 0.5 x'Ax - b'x over x, two parameters (a 2x2 and a
    3-vector, flattened in that order) as kiln Parameters; returns (A, b, x0, params, loss)."""
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((7, 7))
    a = m @ m.T / 7 + np.eye(7)
    b = rng.standard_normal(7)
    x0 = rng.standard_normal(7)
    params = [nn.Parameter(kiln.tensor(x0[:4].reshape(2, 2), dtype=dtype)),
              nn.Parameter(kiln.tensor(x0[4:], dtype=dtype))]
    ka, kb = kiln.tensor(a, dtype=dtype), kiln.tensor(b, dtype=dtype)

    def loss():
        x = mint.cat([params[0].reshape(-1), params[1]])
        return 0.5 * mint.dot(x, mint.matmul(ka, x)) - mint.dot(kb, x)

    return a, b, x0, params, loss


def closure_of(opt, loss, sign=1.0):
    def closure():
        opt.zero_grad()
        value = sign * loss()
        value.backward()
        return value
    return closure


def flat(params):
    return np.concatenate([p.numpy().reshape(-1) for p in params])


def test_lbfgs_first_steps_match_their_closed_forms():
    # max_iter=1 and no line search: step 1 is steepest descent scaled by min(1, 1 / |g|_1),
    # step 2 takes lr along -H g, H the BFGS update of (s'y / y'y) I with the pair (s, y).
    a, b, x0, params, loss = quadratic_problem(kiln.float64)
    opt = LBFGS(params, lr=0.5, max_iter=1)
    closure = closure_of(opt, loss)
    g0 = a @ x0 - b
    returned = opt.step(closure)
    assert returned.item() == pytest.approx(0.5 * x0 @ a @ x0 - b @ x0, rel=1e-12)
    x1 = x0 - min(1.0, 1.0 / np.abs(g0).sum()) * 0.5 * g0
    np.testing.assert_allclose(flat(params), x1, rtol=1e-12, atol=1e-12)
    opt.step(closure)
    s, y = x1 - x0, (a @ x1 - b) - g0
    rho = 1 / (y @ s)
    eye = np.eye(7)
    h = (eye - rho * np.outer(s, y)) @ ((s @ y) / (y @ y) * eye) @ (eye - rho * np.outer(y, s))
    h += rho * np.outer(s, s)
    x2 = x1 - 0.5 * h @ (a @ x1 - b)
    np.testing.assert_allclose(flat(params), x2, rtol=1e-10, atol=1e-12)
    state = opt.state[0]
    assert (state["func_evals"], state["n_iter"], len(state["old_dirs"])) == (2, 2, 1)
    assert state["t"] == 0.5 and state["ro"] == [pytest.approx(rho, rel=1e-12)]
    np.testing.assert_allclose(state["prev_flat_grad"].numpy(), a @ x1 - b, rtol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lbfgs_with_strong_wolfe_minimizes_a_quadratic(dtype):
    a, b, _, params, loss = quadratic_problem(dtype)
    float64 = dtype == kiln.float64
    # As close as the loss's rounding lets it tell (its change near the minimizer is the square
    # of the distance): in float64 with tolerances that do not stop it sooner.
    opt = LBFGS(params, line_search_fn="strong_wolfe", max_iter=50,
                **(dict(tolerance_grad=1e-12, tolerance_change=1e-15) if float64 else {}))
    opt.step(closure_of(opt, loss))
    tolerance = 1e-7 if float64 else 2e-3
    np.testing.assert_allclose(flat(params), np.linalg.solve(a, b), rtol=tolerance,
                               atol=tolerance)
    assert all(p.dtype == dtype for p in params)
    assert opt.state[0]["d"].dtype == dtype and opt.state[0]["func_evals"] <= 62


def rosenbrock(x):
    """Rosenbrock's function of a 2-element tensor (minimum 0 at (1, 1))."""
    return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2


@pytest.mark.parametrize("line_search_fn, lr, steps", [(None, 0.1, 40), ("strong_wolfe", 1, 5)])
def test_lbfgs_minimizes_rosenbrock(line_search_fn, lr, steps):
    x = nn.Parameter(kiln.tensor([-1.5, 2.0], dtype=kiln.float64))
    opt = LBFGS([x], lr=lr, line_search_fn=line_search_fn)
    closure = closure_of(opt, lambda: rosenbrock(x))
    losses = [opt.step(closure).item() for _ in range(steps)]
    assert losses[-1] < 1e-3 * losses[0]
    np.testing.assert_allclose(x.numpy(), [1.0, 1.0], atol=1e-3 if line_search_fn else 5e-2)


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_maximize_is_minimizing_the_negation(line_search_fn):
    runs = []
    for sign, maximize in [(1.0, False), (-1.0, True)]:
        _, _, _, params, loss = quadratic_problem(kiln.float64, seed=3)
        opt = LBFGS(params, lr=0.5, max_iter=5, line_search_fn=line_search_fn,
                    maximize=maximize)
        closure = closure_of(opt, loss, sign)
        returned = [opt.step(closure).item() for _ in range(2)]
        runs.append((flat(params), [sign * r for r in returned], opt.state[0]["func_evals"]))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    assert runs[0][1:] == runs[1][1:]


def test_lbfgs_stops_at_once_when_the_gradient_is_below_tolerance():
    x = nn.Parameter(kiln.tensor([1.0, 1.0], dtype=kiln.float64))
    opt = LBFGS([x])
    assert opt.step(closure_of(opt, lambda: rosenbrock(x))).item() == 0.0
    assert opt.state[0] == {"func_evals": 1, "n_iter": 0}
    np.testing.assert_array_equal(x.numpy(), [1.0, 1.0])


def test_lbfgs_state_dict_resumes_exactly_and_is_a_copy():
    _, _, _, params, loss = quadratic_problem(kiln.float64, seed=1)
    opt = LBFGS(params, lr=0.3, max_iter=3, history_size=2)
    closure = closure_of(opt, loss)
    assert opt.state_dict()["state"] == {}
    opt.step(closure)
    saved = opt.state_dict()
    assert saved["param_groups"] == [dict(opt.param_groups[0], params=[0, 1])]
    n_iter, d = opt.state[0]["n_iter"], opt.state[0]["d"].numpy().copy()
    start = [p.numpy().copy() for p in params]
    opt.step(closure)
    opt.step(closure)
    after = flat(params)
    # a copy: later steps did not change it
    assert saved["state"][0]["n_iter"] == n_iter < opt.state[0]["n_iter"]
    np.testing.assert_array_equal(saved["state"][0]["d"].numpy(), d)
    with kiln.no_grad():
        for p, value in zip(params, start):
            p[...] = kiln.tensor(value)
    other = LBFGS(params, lr=0.3, max_iter=3, history_size=2)
    other.load_state_dict(saved)
    other.step(closure_of(other, loss))
    other.step(closure_of(other, loss))
    np.testing.assert_array_equal(flat(params), after)
    assert other.state[0]["n_iter"] == opt.state[0]["n_iter"]
    assert len(other.state[0]["old_dirs"]) == 2  # the history keeps history_size pairs


@pytest.mark.parametrize("change, error, message", [
    (lambda s: s["state"][0].update(d=np.zeros(3)), kiln.ShapeError,
     r"LBFGS.load_state_dict: state 'd' has shape \[3\] in the state dict, expected \[7\]"),
    (lambda s: s["state"][0]["old_dirs"].pop(), kiln.KilnValueError,
     r"old_dirs, old_stps and ro have \[2, 3, 3\] entries, expected as many each"),
    (lambda s: s["state"][0].pop("prev_loss"), kiln.KilnValueError,
     r"LBFGS.load_state_dict: the state has \[.*\], expected none, \['func_evals', 'n_iter'\]"),
    (lambda s: s["state"][0].update(t="0.5"), kiln.KilnTypeError,
     r"LBFGS.load_state_dict: state 't' is a str, expected a number"),
    (lambda s: s["state"][0].update(n_iter=1.5), kiln.KilnTypeError,
     r"LBFGS.load_state_dict: state 'n_iter' must be an int, got float 1.5"),
    (lambda s: s["state"].update({1: {"n_iter": 1}}), kiln.KilnValueError,
     r"LBFGS keeps its state under parameter 0 \(as PyTorch's does\), got state under \[1\]"),
    (lambda s: s["param_groups"][0].update(history_size=0), kiln.KilnValueError,
     r"LBFGS: history_size must be at least 1, got 0"),
    (lambda s: s.pop("state"), kiln.KilnValueError,
     r"LBFGS.load_state_dict: expected a dict with 'state' and 'param_groups'"),
], ids=["vector-shape", "list-lengths", "missing-key", "t-str", "n-iter-float",
        "other-parameter", "group", "no-state"])
def test_lbfgs_bad_state_dict_changes_nothing(change, error, message):
    _, _, _, params, loss = quadratic_problem(kiln.float64)
    opt = LBFGS(params, max_iter=4)
    closure = closure_of(opt, loss)
    opt.step(closure)
    saved = opt.state_dict()
    assert len(saved["state"][0]["old_dirs"]) == 3
    before = dict(opt.state[0])
    change(saved)
    with raises(error, match=message):
        opt.load_state_dict(saved)
    assert set(opt.state[0]) == set(before)
    assert all(opt.state[0][key] is value for key, value in before.items())
    assert opt.param_groups[0]["history_size"] == 100


def test_lbfgs_loads_a_state_without_history():
    # As PyTorch's after a first step that stopped at once (the gradient below tolerance).
    x = nn.Parameter(kiln.tensor([1.0, 2.0], dtype=kiln.float64))
    opt = LBFGS([x])
    opt.load_state_dict({"state": {0: {"func_evals": 1, "n_iter": 0}},
                         "param_groups": [dict(opt.defaults, params=[0])]})
    assert opt.state[0] == {"func_evals": 1, "n_iter": 0}
    with raises(kiln.KilnValueError, match="the state has n_iter 2 but no history"):
        opt.load_state_dict({"state": {0: {"func_evals": 3, "n_iter": 2}},
                             "param_groups": [dict(opt.defaults, params=[0])]})


@pytest.mark.parametrize("make, error, message", [
    (lambda ps: LBFGS(ps, lr=-1), kiln.KilnValueError,
     r"LBFGS: invalid learning rate -1, expected lr >= 0.0"),
    (lambda ps: LBFGS(ps, max_iter=0), kiln.KilnValueError,
     r"LBFGS: max_iter must be at least 1, got 0"),
    (lambda ps: LBFGS(ps, max_iter=2.5), kiln.KilnTypeError,
     r"LBFGS: max_iter must be an int, got float 2.5"),
    (lambda ps: LBFGS(ps, max_eval=0), kiln.KilnValueError,
     r"LBFGS: max_eval must be at least 1, got 0"),
    (lambda ps: LBFGS(ps, history_size=None), kiln.KilnTypeError,
     r"LBFGS: history_size must be an int, got NoneType None"),
    (lambda ps: LBFGS(ps, tolerance_grad="1e-7"), kiln.KilnTypeError,
     r"LBFGS: tolerance_grad must be a real number, got '1e-7' \(str\)"),
    (lambda ps: LBFGS(ps, line_search_fn="wolfe"), kiln.KilnValueError,
     r"LBFGS: line_search_fn must be None or 'strong_wolfe', got 'wolfe'"),
    (lambda ps: LBFGS([{"params": ps[:1]}, {"params": ps[1:]}]), kiln.KilnValueError,
     r"LBFGS doesn't support per-parameter options \(parameter groups\)"),
    (lambda ps: LBFGS(ps[:1]).add_param_group({"params": ps[1:]}), kiln.KilnValueError,
     r"LBFGS doesn't support per-parameter options \(parameter groups\)"),
    (lambda ps: LBFGS([ps[0], nn.Parameter(kiln.tensor(np.ones(2)))]), kiln.DTypeError,
     r"LBFGS: the parameters must share one dtype \(the algorithm works on them as one flat "
     r"vector\), got float32, float64"),
    (lambda ps: LBFGS(ps).step(), kiln.KilnTypeError,
     r"LBFGS.step\(\) needs a closure"),
    (lambda ps: LBFGS(ps)((mint.ones(2), mint.ones(2))), kiln.KilnTypeError,
     r"LBFGS cannot step from gradients \(opt\(grads\)\)"),
    (lambda ps: LBFGS(ps).step(lambda: None), kiln.KilnTypeError,
     r"LBFGS: the closure must return the loss \(a number or a one-element tensor\), got "
     r"NoneType"),
], ids=["lr", "max-iter-0", "max-iter-float", "max-eval-0", "history-size-none",
        "tolerance-str", "line-search", "two-groups", "add-group", "dtypes", "no-closure",
        "grads", "closure-none"])
def test_lbfgs_errors(make, error, message):
    with raises(error, match=message):
        make([nn.Parameter(mint.ones(2)), nn.Parameter(mint.ones(2))])


def test_lbfgs_without_a_closure_is_a_type_error_as_in_pytorch():
    with pytest.raises(TypeError):
        LBFGS([nn.Parameter(mint.ones(2))]).step()


def test_lbfgs_step_is_refused_inside_kiln_jit():
    x = nn.Parameter(kiln.tensor([-1.5, 2.0]))
    opt = LBFGS([x])
    closure = closure_of(opt, lambda: rosenbrock(x))
    with raises(kiln.KilnValueError, match="LBFGS.step cannot run inside a kiln.jit function"):
        kiln.jit(lambda v: opt.step(closure) * v)(mint.ones(1))
    np.testing.assert_array_equal(x.numpy(), np.float32([-1.5, 2.0]))
    assert opt.state[0] == {}


# ---------------------------------------------------------------------------------------------
# Against PyTorch


@contextlib.contextmanager
def torch_default_dtype(torch, dtype):
    """PyTorch's default dtype set to float64 for float64 runs: its 0-d state (step, ASGD's eta
    and mu) then is float64, as Kiln's is for float64 parameters."""
    saved = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64 if dtype == kiln.float64 else torch.float32)
    try:
        yield
    finally:
        torch.set_default_dtype(saved)


class Twins:
    """The same two parameters in Kiln and PyTorch, each with its optimizer ``cls``."""

    def __init__(self, torch, cls, kwargs, dtype, seed=0):
        self.torch, self.cls, self.kwargs, self.dtype = torch, cls, kwargs, dtype
        self.rng = np.random.default_rng(seed)
        self.values = [self.rng.standard_normal((3, 4)), self.rng.standard_normal(5)]
        self.kiln_params = [nn.Parameter(kiln.tensor(v, dtype=dtype)) for v in self.values]
        self.torch_params = [torch.tensor(v, dtype=getattr(torch, dtype.name),
                                          requires_grad=True) for v in self.values]
        self.kiln_opt = cls(self.kiln_params, **kwargs)
        self.torch_opt = self.make_torch()

    def make_torch(self):
        with torch_default_dtype(self.torch, self.dtype):
            return getattr(self.torch.optim, self.cls.__name__)(self.torch_params, **self.kwargs,
                                                               foreach=False)

    def step(self):
        grads = [random_gradient(self.rng, v.shape) for v in self.values]
        self.kiln_opt(tuple(kiln.tensor(g, dtype=self.dtype) for g in grads))
        for p, g in zip(self.torch_params, grads):
            p.grad = self.torch.tensor(g, dtype=p.dtype)
        with torch_default_dtype(self.torch, self.dtype):
            self.torch_opt.step()

    def check(self, what):
        for i, (k, t) in enumerate(zip(self.kiln_params, self.torch_params)):
            check_torch(k, t, self.dtype, f"{what} parameter {i}")
            kiln_state, torch_state = self.kiln_opt.state[i], self.torch_opt.state[t]
            assert set(kiln_state) == set(torch_state)
            for key, value in torch_state.items():
                check_torch(kiln_state[key], value, self.dtype, f"{what} state {key} of {i}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cls, kwargs", CASES, ids=IDS)
def test_updates_match_torch(torch, cls, kwargs, dtype):
    twins = Twins(torch, cls, kwargs, dtype)
    for step in range(STEPS):
        twins.step()
        twins.check(f"step {step + 1}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cls, kwargs", SETUPS, ids=SETUP_IDS)
def test_rates_set_between_steps_match_torch(torch, cls, kwargs, dtype):
    # From before the first step, where PyTorch makes Rprop's step sizes and ASGD's eta.
    twins = Twins(torch, cls, kwargs, dtype)
    for step, rate in enumerate(np.linspace(0.2, 0.01, STEPS)):
        for opt in (twins.kiln_opt, twins.torch_opt):
            opt.param_groups[0]["lr"] = float(rate)
        twins.step()
        twins.check(f"step {step + 1}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cls, kwargs", SETUPS, ids=SETUP_IDS)
@pytest.mark.parametrize("direction", ["kiln-to-torch", "torch-to-kiln"])
def test_state_dict_round_trip_resumes_as_torch(torch, cls, kwargs, dtype, direction):
    twins = Twins(torch, cls, kwargs, dtype)
    for _ in range(4):
        twins.step()
    if direction == "kiln-to-torch":
        saved = twins.kiln_opt.state_dict()
        state = {i: {k: torch.from_numpy(v.numpy().copy()) for k, v in s.items()}
                 for i, s in saved["state"].items()}
        # PyTorch's groups also hold its implementation flags, which Kiln's do not.
        groups = [{**t, **g} for g, t in zip(saved["param_groups"],
                                              twins.torch_opt.state_dict()["param_groups"])]
        twins.torch_opt = twins.make_torch()
        twins.torch_opt.load_state_dict({"state": state, "param_groups": groups})
    else:
        saved = twins.torch_opt.state_dict()
        keys = twins.kiln_opt.param_groups[0].keys()
        twins.kiln_opt = cls(twins.kiln_params, **kwargs)
        twins.kiln_opt.load_state_dict({
            "state": saved["state"],
            "param_groups": [{k: v for k, v in g.items() if k in keys}
                             for g in saved["param_groups"]]})
    for step in range(4, STEPS):
        twins.step()
        twins.check(f"step {step + 1}")


def torch_twin_of(torch, params):
    return [torch.tensor(p.numpy(), requires_grad=True) for p in params]


def torch_quadratic(torch, dtype, seed=0):
    """quadratic_problem's kiln parameters and loss, with their PyTorch twins and loss."""
    a, b, _, params, loss = quadratic_problem(dtype, seed)
    twins = torch_twin_of(torch, params)
    ta, tb = torch.tensor(a, dtype=twins[0].dtype), torch.tensor(b, dtype=twins[0].dtype)

    def torch_loss():
        x = torch.cat([twins[0].reshape(-1), twins[1]])
        return 0.5 * x.dot(ta @ x) - tb.dot(x)

    return params, loss, twins, torch_loss


def check_lbfgs_against_torch(ours, theirs, params, twins, dtype, what):
    """The parameters and the state of the step of two LBFGS, Kiln's and PyTorch's, alike."""
    rtol, atol = (1e-9, 1e-10) if dtype == kiln.float64 else (1e-4, 1e-5)
    for p, t in zip(params, twins):
        np.testing.assert_allclose(p.numpy(), t.detach().numpy(), rtol=rtol, atol=atol,
                                   err_msg=what)
    state, reference = ours.state[0], theirs.state[twins[0]]
    assert set(state) == set(reference) - {"al"}, what
    for key in ("func_evals", "n_iter"):
        assert state[key] == reference[key], f"{what}: {key}"
    for key in ("t", "H_diag", "prev_loss"):
        assert state[key] == pytest.approx(float(reference[key]), rel=rtol, abs=atol), key
    for key in ("d", "prev_flat_grad"):
        np.testing.assert_allclose(state[key].numpy(), reference[key].numpy(), rtol=rtol,
                                   atol=atol, err_msg=f"{what}: {key}")
    assert len(state["old_dirs"]) == len(reference["old_dirs"]), what


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_lbfgs_on_a_quadratic_matches_torch(torch, dtype, line_search_fn):
    params, loss, twins, torch_loss = torch_quadratic(torch, dtype)
    kwargs = dict(lr=0.5, max_iter=4, history_size=3, line_search_fn=line_search_fn)
    ours, theirs = LBFGS(params, **kwargs), torch.optim.LBFGS(twins, **kwargs)
    for step in range(3):
        returned = ours.step(closure_of(ours, loss))
        expected = theirs.step(closure_of(theirs, torch_loss))
        assert returned.item() == pytest.approx(expected.item(), rel=1e-5)
        check_lbfgs_against_torch(ours, theirs, params, twins, dtype, f"step {step}")


def test_lbfgs_maximize_matches_torch(torch):
    if "maximize" not in inspect.signature(torch.optim.LBFGS).parameters:
        pytest.skip("this PyTorch's LBFGS has no maximize")
    params, loss, twins, torch_loss = torch_quadratic(torch, kiln.float64, seed=2)
    kwargs = dict(max_iter=3, line_search_fn="strong_wolfe", maximize=True)
    ours, theirs = LBFGS(params, **kwargs), torch.optim.LBFGS(twins, **kwargs)
    for step in range(2):
        ours.step(closure_of(ours, loss, -1.0))
        theirs.step(closure_of(theirs, torch_loss, -1.0))
        check_lbfgs_against_torch(ours, theirs, params, twins, kiln.float64, f"step {step}")


@pytest.mark.parametrize("line_search_fn, lr", [(None, 0.02), ("strong_wolfe", 1)])
def test_lbfgs_on_rosenbrock_matches_torch(torch, line_search_fn, lr):
    x = nn.Parameter(kiln.tensor([-1.5, 2.0], dtype=kiln.float64))
    (tx,) = torch_twin_of(torch, [x])
    ours = LBFGS([x], lr=lr, max_iter=6, line_search_fn=line_search_fn)
    theirs = torch.optim.LBFGS([tx], lr=lr, max_iter=6, line_search_fn=line_search_fn)
    for step in range(4):
        ours.step(closure_of(ours, lambda: rosenbrock(x)))
        theirs.step(closure_of(theirs, lambda: rosenbrock(tx)))
        check_lbfgs_against_torch(ours, theirs, [x], [tx], kiln.float64, f"step {step}")


@pytest.mark.parametrize("direction", ["kiln-to-torch", "torch-to-kiln"])
def test_lbfgs_state_dict_round_trip_resumes_as_torch(torch, direction):
    x = nn.Parameter(kiln.tensor([-1.5, 2.0], dtype=kiln.float64))
    (tx,) = torch_twin_of(torch, [x])
    kwargs = dict(max_iter=3, line_search_fn="strong_wolfe", history_size=4)
    ours, theirs = LBFGS([x], **kwargs), torch.optim.LBFGS([tx], **kwargs)
    for _ in range(2):
        ours.step(closure_of(ours, lambda: rosenbrock(x)))
        theirs.step(closure_of(theirs, lambda: rosenbrock(tx)))
    if direction == "kiln-to-torch":
        def for_torch(value):  # kiln tensors as torch's, in lists too; numbers as they are
            if isinstance(value, list):
                return [for_torch(v) for v in value]
            if isinstance(value, kiln.Tensor):
                return torch.from_numpy(value.numpy().copy())
            return value

        saved = ours.state_dict()
        theirs = torch.optim.LBFGS([tx], **kwargs)
        theirs.load_state_dict({
            "state": {0: {k: for_torch(v) for k, v in saved["state"][0].items()}},
            "param_groups": saved["param_groups"]})
    else:
        ours = LBFGS([x], **kwargs)
        ours.load_state_dict(theirs.state_dict())  # with PyTorch's al, tensors and numbers
    for step in range(2, 4):
        ours.step(closure_of(ours, lambda: rosenbrock(x)))
        theirs.step(closure_of(theirs, lambda: rosenbrock(tx)))
        check_lbfgs_against_torch(ours, theirs, [x], [tx], kiln.float64, f"step {step}")
