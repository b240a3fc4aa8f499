"""kiln.nn.BatchNorm1d and BatchNorm2d against PyTorch's: forward values, gradients (input,
weight, bias) and running statistics over several training steps, eagerly and with the whole
step under kiln.jit, eval mode, state dicts in both directions, copies, and argument errors."""

import copy
import pickle

import numpy as np
import pytest

import kiln
from conftest import raises
from kiln.nn.normalization import BatchNorm1d, BatchNorm2d

mint = kiln.mint

BUFFERS = ["running_mean", "running_var", "num_batches_tracked"]
STATE_KEYS = ["weight", "bias"] + BUFFERS

# (kiln class, torch class name, input shape)
SHAPES = {
    "1d-NC": (BatchNorm1d, "BatchNorm1d", (8, 3)),
    "1d-NCL": (BatchNorm1d, "BatchNorm1d", (4, 3, 5)),
    "2d-NCHW": (BatchNorm2d, "BatchNorm2d", (2, 3, 4, 5)),
}

# (rtol, atol) per dtype: float32 sums over up to 40 values per channel in another order than
# PyTorch's kernels.
TOLERANCE = {kiln.float32: (2e-5, 2e-5), kiln.float64: (1e-11, 1e-11)}



def t(array, dtype=None):
    return kiln.tensor(np.asarray(array), dtype=dtype)


def check(actual, expected, dtype, what):
    rtol, atol = TOLERANCE[dtype]
    expected = expected.detach().numpy() if hasattr(expected, "detach") else expected
    np.testing.assert_allclose(np.asarray(actual.numpy(), np.float64),
                               np.asarray(expected, np.float64), rtol=rtol, atol=atol,
                               err_msg=what)


def twins(torch, case, dtype, rng, **kwargs):
    """A kiln BatchNorm and a torch one with the same settings and the same random affine
    parameters (nonzero bias, weight away from one, so every gradient term counts)."""
    cls, torch_name, shape = SHAPES[case]
    ours = cls(3, dtype=dtype, **kwargs)
    theirs = getattr(torch.nn, torch_name)(3, dtype=getattr(torch, dtype.name), **kwargs)
    if ours.weight is not None:
        state = {"weight": rng.uniform(0.5, 1.5, 3), "bias": rng.uniform(-1, 1, 3)}
        ours.load_state_dict(state, strict=False)
        theirs.load_state_dict({k: torch.tensor(v) for k, v in state.items()}, strict=False)
    return ours, theirs, shape


def check_state(ours, theirs, dtype, when):
    for name, value in theirs.state_dict().items():
        check(getattr(ours, name), value, dtype, f"{name} {when}")
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]


# ---------------------------------------------------------------------------------------------
# Training steps against PyTorch


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("momentum", [0.1, None], ids=["momentum", "cumulative"])
@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("case", list(SHAPES))
def test_training_steps_match_torch(torch, rng, case, dtype, momentum, jit):
    ours, theirs, shape = twins(torch, case, dtype, rng, momentum=momentum)
    opt = kiln.optim.SGD([ours.weight, ours.bias], lr=0.1)
    torch_opt = torch.optim.SGD(theirs.parameters(), lr=0.1)
    grad_fn = kiln.value_and_grad(lambda x, cot: (ours(x) * cot).sum(), 0, opt.parameters)

    def step(x, cot):
        loss, (x_grad, grads) = grad_fn(x, cot)
        opt(grads)  # in place, as the running statistics: both happen at every jitted call
        return loss, x_grad, grads

    run = kiln.jit(step) if jit else step
    for i in range(4):
        x = (rng.standard_normal(shape) * 2 + 1).astype(dtype.name)
        cot = rng.standard_normal(shape).astype(dtype.name)
        loss, x_grad, (w_grad, b_grad) = run(t(x), t(cot))
        tx = torch.tensor(x, requires_grad=True)
        torch_loss = (theirs(tx) * torch.tensor(cot)).sum()
        torch_loss.backward()
        check(loss, torch_loss, dtype, f"loss at step {i}")
        check(x_grad, tx.grad, dtype, f"input gradient at step {i}")
        check(w_grad, theirs.weight.grad, dtype, f"weight gradient at step {i}")
        check(b_grad, theirs.bias.grad, dtype, f"bias gradient at step {i}")
        torch_opt.step()
        torch_opt.zero_grad()
        check_state(ours, theirs, dtype, f"after step {i}")
    assert ours.num_batches_tracked.item() == 4
    if jit:
        assert run.cache_info().misses == 1  # one graph, run four times

    ours.eval()
    theirs.eval()
    forward = kiln.jit(lambda x: ours(x)) if jit else ours
    x = (rng.standard_normal(shape) * 2 + 1).astype(dtype.name)
    check(forward(t(x)), theirs(torch.tensor(x)), dtype, "eval output")
    check_state(ours, theirs, dtype, "after eval")  # eval updates nothing


