"""Gradient clipping (kiln.nn.utils: clip_grad_norm_, clip_grad_value_ and their function forms
for kiln.jit steps) and the norms it is built on (kiln.mint's vector_norm and norm, in
kiln/mint/_norms.py), against torch.nn.utils and torch.linalg.vector_norm / torch.norm: values,
gradients (PyTorch's at a norm of 0 and at zero elements), dtypes, jitted training steps and
the error paths."""

import math

import numpy as np
import pytest

import kiln
from conftest import raises
from kiln import nn, optim
from kiln.mint._norms import norm, vector_norm
from kiln.nn.utils import clip_grad_norm, clip_grad_norm_, clip_grad_value, clip_grad_value_

# The references are PyTorch's (not installed where only the test dependencies are).
torch = pytest.importorskip("torch")

mint = kiln.mint
ORDERS = [2, 1, math.inf, -math.inf, 0, 0.5, 3, 1.5, -1, -0.5]
TORCH_DTYPES = {kiln.float32: torch.float32, kiln.float64: torch.float64,
                kiln.float16: torch.float16, kiln.bfloat16: torch.bfloat16}


def norm_data():
    """A [3, 4, 2] array with a zero element and a slice of zeros (a norm of 0 there), so that
    the gradients at 0 are checked; float64."""
    rng = np.random.default_rng(0)
    data = rng.standard_normal((3, 4, 2))
    data[0, 1, 0] = 0.0
    data[2, :, 1] = 0.0
    return data


def both_norms(kiln_fn, torch_fn, data, upstream_seed=1):
    """(kiln value, torch value, kiln gradient, torch gradient) of the norm of ``data`` (float64),
    the gradient of the sum of the norm times random weights; torch's None gradient is zeros."""
    x = kiln.tensor(data).requires_grad_()
    tx = torch.tensor(data, requires_grad=True)
    value, tvalue = kiln_fn(x), torch_fn(tx)
    weights = np.random.default_rng(upstream_seed).uniform(0.5, 1.5, tuple(tvalue.shape))
    mint.sum(value * kiln.tensor(weights)).backward()
    (tvalue * torch.tensor(weights)).sum().backward()
    tgrad = tx.grad.numpy() if tx.grad is not None else np.zeros_like(data)
    return value.detach().numpy(), tvalue.detach().numpy(), x.grad.numpy(), tgrad


