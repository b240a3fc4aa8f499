"""F.interpolate of float32 [8, 32, 64, 64] by 2 (bilinear, bicubic) and its adaptive average
pooling to 7 x 7 (uneven windows), Kiln vs PyTorch on one thread: best of 10 after a warm-up, the
result read.

    OMP_NUM_THREADS=1 .venv/bin/python bench/interpolate_bench.py
"""

import time

import numpy as np
import torch

import kiln

torch.set_num_threads(1)
F = kiln.nn.functional


def best(f, n=10):
    f()
    b = 1e9
    for _ in range(n):
        s = time.perf_counter()
        f()
        b = min(b, time.perf_counter() - s)
    return b * 1e3


x = np.random.default_rng(0).standard_normal((8, 32, 64, 64)).astype(np.float32)
kx, tx = kiln.tensor(x), torch.from_numpy(x)
print("| case | Kiln | PyTorch |")
for mode in ("bilinear", "bicubic"):
    ours = best(lambda: F.interpolate(kx, scale_factor=2, mode=mode).numpy())
    theirs = best(lambda: torch.nn.functional.interpolate(tx, scale_factor=2, mode=mode).numpy())
    print(f"| {mode} x2 [8, 32, 64, 64] | {ours:.2f} ms | {theirs:.2f} ms |")
ours = best(lambda: F.adaptive_avg_pool2d(kx, 7).numpy())
theirs = best(lambda: torch.nn.functional.adaptive_avg_pool2d(tx, 7).numpy())
print(f"| adaptive_avg_pool2d to 7 of [8, 32, 64, 64] | {ours:.2f} ms | {theirs:.2f} ms |")
