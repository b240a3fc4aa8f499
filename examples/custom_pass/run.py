"""Custom graph passes, three ways (make demo).

    python examples/custom_pass/run.py [--quick]

1. A C++ pass plugin: my_passes.cpp, built with plain CMake against Kiln (find_package(Kiln), as
   a user would). Its AddNegFusionPass, registered for kiln_cpu, makes x + neg(y) run as x - y.
2. A pattern written in Python: x * sigmoid(x) -> silu(x), two kernels become one.
3. A fusion into a custom op: matmul_add_relu.cpp, built with kiln.ops.CustomOpBuilder, registers
   MatMulAddRelu (one oneDNN matmul with the bias and the ReLU fused) with m.def_op; the plugin's
   MatMulAddReluFusion rewrites relu(x @ w + b) to it.

For each: the IR as traced and as the backend receives it, the results against NumPy,
kiln.graph.verify_pass on random instances, and the time per call before and after the pass
(best and median of several rounds; --quick runs fewer).
"""

import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import kiln
from kiln import mint

HERE = Path(__file__).resolve().parent
BUILD = HERE.parents[1] / "build" / "examples" / "custom_pass"
QUICK = "--quick" in sys.argv
ROUNDS, CALLS = (2, 20) if QUICK else (7, 300)


def say(*args):
    print(*args)
    sys.stdout.flush()


def build_plugin():
    for command in (["cmake", "-S", str(HERE), "-B", str(BUILD), "-G", "Ninja",
                     "-DCMAKE_BUILD_TYPE=Release", f"-DKiln_DIR={kiln.get_cmake_dir()}"],
                    ["cmake", "--build", str(BUILD)]):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}")
    return BUILD / "libmy_passes.so"


def check(name, got, want, tol=1e-4):
    error = float(np.max(np.abs(got.numpy() - want)))
    say(f"  {name}: max |kiln - numpy| = {error:.1e}")
    assert error <= tol * max(1.0, float(np.max(np.abs(want)))), name


def show_ir(f, *args):
    say("  as traced:")
    say("    " + f.graph(*args).strip().replace("\n", "\n    "))
    say("  as kiln_cpu receives it:")
    say("    " + f.optimized_graph(*args).strip().replace("\n", "\n    "))


def per_call_us(f, *args):
    """Best and median time per call over ROUNDS rounds of CALLS calls (after a warm-up)."""
    f(*args)
    kiln.runtime.synchronize()
    rounds = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(CALLS):
            f(*args)
        kiln.runtime.synchronize()
        rounds.append((time.perf_counter() - start) / CALLS * 1e6)
    return min(rounds), statistics.median(rounds)


def timed(name, make, args, register):
    """Times a freshly jitted function before and after `register()` adds its pass."""
    before = per_call_us(make(), *args)
    register()
    after = per_call_us(make(), *args)
    say(f"  {name}: {before[0]:.1f} us -> {after[0]:.1f} us per call (best), "
        f"{before[1]:.1f} -> {after[1]:.1f} us (median), speed-up x{before[0] / after[0]:.2f} "
        f"(best), x{before[1] / after[1]:.2f} (median)")


rng = np.random.default_rng(0)


def t(shape):
    return kiln.tensor(rng.standard_normal(shape).astype(np.float32))


# --- 1. the C++ plugin ------------------------------------------------------------------------
plugin = build_plugin()
say(f"== 1. pass plugin {plugin.name} (CMake, find_package(Kiln))")
kiln.graph.register_custom_pass("AddNegFusionPass", plugin, backend="kiln_cpu")


@kiln.jit(backend="kiln_cpu")
def sub_by_neg(x, y):
    return x + mint.neg(y)


x, y = t((4, 8)), t((4, 8))
show_ir(sub_by_neg, x, y)
check("x + neg(y)", sub_by_neg(x, y), x.numpy() - y.numpy())
say(" ", kiln.graph.verify_pass("AddNegFusionPass", trials=30 if QUICK else 100))

# --- 2. a Python pattern ----------------------------------------------------------------------
say("== 2. Python pattern: x * sigmoid(x) -> silu(x)")


def swish(x):
    return x * mint.sigmoid(x)


act_in = t((256, 1024))
timed("swish on [256, 1024]", lambda: kiln.jit(swish), (act_in,),
      lambda: kiln.graph.register_pattern("SiluFusion", src=swish, dst=mint.silu,
                                          check=lambda x: x.dtype is not None
                                          and x.dtype.is_floating_point))
swish_jit = kiln.jit(swish)
show_ir(swish_jit, act_in)
a = act_in.numpy()
check("x * sigmoid(x)", swish_jit(act_in), a / (1 + np.exp(-a)))
say(" ", kiln.graph.verify_pass("SiluFusion", trials=30 if QUICK else 100))

# --- 3. matmul + add + relu into a custom op --------------------------------------------------
say("== 3. matmul + add + relu -> MatMulAddRelu, a custom op (CustomOpBuilder, m.def_op)")
start = time.perf_counter()
builder = kiln.ops.CustomOpBuilder("custom_pass_fusion", [str(HERE / "matmul_add_relu.cpp")],
                                   ldflags=["-ldnnl"])
ops = builder.load()
say(f"  matmul_add_relu.cpp {'compiled' if builder.compiled else 'loaded from the cache'} in "
    f"{time.perf_counter() - start:.2f} s")


def layer(x, w, b):
    return mint.relu(x @ w + b)


for m, k, n in ((64, 256, 256), (512, 512, 512)):
    args = (t((m, k)), t((k, n)) * (1 / np.sqrt(k)), t((n,)))
    if "MatMulAddReluFusion" in [p.name for p in kiln.graph.list_passes()]:
        kiln.graph.unregister_custom_pass("MatMulAddReluFusion")
    timed(f"relu(x @ w + b), x [{m}, {k}], w [{k}, {n}]", lambda: kiln.jit(layer), args,
          lambda: kiln.graph.register_custom_pass("MatMulAddReluFusion", plugin))
fused = kiln.jit(layer)
show_ir(fused, *args)
xs, ws, bs = (v.numpy().astype(np.float64) for v in args)
check("relu(x @ w + b)", fused(*args), np.maximum(xs @ ws + bs, 0))
check("ops.mat_mul_add_relu, eagerly", ops.mat_mul_add_relu(*args), np.maximum(xs @ ws + bs, 0))
say(" ", kiln.graph.verify_pass("MatMulAddReluFusion", trials=30 if QUICK else 100))
say("registered passes:")
for p in kiln.graph.list_passes():
    say(f"  {p.name:<22} backend={p.backend:<9} stage={p.stage:<11} priority={p.priority} "
        f"{'(built in)' if p.builtin else p.source or '(Python pattern)'}")
say("last build's pass report:")
say(fused.pass_report())
