"""What users porting PyTorch code found missing, checked without PyTorch (NumPy references and
closed forms, so CI covers them): class weights of cross_entropy / nll_loss and their cells
(kiln/mint/_composite.py, kiln/nn/loss.py), Embedding's padding_idx (kiln/nn/embedding.py),
nn.init.trunc_normal_ (kiln/nn/init.py), forward hooks (kiln/nn/cell.py), adaptive pooling
(kiln/mint/_composite.py, kiln/nn/pooling.py) and round(decimals=) (kiln/mint/_composite.py,
kiln/_tensor_methods.py): values, gradients, kiln.jit, copies, and every argument error. The
PyTorch comparisons are in test_nn_port_extras.py, which shares the cases defined here."""

import copy
import math
import pickle
import warnings

import numpy as np
import pytest

import kiln
from conftest import TOLERANCES, raises, t
from kiln import nn
from kiln.nn import (AdaptiveAvgPool2d, AdaptiveMaxPool2d, CrossEntropyLoss, Embedding,
                     NLLLoss)
from kiln.nn.init import trunc_normal_

mint = kiln.mint
gradcheck = kiln.testing.gradcheck
REDUCTIONS = ["mean", "sum", "none"]
NARROW_DTYPES = [kiln.float16, kiln.bfloat16]

# ------------------------------------------------------------------------------------------------
# Class weights

# (logits shape, label_smoothing, probability targets): [N, C], [N, C, d] and a single [C] sample.
CLASS_CASES = [((6, 4), 0.0, False), ((6, 4), 0.2, False), ((3, 4, 5), 0.0, False),
               ((3, 4, 5), 0.3, False), ((4,), 0.0, False), ((4,), 0.25, False),
               ((6, 4), 0.0, True), ((3, 4, 2), 0.2, True)]
IGNORE = 2


def class_inputs(shape, probabilities, rng):
    """(logits, target, weight) as NumPy arrays: integer targets (some equal to IGNORE) of the
    logits' shape without the class dimension, or class probabilities of the logits' shape."""
    logits = rng.standard_normal(shape)
    classes = shape[0] if len(shape) == 1 else shape[1]
    weight = np.round(rng.uniform(0.25, 3.0, classes) * 4) / 4
    if probabilities:
        target = rng.dirichlet(np.ones(classes), size=shape[:1] + shape[2:])
        return logits, np.moveaxis(target, -1, 1 if len(shape) > 1 else 0), weight
    target = rng.integers(0, classes, shape[:1] + shape[2:] if len(shape) > 1 else ())
    if target.ndim:
        target.flat[1] = IGNORE
    return logits, target, weight


def log_softmax(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def reference_class_loss(log_probs, target, weight, reduction, smoothing):
    """PyTorch's weighted (label-smoothed) loss of log-probabilities, in NumPy."""
    axis = 0 if log_probs.ndim == 1 else 1
    classes = log_probs.shape[axis]
    view = weight.reshape([classes if d == axis else 1 for d in range(log_probs.ndim)])
    if target.dtype.kind == "f":
        p = target * (1 - smoothing) + smoothing / classes
        losses = -(log_probs * p * view).sum(axis=axis)
        return {"none": losses, "sum": losses.sum(), "mean": losses.mean()}[reduction]
    counted = target != IGNORE
    index = np.expand_dims(np.where(counted, target, 0), axis)
    picked = -np.take_along_axis(log_probs, index, axis).squeeze(axis)
    target_weight = np.where(counted, weight[np.where(counted, target, 0)], 0.0)
    spread = np.where(counted, -(log_probs * view).sum(axis=axis), 0.0)
    losses = (1 - smoothing) * target_weight * picked + smoothing / classes * spread
    return {"none": losses, "sum": losses.sum(),
            "mean": losses.sum() / target_weight.sum()}[reduction]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape, smoothing, probabilities", CLASS_CASES, ids=str)
def test_weighted_cross_entropy_matches_numpy(shape, smoothing, probabilities, reduction, rng):
    logits, target, weight = class_inputs(shape, probabilities, rng)
    x = t(logits).requires_grad_()
    out = mint.cross_entropy(x, t(target), reduction, IGNORE, smoothing, weight=t(weight))
    axis = 0 if len(shape) == 1 else 1
    expected = reference_class_loss(log_softmax(logits, axis), target, weight, reduction,
                                    smoothing)
    assert out.dtype == kiln.float64 and out.shape == np.shape(expected)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12, atol=1e-12)
    assert gradcheck(lambda v: mint.cross_entropy(v, t(target), reduction, IGNORE,
                                                        smoothing, weight=t(weight)), (x,))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(6, 4), (3, 4, 5), (4,)], ids=str)
def test_weighted_nll_loss_matches_numpy(shape, reduction, rng):
    logits, target, weight = class_inputs(shape, False, rng)
    log_probs = log_softmax(logits, 0 if len(shape) == 1 else 1)
    x = t(log_probs).requires_grad_()
    out = mint.nll_loss(x, t(target), reduction, IGNORE, weight=t(weight))
    np.testing.assert_allclose(out.numpy(), reference_class_loss(log_probs, target, weight,
                                                                 reduction, 0.0), rtol=1e-12)
    assert gradcheck(lambda v: mint.nll_loss(v, t(target), reduction, IGNORE,
                                                   weight=t(weight)), (x,))


def test_unit_weights_give_the_unweighted_losses(rng):
    logits, target, _ = class_inputs((5, 3, 4), False, rng)
    x, labels, ones = t(logits), t(target), t(np.ones(3))
    for reduction in REDUCTIONS:
        for smoothing in (0.0, 0.4):
            np.testing.assert_allclose(
                mint.cross_entropy(x, labels, reduction, IGNORE, smoothing,
                                         weight=ones).numpy(),
                mint.cross_entropy(x, labels, reduction, IGNORE, smoothing).numpy(), rtol=1e-12)
        np.testing.assert_allclose(
            mint.nll_loss(x, labels, reduction, IGNORE, weight=ones).numpy(),
            mint.nll_loss(x, labels, reduction, IGNORE).numpy(), rtol=1e-12)


