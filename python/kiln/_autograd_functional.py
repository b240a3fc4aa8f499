"""kiln.autograd.functional: Jacobians, Hessians and their products with vectors, for a function
of tensors (PyTorch's ``torch.autograd.functional``: the same signatures and results).

    def f(x, w):
        return kiln.mint.tanh(x @ w)
    jx, jw = kiln.autograd.functional.jacobian(f, (x, w))  # shapes f(x, w).shape + x.shape, ...
    out, (vx, vw) = kiln.autograd.functional.vjp(f, (x, w), v)  # v has f(x, w)'s shape

``inputs`` is a tensor or a tuple of tensors, passed to ``func`` as its positional arguments;
``func`` returns a tensor or a tuple of tensors. Results mirror that nesting as PyTorch's do: a
tensor where there was one, a tuple where there was a tuple; ``jacobian(...)[i][j]`` is the block
of output i and input j, of shape ``outputs[i].shape + inputs[j].shape``, and
``hessian(...)[i][j]`` that of inputs i and j. Results are detached unless ``create_graph=True``,
which records their computation so that they can be differentiated again (with respect to the
caller's inputs and ``v`` where those require grad). An output that does not depend on an input
gives zeros, or with ``strict=True`` a KilnValueError.

Everything is reverse mode (``kiln.autograd.grad``): ``jvp`` and ``hvp`` use the double-backward
trick (a vector-Jacobian product is linear in its vector, so differentiating it with respect to
that vector gives a Jacobian-vector product), at about twice the cost of a ``vjp`` / ``vhp``.
``jacobian`` takes one backward per output element, or with ``strategy="forward-mode"`` one
double backward per input element after a single forward pass; unlike PyTorch's, that mode needs
no ``vectorize=True`` and takes ``create_graph`` and ``strict``. ``vectorize`` is accepted for
PyTorch's signature and ignored: PyTorch batches the rows with vmap, which Kiln does not have.

They work eagerly and inside a ``kiln.jit`` function, whose graph then holds the forward and
every backward. As under ``kiln.grad``, a ``kiln.jit`` function called by ``func`` with tensors
that require grad is refused: its results carry no gradient, so the answer would be zeros.
"""

from . import _C
from .autograd import _describe, enable_grad, grad
from .errors import KilnTypeError, KilnValueError, ShapeError

Tensor = _C.Tensor

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]

_STRATEGIES = ("reverse-mode", "forward-mode")
_FIRST_ORDER = ("strict=True expects every output to depend differentiably on every input "
                "(strict=False gives zeros there)")
_SECOND_ORDER = ("strict=True expects func to be twice differentiable, with a gradient that "
                 "depends on every input (strict=False gives zeros there)")


# ---- Arguments and results ----------------------------------------------------------------------

def _as_tuple(value, what, name):
    """(whether ``value`` is a tuple, ``value`` as a non-empty tuple of tensors)."""
    is_tuple = isinstance(value, tuple)
    items = value if is_tuple else (value,)
    if not items or not all(isinstance(t, Tensor) for t in items):
        raise KilnTypeError(f"{name}: {what} must be a kiln.Tensor or a non-empty tuple of them, "
                            f"got {_describe(value)}")
    return is_tuple, items


def _prepare(tensors, create_graph, need_graph):
    """Our own tensors for ``tensors``: with ``create_graph`` one that requires grad is viewed, so
    results keep their history back to the caller's tensor; otherwise it is detached, and marked
    to require grad where ``need_graph`` (the caller's tensors are left as they are)."""
    prepared = []
    for t in tensors:
        if create_graph and t.requires_grad:
            prepared.append(t.view_as(t))
        else:
            prepared.append(t.detach().requires_grad_() if need_graph else t.detach())
    return tuple(prepared)


def _finish(value, create_graph):
    """``value`` (a tensor or nested tuples of them) detached unless ``create_graph``."""
    if create_graph:
        return value
    if isinstance(value, Tensor):
        return value.detach()
    return tuple(_finish(v, False) for v in value)


