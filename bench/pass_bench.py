"""Add(x, Neg(y)) -> Sub(x, y) at scale: Kiln's PatternToPatternPass against
torch.fx.subgraph_rewriter.replace_pattern, on the same graphs.

Kiln's side is the Google Benchmark program build/bench/pass_bench (bench/cpp/pass_bench.cc: the
shapes and what is timed are described there); this script runs it and reads its JSON. torch.fx's
side builds the same graphs with torch.fx.Graph (two placeholders, the nodes, the output; every
node counts, so n nodes hold (n - 3) / 2 matches):

    wide:  out_i = torch.add(x, torch.neg(y)) for every i, all returned: independent matches
    chain: acc = torch.add(acc, torch.neg(y)) repeated from acc = x: every match feeds the next

and times, per graph, the construction (the Graph's nodes plus GraphModule, which generates and
compiles the module's Python code) and replace_pattern(gm, pattern, replacement) separately, then
checks the result (no add or neg left, one sub per match). Each torch.fx measurement runs in a
child process with a time limit (--fx-limit seconds); a size that runs out of it, or fails (Python's
recursion limit, memory), is reported as such, and larger sizes of that shape are not tried.

    chrt -r 10 .venv/bin/python bench/pass_bench.py                 # torch: pip install torch
    .venv/bin/python bench/pass_bench.py --sizes 4000 --rounds 1     # smoke run

Times are best / median in ms over --rounds runs (Google Benchmark repetitions for Kiln, child
processes for torch.fx); the ratio column is torch.fx's best over Kiln's best.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = ("wide", "chain")


def matches_for(nodes):
    return (nodes - 3) // 2


# --- torch.fx (runs in a child process) -----------------------------------------------------------

def fx_child(shape, nodes):
    import torch
    import torch.fx

    def pattern(x, y):
        return torch.add(x, torch.neg(y))

    def replacement(x, y):
        return torch.sub(x, y)

    k = matches_for(nodes)
    start = time.perf_counter()
    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    acc = x
    outs = []
    for _ in range(k):
        neg = g.call_function(torch.neg, (y,))
        add = g.call_function(torch.add, (x if shape == "wide" else acc, neg))
        if shape == "wide":
            outs.append(add)
        else:
            acc = add
    g.output(tuple(outs) if shape == "wide" else acc)
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    built = time.perf_counter()
    # Told at once, so that a run killed during replace_pattern still reports its construction.
    print(json.dumps({"build_ms": (built - start) * 1e3}), flush=True)
    matches = torch.fx.subgraph_rewriter.replace_pattern(gm, pattern, replacement)
    done = time.perf_counter()
    counts = {}
    for n in gm.graph.nodes:
        if n.op == "call_function":
            counts[n.target.__name__] = counts.get(n.target.__name__, 0) + 1
    ok = len(matches) == k and counts == {"sub": k}
    return {"build_ms": (built - start) * 1e3, "pass_ms": (done - built) * 1e3,
            "matches": len(matches), "ok": ok,
            "check": "" if ok else f"{len(matches)} matches, ops {counts}, expected {k} subs"}


def run_fx(shape, nodes, limit, python):
    """One child run; returns its dict, or {"error": why}."""
    cmd = [python, os.path.abspath(__file__), "--fx-child", shape, str(nodes)]
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return {"error": f"killed after {limit:.0f} s", **child_build(out)}
    took = time.perf_counter() - start
    if done.returncode != 0:
        lines = [l for l in done.stderr.strip().splitlines() if l.strip()]
        why = lines[-1] if lines else f"exit status {done.returncode}"
        return {"error": f"{why} (after {took:.1f} s)", **child_build(done.stdout)}
    return json.loads(done.stdout.strip().splitlines()[-1])


def child_build(out):
    """The construction time a child reported before it was stopped ({} when none)."""
    lines = out.strip().splitlines()
    return json.loads(lines[0]) if lines else {}


# --- Kiln (Google Benchmark) ------------------------------------------------------------------------

def run_kiln(binary, sizes, rounds):
    """{(what, shape, nodes): [ms, ...]} for what in build, pass."""
    cmd = [binary, "--benchmark_format=json", f"--benchmark_repetitions={rounds}",
           "--benchmark_filter=BM_(GraphBuild|PassRun)/(wide|chain)/(" +
           "|".join(str(n) for n in sizes) + ")$"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    times = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        if "error_occurred" in b and b["error_occurred"]:
            raise SystemExit(f"{b['name']}: {b.get('error_message')}")
        fn, shape, nodes = b["run_name"].split("/")
        what = "build" if fn == "BM_GraphBuild" else "pass"
        scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
        times.setdefault((what, shape, int(nodes)), []).append(b["real_time"] * scale)
    return times


def best_median(values):
    return f"{min(values):.2f} / {statistics.median(values):.2f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4000,100000,1000000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fx-limit", type=float, default=600,
                        help="seconds a torch.fx child may run (default 600)")
    parser.add_argument("--fx-python", default=sys.executable,
                        help="the Python that has torch (default: this one)")
    parser.add_argument("--binary", default=os.path.join(REPO, "build", "bench", "pass_bench"))
    parser.add_argument("--no-fx", action="store_true", help="Kiln only")
    parser.add_argument("--no-kiln", action="store_true",
                        help="torch.fx only (any sizes; Kiln's program has 4000, 100000, 1000000)")
    parser.add_argument("--fx-child", nargs=2, metavar=("SHAPE", "NODES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fx_child:
        print(json.dumps(fx_child(args.fx_child[0], int(args.fx_child[1]))))
        return
    sizes = [int(s) for s in args.sizes.split(",")]

    print(f"machine: {platform.node()} {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cpus, load average {os.getloadavg()[0]:.2f}")
    if not args.no_fx:
        version = subprocess.run([args.fx_python, "-c", "import torch; print(torch.__version__)"],
                                 capture_output=True, text=True)
        if version.returncode != 0:
            raise SystemExit(f"{args.fx_python} cannot import torch (pip install torch), "
                             "or pass --no-fx / --fx-python")
        print(f"torch {version.stdout.strip()}, Python {platform.python_version()}")
    kiln = {} if args.no_kiln else run_kiln(args.binary, sizes, args.rounds)

    fx = {}
    for shape in SHAPES:
        stopped = None
        for nodes in sizes:
            if args.no_fx:
                break
            if stopped:
                fx[(shape, nodes)] = {"error": f"not run ({stopped})"}
                continue
            runs = []
            for r in range(args.rounds):
                result = run_fx(shape, nodes, args.fx_limit, args.fx_python)
                if "error" in result:
                    runs = result
                    break
                if not result["ok"]:
                    raise SystemExit(f"torch.fx {shape}/{nodes}: {result['check']}")
                runs.append(result)
                # A run over a tenth of the limit is not repeated: its noise is small beside it.
                if (result["build_ms"] + result["pass_ms"]) / 1e3 > args.fx_limit / 10:
                    break
            fx[(shape, nodes)] = runs
            if isinstance(runs, dict):
                stopped = f"{nodes} nodes: {runs['error']}"
            print(f"  torch.fx {shape} {nodes}: "
                  + (runs["error"] if isinstance(runs, dict) else
                     f"pass {best_median([r['pass_ms'] for r in runs])} ms"), flush=True)

    print()
    print("| shape | nodes | matches | Kiln build ms | Kiln pass ms | torch.fx build ms "
          "| torch.fx replace_pattern ms | fx / Kiln (pass) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for shape in SHAPES:
        for nodes in sizes:
            kb = kiln.get(("build", shape, nodes))
            kp = kiln.get(("pass", shape, nodes))
            runs = fx.get((shape, nodes))
            ratio = "-"
            if runs is None:
                fb = fp = "not run"
            elif isinstance(runs, dict):
                fb = f"{runs['build_ms']:.2f}" if "build_ms" in runs else "-"
                fp = runs["error"]
            else:
                fb = best_median([r["build_ms"] for r in runs])
                fp = best_median([r["pass_ms"] for r in runs])
                if kp:
                    ratio = f"{min(r['pass_ms'] for r in runs) / min(kp):.0f}x"
            print(f"| {shape} | {nodes:,} | {matches_for(nodes):,} | "
                  f"{best_median(kb) if kb else '-'} | {best_median(kp) if kp else '-'} | "
                  f"{fb} | {fp} | {ratio} |")


if __name__ == "__main__":
    main()
