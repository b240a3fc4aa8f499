"""The univariate continuous distributions: Normal, Uniform, Exponential, Laplace, Gamma and Beta
(as torch.distributions'). Samples come from kiln.mint's random ops and the default generator
(``kiln.manual_seed`` makes them repeatable).

All have ``rsample``, a reparametrised draw through which gradients reach the parameters. Gamma
and Beta sample by rejection (Marsaglia and Tsang's method); Gamma's draw gets its gradient in
the concentration by implicit reparametrisation, as PyTorch's does (Note [Gamma's implicit
gradient]). That gradient is a first derivative only: a second derivative takes it as constant
in the concentration (PyTorch's raises there). Beta's draw is x / (x + y) for gamma draws x and
y of its two concentrations (as PyTorch's, a Dirichlet draw of two components), differentiated
through both: an unbiased estimate of the gradient of an expectation, which is not PyTorch's
value sample by sample (PyTorch differentiates the Beta cdf implicitly; the two estimators agree
in expectation). Gamma has no ``cdf``: kiln.mint has no incomplete gamma function.
"""

import functools
import math

from .. import _C, mint
from .._numpy import np
from .._type_info import finfo
from ..autograd import Function, no_grad
from ..errors import KilnValueError
from . import constraints
from .distribution import Centered, Distribution
from .utils import broadcast_all, rejection_sample, xlogy

__all__ = ["Beta", "Exponential", "Gamma", "Laplace", "Normal", "Uniform"]

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


class _LocationScale(Centered):
    """The base of Normal and Laplace, the univariate families of ``loc + scale * noise``:
    ``loc`` (real) and ``scale`` (positive) are tensors or numbers broadcast together (the batch
    shape), draws are reparametrised, and ``loc`` is the mean and the mode."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)


class Normal(_LocationScale):
    """The normal (Gaussian) distribution N(loc, scale**2); ``loc`` and ``scale`` are tensors or
    numbers, broadcast together (the batch shape)."""

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.scale * self.scale

    def rsample(self, sample_shape=()):
        """loc + scale * eps for standard normal noise eps."""
        eps = mint.randn(self._extended_shape(sample_shape), dtype=self.loc.dtype)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (-((value - self.loc) ** 2) / (2 * self.variance) - mint.log(self.scale)
                - _LOG_SQRT_2PI)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + mint.erf((value - self.loc) / (self.scale * math.sqrt(2))))

    def icdf(self, value):
        return self.loc + self.scale * mint.erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self):
        return 0.5 + _LOG_SQRT_2PI + mint.log(self.scale)


class Uniform(Distribution):
    """The uniform distribution on [low, high) (``low < high``, broadcast together)."""

    arg_constraints = {"low": constraints.dependent(is_discrete=False, event_dim=0),
                       "high": constraints.dependent(is_discrete=False, event_dim=0)}
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        super().__init__(self.low.shape, validate_args=validate_args)
        if self._validating() and not mint.all(self.low < self.high).item():
            raise KilnValueError("Uniform is not defined when low >= high: expected low < high "
                                 "elementwise")

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.interval(self.low, self.high)

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return self.high * math.nan  # every value in the support is a mode

    @property
    def stddev(self):
        return (self.high - self.low) / math.sqrt(12)

    @property
    def variance(self):
        return (self.high - self.low) ** 2 / 12

    def rsample(self, sample_shape=()):
        """low + u * (high - low) for u uniform in [0, 1)."""
        u = mint.rand(self._extended_shape(sample_shape), dtype=self.low.dtype)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        inside = ((self.low <= value) & (self.high > value)).to(self.low.dtype)
        return mint.log(inside) - mint.log(self.high - self.low)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return mint.clamp((value - self.low) / (self.high - self.low), 0, 1)

    def icdf(self, value):
        return self.low + value * (self.high - self.low)

    def entropy(self):
        return mint.log(self.high - self.low)


class Exponential(Distribution):
    """The exponential distribution of ``rate`` (> 0): density rate * exp(-rate * x), x >= 0."""

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(self.rate.shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return mint.zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate ** -2

    def rsample(self, sample_shape=()):
        """-log(1 - u) / rate for u uniform in [0, 1)."""
        u = mint.rand(self._extended_shape(sample_shape), dtype=self.rate.dtype)
        return -mint.log1p(-u) / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return mint.log(self.rate) - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - mint.exp(-self.rate * value)

    def icdf(self, value):
        return -mint.log1p(-value) / self.rate

    def entropy(self):
        return 1.0 - mint.log(self.rate)


class Laplace(_LocationScale):
    """The Laplace distribution: density exp(-|x - loc| / scale) / (2 * scale); ``loc`` and
    ``scale`` are tensors or numbers, broadcast together (the batch shape)."""

    @property
    def stddev(self):
        return math.sqrt(2) * self.scale

    @property
    def variance(self):
        return 2 * self.scale ** 2

    def rsample(self, sample_shape=()):
        """The inverse cdf at u uniform in (-1, 1) (eps - 1 at the least, so that the log is
        finite)."""
        eps = finfo(self.loc.dtype).eps
        u = mint.rand(self._extended_shape(sample_shape), dtype=self.loc.dtype) * (2 - eps)
        u = u + (eps - 1)
        return self.loc - self.scale * mint.sign(u) * mint.log1p(-mint.abs(u))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -mint.log(2 * self.scale) - mint.abs(value - self.loc) / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        centred = value - self.loc
        return 0.5 - 0.5 * mint.sign(centred) * mint.expm1(-mint.abs(centred) / self.scale)

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * mint.sign(term) * mint.log1p(-2 * mint.abs(term))

    def entropy(self):
        return 1 + mint.log(2 * self.scale)


def _standard_gamma(concentration):
    """Samples of Gamma(concentration, 1), one per element, without gradients (Marsaglia and
    Tsang, 2000). Their method needs a concentration a >= 1; below 1 a sample of Gamma(a + 1)
    times u ** (1 / a) is one of Gamma(a). Samples are at least the dtype's smallest normal
    number, as PyTorch's, so that their logs are finite."""
    with no_grad():
        alpha = concentration.detach()
        shape, dtype = alpha.shape, alpha.dtype
        boosted = mint.where(alpha < 1, alpha + 1, alpha)
        d = boosted - 1 / 3
        c = mint.rsqrt(9 * d)

        def propose():
            z = mint.randn(shape, dtype=dtype)
            u = mint.rand(shape, dtype=dtype)
            v = (1 + c * z) ** 3
            # log(v) is NaN for v <= 0, where the comparison fails: those are rejected.
            accepted = mint.log(u) < 0.5 * z * z + d - d * v + d * mint.log(v)
            return d * v, accepted

        sample = rejection_sample(propose, shape, dtype)
        boost = mint.rand(shape, dtype=dtype) ** alpha.reciprocal()
        sample = mint.where(alpha < 1, sample * boost, sample)
        return mint.clamp(sample, min=finfo(dtype).tiny)


