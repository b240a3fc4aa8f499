"""kiln.nn layers that ported PyTorch code uses: the activations' and Dropout's ``inplace``
argument and the activations ReLU6, PReLU, Mish, LogSoftmax, Hardswish and Hardsigmoid
(kiln/nn/activation.py, kiln/nn/dropout.py); Conv1d, ConvTranspose1d and ConvTranspose2d with
F.conv1d, F.conv_transpose1d and F.conv_transpose2d (kiln/nn/conv.py); F.interpolate and the Upsample cells
(kiln/nn/upsampling.py). Torch-free checks against NumPy references and closed forms first, then
the comparisons with PyTorch (values, gradients, state dicts, reprs) through the ``torch``
fixture."""

import math

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from conftest import (FLOAT_DTYPES, check_cell_against_torch, check_torch, raises, random_array, t,
                      torch_twin)
from kiln import nn
from kiln.nn.activation import (ELU, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSoftmax,
                                Mish, PReLU, ReLU, ReLU6, SiLU, activation_cell)
from kiln.nn.conv import Conv1d, ConvTranspose1d, ConvTranspose2d
from kiln.nn.dropout import Dropout
from kiln.nn.upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d
from test_conv_transpose import conv_transpose2d_reference

mint = kiln.mint
gradcheck = kiln.testing.gradcheck


