"""kiln.mint shape ops against NumPy: views, cat/stack/split/chunk, index_select, gather, scatter,
masked_fill, pad, tril/triu, and every error path."""

import math

import numpy as np
import pytest

import kiln
from conftest import assert_close, numpy_dtype, raises, random_array
from kiln import mint

DTYPES = [kiln.float32, kiln.float16, kiln.int64, kiln.bool_]
DTYPE_IDS = [d.name for d in DTYPES]
LAYOUTS = ["contiguous", "transposed", "strided"]


def make(shape, dtype, rng, layout="contiguous"):
    """(NumPy array, kiln tensor) with equal values; the tensor is laid out as `layout` says."""
    if layout == "contiguous" or len(shape) < 2:
        a = random_array(shape, dtype, rng)
        return a, kiln.tensor(a, dtype=dtype)
    if layout == "transposed":
        base = random_array(shape[::-1], dtype, rng)
        dims = list(range(len(shape)))[::-1]
        return base.transpose(dims), kiln.tensor(base, dtype=dtype).permute(dims)
    base = random_array(shape[:-1] + (2 * shape[-1],), dtype, rng)
    t = kiln.tensor(base, dtype=dtype).slice(-1, 0, 2 * shape[-1], 2)
    assert not t.is_contiguous() or shape[-1] <= 1
    return base[..., ::2], t


def test_every_primitive_is_registered():
    names = set(kiln._C.list_ops())
    for name in ["Reshape", "Transpose", "Permute", "Expand", "Squeeze", "Unsqueeze", "Flatten",
                 "Contiguous", "Concat", "Stack", "Split", "IndexSelect", "Gather", "Scatter",
                 "MaskedFill", "Pad", "Tril", "Triu", "Index", "IndexPut"]:
        assert name in names


# ---------------------------------------------------------------------------------------------
# Views

VIEWS = {
    "reshape": ((2, 3, 4), lambda t: mint.reshape(t, (6, -1)), lambda a: a.reshape(6, -1)),
    "reshape_int": ((2, 3), lambda t: mint.reshape(t, -1), lambda a: a.reshape(-1)),
    "reshape_0d": ((), lambda t: mint.reshape(t, [1, 1]), lambda a: a.reshape(1, 1)),
    "reshape_empty": ((0, 3), lambda t: mint.reshape(t, (3, 0)), lambda a: a.reshape(3, 0)),
    "transpose": ((2, 3, 4), lambda t: mint.transpose(t, 0, -1), lambda a: np.swapaxes(a, 0, -1)),
    "permute": ((2, 3, 4), lambda t: mint.permute(t, (2, 0, 1)), lambda a: a.transpose(2, 0, 1)),
    "expand": ((3, 1), lambda t: mint.expand(t, (2, 3, 4)),
               lambda a: np.broadcast_to(a, (2, 3, 4))),
    "expand_keep": ((3, 1), lambda t: mint.expand(t, [-1, 5]),
                    lambda a: np.broadcast_to(a, (3, 5))),
    "squeeze": ((1, 3, 1), mint.squeeze, np.squeeze),
    "squeeze_dim": ((1, 3, 1), lambda t: mint.squeeze(t, -1), lambda a: np.squeeze(a, -1)),
    "squeeze_kept": ((2, 3), lambda t: mint.squeeze(t, 0), lambda a: a),
    "unsqueeze": ((2, 3), lambda t: mint.unsqueeze(t, 1), lambda a: np.expand_dims(a, 1)),
    "unsqueeze_end": ((2, 3), lambda t: mint.unsqueeze(t, -1), lambda a: a[..., None]),
    "unsqueeze_0d": ((), lambda t: mint.unsqueeze(t, 0), lambda a: a.reshape(1)),
    "flatten": ((2, 3, 4), mint.flatten, lambda a: a.reshape(-1)),
    "flatten_mid": ((2, 3, 4, 5), lambda t: mint.flatten(t, 1, 2), lambda a: a.reshape(2, 12, 5)),
    "flatten_0d": ((), mint.flatten, lambda a: a.reshape(1)),
}


@pytest.mark.parametrize("case", list(VIEWS))
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_view_op_matches_numpy_and_shares_storage(case, dtype, rng):
    shape, op, ref = VIEWS[case]
    a, t = make(shape, dtype, rng)
    out = op(t)
    assert out.dtype == dtype
    assert_close(out, ref(a))
    assert out.shares_storage_with(t) or out.numel() == 0


@pytest.mark.parametrize("case", [c for c in VIEWS if len(VIEWS[c][0]) >= 2])
@pytest.mark.parametrize("layout", ["transposed", "strided"])
def test_view_op_handles_non_contiguous_input(case, layout, rng):
    shape, op, ref = VIEWS[case]
    a, t = make(shape, kiln.float32, rng, layout)
    assert_close(op(t), ref(a))


def test_reshape_copies_only_when_strides_cannot_express_it(rng):
    _, t = make((3, 4), kiln.float32, rng, "transposed")
    assert not mint.reshape(t, (12,)).shares_storage_with(t)
    assert not mint.reshape(t, (2, 2, 3)).shares_storage_with(t)
    assert mint.reshape(t, (3, 2, 2)).shares_storage_with(t)


