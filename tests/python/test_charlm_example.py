"""examples/train_charlm.py at tiny sizes: its custom op's gradient, its pattern pass, the jitted
training step against the eager one, and a short training run whose loss falls."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import kiln
from kiln import mint

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_charlm.py"
TINY = ["--context", "16", "--d-model", "32", "--heads", "2", "--batch", "8"]


@pytest.fixture(scope="module")
def ex():
    spec = importlib.util.spec_from_file_location("train_charlm", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def ops(ex):
    return ex.load_fused_ops()


@pytest.fixture(scope="module")
def fusion(ex, ops):
    ex.register_fusion_pass(ops)
    yield
    kiln.graph.unregister_custom_pass(ex.PASS_NAME)


def tiny_model(ex, seed=0):
    text = "the quick brown fox jumps over the lazy dog; " * 20
    vocab = ex.Vocab(text)
    cfg = ex.Config(len(vocab), context=16, d_model=32, heads=2, layers=2, batch=8)
    return text, vocab, cfg, ex.init_params(cfg, seed)


@pytest.mark.parametrize("shape", [(5, 7), (2, 3, 4)])
def test_bias_gelu_matches_numpy_and_gradcheck(ops, shape):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape) * 2
    b = rng.standard_normal(shape[-1])
    z = x + b
    from math import erf
    want = 0.5 * z * (1 + np.vectorize(erf)(z / np.sqrt(2)))
    got = ops.bias_gelu(kiln.tensor(x.astype(np.float32)), kiln.tensor(b.astype(np.float32)))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    assert kiln.testing.gradcheck(ops.bias_gelu, (kiln.tensor(x).requires_grad_(),
                                                  kiln.tensor(b).requires_grad_()))


def test_bias_gelu_backward_is_the_fused_gradient_and_differentiable_again(ops):
    # BiasGelu's rule calls BiasGeluBackward (one pass); its own rule gives second derivatives.
    rng = np.random.default_rng(1)
    x, b = rng.standard_normal((6, 40)) * 3, rng.standard_normal(40)
    g = rng.standard_normal((6, 40))
    from math import erfc
    z = x + b
    want = g * (0.5 * np.vectorize(erfc)(-z / np.sqrt(2)) + z * np.exp(-0.5 * z * z)
                / np.sqrt(2 * np.pi))
    f32 = [kiln.tensor(a.astype(np.float32)) for a in (g, x, b)]
    np.testing.assert_allclose(ops.bias_gelu_backward(*f32).numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ops.bias_gelu_backward(*map(kiln.tensor, (g, x, b))).numpy(), want,
                               rtol=1e-12, atol=1e-12)
    assert kiln.testing.gradgradcheck(ops.bias_gelu, (kiln.tensor(x[:2, :5]).requires_grad_(),
                                                      kiln.tensor(b[:5]).requires_grad_()))
    # At the infinities and far out, g * gelu'(z) is g or 0 within 1e-20 (not inf * 0, nor the
    # float kernel's clamped z phi(z) growing with z); nan stays nan.
    z = np.array([[np.inf, -np.inf, 1e30, -1e30, 12.0, -12.0, np.nan]])
    for dt in (np.float32, np.float64):
        ones, zeros = np.ones_like(z, dtype=dt), np.zeros(z.shape[1], dtype=dt)
        got = ops.bias_gelu_backward(kiln.tensor(ones), kiln.tensor(z.astype(dt)),
                                     kiln.tensor(zeros)).numpy()
        np.testing.assert_allclose(got[0, :6], [1, 0, 1, 0, 1, 0], rtol=0, atol=1e-20)
        assert np.isnan(got[0, 6])
    with pytest.raises(kiln.ShapeError, match=r"BiasGeluBackward: expected g of x's shape"):
        ops.bias_gelu_backward(mint.zeros((3, 4)), mint.zeros((2, 4)), mint.zeros((4,))).numpy()


def test_bias_gelu_rejects_a_bias_of_the_wrong_length(ops):
    with pytest.raises(kiln.ShapeError, match=r"BiasGelu: expected x \[\.\.\., N\] and b \[N\]"):
        ops.bias_gelu(mint.zeros((2, 4)), mint.zeros((3,))).numpy()


def test_fusion_pass_keeps_meaning(ex, fusion):
    report = kiln.graph.verify_pass(ex.PASS_NAME, trials=20)
    assert report.ok, str(report)


def test_jitted_loss_and_gradients_equal_eager(ex, ops, fusion):
    _, vocab, cfg, params = tiny_model(ex)
    rng = np.random.default_rng(1)
    window = rng.integers(0, cfg.vocab, size=(cfg.batch, cfg.context + 1))
    idx, targets = kiln.tensor(window[:, :-1]), kiln.tensor(window[:, 1:])
    weights = list(params.values())

    def loss_and_grads(act):
        value_and_grad = kiln.value_and_grad(ex.make_loss(params, cfg, act), grad_position=None,
                                             weights=weights)

        def f(idx, targets):
            loss, grads = value_and_grad(idx, targets)
            return (loss, *grads)

        return f

    eager = loss_and_grads(lambda h, b: ops.bias_gelu(h, b))(idx, targets)
    # The jitted graph as the pass makes it (composite gelu(h + b) -> BiasGelu), and with the
    # custom op called directly (its gradient rule traced into the graph).
    composite = kiln.jit(loss_and_grads(ex.composite_gelu), backend="kiln_cpu")
    direct = kiln.jit(loss_and_grads(lambda h, b: ops.bias_gelu(h, b)), backend="kiln_cpu")
    for f in (composite, direct):
        got = f(idx, targets)
        assert len(got) == len(eager) == len(weights) + 1
        for name, e, g in zip(["loss", *params], eager, got):
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)
    assert ex.pass_matches(composite) == cfg.layers
    assert "BiasGelu" in composite.optimized_graph(idx, targets)


def test_training_run_loss_falls_and_pass_fires(ex, fusion, tmp_path):
    text_file = tmp_path / "text.txt"
    text_file.write_text("to be or not to be, that is the question. " * 40)
    args = ex.parse_args(["--text", str(text_file), "--steps", "60", "--seconds", "0",
                          "--lr", "1e-2", "--sample", "40", "--verify-trials", "10",
                          "--log-every", "20", *TINY])
    lines = []
    result = ex.train(args, log=lines.append)
    assert result["steps"] == 60
    assert result["pass_matches"] == 2
    assert result["verified"]
    losses = result["losses"]
    assert losses[0] > np.log(result["vocab"]) - 0.5, losses[:3]
    assert np.mean(losses[-10:]) < losses[0] - 1.0, (losses[0], losses[-10:])
    assert len(result["sample"]) == 40 and set(result["sample"]) <= set(text_file.read_text())
    assert any("rewrote gelu(x + b) 2 times" in line for line in lines)


def test_eager_run_uses_the_custom_op(ex):
    args = ex.parse_args(["--steps", "3", "--seconds", "0", "--eager", "--sample", "0",
                          "--text", str(EXAMPLE), *TINY])
    result = ex.train(args, log=lambda *a: None)
    assert result["act"] == "fused" and result["steps"] == 3
    assert all(np.isfinite(result["losses"]))
