"""A short tour of Kiln's tensor API (make demo)."""

import numpy as np

import kiln

x = kiln.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
print("x =", x)
print("shape", x.shape, "dtype", x.dtype, "strides", x.stride())

# Views share memory with their base.
row = x.select(0, 1)
col = x.T.select(0, 2)
print("row 1 =", row.tolist(), " column 2 =", col.tolist())
print("x.T contiguous?", x.T.is_contiguous(), "->", x.T.contiguous().is_contiguous())

# Zero-copy exchange with NumPy.
a = np.ones((2, 2), dtype=np.float64)
shared = kiln.from_numpy(a)
a[0, 0] = 5.0
print("from_numpy sees NumPy's write:", shared.tolist())

# Errors say what was expected and what came.
try:
    x.view(5, 5)
except kiln.ShapeError as e:
    print("ShapeError:", str(e).splitlines()[0])

print("registered ops:", len(kiln._C.list_ops()))
