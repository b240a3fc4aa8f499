"""scatter_reduce (kiln/mint/_scatter_reduce.py) and take_along_dim (kiln/mint/_indexing_ops.py)
and their Tensor methods: values against a NumPy reference (ufunc.at) over dtypes, reductions,
include_self, NaN and index shapes smaller than src, gradients by finite differences and in
closed form where values tie, kiln.jit against eager, PyTorch where it is installed, and the
argument errors."""

import numpy as np
import pytest

import kiln
from conftest import FLOAT_DTYPES, assert_close, random_array, raises, t
from kiln.testing import gradcheck

mint = kiln.mint
REDUCES = ["sum", "prod", "mean", "amax", "amin"]
NUMERIC = [kiln.float32, kiln.float64, kiln.int32, kiln.int64]
_UFUNCS = {"sum": np.add, "prod": np.multiply, "mean": np.add, "amax": np.fmax,
           "amin": np.fmin}


def values(shape, dtype, rng, low=-3.0, high=3.0):
    return kiln.tensor(random_array(shape, dtype, rng, low, high), dtype=dtype)


def scatter_reduce_reference(x, dim, index, src, reduce, include_self):
    """PyTorch's scatter_reduce in NumPy: the targets of each index position, then ufunc.at."""
    x = x.astype(np.float64)
    src = src[tuple(slice(0, n) for n in index.shape)].astype(np.float64)
    targets = list(np.indices(index.shape))
    targets[dim] = index
    targets = tuple(targets)
    touched = np.zeros(x.shape, bool)
    touched[targets] = True
    out = x.copy()
    if not include_self:
        out[touched] = {"sum": 0, "prod": 1, "mean": 0, "amax": -np.inf, "amin": np.inf}[reduce]
    _UFUNCS[reduce].at(out, targets, src)
    nan = np.zeros(x.shape, bool)
    np.logical_or.at(nan, targets, np.isnan(src))
    if reduce in ("amax", "amin"):
        out = np.where(nan | (include_self & np.isnan(x)), np.nan, out)
    if reduce == "mean":
        count = np.full(x.shape, 1.0 if include_self else 0.0)
        np.add.at(count, targets, 1.0)
        return out, np.maximum(count, 1.0)
    return out, None


def expected(x, dim, index, src, reduce, include_self):
    out, count = scatter_reduce_reference(x.numpy(), dim % x.ndim, index, src.numpy(), reduce,
                                          include_self)
    if count is not None:
        out = out / count if x.dtype.is_floating_point else np.floor(out / count)
    return out


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [kiln.int32, kiln.int64])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_reduce_is_the_reference(reduce, include_self, dtype, dim, rng):
    x = values((4, 5), dtype, rng)
    src = values((6, 6), dtype, rng, -2.0, 2.0)
    index_shape = [3, 4]
    index_shape[dim] = 6  # more positions than targets: repeated targets
    index = rng.integers(0, x.shape[dim], index_shape)
    want = expected(x, dim, index, src, reduce, include_self)
    for got in (mint.scatter_reduce(x, dim, t(index), src, reduce, include_self=include_self),
                x.scatter_reduce(dim, t(index), src, reduce, include_self=include_self)):
        assert got.dtype == dtype and got.shape == x.shape
        assert_close(got, want.astype(got.numpy().dtype) if dtype in (kiln.int32, kiln.int64)
                     else want, dtype)


@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_of_bools(reduce, include_self, rng):
    x, src = values((6,), kiln.bool_, rng), values((9,), kiln.bool_, rng)
    index = rng.integers(0, 6, 9)
    want = expected(x, 0, index, src, reduce, include_self) != 0
    got = mint.scatter_reduce(x, 0, t(index), src, reduce, include_self=include_self)
    assert got.dtype == kiln.bool_
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_scatter_reduce_extremes_propagate_nan(reduce):
    x = t([10.0, 20.0, np.nan])
    got = mint.scatter_reduce(x, 0, t([0, 0, 2]), t([np.nan, 1.0, 5.0]), reduce)
    np.testing.assert_array_equal(got.numpy(), [np.nan, 20.0, np.nan])


