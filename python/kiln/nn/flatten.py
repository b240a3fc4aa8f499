"""kiln.nn.Flatten and kiln.nn.Unflatten: reshapes that merge dimensions into one or split one
into several, as PyTorch's.

    nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten(), nn.Linear(8 * 30 * 30, 10))   # x [N, 3, 32, 32]
    nn.Unflatten(1, (8, 4, 4))                                 # [N, 128] -> [N, 8, 4, 4]
"""

import math

from .. import _C
from .._checks import checked_int, wrap_dim
from ..errors import KilnTypeError, KilnValueError, ShapeError
from .cell import Cell

__all__ = ["Flatten", "Unflatten"]


class Flatten(Cell):
    """Flatten(start_dim=1, end_dim=-1): x with dimensions start_dim..end_dim merged into one
    (kiln.mint.flatten); the default keeps the batch dimension. Dimensions out of range for x
    are a KilnIndexError when the cell runs."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = checked_int("Flatten", "start_dim", start_dim)
        self.end_dim = checked_int("Flatten", "end_dim", end_dim)

    def construct(self, x):
        return _C.mint.flatten(x, self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Cell):
    """Unflatten(dim, unflattened_size): x with dimension ``dim`` split into
    ``unflattened_size`` (a non-empty tuple or list of ints, one of which may be -1: inferred).
    Sizes whose product is not that dimension's size are a ShapeError naming both, and a ``dim``
    out of range a KilnIndexError, when the cell runs. Under kiln.jit(dynamic=True) a dimension
    of k * B (B the batch size, as after Flatten(0, 1)) splits into (-1, k) at every B, but the
    batch dimension itself does not: (-1, k) would make a dimension of B / k, and a dynamic
    graph's dimensions must be B times an integer plus a constant (a KilnValueError at the
    second batch size; use dynamic=False)."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim = checked_int("Unflatten", "dim", dim)
        if not isinstance(unflattened_size, (tuple, list)):
            raise KilnTypeError(f"Unflatten: expected unflattened_size to be a tuple or list of "
                                f"ints, got {type(unflattened_size).__name__} "
                                f"{unflattened_size!r}")
        sizes = tuple(checked_int("Unflatten", f"unflattened_size[{i}]", size, low=-1)
                      for i, size in enumerate(unflattened_size))
        if not sizes:
            raise KilnValueError("Unflatten: unflattened_size must not be empty")
        if sizes.count(-1) > 1:
            raise KilnValueError(f"Unflatten: at most one size can be -1 (inferred), got {sizes}")
        self.unflattened_size = sizes

    def construct(self, x):
        shape = tuple(x.shape)
        # A 0-d input has no dimension to split (PyTorch's unflatten refuses it too).
        dim = wrap_dim("Unflatten", "dim", self.dim, len(shape), scalar_as_1d=False)
        sizes = self.unflattened_size
        known = math.prod(size for size in sizes if size != -1)
        if -1 in sizes:
            # Inferred here rather than by reshape, which would name the whole shape: an input
            # of zero elements leaves it undefined, as in PyTorch.
            if known == 0 or shape[dim] % known:
                raise self._mismatch(shape, dim)
            sizes = tuple(shape[dim] // known if size == -1 else size for size in sizes)
        elif known != shape[dim]:
            raise self._mismatch(shape, dim)
        return _C.mint.reshape(x, shape[:dim] + sizes + shape[dim + 1:])

    def _mismatch(self, shape, dim):
        return ShapeError(f"Unflatten: sizes {self.unflattened_size} do not multiply to the size "
                          f"of dim {self.dim} ({shape[dim]}) of the input of shape "
                          f"[{', '.join(map(str, shape))}]")

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
