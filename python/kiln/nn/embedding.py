"""kiln.nn.Embedding: rows of a table [num_embeddings, embedding_dim] at integer indices.

    emb = kiln.nn.Embedding(1000, 64)      # weight ~ N(0, 1), as in PyTorch
    vectors = emb(kiln.tensor([[1, 2], [3, 4]], dtype=kiln.int64))   # [2, 2, 64]
"""

from .. import _C
from . import init
from .cell import Cell
from .parameter import Parameter

__all__ = ["Embedding"]


class Embedding(Cell):
    """Embedding(num_embeddings, embedding_dim, dtype=None): a table ``weight`` [num_embeddings,
    embedding_dim] of ``dtype`` (default float32), initialised N(0, 1); called with integer
    indices of any shape, returns their rows, of shape indices.shape + [embedding_dim]."""

    def __init__(self, num_embeddings, embedding_dim, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        dtype = dtype or _C.dtype.float32
        self.weight = Parameter(_C.mint.empty(num_embeddings, embedding_dim, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self):
        init.normal_(self.weight)

    def construct(self, indices):
        return _C.mint.embedding(indices, self.weight)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"
