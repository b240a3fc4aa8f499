"""kiln.graph's passes from Python: DESIGN.md's seed plugin end to end (built with CMake and
find_package(Kiln)), every registration error, stages and priorities, unregister, cache
invalidation per backend, Python patterns (vars, constants, attributes, check), verify_pass on
right and wrong rewrites, f.optimized_graph / f.pass_report / debug=, KILN_PASS_REPORT, and the
examples/custom_pass demo."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import kiln
from kiln import mint
from kiln.jit import CacheInfo

from conftest import REPO_DIR, assert_close, raises

PASS_PLUGINS = REPO_DIR / "tests" / "cpp" / "pass" / "plugins"


@pytest.fixture(scope="session")
def seed_plugin(build_plugin):
    """tests/cpp/pass/plugins/add_neg_fusion.cpp, DESIGN.md's example as written."""
    return build_plugin("my_passes", [PASS_PLUGINS / "add_neg_fusion.cpp"])


@pytest.fixture(scope="session")
def broken_plugins(build_plugin):
    """Plugins that register_custom_pass must refuse, by what is wrong with them."""
    extension_plugins = REPO_DIR / "tests" / "cpp" / "extension" / "plugins"
    return {
        "abi": build_plugin("abi_mismatch_pass_plugin",
                            [PASS_PLUGINS / "abi_mismatch_pass_plugin.cc"]),
        "kind": build_plugin("backend_kind_pass_plugin",
                             [PASS_PLUGINS / "backend_kind_pass_plugin.cc"]),
        "no_entry": build_plugin("no_entry_library", [extension_plugins / "no_entry_library.cc"]),
    }


@pytest.fixture
def registered():
    """A list the test appends the names of passes it registers to; they are unregistered when
    it ends, passed or failed."""
    names = []
    yield names
    present = {p.name for p in kiln.graph.list_passes()}
    for name in dict.fromkeys(names):  # once each, in order
        if name in present:
            kiln.graph.unregister_custom_pass(name)


def t(array):
    return kiln.tensor(np.asarray(array, dtype=np.float32))


def pass_names_in_report(f, names):
    return [r.pass_name for r in f.pass_report().runs if r.pass_name in names]


# --- the seed example -------------------------------------------------------------------------

def test_seed_plugin_end_to_end(seed_plugin, registered, rng):
    kiln.graph.register_custom_pass("AddNegFusionPass", seed_plugin, backend="kiln_cpu")
    registered.append("AddNegFusionPass")
    info = [p for p in kiln.graph.list_passes() if p.name == "AddNegFusionPass"]
    assert info == [kiln.graph.PassInfo("AddNegFusionPass", "kiln_cpu", "pre_fusion", 0,
                                        str(seed_plugin), False)]

    @kiln.jit(backend="kiln_cpu")
    def net2(x, y):
        return x + mint.neg(y)     # runs as Sub after the pass

    x, y = rng.standard_normal((4, 8)).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    assert_close(net2(t(x), t(y)), x - y)
    optimized = net2.optimized_graph(t(x), t(y))
    assert "Sub(" in optimized and "Neg(" not in optimized, optimized
    assert "Neg(" in net2.graph(t(x), t(y))  # as traced
    runs = [r for r in net2.pass_report() if r.pass_name == "AddNegFusionPass"]
    assert len(runs) == 1 and runs[0].changed and runs[0].matches == 1
    assert runs[0].stage == "pre_fusion" and runs[0].refusals == 0 and runs[0].seconds >= 0
    assert "AddNegFusionPass" in str(net2.pass_report())
    assert "PassReport" in repr(net2.pass_report())
    # optimized_graph alone (no call) fills the report too.
    fresh = kiln.jit(lambda x, y: x + mint.neg(y), backend="kiln_cpu")
    assert "Sub(" in fresh.optimized_graph(t(x), t(y))
    assert [r.matches for r in fresh.pass_report() if r.pass_name == "AddNegFusionPass"] == [1]

    # Registered for kiln_cpu only: a reference build keeps the Neg.
    on_reference = kiln.jit(lambda x, y: x + mint.neg(y), backend="reference")
    assert_close(on_reference(t(x), t(y)), x - y)
    assert "Neg(" in on_reference.optimized_graph(t(x), t(y))
    assert pass_names_in_report(on_reference, {"AddNegFusionPass"}) == []
    assert kiln.graph.verify_pass("AddNegFusionPass").ok


