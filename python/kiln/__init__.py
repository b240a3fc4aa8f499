"""Kiln: a deep-learning framework core that users extend without forking it.

    import kiln
    x = kiln.tensor([[1.0, 2.0], [3.0, 4.0]])
    y = kiln.mint.softmax(x @ x.T, dim=-1)
    print(y.numpy())
"""

import os as _os

from . import _C
from .errors import (DistributedError, DTypeError, KilnBuildError, KilnError,  # noqa: F401
                     KilnIndexError, KilnNotImplementedError, KilnTypeError, KilnValueError,
                     ShapeError)
from . import _tensor  # noqa: F401  (installs Python-level Tensor methods)
from . import _indexing  # noqa: F401  (installs Tensor.__getitem__ / __setitem__)
from . import _tensor_methods  # noqa: F401  (PyTorch's method spellings: x.zero_(), x.mT, ...)
from ._device import device  # noqa: F401  (also installs Tensor.device)
from . import mint  # noqa: F401
from . import linalg  # noqa: F401  (torch.linalg's functions)
from . import special  # noqa: F401  (torch.special's names for kiln.mint functions)
from . import runtime  # noqa: F401
from . import graph  # noqa: F401
from . import autograd  # noqa: F401
from . import testing  # noqa: F401
from .autograd import (enable_grad, inference_mode, is_grad_enabled, no_grad,  # noqa: F401
                       set_grad_enabled, value_and_grad)
from .autograd import functional_grad as grad  # noqa: F401
from .jit import jit  # noqa: F401  (kiln.jit is the decorator; its module is kiln/jit.py)
from .runtime import get_num_threads, set_num_threads  # noqa: F401  (torch.set_num_threads)
from ._C import (Tensor, dtype, from_numpy, get_default_dtype, promote_types,  # noqa: F401
                 set_default_dtype, tensor)  # torch.set_default_dtype / get_default_dtype
from ._tensor import as_tensor, is_tensor  # noqa: F401
from ._type_info import finfo, iinfo  # noqa: F401
from ._C.mint import (Generator, default_generator, from_dlpack, get_rng_state,  # noqa: F401
                      initial_seed, manual_seed, seed, set_rng_state)
from . import nn, optim  # noqa: F401  (after autograd, which they use)
from . import distributions, func  # noqa: F401  (after nn, which they use)
from . import distributed  # noqa: F401
from . import cuda  # noqa: F401  (torch.cuda's is_available / device_count: no CUDA here)
from . import amp  # noqa: F401  (torch.autocast's mixed precision)
from .amp import autocast  # noqa: F401
from .serialization import load, load_metadata, save  # noqa: F401

__version__ = "0.6.0"

bool_ = dtype.bool
int8 = dtype.int8
uint8 = dtype.uint8
int16 = dtype.int16
int32 = dtype.int32
int64 = dtype.int64
float16 = dtype.float16
bfloat16 = dtype.bfloat16
float32 = dtype.float32
float64 = dtype.float64
half = float16
float = float32  # noqa: A001  (as torch.float)
double = float64
long = int64
int = int32  # noqa: A001
bool = bool_  # noqa: A001  (as torch.bool; kiln.bool_ stays, NumPy's spelling)

_PACKAGE_DIR = _os.path.dirname(_os.path.abspath(__file__))


def __getattr__(name):
    # kiln.ops and kiln.utils (kiln.utils.data: datasets, samplers, DataLoader, which use NumPy)
    # load on first use: `import kiln` stays fast for programs without them.
    if name in ("ops", "utils"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'kiln' has no attribute {name!r}")


def get_include():
    """The folder that holds ``kiln/*.h``, for compiling custom ops and plugins."""
    installed = _os.path.join(_PACKAGE_DIR, "include")
    if _os.path.isdir(installed):
        return installed
    # A development build imports from the source tree: python/kiln -> include/.
    return _os.path.normpath(_os.path.join(_PACKAGE_DIR, "..", "..", "include"))


def get_cmake_dir():
    """The folder holding ``KilnConfig.cmake``: pass it as ``-DKiln_DIR=...``."""
    return _os.path.join(_PACKAGE_DIR, "share", "cmake", "Kiln")
