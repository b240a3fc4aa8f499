"""kiln.nn.Dropout(p=0.5): while the cell is training, zeroes each element with probability p and
scales the others by 1 / (1 - p); in eval mode it returns its input unchanged."""

from .. import _C
from ..errors import KilnValueError
from .cell import Cell

__all__ = ["Dropout"]


class Dropout(Cell):
    """Dropout(p=0.5): while training, zeroes each element with probability ``p`` (in [0, 1], else
    a KilnValueError) and scales the others by 1 / (1 - p); after ``eval()`` its output equals
    its input."""

    def __init__(self, p=0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise KilnValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = p

    def construct(self, x):
        return _C.mint.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"
