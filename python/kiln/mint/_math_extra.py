"""PyTorch's elementwise math, products and window factories that Kiln composes of kiln.mint ops
in Python, with PyTorch's names, argument order, defaults and dtype rules:

    logaddexp(input, other)    logaddexp2(input, other)    xlogy(input, other)
    hypot(input, other)        copysign(input, other)      heaviside(input, values)
    fmax(input, other)         fmin(input, other)          float_power(input, exponent)
    frexp(input) -> (mantissa, exponent)                   ldexp(input, other)
    gcd(input, other)          lcm(input, other)           sgn(input)       signbit(input)
    sinc(input)    deg2rad(input)    rad2deg(input)    positive(input)
    dist(input, other, p=2)    inner(input, other)    vdot(input, other)    trace(input)
    tensordot(a, b, dims=2)
    logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False)
    hann_window(window_length, periodic=True, *, dtype=None, device=None, requires_grad=False)
    hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, ...)
    blackman_window(window_length, periodic=True, *, ...)
    bartlett_window(window_length, periodic=True, *, ...)
    kaiser_window(window_length, periodic=True, beta=12.0, *, ...)

and the Tensor methods PyTorch has for them (all but tensordot, logspace and the windows), with
the in-place ``xlogy_``, ``hypot_``, ``copysign_``, ``heaviside_``, ``float_power_``,
``ldexp_``, ``gcd_``, ``lcm_``, ``sgn_``, ``sinc_``, ``deg2rad_`` and ``rad2deg_``. They
differentiate through autograd and trace under kiln.jit; frexp's mantissa is
``x * 2**-exponent``, with that gradient, as PyTorch's. The binary functions broadcast their
operands and promote them; 16-bit floats are computed in float32 and rounded once.

- Floating-point results: ``logaddexp``, ``logaddexp2`` and ``hypot`` take floating-point
  operands (integers are a DTypeError, as in PyTorch); ``xlogy``, ``copysign``, ``sinc``,
  ``deg2rad``, ``rad2deg`` and ``ldexp`` give the default dtype for integers and bools;
  ``float_power`` computes in float64 and returns float64. ``xlogy``, ``copysign`` and
  ``float_power`` also take a number for either operand.
- ``logaddexp`` is max + log1p(exp(-|a - b|)) (and infinities of one sign are themselves); its
  gradient at a == b is 1/2 each, and at two infinities of one sign 1 for input (PyTorch:
  NaN). ``hypot`` scales by the larger magnitude, so it neither overflows nor underflows, and
  is inf where either is (even beside NaN, as C's hypot). ``xlogy`` is 0 where x == 0 unless y
  is NaN, as PyTorch's; its gradient in x there is log(y), as PyTorch's, but 0 where y is 0 or
  inf (PyTorch: NaN or inf).
- ``sgn`` is 0 at NaN, as PyTorch's (kiln.mint.sign is NaN there). ``signbit`` tells -0.0 from
  0.0; the sign bit of a NaN cannot be read from Kiln's ops, so signbit(NaN) is False, and
  copysign with a NaN ``other`` tensor gives the positive magnitude (PyTorch reads the bit; a
  number's is read in Python). ``copysign``'s gradient is 0 for ``other``, as PyTorch's.
- ``fmax`` / ``fmin`` take the other operand where one is NaN; a tie splits the gradient in
  halves, as PyTorch's. ``heaviside`` needs operands of one dtype, as PyTorch's, and is 0
  at NaN (PyTorch's rule; NumPy gives NaN).
- ``gcd`` and ``lcm`` take integer tensors: Euclid's algorithm run for as many rounds as the
  worst case of the dtype needs (13 for 8 bits, 93 for int64), so it traces; gcd(0, 0) is 0.
- ``frexp`` gives the mantissa in (-1, -0.5] or [0.5, 1) and the int32 exponent; 0, inf and NaN
  are their own mantissa with exponent 0.
- ``dist`` is kiln.mint.vector_norm(input - other, p); ``inner``, ``vdot`` and ``tensordot``
  need operands of one dtype, as PyTorch's and kiln.mint.dot; tensordot contracts through
  kiln.mint.einsum (at most 52 dims in all), a size of 1 against another summed first, as in
  PyTorch. ``trace`` sums the diagonal of a matrix (int64 for integers).
- ``logspace`` and the windows compute in float64 and round once to ``dtype`` (the default dtype
  by default; the windows take floating-point dtypes only), where PyTorch computes in ``dtype``: a
  float32 result may differ from PyTorch's in the last place. ``periodic=True`` (PyTorch's
  default) computes a window one longer and drops its last element. kaiser_window's modified
  Bessel function I0 is its power series, summed here in float64 for as many terms as the
  largest argument, ``beta``, needs; there is no I0 op.
"""

