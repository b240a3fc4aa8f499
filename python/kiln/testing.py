"""kiln.testing: checks for people who write ops, gradient rules and custom functions.

    def f(x, w):
        return kiln.mint.matmul(x, w).tanh()
    x = kiln.tensor(np.random.randn(3, 4)).requires_grad_()   # float64
    w = kiln.tensor(np.random.randn(4, 2)).requires_grad_()
    kiln.testing.gradcheck(f, (x, w))                           # raises GradcheckError if wrong

``gradcheck`` compares the gradients autograd computes for ``fn`` at ``inputs`` with central
finite differences. Use float64 inputs: in float32 the differences at the default ``eps`` are
too coarse to check anything (pass a larger ``eps`` and looser tolerances). float16 and bfloat16
are refused with a DTypeError, as inputs that require grad and as outputs: a step of ``eps`` is
lost in their rounding, so the differences would be zero or noise. Only the inputs that require
grad are checked; other arguments are passed as they are. Each floating output gets a random
cotangent ``v`` (seeded, so failures reproduce), and the check is of the vector-Jacobian product
``d/dx sum(v * fn(x))``, one input element at a time: keep the inputs small (a few dozen
elements).
"""

from . import _C
from . import autograd as _autograd
from ._numpy import np
from .errors import DTypeError, KilnValueError

Tensor = _C.Tensor

__all__ = ["GradcheckError", "gradcheck", "gradgradcheck"]


class GradcheckError(AssertionError):
    """Autograd's gradient and the numerical one differ (the message says where)."""


_SIXTEEN_BIT = (_C.dtype.float16, _C.dtype.bfloat16)


def _check_precision(what, tensor):
    if tensor.dtype in _SIXTEEN_BIT:
        raise DTypeError(
            f"gradcheck: {what} is {tensor.dtype.name}; expected float64 (or float32): finite "
            f"differences in a 16-bit float are too coarse to check; compute fn in float64")


def _outputs(value):
    """fn's floating-point outputs, the ones the check weighs; a 16-bit one is a DTypeError."""
    items = [value] if isinstance(value, Tensor) else list(value)
    outs = []
    for k, o in enumerate(items):
        if isinstance(o, Tensor) and o.dtype.is_floating_point:
            _check_precision(f"output {k} of fn", o)
            outs.append(o)
    return outs


def _weighted_sum(fn, args, cotangents):
    # Grad mode stays on: fn may differentiate inside (gradgradcheck's does).
    outs = _outputs(fn(*args))
    return sum(float(np.sum(o.numpy().astype(np.float64) * v)) for o, v in zip(outs, cotangents))


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, seed=0, raise_exception=True):
    """True when autograd's gradients of ``fn`` at ``inputs`` match finite differences.

    Raises ``GradcheckError`` naming the input, the element and both values otherwise (or
    returns False with ``raise_exception=False``); a float16 or bfloat16 input that requires grad,
    or output, is a ``DTypeError`` (see the module docstring).
    """
    args = list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]
    checked = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
    if not checked:
        raise KilnValueError(
            "gradcheck: no input requires grad; mark the ones to check with requires_grad_()")
    for i in checked:
        _check_precision(f"input {i}", args[i])
    rng = np.random.default_rng(seed)
    outs = _outputs(fn(*args))
    if not outs:
        raise KilnValueError("gradcheck: fn returned no floating-point tensor")
    cotangents = [rng.standard_normal(tuple(o.shape)) for o in outs]
    differentiable = [o for o in outs if o.requires_grad]
    if differentiable:
        analytic = _autograd.grad(
            differentiable, [args[i] for i in checked],
            [_C.tensor(v, dtype=o.dtype) for o, v in zip(outs, cotangents) if o.requires_grad],
            allow_unused=True)
    else:
        analytic = [None] * len(checked)

    for k, i in enumerate(checked):
        x = args[i]
        base = x.numpy().astype(np.float64).copy()
        got = (np.zeros(base.shape) if analytic[k] is None
               else analytic[k].numpy().astype(np.float64))
        flat = base.reshape(-1)
        for j in range(flat.size):
            saved = flat[j]
            trial = list(args)
            flat[j] = saved + eps
            trial[i] = _C.tensor(base, dtype=x.dtype).requires_grad_()
            plus = _weighted_sum(fn, trial, cotangents)
            flat[j] = saved - eps
            trial[i] = _C.tensor(base, dtype=x.dtype).requires_grad_()
            minus = _weighted_sum(fn, trial, cotangents)
            flat[j] = saved
            numeric = (plus - minus) / (2 * eps)
            value = float(got.reshape(-1)[j])
            if not abs(value - numeric) <= atol + rtol * abs(numeric):
                if not raise_exception:
                    return False
                index = np.unravel_index(j, base.shape) if base.shape else ()
                raise GradcheckError(
                    f"gradcheck: gradient of input {i} at index {tuple(int(v) for v in index)}: "
                    f"autograd gives {value!r}, finite differences {numeric!r} "
                    f"(atol={atol}, rtol={rtol})")
    return True


def gradgradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, seed=0, raise_exception=True):
    """gradcheck of the gradient itself: checks second derivatives (create_graph backward)."""
    args = list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]
    checked = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
    rng = np.random.default_rng(seed + 1)
    outs = _outputs(fn(*args))
    cotangents = [_C.tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype) for o in outs]

    def first_gradient(*xs):
        ys = [o for o in _outputs(fn(*xs))]
        live = [(y, v) for y, v in zip(ys, cotangents) if y.requires_grad]
        grads = _autograd.grad([y for y, _ in live], [xs[i] for i in checked],
                               [v for _, v in live], create_graph=True, allow_unused=True)
        return tuple(g if g is not None else _C.mint.zeros_like(xs[i])
                     for g, i in zip(grads, checked))

    return gradcheck(first_gradient, args, eps, atol, rtol, seed, raise_exception)
