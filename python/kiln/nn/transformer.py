"""kiln.nn.Transformer and its parts, PyTorch's transformer layers over kiln.nn's
MultiheadAttention, Linear, LayerNorm and Dropout, with PyTorch's arguments, defaults and
sub-cell names, so a torch.nn.Transformer* state dict loads as it is.

    layer = kiln.nn.TransformerEncoderLayer(d_model=64, nhead=4, batch_first=True)
    encoder = kiln.nn.TransformerEncoder(layer, num_layers=6, norm=kiln.nn.LayerNorm(64))
    mask = kiln.nn.Transformer.generate_square_subsequent_mask(10)   # [10, 10]: 0 and -inf
    y = encoder(x, mask=mask, src_key_padding_mask=padding)          # x [batch, 10, 64]

- ``TransformerEncoderLayer(d_model, nhead, dim_feedforward=2048, dropout=0.1,
  activation="relu", layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
  device=None, dtype=None)``: self-attention, then the feed-forward block linear2(dropout(
  activation(linear1(x)))), each in a residual branch with a LayerNorm after it (post-norm, the
  default) or at the start of the branch (``norm_first=True``). Sub-cells: self_attn, linear1,
  dropout, linear2, norm1, norm2, dropout1, dropout2. ``layer(src, src_mask=None,
  src_key_padding_mask=None, is_causal=False)``.
- ``TransformerDecoderLayer`` (the same arguments): self-attention over the target, attention
  from the target to ``memory`` (the encoder's output), then the feed-forward block. Sub-cells
  as the encoder layer's, plus multihead_attn, norm3 and dropout3. ``layer(tgt, memory,
  tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
  tgt_is_causal=False, memory_is_causal=False)``.
- ``TransformerEncoder(encoder_layer, num_layers, norm=None)`` and ``TransformerDecoder(
  decoder_layer, num_layers, norm=None)``: ``num_layers`` deep copies of the layer in ``layers``
  (a ModuleList; the copies start with equal parameters, as PyTorch's), applied in turn, then
  ``norm`` when given. ``encoder(src, mask=None, src_key_padding_mask=None, is_causal=None)``;
  ``decoder(tgt, memory, ...)`` with the decoder layer's arguments.
- ``Transformer(d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
  dim_feedforward=2048, dropout=0.1, activation="relu", custom_encoder=None,
  custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
  device=None, dtype=None)``: an encoder and a decoder (each ending in a LayerNorm) as
  ``encoder`` and ``decoder``, every parameter of two or more dimensions re-initialised by
  xavier_uniform_, as PyTorch's. ``model(src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
  src_key_padding_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
  src_is_causal=None, tgt_is_causal=None, memory_is_causal=False)`` returns the decoder's output.
  ``Transformer.generate_square_subsequent_mask(sz, device=None, dtype=None)``: the causal mask
  [sz, sz], -inf above the diagonal and 0 elsewhere (the default dtype unless ``dtype`` says
  otherwise).

Inputs are [seq, batch, d_model], or [batch, seq, d_model] with ``batch_first=True``; the output
has the target's (the source's, in the encoder) layout. As in PyTorch, inputs may also be one
unbatched sequence each, [seq, d_model] (then every input of the call is, and the output is
[seq, d_model]). The masks are MultiheadAttention's (see kiln.nn.attention): an attention mask
[L, S] or [batch * nhead, L, S] ([nhead, L, S] unbatched), bool (True = may not attend) or
floating (added to the scores); a key padding mask [batch, S] ([S] unbatched), True marking the
keys to ignore. The layers' parameters are of ``dtype`` (default: the default dtype); ``device``
must be the CPU (kiln.device), as for every kiln tensor. ``activation`` is "relu", "gelu"
(kiln.nn.functional's relu and gelu) or any callable, such as a kiln.nn.GELU(approximate="tanh")
cell, which is then registered as the sub-cell ``activation``, as in PyTorch (it has no parameters:
the state dict keeps its keys).
``dropout`` applies to the attention weights, inside the feed-forward block and at the end of
every branch, while training; in eval mode the layers are deterministic.

Where this differs from PyTorch:

- ``is_causal=True`` (``tgt_is_causal``, ``memory_is_causal``) without a mask applies the causal
  mask, where PyTorch requires the mask as well. With a mask, PyTorch takes the flag as a hint
  that the mask is causal; Kiln applies the mask as given, and ``is_causal=None`` (the stacks'
  default, which in PyTorch compares the mask with the causal one) needs no detection.
- TransformerEncoder's ``enable_nested_tensor`` and ``mask_check``, which choose PyTorch's
  nested-tensor fast path, are accepted and change nothing.

Errors: ``d_model``, ``nhead`` or ``dim_feedforward`` that are no positive ints, or a d_model
that nhead does not divide (KilnTypeError / KilnValueError); ``batch_first``, ``norm_first`` or
``bias`` that are no bools (KilnTypeError); an ``activation`` string other than "relu" and
"gelu" (KilnValueError) or an activation that is neither a string nor callable (KilnTypeError);
a ``device`` other than the CPU (KilnValueError); inputs that are no kiln tensors
(KilnTypeError) or of the wrong shapes (ShapeError): of another rank than 2 or 3, or of ranks
that differ, a last dimension that is not d_model, a memory (a target) whose batch size differs
from the target's (the source's), or an unbatched input's key padding mask that is not 1-D.
"""

