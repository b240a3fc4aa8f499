"""kiln.nn.RNN, LSTM, GRU and their cells (kiln/nn/rnn.py): outputs and gradients against a NumPy
reference written from PyTorch's equations (gradients by central differences) and, where torch
is installed, against torch.nn with its weights loaded through state_dict; parameter names and
initialisation, dropout, kiln.jit, and the argument errors."""

import copy
import pickle

import numpy as np
import pytest

import kiln
from conftest import raises
from kiln.nn.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from kiln.testing import gradcheck, gradgradcheck

mint = kiln.mint

IN, HIDDEN, PROJ, STEPS, BATCH = 3, 4, 2, 5, 2
KINDS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")


# ------------------------------------------------------------------------------------------------
# The NumPy reference: PyTorch's documented updates, one step at a time, biases as written.

def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def ref_step(mode, x, state, p):
    """The next state of ``mode`` from x [B, in] and state (h,) or (h, c); ``p`` maps the kinds
    in KINDS that exist to arrays."""
    h = state[0]
    gi = x @ p["weight_ih"].T + p.get("bias_ih", 0.0)
    gh = h @ p["weight_hh"].T + p.get("bias_hh", 0.0)
    if mode == "RNN_TANH":
        return (np.tanh(gi + gh),)
    if mode == "RNN_RELU":
        return (np.maximum(gi + gh, 0.0),)
    if mode == "LSTM":
        i, f, g, o = np.split(gi + gh, 4, -1)
        c = _sigmoid(f) * state[1] + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        return (h @ p["weight_hr"].T if "weight_hr" in p else h, c)
    i_r, i_z, i_n = np.split(gi, 3, -1)
    h_r, h_z, h_n = np.split(gh, 3, -1)
    r, z = _sigmoid(i_r + h_r), _sigmoid(i_z + h_z)
    n = np.tanh(i_n + r * h_n)
    return ((1 - z) * n + z * h,)


def ref_layers(mode, params, x, states, num_layers, bidirectional):
    """x [T, B, in] and states, a tuple of [L * D, B, size], through the stacked layers:
    (output [T, B, D * H_out], tuple of final states [L * D, B, size])."""
    finals = [[] for _ in states]
    suffixes = ("", "_reverse") if bidirectional else ("",)
    for layer in range(num_layers):
        outputs = []
        for direction, suffix in enumerate(suffixes):
            p = {kind: params[f"{kind}_l{layer}{suffix}"] for kind in KINDS
                 if f"{kind}_l{layer}{suffix}" in params}
            index = layer * len(suffixes) + direction
            state = tuple(s[index] for s in states)
            ys = [None] * len(x)
            for step in reversed(range(len(x))) if direction else range(len(x)):
                state = ref_step(mode, x[step], state, p)
                ys[step] = state[0]
            outputs.append(np.stack(ys))
            for final, value in zip(finals, state):
                final.append(value)
        x = np.concatenate(outputs, -1)
    return x, tuple(np.stack(f) for f in finals)


def state_sizes(mode, kwargs):
    """The sizes of a layer's states: (H_out,) or, for an LSTM, (H_out, hidden_size)."""
    out = kwargs.get("proj_size") or HIDDEN
    return (out, HIDDEN) if mode == "LSTM" else (out,)


def layer_arrays(mode, kwargs, layout, with_hx, rng):
    """Random inputs for a layer: {"input": x in ``layout``, "h_0" (, "c_0"): states}."""
    shape = {"seq": (STEPS, BATCH, IN), "batch_first": (BATCH, STEPS, IN),
             "unbatched": (STEPS, IN)}[layout]
    arrays = {"input": rng.standard_normal(shape)}
    if with_hx:
        rows = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
        for name, size in zip(("h_0", "c_0"), state_sizes(mode, kwargs)):
            lead = (rows,) if layout == "unbatched" else (rows, BATCH)
            arrays[name] = rng.standard_normal(lead + (size,))
    return arrays


def ref_layer_run(mode, kwargs, layout, arrays):
    """The reference's (output, states) for ``arrays`` (parameters by name, input, states) in
    the layer's layout."""
    x = arrays["input"]
    if layout == "batch_first":
        x = x.transpose(1, 0, 2)
    elif layout == "unbatched":
        x = x[:, None]
    rows = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
    states = []
    for name, size in zip(("h_0", "c_0"), state_sizes(mode, kwargs)):
        if name not in arrays:
            states.append(np.zeros((rows, x.shape[1], size)))
        else:
            states.append(arrays[name][:, None] if layout == "unbatched" else arrays[name])
    out, finals = ref_layers(mode, arrays, x, tuple(states), kwargs.get("num_layers", 1),
                             kwargs.get("bidirectional", False))
    if layout == "batch_first":
        out = out.transpose(1, 0, 2)
    elif layout == "unbatched":
        out, finals = out[:, 0], tuple(f[:, 0] for f in finals)
    return out, finals