def test_without_weight_the_functions_are_the_ops(rng):
    logits, target, _ = class_inputs((6, 4), False, rng)
    x, labels = t(logits), t(target)
    np.testing.assert_array_equal(
        mint.cross_entropy(x, labels, "sum", IGNORE, 0.1).numpy(),
        mint.cross_entropy(x, labels, "sum", IGNORE, 0.1).numpy())
    np.testing.assert_array_equal(mint.nll_loss(x, labels, "none").numpy(),
                                  mint.nll_loss(x, labels, "none").numpy())


@pytest.mark.parametrize("fn", [mint.cross_entropy, mint.nll_loss])
def test_every_target_ignored_gives_nan_and_zero_gradients(fn):
    # As PyTorch's: the mean is 0 / 0, and no logit gets a gradient (not NaN).
    x = t(np.arange(12.0).reshape(3, 4) / 7).requires_grad_()
    out = fn(x, t([IGNORE] * 3), ignore_index=IGNORE, weight=t([1.0, 2.0, 3.0, 4.0]))
    assert np.isnan(out.item())
    (grad,) = kiln.autograd.grad(out, x)
    np.testing.assert_array_equal(grad.numpy(), np.zeros((3, 4)))
    assert fn(x, t([IGNORE] * 3), "sum", IGNORE, weight=t(np.ones(4))).item() == 0.0


def test_counted_targets_of_zero_weight_give_nan_with_label_smoothing_too():
    # PyTorch divides each term by the weights' sum: the smoothing term's x / 0 with the class
    # term's 0 / 0 is NaN, not inf.
    x = t([[0.1, 0.2, 0.3], [1.0, -1.0, 0.5]])
    for smoothing in (0.0, 0.1):
        out = mint.cross_entropy(x, t([1, 1]), "mean", -100, smoothing, weight=t([1.0, 0.0, 2.0]))
        assert np.isnan(out.item()), smoothing


@pytest.mark.parametrize("fn", [mint.cross_entropy, mint.nll_loss])
def test_a_weight_given_by_position_is_refused_by_name(fn):
    with raises(kiln.KilnTypeError, match="got a tensor for reduction .* pass class weights as "
                                          "weight="):
        fn(t([[0.1, 0.2]]), t([1]), t([1.0, 2.0]))


@pytest.mark.parametrize("dtype", [kiln.uint8, kiln.int32, kiln.int64], ids=str)
def test_any_integer_target_dtype(dtype, rng):
    logits, target, weight = class_inputs((6, 4), False, rng)
    expected = reference_class_loss(log_softmax(logits, 1), target, weight, "mean", 0.0)
    out = mint.cross_entropy(t(logits), t(target, dtype), ignore_index=IGNORE,
                                   weight=t(weight))
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("dtype", NARROW_DTYPES + [kiln.float32], ids=str)
def test_weighted_losses_keep_the_input_dtype(dtype, rng):
    logits, target, weight = class_inputs((6, 5), False, rng)
    x = t(logits, kiln.float64).to(dtype)
    out = mint.cross_entropy(x, t(target), ignore_index=IGNORE, weight=t(weight, dtype),
                                   label_smoothing=0.1)
    assert out.dtype == dtype
    expected = reference_class_loss(log_softmax(x.numpy().astype(np.float64), 1), target,
                                    weight, "mean", 0.1)
    np.testing.assert_allclose(float(out.item()), expected, rtol=TOLERANCES[dtype][0])


def test_weighted_loss_cells_compute_the_functions(rng):
    logits, target, weight = class_inputs((6, 4, 3), False, rng)
    x, labels, w = t(logits), t(target), t(weight)
    pairs = [
        (CrossEntropyLoss(weight=w, ignore_index=IGNORE)(x, labels),
         mint.cross_entropy(x, labels, ignore_index=IGNORE, weight=w)),
        (CrossEntropyLoss("none", IGNORE, 0.3, weight=w)(x, labels),
         mint.cross_entropy(x, labels, "none", IGNORE, 0.3, weight=w)),
        (NLLLoss("sum", weight=w, ignore_index=IGNORE)(x, labels),
         mint.nll_loss(x, labels, "sum", IGNORE, weight=w)),
    ]
    for got, want in pairs:
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    # Without weight the cells are as before: the ops.
    np.testing.assert_array_equal(CrossEntropyLoss()(x, labels).numpy(),
                                  mint.cross_entropy(x, labels).numpy())


@pytest.mark.parametrize("cell", [CrossEntropyLoss, NLLLoss])
def test_class_weights_are_a_buffer(cell):
    loss = cell(weight=t([1.0, 0.5, 2.0]))
    assert [name for name, _ in loss.named_buffers()] == ["weight"]
    assert list(loss.state_dict()) == ["weight"] and list(loss.parameters()) == []
    loss.load_state_dict({"weight": np.array([3.0, 3.0, 3.0])})
    assert loss.weight.tolist() == [3.0, 3.0, 3.0]
    assert list(cell().state_dict()) == []  # no weight: no entry, as in PyTorch
    twin = copy.deepcopy(loss)
    assert twin.weight.tolist() == [3.0] * 3 and not twin.weight.shares_storage_with(loss.weight)


@pytest.mark.parametrize("cell", [CrossEntropyLoss, NLLLoss])
def test_a_class_loss_pickled_before_class_weights_loads_without_them(cell, rng):
    state = pickle.loads(pickle.dumps(cell(ignore_index=IGNORE))).__dict__.copy()
    state["_buffers"] = copy.copy(state["_buffers"])
    del state["_buffers"]["weight"]  # what the cells held before they took a weight
    old = cell.__new__(cell)
    old.__setstate__(state)
    logits, target, _ = class_inputs((6, 4), False, rng)
    assert old.weight is None and list(old.state_dict()) == []
    np.testing.assert_array_equal(old(t(logits), t(target)).numpy(),
                                  cell(ignore_index=IGNORE)(t(logits), t(target)).numpy())


