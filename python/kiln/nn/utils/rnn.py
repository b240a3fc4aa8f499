"""PyTorch's torch.nn.utils.rnn on kiln tensors: ``pad_sequence`` batches sequences of different
lengths into one padded tensor, composed of kiln.mint.pad and kiln.mint.stack, so autograd
differentiates it (each sequence gets the gradient of its own steps) and kiln.jit traces it.

    batch = pad_sequence([a, b, c], batch_first=True)   # [L_i, *] each -> [3, max L_i, *]

PackedSequence is not supported (Kiln's RNNs take tensors, every sequence of a batch as long as
the others): ``pack_padded_sequence``, ``pad_packed_sequence`` and ``pack_sequence`` raise a
KilnNotImplementedError that says what to do instead: pass the padded batch and mask the padded
steps with the lengths.
"""

from ... import _C
from ..._checks import checked_bool
from ...errors import KilnNotImplementedError, KilnTypeError, KilnValueError, ShapeError
from ...mint._composite import _cast, _dims, check_real
from .._layer_arguments import checked_tensor

__all__ = ["pad_sequence", "pack_padded_sequence", "pad_packed_sequence", "pack_sequence"]

_mint = _C.mint


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"): the
    tensors ``sequences`` (an iterable of at least one, each [L_i, *] with the same trailing
    dimensions *) stacked into [max L_i, B, *] ([B, max L_i, *] with ``batch_first``), each
    padded with ``padding_value`` after its steps ("right") or before them ("left"), as
    PyTorch's. The result has the first sequence's dtype, the others converted to it and the
    padding value too, as PyTorch's. Errors: a ``sequences`` that is no iterable of kiln tensors
    or a ``padding_value`` that is no real number (KilnTypeError), no sequences or another
    ``padding_side`` (KilnValueError), a 0-d sequence or other trailing dimensions
    (ShapeError)."""
    owner = "pad_sequence"
    checked_bool(owner, "batch_first", batch_first)
    value = check_real(owner, "padding_value", padding_value)
    if padding_side not in ("left", "right"):
        raise KilnValueError(f"{owner}: expected padding_side 'left' or 'right', got "
                             f"{padding_side!r}")
    if isinstance(sequences, (str, bytes)) or not hasattr(sequences, "__iter__"):
        raise KilnTypeError(f"{owner}: expected an iterable of tensors [L, *] as sequences, got "
                            f"{type(sequences).__name__}")
    sequences = list(sequences)
    if not sequences:
        raise KilnValueError(f"{owner}: expected at least one sequence, got none")
    for i, sequence in enumerate(sequences):
        checked_tensor(owner, f"sequences[{i}]", sequence)
    first = sequences[0]
    for i, sequence in enumerate(sequences):
        if sequence.ndim == 0 or tuple(sequence.shape[1:]) != tuple(first.shape[1:]):
            raise ShapeError(f"{owner}: expected sequences [L, *] with the trailing dimensions "
                             f"* of sequences[0] {_dims(first.shape)}, got sequences[{i}] "
                             f"{_dims(sequence.shape)}")
    longest = max(sequence.shape[0] for sequence in sequences)
    # The trailing dimensions are not padded: pad's pairs start from the last dimension.
    unpadded = [0, 0] * (first.ndim - 1)
    padded = []
    for sequence in sequences:
        sequence = _cast(sequence, first.dtype)
        missing = longest - sequence.shape[0]
        if missing:
            sides = [missing, 0] if padding_side == "left" else [0, missing]
            sequence = _mint.pad(sequence, unpadded + sides, "constant", value)
        padded.append(sequence)
    return _mint.stack(padded, 0 if batch_first else 1)


def _no_packed_sequence(owner):
    raise KilnNotImplementedError(
        f"{owner}: Kiln has no PackedSequence; pass the padded batch (pad_sequence) to the RNN "
        f"as it is and use the lengths as masks: take each sequence's output at its last step "
        f"(output[length - 1] of its batch row) rather than h_n, and mask the padded steps out "
        f"of the loss")


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):  # noqa: A002
    """Not supported (a KilnNotImplementedError): Kiln has no PackedSequence; see the module's
    documentation."""
    _no_packed_sequence("pack_padded_sequence")


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Not supported (a KilnNotImplementedError): Kiln has no PackedSequence; see the module's
    documentation."""
    _no_packed_sequence("pad_packed_sequence")


def pack_sequence(sequences, enforce_sorted=True):
    """Not supported (a KilnNotImplementedError): Kiln has no PackedSequence; see the module's
    documentation."""
    _no_packed_sequence("pack_sequence")
