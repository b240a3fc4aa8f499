"""Kiln vs PyTorch vs NumPy, side by side, on the ops the performance targets name.

    python bench/compare.py                 # full run (a few minutes on 2 cores)
    python bench/compare.py --quick         # smoke run: small sizes, few repetitions
    python bench/compare.py --cases add,sum # a subset
    python bench/compare.py --cases gelu_out,softmax_out,layer_norm_out  # kernels alone (below)
    python bench/compare.py --cases softmax_backward  # softmax's gradient along dim 0
    python bench/compare.py --cases transpose         # a transpose made contiguous
    python bench/compare.py --threads-check # thread counts / oversubscription (see below)

Each framework runs in its own child process, so one framework's thread pool (PyTorch's bundled
libgomp, OpenBLAS's pthreads, which spin after a call) never competes with another's while it is
being timed; --rounds child runs per framework are alternated (kiln, torch, numpy, kiln, ...) so
that a change in the machine's load hits all three. Every child builds the same inputs from the
same seed, warms up, then times single calls with time.perf_counter; the table shows the best and
the median over all rounds. "torch/kiln" and
"numpy/kiln" are time ratios: above 1.0 means Kiln is faster. Kiln results are checked against a
NumPy reference before timing; a mismatch is shown in the "check" column.

Two threads on two cores make every timing sensitive to any other busy process (an OpenMP
barrier waits out a whole scheduler slice when one worker is preempted). On a shared machine, run
it as `chrt -r 10 python bench/compare.py` (root; round-robin real-time priority, inherited by the
children) and say so next to the numbers.

The environment is reported, never changed: OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE, when set, can
slow NumPy, so if any OPENBLAS_* variable is set a second NumPy column is measured in a child with
those variables removed (and labelled so).

The *_out cases time the kernels without output allocation: PyTorch writes into a preallocated
tensor through its out= overloads (torch._C._nn.gelu, aten._softmax.out,
aten.native_layer_norm.out), Kiln into out= where it has one (gelu) and otherwise from its caching
allocator, which hands the same block back on every call without faulting pages in. They are not
run by default.

softmax_backward times softmax's input gradient along dim 0 (not the last dim) through each
framework's autograd (`grad(y, x, g)` of a recorded softmax, the graph retained): one
SoftmaxBackward kernel in Kiln, aten._softmax_backward_data in PyTorch, the formula
y (g - sum(g y)) in NumPy. transpose times x.t().contiguous() (np.ascontiguousarray(x.T)).
Neither is run by default.

--threads-check runs kiln.mint.matmul in a loop and samples the process's threads
(/proc/self/task) and CPU use, with OMP_NUM_THREADS=2 and unset, and with elementwise and matmul
calls interleaved: Kiln's intra-op pool and oneDNN share one OpenMP runtime, so the expected count
is one pool of get_num_threads() workers.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time

import numpy as np

from _timing import call_times  # this folder is on sys.path when run as a script

ENV_PREFIXES = ("OPENBLAS_", "OMP_", "GOMP_", "KMP_", "MKL_", "DNNL_", "ONEDNN_", "KILN_")
FRAMEWORKS = ("kiln", "torch", "numpy")


# ---------------------------------------------------------------------------------------------
# Cases: each returns {framework: (callable, result_getter)} built in the child that times it.


def sizes(quick):
    if quick:
        return {"n": 1 << 20, "rows": 1024, "cols": 1024, "mm": 512}
    return {"n": 1 << 24, "rows": 4096, "cols": 4096, "mm": 2048}


def rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def erf_np(x):
    import math
    return np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))


def numpy_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    e /= e.sum(axis=axis, keepdims=True)
    return e


def numpy_softmax_backward(y, g, axis):
    """Softmax's input gradient along `axis` from its output y and output gradient g."""
    return y * (g - (g * y).sum(axis=axis, keepdims=True))


