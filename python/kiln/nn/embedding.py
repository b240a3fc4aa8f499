"""kiln.nn.Embedding: rows of a table [num_embeddings, embedding_dim] at integer indices;
kiln.nn.EmbeddingBag: those rows reduced per bag of indices (a sum, a mean or a maximum).

    emb = kiln.nn.Embedding(1000, 64)      # weight ~ N(0, 1), as in PyTorch
    vectors = emb(kiln.tensor([[1, 2], [3, 4]], dtype=kiln.int64))   # [2, 2, 64]
    padded = kiln.nn.Embedding(1000, 64, padding_idx=0)   # row 0 starts at zero, never trained
    capped = kiln.nn.Embedding(1000, 64, max_norm=1.0)    # rows looked up are renormed to <= 1
    glove = kiln.nn.Embedding.from_pretrained(vectors)      # a frozen table of given rows
    bags = kiln.nn.EmbeddingBag(1000, 64, mode="sum")
    sums = bags(kiln.tensor([1, 2, 4, 5, 4], dtype=kiln.int64), kiln.tensor([0, 2]))   # [2, 64]
"""

from .. import _C
from .._checks import checked_bool, checked_int
from ..autograd import no_grad
from ..errors import KilnTypeError, ShapeError
from ..mint._composite import _dims, check_real
from . import init
from ._embedding_functions import _dense_embedding, check_mode, embedding, embedding_bag
from .cell import Cell
from .parameter import Parameter

__all__ = ["Embedding", "EmbeddingBag"]


def _max_norm(owner, max_norm):
    """``max_norm``: None or a real number (as a float), else a KilnTypeError; a dtype says
    that it now comes by name (it was Embedding's 4th argument, where PyTorch has max_norm)."""
    if max_norm is None:
        return None
    if isinstance(max_norm, _C.dtype):
        raise KilnTypeError(f"{owner}: the 4th argument is max_norm, as in PyTorch, got the "
                            f"dtype {max_norm.name}: pass it by name (dtype=kiln.{max_norm.name})")
    return check_real(owner, "max_norm", max_norm)


def _padding_idx(owner, padding_idx, num_embeddings):
    """``padding_idx``: None, or an int in [-num_embeddings, num_embeddings) as a row counted
    from the start (-1 is the last); out of range a KilnValueError."""
    if padding_idx is None:
        return None
    return checked_int(owner, "padding_idx", padding_idx, -num_embeddings,
                       num_embeddings - 1) % num_embeddings


def _table(owner, num_embeddings, embedding_dim, weight, freeze, device, dtype):
    """The Parameter ``weight`` of an embedding cell: ``weight`` itself when given (PyTorch's
    private ``_weight``, for from_pretrained: used as it is, its padding row too, and nothing is
    drawn from the generator), trained unless ``freeze``; else a new table [num_embeddings,
    embedding_dim] of ``dtype`` (default: the default dtype), which the cell's reset_parameters
    fills. A given table of another shape is a ShapeError, as PyTorch's assertion."""
    if weight is None:
        return Parameter(_C.mint.empty(num_embeddings, embedding_dim, dtype=dtype, device=device))
    if tuple(weight.shape) != (num_embeddings, embedding_dim):
        raise ShapeError(f"{owner}: expected _weight of shape [num_embeddings, embedding_dim] = "
                         f"[{num_embeddings}, {embedding_dim}], got {_dims(weight.shape)}")
    return Parameter(weight, requires_grad=not freeze)


def _reset_table(weight, padding_idx):
    """An embedding cell's reset_parameters, PyTorch's: ``weight`` drawn from N(0, 1), then its
    ``padding_idx`` row (if any) zeroed."""
    init.normal_(weight)
    if padding_idx is not None:
        with no_grad():
            weight[padding_idx] = 0


def _pretrained_shape(owner, embeddings, freeze, sparse):
    """from_pretrained's checks of its arguments; returns (num_embeddings, embedding_dim)."""
    if not isinstance(embeddings, _C.Tensor):
        raise KilnTypeError(f"{owner}: expected embeddings to be a kiln.Tensor, got "
                            f"{type(embeddings).__name__}")
    if embeddings.ndim != 2:
        raise ShapeError(f"{owner}: expected 2-d embeddings [num_embeddings, embedding_dim], "
                         f"got shape {list(embeddings.shape)}")
    checked_bool(owner, "freeze", freeze)
    _dense_embedding(owner, sparse)
    return tuple(embeddings.shape)