# ---------------------------------------------------------------------------------------------
# kiln.mint.vector_norm / norm


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [None, 0, -1, (0, 2), [1], ()])
@pytest.mark.parametrize("order", ORDERS)
def test_vector_norm_values_and_gradients_match_torch(order, dim, keepdim):
    value, tvalue, grad, tgrad = both_norms(
        lambda x: vector_norm(x, order, dim, keepdim),
        lambda x: torch.linalg.vector_norm(x, order, dim, keepdim), norm_data())
    assert value.shape == tvalue.shape
    np.testing.assert_allclose(value, tvalue, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(grad, tgrad, rtol=1e-10, atol=1e-15)
    assert not np.isnan(grad).any()


@pytest.mark.parametrize("order", ORDERS)
def test_gradient_at_a_norm_of_zero_is_torchs(order):
    # The chain rule gives NaN (inf * 0) at 0 for most orders; PyTorch's gradient is 0 there.
    value, tvalue, grad, tgrad = both_norms(lambda x: vector_norm(x, order),
                                            lambda x: torch.linalg.vector_norm(x, order),
                                            np.zeros(4))
    np.testing.assert_array_equal(value, tvalue)
    np.testing.assert_array_equal(grad, tgrad)
    np.testing.assert_array_equal(grad, np.zeros(4))


@pytest.mark.parametrize("order, data", [
    (math.inf, [3.0, -3.0, 1.0, 3.0]),
    (-math.inf, [1.0, -1.0, 2.0, -4.0]),
])
def test_inf_norm_gradient_is_shared_among_ties(order, data):
    value, tvalue, grad, tgrad = both_norms(lambda x: vector_norm(x, order),
                                            lambda x: torch.linalg.vector_norm(x, order),
                                            np.array(data))
    np.testing.assert_array_equal(value, tvalue)
    np.testing.assert_allclose(grad, tgrad, rtol=1e-15)
    assert np.count_nonzero(grad) == (3 if order > 0 else 2)


@pytest.mark.parametrize("p, dim, keepdim", [
    ("fro", None, False), ("fro", (0, 1), True), ("fro", 2, False), (None, None, False),
    (2, (1, 2), False), (1, None, False), (math.inf, 1, True), (3, -1, False), (0, None, False),
    (-math.inf, (0, 1, 2), False),
])
def test_norm_matches_torch_norm(p, dim, keepdim):
    value, tvalue, grad, tgrad = both_norms(lambda x: norm(x, p, dim, keepdim),
                                            lambda x: torch.norm(x, p, dim, keepdim), norm_data())
    np.testing.assert_allclose(value, tvalue, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(grad, tgrad, rtol=1e-10, atol=1e-15)


def test_norm_defaults_and_dtype():
    data = norm_data().astype(np.float32)
    x, tx = kiln.tensor(data), torch.tensor(data)
    np.testing.assert_allclose(norm(x).numpy(), torch.norm(tx).numpy(), rtol=1e-6)
    np.testing.assert_allclose(vector_norm(x).numpy(), torch.linalg.vector_norm(tx).numpy(),
                               rtol=1e-6)
    # dtype: computed and returned in float64
    result = norm(x, 2, dtype=kiln.float64)
    assert result.dtype == kiln.float64
    np.testing.assert_allclose(result.numpy(),
                               torch.norm(tx, 2, dtype=torch.float64).numpy(), rtol=1e-12)
    assert vector_norm(x, 1, dim=0, dtype=kiln.float64).dtype == kiln.float64


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16, kiln.float32])
@pytest.mark.parametrize("order", [2, 1, math.inf, 3])
def test_low_precision_norms_are_accumulated_in_float32(dtype, order):
    # 300 ** 2 overflows float16 (65504): PyTorch accumulates in float32 and rounds once.
    data = np.array([[300.0, -300.0, 0.5], [2.0, 1.0, 0.25]], np.float32)
    value = vector_norm(kiln.tensor(data, dtype=dtype), order, dim=-1)
    expected = torch.linalg.vector_norm(torch.tensor(data, dtype=TORCH_DTYPES[dtype]), order,
                                        dim=-1)
    assert value.dtype == dtype
    np.testing.assert_allclose(value.to(kiln.float32).numpy(), expected.float().numpy(),
                               rtol=1e-6)


def test_norm_of_a_0d_tensor_and_of_no_elements():
    scalar, tscalar = kiln.tensor(-3.0), torch.tensor(-3.0)
    for dim in (None, 0, -1, ()):
        np.testing.assert_array_equal(vector_norm(scalar, 2, dim).numpy(),
                                      torch.linalg.vector_norm(tscalar, 2, dim).numpy())
    empty, tempty = mint.zeros((2, 0)), torch.zeros(2, 0)
    for order in (2, 1, 0, 0.5):
        np.testing.assert_array_equal(vector_norm(empty, order).numpy(),
                                      torch.linalg.vector_norm(tempty, order).numpy())
    # inf, -inf and negative orders have no identity: PyTorch refuses them over an empty dim,
    # and reduces the others (to no elements here).
    assert vector_norm(empty, math.inf, dim=0).shape == (0,)
    assert torch.linalg.vector_norm(tempty, math.inf, dim=0).shape == (0,)
    for order in (math.inf, -math.inf, -1):
        with raises(kiln.KilnValueError, match=f"vector_norm: cannot compute the {order:g} norm "
                                               f"over an empty dimension"):
            vector_norm(empty, order, dim=(0, 1))
        with pytest.raises(RuntimeError, match="on an empty tensor"):
            torch.linalg.vector_norm(tempty, order)


