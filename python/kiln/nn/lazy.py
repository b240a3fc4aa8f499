"""kiln.nn's lazy cells, PyTorch's: LazyLinear, LazyConv1d / 2d / 3d, LazyConvTranspose1d / 2d /
3d, LazyBatchNorm1d / 2d / 3d and LazyInstanceNorm1d / 2d / 3d, whose first call infers
``in_features`` / ``in_channels`` / ``num_features`` from its input.

    net = kiln.nn.Sequential(kiln.nn.LazyLinear(64), kiln.nn.ReLU(), kiln.nn.LazyLinear(10))
    net(kiln.mint.ones(8, 300))   # a dry run: net[0] becomes Linear(300, 64), net[2] Linear(64, 10)
    opt = kiln.optim.SGD(net.parameters(), lr=0.1)   # after the dry run (see below)

Each takes the regular class's arguments without the inferred one (``LazyLinear(out_features,
bias=True, device=None, dtype=None)``, ``LazyConv2d(out_channels, kernel_size, ...)``,
``LazyBatchNorm2d(eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
dtype=None, *, bias=True)``; ``device`` must be the CPU). As in PyTorch, LazyInstanceNorm's
``affine`` and ``track_running_stats`` default to True, unlike InstanceNorm's.

Until the first call the cell holds placeholders in the place of the tensors whose shape it does
not know: ``UninitializedParameter`` (weight, bias) and ``UninitializedBuffer`` (the running
statistics), tensors with no elements (shape [0]) of the cell's ``dtype``; ``is_lazy(t)`` tells
one, ``cell.has_uninitialized_params()`` whether a cell holds any, and the inferred size is 0 in
the repr (``LazyLinear(in_features=0, out_features=10, bias=True)``). The first call, or
``cell.initialize_parameters(input)`` without the computation, reads the size (the input's last
dimension for LazyLinear, its channel dimension for the others, unbatched inputs included), puts
Parameters and buffers of the inferred shapes in the placeholders' places, initialises them as
the regular class does (its ``reset_parameters``: LazyLinear's as Linear's), and the cell becomes
the regular class (PyTorch's ``cls_to_become``): ``type(cell)`` is then Linear, Conv2d,
BatchNorm2d, ..., and it computes as one. An input of a rank the cell cannot read the size from
is a ShapeError, raised before anything changes (PyTorch's LazyBatchNorm initializes first and
its forward raises; its LazyInstanceNorm reads an unbatched input's size from the wrong
dimension). Other errors are the regular forward's and come after the initialization, as in
PyTorch (an input of another dtype leaves an initialized cell). Inside a ``kiln.jit`` trace the
first call is a KilnValueError: the new tensors would be values of the trace; call the cell once
outside.

Kiln's tensors keep their shape for life, so placeholders are replaced, where PyTorch's change
in place (``materialize``, here a KilnNotImplementedError). What follows from that:

- Optimizers: build them after the first call, as PyTorch's documentation advises. One built
  before holds the placeholders, which the first call supersedes (kiln/nn/parameter.py): each of
  its steps then warns that they are no longer the cell's and trains nothing (PyTorch's would
  train the materialized parameters).
- ``cell.to(dtype)`` / ``double()`` before the first call (PyTorch's advice for choosing the
  dtype) makes the cell materialize in that dtype: Cell.to turns a placeholder into a
  placeholder of the new dtype.
- ``state_dict()`` before the first call holds the placeholders themselves (a placeholder's
  ``detach()`` is itself), as PyTorch's shows ``<UninitializedParameter>``.
- ``load_state_dict`` into a lazy cell (PyTorch's ``_lazy_load_hook``): each placeholder whose
  name the state dict holds is first replaced by a tensor of the value's shape (zeros), which the
  load then fills; a value that holds nothing leaves it a placeholder: a placeholder (a state
  dict of a lazy cell, Kiln's or PyTorch's) or a tensor without elements (kiln.save keeps a
  placeholder so). The cell stays lazy until its first call, which checks the input against the
  loaded shapes (a ShapeError naming the tensor), initialises the placeholders left, if any,
  keeping every other tensor's values, and sets the inferred size (PyTorch's lazy convolutions
  keep ``in_channels`` 0 then). A load that fails after that step (a missing key, a bad value)
  leaves those placeholders replaced, as in PyTorch. Loading a placeholder into a regular cell is
  a ShapeError (its shape is [0]).

Copies and pickles of a lazy cell are lazy cells; a placeholder's copy is a placeholder of its
dtype. ``LazyModuleMixin`` is the base (PyTorch's name): a lazy cell of one's own derives from it
and its regular class, sets ``cls_to_become``, and defines ``initialize_parameters(*input)``,
which puts each placeholder's tensor in place with ``self._materialize(name, shape)`` and then
initialises it.
"""

