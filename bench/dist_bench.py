"""Distributed benchmarks over loopback: all-reduce bus bandwidth of Kiln (Gloo through
kiln.distributed) and torch.distributed (its Gloo backend) side by side in the same processes,
and DataParallel step time from 1 to 2 processes.

    chrt -r 10 .venv/bin/python bench/dist_bench.py                    # both parts
    .venv/bin/python bench/dist_bench.py --part allreduce --quick       # smoke run
    .venv/bin/python bench/dist_bench.py --backend mpi                  # Kiln over MPI (mpirun)

--part allreduce: 2 ranks; for each size from 4 KB to 64 MB (float32, powers of 4), Kiln and
PyTorch alternate for --rounds rounds of --iters all-reduces each (after warm-up); a Kiln call is
`dist.all_reduce(t)` followed by reading the result (its sync point), a PyTorch call is the
blocking `torch.distributed.all_reduce(t)`. Bus bandwidth is PyTorch's nccl-tests definition,
size * 2 (n - 1) / n / time; the table gives each side's best round and the ratio Kiln / PyTorch
(above 1.0: Kiln is faster).

--part dp: the digits-sized MLP 64-1024-1024-10 (1.1 M parameters), SGD, batch 64 per rank, with
kiln.nn.DataParallel at 1 and 2 ranks (weak scaling: each rank its own batch) and PyTorch DDP the
same way; the table gives the median step time and the scaling efficiency
t(1 rank) / t(2 ranks).

Each rank uses one intra-op thread (OMP_NUM_THREADS=1 and torch.set_num_threads(1)), so that two
ranks on one machine do not fight over cores. PyTorch is a benchmark-only dependency; without
it its columns read n/a.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def have_torch():
    try:
        import torch.distributed  # noqa: F401
        return True
    except ImportError:
        return False


# ------------------------------------------------------------------------------------------------
# Rank bodies (run in the children)

def allreduce_rank(args):
    import kiln
    import kiln.distributed as kdist
    kdist.init_process_group(args.backend)
    rank, world = kdist.get_rank(), kdist.get_world_size()
    torch = None
    if have_torch():
        import torch
        import torch.distributed as tdist
        torch.set_num_threads(1)
        tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.torch_port}",
                                 rank=rank, world_size=world)
    results = {}
    for size in SIZES if not args.quick else SIZES[:3]:
        n = size // 4
        iters = max(3, min(args.iters, (64 << 20) // size))
        kt = kiln.mint.ones(n)
        tt = torch.ones(n) if torch else None

        def kiln_round():
            start = time.perf_counter()
            for _ in range(iters):
                kdist.all_reduce(kt)
                kiln.runtime.synchronize()
            return (time.perf_counter() - start) / iters

        def torch_round():
            start = time.perf_counter()
            for _ in range(iters):
                tdist.all_reduce(tt)
            return (time.perf_counter() - start) / iters

        kiln_round()
        if torch:
            torch_round()
        k_times, t_times = [], []
        for _ in range(args.rounds):
            kdist.barrier()
            k_times.append(kiln_round())
            if torch:
                tdist.barrier()
                t_times.append(torch_round())
        results[size] = {"kiln": min(k_times), "torch": min(t_times) if t_times else None}
    if rank == 0:
        print("RESULT " + json.dumps({str(k): v for k, v in results.items()}))
    kdist.destroy_process_group()
    if torch:
        tdist.destroy_process_group()


def mlp_batches(steps, batch, seed):
    import numpy as np
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((batch, 64), dtype=np.float32),
             rng.integers(0, 10, batch).astype(np.int64)) for _ in range(steps)]


def median_step(model, opt, loss_fn, to_tensor, batches, warmup):
    """The median time of a training step (forward, backward, update, reading the loss) after
    `warmup` steps; the same code drives Kiln and PyTorch."""
    steps = []
    for i, (x, y) in enumerate(batches):
        start = time.perf_counter()
        loss = loss_fn(model(to_tensor(x)), to_tensor(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
        if i >= warmup:
            steps.append(time.perf_counter() - start)
    return statistics.median(steps)


def dp_rank(args):
    import kiln
    import kiln.distributed as kdist
    kdist.init_process_group(args.backend)
    rank, world = kdist.get_rank(), kdist.get_world_size()
    batches = mlp_batches(args.dp_warmup + args.dp_steps, 64, seed=rank)
    times = {}
    kiln.manual_seed(0)
    net = kiln.nn.Sequential(kiln.nn.Linear(64, 1024), kiln.nn.ReLU(), kiln.nn.Linear(1024, 1024),
                             kiln.nn.ReLU(), kiln.nn.Linear(1024, 10))
    model = kiln.nn.DataParallel(net)
    opt = kiln.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = kiln.nn.CrossEntropyLoss()
    times["kiln"] = median_step(model, opt, loss_fn, kiln.tensor, batches, args.dp_warmup)
    kdist.destroy_process_group()
    if have_torch():
        import torch
        import torch.distributed as tdist
        torch.set_num_threads(1)
        tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.torch_port}",
                                 rank=rank, world_size=world)
        torch.manual_seed(0)
        tnet = torch.nn.Sequential(torch.nn.Linear(64, 1024), torch.nn.ReLU(),
                                   torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                                   torch.nn.Linear(1024, 10))
        tmodel = torch.nn.parallel.DistributedDataParallel(tnet)
        topt = torch.optim.SGD(tmodel.parameters(), lr=0.01)
        tloss = torch.nn.CrossEntropyLoss()
        times["torch"] = median_step(tmodel, topt, tloss, torch.from_numpy, batches,
                                     args.dp_warmup)
        tdist.destroy_process_group()
    if rank == 0:
        print("RESULT " + json.dumps(times))


# ------------------------------------------------------------------------------------------------
# The parent: launches the ranks and prints tables

def launch(part, nproc, args):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if args.backend == "mpi":
        starter = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(nproc),
                   "-x", "OMP_NUM_THREADS", sys.executable]
    else:
        starter = [sys.executable, "-m", "kiln.distributed.run", "--nproc", str(nproc),
                   "--master-port", str(free_port())]
    cmd = starter + [__file__, "--rank-body", part, "--backend", args.backend,
           "--torch-port", str(free_port()), "--iters", str(args.iters), "--rounds",
           str(args.rounds), "--dp-steps", str(args.dp_steps), "--dp-warmup", str(args.dp_warmup)]
    if args.quick:
        cmd.append("--quick")
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        sys.exit(f"{part} on {nproc} ranks failed:\n{done.stdout}\n{done.stderr}")
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def human(size):
    return f"{size >> 20} MB" if size >= 1 << 20 else f"{size >> 10} KB"


def report_allreduce(args):
    results = launch("allreduce", 2, args)
    n = 2
    print(f"\nAll-reduce bus bandwidth, 2 ranks over loopback, float32, Kiln over {args.backend} "
          "(GB/s; best of rounds)\n")
    print("| size | Kiln | PyTorch (gloo) | Kiln / PyTorch |")
    print("|---:|---:|---:|---:|")
    for size_text, r in results.items():
        size = int(size_text)
        factor = size * 2 * (n - 1) / n / 1e9
        k = factor / r["kiln"]
        t = factor / r["torch"] if r["torch"] else None
        ratio = f"{k / t:.2f}x" if t else "n/a"
        tt = f"{t:.2f}" if t else "n/a"
        print(f"| {human(size)} | {k:.2f} | {tt} | {ratio} |")


def report_dp(args):
    one = launch("dp", 1, args)
    two = launch("dp", 2, args)
    print("\nDataParallel MLP step (64-1024-1024-10, batch 64 per rank, SGD), median step time\n")
    print("| framework | 1 rank | 2 ranks | efficiency t1/t2 |")
    print("|---|---:|---:|---:|")
    for name in ("kiln", "torch"):
        if name not in one:
            print(f"| {name} | n/a | n/a | n/a |")
            continue
        print(f"| {name} | {one[name] * 1e3:.2f} ms | {two[name] * 1e3:.2f} ms | "
              f"{one[name] / two[name]:.2f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["allreduce", "dp", "both"], default="both")
    parser.add_argument("--backend", choices=["gloo", "mpi"], default="gloo",
                        help="Kiln's backend (mpi: the ranks are started by mpirun)")
    parser.add_argument("--quick", action="store_true", help="small sizes, few steps")
    parser.add_argument("--iters", type=int, default=50, help="all-reduces per round (max)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dp-steps", type=int, default=40)
    parser.add_argument("--dp-warmup", type=int, default=5)
    parser.add_argument("--rank-body", choices=["allreduce", "dp"], help=argparse.SUPPRESS)
    parser.add_argument("--torch-port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.iters, args.rounds, args.dp_steps, args.dp_warmup = 5, 2, 5, 2
    if args.rank_body == "allreduce":
        return allreduce_rank(args)
    if args.rank_body == "dp":
        return dp_rank(args)
    print(f"# {time.strftime('%Y-%m-%d')} {os.uname().machine}, {os.cpu_count()} cores; "
          f"torch {'present' if have_torch() else 'absent'}")
    if args.part in ("allreduce", "both"):
        report_allreduce(args)
    if args.part in ("dp", "both"):
        report_dp(args)


if __name__ == "__main__":
    main()
