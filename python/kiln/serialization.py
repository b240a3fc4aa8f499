"""kiln.save / kiln.load: tensors, and checkpoints holding them, to and from a file in the
safetensors format.

    kiln.save(net.state_dict(), "mlp.safetensors")
    net.load_state_dict(kiln.load("mlp.safetensors"))
    kiln.save({"w": w}, "w.safetensors", metadata={"epoch": "3"})
    kiln.save({"model": net.state_dict(), "optimizer": opt.state_dict(), "epoch": 3}, "ckpt")
    checkpoint = kiln.load("ckpt"); opt.load_state_dict(checkpoint["optimizer"])
    buffer = io.BytesIO(); kiln.save(net.state_dict(), buffer); buffer.seek(0)

``save(obj, path, metadata=None)`` takes a mapping of str -> kiln.Tensor (or NumPy array), which
it writes as a plain safetensors file, or a checkpoint: dicts, lists and tuples, nested, whose
leaves are tensors, NumPy arrays and plain values (int, float, bool, str, None; a NumPy bool,
integer or floating scalar is taken as the Python bool, int or float it is, and loads as one), as
PyTorch scripts give torch.save (Note [Checkpoints]; any other object is a KilnTypeError naming
where it is: pickle holds those). ``load(path)`` returns what was saved: a dict of str ->
kiln.Tensor in the file's order, or the checkpoint rebuilt (tensors as kiln.Tensor, NumPy arrays
included); ``load_metadata(path)`` returns the file's ``__metadata__`` (a dict of str -> str, {}
if none; without the checkpoint's structure).
``path`` is a path (str, bytes or os.PathLike), which is opened and closed, or, as torch.save and
torch.load take, a binary file object (open(..., "wb"), io.BytesIO), which is used from its
position (``load`` reads one file from there to its end) and left open: ``save`` needs ``write``;
``load`` and ``load_metadata`` need ``read``, ``seek`` and ``tell`` (a file that cannot seek, such
as a pipe, is a KilnValueError: read it into an io.BytesIO first). Anything else, or a file open
in text mode, is a KilnTypeError.
Files are read and written by this module alone (NumPy for the bytes), and are compatible with
the ``safetensors`` package of Hugging Face in both directions. A file that torch.save or pickle
wrote (a zip archive, or a pickle) is not one: ``load`` says so, and that torch.load reads it.

The format (https://github.com/huggingface/safetensors, "Format"):

    bytes 0..8         N, the header's length: an unsigned 64-bit little-endian integer
    bytes 8..8+N       the header: a UTF-8 JSON object
                       {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
                        ..., "__metadata__": {"key": "value", ...}}     (__metadata__ optional)
                       padded with spaces so that 8 + N is a multiple of 8
    bytes 8+N..        the data: each tensor's elements in row-major (C) order, little-endian,
                       at [8 + N + begin, 8 + N + end) of the file; the tensors tile the data
                       section without gaps or overlaps

dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL (one byte, 0 or 1), Kiln's ten dtypes. Kiln
writes the tensors in the mapping's order. ``load`` checks all of the above and raises
KilnValueError naming the problem (a truncated file, a bad header, an unknown dtype, a shape or
offsets that are not lists of integers in [0, 2**63), a shape of 2**63 elements or more, offsets
that do not match the shape or leave gaps, a ``__metadata__`` that is not an object of str ->
str, a header nested too deeply or with integers too long for Python to read); it checks the
whole header before it reads any data, then reads one tensor's bytes at a time.
``load_metadata`` reads the header alone and checks its length, its JSON and ``__metadata__``,
not the tensors' entries or data.
Any shape Kiln holds is saved and loaded, including those NumPy refuses (more than 64
dimensions; no elements but huge other sizes). In ``save``, tensors or metadata that are not a
mapping are a KilnTypeError, metadata that does not map str to str a KilnValueError, and an
unsupported dtype a DTypeError naming the tensor.
"""

