"""kiln.nn.utils.stateless: PyTorch's deprecated ``torch.nn.utils.stateless.functional_call``,
an alias of ``kiln.func.functional_call`` that warns (a FutureWarning, as PyTorch's since 2.0).

    out = kiln.nn.utils.stateless.functional_call(net, {"fc.weight": w}, (x,))   # warns
    out = kiln.func.functional_call(net, {"fc.weight": w}, (x,))                  # the same
"""

import warnings

__all__ = ["functional_call"]


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """functional_call(module, parameters_and_buffers, args=None, kwargs=None, *,
    tie_weights=True, strict=False): ``kiln.func.functional_call`` (see kiln/func.py), after
    PyTorch's FutureWarning that this name is deprecated."""
    warnings.warn("`kiln.nn.utils.stateless.functional_call` is deprecated (as PyTorch's "
                  "`torch.nn.utils.stateless.functional_call` is as of PyTorch 2.0) and will be "
                  "removed in a future version of Kiln. Please use `kiln.func.functional_call` "
                  "instead which is a drop-in replacement.", FutureWarning, stacklevel=2)
    # Imported here: kiln.func imports kiln.nn, which imports this package.
    from ...func import functional_call as _functional_call
    return _functional_call(module, parameters_and_buffers, args, kwargs,
                            tie_weights=tie_weights, strict=strict)
