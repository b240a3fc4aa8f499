"""PyTorch's products composed in kiln/mint/_matrix_products.py (mm, mv, addmm, baddbmm, addmv,
kron, cross, cdist) and their Tensor methods: values against NumPy over dtypes and broadcasting,
gradients by finite differences (and PyTorch's at coincident points of cdist), kiln.jit against
eager, and the argument errors."""

import numpy as np
import pytest

import kiln
from conftest import assert_close, random_array, raises, t
from kiln.testing import gradcheck

mint = kiln.mint
NUMERIC = [kiln.float32, kiln.float64, kiln.int32, kiln.int64]
FLOATS = [kiln.float32, kiln.float64]


def values(shape, dtype, rng):
    return kiln.tensor(random_array(shape, dtype, rng), dtype=dtype)


def leaf(rng, *shape):
    return kiln.tensor(rng.standard_normal(shape)).requires_grad_()


def f64(x):
    return x.numpy().astype(np.float64)


# ------------------------------------------------------------------------------------------------
# mm, mv, addmm, baddbmm, addmv


@pytest.mark.parametrize("dtype", NUMERIC)
def test_mm_and_mv_are_numpy_products(dtype, rng):
    a, b, v = values((3, 4), dtype, rng), values((4, 5), dtype, rng), values((4,), dtype, rng)
    for got in (mint.mm(a, b), a.mm(b)):
        assert got.dtype == dtype
        assert_close(got, (a.numpy() @ b.numpy()).astype(got.numpy().dtype))
    for got in (mint.mv(a, v), a.mv(v)):
        assert got.shape == (3,)
        assert_close(got, (a.numpy() @ v.numpy()).astype(got.numpy().dtype))


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("input_shape", [(3, 5), (5,), (3, 1), ()], ids=str)
def test_addmm_scales_and_broadcasts_the_input(dtype, input_shape, rng):
    c, a, b = (values(s, dtype, rng) for s in (input_shape, (3, 4), (4, 5)))
    beta, alpha = (2, -3) if not dtype.is_floating_point else (0.5, 1.5)
    want = beta * f64(c) + alpha * (f64(a) @ f64(b))
    for got in (mint.addmm(c, a, b, beta=beta, alpha=alpha), c.addmm(a, b, beta=beta,
                                                                     alpha=alpha)):
        assert got.dtype == dtype and got.shape == (3, 5)
        assert_close(got, want.astype(got.numpy().dtype))


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("input_shape", [(2, 3, 5), (3, 5), (1, 1), (5,)], ids=str)
def test_baddbmm_scales_and_broadcasts_the_input(dtype, input_shape, rng):
    c, b1, b2 = (values(s, dtype, rng) for s in (input_shape, (2, 3, 4), (2, 4, 5)))
    beta, alpha = (3, 2) if not dtype.is_floating_point else (-0.5, 0.25)
    want = beta * f64(c) + alpha * np.matmul(f64(b1), f64(b2))
    for got in (mint.baddbmm(c, b1, b2, beta=beta, alpha=alpha),
                c.baddbmm(b1, b2, beta=beta, alpha=alpha)):
        assert got.dtype == dtype and got.shape == (2, 3, 5)
        assert_close(got, want.astype(got.numpy().dtype))


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("input_shape", [(3,), (1,), ()], ids=str)
def test_addmv_scales_and_broadcasts_the_input(dtype, input_shape, rng):
    c, m, v = (values(s, dtype, rng) for s in (input_shape, (3, 4), (4,)))
    want = 2 * f64(c) + 3 * (f64(m) @ f64(v))
    for got in (mint.addmv(c, m, v, beta=2, alpha=3), c.addmv(m, v, beta=2, alpha=3)):
        assert got.shape == (3,)
        assert_close(got, want.astype(got.numpy().dtype))


@pytest.mark.parametrize("call", [
    lambda c, a, b: mint.addmm(c, a, b, beta=0),
    lambda c, a, b: mint.baddbmm(c[None], a[None], b[None], beta=0.0)[0],
    lambda c, a, b: mint.addmv(c[:, 0], a, b[:, 0], beta=0)[:, None],
])
def test_beta_zero_does_not_read_nan_or_inf_in_the_input(call, rng):
    a, b = values((3, 4), kiln.float64, rng), values((4, 1), kiln.float64, rng)
    c = t(np.array([[np.nan], [np.inf], [-np.inf]]))
    assert_close(call(c, a, b), f64(a) @ f64(b))