import collections.abc
import contextlib
import io
import json
import os
import struct

from . import _C
from ._device import check_usable
from ._numpy import np
from .errors import DTypeError, KilnTypeError, KilnValueError

__all__ = ["save", "load", "load_metadata"]

_dt = _C.dtype
# safetensors name -> (kiln dtype, little-endian NumPy dtype of the stored bytes)
_FORMATS = {
    "F64": (_dt.float64, "<f8"),
    "F32": (_dt.float32, "<f4"),
    "F16": (_dt.float16, "<f2"),
    "BF16": (_dt.bfloat16, "<u2"),  # the top 16 bits of a float32
    "I64": (_dt.int64, "<i8"),
    "I32": (_dt.int32, "<i4"),
    "I16": (_dt.int16, "<i2"),
    "I8": (_dt.int8, "i1"),
    "U8": (_dt.uint8, "u1"),
    "BOOL": (_dt.bool, "u1"),
}
_NAMES = {kiln_dtype: name for name, (kiln_dtype, _) in _FORMATS.items()}


def _to_bytes(key, tensor):
    """(safetensors dtype name, the elements of the tensor or NumPy array saved under ``key`` as
    little-endian bytes)."""
    if isinstance(tensor, np.ndarray):
        try:
            tensor = _C.tensor(tensor)
        except DTypeError as e:
            raise DTypeError(f"kiln.save: tensor {key!r}: {e}") from None
    elif not isinstance(tensor, _C.Tensor):
        raise KilnTypeError(f"kiln.save: tensor {key!r} is a {type(tensor).__name__}, expected a "
                            f"kiln.Tensor or a NumPy array (convert it with kiln.tensor)")
    name = _NAMES.get(tensor.dtype)
    if name is None:
        raise DTypeError(f"kiln.save: tensor {key!r} has dtype {tensor.dtype!r}, which has no "
                         f"safetensors name")
    # Flat, as the file holds it: NumPy refuses some shapes Kiln holds (see above). bfloat16,
    # which NumPy lacks, goes as its bits.
    flat = tensor.flatten()
    if name == "BF16":
        flat = _C._bits_as(flat, _C.dtype.int16)
    array = np.ascontiguousarray(flat.numpy()).astype(_FORMATS[name][1], copy=False)
    return name, array.tobytes()


def _check_mapping(value, what):
    if not isinstance(value, collections.abc.Mapping):
        raise KilnTypeError(f"kiln.save: {what} is a {type(value).__name__}, expected a mapping "
                            f"(a dict)")


# Note [Checkpoints]
# Training scripts save {"model": net.state_dict(), "optimizer": opt.state_dict(), "epoch": 3},
# which torch.save pickles. kiln.save writes such a checkpoint as a safetensors file still: its
# tensors under their paths ("model.fc.weight", "optimizer.state.0.exp_avg"; a path that two
# leaves would share gets a "~n" suffix), and its structure as JSON in the metadata key
# "kiln.structure", where each node is {"tensor": name}, {"value": v} (int, float, bool, str or
# None), {"list": [...]}, {"tuple": [...]} or {"dict": [[key, node], ...]} (keys of any of the
# plain types, as an optimizer's int parameter indices; in order). Other readers see the tensors;
# kiln.load rebuilds the checkpoint. A flat mapping of str -> tensor is written as before, with
# no structure, so a state_dict's file is the plain safetensors file other tools expect.
_STRUCTURE = "kiln.structure"
_PLAIN = (bool, int, float, str, type(None))


def _plain(value):
    """``value`` with a NumPy bool, integer or floating scalar (np.bool_, np.int64, np.float32)
    as the Python bool, int or float it is, which JSON writes and ``load`` gives back; any other
    value as it is."""
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return value.item()
    return value


def _type_name(value):
    """The name of ``value``'s type for messages, with its module unless it is a builtin (NumPy's
    bool prints as "numpy.bool", not as "bool")."""
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


