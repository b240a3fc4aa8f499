"""kiln.graph: the graph side of Kiln that users extend -- passes and backends.

    kiln.graph.register_custom_pass("AddNegFusionPass", "build/libmy_passes.so", backend="kiln_cpu")
    kiln.graph.register_pattern("MulTwoToAdd", src=lambda x: x * 2.0, dst=lambda x: x + x)
    kiln.graph.list_passes()       # [PassInfo(name='AddNegFusionPass', backend='kiln_cpu', ...)]
    print(kiln.graph.verify_pass("MulTwoToAdd"))   # 100 random instances checked: ok
    kiln.graph.unregister_custom_pass("MulTwoToAdd")

    kiln.graph.register_custom_backend("my_custom_backend", "build/libmy_backend.so")
    kiln.graph.register_custom_backend("interp", Interpreter())   # a backend written in Python
    kiln.graph.list_backends()     # ['interp', 'kiln_cpu', 'my_custom_backend', 'reference']
    kiln.graph.unregister_custom_backend("my_custom_backend")   # to register a rebuilt one

Passes rewrite the graphs ``kiln.jit`` traces, before a backend builds them. A pass runs for one
backend or for ``"all"``, in a stage -- ``"frontend"``, ``"pre_fusion"``, ``"fusion"``,
``"post_fusion"``, in that order -- and within a stage by ``priority`` (lower first), then in
registration order. A registration takes effect for every later build on its backends: jitted
functions built before are built again at their next call (functions on other backends keep
theirs). ``f.optimized_graph(*args)`` shows a jitted function's graph after every pass and
``f.pass_report()`` what each pass did.

A pass plugin is a shared library built against ``kiln/pass.h`` (see examples/custom_pass), with
CMake: ``find_package(Kiln)`` and ``-DKiln_DIR=$(python -c "import kiln;
print(kiln.get_cmake_dir())")``. A pattern written in Python (``register_pattern``) is traced into
the same kind of C++ pass. Every failure -- a missing file, a file that is not a shared library or
not a pass plugin, a plugin built for another Kiln ABI version, a pass the plugin does not have, an
unknown stage or backend, a name already registered, a pattern that cannot be traced -- raises a
KilnError that says which. A backend plugin (``kiln/backend.h``, examples/custom_backend) is
loaded by ``register_custom_backend`` with the same care. A backend written in Python is an
object with ``build(graph, config)`` and ``run(built, inputs)`` (see register_custom_backend);
its graph is a ``Graph`` of ``Value``s (kiln/_graph_view.py).
"""

import collections as _collections
import inspect as _inspect
import os as _os

from . import _C
from ._C.graph import list_backends  # noqa: F401
from ._graph_view import Graph, Value
from ._checks import checked_int as _checked_int
from .errors import KilnTypeError as _KilnTypeError
from .errors import KilnValueError as _KilnValueError
from .jit import _call_traced

__all__ = ["register_custom_pass", "unregister_custom_pass", "list_passes", "register_pattern",
           "verify_pass", "register_custom_backend", "unregister_custom_backend", "list_backends",
           "Graph", "Value", "PassInfo", "PassRun",
           "PassReport", "PatternValue", "VerifyReport", "VerifyFailure"]

PassInfo = _collections.namedtuple("PassInfo",
                                   ["name", "backend", "stage", "priority", "source", "builtin"])
PassInfo.__doc__ = """One registered pass, as list_passes() gives it.

name: the pass's name; backend: the one backend whose builds it runs for, or "all"; stage and
priority: where it runs; source: the plugin's path ("" for a pass made in this process, such as a
Python pattern); builtin: one of Kiln's own passes (jit_level="O0" skips them; they cannot be
unregistered)."""

PassRun = _collections.namedtuple(
    "PassRun", ["pass_name", "stage", "changed", "matches", "refusals", "reasons", "seconds"])
PassRun.__doc__ = """What one pass did in one build: whether it changed the graph, how many
rewrites it made (matches) and declined (refusals, with the first few reasons), and its time."""

