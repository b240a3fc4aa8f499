"""kiln.distributions: log_prob, cdf, mean, variance and entropy against closed forms (NumPy and
math) and against torch.distributions; sample statistics on 20k seeded draws; rsample
gradients; kl_divergence against torch and against Monte Carlo estimates; batch and event
shapes, expand, enumerate_support, transforms, and the validate_args errors. Beta's and
Dirichlet's rsample gradients and LowRankMultivariateNormal's matrices: test_s33_dist.py."""

import math
import subprocess
import sys
from collections import namedtuple

import numpy as np
import pytest

import kiln
from kiln import distributions as D
from kiln.errors import KilnNotImplementedError, KilnTypeError, KilnValueError

mint = kiln.mint
N = 20000  # samples for the statistics tests

_lgamma = np.vectorize(math.lgamma)
_erf = np.vectorize(math.erf)


def _digamma(x):
    # A central difference of lgamma: accurate to about 1e-9 for the arguments here.
    h = 1e-5
    return (_lgamma(x + h) - _lgamma(x - h)) / (2 * h)


def _normal_log_prob(x, loc, scale):
    return -(x - loc) ** 2 / (2 * scale ** 2) - np.log(scale) - 0.5 * np.log(2 * np.pi)


def _normal_cdf(x, loc, scale):
    return 0.5 * (1 + _erf((x - loc) / (scale * np.sqrt(2))))


def _normal_entropy(scale):
    return 0.5 + 0.5 * np.log(2 * np.pi) + np.log(scale)


def _mvn_log_prob(x, loc, cov):
    n = loc.shape[-1]
    diff = np.broadcast_to(x - loc, np.broadcast_shapes(x.shape, loc.shape, cov.shape[:-1]))
    cov = np.broadcast_to(cov, diff.shape + (n,))
    distance = np.einsum("...i,...i->...", diff, np.linalg.solve(cov, diff[..., None])[..., 0])
    return -0.5 * (n * np.log(2 * np.pi) + distance + np.linalg.slogdet(cov)[1])


def _mvn_entropy(cov):
    n = cov.shape[-1]
    return 0.5 * n * (1 + np.log(2 * np.pi)) + 0.5 * np.linalg.slogdet(cov)[1]


def _dirichlet_log_prob(x, c):
    return ((c - 1) * np.log(x)).sum(-1) + _lgamma(c.sum(-1)) - _lgamma(c).sum(-1)


def _dirichlet_entropy(c):
    total, k = c.sum(-1), c.shape[-1]
    return (_lgamma(c).sum(-1) - _lgamma(total) - (k - total) * _digamma(total)
            - ((c - 1) * _digamma(c)).sum(-1))


def _lowrank_cov(p):
    w = p["factor"]
    return w @ np.swapaxes(w, -1, -2) + p["diag"][..., None] * np.eye(w.shape[-2])


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _logit(p):
    return np.log(p) - np.log1p(-p)


def _spd(rng, n, batch=()):
    a = rng.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


_rng = np.random.default_rng(0)
_COV = _spd(_rng, 3)
_TRIL = np.linalg.cholesky(_spd(_rng, 3, (2,)))
_PREC = _spd(_rng, 3)
_FACTOR = _rng.standard_normal((2, 3, 2))

# make(d, p): the distribution from the module d (kiln.distributions or torch.distributions) and
# the parameters p (tensors of either); ref: closed forms of (p, value) as NumPy arrays; missing:
# what torch has and Kiln does not.
Case = namedtuple("Case", "id make params values ref missing", defaults=((),))

