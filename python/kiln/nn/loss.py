"""Loss cells, each ``loss(input, target)`` with ``reduction`` "mean", "sum" or "none" (any other
is a KilnValueError), computed by the kiln.mint function named after it:

- ``CrossEntropyLoss(reduction="mean", ignore_index=-100, label_smoothing=0.0, *,
  weight=None)``: logits [N, C, ...] and integer class targets [N, ...] (or class probabilities)
  (kiln.mint.cross_entropy); ``NLLLoss(reduction="mean", ignore_index=-100, *, weight=None)``:
  the same for log-probabilities (kiln.mint.nll_loss). ``weight`` holds PyTorch's class weights,
  a floating-point tensor [C] kept as a buffer: each target's loss is scaled by its class's
  weight, and "mean" divides by the sum of the weights of the targets counted. It is
  keyword-only, since ``reduction`` comes first here where PyTorch has ``weight``: a tensor
  given first is a KilnTypeError saying so.
- ``MSELoss(reduction="mean")``, ``L1Loss(reduction="mean")``, ``SmoothL1Loss(reduction="mean",
  beta=1.0)`` and ``HuberLoss(reduction="mean", delta=1.0)``: differences of two tensors
  (kiln.mint.mse_loss, l1_loss, smooth_l1_loss, huber_loss). MSELoss broadcasts the two with a
  warning; the others want one shape (a ShapeError otherwise).
- ``BCELoss(weight=None, reduction="mean")``: probabilities against targets in [0, 1] of their
  shape (kiln.mint.binary_cross_entropy); ``BCEWithLogitsLoss(weight=None, reduction="mean",
  pos_weight=None)``: the same from logits, without overflow
  (kiln.mint.binary_cross_entropy_with_logits). ``weight`` and ``pos_weight`` are kiln tensors
  that broadcast to the input's shape, kept as attributes.
- ``KLDivLoss(reduction="mean", log_target=False)``: the KL divergence of log-probabilities from
  target probabilities (F.kl_div), which also takes ``reduction="batchmean"``.
- With PyTorch's signatures, ``size_average`` and ``reduce`` in their places (they must be None:
  a KilnValueError otherwise) and reprs that show every argument:
  ``SoftMarginLoss(size_average=None, reduce=None, reduction="mean")`` (F.soft_margin_loss),
  ``MarginRankingLoss(margin=0.0, ...)`` (F.margin_ranking_loss),
  ``CosineEmbeddingLoss(margin=0.0, ...)`` (F.cosine_embedding_loss),
  ``HingeEmbeddingLoss(margin=1.0, ...)`` (F.hinge_embedding_loss),
  ``TripletMarginLoss(margin=1.0, p=2.0, eps=1e-6, swap=False, ...)`` (F.triplet_margin_loss),
  ``GaussianNLLLoss(*, full=False, eps=1e-6, reduction="mean")`` (F.gaussian_nll_loss; called
  as ``loss(input, target, var)``), ``PoissonNLLLoss(log_input=True, full=False,
  size_average=None, eps=1e-8, reduce=None, reduction="mean")`` (F.poisson_nll_loss) and
  ``MultiMarginLoss(p=1, margin=1.0, weight=None, ...)`` (F.multi_margin_loss; ``weight`` [C]
  kept as a buffer), ``MultiLabelMarginLoss(...)`` (F.multilabel_margin_loss) and
  ``MultiLabelSoftMarginLoss(weight=None, ...)`` (F.multilabel_soft_margin_loss; ``weight`` kept
  as a buffer). Their inputs and targets broadcast as PyTorch's do.
- ``TripletMarginWithDistanceLoss(*, distance_function=None, margin=1.0, swap=False,
  reduction="mean")`` (F.triplet_margin_with_distance_loss) and ``CTCLoss(blank=0,
  reduction="mean", zero_infinity=False)`` (F.ctc_loss; called as ``loss(log_probs, targets,
  input_lengths, target_lengths)``), with PyTorch's signatures.

    loss = kiln.nn.CrossEntropyLoss()(net(x), labels)
"""

