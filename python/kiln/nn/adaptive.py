"""kiln.nn.AdaptiveLogSoftmaxWithLoss: PyTorch's efficient softmax approximation for many classes
(Grave et al., "Efficient softmax approximation for GPUs", 2016).

    asm = kiln.nn.AdaptiveLogSoftmaxWithLoss(512, 10000, cutoffs=[100, 1000], div_value=4.0)
    output, loss = asm(hidden, target)     # hidden [N, 512], target [N] of class indices
    log_probs = asm.log_prob(hidden)       # [N, 10000]
    best = asm.predict(hidden)             # [N], the most likely class of each row

``AdaptiveLogSoftmaxWithLoss(in_features, n_classes, cutoffs, div_value=4.0, head_bias=False,
device=None, dtype=None)`` sorts the classes (most frequent first) into a head and clusters:
``cutoffs`` [c0, c1, ...] (unique increasing ints in [1, n_classes - 1]) puts classes [0, c0) in
the head, which also scores one entry per cluster, and [c_i, c_i+1) in cluster i + 1, the last
ending at n_classes. The head is ``head``, a Linear(in_features, c0 + number of clusters,
bias=head_bias); cluster i is ``tail[i]``, a Sequential of Linear(in_features, h_i, bias=False)
and Linear(h_i, its number of classes, bias=False) with h_i = int(in_features // div_value **
(i + 1)). The names are PyTorch's (``head.weight``, ``tail.0.0.weight``, ``tail.0.1.weight``,
...), so its state dicts load.

- ``asm(input, target)`` -> ``(output, loss)``, a named tuple: ``output`` [N] the log-probability
  of each row's target class (the head's log-probability of the class, or of its cluster plus
  the cluster's of the class), ``loss`` the mean of -output. As in PyTorch, each cluster is
  computed for the rows whose target is in it only (so, with its data-dependent rows, not
  under kiln.jit). An unbatched input [in_features] takes a 0-d target and gives a 0-d output.
- ``log_prob(input)``: the log-probabilities of every class, [N, n_classes].
- ``predict(input)``: the class of the largest log-probability of each row, [N] (int64); the
  clusters are computed for the rows whose head prefers a cluster only.

Errors: cutoffs that are no increasing sequence of unique ints in [1, n_classes - 1] are a
KilnValueError (PyTorch's message), a ``div_value`` that is no number > 0 a KilnTypeError /
KilnValueError; an input that is no [N, in_features] ([in_features] for a 0-d target), a target
of another rank or batch size, are ShapeErrors, a target that is no integer tensor a DTypeError,
and a target class out of [0, n_classes) a KilnIndexError.
"""

import collections

from .. import _C, mint as _mint
from .._checks import as_int, checked_bool, checked_int
from .._device import check_usable
from ..errors import KilnTypeError, KilnValueError, ShapeError
from ..mint._composite import _dims, check_real
from . import functional as F
from ._layer_arguments import checked_tensor
from ._loss_functions import _classes_in_range, _integer_targets
from .cell import Cell
from .container import ModuleList, Sequential
from .linear import Linear

__all__ = ["AdaptiveLogSoftmaxWithLoss"]


# PyTorch's name for what the call returns.
_ASMoutput = collections.namedtuple("_ASMoutput", ["output", "loss"])


def _checked_cutoffs(owner, cutoffs, n_classes):
    """``cutoffs`` as a list of ints, checked as PyTorch checks them."""
    try:
        values = list(cutoffs)
    except TypeError:
        raise KilnTypeError(f"{owner}: cutoffs must be a sequence of ints, got "
                            f"{type(cutoffs).__name__} {cutoffs!r}") from None
    if not values:
        raise KilnValueError(f"{owner}: cutoffs should be a sequence of length larger than 0")
    ints = [as_int(value) for value in values]
    if (None in ints or ints != sorted(ints) or min(ints) <= 0 or max(ints) > n_classes - 1
            or len(set(ints)) != len(ints)):
        raise KilnValueError(f"{owner}: cutoffs should be a sequence of unique, positive "
                             f"integers sorted in an increasing order, where each value is "
                             f"between 1 and n_classes-1, got {values!r} for n_classes="
                             f"{n_classes}")
    return ints


