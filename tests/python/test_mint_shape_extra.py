"""PyTorch's shape, indexing and predicate functions composed in kiln/mint/_shape_extra.py
(broadcast_tensors, broadcast_to, block_diag, combinations, diag_embed, diagflat, vander, rot90,
ravel, select, take, unravel_index, hsplit / vsplit / dsplit, row_stack, concat / concatenate,
index_copy, masked_scatter, diagonal_scatter, select_scatter, slice_scatter, unique_consecutive,
isin, the is_* predicates, numel, t, result_type, can_cast, scalar_tensor and the aliases) and
their Tensor methods: values against NumPy and itertools over dtypes and edge shapes, gradients,
kiln.jit against eager, PyTorch's promotion where it is installed, and the argument errors."""

import itertools

import numpy as np
import pytest

import kiln
from conftest import assert_close, random_array, raises, t
from kiln.mint import _shape_extra as extra
from kiln.testing import gradcheck

mint = kiln.mint
DTYPES = [kiln.float32, kiln.float64, kiln.int32, kiln.int64, kiln.bool_]
ALL = [kiln.bool_, kiln.uint8, kiln.int8, kiln.int16, kiln.int32, kiln.int64, kiln.float16,
       kiln.bfloat16, kiln.float32, kiln.float64]


def values(shape, dtype, rng):
    return kiln.tensor(random_array(shape, dtype, rng), dtype=dtype)


def leaf(rng, *shape):
    return kiln.tensor(rng.standard_normal(shape)).requires_grad_()


def same_list(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_close(g, w)


# ------------------------------------------------------------------------------------------------
# Broadcasting


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", [[(2, 1, 3), (4, 1), (), (1,)], [(0, 3), (1, 3)], [(5,)], []],
                         ids=str)
def test_broadcast_tensors_are_numpys_views(dtype, shapes, rng):
    tensors = [values(s, dtype, rng) for s in shapes]
    got = extra.broadcast_tensors(*tensors)
    assert isinstance(got, tuple)
    same_list(got, np.broadcast_arrays(*[x.numpy() for x in tensors]))
    assert all(g.shares_storage_with(x) for g, x in zip(got, tensors) if x.numel())


@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast_to_is_numpys(dtype, rng):
    x = values((2, 1, 3), dtype, rng)
    for size, want in (((4, 2, 5, 3), (4, 2, 5, 3)), ([-1, 2, -1], (2, 2, 3)),
                       ((2, 1, 3), (2, 1, 3))):
        got = extra.broadcast_to(x, size)
        assert got.shares_storage_with(x)
        assert_close(got, np.broadcast_to(x.numpy(), want))
    scalar = values((), dtype, rng)
    assert_close(extra.broadcast_to(scalar, 3), np.broadcast_to(scalar.numpy(), 3))


# ------------------------------------------------------------------------------------------------
# block_diag, combinations, diag_embed, diagflat, vander, scalar_tensor


def block_diag_reference(*arrays):
    blocks = [np.atleast_2d(a) for a in arrays]
    dtype = np.result_type(*blocks)
    out = np.zeros((sum(b.shape[0] for b in blocks), sum(b.shape[1] for b in blocks)), dtype)
    row = col = 0
    for b in blocks:
        out[row:row + b.shape[0], col:col + b.shape[1]] = b
        row, col = row + b.shape[0], col + b.shape[1]
    return out


@pytest.mark.parametrize("dtype", DTYPES)
def test_block_diag_is_the_reference(dtype, rng):
    shapes = [(2, 3), (), (4,), (0, 2), (3, 1), (2, 0)]
    tensors = [values(s, dtype, rng) for s in shapes]
    got = extra.block_diag(*tensors)
    assert got.dtype == dtype
    assert_close(got, block_diag_reference(*[x.numpy() for x in tensors]))
    assert extra.block_diag().shape == (1, 0)  # PyTorch's, for no tensors


def test_block_diag_promotes_and_differentiates(rng):
    mixed = extra.block_diag(t([True]), t([[2]], kiln.int32), t([1.5], kiln.float64))
    assert mixed.dtype == kiln.float64
    assert_close(mixed, np.diag([1.0, 2.0, 1.5]))
    gradcheck(lambda a, b: extra.block_diag(a, b, a * b.sum()), (leaf(rng, 2, 3), leaf(rng, 4)))


@pytest.mark.parametrize("with_replacement", [False, True])
@pytest.mark.parametrize("r", [1, 2, 3, 5])
@pytest.mark.parametrize("dtype", DTYPES)
def test_combinations_are_itertools(r, with_replacement, dtype, rng):
    x = values((4,), dtype, rng)
    choose = (itertools.combinations_with_replacement if with_replacement
              else itertools.combinations)
    want = np.array(list(choose(x.numpy().tolist(), r)), dtype=x.numpy().dtype).reshape(-1, r)
    got = extra.combinations(x, r, with_replacement)
    assert got.dtype == dtype
    assert_close(got, want)


def test_combinations_edge_cases(rng):
    x = values((3,), kiln.float32, rng)
    assert extra.combinations(x, 0).shape == (0,)  # PyTorch's: no combination dim
    assert extra.combinations(t(np.zeros(0)), 2).shape == (0, 2)
    gradcheck(lambda v: extra.combinations(v, 2, with_replacement=True), (leaf(rng, 4),))


