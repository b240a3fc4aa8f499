"""kiln.distributions: torch.distributions' API for probabilistic code (RL policies, VAEs).

    import kiln
    from kiln.distributions import Normal, Categorical, kl_divergence

    policy = Normal(mu, sigma)              # mu, sigma: tensors (or numbers), broadcast
    action = policy.rsample()               # reparametrised: gradients reach mu and sigma
    loss = -policy.log_prob(action).sum()
    kl = kl_divergence(policy, Normal(0.0, 1.0))

Distributions (see each module's docstring for what it does not do):

    continuous.py     Normal, Uniform, Exponential, Laplace, Gamma, Beta
    discrete.py       Bernoulli, Categorical, OneHotCategorical, Poisson, Binomial
    multivariate.py   MultivariateNormal (loc with covariance_matrix / precision_matrix /
                      scale_tril), LowRankMultivariateNormal (loc, cov_factor, cov_diag)
    dirichlet.py      Dirichlet
    independent.py    Independent
    transformed_distribution.py  TransformedDistribution, with the transforms of
                      transforms.py: ExpTransform, AffineTransform, SigmoidTransform,
                      TanhTransform
    kl.py             kl_divergence, register_kl
    constraints.py    the constraints of arguments and supports

Each distribution has batch_shape, event_shape, sample(sample_shape), log_prob, entropy, mean,
mode, variance, stddev, expand, and where defined rsample, cdf, icdf and enumerate_support, as in
PyTorch; arguments are validated unless ``validate_args=False`` (see distribution.py). Samples
come from the default generator: ``kiln.manual_seed(s)`` repeats them. Gamma's ``rsample`` is
implicitly reparametrised, and Beta's and Dirichlet's are built on it (see continuous.py): their
gradients agree with PyTorch's in expectation, not sample by sample. Not here: Gamma's cdf (no
incomplete gamma function) and the other families.
"""

from . import constraints, transforms  # noqa: F401
from .continuous import Beta, Exponential, Gamma, Laplace, Normal, Uniform
from .dirichlet import Dirichlet
from .discrete import Bernoulli, Binomial, Categorical, OneHotCategorical, Poisson
from .distribution import Distribution
from .independent import Independent
from .kl import kl_divergence, register_kl
from .multivariate import LowRankMultivariateNormal, MultivariateNormal
from .transformed_distribution import TransformedDistribution
from .transforms import (AffineTransform, ExpTransform, SigmoidTransform, TanhTransform,
                         Transform)

__all__ = ["AffineTransform", "Bernoulli", "Beta", "Binomial", "Categorical", "Dirichlet",
           "Distribution", "ExpTransform", "Exponential", "Gamma", "Independent", "Laplace",
           "LowRankMultivariateNormal", "MultivariateNormal", "Normal", "OneHotCategorical",
           "Poisson", "SigmoidTransform", "TanhTransform", "Transform", "TransformedDistribution",
           "Uniform", "constraints", "kl_divergence", "register_kl", "transforms"]
