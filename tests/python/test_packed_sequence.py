"""PackedSequence and the functions of kiln.nn.utils.rnn that make and undo it (kiln/nn/utils/
rnn.py), and kiln.nn.RNN, LSTM and GRU over packed batches (kiln/nn/rnn.py). Torch-free checks
first: layouts computed by hand, round trips, gradients against NumPy, packed layers against the
same layers run on each sequence alone, and the errors; then comparisons with PyTorch through the
``torch`` fixture (layouts, gradients, and the layers' outputs, final states and gradients with
PyTorch's weights)."""

import pickle

import numpy as np
import pytest

import kiln
from conftest import close, raises, t
from kiln.nn.rnn import GRU, LSTM, RNN
from kiln.nn.utils import rnn as R

mint = kiln.mint

IN, HIDDEN = 3, 4
LAYERS = {"RNN": RNN, "LSTM": LSTM, "GRU": GRU}
# Lengths with ties (the sort must be stable, as PyTorch's) and the longest not first.
LENGTHS = [3, 5, 1, 5, 2]


def padded_array(lengths, rng, batch_first=False, trailing=(2,)):
    """A random padded batch for ``lengths`` (padding positions NaN, so that reading one shows)
    in the layout asked for."""
    steps = max(lengths)
    x = rng.standard_normal((len(lengths), steps) + trailing)
    for i, n in enumerate(lengths):
        x[i, n:] = np.nan
    return x if batch_first else np.swapaxes(x, 0, 1).copy()


def packed_rows(x, lengths, batch_first):
    """PyTorch's packed layout written out: time-major, the sequences sorted by decreasing length
    (stably) at each step. Returns (data, batch_sizes, order)."""
    per_sample = x if batch_first else np.swapaxes(x, 0, 1)
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    rows, sizes = [], []
    for step in range(max(lengths)):
        active = [i for i in order if lengths[i] > step]
        rows += [per_sample[i, step] for i in active]
        sizes.append(len(active))
    return np.stack(rows), sizes, order


# ------------------------------------------------------------------------------------------------
# Layouts

def test_pack_sequence_layout_is_pytorchs_example():
    packed = R.pack_sequence([t([1, 2, 3]), t([4, 5]), t([6])])
    assert isinstance(packed, tuple) and packed._fields == ("data", "batch_sizes",
                                                            "sorted_indices", "unsorted_indices")
    assert packed.data.tolist() == [1, 4, 6, 2, 5, 3]
    assert packed.batch_sizes.dtype == kiln.int64 and packed.batch_sizes.tolist() == [3, 2, 1]
    assert packed.sorted_indices is None and packed.unsorted_indices is None
    assert [s.tolist() for s in R.unpack_sequence(packed)] == [[1, 2, 3], [4, 5], [6]]


def test_unsorted_pack_sequence_records_the_order():
    packed = R.pack_sequence([t([1, 2]), t([3, 4, 5]), t([6, 7]), t([8])], enforce_sorted=False)
    assert packed.data.tolist() == [3, 1, 6, 8, 4, 2, 7, 5]
    assert packed.batch_sizes.tolist() == [4, 3, 1]
    assert packed.sorted_indices.tolist() == [1, 0, 2, 3]  # ties keep the batch's order
    assert packed.unsorted_indices.tolist() == [1, 0, 2, 3]
    padded, lengths = R.pad_packed_sequence(packed, batch_first=True, padding_value=-1)
    assert padded.tolist() == [[1, 2, -1], [3, 4, 5], [6, 7, -1], [8, -1, -1]]
    assert lengths.dtype == kiln.int64 and lengths.tolist() == [2, 3, 2, 1]


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_pack_padded_sequence_layout_and_round_trip(batch_first, enforce_sorted, rng):
    lengths = [5, 5, 3, 2, 1] if enforce_sorted else LENGTHS
    x = padded_array(lengths, rng, batch_first)
    packed = R.pack_padded_sequence(t(x), t(np.array(lengths)), batch_first, enforce_sorted)
    data, sizes, order = packed_rows(x, lengths, batch_first)
    close(packed.data, data, rtol=0, atol=0)
    assert packed.batch_sizes.tolist() == sizes
    if enforce_sorted:
        assert packed.sorted_indices is None and packed.unsorted_indices is None
    else:
        assert packed.sorted_indices.tolist() == order
        assert packed.unsorted_indices.tolist() == np.argsort(order).tolist()
    for layout in (False, True):
        padded, got_lengths = R.pad_packed_sequence(packed, layout, padding_value=7.0,
                                                    total_length=6)
        want = np.full((len(lengths), 6, 2), 7.0)
        want[:, :max(lengths)] = np.nan_to_num(x if batch_first else np.swapaxes(x, 0, 1),
                                               nan=7.0)
        close(padded, want if layout else np.swapaxes(want, 0, 1), rtol=0, atol=0)
        assert got_lengths.tolist() == lengths
    for sequence, n, row in zip(R.unpack_sequence(packed), lengths,
                                x if batch_first else np.swapaxes(x, 0, 1)):
        close(sequence, row[:n], rtol=0, atol=0)


