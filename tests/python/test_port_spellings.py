"""PyTorch spellings that ported code uses and Kiln accepts: max / min of two tensors,
var / std with unbiased by position, kiln.load's map_location, kiln.cuda's queries and
Tensor.cuda(); each against NumPy or its documented behaviour, with its errors."""

import numpy as np
import pytest

import kiln
from conftest import raises

mint = kiln.mint


def test_max_and_min_of_two_tensors_are_elementwise(rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal(4)
    x, y = kiln.tensor(a), kiln.tensor(b)
    np.testing.assert_array_equal(mint.max(x, y).numpy(), np.maximum(a, b))
    np.testing.assert_array_equal(x.min(y).numpy(), np.minimum(a, b))
    # The reductions are unchanged.
    np.testing.assert_array_equal(mint.max(x, 1).values.numpy(), a.max(1))
    assert mint.min(x).item() == a.min()
    with raises(kiln.KilnTypeError, match="max: keepdim is for a dim, not for max"):
        mint.max(x, y, keepdim=True)


def test_var_and_std_take_unbiased_by_position(rng):
    a = rng.standard_normal((4, 5))
    x = kiln.tensor(a)
    np.testing.assert_allclose(x.var(1, False).numpy(), a.var(1), rtol=1e-12)
    np.testing.assert_allclose(mint.std(x, 0, True, True).numpy(),
                               a.std(0, ddof=1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(x.var(1, correction=0).numpy(), a.var(1), rtol=1e-12)
    with raises(kiln.KilnValueError, match="expected correction or unbiased, not both"):
        x.var(1, True, correction=0)


def test_load_takes_map_location_and_weights_only(tmp_path):
    path = tmp_path / "w.safetensors"
    kiln.save({"w": mint.ones(2)}, path)
    for where in (None, "cpu", kiln.device("cpu")):
        loaded = kiln.load(path, map_location=where, weights_only=True)
        np.testing.assert_array_equal(loaded["w"].numpy(), [1.0, 1.0])
    with raises(kiln.KilnValueError, match="load: map_location: device 'cuda:0' is not available"):
        kiln.load(path, "cuda:0")


def test_cuda_says_there_is_none():
    assert kiln.cuda.is_available() is False and kiln.cuda.device_count() == 0
    kiln.cuda.manual_seed(3)
    kiln.cuda.manual_seed_all(3)
    with raises(kiln.KilnTypeError, match="kiln.cuda.manual_seed: seed must be an int"):
        kiln.cuda.manual_seed(1.5)
    with raises(kiln.KilnValueError, match="Tensor.cuda: device 'cuda' is not available; Kiln "
                                           "runs on the CPU"):
        mint.ones(1).cuda()


def test_spellings_match_pytorchs(torch):
    a = np.arange(6.0).reshape(2, 3)
    b = np.array([1.0, 5.0, 2.0])
    assert np.array_equal(torch.max(torch.tensor(a), torch.tensor(b)).numpy(),
                          mint.max(kiln.tensor(a), kiln.tensor(b)).numpy())
    assert np.allclose(torch.tensor(a).var(1, False).numpy(), kiln.tensor(a).var(1, False).numpy())
    assert torch.cuda.device_count() >= kiln.cuda.device_count()


def test_factories_take_size_by_keyword():
    for factory in (mint.zeros, mint.ones, mint.empty, mint.rand, mint.randn):
        assert factory(size=(2, 3)).shape == (2, 3)
        assert factory(size=4).shape == (4,)
        with raises(kiln.KilnTypeError, match="got the size both by position and by keyword"):
            factory(2, size=(3,))
    np.testing.assert_array_equal(mint.zeros(size=[2], dtype=kiln.int32).numpy(), [0, 0])


def test_hunt_fixes_of_the_new_layers_and_ops(rng):
    # An inplace activation given the jitted function's input computes out of place there.
    net = kiln.nn.Sequential(kiln.nn.ReLU(inplace=True), kiln.nn.Linear(4, 2))
    x = kiln.tensor(rng.standard_normal((3, 4)), dtype=kiln.float32)
    np.testing.assert_allclose(kiln.jit(net)(x).numpy(), net(x.clone()).numpy(), rtol=1e-6)
    # An integer input cannot take silu's float result in place (it was truncated).
    ints = kiln.tensor([-2, 3])
    with raises(kiln.DTypeError, match=r"silu\(inplace=True\)"):
        kiln.nn.SiLU(inplace=True)(ints)
    np.testing.assert_array_equal(ints.numpy(), [-2, 3])
    # cumprod of float32 accumulates in float64, as PyTorch's.
    a = np.full(4096, 1.0001, np.float32)
    got = mint.cumprod(kiln.tensor(a), 0).numpy()[-1]
    assert abs(got - np.prod(a.astype(np.float64))) < 1e-6
    # unique along a dim of size 0.
    assert mint.unique(mint.zeros(0, 3), dim=0).shape == (0, 3)
    # Softmax(dim=None) picks PyTorch's dim, with its warning.
    with pytest.warns(UserWarning, match="implicit dimension choice"):
        y = kiln.nn.Softmax(dim=None)(kiln.tensor(np.ones((2, 3))))
    np.testing.assert_allclose(y.numpy(), np.full((2, 3), 1 / 3))
    with raises(kiln.KilnTypeError, match="Softmax: dim must be an int"):
        kiln.nn.Softmax(dim=1.5)


def test_as_tensor_shares_what_it_can_as_pytorchs():
    array = np.arange(4.0)
    shared = kiln.as_tensor(array)
    array[0] = 9.0
    assert shared.dtype == kiln.float64 and shared.tolist() == [9.0, 1.0, 2.0, 3.0]
    copied = kiln.as_tensor(array, kiln.float32)  # another dtype: a converted copy
    array[1] = 7.0
    assert copied.tolist() == [9.0, 1.0, 2.0, 3.0]
    t = kiln.tensor([1.0, 2.0], requires_grad=True)
    assert kiln.as_tensor(t) is t and kiln.as_tensor(t, kiln.float64).requires_grad
    assert kiln.as_tensor([1, 2]).dtype == kiln.int64
    readonly = np.arange(3)
    readonly.flags.writeable = False
    assert kiln.as_tensor(readonly).tolist() == [0, 1, 2]  # copied: Kiln cannot share it
    with raises(kiln.KilnValueError, match="device 'cuda' is not available"):
        kiln.as_tensor(array, device="cuda")


def test_tensor_type_names_and_converts_and_mint_has_the_dtype_names():
    assert kiln.tensor([1.0]).type() == "kiln.FloatTensor"
    assert kiln.tensor([1]).type() == "kiln.LongTensor"
    assert kiln.tensor([True]).type() == "kiln.BoolTensor"
    assert kiln.tensor([1]).type(kiln.float64).dtype == kiln.float64
    # torch.bool, torch.float32, ... renamed to kiln.mint.*
    assert kiln.mint.bool is kiln.bool and kiln.mint.float32 is kiln.float32
    assert kiln.mint.long is kiln.int64 and kiln.mint.half is kiln.float16
    assert kiln.mint.zeros(2, dtype=kiln.mint.bool).dtype == kiln.bool
