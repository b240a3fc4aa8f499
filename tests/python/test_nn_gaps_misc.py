"""kiln.nn.functional's hardshrink, softshrink, rrelu and the in-place spellings (relu_,
leaky_relu_, elu_, hardtanh_, selu_, celu_, threshold_, rrelu_), kiln.nn's Hardshrink, Softshrink,
RReLU and Softmax2d (kiln/nn/activation.py), CosineSimilarity and PairwiseDistance
(kiln/nn/distance.py), and kiln.nn.init's eye_ and dirac_ (kiln/nn/init.py): values against NumPy
in float32 and float64, gradients (gradcheck in float64), reprs, kiln.jit, argument errors, then
comparisons with PyTorch through the ``torch`` fixture."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from conftest import TOLERANCES, check_cell_against_torch, check_torch, close, raises, t
from kiln import nn

mint = kiln.mint
DTYPES = [kiln.float32, kiln.float64]


def values(rng, dtype, shape=(4, 6)):
    """Random values in [-2, 2] with the shrink thresholds, 0 and NaN among them, in ``dtype``."""
    v = rng.uniform(-2.0, 2.0, shape)
    v.flat[:7] = [0.0, 0.5, -0.5, 0.25, -0.25, np.nan, 1.0]
    return np.asarray(v, dtype.name)


def hardshrink_np(x, lambd=0.5):
    return np.where((x >= -lambd) & (x <= lambd), 0.0, x)


def softshrink_np(x, lambd=0.5):
    return np.where(x > lambd, x - lambd, np.where(x < -lambd, x + lambd,
                                                   np.where(np.isnan(x), x, 0.0)))


def leaky_np(x, slope):
    return np.where(x > 0, x, x * slope)


# ------------------------------------------------------------------------------------------------
# hardshrink, softshrink, rrelu


@pytest.mark.parametrize("lambd", [0.5, 0.25, 0.0])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("name", ["hardshrink", "softshrink"])
def test_shrink_matches_numpy_with_its_gradient(name, dtype, lambd, rng):
    v = values(rng, dtype)
    x = t(v).requires_grad_()
    out = getattr(F, name)(x, lambd)
    assert out.dtype == dtype
    reference = hardshrink_np if name == "hardshrink" else softshrink_np
    close(out, reference(v.astype(np.float64), lambd), *TOLERANCES[dtype])
    (grad,) = kiln.autograd.grad(mint.sum(out), [x])
    # 0 inside [-lambd, lambd] (its ends too), 1 outside and at NaN, as PyTorch's.
    inside = (v >= -lambd) & (v <= lambd)
    np.testing.assert_array_equal(grad.numpy(), np.where(inside, 0.0, 1.0))


def test_hardshrink_with_a_negative_lambd_is_the_identity(rng):
    v = rng.standard_normal(8)
    np.testing.assert_array_equal(F.hardshrink(t(v), -0.5).numpy(), v)


@pytest.mark.parametrize("name", ["hardshrink", "softshrink", "rrelu"])
def test_activation_gradients_pass_gradcheck(name, rng):
    v = rng.uniform(-2.0, 2.0, (3, 4))
    v[np.abs(np.abs(v) - 0.5) < 1e-3] += 0.01  # away from the shrink kinks
    v[np.abs(v) < 1e-3] += 0.01
    assert kiln.testing.gradcheck(getattr(F, name), (t(v).requires_grad_(),))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_rrelu_outside_training_is_leaky_relu_with_the_mean_slope(dtype, rng):
    v = values(rng, dtype)
    out = F.rrelu(t(v), 0.1, 0.3)
    close(out, leaky_np(v.astype(np.float64), 0.2), *TOLERANCES[dtype])
    cell = nn.RReLU(0.1, 0.3).eval()
    close(cell(t(v)), leaky_np(v.astype(np.float64), 0.2), *TOLERANCES[dtype])


@pytest.mark.parametrize("dtype", DTYPES + [kiln.float16], ids=lambda d: d.name)
def test_rrelu_in_training_draws_a_slope_per_element(dtype, rng):
    v = rng.uniform(-2.0, 2.0, (50, 40))
    x = t(v, dtype).requires_grad_()
    out = F.rrelu(x, 0.1, 0.3, training=True)
    assert out.dtype == dtype
    got, rounded = out.detach().numpy().astype(np.float64), x.detach().numpy().astype(np.float64)
    negative = rounded < 0
    np.testing.assert_array_equal(got[~negative], rounded[~negative])
    slopes = got[negative] / rounded[negative]
    slack = 1e-3 if dtype == kiln.float16 else 1e-6
    assert slopes.min() >= 0.1 - slack and slopes.max() <= 0.3 + slack
    assert abs(slopes.mean() - 0.2) < 0.01 and slopes.std() > 0.05  # U(0.1, 0.3): std 0.058
    if dtype != kiln.float16:
        (grad,) = kiln.autograd.grad(mint.sum(out), [x])
        close(grad, np.where(negative, got / np.where(negative, rounded, 1.0), 1.0), 1e-5, 1e-6)


def test_rrelu_training_repeats_under_manual_seed_and_cell_follows_training(rng):
    x = t(rng.uniform(-2.0, -0.1, (6, 5)))
    kiln.manual_seed(7)
    first = F.rrelu(x, training=True).numpy()
    kiln.manual_seed(7)
    np.testing.assert_array_equal(F.rrelu(x, training=True).numpy(), first)
    cell = nn.RReLU()
    kiln.manual_seed(7)
    np.testing.assert_array_equal(cell(x).numpy(), first)  # a new cell is training
    close(cell.eval()(x), x.numpy() * (1 / 8 + 1 / 3) / 2, 1e-12, 1e-12)


def test_rrelu_training_traces_under_jit(rng):
    x = t(rng.uniform(-2.0, 2.0, (5, 4)))
    step = kiln.jit(lambda v: F.rrelu(v, 0.2, 0.4, training=True))
    for _ in range(2):
        got = step(x).numpy()
        negative = x.numpy() < 0
        ratios = got[negative] / x.numpy()[negative]
        assert ratios.min() >= 0.2 - 1e-12 and ratios.max() <= 0.4 + 1e-12
        np.testing.assert_array_equal(got[~negative], x.numpy()[~negative])


def test_softmax2d_is_softmax_over_channels(rng):
    for shape in ((2, 3, 4, 5), (3, 4, 5)):
        v = rng.standard_normal(shape)
        e = np.exp(v - v.max(-3, keepdims=True))
        close(nn.Softmax2d()(t(v)), e / e.sum(-3, keepdims=True), 1e-12, 1e-12)


# ------------------------------------------------------------------------------------------------
# In-place spellings

INPLACE = [
    ("relu_", (), lambda v: np.maximum(v, 0.0)),
    ("leaky_relu_", (0.2,), lambda v: leaky_np(v, 0.2)),
    ("elu_", (0.5,), lambda v: np.where(v > 0, v, 0.5 * np.expm1(v))),
    ("hardtanh_", (-0.5, 0.75), lambda v: np.clip(v, -0.5, 0.75)),
    ("selu_", (), lambda v: 1.0507009873554805 * np.where(
        v > 0, v, 1.6732632423543772 * np.expm1(v))),
    ("celu_", (2.0,), lambda v: np.where(v > 0, v, 2.0 * np.expm1(v / 2.0))),
    ("threshold_", (0.1, -7.0), lambda v: np.where(v <= 0.1, -7.0, v)),
    ("rrelu_", (0.1, 0.3), lambda v: leaky_np(v, 0.2)),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("name, args, reference", INPLACE, ids=[c[0] for c in INPLACE])
def test_inplace_spelling_writes_into_its_input(name, args, reference, dtype, rng):
    v = np.asarray(rng.uniform(-2.0, 2.0, (3, 5)), dtype.name)
    x = t(v)
    assert getattr(F, name)(x, *args) is x
    close(x, reference(v.astype(np.float64)), *TOLERANCES[dtype])


@pytest.mark.parametrize("name, args, reference", INPLACE, ids=[c[0] for c in INPLACE])
def test_inplace_spelling_records_the_write_for_autograd(name, args, reference, rng):
    leaf = t(rng.uniform(-2.0, 2.0, (3, 4))).requires_grad_()
    with raises(kiln.KilnValueError, match="inplace=True writes into input, a leaf tensor "
                                           "that requires grad"):
        getattr(F, name)(leaf, *args)
    x = leaf * 1.0
    out = getattr(F, name)(x, *args)
    assert out is x
    base = name[:-1]
    (grad,) = kiln.autograd.grad(mint.sum(out), [leaf])
    (expected,) = kiln.autograd.grad(mint.sum(getattr(F, base)(leaf * 1.0, *args)), [leaf])
    close(grad, expected.numpy(), 1e-12, 1e-12)


# ------------------------------------------------------------------------------------------------
# Activation cells


def test_activation_cells_apply_their_functions_with_pytorchs_reprs(rng):
    v = rng.standard_normal((3, 4))
    cases = [(nn.Hardshrink(0.3), F.hardshrink(t(v), 0.3), "Hardshrink(0.3)"),
             (nn.Softshrink(), F.softshrink(t(v)), "Softshrink(0.5)"),
             (nn.RReLU(0.1, 0.2).eval(), F.rrelu(t(v), 0.1, 0.2), "RReLU(lower=0.1, upper=0.2)"),
             (nn.Softmax2d(), None, "Softmax2d()")]
    for cell, expected, shown in cases:
        assert repr(cell) == shown
        if expected is not None:
            np.testing.assert_array_equal(cell(t(v)).numpy(), expected.numpy())
    assert repr(nn.RReLU(inplace=True)) == f"RReLU(lower=0.125, upper={1 / 3}, inplace=True)"
    assert nn.activation.activation_cell("hardshrink").lambd == 0.5
    assert isinstance(nn.activation.activation_cell("softmax2d"), nn.Softmax2d)


def test_rrelu_cell_inplace_writes_into_its_input_in_eval_mode(rng):
    x = t(rng.standard_normal((3, 4)))
    before = x.numpy().copy()
    assert nn.RReLU(0.1, 0.3, True).eval()(x) is x
    close(x, leaky_np(before, 0.2), 1e-7, 1e-7)


# ------------------------------------------------------------------------------------------------
# CosineSimilarity, PairwiseDistance


def cosine_np(a, b, dim=1, eps=1e-8):
    na = np.maximum(np.linalg.norm(a, axis=dim, keepdims=True), eps)
    nb = np.maximum(np.linalg.norm(b, axis=dim, keepdims=True), eps)
    return np.sum(a / na * (b / nb), axis=dim)


def pairwise_np(a, b, p=2.0, eps=1e-6, keepdim=False):
    diff = np.abs(a - b + eps)
    out = diff.max(-1) if p == np.inf else np.sum(diff ** p, -1) ** (1 / p)
    return out[..., None] if keepdim else out


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("dim, shapes", [(1, ((4, 5), (4, 5))), (-1, ((3, 4, 5), (1, 5))),
                                         (0, ((5, 3), (5, 1)))], ids=["rows", "bcast", "dim0"])
def test_cosine_similarity_cell_matches_numpy(dim, shapes, dtype, rng):
    a, b = (np.asarray(rng.standard_normal(s), dtype.name) for s in shapes)
    out = nn.CosineSimilarity(dim=dim, eps=1e-6)(t(a), t(b))
    assert out.dtype == dtype
    close(out, cosine_np(a.astype(np.float64), b.astype(np.float64), dim, 1e-6),
          *TOLERANCES[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, np.inf], ids=["p2", "p1", "p3", "pinf"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_pairwise_distance_cell_matches_numpy(p, keepdim, dtype, rng):
    a = np.asarray(rng.standard_normal((4, 6)), dtype.name)
    b = np.asarray(rng.standard_normal((1, 6)), dtype.name)
    out = nn.PairwiseDistance(p, 1e-3, keepdim)(t(a), t(b))
    assert out.dtype == dtype
    close(out, pairwise_np(a.astype(np.float64), b.astype(np.float64), p, 1e-3, keepdim),
          *TOLERANCES[dtype])


def test_distance_cells_keep_pytorchs_attributes_and_reprs(rng):
    cos, dist = nn.CosineSimilarity(0, 1e-4), nn.PairwiseDistance(1.0, 1e-3, True)
    assert (cos.dim, cos.eps) == (0, 1e-4)
    assert (dist.norm, dist.eps, dist.keepdim) == (1.0, 1e-3, True)
    assert repr(cos) == "CosineSimilarity()" and repr(dist) == "PairwiseDistance()"


@pytest.mark.parametrize("cell", [nn.CosineSimilarity(), nn.PairwiseDistance(p=3.0)],
                         ids=["cosine", "pairwise"])
def test_distance_cell_gradients_pass_gradcheck(cell, rng):
    a, b = (t(rng.standard_normal((3, 4))).requires_grad_() for _ in range(2))
    assert kiln.testing.gradcheck(cell, (a, b))


def test_distance_cells_trace_under_jit(rng):
    a, b = t(rng.standard_normal((3, 4))), t(rng.standard_normal((3, 4)))
    for cell in (nn.CosineSimilarity(), nn.PairwiseDistance()):
        close(kiln.jit(cell)(a, b), cell(a, b).numpy(), 1e-12, 1e-12)


# ------------------------------------------------------------------------------------------------
# init.eye_, init.dirac_


def dirac_np(shape, groups=1):
    out = np.zeros(shape)
    per = shape[0] // groups
    centre = tuple(s // 2 for s in shape[2:])
    for g in range(groups):
        for d in range(min(per, shape[1])):
            out[(g * per + d, d) + centre] = 1
    return out


@pytest.mark.parametrize("dtype", DTYPES + [kiln.int32, kiln.bfloat16], ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(3, 3), (2, 5), (4, 1)])
def test_eye_fills_the_identity(shape, dtype):
    w = mint.full(shape, 7.0, dtype=dtype)
    w = nn.Parameter(w) if dtype.is_floating_point else w  # (integers require no grad)
    assert nn.init.eye_(w) is w
    assert w.dtype == dtype and w.requires_grad == dtype.is_floating_point
    np.testing.assert_array_equal(w.detach().to(kiln.float64).numpy(), np.eye(*shape))


@pytest.mark.parametrize("shape, groups", [((4, 4, 3), 1), ((6, 4, 3, 3), 2), ((3, 5, 2, 4), 1),
                                           ((4, 2, 3, 3, 3), 2), ((8, 2, 5), 4)],
                         ids=["1d", "2d-groups", "2d-even", "3d-groups", "1d-wide-groups"])
@pytest.mark.parametrize("dtype", DTYPES + [kiln.int64], ids=lambda d: d.name)
def test_dirac_fills_the_kernel_centres(shape, groups, dtype):
    w = mint.full(shape, 7.0, dtype=dtype)
    w = nn.Parameter(w) if dtype.is_floating_point else w  # (integers require no grad)
    assert nn.init.dirac_(w, groups) is w
    assert w.dtype == dtype and w.requires_grad == dtype.is_floating_point
    np.testing.assert_array_equal(w.detach().to(kiln.float64).numpy(), dirac_np(shape, groups))


def test_dirac_weight_makes_a_convolution_pass_its_input_through(rng):
    conv = nn.Conv2d(3, 3, 3, padding=1, bias=False, dtype=kiln.float64)
    nn.init.dirac_(conv.weight)
    x = rng.standard_normal((2, 3, 5, 5))
    close(conv(t(x)), x, 1e-12, 1e-12)


def test_dirac_of_an_empty_tensor_returns_it():
    w = mint.zeros(0, 3, 3)
    assert nn.init.dirac_(w) is w and w.shape == (0, 3, 3)


# ------------------------------------------------------------------------------------------------
# Errors


def zeros(*shape):
    return mint.zeros(*shape, dtype=kiln.float64)


ERRORS = [
    (lambda: F.hardshrink(mint.zeros(3, dtype=kiln.int64)), kiln.DTypeError,
     "hardshrink: expected a floating-point input, got int64"),
    (lambda: F.hardshrink(zeros(3), "0.5"), kiln.KilnTypeError,
     "hardshrink: expected lambd to be a real number, got str '0.5'"),
    (lambda: F.softshrink(zeros(3), -0.5), kiln.KilnValueError,
     "softshrink: expected lambd to be finite and >= 0, got -0.5"),
    (lambda: F.softshrink(zeros(3), float("inf")), kiln.KilnValueError,
     "softshrink: expected lambd to be finite and >= 0, got inf"),
    (lambda: F.rrelu(zeros(3), 0.5, 0.2), kiln.KilnValueError,
     "rrelu: expected lower <= upper, got lower=0.5 and upper=0.2"),
    (lambda: F.rrelu(zeros(3), training=1), kiln.KilnTypeError,
     "rrelu: training must be a bool, got int 1"),
    (lambda: F.rrelu([1.0]), kiln.KilnTypeError,
     "rrelu: expected input to be a kiln.Tensor, got list"),
    (lambda: nn.RReLU(0.5, 0.2), kiln.KilnValueError,
     "RReLU: expected lower <= upper, got lower=0.5 and upper=0.2"),
    (lambda: nn.RReLU(inplace=None), kiln.KilnTypeError,
     "RReLU: inplace must be a bool, got NoneType None"),
    (lambda: nn.Hardshrink(None), kiln.KilnTypeError,
     "Hardshrink: expected lambd to be a real number, got NoneType None"),
    (lambda: nn.Softshrink("x"), kiln.KilnTypeError,
     "Softshrink: expected lambd to be a real number, got str 'x'"),
    (lambda: nn.Softshrink(-1.0)(zeros(3)), kiln.KilnValueError,
     "softshrink: expected lambd to be finite and >= 0, got -1.0"),
    (lambda: nn.Softmax2d()(zeros(3, 4)), kiln.ShapeError,
     "Softmax2d: expected input to be 3D or 4D, got 2D instead"),
    (lambda: nn.Softmax2d()(np.zeros((3, 4, 5))), kiln.KilnTypeError,
     "Softmax2d: expected input to be a kiln.Tensor, got ndarray"),
    (lambda: F.relu_(mint.zeros(3, dtype=kiln.float64).requires_grad_()), kiln.KilnValueError,
     "relu: inplace=True writes into input, a leaf tensor that requires grad"),
    (lambda: nn.CosineSimilarity(dim=1.5), kiln.KilnTypeError,
     "CosineSimilarity: dim must be an int, got float 1.5"),
    (lambda: nn.CosineSimilarity(eps="1"), kiln.KilnTypeError,
     "CosineSimilarity: expected eps to be a real number, got str '1'"),
    (lambda: nn.PairwiseDistance(p=None), kiln.KilnTypeError,
     "PairwiseDistance: expected p to be a real number, got NoneType None"),
    (lambda: nn.PairwiseDistance(keepdim=1), kiln.KilnTypeError,
     "PairwiseDistance: keepdim must be a bool, got int 1"),
    (lambda: nn.PairwiseDistance()(zeros(3, 4), zeros(3, 5)), kiln.ShapeError,
     r"pairwise_distance: x1 \[3, 4\] and x2 \[3, 5\] do not broadcast"),
    (lambda: nn.init.eye_(zeros(2, 2, 2)), kiln.ShapeError,
     r"nn.init.eye_: expected a 2-d tensor, got shape \[2, 2, 2\]"),
    (lambda: nn.init.eye_(np.zeros((2, 2))), kiln.KilnTypeError,
     "nn.init.eye_: expected tensor to be a kiln.Tensor, got ndarray"),
    (lambda: nn.init.dirac_(zeros(2, 2)), kiln.ShapeError,
     r"nn.init.dirac_: expected a tensor of 3, 4 or 5 dimensions \(a convolution's weight "
     r"\[out, in, \*kernel\]\), got shape \[2, 2\]"),
    (lambda: nn.init.dirac_(zeros(6, 2, 3), groups=4), kiln.KilnValueError,
     "nn.init.dirac_: expected dim 0 \\(size 6\\) to be divisible by groups=4"),
    (lambda: nn.init.dirac_(zeros(6, 2, 3), groups=0), kiln.KilnValueError,
     "nn.init.dirac_: groups must be at least 1, got 0"),
    (lambda: nn.init.dirac_(zeros(6, 2, 3), groups=2.0), kiln.KilnTypeError,
     "nn.init.dirac_: groups must be an int, got float 2.0"),
]


@pytest.mark.parametrize("call, error, message", ERRORS,
                         ids=[f"{i}-{m.split(':')[0]}" for i, (_, _, m) in enumerate(ERRORS)])
def test_argument_errors(call, error, message):
    with raises(error, match=message):
        call()


def test_shape_errors_are_value_errors_as_pytorch_raises():
    with pytest.raises(ValueError):
        nn.init.eye_(zeros(3))
    with pytest.raises(ValueError):
        nn.Softmax2d()(zeros(3))


# ------------------------------------------------------------------------------------------------
# Against PyTorch


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("name, kwargs", [("hardshrink", {}), ("hardshrink", {"lambd": 0.25}),
                                          ("softshrink", {}), ("softshrink", {"lambd": 1.0}),
                                          ("rrelu", {}), ("rrelu", {"lower": 0.0,
                                                                    "upper": 0.5})])
def test_activation_matches_torch(torch, name, kwargs, dtype, rng):
    # No NaN: PyTorch's shrink gradients at NaN differ between its vectorized and scalar loops.
    v = values(rng, dtype)
    v[np.isnan(v)] = 1.5
    x = t(v).requires_grad_()
    tx = torch.tensor(v).requires_grad_()
    out = getattr(F, name)(x, **kwargs)
    want = getattr(torch.nn.functional, name)(tx, **kwargs)
    check_torch(out, want, dtype, "value")
    upstream = rng.uniform(0.5, 2.0, v.shape)
    (grad,) = kiln.autograd.grad(out, [x], t(upstream, dtype))
    (expected,) = torch.autograd.grad(want, [tx], torch.tensor(upstream).to(want.dtype))
    check_torch(grad, expected, dtype, "gradient")


@pytest.mark.parametrize("name, args", [(c[0], c[1]) for c in INPLACE], ids=[c[0] for c in INPLACE])
def test_inplace_spelling_matches_torch(torch, name, args, rng):
    v = rng.uniform(-2.0, 2.0, (3, 5))
    x, tx = t(v), torch.tensor(v)
    getattr(F, name)(x, *args)
    getattr(torch.nn.functional, name)(tx, *args)
    check_torch(x, tx, kiln.float64, name)


@pytest.mark.parametrize("ours, theirs", [
    (lambda: nn.Hardshrink(0.3), lambda tn: tn.Hardshrink(0.3)),
    (lambda: nn.Softshrink(0.3), lambda tn: tn.Softshrink(0.3)),
    (lambda: nn.RReLU(0.1, 0.4).eval(), lambda tn: tn.RReLU(0.1, 0.4).eval()),
    (lambda: nn.Softmax2d(), lambda tn: tn.Softmax2d()),
], ids=["Hardshrink", "Softshrink", "RReLU", "Softmax2d"])
def test_activation_cell_matches_torch(torch, ours, theirs, rng):
    cell, twin = ours(), theirs(torch.nn)
    assert repr(cell) == repr(twin)
    check_cell_against_torch(torch, cell, twin, rng.standard_normal((2, 3, 4, 5)), rng)


@pytest.mark.parametrize("name, args, second", [
    ("CosineSimilarity", (), (4, 5)),
    ("CosineSimilarity", (0, 1e-4), (4, 5)),
    ("PairwiseDistance", (), (1, 5)),
    ("PairwiseDistance", (1.0, 1e-3, True), (1, 5)),
    ("PairwiseDistance", (np.inf,), (1, 5)),
], ids=["cosine", "cosine dim0", "pairwise", "pairwise p1", "pairwise inf"])
def test_distance_cells_match_torch(torch, name, args, second, rng):
    a, b = rng.standard_normal((4, 5)), rng.standard_normal(second)
    x1, x2 = t(a).requires_grad_(), t(b).requires_grad_()
    t1, t2 = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    cell, twin = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(cell) == repr(twin)
    out, want = cell(x1, x2), twin(t1, t2)
    check_torch(out, want, kiln.float64, "value")
    for got, expected in zip(kiln.autograd.grad(mint.sum(out), [x1, x2]),
                             torch.autograd.grad(want.sum(), [t1, t2])):
        check_torch(got, expected, kiln.float64, "gradient")


@pytest.mark.parametrize("shape, groups", [((4, 4, 3), 1), ((6, 4, 3, 3), 2), ((4, 2, 3, 3, 3), 2)])
def test_dirac_and_eye_match_torch(torch, shape, groups):
    w, tw = mint.zeros(*shape), torch.empty(shape)
    nn.init.dirac_(w, groups)
    torch.nn.init.dirac_(tw, groups)
    np.testing.assert_array_equal(w.numpy(), tw.numpy())
    e, te = mint.zeros(shape[0], shape[1]), torch.empty(shape[0], shape[1])
    nn.init.eye_(e)
    torch.nn.init.eye_(te)
    np.testing.assert_array_equal(e.numpy(), te.numpy())
