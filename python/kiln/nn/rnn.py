"""kiln.nn recurrent layers: ``RNN``, ``LSTM`` and ``GRU`` over sequences, and their one-step
cells ``RNNCell``, ``LSTMCell`` and ``GRUCell``, with PyTorch's arguments, parameter names and
shapes, state_dict keys, gate order and initialisation, so torch.nn code and state dicts port
as they are.

    lstm = kiln.nn.LSTM(32, 64, num_layers=2, batch_first=True)
    output, (h_n, c_n) = lstm(x)          # x [B, T, 32] -> output [B, T, 64], h_n, c_n [2, B, 64]
    lstm.load_state_dict(torch_lstm.state_dict())
    cell = kiln.nn.GRUCell(32, 64)
    h = cell(x_t, h)                      # one step: [B, 32], [B, 64] -> [B, 64]

The updates (PyTorch's), where W_i* and b_i* are row blocks of ``weight_ih`` / ``bias_ih`` and
W_h*, b_h* of ``weight_hh`` / ``bias_hh``, in the gate order listed, and σ is the sigmoid:

- RNN: h' = tanh(W_ih x + b_ih + W_hh h + b_hh) (relu with ``nonlinearity="relu"``).
- LSTM (gates i, f, g, o): i = σ(W_ii x + b_ii + W_hi h + b_hi), f and o likewise, g likewise
  with tanh; c' = f * c + i * g, h' = o * tanh(c'); with ``proj_size`` P > 0,
  h' = W_hr (o * tanh(c')), of size P.
- GRU (gates r, z, n): r and z as LSTM's i; n = tanh(W_in x + b_in + r * (W_hn h + b_hn));
  h' = (1 - z) * n + z * h.

Cells: ``RNNCell(input_size, hidden_size, bias=True, nonlinearity="tanh", dtype=None)``,
``LSTMCell(input_size, hidden_size, bias=True, dtype=None)``, ``GRUCell`` likewise. Parameters
``weight_ih`` [G * hidden_size, input_size], ``weight_hh`` [G * hidden_size, hidden_size],
``bias_ih`` and ``bias_hh`` [G * hidden_size] (None with ``bias=False``), G being 1, 4 or 3.
``cell(input, hx=None)`` takes input [B, input_size] or, unbatched, [input_size], and the state
of the same batching: [B, hidden_size] or [hidden_size] (LSTMCell: a tuple (h, c) of them); a
missing state is zeros. It returns the next h (LSTMCell: the tuple (h', c')).

Layers: ``RNN(input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
batch_first=False, dropout=0.0, bidirectional=False, dtype=None)``, ``LSTM(input_size,
hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0, bidirectional=False,
proj_size=0, dtype=None)``, ``GRU`` as LSTM without ``proj_size``. Parameters per layer k and
direction (suffix "" and, with ``bidirectional``, "_reverse"), in PyTorch's order:
``weight_ih_l{k}`` [G * hidden_size, in_k] (in_0 = input_size, then D * H_out with D = 2 when
bidirectional, else 1), ``weight_hh_l{k}`` [G * hidden_size, H_out], ``bias_ih_l{k}``,
``bias_hh_l{k}`` [G * hidden_size] (absent with ``bias=False``) and, for an LSTM with
``proj_size``, ``weight_hr_l{k}`` [proj_size, hidden_size]; H_out is ``proj_size`` when
positive, else ``hidden_size``. ``layer(input, hx=None)`` takes input [T, B, input_size]
([B, T, input_size] with ``batch_first``) or, unbatched, [T, input_size], and returns
``(output, h_n)`` (LSTM: ``(output, (h_n, c_n))``):

- output [T, B, D * H_out] ([B, T, ...] with ``batch_first``; [T, D * H_out] unbatched): the last
  layer's h at every step, the reverse direction's after the forward's on the last dimension.
- h_n [num_layers * D, B, H_out] and the LSTM's c_n [num_layers * D, B, hidden_size] (without
  the batch dimension when unbatched; never batch-first, as in PyTorch): each layer's and
  direction's last state, layer-major. ``hx`` gives the initial states in that layout (LSTM: the
  tuple (h_0, c_0)); missing, they are zeros.
- ``dropout`` (in [0, 1]) applies to the outputs of every layer but the last, while training
  only (a warning with one layer, as in PyTorch, since nothing follows it).
- ``flatten_parameters()`` does nothing (PyTorch's packs the weights for cuDNN), so code that
  calls it runs as it is.

Every parameter is initialised U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), as in PyTorch
(``reset_parameters()`` draws again), of ``dtype`` (default: the default dtype); inputs and states
must be of the parameters' dtype. Wrong argument types are KilnTypeErrors; sizes below 1, a negative
``proj_size``, an unknown ``nonlinearity`` or a ``dropout`` outside [0, 1] KilnValueErrors; inputs
and states of the wrong rank or size (or a sequence of no steps) ShapeErrors, of another dtype
DTypeErrors.

A layer also takes a ``PackedSequence`` (kiln.nn.utils.rnn: sequences of different lengths,
packed), as PyTorch's: ``layer(packed, hx=None)`` returns ``(output, h_n)`` with output a
PackedSequence of the same batch sizes and indices holding the last layer's h at each sequence's
steps, data [sum of the lengths, D * H_out]. Each sequence runs only over its own steps: h_n
holds the forward direction's state after its last step, and the reverse direction starts at
its last step. ``hx`` and h_n (c_n) are [num_layers * D, B, size] in the batch's order (the
packed sequences are sorted by length: ``hx`` is reordered by ``sorted_indices``, h_n by
``unsorted_indices``); ``batch_first`` does not apply. Data of the wrong shape, or batch sizes
that do not add up to its rows, are ShapeErrors.

The layers are compositions of kiln.mint ops in Python, so autograd and kiln.jit go through them
as through any composition (a jitted forward unrolls the time loop: each sequence length is a
trace of its own). For each layer and direction the input projection of every time step is one
product over the [T * B, in_k] rows (the packed rows for a PackedSequence); only the hidden
projection runs step by step. A packed batch is sorted by decreasing length, so the sequences
that have step t are its first batch_sizes[t]: each step runs on those rows only, as PyTorch's,
and a sequence's final state is set aside when it ends (forward) or its initial state joins
when it starts (reverse), rather than masking padded steps. The batch sizes are read on the
host (they shape the loop), as PyTorch reads them.
"""