CASES = [
    Case("normal", lambda d, p: d.Normal(p["loc"], p["scale"]),
         {"loc": [0.5, -1.0, 2.0], "scale": [1.0, 0.5, 3.0]}, [[0.1, -0.3, 4.0], [1.0, 0.0, -2.0]],
         {"log_prob": lambda p, v: _normal_log_prob(v, p["loc"], p["scale"]),
          "cdf": lambda p, v: _normal_cdf(v, p["loc"], p["scale"]),
          "mean": lambda p, v: p["loc"], "variance": lambda p, v: p["scale"] ** 2,
          "entropy": lambda p, v: _normal_entropy(p["scale"])}),
    Case("uniform", lambda d, p: d.Uniform(p["low"], p["high"]),
         {"low": [0.0, -1.0], "high": [2.0, 3.0]}, [0.5, 2.5],
         {"log_prob": lambda p, v: -np.log(p["high"] - p["low"]),
          "cdf": lambda p, v: (v - p["low"]) / (p["high"] - p["low"]),
          "mean": lambda p, v: (p["low"] + p["high"]) / 2,
          "variance": lambda p, v: (p["high"] - p["low"]) ** 2 / 12,
          "entropy": lambda p, v: np.log(p["high"] - p["low"])}),
    Case("exponential", lambda d, p: d.Exponential(p["rate"]), {"rate": [0.5, 2.0]}, [0.3, 1.7],
         {"log_prob": lambda p, v: np.log(p["rate"]) - p["rate"] * v,
          "cdf": lambda p, v: 1 - np.exp(-p["rate"] * v), "mean": lambda p, v: 1 / p["rate"],
          "variance": lambda p, v: p["rate"] ** -2.0,
          "entropy": lambda p, v: 1 - np.log(p["rate"])}),
    Case("laplace", lambda d, p: d.Laplace(p["loc"], p["scale"]),
         {"loc": [0.0, 1.0], "scale": [1.0, 0.5]}, [-0.5, 2.0],
         {"log_prob": lambda p, v: -np.log(2 * p["scale"]) - np.abs(v - p["loc"]) / p["scale"],
          "cdf": lambda p, v: np.where(v < p["loc"], 0.5 * np.exp((v - p["loc"]) / p["scale"]),
                                       1 - 0.5 * np.exp(-(v - p["loc"]) / p["scale"])),
          "mean": lambda p, v: p["loc"], "variance": lambda p, v: 2 * p["scale"] ** 2,
          "entropy": lambda p, v: 1 + np.log(2 * p["scale"])}),
    Case("gamma", lambda d, p: d.Gamma(p["concentration"], p["rate"]),
         {"concentration": [0.5, 3.0], "rate": [2.0, 0.7]}, [0.4, 3.1],
         {"log_prob": lambda p, v: (p["concentration"] * np.log(p["rate"])
                                    + (p["concentration"] - 1) * np.log(v) - p["rate"] * v
                                    - _lgamma(p["concentration"])),
          "mean": lambda p, v: p["concentration"] / p["rate"],
          "variance": lambda p, v: p["concentration"] / p["rate"] ** 2,
          "entropy": lambda p, v: (p["concentration"] - np.log(p["rate"])
                                   + _lgamma(p["concentration"])
                                   + (1 - p["concentration"]) * _digamma(p["concentration"]))},
         missing=("cdf", "icdf")),
    Case("beta", lambda d, p: d.Beta(p["c1"], p["c0"]), {"c1": [0.5, 2.0, 0.2],
                                                         "c0": [1.5, 3.0, 0.3]}, [0.3, 0.8, 0.5],
         {"log_prob": lambda p, v: ((p["c1"] - 1) * np.log(v) + (p["c0"] - 1) * np.log(1 - v)
                                    + _lgamma(p["c1"] + p["c0"]) - _lgamma(p["c1"])
                                    - _lgamma(p["c0"])),
          "mean": lambda p, v: p["c1"] / (p["c1"] + p["c0"]),
          "variance": lambda p, v: (p["c1"] * p["c0"]
                                    / ((p["c1"] + p["c0"]) ** 2 * (p["c1"] + p["c0"] + 1))),
          "entropy": lambda p, v: (_lgamma(p["c1"]) + _lgamma(p["c0"])
                                   - _lgamma(p["c1"] + p["c0"])
                                   - (p["c1"] - 1) * _digamma(p["c1"])
                                   - (p["c0"] - 1) * _digamma(p["c0"])
                                   + (p["c1"] + p["c0"] - 2) * _digamma(p["c1"] + p["c0"]))}),
    Case("bernoulli_probs", lambda d, p: d.Bernoulli(probs=p["probs"]),
         {"probs": [0.2, 0.7, 0.5]}, [1.0, 0.0, 1.0],
         {"log_prob": lambda p, v: v * np.log(p["probs"]) + (1 - v) * np.log1p(-p["probs"]),
          "mean": lambda p, v: p["probs"],
          "variance": lambda p, v: p["probs"] * (1 - p["probs"]),
          "entropy": lambda p, v: (-p["probs"] * np.log(p["probs"])
                                   - (1 - p["probs"]) * np.log1p(-p["probs"]))}),
    Case("bernoulli_logits", lambda d, p: d.Bernoulli(logits=p["logits"]),
         {"logits": [-1.0, 2.0]}, [[1.0, 0.0], [0.0, 1.0]],
         {"log_prob": lambda p, v: (v * np.log(_sigmoid(p["logits"]))
                                    + (1 - v) * np.log(_sigmoid(-p["logits"]))),
          "mean": lambda p, v: _sigmoid(p["logits"])}),
    Case("categorical_probs", lambda d, p: d.Categorical(probs=p["probs"]),
         {"probs": [[0.2, 0.3, 0.5], [1.2, 0.2, 0.6]]}, [2.0, 0.0],
         {"log_prob": lambda p, v: np.log([0.5, 0.6]),
          "entropy": lambda p, v: -np.sum((p["probs"] / p["probs"].sum(-1, keepdims=True))
                                          * np.log(p["probs"] / p["probs"].sum(-1,
                                                                               keepdims=True)),
                                          -1)}),
    Case("categorical_logits", lambda d, p: d.Categorical(logits=p["logits"]),
         {"logits": [[1.0, 0.0, -1.0, 0.5]]}, [[3.0], [1.0]],
         {"log_prob": lambda p, v: (p["logits"][0] - np.log(np.exp(p["logits"]).sum()))[
             v.astype(int)]}),
    Case("one_hot_categorical", lambda d, p: d.OneHotCategorical(probs=p["probs"]),
         {"probs": [[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]]}, [[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]],
         {"log_prob": lambda p, v: np.log([0.5, 0.1]), "mean": lambda p, v: p["probs"],
          "variance": lambda p, v: p["probs"] * (1 - p["probs"])}),
    Case("poisson", lambda d, p: d.Poisson(p["rate"]), {"rate": [0.5, 4.0, 30.0]},
         [0.0, 3.0, 25.0],
         {"log_prob": lambda p, v: v * np.log(p["rate"]) - p["rate"] - _lgamma(v + 1),
          "mean": lambda p, v: p["rate"], "variance": lambda p, v: p["rate"]}),
    Case("binomial_probs", lambda d, p: d.Binomial(p["total_count"], probs=p["probs"]),
         {"total_count": [5.0, 10.0], "probs": [0.3, 0.5]}, [2.0, 10.0],
         {"log_prob": lambda p, v: (_lgamma(p["total_count"] + 1) - _lgamma(v + 1)
                                    - _lgamma(p["total_count"] - v + 1) + v * np.log(p["probs"])
                                    + (p["total_count"] - v) * np.log1p(-p["probs"])),
          "mean": lambda p, v: p["total_count"] * p["probs"],
          "variance": lambda p, v: p["total_count"] * p["probs"] * (1 - p["probs"])}),
    Case("binomial_logits", lambda d, p: d.Binomial(p["total_count"], logits=p["logits"]),
         {"total_count": [8.0, 8.0], "logits": [0.0, -1.5]}, [3.0, 8.0],
         {"entropy": lambda p, v: np.array([
             -sum(math.exp(lp) * lp for lp in (
                 math.lgamma(9) - math.lgamma(k + 1) - math.lgamma(9 - k)
                 + k * math.log(_sigmoid(x)) + (8 - k) * math.log(_sigmoid(-x))
                 for k in range(9))) for x in p["logits"]])}),
    Case("mvn_covariance", lambda d, p: d.MultivariateNormal(p["loc"], p["cov"]),
         {"loc": [[0.5, -1.0, 0.0], [1.0, 2.0, 3.0]], "cov": _COV}, [0.3, 0.1, -0.4],
         {"log_prob": lambda p, v: _mvn_log_prob(v, p["loc"], p["cov"]),
          "mean": lambda p, v: p["loc"],
          "variance": lambda p, v: np.broadcast_to(np.diag(p["cov"]), (2, 3)),
          "entropy": lambda p, v: np.full(2, _mvn_entropy(p["cov"]))}),
    Case("mvn_scale_tril", lambda d, p: d.MultivariateNormal(p["loc"], scale_tril=p["tril"]),
         {"loc": [0.5, -1.0, 0.0], "tril": _TRIL}, [[0.3, 0.1, -0.4], [1.0, 1.0, 1.0]],
         {"log_prob": lambda p, v: _mvn_log_prob(v, p["loc"],
                                                 p["tril"] @ np.swapaxes(p["tril"], -1, -2)),
          "entropy": lambda p, v: _mvn_entropy(p["tril"] @ np.swapaxes(p["tril"], -1, -2))}),
    Case("mvn_precision", lambda d, p: d.MultivariateNormal(p["loc"],
                                                            precision_matrix=p["prec"]),
         {"loc": [0.5, -1.0, 0.0], "prec": _PREC}, [0.3, 0.1, -0.4],
         {"log_prob": lambda p, v: _mvn_log_prob(v, p["loc"], np.linalg.inv(p["prec"]))}),
    Case("lowrank_mvn",
         lambda d, p: d.LowRankMultivariateNormal(p["loc"], p["factor"], p["diag"]),
         {"loc": [0.5, -1.0, 0.0], "factor": _FACTOR, "diag": [1.0, 0.5, 2.0]},
         [[0.3, 0.1, -0.4], [1.0, 1.0, 1.0]],
         {"log_prob": lambda p, v: _mvn_log_prob(v, p["loc"], _lowrank_cov(p)),
          "mean": lambda p, v: np.broadcast_to(p["loc"], (2, 3)),
          "variance": lambda p, v: np.diagonal(_lowrank_cov(p), axis1=-2, axis2=-1),
          "entropy": lambda p, v: _mvn_entropy(_lowrank_cov(p))}),
    Case("dirichlet", lambda d, p: d.Dirichlet(p["c"]),
         {"c": [[0.5, 2.0, 1.5], [3.0, 0.2, 0.7], [4.0, 2.0, 0.5]]},
         [[0.2, 0.5, 0.3], [0.6, 0.1, 0.3], [0.5, 0.25, 0.25]],
         {"log_prob": lambda p, v: _dirichlet_log_prob(v, p["c"]),
          "mean": lambda p, v: p["c"] / p["c"].sum(-1, keepdims=True),
          # (c - 1)^+ normalised; where all c < 1 there is no interior mode (not here).
          "mode": lambda p, v: (np.maximum(p["c"] - 1, 0)
                                / np.maximum(p["c"] - 1, 0).sum(-1, keepdims=True)),
          "variance": lambda p, v: (p["c"] * (p["c"].sum(-1, keepdims=True) - p["c"])
                                    / (p["c"].sum(-1, keepdims=True) ** 2
                                       * (p["c"].sum(-1, keepdims=True) + 1))),
          "entropy": lambda p, v: _dirichlet_entropy(p["c"])}),
    Case("independent_normal", lambda d, p: d.Independent(d.Normal(p["loc"], p["scale"]), 1),
         {"loc": [[0.5, -1.0, 2.0], [0.0, 0.0, 1.0]], "scale": [1.0, 0.5, 3.0]},
         [0.1, -0.3, 4.0],
         {"log_prob": lambda p, v: _normal_log_prob(v, p["loc"], p["scale"]).sum(-1),
          "entropy": lambda p, v: np.full(2, _normal_entropy(p["scale"]).sum())}),
    Case("log_normal", lambda d, p: d.TransformedDistribution(d.Normal(p["loc"], p["scale"]),
                                                              [d.transforms.ExpTransform()]),
         {"loc": [0.0, 1.0], "scale": [1.0, 0.5]}, [1.5, 0.2],
         {"log_prob": lambda p, v: _normal_log_prob(np.log(v), p["loc"], p["scale"]) - np.log(v),
          "cdf": lambda p, v: _normal_cdf(np.log(v), p["loc"], p["scale"])}),
    Case("tanh_normal", lambda d, p: d.TransformedDistribution(
        d.Normal(p["loc"], p["scale"]), d.transforms.TanhTransform()),
        {"loc": [0.0, 1.0], "scale": [1.0, 0.5]}, [0.5, -0.9],
        {"log_prob": lambda p, v: (_normal_log_prob(np.arctanh(v), p["loc"], p["scale"])
                                   - np.log1p(-v * v))}),
    # The base's batch (1,) is expanded to the affine map's (3,); the map decreases.
    Case("affine_sigmoid_normal",
         lambda d, p: d.TransformedDistribution(
             d.Normal(p["zero"], p["one"]), [d.transforms.AffineTransform(p["loc"], -2.0),
                                             d.transforms.SigmoidTransform()]),
         {"zero": [0.0], "one": [1.0], "loc": [0.0, 1.0, -0.5]}, [0.3, 0.9, 0.5],
         {"log_prob": lambda p, v: (_normal_log_prob(_logit(v), p["loc"], 2.0)
                                    - np.log(v * (1 - v))),
          "cdf": lambda p, v: _normal_cdf(_logit(v), p["loc"], 2.0)}),
]
_CASE_IDS = [case.id for case in CASES]
_STATISTICS = ["mean", "mode", "variance", "stddev"]


