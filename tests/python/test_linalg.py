"""kiln.linalg's factorizations, solves, determinants and decompositions (python/kiln/linalg/
_decompositions.py): values against NumPy in float32 and float64 over single, batched and empty
matrices and broadcast operands, what each decomposition determines (decompositions are compared
through invariants, never sign by sign), the info of the _ex forms and the errors, gradients by
finite differences and against PyTorch, kiln.jit against eager, and the kiln.mint and Tensor
spellings. The composed functions (norms, lstsq, matrix_exp, ...) are in test_linalg_composite.py.
"""

import numpy as np
import pytest

import kiln
from conftest import raises
from kiln import linalg
from kiln.testing import gradcheck

mint = kiln.mint
FLOATS = [kiln.float32, kiln.float64]
SQUARE = [(3, 3), (2, 4, 4), (2, 1, 3, 3), (1, 1)]
RECTANGULAR = [(4, 3), (3, 5), (2, 5, 2), (2, 1, 2, 4)]


def as_dtype(array, dtype):
    """``array`` rounded to ``dtype`` (as float64, the NumPy reference's input)."""
    return np.asarray(array).astype(dtype.name).astype(np.float64)


def close(actual, expected, dtype, scale=1.0):
    """``actual`` equal to the float64 ``expected`` to ``dtype``'s rounding: the primitives
    compute in float64, so a float32 result is off by its last place (times ``scale``, the
    conditioning of the problem), a float64 one by a few."""
    got = actual.numpy() if isinstance(actual, kiln.Tensor) else np.asarray(actual)
    want = np.asarray(expected, np.float64)
    assert got.shape == want.shape, f"shape {got.shape} != expected {want.shape}"
    tolerance = (3e-6 if dtype == kiln.float32 else 1e-12) * scale
    magnitude = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tolerance,
                               atol=tolerance * magnitude)


def matrices(rng, shape, dtype):
    """Random matrices of ``shape`` (as a float64 array of dtype's values, and the tensor)."""
    values = as_dtype(rng.standard_normal(shape), dtype)
    return values, kiln.tensor(values, dtype=dtype)


def spd(rng, shape, dtype):
    """Symmetric positive-definite matrices A A^T + n I (the array and the tensor)."""
    a = rng.standard_normal(shape)
    values = as_dtype(a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1]), dtype)
    return values, kiln.tensor(values, dtype=dtype)


def mT(a):  # noqa: N802
    return np.swapaxes(a, -1, -2)


def leaf(values):
    return kiln.tensor(np.asarray(values, np.float64)).requires_grad_()


# ------------------------------------------------------------------------------------------------
# Cholesky


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SQUARE)
def test_cholesky_is_numpys_factor_and_upper_its_transpose(dtype, shape, rng):
    a, x = spd(rng, shape, dtype)
    want = np.linalg.cholesky(a)
    close(linalg.cholesky(x), want, dtype)
    close(linalg.cholesky(x, upper=True), mT(want), dtype)
    factor, info = linalg.cholesky_ex(x)
    close(factor, want, dtype)
    assert info.dtype == kiln.int32 and info.shape == shape[:-2]
    assert not info.numpy().any()
    assert x.cholesky().dtype == dtype
    close(x.cholesky(True), mT(want), dtype)


def test_cholesky_reads_only_the_lower_triangle(rng):
    a, x = spd(rng, (4, 4), kiln.float64)
    garbage = np.tril(a) + np.triu(rng.standard_normal((4, 4)), 1)
    close(linalg.cholesky(kiln.tensor(garbage)), np.linalg.cholesky(a), kiln.float64)


def test_cholesky_of_a_matrix_not_positive_definite(rng):
    good, _ = spd(rng, (3, 3), kiln.float64)
    bad = np.diag([1.0, -1.0, 1.0])  # its leading minor of order 2 is negative
    batch = kiln.tensor(np.stack([good, bad, good]))
    assert linalg.cholesky_ex(batch).info.numpy().tolist() == [0, 2, 0]
    with raises(linalg.LinAlgError, match=r"not positive-definite.*order 2"):
        linalg.cholesky(batch)
    with raises(kiln.KilnValueError, match="not positive-definite"):
        linalg.cholesky_ex(batch, check_errors=True)