def test_contiguous_copies_only_non_contiguous_tensors(rng):
    a, t = make((3, 4), kiln.float32, rng)
    assert mint.contiguous(t).shares_storage_with(t)
    tt = mint.transpose(t, 0, 1)
    c = mint.contiguous(tt)
    assert c.is_contiguous() and not c.shares_storage_with(t)
    assert_close(c, a.T)


# Copies whose source runs along another dim than the destination go in tiles (Note [Transposing
# copies] in src/core/copy.cc): sizes that are not multiples of the tile, batch dims around the
# two, every element size, conversions on the way, and the parallel split of tiles.
@pytest.mark.parametrize("shape,dims", [
    ((200, 130), (1, 0)),
    ((33, 64, 31), (2, 1, 0)),
    ((3, 140, 150), (0, 2, 1)),
    ((8, 128, 4, 64), (0, 2, 1, 3)),  # runs of 64 on both sides: the plain copy
    ((6, 5, 70, 40), (3, 1, 0, 2)),
    ((1100, 1200), (1, 0)),
])
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.float16, kiln.int8, kiln.bool_],
                         ids=str)
def test_transposing_copy_matches_numpy(shape, dims, dtype, rng):
    base = random_array(shape, dtype, rng)
    t = mint.permute(kiln.tensor(base, dtype=dtype), dims)
    want = base.transpose(dims)
    c = mint.contiguous(t)
    assert c.is_contiguous()
    np.testing.assert_array_equal(c.numpy(), want)
    to = {kiln.bool_: kiln.int32, kiln.float64: kiln.float32}.get(dtype, kiln.float64)
    np.testing.assert_array_equal(t.to(to).numpy(), want.astype(numpy_dtype(to)))
    # The mirror case: a contiguous source assigned into a permuted view of a destination.
    dst = kiln.tensor(np.zeros(shape, numpy_dtype(dtype)), dtype=dtype)
    mint.permute(dst, dims)[...] = kiln.tensor(np.ascontiguousarray(want), dtype=dtype)
    np.testing.assert_array_equal(dst.numpy(), base)


def test_writes_through_a_view_reach_the_base():
    t = kiln.tensor(np.zeros((2, 3), np.float32))
    v = mint.transpose(t, 0, 1)
    v.numpy()[2, 1] = 5.0
    assert t.numpy()[1, 2] == 5.0


@pytest.mark.parametrize("call, error, match", [
    (lambda t: mint.reshape(t, (4, 2)), kiln.ShapeError, r"invalid for 6 elements"),
    (lambda t: mint.reshape(t, (-1, -1)), kiln.ShapeError, r"only one dimension can be -1"),
    (lambda t: mint.transpose(t, 0, 2), kiln.KilnIndexError, r"out of range"),
    (lambda t: mint.permute(t, (0, 0)), kiln.KilnIndexError, r"appears twice"),
    (lambda t: mint.permute(t, (0,)), kiln.ShapeError, r"expected 2 dims"),
    (lambda t: mint.expand(t, (4, 3)), kiln.ShapeError, r"cannot broadcast"),
    (lambda t: mint.expand(t, (3,)), kiln.ShapeError, r"fewer dimensions"),
    (lambda t: mint.squeeze(t, 2), kiln.KilnIndexError, r"out of range"),
    (lambda t: mint.unsqueeze(t, 4), kiln.KilnIndexError, r"out of range"),
    (lambda t: mint.flatten(t, 1, 0), kiln.KilnIndexError, r"comes after"),
])
def test_view_op_errors_name_the_op(call, error, match):
    t = kiln.tensor(np.zeros((2, 3), np.float32))
    with raises(error, match=match):
        call(t)


# ---------------------------------------------------------------------------------------------
# cat and stack

@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_cat_matches_concatenate(dim, layout, dtype, rng):
    sizes = [2, 0, 3]
    shape = [2, 3, 4]
    pairs = []
    for n in sizes:
        s = list(shape)
        s[dim] = n
        pairs.append(make(tuple(s), dtype, rng, layout))
    out = mint.cat([t for _, t in pairs], dim)
    assert out.dtype == dtype and out.is_contiguous()
    assert_close(out, np.concatenate([a for a, _ in pairs], axis=dim))


@pytest.mark.parametrize("a_dtype, b_dtype", [
    (kiln.int32, kiln.float32), (kiln.bool_, kiln.int64), (kiln.float16, kiln.float32),
    (kiln.int8, kiln.uint8), (kiln.bfloat16, kiln.float16), (kiln.int64, kiln.int64)])
def test_cat_and_stack_promote_to_the_result_type(a_dtype, b_dtype, rng):
    a = random_array((2, 3), a_dtype, rng)
    b = random_array((2, 3), b_dtype, rng)
    ta, tb = kiln.tensor(a, dtype=a_dtype), kiln.tensor(b, dtype=b_dtype)
    want = kiln.promote_types(a_dtype, b_dtype)
    expected_dtype = numpy_dtype(want)
    cat = mint.cat([ta, tb], 1)
    assert cat.dtype == want
    assert_close(cat, np.concatenate([a.astype(expected_dtype), b.astype(expected_dtype)], 1))
    stacked = mint.stack([ta, tb])
    assert stacked.dtype == want
    assert_close(stacked, np.stack([a.astype(expected_dtype), b.astype(expected_dtype)]))


