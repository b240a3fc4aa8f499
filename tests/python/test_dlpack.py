"""DLPack both ways: Tensor.__dlpack__ / __dlpack_device__ and kiln.from_dlpack, zero-copy with
NumPy and (when installed) PyTorch."""

import gc

import numpy as np
import pytest

import kiln
from conftest import ALL_DTYPES, assert_close, numpy_dtype, raises, random_array

mint = kiln.mint
NUMPY_DTYPES = [d for d in ALL_DTYPES if d != kiln.bfloat16]  # NumPy has no bfloat16


def views(base):
    """A contiguous tensor and non-contiguous views of it (all of them 2-d or less)."""
    return {
        "contiguous": base,
        "transposed": base.T,
        "strided": base.slice(1, 0, base.shape[1], 2),
        "row": base.select(0, 1),
        "expanded": base.select(0, 0).unsqueeze(0).expand(3, base.shape[1]),
    }


# ---- kiln -> NumPy ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_numpy_from_dlpack_shares_memory(dtype, rng):
    t = kiln.tensor(random_array((3, 4), dtype, rng), dtype=dtype)
    a = np.from_dlpack(t)
    assert a.dtype == numpy_dtype(dtype)
    assert a.ctypes.data == t.data_ptr()
    assert_close(t, a)
    a[1, 2] = a[0, 0] if dtype == kiln.bool_ else 7
    assert t.numpy()[1, 2] == a[1, 2]  # writes show through


@pytest.mark.parametrize("name", ["contiguous", "transposed", "strided", "row", "expanded"])
def test_numpy_from_dlpack_keeps_strides(name, rng):
    base = kiln.tensor(random_array((4, 6), kiln.float32, rng))
    t = views(base)[name]
    a = np.from_dlpack(t)
    assert a.shape == t.shape
    assert a.strides == tuple(s * 4 for s in t.stride())
    assert a.ctypes.data == t.data_ptr()
    np.testing.assert_array_equal(a, t.numpy())


@pytest.mark.parametrize("shape", [(), (0,), (2, 0, 3)])
def test_numpy_from_dlpack_handles_0d_and_empty(shape):
    t = mint.ones(*shape, dtype=kiln.int32) if shape else mint.full((), 5, dtype=kiln.int32)
    a = np.from_dlpack(t)
    assert a.shape == shape and a.dtype == np.int32
    np.testing.assert_array_equal(a, t.numpy())


def test_export_keeps_the_tensor_alive():
    t = mint.arange(10.0)
    a = np.from_dlpack(t)
    del t
    gc.collect()
    np.testing.assert_array_equal(a, np.arange(10.0, dtype=np.float32))


def test_numpy_copy_true_makes_a_copy():
    t = mint.arange(4.0)
    a = np.from_dlpack(t, copy=True)
    assert a.ctypes.data != t.data_ptr()
    a[0] = 9
    assert t.numpy()[0] == 0


def test_dlpack_device_is_the_cpu():
    assert mint.zeros(2).__dlpack_device__() == (1, 0)


def test_dlpack_capsule_versions():
    t = mint.zeros(3)
    assert "dltensor" in repr(t.__dlpack__()) and "versioned" not in repr(t.__dlpack__())
    assert "dltensor_versioned" in repr(t.__dlpack__(max_version=(1, 0)))
    assert "dltensor_versioned" in repr(t.__dlpack__(max_version=(1, 1), dl_device=(1, 0),
                                                      copy=False, stream=None))
    assert "versioned" not in repr(t.__dlpack__(max_version=(0, 8)))


@pytest.mark.parametrize("kwargs, error, match", [
    ({"stream": 1}, BufferError, "stream must be None for CPU tensors"),
    ({"dl_device": (2, 0)}, BufferError, r"kiln tensors live on the CPU \(1, 0\), got dl_device"),
    ({"copy": "yes"}, TypeError, "copy must be True, False or None"),
    ({"max_version": 1}, TypeError, "max_version must be None or tuple"),
])
def test_dlpack_rejects_bad_arguments(kwargs, error, match):
    with raises(error, match=match):
        mint.zeros(2).__dlpack__(**kwargs)


def test_dlpack_arguments_are_keyword_only():
    with raises(TypeError):
        mint.zeros(2).__dlpack__(None)


def test_tensor_without_memory_cannot_be_exported():
    with raises(kiln.KilnError):
        np.from_dlpack(kiln.Tensor())


