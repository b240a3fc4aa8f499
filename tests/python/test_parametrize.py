"""Weight parametrizations, as PyTorch's: kiln.nn.utils.parametrize (register_parametrization,
remove_parametrizations, is_parametrized, cached, type_before_parametrizations),
kiln.nn.utils.parametrizations (weight_norm, spectral_norm) and the older
kiln.nn.utils.weight_norm / remove_weight_norm and spectral_norm / remove_spectral_norm. Values
and gradients are checked against NumPy closed forms (torch-free) and, where PyTorch is
installed, against PyTorch; names (state_dict keys, named_parameters order) are PyTorch's. Also: parametrized cells under kiln.jit, an optimizer step,
deepcopy and the refused pickle."""

import copy
import pickle

import numpy as np
import pytest

import kiln
from conftest import check_cell_against_torch, check_torch, close, raises, t
from kiln import mint, nn
from kiln.nn.utils import parametrizations, parametrize

F64 = kiln.float64


# ---------------------------------------------------------------------------------------------
# Parametrizations used by the tests


class Symmetric(nn.Cell):
    """PyTorch's tutorial example: the upper triangle mirrored (no right_inverse)."""

    def construct(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)


class AddOne(nn.Cell):
    def construct(self, X):
        return X + 1

    def right_inverse(self, X):
        return X - 1


class Double(nn.Cell):
    def construct(self, X):
        return X * 2

    def right_inverse(self, X):
        return X / 2


class SplitSum(nn.Cell):
    """A tensor parametrized by two: A + B; right_inverse returns (X, 0)."""

    def construct(self, A, B):
        return A + B

    def right_inverse(self, X):
        return X, mint.zeros_like(X)


class Counting(nn.Cell):
    """Doubles and counts its calls."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def construct(self, X):
        self.calls += 1
        return X * 2


class ToFloat64(nn.Cell):
    def construct(self, X):
        return X.to(kiln.float64)


class Flatten(nn.Cell):
    def construct(self, X):
        return X.reshape(-1)


class Identity64RightInverse(nn.Cell):
    def construct(self, X):
        return X

    def right_inverse(self, X):
        return X.to(kiln.float64)


class WithScale(nn.Cell):
    """A cell with a buffer to parametrize."""

    def __init__(self):
        super().__init__()
        self.register_buffer("scale", mint.ones(2, 2))

    def construct(self, x):
        return x * self.scale


# ---------------------------------------------------------------------------------------------
# NumPy references


def value(tensor):
    """A float64 NumPy copy of ``tensor``'s values."""
    return np.array(tensor.detach().numpy(), dtype=np.float64, copy=True)


def assign(tensor, values):
    """Writes ``values`` into ``tensor`` in place (a parameter: under no_grad)."""
    with kiln.no_grad():
        tensor[...] = kiln.tensor(np.asarray(values), dtype=tensor.dtype)


def np_symmetric(w):
    return np.triu(w) + np.triu(w, 1).T


def norm_axes(ndim, dim):
    """The axes weight norm reduces over: all but ``dim`` (all for None)."""
    return tuple(range(ndim)) if dim is None else tuple(a for a in range(ndim) if a != dim)


def np_norm_except_dim(w, dim):
    """PyTorch's norm_except_dim(w, 2, dim): the g that makes g * v / ||v|| equal w."""
    n = np.sqrt((w ** 2).sum(axis=norm_axes(w.ndim, dim), keepdims=True))
    return n.reshape(()) if dim is None else n


def np_weight_norm(g, v, dim):
    n = np.sqrt((v ** 2).sum(axis=norm_axes(v.ndim, dim), keepdims=True))
    return v * (np.asarray(g) / n)


def np_weight_norm_grads(g, v, dim, upstream):
    """Gradients of sum(upstream * weight_norm(g, v)) with respect to g and v."""
    axes = norm_axes(v.ndim, dim)
    n = np.sqrt((v ** 2).sum(axis=axes, keepdims=True))
    s = (upstream * v).sum(axis=axes, keepdims=True)
    g = np.asarray(g)
    dg = (s / n).reshape(g.shape)
    dv = g / n * upstream - g * s * v / n ** 3
    return dg, dv


def np_normalize(x, eps=1e-12):
    return x / max(np.linalg.norm(x), eps)


def np_power_iteration(mat, u, v, n, eps=1e-12):
    """PyTorch's _SpectralNorm._power_method: n rounds of u = W v / |.|, v = W^T u / |.|."""
    for _ in range(n):
        u = np_normalize(mat @ v, eps)
        v = np_normalize(mat.T @ u, eps)
    return u, v


def weight_matrix(w, dim):
    """The weight as spectral norm sees it: dimension ``dim`` first, the rest flattened."""
    return np.moveaxis(w, dim, 0).reshape(w.shape[dim], -1)


def names(pairs):
    return [name for name, _ in pairs]


def plain_twin(factory, weight, bias):
    """An unparametrized cell from ``factory`` holding ``weight`` and ``bias``."""
    plain = factory()
    plain.load_state_dict({"weight": weight, "bias": bias})
    return plain


def linear64(n_in=4, n_out=3):
    return nn.Linear(n_in, n_out, dtype=F64)


def conv1d64():
    return nn.Conv1d(2, 3, 5, dtype=F64)


FACTORIES = {
    "linear": (linear64, (2, 4)),
    "conv1d": (conv1d64, (2, 2, 7)),
}

# g's shape per (cell, dim), as PyTorch's weight_norm makes it (weights (3, 4) and (3, 2, 5)).
G_SHAPES = {
    ("linear", 0): (3, 1), ("linear", 1): (1, 4), ("linear", None): (),
    ("conv1d", 0): (3, 1, 1), ("conv1d", 1): (1, 2, 1), ("conv1d", None): (),
}

WEIGHT_NORM_CASES = sorted(G_SHAPES, key=str)


def case_id(case):
    return f"{case[0]}-dim{case[1]}"


def torch_state(module):
    """A torch module's state dict as NumPy arrays, to load into a Kiln twin."""
    return {k: v.detach().cpu().numpy() for k, v in module.state_dict().items()}


def torch_factory(torch, kind):
    return {"linear": lambda: torch.nn.Linear(4, 3).double(),
            "conv1d": lambda: torch.nn.Conv1d(2, 3, 5).double()}[kind]


# ---------------------------------------------------------------------------------------------
# register_parametrization: the computed tensor, names, type, gradients


def test_register_parametrization_computes_the_weight_from_original(rng):
    m = linear64(3, 3)
    w0, b = value(m.weight), value(m.bias)
    assert parametrize.register_parametrization(m, "weight", Symmetric()) is m
    # No right_inverse: the original keeps the weight's value, the weight is computed from it.
    close(m.parametrizations.weight.original, w0, 0, 0)
    close(m.weight, np_symmetric(w0), 1e-12, 1e-12)
    assert not isinstance(m.weight, nn.Parameter)
    assert isinstance(m.parametrizations.weight.original, nn.Parameter)
    x = rng.normal(size=(2, 3))
    close(m(t(x)), x @ np_symmetric(w0).T + b, 1e-12, 1e-12)


class _NoInverse(Symmetric):
    def right_inverse(self, value):
        raise NotImplementedError("no inverse")


def test_a_right_inverse_raising_not_implemented_is_the_identity_at_registration_only():
    # PyTorch's rule: registration keeps the tensor; assigning a value still raises.
    m = linear64(3, 3)
    w0 = value(m.weight)
    parametrize.register_parametrization(m, "weight", _NoInverse())
    close(m.parametrizations.weight.original, w0, 0, 0)
    close(m.weight, np_symmetric(w0), 1e-12, 1e-12)
    with pytest.raises(NotImplementedError, match="no inverse"):
        m.weight = mint.zeros((3, 3), dtype=kiln.float64)


def test_parametrized_cell_gets_a_parametrized_class_that_is_still_its_class():
    m = nn.Linear(3, 3)
    assert parametrize.type_before_parametrizations(m) is nn.Linear
    parametrize.register_parametrization(m, "weight", Symmetric())
    assert type(m).__name__ == "ParametrizedLinear"
    assert type(m) is not nn.Linear
    assert isinstance(m, nn.Linear)
    assert parametrize.type_before_parametrizations(m) is nn.Linear


