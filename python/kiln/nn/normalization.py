"""kiln.nn.LayerNorm and kiln.nn.RMSNorm over the trailing ``normalized_shape`` dimensions.

    ln = kiln.nn.LayerNorm(512)                   # weight ones, bias zeros, eps 1e-5
    rms = kiln.nn.RMSNorm([8, 64], eps=1e-6)       # weight ones

``normalized_shape`` is an int or a sequence of ints. With ``elementwise_affine=False`` there
are no parameters; LayerNorm's ``bias=False`` keeps the weight only (as in PyTorch).
"""

from .. import _C
from . import init
from .cell import Cell
from .parameter import Parameter

__all__ = ["LayerNorm", "RMSNorm"]


def _shape(normalized_shape):
    if isinstance(normalized_shape, int):
        return (normalized_shape,)
    return tuple(normalized_shape)


class _Norm(Cell):
    def __init__(self, normalized_shape, eps, elementwise_affine, bias, dtype):
        super().__init__()
        self.normalized_shape = _shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        dtype = dtype or _C.dtype.float32
        affine = elementwise_affine
        self.weight = Parameter(_C.mint.empty(self.normalized_shape, dtype=dtype)) if affine else None
        self.bias = (Parameter(_C.mint.empty(self.normalized_shape, dtype=dtype))
                     if affine and bias else None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class LayerNorm(_Norm):
    """LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, dtype=None):
    (x - mean) / sqrt(var + eps) over the trailing ``normalized_shape`` dimensions, times
    ``weight`` (ones) plus ``bias`` (zeros), as PyTorch's LayerNorm. See kiln.nn.normalization's
    documentation."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, dtype=None):
        super().__init__(normalized_shape, eps, elementwise_affine, bias, dtype)

    def construct(self, x):
        return _C.mint.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class RMSNorm(_Norm):
    """RMSNorm(normalized_shape, eps=1e-6, elementwise_affine=True, dtype=None): x / sqrt(mean(x**2)
    + eps) over the trailing ``normalized_shape`` dimensions, times ``weight`` (ones). The default
    eps is 1e-6 for every dtype, where torch.nn.RMSNorm's (None) is finfo(float32).eps = 1.19e-7
    below float64 and finfo(float64).eps for float64: pass ``eps`` to match a torch model."""

    def __init__(self, normalized_shape, eps=1e-6, elementwise_affine=True, dtype=None):
        super().__init__(normalized_shape, eps, elementwise_affine, False, dtype)

    def construct(self, x):
        return _C.mint.rms_norm(x, self.normalized_shape, self.weight, self.eps)
