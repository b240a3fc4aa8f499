"""Dtype rules PyTorch has and Kiln broke (a hunt across dtypes): softmax's dtype= must be
floating point; add / sub's alpha keeps Python numbers weak and refuses a float alpha with integer
operands and a bool one with non-bool results; a 16-bit conv_transpose2d rounds once after its
bias; scatter and index_add refuse a source of another dtype; layer_norm and rms_norm keep x's
dtype beside float32 parameters."""

import numpy as np
import pytest

import kiln
from conftest import assert_close, raises
from kiln import mint
from kiln.nn import functional as F


@pytest.mark.parametrize("fn", [mint.softmax, mint.log_softmax, F.softmax, F.log_softmax,
                                F.softmin], ids=lambda f: f.__module__ + "." + f.__name__)
@pytest.mark.parametrize("dtype", [kiln.int64, kiln.bool_, kiln.uint8], ids=str)
def test_softmax_refuses_a_dtype_that_is_not_floating_point(fn, dtype):
    # It truncated the input to the integer dtype and gave float32 anyway.
    x = kiln.tensor([[0.5, 1.7, 2.9]])
    with raises(kiln.DTypeError, match=f"expected dtype to be a floating-point dtype to compute "
                                       f"in, got {dtype.name}"):
        fn(x, 1, dtype=dtype)
    assert fn(x, 1, dtype=kiln.float64).dtype == kiln.float64


@pytest.mark.parametrize("name, sign", [("add", 1), ("sub", -1)])
def test_alpha_keeps_python_numbers_weak(name, sign):
    k = kiln.tensor([100], dtype=kiln.int8)
    for result in (getattr(mint, name)(k, 20, alpha=2), getattr(k, name)(20, alpha=2)):
        assert result.dtype == kiln.int8  # int64 before: alpha * 20 made a strong int64 tensor
        assert result.tolist() == [np.int8(np.int16(100) + sign * 40)]  # wraps, as k + 40 does
    h = kiln.tensor([1.0], dtype=kiln.float16)
    assert getattr(mint, name)(h, 0.1, alpha=3).dtype == kiln.float16
    assert getattr(mint, name)(kiln.tensor([1.0]), kiln.tensor([2.0]), alpha=0.5).tolist() == [
        1.0 + sign * 1.0]


@pytest.mark.parametrize("name", ["add", "sub"])
def test_alpha_refuses_what_pytorch_refuses(name):
    k = kiln.tensor([1, 2], dtype=kiln.int32)
    calls = [lambda: getattr(mint, name)(k, k, alpha=2.5), lambda: getattr(k, name)(k, alpha=2.5),
             lambda: getattr(k.clone(), name + "_")(k, alpha=0.5)]
    for call in calls:
        with raises(kiln.DTypeError, match="for integer operands \\(int32\\) alpha must be an "
                                           "integer, not the floating-point"):
            call()
    with raises(kiln.DTypeError, match="a bool alpha is only supported for bool results, got "
                                       "int32 operands"):
        getattr(mint, name)(k, k, alpha=True)
    assert k.tolist() == [1, 2]
    mask = kiln.tensor([True, False])
    assert mint.add(mask, mask, alpha=True).tolist() == [True, False]


def test_add_alpha_matches_pytorch(torch):
    for dtype in ("int8", "float16", "float32"):
        a = np.array([100, -7, 3], dtype=dtype)
        for other, alpha in ((20, 2), (3, -1), (np.array([1, 2, 3], dtype=dtype), 3)):
            kt = kiln.tensor(other) if isinstance(other, np.ndarray) else other
            tt = torch.tensor(other) if isinstance(other, np.ndarray) else other
            want = torch.add(torch.tensor(a), tt, alpha=alpha)
            got = mint.add(kiln.tensor(a), kt, alpha=alpha)
            assert got.dtype.name == str(want.dtype).removeprefix("torch.")
            np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16], ids=str)