PatternValue = _collections.namedtuple("PatternValue", ["dtype", "shape", "value"])
PatternValue.__doc__ = """What a register_pattern check gets for each matched input: its dtype
and shape, and for a constant that nothing else holds (a Python number, a value the passes
computed) its value, a kiln.Tensor; None for other nodes, and for a tensor the function reads
from outside (a weight), whose values may change before the next call while the rewrite would
stay cached. dtype and shape are None for a node that is not one tensor (a multi-output op)."""

VerifyFailure = _collections.namedtuple(
    "VerifyFailure", ["trial", "reason", "inputs", "expected", "got", "before", "after"])
VerifyFailure.__doc__ = """The first trial of verify_pass whose rewrite changed the results (or
failed): the reason, the inputs (a dict from input name to kiln.Tensor), the results before
(expected) and after (got) the rewrite, and the instance's IR text before and after."""


class PassReport:
    """What the passes did in one build, pass by pass in run order (``runs``, a list of PassRun);
    ``str()`` gives a table."""

    def __init__(self, runs, text):
        self.runs = runs
        self._text = text

    @classmethod
    def _from_c(cls, runs, text):
        return cls([PassRun(*r) for r in runs], text)

    def __iter__(self):
        return iter(self.runs)

    def __len__(self):
        return len(self.runs)

    def __str__(self):
        return self._text

    def __repr__(self):
        return f"<kiln.graph.PassReport of {len(self.runs)} pass runs>\n{self._text}"


class VerifyReport:
    """What verify_pass found: ``trials`` run, ``rewrites`` (trials whose instance the pass
    rewrote), ``failures``, ``ok`` (no failure and at least one rewrite), ``refusals`` (the first
    few reasons the pass gave for declining an instance), ``first_failure`` (a VerifyFailure or
    None). Its repr is the whole report, failing input included."""

    def __init__(self, pass_name, trials, rewrites, failures, ok, refusals, failure, text):
        self.pass_name = pass_name
        self.trials = trials
        self.rewrites = rewrites
        self.failures = failures
        self.ok = ok
        self.refusals = refusals
        self.first_failure = None
        if failure is not None:
            trial, reason, names, inputs, expected, got, before, after = failure
            self.first_failure = VerifyFailure(trial, reason, dict(zip(names, inputs)), expected,
                                               got, before, after)
        self._text = text

    def __str__(self):
        return self._text

    def __repr__(self):
        return self._text


def register_custom_pass(pass_name, plugin_so_path, backend="all", stage="pre_fusion",
                         priority=0):
    """Loads the pass plugin at ``plugin_so_path`` (str or path-like) and registers its pass
    ``pass_name`` for jit builds on ``backend`` ("all" or a backend's name) in ``stage``, ordered
    by ``priority`` (lower first). Raises KilnError saying what went wrong."""
    fn = "register_custom_pass"
    _C.graph.register_custom_pass(_text(pass_name, "pass_name", fn),
                                  _path(plugin_so_path, "plugin_so_path", fn),
                                  _text(backend, "backend", fn), _text(stage, "stage", fn),
                                  _priority(priority, fn))


def unregister_custom_pass(name):
    """Removes the registered pass ``name``; later builds run without it. KilnError (listing the
    registered names) for an unknown name."""
    _C.graph.unregister_custom_pass(_text(name, "name", "unregister_custom_pass"))


def list_passes():
    """Every registered pass, built-in ones included, in run order: a list of PassInfo."""
    return [PassInfo(*p) for p in _C.graph.list_passes()]


