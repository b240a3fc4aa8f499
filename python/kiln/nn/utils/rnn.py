"""PyTorch's torch.nn.utils.rnn on kiln tensors: batches of sequences of different lengths, either
padded to the longest (``pad_sequence``) or packed (``PackedSequence``), which kiln.nn.RNN, LSTM
and GRU run over step by step, each sequence only as far as its own length.

    batch = pad_sequence([a, b, c], batch_first=True)   # [L_i, *] each -> [3, max L_i, *]
    packed = pack_padded_sequence(batch, lengths, batch_first=True, enforce_sorted=False)
    output, h_n = gru(packed)                           # a PackedSequence, h_n at each length
    padded, lengths = pad_packed_sequence(output, batch_first=True)

A ``PackedSequence`` has PyTorch's fields and layouts: ``data`` [sum of the lengths, *] holds the
steps time-major, step t of every sequence that has one before step t + 1 of any, the sequences
sorted by decreasing length (stably, as PyTorch's sort); ``batch_sizes`` (an int64 tensor, one
entry per step of the longest sequence) says how many sequences have each step;
``sorted_indices`` (int64, or None when the batch was sorted already) gives the batch index of
each sorted sequence, and ``unsorted_indices`` is its inverse permutation.

- ``pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True)``: input
  [T, B, *] ([B, T, *] with ``batch_first``) and the B lengths (a 1-d integer tensor or a
  sequence of ints, each in [1, T]) to a PackedSequence. With ``enforce_sorted`` the lengths
  must not increase (PyTorch's error otherwise); without, the batch is sorted here.
- ``pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None)``:
  back to ``(padded, lengths)``, in the batch's order, padded to ``total_length`` steps when
  given (at least the longest length) and ``lengths`` an int64 tensor.
- ``pack_sequence(sequences, enforce_sorted=True)``: ``pad_sequence`` then
  ``pack_padded_sequence``, as PyTorch's; ``unpack_sequence(packed)``: the list of sequences
  back; ``unpad_sequence(padded_sequences, lengths, batch_first=False)``: the padded batch's
  sequences, each cut at its length (PyTorch's transposes a batch that is not batch-first in
  place; Kiln's leaves it as it is).
- ``invert_permutation(permutation)``: the inverse of a 1-d int64 permutation (None for None).

Everything is composed of kiln.mint ops (pad, stack, cat, index_select), so autograd
differentiates it: the gradient of a packed or padded result reaches each step it came from. The
layouts come from the lengths, which are read on the host (as PyTorch reads them): under kiln.jit
they are constants of the trace.
"""

from typing import NamedTuple

from ... import _C
from ..._checks import as_int, checked_bool, checked_int
from ..._numpy import np
from ...errors import DTypeError, KilnTypeError, KilnValueError, ShapeError
from ...mint._composite import _cast, _dims, check_real
from .._layer_arguments import checked_tensor

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence",
           "pad_sequence", "unpad_sequence", "pack_sequence", "unpack_sequence"]

_mint = _C.mint


def _long(values):
    """``values`` (a NumPy array or a list of ints) as an int64 kiln tensor."""
    return _C.tensor(np.asarray(values, dtype=np.int64))


class _PackedSequenceFields(NamedTuple):
    data: _C.Tensor
    batch_sizes: _C.Tensor
    sorted_indices: object  # a kiln tensor or None
    unsorted_indices: object  # a kiln tensor or None


def _dtype_conversion(dtype_name):
    """A PackedSequence method converting ``data`` to the dtype ``dtype_name`` (PyTorch's
    ``double()``, ``long()``, ...)."""

    def convert(self):
        return self.to(dtype=getattr(_C.dtype, dtype_name))

    convert.__doc__ = f"The sequence with its data converted to {dtype_name} (``to``)."
    return convert