@pytest.mark.parametrize("case", list(SHAPES))
def test_eval_normalizes_with_the_running_statistics(rng, case):
    cls, _, shape = SHAPES[case]
    bn = cls(3, dtype=kiln.float64, eps=1e-3)
    state = {"weight": rng.uniform(0.5, 1.5, 3), "bias": rng.uniform(-1, 1, 3),
             "running_mean": rng.standard_normal(3), "running_var": rng.uniform(0.5, 2, 3),
             "num_batches_tracked": 7}
    bn.load_state_dict(state)
    x = rng.standard_normal(shape)
    view = [1, 3] + [1] * (len(shape) - 2)

    def per_channel(name):
        return state[name].reshape(view)

    expected = ((x - per_channel("running_mean")) / np.sqrt(per_channel("running_var") + 1e-3)
                * per_channel("weight") + per_channel("bias"))
    assert bn.eval() is bn
    check(bn(t(x)), expected, kiln.float64, "eval output")
    for name in BUFFERS:  # unchanged
        np.testing.assert_array_equal(getattr(bn, name).numpy(), state[name])
    # a single value per channel is fine in eval mode: no batch statistics are needed
    single = (slice(0, 1), slice(None)) + (slice(0, 1),) * (len(shape) - 2)
    check(bn(t(x[single])), expected[single], kiln.float64, "one value per channel")


@pytest.mark.parametrize("case", list(SHAPES))
def test_without_running_statistics_batch_statistics_are_used_in_eval_mode_too(torch, rng,
                                                                               case):
    ours, theirs, shape = twins(torch, case, kiln.float64, rng, track_running_stats=False)
    assert ours.running_mean is None and ours.num_batches_tracked is None
    assert list(ours.named_buffers()) == [] and list(ours.state_dict()) == ["weight", "bias"]
    x = rng.standard_normal(shape)
    for mode in (True, False):
        ours.train(mode)
        theirs.train(mode)
        check(ours(t(x)), theirs(torch.tensor(x)), kiln.float64, f"training={mode}")


@pytest.mark.parametrize("case", list(SHAPES))
def test_without_affine_parameters(torch, rng, case):
    ours, theirs, shape = twins(torch, case, kiln.float64, rng, affine=False)
    assert ours.weight is None and ours.bias is None and list(ours.parameters()) == []
    assert list(ours.state_dict()) == BUFFERS
    x = rng.standard_normal(shape)
    cot = rng.standard_normal(shape)
    x_grad = kiln.grad(lambda x: (ours(x) * t(cot)).sum())(t(x))
    tx = torch.tensor(x, requires_grad=True)
    (theirs(tx) * torch.tensor(cot)).sum().backward()
    check(x_grad, tx.grad, kiln.float64, "input gradient")
    check_state(ours, theirs, kiln.float64, "after one step")


