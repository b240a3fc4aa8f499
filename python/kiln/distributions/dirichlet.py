"""Dirichlet (torch.distributions.Dirichlet): distributions over the probability simplex.

    weights = Dirichlet(concentration)     # concentration [..., k] > 0: batch [...], event [k]
    w = weights.rsample()                  # w >= 0, w.sum(-1) == 1; gradients reach concentration

A draw normalises k standard gamma draws (continuous.sample_simplex), so ``rsample``
differentiates through Gamma's implicit gradient (Note [Gamma's implicit gradient]): an unbiased
estimate of the gradient of an expectation, not PyTorch's value sample by sample (PyTorch
differentiates the Dirichlet's marginal cdfs implicitly; the two agree in expectation). Each
component of a draw is within [tiny, 1 - eps] of its dtype, as PyTorch's. ``mode`` is
PyTorch's: (c - 1)^+ normalised, NaN where every (c - 1)^+ is 0 but not every c is below 1, and
where every c is below 1 (the density is unbounded at each vertex) the first vertex.
"""

from .. import _C, mint
from ..errors import KilnTypeError, KilnValueError
from . import constraints
from .continuous import sample_simplex
from .distribution import Distribution
from .utils import xlogy

__all__ = ["Dirichlet"]


class Dirichlet(Distribution):
    """The Dirichlet distribution of ``concentration`` [..., k] (positive): density
    Gamma(c_0) / prod Gamma(c_i) * prod x_i^(c_i - 1) on the simplex, c_0 = sum c_i. The last
    dimension is the event, the others the batch."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if not isinstance(concentration, _C.Tensor):
            raise KilnTypeError(f"Dirichlet: expected concentration to be a kiln.Tensor, got "
                                f"{type(concentration).__name__}")
        if concentration.ndim < 1:
            raise KilnValueError("Dirichlet: `concentration` parameter must be at least "
                                 "one-dimensional (the last dimension is the event)")
        self.concentration = concentration
        shape = tuple(concentration.shape)
        super().__init__(shape[:-1], shape[-1:], validate_args=validate_args)

    def rsample(self, sample_shape=()):
        """Normalised standard gamma draws of the concentrations (see the module's docstring)."""
        return sample_simplex(self.concentration.expand(self._extended_shape(sample_shape)))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return (mint.sum(xlogy(c - 1, value), -1) + mint.lgamma(mint.sum(c, -1))
                - mint.sum(mint.lgamma(c), -1))

    @property
    def mean(self):
        return self.concentration / mint.sum(self.concentration, -1, keepdim=True)

    @property
    def mode(self):
        excess = mint.clamp(self.concentration - 1, min=0)
        mode = excess / mint.sum(excess, -1, keepdim=True)
        k = self._event_shape[0]
        first_vertex = (mint.arange(k) == 0).to(mode.dtype)
        all_below_one = mint.all(self.concentration < 1, -1, keepdim=True)
        return mint.where(all_below_one, first_vertex, mode)

    @property
    def variance(self):
        c = self.concentration
        total = mint.sum(c, -1, keepdim=True)
        return c * (total - c) / (total ** 2 * (total + 1))

    def entropy(self):
        c = self.concentration
        k = self._event_shape[0]
        total = mint.sum(c, -1)
        return (mint.sum(mint.lgamma(c), -1) - mint.lgamma(total)
                - (k - total) * mint.digamma(total)
                - mint.sum((c - 1) * mint.digamma(c), -1))
