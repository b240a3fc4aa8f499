"""kiln.linalg's composed functions (python/kiln/linalg/_spectral.py, _functions.py): matrix_norm,
norm, cond, matrix_rank, pinv, lstsq, matrix_power, matrix_exp, multi_dot, householder_product,
tensorinv, tensorsolve, cross, vecdot, diagonal, vander, and kiln.mint's cholesky_solve,
cholesky_inverse, pinverse and norm(p="nuc"): values against NumPy in float32 and float64 (and
lstsq's fields against PyTorch's for each driver), empty and rank-deficient inputs, errors,
gradients by finite differences and against PyTorch, and kiln.jit against eager."""

import math

import numpy as np
import pytest

import kiln
from conftest import raises
from kiln import linalg
from kiln.testing import gradcheck
from test_linalg import as_dtype, close, expect_torch_gradients, leaf, matrices, mT, spd

mint = kiln.mint
FLOATS = [kiln.float32, kiln.float64]
MATRIX_ORDERS = ["fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf]


def rank_deficient(rng, m, n, rank, batch=()):
    return rng.standard_normal(batch + (m, rank)) @ rng.standard_normal(batch + (rank, n))


# ------------------------------------------------------------------------------------------------
# matrix_norm, norm


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ord", MATRIX_ORDERS)
def test_matrix_norm_matches_numpy(dtype, ord, rng):  # noqa: A002
    a, x = matrices(rng, (2, 4, 3), dtype)
    close(linalg.matrix_norm(x, ord), np.linalg.norm(a, ord, axis=(-2, -1)), dtype, 10)
    for dim in ((0, 2), (2, 0), (-1, 1)):
        for keepdim in (False, True):
            close(linalg.matrix_norm(x, ord, dim, keepdim),
                  np.linalg.norm(a, ord, axis=dim, keepdims=keepdim), dtype, 10)
    assert linalg.matrix_norm(x, ord).dtype == dtype


def test_matrix_norm_dtypes():
    x = mint.ones(3, 3, dtype=kiln.float16)
    for ord in ("fro", 1, -math.inf):  # noqa: A001
        got = linalg.matrix_norm(x, ord)
        assert got.dtype == kiln.float16
        close(got, np.linalg.norm(np.ones((3, 3)), ord), kiln.float32)
    got = linalg.matrix_norm(x, 2, dtype=kiln.float32)
    assert got.dtype == kiln.float32
    close(got, 3.0, kiln.float32)
    assert linalg.matrix_norm(mint.ones(3, 3), "nuc", dtype=kiln.float64).dtype == kiln.float64
    with raises(kiln.DTypeError, match=r"ord=2 needs singular values.*float16"):
        linalg.matrix_norm(x, 2)
    with raises(kiln.DTypeError, match="converts to without loss"):
        linalg.matrix_norm(mint.ones(3, 3, dtype=kiln.float64), dtype=kiln.float32)
    with raises(kiln.DTypeError, match="floating-point tensor, got int32"):
        linalg.matrix_norm(mint.ones(3, 3, dtype=kiln.int32))


def test_matrix_norms_of_empty_matrices():
    for shape in ((0, 3), (3, 0)):
        x = mint.zeros(list(shape), dtype=kiln.float64)
        for ord in ("fro", "nuc", 2, 1, math.inf):  # noqa: A001
            assert linalg.matrix_norm(x, ord).item() == 0.0
        with raises(kiln.KilnValueError, match="empty"):
            linalg.matrix_norm(x, -2)
    # -1 takes the min over the columns (3 of them for [0, 3], each of norm 0), -inf over rows.
    assert linalg.matrix_norm(mint.zeros(0, 3, dtype=kiln.float64), -1).item() == 0.0
    with raises(kiln.KilnValueError, match="empty"):
        linalg.matrix_norm(mint.zeros(0, 3, dtype=kiln.float64), -math.inf)
    assert linalg.matrix_norm(mint.zeros(0, 2, 2, dtype=kiln.float64), 2).shape == (0,)


def test_matrix_norm_errors():
    x = mint.ones(2, 3, dtype=kiln.float64)
    with raises(kiln.KilnValueError, match="expected ord 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, "
                                           "got 3"):
        linalg.matrix_norm(x, 3)
    with raises(kiln.KilnValueError, match="got 'max'"):
        linalg.matrix_norm(x, "max")
    with raises(kiln.KilnValueError, match="two different dims"):
        linalg.matrix_norm(x, dim=(0, -2))
    with raises(kiln.KilnValueError, match="pair of dims"):
        linalg.matrix_norm(x, dim=0)
    with raises(kiln.KilnIndexError):
        linalg.matrix_norm(x, dim=(0, 2))
    with raises(kiln.ShapeError, match="at least 2 dims"):
        linalg.matrix_norm(mint.ones(3, dtype=kiln.float64))
    with raises(kiln.KilnTypeError, match="linalg.matrix_norm: expected A to be a kiln.Tensor"):
        linalg.matrix_norm([[1.0]])


@pytest.mark.parametrize("shape", [(4,), (3, 4), (2, 3, 4)])
@pytest.mark.parametrize("ord", [None, 1, 2, -2, math.inf, 0.5, "fro", "nuc"])
@pytest.mark.parametrize("dim", [None, 0, (0,), (0, 1), (-1, 0)])
def test_norm_dispatches_as_torch_linalg_norm(shape, ord, dim, rng):  # noqa: A002
    a = rng.standard_normal(shape)
    x = kiln.tensor(a)
    rank = len(shape)
    dims = None if dim is None else (dim,) if isinstance(dim, int) else dim
    if dims is not None and len(dims) == 2 and rank < 2:
        return  # not a case: a 1-d tensor has no two dims
    if dims is None and ord is not None and rank > 2:
        with raises(kiln.ShapeError, match="1-d or 2-d"):
            linalg.norm(x, ord, dim)
        return
    matrix = isinstance(ord, str) or (ord is not None and (
        len(dims) == 2 if dims is not None else rank == 2))
    if not matrix:
        want = (np.sum(np.abs(a) ** (2 if ord is None else ord), axis=dims)
                ** (1 / (2 if ord is None else ord)) if ord != math.inf
                else np.max(np.abs(a), axis=dims))
        close(linalg.norm(x, ord, dim), want, kiln.float64, 10)
        return
    if ord == 0.5 or rank < 2 or (dims is not None and len(dims) == 1):
        with raises((kiln.KilnValueError, kiln.ShapeError)):
            linalg.norm(x, ord, dim)
        return
    axes = (0, 1) if dims is None else dims
    close(linalg.norm(x, ord, dim), np.linalg.norm(a, ord, axis=axes), kiln.float64, 10)


def test_norm_keepdim_dtype_and_errors(rng):
    a = rng.standard_normal((2, 3))
    x = kiln.tensor(a, dtype=kiln.float32)
    close(linalg.norm(x, keepdim=True), np.linalg.norm(a).reshape(1, 1), kiln.float32)
    got = linalg.norm(x, "nuc", dtype=kiln.float64)
    assert got.dtype == kiln.float64
    close(got, np.linalg.norm(as_dtype(a, kiln.float32), "nuc"), kiln.float64)
    with raises(kiln.KilnValueError, match="1 or 2 dims"):
        linalg.norm(x, dim=(0, 1, 2))
    assert linalg.vector_norm is mint.vector_norm


def test_mint_norm_takes_the_nuclear_norm(rng):
    a = rng.standard_normal((3, 4))
    close(mint.norm(kiln.tensor(a), "nuc"), np.linalg.norm(a, "nuc"), kiln.float64)
    b = rng.standard_normal((2, 3, 4))
    close(mint.norm(kiln.tensor(b), p="nuc", dim=(1, 2), keepdim=True),
          np.linalg.norm(b, "nuc", axis=(1, 2), keepdims=True), kiln.float64)
    close(kiln.tensor(a).norm("nuc"), np.linalg.norm(a, "nuc"), kiln.float64)
    with raises(kiln.KilnValueError, match="pair of dims"):
        mint.norm(kiln.tensor(b), "nuc")
    with raises(kiln.KilnTypeError, match="norm: expected a kiln tensor, got list"):
        mint.norm([[1.0]], "nuc")


# ------------------------------------------------------------------------------------------------
# cond, matrix_rank


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("p", [None] + MATRIX_ORDERS)
def test_cond_matches_numpy(dtype, p, rng):
    a, x = matrices(rng, (2, 4, 4), dtype)
    close(linalg.cond(x, p), np.linalg.cond(a, p), dtype, 1000)
    if p in (None, 2, -2):
        a, x = matrices(rng, (3, 5), dtype)
        close(linalg.cond(x, p), np.linalg.cond(a, p), dtype, 1000)


def test_cond_of_singular_and_empty_matrices():
    singular = np.array([[[1.0, 2.0], [2.0, 4.0]], [[2.0, 0.0], [0.0, 1.0]]])
    x = kiln.tensor(singular)
    for p in ("fro", "nuc", 1, -1, math.inf, -math.inf):
        got = linalg.cond(x, p).numpy()
        assert got[0] == math.inf, p
        close(kiln.tensor(got[1:]), [np.linalg.cond(singular[1], p)], kiln.float64)
    assert linalg.cond(x).numpy()[0] > 1e15  # the smallest singular value is 0 (up to rounding)
    assert math.isnan(linalg.cond(mint.zeros(2, 2, dtype=kiln.float64)).item())  # 0 / 0
    assert linalg.cond(mint.zeros(2, 0, 0, dtype=kiln.float64), 1).numpy().tolist() == [0.0, 0.0]
    with raises(kiln.ShapeError, match="square"):
        linalg.cond(mint.ones(2, 3, dtype=kiln.float64), 1)
    with raises(kiln.KilnValueError, match="got 3"):
        linalg.cond(mint.eye(2, dtype=kiln.float64), 3)
    with raises(kiln.DTypeError, match="float32 or float64"):
        linalg.cond(mint.eye(2, dtype=kiln.int64))


@pytest.mark.parametrize("dtype", FLOATS)
def test_matrix_rank_matches_numpy(dtype, rng):
    for a in (rank_deficient(rng, 5, 4, 2), rng.standard_normal((2, 3, 5)),
              rank_deficient(rng, 4, 4, 3, (3,))):
        a = as_dtype(a, dtype)
        x = kiln.tensor(a, dtype=dtype)
        got = linalg.matrix_rank(x)
        assert got.dtype == kiln.int64
        np.testing.assert_array_equal(got.numpy(), np.linalg.matrix_rank(
            a, rtol=np.finfo(dtype.name).eps * max(a.shape[-2:])))
        np.testing.assert_array_equal(linalg.matrix_rank(x, tol=0.5).numpy(),
                                      np.linalg.matrix_rank(a, tol=0.5))
    s = as_dtype(rank_deficient(rng, 4, 4, 2), dtype)
    s = s @ s.T
    assert linalg.matrix_rank(kiln.tensor(s, dtype=dtype), hermitian=True).item() == 2


def test_matrix_rank_tolerances(rng):
    # Singular values 4, 2, 1, 0.5 in every matrix.
    u = np.linalg.qr(rng.standard_normal((2, 4, 4)))[0]
    a = u @ (np.array([4.0, 2.0, 1.0, 0.5])[:, None] * np.eye(4))
    x = kiln.tensor(a)
    assert linalg.matrix_rank(x, atol=1.5).numpy().tolist() == [2, 2]
    assert linalg.matrix_rank(x, rtol=0.2).numpy().tolist() == [3, 3]  # above 0.8
    assert linalg.matrix_rank(x, atol=0.1, rtol=0.3).numpy().tolist() == [2, 2]  # above 1.2
    assert linalg.matrix_rank(x, atol=kiln.tensor([3.0, 0.7])).numpy().tolist() == [1, 3]
    assert linalg.matrix_rank(x, rtol=kiln.tensor([0.6, 0.01])).numpy().tolist() == [1, 4]
    assert linalg.matrix_rank(x, atol=kiln.tensor([0.0, 0.0])).numpy().tolist() == [4, 4]
    with raises(kiln.KilnTypeError, match="tol or atol / rtol, not both"):
        linalg.matrix_rank(x, 0.5, atol=0.1)
    with raises(kiln.KilnTypeError, match="atol must be None, a number or a tensor"):
        linalg.matrix_rank(x, atol="big")
    with raises(kiln.ShapeError, match="square"):
        linalg.matrix_rank(mint.ones(2, 3, dtype=kiln.float64), hermitian=True)


def test_matrix_rank_of_empty_matrices():
    assert linalg.matrix_rank(mint.zeros(0, 3, dtype=kiln.float64)).item() == 0
    got = linalg.matrix_rank(mint.zeros(2, 3, 0, dtype=kiln.float64))
    assert got.numpy().tolist() == [0, 0] and got.dtype == kiln.int64
    assert linalg.matrix_rank(mint.zeros(0, 2, 2, dtype=kiln.float64)).shape == (0,)


# ------------------------------------------------------------------------------------------------
# pinv, lstsq


@pytest.mark.parametrize("dtype", FLOATS)
def test_pinv_matches_numpy(dtype, rng):
    for a in (rng.standard_normal((2, 4, 3)), rng.standard_normal((3, 5)),
              rank_deficient(rng, 5, 4, 2)):
        a = as_dtype(a, dtype)
        x = kiln.tensor(a, dtype=dtype)
        rtol = np.finfo(dtype.name).eps * max(a.shape[-2:])
        close(linalg.pinv(x), np.linalg.pinv(a, rtol=rtol), dtype, 100)
        close(linalg.pinv(x, rcond=0.3), np.linalg.pinv(a, rcond=0.3), dtype, 100)
        close(linalg.pinv(x, 0.3), np.linalg.pinv(a, rcond=0.3), dtype, 100)
        close(linalg.pinv(x, atol=1.0), _pinv_above(a, 1.0), dtype, 100)  # rtol then 0
        close(mint.pinverse(x, 0.3), np.linalg.pinv(a, rcond=0.3), dtype, 100)
        close(x.pinverse(), np.linalg.pinv(a, rcond=1e-15), dtype, 100)
    s = as_dtype(rank_deficient(rng, 4, 4, 3), dtype)
    s = s + s.T
    close(linalg.pinv(kiln.tensor(s, dtype=dtype), hermitian=True),
          np.linalg.pinv(s, hermitian=True, rtol=np.finfo(dtype.name).eps * 4), dtype, 100)


def _pinv_above(a, threshold):
    """The pseudo-inverse from the singular values above ``threshold`` (NumPy's SVD)."""
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    inverted = np.where(s > threshold, 1 / np.where(s > threshold, s, 1), 0)
    return mT(vh) @ (inverted[..., :, None] * mT(u))


def test_pinv_of_empty_matrices_and_errors():
    assert linalg.pinv(mint.zeros(0, 3, dtype=kiln.float64)).shape == (3, 0)
    assert linalg.pinv(mint.zeros(2, 3, 0, dtype=kiln.float32)).shape == (2, 0, 3)
    with raises(kiln.KilnTypeError, match="rcond or atol / rtol, not both"):
        linalg.pinv(mint.eye(2), rcond=0.1, rtol=0.1)
    with raises(kiln.DTypeError, match="float32 or float64"):
        linalg.pinv(mint.eye(2, dtype=kiln.float16))


LSTSQ_CASES = {
    "tall": ((5, 3), (5, 2)),
    "wide": ((3, 5), (3, 2)),
    "square": ((4, 4), (4, 1)),
    "batch": ((2, 5, 3), (2, 5, 2)),
    "broadcast": ((1, 5, 3), (2, 5, 2)),
    "vector": ((5, 3), (5,)),
    "batch of vectors": ((2, 5, 3), (2, 5)),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", sorted(LSTSQ_CASES))
def test_lstsq_solution_is_numpys_minimum_norm_solution(dtype, case, rng):
    a_shape, b_shape = LSTSQ_CASES[case]
    a, x = matrices(rng, a_shape, dtype)
    b, y = matrices(rng, b_shape, dtype)
    solution = linalg.lstsq(x, y).solution
    vector = len(b_shape) == len(a_shape) - 1 or len(b_shape) == 1
    want = np.linalg.pinv(a) @ (b[..., None] if vector else b)
    close(solution, want[..., 0] if vector else want, dtype, 100)


def test_lstsq_of_rank_deficient_matrices_is_the_minimum_norm_solution(rng):
    a = rank_deficient(rng, 6, 4, 2)
    b = rng.standard_normal((6, 3))
    result = linalg.lstsq(kiln.tensor(a), kiln.tensor(b))
    close(result.solution, np.linalg.lstsq(a, b, rcond=None)[0], kiln.float64, 100)
    assert result.rank.item() == 2
    # rcond: singular values up to rcond times the largest count as 0.
    d = np.diag([1.0, 0.1, 0.01])
    cut = linalg.lstsq(kiln.tensor(d), kiln.tensor(np.ones((3, 1))), rcond=0.05)
    np.testing.assert_allclose(cut.solution.numpy()[:, 0], [1.0, 10.0, 0.0], atol=1e-12)
    assert cut.rank.item() == 2


@pytest.mark.parametrize("dtype", FLOATS)
def test_lstsq_fields_match_numpy(dtype, rng):
    # NumPy's lstsq is LAPACK's gelsd: residuals for m > n at full rank, rank, singular values.
    for a in (rng.standard_normal((6, 3)), rank_deficient(rng, 6, 3, 2),
              rng.standard_normal((3, 5))):
        a = as_dtype(a, dtype)
        b, y = matrices(rng, (a.shape[0], 2), dtype)
        solution, residuals, rank, values = np.linalg.lstsq(
            a, b, rcond=np.finfo(dtype.name).eps * max(a.shape))
        got = linalg.lstsq(kiln.tensor(a, dtype=dtype), y, driver="gelsd")
        close(got.solution, solution, dtype, 100)
        close(got.residuals, residuals, dtype, 100)
        assert got.rank.item() == rank and got.rank.dtype == kiln.int64
        close(got.singular_values, values, dtype, 10)
        default = linalg.lstsq(kiln.tensor(a, dtype=dtype), y)  # "gelsy": no residuals or values
        assert default.residuals.shape == (0,) and default.singular_values.shape == (0,)
        assert default.rank.item() == rank
    empty = linalg.lstsq(mint.zeros(0, 4, 3, dtype=dtype), mint.zeros(0, 4, 2, dtype=dtype))
    assert empty.solution.shape == (0, 3, 2) and empty.rank.shape == (0,)


@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("case", sorted(LSTSQ_CASES) + [
    "deficient", "some deficient", "empty rows", "empty cols"])
def test_lstsq_fields_are_pytorchs(torch, driver, case, rng):
    if case == "deficient":
        a, b = rank_deficient(rng, 5, 3, 2), rng.standard_normal((5, 2))
    elif case == "some deficient":
        a = np.stack([rank_deficient(rng, 5, 3, 2), rng.standard_normal((5, 3))])
        b = rng.standard_normal((2, 5, 2))
    elif case == "empty rows":
        a, b = np.zeros((0, 3)), np.zeros((0, 2))
    elif case == "empty cols":
        a, b = np.zeros((3, 0)), rng.standard_normal((3, 2))
    else:
        a_shape, b_shape = LSTSQ_CASES[case]
        a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    ours = linalg.lstsq(kiln.tensor(a), kiln.tensor(b), driver=driver)
    theirs = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
    # "gels" assumes full rank: its solution and residuals for rank-deficient matrices are not
    # the minimum-norm ones (Kiln's), and for no columns PyTorch's residuals are 0, not |B|^2.
    ill_posed = driver == "gels" and ("deficient" in case or case == "empty cols")
    for name in ("rank", "singular_values") + (() if ill_posed else ("solution", "residuals")):
        got, want = getattr(ours, name), getattr(theirs, name)
        assert got.shape == tuple(want.shape), name
        assert got.dtype.name == str(want.dtype).replace("torch.", ""), name
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-9, atol=1e-10,
                                   err_msg=name)


def test_lstsq_errors():
    a = mint.ones(4, 3, dtype=kiln.float64)
    with raises(kiln.ShapeError, match="B with 4 rows"):
        linalg.lstsq(a, mint.ones(3, 2, dtype=kiln.float64))
    with raises(kiln.DTypeError, match="one dtype, got float64 and float32"):
        linalg.lstsq(a, mint.ones(4, 2))
    with raises(kiln.KilnValueError, match="driver must be None or one of gels, gelsy"):
        linalg.lstsq(a, mint.ones(4, 2, dtype=kiln.float64), driver="gesvd")
    with raises(kiln.KilnTypeError, match="rcond must be None or a number"):
        linalg.lstsq(a, mint.ones(4, 2, dtype=kiln.float64), rcond="small")
    with raises(kiln.ShapeError):
        linalg.lstsq(mint.ones(2, 4, 3, dtype=kiln.float64), mint.ones(3, 4, 2,
                                                                       dtype=kiln.float64))


# ------------------------------------------------------------------------------------------------
# matrix_power, matrix_exp


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [0, 1, 2, 3, 6, -1, -3])
def test_matrix_power_matches_numpy(dtype, n, rng):
    a = as_dtype(rng.standard_normal((2, 3, 3)) + 2 * np.eye(3), dtype)
    x = kiln.tensor(a, dtype=dtype)
    want = np.linalg.matrix_power(a, n)
    for got in (linalg.matrix_power(x, n), mint.matrix_power(x, n), x.matrix_power(n)):
        close(got, want, dtype, 1000)
        assert got is not x