def ref_cell_run(mode, arrays):
    x = arrays["input"]
    batched = x.ndim == 2
    sizes = (HIDDEN, HIDDEN) if mode == "LSTM" else (HIDDEN,)
    states = tuple(arrays.get(name, np.zeros(x.shape[:-1] + (size,)))
                   for name, size in zip(("h_0", "c_0"), sizes))
    if not batched:
        x, states = x[None], tuple(s[None] for s in states)
    states = ref_step(mode, x, states, arrays)
    return states if batched else tuple(s[0] for s in states)


def check_directional_grads(loss, arrays, grads, rng):
    """Each of ``grads`` (name -> array) against central differences of ``loss`` along a random
    direction of that one array: any wrong entry shows, and it costs two runs per array."""
    for name, value in arrays.items():
        direction = rng.standard_normal(value.shape)
        eps = 1e-6
        up = loss({**arrays, name: value + eps * direction})
        down = loss({**arrays, name: value - eps * direction})
        np.testing.assert_allclose(np.sum(grads[name] * direction), (up - down) / (2 * eps),
                                   rtol=1e-6, atol=1e-8, err_msg=name)


# ------------------------------------------------------------------------------------------------
# Running kiln's layers

def as_states(hx):
    """A layer's or cell's returned state(s) as a tuple."""
    return (hx,) if isinstance(hx, kiln.Tensor) else tuple(hx)


def kiln_run(module, mode, arrays, dtype=kiln.float64):
    """``module`` on ``arrays`` (input and states; parameters are the module's): (output, states,
    {name: gradient of the sum of every result} for the parameters, input and states)."""
    leaves = {name: kiln.tensor(value, dtype=dtype).requires_grad_()
              for name, value in arrays.items()}
    names = [n for n in ("h_0", "c_0") if n in leaves]
    hx = None if not names else leaves["h_0"] if mode != "LSTM" else (leaves["h_0"],
                                                                      leaves["c_0"])
    result = module(leaves["input"], hx)
    if isinstance(module, (RNN, LSTM, GRU)):
        out, states = result[0], as_states(result[1])
    else:
        out, states = None, as_states(result)
    total = sum(mint.sum(r) for r in ((out,) if out is not None else ()) + states)
    total.backward()
    grads = {name: p.grad.numpy() for name, p in module.named_parameters()}
    grads.update({name: leaf.grad.numpy() for name, leaf in leaves.items()})
    return out, states, grads


def with_params(module, arrays):
    return {**{n: p.numpy().astype(np.float64) for n, p in module.named_parameters()}, **arrays}


LAYERS = {"RNN": RNN, "LSTM": LSTM, "GRU": GRU}
CELLS = {"RNNCell": RNNCell, "LSTMCell": LSTMCell, "GRUCell": GRUCell}

# (class, mode, arguments, input layout, whether initial states are given)
LAYER_CASES = [
    ("RNN", "RNN_TANH", {}, "seq", False),
    ("RNN", "RNN_RELU", dict(nonlinearity="relu", num_layers=2, bidirectional=True), "seq", True),
    ("RNN", "RNN_TANH", dict(bias=False), "unbatched", True),
    ("LSTM", "LSTM", {}, "batch_first", True),
    ("LSTM", "LSTM", dict(num_layers=2, bidirectional=True), "unbatched", True),
    ("LSTM", "LSTM", dict(num_layers=2, bidirectional=True, proj_size=PROJ), "batch_first",
     True),
    ("LSTM", "LSTM", dict(num_layers=2, bias=False), "seq", False),
    ("GRU", "GRU", dict(num_layers=2), "batch_first", True),
    ("GRU", "GRU", dict(bidirectional=True, bias=False), "unbatched", False),
    ("GRU", "GRU", dict(num_layers=2, bidirectional=True), "seq", True),
]

# (class, mode, arguments, batched, whether the state is given)
CELL_CASES = [
    ("RNNCell", "RNN_TANH", {}, True, False),
    ("RNNCell", "RNN_RELU", dict(nonlinearity="relu"), False, True),
    ("LSTMCell", "LSTM", {}, True, True),
    ("LSTMCell", "LSTM", dict(bias=False), False, False),
    ("GRUCell", "GRU", {}, True, True),
    ("GRUCell", "GRU", dict(bias=False), False, True),
]