def _nest(results, is_tuple):
    return results if is_tuple else results[0]


def _nest_blocks(blocks, outputs_tuple, inputs_tuple):
    """Blocks ``[i][j]`` nested as PyTorch's: a level drops where its side was a single tensor."""
    if not inputs_tuple:
        blocks = tuple(row[0] for row in blocks)
    return _nest(blocks, outputs_tuple)


def _shapes(tensors):
    return [list(t.shape) for t in tensors]


def _check_v(v, like, like_tuple, what, name, create_graph):
    """``v`` as a tuple of tensors shaped as ``like`` (func's ``what``: "outputs" or "inputs").
    None stands for 1 where ``like`` is a single one-element tensor."""
    if v is None:
        if len(like) != 1 or like[0].numel() != 1:
            raise KilnValueError(f"{name}: v may be None only where func's {what} are a single "
                                 f"one-element tensor, got shapes {_shapes(like)}; pass v")
        return None
    _, vs = _as_tuple(v, "v", name)
    if len(vs) != len(like):
        raise KilnValueError(f"{name}: v has {len(vs)} tensors, expected {len(like)}, one per "
                             f"item of func's {what}")
    for i, (a, b) in enumerate(zip(vs, like)):
        if tuple(a.shape) != tuple(b.shape):
            which = f"v[{i}]" if like_tuple else "v"
            raise ShapeError(f"{name}: {which} has shape {list(a.shape)}, expected "
                             f"{list(b.shape)}, the shape of item {i} of func's {what}")
    return _prepare(vs, create_graph, need_graph=False)


def _strict_error(name, found, expected):
    return KilnValueError(f"{name}: {found}; {expected}")


def _call(func, inputs, name, strict):
    """func(*inputs) as (whether it returned a tuple, its outputs as a tuple)."""
    # A kiln.jit function called by func refuses to run, as under kiln.grad (see _differentiate
    # in autograd.py): its results carry no gradient, and every product would be zeros.
    outer = _C.jit._set_differentiating(True)
    try:
        value = func(*inputs)
    finally:
        _C.jit._set_differentiating(outer)
    is_tuple, outputs = _as_tuple(value, "func's result", name)
    for i, out in enumerate(outputs):
        if strict and not out.requires_grad:
            raise _strict_error(name, f"output {i} of func does not require grad", _FIRST_ORDER)
    return is_tuple, outputs


def _single_output(outputs, is_tuple, name):
    """The one output of a function whose Hessian is asked for: one tensor of one element."""
    if is_tuple:
        raise KilnTypeError(f"{name}: func must return a single tensor, got a tuple of "
                            f"{len(outputs)}")
    if outputs[0].numel() != 1:
        raise KilnValueError(f"{name}: func must return a one-element tensor, got shape "
                             f"{list(outputs[0].shape)}")
    return outputs[0]


# ---- Gradients ----------------------------------------------------------------------------------

def _grad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    """kiln.autograd.grad of the outputs that require grad (None and untracked ones drop out,
    with their grad_outputs); None for each input none of them reaches, or that does not require
    grad (an integer output's cotangent in the double-backward trick)."""
    live = [i for i, out in enumerate(outputs) if out is not None and out.requires_grad]
    sources = [j for j, inp in enumerate(inputs) if inp.requires_grad]
    if not live or not sources:
        return (None,) * len(inputs)
    cotangents = None if grad_outputs is None else [grad_outputs[i] for i in live]
    found = grad([outputs[i] for i in live], [inputs[j] for j in sources], cotangents,
                 retain_graph=retain_graph, create_graph=create_graph, allow_unused=True)
    by_input = dict(zip(sources, found))
    return tuple(by_input.get(j) for j in range(len(inputs)))


