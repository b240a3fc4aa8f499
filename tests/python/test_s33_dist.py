"""Beta.rsample and Dirichlet.rsample (gamma draws normalised, differentiated through Gamma's
implicit gradient), Dirichlet's mode and errors, LowRankMultivariateNormal's dense matrices,
samples, gradients and errors, and MultivariateNormal's three parametrisations against one
another. Log-probabilities, moments, entropies, KL divergences and expand of Dirichlet and
LowRankMultivariateNormal are in test_distributions.py's tables.

Reparametrised gradients are checked as estimates of the gradient of an expectation: each of N
draws gets its own copy of the parameters, so the gradient of the sum holds one estimate per
draw, whose mean must be within five standard errors of the closed form's derivative."""

import math

import numpy as np
import pytest

import kiln
from conftest import t
from kiln import distributions as D
from kiln import mint
from kiln.errors import KilnTypeError, KilnValueError, ShapeError

N = 20000


def _mean_and_error(estimates):
    """The mean over the first axis of per-draw estimates and its standard error."""
    return estimates.mean(0), estimates.std(0) / math.sqrt(estimates.shape[0])


def _derivatives(f, params, h=1e-6):
    """Central differences of the closed form ``f`` in each entry of ``params``."""
    grads = np.zeros_like(params)
    for i in np.ndindex(params.shape):
        step = np.zeros_like(params)
        step[i] = h
        grads[i] = (f(params + step) - f(params - step)) / (2 * h)
    return grads


def _beta_second_moment(params):
    a, b = params
    return a * (a + 1) / ((a + b) * (a + b + 1))


def _beta_estimates(a, b, draw):
    """Per-draw gradients of x^2 in (a, b) for N draws of Beta(a, b) by ``draw`` (kiln)."""
    c1, c0 = (t(np.full(N, v)).requires_grad_() for v in (a, b))
    x = draw(D.Beta(c1, c0))
    grads = kiln.autograd.grad(mint.sum(x * x), [c1, c0])
    return np.stack([g.numpy() for g in grads], -1)


_BETA_PARAMS = [(0.3, 0.6), (2.0, 3.0), (5.0, 1.2)]


@pytest.mark.parametrize("a, b", _BETA_PARAMS)
def test_beta_rsample_differentiates_the_expectation(a, b):
    kiln.manual_seed(21)
    mean, error = _mean_and_error(_beta_estimates(a, b, lambda d: d.rsample()))
    want = _derivatives(_beta_second_moment, np.array([a, b]))
    np.testing.assert_array_less(np.abs(mean - want), 5 * error)


@pytest.mark.parametrize("a, b", _BETA_PARAMS)
def test_beta_rsample_gradient_agrees_with_torchs_estimate(torch, a, b):
    # PyTorch's estimator differentiates the Beta cdf implicitly: another coupling of the draws
    # to the parameters, with the same expectation.
    kiln.manual_seed(22)
    ours, our_error = _mean_and_error(_beta_estimates(a, b, lambda d: d.rsample()))
    torch.manual_seed(22)
    c1, c0 = (torch.full((N,), v, dtype=torch.float64, requires_grad=True) for v in (a, b))
    x = torch.distributions.Beta(c1, c0).rsample()
    grads = torch.autograd.grad((x * x).sum(), [c1, c0])
    theirs, their_error = _mean_and_error(np.stack([g.numpy() for g in grads], -1))
    np.testing.assert_array_less(np.abs(ours - theirs),
                                 5 * np.sqrt(our_error ** 2 + their_error ** 2))


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
def test_beta_rsample_shapes_bounds_and_sample_without_gradient(dtype):
    kiln.manual_seed(23)
    c1 = t([[0.05, 2.0, 40.0]], dtype).requires_grad_()
    beta = D.Beta(c1, t([0.05, 3.0, 0.5], dtype))
    assert beta.has_rsample
    value = beta.rsample((500,))
    assert value.shape == (500, 1, 3) and value.dtype == dtype and value.requires_grad
    x = value.detach().numpy()
    info = np.finfo(x.dtype)
    assert x.min() >= info.tiny and x.max() <= 1 - info.eps
    (grad,) = kiln.autograd.grad(mint.sum(value), [c1])
    assert np.all(np.isfinite(grad.numpy()))
    drawn = beta.sample((4,))
    assert drawn.shape == (4, 1, 3) and not drawn.requires_grad


