"""kiln.nn containers: Sequential, ModuleList, ModuleDict, ParameterList and ParameterDict.

    net = kiln.nn.Sequential(kiln.nn.Linear(64, 128), kiln.nn.ReLU(), kiln.nn.Linear(128, 10))
    net = kiln.nn.Sequential(OrderedDict([("fc", kiln.nn.Linear(4, 4)), ("act", kiln.nn.ReLU())]))
    net[0], net[-1], net[1:], len(net), list(net), net.append(cell)

    self.layers = kiln.nn.ModuleList([kiln.nn.Linear(8, 8) for _ in range(4)])   # layers.0.weight
    self.heads = kiln.nn.ModuleDict({"cls": kiln.nn.Linear(8, 2)})              # heads.cls.weight
    self.scales = kiln.nn.ParameterList([kiln.mint.ones(8) for _ in range(4)])  # scales.0
    self.gates = kiln.nn.ParameterDict({"a": kiln.mint.zeros(8)})               # gates.a

Each container registers its members as sub-cells (or parameters) of itself, as PyTorch's do, so
``parameters()``, ``state_dict()`` (keys such as "layers.0.weight"), ``train()`` / ``eval()``,
copies and ``kiln.jit`` see them. Cells passed positionally are named "0", "1", ... (so
parameters are "0.weight", "0.bias", ..., as in PyTorch); an OrderedDict or a dict gives its own
names. As in PyTorch's ``add_module``, a name must be a str (else a KilnTypeError), and one that
is empty, contains "." or is already an attribute of the container (``training``, ``construct``,
``keys``, ...) is a KilnValueError: state_dict joins names with ".", so such a name would merge
or drop keys, or hide the attribute.

- ``Sequential(*cells)``: calls its cells in order, each on the previous one's output.
- ``ModuleList(cells=None)``: a list of cells (or None, an empty slot, as in PyTorch), not
  callable: ``l[i]``, ``l[i:j]`` (a new ModuleList of the same cells), ``l[i] = cell``,
  ``del l[i]`` / ``del l[i:j]``, ``len``, iteration, ``append``, ``extend``, ``insert``,
  ``pop``, ``l += cells``, ``l + other``. The names stay "0" to ``len - 1``: deleting, inserting
  or popping renumbers the cells after the place (so state_dict keys follow the positions).
- ``ModuleDict(cells=None)``: a dict of name -> cell (or None), in insertion order: ``d[name]``,
  ``d[name] = cell`` (a name already there keeps its place), ``del d[name]``, ``name in d``,
  ``len``, iteration over the names, ``keys()``, ``values()``, ``items()``, ``update()``,
  ``pop()``, ``clear()``.
- ``ParameterList(values=None)`` / ``ParameterDict(values=None)``: the same for parameters (no
  ``del``, ``insert`` or ``pop`` in the list, as in PyTorch; ``get`` in the dict). A plain
  tensor stored in one becomes a ``Parameter`` sharing its memory (requires_grad=True), as in
  PyTorch.

Indices are ints (a KilnTypeError otherwise), negative from the end, and out of range a
KilnIndexError; a missing name is a KeyError, as for a dict. A member that is not a Cell (or a
tensor, in the parameter containers) is a KilnTypeError, and ``extend`` / ``update`` check every
member and name before adding any, so a bad one leaves the container unchanged. ``update`` takes
a mapping, a ModuleDict / ParameterDict, or an iterable of (name, value) pairs; an element that is
no pair is a KilnTypeError, a pair of another length a KilnValueError.
"""

import collections
import collections.abc
import operator

from .. import _C
from ..errors import KilnIndexError, KilnTypeError, KilnValueError
from .cell import Cell
from .parameter import Parameter

__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]