def _kiln_params(case, requires_grad=False):
    params = {}
    for name, value in case.params.items():
        tensor = kiln.tensor(np.asarray(value, np.float64))
        params[name] = tensor.requires_grad_() if requires_grad else tensor
    return params


def _torch_params(torch, case, requires_grad=False):
    return {name: torch.tensor(np.asarray(value, np.float64), requires_grad=requires_grad)
            for name, value in case.params.items()}


def _numpy(value):
    return np.asarray(value.detach().numpy(), np.float64)


def _evaluate(dist, what, value, is_torch=False):
    """``what`` of ``dist`` (a method at ``value``, or a property); None where ``dist`` does not
    define it."""
    try:
        attr = getattr(dist, what)
        if what in ("log_prob", "cdf", "icdf"):
            return attr(value)
        return attr() if what in ("entropy", "perplexity") else attr
    except NotImplementedError:  # KilnNotImplementedError is one
        return None


@pytest.mark.parametrize("case", CASES, ids=_CASE_IDS)
def test_matches_closed_forms(case):
    dist = case.make(D, _kiln_params(case))
    params = {name: np.asarray(value, np.float64) for name, value in case.params.items()}
    value = np.asarray(case.values, np.float64)
    for what, reference in case.ref.items():
        got = _evaluate(dist, what, kiln.tensor(value))
        want = np.broadcast_to(reference(params, value), tuple(got.shape))
        np.testing.assert_allclose(_numpy(got), want, rtol=1e-7, atol=1e-9, err_msg=what)