@pytest.mark.parametrize("order", [2, 1, math.inf, 0.5, -1])
def test_norm_gradient_in_a_jitted_function(order):
    data = norm_data()
    grad_fn = kiln.grad(lambda x: mint.sum(vector_norm(x, order, dim=1)))
    jitted = kiln.jit(grad_fn)
    for scale in (1.0, 2.0):
        x = kiln.tensor(data * scale)
        tx = torch.tensor(data * scale, requires_grad=True)
        torch.linalg.vector_norm(tx, order, dim=1).sum().backward()
        np.testing.assert_allclose(jitted(x).numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-15)
        np.testing.assert_allclose(grad_fn(x).numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-15)
    assert jitted.cache_info().misses == 1


# (kiln call, torch call or None where PyTorch computes it) -> the Kiln error and its message
NORM_ERRORS = [
    (lambda: vector_norm(kiln.tensor([1, 2])), lambda: torch.linalg.vector_norm(torch.tensor(
        [1, 2])), kiln.DTypeError, "vector_norm: expected a floating-point tensor, got int64"),
    (lambda: vector_norm(kiln.tensor([1.0], dtype=kiln.float64), dtype=kiln.float32),
     lambda: torch.linalg.vector_norm(torch.tensor([1.0], dtype=torch.float64),
                                      dtype=torch.float32),
     kiln.DTypeError, "vector_norm: dtype must be a floating-point dtype that float64 converts "
                      "to without loss, got kiln.float32"),
    (lambda: vector_norm(mint.ones((2, 3)), dim=2),
     lambda: torch.linalg.vector_norm(torch.ones(2, 3), dim=2), kiln.KilnIndexError,
     r"vector_norm: dim out of range: expected a value in \[-2, 1\] for a 2-d tensor, got 2"),
    (lambda: vector_norm(mint.ones((2, 3)), dim=(0, -2)),
     lambda: torch.linalg.vector_norm(torch.ones(2, 3), dim=(0, -2)), kiln.KilnValueError,
     r"vector_norm: dim 0 appears more than once in dim \(0, -2\)"),
    (lambda: vector_norm(mint.ones(2), dim=1.0),
     lambda: torch.linalg.vector_norm(torch.ones(2), dim=1.0), kiln.KilnTypeError,
     "vector_norm: expected dim to be None, an int or a list / tuple of ints, got float 1.0"),
    (lambda: vector_norm(mint.ones(2), "fro"),
     lambda: torch.linalg.vector_norm(torch.ones(2), "fro"), kiln.KilnTypeError,
     "vector_norm: ord must be a real number"),
    (lambda: vector_norm(mint.ones(2), float("nan")), None, kiln.KilnValueError,
     "vector_norm: ord must be a number, got nan"),
    (lambda: vector_norm(mint.ones(2), keepdim="yes"), None, kiln.KilnTypeError,
     "vector_norm: keepdim must be True or False, got 'yes'"),
    (lambda: vector_norm([1.0, 2.0]), lambda: torch.linalg.vector_norm([1.0, 2.0]),
     kiln.KilnTypeError, "vector_norm: expected a kiln tensor, got list"),
    (lambda: norm(mint.ones((2, 2, 2)), "nuc"), lambda: torch.norm(torch.ones(2, 2, 2), "nuc"),
     kiln.KilnValueError, r"linalg.matrix_norm: dim must be a pair of dims, got \[0, 1, 2\]"),
    (lambda: norm(mint.ones((2, 2)), "foo"), lambda: torch.norm(torch.ones(2, 2), "foo"),
     kiln.KilnValueError, "norm: p must be a number, 'fro' or None, got 'foo'"),
    (lambda: norm(mint.ones((2, 2, 2)), "fro", dim=(0, 1, 2)),
     lambda: torch.norm(torch.ones(2, 2, 2), "fro", dim=(0, 1, 2)), kiln.KilnValueError,
     r"norm: p='fro' is the norm of vectors or matrices, over at most 2 dims, got "
     r"dim=\(0, 1, 2\)"),
    (lambda: norm(mint.ones(2), True), None, kiln.KilnTypeError,
     "norm: p must be a real number"),
]


@pytest.mark.parametrize("call, torch_call, error, message", NORM_ERRORS,
                         ids=[f"{i}-{e[3][:30]}" for i, e in enumerate(NORM_ERRORS)])
