"""A short tour of Kiln's tensor API and built-in ops (make demo)."""

import numpy as np

import kiln
from kiln import mint

kiln.manual_seed(0)
x = kiln.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
print("x =", x)
print("shape", x.shape, "dtype", x.dtype, "strides", x.stride())

# Views share memory with their base; indexing follows NumPy.
print("x[1] =", x[1].tolist(), " x[:, 2] =", x[:, 2].tolist(), " x[x > 6] =", x[x > 6].tolist())
print("x.T contiguous?", x.T.is_contiguous(), "->", x.T.contiguous().is_contiguous())

# Zero-copy exchange with NumPy.
a = np.ones((2, 2), dtype=np.float64)
shared = kiln.from_numpy(a)
a[0, 0] = 5.0
print("from_numpy sees NumPy's write:", shared.tolist())

# Ops with broadcasting and weak Python scalars.
w = mint.randn(4, 3)
h = mint.gelu(x @ w * 0.5 + 1)
print("gelu(x @ w * 0.5 + 1) ->", h.shape, h.dtype)
print("softmax rows sum to", mint.sum(mint.softmax(h, dim=-1), dim=-1).tolist())

# Errors say what was expected and what came.
try:
    x + kiln.tensor([1.0, 2.0, 3.0])
except kiln.ShapeError as e:
    print("ShapeError:", str(e).splitlines()[0])

print("registered ops:", len(kiln._C.list_ops()))
