"""The constraints of kiln.distributions, as torch.distributions.constraints: the valid values of
a distribution's parameters (``arg_constraints``) and of its samples (``support``).

A constraint's ``check(value)`` gives a bool tensor, True where ``value`` satisfies it, of
``value``'s shape less the constraint's ``event_dim`` rightmost dimensions (those form one
event, checked as a whole). ``is_discrete`` says whether the values are integers.

    real, real_vector, boolean, one_hot, simplex, positive, nonnegative, unit_interval,
    nonnegative_integer, positive_integer, lower_cholesky, positive_definite
    greater_than(b), greater_than_eq(b), less_than(b), interval(a, b), half_open_interval(a, b),
    integer_interval(a, b), independent(constraint, n)
    dependent, dependent_property: a constraint that depends on other parameters (not checked)
"""

from .. import mint
from ..errors import KilnValueError
from . import _linalg

__all__ = ["Constraint", "boolean", "dependent", "dependent_property", "greater_than",
           "greater_than_eq", "half_open_interval", "independent", "integer_interval", "interval",
           "is_dependent", "less_than", "lower_cholesky", "nonnegative", "nonnegative_integer",
           "one_hot", "positive", "positive_definite", "positive_integer", "real", "real_vector",
           "simplex", "unit_interval"]


class Constraint:
    """A region of valid values. ``event_dim`` rightmost dimensions form one event, checked as a
    whole; ``is_discrete`` marks integer values."""

    is_discrete = False
    event_dim = 0

    def check(self, value):
        """A bool tensor: True where ``value`` satisfies the constraint."""
        raise NotImplementedError

    def __repr__(self):
        return type(self).__name__.lstrip("_") + "()"


def _integral(value):
    """True where ``value`` holds an integer (always for integer and bool dtypes)."""
    if not value.dtype.is_floating_point:
        return mint.ones_like(value).bool()
    return value == mint.floor(value)


class _Dependent(Constraint):
    """A constraint that depends on other parameters (Uniform's ``low`` on ``high``): never
    checked on its own. Called as ``dependent(is_discrete=..., event_dim=...)`` it gives one with
    those attributes."""

    def __init__(self, *, is_discrete=False, event_dim=0):
        self.is_discrete = is_discrete
        self.event_dim = event_dim

    def __call__(self, *, is_discrete=None, event_dim=None):
        return _Dependent(is_discrete=self.is_discrete if is_discrete is None else is_discrete,
                          event_dim=self.event_dim if event_dim is None else event_dim)

    def check(self, value):
        raise KilnValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint):
    """Whether ``constraint`` is ``dependent`` (then it is not checked)."""
    return isinstance(constraint, _Dependent)


class _DependentProperty(property, _Dependent):
    """A property that is also a ``dependent`` constraint: ``support`` of Uniform, whose bounds
    come from the instance (``dependent_property(is_discrete=..., event_dim=...)`` as a
    decorator). Read on the class it is the constraint; on an instance, the property's value."""

    def __init__(self, fn=None, *, is_discrete=False, event_dim=0):
        property.__init__(self, fn)
        _Dependent.__init__(self, is_discrete=is_discrete, event_dim=event_dim)

    def __call__(self, fn):
        return _DependentProperty(fn, is_discrete=self.is_discrete, event_dim=self.event_dim)


class _IndependentConstraint(Constraint):
    """``base_constraint`` with its ``reinterpreted_batch_ndims`` rightmost batch dimensions made
    event dimensions: an event is valid where all its elements are."""

    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        if not isinstance(base_constraint, Constraint):
            raise KilnValueError(f"independent: expected a Constraint, got "
                                 f"{type(base_constraint).__name__}")
        if not isinstance(reinterpreted_batch_ndims, int) or reinterpreted_batch_ndims < 0:
            raise KilnValueError(f"independent: expected reinterpreted_batch_ndims >= 0, got "
                                 f"{reinterpreted_batch_ndims!r}")
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value):
        result = self.base_constraint.check(value)
        ndims = self.reinterpreted_batch_ndims
        if result.ndim < ndims:
            raise KilnValueError(f"Expected value.dim() >= {ndims + self.base_constraint.event_dim}"
                                 f" but got {value.ndim}")
        if ndims == 0:
            return result
        return mint.all(result.reshape(tuple(result.shape[:result.ndim - ndims]) + (-1,)), -1)

    def __repr__(self):
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