def test_unpad_sequence_cuts_each_sequence_and_leaves_the_batch_as_it_is(rng):
    x = rng.standard_normal((4, 3, 2))
    padded = t(x)
    pieces = R.unpad_sequence(padded, [4, 0, 2])
    assert [tuple(p.shape) for p in pieces] == [(4, 2), (0, 2), (2, 2)]
    close(pieces[2], x[:2, 2], rtol=0, atol=0)
    assert tuple(padded.shape) == (4, 3, 2)  # PyTorch's transposes it in place
    close(R.unpad_sequence(padded, t(np.array([1, 3, 2, 2])), batch_first=True)[1], x[1, :3],
          rtol=0, atol=0)


# ------------------------------------------------------------------------------------------------
# Gradients through packing and padding

@pytest.mark.parametrize("batch_first", [False, True])
def test_gradients_flow_through_pack_and_pad(batch_first, rng):
    x = np.nan_to_num(padded_array(LENGTHS, rng, batch_first))
    leaf = t(x).requires_grad_()
    packed = R.pack_padded_sequence(leaf, LENGTHS, batch_first, enforce_sorted=False)
    upstream = rng.standard_normal(tuple(packed.data.shape))
    (grad,) = kiln.autograd.grad(packed.data, [leaf], t(upstream))
    # Each packed row's gradient lands where the row came from; padding gets none.
    index = np.arange(x[..., 0].size).reshape(x.shape[:2]).astype(float)
    rows, _, _ = packed_rows(index[..., None], LENGTHS, batch_first)
    want = np.zeros(x.shape).reshape(-1, 2)
    want[rows[:, 0].astype(int)] = upstream
    close(grad, want.reshape(x.shape), rtol=0, atol=0)

    data = packed.data.detach().requires_grad_()
    again = R.PackedSequence(data, packed.batch_sizes, packed.sorted_indices)
    padded, _ = R.pad_packed_sequence(again, batch_first, padding_value=3.0)
    upstream = rng.standard_normal(tuple(padded.shape))
    (grad,) = kiln.autograd.grad(padded, [data], t(upstream))
    # pad_packed_sequence is the inverse layout: its gradient packs the upstream one.
    close(grad, packed_rows(upstream, LENGTHS, batch_first)[0], rtol=0, atol=0)


def test_gradients_flow_through_pack_sequence_and_unpack_sequence(rng):
    arrays = [rng.standard_normal((n, 2)) for n in LENGTHS]
    leaves = [t(a).requires_grad_() for a in arrays]
    pieces = R.unpack_sequence(R.pack_sequence(leaves, enforce_sorted=False))
    weights = [rng.standard_normal(a.shape) for a in arrays]
    loss = sum((p * t(w)).sum() for p, w in zip(pieces, weights))
    for grad, w in zip(kiln.autograd.grad(loss, leaves), weights):
        close(grad, w, rtol=0, atol=0)


# ------------------------------------------------------------------------------------------------
# The PackedSequence class