def test_norm_errors(call, torch_call, error, message):
    with raises(error, match=message):
        call()
    if torch_call is not None:
        with pytest.raises((RuntimeError, TypeError, IndexError, NotImplementedError)):
            torch_call()


# ---------------------------------------------------------------------------------------------
# clip_grad_norm_ / clip_grad_value_ (in place on .grad)


def make_params(dtypes=(kiln.float64, kiln.float64, kiln.float64), seed=0, scale=3.0):
    """Kiln and torch parameters with equal .grad values; the last one's grad is None."""
    rng = np.random.default_rng(seed)
    shapes = [(3, 4), (5,), (2, 2)]
    values = [rng.standard_normal(s) for s in shapes]
    grads = [scale * rng.standard_normal(s) for s in shapes]
    kp, tp = [], []
    for i, (v, g, dtype) in enumerate(zip(values, grads, dtypes)):
        p = nn.Parameter(kiln.tensor(v, dtype=dtype))
        t = torch.tensor(v, dtype=TORCH_DTYPES[dtype], requires_grad=True)
        if i < len(shapes) - 1:
            p.grad = kiln.tensor(g, dtype=dtype)
            t.grad = torch.tensor(g, dtype=TORCH_DTYPES[dtype])
        kp.append(p)
        tp.append(t)
    return kp, tp


def assert_grads(kp, tp, rtol=1e-13):
    for p, t in zip(kp, tp):
        if t.grad is None:
            assert p.grad is None
        else:
            np.testing.assert_allclose(p.grad.to(kiln.float64).numpy(), t.grad.double().numpy(),
                                       rtol=rtol, atol=rtol * 1e-3)


@pytest.mark.parametrize("max_norm", [0.5, 1e3, 0.0])
@pytest.mark.parametrize("norm_type", [2.0, 1, math.inf, -math.inf, 0, 0.5, 3])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    kp, tp = make_params()
    held = kp[0].grad  # scaled in place: the same tensor
    total = clip_grad_norm_(kp, max_norm, norm_type)
    ttotal = torch.nn.utils.clip_grad_norm_(tp, max_norm, norm_type)
    assert total.shape == () and total.dtype == kiln.float64 and not total.requires_grad
    np.testing.assert_allclose(total.numpy(), ttotal.numpy(), rtol=1e-13)
    assert_grads(kp, tp)
    np.testing.assert_array_equal(held.numpy(), kp[0].grad.numpy())


@pytest.mark.parametrize("dtypes, rtol", [
    ((kiln.float32,) * 3, 1e-6),
    ((kiln.float32, kiln.float64, kiln.float64), 1e-6),  # mixed: a float64 total, as PyTorch's
    ((kiln.float16,) * 3, 2e-3),
    ((kiln.bfloat16,) * 3, 1.6e-2),
])
def test_clip_grad_norm_dtypes(dtypes, rtol):
    kp, tp = make_params(dtypes)
    total = clip_grad_norm_(kp, 1.0)
    ttotal = torch.nn.utils.clip_grad_norm_(tp, 1.0)
    assert total.dtype == kiln.promote_types(dtypes[0], dtypes[1])
    np.testing.assert_allclose(total.to(kiln.float64).numpy(), ttotal.double().numpy(),
                               rtol=rtol)
    assert [p.grad.dtype for p in kp[:2]] == list(dtypes[:2])
    assert_grads(kp, tp, rtol=rtol)


def test_clip_grad_norm_parameter_forms_and_foreach():
    kp, tp = make_params()
    # one tensor
    total = clip_grad_norm_(kp[0], 1.0)
    np.testing.assert_allclose(total.numpy(), torch.nn.utils.clip_grad_norm_(tp[0], 1.0).numpy(),
                               rtol=1e-13)
    # a generator, foreach given: the same result
    kp, tp = make_params(seed=1)
    for flag in (True, False):
        clip_grad_norm_((p for p in kp), 2.0, foreach=flag)
        torch.nn.utils.clip_grad_norm_((p for p in tp), 2.0)
        assert_grads(kp, tp)
    # no gradient at all: a float32 0, as PyTorch's
    cell = nn.Linear(2, 2)
    assert all(p.grad is None for p in cell.parameters())
    total = clip_grad_norm_(cell.parameters(), 1.0)
    assert total.dtype == kiln.float32 and total.item() == 0.0
    assert torch.nn.utils.clip_grad_norm_([], 1.0).item() == 0.0