def test_weighted_cross_entropy_under_jit_matches_eager(rng):
    logits, target, weight = class_inputs((6, 4, 3), False, rng)
    x, labels = t(logits, kiln.float32), t(target)
    loss_fn = CrossEntropyLoss(ignore_index=IGNORE, label_smoothing=0.1,
                               weight=t(weight, kiln.float32))

    def loss(v):
        return loss_fn(v, labels)

    eager, eager_grad = loss(x), kiln.grad(loss)(x)
    jitted, jitted_grad = kiln.jit(loss), kiln.jit(kiln.grad(loss))
    for _ in range(2):  # the trace, then the compiled graph
        np.testing.assert_allclose(jitted(x).numpy(), eager.numpy(), rtol=1e-6)
        np.testing.assert_allclose(jitted_grad(x).numpy(), eager_grad.numpy(), rtol=1e-5,
                                   atol=1e-7)


def _x():
    return t(np.zeros((3, 4)), kiln.float32)


@pytest.mark.parametrize("call, error, message", [
    (lambda x: mint.cross_entropy(x, t([0, 1, 2]), weight=[1.0] * 4), kiln.KilnTypeError,
     "cross_entropy: expected weight to be a kiln.Tensor or None, got list"),
    (lambda x: mint.nll_loss(x, t([0, 1, 2]), weight=t([1, 2, 3, 4])), kiln.DTypeError,
     "nll_loss: expected a floating-point weight, got int64"),
    (lambda x: mint.cross_entropy(x, t([0, 1, 2]), weight=t(np.ones(3))), kiln.ShapeError,
     r"cross_entropy: expected weight of shape \[4\] \(one per class of the input \[3, 4\]\), "
     r"got \[3\]"),
    (lambda x: mint.nll_loss(x, t([0, 1, 2]), weight=t(np.ones((1, 4)))), kiln.ShapeError,
     r"nll_loss: expected weight of shape \[4\] .* got \[1, 4\]"),
    (lambda x: mint.cross_entropy(x, t([0, 1, 2]), "avg", weight=t(np.ones(4))),
     kiln.KilnValueError, "cross_entropy: expected reduction 'mean', 'sum' or 'none', got 'avg'"),
    (lambda x: mint.cross_entropy(x, t([0, 1, 2]), label_smoothing=1.5,
                                        weight=t(np.ones(4))),
     kiln.KilnValueError, r"cross_entropy: expected label_smoothing in \[0, 1\], got 1.5"),
    (lambda x: mint.cross_entropy(x, t([0, 1, 2]), ignore_index=0.5, weight=t(np.ones(4))),
     kiln.KilnTypeError, "cross_entropy: ignore_index must be an int, got float 0.5"),
    (lambda x: mint.cross_entropy(t([1, 2]), t(0), weight=t(np.ones(2))), kiln.DTypeError,
     "cross_entropy: expected a floating-point input, got int64"),
    (lambda x: mint.cross_entropy(x[0, 0], t(0), weight=t(np.ones(4))), kiln.ShapeError,
     r"cross_entropy: expected input of shape \[N, C, ...\] or \[C\], got a 0-d tensor"),
    (lambda x: mint.nll_loss(x, [0, 1, 2], weight=t(np.ones(4))), kiln.KilnTypeError,
     "nll_loss: expected target to be a kiln.Tensor, got list"),
    (lambda x: mint.cross_entropy(x, t(np.ones((3, 2))), weight=t(np.ones(4))),
     kiln.ShapeError, r"cross_entropy: a floating-point target holds class probabilities and "
                      r"must have the input's shape \[3, 4\], got \[3, 2\]"),
    # The target's checks are the op's, with its messages.
    (lambda x: mint.cross_entropy(x, t([0, 4, 1]), weight=t(np.ones(4))), kiln.KilnIndexError,
     "cross_entropy: target 4 is out of range for 4 classes"),
    (lambda x: mint.nll_loss(x, t([0, 1]), weight=t(np.ones(4))), kiln.ShapeError,
     r"nll_loss: input has shape \[3, 4\] and target has shape \[2\]"),
    (lambda x: mint.nll_loss(x, t([0.0, 1.0, 2.0]), weight=t(np.ones(4))), kiln.DTypeError,
     "nll_loss: expected integer class indices as target"),
    (lambda x: CrossEntropyLoss(t([1.0, 2.0])), kiln.KilnTypeError,
     r"CrossEntropyLoss: got a kiln.Tensor as reduction, the first argument here; pass class "
     r"weights by name \(weight=...\)"),
    (lambda x: NLLLoss(weight=np.ones(3)), kiln.KilnTypeError,
     "NLLLoss: expected weight to be a kiln.Tensor or None, got ndarray"),
    (lambda x: CrossEntropyLoss(weight=t([1, 2])), kiln.DTypeError,
     "CrossEntropyLoss: expected a floating-point weight, got int64"),
    (lambda x: NLLLoss(weight=t(np.ones((2, 2)))), kiln.ShapeError,
     r"NLLLoss: expected weight of shape \[C\] \(one per class\), got shape \[2, 2\]"),
    (lambda x: CrossEntropyLoss(weight=t(np.ones(3)))(x, t([0, 1, 2])), kiln.ShapeError,
     r"cross_entropy: expected weight of shape \[4\]"),
])
def test_class_weight_errors(call, error, message):
    x = _x()
    with raises(error, match=message):
        call(x)
    assert x.tolist() == [[0.0] * 4] * 3


# ------------------------------------------------------------------------------------------------
# Embedding's padding_idx


@pytest.mark.parametrize("padding_idx, row", [(0, 0), (3, 3), (-1, 4), (-5, 0)])
def test_padding_row_starts_at_zero_and_gets_no_gradient(padding_idx, row):
    kiln.manual_seed(0)
    emb = Embedding(5, 3, padding_idx=padding_idx)
    assert emb.padding_idx == row
    weight = emb.weight.numpy()
    np.testing.assert_array_equal(weight[row], np.zeros(3))
    assert np.all(np.delete(weight, row, axis=0) != 0)  # the others are N(0, 1)
    indices = np.array([[row, 1, row], [2, row, 4]])
    out = emb(t(indices))
    np.testing.assert_array_equal(out.numpy(), weight[indices])
    upstream = np.arange(18.0).reshape(2, 3, 3)
    out.backward(t(upstream, kiln.float32))
    grad = emb.weight.grad.numpy()
    expected = np.zeros((5, 3))
    np.add.at(expected, indices, upstream)
    expected[row] = 0.0
    np.testing.assert_array_equal(grad, expected)
    assert np.all(grad[row] == 0.0)


