"""PyTorch's padding strings for 2-d convolutions: kiln.mint._composite.conv2d and kiln.nn.Conv2d
with padding "same" / "valid" (and "same" in every padding_mode), against a NumPy reference and
against PyTorch (values and gradients), under kiln.jit(dynamic=True), and their errors."""

import numpy as np
import pytest

import kiln
from conftest import close, raises
from kiln import nn
from kiln.mint import _composite

MODES = {"zeros": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}

# (kernel_size, dilation, groups): odd and even kernels, dilations making odd and even totals.
CASES = [((3, 3), (1, 1), 1), ((2, 4), (1, 1), 1), ((4, 3), (2, 3), 2), ((1, 1), (1, 1), 1),
         ((5, 2), (1, 2), 4)]
CASE_IDS = ["3x3", "even", "dilated-groups", "1x1", "odd-and-even-dilated"]


def t(array, dtype=None):
    return kiln.tensor(np.asarray(array), dtype=dtype)


def same_pads(kernel_size, dilation):
    """PyTorch's padding="same", worked out here: (before, after) per spatial dimension."""
    pads = []
    for k, d in zip(kernel_size, dilation):
        total = d * (k - 1)
        pads.append((total // 2, total - total // 2))
    return pads


def conv_reference(x, w, b=None, dilation=(1, 1), groups=1, pads=((0, 0), (0, 0)),
                   mode="zeros"):
    """x padded by ``pads`` in ``mode`` (NumPy's name for it in MODES), then a convolution of
    stride 1 without padding, in float64."""
    x = np.pad(np.asarray(x, np.float64), [(0, 0), (0, 0), *pads], mode=MODES[mode])
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    dh, dw = dilation
    oh, ow = h - dh * (kh - 1), wd - dw * (kw - 1)
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xs, ws = x[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dh:i * dh + oh, j * dw:j * dw + ow]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    return out if b is None else out + np.asarray(b).reshape(1, -1, 1, 1)


# ---------------------------------------------------------------------------------------------
# kiln.mint's conv2d against NumPy


@pytest.mark.parametrize("size", [(7, 8), (4, 4)], ids=["7x8", "4x4"])
@pytest.mark.parametrize("kernel_size, dilation, groups", CASES, ids=CASE_IDS)
def test_mint_conv2d_same_keeps_the_size(rng, kernel_size, dilation, groups, size):
    x = rng.standard_normal((2, 4) + size)
    w = rng.standard_normal((4, 4 // groups) + kernel_size)
    b = rng.standard_normal(4)
    y = _composite.conv2d(t(x), t(w), t(b), 1, "same", dilation, groups)
    assert y.shape == (2, 4) + size
    close(y, conv_reference(x, w, b, dilation, groups, same_pads(kernel_size, dilation)),
          rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kernel_size, dilation, groups", CASES, ids=CASE_IDS)
def test_mint_conv2d_valid_pads_nothing(rng, kernel_size, dilation, groups):
    x = rng.standard_normal((2, 4, 9, 8))
    w = rng.standard_normal((4, 4 // groups) + kernel_size)
    close(_composite.conv2d(t(x), t(w), None, (1, 1), "valid", dilation, groups),
          conv_reference(x, w, None, dilation, groups), rtol=1e-12, atol=1e-12)
    strided = _composite.conv2d(t(x), t(w), None, 2, "valid", dilation, groups)  # any stride
    close(strided, conv_reference(x, w, None, dilation, groups)[:, :, ::2, ::2], rtol=1e-12,
          atol=1e-12)


def test_mint_conv2d_with_a_numeric_padding_is_the_op(rng):
    x = t(rng.standard_normal((1, 2, 6, 5)), kiln.float32)
    w = t(rng.standard_normal((3, 2, 3, 2)), kiln.float32)
    for padding in (0, 2, (1, 0), [0, 3]):
        np.testing.assert_array_equal(
            _composite.conv2d(x, w, None, (2, 1), padding, 1).numpy(),
            kiln._C.mint.conv2d(x, w, None, (2, 1), padding, 1).numpy())


def test_mint_conv2d_same_takes_numpy_arrays_and_keeps_the_dtype(rng):
    x = rng.standard_normal((1, 2, 5, 6)).astype(np.float32)
    w = rng.standard_normal((3, 2, 2, 3)).astype(np.float32)
    y = _composite.conv2d(x, w, padding="same")
    assert y.dtype == kiln.float32 and y.shape == (1, 3, 5, 6)
    close(y, conv_reference(x, w, pads=same_pads((2, 3), (1, 1))), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
def test_mint_conv2d_same_gradients_against_numpy(rng, dtype):
    # The convolution is linear in x and in w, so the gradients' dot products with random
    # directions dx and dw are the loss of the convolution of dx (of dw): a check through the
    # NumPy reference, without writing its transposes out.
    x = rng.standard_normal((2, 2, 5, 4))
    w = rng.standard_normal((3, 2, 2, 3))
    cot = rng.standard_normal((2, 3, 5, 4))
    pads = same_pads((2, 3), (1, 1))
    x_grad, w_grad = kiln.grad(
        lambda x, w: (_composite.conv2d(x, w, padding="same") * t(cot, dtype)).sum(),
        (0, 1))(t(x, dtype), t(w, dtype))
    dx, dw = rng.standard_normal(x.shape), rng.standard_normal(w.shape)
    tolerance = 1e-4 if dtype == kiln.float32 else 1e-10
    np.testing.assert_allclose((x_grad.numpy() * dx).sum(),
                               (conv_reference(dx, w, pads=pads) * cot).sum(), rtol=tolerance)
    np.testing.assert_allclose((w_grad.numpy() * dw).sum(),
                               (conv_reference(x, dw, pads=pads) * cot).sum(), rtol=tolerance)


# ---------------------------------------------------------------------------------------------
# kiln.nn.Conv2d against NumPy


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("kernel_size, dilation", [(3, 1), ((2, 3), (2, 1)), (4, 1)],
                         ids=["3x3", "even-dilated", "4x4"])
def test_conv2d_cell_same_in_every_padding_mode(rng, mode, kernel_size, dilation):
    conv = nn.Conv2d(3, 4, kernel_size, padding="same", dilation=dilation, padding_mode=mode,
                     dtype=kiln.float64)
    assert conv.padding == "same"
    x = rng.standard_normal((2, 3, 6, 7))
    y = conv(t(x))
    assert y.shape == (2, 4, 6, 7)
    pads = same_pads(conv.kernel_size, conv.dilation)
    close(y, conv_reference(x, conv.weight.numpy(), conv.bias.numpy(), conv.dilation, 1, pads,
                            mode), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", list(MODES))
def test_conv2d_cell_valid(rng, mode):
    conv = nn.Conv2d(2, 3, (3, 2), stride=(2, 1), padding="valid", padding_mode=mode,
                     dtype=kiln.float64)
    x = rng.standard_normal((2, 2, 7, 5))
    want = conv_reference(x, conv.weight.numpy(), conv.bias.numpy())[:, :, ::2]
    close(conv(t(x)), want, rtol=1e-12, atol=1e-12)
    assert "padding=valid" in repr(conv)


def test_conv2d_cell_same_repr_and_state_dict():
    conv = nn.Conv2d(2, 3, 4, padding="same", padding_mode="reflect")
    assert repr(conv) == ("Conv2d(2, 3, kernel_size=(4, 4), stride=(1, 1), padding=same, "
                          "dilation=(1, 1), groups=1, bias=True, padding_mode='reflect')")
    assert list(conv.state_dict()) == ["weight", "bias"]


def test_conv2d_same_under_a_dynamic_jit(rng):
    # Nothing in "same" depends on the batch: the padding comes from the kernel.
    conv = nn.Conv2d(2, 3, (2, 3), padding="same")
    traced = []

    def loss(x):
        return (conv(x) ** 2).sum()

    @kiln.jit(dynamic=True)
    def step(x):
        traced.append(x.shape[0])
        return conv(x), kiln.grad(loss)(x)

    for batch in (2, 3, 5, 8):
        x = t(rng.standard_normal((batch, 2, 5, 6)), kiln.float32)
        y, x_grad = step(x)
        close(y, conv(x).numpy(), rtol=1e-5, atol=1e-5)
        close(x_grad, kiln.grad(loss)(x).numpy(), rtol=1e-5, atol=1e-5)
    assert traced == [2, 3, 5]


# ---------------------------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize("call, error, message", [
    (lambda x, w: _composite.conv2d(x, w, stride=2, padding="same"), kiln.KilnValueError,
     r"conv2d: padding='same' needs stride 1 \(the output could not keep the input's size\), "
     r"got stride 2"),
    (lambda x, w: _composite.conv2d(x, w, stride=(1, 2), padding="same"), kiln.KilnValueError,
     r"needs stride 1"),
    (lambda x, w: _composite.conv2d(x, w, padding="full"), kiln.KilnValueError,
     r"conv2d: expected padding 'same', 'valid', an int or a pair of ints, got 'full'"),
    (lambda x, w: _composite.conv2d(x, w, padding="SAME"), kiln.KilnValueError,
     r"got 'SAME'"),
    (lambda x, w: _composite.conv2d(x, w, stride=1.0, padding="same"), kiln.KilnTypeError,
     r"conv2d: expected stride to be an int or a pair of ints, got float 1.0"),
    (lambda x, w: _composite.conv2d(x, w, dilation=(1, 1, 1), padding="same"),
     kiln.KilnValueError, r"conv2d: expected dilation of two integers >= 1, got \(1, 1, 1\)"),
    (lambda x, w: _composite.conv2d(x, w, dilation=0, padding="same"), kiln.KilnValueError,
     r"expected dilation of two integers >= 1, got 0"),
    (lambda x, w: _composite.conv2d(x, 1.0, padding="same"), kiln.KilnTypeError,
     r"conv2d: expected weight to be a kiln.Tensor or an array, got float"),
    (lambda x, w: _composite.conv2d(x, w[0], padding="same"), kiln.ShapeError,
     r"conv2d: expected weight of shape \[out_channels, in_channels / groups, kH, kW\], got "
     r"\[2, 3, 3\]"),
], ids=["stride 2", "stride pair", "unknown string", "upper case", "float stride",
        "three dilations", "zero dilation", "number weight", "3-d weight"])
def test_mint_conv2d_padding_errors(call, error, message):
    x, w = kiln.mint.ones((1, 2, 5, 5)), kiln.mint.ones((3, 2, 3, 3))
    with raises(error, match=message):
        call(x, w)


@pytest.mark.parametrize("kwargs, message", [
    (dict(padding="same", stride=2), r"Conv2d: padding='same' needs stride 1 \(the output could "
                                     r"not keep the input's size\), got stride \(2, 2\)"),
    (dict(padding="same", stride=(1, 2)), r"got stride \(1, 2\)"),
    (dict(padding="full"), r"Conv2d: padding must be 'same', 'valid', an int or a pair of ints, "
                           r"got 'full'"),
], ids=["stride 2", "stride pair", "unknown string"])
def test_conv2d_cell_padding_errors(kwargs, message):
    with raises(kiln.KilnValueError, match=message):
        nn.Conv2d(2, 3, 3, **kwargs)


# ---------------------------------------------------------------------------------------------
# Against PyTorch


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths")
@pytest.mark.parametrize("padding", ["same", "valid"])
@pytest.mark.parametrize("kernel_size, dilation, groups", CASES, ids=CASE_IDS)
def test_mint_conv2d_matches_torch(torch, rng, kernel_size, dilation, groups, padding):
    x = rng.standard_normal((2, 4, 7, 8))
    w = rng.standard_normal((4, 4 // groups) + kernel_size)
    b = rng.standard_normal(4)
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    ty = torch.nn.functional.conv2d(tx, tw, tb, 1, padding, dilation, groups)
    cot = rng.standard_normal(tuple(ty.shape))
    (ty * torch.tensor(cot)).sum().backward()

    def conv(x, w, b):
        return _composite.conv2d(x, w, b, 1, padding, dilation, groups)

    close(conv(t(x), t(w), t(b)), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    grads = kiln.grad(lambda x, w, b: (conv(x, w, b) * t(cot)).sum(), (0, 1, 2))(t(x), t(w),
                                                                              t(b))
    for got, want in zip(grads, (tx.grad, tw.grad, tb.grad)):
        close(got, want.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("kernel_size, dilation", [(3, 1), ((2, 3), (2, 1)), (4, 1)],
                         ids=["3x3", "even-dilated", "4x4"])
def test_conv2d_cell_same_matches_torch(torch, rng, mode, kernel_size, dilation):
    theirs = torch.nn.Conv2d(3, 4, kernel_size, padding="same", dilation=dilation,
                             padding_mode=mode, dtype=torch.float64)
    ours = nn.Conv2d(3, 4, kernel_size, padding="same", dilation=dilation, padding_mode=mode,
                     dtype=kiln.float64)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    x = rng.standard_normal((2, 3, 6, 7))
    tx = torch.tensor(x, requires_grad=True)
    (theirs(tx) ** 2).sum().backward()
    x_grad = kiln.grad(lambda x: (ours(x) ** 2).sum())(t(x))
    close(ours(t(x)), theirs(torch.tensor(x)).detach().numpy(), rtol=1e-12, atol=1e-12)
    close(x_grad, tx.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_torch_refuses_what_kiln_refuses(torch):
    # The refusals above are PyTorch's: a strided "same" and an unknown padding string.
    x, w = torch.ones((1, 2, 5, 5)), torch.ones((3, 2, 3, 3))
    with pytest.raises(RuntimeError, match="not supported for strided convolutions"):
        torch.nn.functional.conv2d(x, w, stride=2, padding="same")
    with pytest.raises(ValueError, match="not supported for strided convolutions"):
        torch.nn.Conv2d(2, 3, 3, stride=(1, 2), padding="same")
    with pytest.raises(ValueError, match="Invalid padding string 'full'"):
        torch.nn.Conv2d(2, 3, 3, padding="full")