# ------------------------------------------------------------------------------------------------
# LU


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SQUARE + RECTANGULAR)
def test_lu_reconstructs_the_matrix_with_partial_pivoting(dtype, shape, rng):
    a, x = matrices(rng, shape, dtype)
    p, lower, upper = linalg.lu(x)
    m, n = shape[-2:]
    k = min(m, n)
    batch = shape[:-2]
    assert (p.shape, lower.shape, upper.shape) == (batch + (m, m), batch + (m, k), batch + (k, n))
    close(p @ lower @ upper, a, dtype)
    perm = p.numpy()
    assert set(np.unique(perm)) <= {0.0, 1.0} and np.all(perm.sum(-1) == 1)
    low = lower.numpy()
    np.testing.assert_array_equal(np.diagonal(low, 0, -2, -1), 1.0)
    assert np.all(np.triu(low, 1) == 0) and np.all(np.abs(low) <= 1 + 1e-12)  # pivoted
    assert np.all(np.tril(upper.numpy(), -1) == 0)
    packed, pivots = linalg.lu_factor(x)
    assert pivots.dtype == kiln.int32 and pivots.shape == shape[:-2] + (k,)
    packed = packed.numpy()  # L below the diagonal, U on and above it
    np.testing.assert_array_equal(np.tril(packed, -1)[..., :, :k] + np.eye(m, k), low)
    np.testing.assert_array_equal(np.triu(packed)[..., :k, :], upper.numpy())
    ex = linalg.lu_factor_ex(x)
    assert not ex.info.numpy().any()
    np.testing.assert_array_equal(ex.pivots.numpy(), pivots.numpy())


def test_lu_of_a_singular_matrix_and_lu_factors_error():
    singular = kiln.tensor(np.array([[1.0, 2.0], [2.0, 4.0]]))
    p, lower, upper = linalg.lu(singular)
    close(p @ lower @ upper, singular.numpy(), kiln.float64)
    assert linalg.lu_factor_ex(singular).info.item() == 2
    with raises(linalg.LinAlgError, match="singular"):
        linalg.lu_factor(singular)
    with raises(kiln.KilnNotImplementedError, match="pivot=False"):
        linalg.lu_factor(singular, pivot=False)
    with raises(kiln.KilnNotImplementedError, match="without pivoting"):
        linalg.lu(singular, pivot=False)


@pytest.mark.parametrize("dtype", FLOATS)
def test_lu_solve_solves_both_sides_and_the_transpose(dtype, rng):
    a, x = matrices(rng, (2, 4, 4), dtype)
    b, y = matrices(rng, (3, 1, 4, 2), dtype)  # batch dims broadcast with A's
    factors = linalg.lu_factor(x)
    close(linalg.lu_solve(*factors, y), np.linalg.solve(a, b), dtype, 100)
    close(linalg.lu_solve(*factors, y, adjoint=True), np.linalg.solve(mT(a), b), dtype, 100)
    right = mT(b)
    close(linalg.lu_solve(*factors, kiln.tensor(right, dtype=dtype), left=False),
          mT(np.linalg.solve(mT(a), b)), dtype, 100)


# ------------------------------------------------------------------------------------------------
# solve, solve_triangular, inv


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SQUARE)
def test_solve_matches_numpy(dtype, shape, rng):
    a, x = matrices(rng, shape, dtype)
    b, y = matrices(rng, shape[:-1] + (2,), dtype)
    close(linalg.solve(x, y), np.linalg.solve(a, b), dtype, 100)
    result, info = linalg.solve_ex(x, y)
    close(result, np.linalg.solve(a, b), dtype, 100)
    assert info.shape == shape[:-2] and not info.numpy().any()
    # X @ A == B
    close(linalg.solve(x, kiln.tensor(mT(b), dtype=dtype), left=False),
          mT(np.linalg.solve(mT(a), b)), dtype, 100)


@pytest.mark.parametrize("dtype", FLOATS)
def test_solve_takes_vectors_and_broadcasts_batches(dtype, rng):
    a, x = matrices(rng, (2, 3, 3), dtype)
    v, y = matrices(rng, (2, 3), dtype)  # A's shape without its last dim: a batch of vectors
    got = linalg.solve(x, y)
    assert got.shape == (2, 3)
    close(got, np.linalg.solve(a, v[..., None])[..., 0], dtype, 100)
    single, z = matrices(rng, (3,), dtype)  # 1-d: one vector for every matrix
    close(linalg.solve(x, z), np.linalg.solve(a, np.broadcast_to(single, (2, 3))[..., None])[
        ..., 0], dtype, 100)
    b, w = matrices(rng, (4, 1, 3, 2), dtype)
    got = linalg.solve(x, w)
    assert got.shape == (4, 2, 3, 2)
    close(got, np.linalg.solve(a, b), dtype, 100)


