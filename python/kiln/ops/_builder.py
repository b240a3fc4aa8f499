"""CustomOpBuilder: compiles C++ sources against kiln/extension.h, caches and loads the library.

See Note [Extension cache] in docs/architecture.md ("Custom operators") for the design.
"""

import keyword
import os
import types

from .. import _C
from ..errors import KilnBuildError, KilnTypeError, KilnValueError
from . import _cache

_KEY_FORMAT = "kiln-extension-key 1"
_BACKENDS = ("CPU",)
# Manifests (source versions) kept per extension name; older ones and their libraries are removed.
_KEEP_BUILDS = 8
_loaded = {}  # library path -> module: a library loads once per process
_active = {}  # extension name -> the library whose ops the registry holds


def _find_program(name):
    """The absolute path of an executable named like `which` does, or None."""
    if os.sep in name:
        return os.path.abspath(name) if os.access(name, os.X_OK) else None
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(folder or ".", name)
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return path
    return None


def _string_list(value, what):
    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)):
        value = [value]
    try:
        return [os.fspath(v) for v in value]
    except TypeError:
        raise KilnTypeError(f"{what}: expected a list of strings, got "
                            f"{type(value).__name__}") from None


# Compiler options whose argument is a file or folder, joined ("-Iinc") or separate ("-I", "inc").
_PATH_OPTIONS = ("-isystem", "-iquote", "-idirafter", "-include", "-imacros", "-I")


def _absolute_flag_paths(flags):
    """``flags`` with the relative path of each of _PATH_OPTIONS made absolute against the working
    directory: the compiler resolves them there, so the same flags in another folder read other
    headers, which the key (flags as text) and the manifest (headers recorded as absolute paths)
    would not tell apart. A path starting with "=" or "$SYSROOT" (under the sysroot) is kept."""
    resolved = []
    option = None  # the option whose separate argument comes next
    for flag in flags:
        if option is not None:
            resolved.append(_absolute_path(flag))
            option = None
            continue
        option = next((o for o in _PATH_OPTIONS if flag.startswith(o)), None)
        if option is None or flag == option:
            resolved.append(flag)
        else:
            # "-I-" and clang's "-include-pch" or "-isystem-after" are other options.
            joined = flag[len(option):]
            resolved.append(flag if joined.startswith("-") else option + _absolute_path(joined))
            option = None
    return resolved


def _absolute_path(path):
    return path if path.startswith(("=", "$SYSROOT")) else os.path.abspath(path)


def _library_dir():
    """The folder holding libkiln.so (the package folder, in a wheel and in a development
    build alike)."""
    return os.path.dirname(os.path.abspath(_C.__file__))