import copy
import itertools
import math

from .. import _C
from .._checks import checked_bool
from .._device import check_usable
from .._numpy import np
from ..autograd import no_grad
from ..errors import KilnNotImplementedError, KilnValueError, ShapeError
from ..mint._composite import _dims
from ._layer_arguments import SPATIAL_NAMES, checked_tensor
from .cell import Cell, _registry_of
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .extra_layers import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from .linear import Linear
from .normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d
from .parameter import Parameter, supersede

__all__ = ["LazyModuleMixin", "UninitializedParameter", "UninitializedBuffer", "is_lazy",
           "LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d",
           "LazyConvTranspose2d", "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d",
           "LazyBatchNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d"]

_mint = _C.mint


def is_lazy(tensor):
    """Whether ``tensor`` is a lazy cell's placeholder (PyTorch's ``is_lazy``): an
    UninitializedParameter or UninitializedBuffer (Cell.to converts them into placeholders)."""
    return getattr(tensor, "_uninitialized", False) is True


def _check_device(owner, device):
    if device is not None:
        check_usable(owner, device)


class _Uninitialized:
    """What the two placeholders share: no elements, a mark ``is_lazy`` reads, PyTorch's repr,
    and conversions and copies that stay placeholders."""

    def _start(self, device):
        _check_device(type(self).__name__, device)
        self._uninitialized = True

    def __repr__(self):
        return f"<{type(self).__name__}>"

    __str__ = __repr__

    def detach(self):
        # Itself, so that state_dict (which detaches) holds the placeholder, as PyTorch's does.
        return self

    def to(self, *args, **kwargs):
        """A placeholder of the dtype ``Tensor.to`` would give (this one when it is the same), so
        that Cell.to changes the dtype the cell will materialize in."""
        dtype = super().to(*args, **kwargs).dtype
        return self if dtype == self.dtype else self._twin(dtype)

    def _twin(self, dtype):
        """A placeholder of ``dtype`` with this one's requires_grad and attributes."""
        twin = type(self)(self.requires_grad, dtype=dtype)
        twin.__dict__.update(self.__dict__)
        return twin

    def __copy__(self):
        return self._twin(self.dtype)

    def __deepcopy__(self, memo):
        twin = type(self)(self.requires_grad, dtype=self.dtype)
        memo[id(self)] = twin
        twin.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return twin

    def __reduce__(self):
        return type(self), (self.requires_grad, None, self.dtype), self.__dict__

    def materialize(self, shape, device=None, dtype=None):
        """PyTorch's in-place materialization, which Kiln's tensors (of one shape for life) do
        not allow: a KilnNotImplementedError."""
        raise KilnNotImplementedError(
            f"{type(self).__name__}.materialize: a Kiln tensor keeps its shape for life, so a "
            f"placeholder cannot take one; a lazy cell puts a new tensor in its place instead "
            f"(call the cell, or its initialize_parameters; see kiln/nn/lazy.py)")