def _zeros_for_none(grads, like, strict, name, found, expected=_FIRST_ORDER):
    """``grads`` with zeros shaped as ``like[i]`` for each None; under ``strict`` a None is the
    KilnValueError ``found(i)`` describes."""
    filled = []
    for i, (g, ref) in enumerate(zip(grads, like)):
        if g is None:
            if strict:
                raise _strict_error(name, found(i), expected)
            g = _C.mint.zeros_like(ref)
        filled.append(g)
    return tuple(filled)


def _unused_input(i):
    return f"func's outputs are independent of input {i}"


def _check_gradient(gradient, strict, name):
    """Under ``strict``, refuses a gradient that does not depend on the inputs: its derivative
    (a Hessian block) would be zeros."""
    for i, g in enumerate(gradient):
        if strict and (g is None or not g.requires_grad):
            raise _strict_error(name, f"the gradient of func with respect to input {i} does not "
                                f"depend on the inputs", _SECOND_ORDER)


# ---- The functions ------------------------------------------------------------------------------

def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), v^T J)``: the vector-Jacobian product of ``func`` at ``inputs``.

    ``v`` has the shapes of func's outputs; None where func returns a one-element tensor. The
    product has the inputs' shapes (a tensor for a tensor, a tuple for a tuple).
    """
    with enable_grad():
        inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _prepare(inputs, create_graph, need_graph=True)
        outputs_tuple, outputs = _call(func, inputs, "vjp", strict)
        v = _check_v(v, outputs, outputs_tuple, "outputs", "vjp", create_graph)
        grads = _grad(outputs, inputs, v, create_graph=create_graph)
        product = _zeros_for_none(grads, inputs, strict, "vjp", _unused_input)
    return (_nest(_finish(outputs, create_graph), outputs_tuple),
            _nest(_finish(product, create_graph), inputs_tuple))


def _outputs_and_vjp(func, inputs, name, strict):
    """(outputs tuple flag, outputs, cotangents, their vjp) for the double-backward trick: the
    cotangents are zeros that require grad, and the vjp is recorded, linear in them. Their
    values do not matter (they drop out of its derivative); zeros keep infinities out. An output
    that does not require grad (an integer one, say) gets an untracked cotangent."""
    outputs_tuple, outputs = _call(func, inputs, name, strict)
    cotangents = tuple(_C.mint.zeros_like(out).requires_grad_() if out.requires_grad
                       else _C.mint.zeros_like(out) for out in outputs)
    grads = _grad(outputs, inputs, cotangents, create_graph=True)
    for i, g in enumerate(grads):
        if strict and g is None:
            raise _strict_error(name, _unused_input(i), _FIRST_ORDER)
        if strict and not g.requires_grad:
            raise _strict_error(name, f"the gradient with respect to input {i} does not depend "
                                f"on the gradient of func's outputs (a backward rule that "
                                f"ignores its incoming gradient)", _FIRST_ORDER)
    return outputs_tuple, outputs, cotangents, grads


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), J v)``: the Jacobian-vector product of ``func`` at ``inputs``, by the
    double-backward trick.

    ``v`` has the inputs' shapes; None where the input is a one-element tensor. The product has
    the outputs' shapes (a tensor for a tensor, a tuple for a tuple).
    """
    with enable_grad():
        inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _prepare(inputs, create_graph, need_graph=True)
        v = _check_v(v, inputs, inputs_tuple, "inputs", "jvp", create_graph)
        outputs_tuple, outputs, cotangents, grads = _outputs_and_vjp(func, inputs, "jvp", strict)
        found = _grad(grads, cotangents, v, create_graph=create_graph)
        product = _zeros_for_none(found, outputs, strict, "jvp",
                                  lambda i: f"output {i} of func is independent of the inputs")
    return (_nest(_finish(outputs, create_graph), outputs_tuple),
            _nest(_finish(product, create_graph), outputs_tuple))