class PackedSequence(_PackedSequenceFields):
    """PackedSequence(data, batch_sizes, sorted_indices=None, unsorted_indices=None): a batch of
    sequences of different lengths, packed as kiln.nn.utils.rnn's documentation describes; a
    named tuple of those four fields, as PyTorch's. Made by ``pack_padded_sequence`` and
    ``pack_sequence`` rather than by hand; ``unsorted_indices`` missing is the inverse of
    ``sorted_indices``, and ``PackedSequence((data, batch_sizes))`` is PyTorch's older form.
    ``data`` and ``batch_sizes`` must be kiln tensors, ``batch_sizes`` 1-d int64, the indices
    kiln tensors or None (KilnTypeError, ShapeError, DTypeError).

    ``to(...)`` (Tensor.to's arguments), ``cpu()``, ``cuda()``, ``double()``, ``float()``,
    ``half()``, ``long()``, ``int()``, ``short()``, ``char()`` and ``byte()`` convert ``data``
    only (the sequence itself when nothing changes): the batch sizes and indices stay int64, on
    the CPU where Kiln's tensors live; ``is_cuda`` is ``data.is_cuda`` (False)."""

    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        owner = "PackedSequence"
        if batch_sizes is None:
            if not (isinstance(data, (tuple, list)) and len(data) == 2):
                raise KilnTypeError(f"{owner}: expected data and batch_sizes, or the pair "
                                    f"(data, batch_sizes) as data, got data of type "
                                    f"{type(data).__name__} and no batch_sizes")
            data, batch_sizes = data
        checked_tensor(owner, "data", data)
        checked_tensor(owner, "batch_sizes", batch_sizes)
        if batch_sizes.ndim != 1:
            raise ShapeError(f"{owner}: expected batch_sizes to be 1-d, got "
                             f"{_dims(batch_sizes.shape)}")
        if batch_sizes.dtype != _C.dtype.int64:
            raise DTypeError(f"{owner}: expected batch_sizes of dtype int64, got "
                             f"{batch_sizes.dtype.name}")
        for name, indices in (("sorted_indices", sorted_indices),
                              ("unsorted_indices", unsorted_indices)):
            if indices is not None:
                checked_tensor(owner, name, indices)
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def _with_data(self, data):
        if data is self.data:
            return self
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def to(self, *args, **kwargs):
        """The sequence with ``data.to(*args, **kwargs)`` (itself when that is ``data``)."""
        return self._with_data(self.data.to(*args, **kwargs))

    def cpu(self):
        """The sequence with ``data.cpu()``."""
        return self._with_data(self.data.cpu())

    def cuda(self, *args, **kwargs):
        """``data.cuda(...)``: a KilnValueError, Kiln runs on the CPU."""
        return self._with_data(self.data.cuda(*args, **kwargs))

    double = _dtype_conversion("float64")
    float = _dtype_conversion("float32")  # noqa: A003  (PyTorch's method names)
    half = _dtype_conversion("float16")
    long = _dtype_conversion("int64")
    int = _dtype_conversion("int32")  # noqa: A003
    short = _dtype_conversion("int16")
    char = _dtype_conversion("int8")
    byte = _dtype_conversion("uint8")

    @property
    def is_cuda(self):
        """Whether ``data`` is on a GPU: False, Kiln runs on the CPU."""
        return self.data.is_cuda


def invert_permutation(permutation):
    """The inverse of ``permutation`` (a 1-d integer tensor holding 0 .. n - 1 once each), so
    that ``inverse[permutation[i]] == i``; None for None, as PyTorch's."""
    if permutation is None:
        return None
    checked_tensor("invert_permutation", "permutation", permutation)
    return _mint.argsort(permutation)


def _checked_sequences(owner, sequences):
    """``sequences`` as a list of at least one kiln tensor [L_i, *], all with the same trailing
    dimensions *."""
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
    return sequences


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
    sequences = _checked_sequences(owner, sequences)
    first = sequences[0]
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


