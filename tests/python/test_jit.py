"""kiln.jit and kiln.graph: jitted results equal eager ones on every backend (random programs
through kiln.mint, Tensor operators, methods and indexing), the cache and its key, containers in
and out, methods, custom ops, IR dumps, and the errors (control flow on traced values, unknown
backend, failing backends, bad options)."""

import collections
import gc
import random
import re
import shutil
import subprocess
import sys
import weakref

import numpy as np
import pytest

import kiln
from kiln import mint
from kiln.jit import CacheInfo

from conftest import REPO_DIR, assert_close, raises

BACKENDS = ["reference", "kiln_cpu", "jit_plugin_backend", "jit_plugin_elementwise"]


@pytest.fixture(autouse=True)
def _backends(jit_test_backends):
    return jit_test_backends


def t(array):
    return kiln.tensor(np.asarray(array))


# --- random programs ---------------------------------------------------------------------------

def random_program(seed, num_ops):
    """A function of tensors whose op choices depend on the seed and on shapes, never on values:
    run eagerly and jitted, it must give the same results."""
    n = random.Random(seed).randint(1, 4)

    def program(*xs, scale=1.5):
        r = random.Random(seed * 31 + 7)
        values = [(x, False) for x in xs]  # (tensor, fresh: own memory no view shares)

        def any_value():
            return values[r.randrange(len(values))][0]

        def square():
            for _ in range(2 * len(values)):
                v = any_value()
                if v.shape == (n, n):
                    return v
            return None

        for _ in range(num_ops):
            a, b = any_value(), any_value()
            op = r.randrange(15)
            if op == 0:
                values.append((mint.sin(a), True))
            elif op == 1:
                values.append((a + b, True))
            elif op == 2:
                values.append((a * scale - 0.25, True))
            elif op == 3:
                values.append((mint.where(a > b, a, -b), True))
            elif op == 4:
                values.append((mint.tanh(mint.maximum(a, b)), True))
            elif op == 5:
                values.append((mint.sum(a, dim=-1, keepdim=True), True))
            elif op == 6:
                values.append(((a.double() * 0.5).float(), True))
            elif op == 7 and square() is not None:
                values.append((mint.softmax(square(), dim=-1), True))
            elif op == 8:
                s, u = square(), square()
                if s is not None and u is not None:
                    values.append((s @ u, True))
            elif op == 9:
                s = square()
                if s is not None:  # views made by Tensor methods and indexing: no op runs
                    values.append((s.T, False))
                    values.append((s[r.randrange(n)], False))
                    values.append((s[:, ::2].sum(-1, keepdim=True), True))
            elif op == 10:
                fresh = [v for v, f in values if f]
                if fresh:
                    v = fresh[r.randrange(len(fresh))]
                    values.append((v.reshape(-1).reshape(v.shape), False))
            elif op == 11:
                s = square()
                if s is not None:
                    top, index = mint.max(s, dim=1)
                    values.append((top, True))
                    values.append((index.float(), True))
            elif op == 12:  # in place, into a value no view shares
                fresh = [i for i, (v, f) in enumerate(values) if f]
                if fresh:
                    v = values[fresh[r.randrange(len(fresh))]][0]
                    if np.broadcast_shapes(v.shape, b.shape) == v.shape:
                        v += mint.exp(-abs(b))
            elif op == 13:
                values.append((abs(a) + 1, True))
            else:
                values.append((a ** 2 / (b * b + 1.0), True))
        return values[-1][0], {"first": values[0][0], "any": [any_value(), None]}

    shapes = [random.Random(seed + i).choice([(n, n), (n,)]) for i in range(1 + seed % 3)]
    return program, shapes


def eager_and_jitted(fn, args, kwargs, backend):
    want = fn(*args, **kwargs)
    got = kiln.jit(fn, backend=backend)(*args, **kwargs)
    return got, want


def assert_same_tree(got, want):
    assert type(got) is type(want)
    if isinstance(want, kiln.Tensor):
        assert got.dtype == want.dtype
        assert_close(got, want.numpy())
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert_same_tree(g, w)
    elif isinstance(want, dict):
        assert list(got) == list(want)
        for k in want:
            assert_same_tree(got[k], want[k])
    else:
        assert got == want


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_programs_give_the_eager_results(backend):
    for seed in range(40):
        program, shapes = random_program(seed, 4 + seed % 20)
        jitted = kiln.jit(program, backend=backend)
        rng = np.random.default_rng(seed)
        for _ in range(2):  # a miss, then a hit on new values
            xs = [t(rng.uniform(-2, 2, s).astype(np.float32)) for s in shapes]
            assert_same_tree(jitted(*xs, scale=0.75), program(*xs, scale=0.75))
        assert jitted.cache_info().misses == 1 and jitted.cache_info().hits == 1


