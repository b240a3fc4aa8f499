"""kiln.nn.Dropout(p=0.5, inplace=False): while the cell is training, zeroes each element with
probability p and scales the others by 1 / (1 - p); in eval mode it returns its input unchanged.
``inplace=True`` writes the result into the input, as ``F.dropout(x, p, training, inplace=True)``
does, except where autograd needs the input (it requires grad under grad mode): there it computes
out of place, as the activations with ``inplace`` do (kiln/nn/activation.py).

kiln.nn.Dropout1d and kiln.nn.Dropout2d (the same arguments) are PyTorch's channel dropout: they
zero whole channels, one draw per (sample, channel), which suits convolutional features whose
neighbouring values are correlated:

    drop = kiln.nn.Dropout2d(0.2)     # x [N, C, H, W]: each x[n, c] zeroed with probability 0.2
"""

import warnings

from .. import _C
from .._checks import checked_bool
from ..errors import KilnValueError, ShapeError
from ..mint._composite import _cast, _floating_tensor, check_real
from ..mint._random import sample_dtype
from . import functional as F
from .cell import Cell

__all__ = ["Dropout", "Dropout1d", "Dropout2d"]

_mint = _C.mint


class Dropout(Cell):
    """Dropout(p=0.5, inplace=False): while training, zeroes each element with probability ``p``
    (a number in [0, 1], else a KilnTypeError or KilnValueError) and scales the others by
    1 / (1 - p); after ``eval()`` its output is its input (F.dropout). ``inplace`` is a bool
    (else a KilnTypeError)."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        owner = type(self).__name__
        if not 0.0 <= check_real(owner, "p", p) <= 1.0:
            raise KilnValueError(f"{owner}: p must be in [0, 1], got {p}")
        self.p = p
        self.inplace = checked_bool(owner, "inplace", inplace)

    def _writes_into(self, x):
        return F._cell_writes_into(self.inplace, x)

    def construct(self, x):
        return F.dropout(x, self.p, self.training, self._writes_into(x))

    def extra_repr(self):
        return f"p={self.p}" + (", inplace=True" if self.inplace else "")


def _channel_dropout(x, p, training, channel_dim):
    """``x`` (a floating-point tensor) with each slice ``x[i_0, ..., i_channel_dim]`` (a channel
    of one sample) zeroed with probability ``p`` and the others scaled by 1 / (1 - p) while
    ``training``, as PyTorch's feature dropout; ``x`` itself when not training, for p = 0 or
    with no elements."""
    if not training or p == 0 or x.numel() == 0:
        return x
    if p == 1:
        return x * 0.0  # PyTorch's input * 0 (NaN and infinities give NaN), not 0 / 0
    shape = list(x.shape[:channel_dim + 1]) + [1] * (x.ndim - channel_dim - 1)
    # Drawn as float32 (float64 for float64) for the probability's precision, then the scaled
    # mask rounded once into x's dtype, as PyTorch's noise / (1 - p).
    keep = _mint.bernoulli(_mint.full(shape, 1.0 - p, dtype=sample_dtype(x)))
    return x * _cast(keep * (1.0 / (1.0 - p)), x.dtype)


class Dropout1d(Dropout):
    """Dropout1d(p=0.5, inplace=False): channel dropout of x [N, C, L] (or [C, L], one sample),
    as PyTorch's: while training each channel x[n, c] is zeroed with probability ``p`` and the
    others are scaled by 1 / (1 - p); after ``eval()`` the output is the input. Another rank is a
    ShapeError; the arguments are Dropout's."""

    def construct(self, x):
        _floating_tensor("Dropout1d", "input", x)
        if x.ndim not in (2, 3):
            raise ShapeError(f"Dropout1d: expected a 2-D [C, L] or 3-D [N, C, L] input, got "
                             f"shape {list(x.shape)}")
        out = _channel_dropout(x, self.p, self.training, x.ndim - 2)
        return F._in_place("Dropout1d", x, out, self._writes_into(x))


class Dropout2d(Dropout):
    """Dropout2d(p=0.5, inplace=False): channel dropout of x [N, C, H, W], as PyTorch's: while
    training each channel x[n, c] is zeroed with probability ``p`` and the others are scaled by
    1 / (1 - p); after ``eval()`` the output is the input. As PyTorch does (with its warning), a
    3-D input is taken as [N, C, L], not as one sample [C, H, W]: use Dropout1d for it. Another
    rank is a ShapeError (PyTorch warns that it is deprecated); the arguments are Dropout's."""

    def construct(self, x):
        _floating_tensor("Dropout2d", "input", x)
        if x.ndim not in (3, 4):
            raise ShapeError(f"Dropout2d: expected a 4-D [N, C, H, W] input (or 3-D [N, C, L]), "
                             f"got shape {list(x.shape)}")
        if x.ndim == 3:
            warnings.warn("Dropout2d: a 3-D input is taken as [N, C, L] (channel-wise 1-d "
                          "dropout), as PyTorch does today; PyTorch will take it as one sample "
                          "[C, H, W] in a future release: use Dropout1d for [N, C, L]",
                          stacklevel=3)  # the caller of the cell
        out = _channel_dropout(x, self.p, self.training, 1)
        return F._in_place("Dropout2d", x, out, self._writes_into(x))
