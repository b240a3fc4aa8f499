"""PyTorch behaviours of kiln.nn layers that ported code relies on: F.dropout1d and F.dropout2d
(kiln/nn/functional.py, used by Dropout1d and Dropout2d); unbatched inputs of the convolutions
and conv1d's own error messages (kiln/nn/conv.py); Embedding's positional signature and
``max_norm`` (kiln/nn/embedding.py); where KLDivLoss's warning points (kiln/nn/loss.py); the
transformer layers' ``device`` and ``dtype`` and unbatched inputs (kiln/nn/transformer.py); and
"bilinear" interpolation of uint8 images (kiln/nn/upsampling.py). Torch-free checks against
NumPy and closed forms first, then comparisons with PyTorch through the ``torch`` fixture."""

import math
import warnings

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from conftest import (check_cell_against_torch, check_channel_dropout, check_torch, close, raises,
                      t)
from kiln import nn

mint = kiln.mint
gradcheck = kiln.testing.gradcheck


# ------------------------------------------------------------------------------------------------
# F.dropout1d and F.dropout2d


@pytest.mark.filterwarnings("ignore:dropout2d. a 3-D input")  # (a colon ends the pattern)
@pytest.mark.parametrize("fn, shape, channel_dims", [
    (F.dropout1d, (16, 32, 5), 2), (F.dropout1d, (512, 7), 1), (F.dropout2d, (16, 32, 3, 4), 2),
    (F.dropout2d, (16, 32, 5), 2)], ids=["1d", "1d-unbatched", "2d", "2d-of-3d"])
def test_channel_dropout_functions_zero_whole_channels(fn, shape, channel_dims):
    p = 0.25
    x = t(np.ones(shape), kiln.float32).requires_grad_()
    kiln.manual_seed(5)
    y = fn(x, p)
    kiln.manual_seed(5)
    np.testing.assert_array_equal(fn(x, p).detach().numpy(), y.detach().numpy())
    check_channel_dropout(x, y, channel_dims, p)
    assert fn(x, p, training=False).is_same(x)


@pytest.mark.parametrize("fn, cell, shape", [
    (F.dropout1d, nn.Dropout1d, (4, 8, 3)), (F.dropout1d, nn.Dropout1d, (8, 3)),
    (F.dropout2d, nn.Dropout2d, (4, 8, 2, 2))], ids=["1d", "1d-unbatched", "2d"])
def test_channel_dropout_cells_apply_the_functions(fn, cell, shape):
    x = mint.ones(*shape)
    kiln.manual_seed(3)
    expected = fn(x, 0.4).numpy()
    kiln.manual_seed(3)
    np.testing.assert_array_equal(cell(0.4)(x).numpy(), expected)


def test_channel_dropout_functions_edge_probabilities_and_inplace():
    x = t(np.array([[1.0, np.nan], [2.0, 3.0]]))
    assert F.dropout1d(x, 0.0).is_same(x)
    np.testing.assert_array_equal(F.dropout1d(x, 1.0).numpy(), [[0.0, np.nan], [0.0, 0.0]])
    y = mint.ones(4, 8, 2, 2)
    kiln.manual_seed(2)
    assert F.dropout2d(y, 0.5, True, True).is_same(y)
    assert set(np.unique(y.numpy()).tolist()) == {0.0, 2.0}
    z = mint.ones(8, 3)
    assert F.dropout1d(z, 0.5, inplace=True).is_same(z)
    with raises(kiln.KilnValueError, match="dropout1d: inplace=True writes into input, a leaf "
                                           "tensor that requires grad"):
        F.dropout1d(mint.ones(8, 3).requires_grad_(), 0.5, inplace=True)


def test_dropout2d_warning_on_3d_input_points_at_the_caller():
    for call, name in ((lambda x: F.dropout2d(x), "dropout2d"),
                       (lambda x: nn.Dropout2d()(x), "Dropout2d")):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call(mint.ones(2, 3, 4))
        (warning,) = caught
        assert str(warning.message).startswith(f"{name}: a 3-D input is taken as [N, C, L]")
        assert warning.filename == __file__, name