@pytest.mark.parametrize("backend", ["reference", "kiln_cpu"])
def test_random_ops_draw_anew_on_every_run_and_as_eager(backend):
    # Note [Random ops in graphs]: each run reserves fresh counters (a new dropout mask every
    # step), in program order, and tracing draws nothing, so a seeded sequence of jitted calls
    # gives what the same eager calls give.
    def step(x):
        return mint.dropout(x, 0.5, True) + mint.rand([64]), mint.randn([3, 5])

    x = t(np.ones(64, np.float32))
    jitted = kiln.jit(step, backend=backend)
    runs = []
    for _ in range(2):
        kiln.manual_seed(7)
        runs.append([[r.numpy() for r in jitted(x)] for _ in range(3)])
    kiln.manual_seed(7)
    eager = [[r.numpy() for r in step(x)] for _ in range(3)]
    for a, b, e in zip(runs[0], runs[1], eager):
        for got, again, want in zip(a, b, e):
            np.testing.assert_array_equal(got, again)
            np.testing.assert_array_equal(got, want)
    assert not np.array_equal(runs[0][0][0], runs[0][1][0])  # a new mask on the next run
    assert not np.array_equal(runs[0][0][1], runs[0][1][1])
    assert jitted.cache_info().misses == 1


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.int32, kiln.bfloat16])
def test_dtypes_and_broadcasting(rng, dtype):
    def f(x, y):
        return x * y + x, mint.maximum(x, y) - 1

    x = kiln.tensor(rng.uniform(-3, 3, (3, 1, 4)) * 4, dtype=dtype)
    y = kiln.tensor(rng.uniform(-3, 3, (5, 1)) * 4, dtype=dtype)
    for backend in BACKENDS:
        got, want = eager_and_jitted(f, (x, y), {}, backend)
        assert_same_tree(got, want)


# --- decorator forms, methods, the cache --------------------------------------------------------

def test_decorator_forms_keep_the_function_s_identity():
    @kiln.jit
    def plain(x):
        """Doubles."""
        return x * 2

    @kiln.jit(backend="reference", jit_level="O0")
    def configured(x):
        return x * 3

    direct = kiln.jit(lambda x: x * 4, backend="jit_plugin_backend")
    x = t([1.0, 2.0])
    assert plain(x).tolist() == [2.0, 4.0]
    assert configured(x).tolist() == [3.0, 6.0]
    assert direct(x).tolist() == [4.0, 8.0]
    assert plain.__name__ == "plain" and plain.__doc__ == "Doubles."
    assert plain.__wrapped__(x).tolist() == [2.0, 4.0]
    assert configured.backend == "reference" and configured.jit_level == "O0"
    assert "on backend 'reference'" in repr(configured)
    # A callable object has no __qualname__: repr raised AttributeError.
    assert repr(kiln.jit(kiln.nn.Linear(2, 2))) == "<kiln.jit of Linear on backend 'kiln_cpu'>"


def test_cache_hits_and_misses_by_signature():
    traces = []

    @kiln.jit
    def f(x, y, mode="add", k=1):
        traces.append(1)
        return x + y * k if mode == "add" else x - y * k

    x, y = t(np.ones((2, 3), np.float32)), t(np.ones(3, np.float32))
    f(x, y)
    f(t(np.zeros((2, 3), np.float32)), y)              # hit: same dtypes and shapes
    f(x, t(np.ones((2, 3), np.float32)))               # another shape
    f(x, y.double())                                    # another dtype
    assert f(x, y, "sub").tolist() == [[0.0] * 3] * 2   # a string constant
    assert f(x, y, mode="sub").tolist() == [[0.0] * 3] * 2  # a keyword: another signature
    f(x, y, "add", 2)
    f(x, y, "add", 2.0)                                 # 2 and 2.0 are different constants
    f(x, y, "add", True)
    f(x, y, "add", 2)                                   # hit
    assert f.cache_info() == CacheInfo(hits=2, misses=8, size=8)
    assert len(traces) == 8
    f.clear_cache()
    assert f.cache_info().size == 0
    f(x, y)
    assert len(traces) == 9


