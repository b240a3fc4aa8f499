"""PyTorch's Tensor method spellings of what Kiln has as functions or as other methods, so that
code written against ``torch.Tensor`` runs: ``x.zero_()``, ``x.fill_(v)``, ``x.copy_(src)``,
``x.expand_as(y)``, ``x.view_as(y)``, ``x.reshape_as(y)``, ``x.type_as(y)``, ``x.mT``, ``x.data``,
``x.is_floating_point()``, ``x.element_size()``, and the methods of kiln.mint's functions that take
a tensor first (``x.chunk(2)``, ``x.split(3)``, ``x.gather(1, i)``, ``x.index_select(0, i)``,
``x.masked_fill(m, v)`` and ``x.masked_fill_(m, v)``, ``x.scatter(1, i, s)``, ``x.tril()``,
``x.triu()``).

The elementwise methods (``x.add(y)``, ``x.eq(y)``, ``x.exp_()``, ``x.add_(y)``, ...) are bound in
C++ beside their kiln.mint functions (python/src/bind_mint_elementwise.cc,
bind_tensor_operators.cc).

The in-place ones here write through assignment (``x[...] = v``), with its rules: under autograd
a tensor that requires grad, or a value that does, is refused (write under ``kiln.no_grad()``, as
PyTorch's initializers and optimizers do); the value broadcasts to ``x``'s shape and converts to
its dtype.
"""

from . import _C
from .errors import KilnTypeError, KilnValueError

Tensor = _C.Tensor
_mint = _C.mint


def zero_(self):
    """Fills the tensor with zeros in place; returns it."""
    self[...] = 0
    return self


def fill_(self, value):
    """Fills the tensor with ``value`` (a number or a 0-d tensor) in place; returns it."""
    if isinstance(value, Tensor) and value.ndim != 0:
        raise KilnValueError(f"fill_: expected a number or a 0-d tensor, got a tensor of shape "
                             f"{list(value.shape)} (copy_ copies a tensor)")
    self[...] = value
    return self


def copy_(self, src):
    """Copies ``src`` (broadcast to this tensor's shape, converted to its dtype) into it in place;
    returns it."""
    self[...] = src
    return self


def masked_fill_(self, mask, value):
    """``masked_fill`` written into this tensor; returns it. The mask broadcasts to its shape."""
    self[...] = _mint.masked_fill(self, mask, value)
    return self


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


def is_floating_point(self):
    """Whether the dtype is a floating-point one."""
    return self.dtype.is_floating_point


def element_size(self):
    """Bytes per element (``itemsize``)."""
    return self.itemsize


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


def _method(name):
    """kiln.mint.<name> as a method (the tensor its first argument), with its documentation."""
    function = getattr(_mint, name)

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
Tensor.is_floating_point = is_floating_point
Tensor.element_size = element_size
Tensor.mT = property(_mT)
Tensor.data = property(_data, _set_data)
for _name in ("chunk", "split", "gather", "index_select", "masked_fill", "scatter", "tril",
              "triu"):
    setattr(Tensor, _name, _method(_name))
