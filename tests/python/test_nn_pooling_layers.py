"""kiln.nn.MaxPool2d, AvgPool2d (kiln/nn/pooling.py), Flatten and Unflatten (kiln/nn/flatten.py)
against PyTorch's: values and gradients, repr, a small convolutional net built from them, kiln.jit,
and their argument errors."""

import numpy as np
import pytest

import kiln
from conftest import FLOAT_DTYPES, check_torch, raises, random_array, t, torch_twin
from kiln import nn
from kiln.nn.flatten import Flatten, Unflatten
from kiln.nn.pooling import AvgPool2d, MaxPool2d
from test_nn_numpy_reference import MAX_POOLS, POOLS  # the NumPy references' cases

mint = kiln.mint


def matches_torch(torch, ours, theirs, shape, dtype, rng):
    """Runs a kiln cell and a torch module on the same random x; compares output and x's
    gradient."""
    values = random_array(shape, dtype, rng)
    x = t(values, dtype).requires_grad_()
    tx = torch_twin(torch, values, dtype)
    out, expected = ours(x), theirs(tx)
    assert out.dtype == dtype and out.shape == tuple(expected.shape)
    check_torch(out, expected, dtype, "value")
    upstream = random_array(out.shape, dtype, rng, 0.5, 2.0)
    (grad,) = kiln.autograd.grad(out, x, t(upstream, dtype))
    (want,) = torch.autograd.grad(expected, tx, torch_twin(torch, upstream, dtype, False))
    check_torch(grad, want, dtype, "gradient")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("kwargs", MAX_POOLS, ids=str)
def test_max_pool2d_matches_torch(torch, kwargs, dtype, rng):
    ours, theirs = MaxPool2d(**kwargs), torch.nn.MaxPool2d(**kwargs)
    assert repr(ours) == repr(theirs)
    matches_torch(torch, ours, theirs, (2, 3, 7, 8), dtype, rng)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("kwargs", POOLS, ids=str)
def test_avg_pool2d_matches_torch(torch, kwargs, count_include_pad, dtype, rng):
    ours = AvgPool2d(count_include_pad=count_include_pad, **kwargs)
    theirs = torch.nn.AvgPool2d(count_include_pad=count_include_pad, **kwargs)
    assert repr(ours) == repr(theirs)
    matches_torch(torch, ours, theirs, (2, 3, 7, 8), dtype, rng)


def test_max_pool2d_takes_pytorchs_positional_arguments(torch, rng):
    # return_indices sits before ceil_mode, as in PyTorch: MaxPool2d(3, 2, 1, 1, False, True) is
    # ceil mode, not a fifth argument read as it.
    ours, theirs = MaxPool2d(3, 2, 1, 1, False, True), torch.nn.MaxPool2d(3, 2, 1, 1, False, True)
    assert ours.ceil_mode and repr(ours) == repr(theirs)
    matches_torch(torch, ours, theirs, (1, 2, 8, 8), kiln.float64, rng)
    ours, theirs = AvgPool2d(3, 2, 1, True, False), torch.nn.AvgPool2d(3, 2, 1, True, False)
    assert ours.ceil_mode and not ours.count_include_pad
    matches_torch(torch, ours, theirs, (1, 2, 8, 8), kiln.float64, rng)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: d.name)
def test_max_pool2d_indices_and_avg_pool2d_divisor_override_match_torch(torch, dtype, rng):
    ours = MaxPool2d(3, 2, 1, return_indices=True)
    theirs = torch.nn.MaxPool2d(3, 2, 1, return_indices=True)
    assert repr(ours) == repr(theirs)
    values = random_array((2, 3, 7, 8), dtype, rng)
    out, indices = ours(t(values, dtype))
    want, want_indices = theirs(torch_twin(torch, values, dtype, False))
    np.testing.assert_array_equal(indices.numpy(), want_indices.numpy())
    check_torch(out, want, dtype, "value")
    ours = AvgPool2d(3, 2, 1, divisor_override=5)
    theirs = torch.nn.AvgPool2d(3, 2, 1, divisor_override=5)
    assert repr(ours) == repr(theirs)
    matches_torch(torch, ours, theirs, (2, 3, 7, 8), dtype, rng)


