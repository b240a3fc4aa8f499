"""kiln.autograd: reverse-mode gradients of Kiln computations.

    x = kiln.tensor([1.0, 2.0, 3.0], dtype=kiln.float64).requires_grad_()
    y = (x * x).sum()
    y.backward()                   # x.grad == 2 * x
    with kiln.no_grad():           # no recording (inference, optimizer updates)
        x -= 0.1 * x.grad

Eager ops on tensors that require grad are recorded; ``Tensor.backward()`` and
``kiln.autograd.grad`` run each op's gradient rule backwards through the record (see
``include/kiln/autograd.h`` for the rules of the game: what is recorded, in-place writes,
``retain_graph`` and ``create_graph``). The functional forms with MindSpore's signatures,
``kiln.grad`` and ``kiln.value_and_grad``, are in this module too, and work inside ``kiln.jit``:
there forward and backward are traced into one graph.

``Function`` gives Python code a hand-written gradient (as ``torch.autograd.Function``).
``kiln.autograd.functional`` has ``torch.autograd.functional``'s ``vjp``, ``jvp``, ``jacobian``,
``hessian``, ``vhp`` and ``hvp`` (also here as ``kiln.autograd.vjp`` and so on).
"""

import collections.abc
import functools
import inspect

from . import _C
from .errors import KilnTypeError, KilnValueError

_ag = _C.autograd
Tensor = _C.Tensor

