"""kiln.Generator and generator= on the random ops, the default generator's functions, randint's
two forms, bernoulli, rand_like / randn_like / randint_like, normal, broadcast_shapes and the
in-place samplers (uniform_, normal_, exponential_, bernoulli_): values against NumPy's
moments and closed forms, reproducibility, and every error path."""

import numpy as np
import pytest

import kiln
from conftest import raises

mint = kiln.mint
PYTORCH_DEFAULT_SEED = 67280421310721


def draws(generator=None):
    """One call of each random op, as NumPy arrays."""
    probs = kiln.tensor([[0.2, 0.3, 0.5, 0.0], [1.0, 1.0, 1.0, 1.0]])
    return [mint.rand(5, generator=generator).numpy(),
            mint.randn(2, 3, generator=generator, dtype=kiln.float64).numpy(),
            mint.randint(0, 100, (6,), generator=generator).numpy(),
            mint.randperm(9, generator=generator).numpy(),
            mint.multinomial(probs, 2, generator=generator).numpy(),
            probs.multinomial(3, True, generator=generator).numpy(),
            mint.bernoulli(mint.full((7,), 0.5), generator=generator).numpy(),
            mint.full((7,), 0.5).bernoulli(generator=generator).numpy()]


def test_a_generator_draws_the_default_stream_of_its_seed_and_leaves_the_default_alone():
    kiln.manual_seed(17)
    expected = draws()
    kiln.manual_seed(5)
    state = kiln.get_rng_state().numpy()
    g = kiln.Generator().manual_seed(17)
    for got, want in zip(draws(g), expected):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(kiln.get_rng_state().numpy(), state)
    # The same generator goes on where it stopped; a second one of the same seed repeats.
    again = draws(g)
    assert not np.array_equal(again[0], expected[0])
    for got, want in zip(draws(kiln.Generator().manual_seed(17)), expected):
        np.testing.assert_array_equal(got, want)


def test_generator_state_seed_and_device():
    g = kiln.Generator()
    assert g.initial_seed() == PYTORCH_DEFAULT_SEED
    assert g.device == "cpu" and g.device.type == "cpu"
    assert kiln.Generator(device="cpu").initial_seed() == PYTORCH_DEFAULT_SEED
    assert g.manual_seed(3) is g and g.initial_seed() == 3
    g.manual_seed(-1)  # negative seeds wrap, as in PyTorch
    assert g.initial_seed() == 2**64 - 1
    mint.rand(10, generator=g)
    state = g.get_state()
    assert state.dtype == kiln.int64 and state.shape == (2,)
    first = mint.rand(6, generator=g).numpy()
    assert g.set_state(state) is g
    np.testing.assert_array_equal(mint.rand(6, generator=g).numpy(), first)
    seed = g.seed()
    assert isinstance(seed, int) and g.initial_seed() == seed
    assert g.get_state().numpy()[1] == 0


def test_default_generator_and_the_process_wide_functions():
    assert kiln.manual_seed(4) is kiln.default_generator
    assert kiln.initial_seed() == 4 == kiln.default_generator.initial_seed()
    a = mint.rand(5).numpy()
    kiln.default_generator.manual_seed(4)
    np.testing.assert_array_equal(mint.rand(5).numpy(), a)
    kiln.manual_seed(4)
    np.testing.assert_array_equal(mint.rand(5, generator=kiln.default_generator).numpy(), a)
    np.testing.assert_array_equal(kiln.get_rng_state().numpy(),
                                  kiln.default_generator.get_state().numpy())
    seed = kiln.seed()
    assert isinstance(seed, int) and kiln.initial_seed() == seed


@pytest.mark.parametrize("call", [
    lambda g: kiln.Generator().manual_seed(1.5),
    lambda g: kiln.Generator().manual_seed(True),
])
def test_generator_seed_errors(call):
    with raises(kiln.KilnTypeError, match="Generator.manual_seed: expected an int"):
        call(None)


def test_generator_errors():
    g = kiln.Generator()
    with raises(kiln.KilnValueError, match=r"Generator.manual_seed: expected a seed in"):
        g.manual_seed(2**64)
    with raises(kiln.KilnValueError, match="Generator.set_state: expected the int64 tensor of 2"):
        g.set_state(mint.zeros(2))
    with raises(kiln.KilnValueError, match="unknown device|expected device"):
        kiln.Generator(device="tpu")
    assert g.initial_seed() == PYTORCH_DEFAULT_SEED  # untouched by the refused calls
    for call in (lambda: mint.rand(3, generator=5), lambda: mint.randn(3, generator="g"),
                 lambda: mint.randint(3, (2,), generator=1),
                 lambda: mint.randperm(3, generator=object()),
                 lambda: mint.multinomial(mint.ones(3), 1, generator=2),
                 lambda: mint.bernoulli(mint.ones(3), generator=2)):
        with raises(kiln.KilnTypeError, match="expected generator to be a kiln.Generator or None"):
            call()