# ---- NumPy -> kiln ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_from_dlpack_numpy_shares_memory(dtype, rng):
    a = random_array((2, 5), dtype, rng)
    t = kiln.from_dlpack(a)
    assert t.dtype == dtype and t.shape == (2, 5)
    assert t.data_ptr() == a.ctypes.data
    assert_close(t, a)
    a[0, 0] = a[1, 1]
    assert t.numpy()[0, 0] == a[1, 1]


@pytest.mark.parametrize("make", [lambda a: a.T, lambda a: a[:, ::2], lambda a: a[1],
                                  lambda a: np.broadcast_to(a[0], (3, 6)), lambda a: a[0, 0, ...]])
def test_from_dlpack_numpy_views_keep_strides(make):
    a = make(np.arange(24.0).reshape(4, 6))
    t = kiln.from_dlpack(a)
    assert t.shape == a.shape
    assert t.stride() == tuple(s // 8 for s in a.strides)
    assert t.data_ptr() == a.ctypes.data
    np.testing.assert_array_equal(t.numpy(), a)


def test_from_dlpack_accepts_read_only_and_empty_arrays():
    a = np.arange(5, dtype=np.int16)
    a.flags.writeable = False
    np.testing.assert_array_equal(kiln.from_dlpack(a).numpy(), a)
    assert kiln.from_dlpack(np.zeros((0, 3))).shape == (0, 3)


def test_from_dlpack_keeps_the_producer_alive():
    a = np.arange(6, dtype=np.int64)
    t = kiln.from_dlpack(a)
    del a
    gc.collect()
    np.testing.assert_array_equal(t.numpy(), np.arange(6))


def test_from_dlpack_of_a_kiln_tensor_shares_storage():
    x = kiln.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=kiln.bfloat16)
    y = kiln.from_dlpack(x.T)
    assert y.dtype == kiln.bfloat16 and y.shape == (2, 2)
    assert y.data_ptr() == x.data_ptr()
    np.testing.assert_array_equal(y.numpy(), x.numpy().T)


def test_from_dlpack_errors():
    with raises(kiln.KilnTypeError, match="from_dlpack: expected an object with __dlpack__"):
        kiln.from_dlpack([1, 2, 3])
    with raises(kiln.DTypeError, match="from_dlpack: expected a dtype Kiln supports"):
        kiln.from_dlpack(np.zeros(2, np.complex64))
    with raises(kiln.KilnValueError, match="from_dlpack: expected non-negative strides"):
        kiln.from_dlpack(np.arange(4.0)[::-1])


def test_from_dlpack_rejects_non_cpu_devices():
    class OnGpu:
        def __dlpack__(self, **kwargs):
            raise AssertionError("must not be called")

        def __dlpack_device__(self):
            return (2, 0)

    with raises(kiln.KilnValueError, match=r"expected a CPU array \(DLPack device 1\)"):
        kiln.from_dlpack(OnGpu())


def test_from_dlpack_passes_the_producers_error_through():
    # Each came out as KilnTypeError "did not give a usable DLPack tensor" (a bad device tuple as
    # a bare RuntimeError: std::bad_cast).
    class Refusing:
        def __init__(self, device):
            self.device = device

        def __dlpack__(self, **kwargs):
            raise BufferError("producer: not today")

        def __dlpack_device__(self):
            return self.device

    with pytest.raises(BufferError, match="producer: not today"):
        kiln.from_dlpack(Refusing((1, 0)))
    with pytest.raises(BufferError, match="native byte order"):
        kiln.from_dlpack(np.ones(3, ">f4"))
    with raises(kiln.KilnTypeError, match=r"__dlpack_device__\(\) returned \('x', 0\), expected "
                                          r"\(device type, device id\)"):
        kiln.from_dlpack(Refusing(("x", 0)))
    x = kiln.tensor(np.ones((2, 3), np.float32))
    with raises(kiln.KilnIndexError, match="Gather: index 7 is out of bounds"):
        kiln.from_dlpack(kiln.mint.gather(x, 1, kiln.tensor(np.array([[0, 1, 7]], np.int64))))


# ---- PyTorch (when installed) ----------------------------------------------------------------


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_torch_from_dlpack_shares_memory(torch, dtype):
    t = mint.ones(3, 4, dtype=dtype)
    p = torch.from_dlpack(t)
    assert p.shape == (3, 4)
    assert str(p.dtype) == "torch." + ("bool" if dtype == kiln.bool_ else dtype.name)
    assert p.data_ptr() == t.data_ptr()
    p[0, 0] = 0
    assert t.numpy()[0, 0] == 0