def assert_close(actual, expected, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(np.asarray(actual.numpy(), np.float64), expected, rtol=rtol,
                               atol=atol)


# ------------------------------------------------------------------------------------------------
# Activations: inplace, and the new cells


# (cell, the F function it applies, that function's arguments before inplace, torch's class)
INPLACE = [
    (lambda: ReLU(True), F.relu, (), lambda n: n.ReLU(True)),
    (lambda: ReLU6(True), F.relu6, (), lambda n: n.ReLU6(True)),
    (lambda: LeakyReLU(0.2, True), F.leaky_relu, (0.2,), lambda n: n.LeakyReLU(0.2, True)),
    (lambda: ELU(0.5, True), F.elu, (0.5,), lambda n: n.ELU(0.5, True)),
    (lambda: Hardtanh(-0.5, 2.0, True), F.hardtanh, (-0.5, 2.0),
     lambda n: n.Hardtanh(-0.5, 2.0, True)),
    (lambda: SiLU(True), F.silu, (), lambda n: n.SiLU(True)),
    (lambda: Mish(True), F.mish, (), lambda n: n.Mish(True)),
    (lambda: Hardswish(True), F.hardswish, (), lambda n: n.Hardswish(True)),
    (lambda: Hardsigmoid(True), F.hardsigmoid, (), lambda n: n.Hardsigmoid(True)),
]
INPLACE_IDS = [fn.__name__ for _, fn, _, _ in INPLACE]


@pytest.mark.parametrize("make, fn, args, _", INPLACE, ids=INPLACE_IDS)
def test_inplace_cell_writes_fs_result_into_its_input(make, fn, args, _, rng):
    values = rng.uniform(-4, 4, size=(3, 5))
    x = t(values)
    out = make()(x)
    assert out.is_same(x)
    np.testing.assert_array_equal(x.numpy(), fn(t(values), *args).numpy())


@pytest.mark.parametrize("make, fn, args, _", INPLACE, ids=INPLACE_IDS)
def test_inplace_cell_computes_out_of_place_where_autograd_needs_its_input(make, fn, args, _):
    x = t([-1.0, 2.0]).requires_grad_()
    out = make()(x)
    assert not out.is_same(x) and out.requires_grad
    np.testing.assert_array_equal(out.detach().numpy(), fn(x.detach(), *args).numpy())
    with kiln.no_grad():
        assert make()(x).is_same(x)


@pytest.mark.parametrize("cls", [ReLU, ReLU6, SiLU, Mish, Hardswish, Hardsigmoid, LeakyReLU, ELU,
                                 Hardtanh, Dropout])
def test_without_inplace_the_input_is_left_alone_and_the_flag_must_be_a_bool(cls, rng):
    x = t(rng.uniform(-4, 4, size=(3, 4)))
    before = x.numpy().copy()
    out = cls()(x)
    assert not out.is_same(x)
    np.testing.assert_array_equal(x.numpy(), before)
    assert not cls().inplace
    with raises(kiln.KilnTypeError, match=f"{cls.__name__}: inplace must be a bool, got int 1"):
        cls(inplace=1)


def test_a_model_with_an_inplace_relu_trains(rng):
    model = nn.Sequential(nn.Conv2d(2, 3, 3), ReLU(inplace=True))
    x = t(rng.standard_normal((1, 2, 5, 5)), kiln.float32)
    with kiln.no_grad():
        out = model(x)
    np.testing.assert_array_equal(out.numpy(), F.relu(model[0](x)).numpy())
    # The convolution's output requires grad: the ReLU computes out of place and gradients flow.
    model(x).sum().backward()
    pre = model[0](x).detach().numpy()
    want = (pre > 0).sum(axis=(0, 2, 3)).astype(np.float32)
    np.testing.assert_allclose(model[0].bias.grad.numpy(), want)


def test_dropout_inplace_zeroes_and_scales_its_input_while_training():
    drop = Dropout(0.25, True)
    x = t(np.ones((200, 50)))
    assert drop(x).is_same(x)
    np.testing.assert_allclose(np.unique(x.numpy()), [0.0, 1 / 0.75])
    assert abs((x.numpy() == 0).mean() - 0.25) < 0.03
    y = t([1.0, 2.0]).requires_grad_()
    assert drop.eval()(y).is_same(y)  # eval: the input itself, requiring grad or not


@pytest.mark.parametrize("cell, text", [
    (ReLU(), "ReLU()"), (ReLU(True), "ReLU(inplace=True)"), (ReLU6(), "ReLU6()"),
    (ReLU6(True), "ReLU6(inplace=True)"), (SiLU(True), "SiLU(inplace=True)"),
    (LeakyReLU(0.2, True), "LeakyReLU(negative_slope=0.2, inplace=True)"),
    (LeakyReLU(), "LeakyReLU(negative_slope=0.01)"), (ELU(inplace=True), "ELU(alpha=1.0, "
                                                                         "inplace=True)"),
    (Hardtanh(-2, 2, True), "Hardtanh(min_val=-2.0, max_val=2.0, inplace=True)"),
    (Dropout(0.3, True), "Dropout(p=0.3, inplace=True)"), (Dropout(), "Dropout(p=0.5)"),
    (PReLU(3), "PReLU(num_parameters=3)"), (LogSoftmax(1), "LogSoftmax(dim=1)"),
])
def test_reprs(cell, text):
    assert repr(cell) == text


def test_relu6_is_a_hardtanh_from_0_to_6():
    assert isinstance(ReLU6(), Hardtanh)
    x = t([-1.0, 0.0, 3.0, 6.0, 7.5]).requires_grad_()
    out = ReLU6()(x)
    out.sum().backward()
    assert_close(out, [0.0, 0.0, 3.0, 6.0, 6.0])
    assert_close(x.grad, [0.0, 0.0, 1.0, 0.0, 0.0])  # PyTorch's: 0 at both ends


def test_new_activation_cells_match_closed_forms(rng):
    v = rng.uniform(-5, 5, size=(4, 6))
    x = t(v)
    assert_close(Mish()(x), v * np.tanh(np.log1p(np.exp(v))))
    assert_close(Hardswish()(x), v * np.clip(v + 3, 0, 6) / 6)
    assert_close(Hardsigmoid()(x), np.clip(v / 6 + 0.5, 0, 1))
    shifted = v - v.max(1, keepdims=True)
    assert_close(LogSoftmax(1)(x), shifted - np.log(np.exp(shifted).sum(1, keepdims=True)))
    assert_close(LogSoftmax()(x), LogSoftmax(-1)(x).numpy())
    assert not isinstance(LogSoftmax(), nn.Softmax)


def test_prelu_has_one_learnable_slope_or_one_per_channel(rng):
    one, per_channel = PReLU(), PReLU(3, init=0.1, dtype=kiln.float64)
    assert list(one.state_dict()) == ["weight"] and one.weight.requires_grad
    assert one.weight.shape == (1,) and one.weight.dtype == kiln.float32
    np.testing.assert_array_equal(one.weight.numpy(), [0.25])
    np.testing.assert_array_equal(per_channel.weight.numpy(), [0.1] * 3)
    v = rng.uniform(-2, 2, size=(2, 3, 4))
    v[0, 0, 0] = 0.0
    slopes = rng.uniform(0.1, 0.9, size=3)
    per_channel.load_state_dict({"weight": slopes})
    x = t(v).requires_grad_()
    out = per_channel(x)
    expected = np.where(v > 0, v, slopes[None, :, None] * v)
    assert_close(out, expected)
    upstream = rng.uniform(0.5, 2, size=v.shape)
    x_grad, w_grad = kiln.autograd.grad(out, [x, per_channel.weight], t(upstream))
    # PyTorch's gradients: the slope for x <= 0 (x = 0 included), x * upstream for the slope.
    assert_close(x_grad, np.where(v > 0, 1.0, slopes[None, :, None]) * upstream)
    assert_close(w_grad, np.where(v > 0, 0.0, v * upstream).sum((0, 2)))
    assert_close(one(t([-2.0, 3.0], kiln.float32)), [-0.5, 3.0], 1e-7)
    assert_close(F.prelu(t(-4.0), t([0.5])), -2.0)  # a 0-d input keeps its shape
    assert F.prelu(t(-4.0), t([0.5])).shape == ()


@pytest.mark.parametrize("input_shape, weight_shape, message", [
    ((2, 3, 4), (2,), r"expected weight of 1 element or \[3\] \(one per channel of input "
                      r"\[2, 3, 4\]\), got \[2\]"),
    ((4,), (4,), r"expected weight of 1 element or \[1\]"),
    ((2, 3), (1, 3), r"expected weight .*, got \[1, 3\]"),
])
def test_prelu_shape_errors(input_shape, weight_shape, message):
    with raises(kiln.ShapeError, match=f"prelu: {message}"):
        F.prelu(mint.ones(input_shape), mint.ones(weight_shape))


def test_prelu_argument_errors():
    with raises(kiln.KilnValueError, match="PReLU: num_parameters must be at least 1, got 0"):
        PReLU(0)
    with raises(kiln.KilnTypeError, match="PReLU: expected init to be a real number"):
        PReLU(1, "0.25")


@pytest.mark.parametrize("name, cls", [("relu6", ReLU6), ("PReLU", PReLU), ("mish", Mish),
                                       ("hardswish", Hardswish), ("LogSoftmax", LogSoftmax)])
def test_activation_cell_knows_the_new_names(name, cls):
    assert type(activation_cell(name)) is cls


# ------------------------------------------------------------------------------------------------
# Conv1d and ConvTranspose2d


def conv1d_reference(x, w, b, stride, padding, dilation, groups):
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding)))
    o, cg, k = w.shape
    length = (x.shape[2] - dilation * (k - 1) - 1) // stride + 1
    out = np.zeros((x.shape[0], o, length))
    og = o // groups
    for g in range(groups):
        for j in range(k):
            taps = x[:, g * cg:(g + 1) * cg, j * dilation:j * dilation + stride * length:stride]
            out[:, g * og:(g + 1) * og] += np.einsum("ncl,oc->nol", taps,
                                                     w[g * og:(g + 1) * og, :, j])
    return out + (0 if b is None else b[None, :, None])


