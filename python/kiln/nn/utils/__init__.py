"""kiln.nn.utils: gradient clipping, as torch.nn.utils's, plus function forms for jitted steps;
parameters to one vector and back; weight parametrizations.

    # PyTorch style: the gradients in each parameter's .grad, clipped in place
    loss.backward()
    total = kiln.nn.utils.clip_grad_norm_(net.parameters(), max_norm=1.0)
    opt.step()

    # In a kiln.jit step the gradients are values (kiln.grad / value_and_grad), not .grad:
    @kiln.jit
    def train_step(x, y):
        loss, grads = kiln.value_and_grad(loss_fn, None, opt.parameters)(x, y)
        grads, total = kiln.nn.utils.clip_grad_norm(grads, max_norm=1.0)
        opt(grads)
        return loss, total

- ``clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
  foreach=None)``: the ``norm_type`` norm of all the gradients together (the norm of the
  per-tensor norms, as ``kiln.mint.vector_norm`` computes them; inf: the largest magnitude),
  returned as a 0-d tensor (0 of the default dtype when there is no gradient); then every gradient
  is multiplied in place, under ``no_grad``, by ``min(max_norm / (total + 1e-6), 1)``, always (no
  branch on the norm's value, so no sync and nothing data-dependent: it runs in a jitted step
  too). With ``error_if_nonfinite`` a NaN or infinite total is a KilnValueError, raised before
  any gradient changes (it reads the total, so not inside a ``kiln.jit`` function); else the
  gradients are scaled by it, as in PyTorch (a NaN total makes them NaN).
- ``clip_grad_value_(parameters, clip_value, foreach=None)``: clamps every gradient in place
  to [-clip_value, clip_value].
- ``clip_grad_norm(grads, max_norm, norm_type=2.0)`` -> ``(clipped, total_norm)`` and
  ``clip_grad_value(grads, clip_value)`` -> ``clipped``: the same on gradients given as values
  (a tensor, or a tuple or list with None for a missing gradient, as ``kiln.grad`` and
  ``opt(grads)`` have them), returned as new tensors (a tuple, with the Nones kept; one tensor
  for one tensor), the inputs left as they are.

``parameters`` is one tensor or an iterable of them (a generator such as ``net.parameters()``);
parameters whose ``.grad`` is None are skipped. The scaled gradient is computed in the dtype the
gradient and the coefficient promote to and rounded once into the gradient's dtype. ``foreach``
is accepted for PyTorch's signature and changes nothing: Kiln has no multi-tensor kernels.

Two arguments are checked where PyTorch takes anything: ``max_norm`` and ``clip_value`` must be
numbers >= 0 (KilnValueError): a negative ``max_norm`` flips the gradients' sign, and a negative
``clip_value`` clamps them all to it, in PyTorch. Either may also be a tensor of one element
(0-d, as PyTorch takes it, or 1-element), such as a bound that a schedule computes; not a bool
tensor (KilnTypeError), nor one of more elements (ShapeError). Its value is used unchecked:
reading it would wait for it, and kiln.jit cannot read it while tracing, so a tensor bound
works in a jitted step too.

``parameters_to_vector(parameters)`` and ``vector_to_parameters(vec, parameters)`` (all the
parameters as one 1-d tensor, and that vector written back into them in place) are documented in
kiln.nn.utils.convert_parameters.

``kiln.nn.utils.parametrize`` (``register_parametrization``: a tensor of a cell computed from
others), ``kiln.nn.utils.parametrizations`` (``weight_norm``, ``spectral_norm``,
``orthogonal``) and the older
forms by forward pre-hooks, ``weight_norm`` / ``remove_weight_norm`` and ``spectral_norm`` /
``remove_spectral_norm`` (kiln/nn/utils/_weight_norm.py, _spectral_norm.py), are PyTorch's.

``fuse_conv_bn_eval`` / ``fuse_linear_bn_eval`` (and their ``_weights`` forms) fold an eval-mode
BatchNorm into the layer before it (kiln/nn/utils/fusion.py); ``skip_init(cls, *args, **kwargs)``
builds a cell without initialising its parameters; ``stateless.functional_call`` is PyTorch's
deprecated spelling of kiln.func.functional_call.
"""