def test_python_numbers_are_constants_of_the_graph():
    @kiln.jit
    def f(x, s):
        return x * s

    x = t([1.0, -2.0])
    assert f(x, 3.0).tolist() == [3.0, -6.0]
    assert f(x, 0.5).tolist() == [0.5, -1.0]
    assert "const float64[] weak [0.5]" in f.graph(x, 0.5)
    assert f(x, -0.0).tolist() == [-0.0, 0.0] and f.cache_info().misses == 3
    g = kiln.jit(lambda x, big: x * float(big))  # beyond int64: a constant by value
    assert g(x, 10**30).tolist() == [1e30, -2e30]
    assert g(x, 10**30).tolist() == [1e30, -2e30] and g.cache_info().hits == 1


def test_equal_constants_of_other_types_are_other_signatures():
    # np.float32(3.0) == np.float16(3.0) == 3, but each gives x * s another dtype: they shared a
    # cache entry (the first one's graph).
    @kiln.jit
    def f(x, s):
        return x * s

    h = t(np.array([1.0, 2.0], np.float16))
    i = t(np.array([1, 2], np.int32))
    for x, s in [(h, np.float16(3.0)), (h, np.float32(3.0)), (i, np.int64(3)), (i, np.float32(3))]:
        got, want = f(x, s), x * s
        assert got.dtype == want.dtype and got.tolist() == want.tolist()
    assert f.cache_info().misses == 4
    f(h, np.float32(3.0))
    assert f.cache_info().hits == 1


def test_nested_containers_in_and_out():
    Pair = collections.namedtuple("Pair", ["left", "right"])

    @kiln.jit
    def f(batch, pair, options):
        a, b = batch["xs"]
        out = a * pair.left + b * options["w"]
        return {"out": out, "parts": [a, Pair(b, pair.right)], "tag": options["tag"], "none": None}

    rng = np.random.default_rng(0)
    a, b, c, d = (t(rng.standard_normal(4).astype(np.float32)) for _ in range(4))
    args = ({"xs": [a, b]}, Pair(c, d), {"w": 0.5, "tag": "v1"})
    got = f(*args)
    assert set(got) == {"out", "parts", "tag", "none"}
    assert got["tag"] == "v1" and got["none"] is None
    assert isinstance(got["parts"][1], Pair)
    assert_close(got["out"], a.numpy() * c.numpy() + b.numpy() * 0.5)
    assert_close(got["parts"][1].right, d.numpy())
    assert got["parts"][0].data_ptr() == a.data_ptr()  # an input returned as is
    f(*args)
    f({"xs": (a, b)}, Pair(c, d), {"w": 0.5, "tag": "v1"})  # a tuple, not a list: new signature
    assert f.cache_info().misses == 2 and f.cache_info().hits == 1
    text = f.graph(*args)
    for name in ('"batch[\'xs\'][0]"', '"batch[\'xs\'][1]"', '"pair[0]"', '"pair[1]"'):
        assert name in text


def test_methods_key_on_the_instance_and_see_in_place_updates():
    class Scale:
        def __init__(self, w):
            self.w = t(w)

        @kiln.jit
        def forward(self, x):
            return x * self.w

    one, two = Scale([1.0, 1.0]), Scale([2.0, 2.0])
    x = t([3.0, 4.0])
    assert one.forward(x).tolist() == [3.0, 4.0]
    assert two.forward(x).tolist() == [6.0, 8.0]
    one.w += 1.0  # in place: the graph holds the same tensor
    assert one.forward(x).tolist() == [6.0, 8.0]
    assert Scale.forward.cache_info().misses == 2


def test_a_jitted_call_inside_a_trace_is_inlined():
    inner = kiln.jit(lambda x: mint.exp(x))

    @kiln.jit
    def outer(x):
        return inner(x) + 1

    x = t([0.0, 1.0])
    assert_close(outer(x), np.exp([0.0, 1.0]) + 1)
    assert inner.cache_info().misses == 0
    assert "Exp(%0)" in outer.graph(x)


def test_views_made_by_methods_and_indexing_trace(rng):
    def f(x):
        return x.T @ x, x[1], x[:, 1:3] * 2, x.reshape(2, -1).sum(0), x.unsqueeze(0).permute(2, 0, 1)

    x = t(rng.standard_normal((3, 4)).astype(np.float32))
    for backend in BACKENDS:
        got, want = eager_and_jitted(f, (x,), {}, backend)
        assert_same_tree(got, want)
    text = kiln.jit(f).graph(x)
    assert "Permute(%0) {dims = [1, 0]}" in text and "AsStrided" in text


def test_methods_that_may_copy_trace(rng):
    # clone, contiguous, and reshape / flatten of a layout they must copy called the plain
    # methods, whose copy read the traced value's data.
    def f(x):
        return (x.clone() * 2, (x * 1).T.contiguous(), x.T.reshape(12), x[:, 1:3].reshape(6),
                x.T.flatten())

    x = t(rng.standard_normal((3, 4)).astype(np.float32))
    for backend in BACKENDS:
        got, want = eager_and_jitted(f, (x,), {}, backend)
        assert_same_tree(got, want)


