"""kiln.mint.cross_entropy, nll_loss and mse_loss against NumPy references (written here,
following PyTorch's definitions): reductions, ignore_index, label smoothing, class probabilities,
dtypes, gradients, and every error path."""

import warnings

import numpy as np
import pytest

import kiln
from conftest import FLOAT_DTYPES, TOLERANCES, raises, random_array

mint = kiln.mint


def t(array, dtype=None):
    return kiln.tensor(array, dtype=dtype)


def f64(array):
    return np.asarray(array, dtype=np.float64)


def log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def class_loss_reference(x, target, reduction, ignore_index, smoothing, take_log_softmax):
    axis = 0 if x.ndim == 1 else 1
    classes = x.shape[axis]
    lp = log_softmax(f64(x), axis) if take_log_softmax else f64(x)
    mask = target != ignore_index
    safe = np.where(mask, target, 0)
    picked = np.take_along_axis(lp, np.expand_dims(safe, axis), axis).squeeze(axis)
    loss = (1 - smoothing) * -picked + smoothing / classes * -lp.sum(axis=axis)
    loss = np.where(mask, loss, 0.0)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / mask.sum()


CLASS_SHAPES = [((6, 5), (6,)), ((3, 4, 5), (3, 5)), ((2, 3, 4, 2), (2, 4, 2)), ((5,), ())]


