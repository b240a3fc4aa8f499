"""kiln.utils: helpers around the core, as ``torch.utils`` is for PyTorch.

- ``kiln.utils.data``: datasets, samplers, collation and ``DataLoader`` (``torch.utils.data``'s
  API and semantics).
- ``kiln.utils.checkpoint``: activation checkpointing, ``checkpoint`` and
  ``checkpoint_sequential`` (``torch.utils.checkpoint``'s, both variants); import it by name, as
  in PyTorch.
"""

from . import data  # noqa: F401

__all__ = ["data"]
