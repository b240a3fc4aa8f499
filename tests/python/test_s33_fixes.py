"""Session 33's Python fixes: InstanceNorm through F.instance_norm, take's and index_copy's
errors (PyTorch's index rules for index_copy), the one-dtype check shared by heaviside, isclose
and the products, DataParallel's refusal of lazy placeholders, Cell.to keeping Parameter
subclasses, and the location-scale base of Normal and Laplace."""

import numpy as np
import pytest

import kiln
from conftest import check_cell_against_torch, check_torch, close, raises, t
from kiln import mint, nn
from kiln import distributions as D
from kiln.mint import _indexing_ops, _math_extra, _shape_extra
from kiln.nn import extra_layers as X
from kiln.nn import lazy


# ------------------------------------------------------------------------------------------------
# InstanceNorm: F.instance_norm's computation, PyTorch's values, gradients and running statistics


@pytest.mark.parametrize("kind, shape", [("InstanceNorm1d", (3, 4, 7)),
                                         ("InstanceNorm2d", (2, 4, 3, 5)),
                                         ("InstanceNorm3d", (2, 4, 2, 3, 3))])
@pytest.mark.parametrize("momentum", [0.3, None])
def test_instance_norm_matches_torch_through_training_and_eval(torch, kind, shape, momentum, rng):
    ours = getattr(X, kind)(4, momentum=momentum, affine=True, track_running_stats=True,
                            dtype=kiln.float64)
    theirs = getattr(torch.nn, kind)(4, momentum=momentum, affine=True,
                                     track_running_stats=True, dtype=torch.float64)
    weight, bias = rng.uniform(0.5, 2, 4), rng.standard_normal(4)
    for cell, make in ((ours, t), (theirs, torch.tensor)):
        cell.load_state_dict({"weight": make(weight), "bias": make(bias),
                              "running_mean": make(np.zeros(4)), "running_var": make(np.ones(4)),
                              "num_batches_tracked": make(np.array(0))})
    for step in range(2):  # the running statistics move as PyTorch's do
        check_cell_against_torch(torch, ours, theirs, rng.standard_normal(shape) * 2 + step, rng)
        check_torch(ours.running_mean, theirs.running_mean, kiln.float64, "running_mean")
        check_torch(ours.running_var, theirs.running_var, kiln.float64, "running_var")
    ours.eval()
    theirs.eval()
    check_cell_against_torch(torch, ours, theirs, rng.standard_normal(shape), rng)
    # One sample without its batch dimension.
    check_cell_against_torch(torch, ours, theirs, rng.standard_normal(shape[1:]), rng)


def test_instance_norm_without_running_statistics_matches_numpy(rng):
    v = rng.standard_normal((2, 3, 4, 5)) * 3 + 1
    out = X.InstanceNorm2d(3, dtype=kiln.float64)(t(v))
    mean, var = v.mean((2, 3), keepdims=True), v.var((2, 3), keepdims=True)
    close(out, (v - mean) / np.sqrt(var + 1e-5), rtol=1e-10, atol=1e-10)


# ------------------------------------------------------------------------------------------------
# take and index_copy


def test_index_copy_refuses_what_pytorchs_refuses(torch):
    x, source = np.zeros((3, 4)), np.ones((3, 1))
    cases = [(np.array([0], np.int32), kiln.DTypeError, "expected an int64 index"),
             (np.array([-1]), kiln.KilnIndexError, "index -1 is out of bounds for dimension 1"),
             (np.array([4]), kiln.KilnIndexError, "index 4 is out of bounds for dimension 1")]
    for index, error, match in cases:
        with pytest.raises((RuntimeError, IndexError)):
            torch.tensor(x).index_copy(1, torch.tensor(index), torch.tensor(source))
        with raises(error, match=f"index_copy: {match}"):
            _shape_extra.index_copy(t(x), 1, t(index), t(source))
        with raises(error, match=f"index_copy: {match}"):
            t(x).index_copy_(1, t(index), t(source))
    # What both take: the last position, as a 1-d or a 0-d index.
    for index in (np.array([3]), np.array(3)):
        want = torch.tensor(x).index_copy(1, torch.tensor(index), torch.tensor(source))
        got = _shape_extra.index_copy(t(x), 1, t(index), t(source))
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_index_copy_refuses_a_negative_index_inside_jit_too():
    step = kiln.jit(lambda x, i, s: _shape_extra.index_copy(x, 0, i, s))
    x, source = mint.zeros((3, 2)), mint.ones((1, 2))
    np.testing.assert_array_equal(step(x, t([2]), source).numpy(), [[0, 0], [0, 0], [1, 1]])
    # The values are not known at the trace: the graph's Scatter refuses the index when it runs.
    with raises(kiln.KilnIndexError, match="out of"):
        step(x, t([-1]), source).numpy()


