"""PyTorch's product and shape functions composed in python/kiln/mint/_products.py (einsum, outer,
ger, dot, diag, diagonal, tile, roll, repeat_interleave, movedim, moveaxis, meshgrid,
cartesian_prod, tril_indices, triu_indices) and their Tensor methods: values against NumPy over
dtypes, 0-d and empty edge cases, gradients by finite differences, einsum under kiln.jit, and
every argument error."""

import numpy as np
import pytest

import kiln
from conftest import TOLERANCES, assert_close, random_array, raises, t
from kiln.mint import _products as products
from kiln.testing import gradcheck

NUMERIC = [kiln.float32, kiln.float64, kiln.int32, kiln.int64]
ALL = NUMERIC + [kiln.bool_, kiln.int8, kiln.float16, kiln.bfloat16]


def tensor(shape, dtype, rng):
    return kiln.tensor(random_array(shape, dtype, rng), dtype=dtype)


def leaf(shape, rng):
    """A float64 tensor that requires grad, small enough for gradcheck."""
    return kiln.tensor(rng.standard_normal(shape)).requires_grad_()


def same(actual, expected):
    """Values (and shape) of ``actual`` against NumPy's, at the dtype's tolerance (integer
    results compared exactly, whatever integer dtype each side has)."""
    got = actual.numpy()
    want = np.asarray(expected)
    assert got.shape == want.shape, f"shape {got.shape} != expected {want.shape}"
    if actual.dtype in TOLERANCES:
        rtol, atol = TOLERANCES[actual.dtype]
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                                   atol=atol)
    else:
        np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------------------------------------
# einsum

EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk", [(5, 1, 2, 3), (4, 3, 2)]),
    ("...,...->...", [(2, 1), (3,)]),
    ("ii", [(3, 3)]),
    ("ii->i", [(3, 3)]),
    ("iij->j", [(3, 3, 2)]),
    ("iji->j", [(3, 2, 3)]),
    ("iijj->", [(2, 2, 3, 3)]),
    ("ij->ji", [(3, 4)]),
    ("ba", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("i,i->", [(5,), (5,)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("ijk,ikj->", [(2, 3, 3), (2, 3, 3)]),
    ("ij,kj,lj->ikl", [(3, 4), (2, 4), (5, 4)]),
    ("ab,bc,ca->", [(3, 4), (4, 2), (2, 3)]),
    ("Ab,bA", [(2, 3), (3, 2)]),
    (",->", [(), ()]),
    ("ij,jk->ik", [(3, 0), (0, 2)]),
    ("bi,bj->bij", [(0, 3), (0, 2)]),
]


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("equation, shapes", EINSUM_CASES, ids=[c[0] for c in EINSUM_CASES])
def test_einsum_matches_numpy(equation, shapes, dtype, rng):
    arrays = [random_array(s, dtype, rng) for s in shapes]
    got = products.einsum(equation, *[kiln.tensor(a, dtype=dtype) for a in arrays])
    same(got, np.einsum(equation, *[a.astype(np.float64) for a in arrays]))


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16])
def test_einsum_of_16_bit_floats_keeps_the_dtype(dtype, rng):
    a, b = tensor((3, 4), dtype, rng), tensor((4, 2), dtype, rng)
    got = products.einsum("ij,jk->ik", a, b)
    assert got.dtype == dtype
    assert_close(got, a.numpy().astype(np.float64) @ b.numpy().astype(np.float64))


def test_einsum_integer_dtypes_follow_pytorch(rng):
    a = tensor((2, 3), kiln.int32, rng)
    # A product keeps int32; a sum within one operand widens to int64, as PyTorch's einsum.
    assert products.einsum("ij,ij->", a, a).dtype == kiln.int32
    assert products.einsum("ij->i", a).dtype == kiln.int64
    assert products.einsum("ij,k->", a, a[0]).dtype == kiln.int64


def test_einsum_takes_a_list_spaces_and_mixed_dtypes(rng):
    a, b = tensor((3, 4), kiln.float32, rng), tensor((4, 2), kiln.float64, rng)
    got = products.einsum(" ij , jk -> ik ", [a, b])
    assert got.dtype == kiln.float64  # promoted
    assert_close(got, a.numpy().astype(np.float64) @ b.numpy())