@pytest.mark.parametrize("call, error, message", [
    (lambda: F.dropout1d(mint.ones(2, 3, 4, 5)), kiln.ShapeError,
     r"dropout1d: expected a 2-D \[C, L\] or 3-D \[N, C, L\] input, got shape \[2, 3, 4, 5\]"),
    (lambda: F.dropout2d(mint.ones(2, 3)), kiln.ShapeError,
     r"dropout2d: expected a 4-D \[N, C, H, W\] input \(or 3-D \[N, C, L\]\), got shape "
     r"\[2, 3\]"),
    (lambda: F.dropout1d(mint.ones(2, 3), 1.5), kiln.KilnValueError,
     r"dropout1d: p must be in \[0, 1\], got 1.5"),
    (lambda: F.dropout2d(mint.ones(1, 2, 3, 3), "0.5"), kiln.KilnTypeError,
     "dropout2d: expected p to be a real number, got str '0.5'"),
    (lambda: F.dropout1d(mint.ones((2, 3), dtype=kiln.int32)), kiln.DTypeError,
     "dropout1d: expected a floating-point input, got int32"),
    (lambda: F.dropout2d([[1.0]]), kiln.KilnTypeError,
     "dropout2d: expected input to be a kiln.Tensor, got list"),
])
def test_channel_dropout_function_errors(call, error, message):
    with raises(error, match=message):
        call()


# ------------------------------------------------------------------------------------------------
# Convolutions: unbatched inputs, conv1d's errors


CONV_CELLS = [
    (lambda: nn.Conv1d(4, 6, 3, dtype=kiln.float64), (4, 9)),
    (lambda: nn.Conv1d(4, 6, 4, padding="same", dilation=2, padding_mode="reflect",
                       dtype=kiln.float64), (4, 9)),
    (lambda: nn.Conv1d(4, 6, 3, stride=2, padding=2, groups=2, padding_mode="circular",
                       dtype=kiln.float64), (4, 9)),
    (lambda: nn.Conv2d(4, 6, 3, padding=1, padding_mode="replicate", dtype=kiln.float64),
     (4, 5, 6)),
    (lambda: nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2,
                                dtype=kiln.float64), (4, 5, 6)),
]
CONV_IDS = ["conv1d", "conv1d-same-reflect", "conv1d-circular", "conv2d-replicate",
            "conv-transpose2d"]


@pytest.mark.parametrize("make, shape", CONV_CELLS, ids=CONV_IDS)
def test_conv_cells_take_one_sample_as_a_batch_of_one(make, shape, rng):
    conv = make()
    v = rng.standard_normal(shape)
    x = t(v).requires_grad_()
    out = conv(x)
    batched = conv(t(v[None]))
    assert out.shape == batched.shape[1:]
    close(out, batched.numpy()[0], rtol=1e-12, atol=1e-12)
    (grad,) = kiln.autograd.grad(out.sum(), [x])
    assert grad.shape == shape


@pytest.mark.parametrize("fn, x_shape, w_shape, kwargs", [
    (F.conv1d, (4, 9), (6, 2, 3), dict(stride=2, padding=1, groups=2)),
    (F.conv1d, (4, 9), (6, 4, 2), dict(padding="same", dilation=3)),
    (F.conv2d, (4, 5, 6), (6, 4, 3, 2), dict(padding="same")),
    (F.conv_transpose2d, (4, 5, 6), (4, 3, 3, 3), dict(stride=2, output_padding=1, groups=2)),
], ids=["conv1d", "conv1d-same", "conv2d", "conv-transpose2d"])
def test_conv_functions_take_one_sample(fn, x_shape, w_shape, kwargs, rng):
    v, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    out = fn(t(v), t(w), **kwargs)
    close(out, fn(t(v[None]), t(w), **kwargs).numpy()[0], rtol=1e-12, atol=1e-12)
    assert gradcheck(lambda x, weight: fn(x, weight, **kwargs),
                     [t(v).requires_grad_(), t(w).requires_grad_()])


def test_conv_transpose2d_output_size_of_one_sample_may_name_its_channels(rng):
    conv = nn.ConvTranspose2d(4, 6, 3, stride=2, dtype=kiln.float64)
    x = t(rng.standard_normal((4, 5, 6)))
    assert conv(x).shape == (6, 11, 13)
    for size in ([12, 14], [6, 12, 14]):
        out = conv(x, output_size=size)
        assert out.shape == (6, 12, 14)
        close(out, conv(mint.unsqueeze(x, 0), output_size=[12, 14]).numpy()[0], rtol=1e-12,
              atol=1e-12)
    with raises(kiln.KilnValueError, match=r"ConvTranspose2d: output_size must be \[H_out, "
                                           r"W_out\] or \[C_out, H_out, W_out\] \(for input "
                                           r"\[4, 5, 6\]\), got \[1, 6, 12, 14\]"):
        conv(x, output_size=[1, 6, 12, 14])