def test_every_registration_error_says_why(tmp_path, seed_plugin, broken_plugins, registered):
    before = kiln.graph.list_passes()
    with raises(kiln.KilnValueError, match="cannot load pass plugin .*missing.so: no such file"):
        kiln.graph.register_custom_pass("AddNegFusionPass", tmp_path / "missing.so")
    (tmp_path / "text.so").write_text("not a library")
    with raises(kiln.KilnValueError, match="not a shared library"):
        kiln.graph.register_custom_pass("AddNegFusionPass", tmp_path / "text.so")
    with raises(kiln.KilnValueError, match="it has no entry point kiln_plugin_pass_entry"):
        kiln.graph.register_custom_pass("AddNegFusionPass", broken_plugins["no_entry"])
    with raises(kiln.KilnValueError,
                match="expected a plugin of kind 'pass', got one of kind 'backend'"):
        kiln.graph.register_custom_pass("AddNegFusionPass", broken_plugins["kind"])
    abi = kiln._C._abi_version()
    with raises(kiln.KilnValueError,
                match=f"built against Kiln ABI version {abi + 1} .*this Kiln has ABI version "
                      f"{abi} "):
        kiln.graph.register_custom_pass("AddNegFusionPass", broken_plugins["abi"])
    with raises(kiln.KilnValueError,
                match="\\('my_passes'\\) has no pass named 'Nope'; its passes: 'AddNegFusionPass'"):
        kiln.graph.register_custom_pass("Nope", seed_plugin)
    with raises(kiln.KilnValueError, match="unknown pass stage 'middle'; the stages are frontend"):
        kiln.graph.register_custom_pass("AddNegFusionPass", seed_plugin, stage="middle")
    with raises(kiln.KilnValueError,
                match="unknown backend 'nope'; registered backends: .*'kiln_cpu'"):
        kiln.graph.register_custom_pass("AddNegFusionPass", seed_plugin, backend="nope")
    with raises(kiln.KilnTypeError, match="register_custom_pass: plugin_so_path must be a str or "
                                          "path-like, got bytes b'my_passes.so'"):
        kiln.graph.register_custom_pass("AddNegFusionPass", b"my_passes.so")
    assert kiln.graph.list_passes() == before

    kiln.graph.register_custom_pass("AddNegFusionPass", str(seed_plugin), backend="reference",
                                    stage="fusion", priority=3)
    registered.append("AddNegFusionPass")
    with raises(kiln.KilnValueError,
                match="'AddNegFusionPass' is already registered \\(for backend 'reference', "
                      "stage fusion\\); unregister it first"):
        kiln.graph.register_custom_pass("AddNegFusionPass", seed_plugin)
    with raises(kiln.KilnValueError, match="already registered"):
        kiln.graph.register_pattern("AddNegFusionPass", src=lambda x: -x, dst=lambda x: x * -1.0)


def test_unregister(registered):
    kiln.graph.register_pattern("DoubleToAdd", src=lambda x: x * 2.0, dst=lambda x: x + x,
                                backend="reference")
    registered.append("DoubleToAdd")
    f = kiln.jit(lambda x: x * 2.0, backend="reference")
    assert "Add(" in f.optimized_graph(t([1.0]))
    assert f(t([1.5])).tolist() == [3.0]
    kiln.graph.unregister_custom_pass("DoubleToAdd")
    assert "DoubleToAdd" not in [p.name for p in kiln.graph.list_passes()]
    assert f(t([1.5])).tolist() == [3.0]
    assert f.cache_info().misses == 2  # built again, without the pass
    assert "Mul(" in f.optimized_graph(t([1.0]))
    with raises(kiln.KilnValueError,
                match="no pass named 'DoubleToAdd' is registered; registered passes: "):
        kiln.graph.unregister_custom_pass("DoubleToAdd")


def test_stages_and_priorities_order_the_passes(registered):
    # (name, stage, priority) in registration order; each pattern rewrites something distinct.
    specs = [("P_post", "post_fusion", 0), ("P_pre_late", "pre_fusion", 5),
             ("P_pre_a", "pre_fusion", 0), ("P_front", "frontend", 100),
             ("P_pre_b", "pre_fusion", 0), ("P_fusion", "fusion", -3)]
    for k, (name, stage, priority) in enumerate(specs):
        factor = float(k + 2)
        kiln.graph.register_pattern(name, src=lambda x, c=factor: x * c,
                                    dst=lambda x, c=factor: x * c + 0.0, backend="reference",
                                    stage=stage, priority=priority)
        registered.append(name)
    order = ["P_front", "P_pre_a", "P_pre_b", "P_pre_late", "P_fusion", "P_post"]
    assert [p.name for p in kiln.graph.list_passes() if p.name in order] == order
    stages = {p.name: (p.stage, p.priority) for p in kiln.graph.list_passes()}
    assert stages["P_front"] == ("frontend", 100) and stages["P_fusion"] == ("fusion", -3)
    f = kiln.jit(lambda x: x + 1.0, backend="reference")
    f(t([1.0]))
    assert pass_names_in_report(f, set(order)) == order