def numpy_layer_norm(x, w, b, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


CASES = {
    # name: (label, work description, inputs(sz) -> list of arrays)
    "add": ("add 16M f32 into out", "bytes", lambda s: [rand(s["n"], 1), rand(s["n"], 2)]),
    "matmul": ("sgemm 2048^3 f32", "flops",
               lambda s: [rand((s["mm"], s["mm"]), 3), rand((s["mm"], s["mm"]), 4)]),
    "softmax": ("softmax [4096,4096] dim=-1", "bytes",
                lambda s: [rand((s["rows"], s["cols"]), 5) * 4]),
    "layer_norm": ("layer_norm [4096,4096] w+b", "bytes",
                   lambda s: [rand((s["rows"], s["cols"]), 6), rand(s["cols"], 7),
                              rand(s["cols"], 8)]),
    "sum": ("sum 16M f32", "bytes", lambda s: [rand(s["n"], 9)]),
    "gelu": ("gelu (erf) 16M f32", "bytes", lambda s: [rand(s["n"], 10) * 3]),
    "gelu_out": ("gelu (erf) 16M f32, kernel only", "bytes", lambda s: [rand(s["n"], 10) * 3]),
    "softmax_out": ("softmax [4096,4096], kernel only", "bytes",
                    lambda s: [rand((s["rows"], s["cols"]), 5) * 4]),
    "layer_norm_out": ("layer_norm [4096,4096] w+b, kernel only", "bytes",
                       lambda s: [rand((s["rows"], s["cols"]), 6), rand(s["cols"], 7),
                                  rand(s["cols"], 8)]),
    "transpose": ("transpose [4096,4096] made contiguous", "bytes",
                  lambda s: [rand((s["rows"], s["cols"]), 13)]),
    "softmax_backward": ("softmax backward [4096,4096] dim=0", "bytes",
                         lambda s: [rand((s["rows"], s["cols"]), 11) * 4,
                                    rand((s["rows"], s["cols"]), 12)]),
}
DEFAULT_CASES = ("add", "matmul", "softmax", "layer_norm", "sum", "gelu")
# The kernel-only cases compute what their namesakes do.
SAME_AS = {"gelu_out": "gelu", "softmax_out": "softmax", "layer_norm_out": "layer_norm"}


def work(case, s):
    """Bytes moved (memory-bound ops) or flops (matmul) per call, for the throughput column."""
    case = SAME_AS.get(case, case)
    if case == "matmul":
        return 2.0 * s["mm"] ** 3
    n = s["n"]
    return {"add": 3, "softmax": 2, "layer_norm": 2, "sum": 1, "gelu": 2,
            "softmax_backward": 3, "transpose": 2}[case] * 4.0 * n


def reference(case, arrays):
    case = SAME_AS.get(case, case)
    if case == "add":
        return arrays[0] + arrays[1]
    if case == "matmul":
        return arrays[0] @ arrays[1]
    if case == "softmax":
        return numpy_softmax(arrays[0])
    if case == "layer_norm":
        return numpy_layer_norm(*arrays)
    if case == "sum":
        return np.asarray(arrays[0].sum(dtype=np.float64))
    if case == "softmax_backward":
        return numpy_softmax_backward(numpy_softmax(arrays[0], 0), arrays[1], 0)
    if case == "transpose":
        return arrays[0].T
    if case == "gelu":
        x = arrays[0][:4096]  # math.erf per element: check a slice only
        return (0.5 * x * (1 + erf_np(x / np.sqrt(2)))).astype(np.float32)
    raise KeyError(case)


def build_kiln(case, arrays):
    import kiln
    mint = kiln.mint
    name = {"add": "add", "matmul": "matmul", "softmax": "softmax", "layer_norm": "layer_norm",
            "sum": "sum", "gelu": "gelu", "softmax_backward": "softmax",
            "transpose": "contiguous"}[SAME_AS.get(case, case)]
    if not hasattr(mint, name):
        raise NotImplementedError(f"kiln.mint.{name} does not exist yet")
    t = [kiln.tensor(a) for a in arrays]  # copies into Kiln's allocator
    if case == "add":
        out = kiln.tensor(np.zeros_like(arrays[0]))
        return (lambda: mint.add(t[0], t[1], out=out)), lambda r: out.numpy()
    if case == "matmul":
        return (lambda: mint.matmul(t[0], t[1])), lambda r: r.numpy()
    if case == "softmax":
        return (lambda: mint.softmax(t[0], -1)), lambda r: r.numpy()
    if case == "layer_norm":
        shape = [arrays[0].shape[-1]]
        return (lambda: mint.layer_norm(t[0], shape, t[1], t[2], 1e-5)), lambda r: r.numpy()
    if case == "sum":
        return (lambda: mint.sum(t[0])), lambda r: np.asarray(r.numpy())
    if case == "gelu":
        return (lambda: mint.gelu(t[0])), lambda r: r.numpy()[:4096]
    if case == "gelu_out":
        out = kiln.tensor(np.zeros_like(arrays[0]))
        return (lambda: mint.gelu(t[0], out=out)), lambda r: out.numpy()[:4096]
    if case == "transpose":
        return (lambda: mint.contiguous(mint.transpose(t[0], 0, 1))), lambda r: r.numpy()
    if case == "softmax_backward":
        x = t[0].requires_grad_()
        y = mint.softmax(x, 0)
        return ((lambda: kiln.autograd.grad(y, x, t[1], retain_graph=True)[0]),
                lambda r: r.numpy())
    if case in SAME_AS:  # no out= in Kiln: its caching allocator reuses one block
        return build_kiln(SAME_AS[case], arrays)
    raise KeyError(case)


def build_torch(case, arrays):
    import torch
    import torch.nn.functional as F
    t = [torch.from_numpy(a).clone() for a in arrays]  # copies into PyTorch's allocator
    if case == "add":
        out = torch.empty_like(t[0])
        return (lambda: torch.add(t[0], t[1], out=out)), lambda r: out.numpy()
    if case == "matmul":
        return (lambda: torch.matmul(t[0], t[1])), lambda r: r.numpy()
    if case == "softmax":
        return (lambda: torch.softmax(t[0], dim=-1)), lambda r: r.numpy()
    if case == "layer_norm":
        shape = (arrays[0].shape[-1],)
        return (lambda: F.layer_norm(t[0], shape, t[1], t[2], 1e-5)), lambda r: r.numpy()
    if case == "sum":
        return (lambda: torch.sum(t[0])), lambda r: r.numpy()
    if case == "gelu":
        return (lambda: F.gelu(t[0])), lambda r: r.numpy()[:4096]
    if case == "transpose":
        return (lambda: t[0].t().contiguous()), lambda r: r.numpy()
    if case == "softmax_backward":
        x = t[0].requires_grad_()
        y = torch.softmax(x, dim=0)
        return ((lambda: torch.autograd.grad(y, x, t[1], retain_graph=True)[0]),
                lambda r: r.numpy())
    aten = torch.ops.aten
    if case == "gelu_out":
        out = torch.empty_like(t[0])
        return (lambda: torch._C._nn.gelu(t[0], out=out)), lambda r: out.numpy()[:4096]
    if case == "softmax_out":
        out = torch.empty_like(t[0])
        return (lambda: aten._softmax.out(t[0], -1, False, out=out)), lambda r: out.numpy()
    if case == "layer_norm_out":
        rows = t[0].shape[0]
        out, mean, rstd = torch.empty_like(t[0]), torch.empty(rows, 1), torch.empty(rows, 1)
        shape = [arrays[0].shape[-1]]
        return ((lambda: aten.native_layer_norm.out(t[0], shape, t[1], t[2], 1e-5, out0=out,
                                                    out1=mean, out2=rstd)),
                lambda r: out.numpy())
    raise KeyError(case)


def build_numpy(case, arrays):
    a = [x.copy() for x in arrays]
    if case == "add":
        out = np.empty_like(a[0])
        return (lambda: np.add(a[0], a[1], out=out)), lambda r: out
    if case == "matmul":
        return (lambda: np.matmul(a[0], a[1])), lambda r: r
    if case == "softmax":
        return (lambda: numpy_softmax(a[0])), lambda r: r
    if case == "layer_norm":
        return (lambda: numpy_layer_norm(*a)), lambda r: r
    if case == "sum":
        return (lambda: np.sum(a[0])), lambda r: np.asarray(r)
    if case == "transpose":
        return (lambda: np.ascontiguousarray(a[0].T)), lambda r: r
    if case == "softmax_backward":
        y = numpy_softmax(a[0], 0)
        return (lambda: numpy_softmax_backward(y, a[1], 0)), lambda r: r
    if case == "gelu":
        raise NotImplementedError("NumPy has no vectorised erf")
    if case in SAME_AS:
        raise NotImplementedError("kernel-only cases are Kiln vs PyTorch")
    raise KeyError(case)


def check(case, got, want):
    tol = {"matmul": 2e-3, "sum": 1e-4}.get(case, 1e-4)
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return f"MISMATCH shape {got.shape} vs {want.shape}"
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    err = float(np.max(np.abs(got - want))) / scale if want.size else 0.0
    return "ok" if err <= tol else f"MISMATCH rel err {err:.2e}"


def child(framework, cases, quick, reps_override):
    """Times `cases` in this process for one framework; prints one JSON object."""
    s = sizes(quick)
    info = {"numpy": np.__version__}
    sync = lambda: None  # noqa: E731
    if framework == "torch":
        import torch
        torch.set_num_threads(2)
        info.update(version=torch.__version__, threads=torch.get_num_threads())
    elif framework == "kiln":
        import kiln
        runtime = getattr(kiln, "runtime", None)
        if runtime is not None and hasattr(runtime, "synchronize"):
            sync = runtime.synchronize
        threads = getattr(kiln._C, "get_num_threads", None)
        info.update(version=kiln.__version__,
                    threads=threads() if threads else "default (OMP_NUM_THREADS or cores)")
    else:
        info.update(version=np.__version__, threads=openblas_threads())
    builders = {"kiln": build_kiln, "torch": build_torch, "numpy": build_numpy}
    results = {}
    for case in cases:
        arrays = CASES[case][2](s)
        try:
            fn, get = builders[framework](case, arrays)
            r = fn()
            sync()
            status = check(case, get(r), reference(case, arrays)) if framework == "kiln" else "ok"
        except Exception as e:  # noqa: BLE001  (a missing or failing op becomes an n/a row)
            results[case] = {"na": f"{type(e).__name__}: {e}".splitlines()[0][:90]}
            continue
        reps = reps_override or (3 if quick else (10 if case == "matmul" else 20))
        times = call_times(fn, reps, sync, warmup=2 if quick else 3)
        results[case] = {"times": times, "check": status}
        del fn, get, arrays
    print(json.dumps({"info": info, "results": results}))


def openblas_threads():
    import ctypes
    import glob
    libs = glob.glob(os.path.join(os.path.dirname(np.__file__), "..", "numpy.libs",
                                  "libscipy_openblas*.so"))
    for lib in libs:
        handle = ctypes.CDLL(lib)
        for sym in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
                    "openblas_get_num_threads"):
            if hasattr(handle, sym):
                return getattr(handle, sym)()
    return None


