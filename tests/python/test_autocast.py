"""kiln.autocast / kiln.amp (python/kiln/amp.py over kiln/autocast.h): which ops run in which
dtype inside the block, a training step's values and gradients against PyTorch's autocast, the
context manager and decorator forms, thread-locality, custom op lists, kiln.jit keying on the
state, and the argument errors."""

import threading

import numpy as np
import pytest

import kiln
from conftest import raises
from kiln.errors import KilnTypeError, KilnValueError

mint = kiln.mint
F = kiln.nn.functional


def _tensor(rng, *shape):
    return kiln.tensor(rng.standard_normal(shape).astype(np.float32))


@pytest.mark.parametrize("dtype", [kiln.bfloat16, kiln.float16])
def test_products_and_convolutions_run_in_the_autocast_dtype(dtype, rng):
    x, w, b = _tensor(rng, 4, 8), _tensor(rng, 3, 8), _tensor(rng, 3)
    image, kernel = _tensor(rng, 1, 2, 6, 6), _tensor(rng, 3, 2, 3, 3)
    with kiln.autocast("cpu", dtype=dtype):
        assert kiln.amp.is_autocast_enabled() and kiln.amp.get_autocast_dtype() == dtype
        y = F.linear(x, w, b)
        results = [y, x @ w.T, mint.bmm(x.unsqueeze(0), w.T.unsqueeze(0)),
                   F.conv2d(image, kernel, padding=1), F.conv1d(image[:, :, 0], kernel[:, :, 0]),
                   F.conv_transpose2d(image, kernel.transpose(0, 1))]
        assert all(r.dtype == dtype for r in results)
        # Left alone: elementwise ops, float64, integers.
        assert mint.exp(x).dtype == kiln.float32
        assert (x.to(kiln.float64) @ w.T.to(kiln.float64)).dtype == kiln.float64
        assert (mint.ones((2, 2), dtype=kiln.int64) @ mint.ones((2, 2), dtype=kiln.int64)).dtype \
            == kiln.int64
        # An elementwise op of the lower-precision result and a float32 tensor promotes.
        assert (y + x[:, :3]).dtype == kiln.float32
    assert not kiln.amp.is_autocast_enabled()
    want = F.linear(x.to(dtype), w.to(dtype), b.to(dtype))
    np.testing.assert_array_equal(y.to(kiln.float32).numpy(), want.to(kiln.float32).numpy())


def test_losses_and_factorizations_run_in_float32(rng):
    logits = _tensor(rng, 5, 4).to(kiln.bfloat16)
    target = kiln.tensor(np.array([0, 1, 2, 3, 0]))
    spd = _tensor(rng, 3, 3)
    spd = (spd @ spd.T + mint.eye(3) * 3).to(kiln.bfloat16)
    with kiln.autocast():
        assert F.cross_entropy(logits, target).dtype == kiln.float32
        assert F.nll_loss(F.log_softmax(logits, 1), target).dtype == kiln.float32
        assert F.mse_loss(logits, logits * 2).dtype == kiln.float32
        assert kiln.linalg.cholesky(spd).dtype == kiln.float32
        # Composed losses run in their inputs' dtype.
        assert F.l1_loss(logits, logits * 2).dtype == kiln.bfloat16
    np.testing.assert_allclose(
        float(F.cross_entropy(logits.to(kiln.float32), target)),
        float(kiln.autocast()(F.cross_entropy)(logits, target)), rtol=0)


def test_a_training_step_matches_pytorchs_autocast(rng):
    torch = pytest.importorskip("torch")
    ours = kiln.nn.Sequential(kiln.nn.Linear(8, 16), kiln.nn.ReLU(), kiln.nn.Linear(16, 4))
    theirs = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    ours.load_state_dict({k: kiln.tensor(v.detach().numpy()) for k, v in
                          theirs.state_dict().items()})
    x = rng.standard_normal((6, 8)).astype(np.float32)
    target = np.array([0, 1, 2, 3, 0, 1])
    with kiln.autocast("cpu", dtype=kiln.bfloat16):
        logits = ours(kiln.tensor(x))
        loss = F.cross_entropy(logits, kiln.tensor(target))
    loss.backward()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        their_logits = theirs(torch.tensor(x))
        their_loss = torch.nn.functional.cross_entropy(their_logits, torch.tensor(target))
    their_loss.backward()
    assert logits.dtype == kiln.bfloat16 and loss.dtype == kiln.float32
    np.testing.assert_allclose(logits.to(kiln.float32).numpy(),
                               their_logits.detach().float().numpy(), rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(float(loss), float(their_loss.detach()), rtol=1e-2)
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        assert p.grad.dtype == kiln.float32, name
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=2e-2, atol=2e-2,
                                   err_msg=name)