def test_cat_accepts_numpy_arrays_and_a_single_tensor(rng):
    a = random_array((2, 3), kiln.float32, rng)
    assert_close(mint.cat([a, kiln.tensor(a)]), np.concatenate([a, a]))
    assert_close(mint.cat([kiln.tensor(a)], 1), a)


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_stack_matches_numpy(dim, layout, dtype, rng):
    pairs = [make((2, 3), dtype, rng, layout) for _ in range(3)]
    out = mint.stack([t for _, t in pairs], dim)
    assert_close(out, np.stack([a for a, _ in pairs], axis=dim))


def test_cat_and_stack_take_each_item_of_a_mixed_or_generated_sequence(rng):
    # A tensor followed by an array or a number: each item converts on its own (an earlier
    # converter handed the tensor back for the items after it).
    a = random_array((3,), kiln.float32, rng)
    t = kiln.tensor(a)
    assert_close(mint.stack([t, np.zeros(3, np.float32)]), np.stack([a, np.zeros(3, np.float32)]))
    assert_close(mint.stack([kiln.tensor(1.5), 2.0]), np.array([1.5, 2.0], np.float32))
    assert_close(mint.cat([t, np.ones(2, np.float32), t]), np.concatenate([a, np.ones(2), a]))

    # A sequence that makes its items on the fly (a tensor iterated by rows, a Sequence class):
    # the items are gone once converted, so the op must hold copies, not borrowed pointers.
    b = random_array((4, 3), kiln.float32, rng)
    assert_close(mint.stack(kiln.tensor(b)), b)
    assert_close(mint.cat(kiln.tensor(b)), b.reshape(-1))

    class Rows:
        def __len__(self):
            return 4

        def __getitem__(self, i):
            if i >= 4:
                raise IndexError(i)
            return kiln.tensor(b[i] * 2)

    assert_close(mint.stack(Rows()), b * 2)


@pytest.mark.filterwarnings("ignore:nanobind")  # nanobind warns of the access it refuses
def test_an_uninitialised_tensor_object_is_refused_not_read():
    blank = kiln.Tensor.__new__(kiln.Tensor)
    with pytest.raises(TypeError):
        mint.add(blank, 1)
    with pytest.raises(TypeError):
        mint.stack([blank])


def test_stack_joins_0d_and_empty_tensors(rng):
    assert_close(mint.stack([kiln.tensor(1.5), kiln.tensor(2.5)]), np.array([1.5, 2.5], np.float32))
    empty = kiln.tensor(np.zeros((0, 2), np.float32))
    assert mint.stack([empty, empty], 1).shape == (0, 2, 2)


@pytest.mark.parametrize("call, error, match", [
    (lambda: mint.cat([np.zeros((2, 3)), np.zeros((3, 3))], 1), kiln.ShapeError,
     r"expected tensor 1 to have size 2 in dimension 0"),
    (lambda: mint.cat([np.zeros((2, 3)), np.zeros((2, 3, 1))]), kiln.ShapeError,
     r"expected tensor 1 to have 2 dimensions"),
    (lambda: mint.cat([np.zeros(3), np.zeros(())]), kiln.ShapeError, r"0-d tensor at index 1"),
    (lambda: mint.cat([]), kiln.KilnValueError, r"at least one tensor"),
    (lambda: mint.cat([np.zeros((2, 3))], 2), kiln.KilnIndexError, r"out of range"),
    (lambda: mint.stack([np.zeros((2, 3)), np.zeros((2, 4))]), kiln.ShapeError,
     r"expected tensor 1 to have shape \[2, 3\].*dimension 1"),
    (lambda: mint.stack([np.zeros(2), np.zeros((2, 1))]), kiln.ShapeError, r"tensor 1"),
    (lambda: mint.stack([]), kiln.KilnValueError, r"at least one tensor"),
    (lambda: mint.stack([np.zeros(2)], 3), kiln.KilnIndexError, r"out of range"),
])
def test_cat_and_stack_errors(call, error, match):
    with raises(error, match=match):
        call()


# ---------------------------------------------------------------------------------------------
# split and chunk

