"""kiln_cpu, the jit's CPU graph backend, against Kiln eager, PyTorch eager, torch.compile and
ONNX Runtime, on the workloads the kiln_cpu performance targets name.

    chrt -r 10 .venv/bin/python bench/jit_cpu_bench.py         # full run (several minutes)
    .venv/bin/python bench/jit_cpu_bench.py --quick             # smoke run: small sizes, few calls
    .venv/bin/python bench/jit_cpu_bench.py --workloads block,mlp --skip compile,ort

PyTorch, ONNX Runtime and onnx are benchmark-only dependencies:
`.venv/bin/pip install torch onnxruntime onnx` (Kiln never imports them). Without one of them its
columns read n/a with the reason.

Workloads (float32):

- gelu: `gelu(x * 2 + 1)` on 16M elements (erf form: kiln.mint.gelu, torch.nn.functional.gelu).
  Target: Kiln jit <= 10 ms.
- block: a pre-norm transformer block at batch 8, sequence 128, width 256, 4 heads:
  `h = x + attn(layer_norm(x))`, `h + mlp(layer_norm(h))`; attention is one QKV linear 256->768,
  reshape/permute to heads, `softmax(q @ k^T * (1/sqrt(64)))  @ v`, back-permute/reshape and an
  output linear 256->256; the MLP is linear 256->1024, gelu, linear 1024->256. The weights are
  random constants the function closes over (Kiln) or the module's parameters (PyTorch, the same
  values). Targets: Kiln jit >= 1.5x PyTorch eager, and at least level with torch.compile and ONNX
  Runtime.
- mlp: linear 784->512, relu, 512->512, relu, 512->512, relu, 512->10 at batch 64. Target: Kiln
  jit >= 2x PyTorch eager. About 120 MFLOP per call: on two cores this one is bound by the matmuls'
  arithmetic, not by per-op overhead.
- mlp_small: linear 64->128, relu, 128->64, relu, 64->10 at batch 64 (the MLP that
  examples/train_mlp.py trains on the digits data): about 2 MFLOP, small kernels, so per-op
  overhead is most of its time: the case the target's "small kernels, overhead-bound" describes.
  Same target.
- The block's peak memory (part of the block workload, Kiln only): for Kiln eager and Kiln jit,
  after a warm call and with its result freed, kiln.runtime.reset_peak_memory_stats(), one call
  whose result is read back, then kiln.runtime.memory_stats()["peak"]. That is the caching
  allocator's peak of allocated bytes: everything alive during the call, the inputs and weights
  included, which are shown for scale. "peak - inputs - weights" is what the call needed on top
  of them (intermediates, the result, and whatever a backend keeps between calls: "held between
  calls" is what was allocated before the call beyond the inputs and weights). Where the jitted
  function has `memory_plan(*args)`, its "peak_bytes" is shown as the planned figure and compared
  with what the call itself added: the peak minus what was allocated just before the call (the
  inputs and weights as the allocator rounds them, plus what the built graph holds). Memory a
  backend takes other than through the caching allocator is not counted.

"Kiln jit" is kiln.jit(fn, backend="kiln_cpu") at jit_level "O1" (the target rows use it), shown
beside jit_level "O0". torch.compile is the default (inductor) on CPU; ONNX Runtime runs the
module exported by torch.onnx.export(..., dynamo=False) on the CPUExecutionProvider with
intra_op_num_threads=2. A variant that cannot be built (torch.compile or the export failing, a
package missing) reads "n/a (reason)".

Threads: torch.set_num_threads(2); Kiln uses its default (one OpenMP thread per core); the
environment is reported, never changed. As in bench/compare.py, each group of variants runs in its
own child process (Kiln; PyTorch eager; torch.compile; ONNX Runtime), so that one library's thread
pool never competes with another's while it is being timed, and --rounds child runs per group are
alternated. Every child builds the same inputs and weights from the same seeds.

Checks: the first Kiln child saves Kiln eager's results; every other variant's result must agree
with them (np.testing.assert_allclose, tolerances in TOLERANCE) before it is timed. A mismatch is
shown in the table, that variant is not timed, and the script exits with status 1 and a FAILED
line; so it does when a Kiln variant fails to run. Times are single calls with time.perf_counter
after a warm-up (bench/_timing.py), each call including reading the result back as a NumPy array
(`.numpy()`, which waits for Kiln's asynchronous work); the tables give best and median over all
rounds, and "x vs kiln jit O1" is the variant's best time over Kiln jit O1's best (above 1.0: Kiln
jit is faster). "first call" is the first call's time (tracing and building for the Kiln jit,
compiling for torch.compile: much shorter once inductor's on-disk cache holds the kernels from an
earlier run) or, for ONNX Runtime, export, session creation and the first run.
"""

