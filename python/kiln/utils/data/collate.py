"""Collation: ``default_collate`` turns a list of samples into a batch, ``default_convert`` turns
one sample's NumPy arrays into kiln tensors; both as ``torch.utils.data``'s.

``default_collate`` by the type of the batch's first element:

- kiln.Tensor: ``kiln.mint.stack(batch)`` (a new first dimension, the batch);
- NumPy array: each one a kiln tensor (sharing its memory where it is writable), then stacked;
  arrays of strings or objects raise KilnTypeError;
- NumPy scalar: one tensor of their NumPy dtype;
- Python float: a float64 tensor (PyTorch's ``torch.tensor(batch, dtype=torch.float64)``);
  Python int: ``kiln.tensor(batch)``: int64, or bool for bools;
- str and bytes: the batch, unchanged (a list; a tuple inside a container's column);
- Mapping: the same kind of mapping, each key's values collated; namedtuple: the same namedtuple
  of collated fields; other sequences: collated position by position, a tuple giving a list
  (PyTorch's rule), a list a list. Sequences of unequal lengths raise KilnValueError.

``collate(batch, collate_fn_map=...)`` is the engine: ``default_collate_fn_map`` maps element
types to functions ``fn(batch, *, collate_fn_map)``; add an entry to collate a type of your own.
"""

import collections.abc
import copy
import re

from ..._numpy import np

from ... import mint
from ..._C import Tensor, from_numpy
from ..._C import dtype as _dtype
from ..._C import tensor as _tensor
from ...errors import KilnTypeError, KilnValueError

# NumPy dtypes whose dtype.str holds one of these letters (bytes, str, object) have no tensor.
_STR_OR_OBJECT = re.compile(r"[SaUO]")
_ERROR = ("default_collate: batch must contain kiln tensors, numpy arrays, numbers, dicts or "
          "lists; found {}")


def _as_tensor(value):
    """A NumPy array or scalar as a kiln tensor. A writable array's memory is shared, as
    torch.as_tensor shares it; a read-only one is copied (Kiln's tensors are all writable)."""
    if isinstance(value, np.ndarray) and value.flags.writeable:
        return from_numpy(value)
    return _tensor(value)


def _is_numpy(value):
    return type(value).__module__ == "numpy" and type(value).__name__ not in (
        "str_", "bytes_", "string_")


def _rebuilt(elem, values):
    """``values`` (a list, or a dict for a mapping) in a container of ``elem``'s kind: a copy of
    a mutable one, else its type called on them; a plain list or dict when that fails."""
    mapping = isinstance(values, dict)
    try:
        if isinstance(elem, (collections.abc.MutableMapping, collections.abc.MutableSequence)):
            clone = copy.copy(elem)
            if mapping:
                clone.update(values)
            else:
                for i, value in enumerate(values):
                    clone[i] = value
            return clone
        return type(elem)(values)
    except TypeError:
        return values


def default_convert(data):
    """``data`` with each NumPy array and scalar inside it (through mappings, namedtuples and
    sequences) made a kiln tensor; arrays of strings or objects and everything else stay as
    they are. A tuple becomes a list (PyTorch's rule). The DataLoader applies it to each sample
    when ``batch_size`` is None."""
    if isinstance(data, Tensor):
        return data
    if _is_numpy(data):
        if isinstance(data, np.ndarray) and _STR_OR_OBJECT.search(data.dtype.str):
            return data
        return _as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return _rebuilt(data, {key: default_convert(data[key]) for key in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # a namedtuple
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuilt(data, [default_convert(d) for d in data])
    return data


def collate(batch, *, collate_fn_map=None):
    """``batch`` (a list of samples) collated: the function ``collate_fn_map`` gives for the
    first element's type (exactly, else the first key it is an instance of), else containers
    taken apart and their parts collated. KilnTypeError for an element nothing handles."""
    elem = batch[0]
    if collate_fn_map is not None:
        if type(elem) in collate_fn_map:
            return collate_fn_map[type(elem)](batch, collate_fn_map=collate_fn_map)
        for kind, fn in collate_fn_map.items():
            if isinstance(elem, kind):
                return fn(batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        return _rebuilt(elem, {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map)
                               for key in elem})
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a namedtuple
        return type(elem)(*(collate(samples, collate_fn_map=collate_fn_map)
                            for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        lengths = [len(sample) for sample in batch]
        if any(length != lengths[0] for length in lengths):
            raise KilnValueError(f"default_collate: expected each sequence in the batch to have "
                                 f"the same length, got lengths {lengths}")
        # Each column is a tuple, as in PyTorch (a column of strings stays a tuple).
        columns = [collate(samples, collate_fn_map=collate_fn_map) for samples in zip(*batch)]
        return columns if isinstance(elem, tuple) else _rebuilt(elem, columns)
    raise KilnTypeError(_ERROR.format(type(elem)))


def collate_tensor_fn(batch, *, collate_fn_map=None):
    return mint.stack(batch, 0)


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    if _STR_OR_OBJECT.search(batch[0].dtype.str):
        raise KilnTypeError(_ERROR.format(batch[0].dtype))
    return collate([_as_tensor(array) for array in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    return _tensor(np.asarray(batch))


def collate_float_fn(batch, *, collate_fn_map=None):
    return _tensor(batch, dtype=_dtype.float64)


def collate_int_fn(batch, *, collate_fn_map=None):
    return _tensor(batch)


def collate_str_fn(batch, *, collate_fn_map=None):
    return batch


# Looked up in this order: NumPy's float64 is also a Python float, and bool a Python int.
default_collate_fn_map = {
    Tensor: collate_tensor_fn,
    np.ndarray: collate_numpy_array_fn,
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def default_collate(batch):
    """``batch`` (a list of samples) as one batch: see the module's docstring for each type.
    The DataLoader's ``collate_fn`` unless one is given."""
    return collate(batch, collate_fn_map=default_collate_fn_map)
