"""kiln.nn.functional's soft_margin_loss, margin_ranking_loss, cosine_embedding_loss,
hinge_embedding_loss, triplet_margin_loss, gaussian_nll_loss, poisson_nll_loss and
multi_margin_loss, and their kiln.nn cells (kiln/nn/functional.py, kiln/nn/loss.py): values
against NumPy references in float32 and float64 for every reduction, broadcasting, gradients
(gradcheck in float64), the cells' arguments and reprs, kiln.jit, argument errors, then values and
gradients against PyTorch through the ``torch`` fixture."""

import math

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from conftest import TOLERANCES, check_torch, close, raises, t
from kiln import nn

mint = kiln.mint
REDUCTIONS = ["mean", "sum", "none"]
DTYPES = [kiln.float32, kiln.float64]
N, D = 5, 4


def reduce_np(loss, reduction):
    return {"mean": np.mean, "sum": np.sum, "none": np.asarray}[reduction](loss)


def softplus_np(z):
    return np.logaddexp(0.0, z)


def signs(rng, shape):
    return np.where(rng.random(shape) < 0.5, -1.0, 1.0)


# ------------------------------------------------------------------------------------------------
# NumPy references: each takes the arrays and PyTorch's keyword arguments, and returns the
# unreduced loss.


def soft_margin_np(x, y):
    return softplus_np(-x * y)


def margin_ranking_np(x1, x2, y, margin=0.0):
    return np.maximum(0.0, -y * (x1 - x2) + margin)


def cosine_embedding_np(x1, x2, y, margin=0.0):
    dot = np.sum(x1 * x2, -1)
    cos = dot / np.sqrt((np.sum(x1 * x1, -1) + 1e-12) * (np.sum(x2 * x2, -1) + 1e-12))
    return np.where(y == 1, 1 - cos, 0.0) + np.where(y == -1, np.maximum(0.0, cos - margin), 0.0)


def hinge_embedding_np(x, y, margin=1.0):
    return np.where(y != 1, np.maximum(0.0, margin - x), 0.0) + np.where(y != -1, x, 0.0)


def pdist_np(a, b, p, eps):
    diff = np.abs(a - b + eps)
    if p == math.inf:
        return diff.max(-1)
    return np.sum(diff ** p, -1) ** (1 / p)


def triplet_np(a, pos, neg, margin=1.0, p=2.0, eps=1e-6, swap=False):
    far = pdist_np(a, neg, p, eps)
    if swap:
        far = np.minimum(far, pdist_np(pos, neg, p, eps))
    return np.maximum(0.0, margin + pdist_np(a, pos, p, eps) - far)


def gaussian_nll_np(x, y, var, full=False, eps=1e-6):
    var = np.asarray(var, np.float64)
    if var.ndim and var.shape != x.shape and var.shape == x.shape[:-1]:
        var = var[..., None]
    var = np.maximum(var, eps)
    loss = 0.5 * (np.log(var) + (x - y) ** 2 / var)
    return loss + (0.5 * math.log(2 * math.pi) if full else 0.0)


def poisson_nll_np(x, y, log_input=True, full=False, eps=1e-8):
    loss = np.exp(x) - y * x if log_input else x - y * np.log(x + eps)
    if full:
        safe = np.where(y > 1, y, 1.0)
        stirling = safe * np.log(safe) - safe + 0.5 * np.log(2 * math.pi * safe)
        loss = loss + np.where(y > 1, stirling, 0.0)
    return loss


def multi_margin_np(x, y, p=1, margin=1.0, weight=None):
    x2 = np.atleast_2d(x)
    labels = np.atleast_1d(y)
    losses = []
    for row, label in zip(x2, labels):
        z = np.maximum(0.0, margin - row[label] + row) ** p
        z[label] = 0.0
        if weight is not None:
            z = z * weight[label]
        losses.append(z.sum() / row.size)
    return np.array(losses).reshape(np.shape(y))


# ------------------------------------------------------------------------------------------------
# Cases: name -> (F function, its keyword arguments, inputs(rng) -> (arrays, which are floating
# and take part in gradients), NumPy reference)