def layer_kwargs(kwargs, layout):
    return dict(kwargs, batch_first=True) if layout == "batch_first" else kwargs


def cell_arrays(mode, batched, with_hx, rng):
    lead = (BATCH,) if batched else ()
    arrays = {"input": rng.standard_normal(lead + (IN,))}
    if with_hx:
        for name in ("h_0", "c_0") if mode == "LSTM" else ("h_0",):
            arrays[name] = rng.standard_normal(lead + (HIDDEN,))
    return arrays


def case_id(case):
    cls, _, kwargs, layout, with_hx = case
    if isinstance(layout, bool):  # a cell case's "batched"
        layout = "batched" if layout else "unbatched"
    options = [f"{k}={v}" for k, v in kwargs.items()]
    return "-".join([cls, *options, layout, "hx" if with_hx else "zeros"])


# ------------------------------------------------------------------------------------------------
# Against the NumPy reference

@pytest.mark.parametrize("case", LAYER_CASES, ids=case_id)
def test_layers_match_the_numpy_reference(case, rng):
    cls, mode, kwargs, layout, with_hx = case
    module = LAYERS[cls](IN, HIDDEN, **layer_kwargs(kwargs, layout), dtype=kiln.float64)
    arrays = layer_arrays(mode, kwargs, layout, with_hx, rng)
    out, states, grads = kiln_run(module, mode, arrays)
    everything = with_params(module, arrays)
    want_out, want_states = ref_layer_run(mode, kwargs, layout, everything)
    np.testing.assert_allclose(out.numpy(), want_out, rtol=1e-12, atol=1e-12)
    assert len(states) == len(want_states)
    for got, want in zip(states, want_states):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)

    def loss(values):
        out, finals = ref_layer_run(mode, kwargs, layout, values)
        return out.sum() + sum(f.sum() for f in finals)

    check_directional_grads(loss, everything, grads, rng)


@pytest.mark.parametrize("case", CELL_CASES, ids=case_id)
def test_cells_match_the_numpy_reference(case, rng):
    cls, mode, kwargs, batched, with_hx = case
    cell = CELLS[cls](IN, HIDDEN, **kwargs, dtype=kiln.float64)
    arrays = cell_arrays(mode, batched, with_hx, rng)
    _, states, grads = kiln_run(cell, mode, arrays)
    everything = with_params(cell, arrays)
    want = ref_cell_run(mode, everything)
    assert len(states) == len(want)
    for got, expected in zip(states, want):
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-12)
    check_directional_grads(lambda values: sum(s.sum() for s in ref_cell_run(mode, values)),
                            everything, grads, rng)


def lstm_cell_reference(z, c):
    i, f, g, o = np.split(z.astype(np.float64), 4, axis=-1)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    c_next = sig(f) * c + sig(i) * np.tanh(g)
    return sig(o) * np.tanh(c_next), c_next


@pytest.mark.parametrize("dtype, tol", [(kiln.float32, 1e-6), (kiln.float64, 1e-12),
                                        (kiln.float16, 2e-3), (kiln.bfloat16, 1e-2)],
                         ids=lambda v: getattr(v, "name", str(v)))
def test_lstm_cell_is_one_lstm_step(dtype, tol, rng):
    z, c = rng.standard_normal((3, 2, 4 * 5)), rng.standard_normal((3, 2, 5))
    kz, kc = kiln.tensor(z, dtype=dtype), kiln.tensor(c, dtype=dtype)
    h, c_next = kiln.mint.lstm_cell(kz, kc)
    want_h, want_c = lstm_cell_reference(kz.double().numpy(), kc.double().numpy())
    assert h.dtype == c_next.dtype == dtype and tuple(h.shape) == (3, 2, 5)
    np.testing.assert_allclose(h.double().numpy(), want_h, rtol=tol, atol=tol)
    np.testing.assert_allclose(c_next.double().numpy(), want_c, rtol=tol, atol=tol)


def test_lstm_cell_gradients_twice_and_under_jit(rng):
    z = kiln.tensor(rng.standard_normal((4, 12)), requires_grad=True)
    c = kiln.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    assert gradcheck(lambda a, b: kiln.mint.lstm_cell(a, b), (z, c))
    assert gradgradcheck(lambda a, b: kiln.mint.lstm_cell(a, b), (z, c))
    step = kiln.jit(lambda a, b: kiln.mint.lstm_cell(a * 1.0, b))
    for got, want in zip(step(z.detach(), c.detach()), kiln.mint.lstm_cell(z.detach(), c)):
        np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-12)