import collections
import functools
import math

from .. import _C
from .. import _tensor_methods
from .._checks import as_int, checked_bool, checked_int, wrap_dim
from ..errors import DTypeError, KilnTypeError, KilnValueError, ShapeError
from ._composite import (_NARROW, _cast, _widened, _zero_gradient_to, check_real,
                         check_same_dtype)
from ._indexing_ops import _tensor
from ._norms import _checked_order, vector_norm
from ._products import diagonal, dot, einsum

__all__ = ["MantissaExponent", "logaddexp", "logaddexp2", "xlogy", "hypot", "copysign", "fmax",
           "fmin", "heaviside", "float_power", "frexp", "ldexp", "gcd", "lcm", "sgn", "signbit",
           "sinc", "deg2rad", "rad2deg", "positive", "dist", "inner", "vdot", "tensordot",
           "trace", "logspace", "hann_window", "hamming_window", "blackman_window",
           "bartlett_window", "kaiser_window"]

Tensor = _C.Tensor
_mint = _C.mint
MantissaExponent = collections.namedtuple("MantissaExponent", ["mantissa", "exponent"])

_LN2 = math.log(2.0)
# The einsum sublist form's labels: ints in [0, 52).
_MAX_LABELS = 52


def _isnan(x):
    return x != x


def _promoted(owner, input, other):  # noqa: A002
    """The promoted dtype of two kiln tensors."""
    _tensor(owner, "input", input)
    _tensor(owner, "other", other)
    return _C.promote_types(input.dtype, other.dtype)


def _floating_operands(owner, input, other):  # noqa: A002
    """Two kiln tensors of a floating-point promoted dtype (else a DTypeError), in the dtype to
    compute in, and that dtype."""
    dtype = _promoted(owner, input, other)
    if not dtype.is_floating_point:
        raise DTypeError(f"{owner}: expected floating-point operands, got {input.dtype.name} and "
                         f"{other.dtype.name}")
    return _widened(_cast(input, dtype)), _widened(_cast(other, dtype)), dtype


def _float_result(owner, input, other):  # noqa: A002
    """``input`` and ``other`` (kiln tensors, or one of them a real number) as tensors of the
    dtype to compute in, and the result's dtype: the tensors' promoted dtype, the default dtype
    for integers and bools (a number is weak: it does not widen a floating tensor)."""
    tensors = [value for value in (input, other) if isinstance(value, Tensor)]
    if not tensors:
        raise KilnTypeError(f"{owner}: expected input or other to be a kiln.Tensor, got "
                            f"{type(input).__name__} and {type(other).__name__}")
    dtype = functools.reduce(_C.promote_types, [t.dtype for t in tensors])
    if not dtype.is_floating_point:
        dtype = _C.get_default_dtype()
    compute = _C.dtype.float32 if dtype in _NARROW else dtype
    operands = []
    for name, value in (("input", input), ("other", other)):
        if isinstance(value, Tensor):
            operands.append(_cast(value, compute))
        else:
            operands.append(_mint.full([], check_real(owner, name, value), dtype=compute))
    return operands[0], operands[1], dtype


def _float_unary(owner, input):  # noqa: A002
    """``input`` in the dtype to compute in (float32 for 16-bit floats) and the result's dtype
    (the input's if floating-point, else the default dtype)."""
    _tensor(owner, "input", input)
    dtype = input.dtype if input.dtype.is_floating_point else _C.get_default_dtype()
    return _widened(_cast(input, dtype)), dtype


# ------------------------------------------------------------------------------------------------
# Logarithms and magnitudes


def _log_add(owner, input, other, exp, log1p_scale):  # noqa: A002
    """log(b^input + b^other) for base b (exp is b^x, log1p_scale 1 / ln b): max + log1p(b^-|d|)
    * log1p_scale. Two infinities of one sign are that infinity; their difference (NaN) is kept
    out of the computed branch (Note [Gradients through where] in _composite.py)."""
    a, b, dtype = _floating_operands(owner, input, other)
    same = (a == b) & (_mint.abs(a) == float("inf"))
    a_safe, b_safe = _mint.where(same, 0.0, a), _mint.where(same, 0.0, b)
    spread = _mint.log1p(exp(-_mint.abs(a_safe - b_safe)))
    if log1p_scale != 1.0:
        spread = spread * log1p_scale
    return _cast(_mint.where(same, a, _mint.maximum(a_safe, b_safe) + spread), dtype)