def test_priority_decides_which_rewrite_wins(registered):
    # neg(neg(x)) -> x and neg(x) -> x * -1 overlap: whichever runs first decides the result.
    def register(first):
        kiln.graph.register_pattern("NegNeg", src=lambda x: mint.neg(mint.neg(x)),
                                    dst=lambda x: x, backend="reference",
                                    priority=0 if first == "NegNeg" else 1)
        kiln.graph.register_pattern("NegToMul", src=lambda x: mint.neg(x), dst=lambda x: x * -1.0,
                                    backend="reference", priority=0 if first == "NegToMul" else 1)
        registered.extend(["NegNeg", "NegToMul"])

    # jit_level="O0": without the built-in passes, which simplify neg(neg(x)) themselves.
    f = kiln.jit(lambda x: mint.neg(mint.neg(x)) + 1.0, backend="reference", jit_level="O0")
    register("NegNeg")
    assert "Mul(" not in f.optimized_graph(t([2.0]))
    assert f(t([2.0])).tolist() == [3.0]
    kiln.graph.unregister_custom_pass("NegNeg")
    kiln.graph.unregister_custom_pass("NegToMul")
    register("NegToMul")
    assert f.optimized_graph(t([2.0])).count("Mul(") == 2
    assert f(t([2.0])).tolist() == [3.0]


def test_changing_registrations_rebuilds_only_affected_backends(registered):
    fn = lambda x, y: x + mint.neg(y)  # noqa: E731
    on_reference = kiln.jit(fn, backend="reference")
    on_cpu = kiln.jit(fn, backend="kiln_cpu")
    x, y = t([1.0, 2.0]), t([0.5, 4.0])
    for f in (on_reference, on_cpu):
        f(x, y)
        f(x, y)
    kiln.graph.register_pattern("SubPattern", src=fn, dst=lambda x, y: x - y, backend="reference")
    registered.append("SubPattern")
    for f in (on_reference, on_cpu):
        assert f(x, y).tolist() == [0.5, -2.0]
    assert on_reference.cache_info().misses == 2
    assert on_cpu.cache_info() == CacheInfo(hits=2, misses=1, size=1)


# --- Python patterns --------------------------------------------------------------------------

def test_pattern_inputs_match_by_position(registered, rng):
    kiln.graph.register_pattern("ScaledSub", src=lambda a, b: (a + mint.neg(b)) * 0.5,
                                dst=lambda a, b: (a - b) / 2.0)
    registered.append("ScaledSub")

    @kiln.jit
    def f(x, y, z):
        return (mint.exp(x) + mint.neg(y * z)) * 0.5

    x, y, z = (rng.standard_normal((3, 4)).astype(np.float32) for _ in range(3))
    assert_close(f(t(x), t(y), t(z)), (np.exp(x) - y * z) / 2)
    ir = f.optimized_graph(t(x), t(y), t(z))
    assert "Div(" in ir and "Neg(" not in ir, ir
    assert [r.matches for r in f.pass_report() if r.pass_name == "ScaledSub"] == [1]


def test_pattern_constants_and_attributes_must_match(registered):
    kiln.graph.register_pattern("TwiceToAdd", src=lambda x: x * 2.0, dst=lambda x: x + x)
    kiln.graph.register_pattern("LastSumToMean",
                                src=lambda x: mint.sum(x, dim=-1, keepdim=True),
                                dst=lambda x: mint.mean(x, dim=-1, keepdim=True) * 4.0)
    registered.extend(["TwiceToAdd", "LastSumToMean"])
    f = kiln.jit(lambda x: (x * 2.0, x * 3.0, mint.sum(x, dim=-1, keepdim=True),
                            mint.sum(x, dim=0, keepdim=True)))
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    ir = f.optimized_graph(t(x))
    assert ir.count("Add(") == 1 and ir.count("Mul(") == 2, ir  # x * 3 and the mean's * 4
    assert ir.count("ReduceMean(") == 1 and ir.count("ReduceSum(") == 1, ir
    got = f(t(x))
    for g, want in zip(got, (x * 2, x * 3, x.sum(-1, keepdims=True), x.sum(0, keepdims=True))):
        assert_close(g, want)
    # The rewrite to mean * 4 is right only for rows of 4: verify_pass finds that.
    report = kiln.graph.verify_pass("LastSumToMean", trials=30)
    assert not report.ok and report.failures > 0, report
    assert kiln.graph.verify_pass("TwiceToAdd", trials=30).ok