def test_matrix_power_of_integers_empty_and_errors():
    a = np.arange(9).reshape(3, 3)
    got = linalg.matrix_power(kiln.tensor(a, dtype=kiln.int64), 3)
    assert got.dtype == kiln.int64
    np.testing.assert_array_equal(got.numpy(), np.linalg.matrix_power(a, 3))
    np.testing.assert_array_equal(linalg.matrix_power(kiln.tensor(a, dtype=kiln.int32), 0).numpy(),
                                  np.eye(3))
    assert linalg.matrix_power(mint.zeros(0, 2, 2), -2).shape == (0, 2, 2)
    with raises(kiln.DTypeError, match="inverted for n < 0.*float32 or float64 tensor, got int64"):
        linalg.matrix_power(kiln.tensor(a, dtype=kiln.int64), -1)
    with raises(kiln.KilnTypeError, match="n must be an int"):
        linalg.matrix_power(mint.eye(2), 2.0)
    with raises(kiln.ShapeError, match="square"):
        linalg.matrix_power(mint.ones(2, 3), 2)
    with raises(linalg.LinAlgError, match="singular"):
        linalg.matrix_power(mint.zeros(2, 2), -1)


def _expm_reference(a):
    """exp of diagonalizable matrices through NumPy's eigendecomposition (complex arithmetic)."""
    w, v = np.linalg.eig(a)
    return np.real(v @ (np.exp(w)[..., None] * np.linalg.inv(v)))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("scale", [0.01, 1.0, 8.0, 30.0])
