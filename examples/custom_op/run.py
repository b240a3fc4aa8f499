"""Builds the custom-op examples with kiln.ops.CustomOpBuilder and checks them against NumPy.

    python examples/custom_op/run.py        (or `make demo`)

The first run compiles (about a second for add3; the five sources together compile in parallel);
later runs load from the cache in ~/.cache/kiln/extensions (or $KILN_EXTENSION_DIR) without
compiling.
"""

import time
from pathlib import Path

import numpy as np

import kiln

HERE = Path(__file__).resolve().parent
rng = np.random.default_rng(0)


def build(name, sources):
    start = time.perf_counter()
    builder = kiln.ops.CustomOpBuilder(name, [str(HERE / s) for s in sources])
    ops = builder.load()
    how = "compiled" if builder.compiled else "loaded from the cache"
    print(f"{name}: {how} in {time.perf_counter() - start:.3f} s ({', '.join(ops.__all__)})")
    return ops


def check(what, got, expected, tol=1e-4):
    error = float(np.max(np.abs(np.asarray(got) - np.asarray(expected))))
    print(f"  {what:<44} max |kiln - numpy| = {error:.2e}")
    assert error <= tol * max(1.0, float(np.max(np.abs(expected)))), what


def pairs(z):
    return np.stack([z.real, z.imag], axis=-1).astype(np.float32)


# The tutorial op on its own, exactly as DESIGN.md writes it.
ops = build("cpu_add", ["add3.cpp"])
x, y, z = (rng.standard_normal(16).astype(np.float32) for _ in range(3))
check("add3(x, y, z)", ops.add3(kiln.tensor(x), kiln.tensor(y), kiln.tensor(z)).numpy(), x + y + z)

# Every example in one library: several sources, each with its own KILN_EXTENSION block.
ops = build("custom_op_examples", ["add3.cpp", "linear_gelu.cpp", "gemm.cpp", "fft.cpp",
                                   "two_outputs.cpp"])
a = rng.standard_normal((8, 32)).astype(np.float32)
w = rng.standard_normal((16, 32)).astype(np.float32)
b = rng.standard_normal(16).astype(np.float32)
h = a @ w.T + b
gelu = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))
check("linear_gelu (oneDNN matmul + GELU post-op)",
      ops.linear_gelu(kiln.tensor(a), kiln.tensor(w), kiln.tensor(b)).numpy(), gelu)
c = rng.standard_normal((8, 16)).astype(np.float32)
m = rng.standard_normal((32, 16)).astype(np.float32)
check("addmm (BLAS sgemm)", ops.addmm(kiln.tensor(c), kiln.tensor(a), kiln.tensor(m), 2.0, 0.5).numpy(),
      2.0 * a @ m + 0.5 * c)
signal = rng.standard_normal((4, 64)).astype(np.float32)
spectrum = ops.rfft(kiln.tensor(signal), "backward")
check("rfft (FFTW, complex as a trailing 2)", spectrum.numpy(), pairs(np.fft.rfft(signal)))
check("irfft(rfft(x)) == x", ops.irfft(spectrum, 64, "backward").numpy(), signal)
s, co = ops.sin_cos(kiln.tensor(a))
check("sin_cos -> (sin, cos), two outputs", np.stack([s.numpy(), co.numpy()]),
      np.stack([np.sin(a), np.cos(a)]))
pieces = ops.split_rows(kiln.tensor(a), 4)
check("split_rows -> a list of 4 tensors", np.stack([p.numpy() for p in pieces]),
      np.stack(np.split(a, 4)))
mean, var = ops.row_moments(kiln.tensor(a), correction=1)
check("row_moments (an OpDef registered with def_op)", var.numpy(), a.var(-1, ddof=1))
print("  RowMoments is a registered op:", kiln.ops.op_signature("RowMoments"))
