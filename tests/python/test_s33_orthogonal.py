"""kiln.nn.utils.parametrizations.orthogonal: the weight is orthogonal for square, tall, wide and
batched weights under each map ("matrix_exp", "cayley", "householder") with and without the
trivialization, at registration and after SGD steps; its first value and assigned values are
their QR orthogonalization (NumPy); the maps against NumPy closed forms; the private geqrf
against NumPy's (LAPACK's); state_dict keys, weights, outputs and gradients against PyTorch's
from the same tensors; and the errors."""

import numpy as np
import pytest

import kiln
from conftest import check_cell_against_torch, check_torch, t
from kiln import mint, nn
from kiln.errors import KilnNotImplementedError, KilnTypeError, KilnValueError, ShapeError
from kiln.nn.utils import parametrizations, parametrize
from kiln.nn.utils.parametrizations import _householder_qr, orthogonal

F64 = kiln.float64
MAPS = ["matrix_exp", "cayley", "householder"]
SHAPES = [(5, 5), (7, 3), (3, 7), (2, 4, 4), (2, 5, 3), (2, 3, 5)]
TOLERANCE = {kiln.float64: 1e-12, kiln.float32: 2e-6}


class Holder(nn.Cell):
    """A cell with one parameter ``weight`` of any shape (a batch of matrices)."""

    def __init__(self, weight):
        super().__init__()
        self.weight = nn.Parameter(weight)

    def forward(self, x):
        return mint.matmul(self.weight, x)


def _tall(q):
    return q if q.shape[-2] >= q.shape[-1] else np.swapaxes(q, -1, -2)


def assert_orthogonal(q, tolerance):
    """Orthonormal columns where q [..., m, n] is tall (m >= n), orthonormal rows where wide."""
    tall = _tall(np.asarray(q, np.float64))
    gram = np.swapaxes(tall, -1, -2) @ tall
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(tall.shape[-1]), gram.shape),
                               atol=tolerance)


def np_orthogonalized(a):
    """Q of a's QR factorization with R's diagonal positive (on the transpose of a wide a)."""
    q, r = np.linalg.qr(_tall(a))
    q = q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[..., None, :]
    return q if a.shape[-2] >= a.shape[-1] else np.swapaxes(q, -1, -2)


def np_map(x, orthogonal_map):
    """The matrix_exp or cayley map of ``original`` x, as the module's documentation states."""
    tall = _tall(x)
    n, k = tall.shape[-2:]
    lower = np.concatenate([np.tril(tall), np.zeros(tall.shape[:-2] + (n, n - k))], -1)
    skew = lower - np.swapaxes(lower, -1, -2)
    if orthogonal_map == "matrix_exp":
        # i A is Hermitian: A = U diag(-i w) U^H, so exp(A) = U diag(exp(-i w)) U^H.
        w, u = np.linalg.eigh(1j * skew)
        q = np.real((u * np.exp(-1j * w)[..., None, :]) @ np.conj(np.swapaxes(u, -1, -2)))
    else:
        eye = np.eye(n)
        q = np.linalg.solve(eye - skew / 2, eye + skew / 2)
    q = q[..., :k]
    return q if x.shape[-2] >= x.shape[-1] else np.swapaxes(q, -1, -2)


def value(tensor):
    return np.array(tensor.detach().numpy(), np.float64)