import copy

from .. import _C
from .._checks import checked_bool, checked_int
from .._device import check_usable
from ..errors import KilnTypeError, KilnValueError, ShapeError
from . import functional as F
from . import init
from .attention import MultiheadAttention
from .cell import Cell
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .normalization import LayerNorm

__all__ = ["TransformerEncoderLayer", "TransformerDecoderLayer", "TransformerEncoder",
           "TransformerDecoder", "Transformer"]

_mint = _C.mint

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


def _activation_fn(owner, activation):
    """``activation`` ("relu", "gelu" or a callable) as the callable the feed-forward block
    applies."""
    if isinstance(activation, str):
        if activation not in _ACTIVATIONS:
            raise KilnValueError(f"{owner}: activation must be 'relu', 'gelu' or a callable, got "
                                 f"{activation!r}")
        return _ACTIVATIONS[activation]
    if not callable(activation):
        raise KilnTypeError(f"{owner}: activation must be 'relu', 'gelu' or a callable, got "
                            f"{type(activation).__name__} {activation!r}")
    return activation


def _check_inputs(owner, d_model, batch_first, *named):
    """Checks each (name, tensor) of ``named``: kiln tensors, either all batches [seq, batch,
    d_model] ([batch, seq, d_model] with ``batch_first``) of one batch size (their sequences may
    differ), or all unbatched sequences [seq, d_model], as PyTorch takes them. Returns whether
    they are unbatched."""
    for name, x in named:
        if not isinstance(x, _C.Tensor):
            raise KilnTypeError(f"{owner}: expected {name} to be a kiln.Tensor, got "
                                f"{type(x).__name__}")
    layout = "batch, seq" if batch_first else "seq, batch"
    shapes = {3: f"[{layout}, {d_model}] (batch_first={batch_first})",
              2: f"[seq, {d_model}] (unbatched)"}
    (first, x0), *others = named
    for name, x in named:
        # The first input may be either; the others must be as it is.
        ranks = (3, 2) if name == first else (x0.ndim,)
        if x.ndim not in ranks or x.shape[-1] != d_model:
            wanted = " or ".join(f"a {rank}-D {name} {shapes[rank]}" for rank in ranks)
            like = "" if name == first else f", as {first} {list(x0.shape)} is"
            raise ShapeError(f"{owner}: expected {wanted}{like}, got {list(x.shape)}")
    batch = 0 if batch_first else 1
    for name, x in others:
        if x.ndim == 3 and x.shape[batch] != x0.shape[batch]:
            raise ShapeError(f"{owner}: expected {first} and {name} of one batch size (dim "
                             f"{batch}, batch_first={batch_first}), got {first} "
                             f"{list(x0.shape)} and {name} {list(x.shape)}")
    return x0.ndim == 2


def _sample_padding(owner, name, mask):
    """An unbatched input's key padding mask [seq] (None, a kiln tensor, a NumPy array or nested
    lists, as MultiheadAttention takes it) as one of a batch of one, [1, seq]."""
    if mask is None:
        return None
    mask = mask if isinstance(mask, _C.Tensor) else _C.tensor(mask)
    if mask.ndim != 1:
        raise ShapeError(f"{owner}: expected a 1-D {name} [seq] for unbatched inputs, got "
                         f"{list(mask.shape)}")
    return _mint.unsqueeze(mask, 0)