@pytest.mark.parametrize("call, error, message", [
    (lambda: nn.Conv1d(3, 2, 3, padding=1, padding_mode="reflect")(mint.ones(2, 3, 5, 7)),
     kiln.ShapeError, r"Conv1d: expected input \[N, C_in, L\] or one sample \[C_in, L\], got "
                      r"\[2, 3, 5, 7\]"),
    (lambda: nn.Conv2d(3, 2, 3)(mint.ones(3, 5)), kiln.ShapeError,
     r"Conv2d: expected input \[N, C_in, H, W\] or one sample \[C_in, H, W\], got \[3, 5\]"),
    (lambda: nn.ConvTranspose2d(3, 2, 3)(mint.ones(1, 1, 3, 5, 5)), kiln.ShapeError,
     r"ConvTranspose2d: expected input \[N, C_in, H, W\] or one sample"),
    (lambda: F.conv1d(mint.ones(7), mint.ones(2, 3, 3)), kiln.ShapeError,
     r"conv1d: expected input \[N, C_in, L\] or one sample \[C_in, L\], got \[7\]"),
    (lambda: F.conv2d(mint.ones(2, 3, 4, 5, 6), mint.ones(2, 3, 3, 3)), kiln.ShapeError,
     r"conv2d: expected input \[N, C_in, H, W\] or one sample \[C_in, H, W\], got "
     r"\[2, 3, 4, 5, 6\]"),
    (lambda: F.conv_transpose2d(mint.ones(3, 4), mint.ones(3, 2, 3, 3)), kiln.ShapeError,
     r"conv_transpose2d: expected input \[N, C_in, H, W\] or one sample"),
    (lambda: F.conv2d(np.ones((1, 3, 5, 5)), mint.ones(2, 3, 3, 3)), kiln.KilnTypeError,
     "conv2d: expected input to be a kiln.Tensor, got ndarray"),
])
def test_conv_rank_errors_name_the_batched_and_unbatched_shapes(call, error, message):
    with raises(error, match=message):
        call()


@pytest.mark.parametrize("call, error, message", [
    (lambda x, w: F.conv1d(x, w, mint.ones(5)), kiln.ShapeError,
     r"conv1d: expected bias \[C_out = 2\], got \[5\]"),
    (lambda x, w: F.conv1d(x, w, None, 2, "same"), kiln.KilnValueError,
     r"conv1d: padding='same' needs stride 1 \(the output could not keep the input's size\), "
     r"got stride 2"),
    (lambda x, w: F.conv1d(x, w, padding="full"), kiln.KilnValueError,
     r"conv1d: expected padding 'same', 'valid', an int or a sequence of one int, got 'full'"),
    (lambda x, w: F.conv1d(x[..., :2], w), kiln.ShapeError,
     r"conv1d: expected the padded input length \(2\) to be at least the dilated kernel size "
     r"\(3\), got input \[2, 3, 2\] and weight \[2, 3, 3\]"),
    (lambda x, w: F.conv1d(x[0, :, :4], w, dilation=2, padding=[0]), kiln.ShapeError,
     r"conv1d: expected the padded input length \(4\) to be at least the dilated kernel size "
     r"\(5\), got input \[3, 4\]"),
    (lambda x, w: nn.Conv1d(3, 2, 3)(x[..., :2]), kiln.ShapeError,
     r"conv1d: expected the padded input length \(2\)"),
    (lambda x, w: F.conv1d(x.to(kiln.int32), w.to(kiln.int32)), kiln.DTypeError,
     "conv1d: expected a floating-point input, got int32"),
    (lambda x, w: nn.Conv1d(3, 2, 3)(x.to(kiln.int64)), kiln.DTypeError,
     "conv1d: expected a floating-point input, got int64"),
    (lambda x, w: F.conv1d(x, w[:, :, :0]), kiln.ShapeError,
     r"conv1d: expected input \[N, C_in, L\] or \[C_in, L\] and weight \[C_out, C_in / groups, "
     r"k\] \(k >= 1\) with C_in and C_out divisible by groups = 1, got input \[2, 3, 7\] and "
     r"weight \[2, 3, 0\]"),
    (lambda x, w: F.conv1d(x[0, :2], w), kiln.ShapeError,
     r"got input \[2, 7\] and weight \[2, 3, 3\]"),
], ids=["bias", "same-stride", "padding-string", "too-short", "too-short-unbatched",
        "cell-too-short", "int", "cell-int", "empty-kernel", "channels-unbatched"])
def test_conv1d_errors_describe_conv1d(call, error, message):
    with raises(error, match=message) as info:
        call(mint.ones(2, 3, 7), mint.ones(2, 3, 3))
    assert "conv2d" not in str(info.value).lower()


# ------------------------------------------------------------------------------------------------
# Embedding: PyTorch's positional signature, max_norm


