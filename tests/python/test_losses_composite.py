"""kiln.mint's composite losses (l1_loss, smooth_l1_loss, huber_loss, binary_cross_entropy and
binary_cross_entropy_with_logits; kiln/mint/_composite.py) and kiln.nn's L1Loss, SmoothL1Loss,
HuberLoss, BCELoss, BCEWithLogitsLoss and NLLLoss against PyTorch's: values and the gradients of
input and target in every floating dtype and reduction, weights, exact 0 and 1 probabilities,
large logits, under kiln.jit, and every argument error."""

import numpy as np
import pytest

import kiln
from conftest import FLOAT_DTYPES, TOLERANCES, check_torch, raises, random_array, t, torch_twin
from kiln.mint import _composite
from kiln.nn.loss import BCELoss, BCEWithLogitsLoss, HuberLoss, L1Loss, NLLLoss, SmoothL1Loss

mint = kiln.mint
REDUCTIONS = ["mean", "sum", "none"]
SHAPE = (4, 3, 5)






def eighths(shape, rng, low=-3.0, high=3.0):
    """Multiples of 1/8: exact in every dtype, so differences hit beta and delta exactly."""
    return np.round(rng.uniform(low, high, shape) * 8) / 8


def regression_pair(dtype, rng):
    x = eighths(SHAPE, rng)
    y = eighths(SHAPE, rng)
    y.flat[:6] = x.flat[:6]            # equal: |diff| = 0
    y.flat[6:9] = x.flat[6:9] + 1.0    # |diff| = beta or delta exactly
    y.flat[9:12] = x.flat[9:12] - 0.375
    return x, y


def probability_pair(dtype, rng):
    p = rng.uniform(0.02, 0.98, SHAPE)
    target = rng.uniform(0.0, 1.0, SHAPE)
    target.flat[:10] = 0.0
    target.flat[10:20] = 1.0
    return p, target


def logit_pair(dtype, rng):
    x, target = rng.uniform(-8.0, 8.0, SHAPE), rng.uniform(0.0, 1.0, SHAPE)
    x.flat[:8] = [0.0, 30.0, -30.0, 100.0, -100.0, 1e4, -1e4, 17.0]
    target.flat[:8] = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.5]
    return x, target


# name: (kiln function, torch.nn.functional's name, inputs, extra arguments)
CASES = {
    "l1": (_composite.l1_loss, "l1_loss", regression_pair, {}),
    "smooth_l1": (_composite.smooth_l1_loss, "smooth_l1_loss", regression_pair, {}),
    "smooth_l1-beta0.375": (_composite.smooth_l1_loss, "smooth_l1_loss", regression_pair,
                            {"beta": 0.375}),
    "smooth_l1-beta0": (_composite.smooth_l1_loss, "smooth_l1_loss", regression_pair,
                        {"beta": 0.0}),
    "huber": (_composite.huber_loss, "huber_loss", regression_pair, {}),
    "huber-delta0.375": (_composite.huber_loss, "huber_loss", regression_pair, {"delta": 0.375}),
    "huber-delta2.5": (_composite.huber_loss, "huber_loss", regression_pair, {"delta": 2.5}),
    "bce": (_composite.binary_cross_entropy, "binary_cross_entropy", probability_pair, {}),
    "bce-weight": (_composite.binary_cross_entropy, "binary_cross_entropy", probability_pair,
                   {"weight": (3, 1)}),
    "bce_logits": (_composite.binary_cross_entropy_with_logits,
                   "binary_cross_entropy_with_logits", logit_pair, {}),
    "bce_logits-weights": (_composite.binary_cross_entropy_with_logits,
                           "binary_cross_entropy_with_logits", logit_pair,
                           {"weight": (4, 1, 5), "pos_weight": (5,)}),
    "bce_logits-pos_weight": (_composite.binary_cross_entropy_with_logits,
                              "binary_cross_entropy_with_logits", logit_pair,
                              {"pos_weight": (3, 1)}),
}