def test_scatter_reduce_negative_indices_0_d_and_empty():
    x = t([1.0, 2.0, 3.0])
    assert mint.scatter_reduce(x, 0, t([-1, 0]), t([5.0, 4.0]), "sum").tolist() == [5.0, 2.0, 8.0]
    scalar = mint.scatter_reduce(t(2.0), 0, t(0), t(5.0), "prod")
    assert scalar.shape == () and scalar.item() == 10.0
    empty = mint.scatter_reduce(x, 0, t(np.zeros(0, np.int64)), t(np.zeros(0)), "amax")
    assert empty.tolist() == [1.0, 2.0, 3.0] and not empty.shares_storage_with(x)
    # Nothing scattered: src still gets a gradient, of zeros (PyTorch's), and -0.0 stays.
    src = t([5.0]).requires_grad_()
    kept = mint.scatter_reduce(t([-0.0, 1.0]), 0, t(np.zeros(0, np.int64)), src, "amax")
    assert np.signbit(kept.numpy()[0]) and kept.requires_grad
    assert kiln.autograd.grad(kept.sum(), src)[0].tolist() == [0.0]
    y = x.clone()
    assert y.scatter_reduce_(0, t([1, 1]), t([5.0, 7.0]), "amax", include_self=False) is y
    assert y.tolist() == [1.0, 7.0, 3.0]


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_gradient_matches_finite_differences(reduce, include_self, rng):
    index = t(rng.integers(0, 4, (3, 5)))
    x = kiln.tensor(rng.standard_normal((4, 5))).requires_grad_()
    src = kiln.tensor(rng.standard_normal((3, 5))).requires_grad_()
    gradcheck(lambda x, s: mint.scatter_reduce(x, 0, index, s, reduce,
                                               include_self=include_self), (x, src))


def test_scatter_reduce_extremes_share_the_gradient_among_ties():
    x = t([1.0, 5.0, 7.0]).requires_grad_()
    src = t([5.0, 5.0, 2.0]).requires_grad_()
    out = mint.scatter_reduce(x, 0, t([1, 1, 0]), src, "amax")
    assert out.tolist() == [2.0, 5.0, 7.0]
    out.sum().backward()
    assert_close(x.grad, [0.0, 1 / 3, 1.0])
    assert_close(src.grad, [1 / 3, 1 / 3, 1.0])


def test_scatter_reduce_prod_gradient_with_zeros():
    x = t([1.0, 5.0]).requires_grad_()
    src = t([5.0, 0.0, 2.0]).requires_grad_()
    mint.scatter_reduce(x, 0, t([1, 1, 0]), src, "prod").sum().backward()
    assert x.grad.tolist() == [2.0, 0.0] and src.grad.tolist() == [0.0, 25.0, 1.0]


# ------------------------------------------------------------------------------------------------
# take_along_dim


@pytest.mark.parametrize("dtype", NUMERIC + [kiln.bool_])
@pytest.mark.parametrize("shapes, dim", [(((3, 4), (3, 2)), 1), (((3, 4), (5, 4)), 0),
                                         (((1, 4), (3, 2)), 1), (((3, 4), (1, 6)), 1),
                                         (((2, 3, 4), (2, 1, 5)), -1)], ids=str)
def test_take_along_dim_is_take_along_axis(dtype, shapes, dim, rng):
    x = values(shapes[0], dtype, rng)
    index = rng.integers(0, shapes[0][dim], shapes[1])
    want = np.take_along_axis(x.numpy(), index, axis=dim)
    for got in (mint.take_along_dim(x, t(index), dim), x.take_along_dim(t(index), dim=dim)):
        assert_close(got, want)


def test_take_along_dim_without_dim_reads_the_flattened_input(rng):
    x = values((3, 4), kiln.float32, rng)
    index = rng.integers(0, 12, (2, 3))
    assert_close(mint.take_along_dim(x, t(index)), x.numpy().reshape(-1)[index.reshape(-1)])
    order = mint.argsort(x, 1)
    assert_close(mint.take_along_dim(x, order, 1), np.sort(x.numpy(), 1))


def test_take_along_dim_gradient(rng):
    index = t(rng.integers(0, 4, (3, 5)))
    gradcheck(lambda x: mint.take_along_dim(x, index, 1), (kiln.tensor(
        rng.standard_normal((1, 4))).requires_grad_(),))


# ------------------------------------------------------------------------------------------------
# kiln.jit and PyTorch


