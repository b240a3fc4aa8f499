"""kiln.linalg's factorizations against PyTorch's (LAPACK) on square matrices of 32, 128 and 512
rows, float32 and float64, two threads: best of 5 (of 2 for the slowest) after a warm-up, the
result read.

    .venv/bin/python bench/linalg_bench.py
"""

import numpy as np
import torch

import kiln
from _timing import best_seconds  # this folder is on sys.path when run as a script
from kiln import _C

torch.set_num_threads(2)
linalg = _C.linalg


rng = np.random.default_rng(0)
print("| n | dtype | op | Kiln | PyTorch | ratio |")
print("|---|---|---|---|---|---|")
for n in (32, 128, 512):
    for dtype in (np.float32, np.float64):
        a = rng.standard_normal((n, n)).astype(dtype)
        spd = a @ a.T + n * np.eye(n, dtype=dtype)
        b = rng.standard_normal((n, n)).astype(dtype)
        ka, kspd, kb = kiln.tensor(a), kiln.tensor(spd), kiln.tensor(b)
        ta, tspd, tb = torch.from_numpy(a), torch.from_numpy(spd), torch.from_numpy(b)
        cases = [
            ("cholesky", lambda: linalg.cholesky_ex(kspd, False, True)[0].numpy(),
             lambda: torch.linalg.cholesky(tspd).numpy()),
            ("solve", lambda: linalg.solve_ex(ka, kb, True, True)[0].numpy(),
             lambda: torch.linalg.solve(ta, tb).numpy()),
            ("qr", lambda: linalg.qr(ka, "reduced")[1].numpy(),
             lambda: torch.linalg.qr(ta)[1].numpy()),
            ("eigh", lambda: linalg.eigh(kspd, "L")[1].numpy(),
             lambda: torch.linalg.eigh(tspd)[1].numpy()),
            ("svd", lambda: linalg.svd(ka, False)[0].numpy(),
             lambda: torch.linalg.svd(ta, full_matrices=False)[0].numpy()),
        ]
        for name, ours_fn, theirs_fn in cases:
            reps = 2 if n == 512 and name == "svd" else 5
            ours, theirs = best_seconds(ours_fn, reps) * 1e3, best_seconds(theirs_fn, reps) * 1e3
            print(f"| {n} | {np.dtype(dtype).name} | {name} | {ours:.2f} ms | {theirs:.2f} ms "
                  f"| {ours / theirs:.1f}x |", flush=True)