def test_einsum_broadcasts_size_one_letters_and_sums_a_missing_ellipsis(rng):
    # Both are PyTorch's rules, which NumPy's einsum does not share.
    a, b = rng.standard_normal((2, 1)), rng.standard_normal((2, 3))
    same(products.einsum("ij,ij->i", t(a), t(b)), (a * b).sum(1))
    same(products.einsum("ij,ij->ij", t(a), t(b[:1])), a * b[:1])
    x = rng.standard_normal((2, 3, 4))
    same(products.einsum("...ij->ij", t(x)), x.sum(0))
    same(products.einsum("i...->", t(x)), x.sum())


def test_einsum_matches_torch(torch, rng):
    a, b, c = (rng.standard_normal(s) for s in ((2, 1, 3, 4), (5, 4, 2), (2, 1)))
    for equation, operands in [("...ij,...jk", (a, b)), ("bij,bjk->ik", (a[:, 0], b[:2, :, :])),
                               ("ij,kl->", (c, c)), ("ii->i", (a[0, 0, :, :3],))]:
        want = torch.einsum(equation, *[torch.tensor(o) for o in operands])
        same(products.einsum(equation, *[t(o) for o in operands]), want.numpy())


EINSUM_GRADIENT_CASES = [
    ("ij,jk->ik", [(2, 3), (3, 2)]),
    ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 2)]),
    ("ii", [(3, 3)]),
    ("iij->ji", [(3, 3, 2)]),
    ("...ij,...jk", [(2, 1, 2, 3), (2, 3, 2)]),
    ("ij,ij->i", [(2, 1), (2, 3)]),
    ("bi,bj->bij", [(2, 3), (2, 2)]),
]


@pytest.mark.parametrize("equation, shapes", EINSUM_GRADIENT_CASES,
                         ids=[c[0] for c in EINSUM_GRADIENT_CASES])
def test_einsum_gradients_match_finite_differences(equation, shapes, rng):
    operands = [leaf(s, rng) for s in shapes]
    assert gradcheck(lambda *xs: products.einsum(equation, *xs), operands)


def test_einsum_under_jit_matches_eager(rng):
    a = kiln.tensor(rng.standard_normal((2, 3, 4)).astype(np.float32))
    b = kiln.tensor(rng.standard_normal((2, 4, 5)).astype(np.float32))

    def f(x, y):
        # A contraction, and a diagonal of a traced slice.
        return products.einsum("bij,bjk->bik", x, y) + products.einsum("bii->b", x[:, :, :3])[
            :, None, None]

    def loss(x, y):
        return kiln.mint.sum(products.einsum("bij,bjk->ik", x, y) ** 2)

    eager, eager_grads = f(a, b), kiln.grad(loss, grad_position=(0, 1))(a, b)
    jitted, jitted_grad = kiln.jit(f), kiln.jit(kiln.grad(loss, grad_position=(0, 1)))
    for _ in range(2):  # the trace, then the compiled graph
        np.testing.assert_allclose(jitted(a, b).numpy(), eager.numpy(), rtol=1e-6, atol=1e-6)
        for got, want in zip(jitted_grad(a, b), eager_grads):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


EINSUM_ERRORS = [
    ("ij", [(2, 3, 4)], kiln.ShapeError, "2 subscript.*3 dimension"),
    ("ijk...", [(2, 3)], kiln.ShapeError, "3 subscript.*2 dimension"),
    ("ii", [(2, 3)], kiln.ShapeError, "repeated in operand 0 with sizes 2 and 3"),
    ("i,i", [(2,), (3,)], kiln.ShapeError, "size 3 in operand 1.*size 2"),
    ("i->j", [(2,)], kiln.KilnValueError, "'j' does not appear"),
    ("i->ii", [(2,)], kiln.KilnValueError, "'i' appears more than once"),
    ("i,i", [(2,)], kiln.KilnValueError, "2 operand term.*1 operand"),
    ("i.j", [(2, 3)], kiln.KilnValueError, r"'\.'"),
    ("i1", [(2, 3)], kiln.KilnValueError, "'1'"),
    ("...i...", [(2, 3)], kiln.KilnValueError, "more than one ellipsis"),
    ("i->i->i", [(2,)], kiln.KilnValueError, "at most one '->'"),
]


