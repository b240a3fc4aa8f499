"""kiln.nn.functional (kiln/nn/functional.py) checked without PyTorch, so CI covers it: the
functions composed there against NumPy references and closed forms (values, finite-difference
gradients, PyTorch's gradients at kinks and NaN), the in-place variants, the arguments given in
PyTorch's order, kiln.jit, and every argument error. The PyTorch comparisons are in
test_nn_functional.py."""

import math
import warnings

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from conftest import TOLERANCES, raises, t
from kiln.mint import _composite

mint = kiln.mint
gradcheck = kiln.testing.gradcheck

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def assert_close(actual, expected, dtype=kiln.float64):
    rtol, atol = TOLERANCES[dtype]
    np.testing.assert_allclose(np.asarray(actual.numpy(), np.float64), expected, rtol=rtol,
                               atol=atol, equal_nan=True)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softmax(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


# ------------------------------------------------------------------------------------------------
# Activations composed in functional.py

# name -> (call, NumPy reference)
ACTIVATIONS = {
    "selu": (F.selu, lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(x))),
    "celu": (F.celu, lambda x: np.where(x > 0, x, np.expm1(x))),
    "celu-0.5": (lambda x: F.celu(x, 0.5), lambda x: np.where(x > 0, x, 0.5 * np.expm1(x / 0.5))),
    "mish": (F.mish, lambda x: x * np.tanh(np.logaddexp(0.0, x))),
    "softsign": (F.softsign, lambda x: x / (1 + np.abs(x))),
    "tanhshrink": (F.tanhshrink, lambda x: x - np.tanh(x)),
    "hardswish": (F.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    "hardsigmoid": (F.hardsigmoid, lambda x: np.clip(x / 6 + 0.5, 0, 1)),
    "logsigmoid": (F.logsigmoid, lambda x: -np.logaddexp(0.0, -x)),
    "threshold": (lambda x: F.threshold(x, 0.5, -2.0), lambda x: np.where(x <= 0.5, -2.0, x)),
    "relu6": (F.relu6, lambda x: np.clip(x, 0, 6)),
    "glu": (F.glu, lambda x: x[..., :3] * sigmoid(x[..., 3:])),
    "glu-dim0": (lambda x: F.glu(x, 0), lambda x: x[:2] * sigmoid(x[2:])),
    "softmin": (lambda x: F.softmin(x, 1), lambda x: softmax(-x, 1)),
}


@pytest.mark.parametrize("dtype", [kiln.float64, kiln.float32, kiln.float16, kiln.bfloat16],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_matches_numpy(name, dtype, rng):
    fn, reference = ACTIVATIONS[name]
    values = t(rng.uniform(-8, 8, size=(4, 6)), kiln.float64).to(dtype)
    out = fn(values)
    assert out.dtype == dtype
    assert_close(out, reference(values.numpy().astype(np.float64)), dtype)


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_gradient_matches_finite_differences(name, rng):
    fn, _ = ACTIVATIONS[name]
    # Away from the kinks at +-3, 0 and 0.5, where finite differences straddle two pieces.
    values = rng.uniform(0.1, 2.4, size=(4, 6)) * rng.choice([-1.0, 1.0], size=(4, 6))
    values[0, :2] = [-7.0, 7.5]
    assert gradcheck(fn, (t(values).requires_grad_(),))


@pytest.mark.parametrize("fn, points, gradients", [
    (F.hardswish, [-3.0, 3.0, np.nan, -4.0, 0.0], [0.0, 1.0, 1.0, 0.0, 0.5]),
    (F.hardsigmoid, [-3.0, 3.0, np.nan, -4.0, 0.0], [0.0, 0.0, 0.0, 0.0, 1 / 6]),
    (F.relu6, [0.0, 6.0, 3.0, np.nan, 7.0], [0.0, 0.0, 1.0, 1.0, 0.0]),
    (F.logsigmoid, [0.0, -1e4, 1e4, -30.0, 40.0], [0.5, 1.0, 0.0, 1.0, math.exp(-40.0)]),
    (lambda x: F.threshold(x, 1.0, 5.0), [1.0, 1.5, np.nan, 0.0, 2.0], [0.0, 1.0, 1.0, 0.0, 1.0]),
], ids=["hardswish", "hardsigmoid", "relu6", "logsigmoid", "threshold"])
def test_gradients_at_kinks_nan_and_large_inputs_are_pytorchs(fn, points, gradients):
    # PyTorch's backward kernels: hardswish's takes x <= -3 as flat and x >= 3 as linear,
    # hardsigmoid's is 1/6 strictly inside (-3, 3) only, hardtanh's (relu6) 0 at its ends.
    x = t(points).requires_grad_()
    out = fn(x)
    (grad,) = kiln.autograd.grad(mint.sum(out), x)
    np.testing.assert_allclose(grad.numpy(), gradients, rtol=1e-12, atol=1e-300)
    assert np.isfinite(out.numpy()[~np.isnan(points)]).all()


def test_threshold_and_hardswish_keep_nan():
    x = t([np.nan, 0.0])
    assert np.isnan(F.threshold(x, 1.0, 5.0).numpy()[0])
    assert np.isnan(F.hardswish(x).numpy()[0]) and np.isnan(F.hardsigmoid(x).numpy()[0])


def test_softmax_without_dim_takes_pytorchs_implicit_dim_with_its_warning(rng):
    x3, x2 = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3))
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        out3 = F.softmax(t(x3))
    with pytest.warns(UserWarning, match="Implicit dimension choice for log_softmax"):
        out2 = F.log_softmax(t(x2))
    assert_close(out3, softmax(x3, 0))
    assert_close(out2, np.log(softmax(x2, 1)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_close(F.softmax(t(x3), -1, 3, kiln.float32), softmax(x3, -1), kiln.float32)


# ------------------------------------------------------------------------------------------------
# inplace=True


INPLACE = [(F.relu, ()), (F.relu6, ()), (F.leaky_relu, (0.2,)), (F.elu, (1.0,)), (F.selu, ()),
           (F.celu, (1.0,)), (F.silu, ()), (F.mish, ()), (F.hardtanh, (-0.5, 0.5)),
           (F.hardswish, ()), (F.hardsigmoid, ()), (F.threshold, (0.1, 7.0)),
           (F.dropout, (0.0, True))]


@pytest.mark.parametrize("fn, args", INPLACE, ids=lambda v: getattr(v, "__name__", ""))
def test_inplace_writes_the_result_into_the_input_and_returns_it(fn, args, rng):
    values = rng.uniform(-4, 4, size=(3, 5))
    expected = fn(t(values), *args).numpy()
    x = t(values)
    out = fn(x, *args, True)
    assert out.is_same(x)
    np.testing.assert_array_equal(x.numpy(), expected)


@pytest.mark.parametrize("fn, args", INPLACE[:-1], ids=lambda v: getattr(v, "__name__", ""))
def test_inplace_on_a_tensor_that_requires_grad_is_refused_outside_no_grad(fn, args):
    x = t([-1.0, 2.0]).requires_grad_()
    with raises(kiln.KilnValueError, match=f"{fn.__name__}: inplace=True writes into input"):
        fn(x, *args, inplace=True)
    with kiln.no_grad():
        assert fn(x, *args, inplace=True).is_same(x)


def test_dropout_inplace_outside_training_returns_the_input_untouched():
    x = t([1.0, 2.0]).requires_grad_()
    assert F.dropout(x, 0.5, False, True).is_same(x)


def test_dropout_inplace_zeroes_and_scales_the_input(rng):
    x = t(np.ones((200, 50)))
    F.dropout(x, 0.25, inplace=True)
    values = np.unique(x.numpy())
    np.testing.assert_allclose(values, [0.0, 1 / 0.75])
    assert abs((x.numpy() == 0).mean() - 0.25) < 0.03


# ------------------------------------------------------------------------------------------------
# Layers


def test_bilinear_matches_numpy_with_its_gradients(rng):
    x1, x2 = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3, 5))
    w, b = rng.normal(size=(6, 4, 5)), rng.normal(size=6)
    expected = np.einsum("...i,oij,...j->...o", x1, w, x2) + b
    assert_close(F.bilinear(t(x1), t(x2), t(w), t(b)), expected)
    assert_close(F.bilinear(t(x1), t(x2), t(w)), expected - b)
    assert gradcheck(F.bilinear, [t(v).requires_grad_() for v in (x1, x2, w, b)])


