"""kiln.optim.Optimizer: the base class of Kiln's optimizers.

    opt = kiln.optim.Adam(net.trainable_params(), lr=1e-3)

    # PyTorch style: gradients in each parameter's .grad
    loss = loss_fn(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()

    # MindSpore style: gradients as a tuple in the order of opt.parameters
    grad_fn = kiln.value_and_grad(forward, None, opt.parameters)
    loss, grads = grad_fn(x, y)
    opt(grads)

``params`` is an iterable of parameters (leaf tensors: a tensor computed by an op that requires
grad is a KilnValueError, as in PyTorch), or of dicts ("parameter groups") each holding
``params`` and any hyperparameter that differs from the optimizer's defaults (``lr``, ...).
``opt.parameters`` is the flat list of every group's parameters; ``opt.param_groups`` the groups
(dicts: set ``group["lr"] = v`` to change a learning rate, as a scheduler does);
``opt.state[i]`` the state of ``opt.parameters[i]``, which ``opt.state[p]`` (PyTorch's key, the
parameter itself) also reaches, as ``p in opt.state`` tells whether p is one.

An update runs under ``kiln.no_grad()`` and writes the parameters and the optimizer's state in
place, so it can run inside a ``kiln.jit`` function: everything it reads (state, learning rate,
momentum) is a tensor that exists before the first call. The learning rate is a 0-d tensor per
group and dtype, and the momentum -- SGD's and RMSprop's ``momentum``, the first of the Adam
family's ``betas`` (beta1), the hyperparameters a scheduler cycles -- a float64 0-d tensor per
group; setting ``group["lr"]``, ``group["momentum"]`` or ``group["betas"] = (beta1, beta2)``
(also through ``update``, ``setdefault`` or ``load_state_dict``) writes them at once, so a jitted
step uses the values set between its calls (the other hyperparameters, beta2 included, are read
as Python numbers and are fixed in a jitted step once traced, and changing one after a trace
warns that the jitted step keeps the old value; so is whether a parameter has a momentum buffer:
see SGD's documentation). Only assignment writes them: changing a betas list in
place (``group["betas"][0] = b``) does not. Setting them inside a ``kiln.jit`` function is a
KilnValueError: the assignment would run once, while tracing, not at each call. A new value is
checked as the constructor checks it. A copy of a group (``dict(group)``, ``group.copy()``,
``copy.copy(group)``) is a plain dict that no longer drives the optimizer. For float16 / bfloat16
parameters the rate's tensor is float32, as PyTorch's rate is a Python float: in 16 bits a
learning rate is off in the third digit (bfloat16) or, below 6e-5, loses digits until it is 0
(float16), and AdamW's ``1 - lr * weight_decay`` rounds to the 16-bit grid near 1. A 0-d tensor
promotes like any other, so the update's terms with the rate are float32 temporaries the size of
the parameter, rounded once into it (PyTorch computes each op's result in the parameter's dtype):
more precise, at twice those temporaries' memory. The momentum is float64 so that the factors
computed from it (``1 - beta1``, the bias correction ``1 - beta1**t``) are PyTorch's, computed in
Python floats; the update rounds them to the rate's dtype, as it does its Python numbers.

Every optimizer also takes PyTorch's keyword-only choices of implementation, ``foreach=None``,
``fused=None``, ``capturable=False`` and ``differentiable=False`` (code written for PyTorch
passes them, nanoGPT's ``fused=True`` say): each is a bool (or None, the first two), else a
KilnTypeError, and changes nothing, Kiln having one implementation of each update, except
``differentiable=True``, a KilnNotImplementedError (an update is not recorded by autograd). They
are not hyperparameters: not in ``param_groups`` nor the state dict.

- ``step(closure=None)``: one update from ``p.grad`` (parameters whose grad is None are skipped);
  ``closure`` (optional) recomputes and returns the loss, which ``step`` returns.
- ``opt(grads)``: one update from ``grads`` (a tuple or list as long as ``parameters`` of kiln
  tensors shaped as their parameters; a None entry skips its parameter, and so does a parameter
  that does not require grad, as in PyTorch, where a frozen parameter's grad is None: kiln.grad
  gives it zeros, which weight decay and momentum would still move it by). A parameter that
  requires grad but that the loss does not use (a branch not taken, an unused head) also gets
  zeros from kiln.grad, and is moved by decay and momentum, where PyTorch's eager loop leaves its
  ``.grad`` None and skips it: give such a parameter a None entry, or leave it out of the
  optimizer, to keep it still; a wrong length is a
  KilnValueError, an entry of another type a KilnTypeError, one of another shape a ShapeError,
  each raised before any parameter changes.
- ``zero_grad(set_to_none=True)``: clears (or zeroes) the parameters' ``.grad``.
- ``state_dict()`` / ``load_state_dict(d)``: the hyperparameters of each group and copies of the
  state tensors, keyed by parameter index. Loading checks everything before changing anything:
  the structure (``param_groups`` a list of dicts with ``params`` lists, ``state`` a dict of
  dicts; KilnTypeError / KilnValueError), the group layout and the hyperparameters (as the
  constructor does; KilnValueError), the state's keys and shapes (KilnValueError / ShapeError), and
  converts the state's values (kiln tensors or NumPy arrays, as ``Cell.load_state_dict`` does;
  DTypeError), then copies them in place. The state is keyed by int parameter index, 0 to N-1 in
  ``param_groups`` order: any other key (such as the string "0" a JSON round trip leaves) is a
  KilnValueError naming it, not state dropped without a word. A parameter with no entry, or an
  empty one, gets fresh state (zeros, as when it was added): PyTorch leaves out the parameters
  that never had a gradient. A None value of state the optimizer may lack (``_lazy_state``, such
  as SGD's momentum buffer, which older PyTorch saved as None for momentum 0) is that state
  absent.

Hyperparameters are checked when a group is added or loaded: a number of the wrong kind (None, a
string, a bool) is a KilnTypeError, one out of range a KilnValueError, each naming the argument.

A subclass defines ``_init_state(param, group)`` (a dict of state tensors, created when the
parameter is added) and ``_update(param, grad, state, group, lr)`` (in place; ``lr`` is the 0-d
learning-rate tensor, of the parameter's dtype or float32 for a 16-bit one), ``_numeric``
(optional; default: ``lr`` only) for its numeric hyperparameters and their lower bounds (checked
by ``check_number``; ``_check_setting`` checks one hyperparameter, and a subclass overrides it
for its others), ``_momentum_key`` (optional; default: None) for the hyperparameter that holds
its momentum ("momentum", or "betas", whose first item it is), and ``_lazy_state`` (optional;
default: none) for state that ``_update`` creates when first needed (as ``_lazy_zeros(key,
param)`` makes it: zero-filled, shaped and typed like the parameter unless the subclass says
otherwise).

Helpers for ``_update`` that several optimizers share: ``scalar_state`` (a 0-d state tensor such
as the step count), ``count_step`` (counts a step, returns the count in float64),
``momentum_tensor`` (the group's momentum tensor), ``decayed_gradient`` (``maximize`` and weight
decay, L2 or decoupled), ``running_average_`` (an exponential moving average in place) and
``self._lazy_entry`` (state of ``_lazy_state``, made at the first eager step that needs it).
"""

