"""kiln.nn.Embedding: rows of a table [num_embeddings, embedding_dim] at integer indices.

    emb = kiln.nn.Embedding(1000, 64)      # weight ~ N(0, 1), as in PyTorch
    vectors = emb(kiln.tensor([[1, 2], [3, 4]], dtype=kiln.int64))   # [2, 2, 64]
    padded = kiln.nn.Embedding(1000, 64, padding_idx=0)   # row 0 starts at zero, never trained
    capped = kiln.nn.Embedding(1000, 64, max_norm=1.0)    # rows looked up are renormed to <= 1
    glove = kiln.nn.Embedding.from_pretrained(vectors)      # a frozen table of given rows
"""

from .. import _C
from .._checks import checked_bool, checked_int
from ..autograd import no_grad
from ..errors import KilnTypeError, ShapeError
from ..mint._composite import check_real
from . import functional as F
from . import init
from .cell import Cell
from .parameter import Parameter

__all__ = ["Embedding"]


def _max_norm(owner, max_norm):
    """``max_norm``: None or a real number (as a float), else a KilnTypeError; a dtype says
    that it now comes by name (it was Embedding's 4th argument, where PyTorch has max_norm)."""
    if max_norm is None:
        return None
    if isinstance(max_norm, _C.dtype):
        raise KilnTypeError(f"{owner}: the 4th argument is max_norm, as in PyTorch, got the "
                            f"dtype {max_norm.name}: pass it by name (dtype=kiln.{max_norm.name})")
    return check_real(owner, "max_norm", max_norm)


class Embedding(Cell):
    """Embedding(num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
    scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, device=None,
    dtype=None), PyTorch's signature: a table ``weight`` [num_embeddings, embedding_dim] of
    ``dtype`` (default float32), initialised N(0, 1); called with integer indices of any shape,
    returns their rows, of shape indices.shape + [embedding_dim] (F.embedding).

    ``padding_idx`` (PyTorch's): a row that starts at zero and gets no gradient, so it stays as
    it is while the others train; lookups of it return its current value. A negative one counts
    from the end (-1 is the last row); one outside [-num_embeddings, num_embeddings) is a
    KilnValueError.

    ``max_norm`` (a number, or None): at each call, the rows looked up whose ``norm_type``-norm
    exceeds it are first rescaled in place to norm max_norm, as PyTorch's (``weight`` changes,
    under no_grad). ``scale_grad_by_freq=True`` divides the gradient of each lookup by the number
    of times its index occurs in that call's indices, as PyTorch's. ``sparse=True`` is a
    KilnNotImplementedError (Kiln has no sparse tensors). ``device`` must be the CPU
    (kiln.device).

    ``Embedding.from_pretrained(embeddings, ...)`` builds one around a given table."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        super().__init__()
        owner = "Embedding"
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        if padding_idx is not None:
            padding_idx = checked_int(owner, "padding_idx", padding_idx,
                                      -num_embeddings, num_embeddings - 1) % num_embeddings
        self.padding_idx = padding_idx
        self.max_norm = _max_norm(owner, max_norm)
        self.norm_type = check_real(owner, "norm_type", norm_type)
        self.scale_grad_by_freq = checked_bool(owner, "scale_grad_by_freq", scale_grad_by_freq)
        self.sparse = checked_bool(owner, "sparse", sparse)
        F._dense_embedding(owner, sparse)
        if _weight is not None:
            # PyTorch's private arguments, for from_pretrained: the table is used as it is (its
            # padding row too), and nothing is drawn from the generator.
            self.weight = Parameter(_weight, requires_grad=not _freeze)
            return
        dtype = dtype or _C.dtype.float32
        self.weight = Parameter(_C.mint.empty(num_embeddings, embedding_dim, dtype=dtype,
                                              device=device))
        self.reset_parameters()

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None,
                        norm_type=2.0, scale_grad_by_freq=False, sparse=False):
        """An Embedding whose ``weight`` is ``embeddings`` (a 2-d kiln tensor [num_embeddings,
        embedding_dim], kept with its dtype; the Parameter shares its memory, as in PyTorch),
        trained unless ``freeze`` (default True). ``padding_idx`` is as the constructor's,
        except that its row keeps its given values rather than starting at zero (PyTorch's rule);
        it still gets no gradient. ``max_norm`` and ``norm_type`` are the constructor's (the
        given table is renormed in place as rows are looked up), and so is
        ``scale_grad_by_freq``; ``sparse=True`` is a KilnNotImplementedError.

            emb = kiln.nn.Embedding.from_pretrained(kiln.tensor([[1.0, 2.3], [4.0, 5.1]]))
            emb(kiln.tensor([1], dtype=kiln.int64))   # [[4.0, 5.1]]

        ``embeddings`` of another kind is a KilnTypeError, of another rank a ShapeError; a
        ``freeze`` that is no bool a KilnTypeError."""
        owner = "Embedding.from_pretrained"
        if not isinstance(embeddings, _C.Tensor):
            raise KilnTypeError(f"{owner}: expected embeddings to be a kiln.Tensor, got "
                                f"{type(embeddings).__name__}")
        if embeddings.ndim != 2:
            raise ShapeError(f"{owner}: expected 2-d embeddings [num_embeddings, embedding_dim], "
                             f"got shape {list(embeddings.shape)}")
        checked_bool(owner, "freeze", freeze)
        F._dense_embedding(owner, sparse)
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx, max_norm, norm_type, scale_grad_by_freq,
                   _weight=embeddings, _freeze=freeze)

    def __setstate__(self, state):
        # A pickle from before padding_idx (or max_norm) has none.
        super().__setstate__({"padding_idx": None, "max_norm": None, "norm_type": 2.0,
                              "scale_grad_by_freq": False, "sparse": False, **state})

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0

    def construct(self, indices):
        return F.embedding(indices, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq)

    def extra_repr(self):
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            text += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            text += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            text += ", scale_grad_by_freq=True"
        return text
