"""kiln_cpu, the jit's CPU graph backend, at jit_level "O0" (no fusion) and "O1" (everything),
against the reference backend (op by op through eager dispatch) and against NumPy: every unary
and binary elementwise op in chains and trees with scalars, 0-d tensors, broadcasting and mixed
dtypes; softmax and reductions after a chain; matmul / linear + bias + activation, norms, conv2d,
pooling and embedding; graph shapes that stress a memory planner (shared and long-lived values,
diamonds, outputs that are inputs, intermediates or constants, views inside fused chains,
non-contiguous inputs); 240 random elementwise DAGs; the cache, threads, inputs never written and
results never overwritten; and the errors."""

import math
import random
import threading
import types

import numpy as np
import pytest

import kiln
from kiln import mint
from kiln.jit import CacheInfo

from conftest import random_array, raises
from test_elementwise import (BINARY, UNARY, binary_inputs, binary_reference, unary_input,
                              unary_reference, unary_valid)

LEVELS = ("O0", "O1")

# Tolerances, (rtol, atol), per result dtype; integer and bool results must be equal. The atol is
# relative to the largest magnitude of the expected tensor (or of the whole computation, for the
# random DAGs) when that is above 1: absolute errors of a chain scale with its values.
#
# kiln_cpu against the reference backend: a fused kernel may use other approximations of
# transcendental functions, another summation order, and keeps a chain's intermediates of 16-bit
# floats in float32 where the reference rounds after every op, so equality is not assumed.
BACKEND_TOL = {
    kiln.float64: (1e-12, 1e-12),
    kiln.float32: (1e-6, 1e-6),
    kiln.float16: (1e-2, 1e-2),
    kiln.bfloat16: (4e-2, 4e-2),
}
# Either backend against NumPy, which computes in float64 (or in the dtype, op by op).
NUMPY_TOL = {
    kiln.float64: (1e-11, 1e-11),
    kiln.float32: (1e-5, 1e-5),
    kiln.float16: (1e-2, 1e-2),
    kiln.bfloat16: (4e-2, 4e-2),
}

FLOATS = [kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16]
ELEMENTWISE_DTYPES = FLOATS + [kiln.int32, kiln.int64, kiln.bool_]


@pytest.fixture(autouse=True)
def _quiet_numpy():
    with np.errstate(all="ignore"):
        yield


def kt(array, dtype=None):
    return kiln.tensor(np.asarray(array), dtype=dtype)


def rounded(array, dtype):
    """array's values rounded to `dtype` (bfloat16 by Kiln's conversion), as NumPy."""
    return kt(np.asarray(array, np.float64), dtype).numpy()


def flat(result):
    """The tensors of a result (a tensor or nested tuples / lists of them), in order."""
    if isinstance(result, (tuple, list)):
        return [t for r in result for t in flat(r)]
    return [result]


def magnitude(arrays):
    """max(1, largest |value|) over the finite values of some arrays."""
    biggest = [np.abs(a[np.isfinite(a)]).max() for a in map(np.asarray, arrays)
               if np.isfinite(a).any()]
    return max([1.0] + [float(b) for b in biggest])


def assert_near(got, want, tolerances, scale=None, what=""):
    """got (a kiln.Tensor) against want (a kiln.Tensor or NumPy array) with got's dtype's
    tolerance; exact for integer and bool results."""
    w = want.numpy() if isinstance(want, kiln.Tensor) else np.asarray(want)
    g = got.numpy()
    assert g.shape == w.shape, f"{what}: shape {g.shape} != {w.shape}"
    if got.dtype not in tolerances:
        np.testing.assert_array_equal(g, w, err_msg=what)
        return
    rtol, atol = tolerances[got.dtype]
    scale = magnitude([w.astype(np.float64)]) if scale is None else scale
    np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol,
                               atol=atol * scale, equal_nan=True, err_msg=what)


def snapshot(args):
    return [a.numpy().copy() if isinstance(a, kiln.Tensor) else None for a in args]


def assert_unchanged(args, before):
    for i, (a, b) in enumerate(zip(args, before)):
        if b is not None:
            np.testing.assert_array_equal(a.numpy(), b, err_msg=f"input {i} was written")


def jitted(fn):
    """fn jitted on the reference backend ("reference") and on kiln_cpu at each level."""
    fns = {level: kiln.jit(fn, backend="kiln_cpu", jit_level=level) for level in LEVELS}
    return {"reference": kiln.jit(fn, backend="reference"), **fns}


