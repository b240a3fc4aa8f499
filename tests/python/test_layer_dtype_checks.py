"""The dtype rule of kiln.nn's layers with weights: F.linear, F.bilinear, F.conv1d, F.conv2d,
F.conv_transpose2d, F.multi_head_attention_forward and the cells that call them (Linear, Dense,
Bilinear, Conv1d, Conv2d, ConvTranspose2d, MultiheadAttention) refuse an input or a bias of
another dtype than the weight's with a DTypeError naming the function and both dtypes, as
PyTorch refuses it, while the kiln.mint ops keep NumPy-style promotion. Torch-free checks
against NumPy first, then the parity with PyTorch through the ``torch`` fixture."""

import numpy as np
import pytest

import kiln
from conftest import TOLERANCES, numpy_dtype, raises, t
from kiln import nn
from kiln.nn import functional as F

mint = kiln.mint


def _conv2d(x, w, b, padding):
    """x [N, C, H, W] convolved with w [O, C, kH, kW] (stride 1, ``padding`` (pH, pW) zeros),
    plus b [O]."""
    (ph, pw) = padding
    x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    windows = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", windows, w) + b[:, None, None]


def _conv_transpose2d(x, w, b, stride):
    """x [N, C_in, H, W] with w [C_in, C_out, kH, kW] transposed-convolved, no padding."""
    n, _, height, width = x.shape
    kh, kw = w.shape[2:]
    out = np.zeros((n, w.shape[1], (height - 1) * stride + kh, (width - 1) * stride + kw))
    for i in range(height):
        for j in range(width):
            out[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw] += np.einsum(
                "nc,cokl->nokl", x[:, :, i, j], w)
    return out + b[:, None, None]