def _host_lengths(owner, lengths):
    """``lengths`` (a 1-d integer kiln tensor, or an iterable of ints) as a list of ints."""
    if isinstance(lengths, _C.Tensor):
        if lengths.ndim != 1:
            raise ShapeError(f"{owner}: expected lengths to be a 1-d tensor, got "
                             f"{_dims(lengths.shape)}")
        if lengths.dtype.is_floating_point or lengths.dtype == _C.dtype.bool:
            raise DTypeError(f"{owner}: expected lengths of an integer dtype, got "
                             f"{lengths.dtype.name}")
        return lengths.tolist()
    if isinstance(lengths, (str, bytes)) or not hasattr(lengths, "__iter__"):
        raise KilnTypeError(f"{owner}: expected lengths to be a 1-d integer tensor or a sequence "
                            f"of ints, got {type(lengths).__name__}")
    values = [as_int(length) for length in lengths]
    if None in values:
        raise KilnTypeError(f"{owner}: expected lengths to be ints, got {list(lengths)!r}")
    return values


def _pack(owner, input, lengths, batch_first, enforce_sorted):  # noqa: A002
    """pack_padded_sequence of input [T, B, *] ([B, T, *] with ``batch_first``), ``lengths``
    checked here and errors naming ``owner``."""
    layout = "[B, T, *]" if batch_first else "[T, B, *]"
    if input.ndim < 2:
        raise ShapeError(f"{owner}: expected input {layout} (batch_first={batch_first}), got "
                         f"{_dims(input.shape)}")
    if input.numel() == 0:
        raise KilnValueError(f"{owner}: cannot pack an empty tensor, got input "
                             f"{_dims(input.shape)}")
    batch, steps = (input.shape[0], input.shape[1]) if batch_first else (input.shape[1],
                                                                         input.shape[0])
    lengths = np.asarray(_host_lengths(owner, lengths), dtype=np.int64)
    if len(lengths) != batch:
        raise ShapeError(f"{owner}: expected len(lengths) to be equal to the batch size {batch} "
                         f"of input {_dims(input.shape)} (batch_first={batch_first}), got "
                         f"{len(lengths)}")
    if lengths.min() <= 0:
        raise KilnValueError(f"{owner}: Length of all samples has to be greater than 0, but "
                             f"found an element in 'lengths' that is <= 0: "
                             f"{lengths.tolist()}")
    if lengths.max() > steps:
        raise ShapeError(f"{owner}: expected lengths of at most the {steps} steps of input "
                         f"{_dims(input.shape)} (batch_first={batch_first}), got "
                         f"{lengths.tolist()}")
    if enforce_sorted:
        if (lengths[1:] > lengths[:-1]).any():
            raise KilnValueError(
                f"{owner}: `lengths` array must be sorted in decreasing order when "
                f"`enforce_sorted` is True, got {lengths.tolist()}. You can pass "
                f"`enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to "
                f"sidestep this requirement if you do not need ONNX exportability.")
        order = np.arange(batch)
    else:
        # Stable, as PyTorch's sort, so that equal lengths keep the batch's order.
        order = np.argsort(-lengths, kind="stable")
    batch_sizes = (lengths[order][None, :] > np.arange(lengths.max())[:, None]).sum(1)
    # The packed rows in order: (step t, sorted slot j) for each j below batch_sizes[t].
    step, slot = np.nonzero(np.arange(batch)[None, :] < batch_sizes[:, None])
    sample = order[slot]
    rows = sample * steps + step if batch_first else step * batch + sample
    flat = input.reshape((batch * steps,) + tuple(input.shape[2:]))
    data = _mint.index_select(flat, 0, _long(rows))
    if enforce_sorted:
        return PackedSequence(data, _long(batch_sizes))
    return PackedSequence(data, _long(batch_sizes), _long(order), _long(np.argsort(order)))


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):  # noqa: A002
    """pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True): the padded
    batch ``input`` [T, B, *] ([B, T, *] with ``batch_first``) of sequences of ``lengths`` (a
    1-d integer tensor or a sequence of B ints) as a PackedSequence, as PyTorch's. With
    ``enforce_sorted`` the lengths must not increase; without, the sequences are sorted by
    decreasing length (stably) and ``sorted_indices`` records the order. Errors: arguments of the
    wrong type (KilnTypeError), a float ``lengths`` tensor (DTypeError), an input of fewer than 2
    dimensions, not B lengths or a length beyond T (ShapeError; PyTorch reads past the input
    there), an empty input, a length below 1 or increasing lengths with ``enforce_sorted``
    (KilnValueError)."""
    owner = "pack_padded_sequence"
    checked_tensor(owner, "input", input)
    checked_bool(owner, "batch_first", batch_first)
    checked_bool(owner, "enforce_sorted", enforce_sorted)
    return _pack(owner, input, lengths, batch_first, enforce_sorted)