def test_a_model_with_batchnorm_trains_the_same_jitted_and_eagerly(rng):
    # BatchNorm between layers, the whole step (forward, backward, Adam) as one graph.
    def make():
        kiln.manual_seed(3)
        return kiln.nn.Sequential(kiln.nn.Linear(4, 6), BatchNorm1d(6), kiln.nn.ReLU(),
                                  kiln.nn.Linear(6, 1))

    def trainer(net):
        opt = kiln.optim.Adam(net.trainable_params(), lr=0.01)
        grad_fn = kiln.value_and_grad(lambda x, y: mint.mse_loss(net(x), y), None,
                                      opt.parameters)

        def step(x, y):
            loss, grads = grad_fn(x, y)
            opt(grads)
            return loss

        return step

    eager_net, jit_net = make(), make()
    eager_step, jit_step = trainer(eager_net), kiln.jit(trainer(jit_net))
    for _ in range(5):
        x = t(rng.standard_normal((16, 4)), kiln.float32)
        y = t(rng.standard_normal((16, 1)), kiln.float32)
        np.testing.assert_allclose(jit_step(x, y).numpy(), eager_step(x, y).numpy(), rtol=1e-5)
    for (name, a), (_, b) in zip(eager_net.state_dict().items(), jit_net.state_dict().items()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    assert jit_net[1].num_batches_tracked.item() == 5


@pytest.mark.parametrize("momentum", [0.1, None], ids=["momentum", "cumulative"])
@pytest.mark.parametrize("case", list(SHAPES))
def test_a_dynamic_training_step_follows_every_batch_size(rng, case, momentum):
    # The running variance's factor n / (n - 1) was a Python number computed from the batch
    # size, a constant of the graph: kiln.jit(dynamic=True) refused the second batch size.
    cls, _, shape = SHAPES[case]
    affine = {"weight": rng.uniform(0.5, 1.5, 3), "bias": rng.uniform(-1, 1, 3)}
    eager, ours = cls(3, momentum=momentum), cls(3, momentum=momentum)
    for bn in (eager, ours):
        bn.load_state_dict(affine, strict=False)

    def step_of(bn):
        return kiln.value_and_grad(lambda x, cot: (bn(x) * cot).sum(), 0, [bn.weight, bn.bias])

    eager_step, our_step, traced = step_of(eager), step_of(ours), []

    @kiln.jit(dynamic=True)
    def jit_step(x, cot):
        traced.append(x.shape[0])
        return our_step(x, cot)

    for batch in (2, 3, 5, 8):
        x = t((rng.standard_normal((batch,) + shape[1:]) * 2 + 1).astype(np.float32))
        cot = t(rng.standard_normal((batch,) + shape[1:]).astype(np.float32))
        loss, (x_grad, grads) = jit_step(x, cot)
        want, (want_x_grad, want_grads) = eager_step(x, cot)
        check(loss, want.numpy(), kiln.float32, f"loss at batch size {batch}")
        check(x_grad, want_x_grad.numpy(), kiln.float32, f"input gradient at {batch}")
        for name, grad, wanted in zip(("weight", "bias"), grads, want_grads):
            check(grad, wanted.numpy(), kiln.float32, f"{name} gradient at {batch}")
        for name in BUFFERS:
            check(getattr(ours, name), getattr(eager, name).numpy(), kiln.float32,
                  f"{name} at batch size {batch}")
    assert traced == [2, 3, 5]  # 8 made from the traces
    assert ours.num_batches_tracked.item() == 4
    assert jit_step.cache_info().misses == 4


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16],
                         ids=lambda d: d.name)
def test_the_running_variance_is_the_biased_one_times_the_number_n_over_n_minus_1(rng, dtype):
    # The factor is computed in the graph (for dynamic=True) but rounded and applied as the
    # Python number was, so eager results stay bit for bit; in 16 bits that is in float32.
    bn = BatchNorm1d(64, momentum=1.0, dtype=dtype)  # channels enough to tell the roundings
    x = t(rng.standard_normal((7, 64, 5)), kiln.float32).to(dtype)
    bn(x)
    want = mint.var(x, [0, 2], correction=0) * (35 / 34)
    np.testing.assert_array_equal(bn.running_var.to(kiln.float64).numpy(),
                                  want.to(kiln.float64).numpy())


# ---------------------------------------------------------------------------------------------
# State dicts, resets and copies


@pytest.mark.parametrize("case", list(SHAPES))
def test_state_dicts_load_both_ways(torch, rng, case):
    ours, theirs, shape = twins(torch, case, kiln.float32, rng)
    for _ in range(3):  # running statistics and a count away from their initial values
        theirs(torch.tensor(rng.standard_normal(shape).astype(np.float32) * 3 + 2))
    state = theirs.state_dict()
    assert list(ours.state_dict()) == list(state) == STATE_KEYS
    assert ours.load_state_dict(state) == kiln.nn.LoadResult([], [])
    assert ours.num_batches_tracked.dtype == kiln.int64 and ours.num_batches_tracked.item() == 3
    check_state(ours, theirs, kiln.float32, "loaded")
    ours.eval()
    theirs.eval()
    x = rng.standard_normal(shape).astype(np.float32)
    check(ours(t(x)), theirs(torch.tensor(x)), kiln.float32, "eval output after loading")
    # and back: Kiln's state dict (through NumPy) into a fresh torch layer
    fresh = type(theirs)(3)
    fresh.load_state_dict({k: torch.from_numpy(v.numpy().copy())
                           for k, v in ours.state_dict().items()})
    assert fresh.num_batches_tracked.item() == 3
    fresh.eval()
    check(ours(t(x)), fresh(torch.tensor(x)), kiln.float32, "torch after loading Kiln's")


