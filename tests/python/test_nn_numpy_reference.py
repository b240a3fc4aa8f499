"""The composite activations and losses (kiln/mint/_composite.py), their kiln.nn cells, NLLLoss,
MaxPool2d / AvgPool2d / Flatten / Unflatten, BatchNorm1d / BatchNorm2d, the containers and
buffers against NumPy references written here, with PyTorch's semantics and state_dict names
spelled out literally. The torch comparisons of test_nn_activations.py, test_losses_composite.py,
test_nn_pooling_layers.py, test_batchnorm.py and test_nn_containers.py are skipped where torch is
not installed (a fresh CI machine); this file checks the same behaviour there."""

import numpy as np
import pytest

import kiln
from conftest import FLOAT_DTYPES, TOLERANCES, raises, t
from kiln import nn
from kiln.nn.activation import ELU, Hardtanh, LeakyReLU, Softplus
from kiln.nn.container import ModuleDict, ModuleList, ParameterDict, ParameterList
from kiln.nn.flatten import Flatten, Unflatten
from kiln.nn.loss import BCELoss, BCEWithLogitsLoss, HuberLoss, L1Loss, NLLLoss, SmoothL1Loss
from kiln.nn.normalization import BatchNorm1d, BatchNorm2d
from kiln.nn.pooling import AvgPool2d, MaxPool2d

mint = kiln.mint
DTYPES = pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: d.name)


def check(actual, expected, dtype, what="", scale_atol=False):
    """``actual`` (kiln) against a float64 NumPy ``expected`` at ``dtype``'s tolerance, NaNs
    equal; with ``scale_atol`` the absolute part scales with the largest expected magnitude
    (for sums whose terms cancel)."""
    rtol, atol = TOLERANCES[dtype]
    expected = np.asarray(expected, np.float64)
    assert tuple(actual.shape) == expected.shape, what
    if scale_atol:
        atol *= max(1.0, float(np.nanmax(np.abs(expected), initial=0.0)))
    np.testing.assert_allclose(np.asarray(actual.numpy(), np.float64), expected, rtol=rtol,
                               atol=atol, equal_nan=True, err_msg=what)


def in_dtype(values, dtype):
    """``values`` rounded to ``dtype`` (as float64), so the reference sees the kiln input."""
    return t(values, kiln.float64).to(dtype).numpy().astype(np.float64)


def sigmoid(z):
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # no overflow at any |z|


def value_and_input_grad(fn, values, dtype, rng, **kwargs):
    """fn(x) and the gradient of x for a random upstream; returns (out, grad, upstream)."""
    x = t(values, kiln.float64).to(dtype).requires_grad_()
    out = fn(x, **kwargs)
    upstream = in_dtype(rng.uniform(0.5, 2.0, out.shape), dtype)
    (grad,) = kiln.autograd.grad(out, x, t(upstream, kiln.float64).to(dtype))
    assert out.dtype == grad.dtype == dtype
    return out, grad, upstream


# ---------------------------------------------------------------------------------------------
# Activations: (value, derivative) references, PyTorch's choices at 0, the ends and NaN


def np_leaky_relu(x, negative_slope=0.01):
    positive = x > 0  # 0 and NaN take the slope
    return np.where(positive, x, x * negative_slope), np.where(positive, 1.0, negative_slope)


def np_elu(x, alpha=1.0):
    negative = x <= 0  # NaN is on the linear side: derivative 1
    return (np.where(negative, alpha * np.expm1(np.minimum(x, 0)), x),
            np.where(negative, alpha * np.exp(np.minimum(x, 0)), 1.0))


def np_softplus(x, beta=1.0, threshold=20.0):
    scaled = x * beta
    linear = scaled > threshold
    with np.errstate(invalid="ignore"):  # NaN stays NaN
        curve = np.logaddexp(0.0, scaled) / beta
    return (np.where(linear, x, curve),
            np.where(linear, 1.0, sigmoid(scaled)))


def np_hardtanh(x, min_val=-1.0, max_val=1.0):
    low, high = x <= min_val, x >= max_val  # derivative 0 at the ends, 1 at NaN
    return np.where(low, min_val, np.where(high, max_val, x)), np.where(low | high, 0.0, 1.0)


ACTIVATIONS = {
    "leaky_relu": (mint.leaky_relu, np_leaky_relu, {}),
    "leaky_relu-steep": (mint.leaky_relu, np_leaky_relu, {"negative_slope": -1.5}),
    "elu": (mint.elu, np_elu, {}),
    "elu-0.5": (mint.elu, np_elu, {"alpha": 0.5}),
    "softplus": (mint.softplus, np_softplus, {}),
    "softplus-beta2": (mint.softplus, np_softplus, {"beta": 2.0, "threshold": 5.0}),
    "softplus-negative-beta": (mint.softplus, np_softplus, {"beta": -1.0}),
    "hardtanh": (mint.hardtanh, np_hardtanh, {}),
    "hardtanh-0-6": (mint.hardtanh, np_hardtanh, {"min_val": 0.0, "max_val": 6.0}),
    "hardtanh-point": (mint.hardtanh, np_hardtanh, {"min_val": 0.5, "max_val": 0.5}),
}