def test_padding_lookups_return_the_rows_current_value():
    # As PyTorch: padding_idx cuts the gradient, not the value (a loaded non-zero row shows).
    emb = Embedding(4, 2, padding_idx=1, dtype=kiln.float64)
    emb.load_state_dict({"weight": np.arange(8.0).reshape(4, 2)})
    np.testing.assert_array_equal(emb(t([1, 2])).numpy(), [[2.0, 3.0], [4.0, 5.0]])
    (grad,) = kiln.autograd.grad(mint.sum(emb(t([1, 1, 3])) * 2.0), emb.weight)
    np.testing.assert_array_equal(grad.numpy(), [[0, 0], [0, 0], [0, 0], [2, 2]])


def test_padding_idx_under_jit_and_reset_parameters():
    emb = Embedding(6, 4, padding_idx=2)
    indices = t([[2, 0], [5, 2]])

    def loss(indices):
        return mint.sum(emb(indices) * 3.0)

    step = kiln.jit(kiln.grad(loss, grad_position=None, weights=emb.weight))
    expected = np.zeros((6, 4))
    expected[[0, 5]] = 3.0
    for _ in range(2):  # the trace, then the compiled graph
        np.testing.assert_array_equal(step(indices).numpy(), expected)
    with kiln.no_grad():
        emb.weight[...] = 1.0
    emb.reset_parameters()
    np.testing.assert_array_equal(emb.weight.numpy()[2], np.zeros(4))
    assert np.all(emb.weight.numpy()[[0, 1, 3, 4, 5]] != 1.0)


def test_an_embedding_pickled_before_padding_idx_loads_without_one():
    emb = Embedding(4, 2)
    state = emb.__dict__.copy()
    del state["padding_idx"]
    old = Embedding.__new__(Embedding)
    old.__setstate__(state)
    assert old.padding_idx is None and repr(old) == "Embedding(4, 2)"
    np.testing.assert_array_equal(old(t([3, 0])).numpy(), emb(t([3, 0])).numpy())


def test_embedding_repr_and_default():
    assert repr(Embedding(10, 3)) == "Embedding(10, 3)"
    assert repr(Embedding(10, 3, padding_idx=-2)) == "Embedding(10, 3, padding_idx=8)"
    assert Embedding(10, 3).padding_idx is None
    assert Embedding(10, 3, 0, dtype=kiln.float64).weight.dtype == kiln.float64


@pytest.mark.parametrize("padding_idx, error, message", [
    (5, kiln.KilnValueError, r"Embedding: padding_idx must be in \[-5, 4\], got 5"),
    (-6, kiln.KilnValueError, r"Embedding: padding_idx must be in \[-5, 4\], got -6"),
    (1.0, kiln.KilnTypeError, "Embedding: padding_idx must be an int, got float 1.0"),
    (True, kiln.KilnTypeError, "Embedding: padding_idx must be an int, got bool True"),
    # dtype given where PyTorch has padding_idx, as Kiln took it before
    (kiln.float64, kiln.KilnTypeError, "Embedding: padding_idx must be an int, got dtype"),
])
def test_padding_idx_errors(padding_idx, error, message):
    with raises(error, match=message):
        Embedding(5, 3, padding_idx)


# ------------------------------------------------------------------------------------------------
# trunc_normal_


def truncated_moments(mean, std, a, b):
    """The mean and standard deviation of N(mean, std**2) truncated to [a, b] (closed form)."""
    def pdf(z):
        return math.exp(-z * z / 2) / math.sqrt(2 * math.pi) if math.isfinite(z) else 0.0

    def cdf(z):
        return (1 + math.erf(z / math.sqrt(2))) / 2

    alpha, beta = (a - mean) / std, (b - mean) / std
    mass = cdf(beta) - cdf(alpha)
    shift = (pdf(alpha) - pdf(beta)) / mass
    spread = ((alpha * pdf(alpha) if math.isfinite(alpha) else 0.0)
              - (beta * pdf(beta) if math.isfinite(beta) else 0.0)) / mass
    return mean + std * shift, std * math.sqrt(1 + spread - shift ** 2)


# (mean, std, a, b): the default, a ViT's std = 0.02 (nothing truncated), an asymmetric cut, an
# infinite bound and a one-sided tail.
TRUNC_CASES = [(0.0, 1.0, -2.0, 2.0), (0.0, 0.02, -2.0, 2.0), (0.5, 2.0, -1.0, 3.0),
               (1.0, 1.0, -math.inf, 1.5), (0.0, 1.0, 1.0, 3.0)]


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.float16], ids=str)
@pytest.mark.parametrize("mean, std, a, b", TRUNC_CASES)
def test_trunc_normal_has_the_truncated_distribution(mean, std, a, b, dtype):
    kiln.manual_seed(7)
    tensor = mint.empty(100_000, dtype=dtype)
    assert trunc_normal_(tensor, mean, std, a, b) is tensor
    values = tensor.numpy().astype(np.float64)
    assert values.min() >= a and values.max() <= b and np.all(np.isfinite(values))
    want_mean, want_std = truncated_moments(mean, std, a, b)
    # 1e5 samples: the sample mean is within 5 standard errors, the std within 2%.
    rounding = 1e-3 * max(abs(a), abs(b), 1.0) if dtype == kiln.float16 else 0.0
    assert abs(values.mean() - want_mean) < 5 * want_std / math.sqrt(values.size) + rounding
    assert values.std() == pytest.approx(want_std, rel=0.02)
    # The empirical CDF against the truncated normal's (a Kolmogorov-Smirnov distance).
    def cdf(z):
        return (1 + math.erf((z - mean) / (std * math.sqrt(2)))) / 2

    low, high = cdf(a), cdf(b)
    grid = np.quantile(values, np.linspace(0.01, 0.99, 99))
    expected = np.array([(cdf(g) - low) / (high - low) for g in grid])
    assert np.max(np.abs(expected - np.linspace(0.01, 0.99, 99))) < 0.01 + rounding