def test_a_number_matches_where_it_widens_nothing_and_other_constants_at_their_shapes(registered):
    # Note [Constants of a graph pattern]. The pattern's 2.0 matches a folded constant of twos of
    # any shape that an elementwise op takes without widening its other operand; full([3, 4, 4], 2)
    # widens the product, which the sum hid from the root's check: the rewrite gave 240 for 720.
    kiln.graph.register_pattern("SumOfTwice", src=lambda a: mint.sum(a * 2.0),
                                dst=lambda a: mint.sum(a) * 2.0,
                                example_args=[t(np.zeros((4, 4)))])
    # Other constants match at the pattern's shapes only: of the constant, and of each input of
    # the ops that take it (a ones([4, 4]) that widens a row of 4; a MatMul's matrix).
    kiln.graph.register_pattern("SumOfRows", src=lambda a: mint.sum(a * t(np.ones((4, 4)))),
                                dst=lambda a: mint.sum(a) * 4.0, example_args=[t(np.zeros(4))])
    kiln.graph.register_pattern("SumOfProduct", src=lambda a: mint.sum(a @ t(np.full((4, 4), 2.0))),
                                dst=lambda a: mint.sum(a) * 8.0,
                                example_args=[t(np.zeros((4, 4)))])
    registered.extend(["SumOfTwice", "SumOfRows", "SumOfProduct"])
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    f = kiln.jit(lambda a: tuple(mint.sum(a * mint.full(shape, 2.0))
                                 for shape in ([3, 4, 4], [4, 4], [4], [])))
    for got, scale in zip(f(t(x)), (6, 2, 2, 2)):
        assert got.item() == x.sum() * scale
    assert [r.matches for r in f.pass_report() if r.pass_name == "SumOfTwice"] == [3]
    g = kiln.jit(lambda a: (mint.sum(a * 1.0), mint.sum(a * mint.full([4, 4], 1.0))))
    row = np.arange(4, dtype=np.float32)
    assert [v.item() for v in g(t(row))] == [6.0, 24.0]
    assert [r.matches for r in g.pass_report() if r.pass_name == "SumOfRows"] == [1]
    # The same constant beside a [4, 4] (no widening: 360, where the rewrite gave 1440), and
    # products with another matrix (216, where the rewrite gave 288).
    assert g(t(x))[1].item() == x.sum()
    assert [r.matches for r in g.pass_report() if r.pass_name == "SumOfRows"] == [0]
    h = kiln.jit(lambda b: (mint.sum(b @ mint.full([3, 3], 2.0)),
                            mint.sum(b @ mint.full([3, 4], 2.0))))
    b = np.arange(9, dtype=np.float32).reshape(3, 3)
    assert [v.item() for v in h(t(b))] == [(b @ np.full((3, 3), 2.0)).sum(),
                                          (b @ np.full((3, 4), 2.0)).sum()]
    assert [r.matches for r in h.pass_report() if r.pass_name == "SumOfProduct"] == [0]
    square = kiln.jit(lambda a: mint.sum(a @ mint.full([4, 4], 2.0)))
    assert square(t(x)).item() == (x @ np.full((4, 4), 2.0)).sum()


def test_a_constant_elementwise_ops_take_matches_at_other_shapes_where_it_widens_nothing(registered):
    # A bias row and a uniform ones([4, 4]) traced beside a [4, 4] match beside an [8, 4] /
    # [8, 4]-broadcastable operand too; where they would widen it, not.
    bias = t([1.0, 2.0, 3.0, 4.0])
    kiln.graph.register_pattern("BiasTwice", src=lambda a: (a + bias) + bias,
                                dst=lambda a: a + bias * 2.0, example_args=[t(np.zeros((4, 4)))])
    kiln.graph.register_pattern("TimesOnes", src=lambda a: a * t(np.ones((4, 4))),
                                dst=lambda a: a + 0.0, example_args=[t(np.zeros((4, 4)))])
    registered.extend(["BiasTwice", "TimesOnes"])
    def program(a):
        row = mint.arange(1, 5).to(kiln.float32)  # made inside: a frozen constant once folded
        return (a + row) + row, a * mint.ones([8, 4]), a * mint.ones([2, 8, 4])

    f = kiln.jit(program)
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    twice, ones, wider = f(t(x))
    assert_close(twice, x + 2 * np.array([1.0, 2.0, 3.0, 4.0], np.float32))
    assert_close(ones, x)
    assert_close(wider, np.broadcast_to(x, (2, 8, 4)))
    matches = {r.pass_name: r.matches for r in f.pass_report() if r.pass_name in registered}
    assert matches == {"BiasTwice": 1, "TimesOnes": 1}, matches