_DIRICHLET = np.array([0.4, 1.5, 3.0])
_WEIGHTS = np.array([1.0, -0.5, 2.0])


def _dirichlet_objective(c):
    """E[sum_i w_i x_i^2] for x ~ Dirichlet(c): E[x_i^2] = c_i (c_i + 1) / (c_0 (c_0 + 1))."""
    total = c.sum()
    return np.sum(_WEIGHTS * c * (c + 1)) / (total * (total + 1))


def test_dirichlet_rsample_differentiates_the_expectation():
    kiln.manual_seed(24)
    concentration = t(np.tile(_DIRICHLET, (N, 1))).requires_grad_()
    x = D.Dirichlet(concentration).rsample()
    (grad,) = kiln.autograd.grad(mint.sum(t(_WEIGHTS) * x * x), [concentration])
    mean, error = _mean_and_error(grad.numpy())
    want = _derivatives(_dirichlet_objective, _DIRICHLET)
    np.testing.assert_array_less(np.abs(mean - want), 5 * error)


def test_dirichlet_rsample_gradient_agrees_with_torchs_estimate(torch):
    kiln.manual_seed(25)
    concentration = t(np.tile(_DIRICHLET, (N, 1))).requires_grad_()
    x = D.Dirichlet(concentration).rsample()
    (grad,) = kiln.autograd.grad(mint.sum(t(_WEIGHTS) * x * x), [concentration])
    ours, our_error = _mean_and_error(grad.numpy())
    torch.manual_seed(25)
    twin = torch.tensor(np.tile(_DIRICHLET, (N, 1)), requires_grad=True)
    y = torch.distributions.Dirichlet(twin).rsample()
    (their_grad,) = torch.autograd.grad((torch.tensor(_WEIGHTS) * y * y).sum(), [twin])
    theirs, their_error = _mean_and_error(their_grad.numpy())
    np.testing.assert_array_less(np.abs(ours - theirs),
                                 5 * np.sqrt(our_error ** 2 + their_error ** 2))


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64])
def test_dirichlet_draws_lie_on_the_simplex(dtype):
    kiln.manual_seed(26)
    dirichlet = D.Dirichlet(t([[0.01, 0.02, 0.05], [1.0, 2.0, 30.0]], dtype))
    assert (dirichlet.batch_shape, dirichlet.event_shape) == ((2,), (3,))
    assert dirichlet.has_rsample and dirichlet.support is D.constraints.simplex
    value = dirichlet.sample((1000,))
    assert value.shape == (1000, 2, 3) and value.dtype == dtype and not value.requires_grad
    x = value.numpy().astype(np.float64)
    info = np.finfo(value.numpy().dtype)
    assert x.min() >= info.tiny and x.max() <= 1 - info.eps
    np.testing.assert_allclose(x.sum(-1), 1, atol=8 * info.eps)
    assert np.all(dirichlet.support.check(value).numpy())


def _mode_rule(c):
    """The documented mode: (c - 1)^+ normalised; the first vertex where every c < 1."""
    excess = np.maximum(c - 1, 0)
    with np.errstate(invalid="ignore"):
        mode = excess / excess.sum(-1, keepdims=True)
    return np.where(np.all(c < 1, -1, keepdims=True), np.eye(c.shape[-1])[0], mode)


_MODE_CASES = np.array([[0.5, 0.3, 0.2], [2.0, 3.0, 0.5], [1.0, 1.0, 0.5], [0.2, 0.9, 0.95]])


def test_dirichlet_mode_at_the_edges():
    np.testing.assert_array_equal(D.Dirichlet(t(_MODE_CASES)).mode.numpy(),
                                  _mode_rule(_MODE_CASES))


def test_dirichlet_mode_at_the_edges_matches_torch(torch):
    want = torch.distributions.Dirichlet(torch.tensor(_MODE_CASES)).mode.numpy()
    np.testing.assert_allclose(D.Dirichlet(t(_MODE_CASES)).mode.numpy(), want, rtol=1e-15)


