"""kiln.nn.Dropout(p=0.5, inplace=False): while the cell is training, zeroes each element with
probability p and scales the others by 1 / (1 - p); in eval mode it returns its input unchanged.
``inplace=True`` writes the result into the input, as ``F.dropout(x, p, training, inplace=True)``
does, except where autograd needs the input (it requires grad under grad mode): there it computes
out of place, as the activations with ``inplace`` do (kiln/nn/activation.py).

kiln.nn.Dropout1d, kiln.nn.Dropout2d and kiln.nn.Dropout3d (the same arguments) are PyTorch's
channel dropout (F.dropout1d, F.dropout2d and F.dropout3d): they zero whole channels, one draw
per (sample, channel), which suits convolutional features whose neighbouring values are
correlated:

    drop = kiln.nn.Dropout2d(0.2)     # x [N, C, H, W]: each x[n, c] zeroed with probability 0.2

kiln.nn.AlphaDropout and kiln.nn.FeatureAlphaDropout (the same arguments) are PyTorch's dropout
for SELU networks (F.alpha_dropout, F.feature_alpha_dropout): a dropped element takes SELU's
saturation value, then every element is mapped by a * x + b so that an input of zero mean and
unit variance keeps both (Note [Alpha dropout] in kiln/nn/functional.py); the feature one drops
whole slices x[n, c].

The cells' reprs show ``inplace`` only when it is True, as kiln.nn.Dropout's always have
(PyTorch's show ``inplace=False`` too).
"""

from .._checks import checked_bool
from . import functional as F
from .cell import Cell

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
           "FeatureAlphaDropout"]


class Dropout(Cell):
    """Dropout(p=0.5, inplace=False): while training, zeroes each element with probability ``p``
    (a number in [0, 1], else a KilnTypeError or KilnValueError) and scales the others by
    1 / (1 - p); after ``eval()`` its output is its input (F.dropout). ``inplace`` is a bool
    (else a KilnTypeError)."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        owner = type(self).__name__
        F._dropout_probability(owner, p)
        self.p = p
        self.inplace = checked_bool(owner, "inplace", inplace)

    def _writes_into(self, x):
        return F._cell_writes_into(self.inplace, x)

    def construct(self, x):
        return F.dropout(x, self.p, self.training, self._writes_into(x))

    def extra_repr(self):
        return f"p={self.p}" + (", inplace=True" if self.inplace else "")


class Dropout1d(Dropout):
    """Dropout1d(p=0.5, inplace=False): channel dropout of x [N, C, L] (or [C, L], one sample),
    as PyTorch's (F.dropout1d): while training each channel x[n, c] is zeroed with probability
    ``p`` and the others are scaled by 1 / (1 - p); after ``eval()`` the output is the input.
    Another rank is a ShapeError; the arguments are Dropout's."""

    def construct(self, x):
        return F._feature_dropout("Dropout1d", x, self.p, self.training, self._writes_into(x), 1)


class Dropout2d(Dropout):
    """Dropout2d(p=0.5, inplace=False): channel dropout of x [N, C, H, W], as PyTorch's
    (F.dropout2d): while training each channel x[n, c] is zeroed with probability ``p`` and the
    others are scaled by 1 / (1 - p); after ``eval()`` the output is the input. As PyTorch does
    (with its warning), a 3-D input is taken as [N, C, L], not as one sample [C, H, W]: use
    Dropout1d for it. Another rank is a ShapeError (PyTorch warns that it is deprecated); the
    arguments are Dropout's."""

    def construct(self, x):
        # The warning points at the cell's caller: past _dropout2d, construct and Cell.__call__.
        return F._dropout2d("Dropout2d", x, self.p, self.training, self._writes_into(x),
                            stacklevel=4)


class Dropout3d(Dropout):
    """Dropout3d(p=0.5, inplace=False): channel dropout of x [N, C, D, H, W] (or [C, D, H, W],
    one sample), as PyTorch's (F.dropout3d): while training each channel is zeroed with
    probability ``p`` and the others are scaled by 1 / (1 - p); after ``eval()`` the output is
    the input. Another rank is a ShapeError; the arguments are Dropout's."""

    def construct(self, x):
        return F._feature_dropout("Dropout3d", x, self.p, self.training, self._writes_into(x), 3)


class AlphaDropout(Dropout):
    """AlphaDropout(p=0.5, inplace=False): F.alpha_dropout while training (each element dropped
    with probability ``p`` to SELU's saturation value, then all mapped so that a zero mean and
    unit variance are kept); after ``eval()`` the output is the input. The arguments are
    Dropout's."""

    def construct(self, x):
        return F._alpha_dropout("AlphaDropout", x, self.p, self.training, self._writes_into(x),
                                feature=False)


class FeatureAlphaDropout(Dropout):
    """FeatureAlphaDropout(p=0.5, inplace=False): AlphaDropout with one draw per slice x[n, c]
    of x [N, C, ...] (F.feature_alpha_dropout; as PyTorch's, the first two dimensions index the
    features whatever the rank). The arguments are Dropout's."""

    def construct(self, x):
        return F._alpha_dropout("FeatureAlphaDropout", x, self.p, self.training,
                                self._writes_into(x), feature=True)
