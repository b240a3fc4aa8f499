"""The losses of kiln.nn.functional (which exports them; PyTorch's names, argument order and
defaults): mse_loss, l1_loss, smooth_l1_loss, huber_loss, cross_entropy, nll_loss,
binary_cross_entropy, binary_cross_entropy_with_logits and kl_div over the kiln.mint functions
that compute them, and soft_margin_loss, margin_ranking_loss, cosine_embedding_loss,
hinge_embedding_loss, triplet_margin_loss, triplet_margin_with_distance_loss,
gaussian_nll_loss, poisson_nll_loss, multi_margin_loss, multilabel_margin_loss,
multilabel_soft_margin_loss and ctc_loss composed here of kiln.mint ops (their inputs and targets
broadcast as PyTorch's do). The loss cells of kiln/nn/loss.py call them. kiln/nn/functional.py's
docstring says where they differ from PyTorch; so do the docstrings of the last three here.
"""

import functools
import itertools
import math
import numbers
import warnings

from .. import _C, mint as _mint
from .._checks import checked_bool, checked_int
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


def _integer_targets(owner, name, target):
    """A DTypeError unless ``target`` (a kiln tensor: a KilnTypeError otherwise) holds integer
    class indices; bool is none."""
    if _kiln_tensor(owner, name, target).is_floating_point or target.dtype == _C.dtype.bool:
        raise DTypeError(f"{owner}: expected integer class targets, got {target.dtype.name}")


def _classes_in_range(owner, target, classes, lowest=0):
    """A KilnIndexError unless every entry of the integer ``target`` is in [lowest, classes), as
    PyTorch's class losses refuse; checked outside a kiln.jit trace, which has no values (under
    one the gather that reads the scores refuses an index out of range)."""
    if _C.jit.is_tracing() or target.numel() == 0:
        return
    low, high = _mint.min(target).item(), _mint.max(target).item()
    if low < lowest or high >= classes:
        raise KilnIndexError(f"{owner}: target {low if low < lowest else high} is out of range "
                             f"for {classes} classes (expected {lowest} <= target < {classes})")


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
    margin = _triplet_margin(owner, margin)
    p, eps = check_real(owner, "p", p), check_real(owner, "eps", eps)
    return _triplet(owner, functools.partial(_pairwise_distance, p=p, eps=eps), a, pos, neg,
                    margin, swap, reduction, dtype)


def _pairwise_distance(x1, x2, p=2.0, eps=1e-6):
    """PyTorch's pairwise_distance of checked operands: ||x1 - x2 + eps||_p over the last
    dimension."""
    return _mint.vector_norm(x1 - x2 + eps, p, -1, False)


def _triplet_margin(owner, margin):
    """A triplet loss's ``margin`` as a float: a real number (a KilnTypeError otherwise) above 0
    (a KilnValueError otherwise), as PyTorch asks."""
    margin = check_real(owner, "margin", margin)
    if not margin > 0:
        raise KilnValueError(f"{owner}: expected margin > 0, got {margin}")
    return margin