def test_is_parametrized_with_and_without_a_tensor_name():
    m = nn.Linear(3, 3)
    assert not parametrize.is_parametrized(m)
    assert not parametrize.is_parametrized(m, "weight")
    parametrize.register_parametrization(m, "weight", Symmetric())
    assert parametrize.is_parametrized(m)
    assert parametrize.is_parametrized(m, "weight")
    assert not parametrize.is_parametrized(m, "bias")


def test_state_dict_keys_and_parameter_names_are_pytorchs():
    m = nn.Linear(3, 3)
    parametrize.register_parametrization(m, "weight", Symmetric())
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original"]
    assert names(m.named_parameters()) == ["bias", "parametrizations.weight.original"]
    assert names(m.named_modules()) == ["", "parametrizations", "parametrizations.weight",
                                        "parametrizations.weight.0"]
    assert len(m.parametrizations.weight) == 1
    assert isinstance(m.parametrizations.weight[0], Symmetric)
    assert isinstance(m.parametrizations.weight, parametrize.ParametrizationList)


def test_gradients_flow_through_the_parametrization_to_original(rng):
    m = linear64(3, 3)
    parametrize.register_parametrization(m, "weight", Symmetric())
    c = rng.normal(size=(3, 3))
    mint.sum(m.weight * t(c)).backward()
    # d/dX sum(C * sym(X)): C on and above the diagonal plus C^T strictly above it.
    close(m.parametrizations.weight.original.grad, np.triu(c) + np.triu(c.T, 1), 1e-12, 1e-12)


def test_gradients_flow_to_original_through_the_forward_pass(rng):
    m = linear64(3, 3)
    parametrize.register_parametrization(m, "weight", Double())
    w = value(m.weight)
    x, up = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    mint.sum(m(t(x)) * t(up)).backward()
    close(m.parametrizations.weight.original.grad, 2 * up.T @ x, 1e-12, 1e-12)
    close(m.bias.grad, up.sum(0), 1e-12, 1e-12)
    close(m.weight, w, 1e-12, 1e-12)


def test_registering_a_name_the_cell_does_not_have_is_a_value_error():
    m = nn.Linear(2, 2)
    with raises(ValueError, match="nothere"):
        parametrize.register_parametrization(m, "nothere", Symmetric())
    assert not parametrize.is_parametrized(m)


# ---------------------------------------------------------------------------------------------
# right_inverse, unsafe, chaining, buffers


def test_right_inverse_runs_at_registration():
    m = linear64(3, 2)
    w0 = value(m.weight)
    parametrize.register_parametrization(m, "weight", AddOne())
    close(m.parametrizations.weight.original, w0 - 1, 1e-12, 1e-12)
    close(m.weight, w0, 1e-12, 1e-12)


def test_assigning_the_weight_stores_right_inverse_in_original(rng):
    m = linear64(3, 2)
    parametrize.register_parametrization(m, "weight", AddOne())
    original = m.parametrizations.weight.original
    new = rng.normal(size=(2, 3))
    m.weight = t(new)
    # Stored into the same parameter (an optimizer holding it keeps working), as PyTorch's set_.
    assert m.parametrizations.weight.original is original
    assert isinstance(original, nn.Parameter) and original.requires_grad
    close(original, new - 1, 1e-12, 1e-12)
    close(m.weight, new, 1e-12, 1e-12)


def test_assigning_the_weight_without_right_inverse_is_an_error():
    m = nn.Linear(2, 2)
    parametrize.register_parametrization(m, "weight", Symmetric())
    before = value(m.parametrizations.weight.original)
    with raises(RuntimeError, match="right_inverse"):  # PyTorch: RuntimeError
        m.weight = mint.ones(2, 2)
    close(m.parametrizations.weight.original, before, 0, 0)


def test_right_inverse_returning_a_tuple_makes_original0_and_original1(rng):
    m = linear64(3, 2)
    w0 = value(m.weight)
    parametrize.register_parametrization(m, "weight", SplitSum())
    cell = m.parametrizations.weight
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original0",
                                    "parametrizations.weight.original1"]
    assert names(m.named_parameters()) == ["bias", "parametrizations.weight.original0",
                                           "parametrizations.weight.original1"]
    assert not hasattr(cell, "original")
    assert isinstance(cell.original0, nn.Parameter) and isinstance(cell.original1, nn.Parameter)
    close(cell.original0, w0, 0, 0)
    close(cell.original1, np.zeros((2, 3)), 0, 0)
    close(m.weight, w0, 1e-12, 1e-12)
    new = rng.normal(size=(2, 3))
    m.weight = t(new)
    close(cell.original0, new, 0, 0)
    close(cell.original1, np.zeros((2, 3)), 0, 0)
    c = rng.normal(size=(2, 3))
    mint.sum(m.weight * t(c)).backward()
    close(cell.original0.grad, c, 1e-12, 1e-12)
    close(cell.original1.grad, c, 1e-12, 1e-12)


def test_a_parametrization_changing_the_dtype_is_refused_and_leaves_the_cell_alone():
    m = nn.Linear(2, 2)
    weight = m.weight
    with raises(ValueError, match="dtype"):
        parametrize.register_parametrization(m, "weight", ToFloat64())
    assert type(m) is nn.Linear and not parametrize.is_parametrized(m)
    assert m.weight is weight
    assert names(m.named_parameters()) == ["weight", "bias"]


class FirstRowMinusOne(nn.Cell):
    """Changes the shape; its right_inverse changes the values."""

    def construct(self, X):
        return X[:1]

    def right_inverse(self, X):
        return X - 1


@pytest.mark.parametrize("parametrization", [Flatten, FirstRowMinusOne])
def test_a_parametrization_changing_the_shape_is_refused_and_leaves_the_values(parametrization):
    m = nn.Linear(2, 2)
    before = value(m.weight)
    with raises(ValueError, match="shape"):
        parametrize.register_parametrization(m, "weight", parametrization())
    assert type(m) is nn.Linear and not parametrize.is_parametrized(m)
    close(m.weight, before, 0, 0)  # right_inverse's result was not stored


def test_unsafe_allows_a_parametrization_that_changes_the_shape():
    m = linear64(2, 2)
    w0 = value(m.weight)
    parametrize.register_parametrization(m, "weight", Flatten(), unsafe=True)
    assert tuple(m.weight.shape) == (4,)
    close(m.weight, w0.reshape(-1), 0, 0)


def test_a_right_inverse_changing_the_dtype_is_refused():
    m = nn.Linear(2, 2)
    with raises(ValueError, match="dtype"):
        parametrize.register_parametrization(m, "weight", Identity64RightInverse())
    assert not parametrize.is_parametrized(m)


def test_a_second_parametrization_changing_the_shape_is_refused():
    m = nn.Linear(2, 2)
    parametrize.register_parametrization(m, "weight", Double())
    with raises(ValueError, match="shape"):
        parametrize.register_parametrization(m, "weight", Flatten())
    assert len(m.parametrizations.weight) == 1


def test_chained_parametrizations_apply_in_registration_order(rng):
    m = linear64(3, 2)
    w0 = value(m.weight)
    parametrize.register_parametrization(m, "weight", Double())
    parametrize.register_parametrization(m, "weight", AddOne())
    # The first registration's right_inverse made original w0 / 2; the second only appends.
    original = m.parametrizations.weight.original
    close(original, w0 / 2, 1e-12, 1e-12)
    close(m.weight, w0 + 1, 1e-12, 1e-12)  # AddOne(Double(original))
    assert len(m.parametrizations.weight) == 2
    assert isinstance(m.parametrizations.weight[0], Double)
    assert isinstance(m.parametrizations.weight[1], AddOne)
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original"]
    # right_inverse runs in reverse order: Double.right_inverse(AddOne.right_inverse(value)).
    new = rng.normal(size=(2, 3))
    m.weight = t(new)
    close(original, (new - 1) / 2, 1e-12, 1e-12)
    close(m.weight, new, 1e-12, 1e-12)