def renormed(weight, indices, max_norm, norm_type):
    """PyTorch's embedding_renorm_ in NumPy: the looked-up rows whose norm exceeds max_norm
    scaled by max_norm / (norm + 1e-7)."""
    out = weight.copy()
    for i in np.unique(indices):
        norm = np.linalg.norm(weight[i], norm_type)
        if norm > max_norm:
            out[i] = weight[i] * (max_norm / (norm + 1e-7))
    return out


def test_embedding_takes_pytorchs_arguments_in_pytorchs_order():
    emb = nn.Embedding(10, 3, 0, 1.5, 1.0, False, False, None, False, "cpu", kiln.float64)
    assert (emb.padding_idx, emb.max_norm, emb.norm_type) == (0, 1.5, 1.0)
    assert (emb.scale_grad_by_freq, emb.sparse) == (False, False)
    assert emb.weight.dtype == kiln.float64 and emb.weight.shape == (10, 3)
    keyword = nn.Embedding(10, 3, padding_idx=2, dtype=kiln.float64, device=kiln.device("cpu"))
    assert keyword.weight.dtype == kiln.float64 and keyword.max_norm is None
    assert repr(emb) == "Embedding(10, 3, padding_idx=0, max_norm=1.5, norm_type=1.0)"
    assert repr(keyword) == "Embedding(10, 3, padding_idx=2)"


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf])
def test_embedding_max_norm_renorms_the_rows_looked_up_in_place(norm_type, rng):
    emb = nn.Embedding(8, 4, max_norm=1.0, norm_type=norm_type, dtype=kiln.float64)
    weight = rng.uniform(-2, 2, size=(8, 4))
    weight[5] *= 0.01  # a row within the norm stays as it is
    emb.load_state_dict({"weight": weight})
    indices = np.array([[1, 5, 1], [6, 0, 5]])
    out = emb(t(indices))
    expected = renormed(weight, indices, 1.0, norm_type)
    close(emb.weight.detach(), expected, rtol=1e-12, atol=1e-12)
    close(out, expected[indices], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(emb.weight.detach().numpy()[[2, 3, 4, 7]], weight[[2, 3, 4, 7]])
    (grad,) = kiln.autograd.grad(out.sum(), [emb.weight])
    counts = np.bincount(indices.ravel(), minlength=8)[:, None] * np.ones((1, 4))
    np.testing.assert_array_equal(grad.numpy(), counts)


def test_embedding_max_norm_with_padding_idx_from_pretrained_and_functional(rng):
    weight = rng.uniform(-2, 2, size=(5, 3))
    indices = np.array([0, 3, 3, 4])
    table = t(weight)
    emb = nn.Embedding.from_pretrained(table, freeze=False, padding_idx=3, max_norm=0.5)
    out = emb(t(indices))
    expected = renormed(weight, indices, 0.5, 2.0)
    close(table, expected, rtol=1e-12, atol=1e-12)  # the given table, shared, is renormed
    (grad,) = kiln.autograd.grad(out.sum(), [emb.weight])
    np.testing.assert_array_equal(grad.numpy()[[0, 3, 4]], [[1.0] * 3, [0.0] * 3, [1.0] * 3])
    other = t(weight)
    close(F.embedding(t(indices), other, max_norm=0.5), expected[indices], rtol=1e-12,
          atol=1e-12)
    close(other, expected, rtol=1e-12, atol=1e-12)


def test_embedding_max_norm_under_jit_renorms_at_each_call(rng):
    emb = nn.Embedding(6, 3, max_norm=0.5, dtype=kiln.float64)
    weight = rng.uniform(-2, 2, size=(6, 3))
    emb.load_state_dict({"weight": weight})
    step = kiln.jit(lambda i: emb(i))
    step(t(np.array([0, 2])))
    step(t(np.array([4])))
    close(emb.weight.detach(), renormed(weight, np.array([0, 2, 4]), 0.5, 2.0), rtol=1e-12,
          atol=1e-12)


@pytest.mark.parametrize("call, error, message", [
    (lambda: nn.Embedding(10, 3, 0, kiln.float64), kiln.KilnTypeError,
     r"Embedding: the 4th argument is max_norm, as in PyTorch, got the dtype float64: pass it "
     r"by name \(dtype=kiln.float64\)"),
    (lambda: nn.Embedding(10, 3, max_norm="1"), kiln.KilnTypeError,
     "Embedding: expected max_norm to be a real number, got str '1'"),
    (lambda: nn.Embedding(10, 3, norm_type=None), kiln.KilnTypeError,
     "Embedding: expected norm_type to be a real number"),
    (lambda: nn.Embedding(10, 3, sparse=True), kiln.KilnNotImplementedError,
     "Embedding: sparse is not supported"),
    (lambda: nn.Embedding(10, 3, sparse=1), kiln.KilnTypeError,
     "Embedding: sparse must be a bool, got int 1"),
    (lambda: nn.Embedding(10, 3, device="cuda"), kiln.KilnValueError,
     "device 'cuda' is not available; Kiln runs on the CPU"),
    (lambda: F.embedding(t(np.array([0])), mint.ones(2, 2), max_norm="big"), kiln.KilnTypeError,
     "embedding: expected max_norm to be a real number, got str 'big'"),
    (lambda: F.embedding(t(np.array([1, 5])), mint.ones(2, 2), max_norm=1.0), kiln.KilnIndexError,
     r"embedding: index 5 is out of range for a weight with 2 rows \(expected 0 <= index < 2\)"),
    (lambda: nn.Embedding(4, 2, max_norm=1.0)(t(np.array([-1, 0]))), kiln.KilnIndexError,
     "embedding: index -1 is out of range for a weight with 4 rows"),
    (lambda: nn.Embedding(4, 2, max_norm=1.0)(t(np.array([1.0]))), kiln.DTypeError,
     "embedding: expected integer indices, got float64"),
])
def test_embedding_argument_errors(call, error, message):
    with raises(error, match=message):
        call()


# ------------------------------------------------------------------------------------------------
# KLDivLoss's warning


def test_kl_div_mean_warning_points_at_the_caller():
    log_probs = mint.log_softmax(mint.ones(2, 3), 1)
    target = mint.softmax(mint.ones(2, 3), 1)
    for call in (lambda: nn.KLDivLoss()(log_probs, target),
                 lambda: F.kl_div(log_probs, target)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        (warning,) = caught
        assert "reduction='mean' divides the total loss" in str(warning.message)
        assert warning.filename == __file__


# ------------------------------------------------------------------------------------------------
# Transformer layers: device and dtype, unbatched inputs

S, T, E, H, FF = 5, 4, 8, 2, 16


@pytest.mark.parametrize("make", [
    lambda **kw: nn.TransformerEncoderLayer(E, H, FF, **kw),
    lambda **kw: nn.TransformerDecoderLayer(E, H, FF, **kw),
    lambda **kw: nn.Transformer(E, H, 1, 1, FF, **kw),
], ids=["encoder-layer", "decoder-layer", "transformer"])
def test_transformer_layers_take_device_and_dtype(make):
    for device in ("cpu", kiln.device("cpu"), None):
        cell = make(device=device, dtype=kiln.float64)
        assert {p.dtype for p in cell.parameters()} == {kiln.float64}
    assert {p.dtype for p in make().parameters()} == {kiln.float32}
    with raises(kiln.KilnValueError, match="device 'cuda:1' is not available; Kiln runs on the "
                                           "CPU"):
        make(device="cuda:1")


def test_transformer_checks_the_device_with_custom_parts():
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, FF), 1)
    decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, FF), 1)
    with raises(kiln.KilnValueError, match="Transformer: device 'mps' is not available"):
        nn.Transformer(E, H, custom_encoder=encoder, custom_decoder=decoder, device="mps")