@pytest.mark.parametrize("equation, shapes, error, match", EINSUM_ERRORS,
                         ids=[c[0] for c in EINSUM_ERRORS])
def test_einsum_errors(equation, shapes, error, match):
    with raises(error, match=match):
        products.einsum(equation, *[kiln.mint.ones(s) for s in shapes])


def test_einsum_refuses_what_is_not_an_equation_or_a_tensor():
    # (A tensor first is the sublist form: tests/python/test_einsum_sublist.py.)
    with raises(kiln.KilnTypeError, match="equation to be a str"):
        products.einsum([0], kiln.mint.ones(2))
    with raises(kiln.KilnTypeError, match="operand 1 to be a kiln.Tensor"):
        products.einsum("i,i", kiln.mint.ones(2), [1.0, 2.0])
    with raises(kiln.KilnValueError, match="at least one operand"):
        products.einsum("i")


# ------------------------------------------------------------------------------------------------
# outer, dot, diag, diagonal


@pytest.mark.parametrize("dtype", ALL)
def test_outer_and_ger_match_numpy(dtype, rng):
    a, b = tensor((3,), dtype, rng), tensor((4,), dtype, rng)
    want = np.outer(a.numpy(), b.numpy())
    same(products.outer(a, b), want)
    same(a.ger(b), want)
    same(products.outer(a, tensor((0,), dtype, rng)), np.zeros((3, 0)))


def test_outer_promotes_dtypes(rng):
    a, b = tensor((2,), kiln.int32, rng), tensor((3,), kiln.float32, rng)
    assert products.outer(a, b).dtype == kiln.float32


@pytest.mark.parametrize("dtype", NUMERIC + [kiln.float16])
def test_dot_matches_numpy(dtype, rng):
    a, b = tensor((5,), dtype, rng), tensor((5,), dtype, rng)
    got = a.dot(b)
    assert got.ndim == 0 and got.dtype == dtype
    same(got, np.dot(a.numpy().astype(np.float64), b.numpy().astype(np.float64)))
    same(products.dot(tensor((0,), dtype, rng), tensor((0,), dtype, rng)), np.zeros(()))


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("offset", [-4, -1, 0, 2])
def test_diag_matches_numpy(dtype, offset, rng):
    v, m = tensor((3,), dtype, rng), tensor((3, 4), dtype, rng)
    same(products.diag(v, offset), np.diag(v.numpy(), offset))
    same(m.diag(offset), np.diag(m.numpy(), offset))
    same(products.diag(tensor((0,), dtype, rng), offset), np.diag(np.zeros(0), offset))


def test_diag_keeps_inf_off_the_diagonal_zero_and_copies():
    # Zeros from padding, not a product with an identity, which would give inf * 0 = NaN.
    same(products.diag(kiln.tensor([1.0, float("inf")])), np.diag([1.0, np.inf]))
    m = kiln.tensor(np.arange(9.0).reshape(3, 3))
    d = products.diag(m)
    d[0] = 5.0  # a new tensor, as PyTorch's diag
    assert m.numpy()[0, 0] == 0.0


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.int64, kiln.bool_])
@pytest.mark.parametrize("offset, dim1, dim2",
                         [(0, 0, 1), (1, 1, 3), (-1, 3, 0), (2, -1, -2), (9, 0, 2)])
def test_diagonal_matches_numpy(dtype, offset, dim1, dim2, rng):
    x = tensor((2, 3, 4, 5), dtype, rng)
    same(products.diagonal(x, offset, dim1, dim2), np.diagonal(x.numpy(), offset, dim1, dim2))
    same(x.diagonal(offset=offset, dim1=dim1, dim2=dim2),
         np.diagonal(x.numpy(), offset, dim1, dim2))


def test_diagonal_of_a_contiguous_matrix_is_a_view():
    m = kiln.tensor(np.arange(9.0).reshape(3, 3))
    d = products.diagonal(m)
    assert d.shares_storage_with(m)
    same(d, [0.0, 4.0, 8.0])


# ------------------------------------------------------------------------------------------------
# tile, roll, repeat_interleave, movedim


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shape, dims", [((2, 3), (2,)), ((2, 3), (2, 1, 3)), ((), ()),
                                         ((), (3,)), ((2, 0), (2, 2)), ((3,), (0,))])