def _position(owner, index, length):
    """``index`` (an int, negative from the end) as a position in [0, length): a KilnTypeError
    for another kind, a KilnIndexError out of range."""
    try:
        index = operator.index(index)
    except TypeError:
        raise KilnTypeError(f"{owner}: expected an int as index, got {type(index).__name__} "
                            f"{index!r}") from None
    if not -length <= index < length:
        raise KilnIndexError(f"{owner}: index {index} out of range for {length} entries")
    return index % length


def _checked_cell(owner, name, cell):
    """``cell`` when it is a Cell or None (an empty slot), else a KilnTypeError."""
    if cell is not None and not isinstance(cell, Cell):
        raise KilnTypeError(f"{owner}: {name!r} is a {type(cell).__name__}, expected a "
                            f"kiln.nn.Cell (or None)")
    return cell


def _as_parameter(owner, name, value):
    """``value`` as a Parameter: itself when it is one, a Parameter sharing its memory when it
    is a plain tensor (as PyTorch's ParameterList and ParameterDict), else a KilnTypeError."""
    if isinstance(value, Parameter):
        return value
    if isinstance(value, _C.Tensor):
        return Parameter(value)
    raise KilnTypeError(f"{owner}: {name!r} is a {type(value).__name__}, expected a "
                        f"kiln.nn.Parameter or a kiln.Tensor")


def _iterable(owner, values):
    """``values`` as a list; a value that is not iterable, or is a single tensor or a cell that
    merely iterates (which ``extend`` would take apart), is a KilnTypeError."""
    if isinstance(values, _C.Tensor) or not isinstance(values, collections.abc.Iterable):
        raise KilnTypeError(f"{owner}: expected an iterable, got {type(values).__name__}")
    return list(values)


def _pairs(owner, values):
    """The (name, value) pairs of ``values``: a mapping, a ModuleDict / ParameterDict, or an
    iterable of pairs (as PyTorch's ModuleDict.update)."""
    if isinstance(values, (collections.abc.Mapping, ModuleDict, ParameterDict)):
        return list(values.items())
    if not isinstance(values, collections.abc.Iterable):
        raise KilnTypeError(f"{owner}: expected a mapping or an iterable of (name, value) pairs, "
                            f"got {type(values).__name__}")
    pairs = []
    for i, pair in enumerate(values):
        if not isinstance(pair, collections.abc.Iterable):
            raise KilnTypeError(f"{owner}: element #{i} should be a (name, value) pair, got "
                                f"{type(pair).__name__}")
        pair = tuple(pair)
        if len(pair) != 2:
            raise KilnValueError(f"{owner}: element #{i} has length {len(pair)}; 2 is required "
                                 f"(a (name, value) pair)")
        pairs.append(pair)
    return pairs


class Sequential(Cell):
    """Sequential(*cells) or Sequential(OrderedDict of name -> cell): calls its cells in order,
    each on the previous one's output. Indexing, slicing, ``len`` and iteration go over the
    cells; the naming rules are in kiln.nn.container's documentation."""

    def __init__(self, *cells):
        super().__init__()
        if len(cells) == 1 and isinstance(cells[0], collections.OrderedDict):
            items = list(cells[0].items())
        else:
            items = [(str(i), cell) for i, cell in enumerate(cells)]
        for name, cell in items:
            if not isinstance(cell, Cell):
                raise KilnTypeError(f"Sequential: {name!r} is a {type(cell).__name__}, expected "
                                    f"a kiln.nn.Cell")
            self._check_name(name)
            setattr(self, name, cell)

    def append(self, cell):
        """Adds ``cell`` at the end, named by its position (``str(len(self))``), and returns the
        Sequential; anything but a Cell is a KilnTypeError."""
        if not isinstance(cell, Cell):
            raise KilnTypeError(f"Sequential.append: expected a kiln.nn.Cell, got "
                                f"{type(cell).__name__}")
        setattr(self, str(len(self)), cell)
        return self

    def __len__(self):
        return len(self._cells)

    def __iter__(self):
        return iter(self._cells.values())

    def __getitem__(self, index):
        cells = list(self._cells.items())
        if isinstance(index, slice):
            return Sequential(collections.OrderedDict(cells[index]))
        try:
            index = operator.index(index)
        except TypeError:
            raise KilnTypeError(f"Sequential: expected an int or a slice as index, got "
                                f"{type(index).__name__} {index!r}") from None
        if not -len(cells) <= index < len(cells):
            raise KilnIndexError(f"Sequential: index {index} out of range for {len(cells)} cells")
        return cells[index][1]

    def construct(self, x):
        for cell in self._cells.values():
            x = cell(x)
        return x


