"""PyTorch behaviours of kiln.nn that ported code relies on, second batch: MultiheadAttention's
``kdim`` / ``vdim`` (separate q/k/v projection weights), ``add_bias_kv`` and ``add_zero_attn``
(kiln/nn/attention.py); embedding's ``scale_grad_by_freq`` (kiln/nn/functional.py,
kiln/nn/embedding.py), also under kiln.jit; and kl_div's "batchmean" under
kiln.jit(dynamic=True). Torch-free checks against NumPy and closed forms first, then comparisons
with PyTorch through the ``torch`` fixture."""

import copy
import math
import pickle
import warnings

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from conftest import check_torch, close, raises, t
from kiln import nn

mint = kiln.mint

E, H = 8, 2  # embed_dim, num_heads
B, L, S = 3, 4, 5  # batch, query length, key length


# ------------------------------------------------------------------------------------------------
# MultiheadAttention: kdim / vdim, add_bias_kv, add_zero_attn


def mha_numpy(state, q, k, v, bias_kv=False, zero_attn=False, attn_mask=None,
              key_padding_mask=None):
    """PyTorch's multi-head attention in NumPy, batch first, from a state dict of arrays:
    returns (out, per-head weights [B, H, L, S'])."""
    if "in_proj_weight" in state:
        wq, wk, wv = np.split(state["in_proj_weight"], 3)
    else:
        wq, wk, wv = state["q_proj_weight"], state["k_proj_weight"], state["v_proj_weight"]
    bq, bk, bv = np.split(state["in_proj_bias"], 3)
    b, l, _ = q.shape
    s = k.shape[1]
    pq, pk, pv = q @ wq.T + bq, k @ wk.T + bk, v @ wv.T + bv
    mask = np.zeros((b, H, l, s))
    if attn_mask is not None:  # [L, S] or [B * H, L, S]: bool (True = masked) or added
        attn_mask = attn_mask.reshape((-1, H, l, s) if attn_mask.ndim == 3 else (l, s))
        mask = mask + (np.where(attn_mask, -np.inf, 0.0) if attn_mask.dtype == bool
                       else attn_mask)
    if key_padding_mask is not None:
        mask = mask + np.where(key_padding_mask, -np.inf, 0.0)[:, None, None, :]
    extra = []
    if bias_kv:
        extra.append((np.broadcast_to(state["bias_k"], (b, 1, E)),
                      np.broadcast_to(state["bias_v"], (b, 1, E))))
    if zero_attn:
        extra.append((np.zeros((b, 1, E)), np.zeros((b, 1, E))))
    for ek, ev in extra:
        pk, pv = np.concatenate([pk, ek], 1), np.concatenate([pv, ev], 1)
        mask = np.concatenate([mask, np.zeros((b, H, l, 1))], -1)

    def heads(x):
        return x.reshape(b, -1, H, E // H).transpose(0, 2, 1, 3)

    scores = heads(pq) @ heads(pk).transpose(0, 1, 3, 2) / math.sqrt(E // H) + mask
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = (p @ heads(pv)).transpose(0, 2, 1, 3).reshape(b, l, E)
    return out @ state["out_proj.weight"].T + state["out_proj.bias"], p


def randomised(mha, rng):
    """``mha`` with every parameter drawn from U(-0.5, 0.5) (nonzero biases); its state dict as
    NumPy arrays."""
    state = {name: rng.uniform(-0.5, 0.5, p.shape) for name, p in mha.state_dict().items()}
    mha.load_state_dict(state)
    return state


OPTIONS = [dict(kdim=5, vdim=3), dict(add_bias_kv=True), dict(add_zero_attn=True),
           dict(kdim=6, vdim=6, add_bias_kv=True, add_zero_attn=True)]
OPTION_IDS = ["kdim-vdim", "bias-kv", "zero-attn", "all"]


@pytest.mark.parametrize("options", OPTIONS, ids=OPTION_IDS)
@pytest.mark.parametrize("batch_first", [True, False], ids=["batch-first", "seq-first"])
def test_multihead_attention_options_match_numpy(options, batch_first, rng):
    mha = nn.MultiheadAttention(E, H, batch_first=batch_first, dtype=kiln.float64, **options)
    state = randomised(mha, rng)
    q = rng.standard_normal((B, L, E))
    k = rng.standard_normal((B, S, options.get("kdim", E)))
    v = rng.standard_normal((B, S, options.get("vdim", E)))
    flags = dict(bias_kv=options.get("add_bias_kv", False),
                 zero_attn=options.get("add_zero_attn", False))
    added = flags["bias_kv"] + flags["zero_attn"]
    to = (lambda a: a) if batch_first else (lambda a: a.transpose(1, 0, 2))
    padding = np.zeros((B, S), bool)
    padding[1, 2:] = True
    causal_like = np.triu(np.ones((L, S), bool), 2)
    float_mask = rng.standard_normal((B * H, L, S))
    for masks in (dict(), dict(key_padding_mask=padding), dict(attn_mask=causal_like),
                  dict(attn_mask=float_mask, key_padding_mask=padding),
                  dict(is_causal=True, key_padding_mask=padding)):
        numpy_masks = dict(masks)
        if numpy_masks.pop("is_causal", False):
            numpy_masks["attn_mask"] = np.triu(np.ones((L, S), bool), 1)
        expected, p = mha_numpy(state, q, k, v, **flags, **numpy_masks)
        out, weights = mha(t(to(q)), t(to(k)), t(to(v)), **masks)
        close(out, to(expected), rtol=1e-10, atol=1e-10)
        assert weights.shape == (B, L, S + added)
        close(weights, p.mean(1), rtol=1e-10, atol=1e-12)
        _, per_head = mha(t(to(q)), t(to(k)), t(to(v)), average_attn_weights=False, **masks)
        close(per_head, p, rtol=1e-10, atol=1e-12)


def test_multihead_attention_parameters_are_pytorchs_names_shapes_and_order():
    mha = nn.MultiheadAttention(E, H, kdim=5, vdim=3, add_bias_kv=True)
    assert [(n, tuple(p.shape)) for n, p in mha.named_parameters()] == [
        ("q_proj_weight", (E, E)), ("k_proj_weight", (E, 5)), ("v_proj_weight", (E, 3)),
        ("in_proj_bias", (3 * E,)), ("bias_k", (1, 1, E)), ("bias_v", (1, 1, E)),
        ("out_proj.weight", (E, E)), ("out_proj.bias", (E,))]
    assert mha.in_proj_weight is None and (mha.kdim, mha.vdim) == (5, 3)
    assert not mha._qkv_same_embed_dim
    # xavier_uniform_ on each projection (its own fans), zero biases, xavier_normal_ bias_k / v.
    for name, fan_in in (("q_proj_weight", E), ("k_proj_weight", 5), ("v_proj_weight", 3)):
        weight = getattr(mha, name).numpy()
        assert np.abs(weight).max() <= math.sqrt(6 / (E + fan_in)) and weight.std() > 0, name
    np.testing.assert_array_equal(mha.in_proj_bias.numpy(), 0)
    assert mha.bias_k.numpy().std() > 0 and mha.bias_v.numpy().std() > 0
    # kdim and vdim equal to embed_dim keep the stacked weight, as PyTorch's.
    same = nn.MultiheadAttention(E, H, bias=False, kdim=E, vdim=E, add_zero_attn=True)
    assert [n for n, _ in same.named_parameters()] == ["in_proj_weight", "out_proj.weight"]
    assert same.q_proj_weight is None and same.bias_k is None and same._qkv_same_embed_dim
    assert mha.extra_repr() == ("embed_dim=8, num_heads=2, kdim=5, vdim=3, add_bias_kv=True, "
                                "dropout=0.0, batch_first=False")
    assert same.extra_repr() == ("embed_dim=8, num_heads=2, add_zero_attn=True, dropout=0.0, "
                                 "batch_first=False")


def test_multihead_attention_zero_attn_gives_a_fully_padded_query_the_zero_value(rng):
    # With add_zero_attn every query has a key left: a fully padded sequence attends only to the
    # zero key, whose value is 0, so its output is out_proj's bias.
    mha = nn.MultiheadAttention(E, H, add_zero_attn=True, batch_first=True, dtype=kiln.float64)
    state = randomised(mha, rng)
    x = t(rng.standard_normal((2, S, E)))
    padding = np.zeros((2, S), bool)
    padding[1] = True
    out, weights = mha(x, x, x, key_padding_mask=padding)
    close(out[1], np.broadcast_to(state["out_proj.bias"], (S, E)), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(weights.numpy()[1, :, -1], 1.0)
    np.testing.assert_allclose(weights.numpy()[0].sum(-1), 1.0, rtol=1e-12)


def test_multihead_attention_options_are_differentiable(rng):
    mha = nn.MultiheadAttention(4, 2, kdim=3, vdim=2, add_bias_kv=True, add_zero_attn=True,
                                batch_first=True, dtype=kiln.float64)
    randomised(mha, rng)
    q = t(rng.standard_normal((2, 3, 4))).requires_grad_()
    k = t(rng.standard_normal((2, 2, 3))).requires_grad_()
    v = t(rng.standard_normal((2, 2, 2))).requires_grad_()
    padding = np.array([[False, True], [False, False]])
    assert kiln.testing.gradcheck(lambda a, b, c: mha(a, b, c, key_padding_mask=padding)[0],
                                  [q, k, v])
    out, _ = mha(q, k, v, key_padding_mask=padding)
    mint.sum(out * out).backward()
    for name, p in mha.named_parameters():
        assert p.grad is not None and np.abs(p.grad.numpy()).max() > 0, name


@pytest.mark.parametrize("options", OPTIONS, ids=OPTION_IDS)
def test_multihead_attention_options_under_dynamic_jit_match_eager(options, rng):
    mha = nn.MultiheadAttention(E, H, batch_first=True, **options)
    randomised(mha, rng)
    f = kiln.jit(lambda q, k, v, pad: mha(q, k, v, key_padding_mask=pad), dynamic=True)
    for b in (3, 2, 1, 4):
        q = t(rng.standard_normal((b, L, E)), kiln.float32)
        k = t(rng.standard_normal((b, S, options.get("kdim", E))), kiln.float32)
        v = t(rng.standard_normal((b, S, options.get("vdim", E))), kiln.float32)
        pad = t(rng.random((b, S)) < 0.3)
        for got, want in zip(f(q, k, v, pad), mha(q, k, v, key_padding_mask=pad)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_multihead_attention_pickled_before_the_options_still_runs(rng):
    # A pickle from before kdim, vdim, add_bias_kv and add_zero_attn has none of those
    # attributes: it loads as the plain self-attention it was.
    mha = nn.MultiheadAttention(E, H, batch_first=True)
    x = t(rng.standard_normal((2, L, E)), kiln.float32)
    old = {k: v for k, v in mha.__dict__.items()
           if k not in ("kdim", "vdim", "add_zero_attn", "bias_k", "bias_v", "q_proj_weight",
                        "k_proj_weight", "v_proj_weight")}
    loaded = nn.MultiheadAttention.__new__(nn.MultiheadAttention)
    loaded.__setstate__(old)
    np.testing.assert_array_equal(loaded(x, x, x)[0].numpy(), mha(x, x, x)[0].numpy())


@pytest.mark.parametrize("options", OPTIONS, ids=OPTION_IDS)
def test_multihead_attention_with_options_survives_pickle_and_deepcopy(options, rng):
    mha = nn.MultiheadAttention(E, H, batch_first=True, **options)
    randomised(mha, rng)
    q = t(rng.standard_normal((2, L, E)), kiln.float32)
    k = t(rng.standard_normal((2, S, options.get("kdim", E))), kiln.float32)
    v = t(rng.standard_normal((2, S, options.get("vdim", E))), kiln.float32)
    for twin in (pickle.loads(pickle.dumps(mha)), copy.deepcopy(mha)):
        assert list(twin.state_dict()) == list(mha.state_dict())
        assert (twin.bias_k is None) == (mha.bias_k is None)
        np.testing.assert_array_equal(twin(q, k, v)[0].numpy(), mha(q, k, v)[0].numpy())


@pytest.mark.parametrize("build, error, message", [
    (lambda: nn.MultiheadAttention(E, H, kdim=0), kiln.KilnValueError,
     "MultiheadAttention: kdim must be at least 1, got 0"),
    (lambda: nn.MultiheadAttention(E, H, vdim=2.0), kiln.KilnTypeError,
     "MultiheadAttention: vdim must be an int, got float 2.0"),
    (lambda: nn.MultiheadAttention(E, H, add_bias_kv=1), kiln.KilnTypeError,
     "MultiheadAttention: add_bias_kv must be a bool, got int 1"),
    (lambda: nn.MultiheadAttention(E, H, add_zero_attn=None), kiln.KilnTypeError,
     "MultiheadAttention: add_zero_attn must be a bool, got NoneType None"),
    (lambda: nn.MultiheadAttention(E, H, device="cuda"), kiln.KilnValueError,
     "MultiheadAttention: device 'cuda' is not available; Kiln runs on the CPU"),
], ids=["kdim-0", "vdim-float", "bias-kv-int", "zero-attn-none", "cuda"])
def test_multihead_attention_option_errors(build, error, message):
    with raises(error, match=message):
        build()


@pytest.mark.parametrize("key, value, message", [
    ((2, S, E), (2, S, 3), r"expected a key \[batch, seq, 5\] \(batch_first=True\), got "
                           r"\[2, 5, 8\]"),
    ((2, S, 5), (2, S, E), r"expected a value \[batch, seq, 3\] \(batch_first=True\), got "
                           r"\[2, 5, 8\]"),
    ((2, S, 5), (2, S + 1, 3), r"expected a key and value of one sequence length with the "
                               r"query's batch size \(2\), got key \[2, 5, 5\] and value "
                               r"\[2, 6, 3\]"),
    ((1, S, 5), (1, S, 3), r"expected a key and value of one sequence length with the "
                           r"query's batch size \(2\)"),
], ids=["key-width", "value-width", "lengths", "batch"])
def test_multihead_attention_checks_keys_and_values_of_other_widths(key, value, message):
    mha = nn.MultiheadAttention(E, H, kdim=5, vdim=3, batch_first=True)
    with raises(kiln.ShapeError, match=f"MultiheadAttention: {message}"):
        mha(mint.ones(2, L, E), mint.ones(*key), mint.ones(*value))


def torch_mha_pair(torch, options, batch_first, rng):
    """A torch.nn.MultiheadAttention with random parameters and a kiln one loaded from its state
    dict (float64)."""
    theirs = torch.nn.MultiheadAttention(E, H, batch_first=batch_first, dtype=torch.float64,
                                         **options)
    for p in theirs.parameters():
        p.data.uniform_(-0.5, 0.5)
    ours = nn.MultiheadAttention(E, H, batch_first=batch_first, dtype=kiln.float64, **options)
    state = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
    assert list(ours.state_dict()) == list(state)
    ours.load_state_dict(state)
    return ours, theirs


@pytest.mark.parametrize("options", OPTIONS, ids=OPTION_IDS)
@pytest.mark.parametrize("batch_first", [True, False], ids=["batch-first", "seq-first"])
def test_multihead_attention_options_match_torch(torch, options, batch_first, rng):
    ours, theirs = torch_mha_pair(torch, options, batch_first, rng)
    shape = (lambda b, n, w: (b, n, w)) if batch_first else (lambda b, n, w: (n, b, w))
    q = rng.standard_normal(shape(B, L, E))
    k = rng.standard_normal(shape(B, S, options.get("kdim", E)))
    v = rng.standard_normal(shape(B, S, options.get("vdim", E)))
    padding = np.zeros((B, S), bool)
    padding[1, 3:] = True  # no sequence fully padded: PyTorch's weights would be NaN there
    mask = rng.standard_normal((L, S))
    kq, kk, kv = (t(a).requires_grad_() for a in (q, k, v))
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    out, weights = ours(kq, kk, kv, key_padding_mask=padding, attn_mask=mask,
                        average_attn_weights=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's, about a bool padding and a float mask
        want, want_weights = theirs(tq, tk, tv, key_padding_mask=torch.tensor(padding),
                                    attn_mask=torch.tensor(mask), average_attn_weights=False)
    check_torch(out, want, kiln.float64, "output")
    check_torch(weights, want_weights, kiln.float64, "weights")
    upstream = rng.standard_normal(out.shape)
    (out * t(upstream)).sum().backward()
    (want * torch.tensor(upstream)).sum().backward()
    for name, mine, their in (("query", kq, tq), ("key", kk, tk), ("value", kv, tv)):
        check_torch(mine.grad, their.grad, kiln.float64, f"gradient of the {name}",
                    scale_atol=True)
    grads = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        check_torch(p.grad, grads[name].grad, kiln.float64, f"gradient of {name}",
                    scale_atol=True)


def test_multihead_attention_state_dict_loads_into_torch(torch, rng):
    options = dict(kdim=5, vdim=3, add_bias_kv=True, add_zero_attn=True)
    ours = nn.MultiheadAttention(E, H, batch_first=True, dtype=kiln.float64, **options)
    theirs = torch.nn.MultiheadAttention(E, H, batch_first=True, dtype=torch.float64, **options)
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    q, k, v = (rng.standard_normal((2, L, w)) for w in (E, 5, 3))
    out, weights = ours(t(q), t(k), t(v))
    want, want_weights = theirs(torch.tensor(q), torch.tensor(k), torch.tensor(v))
    check_torch(out, want, kiln.float64, "output")
    check_torch(weights, want_weights, kiln.float64, "weights")


# ------------------------------------------------------------------------------------------------
# Embedding's scale_grad_by_freq


def freq_scaled_grad(indices, upstream, rows, padding_idx=None):
    """The closed form of PyTorch's scale_grad_by_freq gradient: row i gets the sum of the
    upstream gradients of its lookups divided by their number (padding_idx none)."""
    flat = indices.reshape(-1)
    counts = np.bincount(flat, minlength=rows)
    grad = np.zeros((rows, upstream.shape[-1]))
    np.add.at(grad, flat, upstream.reshape(flat.size, -1) / counts[flat][:, None])
    if padding_idx is not None:
        grad[padding_idx] = 0
    return grad


@pytest.mark.parametrize("padding_idx", [None, 2, -1])
@pytest.mark.parametrize("index_dtype", [kiln.int64, kiln.int32])
def test_embedding_scale_grad_by_freq_divides_each_rows_gradient_by_its_count(
        padding_idx, index_dtype, rng):
    weight = rng.standard_normal((6, 4))
    indices = np.array([[1, 2, 1, 5], [5, 1, 0, 2]])
    upstream = rng.standard_normal((2, 4, 4))
    w = t(weight).requires_grad_()
    out = F.embedding(t(indices, index_dtype), w, padding_idx, scale_grad_by_freq=True)
    # The values are the lookups, exactly.
    np.testing.assert_array_equal(out.detach().numpy(), weight[indices])
    (grad,) = kiln.autograd.grad(mint.sum(out * t(upstream)), [w])
    expected = freq_scaled_grad(indices, upstream, 6, None if padding_idx is None
                                else padding_idx % 6)
    close(grad, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float16, kiln.bfloat16])
def test_embedding_scale_grad_by_freq_keeps_narrow_values_exact(dtype, rng):
    weight = t(rng.standard_normal((5, 3)), dtype).requires_grad_()
    indices = t(np.array([0, 3, 3, 3, 4, 0]))
    out = F.embedding(indices, weight, scale_grad_by_freq=True)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out.detach().to(kiln.float64).numpy(),
                                  F.embedding(indices, weight).detach().to(kiln.float64).numpy())
    (grad,) = kiln.autograd.grad(mint.sum(out), [weight])
    np.testing.assert_array_equal(grad.to(kiln.float64).numpy(),
                                  [[1.0] * 3, [0.0] * 3, [0.0] * 3, [1.0] * 3, [1.0] * 3])


def test_embedding_cell_and_from_pretrained_scale_grad_by_freq(rng):
    indices = np.array([3, 3, 1, 3])
    emb = nn.Embedding(5, 2, padding_idx=1, scale_grad_by_freq=True, dtype=kiln.float64)
    assert emb.scale_grad_by_freq is True
    assert repr(emb) == "Embedding(5, 2, padding_idx=1, scale_grad_by_freq=True)"
    mint.sum(emb(t(indices))).backward()
    np.testing.assert_array_equal(emb.weight.grad.numpy(), [[0, 0], [0, 0], [0, 0], [1, 1],
                                                            [0, 0]])
    table = t(rng.standard_normal((5, 2)))
    pretrained = nn.Embedding.from_pretrained(table, freeze=False, scale_grad_by_freq=True)
    assert pretrained.scale_grad_by_freq is True
    upstream = rng.standard_normal((4, 2))
    mint.sum(pretrained(t(indices)) * t(upstream)).backward()
    close(pretrained.weight.grad, freq_scaled_grad(indices, upstream, 5), rtol=1e-12,
          atol=1e-12)


def test_embedding_scale_grad_by_freq_under_jit_matches_eager(rng):
    weight = t(rng.standard_normal((7, 3)))
    scale = t(rng.standard_normal(3))

    def loss(w, i):
        return mint.sum(F.embedding(i, w, padding_idx=0, scale_grad_by_freq=True) * scale)

    forward = kiln.jit(loss)
    backward = kiln.jit(kiln.grad(loss))
    dynamic = kiln.jit(kiln.grad(loss), dynamic=True)
    for batch in (4, 2, 3, 1):
        indices = rng.integers(0, 7, size=(batch, 5))
        i = t(indices)
        close(forward(weight, i), loss(weight, i).numpy(), rtol=1e-12, atol=1e-12)
        expected = freq_scaled_grad(indices, np.broadcast_to(scale.numpy(), (batch, 5, 3)), 7,
                                    padding_idx=0)
        close(backward(weight, i), expected, rtol=1e-12, atol=1e-12)
        close(dynamic(weight, i), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("call, owner", [
    (lambda: nn.Embedding(10, 3, sparse=True), "Embedding"),
    (lambda: nn.Embedding.from_pretrained(mint.ones(4, 2), sparse=True),
     "Embedding.from_pretrained"),
    (lambda: F.embedding(t(np.array([0])), mint.ones(2, 2), sparse=True), "embedding"),
], ids=["cell", "from-pretrained", "functional"])
def test_embedding_sparse_is_refused_for_what_kiln_lacks(call, owner):
    with raises(kiln.KilnNotImplementedError,
                match=rf"{owner}: sparse is not supported \(Kiln has no sparse tensors: the "
                      rf"gradient of weight is always a dense tensor of its shape\); pass "
                      rf"sparse=False"):
        call()


@pytest.mark.parametrize("padding_idx", [None, 0])
@pytest.mark.parametrize("dtype", [kiln.float64, kiln.float32])
def test_embedding_scale_grad_by_freq_matches_torch(torch, padding_idx, dtype, rng):
    args = (8, 3, padding_idx)
    theirs = torch.nn.Embedding(*args, scale_grad_by_freq=True, dtype=getattr(torch, dtype.name))
    ours = nn.Embedding(*args, scale_grad_by_freq=True, dtype=dtype)
    ours.load_state_dict({"weight": theirs.weight.detach().double().numpy()})
    assert repr(ours) == repr(theirs)
    indices = rng.integers(0, 8, size=(4, 6))
    upstream = rng.standard_normal((4, 6, 3))
    out, want = ours(t(indices)), theirs(torch.tensor(indices))
    check_torch(out, want, dtype, "lookup")
    mint.sum(out * t(upstream, dtype)).backward()
    (want * torch.tensor(upstream).to(want.dtype)).sum().backward()
    check_torch(ours.weight.grad, theirs.weight.grad, dtype, "gradient")


# ------------------------------------------------------------------------------------------------
# kl_div(reduction="batchmean") under kiln.jit(dynamic=True)


@pytest.mark.parametrize("features", [(), (3,), (2, 3)], ids=["1d", "2d", "3d"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_batchmean_traces_at_every_batch_size(features, log_target, rng):
    def loss(x, y):
        return F.kl_div(x, y, reduction="batchmean", log_target=log_target)

    f = kiln.jit(loss, dynamic=True)
    grad = kiln.jit(kiln.grad(loss), dynamic=True)
    for batch in (4, 2, 3, 1, 6):
        x = rng.standard_normal((batch,) + features)
        y = rng.uniform(0.1, 1.0, (batch,) + features)
        target = np.log(y) if log_target else y
        expected = (y * (np.log(y) - x)).sum() / batch
        close(f(t(x), t(target)), expected, rtol=1e-12, atol=1e-12)
        close(loss(t(x), t(target)), expected, rtol=1e-12, atol=1e-12)
        close(grad(t(x), t(target)), -y / batch, rtol=1e-12, atol=1e-12)


def test_kl_div_batchmean_of_a_0d_input_is_its_pointwise_loss():
    # PyTorch's: a 0-d input has no batch dimension to divide by.
    out = F.kl_div(t(np.float64(-0.5)), t(np.float64(0.25)), reduction="batchmean")
    assert out.shape == ()
    close(out, 0.25 * (np.log(0.25) + 0.5), rtol=1e-12, atol=1e-12)
    assert F.kl_div(t(np.float32(-0.5)), t(np.float32(0.25)), reduction="batchmean").dtype \
        == kiln.float32


@pytest.mark.parametrize("shape", [(), (5,), (4, 3), (2, 3, 2), (0, 3)], ids=str)
@pytest.mark.parametrize("dtype", [kiln.float64, kiln.float32, kiln.float16])
def test_kl_div_batchmean_matches_torch(torch, shape, dtype, rng):
    x = rng.standard_normal(shape)
    y = rng.uniform(0.0, 1.0, shape)
    out = F.kl_div(t(x, dtype), t(y, dtype), reduction="batchmean")
    want = torch.nn.functional.kl_div(torch.tensor(x).to(getattr(torch, dtype.name)),
                                      torch.tensor(y).to(getattr(torch, dtype.name)),
                                      reduction="batchmean")
    assert out.dtype == dtype
    check_torch(out, want, dtype, "batchmean")
