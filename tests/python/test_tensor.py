"""kiln.Tensor: construction, metadata, views, NumPy interop, errors."""

import subprocess
import sys

import numpy as np
import pytest

import kiln
from conftest import ALL_DTYPES, numpy_dtype, raises, random_array


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_tensor_round_trips_through_numpy(dtype, rng):
    values = random_array((3, 4), dtype, rng)
    t = kiln.tensor(values, dtype=dtype)
    assert t.dtype == dtype
    assert t.shape == (3, 4)
    assert t.ndim == 2
    assert t.numel() == 12
    assert t.numpy().dtype == numpy_dtype(dtype)
    np.testing.assert_array_equal(t.numpy(), values)


def test_tensor_from_python_values_uses_deep_learning_defaults():
    assert kiln.tensor([1.0, 2.0]).dtype == kiln.float32
    assert kiln.tensor([1, 2]).dtype == kiln.int64
    assert kiln.tensor([True]).dtype == kiln.bool_
    assert kiln.tensor(2.5).shape == ()
    assert kiln.tensor(np.zeros(2, np.float64)).dtype == kiln.float64
    # A NumPy scalar keeps its dtype as an array does (np.float64(0.1) was float32).
    assert kiln.tensor(np.float64(0.1)).dtype == kiln.float64
    assert kiln.tensor(np.float64(0.1)).item() == 0.1
    assert kiln.tensor(np.int16(3)).dtype == kiln.int16
    assert kiln.tensor([[1, 2]], dtype="float16").dtype == kiln.float16
    assert kiln.tensor([1], dtype=np.int8).dtype == kiln.int8


def test_a_list_holding_float64_values_is_float64_as_in_pytorch():
    third = kiln.tensor(1 / 3, dtype=kiln.float64)
    stacked = kiln.tensor([third, third])
    assert stacked.dtype == kiln.float64 and stacked.tolist() == [1 / 3, 1 / 3]
    assert kiln.tensor([[0.5], [np.float64(0.1)]]).dtype == kiln.float64
    assert kiln.tensor([0.5, np.array(0.1)]).tolist() == [0.5, 0.1]
    # Python floats alone, float32 values and 16-bit tensors keep Kiln's float32 default.
    assert kiln.tensor([0.5, 0.25]).dtype == kiln.float32
    assert kiln.tensor([np.float32(0.5)]).dtype == kiln.float32
    assert kiln.tensor([kiln.tensor(0.5), 1.0]).dtype == kiln.float32
    assert kiln.tensor([third, third], dtype=kiln.float32).dtype == kiln.float32


def test_python_floats_with_a_dtype_keep_their_value():
    assert kiln.tensor(0.1, dtype=kiln.float64).item() == 0.1  # not rounded through float32
    assert kiln.tensor([0.1, 1 / 3], dtype="float64").tolist() == [0.1, 1 / 3]
    assert kiln.tensor(0.1).item() == np.float32(0.1)           # float32 by default
    assert kiln.tensor(0.1, dtype=kiln.float16).item() == np.float16(0.1)


def test_from_numpy_shares_memory_and_tensor_copies():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    shared = kiln.from_numpy(a)
    copied = kiln.tensor(a)
    a[0, 0] = 42
    assert shared.numpy()[0, 0] == 42
    assert copied.numpy()[0, 0] == 0
    # The tensor keeps the array alive after the Python name is gone.
    del a
    assert shared.tolist()[1] == [3.0, 4.0, 5.0]


@pytest.mark.parametrize("array", [
    np.array([None, None]), np.zeros(2, np.longdouble), np.arange(3, dtype=">f4"),
    np.array(["a", "b"]), np.zeros(2, np.complex64), np.zeros(2, np.uint32),
    np.zeros(2, np.uint16), np.zeros(2, np.uint64),
], ids=lambda a: a.dtype.str)
def test_arrays_of_dtypes_kiln_does_not_hold_are_dtype_errors(array):
    # Every one names the dtypes Kiln reads (the unsigned ones spoke of DLPack codes).
    for make in (kiln.tensor, kiln.from_numpy):
        with raises(kiln.DTypeError, match=r"cannot read a NumPy array of dtype .*; expected "
                                           r"bool, int8, uint8"):
            make(array)


def test_from_numpy_keeps_strides_of_a_non_contiguous_array():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)[:, ::2]
    t = kiln.from_numpy(a)
    assert t.stride() == (4, 2)
    assert not t.is_contiguous()
    np.testing.assert_array_equal(t.numpy(), a)