def test_trunc_normal_repeats_under_a_seed_and_writes_in_place():
    w = nn.Parameter(mint.empty(4, 5))
    kiln.manual_seed(3)
    trunc_normal_(w, std=0.5)
    first = w.numpy().copy()
    kiln.manual_seed(3)
    trunc_normal_(w, std=0.5)
    np.testing.assert_array_equal(w.numpy(), first)
    assert w.requires_grad and w.is_leaf and np.all(np.abs(first) <= 2.0)
    assert trunc_normal_(mint.empty(0, 3)).shape == (0, 3)
    np.testing.assert_array_equal(trunc_normal_(mint.empty(3), a=1.5, b=1.5).numpy(), [1.5] * 3)


def test_trunc_normal_warns_about_a_mean_far_from_the_bounds():
    with pytest.warns(UserWarning, match="mean is more than 2 std from"):
        trunc_normal_(mint.empty(10), mean=10.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trunc_normal_(mint.empty(10), mean=3.9)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"std": 0.0}, kiln.KilnValueError,
     "trunc_normal_: expected a finite mean and a finite std > 0, got mean=0.0, std=0.0"),
    ({"std": -1.0}, kiln.KilnValueError, "std=-1.0"),
    ({"mean": math.nan}, kiln.KilnValueError, "mean=nan"),
    ({"a": 2.0, "b": -2.0}, kiln.KilnValueError,
     "trunc_normal_: expected a <= b, got a=2.0, b=-2.0"),
    ({"b": math.nan}, kiln.KilnValueError, "expected a <= b"),
    ({"a": "-2"}, kiln.KilnTypeError, "trunc_normal_: expected a to be a real number, got str"),
])
def test_trunc_normal_errors(kwargs, error, message):
    tensor = mint.zeros(3)
    with raises(error, match=message):
        trunc_normal_(tensor, **kwargs)
    assert tensor.tolist() == [0.0] * 3


def test_trunc_normal_needs_a_floating_point_tensor():
    with raises(kiln.DTypeError, match="nn.init.trunc_normal_: expected a floating-point tensor, "
                                       "got int64"):
        trunc_normal_(mint.zeros(3, dtype=kiln.int64))


# ------------------------------------------------------------------------------------------------
# Forward hooks


