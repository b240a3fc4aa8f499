"""State dicts, checkpoints and parameter vectors as PyTorch has them: load_state_dict of bfloat16
tensors of another library (read through DLPack) and of an old checkpoint's 1-element scalars
(kiln/nn/_state.py); kiln.save / kiln.load with NumPy scalars, file objects, and torch.save or
pickle files named as such (kiln/serialization.py); parameters_to_vector / vector_to_parameters
(kiln/nn/utils/convert_parameters.py). PyTorch, where it is installed, is the reference; without
it the same behaviour is checked against NumPy and closed forms."""

import io
import os
import pickle
import struct
import zipfile

import numpy as np
import pytest

import kiln
from conftest import raises
from kiln import nn
from kiln.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters

# ---------------------------------------------------------------------------------------------
# load_state_dict: bfloat16 of another library


class ForeignBFloat16:
    """A bfloat16 tensor of another library, as load_state_dict sees torch's: NumPy cannot read
    it, DLPack can (lent here by a kiln tensor). ``device`` is its DLPack device."""

    dtype = "otherlib.bfloat16"

    def __init__(self, values, device=(1, 0)):
        self._tensor = kiln.tensor(values, dtype=kiln.bfloat16)
        self._device = device

    def __dlpack__(self, **kwargs):
        return self._tensor.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._device


def test_load_state_dict_reads_another_librarys_bfloat16_through_dlpack():
    weight = [[1.5, -2.0, 0.25], [3.0, float("nan"), -0.5]]
    for dtype in (kiln.float32, kiln.bfloat16):
        lin = nn.Linear(3, 2, dtype=dtype)
        lin.load_state_dict({"weight": ForeignBFloat16(weight), "bias": ForeignBFloat16([1, 2])})
        assert lin.weight.dtype == dtype
        np.testing.assert_array_equal(lin.weight.to(kiln.float32).numpy(), weight)
        np.testing.assert_array_equal(lin.bias.to(kiln.float32).numpy(), [1.0, 2.0])


def test_a_bfloat16_that_dlpack_cannot_lend_is_a_dtype_error():
    lin = nn.Linear(3, 2)
    before = lin.weight.numpy().copy()
    with raises(kiln.DTypeError, match=r"'weight' is a bfloat16 ForeignBFloat16 that Kiln cannot "
                                       r"read through DLPack \(.*CPU.*\)"):
        lin.load_state_dict({"weight": ForeignBFloat16(np.zeros((2, 3)), device=(2, 0)),
                             "bias": np.zeros(2)})
    np.testing.assert_array_equal(lin.weight.numpy(), before)  # nothing was loaded


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_load_state_dict_of_a_torch_bfloat16_module(dtype):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    theirs = torch.nn.Linear(3, 2).to(torch.bfloat16)
    with torch.no_grad():
        bits = theirs.weight.view(torch.int16)
        bits[0, 0] = 0x7F81  # a signalling NaN, whose bits a float32 round trip would change
    expected = {name: value.to(getattr(torch, dtype))
                for name, value in theirs.state_dict().items()}
    # The state dict's tensors, and the Parameters themselves (which require grad).
    for state in (theirs.state_dict(), dict(theirs.named_parameters())):
        ours = nn.Linear(3, 2, dtype=getattr(kiln, dtype))
        ours.load_state_dict(state)
        for name, value in expected.items():
            loaded = torch.from_dlpack(getattr(ours, name).detach())
            assert loaded.dtype == value.dtype
            if dtype == "bfloat16":
                assert torch.equal(loaded.view(torch.int16), value.view(torch.int16))
            else:
                assert torch.allclose(loaded, value, equal_nan=True, rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# load_state_dict: an old checkpoint's 1-element scalars


def bn_state(**changes):
    state = {name: value.numpy() for name, value in nn.BatchNorm1d(2).state_dict().items()}
    state.update(changes)
    return state


def test_a_one_element_vector_loads_into_a_0d_buffer():
    bn = nn.BatchNorm1d(2)
    bn.load_state_dict(bn_state(num_batches_tracked=np.array([3])))
    assert bn.num_batches_tracked.shape == () and bn.num_batches_tracked.item() == 3
    bn.load_state_dict(bn_state(num_batches_tracked=kiln.tensor([5])))
    assert bn.num_batches_tracked.shape == () and bn.num_batches_tracked.item() == 5


@pytest.mark.parametrize("name, value, shape, expected", [
    ("num_batches_tracked", np.array([3, 4]), [2], []),  # more than one element
    ("num_batches_tracked", np.zeros((1, 1), np.int64), [1, 1], []),  # not 1-d
    ("num_batches_tracked", np.zeros(0, np.int64), [0], []),
    ("running_mean", np.float32(1.0), [], [2]),  # the other way round
])
def test_other_shape_mismatches_stay_errors(name, value, shape, expected):
    bn = nn.BatchNorm1d(2)
    with raises(kiln.ShapeError, match=rf"'{name}' has shape {shape} in the state dict, expected "
                                       rf"{expected}".replace("[", r"\[").replace("]", r"\]")):
        bn.load_state_dict(bn_state(**{name: value}))
    assert bn.num_batches_tracked.item() == 0


def test_one_element_scalars_as_pytorch_takes_them():
    torch = pytest.importorskip("torch")
    theirs, ours = torch.nn.BatchNorm1d(2), nn.BatchNorm1d(2)
    state = {name: torch.from_numpy(value) for name, value in bn_state().items()}
    state["num_batches_tracked"] = torch.tensor([7])
    theirs.load_state_dict(state)
    ours.load_state_dict(state)
    assert ours.num_batches_tracked.item() == theirs.num_batches_tracked.item() == 7
    state["num_batches_tracked"] = torch.tensor([7, 8])
    with pytest.raises(RuntimeError, match="size mismatch for num_batches_tracked"):
        theirs.load_state_dict(state)
    with raises(kiln.ShapeError, match="'num_batches_tracked' has shape"):
        ours.load_state_dict(state)


# ---------------------------------------------------------------------------------------------
# kiln.load of files that torch.save or pickle wrote

FOREIGN = r"is {}, not a Kiln checkpoint \(a safetensors file\): read it with torch.load"
ZIP = FOREIGN.format("a zip archive, as torch.save writes")
PICKLE = FOREIGN.format("a pickle, as pickle.dump and torch.save's legacy format write")


def test_load_names_a_zip_archive(tmp_path):
    path = tmp_path / "model.pt"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
    for load in (kiln.load, kiln.load_metadata):
        with raises(kiln.KilnValueError, match=ZIP):
            load(path)


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
@pytest.mark.parametrize("obj", [None, {"a": list(range(100))}])
def test_load_names_a_pickle(tmp_path, protocol, obj):
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps(obj, protocol=protocol))
    with raises(kiln.KilnValueError, match=PICKLE):
        kiln.load(path)


