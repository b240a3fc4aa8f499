"""The discrete distributions: Bernoulli, Categorical, OneHotCategorical, Poisson and Binomial
(as torch.distributions'). None has ``rsample``: a discrete draw is not a differentiable
function of its parameters.

Bernoulli, Categorical, OneHotCategorical and Binomial take ``probs`` or ``logits`` (exactly
one); the other is computed when first read. Samples are float tensors in the parameters'
dtype except Categorical's, which are int64 class indices. Poisson samples by Knuth's products
of uniforms below a rate of 10 and by Hoermann's transformed rejection (PTRS, as NumPy) above;
Binomial sums ``total_count`` Bernoulli draws, which takes memory for max(total_count) draws
per sample.
"""

import math

from .. import _C, mint
from .._type_info import finfo
from ..autograd import no_grad
from ..errors import KilnNotImplementedError, KilnTypeError, KilnValueError
from ..nn.functional import one_hot
from . import constraints
from .distribution import Distribution
from .utils import (as_shape, broadcast_all, lazy_property, logits_to_probs, probs_to_logits,
                    rejection_sample, xlogy)

__all__ = ["Bernoulli", "Binomial", "Categorical", "OneHotCategorical", "Poisson"]


def _exactly_one(owner, probs, logits):
    if (probs is None) == (logits is None):
        raise KilnValueError(f"{owner}: either `probs` or `logits` must be specified, but not "
                             f"both (got {'both' if probs is not None else 'neither'})")


class _ProbsOrLogits(Distribution):
    """A distribution given by ``probs`` or by ``logits``: the one given is stored, the other is
    a lazy_property computed from it on first read."""

    _binary = True  # sigmoid / logit between the two, else softmax / log over the last dim

    @lazy_property
    def probs(self):
        """The probabilities (computed from the logits when those were given)."""
        return logits_to_probs(self.logits, is_binary=self._binary)

    @lazy_property
    def logits(self):
        """The log-odds (binary) or normalised log-probabilities (computed from the probabilities
        when those were given)."""
        return probs_to_logits(self.probs, is_binary=self._binary)

    @property
    def _param(self):
        # The parameter given (or either, once both are known: they have one shape).
        return self.__dict__["probs"] if "probs" in self.__dict__ else self.__dict__["logits"]

    @property
    def param_shape(self):
        """The shape of the parameter tensor."""
        return self._param.shape


def _log1p_exp(x):
    """log(1 + exp(x)) without overflow. Its max(x, 0) is written as PyTorch's Binomial writes
    it, so that the gradient at x = 0 (probs 0.5) is 0.5, not a one-sided 0 or 1."""
    rectified = (mint.clamp(x, min=0) + x - mint.clamp(x, max=0)) / 2
    return rectified + mint.log1p(mint.exp(-mint.abs(x)))


def _enumerated(values, batch_shape, event_shape, expand):
    """``values`` [k, *event_shape] as the support of a distribution of ``batch_shape``: one
    value per leftmost index, expanded over the batch or of size 1 there."""
    k = values.shape[0]
    values = values.reshape((k,) + (1,) * len(batch_shape) + tuple(event_shape))
    return values.expand((k,) + tuple(batch_shape) + tuple(event_shape)) if expand else values


