"""kiln.jit: compile a function of tensors into a graph that a backend builds once and runs.

    @kiln.jit
    def f(x, y, scale=2.0):
        return kiln.mint.sin(x) + y * scale

    @kiln.jit(backend="my_custom_backend")       # any name in kiln.graph.list_backends()
    def g(x):
        return kiln.mint.softmax(x @ x.T, dim=-1)

    f(x, y)                  # traced, built and run
    f(x2, y2)                # same dtypes and shapes: runs the built graph
    f.graph(x, y)            # the traced graph as IR text
    f.optimized_graph(x, y)  # the graph after every pass, as the backend receives it
    f.pass_report()          # what each pass did in the most recent build (kiln.graph.PassReport)
    f.memory_plan(x, y)      # kiln_cpu's static memory plan: {"peak_bytes": ..., ...}
    f.cache_info()           # CacheInfo(hits=2, misses=1, size=1): f(x2, y2), memory_plan

The first call with a new *signature* runs the function once on tracers -- tensors with a dtype
and a shape but no data -- and records every op it calls (``kiln.mint``, Tensor operators and
methods, custom ops registered with ``m.def_op``) as a graph, which the backend then builds. The
signature is the dtypes and shapes of the tensor arguments, the values of everything else (Python
numbers, strings, None, other objects by equality or identity) and the layout of tuples, lists
and dicts of them; any argument may be such a nesting, and so may the result. Functions defined
in a class work as methods (``self`` is a constant of the signature). Objects told apart by
identity (instances of classes without an ``__eq__`` of their own, such as models) are held
weakly: a dropped model is freed, and the graphs built for it go at the function's next build
(or ``clear_cache()``).

A jitted function's results carry no gradient: they are values, not recorded ops (an input
returned as it is comes back as a new handle without its gradient state). Differentiate inside
the jitted function -- ``kiln.jit(kiln.grad(f))``, or a jitted training step that calls
``kiln.grad`` and the optimizer; a jitted function called inside ``kiln.grad`` /
``value_and_grad`` raises KilnValueError (its gradients would be zeros), and ``backward()`` on a
result says it does not require grad. A jitted function called while another one is traced runs
inline: its ops join the outer graph, which the outer function's backend builds (its own
``backend`` and other options apply only to its calls outside a trace).

Because tracers have no data, Python control flow on their values cannot be traced: ``if t > 0:``,
``float(t)``, ``t.item()`` or ``t.numpy()`` raise a KilnError that names the file and line and
suggests ``kiln.mint.where``. Tensors the function reads from elsewhere (globals, attributes of
``self``) are constants of the graph: it sees in-place updates of them, not a new tensor put in
their place (call ``clear_cache()`` then). What the function writes in place (``p.sub_(g)``,
``x[0] = v``, ``out=``), into its arguments or into whole tensors it reads from elsewhere (a
weight, an optimizer's state), is copied into them after each run, as eagerly; a call whose
written argument shares memory with another argument (``f(x, x)``, ``f(x, x.T)``) is a
KilnValueError, since the graph reads them as separate values, and so is one whose argument
requires grad and was written with grad mode on (write under ``kiln.no_grad()``, as an
optimizer's step does). So are other Python values it reads from elsewhere (a
cell's ``eps``, a global number), with these exceptions, which are part of the signature (each
state its own cached graph): grad mode, the default dtype (a trace records the dtypes of its time,
``int_tensor * 2.5`` or ``zeros(n)``: after ``kiln.set_default_dtype`` a call traces again, and the
graph traced before keeps its dtypes for calls under the old default), the ``training`` flag of each
kiln.nn cell a trace read (``train()`` / ``eval()``: a function called in eval mode after training
runs a graph traced in eval mode, where Dropout keeps everything), and whether each tensor it reads
from outside requires grad (a weight frozen after the first call gets no gradient from a jitted
``kiln.grad``). An unknown backend is a KilnError at the first call,
listing the registered ones. ``dump_ir="dir"`` (or ``KILN_DUMP_IR=dir``) writes the IR after
tracing, before and after each pass that changed the graph, and each graph handed to a backend
(.kir text, .dot, and .svg when Graphviz is present), plus ``<graph>.<n>.html`` per compilation
(open it in a browser: it steps through the passes with the arrow keys, showing each pass's
graph before and after with the changed nodes highlighted, its stage, matches and time) and an
``index.html`` listing the compilations in the folder. Without it nothing is written.
Extra keyword options go to the backend as text (kiln/backend.h, ``BackendJitConfig.options``);
the built-in backends take none, so one given to them (a misspelled ``dynmaic=True``) is a
KilnTypeError naming the nearest keyword of jit's own.

``dynamic=True`` makes one cache entry serve every *batch size*: the leading dimension of the
first tensor argument that has one is the batch size B, and every tensor argument whose leading
dimension is B is batched (the others keep their full shapes in the signature). The function
runs (on tracers) at the first three batch sizes only; the graphs must differ only in integer
attributes and dimensions that are linear in B (``mint.reshape(x, [b * 128, 256])`` is), and
every later batch size is made from them without calling the function, then optimized and built
for that B (each new B is still a build, a miss in ``cache_info()``). A function whose graph or
result depends on B otherwise -- a Python number computed from ``x.shape[0]``, ``b * b``, a shape
read from data -- raises KilnValueError naming the node (at the second or third batch size, or at
a later one that does not fit); use ``dynamic=False`` for it, which traces each new shape. A
function that takes a piece of the batch whose size is not linear in B (``x[::2]``, ``x[:2]``,
``chunk``) or squeezes a dimension that may be the batch is traced at every batch size instead.

Before the backend builds a graph, the passes registered for it run (``kiln.graph``:
``register_custom_pass``, ``register_pattern``; built-in passes unless ``jit_level="O0"``).
``debug=True`` (or ``KILN_DEBUG=1``) checks the graph after every pass and names the pass that
broke it; ``KILN_PASS_REPORT=1`` prints each build's pass report to stderr.
"""

