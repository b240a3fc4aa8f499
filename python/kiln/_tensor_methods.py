"""PyTorch's Tensor method spellings of what Kiln has as functions or as other methods, so that
code written against ``torch.Tensor`` runs: ``x.zero_()``, ``x.fill_(v)``, ``x.copy_(src)``,
``x.expand_as(y)``, ``x.view_as(y)``, ``x.reshape_as(y)``, ``x.type_as(y)``, ``x.mT``, ``x.data``,
``x.is_floating_point()``, ``x.element_size()``, ``x.t()``, ``x.new_zeros(size)`` and the
other ``new_*`` factories (this tensor's dtype by default), ``x.clamp_()``, ``x.where(cond, y)``,
``x.bmm(y)``, ``x.unbind(dim)``, ``x.flip(dims)`` and ``x.repeat(*sizes)`` (copies,
as in PyTorch), ``x.isnan()`` / ``isinf()`` / ``isfinite()``, the optimizer helpers ``lerp_``,
``addcmul_`` and ``addcdiv_``, and the methods of kiln.mint's functions that take a tensor first
(``x.chunk(2)``, ``x.split(3)``, ``x.gather(1, i)``, ``x.index_select(0, i)``,
``x.masked_fill(m, v)`` and ``x.masked_fill_(m, v)``, ``x.scatter(1, i, s)``, ``x.tril()``,
``x.triu()``, ``x.norm(p, dim)``, ``x.round(decimals=0)``, which adds PyTorch's ``decimals`` to the
bound Round method: kiln/mint/_composite.py). The methods of the functions composed in kiln/mint
(``x.mm(y)``, ``x.median(dim)``, ``x.clone(memory_format=...)``, ...) are installed by the
modules that define those functions. The linear-algebra methods ``x.det()``, ``x.logdet()``,
``x.slogdet()``, ``x.inverse()``, ``x.pinverse(rcond=1e-15)``, ``x.matrix_power(n)``,
``x.matrix_exp()`` (kiln.mint's functions) and ``x.cholesky(upper=False)`` (kiln.linalg's) are
installed here.

The elementwise methods (``x.add(y)``, ``x.eq(y)``, ``x.exp_()``, ``x.add_(y)``, ...) are bound in
C++ beside their kiln.mint functions (python/src/bind_mint_elementwise.cc,
bind_tensor_operators.cc).

The in-place ones here write a whole tensor as the in-place operators do (``x.copy_(v)`` is
recorded by autograd as ``x += v`` is: a leaf that requires grad is refused, so initializers and
optimizers write under ``kiln.no_grad()``, as PyTorch's do); the value broadcasts to ``x``'s shape
and converts to its dtype.
"""

from . import _C
from ._checks import as_int, wrap_dim
from .autograd import is_grad_enabled
from .errors import KilnTypeError, KilnValueError
from . import linalg, mint
from .mint import _composite, _indexing_ops, _norms

Tensor = _C.Tensor
_mint = _C.mint


def zero_(self):
    """Fills the tensor with zeros in place; returns it."""
    _mint._overwrite(self, 0, "zero_")
    return self


def fill_(self, value):
    """Fills the tensor with ``value`` (a number or a 0-d tensor) in place; returns it."""
    if isinstance(value, Tensor) and value.ndim != 0:
        raise KilnValueError(f"fill_: expected a number or a 0-d tensor, got a tensor of shape "
                             f"{list(value.shape)} (copy_ copies a tensor)")
    _mint._overwrite(self, value, "fill_")
    return self


def copy_(self, src):
    """Copies ``src`` (broadcast to this tensor's shape, converted to its dtype) into it in place;
    returns it."""
    _mint._overwrite(self, src, "copy_")
    return self


def _write(self, result, what):
    """Writes ``result`` into this tensor for the in-place method ``what``, refusing first, with
    the in-place operators' own check, a result its dtype cannot take (a float into an integer
    tensor, a number into a bool one) or of another shape (the operands broadcast wider)."""
    _C._check_result_fits(what, self, result)
    _mint._overwrite(self, result, what)
    return self


