"""Independent (torch.distributions.Independent): some of a distribution's batch dimensions
reinterpreted as event dimensions.

    # a diagonal normal over vectors: log_prob sums over the last dimension
    d = Independent(Normal(loc, scale), 1)   # loc, scale [B, n]: batch (B,), event (n,)
"""

from ..errors import KilnValueError
from . import constraints
from .distribution import Distribution
from .utils import as_shape, sum_rightmost

__all__ = ["Independent"]


class Independent(Distribution):
    """``base_distribution`` with its ``reinterpreted_batch_ndims`` rightmost batch dimensions
    made event dimensions: ``log_prob`` and ``entropy`` sum over them."""

    arg_constraints = {}

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        if not isinstance(base_distribution, Distribution):
            raise KilnValueError(f"Independent: expected a Distribution, got "
                                 f"{type(base_distribution).__name__}")
        shape = base_distribution.batch_shape + base_distribution.event_shape
        batch_ndims = len(base_distribution.batch_shape)
        if (not isinstance(reinterpreted_batch_ndims, int)
                or not 0 <= reinterpreted_batch_ndims <= batch_ndims):
            raise KilnValueError(f"Independent: expected reinterpreted_batch_ndims in [0, "
                                 f"{batch_ndims}] (the base's batch dimensions, "
                                 f"{base_distribution.batch_shape}), got "
                                 f"{reinterpreted_batch_ndims!r}")
        event_dim = reinterpreted_batch_ndims + len(base_distribution.event_shape)
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        super().__init__(shape[:len(shape) - event_dim], shape[len(shape) - event_dim:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Independent, _instance)
        batch_shape = as_shape("expand", batch_shape)
        reinterpreted = self._event_shape[:self.reinterpreted_batch_ndims]
        new.base_dist = self.base_dist.expand(batch_shape + reinterpreted)
        new.reinterpreted_batch_ndims = self.reinterpreted_batch_ndims
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @property
    def has_enumerate_support(self):
        # Enumerating would need the product of the supports of the reinterpreted dimensions.
        return self.reinterpreted_batch_ndims == 0 and self.base_dist.has_enumerate_support

    @constraints.dependent_property
    def support(self):
        support = self.base_dist.support
        if self.reinterpreted_batch_ndims == 0:
            return support
        return constraints.independent(support, self.reinterpreted_batch_ndims)

    @property
    def mean(self):
        return self.base_dist.mean

    @property
    def mode(self):
        return self.base_dist.mode

    @property
    def variance(self):
        return self.base_dist.variance

    def sample(self, sample_shape=()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        return sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def enumerate_support(self, expand=True):
        if self.reinterpreted_batch_ndims > 0:
            raise self._undefined("enumerate_support over reinterpreted batch dimensions")
        return self.base_dist.enumerate_support(expand=expand)

    def __repr__(self):
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"
