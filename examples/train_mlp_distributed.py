"""Trains train_mlp.py's digits MLP data-parallel: one process per rank, kiln.nn.DataParallel.

    python -m kiln.distributed.run --nproc 2 examples/train_mlp_distributed.py
    python -m kiln.distributed.run --nproc 4 examples/train_mlp_distributed.py --epochs 30

Every rank holds the whole model (DataParallel copies rank 0's initial weights to the others)
and, of each global minibatch of --batch-size examples, trains on its own contiguous share.
backward() averages the gradients over the ranks with bucketed all-reduces that overlap the rest
of the backward pass, so every rank takes the same Adam step — the step one process would take on
the whole minibatch. Rank 0 prints the loss per epoch and the test accuracy.
"""

import argparse
import os
import sys
import time

import numpy as np

import kiln
import kiln.distributed as dist
from kiln import nn, optim

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_mlp import accuracy, load_data, make_mlp  # noqa: E402


def train(epochs=20, batch_size=64, lr=1e-3, seed=0):
    rank, world = dist.get_rank(), dist.get_world_size()
    if batch_size % world:
        raise SystemExit(f"--batch-size {batch_size} must be divisible by the {world} ranks")
    share = batch_size // world
    x_train, y_train, x_test, y_test = load_data(seed)
    kiln.manual_seed(seed + rank)            # different on each rank: the broadcast fixes it
    net = make_mlp()
    model = nn.DataParallel(net)
    loss_fn = nn.CrossEntropyLoss()
    opt = optim.Adam(model.trainable_params(), lr=lr)
    rng = np.random.default_rng(seed)         # the same shuffle on every rank
    batches = len(x_train) // batch_size
    start = time.perf_counter()
    for epoch in range(epochs):
        order = rng.permutation(len(x_train))
        losses = []
        for b in range(batches):
            index = order[b * batch_size + rank * share:b * batch_size + (rank + 1) * share]
            loss = loss_fn(model(kiln.tensor(x_train[index])), kiln.tensor(y_train[index]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss)
        mean_loss = kiln.tensor(float(np.mean([loss.item() for loss in losses])))
        dist.all_reduce(mean_loss, "avg")
        if rank == 0:
            print(f"epoch {epoch + 1:2d}  loss {mean_loss.item():.4f}", flush=True)
    seconds = time.perf_counter() - start
    return accuracy(net, x_test, y_test), seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64, help="global, over all ranks")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    dist.init_process_group("gloo")
    test_accuracy, seconds = train(args.epochs, args.batch_size, args.lr, args.seed)
    if dist.get_rank() == 0:
        print(f"{dist.get_world_size()} ranks: test accuracy {test_accuracy:.1%} after "
              f"{seconds:.1f} s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