@pytest.mark.parametrize("x_shape, target_shape", CLASS_SHAPES, ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy(x_shape, target_shape, reduction, smoothing, rng):
    classes = x_shape[0 if len(x_shape) == 1 else 1]
    x = random_array(x_shape, kiln.float32, rng)
    target = rng.integers(0, classes, size=target_shape)
    if target.size > 1:
        target.flat[1] = -100  # ignored
    out = mint.cross_entropy(t(x), t(target), reduction=reduction, label_smoothing=smoothing)
    expected = class_loss_reference(x, target, reduction, -100, smoothing, True)
    assert out.dtype == kiln.float32 and out.shape == np.shape(expected)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [kiln.float64, kiln.float16, kiln.bfloat16],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("target_dtype", [kiln.int64, kiln.int32], ids=lambda d: d.name)
def test_cross_entropy_dtypes_and_custom_ignore_index(dtype, target_dtype, rng):
    x = random_array((4, 3, 2), dtype, rng)
    target = np.array([[0, 2], [1, 1], [2, 0], [1, 2]])
    out = mint.cross_entropy(t(x, dtype), t(target, target_dtype), ignore_index=1,
                             label_smoothing=0.1)
    assert out.dtype == dtype
    expected = class_loss_reference(x, target, "mean", 1, 0.1, True)
    rtol, atol = TOLERANCES[dtype]
    np.testing.assert_allclose(out.numpy().astype(np.float64), expected, rtol=rtol, atol=atol)


@pytest.mark.parametrize("x_shape", [s for s, _ in CLASS_SHAPES], ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_with_class_probabilities(x_shape, reduction, smoothing, rng):
    # A floating-point target of the input's shape holds probabilities, as in PyTorch.
    axis = 0 if len(x_shape) == 1 else 1
    classes = x_shape[axis]
    x = random_array(x_shape, kiln.float64, rng)
    p = rng.random(x_shape)
    p /= p.sum(axis=axis, keepdims=True)
    smoothed = p * (1 - smoothing) + smoothing / classes
    per_position = -(smoothed * log_softmax(x, axis)).sum(axis=axis)
    expected = {"none": per_position, "sum": per_position.sum(),
                "mean": per_position.sum() / per_position.size}[reduction]
    logits = t(x, kiln.float64).requires_grad_()
    out = mint.cross_entropy(logits, t(p, kiln.float64), reduction=reduction,
                             label_smoothing=smoothing)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12, atol=1e-12)
    mint.sum(out).backward()
    scale = 1 / per_position.size if reduction == "mean" else 1
    softmax = np.exp(log_softmax(x, axis))
    weight = smoothed.sum(axis=axis, keepdims=True)  # 1 when the probabilities sum to 1
    np.testing.assert_allclose(logits.grad.numpy(), scale * (softmax * weight - smoothed),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("target_dtype", [np.uint8, np.int8, np.int16], ids=str)
def test_class_loss_gradients_with_small_integer_targets(target_dtype, rng):
    # The gradient's index kept the target's dtype, which GatherBackward refused.
    x = random_array((4, 5), kiln.float64, rng)
    target = np.array([0, 1, 4, 2], target_dtype)
    for loss, take_log_softmax in [(mint.cross_entropy, True), (mint.nll_loss, False)]:
        logits = t(x).requires_grad_()
        loss(logits, t(target)).backward()
        onehot = np.eye(5)[target.astype(np.int64)]
        softmax = np.exp(log_softmax(x, 1))
        want = (softmax - onehot if take_log_softmax else -onehot) / 4
        np.testing.assert_allclose(logits.grad.numpy(), want, rtol=1e-12, atol=1e-15)


def test_class_loss_gradient_without_classes():
    # Every position ignored and no class 0 to add their 0 at: GatherBackward's index error.
    x = t(np.zeros((3, 0))).requires_grad_()
    assert np.isnan(mint.cross_entropy(x, t(np.full(3, -100))).item())
    mint.cross_entropy(x, t(np.full(3, -100))).backward()
    assert x.grad.shape == (3, 0)


def test_cross_entropy_probability_target_errors(rng):
    x = t(random_array((4, 3), kiln.float32, rng))
    with raises(kiln.ShapeError, match="a floating-point target holds class probabilities and "
                                       "must have the input's shape \\[4, 3\\], got \\[4\\]"):
        mint.cross_entropy(x, t(np.zeros(4, np.float32)))
    with raises(kiln.KilnValueError, match="expected label_smoothing in \\[0, 1\\], got 1.5"):
        mint.cross_entropy(x, t(np.zeros((4, 3), np.float32)), label_smoothing=1.5)
    with raises(kiln.KilnValueError, match="expected reduction 'mean', 'sum' or 'none'"):
        mint.cross_entropy(x, t(np.zeros((4, 3), np.float32)), reduction="avg")


def test_cross_entropy_mean_over_all_ignored_is_nan_and_strided_logits_work(rng):
    x = random_array((3, 4), kiln.float32, rng)
    assert np.isnan(mint.cross_entropy(t(x), t(np.full(3, -100))).item())
    logits = t(x.T.copy()).T  # non-contiguous view of x
    target = np.array([3, 0, 2])
    np.testing.assert_allclose(mint.cross_entropy(logits, t(target)).item(),
                               class_loss_reference(x, target, "mean", -100, 0.0, True),
                               rtol=1e-5)


@pytest.mark.parametrize("x_shape, target_shape", CLASS_SHAPES, ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss(x_shape, target_shape, reduction, rng):
    classes = x_shape[0 if len(x_shape) == 1 else 1]
    x = log_softmax(random_array(x_shape, kiln.float32, rng), 0 if len(x_shape) == 1 else 1)
    target = rng.integers(0, classes, size=target_shape)
    if target.size > 2:
        target.flat[2] = 7
    out = mint.nll_loss(t(x.astype(np.float32)), t(target), reduction=reduction, ignore_index=7)
    expected = class_loss_reference(x, target, reduction, 7, 0.0, False)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_a_mean_loss_with_every_target_ignored_has_zero_gradients(loss):
    # The loss is 0 / 0 = NaN (as PyTorch's), but no position contributes: its gradient is 0,
    # not NaN spreading into every parameter's .grad.
    x = kiln.tensor(np.zeros((2, 3)), dtype=kiln.float32).requires_grad_()
    out = getattr(mint, loss)(x, kiln.tensor(np.array([-100, -100])))
    assert np.isnan(out.item())
    out.backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, 3), np.float32))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss(dtype, reduction, rng):
    a = random_array((3, 4, 5), dtype, rng)
    b = random_array((4, 5), dtype, rng)
    with pytest.warns(UserWarning, match="broadcast to each other"):
        out = mint.mse_loss(t(a, dtype), t(b, dtype), reduction=reduction)
    sq = (f64(a) - f64(b)) ** 2
    expected = {"none": sq, "sum": sq.sum(), "mean": sq.mean()}[reduction]
    assert out.dtype == dtype
    rtol, atol = TOLERANCES[dtype]
    np.testing.assert_allclose(out.numpy().astype(np.float64), expected, rtol=rtol,
                               atol=atol * (100 if reduction == "sum" else 10))


def test_mse_loss_scalar_target_strided_input_and_empty(rng):
    a = random_array((4, 3), kiln.float32, rng)
    np.testing.assert_allclose(mint.mse_loss(t(a).T, 0.5).item(), ((f64(a) - 0.5) ** 2).mean(),
                               rtol=1e-6)
    empty = t(np.zeros((0, 3), np.float32))
    assert np.isnan(mint.mse_loss(empty, empty).item())
    assert mint.mse_loss(empty, empty, "sum").item() == 0.0
    assert mint.mse_loss(empty, empty, "none").shape == (0, 3)


