"""kiln.mint.resample (src/ops/resample.cc): each output along a dim as a weighted sum of input
positions, against NumPy, with its gradients and errors."""

import numpy as np
import pytest

import kiln
from conftest import raises
from kiln.testing import gradcheck

mint = kiln.mint


def numpy_resample(x, dim, index, weight):
    moved = np.moveaxis(x.astype(np.float64), dim, 0)
    y = sum(weight[k][(slice(None),) + (None,) * (x.ndim - 1)] * moved[index[k]]
            for k in range(index.shape[0]))
    return np.moveaxis(y, 0, dim)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_resample_matches_its_definition(dim, dtype, rng):
    x = rng.standard_normal((3, 4, 6)).astype(dtype)
    size = x.shape[dim]
    index = rng.integers(0, size, size=(3, 7))
    weight = rng.standard_normal((3, 7)).astype(dtype)
    got = mint.resample(kiln.tensor(x), dim, kiln.tensor(index), kiln.tensor(weight))
    assert got.dtype == getattr(kiln, dtype)
    np.testing.assert_allclose(got.numpy(), numpy_resample(x, dim, index, weight),
                               rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-6)


def test_resample_gradients_match_finite_differences(rng):
    index = kiln.tensor(rng.integers(0, 5, size=(2, 4)))
    for dim in (0, 1):
        shape = (5, 3) if dim == 0 else (3, 5)
        assert gradcheck(lambda x, w: mint.resample(x, dim, index, w),
                         (kiln.tensor(rng.standard_normal(shape)).requires_grad_(),
                          kiln.tensor(rng.standard_normal((2, 4))).requires_grad_()))


def test_resample_errors_name_what_was_wrong():
    x = mint.ones(2, 3)
    with raises(kiln.KilnIndexError, match="resample: index 3 is out of range for a dimension "
                                           "of size 3"):
        mint.resample(x, 1, kiln.tensor([[0, 3]]), kiln.tensor([[1.0, 1.0]]))
    with raises(kiln.DTypeError, match="resample: expected an int64 index"):
        mint.resample(x, 1, kiln.tensor([[0, 1]], dtype=kiln.int32), kiln.tensor([[1.0, 1.0]]))
    with raises(kiln.ShapeError, match=r"expected index and weight of one shape \[taps, out\]"):
        mint.resample(x, 1, kiln.tensor([[0, 1]]), kiln.tensor([1.0, 1.0]))
    assert x.tolist() == [[1.0] * 3] * 2
