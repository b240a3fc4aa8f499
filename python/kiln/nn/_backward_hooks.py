"""Hooks of kiln.nn.Cell: the RemovableHandle that each ``register_*hook`` method returns, and
the machinery of PyTorch's full backward hooks, ``Cell.register_full_backward_pre_hook`` and
``Cell.register_full_backward_hook`` (cell.py registers them and calls this module from
``cell(...)``).

    def show(cell, grad_input, grad_output):
        print(type(cell).__name__, grad_input, grad_output)

    handle = net.fc1.register_full_backward_hook(show)
    mint.sum(net(x)).backward()      # prints fc1's gradients on the way back
    handle.remove()

- ``register_full_backward_pre_hook(hook, prepend=False)``: ``hook(cell, grad_output)`` runs when
  the gradients w.r.t. the cell's output are computed. ``grad_output`` is a tuple with one entry
  per element of the output (one for a tensor output), None for an element that is no tensor,
  does not require grad or gets no gradient. A result that is not None replaces it: a tuple (or
  list) of tensors or None of the same length.
- ``register_full_backward_hook(hook, prepend=False)``: ``hook(cell, grad_input, grad_output)``
  runs when the gradients w.r.t. the cell's positional arguments are computed, with
  ``grad_output`` as the pre hooks left it. ``grad_input`` has one entry per argument, None for
  an argument that is no tensor or does not require grad; a result that is not None replaces it,
  by the same rules. Where no argument requires grad (the first layer of a model, whose
  parameters do) it runs after the pre hooks with ``grad_input`` all None, and must return None
  (or all None), as in PyTorch.

Each returns a ``RemovableHandle``. The hooks run in the order registered (``prepend`` puts one
first), pre hooks first, each cell's when the gradient reaches it; a call uses the hooks its cell
had when called (one added or removed later counts from the next call, as in PyTorch). They run
only where gradients flow: a cell called under ``kiln.no_grad()``, or whose output does not
require grad, calls none, nor does a full hook run when the gradient never reaches the cell's
output. Keyword arguments get no gradients here (PyTorch's hooks see only positional ones), and
an output that is neither a tensor nor a tuple gets no hooks (a warning says so, as PyTorch's).
A hook that returns a wrong value makes ``backward()`` raise a KilnTypeError or KilnValueError.

How: as in PyTorch, the tensor arguments pass through an identity ``kiln.autograd.Function``
before ``construct`` and the output's tensors through another after the forward hooks; their
``backward`` calls the hooks. So ``construct`` and the forward hooks get new handles of the
tensor arguments (the same memory), and the caller new handles of the output tensors (a tuple
output comes back as a plain tuple). Under ``kiln.jit`` a jitted ``kiln.grad`` traces backward
once: the hooks run while the function is traced, on tracers (values without data), and what
they return is part of the graph; later calls run the graph without calling them (a hook added or
removed later counts after ``clear_cache()``). Gradients are the same as eager ones.
"""

import itertools
import warnings
import weakref

from .. import _C
from ..autograd import Function, _describe, is_grad_enabled
from ..errors import KilnTypeError, KilnValueError

Tensor = _C.Tensor

_hook_ids = itertools.count()


class RemovableHandle:
    """What the ``register_*hook`` methods of Cell return: ``remove()`` takes the hook off its
    cell (again, or after the cell is gone, it does nothing); ``with handle:`` removes it on
    leaving. ``id`` is the hook's key in the cell's hook dict."""

    __slots__ = ("id", "_hooks")

    def __init__(self, hooks):
        # Unique in ``hooks``: a dict unpickled in another process holds ids of that one's count.
        self.id = next(_hook_ids)
        while self.id in hooks:
            self.id = next(_hook_ids)
        # Weak, as PyTorch's: a handle kept after its cell is dropped keeps no hooks alive.
        self._hooks = weakref.ref(hooks)

    def remove(self):
        hooks = self._hooks()
        if hooks is not None:
            hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.remove()


class BackwardHookFunction(Function):
    """The identity on its tensors; its backward hands their gradients to ``on_grads`` (a
    method of BackwardHooks) and passes on what that returns. PyTorch's name."""

    @staticmethod
    def forward(ctx, on_grads, *tensors):
        ctx.on_grads = on_grads
        # As PyTorch's: a tensor that requires no grad gets none here either (None in the hooks).
        ctx.mark_non_differentiable(*(t for t in tensors if not t.requires_grad))
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        return (None,) + ctx.on_grads(grads)