def test_solve_and_inv_of_singular_matrices(rng):
    a, _ = matrices(rng, (3, 3), kiln.float64)
    batch = kiln.tensor(np.stack([a, np.zeros((3, 3)), a]))
    b = kiln.tensor(rng.standard_normal((3, 3, 1)))
    assert linalg.solve_ex(batch, b).info.numpy().tolist() == [0, 1, 0]
    assert linalg.inv_ex(batch).info.numpy().tolist() == [0, 1, 0]
    with raises(linalg.LinAlgError, match="singular"):
        linalg.solve(batch, b)
    with raises(linalg.LinAlgError, match="singular"):
        linalg.inv(batch)
    with raises(kiln.KilnValueError, match="singular"):
        linalg.inv_ex(batch, check_errors=True)
    with raises(kiln.KilnValueError, match="singular"):
        linalg.solve_ex(batch, b, check_errors=True)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular_reads_one_triangle(dtype, upper, left, unit, rng):
    a = rng.standard_normal((2, 4, 4)) + 4 * np.eye(4)
    a, x = as_dtype(a, dtype), kiln.tensor(as_dtype(a, dtype), dtype=dtype)
    tri = np.triu(a) if upper else np.tril(a)
    if unit:
        tri = tri - np.diagonal(tri, 0, -2, -1)[..., None] * np.eye(4) + np.eye(4)
    b, y = matrices(rng, (3, 1, 4, 2) if left else (3, 1, 2, 4), dtype)
    want = np.linalg.solve(tri, b) if left else mT(np.linalg.solve(mT(tri), mT(b)))
    got = linalg.solve_triangular(x, y, upper=upper, left=left, unitriangular=unit)
    close(got, want, dtype, 100)


def test_solve_triangular_needs_upper():
    eye = mint.eye(2, dtype=kiln.float64)
    with pytest.raises(TypeError, match="upper"):
        linalg.solve_triangular(eye, eye)
    with raises(kiln.KilnTypeError, match="upper must be a bool"):
        linalg.solve_triangular(eye, eye, upper=1)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SQUARE)
def test_inv_matches_numpy(dtype, shape, rng):
    a, x = matrices(rng, shape, dtype)
    want = np.linalg.inv(a)
    close(linalg.inv(x), want, dtype, 100)
    inverse, info = linalg.inv_ex(x)
    close(inverse, want, dtype, 100)
    assert not info.numpy().any()
    close(mint.inverse(x), want, dtype, 100)
    close(x.inverse(), want, dtype, 100)


# ------------------------------------------------------------------------------------------------
# det, slogdet, logdet


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SQUARE)
def test_determinants_match_numpy(dtype, shape, rng):
    a, x = matrices(rng, shape, dtype)
    want_sign, want_log = np.linalg.slogdet(a)
    close(linalg.det(x), np.linalg.det(a), dtype, 10)
    sign, logabsdet = linalg.slogdet(x)
    close(sign, want_sign, dtype)
    close(logabsdet, want_log, dtype, 10)
    for spelled in (mint.det(x), x.det()):
        close(spelled, np.linalg.det(a), dtype, 10)
    for spelled in (mint.slogdet(x), x.slogdet()):
        close(spelled.sign, want_sign, dtype)
        close(spelled.logabsdet, want_log, dtype, 10)
    for spelled in (mint.logdet(x), x.logdet()):  # NaN for a negative determinant
        close(spelled, np.where(want_sign < 0, np.nan, want_log), dtype, 10)


def test_determinants_of_singular_and_negative_matrices():
    singular = kiln.tensor(np.array([[1.0, 2.0], [2.0, 4.0]]))
    assert linalg.det(singular).item() == 0.0
    sign, logabsdet = linalg.slogdet(singular)
    assert sign.item() == 0.0 and logabsdet.item() == -np.inf
    assert mint.logdet(singular).item() == -np.inf
    negative = kiln.tensor(np.diag([2.0, -3.0]))
    assert np.isnan(mint.logdet(negative).item())
    assert linalg.slogdet(negative).sign.item() == -1.0