def test_in_place_products_write_into_the_input(rng):
    c, a, b = values((3, 5), kiln.float64, rng), values((3, 4), kiln.float64, rng), \
        values((4, 5), kiln.float64, rng)
    want = 0.5 * f64(c) + f64(a) @ f64(b)
    assert c.addmm_(a, b, beta=0.5) is c
    assert_close(c, want)
    v = values((4,), kiln.float64, rng)
    w = values((3,), kiln.float64, rng)
    want = f64(w) + 2 * f64(a) @ f64(v)
    assert w.addmv_(a, v, alpha=2) is w
    assert_close(w, want)
    batch = values((1, 3, 5), kiln.float64, rng)
    want = f64(batch) - np.matmul(f64(a)[None], f64(b)[None])
    assert batch.baddbmm_(a[None], b[None], alpha=-1) is batch
    assert_close(batch, want)


def test_product_gradients_match_finite_differences(rng):
    a, b, c = leaf(rng, 3, 4), leaf(rng, 4, 2), leaf(rng, 3, 1)
    v = leaf(rng, 4)
    gradcheck(lambda a, b: mint.mm(a, b), (a, b))
    gradcheck(lambda a, v: mint.mv(a, v), (a, v))
    gradcheck(lambda c, a, b: mint.addmm(c, a, b, beta=0.3, alpha=-2.0), (c, a, b))
    gradcheck(lambda c, a, b: mint.baddbmm(c, a[None], b[None], beta=1.5, alpha=0.5),
              (c, a, b))
    gradcheck(lambda c, a, v: mint.addmv(c[:, 0], a, v, beta=2.0, alpha=0.5), (c, a, v))


# ------------------------------------------------------------------------------------------------
# kron, cross


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("shapes", [((2, 3), (4, 5)), ((3,), (2, 2)), ((2, 1, 3), (3, 2)),
                                    ((), (3,)), ((), ())], ids=str)
def test_kron_is_numpys(dtype, shapes, rng):
    a, b = values(shapes[0], dtype, rng), values(shapes[1], dtype, rng)
    want = np.kron(a.numpy(), b.numpy())
    assert_close(mint.kron(a, b), want)
    assert_close(a.kron(b), want)


def test_kron_promotes_and_differentiates(rng):
    got = mint.kron(kiln.tensor([1, 2]), kiln.tensor([1.5]))
    assert got.dtype == kiln.float32 and got.tolist() == [1.5, 3.0]
    gradcheck(mint.kron, (leaf(rng, 2, 3), leaf(rng, 3, 1, 2)))


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("shapes, dim", [(((4, 3), (4, 3)), -1), (((4, 3), (1, 3)), 1),
                                         (((3, 2, 5), (3, 1, 5)), 0),
                                         (((2, 3, 1), (1, 3, 4)), 1), (((3,), (3,)), 0)],
                         ids=str)
def test_cross_is_numpys_with_broadcasting(dtype, shapes, dim, rng):
    a, b = values(shapes[0], dtype, rng), values(shapes[1], dtype, rng)
    want = np.cross(a.numpy(), b.numpy(), axis=dim)
    assert_close(mint.cross(a, b, dim), want)
    assert_close(a.cross(b, dim=dim), want)


def test_cross_defaults_to_the_last_dim_and_none_to_the_first_of_size_3(rng):
    a, b = values((3, 3), kiln.float64, rng), values((3, 3), kiln.float64, rng)
    assert_close(mint.cross(a, b), np.cross(a.numpy(), b.numpy(), axis=-1))
    assert_close(mint.cross(a, b, None), np.cross(a.numpy(), b.numpy(), axis=0))
    c, d = values((2, 3, 3), kiln.float64, rng), values((2, 3, 3), kiln.float64, rng)
    assert_close(mint.cross(c, d, dim=None), np.cross(c.numpy(), d.numpy(), axis=1))


def test_cross_gradient(rng):
    gradcheck(lambda a, b: mint.cross(a, b, 0), (leaf(rng, 3, 2), leaf(rng, 3, 1)))


# ------------------------------------------------------------------------------------------------
# cdist