def _before_write(self, *operands):
    """``self``, or, when autograd records the write, a copy of it to compute the new value from:
    the ops save their input for the gradient (clamp's and lerp's rules read it), and the write
    into ``self`` would change it under them. (Add's and MaskedFill's rules read no input: the
    methods built on them need no copy.)"""
    tracked = any(isinstance(t, Tensor) and t.requires_grad for t in (self, *operands))
    return self.clone() if tracked and is_grad_enabled() else self


def masked_fill_(self, mask, value):
    """``masked_fill`` written into this tensor; returns it. The mask broadcasts to its shape."""
    return _write(self, _mint.masked_fill(self, mask, value), "masked_fill_")


def expand_as(self, other):
    """``self.expand(other.shape)``."""
    return self.expand(other.shape)


def view_as(self, other):
    """``self.view(other.shape)``."""
    return self.view(other.shape)


def reshape_as(self, other):
    """``self.reshape(other.shape)``."""
    return self.reshape(other.shape)


def type_as(self, other):
    """``self.to(other.dtype)``."""
    return self.to(other.dtype)


# PyTorch's legacy tensor type names by dtype ("torch.FloatTensor"), with Kiln's prefix.
_TYPE_NAMES = {"bool": "Bool", "int8": "Char", "uint8": "Byte", "int16": "Short", "int32": "Int",
               "int64": "Long", "float16": "Half", "bfloat16": "BFloat16", "float32": "Float",
               "float64": "Double"}


def _type(self, dtype=None):
    """``type()``: the type's name as PyTorch spells it ("kiln.FloatTensor" for float32);
    ``type(dtype)``: ``self.to(dtype)`` (a kiln dtype, or anything ``to`` takes)."""
    if dtype is None:
        return f"kiln.{_TYPE_NAMES[self.dtype.name]}Tensor"
    return self.to(dtype)


def is_floating_point(self):
    """Whether the dtype is a floating-point one."""
    return self.dtype.is_floating_point


def element_size(self):
    """Bytes per element (``itemsize``)."""
    return self.itemsize


def t(self):
    """The transpose of a matrix (a tensor of 2 dims or fewer, as it is), a view."""
    if self.ndim > 2:
        raise KilnValueError(f"t(): expected a tensor of at most 2 dims, got {self.ndim} (use "
                             f"transpose(dim0, dim1) or mT)")
    return self.transpose(0, 1) if self.ndim == 2 else self


def _new(factory):
    """A ``new_*`` method: ``factory`` with this tensor's dtype unless ``dtype`` is given."""

    def method(self, *args, dtype=None, requires_grad=False):
        return factory(*args, dtype=self.dtype if dtype is None else dtype,
                       requires_grad=requires_grad)

    return method


# zeros / ones / empty take the size as ints or one sequence, as PyTorch's new_zeros(2, 3) does.
new_zeros = _new(lambda *size, **kw: _mint.zeros(*size, **kw))
new_ones = _new(lambda *size, **kw: _mint.ones(*size, **kw))
new_empty = _new(lambda *size, **kw: _mint.empty(*size, **kw))
new_full = _new(lambda size, fill_value, **kw: _mint.full(size, fill_value, **kw))
new_tensor = _new(lambda data, **kw: _C.tensor(data, **kw))
new_zeros.__doc__ = "Zeros of ``size``, in this tensor's dtype unless ``dtype`` is given."
new_ones.__doc__ = "Ones of ``size``, in this tensor's dtype unless ``dtype`` is given."
new_empty.__doc__ = "An uninitialised tensor of ``size``, in this tensor's dtype by default."
new_full.__doc__ = "``size`` filled with ``fill_value``, in this tensor's dtype by default."
new_tensor.__doc__ = "A new tensor (a copy) of ``data``, in this tensor's dtype by default."
for _name in ("new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"):
    globals()[_name].__name__ = globals()[_name].__qualname__ = _name


def clamp_(self, min=None, max=None):  # noqa: A002 (PyTorch's argument names)
    """``clamp`` written into this tensor; returns it."""
    return _write(self, _before_write(self).clamp(min, max), "clamp_")


