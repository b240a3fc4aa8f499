"""PyTorch's shape functions composed in kiln/mint/_shape_ops.py (clone with memory_format, flip,
fliplr, flipud, unbind, narrow, atleast_1d/2d/3d, hstack, vstack, dstack, column_stack,
tensor_split, swapaxes, swapdims, unflatten), empty_like (kiln/mint/_indexing_ops.py) and the
Tensor methods nelement and ndimension: values against NumPy over dtypes, views and copies,
gradients, kiln.jit against eager, and the argument errors."""

import numpy as np
import pytest

import kiln
from conftest import assert_close, random_array, raises, t
from kiln.testing import gradcheck

mint = kiln.mint
DTYPES = [kiln.float32, kiln.float64, kiln.int32, kiln.int64, kiln.bool_]


def values(shape, dtype, rng):
    return kiln.tensor(random_array(shape, dtype, rng), dtype=dtype)


def leaf(rng, *shape):
    return kiln.tensor(rng.standard_normal(shape)).requires_grad_()


def same_list(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_close(g, w)


# ------------------------------------------------------------------------------------------------
# clone, flips, empty_like


@pytest.mark.parametrize("memory_format", [mint.preserve_format, mint.contiguous_format])
def test_clone_copies_in_either_memory_format(memory_format, rng):
    x = values((3, 4), kiln.float32, rng).T
    for copy in (mint.clone(x, memory_format=memory_format), x.clone(memory_format=memory_format),
                 mint.clone(x), x.clone()):
        assert not copy.shares_storage_with(x) and copy.is_contiguous()
        assert_close(copy, x.numpy())
    y = leaf(rng, 2, 3)
    (mint.clone(y, memory_format=memory_format) * 3).sum().backward()
    assert_close(y.grad, np.full((2, 3), 3.0))
    assert repr(memory_format).startswith("kiln.mint.")


@pytest.mark.parametrize("dtype", DTYPES)
def test_flips_are_numpys_copies(dtype, rng):
    x = values((2, 3, 4), dtype, rng)
    for got, want in ((mint.flip(x, [0, 2]), np.flip(x.numpy(), (0, 2))),
                      (mint.flip(x, -1), np.flip(x.numpy(), -1)),
                      (mint.fliplr(x), np.fliplr(x.numpy())), (x.fliplr(), np.fliplr(x.numpy())),
                      (mint.flipud(x), np.flipud(x.numpy())), (x.flipud(), np.flipud(x.numpy()))):
        assert_close(got, want)
        assert not got.shares_storage_with(x)
    vector = values((5,), dtype, rng)
    assert_close(mint.flipud(vector), vector.numpy()[::-1])


def test_flip_gradient(rng):
    gradcheck(lambda x: mint.fliplr(x) * mint.flipud(x), (leaf(rng, 3, 3),))


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.int32, kiln.bool_])
def test_empty_like_has_the_shape_and_dtype(dtype, rng):
    x = values((2, 3), dtype, rng)
    out = mint.empty_like(x)
    assert out.shape == (2, 3) and out.dtype == dtype and not out.shares_storage_with(x)
    other = mint.empty_like(x, dtype=kiln.float64, requires_grad=True)
    assert other.dtype == kiln.float64 and other.requires_grad and other.shape == (2, 3)


# ------------------------------------------------------------------------------------------------
# unbind, narrow, swapaxes, unflatten, nelement, ndimension


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_unbind_and_narrow_are_views(dim, rng):
    x = values((2, 3, 4), kiln.float64, rng)
    pieces = mint.unbind(x, dim)
    same_list(pieces, [np.take(x.numpy(), i, axis=dim) for i in range(x.shape[dim])])
    assert all(p.shares_storage_with(x) for p in pieces)
    got = mint.narrow(x, dim, 1, 1)
    assert got.shares_storage_with(x)
    assert_close(got, np.take(x.numpy(), [1], axis=dim))
    assert_close(mint.narrow(x, dim, -2, 2), np.take(x.numpy(), [-2, -1], axis=dim))
    assert_close(mint.narrow(x, dim, t(1), 1), np.take(x.numpy(), [1], axis=dim))


@pytest.mark.parametrize("dtype", DTYPES)
def test_swapaxes_and_unflatten_are_numpys(dtype, rng):
    x = values((2, 3, 4), dtype, rng)
    for got in (mint.swapaxes(x, 0, -1), mint.swapdims(x, 0, 2), x.swapaxes(0, 2),
                x.swapdims(-1, 0)):
        assert got.shares_storage_with(x)
        assert_close(got, np.swapaxes(x.numpy(), 0, 2))
    y = values((2, 12), dtype, rng)
    for sizes in ((3, 4), [2, -1, 3], (-1,), (12, 1)):
        want = y.numpy().reshape([2] + [s if s != -1 else 12 // int(np.prod(
            [v for v in sizes if v != -1])) for s in sizes])
        assert_close(mint.unflatten(y, 1, sizes), want)
        assert_close(y.unflatten(-1, sizes), want)