def test_matrix_exp_matches_the_eigendecomposition(dtype, scale, rng):
    s = rng.standard_normal((2, 4, 4))
    a = as_dtype(scale * (s + mT(s)) / 4, dtype)  # symmetric: a well-conditioned reference
    x = kiln.tensor(a, dtype=dtype)
    w, v = np.linalg.eigh(a)
    want = v @ (np.exp(w)[..., None] * mT(v))
    for got in (linalg.matrix_exp(x), mint.matrix_exp(x), x.matrix_exp()):
        assert got.dtype == dtype
        close(got, want, dtype, 1e3 if scale > 1 else 10)
    general = as_dtype(scale * rng.standard_normal((3, 3)) / 3, dtype)
    close(linalg.matrix_exp(kiln.tensor(general, dtype=dtype)), _expm_reference(general), dtype,
          1e4)


def test_matrix_exp_closed_forms():
    theta = 0.7
    rotation = linalg.matrix_exp(kiln.tensor([[0.0, -theta], [theta, 0.0]]))
    close(rotation, [[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]],
          kiln.float32)
    nilpotent = np.array([[0.0, 1.0, 2.0], [0.0, 0.0, 3.0], [0.0, 0.0, 0.0]])
    close(linalg.matrix_exp(kiln.tensor(nilpotent)),
          np.eye(3) + nilpotent + nilpotent @ nilpotent / 2, kiln.float64)
    big = np.diag([-300.0, 5.0, 700.0])  # 1-norm 700: about 7 squarings
    close(linalg.matrix_exp(kiln.tensor(big)), np.diag(np.exp([-300.0, 5.0, 700.0])),
          kiln.float64, 100)
    assert linalg.matrix_exp(mint.zeros(2, 0, 0)).shape == (2, 0, 0)
    assert np.isnan(linalg.matrix_exp(kiln.tensor([[math.nan]])).item())