def test_integer_constants_and_attributes_match_exactly(registered):
    # 2**53 + 1 and 2**53 are one double: compared through double, the pattern's constant and
    # clamp bound matched the program's other number.
    big = 2**53
    xi = kiln.tensor(np.arange(4, dtype=np.int64))
    kiln.graph.register_pattern("AddBigger", src=lambda a: a + (big + 1),
                                dst=lambda a: a - (-(big + 1)), example_args=[xi])
    kiln.graph.register_pattern("ClampBigger", src=lambda a: mint.clamp(a, min=big + 1),
                                dst=lambda a: a * 0 + (big + 1), example_args=[xi])
    registered.extend(["AddBigger", "ClampBigger"])
    f = kiln.jit(lambda a: (a + big, mint.clamp(a, min=big), a + (big + 1)))
    plus, clamped, plus_one = f(xi)
    assert plus.tolist() == [big, big + 1, big + 2, big + 3]
    assert clamped.tolist() == [big] * 4
    assert plus_one.tolist() == [big + 1, big + 2, big + 3, big + 4]
    assert [r.matches for r in f.pass_report() if r.pass_name == "AddBigger"] == [1]


@pytest.mark.parametrize("backend", ["kiln_cpu", "reference"])
def test_a_pattern_constant_never_matches_a_captured_tensor(registered, backend):
    # w is all twos at the trace, but it is the program's tensor: rewriting x * w to x + x would
    # go wrong at its first in-place update (Note [Frozen constants]).
    kiln.graph.register_pattern("TwiceToAddFrozen", src=lambda x: x * 2.0, dst=lambda x: x + x)
    kiln.graph.register_pattern("TimesRowToAdd", src=lambda x: x * t([2.0, 3.0]),
                                dst=lambda x: x + x, example_args=[t(np.zeros((2, 2)))])
    registered.extend(["TwiceToAddFrozen", "TimesRowToAdd"])
    w, row = t(np.full((2, 2), 2.0)), t([2.0, 3.0])
    f = kiln.jit(lambda x: (x * w, x * row, x * 2.0), backend=backend)
    x = t(np.ones((2, 2)))
    assert f.optimized_graph(x).count("Mul(") == 2  # only the Python number's product went
    w += 1.0
    row += 1.0
    got = f(x)
    wants = (np.full((2, 2), 3.0), np.tile([3.0, 4.0], (2, 1)), np.full((2, 2), 2.0))
    for g, want in zip(got, wants):
        assert_close(g, want)


@pytest.mark.parametrize("backend", ["kiln_cpu", "reference"])
def test_a_rewrite_never_makes_an_output_the_callers_input(registered, backend):
    # x * 1.0 -> x at the output would hand the caller x itself: such an output becomes a copy
    # (Note [Fresh outputs of a compiled graph]); `return x` as traced stays x, as eagerly.
    kiln.graph.register_pattern("DropTimesOne", src=lambda x: x * 1.0, dst=lambda x: x)
    registered.append("DropTimesOne")
    f = kiln.jit(lambda x: (x * 1.0, mint.exp(x * 1.0), x), backend=backend)
    x = t(np.zeros(3))
    ir = f.optimized_graph(x)
    assert "Mul(" not in ir and ir.count("Cast(") == 1, ir
    out, e, same = f(x)
    assert same.shares_storage_with(x) and not out.shares_storage_with(x)
    out += 5.0
    assert_close(x, np.zeros(3))
    assert_close(e, np.ones(3))
    assert "DropTimesOne" in [r.pass_name for r in f.pass_report().runs]


@pytest.mark.parametrize("backend", ["kiln_cpu", "reference"])
def test_a_rewrite_never_makes_an_output_a_view_of_the_callers_input(registered, backend):
    # x * 1.0 -> x.reshape(...) at an output handed the caller a view of x, which its in-place
    # update wrote through; x.T as traced stays the view it was eagerly.
    kiln.graph.register_pattern("TimesOneToView", src=lambda x: x * 1.0,
                                dst=lambda x: mint.reshape(x, [4, 4]))
    # An element of a view op's tuple is a view too (Split's, through TupleGetItem).
    kiln.graph.register_pattern("PlusZeroToSplit", src=lambda x: x + 0.0,
                                dst=lambda x: mint.split(x, 4)[0])
    registered.extend(["TimesOneToView", "PlusZeroToSplit"])
    f = kiln.jit(lambda x: (x * 1.0, x.T, x * 1.0, x + 0.0), backend=backend)
    x = t(np.zeros((4, 4)))
    out, transposed, again, piece = f(x)
    matches = {r.pass_name: r.matches for r in f.pass_report().runs}
    assert matches["TimesOneToView"] == 2 and matches["PlusZeroToSplit"] == 1, matches
    assert transposed.shares_storage_with(x)
    assert not out.shares_storage_with(x) and not again.shares_storage_with(out)
    assert not piece.shares_storage_with(x)
    out += 5.0
    piece += 7.0
    assert_close(x, np.zeros((4, 4)))
    assert_close(again, np.zeros((4, 4)))


