"""MultivariateNormal and LowRankMultivariateNormal (torch.distributions').

    MultivariateNormal(loc, covariance_matrix=None, precision_matrix=None, scale_tril=None)
    LowRankMultivariateNormal(loc, cov_factor, cov_diag)   # covariance W @ W.mT + diag(D)

MultivariateNormal works from the Cholesky factor L of the covariance (``scale_tril``). Given a
``covariance_matrix`` or a ``precision_matrix`` instead, it factors it with kiln.linalg's
Cholesky factorisation and triangular solves (through ``_linalg``); a matrix that is not
positive definite is then a LinAlgError, as in PyTorch.

LowRankMultivariateNormal keeps the covariance as a factor W [..., n, m] and a positive diagonal
D [..., n]: its log_prob and entropy factor only the m x m capacitance matrix I + W^T D^-1 W
(the Woodbury identity and the matrix determinant lemma, see ``_linalg``), as PyTorch's.
``covariance_matrix``, ``precision_matrix`` and ``scale_tril`` are the dense n x n matrices,
computed when first read (``scale_tril`` factors D^1/2 (I + D^-1/2 W W^T D^-1/2) D^1/2, whose
middle matrix has eigenvalues of at least 1, as PyTorch does for stability).
"""

import math

from .. import _C, mint
from ..errors import KilnTypeError, KilnValueError, ShapeError
from . import _linalg, constraints
from .distribution import Centered, Distribution
from .utils import as_shape, lazy_property

__all__ = ["LowRankMultivariateNormal", "MultivariateNormal"]


def _check_tensors(owner, **tensors):
    for name, value in tensors.items():
        if not isinstance(value, _C.Tensor):
            raise KilnTypeError(f"{owner}: expected {name} to be a kiln.Tensor, got "
                                f"{type(value).__name__}")


def _check_loc(owner, loc):
    if loc.ndim < 1:
        raise KilnValueError(f"{owner}: loc must be at least one-dimensional")


def _precision_to_scale_tril(precision):
    """The lower Cholesky factor of the inverse of ``precision``, without inverting it: the
    factor of the flipped matrix, flipped back and transposed, is the inverse of L (as
    PyTorch)."""
    flipped = _linalg.cholesky(mint.flip(precision, (-2, -1)))
    return _linalg.inverse_lower(mint.flip(flipped, (-2, -1)).mT)


class _CenteredVector(Centered):
    """The base of the two multivariate normals: vectors centered on ``loc``, whose covariance
    matrices have the shape ``_matrix_shape()``."""

    def _matrix_shape(self):
        return self._batch_shape + self._event_shape + self._event_shape


class MultivariateNormal(_CenteredVector):
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
        _check_tensors("MultivariateNormal", loc=loc, **{name: matrix})
        _check_loc("MultivariateNormal", loc)
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


