"""kiln.utils.checkpoint: gradients against the plain calls in both variants, the replayed
random numbers, outputs, options, and the error paths."""

import warnings

import numpy as np
import pytest

import kiln
from kiln import nn
from kiln.utils.checkpoint import CheckpointError, checkpoint, checkpoint_sequential


def _net():
    kiln.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 3))


def _grads(tensors):
    return [None if t.grad is None else t.grad.numpy().copy() for t in tensors]


def _clear(tensors):
    for t in tensors:
        t.grad = None


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoint_gives_the_plain_gradients(use_reentrant):
    net = _net()
    x = kiln.mint.randn([6, 5]).requires_grad_(True)
    leaves = [x, *net.parameters()]
    (net(x) ** 2).sum().backward()
    expected = _grads(leaves)
    _clear(leaves)
    y = checkpoint(net, x, use_reentrant=use_reentrant)
    np.testing.assert_allclose(y.numpy(), net(x).detach().numpy(), rtol=1e-6)
    (y ** 2).sum().backward()
    for got, want in zip(_grads(leaves), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_non_reentrant_reaches_parameters_when_no_input_requires_grad():
    net = _net()
    x = kiln.mint.randn([3, 5])
    params = list(net.parameters())
    expected = kiln.autograd.grad(net(x).sum(), params)
    got = kiln.autograd.grad(checkpoint(net, x, use_reentrant=False).sum(), params)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-5, atol=1e-6)


def test_reentrant_warns_when_no_input_requires_grad():
    net = _net()
    with pytest.warns(UserWarning, match="none of the inputs requires grad"):
        y = checkpoint(net, kiln.mint.randn([3, 5]), use_reentrant=True)
    assert not y.requires_grad


def test_checkpoint_replays_the_random_numbers():
    drop = nn.Dropout(0.5)
    x = kiln.mint.randn([64]).requires_grad_(True)
    y = checkpoint(lambda v: drop(v) * v, x, use_reentrant=False)
    y.sum().backward()
    kept = (y.detach().numpy() != 0)
    # d/dx (mask * x * x / (1 - p)) = 2 * mask * x / (1 - p): zero exactly where the mask is.
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept, 4 * x.numpy(), 0.0), rtol=1e-5)


def test_checkpoint_tuple_outputs_kwargs_and_non_tensor_values():
    w = nn.Parameter(kiln.mint.randn([4]))
    x = kiln.mint.randn([4]).requires_grad_(True)

    def f(a, *, scale):
        return a * w * scale, "tag", a.sum()

    prod, tag, total = checkpoint(f, x, scale=kiln.tensor(2.0), use_reentrant=False)
    assert tag == "tag"
    (prod.sum() + total).backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * w.detach().numpy() + 1, rtol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), 2 * x.detach().numpy(), rtol=1e-6)


def test_checkpoint_context_fn_and_the_decorator_form():
    entered = []

    class Note:
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            entered.append(self.name)

        def __exit__(self, *exc):
            return False

    @checkpoint(use_reentrant=False, context_fn=lambda: (Note("forward"), Note("recompute")))
    def f(a):
        return (a * a).sum()

    x = kiln.mint.randn([3]).requires_grad_(True)
    f(x).backward()
    assert entered == ["forward", "recompute"]
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy(), rtol=1e-6)


def test_checkpoint_determinism_check():
    calls = []

    def changing(a):
        calls.append(1)
        return a[: len(calls) + 1] * 2

    x = kiln.mint.randn([4]).requires_grad_(True)
    y = checkpoint(changing, x, use_reentrant=False)
    with pytest.raises(CheckpointError, match="recomputation"):
        y.sum().backward()
        kiln.runtime.synchronize()
    calls.clear()
    y = checkpoint(changing, x, use_reentrant=False, determinism_check="none")
    assert y.shape == (2,)


def test_checkpoint_argument_errors():
    x = kiln.mint.randn([2]).requires_grad_(True)
    with pytest.warns(UserWarning, match="pass use_reentrant explicitly"):
        checkpoint(lambda v: v * 2, x)
    with pytest.raises(kiln.KilnValueError, match="keyword arguments"):
        checkpoint(lambda v, s: v * s, x, s=2.0, use_reentrant=True)
    with pytest.raises(kiln.KilnValueError, match="context_fn needs use_reentrant=False"):
        checkpoint(lambda v: v, x, use_reentrant=True, context_fn=lambda: (None, None))
    with pytest.raises(kiln.KilnValueError, match="determinism_check"):
        checkpoint(lambda v: v, x, use_reentrant=False, determinism_check="strict")
    with pytest.raises(kiln.KilnTypeError, match="callable"):
        checkpoint(3, x, use_reentrant=False)
    with pytest.raises(kiln.KilnTypeError, match="tensor or a tuple"):
        checkpoint(lambda v: 3, x, use_reentrant=False)


@pytest.mark.parametrize("segments", [1, 2, 3])
@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoint_sequential(segments, use_reentrant):
    kiln.manual_seed(1)
    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2))
    x = kiln.mint.randn([3, 4]).requires_grad_(True)
    leaves = [x, *net.parameters()]
    net(x).sum().backward()
    expected = _grads(leaves)
    _clear(leaves)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checkpoint_sequential(net, segments, x, use_reentrant=use_reentrant).sum().backward()
    for got, want in zip(_grads(leaves), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(kiln.KilnValueError, match="segments"):
        checkpoint_sequential(net, 0, x, use_reentrant=use_reentrant)


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoint_of_a_function_passing_its_input_through(use_reentrant):
    for function in (lambda v: v, lambda v: (v, v * 2)):
        x = kiln.tensor([1.0, 2.0]).requires_grad_(True)
        y = checkpoint(function, x, use_reentrant=use_reentrant)
        first = y if isinstance(y, kiln.Tensor) else y[0]
        (first * 3).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])
