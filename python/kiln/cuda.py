"""kiln.cuda: the part of ``torch.cuda`` that CPU programs call, so that ported code such as

    device = "cuda" if kiln.cuda.is_available() else "cpu"

runs. Kiln runs on the CPU: ``is_available()`` is False and ``device_count()`` 0, and seeding the
CUDA generators (``manual_seed``, ``manual_seed_all``) does nothing, as in a PyTorch build without
CUDA (``kiln.manual_seed`` seeds Kiln's generator)."""

from ._checks import checked_int

__all__ = ["is_available", "device_count", "manual_seed", "manual_seed_all"]


def is_available():
    """False: Kiln runs on the CPU."""
    return False


def device_count():
    """0: Kiln has no CUDA devices."""
    return 0


def manual_seed(seed):
    """Does nothing (there is no CUDA generator), as torch.cuda.manual_seed without CUDA; the
    seed must still be an int."""
    checked_int("kiln.cuda.manual_seed", "seed", seed)


def manual_seed_all(seed):
    """Does nothing, as manual_seed."""
    checked_int("kiln.cuda.manual_seed_all", "seed", seed)