def test_packed_sequence_fields_conversions_and_pickling():
    data, sizes = t(np.arange(3.0)), t(np.array([2, 1]))
    older = R.PackedSequence((data, sizes))  # PyTorch's older form
    assert older.data is data and older.batch_sizes is sizes and older.unsorted_indices is None
    packed = R.PackedSequence(data, sizes, t(np.array([1, 0])))
    assert packed.unsorted_indices.tolist() == [1, 0]  # the inverse, computed
    assert R.invert_permutation(t(np.array([2, 0, 3, 1]))).tolist() == [1, 3, 0, 2]
    assert R.invert_permutation(None) is None
    assert packed.is_cuda is False
    for convert, dtype in ((packed.double, kiln.float64), (packed.long, kiln.int64),
                           (packed.half, kiln.float16), (packed.byte, kiln.uint8)):
        converted = convert()
        assert converted.data.dtype == dtype and converted.batch_sizes is sizes
        assert converted.sorted_indices is packed.sorted_indices
    assert packed.to(dtype=kiln.float64).data.dtype == kiln.float64
    assert packed.cpu().data.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(kiln.KilnValueError):
        packed.cuda()
    copy = pickle.loads(pickle.dumps(packed))
    assert type(copy) is R.PackedSequence and copy.data.tolist() == [0.0, 1.0, 2.0]
    assert "PackedSequence(data=" in repr(packed)


# ------------------------------------------------------------------------------------------------
# Errors

def _packed(sizes, rows=None, unsorted=None):
    return R.PackedSequence(mint.zeros((sum(sizes) if rows is None else rows, IN)),
                            t(np.array(sizes)), None, unsorted)


