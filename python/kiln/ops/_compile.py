"""Running the compiler for CustomOpBuilder: parallel compiles, the link, the precompiled header,
and build errors that show the compiler's own diagnostics.

Imported only when something has to be built (it imports subprocess, which a cached load does not
need).
"""

import os
import shlex
import subprocess
import time

from . import _cache
from ..errors import KilnBuildError

PCH_HEADER = "kiln_pch.h"
# A temporary precompiled header older than this was left by a build that died.
PCH_STALE_SECONDS = 600


def build_error(message, command, diagnostics):
    """A KilnBuildError whose text is the message, the compiler's diagnostics and the command."""
    text = f"{message}\n{diagnostics.rstrip()}\ncommand: {shlex.join(command)}"
    error = KilnBuildError(text)
    error.command = list(command)
    error.diagnostics = diagnostics
    return error


def start_compiler_version(cxx):
    """Starts `cxx --version` (recorded in the manifest), to run beside the compiles."""
    try:
        return subprocess.Popen([cxx, "--version"], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
    except OSError as e:
        raise KilnBuildError(f"cannot run the C++ compiler {cxx!r}: {e}; install one (g++ or "
                             f"clang++) or point the CXX environment variable at it") from None


def compiler_version(proc):
    """The first line that start_compiler_version's process printed."""
    return proc.communicate()[0].split("\n", 1)[0].strip() or "unknown"


def read_depfile(path):
    """The files a Make-style dependency file (``-MD``) lists as prerequisites."""
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        text = f.read().replace("\\\n", " ")
    deps = []
    for rule in text.split("\n"):
        if ":" not in rule:
            continue
        _, prerequisites = rule.split(": ", 1) if ": " in rule else rule.split(":", 1)
        word = ""
        i = 0
        while i < len(prerequisites):
            c = prerequisites[i]
            if c == "\\" and i + 1 < len(prerequisites) and prerequisites[i + 1] in " #":
                word += prerequisites[i + 1]
                i += 2
                continue
            if c == "$" and prerequisites[i + 1:i + 2] == "$":
                word += "$"
                i += 2
                continue
            if c.isspace():
                if word:
                    deps.append(word)
                word = ""
            else:
                word += c
            i += 1
        if word:
            deps.append(word)
    return deps


def compile_all(jobs, verbose):
    """Runs the compile commands in `jobs` ([(source, command)]) in parallel, one per core.

    Returns when all have finished; raises KilnBuildError for the first that failed (after
    letting the others finish, so no compiler keeps writing into a folder being removed).
    """
    limit = max(1, os.cpu_count() or 1)
    pending = list(jobs)
    running = []
    failures = []
    while pending or running:
        while pending and len(running) < limit:
            source, command = pending.pop(0)
            if verbose:
                print(f"kiln.ops: {shlex.join(command)}", flush=True)
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
            running.append((source, command, proc))
        source, command, proc = running.pop(0)
        output = proc.communicate()[0].decode("utf-8", errors="replace")
        if proc.returncode != 0:
            failures.append((source, command, proc.returncode, output))
            pending.clear()  # start nothing new; finish what runs
    if failures:
        source, command, code, output = failures[0]
        raise build_error(f"compiling {source} failed (the compiler exited with status {code}):",
                          command, output)


def link(command, verbose):
    if verbose:
        print(f"kiln.ops: {shlex.join(command)}", flush=True)
    proc = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        output = proc.stdout.decode("utf-8", errors="replace")
        # The link runs with --no-undefined (CustomOpBuilder._link_flags): say what the usual
        # cause is and its two cures.
        hint = ("; a symbol below is used but defined in no source or library linked: define "
                "it, or add the library that does to ldflags (-l<name>)"
                if "undefined reference" in output else "")
        raise build_error(f"linking failed (the linker exited with status {proc.returncode})"
                          f"{hint}:", command, output)


def linker_flags():
    """gold links a small library 3 to 5x faster than the default BFD linker (bench/RESULTS.md);
    used when installed. A user's own -fuse-ld in ldflags comes later and wins."""
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if folder and os.access(os.path.join(folder, "ld.gold"), os.X_OK):
            return ["-fuse-ld=gold"]
    return []


def kiln_headers_digest(include_dir):
    """A digest of every public Kiln header (what a precompiled kiln/extension.h depends on
    besides the compiler and the flags)."""
    parts = []
    root = os.path.join(include_dir, "kiln")
    for folder, subdirs, files in os.walk(root):
        subdirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            parts.append(f"{os.path.relpath(path, root)} {_cache.file_digest(path)}")
    return _cache.digest("\n".join(parts).encode())


def usable_pch(pch_dir):
    """The -include flags that use the precompiled header in `pch_dir`, or [] when it is not
    built yet."""
    gch = os.path.join(pch_dir, PCH_HEADER + ".gch")
    try:
        _cache.check_private(gch)
    except FileNotFoundError:
        return []
    return ["-include", os.path.join(pch_dir, PCH_HEADER)]


def start_pch_build(cxx, flags, pch_dir):
    """Starts compiling kiln/extension.h into `pch_dir` in the background and returns at once.

    The first build in a cache does not wait for it (precompiling takes longer than compiling a
    small op); later builds with the same flags use it. It runs detached (a double fork through
    sh), writes to a temporary name and renames, so it is never seen half-written, and a second
    builder finding one in progress does not start another.
    """
    _cache.private_dir(pch_dir)
    header = os.path.join(pch_dir, PCH_HEADER)
    if not os.path.exists(header):
        _cache.write_atomically(header, "#include <kiln/extension.h>\n", pch_dir)
    tmp = os.path.join(pch_dir, f"{PCH_HEADER}.gch.tmp-{os.getpid()}")
    for name in os.listdir(pch_dir):
        if name.startswith(PCH_HEADER + ".gch.tmp-"):
            other = os.path.join(pch_dir, name)
            try:
                if time.time() - os.stat(other).st_mtime < PCH_STALE_SECONDS:
                    return  # another builder is precompiling
                os.unlink(other)  # left by a killed build
            except FileNotFoundError:
                pass
    command = [cxx, *flags, "-x", "c++-header", header, "-o", tmp]
    script = (f"{shlex.join(command)} && mv -f {shlex.quote(tmp)} "
              f"{shlex.quote(os.path.join(pch_dir, PCH_HEADER + '.gch'))}; "
              f"rm -f {shlex.quote(tmp)}")
    subprocess.run(["sh", "-c", f"( {script} ) </dev/null >/dev/null 2>&1 &"], check=False)
