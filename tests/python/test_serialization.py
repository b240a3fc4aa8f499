"""kiln.save / kiln.load: the safetensors bytes checked by hand, a round trip of every dtype,
a Cell's state dict through a file, the checks on malformed files, and (when the safetensors
package happens to be installed) reading each other's files."""

import io
import json
import os
import struct
import tracemalloc

import numpy as np
import pytest

import kiln
from conftest import ALL_DTYPES, random_array, raises
from kiln import nn

SAFETENSORS_NAMES = {
    kiln.float64: "F64", kiln.float32: "F32", kiln.float16: "F16", kiln.bfloat16: "BF16",
    kiln.int64: "I64", kiln.int32: "I32", kiln.int16: "I16", kiln.int8: "I8", kiln.uint8: "U8",
    kiln.bool_: "BOOL",
}


def read_header(path):
    blob = path.read_bytes()
    (length,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8:8 + length]), blob[8 + length:], length


def test_bytes_and_header_by_hand(tmp_path):
    path = tmp_path / "a.safetensors"
    a = kiln.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = kiln.tensor([7, -8], dtype=kiln.int16)
    kiln.save({"a": a, "b": b}, path, metadata={"epoch": "3"})
    header, data, length = read_header(path)
    assert (8 + length) % 8 == 0  # the header is padded to keep the data aligned
    assert header == {
        "__metadata__": {"epoch": "3"},
        "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
        "b": {"dtype": "I16", "shape": [2], "data_offsets": [24, 28]},
    }
    assert data == struct.pack("<6f", 1, 2, 3, 4, 5, 6) + struct.pack("<2h", 7, -8)
    assert kiln.load_metadata(path) == {"epoch": "3"}


def test_bfloat16_is_stored_as_its_16_bits(tmp_path):
    path = tmp_path / "bf16.safetensors"
    kiln.save({"x": kiln.tensor([1.0, -2.5, 3.140625], dtype=kiln.bfloat16)}, path)
    header, data, _ = read_header(path)
    assert header["x"] == {"dtype": "BF16", "shape": [3], "data_offsets": [0, 6]}
    expected = (np.array([1.0, -2.5, 3.140625], "<f4").view("<u4") >> 16).astype("<u2")
    assert data == expected.tobytes()


def test_bfloat16_signalling_nans_load_as_their_bits(tmp_path):
    # Loading went through float32, whose conversion quiets a signalling NaN (0x7F81 -> 0x7FC1):
    # a file read and written again differed.
    path = tmp_path / "nan.safetensors"
    bits = np.array([0x7F81, 0xFF81, 0x7FC0, 0x3F80], np.uint16)
    x = kiln._C._bits_as(kiln.tensor(bits.view(np.int16)), kiln.bfloat16)
    kiln.save({"x": x}, path)
    _, data, _ = read_header(path)
    assert data == bits.astype("<u2").tobytes()
    back = kiln.load(path)["x"]
    assert [b & 0xFFFF for b in kiln._C._bits_as(back, kiln.int16).tolist()] == bits.tolist()


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_round_trip_every_dtype(tmp_path, rng, dtype):
    path = tmp_path / "t.safetensors"
    tensors = {"matrix": kiln.tensor(random_array((3, 5), dtype, rng), dtype=dtype),
               "scalar": kiln.tensor(random_array((), dtype, rng), dtype=dtype),
               "empty": kiln.tensor(random_array((0, 4), dtype, rng), dtype=dtype),
               "view": kiln.tensor(random_array((4, 6), dtype, rng), dtype=dtype).T}
    kiln.save(tensors, path)
    header, _, _ = read_header(path)
    assert {v["dtype"] for v in header.values()} == {SAFETENSORS_NAMES[dtype]}
    loaded = kiln.load(path)
    assert list(loaded) == list(tensors)
    for name, tensor in tensors.items():
        assert loaded[name].dtype == dtype and loaded[name].shape == tensor.shape, name
        np.testing.assert_array_equal(loaded[name].numpy(), tensor.numpy(), err_msg=name)