@pytest.mark.parametrize("call, error, message", [
    (lambda: R.pack_padded_sequence(mint.zeros((3, 3)), [2, 3, 1]), kiln.KilnValueError,
     r"pack_padded_sequence: `lengths` array must be sorted in decreasing order when "
     r"`enforce_sorted` is True, got \[2, 3, 1\]. You can pass `enforce_sorted=False`"),
    (lambda: R.pack_sequence([mint.zeros(1), mint.zeros(2)]), kiln.KilnValueError,
     "pack_sequence: `lengths` array must be sorted in decreasing order"),
    (lambda: R.pack_padded_sequence(mint.zeros((3, 2)), [3, 0], enforce_sorted=False),
     kiln.KilnValueError, "Length of all samples has to be greater than 0, but found an "
                          r"element in 'lengths' that is <= 0: \[3, 0\]"),
    (lambda: R.pack_padded_sequence(mint.zeros((3, 2)), [3, 2, 1]), kiln.ShapeError,
     r"expected len\(lengths\) to be equal to the batch size 2 of input \[3, 2\]"),
    (lambda: R.pack_padded_sequence(mint.zeros((3, 2)), [4, 2]), kiln.ShapeError,
     r"expected lengths of at most the 3 steps of input \[3, 2\] \(batch_first=False\), got "
     r"\[4, 2\]"),
    (lambda: R.pack_padded_sequence(mint.zeros((0, 2)), [1, 1]), kiln.KilnValueError,
     r"cannot pack an empty tensor, got input \[0, 2\]"),
    (lambda: R.pack_padded_sequence(mint.zeros(3), [3]), kiln.ShapeError,
     r"expected input \[T, B, \*\] \(batch_first=False\), got \[3\]"),
    (lambda: R.pack_padded_sequence(mint.zeros((3, 2)), t(np.array([[3, 2]]))),
     kiln.ShapeError, r"expected lengths to be a 1-d tensor, got \[1, 2\]"),
    (lambda: R.pack_padded_sequence(mint.zeros((3, 2)), t(np.array([3.0, 2.0]))),
     kiln.DTypeError, "expected lengths of an integer dtype, got float64"),
    (lambda: R.pack_padded_sequence(mint.zeros((3, 2)), [3.0, 2.0]), kiln.KilnTypeError,
     r"expected lengths to be ints, got \[3.0, 2.0\]"),
    (lambda: R.pack_padded_sequence([[0.0]], [1]), kiln.KilnTypeError,
     "pack_padded_sequence: expected input to be a kiln.Tensor, got list"),
    (lambda: R.pack_padded_sequence(mint.zeros((3, 2)), [3, 2], enforce_sorted=1),
     kiln.KilnTypeError, "enforce_sorted must be a bool, got int"),
    (lambda: R.pad_packed_sequence(_packed([2, 1]), total_length=1), kiln.KilnValueError,
     "Expected total_length to be at least the length of the longest sequence in input, but "
     "got total_length=1 and max sequence length being 2"),
    (lambda: R.pad_packed_sequence(mint.zeros(3)), kiln.KilnTypeError,
     "pad_packed_sequence: expected a PackedSequence, got Tensor"),
    (lambda: R.pad_packed_sequence(_packed([1, 2])), kiln.KilnValueError,
     r"expected batch_sizes of at least one step, each at least 1 and none above the one "
     r"before, got \[1, 2\]"),
    (lambda: R.pad_packed_sequence(_packed([2, 1], rows=4)), kiln.ShapeError,
     r"expected data \[3, \*\] \(the sum of batch_sizes \[2, 1\]\), got \[4, 3\]"),
    (lambda: R.pad_packed_sequence(_packed([2, 1], unsorted=t(np.array([0, 2])))),
     kiln.KilnValueError, r"expected unsorted_indices to be a permutation of 0 .. 1, got "
                          r"\[0, 2\]"),
    (lambda: R.unpack_sequence([mint.zeros(2)]), kiln.KilnTypeError,
     "unpack_sequence: expected a PackedSequence, got list"),
    (lambda: R.unpad_sequence(mint.zeros((3, 2)), [3, 4]), kiln.ShapeError,
     r"unpad_sequence: expected 2 lengths in \[0, 3\] for padded_sequences \[3, 2\] "
     r"\(batch_first=False\), got \[3, 4\]"),
    (lambda: R.unpad_sequence(mint.zeros(3), [3]), kiln.ShapeError,
     r"expected padded_sequences \[T, B, \*\] or \[B, T, \*\]"),
    (lambda: R.pack_sequence([]), kiln.KilnValueError,
     "pack_sequence: expected at least one sequence, got none"),
    (lambda: R.PackedSequence(mint.zeros(3)), kiln.KilnTypeError,
     r"PackedSequence: expected data and batch_sizes, or the pair \(data, batch_sizes\)"),
    (lambda: R.PackedSequence(mint.zeros(3), t(np.array([2.0, 1.0]))), kiln.DTypeError,
     "PackedSequence: expected batch_sizes of dtype int64, got float64"),
    (lambda: R.PackedSequence(mint.zeros(3), t(np.array([[3]]))), kiln.ShapeError,
     r"PackedSequence: expected batch_sizes to be 1-d, got \[1, 1\]"),
    (lambda: R.PackedSequence(mint.zeros(3), t(np.array([3])), [0]), kiln.KilnTypeError,
     "PackedSequence: expected sorted_indices to be a kiln.Tensor, got list"),
])
def test_errors(call, error, message):
    with raises(error, match=message):
        call()


# ------------------------------------------------------------------------------------------------
# The recurrent layers over packed batches, torch-free: each sequence alone, unpacked

def _states(out_states, mode):
    return out_states if mode == "LSTM" else (out_states,)