@pytest.mark.parametrize("start_dim, end_dim", [(1, -1), (0, -1), (1, 2), (-3, -2), (2, 2)])
def test_flatten_matches_torch(torch, start_dim, end_dim, rng):
    ours, theirs = Flatten(start_dim, end_dim), torch.nn.Flatten(start_dim, end_dim)
    assert repr(ours) == repr(theirs)
    matches_torch(torch, ours, theirs, (2, 3, 4, 5), kiln.float32, rng)


@pytest.mark.parametrize("dim, sizes, shape", [
    (1, (3, 4), (2, 12, 5)),
    (-1, (2, -1), (2, 3, 6)),
    (0, (1, 2, 1), (2, 3)),
    (1, [-1], (2, 3)),
    (1, (0, 5), (2, 0)),
    (-2, (2, 2), (3, 4, 1)),
])
def test_unflatten_matches_torch(torch, dim, sizes, shape, rng):
    ours, theirs = Unflatten(dim, sizes), torch.nn.Unflatten(dim, sizes)
    assert ours.unflattened_size == tuple(sizes)
    matches_torch(torch, ours, theirs, shape, kiln.float32, rng)


def test_unflatten_repr_is_pytorchs(torch):
    assert repr(Unflatten(1, (2, 3))) == repr(torch.nn.Unflatten(1, (2, 3)))


def test_a_convolutional_net_of_the_new_layers_matches_torch(torch, rng):
    # 11 x 11 -> conv 11 x 11 -> max pool 5 x 5 -> conv 3 x 3 -> average pool, ceil mode, 2 x 2.
    ours = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), MaxPool2d(2),
                         nn.Conv2d(4, 8, 3), AvgPool2d(2, ceil_mode=True), Flatten(),
                         Unflatten(1, (8, -1)), Flatten(), nn.Linear(8 * 2 * 2, 3))
    theirs = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3, padding=1), torch.nn.ReLU(),
                                 torch.nn.MaxPool2d(2), torch.nn.Conv2d(4, 8, 3),
                                 torch.nn.AvgPool2d(2, ceil_mode=True), torch.nn.Flatten(),
                                 torch.nn.Unflatten(1, (8, -1)), torch.nn.Flatten(),
                                 torch.nn.Linear(8 * 2 * 2, 3))
    ours.load_state_dict(theirs.state_dict())
    x = random_array((2, 2, 11, 11), kiln.float32, rng)
    out, expected = ours(t(x)), theirs(torch.tensor(x))
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=1e-5, atol=1e-6)
    jitted = kiln.jit(ours)
    for _ in range(2):  # the trace, then the compiled graph
        np.testing.assert_allclose(jitted(t(x)).numpy(), out.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cell", [MaxPool2d(3, 2, 1), AvgPool2d(2, ceil_mode=True),
                                  Flatten(), Unflatten(1, (2, -1))], ids=repr)
def test_layers_under_jit_match_eager(cell, rng):
    x = t(random_array((2, 4, 5, 6), kiln.float32, rng))

    def loss(v):
        return mint.sum(mint.square(cell(v)))

    jitted, jitted_grad = kiln.jit(cell), kiln.jit(kiln.grad(loss))
    for _ in range(2):
        np.testing.assert_allclose(jitted(x).numpy(), cell(x).numpy(), rtol=1e-6)
        np.testing.assert_allclose(jitted_grad(x).numpy(), kiln.grad(loss)(x).numpy(), rtol=1e-6)


@pytest.mark.parametrize("cells", [
    (Unflatten(1, (2, -1)),),
    (Flatten(0, 1), Unflatten(0, (-1, 4))),  # the batch dimension back from one of 4 * B
    (Flatten(0, 1), Unflatten(0, (4, -1))),  # B rows in each of 4
], ids=["dim 1", "batch back", "batch across"])
def test_unflatten_under_a_dynamic_jit_follows_the_batch_size(cells, rng):
    traced = []

    def eager(x):
        for cell in cells:
            x = cell(x)
        return x * 2.0

    @kiln.jit(dynamic=True)
    def jitted(x):
        traced.append(x.shape[0])
        return eager(x)

    for batch in (2, 3, 5, 8):
        x = t(random_array((batch, 4, 6), kiln.float32, rng))
        np.testing.assert_array_equal(jitted(x).numpy(), eager(x).numpy())
    assert traced == [2, 3, 5]


