"""kiln.nn.Embedding: rows of a table [num_embeddings, embedding_dim] at integer indices.

    emb = kiln.nn.Embedding(1000, 64)      # weight ~ N(0, 1), as in PyTorch
    vectors = emb(kiln.tensor([[1, 2], [3, 4]], dtype=kiln.int64))   # [2, 2, 64]
    padded = kiln.nn.Embedding(1000, 64, padding_idx=0)   # row 0 starts at zero, never trained
    glove = kiln.nn.Embedding.from_pretrained(vectors)      # a frozen table of given rows
"""

from .. import _C
from .._checks import checked_bool, checked_int
from ..autograd import no_grad
from ..errors import KilnNotImplementedError, KilnTypeError, ShapeError
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
    KilnValueError. It comes third, as in PyTorch, so ``dtype`` is given by name.

    ``Embedding.from_pretrained(embeddings, ...)`` builds one around a given table."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, dtype=None, *,
                 _weight=None, _freeze=False):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        if padding_idx is not None:
            padding_idx = checked_int("Embedding", "padding_idx", padding_idx,
                                      -num_embeddings, num_embeddings - 1) % num_embeddings
        self.padding_idx = padding_idx
        if _weight is not None:
            # PyTorch's private arguments, for from_pretrained: the table is used as it is (its
            # padding row too), and nothing is drawn from the generator.
            self.weight = Parameter(_weight, requires_grad=not _freeze)
            return
        dtype = dtype or _C.dtype.float32
        self.weight = Parameter(_C.mint.empty(num_embeddings, embedding_dim, dtype=dtype))
        self.reset_parameters()

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None,
                        norm_type=2.0, scale_grad_by_freq=False, sparse=False):
        """An Embedding whose ``weight`` is ``embeddings`` (a 2-d kiln tensor [num_embeddings,
        embedding_dim], kept with its dtype; the Parameter shares its memory, as in PyTorch),
        trained unless ``freeze`` (default True). ``padding_idx`` is as the constructor's,
        except that its row keeps its given values rather than starting at zero (PyTorch's rule);
        it still gets no gradient. As F.embedding, ``max_norm``, ``scale_grad_by_freq`` and
        ``sparse`` are a KilnNotImplementedError (``norm_type`` only matters with max_norm).

            emb = kiln.nn.Embedding.from_pretrained(kiln.tensor([[1.0, 2.3], [4.0, 5.1]]))
            emb(kiln.tensor([1], dtype=kiln.int64))   # [[4.0, 5.1]]

        ``embeddings`` of another kind is a KilnTypeError, of another rank a ShapeError; a
        ``freeze`` that is no bool a KilnTypeError."""
        if not isinstance(embeddings, _C.Tensor):
            raise KilnTypeError(f"Embedding.from_pretrained: expected embeddings to be a "
                                f"kiln.Tensor, got {type(embeddings).__name__}")
        if embeddings.ndim != 2:
            raise ShapeError(f"Embedding.from_pretrained: expected 2-d embeddings "
                             f"[num_embeddings, embedding_dim], got shape "
                             f"{list(embeddings.shape)}")
        checked_bool("Embedding.from_pretrained", "freeze", freeze)
        for name, wanted in (("max_norm", max_norm is not None),
                             ("scale_grad_by_freq", scale_grad_by_freq), ("sparse", sparse)):
            if wanted:
                raise KilnNotImplementedError(f"Embedding.from_pretrained: {name} is not "
                                              f"supported (Kiln's embedding is a plain lookup "
                                              f"with dense gradients)")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx, _weight=embeddings, _freeze=freeze)

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