@pytest.mark.parametrize("dtype", [kiln.float64, kiln.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("trivialization", [True, False], ids=["triv", "plain"])
@pytest.mark.parametrize("orthogonal_map", MAPS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_the_weight_is_orthogonal_from_registration(rng, shape, orthogonal_map, trivialization,
                                                    dtype):
    w = rng.standard_normal(shape)
    m = orthogonal(Holder(t(w, dtype)), orthogonal_map=orthogonal_map,
                   use_trivialization=trivialization)
    weight = m.weight
    assert weight.shape == shape and weight.dtype == dtype
    tolerance = TOLERANCE[dtype]
    assert_orthogonal(value(weight), tolerance)
    if trivialization or orthogonal_map == "householder":
        want = np_orthogonalized(np.asarray(t(w, dtype).numpy(), np.float64))
        np.testing.assert_allclose(value(weight), want, atol=20 * tolerance)
    else:  # the original stays, and the weight is its map
        original = m.parametrizations.weight.original
        np.testing.assert_array_equal(original.numpy(), t(w, dtype).numpy())
        np.testing.assert_allclose(value(weight), np_map(value(original), orthogonal_map),
                                   atol=20 * tolerance)


@pytest.mark.parametrize("orthogonal_map", MAPS)
def test_with_trivialization_original_is_minus_identity_and_base_the_orthogonalization(
        rng, orthogonal_map):
    w = rng.standard_normal((6, 4))
    m = orthogonal(Holder(t(w)), orthogonal_map=orthogonal_map)
    np.testing.assert_array_equal(m.parametrizations.weight.original.numpy(), -np.eye(6, 4))
    base = value(m.parametrizations.weight[0].base)
    assert base.shape == (6, 6)
    assert_orthogonal(base, 1e-12)
    np.testing.assert_allclose(base[:, :4], np_orthogonalized(w), atol=1e-12)


def test_an_orthogonal_square_weight_becomes_the_base_unchanged(rng):
    q = np_orthogonalized(rng.standard_normal((5, 5)))
    m = orthogonal(Holder(t(q)))
    parametrization = m.parametrizations.weight[0]
    assert [name for name, _ in parametrization.named_buffers()] == ["base"]
    np.testing.assert_array_equal(parametrization.base.numpy(), q)
    np.testing.assert_allclose(value(m.weight), q, atol=1e-14)


@pytest.mark.parametrize("shape, orthogonal_map", [((4, 4), "matrix_exp"), ((6, 3), "householder"),
                                                   ((3, 6), "householder"),
                                                   ((2, 3, 3), "matrix_exp")])
def test_the_default_map_is_matrix_exp_for_square_weights_else_householder(shape,
                                                                           orthogonal_map):
    m = orthogonal(Holder(mint.ones(shape)))
    assert m.parametrizations.weight[0].orthogonal_map == orthogonal_map


@pytest.mark.parametrize("trivialization", [True, False], ids=["triv", "plain"])
@pytest.mark.parametrize("orthogonal_map", MAPS)
@pytest.mark.parametrize("n_in, n_out", [(5, 5), (6, 4), (3, 7)])
def test_sgd_steps_keep_the_weight_orthogonal(rng, n_in, n_out, orthogonal_map,
                                              trivialization):
    m = orthogonal(nn.Linear(n_in, n_out, dtype=F64), orthogonal_map=orthogonal_map,
                   use_trivialization=trivialization)
    original = m.parametrizations.weight.original
    diagonal = np.diagonal(value(original)).copy()
    opt = kiln.optim.SGD(m.parameters(), lr=0.1)
    x, target = t(rng.standard_normal((16, n_in))), t(rng.standard_normal((16, n_out)))
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = mint.mean((m(x) - target) ** 2)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        assert_orthogonal(value(m.weight), 1e-12)
    assert losses[-1] < losses[0]
    if orthogonal_map == "householder":  # the signs on the diagonal are not trained
        np.testing.assert_array_equal(np.diagonal(value(original)), diagonal)


@pytest.mark.parametrize("trivialization, keys", [
    (True, ["bias", "parametrizations.weight.original", "parametrizations.weight.0.base"]),
    (False, ["bias", "parametrizations.weight.original"])])
def test_state_dict_keys_are_pytorchs(trivialization, keys):
    m = orthogonal(nn.Linear(4, 3, dtype=F64), use_trivialization=trivialization)
    assert sorted(m.state_dict()) == sorted(keys)
    assert [name for name, _ in m.named_parameters()] == ["bias",
                                                          "parametrizations.weight.original"]


def test_a_state_dict_round_trip_gives_the_same_weight(rng):
    first = orthogonal(nn.Linear(3, 6, dtype=F64))
    with kiln.no_grad():
        first.parametrizations.weight.original.copy_(t(rng.standard_normal((6, 3))))
    second = orthogonal(nn.Linear(3, 6, dtype=F64))
    second.load_state_dict(first.state_dict())
    np.testing.assert_array_equal(value(second.weight), value(first.weight))


@pytest.mark.parametrize("trivialization", [True, False], ids=["triv", "plain"])
@pytest.mark.parametrize("orthogonal_map", MAPS)
@pytest.mark.parametrize("n_in, n_out", [(5, 5), (3, 6), (6, 3)])
def test_registration_from_the_same_weight_matches_torch(torch, rng, n_in, n_out,
                                                         orthogonal_map, trivialization):
    w = rng.standard_normal((n_out, n_in))
    ours = nn.Linear(n_in, n_out, dtype=F64)
    theirs = torch.nn.Linear(n_in, n_out).double()
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(w))
    ours.load_state_dict({"weight": w, "bias": theirs.bias.detach().numpy()})
    orthogonal(ours, orthogonal_map=orthogonal_map, use_trivialization=trivialization)
    torch.nn.utils.parametrizations.orthogonal(theirs, orthogonal_map=orthogonal_map,
                                               use_trivialization=trivialization)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    check_torch(ours.weight, theirs.weight, F64, "weight")
    if not trivialization:  # both originals: the weight itself, or its reflectors and signs
        check_torch(ours.parametrizations.weight.original,
                    theirs.parametrizations.weight.original, F64, "original")


@pytest.mark.parametrize("trivialization", [True, False], ids=["triv", "plain"])
@pytest.mark.parametrize("orthogonal_map", MAPS)
@pytest.mark.parametrize("n_in, n_out", [(5, 5), (3, 6), (6, 3)])
def test_weights_outputs_and_gradients_match_torch_after_training(torch, rng, n_in, n_out,
                                                                  orthogonal_map,
                                                                  trivialization):
    theirs = torch.nn.utils.parametrizations.orthogonal(
        torch.nn.Linear(n_in, n_out).double(), orthogonal_map=orthogonal_map,
        use_trivialization=trivialization)
    opt = torch.optim.SGD(theirs.parameters(), lr=0.2)
    for _ in range(3):  # an original away from its start (and, trivialized, a random base)
        opt.zero_grad()
        theirs(torch.tensor(rng.standard_normal((4, n_in)))).pow(2).sum().backward()
        opt.step()
    ours = orthogonal(nn.Linear(n_in, n_out, dtype=F64), orthogonal_map=orthogonal_map,
                      use_trivialization=trivialization)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    check_torch(ours.weight, theirs.weight, F64, "weight")
    check_cell_against_torch(torch, ours, theirs, rng.standard_normal((4, n_in)), rng)


@pytest.mark.parametrize("orthogonal_map", MAPS)
@pytest.mark.parametrize("shape", [(5, 5), (6, 3), (3, 6)], ids=lambda s: "x".join(map(str, s)))
def test_assigning_a_weight_stores_its_orthogonalization(rng, shape, orthogonal_map):
    m = orthogonal(Holder(t(rng.standard_normal(shape))), orthogonal_map=orthogonal_map)
    q = np_orthogonalized(rng.standard_normal(shape))
    m.weight = t(q)  # orthogonal: the weight becomes q
    np.testing.assert_allclose(value(m.weight), q, atol=1e-12)
    a = rng.standard_normal(shape)
    m.weight = t(a)  # not orthogonal: its orthogonalization
    np.testing.assert_allclose(value(m.weight), np_orthogonalized(a), atol=1e-12)


@pytest.mark.parametrize("shape", [(5, 5), (6, 3), (3, 6), (2, 4, 3)],
                         ids=lambda s: "x".join(map(str, s)))
def test_householder_without_trivialization_assigns_through_the_reflectors(rng, shape):
    m = orthogonal(Holder(t(rng.standard_normal(shape))), orthogonal_map="householder",
                   use_trivialization=False)
    a = rng.standard_normal(shape)
    m.weight = t(a)
    np.testing.assert_allclose(value(m.weight), np_orthogonalized(a), atol=1e-12)


@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley"])
def test_assigning_to_an_untrivialized_exponential_or_cayley_map_is_not_implemented(
        rng, orthogonal_map):
    m = orthogonal(Holder(t(rng.standard_normal((4, 4)))), orthogonal_map=orthogonal_map,
                   use_trivialization=False)
    before = value(m.weight)
    with pytest.raises(KilnNotImplementedError, match=f"{orthogonal_map} map with "
                                                      f"use_trivialization=False"):
        m.weight = t(np.eye(4))
    np.testing.assert_array_equal(value(m.weight), before)


def test_geqrf_matches_lapacks(rng):
    for shape in [(6, 4), (5, 5), (3, 4, 2)]:
        a = rng.standard_normal(shape)
        packed, tau = _householder_qr(t(a))
        for i in np.ndindex(shape[:-2]):
            raw, want_tau = np.linalg.qr(a[i], mode="raw")  # LAPACK's geqrf, transposed
            np.testing.assert_allclose(packed.numpy()[i], raw.T, atol=1e-12)
            np.testing.assert_allclose(tau.numpy()[i], want_tau, atol=1e-12)
    # A column with nothing below its diagonal is not reflected: tau 0 and R_ii kept.
    packed, tau = _householder_qr(t(np.triu(rng.standard_normal((4, 3)))))
    np.testing.assert_array_equal(tau.numpy(), np.zeros(3))


def test_an_orthogonal_map_added_to_a_chain_counts_a_missing_base_as_the_identity(rng):
    class Double(nn.Cell):
        def forward(self, x):
            return 2 * x

    w = rng.standard_normal((4, 4))
    m = Holder(t(w))
    parametrize.register_parametrization(m, "weight", Double())
    orthogonal(m)
    assert m.parametrizations.weight[1].base is None
    np.testing.assert_allclose(value(m.weight), np_map(2 * w, "matrix_exp"), atol=1e-12)
    assert_orthogonal(value(m.weight), 1e-12)


@pytest.mark.parametrize("orthogonal_map", MAPS)
def test_kiln_jit_of_an_orthogonal_linear_matches_eager(rng, orthogonal_map):
    m = orthogonal(nn.Linear(4, 6, dtype=F64), orthogonal_map=orthogonal_map)
    f = kiln.jit(lambda x: m(x))
    x = t(rng.standard_normal((2, 4)))
    np.testing.assert_allclose(f(x).numpy(), m(x).numpy(), atol=1e-12)


def test_errors(rng):
    with pytest.raises(ShapeError, match="expected a matrix or batch of matrices, got a tensor "
                                         "of 1 dimensions"):
        orthogonal(Holder(mint.ones(3)))
    with pytest.raises(KilnValueError, match='orthogonal_map has to be one of "matrix_exp", '
                                             '"cayley", "householder", got \'qr\''):
        orthogonal(Holder(mint.ones((3, 3))), orthogonal_map="qr")
    with pytest.raises(KilnTypeError, match="use_trivialization must be a bool, got int"):
        orthogonal(Holder(mint.ones((3, 3))), use_trivialization=1)
    with pytest.raises(KilnValueError, match="no parameter or buffer named 'kernel'"):
        orthogonal(nn.Linear(3, 3), "kernel")
    with pytest.raises(KilnTypeError, match="must be floating point"):
        cell = nn.Cell()
        cell.register_buffer("weight", kiln.tensor([[1, 0], [0, 1]]))
        orthogonal(cell)
    m = orthogonal(nn.Linear(3, 4, dtype=F64))
    with pytest.raises(ShapeError, match=r"of shape \[4, 3\], got a tensor of shape \[3, 4\]"):
        m.weight = t(rng.standard_normal((3, 4)))
    assert parametrizations.__all__ == ["orthogonal", "spectral_norm", "weight_norm"]
