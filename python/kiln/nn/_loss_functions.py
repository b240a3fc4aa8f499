"""The losses of kiln.nn.functional (which exports them; PyTorch's names, argument order and
defaults): mse_loss, l1_loss, smooth_l1_loss, huber_loss, cross_entropy, nll_loss,
binary_cross_entropy, binary_cross_entropy_with_logits and kl_div over the kiln.mint functions
that compute them, and soft_margin_loss, margin_ranking_loss, cosine_embedding_loss,
hinge_embedding_loss, triplet_margin_loss, gaussian_nll_loss, poisson_nll_loss and
multi_margin_loss composed here of kiln.mint ops (their inputs and targets broadcast as PyTorch's
do). The loss cells of kiln/nn/loss.py call them. kiln/nn/functional.py's docstring says where
they differ from PyTorch.
"""

import functools
import math
import numbers
import warnings

from .. import _C, mint as _mint
from .._checks import checked_bool
from ..autograd import no_grad
from ..errors import DTypeError, KilnIndexError, KilnTypeError, KilnValueError, ShapeError
from ..mint import _composite
from ..mint._composite import _cast, _dims, _floating_tensor, _kiln_tensor, check_real


# ------------------------------------------------------------------------------------------------
# Losses


def _no_legacy(owner, size_average, reduce):
    if size_average is not None or reduce is not None:
        raise KilnValueError(f"{owner}: size_average and reduce are PyTorch's deprecated "
                             f"spellings of reduction; pass reduction='mean', 'sum' or 'none' "
                             f"instead (got size_average={size_average!r}, reduce={reduce!r})")


def _weighted(owner, input, losses, weight, reduction, mean_over_weights):  # noqa: A002
    """Elementwise ``losses`` times ``weight`` (PyTorch's: a tensor of the input's shape),
    reduced; "mean" divides by sum(weight) if ``mean_over_weights``, else by the count."""
    _kiln_tensor(owner, "weight", weight)
    if tuple(weight.shape) != tuple(input.shape):
        raise ShapeError(f"{owner}: expected weight of the input's shape {_dims(input.shape)}, "
                         f"got {_dims(weight.shape)}")
    weighted = losses * weight
    if reduction == "none":
        return weighted
    if reduction == "sum" or not mean_over_weights:
        return _mint.sum(weighted) if reduction == "sum" else _mint.mean(weighted)
    return _mint.sum(weighted) / _mint.sum(weight)