def torch_chunk_sizes(n, chunks):
    """Piece sizes torch.chunk documents: ceil(n / chunks) each, fewer pieces when n is small;
    an empty dimension gives `chunks` empty pieces."""
    if n == 0:
        return [0] * chunks
    size = math.ceil(n / chunks)
    return [size] * (n // size) + ([n % size] if n % size else [])


def check_pieces(pieces, a, sizes, dim, base):
    assert isinstance(pieces, tuple)
    assert [p.shape[dim] for p in pieces] == sizes
    expected = np.split(a, np.cumsum(sizes)[:-1], axis=dim)
    for piece, e in zip(pieces, expected):
        assert_close(piece, e)
        assert piece.shares_storage_with(base)


@pytest.mark.parametrize("n, split_size", [(6, 2), (7, 3), (2, 5), (0, 3), (1, 1)])
@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_split_by_size_returns_views(n, split_size, dim, dtype, rng):
    shape = (n, 3) if dim == 0 else (3, n)
    a, t = make(shape, dtype, rng)
    sizes = [split_size] * (n // split_size) + ([n % split_size] if n % split_size else [])
    check_pieces(mint.split(t, split_size, dim), a, sizes or [0], dim, t)


@pytest.mark.parametrize("sections", [[1, 2, 3], [6], [0, 6, 0], [3, 3]])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_split_by_sections_matches_numpy(sections, layout, rng):
    a, t = make((2, 6), kiln.float32, rng, layout)
    check_pieces(mint.split(t, sections, 1), a, sections, 1, t)


@pytest.mark.parametrize("n", [0, 1, 5, 6, 7])
@pytest.mark.parametrize("chunks", [1, 2, 3, 4, 8])
def test_chunk_follows_torch_chunk(n, chunks, rng):
    a, t = make((3, n), kiln.int64, rng)
    check_pieces(mint.chunk(t, chunks, 1), a, torch_chunk_sizes(n, chunks), 1, t)


def test_chunk_into_more_pieces_than_int64_rounding_allows():
    # n + chunks - 1 overflowed: "split: expected a positive split_size, got 0".
    t = kiln.tensor(np.arange(10.0))
    assert [p.tolist() for p in mint.chunk(t, 2**63 - 1)] == [[float(i)] for i in range(10)]


def test_split_takes_numpy_integers():
    t = kiln.tensor(np.arange(5, dtype=np.float32))
    assert [p.shape for p in mint.split(t, np.int64(2))] == [(2,), (2,), (1,)]
    assert [p.shape for p in mint.split(t, [np.int32(1), 4])] == [(1,), (4,)]


def test_split_pieces_write_through_to_the_base():
    t = kiln.tensor(np.zeros(4, np.float32))
    first, second = mint.split(t, 2)
    second.numpy()[:] = 7
    np.testing.assert_array_equal(t.numpy(), [0, 0, 7, 7])


@pytest.mark.parametrize("call, error, match", [
    (lambda t: mint.split(t, [2, 2]), kiln.ShapeError, r"summing to 5.*\[2, 2\] summing to 4"),
    (lambda t: mint.split(t, [6, -1]), kiln.KilnValueError, r"non-negative section sizes"),
    (lambda t: mint.split(t, 0), kiln.KilnValueError, r"positive split_size"),
    (lambda t: mint.split(t, 2, 2), kiln.KilnIndexError, r"out of range"),
    (lambda t: mint.split(kiln.tensor(1.0), 1), kiln.ShapeError, r"0-d tensor"),
    (lambda t: mint.chunk(t, 0), kiln.KilnValueError, r"positive number of chunks"),
    (lambda t: mint.chunk(kiln.tensor(1.0), 2), kiln.ShapeError, r"0-d tensor"),
    (lambda t: mint.chunk(t, 2, -3), kiln.KilnIndexError, r"out of range"),
    (lambda t: mint.split(t, 2**70), kiln.KilnTypeError, r"split: 1180591620717411303424 does "
     r"not fit in int64"),
    (lambda t: mint.split(t, [1, 2**70]), kiln.KilnTypeError, r"split: expected an int or a "
     r"sequence of ints, got \[1, 1180591620717411303424\]"),
    (lambda t: mint.split(t, "ab"), kiln.KilnTypeError, r"sequence of ints, got 'ab'"),
    (lambda t: mint.split(t, True), kiln.KilnTypeError, r"sequence of ints, got True"),
])
def test_split_and_chunk_errors(call, error, match):
    t = kiln.tensor(np.zeros((5, 2), np.float32))
    with raises(error, match=match):
        call(t)


# ---------------------------------------------------------------------------------------------
# index_select, gather, scatter

INDEX_DTYPES = [np.int64, np.int32]


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=["int64", "int32"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_index_select_matches_take(dim, index_dtype, layout, dtype, rng):
    a, t = make((3, 4, 5), dtype, rng, layout)
    n = a.shape[dim]
    index = np.array([n - 1, 0, -1, 1, -n, 0], index_dtype)
    out = mint.index_select(t, dim, kiln.tensor(index))
    assert out.dtype == dtype
    assert_close(out, np.take(a, index, axis=dim))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_index_select_along_the_last_dim_of_a_large_tensor(dtype, rng):
    # Single elements per selected position, enough outer rows to split across threads.
    a, t = make((20000, 7), dtype, rng, "transposed")
    index = np.array([6, 0, -1, 3, -7], np.int64)
    assert_close(mint.index_select(t, 1, kiln.tensor(index)), np.take(a, index, axis=1))
    # One row, many positions: split within the row.
    a, t = make((1000,), dtype, rng)
    index = rng.integers(-1000, 1000, size=100000)
    assert_close(mint.index_select(t, 0, kiln.tensor(index)), np.take(a, index))
    a, t = make((3, 1000, 1), dtype, rng)
    assert_close(mint.index_select(t, 1, kiln.tensor(index)), np.take(a, index, axis=1))


def test_index_select_with_0d_and_empty_indices(rng):
    a, t = make((3, 4), kiln.float32, rng)
    assert_close(mint.index_select(t, 1, kiln.tensor(2)), a[:, [2]])
    assert mint.index_select(t, 0, np.zeros(0, np.int64)).shape == (0, 4)
    assert mint.index_select(kiln.tensor(np.zeros((0, 2))), 1, np.array([1])).shape == (0, 1)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=["int64", "int32"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_gather_matches_take_along_axis(dim, index_dtype, layout, dtype, rng):
    a, t = make((3, 4, 5), dtype, rng, layout)
    shape = list(a.shape)
    n = shape[dim]
    shape[dim] = 6
    index = rng.integers(-n, n, size=shape).astype(index_dtype)
    out = mint.gather(t, dim, index)
    assert out.shape == tuple(shape)
    assert_close(out, np.take_along_axis(a, index, axis=dim))


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.int8, kiln.float16], ids=str)
def test_gather_along_the_last_dim_in_parallel_chunks(dtype, layout, rng):
    # Enough elements for several work chunks on three threads, which start part-way through
    # rows of the index (291 * 701 does not split evenly into rows).
    threads = kiln.get_num_threads()
    kiln.set_num_threads(3)
    try:
        a, t = make((300, 1000), dtype, rng, layout)
        index = rng.integers(-1000, 1000, size=(291, 701))
        assert_close(mint.gather(t, 1, index), np.take_along_axis(a[:291], index, axis=1))
        # A trailing size-1 dim after the gathered one: still one element per (row, position).
        a3, t3 = make((300, 900, 1), dtype, rng)
        index3 = rng.integers(-900, 900, size=(291, 701, 1))
        assert_close(mint.gather(t3, 1, index3), np.take_along_axis(a3[:291], index3, axis=1))
    finally:
        kiln.set_num_threads(threads)


def test_gather_with_an_index_smaller_than_x(rng):
    a, t = make((4, 5), kiln.int64, rng)
    index = rng.integers(0, 4, size=(2, 3))
    assert_close(mint.gather(t, 0, index), np.take_along_axis(a[:, :3], index, axis=0))


@pytest.mark.parametrize("bad", [7, -8, 2**63 - 1, -(2**63), 2**62, -(2**62)])
@pytest.mark.parametrize("at", [0, 5, 38])
def test_index_bounds_are_exact_at_every_position(bad, at, rng):
    # -n and n - 1 are in range, anything past either is an IndexError naming the first bad
    # index, wherever it sits among the others (the check runs over vectors of indices).
    a, t = make((3, 7), kiln.float32, rng)
    index = np.tile(np.array([-7, 6, 0, -1], np.int64), (3, 10))
    assert_close(mint.gather(t, 1, index), np.take_along_axis(a, index, axis=1))
    assert_close(mint.index_select(t, 1, index[0]), a[:, index[0]])
    index[1, at] = bad
    with raises(kiln.KilnIndexError, f"index {bad} is out of bounds for dimension 1 with size 7"):
        mint.gather(t, 1, index)
    with raises(kiln.KilnIndexError, f"index {bad} is out of bounds for dimension 1 with size 7"):
        mint.index_select(t, 1, index[1])


def test_gather_on_0d_and_empty(rng):
    assert mint.gather(kiln.tensor(3.0), 0, kiln.tensor(0)).item() == 3.0
    assert mint.gather(kiln.tensor(np.zeros((2, 3))), 1, np.zeros((2, 0), np.int64)).shape == (2, 0)


def scatter_reference(a, dim, index, src, reduce):
    """torch.scatter, in order (the last duplicate wins); reductions in float64."""
    out = a.astype(np.float64) if reduce != "none" else a.copy()
    src = np.broadcast_to(src, index.shape) if np.ndim(src) == 0 else src
    for pos in np.ndindex(*index.shape):
        target = list(pos)
        target[dim] = index[pos]
        target = tuple(target)
        if reduce == "none":
            out[target] = src[pos]
        elif reduce == "add":
            out[target] += src[pos]
        else:
            out[target] *= src[pos]
    return out.astype(a.dtype)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_scatter_matches_put_along_axis(dim, layout, dtype, rng):
    a, t = make((4, 5), dtype, rng, layout)
    n = a.shape[dim]
    # A permutation along `dim` writes every target once, so the result is order-independent.
    index = np.argsort(rng.random(a.shape), axis=dim)[:3] if dim == 0 else \
        np.argsort(rng.random(a.shape), axis=dim)[:, :3]
    src = random_array(index.shape, dtype, rng)
    expected = a.copy()
    np.put_along_axis(expected, index, src, axis=dim)
    out = mint.scatter(t, dim, kiln.tensor(index - n * (index % 2)), kiln.tensor(src, dtype=dtype))
    assert_close(out, expected)
    assert_close(t, a)  # out of place


@pytest.mark.parametrize("reduce", ["add", "multiply"])
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float16, kiln.int64, kiln.int32],
                         ids=lambda d: d.name)