def _triplet(owner, distance, anchor, positive, negative, margin, swap, reduction, dtype):
    """max(0, margin + d(anchor, positive) - d(anchor, negative)) for d = ``distance``, with
    ``swap`` d(anchor, negative) the smaller of it and d(positive, negative), reduced in
    ``dtype`` (None: the distances' dtype). The distances are taken in PyTorch's order."""
    swap = checked_bool(owner, "swap", swap)
    near, far = distance(anchor, positive), distance(anchor, negative)
    if swap:
        far = _mint.minimum(far, distance(positive, negative))
    loss = _hinge(near - far + margin)
    return _composite._reduced(loss, reduction, loss.dtype if dtype is None else dtype)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
    margin=1.0, swap=False, reduction='mean'): max(0, margin + d(anchor, positive) -
    d(anchor, negative)), reduced, for d = ``distance_function`` (a callable taking two kiln
    tensors and returning a kiln tensor of distances; None: pairwise_distance, p = 2 and
    eps = 1e-6); with ``swap`` d(anchor, negative) is the smaller of it and d(positive,
    negative). The three have one number of dimensions (a ShapeError otherwise) and ``margin``
    must be positive (a KilnValueError otherwise), as in PyTorch. With the default distance they
    are floating-point tensors that broadcast, computed as triplet_margin_loss's; a
    ``distance_function`` gets them as they are."""
    owner = "triplet_margin_with_distance_loss"
    named = [("anchor", anchor), ("positive", positive), ("negative", negative)]
    if distance_function is None:
        tensors, dtype = _loss_tensors(owner, reduction, named)
        _same_ndim(owner, named)
        _broadcast_shape(owner, named)
        distance = _pairwise_distance
    else:
        if not callable(distance_function):
            raise KilnTypeError(f"{owner}: expected distance_function to be callable or None, "
                                f"got {type(distance_function).__name__}")
        _composite._check_reduction(owner, reduction)
        tensors, dtype = [value for _, value in named], None
        for name, value in named:
            _kiln_tensor(owner, name, value)
        _same_ndim(owner, named)

        def distance(x1, x2):
            result = distance_function(x1, x2)
            if not isinstance(result, _C.Tensor):
                raise KilnTypeError(f"{owner}: expected distance_function to return a "
                                    f"kiln.Tensor, got {type(result).__name__}")
            return result
    margin = _triplet_margin(owner, margin)
    return _triplet(owner, distance, *tensors, margin, swap, reduction, dtype)


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
    _integer_targets(owner, "target", target)
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
    _classes_in_range(owner, target, classes)
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


def multilabel_margin_loss(input, target, size_average=None, reduce=None,  # noqa: A002
                           reduction="mean"):
    """multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction='mean'):
    the multi-label hinge loss of scores ``input`` [N, C] (or one sample [C], or 0-d) and integer
    ``target`` of its shape holding each sample's label classes, ended by the first -1 (the
    entries after it are ignored): for each sample, the sum over its labels j and the classes i
    not among them of max(0, 1 - (x[j] - x[i])), divided by C, then reduced ("none": [N], or 0-d
    for a sample of one dimension or none). As PyTorch's, a target entry outside [-1, C) is
    refused, ignored ones too (a KilnIndexError, checked outside a kiln.jit trace, which has no
    values), a label listed twice counts twice and the gradient at 1 - (x[j] - x[i]) = 0 is 0.
    It takes integer targets of any width, where PyTorch wants int64."""
    owner = "multilabel_margin_loss"
    _no_legacy(owner, size_average, reduce)
    (x,), dtype = _loss_tensors(owner, reduction, [("input", input)])
    _integer_targets(owner, "target", target)
    if x.ndim > 2 or (x.ndim > 0 and x.shape[-1] == 0):
        raise ShapeError(f"{owner}: expected input [N, C] or [C] with C > 0, or 0-d, got "
                         f"{_dims(x.shape)}")
    samples = x.shape[0] if x.ndim == 2 else 1
    classes = x.shape[-1] if x.ndim else 1
    if (x.ndim == 2 and tuple(target.shape) != tuple(x.shape)) \
            or (x.ndim < 2 and (target.ndim > 1 or target.numel() != classes)):
        raise ShapeError(f"{owner}: expected target of the input's shape {_dims(x.shape)}, got "
                         f"{_dims(target.shape)}")
    _classes_in_range(owner, target, classes, lowest=-1)  # -1 ends a sample's labels
    scores = x.reshape(samples, classes)
    labels = target.reshape(samples, classes).to(_C.dtype.int64)
    listed = _mint.cumsum(labels == -1, 1) == 0  # the entries before the first -1
    # Each sample's label classes as a mask [N, C]: the entries not listed are scattered to an
    # extra column, dropped.
    extra = _mint.where(listed, labels, classes)
    labelled = _mint.scatter(_mint.zeros(samples, classes + 1, dtype=_C.dtype.bool), 1, extra,
                             True)
    labelled = _mint.narrow(labelled, 1, 0, classes)
    picked = _mint.gather(scores, 1, _mint.where(listed, labels, 0))  # x[j], [N, C]
    # z[n, j, i] = 1 - (x[j] - x[i]), counted for a listed j and an i not labelled, where z > 0
    # (PyTorch's: the gradient at z = 0 is 0).
    z = 1.0 - _mint.unsqueeze(picked, 2) + _mint.unsqueeze(scores, 1)
    counted = _mint.logical_and(_mint.unsqueeze(listed, 2),
                                _mint.logical_not(_mint.unsqueeze(labelled, 1)))
    h = _mint.where(_mint.logical_and(counted, z > 0), z, 0.0)
    loss = _mint.sum(h, [1, 2]) / classes
    if reduction == "none" and x.ndim < 2:
        loss = loss.reshape([])  # one sample, as the input
    return _composite._reduced(loss, reduction, dtype)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None,  # noqa: A002
                                reduce=None, reduction="mean"):
    """multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
    reduction='mean'): the binary cross entropy of sigmoid(input) against ``target`` (1 for a
    class that applies, 0 otherwise), -(y * log(sigmoid(x)) + (1 - y) * log(sigmoid(-x))),
    each times ``weight`` (typically one per class, [C]), averaged over the input's last
    dimension (the classes) and reduced ("none": one loss per sample). Input, target and weight
    broadcast, as PyTorch's; the average is over the input's last dimension of the broadcast
    loss, as there. The input has at least one dimension (a ShapeError otherwise)."""
    owner = "multilabel_soft_margin_loss"
    _no_legacy(owner, size_average, reduce)
    others = [("target", target)] + ([] if weight is None else [("weight", weight)])
    (x, y, *w), dtype = _loss_tensors(owner, reduction, [("input", input)], others)
    if not x.ndim:
        raise ShapeError(f"{owner}: expected input with a class dimension (at least 1-d), got "
                         f"a 0-d input")
    _broadcast_shape(owner, [("input", input)] + others)
    loss = -(y * _composite._log_sigmoid(x) + (1.0 - y) * _composite._log_sigmoid(-x))
    if w:
        loss = loss * w[0]
    return _composite._reduced(_mint.mean(loss, x.ndim - 1), reduction, dtype)


# ------------------------------------------------------------------------------------------------
# Connectionist temporal classification

# Note [CTC's unreachable states]
# ctc_loss runs the alpha recursion in log space, where an unreachable state is log(0) = -inf.
# Autograd through the logsumexp of three -inf predecessors gives NaN (exp(-inf - -inf)) even
# where no gradient flows, so an unreachable state holds _CTC_NEVER instead: a finite stand-in
# far below any log-likelihood, whose paths weigh exp(_CTC_NEVER - real) = 0 in every sum. The
# emissions are clamped at it too (a -inf log-probability), so T steps stay finite in float32 for
# T up to about 3e8, and a final log-likelihood below _CTC_NEVER / 2 is an impossible alignment.
_CTC_NEVER = -1e30


def _ctc_lengths(owner, name, lengths, batch):
    """``lengths`` (an integer kiln tensor of 0 or 1 dimensions, or a tuple or list of ints) as
    a list of ``batch`` ints >= 0, read on the host as PyTorch's are (so under kiln.jit they are
    given as tuples or lists)."""
    if isinstance(lengths, _C.Tensor):
        if lengths.dtype.is_floating_point or lengths.dtype == _C.dtype.bool:
            raise DTypeError(f"{owner}: expected integer {name}, got {lengths.dtype.name}")
        if lengths.ndim > 1:
            raise ShapeError(f"{owner}: expected {name} [N] (one per sample), got "
                             f"{_dims(lengths.shape)}")
        values = lengths.reshape(-1).tolist()
    elif isinstance(lengths, (tuple, list)):
        values = [checked_int(owner, f"{name}[{i}]", v) for i, v in enumerate(lengths)]
    else:
        raise KilnTypeError(f"{owner}: expected {name} to be an integer kiln.Tensor or a tuple "
                            f"of ints, got {type(lengths).__name__}")
    if len(values) != batch:
        raise ShapeError(f"{owner}: expected {name} of {batch} entries (one per sample), got "
                         f"{len(values)}")
    if min(values, default=0) < 0:
        raise KilnValueError(f"{owner}: expected {name} >= 0, got {min(values)}")
    return values


def _ctc_labels(owner, targets, lengths, classes, blank):
    """Each sample's target labels, [N, S] int64 for S the longest (``blank`` past a sample's
    length), from ``targets`` in either of PyTorch's layouts: padded [N, >= S] or concatenated
    [sum(lengths)]. A label outside [0, C) is a KilnIndexError (checked outside a kiln.jit
    trace, which has no values)."""
    _integer_targets(owner, "targets", targets)
    batch, longest = len(lengths), max(lengths, default=0)
    if targets.ndim == 1:
        if targets.shape[0] != sum(lengths):
            raise ShapeError(f"{owner}: expected concatenated targets [{sum(lengths)}] (the sum "
                             f"of target_lengths), got {_dims(targets.shape)}")
        starts = [stop - n for stop, n in zip(itertools.accumulate(lengths), lengths)]
    elif targets.ndim == 2:
        if targets.shape[0] != batch or targets.shape[1] < longest:
            raise ShapeError(f"{owner}: expected padded targets [{batch}, S] with S >= {longest} "
                             f"(the longest of target_lengths), got {_dims(targets.shape)}")
        starts = [n * targets.shape[1] for n in range(batch)]
    else:
        raise ShapeError(f"{owner}: expected targets [N, S] (padded) or [sum(target_lengths)] "
                         f"(concatenated), got {_dims(targets.shape)}")
    # One gather for both layouts: a label past a sample's length reads the blank appended last.
    flat = _mint.cat([targets.reshape(-1).to(_C.dtype.int64),
                      _mint.full([1], blank, dtype=_C.dtype.int64)])
    end = flat.shape[0] - 1
    index = [[start + s if s < length else end for s in range(longest)]
             for start, length in zip(starts, lengths)]
    labels = _mint.index_select(flat, 0, _C.tensor(index, dtype=_C.dtype.int64).reshape(-1))
    labels = labels.reshape(batch, longest)
    _classes_in_range(owner, labels, classes)
    return labels


def _ctc_log_likelihood(log_probs, labels, input_lengths, target_lengths, blank):
    """log p(labels | log_probs) of each sample [N], for log_probs [T, N, C] and labels [N, S]:
    the alpha recursion over the extended labels l' = (blank, l1, blank, l2, ..., blank), of
    width 2S + 1, one step of vectorized ops per time step. alpha[s] sums the alignments of the
    first t frames that end in l'[s]: the log of the sum over its predecessors s, s - 1 and,
    where l'[s] is no blank and differs from l'[s - 2], s - 2, plus the emission of l'[s]. A
    sample's alpha stays as it is from its input length on; see Note [CTC's unreachable
    states]."""
    batch, longest = labels.shape
    width = 2 * longest + 1
    dtype = log_probs.dtype
    blanks = _mint.full([batch, 1], blank, dtype=_C.dtype.int64)
    pairs = _mint.stack([_mint.expand(blanks, (batch, longest)), labels], 2)
    extended = _mint.cat([pairs.reshape(batch, 2 * longest), blanks], 1)  # [N, 2S + 1]
    before = _mint.narrow(_mint.pad(extended, (2, 0), value=blank), 1, 0, width)  # l'[s - 2]
    skip = _mint.logical_and(extended != blank, extended != before)
    steps = max(input_lengths, default=0)
    frames = _mint.narrow(log_probs, 0, 0, steps)
    emissions = _mint.gather(frames, 2, _mint.expand(_mint.unsqueeze(extended, 0),
                                                     (steps, batch, width)))
    emissions = _mint.clamp(emissions, min=_CTC_NEVER)
    # Before the first frame only the empty prefix (state 0, log 1) is reached: one step of the
    # recursion from there gives alpha at t = 0, and a sample of input length 0 keeps it.
    alpha = _mint.cat([_mint.zeros(batch, 1, dtype=dtype),
                       _mint.full([batch, width - 1], _CTC_NEVER, dtype=dtype)], 1)
    never = _mint.full([batch, 2], _CTC_NEVER, dtype=dtype)
    running = _C.tensor(input_lengths, dtype=_C.dtype.int64).reshape(batch, 1)
    shortest = min(input_lengths, default=0)
    for t in range(steps):
        shifted = _mint.cat([never, alpha], 1)  # alpha[s - 2] at s, alpha[s - 1] at s + 1
        one = _mint.narrow(shifted, 1, 1, width)
        two = _mint.where(skip, _mint.narrow(shifted, 1, 0, width), _CTC_NEVER)
        stepped = _mint.logsumexp(_mint.stack([alpha, one, two]), 0) + emissions[t]
        # Every sample still runs before the shortest input ends: no select needed.
        alpha = stepped if t < shortest else _mint.where(t < running, stepped, alpha)
    # The alignments end in the last label (2L - 1) or the blank after it (2L).
    ends = _C.tensor([[2 * n, max(2 * n - 1, 0)] for n in target_lengths],
                     dtype=_C.dtype.int64).reshape(batch, 2)
    labelled = _C.tensor([[True, n > 0] for n in target_lengths],
                         dtype=_C.dtype.bool).reshape(batch, 2)
    final = _mint.where(labelled, _mint.gather(alpha, 1, ends), _CTC_NEVER)
    return _mint.logsumexp(final, 1)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction='mean',
    zero_infinity=False): the connectionist temporal classification loss, minus the log of the
    summed probability of every alignment of each sample's target labels to its frames.

    ``log_probs`` [T, N, C] (or [T, C] for one sample; not empty, as PyTorch asks) are
    per-frame log-probabilities (a log_softmax's) of C classes, ``blank`` among them
    (0 <= blank < C, a KilnValueError otherwise). ``targets`` are integer class indices, padded
    [N, S] (S at least the longest target; the entries past each length are ignored) or
    concatenated [sum(target_lengths)].
    ``input_lengths`` (each at most T) and ``target_lengths`` are integer kiln tensors [N] or
    tuples / lists of N ints >= 0, read on the host (as PyTorch's; under kiln.jit give them as
    tuples). "mean" divides each loss by its target length (1 for 0) and averages, "sum" sums,
    "none" keeps [N] (0-d for one sample). An impossible alignment (an input too short for its
    target) has loss inf, 0 with ``zero_infinity``.

    Unlike PyTorch's: the gradient is autograd's, the true derivative with respect to
    ``log_probs`` (PyTorch's is the one with respect to the logits of a log_softmax, which is
    what both give through one); an impossible alignment's gradient is 0 (PyTorch's is NaN
    without ``zero_infinity``); targets are integer (PyTorch casts floats) and a label outside
    [0, C) is a KilnIndexError; float16 and bfloat16 are computed in float32."""
    owner = "ctc_loss"
    (lp,), dtype = _loss_tensors(owner, reduction, [("log_probs", log_probs)])
    if lp.ndim not in (2, 3) or lp.numel() == 0:
        raise ShapeError(f"{owner}: expected non-empty log_probs [T, N, C], or [T, C] for one "
                         f"sample, got {_dims(lp.shape)}")
    batched = lp.ndim == 3
    if not batched:
        lp = _mint.unsqueeze(lp, 1)
    steps, batch, classes = lp.shape
    blank = checked_int(owner, "blank", blank)
    if not 0 <= blank < classes:
        raise KilnValueError(f"{owner}: expected 0 <= blank < {classes} (the number of "
                             f"classes), got {blank}")
    zero_infinity = checked_bool(owner, "zero_infinity", zero_infinity)
    inputs = _ctc_lengths(owner, "input_lengths", input_lengths, batch)
    if max(inputs, default=0) > steps:
        raise KilnValueError(f"{owner}: expected input_lengths <= {steps} (the frames of "
                             f"log_probs), got {max(inputs)}")
    lengths = _ctc_lengths(owner, "target_lengths", target_lengths, batch)
    labels = _ctc_labels(owner, targets, lengths, classes, blank)
    log_likelihood = _ctc_log_likelihood(lp, labels, inputs, lengths, blank)
    # An impossible alignment's loss is a constant: its gradient is 0.
    loss = _mint.where(log_likelihood < _CTC_NEVER / 2, 0.0 if zero_infinity else math.inf,
                       -log_likelihood)
    if reduction == "mean":
        loss = loss / _C.tensor([max(n, 1) for n in lengths], dtype=loss.dtype)
    elif reduction == "none" and not batched:
        loss = loss.reshape([])  # one sample, as the input
    return _composite._reduced(loss, reduction, dtype)
