"""kiln.nn.attention.multi_head_attention_forward (PyTorch's F.multi_head_attention_forward):
batched and unbatched, every option (masks, bias_k / bias_v, add_zero_attn, separate projection
weights, static_k / static_v, is_causal, the weights averaged or per head) against a NumPy
reference and against PyTorch, gradients (finite differences and PyTorch's), dropout's
statistics, the function against kiln.nn.MultiheadAttention with the same weights, and the
argument errors."""

import math
import warnings

import numpy as np
import pytest

import kiln
from conftest import raises, t
from kiln.nn.attention import multi_head_attention_forward
from kiln.testing import gradcheck

nn = kiln.nn

E, H = 8, 2  # embed_dim, num_heads
L, S, N = 4, 5, 3  # query length, key length, batch
KDIM, VDIM = 5, 3  # the key's and value's features with separate projection weights
STATIC = 6  # static_k / static_v's own sequence length
POSITIONAL = ["query", "key", "value", "embed_dim_to_check", "num_heads", "in_proj_weight",
              "in_proj_bias", "bias_k", "bias_v", "add_zero_attn", "dropout_p", "out_proj_weight",
              "out_proj_bias"]
DROPOUT_P, OUT_PROJ_BIAS = POSITIONAL.index("dropout_p"), POSITIONAL.index("out_proj_bias")