def test_as_strided_of_a_traced_value_is_refused():
    # It follows storage strides and offset, which a graph's values lack (and a graph built for
    # one layout of its inputs runs on any other): a clear refusal, not another element.
    base = t(np.arange(12.0).reshape(3, 4))
    with raises(kiln.KilnValueError, match="as_strided of a traced value"):
        kiln.jit(lambda a: a.as_strided((2,), (1,), 1) * 1)(base[1:])
    with raises(kiln.KilnValueError, match="as_strided of a traced value"):
        kiln.jit(lambda a: (a * 2).T.as_strided((2,), (1,)))(base)


def test_indexing_with_a_traced_integer_tensor(rng):
    # The index's values are the graph's to check (they were read for a bounds check in Python,
    # which a traced value refuses); other integer dtypes become int64 in the graph.
    def f(x, i, j):
        y = x * 1
        y[i] = -1.0
        return x[i] * 2, x[:, j] + 1, y

    x = t(rng.standard_normal((3, 4)).astype(np.float32))
    i, j = t(np.array([2, 0])), t(np.array([3, 1], np.uint8))
    for backend in BACKENDS:
        got, want = eager_and_jitted(f, (x, i, j), {}, backend)
        assert_same_tree(got, want)
    with raises(kiln.KilnIndexError, match="index 5 is out of bounds for dimension 0 with size 3"):
        kiln.jit(lambda x, i: x[i])(x, t(np.array([5, 0])))


def test_printing_a_traced_value():
    seen = []

    @kiln.jit
    def f(x):
        seen.append(repr(x * 2))
        return x

    f(t(np.zeros((2, 3), np.float32)))
    assert seen == ["Tracer(kiln.float32[2, 3])"]


# --- custom ops -----------------------------------------------------------------------------------

def test_def_op_custom_ops_trace_like_built_ins(example_ops, rng):
    @kiln.jit
    def f(x):
        mean, var = example_ops.row_moments(mint.exp(x), correction=1)
        return mean + var

    x = rng.standard_normal((3, 5)).astype(np.float32)
    e = np.exp(x)
    assert_close(f(t(x)), e.mean(-1) + e.var(-1, ddof=1))
    assert "RowMoments(%1) {correction = 1}" in f.graph(t(x))


def test_op_runner_custom_ops_ask_for_def_op(example_ops):
    f = kiln.jit(lambda x: example_ops.add3(x, x, x))
    with raises(kiln.KilnNotImplementedError, match=r"Register the op with m\.def_op"):
        f(t([1.0]))
    with raises(kiln.KilnError, match=r"m\.def_op\(kiln::OpDef\(\"Add3\"\)"):
        f(t([1.0]))


# --- errors ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("body, source", [
    (lambda x: x if x.sum() > 0 else -x, "lambda x: x if x.sum() > 0 else -x"),
    (lambda x: x * float(x.sum()), "lambda x: x * float(x.sum())"),
    (lambda x: x * int(x.sum()), "lambda x: x * int(x.sum())"),
    (lambda x: x * x.sum().item(), "lambda x: x * x.sum().item()"),
    (lambda x: kiln.tensor(x.numpy()), "lambda x: kiln.tensor(x.numpy())"),
    (lambda x: x if bool(x[0] > 0) else x, "lambda x: x if bool(x[0] > 0) else x"),
    (lambda x: t(x.tolist()), "lambda x: t(x.tolist())"),
])
def test_control_flow_on_traced_values_names_the_line(body, source):
    f = kiln.jit(body)
    with raises(kiln.KilnError) as info:
        f(t([1.0, 2.0]))
    message = str(info.value)
    assert "test_jit.py:" in message and source in message
    assert "a value traced by kiln.jit has no data" in message
    assert "kiln.mint.where" in message
    assert body(t([1.0, 2.0])) is not None  # eagerly the same function works


def test_if_on_a_traced_comparison_names_the_line():
    @kiln.jit
    def f(x):
        if x > 0:
            return x
        return -x

    line = f.__wrapped__.__code__.co_firstlineno + 2
    with raises(kiln.KilnTypeError, match=rf"test_jit\.py:{line} \(in f\): `if x > 0:`"):
        f(t([1.0, 2.0]))
    assert f.cache_info().size == 0
    # The process goes on: the same function traced and run after the failure.
    g = kiln.jit(lambda x: mint.where(x > 0, x, -x))
    assert g(t([1.0, -2.0])).tolist() == [1.0, 2.0]