@pytest.mark.parametrize("kwargs, stride, padding, dilation, groups", [
    (dict(kernel_size=3), 1, 0, 1, 1),
    (dict(kernel_size=(3,), stride=2, padding=(1,), groups=2, bias=False), 2, 1, 1, 2),
    (dict(kernel_size=2, dilation=3, padding=2), 1, 2, 3, 1),
])
def test_conv1d_matches_numpy_with_gradients(kwargs, stride, padding, dilation, groups, rng):
    conv = Conv1d(4, 6, dtype=kiln.float64, **kwargs)
    assert conv.weight.shape == (6, 4 // groups, conv.kernel_size[0])
    v = rng.standard_normal((2, 4, 9))
    w, b = conv.weight.numpy(), None if conv.bias is None else conv.bias.numpy()
    assert_close(conv(t(v)), conv1d_reference(v, w, b, stride, padding, dilation, groups))
    x = t(rng.standard_normal((1, 4, 6))).requires_grad_()
    assert gradcheck(lambda x, w: F.conv1d(x, w, None, stride, padding, dilation, groups),
                     [x, conv.weight])


def test_conv1d_padding_strings_and_modes(rng):
    v = rng.standard_normal((2, 3, 7))
    same = Conv1d(3, 2, 4, padding="same", dilation=1, dtype=kiln.float64)
    w, b = same.weight.numpy(), same.bias.numpy()
    # An even kernel: 3 zeros in all, the odd one after (PyTorch's rule).
    expected = conv1d_reference(np.pad(v, ((0, 0), (0, 0), (0, 1))), w, b, 1, 1, 1, 1)
    assert same(t(v)).shape == (2, 2, 7)
    assert_close(same(t(v)), expected)
    reflect = Conv1d(3, 2, 3, padding=2, padding_mode="reflect", dtype=kiln.float64)
    padded = np.pad(v, ((0, 0), (0, 0), (2, 2)), mode="reflect")
    assert_close(reflect(t(v)), conv1d_reference(padded, reflect.weight.numpy(),
                                                 reflect.bias.numpy(), 1, 0, 1, 1))
    valid = F.conv1d(t(v), t(w), None, 1, "valid")
    assert_close(valid, conv1d_reference(v, w, None, 1, 0, 1, 1))


@pytest.mark.parametrize("call, error, message", [
    (lambda x, w: F.conv1d(x[None], w), kiln.ShapeError,
     r"conv1d: expected input \[N, C_in, L\] or one sample \[C_in, L\]"),
    (lambda x, w: F.conv1d(x, w, groups=3), kiln.ShapeError, "divisible by groups = 3"),
    (lambda x, w: F.conv1d(x, w, stride=(1, 1)), kiln.KilnValueError,
     r"conv1d: expected stride to be an int or a sequence of one int, got 2 sizes \(1, 1\)"),
    (lambda x, w: F.conv1d(x, w, padding=-1), kiln.KilnValueError,
     "conv1d: expected padding >= 0, got -1"),
    (lambda x, w: F.conv1d(x, w, dilation=[0]), kiln.KilnValueError,
     r"conv1d: expected dilation >= 1, got \[0\]"),
    (lambda x, w: F.conv1d(x, w, padding="full"), kiln.KilnValueError,
     "conv1d: expected padding 'same', 'valid', an int or a sequence of one int, got 'full'"),
    (lambda x, w: Conv1d(3, 2, (3, 3)), kiln.KilnValueError,
     r"Conv1d: kernel_size must be an int or a tuple of one int, got \(3, 3\)"),
    (lambda x, w: Conv1d(3, 2, 3, stride=2, padding="same"), kiln.KilnValueError,
     r"Conv1d: padding='same' needs stride 1 .*got stride \(2,\)"),
])
def test_conv1d_errors(call, error, message):
    with raises(error, match=message):
        call(mint.ones(2, 3, 7), mint.ones(2, 3, 3))


@pytest.mark.parametrize("stride, padding, output_padding, groups, dilation, bias", [
    (2, 1, 1, 2, 1, True),
    (1, 0, 0, 1, 2, False),
    (3, 2, 2, 1, 1, True),
])
def test_conv_transpose2d_cell_matches_numpy_with_gradients(stride, padding, output_padding,
                                                            groups, dilation, bias, rng):
    conv = ConvTranspose2d(4, 6, 3, stride, padding, output_padding, groups, bias, dilation,
                           dtype=kiln.float64)
    assert conv.weight.shape == (4, 6 // groups, 3, 3)
    assert list(conv.state_dict()) == (["weight", "bias"] if bias else ["weight"])
    v = rng.standard_normal((2, 4, 3, 4))
    b = conv.bias.numpy() if bias else None
    expected = conv_transpose2d_reference(v, conv.weight.numpy(), b, stride, padding,
                                          output_padding, groups, dilation)
    assert_close(conv(t(v)), expected)
    assert_close(F.conv_transpose2d(t(v), conv.weight, conv.bias, stride, padding,
                                    output_padding, groups, dilation), expected)
    x = t(rng.standard_normal((1, 4, 2, 2))).requires_grad_()
    assert gradcheck(lambda x, w: F.conv_transpose2d(x, w, None, stride, padding,
                                                     output_padding, groups, dilation),
                     [x, conv.weight])


def test_conv_transpose2d_initialises_with_pytorchs_fan_of_its_weight():
    # fan_in = weight.shape[1] * kH * kW = C_out / groups * 9 = 72, not C_in / groups * 9 = 576:
    # both the weight's kaiming_uniform_(a=sqrt(5)) bound and the bias's are 1 / sqrt(72).
    kiln.manual_seed(0)
    conv = ConvTranspose2d(64, 16, 3, groups=2)
    bound = 1 / math.sqrt(72)
    for values in (conv.weight.numpy(), conv.bias.numpy()):
        assert np.abs(values).max() <= bound
    assert np.abs(conv.weight.numpy()).max() > 0.95 * bound


def test_conv_transpose2d_output_size_picks_the_output_padding(rng):
    conv = ConvTranspose2d(2, 3, 3, stride=2, padding=1, dtype=kiln.float64)
    v = rng.standard_normal((1, 2, 4, 5))
    smallest = conv_transpose2d_reference(v, conv.weight.numpy(), conv.bias.numpy(), 2, 1, 0, 1,
                                          1)
    assert_close(conv(t(v)), smallest)
    for size, extra in (([8, 9], (1, 0)), ((1, 3, 7, 10), (0, 1))):
        out = conv(t(v), output_size=size)
        assert out.shape == (1, 3, 7 + extra[0], 9 + extra[1])
        assert_close(F.conv_transpose2d(t(v), conv.weight, conv.bias, 2, 1, extra), out.numpy())
        assert_close(out[:, :, :7, :9], smallest)  # output_padding only adds rows or columns
    with raises(kiln.KilnValueError, match=r"ConvTranspose2d: requested an output size of "
                                           r"\[9, 9\], but valid sizes range from \[7, 9\] to "
                                           r"\[8, 10\] \(for an input of \[4, 5\]\)"):
        conv(t(v), output_size=[9, 9])
    with raises(kiln.KilnValueError, match=r"output_size must be \[H_out, W_out\] or"):
        conv(t(v), output_size=[7])


@pytest.mark.parametrize("kwargs, message", [
    (dict(padding_mode="reflect"), "ConvTranspose2d: only padding_mode 'zeros' is supported"),
    (dict(padding="same"), "ConvTranspose2d: padding must be an int or a pair of ints, got "
                           "'same'"),
    (dict(output_padding=2, stride=2), r"ConvTranspose2d: output_padding must be >= 0 and "
                                       r"below the stride or the dilation, got output_padding "
                                       r"\(2, 2\) with stride \(2, 2\)"),
    (dict(groups=4), r"ConvTranspose2d: in_channels \(4\) and out_channels \(6\) must be "
                     r"divisible by groups \(4\)"),
])
def test_conv_transpose2d_argument_errors(kwargs, message):
    with raises(kiln.KilnValueError, match=message):
        ConvTranspose2d(4, 6, 3, **kwargs)


def conv_transpose1d_reference(x, w, b, stride, padding, output_padding, groups, dilation):
    n, c_in, length = x.shape
    _, c_out_g, k = w.shape
    out_len = (length - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1
    full = np.zeros((n, c_out_g * groups, out_len + 2 * padding))
    per_group = c_in // groups
    for ci in range(c_in):
        g = ci // per_group
        for i in range(length):
            for p in range(k):
                full[:, g * c_out_g:(g + 1) * c_out_g, i * stride + p * dilation] += (
                    x[:, ci, i, None] * w[ci, :, p])
    out = full[:, :, padding:padding + out_len]
    return out + (0 if b is None else b[None, :, None])


@pytest.mark.parametrize("stride, padding, output_padding, groups, dilation, bias", [
    (2, 1, 1, 2, 1, True),
    (1, 0, 0, 1, 2, False),
    (3, 2, 2, 1, 1, True),
])
def test_conv_transpose1d_cell_matches_numpy_with_gradients(stride, padding, output_padding,
                                                            groups, dilation, bias, rng):
    conv = ConvTranspose1d(4, 6, 3, stride, padding, output_padding, groups, bias, dilation,
                           dtype=kiln.float64)
    assert conv.weight.shape == (4, 6 // groups, 3)
    assert list(conv.state_dict()) == (["weight", "bias"] if bias else ["weight"])
    v = rng.standard_normal((2, 4, 5))
    b = conv.bias.numpy() if bias else None
    expected = conv_transpose1d_reference(v, conv.weight.numpy(), b, stride, padding,
                                          output_padding, groups, dilation)
    assert_close(conv(t(v)), expected)
    assert_close(conv(t(v[0])), expected[0])  # one sample [C_in, L]
    assert_close(F.conv_transpose1d(t(v), conv.weight, conv.bias, (stride,), padding,
                                    [output_padding], groups, dilation), expected)
    x = t(rng.standard_normal((1, 4, 3))).requires_grad_()
    assert gradcheck(lambda x, w: F.conv_transpose1d(x, w, None, stride, padding,
                                                     output_padding, groups, dilation),
                     [x, conv.weight])


def test_conv_transpose1d_output_size_picks_the_output_padding(rng):
    conv = ConvTranspose1d(2, 3, 3, stride=2, padding=1, dtype=kiln.float64)
    v = rng.standard_normal((1, 2, 4))
    assert conv(t(v)).shape == (1, 3, 7)
    for size in ([8], (1, 3, 8)):
        out = conv(t(v), output_size=size)
        assert out.shape == (1, 3, 8)
        assert_close(out, conv_transpose1d_reference(v, conv.weight.numpy(), conv.bias.numpy(),
                                                     2, 1, 1, 1, 1))
    with raises(kiln.KilnValueError, match=r"ConvTranspose1d: requested an output size of "
                                           r"\[9\], but valid sizes range from \[7\] to \[8\]"):
        conv(t(v), output_size=[9])
    with raises(kiln.KilnValueError, match=r"output_size must be \[L_out\] or"):
        conv(t(v), output_size=[7, 7])


@pytest.mark.parametrize("call, error, message", [
    (lambda: ConvTranspose1d(4, 6, 3, padding="same"), kiln.KilnValueError,
     "ConvTranspose1d: padding must be an int or a tuple of one int, got 'same'"),
    (lambda: ConvTranspose1d(4, 6, 3, stride=2, output_padding=2), kiln.KilnValueError,
     r"ConvTranspose1d: output_padding must be >= 0 and below the stride or the dilation"),
    (lambda: ConvTranspose1d(4, 6, (3, 3)), kiln.KilnValueError,
     r"ConvTranspose1d: kernel_size must be an int or a tuple of one int"),
    (lambda: F.conv_transpose1d(mint.ones(1, 4, 5), mint.ones(4, 6, 3, 3)), kiln.ShapeError,
     r"conv_transpose1d: expected weight \[C_in, C_out / groups, k\], got \[4, 6, 3, 3\]"),
    (lambda: F.conv_transpose1d(mint.ones(1, 4, 5), mint.ones(4, 6, 3), stride=0),
     kiln.KilnValueError, "conv_transpose1d: .*stride"),
    (lambda: F.conv_transpose1d(mint.ones(4, 5, 5, 5), mint.ones(4, 6, 3)), kiln.ShapeError,
     r"conv_transpose1d: expected input \[N, C_in, L\]"),
])
def test_conv_transpose1d_errors(call, error, message):
    with raises(error, match=message):
        call()


def test_conv_transpose1d_matches_torch(torch, rng):
    theirs = torch.nn.ConvTranspose1d(4, 6, 5, 3, 2, 1, 2, True, 2).double()
    ours = ConvTranspose1d(4, 6, 5, 3, 2, 1, 2, True, 2, dtype=kiln.float64)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    check_cell_against_torch(torch, ours, theirs, rng.standard_normal((2, 4, 7)), rng)


# ------------------------------------------------------------------------------------------------
# interpolate and Upsample


def source_matrix(in_size, out_size, mode, align_corners, scale, dtype, shortcuts=False):
    """[out_size, in_size]: the weight of each input in each output along one axis, by PyTorch's
    coordinate rules (aten/src/ATen/native/UpSample.h) computed in ``dtype`` (np.float32 or
    np.float64) as its kernels compute them; ``scale`` is the scale_factor used (or None), and
    ``shortcuts`` its 2-d "nearest" kernel's: input i for an output of the input's size, i // 2
    for twice it."""
    rows = np.arange(out_size)
    matrix = np.zeros((out_size, in_size))
    i = rows.astype(dtype)
    if mode == "nearest":
        step = dtype(1.0 / scale) if scale else dtype(in_size) / dtype(out_size)
        index = np.minimum(np.floor(i * step).astype(int), in_size - 1)
        if shortcuts and out_size in (in_size, 2 * in_size):
            index = rows // (out_size // in_size)
        matrix[rows, index] = 1
        return matrix
    if out_size == in_size:
        return np.eye(in_size)
    if align_corners:
        step = dtype(in_size - 1) / dtype(out_size - 1) if out_size > 1 else dtype(0)
        source = i * step
    else:
        step = dtype(1.0 / scale) if scale else dtype(in_size) / dtype(out_size)
        source = np.maximum(step * (i + dtype(0.5)) - dtype(0.5), dtype(0))
    low = np.minimum(np.floor(source), in_size - 1)
    weight = np.clip(source - low, 0, 1).astype(np.float64)
    low = low.astype(int)
    np.add.at(matrix, (rows, low), 1 - weight)
    np.add.at(matrix, (rows, np.minimum(low + 1, in_size - 1)), weight)
    return matrix


# (input's spatial shape, size, scale_factor, recompute_scale_factor)
RESIZES = [
    ((3, 4), (5, 7), None, None),
    ((4, 5), (2, 3), None, None),
    ((3, 4), 6, None, None),
    ((4, 4), (1, 1), None, None),
    ((3, 4), None, 2, None),
    ((5, 3), None, (1.7, 0.6), None),
    ((5, 4), None, 2.5, True),
    ((5, 6), None, (1.1, 2.05), False),  # sizes 5 (the input's) and 12 (twice it)
    ((7,), 11, None, None),
    ((7,), None, 0.45, None),
    ((6,), None, 2.05, None),  # size 12, twice the input's: no shortcut in PyTorch's 1-d kernel
]
MODES = [("nearest", None), ("bilinear", False), ("bilinear", True), ("bilinear", None)]


def resize_cases():
    for spatial, size, scale, recompute in RESIZES:
        for mode, align in MODES:
            if len(spatial) == 2 or mode == "nearest":
                yield spatial, size, scale, recompute, mode, align


RESIZE_CASES = list(resize_cases())


def resize_id(case):
    spatial, size, scale, recompute, mode, align = case
    return (f"{'x'.join(map(str, spatial))}-{mode}-align{align}-size{size}-scale{scale}"
            f"-recompute{recompute}")


def expected_resize(v, size, scale, recompute, mode, align, dtype):
    """(out, the matrices per spatial axis) of interpolating ``v`` in NumPy."""
    spatial = v.shape[2:]
    sizes = size if isinstance(size, tuple) else (size,) * len(spatial)
    scales = scale if isinstance(scale, tuple) else (scale,) * len(spatial)
    if scale is not None:
        sizes = tuple(math.floor(n * f) for n, f in zip(spatial, scales))
        if recompute:
            scales = (None,) * len(spatial)
    if mode == "nearest" and v.ndim == 4:  # PyTorch's 2-d kernel: float32, with shortcuts
        dtype, shortcuts = np.float32, True
    else:
        shortcuts = False
    matrices = [source_matrix(n, o, mode, align, f, dtype, shortcuts)
                for n, o, f in zip(spatial, sizes, scales)]
    return apply_axes(v, matrices), matrices


def apply_axes(v, matrices, transpose=False):
    for axis, m in enumerate(matrices, 2):
        v = np.moveaxis(np.tensordot(m.T if transpose else m, v, axes=(1, axis)), 0, axis)
    return v


@pytest.mark.parametrize("dtype, np_dtype, tolerance", [(kiln.float64, np.float64, 1e-12),
                                                        (kiln.float32, np.float32, 1e-5)],
                         ids=["float64", "float32"])
@pytest.mark.parametrize("case", RESIZE_CASES, ids=resize_id)
def test_interpolate_matches_numpy_with_its_gradient(case, dtype, np_dtype, tolerance, rng):
    spatial, size, scale, recompute, mode, align = case
    v = rng.uniform(-2, 2, size=(2, 3) + spatial).astype(np_dtype)
    x = t(v, dtype).requires_grad_()
    out = F.interpolate(x, size, scale, mode, align, recompute)
    expected, matrices = expected_resize(v.astype(np.float64), size, scale, recompute, mode,
                                         align, np_dtype)
    assert out.dtype == dtype and out.shape == expected.shape
    assert_close(out, expected, tolerance, tolerance)
    upstream = rng.uniform(0.5, 2, size=expected.shape)
    (grad,) = kiln.autograd.grad(out, x, t(upstream, dtype))
    assert_close(grad, apply_axes(upstream, matrices, transpose=True), tolerance, tolerance)


def test_interpolate_gives_pytorchs_documented_examples():
    x = t([[[[1.0, 2.0], [3.0, 4.0]]]])
    np.testing.assert_array_equal(F.interpolate(x, scale_factor=2).numpy()[0, 0],
                                  [[1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4]])
    assert_close(F.interpolate(x, scale_factor=2, mode="bilinear")[0, 0],
                 [[1.0, 1.25, 1.75, 2.0], [1.5, 1.75, 2.25, 2.5], [2.5, 2.75, 3.25, 3.5],
                  [3.0, 3.25, 3.75, 4.0]])
    third = 1 / 3
    assert_close(F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True)[0, 0],
                 [[1.0, 1 + third, 2 - third, 2.0], [1 + 2 * third, 2.0, 2 + third, 3 - third],
                  [2 + third, 3 - third, 3.0, 3 + third], [3.0, 3 + third, 4 - third, 4.0]])


@pytest.mark.parametrize("dtype", [kiln.int64, kiln.uint8, kiln.bool_], ids=lambda d: d.name)
def test_nearest_resizes_any_dtype(dtype):
    x = t([[[0, 1, 1, 0]]], dtype)
    out = F.interpolate(x, size=6)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out.numpy(), t([[[0, 0, 1, 1, 1, 0]]], dtype).numpy())


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16], ids=lambda d: d.name)
def test_bilinear_of_16_bit_floats_is_computed_in_float32(dtype, rng):
    v = random_array((1, 2, 3, 4), dtype, rng).astype(np.float64)
    out = F.interpolate(t(v, dtype), size=(5, 6), mode="bilinear")
    wide = F.interpolate(t(v, kiln.float32), size=(5, 6), mode="bilinear")
    assert out.dtype == dtype
    np.testing.assert_array_equal(out.numpy(), wide.to(dtype).numpy())