# 0, hardtanh's ends, softplus's thresholds (20; 5 / 2) and both sides, where exp overflows
# float32 or float16, far below 0 (elu's exp(x) of 1e-13), and NaN.
EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, 6.0, 20.0, 19.5, 20.5, 2.5, 2.4, 2.6, -20.0, -30.0, -11.6,
         12.0, 100.0, -100.0, 1e4, -1e4, np.nan]


@DTYPES
@pytest.mark.parametrize("case", ACTIVATIONS)
def test_activation_values_and_gradients(case, dtype, rng):
    fn, reference, kwargs = ACTIVATIONS[case]
    values = in_dtype(np.concatenate([rng.uniform(-8, 8, 40), EDGES]), dtype)
    out, grad, upstream = value_and_input_grad(fn, values, dtype, rng, **kwargs)
    want, slope = reference(values, **kwargs)
    check(out, want, dtype, "value")
    check(grad, slope * upstream, dtype, "gradient")


@pytest.mark.parametrize("fn, kwargs, gradients", [
    (mint.leaky_relu, {"negative_slope": 0.1}, [0.1, 1.0, 0.1]),
    (mint.elu, {"alpha": 0.5}, [0.5, 1.0, 1.0]),
    (mint.hardtanh, {}, [1.0, 1.0, 1.0]),
    (mint.softplus, {}, [0.5, sigmoid(1e-3), np.nan]),
], ids=["leaky_relu", "elu", "hardtanh", "softplus"])
def test_activation_gradients_at_zero_and_nan(fn, kwargs, gradients):
    x = t([0.0, 1e-3, np.nan], kiln.float64).requires_grad_()
    out = fn(x, **kwargs)
    (grad,) = kiln.autograd.grad(mint.sum(out), x)
    np.testing.assert_allclose(grad.numpy(), gradients, rtol=1e-12)
    assert np.isnan(out.numpy()[2])


def test_elu_gradient_far_below_zero_is_alpha_times_exp():
    # Through expm1's own gradient, g * (y + 1), it would cancel to 0 at x = -20 in float32.
    values = np.array([-30.0, -20.0, -11.6, -1e-8, 0.0, 2.0], np.float32)
    x = t(values).requires_grad_()
    mint.elu(x, alpha=0.5).sum().backward()
    wide = values.astype(np.float64)
    np.testing.assert_allclose(x.grad.numpy(), np.where(wide <= 0, 0.5 * np.exp(wide), 1.0),
                               rtol=1e-6)


def test_hardtanh_gradient_is_zero_at_the_ends_of_its_range():
    # clamp's would be 1 there; PyTorch's hardtanh_backward tests min_val < x < max_val.
    x = t([-1.0, -0.999, 0.999, 1.0], kiln.float32).requires_grad_()
    (grad,) = kiln.autograd.grad(mint.sum(mint.hardtanh(x)), x)
    np.testing.assert_array_equal(grad.numpy(), [0.0, 1.0, 1.0, 0.0])


@pytest.mark.parametrize("cell, fn, kwargs, text", [
    (LeakyReLU(), np_leaky_relu, {}, "LeakyReLU(negative_slope=0.01)"),
    (LeakyReLU(0.2), np_leaky_relu, {"negative_slope": 0.2}, "LeakyReLU(negative_slope=0.2)"),
    (ELU(alpha=2), np_elu, {"alpha": 2.0}, "ELU(alpha=2.0)"),
    (Softplus(), np_softplus, {}, "Softplus(beta=1.0, threshold=20.0)"),
    (Softplus(2, 5), np_softplus, {"beta": 2.0, "threshold": 5.0},
     "Softplus(beta=2.0, threshold=5.0)"),
    (Hardtanh(0, 6), np_hardtanh, {"min_val": 0.0, "max_val": 6.0},
     "Hardtanh(min_val=0.0, max_val=6.0)"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_activation_cells(cell, fn, kwargs, text, rng):
    assert repr(cell) == text and list(cell.parameters()) == []
    values = in_dtype(rng.uniform(-8, 8, (2, 3, 4)), kiln.float32)
    out, grad, upstream = value_and_input_grad(cell, values, kiln.float32, rng)
    want, slope = fn(values, **kwargs)
    check(out, want, kiln.float32, "value")
    check(grad, slope * upstream, kiln.float32, "gradient")
    check(kiln.jit(cell)(t(values, kiln.float32)), want, kiln.float32, "jitted")


# ---------------------------------------------------------------------------------------------
# Losses: elementwise (loss, d loss / d input, d loss / d target) references, then reduced


def np_l1(x, y):
    return np.abs(x - y), np.sign(x - y), -np.sign(x - y)  # gradient 0 where equal


def np_smooth_l1(x, y, beta=1.0):
    d = x - y
    if beta == 0:
        return np_l1(x, y)
    small = np.abs(d) < beta
    grad = np.where(small, d / beta, np.sign(d))
    return np.where(small, 0.5 * d * d / beta, np.abs(d) - 0.5 * beta), grad, -grad


def np_huber(x, y, delta=1.0):
    d = x - y
    small = np.abs(d) < delta
    grad = np.where(small, d, delta * np.sign(d))
    return np.where(small, 0.5 * d * d, delta * (np.abs(d) - 0.5 * delta)), grad, -grad


def np_bce(x, y, weight=1.0):
    log_x, log_1mx = np.maximum(np.log(x), -100), np.maximum(np.log1p(-x), -100)
    return (-weight * (y * log_x + (1 - y) * log_1mx),
            -weight * (y / x - (1 - y) / (1 - x)), weight * (log_1mx - log_x))


def np_bce_logits(x, y, weight=1.0, pos_weight=1.0):
    log_sigmoid = np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x)))
    factor = (pos_weight - 1) * y + 1
    return (weight * ((1 - y) * x - factor * log_sigmoid),
            weight * ((1 - y) - factor * (1 - sigmoid(x))),
            weight * (-x - (pos_weight - 1) * log_sigmoid))