@pytest.mark.parametrize("case", CASES, ids=_CASE_IDS)
def test_matches_torch(torch, case):
    ours = case.make(D, _kiln_params(case))
    theirs = case.make(torch.distributions, _torch_params(torch, case))
    assert ours.batch_shape == tuple(theirs.batch_shape)
    assert ours.event_shape == tuple(theirs.event_shape)
    value = np.asarray(case.values, np.float64)
    checked = ["log_prob", "entropy", "cdf", "perplexity"] + _STATISTICS
    for what in checked:
        want = _evaluate(theirs, what, torch.tensor(value))
        if want is None or what in case.missing:
            continue
        got = _evaluate(ours, what, kiln.tensor(value))
        np.testing.assert_allclose(_numpy(got), want.detach().numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=what)
    probabilities = _evaluate(theirs, "cdf", torch.tensor(value))
    if probabilities is not None and "icdf" not in case.missing:
        want = _evaluate(theirs, "icdf", probabilities)
        if want is not None:
            got = ours.icdf(kiln.tensor(probabilities.detach().numpy()))
            np.testing.assert_allclose(_numpy(got), want.detach().numpy(), rtol=1e-9)


def _symmetric(grad):
    # A function of a symmetric matrix defines only the gradient's symmetric part: Kiln's
    # Cholesky reads the lower triangle, PyTorch's gives a symmetric gradient.
    return (grad + np.swapaxes(grad, -1, -2)) / 2


@pytest.mark.parametrize("case", CASES, ids=_CASE_IDS)
def test_log_prob_and_entropy_gradients_match_torch(torch, case):
    params = _kiln_params(case, requires_grad=True)
    twins = _torch_params(torch, case, requires_grad=True)
    ours, theirs = case.make(D, params), case.make(torch.distributions, twins)
    value = np.asarray(case.values, np.float64)
    loss, want = ours.log_prob(kiln.tensor(value)).sum(), theirs.log_prob(torch.tensor(value))
    want = want.sum()
    entropy = _evaluate(theirs, "entropy", None)
    if entropy is not None and "entropy" not in case.missing:
        loss, want = loss + ours.entropy().sum(), want + entropy.sum()
    grads = kiln.autograd.grad(loss, list(params.values()))
    wants = torch.autograd.grad(want, list(twins.values()), allow_unused=True)
    for name, grad, expected in zip(params, grads, wants):
        expected = np.zeros(grad.shape) if expected is None else expected.numpy()
        got = _numpy(grad)
        if name in ("cov", "prec"):
            got, expected = _symmetric(got), _symmetric(expected)
        np.testing.assert_allclose(got, expected, rtol=1e-8, atol=1e-10, err_msg=name)


@pytest.mark.parametrize("case", [c for c in CASES if c.id not in (
    "categorical_probs", "categorical_logits", "log_normal", "tanh_normal",
    "affine_sigmoid_normal")], ids=lambda c: c.id)
def test_sample_mean_and_variance_match(case):
    kiln.manual_seed(1234)
    dist = case.make(D, _kiln_params(case))
    samples = dist.sample((N,))
    assert samples.shape == (N,) + dist.batch_shape + dist.event_shape
    x = _numpy(samples)
    assert np.all(_numpy(dist.support.check(samples)))
    mean, variance = _numpy(dist.mean), _numpy(dist.variance)
    # Five standard errors: the mean's from the variance, the variance's from the fourth moment.
    np.testing.assert_array_less(np.abs(x.mean(0) - mean), 5 * np.sqrt(variance / N) + 1e-12)
    fourth = ((x - mean) ** 4).mean(0)
    # x.var centres on the sample mean, which moves it by up to (5 standard errors)^2.
    error = 5 * np.sqrt(np.maximum(fourth - variance ** 2, 0) / N) + 25 * variance / N + 1e-12
    np.testing.assert_array_less(np.abs(x.var(0) - variance), error)


def _assert_frequencies(samples, probabilities):
    """The frequency of each outcome k (the last axis of ``probabilities``) within five standard
    errors of its probability."""
    for k, p in enumerate(np.moveaxis(probabilities, -1, 0)):
        frequency = (samples == k).mean(0)
        np.testing.assert_array_less(np.abs(frequency - p), 5 * np.sqrt(p * (1 - p) / N) + 1e-9)


def test_categorical_samples_follow_the_probabilities():
    kiln.manual_seed(5)
    probs = np.array([[0.2, 0.3, 0.5], [0.7, 0.0, 0.3]])
    dist = D.Categorical(probs=kiln.tensor(probs))
    samples = dist.sample((N,))
    assert samples.dtype == kiln.int64 and samples.shape == (N, 2)
    _assert_frequencies(samples.numpy(), probs)
    logits = D.Categorical(logits=kiln.tensor(np.log(probs[:1]))).sample((N,)).numpy()
    _assert_frequencies(logits, probs[:1])


@pytest.mark.parametrize("rate", [0.3, 3.0, 9.9, 10.0, 15.0, 200.0])
def test_poisson_samples_follow_the_pmf(rate):
    # Below 10 and from 10 on, the two samplers; the pmf checked over its bulk.
    kiln.manual_seed(6)
    samples = D.Poisson(kiln.tensor([rate], dtype=kiln.float64)).sample((N,)).numpy()[:, 0]
    assert np.all(samples == np.floor(samples)) and samples.min() >= 0
    ks = np.arange(max(0, int(rate - 3 * math.sqrt(rate))), int(rate + 3 * math.sqrt(rate)) + 1)
    pmf = np.exp(ks * math.log(rate) - rate - _lgamma(ks + 1))
    frequency = np.array([(samples == k).mean() for k in ks])
    np.testing.assert_array_less(np.abs(frequency - pmf), 5 * np.sqrt(pmf * (1 - pmf) / N))


