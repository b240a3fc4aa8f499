"""Transforms for TransformedDistribution (torch.distributions.transforms): invertible maps with
the log of their Jacobian's absolute determinant.

    ExpTransform()                     y = exp(x)                  real -> positive
    AffineTransform(loc, scale)        y = loc + scale * x         real -> real
    SigmoidTransform()                 y = 1 / (1 + exp(-x))       real -> unit interval
    TanhTransform()                    y = tanh(x)                 real -> (-1, 1)
    t.inv                              the inverse transform

All are bijective, monotone and elementwise (AffineTransform's ``event_dim`` makes its
rightmost dimensions one event, summing the Jacobian over them). With ``cache_size=1`` a
transform remembers its last input and output, so that ``t.inv(t(x))`` returns ``x`` itself:
TanhTransform near +-1 and SigmoidTransform near 0 and 1 lose the input to rounding otherwise.
"""

import math
import numbers

from .. import _C, mint
from .._type_info import finfo
from ..errors import KilnNotImplementedError, KilnValueError
from . import constraints

__all__ = ["AffineTransform", "ExpTransform", "SigmoidTransform", "TanhTransform", "Transform"]


class Transform:
    """An invertible map ``y = t(x)`` with ``t.inv(y)``, ``log_abs_det_jacobian(x, y)``, the
    constraints ``domain`` and ``codomain``, ``bijective`` and ``sign`` (+1 or -1 for a monotone
    increasing or decreasing map). Subclasses give ``_call`` and ``_inverse``."""

    bijective = False
    domain = constraints.real
    codomain = constraints.real

    def __init__(self, cache_size=0):
        if cache_size not in (0, 1):
            raise KilnValueError(f"{type(self).__name__}: expected cache_size 0 or 1, got "
                                 f"{cache_size!r}")
        self._cache_size = cache_size
        self._cached_x_y = None, None
        self._inv = None

    @property
    def event_dim(self):
        """The number of rightmost dimensions that form one event (of domain and codomain)."""
        if self.domain.event_dim != self.codomain.event_dim:
            raise KilnValueError("Please use either .domain.event_dim or .codomain.event_dim")
        return self.domain.event_dim

    @property
    def inv(self):
        """The inverse transform (``t.inv.inv`` is ``t``)."""
        inverse = self._inv
        if inverse is None:
            inverse = self._inv = _InverseTransform(self)
        return inverse

    @property
    def sign(self):
        """+1 or -1 for a monotone increasing or decreasing map."""
        raise KilnNotImplementedError(f"{type(self).__name__} does not define sign")

    def with_cache(self, cache_size=1):
        """This transform with the given cache size (a new one where it differs)."""
        if self._cache_size == cache_size:
            return self
        if type(self).__init__ is Transform.__init__:
            return type(self)(cache_size=cache_size)
        raise KilnNotImplementedError(f"{type(self).__name__}.with_cache is not implemented")

    def __call__(self, x):
        """y = t(x), remembered when the cache is on."""
        if self._cache_size == 0:
            return self._call(x)
        cached_x, cached_y = self._cached_x_y
        if x is cached_x:
            return cached_y
        y = self._call(x)
        self._cached_x_y = x, y
        return y

    def _inv_call(self, y):
        """x = t.inv(y), the cached input when ``y`` is the cached output."""
        if self._cache_size == 0:
            return self._inverse(y)
        cached_x, cached_y = self._cached_x_y
        if y is cached_y:
            return cached_x
        x = self._inverse(y)
        self._cached_x_y = x, y
        return x

    def _call(self, x):
        raise KilnNotImplementedError(f"{type(self).__name__} does not define _call")

    def _inverse(self, y):
        raise KilnNotImplementedError(f"{type(self).__name__} does not define _inverse")

    def log_abs_det_jacobian(self, x, y):
        """log |dy/dx| at the input ``x`` and output ``y``."""
        raise KilnNotImplementedError(f"{type(self).__name__} does not define "
                                      f"log_abs_det_jacobian")

    def forward_shape(self, shape):
        """The shape of the output for an input of ``shape``."""
        return tuple(shape)

    def inverse_shape(self, shape):
        """The shape of the input for an output of ``shape``."""
        return tuple(shape)

    def __repr__(self):
        return type(self).__name__ + "()"