class Affine(nn.Cell):
    """y = x * scale + shift, keyword ``shift`` included (hooks never see it)."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(t([2.0]))

    def construct(self, x, shift=0.0):
        return x * self.scale + shift


def record_pre(log, name, result=None):
    def hook(cell, args):
        log.append((name, cell, args))
        return result
    return hook


def record_post(log, name, result=None):
    def hook(cell, args, output):
        log.append((name, cell, args, output.tolist()))
        return result
    return hook


def test_hooks_run_in_order_around_construct():
    cell, log = Affine(), []
    cell.register_forward_pre_hook(record_pre(log, "pre1"))
    cell.register_forward_pre_hook(record_pre(log, "pre0"), prepend=True)
    cell.register_forward_hook(record_post(log, "post1"))
    cell.register_forward_hook(record_post(log, "post0"), prepend=True)
    x = t([1.0, 2.0])
    out = cell(x, shift=1.0)
    assert out.tolist() == [3.0, 5.0]
    assert [entry[0] for entry in log] == ["pre0", "pre1", "post0", "post1"]
    assert all(entry[1] is cell and entry[2][0] is x and len(entry[2]) == 1 for entry in log)
    assert log[2][3] == [3.0, 5.0]


def test_hooks_replace_arguments_and_output():
    cell, log = Affine(), []
    # A single value stands for a one-argument tuple; the next hook sees the replacement.
    cell.register_forward_pre_hook(lambda c, args: args[0] + 1.0)
    cell.register_forward_pre_hook(record_pre(log, "seen"))
    cell.register_forward_hook(lambda c, args, out: out * 10.0)
    cell.register_forward_hook(record_post(log, "after"))
    out = cell(t([1.0]))
    assert out.tolist() == [40.0]  # (1 + 1) * 2 * 10
    assert log[0][2][0].tolist() == [2.0] and log[1][2][0].tolist() == [2.0]
    assert log[1][3] == [40.0]
    two = nn.Cell()
    two.construct = lambda a, b: a - b
    two.register_forward_pre_hook(lambda c, args: (args[1], args[0]))  # a tuple: the arguments
    assert two(t([5.0]), t([3.0])).tolist() == [-2.0]


def test_handles_remove_their_hook():
    cell, log = Affine(), []
    first = cell.register_forward_hook(record_post(log, "first"))
    with cell.register_forward_pre_hook(record_pre(log, "scoped")) as scoped:
        cell(t([1.0]))
    assert [entry[0] for entry in log] == ["scoped", "first"]
    assert scoped.id not in cell._forward_pre_hooks
    first.remove()
    first.remove()  # again: nothing
    log.clear()
    assert cell(t([1.0])).tolist() == [2.0] and log == []
    assert not cell._forward_hooks and not cell._forward_pre_hooks


def test_a_hook_may_remove_itself_while_running():
    cell, calls = Affine(), []
    handles = []

    def once(c, args, output):
        calls.append(1)
        handles[0].remove()

    handles.append(cell.register_forward_hook(once))
    cell.register_forward_hook(lambda c, args, output: calls.append(2))
    cell(t([1.0]))
    cell(t([1.0]))
    assert calls == [1, 2, 2]


def test_hooks_are_no_state_and_do_not_follow_handles_into_copies():
    cell, log = Affine(), []
    handle = cell.register_forward_hook(record_post(log, "hook"))
    assert list(cell.state_dict()) == ["scale"] and len(list(cell.parameters())) == 1
    twin = copy.deepcopy(cell)
    assert twin._forward_hooks is not cell._forward_hooks
    handle.remove()  # the original's hook only
    twin(t([1.0]))
    cell(t([1.0]))
    assert [entry[1] for entry in log] == [twin]
    shallow = copy.copy(cell)  # shares the hooks as it shares the registries, as in PyTorch
    assert shallow._forward_hooks is cell._forward_hooks


def module_level_hook(cell, args, output):
    return output + 100.0


def test_pickle_keeps_hooks_that_pickle_can_import():
    cell = Affine()
    cell.register_forward_hook(module_level_hook)
    loaded = pickle.loads(pickle.dumps(cell))
    assert loaded(t([1.0])).tolist() == [102.0]
    cell.register_forward_hook(lambda c, a, o: o)
    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(cell)


def test_a_cell_pickled_before_hooks_existed_runs_and_takes_hooks():
    state = Affine().__dict__.copy()
    del state["_forward_hooks"], state["_forward_pre_hooks"]
    old = Affine.__new__(Affine)
    old.__setstate__(state)
    assert old(t([1.0])).tolist() == [2.0]
    handle = old.register_forward_hook(module_level_hook)
    assert old(t([1.0])).tolist() == [102.0]
    assert not Affine._forward_hooks and not nn.Cell._forward_hooks  # the class's stay empty
    handle.remove()
    assert old(t([1.0])).tolist() == [2.0]


def test_hooks_run_while_a_jitted_function_is_traced():
    cell, calls = Affine(), []
    cell.register_forward_hook(lambda c, args, out: calls.append(1) or out * 3.0)
    jitted = kiln.jit(lambda x: cell(x))
    for _ in range(2):
        assert jitted(t([1.0])).tolist() == [6.0]  # the hook's * 3 is in the graph
    assert calls == [1]  # ran once, at the trace


def test_hook_gradients_flow():
    cell = Affine()
    cell.register_forward_hook(lambda c, args, out: out * out)
    x = t([3.0])
    (grad,) = kiln.autograd.grad(mint.sum(cell(x)), cell.scale)
    assert grad.tolist() == [36.0]  # d/ds (3 s)^2 = 18 s at s = 2


@pytest.mark.parametrize("call, error, message", [
    (lambda c: c.register_forward_hook(None), kiln.KilnTypeError,
     "Affine.register_forward_hook: expected a callable hook, got NoneType"),
    (lambda c: c.register_forward_pre_hook(module_level_hook, with_kwargs=True),
     kiln.KilnNotImplementedError,
     "Affine.register_forward_pre_hook: with_kwargs=True is not supported"),
    (lambda c: c.register_forward_hook(module_level_hook, always_call=True),
     kiln.KilnNotImplementedError, "always_call=True is not supported"),
    (lambda c: c.register_forward_hook(module_level_hook, prepend=1), kiln.KilnTypeError,
     "Affine.register_forward_hook: prepend must be a bool, got int 1"),
    (lambda c: c.register_forward_pre_hook(module_level_hook, True), TypeError, "positional"),
])
def test_hook_registration_errors(call, error, message):
    cell = Affine()
    with raises(error, match=message):
        call(cell)
    assert not cell._forward_hooks and not cell._forward_pre_hooks


def test_hook_names_cannot_be_registered_as_members():
    cell = nn.Cell()
    with raises(kiln.KilnValueError, match="'_forward_hooks' is already an attribute"):
        cell.register_buffer("_forward_hooks", t([1.0]))


# ------------------------------------------------------------------------------------------------
# Adaptive pooling

# (input shape, output_size): uneven and overlapping windows, None sizes, an output larger than
# the input, empty outputs, 3-d input, and even windows (avg_pool2d / max_pool2d).
ADAPTIVE_CASES = [((2, 3, 10, 7), (3, 4)), ((1, 2, 5, 5), 3), ((3, 9, 6), (4, None)),
                  ((1, 2, 3, 3), 5), ((1, 1, 6, 6), (4, 3)), ((2, 1, 7, 5), (None, 2)),
                  ((1, 1, 4, 4), 0), ((1, 1, 7, 5), (0, 2)), ((2, 3, 8, 8), (4, 2)),
                  ((3, 6, 6), 1), ((2, 2, 9, 12), (None, 5))]


def reference_adaptive_pool(x, output_size, reduce):
    """PyTorch's adaptive pooling over the last two dims of x, window by window, in NumPy."""
    sizes = x.shape[-2:]
    if not isinstance(output_size, tuple):
        output_size = (output_size, output_size)
    out_h, out_w = (s if o is None else o for o, s in zip(output_size, sizes))
    out = np.empty(x.shape[:-2] + (out_h, out_w), x.dtype)
    for i in range(out_h):
        top, bottom = i * sizes[0] // out_h, -(-(i + 1) * sizes[0] // out_h)
        for j in range(out_w):
            left, right = j * sizes[1] // out_w, -(-(j + 1) * sizes[1] // out_w)
            out[..., i, j] = reduce(x[..., top:bottom, left:right], axis=(-2, -1))
    return out


POOL_FUNCTIONS = {"avg": (mint.adaptive_avg_pool2d, np.mean),
                  "max": (mint.adaptive_max_pool2d, np.max)}


@pytest.mark.parametrize("kind", POOL_FUNCTIONS)
@pytest.mark.parametrize("shape, output_size", ADAPTIVE_CASES, ids=str)
def test_adaptive_pool_matches_numpy(shape, output_size, kind, rng):
    fn, reduce = POOL_FUNCTIONS[kind]
    values = rng.permutation(np.prod(shape)).reshape(shape) * 0.25  # distinct: no ties
    x = t(values).requires_grad_()
    out = fn(x, output_size)
    expected = reference_adaptive_pool(values, output_size, reduce)
    assert out.dtype == kiln.float64 and out.shape == expected.shape
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12)
    if out.numel():
        assert gradcheck(lambda v: fn(v, output_size), (x,))


def test_adaptive_max_gradient_goes_to_the_first_maximum_in_row_major_order():
    # Ties everywhere: a window's gradient goes to its first maximum, row by row, as PyTorch's.
    x = t(np.array([[0.0, 1.0, 1.0], [1.0, 1.0, 0.0], [1.0, 0.0, 1.0]])[None, None])
    x.requires_grad_()
    (grad,) = kiln.autograd.grad(mint.sum(mint.adaptive_max_pool2d(x, 2)), x)
    # Windows: rows [0, 2) and [1, 3), columns [0, 2) and [1, 3); the first two pick (0, 1),
    # the others (1, 0) and (1, 1).
    np.testing.assert_array_equal(grad.numpy()[0, 0], [[0, 2, 0], [1, 1, 0], [0, 0, 0]])