def _elementwise_loss(owner, loss, input, target, reduction, weight):  # noqa: A002
    """``loss(input, target, reduction)``; with ``weight`` (of the input's shape) each element's
    loss weighted, and "mean" dividing by sum(weight), as PyTorch's."""
    if weight is None:
        return loss(input, target, reduction)
    _composite._check_reduction(owner, reduction)
    return _weighted(owner, input, loss(input, target, "none"), weight, reduction, True)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean",  # noqa: A002
             weight=None):
    """mse_loss(input, target, size_average=None, reduce=None, reduction='mean', weight=None)
    (kiln.mint.mse_loss, which broadcasts with PyTorch's warning); with ``weight`` (of the
    input's shape) each squared error is weighted and "mean" divides by sum(weight)."""
    _no_legacy("mse_loss", size_average, reduce)
    return _elementwise_loss("mse_loss", _mint.mse_loss, input, target, reduction, weight)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean",  # noqa: A002
            weight=None):
    """l1_loss(input, target, size_average=None, reduce=None, reduction='mean', weight=None)
    (kiln.mint.l1_loss); ``weight`` as mse_loss's."""
    _no_legacy("l1_loss", size_average, reduce)
    return _elementwise_loss("l1_loss", _composite.l1_loss, input, target, reduction, weight)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean",  # noqa: A002
                   beta=1.0):
    """smooth_l1_loss(input, target, size_average=None, reduce=None, reduction='mean', beta=1.0)
    (kiln.mint.smooth_l1_loss)."""
    _no_legacy("smooth_l1_loss", size_average, reduce)
    return _composite.smooth_l1_loss(input, target, reduction, beta)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):  # noqa: A002
    """huber_loss(input, target, reduction='mean', delta=1.0, weight=None)
    (kiln.mint.huber_loss); with ``weight`` (of the input's shape) each loss is weighted and
    "mean" averages the weighted losses, as PyTorch's (not divided by sum(weight))."""
    if weight is None:
        return _composite.huber_loss(input, target, reduction, delta)
    _composite._check_reduction("huber_loss", reduction)
    return _weighted("huber_loss", input, _composite.huber_loss(input, target, "none", delta),
                     weight, reduction, False)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,  # noqa: A002
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
    reduce=None, reduction='mean', label_smoothing=0.0) (kiln.mint.cross_entropy)."""
    _no_legacy("cross_entropy", size_average, reduce)
    return _composite.cross_entropy(input, target, reduction, ignore_index, label_smoothing,
                                    weight=weight)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100,  # noqa: A002
             reduce=None, reduction="mean"):
    """nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
    reduction='mean') (kiln.mint.nll_loss)."""
    _no_legacy("nll_loss", size_average, reduce)
    return _composite.nll_loss(input, target, reduction, ignore_index, weight=weight)


def binary_cross_entropy(input, target, weight=None, size_average=None,  # noqa: A002
                         reduce=None, reduction="mean"):
    """binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
    reduction='mean') (kiln.mint.binary_cross_entropy)."""
    _no_legacy("binary_cross_entropy", size_average, reduce)
    return _composite.binary_cross_entropy(input, target, weight, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,  # noqa: A002
                                     reduce=None, reduction="mean", pos_weight=None):
    """binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,
    reduce=None, reduction='mean', pos_weight=None)
    (kiln.mint.binary_cross_entropy_with_logits)."""
    _no_legacy("binary_cross_entropy_with_logits", size_average, reduce)
    return _composite.binary_cross_entropy_with_logits(input, target, weight, reduction,
                                                       pos_weight)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean",  # noqa: A002
           log_target=False):
    """kl_div(input, target, size_average=None, reduce=None, reduction='mean', log_target=False):
    the pointwise KL divergence of log-probabilities ``input`` from the probabilities ``target``
    (its logs with ``log_target``), target * (log(target) - input) (0 where target is 0), reduced:
    "batchmean" divides the sum by the batch size (dim 0), "mean" by the number of elements (with
    PyTorch's warning that this is rarely the KL divergence, pointing at the caller). At target 0
    its gradient with respect to the target is -input here (the term target * log(target)
    contributes none), where PyTorch's is NaN."""
    return _kl_div(input, target, size_average, reduce, reduction, log_target, stacklevel=3)


def _kl_div(input, target, size_average, reduce, reduction, log_target,  # noqa: A002
            stacklevel):
    """kl_div, its warning for reduction='mean' pointing ``stacklevel`` frames up: at the caller
    of kl_div, or of kiln.nn.KLDivLoss."""
    owner = "kl_div"
    _no_legacy(owner, size_average, reduce)
    if reduction not in ("mean", "batchmean", "sum", "none"):
        raise KilnValueError(f"{owner}: expected reduction 'mean', 'batchmean', 'sum' or 'none', "
                             f"got {reduction!r}")
    if reduction == "mean":
        warnings.warn("kl_div: reduction='mean' divides the total loss by both the batch size "
                      "and the support size; 'batchmean' divides only by the batch size, which "
                      "is the KL divergence (as PyTorch warns)", stacklevel=stacklevel)
    x, t, dtype = _composite._loss_operands(owner, input, target, "none", floating_target=True)
    if log_target:
        loss = _mint.exp(t) * (t - x)
    else:
        # xlogy(t, t) - t * x; log's argument is 1 where t is 0 (Note [Gradients through where]).
        zero = t == 0
        loss = _mint.where(zero, 0.0, t * _mint.log(_mint.where(zero, 1.0, t))) - t * x
    if reduction == "batchmean":
        if not input.ndim:  # PyTorch's: a 0-d input has no batch dimension, and is summed
            return _cast(loss, dtype)
        # The mean over dim 0 of the per-sample sums is sum / batch size, computed by ops rather
        # than with the batch size as a number, so kiln.jit(dynamic=True) traces it.
        per_sample = _mint.sum(loss, list(range(1, loss.ndim))) if loss.ndim > 1 else loss
        return _cast(_mint.mean(per_sample, 0), dtype)
    return _composite._reduced(loss, reduction, dtype)


# ------------------------------------------------------------------------------------------------
# Margin, embedding and likelihood losses


def _broadcast_shape(owner, named):
    """The broadcast shape of the kiln tensors ``named`` ((name, tensor) pairs); a ShapeError
    naming each with its shape when they do not broadcast."""
    shape = []
    for _, value in named:
        other = list(value.shape)
        a, b = [1] * (len(other) - len(shape)) + shape, [1] * (len(shape) - len(other)) + other
        if any(i != j and 1 not in (i, j) for i, j in zip(a, b)):
            listed = ", ".join(f"{name} {_dims(v.shape)}" for name, v in named)
            raise ShapeError(f"{owner}: expected shapes that broadcast, got {listed}")
        shape = [j if i == 1 else i for i, j in zip(a, b)]
    return shape


def _loss_tensors(owner, reduction, floating, others=()):
    """Checks a loss's ``reduction`` and tensors: ``floating`` and ``others`` are (name, value)
    pairs of kiln tensors (a KilnTypeError otherwise), floating-point ones for ``floating`` (a
    DTypeError otherwise), of any dtype for ``others`` (targets). Returns the tensors, in order,
    in the dtype the loss computes in (float32 for 16-bit floats), and the loss's dtype, the
    promoted dtype of them all."""
    _composite._check_reduction(owner, reduction)
    for name, value in floating:
        _floating_tensor(owner, name, value)
    for name, value in others:
        _kiln_tensor(owner, name, value)
    named = list(floating) + list(others)
    dtype = functools.reduce(_C.promote_types, [value.dtype for _, value in named])
    compute = _C.dtype.float32 if dtype in _composite._NARROW else dtype
    return [_cast(value, compute) for _, value in named], dtype


def _hinge(z):
    """max(z, 0) with clamp_min's gradient in PyTorch's losses: 1 where z >= 0 (at 0 too); NaN
    stays NaN."""
    return _mint.where(z < 0, 0.0, z)


def _same_ndim(owner, named):
    """A ShapeError unless the tensors ``named`` ((name, tensor) pairs) have one number of
    dimensions, as PyTorch's margin_ranking_loss and triplet_margin_loss ask."""
    if len({value.ndim for _, value in named}) > 1:
        listed = ", ".join(f"{name} {_dims(v.shape)}" for name, v in named)
        raise ShapeError(f"{owner}: expected tensors of one number of dimensions, got {listed}")


def soft_margin_loss(input, target, size_average=None, reduce=None,  # noqa: A002
                     reduction="mean"):
    """soft_margin_loss(input, target, size_average=None, reduce=None, reduction='mean'):
    log(1 + exp(-target * input)) for targets of 1 or -1, reduced; input and target broadcast,
    as PyTorch's. Computed without overflow (where PyTorch's float32 value is inf past
    -target * input of about 88, and its gradient NaN)."""
    owner = "soft_margin_loss"
    _no_legacy(owner, size_average, reduce)
    (x, y), dtype = _loss_tensors(owner, reduction, [("input", input)], [("target", target)])
    _broadcast_shape(owner, [("input", x), ("target", y)])
    return _composite._reduced(-_composite._log_sigmoid(x * y), reduction, dtype)


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None,
                        reduce=None, reduction="mean"):
    """margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
    reduction='mean'): max(0, -target * (input1 - input2) + margin), target 1 where input1
    should rank higher and -1 where input2 should, reduced. The three have one number of
    dimensions (a ShapeError otherwise, as PyTorch asks) and broadcast."""
    owner = "margin_ranking_loss"
    _no_legacy(owner, size_average, reduce)
    named = [("input1", input1), ("input2", input2)]
    (x1, x2, y), dtype = _loss_tensors(owner, reduction, named, [("target", target)])
    _same_ndim(owner, named + [("target", target)])
    _broadcast_shape(owner, named + [("target", target)])
    margin = check_real(owner, "margin", margin)
    return _composite._reduced(_hinge(-y * (x1 - x2) + margin), reduction, dtype)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None,
                          reduce=None, reduction="mean"):
    """cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
    reduction='mean'): with cos the cosine similarity of input1 and input2 along their last
    dimension, 1 - cos where target is 1, max(0, cos - margin) where it is -1 (0 for another
    target), reduced. Inputs [N, D] take a target [N], inputs [D] a 0-d one (a ShapeError
    otherwise, as in PyTorch); cos is PyTorch's, sum(x1 * x2) / sqrt((sum(x1^2) + 1e-12) *
    (sum(x2^2) + 1e-12))."""
    owner = "cosine_embedding_loss"
    _no_legacy(owner, size_average, reduce)
    named = [("input1", input1), ("input2", input2)]
    (x1, x2, y), dtype = _loss_tensors(owner, reduction, named, [("target", target)])
    if y.ndim > 1 or (x1.ndim, x2.ndim) != (y.ndim + 1,) * 2:
        raise ShapeError(f"{owner}: expected inputs [N, D] with a target [N], or inputs [D] with "
                         f"a 0-d target (multi-target is not supported), got input1 "
                         f"{_dims(x1.shape)}, input2 {_dims(x2.shape)} and target "
                         f"{_dims(y.shape)}")
    _broadcast_shape(owner, named)
    margin = check_real(owner, "margin", margin)
    dim = y.ndim  # the feature dimension: 1 for [N, D], 0 for [D]
    squares = (_mint.sum(x1 * x1, dim) + 1e-12) * (_mint.sum(x2 * x2, dim) + 1e-12)
    cos = _mint.sum(x1 * x2, dim) / _mint.sqrt(squares)
    loss = (_mint.where(y == 1, 1.0 - cos, 0.0)
            + _mint.where(y == -1, _hinge(cos - margin), 0.0))
    return _composite._reduced(loss, reduction, dtype)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,  # noqa: A002
                         reduction="mean"):
    """hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
    reduction='mean'): x where target is 1, max(0, margin - x) where it is -1 (the sum of both
    for another target, as PyTorch's), for distances x; input and target broadcast."""
    owner = "hinge_embedding_loss"
    _no_legacy(owner, size_average, reduce)
    (x, y), dtype = _loss_tensors(owner, reduction, [("input", input)], [("target", target)])
    _broadcast_shape(owner, [("input", x), ("target", y)])
    margin = check_real(owner, "margin", margin)
    loss = _mint.where(y != 1, _hinge(margin - x), 0.0) + _mint.where(y != -1, x, 0.0)
    return _composite._reduced(loss, reduction, dtype)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
    size_average=None, reduce=None, reduction='mean'): max(0, margin + d(anchor, positive) -
    d(anchor, negative)), d the pairwise_distance (p, eps) over the last dimension, reduced;
    with ``swap`` d(anchor, negative) is the smaller of it and d(positive, negative). The three
    have one number of dimensions (a ShapeError otherwise) and broadcast; ``margin`` must be
    positive (a KilnValueError otherwise), as in PyTorch."""
    owner = "triplet_margin_loss"
    _no_legacy(owner, size_average, reduce)
    named = [("anchor", anchor), ("positive", positive), ("negative", negative)]
    (a, pos, neg), dtype = _loss_tensors(owner, reduction, named)
    _same_ndim(owner, named)
    _broadcast_shape(owner, named)
    margin = check_real(owner, "margin", margin)
    if not margin > 0:
        raise KilnValueError(f"{owner}: expected margin > 0, got {margin}")
    p, eps = check_real(owner, "p", p), check_real(owner, "eps", eps)

    def distance(x1, x2):
        return _mint.vector_norm(x1 - x2 + eps, p, -1, False)

    far = distance(a, neg)
    if checked_bool(owner, "swap", swap):
        far = _mint.minimum(far, distance(pos, neg))
    return _composite._reduced(_hinge(distance(a, pos) - far + margin), reduction, dtype)


def _unclamped(x, low):
    """max(x, low) in value with the gradient of x (PyTorch clamps a copy of x in place under
    no_grad): x - x.detach() is exactly 0, so the value is exactly the clamp's."""
    return _mint.clamp(x, min=low).detach() + (x - x.detach())