@pytest.mark.parametrize("cls, kwargs", [
    ("RNN", dict(num_layers=2, bidirectional=True, nonlinearity="relu")),
    ("LSTM", dict(bidirectional=True, proj_size=2)),
    ("GRU", dict(num_layers=2)),
])
def test_packed_batch_runs_each_sequence_as_far_as_its_length(cls, kwargs, rng):
    layer = LAYERS[cls](IN, HIDDEN, **kwargs, dtype=kiln.float64)
    # Padding that is no zero: a step past a length that leaked into a state would show.
    x = np.nan_to_num(padded_array(LENGTHS, rng, trailing=(IN,)), nan=100.0)
    rows = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
    sizes = (kwargs.get("proj_size") or HIDDEN, HIDDEN)[:2 if cls == "LSTM" else 1]
    hx = tuple(rng.standard_normal((rows, len(LENGTHS), size)) for size in sizes)
    packed = R.pack_padded_sequence(t(x), LENGTHS, enforce_sorted=False)
    out, finals = layer(packed, tuple(map(t, hx)) if cls == "LSTM" else t(hx[0]))
    assert out.batch_sizes is packed.batch_sizes and out.sorted_indices is packed.sorted_indices
    padded, _ = R.pad_packed_sequence(out)
    for i, n in enumerate(LENGTHS):
        alone = tuple(t(h[:, i:i + 1]) for h in hx)
        want_out, want = layer(t(x[:n, i:i + 1]), alone if cls == "LSTM" else alone[0])
        close(padded[:n, i:i + 1], want_out.numpy(), rtol=1e-12, atol=1e-12)
        for got, expected in zip(_states(finals, cls), _states(want, cls), strict=True):
            close(got[:, i:i + 1], expected.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("make, packed, hx, error, message", [
    (lambda: GRU(IN, HIDDEN), lambda: _packed([2, 1]), None, None, None),
    (lambda: GRU(IN + 1, HIDDEN), lambda: _packed([2, 1]), None, kiln.ShapeError,
     r"GRU: expected a PackedSequence of data \[sum of the lengths, 4\], got data \[3, 3\]"),
    (lambda: RNN(IN, HIDDEN), lambda: _packed([2, 1]), mint.zeros((1, 3, HIDDEN)),
     kiln.ShapeError, r"RNN: expected h_0 of shape \[1, 2, 4\], got \[1, 3, 4\]"),
    (lambda: LSTM(IN, HIDDEN), lambda: _packed([2, 1]), mint.zeros((1, 2, HIDDEN)),
     kiln.KilnTypeError, r"LSTM: expected hx to be a tuple \(h_0, c_0\), got Tensor"),
    (lambda: RNN(IN, HIDDEN, dtype=kiln.float64), lambda: _packed([2, 1]), None,
     kiln.DTypeError, r"RNN: expected input.data of dtype float64 \(the parameters'\), got "
                      r"float32"),
    (lambda: RNN(IN, HIDDEN), lambda: _packed([2, 1], rows=2), None, kiln.ShapeError,
     r"RNN: expected data \[3, \*\] \(the sum of batch_sizes \[2, 1\]\), got \[2, 3\]"),
    (lambda: RNN(IN, HIDDEN), lambda: _packed([1, 2]), None, kiln.KilnValueError,
     r"RNN: expected batch_sizes of at least one step, each at least 1"),
])
def test_packed_input_errors(make, packed, hx, error, message):
    layer = make()
    if error is None:  # the well-formed case, for contrast
        out, h_n = layer(packed(), hx)
        assert tuple(out.data.shape) == (3, HIDDEN) and tuple(h_n.shape) == (1, 2, HIDDEN)
        return
    with raises(error, match=message):
        layer(packed(), hx)


# ------------------------------------------------------------------------------------------------
# Against PyTorch (skipped without it)

@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_packing_matches_torch(torch, batch_first, enforce_sorted, rng):
    lengths = [6, 4, 4, 2, 1, 1] if enforce_sorted else [2, 6, 1, 4, 4, 1]
    x = np.nan_to_num(padded_array(lengths, rng, batch_first, trailing=(2, 3)))
    leaf, twin = t(x).requires_grad_(), torch.tensor(x, requires_grad=True)
    ours = R.pack_padded_sequence(leaf, lengths, batch_first, enforce_sorted)
    theirs = torch.nn.utils.rnn.pack_padded_sequence(twin, lengths, batch_first, enforce_sorted)
    close(ours.data, theirs.data.detach().numpy(), rtol=0, atol=0)
    for name in ("batch_sizes", "sorted_indices", "unsorted_indices"):
        want = getattr(theirs, name)
        got = getattr(ours, name)
        assert (got is None) == (want is None), name
        assert got is None or got.tolist() == want.tolist(), name
    padded, lengths_out = R.pad_packed_sequence(ours, not batch_first, -1.5, 8)
    want, want_lengths = torch.nn.utils.rnn.pad_packed_sequence(theirs, not batch_first, -1.5, 8)
    close(padded, want.detach().numpy(), rtol=0, atol=0)
    assert lengths_out.tolist() == want_lengths.tolist()
    upstream = rng.standard_normal(tuple(want.shape))
    (grad,) = kiln.autograd.grad(padded, [leaf], t(upstream))
    (want_grad,) = torch.autograd.grad(want, [twin], torch.tensor(upstream))
    close(grad, want_grad.numpy(), rtol=0, atol=0)
    unpacked = R.unpack_sequence(ours)
    for got, expected in zip(unpacked, torch.nn.utils.rnn.unpack_sequence(theirs), strict=True):
        close(got, expected.detach().numpy(), rtol=0, atol=0)


LAYER_CASES = [(cls, layers, bidirectional)
               for cls in ("RNN", "LSTM", "GRU") for layers in (1, 2)
               for bidirectional in (False, True)] + [("LSTM-proj", 2, True)]


@pytest.mark.parametrize("cls, num_layers, bidirectional", LAYER_CASES)
@pytest.mark.parametrize("batch_first, with_hx", [(False, True), (True, False)])
def test_layers_on_packed_input_match_torch(torch, cls, num_layers, bidirectional, batch_first,
                                            with_hx, rng):
    kwargs = dict(num_layers=num_layers, bidirectional=bidirectional, batch_first=batch_first)
    if cls == "LSTM-proj":
        cls, kwargs["proj_size"] = "LSTM", 2
    theirs = getattr(torch.nn, cls)(IN, HIDDEN, **kwargs).double()
    ours = LAYERS[cls](IN, HIDDEN, **kwargs, dtype=kiln.float64)
    ours.load_state_dict(theirs.state_dict())
    x = np.nan_to_num(padded_array(LENGTHS, rng, batch_first, trailing=(IN,)))
    leaf, twin = t(x).requires_grad_(), torch.tensor(x, requires_grad=True)
    rows = num_layers * (2 if bidirectional else 1)
    sizes = (kwargs.get("proj_size") or HIDDEN, HIDDEN)[:2 if cls == "LSTM" else 1]
    hx = [rng.standard_normal((rows, len(LENGTHS), size)) for size in sizes] if with_hx else []
    hx_leaves = [t(h).requires_grad_() for h in hx]
    hx_twins = [torch.tensor(h, requires_grad=True) for h in hx]

    def state(values):
        return None if not values else tuple(values) if cls == "LSTM" else values[0]

    out, finals = ours(R.pack_padded_sequence(leaf, LENGTHS, batch_first, False),
                       state(hx_leaves))
    want, want_finals = theirs(torch.nn.utils.rnn.pack_padded_sequence(
        twin, LENGTHS, batch_first, False), state(hx_twins))
    close(out.data, want.data.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert out.batch_sizes.tolist() == want.batch_sizes.tolist()
    assert out.unsorted_indices.tolist() == want.unsorted_indices.tolist()
    finals, want_finals = _states(finals, cls), _states(want_finals, cls)
    for got, expected in zip(finals, want_finals, strict=True):
        close(got, expected.detach().numpy(), rtol=1e-10, atol=1e-12)

    # One upstream gradient for the packed output and each final state.
    upstreams = [rng.standard_normal(tuple(v.shape)) for v in (want.data,) + want_finals]
    params = list(ours.parameters())
    grads = kiln.autograd.grad([out.data] + list(finals), [leaf] + hx_leaves + params,
                               [t(u) for u in upstreams])
    want_grads = torch.autograd.grad([want.data] + list(want_finals),
                                     [twin] + hx_twins + list(theirs.parameters()),
                                     [torch.tensor(u) for u in upstreams])
    names = ["input"] + ["h_0", "c_0"][:len(hx)] + [n for n, _ in theirs.named_parameters()]
    for name, got, expected in zip(names, grads, want_grads, strict=True):
        close(got, expected.numpy(), rtol=1e-9, atol=1e-10)