def _attention(cell, query, key, value):
    """MultiheadAttention's output for [L, N, E] inputs (batch_first=False), in NumPy."""
    e, heads = cell.embed_dim, cell.num_heads
    weight, bias = cell.in_proj_weight.numpy(), cell.in_proj_bias.numpy()

    def projected(x, i):  # [L, N, E] -> [N, heads, L, E / heads]
        y = x @ weight[i * e:(i + 1) * e].T + bias[i * e:(i + 1) * e]
        return y.reshape(y.shape[0], y.shape[1], heads, e // heads).transpose(1, 2, 0, 3)

    q, k, v = (projected(x, i) for i, x in enumerate((query, key, value)))
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(e // heads)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    out = (weights @ v).transpose(2, 0, 1, 3).reshape(query.shape[0], query.shape[1], e)
    return out @ cell.out_proj.weight.numpy().T + cell.out_proj.bias.numpy()


def _params(cell):
    return cell.weight.numpy(), cell.bias.numpy()


# (cell name, constructor arguments, input shapes, the function named in errors, the inputs'
# names there, the NumPy result from the cell and the input arrays). The cell's name is also
# torch.nn's.
LAYERS = [
    ("Linear", (3, 4), {}, [(2, 3)], "linear", ["input"],
     lambda c, x: x @ c.weight.numpy().T + c.bias.numpy()),
    ("Bilinear", (3, 2, 4), {}, [(5, 3), (5, 2)], "bilinear", ["input1", "input2"],
     lambda c, x1, x2: np.einsum("ni,oij,nj->no", x1, c.weight.numpy(), x2) + c.bias.numpy()),
    ("Conv1d", (2, 3, 3), {"padding": 1}, [(2, 2, 6)], "conv1d", ["input"],
     lambda c, x: _conv2d(x[:, :, None], c.weight.numpy()[:, :, None], c.bias.numpy(),
                          (0, 1))[:, :, 0]),
    ("Conv2d", (2, 3, 3), {"padding": 1}, [(2, 2, 4, 5)], "conv2d", ["input"],
     lambda c, x: _conv2d(x, *_params(c), (1, 1))),
    ("ConvTranspose2d", (2, 3, 2), {"stride": 2}, [(2, 2, 3, 2)], "conv_transpose2d", ["input"],
     lambda c, x: _conv_transpose2d(x, *_params(c), 2)),
    ("MultiheadAttention", (4, 2), {}, [(3, 2, 4), (5, 2, 4), (5, 2, 4)],
     "multi_head_attention_forward", ["query", "key", "value"], _attention),
]
LAYER_IDS = [layer[0] for layer in LAYERS]


def _cell(layer, dtype):
    name, args, kwargs = layer[:3]
    return getattr(nn, name)(*args, dtype=dtype, **kwargs)


def _output(result):
    """A cell's output: MultiheadAttention's is the first of (output, weights)."""
    return result[0] if isinstance(result, tuple) else result


def _arrays(layer, rng):
    return [rng.standard_normal(shape) for shape in layer[3]]


@pytest.mark.parametrize("layer", LAYERS, ids=LAYER_IDS)
def test_each_input_of_another_dtype_is_refused_naming_the_function_and_both_dtypes(layer, rng):
    cell = _cell(layer, kiln.float32)
    arrays = _arrays(layer, rng)
    owner, names = layer[4], layer[5]
    for i, name in enumerate(names):  # one input float64 at a time, the others float32
        inputs = [t(a, kiln.float64 if j == i else kiln.float32) for j, a in enumerate(arrays)]
        with raises(kiln.DTypeError, match=rf"^{owner}: expected {name} of dtype float32 "
                                           rf"\(.*weight's\), got float64; convert it with "
                                           rf"\.to\(kiln\.float32\), or the layer with "
                                           rf"\.to\(kiln\.float64\)$"):
            cell(*inputs)


@pytest.mark.parametrize("layer", LAYERS, ids=LAYER_IDS)
def test_the_layer_and_the_process_stay_usable_after_the_error(layer, rng):
    cell = _cell(layer, kiln.float32)
    arrays = _arrays(layer, rng)
    with raises(kiln.DTypeError):
        cell(*(t(a, kiln.float64) for a in arrays))
    out = _output(cell(*(t(a, kiln.float32) for a in arrays)))
    assert out.dtype == kiln.float32
    np.testing.assert_allclose(out.numpy(), layer[6](cell, *arrays), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("convert", ["dtype", "double"])
@pytest.mark.parametrize("layer", LAYERS, ids=LAYER_IDS)
def test_a_float64_layer_takes_float64_inputs_and_matches_numpy(layer, convert, rng):
    cell = (_cell(layer, kiln.float64) if convert == "dtype"
            else _cell(layer, kiln.float32).double())
    arrays = _arrays(layer, rng)
    out = _output(cell(*(t(a, kiln.float64) for a in arrays)))
    assert out.dtype == kiln.float64
    np.testing.assert_allclose(out.numpy(), layer[6](cell, *arrays), rtol=1e-10, atol=1e-12)
    with raises(kiln.DTypeError, match=rf"^{layer[4]}: expected {layer[5][0]} of dtype float64 "
                                       rf"\(.*\), got float32"):
        cell(*(t(a, kiln.float32) for a in arrays))


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16], ids=str)
@pytest.mark.parametrize("layer", LAYERS, ids=LAYER_IDS)
def test_a_16_bit_layer_takes_inputs_of_its_dtype(layer, dtype, rng):
    cell = _cell(layer, dtype)
    arrays = [a.astype(numpy_dtype(dtype)) for a in _arrays(layer, rng)]
    out = _output(cell(*(t(a, dtype) for a in arrays)))
    assert out.dtype == dtype
    # The inputs rounded to the dtype, in float64: the layer rounds its steps to 16 bits.
    inputs = [t(a, dtype).to(kiln.float64).numpy() for a in arrays]
    rtol, atol = TOLERANCES[dtype]
    np.testing.assert_allclose(out.to(kiln.float64).numpy(), layer[6](cell, *inputs),
                               rtol=8 * rtol, atol=8 * atol)
    with raises(kiln.DTypeError, match=rf"expected {layer[5][0]} of dtype {dtype.name}"):
        cell(*(t(a, kiln.float32) for a in arrays))


@pytest.mark.parametrize("layer", LAYERS, ids=LAYER_IDS)
def test_the_check_fires_while_kiln_jit_traces(layer, rng):
    cell = _cell(layer, kiln.float32)
    jitted = kiln.jit(lambda *inputs: _output(cell(*inputs)))
    arrays = _arrays(layer, rng)
    expected = _output(cell(*(t(a, kiln.float32) for a in arrays))).numpy()
    with raises(kiln.DTypeError, match=rf"^{layer[4]}: expected {layer[5][0]} of dtype float32 "
                                       rf"\(.*\), got float64"):
        jitted(*(t(a, kiln.float64) for a in arrays))
    np.testing.assert_allclose(jitted(*(t(a, kiln.float32) for a in arrays)).numpy(), expected,
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [kiln.int64, kiln.int32], ids=str)
@pytest.mark.parametrize("make", [lambda: nn.Linear(3, 4), lambda: nn.Dense(3, 4)],
                         ids=["Linear", "Dense"])
def test_an_integer_input_into_linear_is_refused_without_offering_to_convert_the_layer(make,
                                                                                         dtype):
    cell = make()
    with raises(kiln.DTypeError, match=rf"^linear: expected input of dtype float32 \(the "
                                       rf"weight's\), got {dtype.name}; convert it with "
                                       rf"\.to\(kiln\.float32\)$"):
        cell(mint.ones((2, 3), dtype=dtype))
    assert cell(mint.ones((2, 3))).dtype == kiln.float32


@pytest.mark.parametrize("weight_shape, bias_shape", [((4, 3), (4,)), ((3,), ()), ((4, 3), (2, 4))],
                         ids=["fused", "1-d weight", "broadcast bias"])
def test_f_linear_checks_the_input_and_the_bias_on_the_fused_and_the_unfused_path(
        weight_shape, bias_shape, rng):
    x, w, b = (rng.standard_normal(s) for s in ((2, 3), weight_shape, bias_shape))
    with raises(kiln.DTypeError, match=r"^linear: expected input of dtype float32"):
        F.linear(t(x, kiln.float64), t(w, kiln.float32), t(b, kiln.float32))
    with raises(kiln.DTypeError, match=r"^linear: expected bias of dtype float32 \(the "
                                       r"weight's\), got float64; convert it with "
                                       r"\.to\(kiln\.float32\)$"):
        F.linear(t(x, kiln.float32), t(w, kiln.float32), t(b, kiln.float64))
    out = F.linear(t(x), t(w), t(b))  # float64 throughout
    np.testing.assert_allclose(out.numpy(), x @ w.T + b, rtol=1e-12)


@pytest.mark.parametrize("function, shapes", [
    (F.bilinear, [(2, 3), (2, 2), (4, 3, 2), (4,)]),
    (F.conv1d, [(1, 2, 5), (3, 2, 2), (3,)]),
    (F.conv2d, [(1, 2, 4, 4), (3, 2, 2, 2), (3,)]),
    (F.conv_transpose2d, [(1, 2, 3, 3), (2, 3, 2, 2), (3,)]),
], ids=lambda value: getattr(value, "__name__", None))
def test_the_functions_refuse_a_bias_of_another_dtype(function, shapes, rng):
    *inputs, weight, bias = (rng.standard_normal(s) for s in shapes)
    with raises(kiln.DTypeError, match=rf"^{function.__name__}: expected bias of dtype float32 "
                                       rf"\(the weight's\), got float64"):
        function(*(t(a, kiln.float32) for a in inputs), t(weight, kiln.float32),
                 t(bias, kiln.float64))


def test_multi_head_attention_with_separate_projections_checks_against_q_proj_weight(rng):
    cell = nn.MultiheadAttention(4, 2, kdim=3, vdim=5)
    query, key, value = (rng.standard_normal(s) for s in ((2, 1, 4), (3, 1, 3), (3, 1, 5)))
    with raises(kiln.DTypeError, match=r"^multi_head_attention_forward: expected value of dtype "
                                       r"float32 \(q_proj_weight's\), got float64"):
        cell(t(query, kiln.float32), t(key, kiln.float32), t(value, kiln.float64))
    out, _ = cell(t(query, kiln.float32), t(key, kiln.float32), t(value, kiln.float32))
    assert out.dtype == kiln.float32


def test_multi_head_attention_refuses_a_static_key_of_another_dtype():
    cell = nn.MultiheadAttention(4, 2)
    x = mint.ones((3, 1, 4))
    with raises(kiln.DTypeError, match=r"^multi_head_attention_forward: expected static_k of "
                                       r"dtype float32 \(in_proj_weight's\), got float64"):
        F.multi_head_attention_forward(
            x, x, x, 4, 2, cell.in_proj_weight, cell.in_proj_bias, None, None, False, 0.0,
            cell.out_proj.weight, cell.out_proj.bias, static_k=mint.ones((2, 3, 2),
                                                                         dtype=kiln.float64))


def test_the_kiln_mint_ops_keep_promoting():
    # The op-level rule (NumPy-style promotion) is unchanged: only the layers refuse.
    x = mint.ones((2, 3), dtype=kiln.float64)
    assert mint.linear(x, mint.ones((4, 3)), None).dtype == kiln.float64
    assert mint.matmul(x, mint.ones((3, 4))).dtype == kiln.float64
    assert mint.conv2d(mint.ones((1, 2, 3, 3), dtype=kiln.float64),
                       mint.ones((3, 2, 1, 1))).dtype == kiln.float64


# ------------------------------------------------------------------------------------------------
# Parity with PyTorch


@pytest.mark.parametrize("layer", LAYERS, ids=LAYER_IDS)
def test_pytorch_also_refuses_a_float64_input_into_a_float32_layer(layer, torch, rng):
    name, args, kwargs = layer[:3]
    theirs = getattr(torch.nn, name)(*args, dtype=torch.float32, **kwargs)
    with pytest.raises(RuntimeError):
        theirs(*(torch.tensor(a, dtype=torch.float64) for a in _arrays(layer, rng)))


@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_pytorch_also_refuses_an_integer_input_into_linear(dtype, torch):
    with pytest.raises(RuntimeError):
        torch.nn.Linear(3, 4)(torch.ones((2, 3), dtype=getattr(torch, dtype)))