SHAPE = (4, 3, 5)


def regression_pair(rng):
    """Multiples of 1/8 (exact in every dtype), some equal and some exactly 1 or 0.375 apart."""
    x, y = (np.round(rng.uniform(-3, 3, SHAPE) * 8) / 8 for _ in range(2))
    y.flat[:6] = x.flat[:6]
    y.flat[6:9] = x.flat[6:9] + 1.0
    y.flat[9:12] = x.flat[9:12] - 0.375
    return x, y


def probability_pair(rng):
    target = rng.uniform(0, 1, SHAPE)
    target.flat[:10], target.flat[10:20] = 0.0, 1.0
    return rng.uniform(0.02, 0.98, SHAPE), target


def logit_pair(rng):
    x, target = rng.uniform(-8, 8, SHAPE), rng.uniform(0, 1, SHAPE)
    x.flat[:8] = [0.0, 30.0, -30.0, 100.0, -100.0, 1e4, -1e4, 17.0]
    target.flat[:8] = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.5]
    return x, target


# name: (kiln function, reference, inputs, extra arguments: numbers, or shapes of weights)
LOSSES = {
    "l1": (mint.l1_loss, np_l1, regression_pair, {}),
    "smooth_l1": (mint.smooth_l1_loss, np_smooth_l1, regression_pair, {}),
    "smooth_l1-beta0.375": (mint.smooth_l1_loss, np_smooth_l1, regression_pair, {"beta": 0.375}),
    "smooth_l1-beta0": (mint.smooth_l1_loss, np_smooth_l1, regression_pair, {"beta": 0.0}),
    "huber": (mint.huber_loss, np_huber, regression_pair, {}),
    "huber-delta0.375": (mint.huber_loss, np_huber, regression_pair, {"delta": 0.375}),
    "huber-delta2.5": (mint.huber_loss, np_huber, regression_pair, {"delta": 2.5}),
    "bce": (mint.binary_cross_entropy, np_bce, probability_pair, {}),
    "bce-weight": (mint.binary_cross_entropy, np_bce, probability_pair, {"weight": (3, 1)}),
    "bce_logits": (mint.binary_cross_entropy_with_logits, np_bce_logits, logit_pair, {}),
    "bce_logits-weights": (mint.binary_cross_entropy_with_logits, np_bce_logits, logit_pair,
                           {"weight": (4, 1, 5), "pos_weight": (5,)}),
    "bce_logits-pos_weight": (mint.binary_cross_entropy_with_logits, np_bce_logits, logit_pair,
                              {"pos_weight": (3, 1)}),
}


def reduced(values, reduction):
    return {"mean": np.mean, "sum": np.sum, "none": np.asarray}[reduction](values)


def loss_arguments(extra, dtype, rng):
    """(kiln kwargs, NumPy kwargs): numbers as they are, a shape as weights of it (quarters)."""
    ours, reference = {}, {}
    for name, value in extra.items():
        if isinstance(value, tuple):
            reference[name] = np.round(rng.uniform(0.25, 3.0, value) * 4) / 4
            ours[name] = t(reference[name], kiln.float64).to(dtype)
        else:
            ours[name] = reference[name] = value
    return ours, reference


@DTYPES
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("case", LOSSES)
def test_loss_values_and_gradients(case, reduction, dtype, rng):
    fn, reference, make_inputs, extra = LOSSES[case]
    x_values, y_values = (in_dtype(v, dtype) for v in make_inputs(rng))
    x = t(x_values, kiln.float64).to(dtype).requires_grad_()
    y = t(y_values, kiln.float64).to(dtype).requires_grad_()
    ours, theirs = loss_arguments(extra, dtype, rng)
    out = fn(x, y, reduction=reduction, **ours)
    assert out.dtype == dtype
    loss, d_input, d_target = reference(x_values, y_values, **theirs)
    check(out, reduced(loss, reduction), dtype, "value", scale_atol=True)
    upstream = in_dtype(rng.uniform(0.5, 2.0, out.shape), dtype)
    scale = upstream / loss.size if reduction == "mean" else upstream
    grads = kiln.autograd.grad(out, [x, y], t(upstream, kiln.float64).to(dtype))
    check(grads[0], np.broadcast_to(d_input * scale, SHAPE), dtype, "input gradient",
          scale_atol=True)
    check(grads[1], np.broadcast_to(d_target * scale, SHAPE), dtype, "target gradient",
          scale_atol=True)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64], ids=lambda d: d.name)
