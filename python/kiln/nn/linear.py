"""kiln.nn.Linear and kiln.nn.Dense: y = x @ weight.T + bias.

    fc = kiln.nn.Linear(64, 10)                 # weight [10, 64], bias [10] (PyTorch's names)
    fc = kiln.nn.Dense(64, 10, activation="relu", has_bias=True)   # MindSpore's names

Both initialise as PyTorch's Linear does: weight ~ kaiming_uniform_(a=sqrt(5)), that is
U(-1/sqrt(in), 1/sqrt(in)), and bias ~ U(-1/sqrt(in), 1/sqrt(in)). ``dtype`` (default: the default
dtype) is the parameters' dtype, which the input must have: another one (a float64 batch into
float32 parameters, an integer batch) is a DTypeError naming both, as in PyTorch (F.linear). Dense's
``activation`` is None, a Cell, or one of "relu", "gelu", "silu", "tanh", "sigmoid", applied after
the affine map.
"""

import math

from .. import _C
from . import functional as F
from . import init
from .activation import activation_cell
from .cell import Cell
from .parameter import Parameter

__all__ = ["Linear", "Dense"]

_mint = _C.mint


class Linear(Cell):
    """Linear(in_features, out_features, bias=True, dtype=None): y = x @ weight.T + bias, from
    x [..., in_features] to [..., out_features]; weight [out_features, in_features], bias
    [out_features] (none with ``bias=False``), of ``dtype`` (default: the default dtype).
    Initialised as PyTorch's Linear (see kiln.nn.linear's documentation)."""

    def __init__(self, in_features, out_features, bias=True, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(_mint.empty(out_features, in_features, dtype=dtype))
        self.bias = Parameter(_mint.empty(out_features, dtype=dtype)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def construct(self, x):
        weight, bias = self.weight, self.bias
        # The common call (tensors of one dtype) skips F.linear's checks, which cost a third of
        # an eager call of a small layer; any other call takes F.linear, which raises its error.
        if isinstance(x, _C.Tensor) and x.dtype == weight.dtype \
                and (bias is None or bias.dtype == weight.dtype):
            return _mint.linear(x, weight, bias)
        return F.linear(x, weight, bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Dense(Linear):
    """MindSpore's Dense: Linear with ``has_bias`` and an optional activation."""

    def __init__(self, in_channels, out_channels, has_bias=True, activation=None, dtype=None):
        super().__init__(in_channels, out_channels, bias=has_bias, dtype=dtype)
        self.activation = activation_cell(activation)

    def construct(self, x):
        y = super().construct(x)
        return y if self.activation is None else self.activation(y)