def test_matrix_exp_errors():
    with raises(kiln.DTypeError, match="linalg.matrix_exp: expected A to be a float32 or "
                                       "float64 tensor, got int64"):
        linalg.matrix_exp(mint.zeros(2, 2, dtype=kiln.int64))
    with raises(kiln.ShapeError, match="square"):
        linalg.matrix_exp(mint.zeros(2, 3))
    with raises(kiln.KilnTypeError, match="linalg.matrix_exp: expected A to be a kiln.Tensor"):
        linalg.matrix_exp(1.0)


def test_matrix_exp_under_jit(rng):
    a = rng.standard_normal((2, 3, 3))
    jitted = kiln.jit(linalg.matrix_exp)
    close(jitted(kiln.tensor(a)), linalg.matrix_exp(kiln.tensor(a)).numpy(), kiln.float64)
    # 1-norms past the traced squarings' reach are NaN there, not silently wrong.
    huge = jitted(kiln.tensor(np.stack([a[0], 1e7 * a[1]]))).numpy()
    assert np.all(np.isfinite(huge[0])) and np.all(np.isnan(huge[1]))


# ------------------------------------------------------------------------------------------------
# multi_dot, householder_product, tensorinv, tensorsolve


@pytest.mark.parametrize("shapes", [[(3, 4), (4, 5)], [(3,), (3, 10), (10, 2), (2,)],
                                    [(30, 3), (3, 10), (10, 2), (2, 40), (40, 5)],
                                    [(4,), (4,)], [(2, 0), (0, 3), (3,)]])
