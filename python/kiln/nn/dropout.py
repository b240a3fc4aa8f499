"""kiln.nn.Dropout(p=0.5, inplace=False): while the cell is training, zeroes each element with
probability p and scales the others by 1 / (1 - p); in eval mode it returns its input unchanged.
``inplace=True`` writes the result into the input, as ``F.dropout(x, p, training, inplace=True)``
does, except where autograd needs the input (it requires grad under grad mode): there it computes
out of place, as the activations with ``inplace`` do (kiln/nn/activation.py)."""

from .._checks import checked_bool
from ..autograd import is_grad_enabled
from ..errors import KilnValueError
from . import functional as F
from .cell import Cell

__all__ = ["Dropout"]


class Dropout(Cell):
    """Dropout(p=0.5, inplace=False): while training, zeroes each element with probability ``p``
    (in [0, 1], else a KilnValueError) and scales the others by 1 / (1 - p); after ``eval()`` its
    output is its input (F.dropout). ``inplace`` is a bool (else a KilnTypeError)."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise KilnValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = p
        self.inplace = checked_bool("Dropout", "inplace", inplace)

    def construct(self, x):
        writes_into = self.inplace and not (x.requires_grad and is_grad_enabled())
        return F.dropout(x, self.p, self.training, writes_into)

    def extra_repr(self):
        return f"p={self.p}" + (", inplace=True" if self.inplace else "")
