"""Custom-operator benchmarks: build, cached load, import and per-call cost, side by side with
torch.utils.cpp_extension.load on the same add3 (when PyTorch is installed).

    chrt -r 10 .venv/bin/python bench/custom_op_bench.py [--runs 5] [--no-torch]
    chrt -r 10 .venv/bin/python bench/custom_op_bench.py --calls-only --modes sync,2stage,4stage

Every build starts from an empty cache folder; every "new process" number is measured inside a
fresh interpreter (time of the call itself, printed by the child). Prints a Markdown table with
the best and the median of the runs; bench/RESULTS.md records the output.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ADD3 = ROOT / "examples" / "custom_op" / "add3.cpp"
CUSTOM_ADD = ROOT / "bench" / "custom_op" / "custom_add.cpp"
TORCH_ADD3 = ROOT / "bench" / "custom_op" / "torch_add3.cpp"


def child(code, env=None):
    """Runs `code` in a new interpreter and returns the float it prints last.

    The interpreter may write and use bytecode caches (__pycache__), as an installed package
    does: with PYTHONDONTWRITEBYTECODE=1 every import recompiles its module from source, which
    measures the compiler, not the import (see bench/RESULTS.md)."""
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, env={**environ, **(env or {})}, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    return float(out.stdout.split()[-1])


def private_tmp():
    path = tempfile.mkdtemp(prefix="kiln_bench_")
    os.chmod(path, 0o700)
    return path


def wait_for_background_pch(cache):
    """A cold build starts a precompiled header in the background; let it finish (or fail)
    before the next measurement so that it does not compete for the cores."""
    deadline = time.time() + 120
    while time.time() < deadline and any(Path(cache).glob("pch/*/kiln_pch.h.gch.tmp-*")):
        time.sleep(0.1)


def kiln_cold_build(pch):
    cache = private_tmp()
    try:
        return child(f"""
            import time, kiln
            b = kiln.ops.CustomOpBuilder("cpu_add", [{str(ADD3)!r}], build_dir={cache!r})
            t = time.perf_counter(); b.load(); t = time.perf_counter() - t
            assert b.compiled
            print(t)
        """, env={"KILN_EXTENSION_PCH": "1" if pch else "0"})
    finally:
        wait_for_background_pch(cache)
        shutil.rmtree(cache)


def kiln_cached_load(cache):
    return child(f"""
        import time, kiln
        t = time.perf_counter()
        b = kiln.ops.CustomOpBuilder("cpu_add", [{str(ADD3)!r}], build_dir={cache!r})
        ops = b.load()
        t = time.perf_counter() - t
        assert not b.compiled
        print(t)
    """)


def import_time(module):
    return child(f"""
        import time
        t = time.perf_counter(); import {module}; print(time.perf_counter() - t)
    """)


def torch_cold_build():
    cache = private_tmp()
    try:
        return child(f"""
            import time, torch.utils.cpp_extension as ext
            t = time.perf_counter()
            ext.load("torch_add3", [{str(TORCH_ADD3)!r}], build_directory={cache!r})
            print(time.perf_counter() - t)
        """)
    finally:
        shutil.rmtree(cache)


def torch_cached_load(cache):
    return child(f"""
        import time, torch.utils.cpp_extension as ext
        t = time.perf_counter()
        ext.load("torch_add3", [{str(TORCH_ADD3)!r}], build_directory={cache!r})
        print(time.perf_counter() - t)
    """)


def per_call(fn, number=100_000, repeat=5):
    """Best time of one call in seconds over `repeat` timings of `number` calls."""
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def call_overheads(cache, mode=None):
    import numpy as np

    import kiln

    if mode is not None:
        kiln.runtime.set_pipeline(mode)

    add3 = kiln.ops.CustomOpBuilder("cpu_add", [str(ADD3)], build_dir=cache).load().add3
    custom_add = kiln.ops.CustomOpBuilder("bench_add", [str(CUSTOM_ADD)], build_dir=cache).load().add
    add = kiln.mint.add
    x, y, z = (kiln.tensor(np.arange(16, dtype=np.float32)) for _ in range(3))
    return {
        "custom add (x, y)": per_call(lambda: custom_add(x, y)),
        "kiln.mint.add (x, y)": per_call(lambda: add(x, y)),
        "custom add3 (x, y, z)": per_call(lambda: add3(x, y, z)),
        "kiln.mint.add twice (x + y + z)": per_call(lambda: add(add(x, y), z)),
        "empty lambda (the loop)": per_call(lambda: None),
    }


def summary(samples, scale=1e3, unit="ms"):
    return (f"{min(samples) * scale:.1f} / {statistics.median(samples) * scale:.1f} {unit}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--calls-only", action="store_true", help="only the per-call rows")
    parser.add_argument("--modes", default="",
                        help="per-call rows in these pipeline modes (comma-separated; default: "
                             "the default mode)")
    args = parser.parse_args()
    if args.calls_only:
        print_call_overheads(private_tmp(), args.modes)
        return
    try:
        import torch  # noqa: F401

        have_torch = not args.no_torch
    except ImportError:
        have_torch = False

    rows = []
    rows.append(("first build of add3, cold cache (PCH built in the background)",
                 [kiln_cold_build(pch=True) for _ in range(args.runs)]))
    rows.append(("first build of add3, cold cache, KILN_EXTENSION_PCH=0",
                 [kiln_cold_build(pch=False) for _ in range(args.runs)]))
    cache = private_tmp()
    child(f"""
        import kiln
        kiln.ops.CustomOpBuilder("cpu_add", [{str(ADD3)!r}], build_dir={cache!r}).load()
        print(0)
    """)
    rows.append(("cached load of add3 in a new process (kiln.ops import + load())",
                 [kiln_cached_load(cache) for _ in range(args.runs * 2)]))
    rows.append(("import kiln", [import_time("kiln") for _ in range(args.runs * 2)]))
    if have_torch:
        rows.append(("torch.utils.cpp_extension.load of add3, cold build folder",
                     [torch_cold_build() for _ in range(max(2, args.runs // 2))]))
        torch_cache = private_tmp()
        child(f"""
            import torch.utils.cpp_extension as ext
            ext.load("torch_add3", [{str(TORCH_ADD3)!r}], build_directory={torch_cache!r})
            print(0)
        """)
        rows.append(("torch.utils.cpp_extension.load of add3, cached, new process",
                     [torch_cached_load(torch_cache) for _ in range(args.runs * 2)]))
        rows.append(("import torch", [import_time("torch") for _ in range(args.runs * 2)]))
        shutil.rmtree(torch_cache)

    print("| measurement | best / median |")
    print("|---|---:|")
    for name, samples in rows:
        print(f"| {name} | {summary(samples)} |")

    print_call_overheads(cache, args.modes)


def print_call_overheads(cache, modes):
    for mode in modes.split(",") if modes else [None]:
        calls = [call_overheads(cache, mode) for _ in range(3)]
        title = "per call, 16 float32 elements (3 runs x best of 5 x 100,000 calls)"
        print(f"\n| {title}{f', {mode}' if mode else ''} | best / median |")
        print("|---|---:|")
        for name in calls[0]:
            print(f"| {name} | {summary([c[name] for c in calls], 1e9, 'ns')} |")
    shutil.rmtree(cache)


if __name__ == "__main__":
    main()
