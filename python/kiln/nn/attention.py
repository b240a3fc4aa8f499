"""kiln.nn.MultiheadAttention: scaled dot-product attention over ``num_heads`` heads, with
PyTorch's parameter layout, so a torch.nn.MultiheadAttention state dict loads as it is.

    mha = kiln.nn.MultiheadAttention(embed_dim=64, num_heads=4, batch_first=True)
    out, weights = mha(x, x, x, is_causal=True)         # x [batch, seq, 64]

Parameters: ``in_proj_weight`` [3 * E, E] (the query, key and value projections stacked),
``in_proj_bias`` [3 * E], and ``out_proj`` (a Linear(E, E): ``out_proj.weight``,
``out_proj.bias``). Initialised as PyTorch does: xavier_uniform_ in_proj_weight, zero biases,
out_proj.weight as a Linear's.

``construct(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
average_attn_weights=True, is_causal=False)`` returns ``(output, weights)``:

- query [B, L, E], key and value [B, S, E] with ``batch_first=True``; [L, B, E] and [S, B, E]
  otherwise (PyTorch's default layout). The output has the query's layout.
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
    """MultiheadAttention(embed_dim, num_heads, dropout=0.0, bias=True, batch_first=False,
    dtype=None): attention over ``num_heads`` heads of embed_dim / num_heads each, with PyTorch's
    parameters; ``mha(query, key, value, ...)`` returns ``(output, weights)``. The arguments,
    layouts and masks are in kiln.nn.attention's documentation."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, batch_first=False,
                 dtype=None):
        super().__init__()
        # embed_dim 0 is refused as in PyTorch: its heads of size 0 have no attention scale.
        if num_heads <= 0 or embed_dim <= 0 or embed_dim % num_heads:
            raise KilnValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be positive "
                                 f"and divisible by num_heads ({num_heads})")
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        dtype = dtype or _C.dtype.float32
        self.in_proj_weight = Parameter(_mint.empty(3 * embed_dim, embed_dim, dtype=dtype))
        self.in_proj_bias = Parameter(_mint.empty(3 * embed_dim, dtype=dtype)) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        self.reset_parameters()

    def reset_parameters(self):
        init.xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)

    def _heads(self, x, weight, bias):
        """[B, T, E] -> projected and split into heads: [B, H, T, D]."""
        b, t, _ = x.shape
        y = _mint.linear(x, weight, bias)
        return y.reshape(b, t, self.num_heads, self.head_dim).permute(0, 2, 1, 3)

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
        return total

    def _check_inputs(self, query, key, value):
        """Checks the layouts of query, key and value (before any transpose, so that the shapes
        named are the caller's)."""
        layout = "batch, seq" if self.batch_first else "seq, batch"
        for name, x in (("query", query), ("key", key), ("value", value)):
            if x.ndim != 3 or x.shape[-1] != self.embed_dim:
                raise ShapeError(f"MultiheadAttention: expected a {name} [{layout}, "
                                 f"{self.embed_dim}] (batch_first={self.batch_first}), got "
                                 f"{list(x.shape)}")
        batch = 0 if self.batch_first else 1
        # A key of batch 1 would broadcast against the query's batch in the matmul, silently.
        if tuple(key.shape) != tuple(value.shape) or key.shape[batch] != query.shape[batch]:
            raise ShapeError(f"MultiheadAttention: expected a key and value of one shape with "
                             f"the query's batch size ({query.shape[batch]}), got key "
                             f"{list(key.shape)} and value {list(value.shape)}")

    def construct(self, query, key, value, key_padding_mask=None, need_weights=True,
                  attn_mask=None, average_attn_weights=True, is_causal=False):
        self._check_inputs(query, key, value)
        if not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        b, l, _ = query.shape
        s = key.shape[1]
        weights = _mint.chunk(self.in_proj_weight, 3, 0)
        biases = (_mint.chunk(self.in_proj_bias, 3, 0) if self.in_proj_bias is not None
                  else (None, None, None))
        q = self._heads(query, weights[0], biases[0])
        k = self._heads(key, weights[1], biases[1])
        v = self._heads(value, weights[2], biases[2])

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
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
                f"dropout={self.dropout}, batch_first={self.batch_first}")