def test_writing_into_an_input_in_place_updates_the_argument():
    def f(x):
        x += 1
        return x

    x = t([1.0])
    result = kiln.jit(f)(x)
    # The argument changes as eagerly; the result is the new value (a handle of its own, as any
    # input a jitted function returns).
    assert x.tolist() == [2.0] and result.tolist() == [2.0] and not result.is_same(x)


def test_an_unknown_backend_lists_the_registered_ones():
    f = kiln.jit(lambda x: x, backend="no_such_backend")
    with raises(kiln.KilnError, match="unknown backend 'no_such_backend'; registered backends: "
                                      ".*jit_plugin_backend.*kiln_cpu.*reference"):
        f(t([1.0]))


@pytest.mark.parametrize("backend, reason", [
    ("jit_plugin_failing", "Run returned kRunningFailure"),
    ("jit_plugin_throwing", "the accelerator caught fire"),
])
def test_a_failing_backend_names_itself_and_the_graph(backend, reason):
    @kiln.jit(backend=backend)
    def net(x):
        return mint.neg(x)

    for _ in range(2):  # the first call builds, the second runs the cached graph: both fail
        with raises(kiln.KilnError, match=rf"backend '{backend}' failed running graph \"(.*)net\""
                                          rf" \(id \d+\): {reason}"):
            net(t([1.0]))
    assert kiln.jit(lambda x: mint.neg(x))(t([1.0])).tolist() == [-1.0]


@pytest.mark.parametrize("backend, returned", [
    ("jit_plugin_flattening", r"float32\[6\]"), ("jit_plugin_widening", r"float64\[2, 3\]")])
def test_a_backend_result_of_another_shape_or_dtype_is_refused(backend, returned):
    # Passed on, it was a wrong result (or an error at a later use naming another backend).
    f = kiln.jit(lambda x: mint.neg(x) * 2, backend=backend)
    with raises(kiln.KilnError, match=rf"backend '{backend}' returned {returned} as output 0 of "
                                      r"graph \"(.*)\", which is float32\[2, 3\]"):
        f(t(np.ones((2, 3), np.float32)))


def test_options_are_checked():
    with raises(kiln.KilnValueError, match="capture_mode \"ast\" is not supported"):
        kiln.jit(lambda x: x, capture_mode="ast")
    with raises(kiln.KilnValueError, match="jit_level"):
        kiln.jit(lambda x: x, jit_level="fast")
    with raises(TypeError, match="expected a callable"):
        kiln.jit(3)
    assert kiln.jit(lambda x: x + 1, fullgraph=True)(t([1.0])).tolist() == [2.0]
    for flag in ("dynamic", "fullgraph", "debug"):
        with raises(kiln.KilnTypeError, match=f"expected {flag} to be True or False, got 'false'"):
            kiln.jit(lambda x: x, **{flag: "false"})
    assert kiln.jit(lambda x: x * 2, dynamic=np.True_)(t([1.0])).tolist() == [2.0]


def test_a_plugin_backend_unregisters_and_registers_again(jit_test_backends):
    name = "jit_plugin_elementwise"
    f = kiln.jit(lambda x: x * 2.0 + 1.0, backend=name)
    assert f(t([1.0])).tolist() == [3.0]
    kiln.graph.unregister_custom_backend(name)
    try:
        assert name not in kiln.graph.list_backends()
        with raises(kiln.KilnValueError, match=f"unknown backend '{name}'"):
            f(t([1.0]))
    finally:
        kiln.graph.register_custom_backend(name, jit_test_backends.path)
    assert f(t([2.0])).tolist() == [5.0]  # built again on the new registration
    assert kiln._C.graph.is_builtin_backend("kiln_cpu") and not kiln._C.graph.is_builtin_backend(name)
    with raises(kiln.KilnValueError, match="'reference' is not a backend register_custom_backend "
                                           "registered"):
        kiln.graph.unregister_custom_backend("reference")
    with raises(kiln.KilnValueError, match="'nope' is no registered backend"):
        kiln.graph.unregister_custom_backend("nope")
    with raises(kiln.KilnTypeError):
        kiln.graph.unregister_custom_backend(3)


def test_options_reach_custom_backends_and_the_builtins_refuse_them(jit_test_backends):
    # A misspelled keyword was an option the built-in backends ignored: dynamic=True never took.
    with raises(kiln.KilnTypeError, match=r"unexpected keyword dynmaic=True: the built-in backend "
                                          r"'kiln_cpu' takes no options .*did you mean dynamic=\?"):
        kiln.jit(lambda x: x, dynmaic=True)
    with raises(kiln.KilnTypeError, match="the built-in backend 'reference' takes no options"):
        kiln.jit(backend="reference", some_option=3)(lambda x: x)
    f = kiln.jit(lambda x: x + 1, backend="jit_plugin_backend", some_option=3)
    assert f(t([1.0])).tolist() == [2.0]


