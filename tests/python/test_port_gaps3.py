"""PyTorch names a port hits, third batch: the activation cells GLU, SELU, CELU, LogSigmoid,
Softsign, Tanhshrink, Threshold and Softmin (kiln/nn/activation.py); the padding cells
(kiln/nn/padding.py); PixelShuffle, PixelUnshuffle, Bilinear, InstanceNorm1d and InstanceNorm2d
(kiln/nn/extra_layers.py); PolynomialLR and ChainedScheduler (kiln/optim/lr_scheduler.py); and
pad_sequence (kiln/nn/utils/rnn.py; the PackedSequence functions: test_packed_sequence.py). Torch-free checks
against NumPy and closed forms first, then comparisons with PyTorch through the ``torch``
fixture."""

import math
import pickle
import warnings

import numpy as np
import pytest

import kiln
from conftest import (check_cell_against_torch, check_padding_cell, check_schedule_against_torch,
                      check_torch, close, group_rates as rates, raises, sgd_at_rates, t,
                      torch_sgd_at_rates)
from kiln import nn, optim
from kiln.nn import activation as A
from kiln.nn import extra_layers as X
from kiln.nn import padding as P
from kiln.nn.utils import rnn as R
from kiln.optim import lr_scheduler as S

mint = kiln.mint


def grad_of(out, x, upstream):
    (grad,) = kiln.autograd.grad(out, [x], t(upstream))
    return grad.numpy()


# ------------------------------------------------------------------------------------------------
# Activations


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


def _softmin(v, dim):
    e = np.exp(-v - (-v).max(dim, keepdims=True))
    return e / e.sum(dim, keepdims=True)


SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

# name: (cell, NumPy value, NumPy derivative of an elementwise one, or None)
ACTIVATIONS = {
    "GLU": (lambda: A.GLU(1), lambda v: v[:, :3] * _sigmoid(v[:, 3:]), None),
    "SELU": (A.SELU, lambda v: SELU_SCALE * np.where(v > 0, v, SELU_ALPHA * np.expm1(v)),
             lambda v: SELU_SCALE * np.where(v > 0, 1.0, SELU_ALPHA * np.exp(v))),
    "CELU": (lambda: A.CELU(0.7), lambda v: np.where(v > 0, v, 0.7 * np.expm1(v / 0.7)),
             lambda v: np.where(v > 0, 1.0, np.exp(v / 0.7))),
    "LogSigmoid": (A.LogSigmoid, lambda v: -np.logaddexp(0, -v), lambda v: _sigmoid(-v)),
    "Softsign": (A.Softsign, lambda v: v / (1 + np.abs(v)), lambda v: 1 / (1 + np.abs(v)) ** 2),
    "Tanhshrink": (A.Tanhshrink, lambda v: v - np.tanh(v), lambda v: np.tanh(v) ** 2),
    "Threshold": (lambda: A.Threshold(0.1, 20.0), lambda v: np.where(v <= 0.1, 20.0, v),
                  lambda v: np.where(v <= 0.1, 0.0, 1.0)),
    "Softmin": (lambda: A.Softmin(1), lambda v: _softmin(v, 1), None),
}


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_cells_match_numpy(name, rng):
    build, value, derivative = ACTIVATIONS[name]
    v = rng.uniform(-3, 3, size=(4, 6))
    x = t(v).requires_grad_()
    out = build()(x)
    close(out, value(v), rtol=1e-12, atol=1e-12)
    if derivative is not None:
        upstream = rng.uniform(0.5, 2, size=v.shape)
        close(t(grad_of(out, x, upstream)), derivative(v) * upstream, rtol=1e-12, atol=1e-12)


def test_softmin_gradient_is_minus_softmax_jacobian(rng):
    v = rng.uniform(-2, 2, size=(3, 5))
    x = t(v).requires_grad_()
    upstream = rng.uniform(0.5, 2, size=v.shape)
    s = _softmin(v, 1)
    # d softmax(-v) = -s * (g - sum(g * s))
    want = -s * (upstream - (upstream * s).sum(1, keepdims=True))
    close(t(grad_of(A.Softmin(1)(x), x, upstream)), want, rtol=1e-12, atol=1e-12)


def test_inplace_activations_write_into_the_input():
    for cell, want in ((A.SELU(True), [SELU_SCALE * SELU_ALPHA * math.expm1(-1.0),
                                        2.0 * SELU_SCALE]),
                       (A.CELU(2.0, True), [2.0 * math.expm1(-0.5), 2.0]),
                       (A.Threshold(0.0, 5.0, True), [5.0, 2.0])):
        x = t(np.array([-1.0, 2.0]))
        assert cell(x) is x
        np.testing.assert_allclose(x.numpy(), want, rtol=1e-12)
    # A leaf requiring grad is computed out of place (Kiln's autograd needs it).
    x = t(np.array([-1.0, 2.0])).requires_grad_()
    assert A.SELU(True)(x) is not x