def test_clip_grad_norm_after_backward_then_a_step():
    # The PyTorch loop: backward, clip, step.
    rng = np.random.default_rng(2)
    w0, x, y = rng.standard_normal((1, 4)), rng.standard_normal((8, 4)), rng.standard_normal(8)
    w = nn.Parameter(kiln.tensor(w0))
    tw = torch.tensor(w0, requires_grad=True)
    opt, topt = optim.SGD([w], lr=0.1), torch.optim.SGD([tw], lr=0.1)
    for _ in range(3):
        loss = mint.sum(mint.square(mint.matmul(kiln.tensor(x), w.T)[:, 0] - kiln.tensor(y)))
        tloss = ((torch.tensor(x) @ tw.T)[:, 0] - torch.tensor(y)).square().sum()
        opt.zero_grad()
        topt.zero_grad()
        loss.backward()
        tloss.backward()
        total = clip_grad_norm_([w], 0.5)
        np.testing.assert_allclose(total.numpy(),
                                   torch.nn.utils.clip_grad_norm_([tw], 0.5).numpy(), rtol=1e-12)
        opt.step()
        topt.step()
    np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), rtol=1e-12)


def test_clip_grad_norm_of_non_finite_gradients():
    kp, tp = make_params()
    kp[0].grad[0, 0] = math.inf
    tp[0].grad[0, 0] = math.inf
    before = [p.grad.numpy().copy() for p in kp[:2]]
    # refused before any gradient changes
    with raises(kiln.KilnValueError, match=r"clip_grad_norm_: the total norm of order 2.0 of the "
                                           r"gradients is non-finite \(inf\)"):
        clip_grad_norm_(kp, 1.0, error_if_nonfinite=True)
    with pytest.raises(RuntimeError, match="is non-finite"):
        torch.nn.utils.clip_grad_norm_(tp, 1.0, error_if_nonfinite=True)
    for p, b in zip(kp, before):
        np.testing.assert_array_equal(p.grad.numpy(), b)
    # scaled by it anyway, as PyTorch: the infinite element becomes NaN, the others 0
    total = clip_grad_norm_(kp, 1.0)
    ttotal = torch.nn.utils.clip_grad_norm_(tp, 1.0)
    assert total.item() == ttotal.item() == math.inf
    for p, t in zip(kp[:2], tp[:2]):
        np.testing.assert_array_equal(p.grad.numpy(), t.grad.numpy())


@pytest.mark.parametrize("clip_value", [0.5, 2, 0.0, 1e9])
def test_clip_grad_value_matches_torch(clip_value):
    kp, tp = make_params()
    held = kp[1].grad
    assert clip_grad_value_(kp, clip_value) is None
    torch.nn.utils.clip_grad_value_(tp, clip_value)
    assert_grads(kp, tp)
    np.testing.assert_array_equal(held.numpy(), kp[1].grad.numpy())
    kp, tp = make_params(seed=3)
    clip_grad_value_(kp[0], clip_value, foreach=True)
    torch.nn.utils.clip_grad_value_(tp[0], clip_value)
    assert_grads(kp, tp)


# ---------------------------------------------------------------------------------------------
# Function forms: gradients as values, in kiln.jit steps