def _is_flat(obj):
    """Whether ``obj`` is a mapping of str -> tensor (or NumPy array), saved without structure."""
    return isinstance(obj, collections.abc.Mapping) and all(
        isinstance(k, str) and isinstance(v, (_C.Tensor, np.ndarray)) for k, v in obj.items())


def _where(path):
    return "checkpoint" + "".join(f"[{key!r}]" for key in path)


def _flatten(checkpoint):
    """(structure, {name: tensor}) of a checkpoint (see Note [Checkpoints])."""
    tensors = {}

    def name_for(path):
        base = ".".join(str(key) for key in path) or "tensor"
        name, n = base, 1
        while name in tensors or name == "__metadata__":
            name, n = f"{base}~{n}", n + 1
        return name

    def walk(value, path):
        if isinstance(value, (_C.Tensor, np.ndarray)):
            name = name_for(path)
            tensors[name] = value
            return {"tensor": name}
        if isinstance(value, collections.abc.Mapping):
            for key in value:
                if not isinstance(_plain(key), _PLAIN):
                    raise KilnTypeError(f"kiln.save: {_where(path)} has a key of type "
                                        f"{_type_name(key)}; a checkpoint's keys are int, "
                                        f"float, bool, str or None")
            return {"dict": [[_plain(key), walk(item, path + (key,))]
                             for key, item in value.items()]}
        if isinstance(value, (list, tuple)):
            kind = "list" if isinstance(value, list) else "tuple"
            return {kind: [walk(item, path + (i,)) for i, item in enumerate(value)]}
        if isinstance(_plain(value), _PLAIN):
            return {"value": _plain(value)}
        raise KilnTypeError(f"kiln.save: {_where(path)} is a {_type_name(value)}; a checkpoint "
                            f"holds tensors, NumPy arrays, dicts, lists, tuples and int / float / "
                            f"bool / str / None values (pickle other objects; kiln.tensor "
                            f"converts data to a tensor)")

    try:
        structure = json.dumps(walk(checkpoint, ()), separators=(",", ":"))
    except RecursionError:
        raise KilnValueError("kiln.save: the checkpoint nests too deeply (or holds itself)") \
            from None
    except ValueError as e:  # an int with more digits than Python writes as text
        raise KilnValueError(f"kiln.save: the checkpoint holds a value JSON cannot write ({e})") \
            from None
    return structure, tensors


def _rebuilt(structure, tensors, where):
    """The checkpoint that ``structure`` (the JSON of Note [Checkpoints]) describes, holding
    ``tensors`` (by name), each exactly once."""
    used = set()

    def bad(what):
        return KilnValueError(f"kiln.load: {where}: {_STRUCTURE} is malformed: {what}")

    def build(node):
        if not (isinstance(node, dict) and len(node) == 1):
            raise bad(f"expected a node of one key, got {node!r}"[:200])
        ((kind, body),) = node.items()
        if kind == "tensor":
            if not isinstance(body, str) or body not in tensors or body in used:
                raise bad(f"tensor {body!r} is not in the file, or named twice")
            used.add(body)
            return tensors[body]
        if kind == "value" and isinstance(body, _PLAIN):
            return body
        if kind in ("list", "tuple") and isinstance(body, list):
            items = [build(item) for item in body]
            return items if kind == "list" else tuple(items)
        if kind == "dict" and isinstance(body, list):
            result = {}
            for pair in body:
                if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], _PLAIN)):
                    raise bad(f"expected [key, node] pairs, got {pair!r}"[:200])
                if pair[0] in result:
                    raise bad(f"key {pair[0]!r} appears twice in one dict"[:200])
                result[pair[0]] = build(pair[1])
            return result
        raise bad(f"unknown node {kind!r}")

    try:
        checkpoint = build(json.loads(structure))
    except json.JSONDecodeError as e:
        raise bad(f"not JSON ({e})") from None
    except RecursionError:
        raise bad("it nests too deeply to read") from None
    except ValueError as e:  # an integer with more digits than Python reads from text
        raise bad(f"it holds an integer too long to read ({e})") from None
    unused = [name for name in tensors if name not in used]
    if unused:
        raise bad(f"tensor {unused[0]!r} is in none of its nodes")
    return checkpoint