def run_child(framework, args, env=None):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", framework,
           "--cases", ",".join(args.cases)]
    if args.quick:
        cmd.append("--quick")
    if args.reps:
        cmd += ["--reps", str(args.reps)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or ["no output"])[-1][:90]
        return {"info": {}, "results": {c: {"na": f"child failed: {reason}"} for c in args.cases}}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_rounds(framework, args, env=None, into=None):
    """Runs one child and merges its samples into `into` (None for the first round)."""
    got = run_child(framework, args, env)
    if into is None:
        into = {"info": got["info"], "results": {}}
    into["info"] = into["info"] or got["info"]
    for case, r in got["results"].items():
        merged = into["results"].setdefault(case, {})
        if "na" in r:
            merged.setdefault("na", r["na"])
            continue
        merged.pop("na", None)
        merged.setdefault("times", []).extend(r["times"])
        if merged.get("check", "ok") == "ok":
            merged["check"] = r["check"]
    for r in into["results"].values():
        if "times" in r:
            r["best"], r["median"] = min(r["times"]), statistics.median(r["times"])
    return into


# ---------------------------------------------------------------------------------------------
# Report


def machine():
    model = platform.processor() or "unknown"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} logical CPUs, load average {os.getloadavg()[0]:.2f}"


def fmt_ms(r):
    return f"{r['best'] * 1e3:.2f} / {r['median'] * 1e3:.2f}" if "best" in r else "n/a"


