"""A backend written in Python (make demo).

    python examples/custom_backend/python_backend.py

The way to prototype a backend before writing its C++ (or to drive a device's Python SDK): an
object with build and run, registered with kiln.graph.register_custom_backend. This one computes
the elementwise ops it knows in NumPy, as a device would run its own kernels, and declines the
rest in supports(), which the jit then runs on kiln_cpu. The result is checked against eager.
"""

import numpy as np

import kiln
from kiln import mint

# The ops this "device" runs, as NumPy functions of the nodes' input arrays.
KERNELS = {
    "Add": np.add,
    "Mul": np.multiply,
    "Sub": np.subtract,
    "Exp": np.exp,
    "Tanh": np.tanh,
}


class NumpyDevice:
    def __init__(self):
        self.runs = 0

    def supports(self, node):
        return node.op in KERNELS

    def build(self, graph, config):
        print(f"build {graph!r}: {[node.op for node in graph.nodes]}")
        return graph  # a real backend would compile it here

    def run(self, graph, inputs):
        self.runs += 1
        values = {v: inputs[v.index].numpy() for v in graph.inputs}
        values.update({v: v.tensor.numpy() for v in graph.constants})
        for node in graph.nodes:
            args = [values[i] for i in node.inputs]
            values[node] = KERNELS[node.op](*args).astype(node.dtype.name)
        return [kiln.tensor(values[v]) for v in graph.outputs]


def block(x, w):
    h = mint.tanh(x * 2.0 + 1.0)
    return mint.exp(mint.matmul(h, w) - 1.0)  # matmul runs on kiln_cpu


def main():
    device = NumpyDevice()
    kiln.graph.register_custom_backend("numpy_device", device)
    f = kiln.jit(block, backend="numpy_device")
    rng = np.random.default_rng(0)
    x = kiln.tensor(rng.standard_normal((4, 8)).astype(np.float32))
    w = kiln.tensor(rng.standard_normal((8, 3)).astype(np.float32) * 0.1)
    got = f(x, w)
    np.testing.assert_allclose(got.numpy(), block(x, w).numpy(), rtol=1e-5, atol=1e-6)
    print(f"numpy_device ran {device.runs} parts; the result equals eager")
    kiln.graph.unregister_custom_backend("numpy_device")


if __name__ == "__main__":
    main()
