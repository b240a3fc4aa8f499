"""Python-level methods of kiln.Tensor: printing, conversions that are easiest through NumPy, and
the copy and pickle protocols.

Copying follows PyTorch:

- ``copy.copy(t)``: a new tensor sharing ``t``'s memory, detached from its autograd graph, with
  ``t.requires_grad`` (a leaf; no ``.grad``).
- ``copy.deepcopy(t)``: a new leaf with its own memory (contiguous), the same dtype, shape and
  values, ``requires_grad`` and a deep copy of ``.grad``. Only graph leaves: a tensor computed by
  an op that requires grad is a KilnValueError (deep-copy ``t.detach()``). The memo makes a tensor
  reached twice one copy (tied weights stay tied); two views of one memory become two copies.
- ``pickle``: the values, dtype, shape and ``requires_grad``, not ``.grad``; a view pickles as its
  values; a tensor computed by an op loads as a leaf (its graph does not travel).

A value traced by ``kiln.jit`` has no data: deep-copying or pickling one is a KilnTypeError.
"""

import copy

from . import _C
from ._numpy import np
from .errors import KilnTypeError, KilnValueError

Tensor = _C.Tensor


def _repr(self):
    if _C.jit.is_tracer(self):  # printing inside a jitted function: no data to show
        return f"Tracer({self.dtype!r}{list(self.shape)})"
    values = np.array2string(self.numpy(), separator=", ", prefix="tensor(")
    return f"tensor({values}, dtype={self.dtype!r})"


def _array(self, dtype=None, copy=None):
    array = self.numpy()
    if dtype is not None:
        array = array.astype(dtype, copy=False)
    return array.copy() if copy else array


def _tolist(self):
    return self.numpy().tolist()


def _iter(self):
    if self.ndim == 0:
        raise KilnTypeError("iteration over a 0-d tensor (it has no rows; item() gives its "
                            "value)")
    return (self.select(0, i) for i in range(self.shape[0]))


def _check_has_data(self, what):
    if _C.jit.is_tracer(self):
        raise KilnTypeError(f"cannot {what} a value traced by kiln.jit: while a function is traced "
                            f"its tensors have a dtype and a shape but no data; {what} it "
                            f"outside the jitted function")


def _copy(self):
    copied = self.detach()  # shares the memory; a new tensor for autograd, as in PyTorch
    copied.requires_grad_(self.requires_grad)
    return copied


def _deepcopy(self, memo):
    _check_has_data(self, "deep-copy")
    if not self.is_leaf:
        raise KilnValueError("only tensors created explicitly by the user (graph leaves) support "
                             "deepcopy: this one is computed by an op that requires grad; "
                             "deep-copy t.detach() to copy its values")
    copied = self.detach().clone()  # detached first: the clone is not recorded for autograd
    copied.requires_grad_(self.requires_grad)
    if self.grad is not None:
        copied.grad = copy.deepcopy(self.grad, memo)
    return copied


def _rebuild(values, dtype, requires_grad):
    """Unpickles a tensor (the inverse of Tensor.__reduce__)."""
    tensor = _C.tensor(values, dtype=dtype)
    tensor.requires_grad_(requires_grad)
    return tensor


def _reduce(self):
    _check_has_data(self, "pickle")
    # numpy() gives bfloat16, which NumPy lacks, as float32 holding the same values: exact.
    values = np.asarray(self.numpy(), order="C")  # a view pickles as its own elements
    return _rebuild, (values, self.dtype.name, self.requires_grad)


def _reduce_ex(self, protocol):
    return self.__reduce__()  # the same for every protocol; subclasses override __reduce__


Tensor.__repr__ = _repr
Tensor.__str__ = _repr
Tensor.__array__ = _array
Tensor.tolist = _tolist
Tensor.__iter__ = _iter
Tensor.__copy__ = _copy
Tensor.__deepcopy__ = _deepcopy
Tensor.__reduce__ = _reduce
Tensor.__reduce_ex__ = _reduce_ex
