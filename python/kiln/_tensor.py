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

A subclass of Tensor keeps its type and its attributes (``__dict__`` and ``__slots__``), as
PyTorch's do: ``copy.copy`` shares them, ``copy.deepcopy`` deep-copies them through the memo and
``pickle`` pickles them. The copy is made without calling the subclass's ``__init__`` (see
_rebuild_subclass). ``kiln.nn.Parameter`` defines its own copies.

A value traced by ``kiln.jit`` has no data: deep-copying or pickling one is a KilnTypeError.
"""

import copy
import copyreg
import functools
import numbers

from . import _C
from ._numpy import np
from .errors import KilnTypeError, KilnValueError

Tensor = _C.Tensor


@functools.cache
def _numpy_max_dims():
    """NumPy's NPY_MAXDIMS (32 before NumPy 2); numpy() of a tensor with more dims is a
    KilnValueError. Read on first use: ``import kiln`` must not import NumPy for its version."""
    return 64 if int(np.__version__.split(".")[0]) >= 2 else 32


def _repr(self):
    if _C.jit.is_tracer(self):  # printing inside a jitted function: no data to show
        return f"Tracer({self.dtype!r}{list(self.shape)})"
    if self.ndim > _numpy_max_dims():  # past what a NumPy array holds: the shape alone
        return f"tensor(<{self.ndim}-d, shape {list(self.shape)}>, dtype={self.dtype!r})"
    values = np.array2string(self.numpy(), separator=", ", prefix="tensor(")
    return f"tensor({values}, dtype={self.dtype!r})"


def _array(self, dtype=None, copy=None):
    """NumPy's ``__array__``: a view of the tensor's memory where NumPy can hold it as it is, else
    a converted copy (bfloat16, which NumPy lacks, as float32; another ``dtype``); ``copy=True``
    always copies and ``copy=False`` (``np.asarray(t, copy=False)``) refuses to."""
    array = self.numpy()
    copied = self.dtype == _C.dtype.bfloat16  # numpy() converted it
    if dtype is not None and np.dtype(dtype) != array.dtype:
        array = array.astype(dtype)
        copied = True
    if copy is False and copied:
        raise KilnValueError(
            f"np.asarray(copy=False) of a {self.dtype} tensor as {array.dtype} needs a copy: "
            f"NumPy {'has no bfloat16' if dtype is None else 'converts it'}; pass copy=None to "
            f"allow one")
    return array.copy() if copy and not copied else array


# NumPy's arithmetic, comparison and logical ufuncs on two operands, as Tensor's operator methods
# (the forward one, and the reflected one for a tensor on the right).
_UFUNC_OPERATORS = {
    "add": ("__add__", "__radd__"), "subtract": ("__sub__", "__rsub__"),
    "multiply": ("__mul__", "__rmul__"), "divide": ("__truediv__", "__rtruediv__"),
    "floor_divide": ("__floordiv__", "__rfloordiv__"), "remainder": ("__mod__", "__rmod__"),
    "power": ("__pow__", "__rpow__"), "less": ("__lt__", "__gt__"),
    "less_equal": ("__le__", "__ge__"), "greater": ("__gt__", "__lt__"),
    "greater_equal": ("__ge__", "__le__"), "equal": ("__eq__", "__eq__"),
    "not_equal": ("__ne__", "__ne__"), "bitwise_and": ("__and__", "__rand__"),
    "bitwise_or": ("__or__", "__ror__"), "bitwise_xor": ("__xor__", "__rxor__"),
    "left_shift": ("__lshift__", "__rlshift__"), "right_shift": ("__rshift__", "__rrshift__"),
}


def _array_ufunc(self, ufunc, method, *inputs, **kwargs):
    """NumPy's ufunc protocol. A NumPy value beside a tensor in an operator (np.float32(2) * t,
    np.ones(3) + t) gives what the tensor's operator gives: a tensor, with autograd (NumPy converted
    the tensor and returned an ndarray). Other ufuncs (np.sin(t)) and writes into a NumPy array
    (``arr += t``) compute on the tensors' values as arrays, as NumPy would."""
    operators = _UFUNC_OPERATORS.get(ufunc.__name__)
    if method == "__call__" and not kwargs and len(inputs) == 2 and operators is not None:
        a, b = inputs
        return getattr(a, operators[0])(b) if isinstance(a, Tensor) else getattr(b, operators[1])(a)
    arrays = [np.asarray(x) if isinstance(x, Tensor) else x for x in inputs]
    return getattr(ufunc, method)(*arrays, **kwargs)


def _tolist(self):
    if self.ndim > _numpy_max_dims():  # past what a NumPy array holds: row by row
        return [row.tolist() for row in self]
    return self.numpy().tolist()


def _format(self, spec):
    """format(t, spec) / f"{t:.4f}": a 0-d tensor formats as its value (as in PyTorch); another
    tensor takes only the empty spec (its str)."""
    if self.ndim == 0:
        return format(self.item(), spec)
    return object.__format__(self, spec)


def _contains(self, element):
    """``element in t``: whether any element equals it (a number or a tensor that broadcasts), as
    in PyTorch; iterating rows would compare whole rows."""
    if not isinstance(element, (Tensor, numbers.Number)):
        raise KilnTypeError(f"'in' on a tensor expects a number or a tensor, got "
                            f"{type(element).__name__}")
    return bool(_C.mint.sum(self == element).item())


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