def one_sample(batch_first, *arrays):
    """Each [seq, E] array as a batch of one in the layout ``batch_first`` asks for."""
    return [t(a[None] if batch_first else a[:, None]) for a in arrays]


def without_batch(out, batch_first):
    return out.numpy()[0] if batch_first else out.numpy()[:, 0]


@pytest.mark.parametrize("batch_first", [True, False], ids=["batch-first", "seq-first"])
def test_transformer_layers_take_unbatched_inputs(batch_first, rng):
    kw = dict(batch_first=batch_first, dtype=kiln.float64)
    src, tgt = rng.standard_normal((S, E)), rng.standard_normal((T, E))
    pad = np.array([False, False, False, True, True])
    causal = nn.Transformer.generate_square_subsequent_mask(T, dtype=kiln.float64)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, FF, **kw), 2).eval()
    decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, FF, **kw), 2).eval()
    model = nn.Transformer(E, H, 1, 1, FF, **kw).eval()
    cases = [
        (encoder.layers[0], (src,), dict(src_key_padding_mask=pad, is_causal=True),
         dict(src_key_padding_mask=pad[None], is_causal=True)),
        (encoder, (src,), dict(src_key_padding_mask=t(pad)),
         dict(src_key_padding_mask=t(pad[None]))),
        (decoder.layers[0], (tgt, src), dict(tgt_mask=causal, memory_key_padding_mask=pad),
         dict(tgt_mask=causal, memory_key_padding_mask=pad[None])),
        (decoder, (tgt, src), dict(tgt_key_padding_mask=[False] * 3 + [True]),
         dict(tgt_key_padding_mask=[[False] * 3 + [True]])),
        (model, (src, tgt), dict(tgt_mask=causal, src_key_padding_mask=pad),
         dict(tgt_mask=causal, src_key_padding_mask=pad[None])),
    ]
    for cell, arrays, unbatched_kw, batched_kw in cases:
        out = cell(*(t(a) for a in arrays), **unbatched_kw)
        expected = without_batch(cell(*one_sample(batch_first, *arrays), **batched_kw),
                                 batch_first)
        assert out.shape == expected.shape == (T if cell is model else len(arrays[0]), E)
        close(out, expected, rtol=1e-12, atol=1e-12)