def test_a_traced_draw_from_an_own_generator_is_refused():
    g = kiln.Generator().manual_seed(1)

    @kiln.jit
    def own(x):
        return x + mint.rand(3, generator=g)

    @kiln.jit
    def default(x):
        return x + mint.rand(3, generator=kiln.default_generator)

    with raises(kiln.KilnNotImplementedError,
                match="RandUniform: a random op with a generator of its own cannot be traced"):
        own(mint.zeros(3))
    assert g.get_state().numpy()[1] == 0
    kiln.manual_seed(2)
    first = default(mint.zeros(3)).numpy()
    kiln.manual_seed(2)
    np.testing.assert_array_equal(default(mint.zeros(3)).numpy(), first)


@pytest.mark.parametrize("call, low, high, shape", [
    (lambda: mint.randint(10, (3,)), 0, 10, (3,)),
    (lambda: mint.randint(10, size=(2, 2)), 0, 10, (2, 2)),
    (lambda: mint.randint(5, 9, (4,)), 5, 9, (4,)),
    (lambda: mint.randint(5, 9, size=[4]), 5, 9, (4,)),
    (lambda: mint.randint(low=-3, high=2, size=(50,)), -3, 2, (50,)),
    (lambda: mint.randint(high=4, size=5), 0, 4, (5,)),
    (lambda: mint.randint(np.int64(3), (6,), dtype=kiln.int8), 0, 3, (6,)),
])
def test_randint_takes_both_of_pytorchs_forms(call, low, high, shape):
    x = call().numpy()
    assert x.shape == shape
    assert x.min() >= low and x.max() < high


@pytest.mark.parametrize("call, error, match", [
    (lambda: mint.randint(10), kiln.KilnTypeError,
     r"randint: expected \(high, size\) or \(low, high, size\), got 1 argument\n"),
    (lambda: mint.randint(1, 2, (3,), kiln.int32), kiln.KilnTypeError, "got 4 arguments"),
    (lambda: mint.randint(1, (3,), low=0), kiln.KilnTypeError,
     "randint: got low both by position and by keyword"),
    (lambda: mint.randint(low=1, size=(3,)), kiln.KilnTypeError,
     "randint: expected high and size besides low"),
    (lambda: mint.randint(1, 5, high=3), kiln.KilnTypeError,
     "randint: got high both by position and by keyword"),
    (lambda: mint.randint(3, high=5), kiln.KilnTypeError, "randint: missing size"),
    (lambda: mint.randint(0, 2**64, (3,)), kiln.KilnValueError,
     "randint: expected high within int64, got 18446744073709551616"),
    (lambda: mint.randint(2.5, (3,)), kiln.KilnTypeError,
     "randint: expected high to be an int, got 2.5"),
    (lambda: mint.randint(True, 4, (3,)), kiln.KilnTypeError,
     "randint: expected low to be an int, got True"),
    (lambda: mint.randint(3, 3, (2,)), kiln.KilnValueError, "expected high > low"),
    (lambda: mint.randint(0, 2**20, (3,), dtype=kiln.float16), kiln.KilnValueError,
     r"expected \[low, high\) within the integers float16 holds exactly \(magnitude at most "
     r"2\^11\), got \[0, 1048576\)"),
    (lambda: mint.randint(0, 1000, (3,), dtype=kiln.bfloat16), kiln.KilnValueError,
     "within the integers bfloat16 holds exactly"),
])
def test_randint_argument_errors(call, error, match):
    with raises(error, match=match):
        call()


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16, kiln.float32, kiln.float64])
def test_bernoulli_follows_its_probabilities(dtype):
    kiln.manual_seed(6)
    p = np.tile(np.array([0.0, 0.3, 1.0, 0.9]), 50_000)
    out = mint.bernoulli(kiln.tensor(p).to(dtype))
    assert out.dtype == dtype and out.shape == p.shape
    values = out.to(kiln.float64).numpy().reshape(-1, 4)
    assert set(np.unique(values)) <= {0.0, 1.0}
    np.testing.assert_array_equal(values[:, 0], 0.0)
    np.testing.assert_array_equal(values[:, 2], 1.0)
    # 50000 draws each: the means' standard deviations are about 0.002 and 0.0013.
    assert abs(values[:, 1].mean() - 0.3) < 0.012
    assert abs(values[:, 3].mean() - 0.9) < 0.008


