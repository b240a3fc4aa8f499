"""kiln.nn.MultiheadAttention and kiln.nn.functional.multi_head_attention_forward: scaled
dot-product attention over ``num_heads`` heads, with PyTorch's parameter layout, so a
torch.nn.MultiheadAttention state dict loads as it is. The module holds the parameters and
calls the function, which is the one implementation.

    mha = kiln.nn.MultiheadAttention(embed_dim=64, num_heads=4, batch_first=True)
    out, weights = mha(x, x, x, is_causal=True)         # x [batch, seq, 64]

    cross = kiln.nn.MultiheadAttention(64, 4, kdim=32, vdim=16, batch_first=True)
    out, _ = cross(x, memory_keys, memory_values)     # keys [batch, seq, 32], values [.., 16]

    out, weights = F.multi_head_attention_forward(q, k, v, 64, 4, w_in, b_in, None, None, False,
                                                  0.0, w_out, b_out)   # q [seq, batch, 64]

Parameters, PyTorch's names, shapes and order (so state dicts load both ways):
``in_proj_weight`` [3 * E, E] (the query, key and value projections stacked) or, when ``kdim``
or ``vdim`` differs from E, ``q_proj_weight`` [E, E], ``k_proj_weight`` [E, kdim] and
``v_proj_weight`` [E, vdim] instead (in_proj_weight is then None); ``in_proj_bias`` [3 * E] (none
with ``bias=False``); with ``add_bias_kv``, ``bias_k`` and ``bias_v`` [1, 1, E]; and ``out_proj``
(a Linear(E, E): ``out_proj.weight``, ``out_proj.bias``). Initialised as PyTorch does:
xavier_uniform_ projection weights, zero biases, xavier_normal_ bias_k and bias_v,
out_proj.weight as a Linear's.

``add_bias_kv`` appends bias_k and bias_v to the projected keys and values, as one more key
position; ``add_zero_attn`` then appends a key and value of zeros (a score of 0). The masks are
given for the caller's S keys and are padded for the added positions, which every query may
attend to; the weights returned cover them too ([..., S + 1] or [..., S + 2]).

``construct(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
average_attn_weights=True, is_causal=False)`` returns ``(output, weights)``:

- query [B, L, E], key [B, S, kdim] and value [B, S, vdim] with ``batch_first=True``; [L, B, E],
  [S, B, kdim] and [S, B, vdim] otherwise (PyTorch's default layout); kdim and vdim default to
  E. One unbatched sequence is query [L, E], key [S, kdim] and value [S, vdim] (then
  key_padding_mask is [S] and a 3-d attn_mask [num_heads, L, S]). The output has the query's
  layout. Query, key and value must have the parameters' dtype (``dtype``, by default the default
  dtype): another one, a float64 or an integer batch, is a DTypeError naming both, as in PyTorch.
- ``attn_mask`` [L, S] or [B * num_heads, L, S]: a bool mask (True = may not attend) or a float
  mask added to the scores. ``key_padding_mask`` [B, S]: True marks keys to ignore (or, floating,
  added to the scores). Either mask may be a kiln tensor, a NumPy array or nested lists; an
  integer mask is a DTypeError, as in PyTorch. ``is_causal=True`` forbids attending to later
  positions (combined with ``attn_mask``, if any). A query whose every key is masked (a fully
  padded sequence) attends to nothing: its weights are 0, as PyTorch's fast path gives (its
  need_weights path gives NaN, whose gradient spreads to every weight).
- ``weights`` is None unless ``need_weights``: [B, L, S] averaged over heads, or
  [B, num_heads, L, S] with ``average_attn_weights=False``.
- ``dropout`` applies to the attention weights while training.

``multi_head_attention_forward`` takes PyTorch's arguments (see its docstring) in PyTorch's
sequence-first layout, [L, N, E], or unbatched, [L, E], with the masks above (unbatched, a
key_padding_mask [S] and a 3-d attn_mask [num_heads, L, S]). Where it differs from PyTorch's:
``is_causal=True`` applies the causal mask itself, combined with ``attn_mask`` if one is given
(PyTorch's takes it as a hint that attn_mask is that mask and requires one: the same result
where the hint is right); a fully masked query's weights are 0, not NaN; and ``static_k`` /
``static_v`` may have their own sequence length, which the masks then cover.
"""