def test_interpolate_traces_under_jit(rng):
    x = t(rng.standard_normal((2, 3, 4, 5)), kiln.float32)
    resize = kiln.jit(lambda x: F.interpolate(x, scale_factor=(1.5, 0.8), mode="bilinear"))
    np.testing.assert_array_equal(resize(x).numpy(), F.interpolate(
        x, scale_factor=(1.5, 0.8), mode="bilinear").numpy())


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(size=4, mode="cubic"), kiln.KilnValueError,
     "interpolate: expected mode 'nearest', 'nearest-exact', 'linear', 'bilinear', 'bicubic', "
     "'trilinear' or 'area', got 'cubic'"),
    (dict(size=4, mode="linear"), kiln.ShapeError,
     r"expected input \[N, C, L\] with no empty spatial dimension for mode 'linear'"),
    (dict(size=4, scale_factor=2), kiln.KilnValueError,
     "interpolate: expected exactly one of size and scale_factor, got both"),
    (dict(), kiln.KilnValueError, "expected exactly one of size and scale_factor, got neither"),
    (dict(size=4, align_corners=True), kiln.KilnValueError,
     "interpolate: align_corners applies to modes 'linear', 'bilinear', 'bicubic' and "
     "'trilinear' only"),
    (dict(size=4, mode="bilinear", align_corners=1), kiln.KilnTypeError,
     "interpolate: align_corners must be a bool, got int 1"),
    (dict(size=4, recompute_scale_factor=True), kiln.KilnValueError,
     "recompute_scale_factor is not meaningful with an explicit size"),
    (dict(size=4, antialias=True), kiln.KilnValueError,
     "antialias=True applies to modes 'bilinear' and 'bicubic' only, got mode 'nearest'"),
    (dict(size=(4, 4, 4)), kiln.ShapeError,
     r"interpolate: expected size as one value or 2 \(one per spatial dimension of the input\), "
     r"got \(4, 4, 4\)"),
    (dict(size=0), kiln.KilnValueError, "interpolate: size must be at least 1, got 0"),
    (dict(size=(2, 2.5)), kiln.KilnTypeError, r"interpolate: size\[1\] must be an int"),
    (dict(scale_factor=0.1), kiln.KilnValueError,
     r"interpolate: scale_factor 0.1 gives input \[1, 2, 3, 4\] an empty output \[0, 0\]"),
    (dict(scale_factor=-2), kiln.KilnValueError,
     "expected scale_factor to be a finite number > 0, got -2"),
    (dict(scale_factor=(2, math.nan)), kiln.KilnValueError, r"scale_factor\[1\] to be a finite"),
])
def test_interpolate_argument_errors(kwargs, error, message):
    with raises(error, match=message):
        F.interpolate(mint.ones(1, 2, 3, 4), **kwargs)