def pair_sign(rng):
    return [rng.standard_normal((N, D)), signs(rng, (N, D))], [True, False]


def ranking(rng):
    return ([rng.standard_normal((N, D)), rng.standard_normal((N, D)), signs(rng, (N, D))],
            [True, True, False])


def embedding_pair(rng):
    return ([rng.standard_normal((N, D)), rng.standard_normal((N, D)),
             np.array([1.0, -1.0, 1.0, -1.0, -1.0])], [True, True, False])


def distances(rng):
    return [rng.uniform(0.0, 2.0, (N, D)), signs(rng, (N, D))], [True, False]


def triplets(rng):
    return [rng.standard_normal((N, D)) for _ in range(3)], [True, True, True]


def gaussian(rng):
    return ([rng.standard_normal((N, D)), rng.standard_normal((N, D)),
             rng.uniform(0.2, 2.0, (N, D))], [True, True, True])


def poisson_log(rng):
    return [rng.uniform(-1.5, 1.5, (N, D)), rng.integers(0, 6, (N, D)).astype(float)], [True, False]


def poisson_rate(rng):
    return [rng.uniform(0.2, 3.0, (N, D)), rng.integers(0, 6, (N, D)).astype(float)], [True, False]


def multi_class(rng):
    return [rng.standard_normal((N, D)) * 2, rng.integers(0, D, N)], [True, False]


WEIGHT = np.array([0.5, 1.0, 2.0, 1.5])

CASES = {
    "soft_margin": (F.soft_margin_loss, {}, pair_sign, soft_margin_np),
    "margin_ranking": (F.margin_ranking_loss, {}, ranking, margin_ranking_np),
    "margin_ranking-0.5": (F.margin_ranking_loss, {"margin": 0.5}, ranking, margin_ranking_np),
    "cosine_embedding": (F.cosine_embedding_loss, {}, embedding_pair, cosine_embedding_np),
    "cosine_embedding-0.3": (F.cosine_embedding_loss, {"margin": 0.3}, embedding_pair,
                             cosine_embedding_np),
    "hinge_embedding": (F.hinge_embedding_loss, {}, distances, hinge_embedding_np),
    "hinge_embedding-1.5": (F.hinge_embedding_loss, {"margin": 1.5}, distances,
                            hinge_embedding_np),
    "triplet": (F.triplet_margin_loss, {}, triplets, triplet_np),
    "triplet-p1-swap": (F.triplet_margin_loss, {"p": 1.0, "margin": 2.0, "swap": True}, triplets,
                        triplet_np),
    "triplet-p3": (F.triplet_margin_loss, {"p": 3.0, "eps": 1e-3}, triplets, triplet_np),
    "gaussian": (F.gaussian_nll_loss, {}, gaussian, gaussian_nll_np),
    "gaussian-full": (F.gaussian_nll_loss, {"full": True, "eps": 1e-3}, gaussian,
                      gaussian_nll_np),
    "poisson": (F.poisson_nll_loss, {}, poisson_log, poisson_nll_np),
    "poisson-full": (F.poisson_nll_loss, {"full": True}, poisson_log, poisson_nll_np),
    "poisson-rate": (F.poisson_nll_loss, {"log_input": False, "eps": 1e-4}, poisson_rate,
                     poisson_nll_np),
    "poisson-rate-full": (F.poisson_nll_loss, {"log_input": False, "full": True}, poisson_rate,
                          poisson_nll_np),
    "multi_margin": (F.multi_margin_loss, {}, multi_class, multi_margin_np),
    "multi_margin-p2": (F.multi_margin_loss, {"p": 2, "margin": 0.5}, multi_class,
                        multi_margin_np),
    "multi_margin-weight": (F.multi_margin_loss, {"weight": WEIGHT}, multi_class,
                            multi_margin_np),
}


def is_float(array):
    return np.asarray(array).dtype.kind == "f"


def kiln_args(arrays, floating, dtype, grad=False):
    """The kiln tensors of a case: floating-point arrays in ``dtype`` (the ones marked
    ``floating`` requiring grad with ``grad``), integer ones as they are."""
    out = [t(a, dtype) if is_float(a) else t(a) for a in arrays]
    return [x.requires_grad_() if grad and f else x for x, f in zip(out, floating)]


