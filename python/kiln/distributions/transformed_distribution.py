"""TransformedDistribution (torch.distributions.TransformedDistribution): a base distribution
pushed through a sequence of invertible transforms.

    # a log-normal, and a tanh-squashed normal (the policy of SAC)
    log_normal = TransformedDistribution(Normal(mu, sigma), [ExpTransform()])
    squashed = TransformedDistribution(Normal(mu, sigma), [TanhTransform(cache_size=1)])
    action = squashed.rsample()
    log_pi = squashed.log_prob(action)  # the cache gives the pre-tanh sample back exactly

``log_prob(y)`` inverts the transforms and subtracts each one's log-Jacobian:
log p(y) = log p_base(x) - sum log |dy/dx|.
"""

from ..autograd import no_grad
from ..errors import KilnValueError
from . import constraints
from .distribution import Distribution
from .independent import Independent
from .transforms import Transform
from .utils import as_shape, sum_rightmost

__all__ = ["TransformedDistribution"]


def _domain_event_dim(transforms):
    """The event dimensions the composition of ``transforms`` reads (as ComposeTransform)."""
    event_dim = transforms[-1].codomain.event_dim
    for transform in reversed(transforms):
        event_dim += transform.domain.event_dim - transform.codomain.event_dim
        event_dim = max(event_dim, transform.domain.event_dim)
    return event_dim


def _codomain_event_dim(transforms):
    """The event dimensions the composition of ``transforms`` writes."""
    event_dim = transforms[0].domain.event_dim
    for transform in transforms:
        event_dim += transform.codomain.event_dim - transform.domain.event_dim
        event_dim = max(event_dim, transform.codomain.event_dim)
    return event_dim


class TransformedDistribution(Distribution):
    """``base_distribution`` pushed through ``transforms`` (a Transform or a list of them,
    applied in order). The base is expanded to the shape the transforms broadcast to, and the
    dimensions they read as one event become event dimensions."""

    arg_constraints = {}

    def __init__(self, base_distribution, transforms, validate_args=None):
        if isinstance(transforms, Transform):
            transforms = [transforms]
        elif not (isinstance(transforms, (list, tuple))
                  and all(isinstance(t, Transform) for t in transforms)):
            raise KilnValueError(f"TransformedDistribution: transforms must be a Transform or a "
                                 f"list of Transforms, got {transforms!r}")
        self.transforms = list(transforms)
        base_shape = base_distribution.batch_shape + base_distribution.event_shape
        base_event_dim = len(base_distribution.event_shape)
        domain_event_dim = _domain_event_dim(self.transforms) if self.transforms else 0
        codomain_event_dim = _codomain_event_dim(self.transforms) if self.transforms else 0
        if len(base_shape) < domain_event_dim:
            raise KilnValueError(f"TransformedDistribution: base_distribution needs to have "
                                 f"shape with size at least {domain_event_dim}, but got "
                                 f"{base_shape}")
        forward_shape = base_shape
        for transform in self.transforms:
            forward_shape = transform.forward_shape(forward_shape)
        expanded_base_shape = self._base_shape(forward_shape)
        if expanded_base_shape != base_shape:
            base_distribution = base_distribution.expand(
                expanded_base_shape[:len(expanded_base_shape) - base_event_dim])
        if domain_event_dim > base_event_dim:
            base_distribution = Independent(base_distribution, domain_event_dim - base_event_dim)
        self.base_dist = base_distribution
        event_dim = codomain_event_dim + max(base_event_dim - domain_event_dim, 0)
        cut = len(forward_shape) - event_dim
        super().__init__(forward_shape[:cut], forward_shape[cut:], validate_args=validate_args)

    def _base_shape(self, shape):
        """The base distribution's shape for a transformed one of ``shape``."""
        for transform in reversed(self.transforms):
            shape = transform.inverse_shape(shape)
        return tuple(shape)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(TransformedDistribution, _instance)
        batch_shape = as_shape("expand", batch_shape)
        base_shape = self._base_shape(batch_shape + self._event_shape)
        new.base_dist = self.base_dist.expand(
            base_shape[:len(base_shape) - len(self.base_dist.event_shape)])
        new.transforms = self.transforms
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=False)
    def support(self):
        if not self.transforms:
            return self.base_dist.support
        support = self.transforms[-1].codomain
        if len(self._event_shape) > support.event_dim:
            support = constraints.independent(support,
                                              len(self._event_shape) - support.event_dim)
        return support

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    def sample(self, sample_shape=()):
        with no_grad():
            x = self.base_dist.sample(sample_shape)
            for transform in self.transforms:
                x = transform(x)
            return x

    def rsample(self, sample_shape=()):
        x = self.base_dist.rsample(sample_shape)
        for transform in self.transforms:
            x = transform(x)
        return x

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        event_dim = len(self._event_shape)
        log_prob = 0.0
        y = value
        for transform in reversed(self.transforms):
            x = transform.inv(y)
            event_dim += transform.domain.event_dim - transform.codomain.event_dim
            log_prob = log_prob - sum_rightmost(transform.log_abs_det_jacobian(x, y),
                                                event_dim - transform.domain.event_dim)
            y = x
        return log_prob + sum_rightmost(self.base_dist.log_prob(y),
                                        event_dim - len(self.base_dist.event_shape))

    def _monotonize_cdf(self, value):
        """The base's cdf as the transformed one's: flipped (1 - cdf) where the transforms
        decrease."""
        sign = 1
        for transform in self.transforms:
            sign = sign * transform.sign
        if isinstance(sign, int) and sign == 1:
            return value
        return sign * (value - 0.5) + 0.5

    def cdf(self, value):
        for transform in reversed(self.transforms):
            value = transform.inv(value)
        if self._validate_args:
            self.base_dist._validate_sample(value)
        return self._monotonize_cdf(self.base_dist.cdf(value))

    def icdf(self, value):
        value = self.base_dist.icdf(self._monotonize_cdf(value))
        for transform in self.transforms:
            value = transform(value)
        return value

    def __repr__(self):
        return f"TransformedDistribution({self.base_dist!r}, {self.transforms!r})"
