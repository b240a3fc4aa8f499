"""PyTorch's random functions that Kiln composes from its random primitives (RandUniform,
RandNormal, RandInt, Bernoulli): ``rand_like``, ``randn_like``, ``randint_like``, ``normal``,
``bernoulli`` (the op, with PyTorch's second form ``bernoulli(input, p)``; also as
``Tensor.bernoulli``), and the in-place samplers ``Tensor.uniform_``, ``normal_``, ``bernoulli_``
and ``exponential_``.
Each sampler takes PyTorch's ``generator=`` (a kiln.Generator; None draws from the
default generator), and draws what the default generator would after ``manual_seed`` of the
same seed.

The in-place samplers draw float64 samples for a float64 tensor and float32 samples rounded once
into the tensor for the other floating dtypes, and write them through assignment (``x[...] =
v``): under autograd a tensor that requires grad is refused (sample under ``kiln.no_grad()``, as
PyTorch's initializers do).
"""

import sys

from .. import _C
from ..errors import DTypeError, KilnTypeError, KilnValueError
from .._numpy import np
from ._composite import check_real

_mint = _C.mint

# The largest finite value of each floating-point dtype (PyTorch's finfo(dtype).max).
_LARGEST = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38,
            "float32": 3.4028234663852886e38, "float64": sys.float_info.max}


def check_floating(tensor, owner):
    # Random values rounded into integers or bools would not follow the distribution asked for.
    if not tensor.dtype.is_floating_point:
        raise DTypeError(f"{owner}: expected a floating-point tensor, got {tensor.dtype.name}")


def _largest_below(value, dtype):
    """The largest value of the floating ``dtype`` below the number ``value``, as a float."""
    numpy_type = {_C.dtype.float16: np.float16, _C.dtype.float32: np.float32,
                  _C.dtype.float64: np.float64}.get(dtype)
    if numpy_type is not None:
        nearest = numpy_type(value)
        below = nearest if nearest < value else np.nextafter(nearest, numpy_type(-np.inf))
        return float(below)
    # bfloat16 is float32's upper 16 bits: step the bits of the nearest one down by one.
    bits = int(np.float32(_C.tensor(value, dtype=dtype).item()).view(np.uint32)) >> 16
    nearest = float(np.uint32(bits << 16).view(np.float32))
    if nearest < value:
        return nearest
    if nearest == 0.0:
        bits = 0x8001  # the negative subnormal nearest 0
    else:
        bits = bits - 1 if nearest > 0 else bits + 1
    return float(np.uint32(bits << 16).view(np.float32))


def sample_dtype(tensor):
    return _C.dtype.float64 if tensor.dtype == _C.dtype.float64 else _C.dtype.float32


def _like(owner, input):  # noqa: A002
    if not isinstance(input, _C.Tensor):
        raise KilnTypeError(f"{owner}: expected input to be a kiln.Tensor, got "
                            f"{type(input).__name__}")
    return input


def rand_like(input, *, dtype=None, requires_grad=False, device=None):  # noqa: A002
    """Uniform samples in [0, 1) of ``input``'s shape, in its dtype unless ``dtype`` is given
    (a floating one)."""
    _like("rand_like", input)
    return _mint.rand(input.shape, dtype=input.dtype if dtype is None else dtype,
                      requires_grad=requires_grad, device=device)


def randn_like(input, *, dtype=None, requires_grad=False, device=None):  # noqa: A002
    """Standard normal samples of ``input``'s shape, in its dtype unless ``dtype`` is given (a
    floating one)."""
    _like("randn_like", input)
    return _mint.randn(input.shape, dtype=input.dtype if dtype is None else dtype,
                       requires_grad=requires_grad, device=device)


def randint_like(input, low=0, high=None, *, dtype=None, device=None):  # noqa: A002
    """Uniform integers in [low, high) of ``input``'s shape, in its dtype unless ``dtype`` is
    given; ``randint_like(x, high)`` counts from 0, as in PyTorch."""
    _like("randint_like", input)
    if high is None:
        if low == 0:
            raise KilnTypeError("randint_like: expected high (randint_like(input, high) or "
                                "randint_like(input, low, high))")
        low, high = 0, low
    return _mint.randint(low, high, input.shape, dtype=input.dtype if dtype is None else dtype,
                         device=device)