def test_a_state_dict_without_the_count_misses_it(rng):
    bn = BatchNorm2d(3)
    state = {k: v.numpy() for k, v in bn.state_dict().items() if k != "num_batches_tracked"}
    with raises(kiln.KilnValueError, match=r"missing keys \['num_batches_tracked'\]"):
        bn.load_state_dict(state)
    assert bn.load_state_dict(state, strict=False) == kiln.nn.LoadResult(
        ["num_batches_tracked"], [])


def test_loading_and_resetting_reach_a_jitted_function(rng):
    bn = BatchNorm1d(3, dtype=kiln.float64).eval()
    forward = kiln.jit(lambda x: bn(x))
    x = rng.standard_normal((4, 3))
    np.testing.assert_allclose(forward(t(x)).numpy(), x / np.sqrt(1 + 1e-5), rtol=1e-12)
    bn.load_state_dict({"running_mean": np.ones(3), "running_var": np.full(3, 4.0)},
                       strict=False)
    np.testing.assert_allclose(forward(t(x)).numpy(), (x - 1) / np.sqrt(4 + 1e-5), rtol=1e-12)
    bn.train()
    bn(t(x))
    bn.reset_running_stats()
    assert bn.running_mean.tolist() == [0, 0, 0] and bn.running_var.tolist() == [1, 1, 1]
    assert bn.num_batches_tracked.item() == 0
    bn.eval()
    np.testing.assert_allclose(forward(t(x)).numpy(), x / np.sqrt(1 + 1e-5), rtol=1e-12)
    assert forward.cache_info().misses == 1


def test_reset_parameters_restores_ones_zeros_and_the_statistics(rng):
    bn = BatchNorm2d(2)
    bn.load_state_dict({"weight": [2.0, 3.0], "bias": [1.0, 1.0], "running_mean": [1.0, 2.0],
                        "running_var": [3.0, 4.0], "num_batches_tracked": 5})
    bn.reset_parameters()
    assert bn.weight.tolist() == [1, 1] and bn.bias.tolist() == [0, 0]
    assert bn.running_mean.tolist() == [0, 0] and bn.running_var.tolist() == [1, 1]
    assert bn.num_batches_tracked.item() == 0


@pytest.mark.parametrize("how", [copy.deepcopy, lambda bn: pickle.loads(pickle.dumps(bn))],
                         ids=["deepcopy", "pickle"])
def test_a_copy_has_its_own_running_statistics(rng, how):
    bn = BatchNorm1d(3)
    bn(t(rng.standard_normal((8, 3)), kiln.float32))
    twin = how(bn)
    for name in BUFFERS:
        np.testing.assert_array_equal(getattr(twin, name).numpy(), getattr(bn, name).numpy())
        assert not getattr(twin, name).shares_storage_with(getattr(bn, name))
    twin(t(rng.standard_normal((8, 3)), kiln.float32))
    assert twin.num_batches_tracked.item() == 2 and bn.num_batches_tracked.item() == 1


def test_parameters_and_buffers_and_repr():
    bn = BatchNorm2d(4, eps=1e-3, momentum=None, dtype=kiln.float64)
    assert [n for n, _ in bn.named_parameters()] == ["weight", "bias"]
    assert [n for n, _ in bn.named_buffers()] == BUFFERS
    assert all(p.dtype == kiln.float64 for p in bn.parameters())
    assert bn.running_mean.dtype == bn.running_var.dtype == kiln.float64
    assert not any(b.requires_grad for b in bn.buffers())
    assert repr(bn) == ("BatchNorm2d(4, eps=0.001, momentum=None, affine=True, "
                        "track_running_stats=True)")
    assert repr(BatchNorm1d(2)) == ("BatchNorm1d(2, eps=1e-05, momentum=0.1, affine=True, "
                                    "track_running_stats=True)")