# ------------------------------------------------------------------------------------------------
# qr, eigh, svd


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SQUARE + RECTANGULAR)
def test_qr_factors_in_every_mode(dtype, shape, rng):
    a, x = matrices(rng, shape, dtype)
    m, n = shape[-2:]
    k = min(m, n)
    q, r = linalg.qr(x)
    assert (q.shape, r.shape) == (shape[:-2] + (m, k), shape[:-2] + (k, n))
    close(q @ r, a, dtype, 10)
    close(q.mT @ q, np.broadcast_to(np.eye(k), shape[:-2] + (k, k)), dtype, 10)
    assert np.all(np.tril(r.numpy(), -1) == 0)
    # R is unique up to the signs of its rows (Q's columns): |R| is NumPy's.
    close(mint.abs(r), np.abs(np.linalg.qr(a)[1]), dtype, 10)
    q, r = linalg.qr(x, mode="complete")
    assert (q.shape, r.shape) == (shape[:-2] + (m, m), shape[:-2] + (m, n))
    close(q @ r, a, dtype, 10)
    close(q.mT @ q, np.broadcast_to(np.eye(m), shape[:-2] + (m, m)), dtype, 10)
    q, r = linalg.qr(x, mode="r")
    assert q.numel() == 0 and r.shape == shape[:-2] + (k, n)
    close(mint.abs(r), np.abs(np.linalg.qr(a, mode="r")), dtype, 10)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SQUARE)
def test_eigh_decomposes_symmetric_matrices(dtype, shape, rng):
    a = rng.standard_normal(shape)
    a = as_dtype(a + mT(a), dtype)
    x = kiln.tensor(a, dtype=dtype)
    n = shape[-1]
    w, v = linalg.eigh(x)
    close(w, np.linalg.eigvalsh(a), dtype, 10)
    close(v @ (w.unsqueeze(-1) * v.mT), a, dtype, 10)
    close(v.mT @ v, np.broadcast_to(np.eye(n), shape[:-2] + (n, n)), dtype, 10)
    close(linalg.eigvalsh(x), np.linalg.eigvalsh(a), dtype, 10)
    # Only one triangle is read.
    lower_only = kiln.tensor(np.tril(a), dtype=dtype)
    upper_only = kiln.tensor(np.triu(a), dtype=dtype)
    close(linalg.eigvalsh(lower_only), np.linalg.eigvalsh(a), dtype, 10)
    close(linalg.eigh(upper_only, UPLO="U").eigenvalues, np.linalg.eigvalsh(a), dtype, 10)
    close(linalg.eigvalsh(upper_only, "u"), np.linalg.eigvalsh(a), dtype, 10)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SQUARE + RECTANGULAR)
def test_svd_decomposes_any_matrix(dtype, shape, rng):
    a, x = matrices(rng, shape, dtype)
    m, n = shape[-2:]
    k = min(m, n)
    want = np.linalg.svd(a, compute_uv=False)
    u, s, vh = linalg.svd(x, full_matrices=False)
    assert (u.shape, s.shape, vh.shape) == (shape[:-2] + (m, k), shape[:-2] + (k,),
                                            shape[:-2] + (k, n))
    close(s, want, dtype, 10)
    close(u @ (s.unsqueeze(-1) * vh), a, dtype, 10)
    close(u.mT @ u, np.broadcast_to(np.eye(k), shape[:-2] + (k, k)), dtype, 10)
    close(vh @ vh.mT, np.broadcast_to(np.eye(k), shape[:-2] + (k, k)), dtype, 10)
    u, s, vh = linalg.svd(x)
    assert (u.shape, vh.shape) == (shape[:-2] + (m, m), shape[:-2] + (n, n))
    close(u[..., :, :k] @ (s.unsqueeze(-1) * vh[..., :k, :]), a, dtype, 10)
    close(vh @ vh.mT, np.broadcast_to(np.eye(n), shape[:-2] + (n, n)), dtype, 10)
    close(linalg.svdvals(x), want, dtype, 10)
    close(linalg.svdvals(x, driver="gesvdj"), want, dtype, 10)
    close(linalg.svd(x, driver="gesvd").S, want, dtype, 10)