def fmt_ratio(num, den):
    if "best" not in num or "best" not in den:
        return "n/a"
    return f"{num['best'] / den['best']:.2f}x"


def fmt_rate(case, s, r):
    if "best" not in r:
        return "n/a"
    w = work(case, s) / r["best"] / 1e9
    return f"{w:.1f} GFLOP/s" if CASES[case][1] == "flops" else f"{w:.1f} GB/s"


def report(args, data, clean_numpy):
    s = sizes(args.quick)
    columns = ["op", "kiln ms best/med", "torch ms best/med", "numpy ms best/med"]
    if clean_numpy:
        columns.append("numpy(OPENBLAS_* unset) ms")
    columns += ["torch/kiln", "numpy/kiln", "kiln rate", "check"]
    rows, notes = [], []
    for case in args.cases:
        k, t, n = (data[f]["results"].get(case, {"na": "not run"}) for f in FRAMEWORKS)
        row = [CASES[case][0], fmt_ms(k), fmt_ms(t), fmt_ms(n)]
        if clean_numpy:
            row.append(fmt_ms(clean_numpy["results"].get(case, {"na": "not run"})))
        row += [fmt_ratio(t, k), fmt_ratio(n, k), fmt_rate(case, s, k), k.get("check", "")]
        rows.append(row)
        for f, r in zip(FRAMEWORKS, (k, t, n)):
            if "na" in r:
                notes.append(f"{CASES[case][0]} / {f}: n/a: {r['na']}")
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    for r in rows:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)))
    print()
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join("---" if i == 0 else "---:" for i in range(len(columns))) + "|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    if notes:
        print()
        for line in notes:
            print(line)