import collections
import difflib
import functools
import inspect
import os
import threading
import traceback
import types

from . import _C
from .errors import KilnError, KilnTypeError

__all__ = ["jit", "JitFunction", "CacheInfo"]

CacheInfo = collections.namedtuple("CacheInfo", ["hits", "misses", "size"])

_KILN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_NO_DATA = _C.jit.TRACED_VALUE_HAS_NO_DATA


class _TraceReads(threading.local):
    """While a trace runs on this thread, ``cells`` is its jitted function's list of the cells
    whose ``training`` flag a trace read (kiln.nn.Cell.training adds to it); else None."""

    cells = None


trace_reads = _TraceReads()


def jit(fn=None, *, backend="kiln_cpu", jit_level="O1", capture_mode="trace", dynamic=False,
        fullgraph=False, dump_ir=None, debug=False, **options):
    """Compiles ``fn`` (see the module's documentation); usable as ``@kiln.jit`` and
    ``@kiln.jit(backend=...)``."""
    def wrap(f):
        return JitFunction(f, backend=backend, jit_level=jit_level, capture_mode=capture_mode,
                           dynamic=dynamic, fullgraph=fullgraph, dump_ir=dump_ir, debug=debug,
                           **options)

    return wrap if fn is None else wrap(fn)


_JIT_KEYWORDS = ("backend", "jit_level", "capture_mode", "dynamic", "fullgraph", "dump_ir",
                 "debug")


def _refuse_options(backend, options):
    # The built-in backends read no options: one given to them is a mistake.
    name = sorted(options)[0]
    near = difflib.get_close_matches(name, _JIT_KEYWORDS, n=1)
    hint = f"; did you mean {near[0]}=?" if near else ""
    raise KilnTypeError(f"kiln.jit: unexpected keyword {name}={options[name]!r}: the built-in "
                        f"backend {backend!r} takes no options (jit's keywords are "
                        f"{', '.join(_JIT_KEYWORDS)}){hint}")