def test_layers_chain_through_mixed_dtypes_as_under_pytorchs_autocast(rng):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((2, 5, 16)).astype(np.float32)
    cells = {"lstm": (kiln.nn.LSTM(16, 8, batch_first=True),
                      torch.nn.LSTM(16, 8, batch_first=True)),
             "gru": (kiln.nn.GRU(16, 8, batch_first=True), torch.nn.GRU(16, 8, batch_first=True)),
             # Training mode without dropout: PyTorch's eval mode takes its fused fast path, whose
             # result is bfloat16 where its layer-by-layer path's (and Kiln's) is float32.
             "encoder": (kiln.nn.TransformerEncoderLayer(16, 4, 32, 0.0, batch_first=True),
                         torch.nn.TransformerEncoderLayer(16, 4, 32, 0.0, batch_first=True))}
    for name, (ours, theirs) in cells.items():
        ours.load_state_dict({k: kiln.tensor(v.detach().numpy())
                              for k, v in theirs.state_dict().items()})
        with kiln.autocast():
            got = ours(kiln.tensor(x))
        with torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad():
            want = theirs(torch.tensor(x))
        got, want = (got[0], want[0]) if isinstance(got, tuple) else (got, want)
        assert got.dtype.name == str(want.dtype).split(".")[1], name
        np.testing.assert_allclose(got.to(kiln.float32).numpy(), want.float().numpy(),
                                   rtol=3e-2, atol=3e-2, err_msg=name)


def test_attention_rounds_its_inputs_to_the_autocast_dtype(rng):
    q, k, v = (_tensor(rng, 2, 3, 5, 4) for _ in range(3))
    mask = kiln.tensor(rng.standard_normal((5, 5)).astype(np.float32))
    for kwargs in ({}, {"attn_mask": mask}, {"is_causal": True, "scale": 0.3}):
        with kiln.autocast():
            got = F.scaled_dot_product_attention(q, k, v, **kwargs)
        want = F.scaled_dot_product_attention(q.to(kiln.bfloat16), k.to(kiln.bfloat16),
                                              v.to(kiln.bfloat16), **kwargs)
        assert got.dtype == kiln.bfloat16
        np.testing.assert_array_equal(got.to(kiln.float32).numpy(), want.to(kiln.float32).numpy())
    torch = pytest.importorskip("torch")
    tq, tk, tv = (torch.tensor(t.numpy()) for t in (q, k, v))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        theirs = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv)
    with kiln.autocast():
        ours = F.scaled_dot_product_attention(q, k, v)
    assert str(theirs.dtype) == "torch.bfloat16"
    np.testing.assert_allclose(ours.to(kiln.float32).numpy(), theirs.float().numpy(), rtol=2e-2,
                               atol=2e-2)


def test_backward_inside_the_block_computes_in_the_forwards_dtypes(rng):
    w = kiln.nn.Parameter(_tensor(rng, 3, 8).to(kiln.float64))
    x = _tensor(rng, 4, 8).to(kiln.float64)

    def grad_of_w():
        loss = mint.sum(mint.tanh(x @ w.T) @ mint.ones((3, 2), dtype=kiln.float64))
        return kiln.autograd.grad(loss, w)[0]

    outside = grad_of_w()
    with kiln.autocast():
        inside = grad_of_w()
    assert inside.dtype == kiln.float64
    np.testing.assert_array_equal(inside.numpy(), outside.numpy())


def test_what_autocast_leaves_alone_or_keeps_in_float32(rng):
    x, w = _tensor(rng, 4, 8), _tensor(rng, 3, 8)
    a = _tensor(rng, 6, 4)
    b = _tensor(rng, 6, 2)
    want = kiln.linalg.lstsq(a, b).solution
    with kiln.autocast():
        # A float64 operand keeps the product as it is (no rounding before float64).
        got = x.to(kiln.float64) @ w.T
        assert got.dtype == kiln.float64
        np.testing.assert_array_equal(got.numpy(), x.numpy().astype(np.float64) @
                                      w.numpy().T.astype(np.float64))
        # kiln.linalg in float32, the products inside composed functions too.
        solution = kiln.linalg.lstsq(a, b).solution
        assert solution.dtype == kiln.float32
        np.testing.assert_array_equal(solution.numpy(), want.numpy())
        assert kiln.linalg.lstsq(a.to(kiln.bfloat16), b).solution.dtype == kiln.float32
        # mm / addmm take a bfloat16 and a float32 operand, as torch's do there.
        h = x.to(kiln.bfloat16)
        assert mint.mm(h, w.T).dtype == kiln.bfloat16
        assert mint.addmm(mint.zeros((4, 3)), h, w.T).dtype == kiln.bfloat16
        # A transposed convolution's bias joins its result's dtype (PyTorch's).
        layer = kiln.nn.ConvTranspose2d(2, 3, 3)
        assert layer(_tensor(rng, 1, 2, 4, 4)).dtype == kiln.bfloat16
    with raises(kiln.KilnValueError, match="Cast is how autocast converts inputs"):
        kiln.amp.set_autocast_policy("Cast", "float32")