def header(data, clean_env_keys):
    env = {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)}
    print(f"machine: {machine()}")
    print(f"python {platform.python_version()}, numpy {np.__version__}, "
          f"torch {data['torch']['info'].get('version', 'n/a')}, "
          f"kiln {data['kiln']['info'].get('version', 'n/a')}")
    print(f"threads: kiln {data['kiln']['info'].get('threads', 'n/a')} (OpenMP), "
          f"torch {data['torch']['info'].get('threads', 'n/a')} (torch.set_num_threads(2)), "
          f"numpy/OpenBLAS {data['numpy']['info'].get('threads', 'n/a')}")
    print(f"thread/BLAS environment (as found, not changed): {env or 'none set'}")
    if clean_env_keys:
        print(f"extra NumPy column measured with {', '.join(clean_env_keys)} removed")
    print()


# ---------------------------------------------------------------------------------------------
# --threads-check


def thread_count():
    return len(os.listdir("/proc/self/task"))


def cpu_seconds():
    t = os.times()
    return t.user + t.system


def threads_child(seconds):
    """Samples threads and CPU while kiln matmul runs, then with interleaved add+matmul."""
    out = {"threads_after_numpy_import": thread_count()}  # includes OpenBLAS's own workers
    import kiln
    out["threads_after_kiln_import"] = thread_count()
    m = kiln.mint
    size = 1024
    a, b = kiln.tensor(rand((size, size), 1)), kiln.tensor(rand((size, size), 2))
    x, y = kiln.tensor(rand(1 << 22, 3)), kiln.tensor(rand(1 << 22, 4))
    z = kiln.tensor(np.zeros(1 << 22, np.float32))
    m.add(x, y, out=z)
    out["threads_after_first_add"] = thread_count()
    m.matmul(a, b)
    out["threads_after_first_matmul"] = thread_count()

    def run(name, body):
        samples, stop = [], threading.Event()

        def sampler():
            while not stop.is_set():
                samples.append(thread_count() - 1)  # minus the sampler itself
                time.sleep(0.02)

        body()  # warm up: creates the pools
        th = threading.Thread(target=sampler)
        c0, w0, calls = cpu_seconds(), time.perf_counter(), 0
        th.start()
        while time.perf_counter() - w0 < seconds:
            body()
            calls += 1
        stop.set()
        th.join()
        wall = time.perf_counter() - w0
        out[name] = {"max_threads": max(samples), "min_threads": min(samples),
                     "cpu_util_cores": round((cpu_seconds() - c0) / wall, 2),
                     "ms_per_call": round(wall / calls * 1e3, 3)}

    run("matmul_1024", lambda: m.matmul(a, b))
    if hasattr(m, "add"):
        run("add_4M_then_matmul_1024", lambda: (m.add(x, y, out=z), m.matmul(a, b)))
    print(json.dumps(out))


