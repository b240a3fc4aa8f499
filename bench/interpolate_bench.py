"""F.interpolate of float32 [8, 32, 64, 64] by 2 (bilinear, bicubic) and its adaptive average
pooling to 7 x 7 (uneven windows), Kiln vs PyTorch on one thread: best of 10 after a warm-up, the
result read.

    OMP_NUM_THREADS=1 .venv/bin/python bench/interpolate_bench.py
"""

import numpy as np
import torch

import kiln
from _timing import best_seconds  # this folder is on sys.path when run as a script

torch.set_num_threads(1)
F = kiln.nn.functional


x = np.random.default_rng(0).standard_normal((8, 32, 64, 64)).astype(np.float32)
kx, tx = kiln.tensor(x), torch.from_numpy(x)
print("| case | Kiln | PyTorch |")
for mode in ("bilinear", "bicubic"):
    ours = best_seconds(lambda: F.interpolate(kx, scale_factor=2, mode=mode).numpy(), 10)
    theirs = best_seconds(
        lambda: torch.nn.functional.interpolate(tx, scale_factor=2, mode=mode).numpy(), 10)
    print(f"| {mode} x2 [8, 32, 64, 64] | {ours * 1e3:.2f} ms | {theirs * 1e3:.2f} ms |")
ours = best_seconds(lambda: F.adaptive_avg_pool2d(kx, 7).numpy(), 10)
theirs = best_seconds(lambda: torch.nn.functional.adaptive_avg_pool2d(tx, 7).numpy(), 10)
print(f"| adaptive_avg_pool2d to 7 of [8, 32, 64, 64] | {ours * 1e3:.2f} ms "
      f"| {theirs * 1e3:.2f} ms |")