def where(self, condition, other):
    """``kiln.mint.where(condition, self, other)``: this tensor where ``condition`` holds."""
    return _mint.where(condition, self, other)


def bmm(self, mat2):
    """``kiln.mint.bmm(self, mat2)``: batched products of [B, N, K] and [B, K, M]."""
    return _mint.bmm(self, mat2)


def unbind(self, dim=0):
    """The slices along ``dim`` as a tuple of views (``select(dim, i)`` for each i)."""
    # A 0-d tensor has no dimension to unbind (PyTorch refuses it too).
    dim = wrap_dim("unbind", "dim", dim, self.ndim, scalar_as_1d=False)
    return tuple(self.select(dim, i) for i in range(self.shape[dim]))


def _own(self, result):
    """``result``, copied when it shares this tensor's memory: a copy, as PyTorch's is."""
    return result.clone() if result.shares_storage_with(self) else result


def flip(self, dims):
    """A copy with the order of the elements along ``dims`` (an int or a sequence) reversed."""
    dims = [wrap_dim("flip", "dim", d, self.ndim)
            for d in ((dims,) if isinstance(dims, int) else dims)]
    if len(set(dims)) != len(dims):
        raise KilnValueError(f"flip: a dim appears more than once in {list(dims)}")
    result = self
    for dim in dims if self.ndim else ():
        size = self.shape[dim]
        result = _mint.index_select(result, dim, _mint.arange(size - 1, -1, -1))
    return _own(self, result)


def repeat(self, *sizes):
    """The tensor tiled ``sizes`` times along each dim (leading new dims for extra sizes), a
    copy; PyTorch's ``repeat``."""
    if len(sizes) == 1 and as_int(sizes[0]) is None:
        try:
            sizes = tuple(sizes[0])
        except TypeError:
            raise KilnTypeError(f"repeat: expected int counts or one sequence of them, got "
                                f"{type(sizes[0]).__name__} {sizes[0]!r}") from None
    if len(sizes) < self.ndim:
        raise KilnValueError(f"repeat: got {len(sizes)} repeat counts for a {self.ndim}-d tensor "
                             f"(expected at least one per dim)")
    counts = [as_int(s) for s in sizes]
    if None in counts:
        raise KilnTypeError(f"repeat: expected int counts, got {list(sizes)}")
    if min(counts, default=0) < 0:
        raise KilnValueError(f"repeat: expected non-negative int counts, got {list(sizes)}")
    sizes = counts
    shape = (1,) * (len(sizes) - self.ndim) + tuple(self.shape)
    # Each dim d becomes (sizes[d], shape[d]): a new axis before it, expanded, then merged.
    tiled = self.reshape(shape)
    interleaved, expanded = [], []
    for count, size in zip(sizes, shape):
        interleaved += [1, size]
        expanded += [count, size]
    tiled = tiled.reshape(interleaved).expand(expanded)
    return _own(self, tiled.reshape([c * s for c, s in zip(sizes, shape)]))


def isnan(self):
    """Where the elements are NaN (bool)."""
    return self != self


def isinf(self):
    """Where the elements are +inf or -inf (bool; False for integers)."""
    if not self.dtype.is_floating_point:
        return _mint.zeros_like(self, dtype=_C.dtype.bool)
    return self.abs() == float("inf")


def isfinite(self):
    """Where the elements are neither NaN nor infinite (bool)."""
    if not self.dtype.is_floating_point:
        return _mint.ones_like(self, dtype=_C.dtype.bool)
    return (self - self) == 0  # inf - inf and NaN - NaN are NaN


def lerp_(self, end, weight):
    """``kiln.mint.lerp(self, end, weight)`` written into this tensor, its values to the bit
    (PyTorch's two-branch formula: weight 1 gives ``end`` exactly); returns it."""
    if not self.dtype.is_floating_point:
        # lerp refuses an integer input in its words; an in-place method refuses first, in the
        # in-place operators' words, a result its tensor cannot hold (lerp's is floating).
        _C._check_result_fits("lerp_", self, _C.tensor(0.0))
    return _write(self, _indexing_ops.lerp(_before_write(self, end, weight), end, weight), "lerp_")


