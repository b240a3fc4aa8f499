"""Per-op cost of the eager pipeline from Python, in each mode, next to PyTorch and NumPy.

    python bench/pipeline_bench.py              # all cases, 5 rounds
    python bench/pipeline_bench.py --quick      # smoke run
    python bench/pipeline_bench.py --cases add,chain --rounds 9

Cases (the benchmarks of the eager-runtime issue):

- add:    `kiln.mint.add(x, y)` on 16-element float32 tensors, N calls in a loop, then one
          synchronize; reported per call. torch.add and np.add on the same data.
- chain:  `x = x * 1.0001 + 0.5` ten times (20 ops with Python scalars) on 16 float32 elements;
          "chain" queues many chains and synchronizes once (throughput), "chain+read" reads the
          result (`.numpy()`) after every chain (latency: the caller waits for the kernels).
- chain+grad: "chain" from a leaf that requires grad, so autograd records every op (no
          backward): the cost of recording. Not run for NumPy.
- matmul: a loop of 64x64 float32 matmuls, each followed by a scale, with a little pure-Python
          work per iteration standing for a model's bookkeeping (`sum(range(40))`, ~0.4 us);
          kernel time and Python overlap in the asynchronous modes.
- matmul+python: the same loop with more Python per iteration (`sum(range(300))`, ~2.7 us, a
          quarter of the kernels' time): what the asynchronous modes can hide grows with it.

Every (framework, mode) runs in its own child process and the rounds alternate between them, so
a change in machine load hits all of them; the table shows best and median per-op time over the
rounds (each round is the mean over N calls after a warm-up). Run it under `chrt -r 10` on a
shared machine. PyTorch is optional (benchmark-only dependency).
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

MODES = ("sync", "2stage", "4stage")
CASES = ("add", "chain", "chain+read", "chain+grad", "matmul", "matmul+python")


def make_ops(framework, mode):
    """(add, mul, mm, from_numpy, to_numpy, sync) for one framework; kiln set to `mode`."""
    import numpy as np
    if framework == "kiln":
        import kiln
        kiln.runtime.set_pipeline(mode)
        m = kiln.mint
        return (m.add, m.mul, m.matmul, lambda a: kiln.tensor(a), lambda t: t.numpy(),
                kiln.runtime.synchronize)
    if framework == "torch":
        import torch
        torch.set_num_threads(2)
        return (torch.add, torch.mul, torch.matmul, torch.from_numpy, lambda t: t.numpy(),
                lambda: None)
    return (np.add, np.multiply, np.matmul, lambda a: a.copy(), lambda a: a, lambda: None)


def time_case(case, framework, mode, n):
    import numpy as np
    if case == "chain+grad" and framework == "numpy":
        return None  # no autograd
    add, mul, mm, from_numpy, to_numpy, sync = make_ops(framework, mode)
    rng = np.random.default_rng(0)
    x = from_numpy(rng.standard_normal(16, dtype=np.float32))
    if case == "chain+grad":
        x.requires_grad_()
    y = from_numpy(rng.standard_normal(16, dtype=np.float32))

    if case == "add":
        def run(count):
            for _ in range(count):
                add(x, y)
            sync()
        ops_per_iter = 1
    elif case in ("chain", "chain+read", "chain+grad"):
        read = case == "chain+read"

        def run(count):
            for _ in range(count):
                z = x
                for _ in range(10):
                    z = z * 1.0001 + 0.5
                if read:
                    to_numpy(z)
            sync()
        ops_per_iter = 20
    else:
        a = from_numpy(rng.standard_normal((64, 64), dtype=np.float32))
        b = from_numpy(rng.standard_normal((64, 64), dtype=np.float32))
        work = 300 if case == "matmul+python" else 40

        def run(count):
            bookkeeping = []
            for i in range(count):
                c = mul(mm(a, b), 0.5)
                bookkeeping.append((i, sum(range(work))))  # a model's Python-side work
            sync()
            return c
        ops_per_iter = 2

    iters = max(1, n // ops_per_iter)
    run(max(1, iters // 10))  # warm-up: caches, allocator, worker threads
    start = time.perf_counter()
    run(iters)
    return (time.perf_counter() - start) / (iters * ops_per_iter) * 1e6  # us per op


def child(args):
    out = {case: time_case(case, args.framework, args.mode, args.n[case]) for case in args.cases}
    print(json.dumps(out))


def versions():
    import numpy as np
    import kiln
    v = {"python": platform.python_version(), "numpy": np.__version__,
         "kiln": getattr(kiln, "__version__", "?")}
    try:
        import torch
        v["torch"] = torch.__version__
    except ImportError:
        pass
    return v


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--framework", help=argparse.SUPPRESS)
    p.add_argument("--mode", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.cases = args.cases.split(",")
    unknown = set(args.cases) - set(CASES)
    if unknown:
        p.error(f"unknown cases {sorted(unknown)}; expected some of {list(CASES)}")
    scale = 10 if args.quick else 1
    args.n = {"add": 200000 // scale, "chain": 200000 // scale, "chain+read": 100000 // scale,
              "chain+grad": 200000 // scale, "matmul": 20000 // scale,
              "matmul+python": 20000 // scale}
    if args.child:
        return child(args)

    v = versions()
    runs = [("kiln", m) for m in MODES] + [("numpy", "-")]
    if "torch" in v:
        runs.insert(3, ("torch", "-"))
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores; " +
          ", ".join(f"{k} {val}" for k, val in v.items()))
    print(f"# {args.rounds} rounds; per-op time in us, best / median over rounds")
    samples = {run: {case: [] for case in args.cases} for run in runs}
    for _ in range(args.rounds):
        for fw, mode in runs:
            cmd = [sys.executable, __file__, "--child", "--framework", fw, "--mode", mode,
                   "--cases", ",".join(args.cases)] + (["--quick"] if args.quick else [])
            res = json.loads(subprocess.run(cmd, check=True, capture_output=True,
                                            text=True).stdout)
            for case, us in res.items():
                if us is not None:
                    samples[(fw, mode)][case].append(us)

    def cell(run, case):
        s = samples[run][case]
        return f"{min(s):.3f} / {statistics.median(s):.3f}" if s else "-"

    header = "| case | " + " | ".join(f"{fw} {m}".replace(" -", "") for fw, m in runs)
    if "torch" in v:
        header += " | torch/kiln best (" + "/".join(MODES) + ")"
    print(header + " |")
    print("|---" * (header.count("|")) + "|")
    for case in args.cases:
        line = f"| {case} | " + " | ".join(cell(r, case) for r in runs)
        if "torch" in v:
            t = min(samples[("torch", "-")][case])
            line += " | " + " / ".join(f"{t / min(samples[('kiln', m)][case]):.2f}x"
                                       for m in MODES)
        print(line + " |")


if __name__ == "__main__":
    main()