def logaddexp(input, other):  # noqa: A002  (PyTorch's argument names)
    """logaddexp(input, other): log(exp(input) + exp(other)) without overflow, of
    floating-point tensors."""
    return _log_add("logaddexp", input, other, _mint.exp, 1.0)


def logaddexp2(input, other):  # noqa: A002
    """logaddexp2(input, other): log2(2**input + 2**other) without overflow, of floating-point
    tensors."""
    return _log_add("logaddexp2", input, other, _mint.exp2, 1.0 / _LN2)


def xlogy(input, other):  # noqa: A002
    """xlogy(input, other): ``input * log(other)``, 0 where input == 0 (unless other is NaN,
    then NaN), the default dtype for integers; either may be a number."""
    x, y, dtype = _float_result("xlogy", input, other)
    zero = x == 0
    # x * log(y) is 0 at x == 0, with PyTorch's gradient log(y) in x, except where log(y) is
    # infinite (y is 0 or inf: 0 * inf is NaN, so those take log(1), gradient 0) or NaN (y < 0:
    # the where picks 0; a NaN y stays NaN).
    y = _mint.where(zero & ((y == 0) | (y == float("inf"))), 1.0, y)
    return _cast(_mint.where(zero & (y < 0), 0.0, x * _mint.log(y)), dtype)


def hypot(input, other):  # noqa: A002
    """hypot(input, other): sqrt(input**2 + other**2) of floating-point tensors, without
    overflow or underflow; inf where either is infinite."""
    a, b, dtype = _floating_operands("hypot", input, other)
    a, b = _mint.abs(a), _mint.abs(b)
    larger, smaller = _mint.maximum(a, b), _mint.minimum(a, b)
    infinite = (a == float("inf")) | (b == float("inf"))
    # larger * sqrt(1 + (smaller / larger)**2); larger == 0 (both 0) and inf kept out of the
    # ratio, whose NaN would reach the value or the gradient.
    safe = _mint.where((larger == 0) | infinite, 1.0, larger)
    ratio = _mint.where(infinite, 0.0, smaller) / safe
    result = larger * _mint.sqrt(1.0 + ratio * ratio)
    return _cast(_mint.where(infinite, float("inf"), result), dtype)


# ------------------------------------------------------------------------------------------------
# Signs, extremes, steps


def _negative_sign(x):
    """Where the sign bit of a floating-point ``x`` is set, as far as the ops can tell: below 0,
    and -0.0 (whose reciprocal is -inf); NaN reads as positive (see the module's
    documentation)."""
    return (x < 0) | ((x == 0) & (1.0 / x < 0))


def signbit(input):  # noqa: A002
    """signbit(input): where the sign bit is set (bool): x < 0 and -0.0 for floats, x < 0 for
    integers, False for bools."""
    _tensor("signbit", "input", input)
    if input.dtype == _C.dtype.bool:
        return _mint.zeros_like(input, dtype=_C.dtype.bool)
    if input.dtype.is_floating_point:
        return _negative_sign(input)
    return input < 0


def copysign(input, other):  # noqa: A002
    """copysign(input, other): the magnitude of ``input`` with the sign of ``other`` (-0.0
    counting as negative), the default dtype for integers; either may be a number."""
    x, y, dtype = _float_result("copysign", input, other)
    magnitude = _mint.abs(x)
    if isinstance(other, Tensor):
        signed = _mint.where(_negative_sign(y), -magnitude, magnitude)
        return _cast(_zero_gradient_to(signed, y), dtype)
    # A number's sign bit is read in Python, NaN's included.
    return _cast(-magnitude if math.copysign(1.0, other) < 0 else magnitude, dtype)


def _nan_skipping(owner, extreme, input, other):  # noqa: A002
    """``extreme`` (kiln.mint.maximum or minimum) of the promoted operands, each NaN replaced by
    the other operand (so only two NaN make NaN); a tie splits the gradient in halves, and a
    replaced NaN passes the other's gradient to it, as PyTorch's."""
    dtype = _promoted(owner, input, other)
    a, b = _cast(input, dtype), _cast(other, dtype)
    if dtype.is_floating_point:
        a, b = _mint.where(_isnan(a), b, a), _mint.where(_isnan(b), a, b)
    return extreme(a, b)