def test_pixel_shuffle_moves_channels_into_pixels_and_back(rng):
    r = 2
    x = rng.normal(size=(2, 3 * r * r, 3, 4))
    out = F.pixel_shuffle(t(x), r).numpy()
    assert out.shape == (2, 3, 6, 8)
    for c, h, w, i, j in np.ndindex(3, 3, 4, r, r):
        np.testing.assert_array_equal(out[:, c, h * r + i, w * r + j],
                                      x[:, c * r * r + i * r + j, h, w])
    np.testing.assert_array_equal(F.pixel_unshuffle(t(out), r).numpy(), x)
    # Leading dimensions of any number, and a factor of 1.
    y = rng.normal(size=(4, 3, 2, 2))
    np.testing.assert_array_equal(F.pixel_shuffle(t(y), 1).numpy(), y)
    assert F.pixel_unshuffle(t(rng.normal(size=(2, 2, 1, 4, 6))), 2).shape == (2, 2, 4, 2, 3)
    assert gradcheck(lambda v: F.pixel_shuffle(v, r) * t(np.arange(96.0).reshape(1, 3, 4, 8)),
                     (t(x[:1, :, :2]).requires_grad_(),))


def test_embedding_padding_idx_returns_the_row_and_sends_it_no_gradient(rng):
    table = rng.normal(size=(5, 3))
    indices = t(np.array([[1, 4], [4, 0]]))
    for padding_idx in (4, -1):
        weight = t(table).requires_grad_()
        out = F.embedding(indices, weight, padding_idx)
        np.testing.assert_array_equal(out.numpy(), table[[[1, 4], [4, 0]]])
        (grad,) = kiln.autograd.grad(mint.sum(out * 2.0), weight)
        np.testing.assert_array_equal(grad.numpy(), [[2] * 3, [2] * 3, [0] * 3, [0] * 3, [0] * 3])
    (grad,) = kiln.autograd.grad(mint.sum(F.embedding(indices, weight)), weight)
    assert grad.numpy()[4].tolist() == [2.0] * 3