def test_multi_dot_is_numpys(shapes, rng):
    arrays = [rng.standard_normal(s) for s in shapes]
    close(linalg.multi_dot([kiln.tensor(a) for a in arrays]), np.linalg.multi_dot(arrays),
          kiln.float64, 10)


def test_multi_dot_multiplies_in_the_cheapest_order():
    from kiln.linalg._functions import _chain_order
    # [10, 100] [100, 5] [5, 50]: (AB)C costs 7500 multiplications, A(BC) 75000.
    assert _chain_order([(10, 100), (100, 5), (5, 50)])[0][2] == 1
    assert _chain_order([(50, 5), (5, 100), (100, 10)])[0][2] == 0


def test_multi_dot_errors():
    m = mint.ones(2, 2)
    with raises(kiln.KilnValueError, match="at least 2 tensors, got 1"):
        linalg.multi_dot([m])
    with raises(kiln.KilnTypeError, match="list or tuple"):
        linalg.multi_dot(m)
    with raises(kiln.ShapeError, match=r"tensors\[1\] to be 2-d"):
        linalg.multi_dot([m, mint.ones(2), m])
    with raises(kiln.ShapeError, match=r"tensors\[0\] and tensors\[1\] cannot be multiplied"):
        linalg.multi_dot([m, mint.ones(3, 2)])
    with raises(kiln.DTypeError, match="one dtype"):
        linalg.multi_dot([m, mint.ones(2, 2, dtype=kiln.float64)])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(5, 3), (4, 4), (6, 2)])
