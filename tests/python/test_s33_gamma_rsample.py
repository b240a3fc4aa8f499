"""Gamma.rsample: the implicit reparametrisation gradient of a gamma draw in its concentration
(Note [Gamma's implicit gradient] in kiln/distributions/continuous.py), against a dense NumPy
quadrature of its definition, against PyTorch's _standard_gamma_grad, and through rsample."""

import math

import numpy as np
import pytest

import kiln
from conftest import t
from kiln import distributions as D
from kiln.distributions.continuous import _standard_gamma_grad


def digamma(a):
    """The digamma function for a > 0: the recurrence up to 10, then the asymptotic series."""
    shift = 0.0
    while a < 10:
        shift -= 1 / a
        a += 1
    inv = 1 / (a * a)
    return shift + math.log(a) - 0.5 / a - inv * (1 / 12 - inv * (1 / 120 - inv * (
        1 / 252 - inv * (1 / 240 - inv / 132))))


def reference_grad(a, x, pieces=3000):
    """dx/da = -(dP(a, x)/da) / p(x; a) by composite 20-point Gauss-Legendre quadrature of
    -x^(1-a) e^x int_0^x (log u - psi(a)) u^(a-1) e^-u du over geometrically spaced pieces,
    written for x < a over v = log(x / u) and for x >= a over s = u - x (the upper integral, equal
    and of opposite sign), so that no term overflows."""
    psi = digamma(a)
    nodes, weights = np.polynomial.legendre.leggauss(20)
    end = 60 / a + 60 if x < a else 80 + 40 * math.sqrt(a) + 2 * x
    edges = np.concatenate([[0.0], np.geomspace(1e-12, end, pieces)])
    low, high = edges[:-1, None], edges[1:, None]
    z = (low + high) / 2 + (high - low) / 2 * nodes
    if x < a:
        f = (math.log(x) - psi - z) * np.exp(-a * z - x * np.expm1(-z))
        return -x * np.sum((high - low) / 2 * weights * f)
    f = (np.log(x + z) - psi) * np.exp((a - 1) * np.log1p(z / x) - z)
    return np.sum((high - low) / 2 * weights * f)


def grid():
    """(a, x) pairs from a = 1e-3 to 1e6, x from 1e-30 to both tails of Gamma(a)."""
    pairs = []
    for a in (1e-3, 0.05, 0.5, 0.999, 1.0, 1.7, 4.0, 30.0, 800.0, 1e6):
        spread = math.sqrt(a)
        for x in (1e-30, 1e-4, 0.3, 0.999, 1.0, 1.001, 3.0, 25.0, 0.5 * a, a - 1, a, a + 1,
                  a + 6 * spread, max(a - 6 * spread, 1e-3), 3 * a):
            if x > 0:
                pairs.append((a, float(x)))
    return pairs


def test_gradient_matches_a_dense_quadrature():
    a, x = (np.array(v) for v in zip(*grid()))
    got = _standard_gamma_grad(t(a), t(x)).numpy()
    want = np.array([reference_grad(p, q) for p, q in zip(a, x)])
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=0)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
def test_gradient_matches_torch_on_gamma_samples(torch, dtype, rng):
    a = rng.uniform(0.05, 50, size=400)
    x = rng.gamma(a)
    a, x = t(a, dtype), t(x, dtype)
    got = _standard_gamma_grad(a, x)
    assert got.dtype == dtype
    want = torch._standard_gamma_grad(torch.tensor(a.numpy()), torch.tensor(x.numpy()))
    # PyTorch's series and rational approximations are good to about 5e-4.
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-3, atol=0)


def test_rsample_differentiates_in_concentration_and_rate(torch, rng):
    concentration = t(rng.uniform(0.2, 6, size=(2, 3))).requires_grad_()
    rate = t(rng.uniform(0.5, 3, size=3)).requires_grad_()
    gamma = D.Gamma(concentration, rate)
    assert gamma.has_rsample
    value = gamma.rsample((500,))
    assert tuple(value.shape) == (500, 2, 3) and value.requires_grad
    upstream = rng.standard_normal((500, 2, 3))
    grad_c, grad_r = kiln.autograd.grad(value, [concentration, rate], t(upstream))
    # value = x / rate with x a standard gamma draw: d/da = dx/da / rate, d/drate = -x / rate^2.
    x = value.detach().numpy() * rate.detach().numpy()
    tc = torch.tensor(concentration.detach().numpy()).expand(500, 2, 3)
    dx_da = torch._standard_gamma_grad(tc, torch.tensor(x)).numpy()
    r = rate.detach().numpy()
    np.testing.assert_allclose(grad_c.numpy(), (upstream * dx_da / r).sum(0), rtol=1e-3)
    np.testing.assert_allclose(grad_r.numpy(), (-upstream * x / r ** 2).sum((0, 1)), rtol=1e-9)


def test_rsample_mean_gradient_is_unbiased():
    # E[x / rate] = a / rate, so the gradient of the sample mean in a tends to 1 / rate.
    kiln.manual_seed(3)
    concentration = t([0.3, 2.0, 15.0]).requires_grad_()
    gamma = D.Gamma(concentration, 2.0)
    (grad,) = kiln.autograd.grad(kiln.mint.mean(gamma.rsample((40000,)), 0).sum(),
                                 [concentration])
    np.testing.assert_allclose(grad.numpy(), [0.5, 0.5, 0.5], rtol=0.03)


def test_sample_has_no_gradient_and_stays_positive():
    gamma = D.Gamma(t([1e-3, 1.0]).requires_grad_(), t([1e30, 1.0]))
    draws = gamma.sample((200,))
    assert not draws.requires_grad
    smallest = draws.numpy().min()
    assert smallest >= np.finfo(np.float64).tiny
    value = gamma.rsample((200,))
    assert value.numpy().min() >= np.finfo(np.float64).tiny
    (grad,) = kiln.autograd.grad(value.sum(), [gamma.concentration])
    assert np.all(np.isfinite(grad.numpy()))