def test_binary_cross_entropy_at_exact_zero_and_one(dtype):
    # Each log clamped at -100, as PyTorch's; a clamped log contributes no gradient.
    x = t([0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1e-45], dtype).requires_grad_()
    target = t([0.0, 1.0, 0.5, 0.0, 1.0, 0.5, 1.0], dtype).requires_grad_()
    out = mint.binary_cross_entropy(x, target, reduction="none")
    np.testing.assert_allclose(out.numpy()[:6], [0.0, 100.0, 50.0, 100.0, 0.0, 50.0])
    grad_x, grad_t = kiln.autograd.grad(mint.sum(out), [x, target])
    np.testing.assert_allclose(grad_x.numpy(), [1.0, 0.0, 0.5, 0.0, -1.0, -0.5, 0.0])
    np.testing.assert_allclose(grad_t.numpy(), [100.0] * 3 + [-100.0] * 3 + [100.0])


def test_losses_promote_mixed_dtypes_and_take_integer_regression_targets(rng):
    x32, x64 = rng.uniform(0.1, 0.9, (3, 4)).astype(np.float32), rng.uniform(0.1, 0.9, (3, 4))
    for fn, reference in [(mint.l1_loss, np_l1), (mint.huber_loss, np_huber),
                          (mint.binary_cross_entropy, np_bce),
                          (mint.binary_cross_entropy_with_logits, np_bce_logits)]:
        for a, b in [(x32, x64), (x64, x32)]:
            out = fn(t(a), t(b))
            assert out.dtype == kiln.float64
            check(out, reference(a.astype(np.float64), b.astype(np.float64))[0].mean(),
                  kiln.float64)
    y = rng.integers(-3, 4, (3, 4))
    for fn, reference in [(mint.l1_loss, np_l1), (mint.smooth_l1_loss, np_smooth_l1)]:
        out = fn(t(x32), t(y))
        assert out.dtype == kiln.float32
        check(out, reference(x32.astype(np.float64), y)[0].mean(), kiln.float32)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_loss_cells_match_the_references(reduction, rng):
    x, y = (t(v, kiln.float64) for v in regression_pair(rng))
    p, q = probability_pair(rng)
    weight, pos_weight = rng.uniform(0.5, 2.0, (3, 1)), rng.uniform(0.5, 2.0, 5)
    pairs = [
        (L1Loss(reduction)(x, y), np_l1(x.numpy(), y.numpy())),
        (SmoothL1Loss(reduction, 0.375)(x, y), np_smooth_l1(x.numpy(), y.numpy(), 0.375)),
        (HuberLoss(reduction, 2.5)(x, y), np_huber(x.numpy(), y.numpy(), 2.5)),
        (BCELoss(t(weight), reduction)(t(p), t(q)), np_bce(p, q, weight)),
        (BCEWithLogitsLoss(t(weight), reduction, t(pos_weight))(x, t(q)),
         np_bce_logits(x.numpy(), q, weight, pos_weight)),
    ]
    for got, (want, _, _) in pairs:
        check(got, reduced(want, reduction), kiln.float64, scale_atol=True)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_cell(reduction, rng):
    # Minus the log-probability at each target; ignore_index adds nothing, and "mean" divides
    # by the number of the other targets.
    log_probs = rng.standard_normal((6, 4, 3))
    target = rng.integers(0, 4, (6, 3))
    target[1, 2] = target[4, 0] = 2
    x = t(log_probs).requires_grad_()
    out = NLLLoss(reduction, ignore_index=2)(x, t(target))
    kept = target != 2
    picked = np.take_along_axis(log_probs, target[:, None], axis=1)[:, 0]
    losses = np.where(kept, -picked, 0.0)
    check(out, {"mean": losses.sum() / kept.sum(), "sum": losses.sum(),
                "none": losses}[reduction], kiln.float64)
    (grad,) = kiln.autograd.grad(mint.sum(out), x)
    want = np.zeros_like(log_probs)
    share = kept / kept.sum() if reduction == "mean" else kept.astype(np.float64)
    np.put_along_axis(want, target[:, None], -share[:, None], axis=1)
    check(grad, want, kiln.float64)