def _gaussian_var(owner, var, input):  # noqa: A002
    """gaussian_nll_loss's ``var`` (a real number, or a floating-point tensor of the input's
    shape, of it without its last dimension, or of it with one dimension of size 1), shaped to
    broadcast against the input. A negative entry is a KilnValueError, as in PyTorch, checked
    outside a kiln.jit trace (which has no values)."""
    if isinstance(var, numbers.Real) and not isinstance(var, bool):
        if var < 0:
            raise KilnValueError(f"{owner}: expected var >= 0, got {var}")
        return _mint.full(input.shape, float(var), dtype=input.dtype)
    if not isinstance(var, _C.Tensor):
        raise KilnTypeError(f"{owner}: expected var to be a kiln.Tensor or a real number, got "
                            f"{type(var).__name__}")
    _floating_tensor(owner, "var", var)
    shape, want = list(var.shape), list(input.shape)
    if shape != want:
        if shape == want[:-1] and want:
            var = _mint.unsqueeze(var, -1)
        elif not (len(shape) == len(want)
                  and sum(s for s, w in zip(shape, want) if s != w) == 1):
            raise ShapeError(f"{owner}: expected var of the input's shape {_dims(want)}, of it "
                             f"without the last dimension, or of it with one dimension of size "
                             f"1, got {_dims(shape)}")
    if not _C.jit.is_tracing() and var.numel() > 0 and _mint.any(var < 0).item():
        raise KilnValueError(f"{owner}: expected var >= 0, got a negative entry")
    return var


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):  # noqa: A002
    """gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction='mean'): the
    negative log-likelihood of ``target`` under normal distributions of mean ``input`` and
    variance ``var``, 0.5 * (log(max(var, eps)) + (input - target)^2 / max(var, eps)), plus
    0.5 * log(2 pi) with ``full``, reduced. ``var`` is a real number, or a tensor of the input's
    shape, of it without the last dimension, or of it with one dimension of size 1 (one
    variance shared along it), PyTorch's rules (a ShapeError otherwise); input and target
    broadcast. The clamp at eps keeps var's gradient, as PyTorch's. A negative var is a
    KilnValueError."""
    owner = "gaussian_nll_loss"
    _composite._check_reduction(owner, reduction)
    _floating_tensor(owner, "input", input)
    variance = _gaussian_var(owner, var, input)
    named = [("input", input), ("var", variance)]
    (x, v, y), dtype = _loss_tensors(owner, reduction, named, [("target", target)])
    _broadcast_shape(owner, [("input", x), ("target", y), ("var", v)])
    eps = check_real(owner, "eps", eps)
    v = _unclamped(v, eps)
    loss = (_mint.log(v) + _mint.square(x - y) / v) * 0.5
    if checked_bool(owner, "full", full):
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _composite._reduced(loss, reduction, dtype)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None,  # noqa: A002
                     eps=1e-8, reduce=None, reduction="mean"):
    """poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
    reduce=None, reduction='mean'): the negative log-likelihood of counts ``target`` under
    Poisson distributions of rate exp(input) (``log_input``: exp(input) - target * input) or
    input (input - target * log(input + eps)), reduced; with ``full`` Stirling's approximation
    of log(target!), target * log(target) - target + 0.5 * log(2 pi target), is added where
    target > 1. Input and target broadcast. The target's gradient is finite where PyTorch's is
    NaN (target 0 with ``full``)."""
    owner = "poisson_nll_loss"
    _no_legacy(owner, size_average, reduce)
    (x, t), dtype = _loss_tensors(owner, reduction, [("input", input)], [("target", target)])
    _broadcast_shape(owner, [("input", x), ("target", t)])
    eps = check_real(owner, "eps", eps)
    if checked_bool(owner, "log_input", log_input):
        loss = _mint.exp(x) - t * x
    else:
        loss = x - t * _mint.log(x + eps)
    if checked_bool(owner, "full", full):
        counted = t > 1
        # The formula's argument is 1 where it is not added (Note [Gradients through where]).
        big = _mint.where(counted, t, 1.0)
        stirling = big * _mint.log(big) - big + 0.5 * _mint.log(big * (2 * math.pi))
        loss = loss + _mint.where(counted, stirling, 0.0)
    return _composite._reduced(loss, reduction, dtype)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,  # noqa: A002
                      reduce=None, reduction="mean"):
    """multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
    reduce=None, reduction='mean'): the multi-class hinge loss of scores ``input`` [N, C] (or
    one sample [C]) and integer class targets [N] (or 0-d): for each sample, the sum over the
    classes i other than y of weight[y] * max(0, margin - x[y] + x[i])^p, divided by C, then
    reduced ("none": [N], or 0-d for a 0-d target). ``p`` is 1 or 2 (a KilnValueError
    otherwise), ``weight`` None or a floating-point [C]. As PyTorch's, a target outside [0, C)
    is refused (a KilnIndexError, checked outside a kiln.jit trace, which has no values; under
    one the gather that reads the scores refuses it)."""
    owner = "multi_margin_loss"
    _no_legacy(owner, size_average, reduce)
    if isinstance(p, bool) or p not in (1, 2):
        raise KilnValueError(f"{owner}: only p == 1 and p == 2 are supported, got p={p!r}")
    (x,), dtype = _loss_tensors(owner, reduction, [("input", input)])
    if _kiln_tensor(owner, "target", target).is_floating_point \
            or target.dtype == _C.dtype.bool:
        raise DTypeError(f"{owner}: expected integer class targets, got {target.dtype.name}")
    if x.ndim > 2 or (x.ndim > 0 and x.shape[-1] == 0):
        raise ShapeError(f"{owner}: expected input [N, C] or [C] with C > 0, got "
                         f"{_dims(x.shape)}")
    samples = x.shape[0] if x.ndim == 2 else 1
    classes = x.shape[-1] if x.ndim else 1
    if target.ndim > 1 or target.numel() != samples:
        raise ShapeError(f"{owner}: expected target [{samples}] (one class per sample of input "
                         f"{_dims(x.shape)}), got {_dims(target.shape)}")
    if weight is not None:
        if not _kiln_tensor(owner, "weight", weight).is_floating_point:
            raise DTypeError(f"{owner}: expected a floating-point weight, got "
                             f"{weight.dtype.name}")
        if tuple(weight.shape) != (classes,):
            raise ShapeError(f"{owner}: expected weight [{classes}] (one per class), got "
                             f"{_dims(weight.shape)}")
    margin = check_real(owner, "margin", margin)
    if not _C.jit.is_tracing() and target.numel() > 0:
        low, high = _mint.min(target).item(), _mint.max(target).item()
        if low < 0 or high >= classes:
            raise KilnIndexError(f"{owner}: target {low if low < 0 else high} is out of range "
                                 f"for {classes} classes (expected 0 <= target < {classes})")
    scores = x.reshape(samples, classes)
    labels = target.reshape(samples, 1).to(_C.dtype.int64)
    z = scores - _mint.gather(scores, 1, labels) + margin
    # PyTorch counts z > 0 only: the gradient at z = 0 is 0.
    h = _mint.where(z > 0, z, 0.0)
    if p == 2:
        h = h * h
    others = _mint.arange(classes, dtype=_C.dtype.int64) != labels
    h = _mint.where(others, h, 0.0)
    if weight is not None:
        picked = _mint.index_select(_cast(weight, h.dtype), 0, labels.reshape(samples))
        h = h * _mint.unsqueeze(picked, 1)  # weight[y] for each sample's terms
    loss = _mint.sum(h, 1) / classes
    if reduction == "none" and target.ndim == 0:
        loss = loss.reshape([])  # one sample, as the target
    return _composite._reduced(loss, reduction, dtype)