def test_householder_product_rebuilds_numpys_q(dtype, shape, rng):
    a = rng.standard_normal(shape)
    packed, tau = np.linalg.qr(a, mode="raw")  # LAPACK's geqrf, transposed
    packed = as_dtype(packed.T, dtype)
    got = linalg.householder_product(kiln.tensor(packed, dtype=dtype),
                                     kiln.tensor(as_dtype(tau, dtype), dtype=dtype))
    close(got, np.linalg.qr(a)[0], dtype, 10)
    batch = linalg.householder_product(kiln.tensor(np.stack([packed, packed]), dtype=dtype),
                                       kiln.tensor(np.stack([tau, tau]), dtype=dtype))
    close(batch, np.stack([np.linalg.qr(a)[0]] * 2), dtype, 10)


def test_householder_product_errors():
    with raises(kiln.ShapeError, match="m >= n"):
        linalg.householder_product(mint.ones(2, 3), mint.ones(2))
    with raises(kiln.ShapeError, match="k <= n"):
        linalg.householder_product(mint.ones(3, 2), mint.ones(3))
    with raises(kiln.ShapeError, match="batch dims"):
        linalg.householder_product(mint.ones(2, 3, 2), mint.ones(3, 2))


@pytest.mark.parametrize("dtype", FLOATS)
def test_tensorinv_and_tensorsolve_match_numpy(dtype, rng):
    a = as_dtype(rng.standard_normal((4, 6, 8, 3)), dtype)
    close(linalg.tensorinv(kiln.tensor(a, dtype=dtype)), np.linalg.tensorinv(a), dtype, 1e3)
    b = as_dtype(rng.standard_normal((2, 3, 6)), dtype)
    flat = np.moveaxis(b, 2, 0)  # [6, 2, 3]
    close(linalg.tensorinv(kiln.tensor(flat, dtype=dtype), ind=1), np.linalg.tensorinv(flat, 1),
          dtype, 1e3)
    c, y = matrices(rng, (2, 3), dtype)
    close(linalg.tensorsolve(kiln.tensor(b, dtype=dtype), y), np.linalg.tensorsolve(b, c), dtype,
          1e3)
    moved = np.moveaxis(b, 2, 0)  # dims move the solution's dims to the end first
    close(linalg.tensorsolve(kiln.tensor(moved, dtype=dtype), y, dims=(0,)),
          np.linalg.tensorsolve(moved, c, axes=(0,)), dtype, 1e3)


def test_tensorinv_and_tensorsolve_errors():
    with raises(kiln.ShapeError, match=r"products.*\(12 and 8\)"):
        linalg.tensorinv(mint.ones(3, 4, 8), ind=2)
    with raises(kiln.KilnValueError, match="ind must be at least 1"):
        linalg.tensorinv(mint.ones(2, 2), ind=0)
    with raises(kiln.ShapeError, match="B's shape"):
        linalg.tensorsolve(mint.ones(2, 3, 4), mint.ones(2, 3))
    with raises(kiln.KilnTypeError, match="dims must be None or a sequence"):
        linalg.tensorsolve(mint.ones(2, 2), mint.ones(2), dims="0")


# ------------------------------------------------------------------------------------------------
# cross, vecdot, diagonal, vander


def test_cross_vecdot_and_diagonal_match_numpy(rng):
    a, b = rng.standard_normal((2, 4, 3)), rng.standard_normal((1, 4, 3))
    close(linalg.cross(kiln.tensor(a), kiln.tensor(b)), np.cross(a, b), kiln.float64)
    c, d = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
    close(linalg.cross(kiln.tensor(c), kiln.tensor(d), dim=0), np.cross(c, d, axis=0),
          kiln.float64)
    close(linalg.vecdot(kiln.tensor(a), kiln.tensor(b)), np.sum(a * b, -1), kiln.float64)
    close(linalg.vecdot(kiln.tensor(a), kiln.tensor(b), dim=1), np.sum(a * b, 1), kiln.float64)
    close(linalg.diagonal(kiln.tensor(a)), np.diagonal(a, 0, -2, -1), kiln.float64)
    close(linalg.diagonal(kiln.tensor(a), offset=-1, dim1=0, dim2=1), np.diagonal(a, -1, 0, 1),
          kiln.float64)
    with raises(kiln.DTypeError, match="floating-point tensors, got int64"):
        linalg.vecdot(mint.ones(3, dtype=kiln.int64), mint.ones(3, dtype=kiln.int64))
    with raises(kiln.DTypeError, match="one dtype"):
        linalg.vecdot(mint.ones(3), mint.ones(3, dtype=kiln.float64))
    with raises(kiln.ShapeError, match="size 3"):
        linalg.cross(mint.ones(2), mint.ones(2))


