"""kl_divergence(p, q) and register_kl (torch.distributions.kl).

``kl_divergence(p, q)`` is KL(p || q) = E_p[log p(x) - log q(x)], of the broadcast batch shape,
in closed form for the registered pairs of types:

    Normal-Normal, Uniform-Uniform, Exponential-Exponential, Laplace-Laplace, Gamma-Gamma,
    Beta-Beta, Bernoulli-Bernoulli, Categorical-Categorical, OneHotCategorical-OneHotCategorical,
    Poisson-Poisson, MultivariateNormal-MultivariateNormal, Independent-Independent

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
from .discrete import Bernoulli, Categorical, OneHotCategorical, Poisson
from .distribution import Distribution
from .independent import Independent
from .multivariate import MultivariateNormal
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


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p, q):
    if p.event_shape != q.event_shape:
        raise KilnValueError(f"KL-divergence between two Multivariate Normals with different "
                             f"event shapes cannot be computed: {p.event_shape} vs "
                             f"{q.event_shape}")
    p_lower, q_lower = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_log_det_ratio = _linalg.half_log_det(q_lower) - _linalg.half_log_det(p_lower)
    # tr(Sigma_q^-1 Sigma_p) = ||L_q^-1 L_p||_F^2
    solved = _linalg.solve_lower(q_lower, p_lower)
    trace = mint.sum(solved * solved, (-2, -1))
    distance = _linalg.mahalanobis(q_lower, q.loc - p.loc)
    n = p.event_shape[0]
    return half_log_det_ratio + 0.5 * (trace + distance - n)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise KilnNotImplementedError(f"KL(p || q) of Independent distributions needs the same "
                                      f"reinterpreted_batch_ndims, got "
                                      f"{p.reinterpreted_batch_ndims} and "
                                      f"{q.reinterpreted_batch_ndims}")
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)