def test_tile_matches_numpy(dtype, shape, dims, rng):
    x = tensor(shape, dtype, rng)
    same(products.tile(x, dims), np.tile(x.numpy(), dims))


def test_tile_method_takes_counts_as_arguments_or_a_sequence(rng):
    x = tensor((2, 3), kiln.float32, rng)
    same(x.tile(2, 2), np.tile(x.numpy(), (2, 2)))
    same(x.tile((3,)), np.tile(x.numpy(), (3,)))
    same(x.tile(2), np.tile(x.numpy(), 2))


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shifts, dims", [(5, None), (-7, None), ((1, -7), (0, 3)), (3, 1),
                                          ((2, 2), (1, 1)), (0, 2)])
def test_roll_matches_numpy(dtype, shifts, dims, rng):
    x = tensor((2, 3, 4, 5), dtype, rng)
    same(products.roll(x, shifts, dims), np.roll(x.numpy(), shifts, dims))
    same(x.roll(shifts, dims), np.roll(x.numpy(), shifts, dims))


def test_roll_edge_cases_and_copies(rng):
    same(products.roll(kiln.tensor(1.0), 3), np.array(1.0))
    same(products.roll(kiln.mint.ones(0, 3), 1, 0), np.ones((0, 3)))
    x = tensor((4,), kiln.float32, rng)
    rolled = products.roll(x, 0, 0)
    assert not rolled.shares_storage_with(x)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("repeats, dim", [(2, 1), (3, None), (0, 0), ([1, 0, 2], 0),
                                          ([2], 1), ([1, 2, 0, 3], -1)])
def test_repeat_interleave_matches_numpy(dtype, repeats, dim, rng):
    x = tensor((3, 4), dtype, rng)
    counts = kiln.tensor(np.array(repeats)) if isinstance(repeats, list) else repeats
    want = np.repeat(x.numpy(), repeats, dim)
    same(products.repeat_interleave(x, counts, dim), want)
    same(x.repeat_interleave(counts, dim=dim), want)


def test_repeat_interleave_of_counts_alone_and_of_a_scalar():
    same(products.repeat_interleave(kiln.tensor([1, 2, 0, 3])), np.repeat(np.arange(4),
                                                                          [1, 2, 0, 3]))
    same(products.repeat_interleave(kiln.tensor(5.0), 3), np.full(3, 5.0))
    same(products.repeat_interleave(kiln.tensor([1.0, 2.0]), kiln.tensor(2), output_size=4),
         [1.0, 1.0, 2.0, 2.0])
    x = kiln.tensor([1.0, 2.0])
    assert not products.repeat_interleave(x, 1).shares_storage_with(x)  # a new tensor


def test_repeat_interleave_with_tensor_repeats_is_refused_while_jit_traces():
    # Read at the trace, repeats from outside stayed as they were: a later change was not seen.
    repeats = kiln.tensor([1, 2])
    x = kiln.tensor([[1.0, 2.0], [3.0, 4.0]])
    f = kiln.jit(lambda y: kiln.mint.repeat_interleave(y, repeats, 1))
    with raises(kiln.KilnTypeError, match="repeat_interleave: a tensor of repeats sets the "
                                          "result's shape by its values"):
        f(x)
    same(kiln.jit(lambda y: kiln.mint.repeat_interleave(y, 2, 1))(x), np.repeat(x.numpy(), 2, 1))


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.int8, kiln.bool_])
@pytest.mark.parametrize("source, destination", [(0, 2), (-1, 0), ((0, 1), (3, 0)),
                                                 ([2, 3], [1, 0]), ((), ())])
def test_movedim_matches_numpy(dtype, source, destination, rng):
    x = tensor((2, 3, 4, 5), dtype, rng)
    want = np.moveaxis(x.numpy(), source, destination)
    same(products.movedim(x, source, destination), want)
    same(x.moveaxis(source, destination), want)
    assert x.movedim(source, destination).shares_storage_with(x)


def test_movedim_of_a_0d_tensor():
    same(products.movedim(kiln.tensor(2.0), 0, -1), np.array(2.0))


