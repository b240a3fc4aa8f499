"""In-place writes under autograd, next to their out-of-place forms and PyTorch: a residual block's
training step (conv, batch norm, the residual sum in place or not, relu), and a chain of small
recorded ops (the cost autograd's recording adds per call).

    OMP_NUM_THREADS=1 python bench/inplace_bench.py [--reps 30]

Prints the best time of `reps` runs per case, in ms (us per op for the chain).
"""

import argparse

import numpy as np
import torch

import kiln
from _timing import best_seconds  # this folder is on sys.path when run as a script


def block_step(lib, conv, bn, x, in_place):
    out = bn(conv(x))
    if in_place:
        out += x
    else:
        out = out + x
    out = lib.relu(out)
    out.sum().backward()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    data = np.random.default_rng(0).standard_normal((8, 32, 16, 16)).astype(np.float32)
    conv, bn = kiln.nn.Conv2d(32, 32, 3, padding=1), kiln.nn.BatchNorm2d(32)
    x = kiln.tensor(data).requires_grad_()
    rows = []
    for in_place in (False, True):
        ms = best_seconds(lambda: block_step(kiln.mint, conv, bn, x, in_place), args.reps,
                          kiln.runtime.synchronize) * 1e3
        rows.append((f"residual block step, {'out += x' if in_place else 'out = out + x'}",
                     ms, None))
    torch.set_num_threads(1)
    tconv, tbn = torch.nn.Conv2d(32, 32, 3, padding=1), torch.nn.BatchNorm2d(32)
    tx = torch.tensor(data, requires_grad=True)
    for i, in_place in enumerate((False, True)):
        ms = best_seconds(lambda: block_step(torch, tconv, tbn, tx, in_place), args.reps) * 1e3
        rows[i] = rows[i][:2] + (ms,)
    w = kiln.tensor(np.ones(16, np.float32)).requires_grad_()

    def chain():
        z = w * 1.0
        for _ in range(100):
            z = z * 1.0001 + 0.5

    us_per_op = best_seconds(chain, args.reps, kiln.runtime.synchronize) / 200 * 1e6
    rows.append(("recorded chain of 200 small ops (us per op)", us_per_op, None))
    for name, ours, theirs in rows:
        torch_part = "" if theirs is None else f"   PyTorch {theirs:8.3f}"
        print(f"{name:50s} Kiln {ours:8.3f}{torch_part}")


if __name__ == "__main__":
    main()
