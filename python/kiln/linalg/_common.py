"""The argument checks and small helpers that kiln.linalg's modules share (private). Errors name
the function as ``linalg.<name>``, as the C++ primitives' own errors do."""

from .. import _C
from .._checks import checked_bool
from .._type_info import finfo
from ..errors import DTypeError, KilnTypeError, KilnValueError, ShapeError

prims = _C.linalg
mint = _C.mint
FLOAT_DTYPES = (_C.dtype.float32, _C.dtype.float64)


def check_tensor(owner, name, value):
    """``value`` if it is a kiln tensor, else a KilnTypeError naming ``linalg.owner``."""
    if not isinstance(value, _C.Tensor):
        raise KilnTypeError(f"linalg.{owner}: expected {name} to be a kiln.Tensor, got "
                            f"{type(value).__name__} {value!r}")
    return value


def check_flag(owner, name, value):
    return checked_bool(f"linalg.{owner}", name, value)


def check_float(owner, name, value):
    """A DTypeError unless ``value`` is float32 or float64 (the dtypes the primitives take), for
    the functions composed in Python, which check before any primitive does."""
    if value.dtype not in FLOAT_DTYPES:
        raise DTypeError(f"linalg.{owner}: expected {name} to be a float32 or float64 tensor, got "
                         f"{value.dtype.name}")


def check_matrices(owner, name, value, square=False):
    """A ShapeError unless ``value`` is a batch of matrices (square ones with ``square``)."""
    if value.ndim < 2:
        raise ShapeError(f"linalg.{owner}: expected {name} to be a tensor of matrices (at least "
                         f"2 dims), got {value.ndim}-d {list(value.shape)}")
    if square and value.shape[-1] != value.shape[-2]:
        raise ShapeError(f"linalg.{owner}: expected {name} to be square matrices, got "
                         f"{value.shape[-2]} x {value.shape[-1]} ({list(value.shape)})")


def check_same_dtype(owner, named):
    """A DTypeError unless the tensors ``named`` ((name, tensor) pairs) share one dtype."""
    (first_name, first), *rest = named
    for name, value in rest:
        if value.dtype != first.dtype:
            raise DTypeError(f"linalg.{owner}: expected {first_name} and {name} of one dtype, "
                             f"got {first.dtype.name} and {value.dtype.name}")


def check_driver(owner, driver, known):
    """``driver`` None or one of the LAPACK / cuSOLVER routine names ``known``: accepted and
    ignored (see the package documentation, "driver="); anything else a KilnValueError."""
    if driver is not None and driver not in known:
        raise KilnValueError(f"linalg.{owner}: driver must be None or one of "
                             f"{', '.join(known)}, got {driver!r}")


def is_vector_rhs(a, b):
    """Whether ``b`` holds vectors rather than matrices as the right side of ``a``: 1-d, or a's
    shape without its last dim (PyTorch's rule, which the C++ solve follows too)."""
    return b.ndim == 1 or (b.ndim == a.ndim - 1 and tuple(b.shape) == tuple(a.shape[:-1]))


def batch_identity(like, rows, cols=None):
    """Identity matrices [rows, cols] in a fresh tensor of ``like``'s dtype and batch dims."""
    cols = rows if cols is None else cols
    eye = mint.eye(rows, cols, dtype=like.dtype)
    return mint.zeros(list(like.shape[:-2]) + [rows, cols], dtype=like.dtype) + eye


def default_rtol(a):
    """PyTorch's default relative tolerance for the rank of the matrices ``a`` [..., m, n]: the
    dtype's epsilon times max(m, n)."""
    return finfo(a.dtype).eps * max(a.shape[-2], a.shape[-1])
