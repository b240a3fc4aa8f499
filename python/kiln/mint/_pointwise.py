"""PyTorch's elementwise helpers that Kiln composes of kiln.mint ops in Python, with PyTorch's
names, argument order and defaults:

    addcmul(input, tensor1, tensor2, *, value=1)   addcdiv(input, tensor1, tensor2, *, value=1)
    nan_to_num(input, nan=0.0, posinf=None, neginf=None)
    logit(input, eps=None)     frac(input)
    isnan(input)   isinf(input)   isfinite(input)   isposinf(input)   isneginf(input)

and the Tensor methods PyTorch has for them: ``addcmul``, ``addcdiv``, ``nan_to_num`` and
``nan_to_num_``, ``logit`` and ``logit_``, ``frac`` and ``frac_``, ``isposinf`` and ``isneginf``
(``isnan``, ``isinf`` and ``isfinite`` are methods already: kiln/_tensor_methods.py, which the
functions call). They differentiate through autograd and trace under kiln.jit.

- ``addcmul`` and ``addcdiv`` promote their three tensors, as PyTorch's do, and compute
  ``input + value * tensor1 * tensor2`` (``/ tensor2``) in PyTorch's order; 16-bit floats are
  computed in float32 and rounded once. An integer result takes an integer ``value`` (PyTorch
  truncates a float one), and addcdiv of two integer tensors is a DTypeError, as in PyTorch.
- ``nan_to_num``'s posinf and neginf default to the largest and the lowest finite value of the
  input's dtype; a value the dtype cannot hold rounds as a conversion does (1e10 is inf in
  float16, as in PyTorch). Integer and bool inputs come back as a copy. The gradient is zero at
  the replaced elements, as PyTorch's.
- ``logit`` of an integer or bool input is of the default dtype, as PyTorch's. With ``eps``
  (>= 0) the input is first clamped to [eps, 1 - eps] with PyTorch's rule (below eps: eps; above
  1 - eps: 1 - eps), whose gradient is zero outside the interval; a negative eps clamps nothing.
- ``frac`` (``x - trunc(x)``, with x's sign) takes floating-point tensors only, as PyTorch's;
  frac(inf) is NaN there too.
"""

import functools
import numbers

from .. import _C
from .. import _tensor_methods
from ..errors import DTypeError, KilnTypeError, ShapeError
from .._type_info import finfo
from ._composite import _cast, _widened, check_real
from ._indexing_ops import _tensor

__all__ = ["addcmul", "addcdiv", "nan_to_num", "logit", "frac", "isnan", "isinf", "isfinite",
           "isposinf", "isneginf"]

Tensor = _C.Tensor
_mint = _C.mint


def _write(self, result, what):
    """kiln/_tensor_methods.py's in-place check and write (looked up at the call: that module
    imports kiln.mint, which imports this one)."""
    return _tensor_methods._write(self, result, what)


def _before_write(self):
    """``self``, or a copy to compute from where autograd records the write (the ops may have
    saved ``self`` for their gradients): kiln/_tensor_methods.py's ``_before_write``."""
    return _tensor_methods._before_write(self)


# ------------------------------------------------------------------------------------------------
# addcmul, addcdiv


def _addc_operands(owner, input, tensor1, tensor2, value):  # noqa: A002
    """The three tensors promoted to their common dtype (16-bit floats widened to float32), the
    value as a number, and the result's dtype."""
    for name, x in (("input", input), ("tensor1", tensor1), ("tensor2", tensor2)):
        _tensor(owner, name, x)
    try:
        _mint.broadcast_shapes(input.shape, tensor1.shape, tensor2.shape)
    except ShapeError:
        raise ShapeError(f"{owner}: input {list(input.shape)}, tensor1 {list(tensor1.shape)} and "
                         f"tensor2 {list(tensor2.shape)} do not broadcast together") from None
    dtype = functools.reduce(_C.promote_types, (input.dtype, tensor1.dtype, tensor2.dtype))
    if dtype == _C.dtype.bool:
        raise DTypeError(f"{owner}: expected numeric tensors, got three bool tensors")
    if not isinstance(value, numbers.Real):
        raise KilnTypeError(f"{owner}: expected value to be a real number, got "
                            f"{type(value).__name__} {value!r}")
    if isinstance(value, bool):
        value = int(value)
    if not dtype.is_floating_point and not isinstance(value, numbers.Integral):
        raise KilnTypeError(f"{owner}: an integer result ({dtype.name}) takes an integer value, "
                            f"got {value!r}")
    operands = [_widened(_cast(x, dtype)) for x in (input, tensor1, tensor2)]
    return operands, value, dtype


def addcmul(input, tensor1, tensor2, *, value=1):  # noqa: A002  (PyTorch's argument names)
    """addcmul(input, tensor1, tensor2, *, value=1): ``input + value * tensor1 * tensor2``, the
    three broadcast and promoted."""
    (x, a, b), value, dtype = _addc_operands("addcmul", input, tensor1, tensor2, value)
    return _cast(x + (a if value == 1 else a * value) * b, dtype)