def cdist_reference(x1, x2, p):
    diff = np.abs(x1[..., :, None, :] - x2[..., None, :, :])
    if p == 0:
        return (diff != 0).sum(-1).astype(np.float64)
    if np.isinf(p):
        return diff.max(-1)
    return (diff ** p).sum(-1) ** (1.0 / p)


@pytest.mark.parametrize("dtype", FLOATS + [kiln.float16, kiln.bfloat16])
@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 2.0, 3.0, float("inf")])
def test_cdist_is_the_p_norm_of_each_pair(dtype, p, rng):
    x1, x2 = values((2, 4, 3), dtype, rng), values((5, 3), dtype, rng)
    got = mint.cdist(x1, x2[None], p=p)
    assert got.dtype == dtype and got.shape == (2, 4, 5)
    assert_close(got, cdist_reference(f64(x1), f64(x2)[None], p), dtype)


def test_cdist_broadcasts_batch_dims_and_ignores_compute_mode(rng):
    x1, x2 = values((2, 1, 3, 4), kiln.float64, rng), values((5, 2, 4), kiln.float64, rng)
    got = mint.cdist(x1, x2, compute_mode="use_mm_for_euclid_dist")
    assert got.shape == (2, 5, 3, 2)
    assert_close(got, cdist_reference(f64(x1), f64(x2), 2))


@pytest.mark.parametrize("p", [0.5, 1.0, 2.0, 3.0, float("inf")])
def test_cdist_gradient_matches_finite_differences(p, rng):
    gradcheck(lambda a, b: mint.cdist(a, b, p=p), (leaf(rng, 3, 2), leaf(rng, 4, 2)))


@pytest.mark.parametrize("p", [0.5, 2.0, 3.0])
def test_cdist_gradient_is_zero_where_points_coincide(p, rng):
    x = leaf(rng, 2, 3)
    same = kiln.tensor(x.detach().numpy()).requires_grad_()
    out = mint.cdist(x, same, p=p)
    assert np.isfinite(out.numpy()).all()
    out.diagonal().sum().backward()  # only the coincident pairs
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, 3)))
    np.testing.assert_array_equal(same.grad.numpy(), np.zeros((2, 3)))


@pytest.mark.parametrize("p", [1.0, 2.0, 0.5, float("inf")])
def test_cdist_gradient_matches_torch(torch, p, rng):
    a = rng.standard_normal((4, 3))
    b = np.concatenate([a[:2], rng.standard_normal((2, 3))])
    weight = rng.standard_normal((4, 4))
    ka, kb = t(a).requires_grad_(), t(b).requires_grad_()
    (mint.cdist(ka, kb, p=p) * t(weight)).sum().backward()
    ta = torch.tensor(a, requires_grad=True)
    tb = torch.tensor(b, requires_grad=True)
    (torch.cdist(ta, tb, p=p, compute_mode="donot_use_mm_for_euclid_dist")
     * torch.tensor(weight)).sum().backward()
    assert_close(ka.grad, ta.grad.numpy())
    assert_close(kb.grad, tb.grad.numpy())


# ------------------------------------------------------------------------------------------------
# kiln.jit


def test_products_trace_under_jit(rng):
    def products(a, b, v):
        return (mint.mm(a, b).sum() + mint.mv(a, v).sum()
                + mint.addmm(a[:, :3], a, b, beta=0.5).sum()
                + mint.baddbmm(a[:, :3], a[None], b[None], alpha=2.0).sum()
                + mint.addmv(v[:3], a, v).sum() + mint.kron(a, v).sum()
                + mint.cross(a[:, :3], b.T[:, :3]).sum() + mint.cdist(a, b.T, p=1.5).sum())

    jitted = kiln.jit(products)
    for _ in range(2):
        a, b, v = (values(s, kiln.float64, rng) for s in ((3, 4), (4, 3), (4,)))
        assert_close(jitted(a, b, v), products(a, b, v).numpy())


# ------------------------------------------------------------------------------------------------
# Errors