# ------------------------------------------------------------------------------------------------
# meshgrid, cartesian_prod, tril_indices, triu_indices


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid_matches_numpy(dtype, indexing, rng):
    vectors = [tensor(s, dtype, rng) for s in ((3,), (4,), (), (2,))]
    got = products.meshgrid(*vectors, indexing=indexing)
    want = np.meshgrid(*[np.atleast_1d(v.numpy()) for v in vectors], indexing=indexing)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        same(g, w)
    for g, w in zip(products.meshgrid(vectors[:2]), np.meshgrid(vectors[0].numpy(),
                                                                vectors[1].numpy(),
                                                                indexing="ij")):
        same(g, w)  # the tensors as one list, "ij" by default


@pytest.mark.parametrize("dtype", [kiln.float64, kiln.int32])
def test_cartesian_prod_matches_numpy(dtype, rng):
    a, b, c = (tensor(s, dtype, rng) for s in ((3,), (2,), (2,)))
    want = np.array(np.meshgrid(a.numpy(), b.numpy(), c.numpy(), indexing="ij")).reshape(3, -1).T
    same(products.cartesian_prod(a, b, c), want)
    assert products.cartesian_prod(a) is a
    same(products.cartesian_prod(a, tensor((0,), dtype, rng)), np.zeros((0, 2)))


@pytest.mark.parametrize("row, col, offset", [(3, 3, 0), (3, 4, -1), (4, 3, 2), (0, 4, 0),
                                              (3, 5, -9)])
def test_triangle_indices_match_numpy(row, col, offset):
    same(products.tril_indices(row, col, offset),
         np.stack(np.tril_indices(row, offset, col)).reshape(2, -1))
    same(products.triu_indices(row, col, offset),
         np.stack(np.triu_indices(row, offset, col)).reshape(2, -1))
    assert products.tril_indices(row, col, offset).dtype == kiln.int64
    assert products.triu_indices(row, col, dtype=kiln.int32).dtype == kiln.int32


# ------------------------------------------------------------------------------------------------
# Gradients

GRADIENT_CASES = [
    ("outer", lambda a, b: products.outer(a, b), [(3,), (2,)]),
    ("dot", lambda a, b: products.dot(a, b), [(3,), (3,)]),
    ("diag of a vector", lambda a: products.diag(a, -1), [(3,)]),
    ("diag of a matrix", lambda a: products.diag(a, 1), [(3, 4)]),
    ("diagonal", lambda a: products.diagonal(a, 1, 2, 0), [(3, 2, 4)]),
    ("tile", lambda a: products.tile(a, (2, 1, 2)), [(2, 3)]),
    ("roll", lambda a: products.roll(a, (1, -1), (0, 1)), [(2, 3)]),
    ("roll flattened", lambda a: products.roll(a, 4), [(2, 3)]),
    ("repeat_interleave", lambda a: products.repeat_interleave(a, 2, 1), [(2, 3)]),
    ("repeat_interleave counts",
     lambda a: products.repeat_interleave(a, kiln.tensor([2, 0, 1]), 1), [(2, 3)]),
    ("movedim", lambda a: products.movedim(a, 0, -1), [(2, 3, 2)]),
    ("meshgrid", lambda a, b: products.meshgrid(a, b, indexing="xy"), [(3,), (2,)]),
    ("cartesian_prod", lambda a, b: products.cartesian_prod(a, b), [(3,), (2,)]),
]


@pytest.mark.parametrize("fn, shapes", [c[1:] for c in GRADIENT_CASES],
                         ids=[c[0] for c in GRADIENT_CASES])
def test_gradients_match_finite_differences(fn, shapes, rng):
    assert gradcheck(fn, [leaf(s, rng) for s in shapes])


# ------------------------------------------------------------------------------------------------
# Argument errors

