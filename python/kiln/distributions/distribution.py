"""``Distribution``, the base class of kiln.distributions (torch.distributions.Distribution).

A distribution has a ``batch_shape`` (independent, differently parametrised distributions) and
an ``event_shape`` (the shape of one draw). ``sample(sample_shape)`` and ``rsample`` give
``sample_shape + batch_shape + event_shape``; ``log_prob(value)`` gives the shape of ``value``
less the event dimensions, broadcast with the batch. ``rsample`` (where ``has_rsample``) is a
reparametrised draw: a differentiable function of the parameters and of parameter-free noise,
so gradients flow through it; ``sample`` is the same draw without gradients.

Arguments are validated as in PyTorch: on construction every parameter against its
``arg_constraints``, in ``log_prob`` (and ``cdf``) the value against ``support``; a violation
is a KilnValueError (a ValueError, as PyTorch raises). Validation reads the values, a sync
point: turn it off with ``validate_args=False`` or for all new distributions with
``Distribution.set_default_validate_args(False)``. Inside a function kiln.jit traces, values
are not known and nothing is validated.
"""

import warnings

from .. import _C, mint
from ..autograd import no_grad
from ..errors import KilnNotImplementedError, KilnValueError
from . import constraints
from .utils import as_shape, lazy_property

__all__ = ["Distribution"]


def _all(valid):
    return bool(mint.all(valid).item())