def addcdiv(input, tensor1, tensor2, *, value=1):  # noqa: A002
    """addcdiv(input, tensor1, tensor2, *, value=1): ``input + value * tensor1 / tensor2``, the
    three broadcast and promoted; tensor1 and tensor2 may not both be integer (PyTorch's rule:
    the division is a true one)."""
    owner = "addcdiv"
    for name, x in (("tensor1", tensor1), ("tensor2", tensor2)):
        _tensor(owner, name, x)
    if not (tensor1.dtype.is_floating_point or tensor2.dtype.is_floating_point):
        raise DTypeError(f"{owner}: integer division is not supported: expected tensor1 or "
                         f"tensor2 to be floating-point, got {tensor1.dtype.name} and "
                         f"{tensor2.dtype.name}")
    (x, a, b), value, dtype = _addc_operands(owner, input, tensor1, tensor2, value)
    return _cast(x + (a if value == 1 else a * value) / b, dtype)


# ------------------------------------------------------------------------------------------------
# nan_to_num, logit, frac


def _replacement(owner, name, value, default):
    if value is None:
        return default
    return check_real(owner, name, value)


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):  # noqa: A002
    """nan_to_num(input, nan=0.0, posinf=None, neginf=None): ``input`` with NaN replaced by
    ``nan``, +inf by ``posinf`` and -inf by ``neginf`` (by default the dtype's largest and
    lowest finite values); integer and bool inputs are copied as they are."""
    owner = "nan_to_num"
    _tensor(owner, "input", input)
    dtype = input.dtype
    if not dtype.is_floating_point:
        for name, value in (("nan", nan), ("posinf", posinf), ("neginf", neginf)):
            _replacement(owner, name, value, 0.0)
        return input.clone()
    largest = finfo(dtype).max
    nan = _replacement(owner, "nan", nan, 0.0)
    posinf = _replacement(owner, "posinf", posinf, largest)
    neginf = _replacement(owner, "neginf", neginf, -largest)
    result = _mint.masked_fill(input, input != input, nan)
    result = _mint.masked_fill(result, input == float("inf"), posinf)
    return _mint.masked_fill(result, input == float("-inf"), neginf)


def logit(input, eps=None):  # noqa: A002
    """logit(input, eps=None): ``log(z / (1 - z))``, with z the input clamped to [eps, 1 - eps]
    when ``eps`` (>= 0) is given; the default dtype for integer and bool inputs (see the module's
    documentation)."""
    owner = "logit"
    _tensor(owner, "input", input)
    dtype = input.dtype if input.dtype.is_floating_point else _C.get_default_dtype()
    z = _widened(_cast(input, dtype))
    if eps is not None and check_real(owner, "eps", eps) >= 0:
        low, high = float(eps), 1.0 - float(eps)
        # PyTorch's rule, which where() keeps where clamp would let max win for eps > 0.5.
        z = _mint.where(z < low, low, _mint.where(z > high, high, z))
    return _cast(_mint.log(z / (1.0 - z)), dtype)


def frac(input):  # noqa: A002
    """frac(input): the fractional part ``input - trunc(input)``, with the input's sign, of a
    floating-point tensor; its gradient is 1."""
    _tensor("frac", "input", input)
    if not input.dtype.is_floating_point:
        raise DTypeError(f"frac: expected a floating-point tensor, got {input.dtype.name}")
    return input - _mint.trunc(input)


# ------------------------------------------------------------------------------------------------
# Classification


def isnan(input):  # noqa: A002
    """isnan(input): where the elements are NaN (bool; False for integers)."""
    return _tensor_methods.isnan(_tensor("isnan", "input", input))


def isinf(input):  # noqa: A002
    """isinf(input): where the elements are +inf or -inf (bool; False for integers)."""
    return _tensor_methods.isinf(_tensor("isinf", "input", input))


def isfinite(input):  # noqa: A002
    """isfinite(input): where the elements are neither NaN nor infinite (bool; True for
    integers)."""
    return _tensor_methods.isfinite(_tensor("isfinite", "input", input))


def _signed_inf(owner, input, value):  # noqa: A002
    _tensor(owner, "input", input)
    if not input.dtype.is_floating_point:
        return _mint.zeros_like(input, dtype=_C.dtype.bool)
    return input == value


def isposinf(input):  # noqa: A002
    """isposinf(input): where the elements are +inf (bool; False for integers)."""
    return _signed_inf("isposinf", input, float("inf"))


def isneginf(input):  # noqa: A002
    """isneginf(input): where the elements are -inf (bool; False for integers)."""
    return _signed_inf("isneginf", input, float("-inf"))


# ------------------------------------------------------------------------------------------------
# Tensor methods


def nan_to_num_(self, nan=0.0, posinf=None, neginf=None):
    """``nan_to_num`` written into this tensor; returns it."""
    return _write(self, nan_to_num(_before_write(self), nan, posinf, neginf), "nan_to_num_")


def logit_(self, eps=None):
    """``logit`` written into this tensor (a floating-point one); returns it."""
    return _write(self, logit(_before_write(self), eps), "logit_")


def frac_(self):
    """``frac`` written into this tensor; returns it."""
    return _write(self, frac(_before_write(self)), "frac_")


for _function in (addcmul, addcdiv, nan_to_num, logit, frac, isposinf, isneginf, nan_to_num_,
                  logit_, frac_):
    setattr(Tensor, _function.__name__, _function)
del _function