def test_conv_transpose2d_rounds_once_after_its_bias(dtype):
    # The bias was added to the rounded convolution: 1000 + 0.125 - 1000 lost the 0.125.
    x = kiln.tensor(np.ones((1, 2, 1, 1), np.float32)).to(dtype)
    w = kiln.tensor(np.array([1000.0, 0.125], np.float32).reshape(2, 1, 1, 1)).to(dtype)
    b = kiln.tensor(np.array([-1000.0], np.float32)).to(dtype)
    out = F.conv_transpose2d(x, w, b)
    assert out.dtype == dtype and out.tolist() == [[[[0.125]]]]
    assert F.conv2d(x, w.reshape(1, 2, 1, 1), b).tolist() == [[[[0.125]]]]  # as conv2d does


def test_conv_transpose2d_in_16_bits_matches_a_float64_reference_to_half_an_ulp(rng):
    x = rng.standard_normal((2, 3, 4, 4))
    w = rng.standard_normal((3, 2, 3, 3))
    b = rng.standard_normal(2) * 10
    h = [kiln.tensor(v.astype(np.float32)).to(kiln.float16) for v in (x, w, b)]
    exact = F.conv_transpose2d(*[v.to(kiln.float64) for v in h], stride=2).numpy()
    got = F.conv_transpose2d(*h, stride=2).to(kiln.float64).numpy()
    ulp = np.spacing(np.abs(exact).astype(np.float16)).astype(np.float64)
    assert np.all(np.abs(got - exact) <= 0.5 * ulp + 1e-12)


@pytest.mark.parametrize("call", [
    lambda x, i, s: mint.scatter(x, 0, i, s),
    lambda x, i, s: mint.scatter_add(x, 0, i, s),
    lambda x, i, s: x.clone().scatter_(0, i, s),
], ids=["scatter", "scatter_add", "scatter_"])
def test_scatter_refuses_a_source_of_another_dtype(call):
    # It converted the source: 300 wrapped into int8's 44, 2.7 truncated to 2.
    x = kiln.tensor([0, 0, 0], dtype=kiln.int8)
    with raises(kiln.DTypeError, match="scatter: expected src of the input's dtype int8, got "
                                       "float32"):
        call(x, kiln.tensor([0, 1, 2]), kiln.tensor([2.7, -1.9, 300.0]))
    assert mint.scatter(x, 0, kiln.tensor([1]), 5).tolist() == [0, 5, 0]  # a number still fits
    assert x.tolist() == [0, 0, 0]


def test_index_add_refuses_a_source_of_another_dtype():
    x = kiln.tensor([0, 0, 0], dtype=kiln.int8)
    with raises(kiln.DTypeError, match="index_add: expected source of the input's dtype int8, "
                                       "got float32"):
        mint.index_add(x, 0, kiln.tensor([0, 0, 2]), kiln.tensor([2.7, -1.9, 300.0]))
    mask = kiln.tensor([False, False, True])
    assert mint.index_add(mask, 0, kiln.tensor([0]), kiln.tensor([True]), alpha=False).tolist() \
        == [False, False, True]


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16], ids=str)
def test_norms_keep_a_16_bit_input_dtype_beside_float32_parameters(dtype, rng):
    x = kiln.tensor(rng.standard_normal((3, 8)).astype(np.float32)).to(dtype)
    w = kiln.tensor(rng.standard_normal(8).astype(np.float32))
    for out in (F.layer_norm(x, (8,), w, w), F.rms_norm(x, (8,), w),
                F.group_norm(x.reshape(3, 8, 1), 2)):
        assert out.dtype == dtype
    exact = F.layer_norm(x.to(kiln.float64), (8,), w.to(kiln.float64), w.to(kiln.float64))
    assert_close(F.layer_norm(x, (8,), w, w), exact.numpy())


@pytest.mark.parametrize("name", ["bool", "uint8", "int8", "int16", "int32", "int64", "float16",
                                  "bfloat16", "float32", "float64"])
def test_dtype_properties_match_pytorchs(name, torch):
    dtype, theirs = getattr(kiln, name), getattr(torch, name)
    assert dtype.is_signed == theirs.is_signed
    assert dtype.is_floating_point == theirs.is_floating_point
    assert dtype.is_complex is False and theirs.is_complex is False
    assert dtype.itemsize == theirs.itemsize


def test_dtype_is_signed_without_pytorch():
    assert [d.is_signed for d in (kiln.bool, kiln.uint8, kiln.int8, kiln.float16)] == \
        [False, False, True, True]
