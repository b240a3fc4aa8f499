"""kiln.nn's ctc_loss, multilabel_margin_loss, multilabel_soft_margin_loss and
triplet_margin_with_distance_loss (kiln/nn/_loss_functions.py) and their cells CTCLoss,
MultiLabelMarginLoss, MultiLabelSoftMarginLoss and TripletMarginWithDistanceLoss
(kiln/nn/loss.py): values against NumPy references (CTC by a brute-force sum over alignments and
by the textbook alpha recursion, the margin losses by loops) in float32 and float64 for every
reduction, gradients (gradcheck in float64), per-sample lengths, both target layouts, repeated
labels, impossible alignments and zero_infinity, kiln.jit, the cells, argument errors, then
values and gradients against PyTorch through the ``torch`` fixture."""

import itertools

import numpy as np
import pytest

import kiln
from conftest import TOLERANCES, check_torch, close, raises, t
from kiln.nn import (CTCLoss, MultiLabelMarginLoss, MultiLabelSoftMarginLoss,
                     TripletMarginWithDistanceLoss)
from kiln.nn.functional import (ctc_loss, multilabel_margin_loss, multilabel_soft_margin_loss,
                                triplet_margin_loss, triplet_margin_with_distance_loss)

mint = kiln.mint
REDUCTIONS = ["mean", "sum", "none"]
DTYPES = [kiln.float32, kiln.float64]


def reduce_np(loss, reduction):
    return {"mean": np.mean, "sum": np.sum, "none": np.asarray}[reduction](loss)


def log_softmax_np(x):
    return x - np.logaddexp.reduce(x, axis=-1, keepdims=True)


def rounded(array, dtype):
    """``array``'s values rounded to ``dtype``, in float64 (the reference's inputs)."""
    return np.asarray(array, dtype.name).astype(np.float64)


# ------------------------------------------------------------------------------------------------
# CTC references


def ctc_brute_np(lp, target, blank):
    """-log of the summed probability of every path of lp's T frames ([T, C]) that collapses
    (repeats merged, then blanks removed) to ``target``: exponential, for tiny sizes."""
    total = -np.inf
    for path in itertools.product(range(lp.shape[1]), repeat=lp.shape[0]):
        collapsed = [c for i, c in enumerate(path)
                     if c != blank and (i == 0 or c != path[i - 1])]
        if collapsed == list(target):
            total = np.logaddexp(total, sum(lp[i, c] for i, c in enumerate(path)))
    return -total


def ctc_alpha_np(lp, target, blank):
    """One sample's loss by Graves's alpha recursion in float64, lp [T, C] its frames."""
    if lp.shape[0] == 0:
        return 0.0 if not len(target) else np.inf
    ext = [blank]
    for label in target:
        ext += [label, blank]
    alpha = np.full(len(ext), -np.inf)
    alpha[0] = lp[0, blank]
    if len(ext) > 1:
        alpha[1] = lp[0, ext[1]]
    for step in range(1, lp.shape[0]):
        prev = alpha.copy()
        for s, label in enumerate(ext):
            terms = prev[max(s - 1, 0):s + 1].tolist()
            if s >= 2 and label != blank and label != ext[s - 2]:
                terms.append(prev[s - 2])
            alpha[s] = np.logaddexp.reduce(terms) + lp[step, label]
    return -np.logaddexp.reduce(alpha[-2:] if len(ext) > 1 else alpha)


def ctc_np(lp, targets, input_lengths, blank=0, reduction="mean", zero_infinity=False):
    """ctc_loss of lp [T, N, C] and the list of each sample's targets, reduced as PyTorch's."""
    losses = np.array([ctc_alpha_np(lp[:n, i], target, blank)
                       for i, (target, n) in enumerate(zip(targets, input_lengths))])
    if zero_infinity:
        losses[np.isinf(losses)] = 0.0
    if reduction == "mean":
        return np.mean(losses / np.maximum([len(x) for x in targets], 1))
    return reduce_np(losses, reduction)


# Four samples of varied input lengths; repeated labels (2, 2 and 1, 1, 1 need a blank between);
# an empty target.
T, N, C = 8, 4, 5
TARGETS = [[2, 2, 3], [], [1, 1, 1, 4], [3, 4]]
INPUT_LENGTHS = (8, 3, 8, 5)


def padded(targets, fill=-1):
    """The targets as [N, S] (S the longest), past each length ``fill``: ignored."""
    width = max(len(x) for x in targets)
    return np.array([x + [fill] * (width - len(x)) for x in targets], np.int64)


def concatenated(targets):
    return np.array(sum(targets, []), np.int64)


def lengths(targets):
    return tuple(len(x) for x in targets)


def ctc_logits(rng, steps=T, batch=N, classes=C):
    return rng.standard_normal((steps, batch, classes)) * 1.5


# ------------------------------------------------------------------------------------------------
# CTC


