"""Helpers shared by kiln.distributions, as torch.distributions.utils: ``broadcast_all``,
``probs_to_logits``, ``logits_to_probs``, ``clamp_probs`` and ``lazy_property``, and the private
ones the families share (sums over the rightmost dimensions, ``xlogy``, rejection sampling).
"""

import numbers

from .. import _C, mint
from .._type_info import finfo
from ..autograd import enable_grad
from ..errors import KilnTypeError

__all__ = ["broadcast_all", "clamp_probs", "lazy_property", "logits_to_probs",
           "probs_to_logits"]


def broadcast_all(*values):
    """The tensors and numbers ``values`` as tensors of one broadcast shape: numbers take the first
    tensor's dtype (the default dtype when all are numbers), as in PyTorch. The tensors are expanded
    views, so gradients reach the originals."""
    for value in values:
        if not isinstance(value, (_C.Tensor, numbers.Number)):
            raise KilnTypeError(f"broadcast_all: expected kiln.Tensor or number arguments, got "
                                f"{type(value).__name__}")
    tensors = [v for v in values if isinstance(v, _C.Tensor)]
    dtype = tensors[0].dtype if tensors else _C.get_default_dtype()
    values = [v if isinstance(v, _C.Tensor) else _C.tensor(float(v), dtype=dtype)
              for v in values]
    shape = mint.broadcast_shapes(*[v.shape for v in values])
    return tuple(v if v.shape == shape else v.expand(shape) for v in values)


def clamp_probs(probs):
    """``probs`` clamped into [eps, 1 - eps] for its dtype's eps, so that their logs are finite."""
    eps = finfo(probs.dtype).eps
    return mint.clamp(probs, eps, 1 - eps)


def logits_to_probs(logits, is_binary=False):
    """The probabilities of ``logits``: sigmoid for a binary event, else softmax over the last
    dimension."""
    return mint.sigmoid(logits) if is_binary else mint.softmax(logits, -1)


def probs_to_logits(probs, is_binary=False):
    """The logits of ``probs`` (clamped away from 0 and 1 first): log(p) - log1p(-p) for a binary
    event, else log(p)."""
    clamped = clamp_probs(probs)
    if is_binary:
        return mint.log(clamped) - mint.log1p(-clamped)
    return mint.log(clamped)


class lazy_property:  # noqa: N801  (PyTorch's name)
    """A property computed on first read and then stored on the instance, under autograd: the
    other one of ``probs`` and ``logits`` is computed only when asked for."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__
        self.__name__ = wrapped.__name__

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        with enable_grad():
            value = self.wrapped(instance)
        instance.__dict__[self.__name__] = value
        return value


def sum_rightmost(value, dims):
    """``value`` summed over its ``dims`` rightmost dimensions (none for 0)."""
    if dims <= 0:
        return value
    return mint.sum(value, tuple(range(-dims, 0)))


def xlogy(x, y):
    """x * log(y), and 0 where x is 0 (even where y is 0), with finite gradients there."""
    zero = x == 0
    return mint.where(zero, 0.0, x * mint.log(mint.where(zero, 1.0, y)))


def as_shape(owner, shape):
    """``shape`` (a sequence of ints) as a tuple; anything else is a KilnTypeError."""
    if not isinstance(shape, (tuple, list)) or not all(isinstance(d, int) for d in shape):
        raise KilnTypeError(f"{owner}: expected a shape as a tuple of ints, got {shape!r}")
    return tuple(shape)


def rejection_sample(propose, shape, dtype):
    """Draws from a rejection sampler for every element of ``shape``: ``propose()`` gives
    (candidates, accepted) of that shape, and each element keeps its first accepted candidate.
    Every round proposes for all elements, which costs little where acceptance is high (the
    samplers here accept over 90%) and keeps each round a few whole-tensor ops. Reads the
    accepted mask, so it runs eagerly."""
    result = mint.zeros(shape, dtype=dtype)
    pending = mint.ones(shape, dtype=_C.dtype.bool)
    while True:
        candidates, accepted = propose()
        result = mint.where(pending & accepted, candidates, result)
        pending = pending & ~accepted
        if not mint.any(pending).item():
            return result
