"""kl_divergence(p, q) and register_kl (torch.distributions.kl).

``kl_divergence(p, q)`` is KL(p || q) = E_p[log p(x) - log q(x)], of the broadcast batch shape,
in closed form for the registered pairs of types:

    Normal-Normal, Uniform-Uniform, Exponential-Exponential, Laplace-Laplace, Gamma-Gamma,
    Beta-Beta, Bernoulli-Bernoulli, Categorical-Categorical, OneHotCategorical-OneHotCategorical,
    Poisson-Poisson, Dirichlet-Dirichlet, Independent-Independent, and each pair of
    MultivariateNormal and LowRankMultivariateNormal

A pair of subclasses uses the most specific registration of their bases (by method resolution
order, the first type first, as PyTorch); another pair is a KilnNotImplementedError. Register
more with the decorator:

    @register_kl(MyDist, Normal)
    def kl_mydist_normal(p, q):
        ...
"""

import math
import warnings

from .. import mint
from ..errors import KilnNotImplementedError, KilnTypeError, KilnValueError
from . import _linalg
from .continuous import Beta, Exponential, Gamma, Laplace, Normal, Uniform
from .dirichlet import Dirichlet
from .discrete import Bernoulli, Categorical, OneHotCategorical, Poisson
from .distribution import Distribution
from .independent import Independent
from .multivariate import LowRankMultivariateNormal, MultivariateNormal
from .utils import sum_rightmost

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY = {}  # (type_p, type_q) -> function
_KL_MEMOIZE = {}  # (type_p, type_q) -> the function dispatch chose for that exact pair


def register_kl(type_p, type_q):
    """A decorator that registers ``fn(p, q)`` as KL(p || q) for distributions of the Distribution
    subclasses ``type_p`` and ``type_q`` (and their subclasses, unless a more specific pair is
    registered)."""
    for cls in (type_p, type_q):
        if not (isinstance(cls, type) and issubclass(cls, Distribution)):
            raise KilnTypeError(f"register_kl: expected subclasses of Distribution, got {cls!r}")

    def decorator(fn):
        _KL_REGISTRY[type_p, type_q] = fn
        _KL_MEMOIZE.clear()  # a new registration may be more specific than a chosen one
        return fn

    return decorator


def _dispatch_kl(type_p, type_q):
    """The registered function for the most specific pair of bases of (type_p, type_q)."""
    matches = [(super_p, super_q) for super_p, super_q in _KL_REGISTRY
               if issubclass(type_p, super_p) and issubclass(type_q, super_q)]
    if not matches:
        return None

    def distance(pair, first):
        ranks = (type_p.__mro__.index(pair[0]), type_q.__mro__.index(pair[1]))
        return ranks if first == 0 else ranks[::-1]

    left = min(matches, key=lambda pair: distance(pair, 0))
    right = min(matches, key=lambda pair: distance(pair, 1))
    if _KL_REGISTRY[left] is not _KL_REGISTRY[right]:
        warnings.warn(f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). Please "
                      f"register_kl({left[0].__name__}, {right[1].__name__})", RuntimeWarning)
    return _KL_REGISTRY[left]


def kl_divergence(p, q):
    """KL(p || q), of the batch shape of p and q broadcast together."""
    key = type(p), type(q)
    if key not in _KL_MEMOIZE:
        _KL_MEMOIZE[key] = _dispatch_kl(*key)
    fn = _KL_MEMOIZE[key]
    if fn is None:
        raise KilnNotImplementedError(f"No KL(p || q) is implemented for p type "
                                      f"{type(p).__name__} and q type {type(q).__name__}")
    return fn(p, q)


