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
and ``del`` removes it. ``register_parameter(name, param)`` and ``add_module(name, cell)`` (alias
``register_module``) do the same by name, None included, as PyTorch's; they refuse a name that
another attribute holds (a KilnValueError), as every registration refuses a name that is not a
str (KilnTypeError), is empty, contains "." or names an attribute of the class (KilnValueError):
a method of PyTorch's Module (``forward``, ``train``, ...), the flag ``training``, or a method the
class defines. PyTorch's add_module refuses these too; its plain assignment registers the
sub-module where attribute access never finds it, which Kiln refuses. Kiln's own methods that
PyTorch's Module lacks (``construct``, ``cells``, ``named_cells``, ``cells_and_names``,
``set_train``, ``trainable_params``) are no such attribute, so a PyTorch model (and its state
dict) may use their names: a sub-cell, parameter or buffer so named shadows the method on its
cell (``net.cells`` is then the sub-cell; ``kiln.nn.Cell.cells(net)`` calls the method), and
calling the cell still runs Cell's ``construct``, that is ``forward``. Kiln's own code never
calls these methods through a cell. Names are dotted paths: ``fc1.weight``. A cell may hold a
sub-cell under several names, but not itself, at any depth (``net.loop = net``): listing the
cells, parameters, buffers or state dict of such a cell is a KilnValueError naming the cycle.

