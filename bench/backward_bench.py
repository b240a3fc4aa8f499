"""Backward cost of single ops, Kiln vs PyTorch: for each case, the time of grad(y, x, g) of one
recorded op call (the graph retained, so only the backward runs), best of 10 after a warm-up;
and, for reference, the forward call itself on an x that requires grad (as in training).

    OMP_NUM_THREADS=1 chrt -r 10 .venv/bin/python bench/backward_bench.py [CASE ...]

Both frameworks run in this process on the same inputs; PyTorch with torch.set_num_threads from
OMP_NUM_THREADS (2 if unset), Kiln with its default (which follows OMP_NUM_THREADS). A case where
Kiln takes more than 1.5x PyTorch's time is marked "slow". Only x requires grad; the other tensor
operands (weights, indices) do not, as a layer's input data would not. Name cases to run only
those.
"""

import os
import sys

import numpy as np
import torch

import kiln
from _timing import best_seconds  # this folder is on sys.path when run as a script

mint = kiln.mint
F = torch.nn.functional
RNG = np.random.default_rng(0)


def array(*shape):
    return RNG.standard_normal(shape, dtype=np.float32)


def cases():
    """name: (x's shape, Kiln function of x, PyTorch function of x)."""
    w = array(512, 512)
    wk, wt = kiln.tensor(w), torch.from_numpy(w.copy())
    c = array(32, 16, 3, 3)
    ck, ct = kiln.tensor(c), torch.from_numpy(c.copy())
    rows = RNG.integers(0, 1000, size=8192)
    cols = RNG.integers(0, 1024, size=(1024, 64))
    rk, rt = kiln.tensor(rows), torch.from_numpy(rows)
    ik, it = kiln.tensor(cols), torch.from_numpy(cols)
    square = (1024, 1024)
    labels = RNG.integers(0, 1024, size=1024)
    lk, lt = kiln.tensor(labels), torch.from_numpy(labels)
    return {
        "matmul": ((256, 512), lambda x: mint.matmul(x, wk), lambda x: x @ wt),
        "layer_norm": ((1024, 512), lambda x: mint.layer_norm(x, [512]),
                       lambda x: F.layer_norm(x, [512])),
        "gelu": (square, mint.gelu, F.gelu),
        "softmax dim0": (square, lambda x: mint.softmax(x, 0), lambda x: torch.softmax(x, 0)),
        "log_softmax": (square, lambda x: mint.log_softmax(x, 1),
                        lambda x: torch.log_softmax(x, 1)),
        "sum dim0": (square, lambda x: mint.sum(x, 0), lambda x: torch.sum(x, 0)),
        "var dim0": (square, lambda x: mint.var(x, 0), lambda x: torch.var(x, 0)),
        "amax dim1": (square, lambda x: mint.amax(x, 1), lambda x: torch.amax(x, 1)),
        "cumsum dim1": (square, lambda x: mint.cumsum(x, 1), lambda x: torch.cumsum(x, 1)),
        "transpose*2": (square, lambda x: mint.transpose(x, 0, 1) * 2, lambda x: x.t() * 2),
        "index_select": ((1000, 256), lambda x: mint.index_select(x, 0, rk),
                         lambda x: torch.index_select(x, 0, rt)),
        "gather dim1": (square, lambda x: mint.gather(x, 1, ik), lambda x: torch.gather(x, 1, it)),
        "cat": (square, lambda x: mint.cat([x, x], 1), lambda x: torch.cat([x, x], 1)),
        "conv2d": ((16, 16, 32, 32), lambda x: mint.conv2d(x, ck, padding=1),
                   lambda x: F.conv2d(x, ct, padding=1)),
        "max_pool2d": ((16, 32, 64, 64), lambda x: mint.max_pool2d(x, 2),
                       lambda x: F.max_pool2d(x, 2)),
        "avg_pool2d": ((16, 32, 64, 64), lambda x: mint.avg_pool2d(x, 2),
                       lambda x: F.avg_pool2d(x, 2)),
        "relu": (square, mint.relu, torch.relu),
        "sigmoid": (square, mint.sigmoid, torch.sigmoid),
        "tanh": (square, mint.tanh, torch.tanh),
        "expand+mul": ((1024, 1), lambda x: mint.expand(x, [1024, 1024]) * 3,
                       lambda x: x.expand(1024, 1024) * 3),
        "slice": (square, lambda x: x[:, 100:900] * 1, lambda x: x[:, 100:900] * 1),
        "pad": ((64, 64, 64), lambda x: mint.pad(x, [1, 1, 1, 1]),
                lambda x: F.pad(x, [1, 1, 1, 1])),
        "silu": (square, mint.silu, F.silu),
        "gelu tanh": (square, lambda x: mint.gelu(x, approximate="tanh"),
                      lambda x: F.gelu(x, approximate="tanh")),
        "cross_entropy": (square, lambda x: mint.cross_entropy(x, lk),
                          lambda x: F.cross_entropy(x, lt)),
        "logsumexp dim0": (square, lambda x: mint.logsumexp(x, 0), lambda x: torch.logsumexp(x, 0)),
        "pow 3": (square, lambda x: mint.pow(x, 3.0), lambda x: torch.pow(x, 3.0)),
        "dropout": (square, lambda x: mint.dropout(x, 0.5, True),
                    lambda x: F.dropout(x, 0.5, True)),
        "mse_loss": (square, lambda x: mint.mse_loss(x, x * 0.5), lambda x: F.mse_loss(x, x * 0.5)),
        "max dim1": (square, lambda x: mint.max(x, 1)[0], lambda x: torch.max(x, 1)[0]),
    }


def main():
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    print(f"kiln {kiln.__version__}, torch {torch.__version__}, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    chosen = set(sys.argv[1:])
    for name, (shape, kiln_fn, torch_fn) in cases().items():
        if chosen and name not in chosen:
            continue
        x = array(*shape)
        xk = kiln.tensor(x).requires_grad_()
        xt = torch.from_numpy(x.copy()).requires_grad_()
        fk = best_seconds(lambda: kiln_fn(xk), 10, kiln.runtime.synchronize) * 1e3
        ft = best_seconds(lambda: torch_fn(xt), 10) * 1e3
        yk, yt = kiln_fn(xk), torch_fn(xt)
        g = RNG.standard_normal(tuple(yk.shape)).astype(np.float32)
        gk, gt = kiln.tensor(g), torch.from_numpy(g)
        k = best_seconds(lambda: kiln.autograd.grad(yk, xk, gk, retain_graph=True), 10,
                         kiln.runtime.synchronize) * 1e3
        t = best_seconds(lambda: torch.autograd.grad(yt, xt, gt, retain_graph=True), 10) * 1e3
        slow = "  slow" if k > 1.5 * t else ""
        print(f"{name:14s} kiln {k:8.3f} ms  torch {t:8.3f} ms  torch/kiln {t / k:6.2f}x{slow:6s}"
              f"  forward: kiln {fk:8.3f} ms  torch {ft:8.3f} ms  {ft / fk:6.2f}x")


if __name__ == "__main__":
    main()