class ModuleList(Cell):
    """ModuleList(cells=None): cells in a list, registered as "0", "1", ... (PyTorch's
    ModuleList); see kiln.nn.container's documentation. It is not callable: a model iterates
    over it in its own ``construct``."""

    def __init__(self, cells=None):
        super().__init__()
        if cells is not None:
            self.extend(cells)

    def _renumber(self, cells):
        """Registers ``cells`` as "0" to "len - 1", in order, replacing the current ones."""
        self._cells.clear()
        self._cells.update((str(i), cell) for i, cell in enumerate(cells))

    def __len__(self):
        return len(self._cells)

    def __iter__(self):
        return iter(self._cells.values())

    def __getitem__(self, index):
        if isinstance(index, slice):
            return ModuleList(list(self._cells.values())[index])
        return self._cells[str(_position("ModuleList", index, len(self)))]

    def __setitem__(self, index, cell):
        index = _position("ModuleList", index, len(self))
        self._cells[str(index)] = _checked_cell("ModuleList", str(index), cell)

    def __delitem__(self, index):
        cells = list(self._cells.values())
        if isinstance(index, slice):
            del cells[index]
        else:
            del cells[_position("ModuleList", index, len(cells))]
        self._renumber(cells)

    def append(self, cell):
        """Adds ``cell`` (a Cell or None) at the end; returns the ModuleList."""
        name = str(len(self))
        self._cells[name] = _checked_cell("ModuleList.append", name, cell)
        return self

    def extend(self, cells):
        """Adds every cell of the iterable ``cells`` at the end, checking them all first;
        returns the ModuleList."""
        cells = _iterable("ModuleList.extend", cells)
        start = len(self)
        for i, cell in enumerate(cells):
            _checked_cell("ModuleList.extend", str(start + i), cell)
        self._cells.update((str(start + i), cell) for i, cell in enumerate(cells))
        return self

    def insert(self, index, cell):
        """Inserts ``cell`` before position ``index`` (an int; past either end it goes to that
        end, as ``list.insert``) and renumbers the cells after it."""
        try:
            index = operator.index(index)
        except TypeError:
            raise KilnTypeError(f"ModuleList.insert: expected an int as index, got "
                                f"{type(index).__name__} {index!r}") from None
        cells = list(self._cells.values())
        cells.insert(index, _checked_cell("ModuleList.insert", str(index), cell))
        self._renumber(cells)

    def pop(self, index=-1):
        """Removes the cell at ``index`` (an int or a slice), renumbering those after it, and
        returns it."""
        cell = self[index]
        del self[index]
        return cell

    def __iadd__(self, cells):
        return self.extend(cells)

    def __add__(self, other):
        return ModuleList(list(self) + _iterable("ModuleList +", other))