def test_one_hot_matches_numpy():
    labels = np.array([[0, 3], [2, 1]])
    for dtype in (kiln.int64, kiln.int32, kiln.uint8):
        out = F.one_hot(t(labels, dtype), 5)
        assert out.dtype == kiln.int64
        np.testing.assert_array_equal(out.numpy(), np.eye(5, dtype=np.int64)[labels])
    np.testing.assert_array_equal(F.one_hot(t(labels)).numpy(), np.eye(4)[labels])
    assert F.one_hot(t(np.zeros(0, np.int64)), 3).shape == (0, 3)


def sdpa_reference(q, k, v, mask=None, scale=None):
    scores = q @ np.swapaxes(k, -1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf) if mask.dtype == bool else scores + mask
    top = scores.max(-1, keepdims=True)
    e = np.where(np.isneginf(top), 0.0, np.exp(scores - np.where(np.isneginf(top), 0.0, top)))
    total = e.sum(-1, keepdims=True)
    return (e / np.where(total == 0, 1.0, total)) @ v


def test_scaled_dot_product_attention_matches_numpy(rng):
    q, k, v = rng.normal(size=(2, 3, 4, 8)), rng.normal(size=(2, 3, 5, 8)), rng.normal(
        size=(2, 3, 5, 6))
    assert_close(F.scaled_dot_product_attention(t(q), t(k), t(v)), sdpa_reference(q, k, v))
    assert_close(F.scaled_dot_product_attention(t(q), t(k), t(v), scale=0.3),
                 sdpa_reference(q, k, v, scale=0.3))
    causal = np.tril(np.ones((4, 5), bool))
    assert_close(F.scaled_dot_product_attention(t(q), t(k), t(v), None, 0.0, True),
                 sdpa_reference(q, k, v, causal))
    additive = rng.normal(size=(4, 5))
    assert_close(F.scaled_dot_product_attention(t(q), t(k), t(v), t(additive)),
                 sdpa_reference(q, k, v, additive))
    # A row that may attend to nothing is 0, with gradient 0, as PyTorch's.
    mask = rng.random((2, 1, 4, 5)) > 0.3
    mask[0, 0, 1] = False
    qt = t(q).requires_grad_()
    out = F.scaled_dot_product_attention(qt, t(k), t(v), t(mask))
    assert_close(out, sdpa_reference(q, k, v, mask))
    assert (out.numpy()[0, :, 1] == 0).all()
    (grad,) = kiln.autograd.grad(mint.sum(out), qt)
    assert np.isfinite(grad.numpy()).all() and (grad.numpy()[0, :, 1] == 0).all()
    assert gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, t(mask[:1])),
                     [t(x[:1, :2]).requires_grad_() for x in (q, k, v)])


def test_scaled_dot_product_attention_repeats_key_and_value_heads_with_enable_gqa(rng):
    q, k, v = rng.normal(size=(2, 6, 4, 8)), rng.normal(size=(2, 2, 5, 8)), rng.normal(
        size=(2, 2, 5, 8))
    out = F.scaled_dot_product_attention(t(q), t(k), t(v), enable_gqa=True)
    assert_close(out, sdpa_reference(q, np.repeat(k, 3, 1), np.repeat(v, 3, 1)))


# ------------------------------------------------------------------------------------------------
# Normalization and distances


def group_norm_reference(x, groups, w, b, eps):
    grouped = x.reshape(x.shape[0], groups, -1)
    y = ((grouped - grouped.mean(-1, keepdims=True))
         / np.sqrt(grouped.var(-1, keepdims=True) + eps)).reshape(x.shape)
    shape = [x.shape[1]] + [1] * (x.ndim - 2)
    return y * w.reshape(shape) + b.reshape(shape)


@pytest.mark.parametrize("shape, groups", [((2, 6, 3, 4), 3), ((3, 4), 2), ((2, 4, 5), 4)])
def test_group_norm_matches_numpy_with_its_gradients(shape, groups, rng):
    x, w, b = rng.normal(size=shape), rng.normal(size=shape[1]), rng.normal(size=shape[1])
    assert_close(F.group_norm(t(x), groups, t(w), t(b), 1e-3),
                 group_norm_reference(x, groups, w, b, 1e-3))
    assert_close(F.group_norm(t(x), groups), group_norm_reference(x, groups, 1.0 + 0 * w, 0 * b,
                                                                  1e-5))
    assert gradcheck(lambda a, c, d: F.group_norm(a, groups, c, d),
                     [t(v).requires_grad_() for v in (x, w, b)])