@pytest.mark.parametrize("shape, mode, error, message", [
    ((1, 2, 3), "bilinear", kiln.ShapeError,
     r"interpolate: expected input \[N, C, H, W\] with no empty spatial dimension for mode "
     r"'bilinear', got \[1, 2, 3\]"),
    ((2, 3), "nearest", kiln.ShapeError, r"expected input \[N, C, L\] or \[N, C, H, W\]"),
    ((1, 2, 0, 3), "nearest", kiln.ShapeError, r"got \[1, 2, 0, 3\]"),
    ((1, 1, 2, 2, 2), "bilinear", kiln.ShapeError,
     r"expected input \[N, C, H, W\] .* got \[1, 1, 2, 2, 2\]"),
    ((1, 1, 2, 2), "bilinear", kiln.DTypeError,
     "interpolate: expected a floating-point input, got int64"),
])
def test_interpolate_input_errors(shape, mode, error, message):
    dtype = kiln.int64 if error is kiln.DTypeError else kiln.float32
    with raises(error, match=message):
        F.interpolate(mint.ones(shape, dtype=dtype), size=2, mode=mode)
    with raises(kiln.KilnTypeError, match="interpolate: expected input to be a kiln.Tensor"):
        F.interpolate([1.0, 2.0], size=2)


def test_upsample_cells_apply_interpolate(rng):
    x = t(rng.standard_normal((1, 2, 3, 4)))
    for cell, kwargs in ((Upsample(scale_factor=2), dict(scale_factor=2.0)),
                         (Upsample((5, 3), mode="bilinear"), dict(size=(5, 3), mode="bilinear")),
                         (UpsamplingNearest2d(size=7), dict(size=7)),
                         (UpsamplingBilinear2d(scale_factor=(1.5, 2)),
                          dict(scale_factor=(1.5, 2.0), mode="bilinear", align_corners=True))):
        np.testing.assert_array_equal(cell(x).numpy(), F.interpolate(x, **kwargs).numpy())
    assert repr(Upsample(scale_factor=2)) == "Upsample(scale_factor=2.0, mode='nearest')"
    assert (repr(UpsamplingBilinear2d(size=(3, 4)))
            == "UpsamplingBilinear2d(size=(3, 4), mode='bilinear')")
    assert UpsamplingBilinear2d(size=3).align_corners is True
    assert list(Upsample(size=2).state_dict()) == []


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(scale_factor=2, mode="lanczos"), kiln.KilnNotImplementedError,
     "Upsample: mode 'lanczos' is not supported"),
    (dict(), kiln.KilnValueError, "Upsample: expected exactly one of size and scale_factor"),
    (dict(size=2, align_corners=False), kiln.KilnValueError,
     "Upsample: align_corners applies to modes 'linear', 'bilinear', 'bicubic' and "
     "'trilinear' only; expected None with mode 'nearest', got False"),
    (dict(scale_factor="2"), kiln.KilnTypeError,
     "Upsample: expected scale_factor to be a real number, got str '2'"),
])
def test_upsample_checks_its_arguments_at_construction(kwargs, error, message):
    with raises(error, match=message):
        Upsample(**kwargs)