def test_bce_weights_are_buffers_with_pytorchs_names(rng):
    net = nn.Sequential(nn.Linear(2, 2), BCEWithLogitsLoss(weight=t([1.0, 0.5]),
                                                           pos_weight=t([2.0, 3.0])))
    assert list(net.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.pos_weight"]
    assert list(BCELoss().state_dict()) == [] and list(net[1].parameters()) == []
    held = net[1].weight
    net.load_state_dict({"1.weight": np.array([2.0, 4.0]), "1.pos_weight": np.ones(2)},
                        strict=False)
    assert net[1].weight is held and held.tolist() == [2.0, 4.0]
    x, q = rng.standard_normal((3, 2)).astype(np.float32), rng.uniform(0, 1, (3, 2))
    check(net[1](t(x), t(q, kiln.float32)),
          np_bce_logits(x.astype(np.float64), q, np.array([2.0, 4.0]))[0].mean(), kiln.float32)


# ---------------------------------------------------------------------------------------------
# Pooling, Flatten and Unflatten


def pair(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value, value)


def pooled_size(size, k, s, p, d, ceil_mode):
    span = size + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    # PyTorch: in ceil mode, the last window must start inside the input or its left padding
    return out - 1 if ceil_mode and (out - 1) * s >= size + p else out


def np_pool(x, upstream_of, kind, kernel_size, stride=None, padding=0, dilation=1,
            ceil_mode=False, count_include_pad=True):
    """PyTorch's max / avg pooling of x [N, C, H, W] and the gradient of x for the upstream
    ``upstream_of(output shape)``; returns (output, gradient, upstream)."""
    (kh, kw), (ph, pw), (dh, dw) = pair(kernel_size), pair(padding), pair(dilation)
    sh, sw = pair(kernel_size if stride is None else stride)
    n, c, h, w = x.shape
    oh, ow = pooled_size(h, kh, sh, ph, dh, ceil_mode), pooled_size(w, kw, sw, pw, dw, ceil_mode)
    out, grad = np.empty((n, c, oh, ow)), np.zeros_like(x)
    upstream = upstream_of(out.shape)
    nn_, cc = np.meshgrid(np.arange(n), np.arange(c), indexing="ij")
    for i in range(oh):
        for j in range(ow):
            rows = np.array([r for r in range(i * sh - ph, i * sh - ph + kh * dh, dh)
                             if 0 <= r < h])
            cols = np.array([q for q in range(j * sw - pw, j * sw - pw + kw * dw, dw)
                             if 0 <= q < w])
            window = x[:, :, rows][:, :, :, cols].reshape(n, c, -1)
            if kind == "max":
                best = window.argmax(-1)
                out[:, :, i, j] = window.max(-1)
                np.add.at(grad, (nn_, cc, rows[best // len(cols)], cols[best % len(cols)]),
                          upstream[:, :, i, j])
            else:
                top, left = i * sh - ph, j * sw - pw
                divisor = ((min(top + kh, h + ph) - top) * (min(left + kw, w + pw) - left)
                           if count_include_pad else window.shape[-1])
                out[:, :, i, j] = window.sum(-1) / divisor
                grad[:, :, rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1] += (
                    upstream[:, :, i, j, None, None] / divisor)
    return out, grad, upstream


POOLS = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 0)),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=(3, 2), stride=2, padding=1, ceil_mode=True),
]
# Max pooling takes dilation too.
MAX_POOLS = POOLS + [dict(kernel_size=(2, 3), stride=1, dilation=(2, 1)),
                     dict(kernel_size=2, padding=1, dilation=2)]


def distinct_values(rng, dtype):
    """x [2, 3, 7, 8] whose values in each channel are distinct multiples of 1/8 (exact in every
    dtype, so the maximum of a window, and where its gradient goes, is unique)."""
    values = np.stack([rng.permutation(56) for _ in range(6)]).reshape(2, 3, 7, 8)
    return in_dtype((values - 28) / 8, dtype)


def check_pool(cell, kind, kwargs, dtype, rng):
    values = distinct_values(rng, dtype)
    x = t(values, kiln.float64).to(dtype).requires_grad_()
    out = cell(x)
    want, want_grad, upstream = np_pool(
        values, lambda shape: in_dtype(rng.uniform(0.5, 2.0, shape), dtype), kind, **kwargs)
    check(out, want, dtype, "value")
    (grad,) = kiln.autograd.grad(out, x, t(upstream, kiln.float64).to(dtype))
    check(grad, want_grad, dtype, "gradient")


@DTYPES
@pytest.mark.parametrize("kwargs", MAX_POOLS, ids=str)
def test_max_pool2d(kwargs, dtype, rng):
    check_pool(MaxPool2d(**kwargs), "max", kwargs, dtype, rng)


@DTYPES
@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("kwargs", POOLS, ids=str)
def test_avg_pool2d(kwargs, count_include_pad, dtype, rng):
    cell = AvgPool2d(count_include_pad=count_include_pad, **kwargs)
    check_pool(cell, "avg", dict(kwargs, count_include_pad=count_include_pad), dtype, rng)


def test_pooling_cells_take_pytorchs_positional_arguments_and_print_as_pytorch(rng):
    # MaxPool2d(kernel_size, stride, padding, dilation, return_indices, ceil_mode) and
    # AvgPool2d(kernel_size, stride, padding, ceil_mode, count_include_pad).
    check_pool(MaxPool2d(3, 2, 1, 1, False, True), "max",
               dict(kernel_size=3, stride=2, padding=1, ceil_mode=True), kiln.float64, rng)
    check_pool(AvgPool2d(3, 2, 1, True, False), "avg",
               dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
               kiln.float64, rng)
    assert repr(MaxPool2d(2)) == ("MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, "
                                  "ceil_mode=False)")
    assert repr(AvgPool2d(3, 1, 1)) == "AvgPool2d(kernel_size=3, stride=1, padding=1)"
    assert repr(Flatten()) == "Flatten(start_dim=1, end_dim=-1)"
    assert repr(Unflatten(1, (2, 3))) == "Unflatten(dim=1, unflattened_size=(2, 3))"