def arguments(torch, extra, dtype, rng):
    """(kiln kwargs, torch kwargs): numbers as they are, a shape as random weights of it."""
    ours, theirs = {}, {}
    for name, value in extra.items():
        if isinstance(value, tuple):
            weights = np.round(rng.uniform(0.25, 3.0, value) * 4) / 4
            ours[name] = t(weights, kiln.float64).to(dtype)
            theirs[name] = torch_twin(torch, weights, dtype, requires_grad=False)
        else:
            ours[name] = theirs[name] = value
    return ours, theirs


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", CASES)
def test_loss_matches_torch(torch, case, reduction, dtype, rng):
    fn, torch_name, make_inputs, extra = CASES[case]
    x_values, y_values = make_inputs(dtype, rng)
    x = t(x_values, kiln.float64).to(dtype).requires_grad_()
    y = t(y_values, kiln.float64).to(dtype).requires_grad_()
    tx, ty = torch_twin(torch, x.numpy(), dtype), torch_twin(torch, y.numpy(), dtype)
    ours, theirs = arguments(torch, extra, dtype, rng)
    out = fn(x, y, reduction=reduction, **ours)
    expected = getattr(torch.nn.functional, torch_name)(tx, ty, reduction=reduction, **theirs)
    assert out.dtype == dtype and out.shape == tuple(expected.shape)
    check_torch(out, expected, dtype, "value", scale_atol=True)
    upstream = random_array(out.shape, dtype, rng, 0.5, 2.0)
    grads = kiln.autograd.grad(out, [x, y], t(upstream, dtype))
    wants = torch.autograd.grad(expected, [tx, ty], torch_twin(torch, upstream, dtype, False))
    for grad, want, what in zip(grads, wants, ["input gradient", "target gradient"]):
        assert grad.dtype == dtype
        check_torch(grad, want, dtype, what, scale_atol=True)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64], ids=lambda d: d.name)
def test_binary_cross_entropy_at_exact_zero_and_one(torch, dtype):
    # PyTorch clamps each log at -100: x = 0 or 1 against the wrong target costs 100, not inf.
    # The gradient is the clamped value's derivative: finite, with no part from a clamped log
    # (PyTorch's backward divides by max(x * (1 - x), 1e-12) there instead; see the docstring).
    x_values = [0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1e-45]
    t_values = [0.0, 1.0, 0.5, 0.0, 1.0, 0.5, 1.0]
    x = t(x_values, dtype).requires_grad_()
    target = t(t_values, dtype).requires_grad_()
    out = _composite.binary_cross_entropy(x, target, reduction="none")
    expected = torch.nn.functional.binary_cross_entropy(
        torch_twin(torch, x.numpy(), dtype), torch_twin(torch, t_values, dtype), reduction="none")
    check_torch(out, expected, dtype, "value", scale_atol=True)
    np.testing.assert_allclose(out.numpy()[:6], [0.0, 100.0, 50.0, 100.0, 0.0, 50.0])
    grad_x, grad_t = kiln.autograd.grad(mint.sum(out), [x, target])
    # d/dx: (1 - t) / (1 - x) at x = 0 (log x clamped), -t / x at x = 1 (log(1 - x) clamped),
    # 0 at 1e-45 (log x = -103.3, clamped).
    np.testing.assert_allclose(grad_x.numpy(), [1.0, 0.0, 0.5, 0.0, -1.0, -0.5, 0.0])
    # d/dt: log(1 - x) - log(x), both clamped.
    np.testing.assert_allclose(grad_t.numpy(), [100.0] * 3 + [-100.0] * 3 + [100.0])


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float16, kiln.bfloat16],
                         ids=lambda d: d.name)
def test_binary_cross_entropy_with_logits_is_finite_at_large_logits(dtype):
    # exp(|x|) never appears: the loss is |x| (or 0) and the gradient sigmoid(x) - t.
    x = t([-1e4, -100.0, 100.0, 1e4, 0.0], kiln.float64).to(dtype).requires_grad_()
    target = t([1.0, 0.0, 0.0, 1.0, 1.0], kiln.float64).to(dtype)
    out = _composite.binary_cross_entropy_with_logits(x, target, reduction="none")
    (grad,) = kiln.autograd.grad(mint.sum(out), x)
    np.testing.assert_allclose(out.numpy().astype(np.float64),
                               [1e4, 0.0, 100.0, 0.0, np.log(2)], rtol=TOLERANCES[dtype][0])
    np.testing.assert_allclose(grad.numpy().astype(np.float64), [-1.0, 0.0, 1.0, 0.0, -0.5])