def threads_check(args):
    print(f"machine: {machine()}")
    for label, env_change in (("OMP_NUM_THREADS unset", None), ("OMP_NUM_THREADS=2", "2")):
        env = dict(os.environ)
        env.pop("OMP_NUM_THREADS", None)
        if env_change:
            env["OMP_NUM_THREADS"] = env_change
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--threads-child",
                               str(1 if args.quick else 5)], capture_output=True, text=True,
                              env=env)
        result = (proc.stdout.strip().splitlines() or ["{}"])[-1] if proc.returncode == 0 \
            else f"failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}"
        print(f"{label}: {result}")


# ---------------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few repetitions")
    parser.add_argument("--cases", default=",".join(DEFAULT_CASES),
                        help=f"comma-separated subset of {','.join(CASES)} (default: "
                             f"{','.join(DEFAULT_CASES)})")
    parser.add_argument("--reps", type=int, default=0,
                        help="timed calls per case and round (default 20; 10 for matmul)")
    parser.add_argument("--rounds", type=int, default=0,
                        help="child runs per framework, alternated (default 3; 1 with --quick)")
    parser.add_argument("--threads-check", action="store_true")
    parser.add_argument("--child", choices=FRAMEWORKS, help=argparse.SUPPRESS)
    parser.add_argument("--threads-child", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        parser.error(f"unknown cases {unknown}; choose from {list(CASES)}")
    args.rounds = args.rounds or (1 if args.quick else 3)
    if args.child:
        return child(args.child, args.cases, args.quick, args.reps)
    if args.threads_child is not None:
        return threads_child(args.threads_child)
    if args.threads_check:
        return threads_check(args)

    # Rounds alternate the frameworks so that drift in the machine's load hits all of them.
    data = {f: None for f in FRAMEWORKS}
    clean_keys = [k for k in os.environ if k.startswith("OPENBLAS_")]
    clean = None
    for _ in range(args.rounds):
        for f in FRAMEWORKS:
            data[f] = run_rounds(f, args, into=data[f])
        if clean_keys:
            env = {k: v for k, v in os.environ.items() if k not in clean_keys}
            clean = run_rounds("numpy", args, env=env, into=clean)
    header(data, clean_keys)
    reps = args.reps or ("3" if args.quick else "20 (matmul 10)")
    print(f"{args.rounds} round(s), frameworks alternated; {reps} timed calls per case, "
          f"framework and round, after a warm-up\n")
    if args.quick:
        print("--quick: reduced sizes (1M elements, 1024^2 rows, 512^3 sgemm); the labels name "
              "the full sizes; numbers are a smoke test only\n")
    report(args, data, clean)


if __name__ == "__main__":
    main()