import math

from .. import _C
from .._checks import check_held_dtype, checked_bool, checked_int
from .._device import check_usable
from ..errors import DTypeError, KilnValueError, ShapeError
from ..mint._composite import check_real
from . import functional as F
from . import init
from ._layer_arguments import checked_tensor
from .cell import Cell
from .linear import Linear
from .parameter import Parameter

__all__ = ["MultiheadAttention", "multi_head_attention_forward"]

_mint = _C.mint
_OWNER = "multi_head_attention_forward"


def _mask_tensor(mask, name):
    """``mask`` (a kiln tensor, a NumPy array or nested lists) as a bool or floating-point tensor.
    An integer mask is refused rather than added to the scores: a 0/1 mask meant as bool would
    otherwise shift the masked scores by 1 and mask nothing."""
    if not isinstance(mask, _C.Tensor):
        mask = _C.tensor(mask)  # a NumPy bool array stays bool
    if mask.dtype != _C.dtype.bool and not mask.dtype.is_floating_point:
        raise DTypeError(f"{_OWNER}: expected a bool {name} (True = masked) or a "
                         f"floating-point one (added to the scores), got dtype {mask.dtype.name}; "
                         f"convert a 0/1 mask with .to(kiln.bool_)")
    return mask


def _check_inputs(owner, inputs, layout, batch, note=""):
    """Checks the (name, tensor, features) ``inputs``, query, key and value: kiln tensors
    [``layout``, features] (``layout`` names the leading dims as the caller lays them out, so
    that the shapes named are the caller's), and a key and value of one sequence length with
    the query's batch size (their dim ``batch``; None when unbatched)."""
    rank = layout.count(",") + 2
    for name, x, features in inputs:
        checked_tensor(owner, name, x)
        if x.ndim != rank or x.shape[-1] != features:
            raise ShapeError(f"{owner}: expected a {name} [{layout}, {features}]{note}, got "
                             f"{list(x.shape)}")
    (_, query, _), (_, key, kdim), (_, value, vdim) = inputs
    # A key of batch 1 would broadcast against the query's batch in the matmul, silently.
    if tuple(key.shape[:-1]) != tuple(value.shape[:-1]) or (
            batch is not None and key.shape[batch] != query.shape[batch]):
        same = "one shape" if kdim == vdim else "one sequence length"
        batch_size = "" if batch is None else f" with the query's batch size ({query.shape[batch]})"
        raise ShapeError(f"{owner}: expected a key and value of {same}{batch_size}, got key "
                         f"{list(key.shape)} and value {list(value.shape)}")


def _check_shape(name, x, shape):
    """Checks that ``x`` is a kiln tensor of ``shape``."""
    checked_tensor(_OWNER, name, x)
    if tuple(x.shape) != tuple(shape):
        raise ShapeError(f"{_OWNER}: expected {name} of shape {list(shape)}, got "
                         f"{list(x.shape)}")


def _projection_weights(embed_dim, in_proj_weight, use_separate_proj_weight, separate):
    """The query, key and value projection weights, checked: the chunks of ``in_proj_weight``
    [3E, E] or the ``separate`` (q_proj_weight, k_proj_weight, v_proj_weight), [E, E],
    [E, kdim] and [E, vdim]."""
    if not use_separate_proj_weight:
        if in_proj_weight is None:
            raise KilnValueError(f"{_OWNER}: use_separate_proj_weight is False, so expected an "
                                 f"in_proj_weight [{3 * embed_dim}, {embed_dim}], got None")
        _check_shape("in_proj_weight", in_proj_weight, (3 * embed_dim, embed_dim))
        return _mint.chunk(in_proj_weight, 3, 0)
    for name, weight in zip(("q_proj_weight", "k_proj_weight", "v_proj_weight"), separate):
        if weight is None:
            raise KilnValueError(f"{_OWNER}: use_separate_proj_weight is True, so expected a "
                                 f"{name} [{embed_dim}, features], got None")
        checked_tensor(_OWNER, name, weight)
        if weight.ndim != 2 or weight.shape[0] != embed_dim:
            raise ShapeError(f"{_OWNER}: expected {name} of shape [{embed_dim}, features], got "
                             f"{list(weight.shape)}")
    _check_shape("q_proj_weight", separate[0], (embed_dim, embed_dim))
    return separate