def diag_embed_reference(a, offset, dim1, dim2):
    side = a.shape[-1] + abs(offset)
    planes = np.zeros(a.shape[:-1] + (side, side), a.dtype)
    for i in range(a.shape[-1]):
        row, col = (i, i + offset) if offset >= 0 else (i - offset, i)
        planes[..., row, col] = a[..., i]
    return np.moveaxis(planes, [-2, -1], [dim1, dim2])


@pytest.mark.parametrize("offset, dim1, dim2", [(0, -2, -1), (1, 0, 2), (-2, 2, 0), (0, 1, -1),
                                                (3, -1, 0)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_diag_embed_is_the_reference(offset, dim1, dim2, dtype, rng):
    x = values((2, 3), dtype, rng)
    for got in (extra.diag_embed(x, offset, dim1, dim2), x.diag_embed(offset, dim1, dim2)):
        assert_close(got, diag_embed_reference(x.numpy(), offset, dim1, dim2))
    assert_close(extra.diag_embed(values((0,), dtype, rng), 1), np.zeros((1, 1), dtype.name))


@pytest.mark.parametrize("offset", [0, 2, -1])
@pytest.mark.parametrize("shape", [(), (3,), (2, 2)])
def test_diagflat_is_numpys(offset, shape, rng):
    x = values(shape, kiln.int32, rng)
    assert_close(extra.diagflat(x, offset), np.diagflat(x.numpy(), offset))
    assert_close(x.diagflat(offset), np.diagflat(x.numpy(), offset))


def test_diagonal_builders_differentiate(rng):
    gradcheck(lambda a: extra.diag_embed(a, -1, 0, 2) * 2, (leaf(rng, 2, 3),))
    gradcheck(lambda a: extra.diagflat(a, 1), (leaf(rng, 2, 2),))


@pytest.mark.parametrize("increasing", [False, True])
@pytest.mark.parametrize("n", [None, 0, 1, 4])
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.int32, kiln.bool_])
def test_vander_is_numpys(n, increasing, dtype, rng):
    x = values((3,), dtype, rng)
    got = extra.vander(x, n, increasing)
    assert got.dtype == (dtype if dtype.is_floating_point else kiln.int64)  # PyTorch's dtypes
    want = np.vander(x.numpy().astype(np.float64), n, increasing)
    assert_close(got, want.astype(got.numpy().dtype))
    assert extra.vander(t(np.zeros(0, np.float32))).shape == (0, 0)


def test_vander_gradient_is_finite_at_zero(rng):
    gradcheck(lambda x: extra.vander(x, 4), (leaf(rng, 3),))
    x = t(np.array([0.0, 1.0, -2.0])).requires_grad_()
    extra.vander(x, 3).sum().backward()  # d(x^2 + x + 1) = 2x + 1
    assert_close(x.grad, np.array([1.0, 3.0, -3.0]))


def test_scalar_tensor_is_float32_by_default():
    for value in (1, True, 2.5):
        got = extra.scalar_tensor(value)
        assert got.shape == () and got.dtype == kiln.float32 and got.item() == float(value)
    got = extra.scalar_tensor(3, dtype=kiln.int32, requires_grad=False)
    assert got.dtype == kiln.int32 and got.item() == 3
    assert extra.scalar_tensor(1.0, dtype=kiln.float64, requires_grad=True).requires_grad


# ------------------------------------------------------------------------------------------------
# rot90, ravel, select, take, unravel_index


@pytest.mark.parametrize("dims", [(0, 1), (1, 0), (0, 2), (-1, 1)], ids=str)
@pytest.mark.parametrize("k", [-5, -1, 0, 1, 2, 3, 4, 6])
def test_rot90_is_numpys(k, dims, rng):
    x = values((2, 3, 4), kiln.int32, rng)
    for got in (extra.rot90(x, k, dims), x.rot90(k, dims)):
        assert not got.shares_storage_with(x)
        assert_close(got, np.rot90(x.numpy(), k, dims))


def test_rot90_defaults_and_gradient(rng):
    x = values((3, 2), kiln.bool_, rng)
    assert_close(extra.rot90(x), np.rot90(x.numpy()))
    gradcheck(lambda a: extra.rot90(a, 1) * extra.rot90(a, -1).flip([0, 1]), (leaf(rng, 3, 3),))


@pytest.mark.parametrize("dtype", DTYPES)
def test_ravel_select_and_take_are_numpys(dtype, rng):
    x = values((3, 4), dtype, rng)
    for got in (extra.ravel(x), x.ravel()):
        assert got.shares_storage_with(x)
        assert_close(got, x.numpy().ravel())
    scalar = values((), dtype, rng)
    assert_close(extra.ravel(scalar), scalar.numpy().ravel())
    for dim, index in ((0, 2), (1, -1), (-1, 0)):
        got = extra.select(x, dim, index)
        assert got.shares_storage_with(x)
        assert_close(got, np.take(x.numpy(), index, axis=dim))
    index = np.array([[0, -1, 5], [11, 3, -12]])
    for index_dtype in (kiln.int64, kiln.int32):
        want = np.take(x.numpy(), index)
        assert_close(extra.take(x, t(index, index_dtype)), want)
        assert_close(x.take(t(index, index_dtype)), want)
    assert_close(extra.take(values((), dtype, rng), t(np.zeros((0, 2), np.int64))),
                 np.zeros((0, 2), x.numpy().dtype))