def test_clip_grad_norm_function_form_matches_the_in_place_one():
    kp, tp = make_params()
    grads = [p.grad for p in kp]  # the last is None
    copies = [None if g is None else g.numpy().copy() for g in grads]
    clipped, total = clip_grad_norm(grads, 0.5, norm_type=3)
    ttotal = torch.nn.utils.clip_grad_norm_(tp, 0.5, norm_type=3)
    assert isinstance(clipped, tuple) and clipped[2] is None
    np.testing.assert_allclose(total.numpy(), ttotal.numpy(), rtol=1e-13)
    for c, t in zip(clipped[:2], tp[:2]):
        np.testing.assert_allclose(c.numpy(), t.grad.numpy(), rtol=1e-13)
    for g, c in zip(grads[:2], copies[:2]):  # the inputs are left as they are
        np.testing.assert_array_equal(g.numpy(), c)
    one, one_total = clip_grad_norm(grads[0], 0.5)
    assert isinstance(one, kiln.Tensor)
    np.testing.assert_allclose(one_total.numpy(), np.linalg.norm(copies[0]), rtol=1e-13)
    values = clip_grad_value(grads, 0.5)
    torch.nn.utils.clip_grad_value_(tp, 0.5)
    assert values[2] is None
    np.testing.assert_array_equal(values[1].numpy(), np.clip(copies[1], -0.5, 0.5))
    assert isinstance(clip_grad_value(grads[0], 0.5), kiln.Tensor)
    # 16-bit gradients stay 16-bit
    half = kiln.tensor(copies[0], dtype=kiln.float16)
    assert clip_grad_norm([half], 0.5)[0][0].dtype == kiln.float16


@pytest.mark.parametrize("clip", ["norm", "value"])
def test_clipping_in_a_jitted_training_step_matches_torch(clip):
    rng = np.random.default_rng(4)
    w0, b0 = rng.standard_normal((1, 6)), rng.standard_normal(1)
    batches = [(rng.standard_normal((16, 6)), 3 * rng.standard_normal((16, 1)))
               for _ in range(6)]
    w, b = nn.Parameter(kiln.tensor(w0)), nn.Parameter(kiln.tensor(b0))
    opt = optim.SGD([w, b], lr=0.1, momentum=0.9)

    def loss_fn(x, y):
        return mint.mean(mint.square(mint.linear(x, w, b) - y))

    @kiln.jit
    def train_step(x, y):
        loss, grads = kiln.value_and_grad(loss_fn, None, opt.parameters)(x, y)
        if clip == "norm":
            grads, total = clip_grad_norm(grads, max_norm=0.5)
        else:
            grads, total = clip_grad_value(grads, 0.2), loss
        opt(grads)
        return loss, total

    tw, tb = torch.tensor(w0, requires_grad=True), torch.tensor(b0, requires_grad=True)
    topt = torch.optim.SGD([tw, tb], lr=0.1, momentum=0.9)
    for x, y in batches:
        loss, total = train_step(kiln.tensor(x), kiln.tensor(y))
        tloss = torch.nn.functional.mse_loss(torch.nn.functional.linear(torch.tensor(x), tw, tb),
                                             torch.tensor(y))
        topt.zero_grad()
        tloss.backward()
        if clip == "norm":
            ttotal = torch.nn.utils.clip_grad_norm_([tw, tb], max_norm=0.5)
            np.testing.assert_allclose(total.numpy(), ttotal.numpy(), rtol=1e-12)
            assert ttotal.item() > 0.5  # the clipping did scale
        else:
            assert tw.grad.abs().max().item() > 0.2  # the clipping did clamp
            torch.nn.utils.clip_grad_value_([tw, tb], 0.2)
        topt.step()
        np.testing.assert_allclose(loss.numpy(), tloss.detach().numpy(), rtol=1e-12)
    assert train_step.cache_info().misses == 1
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-11)
    np.testing.assert_allclose(b.numpy(), tb.detach().numpy(), rtol=1e-11)


def test_clip_grad_norm_in_place_in_a_jitted_function():
    # clip_grad_norm_ branches on nothing it computes, so a jitted function can run it on .grad
    # tensors made outside (the graph writes into them at each call).
    kp, tp = make_params()
    step = kiln.jit(lambda: clip_grad_norm_(kp, 1.0))
    for _ in range(2):
        total = step()
        ttotal = torch.nn.utils.clip_grad_norm_(tp, 1.0)
        np.testing.assert_allclose(total.numpy(), ttotal.numpy(), rtol=1e-13)
        assert_grads(kp, tp)
    assert step.cache_info().misses == 1
