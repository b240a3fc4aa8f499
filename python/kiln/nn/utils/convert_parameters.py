"""kiln.nn.utils.parameters_to_vector / vector_to_parameters: a model's parameters as one vector
and back, as torch.nn.utils's (for methods that work on a flat vector of weights: line searches,
evolution strategies, weight averaging by hand).

    vec = kiln.nn.utils.parameters_to_vector(net.parameters())  # 1-d: every parameter, flat
    kiln.nn.utils.vector_to_parameters(vec * 0.5, net.parameters())  # written back in place

- ``parameters_to_vector(parameters)``: a new 1-d tensor holding the parameters' elements, each
  parameter flattened in row-major order, one after another in the order given; its dtype is the
  one the parameters' dtypes promote to (``kiln.mint.cat``'s rule). It is differentiable with
  respect to the parameters, as PyTorch's is.
- ``vector_to_parameters(vec, parameters)``: copies consecutive slices of ``vec`` into the
  parameters, in the same order, in place and under ``no_grad``; each slice is cast to its
  parameter's dtype, as ``param[...] = values`` casts. Returns None.

``parameters`` is one tensor or an iterable of kiln tensors (a generator such as
``net.parameters()``), as for ``clip_grad_norm_``; another element is a KilnTypeError, and no
parameters at all in ``parameters_to_vector`` a KilnValueError (PyTorch's cat of nothing fails
too). ``vec`` must be a kiln tensor (KilnTypeError) with one dimension and exactly as many
elements as the parameters together (ShapeError), checked before any parameter is written.

Where Kiln differs: PyTorch's ``vector_to_parameters`` checks neither size (extra elements are
ignored) and replaces each parameter's ``.data`` with a view of ``vec``, so that the parameter
then shares ``vec``'s memory and takes its dtype; Kiln writes into each parameter's own memory,
so that it keeps its dtype and later changes to ``vec`` leave it alone. PyTorch iterates over a
single tensor given as ``parameters`` (its rows); Kiln takes it as one parameter.
"""

from ... import _C
from ...autograd import no_grad
from ...errors import KilnTypeError, KilnValueError, ShapeError
from . import _parameters

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters):
    """The elements of ``parameters`` (one tensor or an iterable of them), each flattened, as one
    new 1-d tensor; see kiln.nn.utils.convert_parameters's documentation."""
    owner = "parameters_to_vector"
    parameters = _parameters(owner, parameters)
    if not parameters:
        raise KilnValueError(f"{owner}: expected at least one parameter, got none")
    return _C.mint.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Copies consecutive slices of the 1-d tensor ``vec`` into ``parameters`` (one tensor or an
    iterable of them) in place, each cast to its parameter's dtype; see
    kiln.nn.utils.convert_parameters's documentation."""
    owner = "vector_to_parameters"
    if not isinstance(vec, _C.Tensor):
        raise KilnTypeError(f"{owner}: vec must be a kiln tensor, got {type(vec).__name__}")
    parameters = _parameters(owner, parameters)
    if vec.ndim != 1:
        raise ShapeError(f"{owner}: vec must be 1-d (as parameters_to_vector makes it), got shape "
                         f"{list(vec.shape)}")
    total = sum(p.numel() for p in parameters)
    if vec.numel() != total:
        raise ShapeError(f"{owner}: vec has {vec.numel()} elements, expected {total} (the "
                         f"parameters' elements together)")
    start = 0
    with no_grad():
        for p in parameters:
            p[...] = vec[start:start + p.numel()].reshape(p.shape)
            start += p.numel()
