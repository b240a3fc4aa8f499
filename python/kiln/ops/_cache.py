"""The on-disk cache of built extensions: folders, ownership checks, manifests, locks.

Layout under the cache root (``build_dir``, ``$KILN_EXTENSION_DIR`` or
``~/.cache/kiln/extensions``), every folder private (0700)::

    <name>/lock                     flock() target of builders of <name>
    <name>/<key>.manifest           what a build of these sources + flags produced (see Manifest)
    <name>/<name>-<full key>.so     the library; a new file name for every different build
    <name>/tmp-<pid>-<random>/      a build in progress (removed on success and on failure)
    pch/<pch key>/                  the precompiled kiln/extension.h for one set of flags

Nothing here imports more than ``os``: a cached load runs in a new process in a few
milliseconds (bench/RESULTS.md), and importing ``subprocess``, ``json`` or ``hashlib`` would cost
more than the whole load.
"""

import os

try:
    from _blake2 import blake2b as _blake2b  # hashlib would pull in OpenSSL: 3 ms
except ImportError:  # pragma: no cover (CPython always has it)
    from hashlib import blake2b as _blake2b

from ..errors import KilnError

MANIFEST_FORMAT = "kiln-extension-manifest 2"
# Builds remembered per manifest (one per state of the headers the sources include).
MANIFEST_ENTRIES = 4


def digest(data):
    """A hex digest of bytes (BLAKE2b, 160 bits: a key, not a signature)."""
    return _blake2b(data, digest_size=20).hexdigest()


def file_digest(path):
    with open(path, "rb") as f:
        return digest(f.read())


def _refuse(path, why):
    raise KilnError(f"refusing to use the extension cache at {path}: {why}; fix its permissions "
                    f"or choose another folder (build_dir= or KILN_EXTENSION_DIR)")


def check_private(path, st=None):
    """Refuses a cache folder or file that another user owns or others may write to.

    A library in the cache is loaded into the process: whoever can write it can run code as the
    user, so the cache must be the user's alone.
    """
    st = st if st is not None else os.stat(path)
    if st.st_uid != os.geteuid():
        _refuse(path, f"it belongs to user id {st.st_uid}, not to you (user id {os.geteuid()})")
    if st.st_mode & 0o022:
        _refuse(path, f"it is writable by other users (mode {oct(st.st_mode & 0o777)})")


def private_dir(path):
    """Creates `path` (and missing parents) with mode 0700, then checks it as check_private."""
    try:
        os.makedirs(path, mode=0o700)
        os.chmod(path, 0o700)  # makedirs' mode is filtered by the umask
    except FileExistsError:
        pass
    if not os.path.isdir(path):
        _refuse(path, "it exists and is not a folder")
    check_private(path)
    return path


def default_root():
    env = os.environ.get("KILN_EXTENSION_DIR")
    if env:
        return env
    cache_home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache_home, "kiln", "extensions")


class Manifest:
    """What one build produced: the library and every file the compiler read.

    A manifest file (one per key: sources, flags, compiler, ABI) holds up to MANIFEST_ENTRIES of
    these, newest first, so switching a header back and forth finds each build again (ccache's
    manifests work the same way). Text, one record a line, an entry starting at each
    ``library`` line (paths last, so they may hold spaces)::

        kiln-extension-manifest 2
        library <file name> <size> <digest>
        compiler <compiler --version, first line>
        dep <size> <mtime_ns> <digest> <path>
    """

    def __init__(self, library, library_size, library_digest, compiler_version, deps):
        self.library = library
        self.library_size = library_size
        self.library_digest = library_digest
        self.compiler_version = compiler_version
        self.deps = deps  # [(path, size, mtime_ns, digest)]

    def lines(self):
        return [f"library {self.library} {self.library_size} {self.library_digest}",
                f"compiler {self.compiler_version}"] + [
                    f"dep {size} {mtime} {d} {path}" for path, size, mtime, d in self.deps]

    @staticmethod
    def dump(entries):
        lines = [MANIFEST_FORMAT]
        for entry in entries[:MANIFEST_ENTRIES]:
            lines += entry.lines()
        return "\n".join(lines) + "\n"

    @classmethod
    def parse(cls, text):
        """The entries in `text`, or None when it is not a manifest (truncated, another
        format)."""
        lines = text.split("\n")
        if len(lines) < 4 or lines[0] != MANIFEST_FORMAT or lines[-1] != "":
            return None
        entries = []
        try:
            i = 1
            while i < len(lines) - 1:
                tag, library, size, lib_digest = lines[i].split(" ")
                if tag != "library" or not lines[i + 1].startswith("compiler "):
                    return None
                compiler = lines[i + 1][len("compiler "):]
                i += 2
                deps = []
                while i < len(lines) - 1 and lines[i].startswith("dep "):
                    _, dsize, mtime, d, path = lines[i].split(" ", 4)
                    deps.append((path, int(dsize), int(mtime), d))
                    i += 1
                entries.append(cls(library, int(size), lib_digest, compiler, deps))
        except (ValueError, IndexError):
            return None
        return entries

    def deps_unchanged(self, known_digests):
        """True when every recorded file still has its recorded content.

        A file whose size and modification time match is taken as unchanged (ccache's rule);
        otherwise its content is hashed. `known_digests` maps paths already hashed (the sources).
        """
        for path, size, mtime, d in self.deps:
            known = known_digests.get(path)
            if known is not None:
                if known != d:
                    return False
                continue
            try:
                st = os.stat(path)
            except OSError:
                return False
            if st.st_size == size and st.st_mtime_ns == mtime:
                continue
            try:
                if file_digest(path) != d:
                    return False
            except OSError:
                return False
        return True


def read_manifest(path):
    """The entries of the manifest at `path` (newest first), or [] when there is none or it is
    not valid."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return []
    with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as f:
        check_private(path, os.fstat(fd))
        return Manifest.parse(f.read()) or []


def library_intact(path, manifest):
    """True when the library at `path` is the one the manifest describes (size and digest): a
    truncated or overwritten library is rebuilt, never loaded."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        check_private(path, st)
        if st.st_size != manifest.library_size:
            return False
        return digest(f.read()) == manifest.library_digest


def write_atomically(path, data, tmp_dir):
    """Writes `data` to `path` through a file in `tmp_dir` (same file system) and a rename, so
    readers see the old file or the whole new one, never a part."""
    tmp = os.path.join(tmp_dir, os.path.basename(path) + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(data)
    os.replace(tmp, path)


class FileLock:
    """An exclusive flock() on `path`, held while in the `with` block.

    The kernel releases it when the holder dies, even by SIGKILL, so a crashed builder never
    blocks the next one; compilers started by the holder do not inherit it (close-on-exec).
    """

    def __init__(self, path):
        self.path = path
        self.fd = None

    def __enter__(self):
        import fcntl

        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            check_private(self.path, os.fstat(fd))
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        return self

    def __exit__(self, *exc):
        os.close(self.fd)  # releases the lock
        self.fd = None