import argparse
import contextlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from _timing import call_times  # this folder is on sys.path when run as a script
from compare import ENV_PREFIXES, machine

GROUPS = {
    "kiln": ("kiln eager", "kiln jit O0", "kiln jit O1"),
    "torch": ("torch eager",),
    "compile": ("torch.compile",),
    "ort": ("onnxruntime",),
}
VARIANTS = tuple(v for vs in GROUPS.values() for v in vs)
JIT = "kiln jit O1"
WORKLOADS = {
    "gelu": "gelu(x * 2 + 1), 16M f32",
    "block": "transformer block, batch 8, seq 128, width 256, 4 heads",
    "mlp": "MLP 784-512-512-512-10 relu, batch 64",
    "mlp_small": "MLP 64-128-64-10 relu, batch 64",
}
# (rtol, atol) against Kiln eager: float32, different summation orders and erf implementations.
TOLERANCE = {"gelu": (1e-5, 1e-5), "block": (1e-4, 5e-5), "mlp": (1e-4, 1e-5),
             "mlp_small": (1e-4, 1e-5)}
HEADS, WIDTH, HIDDEN = 4, 256, 1024
MLP_WIDTHS = {"mlp": (784, 512, 512, 512, 10), "mlp_small": (64, 128, 64, 10)}


# ---------------------------------------------------------------------------------------------
# Inputs and weights, identical in every child


def sizes(quick):
    if quick:
        return {"n": 1 << 20, "batch": 2, "seq": 32, "mlp_batch": 64}
    return {"n": 16 * 2**20, "batch": 8, "seq": 128, "mlp_batch": 64}


def reps_for(workload, quick):
    if quick:
        return 3
    return {"gelu": 20, "block": 50, "mlp": 300, "mlp_small": 2000}[workload]


def rand(shape, seed, scale=1.0):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32) * np.float32(scale)


def linear_weights(n_in, n_out, seed):
    return rand((n_out, n_in), seed, 1 / math.sqrt(n_in)), rand(n_out, seed + 1, 0.1)


def data(workload, s):
    """{"x": input, "params": {name: array}}: the same values in every child."""
    if workload == "gelu":
        return {"x": rand(s["n"], 1), "params": {}}
    if workload == "block":
        p = {"ln1_w": 1 + rand(WIDTH, 10, 0.1), "ln1_b": rand(WIDTH, 11, 0.1),
             "ln2_w": 1 + rand(WIDTH, 12, 0.1), "ln2_b": rand(WIDTH, 13, 0.1)}
        layers = (("qkv", WIDTH, 3 * WIDTH), ("out", WIDTH, WIDTH), ("fc1", WIDTH, HIDDEN),
                  ("fc2", HIDDEN, WIDTH))
        for i, (name, n_in, n_out) in enumerate(layers):
            p[name + "_w"], p[name + "_b"] = linear_weights(n_in, n_out, 20 + 2 * i)
        return {"x": rand((s["batch"], s["seq"], WIDTH), 2), "params": p}
    if workload in MLP_WIDTHS:
        widths = MLP_WIDTHS[workload]
        p = {}
        for i, (n_in, n_out) in enumerate(zip(widths, widths[1:])):
            p[f"l{i}_w"], p[f"l{i}_b"] = linear_weights(n_in, n_out, 30 + 2 * i)
        return {"x": rand((s["mlp_batch"], widths[0]), 3), "params": p}
    raise KeyError(workload)


# ---------------------------------------------------------------------------------------------
# The workloads in Kiln and in PyTorch