def register_pattern(name, src, dst, backend="all", stage="pre_fusion", priority=0, check=None,
                     example_args=None):
    """Registers the rewrite ``src`` -> ``dst`` as a pass named ``name``.

    ``src`` and ``dst`` are functions of the same number of tensors; both are traced like a
    jitted function's body (so Python numbers in them, and parameters with defaults, which keep
    them, are constants) and turned into a C++
    PatternToPatternPass that runs in every later jit build on ``backend``:

        kiln.graph.register_pattern("SubFusion", src=lambda x, y: x + kiln.mint.neg(y),
                                    dst=lambda x, y: x - y)

    Inputs are matched by position: wherever the graph computes what ``src`` computes from some
    nodes, ``dst`` applied to those nodes replaces it. Constants of ``src`` match constants of the
    same value (integers exactly; one of a single number, such as a Python number, matches
    constants of that number of any shape). A constant that only elementwise ops take, widening
    none of their operands, matches wherever elementwise ops take it without widening anything;
    any other only at the traced shapes of its own and of the inputs of the ops that take it.
    Ops must
    have the same attributes (a ``dim=-1`` in ``src`` matches only
    ``dim=-1``). ``check(*values)``, when given, gets one PatternValue per input of ``src`` for each
    match and returns whether to rewrite it. The functions are traced with float32 tensors of
    shape (4, 4), or with the dtypes and shapes of ``example_args`` (tensors, one per input) when
    given: ops whose attributes depend on shapes (views, reshapes) match only such graphs. A
    rewrite that would change a result's dtype or shape is refused at each match. Raises
    KilnError when the functions cannot be traced, do not return one tensor, when an input of
    ``src`` is unused, and for the errors of register_custom_pass.
    """
    fn = "register_pattern"
    _text(name, "name", fn)
    names = _parameter_names(src, "src")
    # A dst whose signature cannot be read (a built-in such as kiln.mint.silu) takes src's inputs;
    # another count is an error the C++ side explains.
    dst_names = _parameter_names(dst, "dst", default=names)
    if example_args is None:
        metas = [(_C.dtype.float32, [4, 4])] * len(names)
    else:
        example_args = list(example_args)
        if len(example_args) != len(names):
            raise _KilnTypeError(f"register_pattern: src takes {len(names)} inputs but "
                                 f"example_args has {len(example_args)}")
        for i, t in enumerate(example_args):
            if not isinstance(t, _C.Tensor):
                raise _KilnTypeError(f"register_pattern: example_args[{i}] is a "
                                     f"{type(t).__name__}, expected a kiln.Tensor (its dtype and "
                                     f"shape are traced)")
        metas = [(t.dtype, list(t.shape)) for t in example_args]
    if check is not None and not callable(check):
        raise _KilnTypeError(f"register_pattern: check must be callable, got "
                             f"{type(check).__name__}")
    _C.graph.register_pattern(name, src, dst, names, dst_names, metas,
                              _text(backend, "backend", fn), _text(stage, "stage", fn),
                              _priority(priority, fn), check, PatternValue, _call_traced)


def verify_pass(name, *, trials=100, seed=0):
    """Checks that the registered pattern pass ``name`` keeps the meaning of what it rewrites:
    each trial builds an instance of its source pattern with random inputs of fitting dtypes and
    shapes, runs it before and after the rewrite on the "reference" backend, and compares the
    results. Returns a VerifyReport (``print`` it: a failure shows the input, both results and
    both graphs). The same seed gives the same instances. KilnError for an unknown name, a pass
    that is not a pattern pass, or a source pattern no instance of which could be built."""
    fn = "verify_pass"
    return VerifyReport(*_C.graph.verify_pass(_text(name, "name", fn),
                                              _checked_int(fn, "trials", trials, 1, 2**63 - 1),
                                              _checked_int(fn, "seed", seed, 0, 2**64 - 1)))


def register_custom_backend(name, backend):
    """Registers a backend under ``name``, for ``kiln.jit(backend=name)``. ``backend`` is the
    path (str or path-like) of a C++ backend plugin, which is loaded, or an object written in
    Python (an instance, not its class) with these methods:

    - ``build(graph, config)``: compiles ``graph`` (a kiln.graph.Graph, after the passes that
      run for this backend and "all") and returns anything, which ``run`` gets back. ``config``
      is a dict: "jit_level", "backend", and "options", the jit's other keyword options as text
      (``kiln.jit(f, backend=name, tile=64)`` gives {"tile": "64"}).
    - ``run(built, inputs)``: the graph's outputs (a list of kiln.Tensor, one per
      ``graph.outputs``; a single tensor for one) for ``inputs`` (a list of contiguous
      kiln.Tensor, one per ``graph.inputs``). Return new tensors on each call: the caller keeps
      them (a buffer reused for the next call would change the results it holds).
    - optionally ``supports(node)`` (a kiln.graph.Value of kind "node", its inputs described
      too): False sends the node to kiln_cpu, and the graph ``build`` gets holds the rest as
      inputs and outputs of its own (the jit partitions it); and ``clear(built)``, called when
      the jit drops a built graph and for each graph still built when the backend is
      unregistered.

    An exception raised in them becomes a KilnError naming the backend, the graph and the
    exception. The methods are called with the GIL held, on the jitted call's thread. A daemon
    thread still inside one of them when the interpreter exits may crash the exit (Python stops
    such a thread by unwinding it through Kiln's C++ frames): join such threads first."""
    fn = "register_custom_backend"
    name = _text(name, "name", fn)
    if name == "all":
        raise _KilnValueError(f"{fn}: 'all' cannot name a backend: passes registered for "
                              f"backend='all' run for every backend")
    if isinstance(backend, (str, _os.PathLike)):
        _C.graph.register_custom_backend(name, _path(backend, "path", fn))
        return
    _check_python_backend(backend, fn)
    _C.graph._register_python_backend(name, backend, Graph)