def test_unbatched_transformer_inputs_train_with_gradients(rng):
    layer = nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, dtype=kiln.float64)
    x = t(rng.standard_normal((S, E))).requires_grad_()
    layer(x).sum().backward()
    assert x.grad.shape == (S, E)
    assert all(p.grad is not None for p in layer.parameters())


@pytest.mark.parametrize("call, message", [
    (lambda enc, dec: enc(mint.ones(1, S, 1, E, dtype=kiln.float64)),
     r"TransformerEncoderLayer: expected a 3-D src \[seq, batch, 8\] \(batch_first=False\) or "
     r"a 2-D src \[seq, 8\] \(unbatched\), got \[1, 5, 1, 8\]"),
    (lambda enc, dec: enc(mint.ones(S, 6, dtype=kiln.float64)),
     r"or a 2-D src \[seq, 8\] \(unbatched\), got \[5, 6\]"),
    (lambda enc, dec: dec(mint.ones(T, E, dtype=kiln.float64),
                          mint.ones(S, 1, E, dtype=kiln.float64)),
     r"TransformerDecoderLayer: expected a 2-D memory \[seq, 8\] \(unbatched\), as tgt \[4, 8\] "
     r"is, got \[5, 1, 8\]"),
    (lambda enc, dec: dec(mint.ones(T, 1, E, dtype=kiln.float64),
                          mint.ones(S, E, dtype=kiln.float64)),
     r"expected a 3-D memory \[seq, batch, 8\] \(batch_first=False\), as tgt \[4, 1, 8\] is, "
     r"got \[5, 8\]"),
    (lambda enc, dec: enc(mint.ones(S, E, dtype=kiln.float64),
                          src_key_padding_mask=np.zeros((1, S), bool)),
     r"TransformerEncoderLayer: expected a 1-D src_key_padding_mask \[seq\] for unbatched "
     r"inputs, got \[1, 5\]"),
    (lambda enc, dec: nn.Transformer(E, H, 1, 1, FF)(mint.ones(S, E), mint.ones(T, 1, E)),
     r"Transformer: expected a 2-D tgt \[seq, 8\] \(unbatched\), as src \[5, 8\] is"),
])
def test_unbatched_transformer_input_errors(call, message):
    enc = nn.TransformerEncoderLayer(E, H, FF, dtype=kiln.float64)
    dec = nn.TransformerDecoderLayer(E, H, FF, dtype=kiln.float64)
    with raises(kiln.ShapeError, match=message):
        call(enc, dec)


# ------------------------------------------------------------------------------------------------
# interpolate / Upsample "bilinear" on uint8


def bilinear_float(x, **kwargs):
    """``x`` (uint8) resized in float32, as a NumPy array of floats."""
    return F.interpolate(t(x.astype(np.float32)), mode="bilinear", **kwargs).numpy()


@pytest.mark.parametrize("kwargs", [
    dict(scale_factor=2), dict(size=(7, 3)), dict(scale_factor=(0.6, 1.7)),
    dict(size=(5, 9), align_corners=True), dict(scale_factor=1.5, recompute_scale_factor=True),
], ids=["x2", "size", "down-and-up", "align-corners", "recompute"])
def test_bilinear_uint8_is_within_one_of_the_rounded_float_result(kwargs, rng):
    x = rng.integers(0, 256, size=(2, 3, 4, 6)).astype(np.uint8)
    out = F.interpolate(t(x), mode="bilinear", **kwargs)
    assert out.dtype == kiln.uint8
    reference = bilinear_float(x, **kwargs)
    assert out.shape == reference.shape
    assert np.abs(out.numpy().astype(np.int64) - np.round(reference)).max() <= 1