def _dependence(name, create_graph, strict, i, j, block):
    """Refuses, under ``strict``, Jacobian block (i, j) where it is missing (output i does not
    depend on input j) or, with ``create_graph``, where it does not depend on the inputs."""
    if not strict:
        return
    if block is None:
        raise _strict_error(name, f"output {i} of func is independent of input {j}", _FIRST_ORDER)
    if create_graph and not block.requires_grad:
        raise _strict_error(name, f"the Jacobian of output {i} with respect to input {j} does "
                            f"not depend on the inputs, so it cannot be differentiated again",
                            "strict=True with create_graph=True expects it to")


def _block(parts, out, inp, dim):
    """A Jacobian block of shape ``out.shape + inp.shape`` from its rows (``dim`` 0) or columns
    (``dim`` ``out.dim()``), in flat order."""
    shape = tuple(out.shape) + tuple(inp.shape)
    if not parts:  # an empty output or input: nothing to stack
        return inp.new_zeros(shape)
    return _C.mint.stack(parts, dim).reshape(shape)


def _jacobian_rows(outputs, inputs, create_graph, strict):
    """One backward per output element: row k of block (i, j) is d outputs[i].flat[k] / d
    inputs[j]."""
    blocks = []
    for i, out in enumerate(outputs):
        rows = [[] for _ in inputs]
        flat = out.reshape(-1)
        for k in range(out.numel()):
            found = _grad((flat[k],), inputs, retain_graph=True, create_graph=create_graph)
            for j, (row, inp) in enumerate(zip(found, inputs)):
                _dependence("jacobian", create_graph, strict, i, j, row)
                rows[j].append(_C.mint.zeros_like(inp) if row is None else row)
        blocks.append(tuple(_block(r, out, inp, 0) for r, inp in zip(rows, inputs)))
    return tuple(blocks)


def _jacobian_columns(func, inputs, create_graph, strict):
    """One forward, then one double backward per input element: column k of block (i, j) is the
    derivative of inputs[j].flat[k]'s gradient with respect to outputs[i]'s cotangent."""
    outputs_tuple, outputs, cotangents, grads = _outputs_and_vjp(func, inputs, "jacobian",
                                                                 strict)
    columns = [[[] for _ in inputs] for _ in outputs]
    for j, (g, inp) in enumerate(zip(grads, inputs)):
        flat = None if g is None else g.reshape(-1)
        for k in range(inp.numel()):
            found = ((None,) * len(outputs) if flat is None else
                     _grad((flat[k],), cotangents, retain_graph=True, create_graph=create_graph))
            for i, (column, out) in enumerate(zip(found, outputs)):
                _dependence("jacobian", create_graph, strict, i, j, column)
                # Zeros in the input's dtype, as the rows reverse mode fills in.
                columns[i][j].append(inp.new_zeros(out.shape) if column is None else column)
    blocks = tuple(tuple(_block(columns[i][j], out, inp, out.dim())
                         for j, inp in enumerate(inputs)) for i, out in enumerate(outputs))
    return outputs_tuple, blocks


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: block ``[i][j]`` of shape
    ``outputs[i].shape + inputs[j].shape``, nested as the outputs and inputs are (a tensor where
    both are tensors).

    ``strategy="reverse-mode"`` takes one backward per output element; ``"forward-mode"`` one
    double backward per input element (cheaper where func has more outputs than inputs).
    ``vectorize`` is accepted for PyTorch's signature and ignored (Kiln has no vmap).
    """
    del vectorize  # PyTorch's vmap batching of the rows: every row is its own backward here
    if strategy not in _STRATEGIES:
        raise KilnValueError(f"jacobian: strategy must be \"reverse-mode\" or \"forward-mode\", "
                             f"got {strategy!r}")
    with enable_grad():
        inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _prepare(inputs, create_graph, need_graph=True)
        if strategy == "forward-mode":
            outputs_tuple, blocks = _jacobian_columns(func, inputs, create_graph, strict)
        else:
            outputs_tuple, outputs = _call(func, inputs, "jacobian", strict)
            blocks = _jacobian_rows(outputs, inputs, create_graph, strict)
    return _nest_blocks(_finish(blocks, create_graph), outputs_tuple, inputs_tuple)


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of ``func`` (which returns a one-element tensor) at ``inputs``: block
    ``[i][j]`` of shape ``inputs[i].shape + inputs[j].shape``, a tensor for a single input.

    It is the Jacobian of the gradient; ``outer_jacobian_strategy`` is that Jacobian's
    ``strategy`` (see ``jacobian``), and ``vectorize`` is ignored as there.
    """
    inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")

    def scalar(*args):
        outputs_tuple, outputs = _call(func, args, "hessian", strict)
        return _single_output(outputs, outputs_tuple, "hessian").reshape(())

    def gradient(*args):
        found = jacobian(scalar, args, create_graph=True)
        _check_gradient(found, strict, "hessian")
        return found

    blocks = jacobian(gradient, inputs, create_graph, strict, vectorize,
                      outer_jacobian_strategy)
    return _nest_blocks(blocks, inputs_tuple, inputs_tuple)