def test_mse_loss_sums_float32_squares_beyond_float32s_range():
    # Each square (1e36) is a float32; their sum (1e39) is not, and is kept in float64 until the
    # mean.
    big = t(np.full(1024, 1e18, np.float32))
    np.testing.assert_allclose(mint.mse_loss(big, t(np.zeros(1024, np.float32))).item(), 1e36,
                               rtol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_over_many_blocks_with_broadcast_and_strided_operands(reduction, rng):
    # 40,000 elements: several of the kernel's 16,384-element blocks and 1,024-element buffers,
    # the broadcast target and the transposed input crossing their edges.
    a = random_array((1000, 40), kiln.float32, rng)
    b = random_array((40,), kiln.float32, rng)
    with pytest.warns(UserWarning, match="broadcast to each other"):
        out = mint.mse_loss(t(a.T.copy()).T, t(b), reduction=reduction)
    sq = (f64(a) - f64(b)) ** 2
    expected = {"none": sq, "sum": sq.sum(), "mean": sq.mean()}[reduction]
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call, error, message", [
    (lambda x, y: mint.cross_entropy(x, t(np.array([0, 4, 1]))), kiln.KilnIndexError,
     r"cross_entropy: target 4 is out of range for 4 classes \(expected 0 <= target < 4, or "
     r"ignore_index -100\)"),
    (lambda x, y: mint.cross_entropy(x, t(np.array([0, -2, 1]))), kiln.KilnIndexError,
     "target -2 is out of range"),
    (lambda x, y: mint.cross_entropy(x, t(np.zeros(3, bool))), kiln.DTypeError,
     "cross_entropy: expected integer class indices as target, got bool"),
    (lambda x, y: mint.cross_entropy(t(np.zeros((3, 4), np.int64)), y), kiln.DTypeError,
     "cross_entropy: expected floating-point input, got int64"),
    (lambda x, y: mint.cross_entropy(x, t(np.zeros(4, np.int64))), kiln.ShapeError,
     r"cross_entropy: input has shape \[3, 4\] and target has shape \[4\]; expected target of "
     r"shape \[3\]"),
    (lambda x, y: mint.cross_entropy(t(np.float32(1.0)), y), kiln.ShapeError, "0-d"),
    (lambda x, y: mint.cross_entropy(x, y, reduction="avg"), kiln.KilnValueError,
     "expected reduction 'mean', 'sum' or 'none', got 'avg'"),
    (lambda x, y: mint.cross_entropy(x, y, label_smoothing=1.5), kiln.KilnValueError,
     r"label_smoothing in \[0, 1\], got 1.5"),
    (lambda x, y: mint.nll_loss(x, t(np.array([0, 9, 1]))), kiln.KilnIndexError,
     "nll_loss: target 9 is out of range for 4 classes"),
    (lambda x, y: mint.nll_loss(x, t(np.zeros((3, 1), np.int64))), kiln.ShapeError,
     "nll_loss: input has shape"),
    (lambda x, y: mint.nll_loss(x, y, reduction="max"), kiln.KilnValueError, "nll_loss"),
    (lambda x, y: mint.mse_loss(x, t(np.zeros(3, np.float32))), kiln.ShapeError,
     r"mse_loss: input has shape \[3, 4\] and target has shape \[3\]; expected shapes that "
     "broadcast"),
    (lambda x, y: mint.mse_loss(y, y), kiln.DTypeError,
     "mse_loss: expected floating-point tensors, got int64"),
    (lambda x, y: mint.mse_loss(x, x, reduction="total"), kiln.KilnValueError, "mse_loss"),
])
def test_loss_errors(call, error, message):
    x = t(np.zeros((3, 4), np.float32))
    y = t(np.array([0, 1, 2]))
    with raises(error, match=message):
        call(x, y)
    assert x.tolist() == [[0.0] * 4] * 3  # inputs are left untouched


@pytest.mark.parametrize("name", ["cross_entropy", "nll_loss"])
@pytest.mark.parametrize("backend", ["kiln_cpu", "reference"])
@pytest.mark.parametrize("target", [-1, -3, 5])
def test_a_jitted_gradient_checks_the_targets(name, backend, target):
    # The loss itself is unused there, so its node (and the forward's check) was dropped, and a
    # negative target was read as a class from the end (-1 as the last): silently wrong rows.
    loss = getattr(kiln.mint, name)
    x = kiln.tensor(np.zeros((2, 5), np.float32))
    t = kiln.tensor(np.array([target, 1]))
    step = kiln.jit(kiln.grad(lambda x, t: loss(x, t)), backend=backend)
    with raises(kiln.KilnIndexError, match=f"{name}: target {target} is out of range for 5 "
                                            f"classes"):
        step(x, t)
    ignored = kiln.tensor(np.array([-100, 1]))
    np.testing.assert_allclose(step(x, ignored).numpy(), kiln.grad(lambda x, t: loss(x, t))(
        x, ignored).numpy(), rtol=1e-6)


def test_mse_loss_warns_when_the_shapes_differ_as_pytorch_does():
    p = np.arange(4, dtype=np.float32)
    with pytest.warns(UserWarning, match=r"input of shape \[4, 1\] and target of shape \[4\] "
                                         r"broadcast to each other"):
        loss = kiln.nn.MSELoss()(t(p[:, None]), t(p))
    assert loss.item() == 2.5  # the mean over all 16 pairs, as PyTorch's
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mint.mse_loss(t(p), t(p)).item() == 0.0  # one shape: no warning
        assert mint.mse_loss(t(p), 1.5).shape == ()  # a number target neither
