"""What kiln_cpu does to a graph and how it runs it, beyond the results (test_jit_cpu.py checks
those): its fusion passes in the optimized graph at "O1" and not at "O0", the FusedElementwise
and FusedMatMul ops they make (also run on the reference backend), f.memory_plan() and the peak
memory of a call against it."""

import math

import numpy as np
import pytest

import kiln
from kiln import mint

from conftest import raises


def within_plan(peak, plan):
    """The measured peak against the plan: the caching allocator rounds each block up to its size
    class (at most a quarter more below 2 MiB, Note [Size classes] in caching_allocator.cc; the
    sizes here stay below it), and the plan counts requested bytes."""
    return 0 < peak <= plan["peak_bytes"] * 1.25 + 128


def kt(array):
    return kiln.tensor(np.asarray(array))


def rand(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def test_o1_fuses_an_elementwise_chain_into_one_node_and_o0_does_not():
    x = kt(rand(64, 300))

    def f(x):
        return mint.gelu(x * 2 + 1)

    o1 = kiln.jit(f, jit_level="O1").optimized_graph(x)
    o0 = kiln.jit(f, jit_level="O0").optimized_graph(x)
    assert o1.count("FusedElementwise(") == 1 and "= Gelu(" not in o1 and "= Mul(" not in o1
    assert 'program = "Mul(i0,i1);Add(r0,i2);Gelu(r1)"' in o1
    assert "FusedElementwise" not in o0 and "= Gelu(" in o0
    want = kiln.jit(f, backend="reference")(x).numpy()
    np.testing.assert_array_equal(kiln.jit(f)(x).numpy(), want)  # the same kernels, tile by tile


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16], ids=str)
def test_a_16_bit_chain_is_fused_and_rounds_once(dtype):
    # Note [16-bit programs]: the chain computes in float32 and rounds at its output, so it is the
    # float32 chain on the same inputs rounded once; eager rounds after every op, within a few
    # units in the last place of that.
    x = kt(rand(64, 300)).to(dtype)

    def f(x):
        return mint.softmax(mint.gelu(x * 2 + 1), dim=-1)

    g = kiln.jit(f)
    assert g.optimized_graph(x).count("FusedElementwise(") == 1
    got = g(x)
    assert got.dtype == dtype
    once = f(x.to(kiln.float32)).to(dtype)
    np.testing.assert_array_equal(got.to(kiln.float32).numpy(), once.to(kiln.float32).numpy())
    eager = f(x).to(kiln.float32).numpy()
    np.testing.assert_allclose(got.to(kiln.float32).numpy(), eager,
                               rtol=2e-2 if dtype == kiln.bfloat16 else 4e-3, atol=1e-4)


def test_ops_that_jump_at_a_boundary_stay_out_of_16_bit_groups():
    # floor(x * 10) of float16 0.1 is 1 on the rounded product (as eager), 0 on float32's 0.99998.
    x = kt(np.array([0.1, 1.3, -0.7], np.float32)).to(kiln.float16)

    def f(x):
        return mint.exp(mint.floor(x * 10) + mint.remainder(x * 10, 1.0))

    g = kiln.jit(f)
    text = g.optimized_graph(x)
    assert "= Floor(" in text and "= Remainder(" in text
    np.testing.assert_array_equal(g(x).numpy(), f(x).numpy())


def test_a_trailing_softmax_and_broadcast_rows_and_columns_join_the_group():
    x, row, col = kt(rand(16, 128)), kt(rand(128, seed=1)), kt(rand(16, 1, seed=2))

    def f(x, row, col):
        return mint.softmax(mint.exp(x * col) * 0.5 + row, dim=-1)

    g = kiln.jit(f)
    text = g.optimized_graph(x, row, col)
    assert text.count("FusedElementwise(") == 1 and "Softmax(r" in text
    np.testing.assert_array_equal(g(x, row, col).numpy(),
                                  kiln.jit(f, backend="reference")(x, row, col).numpy())


def test_a_value_used_outside_the_group_is_stored_not_fused_away():
    x = kt(rand(8, 32))

    def f(x):
        t = mint.exp(x)          # read by the group and returned
        return mint.sqrt(mint.abs(t - 1.0)), t

    g = kiln.jit(f)
    text = g.optimized_graph(x)
    assert "= Exp(" in text and "FusedElementwise(" in text
    a, b = g(x)
    ra, rb = kiln.jit(f, backend="reference")(x)
    np.testing.assert_array_equal(a.numpy(), ra.numpy())
    np.testing.assert_array_equal(b.numpy(), rb.numpy())


