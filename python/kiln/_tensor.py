"""Python-level methods of kiln.Tensor: printing and conversions that are easiest through NumPy."""

from . import _C
from ._numpy import np

Tensor = _C.Tensor


def _repr(self):
    if _C.jit.is_tracer(self):  # printing inside a jitted function: no data to show
        return f"Tracer({self.dtype!r}{list(self.shape)})"
    values = np.array2string(self.numpy(), separator=", ", prefix="tensor(")
    return f"tensor({values}, dtype={self.dtype!r})"


def _array(self, dtype=None, copy=None):
    array = self.numpy()
    if dtype is not None:
        array = array.astype(dtype, copy=False)
    return array.copy() if copy else array


def _tolist(self):
    return self.numpy().tolist()


def _iter(self):
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    return (self.select(0, i) for i in range(self.shape[0]))


Tensor.__repr__ = _repr
Tensor.__str__ = _repr
Tensor.__array__ = _array
Tensor.tolist = _tolist
Tensor.__iter__ = _iter