def test_parametrizing_a_buffer():
    m = WithScale()
    parametrize.register_parametrization(m, "scale", AddOne())
    original = m.parametrizations.scale.original
    assert names(m.named_parameters()) == []
    assert names(m.named_buffers()) == ["parametrizations.scale.original"]
    assert list(m.state_dict()) == ["parametrizations.scale.original"]
    assert not isinstance(original, nn.Parameter) and not original.requires_grad
    close(original, np.zeros((2, 2)), 0, 0)
    close(m.scale, np.ones((2, 2)), 0, 0)
    close(m(mint.full((2, 2), 3.0)), np.full((2, 2), 3.0), 0, 0)
    parametrize.remove_parametrizations(m, "scale")
    assert type(m) is WithScale
    assert names(m.named_buffers()) == ["scale"] and names(m.named_parameters()) == []
    close(m.scale, np.ones((2, 2)), 0, 0)


def test_parametrizing_weight_and_bias_of_one_cell():
    m = nn.Linear(2, 2)
    parametrize.register_parametrization(m, "weight", AddOne())
    parametrize.register_parametrization(m, "bias", AddOne())
    assert names(m.named_parameters()) == ["parametrizations.weight.original",
                                           "parametrizations.bias.original"]
    parametrize.remove_parametrizations(m, "weight")
    assert type(m).__name__ == "ParametrizedLinear"
    assert parametrize.is_parametrized(m) and not parametrize.is_parametrized(m, "weight")
    assert parametrize.is_parametrized(m, "bias")
    parametrize.remove_parametrizations(m, "bias")
    assert type(m) is nn.Linear and not parametrize.is_parametrized(m)


def test_registration_sets_the_parametrization_to_the_cells_training_mode():
    m = nn.Linear(2, 2).eval()
    p = AddOne()
    assert p.training
    parametrize.register_parametrization(m, "weight", p)
    assert not p.training
    m.train()
    assert p.training


# ---------------------------------------------------------------------------------------------
# remove_parametrizations


def test_remove_parametrizations_leaving_the_parametrized_value():
    m = linear64(3, 3)
    w0 = value(m.weight)
    parametrize.register_parametrization(m, "weight", Symmetric())
    original = m.parametrizations.weight.original
    assert parametrize.remove_parametrizations(m, "weight") is m
    assert type(m) is nn.Linear
    assert not parametrize.is_parametrized(m)
    assert not hasattr(m, "parametrizations")
    assert isinstance(m.weight, nn.Parameter) and m.weight.requires_grad and m.weight.is_leaf
    assert m.weight is original  # PyTorch sets the value into the original parameter
    close(m.weight, np_symmetric(w0), 1e-12, 1e-12)
    # PyTorch registers the weight again, so after the bias.
    assert names(m.named_parameters()) == ["bias", "weight"]
    assert list(m.state_dict()) == ["bias", "weight"]


def test_remove_parametrizations_restoring_the_original():
    m = linear64(3, 2)
    w0 = value(m.weight)
    parametrize.register_parametrization(m, "weight", AddOne())
    original = m.parametrizations.weight.original
    parametrize.remove_parametrizations(m, "weight", leave_parametrized=False)
    assert type(m) is nn.Linear
    assert m.weight is original
    close(m.weight, w0 - 1, 1e-12, 1e-12)


def test_remove_a_tuple_parametrization_leaving_its_value(rng):
    m = linear64(3, 2)
    parametrize.register_parametrization(m, "weight", SplitSum())
    a, b = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    assign(m.parametrizations.weight.original1, b)
    assign(m.parametrizations.weight.original0, a)
    parametrize.remove_parametrizations(m, "weight")
    assert isinstance(m.weight, nn.Parameter) and m.weight.requires_grad
    close(m.weight, a + b, 1e-12, 1e-12)
    assert names(m.named_parameters()) == ["bias", "weight"]


def test_a_tuple_parametrization_cannot_be_removed_without_leaving_its_value():
    m = nn.Linear(3, 2)
    parametrize.register_parametrization(m, "weight", SplitSum())
    with raises(ValueError, match="leave_parametrized"):
        parametrize.remove_parametrizations(m, "weight", leave_parametrized=False)
    assert parametrize.is_parametrized(m, "weight")


def test_removing_a_name_that_is_not_parametrized_is_a_value_error():
    with raises(ValueError):
        parametrize.remove_parametrizations(nn.Linear(2, 2), "weight")
    m = nn.Linear(2, 2)
    parametrize.register_parametrization(m, "weight", AddOne())
    with raises(ValueError, match="bias"):
        parametrize.remove_parametrizations(m, "bias")
    assert parametrize.is_parametrized(m, "weight")


def test_remove_then_register_again():
    m = linear64(2, 2)
    w0 = value(m.weight)
    parametrize.register_parametrization(m, "weight", Double())
    parametrize.remove_parametrizations(m, "weight")
    parametrize.register_parametrization(m, "weight", AddOne())
    close(m.weight, w0, 1e-12, 1e-12)
    close(m.parametrizations.weight.original, w0 - 1, 1e-12, 1e-12)
    assert len(m.parametrizations.weight) == 1


# ---------------------------------------------------------------------------------------------
# cached()


def test_cached_computes_the_weight_once_and_recomputes_outside():
    m = nn.Linear(2, 2)
    p = Counting()
    parametrize.register_parametrization(m, "weight", p, unsafe=True)  # unsafe: no check call
    p.calls = 0
    with parametrize.cached():
        a, b = m.weight, m.weight
        assert a is b
        assert p.calls == 1
        m(mint.ones(1, 2))
        assert p.calls == 1
    c, d = m.weight, m.weight
    assert c is not d and c is not a
    assert p.calls == 3


def test_cached_refuses_a_jit_trace_and_a_jitted_call_outside_it_works(rng):
    # The cache would keep the trace's values, as PyTorch refuses tracing while caching.
    m = parametrize.register_parametrization(linear64(), "weight", AddOne())
    f = kiln.jit(lambda x: m(x))
    x = t(rng.normal(size=(2, 4)))
    with parametrize.cached():
        with raises(kiln.KilnValueError, match="cached"):
            f(x)
        eager = m(x)
    close(f(x), value(eager), 1e-12, 1e-12)


def test_cached_contexts_nest_and_the_cache_is_dropped_at_the_outermost_exit():
    m = linear64(2, 2)
    parametrize.register_parametrization(m, "weight", Double())
    with parametrize.cached():
        a = m.weight
        with parametrize.cached():
            assert m.weight is a
        assert m.weight is a
    assign(m.parametrizations.weight.original, np.ones((2, 2)))
    close(m.weight, np.full((2, 2), 2.0), 0, 0)


def test_gradients_flow_through_a_cached_weight_used_twice(rng):
    m = linear64(2, 2)
    parametrize.register_parametrization(m, "weight", Double())
    x = rng.normal(size=(1, 2))
    with parametrize.cached():
        y = m(m(t(x)))
    mint.sum(y).backward()
    w, b = value(m.weight), value(m.bias)

    def loss(weight):
        return np.sum((x @ weight.T + b) @ weight.T + b)

    h, grad = 1e-6, np.zeros((2, 2))
    for i in np.ndindex(2, 2):
        e = np.zeros((2, 2))
        e[i] = h
        grad[i] = (loss(w + e) - loss(w - e)) / (2 * h)
    close(m.parametrizations.weight.original.grad, 2 * grad, 1e-6, 1e-8)


# ---------------------------------------------------------------------------------------------
# parametrizations.weight_norm


def test_weight_norm_names_and_shapes_are_pytorchs():
    m = nn.Linear(4, 3)
    assert parametrizations.weight_norm(m) is m
    assert [(n, tuple(p.shape)) for n, p in m.named_parameters()] == [
        ("bias", (3,)), ("parametrizations.weight.original0", (3, 1)),
        ("parametrizations.weight.original1", (3, 4))]
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original0",
                                    "parametrizations.weight.original1"]
    assert type(m).__name__ == "ParametrizedLinear"
    assert parametrize.is_parametrized(m, "weight")