@pytest.mark.parametrize("activation,name", [(mint.relu, "Relu"), (mint.gelu, "Gelu"),
                                             (mint.silu, "Silu"), (mint.sigmoid, "Sigmoid")])
def test_linear_bias_activation_becomes_one_fused_matmul(activation, name):
    x, w, b = kt(rand(32, 48)), kt(rand(24, 48, seed=1)), kt(rand(24, seed=2))

    def f(x):
        return activation(mint.linear(x, w, b))

    g = kiln.jit(f)
    text = g.optimized_graph(x)
    assert "FusedMatMul(" in text and f'activation = "{name}"' in text
    assert "= Linear(" not in text
    np.testing.assert_allclose(g(x).numpy(), kiln.jit(f, backend="reference")(x).numpy(),
                               rtol=1e-5, atol=1e-5)


def test_matmul_plus_a_bias_row_becomes_a_fused_matmul_in_matmul_layout():
    x, w, b = kt(rand(4, 8, 16)), kt(rand(16, 12, seed=1)), kt(rand(12, seed=2))

    def f(x):
        return mint.tanh(mint.matmul(x, w) + b)

    g = kiln.jit(f)
    text = g.optimized_graph(x)
    assert "FusedMatMul(" in text and "transpose_weight = false" in text
    np.testing.assert_allclose(g(x).numpy(), np.tanh(x.numpy() @ w.numpy() + b.numpy()),
                               rtol=1e-5, atol=1e-5)


def test_memory_plan_reports_the_arena_and_reuses_memory_along_a_chain():
    x = kt(rand(256, 256))

    def chain(x):
        for _ in range(8):
            x = mint.softmax(x, dim=0)  # not fusible (not the last dimension): 8 buffers
        return x

    g = kiln.jit(chain)
    plan = g.memory_plan(x)
    assert set(plan) == {"peak_bytes", "arena_bytes", "output_bytes", "unshared_bytes", "buffers",
                         "in_place"}
    size = 256 * 256 * 4
    assert plan["output_bytes"] == size
    assert plan["peak_bytes"] == plan["arena_bytes"] + plan["output_bytes"]
    assert plan["buffers"] == 7 and plan["unshared_bytes"] == 7 * size
    assert plan["arena_bytes"] == 2 * size  # two buffers take turns
    assert g.cache_info().misses == 1  # memory_plan built the graph; calls reuse it
    np.testing.assert_array_equal(g(x).numpy(), kiln.jit(chain, backend="reference")(x).numpy())
    assert g.cache_info().hits == 1


def test_an_elementwise_chain_at_o0_writes_in_place():
    x = kt(rand(64, 64))

    def chain(x):
        return mint.exp(mint.sin(mint.cos(mint.exp(x * 0.01))))

    plan = kiln.jit(chain, jit_level="O0").memory_plan(x)
    assert plan["in_place"] >= 2
    assert plan["arena_bytes"] == 64 * 64 * 4  # one buffer, rewritten in place


def test_peak_memory_of_a_call_stays_within_the_plan():
    x, w = kt(rand(128, 256)), kt(rand(256, 256, seed=1))

    def f(x):
        h = mint.relu(mint.matmul(x, w))
        h = mint.softmax(h * 0.1, dim=0)
        return mint.gelu(mint.matmul(h, w) + x) * 2

    g = kiln.jit(f)
    plan = g.memory_plan(x)
    g(x).numpy()  # warm
    kiln.runtime.synchronize()
    kiln.runtime.reset_peak_memory_stats()
    before = kiln.runtime.memory_stats()["allocated"]
    out = g(x)
    out.numpy()
    peak = kiln.runtime.memory_stats()["peak"] - before
    assert within_plan(peak, plan), (peak, plan)


def test_memory_plan_needs_a_backend_that_plans():
    x = kt(rand(4))
    with raises(kiln.KilnValueError, match="does not plan memory"):
        kiln.jit(lambda x: x + 1, backend="reference").memory_plan(x)



@pytest.mark.parametrize("rows,length", [(100, 16), (7, 3000), (33, 2048), (5, 1)])
def test_a_fused_softmax_over_short_and_long_rows_equals_the_ops_one_by_one(rows, length):
    x = kt(rand(rows, length))

    def f(x):
        return mint.log_softmax(mint.tanh(x) * 3.0, dim=-1), mint.softmax(x * 0.5 - 1.0, dim=-1)

    g = kiln.jit(f)
    assert g.optimized_graph(x).count("FusedElementwise(") == 2
    for got, want in zip(g(x), kiln.jit(f, backend="reference")(x)):
        np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("seed", range(12))