def kiln_function(workload, params):
    """The workload as a function of one Kiln tensor, closing over the weights as Kiln tensors."""
    import kiln
    mint = kiln.mint
    p = {k: kiln.tensor(v) for k, v in params.items()}
    if workload == "gelu":
        return lambda x: mint.gelu(x * 2 + 1)
    if workload == "block":
        scale = 1 / math.sqrt(WIDTH // HEADS)

        def block(x):
            b, t, c = x.shape
            h = mint.layer_norm(x, [c], p["ln1_w"], p["ln1_b"], 1e-5)
            qkv = mint.linear(h, p["qkv_w"], p["qkv_b"])
            qkv = mint.permute(mint.reshape(qkv, [b, t, 3, HEADS, c // HEADS]), [2, 0, 3, 1, 4])
            q, k, v = qkv.select(0, 0), qkv.select(0, 1), qkv.select(0, 2)
            att = mint.softmax(mint.matmul(q, mint.transpose(k, -2, -1)) * scale, -1)
            o = mint.reshape(mint.permute(mint.matmul(att, v), [0, 2, 1, 3]), [b, t, c])
            x = x + mint.linear(o, p["out_w"], p["out_b"])
            h = mint.layer_norm(x, [c], p["ln2_w"], p["ln2_b"], 1e-5)
            h = mint.gelu(mint.linear(h, p["fc1_w"], p["fc1_b"]))
            return x + mint.linear(h, p["fc2_w"], p["fc2_b"])

        return block
    if workload in MLP_WIDTHS:
        layers = len(MLP_WIDTHS[workload]) - 1

        def mlp(x):
            for i in range(layers):
                x = mint.linear(x, p[f"l{i}_w"], p[f"l{i}_b"])
                if i < layers - 1:
                    x = mint.relu(x)
            return x

        return mlp
    raise KeyError(workload)


def torch_module(workload, params):
    """The workload as a torch.nn.Module whose parameters hold the same values."""
    import torch
    import torch.nn.functional as F

    class Workload(torch.nn.Module):
        def __init__(self):
            super().__init__()
            for name, value in params.items():
                self.register_parameter(name, torch.nn.Parameter(torch.from_numpy(value.copy()),
                                                                 requires_grad=False))

        def forward(self, x):
            if workload == "gelu":
                return F.gelu(x * 2 + 1)
            if workload == "block":
                b, t, c = x.shape
                h = F.layer_norm(x, (c,), self.ln1_w, self.ln1_b, 1e-5)
                qkv = F.linear(h, self.qkv_w, self.qkv_b)
                qkv = qkv.reshape(b, t, 3, HEADS, c // HEADS).permute(2, 0, 3, 1, 4)
                q, k, v = qkv[0], qkv[1], qkv[2]
                att = torch.softmax((q @ k.transpose(-2, -1)) * (1 / math.sqrt(c // HEADS)), -1)
                o = (att @ v).permute(0, 2, 1, 3).reshape(b, t, c)
                x = x + F.linear(o, self.out_w, self.out_b)
                h = F.layer_norm(x, (c,), self.ln2_w, self.ln2_b, 1e-5)
                h = F.gelu(F.linear(h, self.fc1_w, self.fc1_b))
                return x + F.linear(h, self.fc2_w, self.fc2_b)
            layers = len(MLP_WIDTHS[workload]) - 1
            for i in range(layers):
                x = F.linear(x, getattr(self, f"l{i}_w"), getattr(self, f"l{i}_b"))
                if i < layers - 1:
                    x = torch.relu(x)
            return x

    return Workload().eval()


# ---------------------------------------------------------------------------------------------
# Children: each builds its group's variants, checks them, times them, prints one JSON object


def build_kiln(workload, d):
    """({variant: function}, input tensor)."""
    import kiln
    fn = kiln_function(workload, d["params"])
    functions = {"kiln eager": fn}
    for level in ("O0", "O1"):
        functions[f"kiln jit {level}"] = kiln.jit(fn, backend="kiln_cpu", jit_level=level)
    return functions, kiln.tensor(d["x"])


def export_opset(path):
    try:
        import onnx
    except ImportError:
        return "unknown (no onnx package)"
    return max(o.version for o in onnx.load(path).opset_import if o.domain in ("", "ai.onnx"))


def build_torch(workload, d, group, scratch, info):
    import torch
    torch.set_num_threads(2)
    module = torch_module(workload, d["params"])
    x = torch.from_numpy(d["x"].copy())
    if group == "torch":
        return {"torch eager": lambda: module(x).numpy()}
    if group == "compile":
        compiled = torch.compile(module)
        return {"torch.compile": lambda: compiled(x).numpy()}
    import onnxruntime as ort
    path = os.path.join(scratch, f"{workload}.onnx")
    torch.onnx.export(module, (x,), path, input_names=["x"], output_names=["y"], dynamo=False)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    info["opset"] = export_opset(path)
    feed = {"x": d["x"]}
    return {"onnxruntime": lambda: session.run(None, feed)[0]}


def first_line(e):
    text = f"{type(e).__name__}: {e}".strip()
    return (text.splitlines() or [text])[0][:160]


def check(workload, got, want):
    """None when `got` agrees with Kiln eager's `want`, else the mismatch, described."""
    rtol, atol = TOLERANCE[workload]
    try:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    except AssertionError:
        bad = int(np.count_nonzero(~np.isclose(got, want, rtol=rtol, atol=atol)))
        return (f"MISMATCH vs kiln eager: {bad} of {want.size} elements outside rtol {rtol:g}, "
                f"atol {atol:g}; max abs err {max_err(got, want):.2e}")
    return None


def max_err(got, want):
    return float(np.max(np.abs(got.astype(np.float64) - want))) if want.size else 0.0


def kiln_memory(functions, x, d):
    """Peak allocated bytes around one call per Kiln variant (see the module's documentation)."""
    import kiln
    rt = kiln.runtime
    out = {"inputs_weights": d["x"].nbytes + sum(v.nbytes for v in d["params"].values())}
    for name, fn in functions.items():
        result = fn(x)  # warm call; then nothing of it stays alive
        result.numpy()
        del result
        rt.synchronize()
        before = rt.memory_stats()["allocated"]
        rt.reset_peak_memory_stats()
        result = fn(x)
        out["output"] = result.numpy().nbytes
        peak = rt.memory_stats()["peak"]
        del result
        entry = {"peak": peak, "before": before}
        plan = getattr(fn, "memory_plan", None)
        if plan is not None:
            try:
                entry["planned"] = plan(x)["peak_bytes"]
            except Exception as e:  # noqa: BLE001  (shown as the reason, not fatal)
                entry["planned_na"] = first_line(e)
        out[name] = entry
    return out


def child(group, workloads, quick, reps_override, scratch):
    s = sizes(quick)
    info = {}
    results, memory = {}, {}
    try:
        if group == "kiln":
            import kiln
            info["version"] = kiln.__version__
        else:
            import torch
            torch.set_num_threads(2)
            info.update(version=torch.__version__, threads=torch.get_num_threads())
            if group == "ort":
                import onnxruntime
                info["ort"] = onnxruntime.__version__
    except Exception as e:  # noqa: BLE001  (a missing package: every variant n/a)
        why = first_line(e)
        print(json.dumps({"info": info, "results": {w: {v: {"na": why} for v in GROUPS[group]}
                                                    for w in workloads}, "memory": {}}))
        return
    for workload in workloads:
        d = data(workload, s)
        try:
            start = time.perf_counter()
            if group == "kiln":
                functions, x = build_kiln(workload, d)
                variants = {name: (lambda f=f: f(x).numpy()) for name, f in functions.items()}
            else:
                variants = build_torch(workload, d, group, scratch, info)
            setup_s = time.perf_counter() - start if group == "ort" else 0.0
        except Exception as e:  # noqa: BLE001  (export or build failure: n/a with the reason)
            why = first_line(e)
            results[workload] = {v: {"na": why} for v in GROUPS[group]}
            continue
        with contextlib.nullcontext() if group == "kiln" else torch_inference_mode():
            results[workload] = {
                name: measure(workload, name, call, setup_s, scratch,
                              reps_override or reps_for(workload, quick))
                for name, call in variants.items()}
        if group == "kiln" and workload == "block":
            memory = kiln_memory(functions, x, d)
    print(json.dumps({"info": info, "results": results, "memory": memory}))


def torch_inference_mode():
    import torch
    return torch.inference_mode()


def measure(workload, name, call, setup_s, scratch, reps):
    """One variant: its first call, the check against Kiln eager, then `reps` timed calls."""
    ref_path = os.path.join(scratch, f"{workload}.kiln_eager.npy")
    try:
        start = time.perf_counter()
        got = np.array(call())  # a copy: later calls may reuse the result's memory
        first_s = setup_s + time.perf_counter() - start
    except Exception as e:  # noqa: BLE001  (a variant that fails to run: n/a with the reason)
        return {"na": first_line(e)}
    if name == "kiln eager" and not os.path.exists(ref_path):
        np.save(ref_path, got)  # the first Kiln child's result is every child's reference
    if not os.path.exists(ref_path):
        return {"na": "no Kiln eager result to check against"}
    want = np.load(ref_path)
    if got.shape != want.shape:
        return {"mismatch": f"MISMATCH: shape {got.shape}, kiln eager {want.shape}"}
    mismatch = check(workload, got, want)
    if mismatch:
        return {"mismatch": mismatch}
    return {"first_s": first_s, "err": max_err(got, want),
            "times": call_times(call, reps, warmup=max(2, reps // 10))}


def run_child(group, args, scratch):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", group,
           "--workloads", ",".join(args.workloads), "--scratch", scratch]
    if args.quick:
        cmd.append("--quick")
    if args.reps:
        cmd += ["--reps", str(args.reps)]
    failed = None
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.child_limit)
        if proc.returncode == 0:
            return json.loads(proc.stdout.strip().splitlines()[-1])
        lines = [l for l in proc.stderr.strip().splitlines() if l.strip()]
        failed = f"child failed (exit status {proc.returncode}): " + \
            (lines[-1][:140] if lines else "no output")
    except subprocess.TimeoutExpired:
        failed = f"child killed after {args.child_limit:.0f} s"
    return {"info": {}, "memory": {},
            "results": {w: {v: {"na": failed} for v in GROUPS[group]} for w in args.workloads}}


def merge(into, got):
    """Adds one child run's samples to `into` ({} at first)."""
    into.setdefault("info", {}).update(got["info"])
    if got["memory"]:
        into["memory"] = got["memory"]
    for workload, variants in got["results"].items():
        for name, r in variants.items():
            m = into.setdefault("results", {}).setdefault(workload, {}).setdefault(name, {})
            if "mismatch" in r:
                m["mismatch"] = r["mismatch"]
            elif "times" in r:
                m.pop("na", None)
                m.setdefault("times", []).extend(r["times"])
                m.setdefault("first_s", []).append(r["first_s"])
                m["err"] = max(m.get("err", 0.0), r["err"])
            elif "times" not in m:
                m["na"] = r["na"]
    return into


# ---------------------------------------------------------------------------------------------
# Report


def best(r):
    return min(r["times"]) if "times" in r else None


def fmt_ms(seconds):
    return f"{seconds * 1e3:.3f}" if seconds < 0.01 else f"{seconds * 1e3:.2f}"


def fmt_mib(n):
    return f"{n / 2**20:.2f} MiB"


def workload_table(workload, results):
    jit = results.get(JIT, {})
    rows = []
    for name in VARIANTS:
        r = results.get(name, {"na": "not run"})
        if "times" in r:
            t = f"{fmt_ms(min(r['times']))} / {fmt_ms(statistics.median(r['times']))}"
            ratio = f"{min(r['times']) / best(jit):.2f}x" if best(jit) else "n/a"
            first = f"{min(r['first_s']):.3f} s"
            status = f"ok (max abs err {r['err']:.1e})" if name != "kiln eager" else "reference"
        else:
            t, ratio, first = "n/a", "n/a", "n/a"
            status = r.get("mismatch") or f"n/a ({r['na']})"
        rows.append([name, t, ratio, first, status])
    print(f"### {WORKLOADS[workload]}\n")
    print_table(["variant", "ms best / median", f"x vs {JIT}", "first call", "check"], rows)


def print_table(columns, rows):
    """A markdown table, padded to read as text too; the first and last columns left-aligned."""
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    print("| " + " | ".join(c.ljust(w) for c, w in zip(columns, widths)) + " |")
    print("|" + "|".join("-" * (w + 1) + ("-" if i in (0, len(widths) - 1) else ":")
                         for i, w in enumerate(widths)) + "|")
    for r in rows:
        print("| " + " | ".join(v.ljust(w) for v, w in zip(r, widths)) + " |")
    print()


def memory_table(memory):
    if not memory:
        print("### block peak memory\n\nn/a (the Kiln child did not measure it)\n")
        return
    print("### block peak memory (Kiln's caching allocator)\n")
    print(f"inputs + weights: {fmt_mib(memory['inputs_weights'])}; result: "
          f"{fmt_mib(memory['output'])}\n")
    fixed = memory["inputs_weights"]
    rows, planned_any = [], False
    for name in GROUPS["kiln"]:
        m = memory.get(name)
        if m is None:
            continue
        m["above"] = m["peak"] - fixed
        planned = "n/a (no memory_plan())"
        if "planned" in m:
            planned, planned_any = fmt_mib(m["planned"]), True
        elif "planned_na" in m:
            planned = f"n/a ({m['planned_na']})"
        rows.append([name, fmt_mib(m["peak"]), fmt_mib(m["above"]),
                     fmt_mib(m["before"] - fixed), planned])
    print_table(["variant", "peak during the call", "peak - inputs - weights",
                 "held between calls", "planned peak (memory_plan)"], rows)
    eager, jit = memory.get("kiln eager"), memory.get(JIT)
    if eager and jit and jit["above"] > 0:
        print(f"memory: peak - inputs - weights, kiln eager / {JIT} = "
              f"{eager['above'] / jit['above']:.2f}x")
    if jit and "planned" in jit:
        # What the call itself added: its peak over what was allocated before it (the inputs and
        # weights as the allocator rounds them, and whatever the built graph holds).
        added = jit["peak"] - jit["before"]
        within = "within" if added <= jit["planned"] else "ABOVE"
        print(f"memory: {JIT} peak - allocated before the call {fmt_mib(added)} "
              f"({added} bytes), planned {fmt_mib(jit['planned'])} ({jit['planned']} bytes): "
              f"{within} the plan")
    if not planned_any:
        print("memory: the jitted function has no memory_plan() (or it failed): "
              "planned column skipped")
    print()


def ratio_line(results, other, target):
    o, k = results.get(other, {}), results.get(JIT, {})
    if not best(o) or not best(k):
        why = o.get("mismatch") or o.get("na") or k.get("mismatch") or k.get("na") or "not run"
        return f"{other} / {JIT}: n/a ({why}) (target >= {target}x)"
    b = best(o) / best(k)
    med = statistics.median(o["times"]) / statistics.median(k["times"])
    met = "met" if b >= target else "MISSED"
    return f"{other} / {JIT} = {b:.2f}x best, {med:.2f}x median (target >= {target}x): {met}"


def targets(data, quick):
    print("### targets" + (" (SMOKE RUN: reduced sizes, the verdicts do not apply)" if quick
                           else "") + "\n")
    res = data.get("results", {})
    if "gelu" in res:
        k = res["gelu"].get(JIT, {})
        if best(k):
            met = "met" if best(k) <= 0.010 else "MISSED"
            print(f"- gelu: {JIT} = {fmt_ms(best(k))} ms best, "
                  f"{fmt_ms(statistics.median(k['times']))} ms median (target <= 10 ms): {met}")
        else:
            print(f"- gelu: {JIT} n/a ({k.get('mismatch') or k.get('na')}) (target <= 10 ms)")
    if "block" in res:
        for other, target in (("torch eager", 1.5), ("torch.compile", 1.0), ("onnxruntime", 1.0)):
            print(f"- block: {ratio_line(res['block'], other, target)}")
    for mlp in MLP_WIDTHS:
        if mlp in res:
            print(f"- {mlp}: {ratio_line(res[mlp], 'torch eager', 2.0)}")
    print()


def header(data, args):
    info = {g: data[g].get("info", {}) for g in GROUPS}
    torch_info = info["torch"] or info["compile"] or info["ort"]
    env = {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)}
    print(f"machine: {machine()}")
    print(f"python {platform.python_version()}, numpy {np.__version__}, "
          f"kiln {info['kiln'].get('version', 'n/a')}, "
          f"torch {torch_info.get('version', 'n/a')}, "
          f"onnxruntime {info['ort'].get('ort', 'n/a')} "
          f"(exported at ONNX opset {info['ort'].get('opset', 'n/a')})")
    print(f"threads: kiln default (OpenMP, one per core unless OMP_NUM_THREADS is set), "
          f"torch {torch_info.get('threads', 'n/a')} (torch.set_num_threads(2)), "
          f"onnxruntime intra_op_num_threads=2")
    print(f"thread environment (as found, not changed): {env or 'none set'}")
    reps = args.reps or ("3" if args.quick else "gelu 20, block 50, mlp 300, mlp_small 2000")
    print(f"{args.rounds} round(s), groups alternated; {reps} timed calls per variant and round, "
          f"after a warm-up")
    if args.quick:
        print("--quick: SMOKE RUN, reduced sizes (gelu 1M elements, block batch 2 seq 32) and few "
              "calls; the labels name the full sizes; no number here is a result")
    print()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few repetitions")
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help=f"comma-separated subset of {','.join(WORKLOADS)}")
    parser.add_argument("--skip", default="",
                        help=f"comma-separated variant groups not to run: {','.join(GROUPS)}")
    parser.add_argument("--reps", type=int, default=0,
                        help="timed calls per variant and round (default gelu 20, block 50, "
                             "mlp 300, mlp_small 2000; 3 with --quick)")
    parser.add_argument("--rounds", type=int, default=0,
                        help="child runs per group, alternated (default 3; 1 with --quick)")
    parser.add_argument("--child-limit", type=float, default=1200,
                        help="seconds a child may run (default 1200)")
    parser.add_argument("--child", choices=GROUPS, help=argparse.SUPPRESS)
    parser.add_argument("--scratch", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.workloads = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in args.workloads if w not in WORKLOADS]
    skip = [g for g in args.skip.split(",") if g]
    if unknown or any(g not in GROUPS or g == "kiln" for g in skip):
        parser.error(f"workloads come from {list(WORKLOADS)}; --skip from torch,compile,ort")
    args.rounds = args.rounds or (1 if args.quick else 3)
    if args.child:
        return child(args.child, args.workloads, args.quick, args.reps, args.scratch)

    data = {g: {} for g in GROUPS}
    with tempfile.TemporaryDirectory(prefix="jit_cpu_bench.") as scratch:
        for _ in range(args.rounds):
            for group in GROUPS:  # kiln first: its eager results are the reference
                if group not in skip:
                    merge(data[group], run_child(group, args, scratch))
    header(data, args)
    merged = {"results": {w: {} for w in args.workloads}}
    for group in GROUPS:
        for workload, variants in data[group].get("results", {}).items():
            merged["results"][workload].update(variants)
    for workload in args.workloads:
        workload_table(workload, merged["results"][workload])
        if workload == "block":
            memory_table(data["kiln"].get("memory"))
    targets(merged, args.quick)
    # A mismatch anywhere, or a Kiln variant that did not run, fails the run; other libraries'
    # n/a (torch.compile or the export failing, a package missing) are reported only.
    failed = [f"{w} / {v}: {r['mismatch']}" for w, vs in merged["results"].items()
              for v, r in vs.items() if "mismatch" in r]
    failed += [f"{w} / {v}: n/a ({r['na']})" for w, vs in merged["results"].items()
               for v, r in vs.items() if v in GROUPS["kiln"] and "na" in r]
    if failed:
        print("FAILED: results that disagree with Kiln eager, or Kiln variants that did not run:",
              file=sys.stderr)
        for line in failed:
            print(f"  {line}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