def _output_and_gradient(func, inputs, v, create_graph, strict, name):
    """What ``vhp`` and ``hvp`` share: (inputs tuple flag, inputs, v, output tuple, its recorded
    gradient)."""
    inputs_tuple, inputs = _as_tuple(inputs, "inputs", name)
    inputs = _prepare(inputs, create_graph, need_graph=True)
    v = _check_v(v, inputs, inputs_tuple, "inputs", name, create_graph)
    outputs_tuple, outputs = _call(func, inputs, name, strict)
    _single_output(outputs, outputs_tuple, name)
    gradient = _grad(outputs, inputs, create_graph=True)
    _check_gradient(gradient, strict, name)
    return inputs_tuple, inputs, v, outputs, gradient


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), v^T H)``: the vector-Hessian product of ``func`` (which returns a
    one-element tensor) at ``inputs``.

    ``v`` has the inputs' shapes; None where the input is a one-element tensor. The product has
    the inputs' shapes (a tensor for a tensor, a tuple for a tuple).
    """
    with enable_grad():
        inputs_tuple, inputs, v, outputs, gradient = _output_and_gradient(
            func, inputs, v, create_graph, strict, "vhp")
        found = _grad(gradient, inputs, v, create_graph=create_graph)
        product = _zeros_for_none(found, inputs, strict, "vhp",
                                  lambda i: f"func's gradient is independent of input {i}",
                                  _SECOND_ORDER)
    return _finish(outputs[0], create_graph), _nest(_finish(product, create_graph), inputs_tuple)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), H v)``: the Hessian-vector product of ``func`` (which returns a
    one-element tensor) at ``inputs``, by the double-backward trick (for a twice differentiable
    func H is symmetric, and ``vhp`` gives the same product at about half the cost).

    ``v`` has the inputs' shapes; None where the input is a one-element tensor. The product has
    the inputs' shapes (a tensor for a tensor, a tuple for a tuple).
    """
    with enable_grad():
        inputs_tuple, inputs, v, outputs, gradient = _output_and_gradient(
            func, inputs, v, create_graph, strict, "hvp")
        # The double-backward trick: the gradient of gradient . u, H u, is recorded for
        # cotangents u (their values drop out), and its derivative along v with respect to u is
        # H^T v = H v.
        cotangents = tuple(_C.mint.zeros_like(inp).requires_grad_() for inp in inputs)
        double = _grad(gradient, inputs, cotangents, create_graph=True)
        found = _grad(double, cotangents, v, create_graph=create_graph)
        product = _zeros_for_none(
            found, inputs, strict, "hvp",
            lambda i: f"the gradient of func with respect to input {i} does not depend on the "
                      f"inputs", _SECOND_ORDER)
    return _finish(outputs[0], create_graph), _nest(_finish(product, create_graph), inputs_tuple)