import functools
import math
import warnings

from .. import _C
from .._checks import check_held_dtype, checked_bool, checked_int
from ..errors import KilnTypeError, KilnValueError, ShapeError
from ..mint._composite import check_real
from . import init
from .cell import Cell
from .parameter import Parameter
from .utils.rnn import PackedSequence, _checked_batch_sizes

__all__ = ["RNNCell", "LSTMCell", "GRUCell", "RNN", "LSTM", "GRU"]

_mint = _C.mint


# One step of each recurrence: ``projected`` is the input's projection W_ih x + b_ih [B, G * H],
# ``state`` the tuple (h,) or (h, c); returns the next state. ``bias_hh`` may be None, and is
# when the layers fold it into ``projected`` (see _RNNBase._direction).

def _elman_step(activation, projected, state, weight_hh, bias_hh, weight_hr=None):
    return (activation(projected + _mint.linear(state[0], weight_hh, bias_hh)),)


def _lstm_step(projected, state, weight_hh, bias_hh, weight_hr=None):
    h, c = state
    # Two calls a step: the gates, and their pointwise part (src/ops/rnn_cell.cc).
    h, c = _mint.lstm_cell(projected + _mint.linear(h, weight_hh, bias_hh), c)
    return (h if weight_hr is None else _mint.linear(h, weight_hr, None), c)


def _gru_step(projected, state, weight_hh, bias_hh, weight_hr=None):
    h = state[0]
    # Two calls a step: the state's projection, and the gates' pointwise part (GruCell).
    return (_mint.gru_cell(projected, _mint.linear(h, weight_hh, bias_hh), h),)


# mode -> (gates, step, number of states)
_MODES = {"RNN_TANH": (1, functools.partial(_elman_step, _mint.tanh), 1),
          "RNN_RELU": (1, functools.partial(_elman_step, _mint.relu), 1),
          "LSTM": (4, _lstm_step, 2), "GRU": (3, _gru_step, 1)}


def _rnn_mode(owner, nonlinearity):
    if nonlinearity == "tanh":
        return "RNN_TANH"
    if nonlinearity == "relu":
        return "RNN_RELU"
    raise KilnValueError(f"{owner}: unknown nonlinearity {nonlinearity!r}, expected 'tanh' or "
                         f"'relu'")