from .. import _C
from .._checks import checked_bool, checked_int
from ..errors import DTypeError, KilnTypeError, KilnValueError, ShapeError
from ..mint import _composite
from . import functional as F
from ._loss_functions import _kl_div, _no_legacy, _triplet_margin
from .cell import Cell

__all__ = ["CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss",
           "BCELoss", "BCEWithLogitsLoss", "KLDivLoss", "SoftMarginLoss", "MarginRankingLoss",
           "CosineEmbeddingLoss", "HingeEmbeddingLoss", "TripletMarginLoss", "GaussianNLLLoss",
           "PoissonNLLLoss", "MultiMarginLoss", "MultiLabelMarginLoss", "MultiLabelSoftMarginLoss",
           "TripletMarginWithDistanceLoss", "CTCLoss"]

_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(name, reduction, allowed=_REDUCTIONS):
    if reduction not in allowed:
        raise KilnValueError(f"{name}: reduction must be one of {allowed}, got {reduction!r}")
    return reduction


def _optional_tensor(name, argument, value):
    """``value`` when it is None or a kiln tensor (its shape is checked against each input)."""
    if value is not None and not isinstance(value, _C.Tensor):
        raise KilnTypeError(f"{name}: expected {argument} to be a kiln.Tensor or None, got "
                            f"{type(value).__name__}")
    return value


def _class_weight(name, weight):
    """A class loss's ``weight``: None, or a 1-d floating-point kiln tensor (its length is checked
    against the classes of each input)."""
    if weight is None:
        return None
    if not isinstance(weight, _C.Tensor):
        raise KilnTypeError(f"{name}: expected weight to be a kiln.Tensor or None, got "
                            f"{type(weight).__name__}")
    if not weight.dtype.is_floating_point:
        raise DTypeError(f"{name}: expected a floating-point weight, got {weight.dtype.name}")
    if weight.ndim != 1:
        raise ShapeError(f"{name}: expected weight of shape [C] (one per class), got shape "
                         f"{list(weight.shape)}")
    return weight


def _class_reduction(name, reduction):
    """``_check_reduction``, naming PyTorch's first argument when that is what came first."""
    if isinstance(reduction, _C.Tensor):
        raise KilnTypeError(f"{name}: got a kiln.Tensor as reduction, the first argument here; "
                            f"pass class weights by name (weight=...), which PyTorch takes first")
    return _check_reduction(name, reduction)


class _ClassLoss(Cell):
    """The base of the class losses, which keep PyTorch's ``weight`` buffer."""

    def __setstate__(self, state):
        super().__setstate__(state)
        self._buffers.setdefault("weight", None)  # a pickle from before class weights