def fmax(input, other):  # noqa: A002
    """fmax(input, other): the elementwise maximum, the other operand where one is NaN (NaN
    where both are)."""
    return _nan_skipping("fmax", _mint.maximum, input, other)


def fmin(input, other):  # noqa: A002
    """fmin(input, other): the elementwise minimum, the other operand where one is NaN (NaN
    where both are)."""
    return _nan_skipping("fmin", _mint.minimum, input, other)


def heaviside(input, values):  # noqa: A002
    """heaviside(input, values): 0 where input < 0 (and at NaN), ``values`` where input == 0,
    1 where input > 0; input and values of one dtype."""
    owner = "heaviside"
    _tensor(owner, "input", input)
    _tensor(owner, "values", values)
    check_same_dtype(owner, "input", input, "values", values)
    return _mint.where(input == 0, values, (input > 0).to(input.dtype))


def sgn(input):  # noqa: A002
    """sgn(input): PyTorch's sgn of a real tensor (Kiln has no complex tensors): -1, 0 or 1 by
    the sign, and 0 at NaN, as PyTorch's sign and sgn (kiln.mint.sign gives NaN there)."""
    _tensor("sgn", "input", input)
    sign = _mint.sign(input)
    return _mint.masked_fill(sign, _isnan(input), 0.0) if input.dtype.is_floating_point else sign


def positive(input):  # noqa: A002
    """positive(input): ``input`` itself, as PyTorch's; a bool tensor is a DTypeError."""
    _tensor("positive", "input", input)
    if input.dtype == _C.dtype.bool:
        raise DTypeError("positive: expected a numeric tensor, got bool (unary + is not defined "
                         "for bools)")
    return input


# ------------------------------------------------------------------------------------------------
# Powers of two, float_power, sinc, angles


def _times_power_of_two(x, exponent):
    """x * 2**exponent for a floating ``exponent`` tensor of integers, in two exact steps so that
    neither factor overflows or underflows (2**-1074 * 2**2098 for the smallest float64)."""
    half = _mint.floor(exponent * 0.5)
    return x * _mint.exp2(half) * _mint.exp2(exponent - half)


def frexp(input):  # noqa: A002
    """frexp(input): the named tuple (mantissa, exponent) with input = mantissa * 2**exponent,
    |mantissa| in [0.5, 1) (the input's dtype) and exponent int32, of a floating-point tensor;
    0, inf and NaN have exponent 0 and are their own mantissa."""
    owner = "frexp"
    _tensor(owner, "input", input)
    if not input.dtype.is_floating_point:
        raise DTypeError(f"{owner}: expected a floating-point tensor, got {input.dtype.name}")
    x = _cast(input, _C.dtype.float64)
    plain = x.detach()
    regular = (plain != 0) & (_mint.abs(plain) < float("inf"))
    size = _mint.abs(_mint.where(regular, plain, 1.0))
    exponent = _mint.floor(_mint.log2(size)) + 1.0
    # log2 rounds up just below a power of two: one step of correction either way.
    scaled = _times_power_of_two(size, -exponent)
    exponent = (exponent + (scaled >= 1.0).to(_C.dtype.float64)
                - (scaled < 0.5).to(_C.dtype.float64))
    exponent = _mint.where(regular, exponent, 0.0)
    # The scaling by a power of two is exact: the mantissa rounds to the input's dtype exactly.
    mantissa = _times_power_of_two(x, -exponent)
    return MantissaExponent(_cast(mantissa, input.dtype), exponent.to(_C.dtype.int32))


def ldexp(input, other):  # noqa: A002
    """ldexp(input, other): ``input * 2**other`` in the promoted floating dtype (the default dtype
    for integers), the power computed in that dtype (float32 for 16-bit floats) first, so it may
    overflow where the product would not, as PyTorch's."""
    owner = "ldexp"
    _tensor(owner, "input", input)
    _tensor(owner, "other", other)
    dtype = _C.promote_types(input.dtype, other.dtype)
    dtype = dtype if dtype.is_floating_point else _C.get_default_dtype()
    compute = _C.dtype.float32 if dtype in _NARROW else dtype
    power = _mint.pow(_C.tensor(2.0, dtype=compute), other)
    return _cast(_cast(input, compute) * power, dtype)