class ModuleDict(Cell):
    """ModuleDict(cells=None): cells by name, in insertion order (PyTorch's ModuleDict); see
    kiln.nn.container's documentation. It is not callable."""

    def __init__(self, cells=None):
        super().__init__()
        if cells is not None:
            self.update(cells)

    def __getitem__(self, name):
        return self._cells[name]

    def __setitem__(self, name, cell):
        self.add_module(name, _checked_cell("ModuleDict", name, cell))

    def __delitem__(self, name):
        del self._cells[name]

    def __len__(self):
        return len(self._cells)

    def __iter__(self):
        return iter(self._cells)

    def __contains__(self, name):
        return name in self._cells

    def keys(self):
        """The names, in insertion order."""
        return self._cells.keys()

    def values(self):
        """The cells, in insertion order."""
        return self._cells.values()

    def items(self):
        """(name, cell) pairs, in insertion order."""
        return self._cells.items()

    def pop(self, name):
        """Removes the cell ``name`` and returns it (a KeyError if there is none)."""
        return self._cells.pop(name)

    def clear(self):
        """Removes every cell."""
        self._cells.clear()

    def update(self, cells):
        """Adds or replaces the cells of ``cells`` (a mapping, a ModuleDict or an iterable of
        (name, cell) pairs), checking every name and cell first."""
        pairs = _pairs("ModuleDict.update", cells)
        for name, cell in pairs:
            self._check_free(name, "_cells", "a cell")
            _checked_cell("ModuleDict.update", name, cell)
        self._cells.update(pairs)


class ParameterList(Cell):
    """ParameterList(values=None): parameters in a list, registered as "0", "1", ...
    (PyTorch's ParameterList); a plain tensor becomes a Parameter. See kiln.nn.container's
    documentation."""

    def __init__(self, values=None):
        super().__init__()
        if values is not None:
            self.extend(values)

    def __len__(self):
        return len(self._params)

    def __iter__(self):
        return iter(self._params.values())

    def __getitem__(self, index):
        if isinstance(index, slice):
            return ParameterList(list(self._params.values())[index])
        return self._params[str(_position("ParameterList", index, len(self)))]

    def __setitem__(self, index, value):
        index = _position("ParameterList", index, len(self))
        self._params[str(index)] = _as_parameter("ParameterList", str(index), value)

    def append(self, value):
        """Adds ``value`` (a Parameter, or a tensor made one) at the end; returns the list."""
        name = str(len(self))
        self._params[name] = _as_parameter("ParameterList.append", name, value)
        return self

    def extend(self, values):
        """Adds every value of the iterable ``values`` at the end, checking them all first;
        returns the list."""
        values = _iterable("ParameterList.extend", values)
        start = len(self)
        params = [_as_parameter("ParameterList.extend", str(start + i), value)
                  for i, value in enumerate(values)]
        self._params.update((str(start + i), param) for i, param in enumerate(params))
        return self

    def __iadd__(self, values):
        return self.extend(values)


class ParameterDict(Cell):
    """ParameterDict(values=None): parameters by name, in insertion order (PyTorch's
    ParameterDict); a plain tensor becomes a Parameter. See kiln.nn.container's
    documentation."""

    def __init__(self, values=None):
        super().__init__()
        if values is not None:
            self.update(values)

    def __getitem__(self, name):
        return self._params[name]

    def __setitem__(self, name, value):
        self.register_parameter(name, _as_parameter("ParameterDict", name, value))

    def __delitem__(self, name):
        del self._params[name]

    def __len__(self):
        return len(self._params)

    def __iter__(self):
        return iter(self._params)

    def __contains__(self, name):
        return name in self._params

    def keys(self):
        """The names, in insertion order."""
        return self._params.keys()

    def values(self):
        """The parameters, in insertion order."""
        return self._params.values()

    def items(self):
        """(name, parameter) pairs, in insertion order."""
        return self._params.items()

    def get(self, name, default=None):
        """The parameter ``name``, or ``default`` when there is none."""
        return self._params.get(name, default)

    def pop(self, name):
        """Removes the parameter ``name`` and returns it (a KeyError if there is none)."""
        return self._params.pop(name)

    def clear(self):
        """Removes every parameter."""
        self._params.clear()

    def update(self, values):
        """Adds or replaces the parameters of ``values`` (a mapping, a ParameterDict or an
        iterable of (name, value) pairs), checking every name and value first."""
        pairs = _pairs("ParameterDict.update", values)
        checked = []
        for name, value in pairs:
            self._check_free(name, "_params", "a parameter")
            checked.append((name, _as_parameter("ParameterDict.update", name, value)))
        self._params.update(checked)
