"""kiln.nn containers: Sequential, ModuleList, ModuleDict, ParameterList and ParameterDict.

    net = kiln.nn.Sequential(kiln.nn.Linear(64, 128), kiln.nn.ReLU(), kiln.nn.Linear(128, 10))
    net = kiln.nn.Sequential(OrderedDict([("fc", kiln.nn.Linear(4, 4)), ("act", kiln.nn.ReLU())]))
    net[0], net[-1], net[1:], len(net), list(net), net.append(cell), net + other, net * 2

    self.layers = kiln.nn.ModuleList([kiln.nn.Linear(8, 8) for _ in range(4)])   # layers.0.weight
    self.heads = kiln.nn.ModuleDict({"cls": kiln.nn.Linear(8, 2)})              # heads.cls.weight
    self.scales = kiln.nn.ParameterList([kiln.mint.ones(8) for _ in range(4)])  # scales.0
    self.gates = kiln.nn.ParameterDict({"a": kiln.mint.zeros(8)})               # gates.a

Each container registers its members as sub-cells (or parameters) of itself, as PyTorch's do, so
``parameters()``, ``state_dict()`` (keys such as "layers.0.weight"), ``train()`` / ``eval()``,
copies and ``kiln.jit`` see them. Cells passed positionally are named "0", "1", ... (so
parameters are "0.weight", "0.bias", ..., as in PyTorch); an OrderedDict or a dict gives its own
names. As in PyTorch's ``add_module``, a name must be a str (else a KilnTypeError), and one that
is empty, contains "." or is already an attribute of the container (``training``, ``forward``,
``keys``, a Sequential's ``construct``, ...) is a KilnValueError: state_dict joins names with
".", so such a name would merge or drop keys, or hide the attribute. A name that is only one of
Kiln's own methods (``cells``, ``trainable_params``, ...; see kiln.nn.Cell) is free, as in
PyTorch: ``ModuleDict({"cells": ...})`` holds it, and ``d.cells`` is then that member.

- ``Sequential(*cells)``: calls its cells in order, each on the previous one's output. As
  PyTorch's: ``s[i]``, ``s[i:j]`` (a new Sequential of the same cells and names), ``s[i] =
  cell`` (keeps the name), ``del s[i]`` / ``del s[i:j]``, ``len``, iteration, ``append``,
  ``extend`` (any iterable of cells), ``insert`` (``-len <= index <= len``, else a
  KilnIndexError), ``pop`` (an index or a slice), ``s + other`` (a new Sequential of both's
  cells), ``s += other`` (``other`` a Sequential, else a KilnTypeError where PyTorch raises
  ValueError), ``s * n`` / ``n * s`` / ``s *= n`` (the same cells ``n`` times, ``n`` a positive
  int: their parameters are shared). Deleting, inserting or popping names the cells "0" to
  "len - 1" again, an OrderedDict's names included, as PyTorch does. A Sequential holds no empty
  slot: a member that is not a Cell, None included, is a KilnTypeError.
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
  ``del``, ``insert`` or ``pop`` in the list, as in PyTorch). The dict also has PyTorch's
  ``get``, ``copy()`` (a new dict of the same Parameters), ``setdefault(name, default)``,
  ``fromkeys(names, default)`` (a new dict), ``d | other`` (a new dict), ``other | d`` (for a
  dict ``other``: a dict, as PyTorch's) and ``d |= other`` (``update``). A plain tensor stored
  in one becomes a ``Parameter`` sharing its memory (requires_grad=True), as in PyTorch; None is
  no member (a KilnTypeError, where PyTorch's ``setdefault(name)`` stores None).

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


def _position(owner, index, length, kinds="an int"):
    """``index`` (an int, negative from the end) as a position in [0, length): a KilnTypeError
    for another kind (the error says ``kinds`` are expected), a KilnIndexError out of range."""
    try:
        index = operator.index(index)
    except TypeError:
        raise KilnTypeError(f"{owner}: expected {kinds} as index, got {type(index).__name__} "
                            f"{index!r}") from None
    if not -length <= index < length:
        raise KilnIndexError(f"{owner}: index {index} out of range for {length} entries")
    return index % length


def _renumber(entries, members):
    """Registers ``members`` in the registry ``entries`` as "0" to "len - 1", in order, replacing
    what it held (as PyTorch's containers do after a deletion or an insertion)."""
    entries.clear()
    entries.update((str(i), member) for i, member in enumerate(members))


def _checked_layer(owner, name, cell):
    """``cell`` when it is a Cell, else a KilnTypeError: a Sequential calls each of its members,
    so it holds no empty slot (None)."""
    if not isinstance(cell, Cell):
        raise KilnTypeError(f"{owner}: {name!r} is a {type(cell).__name__}, expected a "
                            f"kiln.nn.Cell")
    return cell


def _repeats(owner, times):
    """``times`` for Sequential's ``*``: a positive int (not a bool), else a KilnTypeError or
    KilnValueError, as PyTorch refuses it."""
    if isinstance(times, bool) or not isinstance(times, int):
        raise KilnTypeError(f"{owner}: the multiplication factor must be an int, got "
                            f"{type(times).__name__} {times!r}")
    if times <= 0:
        raise KilnValueError(f"{owner}: the multiplication factor must be positive, got {times}")
    return times


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
    if isinstance(values, (collections.abc.Mapping, _DictContainer)):
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
    each on the previous one's output. Indexing, slicing, ``len``, iteration and the list-like
    methods go over the cells; the naming rules are in kiln.nn.container's documentation."""

    def __init__(self, *cells):
        super().__init__()
        if len(cells) == 1 and isinstance(cells[0], collections.OrderedDict):
            items = list(cells[0].items())
        else:
            items = [(str(i), cell) for i, cell in enumerate(cells)]
        for name, cell in items:
            _checked_layer("Sequential", name, cell)
            self._check_name(name)
            setattr(self, name, cell)

    def append(self, cell):
        """Adds ``cell`` at the end, named by its position (``str(len(self))``), and returns the
        Sequential; anything but a Cell is a KilnTypeError."""
        name = str(len(self))
        setattr(self, name, _checked_layer("Sequential.append", name, cell))
        return self

    def extend(self, cells):
        """Appends each cell of the iterable ``cells`` (a Sequential, a list, ...), checking them
        all first; returns the Sequential."""
        cells = _iterable("Sequential.extend", cells)
        for i, cell in enumerate(cells):
            _checked_layer("Sequential.extend", str(len(self) + i), cell)
        for cell in cells:
            self.append(cell)
        return self

    def insert(self, index, cell):
        """Inserts ``cell`` before position ``index`` (an int from ``-len`` to ``len``, as
        PyTorch's; else a KilnIndexError) and names the cells "0" to "len - 1" again, as ``del``
        does; returns the Sequential."""
        cells = list(self._cells.values())
        if index != len(cells):  # inserting at the end is appending
            index = _position("Sequential.insert", index, len(cells))
        cells.insert(index, _checked_layer("Sequential.insert", str(index), cell))
        _renumber(self._cells, cells)
        return self

    def pop(self, index=-1):
        """Removes the cell at ``index`` (an int, or a slice: a Sequential of those cells), names
        the cells after it by their new positions, and returns it."""
        cell = self[index]
        del self[index]
        return cell

    def __len__(self):
        return len(self._cells)

    def __iter__(self):
        return iter(self._cells.values())

    def _name_at(self, index, kinds="an int or a slice"):
        """The name of the cell at position ``index`` (see ``_position``)."""
        names = list(self._cells)
        return names[_position("Sequential", index, len(names), kinds)]

    def __getitem__(self, index):
        if isinstance(index, slice):
            return Sequential(collections.OrderedDict(list(self._cells.items())[index]))
        return self._cells[self._name_at(index)]

    def __setitem__(self, index, cell):
        """``s[i] = cell``: replaces the cell at ``i`` (an int), keeping its name."""
        name = self._name_at(index, "an int")
        setattr(self, name, _checked_layer("Sequential", name, cell))

    def __delitem__(self, index):
        """``del s[i]`` / ``del s[i:j]``: removes cells and names the rest "0" to "len - 1", as
        PyTorch's (an OrderedDict's names included)."""
        cells = list(self._cells.values())
        if isinstance(index, slice):
            del cells[index]
        else:
            del cells[_position("Sequential", index, len(cells), "an int or a slice")]
        _renumber(self._cells, cells)

    def _other(self, op, other):
        """``other``, the Sequential on the other side of ``op`` ("+" or "+="); anything else is a
        KilnTypeError (PyTorch's ValueError; ``extend`` takes any iterable of cells)."""
        if not isinstance(other, Sequential):
            raise KilnTypeError(f"Sequential {op}: expected a Sequential, got "
                                f"{type(other).__name__} (extend() takes other iterables)")
        return other

    def __add__(self, other):
        """``s + other``: a new Sequential of this one's cells, then ``other``'s (the same cells,
        named by position)."""
        return Sequential(*self, *self._other("+", other))

    def __iadd__(self, other):
        """``s += other``: appends ``other``'s cells (``extend``)."""
        return self.extend(self._other("+=", other))

    def __mul__(self, times):
        """``s * n``: a new Sequential of this one's cells ``n`` times over (the same cells, so
        their parameters are shared, as PyTorch's)."""
        return Sequential(*(list(self) * _repeats("Sequential *", times)))

    __rmul__ = __mul__

    def __imul__(self, times):
        """``s *= n``: appends this Sequential's cells ``n - 1`` more times."""
        return self.extend(list(self) * (_repeats("Sequential *=", times) - 1))

    def construct(self, x):
        for cell in self._cells.values():
            x = cell(x)
        return x


class _ListContainer(Cell):
    """The list protocol ModuleList and ParameterList share: members registered as "0" to
    "len - 1" in the registry ``_registry`` ("_cells" or "_params"). A subclass sets ``_kind``
    (its name, which prefixes its errors), ``_registry`` and ``_checked(owner, name, value)``
    (the member to store for ``value``, or a KilnTypeError), and defines ``_sliced(values)``:
    a slice is a new container of the public class (not of a subclass, whose __init__ may take
    other arguments) holding ``values``."""

    @property
    def _entries(self):
        """The registry holding the members, name -> member."""
        return self.__dict__[self._registry]

    def __len__(self):
        return len(self._entries)

    def __iter__(self):
        return iter(self._entries.values())

    def __getitem__(self, index):
        if isinstance(index, slice):
            return self._sliced(list(self._entries.values())[index])
        return self._entries[str(_position(self._kind, index, len(self)))]

    def __setitem__(self, index, value):
        index = _position(self._kind, index, len(self))
        self._entries[str(index)] = self._checked(self._kind, str(index), value)

    def append(self, value):
        """Adds ``value`` at the end, checked as every member is; returns the container."""
        name = str(len(self))
        self._entries[name] = self._checked(f"{self._kind}.append", name, value)
        return self

    def extend(self, values):
        """Adds every value of the iterable ``values`` at the end, checking them all first;
        returns the container."""
        owner = f"{self._kind}.extend"
        values = _iterable(owner, values)
        start = len(self)
        members = [self._checked(owner, str(start + i), value) for i, value in enumerate(values)]
        self._entries.update((str(start + i), member) for i, member in enumerate(members))
        return self

    def __iadd__(self, values):
        return self.extend(values)


class _DictContainer(Cell):
    """The dict protocol ModuleDict and ParameterDict share: members by name, in insertion
    order, in the registry ``_registry`` ("_cells" or "_params"). A subclass sets ``_kind`` (its
    name, which prefixes its errors), ``_registry``, ``_what`` (the member in the name errors
    of Cell._check_free: "a cell", "a parameter") and ``_checked(owner, name, value)`` (the
    member to store for ``value``, or a KilnTypeError)."""

    @property
    def _entries(self):
        """The registry holding the members, name -> member."""
        return self.__dict__[self._registry]

    def __getitem__(self, name):
        return self._entries[name]

    def __setitem__(self, name, value):
        self._store(self._kind, name, value)

    def _store(self, owner, name, value):
        """``self[name] = value``, for ``owner`` (named in the errors)."""
        value = self._checked(owner, name, value)
        self._check_free(name, self._registry, self._what)
        self._entries[name] = value

    def __delitem__(self, name):
        del self._entries[name]

    def __len__(self):
        return len(self._entries)

    def __iter__(self):
        return iter(self._entries)

    def __contains__(self, name):
        return name in self._entries

    def keys(self):
        """The names, in insertion order."""
        return self._entries.keys()

    def values(self):
        """The members, in insertion order."""
        return self._entries.values()

    def items(self):
        """(name, member) pairs, in insertion order."""
        return self._entries.items()

    def pop(self, name):
        """Removes the member ``name`` and returns it (a KeyError if there is none)."""
        return self._entries.pop(name)

    def clear(self):
        """Removes every member."""
        self._entries.clear()

    def update(self, values):
        """Adds or replaces the members of ``values`` (a mapping, a ModuleDict / ParameterDict
        or an iterable of (name, value) pairs), checking every name and value first."""
        self._update(f"{self._kind}.update", values)

    def _update(self, owner, values):
        """``update(values)``, for ``owner`` (named in the errors)."""
        checked = []
        for name, value in _pairs(owner, values):
            self._check_free(name, self._registry, self._what)
            checked.append((name, self._checked(owner, name, value)))
        self._entries.update(checked)


class ModuleList(_ListContainer):
    """ModuleList(cells=None): cells (or None) in a list, registered as "0", "1", ... (PyTorch's
    ModuleList); see kiln.nn.container's documentation. It is not callable: a model iterates
    over it in its own ``construct``."""

    _kind, _registry = "ModuleList", "_cells"
    _checked = staticmethod(_checked_cell)

    def __init__(self, cells=None):
        super().__init__()
        if cells is not None:
            self.extend(cells)

    def _sliced(self, values):
        return ModuleList(values)

    def __delitem__(self, index):
        cells = list(self._cells.values())
        if isinstance(index, slice):
            del cells[index]
        else:
            del cells[_position("ModuleList", index, len(cells))]
        _renumber(self._cells, cells)

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
        _renumber(self._cells, cells)

    def pop(self, index=-1):
        """Removes the cell at ``index`` (an int or a slice), renumbering those after it, and
        returns it."""
        cell = self[index]
        del self[index]
        return cell

    def __add__(self, other):
        return ModuleList(list(self) + _iterable("ModuleList +", other))


class ModuleDict(_DictContainer):
    """ModuleDict(cells=None): cells (or None) by name, in insertion order (PyTorch's
    ModuleDict); see kiln.nn.container's documentation. It is not callable."""

    _kind, _registry, _what = "ModuleDict", "_cells", "a cell"
    _checked = staticmethod(_checked_cell)

    def __init__(self, cells=None):
        super().__init__()
        if cells is not None:
            self.update(cells)


class ParameterList(_ListContainer):
    """ParameterList(values=None): parameters in a list, registered as "0", "1", ...
    (PyTorch's ParameterList); a plain tensor becomes a Parameter. See kiln.nn.container's
    documentation."""

    _kind, _registry = "ParameterList", "_params"
    _checked = staticmethod(_as_parameter)

    def __init__(self, values=None):
        super().__init__()
        if values is not None:
            self.extend(values)

    def _sliced(self, values):
        return ParameterList(values)


class ParameterDict(_DictContainer):
    """ParameterDict(values=None): parameters by name, in insertion order (PyTorch's
    ParameterDict); a plain tensor becomes a Parameter. As PyTorch's, construction and
    ``update`` from a plain mapping (not an OrderedDict or ParameterDict) add its names sorted:
    the parameters' order, which optimizers key their state by, is then PyTorch's. See
    kiln.nn.container's documentation."""

    _kind, _registry, _what = "ParameterDict", "_params", "a parameter"
    _checked = staticmethod(_as_parameter)

    def _update(self, owner, values):
        if isinstance(values, collections.abc.Mapping) and \
                not isinstance(values, (collections.OrderedDict, ParameterDict)):
            # (Sorted as strings: a name that is not one is refused with its own error.)
            values = sorted(values.items(), key=lambda item: str(item[0]))
        super()._update(owner, values)

    def __init__(self, values=None):
        super().__init__()
        if values is not None:
            self.update(values)

    def get(self, name, default=None):
        """The parameter ``name``, or ``default`` when there is none."""
        return self._params.get(name, default)

    def copy(self):
        """A new ParameterDict holding the same Parameters under the same names."""
        return ParameterDict(self._params)

    def setdefault(self, name, default=None):
        """The parameter ``name``; where there is none, ``default`` is stored under it first, as
        ``d[name] = default`` stores it (a ParameterDict holds no None: a KilnTypeError)."""
        if name not in self._params:
            self._store("ParameterDict.setdefault", name, default)
        return self._params[name]

    def fromkeys(self, keys, default=None):
        """A new ParameterDict with ``default`` under each name of the iterable ``keys``: a
        Parameter shared by all of them, or a plain tensor as a Parameter per name, each sharing
        its memory (as PyTorch's)."""
        result = ParameterDict()
        result._update("ParameterDict.fromkeys",
                       [(name, default) for name in _iterable("ParameterDict.fromkeys", keys)])
        return result

    def __or__(self, other):
        """``d | other``: a copy of ``d`` updated with ``other`` (what ``update`` takes)."""
        result = self.copy()
        result._update("ParameterDict |", other)
        return result

    def __ror__(self, other):
        """``other | d`` for a dict ``other``: a copy of ``other`` (a dict, as PyTorch's) updated
        with ``d``'s parameters."""
        if not isinstance(other, dict):
            return NotImplemented
        result = other.copy()
        result.update(self._params)
        return result

    def __ior__(self, other):
        """``d |= other``: ``update(other)``; returns ``d``."""
        self._update("ParameterDict |=", other)
        return self
