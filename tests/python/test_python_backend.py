"""Backends written in Python (kiln.graph.register_custom_backend(name, obj)): the graph view
build gets (inputs, constants, nodes, outputs, attrs, multi-output ops), results equal to eager
ones, the jit's options as config, supports() partitioning, clear(), unregistering, and the
errors of every method."""

import runpy
import subprocess
import sys
import threading

import numpy as np
import pytest

import kiln
from conftest import REPO_DIR, assert_close, raises
from kiln import mint


class Interpreter:
    """Runs each node through Value.call, counting the calls."""

    def __init__(self):
        self.graphs = []
        self.configs = []
        self.runs = 0
        self.cleared = 0

    def build(self, graph, config):
        self.graphs.append(graph)
        self.configs.append(config)
        return graph

    def run(self, graph, inputs):
        self.runs += 1
        values = {v: inputs[v.index] for v in graph.inputs}
        values.update({v: v.tensor for v in graph.constants})
        for node in graph.nodes:
            values[node] = node.call(*[values[i] for i in node.inputs])
        return [values[v] for v in graph.outputs]

    def clear(self, built):
        self.cleared += 1


@pytest.fixture
def backend(request):
    """A registered backend (an Interpreter unless the test's param gives a class), unregistered
    after the test."""
    instance = getattr(request, "param", Interpreter)()
    name = f"py_{request.node.name}".replace("[", "_").replace("]", "")
    kiln.graph.register_custom_backend(name, instance)
    yield name, instance
    if name in kiln.graph.list_backends():
        kiln.graph.unregister_custom_backend(name)


def block(x, y):
    values, indices = mint.max(x, 1)
    return mint.exp(x * 2.0 + 1.0) + y, values, indices


def test_results_equal_eager_and_the_graph_is_built_once(backend, rng):
    name, interp = backend
    f = kiln.jit(block, backend=name)
    for _ in range(3):
        x = kiln.tensor(rng.standard_normal((3, 4)).astype(np.float32))
        y = kiln.tensor(rng.standard_normal(4).astype(np.float32))
        for got, want in zip(f(x, y), block(x, y)):
            assert_close(got, want.numpy())
    assert len(interp.graphs) == 1 and interp.runs == 3
    assert name in kiln.graph.list_backends()


def test_the_graph_view_describes_every_value(backend):
    name, interp = backend
    kiln.jit(block, backend=name)(mint.ones(3, 4), mint.ones(4))
    graph = interp.graphs[0]
    assert graph.name == "block"
    assert [(v.kind, v.name, v.index, v.dtype, v.shape) for v in graph.inputs] == [
        ("input", "x", 0, kiln.float32, (3, 4)), ("input", "y", 1, kiln.float32, (4,))]
    ops = [n.op for n in graph.nodes]
    assert ops == ["MaxDim", "TupleGetItem", "TupleGetItem", "Mul", "Add", "Exp", "Add"]
    max_dim, first, second = graph.nodes[:3]
    assert max_dim.attrs == {"dim": 1, "keepdim": False} and max_dim.shape is None
    assert first.inputs == [max_dim] and first.attrs == {"index": 0}
    assert (second.dtype, second.shape) == (kiln.int64, (3,))
    mul = graph.nodes[3]
    assert mul.inputs[0] is graph.inputs[0]
    assert mul.inputs[1].kind == "constant" and mul.inputs[1].tensor.item() == 2.0
    assert graph.outputs == [graph.nodes[-1], first, second]
    assert "Exp(" in str(graph) and "%" in repr(graph.nodes[0])
    # Each value is a snapshot, usable as a key: the backend may keep the graph.
    assert len({v for v in graph.inputs + graph.constants + graph.nodes}) == 2 + 2 + 7


def test_node_call_runs_the_op_eagerly(backend):
    name, interp = backend
    kiln.jit(block, backend=name)(mint.ones(3, 4), mint.ones(4))
    graph = interp.graphs[0]
    x = kiln.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    values, indices = graph.nodes[0].call(x)  # a multi-output op gives a tuple
    assert values.tolist() == [3.0, 7.0, 11.0] and indices.tolist() == [3, 3, 3]
    assert graph.nodes[1].call((values, indices)) is values
    with raises(kiln.KilnTypeError, match="x is a graph input, not a node: only nodes run"):
        graph.inputs[0].call(x)