def normal(mean, std=1.0, size=None, *, generator=None, dtype=None):
    """Normal samples of the given ``mean`` and ``std``, PyTorch's ``torch.normal``: each a
    tensor or a number. With two numbers ``size`` gives the shape (and ``dtype`` the dtype, by
    default the default dtype); otherwise the result has the tensors' broadcast shape and the dtype
    of ``mean`` when it is a tensor, else of ``std``. As in PyTorch no gradient flows to ``mean`` or
    ``std`` (PyTorch's are zeros; here the result does not require grad): for a reparameterised
    sample write ``mean + std * kiln.mint.randn_like(std)``. A negative or NaN ``std``, a number or
    any element of a tensor, is a KilnValueError, as in PyTorch; inside a function kiln.jit traces a
    tensor ``std`` has no values yet and is not checked."""
    mean_is_tensor = isinstance(mean, _C.Tensor)
    std_is_tensor = isinstance(std, _C.Tensor)
    if not std_is_tensor and not check_real("normal", "std", std) >= 0:
        raise KilnValueError(f"normal: expected std >= 0, got {std}")
    if not mean_is_tensor:
        check_real("normal", "mean", mean)
    if not (mean_is_tensor or std_is_tensor):
        if size is None:
            raise KilnTypeError("normal: expected size when mean and std are numbers")
        eps = _mint.randn(size, generator=generator, dtype=dtype)
        return eps * std + mean
    if size is not None:
        raise KilnTypeError("normal: size is only for a number mean and std; a tensor's shape "
                            "gives the result's")
    if dtype is not None:
        raise KilnTypeError("normal: dtype is only for a number mean and std; the tensors' "
                            "dtype gives the result's")
    operands = [t.detach() for t in (mean, std) if isinstance(t, _C.Tensor)]
    for t in operands:
        if not t.dtype.is_floating_point:
            raise DTypeError(f"normal: expected a floating-point mean and std, got "
                             f"{t.dtype.name}")
    result_dtype = operands[0].dtype
    shape = _mint.broadcast_shapes(*[t.shape for t in operands])
    mean, std = (v.detach() if isinstance(v, _C.Tensor) else v for v in (mean, std))
    # PyTorch reads the values too. A traced std has none, and a tensor from outside the traced
    # function may change before the graph runs: neither is checked there. NaN fails `>= 0`.
    if std_is_tensor and not _C.jit.is_tracing() and not _mint.all(std >= 0).item():
        raise KilnValueError("normal: expected all elements of std >= 0.0, got a negative or NaN "
                             "one")
    sample = _mint.randn(shape, generator=generator, dtype=result_dtype) * std + mean
    return sample.to(result_dtype)


def _write(self, value, what):
    """Writes ``value`` into all of this tensor for the in-place sampler ``what``; returns it. As
    the in-place operators: under autograd a leaf that requires grad is refused, a non-leaf
    keeps requiring grad (the samples pass no gradient back)."""
    _C.mint._overwrite(self, value, what)
    return self


def _sample_into(self, sample, what):
    """Writes ``sample(dtype)`` (a tensor of this floating tensor's shape, drawn in ``dtype``)
    into it for ``what``; returns it."""
    return _write(self, sample(sample_dtype(self)), what)