import numbers
import warnings

from .. import _C
from ..autograd import enable_grad, no_grad
from ..errors import KilnNotImplementedError, KilnTypeError, KilnValueError, ShapeError
from ..nn._state import converted_like
from ..nn.parameter import superseded

__all__ = ["Optimizer"]

# How the out-of-range messages describe an argument, where not by its name.
_DESCRIPTIONS = {"lr": "learning rate"}


def check_number(owner, name, value, minimum=None):
    """Checks a numeric argument ``name`` of ``owner`` (an optimizer or scheduler name): a real
    number (a Python or NumPy int or float) -- else a KilnTypeError; a bool is refused too, a flag
    given in the wrong place -- and, when ``minimum`` is given, at least that (else, NaN included,
    a KilnValueError)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise KilnTypeError(f"{owner}: {name} must be a real number, got {value!r} "
                            f"({type(value).__name__})")
    if minimum is not None and not value >= minimum:
        raise KilnValueError(f"{owner}: invalid {_DESCRIPTIONS.get(name, name)} {value}, "
                             f"expected {name} >= {minimum}")


def _rate_dtype(dtype):
    """The dtype of the learning-rate tensor of parameters of ``dtype``: float32 for 16-bit
    floats (see the module's docstring), else ``dtype``."""
    return _C.dtype.float32 if dtype in (_C.dtype.float16, _C.dtype.bfloat16) else dtype


def scalar_state(param, value=0.0):
    """A new 0-d state tensor of ``param`` holding ``value`` (a step count, NAdam's product of
    momentum factors): float64 for float64 parameters or a float64 default dtype
    (kiln.set_default_dtype), as PyTorch's follow its default dtype, and float32 otherwise, so that
    16-bit parameters still count steps exactly."""
    wide = _C.dtype.float64 in (param.dtype, _C.get_default_dtype())
    return _C.mint.full((), value, dtype=_C.dtype.float64 if wide else _C.dtype.float32)


def count_step(state):
    """Adds 1 to ``state["step"]`` in place and returns the new count as a float64 0-d tensor:
    the factors that depend on it (bias corrections, decayed rates) are computed in float64, as
    PyTorch computes them in Python floats, and rounded to the learning rate's dtype only then.
    A tensor, not a Python number, so that a ``kiln.jit`` step counts at each call."""
    step = state["step"]
    step += 1
    return step.to(_C.dtype.float64)


def momentum_tensor(group):
    """The float64 0-d tensor holding ``group``'s momentum (the hyperparameter named by the
    optimizer's ``_momentum_key``), which setting that hyperparameter writes: factors computed
    from it follow the momentum a scheduler sets, also in a jitted step."""
    return group._momentum


def decayed_gradient(param, grad, group, lr, decoupled=False):
    """The gradient an update follows, with the group's ``maximize`` and ``weight_decay`` applied
    as PyTorch applies them: negated when maximizing, then plus ``weight_decay * param`` (an L2
    penalty); or, with ``decoupled``, the gradient as is while ``param`` shrinks in place by
    ``1 - lr * weight_decay`` (AdamW's decay; ``lr`` is the rate tensor, float32 for a 16-bit
    parameter, so the factor is not rounded to the 16-bit grid near 1)."""
    if group["maximize"]:
        grad = -grad
    decay = group["weight_decay"]
    if decay != 0.0:
        if decoupled:
            _C.mint.mul(param, 1 - lr * decay, out=param)
        else:
            grad = grad + decay * param
    return grad


def running_average_(average, value, decay):
    """``average = decay * average + (1 - decay) * value`` in place: the exponential moving
    averages of Adam's moments and RMSprop's squares (PyTorch's ``lerp_`` and
    ``mul_().addcmul_()``). ``decay`` is a Python number or a momentum tensor (beta1; see
    ``momentum_tensor``), whose ``1 - decay`` is computed in float64, as PyTorch's in Python
    floats, before both are rounded to the rate's dtype, as a Python number is."""
    weight = 1 - decay
    if isinstance(decay, _C.Tensor):
        dtype = _rate_dtype(average.dtype)
        decay, weight = decay.to(dtype), weight.to(dtype)
    _C.mint.mul(average, decay, out=average)
    average += weight * value


class _ParamGroup(dict):
    """A parameter group: a dict that also holds the group's learning-rate tensors (``_rates``:
    parameter dtype -> 0-d tensor) and momentum tensor (``_momentum``: float64 0-d, or None for
    an optimizer without a momentum), and writes ``lr`` and the momentum hyperparameter into them
    when it is set, so a jitted step, which reads the tensors, follows the values set between its
    calls. ``owner`` (the optimizer's class) checks the values and gives the errors' prefix."""

    def __init__(self, entries, owner, rates, momentum):
        super().__init__(entries)
        self._owner = owner
        self._rates = rates
        self._momentum = momentum
        self._traced = False  # whether a kiln.jit trace has read the group's Python numbers

    def __setitem__(self, key, value):
        if self._traced and key in self and _fixed_when_traced(key, self[key], value,
                                                               self._owner._momentum_key):
            warnings.warn(f"{self._owner.__name__}: {key} changed from {self[key]!r} to "
                          f"{value!r} after a kiln.jit function traced a step of this "
                          f"optimizer: that function keeps the value it was traced with (only "
                          f"lr and the momentum are read at each call). Set it before the "
                          f"first call, or make the jitted function again.", stacklevel=2)
        if key == "lr" or key == self._owner._momentum_key:
            self._owner._check_setting(key, value)
            if _C.jit.is_tracing():
                raise KilnValueError(f"{self._owner.__name__}: a parameter group's {key} cannot "
                                     f"be set inside a kiln.jit function (the assignment would "
                                     f"run once, while tracing, not at each call); set it "
                                     f"between calls, as a scheduler's step() does")
            for tensor in self._rates.values() if key == "lr" else [self._momentum]:
                tensor[...] = _tensor_value(key, value)
        super().__setitem__(key, value)

    # dict's own update, setdefault and |= store without __setitem__.
    def update(self, *args, **kwargs):
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def __ior__(self, other):
        self.update(other)
        return self

    # A shallow copy is a snapshot, as dict(group) and group.copy() are: sharing the tensors, it
    # would change the optimizer's rate while the group's "lr" said otherwise.
    __copy__ = dict.copy

    def __reduce__(self):
        # deepcopy and pickle (of the optimizer): the tensors travel with the entries (pickle
        # sets a dict subclass's items before its attributes, which __setitem__ needs).
        return type(self), (dict(self), self._owner, self._rates, self._momentum)


def _fixed_when_traced(key, old, new, momentum_key):
    """Whether setting hyperparameter ``key`` from ``old`` to ``new`` changes a number a traced
    step holds as a constant: any change but lr's and the momentum's (for betas, beta2's)."""
    if key == "lr" or key == "params" or old == new:
        return False
    if key == momentum_key == "betas":
        return tuple(old)[1:] != tuple(new)[1:]
    return key != momentum_key


def _tensor_value(key, value):
    """The number that a group's tensor for hyperparameter ``key`` holds when it is ``value``:
    beta1, the first of ``betas``; the value itself for ``lr`` and ``momentum``."""
    return value[0] if key == "betas" else value


class _States(list):
    """``opt.state``: the state of ``parameters[i]`` at index i, also indexed by the parameter
    itself (PyTorch's ``opt.state[p]``, a dict keyed by parameter; tensors compare elementwise, so
    parameters are found by identity)."""

    def __init__(self, owner, parameters):
        super().__init__()
        self._owner = owner  # the optimizer's class name, for errors
        self._parameters = parameters

    def _position(self, param):
        for i, p in enumerate(self._parameters):
            if p is param:
                return i
        return None

    def __getitem__(self, key):
        if not isinstance(key, _C.Tensor):
            return super().__getitem__(key)
        i = self._position(key)
        if i is None:
            raise KeyError(f"{self._owner}.state: this tensor ({key.dtype.name}"
                           f"{list(key.shape)}) is none of the optimizer's parameters; "
                           f"opt.state[i] is the state of opt.parameters[i]")
        return super().__getitem__(i)

    def __contains__(self, key):
        if isinstance(key, _C.Tensor):
            return self._position(key) is not None
        return super().__contains__(key)


def _check_implementation(owner, foreach, fused, capturable, differentiable):
    """Checks PyTorch's implementation flags, which choose how its update runs, not what it
    computes: Kiln has one implementation, so they change nothing, except ``differentiable=True``
    (an update autograd records), which Kiln's updates are not (KilnNotImplementedError)."""
    for name, value, default in (("foreach", foreach, None), ("fused", fused, None),
                                 ("capturable", capturable, False),
                                 ("differentiable", differentiable, False)):
        if value is not default and not isinstance(value, bool):
            raise KilnTypeError(f"{owner}: {name} must be a bool"
                                f"{' or None' if default is None else ''}, got "
                                f"{type(value).__name__} {value!r}")
    if differentiable:
        raise KilnNotImplementedError(f"{owner}: differentiable=True is not supported: Kiln's "
                                      f"updates run under no_grad, so no gradient flows through "
                                      f"them")


class Optimizer:
    """Optimizer(params, defaults, *, foreach=None, fused=None, capturable=False,
    differentiable=False): the base class. ``params`` is an iterable of parameters or of
    parameter groups (dicts); ``defaults`` holds the hyperparameters a group does not set; the
    keyword flags are PyTorch's choices of implementation, which every optimizer takes (see
    kiln.optim.optimizer's documentation). A subclass defines ``_init_state`` and ``_update``."""

    def __init__(self, params, defaults, *, foreach=None, fused=None, capturable=False,
                 differentiable=False, **unknown):
        if unknown:  # (a subclass passes its own keywords on: name it, not this base)
            raise KilnTypeError(f"{type(self).__name__}() got an unexpected keyword argument "
                                f"{next(iter(unknown))!r}")
        _check_implementation(type(self).__name__, foreach, fused, capturable, differentiable)
        self.defaults = dict(defaults)
        self.param_groups = []
        self.parameters = []
        self.state = _States(type(self).__name__, self.parameters)
        if isinstance(params, _C.Tensor):
            raise KilnTypeError(f"{type(self).__name__}: params must be an iterable of tensors or "
                                f"dicts, got a single tensor")
        params = list(params)
        if not params:
            raise KilnValueError(f"{type(self).__name__} got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, group):
        """Adds a group: a dict with ``params`` and optional hyperparameters."""
        group = dict(group)
        params = group["params"]
        group["params"] = [params] if isinstance(params, _C.Tensor) else list(params)
        known = {id(p) for p in self.parameters}
        for p in group["params"]:
            if not isinstance(p, _C.Tensor):
                raise KilnTypeError(f"{type(self).__name__}: expected kiln tensors as parameters, "
                                    f"got {type(p).__name__}")
            if not p.is_leaf:
                # Its .grad is never filled (backward fills leaves'), so step() would skip it
                # without a word, and the update would write into an op's result.
                raise KilnValueError(f"{type(self).__name__}: can't optimize a non-leaf tensor "
                                     f"(the result of {p.grad_fn}); pass the leaf it is computed "
                                     f"from, or t.detach().requires_grad_()")
            if id(p) in known:
                raise KilnValueError(f"{type(self).__name__}: a parameter appears in more than "
                                     f"one place")
            known.add(id(p))
        for key, value in self.defaults.items():
            group.setdefault(key, value)
        self._check_hyperparameters(group)
        rates = {}
        for p in group["params"]:
            if p.dtype not in rates:
                rates[p.dtype] = _C.mint.full((), group["lr"], dtype=_rate_dtype(p.dtype))
        key = self._momentum_key
        momentum = (None if key is None
                    else _C.mint.full((), _tensor_value(key, group[key]), dtype=_C.dtype.float64))
        group = _ParamGroup(group, type(self), rates, momentum)
        self.param_groups.append(group)
        with no_grad():
            for p in group["params"]:
                self.parameters.append(p)
                self.state.append(self._init_state(p, group))

    # ----------------------------------------------------------------------------------------
    # Updates

    def __call__(self, grads):
        grads = tuple(grads)
        if len(grads) != len(self.parameters):
            raise KilnValueError(f"{type(self).__name__}: got {len(grads)} gradients for "
                                 f"{len(self.parameters)} parameters")
        self._apply([g if p.requires_grad else None for p, g in zip(self.parameters, grads)])

    def step(self, closure=None):
        """One update from each parameter's ``.grad`` (a None grad skips its parameter). A
        ``closure`` is called first, with grad mode on, and the loss it returns is returned."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        self._apply([p.grad for p in self.parameters])
        return loss

    def zero_grad(self, set_to_none=True):
        """Sets every parameter's ``.grad`` to None, or with ``set_to_none=False`` fills the
        gradients that exist with zeros."""
        for p in self.parameters:
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                with no_grad():
                    p.grad[...] = 0

    def _apply(self, grads):
        # Every gradient is checked before any parameter changes.
        for i, (p, grad) in enumerate(zip(self.parameters, grads)):
            note = superseded(p)
            if note is not None:
                # Cell.to / load_state_dict(assign=True) put another Parameter in its place: the
                # step would train a tensor the cell no longer uses, silently.
                warnings.warn(f"{type(self).__name__}: parameter {i} is no longer its cell's (it "
                              f"was {note}), so this step does not train the cell; build the "
                              f"optimizer after converting or loading", stacklevel=3)
            if grad is None:
                continue
            if not isinstance(grad, _C.Tensor):
                # A NumPy array would half work: NumPy arithmetic mixed into the update (a
                # complex array was dropped without a word), and a constant in a kiln.jit step.
                raise KilnTypeError(f"{type(self).__name__}: the gradient of parameter {i} is a "
                                    f"{type(grad).__name__}, expected a kiln tensor (or None to "
                                    f"skip the parameter)")
            if tuple(grad.shape) != tuple(p.shape):
                raise ShapeError(f"{type(self).__name__}: the gradient of parameter {i} has "
                                 f"shape {list(grad.shape)}, expected {list(p.shape)}")
        with no_grad():
            i = 0
            for group in self.param_groups:
                group._traced = group._traced or _C.jit.is_tracing()
                for p in group["params"]:
                    if grads[i] is not None:
                        self._update(p, grads[i], self.state[i], group, group._rates[p.dtype])
                    i += 1

    # ----------------------------------------------------------------------------------------
    # Subclass hooks

    # The numeric hyperparameters and their lower bounds (None: any real number).
    _numeric = {"lr": 0.0}

    # The hyperparameter that holds the momentum, which a scheduler may cycle and a jitted step
    # reads from a tensor (see momentum_tensor): "momentum", or "betas" (its first item, beta1).
    _momentum_key = None

    def _check_hyperparameters(self, group):
        for name in self._numeric:
            self._check_setting(name, group[name])

    @classmethod
    def _check_setting(cls, name, value):
        """Checks the value of one hyperparameter, as the constructor does (a group set by
        hand is checked with it): those of ``_numeric``; a subclass adds its others."""
        check_number(cls.__name__, name, value, cls._numeric[name])

    # State keys that a parameter's state may lack: ``_update`` creates them (``_lazy_zeros``)
    # when a changed hyperparameter first needs them. A checkpoint may have them or not, whatever
    # this optimizer holds; one without them loads as zeros.
    _lazy_state = frozenset()

    def _lazy_zeros(self, key, param):
        """A new state tensor ``key`` of ``param`` for ``_lazy_state``, zero-filled."""
        return _C.mint.zeros_like(param)

    def _lazy_entry(self, state, key, param, setting):
        """``state[key]`` (a key of ``_lazy_state``), made now if the parameter was added before
        ``setting`` (the hyperparameter that needs it, as the error names it: "amsgrad=True")
        was set. Not while tracing: a traced buffer would restart from zero at every call of the
        graph, and eager steps could not read it."""
        if key not in state:
            if _C.jit.is_tracing():
                raise KilnValueError(f"{type(self).__name__}: a parameter added without {setting} "
                                     f"has no {key}, and a kiln.jit step cannot create one; run "
                                     f"one eager step after setting {setting}, or build the "
                                     f"optimizer with {setting}")
            state[key] = self._lazy_zeros(key, param)
        return state[key]

    def _init_state(self, param, group):
        return {}

    def _update(self, param, grad, state, group, lr):
        raise NotImplementedError

    # ----------------------------------------------------------------------------------------
    # Checkpoints

    def state_dict(self):
        """{"state": {index: {name: a copy of the state tensor}}, "param_groups": [each group's
        hyperparameters, with "params" as parameter indices]}, for ``load_state_dict``."""
        groups, start = [], 0
        for group in self.param_groups:
            saved = {k: v for k, v in group.items() if k != "params"}
            saved["params"] = list(range(start, start + len(group["params"])))
            start += len(group["params"])
            groups.append(saved)
        state = {i: {k: v.clone() for k, v in s.items()} for i, s in enumerate(self.state)}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restores hyperparameters and state from a ``state_dict()``, checking and converting all
        of it before changing anything (see kiln.optim.optimizer's documentation)."""
        name = f"{type(self).__name__}.load_state_dict"
        if not isinstance(state_dict, dict) or not {"state", "param_groups"} <= state_dict.keys():
            got = list(state_dict) if isinstance(state_dict, dict) else type(state_dict).__name__
            raise KilnValueError(f"{name}: expected a dict with 'state' and 'param_groups' (what "
                                 f"state_dict() gives), got {got}")
        groups, states = state_dict["param_groups"], state_dict["state"]
        self._check_layout(name, groups, states)
        # Everything is checked and converted before anything changes, so a failed load leaves
        # the optimizer as it was.
        hyperparameters = []
        for group, saved in zip(self.param_groups, groups):
            merged = {k: v for k, v in group.items() if k != "params"}
            merged.update((k, v) for k, v in saved.items() if k != "params")
            self._check_hyperparameters(merged)
            hyperparameters.append(merged)
        values = []
        for i, state in enumerate(self.state):
            # No entry (or an empty one) is a parameter that has not stepped yet: fresh state.
            saved = states.get(i, {})
            if not isinstance(saved, dict):
                raise KilnTypeError(f"{name}: the state of parameter {i} is a "
                                    f"{type(saved).__name__}, expected a dict of state name -> "
                                    f"tensor")
            # None for state this optimizer may lack (_lazy_state) is that state absent: older
            # PyTorch's SGD wrote momentum_buffer None for momentum 0, and its step reads None as
            # no buffer yet (the next step starts one from the gradient, as a fresh one does).
            saved = {key: value for key, value in saved.items()
                     if value is not None or key not in self._lazy_state}
            required = set(state) - self._lazy_state
            if saved and not required <= set(saved) <= set(state) | self._lazy_state:
                raise KilnValueError(f"{name}: parameter {i} has state {sorted(saved, key=str)}, "
                                     f"expected {sorted(state)} (or none, for fresh state)")
            values.append({key: converted_like(value, state[key] if key in state
                                               else self._lazy_zeros(key, self.parameters[i]),
                                               f"{name}: state {key!r} of parameter {i}")
                           for key, value in saved.items()})
        for group, merged in zip(self.param_groups, hyperparameters):
            group.update(merged)
        with no_grad():
            owners = [group for group in self.param_groups for _ in group["params"]]
            for param, group, state, saved in zip(self.parameters, owners, self.state, values):
                # Absent from the checkpoint: not created yet there (lazy state), or fresh state.
                for key in set(state) - set(saved):
                    state[key][...] = 0
                for key, value in saved.items():
                    if key in state:
                        state[key][...] = value
                    else:
                        state[key] = value.clone()
                self._complete_loaded_state(param, group, state, set(saved))

    def _check_layout(self, name, groups, states):
        """Checks the structure of a state dict's ``param_groups`` (a list of dicts, each with
        ``params`` a list as long as this optimizer's group) and ``state`` (a dict keyed by
        parameter index), so that a malformed one is an error that says what was expected."""
        expected = ("a dict with 'params' (a list of parameter indices) and the group's "
                    "hyperparameters")
        if not isinstance(groups, (list, tuple)):
            raise KilnTypeError(f"{name}: 'param_groups' is a {type(groups).__name__}, expected a "
                                f"list, each group {expected}")
        for j, group in enumerate(groups):
            if not isinstance(group, dict):
                raise KilnTypeError(f"{name}: param_groups[{j}] is a {type(group).__name__}, "
                                    f"expected {expected}")
            if "params" not in group:
                raise KilnValueError(f"{name}: param_groups[{j}] has no 'params' (its keys: "
                                     f"{sorted(group, key=str)}), expected {expected}")
            if not isinstance(group["params"], (list, tuple)):
                raise KilnTypeError(f"{name}: param_groups[{j}]['params'] is a "
                                    f"{type(group['params']).__name__}, expected a list of "
                                    f"parameter indices")
        sizes = [len(g["params"]) for g in self.param_groups]
        if [len(g["params"]) for g in groups] != sizes:
            raise KilnValueError(f"{name}: the state dict has groups of "
                                 f"{[len(g['params']) for g in groups]} parameters, the "
                                 f"optimizer {sizes}")
        if not isinstance(states, dict):
            raise KilnTypeError(f"{name}: 'state' is a {type(states).__name__}, expected a dict "
                                f"of parameter index -> dict of state tensors")
        count = len(self.parameters)
        # A key that is no index would be skipped without a word, and its parameter would
        # resume from fresh state ("0" after a JSON round trip, or a key of another optimizer).
        unknown = [key for key in states if isinstance(key, bool)
                   or not isinstance(key, numbers.Integral) or not 0 <= key < count]
        if unknown:
            shown = ", ".join(repr(key) for key in unknown[:5])
            more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
            raise KilnValueError(f"{name}: the state has entries under {shown}{more}, which are "
                                 f"not parameter indices; expected int indices in range({count}), "
                                 f"numbering the optimizer's parameters in param_groups order")

    def _complete_loaded_state(self, param, group, state, saved_keys):
        """After load_state_dict: fixes up the state of ``param`` (of ``group``) from what the
        checkpoint had (``saved_keys``); runs under no_grad. Nothing to do by default."""

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"  group {i}: {len(group['params'])} parameters, "
                         + ", ".join(f"{k}={v}" for k, v in group.items() if k != "params"))
        return "\n".join(lines + [")"])