def test_bernoulli_is_not_differentiable_and_checks_its_input():
    p = mint.full((4,), 0.5, requires_grad=True)
    assert not mint.bernoulli(p).requires_grad
    with raises(kiln.DTypeError, match="bernoulli: expected floating-point probabilities"):
        mint.bernoulli(kiln.tensor([0, 1]))
    for bad in (-0.1, 1.5, float("nan")):
        with raises(kiln.KilnValueError, match=r"bernoulli: expected probabilities in \[0, 1\]"):
            mint.bernoulli(kiln.tensor([0.5, bad, 0.5]))
    # Read through the reduction's view of the result, the failed draw raises too (in the async
    # modes it read unwritten memory: Note [Failed writes into shared memory]).
    for _ in range(10):
        with raises(kiln.KilnValueError, match="bernoulli: expected probabilities"):
            mint.bernoulli(mint.full((4,), 1.5)).sum().item()


def test_like_factories_take_shape_and_dtype_from_their_input():
    x = mint.zeros(3, 4, dtype=kiln.float64)
    for fn in (mint.rand_like, mint.randn_like):
        y = fn(x)
        assert y.shape == (3, 4) and y.dtype == kiln.float64
        assert fn(x, dtype=kiln.float16).dtype == kiln.float16
        assert fn(x, requires_grad=True).requires_grad
    u = mint.rand_like(mint.zeros(10_000)).numpy()
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.02
    i = mint.randint_like(mint.zeros(1000, dtype=kiln.int32), 7).numpy()
    assert i.dtype == np.int32 and i.min() == 0 and i.max() == 6
    j = mint.randint_like(x, -2, 3).numpy()
    assert j.dtype == np.float64 and set(np.unique(j)) <= {-2.0, -1.0, 0.0, 1.0, 2.0}
    with raises(kiln.DTypeError, match="expected a floating dtype, got int64"):
        mint.rand_like(kiln.tensor([1, 2]))


def test_normal_in_each_of_pytorchs_forms():
    kiln.manual_seed(9)
    a = mint.normal(2.0, 3.0, size=(200_000,)).numpy()
    assert a.dtype == np.float32
    assert abs(a.mean() - 2.0) < 0.03 and abs(a.std() - 3.0) < 0.03
    assert mint.normal(0.0, 1.0, (2, 3), dtype=kiln.float64).dtype == kiln.float64
    mean = kiln.tensor(np.arange(4.0))
    b = mint.normal(mean, 0.0).numpy()
    np.testing.assert_array_equal(b, np.arange(4.0))
    std = kiln.tensor([[0.0], [1.0]])
    c = mint.normal(mean, std).numpy()  # broadcast to [2, 4]
    assert c.shape == (2, 4) and c.dtype == np.float64  # mean's dtype
    np.testing.assert_array_equal(c[0], np.arange(4.0))
    d = mint.normal(1.0, mint.zeros(3)).numpy()
    np.testing.assert_array_equal(d, [1.0, 1.0, 1.0])
    g = kiln.Generator().manual_seed(1)
    first = mint.normal(mean, 1.0, generator=g).numpy()
    g.manual_seed(1)
    np.testing.assert_array_equal(mint.normal(mean, 1.0, generator=g).numpy(), first)


def test_normal_passes_no_gradient_and_takes_the_means_dtype():
    # As PyTorch (whose gradients are zeros): the reparameterised form is mean + std * eps.
    mean = kiln.tensor([1.0, -2.0, 0.5], requires_grad=True)
    std = kiln.tensor([0.5, 2.0, 1.0], requires_grad=True)
    assert not mint.normal(mean, std).requires_grad
    half = mint.normal(mint.zeros(3, dtype=kiln.float16), mint.ones(3))
    assert half.dtype == kiln.float16
    assert mint.normal(0.0, mint.ones(2, dtype=kiln.float64)).dtype == kiln.float64
    assert mint.normal(mint.zeros(2), kiln.tensor(1.0, dtype=kiln.float64)).dtype == kiln.float32
    # NumPy scalars are numbers too.
    assert mint.normal(np.float32(0), np.float32(1), (2,)).shape == (2,)


