"""What the custom-op builder refuses up front rather than at first use: a library that leaves a
symbol undefined (a KilnBuildError at link time, nothing cached) and a module name that is a
Python keyword. (A Python backend registered as a class: tests/python/test_python_backend.py.)"""

import os

import pytest

import kiln
from conftest import private_dir, write


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
        assert message.startswith("linking failed (the linker exited with status 1); a symbol "
                                  "below is used but defined in no source or library linked: "
                                  "define it, or add the library that does to ldflags "
                                  "(-l<name>):\n")
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