def test_the_jits_options_reach_build_as_config(backend):
    name, interp = backend
    kiln.jit(lambda x: x + 1, backend=name, tile=64, mode="fast")(mint.ones(2))
    assert interp.configs[0] == {"jit_level": "O1", "backend": name,
                                 "options": {"tile": "64", "mode": "fast"}}


class NoExp(Interpreter):
    def supports(self, node):
        assert node.kind == "node" and all(v.dtype is not None for v in node.inputs)
        return node.op != "Exp"


@pytest.mark.parametrize("backend", [NoExp], indirect=True)
def test_supports_hands_declined_nodes_to_kiln_cpu(backend, rng):
    name, interp = backend
    f = kiln.jit(lambda x: mint.exp(x * 2.0) + 1.0, backend=name)
    a = rng.standard_normal((2, 3)).astype(np.float32)
    assert_close(f(kiln.tensor(a)), np.exp(a * 2.0) + 1.0)
    ops = sorted(n.op for g in interp.graphs for n in g.nodes)
    assert ops == ["Add", "Mul"]  # Exp ran on kiln_cpu, between the backend's two parts


def test_clear_cache_clears_the_built_graphs(backend):
    name, interp = backend
    f = kiln.jit(lambda x: x * 3, backend=name)
    f(mint.ones(2))
    f.clear_cache()
    assert interp.cleared == 1


def test_unregistered_backends_are_refused_and_the_name_is_free_again(backend):
    name, interp = backend
    f = kiln.jit(lambda x: x - 1, backend=name)
    assert f(mint.ones(2)).tolist() == [0.0, 0.0]
    kiln.graph.unregister_custom_backend(name)
    assert name not in kiln.graph.list_backends()
    with raises(kiln.KilnValueError, match=f"unknown backend '{name}'"):
        f(mint.ones(2))
    again = Interpreter()
    kiln.graph.register_custom_backend(name, again)  # an edited backend, under the same name
    assert f(mint.ones(2)).tolist() == [0.0, 0.0]  # built again, on the new one
    assert len(again.graphs) == 1


class Failing(Interpreter):
    def __init__(self, where, result=None):
        super().__init__()
        self.where, self.result = where, result

    def build(self, graph, config):
        if self.where == "build":
            raise ValueError("cannot compile this")
        return super().build(graph, config)

    def run(self, graph, inputs):
        if self.where == "run":
            raise RuntimeError("device lost")
        return self.result if self.result is not None else super().run(graph, inputs)


@pytest.mark.parametrize("failing, error, message", [
    (Failing("build"), kiln.KilnError,
     r"the Python backend's build raised ValueError: cannot compile this \(at .*"
     r"test_python_backend.py:\d+\)\n  in backend 'broken' building graph \".*<lambda>\""),
    (Failing("run"), kiln.KilnError,
     r"the Python backend's run raised RuntimeError: device lost \(at .*test_python_backend.py:"
     r"\d+\)\n  in backend 'broken' running graph \".*<lambda>\""),
    (Failing("", result=42), kiln.KilnTypeError,
     "run must return a list \\(or tuple\\) of kiln.Tensor, one per graph output, or one "
     "kiln.Tensor; got int"),
    (Failing("", result=[np.ones(2)]), kiln.KilnTypeError,
     "run must return kiln.Tensor outputs; output 0 is a ndarray"),
    (Failing("", result=[]), kiln.KilnError, "returned 0 outputs"),
], ids=["build", "run", "not-a-list", "not-a-tensor", "too-few"])
def test_errors_in_the_backend_name_it_and_what_went_wrong(failing, error, message):
    kiln.graph.register_custom_backend("broken", failing)
    try:
        f = kiln.jit(lambda x: x + 1, backend="broken")
        with raises(error, match=message):
            f(mint.ones(2))
        assert mint.ones(2).tolist() == [1.0, 1.0]  # the process goes on
    finally:
        kiln.graph.unregister_custom_backend("broken")