def _unbind(x):
    """The slices of ``x`` along its first dimension. One Split rather than ``x[t]`` per step:
    the backward joins the slices' gradients with one concat, where indexing would build a
    gradient as large as ``x`` for every slice (quadratic in the sequence length)."""
    return [_mint.squeeze(piece, 0) for piece in _mint.split(x, 1, 0)]


def _check_tensor(owner, name, x, dtype):
    if not isinstance(x, _C.Tensor):
        raise KilnTypeError(f"{owner}: expected {name} to be a kiln.Tensor, got "
                            f"{type(x).__name__}")
    check_held_dtype(owner, dtype, "the parameters'", [(name, x)])


def _initial_states(owner, hx, shapes, dtype):
    """The initial states as a tuple: zeros of ``shapes`` when ``hx`` is None, else ``hx`` (a
    tensor, or the tuple (h_0, c_0) when there are two shapes) checked against them."""
    if hx is None:
        return tuple(_mint.zeros(shape, dtype=dtype) for shape in shapes)
    if len(shapes) == 2:
        if not isinstance(hx, (tuple, list)) or len(hx) != 2:
            raise KilnTypeError(f"{owner}: expected hx to be a tuple (h_0, c_0), got "
                                f"{type(hx).__name__}")
        states = tuple(hx)
    else:
        states = (hx,)
    for name, state, shape in zip(("h_0", "c_0"), states, shapes):
        _check_tensor(owner, name, state, dtype)
        if tuple(state.shape) != shape:
            raise ShapeError(f"{owner}: expected {name} of shape {list(shape)}, got "
                             f"{list(state.shape)}")
    return states


def _reset_uniform(cell, hidden_size):
    """PyTorch's initialisation of every recurrent parameter: U(-1/sqrt(H), 1/sqrt(H))."""
    bound = 1.0 / math.sqrt(hidden_size)
    for param in cell.parameters():
        init.uniform_(param, -bound, bound)


class _RNNCellBase(Cell):
    """The cells' shared parameters, checks and step; subclasses name the mode."""

    def __init__(self, input_size, hidden_size, bias, mode, dtype):
        super().__init__()
        owner = type(self).__name__
        self.input_size = checked_int(owner, "input_size", input_size, 1)
        self.hidden_size = checked_int(owner, "hidden_size", hidden_size, 1)
        self.bias = checked_bool(owner, "bias", bias)
        self._mode = mode
        gates = _MODES[mode][0] * self.hidden_size
        self.weight_ih = Parameter(_mint.empty(gates, self.input_size, dtype=dtype))
        self.weight_hh = Parameter(_mint.empty(gates, self.hidden_size, dtype=dtype))
        for name in ("bias_ih", "bias_hh"):
            self.register_parameter(name, Parameter(_mint.empty(gates, dtype=dtype))
                                    if self.bias else None)
        self.reset_parameters()

    def reset_parameters(self):
        _reset_uniform(self, self.hidden_size)

    def construct(self, input, hx=None):  # noqa: A002  (PyTorch's name)
        owner = type(self).__name__
        _, step, count = _MODES[self._mode]
        dtype = self.weight_ih.dtype
        _check_tensor(owner, "input", input, dtype)
        if input.ndim not in (1, 2) or input.shape[-1] != self.input_size:
            raise ShapeError(f"{owner}: expected an input [batch, {self.input_size}] or "
                             f"[{self.input_size}] (unbatched), got {list(input.shape)}")
        batched = input.ndim == 2
        shape = (input.shape[0], self.hidden_size) if batched else (self.hidden_size,)
        states = _initial_states(owner, hx, (shape,) * count, dtype)
        x = input
        if not batched:
            x = _mint.unsqueeze(input, 0)
            states = tuple(_mint.unsqueeze(s, 0) for s in states)
        states = step(_mint.linear(x, self.weight_ih, self.bias_ih), states, self.weight_hh,
                      self.bias_hh)
        if not batched:
            states = tuple(_mint.squeeze(s, 0) for s in states)
        return states if count == 2 else states[0]

    def extra_repr(self):
        text = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            text += ", bias=False"
        if self._mode == "RNN_RELU":
            text += ", nonlinearity=relu"
        return text