@pytest.mark.parametrize("option, value, message", [
    ("backend", None, "expected backend to be a str (a backend's name), got NoneType None"),
    ("jit_level", 1, 'expected jit_level to be a str ("O0", "O1" or "O2"), got int 1'),
    ("capture_mode", None, 'expected capture_mode to be a str ("trace"), got NoneType None'),
    ("dump_ir", b"ir", "expected dump_ir to be a folder (a str or path-like) or None, got bytes "
                       "b'ir'"),
], ids=["backend", "jit_level", "capture_mode", "dump_ir"])
def test_options_of_the_wrong_type_are_named(option, value, message):
    # They reached the C++ constructor: nanobind's "__init__(): incompatible function arguments".
    with raises(kiln.KilnTypeError, match=re.escape(f"kiln.jit: {message}")):
        kiln.jit(lambda x: x, **{option: value})
    with raises(kiln.KilnTypeError, match=re.escape(message)):
        kiln.jit(**{option: value})(lambda x: x)


def test_a_memory_plan_covers_every_part_or_is_refused():
    # Partitioned between a plugin backend that plans nothing and kiln_cpu: kiln_cpu's plan alone
    # would understate the graph's memory.
    f = kiln.jit(lambda x: mint.sin(mint.softmax(mint.exp(x), dim=-1)),
                 backend="jit_plugin_elementwise")
    with raises(kiln.KilnValueError, match="runs partly on backend 'jit_plugin_elementwise', which "
                                           "does not plan memory statically"):
        f.memory_plan(t(np.zeros((2, 3), np.float32)))
    assert kiln.jit(lambda x: mint.softmax(x, dim=-1)).memory_plan(
        t(np.zeros((2, 3), np.float32)))["peak_bytes"] > 0


# --- dumps and kiln.graph --------------------------------------------------------------------------

def test_dump_ir_writes_each_step(tmp_path, monkeypatch):
    f = kiln.jit(lambda x: mint.sin(mint.softmax(mint.exp(x), dim=-1)),
                 backend="jit_plugin_elementwise", dump_ir=tmp_path / "ir")
    f(t(np.zeros((2, 3), np.float32)))
    kir = sorted(p.name for p in (tmp_path / "ir").glob("*.kir"))
    assert kir[0].startswith("test_dump_ir_writes_each_step._locals_._lambda_.")
    assert [k.split(".")[-2] for k in kir] == [
        "00_traced", "01_part0_jit_plugin_elementwise", "02_part1_kiln_cpu",
        "03_part2_jit_plugin_elementwise"]
    assert len(list((tmp_path / "ir").glob("*.dot"))) == 4
    assert len(list((tmp_path / "ir").glob("*.svg"))) == (4 if shutil.which("dot") else 0)
    assert "Softmax" in (tmp_path / "ir" / kir[2]).read_text()

    monkeypatch.setenv("KILN_DUMP_IR", str(tmp_path / "env"))
    kiln.jit(lambda x: -x)(t([1.0]))
    assert len(list((tmp_path / "env").glob("*.kir"))) == 2


def test_graph_module_registers_and_lists_backends(tmp_path):
    assert {"kiln_cpu", "reference", "jit_plugin_backend"} <= set(kiln.graph.list_backends())
    with raises(kiln.KilnValueError, match="no such file"):
        kiln.graph.register_custom_backend("x", tmp_path / "missing.so")
    (tmp_path / "text.so").write_text("not a library")
    with raises(kiln.KilnValueError, match="not a shared library"):
        kiln.graph.register_custom_backend("x", tmp_path / "text.so")
    # Not nanobind's "register_custom_backend(): incompatible function arguments".
    with raises(kiln.KilnTypeError, match="register_custom_backend: name must be a str, got int 1"):
        kiln.graph.register_custom_backend(1, tmp_path / "text.so")
    for path, shown in ((3, "int 3"), (b"text.so", "bytes b'text.so'")):
        with raises(kiln.KilnTypeError, match=re.escape(
                f"register_custom_backend: expected the path of a backend plugin (a str or "
                f"path-like) or an object with build(graph, config) and run(built, inputs) "
                f"methods, got {shown}")):
            kiln.graph.register_custom_backend("x", path)