@pytest.mark.parametrize("concentration", [0.05, 0.5, 1.0, 7.5])
def test_gamma_samples_match_the_moments_of_small_and_large_shapes(concentration):
    kiln.manual_seed(7)
    samples = D.Gamma(kiln.tensor(concentration, dtype=kiln.float64), 1.0).sample((N,)).numpy()
    assert samples.min() > 0
    # log x has mean digamma(a) and variance trigamma(a), finite even where x is tiny.
    logs = np.log(samples)
    h = 1e-4
    trigamma = (_lgamma(concentration + h) - 2 * math.lgamma(concentration)
                + _lgamma(concentration - h)) / h ** 2
    assert abs(logs.mean() - _digamma(concentration)) < 5 * math.sqrt(trigamma / N)
    assert abs(samples.mean() - concentration) < 5 * math.sqrt(concentration / N)


def test_samples_repeat_after_manual_seed():
    dist = D.Normal(kiln.tensor([0.0, 1.0]), 2.0)
    kiln.manual_seed(3)
    first = dist.sample((4,)).numpy()
    kiln.manual_seed(3)
    np.testing.assert_array_equal(dist.sample((4,)).numpy(), first)


def test_rsample_gradients_are_the_pathwise_derivatives():
    kiln.manual_seed(8)
    loc = kiln.tensor([0.5, -1.0], dtype=kiln.float64).requires_grad_()
    scale = kiln.tensor([2.0, 0.5], dtype=kiln.float64).requires_grad_()
    x = D.Normal(loc, scale).rsample((N,))
    assert x.requires_grad
    d_loc, d_scale = kiln.autograd.grad(x.sum(), [loc, scale])
    np.testing.assert_allclose(d_loc.numpy(), [N, N])  # d/dloc E[x] = 1 per sample
    eps = (x.detach().numpy() - [0.5, -1.0]) / [2.0, 0.5]
    np.testing.assert_allclose(d_scale.numpy(), eps.sum(0), rtol=1e-9)
    # d/dscale E[x^2] = 2 scale: the reparametrised estimate on N samples.
    (d_scale,) = kiln.autograd.grad((D.Normal(loc, scale).rsample((N,)) ** 2).mean(0).sum(),
                                    [scale])
    np.testing.assert_allclose(d_scale.numpy(), [4.0, 1.0], rtol=0.05)


@pytest.mark.parametrize("make, parameter, derivative", [
    # d/dθ E[x] for each family, estimated from N reparametrised samples.
    (lambda p: D.Exponential(p), 2.0, -1 / 4.0),  # E[x] = 1 / rate
    (lambda p: D.Uniform(p, 3.0), 1.0, 0.5),  # E[x] = (low + high) / 2
    (lambda p: D.Laplace(p, 2.0), 0.5, 1.0),  # E[x] = loc
    (lambda p: D.MultivariateNormal(p * mint.ones(2, dtype=kiln.float64),
                                    scale_tril=kiln.tensor([[1.0, 0.0], [0.5, 2.0]],
                                                           dtype=kiln.float64)), 0.5, 2.0),
])
def test_rsample_differentiates_the_expectation(make, parameter, derivative):
    kiln.manual_seed(9)
    theta = kiln.tensor(parameter, dtype=kiln.float64).requires_grad_()
    x = make(theta).rsample((N,))
    (grad,) = kiln.autograd.grad(x.sum() / N, [theta])
    assert abs(grad.item() - derivative) < 0.03 * abs(derivative)


def test_rsample_through_a_tanh_transform_reaches_the_parameters():
    kiln.manual_seed(10)
    loc = kiln.tensor([0.3], dtype=kiln.float64).requires_grad_()
    dist = D.TransformedDistribution(D.Normal(loc, 1.0), [D.TanhTransform(cache_size=1)])
    action = dist.rsample((5,))
    log_pi = dist.log_prob(action)
    assert action.requires_grad and log_pi.shape == (5, 1)
    # d tanh(loc + eps) / d loc = 1 - tanh^2.
    (grad,) = kiln.autograd.grad(action.sum(), [loc])
    np.testing.assert_allclose(grad.numpy(), [(1 - action.detach().numpy() ** 2).sum()],
                               rtol=1e-9)


def test_discrete_samplers_have_no_rsample():
    # Gamma's rejection sampler has one (tests/python/test_s33_gamma_rsample.py), and so have
    # Beta's and Dirichlet's (tests/python/test_s33_dist.py).
    for dist in (D.Bernoulli(0.3), D.Categorical(probs=mint.ones(3)), D.Poisson(2.0)):
        assert not dist.has_rsample
        with pytest.raises(KilnNotImplementedError, match="rsample"):
            dist.rsample()
    with pytest.raises(KilnNotImplementedError, match="cdf"):
        D.Gamma(2.0, 1.0).cdf(kiln.tensor(1.0))