def test_parameters_with_defaults_are_constants(registered):
    # `s=2.0` binds a value, as a loop's lambdas do; as an input it made a pattern of every
    # product, and x * y became x + x.
    kiln.graph.register_pattern("DefaultTwice", src=lambda a, s=2.0: a * s,
                                dst=lambda a, s=2.0: a + a)
    registered.append("DefaultTwice")
    f = kiln.jit(lambda x, y: (x * y, x * 2.0))
    product, twice = f(t([1.0, 2.0]), t([5.0, 7.0]))
    assert product.tolist() == [5.0, 14.0] and twice.tolist() == [2.0, 4.0]
    assert [r.matches for r in f.pass_report() if r.pass_name == "DefaultTwice"] == [1]


def test_pattern_check_gets_pattern_values(registered):
    seen = []

    def only_float32(x, c):
        seen.append((x.dtype, x.shape, x.value, c.dtype, c.shape, c.value))
        return x.dtype == kiln.float32

    kiln.graph.register_pattern("MulToSquare", src=lambda x, c: x * c * c,
                                dst=lambda x, c: x * (c * c), check=only_float32)
    registered.append("MulToSquare")
    k = kiln.tensor(np.float32(3.0))  # a constant of the traced graphs
    f = kiln.jit(lambda x: x * k * k)
    assert f(t([[1.0, 2.0]])).tolist() == [[9.0, 18.0]]
    # k is the caller's tensor: its values may change, so the check does not see them.
    assert seen[0] == (kiln.float32, (1, 2), None, kiln.float32, (), None)
    assert [r.matches for r in f.pass_report() if r.pass_name == "MulToSquare"] == [1]
    g = kiln.jit(lambda x: x * k * k)
    g(kiln.tensor(np.ones(2)))  # float64: declined by the check
    assert [(r.matches, r.refusals) for r in g.pass_report() if r.pass_name == "MulToSquare"] \
        == [(0, 1)]


def test_a_check_sees_the_values_of_numbers_but_not_of_tensors_the_caller_holds(registered):
    # A check that read a captured weight's values baked them into the cached graph: after
    # W *= 5 the jitted call still rewrote W * x as x + x.
    kiln.graph.register_pattern(
        "MulByTwoToAdd", src=lambda a, c: a * c, dst=lambda a, c: a + a,
        check=lambda a, c: c.value is not None and bool((c.value.numpy() == 2).all()))
    registered.append("MulByTwoToAdd")
    w = t([2.0, 2.0, 2.0])
    x = t([1.0, 2.0, 3.0])
    f = kiln.jit(lambda v: v * w)
    assert f(x).tolist() == [2.0, 4.0, 6.0]
    w *= 5.0
    assert f(x).tolist() == [10.0, 20.0, 30.0]
    assert [r.matches for r in f.pass_report() if r.pass_name == "MulByTwoToAdd"] == [0]
    g = kiln.jit(lambda v: v * 2.0)  # a Python number: its value is the check's to read
    assert g(x).tolist() == [2.0, 4.0, 6.0]
    assert [r.matches for r in g.pass_report() if r.pass_name == "MulByTwoToAdd"] == [1]


def test_a_none_constant_reaches_a_check_as_none(registered):
    # layer_norm without weight and bias: its None inputs are constants, whose value was an
    # undefined tensor that raised at repr, .shape or .dtype.
    seen = []

    def note(x, w, b):
        seen.append((w, b))
        return False  # the destination holds the source again

    kiln.graph.register_pattern("NormTwice", src=lambda x, w, b: mint.layer_norm(x, [4], w, b),
                                dst=lambda x, w, b: mint.layer_norm(x, [4], w, b) * 1.0,
                                check=note, example_args=[t(np.zeros((2, 4))), t(np.ones(4)),
                                                          t(np.zeros(4))])
    registered.append("NormTwice")
    f = kiln.jit(lambda x: mint.layer_norm(x, [4]))
    f(t(np.arange(8.0).reshape(2, 4)))
    assert seen and seen[0][0].value is None and seen[0][1].value is None, seen
    assert "PatternValue" in repr(seen[0][0])


def test_a_raising_check_names_the_pattern(registered):
    def broken(x):
        raise RuntimeError("no idea")

    kiln.graph.register_pattern("BrokenCheck", src=lambda x: mint.exp(x), dst=lambda x: x,
                                check=broken, backend="reference")
    registered.append("BrokenCheck")
    with raises(kiln.KilnError, match="the check of pattern 'BrokenCheck' raised RuntimeError: no idea"):
        kiln.jit(lambda x: mint.exp(x), backend="reference")(t([1.0]))