def _infinite_where(condition, value):
    return mint.where(condition, math.inf, value)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale) ** 2
    t1 = ((p.loc - q.loc) / q.scale) ** 2
    return 0.5 * (var_ratio + t1 - 1 - mint.log(var_ratio))


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = mint.log((q.high - q.low) / (p.high - p.low))
    return _infinite_where((q.low > p.low) | (q.high < p.high), result)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return rate_ratio - mint.log(rate_ratio) - 1


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_distance = mint.abs(p.loc - q.loc)
    return (-mint.log(scale_ratio) + loc_distance / q.scale
            + scale_ratio * mint.exp(-loc_distance / p.scale) - 1)


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * mint.log(p.rate / q.rate)
    t2 = mint.lgamma(q.concentration) - mint.lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * mint.digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    p_total = p.concentration1 + p.concentration0
    q_total = q.concentration1 + q.concentration0
    t1 = (mint.lgamma(q.concentration1) + mint.lgamma(q.concentration0) + mint.lgamma(p_total)
          - mint.lgamma(p.concentration1) - mint.lgamma(p.concentration0)
          - mint.lgamma(q_total))
    t2 = (p.concentration1 - q.concentration1) * mint.digamma(p.concentration1)
    t3 = (p.concentration0 - q.concentration0) * mint.digamma(p.concentration0)
    t4 = (q_total - p_total) * mint.digamma(p_total)
    return t1 + t2 + t3 + t4


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    # Each term is 0 where p gives its outcome no probability, and infinite where q does not.
    t1 = p.probs * (mint.softplus(-q.logits) - mint.softplus(-p.logits))
    t1 = mint.where(p.probs == 0, 0.0, _infinite_where(q.probs == 0, t1))
    t2 = (1 - p.probs) * (mint.softplus(q.logits) - mint.softplus(p.logits))
    t2 = mint.where(p.probs == 1, 0.0, _infinite_where(q.probs == 1, t2))
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = mint.where(p.probs == 0, 0.0, _infinite_where(q.probs == 0, t))
    return mint.sum(t, -1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (mint.log(p.rate) - mint.log(q.rate)) - (p.rate - q.rate)


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    p_total = mint.sum(p.concentration, -1)
    q_total = mint.sum(q.concentration, -1)
    t1 = mint.lgamma(p_total) - mint.lgamma(q_total)
    t2 = mint.sum(mint.lgamma(p.concentration) - mint.lgamma(q.concentration), -1)
    t3 = p.concentration - q.concentration
    t4 = mint.digamma(p.concentration) - mint.digamma(p_total).unsqueeze(-1)
    return t1 - t2 + mint.sum(t3 * t4, -1)


def _check_event_shapes(p, q):
    if p.event_shape != q.event_shape:
        raise KilnValueError(f"KL-divergence between {type(p).__name__} and "
                             f"{type(q).__name__} distributions with different event shapes "
                             f"cannot be computed: {p.event_shape} vs {q.event_shape}")


def _gaussian_kl(log_det_ratio, trace, distance, n):
    """KL between Gaussians from log(|Sigma_q| / |Sigma_p|), tr(Sigma_q^-1 Sigma_p) and the
    squared Mahalanobis distance of the means under Sigma_q."""
    return 0.5 * (log_det_ratio + trace + distance - n)


def _lowrank_log_det(dist):
    return _linalg.lowrank_logdet(dist._unbroadcasted_cov_diag, dist._capacitance_tril)


def _lowrank_distance(q, diff):
    return _linalg.lowrank_mahalanobis(q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag,
                                       diff, q._capacitance_tril)


def _woodbury(q):
    return _linalg.woodbury_factor(q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag,
                                   q._capacitance_tril)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p, q):
    _check_event_shapes(p, q)
    p_lower, q_lower = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    log_det_ratio = 2 * (_linalg.half_log_det(q_lower) - _linalg.half_log_det(p_lower))
    # tr(Sigma_q^-1 Sigma_p) = ||L_q^-1 L_p||_F^2
    trace = _linalg.trace_xxt(_linalg.solve_lower(q_lower, p_lower))
    distance = _linalg.mahalanobis(q_lower, q.loc - p.loc)
    return _gaussian_kl(log_det_ratio, trace, distance, p.event_shape[0])


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrankmultivariatenormal_lowrankmultivariatenormal(p, q):
    _check_event_shapes(p, q)
    # tr(Sigma_q^-1 Sigma_p) = tr((D_q^-1 - A^T A) (D_p + W_p W_p^T)), A the Woodbury factor.
    woodbury = _woodbury(q)
    p_factor, p_diag, q_diag = (p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag,
                                q._unbroadcasted_cov_diag)
    trace = (mint.sum(p_diag / q_diag, -1)
             + _linalg.trace_xxt(p_factor * mint.rsqrt(q_diag).unsqueeze(-1))
             - _linalg.trace_xxt(woodbury * mint.sqrt(p_diag).unsqueeze(-2))
             - _linalg.trace_xxt(mint.matmul(woodbury, p_factor)))
    return _gaussian_kl(_lowrank_log_det(q) - _lowrank_log_det(p), trace,
                        _lowrank_distance(q, q.loc - p.loc), p.event_shape[0])


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_multivariatenormal_lowrankmultivariatenormal(p, q):
    _check_event_shapes(p, q)
    # tr(Sigma_q^-1 Sigma_p) = tr((D_q^-1 - A^T A) L_p L_p^T).
    p_lower = p._unbroadcasted_scale_tril
    trace = (_linalg.trace_xxt(p_lower * mint.rsqrt(q._unbroadcasted_cov_diag).unsqueeze(-1))
             - _linalg.trace_xxt(mint.matmul(_woodbury(q), p_lower)))
    log_det_ratio = _lowrank_log_det(q) - 2 * _linalg.half_log_det(p_lower)
    return _gaussian_kl(log_det_ratio, trace, _lowrank_distance(q, q.loc - p.loc),
                        p.event_shape[0])


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrankmultivariatenormal_multivariatenormal(p, q):
    _check_event_shapes(p, q)
    # tr(Sigma_q^-1 Sigma_p) = ||L_q^-1 W_p||_F^2 + ||L_q^-1 D_p^1/2||_F^2.
    q_lower = q._unbroadcasted_scale_tril
    diag_sqrt = mint.diag_embed(mint.sqrt(p._unbroadcasted_cov_diag))
    trace = (_linalg.trace_xxt(_linalg.solve_lower(q_lower, p._unbroadcasted_cov_factor))
             + _linalg.trace_xxt(_linalg.solve_lower(q_lower, diag_sqrt)))
    log_det_ratio = 2 * _linalg.half_log_det(q_lower) - _lowrank_log_det(p)
    return _gaussian_kl(log_det_ratio, trace, _linalg.mahalanobis(q_lower, q.loc - p.loc),
                        p.event_shape[0])


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise KilnNotImplementedError(f"KL(p || q) of Independent distributions needs the same "
                                      f"reinterpreted_batch_ndims, got "
                                      f"{p.reinterpreted_batch_ndims} and "
                                      f"{q.reinterpreted_batch_ndims}")
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)