def test_take_and_select_differentiate(rng):
    gradcheck(lambda a: extra.take(a, t([[0, 5], [5, -1]])), (leaf(rng, 2, 3),))
    gradcheck(lambda a: extra.select(a, 1, -2) * 3, (leaf(rng, 2, 3),))


@pytest.mark.parametrize("shape", [(2, 3), (4,), (3, 1, 5), 7], ids=str)
@pytest.mark.parametrize("dtype", [kiln.int64, kiln.int32, kiln.int16])
def test_unravel_index_is_numpys(shape, dtype, rng):
    total = int(np.prod(shape))
    flat = rng.integers(0, total, size=(2, 3))
    got = extra.unravel_index(t(flat, dtype), shape)
    want = np.unravel_index(flat, shape)
    assert isinstance(got, tuple) and len(got) == len(want)
    assert all(g.dtype == kiln.int64 for g in got)
    same_list(got, want)
    same_list(extra.unravel_index(t(flat - total, dtype), shape), want)  # from the end
    same_list(extra.unravel_index(t(int(flat[0, 0])), shape), np.unravel_index(flat[0, 0], shape))


def test_unravel_index_edge_shapes():
    assert extra.unravel_index(t([0, -1]), ()) == ()
    same_list(extra.unravel_index(t(np.zeros(0, np.int64)), (2, 0)), [np.zeros(0)] * 2)


# ------------------------------------------------------------------------------------------------
# hsplit, vsplit, dsplit, row_stack, concat


SPLITS = [("hsplit", np.hsplit), ("vsplit", np.vsplit), ("dsplit", np.dsplit)]


