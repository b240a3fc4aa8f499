"""kiln.nn.Cell (alias ``Module``): the base class of layers and models.

    class MLP(kiln.nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc1 = kiln.nn.Linear(64, 128)       # a sub-cell: registered
            self.fc2 = kiln.nn.Linear(128, 10)
            self.scale = kiln.nn.Parameter(kiln.mint.ones(1))  # a parameter: registered

        def construct(self, x):                     # MindSpore's name; `forward` works too
            return self.fc2(kiln.mint.relu(self.fc1(x))) * self.scale

    net = MLP()
    y = net(x)                                      # calls construct
    [name for name, _ in net.named_parameters()]    # ['scale', 'fc1.weight', 'fc1.bias', ...]
    net.load_state_dict(other.state_dict())

Assigning a ``Parameter`` or a ``Cell`` to an attribute registers it (call ``super().__init__()``
first: assigning one earlier, or listing the parameters of a cell that never called it, is a
KilnTypeError); assigning None to a registered name keeps the slot empty (a Linear without bias),
and ``del`` removes it. Names are dotted paths: ``fc1.weight``. A cell may hold a sub-cell under
several names, but not itself, at any depth (``net.loop = net``): listing the cells, parameters
or state dict of such a cell is a KilnValueError naming the cycle.

- ``parameters(recurse=True)`` / ``named_parameters(prefix="", recurse=True,
  remove_duplicate=True)``: each parameter once (a parameter reached by two names -- tied weights,
  a sub-cell used twice -- appears under its first name), or under every name with
  ``remove_duplicate=False``; ``trainable_params()``: those with ``requires_grad`` (MindSpore's
  name), each once, as an optimizer needs them.
- ``cells()`` / ``children()``: the direct sub-cells; ``named_cells(prefix="",
  remove_duplicate=True)`` / ``cells_and_names()`` / ``named_modules()``: this cell (named "") and
  every cell below it (a cell used twice appears once, unless ``remove_duplicate=False``);
  ``modules()``.
- ``state_dict()``: an ordered dict of name -> tensor, each sharing its parameter's memory
  (detached), with every name as in PyTorch: a tied weight appears under each of its names
  (``enc.weight`` and ``dec.weight``, the same memory). ``load_state_dict(state_dict,
  strict=True)`` copies values (kiln tensors, NumPy arrays or lists, converted to each
  parameter's dtype) into the parameters in place, so optimizers and jitted functions holding them
  see the new values; a tied weight takes the value of its last name present. Missing and
  unexpected keys are counted over every name: a state dict with only one name of a tied weight
  misses the other. It checks and converts everything before copying anything: a missing or
  unexpected key (strict) is a KilnValueError listing them, a shape that differs is a ShapeError
  naming the key, a value of a dtype Kiln does not hold (uint32, complex, strings, objects) is a
  DTypeError naming the key, a parameter that cannot take values (an expanded view, whose
  elements share memory) is a KilnValueError naming the key; every dtype Kiln holds converts to
  every other, and big-endian arrays and torch tensors that require grad load as well. It returns
  ``(missing_keys, unexpected_keys)``.
- ``train(mode=True)`` / ``eval()`` / ``set_train(mode=True)`` set ``training`` on every cell
  (Dropout only drops while training); ``mode`` is a bool (else a KilnTypeError); they return the
  cell. A ``kiln.jit`` function whose trace read a cell's ``training`` is traced again when it
  changes (kiln/jit.py).
- ``zero_grad(set_to_none=True)``: clears (or zeroes) every parameter's ``.grad``.
- ``copy.deepcopy(cell)``: an independent copy, as in PyTorch: new parameters (leaves with the
  same values and ``requires_grad``, no ``.grad``), tied weights still tied, ready to train on its
  own. ``pickle`` saves and loads a cell whose class can be imported (see kiln/nn/parameter.py and
  kiln/_tensor.py for tensors).
"""

import collections
import collections.abc

from ..autograd import no_grad
from ..errors import KilnNotImplementedError, KilnTypeError, KilnValueError
from ..jit import trace_reads
from ._state import converted_like
from .parameter import Parameter

__all__ = ["Cell", "Module", "LoadResult"]

LoadResult = collections.namedtuple("LoadResult", ["missing_keys", "unexpected_keys"])


