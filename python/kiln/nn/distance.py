"""Distance cells with PyTorch's arguments, over kiln.nn.functional's functions of their names:

    CosineSimilarity(dim=1, eps=1e-8)       cos = CosineSimilarity()(x1, x2)   # [N, D] -> [N]
    PairwiseDistance(p=2.0, eps=1e-6, keepdim=False)

- ``CosineSimilarity``: sum(x1 * x2) / (max(||x1||, eps) * max(||x2||, eps)) along ``dim`` of
  the broadcast inputs (F.cosine_similarity).
- ``PairwiseDistance``: ||x1 - x2 + eps||_p over the last dimension of the broadcast inputs,
  kept as size 1 with ``keepdim`` (F.pairwise_distance); ``p`` is kept as ``norm``, PyTorch's
  attribute name.

Their arguments are checked when built: ``dim`` an int, ``p`` and ``eps`` real numbers,
``keepdim`` a bool (KilnTypeErrors otherwise). Their reprs show no arguments, as PyTorch's."""

from .._checks import checked_bool, checked_int
from ..mint._composite import check_real
from . import functional as F
from .cell import Cell

__all__ = ["CosineSimilarity", "PairwiseDistance"]


class CosineSimilarity(Cell):
    """CosineSimilarity(dim=1, eps=1e-8): ``cos(x1, x2)``, the cosine similarity of two tensors
    that broadcast, along ``dim`` (F.cosine_similarity)."""

    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim = checked_int("CosineSimilarity", "dim", dim)
        self.eps = check_real("CosineSimilarity", "eps", eps)

    def construct(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Cell):
    """PairwiseDistance(p=2.0, eps=1e-6, keepdim=False): ``dist(x1, x2)``, the p-norm of
    x1 - x2 + eps over the last dimension of two tensors that broadcast (F.pairwise_distance)."""

    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm = check_real("PairwiseDistance", "p", p)
        self.eps = check_real("PairwiseDistance", "eps", eps)
        self.keepdim = checked_bool("PairwiseDistance", "keepdim", keepdim)

    def construct(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