class Bernoulli(_ProbsOrLogits):
    """1 with probability ``probs`` (or ``sigmoid(logits)``), else 0."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _exactly_one("Bernoulli", probs, logits)
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
        else:
            (self.logits,) = broadcast_all(logits)
        super().__init__(self._param.shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return mint.where(self.probs == 0.5, math.nan, mode)  # a tie has no single mode

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        with no_grad():
            shape = self._extended_shape(sample_shape)
            return mint.bernoulli(self.probs.detach().expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -mint.binary_cross_entropy_with_logits(logits, value.to(logits.dtype),
                                                      reduction="none")

    def entropy(self):
        return mint.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand=True):
        values = mint.arange(2, dtype=self._param.dtype)
        return _enumerated(values, self._batch_shape, (), expand)


def _checked_table(owner, name, value):
    if not isinstance(value, _C.Tensor):
        raise KilnTypeError(f"{owner}: expected `{name}` to be a kiln.Tensor, got "
                            f"{type(value).__name__}")
    if value.ndim < 1:
        raise KilnValueError(f"{owner}: `{name}` parameter must be at least one-dimensional, got "
                             f"a 0-d tensor")
    return value


class Categorical(_ProbsOrLogits):
    """A class index in [0, n) for ``probs`` [..., n] (non-negative weights, normalised over the
    last dimension) or ``logits`` [..., n] (unnormalised log-probabilities). Samples are int64."""

    arg_constraints = {"probs": constraints.simplex,
                       "logits": constraints.independent(constraints.real, 1)}
    has_enumerate_support = True
    _binary = False

    def __init__(self, probs=None, logits=None, validate_args=None):
        _exactly_one("Categorical", probs, logits)
        if probs is not None:
            probs = _checked_table("Categorical", "probs", probs)
            self.probs = probs / mint.sum(probs, -1, keepdim=True)
        else:
            logits = _checked_table("Categorical", "logits", logits)
            self.logits = logits - mint.logsumexp(logits, -1, keepdim=True)
        super().__init__(self._param.shape[:-1], validate_args=validate_args)

    @property
    def _num_events(self):
        return self._param.shape[-1]

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @property
    def mean(self):
        return mint.full(self._extended_shape(), math.nan, dtype=self._param.dtype)

    @property
    def mode(self):
        return mint.argmax(self.probs, -1)

    @property
    def variance(self):
        return mint.full(self._extended_shape(), math.nan, dtype=self._param.dtype)

    def sample(self, sample_shape=()):
        sample_shape = as_shape("sample", sample_shape)
        with no_grad():
            rows = self.probs.detach().reshape((-1, self._num_events))
            drawn = mint.multinomial(rows, math.prod(sample_shape), True).T  # [samples, rows]
            return drawn.reshape(self._extended_shape(sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        index = value.to(_C.dtype.int64).unsqueeze(-1)
        shape = mint.broadcast_shapes(index.shape, self.logits.shape)
        index = index.expand(shape[:-1] + (1,))
        return mint.gather(self.logits.expand(shape), -1, index).squeeze(-1)

    def entropy(self):
        # -inf logits (zero probabilities) would give 0 * -inf: the lowest finite value gives 0.
        logits = mint.clamp(self.logits, min=finfo(self.logits.dtype).min)
        return -mint.sum(logits * self.probs, -1)

    def enumerate_support(self, expand=True):
        values = mint.arange(self._num_events, dtype=_C.dtype.int64)
        return _enumerated(values, self._batch_shape, (), expand)


class OneHotCategorical(Distribution):
    """Categorical's draws as one-hot vectors [..., n] (floats in the parameters' dtype)."""

    arg_constraints = {"probs": constraints.simplex,
                       "logits": constraints.independent(constraints.real, 1)}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits, validate_args=False)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(OneHotCategorical, _instance)
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, new._categorical.batch_shape, self._event_shape,
                              validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def probs(self):
        """The probabilities of the classes."""
        return self._categorical.probs

    @property
    def logits(self):
        """The normalised log-probabilities of the classes."""
        return self._categorical.logits

    @property
    def param_shape(self):
        """The shape of the parameter tensor."""
        return self._categorical.param_shape

    def _one_hot(self, index):
        return one_hot(index, self._event_shape[0]).to(self._categorical._param.dtype)

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        return self._one_hot(mint.argmax(self.probs, -1))

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        return self._one_hot(self._categorical.sample(sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(mint.argmax(value, -1))

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        n = self._event_shape[0]
        values = mint.eye(n, dtype=self._categorical._param.dtype)
        return _enumerated(values, self._batch_shape, self._event_shape, expand)


def _poisson_by_products(rate):
    """Poisson(rate) samples for rates below about 10 (Knuth): the number of uniforms whose
    running product stays above exp(-rate). Rounds run until every product falls below, about
    max(sample) + 1 of them."""
    limit = mint.exp(-rate)
    count = mint.zeros_like(rate)
    product = mint.ones_like(rate)
    while True:
        product = product * mint.rand(rate.shape, dtype=rate.dtype)
        above = product > limit
        if not mint.any(above).item():
            return count
        count = count + above.to(rate.dtype)


def _poisson_ptrs(rate):
    """Poisson(rate) samples for rates of 10 and more: Hoermann's transformed rejection with
    squeeze (PTRS, 1993), as NumPy's random_poisson_ptrs; over 90% of proposals are accepted."""
    shape, dtype = rate.shape, rate.dtype
    log_rate = mint.log(rate)
    b = 0.931 + 2.53 * mint.sqrt(rate)
    a = -0.059 + 0.02483 * b
    log_inv_alpha = mint.log(1.1239 + 1.1328 / (b - 3.4))
    v_r = 0.9277 - 3.6224 / (b - 2)

    def propose():
        u = mint.rand(shape, dtype=dtype) - 0.5
        v = mint.rand(shape, dtype=dtype)
        us = 0.5 - mint.abs(u)
        k = mint.floor((2 * a / us + b) * u + rate + 0.43)
        squeezed = (us >= 0.07) & (v <= v_r)
        possible = (k >= 0) & ((us >= 0.013) | (v <= us))
        bound = -rate + k * log_rate - mint.lgamma(k + 1)
        accepted = mint.log(v) + log_inv_alpha - mint.log(a / (us * us) + b) <= bound
        return k, squeezed | (possible & accepted)

    return rejection_sample(propose, shape, dtype)


