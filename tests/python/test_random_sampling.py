"""kiln.mint.randperm and kiln.mint.multinomial (and Tensor.multinomial): permutations and
frequencies against the exact probabilities, seeding, kiln.jit, and the error paths."""

import numpy as np
import pytest

import kiln
from conftest import raises

mint = kiln.mint


@pytest.mark.parametrize("n", [0, 1, 5, 1000])
@pytest.mark.parametrize("dtype", [None, kiln.int32, kiln.int16, kiln.float32, kiln.float16])
def test_randperm_is_a_permutation(n, dtype):
    p = mint.randperm(n) if dtype is None else mint.randperm(n, dtype=dtype)
    assert p.dtype == (dtype or kiln.int64) and p.shape == (n,)
    np.testing.assert_array_equal(np.sort(p.to(kiln.float64).numpy()), np.arange(n))


def test_randperm_repeats_after_manual_seed_and_indexes_rows():
    mint.manual_seed(7)
    first = mint.randperm(50).numpy()
    mint.manual_seed(7)
    np.testing.assert_array_equal(mint.randperm(50).numpy(), first)
    assert not np.array_equal(mint.randperm(50).numpy(), first)
    x, perm = mint.arange(50) * 10, mint.randperm(50)
    np.testing.assert_array_equal(x[perm].numpy(), perm.numpy() * 10)


def test_randperm_positions_are_uniform():
    mint.manual_seed(8)
    where_zero = np.zeros(6)
    for _ in range(6000):
        where_zero[int(np.argmin(mint.randperm(6).numpy()))] += 1
    np.testing.assert_allclose(where_zero / 6000, 1 / 6, atol=0.025)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16])
def test_multinomial_with_replacement_follows_the_weights(dtype):
    mint.manual_seed(9)
    weights = np.array([[1.0, 0.0, 3.0, 4.0], [2.0, 2.0, 2.0, 2.0]])  # not normalised
    samples = mint.multinomial(kiln.tensor(weights, dtype=dtype), 40000, replacement=True)
    assert samples.dtype == kiln.int64 and samples.shape == (2, 40000)
    for row, want in zip(samples.numpy(), weights / weights.sum(1, keepdims=True)):
        np.testing.assert_allclose(np.bincount(row, minlength=4) / 40000, want, atol=0.01)


def test_multinomial_without_replacement_draws_distinct_categories_in_sequence():
    mint.manual_seed(10)
    probs = mint.expand(kiln.tensor([0.5, 0.3, 0.2]), [20000, 3]).contiguous()
    samples = probs.multinomial(2).numpy()
    assert (samples[:, 0] != samples[:, 1]).all()
    pairs = {(a, b): np.mean((samples[:, 0] == a) & (samples[:, 1] == b))
             for a in range(3) for b in range(3) if a != b}
    for (a, b), freq in pairs.items():
        first = [0.5, 0.3, 0.2][a]
        want = first * [0.5, 0.3, 0.2][b] / (1 - first)
        assert abs(freq - want) < 0.015, (a, b, freq, want)
    everything = mint.multinomial(kiln.tensor([0.0, 1.0, 2.0, 1.0]), 3).numpy()
    np.testing.assert_array_equal(np.sort(everything), [1, 2, 3])


def test_multinomial_weights_are_relative_even_when_subnormal_or_huge():
    mint.manual_seed(11)
    for weights in ([5e-324, 1e-323], [0.6e308, 1.2e308]):  # 1 : 2, tiny or summing past inf
        samples = mint.multinomial(kiln.tensor(weights, dtype=kiln.float64), 30000, True).numpy()
        assert abs((samples == 1).mean() - 2 / 3) < 0.015, weights
        rows = mint.multinomial(kiln.tensor([weights] * 6000, dtype=kiln.float64), 1).numpy()
        assert abs((rows == 1).mean() - 2 / 3) < 0.025, weights