def test_bilinear_uint8_closed_forms():
    ramp = np.array([[[[0, 255]]]], np.uint8)
    # Corners aligned: thirds of 255, exactly 85 apart.
    out = F.interpolate(t(ramp), size=(1, 4), mode="bilinear", align_corners=True)
    np.testing.assert_array_equal(out.numpy(), [[[[0, 85, 170, 255]]]])
    # Edges aligned: sources 0, 0.25, 0.75 and 1 (clamped), rounded half up.
    out = F.interpolate(t(ramp), scale_factor=(1, 2), mode="bilinear")
    np.testing.assert_array_equal(out.numpy(), [[[[0, 64, 191, 255]]]])
    flat = np.full((1, 2, 3, 3), 200, np.uint8)
    np.testing.assert_array_equal(
        nn.UpsamplingBilinear2d(scale_factor=2.5)(t(flat)).numpy(), 200)
    same = t(flat)
    np.testing.assert_array_equal(nn.Upsample(size=(3, 3), mode="bilinear")(same).numpy(),
                                  flat)


def test_bilinear_uint8_under_jit_equals_eager(rng):
    x = t(rng.integers(0, 256, size=(1, 2, 3, 5)).astype(np.uint8))
    step = kiln.jit(lambda x: F.interpolate(x, scale_factor=2.5, mode="bilinear"))
    expected = F.interpolate(x, scale_factor=2.5, mode="bilinear").numpy()
    np.testing.assert_array_equal(step(x).numpy(), expected)


@pytest.mark.parametrize("dtype", [kiln.int32, kiln.int8, kiln.bool_])
def test_bilinear_of_other_integer_dtypes_is_a_dtype_error(dtype):
    with raises(kiln.DTypeError, match=fr"interpolate: expected a floating-point input, got "
                                      fr"{dtype.name} \(mode 'bilinear' also takes uint8, as "
                                      fr"PyTorch's\)"):
        F.interpolate(mint.zeros((1, 1, 2, 2), dtype=dtype), scale_factor=2, mode="bilinear")


# ------------------------------------------------------------------------------------------------
# Against PyTorch


def test_channel_dropout_functions_match_torchs_fixed_points(torch):
    for ours, theirs, shape in ((F.dropout1d, torch.nn.functional.dropout1d, (4, 3)),
                                (F.dropout1d, torch.nn.functional.dropout1d, (2, 4, 3)),
                                (F.dropout2d, torch.nn.functional.dropout2d, (2, 4, 3, 3))):
        v = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        for p, training in ((1.0, True), (0.0, True), (0.5, False)):
            np.testing.assert_array_equal(ours(t(v), p, training).numpy(),
                                          theirs(torch.tensor(v), p, training).numpy())
        values = ours(t(np.ones(shape, np.float32)), 0.5).numpy()
        reference = theirs(torch.ones(shape), 0.5).numpy()
        kept = len(shape) - 1  # one draw per channel, in both
        for drawn in (values, reference):
            channels = drawn.reshape(shape[:kept] + (-1,))
            assert np.all(channels == channels[..., :1])


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("cls, args, kwargs, shape", [
    ("Conv1d", (4, 6, 3), dict(padding=1, padding_mode="reflect"), (4, 9)),
    ("Conv1d", (4, 6, 4), dict(padding="same", groups=2), (4, 9)),
    ("Conv2d", (4, 6, 3), dict(stride=2, padding=1, padding_mode="circular"), (4, 5, 6)),
    ("ConvTranspose2d", (4, 6, 3), dict(stride=2, output_padding=1), (4, 5, 6)),
], ids=["conv1d-reflect", "conv1d-same", "conv2d-circular", "conv-transpose2d"])
def test_unbatched_convolutions_match_torch(torch, cls, args, kwargs, shape, rng):
    ours = getattr(nn, cls)(*args, **kwargs, dtype=kiln.float64)
    theirs = getattr(torch.nn, cls)(*args, **kwargs, dtype=torch.float64)
    ours.load_state_dict(theirs.state_dict())
    check_cell_against_torch(torch, ours, theirs, rng.standard_normal(shape), rng,
                             scale_atol=True)


def test_conv_transpose2d_unbatched_output_size_matches_torch(torch, rng):
    theirs = torch.nn.ConvTranspose2d(3, 2, 3, stride=3).double()
    ours = nn.ConvTranspose2d(3, 2, 3, stride=3, dtype=kiln.float64)
    ours.load_state_dict(theirs.state_dict())
    v = rng.standard_normal((3, 4, 4))
    for size in ([13, 14], [2, 12, 13]):
        check_torch(ours(t(v), output_size=size), theirs(torch.tensor(v), output_size=size),
                    kiln.float64, f"output_size {size}")


