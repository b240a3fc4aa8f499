"""kiln.ops.CustomOpBuilder: the build cache (hits in a new process, edits, concurrent and killed
builders, corrupt entries, permissions), build errors, ABI checks and the command line.

Every build here is a small source compiled with -O0 (debug=True), and most tests reuse the
session's builds, so the file costs a handful of compiles."""

import inspect
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import kiln
from conftest import private_dir, write
from kiln.ops import _cache

TINY = """\
#include <kiln/extension.h>
kiln::Tensor answer(const kiln::Tensor& x) { return kiln::Tensor::scalar(x.numel() + 41); }
KILN_EXTENSION(m) { m.def("answer", &answer, {"x"}); }
"""


def run_python(code, **kwargs):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=300, **kwargs)


@pytest.fixture(scope="session")
def tiny_source(tmp_path_factory):
    return write(tmp_path_factory.mktemp("tiny_src") / "tiny.cpp", TINY)


@pytest.fixture(scope="session")
def tiny_builder(extension_cache, tiny_source):
    builder = kiln.ops.CustomOpBuilder("tiny", [tiny_source], build_dir=extension_cache,
                                       debug=True)
    builder.build()
    return builder


def copied_cache(tmp_path, builder):
    """A private copy of a session cache holding `builder`'s extension (no compile needed)."""
    root = private_dir(tmp_path / "cache")
    shutil.copytree(os.path.join(builder.build_dir, builder.name), root / builder.name)
    return root


