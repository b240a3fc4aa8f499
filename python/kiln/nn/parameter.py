"""kiln.nn.Parameter: a tensor that a Cell registers as one of its trainable weights.

    w = kiln.nn.Parameter(kiln.mint.zeros(3, 4))      # requires_grad=True
    frozen = kiln.nn.Parameter(kiln.tensor([1.0]), requires_grad=False)

A Parameter is a ``kiln.Tensor`` (every op accepts it) holding ``data.detach()``: it shares
``data``'s memory but none of its autograd history, and it is a leaf of the autograd graph.
Assigning one to an attribute of a ``Cell`` registers it (see ``kiln.nn.Cell``).

Copies are Parameters with the same ``requires_grad`` and attributes, as in PyTorch:
``copy.copy(p)`` shares ``p``'s memory, ``copy.deepcopy(p)`` has its own (without ``p.grad``, so
a deep-copied model starts with no gradients), and ``pickle`` keeps the values, not ``p.grad``.

A Kiln tensor keeps its dtype for life, so ``Cell.to`` (``double()``, ``half()``, ...) puts new
Parameters in the place of the ones it converts, and ``Cell.load_state_dict(assign=True)`` the
ones it is given, where PyTorch changes its Parameter objects in place. The old Parameter is then
superseded: ``superseded(p)`` says by what and under which name (None for a tensor that is not),
so that whoever still holds it (an optimizer built before) can say why it no longer trains the
cell, and its ``.grad`` is dropped (``Cell.to`` hands it, converted, to the new Parameter). The
note is an attribute of the Parameter, so it travels with its copies.
"""

import copy

from .. import _C
from .._tensor import _repr as _tensor_repr
from ..errors import KilnTypeError

__all__ = ["Parameter"]


class Parameter(_C.Tensor):
    """A leaf tensor registered by ``Cell`` attribute assignment; ``requires_grad`` by default."""

    def __init__(self, data, requires_grad=True):
        if not isinstance(requires_grad, bool):
            raise KilnTypeError(f"Parameter: requires_grad must be a bool, got "
                                f"{type(requires_grad).__name__} {requires_grad!r}")
        if not isinstance(data, _C.Tensor):
            data = _C.tensor(data)  # a list, a NumPy array or a number (floats: the default dtype)
        super().__init__(data.detach())
        self.requires_grad_(requires_grad)

    def __repr__(self):
        return f"Parameter containing:\n{_tensor_repr(self)}"

    __str__ = __repr__

    def __copy__(self):
        copied = type(self)(self, self.requires_grad)  # __init__ detaches: the memory is shared
        copied.__dict__.update(self.__dict__)
        return copied

    def __deepcopy__(self, memo):
        copied = type(self)(copy.deepcopy(self.detach(), memo), self.requires_grad)
        memo[id(self)] = copied  # before the attributes, which may refer back to the Parameter
        copied.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return copied

    def __reduce__(self):
        # The values travel as a plain tensor (Tensor.__reduce__); pickle calls the class with
        # (values, requires_grad), then restores the attributes.
        return type(self), (self.detach(), self.requires_grad), self.__dict__ or None


def supersede(param, note):
    """Marks the Parameter ``param`` as replaced in its cell by another (``note`` says by what and
    under which name) and drops its gradient; see the module's documentation."""
    param._superseded = note
    param.grad = None


def superseded(tensor):
    """The note ``supersede`` left on ``tensor`` (a str), or None when it has none."""
    return getattr(tensor, "_superseded", None)
