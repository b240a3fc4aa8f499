"""kiln.nn's transformer layers (kiln/nn/transformer.py): shapes, masks, eval-mode determinism,
pre- and post-norm, state dict keys and errors, against a NumPy reference; outputs and
parameter gradients against PyTorch's layers loaded with the same state dict (skipped without
PyTorch); and kiln.jit of an encoder against eager."""

import numpy as np
import pytest

import kiln
from conftest import check_torch, close, raises, t
from kiln import nn
from kiln.nn.transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,
                                 TransformerEncoder, TransformerEncoderLayer)

mint = kiln.mint

# Batch, source and target lengths, d_model, heads and feed-forward width of the small models.
B, S, T, E, H, FF = 3, 5, 4, 8, 2, 16

ENCODER_LAYER_KEYS = [
    "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
    "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
    "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"]
DECODER_LAYER_KEYS = ENCODER_LAYER_KEYS[:4] + [
    "multihead_attn.in_proj_weight", "multihead_attn.in_proj_bias",
    "multihead_attn.out_proj.weight", "multihead_attn.out_proj.bias"] + ENCODER_LAYER_KEYS[4:] + [
    "norm3.weight", "norm3.bias"]


def layout(array, batch_first):
    """A [batch, seq, ...] array in the layout ``batch_first`` asks for."""
    return array if batch_first else np.ascontiguousarray(array.swapaxes(0, 1))


def padding(batch, length):
    """A key padding mask [batch, length]: True marks the last keys of every other sequence
    (the first key always stays, so no query row is fully masked)."""
    mask = np.zeros((batch, length), bool)
    mask[1::2, length - 2:] = True
    return mask


def randomised(cell, rng):
    """``cell`` with every parameter drawn from U(-0.5, 0.5) (nonzero biases and norm terms, so
    each one shows in the outputs), in eval mode."""
    cell.load_state_dict({k: rng.uniform(-0.5, 0.5, v.shape) for k, v in cell.state_dict().items()})
    return cell.eval()


def encoder_layer(batch_first=True, norm_first=False, **kwargs):
    return TransformerEncoderLayer(E, H, FF, batch_first=batch_first, norm_first=norm_first,
                                   dtype=kiln.float64, **kwargs)


def decoder_layer(batch_first=True, norm_first=False, **kwargs):
    return TransformerDecoderLayer(E, H, FF, batch_first=batch_first, norm_first=norm_first,
                                   dtype=kiln.float64, **kwargs)


# ---------------------------------------------------------------------------------------------
# NumPy reference: [batch, seq, E] arrays, masks additive [batch or 1, 1, L, S]


def np_layer_norm(sd, name, x):
    mean = x.mean(-1, keepdims=True)
    return ((x - mean) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * sd[name + ".weight"]
            + sd[name + ".bias"])