# ------------------------------------------------------------------------------------------------
# Against PyTorch


def torch_resize_gradient_is_consistent(spatial, size, scale, recompute, mode):
    """False where PyTorch's 3-d "nearest" backward breaks from its forward: a scale_factor used
    as it is whose size is the input's or twice it (the backward takes the 2-d shortcuts)."""
    if mode != "nearest" or len(spatial) != 1 or scale is None or recompute:
        return True
    return math.floor(spatial[0] * scale) not in (spatial[0], 2 * spatial[0])


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("case", RESIZE_CASES, ids=resize_id)
def test_interpolate_matches_torch(torch, case, dtype, rng):
    spatial, size, scale, recompute, mode, align = case
    v = random_array((2, 3) + spatial, dtype, rng)
    x = t(v, dtype).requires_grad_()
    tx = torch_twin(torch, v, dtype)
    out = F.interpolate(x, size, scale, mode, align, recompute)
    want = torch.nn.functional.interpolate(tx, size, scale, mode, align, recompute)
    assert out.dtype == dtype and out.shape == tuple(want.shape)
    check_torch(out, want, dtype, "value", scale_atol=True)
    if not torch_resize_gradient_is_consistent(spatial, size, scale, recompute, mode):
        return
    upstream = random_array(out.shape, dtype, rng, 0.5, 2.0)
    (grad,) = kiln.autograd.grad(out, x, t(upstream, dtype))
    (expected,) = torch.autograd.grad(want, tx, torch_twin(torch, upstream, dtype, False))
    check_torch(grad, expected, dtype, "gradient", scale_atol=True)


