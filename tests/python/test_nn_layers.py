"""kiln.nn layers (Linear, Conv2d, pooling, norms, Embedding, Dropout, MultiheadAttention, the
activations and losses): each forward pass against a NumPy reference, with their argument
errors."""

import collections
import math

import numpy as np
import pytest

import kiln
from conftest import close, raises
from kiln import nn

mint = kiln.mint


def t(array, dtype=None):
    return kiln.tensor(np.asarray(array), dtype=dtype)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
@pytest.mark.parametrize("bias", [True, False])
def test_linear(rng, dtype, bias):
    fc = nn.Linear(5, 3, bias=bias, dtype=dtype)
    assert fc.weight.shape == (3, 5) and fc.weight.dtype == dtype
    assert (fc.bias is not None) == bias
    x = rng.standard_normal((2, 4, 5)).astype(dtype.name)
    expected = x @ fc.weight.numpy().T + (fc.bias.numpy() if bias else 0)
    close(fc(t(x)), expected, rtol=1e-5 if dtype == kiln.float32 else 1e-12)


@pytest.mark.parametrize("activation, reference", [
    ("relu", lambda y: np.maximum(y, 0)),
    ("tanh", np.tanh),
    (None, lambda y: y),
])
def test_dense(rng, activation, reference):
    dense = nn.Dense(4, 2, activation=activation)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    y = x @ dense.weight.numpy().T + dense.bias.numpy()
    close(dense(t(x)), reference(y))
    assert nn.Dense(4, 2, has_bias=False).bias is None


def test_dense_rejects_unknown_activation():
    with pytest.raises(kiln.KilnValueError, match="unknown activation 'swish'"):
        nn.Dense(2, 2, activation="swish")