class LowRankMultivariateNormal(_CenteredVector):
    """The multivariate normal distribution of mean ``loc`` [..., n] and covariance
    ``cov_factor @ cov_factor.mT + diag(cov_diag)``, for ``cov_factor`` [..., n, m] and the
    positive ``cov_diag`` [..., n]; the batch dimensions of the three broadcast. ``rsample`` is
    loc + W @ eps_W + sqrt(D) * eps_D for standard normal eps_W [..., m] and eps_D [..., n]."""

    arg_constraints = {"loc": constraints.real_vector,
                       "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        owner = "LowRankMultivariateNormal"
        _check_tensors(owner, loc=loc, cov_factor=cov_factor, cov_diag=cov_diag)
        _check_loc(owner, loc)
        n = loc.shape[-1]
        if cov_factor.ndim < 2 or cov_factor.shape[-2] != n:
            raise ShapeError(f"{owner}: expected cov_factor [..., {n}, m] for loc [..., {n}], a "
                             f"batch of matrices with optional leading batch dimensions, got "
                             f"{tuple(cov_factor.shape)}")
        if cov_diag.ndim < 1 or cov_diag.shape[-1] != n:
            raise ShapeError(f"{owner}: expected cov_diag [..., {n}] for loc [..., {n}], got "
                             f"{tuple(cov_diag.shape)}")
        try:
            batch_shape = mint.broadcast_shapes(loc.shape[:-1], cov_factor.shape[:-2],
                                                cov_diag.shape[:-1])
        except ValueError as error:  # ShapeError is one
            raise ShapeError(f"{owner}: incompatible batch shapes: loc {tuple(loc.shape)}, "
                             f"cov_factor {tuple(cov_factor.shape)}, cov_diag "
                             f"{tuple(cov_diag.shape)}") from error
        self.loc = loc.expand(batch_shape + (n,))
        self.cov_factor = cov_factor.expand(batch_shape + tuple(cov_factor.shape[-2:]))
        self.cov_diag = cov_diag.expand(batch_shape + (n,))
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        super().__init__(batch_shape, (n,), validate_args=validate_args)
        # After validation: a diagonal that is not positive is named there, not by Cholesky.
        self._capacitance_tril = _linalg.capacitance_tril(cov_factor, cov_diag)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LowRankMultivariateNormal, _instance)
        batch_shape = as_shape("expand", batch_shape)
        vector_shape = batch_shape + self._event_shape
        new.loc = self.loc.expand(vector_shape)
        new.cov_diag = self.cov_diag.expand(vector_shape)
        new.cov_factor = self.cov_factor.expand(vector_shape + tuple(self.cov_factor.shape[-1:]))
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def variance(self):
        """The diagonal of the covariance: the rows' squared norms of W plus D."""
        factor = self._unbroadcasted_cov_factor
        return (mint.sum(factor * factor, -1) + self._unbroadcasted_cov_diag).expand(
            self._batch_shape + self._event_shape)

    @lazy_property
    def scale_tril(self):
        """The lower Cholesky factor of the covariance (see the module's docstring)."""
        n = self._event_shape[0]
        diag_sqrt = mint.sqrt(self._unbroadcasted_cov_diag).unsqueeze(-1)
        scaled = self._unbroadcasted_cov_factor / diag_sqrt
        middle = mint.matmul(scaled, scaled.mT) + mint.eye(n, dtype=scaled.dtype)
        return (diag_sqrt * _linalg.cholesky(middle)).expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        """The dense covariance W @ W.mT + diag(D)."""
        factor = self._unbroadcasted_cov_factor
        return (mint.matmul(factor, factor.mT)
                + mint.diag_embed(self._unbroadcasted_cov_diag)).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        """The inverse of the covariance by the Woodbury identity, D^-1 - A^T A."""
        woodbury = _linalg.woodbury_factor(self._unbroadcasted_cov_factor,
                                           self._unbroadcasted_cov_diag, self._capacitance_tril)
        precision = (mint.diag_embed(self._unbroadcasted_cov_diag.reciprocal())
                     - mint.matmul(woodbury.mT, woodbury))
        return precision.expand(self._matrix_shape())

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        rank = self.cov_factor.shape[-1]
        eps_factor = mint.randn(shape[:-1] + (rank,), dtype=self.loc.dtype)
        eps_diag = mint.randn(shape, dtype=self.loc.dtype)
        return (self.loc + _linalg.matvec(self._unbroadcasted_cov_factor, eps_factor)
                + mint.sqrt(self._unbroadcasted_cov_diag) * eps_diag)

    def _log_det(self):
        return _linalg.lowrank_logdet(self._unbroadcasted_cov_diag, self._capacitance_tril)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        distance = _linalg.lowrank_mahalanobis(self._unbroadcasted_cov_factor,
                                               self._unbroadcasted_cov_diag, value - self.loc,
                                               self._capacitance_tril)
        n = self._event_shape[0]
        return -0.5 * (n * math.log(2 * math.pi) + self._log_det() + distance)

    def entropy(self):
        n = self._event_shape[0]
        entropy = 0.5 * (n * (1.0 + math.log(2 * math.pi)) + self._log_det())
        return entropy.expand(self._batch_shape)