class Cell:
    """Base class of every layer and model; see the module's documentation."""

    def __init__(self):
        object.__setattr__(self, "_params", collections.OrderedDict())
        object.__setattr__(self, "_cells", collections.OrderedDict())
        self.training = True

    @property
    def training(self):
        """Whether the cell is training (``train()`` / ``eval()``). A kiln.jit trace that reads it
        records the cell: its jitted function keys later calls on the flag."""
        cells = trace_reads.cells
        if cells is not None and not any(cell is self for cell in cells):
            cells.append(self)
        try:
            return self.__dict__["_training"]
        except KeyError:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute 'training' "
                                 f"(call super().__init__() first)") from None

    @training.setter
    def training(self, mode):
        self.__dict__["_training"] = mode

    def __setstate__(self, state):
        if "training" in state:  # a pickle of Kiln 0.6 or earlier, which kept the flag so
            state = dict(state, _training=state["training"])
            del state["training"]
        self.__dict__.update(state)

    # ----------------------------------------------------------------------------------------
    # Registration

    def __setattr__(self, name, value):
        registries = self.__dict__.get("_params"), self.__dict__.get("_cells")
        if registries[0] is None:
            if isinstance(value, (Parameter, Cell)):
                raise self._before_init(f"assign {type(value).__name__} {name!r}")
            object.__setattr__(self, name, value)
            return
        params, cells = registries
        if isinstance(value, (Parameter, Cell)):
            self._check_name(name, "a " + type(value).__name__)
        if isinstance(value, Parameter):
            self._forget(name, keep=params)
            params[name] = value
        elif isinstance(value, Cell):
            self._forget(name, keep=cells)
            cells[name] = value
        elif name in params:
            if value is not None:
                raise KilnTypeError(f"cannot assign {type(value).__name__} to parameter {name!r} "
                                    f"(expected a kiln.nn.Parameter or None)")
            params[name] = None
        elif name in cells:
            if value is not None:
                raise KilnTypeError(f"cannot assign {type(value).__name__} to sub-cell {name!r} "
                                    f"(expected a kiln.nn.Cell or None)")
            cells[name] = None
        else:
            object.__setattr__(self, name, value)

    def _check_name(self, name, what="a cell"):
        """Refuses a name to register `what` under that state_dict could not tell apart, or that
        would hide an attribute (as PyTorch's add_module / register_parameter)."""
        kind = type(self).__name__
        if not isinstance(name, str):
            raise KilnTypeError(f"{kind}: the name of {what} must be a str, got "
                                f"{type(name).__name__} {name!r}")
        if not name:
            raise KilnValueError(f"{kind}: the name of {what} must not be empty (its parameters "
                                 f"would have no prefix in state_dict)")
        if "." in name:
            raise KilnValueError(f"{kind}: name {name!r} contains '.', which separates the names "
                                 f"of nested cells in state_dict")
        # Looked up on the class and in the internal registries: hasattr would run properties
        # such as `training`, which a kiln.jit trace records.
        if hasattr(type(self), name) or name in ("_params", "_cells", "_training"):
            raise KilnValueError(f"{kind}: name {name!r} is already an attribute of {kind}")

    def _forget(self, name, keep=None):
        """Removes ``name`` from __dict__ and from every registry but ``keep``."""
        # A name re-assigned with the same kind keeps its place in its registry (as in PyTorch):
        # the order is Sequential's order of calls and state_dict's order of keys.
        self.__dict__.pop(name, None)
        for registry in (self._params, self._cells):
            if registry is not keep:
                registry.pop(name, None)

    def _before_init(self, what):
        """The error for doing ``what`` to a cell whose subclass has not run Cell.__init__()."""
        return KilnTypeError(f"{type(self).__name__}: cannot {what} before Cell.__init__() "
                             f"(call super().__init__() first)")

    def __getattr__(self, name):
        # Only reached when normal lookup fails: registered parameters and cells live in the
        # registries, not in __dict__.
        for registry in ("_params", "_cells"):
            entries = self.__dict__.get(registry)
            if entries is not None and name in entries:
                return entries[name]
        if name in ("_params", "_cells"):
            # Every traversal starts here: a subclass that skipped super().__init__() is named
            # instead of the missing registry.
            raise self._before_init("list parameters or sub-cells")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __delattr__(self, name):
        if name in self._params or name in self._cells:
            self._forget(name)
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._params) | set(self._cells))

    # ----------------------------------------------------------------------------------------
    # Calling

    def __call__(self, *args, **kwargs):
        return self.construct(*args, **kwargs)

    def construct(self, *args, **kwargs):
        """The computation; subclasses override this (or ``forward``)."""
        if type(self).forward is Cell.forward:
            raise KilnNotImplementedError(f"{type(self).__name__} defines neither construct() "
                                          f"nor forward()")
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        """PyTorch's name for ``construct``."""
        return self.construct(*args, **kwargs)

    # ----------------------------------------------------------------------------------------
    # Traversal

    def named_cells(self, prefix="", remove_duplicate=True):
        """(name, cell) for this cell and every cell below it, parents first; a cell reached by
        two paths appears once, under its first name, unless ``remove_duplicate`` is False. A
        cell below itself (``net.loop = net``) is a KilnValueError: its names never end."""
        seen = set()
        stack = [(prefix, self, ())]  # with the (id, name) of each cell above, to spot a cycle
        while stack:
            name, cell, above = stack.pop()
            if id(cell) in seen:
                # Only a cell met before can close a cycle; a shared sub-cell is no ancestor.
                for ancestor_id, ancestor_name in above:
                    if ancestor_id == id(cell):
                        where = (repr(ancestor_name) if ancestor_name
                                 else f"the top-level {type(cell).__name__}")
                        raise KilnValueError(f"cell {name!r} contains itself: it is {where}, "
                                             f"which holds it (a cycle of sub-cells)")
                if remove_duplicate:
                    continue
            seen.add(id(cell))
            yield name, cell
            path = above + ((id(cell), name),)
            children = [(f"{name}.{n}" if name else n, c, path) for n, c in cell._cells.items()
                        if c is not None]
            stack.extend(reversed(children))

    cells_and_names = named_cells
    named_modules = named_cells

    def modules(self):
        """This cell and every cell below it, each once, parents first (``named_cells`` without
        the names)."""
        return (cell for _, cell in self.named_cells())

    def cells(self):
        """The direct sub-cells."""
        return (cell for cell in self._cells.values() if cell is not None)

    children = cells

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, parameter) pairs; a parameter reached by two names appears once, under
        its first name, unless ``remove_duplicate`` is False (then under every name)."""
        seen = set()
        cells = self.named_cells(prefix, remove_duplicate) if recurse else [(prefix, self)]
        for cell_name, cell in cells:
            for name, param in cell._params.items():
                if param is None or (remove_duplicate and id(param) in seen):
                    continue
                seen.add(id(param))
                yield (f"{cell_name}.{name}" if cell_name else name), param

    def parameters(self, recurse=True):
        """Every parameter, each once (see ``named_parameters``); with ``recurse=False`` only this
        cell's own."""
        return (param for _, param in self.named_parameters(recurse=recurse))

    def trainable_params(self, recurse=True):
        """The parameters with requires_grad, as a list (MindSpore's Cell.trainable_params)."""
        return [p for p in self.parameters(recurse) if p.requires_grad]

    # ----------------------------------------------------------------------------------------
    # State

    def state_dict(self):
        """An ordered dict of dotted name -> tensor sharing the parameter's memory (detached),
        with every name of a tied parameter (as PyTorch's)."""
        params = self.named_parameters(remove_duplicate=False)
        return collections.OrderedDict((name, param.detach()) for name, param in params)

    def load_state_dict(self, state_dict, strict=True):
        """Copies ``state_dict``'s values into the parameters in place (see the module's
        documentation); returns LoadResult(missing_keys, unexpected_keys). A ``state_dict`` that
        is not a mapping (a list of pairs, None) is a KilnTypeError, as in PyTorch."""
        if not isinstance(state_dict, collections.abc.Mapping):
            raise KilnTypeError(f"load_state_dict for {type(self).__name__}: expected a mapping "
                                f"of name -> tensor, got {type(state_dict).__name__}")
        params = dict(self.named_parameters(remove_duplicate=False))  # state_dict's names
        missing = [name for name in params if name not in state_dict]
        unexpected = [name for name in state_dict if name not in params]
        if strict and (missing or unexpected):
            parts = []
            if missing:
                parts.append(f"missing keys {missing}")
            if unexpected:
                parts.append(f"unexpected keys {unexpected}")
            raise KilnValueError(f"load_state_dict for {type(self).__name__}: "
                                 + " and ".join(parts))
        # Every value is converted before the first copy, so a bad one changes nothing.
        values = {name: converted_like(state_dict[name], param,
                                       f"load_state_dict for {type(self).__name__}: {name!r}")
                  for name, param in params.items() if name in state_dict}
        with no_grad():
            for name, value in values.items():
                params[name][...] = value
        return LoadResult(missing, unexpected)

    def train(self, mode=True):
        """Sets ``training`` to ``mode`` (a bool, else a KilnTypeError) on this cell and every cell
        below it; returns the cell."""
        if not isinstance(mode, bool):
            raise KilnTypeError(f"{type(self).__name__}.train: mode must be a bool, got "
                                f"{type(mode).__name__} {mode!r}")
        for cell in self.modules():
            cell.training = mode
        return self

    def eval(self):
        """``train(False)``: sets every cell's ``training`` to False; returns the cell."""
        return self.train(False)

    def set_train(self, mode=True):
        """MindSpore's name for ``train``."""
        return self.train(mode)

    def zero_grad(self, set_to_none=True):
        """Clears every parameter's gradient (or fills it with zeros)."""
        for param in self.parameters():
            if set_to_none or param.grad is None:
                param.grad = None
            else:
                with no_grad():
                    param.grad[...] = 0

    # ----------------------------------------------------------------------------------------
    # Printing

    def extra_repr(self):
        """The text inside this cell's parentheses in repr (subclasses override)."""
        return ""

    def __repr__(self):
        lines = [f"({name}): " + repr(cell).replace("\n", "\n  ")
                 for name, cell in self._cells.items()]
        if not lines:
            return f"{type(self).__name__}({self.extra_repr()})"
        head = self.extra_repr()
        body = "\n  ".join(([head] if head else []) + lines)
        return f"{type(self).__name__}(\n  {body}\n)"


Module = Cell
