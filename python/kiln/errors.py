"""Kiln's exception types. Every error raised by the C++ core is one of these.

``KilnError`` is a ``RuntimeError``; the subclasses also derive from the matching built-in
exception, so ``except IndexError`` and ``except TypeError`` work as Python users expect.
"""

from . import _C


class KilnError(RuntimeError):
    """Any failure inside Kiln; the message says what was expected and what came."""


class ShapeError(KilnError, ValueError):
    """Shapes that do not fit together (broadcasting, matmul, reshape, ...)."""


class DTypeError(KilnError, TypeError):
    """A dtype an op does not accept, or an unknown dtype name."""


class KilnIndexError(KilnError, IndexError):
    """An index or dimension out of range."""


class KilnValueError(KilnError, ValueError):
    """An argument with an invalid value (a negative step, an unknown mode, ...)."""


class KilnTypeError(KilnError, TypeError):
    """An argument of the wrong kind (a missing or unexpected attribute, a wrong input count)."""


class KilnNotImplementedError(KilnError, NotImplementedError):
    """A feature or dtype combination that Kiln does not provide."""


class KilnBuildError(KilnError):
    """A failed build of a custom op or plugin; the message holds the compiler's diagnostics."""


class DistributedError(KilnError):
    """A rendezvous or collective that failed: a peer exited or stalled past the timeout, a bad
    ``init_method``, ranks that disagree on the world size (see ``kiln.distributed``)."""


# Order must match kiln::ErrorKind in include/kiln/error.h.
_C._set_error_types([KilnError, ShapeError, DTypeError, KilnIndexError, KilnValueError,
                     KilnTypeError, KilnNotImplementedError, KilnBuildError,
                     DistributedError])

__all__ = ["KilnError", "ShapeError", "DTypeError", "KilnIndexError", "KilnValueError",
           "KilnTypeError", "KilnNotImplementedError", "KilnBuildError", "DistributedError"]