# (p, q) pairs, as make(d, t) with d the module and t a float64 tensor maker.
KL_PAIRS = {
    "normal": lambda d, t: (d.Normal(t([0.0, 1.0]), t([1.0, 2.0])),
                            d.Normal(t([0.5, -1.0]), t([1.5, 0.5]))),
    "uniform": lambda d, t: (d.Uniform(t([0.0, 1.0]), t([1.0, 2.0])),
                             d.Uniform(t([-1.0, 1.5]), t([2.0, 3.0]))),
    "exponential": lambda d, t: (d.Exponential(t([0.5, 2.0])), d.Exponential(t([1.0, 0.7]))),
    "laplace": lambda d, t: (d.Laplace(t([0.0, 1.0]), t([1.0, 0.5])),
                             d.Laplace(t([0.5, 0.0]), t([2.0, 1.0]))),
    "gamma": lambda d, t: (d.Gamma(t([2.0, 0.7]), t([1.0, 2.0])),
                           d.Gamma(t([3.0, 1.5]), t([0.5, 1.0]))),
    "beta": lambda d, t: (d.Beta(t([2.0, 0.7]), t([1.5, 3.0])),
                          d.Beta(t([1.0, 2.0]), t([2.0, 2.5]))),
    "bernoulli": lambda d, t: (d.Bernoulli(probs=t([0.2, 0.9])),
                               d.Bernoulli(logits=t([0.5, -1.0]))),
    "categorical": lambda d, t: (d.Categorical(probs=t([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])),
                                 d.Categorical(logits=t([[0.0, 1.0, -1.0], [2.0, 0.0, 0.0]]))),
    "one_hot_categorical": lambda d, t: (d.OneHotCategorical(probs=t([0.2, 0.3, 0.5])),
                                         d.OneHotCategorical(probs=t([0.5, 0.25, 0.25]))),
    "poisson": lambda d, t: (d.Poisson(t([3.0, 0.5])), d.Poisson(t([2.0, 1.5]))),
    "mvn": lambda d, t: (d.MultivariateNormal(t([[0.0, 1.0, 0.5]]), t(_COV)),
                         d.MultivariateNormal(t([1.0, 0.0, 0.0]), scale_tril=t(_TRIL))),
    "dirichlet": lambda d, t: (d.Dirichlet(t([[0.5, 2.0, 1.5], [3.0, 1.2, 0.7]])),
                               d.Dirichlet(t([1.0, 1.0, 4.0]))),
    "lowrank_mvn": lambda d, t: (
        d.LowRankMultivariateNormal(t([[0.0, 1.0, 0.5]]), t(_FACTOR), t([1.0, 0.5, 2.0])),
        d.LowRankMultivariateNormal(t([1.0, 0.0, 0.0]), t(_FACTOR[0, :, :1]),
                                    t([[2.0, 1.0, 1.5]]))),
    "mvn_lowrank_mvn": lambda d, t: (
        d.MultivariateNormal(t([[0.0, 1.0, 0.5]]), scale_tril=t(_TRIL)),
        d.LowRankMultivariateNormal(t([1.0, 0.0, 0.0]), t(_FACTOR), t([2.0, 1.0, 1.5]))),
    "lowrank_mvn_mvn": lambda d, t: (
        d.LowRankMultivariateNormal(t([[0.0, 1.0, 0.5]]), t(_FACTOR), t([1.0, 0.5, 2.0])),
        d.MultivariateNormal(t([1.0, 0.0, 0.0]), scale_tril=t(_TRIL))),
    "independent": lambda d, t: (d.Independent(d.Normal(t([0.0, 1.0]), t([1.0, 2.0])), 1),
                                 d.Independent(d.Normal(t([0.5, 0.5]), t([0.5, 1.0])), 1)),
}


def _kiln_maker(value):
    return kiln.tensor(np.asarray(value, np.float64))


@pytest.mark.parametrize("pair", KL_PAIRS, ids=list(KL_PAIRS))
def test_kl_divergence_matches_torch(torch, pair):
    got = D.kl_divergence(*KL_PAIRS[pair](D, _kiln_maker))
    want = torch.distributions.kl_divergence(
        *KL_PAIRS[pair](torch.distributions, lambda v: torch.tensor(np.asarray(v, np.float64))))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("pair", [p for p in KL_PAIRS if p != "uniform"])
def test_kl_divergence_is_the_expected_log_ratio(pair):
    # E_p[log p(x) - log q(x)] on N samples, within five standard errors.
    kiln.manual_seed(11)
    p, q = KL_PAIRS[pair](D, _kiln_maker)
    x = p.sample((N,))
    ratio = (p.log_prob(x) - q.log_prob(x)).numpy()
    kl = D.kl_divergence(p, q).numpy()
    np.testing.assert_array_less(np.abs(ratio.mean(0) - kl), 5 * ratio.std(0) / math.sqrt(N))


def test_kl_divergence_closed_forms_without_torch():
    p, q = KL_PAIRS["normal"](D, _kiln_maker)
    s1, s2, m1, m2 = np.array([1.0, 2.0]), np.array([1.5, 0.5]), np.array([0, 1.0]), [0.5, -1]
    want = np.log(s2 / s1) + (s1 ** 2 + (m1 - m2) ** 2) / (2 * s2 ** 2) - 0.5
    np.testing.assert_allclose(D.kl_divergence(p, q).numpy(), want, rtol=1e-12)
    p, q = KL_PAIRS["uniform"](D, _kiln_maker)
    np.testing.assert_allclose(D.kl_divergence(p, q).numpy(), [np.log(3.0), np.inf])
    zero = D.kl_divergence(D.Bernoulli(probs=_kiln_maker([0.0, 1.0])),
                           D.Bernoulli(probs=_kiln_maker([0.0, 0.5])))
    np.testing.assert_allclose(zero.numpy(), [0.0, np.log(2.0)])


def test_kl_divergence_dispatches_to_the_most_specific_registration():
    class Gaussian(D.Normal):
        pass

    p, q = Gaussian(0.0, 1.0), D.Normal(1.0, 1.0)
    assert D.kl_divergence(p, q).item() == pytest.approx(0.5)

    @D.register_kl(Gaussian, D.Normal)
    def _kl_gaussian_normal(p, q):
        return mint.zeros(p.batch_shape)

    assert D.kl_divergence(p, q).item() == 0.0
    assert D.kl_divergence(q, Gaussian(0.0, 1.0)).item() == pytest.approx(0.5)
    with pytest.raises(KilnNotImplementedError, match="No KL.*Normal.*Gamma"):
        D.kl_divergence(q, D.Gamma(1.0, 1.0))
    with pytest.raises(KilnTypeError, match="subclasses of Distribution"):
        D.register_kl(int, D.Normal)
    with pytest.raises(KilnNotImplementedError, match="reinterpreted_batch_ndims"):
        D.kl_divergence(D.Independent(D.Normal(mint.zeros((2, 3)), 1.0), 1),
                        D.Independent(D.Normal(mint.zeros((2, 3)), 1.0), 2))


