"""PyTorch's top-level spellings of kiln.linalg functions, with torch's argument names
(``torch.det(input)`` where ``torch.linalg.det(A)``): kiln.mint.det, slogdet, inverse,
matrix_power and matrix_exp, so that ``kiln.mint.det(input=A)`` works as ``torch.det(input=A)``
does. logdet, cholesky_solve, cholesky_inverse and pinverse exist only at torch's top level and
take its names already (kiln/linalg/_functions.py)."""

from ..linalg import _decompositions, _functions

__all__ = ["det", "slogdet", "inverse", "matrix_power", "matrix_exp"]


def det(input):  # noqa: A002
    """torch.det: kiln.linalg.det."""
    return _decompositions.det(input)


def slogdet(input):  # noqa: A002
    """torch.slogdet: kiln.linalg.slogdet (sign, logabsdet)."""
    return _decompositions.slogdet(input)


def inverse(input):  # noqa: A002
    """torch.inverse: kiln.linalg.inv."""
    return _decompositions.inv(input)


def matrix_power(input, n):  # noqa: A002
    """torch.matrix_power: kiln.linalg.matrix_power."""
    return _functions.matrix_power(input, n)


def matrix_exp(input):  # noqa: A002
    """torch.matrix_exp: kiln.linalg.matrix_exp."""
    return _functions.matrix_exp(input)
