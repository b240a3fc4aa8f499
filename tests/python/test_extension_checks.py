"""What the extension APIs refuse up front rather than at first use: a custom op whose library
leaves a symbol undefined (a KilnBuildError at link time, nothing cached), a module name that is
a Python keyword, and a Python backend registered as a class or with hooks that cannot be
called."""

import os
import textwrap

import pytest

import kiln


def write(path, text):
    path.write_text(textwrap.dedent(text))
    return str(path)


def private_dir(path):
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def test_an_undefined_function_fails_the_link_naming_it_and_caches_nothing(tmp_path):
    source = write(tmp_path / "undefined.cpp", """\
        #include <kiln/extension.h>
        float undefined_fn();
        kiln::Tensor uses(const kiln::Tensor& x) { return kiln::Tensor::scalar(undefined_fn()); }
        KILN_EXTENSION(m) { m.def("uses", &uses, {"x"}); }
    """)
    root = private_dir(tmp_path / "cache")
    builder = kiln.ops.CustomOpBuilder("undefined", [source], build_dir=root, debug=True)
    for _ in range(2):  # nothing was cached: the second load links again and fails again
        with pytest.raises(kiln.KilnBuildError) as info:
            builder.load()
        message = str(info.value)
        assert message.startswith("linking failed (the linker exited with status 1):")
        assert "undefined_fn()" in message and "_Z12undefined_fnv" not in message  # demangled
        assert "-Wl,--no-undefined" in info.value.command
        assert os.listdir(root / "undefined") == ["lock"]  # no library, manifest or temporary


def test_cflags_reach_the_link_so_a_runtime_they_need_is_linked(tmp_path, extension_cache):
    # -fopenmp in cflags alone: its runtime (libgomp) is linked as make and CMake link it, where
    # --no-undefined would otherwise refuse GOMP_parallel.
    source = write(tmp_path / "openmp_sum.cpp", """\
        #include <kiln/extension.h>
        kiln::Tensor count(const kiln::Tensor& x) {
          long total = 0;
        #pragma omp parallel for reduction(+ : total)
          for (long i = 0; i < 1000; ++i) total += i;
          return kiln::Tensor::scalar(static_cast<double>(total + x.numel()));
        }
        KILN_EXTENSION(m) { m.def("count", &count, {"x"}); }
    """)
    ops = kiln.ops.CustomOpBuilder("openmp_sum", [source], cflags=["-fopenmp"],
                                   build_dir=extension_cache, debug=True).load()
    assert ops.count(kiln.mint.ones([3])).item() == 499503


@pytest.mark.parametrize("name", ["class", "None", "lambda"])
def test_a_keyword_cannot_name_a_custom_op_module(name):
    with pytest.raises(kiln.KilnValueError, match=f"name must be a Python identifier that is not "
                                                  f"a keyword .*, got the keyword '{name}'"):
        kiln.ops.CustomOpBuilder(name, ["a.cpp"])


def test_custom_op_module_names_soft_keywords_and_non_strings():
    assert kiln.ops.CustomOpBuilder("match", ["a.cpp"]).name == "match"  # a name in Python code
    with pytest.raises(kiln.KilnValueError, match="got 'my-ops'"):
        kiln.ops.CustomOpBuilder("my-ops", ["a.cpp"])
    with pytest.raises(kiln.KilnTypeError, match="name must be a str .*, got int 3"):
        kiln.ops.CustomOpBuilder(3, ["a.cpp"])


class Interp:
    """A Python backend that runs each node eagerly."""

    def build(self, graph, config):
        return graph

    def run(self, graph, inputs):
        values = {v: inputs[v.index] for v in graph.inputs}
        values.update({v: v.tensor for v in graph.constants})
        for node in graph.nodes:
            values[node] = node.call(*[values[i] for i in node.inputs])
        return [values[v] for v in graph.outputs]

    def supports(self, node):
        return True


def with_hook(hook, value):
    """An Interp whose optional ``hook`` is ``value``."""
    return type(f"Interp_{hook}", (Interp,), {hook: value})()


@pytest.mark.parametrize("backend, message", [
    (Interp, r"or an object with build\(graph, config\) and run\(built, inputs\) methods, got "
             r"the class Interp: pass an instance \(Interp\(\)\)"),
    (with_hook("supports", True), "supports of Interp_supports must be a method "
                                  r"\(optional: leave it out for the default\), got bool True"),
    (with_hook("supports", None), "supports of Interp_supports must be a method .*got NoneType"),
    (with_hook("clear", "no"), "clear of Interp_clear must be a method .*got str 'no'"),
])
def test_a_python_backend_that_would_fail_at_its_first_call_is_refused(backend, message):
    with pytest.raises(kiln.KilnTypeError, match=message):
        kiln.graph.register_custom_backend("refused_backend", backend)
    assert "refused_backend" not in kiln.graph.list_backends()


def test_an_instance_of_the_refused_class_registers_and_runs():
    kiln.graph.register_custom_backend("interp_instance", Interp())
    try:
        f = kiln.jit(lambda x: x * 2.0 + 1.0, backend="interp_instance")
        assert f(kiln.mint.ones([3])).tolist() == [3.0, 3.0, 3.0]
    finally:
        kiln.graph.unregister_custom_backend("interp_instance")