@pytest.mark.parametrize("legacy", [False, True])
def test_load_names_a_torch_save_file(tmp_path, legacy):
    torch = pytest.importorskip("torch")
    path = tmp_path / "model.pt"
    torch.save({"a": torch.ones(2)}, path, _use_new_zipfile_serialization=not legacy)
    with raises(kiln.KilnValueError, match=PICKLE if legacy else ZIP):
        kiln.load(path)
    # What the message says to do works.
    lin = nn.Linear(2, 1)
    torch.save(torch.nn.Linear(2, 1).state_dict(), path)
    lin.load_state_dict(torch.load(path))


def header_length_of(metadata_size, tmp_path):
    path = tmp_path / "x.safetensors"
    kiln.save({"w": kiln.tensor([1.0])}, path, metadata={"m": "x" * metadata_size})
    return struct.unpack("<Q", path.read_bytes()[:8])[0], path


def test_a_safetensors_file_that_begins_as_a_pickle_does(tmp_path):
    # A header of 640 bytes begins the file with 0x80 0x02, as a pickle of protocol 2 does.
    size = next(size for size in range(1000) if header_length_of(size, tmp_path)[0] == 640)
    _, path = header_length_of(size, tmp_path)
    text = path.read_bytes()
    assert text[:2] == b"\x80\x02"
    assert kiln.load(path)["w"].tolist() == [1.0]
    path.write_bytes(text[:100])
    with raises(kiln.KilnValueError, match="header length 640 exceeds the file"):
        kiln.load(path)
    path.write_bytes(text[:4])
    with raises(kiln.KilnValueError, match="too short for a safetensors file"):
        kiln.load(path)


# ---------------------------------------------------------------------------------------------
# kiln.save of NumPy scalars

SCALARS = [np.bool_(True), np.bool_(False), np.int8(-3), np.uint8(200), np.int32(7),
           np.int64(-2 ** 62), np.uint64(2 ** 64 - 1), np.float16(0.1), np.float32(0.1),
           np.float64(1e300), np.float32("inf"), np.float64("nan")]