@pytest.mark.parametrize("cell, shape, expected", [
    (Flatten(), (2, 3, 4, 5), (2, 60)),
    (Flatten(0, -1), (2, 3, 4, 5), (120,)),
    (Flatten(-3, -2), (2, 3, 4, 5), (2, 12, 5)),
    (Flatten(2, 2), (2, 3, 4, 5), (2, 3, 4, 5)),
    (Unflatten(1, (3, 4)), (2, 12, 5), (2, 3, 4, 5)),
    (Unflatten(-1, (2, -1)), (2, 3, 6), (2, 3, 2, 3)),
    (Unflatten(1, [-1]), (2, 3), (2, 3)),
    (Unflatten(1, (0, 5)), (2, 0), (2, 0, 5)),
], ids=repr)
def test_flatten_and_unflatten_reshape_values_and_gradients(cell, shape, expected, rng):
    values = rng.standard_normal(shape)
    out, grad, upstream = value_and_input_grad(cell, values, kiln.float32, rng)
    check(out, values.reshape(expected), kiln.float32)
    check(grad, upstream.reshape(shape), kiln.float32)


# ---------------------------------------------------------------------------------------------
# BatchNorm1d and BatchNorm2d

BUFFERS = ["running_mean", "running_var", "num_batches_tracked"]
BN_SHAPES = {"1d-NC": (BatchNorm1d, (8, 3)), "1d-NCL": (BatchNorm1d, (4, 3, 5)),
             "2d-NCHW": (BatchNorm2d, (2, 3, 4, 5))}


def np_batch_norm(x, weight, bias, eps, mean=None, var=None):
    """y and a backward dy -> (dx, dweight, dbias); batch statistics (biased var) unless
    ``mean`` and ``var`` (running statistics, constants) are given."""
    axes, view = (0,) + tuple(range(2, x.ndim)), [1, -1] + [1] * (x.ndim - 2)
    batch = mean is None
    if batch:
        mean, var = x.mean(axes), x.var(axes)
    inv = 1 / np.sqrt(var.reshape(view) + eps)
    xhat = (x - mean.reshape(view)) * inv

    def backward(dy):
        dxhat = dy * weight.reshape(view)
        if batch:  # the mean and variance depend on x too
            dxhat = (dxhat - dxhat.mean(axes, keepdims=True)
                     - xhat * (dxhat * xhat).mean(axes, keepdims=True))
        return dxhat * inv, (dy * xhat).sum(axes), dy.sum(axes)

    return xhat * weight.reshape(view) + bias.reshape(view), backward


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("momentum", [0.1, None], ids=["momentum", "cumulative"])
@pytest.mark.parametrize("case", list(BN_SHAPES))
def test_batch_norm_training_steps_then_eval(case, momentum, jit, rng):
    cls, shape = BN_SHAPES[case]
    dtype = kiln.float64
    bn = cls(3, momentum=momentum, eps=1e-3, dtype=dtype)
    weight, bias = rng.uniform(0.5, 1.5, 3), rng.uniform(-1, 1, 3)
    bn.load_state_dict({"weight": weight, "bias": bias}, strict=False)
    assert list(bn.state_dict()) == ["weight", "bias"] + BUFFERS
    grad_fn = kiln.value_and_grad(lambda x, cot: (bn(x) * cot).sum(), 0, [bn.weight, bn.bias])
    step = kiln.jit(grad_fn) if jit else grad_fn
    running_mean, running_var = np.zeros(3), np.ones(3)
    axes = (0,) + tuple(range(2, len(shape)))
    for i in range(1, 4):
        x, cot = rng.standard_normal(shape) * 2 + 1, rng.standard_normal(shape)
        loss, (x_grad, (w_grad, b_grad)) = step(t(x), t(cot))
        y, backward = np_batch_norm(x, weight, bias, 1e-3)
        check(loss, (y * cot).sum(), dtype, f"loss at step {i}", scale_atol=True)
        for got, want, what in zip((x_grad, w_grad, b_grad), backward(cot),
                                   ("input", "weight", "bias")):
            check(got, want, dtype, f"{what} gradient at step {i}", scale_atol=True)
        factor = 1 / i if momentum is None else momentum
        running_mean = (1 - factor) * running_mean + factor * x.mean(axes)
        running_var = (1 - factor) * running_var + factor * x.var(axes, ddof=1)  # unbiased
        check(bn.running_mean, running_mean, dtype, f"running_mean at step {i}")
        check(bn.running_var, running_var, dtype, f"running_var at step {i}")
        assert bn.num_batches_tracked.item() == i and bn.num_batches_tracked.dtype == kiln.int64

    assert bn.eval() is bn and not bn.training
    x, cot = rng.standard_normal(shape), rng.standard_normal(shape)
    loss, (x_grad, (w_grad, b_grad)) = grad_fn(t(x), t(cot))
    y, backward = np_batch_norm(x, weight, bias, 1e-3, running_mean, running_var)
    check(loss, (y * cot).sum(), dtype, "eval loss", scale_atol=True)
    for got, want, what in zip((x_grad, w_grad, b_grad), backward(cot),
                               ("input", "weight", "bias")):
        check(got, want, dtype, f"eval {what} gradient", scale_atol=True)
    check(bn.running_mean, running_mean, dtype, "running_mean after eval")  # nothing updated
    assert bn.num_batches_tracked.item() == 3