class _InverseTransform(Transform):
    """The inverse of a transform: ``_call`` and ``_inverse`` swapped, the Jacobian negated."""

    def __init__(self, transform):
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    @property
    def domain(self):
        return self._inv.codomain

    @property
    def codomain(self):
        return self._inv.domain

    @property
    def bijective(self):
        return self._inv.bijective

    @property
    def sign(self):
        return self._inv.sign

    @property
    def inv(self):
        return self._inv

    def with_cache(self, cache_size=1):
        return self._inv.with_cache(cache_size).inv

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape):
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape):
        return self._inv.forward_shape(shape)

    def __repr__(self):
        return f"{self._inv!r}.inv"


class ExpTransform(Transform):
    """y = exp(x)."""

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def _call(self, x):
        return mint.exp(x)

    def _inverse(self, y):
        return mint.log(y)

    def log_abs_det_jacobian(self, x, y):
        return x


class AffineTransform(Transform):
    """y = loc + scale * x for numbers or tensors ``loc`` and ``scale`` (non-zero), over events
    of ``event_dim`` rightmost dimensions."""

    bijective = True

    def __init__(self, loc, scale, event_dim=0, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.loc = loc
        self.scale = scale
        self._event_dim = event_dim

    @property
    def event_dim(self):
        return self._event_dim

    @property
    def domain(self):
        if self._event_dim == 0:
            return constraints.real
        return constraints.independent(constraints.real, self._event_dim)

    @property
    def codomain(self):
        return self.domain

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return AffineTransform(self.loc, self.scale, self._event_dim, cache_size=cache_size)

    @property
    def sign(self):
        if isinstance(self.scale, numbers.Real):
            return 1 if float(self.scale) > 0 else -1 if float(self.scale) < 0 else 0
        return mint.sign(self.scale)

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        shape = tuple(x.shape)
        if isinstance(self.scale, numbers.Real):
            result = mint.full_like(x, math.log(abs(self.scale)))
        else:
            result = mint.log(mint.abs(self.scale))
        if self._event_dim:
            result = mint.sum(result.reshape(tuple(result.shape[:-self._event_dim]) + (-1,)), -1)
            shape = shape[:-self._event_dim]
        return result.expand(shape)

    def _parameter_shapes(self):
        return [p.shape for p in (self.loc, self.scale) if isinstance(p, _C.Tensor)]

    def forward_shape(self, shape):
        return mint.broadcast_shapes(tuple(shape), *self._parameter_shapes())

    def inverse_shape(self, shape):
        return mint.broadcast_shapes(tuple(shape), *self._parameter_shapes())

    def __repr__(self):
        return f"AffineTransform(loc={self.loc}, scale={self.scale}, event_dim={self._event_dim})"


class SigmoidTransform(Transform):
    """y = sigmoid(x), kept inside (0, 1): at least the dtype's smallest normal number and at
    most 1 - eps, so that the inverse and the Jacobian stay finite."""

    domain = constraints.real
    codomain = constraints.unit_interval
    bijective = True
    sign = +1

    def _call(self, x):
        info = finfo(x.dtype)
        return mint.clamp(mint.sigmoid(x), info.tiny, 1 - info.eps)

    def _inverse(self, y):
        info = finfo(y.dtype)
        y = mint.clamp(y, info.tiny, 1 - info.eps)
        return mint.log(y) - mint.log1p(-y)

    def log_abs_det_jacobian(self, x, y):
        return -mint.softplus(-x) - mint.softplus(x)


class TanhTransform(Transform):
    """y = tanh(x). The Jacobian is computed from x, 2 * (log 2 - x - softplus(-2x)), which
    stays accurate where 1 - tanh(x)^2 rounds to 0."""

    domain = constraints.real
    codomain = constraints.interval(-1.0, 1.0)
    bijective = True
    sign = +1

    def _call(self, x):
        return mint.tanh(x)

    def _inverse(self, y):
        return mint.atanh(y)

    def log_abs_det_jacobian(self, x, y):
        return 2.0 * (math.log(2.0) - x - mint.softplus(-2.0 * x))