@contextlib.contextmanager
def _binary_file(path, mode, owner):
    """(file object, its name for messages) of ``path`` (see the module's documentation) for
    ``mode`` "rb" or "wb": a path opened here and closed on exit, or a file object as it is."""
    if isinstance(path, (str, bytes, os.PathLike)):
        with open(path, mode) as f:
            yield f, os.fspath(path)
        return
    needed = ("read", "seek", "tell") if mode == "rb" else ("write",)
    if not all(callable(getattr(path, method, None)) for method in needed):
        methods = ", ".join(f"{method}()" for method in needed)
        raise KilnTypeError(f"kiln.{owner}: expected a path (str or os.PathLike) or a binary file "
                            f"object with {methods}, got {type(path).__name__}")
    name = getattr(path, "name", None)
    name = name if isinstance(name, str) else f"<{type(path).__name__}>"
    if isinstance(path, io.TextIOBase):
        raise KilnTypeError(f"kiln.{owner}: {name} is open in text mode, expected a binary file "
                            f"(open it with mode {mode!r})")
    if mode == "rb" and callable(getattr(path, "seekable", None)) and not path.seekable():
        # The header comes first, then each tensor is read at its offset.
        raise KilnValueError(f"kiln.{owner}: {name} cannot seek, expected a file that can; read "
                             f"its bytes into an io.BytesIO and pass that")
    yield path, name


