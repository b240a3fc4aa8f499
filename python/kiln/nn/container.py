"""kiln.nn.Sequential: cells applied one after another.

    net = kiln.nn.Sequential(kiln.nn.Linear(64, 128), kiln.nn.ReLU(), kiln.nn.Linear(128, 10))
    net = kiln.nn.Sequential(OrderedDict([("fc", kiln.nn.Linear(4, 4)), ("act", kiln.nn.ReLU())]))
    net[0], net[-1], net[1:], len(net), list(net), net.append(cell)

Cells passed positionally are named "0", "1", ... (so parameters are "0.weight", "0.bias", ...,
as in PyTorch); an OrderedDict gives its own names. As in PyTorch's ``add_module``, a name must be
a str (else a KilnTypeError), and one that is empty, contains "." or is already an attribute of
the Sequential (``training``, ``construct``, ...) is a KilnValueError: state_dict joins names with
".", so such a name would merge or drop keys, or hide the attribute.
"""

import collections
import operator

from ..errors import KilnIndexError, KilnTypeError
from .cell import Cell

__all__ = ["Sequential"]


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