def test_rank_deficient_decompositions(rng):
    a = rng.standard_normal((5, 2)) @ rng.standard_normal((2, 4))  # rank 2
    x = kiln.tensor(a)
    s = linalg.svdvals(x).numpy()
    assert np.all(s[2:] < 1e-12) and np.all(s[:2] > 1e-3)
    u, s, vh = linalg.svd(x, full_matrices=False)
    close(u @ (s.unsqueeze(-1) * vh), a, kiln.float64, 10)
    q, r = linalg.qr(x)
    close(q @ r, a, kiln.float64, 10)
    w = linalg.eigvalsh(kiln.tensor(a @ a.T)).numpy()
    assert np.all(np.abs(w[:3]) < 1e-10)


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0), (0, 3, 3)])
def test_empty_square_matrices(shape):
    x = mint.zeros(list(shape), dtype=kiln.float64)
    batch = shape[:-2]
    n = shape[-1]
    np.testing.assert_array_equal(linalg.det(x).numpy(), np.ones(batch))
    sign, logabsdet = linalg.slogdet(x)
    assert sign.shape == batch and logabsdet.shape == batch
    for result in (linalg.cholesky(x), linalg.inv(x), linalg.solve(x, x), linalg.lu(x).U,
                   linalg.eigh(x).eigenvectors, linalg.qr(x).Q,
                   linalg.solve_triangular(x, x, upper=True)):
        assert result.shape == shape
    assert linalg.eigvalsh(x).shape == batch + (n,)
    assert linalg.cholesky_ex(x).info.shape == batch
    assert linalg.lu_factor(x).pivots.shape == batch + (n,)


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 4)])
def test_empty_rectangular_matrices(shape):
    x = mint.zeros(list(shape), dtype=kiln.float32)
    m, n = shape[-2:]
    k = min(m, n)
    u, s, vh = linalg.svd(x)
    assert (u.shape, s.shape, vh.shape) == (shape[:-2] + (m, m), shape[:-2] + (k,),
                                            shape[:-2] + (n, n))
    q, r = linalg.qr(x)
    assert (q.shape, r.shape) == (shape[:-2] + (m, k), shape[:-2] + (k, n))
    p, lower, upper = linalg.lu(x)
    batch = shape[:-2]
    assert (p.shape, lower.shape, upper.shape) == (batch + (m, m), batch + (m, k), batch + (k, n))


# ------------------------------------------------------------------------------------------------
# Errors

A_FIRST = {
    "cholesky": linalg.cholesky, "cholesky_ex": linalg.cholesky_ex, "lu": linalg.lu,
    "lu_factor": linalg.lu_factor, "lu_factor_ex": linalg.lu_factor_ex, "inv": linalg.inv,
    "inv_ex": linalg.inv_ex, "det": linalg.det, "slogdet": linalg.slogdet, "qr": linalg.qr,
    "eigh": linalg.eigh, "eigvalsh": linalg.eigvalsh, "svd": linalg.svd,
    "svdvals": linalg.svdvals,
}
A_AND_B = {
    "solve": linalg.solve, "solve_ex": linalg.solve_ex,
    "solve_triangular": lambda a, b: linalg.solve_triangular(a, b, upper=False),
}


@pytest.mark.parametrize("name", sorted(A_FIRST) + sorted(A_AND_B))
def test_a_number_is_a_type_error_naming_the_function(name):
    eye = mint.eye(2, dtype=kiln.float64)
    call = A_FIRST.get(name) or (lambda a: A_AND_B[name](a, eye))
    with raises(kiln.KilnTypeError, match=f"linalg.{name}: expected A to be a kiln.Tensor, got "
                                          f"float"):
        call(2.0)
    if name in A_AND_B:
        with raises(kiln.KilnTypeError, match=f"linalg.{name}: expected B to be a kiln.Tensor"):
            A_AND_B[name](eye, [[1.0], [2.0]])


@pytest.mark.parametrize("name", sorted(A_FIRST) + sorted(A_AND_B))
@pytest.mark.parametrize("dtype", [kiln.int32, kiln.int64, kiln.float16, kiln.bfloat16])
def test_dtypes_other_than_float32_and_float64_are_refused(name, dtype):
    x = mint.eye(2, dtype=dtype)
    call = A_FIRST.get(name) or (lambda a: A_AND_B[name](a, a))
    with raises(kiln.DTypeError, match=f"expected a float32 or float64 tensor, got {dtype.name}"):
        call(x)


def test_operands_of_two_dtypes_are_refused():
    with raises(kiln.DTypeError, match="one dtype, got float64 and float32"):
        linalg.solve(mint.eye(2, dtype=kiln.float64), mint.ones(2, 1, dtype=kiln.float32))


@pytest.mark.parametrize("name", ["cholesky", "inv", "det", "slogdet", "eigh", "eigvalsh",
                                  "solve", "solve_triangular"])
