"""The argument checks kiln.nn's functions and cells share (kiln/nn/functional.py and the modules
of its 3-d layers, folds and cells): a tensor argument, a layer's operands against its weight,
unbatched input, and a layer's sizes (an int or one per spatial dimension).
"""

from .. import _C, mint as _mint
from .._checks import as_int, check_held_dtype, checked_int
from ..errors import KilnTypeError, KilnValueError, ShapeError
from ..mint._composite import _dims

__all__ = ["SPATIAL_NAMES", "batched", "check_like_weight", "checked_sizes", "checked_tensor",
           "squeezed"]

# How the messages name the spatial dimensions of a layer's input.
SPATIAL_NAMES = {1: "L", 2: "H, W", 3: "D, H, W"}

# How the messages name a sequence of that many sizes.
_HOW_MANY = {1: "one int", 2: "two ints", 3: "three ints"}


def checked_tensor(owner, name, value):
    """``value``; a KilnTypeError naming ``owner`` and ``name`` unless it is a kiln tensor."""
    if not isinstance(value, _C.Tensor):
        raise KilnTypeError(f"{owner}: expected {name} to be a kiln.Tensor, got "
                            f"{type(value).__name__}")
    return value


def check_like_weight(owner, weight, bias, *inputs):
    """Checks a layer's arguments against its ``weight`` (a kiln tensor): the ``inputs`` ((name,
    value) pairs) must be kiln tensors of the weight's dtype, ``bias`` None or one of it
    (check_held_dtype's DTypeError), as PyTorch's layers refuse mixed dtypes."""
    checked_tensor(owner, "weight", weight)
    for name, value in inputs:
        checked_tensor(owner, name, value)
    if bias is not None:
        checked_tensor(owner, "bias", bias)
    check_held_dtype(owner, weight.dtype, "the weight's", inputs, [("bias", bias)])


def squeezed(result, dim):
    """``result`` (a tensor, or a tuple of them such as a pooling's (values, indices)) without
    its dimension ``dim`` of size 1."""
    if isinstance(result, tuple):
        return tuple(_mint.squeeze(part, dim) for part in result)
    return _mint.squeeze(result, dim)


def batched(owner, input, spatial, compute):  # noqa: A002
    """``compute(input)`` for input [N, C, *spatial] (with ``spatial`` dimensions after C); for
    one sample [C, *spatial] (PyTorch's unbatched input), ``compute`` of it as a batch of one,
    returned without the batch dimension (each tensor of a tuple result). Another rank is a
    ShapeError. The convolution cells (kiln/nn/conv.py) call it to check the rank before they
    pad their input."""
    checked_tensor(owner, "input", input)
    if input.ndim == spatial + 1:
        return squeezed(compute(_mint.unsqueeze(input, 0)), 0)
    if input.ndim != spatial + 2:
        sizes = SPATIAL_NAMES[spatial]
        raise ShapeError(f"{owner}: expected input [N, C_in, {sizes}] or one sample [C_in, "
                         f"{sizes}], got {_dims(input.shape)}")
    return compute(input)


def checked_sizes(owner, name, value, count, low):
    """A layer's ``value`` (an int, or a sequence of ``count`` ints) as a tuple of ``count`` ints
    >= ``low``: a KilnTypeError for another kind of value, a KilnValueError for a sequence of
    another length or a size below ``low``. The pooling cells keep their sizes so, as PyTorch's
    1-d ones do."""
    number = as_int(value)
    if number is not None:
        sizes = (number,) * count
    elif isinstance(value, (tuple, list)):
        if len(value) != count:
            raise KilnValueError(f"{owner}: expected {name} to be an int or a sequence of "
                                 f"{_HOW_MANY[count]}, got {len(value)} sizes {value!r}")
        sizes = tuple(checked_int(owner, f"{name}[{i}]", v) for i, v in enumerate(value))
    else:
        raise KilnTypeError(f"{owner}: expected {name} to be an int or a sequence of "
                            f"{_HOW_MANY[count]}, got {type(value).__name__} {value!r}")
    if min(sizes) < low:
        raise KilnValueError(f"{owner}: expected {name} >= {low}, got {value!r}")
    return sizes