def test_scatter_reduces_duplicates(reduce, dtype, rng):
    a = rng.integers(-3, 4, size=(3, 4)).astype(numpy_dtype(dtype))
    index = rng.integers(0, 3, size=(5, 4))
    src = rng.integers(-3, 4, size=(6, 4)).astype(numpy_dtype(dtype))  # larger than index
    out = mint.scatter(kiln.tensor(a), 0, index.astype(np.int32), kiln.tensor(src), reduce=reduce)
    assert out.dtype == dtype
    assert_close(out, scatter_reference(a, 0, index, src[:5], reduce))


@pytest.mark.parametrize("value", [7, 2.5, True])
def test_scatter_takes_a_scalar_src(value, rng):
    a = rng.integers(0, 9, size=(2, 3)).astype(np.int64)
    index = np.array([[1, 0], [2, 2]])
    out = mint.scatter(kiln.tensor(a), 1, index, value)
    assert out.dtype == kiln.int64
    assert_close(out, scatter_reference(a, 1, index, np.int64(value), "none"))


def test_scatter_refuses_a_number_its_dtype_cannot_hold():
    # As masked_fill and where: 300 into uint8 wrapped to 44, NaN into int64 to -2**63.
    index = kiln.tensor([0])
    for dtype, value in [(np.uint8, 300), (np.int64, float("nan")), (np.int8, -129)]:
        x = kiln.tensor(np.zeros(3, dtype))
        with raises(kiln.KilnValueError, match="Scatter: the value .* does not fit in"):
            mint.scatter(x, 0, index, value)
        assert x.tolist() == [0, 0, 0]
    assert mint.scatter(kiln.tensor(np.zeros(3, np.uint8)), 0, index, 255).tolist() == [255, 0, 0]


