"""kiln.nn.Parameter: a tensor that a Cell registers as one of its trainable weights.

    w = kiln.nn.Parameter(kiln.mint.zeros(3, 4))      # requires_grad=True
    frozen = kiln.nn.Parameter(kiln.tensor([1.0]), requires_grad=False)

A Parameter is a ``kiln.Tensor`` (every op accepts it) holding ``data.detach()``: it shares
``data``'s memory but none of its autograd history, and it is a leaf of the autograd graph.
Assigning one to an attribute of a ``Cell`` registers it (see ``kiln.nn.Cell``).
"""

from .. import _C
from .._tensor import _repr as _tensor_repr

__all__ = ["Parameter"]


class Parameter(_C.Tensor):
    """A leaf tensor registered by ``Cell`` attribute assignment; ``requires_grad`` by default."""

    def __init__(self, data, requires_grad=True):
        if not isinstance(data, _C.Tensor):
            data = _C.tensor(data)  # a list, a NumPy array or a number (float32 by default)
        super().__init__(data.detach())
        self.requires_grad_(requires_grad)

    def __repr__(self):
        return f"Parameter containing:\n{_tensor_repr(self)}"

    __str__ = __repr__