@pytest.mark.parametrize("dtype", [kiln.float64, kiln.float32, kiln.float16, kiln.bfloat16])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.5, math.inf])
def test_embedding_max_norm_matches_torch(torch, dtype, norm_type, rng):
    torch_dtype = getattr(torch, dtype.name)
    theirs = torch.nn.Embedding(9, 5, max_norm=1.5, norm_type=norm_type, dtype=torch_dtype)
    with torch.no_grad():
        theirs.weight.uniform_(-2, 2)
    ours = nn.Embedding(9, 5, max_norm=1.5, norm_type=norm_type, dtype=dtype)
    ours.load_state_dict({"weight": t(theirs.weight.detach().double().numpy()).to(dtype)})
    indices = rng.integers(0, 9, size=(3, 4))
    out, want = ours(t(indices)), theirs(torch.tensor(indices))
    # The norms may differ from PyTorch's in their last bit (the order of the sum).
    check_torch(out, want, dtype, "lookup")
    check_torch(ours.weight.detach(), theirs.weight, dtype, "renormed weight")
    if dtype in (kiln.float16, kiln.bfloat16):  # rounded past those last bits: exact
        np.testing.assert_array_equal(ours.weight.detach().to(kiln.float64).numpy(),
                                      theirs.weight.detach().double().numpy())
    assert repr(ours) == repr(theirs)


def test_embedding_signature_and_repr_match_torchs(torch):
    args = (10, 3, 1, 2.0, 1.0, False, False, None, False, "cpu")
    ours, theirs = nn.Embedding(*args), torch.nn.Embedding(*args)
    assert repr(ours) == repr(theirs)
    for name in ("padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse"):
        assert getattr(ours, name) == getattr(theirs, name), name


def test_kl_div_loss_warning_location_matches_torchs_caller(torch):
    # PyTorch's F.kl_div warns at its own line; Kiln's points at the caller, which is what
    # a user can act on.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        nn.KLDivLoss()(mint.log_softmax(mint.ones(2, 3), 1), mint.softmax(mint.ones(2, 3), 1))
        torch.nn.KLDivLoss()(torch.log_softmax(torch.ones(2, 3), 1),
                             torch.softmax(torch.ones(2, 3), 1))
    ours, theirs = caught
    assert ours.filename == __file__ and theirs.filename != __file__


def load_from_torch(cell, module):
    state = {k: v.detach().numpy() for k, v in module.state_dict().items()}
    assert list(cell.state_dict()) == list(state)
    cell.load_state_dict(state)
    cell.eval()
    module.eval()


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")  # torch's, seq-first
@pytest.mark.parametrize("batch_first", [True, False], ids=["batch-first", "seq-first"])
def test_unbatched_transformer_matches_torch(torch, batch_first, rng):
    kw = dict(batch_first=batch_first)
    theirs = torch.nn.Transformer(E, H, 2, 2, FF, dtype=torch.float64, device="cpu", **kw)
    ours = nn.Transformer(E, H, 2, 2, FF, dtype=kiln.float64, device="cpu", **kw)
    for p in theirs.parameters():  # nonzero biases and norm terms
        p.data.uniform_(-0.5, 0.5)
    load_from_torch(ours, theirs)
    src, tgt = rng.standard_normal((S, E)), rng.standard_normal((T, E))
    pad = np.array([False, False, True, False, True])
    causal = np.triu(np.ones((T, T), bool), 1)
    x, y = t(src).requires_grad_(), t(tgt)
    tx, ty = torch.tensor(src, requires_grad=True), torch.tensor(tgt)
    out = ours(x, y, tgt_mask=causal, src_key_padding_mask=pad, memory_key_padding_mask=pad)
    want = theirs(tx, ty, tgt_mask=torch.tensor(causal), src_key_padding_mask=torch.tensor(pad),
                  memory_key_padding_mask=torch.tensor(pad))
    check_torch(out, want, kiln.float64, "output")
    upstream = rng.standard_normal(out.shape)
    (out * t(upstream)).sum().backward()
    (want * torch.tensor(upstream)).sum().backward()
    check_torch(x.grad, tx.grad, kiln.float64, "source gradient", scale_atol=True)
    grads = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        check_torch(p.grad, grads[name].grad, kiln.float64, f"gradient of {name}",
                    scale_atol=True)


def test_unbatched_encoder_layer_with_3d_attention_mask_matches_torch(torch, rng):
    theirs = torch.nn.TransformerEncoderLayer(E, H, FF, dtype=torch.float64)
    ours = nn.TransformerEncoderLayer(E, H, FF, dtype=kiln.float64)
    load_from_torch(ours, theirs)
    src = rng.standard_normal((S, E))
    mask = rng.standard_normal((H, S, S))  # [nhead, L, S]: one sample's per-head masks
    check_torch(ours(t(src), src_mask=t(mask)),
                theirs(torch.tensor(src), src_mask=torch.tensor(mask)), kiln.float64, "output")