@pytest.mark.parametrize("call, error, match", [
    (lambda: mint.normal(0.0, -1.0, (2,)), kiln.KilnValueError, "normal: expected std >= 0"),
    (lambda: mint.normal(0.0, float("nan"), (2,)), kiln.KilnValueError, "expected std >= 0"),
    (lambda: mint.normal(0.0, 1.0), kiln.KilnTypeError, "normal: expected size"),
    (lambda: mint.normal(mint.zeros(2), 1.0, (2,)), kiln.KilnTypeError,
     "normal: size is only for a number mean and std"),
    (lambda: mint.normal(mint.zeros(2), 1.0, dtype=kiln.float64), kiln.KilnTypeError,
     "normal: dtype is only for a number mean and std"),
    (lambda: mint.normal(kiln.tensor([1, 2]), 1.0), kiln.DTypeError,
     "normal: expected a floating-point mean and std, got int64"),
    (lambda: mint.rand_like([1.0, 2.0]), kiln.KilnTypeError,
     "rand_like: expected input to be a kiln.Tensor, got list"),
    (lambda: mint.randint_like(mint.zeros(2)), kiln.KilnTypeError, "randint_like: expected high"),
    (lambda: mint.normal("a", 1.0, (2,)), kiln.KilnTypeError,
     "normal: expected mean to be a real number"),
    (lambda: mint.normal(mint.zeros(2), mint.ones(3)), kiln.ShapeError,
     r"shapes \[2\] and \[3\] do not broadcast"),
])
def test_normal_errors(call, error, match):
    with raises(error, match=match):
        call()


def test_broadcast_shapes():
    assert mint.broadcast_shapes((2, 1), (3,)) == (2, 3)
    assert mint.broadcast_shapes((5,), 1, (4, 1, 1)) == (4, 1, 5)
    assert mint.broadcast_shapes() == ()
    with raises(kiln.ShapeError):
        mint.broadcast_shapes((2,), (3,))
    with raises(kiln.KilnTypeError, match="broadcast_shapes"):
        mint.broadcast_shapes("ab")


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16, kiln.float32, kiln.float64])
def test_inplace_samplers_follow_their_distributions(dtype):
    kiln.manual_seed(12)
    x = mint.empty(100_000, dtype=dtype)
    assert x.uniform_(-2.0, 4.0) is x
    u = x.to(kiln.float64).numpy()
    assert u.min() >= -2.0 and u.max() < 4.0
    assert abs(u.mean() - 1.0) < 0.04 and abs(u.var() - 3.0) < 0.06
    # [from, to) stays below `to` in every dtype (float32 samples rounded to 16 bits reached it).
    for low, high in ((0.0, 1.0), (1.0, 2.0), (1000.0, 1001.0), (-2.0, 0.0)):
        values = x.uniform_(low, high).to(kiln.float64).numpy()
        assert values.min() >= low and values.max() < high, (low, high)
    n = x.normal_(1.0, 2.0).to(kiln.float64).numpy()
    assert abs(n.mean() - 1.0) < 0.04 and abs(n.std() - 2.0) < 0.04
    e = x.exponential_(4.0).to(kiln.float64).numpy()
    assert e.min() >= 0.0 and abs(e.mean() - 0.25) < 0.01 and abs(e.std() - 0.25) < 0.01
    b = x.bernoulli_(0.25).to(kiln.float64).numpy()
    assert set(np.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.25) < 0.01


def test_inplace_samplers_take_a_generator_and_bernoulli_takes_a_tensor():
    x = mint.empty(3, 5)
    g = kiln.Generator()
    for sample in (lambda: x.uniform_(generator=g.manual_seed(2)),
                   lambda: x.normal_(generator=g.manual_seed(2)),
                   lambda: x.exponential_(generator=g.manual_seed(2)),
                   lambda: x.bernoulli_(0.5, generator=g.manual_seed(2))):
        first = sample().numpy().copy()  # x's memory: the next sample overwrites it
        np.testing.assert_array_equal(sample().numpy(), first)
        g.manual_seed(3)
        assert not np.array_equal(x.uniform_(generator=g).numpy(), first)
    rows = kiln.tensor([[0.0], [1.0], [0.0]])
    np.testing.assert_array_equal(x.bernoulli_(rows).numpy(), np.repeat([[0.0], [1.0], [0.0]], 5,
                                                                        axis=1))
    ints = mint.zeros(6, dtype=kiln.int32).bernoulli_(1.0)
    assert ints.dtype == kiln.int32
    np.testing.assert_array_equal(ints.numpy(), 1)