import math
import numbers

from ... import _C
from ...autograd import no_grad
from ...errors import KilnTypeError, KilnValueError, ShapeError
from ...mint._norms import _checked_order, vector_norm
from . import fusion, parametrizations, parametrize, rnn, stateless  # noqa: F401  (as torch's)
from ._init_skip import skip_init  # noqa: F401
from .fusion import (fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval,  # noqa: F401
                     fuse_linear_bn_weights)
from ._spectral_norm import remove_spectral_norm, spectral_norm  # noqa: F401
from ._weight_norm import remove_weight_norm, weight_norm  # noqa: F401

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grad_norm", "clip_grad_value",
           "parameters_to_vector", "vector_to_parameters", "remove_spectral_norm",
           "remove_weight_norm", "spectral_norm", "weight_norm", "skip_init", "fuse_conv_bn_eval",
           "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]

_mint = _C.mint


def _parameters(owner, parameters):
    """``parameters`` (one tensor or an iterable of them) as a list, each checked."""
    if isinstance(parameters, _C.Tensor):
        return [parameters]
    if not hasattr(parameters, "__iter__"):
        raise KilnTypeError(f"{owner}: parameters must be a tensor or an iterable of tensors, "
                            f"got {type(parameters).__name__}")
    parameters = list(parameters)
    for i, p in enumerate(parameters):
        if not isinstance(p, _C.Tensor):
            raise KilnTypeError(f"{owner}: parameters[{i}] is a {type(p).__name__}, expected a "
                                f"kiln tensor")
    return parameters


def _gradients(owner, grads):
    """``grads`` (one tensor, or an iterable of tensors and Nones) as (list, single)."""
    if isinstance(grads, _C.Tensor):
        return [grads], True
    if not hasattr(grads, "__iter__"):
        raise KilnTypeError(f"{owner}: grads must be a tensor or a tuple / list of tensors (or "
                            f"None), got {type(grads).__name__}")
    grads = list(grads)
    for i, g in enumerate(grads):
        if g is not None and not isinstance(g, _C.Tensor):
            raise KilnTypeError(f"{owner}: grads[{i}] is a {type(g).__name__}, expected a kiln "
                                f"tensor or None")
    return grads, False


def _check_foreach(owner, foreach):
    if foreach is not None and not isinstance(foreach, bool):
        raise KilnTypeError(f"{owner}: foreach must be None, True or False, got {foreach!r}")