class CustomOpBuilder:
    """Builds a custom-op library from C++ sources and loads it as a Python module.

    ``name`` names the module and its cache folder; ``sources`` are C++ files (each may hold a
    ``KILN_EXTENSION`` block); ``include_paths`` and ``cflags`` are passed to the compiler,
    ``cflags`` and ``ldflags`` to the linker, after Kiln's own flags (so they win); ``build_dir``
    is the cache root (default ``$KILN_EXTENSION_DIR`` or ``~/.cache/kiln/extensions``);
    ``debug`` builds with ``-O0 -g`` instead of ``-O2``; ``verbose`` prints every command. The
    compiler is ``$CXX`` or ``c++``.

    Relative paths are resolved against the working directory when the builder is made: the
    sources, ``include_paths`` and the paths in ``cflags`` of ``-I``, ``-isystem``, ``-iquote``,
    ``-idirafter``, ``-include`` and ``-imacros`` (joined, ``-Iinc``, or separate, ``-I inc``), so
    ``cflags=["-Iinc"]`` in another folder is another build that reads that folder's ``inc``, never
    the cached build of the first. Other relative paths in ``cflags`` (``-fprofile-use=...``) are
    passed as written, and the cache cannot tell their files apart across folders: make them
    absolute.

    ``build()`` returns the library's path, compiling only when the cache has no build of these
    sources, the headers they include, these flags, this compiler and this Kiln ABI;
    ``load()`` returns the module. After a call, ``compiled`` says whether the compiler ran. A
    failed compile or link raises KilnBuildError with the compiler's or linker's diagnostics and
    caches nothing; every symbol the sources use must be defined in them or in a library linked
    (libkiln, the C++ runtime, ``ldflags``), so a function declared and never defined is a link
    error naming it.
    """

    def __init__(self, name, sources, backend="CPU", include_paths=None, cflags=None,
                 ldflags=None, build_dir=None, debug=False, *, verbose=False):
        if not isinstance(name, str):
            raise KilnTypeError(f"CustomOpBuilder: name must be a str (it names the module and "
                                f"its cache folder), got {type(name).__name__} {name!r}")
        if not name.isidentifier() or keyword.iskeyword(name):
            # A keyword passes isidentifier() but is no name that Python code can write.
            got = f"the keyword {name!r}" if keyword.iskeyword(name) else repr(name)
            raise KilnValueError(f"CustomOpBuilder: name must be a Python identifier that is not "
                                 f"a keyword (it names the module and its cache folder), got {got}")
        if not isinstance(backend, str) or backend.upper() not in _BACKENDS:
            raise KilnValueError(f"CustomOpBuilder: backend {backend!r} is not supported; Kiln "
                                 f"builds custom ops for {', '.join(repr(b) for b in _BACKENDS)}")
        self.name = name
        self.sources = [os.path.abspath(s) for s in _string_list(sources, "sources")]
        if not self.sources:
            raise KilnValueError("CustomOpBuilder: expected at least one source file, got none")
        self.backend = backend.upper()
        self.include_paths = [os.path.abspath(p) for p in _string_list(include_paths,
                                                                       "include_paths")]
        self.cflags = _absolute_flag_paths(_string_list(cflags, "cflags"))
        self.ldflags = _string_list(ldflags, "ldflags")
        self.build_dir = os.path.abspath(os.fspath(build_dir)) if build_dir is not None else None
        self.debug = bool(debug)
        self.verbose = bool(verbose)
        self.compiled = False

    # ---- what decides a build -------------------------------------------------------------

    def cache_root(self):
        return self.build_dir or _cache.default_root()

    def _compiler(self):
        """(compiler argv, identity): the identity is the resolved executable with its size and
        modification time, so a compiler upgrade is a new key without running it (ccache's
        default)."""
        argv = (os.environ.get("CXX") or "c++").split()
        path = _find_program(argv[0])
        if path is None:
            raise KilnBuildError(f"the C++ compiler {argv[0]!r} was not found on PATH; install "
                                 f"g++ or clang++, or set CXX")
        real = os.path.realpath(path)
        st = os.stat(real)
        return [path, *argv[1:]], f"{real} {st.st_size} {st.st_mtime_ns}"

    def _compile_flags(self):
        opt = ["-O0", "-g"] if self.debug else ["-O2"]
        return ["-std=c++17", "-fPIC", "-fvisibility=hidden", "-fdiagnostics-color=never", "-pipe",
                *opt, "-I" + _kiln_include(), *("-I" + p for p in self.include_paths),
                *self.cflags]

    def _link_flags(self):
        """--no-undefined: a symbol that nothing linked defines (a function declared and never
        defined, a library missing from ``ldflags``) fails the link with the linker naming it,
        not the load with a mangled name. The user's ``cflags`` come too, as make and CMake pass
        them to the link, so that ``-fopenmp``, ``-fsanitize=...`` or ``--coverage`` link their
        runtime; ``ldflags`` come last and win."""
        libdir = _library_dir()
        return ["-L" + libdir, "-lkiln", "-Wl,-rpath," + libdir, "-Wl,--no-undefined",
                *self.cflags, *self.ldflags]

    def _key(self, compiler_identity):
        """(key, {source: digest}): everything known before compiling that decides the build.
        The headers the sources include are checked through the manifest (their list is only
        known after a compile)."""
        digests = {}
        for source in self.sources:
            try:
                digests[source] = _cache.file_digest(source)
            except FileNotFoundError:
                raise FileNotFoundError(f"CustomOpBuilder({self.name!r}): source {source} "
                                        f"does not exist") from None
        lines = [_KEY_FORMAT, f"name {self.name}", f"backend {self.backend}",
                 f"abi {_C._abi_version()}", f"compiler {compiler_identity}",
                 "compile " + "\x1f".join(self._compile_flags()),
                 "link " + "\x1f".join(self._link_flags())]
        lines += [f"source {s} {digests[s]}" for s in self.sources]
        return _cache.digest("\n".join(lines).encode()), digests

    # ---- build and load -------------------------------------------------------------------

    def build(self):
        """Returns the path of the built library, compiling it only when the cache lacks it."""
        root = _cache.private_dir(self.cache_root())
        folder = _cache.private_dir(os.path.join(root, self.name))
        cxx, identity = self._compiler()
        key, digests = self._key(identity)
        manifest_path = os.path.join(folder, key + ".manifest")
        library = _lookup(folder, manifest_path, digests)
        if library is None:
            with _cache.FileLock(os.path.join(folder, "lock")):
                # Another process may have built it while this one waited for the lock.
                library = _lookup(folder, manifest_path, digests)
                if library is None:
                    library = self._build_locked(root, folder, cxx, identity, key,
                                                 manifest_path)
                    self.compiled = True
                    return library
        self.compiled = False
        if self.verbose:
            print(f"kiln.ops: {self.name} is cached at {library}", flush=True)
        return library

    def load(self):
        """Builds when needed and returns the extension as a module of Python functions."""
        library = self.build()
        module = _loaded.get(library)
        # Loading another build of this name replaced the registry's ops: load this one again
        # (the same library, so no new code) to make its ops the registered ones.
        if module is None or _active.get(self.name) != library:
            functions = _C._load_extension(library, self.name)
            module = types.ModuleType(self.name, f"Custom ops built from {', '.join(self.sources)}")
            module.__file__ = library
            module.__all__ = [name for name, _ in functions]
            for name, function in functions:
                function.__module__ = self.name
                setattr(module, name, function)
            _loaded[library] = module
            _active[self.name] = library
        return module

    def _build_locked(self, root, folder, cxx, identity, key, manifest_path):
        import shutil
        import tempfile

        from . import _compile

        for entry in os.listdir(folder):
            if entry.startswith("tmp-"):  # left by a builder that died (we hold the lock)
                shutil.rmtree(os.path.join(folder, entry), ignore_errors=True)
        tmp = tempfile.mkdtemp(prefix=f"tmp-{os.getpid()}-", dir=folder)
        version = _compile.start_compiler_version(cxx[0])
        try:
            flags = self._compile_flags()
            pch = self._precompiled_header(root, cxx, identity, flags, _compile)
            objects, depfiles, jobs = [], [], []
            for i, source in enumerate(self.sources):
                stem = os.path.join(tmp, f"{i}_{os.path.splitext(os.path.basename(source))[0]}")
                objects.append(stem + ".o")
                depfiles.append(stem + ".d")
                jobs.append((source, [*cxx, *flags, "-MD", "-MF", stem + ".d", "-c", source,
                                      "-o", stem + ".o"]))
            try:
                _compile.compile_all([(s, c[:1] + pch + c[1:]) for s, c in jobs], self.verbose)
            except KilnBuildError as e:
                if not pch or ".gch" not in getattr(e, "diagnostics", ""):
                    raise
                # An unusable precompiled header (not the user's code): drop it, build without.
                shutil.rmtree(os.path.dirname(pch[1]), ignore_errors=True)
                _compile.compile_all(jobs, self.verbose)
            output = os.path.join(tmp, "library.so")
            _compile.link([*cxx, "-shared", *_compile.linker_flags(), *objects, "-o", output,
                           *self._link_flags()], self.verbose)
            manifest = self._manifest(key, depfiles, output, _compile.compiler_version(version),
                                      _compile)
            os.chmod(output, 0o700)
            os.replace(output, os.path.join(folder, manifest.library))
            entries = [manifest] + [e for e in _cache.read_manifest(manifest_path)
                                    if e.library != manifest.library]
            _cache.write_atomically(manifest_path, _cache.Manifest.dump(entries), tmp)
        finally:
            version.kill()  # long done on success; not left behind on a failure
            version.wait()
            shutil.rmtree(tmp, ignore_errors=True)
        _prune(folder)
        return os.path.join(folder, manifest.library)

    def _manifest(self, key, depfiles, library, compiler_version, _compile):
        deps = []
        seen = set()
        for depfile in depfiles:
            for path in _compile.read_depfile(depfile):
                path = os.path.abspath(path)
                if path not in seen:
                    seen.add(path)
                    st = os.stat(path)
                    deps.append((path, st.st_size, st.st_mtime_ns, _cache.file_digest(path)))
        full_key = _cache.digest("\n".join([key] + [f"{p} {d}" for p, _, _, d in deps]).encode())
        return _cache.Manifest(f"{self.name}-{full_key[:20]}.so", os.path.getsize(library),
                               _cache.file_digest(library), compiler_version, deps)

    def _precompiled_header(self, root, cxx, identity, flags, _compile):
        """The flags that use a precompiled kiln/extension.h for these flags, or [] (then one is
        started in the background for the next build). KILN_EXTENSION_PCH=0 turns this off."""
        if os.environ.get("KILN_EXTENSION_PCH", "1") == "0":
            return []
        pch_key = _cache.digest("\n".join([identity, *cxx, *flags,
                                           _compile.kiln_headers_digest(_kiln_include())]).encode())
        pch_dir = os.path.join(_cache.private_dir(os.path.join(root, "pch")), pch_key)
        pch = _compile.usable_pch(pch_dir)
        if not pch:
            _compile.start_pch_build(cxx[0], [*cxx[1:], *flags], pch_dir)
        return pch


def _kiln_include():
    from .. import get_include

    return get_include()


def _lookup(folder, manifest_path, digests):
    """The cached library for this key when it is there, intact and its inputs are unchanged."""
    for manifest in _cache.read_manifest(manifest_path):
        if manifest.deps_unchanged(digests):
            library = os.path.join(folder, manifest.library)
            return library if _cache.library_intact(library, manifest) else None
    return None


def _prune(folder):
    """Keeps the newest _KEEP_BUILDS manifests of an extension and the libraries they name."""
    manifests = []
    for entry in os.listdir(folder):
        if entry.endswith(".manifest"):
            path = os.path.join(folder, entry)
            manifests.append((os.stat(path).st_mtime_ns, path))
    manifests.sort(reverse=True)
    for _, path in manifests[_KEEP_BUILDS:]:
        os.unlink(path)
    keep = set()
    for _, path in manifests[:_KEEP_BUILDS]:
        keep.update(entry.library for entry in _cache.read_manifest(path))
    for entry in os.listdir(folder):
        if entry.endswith(".so") and entry not in keep:
            os.unlink(os.path.join(folder, entry))  # a process that loaded it keeps its mapping
