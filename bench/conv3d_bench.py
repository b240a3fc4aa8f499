"""3-d convolutions, Kiln vs PyTorch: F.conv3d and F.conv_transpose3d of float32 volumes, the
forward alone and a training step (forward, then the gradients of the input and the weight),
the same values in both libraries, best of 10 calls after a warm-up (each reads its result).

    OMP_NUM_THREADS=2 chrt -r 10 .venv/bin/python bench/conv3d_bench.py [CASE ...]

PyTorch runs with torch.set_num_threads from OMP_NUM_THREADS (2 if unset), Kiln with its default
(which follows it). Name cases to run only those. To compare two builds, run this with PYTHONPATH
pointing at each one's python/ folder in turn.
"""

import os
import sys

import numpy as np
import torch

import kiln
from _timing import best_seconds  # this folder is on sys.path when run as a script

# name: (function, input shape, weight shape, keyword arguments)
CASES = {
    "conv3d 3x3x3": ("conv3d", (4, 32, 16, 32, 32), (32, 32, 3, 3, 3), dict(padding=1)),
    "conv3d 3x3x3 stride 2": ("conv3d", (2, 16, 32, 64, 64), (32, 16, 3, 3, 3),
                              dict(stride=2, padding=1)),
    "conv3d 1x1x1": ("conv3d", (4, 64, 16, 32, 32), (64, 64, 1, 1, 1), {}),
    "conv_transpose3d 2x2x2 stride 2": ("conv_transpose3d", (4, 32, 8, 16, 16), (32, 16, 2, 2, 2),
                                        dict(stride=2)),
    "conv_transpose3d 3x3x3": ("conv_transpose3d", (2, 32, 16, 32, 32), (32, 32, 3, 3, 3),
                               dict(padding=1)),
}


def main():
    threads = int(os.environ.get("OMP_NUM_THREADS", "2"))
    torch.set_num_threads(threads)
    chosen = set(sys.argv[1:])
    unknown = chosen - set(CASES)
    if unknown:
        sys.exit(f"unknown cases {sorted(unknown)}; choose from {list(CASES)}")
    rng = np.random.default_rng(0)
    print(f"float32, {threads} threads; ms, best of 10")
    for name, (function, x_shape, w_shape, kwargs) in CASES.items():
        if chosen and name not in chosen:
            continue
        x = rng.standard_normal(x_shape, dtype=np.float32)
        w = rng.standard_normal(w_shape, dtype=np.float32) * 0.1
        kx, kw = kiln.tensor(x, requires_grad=True), kiln.tensor(w, requires_grad=True)
        tx, tw = torch.from_numpy(x).requires_grad_(), torch.from_numpy(w).requires_grad_()
        ours = getattr(kiln.nn.functional, function)
        theirs = getattr(torch.nn.functional, function)

        def kiln_forward():
            with kiln.no_grad():
                ours(kx, kw, **kwargs).numpy()

        def torch_forward():
            with torch.no_grad():
                theirs(tx, tw, **kwargs).numpy()

        def kiln_training():
            gx, gw = kiln.autograd.grad(kiln.mint.sum(ours(kx, kw, **kwargs)), [kx, kw])
            gx.numpy(), gw.numpy()

        def torch_training():
            gx, gw = torch.autograd.grad(theirs(tx, tw, **kwargs).sum(), [tx, tw])
            gx.numpy(), gw.numpy()

        with torch.no_grad():
            want = theirs(tx, tw, **kwargs).numpy()
        with kiln.no_grad():
            got = ours(kx, kw, **kwargs).numpy()
        error = float(np.abs(got - want).max() / max(1.0, np.abs(want).max()))
        timings = [best_seconds(fn, 10) * 1e3
                   for fn in (kiln_forward, torch_forward, kiln_training, torch_training)]
        kf, tf, kt, tt = timings
        print(f"{name:32s} forward kiln {kf:8.2f} torch {tf:8.2f} ({tf / kf:5.2f}x)  "
              f"training kiln {kt:8.2f} torch {tt:8.2f} ({tt / kt:5.2f}x)  rel err {error:.1e}")


if __name__ == "__main__":
    main()
