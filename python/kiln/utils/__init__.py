"""kiln.utils: helpers around the core, as ``torch.utils`` is for PyTorch.

- ``kiln.utils.data``: datasets, samplers, collation and ``DataLoader`` (``torch.utils.data``'s
  API and semantics).
"""

from . import data  # noqa: F401

__all__ = ["data"]
