"""kiln.nn.utils.parametrize: tensors of a cell computed from others (PyTorch's parametrize).

    class Symmetric(kiln.nn.Cell):
        def forward(self, X):
            return X.triu() + X.triu(1).mT

    layer = kiln.nn.Linear(4, 4)
    parametrize.register_parametrization(layer, "weight", Symmetric())
    layer.weight                     # Symmetric()(layer.parametrizations.weight.original)

``register_parametrization(module, tensor_name, parametrization, *, unsafe=False)`` replaces the
parameter or buffer ``tensor_name`` of ``module`` by a property that returns
``parametrization(original)``, where ``original`` -- the tensor the optimizer trains -- now lives
in ``module.parametrizations[tensor_name]``, a ``ParametrizationList``. Everything follows
PyTorch's parametrize, names included, so state dicts move between the two:

- The cell's class becomes a subclass named ``Parametrized<Class>`` (``isinstance`` still holds;
  ``type_before_parametrizations(module)`` gives the class it had) whose property computes the
  tensor at every read: ``module.weight`` is differentiable with respect to ``original``.
- A parametrization may define ``right_inverse(value)``: registration stores
  ``right_inverse(tensor)`` as ``original`` (the same Parameter object, its values replaced, when
  the shape is kept; the tensor itself when right_inverse raises NotImplementedError, as
  PyTorch's), and ``module.weight = value`` stores ``right_inverse(value)``. A
  ``right_inverse`` that returns a sequence of tensors makes ``original0``, ``original1``, ...
  (weight_norm's g and v), which the parametrization's ``forward`` takes as arguments; each is a
  Parameter when the tensor was one, with its ``requires_grad``.
- Several parametrizations of one tensor chain in the order registered; the ``right_inverse`` of
  the chain runs them in reverse (each must define one for an assignment).
- Unless ``unsafe=True``, registration checks that the parametrization gives a tensor of the
  original's shape and dtype (a KilnValueError saying what differs), and that its
  ``right_inverse`` gives tensors (a KilnTypeError).
- ``remove_parametrizations(module, tensor_name, leave_parametrized=True)`` puts a plain parameter
  or buffer back: with the current parametrized value, or with ``original``
  (``leave_parametrized=False``, only for a single original). When the last is removed the cell
  gets its class back.
- ``cached()``: a context in which each parametrized tensor is computed once, at its first read
  (as PyTorch's, for a recurrent loop that reads the weight at every step). Under a ``kiln.jit``
  trace it is a KilnValueError, as PyTorch refuses tracing while caching: the cache would hold the
  trace's values.
- A parametrized cell deep-copies (copy.deepcopy), and pickles to a KilnTypeError, as PyTorch's:
  save its ``state_dict()``.

The parametrization is a Cell put in the ParametrizationList (its parameters and buffers are in
the state dict: ``parametrizations.weight.0._u`` for spectral_norm); it follows the cell's
``train()`` / ``eval()`` and is set to the cell's mode when registered.
"""

import collections.abc
import contextlib
import copy

from ... import _C
from ...autograd import no_grad
from ...errors import KilnTypeError, KilnValueError
from ..cell import Cell
from ..container import ModuleDict, ModuleList
from ..parameter import Parameter

__all__ = ["ParametrizationList", "cached", "is_parametrized", "register_parametrization",
           "remove_parametrizations", "type_before_parametrizations"]

_cache_depth = 0
_cache = {}


@contextlib.contextmanager
def cached():
    """Computes each parametrized tensor once inside the block, at its first read."""
    global _cache_depth, _cache
    _cache_depth += 1
    try:
        yield
    finally:
        _cache_depth -= 1
        if not _cache_depth:
            _cache = {}


def _register_tensor(cell, name, tensor):
    if isinstance(tensor, Parameter):
        cell.register_parameter(name, tensor)
    else:
        cell.register_buffer(name, tensor)


