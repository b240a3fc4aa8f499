"""PyTorch behaviours that kiln.mint's random and indexing functions and Tensor's methods lacked:
``bernoulli(input, p)`` (and ``Tensor.bernoulli(p)``), ``normal`` refusing a negative tensor
``std``, ``index_add`` with a bool ``alpha``, and ``Tensor.lerp_`` with ``lerp``'s values.
PyTorch is compared where it is installed."""

import operator

import numpy as np
import pytest

import kiln
from conftest import FLOAT_DTYPES, random_array, raises
mint = kiln.mint
bernoulli = mint.bernoulli


def values(shape, dtype, rng, low=-3.0, high=3.0):
    return kiln.tensor(random_array(shape, dtype, rng, low, high), dtype=dtype)


# ------------------------------------------------------------------------------------------------
# bernoulli(input, p)

ALL_DTYPES = [kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16, kiln.int64, kiln.int32,
              kiln.uint8, kiln.bool_]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_bernoulli_with_p_has_the_inputs_shape_and_dtype(dtype):
    x = mint.full([2, 3], 5, dtype=dtype)  # the values are not probabilities: they are not read
    for p, want in ((1.0, 1), (0.0, 0), (1, 1)):
        out = bernoulli(x, p)
        assert out.dtype == dtype and out.shape == (2, 3)
        assert out.to(kiln.int64).tolist() == [[want] * 3] * 2
    method = x.bernoulli(p=1.0)
    assert method.dtype == dtype and method.to(kiln.int64).tolist() == [[1] * 3] * 2
    assert bernoulli(mint.zeros([0, 4], dtype=dtype), 0.5).shape == (0, 4)
    assert bernoulli(mint.zeros([], dtype=dtype), 1.0).to(kiln.int64).item() == 1


def test_bernoulli_with_p_draws_ones_with_probability_p():
    mint.manual_seed(21)
    draws = bernoulli(mint.zeros([200000]), 0.3).numpy()
    assert set(np.unique(draws)) <= {0.0, 1.0}
    assert abs(draws.mean() - 0.3) < 0.01
    halves = mint.zeros([100000], dtype=kiln.int32).bernoulli(0.5).numpy()
    assert abs(halves.mean() - 0.5) < 0.01


def test_bernoulli_with_p_draws_what_bernoulli__draws():
    x = mint.zeros([4, 5])
    out = bernoulli(x, 0.4, generator=kiln.Generator().manual_seed(3))
    filled = x.clone().bernoulli_(0.4, generator=kiln.Generator().manual_seed(3))
    np.testing.assert_array_equal(out.numpy(), filled.numpy())
    mint.manual_seed(5)
    first = x.bernoulli(0.4).numpy()
    mint.manual_seed(5)
    np.testing.assert_array_equal(bernoulli(x, p=0.4).numpy(), first)


def test_bernoulli_without_p_is_still_the_op():
    probs = kiln.tensor([[0.0, 1.0], [1.0, 0.0]])
    assert bernoulli(probs).tolist() == [[0.0, 1.0], [1.0, 0.0]]
    assert probs.bernoulli().tolist() == [[0.0, 1.0], [1.0, 0.0]]
    g = kiln.Generator().manual_seed(4)
    assert probs.bernoulli(generator=g).dtype == kiln.float32
    assert not bernoulli(mint.ones([3], requires_grad=True), 0.5).requires_grad


@pytest.mark.parametrize("call, error, match", [
    (lambda: bernoulli(mint.zeros([2]), 1.5), kiln.KilnValueError,
     r"bernoulli: expected p in \[0, 1\], got 1.5"),
    (lambda: bernoulli(mint.zeros([2]), -0.1), kiln.KilnValueError, r"p in \[0, 1\]"),
    (lambda: bernoulli(mint.zeros([2]), float("nan")), kiln.KilnValueError, r"p in \[0, 1\]"),
    (lambda: bernoulli(mint.zeros([2]), "0.5"), kiln.KilnTypeError,
     "bernoulli: expected p to be a real number, got str"),
    (lambda: bernoulli([0.5, 0.5], 0.5), kiln.KilnTypeError,
     "bernoulli: expected input to be a kiln.Tensor, got list"),
    (lambda: mint.zeros([2]).bernoulli(p=2.0), kiln.KilnValueError, r"p in \[0, 1\]"),
])
def test_bernoulli_with_p_errors(call, error, match):
    with raises(error, match=match):
        call()


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool"])
def test_bernoulli_with_p_matches_pytorch(torch, dtype):
    x = torch.zeros(3, 4, dtype=getattr(torch, dtype))
    ours = bernoulli(kiln.tensor(x.numpy()), 1.0)
    theirs = torch.bernoulli(x, 1.0)
    assert ours.dtype.name == dtype and tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    with pytest.raises(RuntimeError, match=r"p to be in \[0, 1\]"):
        torch.bernoulli(x, 1.5)
    with raises(kiln.KilnValueError, match=r"p in \[0, 1\]"):
        bernoulli(kiln.tensor(x.numpy()), 1.5)


# ------------------------------------------------------------------------------------------------
# normal with a tensor std