def addcmul_(self, tensor1, tensor2, value=1):
    """``self + value * tensor1 * tensor2`` written into this tensor; returns it."""
    return _write(self, self + value * tensor1 * tensor2, "addcmul_")


def addcdiv_(self, tensor1, tensor2, value=1):
    """``self + value * tensor1 / tensor2`` written into this tensor; returns it."""
    return _write(self, self + value * tensor1 / tensor2, "addcdiv_")


def cholesky(self, upper=False):
    """kiln.linalg.cholesky of this tensor (torch.Tensor.cholesky's positional ``upper``)."""
    return linalg.cholesky(self, upper=upper)


def _mT(self):
    """The last two dims swapped (a view): the transpose of each matrix of a batch."""
    if self.ndim < 2:
        raise KilnValueError(f"tensor.mT: expected a matrix or a batch of matrices (2 or more "
                             f"dims), got a {self.ndim}-d tensor")
    return self.transpose(-2, -1)


def _data(self):
    """The tensor detached from autograd, sharing its memory (PyTorch's ``.data``; ``detach()``
    says the same). A write through it still counts as a write into the tensor, so backward
    through a graph that saved the old values raises instead of using the new ones."""
    return self.detach()


def _set_data(self, value):
    """``x.data = v``: ``v``'s values written into ``x`` (same dtype and shape: a Kiln tensor keeps
    its memory, where PyTorch's takes ``v``'s). ``x.data -= v`` has already written in place by
    then, and assigns back what ``x.data`` gave."""
    if not isinstance(value, Tensor):
        raise KilnTypeError(f"data: expected a kiln.Tensor, got {type(value).__name__}")
    if (value.shares_storage_with(self) and value.shape == self.shape
            and value.stride() == self.stride()
            and value.storage_offset() == self.storage_offset()):
        return
    if value.dtype != self.dtype or value.shape != self.shape:
        raise KilnValueError(f"data: the new data is {value.dtype.name} of shape "
                             f"{list(value.shape)}, the tensor {self.dtype.name} of shape "
                             f"{list(self.shape)}: a Kiln tensor keeps its memory, so the new "
                             f"data must have its dtype and shape (convert or reshape it first)")
    self.detach()[...] = value.detach()


def _method(name, module=_mint):
    """kiln.mint.<name> (found in ``module``) as a method (the tensor its first argument), with
    its documentation."""
    function = getattr(module, name)

    def method(self, *args, **kwargs):
        return function(self, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = (f"kiln.mint.{name} with this tensor as its first argument.\n\n"
                      f"{function.__doc__}")
    return method


Tensor.zero_ = zero_
Tensor.fill_ = fill_
Tensor.copy_ = copy_
Tensor.masked_fill_ = masked_fill_
Tensor.expand_as = expand_as
Tensor.view_as = view_as
Tensor.reshape_as = reshape_as
Tensor.type_as = type_as
Tensor.type = _type  # (not a module-level `type`, which would hide the builtin here)
Tensor.is_floating_point = is_floating_point
Tensor.element_size = element_size
for _name in ("t", "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor", "clamp_",
              "where", "bmm", "unbind", "flip", "repeat", "isnan", "isinf", "isfinite",
              "lerp_", "addcmul_", "addcdiv_", "cholesky"):
    setattr(Tensor, _name, globals()[_name])
Tensor.mT = property(_mT)
Tensor.data = property(_data, _set_data)
for _name in ("chunk", "split", "gather", "index_select", "masked_fill", "scatter", "tril",
              "triu"):
    setattr(Tensor, _name, _method(_name))
Tensor.norm = _method("norm", _norms)
for _name in ("det", "logdet", "slogdet", "inverse", "pinverse", "matrix_power", "matrix_exp"):
    setattr(Tensor, _name, _method(_name, mint))
Tensor.round = _method("round", _composite)