def float_power(input, exponent):  # noqa: A002
    """float_power(input, exponent): ``input ** exponent`` computed in float64 and returned in
    float64 whatever the dtypes; either may be a number."""
    owner = "float_power"
    if not (isinstance(input, Tensor) or isinstance(exponent, Tensor)):
        raise KilnTypeError(f"{owner}: expected input or exponent to be a kiln.Tensor, got "
                            f"{type(input).__name__} and {type(exponent).__name__}")
    operands = []
    for name, value in (("input", input), ("exponent", exponent)):
        operands.append(_cast(value, _C.dtype.float64) if isinstance(value, Tensor)
                        else check_real(owner, name, value))
    return _mint.pow(*operands)


def sinc(input):  # noqa: A002
    """sinc(input): sin(pi * x) / (pi * x), 1 at 0 (gradient 0 there); the default dtype for
    integers."""
    x, dtype = _float_unary("sinc", input)
    zero = x == 0
    scaled = _mint.where(zero, 1.0, x) * math.pi
    return _cast(_mint.where(zero, 1.0, _mint.sin(scaled) / scaled), dtype)


def deg2rad(input):  # noqa: A002
    """deg2rad(input): degrees to radians, ``input * pi / 180``; the default dtype for
    integers."""
    x, dtype = _float_unary("deg2rad", input)
    return _cast(x * (math.pi / 180.0), dtype)


def rad2deg(input):  # noqa: A002
    """rad2deg(input): radians to degrees, ``input * 180 / pi``; the default dtype for
    integers."""
    x, dtype = _float_unary("rad2deg", input)
    return _cast(x * (180.0 / math.pi), dtype)


# ------------------------------------------------------------------------------------------------
# gcd, lcm


def _euclid_rounds(bits):
    """The most remainder steps Euclid's algorithm takes on non-negative values below 2**bits:
    Lamé's bound, n with F(n + 2) > 2**bits, and one more for the first step, which may only
    swap the two."""
    previous, current, n = 1, 1, 0
    while current <= 2 ** bits:
        previous, current, n = current, previous + current, n + 1
    return n + 1


def _integer_operands(owner, input, other):  # noqa: A002
    dtype = _promoted(owner, input, other)
    if dtype.is_floating_point or dtype == _C.dtype.bool:
        raise DTypeError(f"{owner}: expected integer tensors, got {input.dtype.name} and "
                         f"{other.dtype.name}")
    return _cast(input, dtype), _cast(other, dtype)


def _gcd(a, b):
    """gcd of two integer tensors of one dtype."""
    rounds = _euclid_rounds(8 * a.dtype.itemsize)
    a, b = _mint.abs(a), _mint.abs(b)
    # PyTorch's loop, while a != 0: (a, b) = (b % a, a); run for the dtype's worst case, an
    # element whose a is 0 staying as it is (b % 1 is 0).
    for _ in range(rounds):
        zero = a == 0
        a, b = _mint.remainder(b, _mint.where(zero, 1, a)), _mint.where(zero, b, a)
    return b


def gcd(input, other):  # noqa: A002
    """gcd(input, other): the greatest common divisor of the integer tensors, elementwise and
    non-negative; gcd(0, 0) = 0."""
    return _gcd(*_integer_operands("gcd", input, other))


def lcm(input, other):  # noqa: A002
    """lcm(input, other): the least common multiple of the integer tensors, elementwise and
    non-negative; 0 where either is 0."""
    a, b = _integer_operands("lcm", input, other)
    divisor = _gcd(a, b)
    return _mint.abs(_mint.trunc_divide(a, _mint.where(divisor == 0, 1, divisor)) * b)


# ------------------------------------------------------------------------------------------------
# Products and norms


def dist(input, other, p=2):  # noqa: A002
    """dist(input, other, p=2): the p-norm of ``input - other`` (broadcast; at least one
    floating-point), kiln.mint.vector_norm with ord ``p``."""
    owner = "dist"
    dtype = _promoted(owner, input, other)
    if not dtype.is_floating_point:
        raise DTypeError(f"{owner}: expected a floating-point input or other, got "
                         f"{input.dtype.name} and {other.dtype.name}")
    return vector_norm(input - other, _checked_order(owner, "p", p))


