"""Custom backends beside the built-in one, in one program (make demo).

    python examples/custom_backend/run.py

Builds the two plugins in this folder with CMake against the installed Kiln (find_package(Kiln),
as a user would), registers them with kiln.graph.register_custom_backend, and runs jitted
functions on my_custom_backend (logs Build and Run, delegates to kiln_cpu), on kiln_cpu, and on
my_elementwise_backend (runs only elementwise ops: the jit splits the graph and the rest runs on
kiln_cpu). Every result is checked against the same function run eagerly.
"""

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import kiln
from kiln import mint

HERE = Path(__file__).resolve().parent
BUILD = HERE.parents[1] / "build" / "examples" / "custom_backend"


def say(*args):
    print(*args)
    sys.stdout.flush()  # in order with the plugins' C++ output


def build_plugins():
    for command in (["cmake", "-S", str(HERE), "-B", str(BUILD), "-G", "Ninja",
                     "-DCMAKE_BUILD_TYPE=Release", f"-DKiln_DIR={kiln.get_cmake_dir()}"],
                    ["cmake", "--build", str(BUILD)]):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}")
    return BUILD / "libmy_backend.so", BUILD / "libelementwise_backend.so"


def check(name, got, want):
    error = float(np.max(np.abs(got.numpy() - want.numpy())))
    say(f"  {name}: max |jit - eager| = {error:.1e}")
    assert error <= 1e-5, name


my_backend, elementwise_backend = build_plugins()
kiln.graph.register_custom_backend("my_custom_backend", my_backend)
kiln.graph.register_custom_backend("my_elementwise_backend", elementwise_backend)
say("registered backends:", kiln.graph.list_backends())


def sine(x):
    return mint.sin(x)


def sub_by_neg(x, y):
    return x + mint.neg(y)


def mlp(x, w):
    h = mint.relu(x @ w + 1.0)  # MatMul is not elementwise: it runs on kiln_cpu
    return mint.softmax(h * 2.0, dim=-1) - h


net1 = kiln.jit(sine, backend="my_custom_backend")
net2 = kiln.jit(sub_by_neg, backend="kiln_cpu")
dumps = tempfile.TemporaryDirectory()
net3 = kiln.jit(mlp, backend="my_elementwise_backend", dump_ir=dumps.name)

rng = np.random.default_rng(0)
x = kiln.tensor(rng.standard_normal((4, 8)).astype(np.float32))
y = kiln.tensor(rng.standard_normal((4, 8)).astype(np.float32))
w = kiln.tensor(rng.standard_normal((8, 8)).astype(np.float32))

for call in ("first call (trace + build + run)", "second call (cached graph)"):
    say(f"-- {call}")
    say("net1 on my_custom_backend:")
    check("sin(x)", net1(x), sine(x))
    say("net2 on kiln_cpu (no log: a built-in backend):")
    check("x + neg(y)", net2(x, y), sub_by_neg(x, y))
    say("net3 on my_elementwise_backend, MatMul and Softmax on kiln_cpu:")
    check("softmax(relu(x @ w + 1) * 2) - relu(...)", net3(x, w), mlp(x, w))

say("-- which backend ran what in net3 (from its IR dumps):")
for part in sorted(Path(dumps.name).glob("*.kir"))[1:]:
    step = part.name.split(".")[-2]
    ops = [line.split("=")[1].split("(")[0].strip() for line in part.read_text().splitlines()
           if " = " in line and "const" not in line]
    say(f"  {step:<40} {' '.join(ops)}")
say("net1", net1.cache_info(), "| net2", net2.cache_info(), "| net3", net3.cache_info())
say("net2's graph as traced:")
say(net2.graph(x, y))