@pytest.mark.parametrize("scalar", SCALARS, ids=lambda s: f"{type(s).__name__}({s})")
def test_numpy_scalars_save_and_load_as_python_numbers(tmp_path, scalar):
    path = tmp_path / "ckpt"
    kiln.save({"w": kiln.tensor([1.0]), "v": scalar, "nested": [scalar], "keyed": {scalar: 1}},
              path)
    loaded = kiln.load(path)
    expected = scalar.item()
    for value in (loaded["v"], loaded["nested"][0], next(iter(loaded["keyed"]))):
        assert type(value) is type(expected)
        assert value == expected or (np.isnan(expected) and np.isnan(value))


def test_other_numpy_scalars_are_named_with_their_module(tmp_path):
    with raises(kiln.KilnTypeError, match=r"checkpoint\['v'\] is a numpy.complex128; a "
                                          r"checkpoint holds tensors"):
        kiln.save({"v": np.complex128(1j)}, tmp_path / "x")
    with raises(kiln.KilnTypeError, match=r"checkpoint has a key of type numpy.complex64"):
        kiln.save({np.complex64(1j): 1}, tmp_path / "x")
    assert not (tmp_path / "x").exists()


# ---------------------------------------------------------------------------------------------
# kiln.save / kiln.load with file objects

def test_save_and_load_through_a_bytes_io_from_its_position():
    net = nn.Linear(3, 2)
    buffer = io.BytesIO()
    buffer.write(b"prefix")
    kiln.save({"model": net.state_dict(), "epoch": np.int64(3)}, buffer, metadata={"run": "7"})
    buffer.seek(len(b"prefix"))
    assert kiln.load_metadata(buffer) == {"run": "7"}
    buffer.seek(len(b"prefix"))
    checkpoint = kiln.load(buffer)
    assert not buffer.closed and buffer.tell() == len(buffer.getvalue())
    assert checkpoint["epoch"] == 3
    for name, value in net.state_dict().items():
        np.testing.assert_array_equal(checkpoint["model"][name].numpy(), value.numpy())


def test_save_and_load_through_open_files(tmp_path):
    path = tmp_path / "w.safetensors"
    with open(path, "wb") as f:
        kiln.save({"w": kiln.tensor([1.0, 2.0])}, f)
        assert not f.closed
    with open(path, "rb") as f:
        assert kiln.load(f)["w"].tolist() == [1.0, 2.0]
    assert kiln.load(path)["w"].tolist() == [1.0, 2.0]  # the same file as a path writes


def test_files_as_torch_writes_and_reads_them():
    torch = pytest.importorskip("torch")
    # The same calls as PyTorch's, with a buffer: torch.save(state, buffer); torch.load(buffer).
    buffer = io.BytesIO()
    torch.save({"w": torch.ones(2)}, buffer)
    buffer.seek(0)
    with raises(kiln.KilnValueError, match=ZIP):
        kiln.load(buffer)
    buffer = io.BytesIO()
    kiln.save({"w": kiln.tensor([1.0, 1.0])}, buffer)
    buffer.seek(0)
    assert kiln.load(buffer)["w"].tolist() == torch.ones(2).tolist()


class Unseekable(io.RawIOBase):
    def readable(self):
        return True

    def readinto(self, b):
        return 0


@pytest.mark.parametrize("call, error, match", [
    (lambda: kiln.save({"w": kiln.tensor([1.0])}, 3), kiln.KilnTypeError,
     r"kiln.save: expected a path \(str or os.PathLike\) or a binary file object with write\(\), "
     r"got int"),
    (lambda: kiln.load(object()), kiln.KilnTypeError,
     r"kiln.load: expected a path .* with read\(\), seek\(\), tell\(\), got object"),
    (lambda: kiln.load(io.StringIO("{}")), kiln.KilnTypeError,
     r"kiln.load: <StringIO> is open in text mode, expected a binary file \(open it with mode "
     r"'rb'\)"),
    (lambda: kiln.save({"w": kiln.tensor([1.0])}, io.StringIO()), kiln.KilnTypeError,
     r"kiln.save: <StringIO> is open in text mode, expected a binary file \(open it with mode "
     r"'wb'\)"),
    (lambda: kiln.load(Unseekable()), kiln.KilnValueError,
     r"kiln.load: <Unseekable> cannot seek, expected a file that can; read its bytes into an "
     r"io.BytesIO"),
])
def test_file_argument_errors(call, error, match):
    with raises(error, match=match):
        call()


def test_a_text_file_is_named(tmp_path):
    path = tmp_path / "w.safetensors"
    with open(path, "w") as f:
        with raises(kiln.KilnTypeError, match=f"{f.name} is open in text mode"):
            kiln.save({"w": kiln.tensor([1.0])}, f)
    assert os.path.getsize(path) == 0


# ---------------------------------------------------------------------------------------------
# parameters_to_vector / vector_to_parameters