@pytest.mark.parametrize("mean, std", [
    (lambda: mint.zeros([3]), lambda: kiln.tensor([1.0, -0.5, 2.0])),
    (lambda: 0.0, lambda: kiln.tensor([[1.0], [-1e-30]])),
    (lambda: mint.zeros([2]), lambda: kiln.tensor([1.0, float("nan")])),
    (lambda: mint.zeros([2], dtype=kiln.float64), lambda: kiln.tensor(-1.0)),
])
def test_normal_refuses_a_negative_or_nan_std_tensor(mean, std):
    with raises(kiln.KilnValueError, match=r"normal: expected all elements of std >= 0\.0"):
        mint.normal(mean(), std())


def test_normal_takes_a_zero_or_empty_std_tensor():
    mean = kiln.tensor([1.0, -2.0])
    assert mint.normal(mean, mint.zeros([2])).tolist() == [1.0, -2.0]
    assert mint.normal(0.0, mint.zeros([0, 3])).shape == (0, 3)
    assert mint.normal(mean, kiln.tensor([0.5, 2.0])).shape == (2,)


def test_normal_with_a_tensor_std_traces_under_jit():
    @kiln.jit
    def sample(mean, std):
        return mint.normal(mean, std)

    mean, std = kiln.tensor([3.0, -3.0]), mint.zeros([2])
    assert sample(mean, std).tolist() == [3.0, -3.0]
    assert sample(mean, std + 1.0).shape == (2,)


def test_normal_refuses_a_negative_std_like_pytorch(torch):
    with pytest.raises(RuntimeError, match=r"normal expects all elements of std >= 0\.0"):
        torch.normal(torch.zeros(2), torch.tensor([1.0, -1.0]))
    with raises(kiln.KilnValueError, match=r"all elements of std >= 0\.0"):
        mint.normal(mint.zeros([2]), kiln.tensor([1.0, -1.0]))


# ------------------------------------------------------------------------------------------------
# index_add's alpha


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.int64, kiln.bool_])
def test_index_add_takes_a_bool_alpha_as_one_or_zero(dtype):
    x = kiln.tensor([0, 0, 1], dtype=dtype)
    source = kiln.tensor([1, 1], dtype=dtype)
    index = kiln.tensor([0, 1])
    added = mint.index_add(x, 0, index, source)
    assert mint.index_add(x, 0, index, source, alpha=True).tolist() == added.tolist()
    assert x.index_add(0, index, source, alpha=False).tolist() == x.tolist()
    y = x.clone()
    assert y.index_add_(0, index, source, alpha=True) is y and y.tolist() == added.tolist()


@pytest.mark.parametrize("alpha, match", [
    ("2", "index_add: expected alpha to be a number .*, got str '2'"),
    (None, "expected alpha to be a number .*, got NoneType None"),
    (1j, "expected alpha to be a number .*, got complex"),
])
def test_index_add_refuses_an_alpha_that_is_no_number(alpha, match):
    x = mint.zeros([3])
    with raises(kiln.KilnTypeError, match=match):
        mint.index_add(x, 0, kiln.tensor([0]), mint.ones([1]), alpha=alpha)


@pytest.mark.parametrize("dtype", ["float32", "int64"])
@pytest.mark.parametrize("alpha", [True, False])
def test_index_add_with_a_bool_alpha_matches_pytorch(torch, dtype, alpha):
    x = torch.tensor([1, 2, 3], dtype=getattr(torch, dtype))
    source, index = torch.tensor([4, 5], dtype=x.dtype), torch.tensor([2, 0])
    want = torch.index_add(x, 0, index, source, alpha=alpha).numpy()
    ours = [kiln.tensor(v.numpy()) for v in (x, index, source)]
    got = mint.index_add(ours[0], 0, ours[1], ours[2], alpha=alpha)
    np.testing.assert_array_equal(got.numpy(), want)


# ------------------------------------------------------------------------------------------------
# lerp_


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("weight", [0.25, 0.5, 0.75, 1.0, -0.5, 1.5, "tensor"])
def test_lerp_in_place_gives_lerps_values_to_the_bit(dtype, weight, rng):
    start, end = values((3, 4), dtype, rng), values((4,), dtype, rng)
    if weight == "tensor":  # both branches of the formula, by element
        weight = values((3, 4), dtype, rng, low=-0.5, high=1.5)
    expected = mint.lerp(start, end, weight)
    x = start.clone()
    assert x.lerp_(end, weight) is x
    np.testing.assert_array_equal(x.numpy(), expected.numpy())


def test_lerp_in_place_with_weight_one_gives_end_exactly(rng):
    start = kiln.tensor(rng.standard_normal(1000).astype(np.float32))
    end = kiln.tensor(rng.standard_normal(1000).astype(np.float32) * 1e3)
    np.testing.assert_array_equal(start.clone().lerp_(end, 1.0).numpy(), end.numpy())
    ones = mint.ones([1000])
    np.testing.assert_array_equal(start.clone().lerp_(end, ones).numpy(), end.numpy())


def test_lerp_in_place_matches_pytorch(torch, rng):
    a, b = (rng.standard_normal((2, 5)).astype(np.float32) for _ in range(2))
    w = rng.uniform(-0.5, 1.5, (2, 5)).astype(np.float32)
    for weight, torch_weight in ((0.3, 0.3), (0.9, 0.9), (kiln.tensor(w), torch.tensor(w))):
        x, tx = kiln.tensor(a), torch.tensor(a)
        x.lerp_(kiln.tensor(b), weight)
        tx.lerp_(torch.tensor(b), torch_weight)
        np.testing.assert_allclose(x.numpy(), tx.numpy(), rtol=1e-6, atol=1e-6)