def np_attention(sd, name, query, memory, mask):
    w, b = sd[name + ".in_proj_weight"], sd[name + ".in_proj_bias"]

    def heads(x, i):
        y = x @ w[i * E:(i + 1) * E].T + b[i * E:(i + 1) * E]
        return y.reshape(x.shape[0], x.shape[1], H, E // H).transpose(0, 2, 1, 3)

    scores = heads(query, 0) @ heads(memory, 1).transpose(0, 1, 3, 2) / np.sqrt(E // H) + mask
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = (p @ heads(memory, 2)).transpose(0, 2, 1, 3).reshape(query.shape)
    return out @ sd[name + ".out_proj.weight"].T + sd[name + ".out_proj.bias"]


def np_layer(cell, x, branches, norm_first):
    """The residual branches ``branches`` (functions of the state dict and x) applied in turn,
    branch i with norm<i + 1>, pre- or post-norm."""
    sd = {k: v.numpy() for k, v in cell.state_dict().items()}
    for i, branch in enumerate(branches, 1):
        if norm_first:
            x = x + branch(sd, np_layer_norm(sd, f"norm{i}", x))
        else:
            x = np_layer_norm(sd, f"norm{i}", x + branch(sd, x))
    return x


def np_feed_forward(sd, x):
    hidden = np.maximum(x @ sd["linear1.weight"].T + sd["linear1.bias"], 0)
    return hidden @ sd["linear2.weight"].T + sd["linear2.bias"]


def additive(length, keys, causal=False, key_padding=None):
    """The masks as one array added to the scores [batch or 1, 1, length, keys]."""
    mask = np.zeros((1, 1, length, keys))
    if causal:
        mask = mask + np.triu(np.full((length, keys), -np.inf), 1)
    if key_padding is not None:
        mask = mask + np.where(key_padding, -np.inf, 0.0)[:, None, None, :]
    return mask


# ---------------------------------------------------------------------------------------------
# Without PyTorch


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
@pytest.mark.parametrize("batch_first", [True, False], ids=["batch-first", "seq-first"])
def test_encoder_layer_matches_numpy(rng, batch_first, norm_first):
    layer = randomised(encoder_layer(batch_first, norm_first), rng)
    x = rng.standard_normal((B, S, E))
    pad = padding(B, S)
    mask = additive(S, S, causal=True, key_padding=pad)
    expected = np_layer(layer, x, [lambda sd, h: np_attention(sd, "self_attn", h, h, mask),
                                   np_feed_forward], norm_first)
    out = layer(t(layout(x, batch_first)), src_key_padding_mask=pad, is_causal=True)
    assert out.shape == layout(x, batch_first).shape and out.dtype == kiln.float64
    close(out, layout(expected, batch_first), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
@pytest.mark.parametrize("batch_first", [True, False], ids=["batch-first", "seq-first"])
def test_decoder_layer_matches_numpy(rng, batch_first, norm_first):
    layer = randomised(decoder_layer(batch_first, norm_first), rng)
    tgt, memory = rng.standard_normal((B, T, E)), rng.standard_normal((B, S, E))
    tgt_pad, memory_pad = padding(B, T), padding(B, S)
    self_mask = additive(T, T, causal=True, key_padding=tgt_pad)
    cross_mask = additive(T, S, key_padding=memory_pad)
    expected = np_layer(layer, tgt, [
        lambda sd, h: np_attention(sd, "self_attn", h, h, self_mask),
        lambda sd, h: np_attention(sd, "multihead_attn", h, memory, cross_mask),
        np_feed_forward], norm_first)
    out = layer(t(layout(tgt, batch_first)), t(layout(memory, batch_first)),
                tgt_mask=Transformer.generate_square_subsequent_mask(T, dtype=kiln.float64),
                tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=memory_pad,
                tgt_is_causal=True)
    assert out.shape == layout(tgt, batch_first).shape
    close(out, layout(expected, batch_first), rtol=1e-10, atol=1e-10)


def test_stacks_and_transformer_shapes(rng):
    src, tgt = t(rng.standard_normal((S, B, E))), t(rng.standard_normal((T, B, E)))
    encoder = TransformerEncoder(encoder_layer(batch_first=False), 3)
    decoder = TransformerDecoder(decoder_layer(batch_first=False), 2,
                                 nn.LayerNorm(E, dtype=kiln.float64))
    assert encoder(src).shape == (S, B, E)
    out = decoder(tgt, src)
    assert out.shape == (T, B, E) and out.dtype == kiln.float64
    model = Transformer(E, H, 2, 1, FF, batch_first=True, dtype=kiln.float64)
    out = model(t(rng.standard_normal((B, S, E))), t(rng.standard_normal((B, T, E))),
                tgt_is_causal=True)
    assert out.shape == (B, T, E) and out.dtype == kiln.float64


def test_stacks_apply_each_copy_then_the_norm(rng):
    layer = randomised(encoder_layer(), rng)
    norm = randomised(nn.LayerNorm(E, dtype=kiln.float64), rng)
    encoder = TransformerEncoder(layer, 2, norm).eval()
    assert encoder.num_layers == 2 and len(encoder.layers) == 2
    # Deep copies: equal values, tensors of their own (PyTorch's _get_clones).
    first, second = encoder.layers
    assert first is not layer and second is not first
    assert first.linear1.weight is not second.linear1.weight
    np.testing.assert_array_equal(first.linear1.weight.numpy(), layer.linear1.weight.numpy())
    randomised(second, rng)
    x = t(rng.standard_normal((B, S, E)))
    close(encoder(x, is_causal=True), norm(second(first(x, is_causal=True), is_causal=True)),
          rtol=1e-12, atol=1e-12)
    assert TransformerEncoder(layer, 0)(x) is x


def test_masks_hide_later_positions_and_padded_keys(rng):
    layer = randomised(encoder_layer(), rng)
    x = rng.standard_normal((B, S, E))
    changed = x.copy()
    changed[:, -1] += 1.0  # the last position, which is padded in every other sequence
    pad = padding(B, S)
    causal = layer(t(x), is_causal=True).numpy()
    np.testing.assert_allclose(layer(t(changed), is_causal=True).numpy()[:, :-1],
                               causal[:, :-1], rtol=1e-12, atol=1e-12)
    assert not np.allclose(layer(t(changed)).numpy()[:, 0], layer(t(x)).numpy()[:, 0])
    padded = layer(t(x), src_key_padding_mask=pad).numpy()
    again = layer(t(changed), src_key_padding_mask=pad).numpy()
    np.testing.assert_allclose(again[1::2, :-2], padded[1::2, :-2], rtol=1e-12, atol=1e-12)
    # The causal mask as is_causal, as PyTorch's float mask and as a bool mask: one result.
    for mask in (Transformer.generate_square_subsequent_mask(S), np.triu(np.ones((S, S), bool), 1)):
        close(layer(t(x), src_mask=mask), causal, rtol=1e-12, atol=1e-12)
        close(layer(t(x), src_mask=mask, is_causal=True), causal, rtol=1e-12, atol=1e-12)


def test_generate_square_subsequent_mask():
    mask = Transformer.generate_square_subsequent_mask(4)
    assert mask.dtype == kiln.float32
    np.testing.assert_array_equal(mask.numpy(), np.triu(np.full((4, 4), -np.inf), 1))
    assert Transformer.generate_square_subsequent_mask(3, dtype=kiln.float64).dtype == kiln.float64


def test_eval_mode_is_deterministic_and_training_drops(rng):
    layer = TransformerEncoderLayer(E, H, FF, dropout=0.5, batch_first=True)
    x = t(rng.standard_normal((B, S, E)).astype(np.float32))
    layer.eval()
    first = layer(x).numpy()
    np.testing.assert_array_equal(layer(x).numpy(), first)
    layer.train()
    assert not np.allclose(layer(x).numpy(), first)


def test_norm_first_and_post_norm_differ(rng):
    post = randomised(encoder_layer(norm_first=False), rng)
    pre = encoder_layer(norm_first=True).eval()
    pre.load_state_dict(post.state_dict())
    x = t(rng.standard_normal((B, S, E)))
    assert not np.allclose(pre(x).numpy(), post(x).numpy())


def test_state_dict_keys_are_pytorchs():
    assert list(encoder_layer().state_dict()) == ENCODER_LAYER_KEYS
    assert list(decoder_layer().state_dict()) == DECODER_LAYER_KEYS
    keys = list(TransformerEncoder(encoder_layer(), 2, nn.LayerNorm(E)).state_dict())
    assert keys == ([f"layers.0.{k}" for k in ENCODER_LAYER_KEYS]
                    + [f"layers.1.{k}" for k in ENCODER_LAYER_KEYS] + ["norm.weight", "norm.bias"])
    model = Transformer(E, H, 1, 1, FF)
    assert list(model.state_dict()) == (
        [f"encoder.layers.0.{k}" for k in ENCODER_LAYER_KEYS] + ["encoder.norm.weight",
                                                                 "encoder.norm.bias"]
        + [f"decoder.layers.0.{k}" for k in DECODER_LAYER_KEYS] + ["decoder.norm.weight",
                                                                   "decoder.norm.bias"])
    # bias=False: no bias in the Linears, the attentions or the LayerNorms (PyTorch's keys).
    keys = list(TransformerEncoderLayer(E, H, FF, bias=False).state_dict())
    assert keys == [k for k in ENCODER_LAYER_KEYS if not k.endswith("bias")]


def test_transformer_initialises_matrices_by_xavier_uniform():
    kiln.manual_seed(0)
    model = Transformer(E, H, 1, 1, FF)
    for name, p in model.named_parameters():
        if p.ndim > 1:
            bound = np.sqrt(6 / sum(p.shape))
            assert np.abs(p.numpy()).max() <= bound, name
    linear1 = model.encoder.layers[0].linear1.weight.numpy()
    # xavier_uniform_ over [FF, E] spreads wider than a Linear's U(+-1/sqrt(E)) would
    assert np.abs(linear1).max() > 1 / np.sqrt(E)


def test_activations(rng):
    x = t(rng.standard_normal((B, S, E)))
    relu = randomised(encoder_layer(), rng)
    state = relu.state_dict()
    gelu = encoder_layer(activation="gelu").eval()
    cell = encoder_layer(activation=nn.GELU()).eval()
    function = encoder_layer(activation=lambda h: mint.gelu(h, "none")).eval()
    for other in (gelu, cell, function):
        other.load_state_dict(state)
    close(cell(x), gelu(x).numpy(), rtol=1e-12, atol=1e-12)
    close(function(x), gelu(x).numpy(), rtol=1e-12, atol=1e-12)
    assert not np.allclose(gelu(x).numpy(), relu(x).numpy())
    # A cell is a sub-cell, as in PyTorch; it has no parameters, so the keys stay.
    assert dict(cell.named_children())["activation"] is cell.activation
    assert list(cell.state_dict()) == ENCODER_LAYER_KEYS


@pytest.mark.parametrize("make, error, message", [
    (lambda: TransformerEncoderLayer(6, 4), kiln.KilnValueError,
     r"TransformerEncoderLayer: d_model \(6\) must be divisible by nhead \(4\)"),
    (lambda: TransformerDecoderLayer(8, 0), kiln.KilnValueError,
     "TransformerDecoderLayer: nhead must be at least 1, got 0"),
    (lambda: TransformerEncoderLayer(8.0, 2), kiln.KilnTypeError,
     "TransformerEncoderLayer: d_model must be an int, got float 8.0"),
    (lambda: TransformerEncoderLayer(8, 2, activation="tanh"), kiln.KilnValueError,
     "TransformerEncoderLayer: activation must be 'relu', 'gelu' or a callable, got 'tanh'"),
    (lambda: TransformerDecoderLayer(8, 2, activation=3), kiln.KilnTypeError,
     "TransformerDecoderLayer: activation must be 'relu', 'gelu' or a callable, got int 3"),
    (lambda: TransformerEncoderLayer(8, 2, norm_first=1), kiln.KilnTypeError,
     "TransformerEncoderLayer: norm_first must be a bool, got int 1"),
    (lambda: TransformerEncoder("layer", 2), kiln.KilnTypeError,
     "TransformerEncoder: expected a kiln.nn.Cell as the layer to copy num_layers times, got str"),
    (lambda: TransformerDecoder(decoder_layer(), -1), kiln.KilnValueError,
     "TransformerDecoder: num_layers must be at least 0, got -1"),
], ids=["indivisible", "no-heads", "float-d-model", "activation-name", "activation-kind",
        "norm-first-int", "stack-of-str", "negative-layers"])
def test_construction_errors(make, error, message):
    with pytest.raises(error, match=message):
        make()


@pytest.mark.parametrize("batch_first, shapes, message", [
    (False, [(1, S, B, E)], r"expected a 3-D src \[seq, batch, 8\] \(batch_first=False\) or a "
                            r"2-D src \[seq, 8\] \(unbatched\), got \[1, 5, 3, 8\]$"),
    (True, [(B, S, 6)], r"expected a 3-D src \[batch, seq, 8\] .*got \[3, 5, 6\]"),
    (True, [(B, T, E), (B + 1, S, E)],
     r"TransformerDecoderLayer: expected tgt and memory of one batch size \(dim 0, "
     r"batch_first=True\), got tgt \[3, 4, 8\] and memory \[4, 5, 8\]"),
    (False, [(T, B, E), (S, 2, E)], r"expected tgt and memory of one batch size \(dim 1"),
    (True, [(B, T, E), (B, S)], r"expected a 3-D memory \[batch, seq, 8\]"),
], ids=["4d", "features", "memory-batch", "memory-batch-seq-first", "2d-memory"])
def test_input_shape_errors(batch_first, shapes, message):
    make = encoder_layer if len(shapes) == 1 else decoder_layer
    layer = make(batch_first=batch_first)
    with raises(kiln.ShapeError, match=message):
        layer(*(mint.ones(*shape, dtype=kiln.float64) for shape in shapes))


def test_transformer_input_errors():
    model = Transformer(E, H, 1, 1, FF, batch_first=True)
    with raises(kiln.ShapeError, match=r"Transformer: expected src and tgt of one batch size "
                                       r"\(dim 0, batch_first=True\), got src \[2, 5, 8\] and "
                                       r"tgt \[3, 4, 8\]"):
        model(mint.ones(2, S, E), mint.ones(3, T, E))
    with raises(kiln.ShapeError, match=r"Transformer: expected a 3-D tgt \[batch, seq, 8\]"):
        model(mint.ones(B, S, E), mint.ones(B, T, 4))
    with raises(kiln.KilnTypeError, match="Transformer: expected src to be a kiln.Tensor, got "
                                          "ndarray"):
        model(np.ones((B, S, E), np.float32), mint.ones(B, T, E))


def test_jit_of_an_eval_encoder_equals_eager(rng):
    norm = nn.LayerNorm(E, dtype=kiln.float64)
    encoder = randomised(TransformerEncoder(encoder_layer(), 2, norm), rng)
    x = t(rng.standard_normal((B, S, E)))
    pad = t(padding(B, S))
    step = kiln.jit(lambda x, pad: encoder(x, src_key_padding_mask=pad, is_causal=True))
    expected = encoder(x, src_key_padding_mask=pad, is_causal=True).numpy()
    close(step(x, pad), expected, rtol=1e-10, atol=1e-12)
    close(step(x, pad), expected, rtol=1e-10, atol=1e-12)  # the built graph, again
    assert step.cache_info().misses == 1


# ---------------------------------------------------------------------------------------------
# Against PyTorch


def load_from_torch(cell, module):
    """Copies ``module``'s state dict into ``cell`` through NumPy; the keys must be the same, in
    the same order. Both end in eval mode (no dropout)."""
    state = {k: v.detach().numpy() for k, v in module.state_dict().items()}
    assert list(cell.state_dict()) == list(state)
    cell.load_state_dict(state)
    cell.eval()
    module.eval()


def check_against_torch(torch, cell, module, kiln_args, torch_args, rng, **kwargs):
    """The outputs of ``cell(*kiln_args, **kwargs)`` and ``module(*torch_args, **kwargs)``
    (each keyword a pair: kiln's value, torch's), then every parameter's gradient and the first
    input's for one random upstream gradient."""
    out = cell(*kiln_args, **{k: v[0] for k, v in kwargs.items()})
    expected = module(*torch_args, **{k: v[1] for k, v in kwargs.items()})
    check_torch(out, expected, kiln.float64, "output")
    upstream = rng.standard_normal(out.shape)
    (out * t(upstream)).sum().backward()
    (expected * torch.tensor(upstream)).sum().backward()
    grads = {name: p.grad for name, p in module.named_parameters()}
    for name, p in cell.named_parameters():
        check_torch(p.grad, grads[name], kiln.float64, f"gradient of {name}", scale_atol=True)
    check_torch(kiln_args[0].grad, torch_args[0].grad, kiln.float64, "input gradient",
                scale_atol=True)


def inputs(torch, rng, batch_first, *shapes):
    """Random [batch, seq, E] inputs of ``shapes`` in the layout, as kiln and torch leaves."""
    arrays = [layout(rng.standard_normal(shape), batch_first) for shape in shapes]
    return ([t(a).requires_grad_() for a in arrays],
            [torch.tensor(a).requires_grad_() for a in arrays])


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
@pytest.mark.parametrize("batch_first", [True, False], ids=["batch-first", "seq-first"])
def test_encoder_matches_torch(torch, rng, batch_first, norm_first):
    theirs = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(E, H, FF, batch_first=batch_first,
                                         norm_first=norm_first, dtype=torch.float64),
        2, torch.nn.LayerNorm(E, dtype=torch.float64), enable_nested_tensor=False)
    ours = TransformerEncoder(encoder_layer(batch_first, norm_first), 2,
                              nn.LayerNorm(E, dtype=kiln.float64))
    for p in theirs.parameters():  # nonzero biases and norm terms, distinct layers
        p.data.uniform_(-0.5, 0.5)
    load_from_torch(ours, theirs)
    ks, ts = inputs(torch, rng, batch_first, (B, S, E))
    pad = padding(B, S)
    causal = np.triu(np.ones((S, S), bool), 1)
    check_against_torch(torch, ours, theirs, ks, ts, rng,
                        mask=(causal, torch.tensor(causal)),
                        src_key_padding_mask=(pad, torch.tensor(pad)), is_causal=(True, True))


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
@pytest.mark.parametrize("batch_first", [True, False], ids=["batch-first", "seq-first"])
def test_decoder_matches_torch(torch, rng, batch_first, norm_first):
    theirs = torch.nn.TransformerDecoder(
        torch.nn.TransformerDecoderLayer(E, H, FF, batch_first=batch_first,
                                         norm_first=norm_first, dtype=torch.float64),
        2, torch.nn.LayerNorm(E, dtype=torch.float64))
    ours = TransformerDecoder(decoder_layer(batch_first, norm_first), 2,
                              nn.LayerNorm(E, dtype=kiln.float64))
    for p in theirs.parameters():
        p.data.uniform_(-0.5, 0.5)
    load_from_torch(ours, theirs)
    ks, ts = inputs(torch, rng, batch_first, (B, T, E), (B, S, E))
    causal = torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64)
    our_causal = Transformer.generate_square_subsequent_mask(T, dtype=kiln.float64)
    # A floating target padding mask (of the causal mask's kind, as PyTorch wants) and a bool
    # memory padding mask.
    tgt_pad = np.where(padding(B, T), -np.inf, 0.0)
    memory_pad = padding(B, S)
    check_against_torch(torch, ours, theirs, ks, ts, rng,
                        tgt_mask=(our_causal, causal),
                        tgt_key_padding_mask=(tgt_pad, torch.tensor(tgt_pad)),
                        memory_key_padding_mask=(memory_pad, torch.tensor(memory_pad)),
                        tgt_is_causal=(True, True))


def test_transformer_matches_torch(torch, rng):
    torch.manual_seed(0)
    theirs = torch.nn.Transformer(E, H, 2, 2, FF, activation="gelu", batch_first=True,
                                  dtype=torch.float64)
    ours = Transformer(E, H, 2, 2, FF, activation="gelu", batch_first=True, dtype=kiln.float64)
    load_from_torch(ours, theirs)
    ks, ts = inputs(torch, rng, True, (B, S, E), (B, T, E))
    pad = padding(B, S)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64)
    check_against_torch(torch, ours, theirs, ks, ts, rng,
                        tgt_mask=(causal.numpy(), causal),
                        src_key_padding_mask=(pad, torch.tensor(pad)),
                        memory_key_padding_mask=(pad, torch.tensor(pad)))