def _check_dtypes(weights, separate, inputs, params):
    """Checks the (name, tensor or None) ``inputs`` and ``params`` against the dtype of the query
    projection weight (``weights``: the query, key and value ones; ``separate``: whether they
    are q_proj_weight, k_proj_weight and v_proj_weight), as PyTorch's projections refuse mixed
    dtypes: a DTypeError naming both."""
    for name, value in inputs + params:
        if value is not None:
            checked_tensor(_OWNER, name, value)
    if separate:
        params += (("k_proj_weight", weights[1]), ("v_proj_weight", weights[2]))
    whose = "q_proj_weight's" if separate else "in_proj_weight's"
    check_held_dtype(_OWNER, weights[0].dtype, whose, inputs, params)


def _heads(x, num_heads):
    """[T, B, E] split into heads: [B, H, T, E / H]."""
    t, b, e = x.shape
    return x.reshape(t, b, num_heads, e // num_heads).permute(1, 2, 0, 3)


def _static(name, x, b, num_heads, head_dim):
    """A static key or value [B * H, S, D] as [B, H, S, D]."""
    checked_tensor(_OWNER, name, x)
    if x.ndim != 3 or x.shape[0] != b * num_heads or x.shape[2] != head_dim:
        raise ShapeError(f"{_OWNER}: expected {name} of shape [batch * num_heads = "
                         f"{b * num_heads}, seq, head_dim = {head_dim}], got {list(x.shape)}")
    return x.reshape(b, num_heads, x.shape[1], head_dim)


def _additive_mask(attn_mask, key_padding_mask, is_causal, batched, sizes, added, dtype):
    """The masks as one float tensor added to the scores [B, H, L, S + added] (None when
    none); ``sizes`` is (B, H, L, S)."""
    b, h, l, s = sizes
    masks = []
    if attn_mask is not None:
        attn_mask = _mask_tensor(attn_mask, "attn_mask")
        if attn_mask.ndim == 3:
            if tuple(attn_mask.shape) != (b * h, l, s):
                raise ShapeError(f"{_OWNER}: a 3-d attn_mask must have shape {[b * h, l, s]}, "
                                 f"got {list(attn_mask.shape)}")
            attn_mask = attn_mask.reshape(b, h, l, s)
        elif tuple(attn_mask.shape) != (l, s):
            raise ShapeError(f"{_OWNER}: attn_mask must have shape {[l, s]} or "
                             f"{[b * h, l, s]}, got {list(attn_mask.shape)}")
        masks.append(attn_mask)
    if is_causal:
        masks.append(_mint.triu(_mint.ones(l, s, dtype=_C.dtype.bool), 1))
    if key_padding_mask is not None:
        key_padding_mask = _mask_tensor(key_padding_mask, "key_padding_mask")
        shape = [b, s] if batched else [s]
        if list(key_padding_mask.shape) != shape:
            raise ShapeError(f"{_OWNER}: key_padding_mask must have shape {shape}, got "
                             f"{list(key_padding_mask.shape)}")
        masks.append(key_padding_mask.reshape(b, 1, 1, s))
    total = None
    for mask in masks:
        if mask.dtype == _C.dtype.bool:
            mask = _mint.masked_fill(_mint.zeros(mask.shape, dtype=dtype), mask,
                                     float("-inf"))
        else:
            mask = mask.to(dtype)
        total = mask if total is None else total + mask
    if total is None or not added:
        return total
    # The appended keys (bias_k, the zero key) may be attended to: 0 is added to their scores.
    return _mint.pad(total, [0, added])


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
    in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight,
    out_proj_bias, training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
    use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None, v_proj_weight=None,
    static_k=None, static_v=None, average_attn_weights=True, is_causal=False): PyTorch's
    functional multi-head attention (what kiln.nn.MultiheadAttention computes), returning
    ``(attn_output, attn_weights)``.

    - query [L, N, E] (E = ``embed_dim_to_check``, divisible by ``num_heads``), key [S, N, kdim]
      and value [S, N, vdim]; or unbatched, [L, E], [S, kdim] and [S, vdim]. kdim and vdim are
      E unless ``use_separate_proj_weight``.
    - The projections: ``in_proj_weight`` [3E, E] (query, key and value stacked) or, with
      ``use_separate_proj_weight``, ``q_proj_weight`` [E, E], ``k_proj_weight`` [E, kdim] and
      ``v_proj_weight`` [E, vdim]; ``in_proj_bias`` [3E] or None. ``out_proj_weight`` [E', E]
      and ``out_proj_bias`` [E'] (or None) project the heads' concatenation: the output is
      [L, N, E'] ([L, E'] unbatched).
    - query, key, value, static_k, static_v and every bias and projection weight must have the
      dtype of the query's projection weight (a DTypeError naming both, as in PyTorch).
    - ``bias_k`` and ``bias_v`` [1, 1, E] (both or neither) are appended to the projected keys
      and values, then, with ``add_zero_attn``, a key and value of zeros.
    - ``static_k`` / ``static_v`` [N * num_heads, S', E / num_heads] replace the projected keys /
      values (bias_k and bias_v cannot be appended to them).
    - The masks are kiln.nn.MultiheadAttention's (kiln.nn.attention's documentation), for the
      S (or S') keys given: ``attn_mask`` [L, S] or [N * num_heads, L, S], ``key_padding_mask``
      [N, S] ([S] unbatched), bool (True = masked) or floating (added to the scores);
      ``is_causal=True`` adds the causal mask.
    - ``dropout_p`` applies to the attention weights when ``training``.
    - ``attn_weights`` is None unless ``need_weights``: [N, L, S''] averaged over the heads, or
      [N, num_heads, L, S''] with ``average_attn_weights=False`` (no N unbatched); S'' counts
      the appended keys.
    """
    checked_tensor(_OWNER, "query", query)
    e = checked_int(_OWNER, "embed_dim_to_check", embed_dim_to_check, low=1)
    num_heads = checked_int(_OWNER, "num_heads", num_heads, low=1)
    if e % num_heads:
        raise KilnValueError(f"{_OWNER}: embed_dim_to_check ({e}) must be divisible by "
                             f"num_heads ({num_heads})")
    if query.ndim in (2, 3) and query.shape[-1] != e:
        raise ShapeError(f"{_OWNER}: expected a query of embed_dim_to_check = {e} features "
                         f"(its last dim), got {list(query.shape)}")
    weights = _projection_weights(e, in_proj_weight, use_separate_proj_weight,
                                  (q_proj_weight, k_proj_weight, v_proj_weight))
    batched = query.ndim != 2
    _check_inputs(_OWNER, (("query", query, e), ("key", key, weights[1].shape[1]),
                           ("value", value, weights[2].shape[1])),
                  "seq, batch" if batched else "seq", 1 if batched else None,
                  "" if batched else " (unbatched, as the query is 2-d)")
    if in_proj_bias is not None:
        _check_shape("in_proj_bias", in_proj_bias, (3 * e,))
    checked_tensor(_OWNER, "out_proj_weight", out_proj_weight)
    if out_proj_weight.ndim != 2 or out_proj_weight.shape[1] != e:
        raise ShapeError(f"{_OWNER}: expected out_proj_weight of shape [out_features, {e}], got "
                         f"{list(out_proj_weight.shape)}")
    if (bias_k is None) != (bias_v is None):
        raise KilnValueError(f"{_OWNER}: expected both bias_k and bias_v or neither, got "
                             f"{'bias_k' if bias_v is None else 'bias_v'} alone")
    if bias_k is not None:
        if static_k is not None or static_v is not None:
            raise KilnValueError(f"{_OWNER}: bias_k and bias_v cannot be appended to static_k "
                                 f"or static_v; pass one or the other")
        _check_shape("bias_k", bias_k, (1, 1, e))
        _check_shape("bias_v", bias_v, (1, 1, e))
    dropout_p = check_real(_OWNER, "dropout_p", dropout_p)
    if not 0.0 <= dropout_p <= 1.0:
        raise KilnValueError(f"{_OWNER}: dropout_p must be in [0, 1], got {dropout_p}")
    _check_dtypes(weights, use_separate_proj_weight,
                  (("query", query), ("key", key), ("value", value), ("static_k", static_k),
                   ("static_v", static_v)),
                  (("in_proj_bias", in_proj_bias), ("bias_k", bias_k), ("bias_v", bias_v),
                   ("out_proj_weight", out_proj_weight), ("out_proj_bias", out_proj_bias)))

    if not batched:
        query, key, value = (_mint.unsqueeze(x, 1) for x in (query, key, value))
    l, b, _ = query.shape
    head_dim = e // num_heads
    biases = (_mint.chunk(in_proj_bias, 3, 0) if in_proj_bias is not None
              else (None, None, None))
    q = _heads(_mint.linear(query, weights[0], biases[0]), num_heads)
    projected = []
    for x, weight, bias, appended, static, name in (
            (key, weights[1], biases[1], bias_k, static_k, "static_k"),
            (value, weights[2], biases[2], bias_v, static_v, "static_v")):
        if static is not None:
            projected.append(_static(name, static, b, num_heads, head_dim))
            continue
        x = _mint.linear(x, weight, bias)
        if appended is not None:
            x = _mint.cat([x, appended.expand([1, b, e])], 0)
        projected.append(_heads(x, num_heads))
    k, v = projected
    if k.shape[2] != v.shape[2]:
        raise ShapeError(f"{_OWNER}: expected keys and values of one sequence length, got "
                         f"{k.shape[2]} keys and {v.shape[2]} values (static_k / static_v "
                         f"[batch * num_heads, seq, head_dim] replace the projected ones)")
    if add_zero_attn:
        # Zeros after the projection: a key scoring 0 against every query, a value of 0.
        k, v = _mint.pad(k, [0, 0, 0, 1]), _mint.pad(v, [0, 0, 0, 1])
    added = (bias_k is not None) + bool(add_zero_attn)

    scores = _mint.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(head_dim))
    mask = _additive_mask(attn_mask, key_padding_mask, is_causal, batched,
                          (b, num_heads, l, k.shape[2] - added), added, scores.dtype)
    attn = _mint.softmax(scores, -1) if mask is None else F._masked_softmax(scores + mask)
    if training and dropout_p > 0.0:
        attn = _mint.dropout(attn, dropout_p, True)

    # [B, H, L, D] -> [L, B, E]: the heads side by side, sequence first.
    out = _mint.matmul(attn, v).permute(2, 0, 1, 3).reshape(l, b, e)
    out = _mint.linear(out, out_proj_weight, out_proj_bias)
    if not batched:
        out = _mint.squeeze(out, 1)
    if not need_weights:
        return out, None
    if average_attn_weights:
        attn = _mint.mean(attn, 1)
    return out, (attn if batched else _mint.squeeze(attn, 0))


class MultiheadAttention(Cell):
    """MultiheadAttention(embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
    add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None, dtype=None),
    PyTorch's signature: attention over ``num_heads`` heads of embed_dim / num_heads each, with
    PyTorch's parameters; ``mha(query, key, value, ...)`` returns ``(output, weights)``. The
    arguments, layouts and masks are in kiln.nn.attention's documentation. ``device`` must be
    the CPU (kiln.device)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        super().__init__()
        owner = "MultiheadAttention"
        # embed_dim 0 is refused as in PyTorch: its heads of size 0 have no attention scale.
        if num_heads <= 0 or embed_dim <= 0 or embed_dim % num_heads:
            raise KilnValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be positive "
                                 f"and divisible by num_heads ({num_heads})")
        if device is not None:
            check_usable(owner, device)
        self.embed_dim = embed_dim
        self.kdim = embed_dim if kdim is None else checked_int(owner, "kdim", kdim, low=1)
        self.vdim = embed_dim if vdim is None else checked_int(owner, "vdim", vdim, low=1)
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.add_zero_attn = checked_bool(owner, "add_zero_attn", add_zero_attn)
        checked_bool(owner, "add_bias_kv", add_bias_kv)
        def parameter(*shape):
            return Parameter(_mint.empty(*shape, dtype=dtype))

        # Registered in PyTorch's order, which is state_dict's.
        if self._qkv_same_embed_dim:
            self.in_proj_weight = parameter(3 * embed_dim, embed_dim)
            self.q_proj_weight = self.k_proj_weight = self.v_proj_weight = None
        else:
            self.q_proj_weight = parameter(embed_dim, embed_dim)
            self.k_proj_weight = parameter(embed_dim, self.kdim)
            self.v_proj_weight = parameter(embed_dim, self.vdim)
            self.in_proj_weight = None
        self.in_proj_bias = parameter(3 * embed_dim) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        if add_bias_kv:
            self.bias_k = parameter(1, 1, embed_dim)
            self.bias_v = parameter(1, 1, embed_dim)
        else:
            self.bias_k = self.bias_v = None
        self.reset_parameters()

    @property
    def _qkv_same_embed_dim(self):
        """Whether keys and values have embed_dim features: one stacked in_proj_weight then
        (PyTorch's attribute of that name)."""
        return self.kdim == self.embed_dim and self.vdim == self.embed_dim

    def __setstate__(self, state):
        # A pickle from before kdim, vdim, add_bias_kv and add_zero_attn has none of them. Only
        # the parameters it lacks become None: a plain attribute would hide a registered one.
        embed_dim = state["embed_dim"]
        params = state.get("_params", {})
        empty = {name: None for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight",
                                         "bias_k", "bias_v") if name not in params}
        super().__setstate__({"kdim": embed_dim, "vdim": embed_dim, "add_zero_attn": False,
                              **empty, **state})

    def reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for weight in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(weight)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def construct(self, query, key, value, key_padding_mask=None, need_weights=True,
                  attn_mask=None, average_attn_weights=True, is_causal=False):
        # Checked here first, so that the shapes named are in the module's layout. A 2-d query is
        # one unbatched sequence [seq, E], whatever batch_first says (PyTorch's rule).
        batched = getattr(query, "ndim", None) != 2
        if batched:
            layout = "batch, seq" if self.batch_first else "seq, batch"
            batch, note = (0 if self.batch_first else 1), f" (batch_first={self.batch_first})"
        else:
            layout, batch, note = "seq", None, " (unbatched, as the query is 2-d)"
        _check_inputs("MultiheadAttention",
                      (("query", query, self.embed_dim), ("key", key, self.kdim),
                       ("value", value, self.vdim)), layout, batch, note)
        if self.batch_first and batched:
            query, key, value = (x.transpose(0, 1) for x in (query, key, value))
        out, weights = multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
            self.out_proj.weight, self.out_proj.bias, training=self.training,
            key_padding_mask=key_padding_mask, need_weights=need_weights, attn_mask=attn_mask,
            use_separate_proj_weight=not self._qkv_same_embed_dim,
            q_proj_weight=self.q_proj_weight, k_proj_weight=self.k_proj_weight,
            v_proj_weight=self.v_proj_weight, average_attn_weights=average_attn_weights,
            is_causal=is_causal)
        return (out.transpose(0, 1) if self.batch_first and batched else out), weights

    def extra_repr(self):
        text = f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"
        if not self._qkv_same_embed_dim:
            text += f", kdim={self.kdim}, vdim={self.vdim}"
        if self.bias_k is not None:
            text += ", add_bias_kv=True"
        if self.add_zero_attn:
            text += ", add_zero_attn=True"
        return text + f", dropout={self.dropout}, batch_first={self.batch_first}"