def test_selects_and_slices_of_permuted_values_are_views_with_numpys_values(seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(d) for d in rng.integers(1, 6, size=4))
    perm = [int(d) for d in rng.permutation(4)]
    x = kt(rand(*shape, seed=seed))
    pshape = [shape[d] for d in perm]
    dim = int(rng.integers(0, 4))
    index = int(rng.integers(0, pshape[dim]))
    start = int(rng.integers(0, pshape[-1]))

    def f(x):
        p = mint.permute(x + 1.0, perm)
        return p.select(dim, index) * 2.0, p[..., start:] * 3.0

    expected_p = np.transpose(x.numpy() + 1.0, perm)
    expected = (np.take(expected_p, index, axis=dim) * 2.0, expected_p[..., start:] * 3.0)
    for backend in ("kiln_cpu", "reference"):
        got = kiln.jit(f, backend=backend)(x)
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(g.numpy(), e.astype(np.float32))


def test_a_reshape_that_must_copy_is_planned_and_the_peak_stays_within_the_plan():
    x = kt(rand(8, 64, 4, 32))

    def f(x):
        h = mint.permute(mint.exp(x), [0, 2, 1, 3])      # a view
        return mint.reshape(h, [8, 4, 64 * 32]) * 2.0 + 1.0   # must copy: the copy is planned

    g = kiln.jit(f)
    plan = g.memory_plan(x)
    size = 8 * 64 * 4 * 32 * 4
    assert plan["buffers"] == 2 and plan["output_bytes"] == size
    g(x).numpy()
    kiln.runtime.synchronize()
    kiln.runtime.reset_peak_memory_stats()
    before = kiln.runtime.memory_stats()["allocated"]
    out = g(x)
    out.numpy()
    assert within_plan(kiln.runtime.memory_stats()["peak"] - before, plan)
    np.testing.assert_allclose(
        out.numpy(), (np.exp(x.numpy()).transpose(0, 2, 1, 3).reshape(8, 4, -1) * 2.0 + 1.0),
        rtol=1e-6)


@pytest.mark.parametrize("rows,k,n", [(1, 1, 1), (3, 17, 5), (64, 784, 512), (130, 33, 257)])
@pytest.mark.parametrize("form", ["linear", "linear_nobias", "matmul", "linear_gelu", "matmul_relu"])
def test_products_by_constant_weights_run_packed_and_match_numpy(rows, k, n, form):
    # Closed-over weights are constants of the graph: kiln_cpu reorders them once at Build.
    x = kt(rand(rows, k))
    wl, wm, b = rand(n, k, seed=1), rand(k, n, seed=2), rand(n, seed=3)
    kwl, kwm, kb = kt(wl), kt(wm), kt(b)
    fns = {
        "linear": (lambda x: mint.linear(x, kwl, kb), lambda v: v @ wl.T + b),
        "linear_nobias": (lambda x: mint.linear(x, kwl), lambda v: v @ wl.T),
        "matmul": (lambda x: mint.matmul(x, kwm), lambda v: v @ wm),
        "linear_gelu": (lambda x: mint.gelu(mint.linear(x, kwl, kb)),
                        lambda v: (lambda z: 0.5 * z * (1 + np.vectorize(math.erf)(z / math.sqrt(2))))(
                            v.astype(np.float64) @ wl.T + b)),
        "matmul_relu": (lambda x: mint.relu(mint.matmul(x, kwm)), lambda v: np.maximum(v @ wm, 0)),
    }
    f, ref = fns[form]
    g = kiln.jit(f)
    want = ref(x.numpy().astype(np.float64))
    for _ in range(2):  # the packed weight is reused, not consumed
        np.testing.assert_allclose(g(x).numpy(), want, rtol=2e-5, atol=2e-5 * max(1, np.abs(want).max()))


@pytest.mark.parametrize("form", ["linear", "matmul"])
def test_a_constant_weight_updated_in_place_is_read_again(form):
    # A weight may be packed at Build (where oneDNN wants a blocked layout) or read as it is
    # (where it wants a plain one): either way a call after an in-place update sees the new values.
    x = kt(rand(64, 96))
    w = kt(rand(48, 96, seed=1) if form == "linear" else rand(96, 48, seed=1))
    g = kiln.jit((lambda x: mint.linear(x, w)) if form == "linear" else (lambda x: mint.matmul(x, w)))
    g(x).numpy()
    w += 1.0
    want = x.numpy() @ (w.numpy().T if form == "linear" else w.numpy())
    np.testing.assert_allclose(g(x).numpy(), want, rtol=1e-5, atol=1e-4)
    assert g.cache_info().misses == 1