class CrossEntropyLoss(_ClassLoss):
    """CrossEntropyLoss(reduction="mean", ignore_index=-100, label_smoothing=0.0, *,
    weight=None): ``loss(logits, target)`` with logits [N, C, ...] and integer class targets
    [N, ...]; targets equal to ``ignore_index`` add nothing, and each other one's loss is scaled
    by ``weight[target]`` when class weights are given. Computed by kiln.mint.cross_entropy; see
    kiln.nn.loss's documentation."""

    def __init__(self, reduction="mean", ignore_index=-100, label_smoothing=0.0, *, weight=None):
        super().__init__()
        self.register_buffer("weight", _class_weight("CrossEntropyLoss", weight))
        self.reduction = _class_reduction("CrossEntropyLoss", reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def construct(self, logits, target):
        return _composite.cross_entropy(logits, target, self.reduction, self.ignore_index,
                                        self.label_smoothing, weight=self.weight)

    def extra_repr(self):
        return f"reduction={self.reduction!r}"


class NLLLoss(_ClassLoss):
    """NLLLoss(reduction="mean", ignore_index=-100, *, weight=None): ``loss(log_probs, target)``
    with log-probabilities [N, C, ...] (a log_softmax's) and integer class targets [N, ...]: minus
    the log-probability of each target's class, times ``weight[target]`` when class weights are
    given; targets equal to ``ignore_index`` add nothing, and "mean" divides by the number of the
    others, or by the sum of their weights (kiln.mint.nll_loss)."""

    def __init__(self, reduction="mean", ignore_index=-100, *, weight=None):
        super().__init__()
        self.register_buffer("weight", _class_weight("NLLLoss", weight))
        self.reduction = _class_reduction("NLLLoss", reduction)
        self.ignore_index = checked_int("NLLLoss", "ignore_index", ignore_index)

    def construct(self, log_probs, target):
        return _composite.nll_loss(log_probs, target, self.reduction, self.ignore_index,
                                   weight=self.weight)

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


class L1Loss(Cell):
    """L1Loss(reduction="mean"): ``loss(input, target)``, the absolute differences of two tensors
    of one shape, reduced (kiln.mint.l1_loss)."""

    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = _check_reduction("L1Loss", reduction)

    def construct(self, input, target):  # noqa: A002
        return _composite.l1_loss(input, target, self.reduction)

    def extra_repr(self):
        return f"reduction={self.reduction!r}"


class SmoothL1Loss(Cell):
    """SmoothL1Loss(reduction="mean", beta=1.0): ``loss(input, target)``; with z the absolute
    difference, 0.5 * z^2 / beta below beta and z - 0.5 * beta above, reduced (beta >= 0, else a
    KilnValueError; kiln.mint.smooth_l1_loss)."""

    def __init__(self, reduction="mean", beta=1.0):
        super().__init__()
        self.reduction = _check_reduction("SmoothL1Loss", reduction)
        self.beta = _composite.check_real("SmoothL1Loss", "beta", beta)
        if self.beta < 0:
            raise KilnValueError(f"SmoothL1Loss: expected beta >= 0, got {beta}")

    def construct(self, input, target):  # noqa: A002
        return _composite.smooth_l1_loss(input, target, self.reduction, self.beta)

    def extra_repr(self):
        return f"reduction={self.reduction!r}, beta={self.beta}"


class HuberLoss(Cell):
    """HuberLoss(reduction="mean", delta=1.0): ``loss(input, target)``; with z the absolute
    difference, 0.5 * z^2 below delta and delta * (z - 0.5 * delta) above, reduced (delta > 0,
    else a KilnValueError; kiln.mint.huber_loss)."""

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__()
        self.reduction = _check_reduction("HuberLoss", reduction)
        self.delta = _composite.check_real("HuberLoss", "delta", delta)
        if not self.delta > 0:
            raise KilnValueError(f"HuberLoss: expected delta > 0, got {delta}")

    def construct(self, input, target):  # noqa: A002
        return _composite.huber_loss(input, target, self.reduction, self.delta)

    def extra_repr(self):
        return f"reduction={self.reduction!r}, delta={self.delta}"


class BCELoss(Cell):
    """BCELoss(weight=None, reduction="mean"): ``loss(probs, target)``, the binary cross entropy
    of probabilities against targets in [0, 1] of their shape, each element's times ``weight``
    (broadcast), reduced (kiln.mint.binary_cross_entropy, which documents the clamp at -100 and
    the gradient at 0 and 1). Prefer BCEWithLogitsLoss on the logits."""

    def __init__(self, weight=None, reduction="mean"):
        super().__init__()
        # Buffers, as PyTorch's: in state_dict, copied with the cell.
        self.register_buffer("weight", _optional_tensor("BCELoss", "weight", weight))
        self.reduction = _check_reduction("BCELoss", reduction)

    def construct(self, input, target):  # noqa: A002
        return _composite.binary_cross_entropy(input, target, self.weight, self.reduction)

    def extra_repr(self):
        return f"reduction={self.reduction!r}"


class BCEWithLogitsLoss(Cell):
    """BCEWithLogitsLoss(weight=None, reduction="mean", pos_weight=None): ``loss(logits, target)``,
    the binary cross entropy of sigmoid(logits) against targets in [0, 1] of their shape, computed
    without overflow; ``pos_weight`` (typically [C] for [..., C] logits) weighs the positive term,
    ``weight`` each element (kiln.mint.binary_cross_entropy_with_logits)."""

    def __init__(self, weight=None, reduction="mean", pos_weight=None):
        super().__init__()
        self.register_buffer("weight", _optional_tensor("BCEWithLogitsLoss", "weight", weight))
        self.reduction = _check_reduction("BCEWithLogitsLoss", reduction)
        self.register_buffer("pos_weight",
                             _optional_tensor("BCEWithLogitsLoss", "pos_weight", pos_weight))

    def construct(self, input, target):  # noqa: A002
        return _composite.binary_cross_entropy_with_logits(input, target, self.weight,
                                                           self.reduction, self.pos_weight)

    def extra_repr(self):
        return f"reduction={self.reduction!r}"


class KLDivLoss(Cell):
    """KLDivLoss(reduction="mean", log_target=False): ``loss(input, target)``, the pointwise KL
    divergence target * (log(target) - input) of log-probabilities ``input`` from the
    probabilities ``target`` of its shape (log-probabilities with ``log_target``), reduced as
    F.kl_div does: "batchmean" divides the sum by the batch size (dim 0), which is the KL
    divergence, "mean" by the number of elements (with PyTorch's warning), or "sum" or "none".
    ``reduction`` is one of those (else a KilnValueError) and ``log_target`` a bool (else a
    KilnTypeError)."""

    def __init__(self, reduction="mean", log_target=False):
        super().__init__()
        self.reduction = _check_reduction("KLDivLoss", reduction, _REDUCTIONS + ("batchmean",))
        self.log_target = checked_bool("KLDivLoss", "log_target", log_target)

    def construct(self, input, target):  # noqa: A002
        # reduction="mean"'s warning points at the cell's caller: past _kl_div, construct and
        # Cell.__call__.
        return _kl_div(input, target, None, None, self.reduction, self.log_target,
                       stacklevel=4)

    def extra_repr(self):
        return f"reduction={self.reduction!r}, log_target={self.log_target}"


class _Loss(Cell):
    """The base of the losses that keep PyTorch's ``size_average`` and ``reduce`` in their
    positions (they must be None: _no_legacy's KilnValueError otherwise) before
    ``reduction``."""

    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        _no_legacy(type(self).__name__, size_average, reduce)
        self.reduction = _check_reduction(type(self).__name__, reduction)

    def _repr(self, *parts):
        return ", ".join(parts + (f"reduction={self.reduction!r}",))

    def extra_repr(self):
        return self._repr()


class _MarginLoss(_Loss):
    """The base of the losses with a real ``margin`` first (a KilnTypeError otherwise)."""

    def __init__(self, margin, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.margin = _composite.check_real(type(self).__name__, "margin", margin)

    def extra_repr(self):
        return self._repr(f"margin={self.margin}")


class SoftMarginLoss(_Loss):
    """SoftMarginLoss(size_average=None, reduce=None, reduction="mean"): ``loss(input,
    target)``, log(1 + exp(-target * input)) for targets of 1 or -1, reduced
    (F.soft_margin_loss)."""

    def construct(self, input, target):  # noqa: A002
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class MarginRankingLoss(_MarginLoss):
    """MarginRankingLoss(margin=0.0, size_average=None, reduce=None, reduction="mean"):
    ``loss(input1, input2, target)``, max(0, -target * (input1 - input2) + margin), reduced
    (F.margin_ranking_loss)."""

    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(margin, size_average, reduce, reduction)

    def construct(self, input1, input2, target):
        return F.margin_ranking_loss(input1, input2, target, self.margin,
                                     reduction=self.reduction)


class CosineEmbeddingLoss(_MarginLoss):
    """CosineEmbeddingLoss(margin=0.0, size_average=None, reduce=None, reduction="mean"):
    ``loss(input1, input2, target)`` of inputs [N, D] and targets [N] of 1 or -1: 1 - cos where
    the target is 1, max(0, cos - margin) where it is -1 (F.cosine_embedding_loss)."""

    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(margin, size_average, reduce, reduction)

    def construct(self, input1, input2, target):
        return F.cosine_embedding_loss(input1, input2, target, self.margin,
                                       reduction=self.reduction)


class HingeEmbeddingLoss(_MarginLoss):
    """HingeEmbeddingLoss(margin=1.0, size_average=None, reduce=None, reduction="mean"):
    ``loss(input, target)`` of distances and targets of 1 or -1: x where the target is 1,
    max(0, margin - x) where it is -1 (F.hinge_embedding_loss)."""

    def __init__(self, margin=1.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(margin, size_average, reduce, reduction)

    def construct(self, input, target):  # noqa: A002
        return F.hinge_embedding_loss(input, target, self.margin, reduction=self.reduction)


class TripletMarginLoss(_MarginLoss):
    """TripletMarginLoss(margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None,
    reduce=None, reduction="mean"): ``loss(anchor, positive, negative)``, max(0, margin +
    d(anchor, positive) - d(anchor, negative)) with d the p-norm distance, reduced
    (F.triplet_margin_loss). ``margin`` must be positive (a KilnValueError when built), ``p``
    and ``eps`` real numbers and ``swap`` a bool (KilnTypeErrors otherwise)."""

    def __init__(self, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None, reduce=None,
                 reduction="mean"):
        super().__init__(margin, size_average, reduce, reduction)
        if not self.margin > 0:
            raise KilnValueError(f"TripletMarginLoss: expected margin > 0, got {margin}")
        self.p = _composite.check_real("TripletMarginLoss", "p", p)
        self.eps = _composite.check_real("TripletMarginLoss", "eps", eps)
        self.swap = checked_bool("TripletMarginLoss", "swap", swap)

    def construct(self, anchor, positive, negative):
        return F.triplet_margin_loss(anchor, positive, negative, self.margin, self.p, self.eps,
                                     self.swap, reduction=self.reduction)

    def extra_repr(self):
        return self._repr(f"margin={self.margin}, p={self.p}, eps={self.eps}, swap={self.swap}")


class GaussianNLLLoss(_Loss):
    """GaussianNLLLoss(*, full=False, eps=1e-6, reduction="mean"): ``loss(input, target, var)``,
    the negative log-likelihood of the targets under normal distributions of means ``input`` and
    variances ``var`` (a real number, or a tensor of the input's shape or one that shares a
    variance along a dimension; F.gaussian_nll_loss). Its arguments are keyword-only, as in
    PyTorch; ``full`` a bool and ``eps`` a real number (KilnTypeErrors otherwise)."""

    def __init__(self, *, full=False, eps=1e-6, reduction="mean"):
        super().__init__(reduction=reduction)
        self.full = checked_bool("GaussianNLLLoss", "full", full)
        self.eps = _composite.check_real("GaussianNLLLoss", "eps", eps)

    def construct(self, input, target, var):  # noqa: A002
        return F.gaussian_nll_loss(input, target, var, self.full, self.eps, self.reduction)

    def extra_repr(self):
        return self._repr(f"full={self.full}, eps={self.eps}")


class PoissonNLLLoss(_Loss):
    """PoissonNLLLoss(log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
    reduction="mean"): ``loss(input, target)``, the negative log-likelihood of the counts
    ``target`` under Poisson distributions of rate exp(input) (``log_input``) or input, with
    Stirling's term for ``full`` (F.poisson_nll_loss). ``log_input`` and ``full`` are bools,
    ``eps`` a real number (KilnTypeErrors otherwise)."""

    def __init__(self, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                 reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.log_input = checked_bool("PoissonNLLLoss", "log_input", log_input)
        self.full = checked_bool("PoissonNLLLoss", "full", full)
        self.eps = _composite.check_real("PoissonNLLLoss", "eps", eps)

    def construct(self, log_input, target):
        return F.poisson_nll_loss(log_input, target, self.log_input, self.full, eps=self.eps,
                                  reduction=self.reduction)

    def extra_repr(self):
        return self._repr(f"log_input={self.log_input}, full={self.full}, eps={self.eps}")


class MultiMarginLoss(_Loss):
    """MultiMarginLoss(p=1, margin=1.0, weight=None, size_average=None, reduce=None,
    reduction="mean"): ``loss(input, target)``, the multi-class hinge loss of scores [N, C]
    and integer class targets [N] (F.multi_margin_loss). ``p`` is 1 or 2 (a KilnValueError
    otherwise), ``margin`` a real number; ``weight`` (None or a floating-point [C], one per
    class) is kept as a buffer, as PyTorch's."""

    def __init__(self, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                 reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        if isinstance(p, bool) or p not in (1, 2):
            raise KilnValueError(f"MultiMarginLoss: only p == 1 and p == 2 are supported, got "
                                 f"p={p!r}")
        self.p = int(p)
        self.margin = _composite.check_real("MultiMarginLoss", "margin", margin)
        self.register_buffer("weight", _class_weight("MultiMarginLoss", weight))

    def construct(self, input, target):  # noqa: A002
        return F.multi_margin_loss(input, target, self.p, self.margin, self.weight,
                                   reduction=self.reduction)

    def extra_repr(self):
        return self._repr(f"p={self.p}, margin={self.margin}")


class MultiLabelMarginLoss(_Loss):
    """MultiLabelMarginLoss(size_average=None, reduce=None, reduction="mean"): ``loss(input,
    target)``, the multi-label hinge loss of scores [N, C] and integer targets of their shape
    listing each sample's label classes, ended by -1 (F.multilabel_margin_loss)."""

    def construct(self, input, target):  # noqa: A002
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_Loss):
    """MultiLabelSoftMarginLoss(weight=None, size_average=None, reduce=None, reduction="mean"):
    ``loss(input, target)``, the binary cross entropy of sigmoid(input) against targets of 1 and
    0, each times ``weight`` (typically [C], one per class), averaged over the classes
    (F.multilabel_soft_margin_loss). ``weight`` (None or a kiln tensor) is kept as a buffer, as
    PyTorch's."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight",
                             _optional_tensor("MultiLabelSoftMarginLoss", "weight", weight))

    def construct(self, input, target):  # noqa: A002
        return F.multilabel_soft_margin_loss(input, target, self.weight, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """TripletMarginWithDistanceLoss(*, distance_function=None, margin=1.0, swap=False,
    reduction="mean"): ``loss(anchor, positive, negative)``, max(0, margin + d(anchor, positive)
    - d(anchor, negative)) for d = ``distance_function`` (None: the pairwise distance), reduced
    (F.triplet_margin_with_distance_loss). Its arguments are keyword-only, as in PyTorch;
    ``distance_function`` is callable or None (a KilnTypeError otherwise; a Cell is kept as a
    child), ``margin`` positive (a KilnValueError otherwise) and ``swap`` a bool."""

    def __init__(self, *, distance_function=None, margin=1.0, swap=False, reduction="mean"):
        super().__init__(reduction=reduction)
        name = "TripletMarginWithDistanceLoss"
        if distance_function is not None and not callable(distance_function):
            raise KilnTypeError(f"{name}: expected distance_function to be callable or None, "
                                f"got {type(distance_function).__name__}")
        self.distance_function = distance_function
        self.margin = _triplet_margin(name, margin)
        self.swap = checked_bool(name, "swap", swap)

    def construct(self, anchor, positive, negative):
        return F.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction)

    def extra_repr(self):
        return self._repr(f"margin={self.margin}, swap={self.swap}")


class CTCLoss(_Loss):
    """CTCLoss(blank=0, reduction="mean", zero_infinity=False): ``loss(log_probs, targets,
    input_lengths, target_lengths)``, the connectionist temporal classification loss of
    per-frame log-probabilities [T, N, C] and padded [N, S] or concatenated targets, "mean"
    dividing each sample's loss by its target length (F.ctc_loss). ``blank`` is an int >= 0 and
    ``zero_infinity`` a bool (else a KilnValueError or KilnTypeError)."""

    def __init__(self, blank=0, reduction="mean", zero_infinity=False):
        super().__init__(reduction=reduction)
        self.blank = checked_int("CTCLoss", "blank", blank, low=0)
        self.zero_infinity = checked_bool("CTCLoss", "zero_infinity", zero_infinity)

    def construct(self, log_probs, targets, input_lengths, target_lengths):
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                          self.reduction, self.zero_infinity)

    def extra_repr(self):
        return self._repr(f"blank={self.blank}, zero_infinity={self.zero_infinity}")