def test_non_square_matrices_are_refused(name):
    x = mint.ones(2, 3, dtype=kiln.float64)
    call = A_FIRST.get(name) or (lambda a: A_AND_B[name](a, mint.ones(2, 1, dtype=a.dtype)))
    with raises(kiln.ShapeError, match=r"expected square matrices, got 2 x 3"):
        call(x)


@pytest.mark.parametrize("name", sorted(A_FIRST))
def test_vectors_are_not_matrices(name):
    with raises(kiln.ShapeError, match="at least 2 dims"):
        A_FIRST[name](mint.ones(3, dtype=kiln.float64))


def test_operands_whose_shapes_do_not_fit():
    a = mint.ones(2, 3, 3, dtype=kiln.float64)
    with raises(kiln.ShapeError, match="broadcast"):
        linalg.solve(a, mint.ones(3, 3, 1, dtype=kiln.float64))
    with raises(kiln.ShapeError, match="3 rows"):
        linalg.solve(a, mint.ones(4, 2, dtype=kiln.float64))
    with raises(kiln.ShapeError, match="broadcast"):
        linalg.solve_triangular(a, mint.ones(3, 3, 1, dtype=kiln.float64), upper=True)
    factors = linalg.lu_factor(mint.eye(3, dtype=kiln.float64))
    with raises(kiln.ShapeError):
        linalg.lu_solve(*factors, mint.ones(4, 1, dtype=kiln.float64))


def test_argument_values_are_checked():
    x = mint.eye(2, dtype=kiln.float64)
    with raises(kiln.KilnValueError, match="mode 'reduced', 'complete' or 'r', got 'full'"):
        linalg.qr(x, mode="full")
    with raises(kiln.KilnTypeError, match="mode must be a string"):
        linalg.qr(x, mode=None)
    with raises(kiln.KilnValueError, match="UPLO 'L' or 'U', got 'X'"):
        linalg.eigh(x, UPLO="X")
    with raises(kiln.KilnTypeError, match="UPLO must be 'L' or 'U'"):
        linalg.eigvalsh(x, UPLO=0)
    with raises(kiln.KilnValueError, match="driver must be None or one of gesvd"):
        linalg.svd(x, driver="gelsd")
    with raises(kiln.KilnTypeError, match="full_matrices must be a bool"):
        linalg.svd(x, full_matrices=None)
    with raises(kiln.KilnTypeError, match="check_errors must be a bool"):
        linalg.inv_ex(x, check_errors="yes")
    with raises(kiln.DTypeError, match="int32 pivots"):
        linalg.lu_solve(x, x, x)


@pytest.mark.parametrize("name", ["eig", "eigvals"])
def test_eig_is_not_available_without_complex_numbers(name):
    with raises(kiln.KilnNotImplementedError, match="no complex dtype.*eigh"):
        getattr(linalg, name)(mint.eye(2, dtype=kiln.float64))


def test_linalg_error_is_kilns_value_error():
    assert linalg.LinAlgError is kiln.KilnValueError


# ------------------------------------------------------------------------------------------------
# Gradients


def spd_leaf(rng, n, batch=()):
    a = rng.standard_normal(batch + (n, n))
    return leaf(a @ mT(a) + n * np.eye(n))


def test_factorization_gradients_match_finite_differences(rng):
    a = leaf(rng.standard_normal((2, 3, 3)) + 3 * np.eye(3))
    b = leaf(rng.standard_normal((2, 3, 2)))
    # Cholesky reads one triangle and gives PyTorch's symmetric gradient: a symmetric
    # parametrization s + s.mT makes the two agree.
    gradcheck(lambda s: linalg.cholesky(s + s.mT), (spd_leaf(rng, 3, (2,)),))
    gradcheck(lambda s: linalg.cholesky(s + s.mT, upper=True), (spd_leaf(rng, 3),))
    gradcheck(lambda a, b: linalg.solve(a, b), (a, b))
    gradcheck(lambda a, b: linalg.solve(a, b.mT, left=False), (a, b))
    gradcheck(lambda a, b: linalg.solve_triangular(a, b, upper=True), (a, b))
    gradcheck(lambda a, b: linalg.solve_triangular(a, b.mT, upper=False, left=False,
                                                   unitriangular=True), (a, b))
    gradcheck(linalg.inv, (a,))
    gradcheck(linalg.det, (a,))
    gradcheck(lambda a: linalg.slogdet(a).logabsdet, (a,))
    gradcheck(lambda a, b: linalg.lu_solve(*linalg.lu_factor(a), b), (a, b))
    gradcheck(lambda a, b: linalg.lu_solve(*linalg.lu_factor(a), b, adjoint=True), (a, b))
    gradcheck(lambda a: linalg.lu_factor(a).LU, (a,))
    for shape in ((4, 4), (5, 3), (3, 5)):
        gradcheck(lambda a: linalg.lu(a)[1:], (leaf(rng.standard_normal(shape)),))