@pytest.mark.parametrize("case", WEIGHT_NORM_CASES, ids=case_id)
def test_weight_norm_starts_from_the_weight_and_computes_v_g_over_norm(rng, case):
    kind, dim = case
    factory, _ = FACTORIES[kind]
    m = factory()
    w0 = value(m.weight)
    parametrizations.weight_norm(m, dim=dim)
    g, v = m.parametrizations.weight.original0, m.parametrizations.weight.original1
    assert tuple(g.shape) == G_SHAPES[case] and tuple(v.shape) == w0.shape
    close(g, np_norm_except_dim(w0, dim), 1e-12, 1e-12)
    close(v, w0, 0, 0)
    close(m.weight, w0, 1e-12, 1e-12)
    new_g = rng.uniform(0.5, 2.0, size=G_SHAPES[case])
    new_v = rng.normal(size=w0.shape)
    assign(g, new_g)
    assign(v, new_v)
    close(m.weight, np_weight_norm(new_g, new_v, dim), 1e-12, 1e-12)


@pytest.mark.parametrize("case", WEIGHT_NORM_CASES, ids=case_id)
def test_weight_norm_output_equals_the_plain_cell_with_the_computed_weight(rng, case):
    kind, dim = case
    factory, input_shape = FACTORIES[kind]
    m = parametrizations.weight_norm(factory(), dim=dim)
    g, v = m.parametrizations.weight.original0, m.parametrizations.weight.original1
    assign(g, rng.uniform(0.5, 2.0, size=G_SHAPES[case]))
    assign(v, rng.normal(size=tuple(v.shape)))
    weight = np_weight_norm(value(g), value(v), dim)
    plain = plain_twin(factory, weight, value(m.bias))
    x = t(rng.normal(size=input_shape))
    close(m(x), value(plain(x)), 1e-12, 1e-12)


@pytest.mark.parametrize("case", WEIGHT_NORM_CASES, ids=case_id)
def test_weight_norm_gradients_match_the_closed_form(rng, case):
    kind, dim = case
    m = parametrizations.weight_norm(FACTORIES[kind][0](), dim=dim)
    g, v = m.parametrizations.weight.original0, m.parametrizations.weight.original1
    assign(g, rng.uniform(0.5, 2.0, size=G_SHAPES[case]))
    upstream = rng.normal(size=tuple(v.shape))
    dg, dv = kiln.autograd.grad(mint.sum(m.weight * t(upstream)), [g, v])
    want_g, want_v = np_weight_norm_grads(value(g), value(v), dim, upstream)
    close(dg, want_g, 1e-10, 1e-12)
    close(dv, want_v, 1e-10, 1e-12)


def test_weight_norm_gradient_agrees_with_finite_differences(rng):
    m = parametrizations.weight_norm(conv1d64(), dim=0)
    g, v = m.parametrizations.weight.original0, m.parametrizations.weight.original1
    x = t(rng.normal(size=(2, 2, 7)))
    up = rng.normal(size=(2, 3, 3))

    def loss():
        with kiln.no_grad():
            return float(mint.sum(m(x) * t(up)).item())

    dg, dv = kiln.autograd.grad(mint.sum(m(x) * t(up)), [g, v])
    h = 1e-6
    for param, grad in ((g, dg), (v, dv)):
        base = value(param)
        direction = rng.normal(size=base.shape)
        assign(param, base + h * direction)
        up_loss = loss()
        assign(param, base - h * direction)
        down_loss = loss()
        assign(param, base)
        numeric = (up_loss - down_loss) / (2 * h)
        assert np.sum(value(grad) * direction) == pytest.approx(numeric, rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("dim, same_as", [(-1, None), (-2, 0)])
def test_weight_norm_negative_dim_follows_pytorch(rng, dim, same_as):
    # PyTorch turns dim=None into -1 and reads -1 as "every dimension" (not the last one).
    for apply in (parametrizations.weight_norm, kiln.nn.utils.weight_norm):
        m = apply(linear64(), dim=dim)
        g = m.parametrizations.weight.original0 if hasattr(m, "parametrizations") else m.weight_g
        assert tuple(g.shape) == G_SHAPES[("linear", same_as)]


def test_weight_norm_inside_a_sequential_has_prefixed_names():
    s = nn.Sequential(nn.Linear(4, 3))
    parametrizations.weight_norm(s[0])
    assert list(s.state_dict()) == ["0.bias", "0.parametrizations.weight.original0",
                                    "0.parametrizations.weight.original1"]
    assert names(s.named_parameters()) == list(s.state_dict())


def test_converting_a_weight_normed_cell_converts_its_originals(rng):
    m = parametrizations.weight_norm(nn.Linear(4, 3))
    g, v = value(m.parametrizations.weight.original0), value(m.parametrizations.weight.original1)
    m.double()
    assert m.parametrizations.weight.original0.dtype == F64
    assert m.weight.dtype == F64
    x = rng.normal(size=(2, 4))
    close(m(t(x)), x @ np_weight_norm(g, v, 0).T + value(m.bias), 1e-12, 1e-12)


def test_weight_norm_state_dict_round_trip_into_a_fresh_cell(rng):
    m = parametrizations.weight_norm(linear64())
    assign(m.parametrizations.weight.original0, rng.uniform(0.5, 2.0, size=(3, 1)))
    assign(m.parametrizations.weight.original1, rng.normal(size=(3, 4)))
    fresh = parametrizations.weight_norm(linear64())
    fresh.load_state_dict(m.state_dict())
    close(fresh.weight, value(m.weight), 0, 0)
    x = t(rng.normal(size=(2, 4)))
    close(fresh(x), value(m(x)), 0, 0)


@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_loads_an_old_style_state_dict_with_weight_g_and_weight_v(rng, dim):
    # PyTorch's weight_norm registers a load_state_dict pre-hook renaming weight_g / weight_v.
    old = kiln.nn.utils.weight_norm(linear64(), dim=dim)
    assign(old.weight_g, rng.uniform(0.5, 2.0, size=tuple(old.weight_g.shape)))
    x = t(rng.normal(size=(2, 4)))
    want = value(old(x))
    state = old.state_dict()
    assert list(state) == ["bias", "weight_g", "weight_v"]
    new = parametrizations.weight_norm(linear64(), dim=dim)
    new.load_state_dict(state)
    close(new.parametrizations.weight.original0, value(old.weight_g), 0, 0)
    close(new.parametrizations.weight.original1, value(old.weight_v), 0, 0)
    close(new(x), want, 1e-12, 1e-12)


def test_weight_norm_then_remove_parametrizations_leaves_a_plain_weight(rng):
    m = parametrizations.weight_norm(linear64(), dim=0)
    assign(m.parametrizations.weight.original0, rng.uniform(0.5, 2.0, size=(3, 1)))
    want = np_weight_norm(value(m.parametrizations.weight.original0),
                          value(m.parametrizations.weight.original1), 0)
    parametrize.remove_parametrizations(m, "weight")
    assert type(m) is nn.Linear
    assert isinstance(m.weight, nn.Parameter)
    close(m.weight, want, 1e-12, 1e-12)
    assert names(m.named_parameters()) == ["bias", "weight"]


@pytest.mark.parametrize("case", WEIGHT_NORM_CASES, ids=case_id)
def test_weight_norm_matches_torch(torch, rng, case):
    kind, dim = case
    theirs = torch.nn.utils.parametrizations.weight_norm(torch_factory(torch, kind)(), dim=dim)
    with torch.no_grad():
        theirs.parametrizations.weight.original0.uniform_(0.5, 2.0)
    ours = parametrizations.weight_norm(FACTORIES[kind][0](), dim=dim)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict(torch_state(theirs))
    # The value and the gradients of the input and of every parameter, in PyTorch's order.
    check_cell_against_torch(torch, ours, theirs, rng.normal(size=FACTORIES[kind][1]), rng)


def test_weight_norm_loads_torchs_old_style_state_dict(torch, rng):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's old weight_norm is deprecated
        theirs = torch.nn.utils.weight_norm(torch.nn.Linear(4, 3).double())
    ours = parametrizations.weight_norm(linear64())
    ours.load_state_dict(torch_state(theirs))
    x = rng.normal(size=(2, 4))
    check_torch(ours(t(x)), theirs(torch.tensor(x)), F64, "output")


# ---------------------------------------------------------------------------------------------
# parametrizations.spectral_norm


def sn_buffers(m, name="weight"):
    cell = m.parametrizations[name][0]
    return value(cell._u), value(cell._v)


def spectral_weight(rng, singular_values, rows, cols):
    """A (rows, cols) matrix with the given singular values."""
    u, _ = np.linalg.qr(rng.normal(size=(rows, rows)))
    v, _ = np.linalg.qr(rng.normal(size=(cols, cols)))
    s = np.zeros((rows, cols))
    s[np.arange(len(singular_values)), np.arange(len(singular_values))] = singular_values
    return u @ s @ v.T


def test_spectral_norm_names_and_buffer_shapes_are_pytorchs():
    m = nn.Linear(5, 4)
    assert parametrizations.spectral_norm(m) is m
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original",
                                    "parametrizations.weight.0._u",
                                    "parametrizations.weight.0._v"]
    assert names(m.named_parameters()) == ["bias", "parametrizations.weight.original"]
    assert [(n, tuple(b.shape)) for n, b in m.named_buffers()] == [
        ("parametrizations.weight.0._u", (4,)), ("parametrizations.weight.0._v", (5,))]
    u, v = sn_buffers(m)
    assert np.linalg.norm(u) == pytest.approx(1, rel=1e-5)
    assert np.linalg.norm(v) == pytest.approx(1, rel=1e-5)
    assert type(m).__name__ == "ParametrizedLinear"