class JitFunction(_C.jit.JitFunction):
    """A jitted function: call it like the function it wraps."""

    def __init__(self, fn, *, backend="kiln_cpu", jit_level="O1", capture_mode="trace",
                 dynamic=False, fullgraph=False, dump_ir=None, debug=False, **options):
        if not callable(fn):
            raise TypeError(f"kiln.jit: expected a callable, got {type(fn).__name__}")
        for name, flag in (("dynamic", dynamic), ("fullgraph", fullgraph), ("debug", debug)):
            if not isinstance(flag, bool) and flag not in (0, 1):  # dynamic="false" is no False
                raise KilnTypeError(f"kiln.jit: expected {name} to be True or False, got "
                                    f"{flag!r}")
        for name, value, expected in (("backend", backend, "a backend's name"),
                                      ("jit_level", jit_level, '"O0", "O1" or "O2"'),
                                      ("capture_mode", capture_mode, '"trace"')):
            if not isinstance(value, str):
                raise KilnTypeError(f"kiln.jit: expected {name} to be a str ({expected}), got "
                                    f"{type(value).__name__} {value!r}")
        if options and _C.graph.is_builtin_backend(backend):
            _refuse_options(backend, options)
        if dump_ir is not None and not isinstance(dump_ir, (str, os.PathLike)):
            raise KilnTypeError(f"kiln.jit: expected dump_ir to be a folder (a str or path-like) "
                                f"or None, got {type(dump_ir).__name__} {dump_ir!r}")
        super().__init__(fn, _call_traced, _parameter_names(fn),
                         getattr(fn, "__qualname__", getattr(fn, "__name__", "jit")), backend,
                         jit_level, capture_mode, bool(dynamic), bool(fullgraph),
                         os.fspath(dump_ir) if dump_ir is not None else "", bool(debug),
                         {str(k): str(v) for k, v in options.items()})
        functools.update_wrapper(self, fn)

    def __get__(self, obj, objtype=None):
        # A method: calls pass the instance first, as a plain function's would get it.
        return self if obj is None else types.MethodType(self, obj)

    def cache_info(self):
        """CacheInfo(hits, misses, size) of the built graphs."""
        return CacheInfo(*self._cache_info())

    def pass_report(self):
        """What the passes did in the most recent build: a kiln.graph.PassReport (no runs before
        the first build); ``print`` it for a table."""
        from .graph import PassReport

        return PassReport._from_c(*self._pass_report())

    def __repr__(self):
        # A callable object (a Cell, a functools.partial) has no __qualname__ to copy.
        name = getattr(self, "__qualname__", None) or type(self.__wrapped__).__name__
        return f"<kiln.jit of {name} on backend {self.backend!r}>"


def _parameter_names(fn):
    """Names of fn's positional parameters, for the graph's parameter names."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in parameters if p.kind in kinds]


def _call_traced(fn, args, kwargs, mode_cells=None):
    """Runs fn on tracers, adding to ``mode_cells`` (a jitted function's; None for a graph
    pattern) the cells whose training flag it reads; a read of a traced value's data gets the
    user's file and line."""
    outer = trace_reads.cells
    trace_reads.cells = mode_cells
    try:
        return fn(*args, **kwargs)
    except KilnError as e:
        if _NO_DATA not in str(e):
            raise
        raise type(e)(_located(e)).with_traceback(e.__traceback__) from None
    finally:
        trace_reads.cells = outer


def _located(error):
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not os.path.abspath(f.filename).startswith(_KILN_DIR)]
    if not frames:
        return str(error)
    where = frames[-1]
    return (f"data-dependent control flow on a traced value at {where.filename}:{where.lineno} "
            f"(in {where.name}): `{(where.line or '').strip()}`\n{error}")