def test_nelement_and_ndimension():
    x = mint.zeros([2, 3, 4])
    assert x.nelement() == 24 and x.ndimension() == 3
    assert t(1.0).nelement() == 1 and t(1.0).ndimension() == 0


# ------------------------------------------------------------------------------------------------
# tensor_split


@pytest.mark.parametrize("split", [1, 3, 4, 9, [2, 5], [-2, 4], [4, 2, 9], [0], []], ids=str)
@pytest.mark.parametrize("dim", [0, 1])
def test_tensor_split_is_array_split(split, dim, rng):
    x = values((7, 7), kiln.float32, rng)
    want = np.array_split(x.numpy(), split, axis=dim)
    for got in (mint.tensor_split(x, split, dim), x.tensor_split(split, dim=dim)):
        same_list(got, want)
        assert all(piece.shares_storage_with(x) for piece in got if piece.numel())


def test_tensor_split_takes_tensors_and_keywords(rng):
    x = values((6, 2), kiln.int64, rng)
    same_list(mint.tensor_split(x, t([1, 3])), np.array_split(x.numpy(), [1, 3]))
    same_list(mint.tensor_split(x, t(4)), np.array_split(x.numpy(), 4))
    same_list(mint.tensor_split(x, sections=2, dim=1), np.array_split(x.numpy(), 2, axis=1))
    same_list(mint.tensor_split(x, indices=[5]), np.array_split(x.numpy(), [5]))


def test_tensor_split_gradient(rng):
    gradcheck(lambda x: mint.cat([p * (k + 1) for k, p in
                                  enumerate(mint.tensor_split(x, 3, 1))], 1), (leaf(rng, 2, 5),))


# ------------------------------------------------------------------------------------------------
# atleast_nd and stacks


def test_atleast_is_numpys(rng):
    shapes = [(), (3,), (2, 3), (2, 3, 4)]
    for shape in shapes:
        x = values(shape, kiln.float32, rng)
        for ours, theirs in ((mint.atleast_1d, np.atleast_1d), (mint.atleast_2d, np.atleast_2d),
                             (mint.atleast_3d, np.atleast_3d)):
            assert_close(ours(x), theirs(x.numpy()))
    pair = mint.atleast_2d(t(1.0), t([1.0, 2.0]))
    assert isinstance(pair, tuple) and [p.shape for p in pair] == [(1, 1), (1, 2)]
    assert [p.shape for p in mint.atleast_3d([t([1.0])])] == [(1, 1, 1)]


STACKS = [("hstack", np.hstack), ("vstack", np.vstack), ("dstack", np.dstack),
          ("column_stack", np.column_stack)]