def test_generate_square_subsequent_mask_matches_torch(torch):
    np.testing.assert_array_equal(Transformer.generate_square_subsequent_mask(5).numpy(),
                                  torch.nn.Transformer.generate_square_subsequent_mask(5).numpy())


def test_a_fully_padded_sequence_attends_to_nothing_and_keeps_gradients_finite():
    # One batch element entirely padding: softmax over all -inf scores was NaN, and its gradient
    # spread NaN into every weight even when the loss left that element out.
    kiln.manual_seed(0)
    layer = TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    x = kiln.mint.randn(2, 3, 8)
    pad = kiln.tensor(np.array([[False, False, True], [True, True, True]]))
    y = layer(x, src_key_padding_mask=pad)
    assert not np.isnan(y.numpy()).any()
    kiln.mint.sum(y[0]).backward()
    for name, p in layer.named_parameters():
        assert p.grad is not None and np.isfinite(p.grad.numpy()).all(), name
    mha = kiln.nn.MultiheadAttention(8, 2, batch_first=True)
    _, weights = mha(x, x, x, key_padding_mask=pad)
    np.testing.assert_array_equal(weights.numpy()[1], 0.0)
    np.testing.assert_allclose(weights.numpy()[0].sum(-1), 1.0, rtol=1e-6)