def check(fn, *args, expected=None, scale=None):
    """Runs fn (a function, or jitted(function)) on the reference backend and on kiln_cpu at
    every level: each kiln_cpu result has the reference's dtype and shape and its values within
    BACKEND_TOL; every result (the reference's too) is within NUMPY_TOL of `expected` (arrays in
    result order) when given. No call writes into its inputs. Returns the results per level."""
    fns = fn if isinstance(fn, dict) else jitted(fn)
    before = snapshot(args)
    want = flat(fns["reference"](*args))
    assert_unchanged(args, before)
    results = {"reference": want}
    for level in LEVELS:
        got = flat(fns[level](*args))
        assert_unchanged(args, before)
        assert len(got) == len(want)
        for k, (g, w) in enumerate(zip(got, want)):
            what = f"{level} result {k}"
            assert g.dtype == w.dtype, f"{what}: {g.dtype} != reference's {w.dtype}"
            assert_near(g, w, BACKEND_TOL, scale, what + " against the reference backend")
        results[level] = got
    if expected is not None:
        expected = flat(expected)
        assert len(expected) == len(want)
        for name, tensors in results.items():
            for k, (g, e) in enumerate(zip(tensors, expected)):
                assert_near(g, e, NUMPY_TOL, scale, f"{name} result {k} against NumPy")
    return results


# --- the same graph on kiln.mint and on NumPy -----------------------------------------------------

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _np_gelu(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def _np_softmax(x, dim):
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


def _np_log_softmax(x, dim):
    shifted = x - x.max(axis=dim, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True))


def _np_linear(x, weight, bias=None):
    y = x @ weight.T
    return y if bias is None else y + bias


# The functions of kiln.mint that the graphs below use, over NumPy arrays: a graph written as
# g(m, *inputs) runs traced with m = MINT and evaluated by NumPy (in float64) with m = NUMPY.
NUMPY = types.SimpleNamespace(
    tensor=np.asarray, neg=np.negative, abs=np.abs, exp=np.exp, log=np.log, log1p=np.log1p,
    sqrt=np.sqrt, sin=np.sin, cos=np.cos, tanh=np.tanh, erf=_erf,
    sigmoid=lambda x: 1 / (1 + np.exp(-x)), relu=lambda x: np.maximum(x, 0),
    silu=lambda x: x / (1 + np.exp(-x)), gelu=_np_gelu, maximum=np.maximum, minimum=np.minimum,
    where=np.where, expand=lambda x, shape: np.broadcast_to(x, shape),
    transpose=lambda x, dim0, dim1: np.swapaxes(x, dim0, dim1),
    softmax=_np_softmax, log_softmax=_np_log_softmax,
    sum=lambda x, dim=None, keepdim=False: np.sum(x, axis=dim, keepdims=keepdim),
    mean=lambda x, dim=None, keepdim=False: np.mean(x, axis=dim, keepdims=keepdim),
    linear=_np_linear, matmul=np.matmul)
MINT = types.SimpleNamespace(tensor=kiln.tensor, **{n: getattr(mint, n) for n in dir(NUMPY)
                                                    if not n.startswith("_") and n != "tensor"})


def on_numpy(graph, *arrays):
    """graph(NUMPY, ...) on the arrays in float64, as a list of arrays."""
    return [np.asarray(r) for r in flat(graph(NUMPY, *(np.asarray(a, np.float64) for a in arrays)))]


def check_graph(graph, *arrays, dtype=kiln.float32, fns=None):
    """check() of graph(MINT, ...) (or of fns, jitted from it) on the arrays as `dtype` tensors,
    against NumPy."""
    tensors = [kt(a, dtype) for a in arrays]
    values = [t.numpy() for t in tensors]  # as rounded to dtype
    return check(fns or (lambda *xs: graph(MINT, *xs)), *tensors,
                 expected=on_numpy(graph, *values))


def floats(rng, shape, low=-3.0, high=3.0):
    return rng.uniform(low, high, shape)


# --- unary and binary ops -------------------------------------------------------------------------

def result_is_float(name, dtype):
    return UNARY[name][1] == "float" or (dtype.is_floating_point and UNARY[name][1] != "bool")


UNARY_CASES = [(name, dtype) for name in sorted(UNARY) for dtype in ELEMENTWISE_DTYPES
               if unary_valid(UNARY[name][1], dtype)]


@pytest.mark.parametrize("name, dtype", UNARY_CASES, ids=str)
def test_unary_op_in_a_chain(name, dtype, rng):
    """op(x) alone, op(x) feeding a chain, and a chain feeding op: x * 0.5 + 0.5 keeps every
    op's domain (it maps [0.1, 3] into [0.55, 2])."""
    op = getattr(mint, name)
    a = unary_input(name, (3, 17), dtype, rng)
    inner_dtype = dtype if dtype.is_floating_point else kiln.float32
    inner = rounded(a.astype(np.float64) * 0.5 + 0.5, inner_dtype)
    first = unary_reference(name, a, dtype)
    if result_is_float(name, dtype):
        def f(x):
            y = op(x)
            return y, y * 2.0 - 1.0, op(x * 0.5 + 0.5)

        expected = [first, first.astype(np.float64) * 2 - 1,
                    unary_reference(name, inner, inner_dtype)]
    else:
        def f(x):
            return op(x), op(op(x))

        expected = [first, unary_reference(name, first, dtype)]
    check(f, kt(a, dtype), expected=expected)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", FLOATS + [kiln.int32], ids=str)
def test_gelu_both_forms_in_a_chain(approximate, dtype, rng):
    a = random_array((4, 9), dtype, rng)
    v = a.astype(np.float64)
    check(lambda x: (mint.gelu(x, approximate), mint.gelu(x * 0.5 - 1.0, approximate) + x),
          kt(a, dtype), expected=[_np_gelu(v, approximate), _np_gelu(v * 0.5 - 1, approximate) + v])


BINARY_CASES = [(name, dtype) for name in sorted(BINARY) for dtype in ELEMENTWISE_DTYPES
                if not (BINARY[name][1] == "nobool" and dtype == kiln.bool_)]


@pytest.mark.parametrize("name, dtype", BINARY_CASES, ids=str)
def test_binary_op_with_tensors_and_broadcast_rows(name, dtype, rng):
    op = getattr(mint, name)
    a, b = binary_inputs(name, (4, 7), (4, 7), dtype, rng)
    row = b[1]
    plain, broadcast = binary_reference(name, a, b, dtype), binary_reference(name, a, row, dtype)
    if plain.dtype.kind == "f":
        def f(x, y, r):
            z = op(x, y)
            return z, op(x, r), z * 0.5 - op(x, r)

        expected = [plain, broadcast, plain.astype(np.float64) * 0.5 - broadcast]
    else:
        def f(x, y, r):
            return op(x, y), op(x, r)

        expected = [plain, broadcast]
    check(f, kt(a, dtype), kt(b, dtype), kt(row, dtype), expected=expected)


@pytest.mark.parametrize("dtype", FLOATS + [kiln.int32, kiln.int64], ids=str)
def test_python_scalars_and_0d_tensors_on_either_side(dtype, rng):
    a = random_array((3, 6), dtype, rng)
    s = np.float32(1.25)

    def graph(m, x, s):
        return (2 + x, 2.5 - x, x * 0.5, 3 * x - 1, m.maximum(x, 0), x / 4, x * s + 1.5 * s,
                s - x, x ** 2, m.minimum(-1, x))

    v = a.astype(np.float64)
    check(lambda x, s: graph(MINT, x, s), kt(a, dtype), kt(s),
          expected=graph(NUMPY, v, np.float64(s)))


# Pairs of broadcasting shapes: rows, columns, [1, N], general, 0-d, size 1 and size 0.
BROADCASTS = [((4, 6), (6,)), ((4, 6), (4, 1)), ((4, 6), (1, 6)), ((3, 1, 6), (4, 1)),
              ((4, 1), (1, 6)), ((), (4, 6)), ((4, 6), ()), ((1,), (2, 3, 4)), ((0, 6), (6,)),
              ((2, 0, 3), (1, 3)), ((5, 1, 1), (1, 1, 7))]


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.int32], ids=str)
@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
def test_broadcasting_chains(shapes, dtype, rng):
    a, b = (random_array(s, dtype, rng) for s in shapes)
    if dtype.is_floating_point:
        def graph(m, x, y):
            return m.tanh(x * y + x) - y / (m.abs(x) + 1), m.maximum(x, y) * 2 + y
    else:
        def graph(m, x, y):
            return x * y + x - y, m.maximum(x, y) * 2 + y
    check(lambda x, y: graph(MINT, x, y), kt(a, dtype), kt(b, dtype),
          expected=graph(NUMPY, a.astype(np.float64), b.astype(np.float64)))


MIXED = [(kiln.float32, kiln.float64), (kiln.int32, kiln.float32), (kiln.int64, kiln.float64),
         (kiln.float16, kiln.float32), (kiln.bfloat16, kiln.float32), (kiln.float16, kiln.bfloat16),
         (kiln.int32, kiln.int64), (kiln.bool_, kiln.float32), (kiln.bool_, kiln.int32)]


@pytest.mark.parametrize("dtypes", MIXED, ids=str)
def test_mixed_dtypes(dtypes, rng):
    a, b = random_array((3, 5), dtypes[0], rng), random_array((5,), dtypes[1], rng)

    def graph(m, x, y):
        return x + y, x * y - y, m.maximum(x, y), x + 0.5, x * 2 + y, (x + y) * 1.5 - y

    check(lambda x, y: graph(MINT, x, y), kt(a, dtypes[0]), kt(b, dtypes[1]),
          expected=graph(NUMPY, a.astype(np.float64), b.astype(np.float64)))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_elementwise_chains_and_trees(dtype, rng):
    def graph(m, x, y):
        a = m.sigmoid(x) * y + 1.0               # a tree over two inputs
        b = m.tanh(y - x)
        c = m.exp(-m.abs(a))
        chain = m.sqrt(m.relu(m.sin(x) * 0.5 + 0.25) + 1.0)
        chain = m.log1p(m.silu(m.cos(chain)) * m.erf(chain) + 1.0)
        mask = x > y                              # on inputs: no rounding decides a comparison
        return m.maximum(a, b) * c - m.sqrt(m.abs(b) + 1), chain, mask, m.where(mask, a, c) - b

    check_graph(graph, floats(rng, (5, 33)), floats(rng, (33,)), dtype=dtype)


# --- softmax and reductions after a chain ---------------------------------------------------------

@pytest.mark.parametrize("dim", [-1, 0, 1])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_chain_feeding_softmax_and_log_softmax(dim, dtype, rng):
    def graph(m, x, y):
        z = m.tanh(x) * 2.0 - y
        return m.softmax(z, dim), m.log_softmax(z * 0.5, dim), m.softmax(x + 1.0, dim) * y

    check_graph(graph, floats(rng, (3, 4, 9)), floats(rng, (9,)), dtype=dtype)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.float16], ids=str)
def test_chain_feeding_sum_and_mean(keepdim, dtype, rng):
    def graph(m, x, y):
        z = m.exp(-m.abs(x)) * y + 1.0
        return (m.sum(z, dim=-1, keepdim=keepdim), m.mean(z * z, dim=-1, keepdim=keepdim),
                m.sum(z, dim=0, keepdim=keepdim), m.sum(z), m.mean(m.tanh(x)),
                x - m.mean(x, dim=-1, keepdim=True))

    check_graph(graph, floats(rng, (6, 21)), floats(rng, (21,)), dtype=dtype)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.int32], ids=str)
def test_casts_inside_chains(dtype, rng):
    a = random_array((4, 9), dtype, rng)
    v = a.astype(np.float64)

    def f(x):
        wide = (x * 2).double() + 0.1          # float64 in the middle of the chain
        return (wide.float() * x, (x.float() * 0.5).double() + wide, mint.tanh(wide).float(),
                (x > 0).float() * 3.0 + x, (x * 3).half() - 1)

    wide = v * 2 + 0.1
    check(f, kt(a, dtype),
          expected=[wide * v, v * 0.5 + wide, np.tanh(wide), (v > 0) * 3.0 + v, v * 3 - 1])


# Sizes that are not multiples of any vector width or tile, big enough to be split into tiles and
# across threads.
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64], ids=str)
def test_large_odd_shapes(dtype, rng):
    def graph(m, x, row, col, w, b):
        z = m.gelu(m.tanh(x) * row + col, "tanh")
        return (z, m.softmax(z * 2.0 - row, -1), m.sum(m.exp(-m.abs(z)), dim=-1, keepdim=True),
                m.mean(z, dim=0), m.relu(m.linear(z[:, :129], w, b)))

    check_graph(graph, floats(rng, (263, 1031)), floats(rng, (1031,)), floats(rng, (263, 1)),
                floats(rng, (131, 129), -0.2, 0.2), floats(rng, (131,)), dtype=dtype)


# --- matmul, linear and the nn ops ----------------------------------------------------------------

ACTIVATIONS = {
    "none": lambda m, y: y,
    "relu": lambda m, y: m.relu(y),
    "gelu": lambda m, y: m.gelu(y),
    "gelu_tanh": lambda m, y: m.gelu(y, "tanh"),
    "silu": lambda m, y: m.silu(y),
    "sigmoid": lambda m, y: m.sigmoid(y),
}


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64], ids=str)
@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_linear_bias_activation(activation, dtype, rng):
    act = ACTIVATIONS[activation]

    def graph(m, x, w, b):
        return (act(m, m.linear(x, w, b)),        # linear with its bias
                act(m, m.linear(x, w)),           # without
                act(m, x @ w.T + b),              # the bias as a separate Add
                act(m, m.matmul(x, w.T) + b) * 2.0 + 1.0)

    check_graph(graph, floats(rng, (5, 24)), floats(rng, (12, 24), -0.5, 0.5),
                floats(rng, (12,)), dtype=dtype)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64], ids=str)
def test_batched_matmul_broadcasting_and_reshapes(dtype, rng):
    def graph(m, a, b, c, w, bias):
        h = m.linear(a.reshape(-1, 8), w, bias)        # [2*3*4, 6]
        return (m.matmul(a, b),                        # [2, 3, 4, 8] @ [8, 5]
                m.matmul(c, m.tanh(b)) + 1.0,          # [2, 1, 4, 8] @ [8, 5] -> broadcast
                m.matmul(a, m.transpose(m.expand(c, (2, 3, 4, 8)), -1, -2)),  # [2, 3, 4, 4]
                m.gelu(h).reshape(2, 3, 4, 6),         # the activation before the reshape
                m.relu(h.reshape(2, 3, 4, 6)) * 0.5,   # ... and after it
                m.silu(m.linear(a, w, bias)).sum(-1))

    check_graph(graph, floats(rng, (2, 3, 4, 8)), floats(rng, (8, 5)), floats(rng, (2, 1, 4, 8)),
                floats(rng, (6, 8), -0.5, 0.5), floats(rng, (6,)), dtype=dtype)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64], ids=str)
def test_norms_after_chains(dtype, rng):
    x, w, b = floats(rng, (4, 3, 16)), floats(rng, (16,), 0.5, 1.5), floats(rng, (16,))
    xt, wt, bt = kt(x, dtype), kt(w, dtype), kt(b, dtype)
    xv, wv, bv = xt.numpy().astype(np.float64), wt.numpy(), bt.numpy()
    z = xv * 2 + 1
    mu, var = z.mean(-1, keepdims=True), z.var(-1, keepdims=True)
    layer = (z - mu) / np.sqrt(var + 1e-5)
    rms = z / np.sqrt((z * z).mean(-1, keepdims=True) + 1e-6)

    def f(x, w, b):
        z = x * 2.0 + 1.0
        return (mint.relu(mint.layer_norm(z, 16, w, b)) + x, mint.layer_norm(z, [16]),
                mint.rms_norm(z, 16, w) * 0.5, mint.rms_norm(z, 16))

    check(f, xt, wt, bt, expected=[np.maximum(layer * wv + bv, 0) + xv, layer, rms * wv * 0.5, rms])


def _np_conv2d(x, w, bias, stride, padding):
    x = np.pad(x, [(0, 0), (0, 0), (padding, padding), (padding, padding)])
    windows = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))
    windows = windows[:, :, ::stride, ::stride]
    return np.einsum("nchwij,ocij->nohw", windows, w) + bias[:, None, None]


@pytest.mark.parametrize("stride, padding", [(1, 0), (2, 1)])
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64], ids=str)
def test_conv2d_bias_relu_and_pooling(stride, padding, dtype, rng):
    x, w, b = floats(rng, (2, 3, 9, 9)), floats(rng, (4, 3, 3, 3), -0.5, 0.5), floats(rng, (4,))
    xt, wt, bt = kt(x, dtype), kt(w, dtype), kt(b, dtype)
    conv = _np_conv2d(*(t.numpy().astype(np.float64) for t in (xt, wt, bt)), stride, padding)
    relu = np.maximum(conv, 0)
    h, wd = relu.shape[2] // 2 * 2, relu.shape[3] // 2 * 2
    windows = relu[:, :, :h, :wd].reshape(2, 4, h // 2, 2, wd // 2, 2)

    def f(x, w, b):
        y = mint.relu(mint.conv2d(x, w, b, stride=stride, padding=padding))
        return (y, mint.conv2d(x, w, stride=stride, padding=padding) + b.reshape(4, 1, 1),
                mint.max_pool2d(y, 2), mint.avg_pool2d(y, 2) * 2.0 + 1.0)

    check(f, xt, wt, bt, expected=[relu, conv, windows.max(axis=(3, 5)),
                                   windows.mean(axis=(3, 5)) * 2 + 1])


@pytest.mark.parametrize("index_dtype", [kiln.int32, kiln.int64], ids=str)
def test_embedding_feeding_a_chain(index_dtype, rng):
    indices, weight = rng.integers(0, 10, (3, 5)), floats(rng, (10, 8))

    def f(i, w):
        e = mint.embedding(i, w)
        return e, mint.tanh(e) * 2.0 + e.sum(-1, keepdim=True)

    rows = weight.astype(np.float32).astype(np.float64)[indices]
    check(f, kt(indices, index_dtype), kt(weight, kiln.float32),
          expected=[rows, np.tanh(rows) * 2 + rows.sum(-1, keepdims=True)])


# --- graph shapes for a memory planner ------------------------------------------------------------

CONSTANT_ROW = np.linspace(-1.0, 1.0, 6)


def shared_intermediate(m, x, y):
    a = m.sigmoid(x)
    return a * y + a, m.tanh(a) - a * a, m.exp(-a) * y


def long_liveness(m, x, y):
    early = x * 2.0 + 1.0
    z = y
    for k in range(12):
        z = m.tanh(z) * 1.5 + 0.1 * k
    return z + early


def diamond(m, x, y):
    a = m.exp(-m.abs(x))
    b, c = a * 2.0, m.tanh(a)
    d = m.sigmoid(b + y) * c
    return d - m.maximum(b, c)


def output_also_used_later(m, x, y):
    a = x + y
    b = a * a
    return a, b, a - b


def input_as_output(m, x, y):
    return x, m.exp(x) + y, y


def same_output_twice(m, x, y):
    z = x * 2.0 + y
    return z, z, m.relu(z)


def constant_outputs(m, x, y):
    row = m.tensor(CONSTANT_ROW)
    return x + row, row, row * 2.0


def many_outputs(m, x, y):
    a = m.tanh(x)
    return a, m.sum(a, dim=-1), a * y, m.softmax(a, -1), m.maximum(a, y) - 1.0


def in_place_chain(m, x, y):
    a = x * 2.0          # each intermediate is dead after its one reader
    b = m.exp(-m.abs(a))
    c = b + y
    d = m.sqrt(c * c + 1.0)
    return m.relu(d - 1.2) * 0.5


def views_in_chains(m, x, y):
    a = (x * 2.0 + 1.0).T                   # [6, 4]
    b = m.tanh(a) + y.reshape(6, 1)
    c = b.reshape(-1) * 0.5                 # [24]
    d = m.sigmoid(b[:, 1:3]) - b[::2, :2].sum(0)  # slicing
    e = m.expand(m.relu(x[:, :1]), (4, 6)) * y   # expand of a column
    return c, d, e, m.exp(-a.T) + x


def views_as_outputs(m, x, y):
    a = m.tanh(x) * 2.0                     # outputs that are views of an intermediate ...
    return a.T, a[1:3], a.reshape(-1), x.T, x[:, :2], m.exp(-a) + y   # ... and of an input


GRAPHS = [shared_intermediate, long_liveness, diamond, output_also_used_later, input_as_output,
          same_output_twice, constant_outputs, many_outputs, in_place_chain, views_in_chains,
          views_as_outputs]


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64], ids=str)
@pytest.mark.parametrize("graph", GRAPHS, ids=lambda g: g.__name__)
def test_memory_planner_graph_shapes(graph, dtype, rng):
    """Each graph called twice, on other data: the second call does not overwrite the first
    one's results (as a plan that reused an output's buffer would), and no input is written."""
    fns = jitted(lambda x, y: graph(MINT, x, y))
    first = check_graph(graph, floats(rng, (4, 6)), floats(rng, (6,)), dtype=dtype, fns=fns)
    kept = {level: [t.numpy().copy() for t in results] for level, results in first.items()}
    check_graph(graph, floats(rng, (4, 6)), floats(rng, (6,)), dtype=dtype, fns=fns)
    assert fns["O1"].cache_info() == CacheInfo(hits=1, misses=1, size=1)
    for level, results in first.items():
        for k, (t, copy) in enumerate(zip(results, kept[level])):
            np.testing.assert_array_equal(t.numpy(), copy, err_msg=f"{level} result {k} changed")


@pytest.mark.parametrize("level", LEVELS)
def test_results_of_one_call_survive_the_next(level, rng):
    f = kiln.jit(lambda x, y: in_place_chain(MINT, x, y), backend="kiln_cpu", jit_level=level)
    g = kiln.jit(lambda x, y: same_output_twice(MINT, x, y), backend="kiln_cpu", jit_level=level)
    calls = [(floats(rng, (4, 6)).astype(np.float32), floats(rng, (6,)).astype(np.float32))
             for _ in range(4)]
    kept = [(f(kt(x), kt(y)), g(kt(x), kt(y))) for x, y in calls]
    for (x, y), (fr, gr) in zip(calls, kept):  # every earlier result still as computed
        assert_near(fr, on_numpy(in_place_chain, x, y)[0], NUMPY_TOL)
        for t, e in zip(gr, on_numpy(same_output_twice, x, y)):
            assert_near(t, e, NUMPY_TOL)
    assert f.cache_info() == CacheInfo(hits=3, misses=1, size=1)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64], ids=str)
def test_non_contiguous_inputs(dtype, rng):
    base, other = kt(floats(rng, (6, 4)), dtype), kt(floats(rng, (4, 9)), dtype)
    x, y = base.T, other[:, ::2]                    # [4, 6] transposed, [4, 5] strided
    assert not x.is_contiguous() and not y.is_contiguous()

    def graph(m, x, y):
        return (m.tanh(x) * 2.0 + x[:, :1], m.exp(-m.abs(y)) + m.sum(y, dim=-1, keepdim=True),
                x @ x.T)

    check(lambda x, y: graph(MINT, x, y), x, y,
          expected=on_numpy(graph, x.numpy().copy(), y.numpy().copy()))
    np.testing.assert_array_equal(base.numpy().T, x.numpy())  # the base is untouched too


# --- random elementwise DAGs ----------------------------------------------------------------------

# Ops whose error grows at most with the magnitude of their operands (Lipschitz about 1 or less),
# so that a float32 result stays within a few ulp of the computation's largest value. Each is
# (name, fn(m, a) or fn(m, a, b), bound of |result| from the operands' bounds).
DAG_UNARY = [
    ("neg", lambda m, a: -a, lambda p: p),
    ("abs", lambda m, a: m.abs(a), lambda p: p),
    ("tanh", lambda m, a: m.tanh(a), lambda p: 1.0),
    ("sigmoid", lambda m, a: m.sigmoid(a), lambda p: 1.0),
    ("sin", lambda m, a: m.sin(a), lambda p: 1.0),
    ("cos", lambda m, a: m.cos(a), lambda p: 1.0),
    ("relu", lambda m, a: m.relu(a), lambda p: p),
    ("silu", lambda m, a: m.silu(a), lambda p: p),
    ("gelu", lambda m, a: m.gelu(a), lambda p: p),
    ("gelu_tanh", lambda m, a: m.gelu(a, "tanh"), lambda p: p),
    ("erf", lambda m, a: m.erf(a), lambda p: 1.0),
    ("exp(-|a|)", lambda m, a: m.exp(-m.abs(a)), lambda p: 1.0),
    ("sqrt(|a|+1)", lambda m, a: m.sqrt(m.abs(a) + 1.0), lambda p: p + 1),
    ("log1p(|a|)", lambda m, a: m.log1p(m.abs(a)), lambda p: p),
    ("a*0.75+0.5", lambda m, a: a * 0.75 + 0.5, lambda p: p + 0.5),
    ("1.5-a", lambda m, a: 1.5 - a, lambda p: p + 1.5),
    ("a/1.25", lambda m, a: a / 1.25, lambda p: p),
    ("2.0*a", lambda m, a: 2.0 * a, lambda p: 2 * p),
]
DAG_BINARY = [
    ("add", lambda m, a, b: a + b, lambda p, q: p + q),
    ("sub", lambda m, a, b: a - b, lambda p, q: p + q),
    ("maximum", lambda m, a, b: m.maximum(a, b), max),
    ("minimum", lambda m, a, b: m.minimum(a, b), max),
    ("a*tanh(b)", lambda m, a, b: a * m.tanh(b), lambda p, q: p),
    ("mul", lambda m, a, b: a * b, lambda p, q: p * q),  # only while p * q stays small
]
MUL_BOUND = 100.0


class RandomDag:
    """A random DAG of elementwise ops over 1 to 3 inputs of shapes that broadcast together
    (size-1 and zero-size dims included), chosen from the seed alone."""

    def __init__(self, seed, dtype):
        r = random.Random(seed)
        rng = np.random.default_rng(seed)
        dims = [r.choice([0, 1, 1, 2, 3, 5, 8, 17]) for _ in range(r.choice([1, 2, 2, 3]))]
        if r.random() < 0.8:  # mostly no zero-size dim, so that most graphs compute something
            dims = [d or 3 for d in dims]
        variants = [tuple(dims), tuple(dims[-1:]), (1,) * (len(dims) - 1) + tuple(dims[-1:]),
                    tuple(dims[:-1]) + (1,), ()]
        self.shapes = [tuple(dims)] + [r.choice(variants) for _ in range(r.randint(0, 2))]
        self.inputs = [rounded(rng.uniform(-3, 3, s), dtype) for s in self.shapes]
        self.row = rounded(rng.uniform(-2, 2, dims[-1:]), dtype)  # a constant of the graph
        bounds = [3.0] * len(self.shapes)
        self.nodes = []  # (name, fn, operand indices, scalar or None)
        for _ in range(r.randint(2, 30)):
            a, b = r.randrange(len(bounds)), r.randrange(len(bounds))
            kind = r.random()
            if kind < 0.45:
                name, fn, bound = r.choice(DAG_UNARY)
                self.nodes.append((name, fn, (a,)))
                bounds.append(bound(bounds[a]))
                continue
            if kind < 0.55:  # with the constant row
                b = -1
            name, fn, bound = r.choice(DAG_BINARY)
            q = 2.0 if b == -1 else bounds[b]
            if name == "mul" and bounds[a] * q > MUL_BOUND:
                name, fn, bound = DAG_BINARY[-2]  # a * tanh(b)
            if r.random() < 0.5:  # operands swapped: broadcasting on the other side
                self.nodes.append((name, lambda m, a, b, fn=fn: fn(m, b, a), (b, a)))
                bounds.append(bound(q, bounds[a]))
            else:
                self.nodes.append((name, fn, (a, b)))
                bounds.append(bound(bounds[a], q))
        count = len(bounds)
        self.outputs = [count - 1] + [r.randrange(count) for _ in range(r.randint(0, 2))]

    def __call__(self, m, *inputs):
        return self.values(m, *inputs)[0]

    def values(self, m, *inputs):
        """(the outputs, every value computed)."""
        values = list(inputs)
        row = m.tensor(self.row)
        for name, fn, operands in self.nodes:
            values.append(fn(m, *(row if i == -1 else values[i] for i in operands)))
        return tuple(values[i] for i in self.outputs), values

    def __repr__(self):
        ops = ", ".join(f"v{len(self.shapes) + k} = {name}{operands}"
                        for k, (name, _, operands) in enumerate(self.nodes))
        return f"RandomDag(inputs {self.shapes}: {ops}; outputs {self.outputs})"


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64], ids=str)
@pytest.mark.parametrize("first_seed", range(0, 120, 30))
def test_random_elementwise_dags(first_seed, dtype):
    for seed in range(first_seed, first_seed + 30):
        dag = RandomDag(seed, dtype)
        arrays = [a.astype(np.float64) for a in dag.inputs]
        expected, values = dag.values(NUMPY, *arrays)
        try:
            check(lambda *xs: dag(MINT, *xs), *(kt(a, dtype) for a in dag.inputs),
                  expected=list(expected), scale=magnitude(values))
        except AssertionError as e:
            e.add_note(f"seed {seed}: {dag!r}")
            raise