def _rebuild_subclass(cls, tensor):
    """``tensor`` as an instance of the Tensor subclass ``cls`` (another handle to it, as
    ``cls(tensor)`` makes), without calling ``cls.__init__``: its arguments are the subclass's own,
    and the attributes it would set are restored after (by pickle, or by _set_state), as PyTorch
    rebuilds a subclass. Pickles of subclass instances name it."""
    rebuilt = Tensor.__new__(cls)
    Tensor.__init__(rebuilt, tensor)
    return rebuilt


def _state(self):
    """A subclass instance's attributes in the form of Python's default pickling, which pickle
    restores: its ``__dict__`` (None when empty), paired with the values of its ``__slots__`` (the
    names copyreg lists) when any is set."""
    attributes = getattr(self, "__dict__", None) or None
    slots = {name: getattr(self, name) for name in copyreg._slotnames(type(self))
             if hasattr(self, name)}
    return (attributes, slots) if slots else attributes


def _set_state(self, state):
    """Restores the attributes that _state took, as pickle does."""
    attributes, slots = state if isinstance(state, tuple) else (state, None)
    if attributes:
        self.__dict__.update(attributes)
    for name, value in (slots or {}).items():
        setattr(self, name, value)


def _copy(self):
    copied = self.detach()  # shares the memory; a new tensor for autograd, as in PyTorch
    copied.requires_grad_(self.requires_grad)
    if type(self) is not Tensor:  # detach() gave a plain Tensor
        copied = _rebuild_subclass(type(self), copied)
        _set_state(copied, _state(self))  # shallow: the attributes' values are shared
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
    if type(self) is not Tensor:  # detach() gave a plain Tensor
        copied = _rebuild_subclass(type(self), copied)
        memo[id(self)] = copied  # before the attributes, which may refer back to the tensor
        _set_state(copied, copy.deepcopy(_state(self), memo))
    return copied


def _rebuild(values, dtype, requires_grad):
    """Unpickles a tensor from its values (the inverse of Tensor.__reduce__ for the dtypes NumPy
    holds; pickles of Kiln 0.6 hold bfloat16 as float32 values)."""
    tensor = _C.tensor(values, dtype=dtype)
    tensor.requires_grad_(requires_grad)
    return tensor


def _rebuild_bits(bits, dtype, requires_grad, shape):
    """Unpickles a bfloat16 tensor from its bits (int16; signalling NaNs and all), or any tensor
    past NumPy's dimensions from its flat values and ``shape``. A name of its own, so that a Kiln
    before it refuses such a pickle instead of reading the bits as values."""
    tensor = (_C._bits_as(_C.tensor(bits), dtype) if dtype == "bfloat16"
              else _C.tensor(bits, dtype=dtype))
    tensor = tensor.reshape(shape)
    tensor.requires_grad_(requires_grad)
    return tensor


def _reduce(self):
    _check_has_data(self, "pickle")
    if type(self) is not Tensor:
        # The values travel as a plain tensor (another handle to this one, pickled by this
        # function); pickle rebuilds the subclass around it, then restores the attributes.
        return _rebuild_subclass, (type(self), Tensor(self)), _state(self)
    source = self.detach()
    exact = self.dtype == _C.dtype.bfloat16 or self.ndim > _numpy_max_dims()
    if not exact:
        values = np.asarray(source.numpy(), order="C")  # a view pickles as its own elements
        return _rebuild, (values, self.dtype.name, self.requires_grad)
    if self.dtype == _C.dtype.bfloat16:  # NumPy lacks it
        source = _C._bits_as(source, _C.dtype.int16)
    bits = np.asarray(source.flatten().numpy(), order="C")
    return _rebuild_bits, (bits, self.dtype.name, self.requires_grad, list(self.shape))


def _reduce_ex(self, protocol):
    return self.__reduce__()  # the same for every protocol; subclasses override __reduce__


Tensor.__repr__ = _repr
Tensor.__str__ = _repr
Tensor.__array__ = _array
Tensor.__array_ufunc__ = _array_ufunc
Tensor.tolist = _tolist
Tensor.__iter__ = _iter
Tensor.__format__ = _format
Tensor.__contains__ = _contains
Tensor.__copy__ = _copy
Tensor.__deepcopy__ = _deepcopy
Tensor.__reduce__ = _reduce
Tensor.__reduce_ex__ = _reduce_ex


def as_tensor(data, dtype=None, device=None):
    """``kiln.as_tensor(data, dtype=None, device=None)``, PyTorch's: ``data`` as a kiln tensor,
    sharing memory where it can. A kiln tensor is returned itself (its autograd history kept), or
    ``to(dtype)`` of it when ``dtype`` differs; a writable NumPy array shares its memory
    (kiln.from_numpy) when ``dtype`` is None or the array's own; anything else is copied into a new
    tensor (kiln.tensor). ``device`` is the CPU or None."""
    if isinstance(data, Tensor):
        result = data if dtype is None else data.to(dtype)
        return result if device is None else result.to(device)
    if (isinstance(data, np.ndarray) and data.flags.writeable
            and (dtype is None or _C.as_dtype(dtype) == _C.as_dtype(data.dtype))):
        if device is not None:
            _C.tensor(0, device=device)  # the device check of the factories
        return _C.from_numpy(data)
    return _C.tensor(data, dtype, device=device)


def is_tensor(obj):
    """``kiln.is_tensor(obj)``, PyTorch's: whether ``obj`` is a kiln tensor (a Parameter too)."""
    return isinstance(obj, Tensor)