def make_net():
    """An MLP whose parameters hold distinct values (26 in all), so that order shows."""
    net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    net.load_state_dict({name: np.arange(value.numel()).reshape(value.shape) + 100 * i
                         for i, (name, value) in enumerate(net.state_dict().items())})
    return net


def test_parameters_to_vector_flattens_in_order():
    net = make_net()
    vec = parameters_to_vector(net.parameters())
    expected = np.concatenate([p.numpy().ravel() for p in net.parameters()])
    assert vec.shape == (26,) and vec.dtype == kiln.float32
    np.testing.assert_array_equal(vec.numpy(), expected)
    # A new tensor, differentiable with respect to the parameters.
    kiln.mint.sum(vec * vec).backward()
    for p in net.parameters():
        np.testing.assert_array_equal(p.grad.numpy(), 2 * p.numpy())
    single = kiln.tensor([[1.0, 2.0]])
    out = parameters_to_vector(single)  # one tensor: one parameter
    out[...] = 0
    assert out.shape == (2,) and single.tolist() == [[1.0, 2.0]]


def test_vector_to_parameters_writes_in_place_in_each_dtype():
    net = make_net()
    params = list(net.parameters())
    vec = kiln.mint.arange(26, dtype=kiln.float64) * 0.5
    vector_to_parameters(vec, net.parameters())
    assert [p is q for p, q in zip(net.parameters(), params)] == [True] * 4
    np.testing.assert_array_equal(parameters_to_vector(params).numpy(), vec.numpy())
    assert all(p.dtype == kiln.float32 and p.requires_grad for p in params)
    vec[...] = 0  # the parameters have memory of their own
    assert parameters_to_vector(params).numpy().any()
    # Mixed dtypes: the vector in the promoted dtype, and back.
    half, full = kiln.tensor([0.5, 1.5], dtype=kiln.float16), kiln.tensor([[2.0, 3.0]])
    vec = parameters_to_vector([half, full])
    assert vec.dtype == kiln.float32 and vec.tolist() == [0.5, 1.5, 2.0, 3.0]
    vector_to_parameters(vec + 1, [half, full])
    assert half.dtype == kiln.float16 and half.tolist() == [1.5, 2.5]
    assert full.tolist() == [[3.0, 4.0]]


def test_vector_round_trip_as_pytorch():
    torch = pytest.importorskip("torch")
    net = make_net()
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    theirs.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in net.state_dict().items()})
    np.testing.assert_array_equal(
        parameters_to_vector(net.parameters()).detach().numpy(),
        torch.nn.utils.parameters_to_vector(theirs.parameters()).detach().numpy())
    vec = np.linspace(-1, 1, 26, dtype=np.float32)
    vector_to_parameters(kiln.tensor(vec), net.parameters())
    torch.nn.utils.vector_to_parameters(torch.from_numpy(vec), theirs.parameters())
    for (name, ours), theirs_value in zip(net.state_dict().items(), theirs.state_dict().values()):
        np.testing.assert_array_equal(ours.numpy(), theirs_value.numpy(), err_msg=name)


@pytest.mark.parametrize("call, error, match", [
    (lambda ps: vector_to_parameters(np.zeros(26), ps), kiln.KilnTypeError,
     "vector_to_parameters: vec must be a kiln tensor, got ndarray"),
    (lambda ps: vector_to_parameters(kiln.mint.zeros(2, 13), ps), kiln.ShapeError,
     r"vector_to_parameters: vec must be 1-d \(as parameters_to_vector makes it\), got shape "
     r"\[2, 13\]"),
    (lambda ps: vector_to_parameters(kiln.mint.zeros(27), ps), kiln.ShapeError,
     r"vector_to_parameters: vec has 27 elements, expected 26 \(the parameters' elements "
     r"together\)"),
    (lambda ps: vector_to_parameters(kiln.mint.zeros(3), ps[:1] + [np.zeros(3)]),
     kiln.KilnTypeError, r"vector_to_parameters: parameters\[1\] is a ndarray, expected a kiln "
                         r"tensor"),
    (lambda ps: parameters_to_vector([]), kiln.KilnValueError,
     "parameters_to_vector: expected at least one parameter, got none"),
    (lambda ps: parameters_to_vector(3), kiln.KilnTypeError,
     "parameters_to_vector: parameters must be a tensor or an iterable of tensors, got int"),
])
def test_vector_errors(call, error, match):
    net = make_net()
    before = parameters_to_vector(net.parameters()).tolist()
    with raises(error, match=match):
        call(list(net.parameters()))
    assert parameters_to_vector(net.parameters()).tolist() == before