def test_dirichlet_errors():
    with pytest.raises(KilnValueError, match="Expected parameter concentration"):
        D.Dirichlet(t([1.0, -0.5]))
    with pytest.raises(KilnValueError, match="at least one-dimensional"):
        D.Dirichlet(t(2.0))
    with pytest.raises(KilnTypeError, match="concentration to be a kiln.Tensor, got list"):
        D.Dirichlet([1.0, 2.0])
    with pytest.raises(KilnValueError, match="to be within the support"):
        D.Dirichlet(t([1.0, 2.0])).log_prob(t([0.7, 0.7]))


def test_dirichlet_kl_to_itself_is_zero_and_grows_apart():
    p = D.Dirichlet(t([[0.5, 2.0, 1.5], [3.0, 1.2, 0.7]]))
    np.testing.assert_allclose(D.kl_divergence(p, p).numpy(), [0.0, 0.0], atol=1e-12)
    near = D.kl_divergence(p, D.Dirichlet(t([0.6, 2.0, 1.5]))).numpy()[0]
    far = D.kl_divergence(p, D.Dirichlet(t([3.0, 2.0, 1.5]))).numpy()[0]
    assert 0 < near < far


# LowRankMultivariateNormal: a batch (3, 2) from loc (2, 4), cov_factor (3, 1, 4, 2), cov_diag (4,).
_rng = np.random.default_rng(7)
_LOC = _rng.standard_normal((2, 4))
_FACTOR = _rng.standard_normal((3, 1, 4, 2))
_DIAG = _rng.uniform(0.5, 2.0, 4)


def _lowrank(loc=_LOC, factor=_FACTOR, diag=_DIAG, dtype=None):
    return D.LowRankMultivariateNormal(t(loc, dtype), t(factor, dtype), t(diag, dtype))


def test_lowrank_dense_matrices_match_numpy():
    dist = _lowrank()
    assert (dist.batch_shape, dist.event_shape) == ((3, 2), (4,))
    cov = np.broadcast_to(_FACTOR @ np.swapaxes(_FACTOR, -1, -2) + np.diag(_DIAG), (3, 2, 4, 4))
    np.testing.assert_allclose(dist.covariance_matrix.numpy(), cov, rtol=1e-12)
    np.testing.assert_allclose(dist.precision_matrix.numpy(), np.linalg.inv(cov), rtol=1e-10,
                               atol=1e-12)
    np.testing.assert_allclose(dist.scale_tril.numpy(), np.linalg.cholesky(cov), rtol=1e-10,
                               atol=1e-12)
    np.testing.assert_allclose(dist.variance.numpy(), np.diagonal(cov, axis1=-2, axis2=-1),
                               rtol=1e-12)
    np.testing.assert_array_equal(dist.mean.numpy(), np.broadcast_to(_LOC, (3, 2, 4)))
    assert dist.cov_factor.shape == (3, 2, 4, 2) and dist.cov_diag.shape == (3, 2, 4)


def test_lowrank_matches_the_dense_multivariate_normal():
    dist = _lowrank()
    dense = D.MultivariateNormal(dist.loc, dist.covariance_matrix)
    value = t(_rng.standard_normal((5, 1, 1, 4)))
    np.testing.assert_allclose(dist.log_prob(value).numpy(), dense.log_prob(value).numpy(),
                               rtol=1e-10)
    np.testing.assert_allclose(dist.entropy().numpy(), dense.entropy().numpy(), rtol=1e-12)
    np.testing.assert_allclose(D.kl_divergence(dist, dense).numpy(), 0, atol=1e-10)


def test_lowrank_samples_have_its_covariance():
    kiln.manual_seed(27)
    dist = _lowrank(_LOC[0], _FACTOR[0, 0])
    x = dist.sample((N,)).numpy()
    assert x.shape == (N, 4)
    cov = _FACTOR[0, 0] @ _FACTOR[0, 0].T + np.diag(_DIAG)
    centred = x - _LOC[0]
    products = centred[:, :, None] * centred[:, None, :]
    mean, error = _mean_and_error(products)
    np.testing.assert_array_less(np.abs(mean - cov), 5 * error)