@pytest.mark.parametrize("call, error, match", [
    (lambda x: x.uniform_(2.0, 1.0), kiln.KilnValueError, "uniform_: expected from <= to"),
    (lambda x: x.uniform_(0.0, float("inf")), kiln.KilnValueError, "uniform_: expected from, to"),
    (lambda x: x.uniform_(-3e38, 3e38), kiln.KilnValueError, "to - from to be finite float32"),
    (lambda x: x.uniform_("a"), kiln.KilnTypeError, "uniform_: expected from to be a real number"),
    (lambda x: x.normal_(0.0, -1.0), kiln.KilnValueError, "normal_: expected std >= 0"),
    (lambda x: x.exponential_(0.0), kiln.KilnValueError, "exponential_: expected lambd > 0"),
    (lambda x: x.bernoulli_(1.5), kiln.KilnValueError, r"bernoulli_: expected p in \[0, 1\]"),
    (lambda x: x.bernoulli_(kiln.tensor([1])), kiln.DTypeError,
     "bernoulli_: expected floating-point probabilities"),
    (lambda x: x.bernoulli_(mint.ones(3)), kiln.ShapeError,
     r"cannot broadcast shape \[3\] to \[2\]"),
    (lambda x: mint.zeros(2, dtype=kiln.int64).uniform_(), kiln.DTypeError,
     "uniform_: expected a floating-point tensor, got int64"),
    (lambda x: mint.zeros(2, dtype=kiln.int64).normal_(), kiln.DTypeError, "normal_: expected"),
    (lambda x: mint.zeros(2, dtype=kiln.int64).exponential_(), kiln.DTypeError,
     "exponential_: expected"),
])
def test_inplace_sampler_errors_leave_the_tensor_alone(call, error, match):
    x = mint.ones(2)
    with raises(error, match=match):
        call(x)
    np.testing.assert_array_equal(x.numpy(), 1.0)


def test_inplace_samplers_refuse_a_leaf_that_requires_grad_outside_no_grad():
    w = mint.zeros(3, requires_grad=True)
    with raises(kiln.KilnError):
        w.normal_()
    with kiln.no_grad():
        w.normal_()
    assert w.requires_grad and w.grad_fn is None


def test_generator_api_matches_pytorchs(torch):
    # The names PyTorch code calls exist, with PyTorch's argument names.
    for name in ("manual_seed", "seed", "initial_seed", "get_state", "set_state", "device"):
        assert hasattr(torch.Generator(), name) and hasattr(kiln.Generator(), name)
    for name in ("rand_like", "randn_like", "randint_like", "normal", "bernoulli",
                 "broadcast_shapes"):
        assert hasattr(torch, name) and hasattr(mint, name)
    assert mint.broadcast_shapes((3, 1), (1, 4)) == tuple(torch.broadcast_shapes((3, 1), (1, 4)))


def test_generators_pickle_and_copy_as_independent_streams_where_they_stood():
    import copy
    import pickle

    g = kiln.Generator().manual_seed(21)
    mint.rand(7, generator=g)
    for twin in (copy.copy(g), copy.deepcopy(g), pickle.loads(pickle.dumps(g))):
        assert twin is not g and twin.initial_seed() == 21
        np.testing.assert_array_equal(twin.get_state().numpy(), g.get_state().numpy())
        np.testing.assert_array_equal(mint.rand(5, generator=twin).numpy(),
                                      mint.rand(5, generator=copy.copy(g)).numpy())
    # The copy is its own stream: drawing from it leaves the original where it was.
    state = g.get_state().numpy()
    mint.rand(100, generator=copy.deepcopy(g))
    np.testing.assert_array_equal(g.get_state().numpy(), state)


def test_seeds_may_be_numpy_integers():
    kiln.manual_seed(np.int64(5))
    assert kiln.initial_seed() == 5
    assert kiln.Generator().manual_seed(np.uint64(2**64 - 1)).initial_seed() == 2**64 - 1


def test_a_jitted_function_draws_what_it_draws_eagerly_even_unused_draws():
    def f(x):
        mint.rand(1000)  # unused: still advances the generator, as it does eagerly
        return x + mint.rand(4) - mint.rand(4)

    x = mint.zeros(4)
    kiln.manual_seed(0)
    eager = f(x).numpy().copy()
    state = kiln.get_rng_state().numpy().copy()
    kiln.manual_seed(0)
    np.testing.assert_array_equal(kiln.jit(f)(x).numpy(), eager)
    np.testing.assert_array_equal(kiln.get_rng_state().numpy(), state)