# ---------------------------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(num_features=0), kiln.KilnValueError, r"BatchNorm2d: num_features must be at least 1, "
                                                r"got 0"),
    (dict(num_features=2.0), kiln.KilnTypeError, r"num_features must be an int, got float 2.0"),
    (dict(num_features=2, eps=-1e-5), kiln.KilnValueError, r"eps must be at least 0.0, got "
                                                           r"-1e-05"),
    (dict(num_features=2, eps="1e-5"), kiln.KilnTypeError, r"eps must be a number, got str"),
    (dict(num_features=2, momentum=1.5), kiln.KilnValueError, r"momentum must be in \[0.0, "
                                                              r"1.0\], got 1.5"),
    (dict(num_features=2, momentum=float("nan")), kiln.KilnValueError, r"momentum must be in"),
    (dict(num_features=2, affine=1), kiln.KilnTypeError, r"affine must be a bool, got int 1"),
    (dict(num_features=2, track_running_stats=None), kiln.KilnTypeError,
     r"track_running_stats must be a bool, got NoneType"),
], ids=["zero features", "float features", "negative eps", "str eps", "momentum > 1",
        "nan momentum", "int affine", "None tracking"])
def test_constructor_arguments(kwargs, error, message):
    with raises(error, match=message):
        BatchNorm2d(**kwargs)


@pytest.mark.parametrize("make, x, error, message", [
    (lambda: BatchNorm1d(3), lambda: mint.ones((2, 3, 4, 5)), kiln.ShapeError,
     r"BatchNorm1d: expected a 2-D \[N, C\] or 3-D \[N, C, L\] input, got shape \[2, 3, 4, 5\] "
     r"\(4-D\)"),
    (lambda: BatchNorm2d(3), lambda: mint.ones((2, 3, 4)), kiln.ShapeError,
     r"BatchNorm2d: expected a 4-D \[N, C, H, W\] input, got shape \[2, 3, 4\] \(3-D\)"),
    (lambda: BatchNorm2d(3), lambda: mint.ones((2, 4, 5, 5)), kiln.ShapeError,
     r"BatchNorm2d: expected an input with 3 channels in dim 1, got shape \[2, 4, 5, 5\]"),
    (lambda: BatchNorm1d(3), lambda: mint.ones((2, 3), dtype=kiln.float64), kiln.DTypeError,
     r"BatchNorm1d: expected an input of dtype float32 \(the dtype of its parameters and "
     r"running statistics\), got float64"),
    (lambda: BatchNorm1d(3, affine=False, track_running_stats=False),
     lambda: mint.ones((2, 3), dtype=kiln.int64), kiln.DTypeError,
     r"BatchNorm1d: expected a floating-point input, got int64"),
    (lambda: BatchNorm1d(3), lambda: np.ones((2, 3), np.float32), kiln.KilnTypeError,
     r"BatchNorm1d: expected a kiln.Tensor input, got ndarray"),
    (lambda: BatchNorm1d(3), lambda: mint.ones((1, 3)), kiln.KilnValueError,
     r"BatchNorm1d: expected more than 1 value per channel when using batch statistics "
     r"\(training\), got input shape \[1, 3\]"),
    (lambda: BatchNorm2d(3), lambda: mint.ones((1, 3, 1, 1)), kiln.KilnValueError,
     r"more than 1 value per channel"),
], ids=["1d rank", "2d rank", "channels", "dtype", "integer input", "not a tensor",
        "one value 1d", "one value 2d"])
def test_input_errors_change_nothing(make, x, error, message):
    bn = make()
    with raises(error, match=message):
        bn(x())
    if bn.num_batches_tracked is not None:
        assert bn.num_batches_tracked.item() == 0


def test_an_empty_training_batch_leaves_the_running_statistics_alone(torch):
    # Its mean and variance are NaN: they filled the running statistics, and every later eval
    # output was NaN. PyTorch counts the batch and keeps the statistics.
    ours, theirs = BatchNorm1d(3), torch.nn.BatchNorm1d(3)
    ours(kiln.mint.zeros((0, 3)))
    theirs(torch.zeros((0, 3)))
    assert ours.running_mean.tolist() == theirs.running_mean.tolist() == [0.0] * 3
    assert ours.running_var.tolist() == theirs.running_var.tolist() == [1.0] * 3
    assert ours.num_batches_tracked.item() == theirs.num_batches_tracked.item() == 1
