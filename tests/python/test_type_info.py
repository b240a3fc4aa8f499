"""kiln.finfo / kiln.iinfo (a dtype's limits, as torch.finfo / torch.iinfo) and kiln.is_tensor,
against NumPy's limits (bfloat16's from its layout) and, where installed, PyTorch's."""

import numpy as np
import pytest

import kiln
from conftest import raises

FLOATING = ["float16", "bfloat16", "float32", "float64"]
INTEGER = ["int8", "uint8", "int16", "int32", "int64"]


@pytest.mark.parametrize("name", FLOATING)
def test_finfo_gives_the_limits_of_a_floating_dtype(name):
    info = kiln.finfo(getattr(kiln, name))
    if name == "bfloat16":  # float32's exponent, 8 bits of significand
        bits, eps, tiny, resolution = 16, 2.0 ** -7, 2.0 ** -126, 0.01
        largest = float(np.float32(np.frombuffer(np.uint32(0x7F7F0000).tobytes(), np.float32)[0]))
    else:
        ref = np.finfo(getattr(np, name))
        bits, eps, tiny, largest = ref.bits, float(ref.eps), float(ref.tiny), float(ref.max)
        resolution = 10.0 ** -ref.precision
    assert (info.bits, info.eps, info.max, info.min) == (bits, eps, largest, -largest)
    assert info.tiny == info.smallest_normal == tiny
    assert info.resolution == pytest.approx(resolution) and info.dtype == name
    # The limits are the dtype's own: max and tiny survive a round trip through a tensor.
    values = kiln.tensor([info.max, info.tiny, 1.0 + info.eps], dtype=getattr(kiln, name))
    assert values.to(kiln.float64).tolist() == [info.max, info.tiny, 1.0 + info.eps]


def test_finfo_defaults_to_float32_and_prints_as_pytorch():
    assert kiln.finfo().dtype == "float32" and kiln.finfo().eps == 2.0 ** -23
    assert repr(kiln.finfo()) == (
        "finfo(resolution=1e-06, min=-3.40282e+38, max=3.40282e+38, eps=1.19209e-07, "
        "smallest_normal=1.17549e-38, tiny=1.17549e-38, dtype=float32)")
    assert repr(kiln.iinfo(kiln.int32)) == "iinfo(min=-2.14748e+09, max=2.14748e+09, dtype=int32)"


@pytest.mark.parametrize("name", INTEGER)
def test_iinfo_gives_the_limits_of_an_integer_dtype(name):
    info, ref = kiln.iinfo(getattr(kiln, name)), np.iinfo(getattr(np, name))
    assert (info.bits, info.min, info.max, info.dtype) == (ref.bits, int(ref.min), int(ref.max),
                                                            name)
    assert isinstance(info.max, int)


@pytest.mark.parametrize("call, message", [
    (lambda: kiln.finfo(kiln.int32), "finfo: expected a floating-point dtype, got int32"),
    (lambda: kiln.finfo("float32"), "finfo: expected a kiln dtype, got str"),
    (lambda: kiln.iinfo(kiln.float32), "iinfo: expected an integer dtype .not bool., got float32"),
    (lambda: kiln.iinfo(kiln.bool), "iinfo: expected an integer dtype .not bool., got bool"),
    (lambda: kiln.iinfo(None), "iinfo: expected a kiln dtype, got NoneType"),
])
def test_limits_of_another_kind_of_dtype_are_type_errors(call, message):
    with raises(kiln.KilnTypeError, match=message):
        call()


@pytest.mark.parametrize("name", FLOATING + INTEGER)
def test_limits_match_torch(torch, name):
    ours, theirs = (kiln.finfo, torch.finfo) if name in FLOATING else (kiln.iinfo, torch.iinfo)
    a, b = ours(getattr(kiln, name)), theirs(getattr(torch, name))
    fields = ["bits", "max", "min", "dtype"] + (
        ["eps", "tiny", "smallest_normal", "resolution"] if name in FLOATING else [])
    assert {f: getattr(a, f) for f in fields} == {f: getattr(b, f) for f in fields}
    assert repr(a) == repr(b)


def test_is_tensor():
    assert kiln.is_tensor(kiln.mint.ones(2))
    assert kiln.is_tensor(kiln.nn.Parameter(kiln.mint.ones(1)))
    assert not kiln.is_tensor(np.ones(2)) and not kiln.is_tensor(1.0) and not kiln.is_tensor(None)