@pytest.mark.parametrize("fn, torch_name", [
    (_composite.l1_loss, "l1_loss"),
    (_composite.huber_loss, "huber_loss"),
    (_composite.binary_cross_entropy, "binary_cross_entropy"),
    (_composite.binary_cross_entropy_with_logits, "binary_cross_entropy_with_logits"),
])
@pytest.mark.parametrize("swap", [False, True])
def test_mixed_dtypes_promote(torch, fn, torch_name, swap, rng):
    # Every loss computes in the promoted dtype. PyTorch's do not agree on one rule (huber_loss
    # keeps the input's dtype, binary_cross_entropy_with_logits the target's and
    # binary_cross_entropy refuses the pair), so the reference is the float64 loss.
    x = random_array((3, 4), kiln.float32, rng, 0.1, 0.9)
    y = random_array((3, 4), kiln.float64, rng, 0.1, 0.9)
    if swap:
        x, y = y, x
    out = fn(t(x), t(y))
    assert out.dtype == kiln.float64
    expected = getattr(torch.nn.functional, torch_name)(torch.tensor(x, dtype=torch.float64),
                                                        torch.tensor(y, dtype=torch.float64))
    check_torch(out, expected, kiln.float64, "value", scale_atol=True)


def test_regression_losses_take_integer_targets_as_pytorch(torch, rng):
    x = random_array((3, 4), kiln.float32, rng)
    y = rng.integers(-3, 4, (3, 4))
    for fn, name in [(_composite.l1_loss, "l1_loss"), (_composite.smooth_l1_loss,
                                                       "smooth_l1_loss")]:
        out = fn(t(x), t(y))
        assert out.dtype == kiln.float32
        check_torch(out, getattr(torch.nn.functional, name)(torch.tensor(x), torch.tensor(y)),
              kiln.float32, name, scale_atol=True)


@pytest.mark.parametrize("fn", [_composite.l1_loss, _composite.smooth_l1_loss,
                                _composite.huber_loss, _composite.binary_cross_entropy,
                                _composite.binary_cross_entropy_with_logits])
def test_losses_of_no_elements(fn):
    # As PyTorch's: the mean of nothing is NaN, the sum 0.
    empty = t(np.zeros((0, 3)), kiln.float32)
    assert np.isnan(fn(empty, empty).item())
    assert fn(empty, empty, reduction="sum").item() == 0.0
    assert fn(empty, empty, reduction="none").shape == (0, 3)


@pytest.mark.parametrize("case", ["l1", "smooth_l1-beta0.375", "huber-delta2.5", "bce-weight",
                                  "bce_logits-weights"])
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_losses_under_jit_match_eager(torch, case, reduction, rng):
    fn, _, make_inputs, extra = CASES[case]
    x, y = (t(v, kiln.float32) for v in make_inputs(kiln.float32, rng))
    kwargs, _ = arguments(torch, extra, kiln.float32, rng)

    def loss(a, b):
        return mint.sum(fn(a, b, reduction=reduction, **kwargs))

    eager_value, eager_grads = loss(x, y), kiln.grad(loss, grad_position=(0, 1))(x, y)
    jitted, jitted_grad = kiln.jit(loss), kiln.jit(kiln.grad(loss, grad_position=(0, 1)))
    for _ in range(2):  # the trace, then the compiled graph
        np.testing.assert_allclose(jitted(x, y).numpy(), eager_value.numpy(), rtol=1e-6)
        for got, want in zip(jitted_grad(x, y), eager_grads):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------------------------------------------
# Cells


def test_loss_cells_compute_their_functions(rng):
    x, y = (t(v, kiln.float32) for v in regression_pair(kiln.float32, rng))
    p, q = (t(v, kiln.float32) for v in probability_pair(kiln.float32, rng))
    weight = t(rng.uniform(0.5, 2.0, (3, 1)), kiln.float32)
    pos_weight = t(rng.uniform(0.5, 2.0, 5), kiln.float32)
    pairs = [
        (L1Loss()(x, y), _composite.l1_loss(x, y)),
        (L1Loss("sum")(x, y), _composite.l1_loss(x, y, "sum")),
        (SmoothL1Loss(beta=0.375)(x, y), _composite.smooth_l1_loss(x, y, beta=0.375)),
        (HuberLoss("none", 2.5)(x, y), _composite.huber_loss(x, y, "none", 2.5)),
        (BCELoss(weight)(p, q), _composite.binary_cross_entropy(p, q, weight)),
        (BCEWithLogitsLoss(weight, "sum", pos_weight)(x, q),
         _composite.binary_cross_entropy_with_logits(x, q, weight, "sum", pos_weight)),
    ]
    for got, want in pairs:
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    jitted = kiln.jit(BCEWithLogitsLoss(weight, pos_weight=pos_weight))
    np.testing.assert_allclose(jitted(x, q).numpy(), _composite.binary_cross_entropy_with_logits(
        x, q, weight, pos_weight=pos_weight).numpy(), rtol=1e-6)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64], ids=lambda d: d.name)