def test_scatter_with_duplicates_keeps_the_last_value():
    out = mint.scatter(kiln.tensor(np.zeros(3, np.float32)), 0, np.array([1, 1, 1]),
                       kiln.tensor([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(out.numpy(), [0, 3, 0])


@pytest.mark.parametrize("call, error, match", [
    (lambda x: mint.index_select(x, 0, np.array([3])), kiln.KilnIndexError,
     r"index 3 is out of bounds for dimension 0 with size 3"),
    (lambda x: mint.index_select(x, 1, np.array([-5])), kiln.KilnIndexError,
     r"index -5 is out of bounds for dimension 1 with size 4"),
    (lambda x: mint.index_select(x, 0, np.array([0.5])), kiln.DTypeError,
     r"int64 or int32 index tensor, got float64"),
    (lambda x: mint.index_select(x, 0, np.array([[0]])), kiln.ShapeError, r"0-d or 1-d index"),
    (lambda x: mint.index_select(kiln.tensor(1.0), 0, np.array([0])), kiln.ShapeError,
     r"0-d tensor"),
    (lambda x: mint.index_select(x, 2, np.array([0])), kiln.KilnIndexError, r"out of range"),
    (lambda x: mint.gather(x, 1, np.array([[0, 7]])), kiln.KilnIndexError,
     r"index 7 is out of bounds for dimension 1 with size 4"),
    (lambda x: mint.gather(x, 1, np.array([0, 1])), kiln.ShapeError, r"as many dimensions as x"),
    (lambda x: mint.gather(x, 1, np.zeros((4, 1), np.int64)), kiln.ShapeError,
     r"index size <= 3 in dimension 0"),
    (lambda x: mint.gather(x, 0, np.zeros((1, 1), np.int16)), kiln.DTypeError, r"got int16"),
    (lambda x: mint.scatter(x, 0, np.array([[0]]), 1.0, reduce="max"), kiln.KilnValueError,
     r"reduce 'none', 'add' or 'multiply', got 'max'"),
    (lambda x: mint.scatter(x, 0, np.array([[0, 1]]), np.ones((1, 1), np.float32)), kiln.ShapeError,
     r"src size >= 2"),
    (lambda x: mint.scatter(x, 0, np.array([[0]]), np.ones(1, np.float32)), kiln.ShapeError,
     r"as many dimensions as index"),
    (lambda x: mint.scatter(x, 0, np.array([[3]]), 1.0), kiln.KilnIndexError,
     r"index 3 is out of bounds for dimension 0 with size 3"),
])
def test_index_op_errors(call, error, match):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = kiln.tensor(a)
    with raises(error, match=match):
        call(x)
    np.testing.assert_array_equal(x.numpy(), a)


# ---------------------------------------------------------------------------------------------
# masked_fill

@pytest.mark.parametrize("mask_shape", [(3, 4), (4,), (3, 1), ()])
@pytest.mark.parametrize("value", [2, -1.5, True])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_masked_fill_matches_where(mask_shape, value, layout, dtype, rng):
    a, t = make((3, 4), dtype, rng, layout)
    mask = rng.random(mask_shape) > 0.5
    out = mint.masked_fill(t, mask, value)
    assert out.dtype == dtype
    if dtype.is_floating_point:
        fill = np.array(value, np.float32).astype(numpy_dtype(dtype))
    else:
        fill = np.array(int(value) if dtype != kiln.bool_ else bool(value)).astype(a.dtype)
    assert_close(out, np.where(mask, fill, a))


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.bfloat16, kiln.int64, kiln.uint8], ids=str)
def test_masked_fill_with_a_causal_mask_over_heads(dtype, rng):
    # The attention pattern: a [T, T] mask broadcast over [batch, heads, T, T].
    a, t = make((2, 3, 64, 64), dtype, rng)
    mask = np.triu(np.ones((64, 64), dtype=bool), k=1)
    fill = 7
    out = mint.masked_fill(t, kiln.tensor(mask), fill)
    np.testing.assert_array_equal(out.numpy(), np.where(mask, np.array(fill).astype(a.dtype), a))


def test_masked_fill_takes_a_0d_tensor_value(rng):
    a, t = make((2, 3), kiln.float32, rng)
    mask = a > 0
    assert_close(mint.masked_fill(t, mask, kiln.tensor(9.0)), np.where(mask, 9.0, a))


@pytest.mark.parametrize("call, error, match", [
    (lambda x: mint.masked_fill(x, np.ones(4), 1), kiln.DTypeError, r"bool mask, got float64"),
    (lambda x: mint.masked_fill(x, np.ones((2, 3, 4), bool), 1), kiln.ShapeError,
     r"broadcasts to x's shape \[3, 4\]"),
    (lambda x: mint.masked_fill(x, np.ones(4, bool), kiln.tensor([1, 2])), kiln.KilnValueError,
     r"0-d tensor as value"),
    (lambda x: mint.masked_fill(x.numpy().astype(np.int32), np.ones(4, bool), float("inf")),
     kiln.KilnValueError, r"the value inf does not fit in int32"),
])
def test_masked_fill_errors(call, error, match):
    x = kiln.tensor(np.zeros((3, 4), np.float32))
    with raises(error, match=match):
        call(x)


# ---------------------------------------------------------------------------------------------
# pad

def numpy_pad(a, pads, mode, value):
    """np.pad from torch-style (before, after) pairs starting at the last dim; negative constant
    pads crop."""
    width = [(0, 0)] * a.ndim
    for i in range(len(pads) // 2):
        width[a.ndim - 1 - i] = (pads[2 * i], pads[2 * i + 1])
    grow = [(max(b, 0), max(e, 0)) for b, e in width]
    np_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
               "circular": "wrap"}[mode]
    kwargs = {"constant_values": value} if mode == "constant" else {}
    out = np.pad(a, grow, mode=np_mode, **kwargs)
    crop = tuple(slice(max(-b, 0), out.shape[d] - max(-e, 0)) for d, (b, e) in enumerate(width))
    return out[crop]


PADS = [[1, 2], [0, 0, 2, 1], [2, 0, 1, 1, 1, 0], [3], [0, 1, 0, 0]]


@pytest.mark.parametrize("pads", [p for p in PADS if len(p) % 2 == 0], ids=str)
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_pad_matches_numpy(pads, mode, layout, dtype, rng):
    a, t = make((2, 3, 4), dtype, rng, layout)
    value = 1.0 if dtype == kiln.bool_ else 2.0
    out = mint.pad(t, pads, mode, value)
    assert out.dtype == dtype
    assert_close(out, numpy_pad(a, pads, mode, np.array(value).astype(a.dtype)))


@pytest.mark.parametrize("pads, mode", [
    ([2, 3, 1, 4], "constant"), ([2, 3, 1, 4], "reflect"), ([2, 3, 1, 4], "replicate"),
    ([0, 0, 1, 0, 2, 1], "reflect"), ([-1, 2, 0, 0, 1, 0], "constant"),
    ([2, 3, 1, 4], "circular"), ([301, 301, 70, 0], "circular"),
    ([0, 0, -2, -3], "constant"),
], ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_pad_large_tensors_split_across_threads(pads, mode, layout, rng):
    # Hundreds of rows of 300: the kernel's parallel chunks start inside outer dims.
    a, t = make((3, 70, 301), kiln.float32, rng, layout)
    assert_close(mint.pad(t, pads, mode, -2.0), numpy_pad(a, pads, mode, np.float32(-2.0)))


@pytest.mark.parametrize("pads", [[-1, 2], [-1, -1, 1, 0], [0, -3]], ids=str)
def test_pad_constant_crops_with_negative_pads(pads, rng):
    a, t = make((2, 3), kiln.float32, rng)
    assert_close(mint.pad(t, pads, value=-1), numpy_pad(a, pads, "constant", -1))


def test_pad_0d_empty_and_default_value(rng):
    assert mint.pad(kiln.tensor(2.0), []).item() == 2.0
    empty = kiln.tensor(np.zeros((0, 2), np.float32))
    assert_close(mint.pad(empty, [1, 1, 1, 0]), np.zeros((1, 4), np.float32))
    a, t = make((2,), kiln.float32, rng)
    assert_close(mint.pad(t, [1, 1]), np.pad(a, 1))


@pytest.mark.parametrize("pads, mode, error, match", [
    ([1], "constant", kiln.KilnValueError, r"odd number of pads"),
    ([1, 1] * 4, "constant", kiln.KilnValueError, r"at most 6 pads"),
    ([1, 1], "symmetric", kiln.KilnValueError, r"'replicate' or 'circular', got 'symmetric'"),
    ([5, 0], "circular", kiln.KilnValueError, r"at most the dimension size.*\(5, 0\).*size 4"),
    ([0, -1], "circular", kiln.KilnValueError, r"only supported in constant mode"),
    ([4, 0], "reflect", kiln.KilnValueError, r"less than the dimension size.*size 4"),
    ([-1, 0], "reflect", kiln.KilnValueError, r"only supported in constant mode"),
    ([0, -1], "replicate", kiln.KilnValueError, r"only supported in constant mode"),
    ([-3, -2], "constant", kiln.ShapeError, r"negative size -1"),
    # Each crop within the size: [-5, 3] of 4 cropped past the start, then filled (as [9, 9]).
    ([-5, 3], "constant", kiln.ShapeError, r"crops dimension 2 of size 4 by more than its size"),
])
def test_pad_errors(pads, mode, error, match):
    t = kiln.tensor(np.zeros((2, 3, 4), np.float32))
    with raises(error, match=match):
        mint.pad(t, pads, mode)


def test_pad_refuses_unrepresentable_values_and_empty_replicate():
    with raises(kiln.KilnValueError, match=r"the value nan does not fit in int64"):
        mint.pad(kiln.tensor([1, 2]), [1, 1], value=float("nan"))
    with raises(kiln.KilnValueError, match=r"replicate-pad the empty dimension 0"):
        mint.pad(kiln.tensor(np.zeros(0)), [1, 0], "replicate")


# ---------------------------------------------------------------------------------------------
# tril and triu

@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3), (2, 3, 4), (0, 3), (2, 0, 0)], ids=str)
@pytest.mark.parametrize("diagonal", [-2, -1, 0, 1, 3, 100, -100])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_tril_triu_match_numpy(shape, diagonal, dtype, rng):
    a, t = make(shape, dtype, rng)
    assert_close(mint.tril(t, diagonal), np.tril(a, diagonal))
    assert_close(mint.triu(t, diagonal), np.triu(a, diagonal))