def _same_dtype(owner, input, other):  # noqa: A002
    _tensor(owner, "input", input)
    _tensor(owner, "other", other)
    check_same_dtype(owner, "input", input, "other", other)


def _contracted_dims(a, b, dims):
    """tensordot's ``dims`` as two lists of dims of a and b: an int n (the last n of a with the
    first n of b), a pair of ints or of lists of ints, or a tensor of those."""
    owner = "tensordot"
    if isinstance(dims, Tensor):
        dims = int(dims.item()) if dims.numel() == 1 else dims.tolist()
    count = as_int(dims)
    if count is not None:
        if count < 0:
            raise KilnValueError(f"{owner}: expected dims >= 0, got {count}")
        if count > min(a.ndim, b.ndim):
            raise KilnValueError(f"{owner}: expected dims at most the number of dims of a "
                                 f"({a.ndim}) and of b ({b.ndim}), got {count}")
        return list(range(a.ndim - count, a.ndim)), list(range(count))
    if not isinstance(dims, (list, tuple)) or len(dims) != 2:
        raise KilnTypeError(f"{owner}: expected dims to be an int, or a pair of lists of dims "
                            f"(one for a, one for b), got {type(dims).__name__} {dims!r}")
    lists = []
    for name, given, x in (("a", dims[0], a), ("b", dims[1], b)):
        given = [given] if as_int(given) is not None else given
        if not isinstance(given, (list, tuple)):
            raise KilnTypeError(f"{owner}: expected the dims of {name} to be an int or a list "
                                f"of ints, got {type(given).__name__} {given!r}")
        wrapped = [wrap_dim(owner, f"a dim of {name}", checked_int(owner, f"a dim of {name}", d),
                            x.ndim, scalar_as_1d=False) for d in given]
        if len(set(wrapped)) != len(wrapped):
            raise KilnValueError(f"{owner}: a dim of {name} appears more than once in "
                                 f"{list(given)}")
        lists.append(wrapped)
    if len(lists[0]) != len(lists[1]):
        raise KilnValueError(f"{owner}: expected as many dims of a as of b, got {lists[0]} and "
                             f"{lists[1]}")
    return lists


def tensordot(a, b, dims=2):
    """tensordot(a, b, dims=2): the sum of products of ``a`` and ``b`` (one dtype) over the dims
    ``dims`` pairs up: an int n for the last n of a with the first n of b, or a pair of lists
    ([dims of a], [dims of b]). The result has a's other dims, then b's. A size of 1 against
    another is summed first, as in PyTorch."""
    owner = "tensordot"
    _tensor(owner, "a", a)
    _tensor(owner, "b", b)
    check_same_dtype(owner, "a", a, "b", b)
    dims_a, dims_b = _contracted_dims(a, b, dims)
    for da, db in zip(dims_a, dims_b):
        sa, sb = a.shape[da], b.shape[db]
        if sa != sb and 1 not in (sa, sb):
            raise ShapeError(f"{owner}: contracted dims need to match, but a has size {sa} in "
                             f"dim {da} and b has size {sb} in dim {db}")
    free_b = [d for d in range(b.ndim) if d not in dims_b]
    if a.ndim + len(free_b) > _MAX_LABELS:
        raise KilnValueError(f"{owner}: at most {_MAX_LABELS} dims in a and the free dims of b "
                             f"together, got {a.ndim + len(free_b)}")
    labels_b = {db: da for da, db in zip(dims_a, dims_b)}
    labels_b.update({d: a.ndim + k for k, d in enumerate(free_b)})
    output = [d for d in range(a.ndim) if d not in dims_a] + [labels_b[d] for d in free_b]
    return einsum(a, list(range(a.ndim)), b, [labels_b[d] for d in range(b.ndim)], output)


def inner(input, other):  # noqa: A002
    """inner(input, other): the sum of products over the last dims of both (their sizes
    equal), of one dtype; with a 0-d operand, the product ``input * other``."""
    _tensor("inner", "input", input)
    _tensor("inner", "other", other)
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    _same_dtype("inner", input, other)
    if input.shape[-1] != other.shape[-1]:
        raise ShapeError(f"inner: expected the last dims of input and other to match, got shapes "
                         f"{list(input.shape)} and {list(other.shape)}")
    return tensordot(input, other, ([-1], [-1]))