def test_batch_norm_training_normalizes_by_the_batch_and_updates_the_running_stats(rng):
    x, w, b = rng.normal(size=(4, 3, 2, 5)), rng.normal(size=3), rng.normal(size=3)
    running_mean, running_var = t(np.zeros(3)), t(np.ones(3))
    out = F.batch_norm(t(x), running_mean, running_var, t(w), t(b), True, 0.2, 1e-3)
    mean, var = x.mean((0, 2, 3)), x.var((0, 2, 3))
    shape = (1, 3, 1, 1)
    assert_close(out, (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + 1e-3)
                 * w.reshape(shape) + b.reshape(shape))
    assert_close(running_mean, 0.2 * mean)
    assert_close(running_var, 0.8 + 0.2 * x.var((0, 2, 3), ddof=1))
    # Without running statistics (and for gradients) the batch's are used.
    assert gradcheck(lambda a, c, d: F.batch_norm(a, None, None, c, d, True),
                     [t(v).requires_grad_() for v in (x[:, :, 0], w, b)])


def test_batch_norm_outside_training_normalizes_by_the_running_stats(rng):
    x, w, b = rng.normal(size=(4, 3)), rng.normal(size=3), rng.normal(size=3)
    mean, var = rng.normal(size=3), rng.uniform(0.5, 2, size=3)
    running_mean, running_var = t(mean), t(var)
    out = F.batch_norm(t(x), running_mean, running_var, t(w), t(b))
    assert_close(out, (x - mean) / np.sqrt(var + 1e-5) * w + b)
    np.testing.assert_array_equal(running_mean.numpy(), mean)  # untouched
    np.testing.assert_array_equal(running_var.numpy(), var)


def test_rms_norm_default_eps_is_the_dtypes_machine_epsilon(rng):
    x = rng.normal(size=(3, 4)) * 1e-4
    for dtype, eps in ((kiln.float64, 2.0 ** -52), (kiln.float32, 2.0 ** -23),
                       (kiln.float16, 2.0 ** -23)):
        values = t(x, dtype)
        expected = mint.rms_norm(values, [4], None, eps).numpy()
        np.testing.assert_array_equal(F.rms_norm(values, [4]).numpy(), expected)
    assert_close(F.rms_norm(t(x), (4,)), x / np.sqrt((x * x).mean(-1, keepdims=True) + 2.0 ** -52))


def test_normalize_divides_by_the_clamped_norm(rng):
    x = rng.normal(size=(3, 4, 2))
    x[1, :, 0] = 0.0
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    assert_close(F.normalize(t(x)), x / np.maximum(norms, 1e-12))
    l1 = np.abs(x).sum(-1, keepdims=True)
    assert_close(F.normalize(t(x), 1, -1, 0.5), x / np.maximum(l1, 0.5))
    out = t(np.zeros(x.shape))
    assert F.normalize(t(x), out=out).is_same(out)
    assert_close(out, x / np.maximum(norms, 1e-12))
    assert gradcheck(F.normalize, (t(x[0]).requires_grad_(),))


def test_cosine_similarity_and_pairwise_distance_match_numpy(rng):
    x1, x2 = rng.normal(size=(5, 4)), rng.normal(size=(1, 4))
    x1[0] = 0.0

    def scaled(x):
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-8)

    assert_close(F.cosine_similarity(t(x1), t(x2)), (scaled(x1) * scaled(x2)).sum(1))
    assert_close(F.cosine_similarity(t(x1.T), t(x2.T), 0), (scaled(x1) * scaled(x2)).sum(1))
    assert_close(F.pairwise_distance(t(x1), t(x2)), np.linalg.norm(x1 - x2 + 1e-6, axis=-1))
    assert_close(F.pairwise_distance(t(x1), t(x2), 1.0, 0.0, True),
                 np.abs(x1 - x2).sum(-1, keepdims=True))
    # The rows of x1 that are 0 get gradient 0 from their clamped norm (PyTorch's).
    assert gradcheck(F.cosine_similarity, [t(v).requires_grad_() for v in (x1[1:], x2)])
    assert gradcheck(F.pairwise_distance, [t(v).requires_grad_() for v in (x1, x2)])


# ------------------------------------------------------------------------------------------------
# Losses


def test_kl_div_matches_numpy_for_every_reduction(rng):
    x = np.log(softmax(rng.normal(size=(4, 5)), 1))
    p = softmax(rng.normal(size=(4, 5)), 1)
    p[0, 0] = 0.0
    pointwise = np.where(p == 0, 0.0, p * np.log(np.where(p == 0, 1.0, p))) - p * x
    assert_close(F.kl_div(t(x), t(p), None, None, "none"), pointwise)
    assert_close(F.kl_div(t(x), t(p), reduction="sum"), pointwise.sum())
    assert_close(F.kl_div(t(x), t(p), reduction="batchmean"), pointwise.sum() / 4)
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        assert_close(F.kl_div(t(x), t(p)), pointwise.mean())
    q = p[1:]
    assert_close(F.kl_div(t(x[1:]), t(np.log(q)), reduction="batchmean", log_target=True),
                 (q * (np.log(q) - x[1:])).sum() / 3)
    assert_close(F.kl_div(t(x[0, 1]), t(p[0, 1]), reduction="batchmean"), pointwise[0, 1])
    assert gradcheck(lambda a, b: F.kl_div(a, b, reduction="batchmean"),
                     [t(x).requires_grad_(), t(p[1:].repeat(2, 0)[:4]).requires_grad_()])
    assert gradcheck(lambda a, b: F.kl_div(a, b, reduction="sum", log_target=True),
                     [t(x).requires_grad_(), t(np.log(p[1:].repeat(2, 0)[:4])).requires_grad_()])