@pytest.mark.parametrize("layout", ["transposed", "strided"])
def test_tril_triu_non_contiguous(layout, rng):
    a, t = make((3, 4, 5), kiln.float32, rng, layout)
    assert_close(mint.tril(t, 1), np.tril(a, 1))
    assert_close(mint.triu(t), np.triu(a))


@pytest.mark.parametrize("op", [mint.tril, mint.triu])
def test_tril_triu_need_two_dims(op):
    with raises(kiln.ShapeError, match=r"at least 2 dimensions, got 1-d"):
        op(kiln.tensor([1.0, 2.0]))


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float16, kiln.int64, kiln.bool_, kiln.int8],
                         ids=str)
@pytest.mark.parametrize("run", [1, 3, 16, 33, 128, 129])
def test_copies_of_short_contiguous_runs(dtype, run, rng):
    # Runs contiguous on both sides with the next dim strided (the attention-head permute), short
    # and long, into a fresh tensor and into a strided view of another, split across threads.
    threads = kiln.get_num_threads()
    kiln.set_num_threads(3)
    try:
        a, t = make((6, 40, 5, run), dtype, rng)
        assert_close(t.permute(0, 2, 1, 3).contiguous(), a.transpose(0, 2, 1, 3))
        target = kiln.tensor(np.zeros((5, 6, 40, 2 * run), a.dtype))
        view = target.permute(1, 0, 2, 3)[:, :, :, :run]  # [6, 5, 40, run], runs of `run`
        view[...] = t.permute(0, 2, 1, 3)
        want = np.zeros((5, 6, 40, 2 * run), a.dtype)
        want.transpose(1, 0, 2, 3)[:, :, :, :run] = a.transpose(0, 2, 1, 3)
        assert_close(target, want)
    finally:
        kiln.set_num_threads(threads)