Buffers are tensors a cell keeps that are no parameters (BatchNorm's running statistics):
``register_buffer(name, tensor, persistent=True)`` registers one (a ``kiln.Tensor`` or None, not
a Parameter: a KilnTypeError). Assigning a tensor or None to its name afterwards replaces it, as
in PyTorch (anything else is a KilnTypeError), and a Parameter or a Cell assigned to it takes
the name over. Buffers are listed by ``buffers()`` / ``named_buffers()``, not by
``parameters()``, so optimizers leave them alone; persistent ones are in ``state_dict`` and
``load_state_dict`` (after each cell's parameters, as in PyTorch), and every buffer copies,
deep-copies and pickles with its cell. A ``kiln.jit`` function reads the buffer tensor it
captured at its trace, as any tensor it reads from outside (kiln/jit.py): it sees in-place
updates of it (``buf[...] = v``, ``buf += 1``, ``kiln.mint.add(buf, v, out=buf)``, under
``kiln.no_grad()``) and performs its own at every call, but not a new tensor assigned to the
name. Assigned inside the jitted function, that tensor is a traced value without data, kept in
the cell: reading it afterwards is a KilnTypeError. Update buffers in place.

- ``parameters(recurse=True)`` / ``named_parameters(prefix="", recurse=True,
  remove_duplicate=True)``: each parameter once (a parameter reached by two names -- tied weights,
  a sub-cell used twice -- appears under its first name), or under every name with
  ``remove_duplicate=False``; ``trainable_params()``: those with ``requires_grad`` (MindSpore's
  name), each once, as an optimizer needs them.
- ``buffers(recurse=True)`` / ``named_buffers(prefix="", recurse=True, remove_duplicate=True)``:
  every buffer that is not None, persistent or not, each once as parameters are.
- ``cells()``: the direct sub-cells, under every name (MindSpore's); ``children()`` /
  ``named_children()``: each direct sub-cell once, under its first name (PyTorch's);
  ``named_cells(prefix="", remove_duplicate=True)`` / ``cells_and_names()``: this cell (named
  ``prefix``, "" by default) and every cell below it (a cell used twice appears once, unless
  ``remove_duplicate=False``); ``named_modules(memo=None, prefix="", remove_duplicate=True)``:
  the same with PyTorch's signature, leaving out the cells in the set ``memo`` and what is below
  them (each cell listed is added to it when ``remove_duplicate``); ``modules()``;
  ``get_submodule("a.b")``: the cell at a dotted path ("" is this cell; a path that names no
  cell is an AttributeError, as in PyTorch); ``get_parameter("a.weight")`` /
  ``get_buffer("bn.running_mean")``: PyTorch's, the parameter or buffer at a dotted path (an
  AttributeError saying what the last name is when it is none).
- ``apply(fn)``: calls ``fn(cell)`` on every cell below this one, children before their parent,
  then on this cell, and returns it (``net.apply(init_weights)``). A cell reached by two paths
  is visited once (PyTorch visits it once per parent holding it).
- ``requires_grad_(requires_grad=True)``: sets ``requires_grad`` of every parameter (freezing with
  False; a ``kiln.jit`` gradient follows, see kiln/jit.py); returns the cell.
- ``state_dict(destination=None, prefix="", keep_vars=False)``: an ordered dict of name ->
  tensor, each sharing its tensor's memory (detached; with ``keep_vars`` the parameters and
  buffers themselves), in PyTorch's order (a cell's own parameters, then its persistent buffers,
  then its sub-cells') and with every name as in PyTorch: a tied weight appears under each of its
  names (``enc.weight`` and ``dec.weight``, the same memory). Each name starts with ``prefix``;
  a ``destination`` mapping given is filled and returned.
  ``load_state_dict(state_dict, strict=True, assign=False)`` copies values (kiln tensors, NumPy
  arrays or lists, converted to each tensor's dtype) into the parameters and persistent buffers in
  place, so optimizers and jitted functions holding them see the new values; a tied weight takes the
  value of its last name present. Missing and unexpected keys are counted over every name: a state
  dict with only one name of a tied weight misses the other, and one with a non-persistent buffer's
  name has an unexpected key. It checks and converts everything before copying anything: a missing
  or unexpected key (strict) is a KilnValueError listing them, a shape that differs is a ShapeError
  naming the key, a value of a dtype Kiln does not hold (uint32, complex, strings, objects) is a
  DTypeError naming the key, a tensor that cannot take values (an expanded view, whose elements
  share memory) is a KilnValueError naming the key; every dtype Kiln holds converts to every other,
  and big-endian arrays and torch tensors that require grad load as well. It returns
  ``(missing_keys, unexpected_keys)``. With ``assign=True`` (PyTorch's) a value that is a kiln
  tensor is not copied but put in the place of its parameter or buffer, keeping its own dtype: a
  Parameter stays itself, another tensor becomes a Parameter sharing its memory, each with the
  ``requires_grad`` of the parameter it replaces (an integer value where that requires grad is a
  DTypeError), and a buffer takes the tensor (a Parameter detached); a tied weight stays tied,
  taking its last name's value. Other values are copied as without ``assign``. The replaced
  parameters are superseded (kiln/nn/parameter.py): build optimizers after loading, and trace
  ``kiln.jit`` functions again (``clear_cache()``).
- ``train(mode=True)`` sets ``training`` on the cell and calls ``train(mode)`` of each direct
  sub-cell, as PyTorch's, so a sub-cell that overrides ``train`` (to keep its BatchNorm frozen)
  decides for the cells below it; ``eval()`` and ``set_train(mode=True)`` call ``train``
  (Dropout only drops while training). ``mode`` is a bool (else a KilnTypeError); they return
  the cell. A ``kiln.jit`` function whose trace read a cell's ``training`` is traced again when it
  changes (kiln/jit.py).
- ``zero_grad(set_to_none=True)``: clears (or zeroes) every parameter's ``.grad``.
- ``to(device / dtype / tensor)``, ``cpu()``, ``float()``, ``double()``, ``half()``,
  ``bfloat16()``, ``type(dtype)``: PyTorch's conversions of the floating-point parameters and
  buffers (new Parameter objects, the old ones superseded, see kiln/nn/parameter.py: build
  optimizers after converting); a device must be the CPU (``cuda()`` is a KilnValueError; see
  kiln.device).
- ``register_forward_pre_hook(hook, *, prepend=False, with_kwargs=False)`` and
  ``register_forward_hook(hook, *, prepend=False, with_kwargs=False, always_call=False)``:
  PyTorch's forward hooks, called by ``cell(...)`` in the order registered (``prepend`` puts one
  first). ``hook(cell, args)`` runs before ``construct`` with the tuple of positional arguments
  and may return new ones (a tuple, or a single value for one argument); ``hook(cell, args,
  output)`` runs after it and may return a new output; None keeps them. Keyword arguments go to
  ``construct`` but not to the hooks (``with_kwargs=True`` and ``always_call=True`` are
  KilnNotImplementedErrors). Each returns a ``RemovableHandle``: ``handle.remove()`` takes the
  hook off (also on leaving ``with handle:``). A cell without hooks calls ``construct`` directly.
  Hooks are Python: under ``kiln.jit`` they run while the function is traced, so what they
  compute is part of its graph, and a hook added or removed later counts from the next trace
  (``clear_cache()``). They are no state: not in ``state_dict``. As in PyTorch, a deep copy or a
  pickle of a cell keeps its hooks (a pickled hook must be a function pickle can import, not a
  lambda), the copy in dicts of its own, so a handle removes the hook from its own cell only;
  ``copy.copy`` shares them, as it shares the registries.
- ``register_full_backward_pre_hook(hook, prepend=False)`` and ``register_full_backward_hook(hook,
  prepend=False)``: PyTorch's, ``hook(cell, grad_output)`` and ``hook(cell, grad_input,
  grad_output)``, called as gradients flow back through the cell, as its forward hooks in the rest
  (handles, copies, pickles). See kiln/nn/_backward_hooks.py.
- ``register_load_state_dict_pre_hook(hook)``: PyTorch's, ``hook(cell, state_dict, prefix,
  local_metadata, strict, missing_keys, unexpected_keys, error_msgs)``, called by a
  ``load_state_dict`` of this cell or of one above it before any key is matched, with a copy of the
  given mapping that it may change (rename old keys: ``prefix`` is this cell's, ``"fc1."`` say) and
  ``error_msgs``, a list whose messages fail the load (a KilnValueError listing them);
  ``local_metadata`` is an empty dict and ``missing_keys`` / ``unexpected_keys`` empty lists (Kiln
  matches keys once, for the whole state dict, after the hooks). Returns a RemovableHandle; the
  private ``_register_load_state_dict_pre_hook(hook, with_module=False)`` calls ``hook`` without
  the cell, as PyTorch's (kiln.nn.utils.parametrizations.weight_norm uses it).
- ``copy.deepcopy(cell)``: an independent copy, as in PyTorch: new parameters (leaves with the
  same values and ``requires_grad``, no ``.grad``) and buffers, tied weights still tied, ready to
  train on its own. ``pickle`` saves and loads a cell whose class can be imported (see
  kiln/nn/parameter.py and kiln/_tensor.py for tensors).
"""

import collections
import collections.abc
import functools
import itertools
import threading
import types

from .. import _C
from .._checks import checked_bool
from .._device import check_usable, dtype_of_to
from ..autograd import no_grad
from ..errors import DTypeError, KilnNotImplementedError, KilnTypeError, KilnValueError, ShapeError
from ..jit import trace_reads
from ._backward_hooks import BackwardHooks, RemovableHandle
from ._state import converted_like
from .parameter import Parameter, supersede

__all__ = ["Cell", "Module", "LoadResult", "RemovableHandle"]

LoadResult = collections.namedtuple("LoadResult", ["missing_keys", "unexpected_keys"])

# The registries, in the order attribute lookup searches them, and every name Cell keeps in
# __dict__ for itself (no parameter, cell or buffer may take one).
_REGISTRIES = ("_params", "_cells", "_buffers")
_INTERNAL = _REGISTRIES + ("_non_persistent", "_training")

# While a train() call runs on a thread, the ids of the cells its outermost call has checked for
# cycles (see Cell.train); else no attribute.
_train_walk = threading.local()


def _registry_of(cell, name):
    """The registry dict of ``cell`` that holds ``name`` (an empty slot included), searched in
    the order of _REGISTRIES, or None when none does."""
    state = cell.__dict__
    for registry in _REGISTRIES:
        entries = state.get(registry)
        if entries is not None and name in entries:
            return entries
    return None


class _KilnOnly:
    """A public method of Cell that torch.nn.Module lacks (MindSpore's ``construct``, ``cells``,
    ...). A PyTorch model may register a sub-module, parameter or buffer under such a name (and a
    state dict of it has keys such as ``cells.0.weight``), so registering one is allowed and the
    entry shadows the method on that cell: ``net.cells`` is the entry, ``kiln.nn.Cell.cells(net)``
    still calls the method. Kiln's own code therefore never calls one through a cell."""

    def __init__(self, function):
        functools.update_wrapper(self, function)  # the name, documentation and __wrapped__
        self.__func__ = function

    def __set_name__(self, owner, name):
        self._name = name  # an alias (cells_and_names) is shadowed by its own name

    def __get__(self, cell, owner=None):
        if cell is None:
            return self.__func__  # Cell.cells(net): the method, whatever net registers
        entries = _registry_of(cell, self._name)
        if entries is not None:
            return entries[self._name]
        return types.MethodType(self.__func__, cell)


def _shadowable(cls, name):
    """Whether the attribute ``name`` of ``cls`` is a _KilnOnly method that a registered entry
    may shadow (not when a class below Cell defines its own ``name``, such as a construct)."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return isinstance(vars(klass)[name], _KilnOnly)
    return False


def _construct_of(cell):
    """``cell.construct``, bound: also where an entry named "construct" shadows it (see
    _KilnOnly), which only Cell's own construct allows."""
    construct = cell.construct
    # A method is no entry (a cell, a tensor or None): the common case needs no look-up.
    if type(construct) is not types.MethodType and _registry_of(cell, "construct") is not None:
        return types.MethodType(Cell.construct, cell)
    return construct


def _role(cell, name):
    """What ``name`` is in ``cell``, for the errors of get_submodule and its kin."""
    for registry, role in (("_cells", "a sub-cell"), ("_params", "a parameter"),
                           ("_buffers", "a buffer")):
        entries = cell.__dict__[registry]
        if name in entries:
            return f"is {role}" if entries[name] is not None else "is an empty slot (None)"
    return "is a plain attribute" if name in cell.__dict__ else "does not exist"


def _assigned(value, target, what):
    """The kiln tensor ``value`` as load_state_dict(assign=True) puts it in the place of
    ``target``, keeping its own dtype (as PyTorch's): a Parameter for a parameter (``value`` if
    it is one, else one sharing its memory, with ``target``'s requires_grad) and a plain tensor
    for a buffer (a Parameter detached). ``what`` names it in errors: a ShapeError for another
    shape than ``target``'s (a 1-d value of one element stands for a 0-d one, as when copying),
    a DTypeError for an integer or bool value in the place of a parameter that requires grad."""
    if tuple(value.shape) == (1,) and target.ndim == 0:
        value = value.reshape(())  # an old checkpoint's scalar (see kiln/nn/_state.py)
    if tuple(value.shape) != tuple(target.shape):
        raise ShapeError(f"{what} has shape {list(value.shape)} in the state dict, expected "
                         f"{list(target.shape)}")
    if not isinstance(target, Parameter):
        return value.detach() if isinstance(value, Parameter) else value
    if target.requires_grad and not value.dtype.is_floating_point:
        raise DTypeError(f"{what} is {value.dtype.name} in the state dict: assign=True would put "
                         f"it in the place of a parameter that requires grad, which only a "
                         f"floating-point tensor can (load it without assign to convert it)")
    if isinstance(value, Parameter):
        return value
    return Parameter(value, requires_grad=target.requires_grad)


def _converted(tensor, dtype):
    """The parameter or buffer ``tensor`` converted to ``dtype`` for Cell.to: a parameter as a new
    Parameter of its class (a subclass of Parameter is rebuilt as Parameter's copies are,
    ``type(p)(data, requires_grad)``, PyTorch's convention) with its ``requires_grad``,
    attributes and ``.grad`` (converted), which PyTorch's, converted in place, keeps."""
    if not isinstance(tensor, Parameter):
        return tensor.to(dtype)
    data = tensor.detach().to(dtype)
    if isinstance(data, type(tensor)):
        # A lazy cell's placeholder, whose own detach and to give a placeholder of the new dtype
        # with its attributes (kiln/nn/lazy.py).
        return data
    new = type(tensor)(data, tensor.requires_grad)
    new.__dict__.update(tensor.__dict__)
    if tensor.grad is not None:
        new.grad = tensor.grad.to(dtype)
    return new


class Cell:
    """Base class of every layer and model; see the module's documentation."""

    # Read-only and empty: a cell pickled before hooks existed, or whose subclass skipped
    # Cell.__init__, calls construct as before; registering a hook gives it dicts of its own.
    _forward_pre_hooks = _forward_hooks = types.MappingProxyType({})
    _backward_pre_hooks = _backward_hooks = _load_state_dict_pre_hooks = _forward_hooks

    def __init__(self):
        object.__setattr__(self, "_params", collections.OrderedDict())
        object.__setattr__(self, "_cells", collections.OrderedDict())
        object.__setattr__(self, "_buffers", collections.OrderedDict())
        object.__setattr__(self, "_non_persistent", set())  # names of buffers not in state_dict
        # Hook id -> hook, PyTorch's names (code ported from it reads them).
        object.__setattr__(self, "_forward_pre_hooks", collections.OrderedDict())
        object.__setattr__(self, "_forward_hooks", collections.OrderedDict())
        object.__setattr__(self, "_backward_pre_hooks", collections.OrderedDict())
        object.__setattr__(self, "_backward_hooks", collections.OrderedDict())
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
        if "_params" in state and "_buffers" not in state:  # a pickle from before buffers
            state = dict(state, _buffers=collections.OrderedDict(), _non_persistent=set())
        self.__dict__.update(state)

    # ----------------------------------------------------------------------------------------
    # Registration

    def __setattr__(self, name, value):
        params = self.__dict__.get("_params")
        if params is None:
            if isinstance(value, (Parameter, Cell)):
                raise self._before_init(f"assign {type(value).__name__} {name!r}")
            object.__setattr__(self, name, value)
            return
        cells, buffers = self._cells, self._buffers
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
        elif name in buffers:
            # As in PyTorch, a new tensor replaces the buffer (and keeps it persistent or not).
            if value is not None and not isinstance(value, _C.Tensor):
                raise KilnTypeError(f"cannot assign {type(value).__name__} to buffer {name!r} "
                                    f"(expected a kiln.Tensor or None)")
            buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _check_name(self, name, what="a cell"):
        """Refuses a name to register `what` under that state_dict could not tell apart, or that
        would hide an attribute (as PyTorch's add_module / register_parameter); a Kiln-only method
        (see _KilnOnly) is no such attribute."""
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
        if name in _INTERNAL or (hasattr(type(self), name) and not _shadowable(type(self), name)):
            raise KilnValueError(f"{kind}: name {name!r} is already an attribute of {kind}")

    def _check_free(self, name, registry, what):
        """``_check_name``, and refuses a name that an attribute of another kind holds (a
        parameter when registering a buffer, a plain attribute, ...), as PyTorch's
        register_buffer, register_parameter and add_module do: the new entry would hide it or be
        hidden. A name in ``registry`` ("_params", "_cells" or "_buffers") is replaced in its
        place."""
        if "_params" not in self.__dict__:
            raise self._before_init(f"register {what} {name!r}")
        self._check_name(name, what)
        holders = (("_params", "a parameter"), ("_cells", "a sub-cell"), ("_buffers", "a buffer"))
        roles = [role for holder, role in holders
                 if holder != registry and name in self.__dict__[holder]]
        if name in self.__dict__:
            roles.append("an attribute")
        if roles:
            kind = type(self).__name__
            raise KilnValueError(f"{kind}: cannot register {what} as {name!r}: the name is "
                                 f"already {roles[0]} of {kind} (delete it first)")

    def _forget(self, name, keep=None):
        """Removes ``name`` from __dict__ and from every registry but ``keep``."""
        # A name re-assigned with the same kind keeps its place in its registry (as in PyTorch):
        # the order is Sequential's order of calls and state_dict's order of keys.
        self.__dict__.pop(name, None)
        for registry in (self._params, self._cells, self._buffers):
            if registry is not keep:
                registry.pop(name, None)
        if keep is not self._buffers:
            self._non_persistent.discard(name)

    def _before_init(self, what):
        """The error for doing ``what`` to a cell whose subclass has not run Cell.__init__()."""
        return KilnTypeError(f"{type(self).__name__}: cannot {what} before Cell.__init__() "
                             f"(call super().__init__() first)")

    def register_parameter(self, name, param):
        """Registers ``param`` (a kiln.nn.Parameter, or None for an empty slot, as a Linear
        without bias keeps) as ``name``, as PyTorch's register_parameter; a name held by another
        attribute is a KilnValueError, anything but a Parameter or None a KilnTypeError."""
        self._check_free(name, "_params", "a parameter")
        if param is not None and not isinstance(param, Parameter):
            raise KilnTypeError(f"{type(self).__name__}.register_parameter: expected a "
                                f"kiln.nn.Parameter or None for {name!r}, got "
                                f"{type(param).__name__} (wrap a tensor in kiln.nn.Parameter)")
        self._params[name] = param

    def add_module(self, name, module):
        """Registers ``module`` (a Cell, or None for an empty slot) as the sub-cell ``name``, as
        PyTorch's add_module; a name held by another attribute is a KilnValueError, anything but
        a Cell or None a KilnTypeError. Returns nothing."""
        self._check_free(name, "_cells", "a cell")
        if module is not None and not isinstance(module, Cell):
            raise KilnTypeError(f"{type(self).__name__}.add_module: expected a kiln.nn.Cell or "
                                f"None for {name!r}, got {type(module).__name__}")
        self._cells[name] = module

    register_module = add_module

    def register_buffer(self, name, tensor, persistent=True):
        """Registers ``tensor`` (a kiln.Tensor, or None) as the buffer ``name``: listed by
        ``buffers()``, never by ``parameters()``; in ``state_dict`` when ``persistent`` (see the
        module's documentation, also for buffers under kiln.jit). Registering a buffer's name
        again replaces it; a name held by another attribute is a KilnValueError, a Parameter or
        a value that is no tensor a KilnTypeError, as is a ``persistent`` that is no bool."""
        self._check_free(name, "_buffers", "a buffer")
        kind = type(self).__name__
        if isinstance(tensor, Parameter):
            raise KilnTypeError(f"{kind}.register_buffer: {name!r} is a kiln.nn.Parameter; "
                                f"register it with register_parameter (or pass a plain tensor)")
        if tensor is not None and not isinstance(tensor, _C.Tensor):
            raise KilnTypeError(f"{kind}.register_buffer: expected a kiln.Tensor or None for "
                                f"{name!r}, got {type(tensor).__name__}")
        if not isinstance(persistent, bool):
            raise KilnTypeError(f"{kind}.register_buffer: persistent must be a bool, got "
                                f"{type(persistent).__name__} {persistent!r}")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)

    def __getattr__(self, name):
        # Only reached when normal lookup fails: registered parameters, cells and buffers live in
        # the registries, not in __dict__.
        entries = _registry_of(self, name)
        if entries is not None:
            return entries[name]
        if name in _INTERNAL:
            # Every traversal starts here: a subclass that skipped super().__init__() is named
            # instead of the missing registry.
            raise self._before_init("list parameters or sub-cells")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __delattr__(self, name):
        if name in self._params or name in self._cells or name in self._buffers:
            self._forget(name)
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._params) | set(self._cells)
                      | set(self._buffers))

    # ----------------------------------------------------------------------------------------
    # Calling

    def __call__(self, *args, **kwargs):
        if (self._forward_pre_hooks or self._forward_hooks or self._backward_pre_hooks
                or self._backward_hooks):
            return self._call_with_hooks(args, kwargs)
        return _construct_of(self)(*args, **kwargs)

    def _call_with_hooks(self, args, kwargs):
        # Over copies: a hook may remove itself or register another while it runs.
        for hook in tuple(self._forward_pre_hooks.values()):
            result = hook(self, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        backward = BackwardHooks.of(self)
        if backward is not None:
            args = backward.wrap_inputs(args)
        output = _construct_of(self)(*args, **kwargs)
        for hook in tuple(self._forward_hooks.values()):
            result = hook(self, args, output)
            if result is not None:
                output = result
        return output if backward is None else backward.wrap_output(output)

    def _add_hook(self, registry, what, hook, prepend, with_kwargs, always_call=False):
        """Registers ``hook`` in the hook dict ``registry``; returns its RemovableHandle."""
        kind = type(self).__name__
        if not callable(hook):
            raise KilnTypeError(f"{kind}.{what}: expected a callable hook, got "
                                f"{type(hook).__name__} {hook!r}")
        for name, flag in (("prepend", prepend), ("with_kwargs", with_kwargs),
                           ("always_call", always_call)):
            checked_bool(f"{kind}.{what}", name, flag)
        if with_kwargs:
            raise KilnNotImplementedError(f"{kind}.{what}: with_kwargs=True is not supported "
                                          f"(hooks get the positional arguments only)")
        if always_call:
            raise KilnNotImplementedError(f"{kind}.{what}: always_call=True is not supported "
                                          f"(a forward hook runs when construct returns)")
        hooks = self.__dict__.get(registry)
        if hooks is None:  # the class's read-only default (see there)
            hooks = self.__dict__[registry] = collections.OrderedDict()
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """Registers ``hook(cell, args)``, called before ``construct`` with the tuple of
        positional arguments; a result that is not None replaces them (a tuple, or one value for
        a single argument). Returns a RemovableHandle. See the module's documentation."""
        return self._add_hook("_forward_pre_hooks", "register_forward_pre_hook", hook, prepend,
                              with_kwargs)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False,
                              always_call=False):
        """Registers ``hook(cell, args, output)``, called after ``construct`` with the positional
        arguments it got and its output; a result that is not None replaces the output. Returns
        a RemovableHandle. See the module's documentation."""
        return self._add_hook("_forward_hooks", "register_forward_hook", hook, prepend,
                              with_kwargs, always_call)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """Registers ``hook(cell, grad_output)``, PyTorch's; returns a RemovableHandle. See
        kiln/nn/_backward_hooks.py."""
        return self._add_hook("_backward_pre_hooks", "register_full_backward_pre_hook", hook,
                              prepend, False)

    def register_full_backward_hook(self, hook, prepend=False):
        """Registers ``hook(cell, grad_input, grad_output)``, PyTorch's; returns a
        RemovableHandle. See kiln/nn/_backward_hooks.py."""
        return self._add_hook("_backward_hooks", "register_full_backward_hook", hook, prepend,
                              False)

    def register_load_state_dict_pre_hook(self, hook):
        """Registers ``hook(cell, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)``, called by load_state_dict before it matches keys (see the
        module's documentation). Returns a RemovableHandle."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        """PyTorch's private form: ``hook`` takes no cell first, unless ``with_module``."""
        checked_bool(f"{type(self).__name__}._register_load_state_dict_pre_hook", "with_module",
                     with_module)
        handle = self._add_hook("_load_state_dict_pre_hooks", "register_load_state_dict_pre_hook",
                                hook, False, False)
        self._load_state_dict_pre_hooks[handle.id] = (hook, with_module)
        return handle

    def _after_load_pre_hooks(self, state_dict, strict):
        """``state_dict`` as the load_state_dict pre-hooks of this cell and those below it leave
        it: a copy they may change, when any has one."""
        hooked = [(name, cell) for name, cell in self._walk() if cell._load_state_dict_pre_hooks]
        if not hooked:
            return state_dict
        state_dict, errors = collections.OrderedDict(state_dict), []
        for name, cell in hooked:
            prefix = f"{name}." if name else ""
            for hook, with_module in tuple(cell._load_state_dict_pre_hooks.values()):
                args = (state_dict, prefix, {}, strict, [], [], errors)
                if with_module:
                    hook(cell, *args)
                else:
                    hook(*args)
        if errors:
            raise KilnValueError(f"load_state_dict for {type(self).__name__}: "
                                 + "; ".join(map(str, errors)))
        return state_dict

    @_KilnOnly
    def construct(self, *args, **kwargs):
        """The computation; subclasses override this (or ``forward``)."""
        if type(self).forward is Cell.forward:
            raise KilnNotImplementedError(f"{type(self).__name__} defines neither construct() "
                                          f"nor forward()")
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        """PyTorch's name for ``construct``."""
        return _construct_of(self)(*args, **kwargs)

    # ----------------------------------------------------------------------------------------
    # Traversal

    def _walk(self, prefix="", remove_duplicate=True, memo=None):
        """(name, cell) for this cell and every cell below it, parents first (see named_cells).
        ``memo`` (optional; default: none) is PyTorch's named_modules' set of cells to leave out
        with what is below them, to which each cell listed is added when ``remove_duplicate``.
        A cell below itself (``net.loop = net``) is a KilnValueError: its names never end."""
        listed = set()  # ids: a cell met again is a duplicate, or closes a cycle
        stack = [(prefix, self, ())]  # with the (id, name) of each cell above, to spot a cycle
        while stack:
            name, cell, above = stack.pop()
            if id(cell) in listed:
                # Only a cell met before can close a cycle; a shared sub-cell is no ancestor.
                for ancestor_id, ancestor_name in above:
                    if ancestor_id == id(cell):
                        where = (repr(ancestor_name) if ancestor_name
                                 else f"the top-level {type(cell).__name__}")
                        raise KilnValueError(f"cell {name!r} contains itself: it is {where}, "
                                             f"which holds it (a cycle of sub-cells)")
                if remove_duplicate:
                    continue
            if memo is not None:
                if cell in memo:
                    continue
                if remove_duplicate:
                    memo.add(cell)
            listed.add(id(cell))
            yield name, cell
            path = above + ((id(cell), name),)
            children = [(f"{name}.{n}" if name else n, c, path) for n, c in cell._cells.items()
                        if c is not None]
            stack.extend(reversed(children))

    @_KilnOnly
    def named_cells(self, prefix="", remove_duplicate=True):
        """(name, cell) for this cell and every cell below it, parents first; a cell reached by
        two paths appears once, under its first name, unless ``remove_duplicate`` is False. A
        cell below itself (``net.loop = net``) is a KilnValueError: its names never end."""
        return self._walk(prefix, remove_duplicate)

    cells_and_names = _KilnOnly(named_cells.__func__)

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """PyTorch's named_modules: ``named_cells(prefix, remove_duplicate)``, leaving out the
        cells in ``memo`` (a set; optional) and what is below them; with ``remove_duplicate``
        each cell listed is added to ``memo``."""
        if memo is not None and not isinstance(memo, collections.abc.MutableSet):
            raise KilnTypeError(f"{type(self).__name__}.named_modules: memo must be a set of "
                                f"cells or None, got {type(memo).__name__}")
        return self._walk(prefix, remove_duplicate, memo)

    def modules(self):
        """This cell and every cell below it, each once, parents first (``named_cells`` without
        the names)."""
        return (cell for _, cell in self._walk())

    @_KilnOnly
    def cells(self):
        """The direct sub-cells, a sub-cell held under two names twice (MindSpore's)."""
        return (cell for cell in self._cells.values() if cell is not None)

    def named_children(self):
        """(name, cell) for each direct sub-cell, once, under its first name (PyTorch's)."""
        seen = set()
        for name, cell in self._cells.items():
            if cell is not None and id(cell) not in seen:
                seen.add(id(cell))
                yield name, cell

    def children(self):
        """Each direct sub-cell once (``named_children`` without the names)."""
        return (cell for _, cell in self.named_children())

    def _check_target(self, method, target):
        """``target``, a dotted path for ``method`` (get_submodule and its kin), if it is a str;
        else a KilnTypeError."""
        if not isinstance(target, str):
            raise KilnTypeError(f"{type(self).__name__}.{method}: target must be a str (a dotted "
                                f"path such as 'layers.0'), got {type(target).__name__} "
                                f"{target!r}")
        return target

    def _submodule(self, method, target, path):
        """The cell at the dotted path ``path`` below this one ("" is this cell) for ``method``
        called with ``target``: a part that names no sub-cell is an AttributeError naming it."""
        cell, parts = self, []
        for part in path.split(".") if path else ():
            found = cell._cells.get(part)
            if found is None:
                self._raise_missing(method, target, cell, parts, part, "sub-cell")
            cell = found
            parts.append(part)
        return cell

    def _raise_missing(self, method, target, cell, parts, name, kind):
        """The AttributeError of ``method(target)``: ``cell``, at the path ``parts``, has no
        ``kind`` (a "sub-cell", "parameter" or "buffer") called ``name``."""
        where = (f"{type(cell).__name__} {'.'.join(parts)!r}" if parts
                 else f"the top-level {type(cell).__name__}")
        raise AttributeError(f"{type(self).__name__}.{method}({target!r}): {where} has no "
                             f"{kind} {name!r} (the name {_role(cell, name)})")

    def get_submodule(self, target):
        """The cell at the dotted path ``target`` below this one ("" is this cell), as PyTorch's
        get_submodule: a path that names no sub-cell (a missing name, a parameter, an empty
        slot) is an AttributeError naming the part that is not one; a ``target`` that is no str a
        KilnTypeError."""
        return self._submodule("get_submodule", target,
                               self._check_target("get_submodule", target))

    def _get_member(self, method, target, registry, kind):
        """The entry of ``registry`` at the dotted path ``target``, for get_parameter and
        get_buffer (see there)."""
        path, _, name = self._check_target(method, target).rpartition(".")
        cell = self._submodule(method, target, path)
        found = cell.__dict__[registry].get(name)
        if found is None:
            self._raise_missing(method, target, cell, path.split(".") if path else [], name,
                                kind)
        return found

    def get_parameter(self, target):
        """The parameter at the dotted path ``target`` ("block.fc.weight"), as PyTorch's
        get_parameter: a path whose cells do not exist, or whose last part names no parameter (a
        buffer, a sub-cell, an empty slot, nothing), is an AttributeError saying what the name
        is; a ``target`` that is no str a KilnTypeError."""
        return self._get_member("get_parameter", target, "_params", "parameter")

    def get_buffer(self, target):
        """The buffer at the dotted path ``target`` ("bn.running_mean"), persistent or not, as
        PyTorch's get_buffer; errors as ``get_parameter``'s."""
        return self._get_member("get_buffer", target, "_buffers", "buffer")

    def apply(self, fn):
        """Calls ``fn(cell)`` on every cell below this one, each once, children before their
        parent (in registration order), then on this cell; returns this cell. A ``fn`` that
        cannot be called is a KilnTypeError; a cell below itself a KilnValueError, before
        ``fn`` runs."""
        if not callable(fn):
            raise KilnTypeError(f"{type(self).__name__}.apply: fn must be callable, got "
                                f"{type(fn).__name__} {fn!r}")
        for _ in self._walk():  # refuses a cycle before fn changes anything
            pass
        order, seen, stack = [], set(), [(self, False)]
        while stack:
            cell, children_done = stack.pop()
            if children_done:
                order.append(cell)
            elif id(cell) not in seen:
                seen.add(id(cell))
                stack.append((cell, True))
                stack.extend((child, False) for child in reversed(cell._cells.values())
                             if child is not None)
        for cell in order:
            fn(cell)
        return self

    def _named_members(self, registry, prefix, recurse, remove_duplicate):
        """(dotted name, value) for the entries of ``registry`` ("_params" or "_buffers") that
        are not None, of this cell and (``recurse``) every cell below it."""
        seen = set()
        cells = self._walk(prefix, remove_duplicate) if recurse else [(prefix, self)]
        for cell_name, cell in cells:
            for name, value in getattr(cell, registry).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield (f"{cell_name}.{name}" if cell_name else name), value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, parameter) pairs; a parameter reached by two names appears once, under
        its first name, unless ``remove_duplicate`` is False (then under every name)."""
        return self._named_members("_params", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        """Every parameter, each once (see ``named_parameters``); with ``recurse=False`` only this
        cell's own."""
        return (param for _, param in self.named_parameters(recurse=recurse))

    @_KilnOnly
    def trainable_params(self, recurse=True):
        """The parameters with requires_grad, as a list (MindSpore's Cell.trainable_params)."""
        return [p for p in self.parameters(recurse) if p.requires_grad]

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, buffer) pairs for every buffer that is not None, persistent or not; a
        buffer reached by two names appears once unless ``remove_duplicate`` is False."""
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        """Every buffer, each once (see ``named_buffers``); with ``recurse=False`` only this
        cell's own."""
        return (buffer for _, buffer in self.named_buffers(recurse=recurse))

    def requires_grad_(self, requires_grad=True):
        """Sets ``requires_grad`` of every parameter to ``requires_grad`` (a bool, else a
        KilnTypeError): False freezes the cell, so ``trainable_params()`` and gradients leave it
        out. Returns the cell."""
        if not isinstance(requires_grad, bool):
            raise KilnTypeError(f"{type(self).__name__}.requires_grad_: requires_grad must be a "
                                f"bool, got {type(requires_grad).__name__} {requires_grad!r}")
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    # ----------------------------------------------------------------------------------------
    # State

    def _named_state(self):
        """(dotted name, tensor) for state_dict: each cell's parameters, then its persistent
        buffers, parents first, under every name of a shared one (PyTorch's order)."""
        for cell_name, cell in self._walk(remove_duplicate=False):
            prefix = f"{cell_name}." if cell_name else ""
            for name, param in cell._params.items():
                if param is not None:
                    yield prefix + name, param
            for name, buffer in cell._buffers.items():
                if buffer is not None and name not in cell._non_persistent:
                    yield prefix + name, buffer

    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """An ordered dict of dotted name -> tensor sharing the parameter's or persistent
        buffer's memory (detached), with every name of a tied parameter (as PyTorch's). As in
        PyTorch, each name starts with ``prefix`` (a str, "model." say), the entries go into
        ``destination`` (a mutable mapping, returned) when one is given, and with ``keep_vars``
        they are the parameters and buffers themselves. An argument of the wrong kind is a
        KilnTypeError."""
        kind = type(self).__name__
        if destination is None:
            destination = collections.OrderedDict()
        elif not isinstance(destination, collections.abc.MutableMapping):
            raise KilnTypeError(f"{kind}.state_dict: destination must be a mutable mapping (an "
                                f"OrderedDict) or None, got {type(destination).__name__}")
        if not isinstance(prefix, str):
            raise KilnTypeError(f"{kind}.state_dict: prefix must be a str, got "
                                f"{type(prefix).__name__} {prefix!r}")
        checked_bool(f"{kind}.state_dict", "keep_vars", keep_vars)
        state = list(self._named_state())  # a cycle is refused before destination changes
        for name, tensor in state:
            destination[prefix + name] = tensor if keep_vars else tensor.detach()
        return destination

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copies ``state_dict``'s values into the parameters and persistent buffers in place, or
        with ``assign`` puts its kiln tensors in their place (see the module's documentation);
        returns LoadResult(missing_keys, unexpected_keys). A ``state_dict`` that is not a mapping
        (a list of pairs, None) is a KilnTypeError, as in PyTorch, as is an ``assign`` that is
        no bool."""
        kind = type(self).__name__
        if not isinstance(state_dict, collections.abc.Mapping):
            raise KilnTypeError(f"load_state_dict for {kind}: expected a mapping of name -> "
                                f"tensor, got {type(state_dict).__name__}")
        checked_bool(f"load_state_dict for {kind}", "assign", assign)
        state_dict = self._after_load_pre_hooks(state_dict, strict)
        targets = dict(self._named_state())  # state_dict's names
        missing = [name for name in targets if name not in state_dict]
        unexpected = [name for name in state_dict if name not in targets]
        if strict and (missing or unexpected):
            parts = []
            if missing:
                parts.append(f"missing keys {missing}")
            if unexpected:
                parts.append(f"unexpected keys {unexpected}")
            raise KilnValueError(f"load_state_dict for {kind}: " + " and ".join(parts))
        # A tied tensor takes the value of its last name present.
        latest = {id(target): name for name, target in targets.items() if name in state_dict}
        # Every value is checked (and converted, for a copy) before anything changes, so a bad
        # one changes nothing.
        copies, replacements = [], {}
        for name in latest.values():
            target, value = targets[name], state_dict[name]
            what = f"load_state_dict for {kind}: {name!r}"
            if assign and isinstance(value, _C.Tensor):
                replacements[id(target)] = _assigned(value, target, what)
            else:
                copies.append((target, converted_like(value, target, what)))
        with no_grad():
            for target, value in copies:
                target[...] = value
        if replacements:
            self._replace_state(replacements, f"{kind}.load_state_dict(assign=True)")
        return LoadResult(missing, unexpected)

    def _replace_state(self, replacements, how):
        """Puts ``replacements[id(old)]`` in the place of every parameter and buffer ``old`` of
        this cell and the cells below it that it names (under every name, so tied ones stay
        tied); each replaced parameter is superseded (kiln/nn/parameter.py), ``how`` saying by
        what, and a parameter that replaces one takes its ``requires_grad``."""
        for cell_name, cell in self._walk():
            prefix = f"{cell_name}." if cell_name else ""
            for name, param in cell._params.items():
                new = replacements.get(id(param)) if param is not None else None
                if new is not None and new is not param:
                    new.requires_grad_(param.requires_grad)
                    cell._params[name] = new
                    supersede(param, f"replaced by {how} as {prefix + name!r}")
            for name, buffer in cell._buffers.items():
                if buffer is not None and id(buffer) in replacements:
                    cell._buffers[name] = replacements[id(buffer)]

    def train(self, mode=True):
        """Sets ``training`` to ``mode`` (a bool, else a KilnTypeError) on this cell, then calls
        ``train(mode)`` of each sub-cell, as PyTorch's: a sub-cell whose class overrides train
        (to keep a BatchNorm frozen, say) decides for itself and the cells below it. Returns the
        cell; a cell below itself is a KilnValueError before any flag changes."""
        if not isinstance(mode, bool):
            raise KilnTypeError(f"{type(self).__name__}.train: mode must be a bool, got "
                                f"{type(mode).__name__} {mode!r}")
        checked = getattr(_train_walk, "checked", None)
        outermost = checked is None
        if outermost:
            checked = _train_walk.checked = set()
        try:
            if id(self) not in checked:
                # A cycle would recurse forever: walking the cells refuses it first. Only the
                # outermost call walks (the calls below reach cells it has checked), unless an
                # overridden train() reaches out to other cells.
                checked.update(id(cell) for _, cell in self._walk())
            self.training = mode
            for child in self.children():
                child.train(mode)
        finally:
            if outermost:
                del _train_walk.checked
        return self

    def eval(self):
        """``train(False)``; returns the cell."""
        return self.train(False)

    @_KilnOnly
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
    # Conversion

    def to(self, *args, **kwargs):
        """PyTorch's ``to(device)``, ``to(dtype)``, ``to(tensor)``, ``to(device, dtype)`` and the
        keywords ``device``, ``dtype``, ``non_blocking``: converts the floating-point parameters
        and buffers of this cell and every cell below it to ``dtype`` (integer and bool ones keep
        theirs, as PyTorch's) and returns the cell. A device must be the CPU (kiln.device), where
        Kiln's tensors live. A Kiln tensor keeps its dtype for life, so a converted parameter is a
        new Parameter of its class (same name, ``requires_grad``, attributes and ``.grad``
        converted; a lazy cell's placeholder stays a placeholder, of the new dtype; a
        parameter or buffer shared by two cells stays shared), and the old one is superseded (see
        kiln/nn/parameter.py): an optimizer made before holds the old ones, so build it after
        converting (PyTorch converts in place)."""
        dtype = dtype_of_to(f"{type(self).__name__}.to", args, kwargs, _C.dtype, _C.Tensor)
        if dtype is None:
            return self
        if not dtype.is_floating_point:
            raise KilnTypeError(f"{type(self).__name__}.to: expected a floating-point dtype, "
                                f"got {dtype.name} (only floating-point parameters convert)")
        replacements = {}  # id(old tensor) -> its conversion, made once for a shared one
        for _, cell in self._walk():
            for tensor in itertools.chain(cell._params.values(), cell._buffers.values()):
                if (tensor is not None and tensor.dtype.is_floating_point
                        and tensor.dtype != dtype and id(tensor) not in replacements):
                    replacements[id(tensor)] = _converted(tensor, dtype)
        self._replace_state(replacements, f"{type(self).__name__}.to({dtype.name})")
        return self

    def cpu(self):
        """The cell itself: Kiln's tensors are on the CPU (PyTorch's ``cpu()``)."""
        return self

    def cuda(self, device=None):
        """A KilnValueError: Kiln runs on the CPU (PyTorch's ``cuda()``)."""
        check_usable(f"{type(self).__name__}.cuda", "cuda" if device is None else f"cuda:{device}")

    def float(self):  # noqa: A003  (PyTorch's names)
        """``to(kiln.float32)``."""
        return self.to(_C.dtype.float32)

    def double(self):
        """``to(kiln.float64)``."""
        return self.to(_C.dtype.float64)

    def half(self):
        """``to(kiln.float16)``."""
        return self.to(_C.dtype.float16)

    def bfloat16(self):
        """``to(kiln.bfloat16)``."""
        return self.to(_C.dtype.bfloat16)

    def type(self, dst_type):  # noqa: A003
        """``to(dst_type)`` (a floating-point kiln.dtype)."""
        return self.to(dtype=dst_type)

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