@pytest.mark.parametrize("target, blank", [([1, 2], 0), ([1, 1], 0), ([2, 2, 2], 0), ([], 0),
                                           ([0, 1], 2), ([0, 0], 1)],
                         ids=["distinct", "repeat", "repeat3", "empty", "blank2", "blank1"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_ctc_equals_the_sum_over_alignments(target, blank, dtype, rng):
    lp = log_softmax_np(rng.standard_normal((6, 1, 3)))
    out = ctc_loss(t(lp, dtype), t(np.array([target], np.int64).reshape(1, -1)), (6,),
                   (len(target),), blank=blank, reduction="none")
    expected = ctc_brute_np(rounded(lp, dtype)[:, 0], target, blank)
    assert out.dtype == dtype and out.shape == (1,)
    rtol, atol = TOLERANCES[dtype]
    close(out, [expected], rtol=rtol * 10, atol=atol * 10)
    assert ctc_alpha_np(lp[:, 0], target, blank) == pytest.approx(
        ctc_brute_np(lp[:, 0], target, blank), rel=1e-12)  # the reference is right too


@pytest.mark.parametrize("layout", ["padded-tuples", "concatenated-tensors"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_ctc_matches_numpy(layout, reduction, dtype, rng):
    lp = log_softmax_np(ctc_logits(rng))
    if layout == "padded-tuples":
        targets, inputs, target_lengths = t(padded(TARGETS)), INPUT_LENGTHS, lengths(TARGETS)
    else:
        targets = t(concatenated(TARGETS))
        inputs = t(np.array(INPUT_LENGTHS, np.int32))
        target_lengths = t(np.array(lengths(TARGETS), np.int32))
    out = ctc_loss(t(lp, dtype), targets, inputs, target_lengths, reduction=reduction)
    expected = ctc_np(rounded(lp, dtype), TARGETS, INPUT_LENGTHS, reduction=reduction)
    assert out.dtype == dtype
    rtol, atol = TOLERANCES[dtype]
    close(out, expected, rtol=rtol * 10, atol=atol * 10)


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_ctc_gradient_passes_gradcheck(reduction, rng):
    lp = t(log_softmax_np(ctc_logits(rng, steps=5, classes=4))).requires_grad_()
    targets = t(padded([[1, 1], [], [2, 3], [3]]))
    assert kiln.testing.gradcheck(
        lambda x: ctc_loss(x, targets, (5, 2, 4, 3), (2, 0, 2, 1), reduction=reduction), [lp])


def test_ctc_frames_past_an_input_length_get_no_gradient(rng):
    lp = t(log_softmax_np(ctc_logits(rng))).requires_grad_()
    out = ctc_loss(lp, t(padded(TARGETS)), INPUT_LENGTHS, lengths(TARGETS), reduction="sum")
    (grad,) = kiln.autograd.grad(out, [lp])
    for i, n in enumerate(INPUT_LENGTHS):
        assert np.all(grad.numpy()[n:, i] == 0) and np.any(grad.numpy()[:n, i] != 0)


def test_ctc_of_one_sample_has_no_batch_dimension(rng):
    lp = log_softmax_np(ctc_logits(rng))[:, 0]
    target = TARGETS[0]
    out = ctc_loss(t(lp), t(np.array(target)), t(np.int64(T)), t(np.int64(len(target))),
                   reduction="none")
    assert out.shape == ()
    close(out, ctc_alpha_np(lp, target, 0), rtol=1e-12, atol=1e-12)
    mean = ctc_loss(t(lp), t(np.array([target])), (T,), (len(target),))
    close(mean, ctc_alpha_np(lp, target, 0) / len(target), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_impossible_alignments_are_inf_or_zero_with_no_gradient(zero_infinity, reduction,
                                                                    rng):
    # [1, 1, 1] needs 5 frames, [2] one: 3 and 0 are too few; an empty target in 0 frames is 0.
    lp = t(log_softmax_np(ctc_logits(rng, steps=4, batch=4))).requires_grad_()
    targets = [[1, 1, 1], [3, 4], [2], []]
    inputs = (3, 4, 0, 0)
    out = ctc_loss(lp, t(padded(targets)), inputs, lengths(targets), reduction=reduction,
                   zero_infinity=zero_infinity)
    expected = ctc_np(lp.detach().numpy(), targets, inputs, reduction=reduction,
                      zero_infinity=zero_infinity)
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-12)
    (grad,) = kiln.autograd.grad(mint.sum(out), [lp])
    grad = grad.numpy()
    assert np.all(np.isfinite(grad))
    assert np.all(grad[:, [0, 2, 3]] == 0) and np.any(grad[:, 1] != 0)


def test_ctc_takes_log_probabilities_that_are_minus_inf(rng):
    # A class masked out (log-probability -inf) that no alignment needs: finite value and
    # gradient; one a target needs: an impossible alignment.
    lp = log_softmax_np(ctc_logits(rng, batch=2))
    lp[:, :, 4] = -np.inf
    x = t(lp).requires_grad_()
    targets = [[1, 2], [4]]
    out = ctc_loss(x, t(padded(targets)), (T, T), (2, 1), reduction="none")
    close(out, [ctc_alpha_np(lp[:, 0], [1, 2], 0), np.inf], rtol=1e-12, atol=1e-12)
    (grad,) = kiln.autograd.grad(out[0], [x])
    assert np.all(np.isfinite(grad.numpy()))


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16], ids=lambda d: d.name)
def test_ctc_16_bit_is_computed_in_float32_and_rounded_once(dtype, rng):
    half = t(log_softmax_np(ctc_logits(rng))).to(dtype)
    args = (t(padded(TARGETS)), INPUT_LENGTHS, lengths(TARGETS))
    out = ctc_loss(half, *args, reduction="none")
    assert out.dtype == dtype
    expected = ctc_loss(half.to(kiln.float32), *args, reduction="none").to(dtype)
    np.testing.assert_array_equal(out.to(kiln.float32).numpy(),
                                  expected.to(kiln.float32).numpy())


def test_jitted_ctc_and_its_gradient_equal_eager(rng):
    logits, targets = t(ctc_logits(rng)), t(padded(TARGETS))

    def loss(x):
        return ctc_loss(mint.log_softmax(x, 2), targets, INPUT_LENGTHS, lengths(TARGETS))

    eager, eager_grad = loss(logits).item(), kiln.grad(loss)(logits)
    jitted, jitted_grad = kiln.jit(loss), kiln.jit(kiln.grad(loss))
    for _ in range(2):  # the trace, then the compiled graph
        assert jitted(logits).item() == pytest.approx(eager, rel=1e-12)
        close(jitted_grad(logits), eager_grad.numpy(), rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------------------------
# Multi-label and triplet references and cases


def multilabel_margin_np(x, y):
    """Each sample's sum over its labels j (before the first -1) and the classes i not among
    them of max(0, 1 - (x[j] - x[i])), divided by C."""
    losses = []
    for row, labels in zip(np.atleast_2d(x), np.atleast_2d(y)):
        listed = list(itertools.takewhile(lambda label: label != -1, labels))
        others = [i for i in range(row.size) if i not in listed]
        losses.append(sum(max(0.0, 1 - (row[j] - row[i])) for j in listed for i in others)
                      / row.size)
    return np.array(losses).reshape(np.shape(x)[:-1])


def multilabel_soft_margin_np(x, y, weight=None):
    log_sigmoid = -np.logaddexp(0.0, -x)
    loss = -(y * log_sigmoid + (1 - y) * (log_sigmoid - x))  # log(sigmoid(-x)) = ... - x
    if weight is not None:
        loss = loss * weight
    return loss.mean(np.ndim(x) - 1)


def pairwise_np(u, v):
    return np.sqrt(np.sum((u - v + 1e-6) ** 2, -1))


def l1_np(u, v):
    return np.abs(u - v).sum(-1)


def triplet_distance_np(a, pos, neg, distance_function=pairwise_np, margin=1.0, swap=False):
    far = distance_function(a, neg)
    if swap:
        far = np.minimum(far, distance_function(pos, neg))
    return np.maximum(0.0, margin + distance_function(a, pos) - far)


def l1_kiln(u, v):
    return mint.sum(mint.abs(u - v), -1)


# Label lists ended by -1 (an entry after it ignored), a label listed twice, one with every class
# and one with none.
LABELS = np.array([[3, 0, -1, 1, 2], [1, 1, -1, -1, -1], [0, 1, 2, 3, 4], [-1, 2, 0, 1, 3]])
WEIGHT = np.array([0.5, 1.0, 2.0, 1.5, 0.25])


def multi_label(rng):
    return [rng.standard_normal((4, 5)), LABELS], [True, False]


def soft_labels(rng):
    return [rng.standard_normal((4, 5)) * 2, (rng.random((4, 5)) < 0.5) * 1.0], [True, False]


def triplets(rng):
    return [rng.standard_normal((5, 3)) for _ in range(3)], [True, True, True]


# name: (function, its keyword arguments, inputs(rng) -> (arrays, which take gradients),
# NumPy reference, its keyword arguments)
CASES = {
    "multilabel_margin": (multilabel_margin_loss, {}, multi_label, multilabel_margin_np, {}),
    "multilabel_soft_margin": (multilabel_soft_margin_loss, {}, soft_labels,
                               multilabel_soft_margin_np, {}),
    "multilabel_soft_margin-weight": (multilabel_soft_margin_loss, {"weight": WEIGHT},
                                      soft_labels, multilabel_soft_margin_np,
                                      {"weight": WEIGHT}),
    "triplet_distance": (triplet_margin_with_distance_loss, {}, triplets, triplet_distance_np,
                         {}),
    "triplet_distance-swap": (triplet_margin_with_distance_loss, {"margin": 2.0, "swap": True},
                              triplets, triplet_distance_np, {"margin": 2.0, "swap": True}),
    "triplet_distance-l1": (triplet_margin_with_distance_loss,
                            {"distance_function": l1_kiln, "margin": 0.5}, triplets,
                            triplet_distance_np, {"distance_function": l1_np, "margin": 0.5}),
}


def kiln_args(arrays, floating, dtype, grad=False):
    out = [t(a, dtype) if np.asarray(a).dtype.kind == "f" else t(a) for a in arrays]
    return [x.requires_grad_() if grad and f else x for x, f in zip(out, floating)]


def kiln_kwargs(kwargs, dtype):
    return {k: t(v, dtype) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("case", CASES)
def test_loss_matches_numpy(case, dtype, reduction, rng):
    fn, kwargs, make, reference, ref_kwargs = CASES[case]
    arrays, _ = make(rng)
    out = fn(*kiln_args(arrays, [False] * len(arrays), dtype), **kiln_kwargs(kwargs, dtype),
             reduction=reduction)
    inputs = [rounded(a, dtype) if np.asarray(a).dtype.kind == "f" else a for a in arrays]
    expected = reduce_np(reference(*inputs, **ref_kwargs), reduction)
    assert out.dtype == dtype
    rtol, atol = TOLERANCES[dtype]
    close(out, expected, rtol=rtol * 10, atol=atol * 10)


@pytest.mark.parametrize("case", CASES)
def test_loss_gradients_pass_gradcheck(case, rng):
    fn, kwargs, make, _, _ = CASES[case]
    arrays, floating = make(rng)
    args = kiln_args(arrays, floating, kiln.float64, grad=True)
    kw = kiln_kwargs(kwargs, kiln.float64)
    assert kiln.testing.gradcheck(lambda *xs: fn(*xs, **kw, reduction="none"), args)


def test_multilabel_margin_of_one_sample_and_gradient_at_the_margin(rng):
    x = rng.standard_normal(5)
    out = multilabel_margin_loss(t(x), t(LABELS[0]), reduction="none")
    assert out.shape == ()
    close(out, multilabel_margin_np(x, LABELS[0]), rtol=1e-12, atol=1e-12)
    zero_d = multilabel_margin_loss(t(np.float64(0.5)), t(np.int64(0)), reduction="none")
    assert zero_d.shape == () and zero_d.item() == 0.0  # the one class is the label
    # 1 - (x[1] - x[0]) is exactly 0: PyTorch counts z > 0 only.
    scores = t(np.array([[0.0, 1.0, 0.5]])).requires_grad_()
    (grad,) = kiln.autograd.grad(multilabel_margin_loss(scores, t(np.array([[1, -1, 0]]))),
                                 [scores])
    close(grad, [[0.0, -1 / 3, 1 / 3]], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multilabel_soft_margin_broadcasts_as_pytorch(reduction, rng):
    x = rng.standard_normal((3, 4))
    for target, weight in (((rng.random((3, 1)) < 0.5) * 1.0, None),
                           ((rng.random(4) < 0.5) * 1.0, rng.uniform(0.5, 2, (1, 4)))):
        out = multilabel_soft_margin_loss(t(x), t(target),
                                          None if weight is None else t(weight),
                                          reduction=reduction)
        expected = reduce_np(multilabel_soft_margin_np(x, target, weight), reduction)
        close(out, expected, rtol=1e-12, atol=1e-12)
    integer = multilabel_soft_margin_loss(t(x, kiln.float32), t(np.ones((3, 4), np.int64)))
    assert integer.dtype == kiln.float32


def test_triplet_with_the_default_distance_is_triplet_margin_loss(rng):
    a, p, n = (t(x) for x in triplets(rng)[0])
    for swap in (False, True):
        assert triplet_margin_with_distance_loss(a, p, n, swap=swap).item() == \
            triplet_margin_loss(a, p, n, swap=swap).item()
    # The operands broadcast, as pairwise_distance's.
    out = triplet_margin_with_distance_loss(a, p[:1], n, reduction="none")
    close(out, triplet_distance_np(a.numpy(), p.numpy()[:1], n.numpy()), rtol=1e-12,
          atol=1e-12)


def test_triplet_distance_function_gets_the_inputs_as_they_are(rng):
    seen = []

    def distance(u, v):
        seen.append((u.dtype, tuple(u.shape), tuple(v.shape)))
        return l1_kiln(u, v)

    half = [t(x).to(kiln.float16) for x in triplets(rng)[0]]
    out = triplet_margin_with_distance_loss(*half, distance_function=distance, swap=True)
    assert out.dtype == kiln.float16
    assert seen == [(kiln.float16, (5, 3), (5, 3))] * 3  # d(a, p), d(a, n), d(p, n)


def test_jitted_multilabel_margin_equals_eager(rng):
    x, labels = (t(a) for a in multi_label(rng)[0])
    eager = multilabel_margin_loss(x, labels).item()
    jitted = kiln.jit(multilabel_margin_loss)
    for _ in range(2):
        assert jitted(x, labels).item() == pytest.approx(eager, rel=1e-12)


# ------------------------------------------------------------------------------------------------
# Cells


def test_ctc_loss_cell_applies_ctc_loss(rng):
    loss = CTCLoss(blank=4, reduction="sum", zero_infinity=True)
    assert repr(loss) == "CTCLoss(blank=4, zero_infinity=True, reduction='sum')"
    lp = t(log_softmax_np(ctc_logits(rng)))
    targets = [[0, 0, 3], [], [1, 1, 1, 2], [3, 2]]
    args = (t(padded(targets)), INPUT_LENGTHS, lengths(targets))
    assert loss(lp, *args).item() == ctc_loss(lp, *args, blank=4, reduction="sum",
                                              zero_infinity=True).item()
    default = CTCLoss()
    assert (default.blank, default.reduction, default.zero_infinity) == (0, "mean", False)
    assert CTCLoss(1, "none", True).zero_infinity is True  # PyTorch's positional order


@pytest.mark.parametrize("cell, kwargs, case, shown", [
    (MultiLabelMarginLoss, {}, "multilabel_margin", "reduction='sum'"),
    (MultiLabelSoftMarginLoss, {}, "multilabel_soft_margin", "reduction='sum'"),
    (TripletMarginWithDistanceLoss, {"margin": 0.5, "swap": True}, "triplet_distance",
     "margin=0.5, swap=True, reduction='sum'"),
    (TripletMarginWithDistanceLoss, {"distance_function": l1_kiln}, "triplet_distance",
     "margin=1.0, swap=False, reduction='sum'"),
], ids=["MultiLabelMarginLoss", "MultiLabelSoftMarginLoss", "TripletMarginWithDistanceLoss",
        "TripletMarginWithDistanceLoss-l1"])
def test_loss_cell_applies_its_function(cell, kwargs, case, shown, rng):
    loss = cell(**kwargs, reduction="sum")
    assert repr(loss) == f"{cell.__name__}({shown})"
    fn, _, make, _, _ = CASES[case]
    args = kiln_args(make(rng)[0], [False] * 3, kiln.float64)
    assert loss(*args).item() == fn(*args, **kwargs, reduction="sum").item()
    assert cell().reduction == "mean"


def test_multilabel_soft_margin_cell_keeps_weight_as_a_buffer(rng):
    weight = t(WEIGHT)
    loss = MultiLabelSoftMarginLoss(weight)
    assert loss.weight is weight and dict(loss.named_buffers())["weight"] is weight
    x, y = soft_labels(rng)[0]
    close(loss(t(x), t(y)), multilabel_soft_margin_np(x, y, WEIGHT).mean(), rtol=1e-12,
          atol=1e-12)
    assert MultiLabelSoftMarginLoss(None, None, None, "none").reduction == "none"


def test_triplet_with_distance_cell_keeps_a_distance_cell_as_a_child(rng):
    distance = kiln.nn.PairwiseDistance(p=1.0)
    loss = TripletMarginWithDistanceLoss(distance_function=distance)
    assert dict(loss.named_children())["distance_function"] is distance
    a, p, n = (t(x) for x in triplets(rng)[0])
    assert loss(a, p, n).item() == triplet_margin_loss(a, p, n, p=1.0).item()
    with raises(TypeError):
        TripletMarginWithDistanceLoss(None)  # keyword-only, as in PyTorch


# ------------------------------------------------------------------------------------------------
# Errors


def x2(*shape):
    return mint.zeros(*shape, dtype=kiln.float64)


def ints(*values):
    return t(np.array(values, np.int64))


LP = (3, 2, 5)  # log_probs [T, N, C]


def ctc(**changed):
    """ctc_loss of zeros LP and two targets of one label, with ``changed`` arguments."""
    args = {"log_probs": x2(*LP), "targets": ints([1], [2]), "input_lengths": (3, 3),
            "target_lengths": (1, 1)}
    args.update(changed)
    return ctc_loss(**args)


ERRORS = [
    (lambda: ctc(reduction="batchmean"), kiln.KilnValueError,
     "ctc_loss: expected reduction 'mean', 'sum' or 'none', got 'batchmean'"),
    (lambda: ctc(log_probs=mint.zeros(*LP, dtype=kiln.int64)), kiln.DTypeError,
     "ctc_loss: expected a floating-point log_probs, got int64"),
    (lambda: ctc(log_probs=x2(3, 2, 5, 1)), kiln.ShapeError,
     r"ctc_loss: expected non-empty log_probs \[T, N, C\], or \[T, C\] for one sample, got "
     r"\[3, 2, 5, 1\]"),
    (lambda: ctc(log_probs=x2(0, 2, 5), input_lengths=(0, 0)), kiln.ShapeError,
     r"ctc_loss: expected non-empty log_probs \[T, N, C\], or \[T, C\] for one sample, got "
     r"\[0, 2, 5\]"),
    (lambda: ctc(blank=5), kiln.KilnValueError,
     r"ctc_loss: expected 0 <= blank < 5 \(the number of classes\), got 5"),
    (lambda: ctc(blank="0"), kiln.KilnTypeError, "ctc_loss: blank must be an int, got str '0'"),
    (lambda: ctc(zero_infinity=1), kiln.KilnTypeError,
     "ctc_loss: zero_infinity must be a bool, got int 1"),
    (lambda: ctc(input_lengths=(3,)), kiln.ShapeError,
     r"ctc_loss: expected input_lengths of 2 entries \(one per sample\), got 1"),
    (lambda: ctc(input_lengths=t(np.array([3.0, 3.0]))), kiln.DTypeError,
     "ctc_loss: expected integer input_lengths, got float64"),
    (lambda: ctc(input_lengths=ints([3, 3])), kiln.ShapeError,
     r"ctc_loss: expected input_lengths \[N\] \(one per sample\), got \[1, 2\]"),
    (lambda: ctc(input_lengths=(3, 4)), kiln.KilnValueError,
     r"ctc_loss: expected input_lengths <= 3 \(the frames of log_probs\), got 4"),
    (lambda: ctc(target_lengths=(1, -1)), kiln.KilnValueError,
     "ctc_loss: expected target_lengths >= 0, got -1"),
    (lambda: ctc(target_lengths=1), kiln.KilnTypeError,
     "ctc_loss: expected target_lengths to be an integer kiln.Tensor or a tuple of ints, got "
     "int"),
    (lambda: ctc(target_lengths=[1, 1.5]), kiln.KilnTypeError,
     r"ctc_loss: target_lengths\[1\] must be an int, got float 1.5"),
    (lambda: ctc(targets=x2(2, 1)), kiln.DTypeError,
     "ctc_loss: expected integer class targets, got float64"),
    (lambda: ctc(targets=[[1], [2]]), kiln.KilnTypeError,
     "ctc_loss: expected targets to be a kiln.Tensor, got list"),
    (lambda: ctc(targets=ints(1, 2, 3)), kiln.ShapeError,
     r"ctc_loss: expected concatenated targets \[2\] \(the sum of target_lengths\), got \[3\]"),
    (lambda: ctc(targets=ints([1], [2]), target_lengths=(2, 1)), kiln.ShapeError,
     r"ctc_loss: expected padded targets \[2, S\] with S >= 2 \(the longest of target_lengths\), "
     r"got \[2, 1\]"),
    (lambda: ctc(targets=ints([1], [2], [3])), kiln.ShapeError,
     r"ctc_loss: expected padded targets \[2, S\] with S >= 1"),
    (lambda: ctc(targets=ints([[1]], [[2]])), kiln.ShapeError,
     r"ctc_loss: expected targets \[N, S\] \(padded\) or \[sum\(target_lengths\)\] "
     r"\(concatenated\), got \[2, 1, 1\]"),
    (lambda: ctc(targets=ints([1], [5])), kiln.KilnIndexError,
     r"ctc_loss: target 5 is out of range for 5 classes \(expected 0 <= target < 5\)"),
    (lambda: ctc(targets=ints([1, -1], [-2, 2]), target_lengths=(1, 2)), kiln.KilnIndexError,
     "ctc_loss: target -2 is out of range for 5 classes"),
    (lambda: CTCLoss(blank=-1), kiln.KilnValueError, "CTCLoss: blank must be at least 0, got -1"),
    (lambda: CTCLoss(zero_infinity=None), kiln.KilnTypeError,
     "CTCLoss: zero_infinity must be a bool, got NoneType None"),
    (lambda: CTCLoss(reduction="avg"), kiln.KilnValueError,
     r"CTCLoss: reduction must be one of \('mean', 'sum', 'none'\), got 'avg'"),
    (lambda: multilabel_margin_loss(x2(2, 3), x2(2, 3)), kiln.DTypeError,
     "multilabel_margin_loss: expected integer class targets, got float64"),
    (lambda: multilabel_margin_loss(x2(2, 3), ints(0, 1, -1)), kiln.ShapeError,
     r"multilabel_margin_loss: expected target of the input's shape \[2, 3\], got \[3\]"),
    (lambda: multilabel_margin_loss(x2(3), ints([0, 1, -1])), kiln.ShapeError,
     r"multilabel_margin_loss: expected target of the input's shape \[3\], got \[1, 3\]"),
    (lambda: multilabel_margin_loss(x2(1, 2, 3), ints([[0, 1, -1]])), kiln.ShapeError,
     r"multilabel_margin_loss: expected input \[N, C\] or \[C\] with C > 0, or 0-d, got "
     r"\[1, 2, 3\]"),
    (lambda: multilabel_margin_loss(x2(2, 3), ints([0, -1, 3], [0, 1, 2])), kiln.KilnIndexError,
     r"multilabel_margin_loss: target 3 is out of range for 3 classes \(expected -1 <= target "
     r"< 3\)"),
    (lambda: multilabel_margin_loss(x2(3), ints(0, -2, 1)), kiln.KilnIndexError,
     "multilabel_margin_loss: target -2 is out of range for 3 classes"),
    (lambda: multilabel_margin_loss(x2(3), ints(0, -1, 1), reduce=False), kiln.KilnValueError,
     "multilabel_margin_loss: size_average and reduce are PyTorch's deprecated spellings"),
    (lambda: multilabel_soft_margin_loss(x2(), x2()), kiln.ShapeError,
     r"multilabel_soft_margin_loss: expected input with a class dimension \(at least 1-d\)"),
    (lambda: multilabel_soft_margin_loss(x2(2, 4), x2(3, 4)), kiln.ShapeError,
     r"multilabel_soft_margin_loss: expected shapes that broadcast, got input \[2, 4\], target "
     r"\[3, 4\]"),
    (lambda: multilabel_soft_margin_loss(x2(2, 4), x2(2, 4), x2(3)), kiln.ShapeError,
     r"multilabel_soft_margin_loss: expected shapes that broadcast, got input \[2, 4\], target "
     r"\[2, 4\], weight \[3\]"),
    (lambda: multilabel_soft_margin_loss(mint.zeros(2, dtype=kiln.int64), x2(2)),
     kiln.DTypeError, "multilabel_soft_margin_loss: expected a floating-point input, got int64"),
    (lambda: multilabel_soft_margin_loss(x2(2), x2(2), [1.0, 2.0]), kiln.KilnTypeError,
     "multilabel_soft_margin_loss: expected weight to be a kiln.Tensor, got list"),
    (lambda: triplet_margin_with_distance_loss(x2(2, 3), x2(2, 3), x2(2, 3), margin=0),
     kiln.KilnValueError, "triplet_margin_with_distance_loss: expected margin > 0, got 0.0"),
    (lambda: triplet_margin_with_distance_loss(x2(2, 3), x2(3), x2(2, 3)), kiln.ShapeError,
     r"triplet_margin_with_distance_loss: expected tensors of one number of dimensions, got "
     r"anchor \[2, 3\], positive \[3\], negative \[2, 3\]"),
    (lambda: triplet_margin_with_distance_loss(x2(2, 3), x2(3), x2(2, 3),
                                               distance_function=l1_kiln), kiln.ShapeError,
     "triplet_margin_with_distance_loss: expected tensors of one number of dimensions"),
    (lambda: triplet_margin_with_distance_loss(x2(2, 3), x2(2, 3), x2(2, 3),
                                               distance_function="l1"), kiln.KilnTypeError,
     "triplet_margin_with_distance_loss: expected distance_function to be callable or None, got "
     "str"),
    (lambda: triplet_margin_with_distance_loss(x2(2, 3), x2(2, 3), x2(2, 3),
                                               distance_function=lambda u, v: 1.0),
     kiln.KilnTypeError,
     "triplet_margin_with_distance_loss: expected distance_function to return a kiln.Tensor, "
     "got float"),
    (lambda: triplet_margin_with_distance_loss(x2(2, 3), x2(2, 3), x2(2, 3),
                                               distance_function=l1_kiln, reduction="avg"),
     kiln.KilnValueError,
     "triplet_margin_with_distance_loss: expected reduction 'mean', 'sum' or 'none', got 'avg'"),
    (lambda: triplet_margin_with_distance_loss(x2(2, 3), x2(2, 3), x2(2, 3), swap=1),
     kiln.KilnTypeError, "triplet_margin_with_distance_loss: swap must be a bool, got int 1"),
    (lambda: triplet_margin_with_distance_loss(x2(2, 3), x2(2, 3), x2(2, 3), l1_kiln), TypeError,
     "positional"),
    (lambda: TripletMarginWithDistanceLoss(margin=-1), kiln.KilnValueError,
     "TripletMarginWithDistanceLoss: expected margin > 0, got -1.0"),
    (lambda: TripletMarginWithDistanceLoss(distance_function=3), kiln.KilnTypeError,
     "TripletMarginWithDistanceLoss: expected distance_function to be callable or None, got int"),
    (lambda: TripletMarginWithDistanceLoss(swap="yes"), kiln.KilnTypeError,
     "TripletMarginWithDistanceLoss: swap must be a bool, got str 'yes'"),
    (lambda: MultiLabelSoftMarginLoss(weight=[1.0, 2.0]), kiln.KilnTypeError,
     "MultiLabelSoftMarginLoss: expected weight to be a kiln.Tensor or None, got list"),
    (lambda: MultiLabelMarginLoss(size_average=False), kiln.KilnValueError,
     "MultiLabelMarginLoss: size_average and reduce are PyTorch's deprecated spellings"),
]


@pytest.mark.parametrize("call, error, message", ERRORS,
                         ids=[f"{i}-{m.split(':')[0]}" for i, (_, _, m) in enumerate(ERRORS)])
def test_loss_argument_errors(call, error, message):
    with raises(error, match=message):
        call()


# ------------------------------------------------------------------------------------------------
# Against PyTorch


def torch_ctc(torch, logits, targets, inputs, target_lengths, **kwargs):
    """PyTorch's ctc_loss of log_softmax(logits) (a torch tensor requiring grad)."""
    return torch.nn.functional.ctc_loss(logits.log_softmax(2), targets, inputs, target_lengths,
                                        **kwargs)


@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_ctc_matches_torch(torch, dtype, reduction, zero_infinity, rng):
    # With zero_infinity the last sample ([4, 4, 4] in 4 frames) is impossible; PyTorch's
    # gradient of an impossible sample is NaN without it, so it is left out there.
    targets = TARGETS + [[4, 4, 4]] if zero_infinity else TARGETS
    inputs = INPUT_LENGTHS + (4,) if zero_infinity else INPUT_LENGTHS
    logits = ctc_logits(rng, batch=len(targets))
    x = t(logits, dtype).requires_grad_()
    tx = torch.tensor(logits).to(getattr(torch, dtype.name)).requires_grad_()
    out = ctc_loss(mint.log_softmax(x, 2), t(padded(targets)), inputs, lengths(targets),
                   reduction=reduction, zero_infinity=zero_infinity)
    want = torch_ctc(torch, tx, torch.tensor(padded(targets)), inputs, lengths(targets),
                     reduction=reduction, zero_infinity=zero_infinity)
    check_torch(out, want, dtype, "value", scale_atol=True)
    upstream = rng.uniform(0.5, 2.0, tuple(want.shape))
    (grad,) = kiln.autograd.grad(out, [x], t(upstream, dtype))
    (expected,) = torch.autograd.grad(want, [tx], torch.tensor(upstream).to(want.dtype))
    check_torch(grad, expected, dtype, "gradient of the logits", scale_atol=True)


def test_ctc_layouts_lengths_and_blank_match_torch(torch, rng):
    logits = ctc_logits(rng)
    targets = [[0, 0, 3], [], [1, 1, 1, 2], [3, 2]]
    for kiln_args_, torch_args in [
        ((t(concatenated(targets)), t(np.array(INPUT_LENGTHS)), t(np.array(lengths(targets)))),
         (torch.tensor(concatenated(targets)), torch.tensor(INPUT_LENGTHS),
          torch.tensor(lengths(targets)))),
        ((t(padded(targets, fill=0)), list(INPUT_LENGTHS), list(lengths(targets))),
         (torch.tensor(padded(targets, fill=0)), INPUT_LENGTHS, lengths(targets))),
    ]:
        x, tx = t(logits).requires_grad_(), torch.tensor(logits, requires_grad=True)
        out = ctc_loss(mint.log_softmax(x, 2), *kiln_args_, blank=4)
        want = torch_ctc(torch, tx, *torch_args, blank=4)
        check_torch(out, want, kiln.float64, "value")
        (grad,) = kiln.autograd.grad(out, [x])
        (expected,) = torch.autograd.grad(want, [tx])
        check_torch(grad, expected, kiln.float64, "gradient of the logits")
    # One sample, [T, C] with a 1-d target.
    x, tx = t(logits[:, 0]), torch.tensor(logits[:, 0])
    out = ctc_loss(mint.log_softmax(x, 1), t(np.array(targets[2])), (T,), (4,), reduction="none")
    want = torch.nn.functional.ctc_loss(tx.log_softmax(1), torch.tensor(targets[2]), (T,), (4,),
                                        reduction="none")
    assert out.shape == tuple(want.shape) == ()
    check_torch(out, want, kiln.float64, "value")


def test_ctc_log_probs_gradient_is_torchs_less_the_softmax(torch, rng):
    # PyTorch's gradient with respect to log_probs is the one with respect to the logits of a
    # log_softmax: exp(log_probs) more than the true derivative, autograd's, on each frame within
    # the input length, times the upstream gradient (pytorch/pytorch#52241).
    lp = log_softmax_np(ctc_logits(rng))
    x, tx = t(lp).requires_grad_(), torch.tensor(lp, requires_grad=True)
    args = (padded(TARGETS), INPUT_LENGTHS, lengths(TARGETS))
    out = ctc_loss(x, t(args[0]), *args[1:], reduction="none")
    want = torch.nn.functional.ctc_loss(tx, torch.tensor(args[0]), *args[1:], reduction="none")
    check_torch(out, want, kiln.float64, "value")
    upstream = rng.uniform(0.5, 2.0, N)
    (grad,) = kiln.autograd.grad(out, [x], t(upstream))
    (expected,) = torch.autograd.grad(want, [tx], torch.tensor(upstream))
    within = np.arange(T)[:, None] < np.array(INPUT_LENGTHS)[None, :]
    softmax = np.exp(lp) * (upstream * within)[:, :, None]
    close(grad, expected.numpy() - softmax, rtol=1e-10, atol=1e-10)


def test_ctc_impossible_alignment_matches_torchs_value(torch, rng):
    logits = ctc_logits(rng, batch=2)
    targets, inputs = [[1, 1, 1], [2]], (4, 0)
    for zero_infinity in (False, True):
        out = ctc_loss(t(logits), t(padded(targets)), inputs, (3, 1), reduction="none",
                       zero_infinity=zero_infinity)
        want = torch.nn.functional.ctc_loss(torch.tensor(logits), torch.tensor(padded(targets)),
                                            inputs, (3, 1), reduction="none",
                                            zero_infinity=zero_infinity)
        check_torch(out, want, kiln.float64, f"zero_infinity={zero_infinity}")


TORCH_NAMES = {"multilabel_margin": "multilabel_margin_loss",
               "multilabel_soft_margin": "multilabel_soft_margin_loss",
               "triplet_distance": "triplet_margin_with_distance_loss"}


def l1_torch(u, v):
    return (u - v).abs().sum(-1)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("case", CASES)
def test_loss_matches_torch(torch, case, dtype, reduction, rng):
    fn, kwargs, make, _, _ = CASES[case]
    arrays, floating = make(rng)
    ours = kiln_args(arrays, floating, dtype, grad=True)
    theirs = [torch.tensor(np.asarray(a, np.float64)).to(getattr(torch, dtype.name))
              .requires_grad_() if f else torch.tensor(a) for a, f in zip(arrays, floating)]
    their_kwargs = {k: torch.tensor(v).to(getattr(torch, dtype.name))
                    if isinstance(v, np.ndarray) else l1_torch if v is l1_kiln else v
                    for k, v in kwargs.items()}
    out = fn(*ours, **kiln_kwargs(kwargs, dtype), reduction=reduction)
    name = TORCH_NAMES[case.split("-")[0]]
    want = getattr(torch.nn.functional, name)(*theirs, **their_kwargs, reduction=reduction)
    check_torch(out, want, dtype, "value", scale_atol=True)
    upstream = rng.uniform(0.5, 2.0, tuple(want.shape))
    graded = [i for i, f in enumerate(floating) if f]
    grads = kiln.autograd.grad(out, [ours[i] for i in graded], t(upstream, dtype))
    wants = torch.autograd.grad(want, [theirs[i] for i in graded],
                                torch.tensor(upstream).to(want.dtype))
    for i, grad, expected in zip(graded, grads, wants):
        check_torch(grad, expected, dtype, f"gradient of argument {i}", scale_atol=True)


def test_loss_cells_match_torch(torch, rng):
    logits = log_softmax_np(ctc_logits(rng))
    args = (padded(TARGETS, fill=0), INPUT_LENGTHS, lengths(TARGETS))
    check_torch(CTCLoss(reduction="sum")(t(logits), t(args[0]), *args[1:]),
                torch.nn.CTCLoss(reduction="sum")(torch.tensor(logits), torch.tensor(args[0]),
                                                  *args[1:]), kiln.float64, "CTCLoss")
    x, y = multi_label(rng)[0]
    check_torch(MultiLabelMarginLoss()(t(x), t(y)),
                torch.nn.MultiLabelMarginLoss()(torch.tensor(x), torch.tensor(y)),
                kiln.float64, "MultiLabelMarginLoss")
    x, y = soft_labels(rng)[0]
    check_torch(MultiLabelSoftMarginLoss(t(WEIGHT))(t(x), t(y)),
                torch.nn.MultiLabelSoftMarginLoss(torch.tensor(WEIGHT))(torch.tensor(x),
                                                                        torch.tensor(y)),
                kiln.float64, "MultiLabelSoftMarginLoss")
    a, p, n = triplets(rng)[0]
    check_torch(TripletMarginWithDistanceLoss(margin=0.5, swap=True)(t(a), t(p), t(n)),
                torch.nn.TripletMarginWithDistanceLoss(margin=0.5, swap=True)(
                    torch.tensor(a), torch.tensor(p), torch.tensor(n)),
                kiln.float64, "TripletMarginWithDistanceLoss")