class Distribution:
    """The base of every distribution. Subclasses give ``arg_constraints``, ``support`` and the
    methods they define; the others raise KilnNotImplementedError."""

    has_rsample = False
    has_enumerate_support = False
    _validate_args = True

    @staticmethod
    def set_default_validate_args(value):
        """Turns argument validation on (True, the default) or off for distributions made
        afterwards without an explicit ``validate_args``."""
        if value not in (True, False):
            raise KilnValueError(f"set_default_validate_args: expected True or False, got "
                                 f"{value!r}")
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = tuple(batch_shape)
        self._event_shape = tuple(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validating():
            for param, constraint in self._declared("arg_constraints", {}).items():
                if constraints.is_dependent(constraint):
                    continue
                # The other one of probs and logits is not computed just to check it.
                if param not in self.__dict__ and isinstance(getattr(type(self), param, None),
                                                             lazy_property):
                    continue
                value = getattr(self, param)
                if not _all(constraint.check(value)):
                    raise KilnValueError(
                        f"Expected parameter {param} ({type(value).__name__} of shape "
                        f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                        f"constraint {constraint!r}, but found invalid values:\n{value}")

    def _declared(self, name, default):
        """The ``arg_constraints`` or ``support`` of the distribution for validation: a subclass
        that does not declare it is warned about and not checked, as in PyTorch."""
        try:
            return getattr(self, name)
        except NotImplementedError:
            warnings.warn(f"{type(self).__name__} does not define `{name}`: set it, or make the "
                          f"distribution with validate_args=False to turn off validation")
            return default

    def _validating(self):
        # Traced values are not known until the graph runs.
        return self._validate_args and not _C.jit.is_tracing()

    @property
    def batch_shape(self):
        """The shape over which parameters are batched."""
        return self._batch_shape

    @property
    def event_shape(self):
        """The shape of a single sample (without batching)."""
        return self._event_shape

    @property
    def arg_constraints(self):
        """A dict of each parameter's name to the constraint its values satisfy."""
        raise KilnNotImplementedError(f"{type(self).__name__} does not define arg_constraints")

    @property
    def support(self):
        """The constraint that the distribution's values satisfy."""
        raise KilnNotImplementedError(f"{type(self).__name__} does not define support")

    def _undefined(self, what):
        return KilnNotImplementedError(f"{type(self).__name__} does not implement {what}")

    @property
    def mean(self):
        """The mean of the distribution."""
        raise self._undefined("mean")

    @property
    def mode(self):
        """The mode of the distribution."""
        raise self._undefined("mode")

    @property
    def variance(self):
        """The variance of the distribution."""
        raise self._undefined("variance")

    @property
    def stddev(self):
        """The standard deviation: the square root of the variance."""
        return mint.sqrt(self.variance)

    def expand(self, batch_shape, _instance=None):
        """A new distribution of this kind with its batch dimensions expanded to ``batch_shape``
        (new dimensions on the left, size-1 ones broadcast), sharing the parameters' memory.
        This base version expands every parameter in ``arg_constraints`` that the instance
        holds; distributions with other state override it."""
        new = self._get_checked_instance(type(self), _instance)
        batch_shape = as_shape("expand", batch_shape)
        for name in self.arg_constraints:
            if name in self.__dict__:
                value = self.__dict__[name]
                trailing = tuple(value.shape[len(self.batch_shape):])
                new.__dict__[name] = value.expand(batch_shape + trailing)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _get_checked_instance(self, cls, _instance=None):
        """A bare instance of ``cls`` for ``expand`` to fill: ``_instance`` when a subclass that
        does not override ``expand`` passes itself, else a new one made without ``__init__``."""
        if _instance is None and type(self).__init__ != cls.__init__:
            raise KilnNotImplementedError(
                f"Subclass {type(self).__name__} of {cls.__name__} that defines a custom "
                f"__init__ method must also define a custom .expand() method.")
        return cls.__new__(type(self)) if _instance is None else _instance

    def sample(self, sample_shape=()):
        """A sample of shape ``sample_shape + batch_shape + event_shape``, without gradients."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        """A reparametrised sample of shape ``sample_shape + batch_shape + event_shape``, through
        which gradients reach the parameters."""
        raise self._undefined("rsample (it has no reparametrised sampler)")

    def sample_n(self, n):
        """``n`` samples: ``sample((n,))``."""
        return self.sample((n,))

    def log_prob(self, value):
        """The log of the probability density (or mass) at ``value``."""
        raise self._undefined("log_prob")

    def cdf(self, value):
        """The cumulative distribution function at ``value``."""
        raise self._undefined("cdf")

    def icdf(self, value):
        """The inverse of the cumulative distribution function at ``value``."""
        raise self._undefined("icdf")

    def enumerate_support(self, expand=True):
        """Every value of a discrete distribution's support along a new leftmost dimension,
        expanded over the batch (``expand=True``) or of size 1 there."""
        raise self._undefined("enumerate_support")

    def entropy(self):
        """The entropy, of shape ``batch_shape``."""
        raise self._undefined("entropy")

    def perplexity(self):
        """exp(entropy)."""
        return mint.exp(self.entropy())

    def _extended_shape(self, sample_shape=()):
        """``sample_shape + batch_shape + event_shape``."""
        return as_shape("sample", sample_shape) + self._batch_shape + self._event_shape

    def _validate_sample(self, value):
        """Checks a value given to log_prob (or cdf): a kiln.Tensor whose rightmost dimensions
        are ``event_shape``, broadcastable with the batch, within ``support``."""
        if not isinstance(value, _C.Tensor):
            raise KilnValueError(f"The value argument to log_prob must be a kiln.Tensor, got "
                                 f"{type(value).__name__}")
        shape, event = tuple(value.shape), self._event_shape
        if shape[len(shape) - len(event):] != event:  # a shorter shape differs too
            raise KilnValueError(f"The right-most size of value must match event_shape: "
                                 f"{shape} vs {event}.")
        expected = self._batch_shape + event
        for actual_size, expected_size in zip(reversed(shape), reversed(expected)):
            if actual_size != 1 and expected_size != 1 and actual_size != expected_size:
                raise KilnValueError(f"Value is not broadcastable with batch_shape+event_shape: "
                                     f"{shape} vs {expected}.")
        support = self._declared("support", None) if self._validating() else None
        if support is not None and not _all(support.check(value)):
            raise KilnValueError(f"Expected value argument ({type(value).__name__} of shape "
                                 f"{shape}) to be within the support ({support!r}) of the "
                                 f"distribution {self!r}, but found invalid values:\n{value}")

    def __repr__(self):
        try:
            names = self.arg_constraints
        except NotImplementedError:
            names = {}  # no warning here: repr is not validation
        shown = []
        for name in names:
            value = self.__dict__.get(name)
            if isinstance(value, _C.Tensor):
                shown.append(f"{name}: {value.item() if value.numel() == 1 else value.shape}")
        return f"{type(self).__name__}({', '.join(shown)})"


class Centered(Distribution):
    """The base of the distributions symmetric about ``loc``, which is their mean and mode
    (Normal, Laplace, MultivariateNormal, LowRankMultivariateNormal)."""

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc
