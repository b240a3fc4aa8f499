"""kiln.jit(dynamic=True): one cache entry for every batch size, the function run at most twice
(at every batch size where it takes pieces of the batch dimension that are not linear in it),
results equal to NumPy on kiln_cpu and reference; inputs whose leading dimension is not the batch
size stay static; a result or graph that depends on the batch size otherwise is a
KilnValueError naming the node."""

import numpy as np
import pytest

import kiln
from kiln import mint
from kiln.jit import CacheInfo

from conftest import assert_close, raises

SEQ, WIDTH = 5, 8


def softmax(a):
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def make_block(weight, bias, calls):
    """x [B, S, D] through a reshape to [B * S, D] and back, a closed-over weight, a broadcast
    [D] row, and softmax attention with a [S, S] mask (not batched)."""
    w, b_row = kiln.tensor(weight), kiln.tensor(bias)

    def block(x, mask):
        calls.append(x.shape[0])
        b = x.shape[0]
        h = mint.reshape(mint.matmul(mint.reshape(x, [b * SEQ, WIDTH]), w) + b_row,
                         [b, SEQ, WIDTH])
        scores = mint.softmax(mint.matmul(h, mint.transpose(h, 1, 2)) + mask, -1)
        return {"out": mint.matmul(scores, h), "rows": (mint.sum(h, [-1]), b > 0)}

    return block


def numpy_block(x, mask, weight, bias):
    b = x.shape[0]
    h = (x.reshape(b * SEQ, WIDTH) @ weight + bias).reshape(b, SEQ, WIDTH)
    scores = softmax(h @ h.transpose(0, 2, 1) + mask)
    return scores @ h, h.sum(-1)


@pytest.mark.parametrize("backend", ["kiln_cpu", "reference"])
def test_traced_at_three_batch_sizes_and_equal_to_numpy(backend):
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((WIDTH, WIDTH)).astype(np.float32)
    bias = rng.standard_normal(WIDTH).astype(np.float32)
    mask = rng.standard_normal((SEQ, SEQ)).astype(np.float32)
    calls = []
    f = kiln.jit(make_block(weight, bias, calls), backend=backend, dynamic=True)
    for b in [8, 4, 1, 3, 8]:
        x = rng.standard_normal((b, SEQ, WIDTH)).astype(np.float32)
        got = f(kiln.tensor(x), kiln.tensor(mask))
        out, rows = numpy_block(x, mask, weight, bias)
        assert_close(got["out"], out)
        assert_close(got["rows"][0], rows)
        assert got["rows"][1] is True
    # 1 traces on its own, as 0 would; 3 verifies the template learned from 8 and 4.
    assert calls == [8, 4, 1, 3]
    assert f.cache_info() == CacheInfo(hits=1, misses=4, size=4)


@pytest.mark.parametrize("batches", [(1, 2, 5), (3, 1, 4), (0, 1, 2, 5)], ids=str)
def test_views_that_move_the_batch_dimension_trace_alike_at_batch_size_one(batches):
    # x.T of a [1, 4] x keeps its elements in order (a reshape would do), but it is recorded as
    # the Permute it is at every other batch size: the traces agree. So at a batch of 0, where it
    # was a Reshape (every later batch size failed as "not following the batch size").
    f = kiln.jit(lambda x: (x.T @ x, x.unsqueeze(1).transpose(1, 2).sum(-1)), dynamic=True)
    rng = np.random.default_rng(0)
    for b in batches:
        a = rng.standard_normal((b, 4)).astype(np.float32)
        product, same = f(kiln.tensor(a))
        np.testing.assert_allclose(product.numpy(), a.T @ a, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(same.numpy(), a)


def test_an_input_whose_leading_dimension_is_not_the_batch_size_stays_static():
    rng = np.random.default_rng(1)
    calls = []

    @kiln.jit(dynamic=True)
    def f(x, m, scale=2.0):
        calls.append((x.shape[0], m.shape[0]))
        return mint.matmul(x, mint.transpose(m, 0, 1)) * scale

    def check(b, rows):
        x = rng.standard_normal((b, 4)).astype(np.float32)
        m = rng.standard_normal((rows, 4)).astype(np.float32)
        assert_close(f(kiln.tensor(x), kiln.tensor(m)), x @ m.T * 2.0)

    for b in [2, 6, 4, 5, 0, 1]:
        check(b, 3)
    assert calls == [(2, 3), (6, 3), (4, 3), (0, 3), (1, 3)]  # 0 and 1 trace on their own
    check(2, 7)  # another number of rows: another signature
    assert calls[-1] == (2, 7)
    check(7, 7)  # rows equal to the batch size: m is batched too, another signature
    assert len(calls) == 7


def test_a_constant_computed_from_the_batch_size_is_refused():
    @kiln.jit(dynamic=True)
    def mean_by_hand(x):
        return mint.sum(x, [0]) / x.shape[0]

    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    assert_close(mean_by_hand(kiln.tensor(x)), x.mean(0))
    with raises(kiln.KilnValueError, match=r"graph \"(.*)mean_by_hand\" does not follow the batch "
                                           r"size(.|\n)*dynamic=False"):
        mean_by_hand(kiln.tensor(x[:2]))
    assert_close(kiln.jit(mean_by_hand.__wrapped__)(kiln.tensor(x[:2])), x[:2].mean(0))


def test_a_result_that_depends_on_the_batch_size_is_refused():
    @kiln.jit(dynamic=True)
    def f(x):
        return x * 2, x.shape[0]

    assert f(kiln.tensor(np.ones((3, 2), np.float32)))[1] == 3
    with raises(kiln.KilnValueError, match="returns a result of another structure"):
        f(kiln.tensor(np.ones((5, 2), np.float32)))


@pytest.mark.parametrize("squared", [
    lambda x: mint.reshape(mint.matmul(x, mint.transpose(x, 0, 1)), [x.shape[0] ** 2]),
    # A factory's size alone decides its shape: batch size 3 gave 7 rows, which nothing checked.
    lambda x: mint.zeros([x.shape[0] * x.shape[0], 2]) + mint.sum(x),
], ids=["reshape", "factory"])
def test_an_attribute_that_is_not_linear_in_the_batch_size_names_the_node(squared):
    f = kiln.jit(squared, dynamic=True)
    rng = np.random.default_rng(2)
    for b in [8, 4]:
        x = kiln.tensor(rng.standard_normal((b, 2)).astype(np.float32))
        np.testing.assert_allclose(f(x).numpy(), squared(x).numpy(), rtol=1e-5)
    for _ in range(2):  # the same at every call: nothing was kept
        with raises(kiln.KilnValueError, match=r"does not follow the batch size: %\d+ = (Reshape|"
                                               r"Zeros).*linear through batch sizes 8 and 4 but "
                                               r"not at 3"):
            f(kiln.tensor(np.ones((3, 2), np.float32)))


def test_batch_norm_at_a_batch_of_one_or_none_acts_as_eagerly():
    # Built from the template, a batch of 1 gave zeros and a NaN running_var without a word
    # (eagerly a KilnValueError), and an empty batch a NaN running_mean (eagerly it only counts).
    bn = kiln.nn.BatchNorm1d(4)
    f = kiln.jit(bn, dynamic=True)
    rng = np.random.default_rng(3)
    for b in (2, 3, 5):
        f(kiln.tensor(rng.standard_normal((b, 4)).astype(np.float32)))
    with raises(kiln.KilnValueError, match="expected more than 1 value per channel"):
        f(kiln.tensor(np.ones((1, 4), np.float32)))
    mean, var = bn.running_mean.numpy().copy(), bn.running_var.numpy().copy()
    steps = int(bn.num_batches_tracked.item())
    assert f(kiln.tensor(np.ones((0, 4), np.float32))).shape == (0, 4)
    np.testing.assert_array_equal(bn.running_mean.numpy(), mean)
    np.testing.assert_array_equal(bn.running_var.numpy(), var)
    assert int(bn.num_batches_tracked.item()) == steps + 1
    x = rng.standard_normal((7, 4)).astype(np.float32)  # the template still serves the others
    assert_close(f(kiln.tensor(x)), (x - x.mean(0)) / np.sqrt(x.var(0) + bn.eps))


@pytest.mark.parametrize("take, batches", [
    (lambda x: x[-2:], (1, 2, 3, 5)),  # x[:] at 1 and 2 (clamped), two rows from 2 on
    (lambda x: x[-2:], (2, 3, 5)),  # x[:] at 2: a bound on the edge, no view at all
    (lambda x: x[:2], (2, 5, 3)),
    (lambda x: x[:2], (1, 2, 5, 3)),
    (lambda x: x[::2], (2, 3, 1, 5, 7)),  # ceil(B / 2) rows: 1 and 2 look like B - 1
    (lambda x: mint.chunk(x, 2)[0], (2, 3, 5, 7)),
    (lambda x: mint.split(x, 2)[0], (3, 5, 7)),
    (lambda x: x.slice(0, -2, 2**40), (1, 2, 4)),
    # Where the first two batch sizes show nothing clamped or uneven: the piece's size or place
    # looks linear (or constant) there, and it was instantiated from that line.
    (lambda x: x[::2], (3, 4, 5, 6, 1)),
    (lambda x: x[1::2], (4, 5, 6, 7)),
    (lambda x: x[::2], (4, 6, 3)),  # 2 and 3 rows: half a row per batch size, not linear
    (lambda x: mint.chunk(x, 2)[0], (4, 6, 5)),
    (lambda x: mint.split(x, 2)[0], (4, 6, 5)),  # a split into more pieces at 6
    (lambda x: x[:2], (4, 5, 1)),
    (lambda x: x[1:3], (4, 5, 2)),
    (lambda x: x[-1], (2, 3, 5)),
    # A step over a batch of 0 or 1 looks whole: x[::2] was x itself at 0 and 1.
    (lambda x: x[::2], (0, 1, 3, 5)),
    (lambda x: x.slice(0, 0, 2**40, 2), (1, 0, 4, 5)),
    # Squeezing the batch dimension does nothing until a batch of 1, where it removes it.
    (lambda x: x.squeeze(0), (5, 6, 7, 1)),
    (lambda x: x[:, :1].squeeze(), (5, 6, 7, 1)),
    (lambda x: mint.squeeze(x, 0), (5, 6, 7, 1)),  # was a KilnValueError at 1
], ids=["last two", "last two from 2", "first two from 2", "first two", "every other", "chunk", "split", "slice method",
        "every other from 3", "odd rows", "every other from 4", "chunk from 4", "split from 4",
        "first two from 4", "middle two from 4", "last row", "every other from 0",
        "slice method from 1", "squeeze(0)", "squeeze()", "mint.squeeze"])
def test_pieces_of_the_batch_not_linear_in_it_trace_each_batch_size(take, batches):
    # Two traces could not tell these from a line, and a template instantiated from them gave
    # other rows than eager, silently. Each batch size is traced and its trace built.
    traced = []

    @kiln.jit(dynamic=True)
    def f(x):
        traced.append(x.shape[0])
        return take(x) * 1

    for b in batches:
        x = kiln.tensor(np.arange(b * 3, dtype=np.float32).reshape(b, 3))
        np.testing.assert_array_equal(f(x).numpy(), (take(x) * 1).numpy())
    assert traced == list(batches)


def test_adjacent_advanced_indices_after_the_batch_trace_each_batch_size():
    # x[:, i, j] indexes the batch dim with an arange of B, a constant of the graph: the second
    # batch size failed as "a constant whose value differs". Reads and writes alike.
    traced = []

    @kiln.jit(dynamic=True)
    def f(x):
        traced.append(x.shape[0])
        y = x * 1.0
        y[:, [0, 1], [1, 1]] = -1.0
        return x[:, [0, 1], [1, 0]] * 1.0, y

    for b in (3, 4, 5):
        a = np.arange(b * 4, dtype=np.float32).reshape(b, 2, 2)
        read, written = f(kiln.tensor(a))
        want = a.copy()
        want[:, [0, 1], [1, 1]] = -1.0
        np.testing.assert_array_equal(read.numpy(), a[:, [0, 1], [1, 0]])
        np.testing.assert_array_equal(written.numpy(), want)
    assert traced == [3, 4, 5]


def test_cross_entropy_with_class_probabilities_instantiates_at_every_batch_size():
    # Its mean divided by a count of the trace's batch size, a constant that differed at the
    # next one ("a constant whose value differs").
    f = kiln.jit(lambda x, p: mint.cross_entropy(x, p), dynamic=True)
    rng = np.random.default_rng(0)
    for b in (2, 3, 5):
        x = rng.standard_normal((b, 4)).astype(np.float32)
        p = rng.random((b, 4)).astype(np.float32)
        p /= p.sum(1, keepdims=True)
        np.testing.assert_allclose(f(kiln.tensor(x), kiln.tensor(p)).item(),
                                   mint.cross_entropy(kiln.tensor(x), kiln.tensor(p)).item(),
                                   rtol=1e-6)


def test_views_that_keep_the_batch_whole_are_traced_three_times():
    # Columns, a row's element, a reshape, chunks of another dim: linear in B, instantiated
    # without tracing once three traces agree.
    def g(x):
        return x[:, 0] * 1, x[:, 1:] * 2, x.reshape(x.shape[0] * 3) + 1, mint.chunk(x, 3, 1)[2]

    traced = []

    @kiln.jit(dynamic=True)
    def f(x):
        traced.append(x.shape[0])
        return g(x)

    for b in (1, 2, 3, 5, 6):
        x = kiln.tensor(np.arange(b * 3, dtype=np.float32).reshape(b, 3))
        for got, want in zip(f(x), g(x)):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert traced == [1, 2, 3, 5]  # 1 on its own


@pytest.mark.parametrize("loss", [
    lambda x: mint.mean(x * x),
    lambda x: mint.mse_loss(x, x * 0.5),
    lambda x: mint.sum(mint.var(x, dim=0)),
    lambda x: mint.sum(mint.std(x, dim=0)),
], ids=["mean", "mse_loss", "var", "std"])
def test_a_mean_reduced_loss_differentiates_at_every_batch_size(loss):
    # The gradient rules divided by the element count as a number: a constant of the traced
    # backward that differs at the second batch size, refused as "a number computed from the
    # batch size?", so no dynamic training step could use a mean loss.
    traced = []

    def counted(x):
        traced.append(x.shape[0])
        return loss(x)

    jitted = kiln.jit(kiln.grad(counted), dynamic=True)
    rng = np.random.default_rng(3)
    for b in (2, 3, 5, 4, 7):
        x = kiln.tensor(rng.standard_normal((b, 4)).astype(np.float32))
        np.testing.assert_allclose(jitted(x).numpy(), kiln.grad(loss)(x).numpy(), rtol=1e-6,
                                   atol=1e-7)
    assert traced == [2, 3, 5]  # three traces, then instantiated from the template


def test_integer_scalar_attributes_follow_the_batch_size(rng):
    # arange's end is a Scalar: arange(x.shape[0]) and the gradient of a reflect pad (an arange
    # over x.numel()) were refused as "not following the batch size" at the third batch size.
    positions = kiln.jit(lambda x: x + mint.arange(x.shape[0]).float().unsqueeze(1),
                         dynamic=True)
    pad_grad = kiln.jit(kiln.grad(lambda x: (mint.pad(x, (1, 1, 2, 0), "reflect") ** 2).sum()),
                        dynamic=True)
    for batch in (2, 3, 5, 4):
        x = kiln.tensor(rng.standard_normal((batch, 2, 5, 5)).astype(np.float32))
        assert_close(positions(mint.zeros([batch, 2])),
                     np.repeat(np.arange(batch, dtype=np.float32)[:, None], 2, axis=1))
        want = kiln.grad(lambda x: (mint.pad(x, (1, 1, 2, 0), "reflect") ** 2).sum())(x)
        assert_close(pad_grad(x), want.numpy())


@pytest.mark.parametrize("order", [(1, 2, 3, 4), (2, 1, 3, 4), (2, 3, 1, 4), (2, 3, 4, 1)])
def test_a_piece_of_the_batch_with_a_batch_of_1_among_the_traces(order):
    # At a batch of 1, x[0] is all of the batch (a Reshape, an AsStrided at other sizes) and
    # x[:1] no node at all: with 1 among the first traces every later batch size was refused.
    functions = [lambda x: x[0] * 1.0, lambda x: x[-1] * 1.0, lambda x: x[:1] * 2.0,
                 lambda x: x.narrow(0, 0, 1) + x.sum(), lambda x: x.T[:, 0] * 1.0]
    for fn in functions:
        f = kiln.jit(fn, dynamic=True)
        for batch in order:
            x = kiln.tensor(np.arange(batch * 3, dtype=np.float32).reshape(batch, 3))
            assert_close(f(x), fn(x).numpy())