@pytest.mark.parametrize("name, reference", STACKS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_stacks_are_numpys(name, reference, dtype, rng):
    cases = {"hstack": [[(2, 3), (2, 1)], [(3,), (2,)], [(), ()]],
             "vstack": [[(3,), (2, 3)], [(), ()], [(2, 2, 1), (1, 2, 1)]],
             "dstack": [[(3,), (3,)], [(2, 3), (2, 3, 2)]],
             "column_stack": [[(3,), (3, 2), (3,)], [(), ()]]}[name]
    for shapes in cases:
        tensors = [values(s, dtype, rng) for s in shapes]
        assert_close(getattr(mint, name)(tensors), reference([x.numpy() for x in tensors]))


def test_stacks_promote_and_differentiate(rng):
    got = mint.hstack([t([1]), t([2.5], kiln.float32)])
    assert got.dtype == kiln.float32 and got.tolist() == [1.0, 2.5]
    a, b = leaf(rng, 3), leaf(rng, 3, 2)
    gradcheck(lambda a, b: mint.column_stack([a, b]) * mint.vstack([a, b.T]).T, (a, b))
    gradcheck(lambda a: mint.dstack([a, a * 2]), (a,))


# ------------------------------------------------------------------------------------------------
# kiln.jit


def test_shape_functions_trace_under_jit(rng):
    def shaped(x):
        left, right = mint.tensor_split(x, 2, 1)
        return (mint.hstack([left, right]) + mint.fliplr(x) + mint.flipud(x) + mint.clone(x)
                + mint.swapaxes(mint.unflatten(x.flatten(), 0, (4, -1)), 0, 1).reshape(x.shape)
                + mint.narrow(x, 1, 0, 4) + mint.column_stack([x]) + mint.dstack([x])[..., 0]
                + mint.vstack(mint.unbind(x, 0)))

    jitted = kiln.jit(shaped)
    for _ in range(2):
        x = values((3, 4), kiln.float32, rng)
        assert_close(jitted(x), shaped(x).numpy())


# ------------------------------------------------------------------------------------------------
# Errors

X = t(np.zeros((2, 3)))
ERRORS = [
    (lambda: mint.clone(X, memory_format="channels_last"), kiln.KilnValueError,
     "expected memory_format kiln.mint.preserve_format or kiln.mint.contiguous_format"),
    (lambda: X.clone(memory_format=None), kiln.KilnValueError, "memory_format"),
    (lambda: mint.clone([1.0]), kiln.KilnTypeError, "clone: expected input to be a kiln"),
    (lambda: mint.fliplr(t([1.0])), kiln.ShapeError, "fliplr: expected a tensor of at least 2"),
    (lambda: mint.flipud(t(1.0)), kiln.ShapeError, "flipud: expected a tensor of at least 1"),
    (lambda: mint.flip(X, [0, 0]), kiln.KilnValueError, "more than once"),
    (lambda: mint.flip(X, 2), kiln.KilnIndexError, "dim out of range"),
    (lambda: mint.unbind(t(1.0)), kiln.KilnIndexError, "0-d tensor has no dimension"),
    (lambda: mint.unbind(X, 2), kiln.KilnIndexError, "unbind: dim out of range"),
    (lambda: mint.unbind(X, "0"), kiln.KilnTypeError, "dim must be an int"),
    (lambda: mint.narrow(X, 1, 2, 2), kiln.KilnIndexError, "out of bounds"),
    (lambda: mint.narrow(X, 1, 0, -1), kiln.KilnValueError, "length must be at least 0"),
    (lambda: mint.narrow(X, 1, 0.5, 1), kiln.KilnTypeError, "start must be an int"),
    (lambda: mint.narrow(t(1.0), 0, 0, 1), kiln.ShapeError, "0-d tensor"),
    (lambda: mint.swapaxes(X, 0, 2), kiln.KilnIndexError, "swapaxes: axis1 out of range"),
    (lambda: mint.swapdims(X, None, 1), kiln.KilnTypeError, "dim0 must be an int"),
    (lambda: mint.unflatten(X, 1, (2, -1)), kiln.ShapeError, "cannot make dim 1 of size 3"),
    (lambda: mint.unflatten(X, 1, (2, 2)), kiln.ShapeError, "multiply to 4, not to the size 3"),
    (lambda: mint.unflatten(X, 1, ()), kiln.KilnValueError, "sizes to be non-empty"),
    (lambda: mint.unflatten(X, 1, (-1, -1)), kiln.KilnValueError, "only one size may be -1"),
    (lambda: mint.unflatten(X, 1, 3), kiln.KilnTypeError, "sizes to be a sequence"),
    (lambda: mint.unflatten(X, 2, (3,)), kiln.KilnIndexError, "dim out of range"),
    (lambda: mint.tensor_split(X, 0), kiln.KilnValueError, "sections must be at least 1"),
    (lambda: mint.tensor_split(X, 2.0), kiln.KilnTypeError, "an int .sections. or a sequence"),
    (lambda: mint.tensor_split(X, [1.5]), kiln.KilnTypeError, "each index must be an int"),
    (lambda: mint.tensor_split(X, t([1.0])), kiln.DTypeError, "integer tensor"),
    (lambda: mint.tensor_split(X, t([[1]])), kiln.ShapeError, "0-d tensor .sections."),
    (lambda: mint.tensor_split(t(1.0), 1), kiln.ShapeError, "at least 1 dim"),
    (lambda: mint.tensor_split(X, 2, 2), kiln.KilnIndexError, "dim out of range"),
    (lambda: mint.tensor_split(X, 2, sections=2), kiln.KilnTypeError, "exactly one of"),
    (lambda: mint.hstack([]), kiln.KilnValueError, "hstack: expected at least one tensor"),
    (lambda: mint.hstack(X), kiln.KilnTypeError, "hstack: expected a sequence of kiln"),
    (lambda: mint.vstack([X, [1.0]]), kiln.KilnTypeError, "tensor 1 to be a kiln.Tensor"),
    (lambda: mint.vstack([X, t(np.zeros((2, 2)))]), kiln.ShapeError,
     r"vstack: tensor 1 has shape \[2, 2\]"),
    (lambda: mint.column_stack([t(np.zeros(2)), t(np.zeros(3))]), kiln.ShapeError,
     "column_stack: tensor 1"),
    (lambda: mint.atleast_1d(1.0), kiln.KilnTypeError, "atleast_1d: expected tensor 0"),
    (lambda: mint.empty_like((2, 3)), kiln.KilnTypeError, "empty_like: expected input"),
]


@pytest.mark.parametrize("call, error, match", ERRORS)
def test_bad_arguments_are_typed_errors(call, error, match):
    with raises(error, match=match):
        call()