@pytest.mark.parametrize("dtype", FLOATS + [kiln.int32, kiln.int64])
def test_vander_has_increasing_powers(dtype, rng):
    x = np.array([[1, 2, 3, -1], [0, 2, -2, 4]])
    got = linalg.vander(kiln.tensor(x, dtype=dtype))
    assert got.dtype == (dtype if dtype.is_floating_point else kiln.int64)
    want = np.stack([np.vander(row, increasing=True) for row in x])
    np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(linalg.vander(kiln.tensor(x[0], dtype=dtype), N=6).numpy(),
                                  np.vander(x[0], 6, increasing=True))
    assert linalg.vander(kiln.tensor(2.0), N=3).numpy().tolist() == [[1.0, 2.0, 4.0]]
    with raises(kiln.KilnValueError, match="N must be at least 2, got 1"):
        linalg.vander(kiln.tensor([3.0]))
    with raises(kiln.DTypeError, match="float16"):
        linalg.vander(mint.ones(3, dtype=kiln.float16))


# ------------------------------------------------------------------------------------------------
# cholesky_solve, cholesky_inverse


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_and_inverse(dtype, upper, rng):
    a, x = spd(rng, (2, 4, 4), dtype)
    factor = linalg.cholesky(x, upper=upper)
    b, y = matrices(rng, (3, 1, 4, 2), dtype)
    close(mint.cholesky_solve(y, factor, upper), np.linalg.solve(a, b), dtype, 100)
    close(mint.cholesky_inverse(factor, upper=upper), np.linalg.inv(a), dtype, 100)


def test_cholesky_solve_errors():
    with raises(kiln.ShapeError, match="input to be a tensor of matrices"):
        mint.cholesky_solve(mint.ones(3), mint.eye(3))
    with raises(kiln.ShapeError, match="input to be square"):
        mint.cholesky_inverse(mint.ones(2, 3))
    with raises(kiln.ShapeError, match="input2 to be square"):
        mint.cholesky_solve(mint.ones(2, 1), mint.ones(2, 3))


def test_top_level_spellings_take_torchs_argument_names(rng):
    # torch.det(input=...) where torch.linalg.det(A): kiln.mint follows the top-level names.
    a = kiln.tensor(rng.standard_normal((3, 3)) + 3 * np.eye(3))
    spd_matrix = a @ a.mT
    factor = linalg.cholesky(spd_matrix)
    b = kiln.tensor(rng.standard_normal((3, 2)))
    close(mint.det(input=a), linalg.det(a).numpy(), kiln.float64)
    close(mint.slogdet(input=a).logabsdet, linalg.slogdet(a).logabsdet.numpy(), kiln.float64)
    close(mint.inverse(input=a), linalg.inv(a).numpy(), kiln.float64)
    close(mint.matrix_power(input=a, n=3), (a @ a @ a).numpy(), kiln.float64, 100)
    close(mint.matrix_exp(input=a), linalg.matrix_exp(a).numpy(), kiln.float64)
    close(mint.logdet(input=spd_matrix), linalg.slogdet(spd_matrix).logabsdet.numpy(),
          kiln.float64)
    close(mint.cholesky_solve(input=b, input2=factor), linalg.solve(spd_matrix, b).numpy(),
          kiln.float64, 100)
    close(mint.cholesky_inverse(input=factor), linalg.inv(spd_matrix).numpy(), kiln.float64, 100)
    with raises(kiln.KilnTypeError, match="upper must be a bool"):
        mint.cholesky_solve(mint.ones(3, 1), mint.eye(3), upper=None)


# ------------------------------------------------------------------------------------------------
# Gradients


def test_gradients_match_finite_differences(rng):
    tall = leaf(rng.standard_normal((2, 5, 3)))
    square = leaf(rng.standard_normal((2, 3, 3)) + 3 * np.eye(3))
    rhs = leaf(rng.standard_normal((2, 5, 2)))
    for ord in ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf):  # noqa: A001
        gradcheck(lambda a: linalg.matrix_norm(a, ord), (tall,))
    for p in (None, -2, "fro", "nuc", 1, math.inf):
        gradcheck(lambda a: linalg.cond(a, p), (square,))
    gradcheck(linalg.pinv, (tall,))
    gradcheck(lambda a: linalg.pinv(a + a.mT, hermitian=True), (square,))
    gradcheck(lambda a, b: tuple(linalg.lstsq(a, b, driver="gels")[:2]), (tall, rhs))
    gradcheck(lambda a: linalg.matrix_power(a, 3), (square,))
    gradcheck(lambda a: linalg.matrix_power(a, -2), (square,))
    gradcheck(linalg.matrix_exp, (square,))
    gradcheck(lambda a: linalg.matrix_exp(10 * a), (square,), rtol=1e-3, atol=1e-3)
    gradcheck(lambda a, b, c: linalg.multi_dot([a, b, c]),
              (leaf(rng.standard_normal(3)), leaf(rng.standard_normal((3, 4))),
               leaf(rng.standard_normal((4, 2)))))
    gradcheck(linalg.householder_product, (tall, leaf(rng.standard_normal((2, 3)))))
    gradcheck(linalg.tensorinv, (leaf(rng.standard_normal((2, 3, 6)) + np.eye(6).reshape(
        2, 3, 6)),))
    gradcheck(lambda a, b: linalg.tensorsolve(a, b),
              (leaf(rng.standard_normal((2, 3, 6)) + np.eye(6).reshape(2, 3, 6)),
               leaf(rng.standard_normal((2, 3)))))
    gradcheck(lambda a, b: linalg.vecdot(a, b), (tall, leaf(rng.standard_normal((5, 3)))))
    gradcheck(lambda x: linalg.vander(x, N=4), (leaf(rng.standard_normal((2, 3))),))
    lower = leaf(np.linalg.cholesky(spd(rng, (3, 3), kiln.float64)[0]))
    gradcheck(lambda b, f: mint.cholesky_solve(b, f), (leaf(rng.standard_normal((3, 2))), lower))
    gradcheck(lambda f: mint.cholesky_inverse(f, True), (lower,))
    gradcheck(mint.logdet, (leaf(spd(rng, (3, 3), kiln.float64)[0]),))


