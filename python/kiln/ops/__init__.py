"""kiln.ops: custom operators and the op registry.

    ops = kiln.ops.CustomOpBuilder("cpu_add", ["add3.cpp"], backend="CPU").load()
    out = ops.add3(x, y, z)

``CustomOpBuilder`` compiles C++ sources written against ``kiln/extension.h``, keeps the library
in a content-addressed cache (``~/.cache/kiln/extensions`` or ``$KILN_EXTENSION_DIR``) and loads
it as a module of Python functions. ``python -m kiln.ops build NAME SOURCES...`` builds ahead of
time from a shell. ``list_ops``, ``op_signature``, ``op_doc`` and ``op_gradient`` describe the
registered ops.
"""

from .. import _C
from .._C import list_ops  # noqa: F401
from ..errors import KilnTypeError
from ._builder import CustomOpBuilder  # noqa: F401

__all__ = ["CustomOpBuilder", "list_ops", "op_doc", "op_gradient", "op_signature"]


def op_signature(name):
    """The schema of the op ``name``, e.g. 'Add(a, b)'."""
    return _C.op_signature(_op_name(name, "op_signature"))


def op_doc(name):
    """The documentation of the op ``name``."""
    return _C.op_doc(_op_name(name, "op_doc"))


def op_gradient(name):
    """How autograd differentiates the op ``name``: 'rule' (it has a gradient rule), 'not
    differentiable' (its outputs carry no gradient) or 'missing' (backward through it raises)."""
    return _C.op_gradient(_op_name(name, "op_gradient"))


def _op_name(name, fn):
    # Checked here: the binding's own refusal is nanobind's "incompatible function arguments".
    if not isinstance(name, str):
        raise KilnTypeError(f"{fn}: name must be a str (an op's name, as list_ops() gives "
                            f"them), got {type(name).__name__} {name!r}")
    return name