def _checked_batch_sizes(owner, sequence):
    """The batch sizes of the PackedSequence ``sequence`` as a list of ints, checked against
    its data: a KilnTypeError for no PackedSequence, a KilnValueError for batch sizes that are
    none, below 1 or increasing, a ShapeError when they do not add up to data's rows."""
    if not isinstance(sequence, PackedSequence):
        raise KilnTypeError(f"{owner}: expected a PackedSequence, got {type(sequence).__name__}")
    sizes = sequence.batch_sizes.tolist()
    if not sizes or min(sizes) < 1 or any(b > a for a, b in zip(sizes, sizes[1:])):
        raise KilnValueError(f"{owner}: expected batch_sizes of at least one step, each at "
                             f"least 1 and none above the one before, got {sizes}")
    data = sequence.data
    if data.ndim == 0 or data.shape[0] != sum(sizes):
        raise ShapeError(f"{owner}: expected data [{sum(sizes)}, *] (the sum of batch_sizes "
                         f"{sizes}), got {_dims(data.shape)}")
    return sizes


def _unsorted_order(owner, sequence, batch):
    """The host values of ``sequence.unsorted_indices`` (None when absent), checked to be a
    permutation of the ``batch`` sequences."""
    if sequence.unsorted_indices is None:
        return None
    order = sequence.unsorted_indices.tolist()
    if sorted(order) != list(range(batch)):
        raise KilnValueError(f"{owner}: expected unsorted_indices to be a permutation of 0 .. "
                             f"{batch - 1}, got {order}")
    return np.asarray(order, dtype=np.int64)


def _unpack(owner, sequence, batch_first, padding_value, total_length):
    """pad_packed_sequence with errors naming ``owner``."""
    sizes = _checked_batch_sizes(owner, sequence)
    steps, batch = len(sizes), sizes[0]
    if total_length is not None:
        total_length = checked_int(owner, "total_length", total_length)
        if total_length < steps:
            raise KilnValueError(f"{owner}: Expected total_length to be at least the length of "
                                 f"the longest sequence in input, but got total_length="
                                 f"{total_length} and max sequence length being {steps}")
        steps = total_length
    sizes = np.asarray(sizes, dtype=np.int64)
    starts = np.cumsum(sizes) - sizes
    lengths = (sizes[None, :] > np.arange(batch)[:, None]).sum(1)
    data = sequence.data
    # Each padded position reads its packed row, or the padding row appended after them all.
    rows = np.full((steps, batch), data.shape[0], dtype=np.int64)
    valid = np.arange(batch)[None, :] < sizes[:, None]
    rows[:len(sizes)][valid] = (starts[:, None] + np.arange(batch)[None, :])[valid]
    order = _unsorted_order(owner, sequence, batch)
    if order is not None:
        rows, lengths = rows[:, order], lengths[order]
    if batch_first:
        rows = rows.T
    trailing = tuple(data.shape[1:])
    padding = _mint.full((1,) + trailing, padding_value, dtype=data.dtype)
    source = _mint.cat([data, padding], 0)
    padded = _mint.index_select(source, 0, _long(rows.reshape(-1)))
    return padded.reshape(rows.shape + trailing), _long(lengths)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    the PackedSequence ``sequence`` as ``(padded, lengths)``, as PyTorch's: padded [T, B, *]
    ([B, T, *] with ``batch_first``) in the batch's order (``unsorted_indices``), T the longest
    length or ``total_length``, the positions past each length ``padding_value``; lengths an
    int64 tensor [B]. Errors: no PackedSequence or a ``padding_value`` that is no real number
    (KilnTypeError), a ``total_length`` below the longest length, batch sizes that do not
    describe a packed batch or ``unsorted_indices`` that are no permutation (KilnValueError),
    data whose rows are not the batch sizes' sum (ShapeError)."""
    owner = "pad_packed_sequence"
    checked_bool(owner, "batch_first", batch_first)
    value = check_real(owner, "padding_value", padding_value)
    return _unpack(owner, sequence, batch_first, value, total_length)