@pytest.mark.parametrize("case", list(BN_SHAPES))
def test_batch_norm_without_running_statistics_or_affine_parameters(case, rng):
    cls, shape = BN_SHAPES[case]
    x = rng.standard_normal(shape)
    untracked = cls(3, track_running_stats=False, dtype=kiln.float64)
    assert untracked.running_mean is None and untracked.num_batches_tracked is None
    assert list(untracked.state_dict()) == ["weight", "bias"] and not list(untracked.buffers())
    for mode in (True, False):  # batch statistics in eval mode too
        check(untracked.train(mode)(t(x)), np_batch_norm(x, np.ones(3), np.zeros(3), 1e-5)[0],
              kiln.float64, f"training={mode}")
    plain = cls(3, affine=False, dtype=kiln.float64)
    assert plain.weight is None and list(plain.parameters()) == []
    assert list(plain.state_dict()) == BUFFERS
    xt = t(x).requires_grad_()
    out = plain(xt)
    y, backward = np_batch_norm(x, np.ones(3), np.zeros(3), 1e-5)
    cot = rng.standard_normal(shape)
    (grad,) = kiln.autograd.grad(out, xt, t(cot))
    check(out, y, kiln.float64, "value")
    check(grad, backward(cot)[0], kiln.float64, "input gradient")


def test_an_empty_training_batch_leaves_the_running_statistics_alone():
    bn = BatchNorm1d(3)
    bn(mint.zeros((0, 3)))
    assert bn.running_mean.tolist() == [0.0] * 3 and bn.running_var.tolist() == [1.0] * 3
    assert bn.num_batches_tracked.item() == 1  # counted, as PyTorch


# ---------------------------------------------------------------------------------------------
# Containers and buffers: PyTorch's names, spelled out


class Model(nn.Cell):
    def __init__(self):
        super().__init__()
        self.layers = ModuleList([nn.Linear(3, 4), BatchNorm1d(4), nn.Linear(4, 4)])
        self.heads = ModuleDict({"cls": nn.Linear(4, 2), "reg": nn.Linear(4, 1)})
        self.scales = ParameterList([mint.ones(4), mint.full((4,), 0.5)])
        self.gates = ParameterDict({"out": mint.ones(2)})

    def construct(self, x):
        for layer in self.layers:
            x = layer(x)
        for scale in self.scales:
            x = x * scale
        return self.heads["cls"](x) * self.gates["out"], self.heads["reg"](x)


MODEL_KEYS = ["layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias",
              "layers.1.running_mean", "layers.1.running_var", "layers.1.num_batches_tracked",
              "layers.2.weight", "layers.2.bias", "heads.cls.weight", "heads.cls.bias",
              "heads.reg.weight", "heads.reg.bias", "scales.0", "scales.1", "gates.out"]


def names(cell):
    return [name for name, _ in cell.named_parameters()]


def test_nested_containers_have_pytorchs_names_and_compute_with_their_members(rng):
    model = Model()
    assert list(model.state_dict()) == MODEL_KEYS
    assert names(model) == [k for k in MODEL_KEYS if k.split(".")[-1] not in BUFFERS]
    assert [n for n, _ in model.named_buffers()] == ["layers.1." + b for b in BUFFERS]
    assert [n for n, _ in model.named_modules()] == [
        "", "layers", "layers.0", "layers.1", "layers.2", "heads", "heads.cls", "heads.reg",
        "scales", "gates"]
    members = [model.layers[0], model.layers[1], model.layers[2], model.heads["cls"],
               model.heads["reg"]]
    expected = [p for cell in members for p in (cell.weight, cell.bias)]
    expected += [model.scales[0], model.scales[1], model.gates["out"]]
    assert [id(p) for p in model.parameters()] == [id(p) for p in expected]

    state = {k: rng.standard_normal(tuple(v.shape)).astype(np.float32)
             for k, v in model.state_dict().items()}
    state["layers.1.running_var"] = rng.uniform(0.5, 2.0, 4).astype(np.float32)
    state["layers.1.num_batches_tracked"] = np.int64(5)
    running_mean = model.layers[1].running_mean
    assert model.load_state_dict(state) == nn.LoadResult([], [])
    assert model.layers[1].running_mean is running_mean  # loaded in place
    s = {k: np.asarray(v, np.float64) for k, v in state.items()}

    def reference(x, mean, var):
        h = x @ s["layers.0.weight"].T + s["layers.0.bias"]
        h, _ = np_batch_norm(h, s["layers.1.weight"], s["layers.1.bias"], 1e-5, mean, var)
        h = (h @ s["layers.2.weight"].T + s["layers.2.bias"]) * s["scales.0"] * s["scales.1"]
        return ((h @ s["heads.cls.weight"].T + s["heads.cls.bias"]) * s["gates.out"],
                h @ s["heads.reg.weight"].T + s["heads.reg.bias"])

    x = rng.standard_normal((6, 3)).astype(np.float32)
    model.eval()
    for got, want in zip(model(t(x)), reference(x, s["layers.1.running_mean"],
                                                 s["layers.1.running_var"])):
        check(got, want, kiln.float32, "eval output")
    model.train()
    for got, want in zip(model(t(x)), reference(x, None, None)):
        check(got, want, kiln.float32, "training output")
    hidden = x @ s["layers.0.weight"].T + s["layers.0.bias"]
    check(model.layers[1].running_mean, 0.9 * s["layers.1.running_mean"] + 0.1 * hidden.mean(0),
          kiln.float32, "running_mean")
    assert model.state_dict()["layers.1.num_batches_tracked"].item() == 6


def test_module_list_edits_renumber_the_keys_as_pytorch():
    a, b, c, d = (nn.Linear(2, 2) for _ in range(4))
    layers = ModuleList([a, b, c, d])

    def keys(*indices):
        return [f"{i}.{p}" for i in indices for p in ("weight", "bias")]

    del layers[1]
    assert list(layers) == [a, c, d] and list(layers.state_dict()) == keys(0, 1, 2)
    layers.insert(0, layers[2])  # d twice: every name in state_dict, each parameter once
    assert list(layers) == [d, a, c, d] and list(layers.state_dict()) == keys(0, 1, 2, 3)
    assert names(layers) == keys(0, 1, 2)
    assert layers.pop(1) is a and list(layers) == [d, c, d]
    layers.append(b)
    assert list(layers.state_dict()) == keys(0, 1, 2, 3) and names(layers) == keys(0, 1, 3)
    del layers[0:2]
    assert list(layers) == [d, b] and list(layers.state_dict()) == keys(0, 1)
    assert [id(p) for p in layers.parameters()] == [id(d.weight), id(d.bias), id(b.weight),
                                                    id(b.bias)]


def test_module_dict_keys_follow_its_edits_as_pytorch():
    heads = ModuleDict({"enc": nn.Linear(2, 2), "dec": nn.Linear(2, 2)})
    heads.update([("mid", heads["enc"])])
    assert list(heads.state_dict()) == ["enc.weight", "enc.bias", "dec.weight", "dec.bias",
                                        "mid.weight", "mid.bias"]
    assert names(heads) == ["enc.weight", "enc.bias", "dec.weight", "dec.bias"]
    heads.pop("enc")
    assert names(heads) == list(heads.state_dict()) == ["dec.weight", "dec.bias", "mid.weight",
                                                        "mid.bias"]


def test_parameter_containers_have_pytorchs_names_and_load():
    cell = nn.Cell()
    cell.plist = ParameterList([mint.ones(2), mint.ones(3)])
    cell.pdict = ParameterDict({"w": mint.ones(2)})
    assert list(cell.state_dict()) == names(cell) == ["plist.0", "plist.1", "pdict.w"]
    held = cell.plist[1]
    assert cell.load_state_dict({"plist.0": np.full(2, 3.0), "plist.1": np.full(3, 3.0),
                                 "pdict.w": [3.0, 3.0]}) == nn.LoadResult([], [])
    assert cell.plist[1] is held and held.tolist() == [3, 3, 3]
    assert cell.pdict["w"].tolist() == [3, 3]


class WithBuffers(nn.Cell):
    def __init__(self):
        super().__init__()
        self.register_buffer("steps", mint.zeros((), dtype=kiln.int64))
        self.scale = nn.Parameter(mint.ones(2))
        self.register_buffer("cache", mint.zeros(2), persistent=False)
        self.inner = nn.Linear(2, 2)


def test_buffers_are_listed_saved_unless_not_persistent_and_loaded_in_place():
    cell = WithBuffers()
    # PyTorch's order: the cell's own parameters, then its persistent buffers, then sub-cells'.
    assert list(cell.state_dict()) == ["scale", "steps", "inner.weight", "inner.bias"]
    assert [n for n, _ in cell.named_buffers()] == ["steps", "cache"]
    assert names(cell) == ["scale", "inner.weight", "inner.bias"]
    steps = cell.steps
    cell.load_state_dict({"steps": 7}, strict=False)
    assert cell.steps is steps and steps.item() == 7 and steps.dtype == kiln.int64
    with raises(kiln.KilnValueError, match=r"unexpected keys \['cache'\]"):
        cell.load_state_dict(dict(cell.state_dict(), cache=np.ones(2)))
    assert cell.cache.tolist() == [0.0, 0.0]
    cell.register_buffer("cache", mint.ones(2))  # registered again: now persistent
    assert "cache" in cell.state_dict()