def test_nll_loss_cell_matches_torch(torch, reduction, dtype, rng):
    log_probs = random_array((6, 4, 3), dtype, rng)
    target = rng.integers(0, 4, (6, 3))
    target[1, 2] = target[4, 0] = 2
    x = t(log_probs, dtype).requires_grad_()
    out = NLLLoss(reduction, ignore_index=2)(mint.log_softmax(x, 1), t(target))
    tx = torch_twin(torch, log_probs, dtype)
    expected = torch.nn.NLLLoss(reduction=reduction, ignore_index=2)(
        torch.log_softmax(tx, 1), torch.tensor(target))
    check_torch(out, expected, dtype, "value", scale_atol=True)
    upstream = random_array(out.shape, dtype, rng, 0.5, 2.0)
    (grad,) = kiln.autograd.grad(out, x, t(upstream, dtype))
    (want,) = torch.autograd.grad(expected, tx, torch_twin(torch, upstream, dtype, False))
    check_torch(grad, want, dtype, "gradient", scale_atol=True)


@pytest.mark.parametrize("cell, text", [
    (NLLLoss(), "NLLLoss(reduction='mean')"),
    (L1Loss("sum"), "L1Loss(reduction='sum')"),
    (SmoothL1Loss(beta=0.5), "SmoothL1Loss(reduction='mean', beta=0.5)"),
    (HuberLoss(delta=2), "HuberLoss(reduction='mean', delta=2.0)"),
    (BCELoss(reduction="none"), "BCELoss(reduction='none')"),
    (BCEWithLogitsLoss(), "BCEWithLogitsLoss(reduction='mean')"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_loss_cell_repr(cell, text):
    assert repr(cell) == text
    assert list(cell.parameters()) == []


# ------------------------------------------------------------------------------------------------
# Errors


def _x():
    return t(np.full((3, 4), 0.5), kiln.float32)


@pytest.mark.parametrize("call, error, message", [
    (lambda x: _composite.l1_loss(x, t(np.zeros(4), kiln.float32)), kiln.ShapeError,
     r"l1_loss: input has shape \[3, 4\] and target has shape \[4\]; expected target of the "
     r"input's shape \(broadcasting them is usually a mistake"),
    (lambda x: _composite.smooth_l1_loss(t(np.zeros((3, 1))), t(np.zeros(3))), kiln.ShapeError,
     r"smooth_l1_loss: input has shape \[3, 1\] and target has shape \[3\]"),
    (lambda x: _composite.huber_loss(x, x[0]), kiln.ShapeError,
     r"huber_loss: input has shape \[3, 4\] and target has shape \[4\]"),
    (lambda x: _composite.binary_cross_entropy(x, x[:1]), kiln.ShapeError,
     r"binary_cross_entropy: input has shape \[3, 4\] and target has shape \[1, 4\]"),
    (lambda x: _composite.binary_cross_entropy_with_logits(x, x.T), kiln.ShapeError,
     r"binary_cross_entropy_with_logits: input has shape \[3, 4\] and target has shape \[4, 3\]"),
    (lambda x: _composite.binary_cross_entropy(x, x, weight=t(np.ones(3))), kiln.ShapeError,
     r"binary_cross_entropy: weight has shape \[3\], which does not broadcast to the input's "
     r"shape \[3, 4\]"),
    (lambda x: _composite.binary_cross_entropy_with_logits(x, x, weight=t(np.ones((2, 3, 4)))),
     kiln.ShapeError, r"weight has shape \[2, 3, 4\], which does not broadcast to the input's"),
    (lambda x: _composite.binary_cross_entropy_with_logits(x, x, pos_weight=t(np.ones(2))),
     kiln.ShapeError, r"binary_cross_entropy_with_logits: pos_weight has shape \[2\]"),
    (lambda x: _composite.binary_cross_entropy(x, x, weight=[1.0] * 4), kiln.KilnTypeError,
     "binary_cross_entropy: expected weight to be a kiln.Tensor or None, got list"),
    (lambda x: _composite.binary_cross_entropy_with_logits(x, x, pos_weight=2.0),
     kiln.KilnTypeError, "expected pos_weight to be a kiln.Tensor or None, got float"),
    (lambda x: _composite.l1_loss(x, x, reduction="avg"), kiln.KilnValueError,
     "l1_loss: expected reduction 'mean', 'sum' or 'none', got 'avg'"),
    (lambda x: _composite.binary_cross_entropy(x, x, reduction=None), kiln.KilnValueError,
     "binary_cross_entropy: expected reduction 'mean', 'sum' or 'none', got None"),
    (lambda x: _composite.l1_loss(t(np.zeros((3, 4), np.int64)), x), kiln.DTypeError,
     "l1_loss: expected a floating-point input, got int64"),
    (lambda x: _composite.binary_cross_entropy(x, t(np.ones((3, 4), np.int64))), kiln.DTypeError,
     "binary_cross_entropy: expected a floating-point target, got int64"),
    (lambda x: _composite.binary_cross_entropy_with_logits(x, t(np.ones((3, 4), bool))),
     kiln.DTypeError, "expected a floating-point target, got bool"),
    (lambda x: _composite.huber_loss(x, 0.5), kiln.KilnTypeError,
     "huber_loss: expected target to be a kiln.Tensor, got float"),
    (lambda x: _composite.smooth_l1_loss(np.zeros((3, 4)), x), kiln.KilnTypeError,
     "smooth_l1_loss: expected input to be a kiln.Tensor, got ndarray"),
    (lambda x: _composite.smooth_l1_loss(x, x, beta=-0.5), kiln.KilnValueError,
     "smooth_l1_loss: expected beta >= 0, got -0.5"),
    (lambda x: _composite.smooth_l1_loss(x, x, beta="1"), kiln.KilnTypeError,
     "smooth_l1_loss: expected beta to be a real number, got str '1'"),
    (lambda x: _composite.huber_loss(x, x, delta=0), kiln.KilnValueError,
     "huber_loss: expected delta > 0, got 0.0"),
    (lambda x: _composite.huber_loss(x, x, delta=float("nan")), kiln.KilnValueError,
     "huber_loss: expected delta > 0, got nan"),
    (lambda x: L1Loss("avg"), kiln.KilnValueError,
     r"L1Loss: reduction must be one of \('mean', 'sum', 'none'\), got 'avg'"),
    (lambda x: NLLLoss(ignore_index=1.5), kiln.KilnTypeError,
     "NLLLoss: ignore_index must be an int, got float 1.5"),
    (lambda x: SmoothL1Loss(beta=-1), kiln.KilnValueError,
     "SmoothL1Loss: expected beta >= 0, got -1"),
    (lambda x: HuberLoss(delta=-1.0), kiln.KilnValueError,
     "HuberLoss: expected delta > 0, got -1.0"),
    (lambda x: HuberLoss(delta=None), kiln.KilnTypeError,
     "HuberLoss: expected delta to be a real number, got NoneType"),
    (lambda x: BCELoss(np.ones(4)), kiln.KilnTypeError,
     "BCELoss: expected weight to be a kiln.Tensor or None, got ndarray"),
    (lambda x: BCEWithLogitsLoss(pos_weight=[2.0]), kiln.KilnTypeError,
     "BCEWithLogitsLoss: expected pos_weight to be a kiln.Tensor or None, got list"),
    (lambda x: BCEWithLogitsLoss(reduction="max"), kiln.KilnValueError, "BCEWithLogitsLoss"),
    (lambda x: BCELoss(t(np.ones(3), kiln.float32))(x, x), kiln.ShapeError,
     r"binary_cross_entropy: weight has shape \[3\]"),
])
def test_loss_errors(call, error, message):
    x = _x()
    with raises(error, match=message):
        call(x)
    assert x.tolist() == [[0.5] * 4] * 3  # inputs are left untouched


def test_bce_weights_are_buffers_as_in_pytorch(torch):
    ours = kiln.nn.Sequential(kiln.nn.Linear(2, 2),
                              BCEWithLogitsLoss(weight=t([1.0, 0.5]), pos_weight=t([2.0, 3.0])))
    theirs = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BCEWithLogitsLoss(
        weight=torch.tensor([1.0, 0.5]), pos_weight=torch.tensor([2.0, 3.0])))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict(theirs.state_dict())
    assert [name for name, _ in BCELoss(weight=t([1.0])).named_buffers()] == ["weight"]