def test_batch_and_event_shapes_broadcast_and_sample():
    normal = D.Normal(mint.zeros((3, 1)), mint.ones(2))
    assert normal.batch_shape == (3, 2) and normal.event_shape == ()
    assert normal.sample((4, 5)).shape == (4, 5, 3, 2)
    assert normal.log_prob(mint.zeros(2)).shape == (3, 2)
    categorical = D.Categorical(logits=mint.zeros((2, 3, 4)))
    assert categorical.batch_shape == (2, 3) and categorical.sample((5,)).shape == (5, 2, 3)
    assert categorical.log_prob(kiln.tensor([1, 2, 3])).shape == (2, 3)
    one_hot = D.OneHotCategorical(logits=mint.zeros((2, 4)))
    assert (one_hot.batch_shape, one_hot.event_shape) == ((2,), (4,))
    assert one_hot.sample((3,)).shape == (3, 2, 4)
    mvn = D.MultivariateNormal(mint.zeros(3), scale_tril=kiln.tensor(_TRIL))
    assert (mvn.batch_shape, mvn.event_shape) == ((2,), (3,))
    assert mvn.sample((4,)).shape == (4, 2, 3)
    assert mvn.covariance_matrix.shape == (2, 3, 3)
    base = D.Normal(mint.zeros((2, 3)), 1.0)
    assert D.Independent(base, 1).batch_shape == (2,)
    independent = D.Independent(base, 2)
    assert (independent.batch_shape, independent.event_shape) == ((), (2, 3))
    # The affine transform's loc broadcasts the scalar base to its shape.
    shifted = D.TransformedDistribution(D.Normal(0.0, 1.0),
                                        [D.AffineTransform(mint.zeros(3), 2.0)])
    assert shifted.batch_shape == (3,) and shifted.sample((2,)).shape == (2, 3)
    vector = D.TransformedDistribution(D.Normal(mint.zeros(3), 1.0),
                                       [D.AffineTransform(0.0, mint.ones(3), event_dim=1)])
    assert (vector.batch_shape, vector.event_shape) == ((), (3,))
    assert vector.log_prob(mint.zeros(3)).shape == ()


@pytest.mark.parametrize("make", [
    lambda: D.Normal(kiln.tensor([[0.0, 1.0]]), 2.0),
    lambda: D.Bernoulli(logits=kiln.tensor([[0.5, -1.0]])),
    lambda: D.Categorical(probs=kiln.tensor([[[0.2, 0.8], [0.5, 0.5]]])),
    lambda: D.OneHotCategorical(probs=kiln.tensor([[[0.2, 0.8], [0.5, 0.5]]])),
    lambda: D.Binomial(5, probs=kiln.tensor([[0.3, 0.6]])),
    lambda: D.MultivariateNormal(kiln.tensor([[0.0, 1.0]] * 2), kiln.tensor(_COV[:2, :2])),
    lambda: D.LowRankMultivariateNormal(kiln.tensor([[0.0, 1.0]] * 2),
                                        kiln.tensor(_FACTOR[0, :2]), kiln.tensor([1.0, 2.0])),
    lambda: D.Dirichlet(kiln.tensor([[[0.5, 2.0, 1.0], [3.0, 1.0, 1.0]]])),
    lambda: D.Independent(D.Normal(mint.zeros((1, 2, 3)), 1.0), 1),
    lambda: D.TransformedDistribution(D.Normal(kiln.tensor([[0.5, -0.5]]), 1.0),
                                      [D.ExpTransform()]),
], ids=["normal", "bernoulli", "categorical", "one_hot", "binomial", "mvn", "lowrank_mvn",
        "dirichlet", "independent", "transformed"])
def test_expand_broadcasts_the_batch_and_keeps_the_log_prob(make):
    dist = make()
    expanded = dist.expand((4,) + dist.batch_shape[:-2] + (2,))
    assert expanded.batch_shape == (4,) + dist.batch_shape[:-2] + (2,)
    assert expanded.event_shape == dist.event_shape
    kiln.manual_seed(12)
    value = expanded.sample()
    assert value.shape == expanded.batch_shape + expanded.event_shape
    np.testing.assert_allclose(expanded.log_prob(value).numpy(),
                               np.broadcast_to(dist.log_prob(value).numpy(),
                                               expanded.batch_shape), rtol=1e-6)


def test_enumerate_support():
    support = D.Bernoulli(probs=kiln.tensor([0.2, 0.7])).enumerate_support()
    np.testing.assert_array_equal(support.numpy(), [[0.0, 0.0], [1.0, 1.0]])
    categorical = D.Categorical(logits=mint.zeros((2, 3)))
    np.testing.assert_array_equal(categorical.enumerate_support().numpy(),
                                  np.repeat(np.arange(3)[:, None], 2, 1))
    assert categorical.enumerate_support(expand=False).shape == (3, 1)
    one_hot = D.OneHotCategorical(logits=mint.zeros((2, 3))).enumerate_support()
    np.testing.assert_array_equal(one_hot.numpy(), np.repeat(np.eye(3)[:, None], 2, 1))
    binomial = D.Binomial(3, probs=kiln.tensor([0.2, 0.7]))
    assert binomial.enumerate_support(expand=False).numpy().ravel().tolist() == [0, 1, 2, 3]
    # Summed over the support the probabilities are 1.
    np.testing.assert_allclose(np.exp(binomial.log_prob(binomial.enumerate_support()).numpy())
                               .sum(0), [1.0, 1.0], rtol=1e-6)
    with pytest.raises(KilnNotImplementedError, match="inhomogeneous total count"):
        D.Binomial(kiln.tensor([2.0, 3.0]), probs=0.5).enumerate_support()