def test_decomposition_gradients_match_finite_differences(rng):
    tall = leaf(rng.standard_normal((2, 5, 3)))
    wide = leaf(rng.standard_normal((3, 5)))
    gradcheck(lambda a: tuple(linalg.qr(a)), (tall,))
    gradcheck(lambda a: tuple(linalg.qr(a, mode="complete")), (leaf(rng.standard_normal((4, 4))),))
    gradcheck(lambda a: tuple(linalg.qr(a)), (wide,))
    sym = leaf(rng.standard_normal((2, 4, 4)))

    def eigh_invariants(s):
        # Invariant to the eigenvectors' signs: the eigenvalues and V diag(w^2) V^T.
        w, v = linalg.eigh(s + s.mT)
        return w, v @ ((w * w).unsqueeze(-1) * v.mT)

    gradcheck(eigh_invariants, (sym,))
    gradcheck(lambda s: linalg.eigvalsh(s + s.mT), (sym,))

    def svd_invariants(a):
        # Invariant to the singular vectors' signs: S, U diag(S^2) U^T and V diag(S) V^T.
        u, s, vh = linalg.svd(a, full_matrices=False)
        return s, u @ ((s * s).unsqueeze(-1) * u.mT), vh.mT @ (s.unsqueeze(-1) * vh)

    gradcheck(svd_invariants, (tall,))
    gradcheck(svd_invariants, (wide,))
    gradcheck(linalg.svdvals, (tall,))


def test_value_only_gradients_are_defined_for_repeated_values():
    # The eigenvalues of I repeat; the gradient of their sum (the trace) is still I.
    eye = leaf(np.eye(3))
    for loss in (lambda a: linalg.eigvalsh(a).sum(), lambda a: linalg.svdvals(a).sum()):
        (grad,) = kiln.autograd.grad(loss(eye), [eye])
        np.testing.assert_allclose(grad.numpy(), np.eye(3), atol=1e-12)


def _torch_cases(torch, rng):
    """(name, kiln function, torch function, inputs): losses whose gradients are compared."""
    square = rng.standard_normal((2, 4, 4)) + 4 * np.eye(4)
    s = rng.standard_normal((2, 4, 4))
    spd_values = s @ mT(s) + 4 * np.eye(4)
    rhs = rng.standard_normal((2, 4, 3))
    tall = rng.standard_normal((2, 5, 3))
    tl = torch.linalg
    return [
        ("cholesky", lambda a: linalg.cholesky(a) ** 3, lambda a: tl.cholesky(a) ** 3,
         [spd_values]),
        ("solve", lambda a, b: linalg.solve(a, b) ** 2, lambda a, b: tl.solve(a, b) ** 2,
         [square, rhs]),
        ("inv", lambda a: linalg.inv(a) ** 2, lambda a: tl.inv(a) ** 2, [square]),
        ("det", linalg.det, tl.det, [square]),
        ("slogdet", lambda a: linalg.slogdet(a).logabsdet, lambda a: tl.slogdet(a).logabsdet,
         [square]),
        ("solve_triangular", lambda a, b: linalg.solve_triangular(a, b, upper=True) ** 2,
         lambda a, b: tl.solve_triangular(a, b, upper=True) ** 2, [square, rhs]),
        ("lu", lambda a: linalg.lu(a).L[..., :3, :] ** 3 + linalg.lu(a).U ** 3,
         lambda a: tl.lu(a).L[..., :3, :] ** 3 + tl.lu(a).U ** 3, [tall]),
        ("qr", lambda a: linalg.qr(a).Q ** 3, lambda a: tl.qr(a).Q ** 3, [tall]),
        ("eigh", lambda a: linalg.eigh(a).eigenvectors ** 4 + linalg.eigh(a).eigenvalues[
            ..., None], lambda a: tl.eigh(a).eigenvectors ** 4 + tl.eigh(a).eigenvalues[
            ..., None], [spd_values]),
        ("svd", lambda a: linalg.svd(a, False).U ** 4 + linalg.svd(a, False).S[..., None, :],
         lambda a: tl.svd(a, False).U ** 4 + tl.svd(a, False).S[..., None, :], [tall]),
        ("logdet", lambda a: mint.logdet(a @ a.mT), lambda a: torch.logdet(a @ a.mT),
         [square]),
    ]