def test_example_args_set_the_traced_dtypes_and_shapes(registered):
    kiln.graph.register_pattern("ScaleAfterTranspose", src=lambda x: x.T * 2.0,
                                dst=lambda x: (x * 2.0).T,
                                example_args=[kiln.tensor(np.zeros((2, 3)))])
    registered.append("ScaleAfterTranspose")
    f = kiln.jit(lambda x: x.T * 2.0 + 1)
    x = np.arange(6.0).reshape(2, 3)
    assert_close(f(kiln.tensor(x)), x.T * 2 + 1)
    assert [r.matches for r in f.pass_report() if r.pass_name == "ScaleAfterTranspose"] == [1]
    with raises(kiln.KilnTypeError, match="example_args has 2"):
        kiln.graph.register_pattern("Examples", src=lambda x: -x, dst=lambda x: x * -1.0,
                                    example_args=[t([1.0]), t([1.0])])


def test_pattern_errors(registered):
    with raises(kiln.KilnValueError, match="input 1 \\('y'\\) of the source graph is not used"):
        kiln.graph.register_pattern("Unused", src=lambda x, y: mint.exp(x), dst=lambda x, y: x)
    with raises(kiln.KilnValueError, match="the source graph takes 1 inputs but the destination "
                                           "graph takes 2"):
        kiln.graph.register_pattern("Counts", src=lambda x: mint.exp(x), dst=lambda x, y: x)
    with raises(kiln.KilnTypeError, match="src returned tuple; a pattern function returns one"):
        kiln.graph.register_pattern("Tuple", src=lambda x: (x, x), dst=lambda x: x)
    with raises(kiln.KilnValueError, match="the source graph's output is .*parameter x.*not an op"):
        kiln.graph.register_pattern("Nothing", src=lambda x: x, dst=lambda x: x * 1.0)

    def data_dependent(x):
        if x.sum() > 0:
            return x
        return -x

    with raises(kiln.KilnError, match="test_passes.py:.*if x.sum\\(\\) > 0"):
        kiln.graph.register_pattern("Branchy", src=data_dependent, dst=lambda x: x)
    with raises(kiln.KilnTypeError, match="src must be callable"):
        kiln.graph.register_pattern("NotCallable", src=3, dst=lambda x: x)
    with raises(kiln.KilnTypeError, match="only positional tensors"):
        kiln.graph.register_pattern("Star", src=lambda *xs: xs[0], dst=lambda x: x)
    argument_errors = [
        (dict(name=5), kiln.KilnTypeError, "name must be a str, got int 5"),
        (dict(backend=None), kiln.KilnTypeError, "backend must be a str, got NoneType None"),
        (dict(stage=None), kiln.KilnTypeError, "stage must be a str"),
        (dict(priority="x"), kiln.KilnTypeError, "priority must be an int, got str 'x'"),
        (dict(priority=2**40), kiln.KilnValueError, "priority must be in \\[-2147483648, "),
        (dict(example_args=[3.0]), kiln.KilnTypeError,
         "example_args\\[0\\] is a float, expected a kiln.Tensor"),
    ]
    for kwargs, error, message in argument_errors:
        arguments = dict(name="Arguments", src=lambda x: -x, dst=lambda x: x * -1.0) | kwargs
        with raises(error, match="register_pattern: " + message):
            kiln.graph.register_pattern(**arguments)
    with raises(kiln.KilnValueError, match="unknown pass stage 'late'"):
        kiln.graph.register_pattern("Stage", src=lambda x: -x, dst=lambda x: x * -1.0,
                                    stage="late")
    names = {p.name for p in kiln.graph.list_passes()}
    assert not names & {"Unused", "Counts", "Tuple", "Nothing", "Branchy", "Stage", "Arguments"}


# --- verify_pass ------------------------------------------------------------------------------