def save(obj, path, metadata=None):
    """Writes ``obj`` (a mapping of str -> tensor, or a checkpoint: see the module's
    documentation) to ``path`` (a path, or a binary file object written from its position and
    left open) in the safetensors format."""
    header, chunks, offset = {}, [], 0
    if metadata is not None:
        _check_mapping(metadata, "metadata")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise KilnValueError("kiln.save: metadata must map str to str")
        if _STRUCTURE in metadata:
            raise KilnValueError(f"kiln.save: the metadata key {_STRUCTURE!r} is Kiln's own (the "
                                 f"structure of a checkpoint)")
        header["__metadata__"] = dict(metadata)
    if _is_flat(obj):
        tensors = obj
    else:
        structure, tensors = _flatten(obj)
        header.setdefault("__metadata__", {})[_STRUCTURE] = structure
    for name, tensor in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise KilnValueError(f"kiln.save: invalid tensor name {name!r}")
        dtype, data = _to_bytes(name, tensor)
        header[name] = {"dtype": dtype, "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(8 + len(text)) % 8)
    with _binary_file(path, "wb", "save") as (f, _):
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in chunks:
            f.write(data)


def _read_exactly(f, size, where):
    """The next ``size`` bytes of the file ``f``; a KilnValueError if it ends first (a file that
    changed while it was read: its length was checked against the header before)."""
    data = f.read(size)
    if len(data) != size:
        raise KilnValueError(f"kiln.load: {where} ended {size - len(data)} bytes early, at byte "
                             f"{f.tell()} (did it change while it was read?)")
    return data


def _foreign_format(head):
    """What a file that begins with the bytes ``head`` is when torch.save or pickle wrote it, else
    None; asked only of a file that is no safetensors file. A zip archive begins with "PK", 3, 4;
    a pickle of protocol 2 to 5 with 0x80, the protocol and an opcode, which is never 0 (the
    opcode tells it from a safetensors header length such as 640, 0x80 0x02 0x00 ...: the third
    byte of a length below 64 KiB is 0)."""
    if head.startswith(b"PK\x03\x04"):
        return "a zip archive, as torch.save writes"
    if len(head) >= 3 and head[0] == 0x80 and 2 <= head[1] <= 5 and head[2] != 0:
        return "a pickle, as pickle.dump and torch.save's legacy format write"
    return None


def _not_safetensors(where, head, problem):
    """The KilnValueError for the file ``where``, which begins with ``head``, that ``problem``
    shows is no safetensors file; for a torch.save or pickle file, one that says what to do."""
    kind = _foreign_format(head)
    if kind is not None:
        return KilnValueError(f"kiln.load: {where} is {kind}, not a Kiln checkpoint (a "
                              f"safetensors file): read it with torch.load and pass what it gives "
                              f"(net.load_state_dict takes a PyTorch state dict), or save it with "
                              f"kiln.save")
    return KilnValueError(f"kiln.load: {where}{problem}")


def _read_header(f, where):
    """(header dict, size of the data section in bytes) of the safetensors file open as ``f``
    from its position, checked; reads the header alone, leaving ``f`` at the start of the
    data."""
    start = f.tell()
    size = f.seek(0, os.SEEK_END) - start
    f.seek(start)
    if size < 8:
        raise _not_safetensors(where, f.read(size), " is too short for a safetensors file")
    head = _read_exactly(f, 8, where)
    (length,) = struct.unpack("<Q", head)
    if length > size - 8:
        raise _not_safetensors(where, head, f": header length {length} exceeds the file "
                                            f"({size} bytes)")
    try:
        header = json.loads(_read_exactly(f, length, where).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise KilnValueError(f"kiln.load: {where}: the header is not JSON ({e})") from None
    except ValueError as e:  # an integer with more digits than Python converts from text
        raise KilnValueError(f"kiln.load: {where}: the header holds an integer too long to read "
                             f"({e})") from None
    except RecursionError:
        raise KilnValueError(f"kiln.load: {where}: the header nests arrays or objects too deeply "
                             f"to read") from None
    if not isinstance(header, dict):
        raise KilnValueError(f"kiln.load: {where}: the header is not a JSON object")
    metadata = header.get("__metadata__", {})
    if not isinstance(metadata, dict):
        raise KilnValueError(f"kiln.load: {where}: __metadata__ is {metadata!r}, expected an "
                             f"object of str -> str")
    for key, value in metadata.items():
        if not isinstance(value, str):
            raise KilnValueError(f"kiln.load: {where}: __metadata__ {key!r} is {value!r}, "
                                 f"expected a str")
    return header, size - 8 - length


# Kiln's sizes are int64: no dimension or element count reaches 2**63, nor an offset into data
# that a file can hold.
_SIZE_LIMIT = 2 ** 63


def _is_size(value):
    """Whether a header's ``value`` is a dimension or an offset: a JSON integer in [0, 2**63)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _SIZE_LIMIT


def _count(shape):
    """The number of elements of ``shape`` (a list of sizes), or None from 2**63 on."""
    if 0 in shape:
        return 0
    count = 1
    for size in shape:
        # Stopping early keeps the number small: a shape of many huge sizes would otherwise make
        # a product slow to compute and too long to print in a message.
        count *= size
        if count >= _SIZE_LIMIT:
            return None
    return count


def load_metadata(path):
    """The ``__metadata__`` of a safetensors file ({} when it has none; a checkpoint's structure
    left out) at ``path`` (a path or a binary file object). Reads and checks the header alone (its
    length, JSON and ``__metadata__``), not the tensors' entries or data."""
    with _binary_file(path, "rb", "load_metadata") as (f, where):
        header, _ = _read_header(f, where)
    metadata = dict(header.get("__metadata__", {}))
    metadata.pop(_STRUCTURE, None)
    return metadata


def load(path, map_location=None, *, weights_only=None):
    """Reads a safetensors file (a path, or a binary file object read from its position and left
    open) into a dict of str -> kiln.Tensor, or the checkpoint it holds.

    ``map_location`` and ``weights_only`` are PyTorch's, for ported code: Kiln's tensors live on
    the CPU, so ``map_location`` may name it ('cpu', a kiln.device) or be None, and a
    safetensors file holds data only, never code, whatever ``weights_only`` says."""
    if map_location is not None:
        check_usable("load: map_location", map_location)
    with _binary_file(path, "rb", "load") as (f, where):
        header, data_size = _read_header(f, where)
        entries = _checked_entries(header, data_size, where)
        start = f.tell()
        result = {}
        # One tensor's bytes at a time: the file's bytes and all the tensors are never held
        # together.
        for name, dtype_name, shape, count, begin, end in entries:
            f.seek(start + begin)
            data = _read_exactly(f, end - begin, where)
            kiln_dtype, stored = _FORMATS[dtype_name]
            # Read flat and shaped by Kiln: NumPy refuses some shapes Kiln holds (see above).
            array = np.frombuffer(data, dtype=stored, count=count)
            if dtype_name == "BF16":
                # Bits as they are (a conversion from float32 would quiet a signalling NaN).
                tensor = _C._bits_as(_C.tensor(array.view("<i2")), kiln_dtype)
            else:
                tensor = _C.tensor(array.astype(np.bool_) if dtype_name == "BOOL" else array,
                                   dtype=kiln_dtype)
            result[name] = tensor.reshape(shape)
    structure = header.get("__metadata__", {}).get(_STRUCTURE)
    return result if structure is None else _rebuilt(structure, result, where)


def _checked_entries(header, data_size, where):
    """The tensors of a safetensors ``header`` as (name, dtype name, shape, element count, begin,
    end) in the header's order, each checked, and checked to tile the ``data_size`` bytes of
    data."""
    entries, spans = [], []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype_name, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        except (KeyError, TypeError):
            raise KilnValueError(f"kiln.load: {where}: tensor {name!r} needs dtype, shape and "
                                 f"data_offsets [begin, end], got {info!r}") from None
        if not isinstance(dtype_name, str) or dtype_name not in _FORMATS:
            raise KilnValueError(f"kiln.load: {where}: tensor {name!r} has unknown dtype "
                                 f"{dtype_name!r} (known: {', '.join(_FORMATS)})")
        if not isinstance(shape, list) or not all(_is_size(d) for d in shape):
            raise KilnValueError(f"kiln.load: {where}: tensor {name!r} has shape {shape!r}, "
                                 f"expected a list of non-negative integers below 2**63")
        if not (isinstance(offsets, list) and len(offsets) == 2
                and all(_is_size(o) for o in offsets)):
            raise KilnValueError(f"kiln.load: {where}: tensor {name!r} has data_offsets "
                                 f"{offsets!r}, expected [begin, end] of non-negative integers "
                                 f"below 2**63")
        count = _count(shape)
        if count is None:
            raise KilnValueError(f"kiln.load: {where}: tensor {name!r} has shape {shape}, which "
                                 f"holds 2**63 elements or more (Kiln holds fewer)")
        begin, end = offsets
        itemsize = np.dtype(_FORMATS[dtype_name][1]).itemsize
        if not begin <= end <= data_size or end - begin != count * itemsize:
            raise KilnValueError(f"kiln.load: {where}: tensor {name!r} ({dtype_name}{shape}) has "
                                 f"data_offsets [{begin}, {end}], which do not hold "
                                 f"{count * itemsize} bytes within the {data_size}-byte data")
        entries.append((name, dtype_name, shape, count, begin, end))
        spans.append((begin, end, name))
    position = 0
    for begin, end, name in sorted(spans):
        if begin != position:
            raise KilnValueError(f"kiln.load: {where}: tensor {name!r} starts at byte {begin} of "
                                 f"the data, expected {position} (a gap or an overlap)")
        position = end
    if position != data_size:
        raise KilnValueError(f"kiln.load: {where}: {data_size - position} bytes after the last "
                             f"tensor")
    return entries