def test_numpy_view_shares_memory_with_the_tensor():
    t = kiln.tensor([[1.0, 2.0], [3.0, 4.0]])
    view = t.numpy()
    view[1, 1] = -1
    assert t.tolist() == [[1.0, 2.0], [3.0, -1.0]]
    assert np.asarray(t).shape == (2, 2)


def test_numpy_values_on_the_left_of_an_operator_give_a_tensor():
    x = kiln.tensor([1.0, 2.0, 3.0]).requires_grad_()
    cases = [(np.float32(0.5) * x, kiln.float32), (np.float64(2) - x, kiln.float32),
             (np.ones(3) + x, kiln.float64), (np.int64(1) < x, kiln.bool_),
             (np.arange(3) ** x, kiln.float32), (np.float32(6) / x, kiln.float32),
             (np.int64(7) // x, kiln.float32), (np.float32(7) % x, kiln.float32)]
    for result, dtype in cases:
        assert isinstance(result, kiln.Tensor) and result.dtype == dtype
    (np.float32(0.5) * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.5, 0.5, 0.5])
    assert isinstance(np.add(x.detach(), 1), kiln.Tensor)  # the operator's ufunc, called
    sines = np.sin(x.detach())  # other ufuncs compute on the values as arrays
    assert isinstance(sines, np.ndarray) and np.allclose(sines, np.sin([1.0, 2.0, 3.0]))


def test_writes_into_a_numpy_array_stay_in_the_array():
    # `total += loss` with a NumPy accumulator rebound the name to a tensor, leaving the array.
    total = np.zeros(3)
    alias = total
    total += kiln.tensor([1.0, 2.0, 3.0])
    total *= kiln.tensor(2.0)
    assert total is alias and total.tolist() == [2.0, 4.0, 6.0]
    np.add(total, kiln.tensor([1.0, 1.0, 1.0]), out=total)
    assert alias.tolist() == [3.0, 5.0, 7.0]


def test_numpy_array_protocol_honours_copy_and_dtype():
    t = kiln.tensor([[1.0, 2.0], [3.0, 4.0]])
    np.asarray(t, copy=False)[0, 0] = 5  # a view
    np.asarray(t, copy=True)[0, 1] = 6  # a copy
    np.asarray(t, dtype=np.float32, copy=False)[1, 0] = 7  # the same dtype: still a view
    assert t.tolist() == [[5.0, 2.0], [7.0, 4.0]]
    as_double = np.asarray(t, dtype=np.float64)
    assert as_double.dtype == np.float64 and as_double.tolist() == t.tolist()
    with raises(kiln.KilnValueError, match=r"copy=False\) of a kiln.float32 tensor as float64 needs a "
                                           r"copy: NumPy converts it"):
        np.asarray(t, dtype=np.float64, copy=False)
    half = t.to(kiln.bfloat16)
    assert np.asarray(half).dtype == np.float32
    with raises(kiln.KilnValueError, match="NumPy has no bfloat16"):
        np.asarray(half, copy=False)
    assert t.tolist() == [[5.0, 2.0], [7.0, 4.0]]


def test_item_and_tolist():
    assert kiln.tensor([[7]]).item() == 7
    assert isinstance(kiln.tensor(1.5).item(), float)
    assert kiln.tensor(True).item() is True
    with raises(kiln.KilnValueError, match="one element"):
        kiln.tensor([1, 2]).item()


def test_import_kiln_leaves_numpy_to_first_use():
    # A fresh interpreter: this one imported NumPy long ago. kiln/_numpy.py's lazy module defers
    # it; anything that reads it at import time (a version check, a plain import) undoes that.
    code = ("import sys, kiln; t = kiln.mint.ones(2); print('numpy' in sys.modules); "
            "print(repr(t)); print('numpy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split("\n")[:3] == ["False", "tensor([1., 1.], dtype=kiln.float32)", "True"]


def test_threads_that_first_use_numpy_together_wait_for_its_import():
    # The lazy module read sys.modules, which holds NumPy partly initialized while another thread
    # imports it: tolist() failed with "partially initialized module 'numpy' has no attribute".
    code = ("import threading, kiln\n"
            "t = kiln.mint.ones(2)\n"
            "errors = []\n"
            "def work():\n"
            "    try:\n"
            "        assert t.tolist() == [1.0, 1.0]\n"
            "    except Exception as e:\n"
            "        errors.append(repr(e))\n"
            "threads = [threading.Thread(target=work) for _ in range(8)]\n"
            "[th.start() for th in threads]\n"
            "[th.join() for th in threads]\n"
            "print(errors)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)  # it could also hang
    assert done.stdout.strip() == "[]"


def test_repr_shows_values_and_dtype():
    text = repr(kiln.tensor([[1, 2], [3, 4]], dtype=kiln.int16))
    assert text.startswith("tensor([[1, 2],")
    assert "dtype=kiln.int16" in text


def test_views_share_storage():
    base = kiln.tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    expected = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    cases = {
        "view": (base.view(6, 4), expected.reshape(6, 4)),
        "reshape": (base.reshape((4, -1)), expected.reshape(4, -1)),
        "transpose": (base.transpose(0, 2), expected.transpose(2, 1, 0)),
        "permute": (base.permute(2, 0, 1), expected.transpose(2, 0, 1)),
        "T": (base.T, expected.T),
        "slice": (base.slice(2, 1, 4, 2), expected[:, :, 1:4:2]),
        "narrow": (base.narrow(1, 1, 2), expected[:, 1:3]),
        "select": (base.select(1, -1), expected[:, -1]),
        "expand": (base.select(2, 0).unsqueeze(0).expand(5, -1, -1),
                   np.broadcast_to(expected[:, :, 0], (5, 2, 3))),
        "squeeze": (base.narrow(0, 0, 1).squeeze(0), expected[0]),
        "unsqueeze": (base.unsqueeze(1), expected[:, None]),
        "flatten": (base.flatten(1), expected.reshape(2, 12)),
        "unfold": (base.select(0, 0).select(0, 0).unfold(0, 2, 1),
                   np.lib.stride_tricks.sliding_window_view(expected[0, 0], 2)),
    }
    for name, (view, want) in cases.items():
        assert view.shares_storage_with(base), name
        np.testing.assert_array_equal(view.numpy(), want, err_msg=name)


def test_contiguous_copies_only_when_needed():
    base = kiln.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert base.contiguous().is_same(base)
    t = base.T.contiguous()
    assert t.is_contiguous() and not t.shares_storage_with(base)
    np.testing.assert_array_equal(t.numpy(), np.arange(6).reshape(2, 3).T)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.int64, np.bool_],
                         ids=lambda d: np.dtype(d).name)
def test_broadcast_views_copy_into_every_element(dtype):
    # A 0-d value and a column expanded along rows: the copy fills runs from one element, also
    # while converting to another dtype.
    rng = np.random.default_rng(4)
    column = (rng.standard_normal((37, 1)) * 10).astype(dtype)
    scalar = column[3, 0]
    for source, shape in ((column, (37, 1000)), (np.array(scalar), (5, 7, 300))):
        view = kiln.tensor(source).expand(*shape)
        want = np.broadcast_to(source, shape)
        np.testing.assert_array_equal(view.contiguous().numpy(), want)
        np.testing.assert_array_equal(view.to(kiln.float64).numpy(), want.astype(np.float64))


def test_empty_and_zero_dim_tensors():
    e = kiln.tensor(np.zeros((0, 3), np.float32))
    assert e.shape == (0, 3) and e.numel() == 0
    assert e.numpy().shape == (0, 3)
    s = kiln.tensor(3.0)
    assert s.ndim == 0 and s.numel() == 1 and s.numpy().shape == ()


@pytest.mark.parametrize("call, error, message", [
    (lambda t: t.view(5, 5), kiln.ShapeError, "invalid for 6 elements"),
    (lambda t: t.T.view(6), kiln.ShapeError, "use reshape"),
    (lambda t: t.transpose(0, 2), kiln.KilnIndexError, "dim out of range"),
    (lambda t: t.select(0, 2), kiln.KilnIndexError, "out of bounds for dimension 0 with size 2"),
    (lambda t: t.expand(3, 3), kiln.ShapeError, "cannot broadcast"),
    (lambda t: t.permute(0, 0), kiln.KilnIndexError, "appears twice"),
    (lambda t: t.slice(0, 0, 1, 0), kiln.KilnValueError, "step must be positive"),
    (lambda t: kiln.tensor([1], dtype="complex64"), kiln.DTypeError, "unknown dtype"),
])
def test_bad_arguments_raise_typed_errors(call, error, message):
    t = kiln.tensor(np.zeros((2, 3), np.float32))
    with raises(error, match=message):
        call(t)
    # The tensor is intact afterwards.
    assert t.shape == (2, 3) and t.tolist() == [[0.0] * 3] * 2


def test_error_types_derive_from_builtin_exceptions():
    assert issubclass(kiln.KilnError, RuntimeError)
    assert issubclass(kiln.ShapeError, ValueError)
    assert issubclass(kiln.KilnIndexError, IndexError)
    assert issubclass(kiln.DTypeError, TypeError)
    with raises(kiln.KilnBuildError, match="boom"):
        kiln._C._raise_error(7, "boom")
    with raises(kiln.DistributedError, match="peer"):
        kiln._C._raise_error(8, "peer gone")


def test_get_include_and_cmake_dir_point_at_real_files():
    import os
    assert os.path.isfile(os.path.join(kiln.get_include(), "kiln", "tensor.h"))
    assert os.path.isfile(os.path.join(kiln.get_cmake_dir(), "KilnConfig.cmake"))


def test_shapes_whose_bytes_would_wrap_are_refused_and_empty_ones_allowed():
    big = 2**31  # big * big float32 elements: 2^64 bytes, which wraps to 0 in 64 bits
    for make in (kiln.mint.zeros, kiln.mint.empty, kiln.mint.ones):
        with raises(kiln.ShapeError, match=r"float32 tensor of shape \[2147483648, 2147483648\] "
                    r"would take more than 2\^63 - 1 bytes"):
            make((big, big))
    with raises(kiln.ShapeError, match="more than 2\\^63 - 1 bytes"):
        kiln.mint.ones(2**62).reshape(2**31, 2**31)
    assert kiln.mint.zeros((big, 0, big)).shape == (big, 0, big)


def test_shape_arguments_take_numpy_integers_and_refuse_other_values_clearly():
    x = kiln.tensor(np.arange(12, dtype=np.float32))
    assert x.reshape(np.int64(12)).shape == (12,)
    assert x.view(np.int32(3), 4).shape == (3, 4)
    assert kiln.mint.reshape(x, np.int64(12)).shape == (12,)
    assert kiln.mint.layer_norm(x.reshape(3, 4), np.int64(4)).shape == (3, 4)
    assert x.reshape(3, 4).permute(np.int64(1), 0).shape == (4, 3)
    for bad, what in ((lambda: x.view(kiln.int32), "view: expected an int or a sequence of ints"),
                      (lambda: x.reshape(2.0, 6), r"reshape: expected .* got \(2.0, 6\)"),
                      (lambda: x.reshape(3, 4).permute("ab"), "permute: expected"),
                      (lambda: kiln.mint.expand(x, True), "expand: expected"),
                      (lambda: x.reshape(2**64), "does not fit in int64")):
        with raises(kiln.KilnTypeError, match=what):
            bad()


def test_as_strided_refuses_views_outside_the_tensors_memory():
    x = kiln.tensor(np.arange(12, dtype=np.float32))
    np.testing.assert_array_equal(x.as_strided((2, 3), (3, 1), 6).numpy(),
                                  np.arange(6, 12).reshape(2, 3))
    with raises(kiln.KilnIndexError, match="reaches past the 12 elements"):
        x.as_strided((4,), (1,), 10)
    with raises(kiln.KilnIndexError, match="reaches past"):
        x.as_strided((2,), (2**40,))
    with raises(kiln.ShapeError, match="strides must be non-negative"):
        x.as_strided((3,), (-1,), 2)
    with raises(kiln.KilnIndexError, match="offset must be non-negative"):
        x.as_strided((2,), (1,), -5)


def test_as_strided_starts_at_the_tensors_own_offset_by_default():
    # As in PyTorch: storage strides, and the view's own storage offset unless one is given.
    x = kiln.tensor(np.arange(10.0))
    np.testing.assert_array_equal(x[2:].as_strided((3,), (1,)).numpy(), [2.0, 3.0, 4.0])
    np.testing.assert_array_equal(x[2:].as_strided((3,), (1,), 0).numpy(), [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(x[4:].as_strided((2, 2), (2, 1)).numpy(), [[4, 5], [6, 7]])


def test_masked_fill_keeps_a_float64_value_exact():
    mask = kiln.tensor(np.array([True, False, True]))
    for value in (0.1, kiln.tensor(np.array(1e300))):
        got = kiln.mint.masked_fill(kiln.tensor(np.zeros(3)), mask, value).numpy()
        expected = float(value) if isinstance(value, float) else 1e300
        np.testing.assert_array_equal(got, [expected, 0.0, expected])


@pytest.mark.parametrize("write", ["inplace", "out", "setitem"])
def test_writes_into_an_expanded_view_are_refused_and_change_nothing(write):
    base = kiln.tensor(np.zeros((1, 4), np.float32))
    view = base.expand(3, 4)  # three rows on one memory row
    values = kiln.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    # Refused at the call now (check_writable), naming the tensor written.
    with raises(kiln.KilnValueError, match=r"\(shape \[3, 4\], strides \[0, 1\]\) has elements "
                                           r"that share memory"):
        if write == "inplace":
            view += values
        elif write == "out":
            kiln.mint.add(values, 0.0, out=view)
        else:
            view[:] = values
    np.testing.assert_array_equal(base.numpy(), np.zeros((1, 4)))
    one_row = base.expand(1, 4)  # a stride-0 dim of size 1 shares nothing
    one_row += 1.0
    np.testing.assert_array_equal(base.numpy(), np.ones((1, 4)))


def test_numbers_an_integer_tensor_cannot_hold_are_refused_not_wrapped():
    # PyTorch: "value cannot be converted to type uint8_t without overflow"; the tensor is unchanged.
    u = kiln.tensor(np.zeros(4, np.uint8))
    mask = kiln.tensor(np.array([True] * 4))
    i8 = kiln.tensor(np.zeros(2, np.int8))
    cases = [(lambda: u.__setitem__(0, 300), "assignment: the value 300 does not fit in uint8"),
             (lambda: u.__setitem__(slice(None), -1), "the value -1 does not fit in uint8"),
             (lambda: u.__setitem__(0, float("inf")), "the value inf does not fit in uint8"),
             (lambda: u.__setitem__([0, 1], 300), "the value 300 does not fit in uint8"),
             (lambda: u.__setitem__(u == 0, -5), "the value -5 does not fit in uint8"),
             (lambda: kiln.mint.masked_fill(u, mask, 256), "MaskedFill: the value 256 does not fit"),
             (lambda: kiln.mint.pad(u, [1, 1], "constant", 300), "Pad: the value 300 does not fit"),
             (lambda: kiln.mint.where(kiln.tensor([True, False]), i8, 1000),
              "Where: the value 1000 does not fit in int8")]
    for call, message in cases:
        with raises(kiln.KilnValueError, match=message):
            call()
    np.testing.assert_array_equal(u.numpy(), np.zeros(4))
    u[0], u[1], u[2] = 255, 2.7, True  # in range: a fraction truncates, as a cast does
    np.testing.assert_array_equal(u.numpy(), [255, 2, 1, 0])
    np.testing.assert_array_equal(kiln.mint.masked_fill(u, mask, 7).numpy(), [7] * 4)


def test_python_numbers_a_tensor_cannot_hold_are_refused_not_wrapped():
    # kiln.tensor of Python numbers, and assignment of a list of them, as NumPy 2 and PyTorch:
    # [300, -1] as uint8 was [44, 255], NaN as int32 was -2**31.
    u = kiln.tensor(np.zeros(3, np.uint8))
    cases = [
        (lambda: kiln.tensor([300, -1], dtype=kiln.uint8), "the value -1 does not fit in uint8"),
        (lambda: kiln.tensor([7, 300], dtype=kiln.uint8), "the value 300 does not fit in uint8"),
        (lambda: kiln.tensor([float("nan")], dtype=kiln.int32), "the value nan does not fit"),
        (lambda: kiln.tensor([[1.5], [2.0**40]], dtype=kiln.int32),
         "the value 1099511627776.0 does not fit in int32"),
        (lambda: kiln.tensor(2**63), "the value 9223372036854775808 does not fit in int64"),
        (lambda: kiln.tensor([1, 2**64]), "the value 18446744073709551616 does not fit in int64"),
        # NumPy makes float64 of [2**63, 1] (int64 and uint64 mixed): it was float32 here.
        (lambda: kiln.tensor([2**63, 1]), "the value 9223372036854775808 does not fit in int64"),
        (lambda: kiln.tensor([[1], [2**63]]), "the value 9223372036854775808 does not fit"),
        (lambda: kiln.tensor([-2**63 - 1, 0]), "the value -9223372036854775809 does not fit"),
        (lambda: kiln.tensor([[1, 2], [3]]), "tensor: setting an array element with a sequence"),
        (lambda: u.__setitem__(slice(0, 2), [300, -1]), "the value -1 does not fit in uint8"),
    ]
    for call, message in cases:
        with raises(kiln.KilnValueError, match=message):
            call()
    # With a float among them, or a floating dtype, they are floats.
    assert kiln.tensor([2**63, 1.5]).dtype == kiln.float32
    assert kiln.tensor([2**63, 1], dtype=kiln.float64).tolist() == [2.0**63, 1.0]
    with raises(kiln.KilnTypeError, match="expected numbers .* got <class 'NoneType'>"):
        kiln.tensor([1, None])
    with raises(kiln.KilnTypeError, match="tensor: expected data .* got None"):
        kiln.tensor(None)  # was nanobind's "incompatible function arguments"
    np.testing.assert_array_equal(u.numpy(), [0, 0, 0])
    # In range: a fraction truncates and any number is a bool, as a cast; arrays cast as NumPy's
    # astype does.
    np.testing.assert_array_equal(kiln.tensor([2.7, -1, 127], dtype=kiln.int8).numpy(), [2, -1, 127])
    np.testing.assert_array_equal(kiln.tensor([300, 0.5, 0], dtype=kiln.dtype.bool).numpy(),
                                  [True, True, False])
    np.testing.assert_array_equal(kiln.tensor(np.array([300]), dtype=kiln.uint8).numpy(), [44])
    u[:2] = [255, 2.9]
    np.testing.assert_array_equal(u.numpy(), [255, 2, 0])
    # An int past int64 is a float where a float takes it: a floating dtype, a float beside it, a
    # floating tensor assigned into (as the operators take it).
    big = 2**70
    assert kiln.tensor([1.5, big]).tolist() == [1.5, np.float32(big)]
    assert kiln.tensor(big, dtype=kiln.float64).item() == float(big)
    assert kiln.tensor([2**63], dtype=kiln.float32).tolist() == [np.float32(2**63)]
    f = kiln.tensor([1.0, 2.0])
    f[0] = big
    assert f.tolist() == [np.float32(big), 2.0]
    with raises(kiln.KilnValueError, match="does not fit int64"):
        kiln.tensor([1, 2])[0] = big
    with raises(kiln.KilnTypeError, match="got <class 'str'>"):
        kiln.tensor([big, "a"])
    # Unsigned data that is not an array is what it is (da9cf22 refused every unsigned source).
    for source in (np.uint8(5), [np.uint8(5)], memoryview(b"\x05")):
        u8 = kiln.tensor(source)
        assert u8.dtype == kiln.uint8 and u8.numpy().ravel().tolist() == [5]


def test_format_spec_of_a_0d_tensor_formats_its_value():
    # f"{loss:.4f}" raised TypeError: unsupported format string.
    assert f"{kiln.tensor(0.123456):.4f}" == "0.1235"
    assert format(kiln.tensor(3), ">4") == "   3"
    assert f"{kiln.tensor([1.0, 2.0])}" == str(kiln.tensor([1.0, 2.0]))
    with pytest.raises(TypeError):
        format(kiln.tensor([1.0, 2.0]), ".2f")


def test_in_compares_every_element():
    # Python iterated rows: `3 in` a 2-d tensor raised "the truth value ... is ambiguous", and
    # `in` a 0-d tensor was "not iterable".
    t = kiln.tensor([[1, 2], [3, 4]])
    assert 3 in t and 5 not in t
    assert 1.0 in kiln.tensor(1.0)
    assert kiln.tensor([3, 4]) in t and kiln.tensor(9) not in t
    assert 1 not in kiln.tensor([], dtype=kiln.int64)
    with raises(kiln.KilnTypeError, match="expects a number or a tensor, got str"):
        "a" in t  # noqa: B015


def test_pytorchs_dtype_spellings_are_kilns():
    assert kiln.bool is kiln.bool_ is kiln.dtype.bool
    assert (kiln.float, kiln.double, kiln.half, kiln.long, kiln.int) == (
        kiln.float32, kiln.float64, kiln.float16, kiln.int64, kiln.int32)
    assert kiln.mint.zeros(2, dtype=kiln.bool).dtype == kiln.bool_