def make_case(rng, batched=True, bias=True, separate=False, bias_kv=False, zero_attn=False,
              static=False, attn_mask=None, key_padding_mask=None, is_causal=False):
    """Random NumPy arguments of multi_head_attention_forward for one case: the positional ones
    (dropout_p 0) and the keywords."""
    batch = (N,) if batched else ()
    kdim, vdim = (KDIM, VDIM) if separate else (E, E)
    query = rng.standard_normal((L,) + batch + (E,))
    key = rng.standard_normal((S,) + batch + (kdim,))
    value = rng.standard_normal((S,) + batch + (vdim,))
    in_proj_bias = rng.standard_normal(3 * E) if bias else None
    bias_k, bias_v = ((rng.standard_normal((1, 1, E)), rng.standard_normal((1, 1, E)))
                      if bias_kv else (None, None))
    out_proj_bias = rng.standard_normal(E) if bias else None
    kwargs = {}
    if separate:
        kwargs.update(use_separate_proj_weight=True, q_proj_weight=rng.standard_normal((E, E)),
                      k_proj_weight=rng.standard_normal((E, kdim)),
                      v_proj_weight=rng.standard_normal((E, vdim)))
        in_proj_weight = None
    else:
        in_proj_weight = rng.standard_normal((3 * E, E)) / math.sqrt(E)
    s = S
    if static:  # static_k and static_v's sequence length
        heads = N * H if batched else H
        s = static
        kwargs.update(static_k=rng.standard_normal((heads, s, E // H)),
                      static_v=rng.standard_normal((heads, s, E // H)))
    if attn_mask is not None:
        shape = ((N * H if batched else H), L, s) if attn_mask.endswith("3d") else (L, s)
        if attn_mask.startswith("bool"):
            mask = rng.random(shape) < 0.4
            mask[..., 0] = False  # every query keeps a key
        else:
            mask = rng.standard_normal(shape)
        kwargs["attn_mask"] = mask
    if is_causal:
        # PyTorch's is_causal is a hint that attn_mask is the causal mask: both are given.
        kwargs.update(attn_mask=np.triu(np.ones((L, s), bool), 1), is_causal=True)
    if key_padding_mask is not None:
        padding = np.zeros((N, s), bool)
        padding[1, 3:] = True  # no sequence fully padded: PyTorch's weights would be NaN there
        if key_padding_mask == "float":
            padding = np.where(padding, -1e4, 0.0) + rng.uniform(-1, 1, padding.shape)
        kwargs["key_padding_mask"] = padding if batched else padding[1]
    args = [query, key, value, E, H, in_proj_weight, in_proj_bias, bias_k, bias_v, zero_attn, 0.0,
            rng.standard_normal((E, E)) / math.sqrt(E), out_proj_bias]
    return args, kwargs


def numpy_attention(query, key, value, e, h, in_proj_weight, in_proj_bias, bias_k, bias_v,
                    add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                    key_padding_mask=None, attn_mask=None, use_separate_proj_weight=False,
                    q_proj_weight=None, k_proj_weight=None, v_proj_weight=None, static_k=None,
                    static_v=None, is_causal=False):
    """PyTorch's multi-head attention in NumPy (no dropout): the output and the weights per
    head."""
    batched = query.ndim == 3
    if not batched:
        query, key, value = (x[:, None] for x in (query, key, value))
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask[None]
    weights = ((q_proj_weight, k_proj_weight, v_proj_weight) if use_separate_proj_weight
               else np.split(in_proj_weight, 3))
    biases = np.split(in_proj_bias, 3) if in_proj_bias is not None else (0.0, 0.0, 0.0)
    q, k, v = (x @ w.T + b for x, w, b in zip((query, key, value), weights, biases))
    l, n, _ = q.shape
    d = e // h
    if bias_k is not None:
        k = np.concatenate([k, np.broadcast_to(bias_k, (1, n, e))])
        v = np.concatenate([v, np.broadcast_to(bias_v, (1, n, e))])

    def heads(x):
        return x.reshape(x.shape[0], n, h, d).transpose(1, 2, 0, 3)

    q, k, v = heads(q), heads(k), heads(v)
    if static_k is not None:
        k = static_k.reshape(n, h, -1, d)
    if static_v is not None:
        v = static_v.reshape(n, h, -1, d)
    if add_zero_attn:
        k = np.concatenate([k, np.zeros((n, h, 1, d))], 2)
        v = np.concatenate([v, np.zeros((n, h, 1, d))], 2)
    added = (bias_k is not None) + add_zero_attn
    s = k.shape[2] - added

    def additive(mask):
        return np.where(mask, -np.inf, 0.0) if mask.dtype == bool else mask

    mask = np.zeros((n, h, l, s))
    if attn_mask is not None:
        mask = mask + additive(attn_mask).reshape((n, h, l, s) if attn_mask.ndim == 3 else (l, s))
    if is_causal:
        mask = mask + additive(np.triu(np.ones((l, s), bool), 1))
    if key_padding_mask is not None:
        mask = mask + additive(key_padding_mask)[:, None, None, :]
    mask = np.concatenate([mask, np.zeros((n, h, l, added))], -1)
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + mask
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = (p @ v).transpose(2, 0, 1, 3).reshape(l, n, e) @ out_proj_weight.T
    if out_proj_bias is not None:
        out = out + out_proj_bias
    return (out, p) if batched else (out[:, 0], p[0])


def converted(args, kwargs, make=t, requires_grad=False):
    """The arguments with each NumPy array made a tensor by ``make`` (kiln's ``t`` or
    ``torch.tensor``), requiring grad unless bool with ``requires_grad``; other values kept."""
    def convert(a):
        if not isinstance(a, np.ndarray):
            return a
        x = make(a)
        return x.requires_grad_() if requires_grad and a.dtype != bool else x
    return [convert(a) for a in args], {k: convert(v) for k, v in kwargs.items()}


CASES = {
    "plain": dict(),
    "no-bias": dict(bias=False),
    "bool-attn-mask": dict(attn_mask="bool"),
    "float-attn-mask": dict(attn_mask="float"),
    "bool-3d-attn-mask": dict(attn_mask="bool3d"),
    "float-3d-attn-mask": dict(attn_mask="float3d"),
    "bool-padding": dict(key_padding_mask="bool"),
    "float-padding": dict(key_padding_mask="float"),
    "both-masks": dict(attn_mask="bool", key_padding_mask="bool"),
    "causal": dict(is_causal=True),
    "causal-padding": dict(is_causal=True, key_padding_mask="bool"),
    "bias-kv": dict(bias_kv=True),
    "zero-attn": dict(zero_attn=True),
    "bias-kv-zero-attn-masks": dict(bias_kv=True, zero_attn=True, attn_mask="float3d",
                                    key_padding_mask="bool"),
    "separate": dict(separate=True),
    "separate-all": dict(separate=True, bias_kv=True, zero_attn=True, attn_mask="float",
                         key_padding_mask="bool"),
    "static": dict(static=STATIC),
    # PyTorch checks attn_mask against the key's length: static keys of that length, there.
    "static-zero-attn-masks": dict(static=S, zero_attn=True, attn_mask="bool",
                                   key_padding_mask="bool"),
}
WEIGHTS = [dict(), dict(average_attn_weights=False), dict(need_weights=False)]
WEIGHT_IDS = ["averaged", "per-head", "no-weights"]


def check_weights(weights, want, options):
    """Weights returned against the per-head ones expected, as ``options`` ask for them."""
    if options.get("need_weights") is False:
        assert weights is None
        return
    if options.get("average_attn_weights", True):
        want = want.mean(-3)
    np.testing.assert_allclose(weights.numpy(), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("options", WEIGHTS, ids=WEIGHT_IDS)
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_matches_numpy(case, batched, options, rng):
    args, kwargs = make_case(rng, batched, **case)
    want, want_weights = numpy_attention(*args, **kwargs)
    ours, our_kwargs = converted(args, kwargs)
    out, weights = multi_head_attention_forward(*ours, **our_kwargs, **options)
    assert out.shape == want.shape
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-10, atol=1e-10)
    check_weights(weights, want_weights, options)


@pytest.mark.parametrize("options", WEIGHTS, ids=WEIGHT_IDS)
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_matches_torch(torch, case, batched, options, rng):
    args, kwargs = make_case(rng, batched, **case)
    their_args, their_kwargs = converted(args, kwargs, torch.tensor)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's, about masks of different dtypes
        want, want_weights = torch.nn.functional.multi_head_attention_forward(
            *their_args, **their_kwargs, **options)
    ours, our_kwargs = converted(args, kwargs)
    out, weights = multi_head_attention_forward(*ours, **our_kwargs, **options)
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-10, atol=1e-10)
    if want_weights is None:
        assert weights is None
    else:
        np.testing.assert_allclose(weights.numpy(), want_weights.numpy(), rtol=1e-10,
                                   atol=1e-12)


def test_is_causal_alone_applies_the_causal_mask(rng):
    # PyTorch's needs attn_mask with is_causal; Kiln's makes the mask, alone or combined.
    args, kwargs = make_case(rng, key_padding_mask="bool")
    ours, our_kwargs = converted(args, kwargs)
    causal = np.triu(np.ones((L, S), bool), 1)
    out, weights = multi_head_attention_forward(*ours, **our_kwargs, is_causal=True)
    want, want_weights = numpy_attention(*args, **kwargs, attn_mask=causal)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(weights.numpy(), want_weights.mean(1), rtol=1e-10, atol=1e-12)
    assert (weights.numpy()[:, causal] == 0).all()
    float_mask = rng.standard_normal((L, S))
    out, _ = multi_head_attention_forward(*ours, **our_kwargs, attn_mask=t(float_mask),
                                          is_causal=True)
    want, _ = numpy_attention(*args, **kwargs, attn_mask=float_mask, is_causal=True)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-10, atol=1e-10)


def test_static_keys_of_their_own_length_take_masks_of_that_length(rng):
    # PyTorch checks attn_mask against the key's length, which static keys need not have.
    args, kwargs = make_case(rng, static=STATIC, zero_attn=True, attn_mask="float3d",
                             key_padding_mask="float")
    ours, our_kwargs = converted(args, kwargs)
    out, weights = multi_head_attention_forward(*ours, **our_kwargs)
    want, want_weights = numpy_attention(*args, **kwargs)
    assert weights.shape == (N, L, STATIC + 1)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(weights.numpy(), want_weights.mean(1), rtol=1e-10, atol=1e-12)


def test_masks_may_be_numpy_arrays_or_lists(rng):
    args, kwargs = make_case(rng, attn_mask="bool", key_padding_mask="bool")
    ours, _ = converted(args, {})
    want = multi_head_attention_forward(*ours, **converted([], kwargs)[1])[0].numpy()
    for convert in (lambda a: a, lambda a: a.tolist()):
        masks = {k: convert(v) for k, v in kwargs.items()}
        np.testing.assert_array_equal(multi_head_attention_forward(*ours, **masks)[0].numpy(),
                                      want)


def test_fully_masked_query_attends_to_nothing(rng):
    args, kwargs = make_case(rng)
    ours, _ = converted(args, {})
    padding = np.zeros((N, S), bool)
    padding[2] = True
    out, weights = multi_head_attention_forward(*ours, key_padding_mask=padding)
    np.testing.assert_array_equal(weights.numpy()[2], 0.0)
    # No value reaches it: its output is out_proj's bias.
    bias = np.broadcast_to(args[OUT_PROJ_BIAS], (L, E))
    np.testing.assert_allclose(out.numpy()[:, 2], bias, rtol=1e-12)


GRADIENT_CASES = {
    "packed-masks": dict(attn_mask="float", key_padding_mask="bool"),
    "separate-all": dict(separate=True, bias_kv=True, zero_attn=True, attn_mask="float3d",
                         key_padding_mask="bool"),
    "static-unbatched": dict(batched=False, static=STATIC, zero_attn=True),
}


@pytest.mark.parametrize("case", list(GRADIENT_CASES.values()), ids=list(GRADIENT_CASES))
def test_gradients_match_torch(torch, case, rng):
    args, kwargs = make_case(rng, **case)
    ours, our_kwargs = converted(args, kwargs, requires_grad=True)
    theirs, their_kwargs = converted(args, kwargs, torch.tensor, True)
    out, weights = multi_head_attention_forward(*ours, **our_kwargs,
                                                average_attn_weights=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want, want_weights = torch.nn.functional.multi_head_attention_forward(
            *theirs, **their_kwargs, average_attn_weights=False)
    upstream = rng.standard_normal(out.shape)
    upstream_weights = rng.standard_normal(weights.shape)
    (kiln.mint.sum(out * t(upstream)) + kiln.mint.sum(weights * t(upstream_weights))).backward()
    ((want * torch.tensor(upstream)).sum()
     + (want_weights * torch.tensor(upstream_weights)).sum()).backward()
    named = list(zip(POSITIONAL, ours, theirs))
    named += [(k, our_kwargs[k], their_kwargs[k]) for k in our_kwargs]
    checked = 0
    for name, mine, other in named:
        if isinstance(mine, kiln.Tensor) and mine.requires_grad:
            # Keys and values replaced by static ones get no gradient (None on both sides).
            if mine.grad is None or other.grad is None:
                assert mine.grad is None and other.grad is None, name
                continue
            np.testing.assert_allclose(mine.grad.numpy(), other.grad.numpy(), rtol=1e-9,
                                       atol=1e-10, err_msg=f"gradient of {name}")
            checked += 1
    assert checked >= 6


def test_gradients_match_finite_differences(rng):
    e, h, l, s, n = 4, 2, 2, 3, 2
    query = t(rng.standard_normal((l, n, e))).requires_grad_()
    key = t(rng.standard_normal((s, n, 3))).requires_grad_()
    value = t(rng.standard_normal((s, n, 2))).requires_grad_()
    q_proj = t(rng.standard_normal((e, e)) * 0.5).requires_grad_()
    k_proj = t(rng.standard_normal((e, 3)) * 0.5).requires_grad_()
    v_proj = t(rng.standard_normal((e, 2)) * 0.5).requires_grad_()
    in_bias = t(rng.standard_normal(3 * e)).requires_grad_()
    bias_k = t(rng.standard_normal((1, 1, e))).requires_grad_()
    bias_v = t(rng.standard_normal((1, 1, e))).requires_grad_()
    out_w = t(rng.standard_normal((e, e)) * 0.5).requires_grad_()
    padding = np.array([[False, False, True], [False, False, False]])
    mask = t(rng.standard_normal((l, s)))

    def attention(query, key, value, q_proj, k_proj, v_proj, in_bias, bias_k, bias_v, out_w):
        return multi_head_attention_forward(
            query, key, value, e, h, None, in_bias, bias_k, bias_v, True, 0.0, out_w, None,
            key_padding_mask=padding, attn_mask=mask, use_separate_proj_weight=True,
            q_proj_weight=q_proj, k_proj_weight=k_proj, v_proj_weight=v_proj,
            average_attn_weights=False)

    assert gradcheck(attention, [query, key, value, q_proj, k_proj, v_proj, in_bias, bias_k,
                                 bias_v, out_w])


def test_dropout_zeroes_and_scales_the_weights_while_training(rng):
    kiln.manual_seed(0)
    l, s, n = 16, 16, 4
    query, key = rng.standard_normal((l, n, E)), rng.standard_normal((s, n, E))
    args, _ = make_case(rng)
    ours, _ = converted([query, key, key] + args[3:], {})
    plain_out, plain = multi_head_attention_forward(*ours, average_attn_weights=False)
    ours[DROPOUT_P] = 0.5
    out, dropped = multi_head_attention_forward(*ours, average_attn_weights=False)
    assert out.shape == plain_out.shape == (l, n, E)
    assert dropped.shape == plain.shape == (n, H, l, s)
    kept = dropped.numpy() != 0
    assert 0.45 < kept.mean() < 0.55
    np.testing.assert_allclose(dropped.numpy()[kept], 2 * plain.numpy()[kept], rtol=1e-12)
    # The output is computed from the weights dropped, not from those returned before.
    assert not np.allclose(out.numpy(), plain_out.numpy())
    evaluated, weights = multi_head_attention_forward(*ours, training=False,
                                                      average_attn_weights=False)
    np.testing.assert_array_equal(evaluated.numpy(), plain_out.numpy())
    np.testing.assert_array_equal(weights.numpy(), plain.numpy())
    ours[DROPOUT_P] = 1.0  # every weight dropped: the output is out_proj's bias
    out, weights = multi_head_attention_forward(*ours)
    np.testing.assert_array_equal(weights.numpy(), 0.0)
    bias = np.broadcast_to(args[OUT_PROJ_BIAS], (l, n, E))
    np.testing.assert_allclose(out.numpy(), bias, rtol=1e-12)


MODULE_OPTIONS = [dict(), dict(kdim=KDIM, vdim=VDIM), dict(add_bias_kv=True),
                  dict(add_zero_attn=True, bias=False),
                  dict(kdim=KDIM, vdim=VDIM, add_bias_kv=True, add_zero_attn=True)]
MODULE_IDS = ["plain", "kdim-vdim", "bias-kv", "zero-attn-no-bias", "all"]


@pytest.mark.parametrize("batch_first", [True, False], ids=["batch-first", "seq-first"])
@pytest.mark.parametrize("options", MODULE_OPTIONS, ids=MODULE_IDS)
def test_function_equals_the_module(options, batch_first, rng):
    mha = nn.MultiheadAttention(E, H, batch_first=batch_first, dtype=kiln.float64, **options)
    mha.load_state_dict({name: rng.uniform(-0.5, 0.5, p.shape)
                         for name, p in mha.state_dict().items()})
    query = rng.standard_normal((L, N, E))
    key = rng.standard_normal((S, N, options.get("kdim", E)))
    value = rng.standard_normal((S, N, options.get("vdim", E)))
    padding = np.zeros((N, S), bool)
    padding[0, 2:] = True
    masks = dict(key_padding_mask=padding, attn_mask=rng.standard_normal((L, S)),
                 average_attn_weights=False)
    layout = (lambda a: a.transpose(1, 0, 2)) if batch_first else (lambda a: a)
    out, weights = mha(t(layout(query)), t(layout(key)), t(layout(value)), **masks)
    separate = not mha._qkv_same_embed_dim
    want, want_weights = multi_head_attention_forward(
        t(query), t(key), t(value), E, H, mha.in_proj_weight, mha.in_proj_bias, mha.bias_k,
        mha.bias_v, mha.add_zero_attn, 0.0, mha.out_proj.weight, mha.out_proj.bias, **masks,
        use_separate_proj_weight=separate, q_proj_weight=mha.q_proj_weight,
        k_proj_weight=mha.k_proj_weight, v_proj_weight=mha.v_proj_weight)
    np.testing.assert_allclose(out.numpy(), layout(want.numpy()), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(weights.numpy(), want_weights.numpy(), rtol=1e-13, atol=1e-14)


def error_case(**changes):
    """A call of multi_head_attention_forward on a plain batched case, with ``changes`` to its
    arguments (by name, positional ones included)."""
    args, _ = make_case(np.random.default_rng(0))
    ours, _ = converted(args, {})
    arguments = dict(zip(POSITIONAL, ours))
    arguments.update(changes)
    return lambda: multi_head_attention_forward(**arguments)


def ones(*shape, dtype=kiln.float64):
    return kiln.mint.ones(*shape, dtype=dtype)


ERRORS = [
    ("embed-dim", error_case(embed_dim_to_check=6), kiln.ShapeError,
     r"expected a query of embed_dim_to_check = 6 features \(its last dim\), got \[4, 3, 8\]"),
    ("heads", error_case(num_heads=3), kiln.KilnValueError,
     r"embed_dim_to_check \(8\) must be divisible by num_heads \(3\)"),
    ("heads-0", error_case(num_heads=0), kiln.KilnValueError, "num_heads must be at least 1"),
    ("query-type", error_case(query=np.ones((L, N, E))), kiln.KilnTypeError,
     "expected query to be a kiln.Tensor, got ndarray"),
    ("query-4d", error_case(query=ones(1, L, N, E)), kiln.ShapeError,
     r"expected a query \[seq, batch, 8\], got \[1, 4, 3, 8\]"),
    ("key-2d", error_case(key=ones(S, E)), kiln.ShapeError,
     r"expected a key \[seq, batch, 8\], got \[5, 8\]"),
    ("unbatched-key-3d", error_case(query=ones(L, E), key=ones(S, 1, E)), kiln.ShapeError,
     r"expected a key \[seq, 8\] \(unbatched, as the query is 2-d\), got \[5, 1, 8\]"),
    ("key-width", error_case(key=ones(S, N, 6)), kiln.ShapeError,
     r"expected a key \[seq, batch, 8\], got \[5, 3, 6\]"),
    ("key-value-lengths", error_case(value=ones(S + 1, N, E)), kiln.ShapeError,
     r"expected a key and value of one shape with the query's batch size \(3\), got key "
     r"\[5, 3, 8\] and value \[6, 3, 8\]"),
    ("key-batch", error_case(key=ones(S, 1, E), value=ones(S, 1, E)), kiln.ShapeError,
     r"expected a key and value of one shape with the query's batch size \(3\), got key "
     r"\[5, 1, 8\]"),
    ("no-in-proj", error_case(in_proj_weight=None), kiln.KilnValueError,
     r"use_separate_proj_weight is False, so expected an in_proj_weight \[24, 8\], got None"),
    ("in-proj-shape", error_case(in_proj_weight=ones(3 * E, 4)), kiln.ShapeError,
     r"expected in_proj_weight of shape \[24, 8\], got \[24, 4\]"),
    ("in-proj-bias-shape", error_case(in_proj_bias=ones(E)), kiln.ShapeError,
     r"expected in_proj_bias of shape \[24\], got \[8\]"),
    ("no-k-proj", error_case(use_separate_proj_weight=True, q_proj_weight=ones(E, E),
                             v_proj_weight=ones(E, E)), kiln.KilnValueError,
     r"use_separate_proj_weight is True, so expected a k_proj_weight \[8, features\], got None"),
    ("v-proj-shape", error_case(use_separate_proj_weight=True, q_proj_weight=ones(E, E),
                                k_proj_weight=ones(E, E), v_proj_weight=ones(4, E)),
     kiln.ShapeError, r"expected v_proj_weight of shape \[8, features\], got \[4, 8\]"),
    ("q-proj-shape", error_case(use_separate_proj_weight=True, q_proj_weight=ones(E, 4),
                                k_proj_weight=ones(E, E), v_proj_weight=ones(E, E)),
     kiln.ShapeError, r"expected q_proj_weight of shape \[8, 8\], got \[8, 4\]"),
    ("separate-key-width", error_case(use_separate_proj_weight=True, q_proj_weight=ones(E, E),
                                      k_proj_weight=ones(E, KDIM), v_proj_weight=ones(E, E)),
     kiln.ShapeError, r"expected a key \[seq, batch, 5\], got \[5, 3, 8\]"),
    ("out-proj-shape", error_case(out_proj_weight=ones(E, 6)), kiln.ShapeError,
     r"expected out_proj_weight of shape \[out_features, 8\], got \[8, 6\]"),
    ("out-proj-none", error_case(out_proj_weight=None), kiln.KilnTypeError,
     "expected out_proj_weight to be a kiln.Tensor, got NoneType"),
    ("bias-k-alone", error_case(bias_k=ones(1, 1, E)), kiln.KilnValueError,
     "expected both bias_k and bias_v or neither, got bias_k alone"),
    ("bias-v-shape", error_case(bias_k=ones(1, 1, E), bias_v=ones(E)), kiln.ShapeError,
     r"expected bias_v of shape \[1, 1, 8\], got \[8\]"),
    ("bias-and-static", error_case(bias_k=ones(1, 1, E), bias_v=ones(1, 1, E),
                                   static_k=ones(N * H, S, E // H)), kiln.KilnValueError,
     "bias_k and bias_v cannot be appended to static_k or static_v"),
    ("static-shape", error_case(static_k=ones(N, S, E)), kiln.ShapeError,
     r"expected static_k of shape \[batch \* num_heads = 6, seq, head_dim = 4\], got \[3, 5, 8\]"),
    ("static-lengths", error_case(static_v=ones(N * H, S + 2, E // H)), kiln.ShapeError,
     "expected keys and values of one sequence length, got 5 keys and 7 values"),
    ("attn-mask-shape", error_case(attn_mask=ones(L, S + 1)), kiln.ShapeError,
     r"attn_mask must have shape \[4, 5\] or \[6, 4, 5\], got \[4, 6\]"),
    ("attn-mask-3d-shape", error_case(attn_mask=ones(N, L, S)), kiln.ShapeError,
     r"a 3-d attn_mask must have shape \[6, 4, 5\], got \[3, 4, 5\]"),
    ("padding-shape", error_case(key_padding_mask=ones(N, L, dtype=kiln.bool_)),
     kiln.ShapeError, r"key_padding_mask must have shape \[3, 5\], got \[3, 4\]"),
    ("unbatched-padding-shape",
     error_case(query=ones(L, E), key=ones(S, E), value=ones(S, E),
                key_padding_mask=ones(1, S, dtype=kiln.bool_)),
     kiln.ShapeError, r"key_padding_mask must have shape \[5\], got \[1, 5\]"),
    ("integer-mask", error_case(attn_mask=ones(L, S, dtype=kiln.int64)), kiln.DTypeError,
     r"expected a bool attn_mask \(True = masked\) or a floating-point one .*got dtype int64"),
    ("dropout-range", error_case(dropout_p=1.5), kiln.KilnValueError,
     r"dropout_p must be in \[0, 1\], got 1.5"),
    ("dropout-type", error_case(dropout_p="0.1"), kiln.KilnTypeError,
     "expected dropout_p to be a real number, got str"),
]


@pytest.mark.parametrize("call, error, message", [c[1:] for c in ERRORS],
                         ids=[c[0] for c in ERRORS])
def test_errors(call, error, message):
    with raises(error, match=f"multi_head_attention_forward: {message}"):
        call()


@pytest.mark.parametrize("batch_first", [False, True])
def test_module_takes_one_unbatched_sequence_as_pytorchs(batch_first):
    kiln.manual_seed(5)
    mha = kiln.nn.MultiheadAttention(8, 2, kdim=6, vdim=4, batch_first=batch_first)
    rng = np.random.default_rng(5)
    q, k, v = (kiln.tensor(rng.standard_normal(s).astype(np.float32))
               for s in ((3, 8), (5, 6), (5, 4)))
    mask = kiln.tensor(np.array([False, False, True, False, True]))
    out, weights = mha(q, k, v, key_padding_mask=mask)
    assert out.shape == (3, 8) and weights.shape == (3, 5)
    # The same as a batch of one, in the module's layout, without its batch dimension.
    batch = 0 if batch_first else 1
    out1, weights1 = mha(*(x.unsqueeze(batch) for x in (q, k, v)),
                         key_padding_mask=mask.unsqueeze(0))
    np.testing.assert_allclose(out.numpy(), out1.squeeze(batch).numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(weights.numpy(), weights1.squeeze(0).numpy(), rtol=1e-6,
                               atol=1e-7)
    assert weights.numpy()[:, [2, 4]].max() == 0.0
    with pytest.raises(kiln.ShapeError,
                       match=r"MultiheadAttention: expected a key \[seq, 6\] \(unbatched, as the "
                             r"query is 2-d\), got \[1, 5, 6\]"):
        mha(q, k.unsqueeze(0), v)