@pytest.mark.parametrize("kwargs", [
    dict(stride=2, padding=1, output_padding=1, groups=2),
    dict(kernel_size=(2, 3), stride=(2, 1), padding=(0, 1), dilation=2, bias=False),
    dict(stride=3, output_padding=(2, 0), dilation=(1, 3)),
])
def test_conv_transpose2d_with_torchs_weights_matches_torch(torch, kwargs, rng):
    args = dict(in_channels=4, out_channels=6, kernel_size=3)
    args.update(kwargs)
    theirs = torch.nn.ConvTranspose2d(**args).double()
    ours = ConvTranspose2d(**args, dtype=kiln.float64)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert all(ours.state_dict()[k].shape == tuple(v.shape)
               for k, v in theirs.state_dict().items())
    ours.load_state_dict(theirs.state_dict())
    x, tx = check_cell_against_torch(torch, ours, theirs, rng.standard_normal((2, 4, 4, 5)), rng)
    # The smallest output, one row more where the stride allows it.
    size = [d - extra for d, extra in zip(theirs(tx).shape[2:], ours.output_padding)]
    size[0] += ours.stride[0] - 1
    check_torch(ours(x, output_size=size), theirs(tx, output_size=size), kiln.float64,
                "output_size")
    assert repr(ConvTranspose2d(**args)).startswith("ConvTranspose2d(4, 6, kernel_size=")