# --- the cache and threads ------------------------------------------------------------------------

@pytest.mark.parametrize("level", LEVELS)
def test_cache_hits_and_a_new_shape_rebuilds(level, rng):
    f = kiln.jit(lambda x, y: diamond(MINT, x, y), backend="kiln_cpu", jit_level=level)
    steps = [(((4, 6), (6,)), CacheInfo(hits=0, misses=1, size=1)),
             (((4, 6), (6,)), CacheInfo(hits=1, misses=1, size=1)),   # a hit
             (((7, 3), (3,)), CacheInfo(hits=1, misses=2, size=2)),   # a new shape: rebuilt
             (((7, 3), (7, 1)), CacheInfo(hits=1, misses=3, size=3)),
             (((4, 6), (6,)), CacheInfo(hits=2, misses=3, size=3))]
    for shapes, info in steps:
        x, y = (floats(rng, s).astype(np.float32) for s in shapes)
        assert_near(f(kt(x), kt(y)), on_numpy(diamond, x, y)[0], NUMPY_TOL)
        assert f.cache_info() == info


@pytest.mark.parametrize("level", LEVELS)
def test_four_threads_call_one_jitted_function(level, rng):
    f = kiln.jit(lambda x, y: many_outputs(MINT, x, y), backend="kiln_cpu", jit_level=level)
    data = [[(floats(rng, (16, 24)).astype(np.float32), floats(rng, (24,)).astype(np.float32))
             for _ in range(8)] for _ in range(4)]
    start = threading.Barrier(4)
    failures = []

    def work(calls):
        try:
            start.wait()  # the first calls race on an empty cache
            results = [(f(kt(x), kt(y)), x, y) for x, y in calls]
            for got, x, y in results:
                for t, e in zip(got, on_numpy(many_outputs, x, y)):
                    assert_near(t, e, NUMPY_TOL)
        except Exception as e:  # noqa: BLE001  (reported by the main thread)
            failures.append(e)

    threads = [threading.Thread(target=work, args=(calls,)) for calls in data]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[0]
    assert f.cache_info().size == 1 and sum(f.cache_info()[:2]) == 32


# --- errors ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("level", LEVELS)
def test_wrong_inputs_name_what_was_expected(level):
    def jit(fn):
        return kiln.jit(fn, backend="kiln_cpu", jit_level=level)

    x = kt(np.ones((2, 3), np.float32))
    layer = jit(lambda x: mint.layer_norm(x * 2, 3))
    with raises(kiln.DTypeError, match="layer_norm: expected a floating-point x, got int32"):
        layer(kt(np.ones((2, 3), np.int32)))
    lookup = jit(lambda i, w: mint.embedding(i, w) + 1)
    with raises(kiln.DTypeError, match="embedding: expected integer indices, got float32"):
        lookup(x, x)
    product = jit(lambda a, b: mint.relu(a @ b))
    with raises(kiln.ShapeError, match=r"expected a.shape\[-1\] == b.shape\[-2\], got 3 and 2"):
        product(x, x)
    add = jit(lambda a, b: mint.tanh(a + b))
    with raises(kiln.ShapeError, match=r"shapes \[2, 3\] and \[4\] do not broadcast: dimension 1 "
                                       r"has sizes 3 and 4 \(expected equal sizes or 1\)"):
        add(x, kt(np.ones(4, np.float32)))
    # A call with the wrong number of inputs fails as the Python function would.
    with raises(TypeError, match="missing 1 required positional argument: 'b'"):
        add(x)
    with raises(TypeError, match="takes 2 positional arguments but 3 were given"):
        add(x, x, x)
    # The failures built nothing, and the functions still work.
    assert add.cache_info().size == 0 and product.cache_info().size == 0
    assert_near(add(x, x), np.tanh(np.full((2, 3), 2.0)), NUMPY_TOL)
    assert_near(product(x, x.T), np.full((2, 2), 3.0), NUMPY_TOL)


def test_an_unknown_jit_level_is_rejected():
    for level in ("O3", "o1", ""):
        with raises(kiln.KilnValueError, match=f'jit_level must be "O0", "O1" or "O2", got '
                                               f'"{level}"'):
            kiln.jit(lambda x: x + 1, backend="kiln_cpu", jit_level=level)