class UninitializedParameter(_Uninitialized, Parameter):
    """UninitializedParameter(requires_grad=True, device=None, dtype=None): a lazy cell's
    placeholder parameter, PyTorch's: a Parameter with no elements of ``dtype`` (default: mint's)
    until the cell puts one of the inferred shape in its place (see kiln.nn.lazy)."""

    def __init__(self, requires_grad=True, device=None, dtype=None):
        super().__init__(_mint.empty(0, dtype=dtype), requires_grad)
        self._start(device)


class UninitializedBuffer(_Uninitialized, _C.Tensor):
    """UninitializedBuffer(requires_grad=False, device=None, dtype=None): a lazy cell's
    placeholder buffer, PyTorch's: a tensor with no elements of ``dtype`` (default: mint's)
    until the cell puts one of the inferred shape in its place (see kiln.nn.lazy)."""

    def __init__(self, requires_grad=False, device=None, dtype=None):
        super().__init__(_mint.empty(0, dtype=dtype))
        self.requires_grad_(checked_bool(type(self).__name__, "requires_grad", requires_grad))
        self._start(device)


# The class names of placeholders, Kiln's and PyTorch's (told apart without importing it).
_PLACEHOLDER_NAMES = ("UninitializedParameter", "UninitializedBuffer")


def _shape_of(value):
    """The shape of a state dict's value (a tensor of any library, an array, nested lists)."""
    shape = getattr(value, "shape", None)
    return tuple(np.shape(value) if shape is None else shape)


def _load_hook(cell, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
               error_msgs):
    """A lazy cell's load_state_dict pre-hook (PyTorch's _lazy_load_hook): each placeholder whose
    name ``state_dict`` (the load's own copy) holds is replaced by a tensor of the value's shape,
    which the load then fills, unless the value holds nothing: a placeholder, Kiln's or
    PyTorch's, or a tensor with no elements (what kiln.save keeps of a placeholder). Such a value
    is swapped for the cell's placeholder, which the load then copies into itself, unchanged."""
    for name, tensor in list(itertools.chain(cell._params.items(), cell._buffers.items())):
        key = prefix + name
        if not is_lazy(tensor) or key not in state_dict:
            continue
        value = state_dict[key]
        placeholder = is_lazy(value) or type(value).__name__ in _PLACEHOLDER_NAMES
        shape = None if placeholder else _shape_of(value)
        if placeholder or math.prod(shape) == 0:
            state_dict[key] = tensor
        else:
            cell._materialize(name, shape)


class LazyModuleMixin:
    """The base of the lazy cells (PyTorch's LazyModuleMixin), first among the bases of a lazy
    cell, before its regular class; see kiln.nn.lazy for what a lazy cell does."""

    cls_to_become = None  # the regular class a cell becomes after its first call (None: stays)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The hook's id marks the cell as not yet called (an int, so copies and pickles keep it).
        handle = self._register_load_state_dict_pre_hook(_load_hook, with_module=True)
        self._lazy_load_hook_id = handle.id

    def __call__(self, *args, **kwargs):
        # Before the forward pre-hooks, as PyTorch's first hook infers the parameters.
        if "_lazy_load_hook_id" in self.__dict__:
            self._infer_parameters(args, kwargs)
        return Cell.__call__(self, *args, **kwargs)

    def _infer_parameters(self, args, kwargs):
        """The first call's initialization: ``initialize_parameters``, then the regular class."""
        kind = type(self).__name__
        if _C.jit.is_tracing():
            raise KilnValueError(f"{kind}: a lazy cell cannot infer its parameters inside a "
                                 f"kiln.jit trace (they would be values of the trace); call it "
                                 f"once outside the jitted function first")
        self.initialize_parameters(*args, **kwargs)
        if self.has_uninitialized_params():
            raise KilnValueError(f"{kind}: the cell has not been fully initialized "
                                 f"(initialize_parameters left placeholders)")
        self._load_state_dict_pre_hooks.pop(self.__dict__.pop("_lazy_load_hook_id"), None)
        if self.cls_to_become is not None:
            self.__class__ = self.cls_to_become

    def initialize_parameters(self, *args, **kwargs):
        """Infers the shapes from the input and initialises the placeholders (each lazy cell
        defines it; here a KilnNotImplementedError, as PyTorch's)."""
        raise KilnNotImplementedError(f"initialize_parameters is not implemented for "
                                      f"{type(self).__name__}")

    def has_uninitialized_params(self):
        """Whether a parameter or buffer of this cell (not of those below it) is a placeholder."""
        return any(is_lazy(t) for t in itertools.chain(self._params.values(),
                                                       self._buffers.values()))

    def _materialize(self, name, shape):
        """Puts a tensor of zeros of ``shape`` in the place of the placeholder ``name``, of its
        dtype (a Parameter with its requires_grad for a parameter); the placeholder is
        superseded (kiln/nn/parameter.py), so an optimizer holding it says why it trains
        nothing."""
        registry = _registry_of(self, name)
        old = registry[name]
        values = _mint.zeros(shape, dtype=old.dtype)
        if registry is self._params:
            registry[name] = Parameter(values, requires_grad=old.requires_grad)
            supersede(old, f"replaced by {type(self).__name__}'s shape inference as {name!r}")
        else:
            registry[name] = values