@pytest.mark.parametrize("name, reference", SPLITS)
@pytest.mark.parametrize("split", [1, 2, [1], [0, 3], [-1, 5]], ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
def test_splits_are_numpys(name, reference, split, dtype, rng):
    x = values((4, 6, 2), dtype, rng)
    want = reference(x.numpy(), split)
    same_list(getattr(extra, name)(x, split), want)
    same_list(getattr(x, name)(split), want)
    if name == "hsplit":
        vector = values((6,), dtype, rng)
        same_list(extra.hsplit(vector, split), np.hsplit(vector.numpy(), split))


def test_row_stack_and_concat_are_cats(rng):
    a, b = values((2, 3), kiln.float32, rng), values((3,), kiln.float32, rng)
    assert extra.row_stack is mint.vstack
    assert_close(extra.row_stack([a, b]), np.vstack([a.numpy(), b.numpy()]))
    assert extra.concat is kiln._C.mint.cat
    assert_close(extra.concat([a, a], dim=1), np.concatenate([a.numpy()] * 2, 1))
    assert_close(extra.concatenate([a, a], axis=-1), np.concatenate([a.numpy()] * 2, -1))
    assert_close(extra.concatenate((a, b.reshape(1, 3))), np.concatenate([a.numpy(),
                                                                          b.numpy()[None]]))


# ------------------------------------------------------------------------------------------------
# index_copy, select_scatter, slice_scatter, diagonal_scatter, masked_scatter


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_index_copy_is_the_reference(dim, dtype, rng):
    x = values((3, 4), dtype, rng)
    axis = dim % 2
    positions = [2, 0] if axis == 0 else [3, 0, 1]
    size = list(x.shape)
    size[axis] = len(positions)
    source = values(size, dtype, rng)
    want = x.numpy().copy()
    index = [slice(None)] * 2
    index[axis] = np.array(positions)
    want[tuple(index)] = source.numpy()
    assert_close(extra.index_copy(x, dim, t(positions), source), want)
    assert_close(x.index_copy(dim, t(positions), source), want)
    y = x.clone()
    assert y.index_copy_(dim, t(positions), source) is y
    assert_close(y, want)
    zero_d = extra.index_copy(values((), dtype, rng), 0, t([0]), source.reshape(-1)[0])
    assert zero_d.shape == () and zero_d.item() == source.reshape(-1)[0].item()


@pytest.mark.parametrize("dtype", DTYPES)
def test_select_and_slice_scatter_are_the_reference(dtype, rng):
    x = values((3, 7), dtype, rng)
    for dim, index in ((0, 1), (1, -2), (-1, 0)):
        src = values(np.take(x.numpy(), index, axis=dim).shape, dtype, rng)
        want = x.numpy().copy()
        np.moveaxis(want, dim, 0)[index] = src.numpy()
        assert_close(extra.select_scatter(x, src, dim, index), want)
        assert_close(x.select_scatter(src, dim, index), want)
    for start, end, step in ((None, None, 1), (1, None, 3), (-3, 100, 2), (5, 2, 1),
                             (0, 7, 7)):
        piece = x.numpy()[:, start:end:step]
        src = values(piece.shape, dtype, rng)
        want = x.numpy().copy()
        want[:, start:end:step] = src.numpy()
        assert_close(extra.slice_scatter(x, src, 1, start, end, step), want)
        assert_close(x.slice_scatter(src, dim=1, start=start, end=end, step=step), want)
    src = values((2, 7), dtype, rng)
    want = x.numpy().copy()
    want[1:] = src.numpy()
    assert_close(extra.slice_scatter(x, src, start=1), want)


@pytest.mark.parametrize("offset, dim1, dim2", [(0, 0, 1), (1, 0, 1), (-1, 1, 0), (2, 2, 0),
                                                (-3, 0, 2), (9, 0, 1)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_diagonal_scatter_is_the_reference(offset, dim1, dim2, dtype, rng):
    x = values((3, 4, 5), dtype, rng)
    diagonal = np.diagonal(x.numpy(), offset, dim1, dim2)
    src = values(diagonal.shape, dtype, rng)
    want = x.numpy().copy()
    first_row, first_col = (0, offset) if offset >= 0 else (-offset, 0)
    for i in range(diagonal.shape[-1]):
        at = [slice(None)] * 3
        at[dim1], at[dim2] = first_row + i, first_col + i
        want[tuple(at)] = src.numpy()[..., i]
    for got in (extra.diagonal_scatter(x, src, offset, dim1, dim2),
                x.diagonal_scatter(src, offset, dim1, dim2)):
        assert_close(got, want)


@pytest.mark.parametrize("mask_shape", [(3, 4), (4,), (3, 1), (2, 3, 4)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_scatter_is_the_reference(mask_shape, dtype, rng):
    x = values((3, 4), dtype, rng)
    mask = rng.random(mask_shape) > 0.4
    shape = np.broadcast_shapes(x.shape, mask.shape)
    chosen = np.broadcast_to(mask, shape)
    source = values((chosen.sum() + 2,), dtype, rng)
    want = np.broadcast_to(x.numpy(), shape).copy()
    want[chosen] = source.numpy()[:chosen.sum()]
    assert_close(extra.masked_scatter(x, t(mask), source), want)
    assert_close(x.masked_scatter(t(mask), source.reshape(1, -1)), want)
    if shape == tuple(x.shape):
        y = x.clone()
        assert y.masked_scatter_(t(mask), source) is y
        assert_close(y, want)


def test_masked_scatter_edge_cases(rng):
    x = values((2, 3), kiln.float32, rng)
    none = t(np.zeros((2, 3), bool))
    empty = t(np.zeros(0, np.float32))
    got = extra.masked_scatter(x, none, empty)
    assert_close(got, x.numpy())
    assert not got.shares_storage_with(x)
    assert extra.masked_scatter(t(np.zeros((0, 3), np.float32)), t([True, False, True]),
                                empty).shape == (0, 3)


def test_scatters_differentiate(rng):
    a = leaf(rng, 3, 4)
    gradcheck(lambda a, s: extra.index_copy(a, 1, t([3, 0]), s), (a, leaf(rng, 3, 2)))
    gradcheck(lambda a, s: extra.select_scatter(a, s, 0, -1), (a, leaf(rng, 4)))
    gradcheck(lambda a, s: extra.slice_scatter(a, s, 1, 1, None, 2), (a, leaf(rng, 3, 2)))
    gradcheck(lambda a, s: extra.diagonal_scatter(a, s, -1), (a, leaf(rng, 2)))
    gradcheck(lambda a, s: extra.masked_scatter(a, t([True, False, False, True]), s),
              (a, leaf(rng, 7)))


def test_in_place_scatters_record_autograd(rng):
    x, s = leaf(rng, 2, 3), leaf(rng, 2, 1)
    y = x * 1.0
    y.index_copy_(1, t([2]), s)
    (y * y).sum().backward()
    want = 2 * x.detach().numpy()
    want[:, 2] = 0.0
    assert_close(x.grad, want)
    assert_close(s.grad, 2 * s.detach().numpy())
    x, s = leaf(rng, 2, 3), leaf(rng, 4)
    y = x * 1.0
    y.masked_scatter_(t([False, True, False]), s)
    (y * 3.0).sum().backward()
    assert_close(x.grad, np.array([[3.0, 0.0, 3.0]] * 2))
    assert_close(s.grad, np.array([3.0, 3.0, 0.0, 0.0]))


# ------------------------------------------------------------------------------------------------
# unique_consecutive, isin


def consecutive_reference(rows):
    """(kept rows, inverse, counts) of runs of equal rows (NaN equal to nothing)."""
    kept, inverse, counts = [], [], []
    for k, row in enumerate(rows):
        if k == 0 or not np.all(row == rows[k - 1]):
            kept.append(row)
            counts.append(0)
        counts[-1] += 1
        inverse.append(len(kept) - 1)
    return np.array(kept), np.array(inverse, np.int64), np.array(counts, np.int64)


@pytest.mark.parametrize("dtype", DTYPES)
def test_unique_consecutive_is_the_reference(dtype, rng):
    x = kiln.tensor(rng.integers(0, 2, size=(4, 5)).astype(dtype.name), dtype=dtype)
    kept, inverse, counts = consecutive_reference(x.numpy().reshape(-1))
    output = extra.unique_consecutive(x)
    assert_close(output, kept.astype(x.numpy().dtype))
    got = x.unique_consecutive(return_inverse=True, return_counts=True)
    same_list(got, [kept.astype(x.numpy().dtype), inverse.reshape(4, 5), counts])
    same_list(extra.unique_consecutive(x, return_counts=True), [output.numpy(), counts])
    rows = x.numpy().repeat(2, axis=1)
    for dim in (0, 1, -1):
        y = t(rows, dtype)
        moved = np.moveaxis(rows, dim, 0)
        kept, inverse, counts = consecutive_reference(moved)
        got = extra.unique_consecutive(y, True, True, dim)
        same_list(got, [np.moveaxis(kept, 0, dim), inverse, counts])


def test_unique_consecutive_edge_cases():
    got = extra.unique_consecutive(t(5), return_inverse=True, return_counts=True)
    same_list(got, [np.array([5]), np.array(0), np.array([1])])
    nan = float("nan")
    same_list(extra.unique_consecutive(t([nan, nan, 1.0, 1.0]), return_counts=True),
              [np.array([nan, nan, 1.0], np.float32), np.array([1, 1, 2])])
    empty = extra.unique_consecutive(t(np.zeros(0, np.float32)), return_counts=True)
    assert [e.shape for e in empty] == [(0,), (0,)]


@pytest.mark.parametrize("invert", [False, True])
@pytest.mark.parametrize("pair", [(kiln.int32, kiln.int64), (kiln.float32, kiln.float32),
                                  (kiln.float64, kiln.int16), (kiln.bool_, kiln.bool_),
                                  (kiln.uint8, kiln.float32)], ids=str)
def test_isin_is_numpys(pair, invert, rng):
    elements = kiln.tensor(random_array((3, 4), pair[0], rng, -2, 2), dtype=pair[0])
    for count in (0, 1, 5, 17):
        test = kiln.tensor(random_array((count,), pair[1], rng, -2, 2), dtype=pair[1])
        want = np.isin(elements.numpy(), test.numpy(), invert=invert)
        assert_close(extra.isin(elements, test, invert=invert), want)
        assert_close(extra.isin(elements, test.reshape(-1, 1), assume_unique=True,
                                invert=invert), want)


def test_isin_with_numbers_and_special_values():
    x = t([1.5, float("nan"), -0.0, 7.0])
    assert_close(extra.isin(x, t([float("nan"), 0.0, 7.0])), np.array([False, False, True, True]))
    assert_close(extra.isin(x, 1.5), np.array([True, False, False, False]))
    assert_close(extra.isin(x, 1.5, invert=True), np.array([False, True, True, True]))
    assert extra.isin(7, t([1, 7])).item() and not extra.isin(2, t([1, 7])).item()
    assert extra.isin(t(3), t([[3]])).shape == ()
    assert extra.isin(t([1, 2]), t([2.0, 5.0])).tolist() == [False, True]
    # A NaN among the test elements matches nothing and hides no match (it sorts last).
    nan, inf = float("nan"), float("inf")
    assert extra.isin(t([1.0, 2.0, 3.0]), t([1.0, nan])).tolist() == [True, False, False]
    assert extra.isin(t([inf, 2.0, nan]), t([inf, nan])).tolist() == [True, False, False]
    assert extra.isin(t([1.0]), t([nan, 1.0]), invert=True).tolist() == [False]


# ------------------------------------------------------------------------------------------------
# Predicates, dtypes, aliases


def test_predicates():
    x = t(np.zeros((2, 3), np.float32))
    assert extra.is_floating_point(x) and not extra.is_floating_point(t([1]))
    signed = {d: d not in (kiln.bool_, kiln.uint8) for d in ALL}
    for dtype, want in signed.items():
        y = mint.zeros([1], dtype=dtype)
        assert extra.is_signed(y) is want and y.is_signed() is want
    assert extra.is_nonzero(t([[0.5]])) and not t(0).is_nonzero() and t(float("nan")).is_nonzero()
    assert extra.is_same_size(x, x.clone()) and not x.is_same_size(x.T)
    assert extra.numel(x) == 6 and extra.numel(t(1.0)) == 1
    assert extra.t(x).shape == (3, 2) and extra.t(t([1.0, 2.0])).shape == (2,)


def test_result_type_is_what_the_ops_give():
    # Every pair of tensors (0-d ones included: Kiln promotes them as any tensor) and numbers.
    operands = ([mint.zeros([2], dtype=d) for d in ALL] + [mint.zeros([], dtype=d) for d in ALL]
                + [True, 3, 2.5])
    for a, b in itertools.product(operands, repeat=2):
        if isinstance(a, kiln.Tensor) or isinstance(b, kiln.Tensor):
            assert extra.result_type(a, b) == mint.add(a, b).dtype, (a, b)
    assert [extra.result_type(a, b) for a, b in ((2, 3.0), (True, 2), (True, False))] == [
        kiln.float32, kiln.int64, kiln.bool_]
    assert extra.result_type(t([1], kiln.int32), np.int64(1)) == kiln.int64  # NumPy scalars
    assert extra.result_type(t([1], kiln.int32), np.float64(1)) == kiln.float32  # are strong


def test_result_type_and_can_cast_match_torch(torch):
    def twin(value):
        if isinstance(value, kiln.Tensor):
            return torch.zeros(value.shape, dtype=getattr(torch, value.dtype.name))
        return value

    operands = [mint.zeros([2], dtype=d) for d in ALL] + [True, 3, 2.5]
    for a, b in itertools.product(operands, repeat=2):
        want = torch.result_type(twin(a), twin(b))
        assert extra.result_type(a, b).name == str(want).replace("torch.", ""), (a, b)
    for a, b in itertools.product(ALL, repeat=2):
        assert extra.can_cast(a, b) == torch.can_cast(getattr(torch, a.name),
                                                      getattr(torch, b.name)), (a, b)


def test_can_cast_refuses_narrowing_kinds():
    assert extra.can_cast(kiln.float64, kiln.float16) and extra.can_cast(kiln.int64, kiln.uint8)
    assert extra.can_cast(kiln.bool_, kiln.bool_) and extra.can_cast(kiln.bool_, kiln.float32)
    assert not extra.can_cast(kiln.float32, kiln.int64)
    assert not extra.can_cast(kiln.float16, kiln.bool_)
    assert not extra.can_cast(kiln.int8, kiln.bool_)


def test_aliases_are_the_functions_themselves(rng):
    c = kiln._C.mint
    for alias, function in ((extra.divide, mint.div), (extra.multiply, c.mul),
                            (extra.subtract, c.sub), (extra.negative, c.neg),
                            (extra.true_divide, c.div), (extra.greater, c.gt),
                            (extra.greater_equal, c.ge), (extra.less, c.lt),
                            (extra.less_equal, c.le), (extra.not_equal, c.ne),
                            (extra.absolute, c.abs)):
        assert alias is function
    for alias, name in (("divide", "div"), ("divide_", "div_"), ("multiply", "mul"),
                        ("multiply_", "mul_"), ("subtract", "sub"), ("subtract_", "sub_"),
                        ("negative", "neg"), ("negative_", "neg_"), ("true_divide", "div"),
                        ("true_divide_", "div_"), ("greater", "gt"), ("greater_equal", "ge"),
                        ("less", "lt"), ("less_equal", "le"), ("not_equal", "ne"),
                        ("absolute", "abs"), ("absolute_", "abs_")):
        assert getattr(kiln.Tensor, alias) is getattr(kiln.Tensor, name)
    a, b = values((3,), kiln.float32, rng), values((3,), kiln.float32, rng) + 5
    assert_close(extra.divide(t([7, -7]), 2, rounding_mode="floor"), np.array([3, -4]))
    assert_close(a.divide(b, rounding_mode="trunc"), np.trunc(a.numpy() / b.numpy()))
    assert_close(extra.subtract(a, b, alpha=2), a.numpy() - 2 * b.numpy())
    y = a.clone()
    assert extra.negative_(y) is y
    assert_close(y, -a.numpy())
    assert_close(y.absolute_(), np.abs(a.numpy()))
    assert_close(a.greater_equal(b), a.numpy() >= b.numpy())


def test_values_and_gradients_match_torch(torch, rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal(4)
    mask = np.array([True, False, True, True])
    cases = [
        lambda m, x, y: m.block_diag(x, y),
        lambda m, x, y: m.diag_embed(x, 1, 0, 2),
        lambda m, x, y: m.rot90(x, 3, [1, 0]),
        lambda m, x, y: m.combinations(y, 3),
        lambda m, x, y: m.masked_scatter(x, m.tensor(mask), m.cat([y, y, y])),
        lambda m, x, y: m.diagonal_scatter(x, y[:2], -1),
        lambda m, x, y: m.slice_scatter(x, y[:2].reshape(1, 2).expand(3, 2), 1, 1, 4, 2),
        lambda m, x, y: m.select_scatter(x, y, 0, -1),
        lambda m, x, y: m.take(x, m.tensor([[0, 11], [-1, 3]])),
    ]
    for k, build in enumerate(cases):
        x, y = t(a).requires_grad_(), t(b).requires_grad_()
        tx = torch.tensor(a, requires_grad=True)
        ty = torch.tensor(b, requires_grad=True)
        ours, theirs = build(KilnNamespace, x, y), build(torch, tx, ty)
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12,
                                   atol=1e-12, err_msg=f"case {k}")
        upstream = rng.standard_normal(tuple(theirs.shape))
        grads = kiln.autograd.grad(ours, [x, y], t(upstream), allow_unused=True)
        wants = torch.autograd.grad(theirs, [tx, ty], torch.tensor(upstream), allow_unused=True)
        for grad, want in zip(grads, wants):
            if want is None:
                assert grad is None or not np.any(grad.numpy()), f"case {k}"
            else:
                np.testing.assert_allclose(grad.numpy(), want.numpy(), rtol=1e-12, atol=1e-12,
                                           err_msg=f"case {k}")
    # torch.vander's own backward fails (it writes in place into a tensor it saved): values only.
    want = torch.vander(torch.tensor(b), 5).numpy()
    np.testing.assert_allclose(extra.vander(t(b), 5).numpy(), want, rtol=1e-12)
    x = rng.integers(0, 3, size=(5, 4))
    ours = extra.unique_consecutive(t(x), True, True, 0)
    theirs = torch.unique_consecutive(torch.tensor(x), True, True, 0)
    same_list(ours, [w.numpy() for w in theirs])


class KilnNamespace:
    """The functions of the torch comparison, spelled as torch's module spells them."""

    tensor = staticmethod(t)
    cat = staticmethod(mint.cat)
    block_diag = staticmethod(extra.block_diag)
    diag_embed = staticmethod(extra.diag_embed)
    vander = staticmethod(extra.vander)
    rot90 = staticmethod(extra.rot90)
    combinations = staticmethod(extra.combinations)
    masked_scatter = staticmethod(extra.masked_scatter)
    diagonal_scatter = staticmethod(extra.diagonal_scatter)
    slice_scatter = staticmethod(extra.slice_scatter)
    select_scatter = staticmethod(extra.select_scatter)
    take = staticmethod(extra.take)


# ------------------------------------------------------------------------------------------------
# kiln.jit


def test_functions_trace_under_jit(rng):
    def shaped(a, b):
        first, second = extra.hsplit(a, 2)
        return (extra.rot90(a, 1).sum() + extra.diag_embed(b, 1)[:2, 1:].sum()
                + extra.vander(b, 3).sum() + extra.take(a, t([5, -1])).sum()
                + extra.masked_scatter(a, a > 0, b.repeat(3)).sum()
                + extra.isin(a, b).sum() + extra.unravel_index(t([4, -1]), (2, 3))[1].sum()
                + extra.slice_scatter(a, b.reshape(1, 4).narrow(1, 0, 2).expand(3, 2), 1, 0,
                                      None, 2).sum()
                + extra.diagonal_scatter(a, b.narrow(0, 0, 3)).sum() + first.sum()
                - second.sum() + extra.block_diag(a, b).sum()
                + extra.combinations(b, 2).prod(1).sum()
                + extra.broadcast_tensors(a, b)[1].sum() + extra.ravel(a)[0])

    jitted = kiln.jit(shaped)
    for _ in range(2):
        a, b = values((3, 4), kiln.float64, rng), values((4,), kiln.float64, rng)
        assert_close(jitted(a, b), shaped(a, b).numpy())


def test_unique_consecutive_is_eager_only():
    with raises(kiln.KilnTypeError, match="unique_consecutive: the size of its result"):
        kiln.jit(extra.unique_consecutive)(t([1.0, 1.0, 2.0]))


# ------------------------------------------------------------------------------------------------
# Errors

X = t(np.zeros((2, 3), np.float32))
V = t(np.zeros(3, np.float32))
ERRORS = [
    (lambda: extra.broadcast_tensors(X, t(np.zeros(2))), kiln.ShapeError,
     r"broadcast_tensors: shapes \[2, 3\], \[2\] do not broadcast"),
    (lambda: extra.broadcast_tensors(X, [1.0]), kiln.KilnTypeError, "tensor 1 to be a kiln"),
    (lambda: extra.broadcast_to(X, "3"), kiln.KilnTypeError, "size to be a sequence"),
    (lambda: extra.broadcast_to(X, (4, 3)), kiln.ShapeError, r"cannot broadcast shape \[2, 3\]"),
    (lambda: extra.block_diag(X, mint.zeros(1, 1, 1)), kiln.ShapeError,
     r"block_diag: expected tensors of at most 2 dims, got tensor 1 of shape \[1, 1, 1\]"),
    (lambda: extra.combinations(X), kiln.ShapeError, "combinations: expected a 1-d tensor"),
    (lambda: extra.combinations(V, -1), kiln.KilnValueError, "r must be at least 0"),
    (lambda: extra.combinations(V, 2, 1), kiln.KilnTypeError, "with_replacement must be a bool"),
    (lambda: extra.diag_embed(t(1.0)), kiln.KilnIndexError, "diag_embed: dim1 out of range"),
    (lambda: extra.diag_embed(V, 0, 0, -2), kiln.KilnValueError, "different dims"),
    (lambda: extra.diagflat(V, 0.5), kiln.KilnTypeError, "offset must be an int"),
    (lambda: extra.vander(X), kiln.ShapeError, "vander: expected x to be a 1-d tensor"),
    (lambda: extra.vander(V, -1), kiln.KilnValueError, "N must be at least 0"),
    (lambda: extra.scalar_tensor("1"), kiln.KilnTypeError, "s to be a real number"),
    (lambda: extra.rot90(V), kiln.ShapeError, "rot90: expected a tensor of at least 2 dims"),
    (lambda: extra.rot90(X, 1, [0, 0]), kiln.KilnValueError, "two different dims"),
    (lambda: extra.rot90(X, 1, [0]), kiln.KilnValueError, "dims to be a pair"),
    (lambda: extra.rot90(X, 1, [0, 2]), kiln.KilnIndexError, "rot90: dims out of range"),
    (lambda: extra.rot90(X, 1.0), kiln.KilnTypeError, "k must be an int"),
    (lambda: extra.ravel([1.0]), kiln.KilnTypeError, "ravel: expected input"),
    (lambda: extra.select(X, 1, 3), kiln.KilnIndexError, r"index 3 out of range .* \[-3, 2\]"),
    (lambda: extra.select(t(1.0), 0, 0), kiln.KilnIndexError, "0-d tensor has no dimension"),
    (lambda: extra.take(X, t([0.0])), kiln.DTypeError, "take: expected int64 or int32 index"),
    (lambda: extra.take(X, t([6])), kiln.KilnIndexError,
     r"take: index 6 is out of bounds for an input of 6 elements: expected indices in \[-6, 5\]"),
    (lambda: extra.take(X, t([[0], [-7]], kiln.int32)), kiln.KilnIndexError,
     r"take: index -7 is out of bounds for an input of 6 elements"),
    (lambda: extra.take(t(np.zeros((2, 0))), t([0])), kiln.KilnIndexError,
     "take: index 0 is out of bounds for an input of 0 elements: expected no index, as it has "
     "no elements"),
    (lambda: extra.unravel_index(t([6]), (2, 3)), kiln.KilnIndexError,
     r"expected indices in \[-6, 5\]"),
    (lambda: extra.unravel_index(t([-7]), (2, 3)), kiln.KilnIndexError, "got some outside"),
    (lambda: extra.unravel_index(t([1.0]), (2, 3)), kiln.DTypeError, "integer tensor of indices"),
    (lambda: extra.unravel_index(t([1]), (2, -3)), kiln.KilnValueError, "at least 0"),
    (lambda: extra.unravel_index(t([1]), "23"), kiln.KilnTypeError, "an int or a sequence"),
    (lambda: extra.hsplit(t(np.zeros(5)), 2), kiln.ShapeError,
     "hsplit: dim 0 of size 5 does not split into 2 equal sections"),
    (lambda: extra.hsplit(t(1.0), 1), kiln.ShapeError, "at least 1 dims"),
    (lambda: extra.vsplit(V, 1), kiln.ShapeError, "vsplit: expected a tensor of at least 2"),
    (lambda: extra.dsplit(X, 1), kiln.ShapeError, "dsplit: expected a tensor of at least 3"),
    (lambda: extra.hsplit(X, 0), kiln.KilnValueError, "sections must be at least 1"),
    (lambda: extra.index_copy(X, 1, t([0]), t(np.zeros((2, 1)))), kiln.DTypeError,
     "index_copy: expected source of the input's dtype float32, got float64"),
    (lambda: extra.index_copy(X, 1, t([0]), mint.zeros(2, 2)), kiln.ShapeError,
     r"expected source of shape \[2, 1\]"),
    (lambda: extra.index_copy(X, 1, t([0.0]), mint.zeros(2, 1)), kiln.DTypeError,
     "index_copy: expected an int64 index, as PyTorch's, got float64"),
    (lambda: extra.index_copy(X, 1, t([0], kiln.int32), mint.zeros(2, 1)), kiln.DTypeError,
     "index_copy: expected an int64 index, as PyTorch's, got int32"),
    (lambda: extra.index_copy(X, 1, t([-1]), mint.zeros(2, 1)), kiln.KilnIndexError,
     r"index_copy: index -1 is out of bounds for dimension 1 with size 3: expected indices in "
     r"\[0, 2\]"),
    (lambda: extra.index_copy(X, 2, t([0]), mint.zeros(2, 1)), kiln.KilnIndexError,
     "dim out of range"),
    (lambda: extra.index_copy(X, 1, t([3]), mint.zeros(2, 1)), kiln.KilnIndexError,
     "index_copy: index 3 is out of bounds for dimension 1 with size 3"),
    (lambda: extra.select_scatter(X, V, 1, 0), kiln.ShapeError,
     r"select_scatter: expected src of shape \[2\]"),
    (lambda: extra.select_scatter(X, V, 0, 2), kiln.KilnIndexError,
     "select_scatter: index 2 out of range"),
    (lambda: extra.slice_scatter(t(1.0), t(1.0)), kiln.KilnIndexError, "0-d tensor has no dim"),
    (lambda: extra.slice_scatter(X, X, 1, 0, 3, 0), kiln.KilnValueError,
     "step must be at least 1"),
    (lambda: extra.slice_scatter(X, X, 1, 1), kiln.ShapeError,
     r"slice_scatter: expected src of shape \[2, 2\]"),
    (lambda: extra.slice_scatter(X, X, 1, 0.5), kiln.KilnTypeError, "start must be an int"),
    (lambda: extra.diagonal_scatter(X, V), kiln.ShapeError,
     r"diagonal_scatter: expected src of shape \[2\]"),
    (lambda: extra.diagonal_scatter(X, V, 0, 1, 1), kiln.KilnValueError, "different dims"),
    (lambda: extra.masked_scatter(X, t([1, 0, 1]), V), kiln.DTypeError, "a bool mask"),
    (lambda: extra.masked_scatter(X, t([True, False, True]), t([1, 2, 3, 4])), kiln.DTypeError,
     "source of the input's dtype float32, got int64"),
    (lambda: extra.masked_scatter(X, t([True, False]), V), kiln.ShapeError,
     "masked_scatter: shapes"),
    (lambda: extra.masked_scatter(X, t([True, False, True]), V), kiln.KilnValueError,
     "the mask has 4 true elements but source only 3"),
    (lambda: X.masked_scatter_(t([[[True, False, True]]]), t(np.zeros(9, np.float32))),
     kiln.ShapeError, "masked_scatter_"),
    (lambda: extra.unique_consecutive(X, 1), kiln.KilnTypeError, "return_inverse must be a bool"),
    (lambda: extra.unique_consecutive(X, dim=2), kiln.KilnIndexError, "dim out of range"),
    (lambda: extra.isin(1, [1]), kiln.KilnTypeError, "elements or test_elements to be a kiln"),
    (lambda: extra.isin(X, V, invert=1), kiln.KilnTypeError, "invert must be a bool"),
    (lambda: extra.isin(X, [1.0]), kiln.KilnTypeError,
     "isin: expected test_elements to be a kiln.Tensor or a real number, got list"),
    (lambda: extra.is_nonzero(t(np.zeros(0))), kiln.KilnValueError,
     r"one element, got shape \[0\]"),
    (lambda: extra.is_signed(np.zeros(2)), kiln.KilnTypeError, "is_signed: expected input"),
    (lambda: extra.is_same_size(X, 1), kiln.KilnTypeError, "other to be a kiln"),
    (lambda: extra.t(mint.zeros(1, 1, 1)), kiln.KilnValueError, "at most 2 dims"),
    (lambda: extra.result_type(X, "a"), kiln.KilnTypeError, "tensor2 to be a kiln.Tensor or a"),
    (lambda: extra.result_type(X, 1j), kiln.KilnTypeError, "real number"),
    (lambda: extra.can_cast("float32", kiln.int32), kiln.KilnTypeError, "from_ to be a kiln"),
]


@pytest.mark.parametrize("call, error, match", ERRORS)
def test_bad_arguments_are_typed_errors(call, error, match):
    with raises(error, match=match):
        call()