def conv2d_reference(x, w, b, stride, padding, dilation, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    x = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    oh = (x.shape[2] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (x.shape[3] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xs = x[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dilation[0]:i * dilation[0] + stride[0] * oh:stride[0],
                           j * dilation[1]:j * dilation[1] + stride[1] * ow:stride[1]]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch,
                                                         w[g * og:(g + 1) * og, :, i, j])
    return out + (b.reshape(1, -1, 1, 1) if b is not None else 0)


@pytest.mark.parametrize("kwargs", [
    dict(kernel_size=3),
    dict(kernel_size=3, padding=1, bias=False),
    dict(kernel_size=(2, 3), stride=2, padding=(1, 0), dilation=(1, 2)),
    dict(kernel_size=1, groups=2),
])
def test_conv2d(rng, kwargs):
    conv = nn.Conv2d(4, 6, dtype=kiln.float64, **kwargs)
    kh, kw = conv.kernel_size
    assert conv.weight.shape == (6, 4 // conv.groups, kh, kw)
    x = rng.standard_normal((2, 4, 7, 8))
    expected = conv2d_reference(x, conv.weight.numpy(),
                                None if conv.bias is None else conv.bias.numpy(), conv.stride,
                                conv.padding, conv.dilation, conv.groups)
    close(conv(t(x)), expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_conv2d_padding_modes(rng, mode):
    # As PyTorch: x padded in the mode (NumPy's reflect / edge / wrap), then no padding.
    conv = nn.Conv2d(3, 4, 3, padding=(1, 2), padding_mode=mode, dtype=kiln.float64)
    x = rng.standard_normal((2, 3, 5, 6))
    padded = np.pad(x, [(0, 0), (0, 0), (1, 1), (2, 2)],
                    mode={"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode])
    expected = conv2d_reference(padded, conv.weight.numpy(), conv.bias.numpy(), (1, 1), (0, 0),
                                (1, 1), 1)
    close(conv(t(x)), expected, rtol=1e-10, atol=1e-10)
    assert f"padding_mode='{mode}'" in repr(conv)
    with pytest.raises(kiln.KilnValueError, match="padding_mode must be one of 'zeros', "
                                                  "'reflect', 'replicate', 'circular', got 'same'"):
        nn.Conv2d(3, 4, 3, padding_mode="same")


def test_cells_with_zero_input_features_build_and_run(rng):
    fc = nn.Linear(0, 3)
    assert fc.weight.shape == (3, 0)
    fc.load_state_dict({"weight": np.zeros((3, 0)), "bias": [1.0, 2.0, 3.0]})
    x = np.zeros((2, 0), np.float32)
    y = fc(t(x))
    close(y, x @ fc.weight.numpy().T + fc.bias.numpy())  # the bias, once per row
    assert y.shape == (2, 3)
    conv = nn.Conv2d(0, 4, 3)
    assert conv.weight.shape == (4, 0, 3, 3)
    np.testing.assert_array_equal(conv(mint.empty(1, 0, 4, 4)).numpy(), np.zeros((1, 4, 2, 2)))


def test_conv2d_checks_groups():
    with pytest.raises(kiln.KilnValueError, match="divisible by groups"):
        nn.Conv2d(3, 6, 3, groups=2)


def test_conv2d_takes_numpy_integers(rng):
    conv = nn.Conv2d(np.int64(4), np.int32(6), np.int64(3), stride=(np.int64(2), 1),
                     padding=np.int8(1), groups=np.int64(2), dtype=kiln.float64)
    assert conv.kernel_size == (3, 3) and conv.stride == (2, 1) and conv.padding == (1, 1)
    assert all(type(v) is int for v in (conv.in_channels, conv.out_channels, conv.groups,
                                         *conv.kernel_size, *conv.stride, *conv.padding))
    x = rng.standard_normal((2, 4, 7, 8))
    expected = conv2d_reference(x, conv.weight.numpy(), conv.bias.numpy(), (2, 1), (1, 1),
                                (1, 1), 2)
    close(conv(t(x)), expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(groups=1.0), kiln.KilnTypeError, "groups must be an int, got float 1.0"),
    (dict(in_channels=2.0), kiln.KilnTypeError, "in_channels must be an int, got float 2.0"),
    (dict(out_channels="2"), kiln.KilnTypeError, "out_channels must be an int, got str '2'"),
    (dict(groups=True), kiln.KilnTypeError, "groups must be an int, got bool True"),
    (dict(kernel_size=True), kiln.KilnTypeError,
     r"kernel_size must be an int or a pair of ints, got True \(bool\)"),
    (dict(kernel_size=2.5), kiln.KilnTypeError,
     r"kernel_size must be an int or a pair of ints, got 2.5 \(float\)"),
    (dict(stride=(1, 2.0)), kiln.KilnTypeError, r"stride\[1\] must be an int, got float 2.0"),
    (dict(padding=None), kiln.KilnTypeError, r"padding must be an int or a pair of ints"),
    (dict(dilation=(1, 1, 1)), kiln.KilnValueError,
     r"dilation must be an int or a pair of ints, got \(1, 1, 1\)"),
], ids=["float-groups", "float-in", "str-out", "bool-groups", "bool-kernel", "float-kernel",
        "float-in-pair", "none-padding", "triple"])
def test_conv2d_argument_errors(kwargs, error, message):
    args = dict(in_channels=2, out_channels=2, kernel_size=3)
    args.update(kwargs)
    with raises(error, match=f"Conv2d: {message}"):
        nn.Conv2d(**args)


@pytest.mark.parametrize("shape", [8, (3, 8)])
def test_layer_norm(rng, shape):
    ln = nn.LayerNorm(shape, dtype=kiln.float64)
    dims = (shape,) if isinstance(shape, int) else shape
    np.testing.assert_array_equal(ln.weight.numpy(), np.ones(dims))
    np.testing.assert_array_equal(ln.bias.numpy(), np.zeros(dims))
    with kiln.no_grad():
        ln.weight[...] = t(rng.standard_normal(dims))
        ln.bias[...] = t(rng.standard_normal(dims))
    x = rng.standard_normal((2, 3, 8))
    axes = tuple(range(x.ndim - len(dims), x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    expected = (x - mean) / np.sqrt(var + 1e-5) * ln.weight.numpy() + ln.bias.numpy()
    close(ln(t(x)), expected, rtol=1e-10, atol=1e-10)


def test_layer_norm_without_affine_or_bias():
    assert list(nn.LayerNorm(4, elementwise_affine=False).parameters()) == []
    assert [n for n, _ in nn.LayerNorm(4, bias=False).named_parameters()] == ["weight"]


def test_rms_norm(rng):
    rms = nn.RMSNorm(6, eps=1e-6, dtype=kiln.float64)
    with kiln.no_grad():
        rms.weight[...] = t(rng.standard_normal(6))
    x = rng.standard_normal((4, 6))
    expected = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * rms.weight.numpy()
    close(rms(t(x)), expected, rtol=1e-10, atol=1e-10)
    assert list(nn.RMSNorm(6, elementwise_affine=False).parameters()) == []
    # A fixed default for every dtype (torch's is the dtype's machine epsilon): documented.
    assert nn.RMSNorm(6).eps == 1e-6 and "eps=1e-6" in nn.RMSNorm.__doc__
    # eps=None is PyTorch's default: the machine epsilon (float64's for float64 input).
    machine = nn.RMSNorm(6, eps=None, elementwise_affine=False)
    expected = x / np.sqrt((x * x).mean(-1, keepdims=True) + 2.0 ** -52)
    close(machine(t(x)), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cell", [nn.LayerNorm, nn.RMSNorm])
@pytest.mark.parametrize("eps", ["1e-5", True, [1e-5]])
def test_norm_cells_check_eps_when_built(cell, eps):
    with raises(kiln.KilnTypeError, match=f"{cell.__name__}: expected eps to be a real number"):
        cell(4, eps=eps)


def test_embedding():
    emb = nn.Embedding(10, 4)
    assert emb.weight.shape == (10, 4)
    idx = np.array([[1, 2, 9], [0, 0, 5]])
    np.testing.assert_array_equal(emb(t(idx, kiln.int64)).numpy(), emb.weight.numpy()[idx])


def test_dropout_drops_only_while_training():
    drop = nn.Dropout(0.25)
    x = mint.ones(200, 100)
    kiln.manual_seed(3)
    y = drop(x).numpy()
    zeros = np.mean(y == 0)
    assert abs(zeros - 0.25) < 0.02, zeros
    np.testing.assert_allclose(y[y != 0], 1 / 0.75, rtol=1e-6)
    drop.eval()
    np.testing.assert_array_equal(drop(x).numpy(), x.numpy())
    with pytest.raises(kiln.KilnValueError, match="p must be in"):
        nn.Dropout(1.5)


def _erf(x):
    return np.vectorize(math.erf)(x)


@pytest.mark.parametrize("cell, reference", [
    (nn.ReLU(), lambda x: np.maximum(x, 0)),
    (nn.GELU(), lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2)))),
    (nn.GELU(approximate="tanh"),
     lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    (nn.SiLU(), lambda x: x / (1 + np.exp(-x))),
    (nn.Tanh(), np.tanh),
    (nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
    (nn.Softmax(dim=-1), lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True)),
    (nn.Identity(), lambda x: x),
])
def test_activations(rng, cell, reference):
    x = rng.standard_normal((3, 5))
    close(cell(t(x)), reference(x), rtol=1e-10, atol=1e-12)
    assert list(cell.parameters()) == []


def test_gelu_checks_approximate():
    with pytest.raises(kiln.KilnValueError, match="approximate"):
        nn.GELU("fast")


def test_sequential(rng):
    a, b = nn.Linear(4, 5), nn.Linear(5, 2)
    net = nn.Sequential(a, nn.ReLU(), b)
    assert len(net) == 3 and net[0] is a and net[-1] is b and list(net)[1] is net[1]
    assert [n for n, _ in net.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    x = rng.standard_normal((3, 4)).astype(np.float32)
    hidden = np.maximum(x @ a.weight.numpy().T + a.bias.numpy(), 0)
    close(net(t(x)), hidden @ b.weight.numpy().T + b.bias.numpy())
    head = net[:2]
    assert isinstance(head, nn.Sequential) and len(head) == 2 and head[0] is a
    net.append(nn.Tanh())
    assert len(net) == 4 and isinstance(net[3], nn.Tanh)
    named = nn.Sequential(collections.OrderedDict([("fc", a), ("act", nn.ReLU())]))
    assert [n for n, _ in named.named_parameters()] == ["fc.weight", "fc.bias"]
    with pytest.raises(kiln.KilnIndexError, match="index 5 out of range"):
        net[5]
    with pytest.raises(kiln.KilnTypeError, match="expected a kiln.nn.Cell"):
        nn.Sequential(nn.ReLU(), "relu")


def mha_reference(mha, q, k, v, attn_mask=None, key_padding_mask=None, is_causal=False):
    """PyTorch's multi-head attention in NumPy, batch first: returns (out, per-head weights)."""
    e, h = mha.embed_dim, mha.num_heads
    d = e // h
    w = mha.in_proj_weight.numpy()
    bias = mha.in_proj_bias.numpy()
    b, l, _ = q.shape
    s = k.shape[1]

    def heads(x, i):
        y = x @ w[i * e:(i + 1) * e].T + bias[i * e:(i + 1) * e]
        return y.reshape(b, -1, h, d).transpose(0, 2, 1, 3)

    scores = heads(q, 0) @ heads(k, 1).transpose(0, 1, 3, 2) / math.sqrt(d)
    if attn_mask is not None:
        mask = attn_mask.reshape(-1, h, l, s) if attn_mask.ndim == 3 else attn_mask
        scores = np.where(mask, -np.inf, scores) if mask.dtype == bool else scores + mask
    if is_causal:
        scores = np.where(np.triu(np.ones((l, s), bool), 1), -np.inf, scores)
    if key_padding_mask is not None:
        scores = np.where(key_padding_mask[:, None, None, :], -np.inf, scores)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = (p @ heads(v, 2)).transpose(0, 2, 1, 3).reshape(b, l, e)
    out = out @ mha.out_proj.weight.numpy().T + mha.out_proj.bias.numpy()
    return out, p


def _randomise_biases(mha, rng):
    with kiln.no_grad():
        mha.in_proj_bias[...] = t(rng.standard_normal(mha.in_proj_bias.shape))
        mha.out_proj.bias[...] = t(rng.standard_normal(mha.out_proj.bias.shape))


@pytest.mark.parametrize("batch_first", [True, False])
def test_multihead_attention_self_and_cross(rng, batch_first):
    mha = nn.MultiheadAttention(8, 2, batch_first=batch_first, dtype=kiln.float64)
    _randomise_biases(mha, rng)
    q = rng.standard_normal((3, 4, 8))
    kv = rng.standard_normal((3, 6, 8))
    expected, p = mha_reference(mha, q, kv, kv)
    to = (lambda a: a) if batch_first else (lambda a: a.transpose(1, 0, 2))
    out, weights = mha(t(to(q)), t(to(kv)), t(to(kv)))
    close(out, to(expected), rtol=1e-10, atol=1e-10)
    close(weights, p.mean(1), rtol=1e-10, atol=1e-12)
    out, weights = mha(t(to(q)), t(to(kv)), t(to(kv)), average_attn_weights=False)
    close(weights, p, rtol=1e-10, atol=1e-12)
    assert mha(t(to(q)), t(to(q)), t(to(q)), need_weights=False)[1] is None


def test_multihead_attention_masks(rng):
    mha = nn.MultiheadAttention(8, 4, batch_first=True, dtype=kiln.float64)
    _randomise_biases(mha, rng)
    x = rng.standard_normal((2, 5, 8))
    bool_mask = rng.random((5, 5)) < 0.3
    np.fill_diagonal(bool_mask, False)  # every row keeps a key
    float_mask = rng.standard_normal((2 * 4, 5, 5))
    padding = np.array([[False] * 5, [False, False, False, True, True]])
    cases = [dict(attn_mask=bool_mask), dict(attn_mask=float_mask), dict(is_causal=True),
             dict(key_padding_mask=padding), dict(is_causal=True, key_padding_mask=padding)]
    for case in cases:
        expected, p = mha_reference(mha, x, x, x, **case)
        # the masks as kiln tensors, as NumPy arrays (bool stays bool) and, bool ones, as nested
        # lists (a list of floats would become float32)
        for convert in (t, lambda a: a, lambda a: a.tolist() if a.dtype == bool else a):
            given = {k: (convert(v) if isinstance(v, np.ndarray) else v) for k, v in case.items()}
            out, weights = mha(t(x), t(x), t(x), **given)
            close(out, expected, rtol=1e-10, atol=1e-10)
            close(weights, p.mean(1), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name, mask", [
    ("key_padding_mask", kiln.tensor([[0, 0, 1, 1]])),
    ("key_padding_mask", np.array([[0, 0, 1, 1]], np.int32)),
    ("attn_mask", mint.zeros(4, 4, dtype=kiln.int64)),
    ("attn_mask", mint.zeros(4, 4, dtype=kiln.uint8)),
], ids=["padding-int64", "padding-numpy-int32", "attn-int64", "attn-uint8"])
def test_multihead_attention_refuses_integer_masks(name, mask):
    # Refused as in PyTorch: added to the scores, a 0/1 mask meant as bool shifted the masked
    # scores by 1 and masked nothing.
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    x = mint.ones(1, 4, 8)
    dtype = mask.dtype.name if isinstance(mask, kiln.Tensor) else mask.dtype
    with raises(kiln.DTypeError, match=f"expected a bool {name} \\(True = masked\\) or a "
                                       f"floating-point one .*got dtype {dtype}"):
        mha(x, x, x, **{name: mask})


@pytest.mark.parametrize("batch_first, query, key, value, message", [
    (True, (2, 4, 6), (2, 4), (2, 4, 6), r"expected a key \[batch, seq, 6\] .*got \[2, 4\]"),
    (True, (2, 4, 6), (2, 3, 6), (3, 6), r"expected a value \[batch, seq, 6\] .*got \[3, 6\]"),
    (True, (2, 4, 6), (2, 3, 5), (2, 3, 5), r"expected a key \[batch, seq, 6\]"),
    (False, (4, 6), (4, 2, 6), (4, 2, 6),
     r"expected a key \[seq, 6\] \(unbatched, as the query is 2-d\), got \[4, 2, 6\]"),
    (False, (4, 2, 6), (6,), (6,), r"expected a key \[seq, batch, 6\] .*got \[6\]"),
    (True, (2, 4, 6), (1, 3, 6), (1, 3, 6),
     r"expected a key and value of one shape with the query's batch size \(2\), got key "
     r"\[1, 3, 6\]"),
    (False, (4, 2, 6), (3, 2, 6), (5, 2, 6),
     r"expected a key and value of one shape .*got key \[3, 2, 6\] and value \[5, 2, 6\]"),
], ids=["2d-key", "2d-value", "key-features", "2d-query-3d-key", "1d-key-seq-first",
        "key-batch-1", "key-value-lengths"])
def test_multihead_attention_checks_query_key_and_value(batch_first, query, key, value,
                                                         message):
    mha = nn.MultiheadAttention(6, 3, batch_first=batch_first)
    with raises(kiln.ShapeError, match=f"MultiheadAttention: {message}"):
        mha(mint.ones(*query), mint.ones(*key), mint.ones(*value))


def test_multihead_attention_layout_and_errors():
    mha = nn.MultiheadAttention(6, 3)
    assert [(n, p.shape) for n, p in mha.named_parameters()] == [
        ("in_proj_weight", (18, 6)), ("in_proj_bias", (18,)), ("out_proj.weight", (6, 6)),
        ("out_proj.bias", (6,))]
    np.testing.assert_array_equal(mha.in_proj_bias.numpy(), 0)
    np.testing.assert_array_equal(mha.out_proj.bias.numpy(), 0)
    bound = math.sqrt(6 / (6 + 18))
    assert np.abs(mha.in_proj_weight.numpy()).max() <= bound
    assert [n for n, _ in nn.MultiheadAttention(6, 3, bias=False).named_parameters()] == [
        "in_proj_weight", "out_proj.weight"]
    with pytest.raises(kiln.KilnValueError, match="divisible by num_heads"):
        nn.MultiheadAttention(6, 4)
    with pytest.raises(kiln.KilnValueError, match=r"embed_dim \(0\) must be positive"):
        nn.MultiheadAttention(0, 1)
    x = mint.ones(2, 4, 6)
    with pytest.raises(kiln.ShapeError, match="attn_mask must have shape"):
        nn.MultiheadAttention(6, 3, batch_first=True)(x, x, x, attn_mask=mint.zeros(3, 3))
    with pytest.raises(kiln.ShapeError, match="key_padding_mask must have shape"):
        nn.MultiheadAttention(6, 3, batch_first=True)(
            x, x, x, key_padding_mask=mint.zeros(2, 5, dtype=kiln.bool_))
    with pytest.raises(kiln.ShapeError, match="expected a query"):
        nn.MultiheadAttention(6, 3, batch_first=True)(mint.ones(2, 4, 5), x, x)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses(rng, reduction):
    logits = rng.standard_normal((6, 4))
    labels = rng.integers(0, 4, size=6)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    ce = -log_p[np.arange(6), labels]
    reduce = {"mean": np.mean, "sum": np.sum, "none": lambda a: a}[reduction]
    close(nn.CrossEntropyLoss(reduction)(t(logits), t(labels, kiln.int64)), reduce(ce),
          rtol=1e-10, atol=1e-12)
    a, b = rng.standard_normal((3, 5)), rng.standard_normal((3, 5))
    close(nn.MSELoss(reduction)(t(a), t(b)), reduce((a - b) ** 2), rtol=1e-10, atol=1e-12)


def test_loss_options_and_errors(rng):
    logits = rng.standard_normal((4, 3))
    labels = np.array([0, 2, -100, 1])
    kept = labels != -100
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = -log_p[np.arange(4)[kept], labels[kept]].mean()
    close(nn.CrossEntropyLoss()(t(logits), t(labels, kiln.int64)), expected, rtol=1e-10)
    smoothing = 0.1
    targets = np.array([0, 2, 1, 1])
    smooth = -(1 - smoothing) * log_p[np.arange(4), targets] - smoothing * log_p.mean(-1)
    close(nn.CrossEntropyLoss(label_smoothing=smoothing)(t(logits), t(targets, kiln.int64)),
          smooth.mean(), rtol=1e-10)
    with pytest.raises(kiln.KilnValueError, match="reduction must be one of"):
        nn.MSELoss("avg")
    with pytest.raises(kiln.KilnValueError, match="reduction must be one of"):
        nn.CrossEntropyLoss("total")


def test_layers_initialisers_and_optimizers_have_docstrings():
    # A class's own docstring: one inherited from Cell would tell help() nothing about the layer.
    classes = [c for c in (getattr(nn, name) for name in nn.__all__) if isinstance(c, type)]
    classes += [kiln.optim.Optimizer, kiln.optim.lr_scheduler.CosineAnnealingLR]
    functions = [getattr(nn.init, name) for name in nn.init.__all__]
    functions += [nn.Cell.train, nn.Cell.eval, nn.Cell.parameters, nn.Cell.modules,
                  nn.Sequential.append, kiln.optim.Optimizer.step, kiln.optim.Optimizer.zero_grad,
                  kiln.optim.Optimizer.state_dict, kiln.optim.Optimizer.load_state_dict]
    missing = [c.__qualname__ for c in classes if not (c.__dict__.get("__doc__") or "").strip()]
    missing += [f.__qualname__ for f in functions if not (f.__doc__ or "").strip()]
    assert missing == []