class BackwardHooks:
    """The backward hooks of one call of a cell, and what passes between them: the grad_output
    seen on the output's side, until the full hooks on the arguments' side have read it."""

    def __init__(self, cell):
        self.cell = cell
        # Tuples: the hooks the cell has now (a hook may remove itself or add another).
        self.pre_hooks = tuple(cell._backward_pre_hooks.values())
        self.hooks = tuple(cell._backward_hooks.values())
        self.num_inputs = 0
        self.inputs_at = None  # the tensor arguments' positions, where they were wrapped
        self.num_outputs = 0
        self.outputs_at = ()
        self.grad_output = None

    @classmethod
    def of(cls, cell):
        """The backward hooks of a call of ``cell`` now, or None: it has none, or no gradient
        is recorded."""
        if not (cell._backward_pre_hooks or cell._backward_hooks) or not is_grad_enabled():
            return None
        return cls(cell)

    def wrap_inputs(self, args):
        """``args`` with the tensors passed through a BackwardHookFunction, where a full hook
        is to see their gradients and one of them requires grad."""
        self.num_inputs = len(args)
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        if not self.hooks or not any(args[i].requires_grad for i in positions):
            return args
        self.inputs_at = positions
        wrapped = BackwardHookFunction.apply(self._on_grad_input, *(args[i] for i in positions))
        return _placed(args, positions, wrapped)

    def wrap_output(self, output):
        """``output`` (a tensor or a tuple) with its tensors passed through a
        BackwardHookFunction, where one of them requires grad."""
        single = isinstance(output, Tensor)
        if not single and not isinstance(output, tuple):
            warnings.warn(f"{type(self.cell).__name__}: for backward hooks to be called, the "
                          f"output should be a tensor or a tuple, got {type(output).__name__}",
                          stacklevel=3)
            return output
        items = (output,) if single else output
        positions = [i for i, o in enumerate(items) if isinstance(o, Tensor)]
        if not any(items[i].requires_grad for i in positions):
            return output
        self.num_outputs, self.outputs_at = len(items), positions
        wrapped = BackwardHookFunction.apply(self._on_grad_output, *(items[i] for i in positions))
        return wrapped[0] if single else _placed(items, positions, wrapped)

    def _on_grad_output(self, grads):
        grad_output = _placed((None,) * self.num_outputs, self.outputs_at, grads)
        for hook in self.pre_hooks:
            grad_output = self._checked(hook, hook(self.cell, grad_output), grad_output,
                                        "grad_output")
        if self.inputs_at is None:
            # No argument passed through a BackwardHookFunction: the full hooks run now.
            grad_input = (None,) * self.num_inputs
            for hook in self.hooks:
                result = hook(self.cell, grad_input, grad_output)
                if result is not None and any(r is not None for r in result):
                    raise KilnValueError(f"{_name(self.cell, hook)}: expected None (or all None) "
                                         f"from a backward hook of a cell none of whose "
                                         f"arguments requires grad, got {result!r}")
        else:
            self.grad_output = grad_output
        return tuple(grad_output[i] for i in self.outputs_at)

    def _on_grad_input(self, grads):
        grad_output, self.grad_output = self.grad_output, None
        if grad_output is None:  # the gradient did not come through the output (PyTorch's too)
            return grads
        grad_input = _placed((None,) * self.num_inputs, self.inputs_at, grads)
        for hook in self.hooks:
            grad_input = self._checked(hook, hook(self.cell, grad_input, grad_output), grad_input,
                                       "grad_input")
        return tuple(grad_input[i] for i in self.inputs_at)

    def _checked(self, hook, result, current, name):
        """``current`` replaced by a hook's ``result`` where that is not None."""
        if result is None:
            return current
        if not (isinstance(result, (tuple, list))
                and all(r is None or isinstance(r, Tensor) for r in result)):
            raise KilnTypeError(f"{_name(self.cell, hook)}: expected None or a tuple of tensors "
                                f"or None (the new {name}), got {_describe(result)}")
        if len(result) != len(current):
            raise KilnValueError(f"{_name(self.cell, hook)}: expected {len(current)} entries in "
                                 f"the {name} it returns (one per entry of the one it got), got "
                                 f"{len(result)}")
        return tuple(result)


def _placed(items, positions, values):
    """``items`` as a tuple, with ``values`` put at ``positions``."""
    items = list(items)
    for i, value in zip(positions, values):
        items[i] = value
    return tuple(items)


def _name(cell, hook):
    """The hook for an error message."""
    return f"{type(cell).__name__} backward hook {getattr(hook, '__qualname__', repr(hook))}"
