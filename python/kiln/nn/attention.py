"""kiln.nn.MultiheadAttention: scaled dot-product attention over ``num_heads`` heads, with
PyTorch's parameter layout, so a torch.nn.MultiheadAttention state dict loads as it is.

    mha = kiln.nn.MultiheadAttention(embed_dim=64, num_heads=4, batch_first=True)
    out, weights = mha(x, x, x, is_causal=True)         # x [batch, seq, 64]

    cross = kiln.nn.MultiheadAttention(64, 4, kdim=32, vdim=16, batch_first=True)
    out, _ = cross(x, memory_keys, memory_values)     # keys [batch, seq, 32], values [.., 16]

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
  E. The output has the query's layout.
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
"""

import math

from .. import _C
from .._checks import checked_bool, checked_int
from .._device import check_usable
from ..errors import DTypeError, KilnValueError, ShapeError
from . import functional as F
from . import init
from .cell import Cell
from .linear import Linear
from .parameter import Parameter

__all__ = ["MultiheadAttention"]

_mint = _C.mint


def _mask_tensor(mask, name):
    """``mask`` (a kiln tensor, a NumPy array or nested lists) as a bool or floating-point tensor.
    An integer mask is refused rather than added to the scores: a 0/1 mask meant as bool would
    otherwise shift the masked scores by 1 and mask nothing."""
    if not isinstance(mask, _C.Tensor):
        mask = _C.tensor(mask)  # a NumPy bool array stays bool
    if mask.dtype != _C.dtype.bool and not mask.dtype.is_floating_point:
        raise DTypeError(f"MultiheadAttention: expected a bool {name} (True = masked) or a "
                         f"floating-point one (added to the scores), got dtype {mask.dtype.name}; "
                         f"convert a 0/1 mask with .to(kiln.bool_)")
    return mask


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
        dtype = dtype or _C.dtype.float32

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

    def _projections(self, query, key, value):
        """The projected query [B, L, E], key and value [B, S', E], with bias_k / bias_v and the
        zero key / value appended along the sequence (S' = S plus those)."""
        if self._qkv_same_embed_dim:
            weights = _mint.chunk(self.in_proj_weight, 3, 0)
        else:
            weights = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
        biases = (_mint.chunk(self.in_proj_bias, 3, 0) if self.in_proj_bias is not None
                  else (None, None, None))
        q, k, v = (_mint.linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases))
        if self.bias_k is not None:
            batch = [k.shape[0], 1, self.embed_dim]
            k = _mint.cat([k, self.bias_k.expand(batch)], 1)
            v = _mint.cat([v, self.bias_v.expand(batch)], 1)
        if self.add_zero_attn:
            # Zeros after the projection: a key scoring 0 against every query, a value of 0.
            k, v = _mint.pad(k, [0, 0, 0, 1]), _mint.pad(v, [0, 0, 0, 1])
        return q, k, v

    def _heads(self, x):
        """[B, T, E] split into heads: [B, H, T, D]."""
        b, t, _ = x.shape
        return x.reshape(b, t, self.num_heads, self.head_dim).permute(0, 2, 1, 3)

    def _additive_mask(self, attn_mask, key_padding_mask, is_causal, b, l, s, dtype):
        """The masks as one float tensor added to the scores [B, H, L, S] (None when none)."""
        masks = []
        if attn_mask is not None:
            attn_mask = _mask_tensor(attn_mask, "attn_mask")
            if attn_mask.ndim == 3:
                if tuple(attn_mask.shape) != (b * self.num_heads, l, s):
                    raise ShapeError(f"MultiheadAttention: a 3-d attn_mask must have shape "
                                     f"{[b * self.num_heads, l, s]}, got {list(attn_mask.shape)}")
                attn_mask = attn_mask.reshape(b, self.num_heads, l, s)
            elif tuple(attn_mask.shape) != (l, s):
                raise ShapeError(f"MultiheadAttention: attn_mask must have shape {[l, s]} or "
                                 f"{[b * self.num_heads, l, s]}, got {list(attn_mask.shape)}")
            masks.append(attn_mask)
        if is_causal:
            masks.append(_mint.triu(_mint.ones(l, s, dtype=_C.dtype.bool), 1))
        if key_padding_mask is not None:
            key_padding_mask = _mask_tensor(key_padding_mask, "key_padding_mask")
            if tuple(key_padding_mask.shape) != (b, s):
                raise ShapeError(f"MultiheadAttention: key_padding_mask must have shape {[b, s]}, "
                                 f"got {list(key_padding_mask.shape)}")
            masks.append(key_padding_mask.reshape(b, 1, 1, s))
        total = None
        for mask in masks:
            if mask.dtype == _C.dtype.bool:
                mask = _mint.masked_fill(_mint.zeros(mask.shape, dtype=dtype), mask,
                                         float("-inf"))
            else:
                mask = mask.to(dtype)
            total = mask if total is None else total + mask
        added = (self.bias_k is not None) + self.add_zero_attn
        if total is None or not added:
            return total
        # The appended keys (bias_k, the zero key) may be attended to: 0 is added to their scores.
        return _mint.pad(total, [0, added])

    def _check_inputs(self, query, key, value):
        """Checks the layouts of query, key and value (before any transpose, so that the shapes
        named are the caller's)."""
        layout = "batch, seq" if self.batch_first else "seq, batch"
        for name, x, width in (("query", query, self.embed_dim), ("key", key, self.kdim),
                               ("value", value, self.vdim)):
            if x.ndim != 3 or x.shape[-1] != width:
                raise ShapeError(f"MultiheadAttention: expected a {name} [{layout}, {width}] "
                                 f"(batch_first={self.batch_first}), got {list(x.shape)}")
        batch = 0 if self.batch_first else 1
        # A key of batch 1 would broadcast against the query's batch in the matmul, silently.
        if tuple(key.shape[:2]) != tuple(value.shape[:2]) or key.shape[batch] != query.shape[batch]:
            same = "one shape" if self.kdim == self.vdim else "one sequence length"
            raise ShapeError(f"MultiheadAttention: expected a key and value of {same} with "
                             f"the query's batch size ({query.shape[batch]}), got key "
                             f"{list(key.shape)} and value {list(value.shape)}")

    def construct(self, query, key, value, key_padding_mask=None, need_weights=True,
                  attn_mask=None, average_attn_weights=True, is_causal=False):
        self._check_inputs(query, key, value)
        if not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        b, l, _ = query.shape
        s = key.shape[1]
        q, k, v = (self._heads(x) for x in self._projections(query, key, value))

        scores = _mint.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
        mask = self._additive_mask(attn_mask, key_padding_mask, is_causal, b, l, s, scores.dtype)
        attn = _mint.softmax(scores, -1) if mask is None else F._masked_softmax(scores + mask)
        if self.dropout > 0.0:
            attn = _mint.dropout(attn, self.dropout, self.training)

        out = _mint.matmul(attn, v).permute(0, 2, 1, 3).reshape(b, l, self.embed_dim)
        out = self.out_proj(out)
        if not self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        return out, (_mint.mean(attn, 1) if average_attn_weights else attn)

    def extra_repr(self):
        text = f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"
        if not self._qkv_same_embed_dim:
            text += f", kdim={self.kdim}, vdim={self.vdim}"
        if self.bias_k is not None:
            text += ", add_bias_kv=True"
        if self.add_zero_attn:
            text += ", add_zero_attn=True"
        return text + f", dropout={self.dropout}, batch_first={self.batch_first}"
