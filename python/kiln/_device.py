"""kiln.device: where a tensor lives, PyTorch's torch.device.

    device = kiln.device("cuda" if use_gpu else "cpu")
    x = kiln.mint.zeros(3, device=device); net.to(device); y = x.to(device)

Kiln's tensors live on the CPU: ``tensor.device`` is ``kiln.device("cpu")``, and every ``device``
argument (the factories', ``Tensor.to``, ``Cell.to``) takes ``"cpu"``, ``"cpu:0"``, a kiln.device
of the CPU or None. A device of PyTorch's other types ("cuda", "cuda:1", "mps", ...) can be named,
so code that picks one at run time ports unchanged, but using it is a KilnValueError saying Kiln
runs on the CPU. A device is a ``str`` (its name, "cpu" or "cuda:1"), so it compares equal to
that name and passes wherever a device name does; ``type`` and ``index`` are its parts.

This module also gives Tensor PyTorch's ``device``, ``is_cpu`` (True), ``is_cuda`` (False) and
``cuda()`` (a KilnValueError).
"""

import builtins

from . import _C
from .errors import KilnTypeError, KilnValueError

__all__ = ["device"]

# PyTorch's device types: they can be named; only the CPU can be used.
_TYPES = ("cpu", "cuda", "mps", "xpu", "meta", "hip", "xla")


class device(str):  # noqa: N801  (PyTorch's name)
    """device(type, index=None) or device("type:index"): ``type`` is "cpu" (or another of
    PyTorch's device types, which only name a device Kiln lacks), ``index`` an int >= 0 or None."""

    def __new__(cls, type, index=None):  # noqa: A002  (PyTorch's argument name)
        if isinstance(type, device):
            if index is not None:
                raise KilnValueError(f"device: {type!r} has an index already; got index {index}")
            return type
        if not isinstance(type, str):
            raise KilnTypeError(f"device: expected a device name such as 'cpu', got "
                                f"{builtins.type(type).__name__}")
        name, colon, number = type.partition(":")
        if colon:
            if index is not None:
                raise KilnValueError(f"device: {type!r} has an index already; got index {index}")
            if not (number.isascii() and number.isdigit()):
                raise KilnValueError(f"device: expected 'type:index' with an index >= 0, got "
                                     f"{type!r}")
            index = int(number)
        if name not in _TYPES:
            raise KilnValueError(f"device: unknown device type {name!r}; expected one of "
                                 f"{', '.join(_TYPES)} (Kiln runs on the CPU)")
        if index is not None and (isinstance(index, bool) or not isinstance(index, int)
                                  or index < 0):
            raise KilnValueError(f"device: expected index to be an int >= 0 or None, got "
                                 f"{index!r}")
        self = super().__new__(cls, name if index is None else f"{name}:{index}")
        object.__setattr__(self, "type", name)
        object.__setattr__(self, "index", index)
        return self

    def __repr__(self):
        index = "" if self.index is None else f", index={self.index}"
        return f"device(type={self.type!r}{index})"

    def __reduce__(self):
        return device, (self.type, self.index)

    def __setattr__(self, name, value):
        raise AttributeError(f"kiln.device is immutable: cannot set {name!r}")


def check_usable(what, target):
    """``target`` (a device name or kiln.device) as a kiln.device, which must be the CPU: another
    type is a KilnValueError saying Kiln runs on the CPU."""
    d = device(target)
    if d.type != "cpu" or d.index not in (None, 0):
        raise KilnValueError(f"{what}: device {str(d)!r} is not available; Kiln runs on the CPU "
                             f"('cpu')")
    return d


def dtype_of_to(what, args, kwargs, dtype_class, tensor_class):
    """The dtype PyTorch's ``to`` arguments ask for (None: keep it): ``to(device)``,
    ``to(dtype)``, ``to(tensor)`` (its dtype), ``to(device, dtype)`` and the keywords ``device``,
    ``dtype`` and ``non_blocking`` (which changes nothing). Devices are checked (check_usable)."""
    unknown = set(kwargs) - {"device", "dtype", "non_blocking"}
    if unknown:
        raise KilnTypeError(f"{what}: unexpected keyword argument {sorted(unknown)[0]!r}")
    if len(args) > 2:
        raise KilnTypeError(f"{what}: expected at most a device and a dtype, got {len(args)} "
                            f"arguments")
    dtype = kwargs.get("dtype")
    if kwargs.get("device") is not None:
        check_usable(what, kwargs["device"])
    for arg in args:
        if isinstance(arg, tensor_class):
            dtype = arg.dtype
        elif isinstance(arg, dtype_class):
            dtype = arg
        elif isinstance(arg, str):
            check_usable(what, arg)
        else:
            raise KilnTypeError(f"{what}: expected a device, a dtype or a tensor, got "
                                f"{builtins.type(arg).__name__}")
    if dtype is not None and not isinstance(dtype, dtype_class):
        raise KilnTypeError(f"{what}: expected dtype to be a kiln.dtype, got "
                            f"{builtins.type(dtype).__name__}")
    return dtype


_CPU = device("cpu")
_C.Tensor.device = property(lambda self: _CPU,
                            doc="Where the tensor lives: kiln.device('cpu') (Kiln runs on the "
                                "CPU).")
_C.Tensor.is_cpu = property(lambda self: True, doc="True: Kiln's tensors live on the CPU.")
_C.Tensor.is_cuda = property(lambda self: False, doc="False: Kiln runs on the CPU.")


def _tensor_cuda(self, device=None, non_blocking=False):
    """A KilnValueError: Kiln runs on the CPU (PyTorch's ``Tensor.cuda()``)."""
    check_usable("Tensor.cuda", "cuda" if device is None else f"cuda:{device}")


_C.Tensor.cuda = _tensor_cuda