def test_numpy_arrays_are_saved_too(tmp_path):
    path = tmp_path / "np.safetensors"
    kiln.save({"x": np.arange(6, dtype=np.int32).reshape(2, 3)}, path)
    x = kiln.load(path)["x"]
    assert x.dtype == kiln.int32
    np.testing.assert_array_equal(x.numpy(), np.arange(6).reshape(2, 3))


def test_cell_state_dict_through_a_file(tmp_path):
    path = tmp_path / "net.safetensors"
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.LayerNorm(8), nn.Linear(8, 2))
    kiln.save(net.state_dict(), path)
    other = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.LayerNorm(8), nn.Linear(8, 2))
    other.load_state_dict(kiln.load(path))
    x = kiln.tensor(np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32))
    np.testing.assert_array_equal(net(x).numpy(), other(x).numpy())


def write_raw(path, header, data=b""):
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


@pytest.mark.parametrize("header, data, message", [
    ({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, b"\0" * 4,
     "do not hold 8 bytes"),
    ({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 8,
     "4 bytes after the last tensor"),
    ({"x": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8,
     "starts at byte 4 of the data, expected 0"),
    ({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
      "y": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4,
     "a gap or an overlap"),
    ({"x": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}}, b"\0" * 8,
     "unknown dtype 'C64'"),
    ({"x": {"dtype": "F32", "shape": [1]}}, b"\0" * 4, "needs dtype, shape and data_offsets"),
    ({"x": [1, 2]}, b"", "needs dtype, shape and data_offsets"),
    ({"x": {"dtype": ["F32"], "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4,
     r"unknown dtype \['F32'\]"),
    # -2 * -2 elements would pass the size check
    ({"x": {"dtype": "F32", "shape": [-2, -2], "data_offsets": [0, 16]}}, b"\0" * 16,
     r"shape \[-2, -2\], expected a list of non-negative integers"),
    ({"x": {"dtype": "F32", "shape": [True], "data_offsets": [0, 4]}}, b"\0" * 4,
     r"shape \[True\], expected a list of non-negative integers"),
    ({"x": {"dtype": "F32", "shape": 4, "data_offsets": [0, 16]}}, b"\0" * 16,
     "shape 4, expected a list"),
    ({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0.0, 4.0]}}, b"\0" * 4,
     r"data_offsets \[0.0, 4.0\], expected \[begin, end\] of non-negative integers"),
    ({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 2, 4]}}, b"\0" * 4,
     r"data_offsets \[0, 2, 4\], expected \[begin, end\]"),
    ({"x": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}}, b"\0" * 4,
     r"data_offsets \[-4, 0\], expected \[begin, end\] of non-negative integers"),
    # 2**62 * 2**62 * 4 elements wrap around to 0 in int64
    ({"x": {"dtype": "F32", "shape": [2 ** 62, 2 ** 62, 4], "data_offsets": [0, 0]}}, b"",
     r"shape \[4611686018427387904, 4611686018427387904, 4\], which holds 2\*\*63 elements or "
     "more"),
    # a product of some 18,700 digits, past what Python prints
    ({"x": {"dtype": "F32", "shape": [2 ** 62] * 1000, "data_offsets": [0, 0]}}, b"",
     r"which holds 2\*\*63 elements or more"),
    # no elements, but a dimension no Kiln shape holds
    ({"x": {"dtype": "F32", "shape": [0, 2 ** 63], "data_offsets": [0, 0]}}, b"",
     r"shape \[0, 9223372036854775808\], expected a list of non-negative integers below 2\*\*63"),
    ({"__metadata__": ["a"], "x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}},
     b"\0" * 4, r"__metadata__ is \['a'\], expected an object of str -> str"),
    ({"__metadata__": {"epoch": 3}}, b"", "__metadata__ 'epoch' is 3, expected a str"),
    ([1, 2], b"", "not a JSON object"),
])
def test_malformed_files(tmp_path, header, data, message):
    path = tmp_path / "bad.safetensors"
    write_raw(path, header, data)
    with pytest.raises(kiln.KilnValueError, match=message):
        kiln.load(path)


@pytest.mark.parametrize("metadata, message", [
    (["a"], r"__metadata__ is \['a'\], expected an object of str -> str"),
    ("epoch 3", "__metadata__ is 'epoch 3', expected an object"),
    ({"epoch": "3", "lr": 0.1}, "__metadata__ 'lr' is 0.1, expected a str"),
    ({"tags": ["a"]}, r"__metadata__ 'tags' is \['a'\], expected a str"),
])
def test_malformed_metadata(tmp_path, metadata, message):
    path = tmp_path / "bad.safetensors"
    write_raw(path, {"__metadata__": metadata})
    with pytest.raises(kiln.KilnValueError, match=message):
        kiln.load_metadata(path)
    with pytest.raises(kiln.KilnValueError, match=message):
        kiln.load(path)


@pytest.mark.parametrize("text, message", [
    ('{"x": {"dtype": "F32", "shape": [' + "9" * 5000 + '], "data_offsets": [0, 0]}}',
     "the header holds an integer too long to read"),
    ("[" * 100000 + "]" * 100000, "the header nests arrays or objects too deeply to read"),
    ('{"__metadata__": {"k": ' + "[" * 100000 + "]" * 100000 + "}}",
     "the header nests arrays or objects too deeply to read"),
])
def test_headers_python_cannot_read(tmp_path, text, message):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(struct.pack("<Q", len(text)) + text.encode())
    with raises(kiln.KilnValueError, match=message):
        kiln.load(path)


@pytest.mark.parametrize("make", [
    lambda: kiln.mint.zeros(0, 2 ** 40, 2 ** 40),  # NumPy: "array is too big"
    lambda: kiln.tensor([2.5, -1.0]).reshape([1] * 64 + [2]),  # NumPy: 64 dimensions at most
], ids=["empty-huge", "65-dims"])
def test_shapes_numpy_refuses_round_trip(tmp_path, make):
    tensor = make()
    path = tmp_path / "t.safetensors"
    kiln.save({"x": tensor}, path)
    header, _, _ = read_header(path)
    assert header["x"]["shape"] == list(tensor.shape)
    loaded = kiln.load(path)["x"]
    assert loaded.shape == tensor.shape and loaded.dtype == tensor.dtype
    assert loaded.flatten().tolist() == tensor.flatten().tolist()


def test_truncated_and_garbage_files(tmp_path):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(b"\1\2\3")
    with pytest.raises(kiln.KilnValueError, match="too short"):
        kiln.load(path)
    path.write_bytes(struct.pack("<Q", 1000) + b"{}")
    with pytest.raises(kiln.KilnValueError, match="header length 1000 exceeds the file"):
        kiln.load(path)
    path.write_bytes(struct.pack("<Q", 3) + b"{x}")
    with pytest.raises(kiln.KilnValueError, match="not JSON"):
        kiln.load(path)


def _peak_python_memory(function, *args):
    """(function(*args), the peak of the memory Python and NumPy allocated while it ran)."""
    tracemalloc.start()
    try:
        return function(*args), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_load_metadata_reads_the_header_alone(tmp_path):
    # It read the whole file (and copied its data section): a checkpoint's gigabytes for a few
    # strings.
    path = tmp_path / "big.safetensors"
    kiln.save({"w": np.zeros(4 << 20, np.float32)}, path, metadata={"epoch": "3"})  # 16 MiB
    metadata, peak = _peak_python_memory(kiln.load_metadata, path)
    assert metadata == {"epoch": "3"}
    assert peak < 1 << 20


def test_load_reads_one_tensor_at_a_time(tmp_path):
    # It held the file's bytes, a copy of its data section and the tensors together (32 MiB of
    # bytes here); now a tensor's bytes, read, go into the tensor before the next are read.
    path = tmp_path / "big.safetensors"
    arrays = {f"w{i}": np.full(1 << 20, i, np.float32) for i in range(4)}  # 4 MiB each
    kiln.save(arrays, path)
    loaded, peak = _peak_python_memory(kiln.load, path)
    assert peak < 12 << 20
    for name, array in arrays.items():
        np.testing.assert_array_equal(loaded[name].numpy(), array)


def test_a_file_that_shrinks_while_it_is_read(tmp_path):
    # The header is checked against the file's size before the data is read: a file cut short
    # after that is an error, not NumPy's "buffer is smaller than requested size".
    path = tmp_path / "t.safetensors"
    kiln.save({"x": kiln.tensor([1.0, 2.0])}, path)
    text = path.read_bytes()

    class CutShort(io.BytesIO):
        """The file's bytes, cut 4 short after its size was taken (from its end's position)."""

        def seek(self, offset, whence=os.SEEK_SET):
            position = super().seek(offset, whence)
            return position + 4 if whence == os.SEEK_END else position

    with pytest.raises(kiln.KilnValueError, match=f"ended 4 bytes early, at byte {len(text) - 4} "
                                                  r"\(did it change while it was read\?\)"):
        kiln.load(CutShort(text[:-4]))


def test_save_argument_errors(tmp_path):
    with pytest.raises(kiln.KilnValueError, match="invalid tensor name"):
        kiln.save({"__metadata__": kiln.tensor([1.0])}, tmp_path / "x")
    with pytest.raises(kiln.KilnValueError, match="metadata must map str to str"):
        kiln.save({"a": kiln.tensor([1.0])}, tmp_path / "x", metadata={"epoch": 3})
    with raises(kiln.KilnTypeError, match=r"metadata is a list, expected a mapping"):
        kiln.save({"a": kiln.tensor([1.0])}, tmp_path / "x", metadata=[("epoch", "3")])
    with raises(kiln.KilnValueError, match="the metadata key 'kiln.structure' is Kiln's own"):
        kiln.save({"a": kiln.tensor([1.0])}, tmp_path / "x", metadata={"kiln.structure": "{}"})
    with raises(kiln.KilnTypeError, match=r"checkpoint\['a'\]\[1\] is a object; a checkpoint "
                                          r"holds tensors"):
        kiln.save({"a": [1.0, object()]}, tmp_path / "x")
    with raises(kiln.KilnTypeError, match=r"checkpoint\['a'\] has a key of type tuple"):
        kiln.save({"a": {(1, 2): kiln.tensor([1.0])}}, tmp_path / "x")
    looped = {}
    looped["self"] = looped
    with raises(kiln.KilnValueError, match="nests too deeply"):
        kiln.save(looped, tmp_path / "x")
    with raises(kiln.KilnValueError, match="holds a value JSON cannot write"):
        kiln.save({"epoch": 10 ** 5000}, tmp_path / "x")
    with raises(kiln.DTypeError, match="tensor 'a': cannot read a NumPy array of dtype .*uint32"):
        kiln.save({"a": np.zeros(2, np.uint32)}, tmp_path / "x")
    assert not (tmp_path / "x").exists()  # every check comes before the file is opened


def test_checkpoints_round_trip_with_their_structure(tmp_path):
    net = kiln.nn.Sequential(kiln.nn.Linear(3, 4), kiln.nn.BatchNorm1d(4))
    opt = kiln.optim.Adam(net.parameters(), lr=0.01)
    kiln.mint.sum(net(kiln.mint.randn(5, 3))).backward()
    opt.step()
    checkpoint = {"model": net.state_dict(), "optimizer": opt.state_dict(), "epoch": 3,
                  "best": float("inf"), "tags": ("a", None, True), "ids": {1: "x", 2.5: [0]},
                  "array": np.arange(3)}
    kiln.save(checkpoint, tmp_path / "ckpt", metadata={"run": "7"})
    back = kiln.load(tmp_path / "ckpt")
    assert list(back) == list(checkpoint)
    assert (back["epoch"], back["best"], back["tags"], back["ids"]) == (3, float("inf"),
                                                                         ("a", None, True),
                                                                         {1: "x", 2.5: [0]})
    np.testing.assert_array_equal(back["array"].numpy(), np.arange(3))
    for key, value in checkpoint["model"].items():
        np.testing.assert_array_equal(back["model"][key].numpy(), value.numpy())
    assert list(back["optimizer"]["state"]) == [0, 1, 2, 3]  # int keys stay ints
    assert back["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)  # tuples stay tuples
    fresh = kiln.optim.Adam(net.parameters(), lr=0.5)
    fresh.load_state_dict(back["optimizer"])
    assert fresh.param_groups[0]["lr"] == 0.01
    np.testing.assert_array_equal(fresh.state[0]["exp_avg"].numpy(),
                                  opt.state[0]["exp_avg"].numpy())
    assert kiln.load_metadata(tmp_path / "ckpt") == {"run": "7"}  # the structure is Kiln's
    # The tensors are a plain safetensors file's, under their paths.
    data = (tmp_path / "ckpt").read_bytes()
    header = json.loads(data[8:8 + struct.unpack("<Q", data[:8])[0]])
    assert "model.0.weight" in header and "optimizer.state.0.exp_avg" in header


def test_checkpoint_paths_that_collide_get_names_of_their_own(tmp_path):
    one, two, three = kiln.tensor([1.0]), kiln.tensor([2.0]), kiln.tensor([3.0])
    kiln.save({"a.b": one, "a": {"b": two}, "c": [three, 5]}, tmp_path / "x")
    back = kiln.load(tmp_path / "x")
    assert (back["a.b"].item(), back["a"]["b"].item(), back["c"][0].item()) == (1.0, 2.0, 3.0)
    assert back["c"][1] == 5
    kiln.save(one, tmp_path / "single")  # a tensor alone, as torch.save takes
    assert kiln.load(tmp_path / "single").item() == 1.0


def test_a_flat_mapping_is_written_without_structure(tmp_path):
    kiln.save({"w": kiln.tensor([1.0])}, tmp_path / "flat")
    assert b"kiln.structure" not in (tmp_path / "flat").read_bytes()
    assert list(kiln.load(tmp_path / "flat")) == ["w"]


@pytest.mark.parametrize("structure,message", [
    ("[", "not JSON"),
    ('{"tensor":"missing"}', "tensor 'missing' is not in the file, or named twice"),
    ('{"list":[{"tensor":"t"},{"tensor":"t"}]}', "tensor 't' is not in the file, or named twice"),
    ('{"value":1}', "tensor 't' is in none of its nodes"),
    ('{"set":[]}', "unknown node 'set'"),
    ('{"dict":[[[1],{"value":1}]]}', r"expected \[key, node\] pairs"),
    ('{"value":1,"list":[]}', "expected a node of one key"),
    ('{"tensor":["t"]}', r"tensor \['t'\] is not in the file"),
    ('{"dict":[["a",{"tensor":"t"}],["a",{"value":1}]]}', "key 'a' appears twice"),
    ('{"list":[{"tensor":"t"},{"value":' + "9" * 5000 + '}]}',
     "it holds an integer too long to read"),
])
def test_malformed_checkpoint_structures(tmp_path, structure, message):
    kiln.save({"t": kiln.tensor([1.0])}, tmp_path / "x", metadata={"other": "1"})
    data = (tmp_path / "x").read_bytes()
    length = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + length])
    header["__metadata__"] = {"kiln.structure": structure}
    text = json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % 8)
    (tmp_path / "x").write_bytes(struct.pack("<Q", len(text)) + text + data[8 + length:])
    with raises(kiln.KilnValueError, match=f"kiln.structure is malformed: {message}"):
        kiln.load(tmp_path / "x")


def test_cross_read_with_the_safetensors_package(tmp_path, rng):
    numpy_io = pytest.importorskip("safetensors.numpy")
    arrays = {"f": rng.standard_normal((2, 3)).astype(np.float32),
              "h": rng.standard_normal(4).astype(np.float16),
              "i": rng.integers(-5, 5, size=(3,)).astype(np.int64),
              "b": rng.random(5) > 0.5}
    ours = tmp_path / "ours.safetensors"
    kiln.save({k: kiln.tensor(v) for k, v in arrays.items()}, ours)
    theirs = numpy_io.load_file(str(ours))
    for k, v in arrays.items():
        np.testing.assert_array_equal(theirs[k], v)
    other = tmp_path / "theirs.safetensors"
    numpy_io.save_file(arrays, str(other))
    loaded = kiln.load(other)
    for k, v in arrays.items():
        np.testing.assert_array_equal(loaded[k].numpy(), v)