def test_kl_div_gradient_at_a_zero_target_is_finite():
    x, p = t([-1.0, -2.0]).requires_grad_(), t([0.0, 1.0]).requires_grad_()
    grads = kiln.autograd.grad(F.kl_div(x, p, reduction="sum"), [x, p])
    np.testing.assert_allclose(grads[0].numpy(), [0.0, -1.0])
    np.testing.assert_allclose(grads[1].numpy(), [1.0, 3.0])  # -x, and log(1) + 1 - x


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_weighted_regression_losses_match_numpy(reduction, rng):
    x, y, w = rng.normal(size=(3, 4)), rng.normal(size=(3, 4)), rng.uniform(0.1, 2, size=(3, 4))
    d = x - y
    huber = np.where(np.abs(d) < 0.7, 0.5 * d * d, 0.7 * (np.abs(d) - 0.35))
    for fn, pointwise, mean_over_weights in ((F.mse_loss, d * d, True),
                                             (F.l1_loss, np.abs(d), True),
                                             (lambda *a, **k: F.huber_loss(*a, delta=0.7, **k),
                                              huber, False)):
        weighted = pointwise * w
        expected = {"none": weighted, "sum": weighted.sum(),
                    "mean": weighted.sum() / (w.sum() if mean_over_weights else w.size)}
        assert_close(fn(t(x), t(y), reduction=reduction, weight=t(w)), expected[reduction])
    assert gradcheck(lambda a, b: F.mse_loss(a, b, weight=t(w)),
                     [t(x).requires_grad_(), t(y).requires_grad_()])


def test_losses_take_pytorchs_argument_order(rng):
    logits, labels = t(rng.normal(size=(6, 4))), t(np.array([0, 3, 1, 1, 2, 0]))
    weight = t(rng.uniform(0.5, 2, size=4))
    probs, target = t(rng.uniform(0.1, 0.9, size=6)), t(rng.uniform(0, 1, size=6))
    x, y = t(rng.normal(size=6)), t(rng.normal(size=6))
    pairs = [
        (F.cross_entropy(logits, labels, weight, None, 1, None, "sum", 0.1),
         _composite.cross_entropy(logits, labels, "sum", 1, 0.1, weight=weight)),
        (F.nll_loss(logits, labels, weight, None, 3, None, "none"),
         _composite.nll_loss(logits, labels, "none", 3, weight=weight)),
        (F.binary_cross_entropy(probs, target, probs, None, None, "sum"),
         _composite.binary_cross_entropy(probs, target, probs, "sum")),
        (F.binary_cross_entropy_with_logits(x, target, None, None, None, "none", probs),
         _composite.binary_cross_entropy_with_logits(x, target, None, "none", probs)),
        (F.smooth_l1_loss(x, y, None, None, "sum", 0.5),
         _composite.smooth_l1_loss(x, y, "sum", 0.5)),
        (F.huber_loss(x, y, "sum", 0.5), _composite.huber_loss(x, y, "sum", 0.5)),
        (F.l1_loss(x, y, None, None, "none"), _composite.l1_loss(x, y, "none")),
        (F.mse_loss(x, y, None, None, "sum"), mint.mse_loss(x, y, "sum")),
    ]
    for got, want in pairs:
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_layers_take_pytorchs_argument_order(rng):
    x = t(rng.normal(size=(1, 2, 7, 7)))
    # F.max_pool2d has ceil_mode before return_indices (the module the other way round).
    np.testing.assert_array_equal(F.max_pool2d(x, 3, 2, 1, 1, True).numpy(),
                                  mint.max_pool2d(x, 3, 2, 1, 1, True).numpy())
    np.testing.assert_array_equal(F.avg_pool2d(x, 3, 2, 1, True, False).numpy(),
                                  mint.avg_pool2d(x, 3, 2, 1, True, False).numpy())
    # return_indices and divisor_override last, as in PyTorch.
    for got, want in zip(F.max_pool2d(x, 3, 2, 1, 1, True, True),
                         mint.max_pool2d_with_indices(x, 3, 2, 1, 1, True)):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    for got, want in zip(F.adaptive_max_pool2d(x, 3, True),
                         mint.adaptive_max_pool2d(x, 3, return_indices=True)):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(F.avg_pool2d(x, 3, 2, 1, True, False, 4).numpy(),
                                  mint.avg_pool2d(x, 3, 2, 1, True, False, 4).numpy())
    w = t(rng.normal(size=(4, 1, 3, 3)))
    np.testing.assert_array_equal(F.conv2d(x, w, None, 2, 1, 1, 2).numpy(),
                                  mint.conv2d(x, w, None, 2, 1, 1, 2).numpy())
    # padding="same" (kiln.mint._composite.conv2d): an odd total puts the extra zero after.
    same = F.conv2d(x, t(rng.normal(size=(3, 2, 2, 3))), None, 1, "same")
    assert same.shape == (1, 3, 7, 7)
    np.testing.assert_array_equal(F.conv2d(x, w, None, 1, "valid", 1, 2).numpy(),
                                  mint.conv2d(x, w, None, 1, 0, 1, 2).numpy())
    np.testing.assert_array_equal(F.pad(x, (1, 2), "constant", 3.0).numpy(),
                                  mint.pad(x, [1, 2], "constant", 3.0).numpy())
    np.testing.assert_array_equal(F.layer_norm(x, [7], x[0, 0, 0], x[0, 0, 1], 0.1).numpy(),
                                  mint.layer_norm(x, [7], x[0, 0, 0], x[0, 0, 1], 0.1).numpy())


