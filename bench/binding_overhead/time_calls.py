"""Times add(a, b) through each binding module built by CMakeLists.txt.

    python bench/binding_overhead/time_calls.py BUILD_DIR [--calls 1000000] [--repeat 5]

Each module is timed in its own interpreter (two nanobind modules binding the same C++ type cannot
share one). A timing is one timeit loop of `add(a, b)` over --calls calls with `add`, `a` and `b`
bound as globals; the best of --repeat is reported as ns per call, raw and net of the timeit loop's
own cost (the same loop running `pass`).
"""

import argparse
import importlib
import json
import platform
import subprocess
import sys
import timeit

MODULES = [
    ("capi_add", "CPython C API, METH_FASTCALL (floor)"),
    ("nb_add", "nanobind, -O2"),
    ("nb_add_kiln_flags", "nanobind, kiln._C flags (NB_STATIC, -Os)"),
    ("pb_add", "pybind11, -O2"),
]


def best_ns(stmt, globals_, calls, repeat):
    timer = timeit.Timer(stmt, globals=globals_)
    return min(timer.repeat(repeat=repeat, number=calls)) / calls * 1e9


def time_one(name, calls, repeat):
    mod = importlib.import_module(name)
    a, b = mod.Vec16(), mod.Vec16()
    mod.add(a, b)  # warm up (type caches, the first allocation)
    return {
        "loop_ns": best_ns("pass", {}, calls, repeat),
        "call_ns": best_ns("add(a, b)", {"add": mod.add, "a": a, "b": b}, calls, repeat),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir")
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # child mode: time one module
    args = parser.parse_args()
    sys.path.insert(0, args.build_dir)
    if args.one:
        print(json.dumps(time_one(args.one, args.calls, args.repeat)))
        return

    import nanobind
    import pybind11
    print(f"Python {platform.python_version()}, nanobind {nanobind.__version__}, "
          f"pybind11 {pybind11.__version__}; {args.calls} calls, best of {args.repeat}\n")
    rows = []
    for name, label in MODULES:
        out = subprocess.run([sys.executable, __file__, args.build_dir, "--one", name,
                              "--calls", str(args.calls), "--repeat", str(args.repeat)],
                             check=True, capture_output=True, text=True).stdout
        r = json.loads(out)
        rows.append((name, label, r["call_ns"], r["call_ns"] - r["loop_ns"]))
    floor = rows[0][3]
    print("| module | binding | ns/call | ns/call net of loop | net vs C API |")
    print("|---|---|---:|---:|---:|")
    for name, label, ns, net in rows:
        print(f"| {name} | {label} | {ns:.1f} | {net:.1f} | {net / floor:.2f}x |")


if __name__ == "__main__":
    main()
