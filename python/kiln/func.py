"""kiln.func: calling a cell with other parameters (PyTorch's ``torch.func.functional_call``).

    params = {name: p.detach() for name, p in net.named_parameters()}
    out = kiln.func.functional_call(net, params, (x,))

``functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
tie_weights=True, strict=False)`` calls ``module(*args, **kwargs)`` with the tensors of
``parameter_and_buffer_dicts`` (a dict of dotted name -> tensor, or a tuple / list of such dicts
whose names do not overlap) in place of the parameters, buffers and attributes of those names,
and puts the cell's own back afterwards, also when the call raises. The tensors need not be
Parameters: a computed one (a meta-learning update ``w - lr * g``) differentiates through the call.
``args`` that is not a tuple is the one positional argument.

- ``tie_weights``: a parameter or buffer registered under several names (tied weights) takes the
  given tensor under all of them when the dict names one; naming two tied names with different
  tensors is a KilnValueError. With ``tie_weights=False`` only the names given are replaced.
- ``strict``: every parameter and buffer must be given, and no other name (a KilnValueError
  listing the missing and unexpected keys). Otherwise a name that is no parameter or buffer is
  set as a plain attribute for the call and removed afterwards, as PyTorch's.
- When the call rebinds a given name (a cell that assigns ``self.count = self.count + 1``), the
  new tensor is written back into the caller's dict, as PyTorch's.
"""

import contextlib

from . import _C
from .errors import KilnTypeError, KilnValueError
from .nn.cell import Cell

__all__ = ["functional_call"]


def _merged(owner, dicts):
    if isinstance(dicts, dict):
        return dict(dicts), [dicts]
    if not isinstance(dicts, (tuple, list)) or not all(isinstance(d, dict) for d in dicts):
        raise KilnTypeError(f"{owner}: expected parameter_and_buffer_dicts to be a dict or a "
                            f"tuple of dicts, got {type(dicts).__name__}")
    merged = {}
    for d in dicts:
        repeated = sorted(set(d) & set(merged))
        if repeated:
            raise KilnValueError(f"{owner}: {', '.join(map(repr, repeated))} appeared in "
                                 f"multiple dictionaries; each name may be given once")
        merged.update(d)
    return merged, list(dicts)


def _tied_names(module):
    """For each tensor registered under several names: every name -> the list of its names."""
    names = {}
    for name, t in [*module.named_parameters(remove_duplicate=False),
                    *module.named_buffers(remove_duplicate=False)]:
        names.setdefault(id(t), []).append(name)
    return {n: group for group in names.values() if len(group) > 1 for n in group}


def _untied(owner, module, given):
    """``given`` with each tied name's tensor under all of its names."""
    result = dict(given)
    for name, group in _tied_names(module).items():
        if name not in given:
            continue
        for other in group:
            if other in given and given[other] is not given[name]:
                raise KilnValueError(f"{owner}: {name!r} and {other!r} are tied (one tensor) but "
                                     f"were given different tensors; give one, or pass "
                                     f"tie_weights=False")
            result[other] = given[name]
    return result


class _Swap:
    """One name of a cell replaced for the call: in the registry that holds it, or as a plain
    attribute."""

    def __init__(self, cell, name, value):
        self.cell, self.name = cell, name
        self.registry = next((r for r in ("_params", "_buffers") if name in cell.__dict__[r]),
                             None)
        if self.registry is None:
            self.added = name not in cell.__dict__
            self.old = cell.__dict__.get(name)
            object.__setattr__(cell, name, value)
        else:
            self.old = cell.__dict__[self.registry][name]
            cell.__dict__[self.registry][name] = value

    def current(self):
        if self.registry is None:
            return self.cell.__dict__.get(self.name)
        return self.cell.__dict__[self.registry][self.name]

    def restore(self):
        if self.registry is not None:
            self.cell.__dict__[self.registry][self.name] = self.old
        elif self.added:
            self.cell.__dict__.pop(self.name, None)
        else:
            object.__setattr__(self.cell, self.name, self.old)


def _check_strict(owner, module, given):
    known = {n for n, _ in module.named_parameters(remove_duplicate=False)}
    known |= {n for n, _ in module.named_buffers(remove_duplicate=False)}
    missing, unexpected = sorted(known - set(given)), sorted(set(given) - known)
    if missing or unexpected:
        raise KilnValueError(f"{owner}: strict=True wants exactly the parameters and buffers of "
                             f"{type(module).__name__}: missing key(s) "
                             f"{', '.join(map(repr, missing)) or 'none'}; unexpected key(s) "
                             f"{', '.join(map(repr, unexpected)) or 'none'}")


@contextlib.contextmanager
def _reparametrized(owner, module, given):
    swaps = []
    try:
        for name, value in given.items():
            if not isinstance(name, str):
                raise KilnTypeError(f"{owner}: expected str names, got {type(name).__name__} "
                                    f"{name!r}")
            if not isinstance(value, _C.Tensor):
                raise KilnTypeError(f"{owner}: expected a kiln.Tensor for {name!r}, got "
                                    f"{type(value).__name__}")
            path, _, attr = name.rpartition(".")
            swaps.append(_Swap(module.get_submodule(path), attr, value))
        yield swaps
    finally:
        for swap in reversed(swaps):
            swap.restore()


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
    tie_weights=True, strict=False): ``module(*args, **kwargs)`` with the given tensors in place
    of its parameters and buffers (see the module's documentation)."""
    owner = "functional_call"
    if not isinstance(module, Cell):
        raise KilnTypeError(f"{owner}: expected a kiln.nn.Cell, got {type(module).__name__}")
    given, dicts = _merged(owner, parameter_and_buffer_dicts)
    if strict:
        _check_strict(owner, module, given)
    replaced = _untied(owner, module, given) if tie_weights else given
    args = () if args is None else args if isinstance(args, tuple) else (args,)
    kwargs = {} if kwargs is None else kwargs
    with _reparametrized(owner, module, replaced) as swaps:
        result = module(*args, **kwargs)
        current = {name: swap.current() for name, swap in zip(replaced, swaps)}
    for d in dicts:
        for name in d:
            if current[name] is not d[name]:
                d[name] = current[name]
    return result