def kiln_kwargs(kwargs, dtype):
    return {k: t(v, dtype) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}


def rounded(arrays, dtype):
    """The arrays with the floating-point ones rounded to ``dtype`` (the reference's inputs)."""
    return [np.asarray(a, dtype.name).astype(np.float64) if is_float(a) else a for a in arrays]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("case", CASES)
def test_loss_matches_numpy(case, dtype, reduction, rng):
    fn, kwargs, make, reference = CASES[case]
    arrays, floating = make(rng)
    out = fn(*kiln_args(arrays, floating, dtype), **kiln_kwargs(kwargs, dtype),
             reduction=reduction)
    expected = reduce_np(reference(*rounded(arrays, dtype), **kwargs), reduction)
    assert out.dtype == dtype
    rtol, atol = TOLERANCES[dtype]
    close(out, expected, rtol=rtol * 10, atol=atol * 10)


@pytest.mark.parametrize("reduction", ["mean", "none"])
@pytest.mark.parametrize("case", CASES)
def test_loss_gradients_pass_gradcheck(case, reduction, rng):
    fn, kwargs, make, _ = CASES[case]
    arrays, floating = make(rng)
    args = kiln_args(arrays, floating, kiln.float64, grad=True)
    kw = kiln_kwargs(kwargs, kiln.float64)
    assert kiln.testing.gradcheck(lambda *xs: fn(*xs, **kw, reduction=reduction), args)


@pytest.mark.parametrize("name, fn, reference, make", [
    ("soft_margin", F.soft_margin_loss, soft_margin_np,
     lambda r: [r.standard_normal((3, 1, 4)), signs(r, (2, 1))]),
    ("hinge_embedding", F.hinge_embedding_loss, hinge_embedding_np,
     lambda r: [r.uniform(0, 2, (3, 4)), signs(r, (4,))]),
    ("poisson_nll", F.poisson_nll_loss, poisson_nll_np,
     lambda r: [r.standard_normal((2, 1)), r.integers(0, 4, (2, 3)).astype(float)]),
    ("margin_ranking", F.margin_ranking_loss, margin_ranking_np,
     lambda r: [r.standard_normal((3, 4)), r.standard_normal((1, 4)), signs(r, (3, 1))]),
    ("triplet", F.triplet_margin_loss, triplet_np,
     lambda r: [r.standard_normal((3, 4)), r.standard_normal((1, 4)), r.standard_normal((3, 4))]),
    ("gaussian_nll", F.gaussian_nll_loss, gaussian_nll_np,
     lambda r: [r.standard_normal((3, 4)), r.standard_normal((4,)), r.uniform(0.5, 1, (3, 4))]),
])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_losses_broadcast_their_operands_as_pytorch(name, fn, reference, make, reduction, rng):
    arrays = make(rng)
    out = fn(*[t(a) for a in arrays], reduction=reduction)
    expected = reduce_np(reference(*arrays), reduction)
    close(out, expected, rtol=1e-12, atol=1e-12)


def test_losses_take_integer_targets_and_keep_the_inputs_dtype(rng):
    x = rng.standard_normal((N, D)).astype(np.float32)
    y = signs(rng, (N, D)).astype(np.int64)
    for fn, reference in ((F.soft_margin_loss, soft_margin_np),
                          (F.hinge_embedding_loss, hinge_embedding_np)):
        out = fn(t(x), t(y), reduction="none")
        assert out.dtype == kiln.float32
        close(out, reference(x.astype(np.float64), y), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16], ids=lambda d: d.name)
def test_16_bit_losses_are_computed_in_float32_and_rounded_once(dtype, rng):
    x, y = rng.standard_normal((N, D)), rng.standard_normal((N, D))
    var = rng.uniform(0.5, 2.0, (N, D))
    half = [t(a, kiln.float64).to(dtype) for a in (x, y, var)]
    wide = [h.to(kiln.float32) for h in half]
    out = F.gaussian_nll_loss(*half, reduction="none")
    assert out.dtype == dtype
    expected = F.gaussian_nll_loss(*wide, reduction="none").to(dtype)
    np.testing.assert_array_equal(out.to(kiln.float32).numpy(),
                                  expected.to(kiln.float32).numpy())