def test_non_finite_values_stay_in_their_windows():
    values = np.arange(25.0).reshape(1, 1, 5, 5)
    values[0, 0, 0, 0], values[0, 0, 4, 4] = np.inf, np.nan
    for fn, reduce in POOL_FUNCTIONS.values():
        out = fn(t(values), 3).numpy()
        np.testing.assert_array_equal(out, reference_adaptive_pool(values, 3, reduce))
        assert np.isinf(out[0, 0, 0, 0]) and np.isnan(out[0, 0, 2, 2])
        assert np.all(np.isfinite(out[0, 0, 1:2, :])) and np.all(np.isfinite(out[0, 0, :, 1]))


@pytest.mark.parametrize("shape, output_size", ADAPTIVE_CASES, ids=str)
def test_adaptive_max_pool_indices_point_at_the_maxima(shape, output_size, rng):
    # return_indices=True (the function and the cell): the offset h * W + w of each window's
    # maximum in its plane, where the values come from.
    values = rng.permutation(np.prod(shape)).reshape(shape) * 0.25  # distinct: no ties
    expected = reference_adaptive_pool(values, output_size, np.max)
    planes = values.reshape(shape[:-2] + (-1,))
    for out, indices in (mint.adaptive_max_pool2d(t(values), output_size, return_indices=True),
                         AdaptiveMaxPool2d(output_size, True)(t(values))):
        assert indices.dtype == kiln.int64 and indices.shape == expected.shape
        np.testing.assert_array_equal(out.numpy(), expected)
        found = np.take_along_axis(planes, indices.numpy().reshape(planes.shape[:-1] + (-1,)), -1)
        np.testing.assert_array_equal(found.reshape(expected.shape), expected)


@pytest.mark.parametrize("dtype", NARROW_DTYPES + [kiln.float32], ids=str)
@pytest.mark.parametrize("kind", POOL_FUNCTIONS)
def test_adaptive_pool_keeps_the_dtype(kind, dtype, rng):
    fn, reduce = POOL_FUNCTIONS[kind]
    x = t(rng.standard_normal((2, 3, 7, 5)), kiln.float64).to(dtype)
    out = fn(x, (3, 2))
    assert out.dtype == dtype
    expected = reference_adaptive_pool(x.numpy().astype(np.float64), (3, 2), reduce)
    rtol, atol = TOLERANCES[dtype]
    np.testing.assert_allclose(out.numpy().astype(np.float64), expected, rtol=rtol, atol=atol)


@pytest.mark.parametrize("kind", POOL_FUNCTIONS)
def test_even_windows_are_the_pooling_ops(kind, rng):
    fn = POOL_FUNCTIONS[kind][0]
    op = mint.avg_pool2d if kind == "avg" else mint.max_pool2d
    x = t(rng.standard_normal((2, 3, 8, 6)), kiln.float32)
    np.testing.assert_array_equal(fn(x, (4, 2)).numpy(), op(x, (2, 3), (2, 3)).numpy())
    np.testing.assert_array_equal(fn(x[0], 2).numpy(), op(x, (4, 3), (4, 3)).numpy()[0])


@pytest.mark.parametrize("cell", [AdaptiveAvgPool2d, AdaptiveMaxPool2d])
def test_adaptive_pool_cells_compute_the_functions_also_under_jit(cell, rng):
    pool = cell((3, None))
    fn = (mint.adaptive_avg_pool2d if cell is AdaptiveAvgPool2d
          else mint.adaptive_max_pool2d)
    x = t(rng.standard_normal((2, 3, 7, 5)), kiln.float32)
    np.testing.assert_array_equal(pool(x).numpy(), fn(x, (3, None)).numpy())

    def loss(v):
        return mint.sum(mint.square(pool(v)))

    jitted, jitted_grad = kiln.jit(loss), kiln.jit(kiln.grad(loss))
    for _ in range(2):
        np.testing.assert_allclose(jitted(x).numpy(), loss(x).numpy(), rtol=1e-6)
        np.testing.assert_allclose(jitted_grad(x).numpy(), kiln.grad(loss)(x).numpy(),
                                   rtol=1e-6)
    assert repr(pool) == f"{cell.__name__}(output_size=(3, None))"
    assert list(pool.parameters()) == [] and list(pool.state_dict()) == []


def test_adaptive_pool_under_jit_with_a_dynamic_batch(rng):
    pool = kiln.jit(lambda v: mint.adaptive_avg_pool2d(v, (3, 4)), dynamic=True)
    for batch in (1, 2, 3, 5):
        x = t(rng.standard_normal((batch, 2, 7, 9)), kiln.float32)
        np.testing.assert_allclose(pool(x).numpy(), mint.adaptive_avg_pool2d(
            x, (3, 4)).numpy(), rtol=1e-6)


