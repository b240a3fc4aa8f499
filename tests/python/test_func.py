"""kiln.func.functional_call: results and gradients against the plain calls, the restoring of
the cell's own tensors, tied weights, and the error paths."""

import numpy as np
import pytest

import kiln
from kiln import nn
from kiln.func import functional_call


def _net():
    kiln.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 3))


def test_functional_call_uses_the_given_tensors_and_restores_the_cells():
    net = _net()
    x = kiln.mint.randn([2, 5])
    own = dict(net.named_parameters())
    doubled = {n: p.detach() * 2 for n, p in own.items()}
    out = functional_call(net, doubled, (x,))
    w0, b0, w2, b2 = (doubled[k].numpy() for k in ("0.weight", "0.bias", "2.weight", "2.bias"))
    expected = np.tanh(x.numpy() @ w0.T + b0) @ w2.T + b2
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert all(p is own[n] for n, p in net.named_parameters())
    np.testing.assert_allclose(net(x).numpy(), functional_call(net, own, x).numpy())


def test_functional_call_differentiates_through_computed_tensors():
    net = _net()
    x = kiln.mint.randn([3, 5])
    w = net[0].weight.detach().requires_grad_(True)
    functional_call(net, {"0.weight": w * 3.0}, (x,)).sum().backward()
    assert net[0].weight.grad is None
    scaled = _net()
    with kiln.no_grad():
        scaled[0].weight.mul_(3.0)
    # d/dw f(3w) = 3 f'(3w)
    expected = 3.0 * kiln.autograd.grad(scaled(x).sum(), [scaled[0].weight])[0].numpy()
    np.testing.assert_allclose(w.grad.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_functional_call_takes_a_tuple_of_dicts_and_buffers():
    bn = nn.BatchNorm1d(3)
    x = kiln.mint.randn([4, 3])
    params = {n: p.detach() for n, p in bn.named_parameters()}
    buffers = {n: b.clone() for n, b in bn.named_buffers()}
    functional_call(bn, (params, buffers), (x,))
    assert int(buffers["num_batches_tracked"].item()) == 1       # written back, as PyTorch's
    assert int(bn.num_batches_tracked.item()) == 0
    np.testing.assert_allclose(buffers["running_mean"].numpy(), 0.1 * x.numpy().mean(0),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(bn.running_mean.numpy(), np.zeros(3, np.float32))


def test_functional_call_ties_weights():
    class Tied(nn.Cell):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(2, 2, bias=False)
            self.b = nn.Linear(2, 2, bias=False)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    net = Tied()
    x = kiln.mint.randn([1, 2])
    w = kiln.mint.randn([2, 2])
    out = functional_call(net, {"a.weight": w}, x)
    np.testing.assert_allclose(out.numpy(), x.numpy() @ w.numpy().T @ w.numpy().T, rtol=1e-5)
    untied = functional_call(net, {"a.weight": w}, x, tie_weights=False)
    expected = x.numpy() @ w.numpy().T @ net.a.weight.numpy().T
    np.testing.assert_allclose(untied.numpy(), expected, rtol=1e-5)
    with pytest.raises(kiln.KilnValueError, match="tied"):
        functional_call(net, {"a.weight": w, "b.weight": w * 2}, x)


def test_functional_call_errors_leave_the_cell_intact():
    net = _net()
    x = kiln.mint.randn([2, 5])
    own = dict(net.named_parameters())
    with pytest.raises(kiln.KilnValueError, match="missing key.*'2.bias'"):
        functional_call(net, {n: p for n, p in own.items() if n != "2.bias"}, x, strict=True)
    with pytest.raises(kiln.KilnValueError, match="unexpected key.*'extra'"):
        functional_call(net, {**own, "extra": x}, x, strict=True)
    with pytest.raises(kiln.KilnValueError, match="multiple dictionaries"):
        functional_call(net, ({"0.bias": own["0.bias"]}, {"0.bias": own["0.bias"]}), x)
    with pytest.raises(kiln.KilnTypeError, match="kiln.Tensor for '0.weight'"):
        functional_call(net, {"0.weight": 1.0}, x)
    with pytest.raises(kiln.KilnTypeError, match="kiln.nn.Cell"):
        functional_call(lambda v: v, {}, x)
    with pytest.raises(kiln.ShapeError):  # the call itself fails: the weights still come back
        functional_call(net, {"0.weight": kiln.mint.randn([4, 7])}, x)
    assert all(p is own[n] for n, p in net.named_parameters())


def test_functional_call_sets_unknown_names_as_attributes_and_passes_kwargs():
    class Scaled(nn.Cell):
        def forward(self, x, offset=0.0):
            return x * getattr(self, "scale", 1.0) + offset

    cell = Scaled()
    x = kiln.mint.ones([2])
    out = functional_call(cell, {"scale": kiln.tensor(3.0)}, x, {"offset": 1.0})
    np.testing.assert_allclose(out.numpy(), 4.0)
    assert not hasattr(cell, "scale")