class _Real(Constraint):
    """Any real number except NaN (infinities included, as in PyTorch)."""

    def check(self, value):
        return value == value  # NaN is the one value unequal to itself


class _Boolean(Constraint):
    """0 or 1."""

    is_discrete = True

    def check(self, value):
        return (value == 0) | (value == 1)


class _OneHot(Constraint):
    """Vectors of zeros with a single 1."""

    is_discrete = True
    event_dim = 1

    def check(self, value):
        ones_and_zeros = mint.all((value == 0) | (value == 1), -1)
        return ones_and_zeros & (mint.sum(value, -1) == 1)


class _Bounded(Constraint):
    """A region given by a lower and/or an upper bound (numbers or tensors); the subclasses say
    how each bound is compared."""

    def __init__(self, lower_bound=None, upper_bound=None):
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound

    def __repr__(self):
        bounds = [f"{name}={bound}" for name, bound in (("lower_bound", self.lower_bound),
                                                        ("upper_bound", self.upper_bound))
                  if bound is not None]
        return f"{type(self).__name__.lstrip('_')}({', '.join(bounds)})"


class _GreaterThan(_Bounded):
    """Real numbers above ``lower_bound``."""

    def check(self, value):
        return value > self.lower_bound


class _GreaterThanEq(_Bounded):
    """Real numbers at or above ``lower_bound``."""

    def check(self, value):
        return value >= self.lower_bound


class _LessThan(Constraint):
    """Real numbers below ``upper_bound``."""

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return value < self.upper_bound

    def __repr__(self):
        return f"LessThan(upper_bound={self.upper_bound})"


class _Interval(_Bounded):
    """Real numbers in [lower_bound, upper_bound]."""

    def check(self, value):
        return (value >= self.lower_bound) & (value <= self.upper_bound)


class _HalfOpenInterval(_Bounded):
    """Real numbers in [lower_bound, upper_bound)."""

    def check(self, value):
        return (value >= self.lower_bound) & (value < self.upper_bound)


class _IntegerInterval(_Bounded):
    """Integers in [lower_bound, upper_bound]."""

    is_discrete = True

    def check(self, value):
        return _integral(value) & (value >= self.lower_bound) & (value <= self.upper_bound)


class _IntegerGreaterThan(_Bounded):
    """Integers at or above ``lower_bound``."""

    is_discrete = True

    def check(self, value):
        return _integral(value) & (value >= self.lower_bound)


class _Simplex(Constraint):
    """Vectors of nonnegative numbers that sum to 1 (to within 1e-6)."""

    event_dim = 1

    def check(self, value):
        return mint.all(value >= 0, -1) & (mint.abs(mint.sum(value, -1) - 1) < 1e-6)


class _LowerCholesky(Constraint):
    """Lower-triangular square matrices with a positive diagonal."""

    event_dim = 2

    def check(self, value):
        lower = mint.all((mint.tril(value) == value).flatten(-2), -1)
        return lower & mint.all(value.diagonal(dim1=-2, dim2=-1) > 0, -1)


class _PositiveDefinite(Constraint):
    """Symmetric positive-definite matrices: symmetric, with a Cholesky factor."""

    event_dim = 2

    def check(self, value):
        symmetric = mint.all(mint.isclose(value, value.mT, atol=1e-6).flatten(-2), -1)
        return symmetric & _linalg.is_positive_definite(value.detach())


dependent = _Dependent()
dependent_property = _DependentProperty
independent = _IndependentConstraint
boolean = _Boolean()
one_hot = _OneHot()
real = _Real()
real_vector = independent(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
interval = _Interval
half_open_interval = _HalfOpenInterval
unit_interval = _Interval(0.0, 1.0)
integer_interval = _IntegerInterval
nonnegative_integer = _IntegerGreaterThan(0)
positive_integer = _IntegerGreaterThan(1)
simplex = _Simplex()
lower_cholesky = _LowerCholesky()
positive_definite = _PositiveDefinite()