# ------------------------------------------------------------------------------------------------
# kiln.jit


def test_functions_under_jit_match_eager(rng):
    x = t(rng.normal(size=(2, 4, 4, 4)), kiln.float32)
    labels = t(np.array([1, 0]))

    def model(v):
        h = F.selu(F.group_norm(v, 2)) + F.mish(v) + F.hardswish(v) * F.hardsigmoid(v)
        h = F.pixel_unshuffle(F.pixel_shuffle(F.glu(h, 1), 1), 2)       # [2, 8, 2, 2]
        q = h.reshape(2, 2, 4, 4)
        a = F.scaled_dot_product_attention(q, q, q, is_causal=True)
        s = F.normalize(mint.mean(a, (1, 2)), dim=-1)                    # [2, 4]
        loss = F.kl_div(F.log_softmax(s, 1), F.softmax(s * 2, 1), reduction="batchmean")
        hot = F.one_hot(labels, 4).to(kiln.float32)
        return (loss + mint.sum(F.cosine_similarity(s, hot)) + mint.sum(F.logsigmoid(s))
                + mint.sum(F.softsign(s) * F.tanhshrink(s)))

    eager, eager_grad = model(x), kiln.grad(model)(x)
    jitted, jitted_grad = kiln.jit(model), kiln.jit(kiln.grad(model))
    for _ in range(2):  # the trace, then the compiled graph
        np.testing.assert_allclose(jitted(x).numpy(), eager.numpy(), rtol=1e-5)
        np.testing.assert_allclose(jitted_grad(x).numpy(), eager_grad.numpy(), rtol=1e-4,
                                   atol=1e-6)


def test_more_functions_under_jit_match_eager(rng):
    x, y = t(rng.normal(size=(3, 4)), kiln.float32), t(rng.normal(size=(3, 4)), kiln.float32)
    w = t(rng.normal(size=(2, 4, 4)), kiln.float32)
    table, indices = t(rng.normal(size=(5, 4)), kiln.float32), t(np.array([[0, 4, 1]]))
    mask = t(np.array([[True, False, False], [False, False, False], [True, True, False]]))

    def model(v, u):
        h = F.celu(v, 0.5) + F.threshold(u, 0.2, -1.0) + F.softmin(v, 1) + F.relu6(u * 4)
        h = h + F.bilinear(v, u, w) @ t(np.ones((2, 4)), kiln.float32)
        e = F.embedding(indices, table * 1.0, 4)[0]                      # [3, 4]
        a = F.scaled_dot_product_attention(h, e, v, mask)
        return (mint.sum(a) + mint.sum(F.pairwise_distance(h, u, 1.0))
                + F.mse_loss(h, u, weight=t(np.ones((3, 4)), kiln.float32))
                + F.huber_loss(h, v, "sum", 0.5) + F.cross_entropy(h, t(np.array([0, 3, 1]))))

    grad = kiln.grad(model, grad_position=(0, 1))
    eager, eager_grads = model(x, y), grad(x, y)
    jitted, jitted_grad = kiln.jit(model), kiln.jit(grad)
    for _ in range(2):  # the trace, then the compiled graph
        np.testing.assert_allclose(jitted(x, y).numpy(), eager.numpy(), rtol=1e-5)
        for got, want in zip(jitted_grad(x, y), eager_grads):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-6)


