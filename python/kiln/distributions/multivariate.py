"""MultivariateNormal (torch.distributions.MultivariateNormal).

The distribution works from the Cholesky factor L of the covariance (``scale_tril``). Given a
``covariance_matrix`` or a ``precision_matrix`` instead, it factors it with kiln.linalg's
Cholesky factorisation and triangular solves (through ``_linalg``); a matrix that is not
positive definite is then a LinAlgError, as in PyTorch.
"""

import math

from .. import _C, mint
from ..errors import KilnTypeError, KilnValueError, ShapeError
from . import _linalg, constraints
from .distribution import Distribution
from .utils import as_shape, lazy_property

__all__ = ["MultivariateNormal"]


def _precision_to_scale_tril(precision):
    """The lower Cholesky factor of the inverse of ``precision``, without inverting it: the
    factor of the flipped matrix, flipped back and transposed, is the inverse of L (as
    PyTorch)."""
    flipped = _linalg.cholesky(mint.flip(precision, (-2, -1)))
    return _linalg.inverse_lower(mint.flip(flipped, (-2, -1)).mT)


class MultivariateNormal(Distribution):
    """The multivariate normal distribution of mean ``loc`` [..., n] and covariance given by
    exactly one of ``covariance_matrix``, ``precision_matrix`` (its inverse) or ``scale_tril``
    (its lower Cholesky factor, positive diagonal), each [..., n, n]. Batch dimensions of the
    mean and the matrix broadcast. ``rsample`` is loc + L @ eps."""

    arg_constraints = {"loc": constraints.real_vector,
                       "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        given = {name: matrix for name, matrix in (("covariance_matrix", covariance_matrix),
                                                   ("precision_matrix", precision_matrix),
                                                   ("scale_tril", scale_tril))
                 if matrix is not None}
        if len(given) != 1:
            raise KilnValueError(f"MultivariateNormal: exactly one of covariance_matrix or "
                                 f"precision_matrix or scale_tril may be specified, got "
                                 f"{len(given)}")
        ((name, matrix),) = given.items()
        for what, value in (("loc", loc), (name, matrix)):
            if not isinstance(value, _C.Tensor):
                raise KilnTypeError(f"MultivariateNormal: expected {what} to be a kiln.Tensor, "
                                    f"got {type(value).__name__}")
        if loc.ndim < 1:
            raise KilnValueError("MultivariateNormal: loc must be at least one-dimensional")
        if matrix.ndim < 2 or matrix.shape[-1] != matrix.shape[-2]:
            raise ShapeError(f"MultivariateNormal: expected {name} [..., n, n], a square matrix "
                             f"with optional leading batch dimensions, got {tuple(matrix.shape)}")
        if matrix.shape[-1] != loc.shape[-1]:
            raise ShapeError(f"MultivariateNormal: expected {name} [..., {loc.shape[-1]}, "
                             f"{loc.shape[-1]}] for loc [..., {loc.shape[-1]}], got "
                             f"{tuple(matrix.shape)}")
        batch_shape = mint.broadcast_shapes(matrix.shape[:-2], loc.shape[:-1])
        n = loc.shape[-1]
        self.__dict__[name] = matrix.expand(batch_shape + (n, n))
        self.loc = loc.expand(batch_shape + (n,))
        super().__init__(batch_shape, (n,), validate_args=validate_args)
        if name == "scale_tril":
            self._unbroadcasted_scale_tril = matrix
        elif name == "covariance_matrix":
            self._unbroadcasted_scale_tril = _linalg.cholesky(matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = as_shape("expand", batch_shape)
        n = self._event_shape[0]
        new.loc = self.loc.expand(batch_shape + (n,))
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                new.__dict__[name] = self.__dict__[name].expand(batch_shape + (n, n))
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return self._batch_shape + self._event_shape + self._event_shape

    @lazy_property
    def scale_tril(self):
        """The lower Cholesky factor of the covariance."""
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        """The covariance matrix, L @ L.mT."""
        lower = self._unbroadcasted_scale_tril
        return mint.matmul(lower, lower.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        """The inverse of the covariance, L^-T @ L^-1."""
        inverse = _linalg.inverse_lower(self._unbroadcasted_scale_tril)
        return mint.matmul(inverse.mT, inverse).expand(self._matrix_shape())

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        lower = self._unbroadcasted_scale_tril
        return mint.sum(lower * lower, -1).expand(self._batch_shape + self._event_shape)

    def rsample(self, sample_shape=()):
        """loc + L @ eps for standard normal noise eps [..., n]."""
        eps = mint.randn(self._extended_shape(sample_shape), dtype=self.loc.dtype)
        return self.loc + _linalg.matvec(self._unbroadcasted_scale_tril, eps)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        lower = self._unbroadcasted_scale_tril
        distance = _linalg.mahalanobis(lower, value - self.loc)
        n = self._event_shape[0]
        return -0.5 * (n * math.log(2 * math.pi) + distance) - _linalg.half_log_det(lower)

    def entropy(self):
        n = self._event_shape[0]
        entropy = 0.5 * n * (1.0 + math.log(2 * math.pi)) + _linalg.half_log_det(
            self._unbroadcasted_scale_tril)
        return entropy.expand(self._batch_shape)