def test_checkpoint_recomputes_under_the_forwards_autocast(rng):
    from kiln.utils.checkpoint import checkpoint
    layer, x = kiln.nn.Linear(4, 4), _tensor(rng, 2, 4)
    for reentrant in (False, True):
        layer.zero_grad()
        with kiln.autocast():
            y = checkpoint(layer, x.detach().requires_grad_(), use_reentrant=reentrant)
        assert y.dtype == kiln.bfloat16
        y.float().sum().backward()
        got = layer.weight.grad.numpy().copy()
        layer.zero_grad()
        with kiln.autocast():
            y = layer(x)
        y.float().sum().backward()
        np.testing.assert_array_equal(got, layer.weight.grad.numpy())


def test_a_graph_replayed_op_by_op_keeps_its_traces_dtypes(rng):
    a = _tensor(rng, 4, 4) + mint.eye(4) * 4

    def gradient(m):
        return kiln.grad(lambda v: mint.sum(kiln.linalg.inv(v) @ v.T))(m)

    jitted = kiln.jit(gradient, backend="reference")
    with kiln.autocast():
        want, got = gradient(a), jitted(a)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_the_decorator_and_nesting(rng):
    x = _tensor(rng, 2, 2)

    @kiln.autocast(dtype=kiln.float16)
    def half(v):
        return v @ v

    assert half(x).dtype == kiln.float16 and (x @ x).dtype == kiln.float32
    assert kiln.autocast.__name__ == "autocast" and half.__name__ == "half"
    with kiln.autocast():
        with kiln.autocast(enabled=False):
            assert (x @ x).dtype == kiln.float32
        assert (x @ x).dtype == kiln.bfloat16
        assert half(x).dtype == kiln.float16
        assert (x @ x).dtype == kiln.bfloat16  # the decorator restored the outer state
    block = kiln.autocast()
    with block:
        with block:  # the same object entered again
            assert kiln.amp.is_autocast_enabled()
        assert kiln.amp.is_autocast_enabled()
    assert not kiln.amp.is_autocast_enabled()


def test_the_state_is_the_calling_threads(rng):
    x = _tensor(rng, 2, 2)
    seen = {}

    def other():
        seen["enabled"] = kiln.amp.is_autocast_enabled()
        seen["dtype"] = (x @ x).dtype

    with kiln.autocast():
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert seen == {"enabled": False, "dtype": kiln.float32}


def test_a_jitted_function_runs_the_graph_of_its_autocast_state(rng):
    a, b = _tensor(rng, 2, 3), _tensor(rng, 3, 4)
    f = kiln.jit(lambda u, v: mint.relu(u @ v))
    assert f(a, b).dtype == kiln.float32
    with kiln.autocast():
        got = f(a, b)
        assert got.dtype == kiln.bfloat16
    want = mint.relu(a.to(kiln.bfloat16) @ b.to(kiln.bfloat16))
    np.testing.assert_array_equal(got.to(kiln.float32).numpy(), want.to(kiln.float32).numpy())
    assert f(a, b).dtype == kiln.float32
    hits, misses, _ = f.cache_info()
    assert (hits, misses) == (1, 2)


def test_custom_op_lists(rng):
    x = _tensor(rng, 3)
    assert kiln.amp.autocast_policy("MatMul") == "lower_precision"
    assert kiln.amp.autocast_policy("CrossEntropy") == "float32"
    assert kiln.amp.autocast_policy("Sin") is None
    kiln.amp.set_autocast_policy("Sin", "lower_precision")
    try:
        with kiln.autocast():
            assert mint.sin(x).dtype == kiln.bfloat16
    finally:
        kiln.amp.set_autocast_policy("Sin", None)
    with kiln.autocast():
        assert mint.sin(x).dtype == kiln.float32


@pytest.mark.parametrize("call, error, message", [
    (lambda: kiln.autocast("cuda"), KilnValueError, "expected device_type 'cpu'"),
    (lambda: kiln.autocast(kiln.bfloat16), KilnValueError, "expected device_type 'cpu'"),
    (lambda: kiln.autocast(dtype=kiln.float32), KilnValueError,
     "expected dtype kiln.bfloat16 or kiln.float16"),
    (lambda: kiln.autocast(enabled=1), KilnTypeError, "expected enabled to be a bool"),
    (lambda: kiln.autocast(cache_enabled="yes"), KilnTypeError, "cache_enabled"),
    (lambda: kiln.autocast()(3), KilnTypeError, "expected a function to decorate"),
    (lambda: kiln.amp.is_autocast_enabled("cuda"), KilnValueError, "device_type 'cpu'"),
    (lambda: kiln.amp.set_autocast_policy("MatMul", "half"), KilnValueError,
     "expected policy 'lower_precision', 'float32' or None"),
    (lambda: kiln.amp.set_autocast_policy("", "float32"), KilnTypeError, "expected an op name"),
    (lambda: kiln.amp.autocast_policy(3), KilnTypeError, "expected an op name"),
])
def test_argument_errors(call, error, message):
    with raises(error, match=message):
        call()
    assert not kiln.amp.is_autocast_enabled()
    assert kiln.amp.autocast_policy("MatMul") == "lower_precision"
