"""Loss cells: ``CrossEntropyLoss(reduction="mean", ignore_index=-100, label_smoothing=0.0)``
takes logits [N, C, ...] and integer class targets [N, ...]; ``MSELoss(reduction="mean")`` takes
two tensors of one shape. ``reduction`` is "mean", "sum" or "none", as in kiln.mint.cross_entropy
and kiln.mint.mse_loss.

    loss = kiln.nn.CrossEntropyLoss()(net(x), labels)
"""

from .. import _C
from ..errors import KilnValueError
from .cell import Cell

__all__ = ["CrossEntropyLoss", "MSELoss"]

_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(name, reduction):
    if reduction not in _REDUCTIONS:
        raise KilnValueError(f"{name}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    return reduction


class CrossEntropyLoss(Cell):
    """CrossEntropyLoss(reduction="mean", ignore_index=-100, label_smoothing=0.0):
    ``loss(logits, target)`` with logits [N, C, ...] and integer class targets [N, ...]; targets
    equal to ``ignore_index`` add nothing. Computed by kiln.mint.cross_entropy; see
    kiln.nn.loss's documentation."""

    def __init__(self, reduction="mean", ignore_index=-100, label_smoothing=0.0):
        super().__init__()
        self.reduction = _check_reduction("CrossEntropyLoss", reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def construct(self, logits, target):
        return _C.mint.cross_entropy(logits, target, self.reduction, self.ignore_index,
                                     self.label_smoothing)

    def extra_repr(self):
        return f"reduction={self.reduction!r}"


class MSELoss(Cell):
    """MSELoss(reduction="mean"): ``loss(input, target)``, the squared differences of two tensors,
    averaged ("mean"), summed ("sum") or kept ("none") (kiln.mint.mse_loss). Tensors of other
    shapes broadcast, with a UserWarning as in PyTorch ([N, 1] against [N] averages N * N
    pairs)."""

    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = _check_reduction("MSELoss", reduction)

    def construct(self, input, target):  # noqa: A002  (PyTorch's argument name)
        return _C.mint.mse_loss(input, target, self.reduction)

    def extra_repr(self):
        return f"reduction={self.reduction!r}"