@pytest.mark.parametrize("transform, forward, log_det", [
    (D.ExpTransform(), np.exp, lambda x: x),
    (D.AffineTransform(1.0, -3.0), lambda x: 1 - 3 * x, lambda x: np.full_like(x, np.log(3))),
    (D.SigmoidTransform(), _sigmoid, lambda x: np.log(_sigmoid(x) * _sigmoid(-x))),
    (D.TanhTransform(), np.tanh, lambda x: np.log1p(-np.tanh(x) ** 2)),
], ids=["exp", "affine", "sigmoid", "tanh"])
def test_transforms_invert_and_give_the_log_jacobian(transform, forward, log_det):
    x = np.array([-1.5, 0.0, 0.3, 2.0])
    y = transform(kiln.tensor(x))
    np.testing.assert_allclose(y.numpy(), forward(x), rtol=1e-12)
    np.testing.assert_allclose(transform.inv(y).numpy(), x, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(transform.log_abs_det_jacobian(kiln.tensor(x), y).numpy(),
                               log_det(x), rtol=1e-9, atol=1e-12)
    inverse = transform.inv
    assert inverse.inv is transform and inverse.domain is transform.codomain
    np.testing.assert_allclose(inverse.log_abs_det_jacobian(y, kiln.tensor(x)).numpy(),
                               -log_det(x), rtol=1e-9, atol=1e-12)


def test_transform_cache_returns_the_input_where_the_inverse_loses_it():
    x = kiln.tensor([20.0], dtype=kiln.float64)
    cached = D.TanhTransform(cache_size=1)
    y = cached(x)
    assert cached.inv(y) is x
    assert math.isinf(D.TanhTransform().inv(y).item())  # tanh(20) rounds to 1
    with pytest.raises(KilnValueError, match="cache_size 0 or 1"):
        D.TanhTransform(cache_size=2)


def test_parameters_outside_their_constraints_are_value_errors():
    with pytest.raises(KilnValueError, match=r"Expected parameter scale .* GreaterThan"):
        D.Normal(0.0, -1.0)
    with pytest.raises(ValueError, match="Expected parameter probs"):
        D.Bernoulli(probs=kiln.tensor([0.5, 1.5]))
    with pytest.raises(KilnValueError, match="Expected parameter probs .* Simplex"):
        D.Categorical(probs=kiln.tensor([-0.1, 1.1]))
    with pytest.raises(KilnValueError, match="Expected parameter rate"):
        D.Poisson(-1.0)
    with pytest.raises(KilnValueError, match="Expected parameter total_count"):
        D.Binomial(2.5, probs=0.5)
    with pytest.raises(KilnValueError, match="low < high"):
        D.Uniform(1.0, 0.0)
    with pytest.raises(KilnValueError, match="Expected parameter covariance_matrix .* "
                                             "PositiveDefinite"):
        D.MultivariateNormal(mint.zeros(2), kiln.tensor([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(KilnValueError, match="Expected parameter scale_tril"):
        D.MultivariateNormal(mint.zeros(2), scale_tril=kiln.tensor([[1.0, 1.0], [0.0, 1.0]]))
    for make in (lambda: D.Bernoulli(), lambda: D.Categorical(mint.ones(2), mint.ones(2))):
        with pytest.raises(KilnValueError, match="either `probs` or `logits`"):
            make()
    with pytest.raises(KilnValueError, match="exactly one of covariance_matrix"):
        D.MultivariateNormal(mint.zeros(2), mint.eye(2), scale_tril=mint.eye(2))
    with pytest.raises(kiln.ShapeError, match=r"expected scale_tril \[..., 2, 2\]"):
        D.MultivariateNormal(mint.zeros(2), scale_tril=mint.eye(3))
    with pytest.raises(KilnValueError, match="at least one-dimensional"):
        D.Categorical(probs=kiln.tensor(1.0))
    with pytest.raises(KilnValueError, match=r"reinterpreted_batch_ndims in \[0, 1\]"):
        D.Independent(D.Normal(mint.zeros(3), 1.0), 2)
    with pytest.raises(KilnTypeError, match="kiln.Tensor or number"):
        D.Normal("0", 1.0)


def test_values_outside_the_support_are_value_errors():
    with pytest.raises(KilnValueError, match="to be within the support"):
        D.Bernoulli(0.5).log_prob(kiln.tensor(0.5))
    with pytest.raises(KilnValueError, match="to be within the support"):
        D.Poisson(2.0).log_prob(kiln.tensor(-1.0))
    with pytest.raises(KilnValueError, match="to be within the support"):
        D.Uniform(0.0, 1.0).log_prob(kiln.tensor(2.0))
    with pytest.raises(KilnValueError, match="must be a kiln.Tensor"):
        D.Normal(0.0, 1.0).log_prob(0.5)
    mvn = D.MultivariateNormal(mint.zeros(3), mint.eye(3))
    with pytest.raises(KilnValueError, match="right-most size of value must match"):
        mvn.log_prob(mint.zeros(2))
    with pytest.raises(KilnValueError, match="not broadcastable"):
        D.Normal(mint.zeros(3), 1.0).log_prob(mint.zeros(2))


def test_validation_can_be_turned_off():
    assert D.Normal(0.0, -1.0, validate_args=False).scale.item() == -1.0
    assert math.isinf(D.Uniform(0.0, 1.0, validate_args=False).log_prob(kiln.tensor(2.0)).item())
    D.Distribution.set_default_validate_args(False)
    try:
        assert D.Poisson(-1.0).rate.item() == -1.0
        with pytest.raises(KilnValueError):
            D.Poisson(-1.0, validate_args=True)
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(KilnValueError):
        D.Poisson(-1.0)
    with pytest.raises(KilnValueError, match="expected True or False"):
        D.Distribution.set_default_validate_args("yes")


def test_lazy_parameters_and_repr():
    dist = D.Bernoulli(logits=kiln.tensor([0.0, 2.0]))
    assert "probs" not in vars(dist)  # computed on first read only
    np.testing.assert_allclose(dist.probs.numpy(), _sigmoid(np.array([0.0, 2.0])), rtol=1e-6)
    assert repr(D.Normal(0.0, 1.0)) == "Normal(loc: 0.0, scale: 1.0)"
    assert repr(D.Normal(mint.zeros(2), 1.0)) == "Normal(loc: (2,), scale: (2,))"
    assert repr(D.constraints.positive) == "GreaterThan(lower_bound=0.0)"
    assert D.Uniform(0.0, 2.0).support.check(kiln.tensor([0.0, 2.0, 2.5])).tolist() == [
        True, True, False]


def test_a_subclass_without_constraints_is_warned_about_and_not_validated():
    class Custom(D.Distribution):
        def __init__(self):
            super().__init__((2,))

    with pytest.warns(UserWarning, match="Custom does not define `arg_constraints`"):
        custom = Custom()
    assert custom.batch_shape == (2,) and repr(custom) == "Custom()"
    with pytest.raises(KilnNotImplementedError, match="Custom does not implement entropy"):
        custom.entropy()


def test_distributions_trace_under_jit():
    @kiln.jit
    def loss(loc, scale, x):
        policy = D.Normal(loc, scale)  # not validated while tracing: values are unknown
        return -policy.log_prob(x) + D.kl_divergence(policy, D.Normal(0.0, 1.0))

    loc, scale, x = (kiln.tensor(v) for v in ([0.0, 1.0], [1.0, 2.0], [0.5, 0.5]))
    want = -D.Normal(loc, scale).log_prob(x) + D.kl_divergence(D.Normal(loc, scale),
                                                               D.Normal(0.0, 1.0))
    np.testing.assert_allclose(loss(loc, scale, x).numpy(), want.numpy(), rtol=1e-6)


def test_importing_distributions_does_not_import_numpy():
    code = "import sys, kiln.distributions; assert 'numpy' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