def test_torch_from_dlpack_keeps_strides(torch):
    base = mint.arange(12.0).reshape(3, 4)
    p = torch.from_dlpack(base.T)
    assert p.stride() == base.T.stride()
    np.testing.assert_array_equal(p.numpy(), base.numpy().T)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "int8",
                                   "uint8", "bool"])
def test_from_dlpack_torch_shares_memory(torch, dtype):
    p = torch.arange(6).reshape(2, 3).to(getattr(torch, dtype))
    t = kiln.from_dlpack(p)
    assert t.dtype.name == dtype and t.shape == (2, 3)
    assert t.data_ptr() == p.data_ptr()
    p.zero_()
    assert not t.numpy().any()


def test_from_dlpack_torch_views_and_lifetime(torch):
    p = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()
    t = kiln.from_dlpack(p)
    assert t.stride() == p.stride()
    expected = p.numpy().copy()
    del p
    gc.collect()
    np.testing.assert_array_equal(t.numpy(), expected)


def test_read_only_memory_is_never_shared(tmp_path):
    # Kiln's tensors are all writable: writing through one that shared read-only memory changed an
    # immutable bytes object (the interpreter's constant) or crashed on a read-only mapping.
    frozen = bytes(16)
    ro = np.frombuffer(frozen, dtype=np.float32)
    with raises(kiln.KilnValueError, match="from_numpy: the array is read-only"):
        kiln.from_numpy(ro)
    t = kiln.from_dlpack(ro)  # a copy, as the array API standard lets a consumer make
    t += 1
    assert frozen == bytes(16) and t.tolist() == [1.0] * 4
    path = tmp_path / "ro.bin"
    path.write_bytes(bytes(16))
    mapped = np.memmap(path, dtype=np.float32, mode="r")
    m = kiln.from_dlpack(mapped)
    m += 1
    assert np.array_equal(mapped, np.zeros(4)) and m.tolist() == [1.0] * 4
    # A read-only view of writable memory (what broadcast_to gives) is still shared.
    a = np.arange(4.0)
    shared = kiln.from_numpy(np.broadcast_to(a, (2, 4)))
    a[0] = 7
    assert shared.numpy()[1, 0] == 7
    # So is sliding_window_view's, whose chain of bases passes through a non-array.
    windows = kiln.from_numpy(np.lib.stride_tricks.sliding_window_view(a, 3))
    a[1] = 8
    assert windows.tolist() == [[7, 8, 2], [8, 2, 3]]


class _Forwarding:
    """A DLPack producer that is no NumPy array: it forwards to the one it wraps."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_read_only_flag_of_other_producers_is_honoured():
    # DLPack 1.0 marks read-only memory with a flag; any producer's, not only NumPy's, is copied.
    frozen = np.arange(4.0)
    frozen.flags.writeable = False
    t = kiln.from_dlpack(_Forwarding(frozen))
    t += 1
    assert frozen.tolist() == [0, 1, 2, 3] and t.tolist() == [1, 2, 3, 4]
    writable = np.arange(4.0)
    shared = kiln.from_dlpack(_Forwarding(writable))
    shared += 1
    assert shared.tolist() == [1, 2, 3, 4] and writable.tolist() == [1, 2, 3, 4]


def test_copying_conversions_take_any_layout():
    reversed_ = np.arange(4.0)[::-1]
    field = np.zeros(3, dtype=[("a", "<f4"), ("b", "u1")])["a"]  # 5-byte strides
    field[:] = [1, 2, 3]
    np.testing.assert_array_equal(kiln.tensor(reversed_).numpy(), reversed_)
    np.testing.assert_array_equal(kiln.tensor(field).numpy(), [1, 2, 3])
    np.testing.assert_array_equal(kiln.mint.add(kiln.tensor([1.0] * 4), reversed_).numpy(),
                                  reversed_ + 1)
    assert kiln.tensor(np.array(2.5)).shape == ()  # 0-d stays 0-d
    with raises(kiln.KilnValueError, match="a stride of 5 bytes is no multiple of the item size"):
        kiln.from_numpy(field)
    with raises(kiln.KilnTypeError, match="from_numpy: expected a NumPy array, got list"):
        kiln.from_numpy([1.0])