def test_indexing_functions_trace_under_jit(rng):
    index = t(rng.integers(0, 4, (3, 4)))

    def indexed(x, s):
        return (mint.take_along_dim(x, index, 1).sum()
                + mint.scatter_reduce(x, 1, index, s, "amax").sum()
                + mint.scatter_reduce(x, 1, index, s, "prod", include_self=False).sum()
                + mint.scatter_reduce(x, 1, index, s, "mean").sum()
                + mint.scatter_reduce(x, 1, index, s, "amin", include_self=False).sum())

    jitted = kiln.jit(indexed)
    for _ in range(2):
        x, s = values((3, 4), kiln.float32, rng), values((3, 4), kiln.float32, rng)
        assert_close(jitted(x, s), indexed(x, s).numpy())
    grad = kiln.grad(lambda x, s: (mint.scatter_reduce(x, 1, index, s, "amax") * x).sum(),
                     grad_position=(0, 1))
    for got, want in zip(kiln.jit(grad)(x, s), grad(x, s)):
        assert_close(got, want.numpy())


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("include_self", [True, False])
def test_matches_torch(torch, reduce, include_self, rng):
    x, src = rng.standard_normal((4, 5)), rng.standard_normal((6, 5))
    index = rng.integers(0, 4, (6, 5))
    kx, ks = t(x).requires_grad_(), t(src).requires_grad_()
    tx = torch.tensor(x, requires_grad=True)
    ts = torch.tensor(src, requires_grad=True)
    got = mint.scatter_reduce(kx, 0, t(index), ks, reduce, include_self=include_self)
    want = torch.scatter_reduce(tx, 0, torch.tensor(index), ts, reduce, include_self=include_self)
    assert_close(got, want.detach().numpy())
    weight = rng.standard_normal((4, 5))
    (got * t(weight)).sum().backward()
    (want * torch.tensor(weight)).sum().backward()
    assert_close(kx.grad, tx.grad.numpy())
    assert_close(ks.grad, ts.grad.numpy())


# ------------------------------------------------------------------------------------------------
# Errors

X = t(np.zeros((2, 3)))
I = t([[0, 1, 0]])
ERRORS = [
    (lambda: mint.scatter_reduce(X, 0, I, X, "max"), kiln.KilnValueError,
     "reduce to be one of .'sum', 'prod', 'mean', 'amax', 'amin'., got 'max'"),
    (lambda: mint.scatter_reduce(X, 0, I.float(), X, "sum"), kiln.DTypeError,
     "int64 or int32 index, got float32"),
    (lambda: mint.scatter_reduce(X, 0, I, X.float(), "sum"), kiln.DTypeError,
     "src of the input's dtype float64, got float32"),
    (lambda: mint.scatter_reduce(X, 0, I[0], X, "sum"), kiln.ShapeError, "same number of dims"),
    (lambda: mint.scatter_reduce(X, 0, t([[0, 1, 0, 1]]), X, "sum"), kiln.ShapeError,
     "no larger than src"),
    (lambda: mint.scatter_reduce(X, 2, I, X, "sum"), kiln.KilnIndexError, "dim out of range"),
    (lambda: mint.scatter_reduce(X, 0, I, 1.0, "sum"), kiln.KilnTypeError,
     "src to be a kiln.Tensor"),
    (lambda: mint.scatter_reduce(X, 0, I, X, "sum", include_self=1), kiln.KilnTypeError,
     "include_self must be a bool"),
    (lambda: mint.scatter_reduce(t([True]), 0, t([0]), t([True]), "mean"), kiln.DTypeError,
     "'mean' needs a numeric tensor"),
    (lambda: mint.scatter_reduce(X, 0, t([[5, 0, 0]]), X, "amax"), kiln.KilnIndexError,
     "out of bounds"),
    (lambda: mint.take_along_dim(X, I.float(), 1), kiln.DTypeError, "int64 or int32 indices"),
    (lambda: mint.take_along_dim(X, t([0]), 1), kiln.ShapeError, "same number of dims"),
    (lambda: mint.take_along_dim(X, t(np.zeros((3, 1), np.int64)), 1), kiln.ShapeError,
     "do not broadcast in dim 0"),
    (lambda: mint.take_along_dim(X, I, 2), kiln.KilnIndexError, "dim out of range"),
    (lambda: mint.take_along_dim(X, [[0]], 1), kiln.KilnTypeError, "indices to be a kiln"),
]


@pytest.mark.parametrize("call, error, match", ERRORS)
def test_bad_arguments_are_typed_errors(call, error, match):
    with raises(error, match=match):
        call()