@pytest.mark.parametrize("n", [1, 3])
def test_spectral_norm_runs_n_power_iterations_at_each_access_in_training(n):
    m = parametrizations.spectral_norm(linear64(5, 4), n_power_iterations=n)
    assert m.training
    w = value(m.parametrizations.weight.original)
    for _ in range(3):
        u, v = sn_buffers(m)
        weight = m.weight
        u, v = np_power_iteration(w, u, v, n)
        got_u, got_v = sn_buffers(m)
        np.testing.assert_allclose(got_u, u, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(got_v, v, rtol=1e-10, atol=1e-12)
        close(weight, w / (u @ w @ v), 1e-10, 1e-12)


def test_spectral_norm_forward_in_training_updates_the_buffers(rng):
    m = parametrizations.spectral_norm(linear64(5, 4))
    w, b = value(m.parametrizations.weight.original), value(m.bias)
    u, v = sn_buffers(m)
    x = rng.normal(size=(2, 5))
    y = m(t(x))
    u, v = np_power_iteration(w, u, v, 1)
    np.testing.assert_allclose(sn_buffers(m)[0], u, rtol=1e-10, atol=1e-12)
    close(y, x @ (w / (u @ w @ v)).T + b, 1e-10, 1e-12)


def test_a_recurrent_layer_reads_a_spectral_normed_weight_once_a_call(rng):
    m = parametrizations.spectral_norm(nn.GRU(4, 3, num_layers=2).double(), name="weight_ih_l0")
    sn = m.parametrizations.weight_ih_l0
    u, v = value(sn[0]._u), value(sn[0]._v)
    m(t(rng.normal(size=(5, 2, 4))))
    u, v = np_power_iteration(value(sn.original), u, v, 1)  # one iteration, not one per read
    np.testing.assert_allclose(value(sn[0]._u), u, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(value(sn[0]._v), v, rtol=1e-10, atol=1e-12)


def test_spectral_norm_in_eval_mode_does_not_update_the_buffers(rng):
    m = parametrizations.spectral_norm(linear64(5, 4)).eval()
    assert not m.parametrizations.weight[0].training
    w, b = value(m.parametrizations.weight.original), value(m.bias)
    u, v = sn_buffers(m)
    x = rng.normal(size=(2, 5))
    for _ in range(3):
        weight = m.weight
        y = m(t(x))
        np.testing.assert_array_equal(sn_buffers(m)[0], u)
        np.testing.assert_array_equal(sn_buffers(m)[1], v)
        close(weight, w / (u @ w @ v), 1e-10, 1e-12)
        close(y, x @ (w / (u @ w @ v)).T + b, 1e-10, 1e-12)
    m.train()  # back in training, an access runs the power iteration again
    m.weight
    u, v = np_power_iteration(w, u, v, 1)
    np.testing.assert_allclose(sn_buffers(m)[0], u, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(sn_buffers(m)[1], v, rtol=1e-10, atol=1e-12)


def test_spectral_norm_sigma_converges_to_the_largest_singular_value(rng):
    m = parametrizations.spectral_norm(linear64(5, 4))
    w = spectral_weight(rng, [5.0, 2.0, 1.0, 0.5], 4, 5)
    m.weight = t(w)  # right_inverse is the identity: stored as original
    close(m.parametrizations.weight.original, w, 0, 0)
    with kiln.no_grad():
        for _ in range(60):
            weight = m.weight
    sigma = np.linalg.svd(w, compute_uv=False)[0]
    assert sigma == pytest.approx(5.0)
    close(weight, w / sigma, 1e-8, 1e-10)
    assert np.linalg.svd(value(weight), compute_uv=False)[0] == pytest.approx(1.0, rel=1e-8)


def test_spectral_norm_of_a_random_weight_has_spectral_norm_one_after_many_iterations(rng):
    m = parametrizations.spectral_norm(nn.Linear(6, 4))
    m.weight = t(rng.normal(size=(4, 6)).astype(np.float32))
    with kiln.no_grad():
        for _ in range(200):
            m.weight
    m.eval()
    sigma = np.linalg.svd(value(m.weight), compute_uv=False)[0]
    assert sigma == pytest.approx(1.0, rel=2e-3)


def test_spectral_norm_of_a_conv2d_weight_uses_dim0_by_the_rest(rng):
    m = parametrizations.spectral_norm(nn.Conv2d(2, 3, 3, dtype=F64))
    assert [tuple(b.shape) for _, b in m.named_buffers()] == [(3,), (18,)]
    w, b = value(m.parametrizations.weight.original), value(m.bias)
    u, v = sn_buffers(m)
    x = t(rng.normal(size=(2, 2, 5, 5)))
    y = m(x)
    mat = weight_matrix(w, 0)
    u, v = np_power_iteration(mat, u, v, 1)
    np.testing.assert_allclose(sn_buffers(m)[0], u, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(sn_buffers(m)[1], v, rtol=1e-10, atol=1e-12)
    plain = plain_twin(lambda: nn.Conv2d(2, 3, 3, dtype=F64), w / (u @ mat @ v), b)
    close(y, value(plain(x)), 1e-10, 1e-12)


def test_spectral_norm_of_a_transposed_convolution_uses_dim1_by_default():
    m = parametrizations.spectral_norm(nn.ConvTranspose2d(2, 3, 3, dtype=F64))
    w = value(m.parametrizations.weight.original)
    assert w.shape == (2, 3, 3, 3)
    assert [tuple(b.shape) for _, b in m.named_buffers()] == [(3,), (18,)]
    u, v = sn_buffers(m)
    weight = m.weight
    mat = weight_matrix(w, 1)
    u, v = np_power_iteration(mat, u, v, 1)
    close(weight, w / (u @ mat @ v), 1e-10, 1e-12)


def test_spectral_norm_with_dim_1_on_a_linear():
    m = parametrizations.spectral_norm(linear64(5, 4), dim=1)
    assert [tuple(b.shape) for _, b in m.named_buffers()] == [(5,), (4,)]
    w = value(m.parametrizations.weight.original)
    u, v = sn_buffers(m)
    weight = m.weight
    u, v = np_power_iteration(w.T, u, v, 1)
    close(weight, w / (u @ w.T @ v), 1e-10, 1e-12)


def test_spectral_norm_of_a_1d_weight_normalizes_it():
    class Vector(nn.Cell):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(t(np.array([3.0, 4.0])))

    m = parametrizations.spectral_norm(Vector())
    assert list(m.state_dict()) == ["parametrizations.weight.original"]  # no u, v
    close(m.weight, np.array([0.6, 0.8]), 1e-12, 1e-12)


def test_spectral_norm_gradient_matches_the_closed_form(rng):
    m = parametrizations.spectral_norm(linear64(5, 4)).eval()
    w = value(m.parametrizations.weight.original)
    u, v = sn_buffers(m)
    upstream = rng.normal(size=(4, 5))
    (grad,) = kiln.autograd.grad(mint.sum(m.weight * t(upstream)),
                                 [m.parametrizations.weight.original])
    # u and v are constants: d(W / sigma) with sigma = u^T W v.
    sigma = u @ w @ v
    want = upstream / sigma - np.sum(upstream * w) / sigma ** 2 * np.outer(u, v)
    close(grad, want, 1e-10, 1e-12)


def test_spectral_norm_buffers_get_no_gradient_and_stay_buffers(rng):
    m = parametrizations.spectral_norm(linear64(5, 4))
    mint.sum(m(t(rng.normal(size=(2, 5))))).backward()
    cell = m.parametrizations.weight[0]
    assert not cell._u.requires_grad and not cell._v.requires_grad
    assert m.parametrizations.weight.original.grad is not None


@pytest.mark.parametrize("n", [0, -1])
def test_spectral_norm_refuses_a_non_positive_number_of_iterations(n):
    m = nn.Linear(3, 3)
    with raises(ValueError, match="n_power_iterations"):
        parametrizations.spectral_norm(m, n_power_iterations=n)
    assert not parametrize.is_parametrized(m)


@pytest.mark.parametrize("dim", [2, -3])
def test_spectral_norm_refuses_a_dim_out_of_range(dim):
    with raises(IndexError):
        parametrizations.spectral_norm(nn.Linear(3, 3), dim=dim)


def test_spectral_norm_state_dict_round_trip_keeps_u_and_v(rng):
    m = parametrizations.spectral_norm(linear64(5, 4))
    m(t(rng.normal(size=(1, 5))))
    fresh = parametrizations.spectral_norm(linear64(5, 4))
    fresh.load_state_dict(m.state_dict())
    np.testing.assert_array_equal(sn_buffers(fresh)[0], sn_buffers(m)[0])
    m.eval()
    fresh.eval()
    close(fresh.weight, value(m.weight), 0, 0)


@pytest.mark.parametrize("kind", ["linear", "conv2d"])
def test_spectral_norm_matches_torch_from_the_same_u_and_v(torch, rng, kind):
    if kind == "linear":
        theirs = torch.nn.Linear(5, 4).double()
        ours, shape = linear64(5, 4), (2, 5)
    else:
        theirs = torch.nn.Conv2d(2, 3, 3).double()
        ours, shape = nn.Conv2d(2, 3, 3, dtype=F64), (2, 2, 5, 5)
    theirs = torch.nn.utils.parametrizations.spectral_norm(theirs, n_power_iterations=2)
    ours = parametrizations.spectral_norm(ours, n_power_iterations=2)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict(torch_state(theirs))
    for _ in range(3):  # training: both run the power iteration at each call
        x = rng.normal(size=shape)
        check_torch(ours(t(x)), theirs(torch.tensor(x)), F64, "output")
        for name in ("_u", "_v"):
            check_torch(getattr(ours.parametrizations.weight[0], name),
                        getattr(theirs.parametrizations.weight[0], name), F64, name)
    check_cell_against_torch(torch, ours, theirs, rng.normal(size=shape), rng)
    ours.eval()
    theirs.eval()
    check_cell_against_torch(torch, ours, theirs, rng.normal(size=shape), rng)
    check_torch(ours.parametrizations.weight[0]._u, theirs.parametrizations.weight[0]._u, F64,
                "_u after eval")


# ---------------------------------------------------------------------------------------------
# The older weight_norm / remove_weight_norm


@pytest.mark.parametrize("case", WEIGHT_NORM_CASES, ids=case_id)
def test_old_weight_norm_has_weight_g_and_weight_v_with_pytorchs_shapes(case):
    kind, dim = case
    m = FACTORIES[kind][0]()
    w0 = value(m.weight)
    assert kiln.nn.utils.weight_norm(m, dim=dim) is m
    assert [(n, tuple(p.shape)) for n, p in m.named_parameters()] == [
        ("bias", (3,)), ("weight_g", G_SHAPES[case]), ("weight_v", w0.shape)]
    assert list(m.state_dict()) == ["bias", "weight_g", "weight_v"]
    assert type(m) is type(FACTORIES[kind][0]())  # no class of its own
    assert not isinstance(m.weight, nn.Parameter)
    close(m.weight_g, np_norm_except_dim(w0, dim), 1e-12, 1e-12)
    close(m.weight_v, w0, 0, 0)
    close(m.weight, w0, 1e-12, 1e-12)


def test_old_weight_norm_recomputes_the_weight_before_each_call(rng):
    m = kiln.nn.utils.weight_norm(linear64())
    g, v = rng.uniform(0.5, 2.0, size=(3, 1)), rng.normal(size=(3, 4))
    assign(m.weight_g, g)
    assign(m.weight_v, v)
    x = rng.normal(size=(2, 4))
    want_weight = np_weight_norm(g, v, 0)
    close(m(t(x)), x @ want_weight.T + value(m.bias), 1e-12, 1e-12)
    close(m.weight, want_weight, 1e-12, 1e-12)
    assign(m.weight_g, 2 * g)
    close(m(t(x)), x @ (2 * want_weight).T + value(m.bias), 1e-12, 1e-12)


def test_old_weight_norm_gradients_flow_to_g_and_v(rng):
    m = kiln.nn.utils.weight_norm(linear64(), dim=0)
    assign(m.weight_g, rng.uniform(0.5, 2.0, size=(3, 1)))
    x, up = rng.normal(size=(2, 4)), rng.normal(size=(2, 3))
    mint.sum(m(t(x)) * t(up)).backward()
    dg, dv = np_weight_norm_grads(value(m.weight_g), value(m.weight_v), 0, up.T @ x)
    close(m.weight_g.grad, dg, 1e-10, 1e-12)
    close(m.weight_v.grad, dv, 1e-10, 1e-12)
    close(m.bias.grad, up.sum(0), 1e-12, 1e-12)


def test_remove_weight_norm_restores_a_plain_weight_parameter(rng):
    m = kiln.nn.utils.weight_norm(linear64())
    g, v = rng.uniform(0.5, 2.0, size=(3, 1)), rng.normal(size=(3, 4))
    assign(m.weight_g, g)
    assign(m.weight_v, v)
    assert kiln.nn.utils.remove_weight_norm(m) is m
    assert names(m.named_parameters()) == ["bias", "weight"]
    assert list(m.state_dict()) == ["bias", "weight"]
    assert isinstance(m.weight, nn.Parameter) and m.weight.requires_grad
    close(m.weight, np_weight_norm(g, v, 0), 1e-12, 1e-12)
    # No hook is left: the forward pass uses the parameter as it is.
    new = rng.normal(size=(3, 4))
    assign(m.weight, new)
    x = rng.normal(size=(2, 4))
    close(m(t(x)), x @ new.T + value(m.bias), 1e-12, 1e-12)
    close(m.weight, new, 0, 0)


def test_old_weight_norm_twice_on_one_parameter_is_an_error():
    m = kiln.nn.utils.weight_norm(nn.Linear(4, 3))
    with raises(RuntimeError, match="weight"):
        kiln.nn.utils.weight_norm(m)


def test_remove_weight_norm_without_weight_norm_is_a_value_error():
    with raises(ValueError, match="weight"):
        kiln.nn.utils.remove_weight_norm(nn.Linear(2, 2))


def test_old_weight_norm_on_another_parameter_name(rng):
    m = kiln.nn.utils.weight_norm(linear64(), name="bias", dim=None)
    assert names(m.named_parameters()) == ["weight", "bias_g", "bias_v"]
    b = value(m.bias_v)
    close(m.bias_g, np.linalg.norm(b), 1e-12, 1e-12)
    kiln.nn.utils.remove_weight_norm(m, name="bias")
    assert names(m.named_parameters()) == ["weight", "bias"]
    close(m.bias, b, 1e-12, 1e-12)


@pytest.mark.parametrize("case", WEIGHT_NORM_CASES, ids=case_id)
def test_old_weight_norm_matches_torch(torch, rng, case):
    import warnings
    kind, dim = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        theirs = torch.nn.utils.weight_norm(torch_factory(torch, kind)(), dim=dim)
    with torch.no_grad():
        theirs.weight_g.uniform_(0.5, 2.0)
    ours = kiln.nn.utils.weight_norm(FACTORIES[kind][0](), dim=dim)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict(torch_state(theirs))
    check_cell_against_torch(torch, ours, theirs, rng.normal(size=FACTORIES[kind][1]), rng)


# ---------------------------------------------------------------------------------------------
# The older spectral_norm / remove_spectral_norm


def np_old_power_iteration(mat, u, v, n, eps=1e-12):
    """PyTorch's older SpectralNorm.compute_weight: v from u first, then u from v."""
    for _ in range(n):
        v = np_normalize(mat.T @ u, eps)
        u = np_normalize(mat @ v, eps)
    return u, v


def test_old_spectral_norm_has_weight_orig_and_buffers_u_v_with_pytorchs_names():
    m = nn.Conv2d(2, 3, 3, dtype=F64)
    weight = m.weight
    assert kiln.nn.utils.spectral_norm(m) is m
    assert names(m.named_parameters()) == ["bias", "weight_orig"]
    assert m.weight_orig is weight  # the same Parameter, renamed
    assert names(m.named_buffers()) == ["weight_u", "weight_v"]
    assert list(m.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]
    assert m.weight_u.shape == (3,) and m.weight_v.shape == (18,)
    for b in (m.weight_u, m.weight_v):
        np.testing.assert_allclose(np.linalg.norm(value(b)), 1.0, rtol=1e-12)
    close(m.weight, value(weight), 0, 0)  # the weight itself until the first call


@pytest.mark.parametrize("n", [1, 3])
def test_old_spectral_norm_iterates_in_training_and_divides_by_sigma(rng, n):
    m = kiln.nn.utils.spectral_norm(linear64(5, 4), n_power_iterations=n)
    w, u, v = value(m.weight_orig), value(m.weight_u), value(m.weight_v)
    x = rng.normal(size=(2, 5))
    y = m(t(x))
    u, v = np_old_power_iteration(w, u, v, n)
    np.testing.assert_allclose(value(m.weight_u), u, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(value(m.weight_v), v, rtol=1e-10, atol=1e-12)
    want = w / (u @ w @ v)
    close(m.weight, want, 1e-10, 1e-12)
    close(y, x @ want.T + value(m.bias), 1e-10, 1e-12)
    m.eval()  # no iteration: sigma from the stored u and v
    m(t(x))
    np.testing.assert_allclose(value(m.weight_u), u, rtol=1e-10, atol=1e-12)
    close(m.weight, want, 1e-10, 1e-12)


def test_old_spectral_norm_gradient_reaches_weight_orig(rng):
    m = kiln.nn.utils.spectral_norm(linear64(5, 4))
    m.eval()
    w, u, v = value(m.weight_orig), value(m.weight_u), value(m.weight_v)
    upstream = rng.normal(size=(4, 5))
    m(t(np.zeros((1, 5))))  # the pre-hook sets weight
    mint.sum(m.weight * t(upstream)).backward()
    sigma = u @ w @ v
    want = upstream / sigma - (upstream * w).sum() / sigma ** 2 * np.outer(u, v)
    close(m.weight_orig.grad, want, 1e-10, 1e-12)


def test_remove_spectral_norm_leaves_the_normalized_weight_as_a_parameter(rng):
    m = kiln.nn.utils.spectral_norm(linear64(5, 4))
    m(t(rng.normal(size=(1, 5))))
    w, u, v = value(m.weight_orig), value(m.weight_u), value(m.weight_v)
    assert kiln.nn.utils.remove_spectral_norm(m) is m
    assert names(m.named_parameters()) == ["bias", "weight"]
    assert isinstance(m.weight, nn.Parameter) and not list(m.named_buffers())
    close(m.weight, w / (u @ w @ v), 1e-10, 1e-12)


def test_old_spectral_norm_errors():
    m = kiln.nn.utils.spectral_norm(nn.Linear(3, 2))
    with raises(kiln.KilnValueError, match="spectral_norm already"):
        kiln.nn.utils.spectral_norm(m)
    with raises(kiln.KilnValueError, match="no spectral_norm"):
        kiln.nn.utils.remove_spectral_norm(nn.Linear(3, 2))
    with raises(kiln.KilnValueError, match="n_power_iterations"):
        kiln.nn.utils.spectral_norm(nn.Linear(3, 2), n_power_iterations=0)
    with raises(IndexError, match="dim 2"):
        kiln.nn.utils.spectral_norm(nn.Linear(3, 2), dim=2)


def test_old_spectral_norm_matches_torch(torch, rng):
    theirs = torch.nn.utils.spectral_norm(torch.nn.Conv2d(2, 3, 3).double(), n_power_iterations=2)
    ours = kiln.nn.utils.spectral_norm(nn.Conv2d(2, 3, 3, dtype=F64), n_power_iterations=2)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict(torch_state(theirs))
    for _ in range(3):
        x = rng.normal(size=(2, 2, 5, 5))
        check_torch(ours(t(x)), theirs(torch.tensor(x)), F64, "output")
        check_torch(ours.weight_u, theirs.weight_u, F64, "weight_u")
    check_cell_against_torch(torch, ours, theirs, rng.normal(size=(2, 2, 5, 5)), rng)


# ---------------------------------------------------------------------------------------------
# kiln.jit


def test_jit_of_a_weight_normed_cell_matches_eager_and_sees_in_place_updates(rng):
    m = parametrizations.weight_norm(linear64())
    f = kiln.jit(lambda x: m(x))
    x = t(rng.normal(size=(2, 4)))
    close(f(x), value(m(x)), 1e-12, 1e-12)
    before = value(f(x))
    g, v = m.parametrizations.weight.original0, m.parametrizations.weight.original1
    assign(g, 2 * value(g))  # in place, as jit sees them
    assign(v, value(v) + 1)
    after = value(f(x))
    assert not np.allclose(after, before)
    close(f(x), value(m(x)), 1e-12, 1e-12)
    want = value(x) @ np_weight_norm(value(g), value(v), 0).T + value(m.bias)
    close(f(x), want, 1e-12, 1e-12)


def test_jit_of_a_cell_with_a_simple_parametrization_matches_eager(rng):
    m = linear64(3, 3)
    parametrize.register_parametrization(m, "weight", Symmetric())
    f = kiln.jit(lambda x: m(x))
    x = t(rng.normal(size=(2, 3)))
    close(f(x), value(m(x)), 1e-12, 1e-12)
    new = rng.normal(size=(3, 3))
    assign(m.parametrizations.weight.original, new)
    close(f(x), value(x) @ np_symmetric(new).T + value(m.bias), 1e-12, 1e-12)


def test_jit_of_spectral_norm_updates_the_buffers_as_eager_does(rng):
    eager = parametrizations.spectral_norm(linear64(5, 4))
    jitted = parametrizations.spectral_norm(linear64(5, 4))
    jitted.load_state_dict(eager.state_dict())
    f = kiln.jit(lambda x: jitted(x))
    for _ in range(3):
        x = t(rng.normal(size=(2, 5)))
        close(f(x), value(eager(x)), 1e-10, 1e-12)
        for ours, want in zip(sn_buffers(jitted), sn_buffers(eager)):
            np.testing.assert_allclose(ours, want, rtol=1e-10, atol=1e-12)
    eager.eval()
    jitted.eval()
    x = t(rng.normal(size=(2, 5)))
    close(f(x), value(eager(x)), 1e-10, 1e-12)
    for ours, want in zip(sn_buffers(jitted), sn_buffers(eager)):
        np.testing.assert_allclose(ours, want, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# Training with an optimizer


def test_sgd_step_updates_original0_and_original1_and_the_next_forward_uses_them(rng):
    m = parametrizations.weight_norm(linear64())
    opt = kiln.optim.SGD(m.parameters(), lr=0.1)
    x = t(rng.normal(size=(2, 4)))
    out = m(x)
    mint.sum(out * out).backward()
    g, v = m.parametrizations.weight.original0, m.parametrizations.weight.original1
    old = {name: value(p) for name, p in m.named_parameters()}
    grads = {name: value(p.grad) for name, p in m.named_parameters()}
    opt.step()
    for name, p in m.named_parameters():
        close(p, old[name] - 0.1 * grads[name], 1e-12, 1e-12)
    assert not np.allclose(value(g), old["parametrizations.weight.original0"])
    assert not np.allclose(value(v), old["parametrizations.weight.original1"])
    weight = np_weight_norm(value(g), value(v), 0)
    close(m.weight, weight, 1e-12, 1e-12)
    close(m(x), value(x) @ weight.T + value(m.bias), 1e-12, 1e-12)


def test_sgd_trains_a_spectral_normed_cell_through_original(rng):
    m = parametrizations.spectral_norm(linear64(5, 4))
    opt = kiln.optim.SGD(m.parameters(), lr=0.05)
    original = m.parametrizations.weight.original
    before = value(original)
    mint.sum(m(t(rng.normal(size=(3, 5))))).backward()
    grad = value(original.grad)
    opt.step()
    close(original, before - 0.05 * grad, 1e-12, 1e-12)
    m.eval()
    u, v = sn_buffers(m)
    w = value(original)
    close(m.weight, w / (u @ w @ v), 1e-10, 1e-12)


# ---------------------------------------------------------------------------------------------
# deepcopy and pickle


def test_deepcopy_of_a_parametrized_cell_is_independent(rng):
    m = parametrizations.weight_norm(linear64())
    c = copy.deepcopy(m)
    assert type(c).__name__ == "ParametrizedLinear" and isinstance(c, nn.Linear)
    assert parametrize.type_before_parametrizations(c) is nn.Linear
    assert parametrize.is_parametrized(c, "weight")
    assert list(c.state_dict()) == list(m.state_dict())
    for (name, ours), (_, theirs) in zip(c.named_parameters(), m.named_parameters()):
        assert ours is not theirs and not ours.shares_storage_with(theirs), name
        close(ours, value(theirs), 0, 0)
    close(c.weight, value(m.weight), 0, 0)
    before = value(m.weight)
    assign(c.parametrizations.weight.original1, rng.normal(size=(3, 4)))
    close(m.weight, before, 0, 0)  # the original is untouched
    close(c.weight, np_weight_norm(value(c.parametrizations.weight.original0),
                                   value(c.parametrizations.weight.original1), 0),
          1e-12, 1e-12)
    c.weight = t(np.ones((3, 4)))  # right_inverse writes into the copy's originals only
    close(m.weight, before, 0, 0)
    # The copy's class is its own: parametrizing or unparametrizing it leaves m's alone.
    assert type(c) is not type(m)
    parametrize.remove_parametrizations(c, "weight")
    parametrize.register_parametrization(c, "bias", AddOne())
    close(m.weight, before, 0, 0)
    assert not hasattr(type(m), "bias") or not isinstance(type(m).__dict__.get("bias"), property)


def test_deepcopy_of_a_spectral_normed_cell_copies_its_buffers(rng):
    m = parametrizations.spectral_norm(linear64(5, 4))
    c = copy.deepcopy(m)
    u, v = sn_buffers(m)
    np.testing.assert_array_equal(sn_buffers(c)[0], u)
    np.testing.assert_array_equal(sn_buffers(c)[1], v)
    assert not c.parametrizations.weight[0]._u.shares_storage_with(m.parametrizations.weight[0]._u)
    c(t(rng.normal(size=(1, 5))))
    # The copy's power iteration is its own: the original's buffers stay as they were.
    np.testing.assert_array_equal(sn_buffers(m)[0], u)
    np.testing.assert_array_equal(sn_buffers(m)[1], v)
    u, v = np_power_iteration(value(c.parametrizations.weight.original), u, v, 1)
    np.testing.assert_allclose(sn_buffers(c)[0], u, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("make", [
    lambda: parametrize.register_parametrization(nn.Linear(2, 2), "weight", AddOne()),
    lambda: parametrizations.weight_norm(nn.Linear(2, 2)),
    lambda: parametrizations.spectral_norm(nn.Linear(2, 2)),
], ids=["register_parametrization", "weight_norm", "spectral_norm"])
def test_pickling_a_parametrized_cell_is_refused_as_in_pytorch(make):
    # PyTorch: "Serialization of parametrized modules is only supported through state_dict()"
    with pytest.raises(RuntimeError, match="state_dict"):
        pickle.dumps(make())


def test_a_cell_pickles_again_after_its_parametrizations_are_removed(rng):
    m = parametrize.register_parametrization(linear64(2, 2), "weight", AddOne())
    parametrize.remove_parametrizations(m, "weight")
    back = pickle.loads(pickle.dumps(m))
    assert type(back) is nn.Linear
    close(back.weight, value(m.weight), 0, 0)


# ---------------------------------------------------------------------------------------------
# Names and types equal PyTorch's across the features (where PyTorch is installed)


def _build_cases(lib, P, PS, param_cells):
    """The same parametrized cells built with ``lib`` (torch or kiln) for name comparisons."""
    symmetric, add_one, split_sum = param_cells
    nn_ = lib.nn
    cases = {}
    m = nn_.Linear(3, 3)
    P.register_parametrization(m, "weight", symmetric())
    cases["symmetric"] = m
    m = nn_.Linear(3, 3)
    P.register_parametrization(m, "weight", split_sum())
    cases["split"] = m
    m = nn_.Linear(3, 3)
    P.register_parametrization(m, "weight", add_one())
    P.register_parametrization(m, "weight", symmetric())
    P.register_parametrization(m, "bias", add_one())
    cases["chained_and_bias"] = m
    cases["weight_norm"] = PS.weight_norm(nn_.Conv1d(2, 3, 5), dim=1)
    cases["spectral_norm"] = PS.spectral_norm(nn_.Conv2d(2, 3, 3))
    normed = PS.weight_norm(nn_.Linear(3, 3))
    cases["weight_norm_then_spectral_norm"] = PS.spectral_norm(normed)
    return cases


def test_names_equal_pytorchs_across_parametrizations(torch):
    tnn = torch.nn

    class TSymmetric(tnn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

    class TAddOne(tnn.Module):
        def forward(self, X):
            return X + 1

        def right_inverse(self, X):
            return X - 1

    class TSplitSum(tnn.Module):
        def forward(self, A, B):
            return A + B

        def right_inverse(self, X):
            return X, torch.zeros_like(X)

    theirs = _build_cases(torch, torch.nn.utils.parametrize, torch.nn.utils.parametrizations,
                          (TSymmetric, TAddOne, TSplitSum))
    ours = _build_cases(kiln, parametrize, parametrizations, (Symmetric, AddOne, SplitSum))
    for key, want in theirs.items():
        got = ours[key]
        assert type(got).__name__ == type(want).__name__, key
        assert list(got.state_dict()) == list(want.state_dict()), key
        assert names(got.named_parameters()) == names(want.named_parameters()), key
        assert names(got.named_buffers()) == names(want.named_buffers()), key
        assert names(got.named_modules()) == names(want.named_modules()), key
        for (name, a), (_, b) in zip(got.state_dict().items(), want.state_dict().items()):
            assert tuple(a.shape) == tuple(b.shape), (key, name)