# ------------------------------------------------------------------------------------------------
# Edges


def test_soft_margin_loss_does_not_overflow():
    x = t(np.array([-100.0, 100.0, 0.0], np.float32))
    y = t(np.array([1.0, -1.0, 1.0], np.float32))
    x.requires_grad_()
    out = F.soft_margin_loss(x, y, reduction="none")
    np.testing.assert_allclose(out.numpy(), [100.0, 100.0, math.log(2)], rtol=1e-6)
    (grad,) = kiln.autograd.grad(mint.sum(out), [x])
    np.testing.assert_allclose(grad.numpy(), [-1.0, 1.0, -0.5], rtol=1e-6)


def test_poisson_nll_full_adds_stirling_only_above_one():
    x = t(np.zeros(4))
    target = t(np.array([0.0, 1.0, 2.0, 5.0])).requires_grad_()
    out = F.poisson_nll_loss(x, target, full=True, reduction="none")
    stirling = [0.0, 0.0] + [k * math.log(k) - k + 0.5 * math.log(2 * math.pi * k)
                             for k in (2.0, 5.0)]
    close(out, np.ones(4) + np.array(stirling), rtol=1e-12, atol=1e-12)
    (grad,) = kiln.autograd.grad(mint.sum(out), [target])
    # d/dt of -t * x (x = 0) is 0; of Stirling's term log(t) + 1 / (2t) above one.
    close(grad, [0.0, 0.0, math.log(2) + 0.25, math.log(5) + 0.1], rtol=1e-12, atol=1e-12)


