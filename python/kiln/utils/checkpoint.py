"""kiln.utils.checkpoint: activation checkpointing (PyTorch's ``torch.utils.checkpoint``).

    from kiln.utils.checkpoint import checkpoint, checkpoint_sequential

    h = checkpoint(block, x, use_reentrant=False)     # block's activations are not kept
    y = checkpoint_sequential(net, 4, x, use_reentrant=False)

``checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default",
debug=False, preserve_rng_state=True, **kwargs)`` returns ``function(*args, **kwargs)`` without
keeping the tensors its ops save for backward: backward runs ``function`` again on the same
inputs and differentiates that. Memory falls from every activation of the segment to its inputs
and outputs, for one more forward pass. ``checkpoint(use_reentrant=False, ...)`` with no function
is a decorator.

- ``use_reentrant=False`` (the variant PyTorch recommends): gradients reach everything
  ``function`` differentiates through, its tensor arguments and the parameters it reads alike,
  even when no argument requires grad, and ``kiln.grad`` / ``kiln.autograd.grad`` can ask for
  them. The forward pass is recorded, and its graph walked for the leaves it reaches, before
  that graph is let go: peak memory is one segment's activations, as in backward.
- ``use_reentrant=True`` (PyTorch's older variant): the forward pass runs under ``no_grad``;
  backward recomputes and runs ``kiln.autograd.backward`` over the segment, which accumulates into
  the ``.grad`` of the parameters it reads, so only ``Tensor.backward`` (not ``kiln.grad``)
  sees their gradients, and nothing flows unless an argument requires grad (a warning then, as
  PyTorch's). It takes no ``**kwargs`` and no ``context_fn``. ``use_reentrant=None`` means True,
  with PyTorch's warning to pass it explicitly.
- ``preserve_rng_state``: the recomputation draws the same random numbers (dropout masks) as the
  forward pass: the generator's state is saved before it and restored around the recomputation.
- ``context_fn``: returns two context managers, entered around the forward pass and the
  recomputation (use_reentrant=False only).
- ``determinism_check="default"`` compares the recomputed outputs' shapes and dtypes with the
  forward pass's and raises CheckpointError on a difference; ``"none"`` skips it.
- The function's outputs: a tensor, or a tuple or list holding tensors (and other values, passed
  through). Double backward through a checkpoint is not supported: the recomputed graph starts
  from detached copies of the inputs.
- A tensor the function reads from outside (not an argument) that requires grad must be a leaf
  (a parameter): one computed before the call (an activation) must be passed as an argument.
  Otherwise the recomputation differentiates back into the caller's graph, which the caller's
  own backward may already have freed (PyTorch's non-reentrant variant, built on saved-tensor
  hooks, allows it; Kiln has no such hooks).

``checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs)`` splits a
``kiln.nn.Sequential`` (or a list of callables) into ``segments`` runs and checkpoints each but
the last, as PyTorch's.
"""

import contextlib
import functools
import warnings

from .. import _C
from ..autograd import enable_grad, no_grad
from ..errors import KilnError, KilnTypeError, KilnValueError

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError"]


class CheckpointError(KilnError):
    """The recomputation of a checkpointed function differs from its forward pass."""


def _no_contexts():
    return contextlib.nullcontext(), contextlib.nullcontext()