def test_activation_reprs_and_names():
    assert repr(A.GLU()) == "GLU(dim=-1)"
    assert repr(A.SELU()) == "SELU()"
    assert repr(A.SELU(inplace=True)) == "SELU(inplace=True)"
    assert repr(A.CELU(0.5, True)) == "CELU(alpha=0.5, inplace=True)"
    assert repr(A.Threshold(0.1, 20.0)) == "Threshold(threshold=0.1, value=20.0)"
    assert repr(A.Softmin(0)) == "Softmin(dim=0)"
    for name in ("LogSigmoid", "Softsign", "Tanhshrink"):
        assert repr(getattr(A, name)()) == f"{name}()"
    for spec, kind in (("selu", A.SELU), ("GLU", A.GLU), ("softmin", A.Softmin),
                       ("logsigmoid", A.LogSigmoid), ("tanhshrink", A.Tanhshrink)):
        assert type(A.activation_cell(spec)) is kind


def test_softmin_dim_none_warns_and_picks_pytorchs_dimension(rng):
    v = rng.uniform(-2, 2, size=(2, 3, 4))
    with pytest.warns(UserWarning, match="implicit dimension choice"):
        out = A.Softmin(None)(t(v))
    close(out, _softmin(v, 0), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("build, error, match", [
    (lambda: A.GLU("1"), kiln.KilnTypeError, "GLU: dim must be an int"),
    (lambda: A.CELU("1"), kiln.KilnTypeError, "CELU: expected alpha to be a real number"),
    (lambda: A.Threshold(None, 1.0), kiln.KilnTypeError,
     "Threshold: expected threshold to be a real number"),
    (lambda: A.Threshold(0.0), TypeError, "value"),
    (lambda: A.SELU(1), kiln.KilnTypeError, "SELU: inplace must be a bool"),
    (lambda: A.Softmin(1.5), kiln.KilnTypeError, "Softmin: dim must be an int"),
])
def test_activation_argument_errors(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_activation_call_errors():
    with raises(kiln.ShapeError, match="glu: expected dimension -1 of even size"):
        A.GLU()(t(np.ones((2, 3))))
    with raises(kiln.KilnValueError, match="celu: alpha cannot be 0"):
        A.CELU(0.0)(t(np.ones(2)))
    with raises(kiln.DTypeError, match="logsigmoid: expected a floating-point input"):
        A.LogSigmoid()(t(np.ones(2, np.int64)))


# ------------------------------------------------------------------------------------------------
# Padding


PADS = [  # (kiln cell, NumPy np.pad arguments of the last dimensions, input shape)
    (P.ZeroPad1d(2), dict(pad=[(2, 2)], mode="constant"), (2, 3, 5)),
    (P.ZeroPad2d((1, 0, 2, 3)), dict(pad=[(2, 3), (1, 0)], mode="constant"), (2, 4, 5)),
    (P.ConstantPad1d((0, 3), -1.5), dict(pad=[(0, 3)], mode="constant", constant_values=-1.5),
     (3, 4)),
    (P.ConstantPad2d(1, 2.5), dict(pad=[(1, 1), (1, 1)], mode="constant",
                                   constant_values=2.5), (1, 2, 3, 4)),
    (P.ReflectionPad1d((3, 1)), dict(pad=[(3, 1)], mode="reflect"), (2, 3, 5)),
    (P.ReflectionPad2d([1, 2, 0, 3]), dict(pad=[(0, 3), (1, 2)], mode="reflect"), (3, 4, 5)),
    (P.ReplicationPad1d(4), dict(pad=[(4, 4)], mode="edge"), (3, 2)),
    (P.ReplicationPad2d((2, 0, 1, 3)), dict(pad=[(1, 3), (2, 0)], mode="edge"), (2, 2, 3, 4)),
]
PAD_IDS = [type(cell).__name__ for cell, _, _ in PADS]


@pytest.mark.parametrize("cell, spec, shape", PADS, ids=PAD_IDS)
def test_padding_cells_match_numpy_pad(cell, spec, shape, rng):
    check_padding_cell(cell, spec, shape, rng)


def test_constant_padding_may_crop():
    v = np.arange(10.0).reshape(2, 5)
    close(P.ConstantPad1d((-1, 2), 7.0)(t(v)), np.pad(v[:, 1:], [(0, 0), (0, 2)],
                                                      constant_values=7.0))


def test_padding_reprs():
    assert repr(P.ZeroPad1d(2)) == "ZeroPad1d((2, 2))"
    assert repr(P.ZeroPad2d((1, 0, 2, 3))) == "ZeroPad2d((1, 0, 2, 3))"
    assert repr(P.ConstantPad1d([1, 2], 3.5)) == "ConstantPad1d(padding=(1, 2), value=3.5)"
    assert repr(P.ConstantPad2d(1, 0.0)) == "ConstantPad2d(padding=(1, 1, 1, 1), value=0.0)"
    assert repr(P.ReflectionPad2d(1)) == "ReflectionPad2d((1, 1, 1, 1))"
    assert repr(P.ReplicationPad1d((0, 2))) == "ReplicationPad1d((0, 2))"
    assert P.ReflectionPad1d([1, 2]).padding == (1, 2)


@pytest.mark.parametrize("build, error, match", [
    (lambda: P.ZeroPad2d((1, 2)), kiln.KilnValueError,
     r"ZeroPad2d: expected padding to be an int or a sequence of 4 ints, got 2 values"),
    (lambda: P.ReflectionPad1d("1"), kiln.KilnTypeError,
     "ReflectionPad1d: expected padding to be an int or a sequence of 2 ints, got str"),
    (lambda: P.ReplicationPad1d((1, 2.5)), kiln.KilnTypeError,
     r"ReplicationPad1d: padding\[1\] must be an int, got float"),
    (lambda: P.ConstantPad1d(1, "0"), kiln.KilnTypeError,
     "ConstantPad1d: expected value to be a real number"),
])
def test_padding_argument_errors(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_padding_call_errors():
    with raises(kiln.ShapeError, match=r"ReflectionPad1d: expected an input \[C, W\] or "
                                       r"\[N, C, W\], got \[1, 2, 3, 4\] \(4-D\)"):
        P.ReflectionPad1d(1)(mint.zeros((1, 2, 3, 4)))
    with raises(kiln.ShapeError, match=r"ReplicationPad2d: expected an input \[C, H, W\] or "
                                       r"\[N, C, H, W\], got \[3, 4\]"):
        P.ReplicationPad2d(1)(mint.zeros((3, 4)))
    with raises(kiln.KilnTypeError, match="ReflectionPad2d: expected input to be a kiln.Tensor"):
        P.ReflectionPad2d(1)(np.zeros((1, 3, 3)))
    with raises(kiln.KilnValueError, match="reflect padding must be less than the dimension"):
        P.ReflectionPad1d(3)(mint.zeros((2, 3)))
    # Negative padding crops (F.pad), as in PyTorch; past the size it is a ShapeError.
    assert tuple(P.ReplicationPad1d(-1)(mint.zeros((2, 3))).shape) == (2, 1)
    with raises(kiln.ShapeError, match=r"padding \(-2, -2\) of dimension 1 of size 3 gives a "
                                       r"negative size -1"):
        P.ReplicationPad1d(-2)(mint.zeros((2, 3)))


# ------------------------------------------------------------------------------------------------
# PixelShuffle, PixelUnshuffle, Bilinear


def test_pixel_shuffle_cells_round_trip_and_place_channels(rng):
    v = rng.standard_normal((2, 8, 3, 5))
    shuffled = X.PixelShuffle(2)(t(v))
    assert tuple(shuffled.shape) == (2, 2, 6, 10)
    # out[n, c, h * r + i, w * r + j] = in[n, c * r * r + i * r + j, h, w]
    np.testing.assert_array_equal(shuffled.numpy()[1, 1, 2 * 2 + 1, 3 * 2 + 0],
                                  v[1, 1 * 4 + 1 * 2 + 0, 2, 3])
    np.testing.assert_array_equal(X.PixelUnshuffle(2)(shuffled).numpy(), v)
    assert repr(X.PixelShuffle(3)) == "PixelShuffle(upscale_factor=3)"
    assert repr(X.PixelUnshuffle(2)) == "PixelUnshuffle(downscale_factor=2)"
    with pytest.raises(kiln.KilnValueError, match="PixelShuffle: upscale_factor must be at least"):
        X.PixelShuffle(0)
    with raises(kiln.ShapeError, match="pixel_unshuffle: expected the height and width"):
        X.PixelUnshuffle(2)(mint.zeros((1, 3, 3)))


def test_bilinear_matches_einsum_and_initialises_as_pytorch(rng):
    kiln.manual_seed(0)
    cell = X.Bilinear(4, 3, 5, dtype=kiln.float64)
    assert tuple(cell.weight.shape) == (5, 4, 3) and tuple(cell.bias.shape) == (5,)
    assert [name for name, _ in cell.named_parameters()] == ["weight", "bias"]
    for p in (cell.weight, cell.bias):
        assert np.abs(p.numpy()).max() <= 1 / math.sqrt(4)
    big = X.Bilinear(16, 2, 200)
    assert np.abs(big.weight.numpy()).max() > 0.2  # U(-1/4, 1/4), not a smaller bound
    w, b = cell.weight.numpy(), cell.bias.numpy()
    v1, v2 = rng.standard_normal((2, 6, 4)), rng.standard_normal((2, 6, 3))
    x1, x2 = t(v1).requires_grad_(), t(v2).requires_grad_()
    out = cell(x1, x2)
    close(out, np.einsum("...i,oij,...j->...o", v1, w, v2) + b, rtol=1e-12, atol=1e-12)
    upstream = rng.standard_normal((2, 6, 5))
    g1, g2, gw = kiln.autograd.grad(out, [x1, x2, cell.weight], t(upstream))
    close(g1, np.einsum("...o,oij,...j->...i", upstream, w, v2), rtol=1e-12, atol=1e-12)
    close(g2, np.einsum("...o,oij,...i->...j", upstream, w, v1), rtol=1e-12, atol=1e-12)
    close(gw, np.einsum("nso,nsi,nsj->oij", upstream, v1, v2), rtol=1e-12, atol=1e-12)
    assert X.Bilinear(2, 3, 4, bias=False).bias is None
    assert repr(X.Bilinear(2, 3, 4, bias=False)) == ("Bilinear(in1_features=2, in2_features=3, "
                                                     "out_features=4, bias=False)")
    with pytest.raises(kiln.KilnValueError, match="Bilinear: in1_features must be at least 1"):
        X.Bilinear(0, 3, 4)
    with raises(kiln.ShapeError, match="bilinear: expected input1"):
        cell(t(v1), t(v2[:, :5]))


# ------------------------------------------------------------------------------------------------
# InstanceNorm


def instance_norm_numpy(v, eps=1e-5, weight=None, bias=None):
    dims = tuple(range(2, v.ndim))
    y = (v - v.mean(dims, keepdims=True)) / np.sqrt(v.var(dims, keepdims=True) + eps)
    shape = (1, -1) + (1,) * len(dims)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


@pytest.mark.parametrize("kind, shape", [(X.InstanceNorm1d, (3, 4, 7)),
                                         (X.InstanceNorm2d, (2, 4, 3, 5))])
def test_instance_norm_matches_numpy(kind, shape, rng):
    v = rng.standard_normal(shape) * 3 + 1
    close(kind(4, dtype=kiln.float64)(t(v)), instance_norm_numpy(v), rtol=1e-10, atol=1e-10)
    cell = kind(4, eps=1e-3, affine=True, dtype=kiln.float64)
    weight, bias = rng.standard_normal(4), rng.standard_normal(4)
    cell.load_state_dict({"weight": weight, "bias": bias})
    close(cell(t(v)), instance_norm_numpy(v, 1e-3, weight, bias), rtol=1e-10, atol=1e-10)
    # One sample (no batch dimension) is a batch of one.
    close(cell(t(v[1])), instance_norm_numpy(v[1:2], 1e-3, weight, bias)[0], rtol=1e-10,
          atol=1e-10)


def test_instance_norm_running_statistics_follow_pytorchs_rule(rng):
    cell = X.InstanceNorm1d(3, momentum=0.2, track_running_stats=True, dtype=kiln.float64)
    batches = [rng.standard_normal((4, 3, 6)) * s + s for s in (1.0, 2.0)]
    mean, var = np.zeros(3), np.ones(3)
    for v in batches:
        close(cell(t(v)), instance_norm_numpy(v), rtol=1e-10, atol=1e-10)
        mean = 0.8 * mean + 0.2 * v.mean(2).mean(0)
        var = 0.8 * var + 0.2 * v.var(2, ddof=1).mean(0)
    close(cell.running_mean, mean, rtol=1e-12, atol=1e-12)
    close(cell.running_var, var, rtol=1e-12, atol=1e-12)
    assert cell.num_batches_tracked.item() == 0  # PyTorch's instance norm does not count
    cell.eval()
    v = rng.standard_normal((2, 3, 5))
    close(cell(t(v)), (v - mean[:, None]) / np.sqrt(var[:, None] + 1e-5), rtol=1e-10,
          atol=1e-10)
    # momentum=None is 0 (PyTorch's): the running statistics stay.
    still = X.InstanceNorm1d(3, momentum=None, track_running_stats=True)
    still(t(batches[0], kiln.float32))
    close(still.running_mean, np.zeros(3))
    close(still.running_var, np.ones(3))


def test_instance_norm_reprs_and_state():
    assert repr(X.InstanceNorm2d(3)) == ("InstanceNorm2d(3, eps=1e-05, momentum=0.1, "
                                         "affine=False, bias=False, track_running_stats=False)")
    assert repr(X.InstanceNorm1d(4, affine=True, track_running_stats=True)) == (
        "InstanceNorm1d(4, eps=1e-05, momentum=0.1, affine=True, bias=True, "
        "track_running_stats=True)")
    assert list(X.InstanceNorm1d(3).state_dict()) == []
    assert list(X.InstanceNorm2d(3, affine=True, bias=False).state_dict()) == ["weight"]
    assert list(X.InstanceNorm2d(3, affine=True, track_running_stats=True).state_dict()) == [
        "weight", "bias", "running_mean", "running_var", "num_batches_tracked"]


def test_instance_norm_errors(rng):
    with raises(kiln.KilnValueError, match="InstanceNorm1d: expected more than 1 spatial value"):
        X.InstanceNorm1d(3)(mint.zeros((2, 3, 1)))
    with raises(kiln.ShapeError, match=r"InstanceNorm2d: expected an input \[C, H, W\] or "
                                       r"\[N, C, H, W\], got \[2, 3\]"):
        X.InstanceNorm2d(3)(mint.zeros((2, 3)))
    with raises(kiln.ShapeError, match=r"InstanceNorm1d: expected 3 channels \(num_features\) "
                                       r"in dim 1"):
        X.InstanceNorm1d(3, affine=True)(mint.zeros((2, 4, 5)))
    with raises(kiln.DTypeError, match="InstanceNorm1d: expected an input of dtype float32"):
        X.InstanceNorm1d(3, affine=True)(mint.zeros((2, 3, 5), dtype=kiln.float64))
    with raises(kiln.DTypeError, match="expected a floating-point input"):
        X.InstanceNorm1d(3)(mint.zeros((2, 3, 5), dtype=kiln.int64))
    with pytest.raises(kiln.KilnValueError, match="InstanceNorm1d: eps must be at least 0"):
        X.InstanceNorm1d(3, eps=-1.0)
    # Without parameters or running statistics another channel count only warns, as PyTorch.
    v = rng.standard_normal((2, 5, 4))
    with pytest.warns(UserWarning, match=r"InstanceNorm1d: input's size at dim=1 does not match"):
        out = X.InstanceNorm1d(3, dtype=kiln.float64)(t(v))
    close(out, instance_norm_numpy(v), rtol=1e-10, atol=1e-10)


# ------------------------------------------------------------------------------------------------
# PolynomialLR and ChainedScheduler

BASES = (0.1, 0.05, 0.0)
STEPS = 14


# name: (build from a scheduler module and an optimizer, the rate of base at step t)
SCHEDULES = {
    "polynomial": (lambda m, o: m.PolynomialLR(o, total_iters=6, power=2.0),
                   lambda b, t: b * (1 - min(t, 6) / 6) ** 2),
    "polynomial-default": (lambda m, o: m.PolynomialLR(o),
                           lambda b, t: b * (1 - min(t, 5) / 5)),
    "exponential-step": (
        lambda m, o: m.ChainedScheduler([m.ExponentialLR(o, 0.9), m.StepLR(o, 3, 0.5)]),
        lambda b, t: b * 0.9 ** t * 0.5 ** (t // 3)),
    "step-exponential": (
        lambda m, o: m.ChainedScheduler([m.StepLR(o, 3, 0.5), m.ExponentialLR(o, 0.9)], o),
        lambda b, t: b * 0.9 ** t * 0.5 ** (t // 3)),
    "constant-linear-polynomial": (
        lambda m, o: m.ChainedScheduler([m.ConstantLR(o, 0.5, 4), m.LinearLR(o, 0.2, 1.0, 6),
                                         m.PolynomialLR(o, 10, 0.5)]),
        lambda b, t: (b * (0.5 if t < 4 else 1.0) * (0.2 + 0.8 * min(t, 6) / 6)
                      * (1 - min(t, 10) / 10) ** 0.5)),
}


@pytest.mark.parametrize("name", SCHEDULES)
def test_schedules_follow_their_closed_forms(name):
    build, rate = SCHEDULES[name]
    opt = sgd_at_rates(BASES)
    sched = build(S, opt)
    for step in range(STEPS + 1):
        if step:
            sched.step()
        want = [rate(b, step) for b in BASES]
        assert rates(opt) == pytest.approx(want, rel=1e-12, abs=1e-15)
        assert sched.get_last_lr() == rates(opt)
        assert sched.last_epoch == step


def test_chained_state_dict_resumes_and_each_scheduler_lists_the_rates_it_set():
    build, rate = SCHEDULES["exponential-step"]
    sched = build(S, sgd_at_rates(BASES))
    for _ in range(5):
        sched.step()
    # As PyTorch's: ExponentialLR, stepped first, moved the rate StepLR had halved at step 3.
    assert sched._schedulers[0].get_last_lr()[0] == pytest.approx(0.1 * 0.9 ** 5 * 0.5)
    saved = pickle.loads(pickle.dumps(sched.state_dict()))
    assert [s["last_epoch"] for s in saved["_schedulers"]] == [5, 5]
    opt = sgd_at_rates(BASES)
    resumed = build(S, opt)
    resumed.load_state_dict(saved)
    assert rates(opt) == pytest.approx([rate(b, 5) for b in BASES], rel=1e-12)
    for step in range(6, 10):
        resumed.step()
        assert rates(opt) == pytest.approx([rate(b, step) for b in BASES], rel=1e-12)
    with raises(kiln.KilnValueError, match="ChainedScheduler.load_state_dict: the state holds "
                                           "1 schedulers' states, expected 2"):
        resumed.load_state_dict({**saved, "_schedulers": saved["_schedulers"][:1]})


def test_scheduler_errors():
    opt = sgd_at_rates(BASES)
    cases = [
        (lambda: S.PolynomialLR(opt, total_iters=0), kiln.KilnValueError,
         "PolynomialLR: total_iters must be at least 1, got 0"),
        (lambda: S.PolynomialLR(opt, power=-1.0), kiln.KilnValueError,
         "expected power >= 0.0"),
        (lambda: S.PolynomialLR(opt, power="2"), kiln.KilnTypeError,
         "PolynomialLR: power must be a real number"),
        (lambda: S.ChainedScheduler([]), kiln.KilnValueError,
         "ChainedScheduler: expected at least one scheduler, got none"),
        (lambda: S.ChainedScheduler(S.StepLR(opt, 2)), kiln.KilnTypeError,
         "ChainedScheduler: schedulers must be a list of schedulers, got StepLR"),
        (lambda: S.ChainedScheduler([S.StepLR(opt, 2), "x"]), kiln.KilnTypeError,
         r"ChainedScheduler: expected schedulers\[1\] to be a kiln learning-rate scheduler"),
        (lambda: S.ChainedScheduler([S.ReduceLROnPlateau(opt)]), kiln.KilnValueError,
         r"ChainedScheduler: schedulers\[0\] is a ReduceLROnPlateau, whose step takes a metric; "
         r"it cannot run in a chain"),
        (lambda: S.ChainedScheduler([S.StepLR(opt, 2), S.StepLR(sgd_at_rates(BASES), 2)]),
         kiln.KilnValueError, r"ChainedScheduler: schedulers\[1\] \(StepLR\) sets the rates of "
                              r"another optimizer"),
        (lambda: S.ChainedScheduler([S.StepLR(opt, 2)], sgd_at_rates(BASES)), kiln.KilnValueError,
         r"schedulers\[0\] \(StepLR\) sets the rates of another optimizer"),
        (lambda: S.ChainedScheduler([S.StepLR(opt, 2)], "opt"), kiln.KilnTypeError,
         "ChainedScheduler: expected a kiln.optim.Optimizer, got str"),
    ]
    for build, error, match in cases:
        with pytest.raises(error, match=match):
            build()


# ------------------------------------------------------------------------------------------------
# pad_sequence and PackedSequence


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_sequence_matches_numpy_with_gradients(batch_first, side, rng):
    lengths = (3, 5, 1)
    arrays = [rng.standard_normal((n, 2, 3)) for n in lengths]
    want = np.full((3, 5, 2, 3), -2.0)
    for i, a in enumerate(arrays):
        if side == "left":
            want[i, 5 - len(a):] = a
        else:
            want[i, :len(a)] = a
    if not batch_first:
        want = want.transpose(1, 0, 2, 3)
    xs = [t(a).requires_grad_() for a in arrays]
    out = R.pad_sequence(xs, batch_first, -2.0, side)
    close(out, want, rtol=0, atol=0)
    upstream = rng.standard_normal(want.shape)
    grads = kiln.autograd.grad(out, xs, t(upstream))
    per_sample = upstream if batch_first else upstream.transpose(1, 0, 2, 3)
    for i, (grad, n) in enumerate(zip(grads, lengths)):
        close(grad, per_sample[i, 5 - n:] if side == "left" else per_sample[i, :n], rtol=0,
              atol=0)


def test_pad_sequence_of_one_dimensional_int_sequences_keeps_the_first_dtype():
    out = R.pad_sequence([t(np.array([1, 2], np.int64)), t(np.array([3.7]))], True, 9)
    assert out.dtype == kiln.int64
    np.testing.assert_array_equal(out.numpy(), [[1, 2], [3, 9]])
    assert tuple(R.pad_sequence([mint.zeros(4), mint.zeros(2)]).shape) == (4, 2)


def test_pad_sequence_errors():
    with raises(kiln.KilnValueError, match="pad_sequence: expected at least one sequence"):
        R.pad_sequence([])
    with raises(kiln.KilnValueError, match="expected padding_side 'left' or 'right', got 'top'"):
        R.pad_sequence([mint.zeros(2)], padding_side="top")
    with raises(kiln.KilnTypeError, match=r"pad_sequence: expected sequences\[1\] to be a "
                                          r"kiln.Tensor, got list"):
        R.pad_sequence([mint.zeros(2), [1.0]])
    with raises(kiln.KilnTypeError, match="expected an iterable of tensors"):
        R.pad_sequence(3)
    with raises(kiln.ShapeError, match=r"with the trailing dimensions \* of sequences\[0\] "
                                       r"\[2, 3\], got sequences\[1\] \[2, 4\]"):
        R.pad_sequence([mint.zeros((2, 3)), mint.zeros((2, 4))])
    with raises(kiln.ShapeError, match=r"got sequences\[0\] \[\]"):
        R.pad_sequence([mint.zeros(())])


# ------------------------------------------------------------------------------------------------
# Against PyTorch


TORCH_ACTIVATIONS = [  # (kiln cell, torch.nn name and arguments)
    (A.GLU(1), ("GLU", 1)), (A.GLU(), ("GLU",)), (A.SELU(), ("SELU",)),
    # alpha 0.5: PyTorch's CELU gradient rounds 1 / alpha to float32 (1e-8 off for 0.7).
    (A.CELU(0.5), ("CELU", 0.5)), (A.LogSigmoid(), ("LogSigmoid",)),
    (A.Softsign(), ("Softsign",)), (A.Tanhshrink(), ("Tanhshrink",)),
    (A.Threshold(0.1, 20.0), ("Threshold", 0.1, 20.0)), (A.Softmin(1), ("Softmin", 1)),
    (A.Softmin(0), ("Softmin", 0)),
]


@pytest.mark.parametrize("ours, spec", TORCH_ACTIVATIONS,
                         ids=[repr(cell) for cell, _ in TORCH_ACTIVATIONS])
def test_activations_against_torch(torch, ours, spec, rng):
    theirs = getattr(torch.nn, spec[0])(*spec[1:])
    assert repr(ours) == repr(theirs)
    check_cell_against_torch(torch, ours, theirs, rng.uniform(-3, 3, size=(4, 6)), rng)


@pytest.mark.parametrize("index", range(len(PADS)), ids=PAD_IDS)
def test_padding_cells_against_torch(torch, index, rng):
    ours, _, shape = PADS[index]
    name = type(ours).__name__
    args = (ours.padding, ours.value) if name.startswith("Constant") else (ours.padding,)
    theirs = getattr(torch.nn, name)(*args)
    assert repr(ours) == repr(theirs)
    check_cell_against_torch(torch, ours, theirs, rng.standard_normal(shape), rng)


def test_pixel_shuffle_against_torch(torch, rng):
    for ours, theirs, shape in ((X.PixelShuffle(3), torch.nn.PixelShuffle(3), (2, 18, 2, 3)),
                                (X.PixelUnshuffle(2), torch.nn.PixelUnshuffle(2), (1, 3, 4, 6))):
        assert repr(ours) == repr(theirs)
        check_cell_against_torch(torch, ours, theirs, rng.standard_normal(shape), rng)


def test_bilinear_loads_a_torch_state_dict_and_matches_it(torch, rng):
    theirs = torch.nn.Bilinear(4, 3, 5).double()
    ours = X.Bilinear(4, 3, 5, dtype=kiln.float64)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    assert repr(ours) == repr(theirs)
    v1, v2 = rng.standard_normal((2, 6, 4)), rng.standard_normal((2, 6, 3))
    x1, x2 = t(v1).requires_grad_(), t(v2).requires_grad_()
    tx1, tx2 = torch.tensor(v1, requires_grad=True), torch.tensor(v2, requires_grad=True)
    out, want = ours(x1, x2), theirs(tx1, tx2)
    check_torch(out, want, kiln.float64, "value")
    upstream = rng.standard_normal(tuple(want.shape))
    grads = kiln.autograd.grad(out, [x1, x2, ours.weight, ours.bias], t(upstream))
    wants = torch.autograd.grad(want, [tx1, tx2, theirs.weight, theirs.bias],
                                torch.tensor(upstream))
    for name, grad, expected in zip(["x1", "x2", "weight", "bias"], grads, wants):
        check_torch(grad, expected, kiln.float64, f"gradient of {name}")


@pytest.mark.parametrize("kind, shape", [("InstanceNorm1d", (3, 4, 7)),
                                         ("InstanceNorm1d", (4, 7)),
                                         ("InstanceNorm2d", (2, 4, 3, 5))])
def test_instance_norm_affine_against_torch(torch, kind, shape, rng):
    theirs = getattr(torch.nn, kind)(4, affine=True).double()
    with torch.no_grad():
        theirs.weight.uniform_(0.5, 2)
        theirs.bias.uniform_(-1, 1)
    ours = getattr(X, kind)(4, affine=True, dtype=kiln.float64)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    assert repr(ours) == repr(theirs)
    check_cell_against_torch(torch, ours, theirs, rng.standard_normal(shape) * 2 + 1, rng,
                             scale_atol=True)


def test_instance_norm_running_statistics_against_torch(torch, rng):
    theirs = torch.nn.InstanceNorm2d(3, momentum=0.3, affine=True,
                                     track_running_stats=True).double()
    ours = X.InstanceNorm2d(3, momentum=0.3, affine=True, track_running_stats=True,
                            dtype=kiln.float64)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    for scale in (1.0, 3.0):
        v = rng.standard_normal((2, 3, 4, 5)) * scale + scale
        check_torch(ours(t(v)), theirs(torch.tensor(v)), kiln.float64, "training value")
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        np.testing.assert_allclose(getattr(ours, name).numpy(),
                                   getattr(theirs, name).numpy(), rtol=1e-12, err_msg=name)
    ours.eval()
    theirs.eval()
    check_cell_against_torch(torch, ours, theirs, rng.standard_normal((2, 3, 4, 5)), rng)


@pytest.mark.parametrize("name", SCHEDULES)
def test_schedules_against_torch(torch, name):
    check_schedule_against_torch(torch, SCHEDULES[name][0], BASES, STEPS)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_sequence_against_torch(torch, batch_first, side, rng):
    arrays = [rng.standard_normal((n, 3)) for n in (2, 4, 3)]
    xs = [t(a).requires_grad_() for a in arrays]
    txs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = R.pad_sequence(xs, batch_first, 0.5, side)
    want = torch.nn.utils.rnn.pad_sequence(txs, batch_first, 0.5, side)
    check_torch(out, want, kiln.float64, "value")
    upstream = rng.standard_normal(tuple(want.shape))
    grads = kiln.autograd.grad(out, xs, t(upstream))
    wants = torch.autograd.grad(want, txs, torch.tensor(upstream))
    for grad, expected in zip(grads, wants):
        check_torch(grad, expected, kiln.float64, "gradient")


def test_warnings_point_at_the_caller(rng):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        X.InstanceNorm1d(3)(t(rng.standard_normal((2, 4, 3))))
    assert [w.filename for w in caught] == [__file__]


def test_the_new_names_are_where_pytorch_code_looks_for_them():
    from kiln.nn.utils.rnn import pad_sequence  # as torch.nn.utils.rnn
    assert pad_sequence is R.pad_sequence and kiln.nn.utils.rnn is R
    for name in ("GLU", "SELU", "CELU", "LogSigmoid", "Softsign", "Tanhshrink", "Threshold",
                 "Softmin", "ZeroPad1d", "ZeroPad2d", "ConstantPad1d", "ConstantPad2d",
                 "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d",
                 "PixelShuffle", "PixelUnshuffle", "Bilinear", "InstanceNorm1d",
                 "InstanceNorm2d"):
        assert name in nn.__all__ and getattr(nn, name).__name__ == name
    assert optim.lr_scheduler.PolynomialLR is S.PolynomialLR
    assert optim.lr_scheduler.ChainedScheduler is S.ChainedScheduler