def _poisson(rate):
    """Samples of Poisson(rate), one per element, without gradients."""
    with no_grad():
        rate = rate.detach()
        small = rate < 10
        sample = _poisson_by_products(mint.where(small, rate, 0.0))
        if not mint.all(small).item():
            # The other method's rate of 10 in the small elements is never used: it keeps every
            # element's proposals well defined.
            sample = mint.where(small, sample, _poisson_ptrs(mint.where(small, 10.0, rate)))
        return sample


class Poisson(Distribution):
    """The Poisson distribution of ``rate`` (>= 0): P(k) = rate^k exp(-rate) / k!."""

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(self.rate.shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return mint.floor(self.rate)

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=()):
        return _poisson(self.rate.expand(self._extended_shape(sample_shape)))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return xlogy(value, rate) - rate - mint.lgamma(value + 1)


class Binomial(_ProbsOrLogits):
    """The number of successes in ``total_count`` trials of probability ``probs`` (or
    ``sigmoid(logits)``)."""

    arg_constraints = {"total_count": constraints.nonnegative_integer,
                       "probs": constraints.unit_interval, "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        _exactly_one("Binomial", probs, logits)
        if probs is not None:
            total_count, self.probs = broadcast_all(total_count, probs)
        else:
            total_count, self.logits = broadcast_all(total_count, logits)
        self.total_count = total_count.to(self._param.dtype)
        super().__init__(self._param.shape, validate_args=validate_args)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return mint.clamp(mint.floor((self.total_count + 1) * self.probs), max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        with no_grad():
            shape = self._extended_shape(sample_shape)
            count = self.total_count.expand(shape)
            trials = int(mint.max(count).item()) if count.numel() else 0
            probs = self.probs.detach().unsqueeze(-1).expand(shape + (trials,))
            live = mint.arange(trials, dtype=count.dtype) < count.unsqueeze(-1)
            return mint.sum(mint.bernoulli(probs) * live.to(count.dtype), -1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n, logits = self.total_count, self.logits
        log_choose = (mint.lgamma(n + 1) - mint.lgamma(value + 1)
                      - mint.lgamma(n - value + 1))
        return log_choose + value * logits - n * _log1p_exp(logits)

    def _homogeneous_count(self, what):
        count = mint.max(self.total_count).item()
        if mint.min(self.total_count).item() != count:
            raise KilnNotImplementedError(f"Binomial: inhomogeneous total count not supported by "
                                          f"`{what}`: expected one total_count for the batch")
        return int(count)

    def entropy(self):
        self._homogeneous_count("entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -mint.sum(mint.exp(log_prob) * log_prob, 0)

    def enumerate_support(self, expand=True):
        count = self._homogeneous_count("enumerate_support")
        values = mint.arange(1 + count, dtype=self._param.dtype)
        return _enumerated(values, self._batch_shape, (), expand)