def test_gaussian_nll_clamps_var_at_eps_keeping_its_gradient():
    x, y = t(np.array([1.0, 2.0])), t(np.array([0.0, 0.0]))
    var = t(np.array([1e-9, 4.0])).requires_grad_()
    out = F.gaussian_nll_loss(x, y, var, eps=1e-3, reduction="none")
    close(out, [0.5 * (math.log(1e-3) + 1 / 1e-3), 0.5 * (math.log(4) + 1)], rtol=1e-12,
          atol=0)
    (grad,) = kiln.autograd.grad(mint.sum(out), [var])
    # 0.5 * (1 / v - d^2 / v^2) at the clamped value, as PyTorch's clone-and-clamp gives.
    close(grad, [0.5 * (1e3 - 1e6), 0.5 * (0.25 - 4 / 16)], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("var_shape", [(N, D), (N,), (N, 1), (1, D)],
                         ids=["full", "no-last", "last-1", "first-1"])
def test_gaussian_nll_takes_pytorchs_var_shapes(var_shape, rng):
    x, y = rng.standard_normal((N, D)), rng.standard_normal((N, D))
    var = rng.uniform(0.5, 2.0, var_shape)
    out = F.gaussian_nll_loss(t(x), t(y), t(var), reduction="none")
    assert out.shape == (N, D)
    close(out, gaussian_nll_np(x, y, var), rtol=1e-12, atol=1e-12)
    close(F.gaussian_nll_loss(t(x), t(y), 0.75, reduction="sum"),
          gaussian_nll_np(x, y, 0.75).sum(), rtol=1e-12, atol=1e-12)


def test_multi_margin_one_sample_and_gradient_at_the_margin(rng):
    x = rng.standard_normal(D)
    out = F.multi_margin_loss(t(x), t(np.int64(2)), reduction="none")
    assert out.shape == ()
    close(out, multi_margin_np(x, np.int64(2)), rtol=1e-12, atol=1e-12)
    close(F.multi_margin_loss(t(x), t(np.array([2])), reduction="none"),
          multi_margin_np(x, np.array([2])), rtol=1e-12, atol=1e-12)
    # z = margin - x[y] + x[i] is exactly 0 for class 0: PyTorch counts z > 0 only.
    scores = t(np.array([[0.0, 1.0, 0.5]])).requires_grad_()
    (grad,) = kiln.autograd.grad(F.multi_margin_loss(scores, t(np.array([1]))), [scores])
    close(grad, [[0.0, -1 / 3, 1 / 3]], rtol=1e-12, atol=1e-12)


def test_cosine_embedding_loss_of_one_pair(rng):
    a, b = rng.standard_normal(D), rng.standard_normal(D)
    for target in (1.0, -1.0):
        out = F.cosine_embedding_loss(t(a), t(b), t(np.float64(target)), margin=-0.2)
        assert out.shape == ()
        close(out, cosine_embedding_np(a, b, np.float64(target), -0.2), rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------------------------
# Cells


CELLS = [
    (nn.SoftMarginLoss, {}, F.soft_margin_loss, pair_sign, "reduction='sum'"),
    (nn.MarginRankingLoss, {"margin": 0.5}, F.margin_ranking_loss, ranking,
     "margin=0.5, reduction='sum'"),
    (nn.CosineEmbeddingLoss, {"margin": 0.25}, F.cosine_embedding_loss, embedding_pair,
     "margin=0.25, reduction='sum'"),
    (nn.HingeEmbeddingLoss, {"margin": 1.5}, F.hinge_embedding_loss, distances,
     "margin=1.5, reduction='sum'"),
    (nn.TripletMarginLoss, {"margin": 0.5, "p": 1.0, "eps": 1e-3, "swap": True},
     F.triplet_margin_loss, triplets, "margin=0.5, p=1.0, eps=0.001, swap=True, "
                                        "reduction='sum'"),
    (nn.GaussianNLLLoss, {"full": True, "eps": 1e-2}, F.gaussian_nll_loss, gaussian,
     "full=True, eps=0.01, reduction='sum'"),
    (nn.PoissonNLLLoss, {"log_input": False, "full": True, "eps": 1e-4}, F.poisson_nll_loss,
     poisson_rate, "log_input=False, full=True, eps=0.0001, reduction='sum'"),
    (nn.MultiMarginLoss, {"p": 2, "margin": 0.5}, F.multi_margin_loss, multi_class,
     "p=2, margin=0.5, reduction='sum'"),
]


@pytest.mark.parametrize("cell, kwargs, fn, make, shown", CELLS,
                         ids=[c[0].__name__ for c in CELLS])
def test_loss_cell_applies_its_function_with_its_arguments(cell, kwargs, fn, make, shown, rng):
    loss = cell(**kwargs, reduction="sum")
    assert repr(loss) == f"{cell.__name__}({shown})"
    assert all(getattr(loss, k) == v for k, v in kwargs.items())
    arrays, floating = make(rng)
    args = kiln_args(arrays, floating, kiln.float64)
    assert loss(*args).item() == fn(*args, **kwargs, reduction="sum").item()
    assert cell().reduction == "mean"


def test_multi_margin_loss_cell_keeps_weight_as_a_buffer(rng):
    weight = t(WEIGHT)
    loss = nn.MultiMarginLoss(weight=weight)
    assert loss.weight is weight and dict(loss.named_buffers())["weight"] is weight
    arrays, _ = multi_class(rng)
    close(loss(t(arrays[0]), t(arrays[1])),
          multi_margin_np(*arrays, weight=WEIGHT).mean(), rtol=1e-12, atol=1e-12)


def test_loss_cells_keep_pytorchs_positional_order():
    assert nn.MarginRankingLoss(0.5, None, None, "none").reduction == "none"
    assert nn.TripletMarginLoss(2.0, 1.0, 1e-3, True, None, None, "sum").swap is True
    assert nn.PoissonNLLLoss(False, True, None, 1e-3, None, "none").eps == 1e-3
    assert nn.MultiMarginLoss(2, 0.5, None, None, None, "sum").p == 2
    assert nn.SoftMarginLoss(None, None, "none").reduction == "none"
    with raises(TypeError):
        nn.GaussianNLLLoss(True)  # keyword-only, as in PyTorch


# ------------------------------------------------------------------------------------------------
# kiln.jit


@pytest.mark.parametrize("case", ["triplet-p1-swap", "gaussian-full", "multi_margin-weight",
                                  "cosine_embedding-0.3"])
def test_jitted_loss_and_gradient_equal_eager(case, rng):
    fn, kwargs, make, _ = CASES[case]
    arrays, floating = make(rng)
    args = kiln_args(arrays, floating, kiln.float64)
    kw = kiln_kwargs(kwargs, kiln.float64)
    positions = tuple(i for i, f in enumerate(floating) if f)

    def loss(*xs):
        return fn(*xs, **kw)

    eager = loss(*args).item()
    eager_grads = kiln.grad(loss, grad_position=positions)(*args)
    jitted, jitted_grad = kiln.jit(loss), kiln.jit(kiln.grad(loss, grad_position=positions))
    for _ in range(2):  # the trace, then the compiled graph
        assert jitted(*args).item() == pytest.approx(eager, rel=1e-12)
        got = jitted_grad(*args)
        got = got if isinstance(got, tuple) else (got,)
        want = eager_grads if isinstance(eager_grads, tuple) else (eager_grads,)
        for g, w in zip(got, want):
            close(g, w.numpy(), rtol=1e-12, atol=1e-12)


def test_jitted_cell_equals_eager(rng):
    loss = nn.TripletMarginLoss(margin=0.5, swap=True)
    a, p, n = (t(x) for x in triplets(rng)[0])
    assert kiln.jit(loss)(a, p, n).item() == pytest.approx(loss(a, p, n).item(), rel=1e-12)


# ------------------------------------------------------------------------------------------------
# Errors


def x2(*shape):
    return mint.zeros(*shape, dtype=kiln.float64)


ERRORS = [
    (lambda: F.soft_margin_loss(x2(2), x2(2), reduction="avg"), kiln.KilnValueError,
     "soft_margin_loss: expected reduction 'mean', 'sum' or 'none', got 'avg'"),
    (lambda: F.soft_margin_loss(x2(2), x2(2), size_average=True), kiln.KilnValueError,
     "soft_margin_loss: size_average and reduce are PyTorch's deprecated spellings"),
    (lambda: F.soft_margin_loss(mint.zeros(2, dtype=kiln.int64), x2(2)), kiln.DTypeError,
     "soft_margin_loss: expected a floating-point input, got int64"),
    (lambda: F.soft_margin_loss(x2(2), [1.0, 1.0]), kiln.KilnTypeError,
     "soft_margin_loss: expected target to be a kiln.Tensor, got list"),
    (lambda: F.soft_margin_loss(x2(3), x2(4)), kiln.ShapeError,
     r"soft_margin_loss: expected shapes that broadcast, got input \[3\], target \[4\]"),
    (lambda: F.margin_ranking_loss(x2(2, 3), x2(3), x2(2, 3)), kiln.ShapeError,
     r"margin_ranking_loss: expected tensors of one number of dimensions, got input1 \[2, 3\], "
     r"input2 \[3\], target \[2, 3\]"),
    (lambda: F.margin_ranking_loss(x2(2), x2(2), x2(2), margin="1"), kiln.KilnTypeError,
     "margin_ranking_loss: expected margin to be a real number, got str '1'"),
    (lambda: F.cosine_embedding_loss(x2(2, 3), x2(2, 3), x2(2, 3)), kiln.ShapeError,
     r"cosine_embedding_loss: expected inputs \[N, D\] with a target \[N\], or inputs \[D\] "
     r"with a 0-d target \(multi-target is not supported\), got input1 \[2, 3\]"),
    (lambda: F.cosine_embedding_loss(x2(3), x2(3), x2(3)), kiln.ShapeError,
     r"cosine_embedding_loss: expected inputs \[N, D\] with a target \[N\]"),
    (lambda: F.hinge_embedding_loss(x2(2), x2(2), margin=None), kiln.KilnTypeError,
     "hinge_embedding_loss: expected margin to be a real number, got NoneType None"),
    (lambda: F.triplet_margin_loss(x2(2, 3), x2(2, 3), x2(2, 3), margin=0), kiln.KilnValueError,
     "triplet_margin_loss: expected margin > 0, got 0.0"),
    (lambda: F.triplet_margin_loss(x2(2, 3), x2(3), x2(2, 3)), kiln.ShapeError,
     r"triplet_margin_loss: expected tensors of one number of dimensions, got anchor \[2, 3\], "
     r"positive \[3\], negative \[2, 3\]"),
    (lambda: F.triplet_margin_loss(x2(2, 3), x2(2, 3), x2(2, 3), swap=1), kiln.KilnTypeError,
     "triplet_margin_loss: swap must be a bool, got int 1"),
    (lambda: F.gaussian_nll_loss(x2(2, 3), x2(2, 3), -1.0), kiln.KilnValueError,
     "gaussian_nll_loss: expected var >= 0, got -1.0"),
    (lambda: F.gaussian_nll_loss(x2(2, 3), x2(2, 3), x2(2, 3) - 1), kiln.KilnValueError,
     "gaussian_nll_loss: expected var >= 0, got a negative entry"),
    (lambda: F.gaussian_nll_loss(x2(2, 3), x2(2, 3), x2(3)), kiln.ShapeError,
     r"gaussian_nll_loss: expected var of the input's shape \[2, 3\], of it without the last "
     r"dimension, or of it with one dimension of size 1, got \[3\]"),
    (lambda: F.gaussian_nll_loss(x2(2, 3), x2(2, 3), "1"), kiln.KilnTypeError,
     "gaussian_nll_loss: expected var to be a kiln.Tensor or a real number, got str"),
    (lambda: F.gaussian_nll_loss(x2(2, 3), x2(2, 3), mint.ones(2, 3, dtype=kiln.int64)),
     kiln.DTypeError, "gaussian_nll_loss: expected a floating-point var, got int64"),
    (lambda: F.gaussian_nll_loss(x2(2), x2(2), 1.0, reduction="batchmean"), kiln.KilnValueError,
     "gaussian_nll_loss: expected reduction 'mean', 'sum' or 'none', got 'batchmean'"),
    (lambda: F.poisson_nll_loss(x2(2), x2(2), log_input=1), kiln.KilnTypeError,
     "poisson_nll_loss: log_input must be a bool, got int 1"),
    (lambda: F.multi_margin_loss(x2(2, 3), t(np.array([0, 1])), p=3), kiln.KilnValueError,
     "multi_margin_loss: only p == 1 and p == 2 are supported, got p=3"),
    (lambda: F.multi_margin_loss(x2(2, 3), x2(2)), kiln.DTypeError,
     "multi_margin_loss: expected integer class targets, got float64"),
    (lambda: F.multi_margin_loss(x2(2, 3), t(np.array([0, 1, 2]))), kiln.ShapeError,
     r"multi_margin_loss: expected target \[2\] \(one class per sample of input \[2, 3\]\), got "
     r"\[3\]"),
    (lambda: F.multi_margin_loss(x2(2, 3, 4), t(np.array([0, 1]))), kiln.ShapeError,
     r"multi_margin_loss: expected input \[N, C\] or \[C\] with C > 0, got \[2, 3, 4\]"),
    (lambda: F.multi_margin_loss(x2(2, 3), t(np.array([0, 3]))), kiln.KilnIndexError,
     r"multi_margin_loss: target 3 is out of range for 3 classes \(expected 0 <= target < 3\)"),
    (lambda: F.multi_margin_loss(x2(2, 3), t(np.array([-1, 0]))), kiln.KilnIndexError,
     "multi_margin_loss: target -1 is out of range for 3 classes"),
    (lambda: F.multi_margin_loss(x2(2, 3), t(np.array([0, 1])), weight=x2(4)), kiln.ShapeError,
     r"multi_margin_loss: expected weight \[3\] \(one per class\), got \[4\]"),
    (lambda: F.multi_margin_loss(x2(2, 3), t(np.array([0, 1])),
                                 weight=mint.ones(3, dtype=kiln.int64)), kiln.DTypeError,
     "multi_margin_loss: expected a floating-point weight, got int64"),
    (lambda: nn.MarginRankingLoss(reduction="avg"), kiln.KilnValueError,
     r"MarginRankingLoss: reduction must be one of \('mean', 'sum', 'none'\), got 'avg'"),
    (lambda: nn.SoftMarginLoss(reduce=False), kiln.KilnValueError,
     "SoftMarginLoss: size_average and reduce are PyTorch's deprecated spellings of reduction"),
    (lambda: nn.TripletMarginLoss(margin=-1.0), kiln.KilnValueError,
     "TripletMarginLoss: expected margin > 0, got -1.0"),
    (lambda: nn.TripletMarginLoss(swap="yes"), kiln.KilnTypeError,
     "TripletMarginLoss: swap must be a bool, got str 'yes'"),
    (lambda: nn.HingeEmbeddingLoss(margin="1"), kiln.KilnTypeError,
     "HingeEmbeddingLoss: expected margin to be a real number, got str '1'"),
    (lambda: nn.GaussianNLLLoss(full=1), kiln.KilnTypeError,
     "GaussianNLLLoss: full must be a bool, got int 1"),
    (lambda: nn.PoissonNLLLoss(eps=None), kiln.KilnTypeError,
     "PoissonNLLLoss: expected eps to be a real number, got NoneType None"),
    (lambda: nn.MultiMarginLoss(p=True), kiln.KilnValueError,
     "MultiMarginLoss: only p == 1 and p == 2 are supported, got p=True"),
    (lambda: nn.MultiMarginLoss(weight=[1.0, 2.0]), kiln.KilnTypeError,
     "MultiMarginLoss: expected weight to be a kiln.Tensor or None, got list"),
]


@pytest.mark.parametrize("call, error, message", ERRORS,
                         ids=[f"{i}-{m.split(':')[0]}" for i, (_, _, m) in enumerate(ERRORS)])
def test_loss_argument_errors(call, error, message):
    with raises(error, match=message):
        call()


# ------------------------------------------------------------------------------------------------
# Against PyTorch


def torch_value(torch, array, dtype, floating):
    """``array`` as torch's twin of kiln_args's tensor."""
    if not is_float(array):
        return torch.tensor(array)
    value = torch.tensor(np.asarray(array, np.float64)).to(getattr(torch, dtype.name))
    return value.requires_grad_() if floating else value


TORCH_NAMES = {"soft_margin": "soft_margin_loss", "margin_ranking": "margin_ranking_loss",
               "cosine_embedding": "cosine_embedding_loss",
               "hinge_embedding": "hinge_embedding_loss", "triplet": "triplet_margin_loss",
               "gaussian": "gaussian_nll_loss", "poisson": "poisson_nll_loss",
               "multi_margin": "multi_margin_loss"}


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("case", CASES)
def test_loss_matches_torch(torch, case, dtype, reduction, rng):
    fn, kwargs, make, _ = CASES[case]
    arrays, floating = make(rng)
    ours = kiln_args(arrays, floating, dtype, grad=True)
    theirs = [torch_value(torch, a, dtype, f) for a, f in zip(arrays, floating)]
    their_kwargs = {k: torch.tensor(v).to(getattr(torch, dtype.name))
                    if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    name = TORCH_NAMES[case.split("-")[0]]
    out = fn(*ours, **kiln_kwargs(kwargs, dtype), reduction=reduction)
    want = getattr(torch.nn.functional, name)(*theirs, **their_kwargs, reduction=reduction)
    check_torch(out, want, dtype, "value", scale_atol=True)
    upstream = rng.uniform(0.5, 2.0, tuple(want.shape))
    graded = [i for i, f in enumerate(floating) if f]
    grads = kiln.autograd.grad(out, [ours[i] for i in graded], t(upstream, dtype))
    wants = torch.autograd.grad(want, [theirs[i] for i in graded],
                                torch.tensor(upstream).to(want.dtype))
    for i, grad, expected in zip(graded, grads, wants):
        check_torch(grad, expected, dtype, f"gradient of argument {i}", scale_atol=True)


@pytest.mark.parametrize("cell, kwargs, fn, make, shown", CELLS,
                         ids=[c[0].__name__ for c in CELLS])
def test_loss_cell_matches_torch(torch, cell, kwargs, fn, make, shown, rng):
    arrays, floating = make(rng)
    ours = cell(**kwargs)(*kiln_args(arrays, floating, kiln.float64))
    theirs = getattr(torch.nn, cell.__name__)(**kwargs)(*[torch.tensor(a) for a in arrays])
    check_torch(ours, theirs, kiln.float64, "value")