def _tensors_of(value):
    """The tensors of a function's result (a tensor, or a tuple / list holding tensors)."""
    if isinstance(value, _C.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [v for v in value if isinstance(v, _C.Tensor)]
    raise KilnTypeError(f"checkpoint: expected the function to return a tensor or a tuple of "
                        f"values holding tensors, got {type(value).__name__}")


def _replace_tensors(value, tensors):
    """``value`` with its tensors replaced, in order, by ``tensors``."""
    if isinstance(value, _C.Tensor):
        return tensors[0]
    replaced = iter(tensors)
    return type(value)(next(replaced) if isinstance(v, _C.Tensor) else v for v in value)


def _detached_inputs(args):
    """The arguments, each tensor detached and requiring grad as the original does: the
    recorded graph of a (re)computation starts there rather than at the caller's graph."""
    return [a.detach().requires_grad_(a.requires_grad) if isinstance(a, _C.Tensor) else a
            for a in args]


def _with_tensors(args, positions, tensors):
    """``args`` (a list) with ``tensors`` at ``positions``: the arguments of a recomputation."""
    replaced = list(args)
    for i, t in zip(positions, tensors):
        replaced[i] = t
    return replaced


def _reached_leaves(outputs, stop):
    """The leaves that require grad which the graphs of ``outputs`` reach (each once), except
    ``stop`` (tensors)."""
    # seen holds the nodes, not only their ids: a node's Python object lives while something holds
    # it (the binding hands the live object back for the same node), and a freed one's id may
    # be reused by the next node's, which would then be skipped.
    leaves, seen = [], {}
    pending = [t.grad_fn for t in outputs if t.grad_fn is not None]
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen[id(node)] = node
        leaf = node.variable
        if leaf is not None:
            if not any(leaf.is_same(s) for s in stop) and not any(leaf.is_same(t) for t in leaves):
                leaves.append(leaf)
            continue
        pending.extend(n for n, _ in node.next_functions if n is not None)
    return leaves


class _Recompute:
    """Runs a checkpointed function again for backward: with the generator's state of the forward
    pass, and the recomputed outputs' metadata checked against the forward pass's."""

    def __init__(self, function, preserve_rng_state, determinism_check, context):
        self.function, self.context = function, context
        self.rng_state = _C.mint.get_rng_state() if preserve_rng_state else None
        # The forward's autocast state: backward runs with autocast off, and the recomputation
        # must cast as the forward pass did (PyTorch's checkpoint restores it too).
        self.autocast_state = _C.autocast.state()
        self.check = determinism_check == "default"
        self.metadata = None

    def record(self, outputs):
        self.metadata = [(tuple(t.shape), t.dtype) for t in outputs]

    def __call__(self, args):
        if self.rng_state is None:
            result = self._run(args)
        else:
            state = _C.mint.get_rng_state()
            _C.mint.set_rng_state(self.rng_state)
            try:
                result = self._run(args)
            finally:
                _C.mint.set_rng_state(state)
        outputs = _tensors_of(result)
        metadata = [(tuple(t.shape), t.dtype) for t in outputs]
        if self.check and metadata != self.metadata:
            raise CheckpointError(f"checkpoint: the recomputation gave outputs {metadata} (shape, "
                                  f"dtype), the forward pass {self.metadata}; the function must "
                                  f"compute the same on the same inputs (pass "
                                  f"determinism_check='none' to skip this check)")
        return outputs

    def _run(self, args):
        previous = _C.autocast.set_state(*self.autocast_state)
        try:
            with enable_grad(), self.context:
                return self.function(*args)
        finally:
            _C.autocast.set_state(*previous)


def _differentiable(outputs, grads):
    """The (output, gradient) pairs through which a gradient flows."""
    pairs = [(o, g) for o, g in zip(outputs, grads) if g is not None and o.requires_grad]
    return [o for o, _ in pairs], [g for _, g in pairs]


def _non_reentrant(function, args, kwargs, preserve_rng_state, determinism_check, context_fn):
    # Keyword arguments travel as positional ones, so that their tensors are inputs too.
    keys = list(kwargs)
    num_positional = len(args)
    args = list(args) + [kwargs[k] for k in keys]

    def call(*values):
        return function(*values[:num_positional], **dict(zip(keys, values[num_positional:])))

    forward_context, recompute_context = (context_fn or _no_contexts)()
    recompute = _Recompute(call, preserve_rng_state, determinism_check, recompute_context)
    inputs = _detached_inputs(args)
    with forward_context:
        result = call(*inputs)
    outputs = _tensors_of(result)
    recompute.record(outputs)
    if not _C.autograd.is_grad_enabled():
        return result
    tensor_args = [a for a in args if isinstance(a, _C.Tensor)]
    # The graph just recorded ends at the detached inputs; its leaves are the parameters (and
    # other leaves) the function read. They become inputs of the checkpoint's node, and the
    # recorded graph goes with `outputs`' history when they are detached below.
    leaves = _reached_leaves(outputs, [a for a in inputs if isinstance(a, _C.Tensor)])
    differentiable = [o.requires_grad for o in outputs]
    outputs = [o.detach() for o in outputs]
    positions = [i for i, a in enumerate(args) if isinstance(a, _C.Tensor)]

    def run_backward(saved, grads):
        recomputed_args = _with_tensors(args, positions, _detached_inputs(saved))
        recomputed = recompute(recomputed_args)
        wanted = [recomputed_args[i] for i in positions] + leaves
        outs, out_grads = _differentiable(recomputed, grads)
        if not outs:
            return (None,) * len(wanted)
        # retain_graph: a tensor the function captured from outside (not an argument) may lead
        # the recomputed graph into the caller's, which its own backward still needs.
        found = _C.autograd.grad(outs, [t for t in wanted if t.requires_grad], out_grads,
                                 True, False, True)
        found = iter(found)
        return tuple(next(found) if t.requires_grad else None for t in wanted)

    recorded = _C.autograd.record_function(
        "Checkpoint", tensor_args + leaves, outputs, tensor_args,
        [o for o, d in zip(outputs, differentiable) if not d], run_backward)
    return _replace_tensors(result, recorded)


def _reentrant(function, args, preserve_rng_state, determinism_check):
    recompute = _Recompute(function, preserve_rng_state, determinism_check,
                           contextlib.nullcontext())
    with no_grad():
        result = function(*args)
    outputs = _tensors_of(result)
    recompute.record(outputs)
    tensor_args = [a for a in args if isinstance(a, _C.Tensor)]
    if not _C.autograd.is_grad_enabled():
        return result
    if not any(a.requires_grad for a in tensor_args):
        warnings.warn("checkpoint: none of the inputs requires grad (use_reentrant=True): the "
                      "gradients of the parameters the function reads will be None; pass "
                      "use_reentrant=False", stacklevel=3)
    positions = [i for i, a in enumerate(args) if isinstance(a, _C.Tensor)]

    def run_backward(saved, grads):
        recomputed_args = _with_tensors(args, positions, _detached_inputs(saved))
        outs, out_grads = _differentiable(recompute(recomputed_args), grads)
        if outs:
            _C.autograd.backward(outs, out_grads, False, False)
        return tuple(recomputed_args[i].grad for i in positions)

    # Detached: an output that is an argument itself (a function passing its input through)
    # must become the node's output, not take the node's history as the argument.
    recorded = _C.autograd.record_function("CheckpointReentrant", tensor_args,
                                           [o.detach() for o in outputs], tensor_args, [],
                                           run_backward)
    return _replace_tensors(result, recorded)


def checkpoint(function=None, *args, use_reentrant=None, context_fn=None,
               determinism_check="default", debug=False, preserve_rng_state=True, **kwargs):
    """checkpoint(function, *args, use_reentrant=None, context_fn=None,
    determinism_check="default", debug=False, preserve_rng_state=True, **kwargs): function(*args,
    **kwargs), recomputed in backward rather than keeping its activations (see the module's
    documentation). ``debug`` is accepted for PyTorch's signature and changes nothing."""
    if function is None and not args:
        if kwargs:
            raise KilnTypeError(f"checkpoint: unexpected keyword arguments "
                                f"{', '.join(sorted(kwargs))} without a function")
        return functools.partial(_checkpointed, use_reentrant=use_reentrant,
                                 context_fn=context_fn, determinism_check=determinism_check,
                                 preserve_rng_state=preserve_rng_state)
    if not callable(function):
        raise KilnTypeError(f"checkpoint: expected a callable function, got "
                            f"{type(function).__name__}")
    if determinism_check not in ("default", "none"):
        raise KilnValueError(f"checkpoint: determinism_check must be 'default' or 'none', got "
                             f"{determinism_check!r}")
    if use_reentrant is None:
        warnings.warn("checkpoint: pass use_reentrant explicitly; use_reentrant=False is "
                      "recommended (None means True, as in PyTorch)", stacklevel=2)
        use_reentrant = True
    if not use_reentrant:
        return _non_reentrant(function, args, kwargs, preserve_rng_state, determinism_check,
                              context_fn)
    if kwargs:
        raise KilnValueError(f"checkpoint: use_reentrant=True takes no keyword arguments for the "
                             f"function (got {', '.join(sorted(kwargs))}); pass "
                             f"use_reentrant=False")
    if context_fn is not None:
        raise KilnValueError("checkpoint: context_fn needs use_reentrant=False")
    return _reentrant(function, args, preserve_rng_state, determinism_check)


def _checkpointed(function, **options):
    """checkpoint's decorator form: ``function`` checkpointed at each call."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        return checkpoint(function, *args, **options, **kwargs)

    return wrapper


def checkpoint_sequential(functions, segments, input, use_reentrant=None,  # noqa: A002
                          **kwargs):
    """checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs): runs
    ``functions`` (a kiln.nn.Sequential or a list of callables) in order on ``input``, in
    ``segments`` runs of len // segments each (the last takes the rest), all checkpointed but the
    last. ``preserve_rng_state`` is the only keyword argument taken, as PyTorch's."""
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise KilnTypeError(f"checkpoint_sequential: unexpected keyword arguments "
                            f"{', '.join(sorted(kwargs))}")
    functions = list(functions.children()) if hasattr(functions, "children") else list(functions)
    if isinstance(segments, bool) or not isinstance(segments, int) \
            or not 1 <= segments <= max(len(functions), 1):
        raise KilnValueError(f"checkpoint_sequential: expected segments an int in [1, "
                             f"{len(functions)}] (the number of functions), got {segments!r}")

    def run(start, end):
        def forward(x):
            for f in functions[start:end]:
                x = f(x)
            return x
        return forward

    size = len(functions) // segments
    end = 0
    for start in range(0, size * (segments - 1), size):
        end = start + size
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
    return run(end, len(functions))(input)