def test_jitted_sampling_draws_afresh_at_each_call():
    @kiln.jit
    def shuffle_and_sample(x, probs):
        return x[mint.randperm(8)], mint.multinomial(probs, 4, replacement=True)

    x, probs = mint.arange(8), kiln.tensor([[1.0, 1.0, 1.0]] * 2)
    results = [shuffle_and_sample(x, probs) for _ in range(4)]
    for perm, samples in results:
        np.testing.assert_array_equal(np.sort(perm.numpy()), np.arange(8))
        assert samples.shape == (2, 4)
    assert len({tuple(perm.numpy()) for perm, _ in results}) > 1
    mint.manual_seed(3)
    a = shuffle_and_sample(x, probs)
    mint.manual_seed(3)
    b = shuffle_and_sample(x, probs)
    np.testing.assert_array_equal(a[0].numpy(), b[0].numpy())
    np.testing.assert_array_equal(a[1].numpy(), b[1].numpy())


def test_rng_state_round_trips_through_a_checkpoint(tmp_path):
    kiln.manual_seed(5)
    mint.rand(10)
    kiln.save({"rng": kiln.get_rng_state()}, tmp_path / "state")
    first = (mint.randn(8).numpy(), mint.randperm(20).numpy(), mint.rand(3).numpy())
    mint.rand(1000)
    kiln.set_rng_state(kiln.load(tmp_path / "state")["rng"])
    again = (mint.randn(8).numpy(), mint.randperm(20).numpy(), mint.rand(3).numpy())
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    kiln.manual_seed(2**64 - 1)  # a seed past int64 survives as its bit pattern
    state = kiln.get_rng_state()
    value = mint.rand(4).numpy()
    kiln.set_rng_state(state)
    np.testing.assert_array_equal(mint.rand(4).numpy(), value)
    with raises(kiln.KilnValueError, match="set_rng_state: expected the int64 tensor of 2"):
        kiln.set_rng_state(mint.zeros(2))


def test_bad_arguments_are_typed_errors():
    w = kiln.tensor([1.0, 0.0, 1.0])
    with raises(kiln.KilnValueError, match="randperm: expected n >= 0, got -1"):
        mint.randperm(-1)
    with raises(kiln.KilnValueError, match="n = 300 does not fit in uint8"):
        mint.randperm(300, dtype=kiln.uint8)
    with raises(kiln.DTypeError, match="randperm: expected a numeric dtype, got bool"):
        mint.randperm(3, dtype=kiln.bool)
    with raises(kiln.KilnValueError, match="n = 4000 does not fit in float16"):
        mint.randperm(4000, dtype=kiln.float16)
    with raises(kiln.DTypeError, match="expected floating probabilities, got int64"):
        mint.multinomial(kiln.tensor([1, 2]), 1)
    with raises(kiln.ShapeError, match=r"shape \[C\] or \[B, C\]"):
        mint.multinomial(mint.ones(2, 2, 2), 1)
    with raises(kiln.KilnValueError, match="expected num_samples > 0, got 0"):
        w.multinomial(0)
    with raises(kiln.KilnValueError, match="cannot draw 4 samples without replacement from 3"):
        mint.multinomial(w, 4)
    # Weights are checked when the kernel runs (at the next sync point in the async modes).
    with raises(kiln.KilnValueError, match="which has 2 categories of positive probability"):
        mint.multinomial(w, 3)
    with raises(kiln.KilnValueError, match="got -1 in row 0, category 1"):
        mint.multinomial(kiln.tensor([1.0, -1.0]), 1)
    with raises(kiln.KilnValueError, match="got nan in row 1"):
        mint.multinomial(kiln.tensor([[1.0, 1.0], [float("nan"), 1.0]]), 1)
    with raises(kiln.KilnValueError, match="row 0 has no positive probability"):
        mint.multinomial(mint.zeros(3), 1, replacement=True)
    np.testing.assert_array_equal(w.numpy(), [1.0, 0.0, 1.0])