def test_conv_transpose2d_initialises_as_torch(torch):
    ours, theirs = ConvTranspose2d(64, 16, 3, groups=2), torch.nn.ConvTranspose2d(64, 16, 3,
                                                                                   groups=2)
    fan_in, _ = torch.nn.init._calculate_fan_in_and_fan_out(theirs.weight)
    assert (fan_in, _) == kiln.nn.init.fan_in_and_fan_out(ours.weight)
    for mine, yours in zip(ours.parameters(), theirs.parameters()):
        bound = float(yours.detach().abs().max())
        assert 0.9 * bound < float(np.abs(mine.numpy()).max()) <= 1 / math.sqrt(fan_in)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("kwargs", [
    dict(stride=2, padding=1, groups=2),
    dict(kernel_size=4, padding="same", dilation=2, padding_mode="reflect"),
    dict(padding=2, padding_mode="circular", bias=False),
    dict(padding="valid", dilation=3),
])
def test_conv1d_with_torchs_weights_matches_torch(torch, kwargs, rng):
    args = dict(in_channels=4, out_channels=6, kernel_size=3)
    args.update(kwargs)
    theirs = torch.nn.Conv1d(**args).double()
    ours = Conv1d(**args, dtype=kiln.float64)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict(theirs.state_dict())
    check_cell_against_torch(torch, ours, theirs, rng.standard_normal((2, 4, 11)), rng)


@pytest.mark.parametrize("make, fn, args, make_torch", INPLACE, ids=INPLACE_IDS)
def test_inplace_cells_match_torchs(torch, make, fn, args, make_torch, rng):
    values = rng.uniform(-4, 4, size=(3, 5))
    x, tx = t(values, kiln.float32), torch.tensor(values, dtype=torch.float32)
    assert make()(x).is_same(x)
    assert make_torch(torch.nn)(tx) is tx
    check_torch(x, tx, kiln.float32, "in place")


@pytest.mark.parametrize("cell, make_torch", [
    (ReLU(True), lambda n: n.ReLU(True)), (ReLU6(True), lambda n: n.ReLU6(True)),
    (SiLU(True), lambda n: n.SiLU(True)), (Mish(True), lambda n: n.Mish(True)),
    (LeakyReLU(0.2, True), lambda n: n.LeakyReLU(0.2, True)),
    (ELU(1.0, True), lambda n: n.ELU(1.0, True)), (Dropout(0.3, True), lambda n: n.Dropout(0.3,
                                                                                          True)),
    (PReLU(3), lambda n: n.PReLU(3)), (LogSoftmax(1), lambda n: n.LogSoftmax(1)),
], ids=lambda v: type(v).__name__ if isinstance(v, kiln.nn.Cell) else "")
def test_reprs_match_torchs(torch, cell, make_torch):
    assert repr(cell) == repr(make_torch(torch.nn))


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64], ids=lambda d: d.name)
@pytest.mark.parametrize("make, make_torch, shape", [
    (ReLU6, lambda n: n.ReLU6(), (3, 5)), (Mish, lambda n: n.Mish(), (3, 5)),
    (Hardswish, lambda n: n.Hardswish(), (3, 5)), (Hardsigmoid, lambda n: n.Hardsigmoid(), (3, 5)),
    (lambda: LogSoftmax(0), lambda n: n.LogSoftmax(0), (3, 5)),
    (lambda: PReLU(4, 0.3), lambda n: n.PReLU(4, 0.3), (2, 4, 3)),
    (PReLU, lambda n: n.PReLU(), (5,)),
], ids=["ReLU6", "Mish", "Hardswish", "Hardsigmoid", "LogSoftmax", "PReLU-channels", "PReLU-1d"])
def test_new_activation_cells_match_torch_with_gradients(torch, make, make_torch, shape, dtype,
                                                         rng):
    ours, theirs = make().to(dtype), make_torch(torch.nn).to(getattr(torch, dtype.name))
    v = random_array(shape, dtype, rng, -5.0, 5.0)
    v.flat[0] = 0.0  # PyTorch's gradients at the kink
    x, tx = t(v, dtype).requires_grad_(), torch_twin(torch, v, dtype)
    out, want = ours(x), theirs(tx)
    check_torch(out, want, dtype, "value")
    upstream = random_array(shape, dtype, rng, 0.5, 2.0)
    grads = kiln.autograd.grad(out, [x] + list(ours.parameters()), t(upstream, dtype))
    wants = torch.autograd.grad(want, [tx] + list(theirs.parameters()),
                                torch_twin(torch, upstream, dtype, False))
    # PyTorch's hardsigmoid backward multiplies by 1.0f / 6.0f, a float32 constant, in float64.
    precision = kiln.float32 if isinstance(ours, Hardsigmoid) else dtype
    for grad, expected in zip(grads, wants):
        check_torch(grad, expected, precision, "gradient", scale_atol=True)