ARGUMENT_ERRORS = [
    (lambda: products.outer(kiln.mint.ones(2, 1), kiln.mint.ones(2)), kiln.ShapeError,
     "input to be a 1-d tensor"),
    (lambda: products.outer(kiln.mint.ones(2), [1.0]), kiln.KilnTypeError, "vec2 to be a kiln"),
    (lambda: products.dot(kiln.mint.ones(2), kiln.mint.ones(3)), kiln.ShapeError,
     "same length, got 2 and 3"),
    (lambda: products.dot(kiln.mint.ones(2), kiln.mint.ones(2, dtype=kiln.float64)),
     kiln.DTypeError, "same dtype, got float32 and float64"),
    (lambda: products.diag(kiln.mint.ones(2, 2, 2)), kiln.ShapeError,
     "1-d or 2-d tensor, got a 3-d"),
    (lambda: products.diag(kiln.tensor(1.0)), kiln.ShapeError, "got a 0-d"),
    (lambda: products.diag(kiln.mint.ones(2), 1.5), kiln.KilnTypeError, "diagonal must be an int"),
    (lambda: products.diagonal(kiln.mint.ones(2, 3), 0, 1, -1), kiln.KilnValueError,
     "different dims"),
    (lambda: products.diagonal(kiln.mint.ones(3), 0), kiln.KilnIndexError, "dim2 out of range"),
    (lambda: products.tile(kiln.mint.ones(2), "ab"), kiln.KilnTypeError, "dims must be an int"),
    (lambda: products.tile(kiln.mint.ones(2), (-1,)), kiln.KilnValueError, "non-negative"),
    (lambda: products.roll(kiln.mint.ones(3), (1, 2)), kiln.KilnValueError,
     "one shift when dims is None"),
    (lambda: products.roll(kiln.mint.ones(3, 3), (1, 2), 0), kiln.KilnValueError,
     "as many shifts as dims"),
    (lambda: products.roll(kiln.tensor(1.0), 1, 0), kiln.KilnIndexError, "0-d tensor has no"),
    (lambda: products.roll(kiln.mint.ones(3), 1.5), kiln.KilnTypeError, "shifts must be"),
    (lambda: products.repeat_interleave(kiln.mint.ones(3), -1), kiln.KilnValueError,
     "repeats must be at least 0"),
    (lambda: products.repeat_interleave(kiln.mint.ones(3), kiln.tensor([1, -1, 0])),
     kiln.KilnValueError, "repeats >= 0"),
    (lambda: products.repeat_interleave(kiln.mint.ones(3), kiln.tensor([1, 2])), kiln.ShapeError,
     r"one per slice along dim 0 \(3\)"),
    (lambda: products.repeat_interleave(kiln.mint.ones(3), kiln.tensor([1.0, 2.0, 3.0])),
     kiln.DTypeError, "integer tensor of repeats"),
    (lambda: products.repeat_interleave(kiln.mint.ones(2, 3), 2, dim=2), kiln.KilnIndexError,
     "dim out of range"),
    (lambda: products.repeat_interleave(kiln.mint.ones(3), 2, output_size=5), kiln.KilnValueError,
     "output_size is 5, but the repeats give 6"),
    (lambda: products.repeat_interleave(kiln.mint.ones(3), [1, 2, 3]), kiln.KilnTypeError,
     "repeats must be an int"),
    (lambda: products.movedim(kiln.mint.ones(2, 3, 4), (0, 0), (1, 2)), kiln.KilnValueError,
     "more than once in source"),
    (lambda: products.movedim(kiln.mint.ones(2, 3, 4), (0, 1), 1), kiln.KilnValueError,
     "as many destination dims"),
    (lambda: products.movedim(kiln.mint.ones(2, 3), 0, 2), kiln.KilnIndexError,
     "destination out of range"),
    (lambda: products.meshgrid(), kiln.KilnValueError, "at least one tensor"),
    (lambda: products.meshgrid(kiln.mint.ones(2, 2)), kiln.ShapeError, "0-d or 1-d tensors"),
    (lambda: products.meshgrid(kiln.mint.ones(2), kiln.mint.ones(2, dtype=kiln.float64)),
     kiln.DTypeError, "one dtype"),
    (lambda: products.meshgrid(kiln.mint.ones(2), indexing="ab"), kiln.KilnValueError,
     "indexing 'ij' or 'xy'"),
    (lambda: products.cartesian_prod(kiln.tensor(1)), kiln.ShapeError, "1-d tensors"),
    (lambda: products.tril_indices(-1, 3), kiln.KilnValueError, "row must be at least 0"),
    (lambda: products.triu_indices(3, 3, dtype=kiln.float32), kiln.DTypeError,
     "integer dtype"),
]


@pytest.mark.parametrize("call, error, match", ARGUMENT_ERRORS,
                         ids=[f"{k}-{c[2][:24]}" for k, c in enumerate(ARGUMENT_ERRORS)])
def test_argument_errors(call, error, match):
    with raises(error, match=match):
        call()