class RNNCell(_RNNCellBase):
    """RNNCell(input_size, hidden_size, bias=True, nonlinearity="tanh", dtype=None): one step
    h' = tanh(W_ih x + b_ih + W_hh h + b_hh) (relu with ``nonlinearity="relu"``);
    ``cell(input, hx=None)`` returns h'. See kiln.nn.rnn's documentation."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", dtype=None):
        super().__init__(input_size, hidden_size, bias, _rnn_mode("RNNCell", nonlinearity),
                         dtype)
        self.nonlinearity = nonlinearity


class LSTMCell(_RNNCellBase):
    """LSTMCell(input_size, hidden_size, bias=True, dtype=None): one LSTM step (gates i, f, g,
    o); ``cell(input, hx=None)`` with hx the tuple (h, c) returns (h', c'). See kiln.nn.rnn's
    documentation."""

    def __init__(self, input_size, hidden_size, bias=True, dtype=None):
        super().__init__(input_size, hidden_size, bias, "LSTM", dtype)


class GRUCell(_RNNCellBase):
    """GRUCell(input_size, hidden_size, bias=True, dtype=None): one GRU step (gates r, z, n);
    ``cell(input, hx=None)`` returns h'. See kiln.nn.rnn's documentation."""

    def __init__(self, input_size, hidden_size, bias=True, dtype=None):
        super().__init__(input_size, hidden_size, bias, "GRU", dtype)


class _RNNBase(Cell):
    """The layers' shared parameters, checks and loop over layers, directions and time."""

    def __init__(self, mode, input_size, hidden_size, num_layers, bias, batch_first, dropout,
                 bidirectional, proj_size, dtype):
        super().__init__()
        owner = type(self).__name__
        self.mode = mode
        self.input_size = checked_int(owner, "input_size", input_size, 1)
        self.hidden_size = checked_int(owner, "hidden_size", hidden_size, 1)
        self.num_layers = checked_int(owner, "num_layers", num_layers, 1)
        self.bias = checked_bool(owner, "bias", bias)
        self.batch_first = checked_bool(owner, "batch_first", batch_first)
        self.bidirectional = checked_bool(owner, "bidirectional", bidirectional)
        self.proj_size = checked_int(owner, "proj_size", proj_size, 0)
        if self.proj_size >= self.hidden_size:
            raise KilnValueError(f"{owner}: proj_size must be smaller than hidden_size "
                                 f"({self.hidden_size}), got {self.proj_size}")
        dropout = check_real(owner, "dropout", dropout)
        if not 0.0 <= dropout <= 1.0:
            raise KilnValueError(f"{owner}: dropout must be in [0, 1], got {dropout}")
        if dropout > 0 and self.num_layers == 1:
            warnings.warn(f"{owner}: dropout applies between layers, so with num_layers=1 "
                          f"dropout={dropout} has no effect", stacklevel=3)
        self.dropout = dropout

        gates = _MODES[mode][0] * self.hidden_size
        out_size = self.proj_size or self.hidden_size
        # Per layer and direction, the names of (weight_ih, weight_hh, bias_ih, bias_hh,
        # weight_hr), None where absent; registered in that order, which is PyTorch's.
        self._weight_names = []
        for layer in range(self.num_layers):
            in_size = self.input_size if layer == 0 else out_size * self._directions
            for suffix in ("", "_reverse")[:self._directions]:
                shapes = {"weight_ih": (gates, in_size), "weight_hh": (gates, out_size)}
                if self.bias:
                    shapes.update(bias_ih=(gates,), bias_hh=(gates,))
                if self.proj_size:
                    shapes["weight_hr"] = (self.proj_size, self.hidden_size)
                for kind, shape in shapes.items():
                    setattr(self, f"{kind}_l{layer}{suffix}",
                            Parameter(_mint.empty(shape, dtype=dtype)))
                self._weight_names.append(tuple(
                    f"{kind}_l{layer}{suffix}" if kind in shapes else None
                    for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")))
        self.reset_parameters()

    @property
    def _directions(self):
        return 2 if self.bidirectional else 1

    def reset_parameters(self):
        _reset_uniform(self, self.hidden_size)

    def flatten_parameters(self):
        """Does nothing: PyTorch's packs the weights into one buffer for cuDNN, which Kiln's
        layers do not use; kept so that ported code calling it runs unchanged."""

    def _projection(self, x, weights):
        """x's input projection W_ih x + b_ih for every step at once, and the b_hh that the
        steps still add (None when folded into the projection)."""
        weight_ih, _, bias_ih, bias_hh, _ = weights
        bias = bias_ih
        # Outside GRU's n gate, b_hh adds to the same sum as b_ih: folded into the projection
        # once, rather than added at every step.
        if bias_hh is not None and self.mode != "GRU":
            bias, bias_hh = bias_ih + bias_hh, None
        return _mint.linear(x, weight_ih, bias), bias_hh

    def _direction(self, x, states, weights, reverse):
        """One direction of one layer over x [T, B, in]: (outputs [T, B, H_out], last states)."""
        weight_hh, weight_hr = weights[1], weights[4]
        step = _MODES[self.mode][1]
        projected, bias_hh = self._projection(x, weights)
        projected = _unbind(projected)
        outputs = [None] * len(projected)
        for t in reversed(range(len(projected))) if reverse else range(len(projected)):
            states = step(projected[t], states, weight_hh, bias_hh, weight_hr)
            outputs[t] = states[0]
        return _mint.stack(outputs, 0), states

    def _packed_direction(self, sizes, x, states, weights, reverse):
        """One direction of one layer over the packed rows x [sum(sizes), in], step t holding the
        first sizes[t] sequences (sorted by decreasing length), from ``states`` [sizes[0], *]:
        (outputs [sum(sizes), H_out] packed as x, each sequence's last states)."""
        weight_hh, weight_hr = weights[1], weights[4]
        step = _MODES[self.mode][1]
        projected, bias_hh = self._projection(x, weights)
        projected = _mint.split(projected, sizes, 0)
        outputs = [None] * len(sizes)
        if reverse:
            # Backwards in time the batch grows: a sequence's initial state joins at its last
            # step, below the longer sequences' rows.
            active = sizes[-1]
            current = tuple(s.narrow(0, 0, active) for s in states)
            for t in reversed(range(len(sizes))):
                if sizes[t] > active:
                    current = tuple(_mint.cat([c, s.narrow(0, active, sizes[t] - active)], 0)
                                    for c, s in zip(current, states))
                    active = sizes[t]
                current = step(projected[t], current, weight_hh, bias_hh, weight_hr)
                outputs[t] = current[0]
            return _mint.cat(outputs, 0), current
        # Forwards the batch shrinks: the rows of the sequences that ended are their final
        # states, set aside, the shortest (last rows) first.
        ended = []
        current, active = states, sizes[0]
        for t, size in enumerate(sizes):
            if size < active:
                parts = [_mint.split(c, [size, active - size], 0) for c in current]
                current = tuple(part[0] for part in parts)
                ended.append(tuple(part[1] for part in parts))
                active = size
            current = step(projected[t], current, weight_hh, bias_hh, weight_hr)
            outputs[t] = current[0]
        finals = tuple(_mint.cat([c] + [rows[k] for rows in reversed(ended)], 0)
                       for k, c in enumerate(current))
        return _mint.cat(outputs, 0), finals

    def _state_shapes(self, batch):
        """The shapes of h_0 (and the LSTM's c_0): [num_layers * D, batch, size], without the
        batch dimension when ``batch`` is None (unbatched input)."""
        rows = self.num_layers * self._directions
        sizes = (self.proj_size or self.hidden_size, self.hidden_size)[:_MODES[self.mode][2]]
        return tuple((rows, size) if batch is None else (rows, batch, size) for size in sizes)

    def _layers(self, x, states, weights, direction):
        """x through every layer and direction from ``states`` (a tuple of [rows, B, size]),
        ``direction(x, initial states, weights, reverse)`` running one layer's direction:
        (the last layer's output, the final states stacked as ``states``)."""
        # Per state, its initial value for each layer and direction.
        initial = [_unbind(s) for s in states]
        finals = []
        for layer in range(self.num_layers):
            outputs = []
            for d in range(self._directions):
                index = layer * self._directions + d
                out, last = direction(x, tuple(s[index] for s in initial), weights[index],
                                      reverse=d == 1)
                outputs.append(out)
                finals.append(last)
            x = outputs[0] if len(outputs) == 1 else _mint.cat(outputs, -1)
            if self.dropout > 0 and layer < self.num_layers - 1:
                x = _mint.dropout(x, self.dropout, self.training)
        return x, tuple(_mint.stack([f[k] for f in finals], 0) for k in range(len(states)))

    def _packed(self, owner, input, hx, weights, dtype):  # noqa: A002
        """construct for a PackedSequence ``input``; see kiln.nn.rnn's documentation."""
        sizes = _checked_batch_sizes(owner, input)
        data = input.data
        _check_tensor(owner, "input.data", data, dtype)
        if data.ndim != 2 or data.shape[1] != self.input_size:
            raise ShapeError(f"{owner}: expected a PackedSequence of data [sum of the lengths, "
                             f"{self.input_size}], got data {list(data.shape)}")
        states = _initial_states(owner, hx, self._state_shapes(sizes[0]), dtype)
        if input.sorted_indices is not None:
            # hx is in the batch's order, the packed sequences in decreasing length.
            states = tuple(_mint.index_select(s, 1, input.sorted_indices) for s in states)
        out, finals = self._layers(data, states, weights,
                                   functools.partial(self._packed_direction, sizes))
        if input.unsorted_indices is not None:
            finals = tuple(_mint.index_select(f, 1, input.unsorted_indices) for f in finals)
        output = PackedSequence(out, input.batch_sizes, input.sorted_indices,
                                input.unsorted_indices)
        return output, (finals if len(finals) == 2 else finals[0])

    def construct(self, input, hx=None):  # noqa: A002  (PyTorch's name)
        owner = type(self).__name__
        count = _MODES[self.mode][2]
        # Each weight read once a call: a parametrized one (spectral_norm) is computed at each
        # read, and its power iteration must run once, as for any other cell.
        weights = [tuple(None if name is None else getattr(self, name) for name in names)
                   for names in self._weight_names]
        dtype = weights[0][0].dtype
        if isinstance(input, PackedSequence):
            return self._packed(owner, input, hx, weights, dtype)
        _check_tensor(owner, "input", input, dtype)
        layout = "[batch, seq" if self.batch_first else "[seq, batch"
        if input.ndim not in (2, 3) or input.shape[-1] != self.input_size:
            raise ShapeError(f"{owner}: expected an input {layout}, {self.input_size}] "
                             f"(batch_first={self.batch_first}) or [seq, {self.input_size}] "
                             f"(unbatched), got {list(input.shape)}")
        batched = input.ndim == 3
        x = (input.transpose(0, 1) if self.batch_first else input) if batched else (
            _mint.unsqueeze(input, 1))
        steps, batch = x.shape[0], x.shape[1]
        if steps == 0:
            raise ShapeError(f"{owner}: expected a sequence of at least one step, got input "
                             f"{list(input.shape)}")
        states = _initial_states(owner, hx, self._state_shapes(batch if batched else None),
                                 dtype)
        if not batched:
            states = tuple(_mint.unsqueeze(s, 1) for s in states)
        x, last_states = self._layers(x, states, weights, self._direction)
        if not batched:
            x = _mint.squeeze(x, 1)
            last_states = tuple(_mint.squeeze(s, 1) for s in last_states)
        elif self.batch_first:
            x = x.transpose(0, 1)
        return x, (last_states if count == 2 else last_states[0])

    def extra_repr(self):
        text = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            text += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if not self.bias:
            text += ", bias=False"
        if self.batch_first:
            text += ", batch_first=True"
        if self.dropout:
            text += f", dropout={self.dropout}"
        if self.bidirectional:
            text += ", bidirectional=True"
        return text


class RNN(_RNNBase):
    """RNN(input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
    batch_first=False, dropout=0.0, bidirectional=False, dtype=None): a multi-layer Elman RNN,
    h' = tanh(W_ih x + b_ih + W_hh h + b_hh) (relu with ``nonlinearity="relu"``);
    ``rnn(input, hx=None)`` returns (output, h_n). See kiln.nn.rnn's documentation."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, dtype=None):
        super().__init__(_rnn_mode("RNN", nonlinearity), input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, 0, dtype)
        self.nonlinearity = nonlinearity

    def extra_repr(self):
        text = super().extra_repr()
        return text + (", nonlinearity=relu" if self.mode == "RNN_RELU" else "")


class LSTM(_RNNBase):
    """LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False, proj_size=0, dtype=None): a multi-layer LSTM (gates i, f, g, o; with
    ``proj_size`` > 0 h is projected by ``weight_hr_l{k}``); ``lstm(input, hx=None)`` with hx the
    tuple (h_0, c_0) returns (output, (h_n, c_n)). See kiln.nn.rnn's documentation."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size, dtype)


class GRU(_RNNBase):
    """GRU(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False, dtype=None): a multi-layer GRU (gates r, z, n, with
    n = tanh(W_in x + b_in + r * (W_hn h + b_hn))); ``gru(input, hx=None)`` returns
    (output, h_n). See kiln.nn.rnn's documentation."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, 0, dtype)
