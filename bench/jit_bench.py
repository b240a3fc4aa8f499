"""kiln.jit's costs from Python.

    python bench/jit_bench.py                 # 7 rounds
    python bench/jit_bench.py --rounds 3 --calls 5000
    python bench/jit_bench.py --null-backend build/bench/libjit_null_backend.so

Cases:

- call: a cached call of a 5-op function of two float32[16] tensors (add, mul, sin, sub, relu),
  per call: run eagerly (five kiln.mint calls), jitted on kiln_cpu (which runs the graph op by op
  through the eager pipeline), and jitted on a backend that computes nothing
  (bench/jit/null_backend.cc, built by `make build` into build/bench/): that last one is the jit's
  own cost -- argument walk, cache lookup, backend dispatch, result objects. A plain Python
  function of the same two arguments that returns one of them is the floor of any Python call.
  Each round times N calls and one synchronize; the rounds alternate between the variants.
- build: tracing and building a 1,000-op function (250 x sin, * 1.0001, + y, - 0.5 on float32[16])
  on kiln_cpu: the first call of a fresh kiln.jit (trace + build + run) minus a cached call (run).
  `graph()` (trace and print, no build) is shown too.

Prints best and median over the rounds. Run it under `chrt -r 10` on a shared machine.
"""

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np

import kiln
from kiln import mint

REPO = Path(__file__).resolve().parents[1]


def five_ops(x, y):
    a = x + y
    b = a * x
    c = mint.sin(b)
    d = c - y
    return mint.relu(d)


def thousand_ops(x, y):
    for _ in range(250):
        x = mint.sin(x) * 1.0001 + y - 0.5
    return x


def floor(x, y):
    return x


def per_call(fn, args, calls):
    start = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    kiln.runtime.synchronize()
    return (time.perf_counter() - start) / calls


def summary(samples, scale, unit):
    return f"{min(samples) * scale:8.2f} / {statistics.median(samples) * scale:8.2f} {unit}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--null-backend", default=str(REPO / "build" / "bench" /
                                                      "libjit_null_backend.so"))
    opts = parser.parse_args()
    kiln.graph.register_custom_backend("bench_null_backend", opts.null_backend)
    print(f"kiln {kiln.__version__}, pipeline {kiln.runtime.get_pipeline()}, "
          f"{os.cpu_count()} cpus, load average {os.getloadavg()[0]:.2f}")

    x = kiln.tensor(np.linspace(0, 1, 16, dtype=np.float32))
    y = kiln.tensor(np.linspace(1, 0, 16, dtype=np.float32))
    variants = {
        "python function (floor)": floor,
        "eager, 5 kiln.mint calls": five_ops,
        "jit on kiln_cpu": kiln.jit(five_ops, backend="kiln_cpu"),
        "jit on a null backend (jit's own cost)": kiln.jit(five_ops, backend="bench_null_backend"),
    }
    times = {name: [] for name in variants}
    for fn in variants.values():
        per_call(fn, (x, y), 1000)  # warm-up; the jitted ones trace and build here
    for _ in range(opts.rounds):
        for name, fn in variants.items():
            times[name].append(per_call(fn, (x, y), opts.calls))
    print(f"\ncall: cached 5-op function, float32[16], {opts.calls} calls per round, "
          f"{opts.rounds} rounds (best / median per call)")
    for name, samples in times.items():
        print(f"  {name:<42} {summary(samples, 1e6, 'us')}")

    first, cached, traced = [], [], []
    for _ in range(opts.rounds):
        f = kiln.jit(thousand_ops)
        start = time.perf_counter()
        f(x, y)
        kiln.runtime.synchronize()
        first.append(time.perf_counter() - start)
        cached.append(per_call(f, (x, y), 20))
        start = time.perf_counter()
        f.graph(x, y)
        traced.append(time.perf_counter() - start)
    build = [a - b for a, b in zip(first, cached)]
    print(f"\nbuild: 1,000-op function on kiln_cpu, {opts.rounds} rounds (best / median)")
    print(f"  {'first call (trace + build + run)':<42} {summary(first, 1e3, 'ms')}")
    print(f"  {'cached call (run)':<42} {summary(cached, 1e3, 'ms')}")
    print(f"  {'trace + build (first - cached, per round)':<42} {summary(build, 1e3, 'ms')}")
    print(f"  {'graph() (trace + print, no build)':<42} {summary(traced, 1e3, 'ms')}")


if __name__ == "__main__":
    main()
