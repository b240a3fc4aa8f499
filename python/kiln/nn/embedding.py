"""kiln.nn.Embedding: rows of a table [num_embeddings, embedding_dim] at integer indices.

    emb = kiln.nn.Embedding(1000, 64)      # weight ~ N(0, 1), as in PyTorch
    vectors = emb(kiln.tensor([[1, 2], [3, 4]], dtype=kiln.int64))   # [2, 2, 64]
    padded = kiln.nn.Embedding(1000, 64, padding_idx=0)   # row 0 starts at zero, never trained
"""

from .. import _C
from .._checks import checked_int
from ..autograd import no_grad
from . import init
from .cell import Cell
from .parameter import Parameter

__all__ = ["Embedding"]


class Embedding(Cell):
    """Embedding(num_embeddings, embedding_dim, padding_idx=None, dtype=None): a table ``weight``
    [num_embeddings, embedding_dim] of ``dtype`` (default float32), initialised N(0, 1); called
    with integer indices of any shape, returns their rows, of shape indices.shape +
    [embedding_dim].

    ``padding_idx`` (PyTorch's): a row that starts at zero and gets no gradient, so it stays as
    it is while the others train; lookups of it return its current value. A negative one counts
    from the end (-1 is the last row); one outside [-num_embeddings, num_embeddings) is a
    KilnValueError. It comes third, as in PyTorch, so ``dtype`` is given by name."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        if padding_idx is not None:
            padding_idx = checked_int("Embedding", "padding_idx", padding_idx,
                                      -num_embeddings, num_embeddings - 1) % num_embeddings
        self.padding_idx = padding_idx
        dtype = dtype or _C.dtype.float32
        self.weight = Parameter(_C.mint.empty(num_embeddings, embedding_dim, dtype=dtype))
        self.reset_parameters()

    def __setstate__(self, state):
        # A pickle from before padding_idx has no padding row.
        super().__setstate__({"padding_idx": None, **state})

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0

    def construct(self, indices):
        rows = _C.mint.embedding(indices, self.weight)
        if self.padding_idx is None:
            return rows
        # The padding row's value, with its gradient cut: where() sends the lookups of
        # padding_idx none, so the row's gradient is exactly zero however often it is read.
        counted = _C.mint.unsqueeze(indices != self.padding_idx, -1)
        return _C.mint.where(counted, rows, rows.detach())

    def extra_repr(self):
        padding = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{padding}"