def test_more_packed_products_than_a_thread_keeps_memory_for_each_read_their_own_operands():
    # A thread keeps the oneDNN argument memory of its last four primitives (Note [Reused memory
    # objects]): six layers of two functions called in turn evict one another's at every call.
    sizes = [17, 23, 31, 12, 40, 9, 26]
    ws = [rand(sizes[i + 1], sizes[i], seed=10 + i) for i in range(6)]
    kws = [kt(w) for w in ws]

    def stack(lo, hi):
        def f(x):
            for w in kws[lo:hi]:
                x = mint.relu(mint.linear(x, w))
            return x
        return f

    def ref(v, lo, hi):
        for w in ws[lo:hi]:
            v = np.maximum(v @ w.T, 0)
        return v

    first, second = kiln.jit(stack(0, 3)), kiln.jit(stack(3, 6))
    x0 = kt(rand(5, sizes[0]))
    assert first.optimized_graph(x0).count("FusedMatMul(") == 3  # each layer a packed product
    for seed in range(3):
        x = rand(5, sizes[0], seed=seed)
        h = first(kt(x))
        np.testing.assert_allclose(h.numpy(), ref(x, 0, 3), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(second(h).numpy(), ref(h.numpy(), 3, 6), rtol=1e-4, atol=1e-4)


def test_a_constant_weight_that_is_a_strided_view_gives_the_product_of_its_values():
    # Linear's weight closed over as a transposed view: a Permute of its storage in the graph,
    # a constant view again at Build, packed once and packed again after an in-place update.
    x = kt(rand(64, 96))
    w = kt(rand(96, 48, seed=1))
    wt = mint.transpose(w, 0, 1)  # [48, 96], strides (1, 48)
    g = kiln.jit(lambda x: mint.linear(x, wt))
    for _ in range(2):
        np.testing.assert_allclose(g(x).numpy(), x.numpy() @ w.numpy(), rtol=1e-5, atol=1e-4)
    w *= 2.0
    np.testing.assert_allclose(g(x).numpy(), x.numpy() @ w.numpy(), rtol=1e-5, atol=1e-4)
    assert g.cache_info().misses == 1


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("shape", [(64, 300), (3, 5, 17), (2, 70000), (4, 0)])
def test_a_trailing_sum_or_mean_over_the_last_dim_joins_the_group(shape, keepdim):
    x, row = kt(rand(*shape)), kt(rand(shape[-1], seed=1))

    def f(x, row):
        return (mint.sum(mint.exp(x * 0.5) + row, dim=-1, keepdim=keepdim),
                mint.mean(mint.square(x - 1.0), dim=[-1], keepdim=keepdim),
                mint.sum(mint.abs(x) * 2.0, dim=0))  # not the last dim: not fused

    g = kiln.jit(f)
    text = g.optimized_graph(x, row)
    # Three groups either way; the sum and the mean join theirs unless a row is longer than a
    # tile holds (65536), and the sum over dim 0 never does.
    assert text.count("FusedElementwise(") == 3
    fused = shape[-1] <= 65536
    assert ("Sum(r" in text or "SumKeepdim(r" in text) == fused
    assert ("ReduceMean(" in text) != fused
    assert "ReduceSum(" in text
    for got, want in zip(g(x, row), kiln.jit(f, backend="reference")(x, row)):
        assert got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("jit_level", ["O0", "O1"])
def test_a_graph_whose_intermediates_are_all_empty_runs(jit_level):
    # Nothing to plan: the arena is empty, yet its kernels still get tensors with memory.
    x = kt(np.zeros((0, 3), np.float32))
    reduced = kiln.jit(lambda x: mint.amax(x * 2, dim=-1, keepdim=True) + 1, jit_level=jit_level)
    assert reduced.memory_plan(x)["arena_bytes"] == 0
    assert reduced(x).shape == (0, 1)
    product = kiln.jit(lambda x: mint.matmul(mint.transpose(x, 0, 1) * 2, x), jit_level=jit_level)
    np.testing.assert_array_equal(product(x).numpy(), np.zeros((3, 3), np.float32))