@pytest.mark.parametrize("dims", [(0, 2), (-1, 0), [4], (), (1,), (0, 2, 4)], ids=str)
def test_squeeze_takes_a_sequence_of_dims_like_numpy(dims, rng):
    values = random_array((1, 3, 1, 2, 1), kiln.float32, rng)
    x = kiln.tensor(values)
    ones = tuple(d for d in dims if values.shape[d] == 1)  # NumPy refuses the others; PyTorch
    want = np.squeeze(values, axis=ones)                     # keeps them
    for got in (x.squeeze(dims), mint.squeeze(x, dims)):
        assert got.shares_storage_with(x)
        assert_close(got, want)


def test_squeeze_refuses_repeated_or_out_of_range_dims():
    x = mint.zeros([1, 3, 1])
    with raises(kiln.KilnValueError, match="squeeze: dim 0 appears more than once"):
        x.squeeze((0, -3))
    with raises(IndexError, match="dim out of range"):
        mint.squeeze(x, (0, 3))
    with raises(TypeError, match="expected an int or a sequence of ints"):
        x.squeeze("0")
    assert mint.zeros([]).squeeze((0, -1)).shape == ()


def test_squeeze_of_several_dims_under_dynamic_jit():
    f = kiln.jit(lambda t: t.squeeze((1, 3)) * 2.0, dynamic=True)
    for batch in (1, 2, 3, 5):
        out = f(mint.ones([batch, 1, 4, 1]))
        assert out.shape == (batch, 4)
        assert_close(out, np.full((batch, 4), 2.0, np.float32))


def test_numpy_arrays_as_shapes_and_sizes():
    # An array has __index__ (for one element), so [3] was read as one int: "array([3]) does not
    # fit in int64", and max_pool2d's kernel [1, 2] was taken as 1 x 1.
    x = mint.ones([2, 3])
    images = mint.ones([1, 2, 5, 5])
    assert mint.layer_norm(x, np.array([3])).shape == (2, 3)
    assert x.reshape(np.array([3, 2])).shape == (3, 2)
    assert mint.zeros(np.array([2, 3])).shape == (2, 3)
    assert mint.zeros(np.array(4)).shape == (4,)  # a 0-d array is one int
    assert mint.max_pool2d(images, np.array([1, 2])).shape == (1, 2, 5, 2)
    assert mint.conv2d(images, mint.ones([3, 2, 3, 3]), None, np.array([2, 1])).shape == \
        (1, 3, 2, 3)
    with raises(kiln.KilnTypeError, match="zeros: expected a size"):
        mint.zeros(True)  # a bool is no size, as in PyTorch
    with raises(kiln.KilnTypeError, match="expected dim to be None, an int or a list / tuple"):
        mint.sum(x, np.array([0, 1]))