def vdot(input, other):  # noqa: A002
    """vdot(input, other): the dot product of two 1-d tensors of one dtype and length
    (kiln.mint.dot: Kiln's tensors are real, so there is nothing to conjugate)."""
    _same_dtype("vdot", input, other)
    if input.ndim != 1 or other.ndim != 1 or input.shape != other.shape:
        raise ShapeError(f"vdot: expected two 1-d tensors of one length, got shapes "
                         f"{list(input.shape)} and {list(other.shape)}")
    return dot(input, other)


def trace(input):  # noqa: A002
    """trace(input): the sum of the diagonal of a matrix (int64 for integers)."""
    _tensor("trace", "input", input)
    if input.ndim != 2:
        raise ShapeError(f"trace: expected a matrix, got shape {list(input.shape)}")
    if input.dtype == _C.dtype.bool:
        raise DTypeError("trace: expected a numeric matrix, got bool")
    return _mint.sum(diagonal(input))


# ------------------------------------------------------------------------------------------------
# logspace and windows


def _factory_dtype(owner, dtype, floating_only):
    dtype = _C.get_default_dtype() if dtype is None else _C.as_dtype(dtype)
    if floating_only and not dtype.is_floating_point:
        raise DTypeError(f"{owner}: expected a floating-point dtype, got {dtype.name}")
    return dtype


def _finished(values, dtype, requires_grad):
    """A float64 factory result in ``dtype``, requiring grad if asked, a leaf."""
    result = values.to(dtype)
    return result.requires_grad_() if requires_grad else result


def _endpoint(owner, name, value):
    """A number, or a 0-d tensor's value (read, as kiln.mint.linspace reads it)."""
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise ShapeError(f"{owner}: expected {name} to be a number or a 0-d tensor, got "
                             f"shape {list(value.shape)}")
        value = value.item()
    return check_real(owner, name, value)


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None,  # noqa: A002
             requires_grad=False):
    """logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    ``steps`` values base**e for e evenly spaced from start to end (both included), in the
    default dtype unless ``dtype`` (computed in float64; an integer dtype truncates)."""
    owner = "logspace"
    start, end = _endpoint(owner, "start", start), _endpoint(owner, "end", end)
    steps = checked_int(owner, "steps", steps, low=0)
    base = check_real(owner, "base", base)
    checked_bool(owner, "requires_grad", requires_grad)
    dtype = _factory_dtype(owner, dtype, floating_only=False)
    exponents = _mint.linspace(start, end, steps, _C.dtype.float64, device=device)
    return _finished(_mint.pow(base, exponents), dtype, requires_grad)


def _window(owner, window_length, periodic, dtype, device, requires_grad, shape):
    """A window of ``window_length`` elements: ``shape(k, n)`` of the float64 positions k = 0 ..
    n - 1 of a symmetric window of n (one more and the last dropped when ``periodic``)."""
    length = checked_int(owner, "window_length", window_length, low=0)
    checked_bool(owner, "periodic", periodic)
    checked_bool(owner, "requires_grad", requires_grad)
    dtype = _factory_dtype(owner, dtype, floating_only=True)
    if length <= 1:
        values = _mint.ones(length, dtype=_C.dtype.float64, device=device)
    else:
        n = length + 1 if periodic else length
        values = shape(_mint.arange(n, dtype=_C.dtype.float64, device=device), n)
        values = values.narrow(0, 0, length) if periodic else values
    return _finished(values, dtype, requires_grad)


def _cosine_sum(k, n, coefficients):
    """sum_j (-1)**j * a_j * cos(2 pi j k / (n - 1)) for the coefficients a_0, a_1, ... (the
    generalized cosine windows: Hann, Hamming, Blackman)."""
    angle = k * (2.0 * math.pi / (n - 1))
    result = _mint.full([], coefficients[0], dtype=_C.dtype.float64)
    for j, a in enumerate(coefficients[1:], 1):
        result = result + _mint.cos(angle * j) * (-a if j % 2 else a)
    return result


def hann_window(window_length, periodic=True, *, dtype=None, device=None, requires_grad=False):
    """hann_window(window_length, periodic=True, *, dtype=None, device=None,
    requires_grad=False): 0.5 - 0.5 * cos(2 pi k / (N - 1)), N the window's length (+ 1 when
    periodic)."""
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, n: _cosine_sum(k, n, (0.5, 0.5)))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   device=None, requires_grad=False):
    """hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
    device=None, requires_grad=False): alpha - beta * cos(2 pi k / (N - 1))."""
    owner = "hamming_window"
    alpha, beta = check_real(owner, "alpha", alpha), check_real(owner, "beta", beta)
    return _window(owner, window_length, periodic, dtype, device, requires_grad,
                   lambda k, n: _cosine_sum(k, n, (alpha, beta)))