# Note [Gamma's implicit gradient]
# A sample x of Gamma(a, 1) moves with a as the quantile at a fixed probability does: dx/da =
# -(dP(a, x)/da) / p(x; a), P the regularized lower incomplete gamma function and p the density
# (implicit reparametrisation; Figurnov et al., 2018). With P's derivative written as an integral
# (psi the digamma function; over (0, inf) the integral is 0, so the lower and upper ones agree):
#   dx/da = -x^(1-a) e^x int_0^x (log t - psi(a)) t^(a-1) e^-t dt
#         =  x^(1-a) e^x int_x^inf (log t - psi(a)) t^(a-1) e^-t dt.
# Three forms, each without cancellation where it is used, compute it in float64:
# - x < 1: the series sum_n t_n (psi(a + n + 1) - log x), t_n = x^(n+1) Gamma(a) / Gamma(a+n+1),
#   whose terms fall faster than x^n / n! (20 terms);
# - 1 <= x < a: with t = x e^-v, -x int_0^inf (log x - psi(a) - v) exp(-a v - x expm1(-v)) dv;
# - x >= max(a, 1): with t = x + s,
#   int_0^inf (log(x + s) - psi(a)) exp((a - 1) log1p(s / x) - s) ds;
# the last two by 32-point Gauss-Laguerre quadrature, the variable scaled by the width of the
# integrand's peak at 0 (its slope plus the root of its curvature), so that it decays about as the
# rule's e^-y. Against a dense quadrature this is within 3e-8 (relative) from a = 1e-3 to 1e6 and
# x from 1e-30 to far in either tail; PyTorch's approximations are within about 4e-4 where its
# density does not underflow (tests/python/test_s33_gamma_rsample.py).

_SERIES_TERMS = 20
_QUADRATURE_POINTS = 32


@functools.lru_cache(maxsize=None)
def _laguerre_rule():
    """The Gauss-Laguerre rule's (node y, log(weight) + y) pairs: sum_i w_i e^(y_i) f(y_i)
    integrates f over (0, inf) for f about e^-y times a smooth function."""
    nodes, weights = np.polynomial.laguerre.laggauss(_QUADRATURE_POINTS)
    return tuple((float(y), math.log(w) + float(y)) for y, w in zip(nodes, weights))