def _check_bound(owner, name, value):
    """A real number >= 0 (NaN refused): see the module's documentation for why."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise KilnTypeError(f"{owner}: {name} must be a real number, got {value!r} "
                            f"({type(value).__name__})")
    if not value >= 0:
        raise KilnValueError(f"{owner}: {name} must be >= 0, got {value}")


def _total_norm(owner, grads, norm_type):
    """The ``norm_type`` norm of the per-tensor norms of ``grads`` (PyTorch's
    ``get_total_norm``), a 0-d tensor; 0 of the default dtype for no gradients."""
    norm_type = _checked_order(owner, "norm_type", norm_type)
    if not grads:
        return _mint.zeros(())
    norms = [vector_norm(g, norm_type) for g in grads]
    return vector_norm(_mint.stack(norms), norm_type)


def _tensor_bound(owner, name, value):
    """The tensor ``value`` as a 0-d tensor if it has one element and is not bool; its value is not
    read (see the module's documentation)."""
    if value.dtype == _C.dtype.bool:
        raise KilnTypeError(f"{owner}: {name} must be a real number or a real tensor, got a "
                            f"tensor of dtype bool")
    if value.numel() != 1:
        raise ShapeError(f"{owner}: {name} must be a number or a tensor of one element, got a "
                         f"tensor of shape {list(value.shape)}")
    return value.reshape(())


def _coefficient(owner, max_norm, total):
    """min(max_norm / (total + 1e-6), 1) as a 0-d tensor of the total's dtype."""
    if isinstance(max_norm, _C.Tensor):
        max_norm = _tensor_bound(owner, "max_norm", max_norm).to(total.dtype)
    else:
        _check_bound(owner, "max_norm", max_norm)
        max_norm = float(max_norm)
    return _mint.clamp(max_norm / (total + 1e-6), max=1.0)


def _scaled(grad, coefficient):
    product = _mint.mul(grad, coefficient)
    return product if product.dtype == grad.dtype else product.to(grad.dtype)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """Scales the parameters' ``.grad`` in place so that their total ``norm_type`` norm is at
    most ``max_norm``, and returns the total norm before scaling (a 0-d tensor); see
    kiln.nn.utils's documentation."""
    owner = "clip_grad_norm_"
    _check_foreach(owner, foreach)
    grads = [p.grad for p in _parameters(owner, parameters) if p.grad is not None]
    with no_grad():
        total = _total_norm(owner, grads, norm_type)
        coefficient = _coefficient(owner, max_norm, total)
        if error_if_nonfinite and not math.isfinite(total.item()):
            raise KilnValueError(f"{owner}: the total norm of order {float(norm_type)} of the "
                                 f"gradients is non-finite ({total.item()}), so it cannot be "
                                 f"clipped; to scale the gradients by it anyway, pass "
                                 f"error_if_nonfinite=False")
        for g in grads:
            _mint.mul(g, coefficient, out=g)
    return total


def _clip_value(owner, clip_value):
    """``clip_value`` checked: a number >= 0, or a tensor of one element (a 0-d tensor, its value
    unread, as ``max_norm``'s)."""
    if isinstance(clip_value, _C.Tensor):
        return _tensor_bound(owner, "clip_value", clip_value)
    _check_bound(owner, "clip_value", clip_value)
    return clip_value


def _clamped(g, bound, out=None):
    """``g`` clamped to [-bound, bound], a tensor bound taken in g's dtype."""
    if isinstance(bound, _C.Tensor):
        bound = bound.to(g.dtype)
    return _mint.clamp(g, min=-bound, max=bound, out=out)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamps the parameters' ``.grad`` in place to [-clip_value, clip_value]."""
    owner = "clip_grad_value_"
    _check_foreach(owner, foreach)
    clip_value = _clip_value(owner, clip_value)
    grads = [p.grad for p in _parameters(owner, parameters) if p.grad is not None]
    with no_grad():
        for g in grads:
            _clamped(g, clip_value, out=g)


def clip_grad_norm(grads, max_norm, norm_type=2.0):
    """``(clipped, total_norm)``: ``grads`` (a tensor, or a tuple / list of tensors and Nones)
    scaled by ``min(max_norm / (total_norm + 1e-6), 1)``, as new tensors, and their total
    ``norm_type`` norm (a 0-d tensor). For gradients held as values, as in a ``kiln.jit`` step
    that gets them from ``kiln.grad`` / ``value_and_grad``; the function form of
    ``clip_grad_norm_``."""
    owner = "clip_grad_norm"
    grads, single = _gradients(owner, grads)
    present = [g for g in grads if g is not None]
    total = _total_norm(owner, present, norm_type)
    coefficient = _coefficient(owner, max_norm, total)
    clipped = [None if g is None else _scaled(g, coefficient) for g in grads]
    return (clipped[0] if single else tuple(clipped)), total


def clip_grad_value(grads, clip_value):
    """``grads`` (a tensor, or a tuple / list of tensors and Nones) clamped to
    [-clip_value, clip_value], as new tensors; the function form of ``clip_grad_value_``."""
    owner = "clip_grad_value"
    clip_value = _clip_value(owner, clip_value)
    grads, single = _gradients(owner, grads)
    clipped = [None if g is None else _clamped(g, clip_value) for g in grads]
    return clipped[0] if single else tuple(clipped)


# Last: convert_parameters builds on _parameters above.
from .convert_parameters import parameters_to_vector, vector_to_parameters  # noqa: E402