def test_lowrank_rsample_differentiates_the_expectation():
    # E|x - loc|^2 = |W|_F^2 + sum D: the gradient is 2 W in W and 1 in D.
    kiln.manual_seed(28)
    factor = t(np.broadcast_to(_FACTOR[0, 0], (N, 4, 2))).requires_grad_()
    diag = t(np.broadcast_to(_DIAG, (N, 4))).requires_grad_()
    dist = D.LowRankMultivariateNormal(t(_LOC[0]), factor, diag)
    assert dist.has_rsample
    centred = dist.rsample() - t(_LOC[0])
    grads = kiln.autograd.grad(mint.sum(centred * centred), [factor, diag])
    for grad, want in zip(grads, (2 * _FACTOR[0, 0], np.ones(4))):
        mean, error = _mean_and_error(grad.numpy())
        np.testing.assert_array_less(np.abs(mean - want), 5 * error)


def test_lowrank_gradients_of_the_dense_matrices_match_torch(torch):
    params = [t(v).requires_grad_() for v in (_LOC, _FACTOR, _DIAG)]
    twins = [torch.tensor(v, requires_grad=True) for v in (_LOC, _FACTOR, _DIAG)]
    ours = D.LowRankMultivariateNormal(*params)
    theirs = torch.distributions.LowRankMultivariateNormal(*twins)
    weights = _rng.standard_normal((4, 4))
    loss = sum(mint.sum(getattr(ours, name) * t(weights))
               for name in ("covariance_matrix", "precision_matrix", "scale_tril"))
    want = sum((getattr(theirs, name) * torch.tensor(weights)).sum()
               for name in ("covariance_matrix", "precision_matrix", "scale_tril"))
    grads = kiln.autograd.grad(loss, params[1:])
    wants = torch.autograd.grad(want, twins[1:])
    for grad, expected in zip(grads, wants):
        np.testing.assert_allclose(grad.numpy(), expected.numpy(), rtol=1e-9, atol=1e-11)


def test_lowrank_errors():
    with pytest.raises(ShapeError, match=r"expected cov_factor \[..., 4, m\]"):
        _lowrank(factor=_FACTOR[..., :3, :])
    with pytest.raises(ShapeError, match=r"expected cov_diag \[..., 4\]"):
        _lowrank(diag=_DIAG[:3])
    with pytest.raises(ShapeError, match="incompatible batch shapes"):
        _lowrank(diag=np.tile(_DIAG, (5, 1)))  # batch (5,) against loc's (2,)
    with pytest.raises(KilnValueError, match="Expected parameter cov_diag"):
        _lowrank(diag=-_DIAG)
    with pytest.raises(KilnValueError, match="at least one-dimensional"):
        _lowrank(loc=0.0)
    with pytest.raises(KilnTypeError, match="expected cov_factor to be a kiln.Tensor"):
        D.LowRankMultivariateNormal(t(_LOC), _FACTOR, t(_DIAG))
    with pytest.raises(KilnValueError, match="different event shapes"):
        D.kl_divergence(_lowrank(), D.MultivariateNormal(t([0.0]), t([[1.0]])))


def _spd(n, seed):
    a = np.random.default_rng(seed).standard_normal((n, n))
    return a @ a.T + n * np.eye(n)


def test_multivariate_normal_gives_the_same_matrices_from_each_parametrisation():
    cov = _spd(4, 8)
    loc = t(np.zeros(4))
    for dist in (D.MultivariateNormal(loc, t(cov)),
                 D.MultivariateNormal(loc, precision_matrix=t(np.linalg.inv(cov))),
                 D.MultivariateNormal(loc, scale_tril=t(np.linalg.cholesky(cov)))):
        np.testing.assert_allclose(dist.covariance_matrix.numpy(), cov, rtol=1e-10)
        np.testing.assert_allclose(dist.precision_matrix.numpy(), np.linalg.inv(cov),
                                   rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(dist.scale_tril.numpy(), np.linalg.cholesky(cov), rtol=1e-10,
                                   atol=1e-13)