def test_pinv_gradient_is_defined_at_repeated_singular_values(torch):
    # The singular values of I repeat: the SVD's gradient is not defined there, pinv's is.
    for shape in ((3, 3), (4, 2), (2, 4)):
        eye = np.eye(*shape)
        x, twin = leaf(eye), torch.tensor(eye, requires_grad=True)
        upstream = np.arange(eye.size, dtype=np.float64).reshape(shape[::-1])
        (grad,) = kiln.autograd.grad(linalg.pinv(x), [x], kiln.tensor(upstream))
        (want,) = torch.autograd.grad(torch.linalg.pinv(twin), [twin], torch.tensor(upstream))
        np.testing.assert_allclose(grad.numpy(), want.numpy(), atol=1e-12)


def test_gradients_match_pytorch(torch, rng):
    tl = torch.linalg
    a = rng.standard_normal((2, 4, 3))
    square = rng.standard_normal((2, 3, 3)) + 3 * np.eye(3)
    b = rng.standard_normal((2, 4, 2))
    cases = [
        ("pinv", linalg.pinv, tl.pinv, [a]),
        ("pinv rank-deficient", linalg.pinv, tl.pinv, [rank_deficient(rng, 4, 3, 2)]),
        ("lstsq", lambda a, b: linalg.lstsq(a, b).solution,
         lambda a, b: tl.lstsq(a, b).solution, [a, b]),
        ("matrix_exp", linalg.matrix_exp, tl.matrix_exp, [3 * square]),
        ("matrix_power", lambda a: linalg.matrix_power(a, -3),
         lambda a: tl.matrix_power(a, -3), [square]),
        ("cond", lambda a: linalg.cond(a, "nuc"), lambda a: tl.cond(a, "nuc"), [square]),
        ("matrix_norm", lambda a: linalg.matrix_norm(a, -2), lambda a: tl.matrix_norm(a, -2),
         [a]),
        ("householder_product", linalg.householder_product, tl.householder_product,
         [a, rng.standard_normal((2, 3))]),
        ("cholesky_inverse", lambda f: mint.cholesky_inverse(f.tril()),
         lambda f: torch.cholesky_inverse(f.tril()), [square]),
    ]
    for name, ours, theirs, arrays in cases:
        expect_torch_gradients(torch, rng, name, ours, theirs, arrays, atol=1e-9)


def test_pinv_second_derivatives_match_pytorch(torch, rng):
    a = rng.standard_normal((3, 4))
    x, twin = leaf(a), torch.tensor(a, requires_grad=True)
    (grad,) = kiln.autograd.grad(mint.sum(linalg.pinv(x) ** 3), [x], create_graph=True)
    (want,) = torch.autograd.grad(torch.sum(torch.linalg.pinv(twin) ** 3), [twin],
                                  create_graph=True)
    (second,) = kiln.autograd.grad(mint.sum(grad * grad), [x])
    (second_want,) = torch.autograd.grad(torch.sum(want * want), [twin])
    np.testing.assert_allclose(second.numpy(), second_want.numpy(), rtol=1e-8, atol=1e-10)


# ------------------------------------------------------------------------------------------------
# kiln.jit


def test_traced_functions_give_the_eager_values(rng):
    def f(a, b):
        return (linalg.matrix_norm(a, "nuc") + linalg.matrix_norm(a, 2) + linalg.cond(a)
                + linalg.pinv(a).sum() + linalg.lstsq(a, b).solution.sum()
                + linalg.matrix_rank(a).to(a.dtype) + linalg.matrix_power(a.mT @ a, -2).sum()
                + linalg.multi_dot([a.mT, a, a.mT]).sum() + linalg.norm(a, 1))

    a = kiln.tensor(rng.standard_normal((4, 3)))
    b = kiln.tensor(rng.standard_normal((4, 2)))
    jitted = kiln.jit(f)
    eager = f(a, b).item()
    for _ in range(2):
        assert jitted(a, b).item() == pytest.approx(eager, rel=1e-12)
    np.testing.assert_allclose(kiln.jit(kiln.grad(f))(a, b).numpy(), kiln.grad(f)(a, b).numpy(),
                               rtol=1e-10)


def test_lstsq_residuals_that_read_ranks_are_eager_only(rng):
    a, b = kiln.tensor(rng.standard_normal((4, 3))), kiln.tensor(rng.standard_normal((4, 2)))
    with raises(kiln.KilnTypeError, match="kiln.jit traces cannot read"):
        kiln.jit(lambda a, b: linalg.lstsq(a, b, driver="gelsd").residuals)(a, b)
    traced = kiln.jit(lambda a, b: linalg.lstsq(a, b, driver="gels").residuals)(a, b)
    close(traced, linalg.lstsq(a, b, driver="gelsd").residuals.numpy(), kiln.float64)