def blackman_window(window_length, periodic=True, *, dtype=None, device=None,
                    requires_grad=False):
    """blackman_window(window_length, periodic=True, *, dtype=None, device=None,
    requires_grad=False): 0.42 - 0.5 * cos(2 pi k / (N - 1)) + 0.08 * cos(4 pi k / (N - 1))."""
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, n: _cosine_sum(k, n, (0.42, 0.5, 0.08)))


def _bartlett(k, n):
    rising = k * (2.0 / (n - 1))
    # PyTorch's split: the first ((n - 1) >> 1) + 1 points rise, the rest fall.
    return _mint.where(k < ((n - 1) >> 1) + 1, rising, 2.0 - rising)


def bartlett_window(window_length, periodic=True, *, dtype=None, device=None,
                    requires_grad=False):
    """bartlett_window(window_length, periodic=True, *, dtype=None, device=None,
    requires_grad=False): the triangle 1 - |2k / (N - 1) - 1|."""
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad,
                   _bartlett)


def _bessel_i0_terms(largest):
    """The number of terms of I0's power series, sum_k ((z / 2)**k / k!)**2, that reach float64
    precision for every 0 <= z <= ``largest`` (its terms shrink faster for smaller z), and
    I0(largest) itself."""
    quarter_square = largest * largest / 4.0
    term, total, k = 1.0, 1.0, 0
    while term > total * 1e-17:
        k += 1
        term *= quarter_square / (k * k)
        total += term
    return k, total


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, device=None,
                  requires_grad=False):
    """kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, device=None,
    requires_grad=False): I0(beta * sqrt(1 - ((k - a) / a)**2)) / I0(beta), a = (N - 1) / 2,
    with I0 the modified Bessel function of order 0 (its power series in float64)."""
    owner = "kaiser_window"
    beta = abs(check_real(owner, "beta", beta))  # I0 is even
    if not math.isfinite(beta):
        raise KilnValueError(f"{owner}: expected a finite beta, got {beta}")
    terms, peak = _bessel_i0_terms(beta)

    def shape(k, n):
        middle = (n - 1) / 2.0
        z = _mint.sqrt(_mint.abs(1.0 - _mint.square((k - middle) / middle))) * beta
        quarter_square = z * z * 0.25
        term = total = _mint.ones_like(z)
        for j in range(1, terms + 1):
            term = term * quarter_square * (1.0 / (j * j))
            total = total + term
        return total / peak

    return _window(owner, window_length, periodic, dtype, device, requires_grad, shape)


# ------------------------------------------------------------------------------------------------
# Tensor methods


def _in_place(function):
    """The in-place method ``function.__name__ + "_"``: ``function`` of the tensor it is called
    on, written into it with kiln/_tensor_methods.py's check and write (looked up at the call:
    that module imports kiln.mint, which imports this one)."""
    name = function.__name__ + "_"

    def method(self, *args):
        result = function(_tensor_methods._before_write(self, *args), *args)
        return _tensor_methods._write(self, result, name)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``{function.__name__}`` written into this tensor; returns it."
    return method


_float_power_written = _in_place(float_power)


def float_power_(self, exponent):
    """``float_power`` written into this tensor, which must be float64 (the result's dtype, as
    PyTorch requires); returns it."""
    if self.dtype != _C.dtype.float64:
        raise DTypeError(f"float_power_: the result is float64, which a {self.dtype.name} "
                         f"tensor cannot hold; expected a float64 tensor")
    return _float_power_written(self, exponent)


for _function in (logaddexp, logaddexp2, xlogy, hypot, copysign, fmax, fmin, heaviside,
                  float_power, frexp, ldexp, gcd, lcm, sgn, signbit, sinc, deg2rad, rad2deg,
                  positive, dist, inner, vdot, trace, float_power_):
    setattr(Tensor, _function.__name__, _function)
for _function in (xlogy, hypot, copysign, heaviside, ldexp, gcd, lcm, sgn, sinc, deg2rad,
                  rad2deg):
    setattr(Tensor, _function.__name__ + "_", _in_place(_function))
del _function
