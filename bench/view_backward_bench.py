"""Backward of Tensor view methods (recorded as AsStrided), Kiln vs PyTorch: the time of
sum(view(x)).backward() on x float32 [1024, 1024], median of 10 after a warm-up, gradient read.

    OMP_NUM_THREADS=1 .venv/bin/python bench/view_backward_bench.py

The sum's gradient is one value broadcast, which the view's rule scatters back into x's layout:
the case that exposed a copy of a broadcast value into a transposed destination walking it row
by row, and expands summed by a scatter-add (bench/RESULTS.md, "Backward of view methods").
"""

import os
import statistics

import numpy as np
import torch

import kiln
from _timing import call_times  # this folder is on sys.path when run as a script

mint = kiln.mint


def backward_of(sum_fn, x, view):
    def run():
        x.grad = None
        sum_fn(view(x)).backward()
        x.grad.numpy()
    return run


def main():
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    a = np.random.default_rng(0).standard_normal((1024, 1024), dtype=np.float32)
    xk = kiln.tensor(a).requires_grad_(True)
    xt = torch.from_numpy(a.copy()).requires_grad_(True)
    cases = {
        "t": (lambda x: x.t(), lambda x: x.t()),
        "permute": (lambda x: x.permute(1, 0), lambda x: x.permute(1, 0)),
        "expand": (lambda x: x.reshape(1024, 1, 1024).expand(1024, 3, 1024),
                   lambda x: x.reshape(1024, 1, 1024).expand(1024, 3, 1024)),
        "repeat_interleave": (lambda x: mint.repeat_interleave(x, 3, 1),
                              lambda x: torch.repeat_interleave(x, 3, 1)),
        "tile": (lambda x: mint.tile(x, (2, 3)), lambda x: torch.tile(x, (2, 3))),
        "diagonal": (lambda x: mint.diagonal(x) * 1.0, lambda x: torch.diagonal(x) * 1.0),
        "slice step 2": (lambda x: x[:, ::2], lambda x: x[:, ::2]),
    }
    print(f"kiln {kiln.__version__}, torch {torch.__version__}, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    for name, (kiln_view, torch_view) in cases.items():
        k = statistics.median(call_times(backward_of(mint.sum, xk, kiln_view), 10)) * 1e3
        t = statistics.median(call_times(backward_of(torch.sum, xt, torch_view), 10)) * 1e3
        print(f"{name:18s} kiln {k:8.3f} ms  torch {t:8.3f} ms  torch/kiln {t / k:6.2f}x")


if __name__ == "__main__":
    main()