def pack_sequence(sequences, enforce_sorted=True):
    """pack_sequence(sequences, enforce_sorted=True): the tensors ``sequences`` (each [L_i, *],
    the same trailing dimensions) as a PackedSequence: ``pad_sequence`` then
    ``pack_padded_sequence`` with their lengths, as PyTorch's (its errors, and
    ``pad_sequence``'s)."""
    owner = "pack_sequence"
    checked_bool(owner, "enforce_sorted", enforce_sorted)
    sequences = _checked_sequences(owner, sequences)
    lengths = [sequence.shape[0] for sequence in sequences]
    return _pack(owner, pad_sequence(sequences), lengths, False, enforce_sorted)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """unpad_sequence(padded_sequences, lengths, batch_first=False): the list of the B sequences
    of the padded batch [T, B, *] ([B, T, *] with ``batch_first``), each its first
    ``lengths[i]`` steps [lengths[i], *], as PyTorch's (which transposes the input in place when
    it is not batch-first; this one does not). ``lengths``: a 1-d integer tensor or a sequence
    of ints, each in [0, T]. Errors: arguments of the wrong type (KilnTypeError), a float
    ``lengths`` tensor (DTypeError), an input of fewer than 2 dimensions, not B lengths or one
    outside [0, T] (ShapeError)."""
    owner = "unpad_sequence"
    checked_tensor(owner, "padded_sequences", padded_sequences)
    checked_bool(owner, "batch_first", batch_first)
    if padded_sequences.ndim < 2:
        raise ShapeError(f"{owner}: expected padded_sequences [T, B, *] or [B, T, *] "
                         f"(batch_first), got {_dims(padded_sequences.shape)}")
    lengths = _host_lengths(owner, lengths)
    batch_dim = 0 if batch_first else 1
    batch, steps = padded_sequences.shape[batch_dim], padded_sequences.shape[1 - batch_dim]
    if len(lengths) != batch or not all(0 <= length <= steps for length in lengths):
        raise ShapeError(f"{owner}: expected {batch} lengths in [0, {steps}] for "
                         f"padded_sequences {_dims(padded_sequences.shape)} (batch_first="
                         f"{batch_first}), got {lengths}")
    return [sequence.narrow(0, 0, length)
            for sequence, length in zip(padded_sequences.unbind(batch_dim), lengths)]


def unpack_sequence(packed_sequences):
    """unpack_sequence(packed_sequences): the PackedSequence's sequences as a list of tensors
    [L_i, *] in the batch's order, as PyTorch's (``pad_packed_sequence`` then
    ``unpad_sequence``)."""
    padded, lengths = _unpack("unpack_sequence", packed_sequences, True, 0.0, None)
    return unpad_sequence(padded, lengths, batch_first=True)