def gru_cell_reference(x, hg, h):
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    (xr, xz, xn), (hr, hz, hn) = np.split(x, 3, axis=-1), np.split(hg, 3, axis=-1)
    z, n = sig(xz + hz), np.tanh(xn + sig(xr + hr) * hn)
    return (1 - z) * n + z * h


@pytest.mark.parametrize("dtype, tol", [(kiln.float32, 1e-6), (kiln.float64, 1e-12),
                                        (kiln.float16, 2e-3), (kiln.bfloat16, 1e-2)],
                         ids=lambda v: getattr(v, "name", str(v)))
def test_gru_cell_is_one_gru_step(dtype, tol, rng):
    x, hg, h = (kiln.tensor(rng.standard_normal(s), dtype=dtype)
                for s in ((3, 2, 15), (3, 2, 15), (3, 2, 5)))
    out = kiln.mint.gru_cell(x, hg, h)
    assert out.dtype == dtype and tuple(out.shape) == (3, 2, 5)
    want = gru_cell_reference(*(v.double().numpy() for v in (x, hg, h)))
    np.testing.assert_allclose(out.double().numpy(), want, rtol=tol, atol=tol)


def test_gru_cell_gradients_twice_and_under_jit(rng):
    args = [kiln.tensor(rng.standard_normal(s), requires_grad=True)
            for s in ((4, 9), (4, 9), (4, 3))]
    assert gradcheck(kiln.mint.gru_cell, args)
    assert gradgradcheck(kiln.mint.gru_cell, args)
    plain = [a.detach() for a in args]
    step = kiln.jit(lambda x, hg, h: kiln.mint.gru_cell(x * 1.0, hg, h))
    np.testing.assert_allclose(step(*plain).numpy(), kiln.mint.gru_cell(*plain).numpy(),
                               rtol=1e-12)
    with raises(kiln.ShapeError, match=r"gru_cell: expected x and hg \[..., 3H\] and h "
                                       r"\[..., H\]"):
        kiln.mint.gru_cell(plain[0], plain[1][:, :6], plain[2])


@pytest.mark.parametrize("z_shape, c_shape, dtypes, error, message", [
    ((4, 12), (4, 4), (kiln.float32, kiln.float32), kiln.ShapeError,
     r"expected gates \[..., 4H\] and c \[..., H\] with the same leading dimensions, got "
     r"\[4, 12\] and \[4, 4\]"),
    ((2, 4), (3, 1), (kiln.float32, kiln.float32), kiln.ShapeError, "same leading dimensions"),
    ((4, 12), (4, 3), (kiln.float32, kiln.float64), kiln.DTypeError,
     "expected floating-point gates and c of one dtype, got float32 and float64"),
    ((4, 12), (4, 3), (kiln.int64, kiln.int64), kiln.DTypeError, "floating-point"),
])
def test_lstm_cell_refuses_what_does_not_fit(z_shape, c_shape, dtypes, error, message):
    z, c = (kiln.mint.zeros(s, dtype=d) for s, d in zip((z_shape, c_shape), dtypes))
    with raises(error, match=message):
        kiln.mint.lstm_cell(z, c)


def test_the_shapes_of_outputs_and_states():
    x = mint.zeros(STEPS, BATCH, IN)
    out, (h, c) = LSTM(IN, HIDDEN, num_layers=3, bidirectional=True, proj_size=PROJ)(x)
    assert (out.shape, h.shape, c.shape) == ((STEPS, BATCH, 2 * PROJ), (6, BATCH, PROJ),
                                             (6, BATCH, HIDDEN))
    out, h = GRU(IN, HIDDEN, batch_first=True)(mint.zeros(BATCH, STEPS, IN))
    assert (out.shape, h.shape) == ((BATCH, STEPS, HIDDEN), (1, BATCH, HIDDEN))
    out, h = RNN(IN, HIDDEN, num_layers=2, bidirectional=True)(mint.zeros(STEPS, IN))
    assert (out.shape, h.shape) == ((STEPS, 2 * HIDDEN), (4, HIDDEN))
    h, c = LSTMCell(IN, HIDDEN)(mint.zeros(IN))
    assert (h.shape, c.shape) == ((HIDDEN,), (HIDDEN,))
    assert GRUCell(IN, HIDDEN)(mint.zeros(0, IN)).shape == (0, HIDDEN)