__all__ = ["no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "is_grad_enabled",
           "backward", "grad", "Function", "FunctionCtx", "functional_grad", "value_and_grad",
           "functional", "vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]


def is_grad_enabled():
    """True when ops are recorded for backward on this thread."""
    return _ag.is_grad_enabled()


class _GradMode:
    """A context manager that sets grad mode and restores it; also a function decorator."""

    _enabled = True

    def __enter__(self):
        self._previous = _ag.is_grad_enabled()
        _ag.set_grad_enabled(self._enabled)
        return self

    def __exit__(self, *exc):
        _ag.set_grad_enabled(self._previous)
        return False

    def __call__(self, fn):
        mode = self._enabled
        if inspect.isgeneratorfunction(fn):
            return _wrap_generator(fn, mode)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with _set(mode):
                return fn(*args, **kwargs)

        return wrapper


def _wrap_generator(fn, mode):
    """A generator function whose body runs under ``mode``: calling ``fn`` only makes the
    generator, its body runs at each resumption, so each one (``next``, ``send``, ``throw``,
    ``close``) is wrapped, and the caller's mode is back between them (as PyTorch's
    ``_wrap_generator``)."""

    @functools.wraps(fn)
    def generator(*args, **kwargs):
        gen = fn(*args, **kwargs)
        try:
            with _set(mode):
                response = gen.send(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with _set(mode):
                        gen.close()
                    raise
                except BaseException as error:  # thrown in by the caller: the body handles it
                    with _set(mode):
                        response = gen.throw(error)
                else:
                    with _set(mode):
                        response = gen.send(request)
        except StopIteration as stop:
            return stop.value

    return generator


class _BareDecorator(_GradMode):
    """A mode without arguments, which also decorates bare: ``@no_grad`` as ``@no_grad()`` (as
    PyTorch's)."""

    def __new__(cls, fn=None):
        if fn is None:
            return super().__new__(cls)
        return cls()(fn)


class no_grad(_BareDecorator):
    """Ops in this block (or decorated function) are not recorded for backward."""

    _enabled = False


class enable_grad(_BareDecorator):
    """Ops in this block are recorded even inside ``no_grad``."""

    _enabled = True


class inference_mode(_GradMode):
    """``torch.inference_mode``'s spelling: ``inference_mode()`` (or ``inference_mode(True)``) is
    ``no_grad``, ``inference_mode(False)`` is ``enable_grad``; a context manager or a decorator.
    Kiln's no_grad already records nothing and keeps no graph, which is what inference mode adds
    in PyTorch; tensors made inside stay ordinary tensors (PyTorch's inference tensors may not
    take part in autograd later, Kiln's may). ``@inference_mode`` decorates bare too."""

    def __new__(cls, mode=True):
        if callable(mode):
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode=True):
        if not isinstance(mode, bool):
            raise KilnTypeError(f"inference_mode: mode must be a bool, got "
                                f"{type(mode).__name__} {mode!r}")
        self._enabled = not mode


class set_grad_enabled(_GradMode):
    """Sets grad mode now; as a context manager, restores the previous mode on exit."""

    def __init__(self, mode):
        if callable(mode):  # PyTorch refuses the bare decorator too: the mode has no default
            raise KilnTypeError(f"set_grad_enabled: mode must be a bool, got "
                                f"{type(mode).__name__}; as a decorator it takes the mode: "
                                f"@kiln.set_grad_enabled(False)")
        self._enabled = bool(mode)
        self._previous = _ag.is_grad_enabled()
        _ag.set_grad_enabled(self._enabled)

    def __enter__(self):
        return self

    def __call__(self, fn):
        # As a decorator it sets the mode only while fn runs (as PyTorch's does): the mode set
        # when the decorator was made is undone here.
        _ag.set_grad_enabled(self._previous)
        return super().__call__(fn)


def _set(mode):
    return enable_grad() if mode else no_grad()


def _as_list(tensors, what):
    if isinstance(tensors, Tensor):
        return [tensors]
    items = list(tensors)
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise TypeError(f"{what}: item {i} is {type(t).__name__}, expected kiln.Tensor")
    return items


def _grads_list(grad_tensors, count, what):
    if grad_tensors is None:
        return []
    items = [grad_tensors] if isinstance(grad_tensors, Tensor) else list(grad_tensors)
    if len(items) != count:
        raise ValueError(f"{what}: got {len(items)} gradients for {count} outputs")
    return items


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulates the gradients of ``tensors`` into the ``.grad`` of the leaves they depend on,
    or with ``inputs`` (a tensor or a sequence of tensors that require grad, leaves or not) into
    theirs only: other leaves' ``.grad`` stay as they were. With ``create_graph`` a leaf's
    ``.grad`` holds a graph that holds the leaf, a cycle that keeps both alive until ``.grad`` is
    reset (``x.grad = None``), as in PyTorch: prefer ``grad()`` for higher orders."""
    outputs = _as_list(tensors, "backward")
    retain = create_graph if retain_graph is None else retain_graph
    _ag.backward(outputs, _grads_list(grad_tensors, len(outputs), "backward"), retain,
                 create_graph, inputs)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=None, materialize_grads=False):
    """The gradients of ``outputs`` with respect to ``inputs`` as a tuple; ``.grad`` is untouched.

    An input the outputs do not depend on raises ``KilnValueError``, or gives None with
    ``allow_unused=True``, or zeros of its shape and dtype with ``materialize_grads=True``
    (PyTorch's; it implies ``allow_unused``, which may not then be False).
    """
    if materialize_grads and allow_unused is False:
        raise KilnValueError("grad: materialize_grads=True gives zeros for unused inputs, which "
                             "allow_unused=False forbids; leave allow_unused out or set it True")
    outs = _as_list(outputs, "grad")
    ins = _as_list(inputs, "grad")
    retain = create_graph if retain_graph is None else retain_graph
    grads = _ag.grad(outs, ins, _grads_list(grad_outputs, len(outs), "grad"), retain,
                     create_graph, bool(allow_unused or materialize_grads))
    if materialize_grads:
        grads = [_C.mint.zeros_like(x) if g is None else g for g, x in zip(grads, ins)]
    return tuple(grads)


# ---- Custom functions ----------------------------------------------------------------------------

class FunctionCtx:
    """What ``forward`` hands ``backward``: saved tensors and any attributes set on it."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self._saved = ()
        self._non_differentiable = []

    def save_for_backward(self, *tensors):
        """Keeps tensors (or None) for ``backward``, which reads them as ``saved_tensors``."""
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise KilnTypeError(f"save_for_backward: expected tensors or None, got "
                                    f"{type(t).__name__}; keep other values as attributes of ctx")
        self._saved = tensors

    @property
    def saved_tensors(self):
        """The tensors ``forward`` saved (readable in ``backward``)."""
        if self._saved is None:
            raise KilnValueError("saved_tensors can only be read inside backward")
        return self._saved

    def mark_non_differentiable(self, *tensors):
        self._non_differentiable.extend(tensors)


class Function:
    """A differentiable function with a hand-written gradient.

        class ScaledExp(kiln.autograd.Function):
            @staticmethod
            def forward(ctx, x, scale):
                y = kiln.mint.exp(x) * scale
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, grad_y):
                (y,) = ctx.saved_tensors
                return grad_y * y, None    # one gradient per argument of forward

        y = ScaledExp.apply(x, 2.0)

    ``forward`` runs without recording and returns a tensor or a tuple of tensors. ``backward``
    gets one gradient per output (None where none flows) and returns one per argument of
    ``forward`` (None for non-tensor arguments and inputs without a gradient).
    """

    @staticmethod
    def forward(ctx, *args):
        raise NotImplementedError("a kiln.autograd.Function subclass must define forward")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("a kiln.autograd.Function subclass must define backward")

    @classmethod
    def apply(cls, *args):
        tensor_positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        inputs = [args[i] for i in tensor_positions]
        ctx = FunctionCtx(tuple(isinstance(a, Tensor) and a.requires_grad for a in args))
        with no_grad():
            result = cls.forward(ctx, *args)
        single = isinstance(result, Tensor)
        if not single and not (isinstance(result, (tuple, list)) and result
                               and all(isinstance(r, Tensor) for r in result)):
            raise KilnTypeError(f"{cls.__name__}.forward: expected a tensor or a tuple of tensors "
                                f"as its result, got {_describe(result)}")
        outputs = [result] if single else list(result)
        num_args = len(args)

        # The node keeps the saved tensors (the context must not: it would hold outputs that
        # point back at the node, a cycle through Python); outputs kept as attributes go with them.
        # A None saved is not the node's: it is put back in its place for backward.
        saved_all, ctx._saved = ctx._saved, None
        saved = [t for t in saved_all if t is not None]
        nones = [i for i, t in enumerate(saved_all) if t is None]
        kept = _KeptOutputs(ctx, outputs)
        num_saved = len(saved)

        def run_backward(saved, grads):
            saved_tensors = list(saved[:num_saved])
            for i in nones:
                saved_tensors.insert(i, None)
            ctx._saved = tuple(saved_tensors)
            kept.swap_in(ctx, saved[num_saved:])
            try:
                result = cls.backward(ctx, *grads)
            finally:
                ctx._saved = None
                kept.swap_out(ctx)
            result = (result,) if isinstance(result, Tensor) or result is None else result
            if not (isinstance(result, (tuple, list))
                    and all(r is None or isinstance(r, Tensor) for r in result)):
                raise KilnTypeError(f"{cls.__name__}.backward: expected a tensor, None, or a tuple "
                                    f"of them (one per argument of forward) as its result, got "
                                    f"{_describe(result)}")
            result = tuple(result)
            if len(result) == num_args:  # one per argument: keep the tensor arguments' ones
                result = tuple(result[i] for i in tensor_positions)
            return result

        outputs = _ag.record_function(cls.__name__, inputs, outputs, saved + kept.take(),
                                      ctx._non_differentiable, run_backward)
        return outputs[0] if single else tuple(outputs)


def _describe(value):
    """A value's type for an error, and its items' where it is a tuple or list."""
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of ({', '.join(type(v).__name__ for v in value)})"
    return type(value).__name__


class _KeptOutputs:
    """Outputs ``forward`` kept as context attributes (``ctx.y = y``, also inside lists, tuples and
    dicts) where ``save_for_backward`` is meant. Held there, an output would point back at the
    node, which holds the context through ``backward``: a cycle through C++ that Python's collector
    cannot see, leaking the graph. So they travel to the node as extra saved tensors (which hands
    ``backward`` its aliases of them, tracked under create_graph like any saved output), and the
    context holds detached placeholders, swapped for those aliases while ``backward`` runs."""

    _CONTEXT_OWN = frozenset(("needs_input_grad", "_saved", "_non_differentiable"))

    def __init__(self, ctx, outputs):
        produced = {id(o) for o in outputs}
        self._outputs = []       # until take(): the kept outputs, one per placeholder
        self._placeholders = []
        self._in_backward = []   # the node's tensors while backward runs
        placeholder_at = {}      # id(output) -> its placeholder's index: one per output

        def placeholder_of(t):
            if id(t) not in produced:
                return t
            if id(t) not in placeholder_at:
                placeholder_at[id(t)] = len(self._placeholders)
                self._outputs.append(t)
                self._placeholders.append(t.detach())
            return self._placeholders[placeholder_at[id(t)]]

        self._replace(ctx, placeholder_of)

    def take(self):
        """The kept outputs, for the node to save; the context and this object let go of them."""
        outputs, self._outputs = self._outputs, []
        return outputs

    def swap_in(self, ctx, tensors):
        self._in_backward = list(tensors)
        by_placeholder = {id(p): t for p, t in zip(self._placeholders, self._in_backward)}
        self._replace(ctx, lambda t: by_placeholder.get(id(t), t))

    def swap_out(self, ctx):
        by_tensor = {id(t): p for p, t in zip(self._placeholders, self._in_backward)}
        self._replace(ctx, lambda t: by_tensor.get(id(t), t))
        self._in_backward = []

    @classmethod
    def _replace(cls, ctx, replace):
        """Applies ``replace`` to every tensor among the user's attributes of ``ctx``."""
        for name, value in list(vars(ctx).items()):
            if name not in cls._CONTEXT_OWN:
                setattr(ctx, name, _map_tensors(value, replace))


def _map_tensors(value, replace):
    """``value`` with ``replace`` applied to each tensor in it, through lists, tuples and dicts (a
    container is rebuilt only when something in it changed). A module function, not a closure that
    calls itself: that would be a reference cycle holding ``replace``, and the tensors it maps,
    until the collector runs."""
    if isinstance(value, Tensor):
        return replace(value)
    if type(value) in (list, tuple):
        items = [_map_tensors(v, replace) for v in value]
        changed = any(a is not b for a, b in zip(items, value))
        return type(value)(items) if changed else value
    if type(value) is dict:
        items = {k: _map_tensors(v, replace) for k, v in value.items()}
        changed = any(items[k] is not v for k, v in value.items())
        return items if changed else value
    return value


# ---- Functional forms (MindSpore's signatures) ---------------------------------------------------

def _positions(grad_position, num_args):
    if grad_position is None:
        return None
    single = isinstance(grad_position, int)
    positions = (grad_position,) if single else grad_position
    if not (isinstance(positions, (tuple, list)) and all(isinstance(p, int) for p in positions)):
        raise KilnTypeError(f"grad: grad_position must be an int, a tuple of ints or None, got "
                            f"{_describe(grad_position)}")
    for p in positions:
        if not -num_args <= p < num_args:
            raise KilnValueError(f"grad_position {p!r} is out of range for {num_args} "
                                 "arguments")
    return single, tuple(p % num_args for p in positions)


def _reusable(weights):
    """``weights`` as kiln.grad keeps it for every call: a one-shot iterator (a generator such as
    ``model.parameters()``) as a list, read once; anything else as it is, so that a list that
    grows (an optimizer's parameters) is read again at each call."""
    if weights is not None and not isinstance(weights, Tensor) and \
            isinstance(weights, collections.abc.Iterator):
        return list(weights)
    return weights


def _weights(weights):
    if weights is None:
        return None
    if isinstance(weights, Tensor):
        return True, [weights]
    if not isinstance(weights, collections.abc.Iterable):
        raise KilnTypeError(f"grad: weights must be a tensor or a list of tensors (Parameters), "
                            f"got {type(weights).__name__}")
    weights = list(weights)
    for i, w in enumerate(weights):
        if not isinstance(w, Tensor):
            raise KilnTypeError(f"grad: weights item {i} is {type(w).__name__}, expected a "
                                f"kiln.Tensor (a Parameter)")
    return False, weights


def _check_outputs(value, outputs, has_aux):
    """Refuses what ``fn`` returned where it is not what is differentiated: a tensor or tuple of
    tensors, or with ``has_aux`` a tuple whose first item is a tensor."""
    if has_aux:
        if len(outputs) < 2:
            raise KilnValueError(f"grad: has_aux=True needs fn to return at least two outputs, "
                                 f"got {_describe(value)}")
        if not isinstance(outputs[0], Tensor):
            raise KilnTypeError(f"grad: with has_aux=True fn's first output is differentiated and "
                                f"must be a tensor, got {_describe(value)}")
    elif not outputs or not all(isinstance(o, Tensor) for o in outputs):
        # A loss returned with extra values: those are what has_aux is for.
        hint = ("; to return other values with the loss, pass has_aux=True (only the first "
                "output is then differentiated)" if len(outputs) > 1
                and isinstance(outputs[0], Tensor) else "")
        raise KilnTypeError(f"grad: fn must return a tensor or a tuple of tensors to "
                            f"differentiate, got {_describe(value)}{hint}")


def _differentiate(fn, grad_position, weights, has_aux, args):
    """(value of fn, gradients as kiln.grad returns them, aux outputs)."""
    if grad_position is None and weights is None:
        raise KilnValueError("grad: grad_position and weights cannot both be None")
    pos = _positions(grad_position, len(args))
    wts = _weights(weights)
    args = list(args)
    # Differentiation already in progress around this call (a nested kiln.grad): keep the
    # recorded history, and record the backward too, so the outer one can differentiate it.
    nested = _ag.is_grad_enabled() and any(
        isinstance(a, Tensor) and a.requires_grad for a in args)
    targets = []
    if pos is not None:
        for p in pos[1]:
            a = args[p]
            if not isinstance(a, Tensor):
                raise KilnTypeError(f"grad: argument {p} is {type(a).__name__}, expected "
                                    f"kiln.Tensor")
            if not a.requires_grad:
                a = a.detach().requires_grad_()
                args[p] = a
            targets.append(a)
    weight_list = wts[1] if wts is not None else []
    # A kiln.jit function called by fn refuses to run: its results carry no gradient.
    outer = _C.jit._set_differentiating(True)
    try:
        with enable_grad():
            value = fn(*args)
    finally:
        _C.jit._set_differentiating(outer)
    outputs = list(value) if isinstance(value, (tuple, list)) else [value]
    _check_outputs(value, outputs, has_aux)
    differentiated = outputs[:1] if has_aux else outputs
    tracked = [w for w in weight_list if w.requires_grad]
    sources = targets + tracked
    found = []
    if any(o.requires_grad for o in differentiated):
        live = [o for o in differentiated if o.requires_grad]
        ones = [_C.mint.ones_like(o) for o in live]
        found = list(_ag.grad(live, sources, ones, nested, nested, True)) if sources else []
    found += [None] * (len(sources) - len(found))
    by_id = {id(s): g for s, g in zip(sources, found)}

    def gradient_of(t):
        g = by_id.get(id(t))
        return _C.mint.zeros_like(t) if g is None else g

    input_grads = [gradient_of(t) for t in targets]
    weight_grads = [gradient_of(w) for w in weight_list]
    if pos is not None:
        input_part = input_grads[0] if pos[0] else tuple(input_grads)
    if wts is not None:
        weight_part = weight_grads[0] if wts[0] else tuple(weight_grads)
    if pos is not None and wts is not None:
        grads = (input_part, weight_part)
    else:
        grads = input_part if pos is not None else weight_part
    if not nested:
        value = _detach_all(value)
    aux = None
    if has_aux:
        rest = _detach_all(tuple(outputs[1:])) if not nested else tuple(outputs[1:])
        aux = rest[0] if len(rest) == 1 else rest
    return value, grads, aux


def _detach_all(value):
    if isinstance(value, Tensor):
        return value.detach()
    if isinstance(value, (tuple, list)):
        return type(value)(_detach_all(v) for v in value)
    return value


def functional_grad(fn, grad_position=0, weights=None, has_aux=False):
    """``kiln.grad``: a function computing the gradients of ``fn`` (MindSpore's ``grad``).

    ``grad_position`` (int, tuple of ints or None) picks the arguments to differentiate;
    ``weights`` (a Parameter or a list of them, e.g. ``opt.parameters``) adds gradients of
    parameters ``fn`` uses. The returned function gives the gradients of the arguments (one
    tensor for an int position, a tuple for a tuple), of the weights, or ``(arguments, weights)``
    when both are asked for. Every output of ``fn`` is differentiated with a gradient of ones;
    with ``has_aux`` only the first, and the result is ``(gradients, aux)`` where aux are the
    other outputs. A target the outputs do not depend on gets zeros (an optimizer called with
    them skips the parameters that do not require grad). A generator of weights is read once,
    here.
    """
    weights = _reusable(weights)

    def grad_fn(*args):
        _, grads, aux = _differentiate(fn, grad_position, weights, has_aux, args)
        return (grads, aux) if has_aux else grads

    return grad_fn


def value_and_grad(fn, grad_position=0, weights=None, has_aux=False):
    """``kiln.value_and_grad``: as ``kiln.grad``, returning ``(value of fn, gradients)``."""
    weights = _reusable(weights)

    def value_and_grad_fn(*args):
        value, grads, _ = _differentiate(fn, grad_position, weights, has_aux, args)
        return value, grads

    return value_and_grad_fn


# Last: the functional module builds on grad and enable_grad above.
from . import _autograd_functional as functional  # noqa: E402
from ._autograd_functional import hessian, hvp, jacobian, jvp, vhp, vjp  # noqa: E402