def test_cache_hit_in_a_new_process_runs_no_compiler(tiny_builder, tiny_source):
    result = run_python(f"""
        import kiln
        b = kiln.ops.CustomOpBuilder("tiny", [{tiny_source!r}], build_dir={tiny_builder.build_dir!r},
                                     debug=True)
        ops = b.load()
        print(b.compiled, int(ops.answer(kiln.mint.ones([3])).item()))
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "44"]


def test_cache_folders_are_private(tiny_builder):
    for folder in (tiny_builder.build_dir, os.path.join(tiny_builder.build_dir, "tiny")):
        assert os.stat(folder).st_mode & 0o777 == 0o700
    library = tiny_builder.build()
    assert os.stat(library).st_mode & 0o022 == 0


def test_edits_to_sources_and_headers_rebuild_in_the_same_process(tmp_path):
    header = tmp_path / "include" / "probe_version.h"
    header.parent.mkdir()
    write(header, "#define PROBE_VERSION 1\n")
    source_text = """\
        #include <kiln/extension.h>
        #include <kiln/op.h>
        #include "probe_version.h"
        #define STR2(x) #x
        #define STR(x) STR2(x)
        kiln::Tensor version() { return kiln::Tensor::scalar(int64_t{PROBE_VERSION + OFFSET}); }
        KILN_EXTENSION(m) {
          m.def("version", &version);
          m.def_op(kiln::OpDef("BuilderProbe").input("x")
                       .infer([](const kiln::InferContext& c) { return kiln::MetaList{c.input(0)}; })
                       .doc("probe version " STR(PROBE_VERSION)));
        }
    """
    source = write(tmp_path / "probe.cpp", "#define OFFSET 0\n" + textwrap.dedent(source_text))
    builder = kiln.ops.CustomOpBuilder("probe", [source], include_paths=[header.parent],
                                       build_dir=private_dir(tmp_path / "cache"), debug=True)
    first = builder.load()
    assert builder.compiled and first.version().item() == 1
    assert kiln.ops.op_doc("BuilderProbe") == "probe version 1"
    assert builder.load() is first and not builder.compiled

    write(header, "#define PROBE_VERSION 2\n")  # a header the source includes
    second = builder.load()
    assert builder.compiled and second is not first
    assert second.version().item() == 2 and first.version().item() == 1
    assert kiln.ops.op_doc("BuilderProbe") == "probe version 2"  # the new build's op replaced it

    write(tmp_path / "probe.cpp", "#define OFFSET 10\n" + textwrap.dedent(source_text))
    assert builder.load().version().item() == 12 and builder.compiled
    # Going back to a cached build makes its ops the registered ones again.
    write(header, "#define PROBE_VERSION 1\n")
    write(tmp_path / "probe.cpp", "#define OFFSET 0\n" + textwrap.dedent(source_text))
    back = builder.load()
    assert not builder.compiled and back.__file__ == first.__file__
    assert kiln.ops.op_doc("BuilderProbe") == "probe version 1"


def test_a_reload_that_fails_on_a_taken_op_name_leaves_the_loaded_ops_working(tmp_path):
    # The old build's ops came back as copies, not the OpDefs its Python functions hold: jitted
    # calls then failed with "not the registered op of that name", even after undoing the edit.
    source_text = """\
        #include <kiln/extension.h>
        #include <kiln/op.h>
        KILN_EXTENSION(m) {
          m.def_op(kiln::OpDef("ReloadProbe").input("x")
                       .infer([](const kiln::InferContext& c) { return kiln::MetaList{c.input(0)}; })
                       .kernel(kiln::DeviceType::kCPU, [](kiln::KernelContext& k) {
                         kiln::copy_into(k.outputs[0], k.inputs[0]);
                       }));
          EXTRA
        }
    """
    taken = ('m.def_op(kiln::OpDef("Mul").input("x").infer([](const kiln::InferContext& c) '
             '{ return kiln::MetaList{c.input(0)}; }));')
    source = tmp_path / "probe.cpp"
    write(source, textwrap.dedent(source_text).replace("EXTRA", ""))
    builder = kiln.ops.CustomOpBuilder("reload_probe", [source],
                                       build_dir=private_dir(tmp_path / "cache"))
    module = builder.load()
    x = kiln.tensor([1.0, 2.0])
    twice = kiln.jit(lambda v: module.reload_probe(v) * 2)
    assert twice(x).tolist() == [2.0, 4.0]
    write(source, textwrap.dedent(source_text).replace("EXTRA", taken))
    with pytest.raises(kiln.KilnValueError, match="op 'Mul' is already registered"):
        builder.load()
    twice.clear_cache()  # built again from the registry
    assert twice(x).tolist() == [2.0, 4.0]
    assert kiln.jit(lambda v: module.reload_probe(v) + 1)(x).tolist() == [2.0, 3.0]
    write(source, textwrap.dedent(source_text).replace("EXTRA", ""))
    assert builder.load() is module


@pytest.mark.parametrize("cflags", [["-Iinc"], ["-include", "inc/value.h"]],
                         ids=["joined", "separate"])
def test_relative_paths_in_cflags_are_resolved_in_the_working_directory(tmp_path, monkeypatch,
                                                                         cflags):
    # The same flags in another folder name other headers: that is another build, not a hit.
    source = write(tmp_path / "value.cpp", """\
        #include <kiln/extension.h>
        #ifndef VALUE
        #include "value.h"
        #endif
        kiln::Tensor value() { return kiln::Tensor::scalar(int64_t{VALUE}); }
        KILN_EXTENSION(m) { m.def("value", &value); }
    """)
    for folder, value in (("a", 1), ("b", 2)):
        write(private_dir(tmp_path / folder / "inc") / "value.h", f"#define VALUE {value}\n")
    root = private_dir(tmp_path / "cache")

    def load_in(folder):
        monkeypatch.chdir(tmp_path / folder)
        builder = kiln.ops.CustomOpBuilder("relative_flags", [source], cflags=cflags,
                                           build_dir=root, debug=True)
        return builder, builder.load()

    builder, ops = load_in("a")
    assert builder.compiled and ops.value().item() == 1
    builder, ops = load_in("b")
    assert builder.compiled and ops.value().item() == 2
    builder, ops = load_in("a")
    assert not builder.compiled and ops.value().item() == 1


def test_two_concurrent_builders_compile_once_and_both_load(tmp_path, tiny_source):
    root = private_dir(tmp_path / "cache")
    code = f"""
        import kiln
        b = kiln.ops.CustomOpBuilder("tiny", [{tiny_source!r}], build_dir={str(root)!r}, debug=True)
        ops = b.load()
        print(b.compiled, int(ops.answer(kiln.mint.ones([1])).item()))
    """
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outputs):
        assert p.returncode == 0, err
    assert sorted(out.split()[0] for out, _ in outputs) == ["False", "True"]
    assert all(out.split()[1] == "42" for out, _ in outputs)
    assert len([f for f in os.listdir(root / "tiny") if f.endswith(".so")]) == 1


def test_a_builder_killed_mid_compile_never_blocks_the_next(tmp_path, tiny_source):
    root = tmp_path / "new" / "cache"  # does not exist yet: the builder creates it private
    marker = tmp_path / "compiler_started"
    slow_cxx = tmp_path / "slow-c++"
    slow_cxx.write_text(f"#!/bin/sh\necho $$ > {marker}\nsleep 120\nexec c++ \"$@\"\n")
    slow_cxx.chmod(0o755)
    code = f"""
        import kiln
        kiln.ops.CustomOpBuilder("tiny", [{tiny_source!r}], build_dir={str(root)!r}).build()
    """
    builder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)],
                               env={**os.environ, "CXX": str(slow_cxx)})
    deadline = time.time() + 120
    while not marker.exists() and time.time() < deadline and builder.poll() is None:
        time.sleep(0.05)
    assert marker.exists(), "the builder never started the compiler"
    builder.send_signal(signal.SIGKILL)
    builder.wait()
    os.kill(int(marker.read_text()), signal.SIGKILL)  # the orphaned compiler, not ours to keep
    assert any(e.startswith("tmp-") for e in os.listdir(root / "tiny"))  # its half-done build

    started = time.time()
    b = kiln.ops.CustomOpBuilder("tiny", [tiny_source], build_dir=root, debug=True)
    assert b.load().answer(kiln.mint.ones([2])).item() == 43
    assert time.time() - started < 60
    assert not any(e.startswith("tmp-") for e in os.listdir(root / "tiny"))
    for folder in (root, root / "tiny"):
        assert os.stat(folder).st_mode & 0o777 == 0o700


def test_a_truncated_library_is_detected_and_rebuilt(tmp_path, tiny_builder, tiny_source):
    root = copied_cache(tmp_path, tiny_builder)
    b = kiln.ops.CustomOpBuilder("tiny", [tiny_source], build_dir=root, debug=True)
    library = b.build()
    assert not b.compiled
    with open(library, "r+b") as f:
        f.truncate(os.path.getsize(library) // 2)
    assert b.build() == library and b.compiled
    assert b.load().answer(kiln.mint.ones([1])).item() == 42


def test_manifest_round_trips_and_rejects_damage():
    m = _cache.Manifest("x-1.so", 10, "ab", "g++ (Debian 12.2.0)", [("/a b/c.h", 3, 7, "cd")])
    older = _cache.Manifest("x-0.so", 11, "ef", "g++ (Debian 12.2.0)", [])
    text = _cache.Manifest.dump([m, older])
    again, again_older = _cache.Manifest.parse(text)
    assert again.deps == m.deps and again.library == "x-1.so" and again.library_size == 10
    assert again_older.library == "x-0.so" and again_older.deps == []
    assert _cache.Manifest.parse(text[:-5]) is None  # truncated
    assert _cache.Manifest.parse("garbage\n") is None
    assert _cache.Manifest.parse(text.replace("dep 3", "dep x")) is None


def test_a_compile_error_shows_the_users_line_and_leaves_nothing(tmp_path):
    source = write(tmp_path / "broken.cpp", """\
        #include <kiln/extension.h>
        kiln::Tensor broken(const kiln::Tensor& x) {
          return undefined_function(x);
        }
        KILN_EXTENSION(m) { m.def("broken", &broken); }
    """)
    root = private_dir(tmp_path / "cache")
    with pytest.raises(kiln.KilnBuildError) as info:
        kiln.ops.CustomOpBuilder("broken", [source], build_dir=root, debug=True).load()
    message = str(info.value)
    assert message.startswith(f"compiling {source} failed")
    assert f"{source}:3:" in message and "error:" in message and "undefined_function" in message
    assert "\ncommand: " in message and info.value.command[-1].endswith(".o")
    assert os.listdir(root / "broken") == ["lock"]  # no library, manifest or temporary folder


def test_a_library_built_against_another_abi_names_both_versions(tmp_path):
    abi = kiln._C._abi_version()
    source = write(tmp_path / "old_abi.cpp", """\
        #include <kiln/abi.h>
        static int init(void*, KilnPluginReportFn, void*) { return 0; }
        static const KilnPluginEntry kEntry{KILN_ABI_VERSION + 1, "extension", &init};
        KILN_PLUGIN_EXPORT const KilnPluginEntry* kiln_plugin_extension_entry() { return &kEntry; }
    """)
    builder = kiln.ops.CustomOpBuilder("old_abi", [source], build_dir=private_dir(tmp_path / "c"),
                                       debug=True)
    with pytest.raises(kiln.KilnError) as info:
        builder.load()
    assert f"built against Kiln ABI version {abi + 1}" in str(info.value)
    assert f"this Kiln has ABI version {abi}" in str(info.value)


def test_a_cache_writable_by_others_is_refused(tmp_path, tiny_builder, tiny_source):
    root = copied_cache(tmp_path, tiny_builder)
    b = kiln.ops.CustomOpBuilder("tiny", [tiny_source], build_dir=root, debug=True)
    library = b.build()
    os.chmod(library, 0o777)
    with pytest.raises(kiln.KilnError, match=f"refusing to use the extension cache at {library}: "
                                             r"it is writable by other users \(mode 0o777\)"):
        b.build()
    os.chmod(root, 0o777)
    with pytest.raises(kiln.KilnError, match="writable by other users"):
        b.build()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_cache_owned_by_another_user_is_refused(tmp_path, tiny_source):
    root = private_dir(tmp_path / "cache")
    os.chown(root, 12345, 12345)
    with pytest.raises(kiln.KilnError, match=r"it belongs to user id 12345, not to you"):
        kiln.ops.CustomOpBuilder("tiny", [tiny_source], build_dir=root).build()


def test_cache_location_follows_build_dir_then_environment_then_home(monkeypatch, tmp_path):
    monkeypatch.setenv("KILN_EXTENSION_DIR", str(tmp_path / "env"))
    assert kiln.ops.CustomOpBuilder("x", ["a.cpp"]).cache_root() == str(tmp_path / "env")
    assert kiln.ops.CustomOpBuilder("x", ["a.cpp"], build_dir=tmp_path).cache_root() == str(tmp_path)
    monkeypatch.delenv("KILN_EXTENSION_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert kiln.ops.CustomOpBuilder("x", ["a.cpp"]).cache_root() == str(
        tmp_path / "home" / ".cache" / "kiln" / "extensions")


def test_bad_arguments_say_what_was_expected(tmp_path):
    with pytest.raises(kiln.KilnValueError, match="name must be a Python identifier"):
        kiln.ops.CustomOpBuilder("my-ops", ["a.cpp"])
    with pytest.raises(kiln.KilnValueError, match="backend 'GPU' is not supported; Kiln builds "
                                                   "custom ops for 'CPU'"):
        kiln.ops.CustomOpBuilder("ops", ["a.cpp"], backend="GPU")
    with pytest.raises(kiln.KilnValueError, match="expected at least one source file"):
        kiln.ops.CustomOpBuilder("ops", [])
    with pytest.raises(FileNotFoundError, match="missing.cpp does not exist"):
        kiln.ops.CustomOpBuilder("ops", [str(tmp_path / "missing.cpp")],
                                 build_dir=private_dir(tmp_path / "c")).build()


def test_command_line_builds_into_the_same_cache_entry(tiny_builder, tiny_source, tmp_path):
    result = subprocess.run([sys.executable, "-m", "kiln.ops", "build", "tiny", tiny_source,
                             "--build-dir", tiny_builder.build_dir, "--debug"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == tiny_builder.build()
    failed = subprocess.run([sys.executable, "-m", "kiln.ops", "build", "tiny",
                             str(tmp_path / "nope.cpp"), "--build-dir", str(tmp_path)],
                            capture_output=True, text=True, timeout=300)
    assert failed.returncode == 1 and "nope.cpp does not exist" in failed.stderr


def test_a_precompiled_header_is_built_in_the_background_and_used(tmp_path, monkeypatch,
                                                                  capfd):
    monkeypatch.setenv("KILN_EXTENSION_PCH", "1")
    root = private_dir(tmp_path / "cache")
    first = write(tmp_path / "first.cpp", TINY)
    kiln.ops.CustomOpBuilder("first", [first], build_dir=root, debug=True).build()
    deadline = time.time() + 120
    gch = []
    while not gch and time.time() < deadline:
        gch = [f for d in (root / "pch").iterdir() for f in d.glob("kiln_pch.h.gch")]
        time.sleep(0.2)
    assert gch, "no precompiled header appeared"
    second = write(tmp_path / "second.cpp", TINY.replace("41", "1"))
    ops = kiln.ops.CustomOpBuilder("second", [second], build_dir=root, debug=True,
                                   verbose=True).load()
    assert f"-include {gch[0].parent / 'kiln_pch.h'}" in capfd.readouterr().out
    assert ops.answer(kiln.mint.ones([4])).item() == 5


def test_signatures_and_undefined_results_read_as_python(tmp_path, extension_cache):
    # inspect.signature and help() read "name(...)\n--\n\n" at the start of the doc; OpDef's own
    # signature has types and C++ spellings, which they cannot. An undefined Tensor returned is
    # None (it was an error naming nothing: "operation on an undefined tensor").
    source = write(tmp_path / "signature_probe.cpp", """\
        #include <kiln/extension.h>
        #include <kiln/op.h>
        #include <limits>
        #include <tuple>
        std::tuple<kiln::Tensor, kiln::Tensor> maybe(const kiln::Tensor& x, bool both) {
          return {x, both ? x : kiln::Tensor()};
        }
        kiln::Tensor nothing() { return kiln::Tensor(); }
        KILN_EXTENSION(m) {
          using kiln::AttrKind;
          m.def("maybe", &maybe, {"x", "both"});
          m.def("nothing", &nothing);
          m.def_op(kiln::OpDef("SignatureProbe")
                       .input("x")
                       .input("bias", /*optional=*/true)
                       .attr("n", AttrKind::kInt)
                       .attr("k", AttrKind::kInt, int64_t{3})
                       .attr("scale", AttrKind::kFloat, 0.5)
                       .attr("eps", AttrKind::kFloat, std::numeric_limits<double>::infinity())
                       .attr("mode", AttrKind::kString, std::string("it's"))
                       .attr("dims", AttrKind::kInts, std::vector<int64_t>{0, 1})
                       .attr("dtype", AttrKind::kDType, kiln::DType::kFloat16)
                       .attr("flag", AttrKind::kBool, true)
                       .attr("limit", AttrKind::kScalar, std::monostate{})
                       .infer([](const kiln::InferContext& c) { return kiln::MetaList{c.input(0)}; }));
          m.def_op(kiln::OpDef("VariadicProbe").variadic_input("xs").attr("axis", AttrKind::kInt, int64_t{0})
                       .infer([](const kiln::InferContext& c) { return kiln::MetaList{c.input(0)}; }));
        }
    """)
    module = kiln.ops.CustomOpBuilder("signature_probe", [source], build_dir=extension_cache,
                                      debug=True).load()
    x = kiln.tensor([1.0])
    assert str(inspect.signature(module.signature_probe)) == (
        "(x, bias=None, *, n, k=3, scale=0.5, eps=Ellipsis, mode=\"it's\", dims=[0, 1], "
        "dtype='float16', flag=True, limit=None)")
    # As the call takes them: the variadic input is one list, attributes go by position too.
    assert str(inspect.signature(module.variadic_probe)) == "(xs, axis=0)"
    inspect.signature(module.variadic_probe).bind([x, x], 0)
    first, second = module.maybe(x, False)
    assert first.tolist() == [1.0] and second is None
    assert module.maybe(x, True)[1].tolist() == [1.0]
    assert module.nothing() is None
