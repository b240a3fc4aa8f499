"""kiln.ops: custom operators and the op registry.

    ops = kiln.ops.CustomOpBuilder("cpu_add", ["add3.cpp"], backend="CPU").load()
    out = ops.add3(x, y, z)

``CustomOpBuilder`` compiles C++ sources written against ``kiln/extension.h``, keeps the library
in a content-addressed cache (``~/.cache/kiln/extensions`` or ``$KILN_EXTENSION_DIR``) and loads
it as a module of Python functions. ``python -m kiln.ops build NAME SOURCES...`` builds ahead of
time from a shell. ``list_ops``, ``op_signature``, ``op_doc`` and ``op_gradient`` describe the
registered ops.
"""

from .._C import list_ops, op_doc, op_gradient, op_signature  # noqa: F401
from ._builder import CustomOpBuilder  # noqa: F401

__all__ = ["CustomOpBuilder", "list_ops", "op_doc", "op_gradient", "op_signature"]