# ------------------------------------------------------------------------------------------------
# Parameters, initialisation, representation

def test_parameter_names_and_shapes_are_pytorchs():
    lstm = LSTM(IN, HIDDEN, num_layers=2, bidirectional=True, proj_size=PROJ)
    want = []
    for layer, in_size in ((0, IN), (1, 2 * PROJ)):
        for suffix in ("", "_reverse"):
            want += [(f"weight_ih_l{layer}{suffix}", (4 * HIDDEN, in_size)),
                     (f"weight_hh_l{layer}{suffix}", (4 * HIDDEN, PROJ)),
                     (f"bias_ih_l{layer}{suffix}", (4 * HIDDEN,)),
                     (f"bias_hh_l{layer}{suffix}", (4 * HIDDEN,)),
                     (f"weight_hr_l{layer}{suffix}", (PROJ, HIDDEN))]
    assert [(n, tuple(p.shape)) for n, p in lstm.named_parameters()] == want
    assert list(lstm.state_dict()) == [n for n, _ in want]
    assert [n for n, _ in GRU(IN, HIDDEN, bias=False).named_parameters()] == [
        "weight_ih_l0", "weight_hh_l0"]
    assert [(n, tuple(p.shape)) for n, p in GRUCell(IN, HIDDEN).named_parameters()] == [
        ("weight_ih", (3 * HIDDEN, IN)), ("weight_hh", (3 * HIDDEN, HIDDEN)),
        ("bias_ih", (3 * HIDDEN,)), ("bias_hh", (3 * HIDDEN,))]
    cell = RNNCell(IN, HIDDEN, bias=False)
    assert cell.bias_ih is None and cell.bias_hh is None
    assert list(cell.state_dict()) == ["weight_ih", "weight_hh"]


@pytest.mark.parametrize("make", [lambda: LSTM(IN, 16, num_layers=2, proj_size=PROJ),
                                  lambda: GRUCell(IN, 16), lambda: RNN(IN, 16)])
def test_initialisation_is_uniform_within_one_over_sqrt_hidden(make):
    kiln.manual_seed(0)
    module = make()
    first = [p.numpy().copy() for p in module.parameters()]
    for p in first:
        assert p.dtype == np.float32
        assert np.abs(p).max() <= 0.25 and np.abs(p).max() > 0.2  # 1 / sqrt(16)
    kiln.manual_seed(0)
    module.reset_parameters()
    for p, again in zip(first, module.parameters()):
        np.testing.assert_array_equal(p, again.numpy())


def test_repr_and_flatten_parameters():
    assert repr(LSTM(IN, HIDDEN)) == "LSTM(3, 4)"
    assert repr(LSTM(IN, HIDDEN, num_layers=2, batch_first=True, dropout=0.5,
                     bidirectional=True, proj_size=PROJ)) == (
        "LSTM(3, 4, proj_size=2, num_layers=2, batch_first=True, dropout=0.5, "
        "bidirectional=True)")
    assert repr(RNN(IN, HIDDEN, nonlinearity="relu", bias=False)) == (
        "RNN(3, 4, bias=False, nonlinearity=relu)")
    assert repr(RNNCell(IN, HIDDEN, bias=False, nonlinearity="relu")) == (
        "RNNCell(3, 4, bias=False, nonlinearity=relu)")
    assert repr(GRUCell(IN, HIDDEN)) == "GRUCell(3, 4)"
    gru = GRU(IN, HIDDEN)
    before = [p.numpy().copy() for p in gru.parameters()]
    assert gru.flatten_parameters() is None
    for p, after in zip(before, gru.parameters()):
        np.testing.assert_array_equal(p, after.numpy())