def _attend(attention, query, memory, mask, key_padding_mask, is_causal):
    """``attention``'s output for ``query`` over ``memory`` (keys and values). A given ``mask``
    is applied as it is (``is_causal`` is PyTorch's hint that it is the causal mask); without
    one, ``is_causal`` asks for the causal mask."""
    return attention(query, memory, memory, key_padding_mask=key_padding_mask,
                     need_weights=False, attn_mask=mask,
                     is_causal=bool(is_causal) and mask is None)[0]


class _TransformerLayer(Cell):
    """What the encoder and decoder layers share: one MultiheadAttention per name in
    ``attentions``, the feed-forward block (linear1, dropout, linear2, activation) and, per
    residual branch (the attentions and the feed-forward block), a LayerNorm ``norm<i>`` and a
    Dropout ``dropout<i>``, registered in PyTorch's order (which is state_dict's)."""

    def __init__(self, attentions, d_model, nhead, dim_feedforward, dropout, activation,
                 layer_norm_eps, batch_first, norm_first, bias, device, dtype):
        super().__init__()
        owner = type(self).__name__
        if device is not None:
            check_usable(owner, device)
        d_model = checked_int(owner, "d_model", d_model, low=1)
        nhead = checked_int(owner, "nhead", nhead, low=1)
        dim_feedforward = checked_int(owner, "dim_feedforward", dim_feedforward, low=1)
        if d_model % nhead:
            raise KilnValueError(f"{owner}: d_model ({d_model}) must be divisible by nhead "
                                 f"({nhead}), each head taking d_model / nhead features")
        for name, flag in (("batch_first", batch_first), ("norm_first", norm_first),
                           ("bias", bias)):
            checked_bool(owner, name, flag)
        activation = _activation_fn(owner, activation)
        for name in attentions:
            setattr(self, name, MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                   batch_first=batch_first, dtype=dtype))
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        branches = range(1, len(attentions) + 2)
        for i in branches:
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias,
                                                dtype=dtype))
        for i in branches:
            setattr(self, f"dropout{i}", Dropout(dropout))
        self.activation = activation

    def _batched(self, step, inputs, padding_masks):
        """``step(*tensors, *masks)`` for ``inputs`` and ``padding_masks``, lists of (name,
        value), checked against self_attn's d_model and layout (see _check_inputs). Unbatched
        inputs [seq, d_model] (their key padding masks [seq]) go to ``step`` as a batch of one,
        and the output comes back without the batch dimension, as PyTorch's."""
        owner, attention = type(self).__name__, self.self_attn
        tensors = [x for _, x in inputs]
        masks = [mask for _, mask in padding_masks]
        if not _check_inputs(owner, attention.embed_dim, attention.batch_first, *inputs):
            return step(*tensors, *masks)
        dim = 0 if attention.batch_first else 1
        out = step(*(_mint.unsqueeze(x, dim) for x in tensors),
                   *(_sample_padding(owner, name, mask) for name, mask in padding_masks))
        return _mint.squeeze(out, dim)

    def _residual(self, x, norm, branch):
        """x plus ``branch`` of it, with ``norm`` at the start of the branch (norm_first) or
        after the sum (post-norm)."""
        if self.norm_first:
            return x + branch(norm(x))
        return norm(x + branch(x))

    def _feed_forward(self, x, dropout):
        """The feed-forward branch, ending in ``dropout`` (the layer's last dropout<i>)."""
        return dropout(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoderLayer(_TransformerLayer):
    """TransformerEncoderLayer(d_model, nhead, dim_feedforward=2048, dropout=0.1,
    activation="relu", layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
    device=None, dtype=None): self-attention and a feed-forward block, each a residual branch
    with a LayerNorm, as PyTorch's; ``layer(src, src_mask=None, src_key_padding_mask=None,
    is_causal=False)``, ``src`` batched or one sequence [seq, d_model]. See
    kiln.nn.transformer's documentation."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__(("self_attn",), d_model, nhead, dim_feedforward, dropout, activation,
                         layer_norm_eps, batch_first, norm_first, bias, device, dtype)

    def construct(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        def encode(x, padding):
            x = self._residual(x, self.norm1, lambda h: self.dropout1(
                _attend(self.self_attn, h, h, src_mask, padding, is_causal)))
            return self._residual(x, self.norm2, lambda h: self._feed_forward(h, self.dropout2))

        return self._batched(encode, [("src", src)],
                             [("src_key_padding_mask", src_key_padding_mask)])


class TransformerDecoderLayer(_TransformerLayer):
    """TransformerDecoderLayer(d_model, nhead, dim_feedforward=2048, dropout=0.1,
    activation="relu", layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
    device=None, dtype=None): self-attention, attention to the encoder's output and a
    feed-forward block, each a residual branch with a LayerNorm, as PyTorch's; ``layer(tgt,
    memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False)``, ``tgt`` and
    ``memory`` both batched or both one sequence [seq, d_model]. See kiln.nn.transformer's
    documentation."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__(("self_attn", "multihead_attn"), d_model, nhead, dim_feedforward,
                         dropout, activation, layer_norm_eps, batch_first, norm_first, bias,
                         device, dtype)

    def construct(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                  memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        def decode(x, mem, tgt_padding, memory_padding):
            x = self._residual(x, self.norm1, lambda h: self.dropout1(
                _attend(self.self_attn, h, h, tgt_mask, tgt_padding, tgt_is_causal)))
            x = self._residual(x, self.norm2, lambda h: self.dropout2(
                _attend(self.multihead_attn, h, mem, memory_mask, memory_padding,
                        memory_is_causal)))
            return self._residual(x, self.norm3, lambda h: self._feed_forward(h, self.dropout3))

        return self._batched(decode, [("tgt", tgt), ("memory", memory)],
                             [("tgt_key_padding_mask", tgt_key_padding_mask),
                              ("memory_key_padding_mask", memory_key_padding_mask)])


class _Stack(Cell):
    """What TransformerEncoder and TransformerDecoder share: ``layers``, ``num_layers`` deep
    copies of ``layer``, and ``norm`` (a cell, or None)."""

    def __init__(self, layer, num_layers, norm):
        super().__init__()
        owner = type(self).__name__
        self.num_layers = checked_int(owner, "num_layers", num_layers, low=0)
        if not isinstance(layer, Cell):
            raise KilnTypeError(f"{owner}: expected a kiln.nn.Cell as the layer to copy "
                                f"num_layers times, got {type(layer).__name__}")
        self.layers = ModuleList([copy.deepcopy(layer) for _ in range(self.num_layers)])
        self.norm = norm

    def _normed(self, x):
        return x if self.norm is None else self.norm(x)


class TransformerEncoder(_Stack):
    """TransformerEncoder(encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
    mask_check=True): ``num_layers`` deep copies of ``encoder_layer`` (in ``layers``) applied in
    turn, then ``norm`` if given, as PyTorch's; ``encoder(src, mask=None,
    src_key_padding_mask=None, is_causal=None)``. ``enable_nested_tensor`` and ``mask_check``
    choose PyTorch's fast path and change nothing here. See kiln.nn.transformer's
    documentation."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__(encoder_layer, num_layers, norm)

    def construct(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                      is_causal=bool(is_causal))
        return self._normed(x)


class TransformerDecoder(_Stack):
    """TransformerDecoder(decoder_layer, num_layers, norm=None): ``num_layers`` deep copies of
    ``decoder_layer`` (in ``layers``) applied in turn, then ``norm`` if given, as PyTorch's;
    ``decoder(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False)``. See
    kiln.nn.transformer's documentation."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__(decoder_layer, num_layers, norm)

    def construct(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                  memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        return self._normed(x)


class Transformer(Cell):
    """Transformer(d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
    dim_feedforward=2048, dropout=0.1, activation="relu", custom_encoder=None,
    custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
    device=None, dtype=None): PyTorch's encoder-decoder model; ``model(src, tgt, ...)`` returns
    the decoder's output. See kiln.nn.transformer's documentation."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True, device=None, dtype=None):
        super().__init__()
        if device is not None:  # checked here too for a custom encoder and decoder
            check_usable("Transformer", device)
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                      batch_first, norm_first, bias, device, dtype)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(
                TransformerEncoderLayer(*layer_args), num_encoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(
                TransformerDecoderLayer(*layer_args), num_decoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def _reset_parameters(self):
        """PyTorch's initialisation: xavier_uniform_ on every parameter of 2 or more dims."""
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def construct(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                  src_key_padding_mask=None, tgt_key_padding_mask=None,
                  memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                  memory_is_causal=False):
        _check_inputs("Transformer", self.d_model, self.batch_first, ("src", src), ("tgt", tgt))
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The causal mask [sz, sz] of ``dtype`` (default: the default dtype): -inf above the
        diagonal (a position may not attend to later ones), 0 elsewhere, as PyTorch's."""
        sz = checked_int("Transformer.generate_square_subsequent_mask", "sz", sz, low=0)
        full = _mint.full((sz, sz), float("-inf"), dtype=dtype, device=device)
        return _mint.triu(full, 1)