def _standard_gamma_grad(concentration, sample):
    """dx/da for samples ``sample`` (x) of Gamma(concentration (a), 1), elementwise, in the
    samples' dtype; see Note [Gamma's implicit gradient]."""
    with no_grad():
        float64 = _C.dtype.float64
        a, x = concentration.detach().to(float64), sample.detach().to(float64)
        psi, log_x = mint.digamma(a), mint.log(x)
        term, psi_next = x / a, psi + 1 / a           # t_0 and psi(a + 1)
        series = term * (psi_next - log_x)
        for n in range(1, _SERIES_TERMS):
            term = term * x / (a + n)
            psi_next = psi_next + 1 / (a + n)
            series = series + term * (psi_next - log_x)
        lower_scale = 1 / (a - x + mint.sqrt(x))
        upper_scale = mint.clamp(1 / (1 - (a - 1) / x + mint.sqrt(mint.clamp(a - 1, min=0)) / x),
                                 min=1)
        lower = upper = 0
        for y, log_weight in _laguerre_rule():
            v, s = lower_scale * y, upper_scale * y
            lower = lower + (mint.exp(log_weight - a * v - x * mint.expm1(-v))
                             * (log_x - psi - v))
            upper = upper + (mint.exp(log_weight + (a - 1) * mint.log1p(s / x) - s)
                             * (mint.log(x + s) - psi))
        lower, upper = -x * lower_scale * lower, upper_scale * upper
        return mint.where(x < 1, series, mint.where(x < a, lower, upper)).to(sample.dtype)


class _StandardGamma(Function):
    """Samples of Gamma(concentration, 1) (rejection sampling), differentiable in the
    concentration by Note [Gamma's implicit gradient], as PyTorch's ``_standard_gamma``."""

    @staticmethod
    def forward(ctx, concentration):
        sample = _standard_gamma(concentration)
        ctx.save_for_backward(concentration, sample)
        return sample

    @staticmethod
    def backward(ctx, grad):
        concentration, sample = ctx.saved_tensors
        return grad * _standard_gamma_grad(concentration, sample)


def _bounded(value, low, high=None):
    """``value`` clamped into [low, high] with the gradient of ``value`` itself: the bounds keep
    draws away from values whose logs are not finite, and must not stop the gradient there."""
    clamped = mint.clamp(value.detach(), min=low, max=high)
    return value + (clamped - value.detach())


def sample_simplex(concentration):
    """Reparametrised draws of Dirichlet(``concentration``), one per vector [..., k]: standard
    gamma draws of the concentrations divided by their sum, differentiable in the concentration
    by Note [Gamma's implicit gradient]. Each component is within [tiny, 1 - eps] of its dtype (as
    PyTorch's draws; the bounds do not change the gradient)."""
    gammas = _StandardGamma.apply(concentration)
    info = finfo(gammas.dtype)
    return _bounded(gammas / mint.sum(gammas, -1, keepdim=True), info.tiny, 1 - info.eps)


class Gamma(Distribution):
    """The gamma distribution of shape ``concentration`` and inverse scale ``rate``: density
    rate^a x^(a-1) exp(-rate x) / Gamma(a). ``rsample`` differentiates in both parameters (see
    Note [Gamma's implicit gradient]); no cdf (see the module's docstring)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(self.concentration.shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return mint.clamp((self.concentration - 1) / self.rate, min=0)

    @property
    def variance(self):
        return self.concentration / self.rate ** 2

    def rsample(self, sample_shape=()):
        """A standard gamma draw of the concentration divided by the rate, at least the dtype's
        smallest normal number (as PyTorch's; the bound does not change the gradient)."""
        shape = self._extended_shape(sample_shape)
        value = _StandardGamma.apply(self.concentration.expand(shape)) / self.rate.expand(shape)
        return _bounded(value, finfo(value.dtype).tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        a = self.concentration
        return (xlogy(a, self.rate) + xlogy(a - 1, value) - self.rate * value - mint.lgamma(a))

    def entropy(self):
        a = self.concentration
        return a - mint.log(self.rate) + mint.lgamma(a) + (1 - a) * mint.digamma(a)


class Beta(Distribution):
    """The beta distribution on [0, 1]: density x^(c1-1) (1-x)^(c0-1) / B(c1, c0) for the
    concentrations ``concentration1`` (c1) and ``concentration0`` (c0). ``rsample`` is x / (x + y)
    for gamma draws x of c1 and y of c0, differentiable in both (see the module's docstring)."""

    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        super().__init__(self.concentration1.shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        a, b = self.concentration1, self.concentration0
        peak_a, peak_b = mint.clamp(a - 1, min=0), mint.clamp(b - 1, min=0)
        # With both concentrations below 1 the density is infinite at both ends: PyTorch gives 1.
        both_below_one = (a < 1) & (b < 1)
        return mint.where(both_below_one, 1.0, peak_a / (peak_a + peak_b))

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total ** 2 * (total + 1))

    def rsample(self, sample_shape=()):
        """The first component of a two-component Dirichlet draw of (c1, c0), as PyTorch's."""
        shape = self._extended_shape(sample_shape)
        concentrations = mint.stack([self.concentration1, self.concentration0], -1)
        return sample_simplex(concentrations.expand(shape + (2,)))[..., 0]

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration1, self.concentration0
        return (xlogy(a - 1, value) + xlogy(b - 1, 1 - value) + mint.lgamma(a + b)
                - mint.lgamma(a) - mint.lgamma(b))

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        log_beta = mint.lgamma(a) + mint.lgamma(b) - mint.lgamma(a + b)
        return (log_beta - (a - 1) * mint.digamma(a) - (b - 1) * mint.digamma(b)
                + (a + b - 2) * mint.digamma(a + b))