def test_the_custom_backend_examples_run():
    """examples/custom_backend/run.py (part of make demo): both plugins built with CMake,
    registered, and run beside kiln_cpu, results checked against eager inside."""
    done = subprocess.run([sys.executable, str(REPO_DIR / "examples" / "custom_backend" / "run.py")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert out.count('[my_custom_backend] Build graph "sine"') == 1
    assert out.count("[my_custom_backend] Run id") == 2
    assert '[elementwise_backend] Build graph "mlp.part1": Add Relu Mul' in out
    assert "01_part0_kiln_cpu" in out and "MatMul" in out


@pytest.mark.parametrize("backend", ["kiln_cpu", "reference"])
def test_results_carry_no_gradient_and_keep_the_functions_own_detach(backend):
    # The reference backend recorded autograd while it ran the graph op by op, ignoring the
    # function's no_grad and detach(): backward() then gave [5, 16, 33] instead of failing.
    def f(x):
        with kiln.no_grad():
            y = x * x
        return (y * x).sum() + (x.detach() * x).sum()

    x = kiln.tensor([1.0, 2.0, 3.0]).requires_grad_()
    result = kiln.jit(f, backend=backend)(x)
    assert not result.requires_grad
    assert result.item() == f(x).item()
    # An output that is an input comes back without the input's gradient state.
    same = kiln.jit(lambda v: v.detach(), backend=backend)(x)
    assert not same.requires_grad and same.tolist() == [1.0, 2.0, 3.0]
    with raises(kiln.KilnValueError, match="result of a kiln.jit function, which carries no "
                                           "gradient"):
        (same * 5).sum().backward()
    assert x.grad is None


def test_kiln_grad_refuses_to_differentiate_through_a_jitted_call():
    # It gave zeros: a jitted function's results carry no gradient.
    jitted = kiln.jit(lambda x: mint.sin(x) * 2)
    x = kiln.tensor([0.0, 1.0])
    with raises(kiln.KilnValueError, match="<lambda> was called inside kiln.grad / "
                                           r"value_and_grad.*kiln.jit\(kiln.grad\(f\)\)"):
        kiln.grad(lambda v: mint.sum(jitted(v)))(x)
    inside = kiln.jit(kiln.grad(lambda v: mint.sum(mint.sin(v) * 2)))  # the way to do it
    np.testing.assert_allclose(inside(x).numpy(), 2 * np.cos([0.0, 1.0]), rtol=1e-6)
    assert jitted(x).tolist() == (mint.sin(x) * 2).tolist()  # outside kiln.grad it runs
    # A jitted call on values that need no gradient is fine inside kiln.grad: a normalization of
    # the data, a metric of detached logits.
    w = kiln.tensor([1.0, 2.0])
    g = kiln.grad(lambda v: mint.sum(jitted(x) * v))(w)
    np.testing.assert_allclose(g.numpy(), 2 * np.sin([0.0, 1.0]), rtol=1e-6)


@pytest.mark.parametrize("backend", ["kiln_cpu", "reference"])
def test_a_tensor_the_function_makes_and_the_build_folds_away_keeps_hitting(backend):
    # The trace guarded the new tensor like a weight read from outside; folded away, it died,
    # and every later call missed (and traced again, the cache growing without bound).
    f = kiln.jit(lambda x: x * (kiln.tensor(2.0) / 3), backend=backend)
    up = kiln.nn.Upsample(size=(6, 9), mode="bilinear")
    g = kiln.jit(lambda x: up(x), backend=backend)
    x = t(np.ones((2, 3), np.float32))
    image = t(np.ones((1, 2, 3, 4), np.float32))
    for _ in range(4):
        assert_close(f(x), np.full((2, 3), 2.0 / 3, np.float32))
        assert g(image).shape == (1, 2, 6, 9)
    assert f.cache_info() == CacheInfo(hits=3, misses=1, size=1)
    assert g.cache_info() == CacheInfo(hits=3, misses=1, size=1)


def test_masked_fill_with_a_tensor_value_is_traced_as_an_operand():
    # The value was read as a number at the trace: one from outside kept that value after an
    # in-place change, and one the function computes could not be traced at all (a misleading
    # "data-dependent control flow" error).
    v = kiln.tensor(np.float32(1.0))
    x = t(np.array([[0.0, -2.0, 3.0]], np.float32))
    outside = kiln.jit(lambda y: mint.masked_fill(y, y == 0, v))
    assert outside(x).tolist() == [[1.0, -2.0, 3.0]]
    v[...] = 5.0
    assert outside(x).tolist() == [[5.0, -2.0, 3.0]]
    computed = kiln.jit(lambda y: y.masked_fill(y < 0, y.max()))
    assert computed(x).tolist() == [[0.0, 3.0, 3.0]]

    def assign(y):
        z = y * 1
        z[z < 0] = mint.mean(y)
        return z

    assert kiln.jit(assign)(x).tolist() == assign(x).tolist()
    assert_close(assign(x), np.array([[0.0, 1 / 3, 3.0]], np.float32))


def test_clear_cache_while_the_function_is_traced():
    # The trace kept a reference into the signature's guards, which clear_cache() destroyed: a
    # segmentation fault.
    @kiln.jit
    def f(x):
        f.clear_cache()
        return x * 2

    assert f(t([1.0, 2.0])).tolist() == [2.0, 4.0]
    assert f(t([1.0, 2.0])).tolist() == [2.0, 4.0]


def _alive(refs):
    gc.collect()
    return sum(ref() is not None for ref in refs)


def test_a_jitted_method_keeps_no_dropped_instance_alive():
    class Model:
        def __init__(self, scale):
            self.w = mint.full([32, 32], scale)

        @kiln.jit
        def forward(self, x):
            return x @ self.w

    x = mint.ones([2, 32])
    refs = []
    for scale in range(1, 6):
        model = Model(float(scale))
        assert_close(model.forward(x), np.full((2, 32), 32.0 * scale, np.float32))
        assert_close(model.forward(x), np.full((2, 32), 32.0 * scale, np.float32))
        refs.append(weakref.ref(model))
        del model
        assert _alive(refs) == 0
    # Each build dropped the graphs of the instances dead by then: the last one's is left.
    assert Model.forward.cache_info() == CacheInfo(hits=5, misses=5, size=1)
    Model.forward.clear_cache()
    assert Model.forward.cache_info().size == 0


def test_a_jitted_cell_method_keeps_no_dropped_cell_alive():
    class Net(kiln.nn.Cell):
        def __init__(self):
            super().__init__()
            self.linear = kiln.nn.Linear(8, 8)
            self.dropout = kiln.nn.Dropout(0.5)  # its training flag is a guard of the graph

        @kiln.jit
        def construct(self, x):
            return self.dropout(self.linear(x))

    x = mint.ones([2, 8])
    refs = []
    for _ in range(4):
        net = Net().eval()
        want = net.linear(x).numpy()
        assert_close(net(x), want)
        refs.append(weakref.ref(net))
        del net
    assert _alive(refs) == 0
    assert Net.construct.cache_info().size == 1


def test_objects_compared_by_value_still_share_a_graph():
    @kiln.jit
    def f(x, mode, config):
        return x * 2.0 if mode == "double" and config["on"] else x

    x = mint.ones([3])
    for _ in range(3):
        assert_close(f(x, "do" + "uble", {"on": True}), np.full(3, 2.0, np.float32))
    assert f.cache_info() == CacheInfo(hits=2, misses=1, size=1)


def test_setting_grad_to_a_traced_value_is_refused():
    lin = kiln.nn.Linear(4, 3)
    opt = kiln.optim.SGD(lin.parameters(), lr=0.1)

    @kiln.jit
    def step(x, y):
        loss, grads = kiln.value_and_grad(lambda x, y: mint.mse_loss(lin(x), y), None,
                                          opt.parameters)(x, y)
        for p, g in zip(opt.parameters, grads):
            p.grad = g
        opt.step()
        return loss

    with raises(kiln.KilnNotImplementedError, match="setting .grad to a value traced inside a "
                                                    "jitted function"):
        step(mint.ones([8, 4]), mint.ones([8, 3]))
    assert lin.weight.grad is None  # nothing left behind

    @kiln.jit
    def clears(x):
        opt.zero_grad()  # None is no traced value
        return x * 2.0

    assert_close(clears(mint.ones([2])), np.full(2, 2.0, np.float32))


def test_a_tracer_kept_in_an_attribute_is_named_at_the_next_trace():
    class RunningMean(kiln.nn.Cell):
        def __init__(self):
            super().__init__()
            self.mean = mint.zeros([3])

        def construct(self, x):
            self.mean = 0.9 * self.mean + 0.1 * x.mean(0)  # rebinding: the tracer stays
            return x - self.mean

    cell = RunningMean()
    f = kiln.jit(lambda x: cell(x))
    f(mint.ones([4, 3]))
    with raises(kiln.KilnTypeError, match="uses a tensor that an earlier trace of a jitted "
                                          "function made and kept"):
        f(mint.ones([5, 3]))
    with raises(kiln.KilnTypeError, match="kept after its trace ended"):
        cell.mean * 2