def test_unflattening_the_batch_dimension_itself_is_refused_by_a_dynamic_jit():
    # [B, 3] -> [B / 2, 2, 3]: a dimension that is not B times an integer, which no dynamic
    # graph follows (-1 passed to the reshape or not); dynamic=False traces each batch size.
    cell = Unflatten(0, (-1, 2))
    jitted, static = kiln.jit(cell, dynamic=True), kiln.jit(cell)
    x = t(np.arange(24, dtype=np.float32).reshape(8, 3))
    np.testing.assert_array_equal(jitted(x).numpy(), x.numpy().reshape(4, 2, 3))
    with raises(kiln.KilnValueError, match=r"does not follow the batch size(.|\n)*Reshape"
                                           r"(.|\n)*dynamic=False"):
        jitted(x[:6])
    np.testing.assert_array_equal(static(x[:6]).numpy(), x.numpy()[:6].reshape(3, 2, 3))


@pytest.mark.parametrize("call, error, message", [
    (lambda x: AvgPool2d(2, divisor_override=0)(x), kiln.KilnValueError,
     "expected a nonzero divisor_override, got 0"),
    (lambda x: MaxPool2d(2, ceil_mode=1), kiln.KilnTypeError,
     "MaxPool2d: ceil_mode must be a bool, got int 1"),
    (lambda x: MaxPool2d(2, return_indices="no"), kiln.KilnTypeError,
     "MaxPool2d: return_indices must be a bool"),
    (lambda x: AvgPool2d(2, count_include_pad=None), kiln.KilnTypeError,
     "AvgPool2d: count_include_pad must be a bool, got NoneType None"),
    (lambda x: MaxPool2d(0)(x), kiln.KilnValueError, "max_pool2d: expected kernel_size"),
    (lambda x: AvgPool2d(2, padding=2)(x), kiln.KilnValueError,
     "avg_pool2d: expected padding at most half the kernel size"),
    (lambda x: Flatten(start_dim="1"), kiln.KilnTypeError,
     "Flatten: start_dim must be an int, got str '1'"),
    (lambda x: Flatten(end_dim=1.0), kiln.KilnTypeError, "Flatten: end_dim must be an int"),
    (lambda x: Flatten(4)(x), kiln.KilnIndexError, "start_dim out of range"),
    (lambda x: Unflatten(1, 4), kiln.KilnTypeError,
     "Unflatten: expected unflattened_size to be a tuple or list of ints, got int 4"),
    (lambda x: Unflatten(1, ()), kiln.KilnValueError, "Unflatten: unflattened_size must not be "
                                                       "empty"),
    (lambda x: Unflatten(1, (2, 2.0)), kiln.KilnTypeError,
     r"Unflatten: unflattened_size\[1\] must be an int, got float 2.0"),
    (lambda x: Unflatten(1, (-2, 2)), kiln.KilnValueError,
     r"Unflatten: unflattened_size\[0\] must be at least -1, got -2"),
    (lambda x: Unflatten(1, (-1, -1)), kiln.KilnValueError,
     r"Unflatten: at most one size can be -1 \(inferred\), got \(-1, -1\)"),
    (lambda x: Unflatten(None, (2,)), kiln.KilnTypeError, "Unflatten: dim must be an int"),
    (lambda x: Unflatten(1, (2, 4))(x), kiln.ShapeError,
     r"Unflatten: sizes \(2, 4\) do not multiply to the size of dim 1 \(3\) of the input of "
     r"shape \[2, 3, 4, 4\]"),
    (lambda x: Unflatten(-1, (3, -1))(x), kiln.ShapeError,
     r"Unflatten: sizes \(3, -1\) do not multiply to the size of dim -1 \(4\)"),
    (lambda x: Unflatten(0, (0, -1))(x[:0]), kiln.ShapeError,
     r"sizes \(0, -1\) do not multiply to the size of dim 0 \(0\)"),
    (lambda x: Unflatten(4, (2, 2))(x), kiln.KilnIndexError,
     r"Unflatten: dim out of range: expected a value in \[-4, 3\] for a 4-d tensor, got 4"),
    (lambda x: Unflatten(0, (1,))(x.sum()), kiln.KilnIndexError,  # a 0-d input has no dim
     r"Unflatten: dim out of range: a 0-d tensor has no dimension, got 0"),
])
def test_layer_errors(call, error, message):
    with raises(error, match=message):
        call(t(np.zeros((2, 3, 4, 4)), kiln.float32))