# ---------------------------------------------------------------------------------------------
# clip_grad_norm_ with a tensor max_norm

def clip_case(max_norm, clip=kiln.nn.utils.clip_grad_norm_):
    """(total, gradients) of clipping the gradients [3, 4] and [12] (total norm 13)."""
    params = [kiln.tensor([1.0, 1.0]), kiln.tensor([1.0])]
    for p, grad in zip(params, ([3.0, 4.0], [12.0])):
        p.grad = kiln.tensor(grad)
    total = clip(params, max_norm)
    return total.item(), [p.grad.tolist() for p in params]


@pytest.mark.parametrize("max_norm", [kiln.tensor(6.5), kiln.tensor([6.5]),
                                      kiln.tensor(6.5, dtype=kiln.float64),
                                      kiln.tensor(6.5, dtype=kiln.float16)],
                         ids=["0d", "1-element", "float64", "float16"])
def test_clip_grad_norm_takes_a_tensor_max_norm(max_norm):
    total, grads = clip_case(max_norm)
    assert (total, grads) == clip_case(6.5)
    assert total == 13.0
    np.testing.assert_allclose(grads[0] + grads[1], [1.5, 2.0, 6.0], rtol=1e-6)
    assert clip_case(kiln.tensor(20))[1] == [[3.0, 4.0], [12.0]]  # an integer tensor


def test_clip_grad_norm_with_a_tensor_max_norm_as_pytorch():
    torch = pytest.importorskip("torch")
    theirs = [torch.ones(2), torch.ones(1)]
    for p, grad in zip(theirs, ([3.0, 4.0], [12.0])):
        p.grad = torch.tensor(grad)
    total = torch.nn.utils.clip_grad_norm_(theirs, torch.tensor(6.5))
    ours = clip_case(kiln.tensor(6.5))
    assert ours[0] == total.item()
    np.testing.assert_allclose(ours[1][0] + ours[1][1],
                               torch.cat([p.grad for p in theirs]).tolist(), rtol=1e-6)


def test_a_tensor_max_norm_in_a_jitted_step_and_the_function_form():
    params = [kiln.tensor([3.0, 4.0]), kiln.tensor([12.0])]
    for p in params:
        p.grad = p.clone()
    step = kiln.jit(lambda bound: kiln.nn.utils.clip_grad_norm_(params, bound))
    for bound in (6.5, 26.0):  # one trace, the bound an input
        for p in params:
            p.grad[...] = p  # in place: the compiled step reads these gradients
        assert step(kiln.tensor(bound)).item() == 13.0
        scale = min(bound / 13.0, 1.0)
        np.testing.assert_allclose(params[1].grad.tolist(), [12.0 * scale], rtol=1e-6)
    assert step.cache_info().misses == 1
    clipped, total = kiln.nn.utils.clip_grad_norm([p.detach() for p in params], kiln.tensor(6.5))
    assert total.item() == 13.0
    np.testing.assert_allclose(clipped[0].tolist(), [1.5, 2.0], rtol=1e-6)


@pytest.mark.parametrize("max_norm, error, match", [
    (kiln.tensor(True), kiln.KilnTypeError,
     "clip_grad_norm_: max_norm must be a real number or a real tensor, got a tensor of dtype "
     "bool"),
    (kiln.tensor([1.0, 2.0]), kiln.ShapeError,
     r"clip_grad_norm_: max_norm must be a number or a tensor of one element, got a tensor of "
     r"shape \[2\]"),
])
def test_tensor_max_norm_errors(max_norm, error, match):
    with raises(error, match=match):
        clip_case(max_norm)


def test_clip_grad_value_takes_a_tensor_bound():
    # PyTorch takes float(clip_value); a one-element tensor, unread, in each gradient's dtype.
    ours = [kiln.tensor([3.0, -4.0]), kiln.tensor([0.5, 2.0], dtype=kiln.float16)]
    for p in ours:
        p.grad = p.clone()
    kiln.nn.utils.clip_grad_value_(ours, kiln.tensor([1.0]))
    assert [p.grad.tolist() for p in ours] == [[1.0, -1.0], [0.5, 1.0]]
    assert ours[1].grad.dtype == kiln.float16
    clipped = kiln.nn.utils.clip_grad_value(kiln.tensor([2.0, -0.5]), kiln.tensor(1.0))
    assert clipped.tolist() == [1.0, -0.5]
    with raises(kiln.ShapeError, match="clip_grad_value_: clip_value must be a number or a "
                                       "tensor of one element"):
        kiln.nn.utils.clip_grad_value_(ours, kiln.tensor([1.0, 2.0]))