@pytest.mark.parametrize("call, error, message", [
    (lambda x: mint.adaptive_avg_pool2d(x, -1), kiln.KilnValueError,
     "adaptive_avg_pool2d: output_size must be at least 0, got -1"),
    (lambda x: mint.adaptive_max_pool2d(x, (2, 3, 4)), kiln.KilnValueError,
     r"adaptive_max_pool2d: expected output_size to be an int or a pair \(height, width\), got "
     r"3 sizes \(2, 3, 4\)"),
    (lambda x: mint.adaptive_avg_pool2d(x, "2"), kiln.KilnTypeError,
     "adaptive_avg_pool2d: expected output_size to be an int or a pair of ints or None, got "
     "str '2'"),
    (lambda x: mint.adaptive_avg_pool2d(x, None), kiln.KilnTypeError,
     "got NoneType None"),
    (lambda x: mint.adaptive_avg_pool2d(x, (2.0, 2)), kiln.KilnTypeError,
     "adaptive_avg_pool2d: output_size must be an int, got float 2.0"),
    (lambda x: mint.adaptive_avg_pool2d(x, True), kiln.KilnTypeError, "got bool True"),
    (lambda x: mint.adaptive_avg_pool2d(x[0, 0], 2), kiln.ShapeError,
     r"adaptive_avg_pool2d: expected input of shape \[N, C, H, W\] or \[C, H, W\], got \[4, 4\]"),
    (lambda x: mint.adaptive_max_pool2d(x[:, :, :0], 2), kiln.ShapeError,
     r"adaptive_max_pool2d: expected input with non-zero sizes in every dimension but the "
     r"batch's, got \[1, 2, 0, 4\]"),
    (lambda x: mint.adaptive_avg_pool2d(x.to(kiln.int32), 2), kiln.DTypeError,
     "adaptive_avg_pool2d: expected a floating-point input, got int32"),
    (lambda x: mint.adaptive_max_pool2d(x.numpy(), 2), kiln.KilnTypeError,
     "adaptive_max_pool2d: expected input to be a kiln.Tensor, got ndarray"),
    (lambda x: mint.adaptive_max_pool2d(x, 2, 1), kiln.KilnTypeError,
     "adaptive_max_pool2d: return_indices must be a bool, got int 1"),
    (lambda x: AdaptiveAvgPool2d((1, -2)), kiln.KilnValueError,
     "AdaptiveAvgPool2d: output_size must be at least 0, got -2"),
    (lambda x: AdaptiveMaxPool2d([1]), kiln.KilnValueError,
     r"AdaptiveMaxPool2d: expected output_size to be an int or a pair"),
    (lambda x: AdaptiveMaxPool2d(2, "no"), kiln.KilnTypeError,
     "AdaptiveMaxPool2d: return_indices must be a bool, got str 'no'"),
])
def test_adaptive_pool_errors(call, error, message):
    with raises(error, match=message):
        call(t(np.zeros((1, 2, 4, 4)), kiln.float32))


# ------------------------------------------------------------------------------------------------
# round(decimals=)

ROUND_DECIMALS = [-2, -1, 1, 2, 3, 6]


def reference_round(values, decimals, dtype):
    """PyTorch's rounding to ``decimals`` in NumPy: the scale and the arithmetic in the dtype
    (float32 for 16-bit floats, rounded once at the end)."""
    compute = np.float64 if dtype == kiln.float64 else np.float32
    x = values.astype(compute)
    scale = compute(10.0 ** abs(decimals))
    out = np.round(x * scale) / scale if decimals > 0 else np.round(x / scale) * scale
    return t(out, kiln.float64 if dtype == kiln.float64 else kiln.float32).to(dtype).numpy()


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64] + NARROW_DTYPES, ids=str)
@pytest.mark.parametrize("decimals", ROUND_DECIMALS)
def test_round_decimals_matches_the_computation(decimals, dtype, rng):
    values = t(rng.standard_normal(5000) * 300, kiln.float64).to(dtype)
    x = values.numpy().astype(np.float64)
    expected = reference_round(x, decimals, dtype)
    for out in (mint.round(values, decimals=decimals), values.round(decimals=decimals)):
        assert out.dtype == dtype
        np.testing.assert_array_equal(out.numpy(), expected)


def test_round_decimals_examples_and_ties():
    x = t([1.2345, 15.0, 25.0, -0.5, 0.125, -36.5, np.inf, np.nan])
    np.testing.assert_allclose(x.round(decimals=2).numpy(),
                               np.float32([1.23, 15, 25, -0.5, 0.12, -36.5, np.inf, np.nan]))
    # Ties to even after the scaling: 15 -> 2 tens, 25 -> 2 tens.
    np.testing.assert_array_equal(x.round(decimals=-1).numpy(),
                                  np.float32([0, 20, 20, -0, 0, -40, np.inf, np.nan]))
    assert x.round().tolist()[:4] == [1.0, 15.0, 25.0, -0.0]


def test_round_past_the_largest_scale_is_nan_not_an_overflow():
    # 10 ** 400 is inf as a double: x * inf / inf and x / inf * inf are NaN, as in PyTorch.
    for decimals in (400, -400):
        assert np.all(np.isnan(mint.round(t([1.5, -2.0]), decimals=decimals).numpy()))


def test_round_without_decimals_is_the_op():
    x = t([0.5, 1.5, 2.5, -2.5])
    np.testing.assert_array_equal(mint.round(x).numpy(), mint.round(x).numpy())
    ints = t([1, 5, -7])
    assert mint.round(ints, decimals=0).tolist() == [1, 5, -7]
    assert ints.round().dtype == kiln.int64
    assert mint.round(2.5).item() == 2.0  # a number, as the op takes one


@pytest.mark.parametrize("decimals", [0, 2, -1])
def test_round_writes_out(decimals):
    x = t([1.2345, 16.0], kiln.float32)
    out = mint.empty(2, dtype=kiln.float16)
    assert mint.round(x, decimals=decimals, out=out) is out
    np.testing.assert_array_equal(out.numpy(), mint.round(x, decimals=decimals).to(
        kiln.float16).numpy())


def test_round_has_zero_gradient_and_traces():
    x = t([1.26, -3.14159]).requires_grad_()
    (grad,) = kiln.autograd.grad(mint.sum(x.round(decimals=1) * 3.0), x)
    assert grad.tolist() == [0.0, 0.0]
    jitted = kiln.jit(lambda v: mint.round(v, decimals=2))
    for _ in range(2):
        np.testing.assert_array_equal(jitted(x.detach()).numpy(),
                                      mint.round(x.detach(), decimals=2).numpy())


@pytest.mark.parametrize("call, error, message", [
    (lambda x: x.round(2), TypeError, "positional"),  # keyword-only, as in PyTorch
    (lambda x: mint.round(x, 2), TypeError, "positional"),
    (lambda x: mint.round(x, decimals=1.5), kiln.KilnTypeError,
     "round: decimals must be an int, got float 1.5"),
    (lambda x: mint.round(t([1, 2]), decimals=1), kiln.DTypeError,
     "round: expected a floating-point input, got int64"),
    (lambda x: mint.round(1.25, decimals=1), kiln.KilnTypeError,
     "round: expected input to be a kiln.Tensor, got float"),
])
def test_round_errors(call, error, message):
    with raises(error, match=message):
        call(t([1.25]))