class CallsWrongly(Interpreter):
    """Calls each node with one tensor too many: Kiln's Value.call raises, inside kiln."""

    def run(self, graph, inputs):
        values = {v: inputs[v.index] for v in graph.inputs}
        for node in graph.nodes:
            values[node] = node.call(*[values[i] for i in node.inputs], inputs[0])
        return [values[v] for v in graph.outputs]


def test_an_error_raised_inside_kiln_names_the_backends_line(sync_pipeline):
    # (An asynchronous pipeline raises the op's error at the next sync, not in the backend.)
    kiln.graph.register_custom_backend("calls_wrongly", CallsWrongly())
    try:
        f = kiln.jit(lambda x: mint.exp(x), backend="calls_wrongly")
        # The backend's own line (the call), not the line in kiln that raised.
        with raises(kiln.KilnError, match=r"(?s)the Python backend's run raised .* \(at .*"
                                          r"test_python_backend.py:\d+\)"):
            f(mint.ones(2))
    finally:
        kiln.graph.unregister_custom_backend("calls_wrongly")


def test_registration_errors(backend):
    name, _ = backend
    with raises(kiln.KilnTypeError, match="expected the path of a backend plugin \\(a str or "
                                          "path-like\\) or an object with build\\(graph, "
                                          "config\\) and run\\(built, inputs\\) methods, got "
                                          "Failing without build"):
        kiln.graph.register_custom_backend("nothing", type("Failing", (), {"run": print})())
    with raises(kiln.KilnValueError, match=f"'{name}'.*already registered"):
        kiln.graph.register_custom_backend(name, Interpreter())
    with raises(kiln.KilnValueError):
        kiln.graph.unregister_custom_backend("kiln_cpu")
    with raises(kiln.KilnValueError):
        kiln.graph.unregister_custom_backend("never_registered")


class NumpyAdd(Interpreter):
    """A backend that computes Add itself (in NumPy) and hands back kiln tensors."""

    def supports(self, node):
        return node.op == "Add"

    def run(self, graph, inputs):
        self.runs += 1
        values = {v: inputs[v.index].numpy() for v in graph.inputs}
        values.update({v: v.tensor.numpy() for v in graph.constants})
        for node in graph.nodes:
            a, b = (values[i] for i in node.inputs)
            values[node] = (a + b).astype(a.dtype if a.ndim else b.dtype)
        return [kiln.tensor(values[v]) for v in graph.outputs]