def test_copied_pickled_and_converted_layers_run(rng):
    # The layers look their weights up by name at every call, so the new Parameter objects of a
    # copy or a dtype conversion are the ones used.
    lstm = LSTM(IN, HIDDEN, num_layers=2, bidirectional=True)
    x = kiln.tensor(rng.standard_normal((STEPS, BATCH, IN)).astype(np.float32))
    want = lstm(x)[0].numpy()
    for other in (copy.deepcopy(lstm), pickle.loads(pickle.dumps(lstm))):
        np.testing.assert_array_equal(other(x)[0].numpy(), want)
    lstm.double()
    assert lstm.weight_hh_l1_reverse.dtype == kiln.float64
    np.testing.assert_allclose(lstm(x.to(kiln.float64))[0].numpy(), want, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------------------------
# Dropout between layers

def test_dropout_applies_between_layers_while_training_only(rng):
    lstm = LSTM(IN, HIDDEN, num_layers=2, dropout=1.0, dtype=kiln.float64)
    arrays = [{"input": rng.standard_normal((STEPS, BATCH, IN))} for _ in range(2)]
    # Training with p = 1: the second layer sees zeros, so its outputs and states are the same
    # for any input, while the first layer's are not.
    (out_a, (h_a, c_a)), (out_b, (h_b, c_b)) = (lstm(kiln.tensor(a["input"])) for a in arrays)
    np.testing.assert_array_equal(out_a.numpy(), out_b.numpy())
    np.testing.assert_array_equal(h_a.numpy()[1], h_b.numpy()[1])
    assert np.abs(h_a.numpy()[0] - h_b.numpy()[0]).max() > 1e-3
    # In eval mode nothing is dropped: the reference without dropout.
    lstm.eval()
    out, (h, c) = lstm(kiln.tensor(arrays[0]["input"]))
    want_out, (want_h, want_c) = ref_layer_run("LSTM", dict(num_layers=2), "seq",
                                               with_params(lstm, arrays[0]))
    np.testing.assert_allclose(out.numpy(), want_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(c.numpy(), want_c, rtol=1e-12, atol=1e-12)


def test_dropout_with_one_layer_warns():
    with pytest.warns(UserWarning, match="GRU: dropout applies between layers"):
        GRU(IN, HIDDEN, dropout=0.2)


# ------------------------------------------------------------------------------------------------
# kiln.jit

@pytest.mark.parametrize("make", [
    lambda: RNN(IN, HIDDEN, nonlinearity="relu", num_layers=2),
    lambda: LSTM(IN, HIDDEN, bidirectional=True, proj_size=PROJ, batch_first=True),
    lambda: GRU(IN, HIDDEN, num_layers=2, bidirectional=True),
], ids=["RNN", "LSTM", "GRU"])
def test_jitted_forward_and_gradients_match_eager(make, rng):
    module = make()
    x = kiln.tensor(rng.standard_normal((BATCH, 3, IN)).astype(np.float32))
    params = list(module.parameters())

    def loss(v):
        out, hx = module(v)
        return mint.sum(out) + sum(mint.sum(s) for s in as_states(hx))

    eager_out, eager_hx = module(x)
    eager_grads = kiln.grad(loss, grad_position=None, weights=params)(x)
    jitted, jitted_grad = kiln.jit(module), kiln.jit(kiln.grad(loss, grad_position=None,
                                                               weights=params))
    for _ in range(2):  # the trace, then the compiled graph
        out, hx = jitted(x)
        np.testing.assert_allclose(out.numpy(), eager_out.numpy(), rtol=1e-5, atol=1e-6)
        for got, want in zip(as_states(hx), as_states(eager_hx)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
        for got, want in zip(jitted_grad(x), eager_grads):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)


def test_jitted_cell_matches_eager(rng):
    cell = LSTMCell(IN, HIDDEN)
    x, h, c = (kiln.tensor(rng.standard_normal(s).astype(np.float32))
               for s in ((BATCH, IN), (BATCH, HIDDEN), (BATCH, HIDDEN)))
    jitted = kiln.jit(lambda *v: cell(v[0], (v[1], v[2])))
    for got, want in zip(jitted(x, h, c), cell(x, (h, c))):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------------------------
# Against PyTorch (skipped without it)

@pytest.mark.parametrize("case", LAYER_CASES, ids=case_id)
def test_layers_match_torch(torch, case, rng):
    cls, mode, kwargs, layout, with_hx = case
    kwargs = layer_kwargs(kwargs, layout)
    theirs = getattr(torch.nn, cls)(IN, HIDDEN, **kwargs).double()
    ours = LAYERS[cls](IN, HIDDEN, **kwargs, dtype=kiln.float64)
    ours.load_state_dict(theirs.state_dict())  # torch tensors load as they are
    arrays = layer_arrays(mode, kwargs, layout, with_hx, rng)
    out, states, grads = kiln_run(ours, mode, arrays)

    leaves = {n: torch.tensor(v, requires_grad=True) for n, v in arrays.items()}
    names = [n for n in ("h_0", "c_0") if n in leaves]
    hx = None if not names else leaves["h_0"] if mode != "LSTM" else (leaves["h_0"],
                                                                      leaves["c_0"])
    want_out, want_hx = theirs(leaves["input"], hx)
    want_states = (want_hx,) if mode != "LSTM" else want_hx
    (want_out.sum() + sum(s.sum() for s in want_states)).backward()
    np.testing.assert_allclose(out.numpy(), want_out.detach().numpy(), rtol=1e-10, atol=1e-12)
    for got, want in zip(states, want_states, strict=True):
        np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12)
    want_grads = {n: p.grad for n, p in theirs.named_parameters()}
    want_grads.update({n: leaf.grad for n, leaf in leaves.items()})
    assert sorted(grads) == sorted(want_grads)
    for name, want in want_grads.items():
        np.testing.assert_allclose(grads[name], want.numpy(), rtol=1e-9, atol=1e-10,
                                   err_msg=name)


@pytest.mark.parametrize("case", CELL_CASES, ids=case_id)
def test_cells_match_torch(torch, case, rng):
    cls, mode, kwargs, batched, with_hx = case
    theirs = getattr(torch.nn, cls)(IN, HIDDEN, **kwargs).double()
    ours = CELLS[cls](IN, HIDDEN, **kwargs, dtype=kiln.float64)
    ours.load_state_dict({n: v.numpy() for n, v in theirs.state_dict().items()})
    arrays = cell_arrays(mode, batched, with_hx, rng)
    _, states, grads = kiln_run(ours, mode, arrays)

    leaves = {n: torch.tensor(v, requires_grad=True) for n, v in arrays.items()}
    hx = None if not with_hx else leaves["h_0"] if mode != "LSTM" else (leaves["h_0"],
                                                                        leaves["c_0"])
    want = theirs(leaves["input"], hx)
    want_states = (want,) if mode != "LSTM" else want
    sum(s.sum() for s in want_states).backward()
    for got, expected in zip(states, want_states, strict=True):
        np.testing.assert_allclose(got.numpy(), expected.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(grads[name], p.grad.numpy(), rtol=1e-9, atol=1e-10,
                                   err_msg=name)
    for name, leaf in leaves.items():
        np.testing.assert_allclose(grads[name], leaf.grad.numpy(), rtol=1e-9, atol=1e-10,
                                   err_msg=name)


# ------------------------------------------------------------------------------------------------
# Argument errors

@pytest.mark.parametrize("make, error, message", [
    (lambda: RNN(0, HIDDEN), kiln.KilnValueError, "RNN: input_size must be at least 1, got 0"),
    (lambda: LSTM(IN, 0), kiln.KilnValueError, "LSTM: hidden_size must be at least 1, got 0"),
    (lambda: GRU(IN, HIDDEN, num_layers=0), kiln.KilnValueError,
     "GRU: num_layers must be at least 1, got 0"),
    (lambda: LSTMCell(IN, -2), kiln.KilnValueError,
     "LSTMCell: hidden_size must be at least 1, got -2"),
    (lambda: RNN(3.0, HIDDEN), kiln.KilnTypeError, "RNN: input_size must be an int, got float"),
    (lambda: RNN(IN, HIDDEN, nonlinearity="sigmoid"), kiln.KilnValueError,
     "RNN: unknown nonlinearity 'sigmoid', expected 'tanh' or 'relu'"),
    (lambda: RNNCell(IN, HIDDEN, nonlinearity="gelu"), kiln.KilnValueError,
     "RNNCell: unknown nonlinearity 'gelu'"),
    (lambda: LSTM(IN, HIDDEN, 2, dropout=1.5), kiln.KilnValueError,
     r"LSTM: dropout must be in \[0, 1\], got 1.5"),
    (lambda: GRU(IN, HIDDEN, 2, dropout=-0.1), kiln.KilnValueError,
     r"GRU: dropout must be in \[0, 1\], got -0.1"),
    (lambda: GRU(IN, HIDDEN, 2, dropout=float("nan")), kiln.KilnValueError,
     r"GRU: dropout must be in \[0, 1\], got nan"),
    (lambda: LSTM(IN, HIDDEN, 2, dropout="0.1"), kiln.KilnTypeError,
     "LSTM: expected dropout to be a real number, got str"),
    (lambda: LSTM(IN, HIDDEN, proj_size=HIDDEN), kiln.KilnValueError,
     r"LSTM: proj_size must be smaller than hidden_size \(4\), got 4"),
    (lambda: LSTM(IN, HIDDEN, proj_size=-1), kiln.KilnValueError,
     "LSTM: proj_size must be at least 0, got -1"),
    (lambda: GRU(IN, HIDDEN, bidirectional=1), kiln.KilnTypeError,
     "GRU: bidirectional must be a bool, got int"),
    (lambda: GRUCell(IN, HIDDEN, bias=None), kiln.KilnTypeError,
     "GRUCell: bias must be a bool, got NoneType"),
])
def test_constructor_errors(make, error, message):
    with pytest.raises(error, match=message):
        make()


def _zeros(*shape, dtype=kiln.float32):
    return mint.zeros(shape, dtype=dtype)


@pytest.mark.parametrize("make, args, error, message", [
    (lambda: LSTM(IN, HIDDEN), (_zeros(IN),), kiln.ShapeError,
     r"LSTM: expected an input \[seq, batch, 3\] \(batch_first=False\) or \[seq, 3\] "
     r"\(unbatched\), got \[3\]"),
    (lambda: GRU(IN, HIDDEN, batch_first=True), (_zeros(BATCH, STEPS, 5),), kiln.ShapeError,
     r"GRU: expected an input \[batch, seq, 3\] \(batch_first=True\)"),
    (lambda: RNN(IN, HIDDEN), (_zeros(1, 1, 1, IN),), kiln.ShapeError, r"got \[1, 1, 1, 3\]"),
    (lambda: RNN(IN, HIDDEN), (_zeros(0, BATCH, IN),), kiln.ShapeError,
     r"RNN: expected a sequence of at least one step, got input \[0, 2, 3\]"),
    (lambda: RNN(IN, HIDDEN), (_zeros(STEPS, BATCH, IN, dtype=kiln.float64),), kiln.DTypeError,
     r"RNN: expected input of dtype float32 \(the parameters'\), got float64"),
    (lambda: RNN(IN, HIDDEN), (np.zeros((STEPS, BATCH, IN), np.float32),), kiln.KilnTypeError,
     "RNN: expected input to be a kiln.Tensor, got ndarray"),
    (lambda: RNN(IN, HIDDEN), (_zeros(STEPS, BATCH, IN), _zeros(1, 3, HIDDEN)),
     kiln.ShapeError, r"RNN: expected h_0 of shape \[1, 2, 4\], got \[1, 3, 4\]"),
    (lambda: GRU(IN, HIDDEN, bidirectional=True), (_zeros(STEPS, IN), _zeros(2, 1, HIDDEN)),
     kiln.ShapeError, r"GRU: expected h_0 of shape \[2, 4\], got \[2, 1, 4\]"),
    (lambda: RNN(IN, HIDDEN), (_zeros(STEPS, BATCH, IN), _zeros(1, BATCH, HIDDEN,
                                                                dtype=kiln.float64)),
     kiln.DTypeError, r"RNN: expected h_0 of dtype float32"),
    (lambda: LSTM(IN, HIDDEN), (_zeros(STEPS, BATCH, IN), _zeros(1, BATCH, HIDDEN)),
     kiln.KilnTypeError, r"LSTM: expected hx to be a tuple \(h_0, c_0\), got Tensor"),
    (lambda: LSTM(IN, HIDDEN, proj_size=PROJ),
     (_zeros(STEPS, BATCH, IN), (_zeros(1, BATCH, PROJ), _zeros(1, BATCH, PROJ))),
     kiln.ShapeError, r"LSTM: expected c_0 of shape \[1, 2, 4\], got \[1, 2, 2\]"),
    (lambda: GRU(IN, HIDDEN), (_zeros(STEPS, BATCH, IN), (_zeros(1, BATCH, HIDDEN),)),
     kiln.KilnTypeError, "GRU: expected h_0 to be a kiln.Tensor, got tuple"),
    (lambda: RNNCell(IN, HIDDEN), (_zeros(1, BATCH, IN),), kiln.ShapeError,
     r"RNNCell: expected an input \[batch, 3\] or \[3\] \(unbatched\), got \[1, 2, 3\]"),
    (lambda: GRUCell(IN, HIDDEN), (_zeros(IN), _zeros(1, HIDDEN)), kiln.ShapeError,
     r"GRUCell: expected h_0 of shape \[4\], got \[1, 4\]"),
    (lambda: LSTMCell(IN, HIDDEN), (_zeros(BATCH, IN), _zeros(BATCH, HIDDEN)),
     kiln.KilnTypeError, r"LSTMCell: expected hx to be a tuple \(h_0, c_0\)"),
])
def test_forward_errors(make, args, error, message):
    module = make()
    with raises(error, match=message):
        module(*args)
