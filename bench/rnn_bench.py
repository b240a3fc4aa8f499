"""Eager LSTM and GRU, Kiln vs PyTorch: nn.LSTM(I, H) / nn.GRU(I, H) over a sequence of 50 steps,
forward under no_grad and forward + sum().backward(), the same weights in both libraries, best
of 20 calls after a warm-up (each reads its result).

    OMP_NUM_THREADS=1 .venv/bin/python bench/rnn_bench.py [LSTM] [GRU]

One thread: Kiln's and PyTorch's OpenMP runtimes interfere at two. To compare two builds, run
this with PYTHONPATH pointing at each one's python/ folder in turn (bench/RESULTS.md, "Eager
LSTM and GRU with the LstmCell / GruCell ops").
"""

import sys

import numpy as np
import torch

import kiln
from _timing import best_seconds  # this folder is on sys.path when run as a script

SIZES = [(64, 128, 16), (256, 256, 32)]  # (input size, hidden size, batch)
STEPS = 50


def cases(kind, inputs, hidden, batch):
    theirs = getattr(torch.nn, kind)(inputs, hidden)
    ours = getattr(kiln.nn, kind)(inputs, hidden)
    ours.load_state_dict(theirs.state_dict())
    x = np.random.default_rng(0).random((STEPS, batch, inputs), dtype=np.float32)
    tx = torch.from_numpy(x).requires_grad_()
    kx = kiln.tensor(x, requires_grad=True)

    def torch_forward():
        with torch.no_grad():
            theirs(tx)[0].numpy()

    def kiln_forward():
        with kiln.no_grad():
            ours(kx)[0].numpy()

    def torch_training():
        theirs(tx)[0].sum().backward()
        tx.grad.numpy()

    def kiln_training():
        ours(kx)[0].sum().backward()
        kx.grad.numpy()

    return [("forward", kiln_forward, torch_forward),
            ("forward + backward", kiln_training, torch_training)]


def main():
    torch.set_num_threads(1)
    kinds = sys.argv[1:] or ["LSTM", "GRU"]
    print(f"{'layer (I, H), batch':<40} {'Kiln ms':>9} {'PyTorch ms':>11} {'ratio':>7}")
    for kind in kinds:
        for inputs, hidden, batch in SIZES:
            for what, ours, theirs in cases(kind, inputs, hidden, batch):
                # Each call reads its result: nothing is left to wait for.
                k, t = best_seconds(ours, 20) * 1e3, best_seconds(theirs, 20) * 1e3
                name = f"{kind} ({inputs}, {hidden}), {batch}, {what}"
                print(f"{name:<40} {k:9.2f} {t:11.2f} {k / t:6.2f}x", flush=True)


if __name__ == "__main__":
    main()