def expect_torch_gradients(torch, rng, name, ours, theirs, arrays, atol):
    """Kiln's ``ours`` and PyTorch's ``theirs`` on float64 leaves of ``arrays``: the same values
    and the same gradients for one random upstream gradient."""
    inputs = [leaf(a) for a in arrays]
    twins = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, want = ours(*inputs), theirs(*twins)
    close(out, want.detach().numpy(), kiln.float64, 100)
    upstream = rng.standard_normal(tuple(want.shape))
    grads = kiln.autograd.grad(out, inputs, kiln.tensor(upstream))
    wants = torch.autograd.grad(want, twins, torch.tensor(upstream))
    for grad, expected in zip(grads, wants):
        np.testing.assert_allclose(grad.numpy(), expected.numpy(), rtol=1e-8, atol=atol,
                                   err_msg=name)


def test_gradients_match_pytorch(torch, rng):
    for name, ours, theirs, arrays in _torch_cases(torch, rng):
        expect_torch_gradients(torch, rng, name, ours, theirs, arrays, atol=1e-10)


def test_lu_factors_match_pytorchs(torch, rng):
    # Both pivot by LAPACK's rule: the same P, L, U and pivots, not just a factorization.
    a = rng.standard_normal((2, 5, 4))
    ours, theirs = linalg.lu(kiln.tensor(a)), torch.linalg.lu(torch.tensor(a))
    for got, want in zip(ours, theirs):
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-12)
    np.testing.assert_array_equal(linalg.lu_factor(kiln.tensor(a)).pivots.numpy(),
                                  torch.linalg.lu_factor(torch.tensor(a)).pivots.numpy())


# ------------------------------------------------------------------------------------------------
# kiln.jit


def test_traced_functions_give_the_eager_values(rng):
    def f(a, b):
        spd_matrix = a @ a.mT + 3 * mint.eye(3, dtype=a.dtype)
        factor = linalg.cholesky(spd_matrix)
        u, s, vh = linalg.svd(a, full_matrices=False)
        return (linalg.solve(a, b).sum() + factor.sum() + s.sum() + linalg.det(a)
                + linalg.slogdet(a).logabsdet + linalg.qr(a).R.sum()
                + linalg.eigvalsh(spd_matrix).sum() + linalg.lu(a).U.sum()
                + linalg.solve_triangular(factor, b, upper=False).sum())

    a = kiln.tensor(rng.standard_normal((3, 3)) + 3 * np.eye(3))
    b = kiln.tensor(rng.standard_normal((3, 2)))
    jitted = kiln.jit(f)
    eager = f(a, b).item()
    for _ in range(2):
        assert jitted(a, b).item() == pytest.approx(eager, rel=1e-12)
    grad = kiln.grad(f)(a, b)
    np.testing.assert_allclose(kiln.jit(kiln.grad(f))(a, b).numpy(), grad.numpy(), rtol=1e-10)


# ------------------------------------------------------------------------------------------------
# The Python-level API


def test_results_are_named_tuples_with_pytorchs_fields(rng):
    x = kiln.tensor(rng.standard_normal((3, 3)))
    s = x @ x.mT + 3 * mint.eye(3, dtype=kiln.float64)
    fields = [
        (linalg.cholesky_ex(s), ("L", "info")), (linalg.lu_factor(x), ("LU", "pivots")),
        (linalg.lu_factor_ex(x), ("LU", "pivots", "info")), (linalg.lu(x), ("P", "L", "U")),
        (linalg.solve_ex(x, x), ("result", "info")), (linalg.inv_ex(x), ("inverse", "info")),
        (linalg.slogdet(x), ("sign", "logabsdet")), (linalg.qr(x), ("Q", "R")),
        (linalg.eigh(s), ("eigenvalues", "eigenvectors")), (linalg.svd(x), ("U", "S", "Vh")),
    ]
    for result, names in fields:
        assert result._fields == names
        assert result.__getattribute__(names[0]) is result[0]


def test_all_names_exist():
    for name in linalg.__all__:
        assert hasattr(linalg, name), name
    assert kiln.linalg.matmul is kiln.mint.matmul