class Embedding(Cell):
    """Embedding(num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
    scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, device=None,
    dtype=None), PyTorch's signature: a table ``weight`` [num_embeddings, embedding_dim] of
    ``dtype`` (default: the default dtype), initialised N(0, 1); called with integer indices of any
    shape, returns their rows, of shape indices.shape + [embedding_dim] (F.embedding).

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
        self.padding_idx = _padding_idx(owner, padding_idx, num_embeddings)
        self.max_norm = _max_norm(owner, max_norm)
        self.norm_type = check_real(owner, "norm_type", norm_type)
        self.scale_grad_by_freq = checked_bool(owner, "scale_grad_by_freq", scale_grad_by_freq)
        self.sparse = checked_bool(owner, "sparse", sparse)
        _dense_embedding(owner, sparse)
        self.weight = _table(owner, num_embeddings, embedding_dim, _weight, _freeze, device,
                             dtype)
        if _weight is None:
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
        rows, cols = _pretrained_shape("Embedding.from_pretrained", embeddings, freeze, sparse)
        return cls(rows, cols, padding_idx, max_norm, norm_type, scale_grad_by_freq,
                   _weight=embeddings, _freeze=freeze)

    def __setstate__(self, state):
        # A pickle from before padding_idx (or max_norm) has none.
        super().__setstate__({"padding_idx": None, "max_norm": None, "norm_type": 2.0,
                              "scale_grad_by_freq": False, "sparse": False, **state})

    def reset_parameters(self):
        _reset_table(self.weight, self.padding_idx)

    def construct(self, indices):
        return embedding(indices, self.weight, self.padding_idx, self.max_norm, self.norm_type,
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


class EmbeddingBag(Cell):
    """EmbeddingBag(num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
    scale_grad_by_freq=False, mode='mean', sparse=False, _weight=None, include_last_offset=False,
    padding_idx=None, device=None, dtype=None), PyTorch's signature: a table ``weight``
    [num_embeddings, embedding_dim] as Embedding's (``dtype``, by default the default dtype, drawn
    from N(0, 1), the ``padding_idx`` row zero); called as bag(input, offsets=None,
    per_sample_weights=None), returns [B, embedding_dim]: the rows of each bag of indices
    reduced by ``mode``, "sum", "mean" or "max" (F.embedding_bag, which documents the bags,
    ``per_sample_weights``, ``include_last_offset`` and ``padding_idx``: its indices count in no
    bag, and its row gets no gradient).

    ``max_norm``, ``norm_type`` and ``scale_grad_by_freq`` are Embedding's (mode "max" takes no
    scale_grad_by_freq: a KilnValueError); ``sparse=True`` is a KilnNotImplementedError. The
    arguments are checked here, the inputs when the cell runs.

    ``EmbeddingBag.from_pretrained(embeddings, ...)`` builds one around a given table."""

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, mode="mean", sparse=False, _weight=None,
                 include_last_offset=False, padding_idx=None, device=None, dtype=None):
        super().__init__()
        owner = "EmbeddingBag"
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.max_norm = None if max_norm is None else check_real(owner, "max_norm", max_norm)
        self.norm_type = check_real(owner, "norm_type", norm_type)
        self.scale_grad_by_freq = checked_bool(owner, "scale_grad_by_freq", scale_grad_by_freq)
        self.mode = check_mode(owner, mode, scale_grad_by_freq)
        self.sparse = checked_bool(owner, "sparse", sparse)
        _dense_embedding(owner, sparse)
        self.include_last_offset = checked_bool(owner, "include_last_offset",
                                                include_last_offset)
        self.padding_idx = _padding_idx(owner, padding_idx, num_embeddings)
        self.weight = _table(owner, num_embeddings, embedding_dim, _weight, False, device, dtype)
        if _weight is None:
            self.reset_parameters()

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, mode="mean", sparse=False,
                        include_last_offset=False, padding_idx=None):
        """An EmbeddingBag whose ``weight`` is ``embeddings`` (a 2-d kiln tensor
        [num_embeddings, embedding_dim], kept with its dtype and sharing its memory, as
        Embedding.from_pretrained's), trained unless ``freeze`` (default True); its
        ``padding_idx`` row keeps its values. The other arguments are the constructor's.

            bag = kiln.nn.EmbeddingBag.from_pretrained(kiln.tensor([[1.0, 2.3], [4.0, 5.1]]))
            bag(kiln.tensor([[1, 0]], dtype=kiln.int64))   # [[2.5, 3.7]], the mean

        ``embeddings`` of another kind is a KilnTypeError, of another rank a ShapeError; a
        ``freeze`` that is no bool a KilnTypeError."""
        rows, cols = _pretrained_shape("EmbeddingBag.from_pretrained", embeddings, freeze,
                                       sparse)
        bag = cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
                  _weight=embeddings, include_last_offset=include_last_offset,
                  padding_idx=padding_idx)
        bag.weight.requires_grad_(not freeze)
        return bag

    def reset_parameters(self):
        _reset_table(self.weight, self.padding_idx)

    def construct(self, input, offsets=None, per_sample_weights=None):  # noqa: A002
        return embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                             self.scale_grad_by_freq, self.mode, self.sparse, per_sample_weights,
                             self.include_last_offset, self.padding_idx)

    def extra_repr(self):
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            text += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            text += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            text += ", scale_grad_by_freq=True"
        text += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx}"
        return text