class _LazyLayer(LazyModuleMixin):
    """What Kiln's lazy cells share: the attribute ``_inferred`` names the size the input gives,
    ``_size_of(input)`` reads it (checking the input's rank) and ``_shapes(size)`` gives the
    shape of each tensor of the cell (named as the cell registers them) for that size."""

    _inferred = ""

    def reset_parameters(self):
        """The regular class's reset_parameters, once nothing is a placeholder and the size is
        known (PyTorch's: before, there is nothing to initialise)."""
        if not self.has_uninitialized_params() and getattr(self, self._inferred) != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):  # noqa: A002  (PyTorch's name)
        """Infers the size from ``input`` (the call's other arguments are not read), checks the
        tensors loaded before against it, puts tensors of the inferred shapes in the
        placeholders' places and initialises them as the regular class does, keeping the
        values of every other tensor of the cell (see kiln.nn.lazy)."""
        kind = type(self).__name__
        size = self._size_of(input)
        shapes = {name: tuple(shape) for name, shape in self._shapes(size).items()
                  if getattr(self, name) is not None}
        for name, shape in shapes.items():
            held = getattr(self, name)
            if not is_lazy(held) and tuple(held.shape) != shape:
                raise ShapeError(f"{kind}: the input has {self._inferred}={size}, so {name!r} "
                                 f"should have shape {_dims(shape)}, but it holds "
                                 f"{_dims(held.shape)} (loaded before the first call)")
        setattr(self, self._inferred, size)
        placeholders = [name for name in shapes if is_lazy(getattr(self, name))]
        if not placeholders:
            return
        with no_grad():
            kept = [(registry, name, tensor.clone())
                    for registry in (self._params, self._buffers)
                    for name, tensor in registry.items()
                    if tensor is not None and not is_lazy(tensor)]
            for name in placeholders:
                self._materialize(name, shapes[name])
            self.reset_parameters()
            for registry, name, values in kept:
                registry[name][...] = values


class LazyLinear(_LazyLayer, Linear):
    """LazyLinear(out_features, bias=True, device=None, dtype=None): a Linear whose
    ``in_features`` the first call reads from the input's last dimension (see kiln.nn.lazy)."""

    cls_to_become = Linear
    _inferred = "in_features"

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        _check_device(type(self).__name__, device)
        super().__init__(0, out_features, False, dtype)
        self.weight = UninitializedParameter(dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)

    def _size_of(self, input):  # noqa: A002
        kind = type(self).__name__
        if checked_tensor(kind, "input", input).ndim == 0:
            raise ShapeError(f"{kind}: expected an input [..., in_features] of at least one "
                             f"dimension, got a 0-d tensor")
        return input.shape[-1]

    def _shapes(self, size):
        return {"weight": (self.out_features, size), "bias": (self.out_features,)}