@pytest.mark.parametrize("backend", [NumpyAdd], indirect=True)
def test_a_backend_may_compute_outside_kiln(backend, rng):
    name, interp = backend
    a = rng.standard_normal((4, 5)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    f = kiln.jit(lambda x, y: mint.relu(x + y) + y, backend=name)
    assert_close(f(kiln.tensor(a), kiln.tensor(b)), np.maximum(a + b, 0) + b)
    assert interp.runs == 2  # two parts: the Relu between them ran on kiln_cpu


def test_threads_share_a_python_backend(backend):
    name, interp = backend
    f = kiln.jit(lambda x: x * 2.0 + 1.0, backend=name)
    results, errors = [], []

    def work():
        try:
            for _ in range(20):
                results.append(f(mint.ones(3)).tolist())
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and results == [[3.0, 3.0, 3.0]] * 80
    assert interp.runs == 80


def test_the_interpreter_exits_cleanly_with_a_backend_still_registered():
    # The backend's objects are released at exit, before the interpreter goes (C++ keeps the
    # registration past it).
    code = ("import kiln\n"
            "class B:\n"
            "    def build(self, graph, config):\n"
            "        return graph\n"
            "    def run(self, graph, inputs):\n"
            "        return [inputs[0] + 1]\n"
            "kiln.graph.register_custom_backend('b', B())\n"
            "print(kiln.jit(lambda x: x + 1, backend='b')(kiln.mint.ones(2)).tolist())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (0, "[2.0, 2.0]\n", "")


def test_an_error_reaches_the_caller_of_a_jitted_function_dropped_at_once():
    # Dropping the function while its error propagated ran the backend's clear() with the error
    # pending: the caller got "SystemError: error return without exception set".
    failing = Failing("run")
    kiln.graph.register_custom_backend("broken_once", failing)
    try:
        with raises(kiln.KilnError, match="the Python backend's run raised RuntimeError: device "
                                          "lost"):
            kiln.jit(lambda x: x + 1, backend="broken_once")(mint.ones(2))
        assert failing.cleared == 1
    finally:
        kiln.graph.unregister_custom_backend("broken_once")


def test_unregistering_clears_the_graphs_still_built():
    interp = Interpreter()
    kiln.graph.register_custom_backend("cleared_at_unregister", interp)
    f = kiln.jit(lambda x: x * 2, backend="cleared_at_unregister")
    f(mint.ones(2))
    f(mint.ones(3))
    kiln.graph.unregister_custom_backend("cleared_at_unregister")
    assert interp.cleared == 2


def test_a_missing_optional_input_is_a_none_constant(backend):
    name, interp = backend
    lin = kiln.nn.Linear(3, 2, bias=False)
    kiln.jit(lin, backend=name)(mint.ones(4, 3))
    nones = [v for v in interp.graphs[0].constants if v.tensor is None]
    assert len(nones) == 1 and nones[0].dtype is None and nones[0].shape is None
    assert repr(nones[0]).endswith(": None>")


class NumpyBools(Interpreter):
    def supports(self, node):
        return np.bool_(node.op != "Exp")  # a NumPy bool, as a NumPy test gives


@pytest.mark.parametrize("backend", [NumpyBools], indirect=True)
def test_supports_may_answer_with_any_truth_value(backend):
    name, interp = backend
    assert_close(kiln.jit(lambda x: mint.exp(x) * 2, backend=name)(mint.zeros(2)),
                 np.full(2, 2.0, np.float32))
    assert [n.op for g in interp.graphs for n in g.nodes] == ["Mul"]


class Tracking(Interpreter):
    def run(self, graph, inputs):
        return [inputs[0] * self.weight]  # a result that requires grad


def test_results_carry_no_gradient_whatever_run_returns():
    tracking = Tracking()
    tracking.weight = kiln.tensor([2.0]).requires_grad_()
    kiln.graph.register_custom_backend("tracking", tracking)
    try:
        out = kiln.jit(lambda x: x * 2, backend="tracking")(mint.ones(2))
        assert out.tolist() == [2.0, 2.0] and not out.requires_grad
    finally:
        kiln.graph.unregister_custom_backend("tracking")


def test_all_cannot_name_a_backend():
    with raises(kiln.KilnValueError, match="'all' cannot name a backend: passes registered for "
                                           "backend='all' run for every backend"):
        kiln.graph.register_custom_backend("all", Interpreter())


def test_the_python_backend_example_runs(capsys):
    example = REPO_DIR / "examples" / "custom_backend" / "python_backend.py"
    runpy.run_path(str(example), run_name="__main__")
    assert "the result equals eager" in capsys.readouterr().out
    assert "numpy_device" not in kiln.graph.list_backends()


def with_hook(hook, value):
    """An Interpreter whose optional ``hook`` is ``value``."""
    return type(f"Interpreter_{hook}", (Interpreter,), {hook: value})()


@pytest.mark.parametrize("backend, message", [
    (Interpreter, r"or an object with build\(graph, config\) and run\(built, inputs\) methods, "
                  r"got the class Interpreter: pass an instance \(Interpreter\(\)\)"),
    (with_hook("supports", True), "supports of Interpreter_supports must be a method "
                                  r"\(optional: leave it out for the default\), got bool True"),
    (with_hook("supports", None),
     "supports of Interpreter_supports must be a method .*got NoneType"),
    (with_hook("clear", "no"), "clear of Interpreter_clear must be a method .*got str 'no'"),
])
def test_a_python_backend_that_would_fail_at_its_first_call_is_refused(backend, message):
    with pytest.raises(kiln.KilnTypeError, match=message):
        kiln.graph.register_custom_backend("refused_backend", backend)
    assert "refused_backend" not in kiln.graph.list_backends()