def _store(original, value):
    """Puts ``value``'s values into ``original`` (same shape), as PyTorch's ``set_``; returns the
    tensor to keep, a new one when the shape differs (Kiln tensors keep their shape)."""
    if value is original:
        return original
    if tuple(original.shape) == tuple(value.shape):
        with no_grad():
            original.copy_(value)
        return original
    if isinstance(original, Parameter):
        return Parameter(value.detach(), original.requires_grad)
    return value.detach()


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, and the tensor(s) they start from:
    ``original``, or ``original0``, ``original1``, ... when the first ``right_inverse`` returns a
    sequence. Calling it computes the parametrized tensor."""

    def __init__(self, modules, original, unsafe=False):
        super().__init__(modules)
        self.unsafe = unsafe
        shape, dtype = tuple(original.shape), original.dtype
        with no_grad():
            new = original
            for module in reversed(list(self)):
                # No right_inverse, or one that raises NotImplementedError, is the identity here
                # (PyTorch's): assignments later still raise.
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:
                        pass
        if not isinstance(new, (_C.Tensor, collections.abc.Sequence)):
            raise KilnTypeError(f"register_parametrization: right_inverse must return a tensor or "
                                f"a sequence of tensors, got {type(new).__name__}")
        self.is_tensor = isinstance(new, _C.Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        originals = (new,) if self.is_tensor else tuple(new)
        for i, tensor in enumerate(originals):
            if not isinstance(tensor, _C.Tensor):
                raise KilnTypeError(f"register_parametrization: right_inverse returned a "
                                    f"sequence whose element {i} is a {type(tensor).__name__}, "
                                    f"not a tensor")
        if self.is_tensor and new.dtype != dtype:
            raise KilnValueError(f"register_parametrization: right_inverse may not change the "
                                 f"dtype: the tensor is {dtype.name}, right_inverse returned "
                                 f"{new.dtype.name}")
        if not unsafe:  # checked before `original` changes, so a refusal leaves it as it was
            with no_grad():
                _check_result(self._through(*originals), shape, dtype, "the parametrization")
        if self.is_tensor:
            _register_tensor(self, "original", _store(original, new))
        else:
            for i, tensor in enumerate(new):
                if isinstance(original, Parameter):
                    tensor = Parameter(tensor, original.requires_grad)
                else:
                    tensor = tensor.detach()
                _register_tensor(self, f"original{i}", tensor)

    def right_inverse(self, value):
        """Stores ``value`` as the parametrized tensor: runs each parametrization's
        ``right_inverse`` from the last to the first and copies the result into the originals."""
        with no_grad():
            for module in reversed(list(self)):
                if not hasattr(module, "right_inverse"):
                    raise KilnTypeError(f"cannot assign to a tensor parametrized by "
                                        f"{type(module).__name__}: it has no right_inverse")
                value = module.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, _C.Tensor):
                    raise KilnTypeError(f"right_inverse must return a tensor, got "
                                        f"{type(value).__name__}")
                _assign_original(self, "original", value)
                return
            if (not isinstance(value, collections.abc.Sequence)
                    or len(value) != self.ntensors):
                raise KilnTypeError(f"right_inverse must return a sequence of {self.ntensors} "
                                    f"tensors, as at registration, got {type(value).__name__}")
            for i, tensor in enumerate(value):
                _assign_original(self, f"original{i}", tensor)

    def forward(self):
        if self.is_tensor:
            return self._through(self.original)
        return self._through(*(getattr(self, f"original{i}") for i in range(self.ntensors)))

    def _through(self, *originals):
        """The parametrizations applied in order, the first to ``originals``."""
        x = self[0](*originals)
        for module in list(self)[1:]:
            x = module(x)
        return x


def _assign_original(plist, name, value):
    original = getattr(plist, name)
    if not isinstance(value, _C.Tensor):
        raise KilnTypeError(f"right_inverse must return tensors, got {type(value).__name__} for "
                            f"{name}")
    if value.dtype != original.dtype or tuple(value.shape) != tuple(original.shape):
        raise KilnValueError(f"right_inverse returned a {value.dtype.name} tensor of shape "
                             f"{list(value.shape)} for {name}, which is "
                             f"{original.dtype.name} {list(original.shape)}")
    original.copy_(value)


def _check_result(result, shape, dtype, what):
    if not isinstance(result, _C.Tensor):
        raise KilnTypeError(f"register_parametrization: {what} must return a tensor, got "
                            f"{type(result).__name__}")
    if result.dtype != dtype:
        raise KilnValueError(f"register_parametrization: {what} may not change the dtype "
                             f"({dtype.name} -> {result.dtype.name}); pass unsafe=True to allow it")
    if tuple(result.shape) != shape:
        raise KilnValueError(f"register_parametrization: {what} may not change the shape "
                             f"({list(shape)} -> {list(result.shape)}); pass unsafe=True to "
                             f"allow it")


def _refuse_pickle(self):
    raise KilnTypeError(f"{type(self).__name__}: a parametrized cell pickles only through its "
                        f"state_dict() (as in PyTorch): save that and register the "
                        f"parametrizations again on load")


def _deepcopy(self, memo):
    # The copy gets a class of its own: the properties live on the class, and parametrizing or
    # unparametrizing the copy must leave the original alone.
    cls = type(self)
    attrs = {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__")}
    copied = object.__new__(type(cls.__name__, cls.__bases__, attrs))
    memo[id(self)] = copied
    for key, value in self.__dict__.items():
        copied.__dict__[key] = copy.deepcopy(value, memo)
    return copied


def _inject_class(module):
    cls = type(module)
    attrs = {"__getstate__": _refuse_pickle}
    if not hasattr(cls, "__deepcopy__"):
        attrs["__deepcopy__"] = _deepcopy
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), attrs)


def _inject_property(module, tensor_name):
    def get(self):
        plist = self.parametrizations[tensor_name]
        if not _cache_depth:
            return plist()
        if _C.jit.is_tracing():
            raise KilnValueError("kiln.jit cannot trace a cell while parametrize.cached() is "
                                 "active: the cache would keep the trace's values (leave the "
                                 "cached() block around the jitted call)")
        key = (id(self), tensor_name)
        tensor = _cache.get(key)
        if tensor is None:
            tensor = _cache[key] = plist()
        return tensor

    def set_(self, value):
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(type(module), tensor_name, property(get, set_))


def is_parametrized(module, tensor_name=None):
    """Whether ``module`` has a parametrization (on ``tensor_name``, when given)."""
    plists = module.__dict__.get("_cells", {}).get("parametrizations")
    if not isinstance(plists, ModuleDict):
        return False
    return len(plists) > 0 if tensor_name is None else tensor_name in plists


def type_before_parametrizations(module):
    """The class ``module`` had before its first parametrization (its class when it has none)."""
    return type(module).__bases__[0] if is_parametrized(module) else type(module)


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Makes ``module.<tensor_name>`` ``parametrization(original)`` (see the module's
    documentation); returns ``module``."""
    if not isinstance(module, Cell):
        raise KilnTypeError(f"register_parametrization: module must be a kiln.nn.Cell, got "
                            f"{type(module).__name__}")
    if not isinstance(parametrization, Cell):
        raise KilnTypeError(f"register_parametrization: the parametrization must be a "
                            f"kiln.nn.Cell, got {type(parametrization).__name__}")
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        plist = module.parametrizations[tensor_name]
        if not unsafe:
            current = getattr(module, tensor_name)
            shape, dtype = tuple(current.shape), current.dtype
            _check_result(parametrization(current), shape, dtype, "the new parametrization")
            if hasattr(parametrization, "right_inverse"):
                inverse = parametrization.right_inverse(current)
                if not isinstance(inverse, _C.Tensor):
                    raise KilnTypeError(f"register_parametrization: the right_inverse of a "
                                        f"parametrization added to a chain must return a "
                                        f"tensor, got {type(inverse).__name__}")
                _check_result(inverse, shape, dtype, "the new right_inverse")
        plist.append(parametrization)
        plist.unsafe |= unsafe
        return module
    if tensor_name not in module._params and tensor_name not in module._buffers:
        raise KilnValueError(f"register_parametrization: {type(module).__name__} has no "
                             f"parameter, buffer or parametrized tensor named {tensor_name!r}")
    original = getattr(module, tensor_name)
    if original is None:
        raise KilnValueError(f"register_parametrization: {type(module).__name__}.{tensor_name} "
                             f"is None; there is no tensor to parametrize")
    plist = ParametrizationList([parametrization], original, unsafe=unsafe)
    delattr(module, tensor_name)
    if not is_parametrized(module):
        _inject_class(module)
        module.parametrizations = ModuleDict()
    _inject_property(module, tensor_name)
    module.parametrizations[tensor_name] = plist
    return module


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Replaces the parametrized ``tensor_name`` by a plain parameter or buffer: its current value
    (``leave_parametrized``) or its ``original``. Returns ``module``."""
    if not is_parametrized(module, tensor_name):
        raise KilnValueError(f"remove_parametrizations: {type(module).__name__} has no "
                             f"parametrization on {tensor_name!r}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                value = getattr(module, tensor_name)
            original = _store(original, value)
    else:
        if not leave_parametrized:
            raise KilnValueError("remove_parametrizations: leave_parametrized=False needs a "
                                 "single original tensor to put back; this one is "
                                 "parametrized by several (original0, original1, ...)")
        with no_grad():
            value = getattr(module, tensor_name)
        first = plist.original0
        original = (Parameter(value, first.requires_grad) if isinstance(first, Parameter)
                    else value)
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    _register_tensor(module, tensor_name, original)
    if not is_parametrized(module):
        del module.parametrizations
        module.__class__ = type(module).__bases__[0]
    return module