class _LazyConv(_LazyLayer):
    """What the lazy convolutions share: ``in_channels`` from the input's channel dimension
    (dim 0 of one sample), and the weight's shape as the regular convolution's."""

    _inferred = "in_channels"

    def _placeholders(self, bias, dtype):
        self.weight = UninitializedParameter(dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)

    def _size_of(self, input):  # noqa: A002
        kind, dims = type(self).__name__, self._dims
        if checked_tensor(kind, "input", input).ndim not in (dims + 1, dims + 2):
            sizes = SPATIAL_NAMES[dims]
            raise ShapeError(f"{kind}: expected input [N, C_in, {sizes}] or one sample [C_in, "
                             f"{sizes}], got {_dims(input.shape)}")
        return input.shape[input.ndim - dims - 1]

    def _shapes(self, size):
        if size % self.groups:
            raise KilnValueError(f"{type(self).__name__}: in_channels ({size}, from the input) "
                                 f"must be divisible by groups ({self.groups})")
        channels = ((size, self.out_channels // self.groups) if self._transposed
                    else (self.out_channels, size // self.groups))
        return {"weight": channels + self.kernel_size, "bias": (self.out_channels,)}


class _LazyConvNd(_LazyConv):
    """The lazy convolutions' constructor (PyTorch's signature)."""

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        _check_device(type(self).__name__, device)
        super().__init__(0, out_channels, kernel_size, stride, padding, dilation, groups, False,
                         padding_mode, dtype)
        self._placeholders(bias, dtype)


class _LazyConvTransposeNd(_LazyConv):
    """The lazy transposed convolutions' constructor (PyTorch's signature)."""

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                 groups=1, bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        _check_device(type(self).__name__, device)
        super().__init__(0, out_channels, kernel_size, stride, padding, output_padding, groups,
                         False, dilation, padding_mode, dtype)
        self._placeholders(bias, dtype)


class LazyConv1d(_LazyConvNd, Conv1d):
    """LazyConv1d(out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
    bias=True, padding_mode="zeros", device=None, dtype=None): a Conv1d whose ``in_channels``
    the first call reads from the input (see kiln.nn.lazy)."""

    cls_to_become = Conv1d


class LazyConv2d(_LazyConvNd, Conv2d):
    """LazyConv2d(out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
    bias=True, padding_mode="zeros", device=None, dtype=None): a Conv2d whose ``in_channels``
    the first call reads from the input (see kiln.nn.lazy)."""

    cls_to_become = Conv2d


class LazyConv3d(_LazyConvNd, Conv3d):
    """LazyConv3d(out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
    bias=True, padding_mode="zeros", device=None, dtype=None): a Conv3d whose ``in_channels``
    the first call reads from the input (see kiln.nn.lazy)."""

    cls_to_become = Conv3d


class LazyConvTranspose1d(_LazyConvTransposeNd, ConvTranspose1d):
    """LazyConvTranspose1d(out_channels, kernel_size, stride=1, padding=0, output_padding=0,
    groups=1, bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None): a
    ConvTranspose1d whose ``in_channels`` the first call reads from the input (see
    kiln.nn.lazy)."""

    cls_to_become = ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTransposeNd, ConvTranspose2d):
    """LazyConvTranspose2d(out_channels, kernel_size, stride=1, padding=0, output_padding=0,
    groups=1, bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None): a
    ConvTranspose2d whose ``in_channels`` the first call reads from the input (see
    kiln.nn.lazy)."""

    cls_to_become = ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTransposeNd, ConvTranspose3d):
    """LazyConvTranspose3d(out_channels, kernel_size, stride=1, padding=0, output_padding=0,
    groups=1, bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None): a
    ConvTranspose3d whose ``in_channels`` the first call reads from the input (see
    kiln.nn.lazy)."""

    cls_to_become = ConvTranspose3d


class _LazyNorm(_LazyLayer):
    """What LazyBatchNorm and LazyInstanceNorm share: PyTorch's _LazyNormBase constructor, and
    ``num_features`` from the input's channel dimension (``_channel_dim``) for the weight, the
    bias and the running statistics."""

    _inferred = "num_features"

    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None, *, bias=True):
        kind = type(self).__name__
        _check_device(kind, device)
        for name, flag in (("affine", affine), ("track_running_stats", track_running_stats),
                           ("bias", bias)):
            checked_bool(kind, name, flag)
        # One feature and no tensors (the regular constructor refuses 0 features); the
        # placeholders take their places below, as in PyTorch.
        super().__init__(1, eps, momentum, False, False, dtype)
        self.num_features = 0
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = UninitializedParameter(dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(dtype=dtype)
            self.running_var = UninitializedBuffer(dtype=dtype)
            self.num_batches_tracked = _mint.zeros((), dtype=_C.dtype.int64)

    def _size_of(self, input):  # noqa: A002
        kind = type(self).__name__
        if checked_tensor(kind, "input", input).ndim not in self._ranks:
            raise ShapeError(f"{kind}: expected a {self._layout} input, got {_dims(input.shape)} "
                             f"({input.ndim}-D)")
        return input.shape[self._channel_dim(input)]

    def _shapes(self, size):
        return {name: (size,) for name in ("weight", "bias", "running_mean", "running_var")}


class _LazyBatchNorm(_LazyNorm):
    def _channel_dim(self, input):  # noqa: A002
        return 1


class _LazyInstanceNorm(_LazyNorm):
    def _channel_dim(self, input):  # noqa: A002
        return input.ndim - self._ranks[0]  # dim 0 of one sample, dim 1 of a batch


class LazyBatchNorm1d(_LazyBatchNorm, BatchNorm1d):
    """LazyBatchNorm1d(eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
    device=None, dtype=None, *, bias=True): a BatchNorm1d whose ``num_features`` the first call
    reads from dim 1 of the input [N, C] or [N, C, L] (see kiln.nn.lazy)."""

    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyBatchNorm, BatchNorm2d):
    """LazyBatchNorm2d(eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
    device=None, dtype=None, *, bias=True): a BatchNorm2d whose ``num_features`` the first call
    reads from dim 1 of the input [N, C, H, W] (see kiln.nn.lazy)."""

    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyBatchNorm, BatchNorm3d):
    """LazyBatchNorm3d(eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
    device=None, dtype=None, *, bias=True): a BatchNorm3d whose ``num_features`` the first call
    reads from dim 1 of the input [N, C, D, H, W] (see kiln.nn.lazy)."""

    cls_to_become = BatchNorm3d


class LazyInstanceNorm1d(_LazyInstanceNorm, InstanceNorm1d):
    """LazyInstanceNorm1d(eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
    device=None, dtype=None, *, bias=True): an InstanceNorm1d whose ``num_features`` the first
    call reads from the channels of the input [N, C, L] or [C, L] (see kiln.nn.lazy)."""

    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyInstanceNorm, InstanceNorm2d):
    """LazyInstanceNorm2d(eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
    device=None, dtype=None, *, bias=True): an InstanceNorm2d whose ``num_features`` the first
    call reads from the channels of the input [N, C, H, W] or [C, H, W] (see kiln.nn.lazy)."""

    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyInstanceNorm, InstanceNorm3d):
    """LazyInstanceNorm3d(eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
    device=None, dtype=None, *, bias=True): an InstanceNorm3d whose ``num_features`` the first
    call reads from the channels of the input [N, C, D, H, W] or [C, D, H, W] (see
    kiln.nn.lazy)."""

    cls_to_become = InstanceNorm3d