def test_take_checks_indices_eagerly_and_in_the_graph():
    x = t(np.arange(6.0).reshape(2, 3))
    with raises(kiln.KilnIndexError, match=r"take: index -7 is out of bounds for an input of 6 "
                                           r"elements: expected indices in \[-6, 5\]"):
        _shape_extra.take(x, t([0, -7, 2]))
    step = kiln.jit(lambda v, i: _shape_extra.take(v, i))
    np.testing.assert_array_equal(step(x, t([5, -6])).numpy(), [5.0, 0.0])
    with raises(kiln.KilnIndexError):
        step(x, t([6, 0])).numpy()


# ------------------------------------------------------------------------------------------------
# The one-dtype check


@pytest.mark.parametrize("call, owner, first, second", [
    pytest.param(_math_extra.heaviside, "heaviside", "input", "values", id="heaviside"),
    pytest.param(_indexing_ops.isclose, "isclose", "input", "other", id="isclose"),
    pytest.param(lambda a, b: _math_extra.tensordot(a, b, 1), "tensordot", "a", "b",
                 id="tensordot"),
    pytest.param(_math_extra.inner, "inner", "input", "other", id="inner"),
    pytest.param(_math_extra.vdot, "vdot", "input", "other", id="vdot"),
])
def test_operands_of_two_dtypes_are_one_dtype_error(call, owner, first, second):
    with raises(kiln.DTypeError, match=f"{owner}: expected {first} and {second} of one dtype, "
                                       f"got float32 and float64"):
        call(mint.ones(3), mint.ones(3, dtype=kiln.float64))
    assert isinstance(call(mint.ones(3), mint.ones(3)), kiln.Tensor)  # one dtype: computed


# ------------------------------------------------------------------------------------------------
# DataParallel and lazy placeholders; Cell.to and Parameter subclasses


def test_data_parallel_refuses_a_model_with_lazy_placeholders():
    net = nn.Sequential(lazy.LazyLinear(4), nn.ReLU(), lazy.LazyBatchNorm1d(affine=False))
    with raises(kiln.KilnValueError, match=r"DataParallel: the model has uninitialized lazy "
                                           r"parameters or buffers \['0.weight', '0.bias', "
                                           r"'2.running_mean', '2.running_var'\].*run one "
                                           r"forward call"):
        nn.DataParallel(net)
    net(mint.randn([3, 5]))
    # Initialized: the next requirement is the process group's.
    with raises(kiln.DistributedError, match="init_process_group"):
        nn.DataParallel(net)


class TaggedParameter(nn.Parameter):
    """A user's Parameter subclass with an attribute of its own."""

    def __init__(self, data, requires_grad=True):
        super().__init__(data, requires_grad)
        self.tag = "tagged"


def test_cell_to_keeps_parameter_subclasses_and_placeholders(rng):
    cell = nn.Linear(3, 2)
    cell.weight = TaggedParameter(t(rng.standard_normal((2, 3)), kiln.float32))
    cell.bias = TaggedParameter(mint.zeros(2), requires_grad=False)
    cell.weight.grad = mint.ones((2, 3))
    before = cell.weight.numpy()
    cell.double()
    assert type(cell.weight) is TaggedParameter and type(cell.bias) is TaggedParameter
    assert cell.weight.dtype == kiln.float64 and cell.weight.tag == "tagged"
    assert cell.weight.requires_grad and not cell.bias.requires_grad
    assert cell.weight.grad.dtype == kiln.float64
    np.testing.assert_array_equal(cell.weight.numpy(), before.astype(np.float64))
    # A lazy cell's placeholder stays one, of the new dtype, and is what state_dict holds.
    fc = lazy.LazyLinear(3).to(kiln.float64)
    assert type(fc.weight) is lazy.UninitializedParameter and fc.weight.dtype == kiln.float64
    assert fc.state_dict()["weight"] is fc.weight and fc.has_uninitialized_params()
    fc(mint.randn([2, 4], dtype=kiln.float64))
    assert type(fc.weight) is nn.Parameter and fc.weight.dtype == kiln.float64


# ------------------------------------------------------------------------------------------------
# Normal and Laplace share their location-scale base


@pytest.mark.parametrize("family", [D.Normal, D.Laplace])
def test_location_scale_families_keep_their_behaviour(torch, family, rng):
    loc, scale = rng.standard_normal((2, 1)), rng.uniform(0.5, 2, 3)
    ours = family(t(loc), t(scale))
    theirs = getattr(torch.distributions, family.__name__)(torch.tensor(loc), torch.tensor(scale))
    assert ours.batch_shape == tuple(theirs.batch_shape) == (2, 3)
    assert ours.has_rsample and list(ours.arg_constraints) == ["loc", "scale"]
    for what in ("mean", "mode", "stddev", "variance"):
        check_torch(getattr(ours, what), getattr(theirs, what), kiln.float64, what)
    value = rng.standard_normal((2, 3))
    check_torch(ours.log_prob(t(value)), theirs.log_prob(torch.tensor(value)), kiln.float64,
                "log_prob")
    assert ours.expand((4, 2, 3)).mean.shape == (4, 2, 3)
    assert repr(family(0.0, 1.0)) == f"{family.__name__}(loc: 0.0, scale: 1.0)"
    with raises(kiln.KilnValueError, match="scale"):
        family(0.0, -1.0)