def unregister_custom_backend(name):
    """Unregisters a backend that ``register_custom_backend`` registered, so that another (a
    rebuilt plugin, an edited Python backend) can be registered under the name (give a rebuilt
    plugin another file name: a loaded library stays loaded). Functions jitted on it build again
    at their next call. A built-in backend, or a name it did not register, is a
    KilnValueError."""
    name = _text(name, "name", "unregister_custom_backend")
    if not _C.graph._unregister_python_backend(name):
        _C.graph.unregister_custom_backend(name)


def _check_python_backend(backend, fn):
    """Refuses at registration what would fail only at the first jitted call: an object without
    callable build and run, a class (whose methods would be called without an instance), or an
    optional supports or clear that is not callable (the C++ side calls any it finds)."""
    expected = (f"{fn}: expected the path of a backend plugin (a str or path-like) or an object "
                f"with build(graph, config) and run(built, inputs) methods")
    missing = [m for m in ("build", "run") if not callable(getattr(backend, m, None))]
    if missing:
        got = (f"{type(backend).__name__} {backend!r}" if len(missing) == 2 else
               f"{type(backend).__name__} without {missing[0]}")
        raise _KilnTypeError(f"{expected}, got {got}")
    if isinstance(backend, type):
        raise _KilnTypeError(f"{expected}, got the class {backend.__name__}: pass an instance "
                             f"({backend.__name__}())")
    for hook in ("supports", "clear"):
        value = getattr(backend, hook, None)
        if hasattr(backend, hook) and not callable(value):  # None too: the C++ side calls it
            raise _KilnTypeError(f"{fn}: {hook} of {type(backend).__name__} must be a method "
                                 f"(optional: leave it out for the default), got "
                                 f"{type(value).__name__} {value!r}")


def _text(value, what, fn):
    if not isinstance(value, str):
        raise _KilnTypeError(f"{fn}: {what} must be a str, got {type(value).__name__} {value!r}")
    return value


def _path(value, what, fn):
    """``value``, a str or a path-like giving one, as a str (the C++ side takes no bytes)."""
    path = _os.fspath(value) if isinstance(value, (str, _os.PathLike)) else None
    if not isinstance(path, str):
        raise _KilnTypeError(f"{fn}: {what} must be a str or path-like, got "
                             f"{type(value).__name__} {value!r}")
    return path


def _priority(value, fn):
    return _checked_int(fn, "priority", value, -2**31, 2**31 - 1)  # a C++ int


def _parameter_names(fn, which, default=None):
    if not callable(fn):
        raise _KilnTypeError(f"register_pattern: {which} must be callable, got "
                             f"{type(fn).__name__}")
    kinds = (_inspect.Parameter.POSITIONAL_ONLY, _inspect.Parameter.POSITIONAL_OR_KEYWORD)
    try:
        parameters = list(_inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        if default is not None:
            return default
        raise _KilnTypeError(f"register_pattern: the parameters of {which} ({fn!r}) cannot be "
                             f"read; pass a Python function (a lambda will do)") from None
    # A parameter with a default keeps it, a constant of the pattern (`lambda x, c=factor: x * c`
    # binds a loop's value); it was an input, so that pattern matched every product.
    inputs = [p for p in parameters if p.default is p.empty]
    if any(p.kind not in kinds for p in inputs) or any(
            p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
        raise _KilnTypeError(f"register_pattern: {which} must take only positional tensors "
                             f"(and parameters with defaults, which are constants), got "
                             f"{which}{_inspect.signature(fn)}")
    return [p.name for p in inputs]