def test_verify_pass_catches_a_wrong_rewrite(registered):
    kiln.graph.register_pattern("WrongSub", src=lambda x, y: x + mint.neg(y),
                                dst=lambda x, y: x + y, backend="reference")
    registered.append("WrongSub")
    report = kiln.graph.verify_pass("WrongSub", trials=20, seed=3)
    assert not report.ok and report.trials == 20 and report.failures > 0
    failure = report.first_failure
    assert list(failure.inputs) == ["x", "y"]
    # Inputs of any dtype the instance drew: compare in float64 with a 16-bit float's tolerance.
    x, y = (failure.inputs[k].double().numpy() for k in ("x", "y"))
    np.testing.assert_allclose(failure.expected[0].double().numpy(), x - y, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(failure.got[0].double().numpy(), x + y, rtol=2e-2, atol=2e-2)
    assert "Neg(" in failure.before and "Neg(" not in failure.after
    text = repr(report)
    assert text.startswith("verify_pass('WrongSub'): 20 trials")
    for part in ("FAILED", "first failure", "inputs:\n  x = ", "results after the rewrite",
                 "graph before the rewrite"):
        assert part in text, text
    assert repr(kiln.graph.verify_pass("WrongSub", trials=20, seed=3)) == text  # deterministic


def test_verify_pass_prints_a_difference_with_the_digits_that_show_it(registered):
    # -x vs x * (-1 - 3e-9): the float64 instances differ past the 7th digit.
    kiln.graph.register_pattern("Nudge", src=lambda x: mint.neg(x),
                                dst=lambda x: x * (-1 - 3e-9), backend="reference")
    registered.append("Nudge")
    report = kiln.graph.verify_pass("Nudge", trials=30, seed=1)
    assert report.failures > 0
    before, after = re.search(r"is (\S+) before the rewrite and (\S+) after it \(float64",
                              report.first_failure.reason).groups()
    assert before != after and float(after) / float(before) > 1 + 2e-9


def test_verify_pass_fails_when_no_trial_could_be_rewritten(registered):
    # A check that raises fails every rewrite: FAILED, not "NOT CHECKED" (nothing went unchecked).
    def check(x):
        raise ArithmeticError("the check gave up")

    kiln.graph.register_pattern("GivesUp", src=lambda x: mint.exp(x), dst=lambda x: mint.exp(x),
                                check=check, backend="reference")
    registered.append("GivesUp")
    report = kiln.graph.verify_pass("GivesUp", trials=3)
    assert (report.rewrites, report.failures, report.ok) == (0, 3, False)
    assert repr(report).startswith("verify_pass('GivesUp'): 3 trials, 0 rewritten, 3 failed: "
                                   "FAILED\nfirst failure, trial 0: the rewrite failed: ")
    assert "the check gave up" in report.first_failure.reason


def test_verify_pass_passes_right_rewrites(registered):
    kiln.graph.register_pattern("RightSub", src=lambda x, y: x + mint.neg(y),
                                dst=lambda x, y: x - y, backend="reference")
    kiln.graph.register_pattern("ExpLog", src=lambda x: mint.exp(x) * mint.exp(x),
                                dst=lambda x: mint.exp(x * 2.0), backend="reference")
    registered.extend(["RightSub", "ExpLog"])
    report = kiln.graph.verify_pass("RightSub")
    assert report.ok and report.trials == 100 and report.rewrites > 0 and report.failures == 0
    assert report.first_failure is None
    assert str(report).startswith("verify_pass('RightSub'): 100 trials")
    assert kiln.graph.verify_pass("ExpLog", trials=30).ok


def test_verify_pass_errors():
    with raises(kiln.KilnValueError, match="no pass named 'Nope' is registered"):
        kiln.graph.verify_pass("Nope")
    with raises(kiln.KilnValueError, match="verify_pass: trials must be in \\[1, "):
        kiln.graph.verify_pass("Nope", trials=-1)
    with raises(kiln.KilnValueError, match="verify_pass: seed must be in \\[0, 18446744073709551615\\]"):
        kiln.graph.verify_pass("Nope", seed=2**64)
    with raises(kiln.KilnTypeError, match="unregister_custom_pass: name must be a str, got int 3"):
        kiln.graph.unregister_custom_pass(3)


# --- the jit side -----------------------------------------------------------------------------

def test_jit_debug_option_and_pass_report_env(tmp_path):
    f = kiln.jit(lambda x: x + 1.0, debug=True)
    assert f.debug and f(t([1.0])).tolist() == [2.0]
    assert not kiln.jit(lambda x: x).debug
    assert len(kiln.jit(lambda x: x).pass_report()) == 0  # before the first build
    script = tmp_path / "report.py"
    script.write_text("import kiln\n"
                      "kiln.graph.register_pattern('Twice', src=lambda x: x * 2.0, "
                      "dst=lambda x: x + x)\n"
                      "kiln.jit(lambda x: x * 2.0)(kiln.tensor([1.0]))\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env={**os.environ, "KILN_PASS_REPORT": "1"}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "kiln: passes on graph" in done.stderr and "Twice" in done.stderr, done.stderr


def test_the_custom_pass_examples_run(extension_cache):
    """examples/custom_pass/run.py (part of make demo): the plugin built with CMake, a Python
    pattern, the matmul + add + relu fusion into a custom op; results checked inside."""
    done = subprocess.run([sys.executable, str(REPO_DIR / "examples" / "custom_pass" / "run.py"),
                           "--quick"], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "KILN_EXTENSION_DIR": str(extension_cache)})
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "AddNegFusionPass" in out and "Sub(" in out
    assert "MatMulAddRelu(" in out
    assert "verify_pass('MatMulAddReluFusion')" in out and "ok" in out