def test_batch_norm_updates_the_running_stats_at_every_jitted_call(rng):
    running_mean, running_var = t(np.zeros(3), kiln.float32), t(np.ones(3), kiln.float32)
    step = kiln.jit(lambda v: F.batch_norm(v, running_mean, running_var, training=True))
    batches = [rng.normal(size=(4, 3)).astype(np.float32) for _ in range(3)]
    mean, var = np.zeros(3), np.ones(3)
    for batch in batches:
        step(t(batch))
        mean = 0.9 * mean + 0.1 * batch.mean(0)
        var = 0.9 * var + 0.1 * batch.var(0, ddof=1)
    np.testing.assert_allclose(running_mean.numpy(), mean, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(running_var.numpy(), var, rtol=1e-5)


def test_one_hot_under_jit_needs_num_classes():
    labels = t(np.array([2, 0]))
    jitted = kiln.jit(lambda v: F.one_hot(v, 3))
    for _ in range(2):
        np.testing.assert_array_equal(jitted(labels).numpy(), [[0, 0, 1], [1, 0, 0]])
    with raises(kiln.KilnValueError, match="one_hot: num_classes=-1 takes the number of classes"):
        kiln.jit(lambda v: F.one_hot(v))(labels)


# ------------------------------------------------------------------------------------------------
# Errors


def test_legacy_size_average_and_reduce_are_refused():
    x = t([1.0, 2.0])
    for call in (lambda: F.mse_loss(x, x, True), lambda: F.l1_loss(x, x, reduce=False),
                 lambda: F.cross_entropy(t([[1.0, 2.0]]), t(np.array([0])), None, False),
                 lambda: F.kl_div(x, x, None, True)):
        with raises(kiln.KilnValueError, match="deprecated spellings of reduction; pass "
                                               "reduction="):
            call()


@pytest.mark.parametrize("call, error, match", [
    (lambda: F.max_pool2d(t(np.zeros((1, 1, 4, 4))), 2, return_indices=1),
     kiln.KilnTypeError, "max_pool2d: return_indices must be a bool, got int 1"),
    (lambda: F.avg_pool2d(t(np.zeros((1, 1, 4, 4))), 2, divisor_override=0),
     kiln.KilnValueError, "expected a nonzero divisor_override, got 0"),
    (lambda: F.embedding(t(np.array([0])), t(np.zeros((2, 2))), sparse=True),
     kiln.KilnNotImplementedError, "sparse is not supported"),
    (lambda: F.embedding(t(np.array([0])), t(np.zeros((2, 2))), 2),
     kiln.KilnValueError, r"padding_idx must be in \[-2, 1\], got 2"),
    (lambda: F.glu(t(np.zeros((2, 3)))), kiln.ShapeError, "expected dimension -1 of even size"),
    (lambda: F.glu(t(np.zeros((2, 4))), 2), kiln.KilnIndexError, "dim out of range"),
    (lambda: F.glu(t(1.0)), kiln.ShapeError, "got a 0-d one"),
    (lambda: F.celu(t([1.0]), 0.0), kiln.KilnValueError, "alpha cannot be 0"),
    (lambda: F.selu(t(np.array([1]))), kiln.DTypeError, "expected a floating-point input"),
    (lambda: F.threshold(t([1.0]), "0", 1.0), kiln.KilnTypeError, "threshold to be a real"),
    (lambda: F.softmax([1.0]), kiln.KilnTypeError, "softmax: expected input to be a kiln"),
    (lambda: F.one_hot(t(np.array([0, 3])), 3), kiln.KilnValueError,
     r"expected class values in \[0, 3\), got values from 0 to 3"),
    (lambda: F.one_hot(t(np.array([-1, 1]))), kiln.KilnValueError, "got values from -1 to 1"),
    (lambda: F.one_hot(t([1.0])), kiln.DTypeError, "expected an integer tensor"),
    (lambda: F.one_hot(t(np.zeros(0, np.int64))), kiln.KilnValueError, "of an empty tensor"),
    (lambda: F.one_hot(t(np.array([0])), -2), kiln.KilnValueError, "num_classes must be at least"),
    (lambda: F.pixel_shuffle(t(np.zeros((1, 3, 2, 2))), 2), kiln.ShapeError,
     "divisible by upscale_factor"),
    (lambda: F.pixel_shuffle(t(np.zeros((4, 2))), 2), kiln.ShapeError, "at least 3 dimensions"),
    (lambda: F.pixel_unshuffle(t(np.zeros((1, 1, 3, 4))), 2), kiln.ShapeError,
     "divisible by downscale_factor"),
    (lambda: F.pixel_unshuffle(t(np.zeros((1, 1, 4, 4))), 0), kiln.KilnValueError,
     "downscale_factor must be at least 1"),
    (lambda: F.bilinear(t(np.zeros((2, 3))), t(np.zeros((2, 4))), t(np.zeros((5, 3, 3)))),
     kiln.ShapeError, r"weight \[out, in1, in2\]"),
    (lambda: F.group_norm(t(np.zeros((2, 6, 3))), 4), kiln.KilnValueError,
     "divisible by num_groups=4"),
    (lambda: F.group_norm(t(np.zeros((2, 6))), 3, t(np.ones(3))), kiln.ShapeError,
     r"expected weight of shape \[6\]"),
    (lambda: F.group_norm(t(np.zeros(6)), 3), kiln.ShapeError, "at least 2 dimensions"),
    (lambda: F.batch_norm(t(np.zeros((2, 3))), None, None), kiln.KilnValueError,
     "must be given when not training"),
    (lambda: F.batch_norm(t(np.zeros((2, 3))), t(np.zeros(3)), None, training=True),
     kiln.KilnValueError, "must both be None or both be given"),
    (lambda: F.batch_norm(t(np.zeros((1, 3))), None, None, training=True), kiln.KilnValueError,
     "more than 1 value per channel"),
    (lambda: F.batch_norm(t(np.zeros((2, 3))), t(np.zeros(2)), t(np.ones(2))), kiln.ShapeError,
     r"expected running_mean of shape \[3\]"),
    (lambda: F.batch_norm(t(np.zeros((2, 3))), None, None, None, None, True, None),
     kiln.KilnTypeError, "momentum to be a real number"),
    (lambda: F.cosine_similarity(t(np.zeros((2, 3))), t(np.zeros((4, 3)))), kiln.ShapeError,
     "do not broadcast"),
    (lambda: F.pairwise_distance(t(np.array([1])), t(np.array([2]))), kiln.DTypeError,
     "expected floating-point inputs"),
    (lambda: F.scaled_dot_product_attention(t(np.zeros((2, 3))), t(np.zeros((2, 3))),
                                            t(np.zeros((2, 3))), t(np.ones((2, 2), bool)),
                                            is_causal=True),
     kiln.KilnValueError, "either attn_mask or is_causal=True"),
    (lambda: F.scaled_dot_product_attention(t(np.zeros((2, 3))), t(np.zeros((2, 3))),
                                            t(np.zeros((2, 3))), t(np.ones((2, 2), np.int64))),
     kiln.DTypeError, "expected a bool attn_mask"),
    (lambda: F.scaled_dot_product_attention(t(np.zeros(3)), t(np.zeros((2, 3))),
                                            t(np.zeros((2, 3)))),
     kiln.ShapeError, "expected query of at least 2 dimensions"),
    (lambda: F.scaled_dot_product_attention(t(np.zeros((3, 2, 3))), t(np.zeros((2, 2, 3))),
                                            t(np.zeros((2, 2, 3))), enable_gqa=True),
     kiln.ShapeError, r"query's heads \(3\) to be a multiple"),
    (lambda: F.kl_div(t([0.0]), t([1.0]), reduction="avg"), kiln.KilnValueError,
     "'batchmean'"),
    (lambda: F.kl_div(t([0.0, 1.0]), t([1.0])), kiln.ShapeError, "target has shape"),
    (lambda: F.mse_loss(t([0.0, 1.0]), t([1.0, 1.0]), weight=t([1.0])), kiln.ShapeError,
     r"expected weight of the input's shape \[2\]"),
    (lambda: F.huber_loss(t([0.0]), t([1.0]), "avg", weight=t([1.0])), kiln.KilnValueError,
     "reduction"),
])
def test_argument_errors(call, error, match):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # kl_div's warning about 'mean'
        with raises(error, match=match):
            call()


def test_scale_and_enable_gqa_are_keyword_only():
    q = t(np.zeros((2, 3)))
    with pytest.raises(TypeError):
        F.scaled_dot_product_attention(q, q, q, None, 0.0, False, 0.5)


@pytest.mark.parametrize("alpha", [-0.5, 0.7, 2.0])
def test_celu_follows_its_formula_for_either_sign_of_alpha(alpha):
    # alpha * elu(x / alpha) is the curve only for alpha > 0.
    x = np.array([-3.0, -0.5, 0.0, 0.5, 2.0])
    got = F.celu(kiln.tensor(x), alpha).numpy()
    np.testing.assert_allclose(got, np.where(x > 0, x, alpha * np.expm1(x / alpha)), rtol=1e-12)
    assert kiln.testing.gradcheck(lambda t: F.celu(t, alpha), (kiln.tensor(x[[0, 1, 3, 4]])
                                                                .requires_grad_(),))


def test_threshold_keeps_an_integer_input_integer_and_one_hot_takes_narrow_indices():
    out = F.threshold(kiln.tensor([-3, -1, 0, 2, 7]), 0, 5.7)
    assert out.dtype == kiln.int64
    np.testing.assert_array_equal(out.numpy(), [5, 5, 5, 2, 7])
    hot = F.one_hot(kiln.tensor(np.array([0, 5], np.int8)), 200)  # more classes than int8 counts
    assert hot.shape == (2, 200) and hot.numpy()[1, 5] == 1 and hot.numpy().sum() == 2


def test_linear_takes_a_1d_weight_and_a_broadcast_bias(rng):
    x, w, v = rng.standard_normal((3, 4)), rng.standard_normal((5, 4)), rng.standard_normal(4)
    np.testing.assert_allclose(F.linear(t(x), t(v)).numpy(), x @ v, rtol=1e-12)
    bias = rng.standard_normal((3, 1))
    np.testing.assert_allclose(F.linear(t(x), t(w), t(bias)).numpy(), x @ w.T + bias, rtol=1e-12)
    with raises(kiln.ShapeError, match=r"linear: expected weight \[out, in\] or \[in\], got"):
        F.linear(t(x), t(rng.standard_normal((2, 5, 4))))