M = t(np.zeros((2, 3)))
V = t(np.zeros(3))
ERRORS = [
    (lambda: mint.mm(M, V), kiln.ShapeError,
     "mm: expected two 2-d tensors, got a 2-d input and a 1-d mat2"),
    (lambda: mint.mm(M, M), kiln.ShapeError, "input has 3 columns but mat2 has 2 rows"),
    (lambda: mint.mm(M, M.T.float()), kiln.DTypeError, "same dtype, got float64 and float32"),
    (lambda: mint.mm([[1.0]], M), kiln.KilnTypeError, "input to be a kiln.Tensor"),
    (lambda: M.mv(V[:2]), kiln.ShapeError, "mv: input has 3 columns but vec has 2 rows"),
    (lambda: mint.mv(M, M), kiln.ShapeError, "vec to be a 1-d tensor"),
    (lambda: mint.addmm(V, M, M.T.float()), kiln.DTypeError, "addmm: expected input and mat2"),
    (lambda: mint.addmm(V, M, M), kiln.ShapeError, "addmm"),
    (lambda: mint.addmm(V, M, M.T, alpha="2"), kiln.KilnTypeError, "alpha to be a real number"),
    (lambda: mint.addmm(t([1]), t([[1]]), t([[1]]), beta=0.5), kiln.KilnValueError,
     "whole-number alpha and beta"),
    (lambda: mint.baddbmm(M, M[None], M[None]), kiln.ShapeError,
     "baddbmm: batch1 has 3 columns but batch2 has 2 rows"),
    (lambda: mint.baddbmm(M, M, M.T), kiln.ShapeError, "batch1 to be a 3-d tensor"),
    (lambda: mint.baddbmm(M, M[None].expand([2, 2, 3]), M.T[None]), kiln.ShapeError,
     "as many matrices, got 2 and 1"),
    (lambda: mint.baddbmm(t(np.zeros(3)), M[None], M.T[None]), kiln.ShapeError,
     r"input of shape \[3\] does not broadcast to the product's shape \[1, 2, 2\]"),
    (lambda: mint.baddbmm(t([[[1]]]), t([[[1]]]), t([[[1]]]), alpha=1.5), kiln.KilnValueError,
     "whole-number"),
    (lambda: mint.baddbmm(t([[[True]]]), t([[[True]]]), t([[[True]]])), kiln.DTypeError,
     "numeric tensors, got bool"),
    (lambda: mint.addmv(V, M, V), kiln.ShapeError, r"input of shape \[3\] does not broadcast"),
    (lambda: mint.addmv(V[:2], M, V.float()), kiln.DTypeError, "same dtype"),
    (lambda: mint.kron(M, 2.0), kiln.KilnTypeError, "other to be a kiln.Tensor"),
    (lambda: mint.cross(M.T, M.T), kiln.ShapeError, "size 3 along dim 1, got 2 and 2"),
    (lambda: mint.cross(M, M, dim=0), kiln.ShapeError, "size 3 along dim 0, got 2 and 2"),
    (lambda: mint.cross(M, M, dim=2), kiln.KilnIndexError, "dim out of range"),
    (lambda: mint.cross(M, M, dim=1.0), kiln.KilnTypeError, "dim must be an int"),
    (lambda: mint.cross(V, M), kiln.ShapeError, "same number of dims"),
    (lambda: mint.cross(t(np.zeros((2, 3))), t(np.zeros((4, 3)))), kiln.ShapeError,
     "do not broadcast together"),
    (lambda: mint.cross(V, V.float()), kiln.DTypeError, "same dtype"),
    (lambda: mint.cross(t([True] * 3), t([True] * 3)), kiln.DTypeError, "got bool"),
    (lambda: mint.cross(t(np.zeros((2, 4))), t(np.zeros((2, 4))), None), kiln.ShapeError,
     "first dim of size 3"),
    (lambda: mint.cdist(t([[1, 2]]), t([[1, 2]])), kiln.DTypeError, "floating-point tensors"),
    (lambda: mint.cdist(V, V), kiln.ShapeError, "at least 2 dims"),
    (lambda: mint.cdist(M, t(np.zeros((2, 4)))), kiln.ShapeError, "as many features"),
    (lambda: mint.cdist(M, M.float()), kiln.DTypeError, "same dtype"),
    (lambda: mint.cdist(M, M, p=-1.0), kiln.KilnValueError, "p >= 0, got -1.0"),
    (lambda: mint.cdist(M, M, p="2"), kiln.KilnTypeError, "p to be a real number"),
    (lambda: mint.cdist(M, M, compute_mode="fast"), kiln.KilnValueError, "compute_mode"),
]


@pytest.mark.parametrize("call, error, match", ERRORS)
def test_bad_arguments_are_typed_errors(call, error, match):
    with raises(error, match=match):
        call()