class AdaptiveLogSoftmaxWithLoss(Cell):
    """AdaptiveLogSoftmaxWithLoss(in_features, n_classes, cutoffs, div_value=4.0,
    head_bias=False, device=None, dtype=None): PyTorch's adaptive softmax; see
    kiln.nn.adaptive's documentation."""

    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False,
                 device=None, dtype=None):
        super().__init__()
        owner = type(self).__name__
        if device is not None:
            check_usable(owner, device)
        self.in_features = checked_int(owner, "in_features", in_features, low=0)
        self.n_classes = checked_int(owner, "n_classes", n_classes)
        self.cutoffs = _checked_cutoffs(owner, cutoffs, self.n_classes) + [self.n_classes]
        self.div_value = check_real(owner, "div_value", div_value)
        if not self.div_value > 0:
            raise KilnValueError(f"{owner}: div_value must be > 0, got {div_value}")
        self.head_bias = checked_bool(owner, "head_bias", head_bias)
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(self.in_features, self.head_size, bias=head_bias, dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(self.in_features // (self.div_value ** (i + 1)))
            classes = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(self.in_features, hidden, bias=False, dtype=dtype),
                                        Linear(hidden, classes, bias=False, dtype=dtype)))

    def reset_parameters(self):
        """Initialises the head and the clusters' projections again, as Linear's."""
        self.head.reset_parameters()
        for projection in self.tail:
            for linear in projection:
                linear.reset_parameters()

    def _check_features(self, method, input):  # noqa: A002
        """A ShapeError unless ``input``'s last dimension holds in_features."""
        if input.ndim == 0 or input.shape[-1] != self.in_features:
            raise ShapeError(f"{type(self).__name__}{method}: expected input features "
                             f"[..., {self.in_features}] (in_features), got {_dims(input.shape)}")

    def _checked_batch(self, method, input):  # noqa: A002
        """``input``, a kiln tensor [N, in_features] (else a KilnTypeError / ShapeError)."""
        checked_tensor(f"{type(self).__name__}{method}", "input", input)
        if input.ndim != 2:
            raise ShapeError(f"{type(self).__name__}{method}: expected input [N, "
                             f"{self.in_features}], got {_dims(input.shape)}")
        self._check_features(method, input)
        return input

    def construct(self, input, target):  # noqa: A002  (PyTorch's names)
        owner = type(self).__name__
        checked_tensor(owner, "input", input)
        _integer_targets(owner, "target", target)
        if target.ndim == 1:
            if input.ndim != 2:
                raise ShapeError(f"{owner}: a 1-d target expects a 2-d input [N, "
                                 f"{self.in_features}], got input {_dims(input.shape)}")
            if input.shape[0] != target.shape[0]:
                raise ShapeError(f"{owner}: input and target should have the same size in the "
                                 f"batch dimension, got input {_dims(input.shape)} and target "
                                 f"{_dims(target.shape)}")
        elif target.ndim == 0:
            if input.ndim != 1:
                raise ShapeError(f"{owner}: a 0-d target expects a 1-d input "
                                 f"[{self.in_features}], got input {_dims(input.shape)}")
        else:
            raise ShapeError(f"{owner}: expected a 0-d or 1-d target (multi-target is not "
                             f"supported), got target {_dims(target.shape)}")
        self._check_features("", input)
        batched = target.ndim == 1
        x = input if batched else _mint.unsqueeze(input, 0)
        target = (target if batched else _mint.unsqueeze(target, 0)).to(_C.dtype.int64)
        _classes_in_range(owner, target, self.n_classes)
        # Each row's cluster: 0 for the head's classes, i for tail[i - 1]'s.
        cluster = sum((target >= cutoff).to(_C.dtype.int64) for cutoff in self.cutoffs[:-1])
        output = _mint.zeros([target.shape[0]], dtype=x.dtype)
        for i, projection in enumerate(self.tail, start=1):
            rows = _mint.nonzero(cluster == i)[:, 0]
            if rows.numel() == 0:
                continue
            relative = _mint.index_select(target, 0, rows) - self.cutoffs[i - 1]
            scores = F.log_softmax(projection(_mint.index_select(x, 0, rows)), dim=1)
            chosen = _mint.gather(scores, 1, _mint.unsqueeze(relative, 1))
            output = output.index_copy(0, rows, _mint.squeeze(chosen, 1))
        # The head scores the row's class, or its cluster (entry shortlist_size + i - 1).
        head_index = _mint.where(cluster == 0, target, cluster + (self.shortlist_size - 1))
        head_logprob = F.log_softmax(self.head(x), dim=1)
        output = output + _mint.squeeze(
            _mint.gather(head_logprob, 1, _mint.unsqueeze(head_index, 1)), 1)
        loss = _mint.mean(-output)
        return _ASMoutput(output if batched else _mint.squeeze(output, 0), loss)

    def _full_log_prob(self, input, head_output):  # noqa: A002
        """The log-probabilities of every class, [N, n_classes], from ``head_output`` (the
        head's scores of ``input``)."""
        head_logprob = F.log_softmax(head_output, dim=1)
        parts = [head_logprob[:, :self.shortlist_size]]
        for i, projection in enumerate(self.tail):
            entry = self.shortlist_size + i
            parts.append(F.log_softmax(projection(input), dim=1)
                         + head_logprob[:, entry:entry + 1])
        return _mint.cat(parts, 1)

    def log_prob(self, input):  # noqa: A002
        """log_prob(input): the log-probabilities of every class for input [N, in_features],
        [N, n_classes]."""
        input = self._checked_batch(".log_prob", input)
        return self._full_log_prob(input, self.head(input))

    def predict(self, input):  # noqa: A002
        """predict(input): the most likely class of each row of input [N, in_features], [N]
        (int64), as ``log_prob(input).argmax(dim=1)``; the clusters are computed only for the
        rows whose head's best entry is a cluster."""
        input = self._checked_batch(".predict", input)
        head_output = self.head(input)
        output = _mint.argmax(head_output, 1)
        outside = output >= self.shortlist_size
        if not _mint.any(outside).item():
            return output
        rows = _mint.nonzero(outside)[:, 0]
        log_prob = self._full_log_prob(_mint.index_select(input, 0, rows),
                                       _mint.index_select(head_output, 0, rows))
        return output.index_copy(0, rows, _mint.argmax(log_prob, 1))