def uniform_(self, from_=0.0, to=1.0, *, generator=None):
    """Fills the tensor with samples of U(from_, to); ``from_ > to``, or a bound or ``to -
    from_`` that is not a finite value of the tensor's dtype, is a KilnValueError (PyTorch's
    conditions). Returns the tensor."""
    check_floating(self, "uniform_")
    low, high = check_real("uniform_", "from", from_), check_real("uniform_", "to", to)
    if low > high:
        raise KilnValueError(f"uniform_: expected from <= to, got from={from_} > to={to}")
    largest = _LARGEST[self.dtype.name]
    # NaN fails every comparison, so it is refused here as well.
    if not (-largest <= low and high <= largest and high - low <= largest):
        raise KilnValueError(f"uniform_: expected from, to and to - from to be finite "
                             f"{self.dtype.name} values (at most {largest:g} in magnitude), got "
                             f"from={from_}, to={to}")
    sample = _mint.rand(self.shape, generator=generator, dtype=sample_dtype(self))
    # Rounded into the tensor's dtype a sample near `to` may become `to` itself (1.999 is 2 in
    # bfloat16, 1000 + (1 - 2**-24) is 1001 in float32): those take the largest value below it,
    # so that the range stays [from, to).
    rounded = (sample * (high - low) + low).to(self.dtype)
    if high > low:  # uniform_(a, a) is a, as in PyTorch
        rounded = _mint.where(rounded >= high, _largest_below(high, self.dtype), rounded)
    return _write(self, rounded, "uniform_")


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fills the tensor with samples of N(mean, std**2); a negative or NaN std is a
    KilnValueError. Returns the tensor."""
    check_floating(self, "normal_")
    mean = check_real("normal_", "mean", mean)
    if not check_real("normal_", "std", std) >= 0:
        raise KilnValueError(f"normal_: expected std >= 0, got {std}")
    return _sample_into(
        self, lambda dtype: _mint.randn(self.shape, generator=generator, dtype=dtype) * std
        + mean, "normal_")


def exponential_(self, lambd=1.0, *, generator=None):
    """Fills the tensor with samples of the exponential distribution of rate ``lambd`` (> 0):
    ``-log(1 - u) / lambd`` for u uniform in [0, 1). Returns the tensor."""
    check_floating(self, "exponential_")
    if not check_real("exponential_", "lambd", lambd) > 0:
        raise KilnValueError(f"exponential_: expected lambd > 0, got {lambd}")
    return _sample_into(
        self, lambda dtype: _mint.log1p(-_mint.rand(self.shape, generator=generator,
                                                    dtype=dtype)) * (-1.0 / lambd),
        "exponential_")


def _probabilities(owner, p, tensor):
    """The number ``p`` (in [0, 1]) as the probabilities of a draw of ``tensor``'s shape, in its
    sampling dtype."""
    value = check_real(owner, "p", p)
    if not 0 <= value <= 1:
        raise KilnValueError(f"{owner}: expected p in [0, 1], got {p}")
    return _mint.full(tensor.shape, value, dtype=sample_dtype(tensor))


def bernoulli(input, p=None, *, generator=None):  # noqa: A002
    """bernoulli(input, p=None, *, generator=None): 1 or 0 for each element. Without ``p``,
    kiln.mint's Bernoulli op: 1 with probability ``input[i]`` (floating-point, in [0, 1]), in
    input's dtype. With ``p`` (a number in [0, 1], PyTorch's second form), 1 with probability
    ``p`` for every element, in input's shape and dtype (any dtype, as in PyTorch; input's
    values are not read): what ``input.clone().bernoulli_(p)`` draws. The result does not
    require grad."""
    if p is None:
        return _mint.bernoulli(input, generator=generator)
    _like("bernoulli", input)
    sample = _mint.bernoulli(_probabilities("bernoulli", p, input), generator=generator)
    return sample.to(input.dtype)


def bernoulli_(self, p=0.5, *, generator=None):
    """Fills the tensor with 1 (probability ``p``) or 0: ``p`` a number or a tensor that
    broadcasts to this one's shape, in [0, 1]. Any numeric dtype, as in PyTorch. Returns the
    tensor."""
    if isinstance(p, _C.Tensor):
        if not p.dtype.is_floating_point:
            raise DTypeError(f"bernoulli_: expected floating-point probabilities, got "
                             f"{p.dtype.name}")
        probs = p.broadcast_to(self.shape)
    else:
        probs = _probabilities("bernoulli_", p, self)
    return _write(self, _mint.bernoulli(probs.detach(), generator=generator), "bernoulli_")


# Tensor.bernoulli replaces the op's bound method, adding ``p``.
for _method in (uniform_, normal_, exponential_, bernoulli_, bernoulli):
    setattr(_C.Tensor, _method.__name__, _method)
del _method
